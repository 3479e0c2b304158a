"""Statistics the sweep scripts share: mean ± std over seeds and paired per-seed differences with
95 % confidence intervals (paired t and paired bootstrap), both from :mod:`scipy.stats`.

A "seed" pairs runs: the same seed gives every method the same data sample (fewshot) or the same
environment seeds and initial weights (rl_curl, nlp_qt), so methods are compared seed by seed.
"""

from __future__ import annotations

import inspect
import math
import statistics
import warnings

import numpy as np
from scipy import stats as _sp

#: The keyword that seeds ``scipy.stats.bootstrap``: ``rng`` from scipy 1.15, ``random_state`` before it.
_BOOTSTRAP_SEED_KW = "rng" if "rng" in inspect.signature(_sp.bootstrap).parameters else "random_state"


def _ignored_use_scipy(use_scipy) -> None:
    if use_scipy is not None:
        import warnings

        warnings.warn("use_scipy is ignored (scipy is always used; the hand-written t table is gone) and will be "
                      "removed: drop it", DeprecationWarning, stacklevel=3)


def t_critical(df: int, use_scipy: bool | None = None) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom
    (``scipy.stats.t.ppf(0.975, df)``). ``use_scipy`` is accepted for old callers and ignored, with a
    ``DeprecationWarning``: scipy is a dependency, the hand-written table it used to switch to is gone."""
    _ignored_use_scipy(use_scipy)
    if not df >= 1:  # written with `not` so that NaN fails too
        raise ValueError(f"t needs df >= 1, got {df}")
    return float(_sp.t.ppf(0.975, df))


#: The head of a table's column of :func:`paired_stats`' ``bootstrap_ci``: a percentile bootstrap, too narrow with
#: few seeds (its coverage: the docstring below), so no table calls it a 95 % interval.
BOOTSTRAP_COLUMN = "bootstrap (percentile, narrow)"


def wins_text(st: dict) -> str:
    """A paired comparison's wins of A over its seeds with the ties named, from :func:`paired_stats`' result:
    ``3/5``, or ``2/5, 1 tied`` (where "2/5" alone would read as 2 wins and 3 losses)."""
    return f"{st['wins']}/{st['n_seeds']}" + (f", {st['ties']} tied" if st["ties"] else "")


def paired_stats(a: dict, b: dict, n_boot: int = 10_000, rng_seed: int = 0, use_scipy: bool | None = None) -> dict:
    """Paired comparison of two methods' accuracies ``{seed: accuracy}`` over the seeds both have
    (the same seed draws the same sample for every method): per-seed differences a - b, their mean and
    sample std, a 95% CI by paired t and by paired bootstrap, and wins/losses/ties of a.

    * t interval: ``scipy.stats.ttest_rel(a, b).confidence_interval(0.95)`` (``t_crit``: the t quantile it uses).
    * bootstrap interval: ``scipy.stats.bootstrap`` of the mean of the differences (a one-sample bootstrap of
      the per-seed differences, i.e. the seeds resampled in pairs), ``n_boot`` resamples, generator
      ``numpy.random.default_rng(rng_seed)`` (the same seed gives the same interval), **percentile** method:
      kept (rather than scipy's default BCa) so the intervals stay comparable with the tables made before
      scipy did the computation (the same resamples, the same interval). With few seeds it is too narrow: it
      never leaves the range of the observed differences, and its nominal 95 % covered the true mean 75 % of the
      time at 3 seeds, 84 % at 5 and 91 % at 10 (normal differences, 1000 draws each), against 95 %,
      94 % and 96 % for the t interval: read the t interval. The tables head its column "bootstrap (percentile,
      narrow)".

    Edge cases: no common seed: mean and intervals None; one seed: the mean, no std and no interval (None);
    all differences equal (zero variance): both intervals are the point ``[mean, mean]`` (scipy would
    divide 0 by 0); a difference that is not finite (NaN, inf: a broken run) is a ``ValueError`` naming the
    seeds, not a table of NaN. ``use_scipy`` is accepted for old callers and ignored (a ``DeprecationWarning``)."""
    _ignored_use_scipy(use_scipy)
    seeds = sorted(set(a) & set(b))
    va = np.array([float(a[s]) for s in seeds], dtype=np.float64)
    vb = np.array([float(b[s]) for s in seeds], dtype=np.float64)
    d = va - vb
    bad = [s for s, x, y in zip(seeds, va, vb) if not (math.isfinite(x) and math.isfinite(y))]
    if bad:
        raise ValueError("paired statistics need finite values; not finite at seed(s) "
                         + ", ".join(f"{s} ({a[s]!r} - {b[s]!r})" for s in bad))
    n = len(seeds)
    res = {"seeds": seeds, "diffs": d.tolist(), "n_seeds": n, "mean": None, "std": None, "sem": None, "t_crit": None,
           "t_ci": None, "bootstrap_ci": None, "n_boot": n_boot, "rng_seed": rng_seed,
           "wins": int((d > 0).sum()), "losses": int((d < 0).sum()), "ties": int((d == 0).sum())}
    if n == 0:
        return res
    res["mean"] = float(d.mean())
    if abs(res["mean"]) <= 1e-12 * float(np.abs(d).max()):  # differences that cancel: 0, not the sum's rounding
        res["mean"] = 0.0  # (+1.55, +1.15, +5.10, -4.50, -3.30 gave -1.8e-16, a table's "-0.00")
    if n < 2:
        return res
    sd = float(d.std(ddof=1))
    res.update(std=sd, sem=sd / math.sqrt(n), t_crit=t_critical(n - 1))
    if np.all(d == d[0]):  # zero variance: the intervals are the point itself
        res.update(t_ci=[res["mean"], res["mean"]], bootstrap_ci=[res["mean"], res["mean"]])
        return res
    with warnings.catch_warnings():  # nearly equal differences: a correct interval, a confusing warning
        warnings.filterwarnings("ignore", message="Precision loss occurred", category=RuntimeWarning)
        t_ci = _sp.ttest_rel(va, vb).confidence_interval(0.95)
    boot = _sp.bootstrap((d,), np.mean, n_resamples=n_boot, confidence_level=0.95, method="percentile",
                         **{_BOOTSTRAP_SEED_KW: np.random.default_rng(rng_seed)}).confidence_interval
    res.update(t_ci=[float(t_ci.low), float(t_ci.high)], bootstrap_ci=[float(boot.low), float(boot.high)])
    return res


def summarize(per_seed: dict) -> dict:
    """Mean and sample std (None with one seed) of ``{seed: accuracy}``."""
    vals = [per_seed[s] for s in sorted(per_seed)]
    return {"per_seed": {s: per_seed[s] for s in sorted(per_seed)}, "n_runs": len(vals),
            "mean": statistics.mean(vals) if vals else None,
            "std": statistics.stdev(vals) if len(vals) > 1 else None}


def standing(accuracy: float | None, majority: float | None, baselines: dict | None = None,
             what: str = "eval accuracy", level: float = 0.5) -> str:
    """One sentence saying where an accuracy (%) stands: against always answering the majority class of the same
    examples, and against each of ``baselines`` (``{name: accuracy}``, e.g. the frozen encoder's probe). Within
    ``level`` points counts as level. The reader of a run's last lines should not have to do this subtraction."""
    if accuracy is None or majority is None or not (math.isfinite(accuracy) and math.isfinite(majority)):
        return f"{what}: not measured"

    def against(value: float, name: str) -> str:
        gap = accuracy - value
        if abs(gap) < level:
            return f"level with {name} ({value:.2f} %)"
        return f"{abs(gap):.2f} points {'above' if gap > 0 else 'BELOW'} {name} ({value:.2f} %)"

    parts = [against(majority, "always answering the majority class")]
    parts += [against(v, name) for name, v in (baselines or {}).items()
              if v is not None and math.isfinite(v)]
    text = f"{what} {accuracy:.2f} %: " + "; ".join(parts)
    if majority >= 100.0:  # one class only: the comparison says nothing about the classifier
        return (f"{what} {accuracy:.2f} %: the evaluation examples are all of one class, so this is the share scored "
                "as that class (no comparison with the majority class means anything here; add examples of the "
                "other class to the evaluation file)")
    if accuracy < majority - level:
        text += " (worse than guessing the commoner class: train longer, or check the labels and settings)"
    return text
