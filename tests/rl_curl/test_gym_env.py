"""The agent also accepts non-DeepMind-Control gymnasium environments (``task="gym:ENV_ID"``)."""

import csv
import json

import numpy as np
import pytest

from rl_curl.env import make
from rl_curl.train import run

from .conftest import tiny_config

ENV = "gym:tests.rl_curl.tiny_pixel_env:TinyDot-v0"


def test_gym_env_shapes_scaling_and_time_limit():
    env = make(ENV, seed=0, frame_stack=2, image_size=24)
    assert env.observation_space.shape == (6, 24, 24) and env.observation_space.dtype == np.uint8
    assert np.all(env.action_space.low == -1.0) and np.all(env.action_space.high == 1.0)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (6, 24, 24) and obs.dtype == np.uint8
    assert np.array_equal(obs[:3], obs[3:])  # the first frame is repeated at reset
    assert obs.max() == 255  # the dot was drawn (and survived the resize)
    inner = env._env.unwrapped
    env.step(np.array([1.0, -0.5]))
    assert np.allclose(inner.last_action, [2.0, -1.0])  # [-1, 1] -> the env's [-2, 2]
    steps, truncated, terminated = 1, False, False
    while not (truncated or terminated):
        _, _, terminated, truncated, _ = env.step(np.zeros(2))
        steps += 1
    assert truncated and steps == 30  # gymnasium's TimeLimit passes through


def test_gym_env_seeding_and_action_repeat():
    a, b = make(ENV, frame_stack=1, image_size=32), make(ENV, frame_stack=1, image_size=32)
    assert np.array_equal(a.reset(seed=5)[0], b.reset(seed=5)[0])
    rep = make(ENV, frame_stack=1, image_size=32, action_repeat=3)
    one = make(ENV, frame_stack=1, image_size=32)
    rep.reset(seed=1), one.reset(seed=1)
    _, r_rep, *_ = rep.step(np.ones(2))
    r_one = sum(one.step(np.ones(2))[1] for _ in range(3))
    assert r_rep == pytest.approx(r_one)
    assert np.allclose(rep._env.unwrapped.pos, one._env.unwrapped.pos)


def test_gym_env_bad_spaces_and_names_are_refused():
    with pytest.raises(ValueError, match="continuous Box action space"):
        make("gym:CartPole-v1")  # discrete actions
    with pytest.raises(ValueError, match="unknown gymnasium environment"):
        make("gym:NoSuchEnv-v0")
    with pytest.raises(ValueError, match="gym:ENV_ID"):
        make("no-such-task")


def test_short_training_run_on_a_gym_env(tmp_path):
    out = tmp_path / "run"
    summary = run(tiny_config(task=ENV, output_dir=str(out), env_steps=120, eval_every=60, log_every=20))
    assert summary["env_steps"] == 120
    assert json.load(open(out / "config.json"))["action_repeat"] == 1
    rows = list(csv.DictReader(open(out / "eval.csv")))
    assert [int(r["env_step"]) for r in rows] == [60, 120]
    assert (out / "curve.png").exists() and (out / "checkpoint" / "COMPLETE").exists()


def test_mujoco_gym_env_renders_at_the_target_size():
    """gymnasium's MuJoCo envs take width/height: frames are rendered at image_size (as DMC frames are),
    not at 480x480 and then resized."""
    pytest.importorskip("mujoco")
    env = make("gym:HalfCheetah-v5", seed=0, image_size=24)
    try:
        assert (env._env.unwrapped.width, env._env.unwrapped.height) == (24, 24)
        obs, _ = env.reset()
        assert obs.shape == (9, 24, 24) and obs.dtype == np.uint8 and obs.std() > 0
    finally:
        env.close()


def test_a_time_limit_is_not_stored_as_a_terminal(tmp_path, monkeypatch):
    """SAC bootstraps through a time limit: an episode cut by TinyDot's 30-step limit (truncated) must be stored
    with not_done = 1; only reaching the centre (terminated) is a terminal. Here the dot never terminates, so every
    stored transition is not done while four episodes end by truncation."""
    from rl_curl import replay as replay_module
    from tests.rl_curl.tiny_pixel_env import TinyDot

    step = TinyDot.step
    monkeypatch.setattr(TinyDot, "step", lambda self, a: (*step(self, a)[:2], False, False, {}))
    dones, add = [], replay_module.FrameReplay.add

    def recording_add(self, action, reward, next_obs, done):
        dones.append(bool(done))
        return add(self, action, reward, next_obs, done)

    monkeypatch.setattr(replay_module.FrameReplay, "add", recording_add)
    run(tiny_config(task=ENV, output_dir=str(tmp_path / "run"), env_steps=120, eval_every=120, log_every=60))
    rows = list(csv.DictReader(open(tmp_path / "run" / "log.csv")))
    assert len(dones) == 120 and not any(dones), dones
    assert max(int(r["episode"]) for r in rows) >= 3  # the time limit did end episodes
