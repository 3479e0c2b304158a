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
        """Vectors [len(sentences), dim] (numpy) of a list of strings; a TypeError names a bad item."""
        from .modeling_qt import check_texts

        return self._encode(check_texts(sentences))  # a TypeError naming what is expected and the bad item

    def __repr__(self) -> str:
        return f"SentenceEncoder({self.description})"


def load_encoder(path: str, device: str = "cpu", batch_size: int = 128,
                 max_length: int | None = None, trust_remote_code: bool = False) -> SentenceEncoder:
    """The encoder in ``path``: an nlp_qt run or its ``model/``, a bag-of-words folder (:mod:`nlp_qt.bow`) or a
    sentence-transformers model (local folder or hub id). An nlp_qt model reads whole texts unless ``max_length``
    cuts them to their first tokens; ``trust_remote_code`` lets a sentence-transformers folder run its own Python
    modules. One-line errors name what is missing. ``nlp_qt.senteval.evaluate`` takes the result as it is."""
    from .senteval import load_encoder as _load

    encode, desc = _load(str(path), device, batch_size, max_length, trust_remote_code)
    return SentenceEncoder(encode, desc)
