"""What both training paths of a few-shot run share (:mod:`fewshot.train` for CE / SupCon / puNCE and
the baselines, :mod:`fewshot.pu_pipeline` for the PU setting): the output folder's rules, the
accelerator, data, development split and few-shot sample, the model and its frozen layers, the prior,
batching across processes, encoding, the heads' evaluation and ``metrics.json``'s common keys."""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path

import numpy as np
import torch

from shared_losses.training.harness import RunHarness
from shared_losses.training.loop import TrainingApp
from shared_losses.training.runtime import checkpoint_exists, is_main_process, load_checkpoint, write_json_atomic

from .config import AnyConfig, TextOptions
from .data import (check_same_data, data_fingerprints, hub_eval_split, is_hub, load_pu_files, load_splits,
                   sample_fewshot)
from .heads import embed_all
from .objectives import ALL_OBJECTIVES
from .model import FewShotModel, count_cut, hub_revision, load_tokenizer, max_length_error, resolve_pooling
from .prior import ESTIMATE_HINTS, elkan_noto_prior, warn_given_prior
from .scores import majority_percent, percent_agree


class Batches:
    """Endless shuffled batches of indices with a numpy Generator whose state is checkpointed."""

    def __init__(self, indices, batch_size: int, seed: int):
        self.indices, self.batch_size = np.asarray(indices), batch_size
        self.rng = np.random.default_rng(seed)
        self.order, self.pos = self.rng.permutation(self.indices), 0

    def next(self):
        if self.batch_size == 0 or len(self.indices) == 0:
            return self.indices[:0]
        out = []
        while len(out) < self.batch_size:
            if self.pos == len(self.order):
                # a new pass: examples already in this batch go to the back of the new order, so a
                # batch straddling two passes holds no example twice (each pass still sees all once)
                order = self.rng.permutation(self.indices)
                taken = np.isin(order, out)
                self.order, self.pos = np.concatenate([order[~taken], order[taken]]), 0
            take = min(self.batch_size - len(out), len(self.order) - self.pos, len(self.indices) - len(out))
            out.extend(self.order[self.pos:self.pos + take].tolist())
            self.pos += take
            if len(out) >= len(self.indices):
                break  # never repeat an example inside one batch
        return np.asarray(out)

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state, "order": self.order, "pos": self.pos}

    def load_state_dict(self, s):
        self.rng.bit_generator.state = s["rng"]
        self.order, self.pos = s["order"], s["pos"]


def process_share(batch: np.ndarray, world: int, rank: int) -> np.ndarray:
    """Process ``rank``'s part of a global batch: ``world`` disjoint, contiguous parts whose sizes differ by
    at most one. Every process draws the same global batch (same seed), so together they train on it
    once, never on copies of one batch (which ``--gather-across-processes`` would contrast as negatives). When
    the global batch divides evenly, averaging the processes' losses (as DDP averages gradients) gives
    the global batch's loss; otherwise the shares' means are averaged with equal weights."""
    return np.array_split(batch, world)[rank]


