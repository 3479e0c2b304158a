"""The processes of the grid runner's runs (:mod:`shared_losses.training.sweep`, and its Slurm backend
:mod:`shared_losses.training.slurm`): how one run's command is started, waited for and judged worth a retry."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional


class SweepError(ValueError):
    """A grid that cannot start (bad backend, unreachable cluster, resources it does not have): one line."""


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


def execute(cmd: list[str], log: str, cwd: Optional[str], env: dict[str, str], launcher_python: str = "") -> int:
    """Run one command to its end (its output appended to ``log``); its exit code (negative: killed by that
    signal). This is what a Ray task runs on its node."""
    return wait_for(_start(_local_python(cmd, launcher_python), log, cwd, env))


def wait_for(proc: subprocess.Popen) -> int:
    """The exit code of a run's process, waited for to its end. A wait that ends otherwise (a Ray task cancelled, its
    worker stopping, a Slurm job cancelled or requeued) ends the run first (SIGTERM: it writes its checkpoint; SIGKILL
    after 30 s), so that no run is left behind."""
    try:
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
