"""Check rl_curl's update against the official MishaLaskin/curl update, step for step, in float64.

Both agents start from the same weights (the official agent's, copied into ours), see the same batch,
the same random crops and the same actor noise (torch's generator is reseeded before each update), and
run ``--updates`` full updates (critic; actor and temperature every 2 steps; soft target updates every
2 steps; CURL's InfoNCE with its encoder and W optimisers). After every update the script prints the
largest difference of each loss and of every parameter (critic, actor, target critic and momentum
encoder, W, log alpha), in our layout, and exits 1 if one exceeds ``--tolerance``.

    .venv/bin/python scripts/check_official_curl.py --official ~/src/curl

Our agent is built with ``encoder_tanh=False``: the official code's actor and critic encoders have no
tanh after their LayerNorm (``output_logits=True``), the CURL paper's text and our default have it.
Everything else is at the CURL paper's settings (``rl_curl.config.Config`` defaults). ``--official``
takes a checkout of MishaLaskin/curl (``git clone https://github.com/MishaLaskin/curl``); nothing of it
is copied into this repository.
float64 keeps the comparison sharp: in float32 Adam's first steps turn rounding-level gradient
differences into ``lr``-sized parameter differences wherever a gradient is near zero.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


import numpy as np
import torch

import rl_curl.agent as agent_module
from bench_curl import load_official, make_official
from rl_curl.agent import CurlAgent
from rl_curl.config import Config


@dataclass
class Args:
    """Compare rl_curl's update with the official CURL update on identical inputs (float64)."""

    official: str
    """Path to a checkout of MishaLaskin/curl."""
    batch: int = 16
    """Batch size (small keeps the float64 run to seconds; the networks are at the CURL paper's size)."""
    updates: int = 6
    """Full updates to compare (steps 0, 1, ...: the actor and target branches run on even steps)."""
    action_dim: int = 2
    """Action dimension of the compared agents."""
    tolerance: float = 1e-8
    """Largest allowed absolute difference of a loss or a parameter after any update."""
    seed: int = 0
    """Seed of the initial weights, the frames, the crops and the actor noise."""


class _Recorder:
    """Stands in for the official logger: keeps the scalars it logs, drops the rest."""

    def __init__(self):
        self.scalars: dict[str, float] = {}

    def log(self, key, value, step, n=1):
        self.scalars[key] = float(value.detach()) if torch.is_tensor(value) else float(value)

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


class _FixedBatch:
    """Stands in for the official replay: ``sample_cpc`` returns the batch set for this update."""

    def __init__(self):
        self.batch = None

    def sample_cpc(self):
        return self.batch


def to_ours(name: str, value: torch.Tensor, conv_hw: int, channels: int) -> torch.Tensor:
    """An official parameter in our layout: the encoder's linear layer reads the conv features in
    (row, column, channel) order in ours, (channel, row, column) in the official code."""
    if name.endswith("encoder.fc.weight"):
        out = value.shape[0]
        return value.view(out, channels, conv_hw, conv_hw).permute(0, 2, 3, 1).reshape(out, -1)
    return value


def param_map(official) -> dict[str, torch.Tensor]:
    """Our parameter names -> the official agent's tensors."""
    pairs = {}
    for ours_prefix, module in (("critic", official.critic), ("critic_target", official.critic_target)):
        for i, conv in enumerate(module.encoder.convs):
            pairs[f"{ours_prefix}.encoder.trunk.convs.{i}.weight"] = conv.weight
            pairs[f"{ours_prefix}.encoder.trunk.convs.{i}.bias"] = conv.bias
        for part in ("fc", "ln"):
            for p in ("weight", "bias"):
                pairs[f"{ours_prefix}.encoder.{part}.{p}"] = getattr(getattr(module.encoder, part), p)
        for q_ours, q_off in (("q1", module.Q1), ("q2", module.Q2)):
            for j in (0, 2, 4):
                pairs[f"{ours_prefix}.{q_ours}.{j}.weight"] = q_off.trunk[j].weight
                pairs[f"{ours_prefix}.{q_ours}.{j}.bias"] = q_off.trunk[j].bias
    for part in ("fc", "ln"):
        for p in ("weight", "bias"):
            pairs[f"actor.encoder.{part}.{p}"] = getattr(getattr(official.actor.encoder, part), p)
    for j in (0, 2, 4):
        pairs[f"actor.trunk.{j}.weight"] = official.actor.trunk[j].weight
        pairs[f"actor.trunk.{j}.bias"] = official.actor.trunk[j].bias
    pairs["score.W"] = official.CURL.W
    pairs["log_alpha"] = official.log_alpha
    return pairs


def ours_params(agent: CurlAgent) -> dict[str, torch.Tensor]:
    # The actor's trunk is the critic's (shared module): it is compared once, under critic.
    return {k: v for k, v in {**dict(agent.named_parameters(remove_duplicate=False)),
                              **dict(agent.critic_target.named_parameters(prefix="critic_target"))}.items()
            if not k.startswith("actor.encoder.trunk.")}


