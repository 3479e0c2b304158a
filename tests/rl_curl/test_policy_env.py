"""A loaded policy and the environment it acts in (Policy.make_env, Policy.check_env), rl_curl.evaluate's video
(--video-path, a video place checked before evaluating, returns kept when the video fails), the messages for a
file where a run's folder or its policy.pt was meant, and a forked child of a process that rendered with EGL
(an error instead of a hang)."""

import errno
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rl_curl
from rl_curl.train import run

from .conftest import tiny_config

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def repeat50_run(tmp_path_factory):
    """A finished cartpole run with non-default environment settings: action repeat 50 (episodes of 20 agent
    steps; cartpole's default is 8) and camera 1 (the default is 0)."""
    out = tmp_path_factory.mktemp("run") / "r50"
    run(tiny_config(task="cartpole-swingup", action_repeat=50, camera_id=1, env_steps=100, eval_every=100, seed_steps=1,
                    output_dir=str(out)))
    return out


def test_make_env_is_the_runs_own_environment(repeat50_run):
    act = rl_curl.load_policy(repeat50_run)
    assert act.env_settings() == {"task": "cartpole-swingup", "action_repeat": 50, "frame_stack": 3,
                                  "image_size": 20, "camera_id": 1}
    assert set(act.env_settings()) == {"task", *act.ENV_SETTINGS}  # the documented names and the dict agree
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the run's own environment: no warning
        env = act.make_env()
        inner = env.unwrapped
        assert (inner.task, inner.action_repeat, inner.camera_id, inner.image_size, inner.frame_stack) == (
            "cartpole-swingup", 50, 1, 20, 3)
        assert env.spec.max_episode_steps == 20 and env.render_mode == "rgb_array"
        assert act.check_env(env) == []
        # the README's loop
        obs, _ = env.reset(seed=0)
        steps, done = 0, False
        while not done:
            obs, reward, terminated, truncated, info = env.step(act(obs))
            steps, done = steps + 1, terminated or truncated
    assert steps == 20 and truncated and np.isfinite(reward) and env.render().shape == (20, 20, 3)
    env.close()


def test_an_environment_made_otherwise_is_named_by_check_env(repeat50_run):
    """What the README used to show (gym.make with the image size alone) runs at cartpole's action repeat 8 and
    camera 0: observations of the same shape, so the policy cannot refuse them; check_env names the differences."""
    act = rl_curl.load_policy(repeat50_run)
    env = gym.make("rl_curl/cartpole-swingup-v0", image_size=act.cfg.image_size, render_mode="rgb_array")
    with pytest.warns(UserWarning, match=r"^the environment differs from the run's: action_repeat 8 \(the run's: 50"
                                         r"\), camera_id 0 \(the run's: 1\); make the run's own with policy"):
        diffs = act.check_env(env)
    assert diffs == ["action_repeat 8 (the run's: 50)", "camera_id 0 (the run's: 1)"]
    assert act.check_env(env, warn=False) == diffs
    other = gym.make("rl_curl/cartpole-swingup-v0", image_size=24, action_repeat=50, camera_id=1)
    assert act.check_env(other, warn=False) == ["image_size 24 (the run's: 20)",
                                                "observations [9, 24, 24] (the run's: [9, 20, 20])"]
    env.close()
    other.close()


def test_check_env_reads_a_vector_environments_single_spaces(repeat50_run):
    """gymnasium's vector environments batch their spaces ([2, 9, 20, 20]): check_env called the run's own
    environment, two at once, different ("observations [2, 9, 20, 20] (the run's: [9, 20, 20])", seen)."""
    act = rl_curl.load_policy(repeat50_run)
    kw = dict(image_size=20, action_repeat=50, camera_id=1)
    same = gym.make_vec("rl_curl/cartpole-swingup-v0", num_envs=2, vectorization_mode="sync", **kw)
    other = gym.make_vec("rl_curl/cartpole-swingup-v0", num_envs=2, vectorization_mode="sync", **{**kw, "camera_id": 0})
    try:
        assert act.check_env(same, warn=False) == []
        assert act.check_env(other, warn=False) == ["camera_id 0 (the run's: 1)"]
        obs, _ = same.reset(seed=0)
        assert act(obs).shape == (2, act.action_dim)  # and the policy acts on the batch
    finally:
        same.close()
        other.close()


