#!/usr/bin/env python
"""Benchmark: the debiased loss (forward + backward) against the paper's exp-space formulation.

For each batch size B (2B views, d = 128) and temperature, this times
``shared_losses.debiased_nce`` and a faithful re-implementation of DCL's Figure 3 pseudocode
(exp of the full similarity matrix, a boolean negative mask and ``masked_select``), both measured
in this run on this machine, and reports the time ratio, the peak extra memory of each (measured
in a fresh subprocess per configuration, from the process's peak RSS) and whether each loss and
its gradient are finite. At t = 0.01 the exp-space version overflows float32.

    python scripts/bench_losses.py                 # table
    python scripts/bench_losses.py --json          # one JSON object per configuration and line
    python scripts/bench_losses.py --batches 256 1024 --temperatures 0.5 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from shared_losses.training.cli import ArgumentParser, HelpFormatter, number_in


def exp_space_debiased(z1, z2, temperature, tau_plus):
    """DCL Figure 3 (M = 1) in exp space, as the paper's code computes it."""
    B = z1.shape[0]
    out = torch.cat([F.normalize(z1, dim=1), F.normalize(z2, dim=1)], dim=0)
    neg = torch.exp(out @ out.t() / temperature)
    mask = torch.ones(2 * B, 2 * B, dtype=torch.bool)
    idx = torch.arange(B)
    mask[idx, idx] = False
    mask[idx, idx + B] = False
    mask[idx + B, idx] = False
    mask[idx + B, idx + B] = False
    neg = neg.masked_select(mask).view(2 * B, -1)
    pos = torch.exp((out[:B] * out[B:]).sum(-1) / temperature)
    pos = torch.cat([pos, pos], dim=0)
    N = 2 * B - 2
    Ng = (-tau_plus * N * pos + neg.sum(dim=-1)) / (1 - tau_plus)
    Ng = torch.clamp(Ng, min=N * math.e ** (-1 / temperature))
    return (-torch.log(pos / (pos + Ng))).mean()


def ours(z1, z2, temperature, tau_plus):
    from shared_losses import debiased_nce

    return debiased_nce(z1, z2, temperature=temperature, tau_plus=tau_plus)


IMPLS = {"ours": ours, "exp_space": exp_space_debiased}


def _inputs(batch, dim, seed=0):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(batch, dim, generator=g)
    z1 = (base + 0.5 * torch.randn(batch, dim, generator=g)).requires_grad_(True)
    z2 = (base + 0.5 * torch.randn(batch, dim, generator=g)).requires_grad_(True)
    return z1, z2


def _step(fn, z1, z2, temperature, tau_plus):
    z1.grad = z2.grad = None
    loss = fn(z1, z2, temperature, tau_plus)
    loss.backward()
    return loss


def measure_one(impl, batch, dim, temperature, tau_plus, repeats):
    """Run in a fresh process: time, peak extra RSS and finiteness of one implementation."""
    fn = IMPLS[impl]
    z1, z2 = _inputs(batch, dim)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    loss = _step(fn, z1, z2, temperature, tau_plus)  # warm-up (and the memory peak)
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024.0
    finite = bool(torch.isfinite(loss)) and bool(torch.isfinite(z1.grad).all()) and bool(torch.isfinite(z2.grad).all())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _step(fn, z1, z2, temperature, tau_plus)
        times.append((time.perf_counter() - t0) * 1000.0)
    return {"ms": statistics.median(times), "peak_mb": peak_mb, "finite": finite, "loss": float(loss)}


def run_child(impl, batch, dim, temperature, tau_plus, repeats):
    cmd = [sys.executable, __file__, "--child", impl, str(batch), str(dim), str(temperature), str(tau_plus),
           str(repeats)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"benchmark child failed for {impl} B={batch}:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--batches", type=number_in(2), nargs="+", default=[256, 1024, 4096], help="samples B (2B views)")
    p.add_argument("--dim", type=number_in(1), default=128, help="embedding size d")
    p.add_argument("--temperatures", type=number_in(0, kind=float, open_low=True), nargs="+", default=[0.5, 0.01],
                   help="temperatures t")
    p.add_argument("--tau-plus", type=number_in(0, 1, float, open_high=True), default=0.1, help="class prior tau+")
    p.add_argument("--repeats", type=number_in(1), default=7, help="timed forward+backward passes (median reported)")
    p.add_argument("--json", action="store_true", help="one JSON object per configuration and line")
    p.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.child:
        impl, b, d, t, tp, r = args.child
        print(json.dumps(measure_one(impl, int(b), int(d), float(t), float(tp), int(r))))
        return

    torch_threads = torch.get_num_threads()
    if not args.json:
        print(f"debiased loss, forward+backward, d={args.dim}, tau+={args.tau_plus}, torch {torch.__version__}, "
              f"{torch_threads} threads, median of {args.repeats}")
        print(f"{'B':>6} {'t':>5} {'ours ms':>9} {'exp ms':>9} {'speed-up':>8} {'ours MB':>8} {'exp MB':>8} "
              f"{'ours finite':>11} {'exp finite':>10}")
    for temperature in args.temperatures:
        for batch in args.batches:
            a = run_child("ours", batch, args.dim, temperature, args.tau_plus, args.repeats)
            b = run_child("exp_space", batch, args.dim, temperature, args.tau_plus, args.repeats)
            row = {
                "batch": batch, "temperature": temperature, "dim": args.dim,
                "ours_ms": round(a["ms"], 3), "exp_space_ms": round(b["ms"], 3),
                "speedup": round(b["ms"] / a["ms"], 3),
                "ours_peak_mb": round(a["peak_mb"], 1), "exp_space_peak_mb": round(b["peak_mb"], 1),
                "ours_finite": a["finite"], "exp_space_finite": b["finite"],
            }
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{batch:>6} {temperature:>5} {row['ours_ms']:>9.2f} {row['exp_space_ms']:>9.2f} "
                      f"{row['speedup']:>7.2f}x {row['ours_peak_mb']:>8.1f} {row['exp_space_peak_mb']:>8.1f} "
                      f"{str(row['ours_finite']):>11} {str(row['exp_space_finite']):>10}", flush=True)


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