def crops(frames: np.ndarray, size: int, rng) -> np.ndarray:
    B, C, H, W = frames.shape
    top, left = rng.integers(0, H - size + 1, B), rng.integers(0, W - size + 1, B)
    return np.stack([frames[b, :, t:t + size, l:l + size] for b, t, l in zip(range(B), top, left)])


def main(args: Args) -> int:
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(args.seed)
    agent_cls, buffer_cls = load_official(args.official)
    cfg = Config(batch_size=args.batch, encoder_tanh=False, aux="curl").resolved()
    device = torch.device("cpu")
    rng = np.random.default_rng(args.seed)
    official, _ = make_official(agent_cls, buffer_cls, cfg, device, rng, capacity=args.batch,
                                action_shape=(args.action_dim,))
    official.log_interval = 1  # log (and so let us compare) every loss of every update
    ours = CurlAgent((3 * cfg.frame_stack, cfg.image_size, cfg.image_size), args.action_dim, cfg)
    conv_hw = int(math.isqrt(ours.critic.encoder.trunk.out_dim // cfg.num_filters))
    mapping = param_map(official)
    mine = ours_params(ours)
    if set(mapping) != set(mine):
        raise SystemExit(f"parameter names differ: only official {sorted(set(mapping) - set(mine))}, "
                         f"only ours {sorted(set(mine) - set(mapping))}")
    with torch.no_grad():
        for name, p in mine.items():
            p.copy_(to_ours(name, mapping[name].detach(), conv_hw, cfg.num_filters))

    fixed, log = _FixedBatch(), _Recorder()
    worst = 0.0
    for step in range(args.updates):
        shape = (args.batch, 3 * cfg.frame_stack, cfg.image_size, cfg.image_size)
        obs_frames = rng.integers(0, 256, shape, dtype=np.uint8)
        next_frames = np.concatenate([obs_frames[:, 3:],
                                      rng.integers(0, 256, (args.batch, 3, *shape[2:]), dtype=np.uint8)], 1)
        obs_c, next_c, pos_c = (crops(f, cfg.crop_size, rng) for f in (obs_frames, next_frames, obs_frames))
        action = torch.as_tensor(rng.uniform(-1, 1, (args.batch, args.action_dim)))
        reward = torch.as_tensor(rng.uniform(0, 1, (args.batch, 1)))
        not_done = torch.as_tensor((rng.uniform(size=(args.batch, 1)) > 0.1).astype(np.float64))
        t = {k: torch.as_tensor(v).double() for k, v in (("obs", obs_c), ("next", next_c), ("pos", pos_c))}
        fixed.batch = (t["obs"], action, reward, t["next"], not_done, {"obs_anchor": t["obs"], "obs_pos": t["pos"]})
        log.scalars.clear()
        torch.manual_seed(args.seed * 1000 + step)
        official.update(fixed, log, step)

        # Ours crops inside update(): hand it the same crops, in the order it asks (obs, next_obs, key).
        queue = [torch.as_tensor(c) for c in (obs_c, next_c, pos_c)]
        original = agent_module.random_crop
        agent_module.random_crop = lambda x, size, generator=None: queue.pop(0)
        try:
            torch.manual_seed(args.seed * 1000 + step)
            metrics = ours.update({"obs": obs_frames, "next_obs": next_frames, "action": action, "reward": reward,
                                   "not_done": not_done}, step)
        finally:
            agent_module.random_crop = original
        if queue:
            raise SystemExit(f"our update used {3 - len(queue)} of the 3 crops")

        rows = [("critic_loss", "train_critic/loss"), ("actor_loss", "train_actor/loss"),
                ("alpha_loss", "train_alpha/loss"), ("aux_loss", "train/curl_loss"),
                ("batch_reward", "train/batch_reward")]
        diffs = {f"loss {ours_key}": abs(float(metrics[ours_key]) - log.scalars[off_key])
                 for ours_key, off_key in rows if ours_key in metrics and off_key in log.scalars}
        for name, p in mine.items():
            ref = to_ours(name, mapping[name].detach(), conv_hw, cfg.num_filters)
            diffs[name] = float((p.detach() - ref).abs().max())
        largest = max(diffs, key=diffs.get)
        worst = max(worst, diffs[largest])
        losses = ", ".join(f"{k[5:]} {metrics[k[5:]]:.6g} (diff {v:.1e})" for k, v in diffs.items()
                           if k.startswith("loss "))
        print(f"update {step}: {losses}; largest parameter difference "
              f"{max(v for k, v in diffs.items() if not k.startswith('loss ')):.2e}"
              f" (largest overall: {largest})", flush=True)
    ok = worst <= args.tolerance
    print(f"{'OK' if ok else 'MISMATCH'}: largest difference over {args.updates} updates {worst:.2e} "
          f"(tolerance {args.tolerance:g}), batch {args.batch}, float64")
    return 0 if ok else 1


if __name__ == "__main__":
    from shared_losses.training.cli import examples_from, parse_dataclass, run_cli

    about = f"{Args.__doc__}\n\n{examples_from(__doc__)}"
    raise SystemExit(run_cli(lambda: main(parse_dataclass(Args, description=about))))
