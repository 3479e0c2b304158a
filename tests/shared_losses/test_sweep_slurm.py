"""The grid runner's Slurm backend (--backend slurm, shared_losses.training.slurm): jobs through submitit's local
executor (no Slurm here; the same pickled jobs, time limit, warning signal and requeue), the sbatch script written for
a Slurm cluster (a stand-in sbatch that keeps it), and the options refused before anything is submitted."""

import os
import re
import signal
import stat
import sys
from pathlib import Path

import pytest
from tests import warm

pytest.importorskip("submitit")

from shared_losses.training import slurm  # noqa: E402
from shared_losses.training.sweep import Run, SweepError, SweepOptions, run_sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_slurm_jobs_run_here_through_submitits_local_executor(tmp_path, capsys):
    """--backend slurm --slurm-local: one job per run, exit codes in the runs' order, each run's output in its log,
    submitit's files under slurm/ beside the logs; a run that fails with an exit code is not submitted again."""
    runs = [Run(f"r{i}", [sys.executable, "-c", f"import sys; print('run {i}'); sys.exit({2 * (i % 2)})"],
                tmp_path / "logs" / f"r{i}.log") for i in range(3)]
    options = SweepOptions(backend="slurm", slurm_local=True, slurm_time=5)
    options.validate()
    assert "submitit's local executor" in options.describe()
    assert run_sweep(runs, options) == [0, 2, 0]
    out = capsys.readouterr().out
    assert "retrying" not in out and out.count("FAILED (exit 2, see ") == 1 and "[3/3]" in out
    assert "--slurm-local: every job starts at once on this machine" in out
    assert (tmp_path / "logs" / "r1.log").read_text() == "run 1\n"
    assert len(list((tmp_path / "logs" / "slurm").glob("*/*_result.pkl"))) == 3  # one folder per job
    assert not (tmp_path / "logs" / "slurm" / "%j").exists()  # submitit's local jobs make the template's folder


