"""Input checks for the public loss functions: each raises a ValueError that names the problem."""

from __future__ import annotations

import math
import numbers

import torch

REDUCTIONS = ("mean", "sum", "none")


def check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")


def check_similarity(similarity: str) -> str:
    if similarity not in ("cosine", "dot"):
        raise ValueError(f"similarity must be 'cosine' or 'dot', got {similarity!r}")
    return similarity


def check_log_floor_option(log_floor):
    """A module's ``log_floor`` setting, checked when the module is made: None, ``"auto"``, a number or a tensor
    (its shape and values are checked against each batch)."""
    if isinstance(log_floor, str) and log_floor != "auto":
        raise ValueError(f"log_floor must be None, a float, a tensor or 'auto', got {log_floor!r}")
    if log_floor is not None and not isinstance(log_floor, (str, numbers.Real, torch.Tensor)):
        raise ValueError(f"log_floor must be None, a float, a tensor or 'auto', got {type(log_floor).__name__}")
    if isinstance(log_floor, numbers.Real):
        check_log_floor(float(log_floor), 1, torch.device("cpu"))
    return log_floor


def _fixed_number(name: str, value, meaning: str):
    """A scalar hyperparameter as a plain number: a tensor that requires grad (float() would detach it silently), a
    tensor of several numbers, a string or a bool are refused, naming ``name``."""
    if isinstance(value, torch.Tensor):
        if value.requires_grad:
            raise ValueError(f"{name} is a tensor that requires grad: these losses take a fixed number ({meaning}); "
                             f"pass {name}.item() or a detached tensor")
        if value.numel() != 1:
            raise ValueError(f"{name} must be one number, got a tensor of shape {tuple(value.shape)}")
    elif not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise ValueError(f"{name} must be a number, got {type(value).__name__}")
    return float(value)


def check_tau_plus(tau_plus: float) -> float:
    tau_plus = _fixed_number("tau_plus", tau_plus, "the class prior tau+")
    if math.isnan(tau_plus):
        raise ValueError("tau_plus (the class prior tau+) must be in [0, 1), got nan")
    if tau_plus < 0.0:
        raise ValueError(f"tau_plus (the class prior tau+) must be in [0, 1), got {tau_plus}: a prior is a "
                         "probability, never negative (0 gives InfoNCE)")
    if tau_plus >= 1.0:
        raise ValueError(f"tau_plus (the class prior tau+) must be in [0, 1), got {tau_plus}; "
                         "tau+ >= 1 would leave no negatives (tau- = 1 - tau+ <= 0)")
    return tau_plus


def check_prior(prior: float) -> float:
    if isinstance(prior, torch.Tensor):
        if prior.requires_grad:  # float() would detach it: a learned prior that never learns
            raise ValueError("prior is a tensor that requires grad: these losses take a fixed number (pi = p(y=+1 | "
                             "unlabeled)); pass prior.item() or a detached tensor")
        if prior.numel() != 1:
            raise ValueError(f"prior must be one number, got a tensor of shape {tuple(prior.shape)}")
    elif isinstance(prior, (bool, str, bytes)) or not hasattr(prior, "__float__"):  # numbers, numpy scalars pass
        raise ValueError(f"prior must be a number, got {type(prior).__name__}")
    elif getattr(prior, "ndim", 0) != 0:  # a NumPy array: float() takes 0-d ones only (a raw TypeError otherwise)
        raise ValueError(f"prior must be one number, got an array of shape {tuple(prior.shape)}"
                         + (" (pass prior.item())" if getattr(prior, "size", 0) == 1 else ""))
    prior = float(prior)
    if not 0.0 <= prior <= 1.0:
        raise ValueError(f"prior (pi = p(y=+1 | unlabeled)) must be in [0, 1], got {prior}")
    return prior


def check_label_pull(label_pull: float) -> float:
    label_pull = _fixed_number("label_pull", label_pull, "the weight of an unlabeled anchor's pull")
    if not 0.0 <= label_pull <= 1.0:
        raise ValueError(f"label_pull (the weight of an unlabeled anchor's pull towards the labeled views) must be in "
                         f"[0, 1], got {label_pull}")
    return label_pull


def check_temperature(temperature: float) -> float:
    if isinstance(temperature, torch.Tensor):
        if temperature.requires_grad:  # float() would detach it: a learned temperature that never learns
            raise ValueError("temperature is a tensor that requires grad: these losses take a fixed number; for a "
                             "learned temperature (CLIP's), divide your scores by it and pass them to the "
                             "*_from_logits functions, whose gradient reaches it")
        if temperature.numel() != 1:
            raise ValueError(f"temperature must be one number, got a tensor of shape {tuple(temperature.shape)}")
    elif not isinstance(temperature, numbers.Real) or isinstance(temperature, bool):
        raise ValueError(f"temperature must be a number, got {type(temperature).__name__}")
    temperature = float(temperature)
    if not 0.0 < temperature < float("inf"):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    return temperature


def check_beta(beta: float) -> float:
    beta = _fixed_number("beta", beta, "the hard-negative concentration")
    if not 0.0 <= beta < float("inf"):
        raise ValueError(f"beta (hard-negative concentration) must be finite and >= 0, got {beta}")
    return beta


def check_float_tensor(name: str, t: torch.Tensor, dims: tuple[int, ...], nan: bool = True) -> None:
    """Type, rank, dtype and non-empty checks; with ``nan`` also a NaN / inf check (one device sync)."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() not in dims:
        want = " or ".join(f"{d}-D" for d in dims)
        raise ValueError(f"{name} must be {want}, got shape {tuple(t.shape)}")
    if not t.is_floating_point():
        raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    if t.shape[0] == 0:
        raise ValueError(f"{name} is an empty batch (shape {tuple(t.shape)})")
    if nan and not torch.isfinite(t).all():
        raise ValueError(f"{name} contains NaN or inf")


def check_same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items() if isinstance(t, torch.Tensor)}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{k} on {v}" for k, v in devices.items())
        raise ValueError(f"tensors must be on one device, got {listing}")


def check_int_vector(name: str, t: torch.Tensor, n: int) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dim() != 1 or t.shape[0] != n:
        raise ValueError(f"{name} must have shape [{n}] (one entry per feature row), got {tuple(t.shape)}")
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor, got {t.dtype}")


def check_log_floor(log_floor, batch: int, device: torch.device, values: bool = False) -> None:
    """Type, shape and device of a floor; with ``values`` also NaN / +inf in a tensor (one device sync; the logit-level
    functions check it with their other flags)."""
    if log_floor is None:
        return
    if isinstance(log_floor, numbers.Real) and not isinstance(log_floor, bool):  # numpy's floats too
        log_floor = float(log_floor)
        if math.isnan(log_floor) or log_floor == float("inf"):
            raise ValueError(f"log_floor must be a number or -inf, got {log_floor}")
        return
    if not isinstance(log_floor, torch.Tensor):
        raise ValueError(f"log_floor must be None, a float or a [B] tensor, got {type(log_floor).__name__}")
    if log_floor.dim() > 1 or (log_floor.dim() == 1 and log_floor.shape[0] != batch):
        raise ValueError(f"log_floor tensor must have shape [{batch}] or be a scalar, got {tuple(log_floor.shape)}")
    if log_floor.device != device:
        raise ValueError(f"log_floor is on {log_floor.device} but the logits are on {device}")
    if values and bool((log_floor.isnan() | (log_floor == float("inf"))).any()):
        raise ValueError("log_floor contains NaN or +inf (a floor is a finite number or -inf, no floor)")
