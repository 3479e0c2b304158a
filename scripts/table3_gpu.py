"""DCL Table 3 from short GPU slices: run a few rl_curl runs at once under a hard deadline, pack them, and later
import the packs into ``docs/data/table3_gpu/`` and tabulate whatever seeds exist.

    python scripts/table3_gpu.py run --seeds 0 1 --deadline 480 --pack OUT_FOLDER     # on the GPU machine
    python scripts/table3_gpu.py import OUT_FOLDER                                     # here: unpack into docs/data
    python scripts/table3_gpu.py tabulate                                              # table3_gpu.md + curves.png

``run`` is what ``scripts/gpu_table3.sh`` calls on a bare GPU machine after installing the carried wheels (see
docs/clusters.md, "DCL Table 3 in GPU slices"). It starts every (task, objective, seed) run of the slice at once on
the one GPU, each the same ``python -m rl_curl.train`` command as ``scripts/curl_table3.py`` would run (the paper's
100k environment steps, the task's action repeat, 10 evaluation episodes every 10k steps, batch 512), and stops
them at the deadline: Ctrl-C, so that each stops at its next episode end, then a kill after ``--grace`` seconds. A
run that did not reach its last step is packed as *unfinished* with the step it reached, never as a result. Runs
already finished in the results folder (``--results``, the one ``import`` fills) with the slice's settings are left
out, so the same command run again goes on with the runs still missing (``--redo``: all of them).
With ``--solo-env-steps N`` it first times one shorter run alone (``--sync-timing``: where its time goes); with
``--solo-after`` it spends what is left of the deadline after the slice's runs on one whole run alone on the fastest
one-run path (the time of a 100k run alone, or its env steps per second where it does not finish).

The pack (``--pack``: at most 8 files, what a lent GPU machine brings back) holds ``table3_runs.tar.gz`` (one
folder per run: config.json, eval.csv, log.csv, summary.json when finished, slice.json, train.log),
``throughput.json`` (env steps per second of each run alone and together, the solo run's time per part of a step,
the bench's summary, the chosen update path and the fit's estimate) and ``slice.txt`` (what was printed at the end);
with ``--bench`` also ``update_bench.json``, ``selftest.txt`` and ``profile.txt`` (scripts/bench_curl_gpu.py).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import tyro

#: When this script started (what --finish-by counts from).
STARTED = time.monotonic()
ROOT = Path(__file__).resolve().parents[1]

DEFAULT_RESULTS = ROOT / "docs" / "data" / "table3_gpu"
PACK_FILES = ("table3_runs.tar.gz", "throughput.json", "slice.txt")
#: What --bench adds to the pack (scripts/bench_curl_gpu.py).
BENCH_FILES = ("update_bench.json", "selftest.txt", "profile.txt")
#: Options every slice run gets: no progress bar, no replay in checkpoints (3.3 GB that would never come back),
#: checkpoints only at the end, the evaluation's episodes in worker processes (the GPU machine's 16 cores).
RUN_FLAGS = ("--no-save-replay", "--checkpoint-every", "0", "--eval-parallel", "--torch-threads", "2")


@dataclass
class RunArgs:
    """Run one slice: every (task, objective, seed) at once on this machine's GPU, under a hard deadline, then pack
    the run folders for the trip back."""

    pack: str
    """Folder for the pack (on the device machine: $OUT). Created; files of an earlier pack there are replaced."""
    tasks: list[str] = field(default_factory=lambda: ["cartpole-swingup"])
    """Tasks (their action repeat is the task's: 8 cartpole, 4 reacher and ball_in_cup)."""
    objectives: list[str] = field(default_factory=lambda: ["curl", "debiased:0.05:1"])
    """Objectives: curl | debiased:TAU_PLUS:M | hard:TAU_PLUS:M:BETA | none (DCL Table 3's debiased row that beats
    CURL on cartpole: debiased:0.05:1), each optionally with its own seeds after '@' (curl@0-4, debiased:0.1:2@0,2:
    a range, a list, or both as 0-2,5) in place of --seeds."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Seeds of every objective without '@' seeds (the same seed: the same initial weights and environment
    episodes)."""
    env_steps: int = 100_000
    """Environment steps per run (DCL Table 3 reports the evaluation at 100k)."""
    batch_size: int = 512
    """Batch size (the CURL paper's table; the official script used 128 for cartpole)."""
    deadline: float = 480.0
    """Seconds from the start of the runs until they are told to stop (Ctrl-C: each stops at its next episode end
    and writes a checkpoint), not counting --solo-env-steps's run."""
    grace: float = 45.0
    """Seconds a run has after the deadline's Ctrl-C before it is killed."""
    finish_by: float = 0.0
    """Seconds after this script starts by which the slice's runs must be stopped and packed (0: no such limit): for
    a machine that kills the command at a fixed time. After the bench, --deadline is shortened where need be so that
    the runs (and --solo-env-steps's run), their --grace and the packing (PACK_SECONDS) end by then, whatever the
    bench took; the pack then always comes back. throughput.json records both deadlines."""
    solo_env_steps: int = 0
    """Before the slice, time one run of this many environment steps alone (the first task, objective and seed; with
    --sync-timing, so its summary says where the time goes). 0 = no solo run. Not a result: it goes only into
    throughput.json."""
    solo_deadline: float = 150.0
    """Seconds the solo run may take before it is stopped (its numbers are then not reported)."""
    solo_after: bool = False
    """After the slice's runs, if at least 30 s of --deadline are left (all of it when every run was already finished
    in --results), run the slice's first run again alone to --env-steps on the fastest path for a run alone (--speed
    auto's choice without training together; default and graphs as given), stopped when the deadline comes: its wall
    time if it finishes, else its env steps/s, go into throughput.json as "alone_after". Not a result: its folder is
    not packed."""
    work: str = ""
    """Where the runs' folders go (empty = a fresh temporary folder)."""
    commit: str = ""
    """The code's commit, recorded with each run (empty = `git rev-parse HEAD` where there is a .git, else
    unknown). The device machine gets a copy of the working tree without .git: pass it on the command line."""
    date: str = ""
    """The date recorded with each run (empty = today, UTC)."""
    extra: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    """Extra options for every rl_curl.train, written with '=' (--extra=--no-encoder-tanh); the slice sets task, seed,
    objective, output folder, env steps and batch size itself."""
    bench: bool = False
    """First run scripts/bench_curl_gpu.py (the fast paths' self-test against the default update, their times at
    --batch-size, a kernel profile) into the pack: update_bench.json, selftest.txt, profile.txt."""
    bench_deadline: float = 120.0
    """Seconds the bench may take (its remaining variants are skipped after that; it is killed 60 s later)."""
    bench_extra: Annotated[list[str], tyro.conf.UseAppendAction] = field(default_factory=list)
    """Extra options for scripts/bench_curl_gpu.py, written with '=' (--bench-extra=--updates=20)."""
    speed: Literal["auto", "default", "graphs", "together"] = "default"
    """How the runs update. default: rl_curl.train's default. graphs: --cuda-graphs --replay-on-device. auto: the
    fastest of the bench's fast paths (graphs; graphs with --cudnn-conv-relu) whose own self-test passed, when it
    timed faster than the default, else the default; or together, when every stacked self-test check passed and the
    graphed stacked update (22 runs', else --stack runs') took at most 0.6 of that path's time per run. together: the
    runs trained together, one rl_curl.together process per task and number of positives M, their updates made as one
    CUDA graph (--cuda-graphs --replay-on-device, each environment in a worker process)."""
    fit: bool = False
    """Start only as many of the runs (seed by seed: every objective of a seed before the next seed, so the runs
    that start pair up) as the estimate from --bench's update time and this machine's environment speed says can
    finish by --deadline; the estimate goes into throughput.json beside what happened. Without --bench: all runs."""
    together_max: int = 0
    """With --speed together: runs per rl_curl.together process at most (0: every run of a task and M in one; their
    per-step Python shares one interpreter, so a GPU machine may want several smaller processes)."""
    poll: float = 2.0
    """Seconds between looks at the runs (their exit, their progress)."""
    results: str = str(DEFAULT_RESULTS)
    """The results folder that `import` fills (in the working tree the command runs in): a (task, objective, seed)
    with a finished run there at --env-steps, made with this slice's settings (how a run ran aside: graphs, threads,
    workers; not the evaluation's episodes), is left out, so the same command run again goes on with the cells still
    missing. A missing default folder means nothing to leave out."""
    redo: bool = False
    """Run every (task, objective, seed) given, even those already finished in --results."""


@dataclass
class ImportArgs:
    """Copy a slice's pack (the folder a GPU machine's command brought back, or its table3_runs.tar.gz) into the
    results folder, all or nothing: every run folder (refused, with nothing written, if one of that name is there
    already) and the pack's records (throughput.json, slice.txt, and update_bench.json, selftest.txt, profile.txt,
    dmon.txt, README.md where the pack has them) under slices/. Everything in the pack is checked before anything
    is written: the archive read to its end (nothing after it), no links, '..', duplicate members or reserved folder
    names, every run readable, the pack's files regular files (not links), throughput.json's date, GPU tag and commit
    plain names; no folder (not even --into's parents) is made before, and a failed import removes those it made. A
    pack of records alone (a timing, no runs) is imported too, once: records identical to ones already under slices/
    are refused."""

    pack: Annotated[str, tyro.conf.Positional]
    """The pack: a folder holding table3_runs.tar.gz and/or throughput.json, or the .tar.gz itself."""
    into: str = str(DEFAULT_RESULTS)
    """The results folder (one subfolder per run)."""
    label: str = ""
    """A word added to the records' file names under slices/ (e.g. solo_defaults), to tell apart packs of the same
    date, GPU and commit."""
    tabulate: bool = True
    """Rewrite the results folder's table3_gpu.md and curves.png afterwards."""


@dataclass
class TabulateArgs:
    """Write RESULTS/table3_gpu.md (mean ± std at the target step, per-seed numbers, paired differences against
    CURL, the papers' numbers, runs) and RESULTS/curves.png from every run folder there. RESULTS must be a folder
    that `import` filled (a run folder with slice.json, or slices/); any other folder (a scripts/curl_table3.py grid,
    say) is refused with nothing written, as is a table3_gpu.md or curves.png there that tabulate did not write."""

    results: Annotated[str, tyro.conf.Positional] = str(DEFAULT_RESULTS)
    """The results folder that `import` fills (one subfolder per run)."""
    env_step: int = 100_000
    """The step the table is at (DCL Table 3's 100k): runs trained to another target (a short CPU slice, say) are
    tabulated with --env-step set to theirs, and only listed otherwise."""


# --------------------------------------------------------------------------------------------------------- run
def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def gpu_tag(name: str) -> str:
    """A short name for folder names: H100, H200, A100 ... or the name's letters and digits."""
    m = re.search(r"\b([A-Z]\d{2,4}[A-Z]?)\b", name)
    return m.group(1) if m else (re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-") or "unknown")


def code_commit(given: str) -> str:
    if given:
        return given
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip() or "unknown"
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def run_name(task: str, objective: str, seed: int, tag: str, commit: str, date: str) -> str:
    return f"{task}__{objective.replace(':', '_')}__seed{seed}__{tag}__{commit[:7]}__{date}"


def slice_commands(args: RunArgs, work: Path, run_flags: tuple[str, ...] = RUN_FLAGS) -> list[dict]:
    """The slice's runs, seed by seed (every task and objective of a seed before the next seed: the runs a slice
    starts first pair up): ``{task, objective, seed, out, cmd}``, each command paper_tables.table3's for that run plus
    ``run_flags`` and --extra, checked by rl_curl.train's own parsing before anything starts."""
    from paper_tables.table3 import Args, check_extra, commands
    from rl_curl.config import from_cli

    check_extra(args.extra)
    cells = objective_seeds(args)
    jobs = []
    for task in args.tasks:
        for obj, seeds in cells:
            grid = Args(out=str(work), tasks=[task], objectives=[obj], seeds=seeds, env_steps=args.env_steps,
                        batch_size=args.batch_size, extra=[*run_flags, *args.extra])
            for seed, (out, cmd) in zip(seeds, commands(grid), strict=True):
                try:
                    from_cli(cmd[3:]).resolved()
                except ValueError as err:
                    raise ValueError(f"{err} (rl_curl.train's check of the slice's run {task} {obj} seed {seed})") \
                        from None
                jobs.append({"task": task, "objective": obj, "seed": seed, "out": out, "cmd": cmd})
    order = list(args.seeds) + sorted({s for _, seeds in cells for s in seeds} - set(args.seeds))
    objs = [obj for obj, _ in cells]
    return sorted(jobs, key=lambda j: (order.index(j["seed"]), args.tasks.index(j["task"]),
                                       objs.index(j["objective"])))


def cell(job: dict) -> tuple:
    """A run's cell of the slice: ``(task, objective, seed)``."""
    return job["task"], job["objective"], job["seed"]


def parse_seeds(text: str, where: str) -> list[int]:
    """``0-4`` / ``3,4`` / ``0-2,5`` -> the seeds, in that order; a ValueError naming ``where`` otherwise."""
    seeds: list[int] = []
    for part in text.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not m or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
            raise ValueError(f"{where}: the seeds after '@' must be numbers, ranges or both, as 0-4, 3,4 or 0-2,5; "
                             f"got {text!r}")
        seeds += range(int(m.group(1)), int(m.group(2) or m.group(1)) + 1)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"{where}: the seeds after '@' list a seed twice ({text!r})")
    return seeds


def objective_seeds(args: RunArgs) -> list[tuple[str, list[int]]]:
    """``(objective spec, its seeds)`` of each --objectives entry: the seeds after its '@', else --seeds. An objective
    given twice is refused (its runs would share folders)."""
    cells = []
    for text in args.objectives:
        spec, at, seeds = text.partition("@")
        cells.append((spec, parse_seeds(seeds, f"--objectives {text}") if at else list(args.seeds)))
    from paper_tables.table3 import objective_folder

    specs = [spec for spec, _ in cells]
    twice = sorted({s for s in specs if specs.count(s) > 1})
    if twice:
        raise ValueError(f"--objectives names {', '.join(twice)} twice: give each objective once (its seeds after '@')")
    folders = [objective_folder(spec) for spec in specs]  # other spellings of the same settings: the same runs
    same = [f"{specs[folders.index(f)]} and {spec}" for f, spec in zip(folders, specs) if folders.count(f) > 1
            and specs[folders.index(f)] != spec]
    if same:
        raise ValueError(f"--objectives names the same objective twice ({'; '.join(same)}: the same settings): give "
                         "each objective once (its seeds after '@')")
    return cells


#: Seconds --finish-by keeps for packing the runs (their folders into a tar.gz) and writing the records.
PACK_SECONDS = 20.0


def deadline_within(args: RunArgs, elapsed: float) -> tuple[float, str | None]:
    """The runs' deadline given ``elapsed`` seconds since the script started: --deadline, or less where --finish-by
    would otherwise pass before the runs (and --solo-env-steps's run), their grace and the packing are done; and why
    it was shortened (None: not). Never below 0 (the runs are then stopped at once, and packed unfinished)."""
    if not args.finish_by:
        return args.deadline, None
    before = args.solo_deadline + args.grace if args.solo_env_steps else 0.0
    left = args.finish_by - elapsed - before - args.grace - PACK_SECONDS
    if left >= args.deadline:
        return args.deadline, None
    left = max(0.0, left)
    return left, (f"--deadline {args.deadline:g} s shortened to {left:.0f} s: --finish-by {args.finish_by:g} s, "
                  f"{elapsed:.0f} s gone" + (f", the solo run's {before:g} s" if before else "")
                  + f", {args.grace:g} s of grace and {PACK_SECONDS:g} s of packing")


def check_run_args(args: RunArgs) -> None:
    for option in ("tasks", "objectives"):
        if not getattr(args, option):
            raise ValueError(f"--{option} is empty: the slice would run nothing")
    if not args.seeds and any("@" not in obj for obj in args.objectives):
        raise ValueError("--seeds is empty: the slice would run nothing of the objectives without their own seeds "
                         "('@')")
    objective_seeds(args)  # each objective's own seeds, checked
    if len(set(args.seeds)) != len(args.seeds):
        raise ValueError(f"--seeds lists a seed twice: {' '.join(map(str, args.seeds))}")
    for name in ("deadline", "grace", "poll", "solo_deadline"):
        value = getattr(args, name)
        if not value > 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0 seconds, got {value}")
    if args.finish_by < 0:
        raise ValueError(f"--finish-by must be >= 0 seconds (0: no limit), got {args.finish_by}")
    if args.finish_by and args.finish_by <= args.grace + PACK_SECONDS + (args.bench_deadline + 60 if args.bench else 0):
        raise ValueError(f"--finish-by {args.finish_by:g} leaves the runs no time: it must exceed --grace "
                         f"({args.grace:g}) + packing ({PACK_SECONDS:g})"
                         + (f" + the bench's limit (--bench-deadline + 60 = {args.bench_deadline + 60:g})"
                            if args.bench else "") + " seconds")
    if args.env_steps < 1 or args.solo_env_steps < 0:
        raise ValueError(f"--env-steps must be >= 1 and --solo-env-steps >= 0, got {args.env_steps} and "
                         f"{args.solo_env_steps}")
    if args.date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date):
        raise ValueError(f"--date must be YYYY-MM-DD, got {args.date!r}")
    if args.together_max < 0:
        raise ValueError(f"--together-max must be >= 0 (0: no limit), got {args.together_max}")


