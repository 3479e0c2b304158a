"""``nn.Module`` wrappers: hold the hyperparameters, call the functions in :mod:`functional`.

Each module's ``get_config_dict()`` returns its hyperparameters, so a training run can save the
loss configuration beside the model (the sentence-transformers habit).
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import _checks as C
from . import functional as Fn


def _reduction(reduction: str) -> str:
    C.check_reduction(reduction)
    return reduction


class _LossModule(nn.Module):
    _config_keys: tuple[str, ...] = ()

    def get_config_dict(self) -> dict:
        """The module's settings as plain Python values (a tensor setting, such as a log_floor per anchor, as a
        number or a list), so the dict goes to JSON as sentence-transformers saves it beside a model."""
        return {k: _plain(getattr(self, k)) for k in self._config_keys}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config_dict().items())


def _plain(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().tolist()
    return value


class InfoNCELoss(_LossModule):
    """InfoNCE / NT-Xent on a SimCLR multi-view batch. See :func:`functional.info_nce`.

    Relations: ``DebiasedNCELoss(tau_plus=0, log_floor=None)`` is this loss.
    """

    _config_keys = ("temperature", "similarity", "gather_distributed", "reduction")

    def __init__(self, temperature: float = 0.5, similarity: str = "cosine", gather_distributed: bool = False,
                 reduction: str = "mean"):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.similarity, self.gather_distributed = C.check_similarity(similarity), gather_distributed
        self.reduction = _reduction(reduction)

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.info_nce` with this module's settings."""
        return Fn.info_nce(views, *more_views, temperature=self.temperature, similarity=self.similarity,
                           gather_distributed=self.gather_distributed, reduction=self.reduction)


class DebiasedNCELoss(_LossModule):
    """Debiased contrastive loss (DCL eq. 7-8) on a SimCLR multi-view batch; any M = V - 1.

    See :func:`functional.debiased_nce`. Relations: tau_plus = 0 gives :class:`InfoNCELoss`;
    :class:`HardNegativeNCELoss` with beta = 0 gives this loss.
    """

    _config_keys = ("temperature", "tau_plus", "log_floor", "similarity", "gather_distributed", "reduction")

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, log_floor="auto",
                 similarity: str = "cosine", gather_distributed: bool = False, reduction: str = "mean"):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.tau_plus = C.check_tau_plus(tau_plus)
        self.log_floor, self.similarity = C.check_log_floor_option(log_floor), C.check_similarity(similarity)
        self.gather_distributed, self.reduction = gather_distributed, _reduction(reduction)

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.debiased_nce` with this module's settings."""
        return Fn.debiased_nce(views, *more_views, temperature=self.temperature, tau_plus=self.tau_plus,
                               log_floor=self.log_floor, similarity=self.similarity,
                               gather_distributed=self.gather_distributed, reduction=self.reduction)


class HardNegativeNCELoss(DebiasedNCELoss):
    """Hard-negative debiased loss (Robinson et al. 2021; docs/equations.md section 4). beta = 0 is DebiasedNCELoss."""

    _config_keys = DebiasedNCELoss._config_keys + ("beta",)

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, beta: float = 1.0, log_floor="auto",
                 similarity: str = "cosine", gather_distributed: bool = False, reduction: str = "mean"):
        super().__init__(temperature, tau_plus, log_floor, similarity, gather_distributed, reduction)
        self.beta = C.check_beta(beta)

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.hard_negative_nce` with this module's settings."""
        return Fn.hard_negative_nce(views, *more_views, temperature=self.temperature, tau_plus=self.tau_plus,
                                    beta=self.beta, log_floor=self.log_floor, similarity=self.similarity,
                                    gather_distributed=self.gather_distributed, reduction=self.reduction)


