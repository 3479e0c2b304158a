"""Negatives across processes (docs/equations.md section 6).

With data-parallel training the candidates of an anchor are the views of the *global* batch.
:func:`gather_with_grad` concatenates a tensor from every process along dim 0 while keeping the
autograd graph: its backward sums the gradients that every process's loss puts on each slice and
hands each process its own slice. (We use our own autograd function rather than
``torch.distributed.nn.functional.all_gather``, which is deprecated and, on gloo, returned wrong
gradients for non-contiguous incoming gradients in our tests.) Each process then computes the loss of its *local*
anchors against the global candidates, averaged over its local anchors. Under DDP / accelerate,
which average parameter gradients over processes, this gives exactly the gradient of
single-process training on the concatenated batch (tested with two gloo processes). That holds for
``reduction="mean"``: with ``"sum"`` each process sums over its local anchors and the averaging
divides the single-process gradient of the summed loss by the number of processes.

All processes must contribute the same number of rows (``all_gather`` needs equal shapes).
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def is_distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def gather_with_grad(t: torch.Tensor) -> tuple[torch.Tensor, int, int]:
    """Concatenate ``t`` from every process along dim 0.

    Returns ``(gathered, rank, world_size)``; without an initialised process group of more than
    one process, ``(t, 0, 1)``. Floating tensors keep gradients; integer tensors (labels, ids) are
    gathered without.
    """
    if not is_distributed():
        return t, 0, 1
    world, rank = dist.get_world_size(), dist.get_rank()
    if t.is_floating_point() and t.requires_grad:
        return _AllGatherCat.apply(t), rank, world
    parts = [torch.empty_like(t) for _ in range(world)]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=0), rank, world


class _AllGatherCat(torch.autograd.Function):
    """Forward: all_gather + cat along dim 0. Backward: sum the incoming gradient over processes
    (all_reduce) and return this process's slice."""

    @staticmethod
    def forward(ctx, t):
        world, rank = dist.get_world_size(), dist.get_rank()
        parts = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(parts, t.contiguous())
        ctx.rank, ctx.n = rank, t.shape[0]
        return torch.cat(parts, dim=0)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous().clone()
        dist.all_reduce(grad, op=dist.ReduceOp.SUM)
        return grad[ctx.rank * ctx.n : (ctx.rank + 1) * ctx.n]
