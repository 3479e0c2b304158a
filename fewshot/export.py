"""A fewshot run's classifier as a Hugging Face model folder (RUN/model/), loadable without this package.

    python -m fewshot.export --run-dir runs/fewshot                 # writes runs/fewshot/model/
    python -m fewshot.export --run-dir runs/fewshot --output my_model

    from transformers import pipeline
    clf = pipeline("text-classification", model="runs/fewshot/model", trust_remote_code=True, truncation=True)
    clf(["a great film", "a dull plot"], top_k=None)

The folder holds the trained encoder, its tokenizer (``model_max_length`` = the run's --max-length), the
classification head the run's evaluation used, ``config.json`` (``id2label`` / ``label2id``, the pooling)
and ``modeling_fewshot.py`` (:mod:`fewshot.modeling_fewshot`, named in ``auto_map``: the stock
``*ForSequenceClassification`` heads cannot express fewshot's pooling, hence ``trust_remote_code=True``),
plus ``fewshot_export.json`` (which run it came from) and ``sentence-transformers/``: the trained encoder alone
as a sentence-transformers folder (``SentenceTransformer(path).encode(texts)`` gives the sentence vectors the
run's heads read; :func:`save_sentence_transformer`). Its predictions are the run's evaluation's: the
same argmax, and the probabilities (softmax over the two logits) to float precision. The head:

* ``ce``, ``ce+scl``, ``ce+punce`` with ``--head linear`` (the default): the CE-trained linear head;
* ``--head logreg`` and ``--objective probe``: the logistic regression fitted on the N labeled examples'
  L2-normalised sentence vectors (``config.normalize``; logits ``[0, w.x + b]``), fitted again from the
  run's data when exporting a finished run (deterministic: the same features, C and seed);
* the PU pipeline (``python -m fewshot.train pu``): the nnPU probe on standardised sentence vectors
  (``config.standardize``), logits
  ``[0, g(x)]``; label 1 is the positive class, label 0 "not <positive>".

``setfit`` runs keep no model, and are refused. Training writes RUN/model/ at the end of every run that
trains an encoder (ce, ce+scl, ce+punce and the PU pipeline) unless --no-export; ``export_run`` exports
any finished run (probe included: the pretrained encoder and its logistic regression). The folder is
written next to its target and renamed into place; a non-empty target that is not this run's export is
refused.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch

from shared_losses.training.runtime import (check_finite_weights, check_folder_writable, check_parent_folder,
                                            check_replaceable_folder, export_source, exported_from)

from .config import PU_OBJECTIVE, AnyConfig, ImageConfig, TextOptions, config_for
from .data import check_same_data, class_names, data_fingerprints
from .model import EXPORT_ENCODER_DIR, EXPORT_MARKER, FewShotModel, hub_revision, load_tokenizer, resolve_pooling
from .objectives import ALL_OBJECTIVES

MODEL_DIR = "model"
#: the marker file, and the trained encoder as a sentence-transformers folder, inside the exported model folder
#: (named in fewshot.model, whose --encoder reads such a folder)
MARKER, ST_DIR = EXPORT_MARKER, EXPORT_ENCODER_DIR
#: fewshot's pooling -> the sentence-transformers Pooling module's mode (its classic config keys, which
#: sentence-transformers 2.x to 6.x read, and fewshot's --pooling auto too)
ST_POOLING_KEYS = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                   "max": "pooling_mode_max_tokens"}
AUTO_MAP = {"AutoConfig": "modeling_fewshot.FewShotClassifierConfig",
            "AutoModelForSequenceClassification": "modeling_fewshot.FewShotForSequenceClassification"}
MODELING_FILE = Path(__file__).with_name("modeling_fewshot.py")


def safetensors_problem(path) -> str | None:
    """What is wrong with a .safetensors file, or None when it is whole: an 8-byte header length, a JSON header,
    and tensors whose data ends exactly at the end of the file. A file cut short (a copy or a write that
    stopped) fails the last test; safetensors itself answers with a traceback ("incomplete metadata, file not
    fully covered")."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            return f"{size} bytes: too short to hold a header"
        n = int.from_bytes(head, "little")
        if n > size - 8:
            return f"its header needs {n + 8} bytes, the file holds {size}"
        try:
            header = json.loads(fh.read(n))
            end = max((int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"), default=0)
        except (ValueError, UnicodeDecodeError, AttributeError, TypeError, KeyError, IndexError):
            return "its header is not a safetensors header"
    if 8 + n + end != size:
        return f"the file holds {size} bytes, its header describes {8 + n + end}"
    return None


def check_safetensors(path, what: str, remedy: str) -> None:
    """Refuse a damaged .safetensors file with one line naming it (``what``: the option or folder it came
    through; ``remedy``: what to do)."""
    problem = safetensors_problem(path)
    if problem is not None:
        raise ValueError(f"{what}: {path} is damaged ({problem}): not a complete safetensors file, e.g. cut short "
                         f"while it was copied or written; {remedy}")


def head_kind(cfg: TextOptions) -> str:
    """Which classifier the run's evaluation used: ``linear``, ``logreg`` or ``nnpu``."""
    if cfg.setting == "pu":
        return "nnpu"
    objective = ALL_OBJECTIVES.get(cfg.objective)
    if objective.no_model:
        raise ValueError(f"a {cfg.objective} run keeps no model to export ({objective.no_model})")
    return "logreg" if not objective.trains_head or cfg.head == "logreg" else "linear"


def check_target(out_dir: Path, run_dir: Path, overwrite: bool = True) -> None:
    """Refuse an export into a folder that holds anything but this run's own export, and that one too unless
    ``overwrite`` (the end of training replaces its own export; ``python -m fewshot.export`` asks for --overwrite).
    One line; nothing written."""
    out_dir, run_dir = Path(out_dir), Path(run_dir)
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} is a file, not a folder to export into; pass another --output "
                              "(nothing was written)")
    if not any(out_dir.iterdir()):
        return
    if (out_dir / MARKER).is_file():
        same_run = exported_from(export_marker(out_dir), run_dir, "run")  # by the run's id: moved, still its own
        if same_run or out_dir.resolve() == (run_dir / MODEL_DIR).resolve():
            if overwrite:
                return  # this run's own export: replaced
            raise FileExistsError(f"{out_dir} already holds this run's export; pass --overwrite to replace it, or "
                                  "another --output (nothing was written)")
    raise FileExistsError(f"{out_dir} already holds files that are not this run's export; pass another --output "
                          "(an empty or new folder); nothing was written")


def logreg_head(model: FewShotModel, tokenizer, cfg: TextOptions, train_x, train_y, sample, device="cpu"):
    """(weight [2, d], bias [2]) of the logistic-regression head, fitted as the evaluation fits it."""
    from .heads import embed_all, fit_logreg

    fl, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.labeled], cfg.max_length, device)
    clf = fit_logreg(fl.numpy(), np.asarray(train_y)[sample.labeled], cfg.probe_c, cfg.seed)
    if list(clf.classes_) != [0, 1]:
        raise ValueError(f"the logistic-regression head saw the classes {list(clf.classes_)}, not 0 and 1")
    coef = torch.as_tensor(clf.coef_[0], dtype=torch.float32)
    weight = torch.stack([torch.zeros_like(coef), coef])
    return weight, torch.tensor([0.0, float(clf.intercept_[0])])


