#!/usr/bin/env python
"""Wall time of one whole PU run on the 5,000 shipped digits at the image pipeline's defaults (issue target: <= 3
minutes on 2 cores): the puNCE encoder + the PN / uPU / nnPU probes, split into data loading and set-up, encoder
training and probes; beside it, in the same process, the raw-pixel baselines (three end-to-end MLPs, one per
risk) as the reference the ratio is taken against.

    python scripts/bench_pu_images.py                    # n_P = 100, seed 0, the preset's steps
    python scripts/bench_pu_images.py --n-labeled 1000 --repeats 2 --json
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from shared_losses.training.cli import ArgumentParser, HelpFormatter, number_in, run_cli

BUDGET_S = 180.0


def one_run(contrastive: str, args, folder: Path) -> dict:
    from fewshot.config import ImageConfig
    from fewshot.train import train

    cfg = ImageConfig(dataset="mnist", positive_classes=(0, 2, 4, 6, 8), encoder=args.encoder,
                      setting="pu", n_labeled=args.n_labeled, seed=args.seed, contrastive=contrastive,
                      output_dir=str(folder), progress=False, export=False,
                      **({"max_steps": args.steps, "passes": None} if args.steps is not None else {}))
    t0 = time.perf_counter()
    m = train(cfg)
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "train_s": m["train_seconds"], "probe_s": m["probe_seconds"],
            "setup_s": wall - m["train_seconds"] - m["probe_seconds"], "eval_accuracy": m["eval_accuracy"],
            "steps": m["steps"]}


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--n-labeled", type=number_in(1), default=100, help="labeled positives n_P")
    p.add_argument("--encoder", default="mlp", choices=["mlp", "cnn"])
    p.add_argument("--max-steps", dest="steps", type=number_in(1), default=None,
                   help="encoder steps (default: the image pipeline's passes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=number_in(1), default=1, help="runs of each kind, interleaved (medians reported)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = p.parse_args(argv)
    import torch

    results = {"punce": [], "raw": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):
            for kind, contrastive in (("punce", "punce"), ("raw", "none")):
                results[kind].append(one_run(contrastive, args, Path(tmp) / f"{kind}{r}"))
    med = {k: {f: statistics.median(x[f] for x in v) for f in v[0]} for k, v in results.items()}
    out = {"cpu": platform.processor() or platform.machine(), "torch_threads": torch.get_num_threads(),
           "cores": os.cpu_count(), "n_labeled": args.n_labeled, "encoder": args.encoder, "repeats": args.repeats,
           "punce_run": med["punce"], "raw_baselines_run": med["raw"],
           "punce_over_raw": med["punce"]["wall_s"] / med["raw"]["wall_s"],
           "punce_over_budget": med["punce"]["wall_s"] / BUDGET_S, "budget_s": BUDGET_S, "runs": results}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"one PU run on the 5k digits, n_P={args.n_labeled}, encoder {args.encoder}, "
          f"{int(med['punce']['steps'])} steps, {out['torch_threads']} torch threads, median of {args.repeats}:")
    print("| run | set-up + data (s) | training (s) | probes (s) | whole (s) | accuracy |")
    print("|---|---|---|---|---|---|")
    for name, key in (("puNCE encoder + PN/uPU/nnPU probes", "punce"), ("raw-pixel PN/uPU/nnPU MLPs", "raw")):
        m = med[key]
        print(f"| {name} | {m['setup_s']:.1f} | {m['train_s']:.1f} | {m['probe_s']:.1f} | {m['wall_s']:.1f} | "
              f"{m['eval_accuracy']:.2f} |")
    print(f"\npuNCE run / raw baselines: {out['punce_over_raw']:.2f}; puNCE run / the 3-minute budget: "
          f"{out['punce_over_budget']:.2f} ({'within' if out['punce_over_budget'] <= 1 else 'OVER'} the budget)")
    return 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
