"""DCL Table 3 (rl_curl on DeepMind Control at 100k environment steps): the grid that trains it and the table
and learning curves made from its runs.

* The grid (:class:`Args`, :func:`commands`): tasks x objectives x seeds of ``python -m rl_curl.train``, each run
  in ``OUT/TASK/OBJECTIVE/seedS``; ``scripts/curl_table3.py`` runs it (locally or on Ray) and
  ``scripts/table3_gpu.py`` runs the same commands in short GPU slices.
* The table (:func:`table3`, :func:`paired_table`) and the curves (:func:`plot_grid`) of the runs under a folder:
  mean ± std over seeds at a given environment step, in the paper's order of objectives and tasks, and paired
  differences seed by seed. GPU slices' run folders are read by :mod:`paper_tables.table3_slices`.
"""

from __future__ import annotations

import json
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional

import numpy as np
import tyro

from rl_curl import objectives
from rl_curl.config import PRESETS, PresetName
from rl_curl.curve import read_eval
from shared_losses.training.cli import config_from_cli
from shared_losses.training.sweep import SweepOptions

TABLE3_TASKS = ["finger-spin", "cartpole-swingup", "reacher-easy", "cheetah-run", "walker-walk", "ball_in_cup-catch"]
TABLE3_OBJECTIVES = ["curl", "debiased:0.01:1", "debiased:0.05:1", "debiased:0.1:1", "debiased:0.01:2",
                     "debiased:0.1:2"]


@dataclass
class Args(SweepOptions):
    """Run and aggregate the DCL Table 3 grid of rl_curl."""

    out: str = "runs/table3"
    """Root directory; each run goes to OUT/TASK/OBJECTIVE/seedS. table3.md and curves.png count every run under
    OUT (not only the runs of the grid given), so a grid is refused where OUT holds runs of its tasks made with
    other settings, and the table warns of cells that mix them."""
    preset: Optional[PresetName] = None
    """A protocol preset of rl_curl.train (rl_curl.config.PRESETS; listed above with the grid options it sets),
    passed to every run as --preset NAME; its --env-steps and --batch-size become the grid's defaults."""
    tasks: list[str] = field(default_factory=lambda: list(TABLE3_TASKS))
    """Tasks (DCL Table 3: finger-spin cartpole-swingup reacher-easy cheetah-run walker-walk ball_in_cup-catch)."""
    objectives: list[str] = field(default_factory=lambda: list(TABLE3_OBJECTIVES))
    """Objectives: curl | debiased:TAU_PLUS:M | hard:TAU_PLUS:M:BETA | cpc:TAU_PLUS | none (rl_curl.objectives)."""
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    """Seeds per (task, objective)."""
    env_steps: int = 100_000
    """Environment steps per run; the table reports the evaluation at this step."""
    batch_size: int = 512
    """Batch size (512 as in the CURL paper's table; the official script used 128 for cartpole)."""
    gpus: list[int] = field(default_factory=list)
    """GPU ids to spread runs over with --backend local (round robin via CUDA_VISIBLE_DEVICES), as this process
    sees them: where CUDA_VISIBLE_DEVICES is set (a Slurm job's GPUs), 0 is its first; empty = leave it as is. With
    --backend ray, use --gpus-per-run (Ray assigns the GPUs)."""
    updates: list[Literal["official", "fused"]] = field(default_factory=lambda: ["official"])
    """Update schedules to run (rl_curl.train --update): official, fused or both. A fused run goes to
    OBJECTIVE-fused/seedS and gets rows of its own; with both, table3.md also pairs each fused row with its
    official-schedule row, seed by seed."""
    extra: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    """Extra arguments passed to every `python -m rl_curl.train`, written with '=' because they start with
    dashes: --extra=--no-save-replay (repeat --extra=... for several). The options the grid sets itself (task,
    seed, objective, update, output dir, env steps, batch size) are refused here. A finished run is skipped only
    if its config.json has the settings this grid would run it with (fields a resumed run may change aside); a
    finished run made with other settings (another --extra) stops the grid before anything starts, naming the
    run and the fields: use another --out for it."""
    aggregate_only: bool = False
    """Only build table3.md and curves.png from the runs already under OUT."""
    dry_run: bool = False
    """Print the training commands instead of running them."""