def to_hf_model(model: FewShotModel, pooling: str, weight, bias, names: tuple[str, str], max_length: int, *,
                normalize: bool = False, feature_mean=None, feature_std=None):
    """A :class:`fewshot.modeling_fewshot.FewShotForSequenceClassification` holding ``model``'s encoder (a
    copy of its weights) and the head ``weight`` [2, d], ``bias`` [2]."""
    from .modeling_fewshot import FewShotClassifierConfig, FewShotForSequenceClassification

    enc = model.encoder
    config = FewShotClassifierConfig(
        # without _name_or_path: where the encoder was loaded from (a local path on the trainer's machine) is no
        # part of the export, which loads its weights from its own folder
        encoder_config={k: v for k, v in enc.config.to_dict().items() if k != "_name_or_path"}, pooling=pooling,
        normalize=normalize, standardize=feature_mean is not None,
        max_seq_length=max_length, classifier_dropout=float(getattr(enc.config, "hidden_dropout_prob", 0.1) or 0.0),
        id2label={0: names[0], 1: names[1]}, label2id={names[0]: 0, names[1]: 1},
        architectures=["FewShotForSequenceClassification"])
    config.auto_map = dict(AUTO_MAP)
    hf = FewShotForSequenceClassification(config)
    state = {f"encoder.{k}": v.detach().cpu() for k, v in enc.state_dict().items()}
    state["classifier.weight"] = torch.as_tensor(weight, dtype=torch.float32).detach().cpu()
    state["classifier.bias"] = torch.as_tensor(bias, dtype=torch.float32).detach().cpu()
    if feature_mean is not None:
        state["feature_mean"] = torch.as_tensor(feature_mean, dtype=torch.float32).detach().cpu()
        state["feature_std"] = torch.as_tensor(feature_std, dtype=torch.float32).detach().cpu()
    hf.load_state_dict(state, strict=True)
    return hf.eval()