@contextlib.contextmanager
def quiet_loading(quiet: bool):
    """``--no-progress`` also silences transformers' own bars ("Loading weights") while the encoder loads."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if quiet:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if quiet and was:
            hf_logging.enable_progress_bar()


def make_accelerator(cfg, one_process: str | None = None):
    from accelerate.utils import DistributedDataParallelKwargs

    from shared_losses.training.runtime import make_accelerator as accelerator_for

    # Some parameters get no gradient in some settings (the encoder's pooler, which the cls / mean
    # pooling does not read; the projection head under `ce`; the classifier in the PU pipeline), and
    # DDP refuses that unless told to look for them.
    ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
    return accelerator_for(mixed_precision=cfg.mixed_precision, cpu=cfg.device == "cpu",
                           report_to=cfg.report_to, one_process=one_process, kwargs_handlers=[ddp])


@dataclasses.dataclass
class Run:
    """Everything a run needs, prepared once (tests pass a tiny model and tokenizer in)."""

    out: Path
    acc: object
    train_x: list
    train_y: np.ndarray
    eval_x: list
    eval_y: list
    sample: object
    model: FewShotModel
    tokenizer: object
    prior: float = 0.5
    prior_source: str = ""
    exact_prior: float | None = None  # the positive share of the drawn unlabeled sample, where its labels are known
    resuming: bool = False  # continuing from the checkpoint in out
    harness: RunHarness | None = None  # the run's folder, loggers, checkpoints and signals
    pooling: str = "cls"  # --pooling resolved (auto -> cls / mean / max)
    pooling_source: str = "--pooling"


def claim(cfg: AnyConfig) -> RunHarness:
    """The run's harness for ``cfg.output_dir``: the folder rules applied, read-only (nothing written yet). A resume
    does not compare the options the run does not read (``unused_options``: a run made before they were refused,
    one of them recorded, still continues)."""
    return RunHarness("fewshot", cfg.output_dir, resume=cfg.resume, overwrite=cfg.overwrite,
                      free=type(cfg).RESUME_FREE | set(cfg.unused_options()))


def finished_metrics(cfg: TextOptions, harness: RunHarness, saved: dict | None = None) -> dict | None:
    """The metrics of the finished run that ``--resume`` points at when ``cfg`` asks it for no more
    training (its checkpoint is at --steps; a baseline has none), else None: such a run is left exactly
    as it is. A finished run whose checkpoint is gone is refused; its options were compared before
    (:meth:`~shared_losses.training.harness.RunHarness.refuse_changed_options`). ``saved``: the checkpoint's counters
    when the caller has read them (read here otherwise)."""
    out = harness.out
    if not (harness.folder.resuming and (out / "metrics.json").exists()):
        return None
    if checkpoint_exists(out / "checkpoint"):
        state = saved if saved is not None else load_checkpoint(None, out / "checkpoint")
        return read_json(out / "metrics.json") if state["step"] == cfg.max_steps else None
    metrics = read_json(out / "metrics.json")
    # baselines keep no checkpoint: metrics.json is the finished run
    if not ALL_OBJECTIVES.get(cfg.objective).trains_encoder or metrics.get("steps", -1) >= cfg.max_steps:
        return metrics
    raise FileExistsError(f"{out} holds a finished run of {metrics.get('steps')} steps (metrics.json) but no "
                          f"checkpoint/ to continue it to --max-steps {cfg.max_steps} from: pass --overwrite (moves it "
                          "aside) to start a new run, or another --output-dir; nothing was changed")


class FewShotRunApp(TrainingApp):
    """What fewshot's trained runs (text: :class:`fewshot.train.FewShotApp`; PU: :class:`fewshot.pu_pipeline.PuApp`;
    images: :class:`fewshot.image_run.ImageApp`) share in the loop (:func:`shared_losses.training.loop.run`):
    metrics.json, ``--max-steps`` steps, a checkpoint every ``checkpoint_every`` steps and at the last one, the options
    a run records and compares on resume (:func:`recorded_options`, :func:`compare_options`) and the finished run
    (:func:`finished_metrics`)."""

    name, summary_file = "fewshot", "metrics.json"

    def __init__(self, cfg: AnyConfig, harness: RunHarness):
        super().__init__(harness)
        self.cfg = cfg

    @property
    def recorded_options(self):
        return recorded_options(self.cfg)

    def compare_options(self, record):
        return compare_options(self.cfg, record)

    def total_steps(self):
        return self.cfg.max_steps

    def say_resumed(self) -> None:
        """The line a resumed run prints once its state is loaded (as rl_curl and nlp_qt say where they resume)."""
        if self.accelerator.is_main_process:
            print(f"resumed from {self.harness.checkpoint_dir} at step {self.step} of {self.cfg.max_steps}", flush=True)

    def check_resume(self, saved):
        if saved is not None:
            check_steps(self.cfg, saved["step"], self.harness.out)
        done = finished_metrics(self.cfg, self.harness, saved)
        if done is not None:
            print(f"{self.harness.out} already holds this run, finished; nothing to do (pass a larger --max-steps to "
                  "train on)")
        return done

    def checkpoint_due(self):
        return self.harness.checkpoint_due(self.step, self.cfg.checkpoint_every) or self.step == self.cfg.max_steps


def check_steps(cfg: AnyConfig, trained: int, out: Path) -> None:
    """A resume only continues a run: fewer --max-steps than its checkpoint has trained are refused (the
    loop would not run, and metrics.json would pair the new count with the old model)."""
    if cfg.max_steps < trained:
        raise ValueError(f"--max-steps {cfg.max_steps} is below the {trained} steps the checkpoint in {out} has "
                         f"already trained: a resume only continues a run (pass --max-steps {trained} or more)")


def read_json(path: Path) -> dict:
    from shared_losses.training.runtime import read_json_file

    return read_json_file(path, "run's file")


def prepare(cfg: TextOptions, model: FewShotModel | None = None, tokenizer=None,
            harness: RunHarness | None = None, saved: dict | None = None) -> Run:
    """Output folder, accelerator, data and few-shot sample, model on its device, prior; writes
    config.json (with the prior used) and sample.json. ``harness``: the run's, from :func:`claim`
    (claimed here when None); ``saved``: its checkpoint's counters when the caller has read them."""
    cfg.validate()  # before anything is written into the run's folder
    harness = harness or claim(cfg)
    out, resuming = harness.out, harness.resuming
    state = saved if saved is not None else harness.saved_state()  # its options compared by the loop
    acc = make_accelerator(cfg)
    if acc.num_processes != launched_processes():
        raise RuntimeError(f"accelerate runs {acc.num_processes} processes but the launcher's WORLD_SIZE says "
                           f"{launched_processes()}; launch with accelerate launch or torchrun")
    if cfg.n_labeled < acc.num_processes:
        raise ValueError(f"--n-labeled {cfg.n_labeled} is smaller than the number of processes ({acc.num_processes}): "
                         "each process takes its share of every batch and needs at least one labeled example")
    train_x, train_y, eval_x, eval_y, sample = training_data(cfg)
    fingerprint, parts = data_fingerprints(train_x, train_y, eval_x, eval_y, sample)
    if resuming and (out / "sample.json").is_file():  # before the encoder loads or anything is rewritten
        check_same_data(read_json(out / "sample.json"), sample, fingerprint, out,
                        "resuming would go on training and scoring on other examples", parts)
    exact = exact_unlabeled_prior(cfg, train_y, sample)
    if cfg.setting == "pu" and cfg.prior is None and not cfg.estimate_prior and exact is not None:
        check_pu_prior(exact, "exact", len(sample.unlabeled))  # before the encoder loads
    if cfg.prior is not None and exact is not None:
        warn_given_prior(cfg.prior, exact)
    if cfg.pu_files and len(sample.labeled) < acc.num_processes:
        raise ValueError(f"--positive-file holds {len(sample.labeled)} texts, fewer than the number of processes "
                         f"({acc.num_processes}): each process needs at least one labeled example")
    pooling, pooling_source = resolve_pooling(cfg.pooling, cfg.encoder)
    if state is not None and state.get("pooling", pooling) != pooling:
        raise ValueError(f"the checkpoint in {out} was trained with {state['pooling']} pooling, but --pooling "
                         f"{cfg.pooling} gives {pooling} now ({pooling_source}); pass --pooling {state['pooling']}")
    if model is not None and model.pooling != pooling:
        raise ValueError(f"the model passed in pools with {model.pooling!r}, but --pooling {cfg.pooling} "
                         f"gives {pooling!r}")
    from accelerate.utils import set_seed

    set_seed(cfg.seed)  # torch's, and Python's and numpy's global generators (a resume restores them)
    with quiet_loading(not cfg.progress):
        tokenizer = tokenizer or load_tokenizer(cfg.encoder)
        model = (model or FewShotModel(cfg.encoder, pooling, cfg.proj_dim)).to(acc.device)
    if cfg.train_layers is not None:
        freeze_lower_layers(model.encoder, cfg.train_layers)
    too_long = max_length_error(cfg.max_length, cfg.encoder, model.encoder, tokenizer)
    if too_long:
        raise ValueError(too_long)
    if acc.is_main_process and not resuming:
        note_cut_texts(tokenizer, cfg.max_length, train_x, sample, eval_x)
    run = Run(out, acc, train_x, np.asarray(train_y), eval_x, eval_y, sample, model, tokenizer, resuming=resuming,
              pooling=pooling, pooling_source=pooling_source, harness=harness)
    run.prior, run.prior_source = resolve_prior(cfg, run.train_y, sample, model, tokenizer, train_x, acc.device)
    run.exact_prior = exact
    if cfg.setting == "pu":
        check_pu_prior(run.prior, run.prior_source, len(sample.unlabeled), cfg.pu_files)  # before anything is written
    if run.prior_source == "elkan-noto" and acc.is_main_process:  # a number the user did not give, said in words
        n_pos = int((run.train_y[sample.labeled] == 1).sum())
        print(f"prior: {run.prior:.4g}, the Elkan-Noto estimate of the positive share of the "
              f"{len(sample.unlabeled)} unlabeled texts (from {n_pos} labeled positives on the pretrained encoder's "
              f"vectors; about {run.prior * len(sample.unlabeled):.0f} positives among them); pass --prior P if you "
              "know better (config.json: prior_used, prior_source)", file=sys.stderr, flush=True)
    harness.open(acc)  # every process has read the folder before the main one changes it
    harness.write_config(recorded_options(cfg) | {"prior_used": run.prior, "prior_source": run.prior_source})
    if acc.is_main_process:
        write_json_atomic(out / "sample.json", sample.to_json() | {"data_sha256": fingerprint,
                                                                   "data_sha256_parts": parts})
    return run


