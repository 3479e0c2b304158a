"""Scores of a binary classifier on a labeled evaluation split beside its accuracy: what a PU user with an
imbalanced evaluation sample reads (accuracy alone says little where one class is 95 % of it).

Every value is in % (as ``eval_accuracy``), ``None`` where it is undefined on the split: recall and balanced
accuracy without positives, precision when nothing is predicted positive, F1 with neither positives nor positive
predictions, ROC-AUC with one class only. Precision, recall and F1 are the positive class's (label 1)."""

from __future__ import annotations

import numpy as np


def percent_agree(pred, truth) -> float:
    """The share (%) of ``pred`` equal to ``truth``, as ``100 * agreeing / n`` in one division: 23 of 40 is 57.5,
    not ``mean() * 100``'s 57.49999999999999."""
    pred, truth = np.asarray(pred).reshape(-1), np.asarray(truth).reshape(-1)
    if pred.shape != truth.shape:
        raise ValueError(f"percent_agree: {pred.size} predictions but {truth.size} labels")
    if not truth.size:
        raise ValueError("percent_agree: no labels")
    return 100.0 * int((pred == truth).sum()) / truth.size


def majority_percent(y) -> float:
    """The accuracy (%) of always answering the commoner class of the 0/1 labels ``y``."""
    y = np.asarray(y).reshape(-1)
    if not y.size:
        raise ValueError("majority_percent: no labels")
    n_pos = int((y == 1).sum())
    return 100.0 * max(n_pos, y.size - n_pos) / y.size


def binary_scores(y_true, logits) -> dict:
    """``{"accuracy", "balanced_accuracy", "precision", "recall", "f1", "roc_auc", "n_positive", "n_negative"}`` of
    the decisions ``logits > 0`` (and of the ranking by ``logits`` for ROC-AUC) against labels 0/1."""
    y = np.asarray(y_true).astype(np.int64).reshape(-1)
    s = np.asarray(logits, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"binary_scores: {y.size} labels but {s.size} scores")
    if y.size and not np.isin(y, (0, 1)).all():
        raise ValueError(f"binary_scores: labels must be 0 or 1, got {sorted(set(y.tolist()) - {0, 1})[:5]}")
    pred = s > 0
    pos, neg = y == 1, y == 0
    tp, fp = int((pred & pos).sum()), int((pred & neg).sum())
    fn, tn = int((~pred & pos).sum()), int((~pred & neg).sum())

    def pct(num: int, den: int):
        return 100.0 * num / den if den else None

    recall, specificity = pct(tp, tp + fn), pct(tn, tn + fp)
    out = {"accuracy": pct(tp + tn, y.size), "balanced_accuracy": None, "precision": pct(tp, tp + fp),
           "recall": recall, "f1": pct(2 * tp, 2 * tp + fp + fn), "roc_auc": None,
           "n_positive": int(pos.sum()), "n_negative": int(neg.sum())}
    if recall is not None and specificity is not None:  # both classes: the ranking's ROC-AUC is defined
        from sklearn.metrics import roc_auc_score

        out["balanced_accuracy"] = (recall + specificity) / 2
        out["roc_auc"] = 100.0 * float(roc_auc_score(y, s))
    return out


def scores_line(scores: dict | None) -> str | None:
    """One line of the positive class's scores for a run's last lines, or ``None`` without scores."""
    if not scores or scores.get("accuracy") is None:
        return None

    def fmt(key: str) -> str:
        v = scores.get(key)
        return "n/a" if v is None else f"{v:.2f}"

    return (f"positive class ({scores['n_positive']} of {scores['n_positive'] + scores['n_negative']} evaluation "
            f"examples): F1 {fmt('f1')}, precision {fmt('precision')}, recall {fmt('recall')}; balanced accuracy "
            f"{fmt('balanced_accuracy')}; ROC-AUC {fmt('roc_auc')} (%)")
