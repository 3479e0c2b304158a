#!/usr/bin/env python
"""PU images from files: does the Elkan-Noto estimate of the prior cost accuracy against the true prior given?

Makes the files a user with PU images has (fewshot.train images --positive-file / --unlabeled-file) from a labeled
image set: a fixed draw (--split-seed) of --pool training images, of which the first --n-p positives are the
positive file and the other images the unlabeled file (its labels dropped; their positive share is the true prior),
and --n-eval other images as the labeled evaluation file. Then, for every seed, two runs of the image pipeline's
defaults on those files: the prior estimated (the default with files) and the true prior given (--prior). Prints
the table of docs/results/fewshot.md: each seed's prior and nnPU accuracy, mean ± std, and the paired difference
(given - estimated) with its 95 % t interval. Runs that finished are not run again (rerun to extend --seeds).

    python scripts/pu_files_prior.py --out runs/pu_files                 # the table in docs/results/fewshot.md
    python scripts/pu_files_prior.py --dataset cells.npz --positive-classes 3 --pool 400 --n-eval 100 --n-p 20 \\
        --seeds 0 1 --out runs/cells_prior

Writes into --out: data/ (pos.npz, unl.npz, eval.npz, split.json), one run folder per seed and arm (est<seed>,
given<seed>) and table.md.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from shared_losses.training.cli import ArgumentParser, HelpFormatter, run_cli


def make_files(args, folder: Path) -> float:
    """pos.npz, unl.npz and eval.npz in ``folder`` (the same draw every time); returns the true prior of unl.npz."""
    from fewshot.images import binary_labels
    from shared_losses.data import load_images

    data = load_images(args.dataset)
    y = binary_labels(data.y, tuple(args.positive_classes), data.source)
    if args.pool + args.n_eval > len(y):
        raise ValueError(f"--pool {args.pool} and --n-eval {args.n_eval} need {args.pool + args.n_eval} images; "
                         f"{data.source} holds {len(y)}")
    order = np.random.default_rng(args.split_seed).permutation(len(y))
    train, ev = order[:args.pool], order[args.pool:args.pool + args.n_eval]
    pos = train[y[train] == 1][:args.n_p]
    if len(pos) < args.n_p or len(pos) == int(y[train].sum()):
        raise ValueError(f"--n-p {args.n_p}: the {args.pool} training images hold {int(y[train].sum())} positives; "
                         "label fewer so that some stay unlabeled")
    unl = np.setdiff1d(train, pos)
    # the images as the data set held them (channels last, uint8 where its pixels were integers)
    raw = data.x if data.x.ndim == 2 else data.x.transpose(0, 2, 3, 1).reshape(len(data.x), *data.raw_shape)
    raw = np.rint(raw * 255).astype(np.uint8) if data.raw_integer else raw
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "pos.npz", x=raw[pos])
    np.savez(folder / "unl.npz", x=raw[unl])
    np.savez(folder / "eval.npz", x=raw[ev], y=y[ev])
    prior = float(y[unl].mean())
    (folder / "split.json").write_text(json.dumps({"dataset": args.dataset, "positive_classes": args.positive_classes,
                                                   "split_seed": args.split_seed, "n_p": len(pos), "n_u": len(unl),
                                                   "n_eval": len(ev), "true_prior": prior}, indent=1) + "\n")
    return prior


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--dataset", default="mnist", help="labeled images: `mnist` (the shipped digits) or an .npz with "
                   "x and y (default: %(default)s)")
    p.add_argument("--positive-classes", type=int, nargs="+", default=[0, 2, 4, 6, 8],
                   help="class ids of the positive class (default: the even digits)")
    p.add_argument("--pool", type=int, default=1500, help="training images: the two files (default: %(default)s)")
    p.add_argument("--n-p", type=int, default=60, help="labeled positives, the positive file (default: %(default)s)")
    p.add_argument("--n-eval", type=int, default=400, help="images of the evaluation file (default: %(default)s)")
    p.add_argument("--split-seed", type=int, default=0, help="the draw of the files (default: %(default)s)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="runs' seeds (default: 0-4)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="steps of each run (default: the pipeline's, 21.94 passes over the pool)")
    p.add_argument("--hidden", type=int, default=None, help="MLP width (default: the pipeline's, 256)")
    p.add_argument("--batch-size", type=int, default=None, help="images per step (default: the pipeline's, 256)")
    p.add_argument("--out", default="runs/pu_files", help="folder of the files, runs and table (default: %(default)s)")
    args = p.parse_args(argv)
    for name in ("pool", "n_p", "n_eval", "max_steps", "hidden", "batch_size"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    if len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds lists a seed twice: {args.seeds}")

    from fewshot.config import ImageConfig
    from fewshot.train import train
    from shared_losses.training.stats import paired_stats, summarize, wins_text

    out = Path(args.out)
    truth = make_files(args, out / "data")
    print(f"{out / 'data'}: the positive, unlabeled and evaluation files; the true prior of the unlabeled images "
          f"{truth:.4f}", flush=True)
    sizes = {k: v for k, v in (("hidden", args.hidden), ("batch_size", args.batch_size)) if v is not None}
    if args.max_steps is not None:  # instead of the default passes
        sizes |= {"max_steps": args.max_steps, "passes": None}
    prior, acc = {"est": {}, "given": {}}, {"est": {}, "given": {}}
    for seed in args.seeds:
        for arm, given in (("est", None), ("given", truth)):
            cfg = ImageConfig(positive_file=str(out / "data" / "pos.npz"), unlabeled_file=str(out / "data" / "unl.npz"),
                              eval_file=str(out / "data" / "eval.npz"), seed=seed, prior=given, torch_threads=1,
                              output_dir=str(out / f"{arm}{seed}"), resume=True, progress=False, **sizes)
            m = train(cfg)
            prior[arm][seed], acc[arm][seed] = m["prior"], m["eval_accuracy"]
            print(f"seed {seed}, prior {'estimated' if given is None else 'given'}: {m['prior']:.4f}, nnPU accuracy "
                  f"{m['eval_accuracy']:.2f} ({cfg.output_dir})", flush=True)
    st = paired_stats(acc["given"], acc["est"])
    rows = ["| prior | per seed | nnPU accuracy per seed | mean ± std |", "|---|---|---|---|"]
    for arm, name in (("est", "Elkan-Noto estimate (default)"), ("given", f"given: the true {truth:.4f}")):
        s = summarize(acc[arm])
        std = f" ± {s['std']:.2f}" if s["std"] is not None else ""
        rows.append(f"| {name} | {', '.join(f'{prior[arm][k]:.4f}' for k in args.seeds)} | "
                    f"{', '.join(f'{acc[arm][k]:.2f}' for k in args.seeds)} | {s['mean']:.2f}{std} |")
    ci = f", 95 % t [{st['t_ci'][0]:+.2f}, {st['t_ci'][1]:+.2f}]" if st["t_ci"] else ""
    rows += ["", f"Given - estimated, paired per seed: {', '.join(f'{d:+.2f}' for d in st['diffs'])}; mean "
                 f"{st['mean']:+.2f}{ci} ({wins_text(st)} seeds the given prior ahead)."]
    text = "\n".join(rows) + "\n"
    (out / "table.md").write_text(text)
    print(text, end="")
    return 0


if __name__ == "__main__":
    run_cli(main)
