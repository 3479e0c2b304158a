"""Few-shot fine-tuning with CE (+ SupCon / puNCE), the PU pipeline, and runs on image arrays.

    python -m fewshot.train --help                   (text few-shot; `pu --help`, `images --help` for the others)
    python -m fewshot.train --encoder minilm --dataset drugreview --objective ce+punce --n-labeled 20
    python -m fewshot.train pu --encoder minilm --dataset drugreview --n-labeled 20 --n-unlabeled 200
    python -m fewshot.train images --dataset mnist --positive-classes 0 2 4 6 8 --n-labeled 100
    accelerate launch -m fewshot.train --encoder roberta-base --dataset glue/sst2 --n-labeled 100

Writes into --output-dir: config.json, sample.json (the drawn indices), log.csv, tb/ (TensorBoard),
checkpoint/ (atomic, resumable with --resume), model/ (the classifier: text, a Hugging Face model folder; images,
image_classifier.pt with TorchScript and ONNX copies: fewshot.export) and metrics.json.
"""

from __future__ import annotations

import dataclasses
import sys
import time

import numpy as np
import torch
from tqdm.auto import tqdm

from shared_losses.training.loop import run as run_app
from shared_losses.training.runtime import (CheckpointError, DivergenceWatch, bar_interval, print_run_result,
                                            threads_within_the_cpu_limit, torch_settings_given_back)

from .config import AnyConfig, FewShotConfig, ImageConfig, PuConfig, from_cli
from .model import FewShotModel
from .objectives import fewshot_loss, roles_from_labels
from .objectives import ALL_OBJECTIVES
from .pu_pipeline import PuApp
from .heads import head_accuracy, tokenize
from .run import (Batches, FewShotRunApp, capped_batches_line, claim, finished_metrics, forward_views, prepare,
                  process_share, run_metrics)


