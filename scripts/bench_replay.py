#!/usr/bin/env python
"""Benchmark: the replay's host work per agent step (rl_curl.replay.FrameReplay), what a GPU run pays on the host
between its updates: drawing a batch's indices (``sample_indices``, every update) and adding a step (``add``).

``sample_indices`` first counts the stored transitions whose oldest frame the ring has overwritten. That count is
now a binary search over the stored transitions; it used to index all of them (``np.searchsorted`` over their
oldest frames, gathered in insertion order), which is timed here beside it in the same run as the baseline. The
replay is filled to ``--stored`` transitions of ``--capacity`` (the CURL paper's 100k) in episodes of
``--episode-length`` agent steps (short episodes leave stale transitions: ``k`` extra frames each), with frames of
``--image-size`` pixels (the count does not depend on it; ``add`` copies one frame).

    python scripts/bench_replay.py                      # table
    python scripts/bench_replay.py --json               # one JSON object
    python scripts/bench_replay.py --device cuda        # the frame ring on the GPU with device sampling (--cuda-graphs)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def stale_by_indexing_all(rb) -> int:
    """The baseline: the stale count by gathering every stored transition's oldest frame (rl_curl.replay up to
    2026-12-01)."""
    n = min(rb.added, rb.capacity)
    if n == 0:
        return 0
    order = (rb.added - n + np.arange(n)) % rb.capacity
    return int(np.searchsorted(rb.next_frame[order] - rb.k, rb.frames_written - rb.frame_capacity, side="left"))


def per_call_ms(fn, calls: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t) * 1000 / calls


def main(argv=None) -> int:
    from shared_losses.training.cli import ArgumentParser, examples_from, number_in

    p = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=examples_from(__doc__),
                       formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--capacity", type=number_in(1), default=100_000,
                   help="transitions the replay holds (default: 100000)")
    p.add_argument("--stored", type=int, nargs="+", default=[12_500, 100_000],
                   help="transitions stored when timed, each a row (default: 12500, a 100k-step cartpole run at "
                        "action repeat 8, and 100000, a full replay)")
    p.add_argument("--episode-length", type=int, default=125, help="agent steps per episode (default: 125, "
                                                                   "cartpole's 1000 steps at action repeat 8)")
    p.add_argument("--image-size", type=number_in(1), default=100, help="frame side in pixels (default: 100)")
    p.add_argument("--batch", type=int, default=512, help="batch size of sample_indices (default: 512)")
    p.add_argument("--calls", type=int, default=2000, help="timed calls of each (default: 2000)")
    p.add_argument("--device", default="host", help="where the frame ring lives: host (numpy, the default path), "
                                                    "cpu or cuda (a torch ring with device sampling)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args(argv)
    if min(args.stored) < 1 or max(args.stored) > args.capacity:
        p.error(f"--stored must be between 1 and --capacity ({args.capacity}), got {args.stored}")
    if args.episode_length < 1 or args.calls < 1 or args.batch < 1:
        p.error("--episode-length, --calls and --batch must be positive")

    import torch

    from rl_curl.replay import FrameReplay

    torch.set_num_threads(1)
    device = None if args.device == "host" else torch.device(args.device)
    k, s = 3, args.image_size
    rb = FrameReplay(args.capacity, (3 * k, s, s), 1, k, seed=0, device=device)
    if device is not None:
        rb.enable_device_sampling()
    obs = np.random.default_rng(0).integers(0, 256, (3 * k, s, s), dtype=np.uint8)
    action = np.zeros(1, dtype=np.float32)
    rows, t_start = [], time.perf_counter()
    for stored in sorted(set(args.stored)):
        while rb.added < stored:
            if rb.added % args.episode_length == 0:
                rb.start_episode(obs)
            rb.add(action, 0.0, obs, rb.added % args.episode_length == args.episode_length - 1)
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)
        stale = stale_by_indexing_all(rb)
        assert rb._num_stale() == stale  # the same count, or the timing means nothing
        search = per_call_ms(rb._num_stale, args.calls)
        baseline = per_call_ms(lambda: stale_by_indexing_all(rb), args.calls)
        sample = per_call_ms(lambda: rb.sample_indices(args.batch), args.calls)
        added_before = rb.added

        def add_one():
            rb.add(action, 0.0, obs, False)

        add = per_call_ms(add_one, min(args.calls, args.capacity))
        if device is not None and device.type == "cuda":
            torch.cuda.synchronize(device)
        rows.append({"stored": stored, "stale": stale, "stale_count_ms": round(search, 5),
                     "stale_count_indexing_all_ms": round(baseline, 5),
                     "stale_count_speedup": round(baseline / search, 1), "sample_indices_ms": round(sample, 5),
                     "add_ms": round(add, 5), "added_while_timing": rb.added - added_before})
    report = {"device": args.device, "capacity": args.capacity, "image_size": s, "batch": args.batch,
              "episode_length": args.episode_length, "calls": args.calls, "torch": torch.__version__,
              "rows": rows, "seconds": round(time.perf_counter() - t_start, 1)}
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"FrameReplay host work per call, ring on {args.device}, capacity {args.capacity:,}, {s}x{s} frames, "
          f"batch {args.batch}, {args.calls} calls each (ms)")
    print(f"{'stored':>8} {'stale':>6} {'count (search)':>15} {'count (index all)':>18} {'ratio':>7} "
          f"{'sample_indices':>15} {'add':>8}")
    for r in rows:
        print(f"{r['stored']:>8,} {r['stale']:>6} {r['stale_count_ms']:>15.4f} "
              f"{r['stale_count_indexing_all_ms']:>18.4f} {r['stale_count_speedup']:>6.1f}x "
              f"{r['sample_indices_ms']:>15.4f} {r['add_ms']:>8.4f}")
    return 0


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
