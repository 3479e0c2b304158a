"""Issue 18: shared_losses.training.sweep, the runner under the three grid scripts (local pool or Ray)."""

import subprocess
import sys
import time
from pathlib import Path

import pytest

from shared_losses.training.sweep import Run, SweepError, SweepOptions, dataclass_flags, run_sweep

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
    res = subprocess.run([sys.executable, str(ROOT / "scripts" / "curl_table3.py"), "--out", str(tmp_path / "grid"),
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
