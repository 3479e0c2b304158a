import numpy as np
import pytest

from rl_curl.env import make, valid_tasks
from tests import warm


def test_unknown_task_lists_valid_names():
    with pytest.raises(ValueError) as err:
        make("cartpole-swingupp")
    assert "cartpole-swingup" in str(err.value) and "walker-walk" in str(err.value)


@pytest.mark.parametrize("task,hint", [
    ("cartpole-swingupp", "(did you mean cartpole-swingup or cartpole-swingup_sparse?)"),  # a typo
    ("walker_walk", "(did you mean walker-walk?)"), ("Cheetah-Run", "(did you mean cheetah-run?)"),
    ("Pendulum-v1", "(it is a gymnasium environment: pass --task gym:Pendulum-v1)"),  # gymnasium's id, no prefix
    ("xyz-abc", "; valid tasks are"),  # nothing near: the list alone
])
def test_unknown_task_says_what_it_most_likely_meant(task, hint):
    from rl_curl.env import parse_task

    with pytest.raises(ValueError, match="valid tasks are") as err:
        parse_task(task)
    assert str(err.value).startswith(f"unknown DeepMind Control task {task!r} {hint}".replace(" ;", ";"))
    assert "lqr" not in str(err.value)  # listed are the tasks the agent can train on (lqr's actions are unbounded)


def test_all_table3_tasks_are_valid():
    names = valid_tasks()
    for t in ["cartpole-swingup", "walker-walk", "cheetah-run", "finger-spin", "reacher-easy", "ball_in_cup-catch"]:
        assert t in names


def test_shapes_dtypes_and_reset_stack():
    env = make("cartpole-swingup", seed=0, image_size=24, frame_stack=3)
    assert env.action_repeat == 8 and env.max_episode_steps == 125
    obs, _ = env.reset(seed=1)
    assert obs.shape == (9, 24, 24) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert np.array_equal(obs[:3], obs[3:6]) and np.array_equal(obs[3:6], obs[6:])
    assert env.action_space.low.min() == -1 and env.action_space.high.max() == 1
    nxt, r, term, trunc, _ = env.step(env.action_space.sample())
    assert nxt.shape == obs.shape and isinstance(r, float) and not term and not trunc
    assert np.array_equal(nxt[:3], obs[3:6]) and np.array_equal(nxt[3:6], obs[6:])  # the stack shifts


def rollout(env, seed, actions):
    obs, _ = env.reset(seed=seed)
    out = [obs]
    rewards = []
    for a in actions:
        obs, r, *_ = env.step(a)
        out.append(obs)
        rewards.append(r)
    return np.stack(out), np.array(rewards)


def test_seeding_is_deterministic():
    actions = np.linspace(-1, 1, 4)[:, None]
    a = rollout(make("cartpole-swingup", seed=3, image_size=16), 7, actions)
    b = rollout(make("cartpole-swingup", seed=5, image_size=16), 7, actions)
    c = rollout(make("cartpole-swingup", seed=3, image_size=16), 8, actions)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_action_repeat_sums_rewards_and_repeats_physics():
    actions = [np.array([0.7]), np.array([-0.4])]
    env2 = make("cartpole-swingup", seed=0, action_repeat=2, image_size=16)
    env1 = make("cartpole-swingup", seed=0, action_repeat=1, image_size=16)
    obs2, r2 = rollout(env2, 11, actions)
    obs1, r1 = rollout(env1, 11, [a for a in actions for _ in range(2)])
    np.testing.assert_allclose(r2, r1.reshape(2, 2).sum(1), rtol=1e-12)
    assert np.array_equal(obs2[-1][-3:], obs1[-1][-3:])
    assert env1.max_episode_steps == 1000 and env2.max_episode_steps == 500


def test_bad_action_is_refused():
    env = make("cartpole-swingup", image_size=16)
    env.reset(seed=0)
    with pytest.raises(ValueError, match="finite"):
        env.step(np.array([np.nan]))


def test_unbounded_dmc_actions_are_refused():
    """lqr's actuators have no control range: dm_control bounds them by +-1e10, which the [-1, 1] mapping
    turned into actions of order 1e9 (rewards around -1e18) instead of a clear refusal."""
    with pytest.raises(ValueError, match="unbounded actions"):
        make("lqr-lqr_2_1", image_size=8)


