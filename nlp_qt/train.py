"""Quick-thought pretraining: ``python -m nlp_qt.train --corpus PATH --output-dir DIR [...]``.

Multi-GPU: ``accelerate launch -m nlp_qt.train ...``. Each optimiser step reads
``batch_size * num_processes`` consecutive sentences; process r takes the r-th contiguous block.
With ``--gather-across-processes`` the candidates are the whole global block (gathered with
gradients), and each process's anchors keep their global positions, so neighbours across the
process split are still found.

Resume is exact: the corpus stream is deterministic (no shuffling), so after loading the
checkpoint (weights, Adam state, RNG states) the already-consumed batches are skipped.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import itertools
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from shared_losses import gather_with_grad
from shared_losses.training.harness import LogRow, RunHarness
from shared_losses.training.loop import TrainingApp
from shared_losses.training.loop import run as run_app
from shared_losses.training.runtime import (MAX_THREADS, DivergenceWatch, bar_interval, make_accelerator,
                                            print_run_result, read_json_file, threads_within_the_cpu_limit,
                                            torch_settings_given_back, with_local_paths)

from .config import PRESETS, Config, from_cli
from .corpus import CorpusError, CorpusStats, contiguous_batches, corpus_fingerprint, iter_corpus
from .model import QuickThought, init_word_vectors, model_config, save_model
from .objectives import OBJECTIVES, compute_loss, neighbours
from .vocab import Vocab

#: The options that name input files (recorded and compared by absolute path:
#: shared_losses.training.runtime.local_path).
PATH_FIELDS = ("corpus", "word_vectors")


def unused_fields(cfg: Config) -> set[str]:
    """The options this run does not read (refused by :func:`validate` when given): a resume does not compare them,
    so a run made before they were refused, with one of them recorded, still continues."""
    return {name for name, unused in (
        ("log_floor", "log_floor" not in OBJECTIVES.get(cfg.objective).uses), ("bidirectional", cfg.encoder != "gru"),
        ("dev_max_batches", not cfg.dev_every), ("clip_mode", not cfg.clip_norm)) if unused}


def validate(cfg: Config) -> None:
    from shared_losses.training.cli import check_field_types, check_preset_applied
    from shared_losses.training.runtime import check_seed

    check_field_types(cfg)
    check_preset_applied(cfg, PRESETS, "nlp_qt.config.preset_config(NAME, ...)")
    check_seed(cfg.seed)
    if not cfg.corpus:
        raise ValueError("--corpus is required (a text file/folder, a .jsonl/.parquet file, or hf:NAME)")
    if cfg.batch_size < 2:
        raise ValueError(f"batch_size must be >= 2, got {cfg.batch_size}")
    if cfg.objective in ("debiased", "hard") and cfg.batch_size < 3 and not cfg.gather_across_processes:
        raise ValueError(f"--objective {cfg.objective} needs --batch-size >= 3: each neighbour's term takes the batch's"
                         " other sentences but the sentence and that neighbour as negatives, and 2 leave none")
    if not 0.0 <= cfg.tau_plus < 1.0:
        raise ValueError(f"tau_plus must be in [0, 1), got {cfg.tau_plus}")
    # the objectives' table says what applies
    OBJECTIVES.check_fields(cfg.objective, {"tau_plus": cfg.tau_plus, "beta": cfg.beta, "cpc_steps": cfg.cpc_steps,
                                            "cpc_length": cfg.cpc_length, "log_floor": cfg.log_floor})
    for name, low in (("cpc_steps", 1), ("cpc_length", 2), ("conv_width", 1), ("word_dim", 1), ("encoder_dim", 1),
                      ("vocab_size", 1)):  # each named alone (one message named three options for any of them)
        if getattr(cfg, name) < low:
            raise ValueError(f"--{name.replace('_', '-')} must be >= {low}, got {getattr(cfg, name)}")
    corpus = Path(cfg.corpus)
    if cfg.output_dir and not cfg.corpus.startswith("hf:") and corpus.is_dir() \
            and Path(cfg.output_dir).resolve().is_relative_to(corpus.resolve()):
        raise ValueError(f"--output-dir {cfg.output_dir} is inside --corpus {cfg.corpus}: the run's own files would be "
                         "read as text (and the corpus would change under a --resume); choose a folder outside it")
    if OBJECTIVES.get(cfg.objective).heads == "cpc" and cfg.cpc_steps >= cfg.cpc_length:
        raise ValueError(f"--cpc-steps {cfg.cpc_steps} must be below --cpc-length {cfg.cpc_length}: a prediction k "
                         f"sentences ahead needs a sequence of more than k sentences, so steps {cfg.cpc_length} and "
                         "beyond would never have a target (nor their maps a gradient)")
    if cfg.conv_width != 3 and cfg.encoder != "conv":
        raise ValueError(f"--conv-width is the conv encoder's; --encoder {cfg.encoder} has no convolution")
    # the options this run does not read, given another value than their default (--log-floor: the objectives'
    # table above): each refused by name (they were recorded in config.json and did nothing)
    unused = {name for name in unused_fields(cfg) if getattr(cfg, name) != getattr(Config, name)}
    if "bidirectional" in unused:
        raise ValueError(f"--no-bidirectional is the gru encoder's; --encoder {cfg.encoder} has no direction")
    if cfg.accept_corpus_change and not cfg.resume:
        raise ValueError("--accept-corpus-change lets --resume continue on a changed corpus; a run that starts anew "
                         "reads the corpus as it is: drop it, or add --resume")
    if "clip_mode" in unused:
        raise ValueError(f"--clip-mode {cfg.clip_mode} chooses how --clip-norm clips, and --clip-norm 0 clips nothing: "
                         "pass a --clip-norm above 0, or drop --clip-mode")
    if OBJECTIVES.get(cfg.objective).heads == "cpc" and cfg.gather_across_processes:
        raise ValueError("--gather-across-processes is not available with --objective cpc: each process scores its "
                         "own sequences against its own sentences")
    if cfg.self_score == "zero" and cfg.objective != "qt":
        raise ValueError("self_score zero is only defined for objective qt")
    if cfg.objective == "qt" and cfg.self_score == "exclude" and cfg.batch_size < 3 \
            and not cfg.gather_across_processes:
        raise ValueError("--objective qt with --self-score exclude needs --batch-size >= 3: a sentence's candidates "
                         "are the batch's other sentences, and at 2 its neighbour is the only one, so the loss is 0 "
                         "and nothing trains (--self-score zero keeps the sentence itself as a candidate)")
    for name in ("epochs", "lr", "log_every", "max_length"):  # max_length: was the vocabulary's "max_len"
        if not getattr(cfg, name) > 0:  # `not >`: NaN fails too
            raise ValueError(f"--{name.replace('_', '-')} must be positive, got {getattr(cfg, name)}")
    if cfg.torch_threads < 0:
        raise ValueError(f"--torch-threads must be >= 0 (0: torch's default), got {cfg.torch_threads}")
    if cfg.torch_threads > MAX_THREADS:  # torch's C int: "Overflow when unpacking long"
        raise ValueError(f"--torch-threads {cfg.torch_threads} is more than torch takes (at most {MAX_THREADS})")
    if cfg.checkpoint_every < 0:
        raise ValueError(f"--checkpoint-every must be >= 0 (0: only at the end), got {cfg.checkpoint_every}")
    # checked here, before the vocabulary pass over the corpus, not at the first step or never
    if not 0 < cfg.temperature < math.inf:  # NaN fails too; inf made every score 0 (nothing trained)
        raise ValueError(f"--temperature must be a finite number > 0, got {cfg.temperature}")
    if not cfg.clip_norm >= 0:  # NaN fails too
        raise ValueError(f"clip_norm must be >= 0 (0 disables clipping), got {cfg.clip_norm}")
    if cfg.max_steps is not None and cfg.max_steps < 0:
        raise ValueError(f"max_steps must be >= 0, got {cfg.max_steps}")
    if cfg.dev_every == 1 or cfg.dev_every < 0:
        raise ValueError(f"dev_every must be 0 (no held-out batches) or >= 2 (every Nth batch held out), got "
                         f"{cfg.dev_every}")
    if cfg.encoder == "bow" and cfg.encoder_dim != cfg.word_dim:
        raise ValueError(f"--encoder bow: the sentence vector is the mean word embedding, so --encoder-dim must equal "
                         f"--word-dim; got --encoder-dim {cfg.encoder_dim}, --word-dim {cfg.word_dim} "
                         f"(set --encoder-dim {cfg.word_dim})")
    if cfg.dev_max_batches < 1:
        raise ValueError(f"dev_max_batches must be >= 1, got {cfg.dev_max_batches}")
    if "dev_max_batches" in unused:
        raise ValueError(f"--dev-max-batches {cfg.dev_max_batches} sizes the held-out batches of --dev-every, which "
                         "is 0 (none held out): pass --dev-every N too, or drop --dev-max-batches")
    for name in ("max_sentences", "vocab_sentences"):
        if getattr(cfg, name) is not None and getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1 (or None for the whole corpus), got {getattr(cfg, name)}")


def trained_to_the_end(cfg: Config, step: int, epoch: int) -> bool:
    """Whether a run at ``step`` / ``epoch`` has reached what ``cfg`` asks for (--max-steps, --epochs): a finished run
    that has is left as it is (what scripts/qt_table2.py also needs to know about the runs it would count)."""
    return (cfg.max_steps is not None and step >= cfg.max_steps) or epoch >= cfg.epochs


def read_checked_word_vectors(cfg: Config):
    """``(words, vectors)`` of ``--word-vectors``, checked against the run's ``--word-dim`` and ``--lowercase``
    (read once, before the folder or the corpus is touched); None without the option."""
    if cfg.word_vectors is None:
        return None
    from .bow import read_word_vectors
    from .vector_files import is_vector_file, open_vector_file

    if is_vector_file(cfg.word_vectors):  # GloVe / word2vec / fastText as published: read at init, vocabulary only
        vector_file = open_vector_file(cfg.word_vectors)
        if vector_file.dim != cfg.word_dim:
            raise ValueError(f"--word-vectors {cfg.word_vectors} has {vector_file.dim}-d vectors but --word-dim is "
                             f"{cfg.word_dim}; set --word-dim {vector_file.dim}")
        return vector_file
    words, vectors, lowercase = read_word_vectors(cfg.word_vectors)
    if vectors.shape[1] != cfg.word_dim:
        raise ValueError(f"--word-vectors {cfg.word_vectors} has {vectors.shape[1]}-d vectors but --word-dim is "
                         f"{cfg.word_dim}; set --word-dim {vectors.shape[1]}")
    if lowercase != cfg.lowercase:
        raise ValueError(f"--word-vectors {cfg.word_vectors} was trained with lowercase={lowercase}, this run has "
                         f"--lowercase {cfg.lowercase}: its words would not match the vocabulary's")
    return words, vectors


def vocabulary_vectors(source, vocabulary: list[str]):
    """``(words, vectors, folded)`` to initialise the vocabulary with: an nlp_qt.bow folder's words as they are (its
    case was checked against --lowercase); a word-vector file's vectors of the vocabulary's words, a word it lacks
    taking the vector of its lower-case form where the file has that one (GloVe's files are lower case; ``folded``
    counts those words)."""
    from .vector_files import VectorFile

    if not isinstance(source, VectorFile):
        return (*source, 0)
    words, vectors = source.select(set(vocabulary) | {w.lower() for w in vocabulary})
    index = {w: k for k, w in enumerate(words)}
    extra = [(w, index[w.lower()]) for w in vocabulary if w not in index and w.lower() in index]
    if extra:
        words = words + [w for w, _ in extra]
        vectors = np.concatenate([vectors, vectors[[k for _, k in extra]]])
    return words, vectors, len(extra)


def sentence_stream(cfg: Config, stats: CorpusStats | None = None):
    it = iter_corpus(
        cfg.corpus, stats, text_column=cfg.text_column, doc_field=cfg.doc_field, doc_boundary=cfg.doc_boundary,
        one_sentence_per_line=cfg.one_sentence_per_line,
    )
    if cfg.max_sentences is not None:
        it = itertools.islice(it, cfg.max_sentences)
    return it


def build_vocab(cfg: Config) -> Vocab:
    stream = sentence_stream(cfg)
    if cfg.vocab_sentences is not None:
        stream = itertools.islice(stream, cfg.vocab_sentences)
    # minutes on a large corpus (5M sentences by default): a bar, gone once the vocabulary is built
    limits = [n for n in (cfg.vocab_sentences, cfg.max_sentences) if n is not None]  # the pass reads the lesser
    bar = tqdm(stream, total=min(limits) if limits else None, desc="vocabulary pass", unit=" sentences", leave=False,
               disable=not cfg.progress, mininterval=1.0)
    return Vocab.build((s for _, s in bar), cfg.vocab_size, cfg.max_length, cfg.lowercase)


def _clip(model, cfg: Config, accelerator) -> float:
    """Gradient norm before clipping, then clipping (per tensor as S2V, or global). Under fp16 the
    gradients are unscaled first (once), so both act on the true gradient, not the loss-scaled one."""
    if getattr(accelerator, "scaler", None) is not None:
        accelerator.unscale_gradients()
    params = [p for p in model.parameters() if p.grad is not None]
    total = torch.norm(torch.stack([p.grad.detach().float().norm() for p in params])).item()
    if cfg.clip_norm > 0:
        if cfg.clip_mode == "global":
            torch.nn.utils.clip_grad_norm_(params, cfg.clip_norm)
        else:
            for p in params:
                torch.nn.utils.clip_grad_norm_([p], cfg.clip_norm)
    return total


def cpc_arguments(cfg: Config, doc_ids: torch.Tensor) -> dict:
    """The model's ``cpc=`` arguments (objective cpc) for a run of sentences with document ids ``doc_ids``."""
    return {"doc_ids": doc_ids, "length": cfg.cpc_length, "tau_plus": cfg.tau_plus, "temperature": cfg.temperature,
            "log_floor": cfg.log_floor}


