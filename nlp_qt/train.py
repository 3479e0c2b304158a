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

import dataclasses
import itertools
import sys
import time
from pathlib import Path

import torch
import tyro
from tqdm.auto import tqdm

from shared_losses import gather_with_grad
from shared_losses.harness import RunHarness
from shared_losses.runtime import load_checkpoint, print_run_result, read_json_file

from .config import Config
from .corpus import CorpusStats, contiguous_batches, corpus_fingerprint, iter_corpus
from .model import ModelConfig, QuickThought, init_word_vectors, save_model
from .objectives import check_fields, compute_loss, neighbours
from .vocab import Vocab

RESUME_FREE = Config.RESUME_FREE  # the fields a resumed run may change (declared by the configuration)


def validate(cfg: Config) -> None:
    if not cfg.corpus:
        raise ValueError("--corpus is required (a text file/folder, a .jsonl/.parquet file, or hf:NAME)")
    if cfg.batch_size < 2:
        raise ValueError(f"batch_size must be >= 2, got {cfg.batch_size}")
    if not 0.0 <= cfg.tau_plus < 1.0:
        raise ValueError(f"tau_plus must be in [0, 1), got {cfg.tau_plus}")
    check_fields(cfg.objective, {"tau_plus": cfg.tau_plus, "beta": cfg.beta})  # the objectives' table says what applies
    if cfg.self_score == "zero" and cfg.objective != "qt":
        raise ValueError("self_score zero is only defined for objective qt")
    if cfg.epochs < 1 or cfg.lr <= 0 or cfg.log_every < 1 or cfg.checkpoint_every < 1:
        raise ValueError("epochs, lr, log_every and checkpoint_every must be positive")
    # checked here, before the vocabulary pass over the corpus, not at the first step or never
    if not cfg.temperature > 0:
        raise ValueError(f"temperature must be > 0, got {cfg.temperature}")
    if cfg.clip_norm < 0:
        raise ValueError(f"clip_norm must be >= 0 (0 disables clipping), got {cfg.clip_norm}")
    if cfg.max_steps is not None and cfg.max_steps < 0:
        raise ValueError(f"max_steps must be >= 0, got {cfg.max_steps}")
    if cfg.dev_every == 1 or cfg.dev_every < 0:
        raise ValueError(f"dev_every must be 0 (no held-out batches) or >= 2 (every Nth batch held out), got "
                         f"{cfg.dev_every}")
    if cfg.encoder == "bow" and cfg.encoder_dim != cfg.word_dim:
        raise ValueError(f"--encoder bow: the sentence vector is the mean word embedding, so --encoder-dim must equal "
                         f"--word-dim; got --encoder-dim {cfg.encoder_dim}, --word-dim {cfg.word_dim} (set --encoder-dim "
                         f"{cfg.word_dim})")
    if cfg.dev_max_batches < 1:
        raise ValueError(f"dev_max_batches must be >= 1, got {cfg.dev_max_batches}")
    for name in ("max_sentences", "vocab_sentences"):
        if getattr(cfg, name) is not None and getattr(cfg, name) < 1:
            raise ValueError(f"{name} must be >= 1 (or None for the whole corpus), got {getattr(cfg, name)}")


def read_checked_word_vectors(cfg: Config):
    """``(words, vectors)`` of ``--word-vectors``, checked against the run's ``--word-dim`` and ``--lowercase``
    (read once, before the folder or the corpus is touched); None without the option."""
    if cfg.word_vectors is None:
        return None
    from .bow import read_word_vectors

    words, vectors, lowercase = read_word_vectors(cfg.word_vectors)
    if vectors.shape[1] != cfg.word_dim:
        raise ValueError(f"--word-vectors {cfg.word_vectors} has {vectors.shape[1]}-d vectors but --word-dim is "
                         f"{cfg.word_dim}; set --word-dim {vectors.shape[1]}")
    if lowercase != cfg.lowercase:
        raise ValueError(f"--word-vectors {cfg.word_vectors} was trained with lowercase={lowercase}, this run has "
                         f"--lowercase {cfg.lowercase}: its words would not match the vocabulary's")
    return words, vectors


def sentence_stream(cfg: Config, stats: CorpusStats | None = None):
    it = iter_corpus(
        cfg.corpus, stats, text_field=cfg.text_field, doc_field=cfg.doc_field, doc_boundary=cfg.doc_boundary,
        one_sentence_per_line=cfg.one_sentence_per_line,
    )
    if cfg.max_sentences is not None:
        it = itertools.islice(it, cfg.max_sentences)
    return it


def build_vocab(cfg: Config) -> Vocab:
    stream = sentence_stream(cfg)
    if cfg.vocab_sentences is not None:
        stream = itertools.islice(stream, cfg.vocab_sentences)
    return Vocab.build((s for _, s in stream), cfg.vocab_size, cfg.max_len, cfg.lowercase)


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


