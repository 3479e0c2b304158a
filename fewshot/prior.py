"""The class prior pi = p(y = +1 | unlabeled) that puNCE needs (SPEC section 4).

* :func:`exact_prior`: appendix A.1.1, when the true counts are known (benchmark data).
* :func:`elkan_noto_prior`: mixture-proportion estimation under "labeled completely at random"
  (Elkan & Noto, KDD 2008, estimator e1 for c, then the weights of their eq. for unlabeled
  points): a classifier g(x) ~ p(s = 1 | x) separates labeled from unlabeled; ``c = p(s=1|y=1)`` is
  the mean of g on held-out labeled positives; each unlabeled x is positive with probability
  ``w(x) = (1 - c)/c * g(x)/(1 - g(x))`` and pi is the mean of w over the unlabeled set.
"""

from __future__ import annotations

import numpy as np


def exact_prior(n_true_pos: int, n_true_neg: int, n_labeled_pos: int) -> float:
    """``pi = (P* - n_P) / (P* + N* - n_P)``: the positive fraction of what is left unlabeled."""
    denom = n_true_pos + n_true_neg - n_labeled_pos
    if denom <= 0 or n_labeled_pos > n_true_pos:
        raise ValueError(f"inconsistent counts P*={n_true_pos}, N*={n_true_neg}, n_P={n_labeled_pos}")
    return (n_true_pos - n_labeled_pos) / denom


def elkan_noto_prior(feats_labeled, feats_unlabeled, holdout: float = 0.25, seed: int = 0) -> float:
    """Estimate p(y=+1 | unlabeled) from labeled-positive and unlabeled feature arrays."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    P, U = np.asarray(feats_labeled, dtype=np.float64), np.asarray(feats_unlabeled, dtype=np.float64)
    if len(P) < 4 or len(U) < 2:
        raise ValueError(f"need >= 4 labeled and >= 2 unlabeled examples, got {len(P)} and {len(U)}")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(P))
    n_hold = max(1, int(round(holdout * len(P))))
    P_hold, P_fit = P[perm[:n_hold]], P[perm[n_hold:]]
    X = np.concatenate([P_fit, U])
    s = np.concatenate([np.ones(len(P_fit)), np.zeros(len(U))])
    scaler = StandardScaler().fit(X)
    clf = LogisticRegression(max_iter=2000, C=1.0).fit(scaler.transform(X), s)
    c = clf.predict_proba(scaler.transform(P_hold))[:, 1].mean()
    g = np.clip(clf.predict_proba(scaler.transform(U))[:, 1], 1e-6, 1 - 1e-6)
    w = (1.0 - c) / c * g / (1.0 - g)
    return float(np.clip(w, 0.0, 1.0).mean())
