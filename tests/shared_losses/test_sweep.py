"""Issue 18: shared_losses.training.sweep, the runner under the three grid scripts (local pool or Ray)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared_losses.training.sweep import Run, SweepError, SweepOptions, dataclass_flags, run_sweep
from tests import warm

ROOT = Path(__file__).resolve().parents[2]


def _qt_command(corpus: str, out: Path, max_steps: int) -> list[str]:
    return [sys.executable, "-m", "nlp_qt.train", "--corpus", corpus, "--output-dir", str(out), "--batch-size", "8",
            "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "200", "--max-length", "12", "--lr", "1e-2",
            "--checkpoint-every", "2", "--log-every", "1", "--epochs", "10000", "--max-steps", str(max_steps),
            "--seed", "0", "--resume", "--no-progress"]


def _kill_when_checkpointed(out: Path, timeout: float = 120.0) -> bool:
    """kill -9 the nlp_qt.train process writing ``out`` once its first checkpoint is on disk."""
    import psutil

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (out / "checkpoint" / "COMPLETE").exists():
            for p in psutil.process_iter(["cmdline"]):
                cmd = p.info["cmdline"] or []
                if "nlp_qt.train" in cmd and str(out) in cmd:
                    p.kill()
                    return True
        time.sleep(0.05)
    return False


@pytest.mark.slow  # Ray
def test_sweep_on_ray_retries_a_run_killed_mid_run_and_it_ends_as_an_uninterrupted_run(tmp_path, ray_local, capsys):
    """A run whose process is killed with kill -9 after its first checkpoint is started again by the sweep,
    continues from that checkpoint, and ends with the weights of the same run left alone."""
    import threading

    from safetensors.torch import load_file

    from tests.nlp_qt.test_train import _cfg

    corpus = _cfg(tmp_path, "unused").corpus
    steps = 120
    killed_run, plain_run = tmp_path / "killed", tmp_path / "plain"
    killer = {}
    t = threading.Thread(target=lambda: killer.update(ok=_kill_when_checkpointed(killed_run)))
    t.start()
    rcs = run_sweep([Run("killed", _qt_command(corpus, killed_run, steps), tmp_path / "killed.log", cwd=str(ROOT))],
                    SweepOptions(backend="ray", retries=1))
    t.join()
    assert killer.get("ok"), "the run was never seen with a checkpoint (too fast?)"
    out = capsys.readouterr().out
    assert rcs == [0] and "retrying killed (exit -9; attempt 2 of 2" in out and "[1/1] done: killed" in out
    assert "resumed from" in (tmp_path / "killed.log").read_text()
    assert run_sweep([Run("plain", _qt_command(corpus, plain_run, steps), tmp_path / "plain.log", cwd=str(ROOT))],
                     SweepOptions(backend="local")) == [0]
    a = load_file(str(killed_run / "model" / "model.safetensors"))
    b = load_file(str(plain_run / "model" / "model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


def test_sweep_runs_not_killed_by_a_signal_are_not_retried_and_codes_keep_their_order(tmp_path, capsys):
    runs = [Run(f"r{i}", [sys.executable, "-c", f"import sys; print('run {i}'); sys.exit({i % 2})"],
                tmp_path / f"r{i}.log") for i in range(3)]
    assert run_sweep(runs, SweepOptions(parallel=2)) == [0, 1, 0]
    out = capsys.readouterr().out
    assert "retrying" not in out and out.count("FAILED (exit 1, see ") == 1 and "[3/3]" in out
    assert (tmp_path / "r1.log").read_text() == "run 1\n"


@pytest.mark.slow  # Ray, in a subprocess
def test_sweep_refuses_an_unreachable_ray_address_in_seconds_with_one_line(tmp_path):
    """An --address where nothing listens fails fast, naming it; no run is started."""
    t0 = time.monotonic()
    res = warm.run([sys.executable, str(ROOT / "scripts" / "curl_table3.py"), "--out", str(tmp_path / "grid"),
                          "--tasks", "cartpole-swingup", "--objectives", "curl", "--seeds", "0", "--backend", "ray",
                          "--address", "127.0.0.1:1"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2 and time.monotonic() - t0 < 60
    assert res.stderr.startswith("error: --address 127.0.0.1:1: no Ray cluster reachable there")
    assert "Traceback" not in res.stderr and not (tmp_path / "grid" / "cartpole-swingup").exists()


@pytest.mark.slow  # Ray (starts the local cluster)
def test_sweep_asking_for_gpus_on_a_ray_cluster_without_any_says_so_before_launching(tmp_path, ray_local):
    sys.path.insert(0, str(ROOT / "scripts"))
    import curl_table3

    args = curl_table3.Args(out=str(tmp_path), tasks=["cartpole-swingup"], objectives=["curl"], seeds=[0],
                            backend="ray", gpus_per_run=1)
    with pytest.raises(SweepError, match=r"asks for 1 GPU\(s\) but the Ray cluster's nodes have 0 \(no GPU at all\)"):
        curl_table3.main(args)
    assert not any(tmp_path.iterdir())


@pytest.mark.slow  # Ray (starts the local cluster)
def test_runs_on_ray_that_take_every_cpu_run_one_after_the_other(tmp_path, ray_local):
    """Each task asked the grid's stop flag with a blocking ray.get every 2 s; a task blocked so lends its CPUs back,
    and Ray started the next run on them: two runs of --cpus-per-run 2 at once on a 2-CPU cluster."""
    span = "import sys, time; print(time.time(), flush=True); time.sleep(5); print(time.time())"
    runs = [Run(f"r{i}", [sys.executable, "-c", span], tmp_path / f"r{i}.log", cpus=2) for i in range(3)]
    assert run_sweep(runs, SweepOptions(backend="ray", cpus_per_run=2)) == [0, 0, 0]
    spans = sorted(tuple(float(t) for t in (tmp_path / f"r{i}.log").read_text().split()) for i in range(3))
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert start >= end - 0.05, spans  # the next run starts once the last one has ended


def test_sweep_options_are_checked_before_anything_runs():
    for kw, msg in [({"backend": "pbs"}, "--backend 'pbs'"), ({"address": "auto"}, "add --backend ray"),
                    ({"parallel": 0}, "--parallel 0"), ({"gpus_per_run": -1}, "--gpus-per-run"),
                    ({"retries": -1}, "--retries -1")]:
        with pytest.raises(SweepError, match=msg):
            SweepOptions(**kw).validate()
    with pytest.raises(SweepError, match="expected auto, HOST:PORT"):
        from shared_losses.training.sweep import _check_reachable

        _check_reachable("somewhere")


def test_sweep_dataclass_flags_round_trip_through_tyro():
    """dataclass_flags writes a configuration as its application's command line; tyro reads it back equal."""
    import tyro

    from fewshot.config import FewShotConfig, preset_config

    cfg = preset_config("cpu", objective="ce+scl", n_labeled=100, seed=3, prior=0.4, estimate_prior=True,
                        max_eval=None, export=False, output_dir="runs/x", encoder="minilm", pooling="mean")
    base = preset_config("cpu")
    flags = dataclass_flags(cfg, base)
    assert "--no-export" in flags and "--estimate-prior" in flags
    assert tyro.cli(FewShotConfig, args=flags, default=base) == cfg
    full = dataclass_flags(cfg)  # against the plain defaults
    assert tyro.cli(FewShotConfig, args=full) == cfg


