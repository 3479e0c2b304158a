"""Evaluate a trained run from its checkpoint: mean ± std return over N episodes, optional video.

    python -m rl_curl.evaluate --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --episodes 10 --video
    python -m rl_curl.evaluate --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --video-path /tmp/cartpole.mp4

The video's place is checked before any episode runs (a folder that cannot be written: one ``error:`` line,
status 2); a video that still fails to be written afterwards does not lose the evaluation: the returns are
printed first, then one ``error:`` line about the video (status 1).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from shared_losses.training.cli import parse_dataclass
from shared_losses.training.runtime import (ENTRIES, CheckpointError, check_device, checkpoint_entry, load_checkpoint,
                                            read_json_file, resolve_checkpoint, run_application,
                                            another_application)

from .config import Config


@dataclass
class EvalArgs:
    """Evaluate the policy saved in a training run's checkpoint."""

    run_dir: str
    """Training output directory (holds config.json and checkpoint/)."""
    episodes: int = 10
    """Number of evaluation episodes (deterministic policy)."""
    video: bool = False
    """Write run_dir/evaluate.mp4 of the first episode (--video-path: another file)."""
    video_path: str | None = None
    """Write the first episode's video to this file instead of run_dir/evaluate.mp4 (implies --video; ending .mp4,
    .mkv, .mov, .avi or .gif; its folder must exist and be writable: checked before evaluating)."""
    device: str = "cpu"
    """Torch device to run the policy on."""


def load_agent(run_dir: str | Path, device: str = "cpu"):
    """The agent of ``run_dir``'s checkpoint, its resolved config and the checkpoint's environment step."""
    from .train import build, check_checkpoint_format

    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.json"
    # policy.pt, config.json, checkpoint/: a file or folder inside a run, whose folder was meant
    holder = next((f for f in run_dir.parents if (f / "config.json").is_file()
                   and ((f / "run.json").is_file() or (f / "checkpoint").is_dir())), None)
    if run_dir.is_file():
        raise NotADirectoryError(f"{run_dir} is a file, not a run's folder: pass the run's folder (the --output-dir "
                                 "of python -m rl_curl.train" + (f", here {holder}" if holder else "") + "); a "
                                 "finished run's policy.pt alone loads with rl_curl.load_policy")
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: is {run_dir} a rl_curl training directory?"
                                + (f" (it is inside the run folder {holder}: pass that)" if holder else ""))
    owner = run_application(run_dir)
    if owner is None:
        raise ValueError(f"{run_dir} holds no run (no run.json, and its config.json is not an rl_curl run's): pass "
                         "an rl_curl training folder (the --output-dir of python -m rl_curl.train)")
    if owner not in ("rl_curl", "unknown"):
        raise ValueError(another_application(run_dir, owner, "rl_curl"))
    check_device(str(device))
    saved = read_json_file(cfg_path, "rl_curl run's configuration")
    fields = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(saved) - fields) if isinstance(saved, dict) else None
    if unknown is None or unknown:
        raise ValueError(f"{cfg_path} is not an rl_curl configuration (" + ("not a JSON object" if unknown is None else
                         f"unknown keys {', '.join(unknown[:5])}") + "): is it a run of another application?")
    cfg = Config(**saved).resolved()
    try:
        ckpt = resolve_checkpoint(run_dir / "checkpoint")
    except FileNotFoundError as err:
        raise FileNotFoundError(f"{run_dir} has no checkpoint/ yet: a run writes one every --checkpoint-every "
                                "environment steps and at its end; evaluate it after that") from err
    extra = load_checkpoint(None, ckpt)
    check_checkpoint_format(extra, ckpt)
    env, agent = build(cfg, device)
    env.close()
    try:
        # by name where the checkpoint has a table of entries; checkpoints written before it hold the agent first
        entry = checkpoint_entry(ckpt, "agent") if (ckpt / ENTRIES).exists() else ckpt / "custom_checkpoint_0.pkl"
        agent.load_state_dict(torch.load(entry, map_location=device, weights_only=False))
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {ckpt} does not hold this run's agent ({err})") from err
    return agent, cfg, extra["step"] * cfg.action_repeat


