"""Few-shot fine-tuning with CE (+ SupCon / puNCE), and the PU pipeline.

    python -m fewshot.train --help
    python -m fewshot.train --encoder minilm --pooling mean --dataset drugreview --objective ce+punce --n-labeled 20
    accelerate launch -m fewshot.train --encoder roberta-base --dataset glue/sst2 --n-labeled 100

Writes into --output-dir: config.json, sample.json (the drawn indices), log.csv, tb/ (TensorBoard),
checkpoint/ (atomic, resumable with --resume) and metrics.json.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from shared_losses.runtime import (CsvLogger, RunFolder, RunInterrupted, StopSignals, checkpoint_exists,
                                   claim_run_folder, config_changes, load_checkpoint, print_run_result, save_checkpoint,
                                   tensorboard_writer, write_json_atomic)

from .config import PRESETS, FewShotConfig, preset_config
from .data import load_splits, sample_fewshot
from .model import FewShotModel, load_tokenizer, max_tokens
from .objectives import fewshot_loss, roles_from_labels
from .prior import elkan_noto_prior


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


def tokenize(tokenizer, texts, max_length, device):
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


@torch.no_grad()
def embed_all(model, tokenizer, texts, max_length, device, batch_size=64):
    model.eval()
    feats, logits = [], []
    for i in range(0, len(texts), batch_size):
        ids, mask = tokenize(tokenizer, texts[i:i + batch_size], max_length, device)
        h = model.embed(ids, mask)
        feats.append(h.float().cpu())
        logits.append(model.classifier(h).float().cpu())
    model.train()
    return torch.cat(feats), torch.cat(logits)


def make_accelerator(cfg):
    from accelerate import Accelerator
    from accelerate.utils import DistributedDataParallelKwargs

    # Some parameters get no gradient in some settings (the encoder's pooler, which the cls / mean
    # pooling does not read; the projection head under `ce`; the classifier in the PU pipeline), and
    # DDP refuses that unless told to look for them.
    ddp = DistributedDataParallelKwargs(find_unused_parameters=True)
    return Accelerator(mixed_precision=cfg.mixed_precision, cpu=cfg.cpu, kwargs_handlers=[ddp])


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
    resuming: bool = False  # continuing from the checkpoint in out


def claim(cfg: FewShotConfig) -> RunFolder:
    """The folder rules (:func:`shared_losses.runtime.claim_run_folder`) for ``cfg.output_dir``, read-only."""
    return claim_run_folder(cfg.output_dir, "fewshot", resume=cfg.resume, overwrite=cfg.overwrite)


def finished_metrics(cfg: FewShotConfig, folder: RunFolder) -> dict | None:
    """The metrics of the finished run that ``--resume`` points at when ``cfg`` asks it for no more
    training (its checkpoint is at --steps; a baseline has none), else None: such a run is left exactly
    as it is. A run made with other options is refused, as is a finished run whose checkpoint is gone."""
    out = folder.path
    if not (folder.resuming and (out / "metrics.json").exists()):
        return None
    if checkpoint_exists(out / "checkpoint"):
        state = load_checkpoint(None, out / "checkpoint")
        check_resume_config(cfg, state["config"])
        check_steps(cfg, state["step"], out)
        return read_json(out / "metrics.json") if state["step"] == cfg.steps else None
    if (out / "config.json").exists():
        check_resume_config(cfg, read_json(out / "config.json"))
    metrics = read_json(out / "metrics.json")
    # baselines keep no checkpoint: metrics.json is the finished run
    if cfg.objective in ("probe", "setfit") or metrics.get("steps", -1) >= cfg.steps:
        return metrics
    raise FileExistsError(f"{out} holds a finished run of {metrics.get('steps')} steps (metrics.json) but no checkpoint/ "
                          f"to continue it to --max-steps {cfg.steps} from: pass --overwrite (moves it aside) to start a "
                          "new run, or another --output-dir; nothing was changed")


def check_steps(cfg: FewShotConfig, trained: int, out: Path) -> None:
    """A resume only continues a run: fewer --max-steps than its checkpoint has trained are refused (the
    loop would not run, and metrics.json would pair the new count with the old model)."""
    if cfg.steps < trained:
        raise ValueError(f"--max-steps {cfg.steps} is below the {trained} steps the checkpoint in {out} has already "
                         f"trained: a resume only continues a run (pass --max-steps {trained} or more)")


def read_json(path: Path) -> dict:
    import json

    try:
        return json.loads(Path(path).read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not valid JSON ({err}); the run's file is damaged") from err


def prepare(cfg: FewShotConfig, model: FewShotModel | None = None, tokenizer=None,
            folder: RunFolder | None = None) -> Run:
    """Output folder, accelerator, data and few-shot sample, model on its device, prior; writes
    config.json (with the prior used) and sample.json. ``folder``: what :func:`claim` decided (claimed
    here when None)."""
    cfg.validate()  # before anything is written into the run's folder
    out = Path(cfg.output_dir)
    folder = folder or claim(cfg)
    resuming = folder.resuming and checkpoint_exists(out / "checkpoint")
    state = load_checkpoint(None, out / "checkpoint") if resuming else None
    saved = state["config"] if state is not None else None
    if saved is not None:
        check_resume_config(cfg, saved)
        check_steps(cfg, state["step"], out)
    acc = make_accelerator(cfg)
    if saved is not None:  # the process count sets the global batch, and so what the samplers' states mean
        check_resume_config(cfg, saved, acc.num_processes)
    if cfg.n_labeled < acc.num_processes:
        raise ValueError(f"--n-labeled {cfg.n_labeled} is smaller than the number of processes ({acc.num_processes}): "
                         "each process takes its share of every batch and needs at least one labeled example")
    train_x, train_y, eval_x, eval_y = load_splits(cfg)
    if cfg.eval_split == "dev":
        train_x, train_y, eval_x, eval_y = dev_split(train_x, train_y, cfg.dev_fraction)
    sample = sample_fewshot(train_y, cfg.n_labeled, cfg.n_unlabeled, cfg.seed, cfg.setting)
    eval_x, eval_y = eval_subset(eval_x, eval_y, cfg.max_eval, cfg.seed)
    torch.manual_seed(cfg.seed)
    tokenizer = tokenizer or load_tokenizer(cfg.encoder)
    model = (model or FewShotModel(cfg.encoder, cfg.pooling, cfg.proj_dim)).to(acc.device)
    if cfg.train_layers is not None:
        freeze_lower_layers(model.encoder, cfg.train_layers)
    limit = max_tokens(model.encoder, tokenizer)
    if limit is not None and cfg.max_length > limit:
        raise ValueError(f"--max-length {cfg.max_length} exceeds what the encoder {cfg.encoder!r} takes: "
                         f"{limit} tokens (its position embeddings / tokenizer limit); use --max-length {limit} or less")
    run = Run(out, acc, train_x, np.asarray(train_y), eval_x, eval_y, sample, model, tokenizer, resuming=resuming)
    run.prior, run.prior_source = resolve_prior(cfg, run.train_y, sample, model, tokenizer, train_x, acc.device)
    acc.wait_for_everyone()  # every process has read the folder before the main one changes it
    folder.open(is_main=acc.is_main_process)
    acc.wait_for_everyone()
    if acc.is_main_process:
        write_json_atomic(out / "config.json", dataclasses.asdict(cfg) | {"prior_used": run.prior, "prior_source": run.prior_source})
        write_json_atomic(out / "sample.json", sample.to_json())
    return run


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
    return {"majority_accuracy": float(max(ev.mean(), 1 - ev.mean()) * 100.0),
            "labeled_majority_accuracy": float((ev == lab_major).mean() * 100.0)}


#: --probe-c values scored side by side on the development split (``head_accuracies``)
DEV_PROBE_CS = (1.0, 10.0, 100.0, 1000.0)


def logreg_accuracy(feats_labeled, y_labeled, feats_eval, eval_y, c: float, seed: int) -> float:
    """Accuracy (%) of a logistic regression fitted on L2-normalised labeled sentence vectors."""
    from sklearn.linear_model import LogisticRegression

    def unit(f):
        f = np.asarray(f, dtype=np.float64)
        return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)

    clf = LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(unit(feats_labeled), np.asarray(y_labeled))
    return float((clf.predict(unit(feats_eval)) == np.asarray(eval_y)).mean() * 100.0)


def head_accuracies(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device) -> dict:
    """Evaluation accuracy (%) of both classifiers from one pass over the evaluation split: ``linear``
    (the CE-trained head; absent for ``probe``, whose head is untrained) and ``logreg``."""
    fl, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.labeled], cfg.max_length, device)
    fe, logits = embed_all(model, tokenizer, eval_x, cfg.max_length, device)
    fl, fe, yl = fl.numpy(), fe.numpy(), np.asarray(train_y)[sample.labeled]
    out = {"logreg": logreg_accuracy(fl, yl, fe, eval_y, cfg.probe_c, cfg.seed)}
    if cfg.objective != "probe":
        out["linear"] = float((logits.argmax(1).numpy() == np.asarray(eval_y)).mean() * 100.0)
    if cfg.eval_split == "dev":  # choosing --probe-c: only ever on the development split
        for c in DEV_PROBE_CS:
            out[f"logreg_C{c:g}"] = logreg_accuracy(fl, yl, fe, eval_y, c, cfg.seed)
    return out


def head_accuracy(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device) -> tuple[float, dict]:
    """(accuracy with the classifier ``cfg.head`` names (``probe``: always logreg), both heads' accuracies)."""
    both = head_accuracies(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device)
    return both["logreg" if cfg.objective == "probe" else cfg.head], both


def eval_subset(eval_x, eval_y, max_eval, seed):
    """At most ``max_eval`` evaluation examples: a uniform draw (the first rows of a file sorted by
    label would bias the score), kept in file order. Its own generator (a child of ``seed``), so the
    draw consumes no randomness of the few-shot sample, the batches or torch."""
    if max_eval is None or max_eval >= len(eval_x):
        return eval_x, eval_y
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    keep = np.sort(rng.choice(len(eval_x), size=max_eval, replace=False))
    return [eval_x[i] for i in keep], [eval_y[i] for i in keep]


# may change when resuming (prior_used/prior_source: what config.json adds to the options)
RESUME_FREE = {"resume", "overwrite", "progress", "steps", "eval_every", "checkpoint_every", "output_dir", "prior_used", "prior_source"}


def check_resume_config(cfg: FewShotConfig, saved: dict, world: int | None = None) -> None:
    """Refuse to resume a run saved with other options (``world``: the process count, checked when known)."""
    free = RESUME_FREE | ({"num_processes"} if world is None else set())
    changed = config_changes(saved, {**dataclasses.asdict(cfg), "num_processes": world}, free=free,
                             legacy={"num_processes": world})
    if changed:
        raise ValueError("the checkpoint in output_dir was written with a different configuration ("
                         + ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in changed)
                         + "); use the same options, a new --output-dir, or --overwrite (moves that run aside)")