def set_max_length(folder: Path, max_length: int) -> None:
    """The saved tokenizer's ``model_max_length``: texts are cut where the run cut them (with truncation=True)."""
    tok_cfg = folder / "tokenizer_config.json"
    meta = json.loads(tok_cfg.read_text(encoding="utf-8")) if tok_cfg.exists() else {}
    meta["model_max_length"] = int(max_length)
    tok_cfg.write_text(json.dumps(meta, indent=2, ensure_ascii=False), encoding="utf-8")


def _versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for key, package in (("sentence_transformers", "sentence-transformers"), ("transformers", "transformers"),
                         ("pytorch", "torch")):
        try:
            out[key] = version(package)
        except PackageNotFoundError:
            pass
    return out


def save_sentence_transformer(encoder, tokenizer, folder: Path, pooling: str, max_length: int) -> Path:
    """``encoder`` (a transformers model) and ``tokenizer`` as a sentence-transformers folder: a Transformer
    module (``max_seq_length`` = the run's --max-length) and a Pooling module with the run's pooling, in the
    classic layout (modules.json, sentence_bert_config.json, 1_Pooling/config.json) that sentence-transformers
    2.x to 6.x load. ``SentenceTransformer(folder).encode(texts)`` gives the sentence vectors the run's heads
    read (:meth:`fewshot.model.FewShotModel.embed`), not normalised (``normalize_embeddings=True`` for unit
    vectors); SetFit loads it too (``SetFitModel.from_pretrained(folder)``), and fewshot's ``--pooling auto``
    reads its pooling when it is passed as ``--encoder``."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    encoder.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    set_max_length(folder, max_length)
    (folder / "1_Pooling").mkdir()
    dim = int(encoder.config.hidden_size)
    modes = {key: name == pooling for name, key in ST_POOLING_KEYS.items()}
    write = lambda name, obj: (folder / name).write_text(json.dumps(obj, indent=2) + "\n", encoding="utf-8")
    modes["pooling_mode_mean_sqrt_len_tokens"] = False
    write("1_Pooling/config.json", {"word_embedding_dimension": dim, **modes})
    write("modules.json", [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])
    write("sentence_bert_config.json", {"max_seq_length": int(max_length), "do_lower_case": False})
    write("config_sentence_transformers.json", {"__version__": _versions(), "prompts": {}, "default_prompt_name": None,
                                                "similarity_fn_name": "cosine"})
    return folder


def save_folder(hf, tokenizer, out_dir: Path, run_dir: Path, info: dict) -> Path:
    """Write ``hf``, ``tokenizer``, modeling_fewshot.py, the encoder as a sentence-transformers folder
    (``sentence-transformers/``, :func:`save_sentence_transformer`) and the marker into a temporary sibling
    folder and rename it into ``out_dir`` (:func:`shared_losses.training.runtime.replace_directory`)."""
    from transformers.utils import logging as hf_logging

    from shared_losses.training.runtime import keep_added_files, kept_files_line, written_whole

    out_dir = Path(out_dir)
    check_target(out_dir, run_dir)
    bar = hf_logging.is_progress_bar_enabled()
    recorded = _recorded_files(out_dir)
    with written_whole(out_dir, folder=True) as tmp:
        hf_logging.disable_progress_bar()  # "Writing model shards": noise at the end of a run's output
        try:
            hf.save_pretrained(tmp)
            save_sentence_transformer(hf.encoder, tokenizer, tmp / ST_DIR, hf.config.pooling,
                                      hf.config.max_seq_length)
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        tokenizer.save_pretrained(tmp)
        # the pipeline cuts texts where the run did when called with truncation=True (set here, on the saved
        # copy: the run's tokenizer object is left as it is)
        set_max_length(tmp, hf.config.max_seq_length)
        shutil.copyfile(MODELING_FILE, tmp / "modeling_fewshot.py")
        files = sorted([p.name for p in tmp.iterdir()] + [MARKER])
        (tmp / MARKER).write_text(json.dumps({**export_source(run_dir, "run"), **info,
                                              "exported_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "files": files},
                                             indent=2, default=str))
        kept = keep_added_files(out_dir, tmp, recorded)
    if kept:
        print(kept_files_line(out_dir, kept), file=sys.stderr)
    return out_dir


def export_marker(out_dir: Path) -> dict:
    """What the export in ``out_dir`` says of itself (fewshot_export.json: its run, head, files ...); {} where there is
    none, or it cannot be read as a JSON object."""
    try:
        info = json.loads((Path(out_dir) / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _recorded_files(out_dir: Path) -> list[str] | None:
    """The files the export in ``out_dir`` recorded writing (None for none there, or one from before they were
    recorded), which a new export of the same run does not keep as the user's."""
    recorded = export_marker(out_dir).get("files")
    return recorded if isinstance(recorded, list) else None


