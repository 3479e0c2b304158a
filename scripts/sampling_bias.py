#!/usr/bin/env python
"""The sampling-bias experiment of DCL Figure 2, on synthetic data.

Data: K latent classes. A sample is a class "content" vector (class mean + instance noise) and a
"style" vector unrelated to the class, mixed by a fixed random rotation. The augmentation keeps
the class: it jitters the content a little and resamples part of the style. A small MLP encoder is
trained with four objectives that see exactly the same batches:

* biased     InfoNCE (SimCLR layout, 2 views, negatives = all other views);
* debiased   tau+ = 1/K, M = 1 (same batch as biased);
* debiased   tau+ = 1/K, M = 2 (two extra views per sample serve as positives; the negatives are
             the same 2(B-1) views as above, so N is unchanged);
* unbiased   InfoNCE whose negatives are only views of *other true classes* (needs the labels).

Each encoder is scored by a linear probe (scikit-learn logistic regression) on held-out data;
the table reports mean ± std over seeds. The probe gets only 10 labeled examples per class, so
how tightly each class clusters matters. DCL expects unbiased >= debiased >= biased.

    python scripts/sampling_bias.py                      # default size, 5 seeds, ~1 min on 2 cores
    python scripts/sampling_bias.py --seeds 0 1 2 3 4 --steps 600 --out runs/sampling_bias
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from shared_losses.cli import HelpFormatter  # noqa: E402

from shared_losses import debiased_nce, debiased_nce_from_logits  # noqa: E402
from shared_losses.runtime import write_json_atomic  # noqa: E402


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


def objective_loss(name: str, z: torch.Tensor, y: torch.Tensor, s: Setting) -> torch.Tensor:
    """z: [B, 4, d] embeddings of 4 views per sample (views 2, 3 only used by M = 2)."""
    t, tau_plus = s.temperature, 1.0 / s.classes
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


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds (>= 3 for mean ± std)")
    p.add_argument("--steps", type=int, default=Setting.steps, help="training steps per objective")
    p.add_argument("--batch", type=int, default=Setting.batch, help="samples per batch (2B views)")
    p.add_argument("--classes", type=int, default=Setting.classes, help="latent classes K (tau+ = 1/K)")
    p.add_argument("--out", default="runs/sampling_bias", help="folder for results.json and the plot")
    args = p.parse_args(argv)

    torch.set_num_threads(min(2, torch.get_num_threads()))
    s = Setting(steps=args.steps, batch=args.batch, classes=args.classes)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    per_seed = {}
    with tqdm(total=s.steps * len(args.seeds), desc="sampling-bias", unit="step",
              mininterval=0.5 if sys.stderr.isatty() else 10.0) as bar:
        for seed in args.seeds:
            per_seed[seed] = run(seed, s, progress=bar)
    elapsed = time.time() - t0

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
        std = statistics.stdev(accs) if len(accs) > 1 else 0.0
        summary[name] = {"mean": mean, "std": std, "per_seed": accs}
        print(f"| {labels[name]} | {mean:.2f} ± {std:.2f} | {', '.join(f'{a:.2f}' for a in accs)} |")
    order = [summary[n]["mean"] for n in ("unbiased", "debiased_m1", "biased")]
    holds = order[0] >= order[1] >= order[2]
    print(f"\nDCL's ordering unbiased >= debiased (M=1) >= biased {'holds' if holds else 'does NOT hold'} here.")
    write_json_atomic(os.path.join(args.out, "results.json"),
                      {"setting": asdict(s), "seeds": args.seeds, "summary": summary, "seconds": elapsed})
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7.5, 3.4))
        names = list(OBJECTIVES)
        ax.bar(range(4), [summary[n]["mean"] for n in names], yerr=[summary[n]["std"] for n in names],
               color=["#999999", "#4c72b0", "#55a868", "#c44e52"], capsize=4)
        ax.set_xticks(range(4), [labels[n].replace(", ", "\n") for n in names], fontsize=8)
        lo = min(summary[n]["mean"] - summary[n]["std"] for n in names)
        ax.set_ylim(max(0, lo - 5), 100)
        ax.set_ylabel("linear-probe accuracy (%)")
        ax.set_title(f"Sampling bias on synthetic data (K={s.classes}, {len(args.seeds)} seeds)")
        fig.tight_layout()
        fig.savefig(os.path.join(args.out, "sampling_bias.png"), dpi=120)
        print(f"plot: {os.path.join(args.out, 'sampling_bias.png')}")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