@pytest.mark.slow  # process trees in subprocesses
def test_sweep_run_dies_with_the_process_that_started_it(tmp_path):
    """A Ray worker killed mid-run must not leave its run training on (the retried task would start a second
    process on the same folder): the run's process is killed with the one that started it (Linux)."""
    import psutil

    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux only")
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r}); from shared_losses.training.sweep import execute; "
              f"execute([sys.executable, '-c', 'import time; time.sleep(120)'], {str(tmp_path / 'log')!r}, None, {{}})")
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        children = []
        while not children and time.monotonic() < deadline:
            children = psutil.Process(parent.pid).children()
            time.sleep(0.05)
        assert children, "the run's process never started"
        child = children[0]
        parent.kill()
        parent.wait()
        gone, alive = psutil.wait_procs([child], timeout=10)
        assert gone and not alive
    finally:
        parent.kill()


def test_from_caller_makes_existing_relative_paths_absolute(tmp_path, monkeypatch):
    """A grid script's input path as its runs (started in the repository's root) will read it."""
    from shared_losses.training.sweep import from_caller

    (tmp_path / "data.csv").write_text("x")
    (tmp_path / "folder").mkdir()
    monkeypatch.chdir(tmp_path)
    assert from_caller("data.csv") == str(tmp_path / "data.csv")
    assert from_caller("folder") == str(tmp_path / "folder")
    for kept in ("mnist", "glue/sst2", "hf:bookcorpus", "minilm", "/abs/missing.csv", "", None):
        assert from_caller(kept) == kept  # names, absolute paths and what the caller's folder lacks stay as given


