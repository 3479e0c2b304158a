"""A quick-thought encoder as a sentence-transformers module that needs no nlp_qt: the code an exported model folder
carries with it.

:mod:`nlp_qt.export` copies this file, unchanged, into every model folder it writes, as ``modeling_qt.py``, and its
``modules.json`` names ``modeling_qt.QuickThoughtModule``, so the folder loads where nlp_qt is not installed:

    from sentence_transformers import SentenceTransformer
    model = SentenceTransformer("runs/qt/model_step4000", trust_remote_code=True)
    vectors = model.encode(["A sentence.", "Another one."])   # nlp_qt's own vectors, [f/|f|; g/|g|]

``trust_remote_code=True`` lets sentence-transformers import this file from the folder (it does so for every
module class it does not ship). Self-contained on purpose: Python's standard library, torch and safetensors
(a dependency of sentence-transformers) only. It reads the folder's nlp_qt files (``config.json``: the model's
sizes; ``vocab.json``: the words and the tokenizer settings; ``model.safetensors``: the weights of both encoders
f and g) and computes what :func:`nlp_qt.senteval.make_qt_encoder` computes: the same tokenizer
(defined here; :mod:`nlp_qt.vocab` imports it, so both tokenize alike), the same ids, the same
GRU, bag-of-words or convolutional encoders, the same ``[f/|f|; g/|g|]`` (a CPC model, ``heads: cpc``: its one
encoder's ``f/|f|``; its training heads, the GRU context and the prediction maps, do not take part, but are kept
and written back by ``save``, as are config.json's other entries, so a saved folder loads in nlp_qt again). Texts
are read whole; ``model.max_seq_length = N`` cuts them to their first N tokens (None: whole texts again), and
``save`` keeps it (config.json's ``max_seq_length``; ``processor_kwargs={"model_max_length": N}`` sets it when
loading). ``model.tokenizer`` shows the tokenizer and vocabulary (:class:`QuickThoughtTokenizer`); ``model_kwargs=
{"dtype": torch.float16}`` loads the weights in that dtype. The module gives sentence vectors only:
``encode(output_value="token_embeddings")`` is refused with a message saying so. The module trains in
sentence-transformers (its losses and trainer): the vector keeps its gradient; encoding (``encode``) runs without
one.
"""

from __future__ import annotations

import bisect
import functools
import json
import os
import re
import shutil
import sys
import unicodedata
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

MODULE_FILE = "modeling_qt.py"  # this file's name in a model folder
MODULE_TYPE = "modeling_qt.QuickThoughtModule"  # what modules.json names

# --- the tokenizer of nlp_qt (nlp_qt.vocab imports it from here) --------------------------------------------------

PAD, UNK = "<pad>", "<unk>"
_TOKEN = re.compile(r"[A-Za-z0-9\u00C0-\u024F]+(?:['’\-][A-Za-z0-9\u00C0-\u024F]+)*|n't|'[A-Za-z]+|[^\sA-Za-z0-9]")
# English clitics split off as NLTK's word_tokenize and the PTB tokenizer do ("don't" -> "do n't",
# "it's" -> "it 's"): SentEval's files are PTB-tokenized, so training text must be split the same way
# for its words to meet the evaluation's.
_NOT = re.compile(r"(?i)([a-z])(n['’]t)\b")
_CLITIC = re.compile(r"(?i)([a-z0-9])(['’](?:s|re|ve|ll|d|m))\b")
# The tokenizer a vocabulary records ("tokenizer" in vocab.json): version 3 takes words of every script whole;
# version 2 splits clitics off but knows only Latin letters (a Cyrillic or Greek word falls apart into its letters);
# version 1, Latin letters only too, keeps "don't" and "it's" whole and is the one a vocab.json without that field is
# read with. A model is always read with the tokenizer it was trained with.
TOKENIZER_VERSION = 3


#: Blocks of the scripts written without spaces between words (Thai, Lao, Myanmar, Khmer, the kana, Han
#: ideographs with their radicals and strokes): a run of their letters is a phrase, not a word, so each of their
#: characters is a token of its own (as BERT's tokenizer treats Han), not a word character.
NO_SPACE_BLOCKS = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF), (0x19E0, 0x19FF), (0x2E80, 0x2FDF),
                   (0x3005, 0x3007), (0x3021, 0x3029), (0x3031, 0x3035), (0x3038, 0x303C), (0x3040, 0x30FF),
                   (0x31C0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA9E0, 0xA9FF), (0xAA60, 0xAA7F),
                   (0xF900, 0xFAFF), (0xFF66, 0xFF9F), (0x1B000, 0x1B16F), (0x20000, 0x3FFFF))


