"""The named losses of docs/equations.md sections 2-5, as functions.

Logit-level functions take scores already divided by the temperature; ``-inf`` marks an absent
candidate. Embedding-level functions build the scores themselves (cosine by default) in the
SimCLR multi-view layout or the puNCE multi-viewed batch, optionally against the candidates of all
processes (docs/equations.md section 6, :func:`shared_losses.distributed.gather_with_grad`).

References:
    [CPC]   van den Oord, Li, Vinyals. Representation Learning with Contrastive Predictive Coding. 2018.
    [DCL]   Chuang, Robinson, Lin, Torralba, Jegelka. Debiased Contrastive Learning. NeurIPS 2020.
    [HCL]   Robinson, Chuang, Sra, Jegelka. Contrastive Learning with Hard Negative Samples. ICLR 2021.
    [SupCon] Khosla et al. Supervised Contrastive Learning. NeurIPS 2020.
    [puNCE] Acharya, Sanghavi, Jing, Bhushanam, Choudhary, Rabbat, Dhillon.
            Positive Unlabeled Contrastive Learning.
"""

from __future__ import annotations

from typing import Sequence, Union

import torch
import torch.nn.functional as F

from . import _checks as C
from ._core import NEG_INF, debiased_terms, full_precision, promote, reduce, weighted_log_softmax
from .distributed import gather_with_grad

Views = Union[torch.Tensor, Sequence[torch.Tensor]]


# ----------------------------------------------------------------------------------------------
# Logit level
# ----------------------------------------------------------------------------------------------


def _prepare_logits(pos_logits, neg_logits, log_floor, host_checks=True):
    C.check_same_device(pos_logits=pos_logits, neg_logits=neg_logits)
    C.check_float_tensor("pos_logits", pos_logits, (1, 2), nan=False)
    C.check_float_tensor("neg_logits", neg_logits, (2, 3), nan=False)
    pos = promote(pos_logits)
    if pos.dim() == 1:
        pos = pos.unsqueeze(1)
    neg = promote(neg_logits)
    if neg.dtype != pos.dtype:
        wide = torch.promote_types(pos.dtype, neg.dtype)
        pos, neg = pos.to(wide), neg.to(wide)
    B, M = pos.shape
    if neg.shape[0] != B:
        raise ValueError(
            f"pos_logits has {B} anchors but neg_logits has {neg.shape[0]}: both must be [B, ...]"
        )
    if neg.dim() == 3 and neg.shape[1] != M:
        raise ValueError(
            f"per-turn neg_logits must be [B, M, N] with M = {M} (from pos_logits), got {tuple(neg.shape)}"
        )
    if M == 0 or neg.shape[-1] == 0:
        raise ValueError(f"need at least one positive and one negative, got M = {M}, N = {neg.shape[-1]}")
    C.check_log_floor(log_floor, B, pos.device)
    if not host_checks:
        # No value reaches the host (CUDA graphs, a GPU that runs ahead of Python): no NaN / inf / empty-row
        # refusals, every positive taken as present, the negatives counted on the device. The arithmetic is the
        # checked path's whenever its checks pass and some negative is absent (-inf); a bad value shows up as a
        # non-finite loss, which the caller must test (without a sync: see the docstrings).
        return pos, neg, (neg > NEG_INF).sum(-1), None

    # Every check on the values, and the two facts that pick the fast paths (all positives present,
    # all negatives present), reach the host in one transfer: one device sync per call, not eight.
    present = pos > NEG_INF
    n_present = present.sum(1)
    n_neg = (neg > NEG_INF).sum(-1)
    bad_floor = torch.zeros((), dtype=torch.bool, device=pos.device)
    if isinstance(log_floor, torch.Tensor):
        bad_floor = log_floor.isnan().any() | (log_floor == float("inf")).any()
    flags = torch.stack([
        pos.isnan().any(), neg.isnan().any(),
        (pos == float("inf")).any() | (neg == float("inf")).any(),
        (n_present == 0).any(), (n_neg == 0).any(),
        present.all(), (n_neg == neg.shape[-1]).all(), bad_floor,
    ]).tolist()
    pos_nan, neg_nan, has_inf, no_pos, no_neg, all_present, all_neg, floor_bad = flags
    if pos_nan:
        raise ValueError("pos_logits contains NaN")
    if neg_nan:
        raise ValueError("neg_logits contains NaN")
    if has_inf:
        raise ValueError("logits contain +inf")
    if no_pos:
        i = int((n_present == 0).nonzero()[0])
        raise ValueError(f"anchor {i} has no positive (all its pos_logits are -inf)")
    if no_neg:
        where = (n_neg == 0).nonzero()[0].tolist()
        if neg.dim() == 3:  # per turn
            raise ValueError(f"anchor {where[0]}, turn {where[1]} has no negative (all its neg_logits[{where[0]}, "
                             f"{where[1]}] are -inf); a turn without a positive still needs its row of negatives "
                             "filled (any finite values: an absent turn's loss is not counted)")
        raise ValueError(f"anchor {where[0]} has no negative (all its neg_logits are -inf)")
    if floor_bad:  # after the empty rows: log_floor_min_negative of a row without negatives is +inf
        raise ValueError("log_floor contains NaN or +inf")
    if all_neg:
        n_neg = float(neg.shape[-1])
    return pos, neg, n_neg, (None if all_present else present)


