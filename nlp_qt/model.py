"""Quick-thought encoders (Logeswaran & Lee 2018; S2V): two sentence encoders f and g.

f encodes the input sentence, g the candidates; the score of a pair is ``f(s)^T g(c)``. Each
encoder has its own word embeddings (uniform in +-0.1, QT's "trained" vocabulary mode) and, with
``encoder="gru"`` (QT's), a single-layer GRU; bidirectional by default with ``encoder_dim / 2`` units
per direction and the two final states concatenated (QT's default sizes: 620-d words, 1200-d
sentences). ``encoder="bow"`` is S2V's other encoder, a bag of words: the sentence vector is the mean
of its words' embeddings (S2V sums them; the mean differs from the sum by the factor 1/length, so only
the training scores' scale changes, not the normalised evaluation embedding), and ``encoder_dim`` must
equal ``word_dim``. ``encoder="conv"`` is CPC's sentence encoder (section 3.3): a 1D convolution over the word
embeddings, ReLU, and the mean over the sentence's positions. The sentence embedding for evaluation is
``[f(s)/||f(s)||; g(s)/||g(s)||]``.

``heads="cpc"`` is Contrastive Predictive Coding's model instead (van den Oord et al. 2018, section 3.3): one
sentence encoder f (no g), a GRU over consecutive sentence vectors (the autoregressive context ``c_t``) and the
K prediction maps ``W_k`` (:class:`shared_losses.CPCLoss`); the last two are training heads, saved with the model
but not part of the evaluation embedding, which is ``f(s)/||f(s)||``.
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
    encoder: str = "gru"  # gru | bow | conv
    heads: str = "qt"  # qt: f and g (quick-thought) | cpc: f, a GRU context and K prediction maps (CPC)
    cpc_steps: int = 3  # K: sentences predicted ahead (heads cpc)
    conv_width: int = 3  # the convolution's window in words (encoder conv)

    def __post_init__(self):
        if self.vocab_size < 2 or self.word_dim < 1 or self.encoder_dim < 1:
            raise ValueError(f"invalid model sizes: {self}")
        if self.encoder not in ENCODERS:
            raise ValueError(f"encoder must be one of {', '.join(ENCODERS)}, got {self.encoder!r}")
        if self.encoder == "gru" and self.bidirectional and self.encoder_dim % 2:
            raise ValueError(f"encoder_dim must be even with a bidirectional GRU, got {self.encoder_dim}")
        if self.heads not in ("qt", "cpc"):
            raise ValueError(f"heads must be qt or cpc, got {self.heads!r}")
        if self.cpc_steps < 1 or self.conv_width < 1:
            raise ValueError(f"cpc_steps and conv_width must be >= 1, got {self.cpc_steps} and {self.conv_width}")
        if self.encoder == "bow" and self.encoder_dim != self.word_dim:
            raise ValueError(f"the bow encoder's sentence vector is its mean word embedding, so encoder_dim must equal "
                             f"word_dim; got encoder_dim {self.encoder_dim}, word_dim {self.word_dim} "
                             f"(set --encoder-dim {self.word_dim})")


def model_config(cfg, vocab_size: int) -> ModelConfig:
    """The model of a run's configuration (:class:`nlp_qt.config.Config`) over a vocabulary of ``vocab_size``."""
    from .objectives import OBJECTIVES

    return ModelConfig(vocab_size, cfg.word_dim, cfg.encoder_dim, cfg.bidirectional, cfg.encoder,
                       OBJECTIVES.get(cfg.objective).heads, cfg.cpc_steps, cfg.conv_width)


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


