"""The few-shot objectives, in one place: ``lam * CE + (1 - lam) * CL`` (puNCE section 5.3).

* CE sees the labeled examples only (first dropout view).
* ``ce+scl``: CL = SupCon (Khosla et al. 2020) over both views of the labeled examples, as in
  Gunel et al. 2021 (who have no unlabeled data).
* ``ce+punce``: CL = puNCE, PNU form (eq. 10), over both views of labeled and unlabeled examples.

Roles: +1 labeled positive, -1 labeled negative, 0 unlabeled (the encoding of ``punce_loss``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from shared_losses import punce_loss, supcon_loss


@dataclass(frozen=True)
class Objective:
    """One ``--objective``: what the run, its validation and the sweep read about it."""

    name: str  # the --objective value
    label: str  # its name in tables and plots
    trains_encoder: bool  # False: a baseline (no optimiser step, no checkpoint; metrics.json is the run)
    views: int  # dropout views of each example a training step encodes (0: no training step)
    reads_unlabeled: bool  # whether a step draws unlabeled examples (only puNCE's term sees them)
    rank: int  # order in tables: baselines, then CE, then CE + a contrastive term


#: Every objective of fewshot.train (setting pnu), in table order.
ALL_OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("probe", "frozen encoder + logistic regression", False, 0, False, 0),
    Objective("setfit", "SetFit (its defaults)", False, 0, False, 1),
    Objective("ce", "CE", True, 1, False, 2),
    Objective("ce+scl", "CE + SupCon", True, 2, False, 3),
    Objective("ce+punce", "CE + puNCE", True, 2, True, 4),
)}
#: The objectives that train the encoder (the loss below); the others are baselines.
OBJECTIVES = tuple(n for n, o in ALL_OBJECTIVES.items() if o.trains_encoder)
BASELINES = tuple(n for n, o in ALL_OBJECTIVES.items() if not o.trains_encoder)


def get(name: str) -> Objective:
    try:
        return ALL_OBJECTIVES[name]
    except KeyError:
        raise ValueError(f"objective must be one of {', '.join(ALL_OBJECTIVES)}, got {name!r}") from None


def roles_from_labels(labels: torch.Tensor, labeled: torch.Tensor) -> torch.Tensor:
    """Class labels {0, 1} + labeled mask -> puNCE roles {+1, -1, 0}."""
    return torch.where(labeled, labels * 2 - 1, torch.zeros_like(labels))


def multiview(z1: torch.Tensor, z2: torch.Tensor, roles: torch.Tensor):
    """Stack two views as puNCE's multi-viewed batch: features [2n, d], source ids, roles."""
    n = z1.shape[0]
    src = torch.arange(n, device=z1.device).repeat(2)
    return torch.cat([z1, z2]), src, roles.repeat(2)


def contrastive_term(objective: str, z1, z2, roles, temperature: float, prior: float, gather: bool = False) -> torch.Tensor:
    if objective == "ce+punce":
        feats, src, r = multiview(z1, z2, roles)
        return punce_loss(feats, src, r, prior, temperature, gather_distributed=gather)
    if objective == "ce+scl":
        keep = roles != 0
        feats, src, r = multiview(z1[keep], z2[keep], roles[keep])
        return supcon_loss(feats, r, temperature, source_ids=src, gather_distributed=gather)
    raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")


def fewshot_loss(objective, logits, z1, z2, labels, roles, lam, temperature, prior, gather=False):
    """Returns (loss, parts). ``logits`` [n, 2] of the first view; ``labels`` [n] in {0, 1}
    (ignored where ``roles == 0``)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    labeled = roles != 0
    if not labeled.any():
        raise ValueError("the batch has no labeled example: CE needs at least one")
    ce = F.cross_entropy(logits[labeled], labels[labeled])
    if objective == "ce":
        return ce, {"ce": ce.detach()}
    cl = contrastive_term(objective, z1, z2, roles, temperature, prior, gather)
    return lam * ce + (1.0 - lam) * cl, {"ce": ce.detach(), "cl": cl.detach()}
