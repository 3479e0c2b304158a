"""nlp_qt: quick-thought sentence encoders (QT, debiased and hard-negative objectives) and a
SentEval-protocol evaluator. See docs/nlp_qt.md.

Use what you trained::

    import nlp_qt
    encoder = nlp_qt.load_encoder("runs/qt")            # a run, its model/, a bag-of-words folder or any
    vectors = encoder.encode(["A sentence.", "Another."])  # sentence-transformers model; [n, d] float32
"""


class SentenceEncoder:
    """``encode(list[str]) -> np.ndarray [n, d]``: what :mod:`nlp_qt.senteval` evaluates."""

    def __init__(self, encode, description: str):
        self._encode, self.description = encode, description

    def encode(self, sentences):
        if isinstance(sentences, str):
            raise TypeError("encode takes a list of sentences; wrap a single one in a list")
        return self._encode(list(sentences))

    def __repr__(self) -> str:
        return f"SentenceEncoder({self.description})"


def load_encoder(path: str, device: str = "cpu", batch_size: int = 128,
                 max_length: int | None = None) -> SentenceEncoder:
    """The encoder in ``path``: an nlp_qt run or its ``model/``, a bag-of-words folder (:mod:`nlp_qt.bow`) or a
    sentence-transformers model (local folder or hub id). An nlp_qt model reads whole texts unless ``max_length``
    cuts them to their first tokens. One-line errors name what is missing."""
    from .senteval import load_encoder as _load

    encode, desc = _load(str(path), device, batch_size, max_length)
    return SentenceEncoder(encode, desc)