#: A run that behaves as our trainers do when asked to stop (StopSignals): the first SIGINT / SIGTERM / SIGHUP is a
#: request (later ones change nothing), honoured after the step in progress by writing its checkpoint (a file here,
#: naming the signal) and exiting with 130. It says it started (a file), then works until asked.
_STOPPABLE_RUN = """
import pathlib, signal, sys, time
out = pathlib.Path(sys.argv[1])
asked = []
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, lambda signum, frame: asked.append(signal.Signals(signum).name))
out.mkdir(parents=True, exist_ok=True)
(out / "started").write_text("")
for _ in range(2400):
    if asked:
        time.sleep(0.5)  # the step in progress, then the checkpoint
        (out / "checkpoint").write_text(",".join(asked))  # every request received, in order
        sys.exit(130)
    time.sleep(0.05)
"""


def _grid_driver(tmp_path: Path, runs: int = 3, parallel: int = 2, backend: str = "local",
                 run_script: str = _STOPPABLE_RUN) -> subprocess.Popen:
    """A grid of ``runs`` stoppable runs (``run_script``), ``parallel`` at a time (Ray: as its resources allow),
    through run_cli as the grid scripts run, in its own process group (the terminal's Ctrl-C reaches the whole
    group)."""
    (tmp_path / "run.py").write_text(run_script)
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from shared_losses.training.cli import run_cli\n"
              "from shared_losses.training.sweep import Run, SweepOptions, run_sweep\n"
              f"runs = [Run(f'r{{i}}', [sys.executable, {str(tmp_path / 'run.py')!r}, {str(tmp_path)!r} + f'/r{{i}}'],"
              f" {str(tmp_path)!r} + f'/r{{i}}.log') for i in range({runs})]\n"
              "import os\n"  # Ray here has the machine's CPUs: each run asks for its share, `parallel` fit
              + (f"options = SweepOptions(backend={backend!r}, retries=0, parallel={parallel}, "
                 f"cpus_per_run=1.0 if {backend!r} == 'local' else os.cpu_count() / {parallel})\n"
                 if backend != "slurm-local" else
                 "options = SweepOptions(backend='slurm', slurm_local=True, slurm_time=10, retries=0)\n")
              + "sys.exit(run_cli(lambda: run_sweep(runs, options)))\n")
    # as a terminal's foreground command: Ctrl-C not ignored, even when the suite itself was started with SIGINT
    # ignored (`nohup ... &` from a script: the driver then never saw the Ctrl-C and the test timed out)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _when_started(tmp_path: Path, names, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not all((tmp_path / n / "started").exists() for n in names):
        assert time.monotonic() < end, "the runs never started"
        time.sleep(0.05)


def _sigterm_once_started(proc: subprocess.Popen, tmp_path: Path) -> tuple[str, str]:
    """SIGTERM to the grid's process once its runs r0 and r1 have started (a kill, a scheduler's cancel); its stdout
    and stderr when it has ended (killed with its group if it has not within two minutes)."""
    import os
    import signal

    try:
        _when_started(tmp_path, ["r0", "r1"], timeout=180)
        os.kill(proc.pid, signal.SIGTERM)
        return proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.mark.slow  # grids of processes in subprocesses
@pytest.mark.parametrize("backend, how", [("local", "Ctrl-C"), ("local", "SIGTERM"), ("local", "SIGHUP"),
                                          ("ray", "Ctrl-C"), ("ray", "SIGTERM")])