@full_precision
def debiased_nce_from_logits(
    pos_logits: torch.Tensor,
    neg_logits: torch.Tensor,
    tau_plus: float = 0.0,
    log_floor: torch.Tensor | float | None = None,
    reduction: str = "mean",
    *,
    host_checks: bool = True,
) -> torch.Tensor:
    r"""Debiased contrastive loss from logits [DCL eq. (7)-(8); docs/equations.md section 3].

    $$
    g_i = \max\Big(\tfrac{1}{\tau^-}\big(\tfrac1N\sum_n e^{q_{in}}
          - \tau^+ \tfrac1M\sum_m e^{p_{im}}\big),\; e^{\text{log\_floor}}\Big),\qquad
    \ell_i = \tfrac1M \sum_m -\log\frac{e^{p_{im}}}{e^{p_{im}} + N g_i}
    $$

    Args:
        pos_logits: ``[B, M]`` (or ``[B]``) scores of each anchor against its M positives, already
            divided by the temperature. ``-inf`` marks an absent positive (ragged M).
        neg_logits: ``[B, N]`` scores against the N negatives shared by the M turns, or
            ``[B, M, N]`` with turn m's own negatives. ``-inf`` marks an absent negative; N counts
            the present ones per anchor.
        tau_plus: class prior tau+ in [0, 1). 0 gives InfoNCE [CPC eq. 4] where the floor does not bind
            (``log_floor=None``, or a floor below the negatives' mean score, as the cosine bound and
            :func:`log_floor_min_negative` always are at 0); a floor above it still raises g.
        log_floor: log of the lower bound on g. The paper's cosine bound ``e^{-1/t}`` is
            ``log_floor = -1/t``. ``None`` clamps g at 0 only. A ``[B]`` tensor gives a per-anchor
            floor, e.g. :func:`log_floor_min_negative` for unbounded scores.
        reduction: ``"mean"``, ``"sum"`` or ``"none"`` (``[B]``).
        host_checks: check the values (NaN, +inf, an anchor without a positive or without a negative), which
            reads one small tensor on the host: a device sync per call. ``False`` skips them so that nothing
            waits for the device (inside a CUDA graph, or a loop that must not stall the GPU): every positive is
            then taken as present, the negatives are counted on the device, and a bad input gives a NaN or
            infinite loss instead of an error, so test the loss yourself (``torch.isfinite``, read later).
            Shapes, dtypes and devices are checked either way.

    Everything is computed in log space (float32 or wider), so it is finite where the paper's
    exp-space code overflows.

    Example:
        >>> import torch
        >>> from shared_losses import debiased_nce_from_logits, info_nce_from_logits
        >>> g = torch.Generator().manual_seed(0)
        >>> pos, neg = torch.randn(8, 1, generator=g), torch.randn(8, 14, generator=g)
        >>> loss = debiased_nce_from_logits(pos, neg, tau_plus=0.1, log_floor=-2.0)
        >>> loss.shape, bool(loss.isfinite())
        (torch.Size([]), True)
        >>> torch.allclose(debiased_nce_from_logits(pos, neg, tau_plus=0.0), info_nce_from_logits(pos, neg))
        True
    """
    C.check_reduction(reduction)
    tau_plus = C.check_tau_plus(tau_plus)
    pos, neg, n_neg, present = _prepare_logits(pos_logits, neg_logits, log_floor, host_checks)
    loss = debiased_terms(pos, neg, n_neg, tau_plus, log_floor, 0.0, present)
    return reduce(loss, reduction)


@full_precision
def hard_negative_nce_from_logits(
    pos_logits: torch.Tensor,
    neg_logits: torch.Tensor,
    tau_plus: float = 0.0,
    beta: float = 1.0,
    log_floor: torch.Tensor | float | None = None,
    reduction: str = "mean",
    *,
    host_checks: bool = True,
) -> torch.Tensor:
    r"""Hard-negative debiased loss [HCL section 3; docs/equations.md section 4].

    Negatives are reweighted by importance weights ``w_n = e^{beta q_n} / mean_n e^{beta q_n}``
    before debiasing, i.e. ``(1/N) sum_n e^{q_n}`` in g becomes
    ``(1/N) sum_n w_n e^{q_n} = sum_n e^{(1+beta) q_n} / sum_n e^{beta q_n}``.
    ``beta = 0`` is :func:`debiased_nce_from_logits`. Arguments as there.
    """
    C.check_reduction(reduction)
    tau_plus = C.check_tau_plus(tau_plus)
    beta = C.check_beta(beta)
    pos, neg, n_neg, present = _prepare_logits(pos_logits, neg_logits, log_floor, host_checks)
    loss = debiased_terms(pos, neg, n_neg, tau_plus, log_floor, beta, present)
    return reduce(loss, reduction)


@full_precision
def info_nce_from_logits(
    pos_logits: torch.Tensor, neg_logits: torch.Tensor, reduction: str = "mean", *, host_checks: bool = True
) -> torch.Tensor:
    r"""InfoNCE [CPC eq. 4]: ``l_i = -log( e^{p_i} / (e^{p_i} + sum_n e^{q_in}) )``.

    Identical to :func:`debiased_nce_from_logits` with ``tau_plus = 0`` and no floor (with M > 1
    positives, the mean over the M turns, each against the N negatives). ``host_checks`` as there.
    """
    return debiased_nce_from_logits(pos_logits, neg_logits, 0.0, None, reduction, host_checks=host_checks)


@full_precision
def log_floor_min_negative(neg_logits: torch.Tensor) -> torch.Tensor:
    """A data-dependent floor for unbounded scores: each anchor's smallest present negative logit.

    For dot-product or bilinear scores there is no ``e^{-1/t}`` bound; the smallest observed
    ``e^{q}`` is a lower bound on the sample mean of the negatives and keeps g > 0. Detached: the
    floor is a constant of the step, like the paper's. Returns ``[B]``: for per-turn negatives
    ``[B, M, N]`` the smallest over all of an anchor's turns (one floor per anchor, as the losses take).
    """
    C.check_float_tensor("neg_logits", neg_logits, (2, 3), nan=False)
    if neg_logits.shape[-1] == 0:
        raise ValueError(f"neg_logits has no negatives (shape {tuple(neg_logits.shape)}): the floor is the smallest "
                         "negative logit of each anchor")
    neg = neg_logits.detach()
    masked = torch.where(neg > NEG_INF, neg, torch.full_like(neg, float("inf")))
    out = masked.amin(dim=-1)
    if out.dim() == 2:
        out = out.amin(dim=1)
    return promote(out)


# ----------------------------------------------------------------------------------------------
# Embedding level: SimCLR multi-view layout
# ----------------------------------------------------------------------------------------------