def resolve_prior(cfg, train_y, sample, model=None, tokenizer=None, train_x=None, device="cpu") -> tuple[float, str]:
    if cfg.prior is not None:  # in [0, 1]: FewShotConfig.validate
        return float(cfg.prior), "given"
    if cfg.estimate_prior:
        pos = sample.labeled[train_y[sample.labeled] == 1]
        fp, _ = embed_all(model, tokenizer, [train_x[i] for i in pos], cfg.max_length, device)
        fu, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.unlabeled], cfg.max_length, device)
        return elkan_noto_prior(fp.numpy(), fu.numpy(), seed=cfg.seed), "elkan-noto"
    if len(sample.unlabeled) == 0:
        return 0.5, "no unlabeled data"
    return float(train_y[sample.unlabeled].mean()), "exact"


def train(cfg: FewShotConfig, model: FewShotModel | None = None, tokenizer=None) -> dict:
    cfg.validate()
    folder = claim(cfg)
    done = finished_metrics(cfg, folder)
    if done is not None:
        print(f"{folder.path} already holds this run, finished; nothing to do (pass a larger --max-steps to train on)")
        return done
    if cfg.setting == "pu":
        from .pu_pipeline import run_pu

        return run_pu(cfg, model, tokenizer, folder)
    run = prepare(cfg, model, tokenizer, folder)
    out, acc, device, sample, tokenizer = run.out, run.acc, run.acc.device, run.sample, run.tokenizer
    train_x, train_y, eval_x, eval_y, prior = run.train_x, run.train_y, run.eval_x, run.eval_y, run.prior
    model = run.model
    if cfg.objective in ("probe", "setfit"):
        return run_baseline(cfg, run)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr, weight_decay=cfg.weight_decay)
    model, opt = acc.prepare(model, opt)
    raw = acc.unwrap_model(model)
    # Global batches (the same draw on every process), each process training on its share.
    world, rank = acc.num_processes, acc.process_index
    lab_batches = Batches(sample.labeled, min(cfg.batch_labeled * world, cfg.n_labeled), cfg.seed)
    # Only puNCE reads unlabeled examples (CE and SupCon need labels): the others draw none, so no
    # step encodes examples that no term of its loss sees.
    unl_batches = Batches(sample.unlabeled, cfg.batch_unlabeled * world if cfg.objective == "ce+punce" else 0, cfg.seed + 1)

    step, history = 0, []
    if run.resuming:
        state = load_checkpoint(acc, out / "checkpoint")
        check_resume_config(cfg, state["config"], world)
        step, history = state["step"], state["history"]
        lab_batches.load_state_dict(state["labeled_batches"])
        unl_batches.load_state_dict(state["unlabeled_batches"])
    log = CsvLogger(out / "log.csv", resume_step=step if run.resuming else None) if acc.is_main_process else None
    tb = tensorboard_writer(out / "tb", resume_step=step if run.resuming else None,
                            config=dataclasses.asdict(cfg)) if acc.is_main_process else None

    def checkpoint():
        if tb is not None:  # events up to the checkpoint on disk first: a resume does not log them again
            tb.flush()
        save_checkpoint(acc, out / "checkpoint", {
            "step": step, "history": history, "config": {**dataclasses.asdict(cfg), "num_processes": world},
            "labeled_batches": lab_batches.state_dict(), "unlabeled_batches": unl_batches.state_dict()})

    # Logged: the mean over processes, i.e. the loss of the global batch (each process's loss is the
    # mean over its share; DDP averages the gradients the same way).
    mean = (lambda t: acc.reduce(t.detach(), reduction="mean").item()) if world > 1 else (lambda t: t.item())
    model.train()
    bar = tqdm(total=cfg.steps, initial=step, desc=f"{cfg.objective} N={cfg.n_labeled}", unit="step",
               disable=not (acc.is_main_process and cfg.progress))
    t0 = time.time()
    with StopSignals() as stop:  # Ctrl-C / SIGTERM: finish the step, checkpoint, exit 130
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
            if acc.is_main_process:
                log.log(row)
                if tb is not None:
                    for k, v in row.items():
                        if k != "step":
                            tb.add_scalar(k, v, step)
            bar.update(1)
            bar.set_postfix(loss=f"{row['loss']:.3f}", **({"acc": f"{row['eval_accuracy']:.1f}"} if "eval_accuracy" in row else {}))
            if step % cfg.checkpoint_every == 0 or step == cfg.steps:
                checkpoint()
            if stop_requested(stop, acc) and step < cfg.steps:
                if step % cfg.checkpoint_every != 0:
                    checkpoint()
                bar.close()
                if tb is not None:
                    tb.close()
                raise RunInterrupted(f"step {step} (checkpoint written to {out / 'checkpoint'})")
    bar.close()
    if history and history[-1]["step"] == step:
        final, both = history[-1]["eval_accuracy"], history[-1].get("head_accuracies", {})
    else:  # no step trained (--steps 0), or a resumed run whose history predates the last step
        final, both = head_accuracy(raw, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device)
    metrics = run_metrics(cfg, run, final, both, history, time.time() - t0)
    if acc.is_main_process:
        write_json_atomic(out / "metrics.json", metrics)
        if tb is not None:
            tb.close()
    return metrics