def note_cut_texts(tokenizer, max_length: int, train_x, sample, eval_x) -> None:
    """Print how many of the run's texts (the drawn labeled and unlabeled ones, the evaluation split) are longer
    than --max-length tokens: the encoder reads their first --max-length tokens only."""
    import warnings

    drawn = [train_x[i] for i in np.concatenate([sample.labeled, sample.unlabeled]).tolist()]
    with warnings.catch_warnings():  # the tokenizer's own "longer than the model's maximum" warning: counted here
        warnings.simplefilter("ignore")
        parts = [(what, len(texts), *count_cut(tokenizer, texts, max_length))
                 for what, texts in (("drawn training", drawn), ("evaluation", eval_x)) if texts]
    cut = [f"{c} of the {n} {what} texts (longest {longest} tokens)" for what, n, c, longest in parts if c]
    if cut:
        print(f"note: {' and '.join(cut)} are longer than --max-length {max_length} tokens; the encoder reads their "
              "first --max-length tokens only")


def training_data(cfg: TextOptions):
    """(train_x, train_y, eval_x, eval_y, sample) of a run, exactly as :func:`prepare` draws them (also used
    to rebuild a finished run's data for :mod:`fewshot.export`): the data set (or, setting ``pu`` with
    --positive-file, the user's PU files, every row), the development split, the few-shot sample and the
    --max-eval subset."""
    if cfg.pu_files:
        train_x, train_y, eval_x, eval_y, sample = load_pu_files(cfg)
        eval_x, eval_y = eval_subset(eval_x, eval_y, cfg.max_eval, cfg.seed)
        return train_x, train_y, eval_x, eval_y, sample
    train_x, train_y, eval_x, eval_y = load_splits(cfg)
    if cfg.eval_split == "dev":
        train_x, train_y, eval_x, eval_y = dev_split(train_x, train_y, cfg.dev_fraction)
    eval_x, eval_y = eval_subset(eval_x, eval_y, cfg.max_eval, cfg.seed)
    if getattr(cfg, "unlabeled_file", None) is not None and not cfg.pu_files:  # the text pipeline's own unlabeled texts
        train_x, train_y, sample = with_unlabeled_file(cfg, train_x, train_y, eval_x)
        return train_x, train_y, eval_x, eval_y, sample
    sample = sample_fewshot(train_y, cfg.n_labeled, unlabeled_to_draw(cfg, len(train_y)), cfg.seed, cfg.setting)
    return train_x, train_y, eval_x, eval_y, sample


