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
from shared_losses.training.registry import Entry, Registry

from .images import cpc_grid_loss


@dataclass(frozen=True)
class Objective(Entry):
    """One ``--objective`` (text): a :class:`shared_losses.training.registry.Entry` (name, label, rank in tables,
    help) plus what the run, its validation and the sweep read about it.

    ``loss``: CL of ``lam * CE + (1 - lam) * CL``, called with keywords only: ``loss(z1=[n, d], z2=[n, d],
    roles=[n], temperature=, prior=, gather=, label_pull=)``; None: CE only (or no training, for a baseline).
    ``trains_encoder``: False for a baseline (no optimiser step, no checkpoint; metrics.json is the run).
    ``trains_head``: whether the run has a CE-trained linear head (a baseline's classifier is its own: logistic
    regression on the frozen encoder's vectors, or SetFit's). ``views``: dropout views of each example a training
    step encodes (0: no training step). ``reads_unlabeled``: whether a step draws unlabeled examples.
    ``no_model``: why the run keeps no model to export (empty: it keeps one, the usual case). ``baseline``: what a
    baseline runs instead of training steps, ``baseline(cfg, run) -> (accuracy %, accuracy of each classifier,
    seconds, the classifier's scores (:func:`fewshot.scores.binary_scores`) or None)`` on the prepared run
    (:class:`fewshot.run.Run`); None for the trained objectives."""

    loss: Callable[..., torch.Tensor] | None = None
    trains_encoder: bool = True
    trains_head: bool = True
    views: int = 1
    reads_unlabeled: bool = False
    no_model: str = ""
    baseline: Callable[..., tuple[float, dict, float, dict | None]] | None = None


def _probe(cfg, run) -> tuple[float, dict, float, dict]:
    """The frozen encoder's logistic-regression head on the N labeled examples' sentence vectors."""
    import time

    from .heads import head_accuracy

    t0 = time.monotonic()
    accuracy, heads, scores = head_accuracy(run.model, run.tokenizer, cfg, run.train_x, run.train_y, run.sample,
                                            run.eval_x, run.eval_y, run.acc.device, trains_head=False,
                                            progress=cfg.progress and run.acc.is_main_process)
    return accuracy, heads, time.monotonic() - t0, scores


def _setfit(cfg, run) -> tuple[float, dict, float, None]:
    """SetFit with its own defaults (:mod:`fewshot.setfit_baseline`; the optional extra .[setfit])."""
    from .setfit_baseline import run_setfit

    accuracy, seconds = run_setfit(cfg, run)
    return accuracy, {"setfit": accuracy}, seconds, None


def _supcon_term(*, z1, z2, roles, temperature, prior, gather, label_pull=1.0):
    keep = roles != 0
    feats, src, r = multiview(z1[keep], z2[keep], roles[keep])
    return supcon_loss(feats, r, temperature, source_ids=src, gather_distributed=gather)


def _punce_term(*, z1, z2, roles, temperature, prior, gather, label_pull=1.0):
    feats, src, r = multiview(z1, z2, roles)
    return punce_loss(feats, src, r, prior, temperature, gather_distributed=gather, label_pull=label_pull)


#: Every objective of the text few-shot pipeline (python -m fewshot.train), in table order: the one place an
#: objective is added.
ALL_OBJECTIVES: Registry[Objective] = Registry("--objective", (
    Objective("probe", "frozen encoder + logistic regression", 0, "frozen encoder, logistic regression on the N "
              "labeled sentence vectors (no training steps; baseline)", trains_encoder=False, trains_head=False,
              views=0, baseline=_probe),
    Objective("setfit", "SetFit (its defaults)", 1, "SetFit with its own defaults on the same sample (optional extra "
              ".[setfit]; a sentence-transformers encoder)", trains_encoder=False, trains_head=False, views=0,
              no_model="SetFit trains and scores its own copy of the encoder; save one with setfit's "
              "SetFitModel.save_pretrained instead", baseline=_setfit),
    Objective("ce", "CE", 2, "cross-entropy on the labeled examples"),
    Objective("ce+scl", "CE + SupCon", 3, "CE + SupCon over the labeled examples' two dropout views (Gunel et al. "
              "2021)", loss=_supcon_term, views=2),
    Objective("ce+punce", "CE + puNCE", 4, "CE + puNCE in PNU form over the labeled and unlabeled examples' two "
              "dropout views", loss=_punce_term, views=2, reads_unlabeled=True),
))
#: The objectives that train the encoder (the loss below); the others are baselines.
OBJECTIVES = ALL_OBJECTIVES.where(trains_encoder=True)
BASELINES = ALL_OBJECTIVES.where(trains_encoder=False)
#: The configuration's --objective type: the registry's names, so a new entry is a new choice.
ObjectiveName = ALL_OBJECTIVES.choices
#: --objective's default, puNCE's objective; the PU pipeline's encoder is trained with this entry's term (its PU form).
DEFAULT_OBJECTIVE = "ce+punce"


def roles_from_labels(labels: torch.Tensor, labeled: torch.Tensor) -> torch.Tensor:
    """Class labels {0, 1} + labeled mask -> puNCE roles {+1, -1, 0}."""
    return torch.where(labeled, labels * 2 - 1, torch.zeros_like(labels))


def multiview(z1: torch.Tensor, z2: torch.Tensor, roles: torch.Tensor):
    """Stack two views as puNCE's multi-viewed batch: features [2n, d], source ids, roles."""
    n = z1.shape[0]
    src = torch.arange(n, device=z1.device).repeat(2)
    return torch.cat([z1, z2]), src, roles.repeat(2)


