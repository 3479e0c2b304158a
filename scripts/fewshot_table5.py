#!/usr/bin/env python
"""Run the puNCE Table 5 grid (objective x N x seeds) and aggregate it in the paper's layout.

Each run is `fewshot.train` with its own output folder (<out>/<objective>/N<n>/seed<s>, --out default runs/table5); a
finished run (metrics.json present) is skipped, so an interrupted sweep continues where it stopped; a
finished run made with other options (steps, lr, encoder, data, ...) is refused, never counted in the table.
The table reports the plain mean ± std over all seeds (no best-k-of-n selection; see FEWSHOT.md, the project's notes
(not in this repository), on why the paper's baseline numbers are inflated by one) and a plot of accuracy vs N.

    python scripts/fewshot_table5.py --encoder roberta-base --dataset glue/sst2          # the paper (GPU)
    python scripts/fewshot_table5.py --encoder minilm --pooling mean --dataset drugreview --ns 20 100 --seeds 0 1 --steps 100
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shared_losses.cli import HelpFormatter  # noqa: E402

from fewshot.config import FewShotConfig  # noqa: E402
from fewshot.objectives import OBJECTIVES  # noqa: E402
from fewshot.train import train  # noqa: E402
from shared_losses.runtime import config_changes  # noqa: E402

PAPER = {  # puNCE Table 5 (RoBERTa, SST-2), mean ± std
    20: {"ce": "85.92±2.11", "ce+scl": "88.18±3.30", "ce+punce": "91.15±1.75"},
    100: {"ce": "91.10±1.36", "ce+scl": "92.83±1.23", "ce+punce": "93.76±0.17"},
    1000: {"ce": "94.03±0.64", "ce+scl": "94.11±0.53", "ce+punce": "94.58±0.79"},
}


def aggregate(out: Path, objectives, ns, seeds):
    table = {}
    for n in ns:
        for obj in objectives:
            accs = []
            for s in seeds:
                f = out / obj / f"N{n}" / f"seed{s}" / "metrics.json"
                if f.exists():
                    accs.append(json.loads(f.read_text())["eval_accuracy"])
            if accs:
                table[(n, obj)] = (statistics.mean(accs), statistics.stdev(accs) if len(accs) > 1 else 0.0, len(accs))
    return table


def run_config(args, obj, n, s, run_dir) -> FewShotConfig:
    return FewShotConfig(encoder=args.encoder, dataset=args.dataset, eval_file=args.eval_file,
                         text_column=args.text_column, label_column=args.label_column,
                         positive_label=args.positive_label, objective=obj, n_labeled=n,
                         n_unlabeled=args.n_unlabeled, seed=s, steps=args.steps, pooling=args.pooling, lr=args.lr,
                         eval_every=args.steps, output_dir=str(run_dir), resume=(run_dir / "checkpoint").exists())


def check_finished(run_dir: Path, cfg: FewShotConfig) -> None:
    """Refuse a finished run made with other options than the sweep asks for: it would be skipped and
    counted in a table whose header names the current options."""
    f = run_dir / "config.json"
    if not f.exists():
        raise SystemExit(f"{run_dir} has metrics.json but no config.json: cannot tell which options it was run with")
    # a field that runs from older versions lack had its default value then
    changed = config_changes(json.loads(f.read_text()), dataclasses.asdict(cfg), legacy=dataclasses.asdict(FewShotConfig()),
                             free={"resume", "output_dir", "prior_used", "prior_source"})
    if changed:
        raise SystemExit(f"{run_dir} was run with other options ("
                         + ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in changed)
                         + "); pass the same options, or use another --out for the new ones")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--encoder", default="roberta-base", help="HF encoder name or folder ('minilm' = offline MiniLM)")
    p.add_argument("--dataset", default="glue/sst2", help="glue/sst2, drugreview, reuters or a local file")
    p.add_argument("--eval-file", default=None, help="evaluation file for a local dataset")
    p.add_argument("--text-column", default=FewShotConfig.text_column, help="text column of a local dataset")
    p.add_argument("--label-column", default=FewShotConfig.label_column, help="label column of a local dataset")
    p.add_argument("--positive-label", default=FewShotConfig.positive_label,
                   help="label value of the positive class in a local dataset")
    p.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=OBJECTIVES,
                   help="objectives of the grid")
    p.add_argument("--ns", type=int, nargs="+", default=[20, 100, 1000], help="labeled sizes N")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds per (objective, N)")
    p.add_argument("--n-unlabeled", type=int, default=500, help="unlabeled examples U per run")
    p.add_argument("--steps", type=int, default=FewShotConfig.steps, help="optimisation steps per run")
    p.add_argument("--pooling", default="cls", choices=["cls", "mean"],
                   help="sentence vector: first token (RoBERTa) or mean over tokens (use mean for minilm)")
    p.add_argument("--lr", type=float, default=FewShotConfig.lr, help="AdamW learning rate")
    p.add_argument("--out", default="runs/table5", help="sweep folder")
    p.add_argument("--aggregate-only", action="store_true",
                   help="only rebuild the table and plot (pass the sweep's options: finished runs are checked against them)")
    args = p.parse_args(argv)
    out = Path(args.out)

    for n in args.ns:
        for obj in args.objectives:
            for s in args.seeds:
                run_dir = out / obj / f"N{n}" / f"seed{s}"
                cfg = run_config(args, obj, n, s, run_dir)
                if (run_dir / "metrics.json").exists():
                    check_finished(run_dir, cfg)
                elif not args.aggregate_only:
                    print(f"== {obj} N={n} seed={s}", flush=True)
                    train(cfg)

    table = aggregate(out, args.objectives, args.ns, args.seeds)
    lines = [f"Accuracy (%) on the evaluation split, mean ± std over seeds {args.seeds}; encoder {args.encoder}, "
             f"data {args.dataset}, U = {args.n_unlabeled}, {args.steps} steps", "",
             "| labeled N | " + " | ".join(args.objectives) + " |", "|---|" + "---|" * len(args.objectives)]
    for n in args.ns:
        cells = []
        for obj in args.objectives:
            if (n, obj) in table:
                m, sd, k = table[(n, obj)]
                cells.append(f"{m:.2f}±{sd:.2f}" + (f" ({k} runs)" if k != len(args.seeds) else ""))
            else:
                cells.append("—")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    if args.dataset == "glue/sst2":
        lines += ["", "Paper (puNCE Table 5, RoBERTa; CE and CE+SCL from Gunel et al., best 3 of 10 runs):"]
        lines += [f"| {n} | " + " | ".join(PAPER.get(n, {}).get(o, "—") for o in args.objectives) + " |" for n in args.ns]
    text = "\n".join(lines)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "table5.md").write_text(text + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        for obj in args.objectives:
            pts = [(n, *table[(n, obj)][:2]) for n in args.ns if (n, obj) in table]
            if pts:
                xs, ms, sds = zip(*pts)
                ax.errorbar(xs, ms, yerr=sds, marker="o", capsize=3, label=obj)
        ax.set_xscale("log")
        ax.set_xlabel("labeled examples N")
        ax.set_ylabel("accuracy (%)")
        ax.legend()
        ax.set_title(f"{args.dataset}, {os.path.basename(args.encoder)}")
        fig.tight_layout()
        fig.savefig(out / "table5.png", dpi=120)
        print(f"plot: {out / 'table5.png'}")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
