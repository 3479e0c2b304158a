"""The PU probes on a (trained or frozen) encoder's sentence vectors: PN, uPU and nnPU linear probes (the sigmoid
loss, as Kiryo et al.; :mod:`fewshot.pu`), standardised with the unlabeled statistics. Used by the PU pipeline and by
the export of PU runs (kept apart from both so that neither imports the other)."""

from __future__ import annotations

import torch

from .pu import MIN_UNLABELED, RISKS, train_probe
from .heads import embed_all
from .scores import binary_scores, percent_agree


def _probes(model, tokenizer, cfg, train_x, sample, eval_x, eval_y, prior, device, risks=RISKS):
    """(accuracy (%) per risk on the evaluation split, or None without one; the nnPU head for the export:
    the probe's ``weight`` [1, d] and ``bias`` [1] with the standardisation's ``mean`` and ``std``; the scores of
    :func:`fewshot.scores.binary_scores` per risk, or None without an evaluation split)."""
    if len(sample.unlabeled) < MIN_UNLABELED:  # one row's spread is NaN, and so would the probes be
        raise ValueError(f"the PU probes standardise the features with the unlabeled examples' spread: they need at "
                         f"least {MIN_UNLABELED} unlabeled examples, got {len(sample.unlabeled)}")
    bar = (lambda what: f"PU probes: {what}") if cfg.progress else (lambda what: None)  # minutes on large data
    fp, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.labeled], cfg.max_length, device,
                      progress=bar("embedding the positives"))
    fu, _ = embed_all(model, tokenizer, [train_x[i] for i in sample.unlabeled], cfg.max_length, device,
                      progress=bar("embedding the unlabeled"))
    fe = embed_all(model, tokenizer, eval_x, cfg.max_length, device,
                   progress=bar("embedding the evaluation split"))[0] if len(eval_x) else None
    mean, std = fu.mean(0), fu.std(0).clamp(min=1e-6)  # standardise with unlabeled statistics
    fp, fu = (fp - mean) / std, (fu - mean) / std
    out, head = ({} if fe is not None else None), None
    scores = {} if fe is not None else None
    for risk in risks:
        probe = train_probe(fp, fu, prior, risk, seed=cfg.seed, progress=bar(f"the {risk} probe"))
        if risk == "nnpu":
            head = {"weight": probe.weight.detach().clone(), "bias": probe.bias.detach().clone(), "mean": mean,
                    "std": std}
        if fe is not None:
            with torch.no_grad():
                logits = probe((fe - mean) / std).squeeze(1)
            pred = (logits > 0).long().numpy()
            out[risk] = percent_agree(pred, eval_y)
            scores[risk] = binary_scores(eval_y, logits.numpy())
    return out, head, scores


def _probe_accuracies(model, tokenizer, cfg, train_x, sample, eval_x, eval_y, prior, device):
    return _probes(model, tokenizer, cfg, train_x, sample, eval_x, eval_y, prior, device)[0]


def fit_pu_head(model, tokenizer, cfg, train_x, sample, prior, device="cpu") -> dict:
    """The nnPU probe of a finished PU run fitted again (for exporting a run from before exports kept it):
    the same features, standardisation, prior and seed as :class:`~fewshot.pu_pipeline.PuApp`."""
    return _probes(model, tokenizer, cfg, train_x, sample, [], [], prior, device, risks=("nnpu",))[1]
