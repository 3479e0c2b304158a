"""Does choosing the puNCE encoder's training length from PU data alone (`--select`) help where labels are scarcest?

puNCE's encoder can learn to tell its few labeled positives from the unlabeled positives, which breaks the nnPU
probe's assumption that the labeled positives look like the rest (docs/results/fewshot.md). `--select pu-auc` /
`pu-risk` hold a share of the labeled positives out of the labels and score the encoder at a few steps by how an
nnPU probe fitted on the rest treats them (no negative label is read); the best step's encoder is kept.

Per n_P and seed, three runs of `python -m fewshot.train images`, same split, sample and initial weights:

* `raw`: the end-to-end nnPU baseline on raw pixels (and PN / uPU);
* `punce`: the paper's puNCE encoder (every labeled positive in its loss, label pull 1) of the last step, then the
  nnPU probe;
* `select`: the same with `--select CRITERION` (default pu-auc).

With `--eval-split dev` (the development split held out of the training pool) each scored step also records the
development accuracy of the final probe on that step's encoder, so the report says how often each criterion
(`pu-risk`, `pu-auc`, the last step) picks the step the development labels would, and what its choice costs in
development accuracy. Choose with `--eval-split dev`; report with the test split.

    python scripts/pu_selection.py --eval-split dev --out runs/pu_selection_dev              # 5k MNIST digits
    python scripts/pu_selection.py --out runs/pu_selection_test                               # the test split
    python scripts/pu_selection.py --dataset digits8x8.npz --positive-classes 0 2 4 6 8 --n-ps 25 50 100

Writes <out>/selection.md and selection.json; a finished run is skipped (an interrupted grid continues).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
from pathlib import Path

from fewshot.config import ImageConfig
from fewshot.grids import refuse_other_finished_run
from shared_losses.training.cli import ArgumentParser, run_cli
from shared_losses.training.runtime import read_json_file, write_json_atomic, write_text_atomic
from shared_losses.training.stats import paired_stats, summarize, wins_text
from shared_losses.training.sweep import (Run, add_sweep_arguments, dataclass_flags, from_caller, grid_lock,
                                          note_running_grid, options_of, run_sweep)

ROOT = Path(__file__).resolve().parents[1]
#: the scores a scored step records and whether lower is better (fewshot.image_run.SELECT_CRITERIA)
CRITERIA = {"pu-risk": ("select_risk", True), "pu-auc": ("select_auc", False)}


def methods(args) -> dict[str, tuple[str, dict]]:
    """{folder name: (the report's row, the run's options)}: raw nnPU, puNCE, each --label-shares, --select."""
    paper = {"contrastive": "punce", "label_share": 1.0, "label_pull": 1.0}  # the paper's puNCE: every label, lambda 1
    out = {"raw": ("raw nnPU", {"contrastive": "none"}), "punce": ("puNCE last step", paper)}
    if args.with_infonce:
        out["infonce"] = ("InfoNCE", {"contrastive": "infonce", "label_share": 1.0})
    for q in args.label_shares:
        out[f"share{q:g}"] = (f"puNCE --label-share {q:g}", {**paper, "label_share": q})
    if args.criterion != "none":
        out["select"] = (f"puNCE --select {args.criterion}", {**paper, "select": args.criterion})
    return out


def run_config(args, method: str, n: int, seed: int) -> ImageConfig:
    positive = args.positive_classes or ([0, 2, 4, 6, 8] if args.dataset == "mnist" else None)
    fields = methods(args)[method][1]
    return ImageConfig(dataset=args.dataset, encoder=args.encoder,
                       positive_classes=tuple(positive) if positive else None, eval_split=args.eval_split,
                       n_labeled=n, seed=seed, resume=True, progress=False,
                       output_dir=str(Path(args.out) / method / f"n{n}" / f"seed{seed}"), **fields)


def choice(cands: list[dict], criterion: str | None) -> dict:
    """The scored step a criterion picks (None: the last step); ties go to the earlier step, as the run's do."""
    if criterion is None:
        return cands[-1]
    key, lower = CRITERIA[criterion]
    best = cands[0]
    for c in cands[1:]:
        if (c[key] < best[key]) if lower else (c[key] > best[key]):
            best = c
    return best


