"""Issue 17, rl_curl: the environments in gymnasium's own tools (registered ids, render_mode, check_env,
RecordVideo), agent.act on a batch, and a finished run's policy.pt loaded with rl_curl.load_policy."""

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch

import rl_curl
from rl_curl.env import DMC_TASKS, gym_id
from rl_curl.train import run

from .conftest import tiny_config

ENV = "gym:tests.rl_curl.tiny_pixel_env:TinyDot-v0"


def test_every_dmc_task_but_lqr_is_registered():
    from dm_control import suite

    assert set(DMC_TASKS) == {f"{d}-{t}" for d, t in suite.ALL_TASKS if d != "lqr"}
    for task in DMC_TASKS:
        assert gym.spec(gym_id(task)).entry_point == "rl_curl.env:DMCPixels"
    assert gym.spec("rl_curl/walker-walk-v0").max_episode_steps == 500  # action repeat 2
    assert gym.spec("rl_curl/cartpole-swingup-v0").max_episode_steps == 125  # action repeat 8


def test_check_env_passes_with_its_render_checks():
    from gymnasium.utils.env_checker import check_env

    env = gym.make("rl_curl/cartpole-swingup-v0", render_mode="rgb_array", image_size=24)
    assert env.render_mode == "rgb_array" and env.spec.max_episode_steps == 125
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert not [w for w in caught if "render" in str(w.message).lower()], [str(w.message) for w in caught]
    obs, _ = env.reset(seed=1)
    frame = env.render()
    assert obs.shape == (9, 24, 24) and frame.shape == (24, 24, 3) and frame.dtype == np.uint8
    assert np.array_equal(frame, obs[-3:].transpose(1, 2, 0))
    from rl_curl.env import DMCPixels

    # (gymnasium.make answers "human" with its own HumanRendering wrapper around the rgb_array frames)
    with pytest.raises(ValueError, match="render_mode 'human' is not supported"):
        DMCPixels("cartpole-swingup", render_mode="human")


def test_record_video_works(tmp_path):
    pytest.importorskip("moviepy")
    from gymnasium.wrappers import RecordVideo

    env = gym.make("rl_curl/cartpole-swingup-v0", render_mode="rgb_array", image_size=32, max_episode_steps=6)
    env = RecordVideo(env, str(tmp_path), episode_trigger=lambda e: True, disable_logger=True)
    env.reset(seed=0)
    done = False
    while not done:
        _, _, term, trunc, _ = env.step(env.action_space.sample())
        done = term or trunc
    env.close()
    videos = list(tmp_path.glob("*.mp4"))
    assert len(videos) == 1 and videos[0].stat().st_size > 0


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    run(tiny_config(task=ENV, output_dir=str(out), env_steps=40, eval_every=40, aux="curl"))
    return out


def test_act_takes_one_observation_or_a_batch(finished_run):
    from rl_curl.evaluate import load_agent

    agent, cfg, _ = load_agent(finished_run)
    obs = np.random.default_rng(0).integers(0, 256, size=(5, *agent_obs_shape(finished_run)), dtype=np.uint8)
    batch = agent.act(obs)
    assert batch.shape == (5, agent.action_dim)
    assert np.allclose(np.stack([agent.act(o) for o in obs]), batch, atol=1e-6)
    with pytest.raises(ValueError, match=r"obs must be \[C, H, W\] or \[B, C, H, W\]"):
        agent.act(obs[0, 0])


def agent_obs_shape(run_dir):
    import json

    cfg = json.loads((run_dir / "config.json").read_text())
    return (3 * cfg["frame_stack"], cfg["image_size"], cfg["image_size"])


def test_policy_file_loads_with_weights_only_and_acts_as_the_agent(finished_run):
    from rl_curl.evaluate import load_agent

    state = torch.load(finished_run / "policy.pt", weights_only=True)
    assert state["format"] == 1 and state["action_dim"] == 2
    act = rl_curl.load_policy(finished_run)
    agent, _, _ = load_agent(finished_run)
    obs = np.random.default_rng(1).integers(0, 256, size=(4, *agent_obs_shape(finished_run)), dtype=np.uint8)
    assert np.allclose(act(obs), agent.act(obs), atol=1e-6) and np.allclose(act(obs[0]), agent.act(obs[0]), atol=1e-6)
    with pytest.raises(ValueError, match="obs must be"):
        act(obs[:, :3])