def left_to_run(jobs: list[dict], results: Path, env_steps: int) -> tuple[list[dict], list[dict], list[dict]]:
    """``jobs`` split by what ``results`` already holds: ``(to run, done, redone)``. Done (``{task, objective, seed,
    run}``): a finished run folder there of the same task, row and seed at ``env_steps`` whose config.json has the
    settings the job's command would run it with, in every field both know (one that a run's older code lacked is
    not a difference), fields a resumed run may change aside except the evaluation's episodes
    (:func:`paper_tables.table3_slices.settings_free`). Redone (``{task, objective,
    seed, runs}``): jobs that are run although finished runs of their cell are there, made with other settings (each
    named with the fields that differ). A damaged run folder there is a ValueError naming it, raised before anything
    starts."""
    import dataclasses

    from paper_tables.table3_slices import read_runs, settings_changes
    from rl_curl.config import from_cli
    from rl_curl.objectives import label
    from shared_losses.training.runtime import changes_text, read_json_file

    if not results.is_dir():
        raise ValueError(f"--results {results} is not a folder (the results folder `import` fills); pass --redo to run "
                         "every cell without looking")
    finished_runs: dict[tuple, list[dict]] = {}
    for run in read_runs(results):
        if run["finished"] and run["target"] == env_steps:
            finished_runs.setdefault((run["task"], run["label"], run["seed"]), []).append(run)
    todo, done, redone = [], [], []
    for job in jobs:
        wanted = dataclasses.asdict(from_cli(job["cmd"][3:]).resolved())
        candidates = finished_runs.get((job["task"], label(wanted), job["seed"]), [])
        other = []
        for run in candidates:
            path = run["dir"] / "config.json"
            saved = read_json_file(path, "rl_curl config of the run") if path.exists() else None
            changes = ([("config.json", "missing", "present")] if not isinstance(saved, dict) else
                       settings_changes(saved, wanted))
            if not changes:
                done.append({"task": job["task"], "objective": job["objective"], "seed": job["seed"],
                             "run": run["name"]})
                break
            other.append(f"{run['name']} ({changes_text(changes[:4])})")
        else:
            todo.append(job)
            if other:
                redone.append({"task": job["task"], "objective": job["objective"], "seed": job["seed"], "runs": other})
    return todo, done, redone


