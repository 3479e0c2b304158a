"""SentEval's tasks as one table (:data:`TASKS`, a :class:`Task` per row) and the readers of their files.

A new task with an existing protocol is one row of :data:`TASKS` and nothing else."""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

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
    encoding: str = "latin-1"  # of its files (SentEval's are Latin-1/ASCII; the human-labeled ones UTF-8); a
    # "latin-1" file that is valid UTF-8 is read as UTF-8 (_decode)
    source: str = "senteval"   # senteval: fetched by `download`; human: built offline by `build-human`
    positive: str = ""         # what the first (label 1) file holds, for the human-labeled tasks' manifest
    origin: str = ""           # human-labeled tasks: the shared_losses.data text set they are built from
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


class SentEvalDataError(FileNotFoundError):
    """A task's data is missing or malformed."""



def default_tasks(data) -> list[str]:
    """The tasks evaluated when none are named: the human-labeled ones for ``--data human`` (all it holds), the ones
    a ``build-human`` folder holds (its HUMAN_TASKS.json, where it holds none of SentEval's tasks), else SentEval's
    six."""
    if str(data) == "human":
        return list(HUMAN_TASKS)
    root = Path(data)
    manifest = root / "HUMAN_TASKS.json"
    if manifest.is_file() and not any((root / t).is_dir() for t in ALL_TASKS):
        import json

        try:
            built = [t for t in json.loads(manifest.read_text(encoding="utf-8")) if t in HUMAN_TASKS]
        except (ValueError, TypeError, OSError):
            built = []
        if built:
            return built
    return list(ALL_TASKS)


def is_human(task: str) -> bool:
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


def _is_utf8(encoding: str) -> bool:
    return encoding.lower().replace("-", "").replace("_", "").startswith("utf8")


def _decode(path: Path, encoding: str) -> str:
    """The text of a task file; a file that is not text (NUL or other control bytes, or not valid UTF-8 for a
    UTF-8 task) is refused by name instead of being scored."""
    raw = path.read_bytes()
    bad = sum(raw.count(bytes([c])) for c in _CONTROL)
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a byte-order mark: Windows editors' "Unicode"
        raise SentEvalDataError(f"{path} is UTF-16 (it starts with a byte-order mark); task files are UTF-8 or "
                                f"Latin-1: iconv -f utf-16 -t utf-8 converts it")
    if b"\x00" in raw or bad > max(2, len(raw) // 1000):
        raise SentEvalDataError(f"{path} is not a text file ({bad} control bytes in {len(raw)}); a task file holds "
                                "one example per line")
    if not _is_utf8(encoding):  # SentEval's Latin-1 files; a user's own in that layout are mostly UTF-8 today
        raw = raw.removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte-order mark (Windows editors) is no text
        try:  # a file that is valid UTF-8 is UTF-8 ("caf\xc3\xa9" was read as "cafÃ©"); ASCII reads alike
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass  # bytes that are not UTF-8: Latin-1, as SentEval reads its files
    try:
        return raw.decode(encoding, errors="strict" if _is_utf8(encoding) else "replace")
    except UnicodeDecodeError as err:
        raise SentEvalDataError(f"{path} is not UTF-8 text (byte {err.start}); a task file holds one example "
                                "per line") from None


def _read_lines(path: Path, encoding: str = "latin-1") -> list[str]:
    """The non-empty lines of a one-sentence-per-line task file, split as SentEval splits them (``str.splitlines``),
    stripped; a file that is not text is refused by name (:func:`_decode`)."""
    return [line.strip() for line in _decode(path, encoding).splitlines() if line.strip()]


def _numbered_lines(path: Path, encoding: str) -> list[tuple[int, str]]:
    """(line number, line) of each line of a file of labelled lines, split only at ``\\n``, ``\\r\\n`` and
    ``\\r`` (as SentEval reads TREC and MRPC, a line at a time), so a Latin-1 byte such as 0x85 inside a line
    stays in it; the numbers are the file's own, blank lines counted."""
    return list(enumerate(re.split(r"\r\n|\r|\n", _decode(path, encoding)), 1))


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
    task's ``classes``: ``{"train": (texts, labels), "test": (texts, labels)}``. A malformed line is refused with
    its file and line number, a file without examples by name."""
    out = {}
    classes = TASKS[task].classes
    for split, path in zip(("train", "test"), task_files(root, task)):
        texts, labels = [], []
        for n, line in _numbered_lines(path, TASKS[task].encoding):
            line = line.strip()
            if not line:
                continue
            head, _, rest = line.partition(" ")
            coarse = head.split(":")[0]
            if coarse not in classes or not rest.strip():
                raise SentEvalDataError(f"{path}:{n}: expected 'COARSE:fine words...' with COARSE one of "
                                        f"{', '.join(classes)}, got {line[:60]!r}")
            texts.append(rest.strip())
            labels.append(classes.index(coarse))
        if not texts:
            raise SentEvalDataError(f"task {task}: {path} holds no examples (expected lines 'COARSE:fine words...')")
        out[split] = (texts, np.array(labels, dtype=int))
    return out


def _looks_like_mrpc_row(line: str) -> bool:
    cols = line.split("\t")
    return len(cols) >= 5 and cols[0].strip() in ("0", "1") and cols[1].strip().isdigit()


def load_mrpc(root: Path, task: str = "MRPC") -> dict:
    """A train and a test file of sentence pairs in MRPC's format (a header, then ``label, id, id, sentence,
    sentence`` tab-separated, UTF-8): ``{"train": (sentences a, sentences b, labels), "test": ...}``. As SentEval,
    the first line is taken for the header and skipped (with a warning when it looks like a pair instead); a
    malformed line is refused with its file and line number, a file that is not UTF-8 or holds no pairs by name."""
    out = {}
    for split, path in zip(("train", "test"), task_files(root, task)):
        a, b, labels = [], [], []
        lines = _numbered_lines(path, TASKS[task].encoding)
        if lines and _looks_like_mrpc_row(lines[0][1]):
            warnings.warn(f"{path}: line 1 looks like a sentence pair, not MRPC's header line; it is skipped as "
                          "SentEval skips the header (add the header line to keep the pair)", stacklevel=2)
        for n, line in lines[1:]:  # header first
            if not line.strip():
                continue
            cols = line.split("\t")
            if len(cols) < 5 or cols[0].strip() not in ("0", "1"):
                raise SentEvalDataError(f"{path}:{n}: expected 5 tab-separated columns (label 0/1, id, id, "
                                        f"sentence, sentence), got {len(cols)} column(s) starting "
                                        f"{line[:40]!r}")
            labels.append(int(cols[0]))
            a.append(cols[3].strip())
            b.append(cols[4].strip())
        if not labels:
            raise SentEvalDataError(f"task {task}: {path} holds no sentence pairs (expected a header line, then "
                                    "lines 'label<TAB>id<TAB>id<TAB>sentence<TAB>sentence')")
        out[split] = (a, b, np.array(labels, dtype=int))
    return out
