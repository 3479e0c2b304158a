"""DCL Table 3 grid: tasks x objectives x seeds of rl_curl at 100k environment steps, several runs in
parallel, then a mean ± std table in the paper's layout (table3.md) and learning curves (curves.png).

    .venv/bin/python scripts/curl_table3.py --parallel 4 --out runs/table3            # the full grid
    .venv/bin/python scripts/curl_table3.py --tasks cartpole-swingup --objectives curl debiased:0.05:1
    .venv/bin/python scripts/curl_table3.py --updates official fused --objectives curl   # both update schedules
    .venv/bin/python scripts/curl_table3.py --aggregate-only --out runs/table3         # only the table
    .venv/bin/python scripts/curl_table3.py --dry-run                                  # print the commands
    .venv/bin/python scripts/curl_table3.py --backend ray --gpus-per-run 0.5 --cpus-per-run 4     # on Ray (here)
    .venv/bin/python scripts/curl_table3.py --backend ray --address auto --gpus-per-run 0.5    # on a Ray cluster
    .venv/bin/python scripts/curl_table3.py --backend slurm --slurm-partition gpu --gpus-per-run 1   # Slurm jobs
    .venv/bin/python scripts/curl_table3.py --preset cpu --tasks cartpole-swingup --objectives none curl \
        debiased:0.05:1 debiased:0.05:2 --parallel 2 --out runs/cpu    # the small-network CPU protocol

``--preset NAME`` (rl_curl.config.PRESETS) is passed to every run, and the preset's --env-steps and --batch-size
become the grid's defaults; options given explicitly win.

Objectives are written ``curl`` | ``none`` | ``debiased:TAU_PLUS:M`` | ``hard:TAU_PLUS:M:BETA`` |
``cpc:TAU_PLUS`` (the table of
objectives is ``rl_curl.objectives``). The grid's options and commands, the table and the curves are
``paper_tables.table3``'s; this script runs the grid and writes them.
Every run resumes from its checkpoint if it was interrupted, and a finished run is skipped, so the
command can simply be started again. The runs are started by shared_losses.training.sweep: a local pool (--parallel
at once), Ray (--backend ray) or one Slurm job per run (--backend slurm; a job at its time limit is requeued and its
run continues from its checkpoint); a run killed by a signal or a lost node is started again and continues from
its checkpoint. Each run's stdout/stderr go to ``<run dir>.log`` beside its folder (not inside:
rl_curl.train starts a new run only in a missing or empty folder).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import warnings
from pathlib import Path

from paper_tables.table3 import (Args, TwoRunsOfOneSeed, check_extra, commands, cut_evaluations, empty_cells,
                                 grid_points, mixed_settings, paired_table, parse_args, parse_objective, plot_grid,
                                 table3)
from shared_losses.training.runtime import write_text_atomic
from shared_losses.training.sweep import Run, grid_lock, note_running_grid, run_sweep

ROOT = Path(__file__).resolve().parents[1]


def finished(out: Path, env_steps: int) -> bool:
    from shared_losses.training.runtime import read_json_file

    summary = out / "summary.json"
    return summary.exists() and read_json_file(summary, "run's summary").get("env_steps", 0) >= env_steps


def changed_settings(out: Path, cmd: list[str]) -> list[tuple[str, object, object]]:
    """How the run in ``out`` was configured differently from ``cmd`` (its rl_curl.train command), as
    ``(field, the run's value, the command's value)``; fields a resumed run may change do not count. Empty
    when the folder has no config.json (rl_curl.train then checks the checkpoint itself)."""
    import dataclasses

    from rl_curl.config import Config, from_cli
    from shared_losses.training.runtime import config_changes, read_json_file

    path = out / "config.json"
    if not path.exists():
        return []
    wanted = from_cli(cmd[3:]).resolved()  # cmd: python -m rl_curl.train ...
    return config_changes(Config.with_added_fields(read_json_file(path, "run's configuration")),
                          dataclasses.asdict(wanted), free=Config.RESUME_FREE)


def other_runs_made_otherwise(args: Args) -> list[str]:
    """The runs under --out that are not this grid's (other seeds or objectives, an earlier grid's) but of one of its
    tasks, made with settings other than the grid's runs of that task would have (paper_tables.table3's
    compared_settings: the objective, seed and what a resumed run may change aside), each as ``folder (field: the
    run's -> the grid's, ...)``. table3.md reads every run under --out, so they would share cells with this grid's."""
    import dataclasses

    from paper_tables.table3 import compared_settings
    from rl_curl.config import from_cli
    from shared_losses.training.runtime import changes_text, config_changes, read_json_file

    jobs = commands(args)
    mine = {out.resolve() for out, _ in jobs}  # the grid's own: finished ones checked by to_run, others by rl_curl
    others = [p for p in sorted(Path(args.out).glob("*/*/seed*/config.json")) if p.parent.resolve() not in mine]
    wanted = {}
    for _, cmd in jobs if others else []:  # the first run of each task says what the grid runs it with
        if (task := cmd[cmd.index("--task") + 1]) not in wanted:
            wanted[task] = compared_settings(dataclasses.asdict(from_cli(cmd[3:]).resolved()))
    stale = []
    for path in others:
        saved = read_json_file(path, "run's configuration")
        if isinstance(saved, dict) and saved.get("task") in wanted and "aux" in saved:
            if changes := config_changes(compared_settings(saved), wanted[saved["task"]]):
                stale.append(f"{path.parent} ({changes_text(changes)})")
    return stale