@pytest.mark.slow  # a tiny nlp_qt.train run through two local jobs, and the same run uninterrupted
def test_a_trainer_warned_in_its_job_ends_as_the_uninterrupted_run_after_the_requeue(tmp_path, capsys):
    """End to end with a real trainer: once nlp_qt.train has trained 40 steps in its job, the job gets the scheduler's
    warning (SIGUSR2 to submitit's process alone, as submitit's local executor sends it at a time limit; Slurm also
    signals the run itself, which is the same request). The job's checkpoint() asks the run to stop after its step
    with a checkpoint, the job is requeued, and the requeued job continues the run from that checkpoint to its end:
    the same weights and log as the run made in one go. (The warning is sent when the run is seen training, not at a
    clock time, so the test does not depend on this machine's speed.)"""
    import time

    import psutil
    from safetensors.torch import load_file

    from tests.nlp_qt.test_train import _cfg

    from .test_sweep import _qt_command

    corpus = _cfg(tmp_path, "unused").corpus
    steps = 300
    env = {"OMP_NUM_THREADS": "1"}
    cut = Run("cut", _qt_command(corpus, tmp_path / "cut", steps), tmp_path / "cut.log", cwd=str(ROOT), env=env)
    options = SweepOptions(backend="slurm", slurm_local=True, slurm_time=10)
    job = slurm.submit(slurm.executor(options, tmp_path / "slurm"), cut)
    rows = tmp_path / "cut" / "log.csv"
    start = time.monotonic()
    while not rows.exists() or len(rows.read_text().splitlines()) < 41:
        assert time.monotonic() - start < 180 and not job.done(), cut.log.read_text() if cut.log.exists() else ""
        time.sleep(0.1)
    controller = psutil.Process(int(job.job_id))  # the local job's id is its controller's pid
    task = next(p for p in controller.children() if "submitit.core._submit" in " ".join(p.cmdline()))
    task.send_signal(signal.SIGUSR2)
    assert job.result() == 0
    log = cut.log.read_text()
    assert "SIGUSR2: stopping after the current step" in log and "Traceback" not in log, log
    at = int(re.search(r"interrupted at step (\d+)", log).group(1))
    assert 40 <= at < steps and f"at step {at} (epoch" in log.split("interrupted at step")[1], log  # resumed there
    plain = Run("plain", _qt_command(corpus, tmp_path / "plain", steps), tmp_path / "plain.log", cwd=str(ROOT),
                env=env)
    assert run_sweep([plain], SweepOptions(backend="local")) == [0]
    a = load_file(str(tmp_path / "cut" / "model" / "model.safetensors"))
    b = load_file(str(tmp_path / "plain" / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    steps_of = lambda p: [r.split(",")[0] for r in (tmp_path / p / "log.csv").read_text().splitlines()]  # noqa: E731
    assert steps_of("cut") == steps_of("plain")


def test_a_run_killed_by_a_signal_is_submitted_again(tmp_path, capsys):
    """A run killed (kill -9, the out-of-memory killer) is retried as a new job, as with the local pool and Ray."""
    marker = tmp_path / "killed-once"
    code = (f"import os, pathlib; m = pathlib.Path({str(marker)!r}); first = not m.exists(); m.touch(); "
            "print('attempt', 'first' if first else 'second', flush=True); first and os.kill(os.getpid(), 9)")
    run = Run("k", [sys.executable, "-c", code], tmp_path / "k.log")
    assert run_sweep([run], SweepOptions(backend="slurm", slurm_local=True, slurm_time=5, retries=1)) == [0]
    out = capsys.readouterr().out
    assert "retrying k (exit -9; attempt 2 of 2" in out and "[1/1] done: k" in out
    assert run.log.read_text() == "attempt first\nattempt second\n"


def _fake_slurm(tmp_path: Path, monkeypatch, queue: str = "", squeue_rc: int = 0) -> Path:
    """sbatch, srun and squeue stand-ins on PATH: sbatch keeps the script it is given in ``kept.sbatch``, counts its
    calls in ``sbatch.calls`` and answers as Slurm's does (job 4242, then 4243, ...); squeue prints the file
    ``queue.txt``, first ``queue`` (and exits with ``squeue_rc``)."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    kept = tmp_path / "kept.sbatch"
    calls = tmp_path / "sbatch.calls"  # job ids 4242, 4243, ... in the order of submission
    (bin_ / "sbatch").write_text(f"#!/bin/sh\ncp \"$1\" {kept}\necho x >> {calls}\n"
                                 f"echo \"Submitted batch job $((4241 + $(wc -l < {calls})))\"\n")
    (bin_ / "srun").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "queue.txt").write_text(queue)
    (bin_ / "squeue").write_text(f"#!/bin/sh\ncat {tmp_path / 'queue.txt'}\nexit {squeue_rc}\n")
    for f in bin_.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    return kept


def test_a_run_whose_job_is_still_in_the_queue_is_waited_for_not_submitted_again(tmp_path, monkeypatch, capsys):
    """The grid started again while its jobs are queued or running (its terminal closed, a driver job ended): each
    run's job is found by name in squeue and waited for; only the runs without one are submitted. Job names are stable
    per grid folder and differ between grids whose runs have the same labels."""
    runs = [Run(f"seed{i}", ["python", "-c", "pass"], tmp_path / "grid" / f"seed{i}.log") for i in range(3)]
    other = Run("seed0", ["python"], tmp_path / "other_grid" / "seed0.log")
    assert slurm.job_name(runs[0]) == slurm.job_name(Run("seed0", [], tmp_path / "grid" / "seed0.log"))
    assert slurm.job_name(runs[0]) != slurm.job_name(other) and slurm.job_name(runs[0]).startswith("seed0@")
    assert slurm.job_name(Run("training QT (seed 1)", [], tmp_path / "x.log")).startswith("training_QT__seed_1_@")
    queue = f"77|{slurm.job_name(runs[0])}\n78|{slurm.job_name(other)}\n79|{slurm.job_name(runs[2])}\n"
    _fake_slurm(tmp_path, monkeypatch, queue=queue)
    options = SweepOptions(backend="slurm")
    options.validate()
    folder = tmp_path / "grid" / "slurm"
    jobs = slurm.submit_or_attach(runs, options, slurm.executor(options, folder), folder)
    assert {i: j.job_id for i, j in jobs.items()} == {0: "77", 1: "4242", 2: "79"}
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 1  # seed1 alone was submitted
    out = capsys.readouterr().out
    assert "seed0: already in Slurm's queue as job 77 (an earlier start of this grid); waiting for it" in out
    assert "seed2: already in Slurm's queue as job 79" in out


def _fake_squeue_job(tmp_path: Path, monkeypatch, answer: str, rc: int = 0) -> Path:
    """A squeue stand-in for ``squeue -h -j ID -o %T|%S``: prints the file ``job.txt`` (first ``answer``) and exits
    with the status in ``job.rc`` (first ``rc``; squeue's 1 for a job it no longer knows)."""
    bin_ = tmp_path / "qbin"
    bin_.mkdir(exist_ok=True)
    (tmp_path / "job.txt").write_text(answer)
    (tmp_path / "job.rc").write_text(str(rc))
    (bin_ / "squeue").write_text(f"#!/bin/sh\ncat {tmp_path / 'job.txt'}\nexit $(cat {tmp_path / 'job.rc'})\n")
    (bin_ / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "job.txt"


def test_a_stopped_run_whose_job_slurm_requeued_is_told_apart_from_one_that_stays_stopped(tmp_path, monkeypatch):
    """Exit 130 from a job's run while the grid was not stopped: either someone cancelled the job (it stays stopped)
    or Slurm preempted it with SIGTERM and put the same job back in its queue (PreemptMode=REQUEUE). The second is
    seen in squeue: pending again, or running since after its result was written; the stale result (which submitit
    would go on reading as the job's) is removed."""
    import datetime
    import time

    import submitit

    monkeypatch.setattr(slurm, "REQUEUE_WAIT_S", 0.0)
    monkeypatch.setattr(slurm, "REQUEUE_POLL_S", 0.05)
    folder = tmp_path / "slurm"
    job = submitit.SlurmJob(folder=folder / "%j", job_id="4242")
    _result(folder, "4242", 130)
    result = folder / "4242" / "4242_0_result.pkl"
    written = result.stat().st_mtime

    def start(offset):
        return datetime.datetime.fromtimestamp(written + offset).isoformat(timespec="seconds")

    _fake_squeue_job(tmp_path, monkeypatch, "", rc=1)  # not in the queue: cancelled (slurm_load_jobs error)
    assert not slurm.requeued(job) and result.exists()
    monkeypatch.setattr(slurm, "REQUEUE_WAIT_S", 600.0)  # gone, or cancelled: answered at once, not after the wait
    t0 = time.monotonic()
    assert not slurm.requeued(job) and result.exists()
    (tmp_path / "job.rc").write_text("0")
    (tmp_path / "job.txt").write_text("CANCELLED|N/A\n")
    assert not slurm.requeued(job) and result.exists() and time.monotonic() - t0 < 60
    monkeypatch.setattr(slurm, "REQUEUE_WAIT_S", 0.0)
    (tmp_path / "job.txt").write_text(f"RUNNING|{start(-30)}\n")  # still the run that wrote it (before its end)
    assert not slurm.requeued(job) and result.exists()
    (tmp_path / "job.txt").write_text("PENDING|N/A\n")
    assert slurm.requeued(job) and not result.exists()
    _result(folder, "4242", 130)
    written = result.stat().st_mtime
    (tmp_path / "job.txt").write_text(f"RUNNING|{start(+5)}\n")  # started again after the result
    assert slurm.requeued(job) and not result.exists()
    _result(folder, "4242", 130)
    monkeypatch.setattr(slurm, "REQUEUE_WAIT_S", 30.0)  # requeued a moment after the run ended
    monkeypatch.setattr(slurm, "REQUEUE_POLL_S", 0.05)
    (tmp_path / "job.txt").write_text("COMPLETING|N/A\n")
    import threading

    def requeue():  # atomically: the fake squeue reading the file between its truncation and write saw no job
        (tmp_path / "job.new").write_text("PENDING|N/A\n")
        os.replace(tmp_path / "job.new", tmp_path / "job.txt")

    threading.Timer(0.5, requeue).start()
    t0 = time.monotonic()
    assert slurm.requeued(job) and not result.exists() and 0.5 <= time.monotonic() - t0 < 30


def test_a_waiting_grid_waits_for_a_job_slurm_requeued_after_stopping_its_run(tmp_path, monkeypatch, capsys):
    """The grid waits: the run's job ends with exit 130 (SIGTERM of a preemption), Slurm requeues it, the grid says so
    and waits for the same job, whose run then finishes (exit 0): the run is done, not "stopped", and nothing is
    submitted twice."""
    import threading
    import time

    _fake_slurm(tmp_path, monkeypatch)
    job_txt = _fake_squeue_job(tmp_path, monkeypatch, "PENDING|N/A\n")
    monkeypatch.setattr(slurm, "REQUEUE_WAIT_S", 5.0)
    monkeypatch.setattr(slurm, "REQUEUE_POLL_S", 0.05)
    folder = tmp_path / "grid" / "slurm"
    _result(folder, "4242", 130)  # what the first attempt of job 4242 leaves (the job id of the first submission)
    result = folder / "4242" / "4242_0_result.pkl"

    def requeued_job_finishes():
        deadline = time.monotonic() + 60
        while result.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        job_txt.write_text("")
        _result(folder, "4242", 0)

    threading.Thread(target=requeued_job_finishes, daemon=True).start()
    run = Run("seed0", ["python", "-c", "pass"], tmp_path / "grid" / "seed0.log")
    options = SweepOptions(backend="slurm")
    options.validate()
    from shared_losses.training.sweep import _Progress

    assert slurm.run_jobs([run], options, _Progress(1), None, poll_s=0.05) == [0]
    out = capsys.readouterr().out
    assert ("seed0: its job 4242 was stopped (exit 130, after a checkpoint) and Slurm put it back in its queue (a "
            "preemption); waiting for it") in out
    assert "[1/1] done: seed0" in out and "stopped" not in out.split("waiting for it")[1]
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 1


def test_without_squeue_every_run_is_submitted_with_a_warning(tmp_path, monkeypatch, capsys):
    runs = [Run(f"seed{i}", ["python"], tmp_path / f"seed{i}.log") for i in range(2)]
    _fake_slurm(tmp_path, monkeypatch, queue=f"77|{slurm.job_name(runs[0])}\n", squeue_rc=1)
    options = SweepOptions(backend="slurm")
    jobs = slurm.submit_or_attach(runs, options, slurm.executor(options, tmp_path / "slurm"), tmp_path / "slurm")
    assert [j.job_id for j in jobs.values()] == ["4242", "4243"]
    assert "warning: squeue failed" in capsys.readouterr().out


def test_the_sbatch_script_of_a_run_asks_for_what_the_grid_says(tmp_path, monkeypatch):
    """On a Slurm cluster each run is one sbatch script: the grid's partition, time, CPUs and GPUs per run, the
    warning before the time limit, the run's name and the extra --slurm-option lines; the job runs the run's
    command through submitit."""
    kept = _fake_slurm(tmp_path, monkeypatch)
    options = SweepOptions(backend="slurm", slurm_partition="gpu", slurm_time=90, cpus_per_run=4, gpus_per_run=1,
                           slurm_option=["account=proj", "qos=high", "exclusive"])
    options.validate()
    assert "partition gpu, 90-minute jobs" in options.describe()
    ex = slurm.executor(options, tmp_path / "slurm")
    run = Run("table3/cartpole/curl/seed0", ["python", "-m", "rl_curl.train"], tmp_path / "r.log")
    job = slurm.submit(ex, run)
    assert job.job_id == "4242"
    lines = set(kept.read_text().splitlines())
    for want in ("#SBATCH --partition=gpu", "#SBATCH --time=90", "#SBATCH --cpus-per-task=4",
                 "#SBATCH --gpus-per-node=1", "#SBATCH --nodes=1", "#SBATCH --ntasks-per-node=1",
                 f"#SBATCH --signal=USR2@{slurm.WARNING_S}", "#SBATCH --account=proj", "#SBATCH --qos=high",
                 "#SBATCH --exclusive", f"#SBATCH --job-name={slurm.job_name(run)}"):
        assert want in lines, (want, kept.read_text())
    assert any("submitit.core._submit" in line for line in lines)


@pytest.mark.parametrize("kw, msg", [
    ({"gpus_per_run": 0.5}, r"--gpus-per-run 0.5: Slurm gives a job whole GPUs; use 1"),
    ({"cpus_per_run": 1.5}, r"--cpus-per-run 1.5: Slurm gives a job whole CPUs"),
    ({"slurm_time": 3}, r"--slurm-time 3: a job needs at least 5 minutes"),
    ({"slurm_requeues": -1}, r"--slurm-requeues -1"),
    ({"slurm_option": ["account"]}, None),  # a flag's name is taken (sbatch refuses what it does not know)
    ({"slurm_option": ["=x"]}, r"--slurm-option '=x': expected KEY=VALUE"),
    ({"slurm_option": ["time=10"]}, r"--slurm-option 'time=10': time is set by the grid itself, --slurm-time"),
    ({"slurm_option": ["--partition=a"]}, r"partition is set by the grid itself, --slurm-partition"),
    ({"slurm_option": ["gpus=2"]}, r"gpus is set by the grid itself, --gpus-per-run"),
    ({"slurm_option": ["mem=4G qos=x"]}, r"--slurm-option 'mem=4G qos=x': a space in the value; give one KEY=VALUE "),
])
def test_slurm_options_slurm_cannot_take_are_refused_before_anything_is_submitted(tmp_path, monkeypatch, kw, msg):
    _fake_slurm(tmp_path, monkeypatch)
    options = SweepOptions(backend="slurm", **kw)
    if msg is None:
        options.validate()
    else:
        with pytest.raises(SweepError, match=msg):
            options.validate()
    assert not (tmp_path / "kept.sbatch").exists()


@pytest.mark.parametrize("item, msg", [
    # sbatch's short options (written as --t=10 they would be no option sbatch knows, or the start of another one)
    ("t=10", "'t=10': t is sbatch's -t, --time, set by the grid itself, --slurm-time"),
    ("p=debug", "'p=debug': p is sbatch's -p, --partition, set by the grid itself, --slurm-partition"),
    ("N=2", "'N=2': N is sbatch's -N, --nodes, set by the grid itself, (one node per run)"),
    ("-c=8", "c is sbatch's -c, --cpus-per-task, set by the grid itself, --cpus-per-run"),
    ("G=2", "G is sbatch's -G, --gpus, set by the grid itself, --gpus-per-run"),
    ("A=proj", "'A=proj': A is sbatch's -A: --slurm-option takes sbatch's long names, here account=proj"),
    ("z=1", "z is no option of sbatch"),
    # the start of a name, which sbatch takes for the whole name
    ("partit=debug", "'partit=debug': partit is the start of --partition (set by the grid itself, "
                     "--slurm-partition), and sbatch takes the start of an option's name for the option"),
    ("tim=10", "tim is the start of --time (set by the grid itself, --slurm-time)"),
    ("cpus=4", "cpus is the start of --cpus-per-task (set by the grid itself, --cpus-per-run)"),
    ("sig=USR1@60", "sig is the start of --signal"),
    ("job_na=x", "job-na is the start of --job-name"),
    ("no-req", "no-req is the start of --no-requeue (refused: a job at its time limit"),
    # what breaks the chain of jobs of a run, or the submission
    ("no-requeue", "'no-requeue': no-requeue is refused: a job at its time limit or preempted could not be requeued "
                   "to continue its run"),
    ("--no-requeue", "no-requeue is refused"),
    ("requeue=no", "'requeue=no': requeue is a flag, without a value (write requeue alone)"),
    ("wait", "wait is refused: sbatch would wait for each job to end before the next one is submitted"),
    ("parsable", "parsable is refused"),
    # sbatch's names are lower case and case-sensitive
    ("Time=10", "'Time=10': sbatch's option names are lower case (Time is none of them); and time is set by the "
                "grid itself, --slurm-time"),
    ("Mem=4G", "sbatch's option names are lower case (Mem is none of them); did you mean mem?"),
    ("mail type=END", "mail type is no option of sbatch"),
])
def test_any_spelling_of_an_option_the_grid_sets_or_that_breaks_its_jobs_is_refused(tmp_path, monkeypatch, item,
                                                                                    msg):
    """Each in one line naming the option and what to use instead, before anything is submitted (and before the
    grid's description, which would promise requeued jobs)."""
    _fake_slurm(tmp_path, monkeypatch)
    with pytest.raises(SweepError) as info:
        SweepOptions(backend="slurm", slurm_option=[item]).validate()
    said = str(info.value)
    assert msg in said and "\n" not in said and said.startswith(f"--slurm-option {item!r}: "), said
    assert not (tmp_path / "kept.sbatch").exists()


def test_users_sbatch_options_go_into_the_script_as_written(tmp_path, monkeypatch):
    """Options the grid does not set, including ones whose names begin like the grid's (time-min, gpus-per-task,
    mem-per-cpu) and the requeue flag, which the chain of jobs needs anyway."""
    kept = _fake_slurm(tmp_path, monkeypatch)
    items = ["account=abc", "qos=high", "mail_type=END", "constraint=a100", "exclusive", "time-min=60",
             "gpus-per-task=1", "mem-per-cpu=4G", "requeue", "--mail-user=me@example.org"]
    assert slurm.extra_options(items) == {"account": "abc", "qos": "high", "mail-type": "END",
                                          "constraint": "a100", "exclusive": True, "time-min": "60",
                                          "gpus-per-task": "1", "mem-per-cpu": "4G", "requeue": True,
                                          "mail-user": "me@example.org"}
    options = SweepOptions(backend="slurm", slurm_option=items)
    options.validate()
    slurm.submit(slurm.executor(options, tmp_path / "slurm"), Run("r", ["python"], tmp_path / "r.log"))
    lines = set(kept.read_text().splitlines())
    for want in ("#SBATCH --account=abc", "#SBATCH --qos=high", "#SBATCH --mail-type=END", "#SBATCH --requeue",
                 "#SBATCH --constraint=a100", "#SBATCH --exclusive", "#SBATCH --time-min=60", "#SBATCH --time=240",
                 "#SBATCH --gpus-per-task=1", "#SBATCH --mem-per-cpu=4G", "#SBATCH --mail-user=me@example.org"):
        assert want in lines, (want, kept.read_text())


def test_slurm_options_need_the_slurm_backend_and_slurm_itself(tmp_path, monkeypatch):
    with pytest.raises(SweepError, match=r"--slurm-partition, --slurm-local: Slurm options; add --backend slurm"):
        SweepOptions(slurm_partition="gpu", slurm_local=True).validate()
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, no srun
    with pytest.raises(SweepError, match=r"sbatch / srun are not on this machine's PATH; start the grid on a login "
                                         r"node .* \(or add --slurm-local"):
        SweepOptions(backend="slurm").validate()


def _result(folder: Path, job_id: str, value) -> None:
    """What submitit's job leaves in the grid's slurm/ folder when its function returns ``value``."""
    import pickle

    (folder / job_id).mkdir(parents=True, exist_ok=True)
    with open(folder / job_id / f"{job_id}_0_result.pkl", "wb") as fh:
        pickle.dump(("success", value), fh)


def test_a_detached_grid_submits_its_jobs_and_ends_and_started_again_reports_and_resubmits(tmp_path, monkeypatch,
                                                                                           capsys):
    """--slurm-detach: every run's job submitted, the ids recorded, the command ended (GridDetached: status 0 through
    run_cli). Started again, by the waiting grid's rules: a run whose job is still queued is left to it; a run whose
    last job was lost is submitted again, saying how that job ended (from submitit's result file, without asking
    Slurm); a run that failed in its job is reported failed and not submitted again; a run whose last job ended with
    exit 0 is done. Once no job is left, the grid goes on with the codes (the failed run's among them), as the waiting
    grid does; --slurm-resubmit submits the failed run again."""
    from shared_losses.training.processes import GridDetached

    runs = [Run(f"seed{i}", ["python", "-c", "pass"], tmp_path / "grid" / f"seed{i}.log") for i in range(4)]
    _fake_slurm(tmp_path, monkeypatch)
    options = SweepOptions(backend="slurm", slurm_detach=True)
    options.validate()
    with pytest.raises(GridDetached) as info:
        run_sweep(runs, options)
    assert str(info.value).startswith("4 unfinished run(s): 4 job(s) submitted, 0 still in Slurm's queue. This "
                                      "command ends without waiting for them (--slurm-detach).")
    out = capsys.readouterr().out
    assert f"seed1: submitted as job 4243 (log: {runs[1].log})" in out
    folder = tmp_path / "grid" / "slurm"
    names = [slurm.job_name(r) for r in runs]
    assert {k: v["job"] for k, v in slurm.recorded_jobs(folder).items()} == dict(zip(names, ["4242", "4243", "4244",
                                                                                             "4245"]))

    (tmp_path / "queue.txt").write_text(f"4242|{names[0]}\n")  # seed0's job waits in the queue
    _result(folder, "4243", 1)  # seed1's run failed in its job; seed2's job left nothing (lost); seed3's run finished
    _result(folder, "4245", 0)
    with pytest.raises(GridDetached) as info:
        run_sweep(runs, options)
    assert str(info.value).startswith("2 unfinished run(s): 1 job(s) submitted, 1 still in Slurm's queue. 1 run(s) "
                                      "failed and were not submitted again (above; --slurm-resubmit submits them).")
    out = capsys.readouterr().out
    assert "seed0: in Slurm's queue as job 4242 (pending or running)" in out
    assert ("seed1: its last job 4243 ended with exit 1 (the run failed: see its log); not submitted again (once the "
            "cause is mended, start the command with --slurm-resubmit to submit it again)") in out
    assert f"FAILED (exit 1, see {runs[1].log}): seed1" in out
    assert "seed2: its last job 4244 ended without a result (lost, cancelled, or out of requeues" in out
    assert "submitted as job 4246" in out and "done: seed3" in out and "seed3: " not in out
    record = slurm.recorded_jobs(folder)
    assert {k: v["job"] for k, v in record.items()} == dict(zip(names, ["4242", "4243", "4246", "4245"]))
    assert record[names[2]]["retries"] == 1 and record[names[0]]["retries"] == 0
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 5

    (tmp_path / "queue.txt").write_text("")  # every job has ended: the grid goes on without the failed run
    for job_id in ("4242", "4246"):
        _result(folder, job_id, 0)
    assert run_sweep(runs, options) == [0, 1, 0, 0]
    out = capsys.readouterr().out
    assert "[4/4]" in out and "failed 1" in out
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 5

    again = SweepOptions(backend="slurm", slurm_detach=True, slurm_resubmit=True)  # the cause mended
    with pytest.raises(GridDetached, match="1 unfinished run\\(s\\): 1 job\\(s\\) submitted"):
        run_sweep(runs, again)
    assert "seed1: its last job 4243 ended with exit 1 (the run failed: see its log); submitted as job 4247" in \
        capsys.readouterr().out
    _result(folder, "4247", 0)
    assert run_sweep(runs, options) == [0, 0, 0, 0]
    # another command under the same run name (a longer training asked for): not taken for done
    longer = [Run(r.name, ["python", "-c", "pass", "--more"], r.log) for r in runs]
    with pytest.raises(GridDetached, match="4 job\\(s\\) submitted"):
        run_sweep(longer, options)


def test_a_detached_run_lost_more_than_retries_times_is_reported_failed_and_a_stopped_one_continues(
        tmp_path, monkeypatch, capsys):
    """A run whose jobs are lost or killed every time (a node that fails it, the out-of-memory killer) is submitted
    again --retries times, then reported failed (exit -1 for a job without a result, the signal's code for a killed
    run) and left; the grid goes on without it. A run asked to stop (exit 130: scancel's SIGTERM, a checkpoint) is
    submitted again to continue, without counting against --retries."""
    from shared_losses.training.processes import GridDetached

    runs = [Run(name, ["python", "-c", "pass"], tmp_path / "grid" / f"{name}.log") for name in ("lost", "killed",
                                                                                                  "stopped")]
    _fake_slurm(tmp_path, monkeypatch)
    folder = tmp_path / "grid" / "slurm"
    options = SweepOptions(backend="slurm", slurm_detach=True, retries=1)
    options.validate()
    with pytest.raises(GridDetached, match="3 job\\(s\\) submitted"):
        run_sweep(runs, options)  # jobs 4242 (lost), 4243 (killed), 4244 (stopped)
    _result(folder, "4243", -9)
    _result(folder, "4244", 130)
    with pytest.raises(GridDetached, match="3 job\\(s\\) submitted"):
        run_sweep(runs, options)  # 4245, 4246, 4247: each a second job
    out = capsys.readouterr().out
    assert "killed: its last job 4243 ended with exit -9 (the run failed: see its log); submitted as job 4246" in out
    assert "stopped: its last job 4244 ended with exit 130" in out
    assert [v["retries"] for v in slurm.recorded_jobs(folder).values()] == [1, 1, 0]
    _result(folder, "4246", -9)
    _result(folder, "4247", 0)
    assert run_sweep(runs, options) == [-1, -9, 0]
    out = capsys.readouterr().out
    assert ("lost: its last job 4245 ended without a result (lost, cancelled, or out of requeues: see "
            f"{folder / '4245'}) (lost or killed 2 time(s); --retries 1); not submitted again") in out
    assert "killed: its last job 4246 ended with exit -9 (the run failed: see its log) (lost or killed 2 time(s)" in out
    assert "failed 2" in out
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 6


def test_a_detached_grid_script_ends_with_status_0_and_says_how_to_go_on(tmp_path, monkeypatch):
    """Through a grid script's command line (run_cli): the jobs' lines and the closing note on stdout, status 0, no
    table yet."""

    _fake_slurm(tmp_path, monkeypatch)
    out = tmp_path / "grid"
    cmd = [sys.executable, "scripts/fewshot_table5.py", "--out", str(out), "--seeds", "0", "--backend", "slurm",
           "--slurm-detach"]
    res = warm.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "job(s) submitted, 0 still in Slurm's queue. This command ends without waiting" in res.stdout, res.stdout
    assert "submitted as job 4242" in res.stdout and "Traceback" not in res.stderr
    assert (out / "slurm" / slurm.JOBS_FILE).exists()


def test_detach_needs_slurm_itself():
    with pytest.raises(SweepError, match="--slurm-detach with --slurm-local: the local executor's jobs are this "
                                         "command's own processes"):
        SweepOptions(backend="slurm", slurm_local=True, slurm_detach=True).validate()
    with pytest.raises(SweepError, match="--slurm-resubmit goes with --slurm-detach: a grid that waits for its jobs "
                                         "submits its failed runs again whenever it is started"):
        SweepOptions(backend="slurm", slurm_local=True, slurm_resubmit=True).validate()
