"""Few-shot data: the training and evaluation split of a run (a named text set of
:mod:`shared_losses.data` or local files), users' PU files and unlabelled texts, and the few-shot sample.

Every loader returns ``(texts, labels)`` with labels in {0, 1} (1 = the positive class).
"""

from __future__ import annotations

import functools
import gzip
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from shared_losses.data import (RECORD_SUFFIXES, TEXT_SETS, DataError, LabelRule, hub_split_names, is_empty,
                                is_saved_dataset, label_values, load_text_set, positive_text, read_hub, read_local,
                                read_records, reading_text)


def is_hub(name) -> bool:
    """A hub dataset given as ``hf:NAME`` or ``hf:NAME:CONFIG`` (:func:`shared_losses.data.hub_spec`)."""
    return isinstance(name, str) and name.startswith("hf:")


#: the splits of a hub --dataset that can be its evaluation split when no --eval-file is given, in this order
HUB_EVAL_SPLITS = ("validation", "test")


@functools.lru_cache(maxsize=8)
def _hub_labeled(source: str, split: str, text_column: str, label_column: str):
    return read_hub(source, split, text_column, label_column)


def hub_eval_split(cfg) -> str | None:
    """The split of a hub --dataset that a run without --eval-file is scored on: the first of
    :data:`HUB_EVAL_SPLITS` the dataset has whose labels are not hidden (GLUE's test split holds -1 only), or None
    (a held-out part of its train split then, as for one local file)."""
    return _hub_eval_split(cfg.dataset, cfg.text_column, cfg.label_column)


@functools.lru_cache(maxsize=8)
def _hub_eval_split(source: str, text_column: str, label_column: str) -> str | None:
    names = hub_split_names(source)
    for split in HUB_EVAL_SPLITS:
        if split in names:
            _, raw = _hub_labeled(source, split, text_column, label_column)
            if any(str(v).strip() not in ("-1", "") for v in raw):
                return split
    return None


def load_splits(cfg):
    """(train_texts, train_labels, eval_texts, eval_labels) for a FewShotConfig."""
    if cfg.dataset in TEXT_SETS:
        if getattr(cfg, "label_map", None) is not None:
            raise DataError(f"--label-map is for the label column of your own files; --dataset {cfg.dataset} has its "
                            f"own two classes ({' / '.join(TEXT_SETS[cfg.dataset].classes)}): drop --label-map")
        return load_text_set(cfg.dataset)
    if is_hub(cfg.eval_file):
        raise DataError(f"--eval-file {cfg.eval_file}: --eval-file takes a local file; a hub --dataset is scored on "
                        f"its own {' or '.join(HUB_EVAL_SPLITS)} split (pass --dataset {cfg.eval_file})")
    hub = is_hub(cfg.dataset)
    if not hub and not Path(cfg.dataset).exists():  # checked first: a mistyped name must not ask for --eval-file
        raise FileNotFoundError(f"--dataset {cfg.dataset!r} is neither a named dataset ({', '.join(TEXT_SETS)}), "
                                "a hub dataset (hf:NAME or hf:NAME:CONFIG) nor an existing file")
    rule = label_rule(cfg)
    train_x, train_raw = read_labeled(cfg.dataset, cfg, "--dataset")
    kept, train_y = rule.apply(train_raw, f"--dataset {cfg.dataset}")
    note = rule.describe(train_raw, train_y)
    if note:
        print(f"{cfg.dataset}: {note}")
    eval_split = hub_eval_split(cfg) if hub and cfg.eval_file is None else None
    if cfg.eval_file is None and eval_split is None:  # one file: hold out a stratified evaluation split of it
        split = held_out_split([train_x[i] for i in kept], train_y, cfg.eval_fraction, cfg.dataset)
        warn_overlap(split[0], split[2], f"--dataset {cfg.dataset}'s training part",
                     "its held-out evaluation split (texts repeated in the file)")
        return split
    if eval_split is not None:  # the hub dataset's own labeled evaluation split
        eval_x, eval_raw = _hub_labeled(cfg.dataset, eval_split, cfg.text_column, cfg.label_column)
        train_what, eval_what, known_from = (f"--dataset {cfg.dataset}'s train split", f"its {eval_split} split",
                                             "its train split")
        applied_to = f"--dataset {cfg.dataset} ({eval_split} split)"
    else:
        eval_x, eval_raw = read_labeled(cfg.eval_file, cfg, "--eval-file")
        train_what, eval_what, known_from = (f"--dataset {cfg.dataset}", f"--eval-file {cfg.eval_file}",
                                             f"the training file {cfg.dataset}")
        applied_to = eval_what
    # The evaluation split gets the training data's rule. Its values must be the training data's (it may
    # hold one class only): a value the training data lacks would silently count as negative; with
    # --label-map the map says where every value goes.
    kept_eval, eval_y = rule.apply(eval_raw, applied_to, known=label_values(train_raw), known_from=known_from)
    train_x, eval_x = [train_x[i] for i in kept], [eval_x[i] for i in kept_eval]
    if eval_split is not None:
        print(f"{cfg.dataset}: training pool from its train split ({len(train_y)} examples), evaluation on its "
              f"{eval_split} split ({len(eval_y)})")
    warn_overlap(train_x, eval_x, train_what, eval_what)
    return train_x, train_y, eval_x, eval_y