def collect(args) -> dict:
    res = {}
    for n in args.n_ps:
        cell = {row: {} for row, _ in methods(args).values()}
        agree = {}
        for s in args.seeds:
            for method, (row, _) in methods(args).items():
                path = Path(run_config(args, method, n, s).output_dir) / "metrics.json"
                if path.exists():
                    m = read_json_file(path, "run's metrics")
                    cell[row][s] = m["probes"]["nnpu"]
                    if method == "select":
                        cands = m["select_candidates"]
                        if all("dev_accuracy" in c for c in cands):
                            best = max(c["dev_accuracy"] for c in cands)
                            agree[s] = {name: {"step": (c := choice(cands, crit))["step"],
                                               "dev_accuracy": c["dev_accuracy"], "regret": best - c["dev_accuracy"],
                                               "agrees": c["dev_accuracy"] == best}
                                        for name, crit in (("pu-risk", "pu-risk"), ("pu-auc", "pu-auc"),
                                                           ("last step", None))}
                            agree[s]["development labels"] = {"step": max(cands, key=lambda c: c["dev_accuracy"])
                                                              ["step"], "dev_accuracy": best}
        res[n] = {"acc": cell, "selection": agree}
    return res


def markdown(args, res: dict) -> tuple[str, list]:
    split = "development split" if args.eval_split == "dev" else "test split"
    L = [f"# Choosing puNCE's training length from PU data: {args.dataset}, encoder {args.encoder}, {split}", "",
         f"Seeds {args.seeds}. Accuracy (%) of the nnPU probe (raw: the end-to-end nnPU model) on the {split}; "
         f"`--select {args.criterion}` holds 20 % of the labeled positives out of the labels to choose by.", "",
         "| method | " + " | ".join(f"n_P={n}" for n in args.n_ps) + " |", "|---|" + "---|" * len(args.n_ps)]
    rows = [row for row, _ in methods(args).values()]
    for row in rows:
        cells = []
        for n in args.n_ps:
            sm = summarize(res[n]["acc"][row])
            cells.append("—" if sm["mean"] is None else f"{sm['mean']:.2f}"
                         + (f" ± {sm['std']:.2f}" if sm["std"] is not None else "") + f" ({sm['n_runs']})")
        L.append(f"| {row} | " + " | ".join(cells) + " |")
    paired = []
    for n in args.n_ps:
        acc = res[n]["acc"]
        bases = rows[:3] if args.with_infonce else rows[:2]
        for a, b in [(r, rows[0]) for r in bases[1:]] + [(r, base) for r in rows[len(bases):] for base in bases]:
            p = paired_stats(acc[a], acc[b])
            if p["n_seeds"]:
                paired.append({"at": f"n_P={n}", "comparison": f"{a} − {b}", **p})
    L += ["", "## Paired differences (same seed: same split, sample and initial weights)", "",
          "| at | A − B | per-seed | mean | 95 % CI (t) | A wins |", "|---|---|---|---|---|---|"]
    for p in paired:
        ci_text = "—" if p["t_ci"] is None else f"[{p['t_ci'][0]:+.2f}, {p['t_ci'][1]:+.2f}]"
        L.append(f"| {p['at']} | {p['comparison']} | {', '.join(f'{d:+.2f}' for d in p['diffs'])} | "
                 f"{p['mean']:+.2f} | {ci_text} | {wins_text(p)} |")
    if any(res[n]["selection"] for n in args.n_ps):
        L += ["", "## Which step each criterion picks, against the development labels' pick", "",
              "Per scored step the run recorded its development accuracy; `agrees`: the criterion's step is (one of) "
              "the development labels' best; `regret`: the development accuracy it gives up (points).", "",
              "| n_P | criterion | agrees | mean regret | per-seed steps (picked / development labels' best) |",
              "|---|---|---|---|---|"]
        for n in args.n_ps:
            sel = res[n]["selection"]
            for crit in ("pu-risk", "pu-auc", "last step"):
                if not sel:
                    continue
                agrees = sum(v[crit]["agrees"] for v in sel.values())
                regret = statistics.mean(v[crit]["regret"] for v in sel.values())
                steps = ", ".join(f"{v[crit]['step']}/{v['development labels']['step']}" for v in sel.values())
                L.append(f"| {n} | {crit} | {agrees}/{len(sel)} | {regret:.2f} | {steps} |")
    return "\n".join(L) + "\n", paired


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__)  # usage errors: one error: line (status 2), as the other grids
    p.add_argument("--dataset", default="mnist", help="mnist (shipped) or an .npz file with x and y")
    p.add_argument("--positive-classes", type=int, nargs="+", default=None,
                   help="class ids of the positive class (default for mnist: the even digits)")
    p.add_argument("--encoder", choices=("mlp", "cnn"), default="mlp", help="the encoder of every run")
    p.add_argument("--criterion", choices=(*CRITERIA, "none"), default="pu-auc",
                   help="the select runs' --select (none: no select runs)")
    p.add_argument("--with-infonce", action="store_true",
                   help="an InfoNCE encoder run too (puNCE Table 1's linear evaluation), as a row and a baseline")
    p.add_argument("--label-shares", type=float, nargs="*", default=[],
                   help="a puNCE run per share of labels its encoder reads (--label-share), beside the others")
    p.add_argument("--n-ps", type=int, nargs="+", default=[25, 50, 100], help="labeled positives n_P")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds of every (method, n_P)")
    p.add_argument("--eval-split", choices=("eval", "dev"), default="eval",
                   help="dev: score on the development split and record each scored step's development accuracy")
    p.add_argument("--out", default="runs/pu_selection", help="the grid's folder: a run folder per method, n_P and "
                   "seed, and the report")
    p.add_argument("--aggregate-only", action="store_true", help="only make the report from finished runs")
    add_sweep_arguments(p, parallel=2)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    args.out, args.dataset = str(Path(args.out).resolve()), from_caller(args.dataset)
    todo, failed, done = [], 0, 0
    for n in args.n_ps:
        for s in args.seeds:
            for method in methods(args):
                cfg = run_config(args, method, n, s)
                cfg.validate()
                folder = Path(cfg.output_dir)
                if (folder / "metrics.json").exists():
                    refuse_other_finished_run(folder, cfg)  # skipped as finished only if made with these options
                    done += 1
                else:
                    cmd = [sys.executable, "-m", "fewshot.train", "images", *dataclass_flags(cfg, ImageConfig())]
                    todo.append(Run(f"{method} n={n} seed={s}", cmd, folder.parent / f"{folder.name}.log",
                                    cpus=args.cpus_per_run, gpus=args.gpus_per_run, cwd=str(ROOT),
                                    env={"OMP_NUM_THREADS": str(max(1, int(args.cpus_per_run)))}))
    if args.aggregate_only:
        note_running_grid(args.out)
        if not done:  # a mistyped --out is not a report of dashes
            raise ValueError(f"--aggregate-only: no finished runs under {args.out} (expected METHOD/n<k>/seed<s>/"
                             "metrics.json for the --n-ps and --seeds given); check --out")
    # a grid that runs holds --out's lock (a second grid on it is refused at once) until its report is written
    with contextlib.nullcontext() if args.aggregate_only else grid_lock(args.out):
        if not args.aggregate_only:
            print(f"{len(todo)} runs to do ({done} finished earlier, skipped)", flush=True)
        if todo and not args.aggregate_only:
            codes = run_sweep(todo, options_of(args))
            failed = sum(rc != 0 for rc in codes)
            if failed:
                print(f"{failed} of {len(todo)} runs failed (see the .log beside each run folder)", file=sys.stderr)
        res = collect(args)
        text, paired = markdown(args, res)
        missing = [run.name for run in todo if not (Path(str(run.log)[: -len(".log")]) / "metrics.json").exists()]
        if missing:  # a cell's (n) says how many seeds it holds; which runs it lacks is said here
            text += (f"\nNot in the report: {len(missing)} of the {len(todo) + done} runs have no metrics.json "
                     f"(not finished): {', '.join(missing)}.\n")
        print(text)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "selection.md", text)  # whole or not at all, as selection.json
        write_json_atomic(out / "selection.json", {"args": {k: v for k, v in vars(args).items()}, "paired": paired,
                                                   "results": {str(n): v for n, v in res.items()},
                                                   "missing": missing})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