def is_dev_batch(cfg: Config, index: int) -> bool:
    """Whether batch ``index`` of an epoch's stream is held out (the last of every ``dev_every``)."""
    return cfg.dev_every > 0 and index % cfg.dev_every == cfg.dev_every - 1


@torch.no_grad()
def dev_loss(model, vocab, batches, cfg: Config, accelerator) -> float:
    """Mean training objective over the held-out ``batches``, with the candidates training contrasts: each
    process scores its own block of each batch against that block's candidates, or, with
    ``--gather-across-processes`` (quick-thought heads), against the whole global batch's, each batch's loss then
    the mean over all its anchors as in training (so the same global batch gives the same dev loss on one process
    or several). Batches with no anchor that has a neighbour are left out."""
    model.eval()
    rank, device = accelerator.process_index, accelerator.device
    gathered = (cfg.gather_across_processes and accelerator.num_processes > 1
                and OBJECTIVES.get(cfg.objective).heads == "qt")
    total, count = torch.zeros((), device=device), torch.zeros((), device=device)
    for batch in batches:
        lo, hi = rank * cfg.batch_size, (rank + 1) * cfg.batch_size  # full batches: contiguous_batches drops the rest
        ids, lengths = vocab.batch(batch.sentences[lo:hi], device)
        doc_ids = torch.tensor(batch.doc_ids[lo:hi], device=device)
        if gathered:  # every process takes part in each batch's two collectives, whatever its block holds
            u, v = model(ids, lengths)
            v_all = gather_with_grad(v)[0]
            doc_all, pos = torch.tensor(batch.doc_ids, device=device), torch.arange(lo, hi, device=device)
            nb = neighbours(doc_all, pos)
            n_local = (nb.has_prev | nb.has_next).sum().float()
            part = (compute_loss(u, v_all, doc_all, pos, cfg.objective, cfg.tau_plus, cfg.beta, cfg.temperature,
                                 cfg.log_floor, cfg.self_score).float() * n_local
                    if n_local > 0 else torch.zeros((), device=device))
            summed = accelerator.reduce(torch.stack([part, n_local]), reduction="sum")
            if summed[1] > 0:
                total += summed[0] / summed[1]
                count += 1
            continue
        if OBJECTIVES.get(cfg.objective).heads == "cpc":
            loss, anchors = model(ids, lengths, cpc=cpc_arguments(cfg, doc_ids))
            if anchors:
                total += loss.float()
                count += 1
            continue
        u, v = model(ids, lengths)
        nb = neighbours(doc_ids, torch.arange(len(u), device=u.device))
        if not bool((nb.has_prev | nb.has_next).any()):
            continue
        total += compute_loss(u, v, doc_ids, None, cfg.objective, cfg.tau_plus, cfg.beta, cfg.temperature,
                              cfg.log_floor, cfg.self_score).float()
        count += 1
    model.train()
    if accelerator.num_processes > 1 and not gathered:  # gathered: every process already holds the global sums
        total, count = accelerator.reduce(total, reduction="sum"), accelerator.reduce(count, reduction="sum")
    return float(total / count) if count > 0 else float("nan")


