"""Classify texts with a trained fewshot model: a run folder (its model/), an exported model folder, or an export
shared on the Hugging Face hub (``--model OWNER/NAME``, fetched into the hub's cache; its Python files are not
fetched: predict runs this package's model code only).

    python -m fewshot.predict --model runs/fewshot --input texts.txt --output preds.jsonl
    python -m fewshot.predict --model runs/fewshot/model --input reviews.csv --text-column review --output preds.csv

Input: .txt or .txt.gz (one text per line; blank lines skipped, counted on stderr), or a data file as training reads it:
.csv / .tsv (a header row), .jsonl / .json, each also .gz, .parquet or .arrow, with the column --text-column (a .jsonl
line may also be one JSON string). --text-column defaults to the run's own text column (its config.json's
`text_column`: the training's --text-column, `sentence` unless set), or `text` where no run is found with the model
folder; an input without the run's column but with a `text` column is read from `text`, and stderr says so.
Output, one row per input row in input order (for .txt, per non-blank line): .jsonl ({<the input's other columns>,
"text", "label", "score", "probabilities": {label: p}}) or .csv (the input's other columns, text, label, score, then
one `p(<label>)` column per class). An input column named like an output column is kept as `input_<name>`. A row
whose text is empty (a missing, null or blank cell) keeps its place without a prediction: its label, score and
probabilities are null (empty .csv cells), and stderr counts such rows. An existing output file is refused unless
--overwrite is given, and the file is written to a temporary sibling and renamed into place. The numbers are those of
transformers' text-classification pipeline on the folder (truncation=True): softmax over the two logits, the label
with the larger one.

With --label-column (the input's true labels, e.g. a labeled test file), the predictions are also scored: one line
of accuracy, F1, precision, recall, balanced accuracy and ROC-AUC (%) on stderr and, with --scores FILE, a JSON file.
The column's values are read as the model's class names, or, where they are not, by the run's own label rule
(--positive-label / --label-map of the training, from its config.json); rows without a text or whose label the rule
drops are left out of the scores, and counted.

    python -m fewshot.predict --model runs/fewshot --input test.csv --label-column sentiment --output preds.csv
"""

from __future__ import annotations

import csv
import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator

import torch

from shared_losses.training.runtime import check_finite_weights, check_parent_folder, write_refused

from .export import MARKER, MODEL_DIR, check_safetensors
from .model import looks_local

MODEL_TYPE = "fewshot_classifier"
OUTPUT_SUFFIXES = (".jsonl", ".csv")
#: --text-column where the run records none (or is not found beside the model folder)
DEFAULT_TEXT_COLUMN = "text"


def hub_model_folder(name: str) -> Path:
    """The local copy of the hub model ``name`` (``OWNER/NAME``: a fewshot export shared on the hub), fetched with
    huggingface_hub's ``snapshot_download`` (its cache; offline, the cached copy) without the folder's Python files,
    which predict never runs. One line where the hub refuses or cannot be reached."""
    from huggingface_hub import snapshot_download

    from shared_losses.data import GATED_HINT, NO_SUCH_HUB_MODEL, hub_refusal

    try:
        return Path(snapshot_download(name, ignore_patterns=["*.py"]))
    except Exception as err:  # noqa: BLE001 - hub, network and validation errors come in many types
        refusal = hub_refusal(err)
        if refusal == "gated":
            raise ValueError(f"--model {name} is a gated model on the Hugging Face hub, which this machine may not "
                             f"read: {GATED_HINT}") from None
        if refusal == "missing":
            raise FileNotFoundError(f"--model {name}: no such folder, and {NO_SUCH_HUB_MODEL}") from None
        raise FileNotFoundError(f"--model {name}: no such folder, and the Hugging Face hub could not give it "
                                f"({type(err).__name__}: {first_line(err)}); offline? pass a local folder") from None


