"""Classify texts with a trained fewshot model: a run folder (its model/) or an exported model folder.

    python -m fewshot.predict --model runs/fewshot --input texts.txt --output preds.jsonl
    python -m fewshot.predict --model runs/fewshot/model --input reviews.csv --text-column review --output preds.csv

Input: .txt (one text per line; blank lines skipped), .csv / .tsv (a header row; --text-column, default
`text`) or .jsonl (objects with --text-column, or one JSON string per line). Output, one row per text
in input order: .jsonl ({"text", "label", "score", "probabilities": {label: p}}) or .csv (text, label,
score, then one `p(<label>)` column per class); an existing output file is refused unless --overwrite is
given, and the file is written to a temporary sibling and renamed into place. The numbers are those of
transformers' text-classification pipeline on the folder (truncation=True): softmax over the two logits,
the label with the larger one.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import torch

from .export import MODEL_DIR, check_safetensors

MODEL_TYPE = "fewshot_classifier"
OUTPUT_SUFFIXES = (".jsonl", ".csv")


def model_folder(path) -> Path:
    """The exported model folder that ``path`` names: the folder itself, or a run's model/. A folder that
    is neither is refused with one line naming what it lacks."""
    p = Path(path)
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
                         f"exports existed): write it with python -m fewshot.export --run {p}")
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


def load_classifier(path, device="cpu"):
    """(model, tokenizer) of an exported folder (or a run's model/), with this package's copy of the model
    code (nothing from the folder is executed)."""
    from safetensors import SafetensorError
    from transformers import AutoTokenizer

    from .modeling_fewshot import FewShotForSequenceClassification

    folder = model_folder(path)
    check_safetensors(folder / "model.safetensors", f"--model {folder}",
                      "export the run again (python -m fewshot.export --run RUN) or copy the folder again")
    try:
        model = FewShotForSequenceClassification.from_pretrained(str(folder))
    except (OSError, ValueError, RuntimeError, SafetensorError) as err:
        raise ValueError(f"--model {folder}: the model files could not be loaded ({type(err).__name__}: "
                         f"{first_line(err)})") from None
    try:
        # config= : the folder's own config.json would make AutoTokenizer ask about its custom code
        tokenizer = AutoTokenizer.from_pretrained(str(folder), config=model.config)
    except Exception as err:  # noqa: BLE001 - the tokenizers library raises bare Exceptions for damaged files
        raise ValueError(f"--model {folder}: its tokenizer files could not be loaded (damaged? {type(err).__name__}: "
                         f"{first_line(err)})") from None
    return model.to(device).eval(), tokenizer


def first_line(err: BaseException) -> str:
    """The first non-empty line of an error's message (transformers' errors run to several lines)."""
    return next((line.strip() for line in str(err).splitlines() if line.strip()), "")


@torch.no_grad()
def predict_proba(model, tokenizer, texts, batch_size: int = 64, device="cpu") -> torch.Tensor:
    """[n, 2] class probabilities (softmax of the logits), texts cut at the model's max_seq_length tokens."""
    max_length = model.config.max_seq_length or tokenizer.model_max_length
    out = []
    for i in range(0, len(texts), batch_size):
        enc = tokenizer(list(texts[i:i + batch_size]), padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")
        logits = model(input_ids=enc["input_ids"].to(device), attention_mask=enc["attention_mask"].to(device)).logits
        out.append(torch.softmax(logits.float(), dim=-1).cpu())
    return torch.cat(out) if out else torch.zeros(0, model.config.num_labels)


def write_predictions(path: Path, texts, probs: torch.Tensor, id2label: dict) -> None:
    """One row per text (.jsonl or .csv), written to a temporary sibling and renamed into place."""
    names = [id2label[i] for i in range(probs.shape[1])]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="") as fh:
            if path.suffix.lower() == ".jsonl":
                for text, p in zip(texts, probs.tolist()):
                    k = max(range(len(p)), key=p.__getitem__)
                    fh.write(json.dumps({"text": text, "label": names[k], "score": p[k],
                                         "probabilities": dict(zip(names, p))}, ensure_ascii=False) + "\n")
            else:
                w = csv.writer(fh)
                w.writerow(["text", "label", "score", *(f"p({n})" for n in names)])
                for text, p in zip(texts, probs.tolist()):
                    k = max(range(len(p)), key=p.__getitem__)
                    w.writerow([text, names[k], p[k], *p])
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:  # the write failed: drop the partial file, the old one stays as it was
        tmp.unlink(missing_ok=True)
        raise


def main(argv=None):
    import argparse

    from shared_losses.training.cli import HelpFormatter
    from shared_losses.training.runtime import check_device

    from .data import read_texts

    p = argparse.ArgumentParser(prog="python -m fewshot.predict", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--model", required=True, help="a fewshot run folder (uses its model/) or an exported model folder")
    p.add_argument("--input", required=True, help="texts: .txt (one per line), .csv/.tsv or .jsonl")
    p.add_argument("--text-column", default="text", help="column (.csv/.tsv) or key (.jsonl) holding the text")
    p.add_argument("--output", required=True,
                   help="predictions: .jsonl or .csv (an existing file is refused unless --overwrite)")
    p.add_argument("--overwrite", action="store_true",
                   help="let --output replace an existing file (written to a temporary file, then renamed)")
    p.add_argument("--batch-size", type=int, default=64, help="texts per forward pass")
    p.add_argument("--device", default="cpu", help="torch device (cpu, cuda, cuda:N, mps)")
    args = p.parse_args(argv)
    out = Path(args.output)
    if out.suffix.lower() not in OUTPUT_SUFFIXES:
        raise ValueError(f"--output {out}: write .jsonl or .csv (got {out.suffix or 'no suffix'})")
    if out.is_dir():
        raise ValueError(f"--output {out} is a folder; give a file name, e.g. {out / 'predictions.jsonl'}")
    if out.exists() and not args.overwrite:  # before the model or the texts are read
        raise FileExistsError(f"--output {out} exists; pass --overwrite to replace it")
    if args.batch_size < 1:
        raise ValueError(f"--batch-size must be >= 1, got {args.batch_size}")
    device = check_device(args.device)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar: noise on the command line
    folder = model_folder(args.model)
    texts = read_texts(args.input, args.text_column, "--input")
    model, tokenizer = load_classifier(folder, device)
    probs = predict_proba(model, tokenizer, texts, args.batch_size, device)
    write_predictions(out, texts, probs, model.config.id2label)
    counts = {model.config.id2label[k]: int((probs.argmax(1) == k).sum()) for k in range(probs.shape[1])}
    print(f"wrote {len(texts)} predictions to {out} ({', '.join(f'{n}: {c}' for n, c in counts.items())}) "
          f"with {folder}")
    return out


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
