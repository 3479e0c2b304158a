"""DCL Table 3 from GPU slices: the run folders that short GPU "slices" bring back, read and tabulated.

A slice runs a few rl_curl training runs at once under a hard deadline and brings back one folder per run;
the folders accumulate in one results folder (``docs/data/table3_gpu/``) over many sessions. This module
reads whatever seeds are there and writes the table (``python scripts/table3_gpu.py tabulate ROOT``):

* :func:`read_runs`: every run folder (a subfolder of the results folder holding ``slice.json``);
* :func:`tabulate`: the Markdown (per task: the cells beside the papers' numbers, every seed, the paired
  differences against CURL and the list of folders); :func:`plot`: the learning curves;
  :func:`write_report`: both, into the results folder (refusing a folder of no imported slice, and a table or
  curves it did not write: :func:`check_results_folder`);
* :func:`import_pack`: a slice's tarball of run folders moved into the results folder, checked first.

A run folder holds ``slice.json`` (the slice driver's record of the run: task, objective in the grid's
spelling, seed, the target and reached environment steps, finished, GPU, commit, date, wall time ...),
rl_curl's ``config.json`` and ``eval.csv`` (and ``log.csv``, ``summary.json``). The folder's name is not
parsed: everything is read from the files. A run counts (is *finished*) when slice.json says it finished
and eval.csv has its evaluation at the target step; any other run counts nowhere in the statistics and is
shown with the steps it reached and its last evaluation. A seed run twice is never averaged: the earliest
finished folder (by date, then folder name) is used and the others are listed as not used.
"""

from __future__ import annotations

import datetime as dt
import filecmp
import math
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zlib
from pathlib import Path, PurePosixPath

import numpy as np

from shared_losses.training.runtime import read_json_file

from rl_curl import objectives
from rl_curl.curve import read_eval

from . import table3

#: What the table is about: DCL Table 3's score is the evaluation at 100k environment steps ...
TARGET_STEP = 100_000
#: ... and the target of these slices is 5 finished seeds per cell (DCL's table had 3 runs).
TARGET_SEEDS = 5
#: The row every other objective is compared with, seed by seed.
ANCHOR = "biased (CURL)"
#: Where the table and the curves go inside the results folder (write_report).
TABLE_FILE, CURVES_FILE = "table3_gpu.md", "curves.png"
#: The first line of every table3_gpu.md :func:`tabulate` writes, and the ``Software`` text of every PNG :func:`plot`
#: writes: :func:`write_report` replaces no file of those names that lacks them.
TABLE_HEADING, PNG_SOFTWARE = "# DCL Table 3 on GPU slices", "paper_tables.table3_slices"
#: slice.json keys the table needs; the driver writes more (exit_code, wall_seconds, gpu ...), read if present.
SLICE_KEYS = ("task", "objective", "seed", "env_steps_target", "env_steps_reached", "finished", "date", "commit")

DCL_SOURCE = "DCL Table 3"
CURL_SOURCE = "CURL paper (100k)"

# DCL Table 3 (SPEC.md section 6): score at 100k environment steps, mean ± std over 3 runs; rows by their grid
# spelling, columns in the paper's task order (paper_tables.table3.TABLE3_TASKS).
_DCL_ROWS = {
    "curl": (310, 33, 850, 20, 918, 96, 266, 41, 623, 120, 928, 47),
    "debiased:0.01:1": (324, 34, 843, 30, 927, 99, 310, 12, 626, 82, 937, 9),
    "debiased:0.05:1": (308, 57, 866, 7, 916, 114, 284, 20, 613, 22, 945, 13),
    "debiased:0.1:1": (364, 36, 860, 4, 868, 177, 302, 29, 594, 33, 951, 11),
    "debiased:0.01:2": (330, 10, 858, 10, 754, 179, 286, 20, 746, 93, 949, 5),
    "debiased:0.1:2": (381, 24, 864, 6, 904, 117, 303, 5, 671, 75, 957, 5),
}


def spec_config(spec: str, **cfg) -> dict:
    """The config fields that :func:`rl_curl.objectives.label` and ``order`` read, of a grid spelling
    (``debiased:0.05:1``): the parsed values over the neutral ones, then ``cfg``."""
    return {"aux": "curl", **objectives.NEUTRAL, **objectives.parse_spec(spec), **cfg}


def _paper() -> tuple[dict, dict]:
    paper: dict[str, dict[str, list[dict]]] = {}
    order: dict[str, tuple] = {}
    for spec, row in _DCL_ROWS.items():
        cfg = spec_config(spec)
        label = objectives.label(cfg)
        order[label] = objectives.order(cfg)
        for i, task in enumerate(table3.TABLE3_TASKS):
            paper.setdefault(task, {})[label] = [{"source": DCL_SOURCE, "mean": float(row[2 * i]),
                                                   "std": float(row[2 * i + 1])}]
    # CURL paper (Srinivas, Laskin & Abbeel 2020), its 100k-step table as quoted in the project's issue: only the
    # cartpole-swingup number is carried here.
    paper["cartpole-swingup"][objectives.label(spec_config("curl"))].append(
        {"source": CURL_SOURCE, "mean": 582.0, "std": 146.0})
    return paper, order


#: The papers' numbers beside ours: ``{task: {row label: [{"source", "mean", "std"}, ...]}}``, the row label as
#: :func:`rl_curl.objectives.label` writes it ("biased (CURL)", "debiased τ⁺=0.05, M=1" ...). DCL Table 3 for
#: every task and row; the CURL paper's 100k number for cartpole-swingup's biased (CURL) only.
PAPER, PAPER_ORDER = _paper()


def paper_number(task: str, label: str, source: str) -> dict | None:
    """``{"source", "mean", "std"}`` of ``source`` for that cell, or None."""
    return next((p for p in PAPER.get(task, {}).get(label, []) if p["source"] == source), None)


# ---------------------------------------------------------------------------------------------- reading


