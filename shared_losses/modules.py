"""``nn.Module`` wrappers: hold the hyperparameters, call the functions in :mod:`functional`.

Each module's ``get_config_dict()`` returns its hyperparameters, so a training run can save the
loss configuration beside the model (the sentence-transformers habit).
"""

from __future__ import annotations

import torch
import torch.nn as nn

from . import _checks as C
from . import functional as Fn


class _LossModule(nn.Module):
    _config_keys: tuple[str, ...] = ()

    def get_config_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._config_keys}

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config_dict().items())


class InfoNCELoss(_LossModule):
    """InfoNCE / NT-Xent on a SimCLR multi-view batch. See :func:`functional.info_nce`.

    Relations: ``DebiasedNCELoss(tau_plus=0, log_floor=None)`` is this loss.
    """

    _config_keys = ("temperature", "similarity", "gather_distributed")

    def __init__(self, temperature: float = 0.5, similarity: str = "cosine", gather_distributed: bool = False):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.similarity, self.gather_distributed = similarity, gather_distributed

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.info_nce` with this module's settings."""
        return Fn.info_nce(views, *more_views, temperature=self.temperature, similarity=self.similarity,
                           gather_distributed=self.gather_distributed)


class DebiasedNCELoss(_LossModule):
    """Debiased contrastive loss (DCL eq. 7-8) on a SimCLR multi-view batch; any M = V - 1.

    See :func:`functional.debiased_nce`. Relations: tau_plus = 0 gives :class:`InfoNCELoss`;
    :class:`HardNegativeNCELoss` with beta = 0 gives this loss.
    """

    _config_keys = ("temperature", "tau_plus", "log_floor", "similarity", "gather_distributed")

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, log_floor="auto",
                 similarity: str = "cosine", gather_distributed: bool = False):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.tau_plus = C.check_tau_plus(tau_plus)
        self.log_floor, self.similarity, self.gather_distributed = log_floor, similarity, gather_distributed

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.debiased_nce` with this module's settings."""
        return Fn.debiased_nce(views, *more_views, temperature=self.temperature, tau_plus=self.tau_plus,
                               log_floor=self.log_floor, similarity=self.similarity,
                               gather_distributed=self.gather_distributed)


class HardNegativeNCELoss(DebiasedNCELoss):
    """Hard-negative debiased loss (Robinson et al. 2021; docs/equations.md section 4). beta = 0 is DebiasedNCELoss."""

    _config_keys = DebiasedNCELoss._config_keys + ("beta",)

    def __init__(self, temperature: float = 0.5, tau_plus: float = 0.1, beta: float = 1.0, log_floor="auto",
                 similarity: str = "cosine", gather_distributed: bool = False):
        super().__init__(temperature, tau_plus, log_floor, similarity, gather_distributed)
        self.beta = C.check_beta(beta)

    def forward(self, views, *more_views) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.hard_negative_nce` with this module's settings."""
        return Fn.hard_negative_nce(views, *more_views, temperature=self.temperature, tau_plus=self.tau_plus,
                                    beta=self.beta, log_floor=self.log_floor, similarity=self.similarity,
                                    gather_distributed=self.gather_distributed)


class DebiasedNCEFromLogits(_LossModule):
    """Module form of :func:`functional.debiased_nce_from_logits` (and of the hard-negative variant
    when ``beta > 0``), for applications that build their own scores (CURL, quick-thought)."""

    _config_keys = ("tau_plus", "beta")

    def __init__(self, tau_plus: float = 0.0, beta: float = 0.0):
        super().__init__()
        self.tau_plus = C.check_tau_plus(tau_plus)
        self.beta = C.check_beta(beta)

    def forward(self, pos_logits, neg_logits, log_floor=None) -> torch.Tensor:
        """The loss of scores already divided by the temperature: the debiased (or, with ``beta``, hard-negative)
        estimator of :func:`shared_losses.functional.debiased_nce_from_logits`."""
        if self.beta:
            return Fn.hard_negative_nce_from_logits(pos_logits, neg_logits, self.tau_plus, self.beta, log_floor)
        return Fn.debiased_nce_from_logits(pos_logits, neg_logits, self.tau_plus, log_floor)


class SupConLoss(_LossModule):
    """Supervised contrastive loss (Khosla et al. 2020; puNCE eq. 5). See :func:`functional.supcon_loss`.

    Relations: PUNCELoss on a fully labeled batch is this loss."""

    _config_keys = ("temperature", "gather_distributed")

    def __init__(self, temperature: float = 0.5, gather_distributed: bool = False):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed = gather_distributed

    def forward(self, features, labels, source_ids=None) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.supcon_loss` with this module's settings."""
        return Fn.supcon_loss(features, labels, self.temperature, source_ids=source_ids,
                              gather_distributed=self.gather_distributed)


class PUNCELoss(_LossModule):
    """puNCE (Acharya et al.; eq. 7-10). See :func:`functional.punce_loss`.

    Relations: all labeled -> SupConLoss; none labeled -> InfoNCE; SCLPULoss is the baseline."""

    _config_keys = ("prior", "temperature", "gather_distributed")

    def __init__(self, prior: float, temperature: float = 0.5, gather_distributed: bool = False):
        super().__init__()
        self.prior = C.check_prior(prior)
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed = gather_distributed

    def forward(self, features, source_ids, labels) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.punce_loss` with this module's settings."""
        return Fn.punce_loss(features, source_ids, labels, self.prior, self.temperature,
                             gather_distributed=self.gather_distributed)


class SCLPULoss(_LossModule):
    """SCL-PU baseline (puNCE section 5). See :func:`functional.scl_pu_loss`."""

    _config_keys = ("temperature", "gather_distributed")

    def __init__(self, temperature: float = 0.5, gather_distributed: bool = False):
        super().__init__()
        self.temperature = C.check_temperature(temperature)
        self.gather_distributed = gather_distributed

    def forward(self, features, source_ids, labels) -> torch.Tensor:
        """The loss of the inputs: :func:`shared_losses.functional.scl_pu_loss` with this module's settings."""
        return Fn.scl_pu_loss(features, source_ids, labels, self.temperature,
                              gather_distributed=self.gather_distributed)