def reached(out: Path) -> int:
    """The last environment step a run logged (log.csv, eval.csv or summary.json), 0 before its first row."""
    best = 0
    for name in ("log.csv", "eval.csv"):
        path = out / name
        if path.exists():
            lines = [ln for ln in path.read_text().splitlines()[1:] if ln.strip()]
            for line in lines[-3:]:
                try:
                    best = max(best, int(float(line.split(",", 1)[0])))
                except ValueError:
                    pass
    return max(best, summary_steps(out))


def read_summary(out: Path) -> dict:
    """A run's summary.json; {} before the run has finished (or where it cannot be read: the pack must still be made).
    Unlike curl_table3.finished, which refuses a damaged summary, nothing here raises."""
    try:
        summary = json.loads((out / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def summary_steps(out: Path) -> int:
    """The environment steps a run's summary.json says it finished at (0 without one)."""
    try:
        return int(read_summary(out).get("env_steps", 0))
    except (ValueError, TypeError):
        return 0


def finished(out: Path, target: int) -> bool:
    return summary_steps(out) >= target


class Launched:
    """One run's process: started in a session of its own (so a kill reaches its evaluation workers too)."""

    def __init__(self, job: dict, env: dict):
        self.job, self.out = job, Path(job["out"])
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = self.out.parent / f"{self.out.name}.log"
        self.log = open(self.log_path, "w")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(job["cmd"], stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                     start_new_session=True)
        self.end: float | None = None
        self.samples: list[tuple[float, int]] = [(0.0, 0)]
        self.stopped_at_deadline = False

    def poll(self) -> bool:
        """Whether the run is still going (and record its progress)."""
        self.samples.append((time.monotonic() - self.start, reached(self.out)))
        if self.end is None and self.proc.poll() is not None:
            self.end = time.monotonic()
            self.log.close()
        return self.end is None

    def interrupt(self) -> None:
        if self.end is None:
            self.stopped_at_deadline = True
            try:
                self.proc.send_signal(signal.SIGINT)  # the run's own process: it stops at the next episode end
            except ProcessLookupError:
                pass

    def kill(self) -> None:
        if self.end is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
            self.poll()

    @property
    def wall(self) -> float:
        return (self.end if self.end is not None else time.monotonic()) - self.start


class Group:
    """One rl_curl.together process that trains several of the slice's runs (--speed together)."""

    def __init__(self, jobs: list[dict], env: dict, log_path: Path):
        self.cmd = together_command(jobs)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log_path, self.log = log_path, open(log_path, "w")
        self.start = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=self.log, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                     start_new_session=True)
        self.end: float | None = None
        self.stopped_at_deadline = False
        self.views = [GroupRun(job, self) for job in jobs]

    def poll(self) -> bool:
        if self.end is None and self.proc.poll() is not None:
            self.end = time.monotonic()
            self.log.close()
        return self.end is None

    interrupt, kill = Launched.interrupt, Launched.kill


class GroupRun:
    """One run of a :class:`Group`, looked at as :class:`Launched` looks at a run of its own (its progress; the
    process, its log and its end are the group's)."""

    def __init__(self, job: dict, group: Group):
        self.job, self.out, self.group = job, Path(job["out"]), group
        self.samples: list[tuple[float, int]] = [(0.0, 0)]

    start = property(lambda self: self.group.start)
    end = property(lambda self: self.group.end)
    proc = property(lambda self: self.group.proc)
    log_path = property(lambda self: self.group.log_path)
    stopped_at_deadline = property(lambda self: self.group.stopped_at_deadline)
    launched = property(lambda self: self.group.cmd)
    wall = Launched.wall

    def poll(self) -> bool:
        self.samples.append((time.monotonic() - self.start, reached(self.out)))
        return self.group.poll()

    def interrupt(self) -> None:
        self.group.interrupt()

    def kill(self) -> None:
        self.group.kill()
        self.group.poll()


def groups_of(jobs: list[dict], most: int = 0) -> list[list[dict]]:
    """The slice's runs by what one stacked update can hold: the same task and number of positives M (runs differ
    then only in objective and seed), in the slice's order; each group cut into pieces of at most ``most`` runs
    (0: whole)."""
    from rl_curl.objectives import parse_spec

    groups: dict[tuple, list[dict]] = {}
    for job in jobs:
        groups.setdefault((job["task"], parse_spec(job["objective"]).get("positives", 1)), []).append(job)
    size = most if most > 0 else max(len(g) for g in groups.values())
    return [g[i:i + size] for g in groups.values() for i in range(0, len(g), size)]


def together_command(jobs: list[dict]) -> list[str]:
    """``python -m rl_curl.together --run SPEC SEED OUT ... -- OPTIONS`` for runs whose rl_curl.train commands differ
    only in the options --run sets."""
    from rl_curl.together import PER_RUN  # the options --run sets, each with one value

    def common(cmd: list[str]) -> list[str]:
        argv, out, i = cmd[3:], [], 0
        while i < len(argv):
            if argv[i] in PER_RUN:
                i += 2
                continue
            out.append(argv[i])
            i += 1
        return out

    shared = common(jobs[0]["cmd"])
    for job in jobs[1:]:
        if common(job["cmd"]) != shared:
            raise ValueError(f"runs {jobs[0]['out']} and {job['out']} differ in more than objective and seed: they "
                             "cannot train together")
    runs = [a for job in jobs for a in ("--run", job["objective"], str(job["seed"]), str(job["out"]))]
    return [sys.executable, "-m", "rl_curl.together", *runs, "--", *shared]


def run_all(jobs: list[dict], deadline: float, grace: float, poll: float, label: str,
            together: bool = False, together_max: int = 0) -> list[Launched]:
    """Start ``jobs`` at once (``together``: one rl_curl.together process per group, :func:`groups_of`); Ctrl-C the
    ones still going at ``deadline`` seconds, kill them ``grace`` later."""
    # PYTHONFAULTHANDLER: a run that dies of a signal (a segfault in a native library) leaves its Python stack in
    # its log, which the pack brings back (train.log).
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl"), "PYTHONUNBUFFERED": "1",
           "PYTHONFAULTHANDLER": "1"}
    if together:
        by_out = {}
        for i, group in enumerate(groups_of(jobs, together_max)):
            g = Group(group, env, Path(group[0]["out"]).parent.parent / f"together{i}.log")
            by_out.update({v.job["out"]: v for v in g.views})
        runs = [by_out[job["out"]] for job in jobs]
    else:
        runs = [Launched(job, env) for job in jobs]
    print(f"[{label}] {len(runs)} run(s) started; deadline {deadline:.0f} s", flush=True)
    t0, told, last_print = time.monotonic(), None, 0.0
    while any([r.poll() for r in runs]):  # a list: every run is polled (its progress recorded) each time
        now = time.monotonic() - t0
        if told is None and now >= deadline:
            print(f"[{label}] deadline: stopping {sum(r.end is None for r in runs)} run(s) at their next episode end",
                  flush=True)
            for r in runs:
                r.interrupt()
            told = now
        if told is not None and now >= told + grace:
            for r in runs:
                r.kill()
            break
        if now - last_print >= 60:
            last_print = now
            print(f"[{label}] {now:6.0f} s: " + ", ".join(f"{r.job['objective']} s{r.job['seed']} {reached(r.out)}"
                                                          for r in runs), flush=True)
        time.sleep(poll)
    for r in runs:
        r.poll()
    return runs


