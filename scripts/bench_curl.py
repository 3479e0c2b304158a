"""Benchmark of rl_curl: ms per full update (replay sample + crops + critic + actor + aux + targets) at
the CURL paper's network sizes (``rl_curl.config`` defaults), environment steps per second with rendering,
replay bytes per transition.

Baselines measured in the same run:
- update: the same networks driven the way the official CURL code drives them (obs and next_obs stacks
  stored whole in float-ready numpy arrays, numpy sliding-window crops on the CPU, a float copy sent to
  the device, the conv trunk recomputed for the actor, the critic-in-actor-loss and the aux anchors, and
  the actor loss back-propagated into the critic's weights).
- replay: bytes per transition of storing obs + next_obs stacks (uint8).

    .venv/bin/python scripts/bench_curl.py                 # table
    .venv/bin/python scripts/bench_curl.py --json          # one JSON object per batch size
    .venv/bin/python scripts/bench_curl.py --official ~/src/curl   # also time the official code
    .venv/bin/python scripts/bench_curl.py --eval-episodes 10 --batches   # one evaluation alone, timed three ways

``--eval-episodes N`` also times one evaluation of N deterministic episodes (the agent at the paper's sizes, on the
timed device) three ways, in the same run: one episode after another on one environment, the policy acting on one
observation at a time (the baseline: how rl_curl evaluated before 2026-11-26); side by side in this process
(``rl_curl.train.EvalEnvs``: one environment per episode, one batched forward pass per step, the default); and side
by side in worker processes (``--eval-parallel``). The JSON row (``"what": "evaluation"``) has the seconds of each
and their ratios to the baseline.

``--official PATH`` takes a checkout of MishaLaskin/curl (``git clone https://github.com/MishaLaskin/curl``;
nothing of it is copied into this repository) and times its ``CurlSacAgent.update(replay_buffer, L,
step)`` with its own ``ReplayBuffer.sample_cpc`` at the CURL paper's settings (``rl_curl.config`` defaults),
same batch and device, in the same run, interleaved with ours. The JSON rows then carry ``official_update_ms`` and
``ours_over_official`` (the issue's target is at most 0.5). If ``skimage`` or ``gym`` are not
installed, numpy's ``sliding_window_view`` and gymnasium stand in for the two names it imports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import json
import os
import sys
import time
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

if sys.platform.startswith("linux"):  # headless EGL where MUJOCO_GL is unset (as rl_curl.env does)
    os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch
import torch.nn.functional as F

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
    mixed_precision: Literal["no", "bf16"] = "no"
    """Time our update under bf16 autocast (as `rl_curl.train --mixed-precision bf16`); the baselines stay float32."""
    replay_on_device: bool = False
    """Keep our replay's frames on the timed device (as `rl_curl.train --replay-on-device`)."""
    cudnn_benchmark: bool = True
    """Time our update with cuDNN's algorithm search on (as `rl_curl.train`, whose default it is). The official
    code does not set it, so its update is always timed with torch's default (off). No effect on CPU."""
    baseline: bool = True
    """Also time the official-style baseline update in the same run."""
    fused: bool = True
    """Also time our --update fused schedule (same networks and replay) in the same run, interleaved with the
    default one; JSON rows gain fused_update_ms, fused_over_ours and, with --official, fused_over_official."""
    official: str = ""
    """Path to a checkout of MishaLaskin/curl: also time its update in this run (git clone
    https://github.com/MishaLaskin/curl; its CurlSacAgent.update and ReplayBuffer.sample_cpc are timed
    interleaved with ours; JSON rows gain official_update_ms and ours_over_official)."""
    replay_capacity: int = 0
    """Transitions in the timed replays, ours and the official one (0 = max(2 x batch, 600): small and cache-friendly).
    Sampling from a full-size buffer costs more (cache and TLB misses, a fresh batch array): set e.g. 20000 on a
    machine with the memory (the official buffer holds 180 KB per transition, ours 33 KB)."""
    repeats: int = 1
    """Interleaved repetitions of (official, ours) timings per batch with --official; medians are reported."""
    eval_episodes: int = 0
    """Also time one evaluation of this many episodes three ways (see above); 0 = not."""
    json: bool = False
    """Print one JSON object per line (fields batch, update_ms, replay_bytes_per_transition, env_steps_per_s, ...)."""


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def fill(replay: FrameReplay, n: int, rng) -> None:
    obs = rng.integers(0, 256, replay.obs_shape, dtype=np.uint8)
    replay.start_episode(obs)
    for _ in range(n):
        nxt = np.concatenate([obs[3:], rng.integers(0, 256, (3, *obs.shape[1:]), dtype=np.uint8)])
        replay.add(rng.uniform(-1, 1, replay.action_dim), 0.0, nxt, False)
        obs = nxt


