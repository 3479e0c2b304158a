"""Benchmark of rl_curl: ms per full update (replay sample + crops + critic + actor + aux + targets) at
SPEC network sizes, environment steps per second with rendering, replay bytes per transition.

Baselines measured in the same run:
- update: the same networks driven the way the official CURL code drives them (obs and next_obs stacks
  stored whole in float-ready numpy arrays, numpy sliding-window crops on the CPU, a float copy sent to
  the device, the conv trunk recomputed for the actor, the critic-in-actor-loss and the aux anchors, and
  the actor loss back-propagated into the critic's weights).
- replay: bytes per transition of storing obs + next_obs stacks (uint8).

    .venv/bin/python scripts/bench_curl.py                 # table
    .venv/bin/python scripts/bench_curl.py --json          # one JSON object per batch size
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
import torch.nn.functional as F
import tyro

from rl_curl.agent import CurlAgent, auxiliary_loss, contrastive_logits
from rl_curl.config import Config
from rl_curl.env import make
from rl_curl.replay import FrameReplay


@dataclass
class Args:
    """Time rl_curl's update, environment and replay."""

    batches: list[int] = field(default_factory=lambda: [128, 512])
    """Batch sizes to time."""
    updates: int = 6
    """Timed updates per batch size (after 2 warm-up updates); steps alternate so the actor runs every 2."""
    env_agent_steps: int = 60
    """Agent steps of the environment timing (random actions, rendering at 100x100)."""
    task: str = "cartpole-swingup"
    """Task of the environment timing."""
    threads: int = 0
    """torch CPU threads (0 = default)."""
    device: str = "auto"
    """auto (GPU if available) or a torch device string."""
    baseline: bool = True
    """Also time the official-style baseline update in the same run."""
    json: bool = False
    """Print one JSON object per line (fields batch, update_ms, replay_bytes_per_transition, env_steps_per_s, ...)."""


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def fill(replay: FrameReplay, n: int, rng) -> None:
    obs = rng.integers(0, 256, replay.obs_shape, dtype=np.uint8)
    replay.start_episode(obs)
    for t in range(n):
        nxt = np.concatenate([obs[3:], rng.integers(0, 256, (3, *obs.shape[1:]), dtype=np.uint8)])
        replay.add(rng.uniform(-1, 1, replay.action_dim), 0.0, nxt, False)
        obs = nxt


def time_ours(cfg, agent, replay, device, updates) -> float:
    for s in range(2):
        agent.update(replay.sample(cfg.batch_size, device), s)
    sync(device)
    t = time.perf_counter()
    for s in range(updates):
        agent.update(replay.sample(cfg.batch_size, device), s)
    sync(device)
    return (time.perf_counter() - t) / updates * 1000


def numpy_crop(imgs: np.ndarray, size: int, rng) -> np.ndarray:
    """Official-style crop: sliding windows over the batch, one random window per image (CPU numpy)."""
    n, limit = imgs.shape[0], imgs.shape[-1] - size
    win = np.lib.stride_tricks.sliding_window_view(imgs, (size, size), axis=(2, 3))  # [n, C, h, w, s, s]
    return win[np.arange(n), :, rng.integers(0, limit, n), rng.integers(0, limit, n)]


def baseline_update(agent: CurlAgent, obses, next_obses, actions, cfg, device, step, rng) -> None:
    idx = rng.integers(0, len(obses), cfg.batch_size)
    o, no = obses[idx], next_obses[idx]
    to = lambda a: torch.as_tensor(np.ascontiguousarray(a)).float().to(device)  # noqa: E731
    obs, next_obs, pos = to(numpy_crop(o, cfg.crop_size, rng)), to(numpy_crop(no, cfg.crop_size, rng)), to(numpy_crop(o, cfg.crop_size, rng))
    action = torch.as_tensor(actions[idx]).to(device)
    reward, not_done = torch.zeros(cfg.batch_size, 1, device=device), torch.ones(cfg.batch_size, 1, device=device)
    ag = agent
    with torch.no_grad():
        _, npi, nlp, _ = ag.actor(next_obs)
        tq = torch.min(*ag.critic_target(next_obs, npi)) - ag.alpha.detach() * nlp
        target = reward + not_done * cfg.discount * tq
    q1, q2 = ag.critic(obs, action)
    loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
    ag.critic_opt.zero_grad()
    loss.backward()
    ag.critic_opt.step()
    if step % 2 == 0:
        _, pi, lp, _ = ag.actor(obs, detach_encoder=True)
        aq = torch.min(*ag.critic(obs, pi, detach_encoder=True))
        al = (ag.alpha.detach() * lp - aq).mean()
        ag.actor_opt.zero_grad()
        al.backward()
        ag.actor_opt.step()
        alpha_loss = (ag.alpha * (-lp - ag.target_entropy).detach()).mean()
        ag.alpha_opt.zero_grad()
        alpha_loss.backward()
        ag.alpha_opt.step()
        ag.update_targets()
    z_a = ag.critic.encoder(obs)
    with torch.no_grad():
        z_p = ag.critic_target.encoder(pos)
    aux = auxiliary_loss(*contrastive_logits(z_a, [z_p], ag.score), "curl")
    ag.encoder_opt.zero_grad()
    ag.aux_opt.zero_grad()
    aux.backward()
    ag.encoder_opt.step()
    ag.aux_opt.step()