def rate(run: Launched) -> float | None:
    """Environment steps per second between the run's first logged step and its last (start-up excluded)."""
    pts = [(t, s) for t, s in run.samples if s > 0]
    if len(pts) < 2 or pts[-1][1] == pts[0][1]:
        return None
    (t0, s0), (t1, s1) = pts[0], pts[-1]
    for t, s in pts:  # the first time the last step was seen
        if s == s1:
            t1 = t
            break
    return round((s1 - s0) / (t1 - t0), 1) if t1 > t0 else None


def together_rate(runs: list[Launched]) -> float | None:
    """Environment steps per second of all runs together while every one of them was running: the sum of their
    progress between the first and the last poll at which all had logged and none had ended."""
    if not runs:
        return None
    n = min(len(r.samples) for r in runs)
    idx = [i for i in range(n) if all(r.samples[i][1] > 0 for r in runs)
           and all(r.end is None or r.samples[i][0] < r.end - r.start for r in runs)]
    if len(idx) < 2:
        return None
    a, b = idx[0], idx[-1]
    dt_ = max(r.samples[b][0] for r in runs) - min(r.samples[a][0] for r in runs)
    steps = sum(r.samples[b][1] - r.samples[a][1] for r in runs)
    return round(steps / dt_, 1) if dt_ > 0 and steps > 0 else None  # None: no progress seen between two polls


def write_slice_info(r: Launched, args: RunArgs, info: dict) -> dict:
    target = args.env_steps
    done = finished(r.out, target)
    summary = read_summary(r.out) if done else {}
    return {"task": r.job["task"], "objective": r.job["objective"], "seed": r.job["seed"],
            "env_steps_target": target, "env_steps_reached": reached(r.out), "finished": done,
            "stopped_at_deadline": r.stopped_at_deadline and not done, "exit_code": r.proc.returncode,
            "wall_seconds": round(r.wall, 1),
            "env_steps_per_second": summary.get("env_steps_per_second", rate(r)),
            "final_eval_return": summary.get("final_eval_return"),
            "gpu_peak_reserved_gib": summary.get("gpu_peak_reserved_gib"), **info,
            "batch_size": args.batch_size, "command": r.job["cmd"][1:],
            **({"trained_together_by": r.launched[1:]} if hasattr(r, "launched") else {})}


def pack_runs(runs: list[Launched], args: RunArgs, info: dict, pack: Path) -> list[dict]:
    """Write table3_runs.tar.gz: one folder per run with its small files and slice.json."""
    staging = pack / ".staging"
    shutil.rmtree(staging, ignore_errors=True)
    rows = []
    for r in runs:
        meta = write_slice_info(r, args, info)
        name = run_name(meta["task"], meta["objective"], meta["seed"], info["gpu_tag"], info["commit"], info["date"])
        d = staging / name
        d.mkdir(parents=True)
        for f in ("config.json", "eval.csv", "log.csv", "summary.json"):
            if (r.out / f).exists():
                shutil.copy2(r.out / f, d / f)
        if r.log_path.exists():  # the end of what the run printed (errors, its last lines)
            lines = r.log_path.read_text(errors="replace").splitlines()
            (d / "train.log").write_text("\n".join(lines[-300:]) + "\n")
        (d / "slice.json").write_text(json.dumps(meta, indent=1) + "\n")
        rows.append({"name": name, **meta})
    if not rows:  # nothing ran: a pack of records alone (an earlier pack's runs must not come back as this one's)
        shutil.rmtree(staging, ignore_errors=True)
        (pack / "table3_runs.tar.gz").unlink(missing_ok=True)
        return rows
    tmp = pack / "table3_runs.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for d in sorted(staging.iterdir()):
            tar.add(d, arcname=d.name)
    os.replace(tmp, pack / "table3_runs.tar.gz")
    shutil.rmtree(staging)
    return rows


#: What a run alone's record takes from its summary.json.
ALONE_FIELDS = ("env_steps_per_second", "train_seconds", "time_seconds", "thread_cpu_seconds", "gpu_peak_allocated_gib",
                "gpu_peak_reserved_gib")


