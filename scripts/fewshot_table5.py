#!/usr/bin/env python
"""Run the puNCE Table 5 grid (method x N x seeds), aggregate it, and compare the methods seed by seed.

Methods: `majority` (the evaluation split's majority-class rate, read from the other runs' metrics.json:
no run of its own), `probe` (frozen encoder + logistic regression), `ce`, `ce+scl`, `ce+punce` (exact
prior) and `ce+punce-est` (ce+punce with the prior estimated by Elkan-Noto). Each run is `fewshot.train`
with its own output folder, <out>/<method>/N<n>/seed<s> (--out default runs/table5). A finished run
(metrics.json present) is skipped, so an interrupted sweep continues where it stopped; a finished run
made with other options (steps, lr, encoder, data, preset, --set ...) is refused, never counted.

The same seed draws the same labeled and unlabeled sample for every method, so methods are compared
by paired differences per seed: mean, a 95% CI by paired t and by paired bootstrap over the seeds, and
how many seeds each wins. The table reports the plain mean ± sample std over all seeds (no best-k-of-n
selection; the paper's baseline numbers are best 3 of 10). Written to <out>/table5.md, table5.json
(every number) and table5.png.

--preset picks the training protocol (fewshot.config.PRESETS); options given explicitly (--max-steps,
--lr, --set KEY=VALUE for any FewShotConfig field) override it. Choose hyperparameters with
--eval-split dev (a development split held out of the training pool), never on the evaluation split.

Each run is `python -m fewshot.train` with its configuration as options, started by shared_losses.training.sweep: a
local pool (--parallel at a time), Ray (--backend ray [--address auto|ray://HOST:PORT] --gpus-per-run 1) or Slurm
jobs (--backend slurm --slurm-partition P --gpus-per-run 1);
its output goes to <run folder>.log beside the folder.

    python scripts/fewshot_table5.py --preset paper --encoder roberta-base --dataset glue/sst2       # the paper (GPU)
    python scripts/fewshot_table5.py --preset cpu --encoder minilm --pooling mean --dataset drugreview \\
        --ns 20 100 --seeds 0 1 2
    python scripts/fewshot_table5.py --preset cpu --encoder minilm --pooling mean --dataset drugreview \\
        --eval-split dev --methods ce ce+punce --set lr=1e-4 --set lam=0.3 \\
        --out runs/dev_lr1e-4_lam0.3                                                                 # one grid point
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import statistics
import sys
import types
import typing
from pathlib import Path


from shared_losses.training.cli import ArgumentParser, HelpFormatter, run_cli

from fewshot import objectives as FO
from fewshot.config import PRESETS, FewShotConfig, preset_config, unused_by_objective
from fewshot.grids import refuse_other_finished_run
from shared_losses.training.runtime import write_json_atomic, write_text_atomic
from shared_losses.training.stats import BOOTSTRAP_COLUMN, paired_stats, summarize, wins_text
from shared_losses.training.sweep import (Run, add_sweep_arguments, dataclass_flags, from_caller, grid_lock,
                                          note_running_grid, options_of, run_sweep)

ROOT = Path(__file__).resolve().parents[1]

PAPER = {  # puNCE Table 5 (RoBERTa, SST-2), mean ± std
    20: {"ce": "85.92±2.11", "ce+scl": "88.18±3.30", "ce+punce": "91.15±1.75"},
    100: {"ce": "91.10±1.36", "ce+scl": "92.83±1.23", "ce+punce": "93.76±0.17"},
    1000: {"ce": "94.03±0.64", "ce+scl": "94.11±0.53", "ce+punce": "94.58±0.79"},
}

#: The config fields that make each method (the runs of `majority` are those of the others).
#: One method per objective of fewshot.objectives' table (in its order), CE + puNCE twice: with the exact prior
#: and with the estimated one; setfit is an optional extra (pip install -e ".[setfit]"), not in the default methods.
RUN_METHODS: dict[str, dict] = {}
for _name in (entry.name for entry in FO.ALL_OBJECTIVES.ranked()):
    if _name == "ce+punce":
        RUN_METHODS["ce+punce"] = {"objective": "ce+punce", "estimate_prior": False}
        RUN_METHODS["ce+punce-est"] = {"objective": "ce+punce", "estimate_prior": True}
    elif _name != "setfit":
        RUN_METHODS[_name] = {"objective": _name}
RUN_METHODS["setfit"] = {"objective": "setfit"}
METHODS = ("majority", *RUN_METHODS)
DEFAULT_METHODS = [m for m in METHODS if m != "setfit"]
#: Methods compared against every other one by paired differences (when they ran).
ANCHORS = ("ce+punce", "ce+punce-est")

#: FewShotConfig fields the sweep sets itself (--set refuses them, naming what to use instead).
SWEEP_FIELDS = {
    "objective": "--methods", "estimate_prior": "--methods (ce+punce-est)", "n_labeled": "--ns", "seed": "--seeds",
    "output_dir": "--out", "resume": "nothing (an interrupted run is always continued)", "preset": "--preset",
}
#: argparse dest -> FewShotConfig field of the sweep's own options (default None: only given ones are passed).
OPTION_FIELDS = ("encoder", "dataset", "eval_file", "text_column", "label_column", "positive_label", "n_unlabeled",
                 "max_steps", "pooling", "lr", "eval_split", "dev_fraction", "max_eval")

# ----------------------------------------------------------------------------------------- --set

def _field_types() -> dict:
    return typing.get_type_hints(FewShotConfig)


def parse_value(name: str, text: str, tp):
    """``text`` read as a value of the FewShotConfig field ``name`` of type ``tp`` (int, float, bool,
    str, a Literal, or Optional[...] of those, where none/null means None)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [t for t in typing.get_args(tp) if t is not type(None)]
        if type(None) in typing.get_args(tp) and text.strip().lower() in ("none", "null"):
            return None
        if len(inner) != 1:
            raise ValueError(f"--set {name}: cannot parse a value of type {tp}")
        return parse_value(name, text, inner[0])
    if origin is typing.Literal:
        choices = typing.get_args(tp)
        if text not in choices:
            raise ValueError(f"--set {name}={text}: must be one of {', '.join(map(str, choices))}")
        return text
    if tp is bool:
        low = text.strip().lower()
        if low in ("true", "1", "yes", "on"):
            return True
        if low in ("false", "0", "no", "off"):
            return False
        raise ValueError(f"--set {name}={text}: must be true or false")
    if tp is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"--set {name}={text}: must be an integer") from None
    if tp is float:
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"--set {name}={text}: must be a number") from None
    if tp is str:
        return text
    raise ValueError(f"--set {name}: cannot parse a value of type {tp}")


