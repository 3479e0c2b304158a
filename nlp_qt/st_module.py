"""The quick-thought encoder as a sentence-transformers module, so a trained run loads in
sentence-transformers' own tools:

    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer("runs/qt/model", trust_remote_code=True)   # a finished run's model/
    vectors = model.encode(["A sentence.", "Another one."])  # exactly what nlp_qt.senteval encodes

The module is :class:`nlp_qt.modeling_qt.QuickThoughtModule` (self-contained: no nlp_qt import). A model folder
holds the nlp_qt files (``config.json``, ``vocab.json``, ``model.safetensors``) and ``modules.json``, which names one
module in the folder itself:

* a folder written by ``python -m nlp_qt.export`` (:func:`write_sentence_transformers_files`) carries the module's
  code as ``modeling_qt.py`` and names ``modeling_qt.QuickThoughtModule``: sentence-transformers imports the
  folder's copy, so the folder loads where nlp_qt is not installed;
* a run's ``model/`` as training writes it (:func:`nlp_qt.model.save_model`) names
  ``nlp_qt.st_module.QuickThoughtModule``, this module's name for the same class: it loads where nlp_qt is
  installed (``python -m nlp_qt.export --run-dir RUN`` writes a folder that travels).

sentence-transformers 6 asks for ``trust_remote_code=True`` for any module class it does not ship, either way;
nothing is downloaded. The module tokenises with the run's own vocabulary (:mod:`nlp_qt.vocab`'s tokenizer) and
returns ``[f/|f|; g/|g|]``, the sentence vector of :func:`nlp_qt.senteval.make_qt_encoder`. Like
``nlp_qt.senteval`` it reads whole texts; ``model.max_seq_length = N`` cuts them to their first N tokens (None:
whole texts again).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .modeling_qt import MODULE_FILE, MODULE_TYPE, QuickThoughtModule, check_texts

__all__ = ["QuickThoughtModule", "check_texts", "write_sentence_transformers_files", "MODULE_FILE", "MODULE_TYPE"]


def write_sentence_transformers_files(directory: str | os.PathLike) -> Path:
    """Make ``directory`` (an nlp_qt model folder: config.json, vocab.json, model.safetensors) a
    sentence-transformers folder that loads without nlp_qt: ``modeling_qt.py`` (a copy of
    :mod:`nlp_qt.modeling_qt`), ``modules.json`` naming ``modeling_qt.QuickThoughtModule`` in the folder itself and
    ``config_sentence_transformers.json``. Replaces those three files; touches nothing else."""
    directory = Path(directory)
    shutil.copyfile(Path(__file__).with_name(MODULE_FILE), directory / MODULE_FILE)
    (directory / "modules.json").write_text(json.dumps([{"idx": 0, "name": "0", "path": "", "type": MODULE_TYPE}],
                                                       indent=2))
    (directory / "config_sentence_transformers.json").write_text(json.dumps({"model_type": "SentenceTransformer"}))
    return directory