class FewShotApp(FewShotRunApp):
    """fewshot's parts of the shared loop (:func:`shared_losses.training.loop.run`) for the trained objectives (CE,
    SupCon, puNCE): one step per global batch of labeled (+ unlabeled) examples, the heads scored every ``eval_every``
    steps and at the last one."""

    def __init__(self, cfg: FewShotConfig, harness, model: FewShotModel | None = None, tokenizer=None):
        super().__init__(cfg, harness)
        self.model, self.tokenizer, self.history = model, tokenizer, []
        self.objective = ALL_OBJECTIVES.get(cfg.objective)

    def build(self, saved):
        cfg = self.cfg
        self.run = run = prepare(cfg, self.model, self.tokenizer, self.harness, saved)
        self.accelerator, self.tokenizer = acc, _ = run.acc, run.tokenizer
        opt = torch.optim.AdamW([p for p in run.model.parameters() if p.requires_grad], lr=cfg.lr,
                                weight_decay=cfg.weight_decay)
        self.model, self.opt = acc.prepare(run.model, opt)
        self.raw = acc.unwrap_model(self.model)
        self.watch = DivergenceWatch([p for p in self.raw.parameters() if p.requires_grad], cfg.lr)
        self.last_loss = None
        # Global batches (the same draw on every process), each process training on its share.
        self.world, self.rank = acc.num_processes, acc.process_index
        # Only puNCE reads unlabeled examples (CE and SupCon need labels): the others draw none, so no step
        # encodes examples that no term of its loss sees.
        n_lab, n_unl = global_batches(cfg, len(run.sample.labeled), len(run.sample.unlabeled), self.world,
                                      self.objective.reads_unlabeled, acc.is_main_process)
        self.lab_batches = Batches(run.sample.labeled, n_lab, cfg.seed)
        self.unl_batches = Batches(run.sample.unlabeled, n_unl, cfg.seed + 1)

    def state(self):
        self.watch.check(self.step, self.last_loss)  # never a checkpoint of a diverged model
        self.watch.checkpointed = self.step
        return {"step": self.step, "history": self.history,
                "config": self.recorded_options, "pooling": self.run.pooling,
                "labeled_batches": self.lab_batches.state_dict(), "unlabeled_batches": self.unl_batches.state_dict()}

    def load_state(self, state):
        self.step, self.history = state["step"], state["history"]
        self.watch.resumed(self.step)
        self.lab_batches.load_state_dict(state["labeled_batches"])
        self.unl_batches.load_state_dict(state["unlabeled_batches"])
        self.say_resumed()

    def progress(self):
        self.model.train()
        self.t0 = time.monotonic()
        return tqdm(total=self.cfg.max_steps, initial=self.step, desc=f"{self.cfg.objective} N={self.cfg.n_labeled}",
                    unit="step", disable=not self.shows_progress(), mininterval=bar_interval())

    def shows_progress(self) -> bool:
        """The training bar, and the evaluations' (the main process, unless --no-progress)."""
        return self.accelerator.is_main_process and self.cfg.progress

    def train_step(self):
        cfg, run, acc, device = self.cfg, self.run, self.accelerator, self.accelerator.device
        idx = np.concatenate([process_share(self.lab_batches.next(), self.world, self.rank),
                              process_share(self.unl_batches.next(), self.world, self.rank)])
        labeled = torch.from_numpy(np.isin(idx, run.sample.labeled)).to(device)
        labels = torch.from_numpy(run.train_y[idx]).long().to(device)
        ids, mask = tokenize(self.tokenizer, [run.train_x[i] for i in idx], cfg.max_length, device)
        with acc.autocast():
            logits, zs = forward_views(self.model, ids, mask, cfg.objective)
            z1, z2 = zs[0], (zs[1] if len(zs) > 1 else None)
            roles = roles_from_labels(labels, labeled)
            loss, parts = fewshot_loss(cfg.objective, logits.float(), z1, z2, labels, roles, cfg.lam, cfg.temperature,
                                       run.prior, cfg.gather_across_processes, cfg.label_pull)
        self.opt.zero_grad(set_to_none=True)
        acc.backward(loss)
        if cfg.max_grad_norm > 0:
            acc.clip_grad_norm_(self.model.parameters(), cfg.max_grad_norm)
        lr = cfg.lr * lr_factor(cfg, self.step)
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.step()
        self.step += 1
        # Logged: the mean over processes, i.e. the loss of the global batch (each process's loss is the mean
        # over its share; DDP averages the gradients the same way).
        mean = (lambda t: acc.reduce(t.detach(), reduction="mean").item()) if self.world > 1 else (lambda t: t.item())
        self.last_loss = mean(loss)
        if self.step % cfg.log_every == 0 or self.eval_due():  # where the run logs or evaluates next
            self.watch.check(self.step, self.last_loss)
        scheduled = {"lr": lr} if cfg.warmup_steps > 0 or cfg.lr_schedule != "constant" else {}
        return {"step": self.step, "loss": self.last_loss, **{k: mean(v) for k, v in parts.items()}, **scheduled}

    def check_resume(self, saved):
        recorded = (saved or {}).get("config") or {}
        before = recorded.get("max_steps")
        if self.cfg.lr_schedule == "linear" and before is not None and before != self.cfg.max_steps:
            raise CheckpointError(f"{self.harness.out} was made with --lr-schedule linear to --max-steps {before}: its "
                                  f"learning rate decays to 0 there, so it cannot be continued to {self.cfg.max_steps} "
                                  f"as the same run; resume with --max-steps {before}, or start another run")
        return super().check_resume(saved)

    def eval_due(self):
        return self.step % self.cfg.eval_every == 0 or self.step == self.cfg.max_steps

    def evaluate(self):
        run = self.run
        accuracy, both, scores = head_accuracy(self.raw, self.tokenizer, self.cfg, run.train_x, run.train_y,
                                               run.sample, run.eval_x, run.eval_y, self.accelerator.device,
                                               self.objective.trains_head, self.shows_progress())
        self.history.append({"step": self.step, "eval_accuracy": accuracy, "head_accuracies": both,
                             "eval_scores": scores})
        # the positive class's scores beside the accuracy: log.csv, TensorBoard and the trackers (eval/f1, ...)
        more = {f"eval_{k}": v for k, v in (scores or {}).items() if k in EVAL_SCORES_LOGGED and v is not None}
        return {"eval_accuracy": accuracy, **more}

    def log(self, row):
        self.row = row
        if self.step % self.cfg.log_every == 0 or "eval_accuracy" in row or self.step == self.cfg.max_steps:
            self.harness.log_row(row)

    def postfix(self):
        acc_ = {"acc": f"{self.row['eval_accuracy']:.1f}"} if "eval_accuracy" in self.row else {}
        return {"loss": f"{self.row['loss']:.3f}", **acc_}

    def finish(self):
        run = self.run
        if self.history and self.history[-1]["step"] == self.step:
            last = self.history[-1]
            self.final, self.both, scores = last["eval_accuracy"], last.get("head_accuracies", {}), \
                last.get("eval_scores")
        else:  # no step trained (--steps 0), or a resumed run whose history predates the last step
            self.final, self.both, scores = head_accuracy(self.raw, self.tokenizer, self.cfg, run.train_x,
                                                          run.train_y, run.sample, run.eval_x, run.eval_y,
                                                          self.accelerator.device, self.objective.trains_head,
                                                          self.shows_progress())
        self.metrics = run_metrics(self.cfg, run, self.final, self.both, self.history, time.monotonic() - self.t0,
                                   scores)
        if self.objective.trains_encoder:  # the global batch's sizes, after the caps above
            self.metrics["batch_labeled_used"] = self.lab_batches.batch_size
            if self.objective.reads_unlabeled:
                self.metrics["batch_unlabeled_used"] = self.unl_batches.batch_size

    def export(self):
        if self.cfg.export:  # RUN/model/ before metrics.json: a finished run has its model
            from .export import export_model

            run = self.run
            export_model(self.cfg, self.raw, self.tokenizer, run.pooling, run.pooling_source, run.out,
                         train_x=run.train_x, train_y=run.train_y, sample=run.sample, eval_accuracy=self.final,
                         device=self.accelerator.device)
            self.metrics["model"] = str(run.out / "model")

    def summary(self):
        return self.metrics