def is_dev_batch(cfg: Config, index: int) -> bool:
    """Whether batch ``index`` of an epoch's stream is held out (the last of every ``dev_every``)."""
    return cfg.dev_every > 0 and index % cfg.dev_every == cfg.dev_every - 1


@torch.no_grad()
def dev_loss(model, vocab, batches, cfg: Config, accelerator) -> float:
    """Mean training objective over the held-out ``batches`` (each process scores its own block of each batch
    against that block's candidates; batches whose block has no anchor with a neighbour are left out)."""
    model.eval()
    rank = accelerator.process_index
    total, count = torch.zeros((), device=accelerator.device), torch.zeros((), device=accelerator.device)
    for batch in batches:
        lo, hi = rank * cfg.batch_size, (rank + 1) * cfg.batch_size  # full batches: contiguous_batches drops the rest
        ids, lengths = vocab.batch(batch.sentences[lo:hi], accelerator.device)
        u, v = model(ids, lengths)
        doc_ids = torch.tensor(batch.doc_ids[lo:hi], device=accelerator.device)
        nb = neighbours(doc_ids, torch.arange(len(u), device=u.device))
        if not bool((nb.has_prev | nb.has_next).any()):
            continue
        total += compute_loss(u, v, doc_ids, None, cfg.objective, cfg.tau_plus, cfg.beta, cfg.temperature,
                              cfg.log_floor, cfg.self_score).float()
        count += 1
    model.train()
    if accelerator.num_processes > 1:
        total, count = accelerator.reduce(total, reduction="sum"), accelerator.reduce(count, reduction="sum")
    return float(total / count) if count > 0 else float("nan")


def finished_summary(cfg: Config, out: Path) -> dict | None:
    """The summary of the finished run in ``out`` if ``cfg`` asks it for no more training (its
    checkpoint already reached --max-steps or --epochs), else None."""
    summary_path = out / "summary.json"
    if not (summary_path.exists() and (out / "model").is_dir()):
        return None
    state = load_checkpoint(None, out / "checkpoint")
    if cfg.max_steps is not None and state["step"] >= cfg.max_steps:
        return read_json_file(summary_path, "run's summary")
    if state["epoch"] >= cfg.epochs:
        return read_json_file(summary_path, "run's summary")
    return None


