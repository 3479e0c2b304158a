"""Configuration of a CURL run: one dataclass, parsed with tyro (:func:`shared_losses.training.cli.parse_dataclass`)
so ``--help`` documents itself.

Per-task settings (action repeat, learning rate) live in :data:`rl_curl.tasks.TASK_DEFAULTS` as data; a field
left at ``None`` takes the task's value (the CURL paper's settings, Srinivas, Laskin & Abbeel 2020,
appendix hyper-parameter tables, and the official MishaLaskin/curl code).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from shared_losses.training.cli import check_field_types, check_preset_applied, config_from_cli, option_given
from shared_losses.training.cli import preset_config as _preset_config

from .objectives import FUSED_FOLDER, OBJECTIVES, AuxName, folder_name
# the per-task defaults live in rl_curl.tasks (torch-free, for the environment's worker processes); importable here too
from .tasks import DEFAULT_ACTION_REPEAT, DEFAULT_LR, TASK_DEFAULTS, task_default  # noqa: F401

# The small-network protocol of the CPU runs (docs/results/rl_curl.md, "Auxiliary losses on cartpole-swingup, CPU,
# 5 seeds" and the sections after it): 64 -> 56 px renders, 16 filters, hidden 256, batch 64, one torch thread per run.
_SMALL = dict(image_size=64, crop_size=56, num_filters=16, hidden_dim=256, batch_size=64, seed_steps=100,
              torch_threads=1)
#: Protocol presets (``--preset NAME``): the fields each one sets; options given explicitly win.
PRESETS: dict[str, dict] = {
    # The CPU protocol, fixed before its runs: 24k environment steps, evaluation (3 episodes) every
    # 4k; the score is the evaluation at 24k steps. About 8-13 minutes a run on one thread (cartpole-swingup).
    "cpu": dict(_SMALL, env_steps=24_000, eval_every=4000, eval_episodes=3, replay_capacity=24_000, log_every=2000,
                checkpoint_every=8000),
    # scripts/demo_rl_curl.sh: a few minutes of the same small networks, with an evaluation video.
    "demo": dict(_SMALL, env_steps=4000, eval_every=2000, eval_episodes=2, replay_capacity=10_000, log_every=400,
                 checkpoint_every=2000, save_video=True),
}
PresetName = Literal[tuple(PRESETS)]

@dataclass
class Config:
    """Train SAC + CURL (or the debiased, hard-negative or CPC auxiliary loss) on a DeepMind Control task from
    pixels."""

    #: Fields a resumed run may change; every other field must match the run's (its checkpoint's recorded options).
    #: preset: only a name; the fields it set are compared one by one.
    RESUME_FREE: ClassVar[frozenset] = frozenset({
        "output_dir", "resume", "overwrite", "progress", "save_video", "env_steps", "eval_every", "eval_episodes",
        "log_every", "checkpoint_every", "device", "torch_threads", "replay_on_device", "cudnn_benchmark", "preset",
        "report_to", "eval_parallel", "sync_timing", "cuda_graphs", "eval_async", "cudnn_conv_relu", "env_worker",
        "eval_worker", "keep_policies", "video_every_eval", "eval_at_start", "video_size"})

    #: The official CURL train.py's flags that have no option of the same name here, and what gives the same
    #: (docs/rl_curl.md, "Coming from the official code's flags"): named in one line instead of tyro's box.
    OTHER_NAMES: ClassVar[dict] = {
        "--objective": "--aux (the loss beside SAC's: none, curl, debiased, hard or cpc; --objective is nlp_qt's and "
                       "fewshot's name for theirs)",
        "--domain-name": "--task DOMAIN-TASK (e.g. --task cartpole-swingup)",
        "--task-name": "--task DOMAIN-TASK (e.g. --task cartpole-swingup)",
        "--pre-transform-image-size": "--image-size (the render size)",
        "--replay-buffer-capacity": "--replay-capacity",
        "--init-steps": "--seed-steps (agent steps, as the official --init_steps)",
        "--num-train-steps": "--env-steps, in environment steps (agent steps x action repeat)",
        "--eval-freq": "--eval-every, in environment steps (agent steps x action repeat)",
        "--num-eval-episodes": "--eval-episodes",
        "--actor-beta": "--actor-beta1 (it sets the critic's too unless --critic-beta1 is given)",
        "--critic-beta": "--critic-beta1",
        "--alpha-beta": "--alpha-beta1",
        "--actor-log-std-min": "--log-std-min",
        "--actor-log-std-max": "--log-std-max",
        "--actor-update-freq": "--actor-update-every",
        "--critic-target-update-freq": "--target-update-every",
        "--encoder-feature-dim": "--feature-dim",
        "--curl-latent-dim": "nothing (unused by the official code too: W is --feature-dim x --feature-dim)",
        "--encoder-type": "nothing: the encoder is always the pixel one",
        "--work-dir": "--output-dir (an existing run is refused, not overwritten)",
        "--save-tb": "nothing: TensorBoard is on by default (--report-to)",
        "--save-buffer": "nothing: the replay is in every checkpoint by default (--save-replay)",
        "--save-model": "--keep-policies (every evaluation's policy)",
        "--log-interval": "--log-every, in environment steps",
    }
    #: An option this configuration has under the name the official code gives another meaning: a warning.
    SAME_NAME_OTHER_MEANING: ClassVar[dict] = {
        "--save_video": "the final evaluation's video only here (eval.mp4); the official --save_video, one video per "
                        "evaluation, is --video-every-eval",
        "--image_size": "the render size here (the official --pre_transform_image_size); the official --image_size, "
                        "the random crop, is --crop-size",
    }

    #: Fields added after runs were recorded without them, with the value those runs trained with: a record that lacks
    #: one is read with it (a resume, a grid counting a finished run), so older runs stay the same runs.
    ADDED_FIELDS: ClassVar[dict] = {"detach_encoder": False, "eval_at_start": False, "actor_lr": None,
                                    "critic_lr": None, "critic_beta1": None}

    @classmethod
    def with_added_fields(cls, record):
        """``record`` (a run's recorded options) with :attr:`ADDED_FIELDS` it lacks filled in."""
        return {**cls.ADDED_FIELDS, **record} if isinstance(record, dict) else record

    task: str = "cartpole-swingup"
    """DeepMind Control task as domain-task, e.g. cartpole-swingup, walker-walk, ball_in_cup-catch; or gym:ENV_ID for
    any gymnasium environment with a bounded continuous action space (rendered to pixels)."""
    seed: int = 0
    """Random seed (networks, replay sampling, crops, random actions, environment episodes)."""
    output_dir: str = ""
    """Directory for config.json, log.csv, eval.csv, TensorBoard events, checkpoint/, curve.png, videos (empty =
    runs/rl_curl/TASK/OBJECTIVE/seedSEED, OBJECTIVE naming the variant: curl, debiased-tau0.05, debiased-tau0.1-M2,
    hard-tau0.1-beta1, ..., with -notanh appended under --no-encoder-tanh and -fused under --update fused). A folder
    that holds a run is continued only with --resume and moved aside (never deleted) only with --overwrite; a non-empty
    folder that holds no run is refused."""

    preset: Optional[PresetName] = None
    """A protocol preset (rl_curl.config.PRESETS, listed above with the options each sets): its values become the
    defaults, options given explicitly win (in Python: rl_curl.config.preset_config(NAME, ...)). cpu: the
    small-network CPU protocol of docs/results/rl_curl.md (24k environment steps); demo: scripts/demo_rl_curl.sh's
    few minutes."""

    # --- auxiliary objective -------------------------------------------------------------------
    aux: AuxName = "curl"
    """Auxiliary loss: one of the objectives listed above (rl_curl.objectives.OBJECTIVES)."""
    tau_plus: float = 0.0
    """Class prior tau+ of the debiased / hard losses (DCL Table 3 uses 0.01, 0.05, 0.1); 0 = no debiasing."""
    positives: int = 1
    """M, the number of positives per anchor: 1 (one augmented key view) or 2 (two augmented key views)."""
    beta: float = 1.0
    """Concentration beta of the hard-negative loss (aux=hard); 0 recovers the debiased loss."""
    cpc_steps: int = 3
    """aux=cpc: observations predicted ahead, k = 1..K, each from the present one and the actions between."""
    log_floor: Literal["min-negative", "none"] = "min-negative"
    """Floor on g for the unbounded bilinear scores: min-negative = each anchor's smallest negative logit (detached),
    none = only g >= 0."""
    subtract_row_max: bool = True
    """Subtract each row's max from the bilinear logits (official CURL code; leaves every loss here unchanged)."""

    # --- environment ---------------------------------------------------------------------------
    action_repeat: int | None = None
    """Action repeat; None = the task's value (8 cartpole; 2 finger, walker; 4 cheetah, reacher, ball_in_cup; 4 other
    DMC tasks; 1 gym: environments)."""
    frame_stack: int = 3
    """Number of stacked RGB frames in an observation."""
    camera_id: int = 0
    """Camera of the DeepMind Control renders: 0 for every task, as the official CURL code (dmc2gym's default); DrQ and
    later work use 2 for quadruped. -1 is MuJoCo's free camera. Not used by gym: environments."""
    image_size: int = 100
    """Rendered frame size (pixels, square): the official code's --pre_transform_image_size (100), not its
    --image_size. The random crops of --crop-size are taken from it, so it must be larger than --crop-size for the crops
    to differ: at --crop-size every crop is the whole frame and CURL's two views are the same image (warned of)."""
    crop_size: int = 84
    """Random-crop size fed to the encoder (centre crop when acting): the official code's --image_size (84); our
    --image-size is the official --pre_transform_image_size (the render size, 100)."""
    env_steps: int = 100_000
    """Total environment steps (= agent steps x action repeat) to train for."""
    seed_steps: int = 1000
    """Agent steps of uniformly random actions before updates start."""

    # --- replay and updates --------------------------------------------------------------------
    replay_capacity: int = 100_000
    """Replay capacity in transitions (each rendered frame stored once, uint8)."""
    replay_on_device: bool = False
    """Keep the replay's frames on the training device (GPU memory: about 3.3 GB per 100k transitions of 100x100), so
    sampling moves no frames from the host. Same batches either way."""
    batch_size: int = 128
    """Batch size of every update (official script: 128 for cartpole; the CURL paper's table: 512)."""
    discount: float = 0.99
    """Discount factor gamma."""
    lr: float | None = None
    """Actor and critic learning rate (the official --actor_lr and --critic_lr, which its scripts set alike); None =
    the task's value (2e-4 cheetah, else 1e-3). The critic's Adam covers its encoder too (convolutions, linear layer,
    LayerNorm), so the critic's loss trains the encoder at this rate; the actor's covers its own linear layer,
    LayerNorm and MLP. --actor-lr / --critic-lr set one of the two apart."""
    actor_lr: float | None = None
    """The actor's learning rate where it differs from the critic's (the official --actor_lr); None = --lr."""
    critic_lr: float | None = None
    """The critic's learning rate (its Q networks and the encoder, through the critic's loss) where it differs from the
    actor's (the official --critic_lr); None = --lr. --update fused weighs the auxiliary gradient by --encoder-lr over
    this rate."""
    encoder_lr: float | None = None
    """Learning rate of the auxiliary (CURL) update, the official --encoder_lr: its two Adams, the encoder's (the
    critic's convolutions, linear layer and LayerNorm) and the auxiliary one (W, or CPC's maps, with the encoder
    again), as the official encoder_optimizer and cpc_optimizer. None = the task's value: 2e-4 for cheetah, as the CURL
    paper's table (one rate for encoder, policy and Q function; the official scripts/run_cheetah.sh sets the three to
    one value in every run of its sweep), else 1e-3. Refused with --aux none, which has no auxiliary update."""
    alpha_lr: float = 1e-4
    """Learning rate of the entropy temperature."""
    alpha_beta1: float = 0.5
    """Adam beta1 of the temperature optimiser."""
    actor_beta1: float = 0.9
    """Adam beta1 of the actor and critic optimisers (the official --actor_beta; the critic's unless --critic-beta1 is
    given; the encoder and auxiliary optimisers keep Adam's default 0.9, as in the official code)."""
    critic_beta1: float | None = None
    """Adam beta1 of the critic's optimiser where it differs from the actor's (the official --critic_beta); None =
    --actor-beta1."""
    init_temperature: float = 0.1
    """Initial entropy temperature alpha."""
    critic_tau: float = 0.01
    """Soft target update rate of the target Q networks."""
    encoder_tau: float = 0.05
    """Soft update rate of the target (momentum key) encoder."""
    actor_update_every: int = 2
    """Update the actor and alpha every this many agent steps."""
    target_update_every: int = 2
    """Soft-update the targets every this many agent steps."""
    aux_update_every: int = 1
    """Update the auxiliary loss every this many agent steps (not with --aux none, which has no auxiliary update)."""

    # --- network sizes -------------------------------------------------------------------------
    num_filters: int = 32
    """Filters of each encoder conv layer."""
    num_layers: int = 4
    """Encoder conv layers (3x3; stride 2 then 1)."""
    feature_dim: int = 50
    """Encoder output features (also the size of the bilinear W: feature_dim x feature_dim)."""
    encoder_tanh: bool = True
    """tanh on the encoder's LayerNorm output (the CURL paper's text; docs/equations.md section 7). The official
    MishaLaskin/curl code leaves it out (its actor and critic encoders use output_logits=True): --no-encoder-tanh
    matches that code update for update (scripts/check_official_curl.py)."""
    hidden_dim: int = 1024
    """Hidden width of the actor and critic MLPs."""
    detach_encoder: bool = False
    """The critic's loss does not train the convolutions: its gradient stops at the conv features (the encoder's linear
    layer and LayerNorm still learn from it), so only the auxiliary loss trains them (with --aux none, nothing does).
    The official code's --detach_encoder, off by default there too."""
    update: Literal["official", "fused"] = "official"
    """The update's schedule. official: MishaLaskin/curl's (critic step, then actor, targets and the auxiliary loss on a
    fresh pass of the critic's crop). fused: shares conv passes (one online pass of the critic's crop feeds the critic
    loss, the auxiliary anchors and, detached, the actor; the target encoder's pass of next_obs also gives the next
    action; one backward for critic + auxiliary loss): about half the convolution work, a different schedule
    (docs/rl_curl.md, "The fused update")."""
    log_std_min: float = -10.0
    """Lower bound of the actor's log standard deviation."""
    log_std_max: float = 2.0
    """Upper bound of the actor's log standard deviation."""

    # --- evaluation, logging, checkpoints ------------------------------------------------------
    eval_every: int = 10_000
    """Evaluate every this many environment steps (and at the end)."""
    eval_at_start: bool = False
    """Evaluate also at environment step 0, before the first step (the untrained policy; the official code's first
    evaluation): a row of eval.csv at env_step 0 and the point a learning curve starts from. Training is the same
    with or without it."""
    eval_episodes: int = 10
    """Episodes per evaluation (deterministic policy: the mean action). They run side by side, one environment each,
    and the policy acts on all of them in one batched forward pass per step."""
    env_worker: bool = False
    """Step the training environment in a worker process of its own (started once per run): the same environment and
    observations; what runs trained together in one process (rl_curl.together, where it is on by default) need to
    step their environments side by side."""
    eval_worker: bool = False
    """Step the evaluation's environments in one worker process of their own (one after another there, as in this
    process; started once per run): the same returns; what runs trained together need (rl_curl.together, where it is
    on by default) so that their evaluations run side by side. --eval-parallel (a process per episode) comes first."""
    eval_parallel: bool = False
    """Step the evaluation's environments in worker processes (one per episode, started once per run), so that their
    physics and rendering use several CPU cores: the same returns as in this process, faster where cores are free
    (a GPU machine), only more memory on a laptop."""
    eval_async: bool = False
    """Evaluate in the background while training goes on: a copy of the actor at the evaluation's step plays the
    episodes in a thread (its environments in worker processes with --eval-parallel, which is where it pays), and
    its row is written to eval.csv when the next evaluation starts, a checkpoint is written (which waits for it) or
    the run ends. The same returns as evaluating in turn (the policy does not change, nor does training)."""
    log_every: int = 1000
    """Write training losses to CSV/TensorBoard every this many environment steps."""
    checkpoint_every: int = 10_000
    """Write an atomic checkpoint at the first episode end after every this many environment steps (0 = only at the
    end)."""
    save_replay: bool = True
    """Include the replay buffer in checkpoints (needed for an exact resume; about 3.3 GB at 100k transitions of
    100x100)."""
    resume: bool = False
    """Continue the run in --output-dir from its checkpoint (refused with a clear error if it is from another
    configuration; a finished run is left as it is; a missing or empty folder starts a new run)."""
    overwrite: bool = False
    """Move the run already in --output-dir aside (to OUTPUT_DIR.replaced-<time>, never deleted) and start a new one
    there."""
    save_video: bool = False
    """Write an MP4 of the first episode of the final evaluation (eval.mp4)."""
    video_every_eval: bool = False
    """Write an MP4 of the first episode of every evaluation, as videos/env_step_N.mp4 (N: the evaluation's
    environment step; the final evaluation's included), as the official CURL's --save_video does."""
    video_size: int | None = 256
    """The side of a video's frames in pixels (--save-video, --video-every-eval): the first evaluation episode
    rendered again from the observation's camera at this size (256: the official CURL's videos; at most 480 for
    DeepMind Control, the offscreen buffer of its tasks). None: the observations' own frames (--image-size), no
    second rendering. Training and the returns are the same either way."""
    keep_policies: bool = False
    """Keep the policy of every evaluation, as policies/env_step_N.pt (the final evaluation's included; policy.pt's
    format, a few MB each at the default sizes): rl_curl.load_policy and `rl_curl.evaluate --policy` read them, to
    choose an evaluation's policy or study them after training. policy.pt is the final one either way."""
    device: Literal["auto", "cpu"] = "auto"
    """auto = the accelerator's device (GPU if present), cpu = force CPU."""
    cudnn_benchmark: bool = True
    """On a CUDA device, let cuDNN time its convolution algorithms once per input shape and keep the fastest
    (torch.backends.cudnn.benchmark; the shapes here are fixed, so the search is paid once). No effect on CPU."""
    cuda_graphs: bool = False
    """Run each update as a CUDA graph (rl_curl.graphs): the same update on the same batches, launched as one graph
    instead of about two thousand small operations, with the batch gathered on the GPU and no value read on the host
    during it. Needs --replay-on-device. The training action (the actor's pass on one observation) is replayed from a
    graph too, checked once against the eager pass when recorded (rl_curl.graphs.GraphedAct). On a CPU the same code
    runs without graphs (equal to the default update and action bit for bit)."""
    cudnn_conv_relu: bool = False
    """On a CUDA device, each convolution of the encoders with its bias and ReLU as one cuDNN kernel
    (torch.cudnn_convolution_relu) instead of PyTorch's three (the convolution, then the bias added, then the ReLU,
    each reading and writing the activation); the backward is autograd's own for the two (rl_curl.networks.ConvReLU).
    The same update within float rounding: scripts/bench_curl_gpu.py's self-test compares it with the default on the
    GPU. On a CPU it is the default computation, bit for bit."""
    mixed_precision: Literal["no", "bf16"] = "no"
    """Mixed precision (bf16 autocast through accelerate) of the forward passes; losses are float32 inside."""
    report_to: tuple[Literal["tensorboard", "wandb", "mlflow", "none"], ...] = ("tensorboard",)
    """Where the training scalars go besides log.csv: tensorboard (tb/ in the run folder), wandb, mlflow (through
    accelerate's trackers; their usual environment variables apply, e.g. WANDB_MODE=offline,
    MLFLOW_TRACKING_URI), or none. Several may be given."""
    progress: bool = True
    """Show a tqdm progress bar."""
    torch_threads: int = 0
    """CPU threads for torch (0 = torch's default, from the cores this process may use, no more than its cgroup's
    CPU quota (a container's --cpus); summary.json's torch_threads says how many); 1 avoids thrashing when other
    jobs share few cores. A CPU run's result depends on it in its last digits (the order of the sums): repeat a run
    with the same count."""
    sync_timing: bool = False
    """Wait for the GPU at the end of each timed part of a step, so that summary.json's time_seconds puts the GPU's
    time where it is spent (updates) rather than where the host next waits for it (acting). Slows a CUDA run a little
    (the environment no longer steps while the update runs); no effect on CPU."""

    def objective_name(self) -> str:
        """The auxiliary objective with the settings that tell its variants apart, as a folder name:
        curl, none, debiased-tau0.05, debiased-tau0.1-M2, hard-tau0.1-beta1 ..."""
        return folder_name(self.aux, self.tau_plus, self.positives, self.beta, self.cpc_steps, self.log_floor)

    @property
    def obs_shape(self) -> tuple[int, int, int]:
        """The observations' shape, ``(3 * frame_stack, image_size, image_size)``, as every pixel environment
        of :mod:`rl_curl.env` gives them (known without building the environment)."""
        return (3 * self.frame_stack, self.image_size, self.image_size)

    def resolved(self) -> "Config":
        """A copy with the per-task defaults filled in and every field checked."""
        check_field_types(self)
        check_preset_applied(self, PRESETS, "rl_curl.config.preset_config(NAME, task=..., ...)")
        c = dataclasses.replace(self)
        if c.action_repeat is None:
            c.action_repeat = int(task_default(c.task, "action_repeat"))
        if not c.output_dir:
            task_dir = c.task.replace("gym:", "gym-").replace(":", "-").replace("/", "-")
            variant = (c.objective_name() + ("" if c.encoder_tanh else "-notanh")
                       + (FUSED_FOLDER if c.update == "fused" else ""))
            c.output_dir = f"runs/rl_curl/{task_dir}/{variant}/seed{c.seed}"
        if c.lr is None:
            c.lr = float(task_default(c.task, "lr"))
        if c.encoder_lr is None:
            c.encoder_lr = float(task_default(c.task, "encoder_lr"))
        c.validate()
        return c

    def validate(self) -> None:
        """Refuse impossible values (a ValueError of one line naming the option) before anything is built or written."""
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise ValueError(f"invalid config: {msg}")

        from shared_losses.training.runtime import MAX_THREADS, check_seed

        check_field_types(self)
        need(self.seed != -1, "--seed must be a whole number in [0, 2**32), got -1: the official code's -1 (a seed "
             "drawn at random) is not taken; give the seed, e.g. --seed $RANDOM, so that the run's folder, config.json "
             "and --resume name it")
        check_seed(self.seed)
        need(self.positives in (1, 2), f"positives must be 1 or 2, got {self.positives}")
        need(0.0 <= self.tau_plus < 1.0, f"tau_plus must be in [0, 1), got {self.tau_plus}")
        need(math.isfinite(self.beta) and self.beta >= 0.0,
             f"--beta must be a finite number >= 0 (0 = the debiased loss), got {self.beta}")
        OBJECTIVES.check_fields(self.aux, {"tau_plus": self.tau_plus, "positives": self.positives,
                                           "beta": self.beta, "cpc_steps": self.cpc_steps,
                                           "log_floor": self.log_floor, "aux_update_every": self.aux_update_every})
        need(self.cpc_steps >= 1, f"cpc_steps must be >= 1, got {self.cpc_steps}")
        if OBJECTIVES.get(self.aux).kind == "future":
            need(self.update == "official", "--aux cpc has the official update only (--update fused fuses CURL's "
                 "key pass, which CPC does not have)")
            need(not self.cuda_graphs, "--aux cpc is not available with --cuda-graphs (its sequences are gathered "
                 "on the host)")
            # a step k needs an observation k agent steps later in the same episode and in the replay: steps
            # beyond never have a target (their maps never train, the update still pays for them)
            need(self.cpc_steps < self.replay_capacity,
                 f"--cpc-steps {self.cpc_steps} must be below --replay-capacity {self.replay_capacity} (each "
                 "prediction's target is that many transitions later in the replay)")
            if not self.task.startswith("gym:"):  # DeepMind Control: 1000 simulator steps an episode
                repeat = self.action_repeat or int(task_default(self.task, "action_repeat"))
                episode = -(-1000 // repeat)
                need(self.cpc_steps < episode,
                     f"--cpc-steps {self.cpc_steps}: an episode of {self.task} at action repeat {repeat} has {episode} "
                     f"agent steps (1000 simulator steps), so a prediction at most {episode - 1} steps ahead can "
                     "have a target" if episode > 1 else
                     f"--aux cpc: an episode of {self.task} at action repeat {repeat} is one agent step (1000 "
                     "simulator steps), so no observation has a future to predict; lower --action-repeat")
        need(self.crop_size <= self.image_size, f"--crop-size {self.crop_size} is larger than --image-size "
             f"{self.image_size} (the crop is cut from the rendered image): lower --crop-size or raise --image-size")
        need(self.action_repeat is None or self.action_repeat >= 1,
             f"action_repeat must be >= 1, got {self.action_repeat}")
        need(self.batch_size >= 2,
             f"batch_size must be >= 2 (the other samples are the negatives), got {self.batch_size}")
        need(self.frame_stack >= 1, f"frame_stack must be >= 1, got {self.frame_stack}")
        need(self.replay_capacity > self.batch_size, "replay_capacity must exceed batch_size")
        for name in ("env_steps", "eval_every", "eval_episodes", "log_every", "seed_steps", "actor_update_every",
                     "target_update_every", "aux_update_every"):  # each named with the value given
            need(getattr(self, name) >= 1, f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        check_video_size(self.video_size, self.task, "invalid config: ")
        need(self.torch_threads >= 0, f"--torch-threads must be >= 0 (0: torch's default), got {self.torch_threads}")
        need(self.torch_threads <= MAX_THREADS, f"--torch-threads {self.torch_threads} is more than torch takes (at "
             f"most {MAX_THREADS})")
        check_rendered_size(self.image_size, "--image-size", self.task, "invalid config: ")
        for name in ("lr", "actor_lr", "critic_lr", "encoder_lr", "alpha_lr"):  # 0 is taken: nothing trains
            value = getattr(self, name)
            need(value is None or (math.isfinite(value) and value >= 0),
                 f"--{name.replace('_', '-')} must be a number >= 0, got {value}")
        for name in ("actor_beta1", "critic_beta1", "alpha_beta1"):  # Adam's beta1; written so that NaN fails too
            value = getattr(self, name)
            need(value is None or 0.0 <= value < 1.0, f"--{name.replace('_', '-')} must be in [0, 1), got {value}")
        need(math.isfinite(self.log_std_min) and math.isfinite(self.log_std_max),  # inf: actions or losses of NaN
             f"--log-std-min and --log-std-max must be finite, got {self.log_std_min} and {self.log_std_max}")
        need(self.log_std_min < self.log_std_max, f"--log-std-min {self.log_std_min} must be below --log-std-max "
             f"{self.log_std_max}")
        need(self.checkpoint_every >= 0, f"--checkpoint-every must be >= 0 (0: only at the end), got "
             f"{self.checkpoint_every}")
        need(not self.cuda_graphs or self.replay_on_device,
             "--cuda-graphs gathers each batch inside the graph, from the replay on the device: add --replay-on-device")
        need(self.num_layers >= 1 and self.num_filters >= 1, "num_layers and num_filters must be >= 1")
        for name in ("feature_dim", "hidden_dim"):
            need(getattr(self, name) >= 1, f"--{name.replace('_', '-')} must be >= 1, got {getattr(self, name)}")
        need(math.isfinite(self.init_temperature) and self.init_temperature > 0,
             f"--init-temperature must be > 0 (SAC's entropy weight alpha starts there; 0 would train without the "
             f"entropy term, its log never moving), got {self.init_temperature}")
        for name in ("discount", "critic_tau", "encoder_tau"):  # written so that NaN fails too
            value = getattr(self, name)
            need(0.0 < value <= 1.0, f"--{name.replace('_', '-')} must be in (0, 1], got {value}")

    def rates(self) -> dict[str, tuple[float, float]]:
        """The actor's and the critic's Adam ``(lr, beta1)``, ``--actor-lr`` / ``--critic-lr`` / ``--critic-beta1``
        where given, else ``--lr`` and ``--actor-beta1`` (of a resolved configuration)."""
        def given(value, fallback):
            return fallback if value is None else value

        return {"actor": (given(self.actor_lr, self.lr), self.actor_beta1),
                "critic": (given(self.critic_lr, self.lr), given(self.critic_beta1, self.actor_beta1))}

    @property
    def agent_steps(self) -> int:
        """Agent steps (policy decisions) of the run: env_steps / action_repeat."""
        return -(-self.env_steps // self.action_repeat)


def from_cli(argv: list[str] | None = None, description: str | None = None) -> Config:
    """The configuration of ``python -m rl_curl.train ARGS`` (``argv``: the arguments, default ``sys.argv[1:]``):
    tyro's parse of :class:`Config` with ``--preset NAME`` (:func:`shared_losses.training.cli.config_from_cli`)."""
    return config_from_cli(Config, PRESETS, argv, description,
                           sections=[OBJECTIVES.help_text("rl_curl.objectives.OBJECTIVES")],
                           prog="python -m rl_curl.train", finish=refuse_unused_encoder_lr)


def check_video_size(size: int | None, task: str, prefix: str = "") -> None:
    """Refuse a ``--video-size`` that ``task`` cannot render (a ValueError of one line; ``prefix`` begins it)."""
    if size is not None and size < 1:
        raise ValueError(f"{prefix}--video-size must be >= 1 (or None: the observations' frames), got {size}")
    if size is not None:
        check_rendered_size(size, "--video-size", task, prefix)


def check_rendered_size(size: int, option: str, task: str, prefix: str = "") -> None:
    """Refuse a frame size (``option``'s) larger than a DeepMind Control ``task`` renders (its offscreen buffer)."""
    if not task.startswith("gym:") and size > 480:
        raise ValueError(f"{prefix}{option} {size}: DeepMind Control renders at most 480x480 (its tasks' offscreen "
                         "buffer)")


def preset_config(preset: str | None = None, **fields) -> Config:
    """The configuration of ``--preset PRESET`` with ``fields`` as options (``preset_config("cpu",
    task="reacher-easy", seed=1)`` is ``from_cli(["--preset", "cpu", "--task", "reacher-easy", "--seed", "1"])``):
    the preset's values, then ``fields``. ``Config(preset="cpu")`` takes the name only, and a run refuses it."""
    return _preset_config(Config, PRESETS, preset, fields)


def refuse_unused_encoder_lr(cfg: Config, argv: list[str]) -> Config:
    """--encoder-lr given with an objective that has no auxiliary update (--aux none) would be recorded and never
    used: refused as the objectives' other unused settings are. (On the command line only: a configuration
    resolved before holds the task's value, which is no choice of the user's.)"""
    if option_given(argv, "--encoder-lr") and OBJECTIVES.get(cfg.aux).kind == "none":
        users = " or ".join(name for name, o in OBJECTIVES.items() if o.kind != "none")
        raise ValueError(f"--encoder-lr {cfg.encoder_lr:g} only applies to --aux {users} (the auxiliary update's "
                         f"rate); --aux {cfg.aux} has no auxiliary update")
    return cfg
