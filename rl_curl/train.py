"""The training loop: seed steps, updates, evaluation, CSV + TensorBoard logs, atomic checkpoints, resume.

    python -m rl_curl.train --task cartpole-swingup --aux debiased --tau-plus 0.05
    accelerate launch -m rl_curl.train --task walker-walk --aux curl

Reads top to bottom like the official loop: act (random during the seed steps), update, step the
environment, store, log; evaluate every ``eval_every`` environment steps; checkpoint at an episode
end after every ``checkpoint_every`` environment steps, so a resumed run starts a fresh episode whose
seed depends only on its index and continues exactly as the uninterrupted run would. The final
checkpoint is written when ``env_steps`` is reached, which can be mid-episode (never with the DMC
defaults, whose episodes divide 100k steps); extending such a run with ``--resume --env-steps N``
replays the episode in progress from its seed with its stored actions (the simulation is deterministic)
and continues it, checking that the replay arrives at the stored observation.
"""

from __future__ import annotations

import dataclasses
import math
import os
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from shared_losses.training.harness import LogRow, RunHarness, merge_rows
from shared_losses.training.loop import TrainingApp
from shared_losses.training.loop import run as run_app
from shared_losses.training.runtime import (CheckpointError, TrainingDiverged, bar_interval, cgroup_memory_room,
                                            checkpoint_exists, make_accelerator, print_run_result, read_json_file,
                                            register_named, threads_within_the_cpu_limit, torch_settings_given_back,
                                            usable_cpus)

from .agent import ActorSnapshot, CurlAgent
from .config import Config, from_cli
from .env import EnvWorker, make, side_by_side
from .objectives import OBJECTIVES

# Bumped whenever the saved agent changes meaning (a layout that would load without a shape error but compute
# something else): a checkpoint of another format is refused.
CHECKPOINT_FORMAT = 2


def host_memory() -> int | None:
    """Bytes of the host's memory available to new allocations (Linux MemAvailable); None where unknown."""
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


def address_space_room() -> int | None:
    """Bytes of address space this process may still reserve under ``ulimit -v`` (RLIMIT_AS, which some clusters
    set): an allocation counts whole against it, written or not. None where unlimited or unknown."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as fh:
            size = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    except (ImportError, OSError, ValueError, StopIteration):
        return None
    return max(0, soft - size)


def available_memory() -> tuple[int | None, str]:
    """Bytes of memory available to new allocations, and where the bound comes from: the host's
    (:func:`host_memory`) or, where it is tighter, this process's cgroup limit (:func:`cgroup_memory_room`); None
    where unknown."""
    host, room = host_memory(), cgroup_memory_room()
    if room is not None and (host is None or room < host):
        return room, "within this process's memory limit (a Slurm job's --mem, a container's limit)"
    return host, "on this machine"


def replay_held(cfg: Config) -> int:
    """Transitions a run's replay holds at most: its capacity, or the run's agent steps where fewer."""
    return min(cfg.replay_capacity, cfg.agent_steps)


#: Memory one environment worker process takes (:class:`rl_curl.env.EnvWorker`: --env-worker's, --eval-worker's, and
#: --eval-parallel's one per episode), which a run's memory check counts beside its replay: a cartpole worker at
#: 100x100 held 227 MiB of its own (245 MiB resident) under Mesa's EGL on a 2-core AMD EPYC; rounded up.
WORKER_BYTES = 256 * 2**20

#: eval.csv's columns of an evaluation's returns and their TensorBoard tags
EVAL_TAGS = {"eval_return_mean": "eval/return", "eval_return_std": "eval/return_std",
             "eval_return_min": "eval/return_min", "eval_return_max": "eval/return_max"}


def rates_said(cfg: Config) -> str:
    """The actor's and the critic's learning rates as the run was given them: ``--lr X``, with ``--actor-lr`` /
    ``--critic-lr`` where one was set apart."""
    said = [f"--lr {cfg.lr:g}"]
    for name in ("actor_lr", "critic_lr"):
        if getattr(cfg, name) is not None:
            said.append(f"--{name.replace('_', '-')} {getattr(cfg, name):g}")
    return ", ".join(said)


def worker_processes(cfg: Config) -> int:
    """The environment worker processes a run starts (their memory counts where the run's does: a job's limit)."""
    return int(cfg.env_worker) + EvalEnvs.processes(cfg.eval_episodes, cfg.eval_parallel, cfg.eval_worker)


def check_replay_memory(cfgs: Config | Sequence[Config], device: torch.device | None = None, action_dim: int = 64,
                        *, fewer: str = "train fewer runs together", gpu: bool = True) -> None:
    """Refuse, before anything is written, replays that cannot fit. Two checks: each run's whole ring, allocated at once
    (as pages that take memory only when written), against the host's free memory (a far larger one fails to allocate);
    and what the runs will fill (``min(--replay-capacity, agent steps)`` transitions each; a resume also reads its saved
    replay onto the host, a frame file at a time, or whole from a checkpoint written before them) against the memory
    they may use: the host's, or the tighter limit of the process's cgroup (a Slurm job's ``--mem``). The ring fills as
    a run goes, so without the second check a run that cannot fit would be killed for memory only when its replay is
    nearly full, and again at the same step on each resume; runs trained together (a list of configurations) are counted
    together, since each run alone sees the memory the others are about to fill as free. With --replay-on-device the
    frames are checked against the GPU's free memory instead (the device ring at its largest, while it grows).
    ``fewer``: the advice for several runs (a grid's: lower --parallel); ``gpu=False``: host memory only (a grid's runs
    may go to several GPUs). ``device``: the training device; None: the one the first configuration would train on (a
    GPU where there is one and --device is not cpu), for checks made before any accelerator exists. The action dimension
    is not known before the environment is built; 64 bounds every DeepMind Control task. The runs' environment worker
    processes count too (:data:`WORKER_BYTES` each, :func:`worker_processes`): in a job's limit, an evaluation's ten
    workers (--eval-parallel) take more than a cartpole run's replay."""
    from .replay import FrameReplay, ReplayCheckpoint

    cfgs = [cfgs] if isinstance(cfgs, Config) else list(cfgs)
    if not cfgs:
        return
    cfg = cfgs[0]
    if device is None:
        device = torch.device("cuda" if cfg.device != "cpu" and torch.cuda.is_available() else "cpu")
    gib = lambda b: f"{b / 2**30:.1f} GiB"  # noqa: E731
    frames_of = lambda c: f"{c.image_size}x{c.image_size} frames"  # noqa: E731
    on_gpu = cfg.replay_on_device and device.type == "cuda"
    host, reserve = host_memory(), address_space_room()
    wholes = [FrameReplay.estimate_bytes(c.replay_capacity, c.obs_shape, action_dim, c.frame_stack) for c in cfgs]
    for c, whole in zip(cfgs, wholes):
        need = whole["other"] + (0 if on_gpu else whole["frames"])
        if host is not None and need > host:
            raise ValueError(f"--replay-capacity {c.replay_capacity} needs {gib(need)} of memory for the replay "
                             f"({frames_of(c)}) but only {gib(host)} is available on this machine; lower "
                             "--replay-capacity (100000 is the paper's) or --image-size")
    reserved = sum(w["other"] + (0 if on_gpu else w["frames"]) for w in wholes)
    if reserve is not None and reserved > reserve:  # every ring is reserved whole at once, written or not
        whose = f"the {len(cfgs)} runs' replays' whole rings" if len(cfgs) > 1 else "the replay's whole ring"
        raise ValueError(f"--replay-capacity {cfg.replay_capacity} reserves {gib(reserved)} of address space for "
                         f"{whose} ({frames_of(cfg)}) but this process may reserve only "
                         f"{gib(reserve)} more (ulimit -v); lower --replay-capacity to what the run fills "
                         f"({replay_held(cfg):,} transitions) or raise the limit")
    needs = [FrameReplay.estimate_bytes(c.replay_capacity, c.obs_shape, action_dim, c.frame_stack,
                                        transitions=c.agent_steps) for c in cfgs]
    read_back = [(ReplayCheckpoint.largest_file(Path(c.output_dir) / "checkpoint") or n["frames"])
                 if c.resume and c.save_replay and checkpoint_exists(Path(c.output_dir) / "checkpoint") else 0
                 for c, n in zip(cfgs, needs)]
    workers = sum(worker_processes(c) for c in cfgs)
    need = (sum(n["other"] + (0 if on_gpu else n["frames"]) + r for n, r in zip(needs, read_back))
            + workers * WORKER_BYTES)
    room, where = available_memory()
    runs = f" for the {len(cfgs)} runs' replays" if len(cfgs) > 1 else " for the replay"
    held = f"{replay_held(cfg):,} transitions" + (" each" if len(cfgs) > 1 else "")
    if room is not None and need > room:
        also, fewer_workers = "", ""
        if workers:
            also = (f" and {workers} environment worker process{'es' if workers > 1 else ''} "
                    f"({gib(workers * WORKER_BYTES)}, about {WORKER_BYTES // 2**20} MiB each)")
            flags = [f for f, on in (("--eval-parallel", any(c.eval_parallel for c in cfgs)),
                                     ("--eval-worker", any(c.eval_worker for c in cfgs)),
                                     ("--env-worker", any(c.env_worker for c in cfgs))) if on]
            fewer_workers = f", start fewer worker processes ({' / '.join('--no-' + f[2:] for f in flags)})"
        raise ValueError(f"the run{'s' if len(cfgs) > 1 else ''} will need {gib(need)} of memory{runs} ({held} of "
                         f"{frames_of(cfg)}){also} but only {gib(room)} is available {where}; lower "
                         f"--replay-capacity (100000 is the paper's), --env-steps or --image-size{fewer_workers}"
                         + (f", or {fewer}" if len(cfgs) > 1 else ""))
    if on_gpu and gpu:
        frames = sum(n["frames_device_peak"] for n in needs)
        free, _ = torch.cuda.mem_get_info(device)
        if frames > free:
            raise ValueError(f"--replay-on-device needs {gib(frames)} of GPU memory for the frames{runs} ({held}) but "
                             f"{gib(free)} is free; lower --replay-capacity or drop --replay-on-device"
                             + (f", or {fewer}" if len(cfgs) > 1 else ""))


def check_checkpoint_format(extra: dict, path) -> None:
    """Refuse a checkpoint whose agent layout is not this code's (see CHECKPOINT_FORMAT)."""
    fmt = extra.get("format")
    owner = extra.get("application")
    if owner not in (None, "rl_curl"):
        raise CheckpointError(f"checkpoint {path} was written by a run of {owner}, not of rl_curl")
    if fmt != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} was written by another version of rl_curl (agent format {fmt}, this "
                              f"one reads {CHECKPOINT_FORMAT}); start a new run")