def parse_set(items) -> dict:
    """``["lr=1e-4", "train-layers=2", ...]`` -> ``{"lr": 0.0001, "train_layers": 2}``, each value parsed
    with its FewShotConfig field's type. Refuses unknown fields (naming close ones), fields the sweep
    sets itself, and a field given twice."""
    fields = _field_types()
    out: dict = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        key, text = item.split("=", 1)
        name = key.strip().lstrip("-").replace("-", "_")
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=3)
            raise ValueError(f"--set {key}: FewShotConfig has no field {name!r}"
                             + (f" (did you mean {', '.join(close)}?)" if close else ""))
        if name in SWEEP_FIELDS:
            raise ValueError(f"--set {name}: the sweep sets it; use {SWEEP_FIELDS[name]}")
        if name in out:
            raise ValueError(f"--set {name} given twice")
        out[name] = parse_value(name, text, fields[name])
    return out


# ----------------------------------------------------------------------------------------- runs

def run_dir(out: Path, method: str, n: int, seed: int) -> Path:
    return Path(out) / method / f"N{n}" / f"seed{seed}"


def run_config(preset, overrides: dict, method: str, n: int, seed: int, folder: Path) -> FewShotConfig:
    """The FewShotConfig of one run: ``preset``'s values, then ``overrides`` (the options the user gave) but those
    the method does not read (fewshot.config.unused_by_objective: a baseline's lr, a ce run's lam; its command would be
    refused), then the method's fields, N, the seed and the folder (``resume``: a missing folder starts a new run, an
    interrupted one continues). Evaluated only at the end (eval_every = max_steps) unless --set eval_every says
    otherwise."""
    unread = unused_by_objective(RUN_METHODS[method]["objective"])
    fields = {**{k: v for k, v in overrides.items() if k not in unread}, **RUN_METHODS[method], "n_labeled": n,
              "seed": seed, "output_dir": str(folder), "resume": True}
    cfg = preset_config(preset, **fields)
    if "eval_every" not in overrides and "eval_every" not in unread:
        cfg = dataclasses.replace(cfg, eval_every=max(cfg.max_steps, 1))
    if "export" not in overrides:  # a sweep keeps metrics, not a model folder per run (--set export=true does)
        cfg = dataclasses.replace(cfg, export=False)
    return cfg


