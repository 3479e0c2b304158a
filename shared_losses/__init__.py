"""shared_losses: the one loss core of contrastive-suite.

The package's top level is the loss core: every loss of docs/equations.md sections 2-5 (InfoNCE, CPC's k-step
InfoNCE, debiased, hard-negative, SupCon, SCL-PU, puNCE), computed in log space (:mod:`.functional`), with
``nn.Module`` wrappers (:mod:`.modules`), score functions (:mod:`.scores`), input checks and gathering of negatives
across processes (:mod:`.distributed`). It is pure torch and imports nothing else of the suite.

Two subpackages sit beside it and import it, never the other way round:

* :mod:`shared_losses.training`: the run machinery the applications share (checkpoints, run folders, the loop,
  command lines, sweeps, statistics over seeds);
* :mod:`shared_losses.data`: the data sets the applications share (text files and sets, image arrays) and the
  shipped data files with their rebuild scripts.
"""

from ._core import twice_differentiable
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
    "scl_pu_loss", "supcon_loss", "twice_differentiable",
]