def stream_seeds(seed: int) -> tuple[np.random.SeedSequence, np.random.SeedSequence]:
    """Independent seeds of the replay's sampling and of the seed-step actions (one seed for both would draw
    the same raw stream: the first batch's indices would be a function of the first random actions)."""
    replay, action = np.random.SeedSequence(seed).spawn(2)
    return replay, action


def derived_seed(*key: int) -> int:
    """A 32-bit seed that depends on the integers ``key`` alone (numpy's SeedSequence hash): valid for any
    run seed (environment RNGs take seeds below 2**32) and distinct across purposes and indices."""
    return int(np.random.SeedSequence(list(key)).generate_state(1)[0])


#: The parts of a training step whose seconds summary.json's time_seconds reports (plus "other"). Without
#: --sync-timing a CUDA update's GPU time shows up where the host next waits for it: in "act" of the next step.
TIMED_PARTS = ("act", "replay_sample", "update", "env", "replay_add", "eval")

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


def import_compiler_first() -> None:
    """Import torch's compiler stack (``torch._dynamo``, and with it Triton where torch has it) before an environment
    loads its EGL driver. The optimisers import it anyway, but after the environment: with a CUDA build of torch
    (Triton bundles LLVM) and Mesa's EGL (llvmpipe loads the system's libLLVM), importing Triton second crashed the
    process with a segmentation fault (seen with torch 2.13.0+cu130, triton 3.7.1, Mesa EGL, Python 3.12).
    In that order the two load side by side."""
    import torch._dynamo  # noqa: F401


#: Held while a run builds (seeds the global generators, makes its agent): runs trained together build in turn.
BUILD_LOCK = threading.Lock()


def env_kwargs(cfg: Config) -> dict:
    """:func:`rl_curl.env.make`'s arguments for a run's training environment."""
    return dict(task=cfg.task, seed=cfg.seed, action_repeat=cfg.action_repeat, frame_stack=cfg.frame_stack,
                image_size=cfg.image_size, camera_id=cfg.camera_id)


def build(cfg: Config, device, env=None) -> tuple:
    """The run's training environment (``env`` if given: an :class:`EnvWorker` already started) and its agent."""
    import_compiler_first()
    if env is None:
        env = EnvWorker(**env_kwargs(cfg)) if cfg.env_worker else make(**env_kwargs(cfg))
    if isinstance(env, EnvWorker):
        env.ready()
    obs_shape = env.observation_space.shape
    action_dim = int(np.prod(env.action_space.shape))
    agent = CurlAgent(obs_shape, action_dim, cfg).to(device)
    agent.make_optimizers()  # after .to(): optimiser state lives with the parameters
    return env, agent