class DebiasedNCEFromLogits(_LossModule):
    """Module form of :func:`functional.debiased_nce_from_logits` (and of the hard-negative variant
    when ``beta > 0``), for applications that build their own scores (CURL, quick-thought)."""

    _config_keys = ("tau_plus", "beta", "reduction", "host_checks")

    def __init__(self, tau_plus: float = 0.0, beta: float = 0.0, reduction: str = "mean", host_checks: bool = True):
        super().__init__()
        self.tau_plus = C.check_tau_plus(tau_plus)
        self.beta = C.check_beta(beta)
        self.reduction, self.host_checks = _reduction(reduction), bool(host_checks)

    def forward(self, pos_logits, neg_logits, log_floor=None) -> torch.Tensor:
        """The loss of scores already divided by the temperature: the debiased (or, with ``beta``, hard-negative)
        estimator of :func:`shared_losses.functional.debiased_nce_from_logits`. With ``tau_plus > 0`` pass a
        ``log_floor`` (e.g. :func:`shared_losses.functional.log_floor_min_negative`): without one an anchor whose
        estimate of the negatives' term falls to 0 has a loss of 0 and no gradient (docs/equations.md section 3)."""
        kw = dict(reduction=self.reduction, host_checks=self.host_checks)
        if self.beta:
            return Fn.hard_negative_nce_from_logits(pos_logits, neg_logits, self.tau_plus, self.beta, log_floor, **kw)
        return Fn.debiased_nce_from_logits(pos_logits, neg_logits, self.tau_plus, log_floor, **kw)


class SupConLoss(_LossModule):
    """Supervised contrastive loss (Khosla et al. 2020; puNCE eq. 5). See :func:`functional.supcon_loss`.

    Relations: PUNCELoss on a fully labeled batch is this loss."""

    _config_keys = ("temperature", "gather_distributed", "reduction")

    def __init__(self, temperature: float = 0.5, gather_distributed: bool = False, reduction: str = "mean"):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed, self.reduction = gather_distributed, _reduction(reduction)

    def forward(self, features, labels, source_ids=None) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.supcon_loss` with this module's settings."""
        return Fn.supcon_loss(features, labels, self.temperature, source_ids=source_ids,
                              gather_distributed=self.gather_distributed, reduction=self.reduction)


class PUNCELoss(_LossModule):
    """puNCE (Acharya et al.; eq. 7-10). See :func:`functional.punce_loss`.

    Relations: all labeled -> SupConLoss; none labeled -> InfoNCE; SCLPULoss is the baseline."""

    _config_keys = ("prior", "temperature", "gather_distributed", "label_pull", "reduction")

    def __init__(self, prior: float, temperature: float = 0.5, gather_distributed: bool = False,
                 label_pull: float = 1.0, reduction: str = "mean"):
        super().__init__()
        self.prior = C.check_prior(prior)
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed = gather_distributed
        self.label_pull = C.check_label_pull(label_pull)
        self.reduction = _reduction(reduction)

    def forward(self, features, source_ids, labels) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.punce_loss` with this module's settings."""
        return Fn.punce_loss(features, source_ids, labels, self.prior, self.temperature, reduction=self.reduction,
                             gather_distributed=self.gather_distributed, label_pull=self.label_pull)


