"""A finished run's policy as a file of its own: ``policy.pt`` (actor + encoder weights and the settings
needed to rebuild them; plain tensors, numbers and strings, so ``torch.load(path, weights_only=True)``
reads it) and :func:`load_policy`, a callable from uint8 observations to actions.

    import rl_curl
    act = rl_curl.load_policy("runs/rl_curl/cartpole-swingup/curl/seed0")   # or .../policy.pt
    actions = act(obs)   # obs: [C, H, W] or [B, C, H, W] uint8, as the run's environment gives them
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import torch

POLICY_FILE = "policy.pt"
POLICY_FORMAT = 1


def policy_state(agent, cfg, obs_shape) -> dict:
    """What ``policy.pt`` holds: the actor's weights (its encoder included) and how to rebuild it."""
    config = json.loads(json.dumps(dataclasses.asdict(cfg)))  # plain values only (weights_only loading)
    return {"format": POLICY_FORMAT, "config": config, "obs_shape": [int(d) for d in obs_shape],
            "action_dim": int(agent.action_dim),
            "actor": {k: v.detach().float().cpu().contiguous() for k, v in agent.actor.state_dict().items()}}


def save_policy(agent, cfg, obs_shape, path: str | os.PathLike) -> Path:
    """Write ``policy.pt`` whole (temporary name, then rename)."""
    from shared_losses.training.runtime import written_whole

    path = Path(path)
    with written_whole(path) as tmp:
        torch.save(policy_state(agent, cfg, obs_shape), tmp)
    return path


class Policy:
    """Deterministic policy (the squashed mean action, as CURL evaluates) of a saved run."""

    def __init__(self, state: dict, device: str = "cpu"):
        from .augment import center_crop  # noqa: F401  (checked import: the crop used when acting)
        from .config import Config
        from .networks import Actor, ConvTrunk, Encoder

        fields = {f.name for f in dataclasses.fields(Config)}
        self.cfg = Config(**{k: v for k, v in state["config"].items() if k in fields})
        c, self.obs_shape, self.action_dim = self.cfg, tuple(state["obs_shape"]), int(state["action_dim"])
        trunk = ConvTrunk(self.obs_shape[0], c.crop_size, c.num_filters, c.num_layers)
        self.actor = Actor(Encoder(trunk, c.feature_dim, c.encoder_tanh), self.action_dim, c.hidden_dim,
                           c.log_std_min, c.log_std_max)
        self.actor.load_state_dict(state["actor"])
        trunk.to(memory_format=torch.channels_last)
        self.device = torch.device(device)
        self.actor.to(self.device).eval()

    @torch.no_grad()
    def __call__(self, obs) -> np.ndarray:
        from .augment import center_crop

        x = torch.as_tensor(np.asarray(obs), device=self.device)
        if x.dim() not in (3, 4) or tuple(x.shape[-3:]) != self.obs_shape:
            raise ValueError(f"obs must be [C, H, W] or [B, C, H, W] with [C, H, W] = {list(self.obs_shape)} (the "
                             f"run's observations), got shape {tuple(x.shape)}")
        if x.is_floating_point() and not bool(torch.isfinite(x).all()):
            bad = int((~torch.isfinite(x)).sum())
            raise ValueError(f"obs holds {bad} NaN or inf value(s): a policy acts on finite pixel values (uint8 "
                             "0-255, as the run's environment gives them)")
        if x.dtype != torch.uint8 and x.numel() and not bool(((x >= 0) & (x <= 255)).all()):
            lo, hi = float(x.min()), float(x.max())
            raise ValueError(f"obs holds values from {lo:g} to {hi:g}: a policy acts on pixel values 0-255 (uint8, as "
                             "the run's environment gives them; not scaled to [0, 1] or centred)")
        if x.is_floating_point() and x.numel() and not bool((x == x.round()).all()):
            raise ValueError("obs holds values that are not whole numbers: a policy acts on pixel values 0-255 (uint8, "
                             "as the run's environment gives them; not scaled to [0, 1] or centred)")
        one = x.dim() == 3
        mu, _, _, _ = self.actor(center_crop(x[None] if one else x, self.cfg.crop_size), sample=False)
        out = mu.float().cpu().numpy()
        return out[0] if one else out


def load_policy(path: str | os.PathLike, device: str = "cpu") -> Policy:
    """The policy in ``path`` (a finished run's folder or its ``policy.pt``); one-line errors for a folder
    without one and for a file that is not an rl_curl policy."""
    from shared_losses.training.runtime import check_device

    check_device(str(device))
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist: pass a finished run's folder (--output-dir of "
                                "rl_curl.train) or its policy.pt")
    file = path / POLICY_FILE if path.is_dir() else path
    if path.is_dir() and not file.is_file():
        from shared_losses.training.runtime import another_application, run_application

        owner = run_application(path)
        if owner not in ("rl_curl", "unknown", None):
            raise FileNotFoundError(another_application(path, owner, "rl_curl"))
    if not file.is_file():
        raise FileNotFoundError(f"{file} not found: a run writes policy.pt when it finishes (an unfinished run: "
                                "continue it with `python -m rl_curl.train ... --resume`)")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - not a torch file, or damaged
        raise ValueError(f"{file} is not a readable rl_curl policy ({type(err).__name__}: {err})") from None
    if not isinstance(state, dict) or state.get("format") != POLICY_FORMAT or "actor" not in state:
        raise ValueError(f"{file} is not an rl_curl policy (format {POLICY_FORMAT} with actor weights)")
    return Policy(state, device)