def train_command(preset, cfg: FewShotConfig) -> list[str]:
    """``python -m fewshot.train`` with the options that make ``cfg`` from ``preset``'s defaults (no progress bar:
    the output goes to a log file)."""
    cfg = dataclasses.replace(cfg, progress=False)
    return [sys.executable, "-m", "fewshot.train", *(["--preset", preset] if preset else []),
            *dataclass_flags(cfg, preset_config(preset))]


def read_metrics(out: Path, methods, ns, seeds) -> dict:
    """``{method: {n: {seed: metrics}}}`` of the finished runs of the run methods in ``methods``."""
    found: dict = {}
    for m in methods:
        if m not in RUN_METHODS:
            continue
        for n in ns:
            for s in seeds:
                f = run_dir(out, m, n, s) / "metrics.json"
                if f.exists():
                    found.setdefault(m, {}).setdefault(n, {})[s] = json.loads(f.read_text())
    return found


def majority_from_runs(metrics: dict, ns, seeds) -> tuple[dict, list]:
    """``({n: {seed: majority_accuracy}}, warnings)``: per (N, seed), the majority-class rate recorded by
    any finished run of that (N, seed) (they are all scored on the same rows and should agree)."""
    table: dict = {}
    warnings = []
    for n in ns:
        for s in seeds:
            rates = {m: by_n[n][s]["majority_accuracy"] for m, by_n in metrics.items()
                     if s in by_n.get(n, {}) and by_n[n][s].get("majority_accuracy") is not None}
            if rates:
                first = next(iter(rates.values()))
                table.setdefault(n, {})[s] = first
                if any(abs(r - first) > 1e-9 for r in rates.values()):
                    warnings.append(f"N={n} seed={s}: the runs disagree on the majority rate {rates}")
    return table, warnings


def aggregate(out: Path, methods, ns, seeds) -> dict:
    """Every number of the table: per method and N the per-seed accuracies, mean, std, mean train
    seconds and priors, and the paired comparisons of each anchor (ce+punce, ce+punce-est) against the
    other methods, per N."""
    sources = [m for m in methods if m in RUN_METHODS] or list(RUN_METHODS)
    metrics = read_metrics(out, sources, ns, seeds)
    majority, warnings = majority_from_runs(metrics, ns, seeds)
    acc: dict = {}  # method -> n -> seed -> accuracy
    results: dict = {}
    for m in methods:
        results[m] = {}
        for n in ns:
            if m == "majority":
                per = dict(majority.get(n, {}))
                extra = {}
            else:
                runs = metrics.get(m, {}).get(n, {})
                per = {s: r["eval_accuracy"] for s, r in runs.items()}
                secs = [r["train_seconds"] for r in runs.values() if r.get("train_seconds") is not None]
                extra = {"train_seconds_mean": statistics.mean(secs) if secs else None,
                         "train_seconds": {s: r.get("train_seconds") for s, r in runs.items()},
                         "prior": {s: r.get("prior") for s, r in runs.items()},
                         "prior_source": {s: r.get("prior_source") for s, r in runs.items()},
                         "n_eval": {s: r.get("n_eval") for s, r in runs.items()}}
            if per:
                acc.setdefault(m, {})[n] = per
                results[m][n] = {**summarize(per), **extra}
    paired = []
    done = set()
    for anchor in ANCHORS:
        if anchor not in acc:
            continue
        for other in methods:
            if other == anchor or other not in acc or frozenset((anchor, other)) in done:
                continue
            done.add(frozenset((anchor, other)))
            for n in ns:
                if n in acc[anchor] and n in acc[other]:
                    st = paired_stats(acc[anchor][n], acc[other][n])
                    if st["n_seeds"]:
                        paired.append({"n_labeled": n, "a": anchor, "b": other, **st})
    order = {m: i for i, m in enumerate(methods)}
    paired.sort(key=lambda p: (ANCHORS.index(p["a"]), p["n_labeled"], order[p["b"]]))  # per anchor, per N
    return {"results": results, "paired": paired, "warnings": warnings}


# ----------------------------------------------------------------------------------------- output

def _fmt_ci(ci) -> str:
    return "—" if ci is None else f"[{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _cell(r: dict | None, n_seeds: int) -> str:
    if r is None:
        return "—"
    s = f"{r['mean']:.2f}" + (f"±{r['std']:.2f}" if r["std"] is not None else "")
    return s + (f" ({r['n_runs']} runs)" if r["n_runs"] != n_seeds else "")