def model_folder(path) -> Path:
    """The exported model folder that ``path`` names: the folder itself, a run's model/, or a hub id (``OWNER/NAME``,
    :func:`hub_model_folder`) where no such local folder exists. A folder that is neither is refused with one line
    naming what it lacks."""
    p = Path(path)
    if not p.exists() and not looks_local(str(path)):
        return model_folder(hub_model_folder(str(path)))
    if not p.exists():
        raise FileNotFoundError(f"--model {p}: no such folder")
    if not p.is_dir():
        raise ValueError(f"--model {p} is a file; pass a fewshot run folder or its model/ folder")
    if not (p / "config.json").is_file() and (p / MODEL_DIR).is_dir():
        return model_folder(p / MODEL_DIR)
    if (p / "config.json").is_file() and (p / "metrics.json").is_file() and not (p / "model.safetensors").exists():
        if (p / MODEL_DIR).is_dir():
            return model_folder(p / MODEL_DIR)
        raise ValueError(f"--model {p} is a fewshot run without model/ (made with --no-export, by a baseline or before "
                         f"exports existed): write it with python -m fewshot.export --run-dir {shlex.quote(str(p))}")
    if (p / "image_classifier.pt").is_file():  # an image run's model/ (fewshot.train images)
        raise ValueError(f"--model {p} is an image classifier; fewshot.predict classifies texts: load it with "
                         "fewshot.image_run.load_image_classifier (this folder or its run's) or the "
                         "image_classifier.torchscript.pt / image_classifier.onnx in it (docs/fewshot.md, 'Use what "
                         "you trained')")
    missing = [f for f in ("config.json", "model.safetensors", "tokenizer_config.json") if not (p / f).is_file()]
    if not missing:
        try:
            model_type = json.loads((p / "config.json").read_text(encoding="utf-8")).get("model_type")
        except (ValueError, UnicodeDecodeError, AttributeError):
            model_type = None
        if model_type != MODEL_TYPE:
            raise ValueError(f"--model {p} is not a fewshot model: its config.json has model_type {model_type!r}, not "
                             f"{MODEL_TYPE!r} (export a fewshot run with python -m fewshot.export)")
        return p
    raise ValueError(f"--model {p} is not a fewshot model folder: it lacks {', '.join(missing)} (pass a fewshot run "
                     "folder, or the model/ folder fewshot.export writes)")


def recorded_text_column(model, folder: Path) -> tuple[str, Path] | None:
    """(the text column the run was trained with, the config.json that records it) for ``--model`` ``model``, whose
    model folder is ``folder`` (:func:`model_folder`): the export's marker when it records the column, else the run
    (``model`` when it is a run folder, else the folder above ``folder`` when that is RUN/model, else the run that
    an older export's marker names); None when none of them records a ``text_column`` (a model folder copied on its
    own from an older export, an image run)."""
    for source, config in run_records(model, folder):
        column = config.get("text_column")
        if isinstance(column, str) and column.strip():
            return column, source
    return None


def run_records(model, folder: Path) -> Iterator[tuple[Path, dict]]:
    """``(file, its JSON object)`` of each record of the run behind ``--model`` ``model`` (model folder ``folder``), in
    the order they are believed: the run's config.json (``model`` when it is a run folder, else the folder above
    ``folder`` when that is RUN/model), then the export's own record (it holds wherever the export goes), then the
    config.json of the run an older export's marker names; a model's config.json (``model_type``) is none."""
    folder = Path(folder)
    runs = [Path(model)] if Path(model).resolve() != folder.resolve() else []
    if folder.name == MODEL_DIR:
        runs.append(folder.parent)
    marker = _json_object(folder / MARKER)
    older = [Path(marker["run"])] if isinstance(marker.get("run"), str) else []
    for source in [run / "config.json" for run in runs] + [folder / MARKER] + [run / "config.json" for run in older]:
        config = _json_object(source)
        if config and "model_type" not in config:
            yield source, config


def _check_writable_output(out: Path) -> None:
    """Refuse in one line an --output whose folder cannot be made or written, before the model or the texts are
    read (the predictions were made, then lost at the write). A missing folder is made, as the write would."""
    check_parent_folder(out, "--output", "nothing was read or predicted")
    err = write_refused(out.parent)
    if err is not None:
        raise ValueError(f"--output {out}: the folder {out.parent} cannot be written ({err.strerror or err}); nothing "
                         "was read or predicted")