def _check_config(path: Path, cfg: dict, info: dict, spec: dict) -> None:
    """config.json must be the run slice.json describes (a folder put together by hand or mixed up is refused)."""
    if not isinstance(cfg, dict) or "aux" not in cfg:
        raise ValueError(f"{path} is not an rl_curl config (no aux)")
    for key in ("task", "seed"):
        if key in cfg and cfg[key] != info[key]:
            raise ValueError(f"{path} says {key}={cfg[key]!r} but slice.json says {info[key]!r}")
    for key, value in spec.items():
        have = cfg.get(key, objectives.NEUTRAL.get(key))
        same = have == value if isinstance(value, str) else (have is not None and math.isclose(have, value))
        if not same:
            raise ValueError(f"{path} says {key}={have!r} but slice.json's objective is {info['objective']!r}")


def read_run(folder: str | Path) -> dict:
    """One run folder (holding slice.json): a dict with

    * ``dir``, ``name``: the folder; ``slice``: slice.json as written; ``cfg``: config.json (or, without it, the
      fields of slice.json's objective, task and seed) with its action repeat resolved;
    * ``task``, ``objective`` (the grid spelling), ``label`` and ``order`` (its row and the row's place,
      :mod:`rl_curl.objectives`), ``seed``, ``target`` (env_steps_target), ``reached`` (env_steps_reached),
      ``date``, ``commit``;
    * ``steps``, ``returns``: eval.csv (empty arrays without it: the run never evaluated);
      ``last_eval``: ``(env_step, return)`` of its last evaluation or None;
    * ``finished``: slice.json says finished and eval.csv has the evaluation at the target (as
      :func:`paper_tables.table3.score_at` finds it: the step counted in whole agent steps); ``score``: that
      evaluation's mean return, None unless finished; ``note``: why a run that says finished is not, or "".

    A damaged or incomplete slice.json, config.json or eval.csv is a ValueError naming the file."""
    folder = Path(folder)
    slice_path = folder / "slice.json"
    info = read_json_file(slice_path, "slice driver's record of the run")
    if not isinstance(info, dict):
        raise ValueError(f"{slice_path} is not a JSON object")
    missing = [k for k in SLICE_KEYS if k not in info]
    if missing:
        raise ValueError(f"{slice_path} lacks {', '.join(missing)}")
    try:
        spec = objectives.parse_spec(str(info["objective"]))
    except ValueError as err:
        raise ValueError(f"{slice_path}: {err}") from None
    for key in ("seed", "env_steps_target", "env_steps_reached"):
        if not isinstance(info[key], int) or isinstance(info[key], bool):
            raise ValueError(f"{slice_path}: {key} = {info[key]!r} is not an integer")
    if not isinstance(info["finished"], bool):
        raise ValueError(f"{slice_path}: finished = {info['finished']!r} is not true or false")
    cfg_path = folder / "config.json"
    if cfg_path.exists():
        cfg = read_json_file(cfg_path, "rl_curl config of the run")
        _check_config(cfg_path, cfg, info, spec)
        cfg = {**cfg, "task": info["task"], "seed": info["seed"]}
    else:
        cfg = spec_config(info["objective"], task=info["task"], seed=info["seed"])
    if not cfg.get("action_repeat"):
        from rl_curl.config import task_default

        cfg["action_repeat"] = int(task_default(info["task"], "action_repeat"))
    eval_path = folder / "eval.csv"
    steps, returns = read_eval(eval_path) if eval_path.exists() else (np.zeros(0), np.zeros(0))
    run = {"dir": folder, "name": folder.name, "slice": info, "cfg": cfg, "task": info["task"],
           "objective": info["objective"], "label": objectives.label(cfg), "order": objectives.order(cfg),
           "seed": info["seed"], "target": info["env_steps_target"], "reached": info["env_steps_reached"],
           "date": str(info["date"]), "commit": str(info["commit"]), "steps": steps, "returns": returns,
           "last_eval": (int(steps[-1]), float(returns[-1])) if len(steps) else None}
    at_target = table3.score_at(run, run["target"])
    run["finished"] = info["finished"] and at_target is not None
    run["score"] = at_target if run["finished"] else None
    run["note"] = ""
    if info["finished"] and at_target is None:
        run["note"] = f"slice.json says finished but eval.csv has no evaluation at {run['target']:,}"
    return run


def read_runs(root: str | Path) -> list[dict]:
    """Every run under ``root``: its subfolders holding slice.json (:func:`read_run`), sorted by folder name.
    Other subfolders and files (the table, the curves) are left alone. A root with no run folders gives []."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results folder {root} does not exist (or is not a folder)")
    return [read_run(d) for d in sorted(root.iterdir()) if d.is_dir() and (d / "slice.json").is_file()]


def assign(runs: list[dict], env_step: int = TARGET_STEP) -> list[dict]:
    """Mark which runs the statistics use (``run["used"]``) and why not (``run["not_used"]``, "" if used or
    simply unfinished): a finished run whose target is ``env_step``, unless an earlier finished folder (by date,
    then folder name) has the same task, row and seed: that seed was run twice, the earliest counts."""
    first: dict[tuple, dict] = {}
    for r in sorted(runs, key=lambda r: (r["date"], r["name"])):
        r["used"], r["not_used"] = False, ""
        if r["target"] != env_step:
            r["not_used"] = f"not used: target {r['target']:,}, the table is at {env_step:,}"
        elif r["finished"]:
            key = (r["task"], r["label"], r["seed"])
            if key in first:
                r["not_used"] = f"not used: duplicate of seed {r['seed']} ({first[key]['name']} is used)"
            else:
                first[key], r["used"] = r, True
    return runs


# ---------------------------------------------------------------------------------------------- the table


def _num(x: float) -> str:
    return f"{x:g}" if float(x).is_integer() else f"{x:.2f}"


def _paper_text(task: str, label: str, source: str) -> str:
    p = paper_number(task, label, source)
    return f"{_num(p['mean'])} ± {_num(p['std'])}" if p else "–"


def _mean_std(values: list[float]) -> str:
    if not values:
        return "–"
    sd = f"{np.std(values, ddof=1):.2f}" if len(values) > 1 else "–"
    return f"{np.mean(values):.2f} ± {sd}"


def _interval(ci: list[float] | None) -> str:
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "–"


def _unfinished_text(r: dict) -> str:
    last = (f"last eval {r['last_eval'][1]:.2f} at {r['last_eval'][0]:,}" if r["last_eval"] else "no evaluation")
    return f"unfinished (reached {r['reached']:,}; {last})"


def _number(info: dict, key: str, scale: float = 1.0) -> str:
    """slice.json's ``key`` (times ``scale``) for the runs list: integers as they are, others to 0.1; "–" if absent."""
    x = info.get(key)
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return "–"
    return str(x) if isinstance(x, int) and scale == 1 else f"{x * scale:.1f}"