def contrastive_term(objective: str, z1, z2, roles, temperature: float, prior: float,
                     gather: bool = False, label_pull: float = 1.0) -> torch.Tensor:
    term = ALL_OBJECTIVES[objective].loss if objective in ALL_OBJECTIVES else None
    if term is None:
        with_term = [n for n, o in ALL_OBJECTIVES.items() if o.loss is not None]
        raise ValueError(f"objective must be one of {tuple(with_term)}, got {objective!r}")
    return term(z1=z1, z2=z2, roles=roles, temperature=temperature, prior=prior, gather=gather,
                label_pull=label_pull)


def fewshot_loss(objective, logits, z1, z2, labels, roles, lam, temperature, prior, gather=False, label_pull=1.0):
    """Returns (loss, parts). ``logits`` [n, 2] of the first view; ``labels`` [n] in {0, 1}
    (ignored where ``roles == 0``); ``label_pull``: puNCE's lambda (1: the paper's loss; read by ``ce+punce`` only)."""
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {OBJECTIVES}, got {objective!r}")
    labeled = roles != 0
    if not labeled.any():
        raise ValueError("the batch has no labeled example: CE needs at least one")
    ce = F.cross_entropy(logits[labeled], labels[labeled])
    if ALL_OBJECTIVES[objective].loss is None:
        return ce, {"ce": ce.detach()}
    cl = contrastive_term(objective, z1, z2, roles, temperature, prior, gather, label_pull)
    return lam * ce + (1.0 - lam) * cl, {"ce": ce.detach(), "cl": cl.detach()}


# --- image data: the encoder's loss (--contrastive) ------------------------------------------------------------

@dataclass(frozen=True)
class EncoderLoss(Entry):
    """One ``--contrastive`` (image data): a :class:`shared_losses.training.registry.Entry` (name, label, rank,
    help, uses) plus the encoder's loss on a batch of images, over what ``inputs`` names, called with keywords only.

    ``inputs="views"``: ``loss(z=[2B, d] projections of two augmented views (view-major), roles=[2B] in {+1, -1,
    0}, prior=, temperature=, tau_plus=, label_pull=)``. ``inputs="grid"``: ``loss(z=[B, g, g, d] patch latents of one
    augmented view, heads=the model's CPC heads, group=images per negative pool)``. None: no contrastive stage (the
    encoder and a linear head are trained end to end on raw pixels). ``encoder``: the ``--encoder`` it needs (None:
    any)."""

    loss: Callable[..., torch.Tensor] | None = None
    inputs: Literal["views", "grid"] = "views"
    encoder: str | None = None


def _punce_views(*, z, roles, prior, temperature, tau_plus, label_pull=1.0):
    return punce_loss(z, torch.arange(z.shape[0] // 2).repeat(2), roles, prior=prior, temperature=temperature,
                      label_pull=label_pull)


def _infonce_views(*, z, roles, prior, temperature, tau_plus, label_pull=1.0):
    B = z.shape[0] // 2
    return info_nce(z[:B], z[B:], temperature=temperature)


def _dcl_views(*, z, roles, prior, temperature, tau_plus, label_pull=1.0):
    B = z.shape[0] // 2
    return debiased_nce(z[:B], z[B:], temperature=temperature, tau_plus=tau_plus)


def _scl_views(*, z, roles, prior, temperature, tau_plus, label_pull=1.0):
    return scl_pu_loss(z, torch.arange(z.shape[0] // 2).repeat(2), roles, temperature=temperature)


#: Every encoder loss of image runs, in table order (puNCE Tables 1 and 4): the one place one is added.
ENCODER_LOSSES: Registry[EncoderLoss] = Registry("--contrastive", (
    EncoderLoss("punce", "puNCE", 0, "puNCE: PU form with --setting pu, PNU form with --setting pnu",
                loss=_punce_views),
    EncoderLoss("infonce", "InfoNCE", 1, "InfoNCE (SimCLR's NT-Xent)", loss=_infonce_views),
    EncoderLoss("dcl", "DCL", 2, "the debiased loss, DCL (--tau-plus)", loss=_dcl_views),
    EncoderLoss("scl", "SCL", 3, "SupCon on labeled anchors, InfoNCE on unlabeled ones (the paper's SCL baseline)",
                loss=_scl_views),
    EncoderLoss("cpc", "CPC", 4, "Contrastive Predictive Coding (van den Oord et al. 2018, section 3.2): a 7x7 grid "
                "of patches (--encoder patches), a masked context predicting the rows below (--cpc-steps), negatives "
                "from the patches of --cpc-group images", loss=cpc_grid_loss, inputs="grid", encoder="patches"),
    EncoderLoss("none", "raw", 5, "no contrastive stage: encoder and linear head trained end to end on pixels"),
))
#: The configuration's --contrastive type: the registry's names, so a new entry is a new choice.
EncoderLossName = ENCODER_LOSSES.choices


def encoder_loss(name: str, z: torch.Tensor, roles: torch.Tensor, prior: float, temperature: float,
                 tau_plus: float, label_pull: float = 1.0) -> torch.Tensor:
    """The image encoder's loss ``name`` (a ``--contrastive`` over two views: punce, infonce, dcl or scl; cpc scores
    a patch grid, :func:`fewshot.images.cpc_grid_loss`, and none has no loss) on the projections ``z`` [2B, d] of two
    views (view-major) with roles +1 / -1 (labeled positive / negative) or 0 (unlabeled) per view."""
    entry = ENCODER_LOSSES.get(name)
    if entry is None or entry.loss is None or entry.inputs != "views":
        views = [n for n, e in ENCODER_LOSSES.items() if e.loss and e.inputs == "views"]
        raise ValueError(f"--contrastive must be one of {', '.join(views)} for a loss over two views, got {name!r}")
    return entry.loss(z=z, roles=roles, prior=prior, temperature=temperature, tau_plus=tau_plus,
                      label_pull=label_pull)
