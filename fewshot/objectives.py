"""The few-shot objectives, in one place: ``lam * CE + (1 - lam) * CL`` (puNCE section 5.3).

* CE sees the labeled examples only (first dropout view).
* ``ce+scl``: CL = SupCon (Khosla et al. 2020) over both views of the labeled examples, as in
  Gunel et al. 2021 (who have no unlabeled data).
* ``ce+punce``: CL = puNCE, PNU form (eq. 10), over both views of labeled and unlabeled examples.

Roles: +1 labeled positive, -1 labeled negative, 0 unlabeled (the encoding of ``punce_loss``).

Image data (``--contrastive``) has a registry of the same shape, :data:`ENCODER_LOSSES`: the encoder's loss
over two augmented views of every image of a batch. A loss is added to either by one entry
(docs/adding_a_loss.md); the configuration's choices are the registries' keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import torch
import torch.nn.functional as F

from shared_losses import debiased_nce, info_nce, punce_loss, scl_pu_loss, supcon_loss

from .images import cpc_grid_loss


@dataclass(frozen=True)
class Objective:
    """One ``--objective``: its contrastive term and what the run, its validation, ``--help`` and the sweep read about
    it. The registry's shape is the same in the three applications (rl_curl, nlp_qt and fewshot ``objectives.py``)."""

    name: str  # the --objective value
    label: str  # its name in tables and plots
    trains_encoder: bool  # False: a baseline (no optimiser step, no checkpoint; metrics.json is the run)
    views: int  # dropout views of each example a training step encodes (0: no training step)
    reads_unlabeled: bool  # whether a step draws unlabeled examples (only puNCE's term sees them)
    rank: int  # order in tables: baselines, then CE, then CE + a contrastive term
    # CL of lam * CE + (1 - lam) * CL: (z1 [n, d], z2 [n, d], roles [n], temperature, prior, gather) -> loss;
    # None: CE only
    loss: Callable[..., torch.Tensor] | None = None
    help: str = ""  # its line in --help


def _supcon_term(z1, z2, roles, temperature, prior, gather):
    keep = roles != 0
    feats, src, r = multiview(z1[keep], z2[keep], roles[keep])
    return supcon_loss(feats, r, temperature, source_ids=src, gather_distributed=gather)


def _punce_term(z1, z2, roles, temperature, prior, gather):
    feats, src, r = multiview(z1, z2, roles)
    return punce_loss(feats, src, r, prior, temperature, gather_distributed=gather)


#: Every objective of fewshot.train (setting pnu), in table order: the one place an objective is added.
ALL_OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("probe", "frozen encoder + logistic regression", False, 0, False, 0,
              help="frozen encoder, logistic regression on the N labeled sentence vectors (no training steps; "
                   "baseline)"),
    Objective("setfit", "SetFit (its defaults)", False, 0, False, 1,
              help="SetFit with its own defaults on the same sample (optional extra .[setfit]; a "
                   "sentence-transformers encoder)"),
    Objective("ce", "CE", True, 1, False, 2, help="cross-entropy on the labeled examples"),
    Objective("ce+scl", "CE + SupCon", True, 2, False, 3, _supcon_term,
              "CE + SupCon over the labeled examples' two dropout views (Gunel et al. 2021)"),
    Objective("ce+punce", "CE + puNCE", True, 2, True, 4, _punce_term,
              "CE + puNCE in PNU form over the labeled and unlabeled examples' two dropout views"),
)}
#: The objectives that train the encoder (the loss below); the others are baselines.
OBJECTIVES = tuple(n for n, o in ALL_OBJECTIVES.items() if o.trains_encoder)
BASELINES = tuple(n for n, o in ALL_OBJECTIVES.items() if not o.trains_encoder)
#: The configuration's --objective type: the registry's names, so a new entry is a new choice.
ObjectiveName = Literal[tuple(ALL_OBJECTIVES)]
#: --objective's default, puNCE's objective: the one value that --setting pu (whose encoder is always trained with
#: puNCE, PU form) and image data (which choose their loss with --contrastive) accept.
DEFAULT_OBJECTIVE = "ce+punce"


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


def contrastive_term(objective: str, z1, z2, roles, temperature: float, prior: float,
                     gather: bool = False) -> torch.Tensor:
    term = ALL_OBJECTIVES[objective].loss if objective in ALL_OBJECTIVES else None
    if term is None:
        with_term = [n for n, o in ALL_OBJECTIVES.items() if o.loss is not None]
        raise ValueError(f"objective must be one of {tuple(with_term)}, got {objective!r}")
    return term(z1, z2, roles, temperature, prior, gather)