def _stack_views(views: Views, more: tuple) -> torch.Tensor:
    if more:
        views = (views, *more)
    if isinstance(views, torch.Tensor):
        if views.dim() != 3:
            raise ValueError(
                f"views must be a [B, V, d] tensor or V tensors of shape [B, d], got shape {tuple(views.shape)}"
            )
        stacked = views
    else:
        if not isinstance(views, (list, tuple)) and not hasattr(views, "__iter__"):
            raise ValueError(f"views must be a [B, V, d] tensor or V tensors of shape [B, d], got "
                             f"{type(views).__name__}")
        views = list(views)
        for i, v in enumerate(views):
            if not isinstance(v, torch.Tensor):
                hint = (" (a number among the views: pass temperature= and the other options by name)"
                        if isinstance(v, (int, float)) else "")
                raise ValueError(f"views must be torch tensors; view {i} is {type(v).__name__}{hint}")
            if not v.is_floating_point():
                labels_like = i == 1 and v.dim() == 1 and not v.is_complex() and views[0].dim() == 2 and \
                    len(v) == len(views[0])
                hint = (": a tensor of labels? These losses take two or more views of each sample (each [B, d]; the "
                        "positive of a row is the same row of another view), not (embeddings, labels) as "
                        "pytorch-metric-learning's NTXentLoss; for class labels use supcon_loss(features, labels), "
                        "or build the logits and use *_from_logits") if labels_like else ""
                raise ValueError(f"views must be floating point, view {i} is {v.dtype}{hint}")
        if len(views) < 2:
            raise ValueError(f"need at least 2 views per sample, got {len(views)}")
        shapes = {tuple(v.shape) for v in views}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            raise ValueError(f"all views must share one shape [B, d], got {sorted(shapes)}")
        C.check_same_device(**{f"view{i}": v for i, v in enumerate(views)})
        stacked = torch.stack(views, dim=1)
    B, V, _ = stacked.shape
    if B == 0:
        raise ValueError("views is an empty batch")
    if V < 2:
        raise ValueError(f"need at least 2 views per sample, got V = {V}")
    if not stacked.is_floating_point():
        raise ValueError(f"views must be floating point, got {stacked.dtype}")
    return stacked


def _normalise(z: torch.Tensor, similarity: str) -> torch.Tensor:
    if similarity == "cosine":
        return F.normalize(z, dim=-1)
    if similarity == "dot":
        return z
    raise ValueError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")


def _multiview_terms(
    views: torch.Tensor,
    temperature: float,
    similarity: str,
    gather_distributed: bool,
):
    """Positive logits ``[V*B, V-1]`` and negative logits ``[V*B, V*B_global]`` (self and
    positives at ``-inf``) for the SimCLR layout; rows are view-major (``v * B + b``)."""
    z = _normalise(promote(views), similarity)  # [B, V, d]
    B, V, d = z.shape
    z_all, rank, _ = gather_with_grad(z) if gather_distributed else (z, 0, 1)
    G = z_all.shape[0]
    anchors = z.transpose(0, 1).reshape(V * B, d)
    cands = z_all.transpose(0, 1).reshape(V * G, d)
    dev = z.device
    v_idx = torch.arange(V, device=dev).repeat_interleave(B)  # [V*B]
    b_idx = torch.arange(B, device=dev).repeat(V)
    other = (v_idx.unsqueeze(1) + torch.arange(1, V, device=dev)) % V  # [V*B, V-1]
    anchors = anchors / temperature  # scale the [n, d] side, not the [n, n] product
    pos = (anchors.unsqueeze(1) * z[b_idx.unsqueeze(1), other]).sum(-1)
    logits = anchors @ cands.T
    # Mask self and the positives in place: the matmul's backward does not need its output.
    masked_cols = torch.arange(V, device=dev) * G + (rank * B + b_idx).unsqueeze(1)  # [V*B, V]
    logits.scatter_(1, masked_cols, NEG_INF)
    n_neg = float(V * (G - 1))
    return pos, logits, n_neg


def _check_scores(pos: torch.Tensor, neg: torch.Tensor, similarity: str, temperature: float,
                  inputs_checked: bool = True) -> None:
    """Refuse scores that overflowed their dtype (finite embeddings, infinite or NaN scores: e.g. dot products of
    vectors of norm 1e20 in float32): a NaN loss would follow, with nothing saying why. One read on the host."""
    bad = ~torch.isfinite(pos).all() | (neg == float("inf")).any() | neg.isnan().any()
    if bool(bad):
        hint = ("scale the embeddings down or use similarity='cosine'" if similarity == "dot"
                else "raise the temperature")
        if not inputs_checked:  # CPC: absent latents may hold anything, so the inputs are not checked first
            raise ValueError(f"the scores (similarity {similarity!r} / temperature {temperature:g}) are infinite or "
                             "NaN: the present latents or the predictions hold NaN or inf, or the scores overflow "
                             f"{pos.dtype} ({hint})")
        raise ValueError(f"the scores (similarity {similarity!r} / temperature {temperature:g}) overflow {pos.dtype}: "
                         f"they are infinite or NaN for finite embeddings; {hint}")


def _auto_floor(log_floor, similarity: str, temperature: float, neg: torch.Tensor):
    if isinstance(log_floor, str):
        if log_floor != "auto":
            raise ValueError(f"log_floor must be None, a float, a tensor or 'auto', got {log_floor!r}")
        if similarity == "cosine":
            return -1.0 / temperature  # the paper's theoretical minimum e^{-1/t}
        return log_floor_min_negative(neg)
    return log_floor


