"""Statistics the sweep scripts share: mean ± std over seeds and paired per-seed differences with
95 % confidence intervals (paired t and paired bootstrap).

A "seed" pairs runs: the same seed gives every method the same data sample (fewshot) or the same
environment seeds and initial weights (rl_curl, nlp_qt), so methods are compared seed by seed.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

# Two-sided 95% critical values of Student's t, df 1..30 (used when scipy is missing).
T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_critical(df: int, use_scipy: bool = True) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom: scipy's when it
    is importable, otherwise the table for df 1..30 and a Cornish-Fisher expansion beyond it."""
    if df < 1:
        raise ValueError(f"t needs df >= 1, got {df}")
    if use_scipy:
        try:
            from scipy import stats

            return float(stats.t.ppf(0.975, df))
        except ImportError:
            pass
    if df <= len(T975):
        return T975[df - 1]
    z = 1.959963984540054
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)


def paired_stats(a: dict, b: dict, n_boot: int = 10_000, rng_seed: int = 0, use_scipy: bool = True) -> dict:
    """Paired comparison of two methods' accuracies ``{seed: accuracy}`` over the seeds both have
    (the same seed draws the same sample for every method): per-seed differences a - b, their mean and
    sample std, a 95% CI by paired t and by paired bootstrap (``n_boot`` resamples of the seeds with
    replacement, numpy generator seeded ``rng_seed``, percentile interval), and wins/losses/ties of a.
    A CI needs two seeds (None otherwise; the bootstrap interval of one seed would be a point)."""
    seeds = sorted(set(a) & set(b))
    d = np.array([float(a[s]) - float(b[s]) for s in seeds], dtype=np.float64)
    n = len(seeds)
    res = {"seeds": seeds, "diffs": d.tolist(), "n_seeds": n, "mean": None, "std": None, "sem": None, "t_crit": None,
           "t_ci": None, "bootstrap_ci": None, "n_boot": n_boot, "rng_seed": rng_seed,
           "wins": int((d > 0).sum()), "losses": int((d < 0).sum()), "ties": int((d == 0).sum())}
    if n == 0:
        return res
    res["mean"] = float(d.mean())
    if n >= 2:
        sd = float(d.std(ddof=1))
        sem = sd / math.sqrt(n)
        tc = t_critical(n - 1, use_scipy)
        res.update(std=sd, sem=sem, t_crit=tc, t_ci=[res["mean"] - tc * sem, res["mean"] + tc * sem])
        rng = np.random.default_rng(rng_seed)
        means = d[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        res["bootstrap_ci"] = [float(lo), float(hi)]
    return res


def summarize(per_seed: dict) -> dict:
    """Mean and sample std (None with one seed) of ``{seed: accuracy}``."""
    vals = [per_seed[s] for s in sorted(per_seed)]
    return {"per_seed": {s: per_seed[s] for s in sorted(per_seed)}, "n_runs": len(vals),
            "mean": statistics.mean(vals) if vals else None,
            "std": statistics.stdev(vals) if len(vals) > 1 else None}