def warn_overlap(train_x, eval_x, train_what: str, eval_what: str, *, kind: str = "texts", key=None,
                 compared: str = "") -> int:
    """Warn when examples of the evaluation split also stand in the training pool: the few-shot sample may draw them,
    and a score on examples trained on overstates the method. Texts are compared after stripping spaces; ``key``
    maps an example to what is compared otherwise (images: a digest of their pixels, ``compared`` then says so in the
    warning). Returns the count."""
    if key is None:
        def key(t):
            return str(t).strip()
    pool = {key(t) for t in train_x}
    shared = sum(key(t) in pool for t in eval_x)
    if shared:
        warnings.warn(f"{shared} of the {len(eval_x)} evaluation {kind} ({eval_what}) also stand in the training pool "
                      f"({train_what}){compared}: the run may train on {kind} it is scored on, which overstates its "
                      "accuracy; remove them from one side", stacklevel=3)
    return shared


def check_pu_overlap(positives, unlabeled, positive_file, unlabeled_file, *, kind: str = "texts", key=None,
                     compared: str = "") -> None:
    """PU data from files: refuse an unlabeled file made only of the positive file's examples, and warn about those
    it shares with it (a copy of a labeled positive among the unlabeled is usually a mistake, and it biases the prior
    estimate). ``key``, ``kind`` and ``compared`` as in :func:`warn_overlap` (images: a digest of their pixels, with
    ``compared`` ", pixel for pixel")."""
    if key is None:
        def key(t):
            return t
    seen = {key(t) for t in positives}
    shared = sum(key(t) in seen for t in unlabeled)
    if shared == len(unlabeled):
        raise DataError(f"every {kind[:-1]} of --unlabeled-file {unlabeled_file} ({len(unlabeled)}) is also in "
                        f"--positive-file {positive_file}{compared}: the unlabeled {kind} must be a sample of the data "
                        "(positives and negatives) besides the labeled positives")
    if shared:
        warnings.warn(f"{shared} of the {len(unlabeled)} {kind} of --unlabeled-file {unlabeled_file} are also in "
                      f"--positive-file {positive_file}{compared}: a copy of a labeled positive among the unlabeled "
                      f"{kind} is usually a mistake, and it biases the prior estimate (remove them unless they are "
                      f"really unlabeled {kind})", stacklevel=3)


#: The evaluation split held out of a single --dataset file is a fixed draw (not --seed): every seed and every
#: method is scored on the same rows.
EVAL_SEED = 20261127