def to_run(args: Args) -> list[tuple[Path, list[str]]]:
    """The grid's runs that are not finished. A finished run made with other settings than the grid's is
    refused (ValueError: the command's ``error:`` line, naming each such run and field) rather than skipped as if it
    were this grid's; so is a grid whose --out holds other runs of its tasks made with other settings
    (:func:`other_runs_made_otherwise`), whose cells the table would share."""
    from shared_losses.training.runtime import changes_text

    jobs, stale = [], []
    for out, cmd in commands(args):
        if not finished(out, args.env_steps):
            jobs.append((out, cmd))
        elif changes := changed_settings(out, cmd):
            stale.append(f"{out} ({changes_text(changes)})")
    if stale:
        raise ValueError("finished runs under --out were made with other settings than this grid's (the run's value "
                         "-> the grid's): " + "; ".join(stale) + ". Use another --out for this grid (or the settings "
                         "of those runs); nothing was started")
    if others := other_runs_made_otherwise(args):
        raise ValueError("--out holds other runs of this grid's tasks made with other settings (the run's value -> "
                         "the grid's): " + "; ".join(others) + ". table3.md counts every run under --out, so its "
                         "cells would average unlike runs: use another --out for this grid (or the settings of "
                         "those runs); nothing was started")
    return jobs


def run_log(out: Path) -> Path:
    """Where a run's stdout/stderr go: ``seedS.log`` next to its folder ``seedS``. Inside the folder it would
    make the folder non-empty before the run starts, and rl_curl.train refuses such a folder."""
    return out.parent / f"{out.name}.log"