def test_a_stopped_grid_waits_for_its_runs_checkpoints_and_says_how_to_continue(tmp_path, backend, how):
    """Ctrl-C in the grid's terminal (SIGINT to the whole group), a kill / a scheduler's cancel (SIGTERM to the grid's
    process alone) or a closed terminal (SIGHUP): each run in progress writes its checkpoint and ends (a SIGTERM or
    SIGHUP used to end the grid at once, and its runs with it, killed before their checkpoints), no other run starts,
    each stopped run is reported as stopped (not FAILED), and the grid ends with status 130 saying to start it again
    (not "work since the last checkpoint is lost"). With Ray, SIGTERM also checks that the grid's handler is put back
    over the one ray.init installs (Ray's ends the process at once: no checkpoint)."""
    import os
    import signal

    if backend == "ray":
        pytest.importorskip("ray")
    proc = _grid_driver(tmp_path, backend=backend)
    try:
        _when_started(tmp_path, ["r0", "r1"], timeout=180)
        if how == "Ctrl-C":
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, getattr(signal, how))
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, (out, err)
    for name in ("r0", "r1"):
        asked = (tmp_path / name / "checkpoint").read_text().split(",")
        if (how, backend) == ("Ctrl-C", "local"):
            # the terminal's Ctrl-C reaches the local pool's runs (its process group); the grid's own request
            # (SIGTERM) follows, and on a loaded machine can even come first: the run took both as one request
            assert "SIGINT" in asked and set(asked) <= {"SIGINT", "SIGTERM"}, (name, asked, out, err)
        else:  # the signal reached the grid's process alone (or Ray's runs): the grid asks its runs to stop
            assert asked == ["SIGTERM"], (name, asked, out, err)
        assert f"stopped (exit 130: asked to stop; see {tmp_path / name}.log)" in out, out
    assert not (tmp_path / "r2").exists() and "FAILED" not in out  # the third run was never started
    assert err.strip().splitlines()[-1] == (
        f"stopped ({how}): the runs in progress were asked to stop after their step with a checkpoint, and ended; no "
        "other run was started. Start the same command again to continue the grid: finished runs are skipped, "
        "stopped ones continue from their checkpoints"), err
    assert "lost" not in err and "Traceback" not in err, err


@pytest.mark.slow  # a grid of processes in a subprocess
def test_runs_ended_by_the_grids_own_stop_before_their_handler_are_stopped_not_failed(tmp_path):
    """A run the stopping grid's SIGTERM reached before it had installed its handler (still importing) ended with
    exit -15 and was reported "FAILED (exit -15 ...)", counted as failed, though the grid had asked it to stop."""

    # runs that take SIGTERM's default action (no handler: killed by it)
    proc = _grid_driver(tmp_path, run_script="import pathlib, sys, time\nout = pathlib.Path(sys.argv[1])\n"
                                             "out.mkdir(parents=True, exist_ok=True)\n(out / 'started').touch()\n"
                                             "time.sleep(120)\n")
    out, err = _sigterm_once_started(proc, tmp_path)
    assert proc.returncode == 130, (out, err)
    assert "FAILED" not in out and "failed 0, stopped 2)" in out, out
    for name in ("r0", "r1"):
        assert f"stopped (exit 130: asked to stop; see {tmp_path / name}.log)" in out, out


@pytest.mark.slow  # a grid of processes in a subprocess
def test_a_slurm_local_grid_stopped_by_sigterm_cancels_its_jobs_and_waits_for_their_checkpoints(tmp_path):
    """--slurm-local's jobs are the command's own processes: SIGTERM to the grid said they "stay in Slurm's queue",
    left them training with nothing waiting for them, and the same command started again failed every run on its
    folder still in use."""

    import psutil

    proc = _grid_driver(tmp_path, runs=2, backend="slurm-local")
    out, err = _sigterm_once_started(proc, tmp_path)
    assert proc.returncode == 130, (out, err)
    assert err.strip().splitlines()[-1].startswith("stopped (SIGTERM): cancelled the grid's 2 unfinished job(s)"), err
    for name in ("r0", "r1"):
        assert (tmp_path / name / "checkpoint").exists(), name  # written before the grid ended
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if str(tmp_path / "run.py") in (p.info["cmdline"] or [])]
    assert not left, left


