#!/usr/bin/env python
"""Benchmark: few-shot training throughput and peak memory.

For each sequence length (64, 128) it times full training steps (forward of two dropout views,
loss, backward, AdamW step) of `ce+punce` against the `ce` step (one view, labeled examples only)
measured in the same run, on the same encoder, and reports examples/s, the ratio, and the peak
extra memory (peak RSS on CPU, `torch.cuda.max_memory_allocated` on GPU) of a fresh process per
configuration. Inputs are random token ids of exactly `seq_len` tokens.

    python scripts/bench_fewshot.py                     # offline MiniLM, CPU
    python scripts/bench_fewshot.py --encoder roberta-base --batch-labeled 16 --batch-unlabeled 32 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shared_losses.cli import HelpFormatter  # noqa: E402


def measure(objective, encoder, seq_len, n_lab, n_unl, steps, pooling):
    from fewshot.model import FewShotModel
    from fewshot.objectives import fewshot_loss, roles_from_labels
    from fewshot.train import forward_views

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = FewShotModel(encoder, pooling, 128).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    n = n_lab + (n_unl if objective == "ce+punce" else 0)  # as fewshot.train: only puNCE reads unlabeled examples
    vocab = model.encoder.config.vocab_size
    ids = torch.randint(5, vocab - 1, (n, seq_len), device=device)
    mask = torch.ones_like(ids)
    labels = torch.arange(n, device=device) % 2
    labeled = torch.arange(n, device=device) < n_lab
    roles = roles_from_labels(labels, labeled)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for i in range(steps + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        logits, zs = forward_views(model, ids, mask, objective)
        z1, z2 = zs[0], (zs[1] if len(zs) > 1 else None)
        loss, _ = fewshot_loss(objective, logits, z1, z2, labels, roles, 0.1, 0.3, 0.5)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i > 0:  # the first step is warm-up
            times.append(time.perf_counter() - t0)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024.0)
    return {"examples_per_s": n / statistics.median(times), "peak_mb": peak, "batch": n, "device": device}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--encoder", default="minilm", help="HF encoder name or folder ('minilm' = offline MiniLM)")
    p.add_argument("--pooling", default="mean", choices=["cls", "mean"], help="as fewshot.train --pooling")
    p.add_argument("--seq-lens", type=int, nargs="+", default=[64, 128], help="sequence lengths (tokens) to time")
    p.add_argument("--batch-labeled", type=int, default=16, help="labeled examples per step")
    p.add_argument("--batch-unlabeled", type=int, default=32, help="unlabeled examples per step (ce+punce)")
    p.add_argument("--steps", type=int, default=5, help="timed steps (median reported) after one warm-up")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        obj, seq = args.child
        print(json.dumps(measure(obj, args.encoder, int(seq), args.batch_labeled, args.batch_unlabeled, args.steps, args.pooling)))
        return
    if not args.json:
        print(f"few-shot training step, encoder {args.encoder}, {args.batch_labeled} labeled + {args.batch_unlabeled} unlabeled")
        print(f"{'seq':>5} {'objective':>9} {'batch':>6} {'ex/s':>8} {'peak MB':>8} {'time vs ce':>10}")
    for seq in args.seq_lens:
        res = {}
        for obj in ("ce", "ce+punce"):
            cmd = [sys.executable, __file__, "--child", obj, str(seq), "--encoder", args.encoder, "--pooling", args.pooling,
                   "--batch-labeled", str(args.batch_labeled), "--batch-unlabeled", str(args.batch_unlabeled),
                   "--steps", str(args.steps)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SystemExit(f"benchmark child failed ({obj}, seq {seq}):\n{r.stderr[-2000:]}")
            res[obj] = json.loads(r.stdout.strip().splitlines()[-1])
        for obj in ("ce", "ce+punce"):
            m = res[obj]
            # time per step relative to the CE step measured in this run
            ratio = (m["batch"] / m["examples_per_s"]) / (res["ce"]["batch"] / res["ce"]["examples_per_s"])
            row = {"seq_len": seq, "objective": obj, "batch": m["batch"], "examples_per_s": round(m["examples_per_s"], 2),
                   "peak_mb": round(m["peak_mb"], 1), "step_time_vs_ce": round(ratio, 3), "device": m["device"]}
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{seq:>5} {obj:>9} {m['batch']:>6} {row['examples_per_s']:>8.2f} {row['peak_mb']:>8.1f} {ratio:>9.2f}x", flush=True)


if __name__ == "__main__":
    main()
