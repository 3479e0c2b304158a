"""A run's evaluation curve: its eval.csv read (:func:`read_eval`) and plotted (:func:`plot_curve`, the curve.png
rl_curl.train writes at the end of a run). Tables and curves over many runs are in :mod:`paper_tables.table3`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


def read_eval(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps, mean returns)`` from an eval.csv."""
    with open(path, newline="") as fh:
        rows = [r for r in csv.DictReader(fh) if r.get("eval_return_mean") not in (None, "")]
    return (np.array([float(r["env_step"]) for r in rows]), np.array([float(r["eval_return_mean"]) for r in rows]))


def plot_curve(eval_csv: str | Path, png: str | Path, title: str = "") -> Path:
    """Evaluation return against environment steps, one run (the curve.png a run writes at its end). A figure of its
    own, without pyplot: the caller's plotting backend is left alone, and runs trained together in threads of one
    process (rl_curl.together), which end at the same step, plot at once without sharing pyplot's figures."""
    from matplotlib.figure import Figure

    x, y = read_eval(eval_csv)
    fig = Figure(figsize=(5, 3.5))
    ax = fig.subplots()
    ax.plot(x, y, marker="o")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return Path(png)