def test_a_slurm_grid_stopped_by_a_signal_leaves_its_jobs_and_by_ctrl_c_cancels_them(monkeypatch):
    """The Slurm backend: SIGTERM / SIGHUP (a driver job at its time limit, a closed terminal) leave the grid's jobs
    in the queue, for the next start to wait for; Ctrl-C cancels them (each run checkpoints on the cancel)."""
    import os
    import signal

    pytest.importorskip("submitit")
    from shared_losses.training import slurm
    from shared_losses.training.processes import GridInterrupted, GridSignals
    from shared_losses.training.sweep import _Progress

    class Job:
        cancelled = 0

        def __init__(self, stop):
            self.stop = stop

        def done(self):
            self.stop()
            return False

        def cancel(self, check=True):
            Job.cancelled += 1

    def term():
        os.kill(os.getpid(), signal.SIGTERM)

    def ctrl_c():
        raise KeyboardInterrupt

    runs = [Run("r0", ["true"], Path("/tmp/grid/r0.log")), Run("r1", ["true"], Path("/tmp/grid/r1.log"))]
    monkeypatch.setattr(slurm, "executor", lambda options, folder: None)
    for stop, words, cancelled in ((term, "stopped (SIGTERM): the grid's 2 unfinished job(s) stay in Slurm's queue; "
                                          "start the same command again to wait for them", 0),
                                   (ctrl_c, "stopped (Ctrl-C): cancelled the grid's 2 unfinished job(s)", 2)):
        Job.cancelled = 0
        monkeypatch.setattr(slurm, "submit_or_attach", lambda r, o, e, f: {i: Job(stop) for i in range(len(r))})
        with GridSignals() as signals, pytest.raises(GridInterrupted) as info:
            # Slurm's own jobs (the executor is a stand-in: nothing is submitted); --slurm-local's jobs are the
            # command's processes, cancelled on every stop (the test above)
            slurm.run_jobs(runs, SweepOptions(backend="slurm"), _Progress(2, True, signals), None)
        assert str(info.value).startswith(words) and Job.cancelled == cancelled


# ------------------------------------------------------------------------------------------ one grid per folder

def _hold_lock(out: Path) -> subprocess.Popen:
    """Another grid, still running: a process holding the grid lock of ``out`` until it is killed."""
    code = ("import sys, time\nfrom shared_losses.training.sweep import grid_lock\nwith grid_lock(sys.argv[1]):\n"
            "    print('held', flush=True)\n    time.sleep(300)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(out)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_grid_on_one_folder_is_refused_at_once_and_a_killed_ones_lock_does_not_block(tmp_path):
    """Two starts of one grid on one --out both failed: each exited 1 with a FAILED run (the other grid was training
    it). The second start is refused at once now, naming the grid that holds the folder; the lock goes with that
    grid's process, however it ends (kill -9 here)."""
    from shared_losses.training.sweep import LOCK_NAME, grid_lock

    out = tmp_path / "grid"
    holder = _hold_lock(out)
    try:
        runs = [Run("r0", [sys.executable, "-c", "print('ran')"], out / "r0.log")]
        with pytest.raises(SweepError, match=rf"^--out {out} is in use by another grid still running \(pid "
                                             rf"{holder.pid} on .*\): wait for it to end, or use another --out"):
            run_sweep(runs, SweepOptions(), lock=out)
        assert not (out / "r0.log").exists()  # nothing started
    finally:
        holder.kill()
        holder.wait()
    assert (out / LOCK_NAME).exists()  # left by the killed grid: stale, not in the way
    assert run_sweep(runs, SweepOptions(), lock=out) == [0]
    assert (out / "r0.log").read_text() == "ran\n" and not (out / LOCK_NAME).exists()
    with grid_lock(out), grid_lock(out):  # the same process again (a script holding it, then run_sweep): one holder
        assert (out / LOCK_NAME).exists()
    assert not (out / LOCK_NAME).exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/fd")
def test_a_grids_runs_do_not_hold_its_lock(tmp_path):
    """The runs a grid starts do not get the lock's descriptor (a run left over after its grid would keep the folder
    locked)."""
    check = ("import os, sys\nlinks = [os.readlink(f'/proc/self/fd/{fd}') for fd in os.listdir('/proc/self/fd')\n"
             "         if os.path.exists(f'/proc/self/fd/{fd}')]\nsys.exit(3 if any('.grid.lock' in x for x in links) "
             "else 0)\n")
    assert run_sweep([Run("r0", [sys.executable, "-c", check], tmp_path / "r0.log")], SweepOptions(),
                     lock=tmp_path) == [0]


def test_a_grid_folder_that_cannot_be_made_is_refused_in_one_line_naming_it(tmp_path):
    from shared_losses.training.sweep import grid_lock

    (tmp_path / "file").write_text("")
    with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'file'} is a file, not a folder"):
        with grid_lock(tmp_path / "file"):
            pass
    with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'file' / 'x'}: cannot make the folder \(Not a dir"):
        run_sweep([Run("r0", [sys.executable, "-c", "pass"], tmp_path / "file" / "x" / "r0.log")], SweepOptions(),
                  lock=tmp_path / "file" / "x")


def test_a_file_system_without_locks_warns_and_the_grid_goes_on(tmp_path, monkeypatch):
    # Lustre mounted without flock answers ENOSYS: the grid is not refused there, it is told a second grid would not be
    import errno
    import fcntl

    from shared_losses.training.sweep import LOCK_NAME, grid_lock

    def no_locks(fd, op):
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.warns(UserWarning, match="cannot lock .*Function not implemented.*would not be refused"):
        with grid_lock(tmp_path / "out"):
            assert (tmp_path / "out" / LOCK_NAME).exists()
    assert not (tmp_path / "out" / LOCK_NAME).exists()


def test_a_run_stopped_before_it_started_is_not_pointed_to_a_log_it_never_wrote(tmp_path, capsys):
    """After a stop on Ray, the runs still waiting for their resources were reported "stopped (exit 130: asked to
    stop; see R.log)", a log that does not exist."""
    from shared_losses.training.processes import GridSignals
    from shared_losses.training.sweep import _Progress

    (tmp_path / "ran.log").write_text("step 1\n")
    progress = _Progress(2, False, GridSignals())
    for name in ("ran", "waited"):
        progress.started()
        progress.finished(Run(name, ["true"], tmp_path / f"{name}.log"), 130)
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"[1/2] stopped (exit 130: asked to stop; see {tmp_path / 'ran.log'}): ran")
    assert out[1].startswith("[2/2] stopped before it started (no log): waited")