def log_tail(r: Launched) -> list[str]:
    """The last 40 lines of a run's log (its last 15 printed): what a record of a run that did not finish keeps."""
    tail = r.log_path.read_text(errors="replace").splitlines()[-40:] if r.log_path.exists() else []
    print("\n".join("    " + line for line in tail[-15:]), flush=True)
    return tail


def solo_timing(args: RunArgs, work: Path, info: dict) -> dict | None:
    """One shorter run alone, with --sync-timing: its env steps/s and time per part of a step (summary.json)."""
    solo = dataclasses.replace(args, tasks=args.tasks[:1], objectives=args.objectives[:1], seeds=args.seeds[:1],
                               env_steps=args.solo_env_steps, extra=[*args.extra, "--sync-timing"])
    job = slice_commands(solo, work / "solo")[0]
    (r,) = run_all([job], args.solo_deadline, args.grace, args.poll, "solo")
    if not finished(r.out, args.solo_env_steps):
        why = (f"stopped at its deadline, {args.solo_deadline:.0f} s" if r.stopped_at_deadline
               else f"failed with exit code {r.proc.returncode}")
        print(f"[solo] {why} (reached {reached(r.out)}); not reported; the end of its log:", flush=True)
        return {"finished": False, "env_steps_reached": reached(r.out), "wall_seconds": round(r.wall, 1),
                "exit_code": r.proc.returncode, "stopped_at_deadline": r.stopped_at_deadline, "log_tail": log_tail(r)}
    summary = read_summary(r.out)
    return {"finished": True, "task": job["task"], "objective": job["objective"], "seed": job["seed"],
            "env_steps": args.solo_env_steps, "wall_seconds": round(r.wall, 1),
            **{k: summary.get(k) for k in ALONE_FIELDS}, "command": job["cmd"][1:]}


def with_speed(args: RunArgs, speed: tuple[str, ...]) -> RunArgs:
    """``args`` whose runs take the speed flags ``speed`` (before the user's own --extra, which they do not repeat)."""
    return dataclasses.replace(args, extra=[*(f for f in speed if f not in args.extra), *args.extra])


#: --solo-after runs only when at least this many seconds of the deadline are left.
SOLO_AFTER_MIN_SECONDS = 30.0


def solo_after(args: RunArgs, work: Path, bench: dict | None, seconds: float) -> dict:
    """--solo-after: the slice's first run again, alone, to --env-steps on the fastest path for a run alone, stopped
    after ``seconds`` (what is left of the deadline). ``args.extra`` holds no speed flags of the slice's."""
    if seconds < SOLO_AFTER_MIN_SECONDS:
        why = f"{max(seconds, 0.0):.0f} s of the deadline left, under {SOLO_AFTER_MIN_SECONDS:.0f} s"
        print(f"[alone] not run: {why}", flush=True)
        return {"ran": False, "why": why}
    speed, why = choose_speed(args.speed if args.speed in ("default", "graphs") else "auto", bench, together=False)
    alone = with_speed(dataclasses.replace(args, tasks=args.tasks[:1], objectives=args.objectives[:1]), speed)
    job = slice_commands(alone, work / "alone", run_flags(1, os.cpu_count() or 1))[0]
    if Path(job["out"]).exists() and any(Path(job["out"]).iterdir()):  # a --work given again
        why = f"{job['out']} already holds a run (pass another --work)"
        print(f"[alone] not run: {why}", flush=True)
        return {"ran": False, "why": why}
    print(f"[alone] {job['task']} {job['objective']} seed {job['seed']} alone to {args.env_steps} env steps in the "
          f"{seconds:.0f} s left ({why})", flush=True)
    (r,) = run_all([job], seconds, args.grace, args.poll, "alone")
    done = finished(r.out, args.env_steps)
    summary = read_summary(r.out) if done else {}
    record = {"ran": True, "finished": done, "task": job["task"], "objective": job["objective"], "seed": job["seed"],
              "speed": {"flags": list(speed), "why": why}, "deadline": round(seconds, 1),
              "env_steps": args.env_steps, "env_steps_reached": reached(r.out), "wall_seconds": round(r.wall, 1),
              "exit_code": r.proc.returncode, "stopped_at_deadline": r.stopped_at_deadline and not done,
              **{k: summary.get(k) for k in ALONE_FIELDS}, "command": job["cmd"][1:]}
    if not done:  # its progress between two looks, in place of the run's own count over its training
        record["env_steps_per_second"] = rate(r)
    if not done and not r.stopped_at_deadline:
        print("[alone] failed; the end of its log:", flush=True)
        record["log_tail"] = log_tail(r)
    return record


def alone_line(alone: dict) -> str:
    """slice.txt's line for --solo-after's run."""
    if not alone.get("ran"):
        return f"alone after the slice: not run ({alone['why']})"
    how = " ".join(alone["speed"]["flags"]) or "the default path"
    what = f"{alone['task']} {alone['objective']} seed {alone['seed']} on {how}"
    if alone["finished"]:
        return (f"alone after the slice: {what}, {alone['env_steps']} env steps in {alone['wall_seconds']:.0f} s "
                f"with start-up ({alone['env_steps_per_second']} env steps/s)")
    if alone["stopped_at_deadline"]:
        return (f"alone after the slice: {what}, stopped at the deadline at {alone['env_steps_reached']} of "
                f"{alone['env_steps']} env steps after {alone['wall_seconds']:.0f} s "
                f"({alone['env_steps_per_second']} env steps/s)")
    return f"alone after the slice: {what} failed (exit {alone['exit_code']}; throughput.json has its log)"


GRAPH_FLAGS = ("--cuda-graphs", "--replay-on-device")
#: The fast paths --speed auto chooses from: the bench's variant -> rl_curl.train's flags.
FAST_PATHS = {"graphs": GRAPH_FLAGS, "graphs_convrelu": (*GRAPH_FLAGS, "--cudnn-conv-relu")}
#: The bench's other self-test checks a fast path needs to have passed where the report has them: the fused kernel
#: against the default convolution (its own check compares the graph with the same kernel run eagerly).
FAST_PATH_CHECKS = {"graphs_convrelu": ("conv_relu_op",)}


def variant_of(flags: tuple[str, ...]) -> str:
    """The bench variant whose update the runs with ``flags`` make."""
    return next((name for name, f in FAST_PATHS.items() if tuple(flags) == f), "default")


def run_flags(n_runs: int, cpus: int, together: bool = False) -> tuple[str, ...]:
    """What every run of a slice gets, for ``n_runs`` at once on ``cpus`` CPUs. Up to ``max(2, cpus // 8)`` runs:
    :data:`RUN_FLAGS` and --eval-async (evaluations in worker processes, beside training). More runs share the CPUs
    and the GPU among themselves, so each evaluates in turn in its own process (no worker processes: ten per run
    would crowd the memory) on one torch thread; runs trained ``together`` (rl_curl.together: each run's evaluation
    steps its episodes in one worker process of its own) evaluate beside training (--eval-async) all the same, so that
    an evaluation of one run does not stop the group's meetings."""
    if n_runs > max(2, cpus // 8):
        return ("--no-save-replay", "--checkpoint-every", "0", "--torch-threads", "1",
                *(("--eval-async",) if together else ()))
    return (*RUN_FLAGS, "--eval-async")


def run_bench(args: RunArgs, pack: Path, commit: str) -> dict | None:
    """scripts/bench_curl_gpu.py into the pack; its report (None if it wrote none)."""
    cmd = [sys.executable, str(ROOT / "scripts" / "bench_curl_gpu.py"), "--out", str(pack), "--batch",
           str(args.batch_size), "--deadline", str(args.bench_deadline), "--commit", commit, *args.bench_extra]
    print(f"[bench] {' '.join(cmd[1:])}", flush=True)
    try:
        res = subprocess.run(cmd, cwd=ROOT, timeout=args.bench_deadline + 60, text=True, capture_output=True,
                             env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        print("\n".join("    " + line for line in (res.stdout + res.stderr).splitlines()[-40:]), flush=True)
    except subprocess.TimeoutExpired:
        print(f"[bench] killed after {args.bench_deadline + 60:.0f} s", flush=True)
    try:
        report = json.loads((pack / "update_bench.json").read_text())
    except (OSError, ValueError):
        return None
    return report if isinstance(report, dict) else None


#: The bench's self-test check of the GPU replay's staged copies, which every path with --replay-on-device uses.
REPLAY_CHECK = "replay_staged"
#: The bench's self-test checks that runs trained together rely on.
STACKED_CHECKS = ("stacked", "stacked_act", "graphs_stacked", "graphs_stacked_act", REPLAY_CHECK)


def stacked_checks_failed(bench: dict | None) -> list[str]:
    """The stacked update's self-test checks that a bench report has and that did not pass (none without a report,
    or in a report from before the stacked update)."""
    checks = (bench or {}).get("selftest", {}).get("checks") or []
    return [c.get("path") for c in checks if c.get("path") in STACKED_CHECKS and not c.get("passed")]


#: --speed auto trains the runs together when the graphed stacked update's time per run is at most this share of the
#: update time of the path the runs would take one by one. Below 1 because the runs of one rl_curl.together process
#: also share one interpreter for their per-step work (the meeting, their replays, their environments' pipes), which
#: the update's time does not show; 0.6 is a judgment, not a measurement.
TOGETHER_SHARE = 0.6


def stacked_row(bench: dict | None) -> dict | None:
    """The bench's timed graphed stacked update that stands for runs trained together: the 22 runs' if timed, else
    the ``--stack`` runs'."""
    rows = {r.get("name"): r for r in (bench or {}).get("variants", [])}
    timed = [rows[n] for n in ("graphs_stacked22", "graphs_stacked") if (rows.get(n) or {}).get("ms_per_run_update")]
    return timed[0] if timed else None


def auto_together(bench: dict | None) -> str | None:
    """Why --speed auto trains the runs together, or None: every stacked self-test check there and passed, and the
    graphed stacked update per run at most :data:`TOGETHER_SHARE` of the one-by-one path's update."""
    checks = {c.get("path"): c.get("passed") for c in (bench or {}).get("selftest", {}).get("checks") or []}
    row = stacked_row(bench)
    if row is None or not all(checks.get(p) for p in STACKED_CHECKS):
        return None
    flags, _ = choose_speed("auto", bench, together=False)
    single = next((r.get("median_ms") for r in bench.get("variants", []) if r.get("name") == variant_of(flags)), None)
    per_run = row["ms_per_run_update"]
    if not single or per_run > TOGETHER_SHARE * single:
        return None
    return (f"runs trained together (--speed auto): the graphed stacked update of {row.get('runs')} runs took "
            f"{per_run:.2f} ms per run against {single:.2f} ms for {variant_of(flags)} one by one (at most "
            f"{TOGETHER_SHARE:g} of it), its self-test checks passed")


def trains_together(mode: str, bench: dict | None) -> bool:
    """Whether the slice's runs train together: --speed together unless the bench's stacked checks failed, and
    --speed auto when :func:`auto_together` says so."""
    if mode == "auto":
        return auto_together(bench) is not None
    return mode == "together" and not stacked_checks_failed(bench)


def choose_speed(mode: str, bench: dict | None, together: bool = True) -> tuple[tuple[str, ...], str]:
    """The runs' speed flags and why: see RunArgs.speed (``together=False``: auto among the one-by-one paths)."""
    if mode == "together":
        failed = stacked_checks_failed(bench)
        if failed:  # the runs go one by one, on the path --speed auto would take
            flags, why = choose_speed("auto", bench, together=False)
            return flags, f"{why}; not together: the stacked update's self-test did not pass ({', '.join(failed)})"
        return GRAPH_FLAGS, "runs trained together, one graphed stacked update per group (--speed together)"
    if mode == "default":
        return (), "default (--speed default)"
    if mode == "graphs":
        return GRAPH_FLAGS, "CUDA graphs (--speed graphs)"
    if together and (why := auto_together(bench)):
        return GRAPH_FLAGS, why
    if not bench:
        return (), "default: --speed auto without a bench report"
    test = bench.get("selftest", {})
    checks = test.get("checks")
    # each fast path by its own check (a report without the list: its one verdict, for graphs)
    passed = ({c.get("path") for c in checks if c.get("passed")} if checks is not None
              else ({"graphs"} if test.get("passed") else set()))
    failed = {c.get("path") for c in checks if not c.get("passed")} if checks is not None else set()
    passed -= failed  # a path with several checks needs them all
    passed -= {path for path, needs in FAST_PATH_CHECKS.items() if failed & set(needs)}
    if not passed & set(FAST_PATHS):
        return (), "default: the fast path's self-test did not pass (selftest.txt)"
    if checks is not None and any(c.get("path") == REPLAY_CHECK and not c.get("passed") for c in checks):
        # a report from before the check has none: its replay copied without staging, which the runs now do not
        return (), ("default: the GPU replay's staged copies did not pass their self-test (replay_staged in "
                    "selftest.txt), and every fast path keeps its replay on the GPU")
    med = {r.get("name"): r.get("median_ms") for r in bench.get("variants", [])}
    d = med.get("default")
    timed = {name: med[name] for name in FAST_PATHS if name in passed and med.get(name)}
    if timed and d:
        best = min(timed, key=timed.get)
        if timed[best] < d:
            return FAST_PATHS[best], (f"{' '.join(FAST_PATHS[best])}: {timed[best]:.2f} ms per update against the "
                                      f"default's {d:.2f}, its self-test passed")
    return (), f"default: the fast paths timed {timed or 'nothing'} ms per update, the default {d}"


def seconds_per_env_step(cfg) -> float:
    """Seconds of one agent step of ``cfg``'s environment (physics and rendering), over 30 random steps."""
    from rl_curl.env import make

    env = make(cfg.task, seed=0, action_repeat=cfg.action_repeat, frame_stack=cfg.frame_stack,
               image_size=cfg.image_size, camera_id=cfg.camera_id)
    try:
        env.reset(seed=0)
        env.step(env.action_space.sample())
        t = time.perf_counter()
        for _ in range(30):
            env.step(env.action_space.sample())
        return (time.perf_counter() - t) / 30
    finally:
        env.close()


def estimate_seconds(k: int, *, updates: int, ms_per_update: float, cpu_seconds: float, cpus: int,
                     startup: float = 30.0, gpu_share: float = 0.8, group: int = 1,
                     act_seconds: float = 0.0) -> float:
    """Wall seconds for ``k`` runs at once: the longest of one run alone (its updates, then its environment and
    evaluation steps, not overlapped), the GPU's work for all of them (``updates`` each at ``ms_per_update``; runs that
    share the GPU keep it ``gpu_share`` busy) and their CPU work spread over ``cpus``; plus start-up. Runs trained
    together: "alone" is the largest ``group`` of runs that meet at every step, whose updates follow one another
    (``ms_per_update`` is then per run) and whose acting, one pass for the group per step, takes ``act_seconds``."""
    gpu = updates * ms_per_update / 1000
    return startup + max(group * gpu + cpu_seconds + act_seconds, k * gpu / gpu_share, k * cpu_seconds / cpus)


#: GPU memory a training process holds besides its tensors (its CUDA context and cuDNN's workspaces), GiB.
PROCESS_GIB = 1.0
#: The share of the GPU's memory the fitted runs may plan to fill.
MEMORY_SHARE = 0.9


def memory_per_run(cfg, row: dict | None, replay_on_device: bool) -> float | None:
    """Bytes of GPU memory one run of ``cfg`` holds: its update's (the bench row's peak divided by its runs, the
    bench's small replay included) and its frame ring when the replay is on the GPU, at its largest for the
    transitions the run adds (the ring grows as it fills: a cartpole run of 100k environment steps adds 12,500 of a
    capacity of 100,000). None without a measured peak."""
    from rl_curl.replay import FrameReplay

    peak = (row or {}).get("peak_memory_gib")
    if not peak:
        return None
    ring = FrameReplay.estimate_bytes(cfg.replay_capacity, cfg.obs_shape, 1, cfg.frame_stack,
                                      transitions=cfg.agent_steps)["frames_device_peak"]
    return peak * 2**30 / (row.get("runs") or 1) + (ring if replay_on_device else 0)


def memory_fit(n: int, per_run: float, processes, total: float) -> int:
    """The most runs of the first ``n`` whose memory (``per_run`` each, plus :data:`PROCESS_GIB` for each of
    ``processes(k)`` processes) stays within :data:`MEMORY_SHARE` of ``total`` bytes; at least 1."""
    fits = [k for k in range(1, n + 1) if k * per_run + processes(k) * PROCESS_GIB * 2**30 <= MEMORY_SHARE * total]
    return max(fits, default=1)


def gpu_total_bytes() -> float | None:
    """This machine's first GPU's memory in bytes (None without one)."""
    import torch

    return float(torch.cuda.get_device_properties(0).total_memory) if torch.cuda.is_available() else None


def fit_jobs(jobs: list[dict], args: RunArgs, bench: dict | None, speed: tuple[str, ...]) -> tuple[list[dict], dict]:
    """The first runs (seed by seed) that :func:`estimate_seconds` says finish by the deadline, and the estimate
    (runs trained together: from the graphed stacked update's time per run, :func:`stacked_row`)."""
    from rl_curl.config import from_cli

    together = trains_together(args.speed, bench)
    variant = (stacked_row(bench) or {}).get("name", "graphs_stacked") if together else variant_of(speed)
    row = next((r for r in (bench or {}).get("variants", []) if r.get("name") == variant), None)  # its time, memory
    ms = (row or {}).get("ms_per_run_update" if together else "median_ms")
    if not ms:
        return jobs, {"fitted": False, "why": f"no {variant} update time from the bench: every run started"}
    cfg = from_cli(jobs[0]["cmd"][3:]).resolved()
    step_s = seconds_per_env_step(cfg)
    episode = -(-1000 // cfg.action_repeat)
    evaluations = -(-cfg.env_steps // cfg.eval_every)
    cpu = step_s * (cfg.agent_steps + evaluations * cfg.eval_episodes * episode) * 1.25  # acting, replay, Python
    updates = max(0, cfg.agent_steps - cfg.seed_steps)
    cpus = os.cpu_count() or 1
    # runs trained together: the largest group of the first n meets at every step, acting in one pass (the bench's
    # acting row, one pass for its runs) and updating one run after another within the stacked update
    acting = (bench or {}).get("acting") or {}
    act_ms = next((acting[k] for k in ("graphed_ms", "stacked_ms") if isinstance(acting.get(k), (int, float))), 0.0) \
        if together else 0.0  # runs trained together act as one CUDA graph (GRAPH_FLAGS)
    group = ((lambda n: max(len(g) for g in groups_of(jobs[:n], args.together_max))) if together else (lambda n: 1))
    est = {k: estimate_seconds(k, updates=updates, ms_per_update=ms, cpu_seconds=cpu, cpus=cpus, group=group(k),
                               act_seconds=cfg.agent_steps * act_ms / 1000)
           for k in range(1, len(jobs) + 1)}
    k = max([n for n, t in est.items() if t <= args.deadline], default=1)
    info = {"fitted": True, "runs": k, "of": len(jobs), "ms_per_update": ms, "env_seconds_per_agent_step": step_s,
            "cpu_seconds_per_run": round(cpu, 1), "updates_per_run": updates, "cpus": cpus,
            **({"act_ms_per_step_of_a_group": act_ms, "largest_group": group(k)} if together else {}),
            "estimated_seconds": {n: round(t, 1) for n, t in est.items()}}
    # The GPU's memory: every run's update and frame ring (on the GPU under --replay-on-device), and each process's
    # context; runs trained together share their group's process.
    per_run, total = memory_per_run(cfg, row, "--replay-on-device" in speed), gpu_total_bytes()
    if per_run and total:
        processes = ((lambda n: len(groups_of(jobs[:n], args.together_max))) if together else (lambda n: n))
        most = memory_fit(len(jobs), per_run, processes, total)
        info.update(gpu_gib=round(total / 2**30, 1), gib_per_run=round(per_run / 2**30, 2), runs_by_memory=most)
        if most < k:
            info["runs"] = k = most
            if together:
                info["largest_group"] = group(k)
    else:
        info["runs_by_memory"] = "not checked (no GPU, or no peak memory from the bench)"
    return jobs[:k], info


def run_slice(args: RunArgs) -> int:
    check_run_args(args)
    # Absolute: the runs start in the repository's root (python -m rl_curl.train), this process reads their folders
    # from wherever it was started.
    pack = Path(args.pack).resolve()
    work = (Path(args.work) if args.work else Path(os.environ.get("TMPDIR", "/tmp")) / f"table3_gpu_{os.getpid()}"
            ).resolve()
    jobs = slice_commands(args, work / "runs")  # every run's options checked before anything starts
    done, redone = [], []
    results = Path(args.results).resolve()
    if not args.redo and results == DEFAULT_RESULTS.resolve() and not results.exists():
        print(f"[results] {results} does not exist: no finished run to leave out", flush=True)
    elif not args.redo:  # the cells already finished in the results folder are left out
        jobs, done, redone = left_to_run(jobs, results, args.env_steps)
    skip = {cell(d) for d in done}

    def to_run(all_jobs: list[dict]) -> list[dict]:
        return [j for j in all_jobs if cell(j) not in skip]

    if done:
        print(f"[results] {len(done)} of {len(done) + len(jobs)} runs already finished in {args.results} with these "
              "settings, left out: " + ", ".join(f"{d['objective']} s{d['seed']}" for d in done), flush=True)
    for r in redone:
        print(f"[results] {r['task']} {r['objective']} seed {r['seed']} runs again: its finished runs there were made "
              f"with other settings (the run's -> this slice's): {'; '.join(r['runs'])}", flush=True)
    if any(Path(j["out"]).exists() and any(Path(j["out"]).iterdir()) for j in jobs):
        raise ValueError(f"{work / 'runs'} already holds runs: a slice starts its runs afresh; pass another --work")
    pack.mkdir(parents=True, exist_ok=True)
    name = gpu_name()
    commit = code_commit(args.commit)
    bench = run_bench(args, pack, commit) if args.bench else None
    given_deadline = args.deadline
    deadline, shortened = deadline_within(args, time.monotonic() - STARTED)
    if shortened:
        print(f"[deadline] {shortened}", flush=True)
        args = dataclasses.replace(args, deadline=deadline)
    speed, why = choose_speed(args.speed, bench)
    if speed and name == "cpu":  # the flags are taken on the CPU, where they run the default path's eager update
        why += " (on the CPU: eager updates, no CUDA graphs)"
    print(f"[speed] {why}", flush=True)
    unsped = args  # --solo-after's run chooses its own speed
    args = with_speed(args, speed)
    jobs = to_run(slice_commands(args, work / "runs"))
    fit = {"fitted": False, "why": "--fit not given"}
    if not jobs:
        fit = {"fitted": False, "why": "nothing to run"}
    elif args.fit:
        jobs, fit = fit_jobs(jobs, args, bench, speed)
        if fit["fitted"]:
            print(f"[fit] {fit['runs']} of {fit['of']} runs: estimated {fit['estimated_seconds'][fit['runs']]:.0f} s "
                  f"of the {args.deadline:.0f} s deadline ({fit['ms_per_update']} ms per update, "
                  f"{fit['env_seconds_per_agent_step'] * 1000:.1f} ms per environment step, {fit['cpus']} CPUs"
                  + (f"; GPU memory for {fit['runs_by_memory']} at {fit['gib_per_run']} GiB each of "
                     f"{fit['gpu_gib']} GiB" if isinstance(fit.get("runs_by_memory"), int) else "") + ")", flush=True)
        else:
            print(f"[fit] {fit['why']}", flush=True)
    flags = run_flags(len(jobs), os.cpu_count() or 1, together=trains_together(args.speed, bench))
    keys = {cell(j) for j in jobs}
    jobs = [j for j in slice_commands(args, work / "runs", flags) if cell(j) in keys]
    info = {"gpu": name, "gpu_tag": gpu_tag(name), "commit": commit,
            "date": args.date or dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"),
            "runs_together": len(jobs), "host_cpus": os.cpu_count()}
    print(f"slice: {len(jobs)} runs on {name}, commit {info['commit'][:12]}, {info['date']}", flush=True)
    solo = solo_timing(args, work, info) if args.solo_env_steps else None
    started = time.monotonic()
    if jobs:
        runs = run_all(jobs, args.deadline, args.grace, args.poll, "slice",
                       together=trains_together(args.speed, bench), together_max=args.together_max)
    else:
        print(f"[slice] nothing to run: every run of the slice is already finished in {args.results}", flush=True)
        runs = []
    spent = time.monotonic() - started
    rows = pack_runs(runs, args, info, pack)
    pending = {"ran": False, "why": "not yet run: the slice's records are written first"} if args.solo_after else None
    summaries = [read_summary(r.out) if row["finished"] else {} for row, r in zip(rows, runs)]
    throughput = {**info, "deadline": args.deadline, "deadline_given": given_deadline, "finish_by": args.finish_by,
                  "deadline_shortened": shortened, "solo": solo, "alone_after": pending,
                  "speed": {"flags": list(speed), "why": why},
                  "fit": fit, "run_flags": list(flags),
                  "results": {"looked_at": None if args.redo else args.results, "already_finished": done,
                              "redone": redone},
                  "bench": None if bench is None else {
                      "selftest_passed": bench.get("selftest", {}).get("passed"),
                      "selftest_paths": {c.get("path"): c.get("passed")
                                         for c in bench.get("selftest", {}).get("checks", [])},
                      "ms_per_update": {r.get("name"): r.get("median_ms") for r in bench.get("variants", [])}},
                  "together_env_steps_per_second": together_rate(runs),
                  "runs": [{"name": row["name"], "env_steps_reached": row["env_steps_reached"],
                            "finished": row["finished"], "wall_seconds": row["wall_seconds"],
                            "env_steps_per_second": rate(r),
                            # from a finished run's summary.json (GPU memory: its process's; None on a CPU)
                            # thread_cpu_seconds: the CPU time of the thread that trained it (runs trained
                            # together share one interpreter: their sum per step is the group's host work)
                            **{k: summary.get(k) for k in ("time_seconds", "thread_cpu_seconds",
                                                           "gpu_peak_allocated_gib", "gpu_peak_reserved_gib")},
                            "progress": r.samples[::max(1, len(r.samples) // 60)]}
                           for row, r, summary in zip(rows, runs, summaries)]}
    text = write_records(pack, throughput, rows, bench, args)
    if args.solo_after:  # the records above stay if this process is stopped during the run alone
        throughput["alone_after"] = solo_after(unsped, work, bench, args.deadline - spent)
        text = write_records(pack, throughput, rows, bench, args)
    print(text, flush=True)
    crashed = [row for row in rows if not row["finished"] and not row["stopped_at_deadline"]]
    return 1 if crashed else 0


def write_records(pack: Path, throughput: dict, rows: list[dict], bench: dict | None, args: RunArgs) -> str:
    """The slice's throughput.json and slice.txt (the text, returned) into the pack."""
    (pack / "throughput.json").write_text(json.dumps(throughput, indent=1) + "\n")
    solo, alone, fit = throughput["solo"], throughput["alone_after"], throughput["fit"]
    done = throughput["results"]["already_finished"]
    lines = [f"slice of {throughput['date']} on {throughput['gpu']} (commit {throughput['commit'][:12]}), "
             f"{len(rows)} runs together, deadline {args.deadline:.0f} s; updates: {throughput['speed']['why']}"]
    if bench is not None:
        lines.append("bench: self-test " + ("passed" if bench.get("selftest", {}).get("passed") else "FAILED")
                     + "; ms per update at batch " + str(bench.get("batch")) + ": "
                     + ", ".join(f"{r.get('name')} {r.get('median_ms')}" for r in bench.get("variants", [])))
    if fit.get("fitted"):
        lines.append(f"fit: {fit['runs']} of {fit['of']} runs, estimated {fit['estimated_seconds'][fit['runs']]:.0f} s")
    if solo and solo.get("finished"):
        lines.append(f"alone: {solo['env_steps_per_second']} env steps/s over {solo['env_steps']} steps; seconds per "
                     f"part: {json.dumps(solo['time_seconds'])}")
    elif solo:
        lines.append(f"alone: the solo run did not finish (exit {solo['exit_code']}; throughput.json has its log)")
    if alone is not None:
        lines.append(alone_line(alone))
    if done:
        lines.append(f"already finished in {args.results}, left out: "
                     + ", ".join(f"{d['task']} {d['objective']} seed {d['seed']} ({d['run']})" for d in done))
    rate = throughput["together_env_steps_per_second"]
    lines.append(f"together: {rate} env steps/s in all" if rate is not None else
                 "together: not measured (fewer than two progress polls while every run was running: runs this "
                 "short end between polls)")
    memory = {r["name"]: r.get("gpu_peak_reserved_gib") for r in throughput["runs"]}
    for row in rows:
        state = ("finished" if row["finished"] else
                 f"UNFINISHED (reached {row['env_steps_reached']}, exit {row['exit_code']})")
        score = f", final eval {row['final_eval_return']:.2f}" if row["finished"] else ""
        held = f", GPU memory {memory[row['name']]} GiB at most" if memory.get(row["name"]) is not None else ""
        lines.append(f"  {row['name']}: {state} in {row['wall_seconds']:.0f} s{score}{held}")
    text = "\n".join(lines)
    (pack / "slice.txt").write_text(text + "\n")
    return text


# ------------------------------------------------------------------------------------------- import, tabulate
def import_slice(args: ImportArgs) -> int:
    from paper_tables.table3_slices import check_report_files, import_slice_pack, write_report

    into = Path(args.into)
    if args.tabulate and into.is_dir():
        check_report_files(into)  # a table or curves.png tabulate would refuse to replace: say so before importing
    new, records = import_slice_pack(args.pack, into, args.label)
    print(f"imported {len(new)} run folder(s) into {into}" + (": " + ", ".join(p.name for p in new) if new else ""))
    if records:
        print(f"kept {len(records)} record(s) under {into / 'slices'}: " + ", ".join(p.name for p in records))
    if args.tabulate and new:
        md, png = write_report(into)
        print(f"wrote {md} and {png}")
    return 0


def tabulate(args: TabulateArgs) -> int:
    from paper_tables.table3_slices import write_report

    if args.env_step < 1:
        raise ValueError(f"--env-step must be >= 1, got {args.env_step}")
    md, png = write_report(Path(args.results), args.env_step)
    print(md.read_text())
    print(f"wrote {md} and {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from shared_losses.training.cli import parse_subcommands

    cmd = parse_subcommands({"run": RunArgs, "import": ImportArgs, "tabulate": TabulateArgs}, args=argv,
                            description=__doc__)
    if isinstance(cmd, RunArgs):
        return run_slice(cmd)
    if isinstance(cmd, ImportArgs):
        return import_slice(cmd)
    return tabulate(cmd)


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