def fewshot_loss(objective, logits, z1, z2, labels, roles, lam, temperature, prior, gather=False):
    """Returns (loss, parts). ``logits`` [n, 2] of the first view; ``labels`` [n] in {0, 1}
    (ignored where ``roles == 0``)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    labeled = roles != 0
    if not labeled.any():
        raise ValueError("the batch has no labeled example: CE needs at least one")
    ce = F.cross_entropy(logits[labeled], labels[labeled])
    if ALL_OBJECTIVES[objective].loss is None:
        return ce, {"ce": ce.detach()}
    cl = contrastive_term(objective, z1, z2, roles, temperature, prior, gather)
    return lam * ce + (1.0 - lam) * cl, {"ce": ce.detach(), "cl": cl.detach()}


# --- image data: the encoder's loss (--contrastive) ------------------------------------------------------------

@dataclass(frozen=True)
class EncoderLoss:
    """One ``--contrastive`` (image data): the encoder's loss on a batch of images, over what ``inputs`` names."""

    name: str  # the --contrastive value
    label: str  # its name in tables and plots
    rank: int  # order in tables
    # inputs "views": (z [2B, d] projections of two augmented views, view-major, roles [2B] in {+1, -1, 0}, prior,
    # temperature, tau_plus) -> loss. inputs "grid": (z [B, g, g, d] patch latents of one augmented view, the
    # model's CPC heads, group: images per negative pool) -> loss. None: no contrastive stage (the encoder and a
    # linear head are trained end to end on raw pixels)
    loss: Callable[..., torch.Tensor] | None
    help: str = ""  # its line in --help
    inputs: Literal["views", "grid"] = "views"
    encoder: str | None = None  # the --encoder it needs (None: any image encoder)


def _punce_views(z, roles, prior, temperature, tau_plus):
    return punce_loss(z, torch.arange(z.shape[0] // 2).repeat(2), roles, prior=prior, temperature=temperature)


def _infonce_views(z, roles, prior, temperature, tau_plus):
    B = z.shape[0] // 2
    return info_nce(z[:B], z[B:], temperature=temperature)


def _dcl_views(z, roles, prior, temperature, tau_plus):
    B = z.shape[0] // 2
    return debiased_nce(z[:B], z[B:], temperature=temperature, tau_plus=tau_plus)


def _scl_views(z, roles, prior, temperature, tau_plus):
    return scl_pu_loss(z, torch.arange(z.shape[0] // 2).repeat(2), roles, temperature=temperature)


#: Every encoder loss of image runs, in table order (puNCE Tables 1 and 4): the one place one is added.
ENCODER_LOSSES: dict[str, EncoderLoss] = {e.name: e for e in (
    EncoderLoss("punce", "puNCE", 0, _punce_views, "puNCE: PU form with --setting pu, PNU form with --setting pnu"),
    EncoderLoss("infonce", "InfoNCE", 1, _infonce_views, "InfoNCE (SimCLR's NT-Xent)"),
    EncoderLoss("dcl", "DCL", 2, _dcl_views, "the debiased loss, DCL (--tau-plus)"),
    EncoderLoss("scl", "SCL", 3, _scl_views,
                "SupCon on labeled anchors, InfoNCE on unlabeled ones (the paper's SCL baseline)"),
    EncoderLoss("cpc", "CPC", 4, cpc_grid_loss,
                "Contrastive Predictive Coding (van den Oord et al. 2018, section 3.2): a 7x7 grid of patches "
                "(--encoder patches), a masked context predicting the rows below (--cpc-steps), negatives from "
                "the patches of --cpc-group images", inputs="grid", encoder="patches"),
    EncoderLoss("none", "raw", 5, None, "no contrastive stage: encoder and linear head trained end to end on pixels"),
)}
#: The configuration's --contrastive type: the registry's names, so a new entry is a new choice.
EncoderLossName = Literal[tuple(ENCODER_LOSSES)]


def encoder_loss(name: str, z: torch.Tensor, roles: torch.Tensor, prior: float, temperature: float,
                 tau_plus: float) -> torch.Tensor:
    """The image encoder's loss ``name`` (``--contrastive``) on the projections ``z`` [2B, d] of two views
    (view-major) with roles +1 / -1 (labeled positive / negative) or 0 (unlabeled) per view."""
    entry = ENCODER_LOSSES.get(name)
    if entry is None or entry.loss is None or entry.inputs != "views":
        views = [n for n, e in ENCODER_LOSSES.items() if e.loss and e.inputs == "views"]
        raise ValueError(f"--contrastive must be one of {', '.join(views)} for a loss over two views, got {name!r}")
    return entry.loss(z, roles, prior, temperature, tau_plus)