def _same_path(a, b) -> bool:
    """Whether the paths ``a`` and ``b`` name one file (through links and other spellings)."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


def _json_object(path: Path) -> dict:
    """The JSON object in ``path``; {} where there is none (no file, not JSON, not an object)."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return obj if isinstance(obj, dict) else {}


def read_input(path: str, text_column: str | None, recorded: tuple[str, Path] | None):
    """(texts, others, column read) of --input (:func:`fewshot.data.read_rows`) with ``text_column``
    (--text-column) when given, else the run's ``recorded`` text column, else :data:`DEFAULT_TEXT_COLUMN`. Where the
    run's column is not in the input but a ``text`` column is, ``text`` is read (as before runs were asked), and
    stderr says so; where neither is, the error says where the default came from."""
    from shared_losses.data import DataError

    from .data import read_rows

    column = text_column if text_column is not None else recorded[0] if recorded else DEFAULT_TEXT_COLUMN
    try:
        return (*read_rows(path, column, "--input"), column)
    except DataError as err:
        missing = f"column(s) [{column!r}] not found" in str(err)
        if text_column is not None or column == DEFAULT_TEXT_COLUMN or not missing:
            raise
        try:
            rows = read_rows(path, DEFAULT_TEXT_COLUMN, "--input")
        except DataError:
            raise DataError(f"{err} (--text-column defaults to the run's text column {column!r}, from "
                            f"{recorded[1]}; nor has the input a {DEFAULT_TEXT_COLUMN!r} column)") from None
        print(f"--input {path}: no column {column!r} (the run's text column, from {recorded[1]}); read its "
              f"{DEFAULT_TEXT_COLUMN!r} column (--text-column chooses another)", file=sys.stderr)
        return (*rows, DEFAULT_TEXT_COLUMN)


def load_classifier(path, device="cpu"):
    """(model, tokenizer) of an exported folder (or a run's model/), with this package's copy of the model
    code (nothing from the folder is executed)."""
    from safetensors import SafetensorError
    from transformers import AutoTokenizer

    from .modeling_fewshot import FewShotForSequenceClassification

    folder = model_folder(path)
    check_safetensors(folder / "model.safetensors", f"--model {folder}",
                      "export the run again (python -m fewshot.export --run-dir RUN) or copy the folder again")
    try:
        model = FewShotForSequenceClassification.from_pretrained(str(folder))
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise ValueError(f"--model {folder}: the model files could not be loaded ({type(err).__name__}: "
                         f"{first_line(err)})") from None
    check_finite_weights(model.state_dict(), f"--model {folder}")  # a damaged file: every prediction NaN
    try:
        # config= : the folder's own config.json would make AutoTokenizer ask about its custom code
        tokenizer = AutoTokenizer.from_pretrained(str(folder), config=model.config, trust_remote_code=False)
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises bare Exceptions for damaged files
        if "trust_remote_code" in str(err):  # the folder's tokenizer_config.json names code of its own (auto_map)
            raise ValueError(f"--model {folder}: its tokenizer_config.json asks to run tokenizer code shipped in the "
                             "folder; fewshot.predict runs no code from a model folder, so it was refused (a folder "
                             "fewshot.export wrote names none: export the run again)") from None
        raise ValueError(f"--model {folder}: its tokenizer files could not be loaded (damaged? {type(err).__name__}: "
                         f"{first_line(err)})") from None
    return model.to(device).eval(), tokenizer


def first_line(err: BaseException) -> str:
    """The first non-empty line of an error's message (transformers' errors run to several lines)."""
    return next((line.strip() for line in str(err).splitlines() if line.strip()), "")


