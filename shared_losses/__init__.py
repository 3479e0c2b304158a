"""shared_losses: the one loss core of contrastive-suite.

Every loss of docs/equations.md sections 2-5 (InfoNCE, CPC's k-step InfoNCE, debiased, hard-negative, SupCon,
SCL-PU, puNCE), computed in log space, with score functions, ``nn.Module`` wrappers and gathering of negatives
across processes. Pure torch; the training helpers in :mod:`shared_losses.runtime` import
``accelerate`` only when used.
"""

from .distributed import gather_with_grad, is_distributed
from .functional import (
    cpc_nce,
    debiased_nce,
    debiased_nce_from_logits,
    hard_negative_nce,
    hard_negative_nce_from_logits,
    info_nce,
    info_nce_from_logits,
    log_floor_min_negative,
    punce_loss,
    punce_weights,
    scl_pu_loss,
    supcon_loss,
)
from .modules import (
    CPCLoss,
    DebiasedNCEFromLogits,
    DebiasedNCELoss,
    HardNegativeNCELoss,
    InfoNCELoss,
    PUNCELoss,
    SCLPULoss,
    SupConLoss,
)
from .scores import BilinearScore, cosine_scores, dot_scores

__all__ = [
    "BilinearScore", "CPCLoss", "DebiasedNCEFromLogits", "DebiasedNCELoss", "HardNegativeNCELoss", "InfoNCELoss",
    "PUNCELoss", "SCLPULoss", "SupConLoss", "cosine_scores", "cpc_nce", "debiased_nce", "debiased_nce_from_logits",
    "dot_scores", "gather_with_grad", "hard_negative_nce", "hard_negative_nce_from_logits", "info_nce",
    "info_nce_from_logits", "is_distributed", "log_floor_min_negative", "punce_loss", "punce_weights",
    "scl_pu_loss", "supcon_loss",
]