def export_model(cfg: TextOptions, model: FewShotModel, tokenizer, pooling: str, pooling_source: str, run_dir,
                 out_dir=None, *, train_x=None, train_y=None, sample=None, pu_head: dict | None = None,
                 eval_accuracy=None, device="cpu") -> Path:
    """Export the classifier of a run whose model is in memory (the end of training, or :func:`export_run`).
    ``train_x`` / ``train_y`` / ``sample``: the run's data (for the logistic-regression head); ``pu_head``:
    the nnPU probe (``weight`` [1, d], ``bias`` [1], ``mean`` and ``std`` of the standardisation)."""
    run_dir = Path(run_dir)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / MODEL_DIR
    check_target(out_dir, run_dir)  # before any work
    kind = head_kind(cfg)
    names = class_names(cfg)
    extra = {}
    if kind == "linear":
        lin = model.classifier[1]
        weight, bias = lin.weight, lin.bias
    elif kind == "logreg":
        weight, bias = logreg_head(model, tokenizer, cfg, train_x, train_y, sample, device)
        extra["normalize"] = True
    else:
        w = torch.as_tensor(pu_head["weight"]).reshape(1, -1)
        weight = torch.cat([torch.zeros_like(w), w])
        bias = torch.tensor([0.0, float(torch.as_tensor(pu_head["bias"]).reshape(-1)[0])])
        extra.update(feature_mean=pu_head["mean"], feature_std=pu_head["std"])
    hf = to_hf_model(model, pooling, weight, bias, names, cfg.max_length, **extra)
    info = {"objective": PU_OBJECTIVE if cfg.setting == "pu" else cfg.objective, "setting": cfg.setting,
            "head": kind, "pooling": pooling,
            "pooling_source": pooling_source, "max_length": cfg.max_length, "encoder": cfg.encoder,
            "encoder_revision": hub_revision(cfg.encoder),
            # the training's column, which fewshot.predict takes by default: recorded here, the export travels alone
            "text_column": cfg.text_column,
            "labels": {"0": names[0], "1": names[1]}, "eval_accuracy": eval_accuracy,
            "load_with": "transformers.pipeline('text-classification', model=FOLDER, trust_remote_code=True, "
                         "truncation=True)",
            "sentence_transformer": f"sentence_transformers.SentenceTransformer(FOLDER/{ST_DIR}): the encoder"}
    return save_folder(hf, tokenizer, out_dir, run_dir, info)


def run_config(run_dir: Path) -> AnyConfig:
    """The configuration a run was made with (its config.json, as its pipeline's dataclass; fields added since take
    their defaults)."""
    from shared_losses.training.runtime import another_application, run_application

    from .run import read_json

    owner = run_application(run_dir) if Path(run_dir).is_dir() else None
    if owner not in ("fewshot", "unknown", None):
        raise FileNotFoundError(another_application(run_dir, owner, "fewshot"))
    f = run_dir / "config.json"
    if not f.is_file():
        raise FileNotFoundError(f"{run_dir} is not a fewshot run: it has no config.json")
    return config_for(read_json(f), str(f))


