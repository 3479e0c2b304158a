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


def _cos_sim(a: Tensor, b: Tensor) -> Tensor:
    a = nn.functional.normalize(a, p=2, dim=1)
    b = nn.functional.normalize(b, p=2, dim=1)
    return a @ b.T


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
        if not scale > 0:
            raise ValueError(f"scale must be > 0, got {scale}")
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
        """The loss of embeddings already computed: anchors against the positives and the batch's other candidates."""
        if len(embeddings) < 2:
            raise ValueError("need (anchor, positive[, negatives...]) columns, got fewer than 2")
        anchors = embeddings[0]
        docs = torch.cat(embeddings[1:], dim=0)  # [k * B, d]: positives first, then hard negatives
        b = anchors.shape[0]
        offset = 0
        if self.gather_across_devices:
            anchors_all, rank, world = gather_with_grad(anchors)
            cols = [gather_with_grad(e)[0] for e in embeddings[1:]]
            docs = torch.cat(cols, dim=0)
            offset = rank * b
            del anchors_all
        # float32 before the normalisation: bf16/fp16 cosines are off by ~1e-3, times scale in the logits
        logits = _cos_sim(anchors.float(), docs.float()) * self.scale  # [b, C]
        rows = torch.arange(b, device=logits.device)
        pos_idx = rows + offset
        pos = logits[rows, pos_idx].unsqueeze(1)
        neg = logits.index_put((rows, pos_idx), torch.tensor(float("-inf"), device=logits.device))
        return debiased_nce_from_logits(pos, neg, tau_plus=self.tau_plus, log_floor=-self.scale)

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
