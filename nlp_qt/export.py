"""An nlp_qt model folder (also a sentence-transformers folder) from any checkpoint of a run, finished or not:

    python -m nlp_qt.export --run-dir runs/qt                    # writes runs/qt/model_step<N>/
    python -m nlp_qt.export --run-dir runs/qt --output my_encoder

A finished run already has ``RUN/model/`` (written when training ends); this command is for a run that was
stopped before its end (Ctrl-C, a killed job), or for keeping the weights of a checkpoint before the run
goes on. It reads ``RUN/config.json``, ``RUN/vocab.json`` and the model weights in ``RUN/checkpoint/`` and
writes the same files as training's end does (``config.json``, ``vocab.json``, ``model.safetensors``,
``modules.json``): ``nlp_qt.load_encoder``, ``nlp_qt.senteval --model`` and
``SentenceTransformer(path, trust_remote_code=True)`` load it. The folder's ``config.json`` names the run and
the step. A target that exists and is not empty is refused unless it is an export of this same run (then it
is replaced); the folder is written beside its target and renamed into place.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Optional

import tyro


@dataclass
class ExportArgs:
    """Write a run's checkpoint as an nlp_qt / sentence-transformers model folder."""

    run_dir: str
    """Training output directory (holds config.json, vocab.json and checkpoint/)."""
    output: Optional[str] = None
    """Folder to write (default: RUN_DIR/model_step<N>, N the checkpoint's step). Must be new, empty, or an
    earlier export of this run."""


def _run_settings(run: Path):
    """(train Config, Vocab, checkpoint folder) of the run in ``run``; one-line errors for what is missing."""
    from shared_losses.runtime import read_json_file, resolve_checkpoint, run_application

    from .config import Config
    from .vocab import Vocab

    if not run.is_dir():
        raise FileNotFoundError(f"--run-dir {run}: no such folder")
    owner = run_application(run)
    if owner not in ("nlp_qt", "unknown", None):
        raise FileNotFoundError(f"{run} holds a run of {owner}, not of nlp_qt (use python -m {owner}.export)")
    for name in ("config.json", "vocab.json"):
        if not (run / name).is_file():
            raise FileNotFoundError(f"{run} is not an nlp_qt run folder: it has no {name}")
    ckpt = resolve_checkpoint(run / "checkpoint")  # names a missing or incomplete checkpoint in one line
    if not (ckpt / "model.safetensors").is_file():
        raise FileNotFoundError(f"checkpoint {ckpt} holds no model.safetensors: not an nlp_qt checkpoint")
    saved = read_json_file(run / "config.json", "run's configuration")
    known = {f.name for f in fields(Config)}
    cfg = Config(**{k: v for k, v in saved.items() if k in known})
    return cfg, Vocab.load(run / "vocab.json"), ckpt


def check_target(out: Path, run: Path) -> None:
    """Refuse a target holding anything but an earlier export of ``run`` (nothing is written)."""
    if not out.exists():
        return
    if not out.is_dir():
        raise FileExistsError(f"--output {out} is a file, not a folder to export into (nothing was written)")
    if not any(out.iterdir()):
        return
    meta = {}
    if (out / "config.json").is_file():
        try:
            meta = json.loads((out / "config.json").read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            meta = {}
    if isinstance(meta, dict) and meta.get("exported_from") == str(run.resolve()):
        return
    raise FileExistsError(f"--output {out} already holds files that are not an export of {run}; pass a new or empty "
                          "folder (nothing was written)")


def export_checkpoint(run_dir: str | Path, output: str | Path | None = None) -> dict:
    """Write the model of ``run_dir``'s checkpoint to ``output``; returns ``{"model": path, "step": N}``."""
    from safetensors.torch import load_file

    from shared_losses.runtime import CheckpointError, load_checkpoint

    from .model import ModelConfig, QuickThought, save_model

    run = Path(run_dir)
    cfg, vocab, ckpt = _run_settings(run)
    step = int(load_checkpoint(None, ckpt)["step"])
    out = Path(output) if output else run / f"model_step{step}"
    check_target(out, run)
    qt = QuickThought(ModelConfig(len(vocab), cfg.word_dim, cfg.encoder_dim, cfg.bidirectional, cfg.encoder))
    state = load_file(str(ckpt / "model.safetensors"))
    try:
        qt.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise CheckpointError(f"checkpoint {ckpt} does not match {run / 'config.json'} and {run / 'vocab.json'} "
                              f"({str(err).splitlines()[0]})") from None
    import dataclasses

    save_model(qt.eval(), vocab, out, {"train_config": dataclasses.asdict(cfg), "step": step,
                                       "exported_from": str(run.resolve())})
    return {"model": str(out), "step": step}


def main(args: ExportArgs | None = None) -> dict:
    args = args or tyro.cli(ExportArgs)
    result = export_checkpoint(args.run_dir, args.output)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
