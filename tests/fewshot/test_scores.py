"""fewshot.scores: the binary classifier's scores beside its accuracy (F1, precision, recall of the positive class,
balanced accuracy, ROC-AUC), against scikit-learn's on random data with ties, and undefined where a class or a
prediction is missing, never a silent 0."""

import numpy as np
import pytest
from sklearn import metrics as skm

from fewshot.scores import binary_scores, majority_percent, percent_agree, scores_line


@pytest.mark.parametrize("seed", range(5))
def test_binary_scores_equal_scikit_learns(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 200))
    y = (rng.random(n) < rng.uniform(0.05, 0.6)).astype(int)
    y[:2] = [0, 1]  # both classes
    logits = np.round(rng.normal(size=n) + 1.5 * y - 0.5, 1)  # rounded: ties in the ranking and at 0
    pred = (logits > 0).astype(int)
    got = binary_scores(y, logits)
    assert got["accuracy"] == pytest.approx(100 * skm.accuracy_score(y, pred))
    assert got["balanced_accuracy"] == pytest.approx(100 * skm.balanced_accuracy_score(y, pred))
    assert got["recall"] == pytest.approx(100 * skm.recall_score(y, pred, zero_division=np.nan))
    if pred.any():
        assert got["precision"] == pytest.approx(100 * skm.precision_score(y, pred))
    else:
        assert got["precision"] is None
    assert got["f1"] == pytest.approx(100 * skm.f1_score(y, pred))
    assert got["roc_auc"] == pytest.approx(100 * skm.roc_auc_score(y, logits))
    assert (got["n_positive"], got["n_negative"]) == (int(y.sum()), int(n - y.sum()))


def test_scores_undefined_on_one_class_or_no_positive_prediction_are_none():
    negatives_only = binary_scores([0, 0, 0], [-1.0, 0.5, -2.0])
    assert negatives_only["accuracy"] == pytest.approx(200 / 3)
    assert negatives_only["recall"] is None and negatives_only["balanced_accuracy"] is None
    assert negatives_only["roc_auc"] is None
    assert negatives_only["precision"] == 0.0 and negatives_only["f1"] == 0.0  # one false positive, no true one
    nothing_positive = binary_scores([0, 0, 1], [-1.0, -1.0, -1.0])
    assert nothing_positive["precision"] is None and nothing_positive["recall"] == 0.0
    assert nothing_positive["f1"] == 0.0 and nothing_positive["roc_auc"] == 50.0  # all tied
    assert binary_scores([0, 0], [-1.0, -2.0])["f1"] is None  # no positives, none predicted
    assert binary_scores([], [])["accuracy"] is None


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="3 labels but 2 scores"):
        binary_scores([0, 1, 1], [0.1, 0.2])
    with pytest.raises(ValueError, match=r"labels must be 0 or 1, got \[2\]"):
        binary_scores([0, 2], [0.1, 0.2])


def test_the_line_a_run_prints():
    line = scores_line(binary_scores([0, 0, 0, 1], [-1.0, 2.0, -1.0, 3.0]))
    assert line == ("positive class (1 of 4 evaluation examples): F1 66.67, precision 50.00, recall 100.00; "
                    "balanced accuracy 83.33; ROC-AUC 100.00 (%)")
    assert "recall n/a" in scores_line(binary_scores([0, 0], [1.0, -1.0]))
    assert scores_line(None) is None and scores_line({"accuracy": None}) is None


def test_accuracies_are_one_division_as_the_scores_are():
    """23 of 40 right is 57.5 in metrics.json, not ``mean() * 100``'s 57.49999999999999; and the accuracy of
    ``eval_accuracy`` is the same float as ``eval_scores["accuracy"]`` (both 100 * right / n)."""
    truth = np.array([1] * 24 + [0] * 16)
    pred = truth.copy()
    pred[:17] = 0  # 7 of the 24 positives right, all 16 negatives: 23 of 40
    assert repr(percent_agree(pred, truth)) == "57.5"
    assert float((pred == truth).mean() * 100.0) != 57.5  # what the runs wrote before
    assert majority_percent(truth) == 60.0 and majority_percent(1 - truth) == 60.0
    rng = np.random.default_rng(0)
    for n in range(1, 120):
        y = rng.integers(0, 2, n)
        p = rng.integers(0, 2, n)
        k = int((p == y).sum())
        assert percent_agree(p, y) == 100.0 * k / n == binary_scores(y, np.where(p == 1, 1.0, -1.0))["accuracy"]
        assert majority_percent(y) == 100.0 * max(int(y.sum()), n - int(y.sum())) / n
    assert percent_agree([True, False], [1, 1]) == 50.0  # booleans against 0/1 labels


def test_accuracy_inputs_are_named():
    with pytest.raises(ValueError, match="3 predictions but 2 labels"):
        percent_agree([0, 1, 1], [0, 1])
    with pytest.raises(ValueError, match="no labels"):
        percent_agree([], [])
    with pytest.raises(ValueError, match="no labels"):
        majority_percent([])