def split_words(header: dict) -> str:
    if header["eval_split"] == "dev":
        return (f"**DEVELOPMENT split** ({header['dev_fraction']:g} of the training pool held out; for choosing "
                "hyperparameters, NOT evaluation-split results)")
    if header["dataset"] == "glue/sst2":
        return "evaluation split (GLUE SST-2 labeled validation split)"
    return "evaluation split (eval file / test split)"


def render_markdown(header: dict, agg: dict, methods, ns, seeds) -> str:
    res, paired = agg["results"], agg["paired"]
    title = "DEVELOPMENT-SPLIT sweep" if header["eval_split"] == "dev" else "Table 5"
    lines = [f"# {title}: {header['dataset']}, encoder {header['encoder']}", ""]
    if header["eval_split"] == "dev":
        lines += ["**DEVELOPMENT SPLIT** — these numbers are scored on rows held out of the training pool, for "
                  "choosing hyperparameters; they are not evaluation-split results.", ""]
    shown = {"dataset", "encoder", "eval_split", "dev_fraction", "max_steps", "n_unlabeled", "lr", "pooling",
             "max_eval"}
    extra = {k: v for k, v in header["overrides"].items() if k not in shown}
    sub = f" (at most {header['max_eval']} examples per seed)" if header.get("max_eval") else ""
    lines += [f"Accuracy (%) on the {split_words(header)}{sub}; mean ± sample std over seeds {list(seeds)}. "
              f"Preset {header['preset'] or 'none'}, {header['max_steps']} steps (probe: none), "
              f"U = {header['n_unlabeled']}, "
              f"lr {header['lr']:g}, batches {header['batch_labeled']}+{header['batch_unlabeled']}, pooling "
              f"{header['pooling']}, head {header['head']}."
              + (" Options set: " + ", ".join(f"{k}={v!r}" for k, v in extra.items()) + "." if extra else ""),
              "", "| labeled N | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
    for n in ns:
        lines.append(f"| {n} | " + " | ".join(_cell(res[m].get(n), len(seeds)) for m in methods) + " |")
    if header["dataset"] == "glue/sst2" and header["eval_split"] == "eval":
        lines += ["", "Paper (puNCE Table 5, RoBERTa; CE and CE+SCL from Gunel et al., best 3 of 10 runs):",
                  "", "| labeled N | " + " | ".join(methods) + " |", "|---|" + "---|" * len(methods)]
        lines += [f"| {n} | " + " | ".join(PAPER.get(n, {}).get(m, "—") for m in methods) + " |" for n in ns]
    lines += ["", "## Per seed", "", "| N | method | " + " | ".join(f"seed {s}" for s in seeds) + " | mean train s |",
              "|---|---|" + "---|" * (len(seeds) + 1)]
    for n in ns:
        for m in methods:
            r = res[m].get(n)
            if r is None:
                continue
            cells = [f"{r['per_seed'][s]:.2f}" if s in r["per_seed"] else "—" for s in seeds]
            secs = r.get("train_seconds_mean")
            lines.append(f"| {n} | {m} | " + " | ".join(cells) + f" | {'—' if secs is None else f'{secs:.1f}'} |")
    prior_lines = []
    for n in ns:  # the estimated prior against the exact one, same sample
        est, exact = res.get("ce+punce-est", {}).get(n), res.get("ce+punce", {}).get(n)
        if est and exact:
            common = [s for s in sorted(set(est["prior"]) & set(exact["prior"]))
                      if est["prior"][s] is not None and exact["prior"][s] is not None]
            if common:
                err = statistics.mean(abs(est["prior"][s] - exact["prior"][s]) for s in common)
                prior_lines.append(f"- N={n}: mean |estimated − exact| {err:.3f} over {len(common)} seeds; estimated "
                                   f"{[round(est['prior'][s], 3) for s in common]}, exact "
                                   f"{[round(exact['prior'][s], 3) for s in common]}")
    if prior_lines:
        lines += ["", "Prior π of ce+punce-est (Elkan-Noto) against the exact one of ce+punce (same sample):", ""]
        lines += prior_lines
    lines += ["", "## Paired differences (same seed = same labeled and unlabeled sample)", "",
              "Difference A − B in accuracy points over the seeds both ran; 95% CI by paired t and by paired bootstrap "
              "(10,000 resamples of the seeds, rng seed 0, percentile); wins = seeds where A > B. With few seeds the "
              "bootstrap interval is too narrow (it never leaves the range of the observed differences): read the t "
              "interval.", "",
              f"| N | A − B | seeds | per-seed differences | mean | 95% CI (t) | {BOOTSTRAP_COLUMN} | A wins |",
              "|---|---|---|---|---|---|---|---|"]
    for p in paired:
        diffs = ", ".join(f"{d:+.2f}" for d in p["diffs"])
        lines.append(f"| {p['n_labeled']} | {p['a']} − {p['b']} | {p['n_seeds']} | {diffs} | {p['mean']:+.2f} | "
                     f"{_fmt_ci(p['t_ci'])} | "
                     f"{_fmt_ci(p['bootstrap_ci'])} | {wins_text(p)} |")
    if not paired:
        lines.append("| — | (no pairs: ce+punce or ce+punce-est and another method need a common seed) | | | | | | |")
    if agg["warnings"]:
        lines += ["", "Warnings:"] + [f"- {w}" for w in agg["warnings"]]
    return "\n".join(lines)


def to_json(header: dict, agg: dict, methods, ns, seeds) -> dict:
    return {"header": header, "methods": list(methods), "ns": list(ns), "seeds": list(seeds),
            "results": {m: {str(n): r for n, r in by_n.items()} for m, by_n in agg["results"].items()},
            "paired": agg["paired"], "warnings": agg["warnings"]}


def plot(path: Path, header: dict, agg: dict, methods, ns) -> bool:
    """table5.png: accuracy vs N per method (left) and ce+punce's paired differences with their t CI
    (right). False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    res = agg["results"]
    colors = {m: f"C{i}" for i, m in enumerate(METHODS)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1, 1.15]})
    log_x = len(ns) > 1 and max(ns) / min(ns) >= 10
    shown = [m for m in methods if any(n in res[m] for n in ns)]
    for m in methods:
        pts = [(n, res[m][n]["mean"], res[m][n]["std"] if res[m][n]["std"] is not None else float("nan"))
               for n in ns if n in res[m]]  # one seed: no whisker (not ± 0)
        if not pts:
            continue
        xs, ms, sds = zip(*pts)
        # side by side at each N, so error bars of methods with close means stay apart
        off = (shown.index(m) - (len(shown) - 1) / 2) * 0.04
        xs = [x * (1 + off) if log_x else x + off * (max(ns) - min(ns) + 10) for x in xs]
        if m == "majority":
            left.plot(xs, ms, linestyle="--", marker="s", color="gray", label="majority class")
        else:
            left.errorbar(xs, ms, yerr=sds, marker="o", capsize=3, color=colors[m], label=m)
    if log_x:
        left.set_xscale("log")
    left.set_xticks(list(ns))
    left.set_xticklabels([str(n) for n in ns])
    left.set_xlabel("labeled examples N")
    left.set_ylabel("accuracy (%), mean ± std over seeds")
    left.set_title("accuracy vs N")
    left.grid(alpha=0.3)
    if shown:
        left.legend(fontsize=8)
    else:  # every run failed or none finished: say so, as the right panel does, and no empty legend or 0-1 axis
        left.text(0.5, 0.5, "no finished runs", ha="center", va="center", transform=left.transAxes)
        left.set_ylim(0, 100)

    anchor = next((a for a in ANCHORS if any(p["a"] == a for p in agg["paired"])), None)
    rows = [p for p in agg["paired"] if p["a"] == anchor]
    rows.sort(key=lambda p: (p["n_labeled"], list(methods).index(p["b"])))
    if rows:
        ys = list(range(len(rows)))[::-1]
        for y, p in zip(ys, rows):
            ci = p["t_ci"]
            err = None if ci is None else [[p["mean"] - ci[0]], [ci[1] - p["mean"]]]
            right.errorbar([p["mean"]], [y], xerr=err, marker="o", capsize=4,
                           color="gray" if p["b"] == "majority" else colors[p["b"]])
        right.set_yticks(ys)
        right.set_yticklabels([f"N={p['n_labeled']} vs {p['b']} ({p['wins']}/{p['n_seeds']} wins"
                               + (f", {p['ties']} tied)" if p.get("ties") else ")") for p in rows], fontsize=8)
        right.axvline(0.0, color="black", linewidth=1)
        right.set_xlabel(f"{anchor} − method (accuracy points), mean and 95% paired-t CI")
        right.set_title(f"paired differences of {anchor} (same seeds)")
        right.grid(axis="x", alpha=0.3)
    else:
        right.text(0.5, 0.5, "no paired comparisons\n(ce+punce and another method on common seeds)",
                   ha="center", va="center", transform=right.transAxes)
        right.set_axis_off()
    split = ("DEVELOPMENT split" if header["eval_split"] == "dev" else "evaluation split")
    fig.suptitle(f"{header['dataset']}, {os.path.basename(str(header['encoder']).rstrip('/'))}, preset "
                 f"{header['preset'] or 'none'}, {header['max_steps']} steps, U={header['n_unlabeled']}, {split}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def header_of(cfg: FewShotConfig, overrides: dict) -> dict:
    h = {k: getattr(cfg, k) for k in ("dataset", "encoder", "eval_file", "eval_split", "dev_fraction", "preset",
                                      "max_steps", "n_unlabeled", "lr", "batch_labeled", "batch_unlabeled", "lam",
                                      "temperature", "pooling", "head", "max_eval", "max_length", "train_layers")}
    return {**h, "overrides": dict(overrides)}


# ----------------------------------------------------------------------------------------- CLI

def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    unset = " (unset: the preset's value where it sets one, else FewShotConfig's: {})"
    p.add_argument("--preset", default=None, choices=sorted(PRESETS),
                   help="training protocol defaults (fewshot.config.PRESETS); options given explicitly override it")
    p.add_argument("--encoder", default=None, help="HF encoder name or folder ('minilm' = offline MiniLM)"
                   + unset.format(FewShotConfig.encoder))
    p.add_argument("--dataset", default=None, help="glue/sst2, drugreview, reuters, rotten_tomatoes, fine_foods or a "
                   "local file" + unset.format(FewShotConfig.dataset))
    p.add_argument("--eval-file", default=None, help="evaluation file for a local dataset")
    p.add_argument("--text-column", default=None, help="text column of a local dataset"
                   + unset.format(FewShotConfig.text_column))
    p.add_argument("--label-column", default=None, help="label column of a local dataset"
                   + unset.format(FewShotConfig.label_column))
    p.add_argument("--positive-label", default=None, help="label value of the positive class in a local dataset"
                   + unset.format(FewShotConfig.positive_label))
    p.add_argument("--methods", dest="methods", nargs="+", default=DEFAULT_METHODS, choices=METHODS,
                   metavar="METHOD", help=f"methods of the grid, of {', '.join(METHODS)} ("
                   "setfit needs the optional extra .[setfit] and is not in the default)")
    p.add_argument("--ns", type=int, nargs="+", default=[20, 100, 1000], help="labeled sizes N")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="seeds per (method, N)")
    p.add_argument("--n-unlabeled", type=int, default=None, help="unlabeled examples U per run"
                   + unset.format(FewShotConfig.n_unlabeled))
    p.add_argument("--max-steps", type=int, default=None, help="optimisation steps per run"
                   + unset.format(FewShotConfig.max_steps))
    p.add_argument("--pooling", default=None, choices=["auto", "cls", "mean", "max"],
                   help="sentence vector: auto (a sentence-transformers folder's own pooling, else the family's: cls), "
                   "first token, mean or max over tokens"
                   + unset.format(FewShotConfig.pooling))
    p.add_argument("--lr", type=float, default=None, help="AdamW learning rate" + unset.format(FewShotConfig.lr))
    p.add_argument("--eval-split", default=None, choices=["eval", "dev"],
                   help="`dev`: score on a development split held out of the training pool (choose hyperparameters "
                        "there, never on `eval`)" + unset.format(FewShotConfig.eval_split))
    p.add_argument("--dev-fraction", type=float, default=None, help="share of the training pool held out with "
                   "--eval-split dev" + unset.format(FewShotConfig.dev_fraction))
    p.add_argument("--max-eval", type=int, default=None,
                   help="score on at most this many evaluation examples (None: all)")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="KEY=VALUE",
                   help="set any FewShotConfig field (repeatable), parsed with its type (none/null for None), e.g. "
                        "--set lr=1e-4 --set train_layers=2 --set head=logreg")
    p.add_argument("--out", default="runs/table5", help="sweep folder")
    p.add_argument("--aggregate-only", action="store_true",
                   help="only rebuild the table and plot (pass the sweep's options: finished runs are checked "
                        "against them)")
    add_sweep_arguments(p)
    return p


def overrides_of(p: argparse.ArgumentParser, args) -> dict:
    """The FewShotConfig fields the user gave: the sweep's own options that are not None, and --set."""
    given = {k: getattr(args, k) for k in OPTION_FIELDS if getattr(args, k) is not None}
    try:
        sets = parse_set(args.set_)
    except ValueError as err:
        p.error(str(err))
    both = sorted(set(given) & set(sets))
    if both:
        p.error(f"--set {both[0]} repeats the option --{both[0].replace('_', '-')}: give it once")
    over = {**given, **sets}
    if "ce+punce-est" in args.methods and over.get("prior") is not None:
        p.error("--set prior gives every run that prior, so ce+punce-est would not estimate it: drop one of them")
    return over


def check_run(cfg: FewShotConfig) -> None:
    """What FewShotConfig.validate leaves to the run's data step (fewshot.data.sample_fewshot's rule for the pnu
    setting of Table 5), checked before anything starts: the seed, N and U of a run."""
    if not 0 <= cfg.seed < 2**32:
        raise ValueError(f"--seeds must be >= 0 and below 2**32 (numpy's generators), got {cfg.seed}")
    if cfg.n_labeled < 2:
        raise ValueError(f"--ns must be >= 2 (the labeled sample holds both classes), got {cfg.n_labeled}")
    if cfg.n_unlabeled < 0:
        raise ValueError(f"--n-unlabeled must be >= 0, got {cfg.n_unlabeled}")


def check_data(cfg: FewShotConfig, ns=()) -> None:
    """The runs' data, read by fewshot.data.load_splits, the runs' own loader, as the runs will read it (they run in
    the repository root), checked before anything starts. A local text --dataset / --eval-file: a missing file, a
    missing --eval-file, an unknown column or label fails here, not in every run. A named set shipped with the suite
    (drugreview, reuters, rotten_tomatoes, fine_foods: read in a moment) and a local file: the largest of ``ns``
    (with --n-unlabeled, after the development split of --eval-split dev) must fit the training set, as
    fewshot.data.sample_fewshot draws it. glue/sst2 and hf:NAME (they may need the hub) and image data are left to the
    runs."""
    import contextlib

    from fewshot.images import is_image_dataset
    from shared_losses.data import TEXT_SETS

    if cfg.dataset == "glue/sst2" or str(cfg.dataset).startswith("hf:") or is_image_dataset(cfg.dataset):
        return  # the hub's data sets are read by the runs; image data: the runs refuse it in one line
    with contextlib.chdir(ROOT):
        if cfg.dataset in TEXT_SETS:
            if getattr(cfg, "label_map", None) is not None:
                from fewshot.data import load_splits

                load_splits(cfg)  # its one-line refusal
            named = TEXT_SETS[cfg.dataset]
            train_x, train_y = named.load(named.splits[0])  # the training split only: the sample's pool
        else:
            from fewshot.data import load_splits

            if Path(cfg.dataset).exists() and cfg.eval_file is not None and not Path(cfg.eval_file).is_file():
                raise FileNotFoundError(f"--eval-file {cfg.eval_file}: no such file")  # the loader does not name it
            train_x, train_y = load_splits(cfg)[:2]
    if ns:
        check_sizes(cfg, train_x, train_y, max(ns))


def check_sizes(cfg: FewShotConfig, train_x, train_y, n: int) -> None:
    """N = ``n`` labeled and --n-unlabeled unlabeled examples must fit the training set (the pool left by the
    development split with --eval-split dev), as fewshot.data.sample_fewshot draws them: a ValueError naming --ns,
    the set's size and what would fit, otherwise."""
    from fewshot.run import dev_split

    where = f"--dataset {cfg.dataset}: its training set has {len(train_y)} examples"
    if cfg.eval_split == "dev":
        train_x, train_y = dev_split(train_x, train_y, cfg.dev_fraction)[:2]
        where += f", {len(train_y)} left after the development split (--dev-fraction {cfg.dev_fraction:g})"
    size, u = len(train_y), cfg.n_unlabeled
    if n + u > size:
        fits = (f"N of at most {size - u} with --n-unlabeled {u}" if size - u >= 2
                else f"a --n-unlabeled below {size - 1}")
        raise ValueError(f"--ns {n} does not fit {where}, too few for {n} labeled + {u} unlabeled; use {fits} "
                         "(nothing was started)")


def main(argv=None):
    p = build_parser()
    args = p.parse_args(argv)
    # a grid point given twice is run once (a copy would fail on the folder the other trains, and count twice)
    dropped = [f"--{name} {v}" for name in ("methods", "ns", "seeds") for i, v in enumerate(getattr(args, name))
               if v in getattr(args, name)[:i]]
    args.ns, args.seeds = list(dict.fromkeys(args.ns)), list(dict.fromkeys(args.seeds))
    args.out = str(Path(args.out).resolve())  # --out is the caller's, for runs and tables alike
    for name in ("encoder", "dataset", "eval_file"):  # and so are the inputs it names
        setattr(args, name, from_caller(getattr(args, name)))
    out = Path(args.out)
    methods = list(dict.fromkeys(args.methods))
    overrides = overrides_of(p, args)
    run_methods = [m for m in methods if m in RUN_METHODS]
    checked = run_methods or list(RUN_METHODS)  # `majority` alone reads any finished run, checked as well
    # an option every method of the grid leaves at the preset's value (a baseline's lr, ce's lam) would label the
    # table with a setting no run used
    unread = set(overrides).intersection(*(unused_by_objective(RUN_METHODS[m]["objective"]) for m in checked))
    if unread:
        p.error(f"{', '.join(sorted(unread))} (--set or the option): read by none of --methods {' '.join(checked)}; "
                "drop it, or add a method that reads it")
    options = options_of(args)
    options.validate()

    todo, finished = [], 0
    for n in args.ns:  # seed-major: an interrupted sweep leaves whole seeds (every method on the same sample)
        for s in args.seeds:
            for m in checked:
                folder = run_dir(out, m, n, s)
                cfg = run_config(args.preset, overrides, m, n, s, folder)
                check_run(cfg)  # the grid's own options first (--seeds, --ns), named as the grid spells them
                cfg.validate()  # a bad option fails here, before hours of runs
                if (folder / "metrics.json").exists():
                    refuse_other_finished_run(folder, cfg)  # counted only if made with these options
                    finished += 1
                elif m in run_methods:
                    todo.append((m, n, s, cfg))
    if args.aggregate_only and not finished:
        raise ValueError(f"--aggregate-only: no finished runs under {out} (expected METHOD/N<n>/seed<s>/metrics.json "
                         "for the --methods, --ns and --seeds given); check --out")
    if not args.aggregate_only and todo:
        check_data(todo[0][3], sorted({n for _, n, _, _ in todo}))
        options.check_cluster()
    if dropped:
        print(f"note: given twice, run once: {', '.join(dropped)}", file=sys.stderr, flush=True)
    # a grid that runs holds --out's lock (a second grid started on it is refused at once) until its tables are written
    if args.aggregate_only:
        note_running_grid(out)
    with contextlib.nullcontext() if args.aggregate_only else grid_lock(out):
        return run_and_tabulate(args, out, todo, finished, methods, run_methods, overrides, options)


def run_and_tabulate(args, out: Path, todo: list, finished: int, methods, run_methods, overrides, options) -> int:
    """The runs of ``todo`` (none with --aggregate-only), then the table, its JSON and plot; the exit status."""
    failed = 0
    if not args.aggregate_only and todo:
        how = options_of(args).describe()
        print(f"{len(todo)} runs to do ({finished} finished earlier, skipped; {how})", flush=True)
        runs = []
        for m, n, s, cfg in todo:
            folder = Path(cfg.output_dir)
            runs.append(Run(f"{m} N={n} seed={s}", train_command(args.preset, cfg),
                            folder.parent / f"{folder.name}.log",
                            cpus=args.cpus_per_run, gpus=args.gpus_per_run, cwd=str(ROOT)))

        def report(run: Run, rc: int) -> None:
            metrics = Path(str(run.log)[: -len(".log")]) / "metrics.json"
            if rc == 0 and metrics.exists():
                print(f"  {run.name}: acc {json.loads(metrics.read_text())['eval_accuracy']:.2f}", flush=True)

        codes = run_sweep(runs, options, on_finish=report)
        failed = sum(rc != 0 for rc in codes)
        if failed:
            print(f"{failed} of {len(runs)} runs failed (see the .log beside each run folder); the table counts the "
                  "finished ones", file=sys.stderr)
    elif not args.aggregate_only:
        print(f"nothing to run: the grid's {finished} runs finished earlier (the table is made again)", flush=True)

    ref = run_config(args.preset, overrides, "ce+punce", args.ns[0], args.seeds[0], out)  # reads every option
    header = header_of(ref, overrides)
    agg = aggregate(out, methods, args.ns, args.seeds)
    text = render_markdown(header, agg, methods, args.ns, args.seeds)
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out / "table5.md", text + "\n")
    write_json_atomic(out / "table5.json", to_json(header, agg, methods, args.ns, args.seeds))
    plotted = plot(out / "table5.png", header, agg, methods, args.ns)
    print(f"results in {out}: table5.md, table5.json" + (", table5.png" if plotted else
                                                          " (matplotlib missing: no plot)"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_cli(main))