def test_policy_bad_input(tmp_path):
    with pytest.raises(FileNotFoundError, match="policy.pt not found"):
        rl_curl.load_policy(tmp_path)
    with pytest.raises(FileNotFoundError, match="^.*no_such_run does not exist: pass a finished run's folder"):
        rl_curl.load_policy(tmp_path / "no_such_run")
    (tmp_path / "x.pt").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="is not a readable rl_curl policy"):
        rl_curl.load_policy(tmp_path / "x.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "y.pt")
    with pytest.raises(ValueError, match="is not an rl_curl policy"):
        rl_curl.load_policy(tmp_path / "y.pt")


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("batch", [False, True])
def test_policy_refuses_observations_with_nan_or_inf(tmp_path, bad, batch):
    """Issue 34: a float observation with NaN or inf gave NaN actions silently; refused in one line."""
    from rl_curl.agent import CurlAgent
    from rl_curl.policy import save_policy

    cfg = tiny_config().resolved()
    shape = cfg.obs_shape
    save_policy(CurlAgent(shape, 2, cfg), cfg, shape, tmp_path / "policy.pt")
    act = rl_curl.load_policy(tmp_path)
    obs = np.full((2, *shape) if batch else shape, 128.0, dtype=np.float32)
    assert np.isfinite(act(obs)).all()
    obs[(0,) * obs.ndim] = bad
    with pytest.raises(ValueError, match=r"^obs holds 1 NaN or inf value\(s\)"):
        act(obs)


def test_readme_snippet_runs_as_written(tmp_path, monkeypatch):
    """The README's quickstart lines that use a trained policy, on a tiny cartpole run at the CPU preset's image
    size (64, not the environment's default 100: the snippet makes the environment at the run's size)."""
    import re
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    snippet = re.search(r"## Train a control agent from pixels.*?```python\n(.*?)```", readme, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    run(tiny_config(task="cartpole-swingup", image_size=64, crop_size=56, env_steps=16, eval_every=16,
                    output_dir="runs/cartpole"))
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 - the documented lines themselves
    assert scope["obs"].shape == (9, 64, 64) and np.isfinite(scope["reward"])


def test_checkpoint_entries_are_named(finished_run, tmp_path):
    """Issue 16: accelerate's custom_checkpoint_N.pkl meant something only by registration order; the
    checkpoint now says which is which, and a resume refuses a checkpoint whose entries differ."""
    import json
    import shutil

    from shared_losses.training.runtime import CheckpointError, checkpoint_entry

    ckpt = finished_run / "checkpoint"
    entries = json.loads((ckpt / "entries.json").read_text())
    assert list(entries)[:6] == ["agent", "critic_opt", "actor_opt", "alpha_opt", "encoder_opt", "aux_opt"]
    assert entries["agent"] == "custom_checkpoint_0.pkl" and checkpoint_entry(ckpt, "agent") == ckpt / entries["agent"]
    with pytest.raises(CheckpointError, match="has no entry 'critic'"):
        checkpoint_entry(ckpt, "critic")
    copy = tmp_path / "copy"
    shutil.copytree(finished_run, copy)
    swapped = dict(entries)
    swapped["actor_opt"], swapped["critic_opt"] = entries["critic_opt"], entries["actor_opt"]
    (copy / "checkpoint/entries.json").write_text(json.dumps(dict(reversed(list(swapped.items())))))
    with pytest.raises(CheckpointError, match="holds the entries .* but this run registers"):
        run(tiny_config(task=ENV, output_dir=str(copy), env_steps=80, eval_every=40, aux="curl", resume=True))


@pytest.mark.parametrize("bad", [300.0, -5.0])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_policy_refuses_pixel_values_outside_0_255(tmp_path, bad, dtype):
    """Issue 46, item 14: pixel values of 300 or -5 (a wrong scaling) were acted on silently."""
    from rl_curl.agent import CurlAgent
    from rl_curl.policy import save_policy

    cfg = tiny_config().resolved()
    shape = cfg.obs_shape
    save_policy(CurlAgent(shape, 2, cfg), cfg, shape, tmp_path / "policy.pt")
    act = rl_curl.load_policy(tmp_path)
    obs = np.full(shape, 128, dtype=dtype)
    assert np.isfinite(act(obs)).all() and np.isfinite(act(obs.astype(np.uint8))).all()
    obs[0, 0, 0] = bad
    with pytest.raises(ValueError, match=f"^obs holds values from {min(bad, 128):g} to {max(bad, 128):g}: a policy "
                                         "acts on pixel values 0-255"):
        act(obs)


def test_policy_refuses_pixels_scaled_to_0_1(tmp_path):
    """A float observation in [0, 1] (pixels divided by 255) was acted on silently, giving another action."""
    from rl_curl.agent import CurlAgent
    from rl_curl.policy import save_policy

    cfg = tiny_config().resolved()
    shape = cfg.obs_shape
    save_policy(CurlAgent(shape, 2, cfg), cfg, shape, tmp_path / "policy.pt")
    act = rl_curl.load_policy(tmp_path)
    obs = np.random.default_rng(0).integers(0, 256, size=shape).astype(np.uint8)
    assert np.array_equal(act(obs.astype(np.float32)), act(obs))  # whole-number floats are pixel values
    with pytest.raises(ValueError, match="^obs holds values that are not whole numbers: .*not scaled to \\[0, 1\\]"):
        act(obs.astype(np.float32) / 255)