def test_action_repeat_defaults_follow_the_domain():
    """--help: 8 cartpole; 2 finger, walker; 4 cheetah, reacher, ball_in_cup; 4 others; 1 gym:. Tasks of
    those domains not listed by name (cartpole-swingup_sparse, finger-turn_easy) used to get 4."""
    from rl_curl.config import task_default

    expected = {"cartpole-swingup": 8, "cartpole-swingup_sparse": 8, "cartpole-two_poles": 8, "finger-spin": 2,
                "finger-turn_easy": 2, "walker-run": 2, "reacher-hard": 4, "hopper-hop": 4, "humanoid-walk": 4,
                "gym:Pendulum-v1": 1}
    assert {t: task_default(t, "action_repeat") for t in expected} == expected
    assert task_default("cheetah-run", "lr") == 2e-4 and task_default("walker-run", "lr") == 1e-3
    assert make("cartpole-balance_sparse", image_size=8).action_repeat == 8


def test_camera_is_curls_and_checked():
    """Camera 0 for every task, as the official CURL code (dmc2gym's default); a camera the model does not
    have is refused by name instead of failing at the first render."""
    assert make("cartpole-swingup", image_size=8).camera_id == 0
    assert make("cartpole-swingup", image_size=8, camera_id=1).camera_id == 1
    with pytest.raises(ValueError, match="camera_id 7 does not exist"):
        make("cartpole-swingup", image_size=8, camera_id=7)


@pytest.mark.parametrize("task,camera_id", [("cartpole-swingup", None), ("reacher-easy", -1)])
def test_frames_from_the_kept_camera_are_physics_render_s(task, camera_id):
    """The environment renders from one camera kept for its life (physics.render makes one per call): every frame is
    physics.render's, bit for bit, across steps and a reset, for a fixed camera and MuJoCo's free camera."""
    env = make(task, seed=0, action_repeat=2, image_size=48, camera_id=camera_id)
    inner = env.unwrapped if hasattr(env, "unwrapped") else env

    def fresh():
        frame = inner._env.physics.render(height=48, width=48, camera_id=inner.camera_id)
        return np.ascontiguousarray(frame.transpose(2, 0, 1))

    rng = np.random.default_rng(0)
    try:
        frames = []
        for episode in range(2):
            obs, _ = env.reset(seed=episode)
            assert np.array_equal(obs[-3:], fresh())
            for _ in range(6):
                obs = env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))[0]
                assert np.array_equal(obs[-3:], fresh())
                frames.append(obs[-3:])
        camera = inner._cameras[48][2]
        assert not all(np.array_equal(frames[0], f) for f in frames[1:])  # the frames do change
        assert inner._render() is not inner._render() and camera is inner._cameras[48][2]  # copies; one camera
        # a video's frames: the same camera's view at another size, from a camera of their own
        big = inner._env.physics.render(height=96, width=96, camera_id=inner.camera_id)
        assert np.array_equal(inner.video_frame(96), big) and inner.video_frame(96).shape == (96, 96, 3)
        assert np.array_equal(inner.video_frame(None), obs[-3:].transpose(1, 2, 0))  # None: the observation's
        assert set(inner._cameras) == {48, 96} and camera is inner._cameras[48][2]
        refusal = rf"a video of 481x481 does not fit the offscreen buffer of {task} \(at most 480x480\)"
        with pytest.raises(ValueError, match=refusal):
            inner.video_frame(481)
    finally:
        env.close()
    assert inner._cameras == {}


def test_env_worker_is_the_environment_in_another_process():
    """rl_curl.env.EnvWorker (--env-worker): the same spaces, observations, rewards and ends as make()'s environment,
    errors raised here naming the worker, close() twice is harmless."""
    import numpy as np

    from rl_curl.env import EnvWorker

    kw = dict(task="cartpole-swingup", seed=3, action_repeat=8, frame_stack=3, image_size=32)
    worker, local = EnvWorker(**kw), make(**kw)
    try:
        assert worker.observation_space == local.observation_space and worker.action_space == local.action_space
        a, b = worker.reset(seed=5)[0], local.reset(seed=5)[0]
        assert np.array_equal(a, b)
        for i in range(4):
            act = np.full(1, 0.4 * i - 0.6, dtype=np.float32)
            x, y = worker.step(act), local.step(act)
            assert np.array_equal(x[0], y[0]) and x[1:4] == y[1:4]
        with pytest.raises(RuntimeError, match="in the environment's worker process: ValueError"):
            worker.step(np.full(3, 0.0, dtype=np.float32))  # a wrong action: refused there, the worker goes on
        assert np.array_equal(worker.step(np.zeros(1, np.float32))[0], local.step(np.zeros(1, np.float32))[0])
    finally:
        worker.close()
        worker.close()
        local.close()
    with pytest.raises(RuntimeError, match="worker process: ValueError: unknown DeepMind Control task"):
        EnvWorker(task="nope-nope")