def test_a_table_made_while_a_grid_runs_on_its_folder_says_so(tmp_path, capsys):
    """--aggregate-only takes no lock (it reads): while a grid still runs there, its table counts the runs finished so
    far, and nothing said so."""
    from shared_losses.training.sweep import LOCK_NAME, note_running_grid

    out = tmp_path / "grid"
    note_running_grid(out)  # no folder, no lock: nothing to say, nothing made
    assert capsys.readouterr().err == "" and not out.exists()
    holder = _hold_lock(out)
    try:
        note_running_grid(out)
        err = capsys.readouterr().err
        assert err.startswith(f"note: a grid is still running on --out {out} (pid {holder.pid} on ") and \
            "counts the runs finished so far" in err and err.count("\n") == 1
    finally:
        holder.kill()
        holder.wait()
    note_running_grid(out)  # the killed grid's lock file stays, its lock went with it
    assert capsys.readouterr().err == "" and (out / LOCK_NAME).exists()


def test_a_local_grids_runs_share_the_cpus_as_their_threads(tmp_path, monkeypatch):
    """torch's default thread count is every CPU the process may use, for each run: --parallel 4 on 4 CPUs ran 16
    threads. Each run now gets its share (OMP_NUM_THREADS), unless the caller or the run's own environment set one."""
    import shared_losses.training.runtime as runtime

    monkeypatch.setattr(runtime, "usable_cpus", lambda: 4)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    show = [sys.executable, "-c", "import os; print(os.environ.get('OMP_NUM_THREADS'))"]

    def threads(options, **env):
        runs = [Run(f"r{i}", show, tmp_path / f"r{i}.log", env=env) for i in range(2)]
        assert run_sweep(runs, options) == [0, 0]
        seen = [(tmp_path / f"r{i}.log").read_text().strip() for i in range(2)]
        for i in range(2):
            (tmp_path / f"r{i}.log").unlink()
        return seen

    assert threads(SweepOptions(parallel=2)) == ["2", "2"]
    assert threads(SweepOptions(parallel=8)) == ["1", "1"]
    assert threads(SweepOptions(parallel=1)) == ["4", "4"]
    assert threads(SweepOptions(parallel=2), OMP_NUM_THREADS="3") == ["3", "3"]  # the run's own
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the caller's
    assert threads(SweepOptions(parallel=2)) == ["1", "1"]
