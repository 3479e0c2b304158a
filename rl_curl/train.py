"""The training loop: seed steps, updates, evaluation, CSV + TensorBoard logs, atomic checkpoints, resume.

    python -m rl_curl.train --task cartpole-swingup --aux debiased --tau-plus 0.05
    accelerate launch -m rl_curl.train --task walker-walk --aux curl

Reads top to bottom like the official loop: act (random during the seed steps), update, step the
environment, store, log; evaluate every ``eval_every`` environment steps; checkpoint at an episode
end after every ``checkpoint_every`` environment steps, so a resumed run starts a fresh episode whose
seed depends only on its index and continues exactly as the uninterrupted run would. One exception:
the final checkpoint is written when ``env_steps`` is reached, which can be mid-episode (never with
the DMC defaults, whose episodes divide 100k steps); extending such a run with ``--resume
--env-steps N`` restarts that episode from its start instead of continuing it.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
import tyro
from tqdm import tqdm

from shared_losses.harness import RunHarness, refuse_config_changes
from shared_losses.runtime import CheckpointError, load_checkpoint, print_run_result, read_json_file, register_named

from .agent import CurlAgent
from .config import Config
from .env import make

RESUMABLE_FIELDS = Config.RESUME_FREE  # fields a resumed run may change (declared by the configuration)
# Fields added after checkpoints were first written, with the value every older checkpoint implies.
LEGACY_SIGNATURE = {"encoder_tanh": True, "update": "official"}
# Layout of the saved agent. 2: the encoder's linear layer reads the conv features in (row, column,
# channel) order (d44f4a3). Checkpoints without this field are format 1, (channel, row, column):
# they load without a shape error but mean another model, so they are refused.
CHECKPOINT_FORMAT = 2


def available_memory() -> int | None:
    """Bytes of host memory available to new allocations (Linux MemAvailable), None where unknown."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_replay_memory(cfg: Config, device: torch.device, action_dim: int = 64) -> None:
    """Refuse, before anything is written, a --replay-capacity whose buffer cannot fit: its frame ring in host
    memory (or in GPU memory with --replay-on-device) and its per-transition arrays in host memory. The
    action dimension is not known before the environment is built; 64 bounds every DeepMind Control task."""
    from .replay import FrameReplay

    need = FrameReplay.estimate_bytes(cfg.replay_capacity, cfg.obs_shape, action_dim, cfg.frame_stack)
    gib = lambda b: f"{b / 2**30:.1f} GiB"  # noqa: E731
    on_gpu = cfg.replay_on_device and device.type == "cuda"
    host_need = need["other"] + (0 if on_gpu else need["frames"])
    host = available_memory()
    if host is not None and host_need > host:
        raise ValueError(f"--replay-capacity {cfg.replay_capacity} needs {gib(host_need)} of memory for the replay "
                         f"({cfg.image_size}x{cfg.image_size} frames) but only {gib(host)} is available; lower "
                         "--replay-capacity (100000 is the paper's) or --image-size")
    if on_gpu:
        free, _ = torch.cuda.mem_get_info(device)
        if need["frames"] > free:
            raise ValueError(f"--replay-capacity {cfg.replay_capacity} with --replay-on-device needs "
                             f"{gib(need['frames'])} of GPU memory for the frames but {gib(free)} is free; lower "
                             "--replay-capacity or drop --replay-on-device")


def check_checkpoint_format(extra: dict, path) -> None:
    """Refuse a checkpoint whose agent layout is not this code's (see CHECKPOINT_FORMAT)."""
    fmt = extra.get("format", 1)
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(
            f"checkpoint {path} has agent format {fmt}, this rl_curl reads format {CHECKPOINT_FORMAT} "
            "(format 1 flattened the conv features in (channel, row, column) order, so its encoder weights "
            "would load without error but compute something else); start a new run or use the rl_curl "
            "version that wrote it")


def config_signature(cfg: Config) -> dict:
    return {k: v for k, v in dataclasses.asdict(cfg).items() if k not in RESUMABLE_FIELDS}