class EvalEnvs:
    """The environments of an evaluation, one per episode, stepped side by side: the policy acts on every running
    episode in one batched forward pass per step (one transfer to the device and back, not one per episode).

    In this process by default; with ``parallel`` each environment lives in a worker process of its own
    (:class:`rl_curl.env.EnvWorker`, started once and reused by every evaluation of the run; every running episode's
    worker steps at the same time), so that physics and rendering use several CPU cores; with ``worker`` (and not
    ``parallel``) all of them live in one worker process (:class:`rl_curl.env.EnvWorker` of an
    :class:`rl_curl.env.EnvGroup`), stepped there one after another as here.
    All give the same returns: the same environments, reset with the same seeds, and the policy sees the same batches
    (the episodes still running, in order)."""

    @staticmethod
    def processes(episodes: int, parallel: bool = False, worker: bool = False) -> int:
        """The worker processes these environments live in: one per episode with ``parallel`` (and more than one
        episode), else one with ``worker``, else none (this process)."""
        return episodes if parallel and episodes > 1 else int(worker)

    def __init__(self, cfg: Config, episodes: int, parallel: bool = False, worker: bool = False):
        kwargs = {**env_kwargs(cfg), "seed": derived_seed(cfg.seed, EVAL_ENV)}
        self.episodes, self.vec, self.envs, self.group = episodes, [], [], None
        self.video_size = cfg.video_size
        processes = self.processes(episodes, parallel, worker)
        if processes == 1:  # one worker holds them all
            self.group = EnvWorker(episodes=episodes, **kwargs)
        elif processes > 1:  # a worker each
            self.vec = [EnvWorker(wait=False, **kwargs) for _ in range(episodes)]  # they start side by side
            try:
                for w in self.vec:
                    w.ready()
            except BaseException:
                self.close()  # the workers that did start
                raise
        else:
            self.envs = [make(**kwargs) for _ in range(episodes)]

    def run(self, agent: CurlAgent, seeds: list[int], video: bool = False) -> tuple[list[float], list[np.ndarray]]:
        """Returns of one episode per environment from the initial states ``seeds``, and the first episode's frames
        (``[H, W, 3]`` uint8, :meth:`video_frame`) when ``video``."""
        n = len(seeds)
        if n != self.episodes:
            raise ValueError(f"{n} seeds for {self.episodes} evaluation environments")
        if self.vec:
            obs = np.stack([o for o, _ in side_by_side(self.vec, [("reset", s) for s in seeds])])
        elif self.group is not None:
            obs, _ = self.group.reset(seed=list(seeds))
        else:
            obs = np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)])
        totals, running, frames = np.zeros(n), np.ones(n, dtype=bool), []
        while running.any():
            idx = np.flatnonzero(running)
            acts = agent.act(obs[idx])
            if self.vec:  # the running episodes' workers step at the same time
                nxt, rew, ended = obs.copy(), np.zeros(n), np.zeros(n, dtype=bool)
                answers = side_by_side([self.vec[i] for i in idx], [("step", a) for a in acts])
                for i, (o, r, t, u, _) in zip(idx, answers):
                    nxt[i], rew[i], ended[i] = o, r, t or u
            elif self.group is not None:  # the same steps, in the worker
                nxt, rew, ended = obs.copy(), np.zeros(n), np.zeros(n, dtype=bool)
                nxt[idx], rew[idx], ended[idx] = self.group.step((idx, acts))
            else:
                nxt, rew, ended = obs.copy(), np.zeros(n), np.zeros(n, dtype=bool)
                for a, i in zip(acts, idx):
                    nxt[i], rew[i], t, u, _ = self.envs[i].step(a)
                    ended[i] = t or u
            totals[idx] += rew[idx]
            if video and running[0]:
                frames.append(self.video_frame(nxt[0]))
            obs = np.where(running[:, None, None, None], nxt, obs)
            running[idx] = ~ended[idx]
        return [float(t) for t in totals], frames

    def video_frame(self, obs: np.ndarray) -> np.ndarray:
        """The first episode's video frame after its step to ``obs``: rendered at ``--video-size`` by its environment,
        or (None) the observation's newest frame."""
        if self.video_size is None or self.video_size == obs.shape[-1]:
            return np.ascontiguousarray(obs[-3:].transpose(1, 2, 0))
        return (self.group if self.group is not None else (self.vec or self.envs)[0]).video_frame(self.video_size)

    def close(self) -> None:
        if self.group is not None:
            self.group.close()
        for env in [*self.vec, *self.envs]:
            env.close()
        self.vec, self.envs, self.group = [], [], None


def eval_episodes(agent: CurlAgent, cfg: Config, episodes: int, env_step: int = 0, envs: EvalEnvs | None = None,
                  video: bool = False) -> tuple[list[float], list]:
    """(returns, the first episode's frames if ``video`` else []) of ``episodes`` deterministic episodes (mean
    action) on separate environments (:class:`EvalEnvs`; ``envs`` reuses a run's, else they are made for this call
    and closed), from the initial states of the evaluation at ``env_step`` (see :func:`eval_episode_seed`)."""
    own = envs is None
    if own:
        envs = EvalEnvs(cfg, episodes, cfg.eval_parallel, cfg.eval_worker)
    try:
        return envs.run(agent, [eval_episode_seed(cfg, env_step, e) for e in range(episodes)], video=video)
    finally:
        if own:
            envs.close()


def write_video(path: Path, frames: list) -> None:
    """``frames`` as the video ``path``, whole or not at all: written to a temporary file beside it, then renamed
    (a failed write leaves no partial video). Frames keep their size (an odd side of an ffmpeg video gains one edge
    row or column)."""
    import imageio.v2 as imageio

    if not frames:
        raise ValueError("no frames to write")
    # a name of this process's own, made by the writer (the file's mode the umask's, as a plain write's)
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    kwargs = {}
    if path.suffix.lower() != ".gif":  # ffmpeg: frames as they are (its default resizes them to a multiple of 16,
        # with a warning every time); H.264's colour subsampling needs even sides, so an odd one gains an edge row
        h, w = np.asarray(frames[0]).shape[:2]
        frames = [np.pad(np.asarray(f), ((0, h % 2), (0, w % 2), (0, 0)), mode="edge") for f in frames]
        kwargs["macro_block_size"] = 1
    try:
        imageio.mimsave(tmp, frames, fps=30, **kwargs)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def evaluate(agent: CurlAgent, cfg: Config, episodes: int, video_path: Path | Sequence[Path] | None = None,
             env_step: int = 0, envs: EvalEnvs | None = None) -> list[float]:
    """Returns of :func:`eval_episodes`; with ``video_path`` (a file, or several), the first episode written there
    (:func:`write_video`; a missing folder is made)."""
    paths = [] if video_path is None else [video_path] if isinstance(video_path, (str, os.PathLike)) else \
        list(video_path)
    returns, frames = eval_episodes(agent, cfg, episodes, env_step, envs, video=bool(paths))
    for path in paths if frames else []:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_video(Path(path), frames)
    return returns


#: Where --video-every-eval and --keep-policies put each evaluation's video and policy, in the run's folder.
VIDEOS, POLICIES = "videos", "policies"


def eval_file(out: Path, kind: str, env_step: int) -> Path:
    """The video (``kind`` :data:`VIDEOS`) or policy (:data:`POLICIES`) of the evaluation at ``env_step`` in the run
    folder ``out``."""
    return out / kind / f"env_step_{env_step}{'.mp4' if kind == VIDEOS else '.pt'}"