def is_word_char(char: str) -> bool:
    """True if words of tokenizer version 3 are made of ``char``: below U+0250 the characters of versions 1 and 2
    (A-Z, a-z, 0-9, À-ɏ: × and ÷ too, not ª µ º), so Latin text splits as before; from U+0250 on, a letter, mark or
    decimal digit (Unicode categories L*, M*, Nd) of any script but those of :data:`NO_SPACE_BLOCKS`."""
    if char < "\u0250":
        return char.isascii() and char.isalnum() or char >= "\u00c0"
    category = unicodedata.category(char)
    if not (category[0] in "LM" or category == "Nd"):
        return False
    code = ord(char)
    i = bisect.bisect_right(_NO_SPACE_STARTS, code) - 1
    return i < 0 or code > NO_SPACE_BLOCKS[i][1]


_NO_SPACE_STARTS = [lo for lo, _ in NO_SPACE_BLOCKS]


def code_point_ranges(pred) -> list[tuple[int, int]]:
    """The runs ``(first, last)`` of code points ``c`` for which ``pred(chr(c))`` holds, in order (a scan of every
    code point of the running Python's Unicode tables)."""
    ranges, start = [], None
    for c in range(sys.maxunicode + 2):
        if c <= sys.maxunicode and pred(chr(c)):
            start = c if start is None else start
        elif start is not None:
            ranges.append((start, c - 1))
            start = None
    return ranges


@functools.lru_cache(maxsize=None)
def word_char_ranges() -> list[tuple[int, int]]:
    """:func:`code_point_ranges` of :func:`is_word_char`, scanned once a process."""
    return code_point_ranges(is_word_char)


@functools.lru_cache(maxsize=None)
def _unicode_token() -> re.Pattern:
    """Version 3's ``_TOKEN``: its Latin class replaced by :func:`is_word_char`'s characters (the running Python's
    Unicode tables), written out on first use (a scan of every code point, about 0.3 s). The class is two: ``re``
    looks a character of the Basic Multilingual Plane up in a table but tries the ranges beyond it one by one, so
    those are tried only for a character beyond it (4 times faster on English, the same matches)."""
    ranges = word_char_ranges()

    def char_class(spans) -> str:
        return "[" + "".join(f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in spans) + "]"

    bmp = [(lo, min(hi, 0xFFFF)) for lo, hi in ranges if lo <= 0xFFFF]
    astral = [(max(lo, 0x10000), hi) for lo, hi in ranges if hi > 0xFFFF]
    word = f"(?:{char_class(bmp)}|(?=[\\U00010000-\\U0010ffff]){char_class(astral)})"
    return re.compile(rf"{word}+(?:['’\-]{word}+)*|n't|'[A-Za-z]+|[^\sA-Za-z0-9]")


def tokenize(sentence: str, lowercase: bool = False, version: int = TOKENIZER_VERSION) -> list[str]:
    """Split a sentence into word and punctuation tokens (clitics such as n't and 's apart)."""
    if lowercase:
        sentence = sentence.lower()
    if version == 1:
        return _TOKEN.findall(sentence)
    if version not in (2, 3):
        raise ValueError(f"unknown tokenizer version {version} (this tokenizer knows 1, 2 and 3)")
    sentence = _NOT.sub(lambda m: f"{m.group(1)} {m.group(2)[0]}'t", sentence)
    sentence = _CLITIC.sub(lambda m: f"{m.group(1)} '{m.group(2)[1:]}", sentence)
    return (_TOKEN if version == 2 else _unicode_token()).findall(sentence)