def _rows(task: str, runs: list[dict]) -> list[str]:
    """The task's rows in DCL Table 3's order: those with runs, and (for DCL's tasks) the paper's rows."""
    order = {**{lab: PAPER_ORDER[lab] for lab in PAPER.get(task, {})}, **{r["label"]: r["order"] for r in runs}}
    return sorted(order, key=order.__getitem__)


def _cell_state(runs: list[dict], label: str, seed: int) -> str:
    """"missing", "finished" or "unfinished (reached N)" of one (row, seed), for the unpaired-seeds line."""
    mine = [r for r in runs if r["label"] == label and r["seed"] == seed]
    if any(r["used"] for r in mine):
        return "finished"
    if not mine:
        return "missing"
    return "unfinished (reached " + " / ".join(f"{r['reached']:,}" for r in mine) + ")"


#: Fields a resumed run may change (rl_curl's RESUME_FREE) that still shape a run's score in the table: the number of
#: episodes its evaluations average. Runs differing there are not the same cell's runs.
SCORE_FIELDS = frozenset({"eval_episodes"})


def settings_free() -> set[str]:
    """The configuration fields in which runs of one cell may differ: how a run ran (rl_curl's RESUME_FREE: CUDA
    graphs, threads, workers, logging ...) but not :data:`SCORE_FIELDS`, and the seed."""
    from rl_curl.config import Config

    return (set(Config.RESUME_FREE) - SCORE_FIELDS) | {"seed"}


def settings_changes(a: dict, b: dict) -> list[tuple[str, object, object]]:
    """How two runs' configurations differ as runs of one cell: ``(field, a's value, b's value)`` for the fields both
    have (one that a run's older code lacked is not a difference; runs of different commits share a table), those of
    :func:`settings_free` aside."""
    from shared_losses.training.runtime import config_changes

    both = set(a) & set(b)
    return config_changes({k: a[k] for k in both}, {k: b[k] for k in both}, free=settings_free())


def _mixed_settings(runs: list[dict]) -> list[str]:
    """The used runs of a row whose configuration differs from the row's first used run's (by seed),
    :func:`settings_changes`: runs of one cell made with another learning rate, say, which the row's mean would
    otherwise average without a word."""
    out = []
    for lab in dict.fromkeys(r["label"] for r in runs):
        used = sorted((r for r in runs if r["used"] and r["label"] == lab), key=lambda r: r["seed"])
        for r in used[1:]:
            changes = settings_changes(used[0]["cfg"], r["cfg"])
            if changes:
                out.append(f"{lab} seed {r['seed']} against seed {used[0]['seed']}: "
                           + ", ".join(f"{k} {new!r} against {old!r}" for k, old, new in changes))
    return out