def unlabeled_to_draw(cfg, n: int) -> int:
    """--n-unlabeled, or, for an objective that reads no unlabeled examples (ce, ce+scl, setfit, probe: they serve
    only the prior it reports), as many as the ``n`` training examples leave beside the labeled ones when that is
    fewer (a user's small file was refused for the unlabeled examples such a run never reads; found by a probe). The
    labeled draw does not depend on it. Said once on stderr."""
    from .objectives import ALL_OBJECTIVES

    name = getattr(cfg, "objective", None)
    spec = ALL_OBJECTIVES[name] if name in ALL_OBJECTIVES else None
    room = max(0, n - cfg.n_labeled)
    if spec is None or spec.reads_unlabeled or cfg.n_unlabeled <= room:
        return cfg.n_unlabeled
    print(f"note: --objective {name} reads no unlabeled examples; {room} drawn, not --n-unlabeled {cfg.n_unlabeled} "
          f"(the {n} training examples leave {room} beside the {cfg.n_labeled} labeled ones; they serve only the "
          "prior reported)", file=sys.stderr, flush=True)
    return room


def with_unlabeled_file(cfg, train_x, train_y, eval_x):
    """(train_x, train_y, sample) of a text run with --unlabeled-file: the N labeled examples drawn from the labeled
    pool as without it, then the file's texts appended to the pool with label -1 (unknown, never read as a class)
    and U of them drawn uniformly (their own generator, a child of --seed) as the unlabeled sample."""
    from shared_losses.data import DataError

    from .data import FewShotSample, read_texts, warn_overlap

    labeled = sample_fewshot(train_y, cfg.n_labeled, 0, cfg.seed, cfg.setting).labeled
    texts = read_texts(cfg.unlabeled_file, cfg.text_column, "--unlabeled-file")
    if cfg.n_unlabeled > len(texts):
        raise DataError(f"--unlabeled-file {cfg.unlabeled_file} holds {len(texts)} texts, fewer than --n-unlabeled "
                        f"{cfg.n_unlabeled}: lower --n-unlabeled (at most {len(texts)})")
    rng = np.random.default_rng(np.random.SeedSequence(cfg.seed).spawn(2)[1])
    drawn = np.sort(rng.choice(len(texts), size=cfg.n_unlabeled, replace=False))
    warn_overlap(texts, eval_x, f"--unlabeled-file {cfg.unlabeled_file}", "the evaluation split")
    labeled_texts = {str(train_x[i]).strip() for i in labeled.tolist()}
    shared = sum(str(texts[i]).strip() in labeled_texts for i in drawn.tolist())
    if shared:
        import warnings

        warnings.warn(f"{shared} of the {len(drawn)} drawn unlabeled texts of --unlabeled-file {cfg.unlabeled_file} "
                      "are also labeled examples of the run: a copy of a labeled example among the unlabeled ones is "
                      "usually a mistake", stacklevel=3)
    n = len(train_x)
    return (list(train_x) + texts, list(np.asarray(train_y).tolist()) + [-1] * len(texts),
            FewShotSample(labeled, n + drawn))


