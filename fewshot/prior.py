"""The class prior pi = p(y = +1 | unlabeled) that puNCE needs (puNCE eq. 8-10; docs/equations.md section 5).

* :func:`exact_prior`: appendix A.1.1, when the true counts are known (benchmark data).
* :func:`elkan_noto_prior`: mixture-proportion estimation under "labeled completely at random"
  (Elkan & Noto, KDD 2008, estimator e1 for c, then the weights of their eq. for unlabeled
  points): a classifier g(x) ~ p(s = 1 | x) separates labeled from unlabeled; ``c = p(s=1|y=1)`` is
  the mean of g on labeled positives; each unlabeled x is positive with probability
  ``w(x) = (1 - c)/c * g(x)/(1 - g(x))`` and pi is the mean of w over the unlabeled set.
  Every g value is out-of-fold (K-fold cross-fitting over labeled and unlabeled together), and the
  classifier's L2 strength is the one with the smallest out-of-fold log-loss on s (the labeled /
  unlabeled indicator, known): a g evaluated on the points it was fitted on separates them in high
  dimension (g(U) ~ 0) and drives the estimate to ~0.

  Known limitation (docs/results/fewshot.md, "How close is the Elkan-Noto estimate"): e1 assumes the
  classifier is confident on positives (p(y=1|x) ~ 1 where labeled points lie). When the learned g is weak -- few
  labeled points in high dimension, or classes the features barely separate -- ``c`` is
  underestimated and pi overestimated (towards 1 when labeled and unlabeled look alike).
"""

from __future__ import annotations

import warnings

import numpy as np

#: L2 strengths tried (on standardised features); the one with the smallest out-of-fold log-loss is used
_CS = np.logspace(-4, 1, 11)


def exact_prior(n_true_pos: int, n_true_neg: int, n_labeled_pos: int) -> float:
    """``pi = (P* - n_P) / (P* + N* - n_P)``: the positive fraction of what is left unlabeled."""
    denom = n_true_pos + n_true_neg - n_labeled_pos
    if denom <= 0 or n_labeled_pos > n_true_pos:
        raise ValueError(f"inconsistent counts P*={n_true_pos}, N*={n_true_neg}, n_P={n_labeled_pos}")
    return (n_true_pos - n_labeled_pos) / denom


