"""SentEval's classifiers with scikit-learn: logistic regression with C chosen by (inner) stratified k-fold,
:func:`eval_kfold` for MR/CR/SUBJ/MPQA and :func:`eval_train_test` for TREC/MRPC."""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

SEED = 1111
C_BINARY = (0.25, 0.5, 1, 2, 4, 8)
C_TRAIN_TEST = (0.5, 1, 2, 4, 8, 16, 32)


class _SentEvalLogReg:
    """SentEval's classifier: scikit-learn's ``LogisticRegression(C, random_state=seed)`` with the
    defaults of the versions SentEval was run with (liblinear, one-vs-rest for several classes, 100
    iterations). Current scikit-learn defaults to lbfgs (multinomial) and no longer lets liblinear
    take several classes itself, so several classes go through ``OneVsRestClassifier``."""

    def __init__(self, C: float, seed: int):
        self.C, self.seed = C, seed

    def fit(self, X, y):
        from sklearn.linear_model import LogisticRegression
        from sklearn.multiclass import OneVsRestClassifier

        lr = LogisticRegression(C=self.C, solver="liblinear", max_iter=100, random_state=self.seed)
        self.model = (OneVsRestClassifier(lr) if len(np.unique(y)) > 2 else lr).fit(X, y)
        return self

    def predict(self, X):
        return self.model.predict(X)


def _logreg(C: float, seed: int) -> _SentEvalLogReg:
    return _SentEvalLogReg(C, seed)


#: Called after every logistic regression fitted (evaluate() shows them as the task's progress); None: silent.
_TICK: Callable[[], None] | None = None


def _tick() -> None:
    if _TICK is not None:
        _TICK()


def _fits(kind: str, k: int, inner_k: int | None) -> int:
    """How many logistic regressions a task of ``kind`` fits: its progress bar's total."""
    if kind == "binary":
        return k * (len(C_BINARY) * (inner_k or k) + 1)
    return len(C_TRAIN_TEST) * k + 1


#: Logistic regressions of one C-selection fitted at once (evaluate's ``jobs``; --jobs). 1: one after another.
_JOBS = 1

#: How the stratified folds are drawn (:data:`FOLDS`): evaluate's ``folds`` (--folds) sets it for one evaluation.
_FOLDS = "current"
FOLDS = {
    "current": "scikit-learn's StratifiedKFold(shuffle=True) as drawn since scikit-learn 0.22: what SentEval's code "
               "draws when it runs with a scikit-learn of today",
    "legacy": "the stratified folds of scikit-learn 0.18-0.21 (SentEval's time: its published numbers, 2017-2019), "
              "drawn by our own code, equal to that scikit-learn's (tested against folds drawn by scikit-learn 0.20.4)",
}