#: The grid's presets: rl_curl.config's, of which the grid sets env_steps and batch_size itself.
GRID_PRESETS = {name: {k: v for k, v in fields.items() if k in ("env_steps", "batch_size")}
                for name, fields in PRESETS.items()}


def parse_args(argv: list[str] | None = None, examples: str = "") -> Args:
    """The grid's options, ``--preset NAME`` included (:func:`shared_losses.training.cli.config_from_cli`);
    ``examples``: command lines for the end of ``--help``."""
    return config_from_cli(Args, GRID_PRESETS, argv, sections=[examples] if examples else ())


def parse_objective(text: str) -> list[str]:
    """The rl_curl.train options of an objective spec (checked here, not in every run of the grid)."""
    return objectives.cli_flags(objectives.parse_spec(text))


def objective_folder(text: str) -> str:
    """The folder of an objective's runs: its name and the values rl_curl.train is given for it
    (:func:`parse_objective`), joined by ``_``. Spellings of the same settings share it (``debiased:0.05:1``,
    ``debiased:0.050:1`` and ``debiased:5e-2:1`` are all ``debiased_0.05_1``); the usual spelling gives the spec
    with ``:`` made ``_``, the folder name of earlier grids."""
    return "_".join(parse_objective(text)[1::2])


def grid_points(args: Args) -> tuple[dict[str, list], list[str]]:
    """The grid's ``{"tasks", "objectives", "updates", "seeds"}``, each given once, in the order given, and what was
    left out as given twice (for a note). Objectives that parse to the same settings are one objective (the first
    spelling is kept): they would train the same runs."""
    kept: dict[str, list] = {}
    dropped: list[str] = []
    for option in ("tasks", "objectives", "updates", "seeds"):
        seen: dict = {}
        for value in getattr(args, option):
            key = tuple(parse_objective(value)) if option == "objectives" else value
            if key in seen:
                same = f" (same settings as {seen[key]})" if option == "objectives" and value != seen[key] else ""
                dropped.append(f"--{option} {value}{same}")
            else:
                seen[key] = value
        kept[option] = list(seen.values())
    return kept, dropped


def check_extra(extra: list[str]) -> None:
    """Options the grid sets itself are refused in --extra: the folder of a run is named from them, so a
    run made with another value would be taken for this one (and, once finished, skipped)."""
    own = {"--update": "--updates", "--task": "--tasks", "--seed": "--seeds", "--aux": "--objectives",
           "--tau-plus": "--objectives", "--positives": "--objectives", "--beta": "--objectives",
           "--output-dir": "--out", "--env-steps": "--env-steps", "--batch-size": "--batch-size",
           "--preset": "--preset"}
    for arg in extra:
        words = arg.split()
        if len(words) > 1 and ("=" not in words[0] or any(w.startswith("--") for w in words[1:])):
            # "--extra=--image-size 40 --crop-size 32" reaches rl_curl.train as one argument, which it refuses only
            # once the grid has started (and a dry run's command line looked right)
            raise ValueError(f"--extra={arg!r} holds several words: one option per --extra, with its value after '=' "
                             "(--extra=--image-size=40 --extra=--crop-size=32)")
        name = arg.split("=", 1)[0].replace("_", "-")
        if name in own:
            raise ValueError(f"--extra={arg}: the grid sets {name} itself; use curl_table3's {own[name]} (runs of "
                             "another value need folders of their own)")