def held_out_split(texts: list, labels: list, fraction: float, source: str):
    """(train_x, train_y, eval_x, eval_y): ``fraction`` of each class of one labeled file held out as the evaluation
    split (a fixed draw, :data:`EVAL_SEED`; file order kept in both parts), as scikit-learn's stratified
    ``train_test_split`` would; a class too small to give both parts an example is refused, naming it."""
    from .images import stratified_split

    y = np.asarray(labels)
    for c in (0, 1):
        n = int((y == c).sum())
        if 0 < n and (int(round(fraction * n)) < 1 or n - int(round(fraction * n)) < 1):
            raise DataError(f"{source}: class {c} has {n} example(s): too few to hold {fraction:g} of them out as the "
                            "evaluation split and keep some to train on; pass --eval-file, or a larger --eval-fraction "
                            "or file")
    held, rest = stratified_split(y, (fraction,), EVAL_SEED)
    print(f"{source}: no --eval-file; {len(held)} of its {len(y)} examples ({fraction:.0%} of each class, a fixed "
          "draw) held out as the evaluation split")
    return ([texts[i] for i in rest], y[rest].tolist(), [texts[i] for i in held], y[held].tolist())


def label_rule(cfg) -> LabelRule:
    """How a run's label column becomes {0, 1}: --label-map, else --positive-label (one value against the rest)."""
    return LabelRule.of(cfg.positive_label, getattr(cfg, "label_map", None))


def class_names(cfg) -> tuple[str, str]:
    """(name of label 0, name of label 1) for a run's exported model. Label 1 is --positive-label as the data
    spells it (a named data set: its positive class; --label-map: the values it sends to 1, joined by ``/``);
    label 0 is the other value of the training file's labels (--label-map: the values sent to 0), or
    ``not <positive>`` when the data does not name it: setting ``pu`` (the model tells positive from not
    positive), one value against several, or a training file that cannot be read any more."""
    if cfg.dataset in TEXT_SETS and getattr(cfg, "positive_file", None) is None:
        neg, pos = TEXT_SETS[cfg.dataset].classes
    else:
        raw = []
        if cfg.setting != "pu" and (is_hub(cfg.dataset) or Path(cfg.dataset).exists()):
            try:
                with warnings.catch_warnings():  # the file's warnings were shown when the run read it
                    warnings.simplefilter("ignore")
                    _, raw = read_labeled(cfg.dataset, cfg, "--dataset")
            except (ValueError, OSError):
                raw = []
        neg, pos = label_rule(cfg).names(raw)
    if cfg.setting == "pu" or neg is None or neg == pos:
        neg = f"not {pos}"
    return neg, pos


def read_labeled(path: str, cfg, option: str):
    """(texts, raw label values) of a labeled file given as ``option`` (--dataset, --eval-file): its errors name the
    option, so a bad evaluation file is never taken for a bad training file."""
    try:
        if is_hub(path):  # a hub dataset: its train split (an evaluation split: hub_eval_split)
            return _hub_labeled(path, "train", cfg.text_column, cfg.label_column)
        return read_local(path, cfg.text_column, cfg.label_column)
    except (DataError, FileNotFoundError) as err:
        raise type(err)(f"{option}: {err}") from None


#: the files of texts without labels (:func:`read_rows`): .txt, and the data files the training reads
TEXT_SUFFIXES = (".txt", *RECORD_SUFFIXES)


