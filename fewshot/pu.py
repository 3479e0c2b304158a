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


def sigmoid_loss(z: torch.Tensor, y: float) -> torch.Tensor:
    return torch.sigmoid(-y * z)


def pu_risk(scores_p: torch.Tensor, scores_u: torch.Tensor, prior: float, method: str = "nnpu", beta: float = 0.0):
    """Returns ``(objective_to_minimise, risk_estimate)`` for one batch of P and U scores."""
    if not 0.0 < prior < 1.0:
        raise ValueError(f"the class prior pi_p must be in (0, 1), got {prior}")
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
                batch_size: int = 256, seed: int = 0) -> nn.Linear:
    """Fit a linear probe ``g(x) = w^T x + b`` on frozen features with one of the PU risks."""
    torch.manual_seed(seed)
    feats_p, feats_u = torch.as_tensor(feats_p, dtype=torch.float32), torch.as_tensor(feats_u, dtype=torch.float32)
    probe = nn.Linear(feats_p.shape[1], 1)
    opt = torch.optim.Adam(probe.parameters(), lr=lr, weight_decay=1e-4)
    g = torch.Generator().manual_seed(seed)
    n_batches = max(1, -(-len(feats_u) // batch_size))
    for _ in range(epochs):
        perm_u = torch.randperm(len(feats_u), generator=g)
        for b in range(n_batches):
            idx_u = perm_u[b * batch_size:(b + 1) * batch_size]
            idx_p = torch.randint(0, len(feats_p), (min(batch_size, len(feats_p)),), generator=g)
            obj, _ = pu_risk(probe(feats_p[idx_p]).squeeze(1), probe(feats_u[idx_u]).squeeze(1), prior, method)
            opt.zero_grad()
            obj.backward()
            opt.step()
    return probe