def export_run(run_dir, out_dir=None, overwrite: bool = False) -> Path:
    """Export a finished run (RUN/config.json, RUN/metrics.json and, for trained objectives, RUN/checkpoint/)
    to ``out_dir`` (default RUN/model/). Needs the encoder (``cfg.encoder``: for its architecture and
    tokenizer; the trained weights come from the checkpoint) and, for a logistic-regression head (``probe``,
    ``--head logreg``) or a PU run from before exports, the run's data (its head is fitted again, as the
    evaluation fitted it; the draw is checked against sample.json)."""
    from safetensors.torch import load_file

    from shared_losses.training.runtime import (checkpoint_exists, load_checkpoint, resolve_checkpoint,
                                                state_dict_mismatch)

    from .run import read_json, training_data

    run_dir = Path(run_dir)
    if run_dir.is_file():
        raise FileNotFoundError(f"{run_dir} is a file; --run-dir is a run's folder (its --output-dir)")
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run folder not found: {run_dir}")
    cfg = run_config(run_dir)
    if isinstance(cfg, ImageConfig):
        return export_image_run(run_dir, out_dir, overwrite)
    if not (run_dir / "metrics.json").is_file():
        raise ValueError(f"{run_dir} has no metrics.json: the run has not finished (export it when it has)")
    metrics = read_json(run_dir / "metrics.json")
    kind = head_kind(cfg)
    out_dir = Path(out_dir) if out_dir is not None else run_dir / MODEL_DIR
    check_target(out_dir, run_dir, overwrite)
    pooling, source = (metrics["pooling"], metrics.get("pooling_source", "metrics.json")) if metrics.get("pooling") \
        else resolve_pooling(cfg.pooling, cfg.encoder)
    torch.manual_seed(cfg.seed)
    model = FewShotModel(cfg.encoder, pooling, cfg.proj_dim).eval()
    tokenizer = load_tokenizer(cfg.encoder)
    state = None
    if ALL_OBJECTIVES.get(cfg.objective).trains_encoder or cfg.setting == "pu":
        if not checkpoint_exists(run_dir / "checkpoint"):
            raise FileNotFoundError(f"{run_dir} has no checkpoint/ with the trained model to export")
        path = resolve_checkpoint(run_dir / "checkpoint")
        state = load_checkpoint(None, path)
        if cfg.setting != "pu" and state.get("step") != metrics.get("steps"):
            raise ValueError(f"{run_dir}: the checkpoint is at step {state.get('step')} but metrics.json reports "
                             f"{metrics.get('steps')} steps: the run is being continued; export it when it has "
                             "finished")
        weights = path / "model.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{path} has no model.safetensors")
        check_safetensors(weights, f"the checkpoint of {run_dir}", "the trained model cannot be read back")
        tensors = load_file(str(weights))
        check_finite_weights(tensors, str(weights))
        try:
            model.load_state_dict(tensors, strict=True)
        except RuntimeError as err:
            raise ValueError(f"{weights} does not fit the encoder {cfg.encoder!r} "
                             f"({state_dict_mismatch(err)})") from None
    data = {}
    pu_head = state.get("pu_head") if state is not None else None
    if kind == "logreg" or (kind == "nnpu" and pu_head is None):
        train_x, train_y, eval_x, eval_y, sample = training_data(cfg)
        if (run_dir / "sample.json").is_file():
            fingerprint, parts = data_fingerprints(train_x, train_y, eval_x, eval_y, sample)
            check_same_data(read_json(run_dir / "sample.json"), sample, fingerprint, run_dir,
                            "its logistic-regression head cannot be fitted again on the examples it was fitted on",
                            parts)
        data = {"train_x": train_x, "train_y": train_y, "sample": sample}
        if kind == "nnpu":
            from .pu_probes import fit_pu_head

            prior = metrics.get("prior")
            pu_head = fit_pu_head(model, tokenizer, cfg, train_x, sample, prior, "cpu")
    return export_model(cfg, model, tokenizer, pooling, source, run_dir, out_dir, pu_head=pu_head,
                        eval_accuracy=metrics.get("eval_accuracy"), **data)