#: The development split's draw is fixed (not --seed): every seed and every setting is scored on the same rows.
DEV_SEED = 20261123


def dev_split(train_x, train_y, fraction: float):
    """(pool_x, pool_y, dev_x, dev_y): ``fraction`` of the training pool held out as a development
    split (a uniform draw with a fixed seed; file order kept), for choosing hyperparameters without
    the evaluation split. The few-shot sample is then drawn from the pool."""
    n = len(train_x)
    n_dev = int(round(fraction * n))
    if n_dev < 1 or n - n_dev < 2:
        raise ValueError(f"--dev-fraction {fraction} of {n} training examples leaves no development split or no pool")
    is_dev = np.zeros(n, dtype=bool)
    is_dev[np.random.default_rng(DEV_SEED).choice(n, size=n_dev, replace=False)] = True
    train_y = np.asarray(train_y)
    return ([x for x, d in zip(train_x, is_dev) if not d], train_y[~is_dev].tolist(),
            [x for x, d in zip(train_x, is_dev) if d], train_y[is_dev].tolist())


def transformer_layers(encoder):
    """The encoder's stack of transformer layers: the first ModuleList among ``encoder.layer``
    (BERT/RoBERTa/MiniLM), ``transformer.layer`` (DistilBERT), ``layers`` and ``encoder.layers``."""
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
        obj = encoder
        for part in path.split("."):
            obj = getattr(obj, part, None)
        if isinstance(obj, torch.nn.ModuleList):
            return obj
    raise ValueError(f"--train-layers: cannot find the transformer layers of {type(encoder).__name__} "
                     "(looked for encoder.layer, transformer.layer, layers, encoder.layers); drop --train-layers")


def freeze_lower_layers(encoder, k: int) -> None:
    """Only the top ``k`` transformer layers of ``encoder`` keep requires_grad (the heads are not
    part of ``encoder`` and always train); embeddings, lower layers and pooler are frozen."""
    layers = transformer_layers(encoder)
    if k > len(layers):
        raise ValueError(f"--train-layers {k} exceeds the encoder's {len(layers)} layers")
    for p in encoder.parameters():
        p.requires_grad_(False)
    for layer in list(layers)[len(layers) - k:]:
        for p in layer.parameters():
            p.requires_grad_(True)


def majority_rates(train_y, sample, eval_y) -> dict:
    """The majority-class baselines (%): the evaluation split's own majority rate, and the accuracy of
    predicting the labeled sample's majority class (ties: positive)."""
    ev = np.asarray(eval_y)
    lab_major = int(np.asarray(train_y)[sample.labeled].mean() >= 0.5)
    return {"majority_accuracy": majority_percent(ev),
            "labeled_majority_accuracy": percent_agree(np.full_like(ev, lab_major), ev)}


def eval_subset(eval_x, eval_y, max_eval, seed):
    """At most ``max_eval`` evaluation examples: a uniform draw (the first rows of a file sorted by
    label would bias the score), kept in file order. Its own generator (a child of ``seed``), so the
    draw consumes no randomness of the few-shot sample, the batches or torch."""
    if max_eval is None or max_eval >= len(eval_x):
        return eval_x, eval_y
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    keep = np.sort(rng.choice(len(eval_x), size=max_eval, replace=False))
    return [eval_x[i] for i in keep], [eval_y[i] for i in keep]


