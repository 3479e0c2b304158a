"""DCL Table 2 reproduction: quick-thought with the biased (QT) and debiased objectives.

Trains `qt` and `debiased` with tau+ in --tau-plus (default 0.005 0.01) for each seed (default 3
seeds), evaluates each model with the SentEval protocol, and prints the mean (and std) over seeds
in Table 2's layout next to the paper's numbers. Runs are resumable: interrupted trainings resume
from their checkpoints; a finished evaluation is reused only when the training configuration,
--data and --kfold are the same and it covers --tasks (a longer --max-steps or --epochs continues
the training and evaluates again).

Paper setting (needs a GPU and BookCorpus):
    .venv/bin/python scripts/qt_table2.py --corpus hf:bookcorpus --data data/downstream --out runs/table2
Quick CPU check on the embedded data (stand-in tasks; NOT comparable with the paper):
    .venv/bin/python scripts/qt_table2.py --corpus nlp_qt/data/corpus_docstrings --data nlp_qt/data/senteval_demo \
        --tasks MR CR TREC MRPC --epochs 2 --batch-size 100 --word-dim 64 --encoder-dim 256 --lr 2e-3 --kfold 5
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from nlp_qt.config import Config  # noqa: E402
from nlp_qt.senteval import ALL_TASKS, evaluate, load_encoder  # noqa: E402
from nlp_qt.train import train  # noqa: E402
from shared_losses.runtime import write_json_atomic  # noqa: E402

PAPER = {
    "biased (QT)": [76.8, 81.3, 86.6, 93.4, 89.8, 73.6, 81.8],
    "debiased τ⁺=0.005": [76.5, 81.5, 86.6, 93.6, 89.1, 74.2, 82.3],
    "debiased τ⁺=0.01": [76.2, 82.9, 86.9, 93.7, 89.1, 74.7, 82.7],
}
COLS = ["MR", "CR", "SUBJ", "MPQA", "TREC", "MSRP acc", "MSRP F1"]


def metric(res: dict, col: str):
    if col.startswith("MSRP"):
        r = res.get("MRPC")
        return None if r is None else r["acc" if col.endswith("acc") else "f1"]
    r = res.get(col)
    return None if r is None else r["acc"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--corpus", required=True,
                   help="training corpus, as nlp_qt.train --corpus (the paper: hf:bookcorpus)")
    p.add_argument("--data", required=True, help="SentEval data/downstream folder")
    p.add_argument("--out", default="runs/qt_table2",
                   help="sweep folder (one run folder per objective, tau+ and seed; table2.md, table2.json)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds per objective")
    p.add_argument("--tau-plus", type=float, nargs="+", default=[0.005, 0.01], help="tau+ values of the debiased runs")
    p.add_argument("--tasks", nargs="+", default=list(ALL_TASKS), choices=ALL_TASKS, help="SentEval tasks")
    p.add_argument("--kfold", type=int, default=10, help="SentEval folds (as nlp_qt.senteval --kfold)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the corpus per run")
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop each run after this many optimiser steps (None: no limit)")
    p.add_argument("--batch-size", type=int, default=400, help="consecutive sentences per batch")
    p.add_argument("--word-dim", type=int, default=620, help="word embedding size")
    p.add_argument("--encoder-dim", type=int, default=1200, help="sentence vector size of each encoder")
    p.add_argument("--vocab-size", type=int, default=50000, help="vocabulary size")
    p.add_argument("--lr", type=float, default=5e-4, help="Adam learning rate")
    p.add_argument("--device", default="cpu", help="device for encoding during evaluation")
    a = p.parse_args()
    out = Path(a.out)
    variants = [("biased (QT)", "qt", 0.0)] + [(f"debiased τ⁺={t:g}", "debiased", t) for t in a.tau_plus]
    table = {}
    for name, objective, tau in variants:
        per_seed = []
        for seed in a.seeds:
            run = out / f"{objective}_tau{tau:g}_seed{seed}"
            done = run / "senteval.json"
            cfg = Config(corpus=a.corpus, output_dir=str(run), objective=objective, tau_plus=tau, seed=seed,
                         epochs=a.epochs, max_steps=a.max_steps, batch_size=a.batch_size, word_dim=a.word_dim,
                         encoder_dim=a.encoder_dim, vocab_size=a.vocab_size, lr=a.lr, resume=True)
            # what the cached evaluation must have been made with to be reused
            key = {"config": dataclasses.asdict(cfg), "kfold": a.kfold, "data": str(Path(a.data).resolve())}
            cached = json.loads(done.read_text()) if done.exists() else {}
            if {k: cached.get(k) for k in key} != key or not set(a.tasks) <= set(cached.get("results", {})):
                train(cfg)  # continues a run already there (a finished one is left as it is)
                encode, _ = load_encoder(str(run / "model"), a.device)
                res = evaluate(encode, a.data, a.tasks, kfold=a.kfold)
                write_json_atomic(done, {"results": res, "tasks": a.tasks, **key})
            per_seed.append(json.loads(done.read_text())["results"])
        table[name] = per_seed
    summary = {}
    lines = ["| objective | " + " | ".join(COLS) + " |", "|---|" + "---|" * len(COLS)]
    for name, per_seed in table.items():
        cells, summary[name] = [], {}
        for c in COLS:
            vals = [metric(r, c) for r in per_seed]
            if any(v is None for v in vals):
                cells.append("-")
                continue
            m, s = float(np.mean(vals)), float(np.std(vals))
            summary[name][c] = {"mean": round(m, 2), "std": round(s, 2), "seeds": vals}
            cells.append(f"{m:.1f} ± {s:.1f}")
        lines.append(f"| {name} (ours, {len(per_seed)} seeds) | " + " | ".join(cells) + " |")
    for name, vals in PAPER.items():
        if name in table:
            lines.append(f"| {name} (paper) | " + " | ".join(f"{v:.1f}" for v in vals) + " |")
    text = "\n".join(lines)
    print(text)
    write_json_atomic(out / "table2.json", {"args": vars(a), "summary": summary})
    (out / "table2.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