def _task_section(task: str, runs: list[dict], all_runs: list[dict], env_step: int) -> tuple[list[str], dict]:
    from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats

    rows = _rows(task, runs)
    cells = {lab: {r["seed"]: r["score"] for r in runs if r["used"] and r["label"] == lab} for lab in rows}
    with_runs = [lab for lab in rows if any(r["label"] == lab for r in runs)]
    seeds = sorted({r["seed"] for r in runs})
    out = [f"## {task}", "",
           f"Score at {env_step:,} environment steps. n: finished seeds (target {TARGET_SEEDS}); ours: mean ± sample "
           f"std over them; {DCL_SOURCE}: mean ± std over 3 runs as published; {CURL_SOURCE}: CURL's own table.", "",
           f"| objective | n | ours (mean ± std) | {DCL_SOURCE} | {CURL_SOURCE} |", "|---|---|---|---|---|"]
    for lab in rows:
        v = [cells[lab][s] for s in sorted(cells[lab])]
        out.append(f"| {lab} | {len(v)} | {_mean_std(v)} | {_paper_text(task, lab, DCL_SOURCE)} | "
                   f"{_paper_text(task, lab, CURL_SOURCE)} |")
    short = [f"{lab} ({len(cells[lab])})" for lab in with_runs if len(cells[lab]) < TARGET_SEEDS]
    if short:
        out += ["", f"**Under {TARGET_SEEDS} finished seeds, of the rows with runs** (the others have none): "
                + ", ".join(short) + "."]
    mixed = _mixed_settings(runs)
    if mixed:
        out += ["", "**Settings differ within a row** (each seed's run against the row's first, fields both configs "
                "have; how a run ran aside, the evaluation's episodes not): " + "; ".join(mixed) + "."]

    out += ["", f"### Per seed: score at {env_step:,}", ""]
    if seeds:
        out += ["| objective | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
        for lab in with_runs:
            texts = []
            for s in seeds:
                if s in cells[lab]:
                    texts.append(f"{cells[lab][s]:.2f}")
                    continue
                unfinished = [r for r in runs if r["label"] == lab and r["seed"] == s and not r["finished"]]
                texts.append("; ".join(map(_unfinished_text, unfinished)) if unfinished else "missing")
            out.append(f"| {lab} | " + " | ".join(texts) + " |")
    else:
        out.append(f"No run of this task has the target {env_step:,}.")

    out += ["", f"### Paired differences against {ANCHOR} (objective − {ANCHOR}, same seed)", ""]
    others = [lab for lab in with_runs if lab != ANCHOR]
    if ANCHOR not in with_runs:
        out.append(f"No {ANCHOR} run of this task: nothing to pair with.")
    elif not others:
        out.append(f"No other objective than {ANCHOR} has a run of this task.")
    else:
        out += ["Std: sample std of the differences; intervals: 95 % paired t and paired bootstrap "
                "(shared_losses.training.stats.paired_stats: 10,000 resamples, percentile, too narrow with few "
                "seeds).", "",
                f"| objective | pairs | seeds | differences | mean ± std | 95 % t interval | {BOOTSTRAP_COLUMN} | "
                "wins/losses |", "|---|---|---|---|---|---|---|---|"]
        unpaired = []
        for lab in others:
            st = paired_stats(cells[lab], cells[ANCHOR])
            mean = "–" if st["mean"] is None else f"{st['mean']:+.2f} ± " + (
                "–" if st["std"] is None else f"{st['std']:.2f}")
            out.append(f"| {lab} | {st['n_seeds']} | {' '.join(map(str, st['seeds'])) or '–'} | "
                       + (", ".join(f"{d:+.2f}" for d in st["diffs"]) or "–")
                       + f" | {mean} | {_interval(st['t_ci'])} | {_interval(st['bootstrap_ci'])} | "
                       f"{st['wins']}/{st['losses']} |")
            for s in seeds:
                if s not in st["seeds"]:
                    why = [f"{x} {state}" for x in (lab, ANCHOR)
                           if (state := _cell_state(runs, x, s)) != "finished"]
                    unpaired.append(f"{lab} seed {s} ({'; '.join(why)})")
        out += ["", "Not paired: " + ("; ".join(unpaired) if unpaired else "none (every seed finished in both).")]

    out += ["", "### Runs", "",
            "GPU GiB: the most GPU memory the run's process kept (PyTorch's reserved memory; runs trained together "
            "share one process, so each of them shows the process's), from a finished run's summary.json.", "",
            "| folder | objective | seed | status | GPU | commit | date | wall min | env steps/s | runs together | "
            "GPU GiB | note |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted((r for r in all_runs if r["task"] == task),
                    key=lambda r: (r["order"], r["seed"], r["date"], r["name"])):
        info = r["slice"]
        status = "finished" if r["finished"] else f"reached {r['reached']:,}"
        by = info.get("trained_together_by")
        together = (f"trained together in one process with {by.count('--run') - 1} other run(s)"
                    if isinstance(by, list) and by.count("--run") > 1 else "")
        note = "; ".join(x for x in (r["not_used"], r["note"], together,
                                     f"exit code {info['exit_code']}" if info.get("exit_code") not in (0, None) else "")
                         if x) or ""
        out.append(f"| {r['name']} | {r['objective']} | {r['seed']} | {status} | {info.get('gpu', '–')} | "
                   f"{r['commit'][:7]} | {r['date']} | {_number(info, 'wall_seconds', 1 / 60)} | "
                   f"{_number(info, 'env_steps_per_second')} | {_number(info, 'runs_together')} | "
                   f"{_number(info, 'gpu_peak_reserved_gib')} | {note} |")
    return out, {lab: len(cells[lab]) for lab in rows}


def tabulate(root: str | Path, env_step: int = TARGET_STEP) -> str:
    """The Markdown report of the run folders under ``root`` (see the module's docstring): a header with the
    finished seeds of every cell, then per task (DCL Table 3's order, then others by name) the cells beside
    the papers' numbers, every seed, the paired differences against biased (CURL) and the folders.
    Runs whose target is not ``env_step`` are only listed."""
    runs = assign(read_runs(root), env_step)
    on_target = [r for r in runs if r["target"] == env_step]
    repo = Path(__file__).resolve().parents[1]
    if Path(root).resolve().is_relative_to(repo):  # the repository's results folder, named as from its root
        root = Path(root).resolve().relative_to(repo)
    head = [f"{TABLE_HEADING}: score at {env_step:,} environment steps", "",
            f"Generated by `python scripts/table3_gpu.py tabulate {root}` from the run folders in that folder; "
            "rewritten on every run, do not edit. A run counts when it finished: slice.json says so and eval.csv "
            f"has its evaluation at {env_step:,} (mean return of the evaluation episodes). Target: "
            f"{TARGET_SEEDS} finished seeds per cell."]
    if not runs:
        return "\n".join(head + ["", f"No runs yet: no run folder (a subfolder holding slice.json) in {root}."]) + "\n"
    tasks = table3.table3_tasks(runs)
    sections, counts = [], {}
    for task in tasks:
        lines, counts[task] = _task_section(task, [r for r in on_target if r["task"] == task], runs, env_step)
        sections.append("\n".join(lines))
    order = {lab: o for t in tasks for lab, o in ({**{lab: PAPER_ORDER[lab] for lab in PAPER.get(t, {})},
                                                   **{r["label"]: r["order"] for r in runs if r["task"] == t}}).items()}
    labels = sorted(order, key=order.__getitem__)
    cells = [(t, lab) for t in tasks for lab in labels if lab in counts[t]]
    under = sum(counts[t][lab] < TARGET_SEEDS for t, lab in cells)
    head += ["", "Finished seeds per cell:", "",
             "| objective | " + " | ".join(tasks) + " |", "|---" * (len(tasks) + 1) + "|"]
    for lab in labels:
        head.append(f"| {lab} | " + " | ".join(
            "" if lab not in counts[t] else str(counts[t][lab]) + (" (under 5)" if counts[t][lab] < TARGET_SEEDS
                                                                    else "") for t in tasks) + " |")
    head += ["", (f"**{under} of {len(cells)} cells have fewer than {TARGET_SEEDS} finished seeds**: their mean ± std "
                  "is not yet the comparison this table is for." if under
                  else f"Every cell has {TARGET_SEEDS} or more finished seeds.")]
    return "\n\n".join(["\n".join(head)] + sections) + "\n"


# ---------------------------------------------------------------------------------------------- the curves


def plot(root: str | Path, png: str | Path, env_step: int = TARGET_STEP) -> Path:
    """Learning curves, one subplot per task: per objective, the mean over its finished seeds (those the
    table uses) with a ±std band (sample std, where two or more seeds have the evaluation), a thin line per
    seed (dashed: unfinished), and DCL Table 3's number (★, with its std) and the CURL paper's (×) at the
    target step. Duplicates that are not used and runs of another target are left out. With no run: an
    empty figure saying so."""
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is left alone

    runs = [r for r in assign(read_runs(root), env_step)
            if r["target"] == env_step and (r["used"] or not r["finished"])]
    tasks = table3.table3_tasks(runs)
    cols = min(3, max(1, len(tasks)))
    nrows = max(1, -(-len(tasks) // cols))
    fig = Figure(figsize=(5 * cols, 3.8 * nrows))
    axes = fig.subplots(nrows, cols, squeeze=False)
    labels = sorted({r["label"]: r["order"] for r in runs}.items(), key=lambda kv: kv[1])
    tab10 = matplotlib.colormaps["tab10"]
    colors = {lab: tab10(i % 10) for i, (lab, _) in enumerate(labels)}
    for ax in axes.flat[len(tasks):]:
        ax.axis("off")
    if not tasks:
        axes[0, 0].text(0.5, 0.5, f"no runs yet in\n{root}", ha="center", va="center", transform=axes[0, 0].transAxes)
    for ax, task in zip(axes.flat, tasks):
        mine = [r for r in runs if r["task"] == task]
        for lab, _ in labels:
            rs = [r for r in mine if r["label"] == lab]
            if not rs:
                continue
            color = colors[lab]
            for r in rs:
                if len(r["steps"]):
                    ax.plot(r["steps"], r["returns"], color=color, lw=0.7, alpha=0.45,
                            ls="-" if r["finished"] else "--")
            done = [r for r in rs if r["used"]]
            if done:
                x, m, sd, _ = table3.mean_curve(done, ddof=1)
                ax.plot(x, m, color=color, lw=2, label=f"{lab} ({len(done)} finished)")
                ax.fill_between(x, m - sd, m + sd, color=color, alpha=0.15)
            else:
                ax.plot([], [], color=color, ls="--", label=f"{lab} (0 finished)")
            for source, marker in ((DCL_SOURCE, "*"), (CURL_SOURCE, "x")):
                p = paper_number(task, lab, source)
                if p:
                    ax.errorbar([env_step], [p["mean"]], yerr=[p["std"]], color=color, marker=marker, ms=10,
                                capsize=3, lw=1)
        if any(r["used"] for r in mine):
            ax.fill_between([], [], [], color="gray", alpha=0.15, label="band: ± sample std over finished seeds")
        ax.plot([], [], "k*", label=f"{DCL_SOURCE} (± std)")
        if any(paper_number(task, lab, CURL_SOURCE) for lab, _ in labels):
            ax.plot([], [], "kx", label=CURL_SOURCE)
        if not all(r["finished"] for r in mine):
            ax.plot([], [], color="gray", lw=0.7, ls="--", label="unfinished seed")
        ax.set_title(task)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("evaluation return")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    mark = {"Software": f"{PNG_SOFTWARE} (scripts/table3_gpu.py tabulate)"}  # check_report_files reads it
    fig.savefig(png, dpi=100, metadata=mark if str(png).lower().endswith(".png") else None)
    return Path(png)


def _png_software(png: Path) -> str:
    """The ``Software`` text of a PNG ("" for none, or for a file that is not a readable PNG)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(png) as image:
            return str(getattr(image, "text", {}).get("Software", ""))
    except (OSError, UnidentifiedImageError, ValueError, SyntaxError):
        return ""


def check_report_files(root: str | Path) -> None:
    """A ValueError (one line) if ``root`` holds a ``table3_gpu.md`` or ``curves.png`` that :func:`write_report` did
    not write, which it would otherwise replace: a table without this module's heading, a PNG without its mark
    (:data:`PNG_SOFTWARE`; one written before the mark existed is taken as this module's when the table beside it
    is)."""
    root = Path(root)
    md, png = root / TABLE_FILE, root / CURVES_FILE
    ours_md = False
    if os.path.lexists(md):
        try:
            with open(md, encoding="utf-8") as f:
                ours_md = md.is_file() and not md.is_symlink() and f.readline().startswith(TABLE_HEADING)
        except (OSError, UnicodeDecodeError):
            pass
        if not ours_md:
            raise ValueError(f"{md} was not written by `scripts/table3_gpu.py tabulate` (it does not start with "
                             f"{TABLE_HEADING!r}): not replaced; nothing written (move it away to tabulate {root})")
    if os.path.lexists(png) and not (
            not png.is_symlink() and png.is_file()
            and (_png_software(png).startswith(PNG_SOFTWARE) or ours_md)):
        raise ValueError(f"{png} was not written by `scripts/table3_gpu.py tabulate`: not replaced; nothing written "
                         f"(move it away to tabulate {root})")


def check_results_folder(root: str | Path) -> None:
    """A ValueError (one line) unless ``root`` is a results folder that ``scripts/table3_gpu.py import`` filled: one
    holding a run folder (a subfolder with slice.json) or the packs' records (``slices/``), whose report files are
    this module's (:func:`check_report_files`). A scripts/curl_table3.py grid (its runs under TASK/OBJECTIVE/seedS,
    its own table3.md and curves.png) is refused here, before anything in it is replaced."""
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results folder {root} does not exist (or is not a folder)")
    runs = any(d.is_dir() and (d / "slice.json").is_file() for d in root.iterdir())
    if not runs and not (root / "slices").is_dir():
        grid = ("; it looks like a scripts/curl_table3.py grid, whose table and curves are `scripts/curl_table3.py "
                f"--out {root} --aggregate-only`" if (root / "table3.md").exists() else "")
        raise ValueError(f"{root} holds no imported GPU slice (no run folder with slice.json, no slices/): tabulate "
                         "expects a results folder that `scripts/table3_gpu.py import` fills, such as "
                         f"docs/data/table3_gpu{grid}; nothing written")
    check_report_files(root)


def write_report(root: str | Path, env_step: int = TARGET_STEP) -> tuple[Path, Path]:
    """Write ``root/table3_gpu.md`` (:func:`tabulate`) and ``root/curves.png`` (:func:`plot`); both paths. ``root``
    must be a results folder of imported slices whose report files are this module's (:func:`check_results_folder`:
    a ValueError, nothing written, otherwise)."""
    root = Path(root)
    check_results_folder(root)
    md = root / TABLE_FILE
    text = tabulate(root, env_step)
    md.write_text(text, encoding="utf-8")
    return md, plot(root, root / CURVES_FILE, env_step)


# ---------------------------------------------------------------------------------------------- importing

#: Names a run folder may not have: the report's own files and the records' folder live beside the run folders.
RESERVED_NAMES = frozenset({TABLE_FILE, CURVES_FILE, "slices", "README.md"})
#: The pack's record files (besides the runs' archive) that an import keeps under ``slices/``, in this order.
RECORD_FILES = ("throughput.json", "slice.txt", "update_bench.json", "selftest.txt", "profile.txt", "dmon.txt",
                "README.md")
RUNS_ARCHIVE = "table3_runs.tar.gz"
#: A name part that may go into a file name: letters, digits, '.', '_' and '-', not starting with '.'.
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _check_members(tar_path: Path, members: list[tarfile.TarInfo]) -> list[str]:
    """The top-level folders of the archive; a ValueError naming the first member that is not a regular file or
    folder inside one (links, devices, absolute paths, ``..``, files at the top), a member that comes twice (its
    second copy would silently replace the first), or a run folder whose name is not a plain name or is one of the
    results folder's own files (:data:`RESERVED_NAMES`)."""
    tops: list[str] = []
    seen: set[tuple[str, ...]] = set()
    for m in members:
        parts = tuple(p for p in PurePosixPath(m.name).parts if p != ".")
        if m.name.startswith(("/", "\\")) or PurePosixPath(m.name).is_absolute() or ".." in parts or (
                parts and ":" in parts[0]):
            raise ValueError(f"{tar_path}: member {m.name!r} is an absolute path or leaves the folder (..); refused")
        if not (m.isfile() or m.isdir()):
            raise ValueError(f"{tar_path}: member {m.name!r} is not a regular file or folder (a link or device); "
                             "refused")
        if not parts:
            continue  # the archive's "." itself
        if parts in seen:
            raise ValueError(f"{tar_path}: member {m.name!r} appears twice in the archive (the second would replace "
                             "the first); refused")
        seen.add(parts)
        if len(parts) == 1 and not m.isdir():
            raise ValueError(f"{tar_path}: member {m.name!r} is not inside a run folder; refused")
        if parts[0] not in tops:
            if not SAFE_NAME.fullmatch(parts[0]) or parts[0] in RESERVED_NAMES:
                raise ValueError(f"{tar_path}: run folder name {parts[0]!r} is not allowed (letters, digits, '.', "
                                 f"'_' and '-' only, and none of {', '.join(sorted(RESERVED_NAMES))}); refused")
            tops.append(parts[0])
    return tops


def _read_members(tar_path: Path) -> tuple[tarfile.TarFile, list[tarfile.TarInfo]]:
    """The open archive and every member header, read to its end (a truncated or damaged archive is refused here,
    before anything is unpacked)."""
    try:
        tar = tarfile.open(tar_path, "r:*")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        try:
            with open(tar_path, "rb") as fh:
                gz = fh.read(2) == b"\x1f\x8b"
        except OSError:
            gz = True  # unreadable: tarfile's own reason
        what = " ".join(str(err).split()) or type(err).__name__  # tarfile's reasons span lines: one line
        raise ValueError(f"{tar_path} is not a readable tar archive ("
                         + (what if gz else "it is not gzip-compressed; a pack's archive is a .tar.gz") + ")") from None
    try:
        members = tar.getmembers()
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        tar.close()
        raise ValueError(f"{tar_path} is truncated or damaged ({type(err).__name__}: {err or 'unexpected end'}); "
                         "nothing imported") from None
    try:
        _check_archive_end(tar_path, tar)
    except ValueError:
        tar.close()
        raise
    return tar, members


def _check_archive_end(tar_path: Path, tar: tarfile.TarFile) -> None:
    """A ValueError if anything but zeros follows the archive's end-of-archive marker, inside the compressed stream
    or after it (data appended to the .tar.gz): a pack is written whole by the slice, so more is damage or a
    second archive that the import would silently leave out."""
    fileobj = tar.fileobj
    try:
        fileobj.seek(tar.offset)
        while chunk := fileobj.read(1 << 20):
            if chunk.count(0) != len(chunk):
                raise ValueError(f"{tar_path} has data after the archive's end (not a slice's whole archive); "
                                 "nothing imported")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise ValueError(f"{tar_path} has data after the archive's end or is damaged there ({type(err).__name__}: "
                         f"{err or 'unexpected end'}); nothing imported") from None


def _extract_checked(tar: tarfile.TarFile, members: list[tarfile.TarInfo], into: Path) -> None:
    """Unpack the members :func:`_check_members` passed into ``into`` as tarfile's ``data`` filter does: no set-id,
    sticky or group / other write bits, owner read and write kept, no owner taken from the archive. Python
    3.11.0-3.11.3 (Debian 12's 3.11.2 among them) have no extraction filters; there the same modes are set here, and
    the filter's other refusals (links, devices, absolute paths, ``..``) are already :func:`_check_members`'s."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, members=members, filter="data")
        return
    for m in members:
        mode = (m.mode & 0o755) | (0o700 if m.isdir() else 0o600)
        m.mode = mode if m.isdir() or mode & 0o100 else mode & ~0o011  # not executable by its owner: by nobody
        m.uid, m.gid, m.uname, m.gname = os.getuid(), os.getgid(), "", ""  # a chown (as root) to oneself
    tar.extractall(into, members=members, numeric_owner=True)


def _stage_runs(tar_path: Path, into: Path, tmp: Path) -> list[str]:
    """Unpack the run archive into ``tmp`` and check every run folder (:func:`read_run`); their names. Raises a
    ValueError (nothing is written outside ``tmp``) on anything :func:`_check_members` refuses, a run folder
    ``into`` already has, or a folder that is not a readable run."""
    tar, members = _read_members(tar_path)
    with tar:
        tops = _check_members(tar_path, members)
        if not tops:
            raise ValueError(f"{tar_path} holds no run folder")
        there = [t for t in tops if os.path.lexists(into / t)]
        if there:
            raise ValueError(f"{tar_path}: run folder {there[0]} already exists in {into}; nothing imported")
        try:
            _extract_checked(tar, members, tmp)
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{tar_path} is truncated or damaged ({type(err).__name__}: {err}); nothing imported") \
                from None
    for t in tops:
        if not (tmp / t / "slice.json").is_file():
            raise ValueError(f"{tar_path}: run folder {t} has no slice.json; nothing imported")
        try:
            read_run(tmp / t)
        except ValueError as err:
            raise ValueError(f"{tar_path}: {str(err).replace(str(tmp) + os.sep, '')}; nothing imported") from None
    return tops


def _record_prefix(path: Path, label: str = "") -> str:
    """``DATE__GPU__COMMIT7`` (``__LABEL`` appended when given) from a pack's throughput.json, every field checked:
    they become a file name, so a date that is not a date or a tag or commit with a path in it is refused."""
    meta = read_json_file(path, "slice's throughput record")
    if not isinstance(meta, dict):
        raise ValueError(f"{path} holds a JSON {type(meta).__name__}, not an object: it is not a slice's throughput "
                         "record; nothing imported")
    date = meta.get("date")
    try:
        ok = isinstance(date, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", date) and dt.date.fromisoformat(date)
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{path}: date = {date!r} is not a date (YYYY-MM-DD); nothing imported")
    parts = [date]
    for key in ("gpu_tag", "commit"):
        value = meta.get(key)
        if not isinstance(value, str) or not SAFE_NAME.fullmatch(value):
            raise ValueError(f"{path}: {key} = {value!r} is not a plain name (letters, digits, '.', '_', '-'); "
                             "nothing imported")
        parts.append(value[:7] if key == "commit" else value)
    if label:
        if not SAFE_NAME.fullmatch(label):
            raise ValueError(f"--label {label!r} is not a plain name (letters, digits, '.', '_', '-')")
        parts.append(label)
    return "__".join(parts)


def _check_regular(path: Path) -> None:
    """A ValueError if ``path`` exists and is a symbolic link or anything but a regular file (not followed)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise ValueError(f"{path} is a symbolic link: a pack holds regular files only (the import would read what the "
                         "link points at); nothing imported")
    if not stat.S_ISREG(mode):
        raise ValueError(f"{path} is not a regular file (a folder, pipe or device): a pack holds regular files only; "
                         "nothing imported")


def _imported_as(slices_dir: Path, records: dict[str, Path]) -> str | None:
    """The stem (``DATE__GPU__COMMIT7[__LABEL][__K]``) under which every one of ``records`` (name -> path) is
    already in ``slices_dir`` byte for byte (the same slice's records imported before, under any label), or None."""
    if "throughput.json" not in records or not slices_dir.is_dir():
        return None
    tail = "__throughput.json"
    for kept in sorted(slices_dir.iterdir()):
        if not kept.name.endswith(tail) or not kept.is_file():
            continue
        stem = kept.name[: -len(tail)]
        there = {name: slices_dir / f"{stem}__{name}" for name in records}
        if all(p.is_file() and filecmp.cmp(records[name], p, shallow=False) for name, p in there.items()):
            return stem
    return None


def pack_parts(src: str | Path) -> tuple[Path | None, dict[str, Path]]:
    """The runs' archive (or None) and the record files (name -> path) of a pack: a folder the slice packed, or its
    ``table3_runs.tar.gz`` given directly (the records are then read beside it). A file of the pack that the import
    would read (the archive in a pack folder, a record) and that is a symbolic link or not a regular file (a folder,
    a pipe, a device) is refused: a link would import whatever it points at."""
    src = Path(src)
    if src.is_dir():
        folder, tar = src, (src / RUNS_ARCHIVE if (src / RUNS_ARCHIVE).is_file() else None)
    elif src.is_file():
        folder, tar = src.parent, src
    else:
        raise FileNotFoundError(f"{src} not found: pass the folder the slice packed (holding {RUNS_ARCHIVE} and "
                                "throughput.json) or the .tar.gz itself")
    if src.is_dir() and tar is None and os.path.lexists(src / RUNS_ARCHIVE):
        tar = src / RUNS_ARCHIVE  # a link or a folder of that name: refused just below
    for path in ([tar] if src.is_dir() and tar is not None else []) + [folder / name for name in RECORD_FILES]:
        _check_regular(path)
    records = {name: folder / name for name in RECORD_FILES if os.path.lexists(folder / name)}
    if tar is None and "throughput.json" not in records:
        raise ValueError(f"{src} holds neither {RUNS_ARCHIVE} nor throughput.json: not a slice's pack")
    return tar, records


def import_slice_pack(src: str | Path, into: str | Path, label: str = "") -> tuple[list[Path], list[Path]]:
    """Import a slice's pack into the results folder ``into``, all or nothing: its run folders (from
    ``table3_runs.tar.gz``, if the pack has one) and its records (:data:`RECORD_FILES`, kept under
    ``into/slices/`` as ``DATE__GPU__COMMIT7[__LABEL][__K]__NAME``). Returns (new run folders, new record files).

    Everything in the pack is treated as untrusted and checked before anything is written or any folder made: the
    pack's files regular files, not links (:func:`pack_parts`), the archive read to its end with nothing after it
    (:func:`_check_members`: no links, ``..``, duplicates or reserved names), every run folder readable
    (:func:`read_run`) and not already in ``into``, throughput.json a JSON object whose date, GPU tag and commit
    are plain names (:func:`_record_prefix`), the records not already under ``into/slices/`` byte for byte (a second
    import of one pack is refused), every destination inside ``into``. Then the runs are moved in and the records
    copied; a failure on the way puts everything back and removes the folders the import made (``into``, its
    missing parents, ``slices/``), only those."""
    tar, records = pack_parts(src)
    into = Path(into)
    if os.path.lexists(into) and not into.is_dir():
        raise ValueError(f"results folder {into} exists and is not a folder; nothing imported")
    prefix = _record_prefix(records["throughput.json"], label) if "throughput.json" in records else None
    if records and prefix is None:
        raise ValueError(f"{src} has {', '.join(records)} but no throughput.json to date them; nothing imported")
    dest: dict[str, Path] = {}
    if prefix is not None:
        slices_dir = into / "slices"
        same = _imported_as(slices_dir, records)
        if same is not None:
            raise ValueError(f"{src} is already imported: its {', '.join(records)} are identical to "
                             f"{slices_dir / same}__*; nothing imported")
        k, stem = 1, prefix
        while any(os.path.lexists(slices_dir / f"{stem}__{name}") for name in records):
            k += 1
            stem = f"{prefix}__{k}"
        root = os.path.realpath(into)
        for name in records:
            dest[name] = slices_dir / f"{stem}__{name}"
            if os.path.dirname(os.path.realpath(dest[name])) != os.path.join(root, "slices"):
                raise ValueError(f"{dest[name]} would not be inside {into}/slices; nothing imported")
    return _import(str(src), tar, {name: (records[name], dest[name]) for name in dest}, into)


def _missing_folders(path: Path) -> list[Path]:
    """``path`` and those of its parents that do not exist, outermost first (the folders an import would create);
    a ValueError, before anything is created, if the nearest one that exists is not a folder."""
    missing = []
    while not os.path.lexists(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    if not path.is_dir():
        raise ValueError(f"{path} is not a folder: the results folder cannot be made under it; nothing imported")
    return missing[::-1]


def _copy_record(source: Path, target: Path, copied: list[Path]) -> None:
    """Copy the record ``source`` to the new file ``target`` (never over an existing one), not through a link: one
    that replaced the checked file meanwhile is an OSError."""
    fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    with os.fdopen(fd, "rb") as fin:
        if not stat.S_ISREG(os.fstat(fin.fileno()).st_mode):
            raise OSError(f"{source} is not a regular file")
        with open(target, "xb") as fout:
            copied.append(target)
            shutil.copyfileobj(fin, fout)


def _import(what: str, tar: Path | None, records: dict[str, tuple[Path, Path]], into: Path) -> tuple[list, list]:
    """Stage and check the runs of ``tar`` (if any) next to ``into`` (in its nearest existing parent folder), then
    create the missing folders (``into``'s parents, ``into``, ``into/slices``), move the runs in and copy each record
    (source, destination), all or nothing: nothing is created before the pack is checked, and on a failure every
    moved folder, copied file and created folder (only those the import created) is taken back."""
    new_dirs = _missing_folders(into)
    if records and not os.path.lexists(into / "slices"):
        new_dirs.append(into / "slices")
    stage_in = into.parent if str(into.parent) else Path(".")
    while not os.path.lexists(stage_in) and stage_in.parent != stage_in:
        stage_in = stage_in.parent
    tmp = None
    moved: list[Path] = []
    copied: list[Path] = []
    made: list[Path] = []
    try:
        if tar is not None:
            try:
                tmp = Path(tempfile.mkdtemp(prefix=f".{into.name}.import-", dir=stage_in))
            except OSError as err:
                raise ValueError(f"could not import {what} into {into} ({err}); nothing imported") from None
        tops = _stage_runs(tar, into, tmp) if tar is not None else []
        try:
            for folder in new_dirs:
                folder.mkdir()  # a folder that appeared meanwhile is an error: it is not this import's to take back
                made.append(folder)
            for t in tops:  # same file system (tmp is in into's nearest parent); refuses a folder that appeared
                os.rename(tmp / t, into / t)
                moved.append(into / t)
            for source, target in records.values():
                _copy_record(source, target, copied)
        except BaseException as err:  # a failed copy, or Ctrl-C part-way: all or nothing (a rerun would be refused)
            for path in copied:
                path.unlink(missing_ok=True)
            for path in moved:  # put back what was moved
                os.rename(path, tmp / path.name)
            for path in reversed(made):
                try:
                    path.rmdir()  # only if empty: what someone else put there meanwhile stays
                except OSError:
                    pass
            if not isinstance(err, OSError):
                raise
            raise ValueError(f"could not import {what} into {into} ({err}); nothing imported") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return sorted(moved), copied


def import_pack(tar_path: str | Path, into: str | Path) -> list[Path]:
    """Unpack a slice's tarball of run folders (no records) into the results folder ``into``; the new folders,
    sorted. Checked as :func:`import_slice_pack` checks a pack's archive; on a refusal (ValueError, one line)
    ``into`` is left as it was (and not created)."""
    tar_path = Path(tar_path)
    if not tar_path.is_file():
        raise ValueError(f"{tar_path} is not a readable tar archive (no such file)")
    into = Path(into)
    if os.path.lexists(into) and not into.is_dir():
        raise ValueError(f"results folder {into} exists and is not a folder; nothing imported")
    return _import(str(tar_path), tar_path, {}, into)[0]


if __name__ == "__main__":
    import sys

    from paper_tables import not_a_command
    from shared_losses.training.cli import run_cli

    usage = ("the table of the GPU slices' runs is made by `python "
             "scripts/table3_gpu.py tabulate [RESULTS]` (its options: --help)")
    run_cli(lambda: not_a_command("paper_tables.table3_slices", usage, sys.argv[1:]))
