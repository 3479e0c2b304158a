"""Quick-thought encoders (Logeswaran & Lee 2018; S2V): two sentence encoders f and g.

f encodes the input sentence, g the candidates; the score of a pair is ``f(s)^T g(c)``. Each
encoder has its own word embeddings (uniform in +-0.1, QT's "trained" vocabulary mode) and, with
``encoder="gru"`` (QT's), a single-layer GRU; bidirectional by default with ``encoder_dim / 2`` units
per direction and the two final states concatenated (QT's default sizes: 620-d words, 1200-d
sentences). ``encoder="bow"`` is S2V's other encoder, a bag of words: the sentence vector is the mean
of its words' embeddings (S2V sums them; the mean differs from the sum by the factor 1/length, so only
the training scores' scale changes, not the normalised evaluation embedding), and ``encoder_dim`` must
equal ``word_dim``. The sentence embedding for evaluation is ``[f(s)/||f(s)||; g(s)/||g(s)||]``.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence


@dataclass
class ModelConfig:
    vocab_size: int
    word_dim: int = 620
    encoder_dim: int = 1200
    bidirectional: bool = True
    encoder: str = "gru"  # gru | bow (a model saved before this field existed is a gru)

    def __post_init__(self):
        if self.vocab_size < 2 or self.word_dim < 1 or self.encoder_dim < 1:
            raise ValueError(f"invalid model sizes: {self}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {self.encoder!r}")
        if self.encoder == "gru" and self.bidirectional and self.encoder_dim % 2:
            raise ValueError(f"encoder_dim must be even with a bidirectional GRU, got {self.encoder_dim}")
        if self.encoder == "bow" and self.encoder_dim != self.word_dim:
            raise ValueError(f"the bow encoder's sentence vector is its mean word embedding, so encoder_dim must equal "
                             f"word_dim; got encoder_dim {self.encoder_dim}, word_dim {self.word_dim} "
                             f"(set --encoder-dim {self.word_dim})")


def _word_embeddings(cfg: ModelConfig) -> nn.Embedding:
    """QT's trained vocabulary: uniform in +-0.1, row 0 (<pad>) zero."""
    embed = nn.Embedding(cfg.vocab_size, cfg.word_dim, padding_idx=0)
    nn.init.uniform_(embed.weight, -0.1, 0.1)
    with torch.no_grad():
        embed.weight[0].zero_()
    return embed


class GRUEncoder(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = _word_embeddings(cfg)
        hidden = cfg.encoder_dim // 2 if cfg.bidirectional else cfg.encoder_dim
        self.gru = nn.GRU(cfg.word_dim, hidden, batch_first=True, bidirectional=cfg.bidirectional)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)  # [directions, B, hidden]
        return h.transpose(0, 1).reshape(ids.shape[0], -1)


class BowEncoder(nn.Module):
    """S2V's bag-of-words encoder (mean instead of sum): ``f(s) = (1/|s|) sum_{w in s} E[w]`` over the
    sentence's first ``length`` tokens (``<unk>`` included, padding not)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = _word_embeddings(cfg)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.to(ids.device)
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        x = self.embed(ids) * mask.unsqueeze(-1).to(self.embed.weight.dtype)
        return x.sum(dim=1) / lengths.clamp(min=1).unsqueeze(-1).to(x.dtype)


ENCODERS = {"gru": GRUEncoder, "bow": BowEncoder}


@torch.no_grad()
def init_word_vectors(model: "QuickThought", itos: list[str], words: list[str], vectors) -> int:
    """Copy ``vectors[k]`` (the vector of ``words[k]``) into both encoders' embedding row of that word in
    ``itos`` (the model's vocabulary, row i = ``itos[i]``); <pad> and <unk> and words without a vector keep their
    rows. Returns how many vocabulary words got a vector."""
    dim = model.f.embed.weight.shape[1]
    if vectors.shape[1] != dim:
        raise ValueError(f"word vectors have {vectors.shape[1]} dimensions, the model's word embeddings {dim}; "
                         "set --word-dim to the vectors' size")
    index = {w: k for k, w in enumerate(words)}
    rows = [(i, index[w]) for i, w in enumerate(itos) if i > 1 and w in index]
    if rows:
        dst = torch.tensor([i for i, _ in rows])
        src = torch.as_tensor(vectors[[k for _, k in rows]], dtype=model.f.embed.weight.dtype)
        for enc in (model.f, model.g):
            enc.embed.weight[dst] = src.to(enc.embed.weight.device)
    return len(rows)


class QuickThought(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.f = ENCODERS[cfg.encoder](cfg)
        self.g = ENCODERS[cfg.encoder](cfg)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(f(S), g(S))``, each ``[B, encoder_dim]``."""
        return self.f(ids, lengths), self.g(ids, lengths)

    @torch.no_grad()
    def embed(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Evaluation embedding ``[f/||f||; g/||g||]``, ``[B, 2 * encoder_dim]``."""
        u, v = self(ids, lengths)
        return torch.cat([F.normalize(u, dim=-1), F.normalize(v, dim=-1)], dim=-1)


def save_model(model: QuickThought, vocab, directory: str | os.PathLike, extra: dict | None = None) -> Path:
    """Write ``config.json``, ``vocab.json`` and ``model.safetensors`` into ``directory``
    atomically (temp dir + rename)."""
    from safetensors.torch import save_file

    directory = Path(directory)
    tmp = directory.with_name(f".{directory.name}.tmp")
    if tmp.exists():
        import shutil

        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    meta = {"type": "nlp_qt.QuickThought", "model": asdict(model.cfg), **(extra or {})}
    (tmp / "config.json").write_text(json.dumps(meta, indent=2))
    vocab.save(tmp / "vocab.json")
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(tmp / "model.safetensors"))
    # The same folder is a sentence-transformers model that carries its module's code (modeling_qt.py), so it
    # loads without nlp_qt: SentenceTransformer(path, trust_remote_code=True).
    from .st_module import write_sentence_transformers_files

    write_sentence_transformers_files(tmp)
    from shared_losses.runtime import replace_directory

    return replace_directory(tmp, directory)


def is_qt_model_dir(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / "config.json").exists() and (p / "model.safetensors").exists() and (p / "vocab.json").exists()


def load_model(directory: str | os.PathLike, device="cpu"):
    """``(model, vocab)`` from a directory written by :func:`save_model`."""
    from safetensors.torch import load_file

    from .vocab import Vocab

    directory = Path(directory)
    if not is_qt_model_dir(directory):
        raise FileNotFoundError(
            f"{directory} is not an nlp_qt model directory (expected config.json, vocab.json, model.safetensors)"
        )
    from shared_losses.runtime import read_json_file

    meta = read_json_file(directory / "config.json", "model's configuration (written by nlp_qt.train)")
    vocab = Vocab.load(directory / "vocab.json")
    try:
        model = QuickThought(ModelConfig(**meta["model"]))
        model.load_state_dict(load_file(str(directory / "model.safetensors")))
    except Exception as err:  # noqa: BLE001 - json / safetensors / shape errors: say which model is broken
        raise ValueError(
            f"{directory}: the nlp_qt model files are corrupt or do not match each other ({type(err).__name__}: {err})"
        ) from err
    return model.to(device).eval(), vocab
