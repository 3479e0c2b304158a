"""Evaluate a trained run from its checkpoint, or a policy file: mean ± std return over N episodes, optional video.

    python -m rl_curl.evaluate --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --episodes 10 --video
    python -m rl_curl.evaluate --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --video-path /tmp/cartpole.mp4
    python -m rl_curl.evaluate --policy runs/rl_curl/cartpole-swingup/curl/seed0/policies/env_step_50000.pt

Either way the episodes start where the run's own evaluation at that environment step started (the checkpoint's
step, or the step the policy file records): the first --eval-episodes of them replay that evaluation.

The video's place is checked before any episode runs (a folder that cannot be written: one ``error:`` line,
status 2); a video that still fails to be written afterwards does not lose the evaluation: the returns are
printed first, then one ``error:`` line about the video (status 1).
"""

from __future__ import annotations

import contextlib
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

from shared_losses.training.cli import examples_from, parse_dataclass
from shared_losses.training.runtime import (ENTRIES, CheckpointError, another_application, changes_text,
                                            check_device, check_finite_weights, checkpoint_entry, config_changes,
                                            error_line, load_checkpoint, note_if_run_going, read_json_file,
                                            read_torch_file, resolve_checkpoint, run_application)

from .config import Config, check_video_size


@dataclass
class EvalArgs:
    """Evaluate the policy saved in a training run's checkpoint (--run-dir) or in a policy file (--policy)."""

    run_dir: str | None = None
    """Training output directory (holds config.json and checkpoint/): its checkpoint's policy is evaluated."""
    policy: str | None = None
    """A policy file instead of --run-dir: a run's policy.pt, an evaluation's policies/env_step_N.pt (rl_curl.train
    --keep-policies) or an rl_curl.export output (files written before 2026-12-06 record no step: not these)."""
    episodes: int = 10
    """Number of evaluation episodes (deterministic policy)."""
    video: bool = False
    """Write the first episode's video: run_dir/evaluate.mp4, or beside --policy's file with its name and .mp4
    (--video-path: another file)."""
    video_path: str | None = None
    """Write the first episode's video to this file instead (implies --video; ending .mp4, .mkv, .mov, .avi or
    .gif; its folder must exist and be writable: checked before evaluating)."""
    video_size: int | None = 256
    """The side of the video's frames in pixels: the episode rendered again from the observation's camera at this
    size (256: the official CURL's videos; at most 480 for DeepMind Control). None: the observations' own frames."""
    device: str = "cpu"
    """Torch device to run the policy on: cpu, cuda, cuda:N, mps, or auto (a CUDA GPU if there is one, else the
    CPU)."""


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
    if not run_dir.exists():
        raise FileNotFoundError(f"{run_dir}: no such folder (pass a run's folder, the --output-dir of python -m "
                                "rl_curl.train)")
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: is {run_dir} a rl_curl training directory?"
                                + (f" (it is inside the run folder {holder}: pass that)" if holder else ""))
    owner = run_application(run_dir)
    if owner is None:
        raise ValueError(f"{run_dir} holds no run (no run.json, and its config.json is not an rl_curl run's): pass "
                         "an rl_curl training folder (the --output-dir of python -m rl_curl.train)")
    if owner not in ("rl_curl", "unknown"):
        raise ValueError(another_application(run_dir, owner, "rl_curl"))
    note_if_run_going(run_dir, "its latest checkpoint")
    check_device(str(device))
    saved = read_json_file(cfg_path, "rl_curl run's configuration")
    fields = {f.name for f in dataclasses.fields(Config)}
    unknown = sorted(set(saved) - fields) if isinstance(saved, dict) else None
    if unknown and owner == "rl_curl":  # run.json says rl_curl: options renamed or removed since the run was made
        raise ValueError(f"{run_dir} is a run of an earlier version of the suite (its config.json records "
                         f"{', '.join(unknown[:5])}, which this version does not have), which this version cannot "
                         "load; a finished run's policy.pt loads with rl_curl.load_policy")
    if unknown is None or unknown:
        raise ValueError(f"{cfg_path} is not an rl_curl configuration (" + ("not a JSON object" if unknown is None else
                         f"unknown keys {', '.join(unknown[:5])}") + "): is it a run of another application, or of an "
                         "earlier version of the suite?")
    cfg = Config(**saved).resolved()
    ckpt, extra, weights = _read_checkpoint(run_dir, device)
    check_checkpoint_format(extra, ckpt)
    if isinstance(extra.get("config"), dict):  # the options the checkpoint was written under (older ones lack them)
        changes = config_changes(Config.with_added_fields(extra["config"]), Config.with_added_fields(saved),
                                 free=Config.RESUME_FREE)
        if changes:  # config.json edited or copied over: the agent would be built for another task or shape
            raise CheckpointError(f"{cfg_path} and the checkpoint {ckpt} disagree ({changes_text(changes)}, as the "
                                  "checkpoint's value -> config.json's): the checkpoint was written with other "
                                  "options; put back the run's config.json, or pass the run folder the checkpoint "
                                  "belongs to")
    env, agent = build(cfg, device)
    env.close()
    try:
        agent.load_state_dict(weights)
    except Exception as err:  # noqa: BLE001
        raise CheckpointError(f"checkpoint {ckpt} does not hold this run's agent ({err})") from err
    return agent, cfg, extra["step"] * cfg.action_repeat