def _legacy_test_folds(y: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Each example's test fold as scikit-learn's StratifiedKFold(k, shuffle=True, random_state=seed) drew them
    before 0.22. For each class in sorted order, with one RandomState(seed) used by all of them in turn: the
    positions 0..max(n_c, k)-1 are shuffled and cut into k consecutive parts (the first max(n_c, k) % k one longer);
    part j, kept to positions below n_c, names the class's examples (in the order they occur) that fold j tests."""
    rng = np.random.RandomState(seed)
    _, inverse = np.unique(y, return_inverse=True)
    fold = np.empty(len(y), dtype=int)
    for c in range(inverse.max() + 1):
        members = np.flatnonzero(inverse == c)
        positions = np.arange(max(len(members), k))
        rng.shuffle(positions)
        sizes = np.full(k, len(positions) // k)
        sizes[: len(positions) % k] += 1
        start = 0
        for j, size in enumerate(sizes):
            part = positions[start:start + size]
            fold[members[part[part < len(members)]]] = j
            start += size
    return fold


def stratified_folds(y: np.ndarray, k: int, seed: int, folds: str | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) index pairs of a shuffled stratified ``k``-fold over labels ``y`` with seed ``seed``, drawn
    as :data:`FOLDS` ``[folds]`` says (None: the evaluation's, ``current`` unless set)."""
    folds = _FOLDS if folds is None else folds
    if folds == "current":
        from sklearn.model_selection import StratifiedKFold

        return list(StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(np.zeros(len(y)), y))
    if folds == "legacy":
        fold = _legacy_test_folds(np.asarray(y), k, seed)
        return [(np.flatnonzero(fold != j), np.flatnonzero(fold == j)) for j in range(k)]
    raise ValueError(f"unknown folds {folds!r}; choose from {', '.join(FOLDS)}")


def _fold_accuracy(X, y, C: float, seed: int, tr, te) -> float:
    return float((_logreg(C, seed).fit(X[tr], y[tr]).predict(X[te]) == y[te]).mean())


def _best_C(X, y, Cs, k: int, seed: int) -> tuple[float, float]:
    """Inner stratified k-fold: (best C, its mean accuracy in %)."""
    splits = stratified_folds(y, k, seed)
    fits = [(C, tr, te) for C in Cs for tr, te in splits]  # C-major: fold j of C i is fits[i * k + j]
    accs = []
    if _JOBS == 1:
        for C, tr, te in fits:
            accs.append(_fold_accuracy(X, y, C, seed, tr, te))
            _tick()
    else:  # liblinear releases the GIL: threads, no copy of X; each fit is the serial one, so the scores are too
        from joblib import Parallel, delayed

        run = Parallel(n_jobs=_JOBS, prefer="threads", return_as="generator")
        for acc in run(delayed(_fold_accuracy)(X, y, C, seed, tr, te) for C, tr, te in fits):
            accs.append(acc)
            _tick()
    scores = []
    for i in range(len(Cs)):
        scores.append(float(round(100.0 * np.mean(accs[i * k:(i + 1) * k]), 2)))  # SentEval rounds before argmax
    i = int(np.argmax(scores))
    return Cs[i], scores[i]


def _check_folds(y: np.ndarray, k: int, task: str, inner_k: int | None = None) -> None:
    if k < 2 or (inner_k is not None and inner_k < 2):
        raise ValueError(f"task {task}: --kfold and --inner-kfold must be >= 2, got {k} and {inner_k}")
    counts = np.bincount(y)
    counts = counts[counts > 0]
    if len(counts) < 2:
        raise ValueError(f"task {task}: only one class present")
    if counts.min() < k:
        raise ValueError(f"task {task}: a class has {counts.min()} examples, fewer than k = {k} folds; lower --kfold")
    # the inner CV runs on an outer training part: at least c - ceil(c / k) examples of each class
    least = int(counts.min() - -(-counts.min() // k))
    if inner_k is not None and least < inner_k:
        way = ("lower --inner-kfold" if inner_k > 2 else  # 2 inner folds (and then 2 outer ones) are the fewest
               "2 folds in 2 are the fewest, so the task needs more examples of that class")
        raise ValueError(f"task {task}: an outer training part can hold only {least} examples of a class, fewer "
                         f"than the {inner_k} inner folds; {way}")


def eval_kfold(X: np.ndarray, y: np.ndarray, k: int = 10, inner_k: int | None = None, seed: int = SEED,
               Cs: Sequence[float] = C_BINARY, task: str = "") -> dict:
    """Outer k-fold with inner model selection (MR/CR/SUBJ/MPQA)."""
    inner_k = inner_k or k
    _check_folds(y, k, task, inner_k)
    accs, devs = [], []
    for tr, te in stratified_folds(y, k, seed):
        C, dev = _best_C(X[tr], y[tr], list(Cs), inner_k, seed)
        clf = _logreg(C, seed).fit(X[tr], y[tr])
        _tick()
        accs.append(round(100.0 * float((clf.predict(X[te]) == y[te]).mean()), 2))  # as SentEval, per fold
        devs.append(dev)
    # ndev / ntest as SentEval's result dict has them (a k-fold task: both the whole data); n: the examples in all
    return {"acc": float(round(np.mean(accs), 2)), "devacc": float(round(np.mean(devs), 2)), "n": int(len(y)),
            "ndev": int(len(y)), "ntest": int(len(y))}


def eval_train_test(Xtr, ytr, Xte, yte, k: int = 10, seed: int = SEED, Cs: Sequence[float] = C_TRAIN_TEST,
                    f1: bool = False, task: str = "") -> dict:
    """k-fold on train picks C, refit on all of train, test once (TREC/MRPC)."""
    from sklearn.metrics import f1_score

    _check_folds(ytr, k, task)
    C, dev = _best_C(Xtr, ytr, list(Cs), k, seed)
    clf = _logreg(C, seed).fit(Xtr, ytr)
    _tick()
    pred = clf.predict(Xte)
    out = {"acc": round(100.0 * float((pred == yte).mean()), 2), "devacc": round(dev, 2),
           "n": int(len(ytr) + len(yte)), "ndev": int(len(ytr)), "ntest": int(len(yte))}
    if f1:
        out["f1"] = round(100.0 * float(f1_score(yte, pred)), 2)
    return out


def mrpc_features(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """SentEval's MRPC features ``[|u - v|, u * v]``."""
    if u.shape != v.shape:
        raise ValueError(f"u and v must have the same shape, got {u.shape} and {v.shape}")
    return np.concatenate([np.abs(u - v), u * v], axis=1)

