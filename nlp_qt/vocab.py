"""Word tokenizer and vocabulary built from the corpus, saved with the model (``vocab.json``).

Tokenisation is a rule tokenizer close to NLTK's ``word_tokenize`` for English (words with inner
apostrophes/hyphens, numbers, clitics split off as ``do n't`` / ``it 's``, and each punctuation mark
on its own); case-sensitive by default, as in QT. Id 0 is padding, id 1 is ``<unk>``; the other ids are the
``size`` most frequent words (ties broken by first occurrence, so the vocabulary is deterministic).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Iterable

import torch

# The tokenizer itself lives in nlp_qt/modeling_qt.py, the self-contained module an exported model folder
# carries, so that the folder tokenizes exactly as nlp_qt does: one definition for both.
from .modeling_qt import _CLITIC, _NOT, _TOKEN, PAD, TOKENIZER_VERSION, UNK, tokenize  # noqa: F401


class Vocab:
    """Word <-> id mapping plus the tokenizer settings that go with it."""

    def __init__(self, words: list[str], max_len: int = 50, lowercase: bool = False,
                 tokenizer: int = TOKENIZER_VERSION):
        if max_len < 1:
            raise ValueError(f"max_len must be >= 1, got {max_len}")
        tokenize("", version=tokenizer)  # refuses an unknown version
        self.tokenizer = tokenizer
        self.itos = [PAD, UNK] + [w for w in words if w not in (PAD, UNK)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.max_len = max_len
        self.lowercase = lowercase

    def __len__(self) -> int:
        return len(self.itos)

    @classmethod
    def build(
        cls, sentences: Iterable[str], size: int = 50000, max_len: int = 50, lowercase: bool = False,
        min_count: int = 1,
    ) -> "Vocab":
        """The ``size`` most frequent tokens of ``sentences`` (plus ``<pad>`` and ``<unk>``)."""
        if size < 1:
            raise ValueError(f"vocabulary size must be >= 1, got {size}")
        counts: Counter = Counter()
        for s in sentences:
            counts.update(tokenize(s, lowercase))
        if not counts:
            raise ValueError("cannot build a vocabulary: the corpus has no tokens")
        # Counter preserves first-insertion order; most_common is stable for ties
        words = [w for w, c in counts.most_common(size) if c >= min_count]
        return cls(words, max_len, lowercase)

    def encode(self, sentence: str, max_len: int | None = None) -> list[int]:
        """Ids of the sentence's first ``max_len`` tokens (default: the vocabulary's ``max_len``)."""
        cut = self.max_len if max_len is None else max_len
        ids = [self.stoi.get(t, 1) for t in tokenize(sentence, self.lowercase, self.tokenizer)[:cut]]
        return ids or [1]  # an empty sentence becomes a single <unk> so every row has length >= 1

    def batch(self, sentences: list[str], device=None, max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Padded ids ``[B, L]`` (0 = pad) and lengths ``[B]``; ``max_len`` as in :meth:`encode`."""
        enc = [self.encode(s, max_len) for s in sentences]
        lengths = torch.tensor([len(e) for e in enc], dtype=torch.long)
        ids = torch.zeros(len(enc), int(lengths.max()) if enc else 1, dtype=torch.long)
        for i, e in enumerate(enc):
            ids[i, : len(e)] = torch.tensor(e, dtype=torch.long)
        if device is not None:
            ids, lengths = ids.to(device), lengths.to(device)
        return ids, lengths

    def save(self, path: str | os.PathLike) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps({"itos": self.itos, "max_len": self.max_len, "lowercase": self.lowercase,
                                   "tokenizer": self.tokenizer}))
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Vocab":
        path = Path(path)
        if not path.exists():
            raise FileNotFoundError(f"vocabulary file not found: {path}")
        from shared_losses.training.runtime import read_json_file

        data = read_json_file(path, "model's vocabulary (written by nlp_qt.train)")
        itos = data.get("itos") if isinstance(data, dict) else None
        problem = ("it is not a JSON object" if not isinstance(data, dict) else
                   "its itos is not a list of words" if not isinstance(itos, list) or not all(
                       isinstance(w, str) for w in itos) else
                   f"its itos does not begin with {PAD} and {UNK}" if itos[:2] != [PAD, UNK] else
                   "its words are not distinct" if len(set(itos)) != len(itos) else
                   "its max_len is not a whole number >= 1" if not isinstance(data.get("max_len"), int)
                   or isinstance(data.get("max_len"), bool) or data["max_len"] < 1 else
                   "its lowercase is not true or false" if not isinstance(data.get("lowercase"), bool) else None)
        if problem is not None:
            raise ValueError(f"{path} is damaged ({problem}); it should be the model's vocabulary (written by "
                             "nlp_qt.train)")
        return cls(itos[2:], data["max_len"], data["lowercase"], data.get("tokenizer", 1))