@torch.no_grad()
def predict_proba(model, tokenizer, texts, batch_size: int = 64, device="cpu",
                  progress: str | None = None) -> torch.Tensor:
    """[n, 2] class probabilities (softmax of the logits), texts cut at the model's max_seq_length tokens, in the
    order of ``texts`` (computed in batches of like length, as the run's evaluation: fewshot.heads.longest_first);
    ``progress``: the label of a progress bar on stderr (none by default; none for one batch)."""
    from .heads import batches_longest_first, in_given_order, longest_first

    max_length = model.config.max_seq_length or tokenizer.model_max_length
    order = longest_first(texts)
    out = []
    for batch in batches_longest_first(texts, order, batch_size, progress):
        enc = tokenizer(batch, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        logits = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device)).logits
        out.append(torch.softmax(logits.float(), dim=-1).cpu())
    return in_given_order(torch.cat(out), order) if out else torch.zeros(0, model.config.num_labels)


def write_predictions(path: Path, texts, probs, id2label: dict, others=None) -> None:
    """One row per text (.jsonl, else .csv), in order, written to a temporary sibling and renamed into place: the
    input row's other columns (``others``, one dict per text; one named like an output column gets the prefix
    ``input_``), then the text, its label, score and both classes' probabilities (``probs``: a ``[n, classes]``
    tensor, or one row per text, a list or a tensor; None for a text without a prediction, whose label, score and
    probabilities are null, empty cells in .csv)."""
    names = [id2label[i] for i in range(len(id2label))]
    probs = probs.tolist() if isinstance(probs, torch.Tensor) else [
        p.tolist() if isinstance(p, torch.Tensor) else p for p in probs]
    own = ["text", "label", "score", "probabilities", *(f"p({n})" for n in names)]
    others = [{_kept_name(k, o, own): _json_value(v) for k, v in o.items()} for o in (others or [{}] * len(texts))]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            jsonl = path.suffix.lower() == ".jsonl"
            if not jsonl:
                columns = list(dict.fromkeys(k for o in others for k in o))  # every row's, in first-seen order
                w = csv.writer(fh)
                w.writerow([*columns, "text", "label", "score", *(f"p({n})" for n in names)])
            for text, p, other in zip(texts, probs, others):
                label, score = top(p, names)
                if jsonl:
                    fh.write(json.dumps({**other, "text": text, "label": label, "score": score,
                                         "probabilities": None if p is None else dict(zip(names, p))},
                                        ensure_ascii=False) + "\n")
                else:
                    w.writerow([*(_cell(other.get(c)) for c in columns), text, label, score,
                                *(p or [None] * len(names))])
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # the write failed: drop the partial file, the old one stays as it was
        tmp.unlink(missing_ok=True)
        raise


def top(p, names) -> tuple:
    """(label, score): the class of the larger probability of ``p`` and that probability; (None, None) for None."""
    if p is None:
        return None, None
    k = max(range(len(p)), key=p.__getitem__)
    return names[k], p[k]


def _cell(v):
    """A kept input value as a .csv cell: text as it is, other JSON values as JSON."""
    return v if v is None or isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _kept_name(name: str, row: dict, own) -> str:
    """The output name of the input column ``name``: itself, or ``input_<name>`` (``input_<name>_2``, ...) where an
    output column, or another input column, has that name."""
    if name not in own:
        return name
    kept, k = f"input_{name}", 2
    while kept in own or kept in row:
        kept, k = f"input_{name}_{k}", k + 1
    return kept


def _json_value(v):
    """A kept input value as JSON can hold it: NaN as null (strict JSON has no NaN); dates, decimals, bytes (what
    Parquet gives back) as their text."""
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is None or isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, dict):
        return {str(k): _json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_json_value(x) for x in v]
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def recorded_label_rule(model, folder: Path):
    """The run's label rule (:func:`fewshot.data.label_rule` of its recorded --positive-label / --label-map) and the
    config.json it comes from, found as :func:`recorded_text_column` finds the text column; None without one."""
    from shared_losses.data import LabelRule

    for source, config in run_records(model, folder):
        if "positive_label" in config:
            return LabelRule.of(config["positive_label"], config.get("label_map")), source
    return None