class SCLPULoss(_LossModule):
    """SCL-PU baseline (puNCE section 5). See :func:`functional.scl_pu_loss`."""

    _config_keys = ("temperature", "gather_distributed", "reduction")

    def __init__(self, temperature: float = 0.5, gather_distributed: bool = False, reduction: str = "mean"):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed, self.reduction = gather_distributed, _reduction(reduction)

    def forward(self, features, source_ids, labels) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.scl_pu_loss` with this module's settings."""
        return Fn.scl_pu_loss(features, source_ids, labels, self.temperature, reduction=self.reduction,
                              gather_distributed=self.gather_distributed)


class CPCLoss(_LossModule):
    """Contrastive Predictive Coding's loss with its K prediction maps (CPC eq. 3-4): ``W_k c_t`` for
    k = 1..K from the contexts, scored against the latents by :func:`functional.cpc_nce`.

    The maps are this module's parameters (one ``Linear(context_dim, K * latent_dim, bias=False)``: row block k
    is ``W_k``), so the optimiser must hold them beside the encoder and the autoregressive model.

    Relations: ``tau_plus = 0`` is the paper's loss; ``tau_plus > 0`` uses DCL's debiased negatives (eq. 7-8).
    """

    _config_keys = ("context_dim", "latent_dim", "steps", "temperature", "tau_plus", "log_floor", "similarity",
                    "negatives")

    def __init__(self, context_dim: int, latent_dim: int, steps: int = 3, temperature: float = 1.0,
                 tau_plus: float = 0.0, log_floor="auto", similarity: str = "dot", negatives: str = "mixed"):
        super().__init__()
        for name, value in (("context_dim", context_dim), ("latent_dim", latent_dim), ("steps", steps)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if negatives not in Fn.CPC_NEGATIVES:
            raise ValueError(f"negatives must be one of {Fn.CPC_NEGATIVES}, got {negatives!r}")
        if similarity not in ("dot", "cosine"):
            raise ValueError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")
        self.context_dim, self.latent_dim, self.steps = context_dim, latent_dim, steps
        self.temperature = C.check_temperature(temperature)
        self.tau_plus = C.check_tau_plus(tau_plus)
        self.log_floor = C.check_log_floor_option(log_floor)
        self.similarity, self.negatives = similarity, negatives
        self.predictors = nn.Linear(context_dim, steps * latent_dim, bias=False)

    def predict(self, context: torch.Tensor) -> torch.Tensor:
        """``[B, T_c, K, latent_dim]``: the predictions ``W_k c_t`` of contexts ``[B, T_c, context_dim]``."""
        if context.dim() != 3 or context.shape[-1] != self.context_dim:
            raise ValueError(f"context must be [B, T_c, {self.context_dim}], got {list(context.shape)}")
        B, Tc, _ = context.shape
        w = self.predictors.weight
        if context.dtype != w.dtype and context.is_floating_point():  # as predict_each: the maps in context's dtype
            w = w.to(context.dtype)
        return F.linear(context, w).view(B, Tc, self.steps, self.latent_dim)

    def predict_each(self, contexts: torch.Tensor) -> torch.Tensor:
        """``[B, K, latent_dim]``: ``W_k c_k`` for contexts ``[B, K, context_dim]`` that differ by step (context k
        predicts step k only, e.g. after the actions up to it): the diagonal of :meth:`predict`, without the others."""
        if contexts.dim() != 3 or tuple(contexts.shape[1:]) != (self.steps, self.context_dim):
            raise ValueError(f"contexts must be [B, {self.steps}, {self.context_dim}], got {list(contexts.shape)}")
        W = self.predictors.weight.view(self.steps, self.latent_dim, self.context_dim)
        return torch.einsum("kdc,bkc->bkd", W.to(contexts.dtype), contexts)

    def forward(self, latents: torch.Tensor, context: torch.Tensor, mask: torch.Tensor | None = None,
                reduction: str = "mean") -> torch.Tensor:
        """The loss of latents ``[B, T, latent_dim]`` predicted from contexts ``[B, T_c, context_dim]``
        (``T_c <= T``; position t's context predicts positions t+1..t+K): :func:`functional.cpc_nce`."""
        if isinstance(latents, torch.Tensor) and latents.dim() == 3 and latents.shape[-1] != self.latent_dim:
            # named here: cpc_nce would blame the predictions, which this module makes
            raise ValueError(f"latents must be [B, T, latent_dim] = [B, T, {self.latent_dim}], got "
                             f"{list(latents.shape)} (CPCLoss(context_dim={self.context_dim}, "
                             f"latent_dim={self.latent_dim}))")
        return Fn.cpc_nce(latents, self.predict(context), mask, temperature=self.temperature,
                          tau_plus=self.tau_plus, log_floor=self.log_floor, similarity=self.similarity,
                          negatives=self.negatives, reduction=reduction)