@full_precision
def debiased_nce(
    views: Views,
    *more_views: torch.Tensor,
    temperature: float = 0.5,
    tau_plus: float = 0.1,
    log_floor: torch.Tensor | float | str | None = "auto",
    similarity: str = "cosine",
    reduction: str = "mean",
    gather_distributed: bool = False,
    beta: float = 0.0,
) -> torch.Tensor:
    r"""Debiased contrastive loss on embeddings, SimCLR layout with any M [DCL eq. (7)-(8)].

    A batch of B samples with V views each gives V*B anchors. An anchor's M = V-1 positives are
    the other views of its sample; its N = V(B-1) negatives are all views of the other samples
    (self is never a candidate). V = 2 is SimCLR / DCL's Figure 3 layout (M = 1, N = 2(B-1)).

    Args:
        views: ``[B, V, d]``, or V tensors ``[B, d]`` passed as a list or as separate arguments.
        temperature: t in ``s = sim / t``.
        tau_plus: class prior tau+ in [0, 1).
        log_floor: ``"auto"`` (default) uses the paper's ``-1/t`` for cosine and
            :func:`log_floor_min_negative` for dot products; or None / a float / a ``[V*B]`` tensor.
        similarity: ``"cosine"`` (unit-normalised, the paper) or ``"dot"``.
        gather_distributed: negatives from the views of every process (docs/equations.md section 6).
        beta: hard-negative concentration [HCL]; 0 is plain debiasing.
        reduction: ``"mean"`` over the anchors (every view of every sample), ``"sum"`` or ``"none"``.

    Returns the mean over anchors (``reduction="none"``: ``[V*B]``, view-major order).

    Example (two noisy views of each of 8 inputs through one encoder):
        >>> import torch
        >>> from shared_losses import debiased_nce
        >>> encoder, x = torch.nn.Linear(32, 16), torch.randn(8, 32)
        >>> z1, z2 = encoder(x + 0.1 * torch.randn_like(x)), encoder(x + 0.1 * torch.randn_like(x))
        >>> loss = debiased_nce(z1, z2, temperature=0.5, tau_plus=0.1)
        >>> loss.backward()
        >>> debiased_nce(z1, z2, temperature=0.5, tau_plus=0.1, reduction="none").shape  # view-major
        torch.Size([16])
    """
    C.check_reduction(reduction)
    tau_plus = C.check_tau_plus(tau_plus)
    beta = C.check_beta(beta)
    temperature = C.check_temperature(temperature)
    stacked = _stack_views(views, more_views)
    if not torch.isfinite(stacked).all():
        raise ValueError("views contain NaN or inf")
    pos, neg, n_neg = _multiview_terms(stacked, temperature, similarity, gather_distributed)
    if n_neg == 0:
        raise ValueError("need at least 2 samples in the batch to have negatives")
    _check_scores(pos, neg, similarity, temperature)
    floor = _auto_floor(log_floor, similarity, temperature, neg)
    C.check_log_floor(floor, pos.shape[0], pos.device, values=isinstance(log_floor, torch.Tensor))
    loss = debiased_terms(pos, neg, n_neg, tau_plus, floor, beta, consume_neg=True)
    return reduce(loss, reduction)


@full_precision
def info_nce(
    views: Views,
    *more_views: torch.Tensor,
    temperature: float = 0.5,
    similarity: str = "cosine",
    reduction: str = "mean",
    gather_distributed: bool = False,
) -> torch.Tensor:
    r"""InfoNCE / NT-Xent on embeddings [CPC eq. 4; SimCLR], SimCLR multi-view layout.

    ``l_i = -log( e^{s_i+} / (e^{s_i+} + sum_n e^{s_in}) )``, positives = other views of the same
    sample (mean over them when V > 2), negatives = all views of the other samples. Equal to
    :func:`debiased_nce` with ``tau_plus = 0`` and no floor.
    """
    return debiased_nce(
        views, *more_views, temperature=temperature, tau_plus=0.0, log_floor=None,
        similarity=similarity, reduction=reduction, gather_distributed=gather_distributed,
    )


@full_precision
def hard_negative_nce(
    views: Views,
    *more_views: torch.Tensor,
    temperature: float = 0.5,
    tau_plus: float = 0.1,
    beta: float = 1.0,
    log_floor: torch.Tensor | float | str | None = "auto",
    similarity: str = "cosine",
    reduction: str = "mean",
    gather_distributed: bool = False,
) -> torch.Tensor:
    """Hard-negative debiased loss on embeddings [HCL; docs/equations.md section 4]: :func:`debiased_nce` with beta."""
    return debiased_nce(
        views, *more_views, temperature=temperature, tau_plus=tau_plus, log_floor=log_floor,
        similarity=similarity, reduction=reduction, gather_distributed=gather_distributed, beta=beta,
    )


# ----------------------------------------------------------------------------------------------
# Embedding level: labelled multi-viewed batches (SupCon, SCL-PU, puNCE)
# ----------------------------------------------------------------------------------------------


def _check_labelled(features, source_ids, labels, allowed_labels=None):
    C.check_float_tensor("features", features, (2,))
    n = features.shape[0]
    C.check_int_vector("labels", labels, n)
    C.check_same_device(features=features, labels=labels)
    if source_ids is not None:
        C.check_int_vector("source_ids", source_ids, n)
        C.check_same_device(features=features, source_ids=source_ids)
        if (source_ids < 0).any():
            raise ValueError("source_ids must be >= 0")
        # views of one source must carry one label
        order = torch.argsort(source_ids)
        s, lab = source_ids[order], labels[order]
        same = s[1:] == s[:-1]
        if (same & (lab[1:] != lab[:-1])).any():
            bad = int(s[1:][same & (lab[1:] != lab[:-1])][0])
            raise ValueError(f"views of source {bad} have different labels; every view of a source must share "
                             "its label")
    if allowed_labels is not None:
        ok = torch.zeros_like(labels, dtype=torch.bool)
        for a in allowed_labels:
            ok |= labels == a
        if not ok.all():
            bad = labels[~ok].unique().tolist()
            raise ValueError(f"labels must be in {set(allowed_labels)}, got {bad}")


