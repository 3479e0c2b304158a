"""Summary of the development-split runs beside this file: nnPU probe accuracy per method and n_P (mean ± std over
seeds 0-4), each method minus `default` (the default at commit 5436096: half the labels read by puNCE's encoder at
n_P <= 100, pull 1) paired by seed (mean, 95 % t interval, wins), and the mean over n_P <= 100.
`pull01` is puNCE with every label read and a label pull of 0.1. Run: python aggregate.py [folder]."""

import json
import math
import statistics as st
import sys
from pathlib import Path

ROOT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
T95 = {2: 4.303, 3: 3.182, 4: 2.776}  # two-sided 95 % t quantiles by degrees of freedom
SETS = (("shipped", (25, 50, 100, 300, 1000)), ("d8", (25, 50, 100)))


def accuracy(folder: Path):
    f = folder / "metrics.json"
    return json.loads(f.read_text())["probes"]["nnpu"] if f.exists() else None


def paired(a: list, b: list) -> str:
    k = min(len(a), len(b))
    if k < 2:
        return "-"
    d = [x - y for x, y in zip(a[:k], b[:k])]
    mean = st.mean(d)
    half = T95.get(k - 1, 2.0) * st.stdev(d) / math.sqrt(k)
    return f"{mean:+.2f} [{mean - half:+.2f}, {mean + half:+.2f}] {sum(x > 0 for x in d)}/{k}"


for name, nps in SETS:
    print(f"## {name}")
    methods = sorted(p.name for p in (ROOT / name).iterdir() if p.is_dir())
    runs = {}
    for m in methods:
        row = []
        for n in nps:
            got = [accuracy(ROOT / name / m / f"n{n}" / f"seed{k}") for k in range(5)]
            runs.setdefault(m, {})[n] = got = [x for x in got if x is not None]
            row.append(f"{st.mean(got):.2f} ± {st.stdev(got):.2f} ({len(got)})" if len(got) > 1 else "-")
        print(m.ljust(10), " | ".join(row))
    for m in methods:
        if m != "default":
            print(f"{m} - default:", " | ".join(paired(runs[m][n], runs["default"][n]) for n in nps))
    small = [n for n in nps if n <= 100]
    for m in methods:
        means = [st.mean(runs[m][n]) for n in small if runs[m][n]]
        if len(means) == len(small):
            print(f"{m} mean over n_P<=100: {st.mean(means):.2f}")
