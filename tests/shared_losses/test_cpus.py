"""The CPUs a process may use: its affinity (a Slurm job's, taskset's) and its cgroup's CPU quota (a container's
--cpus), which os.cpu_count() and torch's own thread count do not show; and a machine's GPUs that torch cannot use."""

from pathlib import Path

import pytest

from tests.file_tree import write_files


def test_the_cpus_a_process_may_use_are_its_affinity_not_the_machine_s(monkeypatch):
    """A grid or SentEval inside a Slurm job given 4 CPUs of a 64-core node took os.cpu_count() (64): qt_table2's
    local runs were given 64 / --parallel threads each, SentEval's --jobs -1 fitted 64 regressions at once."""
    import os
    import subprocess
    import sys
    import types
    from pathlib import Path

    from shared_losses.training.runtime import usable_cpus

    root = Path(__file__).resolve().parents[2]
    if hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1:  # a real restriction, as taskset makes
        first = min(os.sched_getaffinity(0))
        code = ("import os; os.sched_setaffinity(0, {%d}); from shared_losses.training.runtime import usable_cpus; "
                "from nlp_qt.senteval.protocols import _usable_cpus; print(usable_cpus(), _usable_cpus(), "
                "os.cpu_count())" % first)
        out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
        assert out.stdout.split()[:2] == ["1", "1"] and int(out.stdout.split()[2]) > 1, out.stdout + out.stderr
    import shared_losses.training.runtime as runtime

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    monkeypatch.setattr(runtime, "cpu_quota", lambda: None)
    assert usable_cpus() == 4
    monkeypatch.setattr(runtime, "cpu_quota", lambda: 1.5)  # a container's --cpus 1.5: two threads
    assert usable_cpus() == 2
    from nlp_qt.senteval.protocols import _usable_cpus

    assert _usable_cpus() == 2  # SentEval's --jobs -1: two regressions at once, not four
    monkeypatch.setattr(runtime, "cpu_quota", lambda: None)
    sys.path.insert(0, str(root / "scripts"))
    try:
        import qt_table2
    finally:
        sys.path.remove(str(root / "scripts"))
    env = qt_table2._env(types.SimpleNamespace(threads=0, backend="local", parallel=2, cpus_per_run=1.0))
    assert env == {"OMP_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"}


def test_senteval_counts_its_cpus_where_torch_cannot_be_imported(tmp_path):
    """SentEval's evaluation also runs without torch (shared_losses, which reads the CPU quota, imports it): there it
    counts the process's affinity."""
    import os
    import subprocess
    import sys

    blocker = tmp_path / "torch"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('no torch in this environment')\n")
    code = ("import os, sys; from nlp_qt.senteval.protocols import _usable_cpus; "
            "print(_usable_cpus(), len(os.sched_getaffinity(0)), 'torch' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    mine, affinity, torch_loaded = out.stdout.split()
    assert mine == affinity and torch_loaded == "False"


def test_a_cgroups_cpu_quota_is_read_from_v2_and_v1_with_the_cgroups_above(tmp_path):
    from shared_losses.training.runtime import cpu_quota

    proc = tmp_path / "cgroup"
    proc.write_text("0::/kubepods/pod1/ctr\n")
    root = tmp_path / "v2"
    write_files(root, {"kubepods/pod1/ctr/cpu.max": "max 100000\n", "kubepods/pod1/cpu.max": "250000 100000\n",
                  "kubepods/cpu.max": "max 100000\n"})
    assert cpu_quota(str(proc), str(root)) == 2.5  # the pod's limit, above the container's
    (root / "kubepods/pod1/cpu.max").write_text("max 100000\n")
    assert cpu_quota(str(proc), str(root)) is None
    proc.write_text("4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc\n")
    root = tmp_path / "v1"
    write_files(root, {"cpu,cpuacct/cpu.cfs_quota_us": "50000\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    assert cpu_quota(str(proc), str(root)) == 0.5  # a container's own view: its cgroup is the mount's root
    (root / "cpu,cpuacct/cpu.cfs_quota_us").write_text("-1\n")
    assert cpu_quota(str(proc), str(root)) is None
    assert cpu_quota(str(tmp_path / "none"), str(root)) is None


def test_torch_threads_left_to_torch_stay_within_the_cpu_quota(monkeypatch, tmp_path):
    """torch follows the affinity but not a container's CPU quota: with 2 cores visible and a quota of 1 CPU it ran 2
    threads, 1.2 times slower than 1 (8 threads: 1.6 times). Where --torch-threads (0) and OMP_NUM_THREADS leave the
    count to torch, the trainers keep it within the quota."""
    import torch

    import shared_losses.training.runtime as runtime
    from nlp_qt.config import Config
    from nlp_qt.train import train

    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cpus", lambda: 1)
    try:
        torch.set_num_threads(2)
        runtime.threads_within_the_cpu_limit()
        assert torch.get_num_threads() == 1
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")  # chosen by the user: left alone
        runtime.threads_within_the_cpu_limit()
        assert torch.get_num_threads() == 2
        monkeypatch.delenv("OMP_NUM_THREADS")
        root = Path(__file__).resolve().parents[2]
        cfg = Config(corpus=str(root / "nlp_qt" / "data" / "books"), max_sentences=300, vocab_size=300, word_dim=8,
                     encoder_dim=8, batch_size=16, max_steps=2, progress=False, output_dir=str(tmp_path / "run"))
        assert train(cfg)["torch_threads"] == 1
        assert torch.get_num_threads() == 2  # given back to the caller
    finally:
        torch.set_num_threads(before)


def test_a_run_on_the_cpu_of_a_machine_with_gpus_says_why_torch_cannot_use_them(monkeypatch):
    """A CPU-only torch on a GPU node (the default wheel of some package indexes) trained the papers' sizes on the
    CPU, hours instead of minutes, without a word."""
    import warnings

    import torch

    import shared_losses.training.runtime as runtime

    monkeypatch.delenv("ACCELERATE_USE_CPU", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(runtime, "gpu_available", lambda: False)
    monkeypatch.setattr(runtime, "nvidia_gpus_here", lambda: 2)
    monkeypatch.setattr(torch.version, "cuda", None)
    with pytest.warns(UserWarning) as seen:
        runtime.say_if_the_gpu_goes_unused(cpu=False)
    (text,) = [str(w.message) for w in seen]
    assert text == (f"this machine has 2 NVIDIA GPU(s) but the run trains on the CPU: the torch installed "
                    f"({torch.__version__}) is a CPU-only build; install a CUDA build into the environment "
                    "(docs/getting_started.md, \"Which torch\"); --device cpu chooses the CPU and says nothing")
    monkeypatch.setattr(torch.version, "cuda", "12.4")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.warns(UserWarning, match="CUDA_VISIBLE_DEVICES='' hides them"):
        runtime.say_if_the_gpu_goes_unused(cpu=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.warns(UserWarning, match=r"cannot use them \(torch.cuda.is_available\(\) is False"):
        runtime.say_if_the_gpu_goes_unused(cpu=False)
    with warnings.catch_warnings():  # the CPU chosen, no GPU listed, or accelerate told to use the CPU: nothing
        warnings.simplefilter("error")
        runtime.say_if_the_gpu_goes_unused(cpu=True)
        monkeypatch.setenv("ACCELERATE_USE_CPU", "true")
        runtime.say_if_the_gpu_goes_unused(cpu=False)
        monkeypatch.delenv("ACCELERATE_USE_CPU")
        monkeypatch.setattr(runtime, "nvidia_gpus_here", lambda: 0)
        runtime.say_if_the_gpu_goes_unused(cpu=False)
