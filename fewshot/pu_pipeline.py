"""The PU pipeline (puNCE section 5.1): puNCE (PU form) trains the encoder on N labeled positives
plus U unlabeled examples; then linear probes on the frozen features are fitted with the PN,
uPU and nnPU risks (:mod:`fewshot.pu`). The same probes on the untouched pretrained encoder are
the baseline. The prior: puNCE's pi = p(y=+1 | unlabeled); the probes' pi_p = p(y=+1) of the
marginal, taken equal to pi because the unlabeled set is a uniform draw from the data (the
case-control setting of Kiryo et al.)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import torch
from tqdm import tqdm

from shared_losses import punce_loss

from .objectives import multiview
from .pu import RISKS
from .pu_probes import _probe_accuracies, _probes, fit_pu_head  # noqa: F401 (fit_pu_head: re-exported)
from .run import forward_views, prepare, process_share, tokenize


def run_pu(cfg, model=None, tokenizer=None, harness=None) -> dict:
    if cfg.resume:
        raise ValueError("--resume is not supported with --setting pu (the PU pipeline is short and "
                         "always runs from the start); drop --resume")
    if cfg.gather_negatives:
        raise ValueError("--gather-across-processes is not supported with --setting pu (each process contrasts "
                         "within its own batch there); drop it")
    if cfg.objective != "ce+punce":
        raise ValueError(f"--objective {cfg.objective} does not apply to --setting pu: its encoder is always trained with "
                         "puNCE (PU form), and its baselines are the PN / uPU / nnPU probes on the untouched encoder; "
                         "drop --objective")
    if cfg.n_unlabeled < 1 and cfg.positive_file is None:
        raise ValueError(f"--n-unlabeled must be >= 1 with --setting pu (the puNCE prior and the PU probes need "
                         f"unlabeled examples), got {cfg.n_unlabeled}")
    run = prepare(cfg, model, tokenizer, harness)
    harness = run.harness
    out, acc, device, sample, tokenizer = run.out, run.acc, run.acc.device, run.sample, run.tokenizer
    train_x, eval_x, eval_y, prior, prior_source = run.train_x, run.eval_x, run.eval_y, run.prior, run.prior_source
    model = run.model
    if not 0.0 < prior < 1.0:
        raise ValueError(f"the PU probes need a prior strictly between 0 and 1, got {prior}")
    t0 = time.time()
    # no evaluation split (PU files without --eval-file): the baseline probes would score nothing
    baseline = _probe_accuracies(model, tokenizer, cfg, train_x, sample, eval_x, eval_y, prior, device) if len(eval_x) else None

    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    model, opt = acc.prepare(model, opt)
    raw = acc.unwrap_model(model)
    rng = np.random.default_rng(cfg.seed)
    main = acc.is_main_process
    harness.start_logging(None, config=dataclasses.asdict(cfg))
    model.train()
    # Global batches (the same draw on every process), each process training on its share.
    world, rank = acc.num_processes, acc.process_index
    n_lab, n_unl = min(cfg.batch_labeled * world, len(sample.labeled)), min(cfg.batch_unlabeled * world, len(sample.unlabeled))
    bar = tqdm(range(1, cfg.steps + 1), desc="puNCE (PU) encoder", unit="step", disable=not main)
    for step in bar:
        idx = np.concatenate([process_share(rng.choice(sample.labeled, n_lab, replace=False), world, rank),
                              process_share(rng.choice(sample.unlabeled, n_unl, replace=False), world, rank)])
        roles = torch.from_numpy(np.isin(idx, sample.labeled).astype(np.int64)).to(device)  # +1 labeled, 0 unlabeled
        ids, mask = tokenize(tokenizer, [train_x[i] for i in idx], cfg.max_length, device)
        with acc.autocast():
            z1, z2 = forward_views(model, ids, mask, "ce+punce")[1]  # two dropout views, as puNCE
            feats, src, r = multiview(z1, z2, roles)
            loss = punce_loss(feats, src, r, prior, cfg.temperature)
        opt.zero_grad(set_to_none=True)
        acc.backward(loss)
        opt.step()
        harness.csv().log({"step": step, "punce": loss.item()})
        harness.tb.add_scalar("punce", loss.item(), step)
        if main:
            bar.set_postfix(punce=f"{loss.item():.3f}", refresh=False)
    # the probes first: the checkpoint keeps the nnPU probe (the exported head) beside the encoder
    trained, head = _probes(raw, tokenizer, cfg, train_x, sample, eval_x, eval_y, prior, device,
                            risks=RISKS if len(eval_x) else ("nnpu",))
    harness.checkpoint({"step": cfg.steps, "config": {**dataclasses.asdict(cfg), "num_processes": world},
                        "pooling": run.pooling, "pu_head": head})
    from_files = cfg.positive_file is not None
    metrics = {
        "eval_accuracy": trained["nnpu"] if trained is not None else None, "objective": "punce(pu)+nnpu-probe",
        "setting": "pu", "n_labeled": len(sample.labeled) if from_files else cfg.n_labeled,
        "n_unlabeled": len(sample.unlabeled) if from_files else cfg.n_unlabeled, "seed": cfg.seed, "encoder": cfg.encoder,
        "dataset": None if from_files else cfg.dataset, "eval_file": cfg.eval_file, "temperature": cfg.temperature,
        "prior": prior, "prior_source": prior_source, "steps": cfg.steps,
        "probes": {"pretrained_encoder": baseline, "punce_encoder": trained}, "train_seconds": time.time() - t0,
        "pooling": run.pooling, "pooling_source": run.pooling_source, "n_eval": len(eval_y),
    }
    if from_files:
        metrics.update(positive_file=cfg.positive_file, unlabeled_file=cfg.unlabeled_file)
    if trained is None:
        metrics["note"] = ("no --eval-file: no accuracy (the PU files have no labels to score on); pass a labeled "
                           "--eval-file to get one")
    if main:
        if cfg.export:
            from .export import export_model

            export_model(cfg, raw, tokenizer, run.pooling, run.pooling_source, out, pu_head=head,
                         eval_accuracy=metrics["eval_accuracy"], device=device)
            metrics["model"] = str(out / "model")
    return harness.finish(metrics, "metrics.json")
