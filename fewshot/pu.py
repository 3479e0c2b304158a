"""PU learning risks for the linear probe (Kiryo et al., NeurIPS 2017) and their training loop.

With the sigmoid loss ``l(z, y) = sigmoid(-y z)`` and the class prior ``pi_p = p(y = +1)``:

* PN   (unlabeled treated as negative): ``pi_p E_P[l(z,+1)] + (1 - pi_p) E_U[l(z,-1)]``
* uPU  (unbiased PU, du Plessis et al.): ``pi_p E_P[l(z,+1)] + E_U[l(z,-1)] - pi_p E_P[l(z,-1)]``
* nnPU (non-negative PU): ``pi_p E_P[l(z,+1)] + max(0, E_U[l(z,-1)] - pi_p E_P[l(z,-1)])``; when the
  bracket falls below ``-beta`` (beta = 0) the step descends on its negative instead (gamma = 1).
"""

from __future__ import annotations

import torch
import torch.nn as nn

RISKS = ("pn", "upu", "nnpu")
#: unlabeled examples the PU paths need at least: the probes standardise with their spread (a standard deviation
#: of one row is NaN) and the Elkan-Noto estimate needs two
MIN_UNLABELED = 2


def sigmoid_loss(z: torch.Tensor, y: float) -> torch.Tensor:
    return torch.sigmoid(-y * z)


def _check_scores(name: str, scores) -> None:
    """One line for a batch of probe scores a PU risk cannot use: not a tensor, empty or not finite."""
    if not isinstance(scores, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor of probe scores, got {type(scores).__name__}")
    if scores.numel() == 0:
        raise ValueError(f"{name} is empty: a PU risk needs at least one score of each set (P and U)")
    if not bool(torch.isfinite(scores).all()):
        raise ValueError(f"{name} contains NaN or inf: a PU risk of non-finite scores is NaN")


def check_prior_p(prior) -> float:
    """The PU risks' class prior pi_p as a float strictly between 0 and 1 (one line otherwise)."""
    if isinstance(prior, torch.Tensor) and (prior.numel() != 1 or prior.requires_grad):
        raise ValueError("the class prior pi_p must be one fixed number, got a tensor"
                         + (" that requires grad" if prior.requires_grad else f" of shape {tuple(prior.shape)}"))
    try:
        prior = float(prior)
    except (TypeError, ValueError):
        raise ValueError(f"the class prior pi_p must be a number in (0, 1), got {prior!r}") from None
    if not 0.0 < prior < 1.0:
        raise ValueError(f"the class prior pi_p must be in (0, 1), got {prior}")
    return prior


def pu_risk(scores_p: torch.Tensor, scores_u: torch.Tensor, prior: float, method: str = "nnpu", beta: float = 0.0,
            check: bool = True):
    """Returns ``(objective_to_minimise, risk_estimate)`` for one batch of P and U scores. ``check``: refuse empty or
    non-finite scores in one line (a training loop whose divergence watch reads the NaN risk passes False)."""
    prior = check_prior_p(prior)
    if check:
        _check_scores("scores_p", scores_p)
        _check_scores("scores_u", scores_u)
    pos = prior * sigmoid_loss(scores_p, 1.0).mean()
    if method == "pn":
        risk = pos + (1.0 - prior) * sigmoid_loss(scores_u, -1.0).mean()
        return risk, risk
    neg = sigmoid_loss(scores_u, -1.0).mean() - prior * sigmoid_loss(scores_p, -1.0).mean()
    if method == "upu":
        return pos + neg, pos + neg
    if method == "nnpu":
        risk = pos + torch.clamp(neg, min=0.0)
        if neg.item() < -beta:
            return -neg, risk  # gamma = 1: push the negative-class risk back up
        return pos + neg, risk
    raise ValueError(f"method must be one of {RISKS}, got {method!r}")


def train_probe(feats_p, feats_u, prior: float, method: str, epochs: int = 300, lr: float = 1e-2,
                batch_size: int = 256, seed: int = 0, progress: str | None = None) -> nn.Linear:
    """Fit a linear probe ``g(x) = w^T x + b`` on frozen features with one of the PU risks. ``progress``: the label of a
    progress bar over the epochs (none by default); ``epochs`` passes over the unlabeled features, so the time grows
    with their number (35k unlabeled image features: minutes per risk on 2 cores)."""
    prior = check_prior_p(prior)
    if method not in RISKS:
        raise ValueError(f"method must be one of {RISKS}, got {method!r}")
    feats_p, feats_u = torch.as_tensor(feats_p, dtype=torch.float32), torch.as_tensor(feats_u, dtype=torch.float32)
    for name, f in (("feats_p", feats_p), ("feats_u", feats_u)):
        if f.dim() != 2 or len(f) == 0:
            raise ValueError(f"{name} must be a non-empty [n, d] array of features, got shape {tuple(f.shape)}")
        if not bool(torch.isfinite(f).all()):
            raise ValueError(f"{name} contains NaN or inf: the probe would be NaN")
    if feats_p.shape[1] != feats_u.shape[1]:
        raise ValueError(f"feats_p and feats_u must have the same width, got {feats_p.shape[1]} and {feats_u.shape[1]}")
    if batch_size < 1 or epochs < 0:
        raise ValueError(f"batch_size must be >= 1 and epochs >= 0, got {batch_size} and {epochs}")
    torch.manual_seed(seed)
    probe = nn.Linear(feats_p.shape[1], 1)
    opt = torch.optim.Adam(probe.parameters(), lr=lr, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    n_batches = max(1, -(-len(feats_u) // batch_size))
    from tqdm.auto import tqdm

    for _ in tqdm(range(epochs), desc=progress, unit="epoch", disable=progress is None, leave=False):
        perm_u = torch.randperm(len(feats_u), generator=g)
        for b in range(n_batches):
            idx_u = perm_u[b * batch_size:(b + 1) * batch_size]
            idx_p = torch.randint(0, len(feats_p), (min(batch_size, len(feats_p)),), generator=g)
            obj, _ = pu_risk(probe(feats_p[idx_p]).squeeze(1), probe(feats_u[idx_u]).squeeze(1), prior, method,
                             check=False)
            opt.zero_grad()
            obj.backward()
            opt.step()
    return probe