def ms_per_update(update, device, updates) -> float:
    """Mean ms of ``update(step)`` over steps 0..updates-1, after warm-up steps 0 and 1. Every timed
    implementation runs the same step numbers, so actor and target updates happen equally often."""
    for s in range(2):
        update(s)
    sync(device)
    t = time.perf_counter()
    for s in range(updates):
        update(s)
    sync(device)
    return (time.perf_counter() - t) / updates * 1000


@contextlib.contextmanager
def cudnn_benchmark(on: bool):
    """``torch.backends.cudnn.benchmark`` set to ``on`` inside the block (nothing else), restored after it."""
    before = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = on
    try:
        yield
    finally:
        torch.backends.cudnn.benchmark = before


def time_ours(cfg, agent, replay, device, updates, benchmark: bool = True) -> float:
    with cudnn_benchmark(benchmark):
        return ms_per_update(lambda s: agent.update(replay.sample(cfg.batch_size, device), s), device, updates)


def ms_per_sample(replay, batch, device, samples: int = 10) -> float:
    """Mean ms of one replay batch delivered on ``device`` (gather + copy), the host-side part of an update."""
    replay.sample(batch, device)
    sync(device)
    t = time.perf_counter()
    for _ in range(samples):
        replay.sample(batch, device)
    sync(device)
    return (time.perf_counter() - t) / samples * 1000


def numpy_crop(imgs: np.ndarray, size: int, rng) -> np.ndarray:
    """Official-style crop: sliding windows over the batch, one random window per image (CPU numpy)."""
    n, limit = imgs.shape[0], imgs.shape[-1] - size
    win = np.lib.stride_tricks.sliding_window_view(imgs, (size, size), axis=(2, 3))  # [n, C, h, w, s, s]
    return win[np.arange(n), :, rng.integers(0, limit, n), rng.integers(0, limit, n)]


def baseline_update(agent: CurlAgent, obses, next_obses, actions, cfg, device, step, rng) -> None:
    idx = rng.integers(0, len(obses), cfg.batch_size)
    o, no = obses[idx], next_obses[idx]
    to = lambda a: torch.as_tensor(np.ascontiguousarray(a)).float().to(device)
    obs, next_obs, pos = (to(numpy_crop(o, cfg.crop_size, rng)), to(numpy_crop(no, cfg.crop_size, rng)),
                          to(numpy_crop(o, cfg.crop_size, rng)))
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
    return ms_per_update(lambda s: baseline_update(agent, obses, next_obses, actions, cfg, device, s, rng),
                         device, updates)


def load_official(path: str):
    """``(CurlSacAgent, ReplayBuffer)`` from a MishaLaskin/curl checkout at ``path``."""
    root = Path(path).expanduser()
    missing = [f for f in ("curl_sac.py", "utils.py", "encoder.py") if not (root / f).is_file()]
    if missing:
        raise SystemExit(f"--official {root}: not a checkout of MishaLaskin/curl (missing {', '.join(missing)}); "
                         "get it with `git clone https://github.com/MishaLaskin/curl`")
    try:
        importlib.import_module("skimage.util.shape")
    except ImportError:  # the official utils.py only needs view_as_windows with step 1
        def view_as_windows(arr, window_shape, step=1):
            if step != 1:
                raise NotImplementedError("stand-in view_as_windows supports step=1 only")
            return np.lib.stride_tricks.sliding_window_view(arr, tuple(window_shape))

        shape = types.ModuleType("skimage.util.shape")
        shape.view_as_windows = view_as_windows
        for name in ("skimage", "skimage.util"):
            sys.modules.setdefault(name, types.ModuleType(name))
        sys.modules["skimage.util.shape"] = shape
    try:
        importlib.import_module("gym")
    except ImportError:  # only used for its FrameStack wrapper class, which the timing does not touch
        import gymnasium

        sys.modules["gym"] = gymnasium
    sys.path.insert(0, str(root))
    try:
        curl_sac, utils = importlib.import_module("curl_sac"), importlib.import_module("utils")
    finally:
        sys.path.remove(str(root))
    return curl_sac.CurlSacAgent, utils.ReplayBuffer