def commands(args: Args) -> list[tuple[Path, list[str]]]:
    """Every run of the grid as ``(output folder, command)``: tasks x objectives x update schedules x seeds, each
    ``python -m rl_curl.train`` with ``--resume`` (an interrupted run continues, a finished one is skipped by its
    runner) and ``--extra`` (checked by :func:`check_extra`). A task, seed, update schedule or objective given twice
    (an objective also in another spelling of the same settings) is one point of the grid (:func:`grid_points`), run
    once, in the folder of :func:`objective_folder`."""
    check_extra(args.extra)
    points, _ = grid_points(args)
    jobs = []
    for task in points["tasks"]:
        for obj in points["objectives"]:
            flags = parse_objective(obj)
            future = objectives.OBJECTIVES.get(flags[1]).kind == "future"  # CPC: the official update, no CUDA graphs
            if future and "fused" in args.updates:
                raise ValueError(f"--objectives {obj}: CPC has the official update only; drop fused from --updates "
                                 "or run it in a grid of its own")
            extra = [f for f in args.extra if not (future and f == "--cuda-graphs")]
            for update in points["updates"]:
                for seed in points["seeds"]:
                    folder = objective_folder(obj) + (objectives.FUSED_FOLDER if update == "fused" else "")
                    out = Path(args.out) / task / folder / f"seed{seed}"
                    cmd = [sys.executable, "-m", "rl_curl.train", *(["--preset", args.preset] if args.preset else []),
                           "--task", task, *flags, "--seed", str(seed),
                           "--output-dir", str(out), "--env-steps", str(args.env_steps),
                           "--batch-size", str(args.batch_size), "--resume", "--no-progress",
                           *(["--update", update] if update != "official" else []), *extra]
                    jobs.append((out, cmd))
    return jobs


def table3_tasks(runs: list[dict]) -> list[str]:
    """The tasks of ``runs``: Table 3's in the paper's order, then any others sorted by name."""
    tasks = [t for t in TABLE3_TASKS if any(r["cfg"]["task"] == t for r in runs)]
    return tasks + sorted({r["cfg"]["task"] for r in runs} - set(tasks))


def collect(root: str | Path) -> list[dict]:
    """Every run under ``root`` (a directory holding config.json and eval.csv), one per task, row (objective label)
    and seed: :func:`once_per_seed`. A damaged config.json or eval.csv is a ValueError naming the file."""
    from shared_losses.training.runtime import files_under, read_json_file

    runs = []
    for cfg_path in files_under(root, "config.json"):  # a run folder behind a link too
        eval_csv = cfg_path.parent / "eval.csv"
        if eval_csv.exists():
            cfg = read_json_file(cfg_path, "run's configuration")
            x, y = read_eval(eval_csv)
            if len(x):
                runs.append({"cfg": cfg, "steps": x, "returns": y, "dir": str(cfg_path.parent)})
    return once_per_seed(runs)


class TwoRunsOfOneSeed(UserWarning):
    """Two run folders of one task, objective and seed under a grid's folder (:func:`once_per_seed`)."""


def once_per_seed(runs: list[dict]) -> list[dict]:
    """``runs`` with one run per (task, objective label, seed): two folders holding the same cell (an objective
    spelled two ways by an earlier grid, a copy of a run folder) would count one seed twice in the mean, the std and
    the number of seeds. The run kept is the one that got further; if they got as far, the one in the folder this
    grid would use (:func:`objective_folder`), else the first by folder name. A warning
    (:class:`TwoRunsOfOneSeed`) names the folders."""
    cells: dict[tuple, list[dict]] = {}
    for r in runs:
        cfg, seed = r["cfg"], _seed(r)
        key = (cfg.get("task"), objectives.label(cfg), seed) if "aux" in cfg and seed is not None else (r["dir"],)
        cells.setdefault(key, []).append(r)
    kept = []
    for key, group in cells.items():
        best = min(group, key=lambda r: (-r["steps"].max(), Path(r["dir"]).parent.name != _grid_folder(r["cfg"])))
        kept.append(best)
        if len(group) > 1:
            others = ", ".join(r["dir"] for r in group if r is not best)
            warnings.warn(f"{key[0]}, {key[1]}, seed {key[2]}: {len(group)} runs under the grid's folder; the table "
                          f"counts {best['dir']} only (the one that got furthest, else the one in the grid's own "
                          f"folder), not {others}: move those out of the grid's folder", TwoRunsOfOneSeed, stacklevel=1)
    return kept


def _seed(run: dict) -> int | None:
    """A run's seed: its config.json's, else its folder's name (seedS); None if neither tells."""
    if run["cfg"].get("seed") is not None:
        return int(run["cfg"]["seed"])
    name = Path(run["dir"]).name
    return int(name[4:]) if name.startswith("seed") and name[4:].isdigit() else None