def test_make_env_takes_extra_arguments_and_warns_of_changed_settings(repeat50_run):
    act = rl_curl.load_policy(repeat50_run)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = act.make_env(seed=3, max_episode_steps=5, render_mode=None)
    assert env.spec.max_episode_steps == 5 and env.render_mode is None
    env.close()
    with pytest.warns(UserWarning, match=r"^make_env: action_repeat=2 \(the run's: 50\): the policy acts in an "
                                         "environment other than the one it was trained in"):
        env = act.make_env(action_repeat=2)
    assert env.unwrapped.action_repeat == 2 and env.spec.max_episode_steps == 500
    env.close()


def test_make_env_of_a_gym_task(tmp_path):
    """A run on gym:ENV_ID: its GymPixels environment with the run's settings (no camera)."""
    from rl_curl.agent import CurlAgent
    from rl_curl.env import GymPixels
    from rl_curl.policy import save_policy

    cfg = tiny_config(task="gym:tests.rl_curl.tiny_pixel_env:TinyDot-v0", action_repeat=2, image_size=24).resolved()
    save_policy(CurlAgent(cfg.obs_shape, 2, cfg), cfg, cfg.obs_shape, tmp_path / "policy.pt")
    act = rl_curl.load_policy(tmp_path)
    assert "camera_id" not in act.env_settings()
    env = act.make_env()
    assert isinstance(env, GymPixels) and (env.action_repeat, env.image_size) == (2, 24)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (9, 24, 24) and act.check_env(env, warn=False) == []
    env.step(act(obs))
    env.close()


def test_a_file_that_is_not_a_policy_says_where_the_policy_is(repeat50_run, tmp_path):
    policy = repeat50_run / "policy.pt"
    where = f"this run's policy is {policy} (pass it, or the folder {repeat50_run})"
    with pytest.raises(ValueError) as err:
        rl_curl.load_policy(repeat50_run / "config.json")
    assert str(err.value) == (f"{repeat50_run / 'config.json'} is not a readable rl_curl policy file (a JSON file "
                              f"that torch.save did not write); {where}")
    assert "weights_only" not in str(err.value)
    with pytest.raises(FileNotFoundError, match=f"checkpoint/policy.pt not found: {where}".replace("(", r"\(")
                       .replace(")", r"\)")):
        rl_curl.load_policy(repeat50_run / "checkpoint")
    pkl = sorted((repeat50_run / "checkpoint").glob("random_states_*.pkl"))[0]  # a torch file of more than tensors
    with pytest.raises(ValueError, match="is not a readable rl_curl policy file \\(a torch file holding objects other "
                                         "than tensors and plain values"):
        rl_curl.load_policy(pkl)
    (tmp_path / "notes.json").write_text("{}")
    with pytest.raises(ValueError, match="a JSON file that torch.save did not write\\); a policy is the policy.pt of "
                                         "a finished run's folder"):
        rl_curl.load_policy(tmp_path / "notes.json")


def test_evaluate_given_a_file_or_a_folder_inside_a_run_names_the_run(repeat50_run):
    from rl_curl.evaluate import EvalArgs, main

    with pytest.raises(NotADirectoryError, match=f"policy.pt is a file, not a run's folder: pass the run's folder "
                                                 f"\\(the --output-dir of python -m rl_curl.train, here "
                                                 f"{repeat50_run}\\)"):
        main(EvalArgs(run_dir=str(repeat50_run / "policy.pt"), episodes=1))
    with pytest.raises(FileNotFoundError, match=f"config.json not found: .*it is inside the run folder "
                                                f"{repeat50_run}: pass that"):
        main(EvalArgs(run_dir=str(repeat50_run / "checkpoint"), episodes=1))


def _no_evaluation(monkeypatch):
    import rl_curl.train

    def refuse(*a, **k):
        raise AssertionError("an episode was run")

    monkeypatch.setattr(rl_curl.train, "EvalEnvs", refuse)


