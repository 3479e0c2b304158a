"""Evaluate a trained run from its checkpoint: mean ± std return over N episodes, optional video.

    python -m rl_curl.evaluate --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --episodes 10 --video
"""

from __future__ import annotations

import dataclasses
import functools
import json
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
    """Write run_dir/evaluate.mp4 of the first episode."""
    device: str = "cpu"
    """Torch device to run the policy on."""


def load_agent(run_dir: str | Path, device: str = "cpu"):
    """The agent of ``run_dir``'s checkpoint, its resolved config and the checkpoint's environment step."""
    from .train import build, check_checkpoint_format

    run_dir = Path(run_dir)
    cfg_path = run_dir / "config.json"
    if not cfg_path.exists():
        raise FileNotFoundError(f"{cfg_path} not found: is {run_dir} a rl_curl training directory?")
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


def main(args: EvalArgs | None = None) -> dict:
    from .train import evaluate

    args = args or parse_dataclass(EvalArgs)
    if args.episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {args.episodes}")
    agent, cfg, env_step = load_agent(args.run_dir, args.device)
    if cfg.mixed_precision == "bf16":  # act as the run's own evaluations did: under bf16 autocast
        agent.autocast = functools.partial(torch.autocast, torch.device(args.device).type, dtype=torch.bfloat16)
    video = Path(args.run_dir) / "evaluate.mp4" if args.video else None
    # The initial states of the evaluation at the checkpoint's step: re-evaluating a finished run's
    # checkpoint replays its final evaluation's episodes (numbers equal up to device and precision).
    returns = evaluate(agent, cfg, args.episodes, video, env_step=env_step)
    result = {"task": cfg.task, "aux": cfg.aux, "episodes": args.episodes,
              "return_mean": float(np.mean(returns)), "return_std": float(np.std(returns)), "returns": returns}
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
