"""The classifiers of a text few-shot run on the encoder's sentence vectors: tokenizing and encoding a list of texts,
the logistic-regression head (SetFit's, on L2-normalised vectors) and the accuracy of each classifier on the
evaluation split. It imports no registry, so the registry's baselines (:data:`fewshot.objectives.ALL_OBJECTIVES`)
can use it."""

from __future__ import annotations

import numpy as np
import torch

from .scores import binary_scores, percent_agree


def tokenize(tokenizer, texts, max_length, device):
    enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def longest_first(texts) -> list[int]:
    """The indices of ``texts``, longest first (in characters; ties keep their order), the order in which
    sentence-transformers' ``encode`` batches: each batch is padded to its longest text, so texts of like length
    together pad less (the evaluation of the README's few-shot run: 33 s in the given order, 21 s so, the vectors the
    same to 1e-6). The results go back to the given order."""
    return sorted(range(len(texts)), key=lambda i: -len(texts[i]))


def batches_longest_first(texts, order: list[int], batch_size: int, progress: str | None = None):
    """The lists of ``texts`` in ``order`` (:func:`longest_first`), ``batch_size`` at a time; ``progress``: the label
    of a progress bar on stderr (none by default; none for one batch), gone when done, redrawn as the training bars
    are."""
    from tqdm.auto import tqdm

    from shared_losses.training.runtime import bar_interval

    for i in tqdm(range(0, len(texts), batch_size), desc=progress, unit="batch", leave=False,
                  disable=progress is None or len(texts) <= batch_size, mininterval=bar_interval()):
        yield [texts[j] for j in order[i:i + batch_size]]


def in_given_order(rows: torch.Tensor, order: list[int]) -> torch.Tensor:
    """``rows`` computed for ``[texts[i] for i in order]``, put back in the order of ``texts``."""
    back = torch.empty(len(order), dtype=torch.long)
    back[torch.as_tensor(order, dtype=torch.long)] = torch.arange(len(order))
    return rows[back]


@torch.no_grad()
def embed_all(model, tokenizer, texts, max_length, device, batch_size=64, progress: str | None = None):
    """(sentence vectors, classifier logits) of ``texts``, in their order (computed in batches of like length:
    :func:`longest_first`); ``progress``: the label of a progress bar (none by default; none for one batch), gone
    when done."""
    model.eval()
    order = longest_first(texts)
    feats, logits = [], []
    for batch in batches_longest_first(texts, order, batch_size, progress):
        ids, mask = tokenize(tokenizer, batch, max_length, device)
        h = model.embed(ids, mask)
        feats.append(h.float().cpu())
        logits.append(model.classifier(h).float().cpu())
    model.train()
    return in_given_order(torch.cat(feats), order), in_given_order(torch.cat(logits), order)


#: --probe-c values scored side by side on the development split (``head_accuracies``)
DEV_PROBE_CS = (1.0, 10.0, 100.0, 1000.0)


def unit_rows(f) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64), as the logistic-regression head sees sentence vectors."""
    f = np.asarray(f, dtype=np.float64)
    return f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-12)


def fit_logreg(feats_labeled, y_labeled, c: float, seed: int):
    """The logistic-regression head (scikit-learn, L2 strength 1/c) on L2-normalised labeled sentence vectors."""
    from sklearn.linear_model import LogisticRegression

    return LogisticRegression(C=c, max_iter=2000, random_state=seed).fit(unit_rows(feats_labeled),
                                                                         np.asarray(y_labeled))


def logreg_accuracy(feats_labeled, y_labeled, feats_eval, eval_y, c: float, seed: int) -> float:
    """Accuracy (%) of a logistic regression fitted on L2-normalised labeled sentence vectors."""
    clf = fit_logreg(feats_labeled, y_labeled, c, seed)
    return percent_agree(clf.predict(unit_rows(feats_eval)), eval_y)


def head_accuracies(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device,
                    trains_head: bool, progress: bool = False) -> tuple[dict, dict]:
    """Evaluation accuracy (%) of both classifiers from one pass over the evaluation split: ``linear``
    (the CE-trained head; absent when the objective trains none, ``trains_head`` False: the baselines) and
    ``logreg``; and each one's :func:`fewshot.scores.binary_scores` (F1, ROC-AUC, ...). ``progress``: a bar while
    the evaluation split is embedded (the README's run: a third of its time)."""
    fl, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.labeled], cfg.max_length, device)
    fe, logits = embed_all(model, tokenizer, eval_x, cfg.max_length, device,
                           progress=f"evaluation: embedding {len(eval_x)} texts" if progress else None)
    fl, fe, yl = fl.numpy(), fe.numpy(), np.asarray(train_y)[sample.labeled]
    clf = fit_logreg(fl, yl, cfg.probe_c, cfg.seed)
    decision = clf.decision_function(unit_rows(fe))  # classes [0, 1]: predict() is decision > 0
    out = {"logreg": percent_agree((decision > 0).astype(int), eval_y)}
    scores = {"logreg": binary_scores(eval_y, decision)}
    if trains_head:
        out["linear"] = percent_agree(logits.argmax(1).numpy(), eval_y)
        scores["linear"] = binary_scores(eval_y, (logits[:, 1] - logits[:, 0]).numpy())
    if cfg.eval_split == "dev":  # choosing --probe-c: only ever on the development split
        for c in DEV_PROBE_CS:
            out[f"logreg_C{c:g}"] = logreg_accuracy(fl, yl, fe, eval_y, c, cfg.seed)
    return out, scores


def head_accuracy(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device,
                  trains_head: bool, progress: bool = False) -> tuple[float, dict, dict]:
    """(accuracy with the classifier ``cfg.head`` names (a baseline, which trains no head: always logreg), both heads'
    accuracies, that classifier's scores)."""
    both, scores = head_accuracies(model, tokenizer, cfg, train_x, train_y, sample, eval_x, eval_y, device,
                                   trains_head, progress)
    chosen = cfg.head if trains_head else "logreg"
    return both[chosen], both, scores[chosen]