#: metrics.json's ``note`` (and the run's last line) where PU data from files came without a labeled --eval-file
NO_EVAL_NOTE = ("no --eval-file: no accuracy (the PU files have no labels to score on); pass a labeled --eval-file to "
                "get one")


#: The options that name input files or folders: recorded by absolute path (:func:`recorded_config`) and compared so.
PATH_FIELDS = ("dataset", "eval_file", "positive_file", "unlabeled_file", "encoder")


#: The key under which a run records what its options with changing defaults resolved to
#: (``RESOLVED_DEFAULTS``): {metrics key: value}.
RESOLVED_KEY = "resolved_defaults"


def recorded_config(cfg: AnyConfig) -> dict:
    """The configuration a run records (config.json, its checkpoints): its pipeline (``text``, ``pu``, ``images``)
    and options, with every input file or folder as an absolute path
    (:func:`shared_losses.training.runtime.local_path`), so that a resume compares files, not spellings; and, for a
    configuration with ``RESOLVED_DEFAULTS``, what those options resolved to (``RESOLVED_KEY``), so that a run
    is never continued under a default that changed after it started."""
    from shared_losses.training.runtime import with_local_paths

    record = with_local_paths({"pipeline": cfg.PIPELINE, **dataclasses.asdict(cfg)}, PATH_FIELDS)
    record.update(dict.fromkeys(getattr(cfg, "unread_fields", ()), None))  # PU files: no --dataset was read
    if type(cfg).RESOLVED_DEFAULTS:
        record[RESOLVED_KEY] = {key: getattr(cfg, prop) for prop, key, _ in type(cfg).RESOLVED_DEFAULTS}
    return record


#: Options a resume may change (to train a run on for longer) that change what a finished run is: a grid compares them
#: (an image run's --max-steps only when --passes does not set it).
FINISHED_COMPARED = frozenset({"max_steps", "passes"})


def launched_processes() -> int:
    """The processes of this run, as the launcher (``accelerate launch``, ``torchrun``) declares them in WORLD_SIZE
    (1 without one): known before the accelerator is made, so that a resume compares it with the rest of the
    options. The process count sets the global batch, and so what the samplers' states mean."""
    import os

    return int(os.environ.get("WORLD_SIZE", "1"))


def recorded_options(cfg: AnyConfig) -> dict:
    """What a run records in config.json and its checkpoints, and a resume compares: :func:`recorded_config` and the
    process count."""
    return {**recorded_config(cfg), "num_processes": launched_processes()}


def compare_options(cfg: AnyConfig, record: dict) -> tuple[dict, dict]:
    """(a run's recorded options, this command's) as a resume compares them: :func:`comparable_configs` with this
    command's process count."""
    saved, current = comparable_configs(record, cfg)
    return saved, {**current, "num_processes": launched_processes()}


def comparable_configs(saved: dict, cfg: AnyConfig) -> tuple[dict, dict]:
    """(saved, current) configurations to compare (:func:`shared_losses.training.runtime.config_changes`): input files
    by absolute path on both sides (:func:`recorded_config`: a run's relative spelling is read from the current folder,
    as before); an option the record lacks (added since) as its default; ``--pooling auto`` on either side replaced by
    what it resolves to for this encoder: a run saved with ``pooling: cls`` (the default before ``auto``) matches
    ``--pooling auto`` on an encoder where auto means cls, and not on one where it means mean (a different model);
    the options with changing defaults by what they resolve to (:func:`resolve_defaults`)."""
    from shared_losses.training.runtime import with_local_paths

    saved, current = with_local_paths(saved, PATH_FIELDS), recorded_config(cfg)
    saved.update(dict.fromkeys(getattr(cfg, "unread_fields", ()), None))  # records written before they were null
    # an option added after the run was made: the run behaved as its default does (an option that changes what a run
    # did is added with a default that keeps it), so a record without it matches the default and nothing else
    for f in dataclasses.fields(cfg):
        if f.name not in saved and f.default is not dataclasses.MISSING and current.get(f.name) == f.default:
            saved[f.name] = current[f.name]
    if ("pooling" in current and "auto" in (saved.get("pooling"), current["pooling"])  # (an image run has none)
            and saved.get("pooling") != current["pooling"]):
        resolved = resolve_pooling("auto", cfg.encoder)[0]
        saved["pooling"] = resolved if saved.get("pooling") == "auto" else saved.get("pooling")
        current["pooling"] = resolved if current["pooling"] == "auto" else current["pooling"]
    return resolve_defaults(saved, current, cfg)