def true_labels(raw, names: dict, rule, column: str) -> tuple[list[int | None], str]:
    """Each row's label in {0, 1} (None: left out) from the --label-column values ``raw``, and how they were read:
    as the model's class names ``names`` (id -> name) where every value is one, else by the run's ``rule`` (a
    (LabelRule, source) pair, or None: refused in one line naming the values and the classes)."""
    from shared_losses.data import DataError, label_text

    by_name = {label_text(n): i for i, n in names.items()}
    texts = [None if v is None or label_text(v) == "" else label_text(v) for v in raw]
    given = [t for t in texts if t is not None]
    if not given:
        raise DataError(f"--label-column {column}: every row's label is empty")
    others = sorted({t for t in given if t not in by_name})[:10]
    if not others:
        return [None if t is None else by_name[t] for t in texts], "the model's class names"
    if rule is None:
        raise DataError(f"--label-column {column}: values {others} are not the model's classes "
                        f"({', '.join(map(repr, names.values()))}), and no run's config.json beside the model says how "
                        "its training read them (pass the run folder as --model, or labels named as the classes)")
    label_rule, source = rule
    rows = [i for i, t in enumerate(texts) if t is not None]
    try:
        kept, labels = label_rule.apply([raw[i] for i in rows], f"--label-column {column}", need_both=False)
    except DataError as err:  # its advice names training's options, which predict has not
        raise DataError(f"--label-column {column}: values {others} are neither the model's classes "
                        f"({', '.join(map(repr, names.values()))}) nor read by the run's label rule ({source}: "
                        f"{str(err).split(': ', 1)[-1].split(';')[0]}); write the labels as the model's classes"
                        ) from None
    out: list[int | None] = [None] * len(texts)
    for k, y in zip(kept, labels):
        out[rows[k]] = int(y)
    return out, f"the run's label rule ({source})"