def stop_requested(stop: StopSignals, acc) -> bool:
    """Whether any process got SIGINT/SIGTERM: all processes must stop after the same step."""
    if acc.num_processes == 1:
        return stop.requested
    flag = torch.tensor([float(stop.requested)], device=acc.device)
    return bool(acc.reduce(flag, reduction="sum").item())


def run_metrics(cfg, run, eval_accuracy: float, heads: dict, history: list, train_seconds: float) -> dict:
    """metrics.json: the same keys for every objective (``probe`` included)."""
    if cfg.eval_split == "dev":
        split = f"DEVELOPMENT split: {cfg.dev_fraction} of the training pool (for choosing hyperparameters)"
    elif cfg.dataset == "glue/sst2":
        split = "labeled validation split (GLUE test labels are hidden)"
    else:
        split = "eval file / test split"
    return {
        "eval_accuracy": eval_accuracy, "head_accuracies": heads,
        **majority_rates(run.train_y, run.sample, run.eval_y),
        "objective": cfg.objective, "setting": cfg.setting, "preset": cfg.preset, "head": cfg.head,
        "n_labeled": cfg.n_labeled, "n_unlabeled": cfg.n_unlabeled, "seed": cfg.seed, "encoder": cfg.encoder,
        "dataset": cfg.dataset, "eval_file": cfg.eval_file, "lam": cfg.lam, "temperature": cfg.temperature,
        "prior": run.prior, "prior_source": run.prior_source, "steps": 0 if cfg.objective in ("probe", "setfit") else cfg.steps,
        "n_eval": len(run.eval_y), "history": history, "train_seconds": train_seconds, "eval_split": split,
    }


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
    if run.acc.is_main_process:
        write_json_atomic(run.out / "metrics.json", metrics)
    return metrics


