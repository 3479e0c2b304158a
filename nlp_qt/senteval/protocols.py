"""The evaluation: every protocol one entry of :data:`PROTOCOLS` (how a kind of task is read, put in SentEval's
order, encoded and scored), :func:`evaluate` over tasks, and :func:`format_table` (DCL Table 2's layout)."""

from __future__ import annotations

import functools
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from . import classify
from .classify import SEED, eval_kfold, eval_train_test, mrpc_features
from .encoders import Encoder
from .human import resolve_data_dir
from .tasks import ALL_TASKS, TASKS, load_binary, load_mrpc, load_trec, task_files


def _senteval_order(*keys) -> np.ndarray:
    """The order SentEval puts a task's examples in before encoding and cross-validation: a
    stable sort by (token counts, label). Its folds are drawn over that order, so ours must be too
    to give the same numbers on the same embeddings."""
    return np.array(sorted(range(len(keys[0])), key=lambda i: tuple(k[i] for k in keys)), dtype=int)


def _ntok(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def _score_binary(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    texts, y = examples
    order = _senteval_order(_ntok(texts), y)
    texts, y = [texts[i] for i in order], y[order]
    return eval_kfold(encode(texts), y, kfold, inner_kfold, seed, task=task), y


def _score_train_test(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    d = {}
    for s in ("train", "test"):
        texts, y = examples[s]
        order = _senteval_order(_ntok(texts), y)
        d[s] = ([texts[i] for i in order], y[order])
    res = eval_train_test(encode(d["train"][0]), d["train"][1], encode(d["test"][0]), d["test"][1], kfold, seed,
                          task=task)
    return res, d["test"][1]


def _score_pair(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    d = {}
    for s in ("train", "test"):
        a, b, y = examples[s]
        order = _senteval_order(_ntok(a), _ntok(b), y)
        d[s] = ([a[i] for i in order], [b[i] for i in order], y[order])
    feats = {s: mrpc_features(encode(d[s][0]), encode(d[s][1])) for s in ("train", "test")}
    res = eval_train_test(feats["train"], d["train"][2], feats["test"], d["test"][2], kfold, seed, f1=True, task=task)
    return res, d["test"][2]


@dataclass(frozen=True)
class Protocol:
    """How one kind of task is read and scored, one entry of :data:`PROTOCOLS`. ``load(root, task)``: the reader
    of this kind's files (a task may name its own, :attr:`Task.load`). ``score(encode, examples, task, kfold,
    inner_kfold, seed)``: puts the examples in SentEval's order, encodes and scores them; returns (the metrics,
    the labels of the scored examples). A new protocol is one entry here."""

    load: Callable[[Path, str], Any]
    score: Callable[..., tuple[dict, np.ndarray]]
    description: str


PROTOCOLS: dict[str, Protocol] = {
    "binary": Protocol(load_binary, _score_binary,
                       "outer stratified k-fold, an inner k-fold on each training part choosing C (MR, CR, SUBJ, "
                       "MPQA)"),
    "train_test": Protocol(load_trec, _score_train_test,
                           "k-fold on the training set chooses C; refit on it, score the test set once (TREC)"),
    "pair": Protocol(load_mrpc, _score_pair,
                     "sentence pairs as [|u - v|, u * v], then train_test's protocol; acc and F1 (MRPC)"),
}
KINDS = PROTOCOLS.keys()  # the protocols' names (a live view: a protocol added to PROTOCOLS is a kind)


def evaluate(encode: Encoder, data: str | Path, tasks: Sequence[str] = ALL_TASKS, kfold: int = 10,
             inner_kfold: int | None = None, seed: int = SEED, verbose: bool = False, jobs: int = 1,
             folds: str = "current") -> dict:
    """Run the tasks, each read and scored by its protocol; ``{task: {"acc", "devacc", "n", ...}}``. ``jobs``:
    logistic regressions of a C-selection fitted at once in threads (-1: one per CPU); the results do not depend
    on it. ``folds``: how the stratified folds are drawn, a key of :data:`~nlp_qt.senteval.classify.FOLDS`
    (``current``: today's scikit-learn; ``legacy``: scikit-learn before 0.22, SentEval's published numbers)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or (jobs < 1 and jobs != -1):
        raise ValueError(f"jobs must be a whole number >= 1, or -1 for one per CPU; got {jobs!r}")
    if folds not in classify.FOLDS:
        raise ValueError(f"unknown folds {folds!r}; choose from {', '.join(classify.FOLDS)}")
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    root = resolve_data_dir(data, tasks)  # data="human" builds only the tasks asked for
    for t in tasks:  # fail before spending time on encoding
        if TASKS[t].kind not in PROTOCOLS:  # never score a task with another task's protocol
            raise ValueError(f"task {t}: unknown kind {TASKS[t].kind!r} (known: {', '.join(PROTOCOLS)})")
        task_files(root, t)
    from tqdm import tqdm

    results = {}
    for i, t in enumerate(tasks, 1):
        t0 = time.perf_counter()
        protocol = PROTOCOLS[TASKS[t].kind]
        examples = (TASKS[t].load or protocol.load)(root, t)
        # progress: the task, then its logistic regressions (every fold of every C, the outer folds' refits)
        fits = classify._fits(TASKS[t].kind, kfold, inner_kfold)
        bar = tqdm(total=fits, desc=f"[{i}/{len(tasks)}] {t}: encode, then fits",
                   unit="fit", disable=not verbose, mininterval=0.5 if sys.stderr.isatty() else 30.0, leave=False)
        classify._TICK, classify._JOBS = functools.partial(bar.update, 1), (os.cpu_count() or 1) if jobs == -1 else jobs
        classify._FOLDS = folds
        try:
            res, scored = protocol.score(encode, examples, t, kfold, inner_kfold, seed)
        finally:
            classify._TICK, classify._JOBS, classify._FOLDS = None, 1, "current"
            bar.close()
        # the accuracy of always answering the most frequent class of the scored examples
        res["majority"] = float(round(100.0 * np.bincount(np.asarray(scored)).max() / len(scored), 2))
        res["seconds"] = round(time.perf_counter() - t0, 2)
        results[t] = res
        if verbose:
            print(f"{t}: {res}", file=sys.stderr)
    return results


# DCL Table 2's columns: (header, task, metric)
TABLE2_COLUMNS = (("MR", "MR", "acc"), ("CR", "CR", "acc"), ("SUBJ", "SUBJ", "acc"), ("MPQA", "MPQA", "acc"),
                  ("TREC", "TREC", "acc"), ("MSRP acc", "MRPC", "acc"), ("MSRP F1", "MRPC", "f1"))


def format_table(results: dict, name: str = "model") -> str:
    """Markdown table: DCL Table 2's layout (MR CR SUBJ MPQA TREC MSRP acc/F1) for SentEval's tasks, then
    any other task evaluated (accuracy)."""
    cols = list(TABLE2_COLUMNS) if any(t in results for t in ALL_TASKS) else []
    cols += [(t, t, "acc") for t in results if t not in ALL_TASKS]

    def cell(task, metric):
        r = results.get(task)
        return "-" if r is None else f"{r[metric]:.2f}"

    head = "| model | " + " | ".join(c[0] for c in cols) + " |\n|---|" + "---|" * len(cols)
    return head + "\n| " + name + " | " + " | ".join(cell(task, metric) for _, task, metric in cols) + " |"
