"""docs/equations.md section 6: two CPU processes (gloo) give the loss and gradients of one process on the
whole batch, with negatives gathered across processes and DDP averaging the gradients."""

import os

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

import shared_losses as S

pytestmark = pytest.mark.slow  # two processes (torch.multiprocessing, gloo)

WORLD, B, V, D_IN, D = 2, 5, 2, 7, 4


def _data():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(WORLD * B, V, D_IN, generator=g, dtype=torch.float64)
    labels = torch.tensor([1, 0, -1, 0, 0, 1, 0, 0, -1, 0])  # per source, [WORLD * B]
    return x, labels


def _model():
    torch.manual_seed(1)
    return torch.nn.Linear(D_IN, D, bias=False).double()


def _losses(model, x, labels, src_offset, gather):
    z = model(x)  # [b, V, D]
    b = x.shape[0]
    feats = z.transpose(0, 1).reshape(V * b, D)  # view-major rows
    src = (torch.arange(b) + src_offset).repeat(V)
    lab = labels.repeat(V)
    return {
        "debiased": S.debiased_nce(z, temperature=0.5, tau_plus=0.1, gather_distributed=gather),
        "hard": S.hard_negative_nce(z, temperature=0.5, tau_plus=0.1, beta=1.0, gather_distributed=gather),
        "punce": S.punce_loss(feats, src, lab, 0.3, 0.5, gather_distributed=gather),
        "supcon": S.supcon_loss(feats, lab.abs(), 0.5, gather_distributed=gather),
    }


def _worker(rank, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    x, labels = _data()
    sl = slice(rank * B, (rank + 1) * B)
    results = {}
    for name in ("debiased", "hard", "punce", "supcon"):
        model = DDP(_model())
        loss = _losses(model, x[sl], labels[sl], 0, gather=True)[name]
        loss.backward()
        results[name] = (loss.detach(), model.module.weight.grad.clone())
    torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_two_processes_equal_one(tmp_path):
    # A gloo child has been seen to die of SIGABRT at start-up in 2 of 5 full-suite runs on the 2-core CI
    # machine (2026-11-24; never in this file run alone; cause not found). A child killed by a signal is
    # started again once, with a fresh rendezvous file; wrong numbers still fail the asserts below.
    for attempt in range(2):
        try:
            mp.spawn(_worker, args=(str(tmp_path / f"init{attempt}"), str(tmp_path)), nprocs=WORLD, join=True)
            break
        except mp.ProcessExitedException as err:
            if attempt or err.signal_name is None:
                raise
    per_rank = [torch.load(tmp_path / f"rank{r}.pt") for r in range(WORLD)]
    x, labels = _data()
    for name in ("debiased", "hard", "punce", "supcon"):
        model = _model()
        loss = _losses(model, x, labels, 0, gather=False)[name]
        loss.backward()
        mean_loss = sum(r[name][0] for r in per_rank) / WORLD
        assert torch.allclose(mean_loss, loss.detach(), rtol=1e-10), name
        for r in per_rank:  # DDP all-reduced the gradients: each rank holds the same
            assert torch.allclose(r[name][1], model.weight.grad, rtol=1e-8, atol=1e-12), name


def _unequal_worker(rank, init_file, out_dir):
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    x, _ = _data()
    rows = B - rank  # 5 rows on process 0, 4 on process 1: a last, smaller batch
    said = {}
    for name, call in (("debiased", lambda z: S.debiased_nce(z, temperature=0.5, tau_plus=0.1,
                                                             gather_distributed=True)),
                       ("supcon", lambda z: S.supcon_loss(z[:, 0], torch.zeros(len(z), dtype=torch.long), 0.5,
                                                          gather_distributed=True))):
        try:
            call(x[:rows].requires_grad_())
            said[name] = "no error"
        except ValueError as err:
            said[name] = str(err)
    torch.save(said, os.path.join(out_dir, f"said{rank}.pt"))
    dist.destroy_process_group()


@pytest.mark.timeout(120)
def test_unequal_batches_across_processes_are_refused_on_every_process(tmp_path):
    """Gathering rows of unequal counts (rank 0: 5, rank 1: 4) gave rank 0 a loss computed partly from uninitialised
    memory and rank 1 a failure inside gloo (a probe saw both); now every process refuses, naming the shapes."""
    mp.spawn(_unequal_worker, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=WORLD, join=True)
    for rank in range(WORLD):
        said = torch.load(tmp_path / f"said{rank}.pt")
        for name in ("debiased", "supcon"):
            assert "must have equal shapes" in said[name] and "process 0: [5" in said[name] and \
                "process 1: [4" in said[name] and "drop_last=True" in said[name], (rank, name, said[name])