def read_rows(path: str, text_column: str = "text", what: str = "input file") -> tuple[list, list[dict]]:
    """(texts, others): the rows of a file of texts without labels, in file order. ``.txt``: one text per line.
    Else a data file as the training reads it (:func:`shared_losses.data.read_records`: .csv / .tsv with a header
    row, .jsonl / .json, each also .gz, or .parquet) with the column ``text_column``; a .jsonl line may also be
    one JSON string. ``texts[i]`` is None where a row's text is empty (a blank line; a missing, null, NaN or blank
    cell), ``others[i]`` the row's other columns ({} for .txt). Errors are one line naming the file and what is
    wrong."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"{what} not found: {p}")
    if p.is_dir() and not is_saved_dataset(p):
        raise DataError(f"{what} {p} is a folder; pass one file ({', '.join(TEXT_SUFFIXES)}, or .gz) or a folder "
                        "written by datasets' save_to_disk")
    if p.name.lower().endswith((".txt", ".txt.gz")):
        with reading_text(p), (gzip.open if p.suffix.lower() == ".gz" else open)(p, "rt", encoding="utf-8-sig") as fh:
            lines = [line.rstrip("\r\n") for line in fh]
        return [t if t.strip() else None for t in lines], [{} for _ in lines]
    try:
        records = read_records(p, (text_column,), "--text-column", strings_as=text_column, only=False)
    except DataError as err:
        raise DataError(f"{what} {str(err).replace('; use .tsv', '; use .txt, .tsv')}") from None
    texts = [None if is_empty(r.get(text_column)) else str(r[text_column]) for r in records]
    return texts, [{k: v for k, v in r.items() if k != text_column} for r in records]


def read_texts(path: str, text_column: str = "text", what: str = "input file") -> list[str]:
    """The non-empty texts of a file without labels (:func:`read_rows`); the empty ones skipped are counted in a
    warning."""
    texts = read_rows(path, text_column, what)[0]
    kept = [t for t in texts if t is not None]
    if not kept:
        raise DataError(f"{what} {path}: no texts in it")
    if len(kept) < len(texts):
        warnings.warn(f"{what} {path}: skipped {len(texts) - len(kept)} of {len(texts)} "
                      f"{'lines' if path.lower().endswith(('.txt', '.txt.gz')) else 'rows'} with an empty text",
                      stacklevel=2)
    return kept


def load_pu_files(cfg):
    """PU data as users have it: (train_x, train_y, eval_x, eval_y, sample). train_x holds the
    --positive-file texts (label 1, the labeled set) then the --unlabeled-file texts (label -1: unknown,
    never read as a class); every row is used. The evaluation split is the labeled --eval-file, or empty."""
    from .pu import MIN_UNLABELED

    if Path(cfg.positive_file).is_file() and Path(cfg.unlabeled_file).is_file() and \
            Path(cfg.positive_file).samefile(cfg.unlabeled_file):
        raise DataError(f"--positive-file and --unlabeled-file are the same file ({cfg.unlabeled_file}): the unlabeled "
                        "texts must be other texts than the labeled positives (a sample of the data, positives and "
                        "negatives, without labels)")
    pos = read_texts(cfg.positive_file, cfg.text_column, "--positive-file")
    unl = read_texts(cfg.unlabeled_file, cfg.text_column, "--unlabeled-file")
    if len(unl) < MIN_UNLABELED:
        raise DataError(f"--unlabeled-file {cfg.unlabeled_file} holds {len(unl)} text; the PU probes standardise the "
                        f"features with the unlabeled texts' spread and the prior estimate needs them too: give at "
                        f"least {MIN_UNLABELED}")
    check_pu_overlap(pos, unl, cfg.positive_file, cfg.unlabeled_file)
    eval_x, eval_y = [], []
    if cfg.eval_file is not None:
        eval_x, raw = read_labeled(cfg.eval_file, cfg, "--eval-file")
        rule, source = label_rule(cfg), f"--eval-file {cfg.eval_file}"
        values = label_values(raw)
        known = None
        if rule.mapping is None and len(values) == 1 and positive_text(cfg.positive_label, raw) not in values:
            # one class, and not the positive one: an evaluation file of negatives only (no training file to compare)
            known = values
            warnings.warn(f"{source}: every row has the label {values[0]!r}, not --positive-label "
                          f"{cfg.positive_label!r}: all {len(raw)} rows are scored as the negative class", stacklevel=2)
        kept, eval_y = rule.apply(raw, source, known=known, known_from="the evaluation file",
                                  need_both=False)  # may hold one class
        eval_x = [eval_x[i] for i in kept]
        warn_overlap(pos + unl, eval_x, f"--positive-file {cfg.positive_file} and --unlabeled-file "
                     f"{cfg.unlabeled_file}", f"--eval-file {cfg.eval_file}")
    sample = FewShotSample(np.arange(len(pos)), np.arange(len(pos), len(pos) + len(unl)))
    return pos + unl, [1] * len(pos) + [-1] * len(unl), eval_x, eval_y, sample


#: What each part of a text run's data fingerprint holds, for the refusal that names the parts that changed.
FINGERPRINT_PARTS = {"labeled": "the labeled examples", "unlabeled": "the unlabeled examples",
                     "eval": "the evaluation split"}


def data_fingerprints(train_x, train_y, eval_x, eval_y, sample: "FewShotSample") -> tuple[str, dict]:
    """SHA-256 of what a run learns and is scored on, whole and by part: the drawn labeled examples (text and
    label), the drawn unlabeled ones (text and hidden label) and the evaluation split, in order. sample.json records
    both (``data_sha256`` and ``data_sha256_parts``: ``labeled``, ``unlabeled``, ``eval``), so a resume or an export
    on data that changed (a file edited, reordered or replaced: the same indices, other examples) is refused instead
    of going on with other examples, and the refusal can say which part changed. The whole hash is that of the
    parts' JSON object, as it has been since runs first recorded it."""
    import hashlib
    import json

    y = np.asarray(train_y).tolist()
    parts = {"labeled": [[train_x[i], y[i]] for i in sample.labeled.tolist()],
             "unlabeled": [[train_x[i], y[i]] for i in sample.unlabeled.tolist()],
             "eval": [[x, int(v)] for x, v in zip(eval_x, np.asarray(eval_y).tolist())]}

    def sha(value) -> str:
        return hashlib.sha256(json.dumps(value, ensure_ascii=False, default=str).encode()).hexdigest()

    return sha(parts), {name: sha(part) for name, part in parts.items()}