def _out_of_fold_g(X: np.ndarray, s: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """g(x) = p(s=1 | x) for every row of X, each from a logistic regression fitted without that row.

    Folds are stratified by s and drawn from ``seed``. For each fold the scaler and the regressions
    (one per C in ``_CS``, warm-started along the path) are fitted on the other folds; the C kept is
    the one whose out-of-fold predictions have the smallest log-loss on s over all rows.
    """
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(seed)
    fold = np.empty(len(X), dtype=np.int64)
    for label in (1, 0):
        idx = np.flatnonzero(s == label)
        fold[idx] = rng.permutation(len(idx)) % folds
    G = np.empty((len(_CS), len(X)))
    for f in range(folds):
        fit, held = fold != f, fold == f
        scaler = StandardScaler().fit(X[fit])
        X_fit, X_held = scaler.transform(X[fit]), scaler.transform(X[held])
        clf = LogisticRegression(max_iter=2000, warm_start=True)
        for j, C in enumerate(_CS):
            with warnings.catch_warnings():  # a large C on separable folds: its log-loss rules it out
                warnings.simplefilter("ignore", ConvergenceWarning)
                clf.set_params(C=C).fit(X_fit, s[fit])
            G[j, held] = clf.predict_proba(X_held)[:, 1]
    Gc = np.clip(G, 1e-12, 1 - 1e-12)
    log_loss = -(s * np.log(Gc) + (1 - s) * np.log1p(-Gc)).mean(axis=1)
    return G[int(np.argmin(log_loss))]


#: what to do when the Elkan-Noto estimate cannot be made, by where the data came from (:func:`elkan_noto_prior`)
ESTIMATE_HINTS = {
    "sampled": "raise --n-labeled, or drop --estimate-prior (the exact prior is then read from the labels) or pass "
               "--prior instead",
    "files": "put more labeled positives in --positive-file, or pass --prior (your estimate of the positive share of "
             "--unlabeled-file)",
    "unlabeled file": "raise --n-labeled (the estimate learns the positives from the labeled ones), or pass --prior "
                      "(your estimate of the positive share of --unlabeled-file)",
    "images": "raise --n-labeled, or drop --estimate-prior (the exact prior is then read from the labels) or pass "
              "--prior instead",
    "image files": "put more labeled positives in --positive-file, or pass --prior (your estimate of the positive "
                   "share of --unlabeled-file)",
}


def elkan_noto_prior(feats_labeled, feats_unlabeled, folds: int = 5, seed: int = 0, hint: str | None = None) -> float:
    """Estimate p(y=+1 | unlabeled) from labeled-positive and unlabeled feature arrays.

    Cross-fitted Elkan-Noto (see the module docstring): ``c`` is the mean out-of-fold g over all
    labeled positives (e1), pi the mean over the unlabeled set of the weights ``w`` clipped to
    [0, 1]. Deterministic given ``seed`` (it draws the folds). ``hint``: what the error for too few examples tells
    the user to do (default: the advice for a sample drawn from a labeled data set, ``ESTIMATE_HINTS["sampled"]``).
    """
    P, U = np.asarray(feats_labeled, dtype=np.float64), np.asarray(feats_unlabeled, dtype=np.float64)
    if len(P) < 4 or len(U) < 2:
        raise ValueError(f"the Elkan-Noto prior estimate needs >= 4 labeled positives and >= 2 unlabeled examples, "
                         f"got {len(P)} and {len(U)} ({hint or ESTIMATE_HINTS['sampled']})")
    X = np.concatenate([P, U])
    s = np.concatenate([np.ones(len(P)), np.zeros(len(U))])
    g = _out_of_fold_g(X, s, folds=max(2, min(folds, len(P), len(U))), seed=seed)
    c = g[: len(P)].mean()
    if c <= 0.0:  # the classifier gave no labeled positive any chance of being labeled: (1 - c) / c is unbounded
        return 1.0  # every weight clips to 1, as the division did (with a RuntimeWarning of numpy's)
    gu = np.clip(g[len(P):], 1e-6, 1 - 1e-6)
    w = (1.0 - c) / c * gu / (1.0 - gu)
    return float(np.clip(w, 0.0, 1.0).mean())


#: a given prior is said to differ a lot from the exact one when they are this far apart (absolute) ...
GIVEN_PRIOR_GAP = 0.1
#: ... or when one is more than this many times the other
GIVEN_PRIOR_RATIO = 2.0


def given_prior_far_off(given: float, exact: float) -> bool:
    """Whether a given prior differs a lot from the exact prior of the drawn unlabeled sample: by more than
    :data:`GIVEN_PRIOR_GAP` or by more than a factor :data:`GIVEN_PRIOR_RATIO` (either way round)."""
    lo, hi = sorted((float(given), float(exact)))
    return hi - lo > GIVEN_PRIOR_GAP or hi > GIVEN_PRIOR_RATIO * lo


def warn_given_prior(given: float, exact: float, what: str = "unlabeled examples") -> None:
    """A one-line warning when ``given`` (--prior) is far off the exact prior ``exact`` the labels give
    (:func:`given_prior_far_off`)."""
    if given_prior_far_off(given, exact):
        warnings.warn(f"--prior {given:g} is far from the exact prior of the drawn {what}, {exact:.4g} (their labels "
                      f"are known here; 'far': more than {GIVEN_PRIOR_GAP:g} apart or a factor over "
                      f"{GIVEN_PRIOR_RATIO:g}); metrics.json records both (prior, exact_prior): leave --prior out to "
                      "use the exact one", stacklevel=2)