class ConvEncoder(nn.Module):
    """CPC's sentence encoder (section 3.3): ``f(s) = mean_i ReLU(conv(E[s])_i)`` over the positions of the
    sentence's first ``length`` tokens; the convolution spans ``conv_width`` words (zero padding keeps one output
    per word)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = _word_embeddings(cfg)
        self.conv = nn.Conv1d(cfg.word_dim, cfg.encoder_dim, cfg.conv_width, padding=cfg.conv_width // 2)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        lengths = lengths.to(ids.device)
        mask = torch.arange(ids.shape[1], device=ids.device)[None, :] < lengths[:, None]
        x = self.embed(ids) * mask.unsqueeze(-1).to(self.embed.weight.dtype)
        h = F.relu(self.conv(x.transpose(1, 2)))[:, :, : ids.shape[1]]  # [B, encoder_dim, L]
        h = h * mask.unsqueeze(1).to(h.dtype)
        return h.sum(dim=2) / lengths.clamp(min=1).unsqueeze(-1).to(h.dtype)


ENCODERS = {"gru": GRUEncoder, "bow": BowEncoder, "conv": ConvEncoder}


class CPCHeads(nn.Module):
    """CPC's training heads over a run of sentence vectors: a GRU (the context ``c_t`` of the sentences up to t)
    and the K maps ``W_k`` of :class:`shared_losses.CPCLoss` (the loss's settings are given per call)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        from shared_losses import CPCLoss

        self.context = nn.GRU(cfg.encoder_dim, cfg.encoder_dim, batch_first=True)
        self.loss = CPCLoss(cfg.encoder_dim, cfg.encoder_dim, steps=cfg.cpc_steps)


@torch.no_grad()
def init_word_vectors(model: "QuickThought", itos: list[str], words: list[str], vectors) -> int:
    """Copy ``vectors[k]`` (the vector of ``words[k]``) into both encoders' embedding row of that word in
    ``itos`` (the model's vocabulary, row i = ``itos[i]``); <pad> and <unk> and words without a vector keep their
    rows. Returns how many vocabulary words got a vector."""
    dim = model.f.embed.weight.shape[1]
    encoders = [e for e in (model.f, model.g) if e is not None]
    if vectors.shape[1] != dim:
        raise ValueError(f"word vectors have {vectors.shape[1]} dimensions, the model's word embeddings {dim}; "
                         "set --word-dim to the vectors' size")
    index = {w: k for k, w in enumerate(words)}
    rows = [(i, index[w]) for i, w in enumerate(itos) if i > 1 and w in index]
    if rows:
        dst = torch.tensor([i for i, _ in rows])
        src = torch.as_tensor(vectors[[k for _, k in rows]], dtype=model.f.embed.weight.dtype)
        for enc in encoders:
            enc.embed.weight[dst] = src.to(enc.embed.weight.device)
    return len(rows)


class QuickThought(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.f = ENCODERS[cfg.encoder](cfg)
        if cfg.heads == "cpc":
            self.g = None
            self.cpc = CPCHeads(cfg)
        else:
            self.g = ENCODERS[cfg.encoder](cfg)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor, cpc: dict | None = None):
        """``(f(S), g(S))``, each ``[B, encoder_dim]`` (heads cpc: ``(f(S), f(S))``, the same tensor twice). With
        ``cpc`` (heads cpc; the keyword arguments of :func:`nlp_qt.objectives.sequence_loss` after ``u``): CPC's
        ``(loss, anchors)`` of the run of sentences S, computed here so that a distributed wrapper sees the heads
        used in its forward."""
        u = self.f(ids, lengths)
        if cpc is not None:
            if self.g is not None:
                raise ValueError("cpc= needs a model with CPC's heads (heads='cpc')")
            from .objectives import sequence_loss

            return sequence_loss(self.cpc, u, **cpc)
        return u, (u if self.g is None else self.g(ids, lengths))

    @property
    def embedding_dim(self) -> int:
        return self.cfg.encoder_dim * (1 if self.g is None else 2)

    @torch.no_grad()
    def embed(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Evaluation embedding ``[f/||f||; g/||g||]``, ``[B, 2 * encoder_dim]`` (heads cpc: ``f/||f||``)."""
        u = F.normalize(self.f(ids, lengths), dim=-1)
        if self.g is None:
            return u
        return torch.cat([u, F.normalize(self.g(ids, lengths), dim=-1)], dim=-1)


def save_model(model: QuickThought, vocab, directory: str | os.PathLike, extra: dict | None = None) -> Path:
    """Write ``config.json``, ``vocab.json`` and ``model.safetensors`` into ``directory``
    atomically (temp dir + rename)."""
    from safetensors.torch import save_file

    from shared_losses.training.runtime import written_whole

    from .st_module import write_sentence_transformers_files

    directory = Path(directory)
    with written_whole(directory, folder=True) as tmp:
        meta = {"type": "nlp_qt.QuickThought", "model": asdict(model.cfg), **(extra or {})}
        (tmp / "config.json").write_text(json.dumps(meta, indent=2))
        vocab.save(tmp / "vocab.json")
        state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
        save_file(state, str(tmp / "model.safetensors"))
        # The same folder is a sentence-transformers model that carries its module's code (modeling_qt.py), so it
        # loads without nlp_qt: SentenceTransformer(path, trust_remote_code=True).
        write_sentence_transformers_files(tmp)
    return directory


def is_qt_model_dir(path: str | os.PathLike) -> bool:
    p = Path(path)
    return (p / "config.json").exists() and (p / "model.safetensors").exists() and is_qt_vocab(p / "vocab.json")


def is_qt_vocab(file: Path) -> bool:
    """Whether ``file`` is nlp_qt's vocab.json: it exists and is not another tokenizer's (RoBERTa's, GPT-2's, which
    sentence-transformers folders hold at their top: a JSON object without nlp_qt's ``itos``). A damaged one counts
    as nlp_qt's, so that loading it names the damage."""
    if not file.is_file():
        return False
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, OSError):
        return True
    return not isinstance(data, dict) or "itos" in data


def load_model(directory: str | os.PathLike, device="cpu"):
    """``(model, vocab)`` from a directory written by :func:`save_model` (or by sentence-transformers' save of
    such a model). A CPC model (``heads: cpc``) whose folder lacks the training heads' weights (``cpc.*``: a
    sentence-transformers save from before it kept them) loads with freshly initialised heads: it encodes as
    saved (the heads take no part in the sentence vector)."""
    from safetensors.torch import load_file

    from .vocab import Vocab

    directory = Path(directory)
    if not is_qt_model_dir(directory):
        raise FileNotFoundError(
            f"{directory} is not an nlp_qt model directory (expected config.json, vocab.json, model.safetensors)"
        )
    from shared_losses.training.runtime import read_json_file

    meta = read_json_file(directory / "config.json", "model's configuration (written by nlp_qt.train)")
    vocab = Vocab.load(directory / "vocab.json")
    try:
        model = QuickThought(ModelConfig(**meta["model"]))
        if len(vocab.itos) != model.cfg.vocab_size:  # a word beyond the table failed at encode time, or encoded
            raise ValueError(f"vocab.json holds {len(vocab.itos)} words, the model's table {model.cfg.vocab_size}")
        state = load_file(str(directory / "model.safetensors"))
        if model.g is None and not any(k.startswith("cpc.") for k in state):  # encoder only: heads as initialised
            state.update({k: v for k, v in model.state_dict().items() if k.startswith("cpc.")})
        model.load_state_dict(state)
    except Exception as err:  # noqa: BLE001 - json / safetensors / shape errors: say which model is broken
        raise ValueError(
            f"{directory}: the nlp_qt model files are corrupt or do not match each other ({type(err).__name__}: {err})"
        ) from err
    # the cut sentence-transformers' save records when model.max_seq_length was set (nlp_qt.modeling_qt); None: none
    cut = meta.get("max_seq_length") if isinstance(meta, dict) else None
    model.max_seq_length = cut if isinstance(cut, int) and not isinstance(cut, bool) and cut > 0 else None
    return model.to(device).eval(), vocab