def _labelled_candidates(features, source_ids, labels, temperature, gather_distributed):
    """Cosine logits of local anchors against (global) candidates, self at -inf; the candidates'
    source ids and labels; and a ``[A, K]`` same-source mask (self excluded)."""
    z = F.normalize(promote(features), dim=-1)
    n = z.shape[0]
    if gather_distributed:
        z_all, rank, world = gather_with_grad(z)
        labels_all = gather_with_grad(labels)[0]
        # make source ids unique across processes: id -> id * world + rank
        src_local = source_ids * world + rank
        src_all = gather_with_grad(src_local)[0]
        offset = rank * n
    else:
        z_all, labels_all, src_local, src_all, offset = z, labels, source_ids, source_ids, 0
    logits = (z / temperature) @ z_all.T
    self_cols = torch.arange(n, device=z.device) + offset
    logits.scatter_(1, self_cols.unsqueeze(1), NEG_INF)
    not_self = torch.ones_like(logits, dtype=torch.bool)
    not_self.scatter_(1, self_cols.unsqueeze(1), False)
    same_src = (src_local.unsqueeze(1) == src_all.unsqueeze(0)) & not_self
    return logits, labels_all, same_src, not_self


def _row_normalise(mask: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    m = mask.to(dtype)
    count = m.sum(1, keepdim=True)
    return m / count.clamp(min=1), count.squeeze(1)


def _vector_length(name: str, t) -> int:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    return t.shape[0]


@full_precision
def punce_weights(
    source_ids: torch.Tensor,
    labels: torch.Tensor,
    prior: float,
    cand_source_ids: torch.Tensor | None = None,
    cand_labels: torch.Tensor | None = None,
    self_offset: int = 0,
    dtype: torch.dtype = torch.float32,
    label_pull: float = 1.0,
) -> torch.Tensor:
    r"""The ``[n, K]`` positive-weight matrix of puNCE [puNCE eq. (7)-(10); docs/equations.md section 5].

    * labeled anchor (label +1 or -1): SupCon weights ``1/|Q(i)|`` on Q(i) = the other views
      carrying its label (labeled candidates only);
    * unlabeled anchor: ``pi/|P(i)|`` on ``P(i) = P ∪ A(i)`` and ``(1-pi)/|N(i)|`` on
      ``N(i) = N_l ∪ A(i)``, where A(i) are the other views of its source (a(i) for two views).
      Without labeled negatives ``N(i) = {a(i)}``: the PU form, eq. (8).
    * ``label_pull`` lambda (a variant beyond the paper; docs/equations.md section 5): an unlabeled anchor's
      row is ``lambda x`` the above ``+ (1 - lambda)/|A(i)|`` on A(i). 1 is the paper; 0 is SCL-PU.

    Every row sums to 1 when each anchor has a positive: another view of its label (labeled anchors) and another view
    of its source (unlabeled anchors: eq. (8)'s ``1/|A(i)|``), as :func:`punce_loss` requires. Otherwise a row holds
    only the parts it has: a labeled anchor without another view of its label gets a row of zeros, and an unlabeled
    anchor without another view of its source (single-view input) only ``lambda pi`` on the labeled positives and
    ``lambda (1 - pi)`` on the labeled negatives, where the batch has them: its row sums to less than 1
    (:func:`punce_loss` refuses both batches). ``cand_*`` default to the anchors themselves (single process);
    the anchors are the candidates ``self_offset`` to ``self_offset + n - 1``. ``dtype``: a floating-point dtype.
    """
    prior = C.check_prior(prior)
    label_pull = C.check_label_pull(label_pull)
    n = _vector_length("source_ids", source_ids)
    C.check_int_vector("source_ids", source_ids, n)
    C.check_int_vector("labels", labels, n)
    if (cand_source_ids is None) != (cand_labels is None):
        raise ValueError("give cand_source_ids and cand_labels together (or neither: the anchors are the candidates)")
    if cand_source_ids is None:
        cand_source_ids, cand_labels = source_ids, labels
    else:
        k = _vector_length("cand_source_ids", cand_source_ids)
        C.check_int_vector("cand_source_ids", cand_source_ids, k)
        C.check_int_vector("cand_labels", cand_labels, k)
    C.check_same_device(source_ids=source_ids, labels=labels, cand_source_ids=cand_source_ids, cand_labels=cand_labels)
    bad = set(torch.cat([labels, cand_labels]).unique().tolist()) - {-1, 0, 1}
    if bad:
        raise ValueError(f"labels must be in {{-1, 0, 1}} (-1 labeled negative, 0 unlabeled, 1 labeled positive), got "
                         f"{sorted(bad)}")
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"dtype must be a floating-point torch dtype, got {dtype}")
    n, K = source_ids.shape[0], cand_source_ids.shape[0]
    if isinstance(self_offset, bool) or not isinstance(self_offset, int) or not 0 <= self_offset <= K - n:
        raise ValueError(f"self_offset must be a whole number in [0, {K - n}] (the anchors are candidates "
                         f"self_offset..self_offset + {n} - 1 of {K}), got {self_offset!r}")
    dev = source_ids.device
    self_cols = torch.arange(n, device=dev) + self_offset
    not_self = torch.ones(n, K, dtype=torch.bool, device=dev)
    not_self.scatter_(1, self_cols.unsqueeze(1), False)
    same_src = (source_ids.unsqueeze(1) == cand_source_ids.unsqueeze(0)) & not_self
    return _punce_weight_matrix(labels, cand_labels, same_src, not_self, prior, dtype, label_pull)


def _punce_weight_matrix(labels, cand_labels, same_src, not_self, prior, dtype, label_pull=1.0):
    labeled = labels != 0
    same_label = (labels.unsqueeze(1) == cand_labels.unsqueeze(0)) & (cand_labels != 0).unsqueeze(0) & not_self
    w_lab, _ = _row_normalise(same_label, dtype)
    pos_set = ((cand_labels == 1).unsqueeze(0) & not_self) | same_src
    neg_set = ((cand_labels == -1).unsqueeze(0) & not_self) | same_src
    w_pos, _ = _row_normalise(pos_set, dtype)
    w_neg, _ = _row_normalise(neg_set, dtype)
    w_unl = prior * w_pos + (1.0 - prior) * w_neg
    if label_pull != 1.0:
        w_src, _ = _row_normalise(same_src, dtype)
        w_unl = label_pull * w_unl + (1.0 - label_pull) * w_src
    return torch.where(labeled.unsqueeze(1), w_lab, w_unl)


