"""One runner for the paper grids (scripts/curl_table3.py, qt_table2.py, fewshot_table5.py): every run of a
grid is the application's own command line (``python -m rl_curl.train ...``), started on this machine by a
pool of processes (``--backend local``), as one Ray task per run (``--backend ray``; ``pip install -e
".[cluster]"``), on a Ray started here (no ``--address``) or on an existing cluster (``--address auto`` or
``ray://HOST:PORT``), or as one Slurm job per run (``--backend slurm``, from a login node; submitit, in the same
extra; :mod:`shared_losses.training.slurm`: time limits and preemptions end in a checkpoint and a requeued job that
continues from it).

* Resources: each run asks for ``--cpus-per-run`` CPUs and ``--gpus-per-run`` GPUs (a fraction such as 0.5
  shares a GPU); Ray places it and sets ``CUDA_VISIBLE_DEVICES``. The local pool runs ``--parallel`` at once.
* Fault tolerance: a run whose process dies from a signal (kill -9, out of memory) or whose Ray worker or
  node is lost is started again, up to ``--retries`` times. Every command a grid launches continues its run
  from the last checkpoint (the applications' ``--resume``), so a retried run ends as an uninterrupted one
  would. A run that exits with an error code (bad option, refused folder) is not retried.
* Progress: one line per finished run, ``[k/n] done: NAME (in progress r, failed f)`` (with Ray, in progress
  counts the runs waiting for resources too).
* One grid at a time on a folder: :func:`grid_lock` (``run_sweep(..., lock=OUT)``, or held by the grid script
  around its whole start) makes a second grid started on the same ``--out`` while the first still runs stop at once
  in one line, instead of both starting the same runs (each then fails the runs the other is training). It is a lock
  held by the grid's process (``flock``), gone when that process ends however it ends; its runs do not take it.
* On a cluster the grid's paths (the code, the output folder) must be the same on every node: a shared file
  system, or the same checkout and folders on each. Each run starts the Python of the node that runs it when
  the command names the Python of the launching machine (``sys.executable``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import socket
import sys
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, Iterator, Literal, Optional, Sequence

from .cli import field_default
from .processes import SweepError, _local_python, _retry_worthy, _start, execute  # noqa: F401 (the runner's names)
from .processes import STOPPED, GridInterrupted, GridSignals, StopFlag, wait_for

BACKENDS = ("local", "ray", "slurm")


@dataclass
class Run:
    """One run of a grid: the command, where its output goes, and what it needs."""

    name: str
    cmd: list[str]
    log: Path
    cpus: float = 1.0
    gpus: float = 0.0
    env: dict[str, str] = field(default_factory=dict)
    cwd: Optional[str] = None


@dataclass
class SweepOptions:
    """How a grid runs (the same options in the three grid scripts)."""

    backend: Literal["local", "ray", "slurm"] = "local"
    """local: a pool of processes on this machine (--parallel at once); ray: one Ray task per run; slurm: one Slurm
    job per run (submitted from a login node with submitit)."""
    address: Optional[str] = None
    """Ray cluster to send the grid to: auto (the cluster this machine belongs to) or ray://HOST:PORT or
    HOST:PORT; none starts Ray on this machine. Only with --backend ray."""
    parallel: int = 1
    """Runs at once with --backend local (Ray runs as many as the cluster's resources allow); each gets an equal share
    of the CPUs this process may use as its threads (OMP_NUM_THREADS, unless set)."""
    cpus_per_run: float = 1.0
    """CPUs each run asks Ray for."""
    gpus_per_run: float = 0.0
    """GPUs each run asks Ray for (0.5: two runs share one GPU)."""
    retries: int = 2
    """Times a run killed by a signal or a lost worker is started again (it continues from its checkpoint)."""
    slurm_partition: Optional[str] = None
    """Slurm partition of the jobs (--backend slurm); none: the cluster's default."""
    slurm_time: int = 240
    """Minutes each Slurm job may run (--backend slurm). A run that needs longer is warned 120 s before the limit,
    writes its checkpoint and continues in the requeued job."""
    slurm_requeues: int = 10
    """Times one run's job may reach --slurm-time and be requeued to continue (preemptions do not count)."""
    slurm_option: list[str] = field(default_factory=list)
    """More sbatch options, each KEY=VALUE (account=myproject qos=high mem=32G constraint=a100) or a flag's name
    (exclusive)."""
    slurm_detach: bool = False
    """Submit the grid's Slurm jobs and end, without a process that waits for them (--backend slurm). Start the same
    command again to see each run's job, submit again what a lost job or a stopped run left unfinished (a lost job up
    to --retries times), report the runs that failed, and (once every run has finished or failed) build the
    results."""
    slurm_resubmit: bool = False
    """With --slurm-detach: submit again the runs whose last job failed (their run ended with an error, or their jobs
    were lost or killed more than --retries times), which a detached grid otherwise reports as failed and goes on
    without. For when the cause is mended."""
    slurm_local: bool = False
    """Run the Slurm jobs through submitit's local executor on this machine, without Slurm: to try --backend slurm's
    options (time limit, requeue) before a cluster."""

    def validate(self) -> None:
        if self.backend not in BACKENDS:
            raise SweepError(f"--backend {self.backend!r}: choose one of {', '.join(BACKENDS)}")
        if self.address and self.backend != "ray":
            raise SweepError("--address names a Ray cluster: add --backend ray")
        if self.backend != "slurm":
            given = [f"--{f.name.replace('_', '-')}" for f in fields(self)
                     if f.name.startswith("slurm_") and getattr(self, f.name) != field_default(f)]
            if given:
                raise SweepError(f"{', '.join(given)}: Slurm options; add --backend slurm")
        if self.parallel < 1:
            raise SweepError(f"--parallel {self.parallel}: must be at least 1")
        if self.cpus_per_run <= 0 or self.gpus_per_run < 0:
            raise SweepError("--cpus-per-run must be > 0 and --gpus-per-run >= 0")
        if self.retries < 0:
            raise SweepError(f"--retries {self.retries}: must be 0 or more")
        if self.backend == "slurm":
            try:
                from . import slurm
            except ImportError:
                raise SweepError("--backend slurm needs submitit: pip install -e \".[cluster]\" (or --backend local)") \
                    from None
            slurm.check(self)

    def check_cluster(self) -> None:
        """With ``--backend ray --address HOST:PORT``: refuse, in seconds and naming the address, when nothing
        listens there. A grid calls it once it knows it will start runs, before it makes its folder or says what it
        will run (:func:`connect_ray` would find out only then, and retry for minutes)."""
        if self.backend == "ray" and self.address:
            _check_reachable(self.address)

    def describe(self) -> str:
        """Where and how the grid's runs go, for the line a grid script prints before starting them."""
        if self.backend == "local":
            return f"{self.parallel} at a time"
        if self.backend == "ray":
            return f"on Ray, {self.address or 'this machine'}"
        if self.slurm_local:
            return f"as Slurm jobs on this machine (submitit's local executor), {self.slurm_time:g}-minute jobs"
        return (f"as Slurm jobs, partition {self.slurm_partition or '(the default)'}, {self.slurm_time:g}-minute jobs "
                "requeued until their run finishes")


def add_sweep_arguments(parser: argparse.ArgumentParser, parallel: int = 1) -> None:
    """The :class:`SweepOptions` as argparse options (for the scripts that use argparse)."""
    g = parser.add_argument_group("how the grid runs (local pool, Ray or Slurm)")
    doc = {f.name: _field_doc(f.name) for f in fields(SweepOptions)}
    g.add_argument("--backend", choices=BACKENDS, default="local", help=doc["backend"])
    g.add_argument("--address", default=None, help=doc["address"])
    g.add_argument("--parallel", type=int, default=parallel, help=doc["parallel"])
    g.add_argument("--cpus-per-run", type=float, default=1.0, help=doc["cpus_per_run"])
    g.add_argument("--gpus-per-run", type=float, default=0.0, help=doc["gpus_per_run"])
    g.add_argument("--retries", type=int, default=2, help=doc["retries"])
    g.add_argument("--slurm-partition", default=None, help=doc["slurm_partition"])
    g.add_argument("--slurm-time", type=int, default=240, help=doc["slurm_time"])
    g.add_argument("--slurm-requeues", type=int, default=10, help=doc["slurm_requeues"])
    g.add_argument("--slurm-option", nargs="*", default=[], metavar="KEY=VALUE", help=doc["slurm_option"])
    g.add_argument("--slurm-detach", action="store_true", help=doc["slurm_detach"])
    g.add_argument("--slurm-resubmit", action="store_true", help=doc["slurm_resubmit"])
    g.add_argument("--slurm-local", action="store_true", help=doc["slurm_local"])


def _field_doc(name: str) -> str:
    import inspect

    src = inspect.getsource(SweepOptions)
    start = src.index(f"    {name}:")
    doc = src[start:].split('"""')[1]
    return " ".join(doc.split())


def from_caller(value: Optional[str]) -> Optional[str]:
    """A grid script's path option as its runs will read it. The runs start in the repository's root, so a relative
    path that exists from the caller's folder is made absolute (the caller's meaning); anything else (a name such as
    mnist, glue/sst2, minilm or hf:NAME, an absolute path, or a path relative to the repository's root that the
    caller's folder does not have) is left as it is."""
    if not value or os.path.isabs(value) or not os.path.exists(value):
        return value
    return os.path.abspath(value)


def options_of(args) -> SweepOptions:
    """:class:`SweepOptions` from a parsed namespace or dataclass holding its fields."""
    return SweepOptions(**{f.name: getattr(args, f.name) for f in fields(SweepOptions) if hasattr(args, f.name)})


def dataclass_flags(obj, base=None) -> list[str]:
    """The tyro command-line flags that turn ``base`` (default: the dataclass's defaults) into ``obj``:
    ``--field-name VALUE`` for each field that differs (``--flag`` / ``--no-flag`` for booleans, ``None`` for
    None). Used to launch a configuration as its application's own command line."""
    base = base if base is not None else type(obj)()
    out: list[str] = []
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value == getattr(base, f.name):
            continue
        flag = "--" + f.name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif value is None:
            out += [flag, "None"]
        elif isinstance(value, (list, tuple)):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


# ------------------------------------------------------------------------------------------ one grid per folder

#: The lock file of a grid in its output folder (:func:`grid_lock`).
LOCK_NAME = ".grid.lock"
_held: dict[str, list] = {}  # lock file -> [its descriptor, how many times this process holds it]
_held_lock = threading.Lock()


@contextlib.contextmanager
def grid_lock(out: str | Path, option: str = "--out") -> Iterator[Path]:
    """Hold the lock of the grid folder ``out`` (``OUT/.grid.lock``, an exclusive ``flock``) for the block: a
    second grid on the same folder, while this process holds it, is refused at once (a :class:`SweepError`, one
    line naming ``option`` and the process that holds it). ``out`` is made if missing; a folder that cannot be made
    or written is refused the same way (``option`` named), before anything starts. The lock goes with the process
    that holds it, however it ends (a killed grid leaves no lock behind), and is not passed to the processes it
    starts (the runs never take it). The file is removed when the block ends. The same process may take it again
    inside the block (it then holds it once more). On a file system without locks (Lustre mounted without flock) the
    grid goes on with a warning that a second grid there would not be refused."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise SweepError(f"{option} {out} is a file, not a folder: give a folder for the grid (nothing was started)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = str((folder / LOCK_NAME).resolve())
    except OSError as err:
        raise SweepError(f"{option} {out}: cannot make the folder ({err.strerror or err}); give a folder you can "
                         "write to (nothing was started)") from None
    with _held_lock:
        if path in _held:
            _held[path][1] += 1
        else:
            _held[path] = [_acquire(path, out, option), 1]
    try:
        yield Path(path)
    finally:
        with _held_lock:
            _held[path][1] -= 1
            if _held[path][1] == 0:
                _release(path, _held.pop(path)[0])


def note_running_grid(out: str | Path, option: str = "--out") -> None:
    """For a command that only reads a grid's folder (``--aggregate-only``): one ``note:`` line on stderr when
    another grid holds ``out``'s lock, so a table made while it runs is not taken for the grid's last word. The lock
    is only tested (a shared lock that is not kept), never taken; the file is not made."""
    import fcntl

    path = Path(out) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        holder = os.read(fd, 4096).decode("utf-8", "replace").strip()
        print(f"note: a grid is still running on {option} {out} ({holder or 'its lock ' + str(path)}): this table "
              "counts the runs finished so far, and that grid writes the tables again when it ends", file=sys.stderr,
              flush=True)
    except OSError:  # a file system without locks: nothing to tell
        pass
    finally:
        os.close(fd)


def _acquire(path: str, out, option: str) -> int:
    """The descriptor of the lock file ``path``, locked (see :func:`grid_lock`)."""
    import fcntl

    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by the runs (PEP 446)
        except OSError as err:
            raise SweepError(f"{option} {out}: cannot write there ({err.strerror or err}); give a folder you can write "
                             "to (nothing was started)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 4096).decode("utf-8", "replace").strip()
            os.close(fd)
            raise SweepError(f"{option} {out} is in use by another grid still running ({holder or 'its lock ' + path}):"
                             f" wait for it to end, or use another {option} (nothing was started)") from None
        except OSError as err:  # a file system without locks (Lustre mounted without flock, some FUSE mounts)
            warnings.warn(f"{option} {out}: cannot lock {path} ({err.strerror or err}) on this file system, so a "
                          "second grid started on the same folder would not be refused: start one grid per folder")
            break
        try:  # the file may have been removed by the grid that held it just before: then lock the new one
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    command = " ".join([os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python", *sys.argv[1:]])
    text = (f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}: "
            f"{command if len(command) <= 160 else command[:159] + '…'}")
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, text.encode(), 0)
    except OSError:  # only the message of a refused grid loses its details
        pass
    return fd


def _release(path: str, fd: int) -> None:
    import fcntl

    try:
        os.unlink(path)  # first: a grid waiting on this file then sees it gone and locks a new one
    except OSError:
        pass
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:  # never locked: a file system without locks (see _acquire)
        pass
    os.close(fd)


# ------------------------------------------------------------------------------------------ running


class _Progress:
    def __init__(self, total: int, quiet: bool = False, signals: GridSignals | None = None):
        self.total, self.done, self.failed, self.stopped, self.running = total, 0, 0, 0, 0
        self.quiet = quiet
        self.lock = threading.Lock()
        self.signals = signals or GridSignals()  # what stopped the grid, if anything did

    def started(self) -> None:
        with self.lock:
            self.running += 1

    def retry(self, run: Run, rc, attempt: int, retries: int) -> None:
        if not self.quiet:
            print(f"retrying {run.name} ({rc}; attempt {attempt + 1} of {retries + 1}; it continues from its "
                  "checkpoint)", flush=True)

    def finished(self, run: Run, rc: int) -> None:
        with self.lock:
            self.running -= 1
            self.done += 1
            self.stopped += rc == STOPPED
            self.failed += rc not in (0, STOPPED)
            if rc == STOPPED and not Path(run.log).exists():  # stopped while it waited for its resources
                state = "stopped before it started (no log)"
            else:
                state = ("done" if rc == 0 else f"stopped (exit {rc}: asked to stop; see {run.log})" if rc == STOPPED
                         else f"FAILED (exit {rc}, see {run.log})")
            stopped = f", stopped {self.stopped}" if self.stopped else ""
            line = (f"[{self.done}/{self.total}] {state}: {run.name} (in progress {self.running}, failed {self.failed}"
                    f"{stopped})")
        if not self.quiet:
            print(line, flush=True)


def run_sweep(runs: Sequence[Run], options: SweepOptions | None = None, quiet: bool = False,
              on_finish: Callable[[Run, int], None] | None = None, lock: str | Path | None = None) -> list[int]:
    """Run every run of the grid; their exit codes, in the order given. ``on_finish(run, rc)`` is called in
    this process as each run ends. ``lock``: the grid's output folder, whose :func:`grid_lock` is held while the
    runs go (a grid script that holds it itself around its whole start need not pass it)."""
    options = options or SweepOptions()
    options.validate()
    runs = list(runs)
    if not runs:
        return []
    held = grid_lock(lock) if lock is not None else contextlib.nullcontext()
    with held, GridSignals() as signals:  # SIGTERM, SIGHUP, a scheduler's warning: stopped as Ctrl-C stops the grid
        progress = _Progress(len(runs), quiet, signals)
        if options.backend == "local":
            return _run_local(runs, options, progress, on_finish)
        if options.backend == "slurm":
            from .slurm import run_jobs

            return run_jobs(runs, options, progress, on_finish)
        return _run_ray(runs, options, progress, on_finish)


#: What a grid stopped by Ctrl-C (or a signal, :class:`GridSignals`) says (:class:`GridInterrupted`).
GRID_STOPPED = ("stopped ({how}): the runs in progress were asked to stop after their step with a checkpoint, and "
                "ended; no other run was started. Start the same command again to continue the grid: finished runs "
                "are skipped, stopped ones continue from their checkpoints")


def local_threads(parallel: int) -> int:
    """Threads for each of ``parallel`` runs at once on this machine: an equal share of the CPUs this process may
    use (torch's default is every CPU for each run: --parallel 4 ran 4 threads a core)."""
    from .runtime import usable_cpus

    return max(1, usable_cpus() // max(1, parallel))


def _run_local(runs, options: SweepOptions, progress: _Progress, on_finish) -> list[int]:
    """The local pool. Ctrl-C (or SIGTERM turned into it) stops the grid: every run in progress is asked to stop
    (SIGTERM: after its step, with a checkpoint; those the terminal's Ctrl-C reached already take it as the same
    request) and waited for, no other run is started, and :class:`GridInterrupted` says how to go on. A second Ctrl-C
    while they finish is a plain KeyboardInterrupt (the runs the terminal reaches stop at once)."""
    live: set = set()
    lock = threading.Lock()
    stopping = threading.Event()
    # each run's share of the CPUs as its threads, unless the caller (its environment) or the run sets them
    share = {} if "OMP_NUM_THREADS" in os.environ else {"OMP_NUM_THREADS": str(local_threads(options.parallel))}

    def one(run: Run) -> int:
        progress.started()
        for attempt in range(options.retries + 1):
            with lock:
                if stopping.is_set():
                    return STOPPED
                proc = _start(_local_python(run.cmd, ""), str(run.log), run.cwd, {**share, **run.env})
                live.add(proc)
            try:
                rc = wait_for(proc)
            finally:
                with lock:
                    live.discard(proc)
            if stopping.is_set() and rc in (-signal.SIGTERM, 128 + signal.SIGTERM):
                rc = STOPPED  # the grid's own stop request, met before the run had its handler (or after): not a fault
            if not _retry_worthy(rc) or attempt == options.retries or stopping.is_set():
                break
            progress.retry(run, f"exit {rc}", attempt + 1, options.retries)
        progress.finished(run, rc)
        if on_finish is not None:
            on_finish(run, rc)
        return rc

    pool = ThreadPoolExecutor(max_workers=options.parallel)
    try:
        return list(pool.map(one, runs))
    except KeyboardInterrupt:
        with lock:
            stopping.set()
            running = [proc for proc in live if proc.poll() is None]
            for proc in running:
                proc.send_signal(signal.SIGTERM)
        if running and not progress.quiet:
            print(f"stopping: waiting for the {len(running)} run(s) in progress to write their checkpoints (Ctrl-C "
                  "again to stop at once)", flush=True)
        pool.shutdown(wait=True, cancel_futures=True)
        raise GridInterrupted(GRID_STOPPED.format(how=progress.signals.how())) from None
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------------------------------------- Ray


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds, naming the address, when nothing listens there (ray.init would retry for minutes)."""
    if address in ("auto", "local"):
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise SweepError(f"--address {address!r}: expected auto, HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as err:
        raise SweepError(f"--address {address}: no Ray cluster reachable there ({err.strerror or err}); "
                         "is `ray start --head` running on that host, and is the port open?") from None


def connect_ray(address: str | None = None) -> None:
    """Connect to the Ray cluster at ``address``, or start one on this machine (None); reuse a connection this
    process already has."""
    try:
        import ray
    except ImportError:
        raise SweepError("--backend ray needs Ray: pip install -e \".[cluster]\" (or --backend local)") from None
    if ray.is_initialized():
        return
    if address:
        _check_reachable(address)
    try:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 configure_logging=False)
    except ConnectionError as err:
        raise SweepError(f"--address {address}: {str(err).splitlines()[0]} (start one with `ray start --head`)") \
            from None


def check_resources(runs: Sequence[Run]) -> None:
    """Refuse, before launching, a grid whose runs need more than any node of the cluster has."""
    import ray

    nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
    gpus = max((n.get("GPU", 0.0) for n in nodes), default=0.0)
    cpus = max((n.get("CPU", 0.0) for n in nodes), default=0.0)
    need_gpu = max(r.gpus for r in runs)
    need_cpu = max(r.cpus for r in runs)
    if need_gpu > gpus:
        raise SweepError(f"each run asks for {need_gpu:g} GPU(s) but the Ray cluster's nodes have "
                         f"{gpus:g}{' (no GPU at all)' if gpus == 0 else ''}; use --gpus-per-run 0 or a cluster "
                         "with GPUs (nothing was launched)")
    if need_cpu > cpus:
        raise SweepError(f"each run asks for {need_cpu:g} CPUs but the largest node of the Ray cluster has {cpus:g}; "
                         "lower --cpus-per-run (nothing was launched)")


#: Seconds a stopped Ray grid waits for its runs to stop with their checkpoints before it ends (and Ray with it).
RAY_STOP_WAIT_S = 300


def _run_ray(runs, options: SweepOptions, progress: _Progress, on_finish) -> list[int]:
    import ray
    from ray.exceptions import RayError

    connect_ray(options.address)
    progress.signals.install()  # over the SIGTERM handler ray.init put in, which would end this process at once
    check_resources(runs)
    task = ray.remote(execute)
    stop = ray.remote(StopFlag).options(num_cpus=0).remote()  # set when the grid is stopped
    launcher = sys.executable
    attempts = {i: 0 for i in range(len(runs))}

    def submit(i: int):
        r = runs[i]
        # max_retries: Ray starts the task again if its worker or node dies; a run killed by a signal is
        # retried below (the task itself returned its exit code).
        return task.options(num_cpus=r.cpus, num_gpus=r.gpus, max_retries=options.retries,
                            retry_exceptions=False).remote(r.cmd, str(r.log), r.cwd, r.env, launcher, stop)

    pending = {}
    for i in range(len(runs)):
        pending[submit(i)] = i
        progress.started()
    codes: dict[int, int] = {}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            try:
                rc = ray.get(ready[0])
            except RayError as err:  # the task failed for good (Ray's own retries spent)
                rc, why = -1, type(err).__name__
            else:
                why = f"exit {rc}"
            if _retry_worthy(rc) and attempts[i] < options.retries:
                attempts[i] += 1
                progress.retry(runs[i], why, attempts[i], options.retries)
                pending[submit(i)] = i
                continue
            codes[i] = rc
            progress.finished(runs[i], rc)
            if on_finish is not None:
                on_finish(runs[i], rc)
    except KeyboardInterrupt:  # the tasks stop their runs (SIGTERM: a checkpoint) and return; then the grid ends
        ray.get(stop.set.remote())  # a task still waiting for resources returns without starting its run
        print(f"stopping: waiting for the grid's {len(pending)} unfinished run(s) to write their checkpoints "
              "(Ctrl-C again to stop at once)", flush=True)
        ended, _ = ray.wait(list(pending), num_returns=len(pending), timeout=RAY_STOP_WAIT_S)
        for ref in ended:
            try:
                progress.finished(runs[pending[ref]], int(ray.get(ref)))
            except RayError:
                pass
        raise GridInterrupted(GRID_STOPPED.format(how=progress.signals.how())) from None
    return [codes[i] for i in range(len(runs))]