class QuickThoughtApp(TrainingApp):
    """nlp_qt's parts of the shared loop (:func:`shared_losses.training.loop.run`): one optimiser step per global batch
    of consecutive sentences, epoch after epoch over the deterministic corpus stream; at each epoch's end the loss
    on its held-out batches (``--dev-every``)."""

    name = "nlp_qt"

    def __init__(self, cfg: Config):
        validate(cfg)
        self.word_vectors = read_checked_word_vectors(cfg)
        # the folder rules, read by every process before any of them writes
        super().__init__(RunHarness("nlp_qt", cfg.output_dir, resume=cfg.resume, overwrite=cfg.overwrite,
                                    free=Config.RESUME_FREE | unused_fields(cfg)))
        self.cfg = cfg
        self.accelerator = acc = make_accelerator(mixed_precision=cfg.mixed_precision, cpu=cfg.device == "cpu",
                                                  report_to=cfg.report_to)
        self.main, self.world, self.rank = acc.is_main_process, acc.num_processes, acc.process_index
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() != self.world:
            raise RuntimeError(
                f"torch.distributed has {dist.get_world_size()} processes but accelerate sees {self.world} "
                "(on CPU: accelerate launch --multi_gpu --num_processes N -m nlp_qt.train --device cpu ..., or "
                "torchrun --nproc_per_node N -m nlp_qt.train --device cpu ...)"
            )
        # num_processes: the global batch (and so the data skipped on resume) depends on it.
        # input files recorded by absolute path: a resume compares files, not spellings
        self._config = with_local_paths({**dataclasses.asdict(cfg), "num_processes": self.world}, PATH_FIELDS)
        self.global_bs = cfg.batch_size * self.world
        self.epoch, self.batch_in_epoch, self.sentences_seen, self.no_neighbour_batches = 0, 0, 0, 0
        self.dev_losses: list[dict] = []  # {"epoch", "step", "dev_loss"} after each epoch (--dev-every)
        self.held_out: list = []  # the held-out batches of the pass being read (--dev-every)
        self.end_dev_loss: float | None = None  # scored at the end of a run stopped inside a pass (--max-steps)
        self.last_loss, self.stop_now, self.covered, self.stats = float("nan"), False, None, CorpusStats()
        self.saved_stats: dict | None = None
        self.events = None  # the corpus stream's batches and epoch ends (made at the first step: a resume sets where)
        self.ended: list[LogRow] = []  # held-out losses of epochs ended since the last log row
        self.unlogged: LogRow | None = None  # the last step's row while --log-every has not logged it
        self.built = False

    @property
    def recorded_options(self):
        return self._config

    def compare_options(self, record):
        return with_local_paths(record, PATH_FIELDS), self._config  # a run's relative paths read from here

    def check_resume(self, saved):
        # the loop has compared the options the run was trained with (its checkpoint's record and config.json)
        h, cfg = self.harness, self.cfg
        if saved is None:
            return None
        # a finished run that this command asks for no more steps is left exactly as it is
        if not ((h.out / "summary.json").exists() and (h.out / "model").is_dir()):
            return None
        if trained_to_the_end(cfg, saved["step"], saved["epoch"]):
            summary = read_json_file(h.out / "summary.json", "run's summary")
            if self.main:
                print(f"{h.out} already holds this run, finished at step {summary['step']}; nothing to do "
                      "(pass a larger --max-steps or --epochs to train on)")
            return summary
        return None

    def build(self, saved):
        from accelerate.utils import set_seed

        cfg, acc, out = self.cfg, self.accelerator, self.harness.out
        self.harness.open(acc)
        vocab_path = out / "vocab.json"
        if self.main and not (saved is not None and vocab_path.exists()):
            build_vocab(cfg).save(vocab_path)
        self.harness.write_config(self._config)
        acc.wait_for_everyone()
        self.vocab = Vocab.load(vocab_path)
        if cfg.torch_threads > 0:
            torch.set_num_threads(cfg.torch_threads)
        else:
            threads_within_the_cpu_limit()
        set_seed(cfg.seed)
        model = QuickThought(model_config(cfg, len(self.vocab)))
        if self.word_vectors is not None:  # vocabulary words initialised from --word-vectors
            words, vectors, folded = vocabulary_vectors(self.word_vectors, self.vocab.itos[2:])
            self.covered = init_word_vectors(model, self.vocab.itos, words, vectors)
            self.word_vectors = None  # the rows are copied: do not hold the vectors for the whole run
            if self.main:
                print(f"word vectors: {self.covered} of {len(self.vocab) - 2} vocabulary words initialised from "
                      f"{cfg.word_vectors}" + (f" ({folded} of them by their lower-case form, which the file has "
                                               "instead)" if folded else ""))
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
        self.model, self.optimizer = acc.prepare(model, optimizer)
        self.watch = DivergenceWatch(self.model.parameters(), cfg.lr)
        self.fingerprint = corpus_fingerprint(cfg.corpus)
        self.built = True

    def state(self):
        # never a checkpoint of a diverged model (before its first optimiser step, last_loss is NaN: no loss yet)
        self.watch.check(self.step, self.loss_so_far())
        self.watch.checkpointed = self.step
        return {"step": self.step, "epoch": self.epoch, "batch_in_epoch": self.batch_in_epoch,
                "sentences_seen": self.sentences_seen, "no_neighbour_batches": self.no_neighbour_batches,
                "last_loss": self.last_loss, "corpus": self.fingerprint, "dev_losses": self.dev_losses,
                "corpus_stats": self.pass_stats(), "config": self._config}

    def load_state(self, state):
        cfg, ckpt_dir = self.cfg, self.harness.checkpoint_dir
        was = state.get("corpus")
        if was is not None and self.fingerprint is not None and was != self.fingerprint:
            change = (f"the corpus {cfg.corpus} changed since the checkpoint ({was['files']} files, {was['bytes']} "
                      f"bytes then; {self.fingerprint['files']} files, {self.fingerprint['bytes']} bytes now)")
            if not cfg.accept_corpus_change:
                raise ValueError(
                    f"cannot resume from {ckpt_dir}: {change}, so skipping the batches already used would misalign "
                    "the rest; resume with the corpus as it was, or, if only text not yet read changed (a bad file "
                    "fixed or removed), add --accept-corpus-change; or start a new --output-dir")
            warnings.warn(f"--accept-corpus-change: {change}; the batches already used are skipped by count, as "
                          "if the text read so far were unchanged")
        self.step, self.epoch, self.batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        self.sentences_seen = state["sentences_seen"]
        self.no_neighbour_batches = state.get("no_neighbour_batches", 0)
        self.dev_losses = list(state.get("dev_losses", []))
        self.last_loss = state.get("last_loss", self.last_loss)  # a finished run resumed keeps its final loss
        self.saved_stats = state.get("corpus_stats")  # and its pass's counts (older checkpoints have none)
        self.watch.resumed(self.step)
        if self.main:
            print(f"resumed from {ckpt_dir} at step {self.step} (epoch {self.epoch}, batch {self.batch_in_epoch})")

    def done(self):
        return self.cfg.max_steps is not None and self.step >= self.cfg.max_steps

    def progress(self):
        self.bar = tqdm(total=self.cfg.max_steps, initial=self.step, disable=not (self.main and self.cfg.progress),
                        unit="step", dynamic_ncols=True, mininterval=bar_interval())
        return self.bar

    def corpus_events(self, first_epoch: int, skip: int):
        """What the deterministic corpus stream holds from epoch ``first_epoch`` on, as events; it changes nothing
        of the run (:meth:`next_batch` does): ``("epoch", (stats, held_out))`` when an epoch's pass starts (``stats``
        and the list of its held-out batches fill as the stream is read), ``("held", index)`` for a held-out batch,
        ``("batch", batch)`` for a global batch to train on (the first epoch's before ``skip`` were used before a
        resume) and ``("end", held_out)`` when the pass ends, with its held-out batches (the same every epoch)."""
        cfg = self.cfg
        for _ in range(first_epoch, cfg.epochs):
            stats, held_out = CorpusStats(), []
            yield "epoch", (stats, held_out)
            for index, batch in enumerate(contiguous_batches(sentence_stream(cfg, stats), self.global_bs)):
                if is_dev_batch(cfg, index):
                    if len(held_out) < cfg.dev_max_batches:
                        held_out.append(batch)
                    yield "held", index
                elif index >= skip:
                    yield "batch", batch
            yield "end", held_out
            skip = 0

    def next_batch(self):
        """The next global batch to train on (None: the epochs are done), keeping the counters a resume needs; an epoch
        that ends on the way has its held-out loss computed on the model as trained so far (logged with the next
        row, or by :meth:`finish` after the last epoch)."""
        cfg = self.cfg
        if self.events is None:
            self.events = self.corpus_events(self.epoch, self.batch_in_epoch)
            self.t0 = None
        for kind, value in self.events:
            if kind == "batch":
                if self.t0 is None:  # the rate counts from the first batch trained, not from the batches a resume
                    self.t0, self.s0 = time.perf_counter(), self.sentences_seen  # reads past (minutes, late on)
                return value
            if kind == "epoch":
                self.stats, self.held_out = value
            elif kind == "held":
                self.batch_in_epoch = max(self.batch_in_epoch, value + 1)
            else:  # the pass ended
                self.epoch += 1
                self.batch_in_epoch = 0
                if value:
                    row = {"epoch": self.epoch, "step": self.step,
                           "dev_loss": dev_loss(self.model, self.vocab, value, cfg, self.accelerator)}
                    self.dev_losses.append(row)
                    self.ended.append(LogRow(row, scalars={"dev/loss": row["dev_loss"]}))
                    if self.main:
                        self.bar.write(f"epoch {self.epoch}: dev loss {row['dev_loss']:.4f} over {len(value)} "
                                       "held-out batches")
                if self.step == 0 and self.stats.sentences < self.global_bs:
                    raise ValueError(f"corpus has {self.stats.sentences} sentences, fewer than one batch of "
                                     f"{self.global_bs}; lower --batch-size")
        return None

    def train_step(self):
        try:
            batch = self.next_batch()
        except CorpusError as err:
            if not (self.built and self.step > 0):
                raise
            # a fault met in text the vocabulary pass never read (a large corpus): keep every step trained
            self.harness.checkpoint(self.state())
            raise CorpusError(f"{err} (met at step {self.step}: the checkpoint holds every step trained; fix or "
                              "remove that text, then continue with --resume --accept-corpus-change)") from None
        if batch is None:
            return None
        cfg, acc = self.cfg, self.accelerator
        loss, n_global = self.exchange(*self.batch_loss(batch))
        self.optimizer.zero_grad(set_to_none=True)
        acc.backward(loss)
        grad_norm = _clip(self.model, cfg, acc)
        if n_global > 0:
            self.optimizer.step()
        else:  # a zero gradient would still move Adam's parameters by its momentum: every process skips
            self.no_neighbour_batches += 1
            if getattr(acc, "scaler", None) is not None:
                acc.scaler.update()  # close the unscale_ of _clip, as a step would
        self.step += 1
        self.batch_in_epoch += 1
        self.sentences_seen += self.global_bs
        # logged loss: mean over processes (each process's loss covers its own anchors); a skipped batch has none
        if n_global > 0:
            self.last_loss = (acc.reduce(loss.detach(), reduction="mean") if self.world > 1 else loss.detach()).item()
        self.rate = (self.sentences_seen - self.s0) / max(time.perf_counter() - self.t0, 1e-9)
        # first the held-out loss of each epoch that ended before this step (a row of its own), then the step's
        rows, self.ended = self.ended, []
        row = {"step": self.step, "epoch": self.epoch, "loss": self.last_loss if n_global > 0 else None,
               "grad_norm": grad_norm, "sentences": self.sentences_seen, "sentences_per_s": self.rate}
        logged = LogRow(row, scalars={f"train/{k}": row[k] for k in ("loss", "grad_norm", "sentences_per_s")
                                      if row[k] is not None})
        # every --log-every steps, the first, and the last of --max-steps (an end at the epochs' is logged by finish)
        if self.step % cfg.log_every and self.step != 1 and not self.done():
            self.unlogged = logged
            return rows
        self.unlogged = None
        self.watch.check(self.step, self.loss_so_far())
        return rows + [logged]

    def loss_so_far(self) -> float | None:
        """The loss of the last optimiser step (None before the first: batches without a neighbour make none)."""
        return None if math.isnan(self.last_loss) else self.last_loss

    def finish(self):
        if self.ended:  # the last epoch's held-out loss, found when the stream ran out
            rows, self.ended = self.ended, []
            self.log(rows)
        if self.unlogged is not None and self.unlogged.values["step"] == self.step:  # the last step of the last epoch
            self.log([self.unlogged])
            self.unlogged = None
        if self.cfg.dev_every and not (self.dev_losses and self.dev_losses[-1]["step"] == self.step):
            if self.events is not None:
                self.score_held_out_at_the_end()
            elif self.epoch < self.cfg.epochs:  # resumed at its last step: nothing trained, no stream opened
                self.score_resumed_end()
        super().finish()

    def score_resumed_end(self) -> None:
        """The held-out loss at the end for a run resumed at its last step (stopped after its final checkpoint, before
        its summary): the same batches the uninterrupted run's end scored (its pass read from the start, to the first
        ``dev_max_batches`` held-out batches or the pass's end), on the model as checkpointed; the run's own stream,
        statistics and batches are left as they were (summary.json's statistics are the checkpoint's). Without it the
        summary's dev_loss was null and a warning said no batch was held out."""
        kept = self.events, self.stats, self.held_out
        self.events = self.corpus_events(self.epoch, self.batch_in_epoch)
        _, (self.stats, self.held_out) = next(self.events)  # the pass's "epoch" event: its statistics and batches
        try:
            self.score_held_out_at_the_end()
        finally:
            self.events, self.stats, self.held_out = kept

    def score_held_out_at_the_end(self) -> None:
        """--max-steps stopped the run inside a pass: the held-out loss of the model as trained, on the pass's held-out
        batches (the stream is read on, not trained on, to the first ``dev_max_batches`` of them or the pass's end:
        the same batches an epoch's end scores). Reported in the summary, not logged nor checkpointed, so a run
        resumed with a larger --max-steps goes on exactly as the uninterrupted run."""
        cfg, counted = self.cfg, copy.deepcopy(self.stats)
        try:
            while len(self.held_out) < cfg.dev_max_batches and next(self.events, ("end", None))[0] != "end":
                pass
        except CorpusError as err:  # in text never trained on: the run itself is whole
            warnings.warn(f"the held-out loss at the end was not scored: reading on to the held-out batches met {err}")
            return
        finally:  # the pass's statistics (summary.json, the final checkpoint) count what was trained on
            self.stats = counted
        if self.held_out:
            self.end_dev_loss = dev_loss(self.model, self.vocab, self.held_out, cfg, self.accelerator)
            if self.main:
                print(f"step {self.step} (the end): dev loss {self.end_dev_loss:.4f} over {len(self.held_out)} "
                      "held-out batches")

    def batch_loss(self, batch):
        """(this process's loss on its block of the global batch, its count of anchors with a neighbour)."""
        cfg, acc, model = self.cfg, self.accelerator, self.model
        model.train()
        lo, hi = self.rank * cfg.batch_size, (self.rank + 1) * cfg.batch_size
        ids, lengths = self.vocab.batch(batch.sentences[lo:hi], acc.device)
        if OBJECTIVES.get(cfg.objective).heads == "cpc":  # sequences of this process's block (no gathering)
            doc_ids = torch.tensor(batch.doc_ids[lo:hi], device=acc.device)
            loss, anchors = model(ids, lengths, cpc=cpc_arguments(cfg, doc_ids))
            return loss, torch.tensor(anchors, device=acc.device)
        if cfg.gather_across_processes:
            u, v = model(ids, lengths)
            v_all, _, _ = gather_with_grad(v)
            doc_ids = torch.tensor(batch.doc_ids, device=acc.device)
            anchor_pos = torch.arange(lo, hi, device=acc.device)
        else:
            u, v_all = model(ids, lengths)
            doc_ids = torch.tensor(batch.doc_ids[lo:hi], device=acc.device)
            anchor_pos = None
        nb = neighbours(doc_ids, torch.arange(len(u), device=u.device) if anchor_pos is None else anchor_pos)
        n_local = (nb.has_prev | nb.has_next).sum()  # anchors with a neighbour: the loss is their mean
        if n_local == 0:  # only one-sentence documents here: nothing to learn; a zero loss keeps processes in step
            return (u.sum() + v_all.sum()) * 0.0, n_local
        return compute_loss(u, v_all, doc_ids, anchor_pos, cfg.objective, cfg.tau_plus, cfg.beta, cfg.temperature,
                            cfg.log_floor, cfg.self_score), n_local

    def exchange(self, loss, n_local):
        """One exchange between processes: the global anchor count, whether any loss is not finite (all processes
        then stop together; one stopping alone left the others waiting forever) and whether any was asked to
        stop. Returns (the loss weighted by this process's share of the anchors, the global anchor count)."""
        world = self.world
        flags = torch.stack([n_local.float(), (~torch.isfinite(loss.detach())).float(),
                             torch.tensor(float(self.harness.stop.requested), device=n_local.device)])
        if world > 1:
            flags = self.accelerator.reduce(flags, reduction="sum")
        n_global, non_finite = int(flags[0].item()), bool(flags[1].item())
        self.stop_now = bool(flags[2].item())  # every process stops after the same step
        if non_finite:  # the loss of this step (on some process) is NaN or infinite: stop with one line
            self.watch.check(self.step + 1, math.nan)
        if world > 1 and n_local > 0:
            # DDP averages the processes' gradients (and the gather sums them), so the step is that of one mean
            # over all anchors, as on one process, also when document ends leave the processes different counts.
            loss = loss * (float(n_local) * world / n_global)
        return loss, n_global

    def postfix(self):
        return {"loss": f"{self.last_loss:.4f}", "sent_per_s": f"{self.rate:.0f}", "epoch": self.epoch}

    def checkpoint_due(self):
        return self.harness.checkpoint_due(self.step, self.cfg.checkpoint_every)

    def stop_requested(self):
        return self.stop_now or (self.world == 1 and self.harness.stop.requested)

    def pass_stats(self) -> dict:
        """The counts of the corpus pass the run was last in, so far: this process's reading of it (a resume reads
        its pass again from the start), else (a finished run resumed, nothing left to read) its checkpoint's."""
        if self.events is None and self.saved_stats is not None:
            return self.saved_stats
        return self.stats.as_dict()

    def export(self):
        unwrapped = self.accelerator.unwrap_model(self.model)
        save_model(unwrapped, self.vocab, self.harness.out / "model",
                   {"train_config": dataclasses.asdict(self.cfg), "step": self.step})

    def summary(self):
        summary = {"step": self.step, "epoch": self.epoch, "sentences_seen": self.sentences_seen,
                   "final_loss": self.loss_so_far(), "corpus_stats_last_pass": self.pass_stats(),
                   "vocab_size": len(self.vocab), "no_neighbour_batches": self.no_neighbour_batches,
                   "optimizer_steps": self.step - self.no_neighbour_batches,
                   # torch's CPU threads (OMP_NUM_THREADS, else torch's choice from the cores): the order of the
                   # sums, so a CPU run's weights in their last digits, depend on it
                   "torch_threads": torch.get_num_threads()}
        if self.covered is not None:
            summary["word_vectors_covered"] = self.covered
        if self.cfg.dev_every:
            summary["dev_losses"] = self.dev_losses
            summary["dev_loss"] = (self.end_dev_loss if self.end_dev_loss is not None
                                   else self.dev_losses[-1]["dev_loss"] if self.dev_losses else None)
        return summary

    def report(self) -> None:
        """What the user should know about the finished run (main process)."""
        stats, out = self.stats, self.harness.out
        if stats.undecodable_lines:
            print(f"corpus: skipped {stats.undecodable_lines} lines that are not UTF-8 text (undecodable, or holding "
                  f"NUL bytes; e.g. {stats.examples[:3]})")
        if self.no_neighbour_batches:
            print(f"warning: {self.no_neighbour_batches} of {self.step} batches had no sentence with a neighbour in "
                  "its own document (one-sentence documents?); their optimiser step was skipped. Check --doc-boundary.")
        if self.cfg.dev_every and self.end_dev_loss is None and not self.dev_losses:
            print(f"warning: --dev-every {self.cfg.dev_every} held out no batch (an epoch has fewer than "
                  f"{self.cfg.dev_every} batches); no dev loss")
        skipped = f" ({self.step - self.no_neighbour_batches} optimiser steps)" if self.no_neighbour_batches else ""
        cfg = self.cfg
        why = (f"--max-steps {cfg.max_steps}" if cfg.max_steps is not None and self.step >= cfg.max_steps
               else f"--epochs {cfg.epochs}: {cfg.epochs} pass{'es' if cfg.epochs != 1 else ''} over the corpus")
        print(f"done: {self.step} steps{skipped}, {self.sentences_seen} sentences (the end of {why}); model in "
              f"{out / 'model'}")


def train(cfg: Config) -> dict:
    """Run (or resume) training; returns a summary dict (also written to ``summary.json``). The caller's torch thread
    count is given back (--torch-threads sets the run's)."""
    with torch_settings_given_back():
        app = QuickThoughtApp(cfg)
        summary = run_app(app)
        if app.built:
            if app.main:
                app.report()
            app.accelerator.wait_for_everyone()
        return summary


def main(argv=None) -> None:
    cfg = from_cli(argv)
    summary = train(cfg)
    print_run_result("nlp_qt", cfg.output_dir, summary["step"],
                     {k: summary.get(k) for k in ("final_loss", "sentences_seen", "vocab_size")})


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
