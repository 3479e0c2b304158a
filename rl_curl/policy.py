"""A finished run's policy as a file of its own: ``policy.pt`` (actor + encoder weights and the settings
needed to rebuild them; plain tensors, numbers and strings, so ``torch.load(path, weights_only=True)``
reads it) and :func:`load_policy`, a callable from uint8 observations to actions.

    import rl_curl
    act = rl_curl.load_policy("runs/rl_curl/cartpole-swingup/curl/seed0")   # or .../policy.pt
    env = act.make_env()  # the run's own environment: its task, action repeat, frame stack, image size, camera
    obs, _ = env.reset(seed=0)
    actions = act(obs)   # obs: [C, H, W] or [B, C, H, W] uint8, as the run's environment gives them

A policy acts on observations alone, so it cannot see the environment they came from: one made otherwise (another
action repeat or camera, which give observations of the same shape) is acted on without a word. Make it with
:meth:`Policy.make_env`, or check one made elsewhere with :meth:`Policy.check_env`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import warnings
import zipfile
from pathlib import Path

import numpy as np
import torch

POLICY_FILE = "policy.pt"
POLICY_FORMAT = 1


def policy_state(agent, cfg, obs_shape, env_step: int | None = None) -> dict:
    """What ``policy.pt`` holds: the actor's weights (its encoder included), how to rebuild it and, where known, the
    environment step it was trained to (``env_step``; files written before 2026-12-06 lack it)."""
    config = json.loads(json.dumps(dataclasses.asdict(cfg)))  # plain values only (weights_only loading)
    state = {"format": POLICY_FORMAT, "config": config, "obs_shape": [int(d) for d in obs_shape],
             "action_dim": int(agent.action_dim),
             "actor": {k: v.detach().float().cpu().contiguous() for k, v in agent.actor.state_dict().items()}}
    if env_step is not None:
        state["env_step"] = int(env_step)
    return state


def save_policy(agent, cfg, obs_shape, path: str | os.PathLike, env_step: int | None = None) -> Path:
    """Write ``policy.pt`` whole (temporary name, then rename)."""
    from shared_losses.training.runtime import written_whole

    path = Path(path)
    with written_whole(path) as tmp:
        torch.save(policy_state(agent, cfg, obs_shape, env_step), tmp)
    return path


class Policy:
    """Deterministic policy (the squashed mean action, as CURL evaluates) of a saved run.

    ``policy(obs)``: ``obs`` is one observation ``[C, H, W]`` or a batch ``[B, C, H, W]`` of the run's stacked
    frames (``C`` = 3 x frame stack, ``H = W`` = the run's image size: :meth:`make_env` gives them), pixel values
    0-255 (uint8 as the environment gives them; floats holding whole numbers 0-255 are taken too). It returns the
    actions as a float32 ``np.ndarray``: ``[action_dim]`` for one observation, ``[B, action_dim]`` for a batch, each
    in [-1, 1]. Another shape, values scaled to [0, 1], NaN or inf are refused with a ``ValueError``."""

    def __init__(self, state: dict, device: str = "cpu"):
        from .augment import center_crop  # noqa: F401  (checked import: the crop used when acting)
        from .config import Config
        from .networks import Actor, ConvTrunk, Encoder

        fields = {f.name for f in dataclasses.fields(Config)}
        self.cfg = Config(**{k: v for k, v in state["config"].items() if k in fields})
        c, self.obs_shape, self.action_dim = self.cfg, tuple(state["obs_shape"]), int(state["action_dim"])
        #: the environment step the policy was trained to (None in files written before it was recorded)
        self.env_step = int(state["env_step"]) if state.get("env_step") is not None else None
        trunk = ConvTrunk(self.obs_shape[0], c.crop_size, c.num_filters, c.num_layers)
        self.actor = Actor(Encoder(trunk, c.feature_dim, c.encoder_tanh), self.action_dim, c.hidden_dim,
                           c.log_std_min, c.log_std_max)
        self.actor.load_state_dict(state["actor"])
        trunk.to(memory_format=torch.channels_last)
        self.device = torch.device(device)
        self.actor.to(self.device).eval()

    #: The run's settings that make its environment (:meth:`env_settings`), as the environments name them.
    ENV_SETTINGS = ("action_repeat", "frame_stack", "image_size", "camera_id")

    def env_settings(self) -> dict:
        """The run's environment: ``task`` and :data:`ENV_SETTINGS` (the action repeat filled in from the task's
        default where the run left it to that). ``camera_id`` is a DeepMind Control setting: absent for a
        ``gym:ENV_ID`` task."""
        from .env import GYM_PREFIX
        from .tasks import task_default

        c = self.cfg
        repeat = c.action_repeat
        if repeat is None:
            repeat = 1 if c.task.startswith(GYM_PREFIX) else int(task_default(c.task, "action_repeat"))
        out = {"task": c.task, "action_repeat": int(repeat), "frame_stack": c.frame_stack, "image_size": c.image_size}
        if not c.task.startswith(GYM_PREFIX):
            out["camera_id"] = c.camera_id
        return out

    def make_env(self, render_mode: str | None = "rgb_array", **kwargs):
        """The run's own environment, a ``gymnasium.Env``: ``gymnasium.make("rl_curl/<task>-v0", ...)`` with the
        run's action repeat, frame stack, image size and camera, and ``max_episode_steps`` of 1000 simulator steps
        at that action repeat (a ``gym:ENV_ID`` task: :class:`rl_curl.env.GymPixels` with the run's settings).

        ``kwargs`` go to the environment: ``seed``, ``max_episode_steps``, and for a ``gym:`` task the wrapped
        environment's own arguments. One of the run's settings (:data:`ENV_SETTINGS`) given another value is
        used, with a warning: the policy then acts in an environment it was not trained in."""
        import gymnasium as gym

        from .env import GYM_PREFIX, GymPixels, gym_id

        settings = self.env_settings()
        task = settings.pop("task")
        changed = {k: v for k, v in kwargs.items() if k in settings and v != settings[k]}
        if changed:
            warnings.warn("make_env: " + ", ".join(f"{k}={v!r} (the run's: {settings[k]!r})" for k, v in
                                                   changed.items())
                          + ": the policy acts in an environment other than the one it was trained in", stacklevel=2)
        settings.update(kwargs)
        if task.startswith(GYM_PREFIX):
            settings.pop("camera_id", None)
            return GymPixels(task[len(GYM_PREFIX):], render_mode=render_mode, **settings)
        settings.setdefault("max_episode_steps", -(-1000 // int(settings["action_repeat"])))
        return gym.make(gym_id(task), render_mode=render_mode, **settings)

    def check_env(self, env, warn: bool = True) -> list[str]:
        """How ``env`` (an environment of rl_curl's, wrapped or not) differs from the run's own: its task and each
        of :data:`ENV_SETTINGS` it has, and its spaces; with ``warn`` one warning naming them. An empty list: the
        policy's own environment. Other environments say nothing of their settings and are not checked."""
        # a gymnasium vector environment: one environment's spaces (its own carry the batch), and the settings of
        # its first environment where it holds them here (SyncVectorEnv); an AsyncVectorEnv's are not checked
        vector = hasattr(env, "single_observation_space")
        first = (getattr(env, "envs", None) or [env])[0] if vector else env
        inner = getattr(first, "unwrapped", first)
        diffs = []
        for key, want in self.env_settings().items():
            have = getattr(inner, key, None)
            if have is not None and have != want:
                diffs.append(f"{key} {have!r} (the run's: {want!r})")
        obs = getattr(env, "single_observation_space" if vector else "observation_space", None)
        if getattr(obs, "shape", None) is not None and tuple(obs.shape) != self.obs_shape:
            diffs.append(f"observations {list(obs.shape)} (the run's: {list(self.obs_shape)})")
        act = getattr(env, "single_action_space" if vector else "action_space", None)
        if getattr(act, "shape", None) is not None and int(np.prod(act.shape)) != self.action_dim:
            diffs.append(f"actions of {int(np.prod(act.shape))} (the run's: {self.action_dim})")
        if diffs and warn:
            warnings.warn("the environment differs from the run's: " + ", ".join(diffs) + "; make the run's own with "
                          "policy.make_env()", stacklevel=2)
        return diffs

    @torch.no_grad()
    def __call__(self, obs) -> np.ndarray:
        from .augment import center_crop

        x = torch.as_tensor(np.asarray(obs), device=self.device)
        if x.dim() not in (3, 4) or tuple(x.shape[-3:]) != self.obs_shape:
            raise ValueError(f"obs must be [C, H, W] or [B, C, H, W] with [C, H, W] = {list(self.obs_shape)} (the "
                             f"run's observations: its environment is policy.make_env()), got shape {tuple(x.shape)}")
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


def is_policy_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` reads as an rl_curl policy file (what an export may replace with --overwrite)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - not a torch file, or damaged
        return False
    return is_policy_state(state)


def is_policy_state(state) -> bool:
    """Whether ``state`` (a policy file's contents) is an rl_curl policy of this format, with the actor's weights."""
    return isinstance(state, dict) and state.get("format") == POLICY_FORMAT and "actor" in state


def load_policy(path: str | os.PathLike, device: str = "cpu") -> Policy:
    """The policy in ``path`` (a finished run's folder or its ``policy.pt``); one-line errors for a folder
    without one and for a file that is not an rl_curl policy."""
    from shared_losses.training.runtime import check_device

    device = str(check_device(str(device), "device"))  # a Python argument, not the command line's --device; auto
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
        beside = _where_the_policy_is(file)
        if beside.startswith("this run's"):  # a folder inside a finished run (its checkpoint/)
            raise FileNotFoundError(f"{file} not found: {beside}")
        raise FileNotFoundError(f"{file} not found: a run writes policy.pt when it finishes (an unfinished run: "
                                "continue it with `python -m rl_curl.train ... --resume`, or write the policy of its "
                                "last checkpoint with `python -m rl_curl.export --run-dir "
                                f"{shlex.quote(str(file.parent))}`)")
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - not a torch file, or damaged
        raise ValueError(f"{file} is not a readable rl_curl policy file ({_why_unreadable(file, err)})"
                         f"{_where_the_policy_is(file, '; ')}") from None
    if not is_policy_state(state):
        raise ValueError(f"{file} is not an rl_curl policy file (format {POLICY_FORMAT} with actor weights)"
                         f"{_where_the_policy_is(file, '; ')}")
    return Policy(state, device)


def _where_the_policy_is(file: Path, before: str = "") -> str:
    """Where the policy is, for a message about ``file``, which is not one (``before`` it, or nothing where
    ``file`` is itself a ``policy.pt``, a damaged one): beside it when it is in a finished run, else where a run
    writes it."""
    for folder in (file.parent, *file.parent.parents[:1]):  # the run's folder, or its checkpoint/ inside it
        if (folder / POLICY_FILE).is_file() and (folder / POLICY_FILE) != file:
            return f"{before}this run's policy is {folder / POLICY_FILE} (pass it, or the folder {folder})"
    if file.name == POLICY_FILE:
        return ""
    return f"{before}a policy is the {POLICY_FILE} of a finished run's folder (pass that folder, or its {POLICY_FILE})"


def _why_unreadable(file: Path, err: BaseException) -> str:
    """Why ``torch.load(file, weights_only=True)`` failed, in words: not a file of torch.save (a JSON config, a
    CSV log), a torch file holding more than tensors and plain values, or torch's first line."""
    try:
        with open(file, "rb") as f:
            head = f.read(2)
    except OSError as read_err:
        return f"it cannot be read: {read_err.strerror or read_err}"
    if not (zipfile.is_zipfile(file) or head[:1] == b"\x80"):  # torch.save: a zip archive; before torch 1.6, a pickle
        kind = {".json": "a JSON file", ".csv": "a CSV file", ".md": "a text file"}.get(file.suffix.lower())
        return f"{kind} that torch.save did not write" if kind else "not a file torch.save wrote, or a damaged one"
    text = str(err)
    if "weights_only" in text or "Weights only load failed" in text:
        return ("a torch file holding objects other than tensors and plain values, as a checkpoint's files do; a "
                "policy holds only those")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{type(err).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")
