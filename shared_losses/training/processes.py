"""The processes of the grid runner's runs (:mod:`shared_losses.training.sweep`, and its Slurm backend
:mod:`shared_losses.training.slurm`): how one run's command is started, waited for and judged worth a retry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional


class SweepError(ValueError):
    """A grid that cannot start (bad backend, unreachable cluster, resources it does not have): one line."""


class GridInterrupted(KeyboardInterrupt):
    """Ctrl-C (or SIGTERM) stopped a grid after its runs in progress were asked to stop with a checkpoint and ended:
    ``run_cli`` prints ``str(self)`` (how to continue: start the grid again) and exits with status 130, instead of
    a plain KeyboardInterrupt's "work since the last checkpoint is lost"."""


class GridSignals:
    """While a grid runs (in the main thread): SIGTERM (a kill, a scheduler's cancel of the job the grid runs in),
    SIGHUP (its terminal closed) and a scheduler's warning (SIGUSR1 / SIGUSR2) raise KeyboardInterrupt, as Ctrl-C
    does. Their default action would end the grid's process at once, and with it (:func:`_die_with_parent`) the runs
    it started, before they wrote their checkpoints. ``received``: the signal's name (None: Ctrl-C, or none). Later
    signals of these are ignored while the grid stops its runs; a second Ctrl-C still stops at once."""

    def __init__(self):
        self.received: str | None = None
        self._old: dict = {}

    def _handle(self, signum, frame):
        if self.received is not None:
            return
        self.received = signal.Signals(signum).name
        if signum == getattr(signal, "SIGHUP", None):  # the terminal is gone: writes to it would fail
            from .runtime import _leave_the_terminal

            _leave_the_terminal()
        raise KeyboardInterrupt

    def __enter__(self) -> "GridSignals":
        self._old = {}
        self.install()
        return self

    def install(self) -> None:
        """Put the handlers in (again). ``ray.init`` installs Ray's own SIGTERM handler (which logs "SIGTERM
        received" and ends the process at once), so the Ray backend calls this once Ray is up; :meth:`__exit__` puts
        back the handlers from before the grid."""
        from .runtime import _stop_signals, install_handlers

        # the signals a run stops on: the grid takes the same (Ctrl-C its own way)
        replaced = install_handlers([sig for sig in _stop_signals() if sig != signal.SIGINT], self._handle)
        for sig, old in replaced.items():
            self._old.setdefault(sig, old)

    def __exit__(self, *exc) -> None:
        from .runtime import restore_handlers

        restore_handlers(self._old)
        self._old = {}

    def how(self) -> str:
        """What stopped the grid, for its message."""
        return "Ctrl-C" if self.received is None else self.received


class GridDetached(Exception):
    """The grid's jobs are submitted and the command ends without waiting for them (``--slurm-detach``): not a
    failure; ``run_cli`` prints ``str(self)`` (what was submitted, how to go on) and exits with status 0."""


def _local_python(cmd: list[str], launcher_python: str) -> list[str]:
    return [sys.executable, *cmd[1:]] if cmd and cmd[0] == launcher_python else list(cmd)


def _load_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux/glibc
        return None


_PRCTL = _load_prctl() if sys.platform.startswith("linux") else None  # looked up here, not in the forked child


def _die_with_parent() -> None:
    """In the child, before exec (Linux): be killed when the process that started it dies. A Ray worker
    killed while its run trains would otherwise leave the run training on, and the retried task would start
    a second process on the same run folder. Only a C call here: no import or lookup between fork and exec."""
    _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _start(cmd: list[str], log: str, cwd: Optional[str], env: dict[str, str]) -> subprocess.Popen:
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        return subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **env}, stdout=fh, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL,
                                preexec_fn=_die_with_parent if _PRCTL is not None else None)


def execute(cmd: list[str], log: str, cwd: Optional[str], env: dict[str, str], launcher_python: str = "",
            stop=None) -> int:
    """Run one command to its end (its output appended to ``log``); its exit code (negative: killed by that
    signal). This is what a Ray task runs on its node; ``stop``: the grid's :class:`StopFlag` (a Ray actor), which
    the wait asks every :data:`STOP_POLL_S` seconds: once it is set, the run is asked to stop (SIGTERM: after its
    step, with a checkpoint) and waited for, and its exit code returned."""
    should_stop = None
    if stop is not None:
        # Never a blocking ray.get or ray.wait in here (the answers are read as futures): a task blocked in one lends
        # its CPUs back to the node, and Ray starts another run on them (two runs of --cpus-per-run 2 at once on 2
        # CPUs); time.sleep keeps them.
        first = stop.is_set.remote().future()
        while not first.done():
            time.sleep(0.02)
        if first.result():  # the grid stopped while this task waited for its resources: the run is not started
            return STOPPED
        asked = [stop.is_set.remote().future()]

        def should_stop() -> bool:
            # the answer to the last question read once it is there (no wait), and the next question asked
            if not asked[0].done():
                return False
            answer = bool(asked[0].result())
            asked[0] = stop.is_set.remote().future()
            return answer
    return wait_for(_start(_local_python(cmd, launcher_python), log, cwd, env), should_stop)


#: The exit status of a run that was asked to stop (Ctrl-C, SIGTERM, a scheduler's warning) and stopped: after
#: writing its checkpoint, unless asked twice.
STOPPED = 130

#: Seconds between a Ray task's questions to its grid's :class:`StopFlag`.
STOP_POLL_S = 2.0


class StopFlag:
    """Set by a grid's launcher when it is stopped (Ctrl-C, SIGTERM): each Ray task asks it (as a Ray actor, its
    methods called remotely) and then stops its run with a checkpoint, and the launcher waits for the tasks to return.
    Ray's own cancel would not do: it marks the task done at once, the launcher exits, and Ray then kills the tasks'
    workers and (:func:`_die_with_parent`) their runs, before the checkpoints are written."""

    def __init__(self):
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


def wait_for(proc: subprocess.Popen, should_stop=None) -> int:
    """The exit code of a run's process, waited for to its end. ``should_stop``: asked every :data:`STOP_POLL_S`
    seconds; once it answers True the run is asked to stop (SIGTERM) and waited for. A wait that ends otherwise (a Ray
    task cancelled, its worker stopping, a Slurm job cancelled or requeued) ends the run first (SIGTERM: it writes its
    checkpoint; SIGKILL after 30 s), so that no run is left behind."""
    try:
        if should_stop is None:
            return proc.wait()
        while True:
            try:
                return proc.wait(timeout=STOP_POLL_S)
            except subprocess.TimeoutExpired:
                if should_stop():
                    proc.terminate()
                    return proc.wait()
    except BaseException:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        raise


def _retry_worthy(rc: int) -> bool:
    """A run killed by a signal (kill -9, the OOM killer; negative code, or 128+N from a shell) is retried;
    Ctrl-C's 130 from a run that checkpointed and stopped on purpose is not."""
    return rc < 0 or rc in (128 + signal.SIGKILL, 128 + signal.SIGTERM)
