"""The engine behind every loss: log-space InfoNCE-family terms over masked logits.

Two shapes of the same idea live here.

* :func:`debiased_terms` turns positive and negative logits into the per-anchor loss of
  DCL eq. (7)-(8) (Chuang et al., NeurIPS 2020), with the hard-negative reweighting of
  Robinson et al. (ICLR 2021) as an option. Plain InfoNCE is the special case
  ``tau_plus = 0, beta = 0, log_floor = None``.
* :func:`weighted_log_softmax` computes ``-sum_j W_ij log P_ij`` over a logit matrix whose
  absent candidates are ``-inf``: InfoNCE, SupCon, SCL-PU and both puNCE forms differ only in
  the weight matrix ``W``.

Nothing here validates its inputs: the public functions do that once, at the boundary.
"""

from __future__ import annotations

import contextlib
import math
import threading

import torch
import torch.nn.functional as F

NEG_INF = float("-inf")

#: The device types whose autocast :func:`full_precision` switches off around a loss.
AUTOCAST_DEVICES = ("cpu", "cuda", "xpu", "mps", "hpu")


def _autocast_on(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type))
    except (RuntimeError, TypeError, ValueError):  # a device type this build does not know
        return False


def full_precision(fn):
    """Run the loss ``fn`` with autocast switched off: under ``torch.autocast`` (mixed-precision training) its
    matrix products would run in float16 / bfloat16 again after :func:`promote` widened the inputs, and the scores
    of a temperature of 0.01 would lose their digits (SPEC: losses in float32 or wider, whatever the inputs)."""
    import functools

    @functools.wraps(fn)
    def run(*args, **kwargs):
        on = [d for d in AUTOCAST_DEVICES if _autocast_on(d)]
        if not on:
            return fn(*args, **kwargs)
        with contextlib.ExitStack() as stack:
            for device_type in on:
                stack.enter_context(torch.autocast(device_type, enabled=False))
            return fn(*args, **kwargs)

    return run


def promote(t: torch.Tensor) -> torch.Tensor:
    """Half-precision inputs are computed in float32; float32/float64 are kept."""
    if t.dtype in (torch.float16, torch.bfloat16):
        return t.float()
    return t


def log_count(count: torch.Tensor | float, dtype: torch.dtype) -> torch.Tensor | float:
    """``log(count)`` of a per-row count tensor (in ``dtype``: an integer count would otherwise be
    logged in the default float32, even for float64 logits) or of a plain number."""
    if isinstance(count, torch.Tensor):
        return torch.log(count.to(dtype))
    return math.log(count)


def log_mean_exp(x: torch.Tensor, count: torch.Tensor | float, dim: int = -1) -> torch.Tensor:
    """``log( (1/count) * sum exp(x) )`` along ``dim``; ``-inf`` entries contribute nothing."""
    return torch.logsumexp(x, dim=dim) - log_count(count, x.dtype)


class _LogSumExpInPlace(torch.autograd.Function):
    """Row-wise logsumexp that reuses its input's storage.

    Forward turns ``x`` into ``exp(x - rowmax)`` in place and keeps it; backward scales that buffer
    into the gradient ``softmax(x) * g`` without a second exp pass. Saves one ``[A, K]``
    allocation and one exp pass per step against ``torch.logsumexp``. Only for buffers the caller
    owns and never reads again (the freshly built similarity matrix).

    Its gradient has no graph back to ``x`` (the values of ``x`` are gone), so it has no second
    derivative: a backward with ``create_graph=True`` through it raises (:func:`twice_differentiable`
    computes out of place instead), where it would otherwise return a wrong Hessian silently.
    """

    @staticmethod
    def forward(ctx, x):
        m = x.amax(dim=1, keepdim=True)
        buf = x.sub_(m).exp_()
        total = buf.sum(dim=1, keepdim=True)
        ctx.save_for_backward(buf, total)
        return (total.log() + m).squeeze(1)

    @staticmethod
    def backward(ctx, grad):
        if torch.is_grad_enabled():  # create_graph=True: a second derivative is asked for
            raise RuntimeError(
                "a second derivative (backward with create_graph=True) of info_nce, debiased_nce or "
                "hard_negative_nce with beta=0: their fast path computes the row-wise logsumexp in the score "
                "matrix's own memory and has no second derivative; compute the loss inside "
                "`with shared_losses.twice_differentiable():` (out of place, exact to any order)")
        buf, total = ctx.saved_tensors
        return buf * (grad.unsqueeze(1) / total)


_OUT_OF_PLACE = threading.local()


@contextlib.contextmanager
def twice_differentiable():
    """Within this block (this thread), the losses compute out of place: their second and higher derivatives
    (``torch.autograd.grad(..., create_graph=True)``: gradient penalties, MAML, influence functions) are exact. Outside
    it, :func:`info_nce`, :func:`debiased_nce` and :func:`hard_negative_nce` with ``beta=0`` reuse the score matrix's
    memory for speed and refuse a second derivative. ``torch.func`` transforms (grad, jacrev, hessian) always take
    the out-of-place path (``vmap`` does not apply: the input checks read values on the host)."""
    before = getattr(_OUT_OF_PLACE, "on", False)
    _OUT_OF_PLACE.on = True
    try:
        yield
    finally:
        _OUT_OF_PLACE.on = before


def _transforms_active() -> bool:
    """Whether a ``torch.func`` transform (grad, vmap, ...) is running: its tensors go through functorch, whose
    autograd.Function support the in-place path does not have."""
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active is not None and active())


