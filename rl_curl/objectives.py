"""The table of auxiliary objectives: one entry per ``--aux`` value, read by the configuration's
choices, checks and folder names, the agent's loss, ``--help``, the reports (labels and DCL Table 3's row
order) and ``scripts/curl_table3.py``'s objective specs. An objective is added here, in one place
(docs/adding_a_loss.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import torch

from shared_losses import (debiased_nce_from_logits, hard_negative_nce_from_logits, info_nce_from_logits,
                           log_floor_min_negative)
from shared_losses.training.registry import Entry, Registry

#: The hyper-parameters an objective may take, with the value that means "not used".
NEUTRAL = {"tau_plus": 0.0, "positives": 1, "beta": 1.0, "cpc_steps": 3, "log_floor": "min-negative",
           "aux_update_every": 1}


@dataclass(frozen=True)
class Objective(Entry):
    """One ``--aux`` value: a :class:`shared_losses.training.registry.Entry` (name, label, rank, help, uses) plus
    what the agent trains for it.

    ``loss``, called with keywords only: ``loss(pos=[B, M], neg=[B, N], tau_plus=, beta=, floor=, host_checks=)``
    on the bilinear logits (``floor``: each anchor's log floor or None; ``host_checks=False``: read no value on the
    host, the CUDA-graph update captures it). ``kind``: ``"keys"`` (anchors against augmented keys of the same
    frames, the loss above), ``"future"`` (CPC: predictions of the next frames' keys, ``CurlAgent.cpc_loss``) or
    ``"none"``. ``label_fields``: the settings written after ``label`` in a run's row, in this order."""

    loss: Callable[..., torch.Tensor] | None = None
    kind: str = "keys"
    label_fields: tuple[str, ...] = ()


OBJECTIVES: Registry[Objective] = Registry("--aux", (
    Objective("curl", "biased (CURL)", 0, "InfoNCE on the bilinear logits (CURL, the baseline)",
              ("positives", "aux_update_every"),
              loss=lambda pos, neg, tau_plus, beta, floor, host_checks: info_nce_from_logits(
                  pos, neg, host_checks=host_checks)),
    Objective("debiased", "debiased", 1, "the debiased loss, DCL (--tau-plus, --positives)",
              ("tau_plus", "positives", "log_floor", "aux_update_every"),
              loss=lambda pos, neg, tau_plus, beta, floor, host_checks: debiased_nce_from_logits(
                  pos, neg, tau_plus=tau_plus, log_floor=floor, host_checks=host_checks),
              label_fields=("tau_plus", "positives")),
    Objective("hard", "hard", 2, "the hard-negative debiased loss, HCL (--tau-plus, --positives, --beta)",
              ("tau_plus", "positives", "beta", "log_floor", "aux_update_every"),
              loss=lambda pos, neg, tau_plus, beta, floor, host_checks: hard_negative_nce_from_logits(
                  pos, neg, tau_plus=tau_plus, beta=beta, log_floor=floor, host_checks=host_checks),
              label_fields=("beta", "tau_plus", "positives")),
    Objective("cpc", "CPC", 3, "Contrastive Predictive Coding: a GRU over the actions predicts the keys of the next "
              "--cpc-steps observations from the present one (--tau-plus > 0: debiased negatives)",
              ("tau_plus", "cpc_steps", "log_floor", "aux_update_every"), kind="future", label_fields=("tau_plus",)),
    Objective("none", "pixel SAC (no aux)", 4, "no auxiliary loss: pixel SAC", kind="none"),
), neutral=NEUTRAL)
#: The configuration's --aux type: the registry's names, so a new entry is a new choice.
AuxName = OBJECTIVES.choices
#: what curl_table3.py --objectives takes: the name, then the used hyper-parameters in this order
SPEC_FIELDS = ("tau_plus", "positives", "beta")


def folder_name(aux: str, tau_plus: float = 0.0, positives: int = 1, beta: float = 1.0,
                cpc_steps: int = NEUTRAL["cpc_steps"], log_floor: str = NEUTRAL["log_floor"]) -> str:
    """The objective with the settings that tell its variants apart, as a folder name: curl, none,
    debiased-tau0.05, debiased-tau0.1-M2, hard-tau0.1-beta1, cpc-tau0-K5, debiased-tau0.1-nofloor ... (the default
    K and floor add nothing)."""
    uses = OBJECTIVES.get(aux).uses
    name = aux
    tau_plus, beta = tau_plus + 0.0, beta + 0.0  # -0 is 0: one folder (and one row) for one setting
    if "tau_plus" in uses:
        name += f"-tau{tau_plus:g}"
    if "positives" in uses and positives != 1:
        name += f"-M{positives}"
    if "beta" in uses:
        name += f"-beta{beta:g}"
    if "cpc_steps" in uses and cpc_steps != NEUTRAL["cpc_steps"]:
        name += f"-K{cpc_steps}"
    if "log_floor" in uses and log_floor != NEUTRAL["log_floor"]:
        name += "-nofloor"
    return name


#: How label() writes a setting after the objective's label (the entry's label_fields, in their order).
LABEL_FORMAT = {"beta": " β={:g}", "tau_plus": " τ⁺={:g}", "positives": ", M={}"}
FUSED_LABEL = ", fused update"  # what label() appends for a run of --update fused
FUSED_FOLDER = "-fused"  # what a fused run's folder name appends (rl_curl.train's default output_dir, curl_table3)


def label(cfg: Mapping) -> str:
    """The row of a run in the table (and its line in the plots). Runs that differ in the objective, its
    number of positives, the encoder's tanh or the update's schedule get different rows, never one averaged cell."""
    obj = OBJECTIVES.get(cfg["aux"])
    text = obj.label + "".join(LABEL_FORMAT[f].format(cfg[f] + 0) for f in obj.label_fields)  # + 0: -0 is 0
    if "positives" not in obj.label_fields and cfg.get("positives", 1) != 1:
        text += LABEL_FORMAT["positives"].format(cfg["positives"])
    if "cpc_steps" in obj.uses and cfg.get("cpc_steps", NEUTRAL["cpc_steps"]) != NEUTRAL["cpc_steps"]:
        text += f", K={cfg['cpc_steps']}"
    if "log_floor" in obj.uses and cfg.get("log_floor", NEUTRAL["log_floor"]) != NEUTRAL["log_floor"]:
        text += ", no floor"
    return (text + ("" if cfg.get("encoder_tanh", True) else ", no tanh")
            + (FUSED_LABEL if cfg.get("update", "official") == "fused" else ""))


def order(cfg: Mapping) -> tuple:
    """Where an objective's row goes in DCL Table 3's order: biased (CURL), then debiased (and hard) by M,
    then tau+ (then beta); pixel SAC last. A variant without the encoder tanh or with the fused update comes
    right after its objective."""
    rank = OBJECTIVES[cfg["aux"]].rank if cfg["aux"] in OBJECTIVES else len(OBJECTIVES)
    return (rank, cfg.get("positives", 1), cfg.get("beta", 1.0), cfg.get("tau_plus", 0.0),
            cfg.get("encoder_tanh", True) is False, cfg.get("update", "official") == "fused")


def spec_syntax() -> str:
    """``curl | none | debiased:TAU_PLUS:M | hard:TAU_PLUS:M:BETA`` (curl's M is left out: always 1 there)."""
    parts = []
    for obj in OBJECTIVES.values():
        fields = [f for f in SPEC_FIELDS if f in obj.uses and "tau_plus" in obj.uses]
        parts.append(":".join([obj.name] + [{"tau_plus": "TAU_PLUS", "positives": "M", "beta": "BETA"}[f]
                                            for f in fields]))
    return " | ".join(parts)


def parse_spec(text: str) -> dict:
    """``debiased:0.05:1`` -> {"aux": "debiased", "tau_plus": 0.05, "positives": 1}; each value checked."""
    name, *values = text.split(":")
    obj = OBJECTIVES[name] if name in OBJECTIVES else None
    fields = [f for f in SPEC_FIELDS if obj is not None and f in obj.uses and "tau_plus" in obj.uses]
    if obj is None or len(values) != len(fields):
        raise ValueError(f"objective {text!r} is not one of {spec_syntax()}")
    out: dict = {"aux": name}
    checks = {"tau_plus": ("TAU_PLUS (must be in [0, 1))", float, lambda v: 0 <= v < 1),
              "positives": ("M (must be 1 or 2)", int, lambda v: v in (1, 2)),
              "beta": ("BETA (must be >= 0)", float, lambda v: v >= 0)}
    for field, value in zip(fields, values):
        what, cast, ok = checks[field]
        try:
            v = cast(value)
        except ValueError:
            v = None
        if v is None or not ok(v):
            raise ValueError(f"objective {text!r}: {what} = {value!r} is not valid")
        out[field] = v
    return out


def cli_flags(spec: Mapping) -> list[str]:
    """The rl_curl.train options of a parsed spec."""
    flags = ["--aux", spec["aux"]]
    for field in SPEC_FIELDS:
        if field in spec:
            value = spec[field]
            flags += [f"--{field.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
    return flags


def auxiliary_loss(pos: torch.Tensor, neg: torch.Tensor, aux: str, tau_plus: float = 0.0, beta: float = 1.0,
                   log_floor: str = "min-negative", host_checks: bool = True) -> torch.Tensor:
    """The auxiliary objective ``aux`` on bilinear logits; the floor is each anchor's smallest negative logit.
    ``host_checks=False``: no value is read on the host (the losses' ``host_checks``; a bad value gives a non-finite
    loss, which the agent records on the device)."""
    obj = OBJECTIVES.get(aux)
    if obj.loss is None:
        raise ValueError(f"--aux {aux} has no auxiliary loss on the bilinear logits")
    floor = log_floor_min_negative(neg) if log_floor == "min-negative" else None
    return obj.loss(pos=pos, neg=neg, tau_plus=tau_plus, beta=beta, floor=floor, host_checks=host_checks)
