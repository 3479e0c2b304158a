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

#: The most processes --jobs may ask for: beyond, joblib's pool refuses the count ("Numeric literal ... is too large,
#: max is 1000000"), only once the texts have been encoded
MAX_JOBS = 1_000_000


def _usable_cpus() -> int:
    """The CPUs this process may use, not the machine's count: :func:`shared_losses.training.runtime.usable_cpus`
    (its affinity, as a Slurm job's or ``taskset``'s, within its cgroup's CPU quota, as a container's ``--cpus``).
    This module also runs where torch cannot be imported (that package imports it): there, the affinity alone."""
    try:
        from shared_losses.training.runtime import usable_cpus
    except (ImportError, OSError):
        return max(1, len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return usable_cpus()


def _senteval_order(*keys) -> np.ndarray:
    """The order SentEval puts a task's examples in before encoding and cross-validation: a
    stable sort by (token counts, label). Its folds are drawn over that order, so ours must be too
    to give the same numbers on the same embeddings."""
    return np.array(sorted(range(len(keys[0])), key=lambda i: tuple(k[i] for k in keys)), dtype=int)


def _ntok(texts: list[str]) -> list[int]:
    return [len(t.split()) for t in texts]


def _encoded(encode: Encoder, sentences: list[str], task: str) -> np.ndarray:
    """``encode(sentences)`` as a 2-d float array with one finite row per sentence; anything else is refused in
    one line naming the task and what came back (a torch tensor is taken to numpy, whole numbers to float32)."""
    out = encode(sentences)
    if hasattr(out, "detach") and hasattr(out, "cpu"):  # a torch tensor (any dtype, any device)
        out = out.detach().float().cpu().numpy()
    try:
        arr = np.asarray(out)
    except (ValueError, TypeError) as err:  # ragged rows
        raise ValueError(f"task {task}: the encoder returned {type(out).__name__} that is not an array of numbers "
                         f"({err}); it must return an array [n, d], one row per sentence") from None
    if arr.dtype.kind in "biu":
        arr = arr.astype(np.float32)
    if arr.dtype.kind != "f":
        raise ValueError(f"task {task}: the encoder returned an array of {arr.dtype} for {len(sentences)} "
                         "sentences; it must return numbers, an array [n, d] of floats")
    if arr.ndim != 2 or arr.shape[0] != len(sentences):
        raise ValueError(f"task {task}: the encoder returned shape {tuple(arr.shape)} for {len(sentences)} "
                         f"sentences; it must return [n, d] = [{len(sentences)}, d], one row per sentence")
    if arr.shape[1] == 0:
        raise ValueError(f"task {task}: the encoder returned vectors of no dimensions (shape {tuple(arr.shape)}); "
                         "it must return [n, d] with d >= 1")
    if not np.isfinite(arr).all():
        rows = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise ValueError(f"task {task}: the encoder returned NaN or infinite values in {len(rows)} of "
                         f"{len(sentences)} rows (first: sentence {rows[0]}, {sentences[rows[0]][:60]!r})")
    largest = float(np.abs(arr).max()) if arr.size else 0.0
    if largest > 1e30:  # scikit-learn's liblinear refuses them, in its words
        raise ValueError(f"task {task}: the encoder returned values as large as {largest:.3g}; the logistic "
                         "regression (scikit-learn's liblinear) takes at most 1e30: scale the vectors down")
    return arr


def _check_binary(examples, task: str, kfold: int, inner_kfold: int | None) -> None:
    classify._check_folds(np.asarray(examples[1]), kfold, task, inner_kfold or kfold)


def _check_train_test(examples, task: str, kfold: int, inner_kfold: int | None) -> None:
    classify._check_folds(np.asarray(examples["train"][-1]), kfold, task)


def _score_binary(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    texts, y = examples
    order = _senteval_order(_ntok(texts), y)
    texts, y = [texts[i] for i in order], y[order]
    return eval_kfold(_encoded(encode, texts, task), y, kfold, inner_kfold, seed, task=task), y


def _score_train_test(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    d = {}
    for s in ("train", "test"):
        texts, y = examples[s]
        order = _senteval_order(_ntok(texts), y)
        d[s] = ([texts[i] for i in order], y[order])
    res = eval_train_test(_encoded(encode, d["train"][0], task), d["train"][1], _encoded(encode, d["test"][0], task),
                          d["test"][1], kfold, seed,
                          task=task)
    return res, d["test"][1]


def _score_pair(encode: Encoder, examples, task: str, kfold: int, inner_kfold: int | None, seed: int):
    d = {}
    for s in ("train", "test"):
        a, b, y = examples[s]
        order = _senteval_order(_ntok(a), _ntok(b), y)
        d[s] = ([a[i] for i in order], [b[i] for i in order], y[order])
    feats = {s: mrpc_features(_encoded(encode, d[s][0], task), _encoded(encode, d[s][1], task))
             for s in ("train", "test")}
    res = eval_train_test(feats["train"], d["train"][2], feats["test"], d["test"][2], kfold, seed, f1=True, task=task)
    return res, d["test"][2]


@dataclass(frozen=True)
class Protocol:
    """How one kind of task is read and scored, one entry of :data:`PROTOCOLS`. ``load(root, task)``: the reader
    of this kind's files (a task may name its own, :attr:`Task.load`). ``score(encode, examples, task, kfold,
    inner_kfold, seed)``: puts the examples in SentEval's order, encodes and scores them; returns (the metrics,
    the labels of the scored examples). ``check(examples, task, kfold, inner_kfold)`` (optional): raises when the
    folds cannot be drawn on these examples, before anything is encoded. A new protocol is one entry here."""

    load: Callable[[Path, str], Any]
    score: Callable[..., tuple[dict, np.ndarray]]
    description: str
    check: Callable[..., None] | None = None


PROTOCOLS: dict[str, Protocol] = {
    "binary": Protocol(load_binary, _score_binary,
                       "outer stratified k-fold, an inner k-fold on each training part choosing C (MR, CR, SUBJ, "
                       "MPQA)", _check_binary),
    "train_test": Protocol(load_trec, _score_train_test,
                           "k-fold on the training set chooses C; refit on it, score the test set once (TREC)",
                           _check_train_test),
    "pair": Protocol(load_mrpc, _score_pair,
                     "sentence pairs as [|u - v|, u * v], then train_test's protocol; acc and F1 (MRPC)",
                     _check_train_test),
}
KINDS = PROTOCOLS.keys()  # the protocols' names (a live view: a protocol added to PROTOCOLS is a kind)


def as_encoder(model) -> Encoder:
    """What :func:`evaluate` calls: ``model.encode`` when the object has one (:func:`nlp_qt.load_encoder`'s
    encoder, a ``SentenceTransformer``), else ``model`` itself, a function ``list[str] -> [n, d]`` array."""
    method = getattr(model, "encode", None)
    if callable(method):
        return method
    if callable(model):
        return model
    raise TypeError(f"evaluate() takes a function list[str] -> [n, d] array, or an object with such an encode() "
                    f"method (nlp_qt.load_encoder, a SentenceTransformer); got {type(model).__name__}")


def _check_seed(seed) -> None:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2**32:
        raise ValueError(f"seed must be a whole number in [0, 2**32 - 1] (it seeds the folds and the logistic "
                         f"regressions), got {seed!r}")


def prepare_tasks(data: str | Path, tasks: Sequence[str] = ALL_TASKS, kfold: int = 10,
                  inner_kfold: int | None = None) -> tuple[Path, dict]:
    """Read and check every task's files before anything is encoded: (the data folder, ``{task: examples}``).
    Raises on an unknown task or kind, a missing, malformed or empty file (naming it and the line) and on folds
    that cannot be drawn (a class with fewer examples than ``kfold``), so a fault in the last task is found before
    the first one is scored. ``data="human"`` builds the human-labeled tasks asked for."""
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    for t in tasks:
        if TASKS[t].kind not in PROTOCOLS:  # never score a task with another task's protocol
            raise ValueError(f"task {t}: unknown kind {TASKS[t].kind!r} (known: {', '.join(PROTOCOLS)})")
    root = resolve_data_dir(data, tasks)
    for t in tasks:  # every missing file named before any is read
        task_files(root, t)
    examples = {}
    for t in dict.fromkeys(tasks):
        protocol = PROTOCOLS[TASKS[t].kind]
        examples[t] = (TASKS[t].load or protocol.load)(root, t)
        if protocol.check is not None:
            protocol.check(examples[t], t, kfold, inner_kfold)
    return root, examples


def evaluate(encode: Encoder, data: str | Path, tasks: Sequence[str] = ALL_TASKS, kfold: int = 10,
             inner_kfold: int | None = None, seed: int = SEED, verbose: bool = False, jobs: int = 1,
             folds: str = "current", on_task: Callable[[str, dict], None] | None = None,
             examples: dict | None = None) -> dict:
    """Run the tasks, each read and scored by its protocol; ``{task: {"acc", "devacc", "n", ...}}``. ``encode``: a
    function ``list[str] -> [n, d]`` array (numpy or torch), or an object with such an ``encode`` method
    (:func:`nlp_qt.load_encoder`'s, a ``SentenceTransformer``). Every task's files are read and checked first
    (:func:`prepare_tasks`); a task named twice is scored once. ``jobs``: logistic regressions of a C-selection
    fitted at once in threads (-1: one per CPU); the results do not depend on it. ``folds``: how the stratified
    folds are drawn, a key of :data:`~nlp_qt.senteval.classify.FOLDS` (``current``: today's scikit-learn;
    ``legacy``: scikit-learn before 0.22, SentEval's published numbers). ``on_task(task, results so far)`` is
    called after each task (the command line writes ``--output`` there, so finished tasks are kept). ``examples``:
    the tasks' examples as :func:`prepare_tasks` returned them for these ``data``, ``kfold`` and ``inner_kfold``
    (the command line reads and checks them before loading the model), so the files are not read again."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or (jobs < 1 and jobs != -1) or jobs > MAX_JOBS:
        raise ValueError(f"jobs must be a whole number in [1, {MAX_JOBS}], or -1 for one per CPU; got {jobs!r}")
    if folds not in classify.FOLDS:
        raise ValueError(f"unknown folds {folds!r}; choose from {', '.join(classify.FOLDS)}")
    _check_seed(seed)
    encode = as_encoder(encode)
    tasks = list(dict.fromkeys([tasks] if isinstance(tasks, str) else tasks))  # "MR" is one task, not M and R
    if examples is None:
        _, examples = prepare_tasks(data, tasks, kfold, inner_kfold)  # data="human" builds only the tasks asked for
    else:
        missing = [t for t in tasks if t not in examples]
        if missing:
            raise ValueError(f"examples holds no {', '.join(missing)}: pass prepare_tasks(...)'s examples for every "
                             "task evaluated, or leave examples out to read them from data")
        examples = {t: examples[t] for t in tasks}  # the caller's dict is left whole
    from tqdm.auto import tqdm

    results = {}
    for i, t in enumerate(tasks, 1):
        t0 = time.perf_counter()
        protocol = PROTOCOLS[TASKS[t].kind]
        # progress: the task, then its logistic regressions (every fold of every C, the outer folds' refits)
        fits = classify._fits(TASKS[t].kind, kfold, inner_kfold)
        # the terminal test written out, not shared_losses' bar_interval: this module also runs where torch cannot
        # be imported (scripts/senteval_side_by_side.py's runner for the official code)
        bar = tqdm(total=fits, desc=f"[{i}/{len(tasks)}] {t}: encode, then fits",
                   unit="fit", disable=not verbose, mininterval=0.5 if sys.stderr.isatty() else 30.0, leave=False)
        classify._TICK, classify._JOBS = functools.partial(bar.update, 1), _usable_cpus() if jobs == -1 else jobs
        classify._FOLDS = folds
        try:
            res, scored = protocol.score(encode, examples.pop(t), t, kfold, inner_kfold, seed)
        finally:
            classify._TICK, classify._JOBS, classify._FOLDS = None, 1, "current"
            bar.close()
        # the accuracy of always answering the most frequent class of the scored examples
        res["majority"] = float(round(100.0 * np.bincount(np.asarray(scored)).max() / len(scored), 2))
        res["seconds"] = round(time.perf_counter() - t0, 2)
        results[t] = res
        if verbose:
            print(f"{t}: {res}", file=sys.stderr)
        if on_task is not None:
            on_task(t, dict(results))
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