def test_evaluate_checks_the_videos_place_before_evaluating(repeat50_run, tmp_path, monkeypatch):
    import rl_curl.evaluate as ev

    _no_evaluation(monkeypatch)
    with pytest.raises(FileNotFoundError, match="--video-path .*x.mp4: the folder .*no_such_folder does not exist"):
        ev.main(ev.EvalArgs(run_dir=str(repeat50_run), video_path=str(tmp_path / "no_such_folder" / "x.mp4")))
    with pytest.raises(ValueError, match="x.webm: the video's format is taken from its ending, one of .mp4"):
        ev.main(ev.EvalArgs(run_dir=str(repeat50_run), video_path=str(tmp_path / "x.webm")))
    (tmp_path / "videos.mp4").mkdir()
    with pytest.raises(IsADirectoryError, match="videos.mp4 is a folder: name the video's file"):
        ev.main(ev.EvalArgs(run_dir=str(repeat50_run), video_path=str(tmp_path / "videos.mp4")))

    def read_only(*a, **k):  # what a read-only mount answers (the test may run as root, where chmod does not stop it)
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(ev.tempfile, "mkstemp", read_only)
    with pytest.raises(ValueError, match=f"^cannot write the video {repeat50_run / 'evaluate.mp4'} \\(Read-only file "
                                         "system\\): nothing was evaluated; pass --video-path FILE in a folder you "
                                         "can write$"):
        ev.main(ev.EvalArgs(run_dir=str(repeat50_run), video=True))


def test_evaluate_writes_the_video_elsewhere_and_keeps_the_returns_when_it_fails(repeat50_run, tmp_path,
                                                                                   monkeypatch, capsys):
    import imageio.v2 as imageio

    import rl_curl.evaluate as ev

    video = tmp_path / "first.mp4"
    res = ev.main(ev.EvalArgs(run_dir=str(repeat50_run), episodes=1, video_path=str(video)))
    assert res["video"] == str(video) and video.stat().st_size > 0 and not (repeat50_run / "evaluate.mp4").exists()
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == res
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.mp4"]

    def full_disk(path, *a, **k):
        Path(path).write_bytes(b"part of a video")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(imageio, "mimsave", full_disk)
    again = ev.main(ev.EvalArgs(run_dir=str(repeat50_run), episodes=1, video_path=str(tmp_path / "second.mp4")))
    out, err = capsys.readouterr()
    assert again["returns"] == res["returns"] and again["video"] is None
    assert json.loads(out.strip().splitlines()[-1]) == {k: v for k, v in again.items() if k != "video_error"}
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines == [f"error: the video {tmp_path / 'second.mp4'} was not written (OSError: [Errno 28] No space left "
                     "on device); the returns above are complete"] == [f"error: {again['video_error']}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.mp4"]  # no partial video left