def logsumexp_inplace(x: torch.Tensor) -> torch.Tensor:
    """``torch.logsumexp(x, 1)`` that consumes ``x`` (see :class:`_LogSumExpInPlace`); out of place, and with
    every derivative, inside :func:`twice_differentiable` and under ``torch.func`` transforms."""
    if getattr(_OUT_OF_PLACE, "on", False) or _transforms_active():
        return torch.logsumexp(x, 1)
    return _LogSumExpInPlace.apply(x)


def debiased_terms(
    pos: torch.Tensor,
    neg: torch.Tensor,
    n_neg: torch.Tensor | float,
    tau_plus: float = 0.0,
    log_floor: torch.Tensor | float | None = None,
    beta: float = 0.0,
    pos_present: torch.Tensor | None = None,
    consume_neg: bool = False,
) -> torch.Tensor:
    """Per-anchor debiased loss, all in log space.

    Args:
        pos: ``[A, M]`` positive logits (``-inf`` = absent when ``pos_present`` is given).
        neg: ``[A, N]`` negatives shared by the M turns, or ``[A, M, N]`` per turn;
            ``-inf`` entries are absent.
        n_neg: number of present negatives, a float or a tensor broadcastable to ``[A]``
            (shared) or ``[A, M]`` (per turn).
        tau_plus: class prior tau+ in [0, 1).
        log_floor: ``log`` of the lower bound on g (float or ``[A]`` tensor) or None.
        beta: hard-negative concentration (0 = uniform weights).
        pos_present: ``[A, M]`` bool mask of present positives, or None if all are.
        consume_neg: ``neg`` is a ``[A, N]`` buffer the caller owns and will not read again; it
            is overwritten to save memory and time.

    Returns:
        ``[A]`` losses: mean over the present positives m of
        ``-log(e^{p_m} / (e^{p_m} + N g))`` = ``softplus(log N + log g - p_m)``.
    """
    per_turn = neg.dim() == 3
    # (1/N) sum_n w_n e^{q_n} with w_n = e^{beta q_n} / mean_n e^{beta q_n}  (HCL; docs/equations.md section 4).
    if beta:
        log_neg_mean = torch.logsumexp((1.0 + beta) * neg, dim=-1) - torch.logsumexp(beta * neg, dim=-1)
    elif consume_neg and not per_turn:
        log_neg_mean = logsumexp_inplace(neg) - log_count(n_neg, neg.dtype)
    else:
        log_neg_mean = log_mean_exp(neg, n_neg, dim=-1)
    if not per_turn:
        log_neg_mean = log_neg_mean.unsqueeze(1)  # [A, 1], broadcast over the M turns

    if tau_plus > 0.0:
        if pos_present is None:
            log_pos_mean = log_mean_exp(pos, pos.shape[1], dim=1)
        else:
            log_pos_mean = log_mean_exp(pos, pos_present.sum(1).to(pos.dtype), dim=1)
        # g = (neg_mean - tau+ pos_mean) / tau-  =  neg_mean (1 - e^r) / tau-,  r = log tau+ + lpm - lnm
        r = math.log(tau_plus) + log_pos_mean.unsqueeze(1) - log_neg_mean
        positive = r < 0
        safe_r = torch.where(positive, r, torch.full_like(r, -1.0))
        log_g = log_neg_mean + torch.log(-torch.expm1(safe_r)) - math.log1p(-tau_plus)
        log_g = torch.where(positive, log_g, torch.full_like(log_g, NEG_INF))
    else:
        log_g = log_neg_mean

    if log_floor is not None:
        if isinstance(log_floor, torch.Tensor):
            floor = log_floor.to(log_g.dtype)
            if floor.dim() == 1:
                floor = floor.unsqueeze(1)
            # where, not torch.maximum: at a tie (one negative, tau+ = 0, the min-negative floor) maximum sends half
            # the gradient to the floor, a constant; clamp(min=), the float floor's path, sends it all to the estimate
            log_g = torch.where(log_g < floor, floor, log_g)  # a NaN estimate stays NaN, as with maximum
        else:
            log_g = log_g.clamp(min=float(log_floor))

    log_n = log_count(n_neg, log_g.dtype)
    if isinstance(log_n, torch.Tensor) and log_n.dim() == 1 and not per_turn:
        log_n = log_n.unsqueeze(1)
    log_ng = log_n + log_g

    if pos_present is None:
        return _softplus(log_ng - pos).mean(dim=1)
    safe_pos = torch.where(pos_present, pos, torch.zeros_like(pos))
    turns = _softplus(log_ng - safe_pos)
    turns = torch.where(pos_present, turns, torch.zeros_like(turns))
    return turns.sum(1) / pos_present.sum(1).to(turns.dtype)


def _softplus(x: torch.Tensor) -> torch.Tensor:
    """log(1 + e^x) to the dtype's precision: torch's softplus returns x itself above its threshold (20), off by
    up to e^-20 = 2e-9, below float32's resolution there but not float64's (whose threshold is then 40)."""
    return F.softplus(x, threshold=40.0 if x.dtype == torch.float64 else 20.0)


def weighted_log_softmax(logits: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``l_i = -sum_j W_ij log P_ij`` with ``log P_ij = s_ij - logsumexp_k s_ik``.

    ``logits`` is ``[A, K]`` with absent candidates (the anchor itself) at ``-inf``;
    ``weights`` is ``[A, K]``, zero wherever the logit is ``-inf``.
    """
    lse = torch.logsumexp(logits, dim=1)
    finite = torch.where(weights > 0, logits, torch.zeros_like(logits))
    return weights.sum(1) * lse - (weights * finite).sum(1)


def reduce(loss: torch.Tensor, reduction: str) -> torch.Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss
