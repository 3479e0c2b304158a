"""The grid runner's Slurm backend (``--backend slurm``): one Slurm job per run of a grid, submitted with submitit
(``pip install -e ".[cluster]"``) from a login node, each job running the run's own command line as the local pool
and Ray do (:func:`shared_losses.training.sweep.execute`).

* Time limits and preemption: every job asks Slurm for a warning (``--signal=USR2@120``) before its ``--slurm-time``
  runs out or it is preempted. The run's command gets it (from Slurm, which signals every process of the job step,
  and from the job itself), stops after its step with a checkpoint (our trainers take SIGUSR1 / SIGUSR2 as they take
  SIGTERM), and the job is requeued; the requeued job starts the same command, which continues from that checkpoint.
  A run longer than one job's time limit therefore runs as a chain of jobs. Timeouts count against
  ``--slurm-requeues``; preemptions do not. A preemption announced with SIGTERM instead (``PreemptMode=REQUEUE``
  with a grace time) stops the run with its checkpoint (exit 130) and Slurm puts the same job back in its queue: the
  grid sees it there (:func:`requeued`) and waits for it, which continues the run.
* Lost jobs (a node failure, a job killed for memory) and runs killed by a signal are submitted again, up to
  ``--retries`` times, as with the other backends.
* ``--slurm-detach`` submits the jobs and ends the command (status 0), with nothing left waiting on the login node;
  the same command started again judges each run by its last job (:data:`JOBS_FILE`, submitit's result file):
  queued, done, failed, or submitted again (:func:`detach`), by the rules of the waiting grid.
* ``--slurm-local`` runs the same jobs through submitit's local executor on this machine (no Slurm needed), with the
  same pickled jobs, time limit, warning and requeue: a way to try a grid's Slurm options before a cluster.

submitit's own files (the sbatch scripts, each job's stdout / stderr, pickled results) and the record of the jobs go
to ``slurm/`` in the folder that holds the grid's run logs, the one its first start had: a later start, with fewer
unfinished runs, keeps it (:func:`grid_folder`), and finds a run's job recorded lower down by earlier versions
(:func:`last_jobs`). Each run's output goes to its log as with the other backends.
"""

from __future__ import annotations

import contextlib
import datetime
import getpass
import hashlib
import json
import math
import pickle
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import submitit
from submitit.helpers import Checkpointable, DelayedSubmission

from .processes import (STOPPED, GridDetached, GridInterrupted, SweepError, _local_python, _retry_worthy, _start,
                        wait_for)
from .runtime import write_json_atomic

#: Seconds of warning before a job's time limit (Slurm's ``--signal=USR2@SECONDS``): the run's step, its checkpoint
#: and the exit must fit in it.
WARNING_S = 120
#: sbatch options the backend sets itself (from the grid's own options); ``--slurm-option`` may not set them.
OWN_OPTIONS = {"partition": "--slurm-partition", "time": "--slurm-time", "cpus-per-task": "--cpus-per-run",
               "gpus-per-node": "--gpus-per-run", "gpus": "--gpus-per-run", "signal": "(the warning before the time "
               "limit)", "output": "(submitit's log files)", "error": "(submitit's log files)",
               "job-name": "(each run's name)", "nodes": "(one node per run)", "ntasks": "(one task per run)",
               "ntasks-per-node": "(one task per run)", "array": "(one job per run)", "open-mode": "(the logs)"}
#: sbatch options that would break how the grid submits its jobs or continues a run in a chain of jobs; refused.
BREAKING_OPTIONS = {
    "no-requeue": "a job at its time limit or preempted could not be requeued to continue its run (the grid's jobs "
                  "must be requeueable; --slurm-requeues bounds the chain)",
    "wait": "sbatch would wait for each job to end before the next one is submitted",
    "parsable": "sbatch would answer without the 'Submitted batch job N' line the job's id is read from",
    "test-only": "sbatch would submit nothing",
}
#: sbatch's one-letter options, by their long names. ``--slurm-option`` writes every name as a long option
#: (``--NAME=VALUE``), so a one-letter name is refused, naming its long one.
SHORT_OPTIONS = {"A": "account", "B": "extra-node-info", "C": "constraint", "D": "chdir", "F": "nodefile",
                 "G": "gpus", "H": "hold", "J": "job-name", "L": "licenses", "M": "clusters", "N": "nodes",
                 "O": "overcommit", "Q": "quiet", "S": "core-spec", "V": "version", "W": "wait", "a": "array",
                 "b": "begin", "c": "cpus-per-task", "d": "dependency", "e": "error", "h": "help", "i": "input",
                 "k": "no-kill", "m": "distribution", "n": "ntasks", "o": "output", "p": "partition", "q": "qos",
                 "s": "oversubscribe", "t": "time", "v": "verbose", "w": "nodelist", "x": "exclude"}
#: sbatch options that take no value, among those the grid lets through.
FLAG_OPTIONS = ("requeue",)


class SlurmRun(Checkpointable):
    """What a Slurm job runs: one run's command, to its end (its exit code is the job's result). On the scheduler's
    warning (:meth:`checkpoint`, called by submitit in the job), the run is asked to stop with a checkpoint and the
    job requeued with the same command, which continues from it."""

    def __init__(self, grace_s: float):
        self.grace_s = grace_s
        self._proc: subprocess.Popen | None = None

    def __getstate__(self) -> dict:  # the process of one job is not the next job's
        return {"grace_s": self.grace_s, "_proc": None}

    def __call__(self, cmd: list[str], log: str, cwd, env: dict, launcher_python: str = "") -> int:
        self._proc = _start(_local_python(cmd, launcher_python), log, cwd, env)
        return wait_for(self._proc)  # interrupted by a cancel, or by the requeue after checkpoint()

    def checkpoint(self, *args, **kwargs) -> DelayedSubmission:
        """The job is about to end (time limit or preemption): ask the run to stop after its step with a checkpoint
        (SIGUSR2; Slurm may have sent it the same signal already, which is one request), wait for it, then let
        submitit requeue the same command, which continues from that checkpoint.

        submitit calls this from its signal handler, which interrupts :meth:`__call__`'s ``proc.wait()`` while that
        holds the Popen's wait lock: the run's end is watched here without reaping it (``waitid`` with
        ``WNOWAIT``), which needs no lock."""
        proc = self._proc
        if proc is not None and not _exited(proc):
            os.kill(proc.pid, signal.SIGUSR2)
            end = time.monotonic() + self.grace_s
            while not _exited(proc) and time.monotonic() < end:
                time.sleep(0.2)
            if not _exited(proc):  # it would be killed with the job: its last checkpoint stands
                os.kill(proc.pid, signal.SIGKILL)
                while not _exited(proc):
                    time.sleep(0.05)
        return DelayedSubmission(type(self)(self.grace_s), *args, **kwargs)


def _exited(proc: subprocess.Popen) -> bool:
    """Whether the run's process has ended, without reaping it."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:  # reaped already
        return True


def check(options) -> None:
    """Refuse, before anything is submitted, what Slurm cannot do with the grid's options (one line each)."""
    if options.gpus_per_run != int(options.gpus_per_run):
        raise SweepError(f"--gpus-per-run {options.gpus_per_run:g}: Slurm gives a job whole GPUs; use "
                         f"{max(1, math.ceil(options.gpus_per_run))} (to share GPUs, start Ray in one allocation "
                         "and use --backend ray there)")
    if options.cpus_per_run != int(options.cpus_per_run):
        raise SweepError(f"--cpus-per-run {options.cpus_per_run:g}: Slurm gives a job whole CPUs")
    if options.slurm_time < 5:
        raise SweepError(f"--slurm-time {options.slurm_time}: a job needs at least 5 minutes (the run is warned "
                         f"{WARNING_S} s before the limit to write its checkpoint)")
    if options.slurm_requeues < 0:
        raise SweepError(f"--slurm-requeues {options.slurm_requeues}: must be 0 or more")
    if options.slurm_resubmit and not options.slurm_detach:
        raise SweepError("--slurm-resubmit goes with --slurm-detach: a grid that waits for its jobs submits its "
                         "failed runs again whenever it is started")
    if options.slurm_detach and options.slurm_local:
        raise SweepError("--slurm-detach with --slurm-local: the local executor's jobs are this command's own "
                         "processes and end with it; leave out --slurm-detach to wait for them here")
    extra_options(options.slurm_option)
    if not options.slurm_local and (shutil.which("sbatch") is None or shutil.which("srun") is None):
        raise SweepError("--backend slurm: sbatch / srun are not on this machine's PATH; start the grid on a login "
                         "node of the Slurm cluster (or add --slurm-local to try the jobs on this machine)")


def extra_options(items: Sequence[str]) -> dict[str, str]:
    """``--slurm-option KEY=VALUE ...`` as sbatch options (``account=proj``, ``qos=high``, ``mem=32G``,
    ``constraint=a100``; ``exclusive`` alone: a flag), each written as ``#SBATCH --KEY=VALUE``. Refused, in one line
    naming the grid's own option to use: any spelling sbatch would take for an option the backend sets itself
    (:data:`OWN_OPTIONS`: the name, the start of it, which sbatch takes for the whole name, or its one-letter form)
    or for one that breaks the grid (:data:`BREAKING_OPTIONS`: ``no-requeue`` would end a run's chain of jobs at the
    first time limit); a one-letter name (sbatch's short option: the long name is asked for); a name with capitals
    (sbatch's names are all lower case, and case-sensitive: ``Time`` is no option of sbatch)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if any(ch.isspace() for ch in value.strip()):  # "mem=4G qos=x": one #SBATCH line that sbatch misreads
            raise SweepError(f"--slurm-option {item!r}: a space in the value; give one KEY=VALUE per --slurm-option "
                             "(--slurm-option mem=4G --slurm-option qos=high)")
        key = key.strip().lstrip("-")
        if not key or (sep and not value.strip()):
            raise SweepError(f"--slurm-option {item!r}: expected KEY=VALUE (account=myproject, qos=high, mem=32G) "
                             "or a flag's name (exclusive)")
        key = key.replace("_", "-")
        problem = _refused_option(key, value.strip() if sep else None)
        if problem:
            raise SweepError(f"--slurm-option {item!r}: {problem}")
        out[key] = value.strip() if sep else True
    return out


def _why_refused(name: str) -> str:
    """Why the sbatch option ``name`` (a key of :data:`OWN_OPTIONS` or :data:`BREAKING_OPTIONS`) is refused."""
    if name in OWN_OPTIONS:
        return f"set by the grid itself, {OWN_OPTIONS[name]}"
    return f"refused: {BREAKING_OPTIONS[name]}"


def _refused_option(key: str, value: str | None) -> str:
    """Why ``--slurm-option KEY[=VALUE]`` is refused (words after the item), or "" when it is let through to sbatch
    (which refuses, at the first submission, a name it does not know)."""
    refused = [*OWN_OPTIONS, *BREAKING_OPTIONS]
    if len(key) == 1:  # written as --K=VALUE, which sbatch would read as the start of some long name, not as -K
        long = SHORT_OPTIONS.get(key)
        if long in refused:
            return f"{key} is sbatch's -{key}, --{long}, {_why_refused(long)}"
        if long:
            return (f"{key} is sbatch's -{key}: --slurm-option takes sbatch's long names, here "
                    f"{long}{'=' + value if value is not None else ''}")
        return f"{key} is no option of sbatch (--slurm-option takes sbatch's long names: account=..., qos=...)"
    if not re.fullmatch(r"[a-z0-9-]+", key):  # sbatch's long names: lower case (read case-sensitively), - and x11
        lower = key.lower()
        if not re.fullmatch(r"[a-z0-9-]+", lower):
            return f"{key} is no option of sbatch (its names are lower-case words joined by -: mail-type, qos)"
        hint = _refused_option(lower, value)
        return (f"sbatch's option names are lower case ({key} is none of them); "
                + (f"and {hint}" if hint else f"did you mean {lower}?"))
    if key in refused:
        return f"{key} is {_why_refused(key)}"
    taken = [name for name in refused if name.startswith(key)]  # sbatch takes the start of a long name for it
    if taken:
        return (f"{key} is the start of " + " or ".join(f"--{name} ({_why_refused(name)})" for name in taken)
                + ", and sbatch takes the start of an option's name for the option")
    if key in FLAG_OPTIONS and value is not None:
        return f"{key} is a flag, without a value (write {key} alone)"
    return ""


def executor(options, folder: Path):
    """The submitit executor of a grid's jobs: sbatch on a Slurm cluster, or submitit's local executor
    (``--slurm-local``). Each job: one task on one node, the run's CPUs and GPUs, ``--slurm-time`` minutes, the
    warning :data:`WARNING_S` seconds before the end."""
    if options.slurm_local:
        ignored = [name for name, given in (("--slurm-partition", options.slurm_partition),
                                            ("--slurm-option", options.slurm_option)) if given]
        print("--slurm-local: every job starts at once on this machine (submitit's local executor takes no queue, "
              "partition or CPU count)" + (f"; {' and '.join(ignored)} checked, not applied" if ignored else ""),
              flush=True)
        ex = submitit.LocalExecutor(folder=folder / "%j", max_num_timeout=options.slurm_requeues)
        ex.update_parameters(timeout_min=options.slurm_time, signal_delay_s=WARNING_S, tasks_per_node=1,
                             gpus_per_node=int(options.gpus_per_run))
        return ex
    ex = submitit.SlurmExecutor(folder=folder / "%j", max_num_timeout=options.slurm_requeues)
    params = dict(time=int(options.slurm_time), nodes=1, ntasks_per_node=1, cpus_per_task=int(options.cpus_per_run),
                  signal_delay_s=WARNING_S, additional_parameters=extra_options(options.slurm_option))
    if options.gpus_per_run:
        params["gpus_per_node"] = int(options.gpus_per_run)
    if options.slurm_partition:
        params["partition"] = options.slurm_partition
    ex.update_parameters(**params)
    return ex


def job_name(run) -> str:
    """A run's Slurm job name: the run's name (its last 100 characters, spaces and the like as ``_``) and a short
    digest of its log's path, which is the grid's folder: the same run of the same grid has the same name in every
    start of the grid, and runs of two grids with the same labels (two --out folders) have different ones."""
    digest = hashlib.sha1(str(Path(run.log).resolve()).encode()).hexdigest()[:8]
    plain = re.sub(r"[^\w%+=:,./-]", "_", run.name[-100:])  # nothing to quote in the sbatch line, nothing for squeue
    return f"{plain}@{digest}"


def queued_jobs() -> dict[str, str]:
    """This user's jobs in Slurm's queue (pending or running): {job name: job id}, from ``squeue``. Empty, with a
    warning, where squeue does not answer."""
    try:
        res = subprocess.run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i|%j"], capture_output=True, text=True,
                             timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        print(f"warning: squeue did not answer ({err}); runs already queued by an earlier start of this grid are "
              "submitted again (a second job on a run that still trains stops at once)", flush=True)
        return {}
    if res.returncode != 0:
        print(f"warning: squeue failed ({res.stderr.strip().splitlines()[-1:] or res.returncode}); runs already "
              "queued by an earlier start of this grid are submitted again", flush=True)
        return {}
    jobs = {}
    for line in res.stdout.splitlines():
        job_id, sep, name = line.strip().partition("|")
        if sep and job_id:
            jobs[name] = job_id
    return jobs


#: Seconds a grid that waits gives Slurm to put a job back in its queue after the job's run ended asked to stop (exit
#: 130) while the grid itself was not stopped: a preemption announced with SIGTERM (PreemptMode=REQUEUE) stops the run
#: with its checkpoint and requeues the same job, which continues it. And how often it asks squeue meanwhile.
REQUEUE_WAIT_S = 60.0
REQUEUE_POLL_S = 5.0
#: squeue states of a job that Slurm has put back in its queue or started again, and of one that has ended for good.
_QUEUED_AGAIN = ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "CONFIGURING")
_ENDED = ("CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE")


def _squeue_job(job_id: str) -> tuple[str, float | None] | None:
    """(state, start time as a timestamp, None where squeue gives none) of the job in Slurm's queue; None when it is
    not there or squeue does not answer."""
    try:
        res = subprocess.run(["squeue", "-h", "-j", str(job_id), "-o", "%T|%S"], capture_output=True, text=True,
                             timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        return None
    state, _, start = lines[0].strip().partition("|")
    try:
        when = datetime.datetime.fromisoformat(start.strip()).timestamp()
    except ValueError:  # N/A, Unknown
        when = None
    return state.strip().upper(), when


def requeued(job) -> bool:
    """Whether Slurm put ``job`` back in its queue after its run ended asked to stop: the job is pending again, or
    running since after its result was written, within :data:`REQUEUE_WAIT_S`. Then the result (the stopped run's
    exit 130, which submitit would keep reading as the job's) is removed, so that the job is waited for again. A job
    gone from the queue, or there in a state that ends it (cancelled), is answered at once: a grid whose jobs were
    cancelled together does not wait a minute for each."""
    result = Path(job.paths.result_pickle)
    try:
        written = result.stat().st_mtime
    except FileNotFoundError:
        return False
    deadline = time.monotonic() + REQUEUE_WAIT_S
    while True:
        seen = _squeue_job(job.job_id)
        if seen is None:  # not in the queue (or squeue does not answer): a requeued job stays in it
            return False
        state, start = seen
        if state in _QUEUED_AGAIN or (state == "RUNNING" and start is not None and start >= written):
            result.unlink(missing_ok=True)
            return True
        if state in _ENDED or time.monotonic() >= deadline:
            return False
        time.sleep(REQUEUE_POLL_S)


def submit_or_attach(runs, options, ex, folder: Path) -> dict:
    """A job for every run: a job of this grid still in Slurm's queue (an earlier start of the grid that stopped: a
    closed terminal, a driver job at its time limit) is waited for instead of submitted again; the other runs are
    submitted. {run index: submitit job}."""
    live = {} if options.slurm_local else queued_jobs()
    last = last_jobs(runs, folder) if live else {}
    pending = {}
    for i, r in enumerate(runs):
        name = job_name(r)
        if name in live:
            where = _job_folder(live[name], last.get(name), runs, folder)
            pending[i] = submitit.SlurmJob(folder=where / "%j", job_id=live[name])
            print(f"{r.name}: already in Slurm's queue as job {live[name]} (an earlier start of this grid); waiting "
                  "for it", flush=True)
        else:
            pending[i] = submit(ex, r)
    return pending


def submit(ex, run, retries: int = 0):
    """Submit one run's job; its id goes into the grid's record of jobs (:func:`recorded_jobs`), with ``retries``:
    how many of the jobs before it, running the same command, were lost or had their run killed (``--slurm-detach``
    counts them against ``--retries``)."""
    name = job_name(run)
    ex.update_parameters(job_name=name)
    job = ex.submit(SlurmRun(grace_s=max(5, WARNING_S - 20)), run.cmd, str(run.log), run.cwd, run.env,
                    sys.executable)
    _record(Path(str(ex.folder)).parent, name, {"job": str(job.job_id), "command": _command_digest(run),
                                                 "retries": retries})
    return job


#: The grid's record of its jobs, in its slurm/ folder: {job name: {"job": the run's last job id, "command": a digest
#: of the command that job ran, "retries": the jobs before it for that command that were lost or had their run killed,
#: and "folder": the slurm/ folder of the job's files where it is not this one (a job recorded by earlier versions in
#: another place, :func:`gather`)}}.
JOBS_FILE = "jobs.json"


def _command_digest(run) -> str:
    return hashlib.sha1(json.dumps([list(map(str, run.cmd)), str(run.cwd)]).encode()).hexdigest()[:16]


def recorded_jobs(folder: Path) -> dict[str, dict]:
    """The grid's record of its jobs (:data:`JOBS_FILE`; empty before the first submission or when the file cannot
    be read)."""
    try:
        jobs = json.loads((folder / JOBS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in jobs.items() if isinstance(v, dict) and "job" in v} if isinstance(jobs, dict) else {}


def _record(folder: Path, name: str, entry: dict) -> None:
    write_json_atomic(folder / JOBS_FILE, {**recorded_jobs(folder), name: entry})


def grid_folder(runs) -> Path:
    """The grid's ``slurm/`` folder: its record of jobs (:data:`JOBS_FILE`) and submitit's files. The same in every
    start of the grid, whichever of its runs are still unfinished: the highest ``slurm/`` folder, in the folder that
    holds the runs' logs or one above it, whose record has a job of one of these runs (written by an earlier start,
    when more runs were unfinished and their common folder higher up); else, on the grid's first start, ``slurm/`` in
    the folder that holds the runs' logs. (A record is the grid's only if it names its runs' jobs: job names carry a
    digest of each run's log path, :func:`job_name`; a record of another grid above this one is left alone.)"""
    common = Path(_common_folder([r.log for r in runs]))
    above = {common / "slurm", *(folder / "slurm" for folder in common.parents)}
    names = {job_name(r) for r in runs}
    for folder in _record_folders(runs):  # highest first
        if folder in above and names & recorded_jobs(folder).keys():
            return folder
    return common / "slurm"


def _record_folders(runs, *more: Path) -> list[Path]:
    """Every ``slurm/`` folder holding a record of jobs (:data:`JOBS_FILE`) beside a run's log or in a folder above
    it, and those of ``more`` that hold one; highest first. Starts of the grid record its runs' jobs there: the
    record's place (:func:`grid_folder`) rises when a start has more unfinished runs than the one before (a task
    added), and earlier versions of the backend put it in the folder of the logs of the runs then unfinished, lower
    down once some had finished; either way a record of a run's job is on the way up from its log."""
    places: set[Path] = {Path(folder).resolve() for folder in more}
    for r in runs:
        here = Path(r.log).resolve().parent
        places.update(folder / "slurm" for folder in (here, *here.parents))
    return sorted((p for p in places if (p / JOBS_FILE).is_file()), key=lambda p: (len(p.parts), str(p)))


def last_jobs(runs, folder: Path | None = None) -> dict[str, tuple[Path, dict]]:
    """Each run's last job, from the grid's records (:func:`_record_folders`, and ``folder``'s): {job name: (the
    ``slurm/`` folder of that job's files, its entry in the record)}. A run recorded in more than one place (by
    earlier versions, which moved the record as runs finished; or before :func:`gather`) is judged by its job
    submitted last."""
    names = {job_name(r) for r in runs}
    best: dict[str, tuple[tuple[float, int], Path, dict]] = {}
    for place in _record_folders(runs, *([folder] if folder is not None else [])):
        for name, entry in recorded_jobs(place).items():
            if name in names:
                files = Path(entry["folder"]) if isinstance(entry.get("folder"), str) else place
                order = (_submitted_at(files, entry["job"]), -len(place.parts))  # then the higher record
                if name not in best or order > best[name][0]:
                    best[name] = (order, files, entry)
    return {name: (files, entry) for name, (_, files, entry) in best.items()}


def gather(runs, folder: Path) -> None:
    """Copy into the grid's record (in ``folder``, :func:`grid_folder`) each run's last job recorded in another place
    (:func:`last_jobs`), with the folder of its files (``"folder"``): the next start, whichever runs it has left,
    finds the grid's record here and every run's last job in it."""
    record = recorded_jobs(folder)
    here = Path(folder).resolve()
    moved = {}
    for name, (files, entry) in last_jobs(runs, folder).items():
        entry = {k: v for k, v in entry.items() if k != "folder"}
        if files.resolve() != here:
            entry["folder"] = str(files)
        if record.get(name) != entry:
            moved[name] = entry
    if moved:
        write_json_atomic(Path(folder) / JOBS_FILE, {**record, **moved})


def _submitted_at(folder: Path, job_id) -> float:
    """When submitit last wrote the job's pickled submission (at the submission, and at each requeue from its
    checkpoint): a run's jobs do not overlap, so its later job has the later time. -inf when it is gone."""
    try:
        return (folder / str(job_id) / f"{job_id}_submitted.pkl").stat().st_mtime
    except (OSError, ValueError):
        return -math.inf


def _job_folder(job_id: str, last: tuple[Path, dict] | None, runs, default: Path) -> Path:
    """The ``slurm/`` folder of a job still in Slurm's queue: that of the run's record naming it, else the one of the
    grid's records that holds its files, else ``default``."""
    if last is not None and str(last[1]["job"]) == str(job_id):
        return last[0]
    for place in _record_folders(runs):
        if (place / str(job_id)).is_dir():
            return place
    return default


def job_result(folder: Path, job_id: str) -> tuple[int | None, str]:
    """How the job ``job_id`` ended, from the result submitit's job left in ``folder`` (read without asking Slurm):
    (its run's exit code, or None when the job has none, words for the user). No result: the job is lost (a node
    failure, killed for memory or at its time limit too often, cancelled), or failed in submitit's own code."""
    path = folder / str(job_id) / f"{job_id}_0_result.pkl"
    try:
        with open(path, "rb") as fh:
            kind, value = pickle.load(fh)
    except FileNotFoundError:
        return None, f"ended without a result (lost, cancelled, or out of requeues: see {folder / str(job_id)})"
    except Exception as err:  # noqa: BLE001 - a result file we cannot read is reported, not raised
        return None, f"left a result that cannot be read ({type(err).__name__}: {err})"
    if kind == "success" and isinstance(value, int):
        return value, f"ended with exit {value}" + (" (the run failed: see its log)" if value else "")
    lines = str(value).strip().splitlines()
    return None, f"failed in the job ({lines[-1] if lines else kind})"


def detach(runs, options, ex, folder: Path, progress, on_finish) -> list[int]:
    """``--slurm-detach``: each run by its last job (:data:`JOBS_FILE`), by the rules of the grid that waits
    (:func:`run_jobs`): still in Slurm's queue, it is left to it; ended with exit 0 running the same command, the run
    is done; its run failed (an exit code other than 0 and 130), or the job was lost or its run killed more than
    ``--retries`` times, the run has failed: it is reported with its exit code and log and not submitted again (with
    ``--slurm-resubmit`` it is); otherwise (no job yet, another command, a lost job or killed run within
    ``--retries``, a run asked to stop) a job is submitted, saying how the last one ended. Where any job is queued or
    submitted, the command ends (:class:`GridDetached`); else the exit codes, in the runs' order (the failed runs'
    among them: the grid goes on without them, as the waiting grid does)."""
    live = queued_jobs()
    record = last_jobs(runs, folder)
    codes: dict[int, int] = {}
    queued = submitted = failed = 0

    def ended(i: int, run, code: int) -> None:  # the run's last job settled it: done or failed
        codes[i] = code
        progress.started()
        progress.finished(run, code)
        if on_finish is not None:
            on_finish(run, code)

    for i, r in enumerate(runs):
        name = job_name(r)
        if name in live:
            queued += 1
            print(f"{r.name}: in Slurm's queue as job {live[name]} (pending or running)", flush=True)
            continue
        place, last = record.get(name, (folder, None))
        was, retries = "", 0
        if last is not None:
            rc, how = job_result(place, last["job"])
            same = last.get("command") == _command_digest(r)
            done_before = last.get("retries", 0) if isinstance(last.get("retries", 0), int) else 0
            lost = rc is None or _retry_worthy(rc)
            retries = done_before + lost if same and not options.slurm_resubmit else 0
            run_failed = not lost and rc not in (0, STOPPED)
            if same and not options.slurm_resubmit and (run_failed or (lost and retries > options.retries)):
                code = -1 if rc is None else rc
                spent = f" (lost or killed {retries} time(s); --retries {options.retries})" if lost else ""
                print(f"{r.name}: its last job {last['job']} {how}{spent}; not submitted again (once the cause is "
                      "mended, start the command with --slurm-resubmit to submit it again)", flush=True)
                failed += 1
                ended(i, r, code)
                continue
            if same and rc == 0:
                ended(i, r, 0)
                continue
            was = f"its last job {last['job']} {how}; "
        job = submit(ex, r, retries)
        submitted += 1
        print(f"{r.name}: {was}submitted as job {job.job_id} (log: {r.log})", flush=True)
    if queued or submitted:
        gave_up = (f" {failed} run(s) failed and were not submitted again (above; --slurm-resubmit submits them)."
                   if failed else "")
        raise GridDetached(
            f"{queued + submitted} unfinished run(s): {submitted} job(s) submitted, {queued} still in Slurm's queue."
            f"{gave_up} This command ends without waiting for them (--slurm-detach). Start it again with the same "
            "options to see how far the grid is: it submits again what a lost job or a stopped run left unfinished "
            "and, once every run has finished or failed, goes on (the next stage, the results). "
            f"squeue -u {getpass.getuser()} lists the jobs; their record: {folder / JOBS_FILE}.")
    return [codes[i] for i in range(len(runs))]


#: Seconds a stopped --slurm-local grid waits for its cancelled jobs (their runs write checkpoints) before it ends.
LOCAL_STOP_WAIT_S = 60.0


def run_jobs(runs, options, progress, on_finish, poll_s: float = 2.0) -> list[int]:
    """Submit one job per run (or wait for the grid's job already queued for it, :func:`submit_or_attach`) and wait
    for them all; their exit codes in the runs' order. A lost job (no result: node failure, killed for memory, timed
    out more than --slurm-requeues times) or a run killed by a signal is submitted again up to --retries times.
    Ctrl-C here cancels the grid's jobs still queued or running (each run writes its checkpoint on the cancel's
    SIGTERM); SIGTERM or SIGHUP (a driver job at its time limit, a closed terminal: ``processes.GridSignals``)
    leave them running, and starting the grid again waits for them; with ``--slurm-local`` (the jobs are this
    command's processes) every stop cancels them and waits for their runs' checkpoints. Either way
    :class:`GridInterrupted` says so."""
    folder = grid_folder(runs)  # the same in each start of the grid, whichever runs are still to do
    gather(runs, folder)
    ex = executor(options, folder)
    if options.slurm_detach:
        return detach(runs, options, ex, folder, progress, on_finish)
    try:
        return _wait_for_jobs(runs, options, ex, folder, progress, on_finish, poll_s)
    finally:
        if options.slurm_local:  # its jobs' controllers make the folder template itself (".../%j"), and leave it empty
            with contextlib.suppress(OSError):
                (folder / "%j").rmdir()


def _wait_for_jobs(runs, options, ex, folder: Path, progress, on_finish, poll_s: float) -> list[int]:
    """:func:`run_jobs` once its executor is made: submit (or attach to) every run's job and wait for them."""
    attempts = [0] * len(runs)
    pending = submit_or_attach(runs, options, ex, folder)
    for _ in runs:
        progress.started()
    codes: dict[int, int] = {}
    try:
        while pending:
            finished = [i for i, job in pending.items() if job.done()]
            if not finished:
                time.sleep(poll_s)
                continue
            for i in finished:
                job = pending[i]
                try:
                    rc = int(job.result())
                    why = f"exit {rc}"
                except Exception as err:  # submitit's UncompletedJobError / FailedJobError: the job has no result
                    rc, why = -1, f"job {job.job_id}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
                if (rc == STOPPED and progress.signals.received is None and not options.slurm_local
                        and requeued(job)):  # preempted with SIGTERM: the same job continues the run
                    print(f"{runs[i].name}: its job {job.job_id} was stopped (exit {rc}, after a checkpoint) and "
                          "Slurm put it back in its queue (a preemption); waiting for it", flush=True)
                    continue
                del pending[i]
                if _retry_worthy(rc) and attempts[i] < options.retries:
                    attempts[i] += 1
                    progress.retry(runs[i], why, attempts[i], options.retries)
                    pending[i] = submit(ex, runs[i])
                    continue
                codes[i] = rc
                progress.finished(runs[i], rc)
                if on_finish is not None:
                    on_finish(runs[i], rc)
    except KeyboardInterrupt:
        how = progress.signals.how()
        if progress.signals.received is not None and not options.slurm_local:
            # a kill, a closed terminal, a driver job's end: Slurm's jobs go on (--slurm-local's are this command's
            # own processes, cancelled below: nothing would wait for them, and a new start would find them running)
            raise GridInterrupted(f"stopped ({how}): the grid's {len(pending)} unfinished job(s) stay in Slurm's "
                                  "queue; start the same command again to wait for them") from None
        for job in pending.values():
            try:
                job.cancel(check=False)
            except Exception:  # noqa: BLE001 - cancel what can be cancelled
                pass
        if options.slurm_local:  # wait for the runs' checkpoints, as the local backend does
            end = time.monotonic() + LOCAL_STOP_WAIT_S
            while time.monotonic() < end and not all(job.done() for job in pending.values()):
                time.sleep(0.2)
        raise GridInterrupted(f"stopped ({how}): cancelled the grid's {len(pending)} unfinished job(s), whose runs "
                              "write their checkpoints on the cancel's SIGTERM; start the same command again to "
                              "continue them") from None
    return [codes[i] for i in range(len(runs))]


def _common_folder(paths) -> str:
    parents = [str(Path(p).resolve().parent) for p in paths]
    return os.path.commonpath(parents)