def check_signature(extra: dict, cfg: Config, path) -> None:
    """Refuse a checkpoint written with another configuration, naming every differing field. Fields
    added since a checkpoint was written count with the value its code implied (LEGACY_SIGNATURE)."""
    refuse_config_changes(extra.get("signature", {}), config_signature(cfg), free=RESUMABLE_FIELDS,
                          legacy=LEGACY_SIGNATURE, where=path)


def stream_seeds(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """Independent seeds of the replay's sampling and of the seed-step actions. Both generators used to
    take ``seed`` itself, so they drew the same raw stream: the first batch's indices were a function
    of the first random actions."""
    replay, action = np.random.SeedSequence(seed).spawn(2)
    return replay, action


def derived_seed(*key: int) -> int:
    """A 32-bit seed that depends on the integers ``key`` alone (numpy's SeedSequence hash): valid for any
    run seed (environment RNGs take seeds below 2**32) and distinct across purposes and indices."""
    return int(np.random.SeedSequence(list(key)).generate_state(1)[0])


# The first key after the run's seed names what a derived seed is for.
TRAIN_EPISODE, EVAL_ENV, EVAL_EPISODE = 1, 2, 3


def episode_seed(cfg: Config, episode: int) -> int:
    """Seed of training episode ``episode``: a function of the run's seed and the index alone, so a
    resumed run replays nothing and continues with the episodes the uninterrupted run would have had."""
    return derived_seed(cfg.seed, TRAIN_EPISODE, episode)


def eval_episode_seed(cfg: Config, env_step: int, episode: int) -> int:
    """Seed of evaluation episode ``episode`` of the evaluation at ``env_step``: every evaluation draws
    fresh initial states (as the official code's, which evaluates on its running training
    environment), and re-evaluating a checkpoint at its step gives that evaluation's episodes again."""
    return derived_seed(cfg.seed, EVAL_EPISODE, env_step, episode)


def build(cfg: Config, device) -> tuple:
    env = make(cfg.task, seed=cfg.seed, action_repeat=cfg.action_repeat, frame_stack=cfg.frame_stack,
               image_size=cfg.image_size, camera_id=cfg.camera_id)
    obs_shape = env.observation_space.shape
    action_dim = int(np.prod(env.action_space.shape))
    agent = CurlAgent(obs_shape, action_dim, cfg).to(device)
    agent.make_optimizers()  # after .to(): optimiser state lives with the parameters
    return env, agent


def evaluate(agent: CurlAgent, cfg: Config, episodes: int, video_path: Path | None = None,
             env_step: int = 0) -> list[float]:
    """Returns of ``episodes`` deterministic episodes (mean action) on a separate environment, from the
    initial states of the evaluation at ``env_step`` (see :func:`eval_episode_seed`)."""
    env = make(cfg.task, seed=derived_seed(cfg.seed, EVAL_ENV), action_repeat=cfg.action_repeat,
               frame_stack=cfg.frame_stack, image_size=cfg.image_size, camera_id=cfg.camera_id)
    returns, frames = [], []
    for e in range(episodes):
        obs, _ = env.reset(seed=eval_episode_seed(cfg, env_step, e))
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(agent.act(obs))
            total += r
            done = term or trunc
            if video_path is not None and e == 0:
                frames.append(env.render())
        returns.append(total)
    env.close()
    if video_path is not None and frames:
        import imageio.v2 as imageio

        imageio.mimsave(video_path, frames, fps=30)
    return returns


def run(cfg: Config) -> dict:
    """Train (or resume) one run; returns a summary with the final evaluation."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    from .replay import FrameReplay
    from .report import objective_label, plot_curve

    cfg = cfg.resolved()
    accelerator = Accelerator(cpu=cfg.device == "cpu", mixed_precision=cfg.mixed_precision)
    if accelerator.num_processes > 1:
        raise ValueError("rl_curl trains one agent per process on one device; launch several seeds with "
                         "scripts/curl_table3.py instead of `accelerate launch --num_processes > 1`")
    harness = RunHarness("rl_curl", cfg.out_dir, resume=cfg.resume, overwrite=cfg.overwrite, free=Config.RESUME_FREE,
                         legacy=LEGACY_SIGNATURE)
    out, ckpt_dir, resuming = harness.out, harness.checkpoint_dir, harness.resuming
    if harness.folder.resuming and not resuming and (out / "summary.json").exists():  # checkpoint deleted
        raise FileExistsError(f"{out} holds a finished run (summary.json) but no checkpoint/ to continue it from, so "
                              "starting there would overwrite its logs: pass --overwrite (moves it aside) or choose "
                              "another --output-dir to start a new run; nothing was changed")
    if resuming:
        # Counters and configuration first, so that a mismatch is refused naming its fields before
        # accelerate tries to load models, optimisers or a replay of another shape.
        extra = harness.saved_state()
        check_checkpoint_format(extra, ckpt_dir)
        check_signature(extra, cfg, ckpt_dir)
        if extra["step"] >= cfg.agent_steps and (out / "summary.json").exists() and not cfg.save_video:
            print(f"{out} already holds this run, finished at {extra['step'] * cfg.action_repeat} environment steps; "
                  "nothing to do (pass a larger --env-steps to train on)")
            return read_json_file(out / "summary.json", "run's summary")
    check_replay_memory(cfg, accelerator.device)
    harness.open(accelerator)
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    if accelerator.device.type == "cuda":
        torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
    set_seed(cfg.seed)

    env, agent = build(cfg, accelerator.device)
    agent.autocast = accelerator.autocast
    replay_seed, action_seed = stream_seeds(cfg.seed)
    replay = FrameReplay(cfg.replay_capacity, env.observation_space.shape, agent.action_dim, cfg.frame_stack, replay_seed,
                         device=accelerator.device if cfg.replay_on_device else None)
    action_rng = np.random.default_rng(action_seed)
    register_named(accelerator, agent=agent, **agent.optimizers())
    if cfg.save_replay:
        register_named(accelerator, replay=replay)

    step, episode, next_ckpt, resumed, metrics = 0, 0, cfg.checkpoint_every, False, {}
    if resuming:
        load_checkpoint(accelerator, ckpt_dir)
        step, episode, next_ckpt = extra["step"], extra["episode"], extra["next_ckpt"]
        action_rng.bit_generator.state = extra["action_rng"]
        # The latest value of each metric, for the next log row (see below); none while a resume without
        # the replay refills it (no updates then, so nothing new to log).
        metrics = extra.get("metrics", {}) if cfg.save_replay else {}
        resumed = True
    harness.write_config(dataclasses.asdict(cfg))
    ar = cfg.action_repeat
    # On resume, the CSVs and TensorBoard drop what was logged after the checkpoint (it is redone).
    harness.start_logging(step * ar if resumed else None, config=dataclasses.asdict(cfg), csv=("log.csv", "eval.csv"),
                          step_key="env_step")
    log, eval_log, tb = harness.csv("log.csv"), harness.csv("eval.csv"), harness.tb
    # Seed steps are counted from the start of the run; a resume without the replay refills it first.
    seed_until = cfg.seed_steps if cfg.save_replay or not resumed else step + cfg.seed_steps

    def save():
        harness.checkpoint({"format": CHECKPOINT_FORMAT, "step": step, "episode": episode, "next_ckpt": next_ckpt,
                            "action_rng": action_rng.bit_generator.state,
                            "metrics": {k: float(v) for k, v in metrics.items()},
                            "signature": config_signature(cfg), "config": dataclasses.asdict(cfg)})

    def do_eval(final: bool = False) -> float:
        video = out / "eval.mp4" if (final and cfg.save_video) else None
        returns = evaluate(agent, cfg, cfg.eval_episodes, video, env_step=step * ar)
        row = {"env_step": step * ar, "episode": episode, "eval_return_mean": float(np.mean(returns)),
               "eval_return_std": float(np.std(returns))}
        eval_log.log(row)
        tb.add_scalar("eval/return", row["eval_return_mean"], step * ar)
        return row["eval_return_mean"]

    # Resuming a finished run: its final evaluation and checkpoint are already written.
    finished = resumed and step >= cfg.agent_steps and bool(eval_log.rows) \
        and float(eval_log.rows[-1]["env_step"]) == step * ar
    obs, ep_return, last_eval = None, 0.0, math.nan
    start_step, started = step, time.perf_counter()
    bar = tqdm(total=cfg.agent_steps, initial=step, disable=not cfg.progress, desc=f"{cfg.task} {cfg.aux}", unit="step")
    stop = harness.signals("stopping at the end of the current episode and writing a checkpoint (Ctrl-C again to stop at "
                       "once, losing the steps since the last checkpoint)")
    with stop:  # Ctrl-C / SIGTERM: finish the episode (checkpoints are taken between episodes), exit 130
        while step < cfg.agent_steps:
            if obs is None:
                obs, _ = env.reset(seed=episode_seed(cfg, episode))
                replay.start_episode(obs)
                ep_return = 0.0
            if step < seed_until:
                action = action_rng.uniform(-1.0, 1.0, size=agent.action_dim).astype(np.float32)
            else:
                action = agent.act(obs, sample=True)
            if step >= seed_until:
                # The latest value of every metric: the actor and alpha update every actor_update_every steps,
                # and a log row taking only the last update's would never show them when that one is odd.
                metrics = {**metrics, **agent.update(replay.sample(cfg.batch_size, accelerator.device), step)}
            next_obs, reward, terminated, truncated, _ = env.step(action)
            replay.add(action, reward, next_obs, terminated)
            obs, ep_return, step = next_obs, ep_return + reward, step + 1
            bar.update(1)
            env_step = step * ar
            if metrics and (env_step // cfg.log_every) != ((step - 1) * ar // cfg.log_every):
                row = {"env_step": env_step, "episode": episode, **{k: float(v) for k, v in metrics.items()}}
                log.log(row)
                for k, v in row.items():
                    if k not in ("env_step", "episode"):
                        tb.add_scalar(f"train/{k}", v, env_step)
            if (env_step // cfg.eval_every) != ((step - 1) * ar // cfg.eval_every) and step < cfg.agent_steps:
                last_eval = do_eval()
                bar.set_postfix(eval_return=f"{last_eval:.1f}")
            if terminated or truncated:
                tb.add_scalar("train/episode_return", ep_return, env_step)
                log.log({"env_step": env_step, "episode": episode, "episode_return": ep_return})
                episode += 1
                obs = None
                if cfg.checkpoint_every > 0 and env_step >= next_ckpt:
                    next_ckpt = (env_step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
                    save()
                elif stop.requested and step < cfg.agent_steps:
                    save()
                if stop.requested and step < cfg.agent_steps:
                    bar.close()
                    env.close()
                    raise harness.interrupted(f"environment step {env_step}")  # the checkpoint is written above
    bar.close()
    if finished:
        last_eval = float(eval_log.rows[-1]["eval_return_mean"])
        if cfg.save_video:  # the final evaluation's first episode, without logging it again
            evaluate(agent, cfg, 1, out / "eval.mp4", env_step=step * ar)
    else:
        last_eval = do_eval(final=True)
        save()
    harness.close()
    obs_shape = env.observation_space.shape
    env.close()
    from .policy import POLICY_FILE, save_policy

    save_policy(agent, cfg, obs_shape, out / POLICY_FILE)  # the trained policy alone (rl_curl.load_policy)
    plot_curve(out / "eval.csv", out / "curve.png", title=f"{cfg.task}: {objective_label(dataclasses.asdict(cfg))}")
    if finished and (out / "summary.json").exists():  # only the video was asked for: the run's summary stays
        return harness.finish(read_json_file(out / "summary.json", "run's summary"))
    # The wall time of this process's part of the run (training, evaluations and checkpoints): a resumed run
    # counts from train_from_env_step, the step it resumed at.
    summary = {"task": cfg.task, "aux": cfg.aux, "tau_plus": cfg.tau_plus, "positives": cfg.positives,
               "update": cfg.update, "seed": cfg.seed, "env_steps": step * ar, "final_eval_return": last_eval,
               "train_seconds": round(time.perf_counter() - started, 1), "train_from_env_step": start_step * ar}
    return harness.finish(summary)


def main() -> None:
    cfg = tyro.cli(Config)
    summary = run(cfg)
    print_run_result("rl_curl", cfg.resolved().out_dir, summary["env_steps"], summary)


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
