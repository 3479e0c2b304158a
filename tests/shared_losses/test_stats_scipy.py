"""shared_losses.training.stats on scipy.stats: the paired t interval (ttest_rel(...).confidence_interval) against
published and hand-computed values, the percentile bootstrap (scipy.stats.bootstrap) against scipy called
directly and the t interval, the edge cases (no seed, one seed, zero variance, NaN), and scipy declared as
a dependency."""

import math
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sp

from shared_losses.training import stats

ROOT = Path(__file__).resolve().parents[2]

# t quantiles written as literals below: t.ppf(0.975, df) to 17 digits (checked with mpmath at 30 digits).
# Student's sleep data (Cushny & Peebles), extra hours of sleep under two drugs, same ten patients. R's
# `t.test(extra ~ group, data = sleep, paired = TRUE)` prints t = -4.0621, df = 9 and the 95 percent
# confidence interval -2.4598858 -0.7001142 (mean difference -1.58).
SLEEP_1 = [0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0]
SLEEP_2 = [1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4]


#: how closely scipy's t quantile meets the exact one: to about 1e-15 in the scipy of the suite's set-up, to 2e-11
#: (relative) in scipy 1.15, the oldest the project supports (12.706204736432 for 12.706204736174698 at df = 1)
T_DIGITS = 1e-9


def as_seeds(values):
    return dict(enumerate(values))


def test_t_interval_published_sleep_example():
    st = stats.paired_stats(as_seeds(SLEEP_1), as_seeds(SLEEP_2))
    assert st["n_seeds"] == 10 and st["mean"] == pytest.approx(-1.58)
    assert st["t_ci"] == pytest.approx([-2.4598858, -0.7001142], abs=5e-7)  # R's printed digits
    # the same interval in plain float arithmetic, t(0.975, df 9) written out
    d = [x - y for x, y in zip(SLEEP_1, SLEEP_2)]
    mean = sum(d) / len(d)
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1))
    half = 2.262157162798206 * sd / math.sqrt(len(d))
    assert st["t_ci"] == pytest.approx([mean - half, mean + half], rel=T_DIGITS)
    assert st["t_crit"] == pytest.approx(2.262157162798206, rel=T_DIGITS)
    assert st["std"] == pytest.approx(sd) and st["sem"] == pytest.approx(sd / math.sqrt(10))
    assert (st["wins"], st["losses"], st["ties"]) == (0, 9, 1)


def test_t_interval_five_seeds_by_hand():
    a = as_seeds([81.0, 72.0, 93.0, 64.5, 70.0])
    b = as_seeds([80.0, 70.0, 90.0, 65.0, 66.0])  # differences 1, 2, 3, -0.5, 4
    st = stats.paired_stats(a, b)
    mean = (1.0 + 2.0 + 3.0 - 0.5 + 4.0) / 5
    sd = math.sqrt(sum((x - mean) ** 2 for x in (1.0, 2.0, 3.0, -0.5, 4.0)) / 4)
    half = 2.7764451051977943 * sd / math.sqrt(5)  # t(0.975, df 4)
    assert st["t_ci"] == pytest.approx([mean - half, mean + half], abs=1e-12)
    ci = sp.ttest_rel([81.0, 72.0, 93.0, 64.5, 70.0], [80.0, 70.0, 90.0, 65.0, 66.0]).confidence_interval(0.95)
    assert st["t_ci"] == [float(ci.low), float(ci.high)]


@pytest.mark.parametrize("df, value", [(1, 12.706204736174698), (2, 4.302652729749462), (4, 2.7764451051977943),
                                       (9, 2.262157162798206), (30, 2.042272456301238), (1000, 1.9623390808264078)])
def test_t_critical_is_scipys_quantile(df, value):
    assert stats.t_critical(df) == pytest.approx(value, rel=T_DIGITS)
    with pytest.warns(DeprecationWarning, match="use_scipy is ignored"):  # the old switch: ignored, and said so
        assert stats.t_critical(df, use_scipy=False) == stats.t_critical(df)