def time_baseline(cfg, agent, device, updates, rng) -> float:
    n = max(2 * cfg.batch_size, 600)
    obses = rng.integers(0, 256, (n, 9, cfg.image_size, cfg.image_size), dtype=np.uint8)
    next_obses = rng.integers(0, 256, (n, 9, cfg.image_size, cfg.image_size), dtype=np.uint8)
    actions = rng.uniform(-1, 1, (n, agent.action_dim)).astype(np.float32)
    for s in range(2):
        baseline_update(agent, obses, next_obses, actions, cfg, device, s, rng)
    sync(device)
    t = time.perf_counter()
    for s in range(updates):
        baseline_update(agent, obses, next_obses, actions, cfg, device, s, rng)
    sync(device)
    return (time.perf_counter() - t) / updates * 1000


def env_rate(task: str, steps: int) -> tuple[float, int]:
    env = make(task, seed=0)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    t = time.perf_counter()
    for _ in range(steps):
        _, _, term, trunc, _ = env.step(rng.uniform(-1, 1, env.action_space.shape))
        if term or trunc:
            env.reset()
    dt = time.perf_counter() - t
    return steps * env.action_repeat / dt, env.action_repeat


def main(args: Args) -> None:
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    rng = np.random.default_rng(0)
    big = FrameReplay(100_000, (9, 100, 100), 6, 3)  # zero pages: not touched, not resident
    replay_bpt = big.bytes_per_transition()
    stacks_bpt = 2 * 9 * 100 * 100 + 6 * 4 + 4 + 4
    del big
    env_sps, ar = env_rate(args.task, args.env_agent_steps)
    for batch in args.batches:
        cfg = Config(batch_size=batch).resolved()
        torch.manual_seed(0)
        agent = CurlAgent((9, cfg.image_size, cfg.image_size), 1, cfg).to(device)
        agent.make_optimizers()
        replay = FrameReplay(max(2 * batch, 600), (9, cfg.image_size, cfg.image_size), 1, 3, seed=0)
        fill(replay, replay.capacity, rng)
        ours = time_ours(cfg, agent, replay, device, args.updates)
        base = time_baseline(cfg, agent, device, args.updates, rng) if args.baseline else float("nan")
        row = {"batch": batch, "update_ms": round(ours, 2), "baseline_update_ms": round(base, 2),
               "speedup_vs_baseline": round(base / ours, 3), "replay_bytes_per_transition": round(replay_bpt, 1),
               "obs_next_obs_bytes_per_transition": stacks_bpt, "replay_memory_ratio": round(stacks_bpt / replay_bpt, 2),
               "env_steps_per_s": round(env_sps, 1), "action_repeat": ar, "task": args.task,
               "device": str(device), "threads": torch.get_num_threads()}
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"batch {batch}: update {ours:.1f} ms (official-style baseline {base:.1f} ms, x{base / ours:.2f}); "
                  f"replay {replay_bpt:.0f} B/transition vs {stacks_bpt} for obs+next_obs (x{stacks_bpt / replay_bpt:.2f} less); "
                  f"{args.task}: {env_sps:.0f} env steps/s with rendering (action repeat {ar}) on {device}", flush=True)


if __name__ == "__main__":
    main(tyro.cli(Args))