class _NoLog:
    """Accepts every logging call of the official agent (log, log_histogram, ...) and drops it."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def make_official(agent_cls, buffer_cls, cfg: Config, device, rng, capacity: int = 0, action_shape=(1,)):
    """The official agent at the settings of ``cfg`` (by default the CURL paper's) and its replay filled with
    random frames."""
    rates = cfg.rates()
    agent = agent_cls(
        obs_shape=(9, cfg.crop_size, cfg.crop_size), action_shape=action_shape, device=device,
        hidden_dim=cfg.hidden_dim, discount=cfg.discount, init_temperature=cfg.init_temperature,
        alpha_lr=cfg.alpha_lr, alpha_beta=cfg.alpha_beta1, actor_lr=rates["actor"][0], actor_beta=rates["actor"][1],
        actor_log_std_min=cfg.log_std_min, actor_log_std_max=cfg.log_std_max,
        actor_update_freq=cfg.actor_update_every, critic_lr=rates["critic"][0], critic_beta=rates["critic"][1],
        critic_tau=cfg.critic_tau, critic_target_update_freq=cfg.target_update_every, encoder_type="pixel",
        encoder_feature_dim=cfg.feature_dim, encoder_lr=cfg.encoder_lr, encoder_tau=cfg.encoder_tau,
        num_layers=cfg.num_layers, num_filters=cfg.num_filters, log_interval=100, detach_encoder=False,
        curl_latent_dim=128)
    n = capacity or max(2 * cfg.batch_size, 600)
    buf = buffer_cls(obs_shape=(9, cfg.image_size, cfg.image_size), action_shape=action_shape, capacity=n,
                     batch_size=cfg.batch_size, device=device, image_size=cfg.crop_size)
    for _ in range(n):
        buf.add(rng.integers(0, 256, (9, cfg.image_size, cfg.image_size), dtype=np.uint8),
                rng.uniform(-1, 1, action_shape), 0.0,
                rng.integers(0, 256, (9, cfg.image_size, cfg.image_size), dtype=np.uint8), False)
    return agent, buf


def time_official(agent, buf, device, updates) -> float:
    log = _NoLog()
    with cudnn_benchmark(False):  # the official code leaves torch's default
        return ms_per_update(lambda s: agent.update(buf, log, s), device, updates)


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


def render_times(task: str, frames: int = 100, image_size: int = 100) -> dict:
    """ms per frame of dm_control's ``physics.render`` (a camera made and freed per call: the baseline) against the
    environment's own rendering from the camera it keeps (:meth:`rl_curl.env.DMCPixels._render`), alternated in two
    rounds over the same states, and whether the frames were equal."""
    env = make(task, seed=0, image_size=image_size)
    inner = env.unwrapped if hasattr(env, "unwrapped") else env
    try:
        env.reset(seed=0)
        rng = np.random.default_rng(0)

        def baseline():
            return np.ascontiguousarray(inner._env.physics.render(height=image_size, width=image_size,
                                                                  camera_id=inner.camera_id).transpose(2, 0, 1))

        same, times = True, {"physics_render": 0.0, "kept_camera": 0.0}
        for _ in range(2):
            for name, fn in (("physics_render", baseline), ("kept_camera", inner._render)):
                t = time.perf_counter()
                for _ in range(frames):
                    fn()
                times[name] += time.perf_counter() - t
            env.step(rng.uniform(-1, 1, env.action_space.shape).astype(np.float32))
            same &= bool(np.array_equal(baseline(), inner._render()))
        ms = {k: round(v * 1000 / (2 * frames), 3) for k, v in times.items()}
        return {"task": task, "image_size": image_size, "frames": 2 * frames, "physics_render_ms": ms["physics_render"],
                "kept_camera_ms": ms["kept_camera"],
                "speedup": round(ms["physics_render"] / ms["kept_camera"], 2), "same_frames": same}
    finally:
        env.close()


def eval_one_at_a_time(agent: CurlAgent, cfg: Config, seeds: list[int]) -> list[float]:
    """The baseline evaluation: one environment, the episodes one after another, one observation per forward."""
    from rl_curl.train import EVAL_ENV, derived_seed

    env = make(cfg.task, seed=derived_seed(cfg.seed, EVAL_ENV), action_repeat=cfg.action_repeat,
               frame_stack=cfg.frame_stack, image_size=cfg.image_size, camera_id=cfg.camera_id)
    returns = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs))
            total, done = total + r, term or trunc
        returns.append(total)
    env.close()
    return returns


def time_evaluation(args: Args, device) -> dict:
    """Seconds of one evaluation of ``args.eval_episodes`` episodes: one at a time, side by side here, in workers.
    The side-by-side runs are timed without starting their environments (a run starts them once); the workers'
    start-up is reported apart."""
    from rl_curl.train import EvalEnvs, eval_episode_seed

    cfg = Config(task=args.task).resolved()
    probe = make(cfg.task, seed=0)
    action_dim = int(np.prod(probe.action_space.shape))
    probe.close()
    torch.manual_seed(0)
    agent = CurlAgent((3 * cfg.frame_stack, cfg.image_size, cfg.image_size), action_dim, cfg).to(device)
    seeds = [eval_episode_seed(cfg, 0, e) for e in range(args.eval_episodes)]
    t = time.perf_counter()
    serial = eval_one_at_a_time(agent, cfg, seeds)
    sync(device)
    t_serial = time.perf_counter() - t
    row = {"what": "evaluation", "task": args.task, "episodes": args.eval_episodes, "device": str(device),
           "threads": torch.get_num_threads(), "one_at_a_time_s": round(t_serial, 2)}
    for name, parallel in (("side_by_side", False), ("workers", True)):
        t = time.perf_counter()
        envs = EvalEnvs(cfg, args.eval_episodes, parallel)
        start = time.perf_counter() - t
        try:
            t = time.perf_counter()
            returns, _ = envs.run(agent, seeds)
            sync(device)
            took = time.perf_counter() - t
        finally:
            envs.close()
        row[f"{name}_s"] = round(took, 2)
        row[f"{name}_start_s"] = round(start, 2)
        row[f"{name}_over_one_at_a_time"] = round(took / t_serial, 3)
        row[f"{name}_max_return_diff"] = float(np.max(np.abs(np.array(returns) - np.array(serial))))
    return row


def check_args(args: Args) -> None:
    """The counts and the device, in one line naming the option, before anything is timed (a count of 0 divided by
    zero or printed a rate of nothing; a device torch cannot use was a traceback)."""
    from shared_losses.training.runtime import check_device

    for option, value, low in (("--updates", args.updates, 1), ("--env-agent-steps", args.env_agent_steps, 1),
                               ("--threads", args.threads, 0), ("--eval-episodes", args.eval_episodes, 0),
                               ("--replay-capacity", args.replay_capacity, 0), ("--repeats", args.repeats, 1)):
        if value < low:
            raise ValueError(f"{option} must be >= {low}, got {value}")
    if not args.batches or min(args.batches) < 2:
        raise ValueError(f"--batches must be batch sizes >= 2, got {' '.join(map(str, args.batches)) or 'none'}")
    if args.device != "auto":
        check_device(args.device)


def main(args: Args) -> None:
    from rl_curl.train import import_compiler_first

    import_compiler_first()  # before the environment timing loads EGL (rl_curl.train.import_compiler_first)
    check_args(args)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    official_classes = load_official(args.official) if args.official else None
    rng = np.random.default_rng(0)
    big = FrameReplay(100_000, (9, 100, 100), 6, 3)  # zero pages: not touched, not resident
    replay_bpt = big.bytes_per_transition()
    stacks_bpt = 2 * 9 * 100 * 100 + 6 * 4 + 4 + 4
    del big
    env_sps, ar = env_rate(args.task, args.env_agent_steps)
    render = render_times(args.task, max(10, args.env_agent_steps))
    for batch in args.batches:
        cfg = Config(batch_size=batch).resolved()
        torch.manual_seed(0)
        agent = CurlAgent((9, cfg.image_size, cfg.image_size), 1, cfg).to(device)
        agent.make_optimizers()
        ours_agent = agent
        if args.mixed_precision == "bf16":  # a separate agent, so the float32 baseline is untouched
            ours_agent = CurlAgent((9, cfg.image_size, cfg.image_size), 1, cfg).to(device)
            ours_agent.make_optimizers()
            ours_agent.autocast = functools.partial(torch.autocast, device.type, dtype=torch.bfloat16)
        fused_agent = None
        if args.fused:
            fcfg = dataclasses.replace(cfg, update="fused")
            torch.manual_seed(0)
            fused_agent = CurlAgent((9, cfg.image_size, cfg.image_size), 1, fcfg).to(device)
            fused_agent.make_optimizers()
            fused_agent.autocast = ours_agent.autocast
        replay = FrameReplay(args.replay_capacity or max(2 * batch, 600), (9, cfg.image_size, cfg.image_size), 1, 3,
                             seed=0, device=device if args.replay_on_device else None)
        fill(replay, replay.capacity, rng)
        official = None
        if official_classes is not None:
            agent_cls, buffer_cls = official_classes
            off_agent, off_buf = make_official(agent_cls, buffer_cls, cfg, device, rng, args.replay_capacity)
            pairs = [(time_official(off_agent, off_buf, device, args.updates),
                      time_ours(cfg, ours_agent, replay, device, args.updates, args.cudnn_benchmark),
                      time_ours(cfg, fused_agent, replay, device, args.updates, args.cudnn_benchmark)
                      if fused_agent is not None else float("nan"))
                     for _ in range(max(1, args.repeats))]
            official, ours, fused = (float(np.median([p[i] for p in pairs])) for i in range(3))
            del off_agent, off_buf
        else:
            ours = time_ours(cfg, ours_agent, replay, device, args.updates, args.cudnn_benchmark)
            fused = (time_ours(cfg, fused_agent, replay, device, args.updates, args.cudnn_benchmark)
                     if fused_agent is not None else float("nan"))
        base = time_baseline(cfg, agent, device, args.updates, rng) if args.baseline else float("nan")
        sample_ms = ms_per_sample(replay, batch, device)
        row = {"batch": batch, "update_ms": round(ours, 2), "replay_sample_ms": round(sample_ms, 2),
               "baseline_update_ms": round(base, 2) if args.baseline else None,
               "speedup_vs_baseline": round(base / ours, 3) if args.baseline else None,
               "replay_bytes_per_transition": round(replay_bpt, 1),
               "obs_next_obs_bytes_per_transition": stacks_bpt,
               "replay_memory_ratio": round(stacks_bpt / replay_bpt, 2),
               "env_steps_per_s": round(env_sps, 1), "action_repeat": ar, "task": args.task,
               "render_ms_physics_render": render["physics_render_ms"],
               "render_ms_kept_camera": render["kept_camera_ms"],
               "render_speedup": render["speedup"], "render_same_frames": render["same_frames"],
               "device": str(device), "threads": torch.get_num_threads(), "mixed_precision": args.mixed_precision,
               "replay_on_device": args.replay_on_device, "replay_capacity": replay.capacity,
               "cudnn_benchmark": args.cudnn_benchmark}
        if official is not None:
            row.update(official_update_ms=round(official, 2), ours_over_official=round(ours / official, 3))
        if fused_agent is not None:
            row.update(fused_update_ms=round(fused, 2), fused_over_ours=round(fused / ours, 3))
            if official is not None:
                row.update(fused_over_official=round(fused / official, 3))
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            baseline = f" (official-style baseline {base:.1f} ms, x{base / ours:.2f})" if args.baseline else ""
            print(f"batch {batch}: update {ours:.1f} ms{baseline}, of which replay sample {sample_ms:.1f} ms; "
                  f"replay {replay_bpt:.0f} B/transition vs {stacks_bpt} for obs+next_obs "
                  f"(x{stacks_bpt / replay_bpt:.2f} less); "
                  f"{args.task}: {env_sps:.0f} env steps/s with rendering (action repeat {ar}) on {device}; a "
                  f"frame {render['kept_camera_ms']:.2f} ms from the kept camera against "
                  f"{render['physics_render_ms']:.2f} ms by physics.render (x{render['speedup']:.2f}, same frames: "
                  f"{render['same_frames']})"
                  + (f"; --update fused {fused:.1f} ms (fused/ours {fused / ours:.2f})"
                     if fused_agent is not None else "")
                  + (f"; official MishaLaskin/curl update {official:.1f} ms, ours/official {ours / official:.2f}"
                     + (f", fused/official {fused / official:.2f}" if fused_agent is not None else "")
                     if official is not None else ""), flush=True)
    if args.eval_episodes > 0:
        row = time_evaluation(args, device)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"evaluation of {row['episodes']} episodes of {row['task']} on {row['device']}: one at a time "
                  f"{row['one_at_a_time_s']:.2f} s; side by side {row['side_by_side_s']:.2f} s "
                  f"(x{row['side_by_side_over_one_at_a_time']:.3f}); in workers {row['workers_s']:.2f} s "
                  f"(x{row['workers_over_one_at_a_time']:.3f}, their start {row['workers_start_s']:.2f} s once per "
                  "run); "
                  f"largest return difference to one at a time: {row['side_by_side_max_return_diff']:.3g} / "
                  f"{row['workers_max_return_diff']:.3g}", flush=True)


if __name__ == "__main__":
    from shared_losses.training.cli import examples_from, parse_dataclass, run_cli

    run_cli(lambda: main(parse_dataclass(Args, description=f"{Args.__doc__}\n\n{examples_from(__doc__)}")))