def test_env_worker_imports_the_environment_and_not_torch_or_the_parents_main_module(tmp_path):
    """A worker (--env-worker, --eval-async) is a fresh interpreter importing rl_curl.env and its environment only:
    not torch (about 1.5 s a worker here; rl_curl.env no longer reaches it through rl_curl.config) and not the
    parent's main module, which multiprocessing's spawn imported again in every worker of `python -m rl_curl.train`
    (that module imports torch). The environment's module is found through the parent's import path. Checked from a
    parent started as `python -m` with a main module that imports torch, as rl_curl.train does."""
    import json
    import os
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "heavy_main.py").write_text(
        "import json, os, sys\nimport torch  # noqa: F401\nfrom rl_curl.env import EnvWorker\n"
        "if __name__ == '__main__':\n"
        "    w = EnvWorker(task='gym:tests.rl_curl.probe_env:Probe-v0', seed=0, image_size=16)\n"
        "    obs, info = w.reset(seed=1)\n"
        "    w.close()\n"
        "    print(json.dumps({'imported': info['imported'], 'pid': info['pid'], 'mine': os.getpid(),\n"
        "                      'exit': w._proc.returncode}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    res = warm.run([sys.executable, "-m", "heavy_main"], cwd=tmp_path, env=env, capture_output=True, text=True,
                   timeout=120)
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got["pid"] != got["mine"] and got["exit"] == 0  # another process, ended by close()
    assert got["imported"] == []  # neither torch nor rl_curl.train nor shared_losses


def test_env_worker_ends_when_its_parent_is_gone():
    """Without close() (a parent killed, or ending without closing), the worker sees its pipe closed and ends."""
    import time

    from rl_curl.env import EnvWorker

    w = EnvWorker(task="gym:tests.rl_curl.probe_env:Probe-v0", seed=0, image_size=16)
    w._conn.close()  # what the parent's end does when the parent is gone
    t = time.monotonic()
    while w._proc.poll() is None and time.monotonic() - t < 30:
        time.sleep(0.05)
    assert w._proc.returncode == 0


def test_env_worker_outlives_the_ctrl_c_and_sigterm_that_reach_its_process_group():
    """A terminal's Ctrl-C (SIGINT), a scheduler's cancel (SIGTERM) and its warning before a time limit (SIGUSR1 /
    SIGUSR2, Slurm's --signal) reach the worker with its run; the run stops at the end of its episode, so the worker
    must keep answering until the run closes it."""
    import signal
    import time

    from rl_curl.env import EnvWorker

    w = EnvWorker(task="gym:tests.rl_curl.probe_env:Probe-v0", seed=0, image_size=16)
    try:
        w.reset(seed=0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2):
            w._proc.send_signal(sig)
            time.sleep(0.3)  # time to die, if it were going to
            assert w._proc.poll() is None, f"the worker ended on {sig.name}"
            obs, *_ = w.step(w.action_space.sample())
            assert obs.shape == w.observation_space.shape
    finally:
        w.close()
    assert w._proc.returncode == 0  # ended by close()