class EvalThread:
    """The thread that runs a run's evaluations beside training (--eval-async), one after another. One thread for the
    whole run, because a MuJoCo rendering context stays with the thread that first used it: the evaluation
    environments (when they render in this process) must always be stepped from the same thread, the final
    evaluation's included."""

    def __init__(self):
        import queue
        import threading

        self._jobs: queue.Queue = queue.Queue()
        self._thread = threading.Thread(target=self._serve, name="rl_curl-eval", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            job.run()

    def submit(self, fn, env_step: int = 0, episode: int = 0, device: torch.device | None = None) -> "EvalJob":
        job = EvalJob(fn, env_step, episode, device)
        self._jobs.put(job)
        return job

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()


class EvalJob:
    """One evaluation on the :class:`EvalThread`: ``fn()`` gives the returns. On a GPU it acts on a CUDA stream of its
    own, which first waits for what the training stream has queued (the actor snapshot's copy). :meth:`result` waits
    and returns them, or raises what the evaluation raised."""

    def __init__(self, fn, env_step: int, episode: int, device: torch.device | None):
        import threading

        self.fn, self.env_step, self.episode, self.seconds = fn, env_step, episode, 0.0
        self._done = threading.Event()
        self._returns: list[float] | None = None
        self._error: BaseException | None = None
        self._stream = None
        if device is not None and device.type == "cuda":
            self._stream = torch.cuda.Stream(device)
            self._stream.wait_stream(torch.cuda.current_stream(device))

    def run(self) -> None:
        import contextlib

        t0 = time.perf_counter()
        try:
            with torch.cuda.stream(self._stream) if self._stream is not None else contextlib.nullcontext():
                self._returns = self.fn()
        except BaseException as err:  # noqa: BLE001 - raised again in result()
            self._error = err
        self.seconds = time.perf_counter() - t0
        self._done.set()

    def result(self) -> list[float]:
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._returns


class CurlApp(TrainingApp):
    """rl_curl's parts of the shared loop (:func:`shared_losses.training.loop.run`): one agent step per loop step (a
    random action during the seed steps, then an update and the policy's action), evaluations every ``eval_every``
    environment steps, checkpoints and stops only at episode ends."""

    name, logs, step_key = "rl_curl", ("log.csv", "eval.csv"), "env_step"
    checkpoint_format = CHECKPOINT_FORMAT  # the loop refuses a checkpoint of another agent layout
    stop_message = ("stopping at the end of the current episode and writing a checkpoint (Ctrl-C again to stop at "
                    "once, losing the steps since the last checkpoint)")

    def __init__(self, cfg: Config):
        super().__init__(RunHarness("rl_curl", cfg.output_dir, resume=cfg.resume, overwrite=cfg.overwrite,
                                    free=Config.RESUME_FREE))
        self.cfg, self.ar = cfg, cfg.action_repeat
        self.episode, self.next_ckpt, self.metrics, self.resumed = 0, cfg.checkpoint_every, {}, False
        self.step_episode = 0  # the episode of the last step taken (an evaluation after it is labelled with it)
        self.obs, self.ep_return, self.episode_ended, self.ckpt_due = None, 0.0, False, False
        self.ep_step = 0  # agent steps into the episode in progress
        self.ep_clock = time.perf_counter()  # when the episode in progress began (or this process took it up)
        self.open_episode: tuple[int, float] | None = None  # (steps, return) of a checkpoint's unfinished episode
        # a checkpoint follows this step (one is due, or a stop was asked for, as seen at the step's end): the
        # evaluation running in the background is collected first, so that eval.csv is whole at every checkpoint
        self.stop_seen = self.settling = False
        self.last_eval, self.finished_before = math.nan, False
        self.eval_envs: EvalEnvs | None = None
        self.graphed = None  # rl_curl.graphs.GraphedUpdate under --cuda-graphs, made at the first update
        self.graphed_act = None  # rl_curl.graphs.GraphedAct under --cuda-graphs, made at the first action
        self.background: EvalJob | None = None  # the evaluation running beside training (--eval-async)
        self.eval_thread: EvalThread | None = None
        self.background_seconds = 0.0
        self.finite_until = 0  # the environment step up to which every loss was seen finite
        self.checkpointed: int | None = None  # the environment step of the run's last checkpoint
        # Set by rl_curl.together (runs trained together, their updates as one): this run's seat there, and the torch
        # generator of its own random stream (policy noise and the update's draws), saved in its checkpoints.
        self.together = None
        self.generator: torch.Generator | None = None
        self.env_started = None  # an EnvWorker started ahead (rl_curl.together starts every run's at once)
        # Seconds spent in each part of this process's steps (summary.json's time_seconds; see --sync-timing).
        self.times = dict.fromkeys(TIMED_PARTS, 0.0)

    @property
    def recorded_options(self):
        return dataclasses.asdict(self.cfg)

    def compare_options(self, record):
        # a run recorded before a field existed trained with its old behaviour (Config.ADDED_FIELDS): the same run; any
        # other missing field is refused, naming it
        return Config.with_added_fields(record), self.recorded_options

    def missing_final_files(self, step: int) -> bool:
        """Whether a finished run asked again lacks the final evaluation's video or policy that --video-every-eval /
        --keep-policies now ask for (they are written without training or logging anything)."""
        env_step, out = step * self.ar, self.harness.out
        return (self.cfg.video_every_eval and not eval_file(out, VIDEOS, env_step).exists()) or \
            (self.cfg.keep_policies and not eval_file(out, POLICIES, env_step).exists())

    def check_resume(self, saved):
        # the loop has refused another agent layout or other options (naming the fields) before accelerate tries to
        # load models, optimisers or a replay of another shape
        cfg, out = self.cfg, self.harness.out
        if saved is None:
            return None
        if saved["step"] >= cfg.agent_steps and (out / "summary.json").exists() and not cfg.save_video and \
                not self.missing_final_files(saved["step"]):
            self.say_finished(saved["step"])
            return read_json_file(out / "summary.json", "run's summary")
        if saved["step"] > cfg.agent_steps:  # an unfinished run, stopped beyond the steps now asked for
            raise CheckpointError(f"{out}'s checkpoint is at environment step {saved['step'] * self.ar}, past "
                                  f"--env-steps {cfg.env_steps}: a run cannot be cut back; continue it with "
                                  f"--env-steps {saved['step'] * self.ar} or more (nothing was changed)")
        before = (saved.get("config") or {}).get("eval_episodes")
        if before is not None and before != cfg.eval_episodes:  # a free field, but eval.csv has no column for it
            warnings.warn(f"--eval-episodes {cfg.eval_episodes} differs from the run's {before}: eval.csv's rows from "
                          f"here on are means over {cfg.eval_episodes} episode(s), the earlier ones over {before}",
                          stacklevel=2)
        return None

    def say_finished(self, step: int) -> None:
        """The one line of a finished run given --resume again without a larger --env-steps (step: agent steps)."""
        print(f"{self.harness.out}: the run finished at environment step {step * self.ar} (--env-steps "
              f"{self.cfg.env_steps}): nothing to train; its summary follows (a larger --env-steps extends it)",
              flush=True)

    def build(self, saved):
        with BUILD_LOCK:  # runs built in threads side by side (rl_curl.together) seed the global generators in turn
            self._build()

    def _build(self):
        from accelerate.utils import set_seed

        from .replay import FrameReplay, ReplayCheckpoint

        cfg = self.cfg
        accelerator = make_accelerator(
            cpu=cfg.device == "cpu", mixed_precision=cfg.mixed_precision, report_to=cfg.report_to,
            one_process="rl_curl trains one agent per process on one device: run python -m rl_curl.train without "
                        "accelerate launch / torchrun, and launch several seeds with scripts/curl_table3.py")
        check_replay_memory(cfg, accelerator.device)
        self.harness.open(accelerator)
        self.accelerator = accelerator
        if cfg.torch_threads > 0:
            cores = usable_cpus()
            if cfg.torch_threads > cores:
                warnings.warn(f"--torch-threads {cfg.torch_threads} is more than the {cores} CPU cores this process "
                              "may use: the threads take turns, which is slower than one a core")
            torch.set_num_threads(cfg.torch_threads)
        else:
            threads_within_the_cpu_limit()
        if accelerator.device.type == "cuda":
            torch.backends.cudnn.benchmark = cfg.cudnn_benchmark
        set_seed(cfg.seed)
        self.env, self.agent = build(cfg, accelerator.device, self.env_started)
        if self.together is not None:
            # the stream a run alone draws from the device's default generator after building its agent
            dev = accelerator.device
            self.generator = torch.Generator(dev)
            self.generator.set_state(torch.get_rng_state() if dev.type == "cpu" else torch.cuda.get_rng_state(dev)
                                     if dev.type == "cuda" else torch.get_device_module(dev.type).get_rng_state())
        self.agent.autocast = accelerator.autocast
        if cfg.cuda_graphs and cfg.mixed_precision == "bf16" and accelerator.device.type == "cuda":
            # the same casts without autocast's cache of cast weights, whose tensors a captured graph must not keep
            import functools

            self.agent.autocast = functools.partial(torch.autocast, "cuda", dtype=torch.bfloat16, cache_enabled=False)
        self.obs_shape = self.env.observation_space.shape
        replay_seed, action_seed = stream_seeds(cfg.seed)
        try:
            self.replay = FrameReplay(cfg.replay_capacity, self.obs_shape, self.agent.action_dim, cfg.frame_stack,
                                      replay_seed, device=accelerator.device if cfg.replay_on_device else None)
        except MemoryError as err:  # the ring is reserved whole (written pages only take memory): refused at once
            reserve = address_space_room()
            why = (f"this process may reserve {reserve / 2**30:.1f} GiB more address space (ulimit -v)"
                   if reserve is not None else "the system refused the reservation")
            raise ValueError(f"--replay-capacity {cfg.replay_capacity}: the replay's whole ring could not be reserved "
                             f"({err}); {why}; lower --replay-capacity to what the run fills "
                             f"({replay_held(cfg):,} transitions) or raise the limit") from None
        self.action_rng = np.random.default_rng(action_seed)
        # --aux cpc reads the next K observations and actions of each sampled transition (no extra random draw)
        self.future_steps = cfg.cpc_steps if OBJECTIVES.get(cfg.aux).kind == "future" else 0
        register_named(accelerator, agent=self.agent, **self.agent.optimizers())
        if cfg.save_replay:  # its frames as files written once, linked from one checkpoint to the next
            register_named(accelerator, replay=ReplayCheckpoint(self.replay))
        self.harness.write_config(self.recorded_options)
        self.seed_until = cfg.seed_steps
        self.started, self.start_step = time.perf_counter(), 0
        self.cpu_started = time.thread_time()  # this thread's CPU time from here (summary.json's thread_cpu_seconds)
        cuda = accelerator.device.type == "cuda" and cfg.sync_timing
        self.sync = (lambda: torch.cuda.synchronize(accelerator.device)) if cuda else (lambda: None)

    def require_finite(self) -> None:
        """Stop the run, before anything more is written, if a loss has been NaN or infinite since the last look (the
        agent records it on the device; reading it is one sync, so it is read when logging or checkpointing)."""
        env_step = self.step * self.ar
        if self.together is not None:  # the agent from the runs' stacked update (what is read after this check)
            self.together.refresh()
        if self.agent.check_finite():
            self.finite_until = env_step
            return
        cfg = self.cfg
        kept = ("it has no checkpoint yet: lower the learning rates and start again (--overwrite moves this folder "
                "aside)" if self.checkpointed is None
                else f"its last checkpoint, at environment step {self.checkpointed}, is kept: lower the learning "
                     "rates and start again, or --resume continues from there")
        raise TrainingDiverged(
            f"training diverged: a loss became NaN or infinite between environment steps {self.finite_until} and "
            f"{env_step} ({rates_said(cfg)}, --encoder-lr {cfg.encoder_lr:g}, --alpha-lr {cfg.alpha_lr:g}); the run "
            f"stopped without writing a checkpoint ({kept})")

    def state(self):
        self.require_finite()  # never a checkpoint of a diverged agent
        if self.background is not None:  # train_step / evaluate collect it before any checkpoint (self.settling)
            raise RuntimeError("internal error: a checkpoint was asked for while an evaluation ran in the background")
        self.checkpointed = self.step * self.ar  # state() is asked for when a checkpoint is written
        state = {"format": CHECKPOINT_FORMAT, "step": self.step, "episode": self.episode, "next_ckpt": self.next_ckpt,
                 "action_rng": self.action_rng.bit_generator.state,
                 "metrics": {k: float(v) for k, v in self.metrics.items()},
                 "config": self.recorded_options,
                 # the episode in progress (the final checkpoint can fall mid-episode): replayed by an extension
                 "episode_step": self.ep_step if self.obs is not None else 0, "episode_return": float(self.ep_return)}
        if self.together is not None:
            self.together.sync()  # the optimisers' states of the stacked update into this run's optimisers
            state["torch_generator"] = self.generator.get_state().tolist()
            state["torch_generator_device"] = self.generator.device.type
        return state

    def restore_generator(self, saved: list[int], saved_device: str | None) -> None:
        """The run's own generator (runs trained together) as its checkpoint left it. A checkpoint written on
        another kind of device (a run trained on a GPU, continued on a CPU, or the other way) holds that device's
        generator state, which this one cannot take (a CUDA generator's is 16 bytes, a CPU one's 5,056): the stream
        cannot go on, so the generator is seeded from the run's seed and step, with a warning; the run continues,
        no longer as the uninterrupted one (its other random numbers do not cross devices either)."""
        here = self.generator.device.type
        other = saved_device not in (None, here) or (saved_device is None
                                                     and len(saved) != self.generator.get_state().numel())
        if not other:
            try:
                self.generator.set_state(torch.tensor(saved, dtype=torch.uint8))
                return
            except RuntimeError as err:
                raise CheckpointError(f"this checkpoint's random generator state cannot be restored ({err}): the "
                                      "file is damaged or was written by another version") from err
        warnings.warn(f"this run's checkpoint holds the random generator of another device "
                      f"({saved_device or f'a state of {len(saved)} bytes'}) than the one it continues on ({here}): "
                      f"its random stream cannot go on there, so it is seeded from the run's seed and step; the run "
                      "continues, but not as the uninterrupted run would", UserWarning, stacklevel=2)
        self.generator.manual_seed(self.cfg.seed * 1_000_003 + self.step)

    def load_state(self, state):
        self.step, self.episode, self.next_ckpt = state["step"], state["episode"], state["next_ckpt"]
        # the checkpoint's last step ended episode - 1, or fell inside the episode in progress
        self.step_episode = self.episode if state.get("episode_step", 0) > 0 else max(self.episode - 1, 0)
        self.action_rng.bit_generator.state = state["action_rng"]
        if self.generator is not None:
            if "torch_generator" not in state:
                raise CheckpointError("this checkpoint was written by a run trained alone (rl_curl.train): its random "
                                      "stream is the process's, not a generator of its own; continue it alone with "
                                      "`python -m rl_curl.train ... --resume`")
            self.restore_generator(state["torch_generator"], state.get("torch_generator_device"))
        # The latest value of each metric, for the next log row (see train_step); none while a resume without
        # the replay refills it (no updates then, so nothing new to log).
        self.metrics = state.get("metrics", {}) if self.cfg.save_replay else {}
        self.resumed, self.start_step = True, self.step
        if state.get("episode_step", 0) > 0 and self.cfg.save_replay:  # without the replay, no actions to replay
            self.open_episode = (int(state["episode_step"]), float(state["episode_return"]))
        self.finite_until = self.checkpointed = self.step * self.ar
        self.agent.set_capturable(False)  # the checkpoint's optimisers bring their own; --cuda-graphs sets it again
        # Seed steps are counted from the start of the run; a resume without the replay refills it first.
        if not self.cfg.save_replay:
            self.seed_until = self.step + self.cfg.seed_steps
        if self.step >= self.cfg.agent_steps:  # a finished run asked again (for its video): nothing is trained
            self.say_finished(self.step)
            return
        where = f"resuming at environment step {self.step * self.ar} from {self.harness.checkpoint_dir}"
        print(f"{where} (replay: {len(self.replay)} transitions restored)" if self.cfg.save_replay else
              f"{where} (replay not saved (--no-save-replay): refilled with --seed-steps {self.cfg.seed_steps} random "
              "actions, so the run is not the uninterrupted one)", flush=True)


    def continue_episode(self) -> None:
        """Bring the freshly reset environment to where the checkpoint's unfinished episode stopped: its stored
        actions, stepped again from the episode's seed. The replay already holds that episode's transitions, so
        nothing is stored; the last observation must equal the stored one (a simulation that does not repeat, e.g.
        another machine's MuJoCo build, restarts the episode instead, with a warning)."""
        steps, ret = self.open_episode
        self.open_episode = None
        replay = self.replay
        last = (replay.added - 1) % replay.capacity
        if steps <= min(replay.added, replay.capacity):
            first = replay.added - steps
            for j in range(steps):
                obs, *_ = self.env.step(replay.actions[(first + j) % replay.capacity])
            if np.array_equal(obs, replay.stacks(np.array([last]))[1][0]):
                self.obs, self.ep_return, self.ep_step = obs, ret, steps
                return
        warnings.warn(f"the episode in progress at the checkpoint (episode {self.episode}, {steps} agent steps in) "
                      "could not be replayed to its stored observation; it starts again from its first step")
        self.obs, _ = self.env.reset(seed=episode_seed(self.cfg, self.episode))
        self.replay.start_episode(self.obs)

    def total_steps(self):
        return self.cfg.agent_steps

    def log_resume_step(self):
        return self.step * self.ar

    def progress(self):
        cfg = self.cfg
        if cfg.env_steps % self.ar and self.step < cfg.agent_steps:
            warnings.warn(f"--env-steps {cfg.env_steps} is not a whole number of agent steps at action repeat "
                          f"{self.ar}: the run trains to environment step {cfg.agent_steps * self.ar}")
        if self.step < cfg.agent_steps <= self.seed_until:  # asked once, before the loop's first step
            warnings.warn(f"--seed-steps {cfg.seed_steps} covers every agent step left in this run (to step "
                          f"{cfg.agent_steps} = --env-steps {cfg.env_steps} / action repeat {self.ar}): every action "
                          "is random and no update is made; lower --seed-steps or raise --env-steps to train")
        first = max(self.step, self.seed_until)  # the first agent step left that updates
        for option, every, what in (("--actor-update-every", cfg.actor_update_every, "the actor (and alpha)"),
                                    ("--aux-update-every", cfg.aux_update_every, f"--aux {cfg.aux}")):
            if first < cfg.agent_steps and -(-first // every) * every >= cfg.agent_steps and (
                    option == "--actor-update-every" or cfg.aux != "none"):  # updates, at none of which it trains
                warnings.warn(f"{option} {every}: no update of {what} falls in this run's updates (agent steps "
                              f"{first} to {cfg.agent_steps - 1}, at the multiples of {every}), so it never trains; "
                              f"lower {option} or raise --env-steps")
        if cfg.crop_size >= cfg.image_size and cfg.aux != "none":
            warnings.warn(f"--crop-size {cfg.crop_size} equals --image-size {cfg.image_size}: every random crop is "
                          f"the whole frame, so --aux {cfg.aux} contrasts two identical views (no augmentation); "
                          "--image-size is the official --pre_transform_image_size (100), --crop-size the official "
                          "--image_size (84)")
        # agent steps (each --action-repeat environment steps), which --env-steps is not: said in the bar
        return tqdm(total=cfg.agent_steps, initial=self.step, disable=not cfg.progress, mininterval=bar_interval(),
                    desc=f"{cfg.task} {cfg.aux} (agent steps of {cfg.action_repeat} env steps)", unit=" agent step")

    def train_step(self):
        if self.step == 0 and self.cfg.eval_at_start:  # --eval-at-start: the untrained policy, before the first step
            return merge_rows(self.evaluate(), self.train_step_taken())
        return self.train_step_taken()

    def train_step_taken(self):
        """One agent step (act, store, update); its rows of log.csv."""
        cfg, agent, step = self.cfg, self.agent, self.step
        if self.obs is None:
            self.obs, _ = self.env.reset(seed=episode_seed(cfg, self.episode))
            self.ep_return, self.ep_step, self.ep_clock = 0.0, 0, time.perf_counter()
            if self.open_episode is not None:
                self.continue_episode()
            else:
                self.replay.start_episode(self.obs)
        times, clock = self.times, time.perf_counter
        if step < self.seed_until:
            action = self.action_rng.uniform(-1.0, 1.0, size=agent.action_dim).astype(np.float32)
        elif self.together is not None:  # the runs trained together act and update as one when they meet
            t0 = clock()
            # under --cuda-graphs the replay's indices (the batch is gathered inside the graph), else the batch
            batch = (self.replay.sample_indices(cfg.batch_size) if cfg.cuda_graphs
                     else self.replay.sample(cfg.batch_size, self.accelerator.device))
            t1 = clock()
            # this run's action (from its parameters before the update, its noise from its generator) and metrics
            action, metrics = self.together.update(batch, step, self.obs)
            self.metrics = {**self.metrics, **metrics}
            times["replay_sample"] += t1 - t0
            times["update"] += clock() - t1  # the meeting: its acting and update, and the wait for the other runs
        else:
            t0 = clock()
            if cfg.cuda_graphs and self.generator is None:  # the actor's pass replayed from a CUDA graph too
                if self.graphed_act is None:
                    from .graphs import GraphedAct

                    self.graphed_act = GraphedAct(agent)
                action = self.graphed_act.act(self.obs)
            else:
                action = agent.act(self.obs, sample=True, generator=self.generator)
            t1 = clock()
            if cfg.cuda_graphs:  # indices from the replay's generator; the batch is gathered inside the graph
                if self.graphed is None:
                    from .graphs import GraphedUpdate

                    self.graphed = GraphedUpdate(agent, self.replay, cfg.batch_size)
                idx = self.replay.sample_indices(cfg.batch_size)
                update = lambda: self.graphed.update(idx, step)  # noqa: E731
            else:
                batch = self.replay.sample(cfg.batch_size, self.accelerator.device, self.future_steps)
                update = lambda: agent.update(batch, step)  # noqa: E731
            self.sync()
            t2 = clock()
            # The latest value of every metric: the actor and alpha update every actor_update_every steps,
            # and a log row taking only the last update's would never show them when that one is odd.
            self.metrics = {**self.metrics, **update()}
            self.sync()
            t3 = clock()
            times["act"] += t1 - t0
            times["replay_sample"] += t2 - t1
            times["update"] += t3 - t2
        t0 = clock()
        next_obs, reward, terminated, truncated, _ = self.env.step(action)
        t1 = clock()
        self.replay.add(action, reward, next_obs, terminated)
        times["env"] += t1 - t0
        times["replay_add"] += clock() - t1
        self.obs, self.ep_return, self.step = next_obs, self.ep_return + reward, step + 1
        self.ep_step += 1
        env_step, rows = self.step * self.ar, []
        if self.metrics and crossed(env_step, self.ar, cfg.log_every):
            self.require_finite()
            metrics = {k: float(v) for k, v in self.metrics.items()}
            rows.append(LogRow({"env_step": env_step, "episode": self.episode, **metrics},
                               scalars={f"train/{k}": v for k, v in metrics.items()}))
        self.step_episode = self.episode  # the episode this step belongs to (an evaluation after it logs it)
        self.episode_ended = terminated or truncated
        self.settling = False
        if self.episode_ended:
            # TensorBoard only: a wall time would break log.csv's equality between a run and its resumed copy
            rows.append(LogRow({"env_step": env_step, "episode": self.episode, "episode_return": self.ep_return},
                               scalars={"train/episode_return": self.ep_return,
                                        "train/episode_seconds": time.perf_counter() - self.ep_clock}))
            self.episode += 1
            self.obs = None
            self.ckpt_due = cfg.checkpoint_every > 0 and env_step >= self.next_ckpt
            if self.ckpt_due:
                self.next_ckpt = (env_step // cfg.checkpoint_every + 1) * cfg.checkpoint_every
            # read once here: the loop's stop_requested() answers with it, so a stop that arrives later in the step
            # waits for the next episode's end instead of finding an evaluation still running
            self.stop_seen = self.harness.stop.requested
            self.settling = self.ckpt_due or (self.stop_seen and self.step < cfg.agent_steps)
            if self.settling:
                rows += self.finish_background_eval()
        return rows  # a row of the update's metrics every log_every steps, one per finished episode (log.csv)

    def eval_due(self):
        return crossed(self.step * self.ar, self.ar, self.cfg.eval_every) and self.step < self.cfg.agent_steps

    def evaluate(self, final: bool = False):
        self.require_finite()  # a diverged policy would act with NaN
        cfg, env_step = self.cfg, self.step * self.ar
        episode = self.step_episode  # the final evaluation too: the episode its last step ended or is in
        rows = self.finish_background_eval()  # eval.csv stays in order of steps
        video = self.videos(env_step, final)
        if cfg.keep_policies and self.harness.is_main:  # the weights this evaluation acts with (before training on)
            self.keep_policy(env_step)
        t0 = time.perf_counter()
        if self.eval_envs is None or self.eval_envs.episodes != cfg.eval_episodes:
            if self.eval_envs is not None:
                self.eval_envs.close()
            self.eval_envs = EvalEnvs(cfg, cfg.eval_episodes, cfg.eval_parallel, cfg.eval_worker)
        envs, dev = self.eval_envs, self.accelerator.device
        if cfg.eval_async and self.eval_thread is None:
            self.eval_thread = EvalThread()
        if cfg.eval_async and not final:
            policy = ActorSnapshot(self.agent)
            self.background = self.eval_thread.submit(
                lambda: evaluate(policy, cfg, cfg.eval_episodes, video, env_step=env_step, envs=envs), env_step,
                episode, dev)
            self.times["eval"] += time.perf_counter() - t0
            if self.settling:  # a checkpoint follows this step: it waits for this evaluation
                rows += self.finish_background_eval()
            return rows
        if cfg.eval_async:  # the final one, on the same thread (its environments' rendering stays there)
            returns = self.eval_thread.submit(
                lambda: evaluate(self.agent, cfg, cfg.eval_episodes, video, env_step=env_step, envs=envs),
                device=dev).result()
        else:
            returns = evaluate(self.agent, cfg, cfg.eval_episodes, video, env_step=env_step, envs=envs)
        seconds = time.perf_counter() - t0
        self.times["eval"] += seconds
        return rows + [self.eval_row(env_step, episode, returns, seconds)]  # eval.csv, not the training log

    def videos(self, env_step: int, final: bool) -> list[Path]:
        """Where the evaluation at ``env_step`` writes its first episode: eval.mp4 for the final one with --save-video,
        videos/env_step_N.mp4 with --video-every-eval."""
        out = self.harness.out
        return ([out / "eval.mp4"] if final and self.cfg.save_video else []) + \
            ([eval_file(out, VIDEOS, env_step)] if self.cfg.video_every_eval else [])

    def keep_policy(self, env_step: int) -> None:
        """--keep-policies: the agent's policy now, as the evaluation at ``env_step``'s file (policy.pt's format)."""
        from .policy import save_policy

        path = eval_file(self.harness.out, POLICIES, env_step)
        path.parent.mkdir(parents=True, exist_ok=True)
        save_policy(self.agent, self.cfg, self.obs_shape, path, env_step=env_step)

    def eval_row(self, env_step: int, episode: int, returns: list[float], seconds: float) -> LogRow:
        """An evaluation's row of eval.csv: the mean, population std, lowest and highest of its episodes' returns
        (TensorBoard's eval/return, eval/return_std, eval/return_min, eval/return_max; the official code's
        eval/best_episode_reward is eval/return_max), and its wall ``seconds`` as TensorBoard's eval/seconds only
        (the official eval/eval_time; a time in eval.csv would make a run and its resumed copy differ)."""
        row = {"env_step": env_step, "episode": episode, "eval_return_mean": float(np.mean(returns)),
               "eval_return_std": float(np.std(returns)), "eval_return_min": float(np.min(returns)),
               "eval_return_max": float(np.max(returns))}
        self.last_eval = row["eval_return_mean"]
        return LogRow(row, "eval.csv", {**{tag: row[column] for column, tag in EVAL_TAGS.items()},
                                        "eval/seconds": seconds})

    def finish_background_eval(self) -> list[LogRow]:
        """Wait for the evaluation running in the background (--eval-async), if any; its row."""
        bg, self.background = self.background, None
        if bg is None:
            return []
        t0 = time.perf_counter()
        returns = bg.result()
        self.times["eval"] += time.perf_counter() - t0  # the wait only; its own time is eval_background
        self.background_seconds += bg.seconds
        return [self.eval_row(bg.env_step, bg.episode, returns, bg.seconds)]

    def postfix(self):
        return {} if math.isnan(self.last_eval) else {"eval_return": f"{self.last_eval:.1f}"}

    def can_checkpoint(self):  # between episodes: a resumed run starts the next episode from its seed
        return self.episode_ended

    def checkpoint_due(self):
        return self.ckpt_due

    def stop_requested(self):  # as seen at the end of the step's episode (train_step)
        return self.stop_seen

    def where(self):
        return f"environment step {self.step * self.ar}"

    def close(self):
        self.env.close()
        if self.eval_envs is not None:
            envs, self.eval_envs = self.eval_envs, None
            if self.eval_thread is not None:  # closed on the thread their rendering contexts belong to
                self.eval_thread.submit(lambda: envs.close() or []).result()
            else:
                envs.close()
        if self.eval_thread is not None:
            self.eval_thread.close()  # after the evaluation it may still run (a run that stopped by an error)
            self.eval_thread = None

    def finish(self):
        out, last = self.harness.out, self.harness.csv("eval.csv").last
        # Resuming a finished run (nothing left to train): its final evaluation and checkpoint are already written.
        self.finished_before = (self.resumed and self.step == self.start_step >= self.cfg.agent_steps
                                and last is not None and float(last["env_step"]) == self.step * self.ar)
        if self.finished_before:
            self.last_eval = float(last["eval_return_mean"])
            env_step = self.step * self.ar
            videos = self.videos(env_step, final=True)
            if videos:  # the final evaluation's first episode, without logging it again
                evaluate(self.agent, self.cfg, 1, videos, env_step=env_step)
            kept = self.cfg.keep_policies and not eval_file(out, POLICIES, env_step).exists()
            if kept:
                self.keep_policy(env_step)
            written = [str(v) for v in videos] + ([str(eval_file(out, POLICIES, env_step))] if kept else [])
            if written and self.harness.is_main:
                print(f"wrote the final evaluation's {', '.join(written)}", flush=True)
        else:
            self.log(self.evaluate(final=True))
            self.harness.checkpoint(self.state())
            video = out / "eval.mp4"
            if self.resumed and not self.cfg.save_video and video.exists() and self.harness.is_main:
                print(f"note: {video} is a video of this run from before environment step "
                      f"{self.start_step * self.ar}, where this part resumed; this part wrote none (--save-video "
                      "writes the final evaluation's)", flush=True)

    def export(self):
        from .curve import plot_curve
        from .objectives import label
        from .policy import POLICY_FILE, save_policy

        out, cfg = self.harness.out, self.cfg
        # the trained policy alone (load_policy)
        save_policy(self.agent, cfg, self.obs_shape, out / POLICY_FILE, env_step=self.step * self.ar)
        plot_curve(out / "eval.csv", out / "curve.png", title=f"{cfg.task}: {label(dataclasses.asdict(cfg))}, seed "
                   f"{cfg.seed}\neach point: the mean return of {cfg.eval_episodes} evaluation episode"
                   f"{'s' if cfg.eval_episodes != 1 else ''}")

    def summary(self):
        out, cfg = self.harness.out, self.cfg
        if self.finished_before and (out / "summary.json").exists():  # only the video was asked for: it stays
            return read_json_file(out / "summary.json", "run's summary")
        # The wall time of this process's part of the run (training, evaluations and checkpoints): a resumed
        # run counts from train_from_env_step, the step it resumed at.
        total = time.perf_counter() - self.started
        times = {k: round(v, 2) for k, v in self.times.items()}
        times["other"] = round(total - sum(self.times.values()), 2)  # checkpoints, logs, the loop, start-up
        if self.cfg.eval_async:  # beside training: not a part of the step's time
            times["eval_background"] = round(self.background_seconds, 2)
        return {"task": cfg.task, "aux": cfg.aux, "tau_plus": cfg.tau_plus, "positives": cfg.positives,
                "update": cfg.update, "seed": cfg.seed, "env_steps": self.step * self.ar,
                "final_eval_return": self.last_eval, "train_seconds": round(total, 1),
                "train_from_env_step": self.start_step * self.ar,
                "env_steps_per_second": (round((self.step - self.start_step) * self.ar / total, 1) if total > 0
                                         else None),
                "time_seconds": times, "time_synced": bool(self.cfg.sync_timing),
                # The CPU time of the thread that trained the run, over the same span: its steps' host work (the
                # environment's pipe, the replay, logs, checkpoints, evaluations made in it) and the meetings it made
                # for runs trained together; not torch's other threads, worker processes or background evaluations.
                # Runs trained together share one interpreter, so their threads' sum bounds how fast the group steps.
                "thread_cpu_seconds": round(time.thread_time() - self.cpu_started, 2),
                # torch's CPU threads as the run ended (--torch-threads 0: what torch chose from the cores this
                # process may use): the order of a CPU run's sums, so the last digits of its losses, depend on it
                "torch_threads": torch.get_num_threads(),
                **gpu_memory(self.accelerator.device)}


def gpu_memory(device: torch.device) -> dict:
    """This process's peak GPU memory (GiB): what its tensors held at most (``max_memory_allocated``) and what
    PyTorch's caching allocator kept from the GPU (``max_memory_reserved``: what other runs sharing the GPU could not
    use). None off a CUDA device."""
    if device.type != "cuda":
        return {"gpu_peak_allocated_gib": None, "gpu_peak_reserved_gib": None}
    return {"gpu_peak_allocated_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 3),
            "gpu_peak_reserved_gib": round(torch.cuda.max_memory_reserved(device) / 2**30, 3)}


def crossed(env_step: int, action_repeat: int, every: int) -> bool:
    """Whether the agent step that ended at ``env_step`` crossed a multiple of ``every`` environment steps."""
    return env_step // every != (env_step - action_repeat) // every


def run(cfg: Config) -> dict:
    """Train (or resume) one run; returns a summary with the final evaluation. The caller's torch settings are given
    back (--torch-threads and --cudnn-benchmark set the run's: a later run in the same process would take them over;
    :func:`~shared_losses.training.runtime.torch_settings_given_back`)."""
    with torch_settings_given_back():
        return run_app(CurlApp(cfg.resolved()))


def main(argv=None) -> None:
    cfg = from_cli(argv)
    summary = run(cfg)
    print_run_result("rl_curl", cfg.resolved().output_dir, summary["env_steps"], summary)


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