#: The evaluation's scores (fewshot.scores.binary_scores) logged beside eval_accuracy at every evaluation.
EVAL_SCORES_LOGGED = ("f1", "precision", "recall", "balanced_accuracy", "roc_auc")


def lr_factor(cfg, step: int) -> float:
    """The learning rate of the step after ``step`` steps as a share of --lr, as transformers' schedules give it
    (``get_constant_schedule_with_warmup``, ``get_linear_schedule_with_warmup``, whose scheduler steps after the
    optimiser): ``step / warmup`` during the warmup (0 at the first step), then 1, or for ``linear`` falling to 0 at
    --max-steps. A function of the step alone, so a resumed run continues the schedule exactly."""
    warmup = getattr(cfg, "warmup_steps", 0)
    if step < warmup:
        return step / max(1, warmup)
    if getattr(cfg, "lr_schedule", "constant") == "linear":
        return max(0.0, (cfg.max_steps - step) / max(1, cfg.max_steps - warmup))
    return 1.0


def global_batches(cfg, n_labeled: int, n_unlabeled: int, world: int, reads_unlabeled: bool,
                   main: bool = True) -> tuple[int, int]:
    """The labeled and unlabeled examples of one global batch (every process draws it, and trains on its share):
    ``--batch-labeled`` / ``--batch-unlabeled`` per process, capped to the examples there are. With
    ``--gather-across-processes`` on several processes each is cut to a multiple of the number of processes (said
    on stderr), since the gathered candidates need the same number of rows from every process; unequal shares
    would stop the run inside the collective (gloo: "Received data size doesn't match expected size")."""
    n_lab = min(cfg.batch_labeled * world, n_labeled)
    n_unl = min(cfg.batch_unlabeled * world, n_unlabeled) if reads_unlabeled else 0
    capped = capped_batches_line(cfg, world, n_labeled, n_unlabeled, reads_unlabeled)
    if capped and main:  # said, as the PU pipeline says it
        print(capped, file=sys.stderr)
    if not (cfg.gather_across_processes and world > 1):
        return n_lab, n_unl
    if reads_unlabeled and n_unl < world:
        raise ValueError(f"--gather-across-processes on {world} processes needs at least {world} unlabeled examples "
                         f"(one per process in every batch), got {n_unlabeled}")
    even = n_lab - n_lab % world, n_unl - n_unl % world
    cut = [f"{what} {n} to {e}" for what, n, e in (("labeled", n_lab, even[0]), ("unlabeled", n_unl, even[1]))
           if e != n]
    if cut and main:
        print(f"global batch cut to a multiple of the {world} processes (--gather-across-processes needs equal "
              f"shares): {', '.join(cut)} examples per step", file=sys.stderr)
    return even


def train(cfg: AnyConfig, model: FewShotModel | None = None, tokenizer=None) -> dict:
    """Train (or resume) the run ``cfg`` describes (its pipeline by its class: :class:`FewShotConfig` text few-shot,
    :class:`PuConfig` text PU, :class:`ImageConfig` image arrays), or run its baseline (probe, SetFit); returns
    metrics.json's content. ``model`` / ``tokenizer``: a text model to start from instead of loading ``cfg.encoder``
    (tests). The caller's torch thread count is given back (--torch-threads sets the run's)."""
    with torch_settings_given_back():
        return _train(cfg, model, tokenizer)


