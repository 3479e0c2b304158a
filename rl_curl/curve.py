"""A run's evaluation curve: its eval.csv read (:func:`read_eval`) and plotted (:func:`plot_curve`, the curve.png
rl_curl.train writes at the end of a run). Tables and curves over many runs are in :mod:`paper_tables.table3`."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np


def read_eval(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """``(env_steps, mean returns)`` from an eval.csv. A row with fields missing or too many, or a step or mean
    that is not a number (a line cut by a crash, an edit), is a ValueError naming the file and the line: a cut
    last row would otherwise be read as a shorter number."""
    steps, means = [], []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        try:
            rows = [(reader.line_num, row) for row in reader]
        except (UnicodeDecodeError, csv.Error) as err:
            why = f"not UTF-8 text: {err.reason}" if isinstance(err, UnicodeDecodeError) else f"not CSV: {err}"
            raise ValueError(f"{path} is damaged ({why}); it should be the run's evaluations") from None
        header = reader.fieldnames or []
    if rows and not {"env_step", "eval_return_mean"} <= set(header):
        raise ValueError(f"{path} is damaged (its header {','.join(header)} lacks env_step or eval_return_mean); it "
                         "should be the run's evaluations")
    for line, row in rows:
        fields = sum(v is not None for k, v in row.items() if k is not None) + len(row.get(None) or [])
        if fields == len(header) and row.get("eval_return_mean") in (None, ""):
            continue  # a row without an evaluation mean (none is written, but tolerated as before)
        where = f"{path}, line {line}"
        if fields != len(header):
            raise ValueError(f"{where} is damaged ({fields} fields where the header {','.join(header)} has "
                             f"{len(header)}: cut or edited); it should be one evaluation of the run")
        try:
            steps.append(float(row["env_step"]))
            means.append(float(row["eval_return_mean"]))
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"{where} is damaged (env_step {row.get('env_step')!r}, eval_return_mean "
                             f"{row.get('eval_return_mean')!r}: not numbers); it should be one evaluation of the "
                             "run") from None
    return np.array(steps), np.array(means)


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
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return Path(png)