def _image_export_of(out_dir: Path, run_dir: Path, source: Path) -> bool:
    """Whether the image export in ``out_dir`` is ``run_dir``'s: its config.json names the run, or (an export from
    before the run was recorded) its copy of image_classifier.pt is the run's, byte for byte."""
    try:
        config = json.loads((out_dir / "config.json").read_text(encoding="utf-8"))
        recorded = config.get("run")
    except (OSError, ValueError, AttributeError):
        config, recorded = {}, None
    if recorded is not None or isinstance(config.get("run_id"), str):
        return exported_from(config, run_dir, "run")
    copy = out_dir / source.name
    return copy.is_file() and copy.read_bytes() == source.read_bytes()


def export_image_run(run_dir: Path, out_dir=None, overwrite: bool = False) -> Path:
    """An image run's classifier (RUN/model/image_classifier.pt, written when the run ended) in the portable formats
    of :mod:`fewshot.image_export` (TorchScript, ONNX, safetensors + config.json), into ``out_dir`` (default
    RUN/model, beside it; elsewhere, image_classifier.pt is copied there too). Files of an earlier export are replaced
    only with ``overwrite``."""
    from .image_export import CONFIG_FILE, ONNX_FILE, TORCHSCRIPT_FILE, WEIGHTS_FILE, write_portable

    source = run_dir / MODEL_DIR / "image_classifier.pt"
    if not source.is_file():
        raise FileNotFoundError(f"{run_dir} is a run on image data without {source.relative_to(run_dir)}: the run has "
                                "not finished, or ran with --no-export")
    out_dir = Path(out_dir) if out_dir is not None else run_dir / MODEL_DIR
    if out_dir.exists() and not out_dir.is_dir():
        raise FileExistsError(f"{out_dir} is a file, not a folder to export into; pass another --output")
    from .image_run import read_classifier_blob

    ours = (TORCHSCRIPT_FILE, ONNX_FILE, WEIGHTS_FILE, CONFIG_FILE, "image_classifier.pt")
    there = sorted(p.name for p in out_dir.iterdir()) if out_dir.is_dir() else []
    foreign = [n for n in there if n not in ours]
    if foreign:
        raise FileExistsError(f"{out_dir} holds files that are not this run's export ({', '.join(foreign[:5])}); "
                              "pass another --output (nothing was written)")
    same = out_dir.resolve() == source.parent.resolve()
    if there and not same and not _image_export_of(out_dir, run_dir, source):  # names alone do not tell whose
        raise FileExistsError(f"{out_dir} holds another run's export (its {CONFIG_FILE} names another run, or it "
                              "has none and its image_classifier.pt is not this run's); pass another --output "
                              "(nothing was written)")
    if not overwrite and [n for n in there if not (same and n == "image_classifier.pt")]:
        raise FileExistsError(f"{out_dir} already holds this run's export; pass --overwrite to replace it, or another "
                              "--output (nothing was written)")
    blob = read_classifier_blob(source)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not same:
        shutil.copyfile(source, out_dir / source.name)
    written, notes = write_portable(out_dir, blob, run=run_dir)
    for note in notes:
        print(note)
    return out_dir


def main(argv=None):
    from shared_losses.training.cli import ArgumentParser, HelpFormatter

    p = ArgumentParser(prog="python -m fewshot.export", description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--run-dir", "--run", dest="run", required=True,
                   help="a finished fewshot run folder (its --output-dir); --run-dir as in rl_curl.export and "
                   "nlp_qt.export, --run also taken")
    p.add_argument("--output", default=None, help="folder to write the model into (default: RUN/model)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an earlier export of this run in the output folder (anything else is never replaced)")
    args = p.parse_args(argv)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bar: noise before the one line this prints
    if args.output is not None:
        check_parent_folder(args.output, "--output")
        check_folder_writable(args.output, "--output")
        check_replaceable_folder(args.output, "--output")
    path = export_run(args.run, args.output, args.overwrite)
    if (path / "image_classifier.torchscript.pt").is_file():
        print(f"exported {args.run} to {path}: torch.jit.load({str(path / 'image_classifier.torchscript.pt')!r}), "
              f"onnxruntime.InferenceSession({str(path / 'image_classifier.onnx')!r}), or {path}/model.safetensors "
              "with config.json (the input and output are described there)")
    else:
        print(f"exported {args.run} to {path}; load it with transformers.pipeline('text-classification', "
              f"model={str(path)!r}, trust_remote_code=True, truncation=True)")
    return path


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