@pytest.mark.parametrize("df", [0, -1, float("nan")])
def test_t_critical_refuses_impossible_df(df):
    with pytest.raises(ValueError, match="df >= 1"):
        stats.t_critical(df)


def test_hand_written_table_is_gone_and_use_scipy_is_ignored():
    assert not hasattr(stats, "T975")
    a, b = as_seeds([1.0, 2.0, 3.0]), as_seeds([0.0, 0.0, 0.0])
    with pytest.warns(DeprecationWarning, match="use_scipy is ignored"):
        assert stats.paired_stats(a, b, use_scipy=False) == stats.paired_stats(a, b)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not given: no warning
        assert stats.paired_stats(a, b)["t_crit"] == pytest.approx(4.302652729749462, rel=T_DIGITS)


def test_bootstrap_matches_scipy_called_directly_and_is_deterministic():
    a = as_seeds([80.0 + x for x in (1.0, 2.0, 3.0, -0.5, 4.0, 0.25, 1.5)])
    b = as_seeds([80.0] * 7)
    st = stats.paired_stats(a, b, n_boot=5000, rng_seed=7)
    d = np.array(st["diffs"])
    direct = sp.bootstrap((d,), np.mean, n_resamples=5000, confidence_level=0.95, method="percentile",
                          rng=np.random.default_rng(7)).confidence_interval
    assert st["bootstrap_ci"] == pytest.approx([direct.low, direct.high], abs=1e-12)
    lo, hi = st["bootstrap_ci"]
    assert lo < st["mean"] < hi and min(d) <= lo and hi <= max(d)
    assert stats.paired_stats(a, b, n_boot=5000, rng_seed=7)["bootstrap_ci"] == st["bootstrap_ci"]
    assert stats.paired_stats(a, b, n_boot=5000, rng_seed=8)["bootstrap_ci"] != st["bootstrap_ci"]
    assert st["n_boot"] == 5000 and st["rng_seed"] == 7


def test_bootstrap_stays_comparable_with_the_earlier_numpy_intervals():
    """The percentile method with the same generator draws the same resamples as the hand-written numpy
    bootstrap the tables used before, so earlier intervals are reproduced."""
    d = np.array([1.0, 2.0, 3.0, -0.5, 4.0])
    st = stats.paired_stats(as_seeds(d.tolist()), as_seeds([0.0] * 5))
    means = d[np.random.default_rng(0).integers(0, 5, size=(10_000, 5))].mean(axis=1)
    assert st["bootstrap_ci"] == pytest.approx(list(np.percentile(means, [2.5, 97.5])), abs=1e-12)


def test_bootstrap_approaches_the_t_interval_for_many_seeds():
    x = np.random.default_rng(123).normal(1.0, 2.0, size=400)
    st = stats.paired_stats(as_seeds(x.tolist()), as_seeds([0.0] * 400), n_boot=20_000)
    (tlo, thi), (blo, bhi) = st["t_ci"], st["bootstrap_ci"]
    half = (thi - tlo) / 2
    assert abs(blo - tlo) < 0.1 * half and abs(bhi - thi) < 0.1 * half


def test_no_seed_and_one_seed():
    none = stats.paired_stats({0: 90.0}, {1: 85.0})
    assert none["n_seeds"] == 0 and none["mean"] is None and none["t_ci"] is None and none["bootstrap_ci"] is None
    assert none["diffs"] == [] and (none["wins"], none["losses"], none["ties"]) == (0, 0, 0)
    one = stats.paired_stats({0: 90.0, 5: 1.0}, {0: 85.0})
    assert one["n_seeds"] == 1 and one["mean"] == 5.0 and one["std"] is None and one["t_crit"] is None
    assert one["t_ci"] is None and one["bootstrap_ci"] is None


