"""The PU pipeline (puNCE section 5.1): puNCE (PU form) trains the encoder on N labeled positives
plus U unlabeled examples; then linear probes on the frozen features are fitted with the PN,
uPU and nnPU risks (:mod:`fewshot.pu`). The same probes on the untouched pretrained encoder are
the baseline. The prior: puNCE's pi = p(y=+1 | unlabeled); the probes' pi_p = p(y=+1) of the
marginal, taken equal to pi because the unlabeled set is a uniform draw from the data (the
case-control setting of Kiryo et al.)."""

from __future__ import annotations

import sys
import time

import numpy as np
import torch
from tqdm.auto import tqdm

from shared_losses.training.runtime import DivergenceWatch, bar_interval

from .config import PU_OBJECTIVE, PuConfig
from .objectives import ALL_OBJECTIVES, DEFAULT_OBJECTIVE
from .pu import RISKS
from .pu_probes import _probe_accuracies, _probes
from .heads import tokenize
from .model import hub_revision
from .run import NO_EVAL_NOTE, FewShotRunApp, capped_batches_line, forward_views, prepare, process_share
from .scores import majority_percent


class PuApp(FewShotRunApp):
    """The PU pipeline's parts of the shared loop (:func:`shared_losses.training.loop.run`): the encoder trained with
    puNCE (PU form) one batch of labeled + unlabeled examples per step; at the end the PN / uPU / nnPU probes on its
    frozen features (and, before training, on the pretrained encoder's: the baseline)."""

    def __init__(self, cfg: PuConfig, harness, model=None, tokenizer=None):
        super().__init__(cfg, harness)
        self.model, self.tokenizer = model, tokenizer

    def build(self, saved):
        cfg = self.cfg
        self.run = run = prepare(cfg, self.model, self.tokenizer, self.harness, saved)
        self.accelerator, self.tokenizer = acc, tokenizer = run.acc, run.tokenizer
        self.t0 = time.monotonic()
        # no evaluation split (PU files without --eval-file): the baseline probes would score nothing; a resumed
        # run has them in its checkpoint
        self.baseline = None
        if saved is None and len(run.eval_x):
            self.baseline = _probe_accuracies(run.model, tokenizer, cfg, run.train_x, run.sample, run.eval_x,
                                              run.eval_y, run.prior, acc.device)
        opt = torch.optim.AdamW(run.model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        self.model, self.opt = acc.prepare(run.model, opt)
        self.raw = acc.unwrap_model(self.model)
        self.watch = DivergenceWatch(self.raw.parameters(), cfg.lr)
        self.loss = None
        self.rng = np.random.default_rng(cfg.seed)
        # Global batches (the same draw on every process), each process training on its share.
        self.world, self.rank = acc.num_processes, acc.process_index
        self.n_lab = min(cfg.batch_labeled * self.world, len(run.sample.labeled))
        self.n_unl = min(cfg.batch_unlabeled * self.world, len(run.sample.unlabeled))
        capped = capped_batches_line(cfg, self.world, len(run.sample.labeled), len(run.sample.unlabeled))
        if capped and acc.is_main_process:
            print(capped, file=sys.stderr)
        self.head = None

    def state(self):
        self.watch.check(self.step, self.loss)  # never a checkpoint of a diverged model
        self.watch.checkpointed = self.step
        return {"step": self.step, "config": self.recorded_options,
                "pooling": self.run.pooling, "baseline": self.baseline, "rng": self.rng.bit_generator.state,
                "pu_head": self.head}

    def load_state(self, state):
        self.step, self.baseline = state["step"], state["baseline"]
        self.rng.bit_generator.state = state["rng"]
        self.watch.resumed(self.step)
        self.say_resumed()

    def progress(self):
        self.model.train()
        return tqdm(total=self.cfg.max_steps, initial=self.step, desc="puNCE (PU) encoder", unit="step",
                    disable=not (self.accelerator.is_main_process and self.cfg.progress), mininterval=bar_interval())

    def train_step(self):
        cfg, run, acc, device = self.cfg, self.run, self.accelerator, self.accelerator.device
        sample = run.sample
        idx = np.concatenate([process_share(self.rng.choice(sample.labeled, self.n_lab, replace=False), self.world,
                                            self.rank),
                              process_share(self.rng.choice(sample.unlabeled, self.n_unl, replace=False), self.world,
                                            self.rank)])
        roles = torch.from_numpy(np.isin(idx, sample.labeled).astype(np.int64)).to(device)  # +1 labeled, 0 unlabeled
        ids, mask = tokenize(self.tokenizer, [run.train_x[i] for i in idx], cfg.max_length, device)
        with acc.autocast():
            z1, z2 = forward_views(self.model, ids, mask, DEFAULT_OBJECTIVE)[1]  # two dropout views, as puNCE
        if not bool(torch.isfinite(z1).all() and torch.isfinite(z2).all()):
            # weights finite but overflowing features: the loss would be NaN (its input check would name the features,
            # not the learning rate); the watch stops the run as at any diverged step
            self.step += 1
            self.loss = float("nan")
            self.watch.check(self.step, self.loss)
        with acc.autocast():
            # the contrastive term of puNCE's objective: with no labeled negatives, its PU form
            loss = ALL_OBJECTIVES.get(DEFAULT_OBJECTIVE).loss(z1=z1, z2=z2, roles=roles, temperature=cfg.temperature,
                                                              prior=run.prior, gather=False,
                                                              label_pull=cfg.label_pull)
        self.opt.zero_grad(set_to_none=True)
        acc.backward(loss)
        self.opt.step()
        self.step += 1
        # the mean over processes (the global batch's loss, as the text pipeline logs): every process then
        # takes the same divergence decision
        self.loss = (acc.reduce(loss.detach(), reduction="mean").item() if self.world > 1 else loss.item())
        if self.step % cfg.log_every == 0 or self.step == cfg.max_steps:
            self.watch.check(self.step, self.loss)
        return {"step": self.step, "punce": self.loss}

    def postfix(self):
        return {"punce": f"{self.loss:.3f}"}

    def checkpoint_due(self):  # the last step's checkpoint is finish()'s, written after the probes with their head
        return self.harness.checkpoint_due(self.step, self.cfg.checkpoint_every)

    def finish(self):
        # the probes first: the checkpoint keeps the nnPU probe (the exported head) beside the encoder
        run, cfg = self.run, self.cfg
        self.watch.check(self.step, self.loss)  # the probes would read the features of a diverged encoder
        self.trained, self.head, self.scores = _probes(self.raw, self.tokenizer, cfg, run.train_x, run.sample,
                                                       run.eval_x, run.eval_y, run.prior, self.accelerator.device,
                                                       risks=RISKS if len(run.eval_x) else ("nnpu",))
        self.harness.checkpoint(self.state())

    def export(self):
        if self.cfg.export:
            from .export import export_model

            run = self.run
            export_model(self.cfg, self.raw, self.tokenizer, run.pooling, run.pooling_source, run.out,
                         pu_head=self.head, eval_accuracy=self.trained["nnpu"] if self.trained is not None else None,
                         device=self.accelerator.device)

    def summary(self):
        cfg, run, trained = self.cfg, self.run, self.trained
        sample, from_files = run.sample, cfg.positive_file is not None
        metrics = {
            "eval_accuracy": trained["nnpu"] if trained is not None else None, "objective": PU_OBJECTIVE,
            "setting": "pu", "n_labeled": len(sample.labeled) if from_files else cfg.n_labeled,
            "n_unlabeled": len(sample.unlabeled) if from_files else cfg.n_unlabeled, "seed": cfg.seed,
            "encoder": cfg.encoder, "dataset": None if from_files else cfg.dataset, "eval_file": cfg.eval_file,
            "temperature": cfg.temperature, "label_pull": cfg.label_pull, "prior": run.prior,
            "prior_source": run.prior_source, "exact_prior": run.exact_prior, "steps": cfg.max_steps,
            "batch_labeled_used": self.n_lab, "batch_unlabeled_used": self.n_unl,
            "probes": {"pretrained_encoder": self.baseline, "punce_encoder": trained},
            "eval_scores": self.scores["nnpu"] if self.scores else None,
            "train_seconds": time.monotonic() - self.t0, "pooling": run.pooling, "pooling_source": run.pooling_source,
            "encoder_revision": hub_revision(cfg.encoder), "n_eval": len(run.eval_y),
            "majority_accuracy": majority_percent(run.eval_y) if len(run.eval_y) else None,
        }
        if from_files:
            metrics.update(positive_file=cfg.positive_file, unlabeled_file=cfg.unlabeled_file)
        if trained is None:
            metrics["note"] = NO_EVAL_NOTE
        if cfg.export and self.accelerator.is_main_process:
            metrics["model"] = str(run.out / "model")
        return metrics
