"""The debiased contrastive loss (DCL) as a sentence-transformers loss.

A drop-in beside ``sentence_transformers.losses.MultipleNegativesRankingLoss`` (MNRL): the same
``(anchor, positive[, negative...])`` inputs, cosine similarity times ``scale`` as logits, in-batch
negatives (every other positive / hard negative in the batch). With ``tau_plus = 0`` the loss is
exactly MNRL's (its default ``query_to_doc`` direction); with ``tau_plus > 0`` it is DCL eq. (7)
computed by ``shared_losses.debiased_nce_from_logits``. Floor: cosine >= -1, so the paper's bound
``e^{-scale}`` applies (``log_floor = -scale``).

Example::

    from sentence_transformers import SentenceTransformer, SentenceTransformerTrainer
    from nlp_qt.st_loss import DebiasedMultipleNegativesRankingLoss
    model = SentenceTransformer("all-MiniLM-L6-v2")
    loss = DebiasedMultipleNegativesRankingLoss(model, scale=20.0, tau_plus=0.01)
    SentenceTransformerTrainer(model=model, train_dataset=pairs, loss=loss).train()
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import Tensor, nn

from shared_losses import debiased_nce_from_logits, gather_with_grad
from shared_losses._core import full_precision


def _cos_sim(a: Tensor, b: Tensor) -> Tensor:
    a = nn.functional.normalize(a, p=2, dim=1)
    b = nn.functional.normalize(b, p=2, dim=1)
    return a @ b.T


def _widen(t: Tensor) -> Tensor:
    return t if t.dtype == torch.float64 else t.float()


@full_precision
def _full_precision_loss(loss: "DebiasedMultipleNegativesRankingLoss", embeddings: list[Tensor]) -> Tensor:
    anchors = embeddings[0]
    docs = torch.cat(embeddings[1:], dim=0)  # [k * B, d]: positives first, then hard negatives
    b = anchors.shape[0]
    offset = 0
    if loss.gather_across_devices:
        anchors_all, rank, world = gather_with_grad(anchors)
        cols = [gather_with_grad(e)[0] for e in embeddings[1:]]
        docs = torch.cat(cols, dim=0)
        offset = rank * b
        del anchors_all
    if docs.shape[0] == 1:  # one anchor, one candidate (its positive): no negative; MNRL's cross-entropy is 0 here
        return (anchors.sum() + docs.sum()) * 0.0 + 0.0  # 0 with the graph kept (+ 0.0: not -0.0)
    # float32 before the normalisation: bf16/fp16 cosines are off by ~1e-3, times scale in the logits
    logits = _cos_sim(_widen(anchors), _widen(docs)) * loss.scale  # [b, C]
    rows = torch.arange(b, device=logits.device)
    pos_idx = rows + offset
    pos = logits[rows, pos_idx].unsqueeze(1)
    is_pos = torch.zeros_like(logits, dtype=torch.bool)
    is_pos[rows, pos_idx] = True
    neg = logits.masked_fill(is_pos, float("-inf"))
    return debiased_nce_from_logits(pos, neg, tau_plus=loss.tau_plus, log_floor=-loss.scale)


class DebiasedMultipleNegativesRankingLoss(nn.Module):
    def __init__(self, model, scale: float = 20.0, tau_plus: float = 0.0, gather_across_devices: bool = False):
        """
        Args:
            model: a SentenceTransformer.
            scale: logits are ``cos * scale`` (``scale = 1 / temperature``), as in MNRL.
            tau_plus: DCL class prior in [0, 1); 0 gives MNRL's loss.
            gather_across_devices: use the embeddings of all processes as candidates.
        """
        super().__init__()
        if not 0 < scale < float("inf"):
            raise ValueError(f"scale must be finite and > 0, got {scale}")
        if not 0.0 <= tau_plus < 1.0:
            raise ValueError(f"tau_plus must be in [0, 1), got {tau_plus}")
        self.model = model
        self.scale = float(scale)
        self.tau_plus = float(tau_plus)
        self.gather_across_devices = gather_across_devices

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor | None = None) -> Tensor:
        """Encode each column (anchor, positive[, negatives]) with the model and return the debiased loss."""
        embeddings = [self.model(f)["sentence_embedding"] for f in sentence_features]
        return self.compute_loss_from_embeddings(embeddings, labels)

    def compute_loss_from_embeddings(self, embeddings: list[Tensor], labels: Tensor | None = None) -> Tensor:
        """The loss of embeddings already computed: anchors against the positives and the batch's other candidates.
        Computed in float32 (float64 kept) with autocast off, as MNRL's cross-entropy is under mixed precision; a
        batch with no negative at all (one pair, no hard negatives, one process) gives 0, as MNRL's does."""
        if len(embeddings) < 2:
            raise ValueError("need (anchor, positive[, negatives...]) columns, got fewer than 2")
        b = embeddings[0].shape[0]
        bad = [(k, tuple(e.shape)) for k, e in enumerate(embeddings) if e.dim() != 2 or e.shape[0] != b
               or e.shape[1] != embeddings[0].shape[1]]
        if bad:
            raise ValueError(f"every column must be [{b}, {embeddings[0].shape[1]}] like the anchors; column(s) "
                             + ", ".join(f"{k} are {shape}" for k, shape in bad))
        return _full_precision_loss(self, embeddings)

    def get_config_dict(self) -> dict[str, Any]:
        """The loss's settings, as sentence-transformers records them in a model card."""
        return {"scale": self.scale, "tau_plus": self.tau_plus, "gather_across_devices": self.gather_across_devices}

    @property
    def citation(self) -> str:
        """BibTeX of the debiased contrastive loss (Chuang et al., 2020)."""
        return (
            "@inproceedings{chuang2020debiased, title={Debiased Contrastive Learning}, author={Chuang, Ching-Yao "
            "and Robinson, Joshua and Lin, Yen-Chen and Torralba, Antonio and Jegelka, Stefanie}, "
            "booktitle={NeurIPS}, year={2020}}"
        )