def resolve_defaults(saved: dict, current: dict, cfg: AnyConfig) -> tuple[dict, dict]:
    """Compare the options with changing defaults (``RESOLVED_DEFAULTS``) by the values they stand for: an unset
    option by what it resolved to (the run's ``RESOLVED_KEY`` record; this command's default now), a given one by its
    value. So a run started under one default is not continued under another, and an option given on the command
    line equals the default it spells out. A run that recorded nothing (made before the record) is taken to have
    used the value ``before`` unless this command states the option: then its value is taken as the run's."""
    used_then = saved.pop(RESOLVED_KEY, None) or {}
    current.pop(RESOLVED_KEY, None)  # this command's: the properties below
    for prop, key, before in type(cfg).RESOLVED_DEFAULTS:
        given_then, given_now = saved.pop(key, None), current.pop(key, None)
        then = given_then if given_then is not None else used_then.get(key)
        now = getattr(cfg, prop)  # the option's value when given, else its default now
        if then is None:
            then = now if given_now is not None else before
        name = key if given_then is not None or given_now is not None else f"{key} (unset: its default)"
        saved[name], current[name] = then, now
    return saved, current


def resolve_prior(cfg, train_y, sample, model=None, tokenizer=None, train_x=None, device="cpu") -> tuple[float, str]:
    if cfg.prior is not None:  # in [0, 1]: RunOptions.validate
        return float(cfg.prior), "given"
    unknown = len(sample.unlabeled) > 0 and bool((np.asarray(train_y)[sample.unlabeled] < 0).any())
    if cfg.estimate_prior or cfg.pu_files or unknown:  # unlabeled texts from a file have no labels to count: estimate
        pos = sample.labeled[train_y[sample.labeled] == 1]
        bar = (lambda what: f"prior estimate: embedding the {what}") if cfg.progress and is_main_process() else \
            (lambda what: None)  # every unlabeled text: minutes on a large file
        fp, _ = embed_all(model, tokenizer, [train_x[i] for i in pos], cfg.max_length, device,
                          progress=bar(f"{len(pos)} labeled positives"))
        fu, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.unlabeled], cfg.max_length, device,
                          progress=bar(f"{len(sample.unlabeled)} unlabeled texts"))
        hint = ESTIMATE_HINTS["files" if cfg.pu_files else "unlabeled file" if unknown else "sampled"]
        return elkan_noto_prior(fp.numpy(), fu.numpy(), seed=cfg.seed, hint=hint), "elkan-noto"
    if len(sample.unlabeled) == 0:
        return 0.5, "no unlabeled data"
    return exact_unlabeled_prior(cfg, train_y, sample), "exact"


def exact_unlabeled_prior(cfg, train_y, sample) -> float | None:
    """The exact prior of a run's drawn unlabeled sample (the positive share of it, puNCE appendix A.1.1), where its
    labels are known (a sample drawn from a labeled data set); None for PU files or without unlabeled examples."""
    if cfg.pu_files or len(sample.unlabeled) == 0:
        return None
    labels = np.asarray(train_y)[sample.unlabeled]
    if (labels < 0).any():  # unlabeled texts from a file: unknown
        return None
    return float((labels == 1).mean())


def check_pu_prior(prior: float, source: str, n_unlabeled: int, pu_files: bool = False) -> None:
    """Refuse, in one line, a prior the PU probes cannot use (0 or 1), saying where it came from (the exact prior of the
    drawn unlabeled sample, or the Elkan-Noto estimate) and what to do. An estimate that leaves under half an expected
    positive (or negative) among the ``n_unlabeled`` texts (1.5e-07 of 30, say) is 0 (or 1) in all but name and is
    refused alike. A given --prior is refused by :meth:`fewshot.config.PuConfig.validate`."""
    need = f"the PU probes need a prior strictly between 0 and 1, got {prior:g}"
    low = prior <= 0.0
    if 0.0 < prior < 1.0:
        if source != "elkan-noto" or n_unlabeled <= 0 or min(prior, 1.0 - prior) * n_unlabeled >= 0.5:
            return
        low = prior < 0.5
        expected = prior * n_unlabeled if low else (1.0 - prior) * n_unlabeled
        need = (f"the PU probes need a prior strictly between 0 and 1, and this one is {'0' if low else '1'} in all "
                f"but name ({expected:.2g} expected {'positives' if low else 'negatives'} among the {n_unlabeled} "
                "unlabeled texts)")
    if source == "exact":
        what = ("none of its examples is positive (the data set's positives went to the labeled draw, or are rare)"
                if low else "every one of them is positive (the data set has too few negatives)")
        raise ValueError(f"the exact prior of the drawn unlabeled sample ({n_unlabeled} examples) is {prior:g}: "
                         f"{what}; {need}: raise --n-unlabeled, lower --n-labeled or try another --seed, or pass "
                         "--prior")
    if source == "elkan-noto":
        what = ("it found no positives among the unlabeled texts" if low else
                "it could not tell the labeled positives from the unlabeled texts (docs/results/fewshot.md, 'How close "
                "is the Elkan-Noto estimate')")
        where = "of --unlabeled-file" if pu_files else "of the unlabeled texts"
        raise ValueError(f"the Elkan-Noto estimate of the prior came out as {prior:g}: {what}; {need}: pass --prior P "
                         f"(your estimate of the positive share {where})")
    raise ValueError(f"{need} ({source})")


