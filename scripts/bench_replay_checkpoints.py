#!/usr/bin/env python
"""Benchmark: what a run's checkpoints cost in writing its replay (rl_curl.replay), the replay's frames as files
written once (``ReplayCheckpoint``, what rl_curl.train registers) against the replay saved whole at every checkpoint
(the baseline, in the same run: the replay registered itself, as rl_curl.train did before frame files).

A replay is filled as a run fills it, ``--transitions`` agent steps in episodes of ``--episode-length``, frames of
``--image-size`` pixels, into a ring of ``--capacity`` transitions; a checkpoint is written with
``shared_losses.training.runtime.save_checkpoint`` every ``--every`` agent steps (and at the end), each way into its
own folder under ``--dir``. Reported per way: the seconds all checkpoints took, the last one's, and the bytes they
wrote (files new to the disk; a hard link writes none). The defaults are a 100k-environment-step cartpole run at
action repeat 8 with rl_curl.train's checkpoint every 10,000 environment steps: 12,500 transitions, 10 checkpoints.
Frame files are flushed to the disk (fsync) before their checkpoint counts as written; the baseline's replay entry
was not, so its seconds may leave part of its writing to the operating system. ``--sync`` counts each checkpoint
until everything written is on the disk (``os.sync()`` after it, both ways): the time to a durable checkpoint.

    python scripts/bench_replay_checkpoints.py                        # table
    python scripts/bench_replay_checkpoints.py --json                 # one JSON object
    python scripts/bench_replay_checkpoints.py --sync                 # each checkpoint until it is on the disk
    python scripts/bench_replay_checkpoints.py --capacity 20000 --transitions 60000 --every 5000 --image-size 84
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def inodes(folder: Path) -> dict:
    """The files under ``folder``: (device, inode) -> bytes."""
    out = {}
    for path in folder.rglob("*") if folder.exists() else ():
        if path.is_file():
            st = path.stat()
            out[(st.st_dev, st.st_ino)] = st.st_size
    return out


def written_since(before: dict, after: dict) -> int:
    """Bytes of the files of the new checkpoint (``after``) that are not files of the one it replaced (``before``,
    whose files existed while the new ones were written, so no new file can have one of their inodes): a hard link
    writes none."""
    return sum(size for key, size in after.items() if key not in before)


def main(argv=None) -> int:
    from shared_losses.training.cli import ArgumentParser, examples_from, number_in

    p = ArgumentParser(description=__doc__.split("\n\n")[0], epilog=examples_from(__doc__),
                       formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--capacity", type=number_in(2), default=100_000,
                   help="transitions the replay holds (default: 100000, the CURL paper's)")
    p.add_argument("--transitions", type=number_in(1), default=12_500,
                   help="agent steps the run adds (default: 12500, 100k environment steps at action repeat 8)")
    p.add_argument("--every", type=number_in(1), default=1_250,
                   help="agent steps between checkpoints (default: 1250, 10000 environment steps at action repeat 8)")
    p.add_argument("--episode-length", type=number_in(1), default=125,
                   help="agent steps per episode (default: 125, cartpole's 1000 steps at action repeat 8)")
    p.add_argument("--image-size", type=number_in(1), default=100, help="frame side in pixels (default: 100)")
    p.add_argument("--dir", default=None, help="where the checkpoints are written (default: a temporary folder, "
                                               "removed at the end)")
    p.add_argument("--sync", action="store_true", help="count each checkpoint until all it wrote is on the disk "
                                                       "(os.sync() after it, both ways)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args(argv)

    import torch
    from accelerate import Accelerator

    from rl_curl.replay import FrameReplay, ReplayCheckpoint
    from shared_losses.training.runtime import register_named, save_checkpoint

    k, s = 3, args.image_size
    frame_bytes = 3 * s * s
    ring = min(args.capacity + args.capacity // 10 + 2 * k, args.transitions * (1 + k))
    checkpoints = -(-args.transitions // args.every)
    need = ring * frame_bytes * (checkpoints + 2)  # the baseline's last checkpoint and the one it replaces, at most
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_replay_checkpoints_"))
    root.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(root).free
    if need > free:
        p.error(f"the checkpoints may need up to {need / 2**30:.1f} GiB at {root} and {free / 2**30:.1f} GiB is free: "
                "lower --transitions or --image-size, raise --every, or pass --dir")
    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (16, 3 * k, s, s), dtype=np.uint8)  # a few observations, used in turn
    action = np.zeros(1, dtype=np.float32)
    report = {"capacity": args.capacity, "transitions": args.transitions, "every": args.every, "image_size": s,
              "episode_length": args.episode_length, "checkpoints": checkpoints, "sync": args.sync,
              "torch": torch.__version__,
              "ways": {}}
    t_start = time.perf_counter()
    try:
        for way in ("frame files", "whole"):
            rb = FrameReplay(args.capacity, (3 * k, s, s), 1, k, seed=0)
            acc = Accelerator(cpu=True)
            register_named(acc, replay=ReplayCheckpoint(rb) if way == "frame files" else rb)
            folder = root / way.replace(" ", "_") / "checkpoint"
            times, written = [], 0
            while rb.added < args.transitions:
                if rb.added % args.episode_length == 0:
                    rb.start_episode(frames[rb.added % 16])
                rb.add(action, 0.0, frames[(rb.added + 1) % 16],
                       rb.added % args.episode_length == args.episode_length - 1)
                if rb.added % args.every == 0 or rb.added == args.transitions:
                    before, t = inodes(folder), time.perf_counter()
                    save_checkpoint(acc, folder, {"step": rb.added})
                    if args.sync:
                        os.sync()
                    times.append(time.perf_counter() - t)
                    written += written_since(before, inodes(folder))
            report["ways"][way] = {"seconds": round(sum(times), 3), "last_seconds": round(times[-1], 3),
                                   "written_bytes": written, "frames_bytes": rb.frames_written * frame_bytes,
                                   "checkpoint_bytes": sum(f.stat().st_size for f in folder.rglob("*")
                                                           if f.is_file())}
            shutil.rmtree(folder.parent)
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)
    ways = report["ways"]
    report["written_ratio"] = round(ways["whole"]["written_bytes"] / ways["frame files"]["written_bytes"], 2)
    report["seconds_ratio"] = round(ways["whole"]["seconds"] / max(ways["frame files"]["seconds"], 1e-9), 2)
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    report["cpu"] = os.cpu_count()
    if args.json:
        print(json.dumps(report))
        return 0
    gib = 2**30
    print(f"Replay checkpoints: {args.transitions:,} transitions into a ring of {args.capacity:,}, {s}x{s} frames, "
          f"a checkpoint every {args.every:,} agent steps ({checkpoints} in all)"
          + (", each until it is on the disk (--sync)" if args.sync else ""))
    print(f"{'way':<12} {'all checkpoints (s)':>20} {'the last (s)':>13} {'written (GiB)':>14} "
          f"{'last folder (GiB)':>18}")
    for way, r in ways.items():
        print(f"{way:<12} {r['seconds']:>20.2f} {r['last_seconds']:>13.2f} {r['written_bytes'] / gib:>14.3f} "
              f"{r['checkpoint_bytes'] / gib:>18.3f}")
    print(f"whole / frame files: {report['written_ratio']}x the bytes, {report['seconds_ratio']}x the seconds")
    return 0


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
