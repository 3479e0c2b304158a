"""Few-shot fine-tuning with CE (+ SupCon / puNCE), and the PU pipeline.

    python -m fewshot.train --help
    python -m fewshot.train --encoder minilm --pooling mean --dataset drugreview --objective ce+punce --n-labeled 20
    accelerate launch -m fewshot.train --encoder roberta-base --dataset glue/sst2 --n-labeled 100

Writes into --output-dir: config.json, sample.json (the drawn indices), log.csv, tb/ (TensorBoard),
checkpoint/ (atomic, resumable with --resume), model/ (the classifier as a Hugging Face model: fewshot.export)
and metrics.json.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
from tqdm import tqdm

from shared_losses.runtime import load_checkpoint, print_run_result

from .config import PRESETS, FewShotConfig, preset_config
from .images import is_image_dataset
from .model import FewShotModel
from .objectives import fewshot_loss, roles_from_labels
from .objectives import get as get_objective
from .pu_pipeline import run_pu
# The run's set-up lives in fewshot.run (shared with the PU pipeline); its names stay importable from here.
from .run import (DEV_PROBE_CS, DEV_SEED, RESUME_FREE, Batches, Run, check_resume_config, check_steps,  # noqa: F401
                  claim, dev_split, embed_all, eval_subset, finished_metrics, forward_views, freeze_lower_layers,
                  head_accuracies, head_accuracy, logreg_accuracy, majority_rates, make_accelerator, prepare,
                  process_share, read_json, resolve_prior, run_metrics, tokenize,
                  transformer_layers)


def train(cfg: FewShotConfig, model: FewShotModel | None = None, tokenizer=None) -> dict:
    cfg.validate()
    harness = claim(cfg)
    if is_image_dataset(cfg.dataset):
        from .image_run import run_images

        return run_images(cfg, harness)
    done = finished_metrics(cfg, harness)
    if done is not None:
        print(f"{harness.out} already holds this run, finished; nothing to do (pass a larger --max-steps to train on)")
        return done
    if cfg.setting == "pu":
        return run_pu(cfg, model, tokenizer, harness)
    run = prepare(cfg, model, tokenizer, harness)
    out, acc, device, sample, tokenizer = run.out, run.acc, run.acc.device, run.sample, run.tokenizer
    train_x, train_y, eval_x, eval_y, prior = run.train_x, run.train_y, run.eval_x, run.eval_y, run.prior
    model = run.model
    if not get_objective(cfg.objective).trains_encoder:
        return run_baseline(cfg, run)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay)
    model, opt = acc.prepare(model, opt)
    raw = acc.unwrap_model(model)
    # Global batches (the same draw on every process), each process training on its share.
    world, rank = acc.num_processes, acc.process_index
    lab_batches = Batches(sample.labeled, min(cfg.batch_labeled * world, cfg.n_labeled), cfg.seed)
    # Only puNCE reads unlabeled examples (CE and SupCon need labels): the others draw none, so no
    # step encodes examples that no term of its loss sees.
    unl_batches = Batches(sample.unlabeled, cfg.batch_unlabeled * world if get_objective(cfg.objective).reads_unlabeled else 0,
                          cfg.seed + 1)

    step, history = 0, []
    if run.resuming:
        state = load_checkpoint(acc, out / "checkpoint")
        check_resume_config(cfg, state["config"], world)
        step, history = state["step"], state["history"]
        lab_batches.load_state_dict(state["labeled_batches"])
        unl_batches.load_state_dict(state["unlabeled_batches"])
    harness.start_logging(step if run.resuming else None, config=dataclasses.asdict(cfg))

    def state() -> dict:
        return {"step": step, "history": history, "config": {**dataclasses.asdict(cfg), "num_processes": world},
                "pooling": run.pooling, "labeled_batches": lab_batches.state_dict(),
                "unlabeled_batches": unl_batches.state_dict()}

    # Logged: the mean over processes, i.e. the loss of the global batch (each process's loss is the
    # mean over its share; DDP averages the gradients the same way).
    mean = (lambda t: acc.reduce(t.detach(), reduction="mean").item()) if world > 1 else (lambda t: t.item())
    model.train()
    bar = tqdm(total=cfg.steps, initial=step, desc=f"{cfg.objective} N={cfg.n_labeled}", unit="step",
               disable=not (acc.is_main_process and cfg.progress))
    t0 = time.time()
    with harness.signals():  # Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130
        while step < cfg.steps:
            idx = np.concatenate([process_share(lab_batches.next(), world, rank),
                                  process_share(unl_batches.next(), world, rank)])
            labeled = torch.from_numpy(np.isin(idx, sample.labeled)).to(device)
            labels = torch.from_numpy(train_y[idx]).long().to(device)
            ids, mask = tokenize(tokenizer, [train_x[i] for i in idx], cfg.max_length, device)
            with acc.autocast():
                logits, zs = forward_views(model, ids, mask, cfg.objective)
                z1, z2 = zs[0], (zs[1] if len(zs) > 1 else None)
                roles = roles_from_labels(labels, labeled)
                loss, parts = fewshot_loss(cfg.objective, logits.float(), z1, z2, labels, roles, cfg.lam,
                                           cfg.temperature, prior, cfg.gather_negatives)
            opt.zero_grad(set_to_none=True)
            acc.backward(loss)
            opt.step()
            step += 1
            row = {"step": step, "loss": mean(loss), **{k: mean(v) for k, v in parts.items()}}
            if step % cfg.eval_every == 0 or step == cfg.steps:
                row["eval_accuracy"], both = head_accuracy(raw, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device)
                history.append({"step": step, "eval_accuracy": row["eval_accuracy"], "head_accuracies": both})
            if step % cfg.log_every == 0 or "eval_accuracy" in row or step == cfg.steps:
                harness.log_row(row)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", **({"acc": f"{row['eval_accuracy']:.1f}"} if "eval_accuracy" in row else {}))
            due = harness.checkpoint_due(step, cfg.checkpoint_every) or step == cfg.steps
            if due:
                harness.checkpoint(state())
            if harness.stop_requested() and step < cfg.steps:
                bar.close()
                raise harness.interrupted(f"step {step}", None if due else state())
    bar.close()
    if history and history[-1]["step"] == step:
        final, both = history[-1]["eval_accuracy"], history[-1].get("head_accuracies", {})
    else:  # no step trained (--steps 0), or a resumed run whose history predates the last step
        final, both = head_accuracy(raw, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device)
    metrics = run_metrics(cfg, run, final, both, history, time.time() - t0)
    if acc.is_main_process:
        if cfg.export:  # RUN/model/ before metrics.json: a finished run has its model
            from .export import export_model

            export_model(cfg, raw, tokenizer, run.pooling, run.pooling_source, out, train_x=train_x, train_y=train_y,
                         sample=sample, eval_accuracy=final, device=device)
            metrics["model"] = str(out / "model")
    return harness.finish(metrics, "metrics.json")


def run_baseline(cfg: FewShotConfig, run: Run) -> dict:
    """The baselines, on the same sample as the trained objectives for the same seed. ``probe``: the
    frozen encoder, logistic regression on the N labeled examples' sentence vectors; ``setfit``:
    SetFit with its defaults (:mod:`fewshot.setfit_baseline`)."""
    t0 = time.time()
    if cfg.objective == "setfit":
        from .setfit_baseline import run_setfit

        acc_, seconds = run_setfit(cfg, run)
        metrics = run_metrics(cfg, run, acc_, {"setfit": acc_}, [], seconds)
    else:
        acc_, both = head_accuracy(run.model, run.tokenizer, cfg, run.train_x, run.train_y, run.sample, run.eval_x,
                                   run.eval_y, run.acc.device)
        metrics = run_metrics(cfg, run, acc_, both, [], time.time() - t0)
    return run.harness.finish(metrics, "metrics.json")


def _preset_arg(argv):
    """The --preset value on the command line (None if absent), read before tyro parses the rest so
    the preset's values become the defaults that explicit options override."""
    import argparse
    import sys

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", choices=sorted(PRESETS), default=None)
    pre.add_argument("--dataset", default=None)
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    if known.preset is None and is_image_dataset(known.dataset):
        return "images"  # image arrays get the setting chosen for them unless another preset is named
    return known.preset


def _given(argv, *flags) -> bool:
    """Whether one of ``flags`` is on the command line (``--flag VALUE`` or ``--flag=VALUE``)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    return any(a == f or a.startswith(f + "=") for a in args for f in flags)


def main(argv=None):
    import tyro

    cfg = tyro.cli(FewShotConfig, args=argv, description=__doc__, default=preset_config(_preset_arg(argv)))
    if cfg.passes is not None and _given(argv, "--max-steps", "--steps") and not _given(argv, "--passes"):
        cfg = dataclasses.replace(cfg, passes=None)  # an explicit step count replaces the preset's passes
    metrics = train(cfg)
    keys = [k for k in ("eval_accuracy", "majority_accuracy", "objective", "contrastive", "n_labeled", "seed", "prior",
                        "probes", "run_seconds")
            if k in metrics]
    print_run_result("fewshot", cfg.output_dir, metrics.get("steps", 0), {k: metrics[k] for k in keys})


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