def _grid_folder(cfg: dict) -> str | None:
    """The folder name :func:`commands` gives a run of ``cfg``'s objective and update (None: not one of its)."""
    try:
        obj = objectives.OBJECTIVES[cfg["aux"]]
        values = [f"{cfg[f]}" for f in objectives.SPEC_FIELDS if f in obj.uses and "tau_plus" in obj.uses]
        return (objective_folder(":".join([cfg["aux"], *values]))
                + (objectives.FUSED_FOLDER if cfg.get("update", "official") == "fused" else ""))
    except (KeyError, ValueError):
        return None


def score_at(run: dict, env_step: int) -> float | None:
    """The evaluation at ``env_step`` (the last one at or before it; None if the run has not got there).

    A run counts environment steps in whole agent steps, so its evaluation "at" ``env_step`` is logged at
    ``env_step`` rounded up to its action repeat (a 100k run with action repeat 3 ends, and makes its
    final evaluation, at 100002): that step is what "at or before" is measured against."""
    repeat = int(run["cfg"].get("action_repeat") or 1)
    ok = run["steps"] <= -(-env_step // repeat) * repeat
    if not ok.any() or run["steps"].max() < env_step:
        return None
    return float(run["returns"][ok][-1])


def table3(root: str | Path, env_step: int = 100_000) -> str:
    """Markdown table: objectives (in the paper's order) x tasks, mean ± std (the sample std over seeds, as every
    table of the suite; none for one seed). A cell's number of seeds is shown where it is under 3 or under the most
    any cell of the table has (a seed that has not got there yet, or failed, is not hidden)."""
    runs = collect(root)
    cells: dict[tuple[str, str], list[float]] = {}
    rows: dict[str, tuple] = {}  # label -> its place in the table (rl_curl.objectives.order)
    tasks = table3_tasks(runs)
    for r in runs:
        s = score_at(r, env_step)
        label = objectives.label(r["cfg"])
        rows.setdefault(label, objectives.order(r["cfg"]))
        if s is not None:
            cells.setdefault((label, r["cfg"]["task"]), []).append(s)
    lines = ["| objective | " + " | ".join(t.replace("-", " ") for t in tasks) + " |",
             "|---" * (len(tasks) + 1) + "|"]
    most = max((len(v) for v in cells.values()), default=0)
    for o in sorted(rows, key=rows.__getitem__):
        row = []
        for t in tasks:
            v = cells.get((o, t), [])
            row.append("–" if not v
                       else f"{np.mean(v):.0f}" + (f"±{np.std(v, ddof=1):.0f}" if len(v) > 1 else "")
                       + ("" if len(v) >= max(3, most) else f" (n={len(v)})"))
        lines.append(f"| {o} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def empty_cells(root: str | Path, env_step: int = 100_000) -> list[str]:
    """Why each cell of :func:`table3` that has runs shows "–": one line per cell (task, objective label), saying
    how far its runs got (none reached ``env_step``) or where their first evaluation is (all came after it). A cell
    with a score is not listed (its runs that have no score yet are the paired table's concern)."""
    runs = collect(root)
    cells: dict[tuple[str, str], list[dict]] = {}
    for r in runs:
        cells.setdefault((r["cfg"]["task"], objectives.label(r["cfg"])), []).append(r)
    lines = []
    for (task, label), group in sorted(cells.items()):
        if any(score_at(r, env_step) is not None for r in group):
            continue
        its = "its run" if len(group) == 1 else f"its {len(group)} runs"
        furthest = max(int(r["steps"].max()) for r in group)
        if furthest < env_step:
            why = f"{its} got to {furthest:,} environment steps at most, short of {env_step:,}"
        else:  # every evaluation after env_step (a table asked for a step before the first evaluation)
            first = min(int(r["steps"].min()) for r in group)
            has = "has" if len(group) == 1 else "have"
            why = f"{its} {has} no evaluation at or before {env_step:,} environment steps (the first is at {first:,})"
        lines.append(f"{task}, {label}: – because {why}")
    return lines


#: What tells a table's rows and cells apart (the task, the seed and what rl_curl.objectives.label reads): the runs of
#: one task may differ there. Runs of one task that differ in any other field (rl_curl.config's RESUME_FREE aside,
#: what a resumed run may change) were made with other settings, and a cell would average unlike runs.
CELL_FIELDS = frozenset({"task", "seed", "aux", *objectives.SPEC_FIELDS, "cpc_steps", "log_floor", "encoder_tanh",
                         "update"})


def compared_settings(cfg: dict) -> dict:
    """The options of a run's config.json that every run of its task in one table must share (:data:`CELL_FIELDS`),
    as JSON gives them back (a tuple is a list)."""
    from rl_curl.config import Config

    free = CELL_FIELDS | Config.RESUME_FREE
    return json.loads(json.dumps({k: v for k, v in Config.with_added_fields(dict(cfg)).items() if k not in free}))


def mixed_settings(root: str | Path) -> list[str]:
    """One line per task and option in which the runs under ``root`` of that task differ (other than
    :data:`CELL_FIELDS`): each value with the runs that have it. Empty when every task's runs agree."""
    by_task: dict[str, list[dict]] = {}
    for r in collect(root):
        by_task.setdefault(r["cfg"].get("task"), []).append(r)
    lines = []
    for task, group in sorted(by_task.items(), key=lambda kv: str(kv[0])):
        settings = [compared_settings(r["cfg"]) for r in group]
        for key in sorted(set().union(*settings)):
            holders: dict[str, dict[str, list]] = {}  # value -> label -> seeds
            for r, s in zip(group, settings):
                holders.setdefault(json.dumps(s.get(key)), {}).setdefault(objectives.label(r["cfg"]), []).append(
                    _seed(r))
            if len(holders) > 1:
                parts = []
                for value, labels in holders.items():
                    runs = ", ".join(f"{label} seed{'s' if len(seeds) > 1 else ''} "
                                     + " ".join(str(s) for s in sorted(seeds, key=str))
                                     for label, seeds in labels.items())
                    parts.append(f"{json.loads(value)!r} ({runs})")
                lines.append(f"{task}: its runs were made with other {key}: " + "; ".join(parts)
                             + ": the cells average unlike runs; keep one setting per grid folder")
    return lines


def cut_evaluations(root: str | Path) -> list[str]:
    """One line per finished run under ``root`` (summary.json) whose eval.csv lacks its final evaluation (missing,
    empty, or ending before the step summary.json says the run finished at): a file cut or edited after the run,
    whose seed a table would otherwise leave out without a word. rl_curl.evaluate gives the final evaluation again."""
    from shared_losses.training.runtime import files_under, read_json_file

    lines = []
    for path in files_under(root, "summary.json"):
        if not (path.parent / "config.json").exists():
            continue
        end = read_json_file(path, "run's summary").get("env_steps")
        eval_csv = path.parent / "eval.csv"
        steps = read_eval(eval_csv)[0] if eval_csv.exists() else np.array([])
        if end is None or (len(steps) and steps.max() >= end):
            continue
        has = "is missing" if not eval_csv.exists() else "has no evaluation" if not len(steps) else \
            f"ends at environment step {int(steps.max()):,}"
        lines.append(f"{eval_csv} {has}, though summary.json says the run finished at {int(end):,}: the file was "
                     f"cut or edited, and the run's final evaluation is not in the table (`python -m rl_curl.evaluate "
                     f"--run-dir {path.parent}` gives it again)")
    return lines


def final_scores(root: str | Path, env_step: int = 100_000) -> dict[str, dict[str, dict[int, float]]]:
    """``{task: {objective label: {seed: score at env_step}}}`` for every run that got there."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for r in collect(root):
        s = score_at(r, env_step)
        if s is not None:
            out.setdefault(r["cfg"]["task"], {}).setdefault(
                objectives.label(r["cfg"]), {})[int(r["cfg"].get("seed", 0))] = s
    return out


def wall_minutes(root: str | Path) -> dict[str, dict[str, dict[int, str]]]:
    """``{task: {objective label: {seed: minutes}}}`` of the finished runs whose summary.json records the wall
    time (``train_seconds``); a run that was resumed shows the part after its resume, marked
    "(from step N)"."""
    from shared_losses.training.runtime import read_json_file

    out: dict[str, dict[str, dict[int, str]]] = {}
    for r in collect(root):
        path = Path(r["dir"]) / "summary.json"
        summary = read_json_file(path, "run's summary") if path.exists() else {}
        if "train_seconds" not in summary:
            continue
        text = f"{summary['train_seconds'] / 60:.1f}"
        if summary.get("train_from_env_step"):
            text += f" (from step {summary['train_from_env_step']})"
        cfg = r["cfg"]
        out.setdefault(cfg["task"], {}).setdefault(objectives.label(cfg), {})[int(cfg.get("seed", 0))] = text
    return out


def _paired_lines(title: str, pairs: list[tuple[str, str, str]], cells: dict[str, dict[int, float]]) -> str:
    """One paired-difference table: a row ``name`` per ``(name, a, b)`` with ``a − b`` over their common seeds."""
    from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats

    lines = ["", title, "", f"| objective | seeds | differences | mean ± std | 95 % t interval | {BOOTSTRAP_COLUMN} | "
             "wins/losses |", "|---|---|---|---|---|---|---|"]
    for name, a, b in pairs:
        try:
            st = paired_stats(cells[a], cells[b])
        except ValueError as err:  # a score that is not finite (a run that diverged): said, the rest still written
            lines.append(f"| {name} | – | not paired: {err} | – | – | – | – |")
            continue
        if not st["n_seeds"]:
            continue
        fmt = lambda ci: f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "–"  # noqa: E731
        sd = f"{st['std']:.2f}" if st["std"] is not None else "–"
        lines.append(f"| {name} | {' '.join(map(str, st['seeds']))} | " + ", ".join(f"{d:+.2f}" for d in st["diffs"])
                     + f" | {st['mean']:+.2f} ± {sd} | {fmt(st['t_ci'])} | {fmt(st['bootstrap_ci'])} | "
                     f"{st['wins']}/{st['losses']} |")
    return "\n".join(lines)


def paired_table(root: str | Path, env_step: int = 100_000, anchor: str = "biased (CURL)") -> str:
    """Markdown: per task, every objective's score at ``env_step`` per seed, then its paired difference
    against ``anchor`` (the same seed gives both runs the same environment seeds and initial weights):
    mean, sample std, 95 % paired-t and paired-bootstrap intervals and wins/losses over the common seeds.
    Runs of the fused update are also paired with their official-schedule runs (same objective and seeds).
    Empty when no run reached ``env_step``."""
    scores = final_scores(root, env_step)
    runs = collect(root)
    order = {objectives.label(r["cfg"]): objectives.order(r["cfg"]) for r in runs}
    walls = wall_minutes(root)
    parts = []
    for task in [t for t in table3_tasks(runs) if t in scores]:
        cells = scores[task]
        labels = sorted(cells, key=lambda lab: order.get(lab, (99,)))
        seeds = sorted({s for v in cells.values() for s in v})
        lines = [f"#### {task}: score at {env_step} environment steps per seed", "",
                 "| objective | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std |",
                 "|---" * (len(seeds) + 2) + "|"]
        for lab in labels:
            v = cells[lab]
            vals = list(v.values())
            sd = f"{np.std(vals, ddof=1):.2f}" if len(vals) > 1 else "–"
            lines.append(f"| {lab} | " + " | ".join(f"{v[s]:.2f}" if s in v else "–" for s in seeds)
                         + f" | {np.mean(vals):.2f} ± {sd} |")
        parts.append("\n".join(lines))
        wall = walls.get(task, {})
        if wall:
            lines = ["", "Wall time of each run, minutes (summary.json's train_seconds: training, evaluations and "
                         "checkpoints in the run's process)", "",
                     "| objective | " + " | ".join(f"seed {s}" for s in seeds) + " |", "|---" * (len(seeds) + 1) + "|"]
            lines += [f"| {lab} | " + " | ".join(wall.get(lab, {}).get(s, "–") for s in seeds) + " |" for lab in labels]
            parts.append("\n".join(lines))
        if anchor in cells:
            parts.append(_paired_lines(f"Paired differences against {anchor} (objective − {anchor}, same seeds; std is "
                                       "the sample std of the differences)",
                                       [(lab, lab, anchor) for lab in labels if lab != anchor], cells))
        schedules = [(base, base + objectives.FUSED_LABEL, base) for base in labels
                     if base + objectives.FUSED_LABEL in cells]
        if schedules:
            parts.append(_paired_lines("Fused update against the official schedule (fused − official, same objective "
                                       "and seeds)", schedules, cells))
    return "\n\n".join(parts)


def mean_curve(runs: list[dict], ddof: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``steps, mean, std, n`` over seeds at every evaluation step any of ``runs`` reached: the mean and std
    (the sample std, NaN where only one seed has the step; ``ddof=0``: the population std) of the seeds evaluated at
    that step, and how many they were. Seeds that stopped early or evaluated at other steps simply drop out where
    they have no evaluation."""
    steps = np.unique(np.concatenate([r["steps"] for r in runs]))
    mean, std, n = (np.zeros(len(steps)) for _ in range(3))
    for i, s in enumerate(steps):
        v = np.array([r["returns"][r["steps"] == s][-1] for r in runs if (r["steps"] == s).any()])
        mean[i], std[i], n[i] = v.mean(), v.std(ddof=ddof) if len(v) > ddof else np.nan, len(v)
    return steps, mean, std, n.astype(int)


#: One colour per objective in every figure (the colour cycle in label order gave CURL blue in one figure and orange
#: in the next); variants of one objective (tau+, M, the schedule) tell apart by their markers.
OBJECTIVE_COLOURS = {"curl": "C0", "debiased": "C1", "hard": "C2", "cpc": "C4", "none": "C7"}
VARIANT_MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def plot_grid(root: str | Path, png: str | Path) -> Path:
    """Learning curves per task: per objective, the mean over seeds with a band of ± the sample std over seeds
    (the table's summary cells' std) where at least two seeds were evaluated; where fewer seeds got that far the line
    is dashed (see ``mean_curve``). An objective has one colour in every figure; the legend says what the band is."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is left alone

    runs = collect(root)
    tasks = table3_tasks(runs)
    fig = Figure(figsize=(4.5 * max(1, len(tasks)), 3.5))
    axes = fig.subplots(1, max(1, len(tasks)), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        groups: dict[str, list[dict]] = {}
        for r in sorted((r for r in runs if r["cfg"]["task"] == task), key=lambda r: objectives.order(r["cfg"])):
            groups.setdefault(objectives.label(r["cfg"]), []).append(r)
        partial, banded, variants = False, False, {}
        for label, rs in groups.items():
            x, m, sd, n = mean_curve(rs)
            full = n == len(rs)
            partial |= not full.all()
            aux = rs[0]["cfg"]["aux"]
            k = variants[aux] = variants.get(aux, -1) + 1
            line, = ax.plot(np.where(full, x, np.nan), np.where(full, m, np.nan), color=OBJECTIVE_COLOURS.get(aux),
                            marker=VARIANT_MARKERS[k % len(VARIANT_MARKERS)], markersize=3,
                            label=f"{label} ({len(rs)} seed{'s' if len(rs) != 1 else ''})")
            if not full.all():  # fewer seeds: dashed, joined to the last point with every seed
                k = max(int(np.argmin(full)) - 1, 0)
                ax.plot(x[k:], m[k:], ls="--", color=line.get_color())
            band = n >= 2
            banded |= bool(band.any())
            ax.fill_between(x, np.where(band, m - sd, np.nan), np.where(band, m + sd, np.nan), alpha=0.15,
                            color=line.get_color())
        if banded:
            ax.fill_between([], [], [], color="gray", alpha=0.15, label="band: ± std over seeds (sample)")
        if partial:
            ax.plot([], [], ls="--", color="gray", label="dashed: fewer seeds evaluated")
        ax.set_title(task)
        ax.set_xlabel("environment steps")
        ax.set_ylabel("evaluation return")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    return Path(png)


if __name__ == "__main__":
    from paper_tables import not_a_command
    from shared_losses.training.cli import run_cli

    usage = ("the grid and its table3.md and curves.png are made by `python "
             "scripts/curl_table3.py` (from runs already under OUT: `python scripts/curl_table3.py "
             "--aggregate-only --out OUT`; its options: --help)")
    run_cli(lambda: not_a_command("paper_tables.table3", usage, sys.argv[1:]))
