"""The quick-thought encoder as a sentence-transformers module, so a trained run loads in
sentence-transformers' own tools:

    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer("runs/qt/model", trust_remote_code=True)   # a finished run's model/
    vectors = model.encode(["A sentence.", "Another one."])  # exactly what nlp_qt.senteval encodes

The module is :class:`nlp_qt.modeling_qt.QuickThoughtModule` (self-contained: no nlp_qt import). A model folder
holds the nlp_qt files (``config.json``, ``vocab.json``, ``model.safetensors``) and ``modules.json``, which names one
module in the folder itself:

every folder nlp_qt writes, a run's ``model/`` (:func:`nlp_qt.model.save_model`) as an export of its checkpoint
(``python -m nlp_qt.export``), gets :func:`write_sentence_transformers_files`: it carries the module's code as
``modeling_qt.py`` and names ``modeling_qt.QuickThoughtModule``, so sentence-transformers imports the folder's copy
and the folder loads where nlp_qt is not installed. ``nlp_qt.st_module.QuickThoughtModule`` is this module's name for
the same class (an older folder that names it loads where nlp_qt is installed).

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