def _train(cfg: AnyConfig, model: FewShotModel | None, tokenizer) -> dict:
    if isinstance(cfg, ImageConfig):
        cfg = explicit_steps_win(cfg)
    cfg.validate()
    if cfg.torch_threads > 0:
        torch.set_num_threads(cfg.torch_threads)
    else:
        threads_within_the_cpu_limit()
    harness = claim(cfg)
    if isinstance(cfg, ImageConfig):
        from .image_run import ImageApp

        return run_app(ImageApp(cfg, harness))
    if isinstance(cfg, PuConfig):
        return run_app(PuApp(cfg, harness, model, tokenizer))
    if ALL_OBJECTIVES.get(cfg.objective).trains_encoder:
        return run_app(FewShotApp(cfg, harness, model, tokenizer))
    return run_app(BaselineApp(cfg, harness, model, tokenizer))


def explicit_steps_win(cfg: ImageConfig) -> ImageConfig:
    """An ImageConfig made in Python with its own ``max_steps`` and the default ``passes``: the step count wins, as
    --max-steps does on the command line (the default passes made ``ImageConfig(max_steps=3)`` train 2,400 steps on
    the digits without a word). ``passes=None`` keeps any ``max_steps``; other passes replace it."""
    defaults = {f.name: f.default for f in dataclasses.fields(ImageConfig) if f.name in ("max_steps", "passes")}
    if cfg.passes == defaults["passes"] and cfg.max_steps != defaults["max_steps"]:
        return dataclasses.replace(cfg, passes=None)
    return cfg


class BaselineApp(FewShotRunApp):
    """A baseline (an objective that trains no encoder: ``probe``, ``setfit``) in the shared loop, on the same sample
    as the trained objectives for the same seed: no steps, no logs and no checkpoint (a resume compares config.json,
    and a finished baseline is its metrics.json); :meth:`finish` runs its registry entry's ``baseline``
    (:data:`fewshot.objectives.ALL_OBJECTIVES`)."""

    logs, keeps_checkpoint = (), False

    def __init__(self, cfg: FewShotConfig, harness, model: FewShotModel | None = None, tokenizer=None):
        super().__init__(cfg, harness)
        self.model, self.tokenizer = model, tokenizer

    def report_to(self):
        return ()  # nothing to track: metrics.json holds the result

    def total_steps(self):
        return 0

    def check_resume(self, saved):
        done = finished_metrics(self.cfg, self.harness)
        if done is not None:
            print(f"{self.harness.out} already holds this run, finished; nothing to do")
        return done

    def build(self, saved):
        self.run = prepare(self.cfg, self.model, self.tokenizer, self.harness)
        self.accelerator = self.run.acc

    def finish(self):
        accuracy, heads, seconds, scores = ALL_OBJECTIVES.get(self.cfg.objective).baseline(self.cfg, self.run)
        self.metrics = run_metrics(self.cfg, self.run, accuracy, heads, [], seconds, scores)

    def summary(self):
        return self.metrics


def main(argv=None):
    cfg = from_cli(argv, description=__doc__)  # the pipeline by name; --preset (text); --max-steps drops passes
    metrics = train(cfg)
    keys = [k for k in ("eval_accuracy", "majority_accuracy", "objective", "contrastive", "n_labeled", "seed", "prior",
                        "probes", "run_seconds")
            if k in metrics]
    from shared_losses.training.runtime import is_main_process
    from shared_losses.training.stats import standing

    from .scores import scores_line

    baselines = {}
    probes = metrics.get("probes") or {}
    if isinstance(probes.get("pretrained_encoder"), dict):  # the PU pipeline: the frozen encoder's nnPU probe
        baselines["the frozen encoder's nnPU probe"] = probes["pretrained_encoder"].get("nnpu")
    if metrics.get("eval_accuracy") is not None and "majority_accuracy" in metrics and is_main_process():
        print(standing(metrics["eval_accuracy"], metrics["majority_accuracy"], baselines))
    elif metrics.get("note") and is_main_process():  # PU files without --eval-file: why there is no accuracy
        print(metrics["note"])
    line = scores_line(metrics.get("eval_scores"))
    if line and is_main_process():  # once per run, as print_run_result's line
        print(line)
    print_run_result("fewshot", cfg.output_dir, metrics.get("steps", 0), {k: metrics[k] for k in keys})


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
