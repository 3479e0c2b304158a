#!/usr/bin/env python
"""Benchmark: few-shot training cost, per step or per whole run.

Step mode (default). For each sequence length (64, 128) it times full training steps (forward of two
dropout views, loss, backward, AdamW step) of `ce+punce` against the `ce` step (one view, labeled
examples only) measured in the same run, on the same encoder, and reports examples/s, the ratio, and
the peak extra memory (peak RSS on CPU, `torch.cuda.max_memory_allocated` on GPU) of a fresh process
per configuration. Inputs are random token ids of exactly `seq_len` tokens. `probe` has no training
step: its row times what it does instead, once per run (a no-grad forward of the labeled batch in
eval mode and the logistic-regression fit), so its ratio compares that whole training to one CE step.

Protocol mode (--protocol). Times one whole run of `fewshot.train` per method (probe, ce, ce+scl,
ce+punce; default N = 20 with --preset cpu on drugreview, MiniLM, mean pooling), each in a fresh process
writing into a temporary folder: the seconds of the `train()` call (data, model, training and
evaluation), the process's seconds (with Python and torch imports), metrics.json's train_seconds, and
the ratio of the `train()` seconds to the CE run's in the same invocation.

    python scripts/bench_fewshot.py                     # offline MiniLM, CPU
    python scripts/bench_fewshot.py --encoder roberta-base --batch-labeled 16 --batch-unlabeled 32 --json
    python scripts/bench_fewshot.py --protocol          # whole runs, --preset cpu, drugreview, N = 20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch

from shared_losses.training.cli import ArgumentParser, HelpFormatter, number_in, run_cli

STEP_OBJECTIVES = ("probe", "ce", "ce+punce")
PROTOCOL_METHODS = ("probe", "ce", "ce+scl", "ce+punce")
STEP_DEFAULTS = {"steps": 5, "batch_labeled": 16, "batch_unlabeled": 32}  # step mode, when not given


def _table5():
    """scripts/fewshot_table5.py (its run_config and --set parsing: a protocol run is one cell of the sweep)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fewshot_table5.py")
    spec = importlib.util.spec_from_file_location("fewshot_table5", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def measure(objective, encoder, seq_len, n_lab, n_unl, steps, pooling):
    from fewshot.model import FewShotModel
    from fewshot.objectives import fewshot_loss, roles_from_labels
    from fewshot.run import forward_views

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = FewShotModel(encoder, pooling, 128).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    n = n_lab + (n_unl if objective == "ce+punce" else 0)  # as fewshot.train: only puNCE reads unlabeled examples
    vocab = model.encoder.config.vocab_size
    ids = torch.randint(5, vocab - 1, (n, seq_len), device=device)
    mask = torch.ones_like(ids)
    labels = torch.arange(n, device=device) % 2
    labeled = torch.arange(n, device=device) < n_lab
    roles = roles_from_labels(labels, labeled)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times = []
    for i in range(steps + 1):
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        if objective == "probe":
            probe_fit(model, ids, mask, labels)
        else:
            logits, zs = forward_views(model, ids, mask, objective)
            z1, z2 = zs[0], (zs[1] if len(zs) > 1 else None)
            loss, _ = fewshot_loss(objective, logits, z1, z2, labels, roles, 0.1, 0.3, 0.5)
            opt.zero_grad()
            loss.backward()
            opt.step()
        if device == "cuda":
            torch.cuda.synchronize()
        if i > 0:  # the first step is warm-up
            times.append(time.perf_counter() - t0)
    peak = (torch.cuda.max_memory_allocated() / 2**20 if device == "cuda"
            else (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) / 1024.0)
    return {"examples_per_s": n / statistics.median(times), "peak_mb": peak, "batch": n, "device": device}


def probe_fit(model, ids, mask, labels):
    """What `probe` trains: the frozen encoder's sentence vectors of the labeled batch (no grad, eval
    mode), L2-normalised, and a logistic regression fitted on them (as fewshot.train.logreg_accuracy)."""
    from sklearn.linear_model import LogisticRegression

    model.eval()
    with torch.no_grad():
        f = model.embed(ids, mask).float()
    f = torch.nn.functional.normalize(f, dim=1).cpu().double().numpy()
    LogisticRegression(C=1.0, max_iter=2000, random_state=0).fit(f, labels.cpu().numpy())
    model.train()


def step_mode(args):
    for k, v in STEP_DEFAULTS.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.child:
        obj, seq = args.child
        print(json.dumps(measure(obj, args.encoder, int(seq), args.batch_labeled, args.batch_unlabeled, args.steps,
                                 args.pooling)))
        return
    if not args.json:
        print(f"few-shot training step, encoder {args.encoder}, {args.batch_labeled} labeled + "
              f"{args.batch_unlabeled} unlabeled (probe: its one no-grad forward of the labeled batch + "
              "logistic-regression fit, the whole of its training)")
        print(f"{'seq':>5} {'objective':>9} {'batch':>6} {'ex/s':>8} {'peak MB':>8} {'time vs ce':>10}")
    for seq in args.seq_lens:
        res = {}
        for obj in STEP_OBJECTIVES:
            cmd = [sys.executable, __file__, "--child", obj, str(seq), "--encoder", args.encoder,
                   "--pooling", args.pooling,
                   "--batch-labeled", str(args.batch_labeled), "--batch-unlabeled", str(args.batch_unlabeled),
                   "--max-steps", str(args.steps)]
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if r.returncode != 0:
                raise SystemExit(f"benchmark child failed ({obj}, seq {seq}):\n{r.stderr[-2000:]}")
            res[obj] = json.loads(r.stdout.strip().splitlines()[-1])
        for obj in STEP_OBJECTIVES:
            m = res[obj]
            # time per step relative to the CE step measured in this run
            ratio = (m["batch"] / m["examples_per_s"]) / (res["ce"]["batch"] / res["ce"]["examples_per_s"])
            row = {"seq_len": seq, "objective": obj, "batch": m["batch"],
                   "examples_per_s": round(m["examples_per_s"], 2), "peak_mb": round(m["peak_mb"], 1),
                   "step_time_vs_ce": round(ratio, 3), "device": m["device"]}
            if args.json:
                print(json.dumps(row), flush=True)
            else:
                print(f"{seq:>5} {obj:>9} {m['batch']:>6} {row['examples_per_s']:>8.2f} {row['peak_mb']:>8.1f} "
                      f"{ratio:>9.2f}x", flush=True)


def protocol_overrides(p, args, t5) -> dict:
    """The FewShotConfig fields of a protocol run: the options given (not None) and --set."""
    given = {"encoder": args.encoder, "pooling": args.pooling, "dataset": args.dataset, "eval_file": args.eval_file,
             "n_unlabeled": args.n_unlabeled, "max_steps": args.steps, "batch_labeled": args.batch_labeled,
             "batch_unlabeled": args.batch_unlabeled, "max_eval": args.max_eval}
    given = {k: v for k, v in given.items() if v is not None}
    try:
        sets = t5.parse_set(args.set_)
    except ValueError as err:
        p.error(str(err))
    both = sorted(set(given) & set(sets))
    if both:
        p.error(f"--set {both[0]} repeats the option --{both[0].replace('_', '-')}: give it once")
    return {**given, **sets}


def protocol_child(args, overrides, t5):
    method, folder = args.protocol_child
    from fewshot.train import train

    cfg = t5.run_config(args.preset, overrides, method, args.n_labeled, args.seed, folder)
    t0 = time.perf_counter()
    metrics = train(cfg)
    wall = time.perf_counter() - t0
    print(json.dumps({"wall_s": wall, "train_seconds": metrics.get("train_seconds"),
                      "eval_accuracy": metrics["eval_accuracy"],
                      "steps": 0 if cfg.objective == "probe" else cfg.max_steps, "batch_labeled": cfg.batch_labeled,
                      "batch_unlabeled": cfg.batch_unlabeled, "max_length": cfg.max_length,
                      "device": ("cuda" if torch.cuda.is_available() and not (cfg.device == "cpu")
                                 else "cpu")}))


def protocol_mode(p, args):
    t5 = _table5()
    overrides = protocol_overrides(p, args, t5)
    if args.protocol_child:
        return protocol_child(args, overrides, t5)
    methods = list(dict.fromkeys(args.methods))
    for m in methods:  # a bad option fails before the first run
        t5.run_config(args.preset, overrides, m, args.n_labeled, args.seed, "unused").validate()
    passthrough = [a for a in (args.argv or []) if a != "--json"]
    if not args.json:
        print(f"whole fewshot.train runs: preset {args.preset}, N = {args.n_labeled}, seed {args.seed}, "
              f"dataset {args.dataset}, encoder {args.encoder}, pooling {args.pooling}"
              + (f", {', '.join(args.set_)}" if args.set_ else ""))
        print(f"{'method':>12} {'steps':>5} {'run s':>8} {'process s':>9} {'train s':>8} {'acc':>6} {'time vs ce':>10}")
    rows = []
    for m in methods:
        with tempfile.TemporaryDirectory(prefix="bench_fewshot_") as tmp:
            cmd = [sys.executable, __file__, *passthrough, "--protocol-child", m, os.path.join(tmp, "run")]
            t0 = time.perf_counter()
            r = subprocess.run(cmd, capture_output=True, text=True, check=False)
            process_s = time.perf_counter() - t0
        if r.returncode != 0:
            raise SystemExit(f"protocol run failed ({m}):\n{r.stderr[-3000:]}")
        res = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append({"method": m, **res, "process_s": process_s})
    ce = next((r for r in rows if r["method"] == "ce"), None)
    for r in rows:
        row = {"method": r["method"], "preset": args.preset, "n_labeled": args.n_labeled, "seed": args.seed,
               "steps": r["steps"], "wall_s": round(r["wall_s"], 3), "process_s": round(r["process_s"], 3),
               "train_seconds": None if r["train_seconds"] is None else round(r["train_seconds"], 3),
               "time_vs_ce": None if ce is None else round(r["wall_s"] / ce["wall_s"], 3),
               "eval_accuracy": r["eval_accuracy"], "batch_labeled": r["batch_labeled"],
               "batch_unlabeled": r["batch_unlabeled"], "max_length": r["max_length"], "device": r["device"]}
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            ratio = "—" if row["time_vs_ce"] is None else f"{row['time_vs_ce']:.2f}x"
            print(f"{row['method']:>12} {row['steps']:>5} {row['wall_s']:>8.1f} {row['process_s']:>9.1f} "
                  f"{row['train_seconds'] or 0:>8.1f} {row['eval_accuracy']:>6.2f} {ratio:>10}", flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    p = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    p.add_argument("--encoder", default="minilm", help="HF encoder name or folder ('minilm' = offline MiniLM)")
    p.add_argument("--pooling", default="mean", choices=["cls", "mean"], help="as fewshot.train --pooling")
    p.add_argument("--seq-lens", type=number_in(1), nargs="+", default=[64, 128],
                   help="step mode: sequence lengths (tokens) to time")
    p.add_argument("--batch-labeled", type=number_in(1), default=None,
                   help="labeled examples per step (None: 16 in step mode, the preset's with --protocol)")
    p.add_argument("--batch-unlabeled", type=number_in(0), default=None,
                   help="unlabeled examples per step, ce+punce (None: 32 in step mode, the preset's with --protocol)")
    p.add_argument("--max-steps", dest="steps", type=number_in(1), default=None,
                   help="step mode: timed steps (median reported) after one warm-up (None: 5); --protocol: training "
                        "steps per run (None: the preset's)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--protocol", action="store_true",
                   help="time one whole fewshot.train run per method instead of steps")
    p.add_argument("--methods", nargs="+", default=list(PROTOCOL_METHODS),
                   choices=["probe", "ce", "ce+scl", "ce+punce", "ce+punce-est"], metavar="METHOD",
                   help="--protocol: methods to run, of probe, ce, ce+scl, ce+punce, ce+punce-est")
    p.add_argument("--preset", default="cpu", choices=["cpu", "paper"], help="--protocol: fewshot.train --preset")
    p.add_argument("--dataset", default="drugreview", help="--protocol: fewshot.train --dataset")
    p.add_argument("--eval-file", default=None, help="--protocol: evaluation file of a local dataset")
    p.add_argument("--n-labeled", type=number_in(1), default=20, help="--protocol: labeled examples N")
    p.add_argument("--n-unlabeled", type=int, default=None,
                   help="--protocol: unlabeled examples U (None: fewshot.train's)")
    p.add_argument("--seed", type=int, default=0, help="--protocol: seed (the sample; the same for every method)")
    p.add_argument("--max-eval", type=int, default=None,
                   help="--protocol: score on at most this many examples (None: all)")
    p.add_argument("--set", dest="set_", action="append", default=[], metavar="KEY=VALUE",
                   help="--protocol: any other FewShotConfig field, as scripts/fewshot_table5.py --set")
    p.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--protocol-child", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.argv = argv
    if args.protocol or args.protocol_child:
        protocol_mode(p, args)
    else:
        step_mode(args)


if __name__ == "__main__":
    run_cli(main)