def train(cfg: Config) -> dict:
    """Run (or resume) training; returns a summary dict (also written to ``summary.json``)."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    validate(cfg)
    word_vectors = read_checked_word_vectors(cfg)
    # the folder rules, read by every process before any of them writes
    harness = RunHarness("nlp_qt", cfg.output_dir, resume=cfg.resume, overwrite=cfg.overwrite, free=Config.RESUME_FREE)
    accelerator = Accelerator(mixed_precision=cfg.mixed_precision, cpu=cfg.device == "cpu")
    main = accelerator.is_main_process
    world, rank = accelerator.num_processes, accelerator.process_index
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized() and dist.get_world_size() != world:
        raise RuntimeError(
            f"torch.distributed has {dist.get_world_size()} processes but accelerate sees {world} "
            "(on CPU, launch with ACCELERATE_USE_CPU=true torchrun ... or accelerate launch with a multi-CPU config)"
        )
    out, ckpt_dir = harness.out, harness.checkpoint_dir

    # --- configuration and vocabulary (reused on resume) ---------------------------------------
    # num_processes: the global batch (and so the data skipped on resume) depends on it.
    config = {**dataclasses.asdict(cfg), "num_processes": world}
    cfg_path = out / "config.json"
    resuming = harness.resuming
    if resuming and cfg_path.exists():
        harness.refuse_config_changes(read_json_file(cfg_path, "run's configuration"), config, where=ckpt_dir,
                                      legacy={"num_processes": world, "encoder": "gru"})
    if resuming:
        done_summary = finished_summary(cfg, out)
        if done_summary is not None:  # a finished run is left exactly as it is
            if main:
                print(f"{out} already holds this run, finished at step {done_summary['step']}; nothing to do "
                      "(pass a larger --max-steps or --epochs to train on)")
            return done_summary
    harness.open(accelerator)
    vocab_path = out / "vocab.json"
    if main and not (resuming and vocab_path.exists()):
        build_vocab(cfg).save(vocab_path)
    harness.write_config(config)
    accelerator.wait_for_everyone()
    vocab = Vocab.load(vocab_path)

    set_seed(cfg.seed)
    model = QuickThought(ModelConfig(len(vocab), cfg.word_dim, cfg.encoder_dim, cfg.bidirectional, cfg.encoder))
    covered = None  # vocabulary words initialised from --word-vectors
    if word_vectors is not None:
        covered = init_word_vectors(model, vocab.itos, *word_vectors)
        word_vectors = None  # the rows are copied: do not hold the vectors for the whole run
        if main:
            print(f"word vectors: {covered} of {len(vocab) - 2} vocabulary words initialised from {cfg.word_vectors}")
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    model, optimizer = accelerator.prepare(model, optimizer)

    step, epoch, batch_in_epoch, sentences_seen = 0, 0, 0, 0
    no_neighbour_batches = 0  # batches whose anchors had no neighbour in their document (nothing to learn)
    dev_losses: list[dict] = []  # {"epoch", "step", "dev_loss"} after each epoch (--dev-every)
    last_loss = float("nan")
    fingerprint = corpus_fingerprint(cfg.corpus)
    if resuming:
        state = load_checkpoint(accelerator, ckpt_dir)
        was = state.get("corpus")  # absent in checkpoints written before the check existed
        if was is not None and fingerprint is not None and was != fingerprint:
            raise ValueError(
                f"cannot resume from {ckpt_dir}: the corpus {cfg.corpus} changed since the checkpoint "
                f"({was['files']} files, {was['bytes']} bytes then; {fingerprint['files']} files, "
                f"{fingerprint['bytes']} bytes now), so skipping the batches already used would misalign the "
                "rest; resume with the corpus as it was, or start a new --output-dir"
            )
        step, epoch, batch_in_epoch = state["step"], state["epoch"], state["batch_in_epoch"]
        sentences_seen = state["sentences_seen"]
        no_neighbour_batches = state.get("no_neighbour_batches", 0)
        dev_losses = list(state.get("dev_losses", []))
        last_loss = state.get("last_loss", last_loss)  # a finished run resumed keeps its final loss
        if main:
            print(f"resumed from {ckpt_dir} at step {step} (epoch {epoch}, batch {batch_in_epoch})")
    harness.start_logging(step if resuming else None, config=config)

    def state() -> dict:
        return {"step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch, "sentences_seen": sentences_seen,
                "no_neighbour_batches": no_neighbour_batches, "last_loss": last_loss, "corpus": fingerprint,
                "dev_losses": dev_losses}

    global_bs = cfg.batch_size * world
    stats = CorpusStats()
    done = cfg.max_steps is not None and step >= cfg.max_steps
    bar = tqdm(total=cfg.max_steps, initial=step, disable=not (main and cfg.progress), unit="step", dynamic_ncols=True,
               mininterval=0.1 if sys.stderr.isatty() else 10.0)
    t0, s0 = time.perf_counter(), sentences_seen
    with harness.signals() as stop:  # Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130
        while epoch < cfg.epochs and not done:
            stats = CorpusStats()
            batches = contiguous_batches(sentence_stream(cfg, stats), global_bs)
            held_out = []  # this epoch's held-out batches (the same every epoch: the stream is deterministic)
            for index, batch in enumerate(batches):
                if is_dev_batch(cfg, index):
                    if len(held_out) < cfg.dev_max_batches:
                        held_out.append(batch)
                    batch_in_epoch = max(batch_in_epoch, index + 1)
                    continue
                if index < batch_in_epoch:  # what a resumed run already used
                    continue
                model.train()
                lo, hi = rank * cfg.batch_size, (rank + 1) * cfg.batch_size
                if cfg.gather_across_processes:
                    ids, lengths = vocab.batch(batch.sentences[lo:hi], accelerator.device)
                    u, v = model(ids, lengths)
                    v_all, _, _ = gather_with_grad(v)
                    doc_ids = torch.tensor(batch.doc_ids, device=accelerator.device)
                    anchor_pos = torch.arange(lo, hi, device=accelerator.device)
                else:
                    ids, lengths = vocab.batch(batch.sentences[lo:hi], accelerator.device)
                    u, v_all = model(ids, lengths)
                    doc_ids = torch.tensor(batch.doc_ids[lo:hi], device=accelerator.device)
                    anchor_pos = None
                nb = neighbours(doc_ids, torch.arange(len(u), device=u.device) if anchor_pos is None else anchor_pos)
                n_local = (nb.has_prev | nb.has_next).sum()  # anchors with a neighbour: the loss is their mean
                if n_local > 0:
                    loss = compute_loss(
                        u, v_all, doc_ids, anchor_pos, cfg.objective, cfg.tau_plus, cfg.beta, cfg.temperature,
                        cfg.log_floor, cfg.self_score,
                    )
                else:  # only one-sentence documents here: nothing to learn; a zero loss keeps processes in step
                    loss = (u.sum() + v_all.sum()) * 0.0
                # One exchange between processes: the global anchor count and whether any loss is not finite
                # (all processes then stop together; one stopping alone left the others waiting forever).
                flags = torch.stack([n_local.float(), (~torch.isfinite(loss.detach())).float(),
                                     torch.tensor(float(stop.requested), device=n_local.device)])
                if world > 1:
                    flags = accelerator.reduce(flags, reduction="sum")
                n_global, non_finite = int(flags[0].item()), bool(flags[1].item())
                stop_now = bool(flags[2].item())  # every process stops after the same step
                if non_finite:
                    raise FloatingPointError(f"non-finite loss at step {step} (this process: {loss.item()})")
                if world > 1 and n_local > 0:
                    # This process's share of the global anchors: DDP averages the processes' gradients (and
                    # the gather sums them), so the step is that of one mean over all anchors, as on one
                    # process, also when document ends leave the processes different anchor counts.
                    loss = loss * (float(n_local) * world / n_global)
                optimizer.zero_grad(set_to_none=True)
                accelerator.backward(loss)
                grad_norm = _clip(model, cfg, accelerator)
                if n_global > 0:
                    optimizer.step()
                else:  # a zero gradient would still move Adam's parameters by its momentum: every process skips
                    no_neighbour_batches += 1
                    if getattr(accelerator, "scaler", None) is not None:
                        accelerator.scaler.update()  # close the unscale_ of _clip, as a step would
                step += 1
                batch_in_epoch += 1
                sentences_seen += global_bs
                # logged loss: mean over processes (each process's loss covers its own anchors)
                last_loss = (accelerator.reduce(loss.detach(), reduction="mean") if world > 1 else loss.detach()).item()
                rate = (sentences_seen - s0) / max(time.perf_counter() - t0, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{last_loss:.4f}", sent_per_s=f"{rate:.0f}", epoch=epoch, refresh=False)
                if step % cfg.log_every == 0 or step == 1:
                    row = {"step": step, "epoch": epoch, "loss": last_loss, "grad_norm": grad_norm,
                           "sentences": sentences_seen, "sentences_per_s": rate}
                    harness.csv().log(row)
                    for k in ("loss", "grad_norm", "sentences_per_s"):
                        harness.tb.add_scalar(f"train/{k}", row[k], step)
                due = harness.checkpoint_due(step, cfg.checkpoint_every)
                if due:
                    harness.checkpoint(state())
                if stop_now or (world == 1 and stop.requested):
                    bar.close()
                    raise harness.interrupted(f"step {step}", None if due else state())
                if cfg.max_steps is not None and step >= cfg.max_steps:
                    done = True
                    break
            else:
                epoch += 1
                batch_in_epoch = 0
                if held_out:
                    dev_losses.append({"epoch": epoch, "step": step,
                                       "dev_loss": dev_loss(model, vocab, held_out, cfg, accelerator)})
                    harness.csv().log(dev_losses[-1])
                    harness.tb.add_scalar("dev/loss", dev_losses[-1]["dev_loss"], step)
                    if main:
                        bar.write(f"epoch {epoch}: dev loss {dev_losses[-1]['dev_loss']:.4f} over "
                                  f"{len(held_out)} held-out batches")
                if step == 0 and stats.sentences < global_bs:
                    raise ValueError(
                        f"corpus has {stats.sentences} sentences, fewer than one batch of {global_bs}; "
                        "lower --batch-size"
                    )
    bar.close()
    harness.checkpoint(state())
    summary = {
        "step": step, "epoch": epoch, "sentences_seen": sentences_seen, "final_loss": last_loss,
        "corpus_stats_last_pass": stats.as_dict(), "vocab_size": len(vocab),
        "no_neighbour_batches": no_neighbour_batches,
    }
    if covered is not None:
        summary["word_vectors_covered"] = covered
    if cfg.dev_every:
        summary["dev_losses"] = dev_losses
        summary["dev_loss"] = dev_losses[-1]["dev_loss"] if dev_losses else None
    if main:
        unwrapped = accelerator.unwrap_model(model)
        save_model(unwrapped, vocab, out / "model", {"train_config": dataclasses.asdict(cfg), "step": step})
    harness.finish(summary)
    if main:
        if stats.undecodable_lines:
            print(f"corpus: skipped {stats.undecodable_lines} lines that are not UTF-8 (e.g. {stats.examples[:3]})")
        if no_neighbour_batches:
            print(f"warning: {no_neighbour_batches} of {step} batches had no sentence with a neighbour in its own "
                  "document (one-sentence documents?); their optimiser step was skipped. Check --doc-boundary.")
        print(f"done: {step} steps, {sentences_seen} sentences; model in {out / 'model'}")
    accelerator.wait_for_everyone()
    return summary


def main(argv=None) -> None:
    cfg = tyro.cli(Config, args=argv)
    summary = train(cfg)
    print_run_result("nlp_qt", cfg.output_dir, summary["step"],
                     {k: summary.get(k) for k in ("final_loss", "sentences_seen", "vocab_size")})


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