def main(argv=None):
    from shared_losses.training.cli import ArgumentParser, HelpFormatter
    from shared_losses.training.runtime import check_device

    p = ArgumentParser(prog="python -m fewshot.predict", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--model", required=True, help="a fewshot run folder (uses its model/), an exported model folder, "
                   "or OWNER/NAME: an export shared on the Hugging Face hub (fetched into its cache)")
    p.add_argument("--input", required=True,
                   help="texts: .txt (one per line; also .txt.gz), .csv/.tsv, .jsonl/.json (each also .gz), .parquet "
                        "or .arrow")
    p.add_argument("--text-column", default=None,
                   help="column (key, in JSON) holding the text; default: the run's text column (its config.json's "
                        "text_column: the training's --text-column, `sentence` unless set), else `text`; an input "
                        "without the run's column but with a `text` column is read from `text`")
    p.add_argument("--output", required=True,
                   help="predictions: .jsonl or .csv (an existing file is refused unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --output replace an existing file (written to a temporary file, then renamed)")
    p.add_argument("--label-column", default=None,
                   help="the input's column of true labels: score the predictions against it (a line on stderr; "
                        "--scores writes them as JSON)")
    p.add_argument("--scores", default=None,
                   help="with --label-column: write the scores here as JSON (an existing file is refused unless "
                        "--overwrite)")
    p.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    p.add_argument("--no-progress", dest="progress", action="store_false",
                   help="no progress bar on stderr while the texts are classified")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:N, mps, or auto: a CUDA GPU if "
                   "there is one, else the CPU)")
    args = p.parse_args(argv)
    out = Path(args.output)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ValueError(f"--output {out}: write .jsonl or .csv (got {out.suffix or 'no suffix'})")
    if out.is_dir():
        raise ValueError(f"--output {out} is a folder; give a file name, e.g. {out / 'predictions.jsonl'}")
    if out.exists() and not args.overwrite:  # before the model or the texts are read
        raise FileExistsError(f"--output {out} exists; pass --overwrite to replace it")
    _check_writable_output(out)
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    if args.scores is not None:
        if args.label_column is None:
            raise ValueError("--scores writes the scores against --label-column: give the input's label column")
        for option, other in (("--output", args.output), ("--input", args.input)):  # one would replace the other
            if _same_path(args.scores, other):
                raise ValueError(f"--scores {args.scores} is the {option} file: the scores would replace the "
                                 f"{'predictions' if option == '--output' else 'texts and labels'}; write them to "
                                 "another file (nothing was written)")
        if Path(args.scores).exists() and not args.overwrite:
            raise FileExistsError(f"--scores {args.scores} exists; pass --overwrite to replace it")
        _check_writable_output(Path(args.scores))
    device = check_device(args.device)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar: noise on the command line
    folder = model_folder(args.model)
    texts, others, text_column = read_input(args.input, args.text_column, recorded_text_column(args.model, folder))
    if args.label_column is not None and args.label_column == text_column and not args.input.lower().endswith(
            (".txt", ".txt.gz")):
        whose = "" if args.text_column else ", the run's or the default"
        raise ValueError(f"--label-column {args.label_column} is the column read as the texts to classify "
                         f"(--text-column {text_column}{whose}): name the column that holds the true labels")
    if args.label_column is not None and texts and args.label_column not in others[0]:
        columns = sorted(others[0]) if others and others[0] else []
        raise ValueError(f"--label-column {args.label_column}: no such column in --input {args.input} (its other "
                         f"columns: {', '.join(columns) or 'none'})")
    if args.input.lower().endswith((".txt", ".txt.gz")):  # a blank line is no text
        kept = [i for i, t in enumerate(texts) if t is not None]
        if len(kept) < len(texts):
            print(f"--input {args.input}: skipped {len(texts) - len(kept)} blank line(s)", file=sys.stderr)
        texts, others = [texts[i] for i in kept], [others[i] for i in kept]
    given = [t for t in texts if t is not None]
    if not given:
        raise ValueError(f"--input {args.input}: no texts in it")
    if len(given) < len(texts):  # a table's row keeps its place: rows line up with the input's
        print(f"--input {args.input}: {len(texts) - len(given)} of {len(texts)} rows have an empty text; they are "
              "written without a prediction (label, score and probabilities null)", file=sys.stderr)
    model, tokenizer = load_classifier(folder, device)
    names = model.config.id2label
    truth = None
    if args.label_column is not None:  # the labels read (or refused) before any text is classified or written
        truth = true_labels([o.get(args.label_column) for o in others], names,
                            recorded_label_rule(args.model, folder), args.label_column)
        if not any(t is not None and y is not None for t, y in zip(texts, truth[0])):
            raise ValueError(f"--label-column {args.label_column}: no row has both a text and a label to score")
    probs = iter(predict_proba(model, tokenizer, given, args.batch_size, device,
                               progress=f"classifying {len(given)} texts" if args.progress else None).tolist())
    probs = [None if t is None else next(probs) for t in texts]
    write_predictions(out, texts, probs, names, others)
    labels = [top(p, names)[0] for p in probs]
    counts = {names[k]: labels.count(names[k]) for k in range(len(names))}
    counts = {**counts, **({"no text": len(texts) - len(given)} if len(given) < len(texts) else {})}
    print(f"wrote {len(texts)} rows to {out} ({', '.join(f'{n}: {c}' for n, c in counts.items())}) with {folder}")
    if truth is not None:
        score_predictions(args, names, probs, *truth)
    return out


def score_predictions(args, names: dict, probs: list, truth: list, how: str) -> dict:
    """Score the rows with a prediction and a label (``truth``, read as ``how``: :func:`true_labels`): one line on
    stderr, and ``--scores``."""
    from shared_losses.training.runtime import write_json_atomic

    from .scores import binary_scores, scores_line

    rows = [i for i, (p, y) in enumerate(zip(probs, truth)) if p is not None and y is not None]
    eps = 1e-12
    log_odds = [math.log(max(probs[i][1], eps)) - math.log(max(probs[i][0], eps)) for i in rows]
    scores = binary_scores([truth[i] for i in rows], log_odds)
    left = len(probs) - len(rows)
    result = {"label_column": args.label_column, "labels_read_as": how, "rows_scored": len(rows),
              "rows_left_out": left, "positive_class": names[1], **scores}
    print(f"scored {len(rows)} rows against --label-column {args.label_column} (read as {how}"
          + (f"; {left} without a text or a label left out" if left else "") + f"): accuracy "
          f"{scores['accuracy']:.2f} %; {scores_line(scores)}", file=sys.stderr)
    if args.scores is not None:
        write_json_atomic(Path(args.scores), result)
    return result


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