def load_policy_file(path: str | Path, device: str = "cpu"):
    """``(the policy in the file path as an agent that acts (:class:`rl_curl.agent.Acting`: the run's crop; main sets
    the run's autocast), its run's config, the environment step it records)``; one-line errors for a missing file, a
    folder and a file that records no step."""
    from .agent import Acting
    from .policy import load_policy

    check_device(str(device))
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--policy {path}: no such file (a run's policy.pt, or policies/env_step_N.pt of a "
                                "run made with --keep-policies)")
    if path.is_dir():
        raise IsADirectoryError(f"--policy {path} is a folder: pass a policy file (a run's policy.pt or "
                                "policies/env_step_N.pt), or the run's folder as --run-dir")
    policy = load_policy(path, device)
    if policy.env_step is None:
        raise ValueError(f"--policy {path} does not record the environment step it was trained to (a file written "
                         "before 2026-12-06), so its evaluation's episodes cannot be chosen: evaluate its run with "
                         "--run-dir, or act with rl_curl.load_policy")
    return Acting(policy.actor, policy.cfg.crop_size, contextlib.nullcontext, torch.device(device)), policy.cfg, \
        policy.env_step


def _read_checkpoint(run_dir: Path, device: str, tries: int = 5) -> tuple[Path, dict, dict]:
    """``(folder, extra state, agent weights)`` of ``run_dir``'s checkpoint, read from one checkpoint: a run that is
    still training replaces its checkpoint folder whole (a rename), and one replaced between the reads (the folder's
    inode changed, or a file gone) is read again, so the step and the weights are never of two checkpoints."""
    def replaced(ckpt: Path, inode: int) -> bool:
        return not ckpt.exists() or os.stat(ckpt).st_ino != inode

    for attempt in range(tries):
        try:
            ckpt = resolve_checkpoint(run_dir / "checkpoint")
        except FileNotFoundError as err:
            raise FileNotFoundError(f"{run_dir} has no checkpoint/ yet: a run writes one every --checkpoint-every "
                                    "environment steps and at its end; evaluate it after that") from err
        try:
            inode = os.stat(ckpt).st_ino
        except FileNotFoundError:  # replaced since it was found
            continue
        entry = None
        try:
            extra = load_checkpoint(None, ckpt)
            # by name where the checkpoint has a table of entries; checkpoints written before it hold the agent first
            entry = checkpoint_entry(ckpt, "agent") if (ckpt / ENTRIES).exists() else ckpt / "custom_checkpoint_0.pkl"
            weights = read_torch_file(entry, map_location=device)
            check_finite_weights(weights, f"checkpoint {ckpt}")
        except Exception as err:  # noqa: BLE001
            if replaced(ckpt, inode) and attempt < tries - 1:  # a file gone with the folder: read the new one
                continue
            if isinstance(err, CheckpointError):
                raise
            if entry is None:
                raise CheckpointError(f"checkpoint {ckpt} does not hold this run's agent ({err})") from err
            raise CheckpointError(f"checkpoint {ckpt}: {entry.name}, the agent's file, is unreadable "
                                  f"({error_line(err)}); the "
                                  "file is damaged (e.g. truncated by a full disk or a copy that did not finish)"
                                  ) from err
        if not replaced(ckpt, inode):
            return ckpt, extra, weights
    raise CheckpointError(f"the checkpoint of {run_dir} was replaced {tries} times while it was read (a run "
                          "checkpointing that often); try again, or evaluate a copy of the folder")


