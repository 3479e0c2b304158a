"""The memory a run may use: the host's free memory, or the tighter limit of the process's cgroup (a Slurm job's
--mem, a container's limit), which /proc/meminfo does not show: a replay checked against the host's memory alone
passed under a job limit it could not fit, and the run was killed for memory when its ring was nearly full."""

from pathlib import Path

import pytest

from rl_curl import train
from tests.file_tree import write_files

GiB = 2**30


def test_cgroup_v2_takes_the_tightest_limit_of_the_cgroup_and_those_above_it(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("0::/system.slice/slurmstepd.scope/job_7/step_0\n")
    root = tmp_path / "fs"
    write_files(root, {
        # the job's limit (16 GiB, 10 GiB used, of it 3 GiB file cache it can give back), a looser one below it
        "system.slice/slurmstepd.scope/job_7/memory.max": f"{16 * GiB}\n",
        "system.slice/slurmstepd.scope/job_7/memory.current": f"{10 * GiB}\n",
        "system.slice/slurmstepd.scope/job_7/memory.stat": f"anon {7 * GiB}\ninactive_file {3 * GiB}\n",
        "system.slice/slurmstepd.scope/job_7/step_0/memory.max": "max\n",
        "system.slice/slurmstepd.scope/job_7/step_0/memory.current": f"{GiB}\n",
        "system.slice/memory.max": "max\n",
        "system.slice/memory.current": f"{40 * GiB}\n",
    })
    assert train.cgroup_memory_room(str(proc), str(root)) == 9 * GiB
    (root / "system.slice/slurmstepd.scope/job_7/memory.max").write_text("max\n")  # no limit anywhere
    assert train.cgroup_memory_room(str(proc), str(root)) is None


def test_cgroup_v1_reads_the_hierarchical_limit_and_a_container_s_own_view(tmp_path):
    proc = tmp_path / "cgroup"
    proc.write_text("12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n")
    root = tmp_path / "fs"
    write_files(root, {  # the container's cgroup is the root of its view: /docker/abc is not there
        "memory/memory.limit_in_bytes": f"{8 * GiB}\n",
        "memory/memory.usage_in_bytes": f"{5 * GiB}\n",
        "memory/memory.stat": f"cache {2 * GiB}\nhierarchical_memory_limit {8 * GiB}\ntotal_inactive_file {GiB}\n",
    })
    assert train.cgroup_memory_room(str(proc), str(root)) == 4 * GiB
    write_files(root, {"memory/memory.stat": "hierarchical_memory_limit 9223372036854771712\n",
                  "memory/memory.limit_in_bytes": "9223372036854771712\n"})
    assert train.cgroup_memory_room(str(proc), str(root)) is None  # v1's "no limit"
    assert train.cgroup_memory_room(str(tmp_path / "no such file"), str(root)) is None


def test_a_replay_that_fits_the_machine_but_not_the_job_is_refused_naming_the_limit(tmp_path, monkeypatch):
    from rl_curl.config import Config

    # a cartpole run of 100k environment steps at action repeat 8 fills 12,500 transitions of its ring: 0.4 GiB
    cfg = Config(replay_capacity=100_000).resolved()
    monkeypatch.setattr(train, "cgroup_memory_room", lambda: GiB // 5)
    with pytest.raises(ValueError, match=r"^the run will need 0\.4 GiB of memory for the replay \(12,500 transitions "
                                         r"of 100x100 frames\) but only 0\.2 GiB is available within this process's "
                                         r"memory limit \(a Slurm job's --mem, a container's limit\); lower "
                                         r"--replay-capacity \(100000 is the paper's\), --env-steps or --image-size$"):
        train.check_replay_memory(cfg, train.torch.device("cpu"))
    monkeypatch.setattr(train, "cgroup_memory_room", lambda: GiB // 2)
    train.check_replay_memory(cfg, train.torch.device("cpu"))  # its whole ring (3.1 GiB) is only reserved
    # a resume reads its saved replay onto the host before copying it into the ring: twice the frames for a moment
    # (where there is a checkpoint to read: a grid's runs are all started with --resume)
    resumed = Config(replay_capacity=100_000, resume=True, output_dir=str(tmp_path)).resolved()
    train.check_replay_memory(resumed, train.torch.device("cpu"))
    (tmp_path / "checkpoint").mkdir()
    with pytest.raises(ValueError, match=r"will need 0\.8 GiB"):
        train.check_replay_memory(resumed, train.torch.device("cpu"))
    # a checkpoint whose frames are files (rl_curl.replay.ReplayCheckpoint) is read a file at a time: the largest
    (tmp_path / "checkpoint" / "COMPLETE").write_text("{}")
    (tmp_path / "checkpoint" / "replay_frames").mkdir()
    for name, size in (("frames_000000000000_000000001000.pt", GiB // 20), ("frames_000000001000_000000001100.pt", 9)):
        with open(tmp_path / "checkpoint" / "replay_frames" / name, "wb") as fh:
            fh.truncate(size)  # sparse: its size is what counts
    train.check_replay_memory(resumed, train.torch.device("cpu"))  # 0.4 GiB + 0.05 GiB
    monkeypatch.setattr(train, "cgroup_memory_room", lambda: int(GiB * 0.42))
    with pytest.raises(ValueError, match=r"will need 0\.4 GiB"):
        train.check_replay_memory(resumed, train.torch.device("cpu"))
    monkeypatch.setattr(train, "cgroup_memory_room", lambda: None)
    assert train.available_memory()[1] == "on this machine"


def test_a_ring_larger_than_the_machine_is_refused_though_the_run_would_fill_little_of_it(monkeypatch):
    """Allocated whole at once, a ring larger than the host's memory fails to allocate (MemoryError) however little
    of it the run would fill."""
    from rl_curl.config import Config

    monkeypatch.setattr(train, "host_memory", lambda: 2 * GiB)
    with pytest.raises(ValueError, match=r"^--replay-capacity 100000 needs 3\.1 GiB of memory for the replay \(100x100 "
                                         r"frames\) but only 2\.0 GiB is available on this machine"):
        train.check_replay_memory(Config(replay_capacity=100_000).resolved(), train.torch.device("cpu"))


def test_the_address_space_a_process_may_still_reserve_under_ulimit_v():
    """``ulimit -v`` (RLIMIT_AS, which some clusters set) counts a ring whole, written or not."""
    import subprocess
    import sys

    code = "from rl_curl.train import address_space_room; print(address_space_room())"
    root = Path(__file__).resolve().parents[2]
    free = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert free.stdout.strip() == "None", free.stdout + free.stderr
    limit = 8 * GiB

    def limited():
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    held = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120,
                          preexec_fn=limited)
    assert 0 < int(held.stdout) < limit, held.stdout + held.stderr


def test_rings_larger_than_ulimit_v_allows_are_refused_before_and_when_they_are_reserved(tmp_path, monkeypatch):
    """A ring the address-space limit cannot hold ended the run in numpy's MemoryError and a traceback."""
    from rl_curl.config import Config
    from rl_curl.replay import FrameReplay

    from .conftest import tiny_config

    monkeypatch.setattr(train, "address_space_room", lambda: GiB)
    with pytest.raises(ValueError, match=r"^--replay-capacity 100000 reserves 3\.1 GiB of address space for the "
                                         r"replay's whole ring \(100x100 frames\) but this process may reserve only "
                                         r"1\.0 GiB more \(ulimit -v\); lower --replay-capacity to what the run fills "
                                         r"\(12,500 transitions\) or raise the limit$"):
        train.check_replay_memory(Config(replay_capacity=100_000).resolved(), train.torch.device("cpu"))

    # the limit reached only when the ring is reserved (the environment and the networks reserved theirs first)
    def refused(self, capacity, *args, **kwargs):
        raise MemoryError(f"Unable to allocate 3.07 GiB for an array with shape ({capacity}, 3, 20, 20)")

    monkeypatch.setattr(FrameReplay, "__init__", refused)
    with pytest.raises(ValueError, match=r"^--replay-capacity 500: the replay's whole ring could not be reserved "
                                         r"\(Unable to allocate 3\.07 GiB .*\); this process may reserve 1\.0 GiB more "
                                         r"address space \(ulimit -v\); lower --replay-capacity to what the run fills "
                                         r"\(20 transitions\) or raise the limit$"):
        train.run(tiny_config(task="cartpole-swingup", action_repeat=50, env_steps=1000,
                              output_dir=str(tmp_path / "run")))


def test_environment_worker_processes_count_beside_the_replay(monkeypatch):
    """An evaluation's workers (--eval-parallel: one process per episode, about a quarter GiB each) take more memory
    than a cartpole run's replay: under a job's limit that fits the replay alone the run would be killed at its first
    evaluation, and again on every resume. They are counted, and the refusal names the options that start fewer
    (--no-eval-parallel, ...)."""
    from rl_curl.config import Config

    cfg = Config(replay_capacity=100_000).resolved()  # 12,500 transitions: 0.4 GiB of frames
    assert train.worker_processes(cfg) == 0
    parallel = Config(replay_capacity=100_000, eval_parallel=True, env_worker=True).resolved()
    assert train.worker_processes(parallel) == 11  # 10 episodes' workers and the training environment's
    assert train.worker_processes(Config(eval_worker=True).resolved()) == 1
    assert train.worker_processes(Config(eval_worker=True, eval_parallel=True, eval_episodes=1).resolved()) == 1
    monkeypatch.setattr(train, "cgroup_memory_room", lambda: GiB)
    train.check_replay_memory(cfg, train.torch.device("cpu"))
    with pytest.raises(ValueError, match=r"^the run will need 3\.1 GiB of memory for the replay \(12,500 transitions "
                                         r"of 100x100 frames\) and 11 environment worker processes \(2\.8 GiB, about "
                                         r"256 MiB each\) but only 1\.0 GiB is available within .*; lower "
                                         r"--replay-capacity \(100000 is the paper's\), --env-steps or --image-size, "
                                         r"start fewer worker processes \(--no-eval-parallel / --no-env-worker\)$"):
        train.check_replay_memory(parallel, train.torch.device("cpu"))
    # runs trained together (rl_curl.together: a worker for each run's training and one for its evaluation)
    together = [Config(replay_capacity=1000, env_worker=True, eval_worker=True, seed=s).resolved() for s in range(3)]
    with pytest.raises(ValueError, match=r"and 6 environment worker processes \(1\.5 GiB.*start fewer worker "
                                         r"processes \(--no-eval-worker / --no-env-worker\), or train fewer runs "
                                         r"together$"):
        train.check_replay_memory(together, train.torch.device("cpu"))