#: Endings of a video file that imageio writes (ffmpeg's containers for H.264, and GIF); the format is the ending's.
VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi", ".gif")


def video_target(args: EvalArgs) -> Path | None:
    """Where ``args`` asks for the video (None: no video), checked before any episode runs: a known ending, an
    existing folder this process can create a file in (tried), not a folder itself; a ValueError (or
    FileNotFoundError / IsADirectoryError) of one line otherwise."""
    if args.video_path is None and not args.video:
        return None
    option = "--video-path" if args.video_path is not None else "--video"
    path = Path(args.video_path) if args.video_path is not None else Path(args.run_dir) / "evaluate.mp4"
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise ValueError(f"{option} {path}: the video's format is taken from its ending, one of "
                         f"{', '.join(VIDEO_SUFFIXES)}")
    if path.is_dir():
        raise IsADirectoryError(f"{option} {path} is a folder: name the video's file (e.g. {path / 'evaluate.mp4'})")
    folder = path.parent
    if not folder.is_dir():
        raise FileNotFoundError(f"{option} {path}: the folder {folder} does not exist")
    try:  # a file made and removed: what a write will meet (a read-only mount, permissions, a quota), also as root
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{path.stem}.", suffix=".check")
        os.close(fd)
        os.unlink(probe)
    except OSError as err:
        raise ValueError(f"cannot write the video {path} ({err.strerror or err}): nothing was evaluated; pass "
                         "--video-path FILE in a folder you can write") from None
    return path


def _first_line(err: BaseException) -> str:
    """``err`` in one line; for imageio's ffmpeg writer (a broken pipe, then the command and ffmpeg's output) the
    last line ffmpeg wrote, which says why."""
    text = str(err)
    head, _, ffmpeg = text.partition("FFMPEG STDERR OUTPUT:")
    lines = [line.strip() for line in (ffmpeg or head).splitlines() if line.strip()]
    lines = lines[-1:] if ffmpeg else lines[:1]
    return f"{type(err).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def main(args: EvalArgs | None = None) -> dict:
    """Evaluate ``args.run_dir``'s checkpoint; prints and returns the result. A video that could not be written
    after the episodes ran leaves the result whole, with ``video_error`` (and ``video`` None) in it."""
    from .train import eval_episodes, write_video

    args = args or parse_dataclass(EvalArgs)
    if args.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {args.episodes}")
    agent, cfg, env_step = load_agent(args.run_dir, args.device)
    video = video_target(args)
    if cfg.mixed_precision == "bf16":  # act as the run's own evaluations did: under bf16 autocast
        agent.autocast = functools.partial(torch.autocast, torch.device(args.device).type, dtype=torch.bfloat16)
    # rl_curl.train's evaluation, with the video written here: after the returns are safe, so that a video that
    # cannot be written does not lose the evaluation. The initial states of the evaluation at the checkpoint's
    # step: re-evaluating a finished run's checkpoint replays its final evaluation's episodes (numbers equal on
    # the machine and device of the run; another CPU or GPU may end a few ulps apart).
    threads = torch.get_num_threads()
    if cfg.torch_threads > 0:  # as many CPU threads as the run had: a float sum split otherwise ends a few ulps apart
        torch.set_num_threads(cfg.torch_threads)
    try:
        returns, frames = eval_episodes(agent, cfg, args.episodes, env_step, video=video is not None)
    finally:
        torch.set_num_threads(threads)
    result = {"task": cfg.task, "aux": cfg.aux, "episodes": args.episodes,
              "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "returns": returns}
    problem = None
    if video is not None:
        try:
            write_video(video, frames)
            result["video"] = str(video)
        except Exception as err:  # noqa: BLE001 - reported in one line after the returns, which stand
            problem = f"the video {video} was not written ({_first_line(err)}); the returns above are complete"
            result.update(video=None, video_error=problem)
    print(json.dumps({k: v for k, v in result.items() if k != "video_error"}), flush=True)
    if problem is not None:
        sys.stderr.write(f"error: {problem}\n")
        sys.stderr.flush()
    return result


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    outcome = run_cli(main)
    sys.exit(1 if isinstance(outcome, dict) and outcome.get("video_error") else 0)