def forward_views(model, ids, mask, objective):
    """Logits of the first view and the projections of one (``ce``) or two dropout views, from a
    single forward pass through the (possibly DDP-wrapped) model."""
    n_views = 1 if objective == "ce" else 2
    n = ids.shape[0]
    logits, z = model(ids.repeat(n_views, 1), mask.repeat(n_views, 1))
    return logits[:n], list(z.split(n))




def _preset_arg(argv):
    """The --preset value on the command line (None if absent), read before tyro parses the rest so
    the preset's values become the defaults that explicit options override."""
    import argparse
    import sys

    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", choices=sorted(PRESETS), default=None)
    known, _ = pre.parse_known_args(sys.argv[1:] if argv is None else argv)
    return known.preset


def main(argv=None):
    import tyro

    cfg = tyro.cli(FewShotConfig, args=argv, description=__doc__, default=preset_config(_preset_arg(argv)))
    metrics = train(cfg)
    keys = [k for k in ("eval_accuracy", "majority_accuracy", "objective", "n_labeled", "seed", "prior", "probes")
            if k in metrics]
    print_run_result("fewshot", cfg.output_dir, metrics.get("steps", 0), {k: metrics[k] for k in keys})


if __name__ == "__main__":
    from shared_losses.cli import run_cli

    run_cli(main)