def check_texts(texts, what: str = "encode") -> list[str]:
    """``texts`` as a list of str, or a TypeError that says what was expected and names the first bad item's
    position and type. A single str is refused (iterating it would encode its characters one by one)."""
    if isinstance(texts, str):
        raise TypeError(f"{what} expects a list of sentences (strings), got a single string; wrap it in a list: "
                        f"{what}([text])")
    if isinstance(texts, (bytes, bytearray)) or not hasattr(texts, "__iter__") or isinstance(texts, dict):
        raise TypeError(f"{what} expects a list of sentences (strings), got {type(texts).__name__}")
    texts = list(texts)
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            hint = "; decode bytes to str first" if isinstance(t, (bytes, bytearray)) else ""
            raise TypeError(f"{what} expects a list of sentences (strings): item {i} is {type(t).__name__} "
                            f"({_short(t)}){hint}")
    return texts


def _short(value, n: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= n else text[: n - 3] + "..."


class Vocab:
    """Word ids of a model folder's ``vocab.json`` (:class:`nlp_qt.vocab.Vocab`'s reading side)."""

    def __init__(self, words: list[str], max_len: int = 50, lowercase: bool = False,
                 tokenizer: int = TOKENIZER_VERSION):
        tokenize("", version=tokenizer)  # refuses an unknown version
        self.tokenizer = tokenizer
        self.itos = [PAD, UNK] + [w for w in words if w not in (PAD, UNK)]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.max_len = max_len
        self.lowercase = lowercase

    def __len__(self) -> int:
        return len(self.itos)

    def encode(self, sentence: str, max_len: int | None = None) -> list[int]:
        cut = self.max_len if max_len is None else max_len
        ids = [self.stoi.get(t, 1) for t in tokenize(sentence, self.lowercase, self.tokenizer)[:cut]]
        return ids or [1]  # an empty text is one <unk>

    def batch(self, sentences: list[str], max_len: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        enc = [self.encode(s, max_len) for s in sentences]
        lengths = torch.tensor([len(e) for e in enc], dtype=torch.long)
        ids = torch.zeros(len(enc), int(lengths.max()) if enc else 1, dtype=torch.long)
        for i, e in enumerate(enc):
            ids[i, : len(e)] = torch.tensor(e, dtype=torch.long)
        return ids, lengths

    def to_json(self) -> dict:
        return {"itos": self.itos, "max_len": self.max_len, "lowercase": self.lowercase, "tokenizer": self.tokenizer}

    @classmethod
    def from_json(cls, data: dict) -> "Vocab":
        return cls(data["itos"][2:], data["max_len"], data["lowercase"], data.get("tokenizer", 1))


# --- the encoders: nlp_qt.model's modules, with the same parameter names ------------------------------------------

ENCODER_TYPES = ("gru", "bow", "conv")


class GRUEncoder(nn.Module):
    def __init__(self, cfg: dict):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["word_dim"], padding_idx=0)
        hidden = cfg["encoder_dim"] // 2 if cfg["bidirectional"] else cfg["encoder_dim"]
        self.gru = nn.GRU(cfg["word_dim"], hidden, batch_first=True, bidirectional=cfg["bidirectional"])

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(self.embed(ids), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)  # [directions, B, hidden]
        return h.transpose(0, 1).reshape(ids.shape[0], -1)


class BowEncoder(nn.Module):
    """The mean of the embeddings of the text's tokens (``<unk>`` included, padding not)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["word_dim"], padding_idx=0)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.to(ids.device)
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        x = self.embed(ids) * mask.unsqueeze(-1).to(self.embed.weight.dtype)
        return x.sum(dim=1) / lengths.clamp(min=1).unsqueeze(-1).to(x.dtype)


class ConvEncoder(nn.Module):
    """CPC's sentence encoder: the mean over the text's positions of ReLU(1D convolution of its embeddings)."""

    def __init__(self, cfg: dict):
        super().__init__()
        self.embed = nn.Embedding(cfg["vocab_size"], cfg["word_dim"], padding_idx=0)
        self.conv = nn.Conv1d(cfg["word_dim"], cfg["encoder_dim"], cfg["conv_width"], padding=cfg["conv_width"] // 2)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.to(ids.device)
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        x = self.embed(ids) * mask.unsqueeze(-1).to(self.embed.weight.dtype)
        h = F.relu(self.conv(x.transpose(1, 2)))[:, :, : ids.shape[1]]
        h = h * mask.unsqueeze(1).to(h.dtype)
        return h.sum(dim=2) / lengths.clamp(min=1).unsqueeze(-1).to(h.dtype)


class QuickThought(nn.Module):
    """Encoders f and g (a CPC model: f only); :meth:`embed` is the evaluation vector ``[f/|f|; g/|g|]``
    (``f/|f|``)."""

    def __init__(self, cfg: dict):
        super().__init__()
        cfg = {"bidirectional": True, "encoder": "gru", "heads": "qt", "conv_width": 3, **cfg}
        if cfg["encoder"] not in ENCODER_TYPES:
            raise ValueError(f"encoder must be one of {', '.join(ENCODER_TYPES)}, got {cfg['encoder']!r}")
        if cfg["heads"] not in ("qt", "cpc"):
            raise ValueError(f"heads must be qt or cpc, got {cfg['heads']!r}")
        self.cfg = cfg
        kind = {"gru": GRUEncoder, "bow": BowEncoder, "conv": ConvEncoder}[cfg["encoder"]]
        self.f = kind(cfg)
        self.g = None if cfg["heads"] == "cpc" else kind(cfg)
        # what a folder holds beside the encoders, kept for save(): the CPC training heads' weights (cpc.*, not
        # modules here) and config.json's entries other than the model's sizes (train_config, step)
        self.kept_state: dict[str, torch.Tensor] = {}
        self.kept_config: dict = {}

    @property
    def embedding_dim(self) -> int:
        return self.cfg["encoder_dim"] * (1 if self.g is None else 2)

    def embed(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """``[f/|f|; g/|g|]`` with its gradient (sentence-transformers trains through it; its ``encode`` runs in
        inference mode)."""
        u = F.normalize(self.f(ids, lengths), dim=-1)
        if self.g is None:
            return u
        return torch.cat([u, F.normalize(self.g(ids, lengths), dim=-1)], dim=-1)


def load_folder(path: str | os.PathLike) -> tuple[QuickThought, Vocab]:
    """``(model, vocab)`` from a folder holding ``config.json``, ``vocab.json`` and ``model.safetensors``; a
    missing or damaged file is a ValueError that names it."""
    from safetensors.torch import load_file

    path = Path(path)
    for name in ("config.json", "vocab.json", "model.safetensors"):
        if not (path / name).is_file():
            raise ValueError(f"{path} is not a quick-thought model folder: it has no {name}")
    parts = {}
    for name in ("config.json", "vocab.json"):
        try:
            parts[name] = json.loads((path / name).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:
            raise ValueError(f"{path / name} is damaged (not valid JSON: {err})") from None
    try:
        model = QuickThought(parts["config.json"]["model"])
        vocab = Vocab.from_json(parts["vocab.json"])
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{path}: config.json or vocab.json is not a quick-thought model's "
                         f"({type(err).__name__}: {err})") from None
    try:
        state = load_file(str(path / "model.safetensors"))
    except Exception as err:  # noqa: BLE001 - safetensors' own errors: a truncated or overwritten file
        raise ValueError(f"{path / 'model.safetensors'} is damaged ({type(err).__name__}: {err})") from None
    if model.g is None:  # a CPC model: its training heads (cpc.*) are not part of the sentence encoder; save keeps them
        model.kept_state = {k: v for k, v in state.items() if k.startswith("cpc.")}
        state = {k: v for k, v in state.items() if not k.startswith("cpc.")}
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        reasons = sorted((line.strip().rstrip(". ") for line in str(err).splitlines()[1:] if line.strip()),
                         key=lambda r: not r.startswith("size mismatch"))  # the shapes first: they say the most
        raise ValueError(f"{path / 'model.safetensors'} does not match {path / 'config.json'} "
                         f"({'; '.join(reasons[:2]) or str(err).strip()})") from None
    model.kept_config = {k: v for k, v in parts["config.json"].items() if k not in ("type", "model", MAX_SEQ_LENGTH)}
    model.max_seq_length = parts["config.json"].get(MAX_SEQ_LENGTH)
    return model.eval(), vocab


#: config.json's entry for sentence-transformers' ``model.max_seq_length`` when one was set before ``save``
MAX_SEQ_LENGTH = "max_seq_length"


class QuickThoughtTokenizer:
    """The model's tokenizer and vocabulary as ``model.tokenizer`` (and ``model.processor``) shows them: the words a
    text is split into (:meth:`tokenize`), their ids and back, and ``__call__`` giving the ids the module encodes.
    Words outside the vocabulary are ``<unk>`` (id 1); ``<pad>`` is id 0."""

    def __init__(self, module: "QuickThoughtModule"):
        self._module = module

    @property
    def vocab(self) -> Vocab:
        return self._module.vocab

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def __len__(self) -> int:
        return len(self.vocab)

    @property
    def model_max_length(self) -> int | None:
        """The module's ``max_seq_length`` (None: texts are read whole)."""
        return self._module.max_seq_length

    @property
    def pad_token(self) -> str:
        return PAD

    @property
    def unk_token(self) -> str:
        return UNK

    def get_vocab(self) -> dict[str, int]:
        return dict(self.vocab.stoi)

    def tokenize(self, text: str) -> list[str]:
        """The words of ``text`` as the model reads them (lower-cased where the model was trained so)."""
        return tokenize(text, self.vocab.lowercase, self.vocab.tokenizer)

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self.vocab.stoi.get(tokens, 1)
        return [self.vocab.stoi.get(t, 1) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self.vocab.itos[ids]
        return [self.vocab.itos[int(i)] for i in ids]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        words = self.convert_ids_to_tokens(list(ids))
        return " ".join(w for w in words if not (skip_special_tokens and w == PAD))

    def __call__(self, texts, **kwargs) -> dict[str, torch.Tensor]:
        """``input_ids`` (padded with 0), ``attention_mask`` and ``lengths`` of ``texts`` (a str or a list), cut to
        ``max_seq_length`` as the module cuts them."""
        single = isinstance(texts, str)
        out = self._module.tokenize([texts] if single else texts)
        ids, lengths = out["input_ids"], out["lengths"]
        mask = (torch.arange(ids.shape[1])[None, :] < lengths[:, None]).long()
        return {"input_ids": ids, "attention_mask": mask, "lengths": lengths}

    def __repr__(self) -> str:
        return (f"QuickThoughtTokenizer(vocab_size={self.vocab_size}, lowercase={self.vocab.lowercase}, "
                f"tokenizer_version={self.vocab.tokenizer}, max_seq_length={self.model_max_length})")


class SentenceOutputs(dict):
    """The module's outputs: sentence vectors only. sentence-transformers' ``encode(output_value=...)`` reads a key of
    it; one the module does not give is named in the error instead of a bare ``KeyError: 'token_embeddings'``."""

    def __missing__(self, key):
        raise KeyError(f"the quick-thought module gives sentence embeddings only ('sentence_embedding'), not {key!r}: "
                       "its vector is [f/|f|; g/|g|] of two encoders read to each text's end, with no vector per "
                       "token; encode with output_value='sentence_embedding' (the default)")


class QuickThoughtModule(nn.Module):
    """sentence-transformers module: tokenises with the model's vocabulary and returns ``[f/|f|; g/|g|]``."""

    save_in_root = True  # the module's files are the folder's own (sentence-transformers' save writes them there)

    def __init__(self, model: QuickThought, vocab: Vocab, max_seq_length: int | None = None):
        super().__init__()
        self.qt, self.vocab = model, vocab
        # tokens of each text read (None: all); sentence-transformers' model.max_seq_length reads and sets it, and
        # save keeps it (config.json's max_seq_length)
        self.max_seq_length: int | None = max_seq_length

    @property
    def tokenizer(self) -> QuickThoughtTokenizer:
        """The tokenizer and vocabulary (sentence-transformers' ``model.tokenizer``)."""
        return QuickThoughtTokenizer(self)

    processor = tokenizer  # sentence-transformers' newer name for it

    def tokenize(self, texts, **kwargs) -> dict[str, torch.Tensor]:
        cut = self.max_seq_length
        if cut is not None and (isinstance(cut, bool) or not isinstance(cut, int) or cut < 1):
            raise ValueError(f"max_seq_length must be a positive int or None (whole texts), got {cut!r}")
        strings = []
        for t in texts:
            if isinstance(t, (list, tuple)) and all(isinstance(w, str) for w in t):
                t = " ".join(t)  # a text given as its words
            if not isinstance(t, str):
                raise TypeError(f"QuickThoughtModule encodes texts (str), got {type(t).__name__} ({_short(t)})")
            strings.append(t)
        ids, lengths = self.vocab.batch(strings, max_len=sys.maxsize if cut is None else cut)
        return {"input_ids": ids, "lengths": lengths}

    def preprocess(self, inputs, prompt: str | None = None, **kwargs) -> dict[str, torch.Tensor]:
        if prompt:
            inputs = [prompt + t for t in inputs]
        return self.tokenize(inputs)

    def forward(self, features: dict, **kwargs) -> dict:
        ids = features["input_ids"]
        features["sentence_embedding"] = self.qt.embed(ids, features["lengths"].to(torch.long).cpu())
        return features if isinstance(features, SentenceOutputs) else SentenceOutputs(features)

    def get_sentence_embedding_dimension(self) -> int:
        return self.qt.embedding_dim

    get_embedding_dimension = get_sentence_embedding_dimension

    def get_max_seq_length(self) -> int | None:
        return self.max_seq_length

    @property
    def modalities(self) -> list[str]:
        return ["text"]

    def save(self, output_path: str, *args, **kwargs) -> None:
        """The folder's nlp_qt files and this code (``modeling_qt.py``): sentence-transformers then names
        ``modeling_qt.QuickThoughtModule`` in modules.json when this class was loaded from a folder's copy."""
        from safetensors.torch import save_file

        out = Path(output_path)
        out.mkdir(parents=True, exist_ok=True)
        cfg = {k: self.qt.cfg[k] for k in ("vocab_size", "word_dim", "encoder_dim", "bidirectional", "encoder", "heads",
                                           "cpc_steps", "conv_width") if k in self.qt.cfg}
        meta = {"type": "nlp_qt.QuickThought", "model": cfg, **getattr(self.qt, "kept_config", {})}
        if self.max_seq_length is not None:  # as sentence-transformers' own modules keep theirs
            meta[MAX_SEQ_LENGTH] = self.max_seq_length
        (out / "config.json").write_text(json.dumps(meta, indent=2))
        (out / "vocab.json").write_text(json.dumps(self.vocab.to_json()))
        state = {k: v.detach().cpu().contiguous() for k, v in self.qt.state_dict().items()}
        state.update({k: v.detach().cpu().contiguous() for k, v in getattr(self.qt, "kept_state", {}).items()})
        save_file(state, str(out / "model.safetensors"))
        # safetensors 0.8 writes through a temporary file made 0600: give it the mode of the folder's other files
        os.chmod(out / "model.safetensors", os.stat(out / "config.json").st_mode & 0o777)
        source = Path(__file__).resolve()
        if source != (out / MODULE_FILE).resolve():
            shutil.copyfile(source, out / MODULE_FILE)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> "QuickThoughtModule":
        path = Path(model_name_or_path, subfolder)
        if not path.is_dir():  # a hub repository: sentence-transformers fetches its files
            from sentence_transformers.util import load_dir_path

            path = Path(load_dir_path(model_name_or_path, subfolder=subfolder, token=token, cache_folder=cache_folder,
                                      revision=revision, local_files_only=local_files_only))
        backend = kwargs.get("backend")
        if backend not in (None, "torch"):
            raise ValueError(f"the quick-thought module runs in torch only, not backend={backend!r} (sentence-"
                             "transformers' onnx and openvino backends export transformers models)")
        model, vocab = load_folder(path)
        module = cls(model, vocab, getattr(model, "max_seq_length", None))
        processor_kwargs = {**(kwargs.get("tokenizer_kwargs") or {}), **(kwargs.get("processor_kwargs") or {})}
        cut = processor_kwargs.pop("model_max_length", processor_kwargs.pop("max_length", None))
        if cut is not None:
            module.max_seq_length = cut
        model_kwargs = dict(kwargs.get("model_kwargs") or {})
        dtype = model_kwargs.pop("torch_dtype", model_kwargs.pop("dtype", None))
        if dtype not in (None, "auto"):
            if isinstance(dtype, str):
                if not isinstance(getattr(torch, dtype.removeprefix("torch."), None), torch.dtype):
                    raise ValueError(f"model_kwargs dtype {dtype!r} is not a torch dtype (float32, float16, bfloat16)")
                dtype = getattr(torch, dtype.removeprefix("torch."))
            module.qt.to(dtype)
        unused = sorted(model_kwargs) + sorted(processor_kwargs)
        if unused:
            warnings.warn(f"the quick-thought module does not use {', '.join(unused)} (model_kwargs takes dtype / "
                          "torch_dtype, processor_kwargs model_max_length)", stacklevel=2)
        return module
