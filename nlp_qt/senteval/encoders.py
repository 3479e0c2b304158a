"""Sentence encoders to evaluate: an nlp_qt model, a bag-of-words folder or a sentence-transformers model, each as
``encode(sentences) -> [n, d] float array``."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Callable

import numpy as np


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


def _hub_qt_folder(repo: str) -> Path | None:
    """The local copy of the hub repository ``repo`` where it is a quick-thought export (its ``modules.json`` names
    the quick-thought module), fetched into the hub's cache without its Python file: nlp_qt loads it with its own
    code, so no ``trust_remote_code`` is needed. None for any other repository, or where the hub cannot be asked
    (sentence-transformers then loads the id, and its errors say what is wrong)."""
    import json

    from huggingface_hub import hf_hub_download, snapshot_download

    from ..modeling_qt import MODULE_TYPE

    try:
        modules = json.loads(Path(hf_hub_download(repo, "modules.json")).read_text(encoding="utf-8"))
        if not (isinstance(modules, list) and modules and isinstance(modules[0], dict)
                and modules[0].get("type") == MODULE_TYPE):
            return None
        return Path(snapshot_download(repo, ignore_patterns=["*.py"]))
    except Exception:  # noqa: BLE001 - not a repository, no modules.json, offline: sentence-transformers' own path
        return None


def load_encoder(model: str, device: str = "cpu", batch_size: int = 128,
                 max_length: int | None = None, trust_remote_code: bool = False) -> tuple[Encoder, str]:
    """An ``encode(sentences) -> [n, d] float array`` for an nlp_qt model or a sentence-transformers
    model; returns it with a short description. ``max_length`` (nlp_qt models only): tokens of each text the
    encoder reads, the first ``max_length`` of them; None (the default): the whole text, as the bag-of-words
    baseline reads it, unless the folder records a ``max_seq_length`` (set in sentence-transformers before its save:
    then that one, as sentence-transformers encodes); 0: the whole text always. A model's training ``--max-length``
    (50 by default) cuts the corpus sentences it trained on, not the texts it encodes. ``trust_remote_code``: a
    sentence-transformers folder's own Python modules are loaded and run (sentence-transformers refuses them
    otherwise)."""
    if max_length is not None and max_length < 0:
        raise ValueError(f"max_length must be >= 0 (0: the whole text), got {max_length}")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a whole number >= 1 (sentences encoded at once), got {batch_size!r}")
    from shared_losses.training.runtime import check_device

    device = str(check_device(str(device), "device"))  # auto: the GPU if there is one

    from ..model import is_qt_model_dir, is_qt_vocab, load_model

    from shared_losses.training.runtime import checkpoint_exists, run_application

    from ..bow import is_bow_dir, load_bow_encoder

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
    if not path.exists() and model.count("/") == 1:  # a hub id: a quick-thought export there loads as a folder here
        path = _hub_qt_folder(model) or path
    if path.is_dir() and not is_qt_model_dir(path) and is_qt_model_dir(path / "model"):
        path = path / "model"
    if path.is_dir() and not is_qt_model_dir(path) and not (path / "model").exists() and (
            owner == "nlp_qt" or (path / "checkpoint").is_dir() or is_qt_vocab(path / "vocab.json")):
        exports = sorted((p for p in path.glob("model_step*") if is_qt_model_dir(p)),
                         key=lambda p: int(p.name[len("model_step"):]) if p.name[len("model_step"):].isdigit() else -1)
        if exports:  # the advice below, followed already
            raise FileNotFoundError(
                f"{path} is an nlp_qt run folder without model/ (written when training ends), and "
                f"{', '.join(p.name for p in exports)} {'is an export' if len(exports) == 1 else 'are exports'} of "
                f"its checkpoint: pass --model {exports[-1]}"
            )
        if checkpoint_exists(path / "checkpoint"):
            raise FileNotFoundError(
                f"{path} is an nlp_qt run folder without model/: it is written when training ends (still running, "
                "or stopped before its end? add --resume to its training command to finish it, or write its "
                f"checkpoint's model with python -m nlp_qt.export --run-dir {shlex.quote(str(path))})"
            )
        raise FileNotFoundError(
            f"{path} is an nlp_qt run folder without model/ and without a checkpoint: the run has saved no model yet "
            "(it stopped before its first checkpoint, e.g. because it diverged, or has not reached it yet), so "
            "there is nothing to evaluate or export: train again (--overwrite moves this folder aside)"
        )
    if is_qt_model_dir(path):
        qt, vocab = load_model(path, device)
        recorded = qt.max_seq_length  # set in sentence-transformers before its save (load_model reads it)
        if max_length is None and recorded is not None:  # set in sentence-transformers before its save: cut alike
            max_length = recorded
        encode = make_qt_encoder(qt, vocab, device, batch_size, max_length)
        cut = f"texts cut to {max_length} tokens" if max_length else "whole texts"
        if max_length and max_length == recorded:
            cut += " (the max_seq_length it was saved with)"
        return encode, f"nlp_qt model {path} ({qt.embedding_dim}-d, {cut})"
    if max_length is not None:
        raise ValueError("--max-length applies to nlp_qt models only (a sentence-transformers model keeps its own "
                         "max_seq_length)")
    if path.is_dir() and path.name == "checkpoint" and is_qt_vocab(path.parent / "vocab.json"):
        raise FileNotFoundError(f"{path} is an nlp_qt run's training checkpoint, not a model: pass the run folder, "
                                f"--model {path.parent} (its model/), or write the checkpoint's model with "
                                f"python -m nlp_qt.export --run-dir {shlex.quote(str(path.parent))}")
    if path.exists() and path.is_dir() and not (path / "modules.json").exists() and not (path / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is neither an nlp_qt model (config.json, vocab.json, model.safetensors) nor a "
            "sentence-transformers model folder (modules.json)"
        )
    from sentence_transformers import SentenceTransformer

    from shared_losses.data import GATED_HINT, NO_SUCH_HUB_MODEL, hub_refusal

    try:
        st = SentenceTransformer(str(path) if path.exists() else model, device=device,
                                 trust_remote_code=trust_remote_code)
    except Exception as err:  # noqa: BLE001
        text = str(err).strip()
        why = (text.splitlines() or [""])[0]  # the hub's messages run over several lines
        where = "" if path.exists() else " (no such local folder, so it was asked of the hub)"
        if "trust_remote_code" in text and not trust_remote_code:
            hint = ("its folder holds its own Python code: pass --trust-remote-code (trust_remote_code=True) to "
                    "load and run it, if you trust it")
        elif path.exists():
            hint = "is it a complete sentence-transformers folder (modules.json and the modules it names)?"
        elif (refusal := hub_refusal(err)) == "gated":
            hint = f"a gated model: {GATED_HINT}; or pass a local model folder"
        elif refusal == "missing":
            hint = (f"{NO_SUCH_HUB_MODEL}: check the name as the hub spells it (OWNER/NAME), or pass a local model "
                    "folder")
        else:
            hint = "offline? pass a local model folder"
        raise FileNotFoundError(
            f"could not load {model!r} as a sentence-transformers model{where}: {type(err).__name__}: {why}; {hint}"
        ) from err

    def encode_st(sentences: list[str]) -> np.ndarray:
        return np.asarray(st.encode(sentences, batch_size=batch_size, show_progress_bar=False, convert_to_numpy=True))

    return encode_st, f"sentence-transformers model {model}"

