"""Summary of the development-split runs beside this file: nnPU probe accuracy per method and n_P (mean ± std over
seeds 0-4), each method minus `default` (the default at commit 5436096: half the labels read by puNCE's encoder at
n_P <= 100, pull 1) paired by seed (mean, 95 % t interval, wins), and the mean over n_P <= 100.
`pull01` is puNCE with every label read and a label pull of 0.1. Run: python aggregate.py [folder]."""

import json
import statistics as st
import sys
from pathlib import Path

from shared_losses.training.stats import paired_stats, wins_text  # the suite's: pairs by seed, scipy's t

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
SETS = (("shipped", (25, 50, 100, 300, 1000)), ("d8", (25, 50, 100)))


def accuracy(folder: Path):
    f = folder / "metrics.json"
    return json.loads(f.read_text())["probes"]["nnpu"] if f.exists() else None


def paired(a: dict, b: dict) -> str:
    """a - b over the seeds both have ({seed: accuracy}): mean [95 % t interval] wins/seeds (and ties). Until
    2026-12-06 this zipped two lists of the runs found, so a missing seed would have paired the wrong seeds, and
    its t table fell back to 2.0 outside 2-4 degrees of freedom and rounded the quantiles to 3 decimals; the
    committed data has every seed: summary.md changed in one interval end (+6.70 to +6.71) and in the ties named."""
    p = paired_stats(a, b)
    if p["t_ci"] is None:
        return "-"
    lo, hi = p["t_ci"]
    return f"{p['mean']:+.2f} [{lo:+.2f}, {hi:+.2f}] {wins_text(p)}"


for name, nps in SETS:
    print(f"## {name}")
    methods = sorted(p.name for p in (ROOT / name).iterdir() if p.is_dir())
    runs = {}
    for m in methods:
        row = []
        for n in nps:
            by_seed = {k: accuracy(ROOT / name / m / f"n{n}" / f"seed{k}") for k in range(5)}
            runs.setdefault(m, {})[n] = {k: x for k, x in by_seed.items() if x is not None}
            got = list(runs[m][n].values())
            row.append(f"{st.mean(got):.2f} ± {st.stdev(got):.2f} ({len(got)})" if len(got) > 1 else "-")
        print(m.ljust(10), " | ".join(row))
    for m in methods:
        if m != "default":
            print(f"{m} - default:", " | ".join(paired(runs[m][n], runs["default"][n]) for n in nps))
    small = [n for n in nps if n <= 100]
    for m in methods:
        means = [st.mean(runs[m][n].values()) for n in small if runs[m][n]]
        if len(means) == len(small):
            print(f"{m} mean over n_P<=100: {st.mean(means):.2f}")