def run_metrics(cfg, run, eval_accuracy: float, heads: dict, history: list, train_seconds: float,
                eval_scores: dict | None = None) -> dict:
    """metrics.json: the same keys for every objective (``probe`` included); ``eval_scores``: the classifier's
    :func:`fewshot.scores.binary_scores` (None for SetFit)."""
    if cfg.eval_split == "dev":
        split = f"DEVELOPMENT split: {cfg.dev_fraction} of the training pool (for choosing hyperparameters)"
    elif cfg.dataset == "glue/sst2":
        split = "labeled validation split (GLUE test labels are hidden)"
    elif is_hub(cfg.dataset) and cfg.eval_file is None and not cfg.pu_files:
        which = hub_eval_split(cfg)
        split = (f"the hub dataset's {which} split" if which else
                 f"held out of the hub dataset's train split: {cfg.eval_fraction:g} of each class (a fixed draw, the "
                 "same for every seed), never trained on")
    elif cfg.eval_file is None and not cfg.pu_files and Path(cfg.dataset).is_file():
        split = (f"held out of --dataset: {cfg.eval_fraction:g} of each class (a fixed draw, the same for every seed), "
                 "never trained on")
    else:
        split = "eval file / test split"
    return {
        "eval_accuracy": eval_accuracy, "eval_scores": eval_scores, "head_accuracies": heads,
        **majority_rates(run.train_y, run.sample, run.eval_y),
        "objective": cfg.objective, "setting": cfg.setting, "preset": cfg.preset,
        # the head that scored eval_accuracy: an objective that trains none (probe, setfit) is scored by the logreg
        "head": cfg.head if ALL_OBJECTIVES.get(cfg.objective).trains_head else "logreg",
        "n_labeled": cfg.n_labeled, "n_unlabeled": cfg.n_unlabeled, "seed": cfg.seed, "encoder": cfg.encoder,
        "dataset": cfg.dataset, "eval_file": cfg.eval_file, "lam": cfg.lam, "temperature": cfg.temperature,
        "label_pull": cfg.label_pull, "prior": run.prior, "prior_source": run.prior_source,
        "exact_prior": run.exact_prior,
        "steps": cfg.max_steps if ALL_OBJECTIVES.get(cfg.objective).trains_encoder else 0,
        "n_eval": len(run.eval_y), "history": history, "train_seconds": train_seconds, "eval_split": split,
        "pooling": run.pooling, "pooling_source": run.pooling_source, "encoder_revision": hub_revision(cfg.encoder),
    }


def capped_batches_line(cfg, world: int, n_labeled: int, n_unlabeled: int, reads_unlabeled: bool = True) -> str | None:
    """The stderr line for --batch-labeled / --batch-unlabeled (per process, times ``world`` processes) capped to the
    examples there are (metrics.json records the sizes used); None when neither is."""
    parts = [("labeled", cfg.batch_labeled, n_labeled)] + ([("unlabeled", cfg.batch_unlabeled, n_unlabeled)]
                                                           if reads_unlabeled else [])
    capped = [f"--batch-{what} {asked} x {world} process(es) to the {have} {what} examples"
              for what, asked, have in parts if asked * world > have]
    return (f"batches capped to the data: {'; '.join(capped)} (metrics.json: "
            f"{', '.join(f'batch_{what}_used' for what, _, _ in parts)})") if capped else None


def forward_views(model, ids, mask, objective):
    """Logits of the first view and the projections of one (``ce``) or two dropout views, from a
    single forward pass through the (possibly DDP-wrapped) model."""
    n_views = ALL_OBJECTIVES.get(objective).views
    n = ids.shape[0]
    logits, z = model(ids.repeat(n_views, 1), mask.repeat(n_views, 1))
    return logits[:n], list(z.split(n))
