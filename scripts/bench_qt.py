"""Speed of nlp_qt: training sentences/s and SentEval-protocol evaluation seconds per task.

For each model size (QT's default 620-d words / 1200-d GRUs, and a small 64 / 256 one) on the same
data (the embedded docstring corpus, nlp_qt/data/corpus_docstrings; the embedded SentEval-format
demo tasks, nlp_qt/data/senteval_demo), measures:

* training sentences/s of the `qt` objective (the baseline, measured in the same run) and of the
  `debiased` objective (tau+ = 0.01), and their ratio (debiased / qt);
* evaluation seconds per task (encoding + the SentEval protocol's logistic regressions).

    .venv/bin/python scripts/bench_qt.py [--json] [--steps 2] [--batch 400] [--sizes default small]

With --json: one JSON object per line with model_size, batch, sentences_per_s (per objective),
ratio_debiased_vs_qt, eval_s_per_task.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import torch


from nlp_qt.corpus import contiguous_batches, iter_corpus
from nlp_qt.model import ModelConfig, QuickThought
from nlp_qt.objectives import compute_loss
from nlp_qt.senteval import evaluate, make_qt_encoder
from nlp_qt.vocab import Vocab

ROOT = Path(__file__).resolve().parents[1]

SIZES = {"default": (620, 1200), "small": (64, 256)}


def train_rate(model, vocab, batches, objective, tau_plus, steps, warmup=1):
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    n, t = 0, 0.0
    for k, b in enumerate(itertools.islice(itertools.cycle(batches), warmup + steps)):
        t0 = time.perf_counter()
        ids, lengths = vocab.batch(b.sentences)
        u, v = model(ids, lengths)
        loss = compute_loss(u, v, torch.tensor(b.doc_ids), None, objective, tau_plus)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            torch.nn.utils.clip_grad_norm_([p], 5.0)
        opt.step()
        if k >= warmup:
            t += time.perf_counter() - t0
            n += len(b.sentences)
    return n / t


def main() -> None:
    from shared_losses.training.cli import ArgumentParser, HelpFormatter, examples_from, number_in

    p = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=examples_from(__doc__),
                       formatter_class=HelpFormatter)
    p.add_argument("--json", action="store_true", help="one JSON object per model size and line")
    p.add_argument("--steps", type=number_in(1), default=2, help="timed training steps per objective (after 1 warm-up)")
    p.add_argument("--batch", type=number_in(2), default=400, help="sentences per batch (QT: 400)")
    p.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES),
                   help="model sizes: default = QT's 620-d words / 1200-d GRUs, small = 64 / 256")
    p.add_argument("--tasks", nargs="+", default=["MR", "MRPC"], help="SentEval tasks to time")
    p.add_argument("--kfold", type=number_in(2), default=3, help="SentEval folds (10 in the real protocol)")
    p.add_argument("--corpus", default=str(ROOT / "nlp_qt/data/corpus_docstrings"),
                   help="training corpus (as nlp_qt.train --corpus)")
    p.add_argument("--data", default=str(ROOT / "nlp_qt/data/senteval_demo"), help="SentEval-format data folder")
    a = p.parse_args()
    torch.manual_seed(0)
    sents = list(iter_corpus(a.corpus))
    vocab = Vocab.build((s for _, s in sents), 50000, 50)
    batches = list(contiguous_batches(iter(sents), a.batch))
    if not batches:
        raise SystemExit(f"corpus has fewer than {a.batch} sentences")
    for size in a.sizes:
        wd, ed = SIZES[size]
        model = QuickThought(ModelConfig(len(vocab), wd, ed))
        rates = {obj: train_rate(model, vocab, batches, obj, tau, a.steps)
                 for obj, tau in (("qt", 0.0), ("debiased", 0.01))}
        t0 = time.perf_counter()
        res = evaluate(make_qt_encoder(model, vocab), a.data, a.tasks, kfold=a.kfold)
        row = {
            "model_size": f"{size} ({wd}-d words, {ed}-d GRU per encoder)", "batch": a.batch,
            "sentences_per_s": {k: round(v, 1) for k, v in rates.items()},
            "ratio_debiased_vs_qt": round(rates["debiased"] / rates["qt"], 3),
            "eval_s_per_task": {t: r["seconds"] for t, r in res.items()},
            "eval_total_s": round(time.perf_counter() - t0, 1), "kfold": a.kfold, "steps": a.steps,
            "threads": torch.get_num_threads(),
        }
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"{row['model_size']}, batch {a.batch}: train {row['sentences_per_s']} sentences/s "
                  f"(debiased/qt = {row['ratio_debiased_vs_qt']}); eval s/task {row['eval_s_per_task']}", flush=True)


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