def check_same_data(recorded: dict, sample: "FewShotSample", fingerprint: str, where, what: str,
                    parts: dict | None = None) -> None:
    """Refuse, in one line, data that draw other examples than sample.json ``recorded`` (its indices, and its
    ``data_sha256`` where an older run has one); with ``parts`` (the second of :func:`data_fingerprints`) and a
    record of them, the refusal names the parts that changed."""
    same_draw = recorded.get("labeled") == sample.labeled.tolist() and \
        recorded.get("unlabeled") == sample.unlabeled.tolist()
    if same_draw and recorded.get("data_sha256", fingerprint) == fingerprint:
        return
    change = "other rows are drawn" if not same_draw else "the drawn rows hold other texts or labels"
    old_parts = recorded.get("data_sha256_parts")
    if parts and isinstance(old_parts, dict):
        changed = [FINGERPRINT_PARTS.get(k, k) for k in parts if old_parts.get(k) != parts[k]]
        if changed:
            change += f" ({', '.join(changed)} changed)"
    raise DataError(f"{where}: the data differ from those the run was made with ({change}: a data file edited, "
                    f"reordered or replaced since; sample.json records the draw and a fingerprint of its examples), "
                    f"so {what}. Give the run its data back, or start a new run (--overwrite moves this one aside)")


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
        raise DataError(f"need n_labeled >= {2 if setting == 'pnu' else 1} and n_unlabeled >= 0, "
                        f"got {n_labeled}, {n_unlabeled}")
    pool = np.flatnonzero(labels == 1) if setting == "pu" else np.arange(n)
    if len(pool) < n_labeled or n < n_labeled + n_unlabeled:
        if len(pool) >= n_labeled:
            hint = f"; lower --n-unlabeled (at most {n - n_labeled} here)"
        else:  # the most labeled examples that also leave --n-unlabeled
            most = min(len(pool), n - n_unlabeled)
            hint = (f"; lower --n-labeled (at most {most} here with --n-unlabeled {n_unlabeled})" if most >= 2 else
                    f"; lower --n-labeled (at most {len(pool)}) and --n-unlabeled (labeled + unlabeled at most {n})")
        raise DataError(f"too few examples: {n} in the training set ({len(pool)} eligible to be labeled) "
                        f"for {n_labeled} labeled + {n_unlabeled} unlabeled{hint}")
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