def episodes_in_turn(agent, cfg: Config, episodes: int, env_step: int, video: bool = False) -> tuple[list, list]:
    """:func:`rl_curl.train.eval_episodes` of ``episodes`` episodes, run as many at a time as the run's own
    evaluations ran (its --eval-episodes): each open environment holds a renderer (about 80 MB), so 60 side by side
    took 5.5 GB; in turns the memory stays that of the run's evaluations, and the first turn is the run's evaluation
    at ``env_step`` to the last digit (the same batch). Episode ``e`` starts from the same state either way; a line
    on stderr after each turn when there are several."""
    from .train import EvalEnvs, eval_episode_seed

    size = min(episodes, max(1, cfg.eval_episodes))
    seeds = [eval_episode_seed(cfg, env_step, e) for e in range(episodes)]
    returns: list = []
    frames: list = []
    envs = None
    try:
        for start in range(0, episodes, size):
            part = seeds[start:start + size]
            if envs is None or envs.episodes != len(part):  # the last turn may be smaller
                if envs is not None:
                    envs.close()
                envs = EvalEnvs(cfg, len(part), cfg.eval_parallel, cfg.eval_worker)
            got, seen = envs.run(agent, part, video=video and start == 0)
            returns += got
            frames = frames or seen
            if episodes > size:
                print(f"evaluated {len(returns)} of {episodes} episodes ({size} at a time, as the run's evaluations)",
                      file=sys.stderr, flush=True)
    finally:
        if envs is not None:
            envs.close()
    return returns, frames


#: Endings of a video file that imageio writes (ffmpeg's containers for H.264, and GIF); the format is the ending's.
VIDEO_SUFFIXES = (".mp4", ".mkv", ".mov", ".avi", ".gif")


def video_target(args: EvalArgs) -> Path | None:
    """Where ``args`` asks for the video (None: no video), checked before any episode runs: a known ending, an
    existing folder this process can create a file in (tried), not a folder itself; a ValueError (or
    FileNotFoundError / IsADirectoryError) of one line otherwise."""
    if args.video_path is None and not args.video:
        return None
    option = "--video-path" if args.video_path is not None else "--video"
    path = Path(args.video_path) if args.video_path is not None else (
        Path(args.policy).with_suffix(".mp4") if args.policy is not None else Path(args.run_dir) / "evaluate.mp4")
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
    from .train import write_video

    args = args or parse_dataclass(EvalArgs, description=f"{EvalArgs.__doc__}\n\n{examples_from(__doc__)}")
    if args.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {args.episodes}")
    if (args.run_dir is None) == (args.policy is None):
        raise ValueError("pass --run-dir (a run's folder: its checkpoint's policy) or --policy (a policy file)"
                         + (", not both" if args.run_dir is not None else ""))
    args = dataclasses.replace(args, device=str(check_device(args.device)))  # auto: the GPU if there is one
    if args.policy is not None:
        agent, cfg, env_step = load_policy_file(args.policy, args.device)
    else:
        agent, cfg, env_step = load_agent(args.run_dir, args.device)
    video = video_target(args)
    check_video_size(args.video_size, cfg.task)
    cfg = dataclasses.replace(cfg, video_size=args.video_size)
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
        returns, frames = episodes_in_turn(agent, cfg, args.episodes, env_step, video=video is not None)
    finally:
        torch.set_num_threads(threads)
    result = {"task": cfg.task, "aux": cfg.aux, "env_step": env_step, "episodes": args.episodes,
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
