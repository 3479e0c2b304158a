"""Write ``policy.pt`` from a run's checkpoint (for runs made before policy.pt existed, or any checkpoint):

    python -m rl_curl.export --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 [--output policy.pt]
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tyro


@dataclass
class ExportArgs:
    """Write a run's policy (actor + encoder weights and settings) to policy.pt, loadable with rl_curl.load_policy."""

    run_dir: str
    """Training output directory (holds config.json and checkpoint/)."""
    output: Optional[str] = None
    """Where to write (default: RUN_DIR/policy.pt). An existing file that is not this run's policy is never
    replaced."""


def main(args: ExportArgs | None = None) -> dict:
    from .evaluate import load_agent
    from .policy import POLICY_FILE, load_policy, save_policy

    args = args or tyro.cli(ExportArgs)
    out = Path(args.output) if args.output else Path(args.run_dir) / POLICY_FILE
    if out.is_dir():
        raise ValueError(f"--output {out} is a folder; give a file name such as {out / POLICY_FILE}")
    existing = None
    if out.exists():
        try:
            existing = load_policy(out)
        except (ValueError, FileNotFoundError):
            raise FileExistsError(f"--output {out} exists and is not an rl_curl policy; nothing was written") from None
    agent, cfg, env_step = load_agent(args.run_dir, "cpu")
    if existing is not None and dataclasses.asdict(existing.cfg) != dataclasses.asdict(cfg):
        raise FileExistsError(f"--output {out} is the policy of another run (made with other settings); pass another "
                              "--output; nothing was written")
    save_policy(agent, cfg, cfg.obs_shape, out)  # load_agent built (and closed) the environment already
    result = {"policy": str(out), "env_step": env_step}
    print(result)
    return result


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