@pytest.mark.slow  # a tiny run in a subprocess, stopped by a signal to its whole process group
@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM", "SIGUSR2"])
def test_a_run_with_an_env_worker_stopped_by_its_process_group_writes_its_checkpoint(tmp_path, sig):
    """What a user's Ctrl-C does in a terminal (SIGINT to every process of the foreground group), Slurm's cancel or
    ``timeout`` (SIGTERM to all) and Slurm's warning before a job's time limit (``--signal=USR2@120``, to every
    process of the job step): the run ends its episode, writes its checkpoint and exits with 130. Its environment
    worker used to die of the signal, and the run ended in an error that lost every step since the last checkpoint
    (SIGUSR2 ended the run itself at once)."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "rl_curl.train", "--env-worker", "--eval-parallel", "--output-dir", str(out),
           "--env-steps", "1000000", "--action-repeat", "50", "--image-size", "20", "--crop-size", "16",
           "--num-filters", "4", "--num-layers", "2", "--hidden-dim", "16", "--feature-dim", "8", "--batch-size", "8",
           "--seed-steps", "5", "--eval-every", "100000", "--eval-episodes", "2", "--log-every", "100",
           "--checkpoint-every", "1000000", "--torch-threads", "1", "--no-progress", "--no-save-video"]
    # SIGINT's default put back in the child: a shell's background job (CI's, say) starts with SIGINT ignored, and the
    # workers would inherit that and pass this test without the fix
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                            env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    try:
        start = time.monotonic()  # signal once the run has stepped (its log has a row) and its workers are up
        while not (out / "log.csv").exists() or len((out / "log.csv").read_text().splitlines()) < 2:
            assert proc.poll() is None and time.monotonic() - start < 240, proc.stdout.read() if proc.poll() else ""
            time.sleep(0.2)
        os.killpg(proc.pid, getattr(signal, sig))
        text = proc.communicate(timeout=240)[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, text
    assert "interrupted at environment step" in text and "Traceback" not in text and "error:" not in text, text
    assert (out / "checkpoint" / "COMPLETE").exists()


@pytest.mark.slow  # a tiny run in a subprocess on a pseudo-terminal that then hangs up
def test_a_run_whose_terminal_hangs_up_writes_its_checkpoint(tmp_path):
    """A closed terminal window or a dropped ssh session: the terminal goes away and SIGHUP reaches the run and its
    environment worker. Both used to die of it (the run killed by SIGHUP, its steps since the last checkpoint lost);
    now the run ends its episode and writes its checkpoint, its and its worker's writes going to the null device
    instead of the terminal that is gone."""
    import os
    import pty
    import select
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "rl_curl.train", "--env-worker", "--output-dir", str(out),
           "--env-steps", "1000000", "--action-repeat", "50", "--image-size", "20", "--crop-size", "16",
           "--num-filters", "4", "--num-layers", "2", "--hidden-dim", "16", "--feature-dim", "8", "--batch-size", "8",
           "--seed-steps", "5", "--eval-every", "100000", "--eval-episodes", "2", "--log-every", "100",
           "--checkpoint-every", "1000000", "--torch-threads", "1", "--no-save-video"]  # progress bar on: it writes
    terminal, its_end = pty.openpty()
    proc = subprocess.Popen(cmd, cwd=Path(__file__).resolve().parents[2], start_new_session=True, stdin=its_end,
                            stdout=its_end, stderr=its_end,
                            env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    os.close(its_end)
    try:
        start = time.monotonic()  # read what the run writes, as a terminal does, until it has stepped
        while not (out / "log.csv").exists() or len((out / "log.csv").read_text().splitlines()) < 2:
            assert proc.poll() is None and time.monotonic() - start < 240
            if select.select([terminal], [], [], 0.2)[0]:
                os.read(terminal, 65536)
        os.close(terminal)  # the terminal goes away, then the hang-up reaches the run's process group
        os.killpg(proc.pid, signal.SIGHUP)
        assert proc.wait(timeout=240) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (out / "checkpoint" / "COMPLETE").exists()


def test_a_worker_that_ends_under_the_run_is_a_stopped_run_naming_the_signal():
    """A worker killed while the run steps it (the out-of-memory killer's SIGKILL) raises RunStopped, which the
    training loop completes with where the run stopped and ``run_cli`` prints in one line; whether the run's next
    message fails to send (the pipe broken) or its answer never comes."""
    import signal

    from rl_curl.env import EnvWorker, describe_exit, side_by_side
    from shared_losses.training.runtime import RunStopped

    for first in ("step", "reset"):
        w = EnvWorker(task="gym:tests.rl_curl.probe_env:Probe-v0", seed=0, image_size=16)
        w.reset(seed=0)
        w._proc.send_signal(signal.SIGKILL)
        w._proc.wait(timeout=30)
        with pytest.raises(RunStopped) as info:
            w.step(w.action_space.sample()) if first == "step" else w.reset(seed=1)
        assert str(info.value) == ("the environment's worker process ended (killed by SIGKILL: the system's "
                                   "out-of-memory killer sends it)")
        w.close()  # closing a worker that is gone is quiet
    # --eval-parallel's workers stepped side by side: one killed, the other's answer still read, then RunStopped
    workers = [EnvWorker(task="gym:tests.rl_curl.probe_env:Probe-v0", seed=s, image_size=16) for s in (1, 2)]
    try:
        side_by_side(workers, [("reset", 5), ("reset", 6)])
        workers[1]._proc.send_signal(signal.SIGKILL)
        workers[1]._proc.wait(timeout=30)
        with pytest.raises(RunStopped, match=r"worker process ended \(killed by SIGKILL"):
            side_by_side(workers, [("reset", 7), ("reset", 8)])
        assert workers[0].reset(seed=7)[0].shape == (9, 16, 16)  # the living worker's answer was not left behind
        workers[0]._proc.send_signal(signal.SIGKILL)  # and the first one gone: the other is not sent its message
        workers[0]._proc.wait(timeout=30)
        with pytest.raises(RunStopped):
            side_by_side(workers, [("reset", 9), ("reset", 10)])
    finally:
        for w in workers:
            w.close()
    assert describe_exit(3) == "exit status 3" and describe_exit(None).startswith("still running")
    assert describe_exit(-signal.SIGSEGV) == "killed by SIGSEGV: a crash in the simulator or its renderer"
    assert describe_exit(-signal.SIGTERM) == "killed by SIGTERM" and describe_exit(-200) == "killed by signal 200"


def test_env_worker_finds_the_parents_rl_curl_not_one_in_the_current_folder(tmp_path):
    """The worker takes the parent's import path whole: `python -c` alone would look in the current folder first and
    import another checkout's rl_curl there (seen with a second checkout as the current folder, the installed one in
    the parent)."""
    import sys

    here = tmp_path / "elsewhere"
    (here / "rl_curl").mkdir(parents=True)
    (here / "rl_curl" / "__init__.py").write_text("raise ImportError('the rl_curl of the current folder')\n")
    prog = tmp_path / "prog"
    prog.mkdir()
    (prog / "main.py").write_text(
        "from rl_curl.env import EnvWorker\n"
        "if __name__ == '__main__':\n"
        "    w = EnvWorker(task='cartpole-swingup', seed=0, image_size=16)\n"
        "    print(w.reset(seed=1)[0].shape)\n"
        "    w.close()\n")
    found = warm.run([sys.executable, "-c", "import rl_curl; print(rl_curl.__file__)"], cwd=prog,
                     capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip("rl_curl is not installed in this Python (the suite runs from an installed checkout)")
    res = warm.run([sys.executable, str(prog / "main.py")], cwd=here, capture_output=True, text=True,
                   timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().splitlines()[-1] == "(9, 16, 16)"


def test_workers_side_by_side_answer_in_order_and_an_error_leaves_no_answer_behind():
    """rl_curl.env.side_by_side (--eval-parallel's stepping): each worker's answer in the workers' order; when one
    refuses its message, the error is raised after every other answer was read, so the next call reads its own."""
    import numpy as np

    from rl_curl.env import EnvWorker, side_by_side

    kw = dict(task="cartpole-swingup", action_repeat=8, frame_stack=3, image_size=16)
    workers = [EnvWorker(wait=False, seed=s, **kw) for s in (1, 2)]
    try:
        for w in workers:
            w.ready()
        obs = [o for o, _ in side_by_side(workers, [("reset", 5), ("reset", 6)])]
        here = [make(seed=s, **kw).reset(seed=r)[0] for s, r in ((1, 5), (2, 6))]
        assert all(np.array_equal(a, b) for a, b in zip(obs, here))
        with pytest.raises(RuntimeError, match="worker process: ValueError"):  # the first refuses a wrong action
            side_by_side(workers, [("step", np.zeros(3, np.float32)), ("step", np.zeros(1, np.float32))])
        again = side_by_side(workers, [("reset", 5), ("reset", 6)])  # the answers to these, not a step's left over
        assert [len(a) for a in again] == [2, 2]
        assert all(np.array_equal(a[0], b) for a, b in zip(again, here))
    finally:
        for w in workers:
            w.close()


def test_a_missing_optional_package_of_a_gymnasium_environment_is_named_not_called_unknown(monkeypatch):
    """Classic control renders with pygame (gymnasium[classic_control]) and MuJoCo's envs need mujoco: gymnasium's
    DependencyNotInstalled, at make or at the first frame, is one error naming the package, not a traceback or an
    "unknown environment"."""
    import gymnasium as gym

    from rl_curl.env import GymPixels
    from tests.rl_curl.tiny_pixel_env import TinyDot

    missing = gym.error.DependencyNotInstalled('pygame is not installed, run `pip install "gymnasium[extra]"`')

    class NeedsAtMake(TinyDot):
        def __init__(self, render_mode=None, size=32):
            raise missing

    class NeedsToRender(TinyDot):
        def render(self):
            raise missing

    gym.register(id="NeedsAtMake-v0", entry_point=NeedsAtMake)
    gym.register(id="NeedsToRender-v0", entry_point=NeedsToRender, max_episode_steps=10)
    try:
        with pytest.raises(ValueError) as err:
            GymPixels("NeedsAtMake-v0", image_size=16)
        assert str(err.value) == ("gymnasium environment 'NeedsAtMake-v0' needs a package that is not installed: "
                                  'pygame is not installed, run `pip install "gymnasium[extra]"`')
        env = GymPixels("NeedsToRender-v0", image_size=16)
        with pytest.raises(ValueError, match=r"^gymnasium environment 'NeedsToRender-v0' cannot render its frames: "
                                             r"pygame is not installed, run `pip install"):
            env.reset()
    finally:
        for name in ("NeedsAtMake-v0", "NeedsToRender-v0"):
            gym.envs.registry.pop(name, None)


def test_gymnasium_environments_users_write_get_one_line_errors_or_work(monkeypatch):
    """Found by making such environments: one without a time limit hung the evaluation for ever; float frames in
    [0, 1] became black (cut to uint8); one that cannot render rgb_array, or takes no render_mode, a module of
    gym:MODULE:ID that does not import, and render() returning None gave tracebacks; an environment that rejects
    the image size as width/height was refused instead of rendered at its own size and resized."""
    import gymnasium as gym

    from rl_curl.env import GymPixels
    from tests.rl_curl.tiny_pixel_env import TinyDot

    class FloatFrames(TinyDot):
        def render(self):
            return super().render().astype(np.float32) / 255.0

    class HumanOnly(TinyDot):
        metadata = {"render_modes": ["human"], "render_fps": 30}

    class NoRenderMode(TinyDot):
        def __init__(self, size=32):
            super().__init__(None, size)

    class RendersNone(TinyDot):
        def render(self):
            return None

    class WidthRejects(TinyDot):
        def __init__(self, render_mode=None, width=64, height=64):
            if width < 64:
                raise ValueError(f"width must be >= 64, got {width}")
            super().__init__(render_mode, 32)

    for name, cls in (("Float", FloatFrames), ("HumanOnly", HumanOnly), ("NoRenderMode", NoRenderMode),
                      ("RendersNone", RendersNone), ("WidthRejects", WidthRejects)):
        gym.register(id=f"Probe{name}-v0", entry_point=cls, max_episode_steps=10)
    gym.register(id="ProbeEndless-v0", entry_point=TinyDot)
    try:
        with pytest.raises(ValueError, match=r"'ProbeEndless-v0' has no time limit .* max_episode_steps=N"):
            GymPixels("ProbeEndless-v0", image_size=16)
        GymPixels("ProbeEndless-v0", image_size=16, max_episode_steps=5).close()  # a limit given to make is one
        env = GymPixels("ProbeFloat-v0", image_size=32, frame_stack=1)
        obs, _ = env.reset(seed=0)
        assert obs.max() == 255  # the dot, white (it was 0: every frame black)
        env.close()
        for name in ("HumanOnly", "NoRenderMode"):
            with pytest.raises(ValueError, match=f"'Probe{name}-v0' cannot render rgb_array frames"):
                GymPixels(f"Probe{name}-v0", image_size=16)
        with pytest.raises(ValueError, match=r"render\(\) returned None"):
            GymPixels("ProbeRendersNone-v0", image_size=16).reset(seed=0)
        env = GymPixels("ProbeWidthRejects-v0", image_size=16, frame_stack=1)
        assert env.reset(seed=0)[0].shape == (3, 16, 16)
        env.close()
        with pytest.raises(ValueError, match="unknown gymnasium environment 'no_such_module_xyz:TinyDot-v0'"):
            GymPixels("no_such_module_xyz:TinyDot-v0", image_size=16)
    finally:
        for name in ("Float", "HumanOnly", "NoRenderMode", "RendersNone", "WidthRejects", "Endless"):
            gym.registry.pop(f"Probe{name}-v0", None)


def test_dmc_environments_made_without_a_seed_differ():
    """gymnasium's convention: gym.make_vec's copies of rl_curl/cartpole-swingup-v0 stepped in lockstep (every
    copy seeded 0); a seed given still fixes the episode."""
    import gymnasium as gym

    import rl_curl  # noqa: F401  (registers the ids)

    kw = dict(image_size=16, frame_stack=1)
    a, b = gym.make("rl_curl/cartpole-swingup-v0", **kw), gym.make("rl_curl/cartpole-swingup-v0", **kw)

    def state(env):  # the simulator's state: cartpole's small start perturbations can render alike at 16x16
        return env.unwrapped._env.physics.get_state()

    try:
        a.reset(), b.reset()
        assert not np.array_equal(state(a), state(b))
        assert np.array_equal(a.reset(seed=3)[0], b.reset(seed=3)[0]) and np.array_equal(state(a), state(b))
    finally:
        a.close()
        b.close()


def test_an_action_of_the_wrong_size_names_the_action_space():
    """cartpole stepped with two numbers gave numpy's "cannot reshape array of size 2 into shape (1,)"."""
    from rl_curl.env import make

    env = make("cartpole-swingup", seed=0, image_size=16, frame_stack=1)
    try:
        env.reset(seed=0)
        with pytest.raises(ValueError, match=r"action of shape \[2\] for an action space of shape \[1\] "
                                             r"\(cartpole-swingup\)"):
            env.step(np.array([0.1, 0.2]))
        env.step(np.array([[0.1]]))  # one number, in any shape, is cartpole's action
    finally:
        env.close()


def test_cheetahs_curl_update_learns_at_the_papers_rate_as_its_actor_and_critic():
    """The CURL paper's table gives cheetah one learning rate, 2e-4, for the encoder, the policy and the Q function
    (the official scripts/run_cheetah.sh sets --encoder_lr, --critic_lr and --actor_lr to one value in each run); our
    default lowered --lr only and left the CURL update at 1e-3."""
    from rl_curl.config import Config

    cheetah = Config(task="cheetah-run").resolved()
    assert (cheetah.lr, cheetah.encoder_lr) == (2e-4, 2e-4)
    for task in ("cartpole-swingup", "walker-walk", "finger-spin", "reacher-easy", "ball_in_cup-catch"):
        c = Config(task=task).resolved()
        assert (c.lr, c.encoder_lr) == (1e-3, 1e-3), task
    assert Config(task="cheetah-run", encoder_lr=1e-3).resolved().encoder_lr == 1e-3  # given: kept


def test_a_rendering_backend_that_cannot_load_is_one_line_naming_mujoco_gl(tmp_path):
    """A misnamed MUJOCO_GL (or EGL / OSMesa missing) was a 40-line traceback from dm_control's renderer import (a
    probe); now one error line naming the setting and what to set, and no run folder."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MUJOCO_GL": "bogus"}
    r = subprocess.run([sys.executable, "-m", "rl_curl.train", "--preset", "demo", "--output-dir",
                        str(tmp_path / "run")], env=env, capture_output=True, text=True, timeout=300)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith("error: MuJoCo's rendering cannot load with MUJOCO_GL=bogus (RuntimeError: ")
    assert lines[0].endswith("; set MUJOCO_GL: egl on a Linux machine without a display (a GPU's EGL, or Mesa's), "
                             "osmesa where only Mesa's software renderer is installed, glfw on macOS or on a desktop "
                             "with a display")


def test_a_worker_whose_renderer_cannot_load_says_so_in_one_line(monkeypatch):
    from rl_curl.env import EnvWorker, RenderingUnavailable

    monkeypatch.setenv("MUJOCO_GL", "bogus")  # the worker is a fresh interpreter: it imports dm_control with it
    with pytest.raises(RenderingUnavailable, match=r"^MuJoCo's rendering cannot load with MUJOCO_GL=bogus .*with a "
                                                   r"display \(in the environment's worker process\)$"):
        EnvWorker(task="cartpole-swingup", image_size=16)


def test_glfw_is_refused_off_the_main_thread_before_it_makes_a_context(monkeypatch):
    """dm_control's GLFW renderer must be used from the main thread (on macOS, a window made elsewhere is refused by
    the system): rendering from another thread (--eval-async without --eval-worker, rl_curl.together without its
    workers) is one line naming the way out; the main thread renders as before."""
    import threading

    from dm_control import _render

    from rl_curl.env import RenderingUnavailable

    monkeypatch.setattr(_render, "BACKEND", "glfw")
    got = []

    def reset_here():
        env = make("cartpole-swingup", image_size=16)
        try:
            env.reset(seed=0)
        except RenderingUnavailable as err:
            got.append(str(err))
        finally:
            env.close()

    thread = threading.Thread(target=reset_here, name="rl_curl-eval")
    thread.start()
    thread.join()
    assert len(got) == 1 and got[0].startswith("MuJoCo's GLFW backend (MUJOCO_GL=") and \
        "renders on a process's main thread only, and this environment renders on the thread 'rl_curl-eval': in " \
        "rl_curl, render in worker processes (--eval-worker with --eval-async" in got[0]
    env = make("cartpole-swingup", image_size=16)  # the main thread (the backend really is EGL here)
    try:
        assert env.reset(seed=0)[0].shape == (9, 16, 16)
    finally:
        env.close()


@pytest.mark.parametrize("platform,expected", [("linux", "egl"), ("darwin", None)])
def test_egl_is_the_default_backend_on_linux_only(platform, expected):
    """macOS and Windows have no EGL: rl_curl left MUJOCO_GL=egl there too, so a Mac failed to render (a probe); now
    dm_control chooses (GLFW) where MUJOCO_GL is unset, and a value set is kept."""
    import os
    import subprocess
    import sys

    code = (f"import sys; sys.platform = {platform!r}; import rl_curl.env, os; "
            "print(os.environ.get('MUJOCO_GL'))")
    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == str(expected), out.stderr
    out = subprocess.run([sys.executable, "-c", code], env={**env, "MUJOCO_GL": "osmesa"}, capture_output=True,
                         text=True, timeout=120)
    assert out.stdout.strip() == "osmesa"


def test_video_frames_at_another_size_in_every_environment_kind():
    """video_frame(size): DeepMind Control renders the state again at that size (same camera); a gymnasium
    environment resizes its own frame; an EnvGroup and an EnvWorker answer for their (first) environment."""
    import numpy as np

    from rl_curl.env import EnvGroup, EnvWorker

    env = make("cartpole-swingup", seed=0, image_size=24)
    group = EnvGroup(2, task="cartpole-swingup", seed=0, image_size=24)
    worker = EnvWorker(task="cartpole-swingup", seed=0, image_size=24)
    try:
        env.reset(seed=3)
        group.reset(seed=[3, 4])
        worker.reset(seed=3)
        action = np.full(env.action_space.shape, 0.5, dtype=np.float32)
        env.step(action)
        group.step(([0, 1], [action, -action]))
        worker.step(action)
        frame = env.video_frame(64)
        assert frame.shape == (64, 64, 3) and frame.dtype == np.uint8
        assert np.array_equal(group.video_frame(64), frame) and np.array_equal(worker.video_frame(64), frame)
        assert np.array_equal(worker.video_frame(None), env.render())
        with pytest.raises(RuntimeError, match="a video of 500x500 does not fit"):  # raised in the worker
            worker.video_frame(500)
    finally:
        env.close()
        group.close()
        worker.close()
    gym_env = make("gym:tests.rl_curl.probe_env:Probe-v0", seed=0, image_size=16)
    try:
        gym_env.reset(seed=0)
        big = gym_env.video_frame(40)
        assert big.shape == (40, 40, 3) and big.dtype == np.uint8
        assert np.array_equal(gym_env.video_frame(None), gym_env.render())
        with pytest.raises(ValueError, match="need a size >= 1"):
            gym_env.video_frame(0)
    finally:
        gym_env.close()


@pytest.mark.parametrize("size,task,message", [
    (0, "cartpole-swingup", "--video-size must be >= 1"),
    (481, "cartpole-swingup", "--video-size 481: DeepMind Control renders at most 480x480"),
])
def test_a_video_size_the_task_cannot_render_is_refused_before_the_run(size, task, message):
    from rl_curl.config import Config

    with pytest.raises(ValueError, match=message):
        Config(task=task, video_size=size).validate()
    Config(task=task, video_size=None).validate()
    Config(task="gym:MountainCarContinuous-v0", video_size=481).validate()  # a gymnasium frame is resized