@pytest.mark.parametrize("diff", [0.0, 2.5])
def test_zero_variance_gives_the_point_interval_without_warnings(diff):
    a = as_seeds([70.0 + diff, 80.0 + diff, 90.0 + diff])
    b = as_seeds([70.0, 80.0, 90.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither scipy's degenerate-data warning nor a division by zero
        st = stats.paired_stats(a, b)
    assert st["mean"] == diff and st["std"] == 0.0
    assert st["t_ci"] == [diff, diff] and st["bootstrap_ci"] == [diff, diff]
    assert st["ties"] == (3 if diff == 0 else 0) and st["wins"] == (0 if diff == 0 else 3)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_non_finite_values_are_refused_naming_the_seed(bad):
    with pytest.raises(ValueError, match=r"not finite at seed\(s\) 2 "):
        stats.paired_stats({0: 1.0, 1: 2.0, 2: bad}, {0: 0.0, 1: 0.0, 2: 0.0})
    with pytest.raises(ValueError, match=r"seed\(s\) 1 "):
        stats.paired_stats({0: 1.0, 1: 2.0}, {0: 0.0, 1: bad})
    # a NaN at a seed the other method lacks is not paired, so not in the way
    assert stats.paired_stats({0: 1.0, 1: 2.0, 9: bad}, {0: 0.0, 1: 0.0})["n_seeds"] == 2


def test_scipy_is_a_declared_dependency():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.replace(" ", "").startswith("scipy>=") for d in deps), deps


def test_standing_says_in_words_where_an_accuracy_stands():
    """Issue 46, item 4: a run's last lines say whether its accuracy beats always answering the majority class."""
    from shared_losses.training.stats import standing

    below = standing(58.4, 61.1)
    assert below.startswith("eval accuracy 58.40 %: 2.70 points BELOW always answering the majority class (61.10 %)")
    assert "worse than guessing the commoner class" in below
    assert standing(80.0, 80.2) == "eval accuracy 80.00 %: level with always answering the majority class (80.20 %)"
    above = standing(90.0, 60.0, {"the frozen encoder's nnPU probe": 85.5, "none": None}, what="RT accuracy")
    assert above == ("RT accuracy 90.00 %: 30.00 points above always answering the majority class (60.00 %); "
                     "4.50 points above the frozen encoder's nnPU probe (85.50 %)")
    assert standing(None, 50.0) == "eval accuracy: not measured"


def test_standing_on_one_class_says_the_comparison_means_nothing():
    """A PU evaluation file of negatives only: 'BELOW always answering the majority class (100.00 %) ... train
    longer' was advice about nothing."""
    from shared_losses.training.stats import standing

    text = standing(92.5, 100.0)
    assert "all of one class" in text and "BELOW" not in text and "train longer" not in text


def test_differences_that_cancel_have_mean_zero_not_the_sums_rounding():
    """Accuracies of 2000 examples (k / 2000 * 100) whose differences (+2.25, +1.30, +0.40, +0.55, -4.50) sum to 0:
    the float mean is about -2.8e-15, which a table printed as "-0.00"; a mean far above the rounding stays."""
    a = [k / 2000 * 100 for k in (1394, 1473, 1351, 1381, 1491)]
    b = [k / 2000 * 100 for k in (1349, 1447, 1343, 1370, 1581)]
    assert f"{np.mean(np.subtract(a, b)):+.2f}" == "-0.00"  # what the tables showed
    st = stats.paired_stats(as_seeds(a), as_seeds(b))
    assert st["mean"] == 0.0 and f"{st['mean']:+.2f}" == "+0.00"
    assert st["t_ci"][0] == pytest.approx(-st["t_ci"][1], abs=1e-12)
    tiny = stats.paired_stats(as_seeds([1e-9, 2e-9]), as_seeds([0.0, 0.0]))
    assert tiny["mean"] == pytest.approx(1.5e-9, rel=1e-12)


def test_summarize_gives_the_mean_and_the_sample_std_over_seeds():
    s = stats.summarize({2: 90.0, 0: 80.0, 1: 85.0})
    assert s["per_seed"] == {0: 80.0, 1: 85.0, 2: 90.0} and s["n_runs"] == 3
    assert s["mean"] == 85.0 and s["std"] == pytest.approx(5.0)  # the population std would be 4.08
    one = stats.summarize({0: 70.0})
    assert one["mean"] == 70.0 and one["std"] is None and stats.summarize({})["mean"] is None