def _check_every_anchor_has_positive(weights, same_src, labels):
    has_pos = weights.sum(1) > 0
    if not has_pos.all():
        i = int((~has_pos).nonzero()[0])
        raise ValueError(
            f"anchor {i} (label {int(labels[i])}) has no positive: it needs another view of its "
            "source or another view with its label in the batch"
        )
    unl_alone = (labels == 0) & ~same_src.any(1)
    if unl_alone.any():
        i = int(unl_alone.nonzero()[0])
        raise ValueError(
            f"unlabeled anchor {i} has no other view of its source: puNCE needs >= 2 views per "
            "source (e.g. two augmentations / dropout passes)"
        )


def _check_has_negatives(same_src, not_self):
    """Every anchor needs a candidate of another source: with one source in the batch the loss is 0 for any
    embedding (as the debiased loss refuses a batch of one)."""
    alone = ~(not_self & ~same_src).any(1)
    if alone.any():
        raise ValueError(f"anchor {int(alone.nonzero()[0])} has no candidate of another source: need at least 2 "
                         "sources in the batch to have negatives")


def _check_finite_loss(loss: torch.Tensor, temperature: float) -> torch.Tensor:
    """The loss of finite embeddings (checked before) is finite unless the cosine scores over the temperature
    overflow the dtype: refused by name, as the InfoNCE family's scores are (a NaN loss said nothing)."""
    if not bool(torch.isfinite(loss).all()):
        raise ValueError(f"the scores (cosine / temperature {temperature:g}) overflow {loss.dtype}: the loss is "
                         "infinite or NaN for finite embeddings; raise the temperature")
    return loss


@full_precision
def punce_loss(
    features: torch.Tensor,
    source_ids: torch.Tensor,
    labels: torch.Tensor,
    prior: float,
    temperature: float = 0.5,
    reduction: str = "mean",
    gather_distributed: bool = False,
    label_pull: float = 1.0,
) -> torch.Tensor:
    r"""Positive-unlabeled contrastive loss, puNCE [puNCE eq. (7)-(10); docs/equations.md section 5].

    With ``log P_ij = s_ij - log sum_{k != i} e^{s_ik}`` and cosine scores ``s = cos / t``:

    * labeled anchor i: ``l_i = -(1/|Q(i)|) sum_{j in Q(i)} log P_ij`` (SupCon, eq. 5);
    * unlabeled anchor i, PU form (eq. 8, no ``-1`` labels):
      ``l_i = -[ pi/(|P|+1) sum_{j in P ∪ {a(i)}} log P_ij + (1-pi) log P_{i a(i)} ]``;
    * unlabeled anchor i, PNU form (eq. 10, with ``-1`` labels):
      ``l_i = -[ pi/|P(i)| sum_{P(i)} log P_ij + (1-pi)/|N(i)| sum_{N(i)} log P_ij ]``;
    * ``L = (1/2b) sum_i l_i`` (mean over the views).

    All labeled gives SupCon; none labeled gives InfoNCE.

    ``label_pull`` (lambda in [0, 1]; a variant beyond the paper, docs/equations.md section 5): an unlabeled
    anchor's loss becomes ``lambda l_i + (1 - lambda) (-log P_{i a(i)})``, its pull towards the labeled views
    scaled by lambda and the rest put on its own other view. 1 (the default) is eq. (8) / (10) as written; 0 is
    the SCL-PU baseline.

    Args:
        features: ``[n, d]`` embeddings of a multi-viewed batch (normalised inside).
        source_ids: ``[n]`` ints; views of one source sample share an id.
        labels: ``[n]`` ints: 1 labeled positive, 0 unlabeled, -1 labeled negative.
        prior: pi = p(y=+1 | unlabeled) in [0, 1] (see ``fewshot.prior`` for estimating it).
        temperature: t.
        gather_distributed: candidates from every process (docs/equations.md section 6).
        label_pull: lambda, the weight of an unlabeled anchor's pull towards the labeled views.
        reduction: ``"mean"`` over the anchors, ``"sum"`` or ``"none"`` (``[n]``, one term per view).
    """
    C.check_reduction(reduction)
    prior = C.check_prior(prior)
    temperature = C.check_temperature(temperature)
    label_pull = C.check_label_pull(label_pull)
    _check_labelled(features, source_ids, labels, allowed_labels=(-1, 0, 1))
    logits, labels_all, same_src, not_self = _labelled_candidates(
        features, source_ids, labels, temperature, gather_distributed
    )
    weights = _punce_weight_matrix(labels, labels_all, same_src, not_self, prior, logits.dtype, label_pull)
    _check_every_anchor_has_positive(weights, same_src, labels)
    _check_has_negatives(same_src, not_self)
    return _check_finite_loss(reduce(weighted_log_softmax(logits, weights), reduction), temperature)


@full_precision
def supcon_loss(
    features: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 0.5,
    reduction: str = "mean",
    source_ids: torch.Tensor | None = None,
    gather_distributed: bool = False,
) -> torch.Tensor:
    r"""Supervised contrastive loss [SupCon eq. 2 (L_out); puNCE eq. 5].

    ``l_i = -(1/|Q(i)|) sum_{j in Q(i)} log( e^{s_ij} / sum_{k != i} e^{s_ik} )`` with Q(i) the
    other rows carrying i's label, cosine scores over temperature. Labels are any integers.
    ``source_ids`` is optional (only checked for consistency: views of a source share a label).
    """
    C.check_reduction(reduction)
    temperature = C.check_temperature(temperature)
    _check_labelled(features, source_ids, labels)
    src = source_ids if source_ids is not None else torch.arange(labels.shape[0], device=labels.device)
    logits, labels_all, _, not_self = _labelled_candidates(features, src, labels, temperature, gather_distributed)
    same_label = (labels.unsqueeze(1) == labels_all.unsqueeze(0)) & not_self
    weights, count = _row_normalise(same_label, logits.dtype)
    if (count == 0).any():
        i = int((count == 0).nonzero()[0])
        raise ValueError(f"anchor {i} (label {int(labels[i])}) has no positive: no other row carries its label")
    return _check_finite_loss(reduce(weighted_log_softmax(logits, weights), reduction), temperature)