def visible_gpus() -> list[str] | None:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES names them (a Slurm job's ``2,3``, UUIDs); None where
    it is unset (every GPU of the machine, by index)."""
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    if seen is None:
        return None
    return [g.strip() for g in seen.split(",") if g.strip() and g.strip() != "-1"]


def gpu_for_run(gpu: int) -> str:
    """What a run's CUDA_VISIBLE_DEVICES is for the grid's ``--gpus`` id ``gpu``: an index into the GPUs this
    process sees, so that inside a job given GPUs 2 and 3 (CUDA_VISIBLE_DEVICES=2,3) ``--gpus 0 1`` means those two,
    not the machine's GPUs 0 and 1, which are another job's."""
    seen = visible_gpus()
    return str(gpu) if seen is None else seen[gpu]


def sweep_runs(jobs: list[tuple[Path, list[str]]], args: Args) -> list[Run]:
    """The grid's runs for shared_losses.training.sweep (log beside each folder, MUJOCO_GL, the GPU of each run)."""
    runs = []
    for i, (out, cmd) in enumerate(jobs):
        env = {"MUJOCO_GL": os.environ["MUJOCO_GL"]} if "MUJOCO_GL" in os.environ else {}  # else rl_curl's default
        if args.gpus and args.backend == "local":
            env["CUDA_VISIBLE_DEVICES"] = gpu_for_run(args.gpus[i % len(args.gpus)])
        runs.append(Run(str(out), cmd, run_log(out), cpus=args.cpus_per_run, gpus=args.gpus_per_run, env=env,
                        cwd=str(ROOT)))
    return runs


def check_grid(args: Args) -> None:
    """The grid's options, checked before anything runs or is written (a ValueError: one line through run_cli,
    exit status 2): the grid's own (empty lists, --env-steps, --gpus, the objectives), then, unless
    --aggregate-only, the task names and every run's rl_curl.train configuration, parsed and checked by the trainer
    itself (rl_curl.config: --seeds, --batch-size, --extra ...), so a bad value stops the grid here rather than in its
    first run (--dry-run too: it prints only commands that would run; the memory and a cluster are then not asked).
    --aggregate-only needs runs under --out."""
    args.validate()
    if args.gpus and args.backend != "local":
        raise ValueError("--gpus spreads runs over GPUs of this machine (--backend local); with Ray or Slurm use "
                         "--gpus-per-run")
    for option in ("tasks", "objectives", "seeds", "updates"):
        if not getattr(args, option):
            raise ValueError(f"--{option} is empty: the grid would run nothing")
    if args.env_steps < 1:
        raise ValueError(f"--env-steps must be >= 1 (the step the table reports), got {args.env_steps}")
    if any(g < 0 for g in args.gpus):
        raise ValueError(f"--gpus takes GPU ids (0, 1, ...), got {' '.join(map(str, args.gpus))}")
    seen = visible_gpus()
    if args.gpus and seen is not None and max(args.gpus) >= len(seen):
        raise ValueError(f"--gpus {' '.join(map(str, args.gpus))}: this process sees {len(seen)} GPU(s) "
                         f"(CUDA_VISIBLE_DEVICES={os.environ['CUDA_VISIBLE_DEVICES']}), ids 0 to {len(seen) - 1}"
                         if seen else f"--gpus {' '.join(map(str, args.gpus))}: CUDA_VISIBLE_DEVICES="
                         f"{os.environ['CUDA_VISIBLE_DEVICES']!r} leaves this process no GPU")
    for obj in args.objectives:
        parse_objective(obj)
    if args.aggregate_only:
        if not any(Path(args.out).glob("*/*/seed*/eval.csv")):
            raise ValueError(f"--aggregate-only: no runs under {args.out} (expected TASK/OBJECTIVE/seedN/eval.csv); "
                             "check --out")
        return
    from rl_curl.config import from_cli
    from rl_curl.env import parse_task

    for task in args.tasks:  # an unknown name lists the valid ones
        if not task.startswith("gym:"):
            parse_task(task)
    check_extra(args.extra)
    to_do = []
    for out, cmd in commands(args):  # --dry-run too: it prints only commands that would run
        try:
            cfg = from_cli(cmd[3:]).resolved()  # cmd: python -m rl_curl.train ...
        except ValueError as err:
            raise ValueError(f"{err} (rl_curl.train's check of the grid's run {out})") from None
        if not finished(Path(out), args.env_steps):
            to_do.append(cfg)
    if args.dry_run:  # only prints the commands: this machine's memory and a cluster are not asked
        return
    if args.backend == "local" and to_do:  # the runs at once on this machine (each run's own check, as it starts,
        from rl_curl.train import check_replay_memory  # sees the memory the others will fill as free)

        check_replay_memory(to_do[:max(1, args.parallel)],
                            fewer="lower --parallel (the runs trained at once on this machine)", gpu=False)
    args.check_cluster()  # last: the options first, then a cluster that may take seconds to answer


def write_tables(args: Args) -> str:
    """table3.md and curves.png of the runs under --out; the tables' text. Two run folders of one task, objective
    and seed (paper_tables.table3.once_per_seed) are counted once, each such pair named in one ``warning:`` line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        md = table3(args.out, args.env_steps)
        Path(args.out).mkdir(parents=True, exist_ok=True)
        paired = paired_table(args.out, args.env_steps)
        empty = empty_cells(args.out, args.env_steps)
        if empty:  # a dash where runs exist: say why, in the table's file and under the printed table
            md += "\n\n" + "\n".join(f"- {line}" for line in empty)
        damaged = mixed_settings(args.out) + cut_evaluations(args.out)
        if damaged:  # cells that average unlike runs, seeds left out by a cut eval.csv: under the table, and warned
            md += "\n\n" + "\n".join(f"- warning: {line}" for line in damaged)
            for line in damaged:
                print(f"warning: {line}", file=sys.stderr, flush=True)
        write_text_atomic(Path(args.out) / "table3.md", f"Score at {args.env_steps} environment steps, mean ± std "
                          f"over seeds (sample std; n shown where a cell has fewer seeds than 3 or than another "
                          f"cell)\n\n{md}\n"
                          + (f"\n{paired}\n" if paired else ""))
        try:
            plot_grid(args.out, Path(args.out) / "curves.png")
        except ValueError:
            pass
    ours = [w for w in caught if issubclass(w.category, TwoRunsOfOneSeed)]
    for text in dict.fromkeys(str(w.message) for w in ours):  # each table reads the runs: one line per pair
        print(f"warning: {text}", file=sys.stderr, flush=True)
    for w in caught:
        if w not in ours:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return md + (f"\n\n{paired}" if paired else "")


def main(args: Args) -> int:
    args.out = str(Path(args.out).resolve())  # --out is the caller's, for runs and tables alike
    check_grid(args)
    _, dropped = grid_points(args)
    if dropped:
        print(f"note: given twice, run once: {', '.join(dropped)}", file=sys.stderr, flush=True)
    failures = 0
    # a grid that runs holds --out's lock (a second grid started on it is refused at once) until its tables are written
    starts = not args.aggregate_only and not args.dry_run
    if args.aggregate_only:
        note_running_grid(args.out)
    with grid_lock(args.out) if starts else contextlib.nullcontext():
        if not args.aggregate_only:
            jobs = to_run(args)
            if args.dry_run:
                for _, cmd in jobs:
                    print(shlex.join(cmd))  # as a shell would need it: an argument with a space shows quoted
                return 0
            how, skipped = args.describe(), len(commands(args)) - len(jobs)
            print(f"{len(jobs)} runs to do ({skipped} finished earlier, skipped; {how})", flush=True)
            rcs = run_sweep(sweep_runs(jobs, args), args)
            failures = sum(rc != 0 for rc in rcs)
        print(write_tables(args))
    return 1 if failures else 0


if __name__ == "__main__":
    from shared_losses.training.cli import examples_from, run_cli

    sys.exit(run_cli(lambda: main(parse_args(examples=examples_from(__doc__)))))
