#!/usr/bin/env python
"""Check the class-prior estimator (fewshot/prior.py) against known priors: mean ± std over seeds.

Synthetic case: labeled positives P ~ N(mu, I) (n_P rows), unlabeled U = round(pi n_U) rows from
N(mu, I) and the rest from N(0, I), mu = (delta, 0, ..., 0). The "true" prior is the drawn fraction.
Optionally, real features: ``--features F.npy --labels y.npy`` (one row per example, labels in {0, 1});
each seed draws a PU sample with ``fewshot.data.sample_fewshot`` and the truth is the positive
fraction of its unlabeled part.

    python scripts/fewshot_prior_check.py                       # the table in docs/results/fewshot.md
    python scripts/fewshot_prior_check.py --dims 384 --n-p 100 --n-u 500 --pis 0.5 --seeds 0 1
    PYTHONPATH=/tmp/old python scripts/fewshot_prior_check.py --estimator old_prior:elkan_noto_prior

``--estimator module:function`` swaps in another estimator with the same signature (a past version).
"""

from __future__ import annotations

import importlib
import os
import time

import numpy as np

from shared_losses.training.cli import ArgumentParser, HelpFormatter, number_in


def synthetic(d: int, n_p: int, n_u: int, pi: float, delta: float, seed: int):
    rng = np.random.default_rng(1000 + seed)
    mu = np.zeros(d)
    mu[0] = delta
    k = int(round(pi * n_u))
    P = rng.normal(size=(n_p, d)) + mu
    U = np.concatenate([rng.normal(size=(k, d)) + mu, rng.normal(size=(n_u - k, d))])
    return P, U, k / n_u


def load_estimator(spec: str):
    """The estimator function of ``module:function``; one line naming --estimator if it cannot be had."""
    module, sep, name = spec.partition(":")
    if not sep or not module or not name:
        raise ValueError(f"--estimator {spec}: expected module:function, e.g. fewshot.prior:elkan_noto_prior")
    try:
        fn = getattr(importlib.import_module(module), name)
    except ImportError as err:
        raise ValueError(f"--estimator {spec}: cannot import {module} ({err})") from None
    except AttributeError:
        raise ValueError(f"--estimator {spec}: {module} has no {name}") from None
    if not callable(fn):
        raise ValueError(f"--estimator {spec}: {module}.{name} is not a function")
    return fn


def load_real(features: str, labels: str) -> tuple[np.ndarray, np.ndarray]:
    """(features as float64 rows, 0/1 labels), checked: one label per row, both classes present."""
    arrays = []
    for option, path in (("--features", features), ("--labels", labels)):
        try:
            arrays.append(np.asarray(np.load(path, allow_pickle=False)))
        except (OSError, EOFError, ValueError) as err:
            if isinstance(err, FileNotFoundError):
                raise FileNotFoundError(f"{option} {path}: no such file") from None
            raise ValueError(f"{option} {path}: not a readable .npy array ({err or type(err).__name__})") from None
    F, y = arrays
    if F.ndim != 2 or len(F) == 0 or F.shape[1] == 0:
        raise ValueError(f"--features {features}: expected a 2-d array of rows (examples x features), got shape "
                         f"{F.shape}")
    if y.ndim != 1 or len(y) != len(F):
        raise ValueError(f"--labels {labels}: expected one label per row of --features ({len(F)}), got shape {y.shape}")
    if not np.isin(y, (0, 1)).all():
        raise ValueError(f"--labels {labels}: expected labels 0 and 1 (1 = positive), got {np.unique(y)[:5].tolist()}")
    if len(np.unique(y)) < 2:
        raise ValueError(f"--labels {labels}: every label is {int(y[0])}; the prior needs both classes")
    if not np.issubdtype(F.dtype, np.number) or not np.isfinite(F).all():
        raise ValueError(f"--features {features}: not finite numbers (NaN, inf or non-numeric entries)")
    return F.astype(np.float64), y.astype(np.int64)


def main(argv=None) -> None:
    ap = ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("--estimator", default="fewshot.prior:elkan_noto_prior", help="estimator as module:function")
    count, prior = number_in(1), number_in(0, 1, float, open_low=True, open_high=True)
    ap.add_argument("--dims", type=count, nargs="+", default=[4, 384], help="dimensions of the synthetic Gaussians")
    ap.add_argument("--n-p", type=count, nargs="+", default=[50, 100], help="labeled positives n_P (synthetic)")
    ap.add_argument("--n-u", type=count, nargs="+", default=[300, 500], help="unlabeled examples n_U (synthetic)")
    ap.add_argument("--pis", type=prior, nargs="+", default=[0.2, 0.5, 0.7], help="true priors pi (synthetic)")
    ap.add_argument("--delta", type=float, default=3.0, help="distance between the class means (unit variances)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4],
                    help="seeds per setting (mean ± std over them)")
    ap.add_argument("--features", help=".npy features of real data (rows = examples); the synthetic settings run "
                    "first unless --no-synthetic")
    ap.add_argument("--labels", help=".npy 0/1 labels matching --features (one per row)")
    ap.add_argument("--no-synthetic", action="store_true", help="with --features: the real data only")
    ap.add_argument("--real-n", type=count, nargs="+", default=[50, 100], help="labeled positives drawn from real data")
    ap.add_argument("--real-u", type=count, nargs="+", default=[300], help="unlabeled examples drawn from real data")
    args = ap.parse_args(argv)
    estimate = load_estimator(args.estimator)
    if (args.features is None) != (args.labels is None):
        raise ValueError("--features and --labels go together (the labels say which rows are positive)")
    if args.no_synthetic and args.features is None:
        raise ValueError("--no-synthetic: give --features and --labels (otherwise nothing runs)")
    if args.features:
        F, y = load_real(args.features, args.labels)

    print("| data | d | n_P | n_U | true pi | estimate (mean ± std) | error | s/call |")
    print("|---|---|---|---|---|---|---|---|")

    def row(data, d, n_p, n_u, draws):
        truth, est, t0 = [], [], time.perf_counter()
        for P, U, t, seed in draws:
            truth.append(t)
            est.append(estimate(P, U, seed=seed))
        dt = (time.perf_counter() - t0) / len(est)
        truth, est = np.array(truth), np.array(est)
        sd = est.std(ddof=1) if len(est) > 1 else float("nan")  # the sample std over the draws, as every table's
        print(f"| {data} | {d} | {n_p} | {n_u} | {truth.mean():.2f} | {est.mean():.3f} ± {sd:.3f} "
              f"| {(est - truth).mean():+.3f} | {dt:.2f} |", flush=True)

    for d in args.dims if not args.no_synthetic else []:
        for n_p in args.n_p:
            for n_u in args.n_u:
                for pi in args.pis:
                    row(f"Gaussians, delta {args.delta:g}", d, n_p, n_u,
                        ((*synthetic(d, n_p, n_u, pi, args.delta, s), s) for s in args.seeds))
    if args.features:
        from fewshot.data import sample_fewshot

        def real(n, u, seed):
            try:
                smp = sample_fewshot(y, n, u, seed, "pu")
            except ValueError as err:
                raise ValueError(f"--real-n {n} / --real-u {u} on {args.labels}: {err}") from None
            pos = smp.labeled[y[smp.labeled] == 1]
            return F[pos], F[smp.unlabeled], float(y[smp.unlabeled].mean()), seed

        for n in args.real_n:
            for u in args.real_u:
                row(os.path.basename(args.features), F.shape[1], n, u, (real(n, u, s) for s in args.seeds))


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