@full_precision
def scl_pu_loss(
    features: torch.Tensor,
    source_ids: torch.Tensor,
    labels: torch.Tensor,
    temperature: float = 0.5,
    reduction: str = "mean",
    gather_distributed: bool = False,
) -> torch.Tensor:
    r"""SCL-PU baseline [puNCE section 5]: SupCon on labeled anchors (over the other views with
    their label), InfoNCE (positive = the other views of the source) on unlabeled anchors.
    Labels in {-1, 0, 1}."""
    C.check_reduction(reduction)
    temperature = C.check_temperature(temperature)
    _check_labelled(features, source_ids, labels, allowed_labels=(-1, 0, 1))
    logits, labels_all, same_src, not_self = _labelled_candidates(
        features, source_ids, labels, temperature, gather_distributed
    )
    # puNCE with pi = 0 and no labeled negatives in N(i) puts weight 1 on A(i): InfoNCE.
    same_label = (labels.unsqueeze(1) == labels_all.unsqueeze(0)) & (labels_all != 0).unsqueeze(0) & not_self
    w_lab, _ = _row_normalise(same_label, logits.dtype)
    w_unl, _ = _row_normalise(same_src, logits.dtype)
    weights = torch.where((labels != 0).unsqueeze(1), w_lab, w_unl)
    _check_every_anchor_has_positive(weights, same_src, labels)
    _check_has_negatives(same_src, not_self)
    return _check_finite_loss(reduce(weighted_log_softmax(logits, weights), reduction), temperature)


# ----------------------------------------------------------------------------------------------
# Sequences: Contrastive Predictive Coding
# ----------------------------------------------------------------------------------------------

CPC_NEGATIVES = ("mixed", "other_sequences")


def _check_cpc_inputs(latents, predictions, mask, negatives):
    C.check_float_tensor("latents", latents, (3,), nan=False)
    C.check_float_tensor("predictions", predictions, (4,), nan=False)
    C.check_same_device(latents=latents, predictions=predictions, mask=mask)
    B, T, d = latents.shape
    if predictions.shape[0] != B or predictions.shape[3] != d:
        raise ValueError(f"predictions must be [B, T_c, K, d] = [{B}, T_c, K, {d}] for latents [B, T, d] = "
                         f"{list(latents.shape)}, got {list(predictions.shape)}")
    if not 1 <= predictions.shape[1] <= T:
        raise ValueError(f"predictions hold {predictions.shape[1]} context positions; latents hold T = {T}: a "
                         "context is the summary up to a position of the sequence, so 1 <= T_c <= T")
    if predictions.shape[2] == 0:
        raise ValueError("predictions hold K = 0 steps: predict at least one step ahead")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (B, T):
            got = (mask.dtype, list(mask.shape)) if isinstance(mask, torch.Tensor) else type(mask).__name__
            raise ValueError(f"mask must be a bool tensor [B, T] = [{B}, {T}] (True where a latent is present), got "
                             f"{got}")
    if negatives not in CPC_NEGATIVES:
        raise ValueError(f"negatives must be one of {CPC_NEGATIVES}, got {negatives!r}")


