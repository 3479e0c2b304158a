"""Score functions ``sim(z_i, z_j)`` of docs/equations.md section 1: cosine, dot product, CURL's bilinear form."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _checks as C
from ._core import promote


def _check_pair(a: torch.Tensor, b: torch.Tensor) -> None:
    """Both ``[B, d]`` floating-point tensors with the same ``d``, on one device (a ValueError naming what differs)."""
    C.check_float_tensor("a", a, (2,), nan=False)
    C.check_float_tensor("b", b, (2,), nan=False)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a has {a.shape[1]} features per row and b has {b.shape[1]}: scores need both [B, d] with "
                         f"the same d (got {tuple(a.shape)} and {tuple(b.shape)})")
    C.check_same_device(a=a, b=b)


def _wide(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half-precision inputs scored in float32 (docs/equations.md section 1), both in one dtype."""
    a, b = promote(a), promote(b)
    wide = torch.promote_types(a.dtype, b.dtype)
    return a.to(wide), b.to(wide)


def cosine_scores(a: torch.Tensor, b: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``[Ba, Bb]`` matrix of ``cos(a_i, b_j) / t`` (SimCLR, DCL, puNCE); float16 / bfloat16 inputs are scored in
    float32."""
    _check_pair(a, b)
    a, b = _wide(a, b)
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T / C.check_temperature(temperature)


def dot_scores(a: torch.Tensor, b: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``[Ba, Bb]`` matrix of ``a_i^T b_j / t`` (quick-thought uses t = 1, no normalisation); float16 / bfloat16
    inputs are scored in float32."""
    _check_pair(a, b)
    a, b = _wide(a, b)
    return a @ b.T / C.check_temperature(temperature)


class BilinearScore(nn.Module):
    """CURL's bilinear similarity ``sim(q, k) = q^T W k`` (Srinivas, Laskin & Abbeel, 2020).

    ``forward(a [Ba, d], b [Bb, d])`` returns the ``[Ba, Bb]`` logits ``a W b^T``; with a query
    batch against its key batch the positives are on the diagonal. ``W`` is learned; it is
    initialised uniformly in [0, 1) as in the CURL paper's code. The scores are unbounded, so a
    debiased loss on them needs an explicit floor (see ``log_floor_min_negative``).
    """

    def __init__(self, dim: int):
        super().__init__()
        import operator

        try:
            size = None if isinstance(dim, bool) else operator.index(dim)  # ints, NumPy's included
        except TypeError:
            size = None
        if size is None or size < 1:
            raise ValueError(f"BilinearScore(dim): dim is the features' size, a whole number >= 1, got {dim!r}")
        self.dim = size
        self.W = nn.Parameter(torch.rand(size, size))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        """Scores ``a W b^T`` of every row of ``a`` [N, dim] against every row of ``b`` [M, dim]: [N, M]."""
        if a.dim() != 2 or b.dim() != 2:  # a 3-D b would be turned around whole by .T: scores of the wrong pairs
            raise ValueError(f"BilinearScore({self.dim}) scores two batches of features [N, {self.dim}] and "
                             f"[M, {self.dim}], got shapes {tuple(a.shape)} and {tuple(b.shape)} (one vector: "
                             "x[None]; several batches: one call per batch, or torch.vmap)")
        if a.shape[-1] != self.dim or b.shape[-1] != self.dim:
            raise ValueError(f"BilinearScore({self.dim}) got features of size {a.shape[-1]} and {b.shape[-1]}")
        w = self.W
        if not a.dtype == b.dtype == w.dtype and not torch.is_autocast_enabled(a.device.type):
            # outside autocast (which casts the matmuls itself): half inputs scored at W's precision
            if {a.dtype, b.dtype} <= {torch.float16, torch.bfloat16, w.dtype}:
                a, b = a.to(w.dtype), b.to(w.dtype)
            else:
                raise ValueError(f"BilinearScore: features of dtype {a.dtype} and {b.dtype} against W of {w.dtype}: "
                                 f"cast them (or the module: .to({a.dtype})) to one dtype")
        return a @ (w @ b.T)

    def extra_repr(self) -> str:
        """The feature size, for ``print(module)``."""
        return f"dim={self.dim}"