@pytest.mark.slow  # runs the entry point in a subprocess
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc, a folder nobody can create files in")
def test_evaluate_cli_refuses_an_unwritable_video_place_in_one_line(repeat50_run):
    env = {**os.environ, "MUJOCO_GL": "egl", "HF_HUB_OFFLINE": "1"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    res = subprocess.run([sys.executable, "-m", "rl_curl.evaluate", "--run-dir", str(repeat50_run), "--video-path",
                          "/proc/evaluate.mp4"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert res.returncode == 2 and "Traceback" not in res.stderr and res.stdout == "", res.stderr
    assert len(errors) == 1 and errors[0].startswith("error: cannot write the video /proc/evaluate.mp4 (")


FORKED = r'''
import os, sys, time
import gymnasium as gym
import rl_curl.env as E

if __name__ == "__main__":
    env = gym.make("rl_curl/cartpole-swingup-v0", image_size=16)
    env.reset(seed=0)  # rendered here: an EGL context in this process
    pid = os.fork()
    if pid == 0:  # a child that renders, then exits as a script does (atexit handlers run)
        try:
            E.DMCPixels("cartpole-swingup", image_size=16).reset(seed=1)
            print("child: rendered", flush=True)
        except RuntimeError as err:
            print("child: RuntimeError:", err, flush=True)
        sys.exit(0)
    deadline = time.time() + 60
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.time() > deadline:
            os.kill(pid, 9)
            print("child: HUNG", flush=True)
            break
        time.sleep(0.1)
    for context in ("fork", "spawn"):
        kw = {} if context == "fork" else {"vector_kwargs": {"context": context}}
        envs = gym.make_vec("rl_curl/cartpole-swingup-v0", num_envs=2, vectorization_mode="async", image_size=16, **kw)
        try:
            obs, _ = envs.reset(seed=0)
            print(f"{context}: reset", obs.shape, flush=True)
        except RuntimeError as err:
            print(f"{context}: RuntimeError:", err, flush=True)
        envs.close()
'''


@pytest.mark.slow  # a fresh interpreter that forks and spawns environment processes
def test_a_forked_child_of_a_process_that_rendered_raises_instead_of_hanging(tmp_path):
    """gymnasium's async vector environment (fork, Linux's default) hung forever in reset once an rl_curl
    environment had rendered in the parent (EGL does not survive a fork); the child now raises naming the remedy,
    and exits. With context spawn it works. Everything here runs under time limits: a hang fails the test."""
    from dm_control import _render

    if _render.BACKEND != "egl":
        pytest.skip(f"the guard is for MuJoCo's EGL backend (this process renders with {_render.BACKEND})")
    script = tmp_path / "forked.py"
    script.write_text(FORKED)
    log = tmp_path / "log.txt"
    env = {**os.environ, "MUJOCO_GL": "egl", "PYTHONPATH": str(ROOT)}
    with open(log, "w") as out:  # a file, not a pipe: a hung grandchild cannot hold the test's read open
        proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            proc.wait(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail("the script hung:\n" + log.read_text()[-3000:])
    text = log.read_text()
    lines = [line for line in text.splitlines() if line.startswith(("child:", "fork:", "spawn:"))]
    assert proc.returncode == 0, text[-3000:]
    assert lines[0].startswith("child: RuntimeError: this process was forked from one that had rendered with "
                               "MuJoCo's EGL backend"), text[-3000:]
    assert "vector_kwargs={'context': 'spawn'}" in lines[0]
    assert lines[1].startswith("fork: RuntimeError: this process was forked"), text[-3000:]
    assert lines[2] == "spawn: reset (2, 9, 16, 16)", text[-3000:]
    assert len(lines) == 3


def test_load_policy_names_its_python_argument_not_the_command_lines_flag(tmp_path):
    """load_policy(run, device="cuda") on a machine without CUDA said "--device cuda: ... use --device cpu", the
    command line's words in a Python call."""
    import torch

    from rl_curl import load_policy
    from shared_losses.training.runtime import check_device

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here")
    with pytest.raises(ValueError, match=r"^device='cuda': .*use device='cpu'"):
        load_policy(tmp_path, device="cuda")
    with pytest.raises(ValueError, match=r"^--device cuda: .*use --device cpu"):
        check_device("cuda")


def test_device_auto_is_taken_by_the_commands_that_evaluate_as_by_the_trainers(repeat50_run, capsys):
    """The trainers' --device default is auto; rl_curl.evaluate, nlp_qt.senteval and fewshot.predict refused it
    ("'auto' is not a torch device"), so a --device copied from training to evaluation failed. auto is a GPU where
    one is visible, else the CPU."""
    import torch

    from rl_curl import load_policy
    from rl_curl.evaluate import EvalArgs, main
    from shared_losses.training.runtime import check_device

    assert check_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    assert load_policy(repeat50_run, device="auto").device == check_device("auto")
    result = main(EvalArgs(run_dir=str(repeat50_run), episodes=1, device="auto"))
    assert len(result["returns"]) == 1


def test_evaluate_videos_at_the_size_asked_for(repeat50_run, tmp_path):
    """rl_curl.evaluate --video-size: 256x256 by default (the official code's videos), None the observations' frames;
    a size the task cannot render is refused before any episode runs."""
    import imageio.v2 as imageio

    import rl_curl.evaluate as ev

    ev.main(ev.EvalArgs(run_dir=str(repeat50_run), episodes=1, video_path=str(tmp_path / "big.mp4")))
    ev.main(ev.EvalArgs(run_dir=str(repeat50_run), episodes=1, video_path=str(tmp_path / "own.mp4"), video_size=None))
    side = json.loads((repeat50_run / "config.json").read_text())["image_size"]
    with imageio.get_reader(tmp_path / "big.mp4") as big, imageio.get_reader(tmp_path / "own.mp4") as own:
        assert big.get_meta_data()["size"] == (256, 256) and own.get_meta_data()["size"] == (side + side % 2,) * 2
    with pytest.raises(ValueError, match=r"^--video-size 481: DeepMind Control renders at most 480x480"):
        ev.main(ev.EvalArgs(run_dir=str(repeat50_run), video_path=str(tmp_path / "no.mp4"), video_size=481))
    assert not (tmp_path / "no.mp4").exists()
