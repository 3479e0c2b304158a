"""A run's policy file (``policy.pt``, what :func:`rl_curl.load_policy` reads) from its last checkpoint, for a run
that was interrupted before it finished (a finished run wrote its own):

    python -m rl_curl.export --run-dir runs/rl_curl/cartpole-swingup/curl/seed0        # writes RUN/policy.pt
    python -m rl_curl.export --run-dir runs/rl_curl/cartpole-swingup/curl/seed0 --output /tmp/cartpole.pt

The policy is the checkpoint's actor, written whole (temporary name, then rename) as a finished run writes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass
class ExportArgs:
    """Write the policy of a training run's last checkpoint as a policy file (rl_curl.load_policy reads it)."""

    run_dir: str
    """Training output directory (holds config.json and checkpoint/)."""
    output: str | None = None
    """The policy file to write (default RUN_DIR/policy.pt)."""
    overwrite: bool = False
    """Replace an existing --output that is an earlier policy file (without it, one is refused and left as it is; any
    other file is never replaced)."""


def main(args: ExportArgs | None = None) -> Path:
    from shared_losses.training.cli import examples_from, parse_dataclass
    from shared_losses.training.runtime import run_folder_given

    from .evaluate import load_agent
    from .policy import POLICY_FILE, is_policy_file, save_policy

    args = args or parse_dataclass(ExportArgs, description=f"{ExportArgs.__doc__}\n\n{examples_from(__doc__)}")
    run_folder_given(args.run_dir)  # named first: --output defaults to a file in it
    out = Path(args.output) if args.output is not None else Path(args.run_dir) / POLICY_FILE
    if out.exists() and not args.overwrite:
        raise FileExistsError(f"--output {out} already exists: pass --overwrite to replace it, or another --output")
    if out.is_file() and not is_policy_file(out):  # the run's config.json was replaced, the run unusable
        raise FileExistsError(f"--output {out} is not an rl_curl policy file; --overwrite replaces only an earlier "
                              "policy: choose another --output (nothing was changed)")
    if out.is_dir():
        raise IsADirectoryError(f"--output {out} is a folder: name the policy file (e.g. {out / POLICY_FILE})")
    if not out.parent.is_dir():  # before the checkpoint is read, not after (torch.save's traceback)
        raise FileNotFoundError(f"--output {out}: the folder {out.parent} does not exist")
    agent, cfg, env_step = load_agent(args.run_dir)
    save_policy(agent, cfg, cfg.obs_shape, out, env_step=env_step)
    print(f"wrote {out}: the policy of {args.run_dir}'s checkpoint at environment step {env_step}", flush=True)
    return out


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
