"""The quick-thought encoder as a sentence-transformers module, so a trained run loads in
sentence-transformers' own tools:

    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer("runs/qt/model", trust_remote_code=True)   # a finished run's model/
    vectors = model.encode(["A sentence.", "Another one."])  # exactly what nlp_qt.senteval encodes

A run's ``model/`` (:func:`nlp_qt.model.save_model`) holds the nlp_qt files (``config.json``,
``vocab.json``, ``model.safetensors``) and ``modules.json``, which names one module of type
``nlp_qt.st_module.QuickThoughtModule`` in the folder itself. sentence-transformers 6 asks for
``trust_remote_code=True`` for any module class it does not ship, even one imported from an installed
package such as this one; nothing is downloaded or run from the folder. The module tokenises with the
run's own vocabulary (:mod:`nlp_qt.vocab`) and returns ``[f/|f|; g/|g|]``, the sentence vector of
:func:`nlp_qt.senteval.make_qt_encoder`. Like ``nlp_qt.senteval`` it reads whole texts; ``model.max_seq_length = N``
cuts them to their first N tokens (None: whole texts again).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import nn


class QuickThoughtModule(nn.Module):
    """sentence-transformers module wrapping :class:`nlp_qt.model.QuickThought` and its vocabulary."""

    def __init__(self, model, vocab):
        super().__init__()
        self.qt, self.vocab = model, vocab
        # tokens of each text read (None: all); sentence-transformers' model.max_seq_length reads and sets it
        self.max_seq_length: int | None = None

    # sentence-transformers asks its first module to turn texts into tensors
    def tokenize(self, texts, **kwargs) -> dict[str, torch.Tensor]:
        cut = self.max_seq_length
        if cut is not None and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 1):
            raise ValueError(f"max_seq_length must be a positive int or None (whole texts), got {cut!r}")
        texts = [t if isinstance(t, str) else " ".join(map(str, t)) for t in texts]
        ids, lengths = self.vocab.batch(texts, max_len=sys.maxsize if cut is None else cut)
        return {"input_ids": ids, "lengths": lengths}

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        if prompt:
            inputs = [prompt + t for t in inputs]
        return self.tokenize(inputs)

    def forward(self, features: dict) -> dict:
        ids = features["input_ids"]
        lengths = features["lengths"].to(torch.long).cpu()
        features["sentence_embedding"] = self.qt.embed(ids, lengths)
        return features

    def get_sentence_embedding_dimension(self) -> int:
        return 2 * self.qt.cfg.encoder_dim

    get_embedding_dimension = get_sentence_embedding_dimension

    def get_max_seq_length(self) -> int | None:
        return self.max_seq_length

    @property
    def modalities(self) -> list[str]:
        return ["text"]

    def save(self, output_path: str, *args, **kwargs) -> None:
        from .model import save_model

        save_model(self.qt, self.vocab, Path(output_path))

    @staticmethod
    def load(input_path: str) -> "QuickThoughtModule":
        from .model import load_model

        model, vocab = load_model(input_path)
        return QuickThoughtModule(model, vocab)
