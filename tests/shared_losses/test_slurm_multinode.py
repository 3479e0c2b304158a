"""scripts/slurm/multinode.sbatch: one run over several Slurm nodes, `accelerate launch` once per node. No Slurm here:
stand-ins for srun (the script's command once per node, side by side, with the per-task variables Slurm sets) and
scontrol (the allocation's hosts), two "nodes" on this machine with one CPU process each (gloo)."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import stat
import subprocess
import time
from pathlib import Path

import pytest

from .test_launch import LAUNCH_VARIABLES
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm" / "multinode.sbatch"

FAKE_SRUN = r"""#!/bin/bash
# srun's stand-in: the command once per node of the allocation, side by side, each with its node's variables. It is
# not in the job step that Slurm's warning reaches (the tests signal the processes it starts), and it leaves their
# signals' dispositions as they are, as slurmstepd starts a step's tasks. When a task ends, every process of the step
# still running is killed, as slurmstepd ends a step whose tasks have ended (its cgroup: here, the processes that
# inherited FAKE_SLURM_STEP, whatever their process group or session).
while [[ $1 == -* ]]; do shift; done
export FAKE_SLURM_STEP=$$
pids=()
for ((i = 0; i < SLURM_NNODES; i++)); do
    SLURM_NODEID=$i SLURM_PROCID=$i SLURM_LOCALID=0 "$@" &
    pids+=($!)
done
rc=0
for p in "${pids[@]}"; do
    wait "$p" || rc=$?
    for q in $(grep -lz "^FAKE_SLURM_STEP=$$\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
        [[ $q != $$ ]] && kill -KILL "$q" 2>/dev/null
    done
done
exit $rc
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _sbatch(tmp_path: Path, *args: str, **popen) -> subprocess.Popen:
    """The script as Slurm's batch step runs it: two nodes, the stand-ins first on the PATH."""
    if not (ROOT / ".venv/bin/accelerate").exists():
        pytest.skip("accelerate's command line is not installed in .venv")
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "srun").write_text(FAKE_SRUN)
    (bin_ / "scontrol").write_text("#!/bin/sh\necho localhost\necho otherhost\n")  # show hostnames: one per line
    for f in bin_.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARIABLES}
    env.update(PATH=f"{bin_}{os.pathsep}{env['PATH']}", SLURM_NNODES="2", SLURM_JOB_NODELIST="node[1-2]",
               SLURM_JOB_ID="77", ACCELERATE=str(ROOT / ".venv/bin/accelerate"), MAIN_PROCESS_PORT=str(_free_port()),
               PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", HF_HOME=str(tmp_path / "hf"))
    return subprocess.Popen(["bash", str(SCRIPT), *args], env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, start_new_session=True, **popen)


def _finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        return proc.communicate(timeout=timeout)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_the_script_without_a_program_says_how_to_call_it(tmp_path):
    res = warm.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 2 and res.stderr.startswith("usage: sbatch [sbatch options]")


@pytest.mark.slow  # a tiny nlp_qt run over two "nodes", warned, then continued
def test_the_schedulers_warning_stops_every_process_with_a_checkpoint_and_the_next_job_continues(tmp_path):
    """One launcher per node, its rank from SLURM_NODEID and the allocation's first host as the rendezvous: the run's
    two processes (one per "node") train as one group of 2. Slurm's --signal=USR2@120 reaches every process of the
    job step (the launchers and the run's processes): the launchers ignore it, the run's two processes stop after the
    same step with a checkpoint; the same command again (a second job, --resume) continues from it to the end."""
    import psutil

    from tests.nlp_qt.test_train import _cfg

    corpus = _cfg(tmp_path, "unused").corpus
    out_dir = tmp_path / "qt"
    program = ["-m", "nlp_qt.train", "--device", "cpu", "--gather-across-processes", "--corpus", corpus,
               "--output-dir", str(out_dir), "--batch-size", "8", "--word-dim", "8", "--encoder-dim", "8",
               "--vocab-size", "200", "--max-length", "12", "--checkpoint-every", "5", "--log-every", "1",
               "--epochs", "10000", "--max-steps", "100000", "--seed", "0", "--resume", "--no-progress"]
    proc = _sbatch(tmp_path, *program)
    try:
        start = time.monotonic()
        while not (out_dir / "checkpoint" / "COMPLETE").exists():
            assert proc.poll() is None and time.monotonic() - start < 180, _finish(proc, 5)
            time.sleep(0.2)
        srun = next(p for p in psutil.Process(proc.pid).children() if "srun" in " ".join(p.cmdline()))
        step = srun.children(recursive=True)  # the job step: what Slurm's --signal reaches
        assert sum("nlp_qt.train" in " ".join(p.cmdline()) for p in step) >= 2
        for p in step:
            try:
                p.send_signal(signal.SIGUSR2)
            except psutil.NoSuchProcess:
                pass
        text = _finish(proc)
        # the next job starts once every process of this one has ended, as Slurm starts it; under the suite's load the
        # next job once found the run folder still held ("in use by a run still going", one failure in a fresh-clone
        # run of 2026-12-05; the test alone passed 3 of 3 before this wait)
        psutil.wait_procs(step, timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert text.count("SIGUSR2: stopping after the current step") >= 1, text
    stopped = re.findall(r"interrupted at step (\d+)", text)
    assert stopped, text
    from shared_losses.training.runtime import load_checkpoint

    assert json.loads((out_dir / "config.json").read_text())["num_processes"] == 2
    assert "nodes: 2 (node[1-2]), 1 processes each, rendezvous localhost:" in text, text
    at = load_checkpoint(None, out_dir / "checkpoint")["step"]
    assert at == int(stopped[0])
    program[program.index("--max-steps") + 1] = str(at + 10)
    for _ in range(3):  # a free port picked for the rendezvous can be taken before torchrun listens on it (other
        # tests of the suite open ports beside this one): that job fails at once, before any step, so try another
        text = _finish(_sbatch(tmp_path, *program))
        if "EADDRINUSE" not in text:
            break
    assert f"resumed from {out_dir / 'checkpoint'} at step {at}" in text, text
    assert json.loads((out_dir / "summary.json").read_text())["step"] == at + 10