@full_precision
def cpc_nce(
    latents: torch.Tensor,
    predictions: torch.Tensor,
    mask: torch.Tensor | None = None,
    *,
    temperature: float = 1.0,
    tau_plus: float = 0.0,
    log_floor: torch.Tensor | float | str | None = "auto",
    similarity: str = "dot",
    negatives: str = "mixed",
    reduction: str = "mean",
) -> torch.Tensor:
    r"""CPC's k-step InfoNCE [CPC eq. (3)-(4); docs/equations.md section 2a], with DCL's debiased negatives as
    an option.

    The prediction for step k made at position t of sequence b, ``predictions[b, t, k-1]`` (the model's
    ``W_k c_t``), scores every latent ``z_j`` of the batch with ``s_j = z_j . W_k c_t / temperature``; the
    positive is the latent k positions ahead in the same sequence, ``latents[b, t+k]``, the negatives every
    other present latent of the batch, at any position of any sequence (the paper's "mixed" sampling;
    ``negatives="other_sequences"`` keeps only the other sequences' latents, its "excl." ablation):

    $$
    \ell_{btk} = -\log\frac{e^{s_{b,t+k}}}{e^{s_{b,t+k}} + N_{btk}\, g_{btk}},\qquad
    g_{btk} = \max\Big(\tfrac{1}{1-\tau^+}\big(\tfrac{1}{N_{btk}}\textstyle\sum_n e^{s_n}
              - \tau^+ e^{s_{b,t+k}}\big),\; e^{\text{log\_floor}}\Big)
    $$

    With ``tau_plus = 0`` and no floor, ``N g`` is the plain sum over the negatives: eq. (4) exactly.
    A prediction has a term only where its target exists (``t + k < T``, both positions present in ``mask``).

    Args:
        latents: ``[B, T, d]`` the encoded sequences ``z_t`` (the targets; detach them, or give a target
            encoder's, as the application chooses).
        predictions: ``[B, T_c, K, d]`` the predictions ``W_k c_t`` from the contexts at positions
            ``0 .. T_c - 1`` (``T_c <= T``; ``T_c = 1``: one context at the start of each sequence) for steps
            ``k = 1 .. K``.
        mask: ``[B, T]`` bool, True where a latent is present (sequences of different lengths); None: all are.
        temperature: divides the scores (the paper's bilinear score is temperature 1).
        tau_plus: DCL's class prior tau+ in [0, 1) (0: the paper's loss).
        log_floor: the floor of ``log g`` when ``tau_plus > 0``: ``"auto"`` is ``-1/t`` for cosine and each
            prediction's smallest negative score for dot products (:func:`log_floor_min_negative`); or None /
            a float.
        similarity: ``"dot"`` (the paper's log-bilinear score) or ``"cosine"`` (both sides unit-normalised).
        negatives: ``"mixed"`` or ``"other_sequences"``.
        reduction: ``"mean"`` averages each step's terms, then the K steps (each step weighs the same, as K
            losses of eq. 4 would; a step with no target in the batch, ``k >= T`` or beyond every masked
            sequence, is left out); ``"sum"`` adds every term; ``"none"`` returns ``[B, T_c, K]`` with 0 where
            a prediction has no target. Absent latents (and the predictions of absent contexts) are set to zero
            first, so that padding of any value (NaN too) reaches no score and no gradient.

    Example (latents of 4 sequences of 6 steps, a GRU's contexts, K = 3 bilinear maps in one Linear):
        >>> import torch
        >>> from shared_losses import cpc_nce
        >>> B, T, d, d_c, K = 4, 6, 8, 16, 3
        >>> z = torch.randn(B, T, d)                        # the encoder's latents
        >>> gru, w = torch.nn.GRU(d, d_c, batch_first=True), torch.nn.Linear(d_c, K * d)
        >>> c = gru(z)[0]                                   # [B, T, d_c]
        >>> pred = w(c).view(B, T, K, d)                    # W_k c_t
        >>> loss = cpc_nce(z, pred)
        >>> cpc_nce(z, pred, reduction="none").shape
        torch.Size([4, 6, 3])
    """
    C.check_reduction(reduction)
    tau_plus = C.check_tau_plus(tau_plus)
    temperature = C.check_temperature(temperature)
    _check_cpc_inputs(latents, predictions, mask, negatives)
    if mask is not None:  # padding may hold anything: a NaN there would give 0 * NaN in the scores' backward
        latents = torch.where(mask.unsqueeze(-1), latents, latents.new_zeros(()))
        predictions = torch.where(mask[:, :predictions.shape[1], None, None], predictions, predictions.new_zeros(()))
    z = _normalise(promote(latents), similarity)
    pred = _normalise(promote(predictions), similarity)
    if z.dtype != pred.dtype:
        wide = torch.promote_types(z.dtype, pred.dtype)
        z, pred = z.to(wide), pred.to(wide)
    B, T, d = z.shape
    Tc, K = pred.shape[1], pred.shape[2]
    dev = z.device
    present = torch.ones(B, T, dtype=torch.bool, device=dev) if mask is None else mask
    t_idx = torch.arange(Tc, device=dev).view(1, Tc, 1)
    k_idx = torch.arange(1, K + 1, device=dev).view(1, 1, K)
    target_t = t_idx + k_idx  # [1, Tc, K]
    inside = target_t < T
    target_t = target_t.clamp(max=T - 1)
    b_idx = torch.arange(B, device=dev).view(B, 1, 1)
    valid = (inside & present[:, :Tc].unsqueeze(2) & present[b_idx, target_t])  # [B, Tc, K]
    if not bool(valid.any()):
        raise ValueError(f"no prediction has a target: with T = {T} positions, K = {K} steps and the mask given, "
                         "no position t has a present latent at t + k < T")
    target = (b_idx * T + target_t).expand(B, Tc, K)[valid]  # [A] column of each term's positive
    anchors = pred[valid] / temperature  # [A, d]
    logits = anchors @ z.reshape(B * T, d).T  # [A, B*T]
    pos = logits.gather(1, target.unsqueeze(1))  # [A, 1]
    if mask is None and negatives == "mixed" and tau_plus == 0.0:
        # eq. 4 with every other latent a negative: -s_pos + log sum_j e^{s_j} over the whole row, cross-entropy
        # against the target column (one fused pass, where the general path below masks and scatters the row)
        terms = F.cross_entropy(logits, target, reduction="none")
        if not bool(torch.isfinite(pos).all() & torch.isfinite(terms).all()):
            _check_scores(pos, logits, similarity, temperature, inputs_checked=False)  # names the overflow
            raise ValueError("CPC's loss is not finite for finite scores")  # pragma: no cover - defensive
        return _cpc_reduce(terms, valid, reduction)
    absent = ~present.reshape(1, B * T)
    live = logits.masked_fill(absent, 0.0)  # what sits at an absent position never counts
    _check_scores(pos, live.abs(), similarity, temperature, inputs_checked=False)  # -inf is an overflow here too
    if negatives == "other_sequences":
        seq_of_col = torch.arange(B, device=dev).repeat_interleave(T)
        seq_of_row = b_idx.expand(B, Tc, K)[valid]
        absent = absent | (seq_of_col.unsqueeze(0) == seq_of_row.unsqueeze(1))
    neg = logits.masked_fill(absent, NEG_INF).scatter(1, target.unsqueeze(1), NEG_INF)
    n_neg = (neg > NEG_INF).sum(1)
    if bool((n_neg == 0).any()):
        raise ValueError("a prediction has no negative: the batch holds no other present latent"
                         + (" of another sequence (negatives='other_sequences' needs B >= 2)"
                            if negatives == "other_sequences" else ""))
    floor = None
    if tau_plus > 0.0:
        floor = _auto_floor(log_floor, similarity, temperature, neg)
        C.check_log_floor(floor, pos.shape[0], pos.device, values=isinstance(log_floor, torch.Tensor))
    terms = debiased_terms(pos, neg, n_neg, tau_plus, floor)  # [A]
    return _cpc_reduce(terms, valid, reduction)


def _cpc_reduce(terms: torch.Tensor, valid: torch.Tensor, reduction: str) -> torch.Tensor:
    """cpc_nce's terms [A] (one per True of ``valid`` [B, T_c, K]) reduced as its docstring says."""
    if reduction == "sum":
        return terms.sum()
    per = torch.zeros(valid.shape, dtype=terms.dtype, device=terms.device).masked_scatter(valid, terms)
    if reduction == "none":
        return per
    counts = valid.sum((0, 1))  # [K] terms per step
    step_means = per.sum((0, 1))[counts > 0] / counts[counts > 0].to(per.dtype)
    return step_means.mean()
