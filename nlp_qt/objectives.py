"""The one place where the quick-thought training loss is chosen (docs/equations.md section 8).

Scores: ``S[i, c] = f(s_i)^T g(s_c) / temperature`` for anchor i against every candidate c of the
(possibly gathered) batch of consecutive sentences. Positives of anchor i: the previous and next
sentence (context size 1), only when they are in the batch *and in the same document*.

* ``qt``: QT's objective (S2V): softmax cross-entropy over the candidates with soft targets 0.5 /
  0.5 on the two neighbours (1.0 on a lone neighbour). Written here with ``F.log_softmax``,
  independently of ``shared_losses``. Deviation:
  the sentence itself is excluded (``-inf``); ``self_score="zero"`` reproduces S2V exactly (the
  diagonal is set to 0 and stays in the denominator).
* ``debiased``: ``shared_losses.debiased_nce_from_logits`` with M = 2 positives and per-turn
  negatives ``[B, 2, N]``: for turn m the negatives are all other non-self candidates, the other
  neighbour included, so at ``tau_plus = 0`` it equals ``qt`` exactly (tested). A missing
  neighbour is ``-inf`` (ragged M).
* ``hard``: ``shared_losses.hard_negative_nce_from_logits`` with ``beta`` (same layout).

Floor: QT's dot products are unbounded, so the paper's ``e^{-1/t}`` cosine bound does not apply.
``log_floor="min_negative"`` (default) clamps each anchor's negative estimate g at its smallest
observed ``e^{q}`` (``shared_losses.log_floor_min_negative``, detached); ``"none"`` clamps at 0.

Anchors without any neighbour in the batch (single-sentence documents, or a one-sentence run at a
batch edge) are dropped from the loss; the loss is the mean over the remaining anchors.

* ``cpc``: Contrastive Predictive Coding (van den Oord et al. 2018, section 3.3) on the model's CPC heads
  (``heads="cpc"``): the batch's consecutive sentences are cut into sequences (at every document end and every
  ``cpc_length`` sentences), one encoder f gives each sentence's latent, a GRU over a sequence's latents the
  context ``c_t``, and ``shared_losses.cpc_nce`` scores the predictions ``W_k c_t`` of the next ``cpc_steps``
  sentences against every latent of the batch (with ``tau_plus``: DCL's debiased negatives; floor as above).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from shared_losses import debiased_nce_from_logits, hard_negative_nce_from_logits, log_floor_min_negative
from shared_losses.training.registry import Entry, Registry

#: The hyper-parameters an objective may take, with the value that means "not used".
NEUTRAL = {"tau_plus": 0.0, "beta": 1.0, "self_score": "exclude", "cpc_steps": 3, "cpc_length": 10,
           "log_floor": "min_negative"}
NEG_INF = float("-inf")


@dataclass(frozen=True)
class Objective(Entry):
    """One ``--objective``: a :class:`shared_losses.training.registry.Entry` (name, label, rank in DCL Table 2, help,
    uses) plus its loss and the model it trains.

    ``loss``, called with keywords only: ``loss(scores=[b, B], neighbours=, anchor_pos=[b], tau_plus=, beta=,
    log_floor=, self_score=)``, compute_loss's last step. ``heads``: the model it trains, ``qt`` (encoders f and g,
    the scores above) or ``cpc`` (f and CPC's heads; its loss is :func:`sequence_loss`)."""

    loss: Callable[..., torch.Tensor] | None = None
    heads: str = "qt"


def _qt(scores, neighbours, anchor_pos, tau_plus, beta, log_floor, self_score):
    return qt_loss(scores, neighbours, anchor_pos, self_score)


def _turns(scores, nb, anchor_pos, log_floor):
    """The debiased estimators' inputs: per-turn logits of the anchors with a neighbour, and the floor."""
    keep = nb.has_prev | nb.has_next
    if not keep.any():
        raise ValueError("no sentence in this batch has a neighbour in the same document")
    pos, neg = turn_logits(scores, nb, anchor_pos)
    pos, neg = pos[keep], neg[keep]
    return pos, neg, (log_floor_min_negative(neg) if log_floor == "min_negative" else None)


def _debiased(scores, neighbours, anchor_pos, tau_plus, beta, log_floor, self_score):
    pos, neg, floor = _turns(scores, neighbours, anchor_pos, log_floor)
    return debiased_nce_from_logits(pos, neg, tau_plus=tau_plus, log_floor=floor)


def _hard(scores, neighbours, anchor_pos, tau_plus, beta, log_floor, self_score):
    pos, neg, floor = _turns(scores, neighbours, anchor_pos, log_floor)
    return hard_negative_nce_from_logits(pos, neg, tau_plus=tau_plus, beta=beta, log_floor=floor)


#: Every objective of nlp_qt, in Table 2's order: the one place an objective is added (docs/adding_a_loss.md).
OBJECTIVES: Registry[Objective] = Registry("--objective", (
    Objective("qt", "biased (QT)", 0, "QT's objective (S2V): softmax over the candidates, soft targets on both "
              "neighbours", ("self_score",), loss=_qt),
    Objective("debiased", "debiased", 1, "the debiased loss, DCL, M = 2 (--tau-plus)", ("tau_plus", "log_floor"),
              loss=_debiased),
    Objective("hard", "hard", 2, "the hard-negative debiased loss, HCL (--tau-plus, --beta)", ("tau_plus", "beta",
              "log_floor"), loss=_hard),
    Objective("cpc", "CPC", 3, "Contrastive Predictive Coding: a GRU over each run of sentences predicts the next "
              "--cpc-steps sentences' vectors (--tau-plus > 0: debiased negatives)",
              ("tau_plus", "cpc_steps", "cpc_length", "log_floor"), heads="cpc"),
), neutral=NEUTRAL)
#: The configuration's --objective type: the registry's names, so a new entry is a new choice.
ObjectiveName = OBJECTIVES.choices
LOG_FLOORS = ("min_negative", "none")


def folder_name(objective: str, tau_plus: float = 0.0, beta: float = 1.0) -> str:
    """The objective with the settings that tell its variants apart, as a folder name of the Table 2 sweep:
    qt, debiased_0.01, hard_0.01_b1."""
    uses = OBJECTIVES.get(objective).uses
    return objective + (f"_{tau_plus:g}" if "tau_plus" in uses else "") + (f"_b{beta:g}" if "beta" in uses else "")


def label(objective: str, tau_plus: float = 0.0, beta: float = 1.0) -> str:
    """A run's row in the tables: biased (QT), debiased τ⁺=0.01, hard τ⁺=0.01 β=1."""
    obj = OBJECTIVES.get(objective)
    return obj.label + (f" τ⁺={tau_plus:g}" if "tau_plus" in obj.uses else "") + (
        f" β={beta:g}" if "beta" in obj.uses else "")


@dataclass
class Neighbours:
    """For each anchor: candidate index of its previous / next sentence, and whether present."""

    prev: torch.Tensor  # [b] long (clamped into range when absent)
    next: torch.Tensor  # [b]
    has_prev: torch.Tensor  # [b] bool
    has_next: torch.Tensor  # [b] bool


def neighbours(doc_ids: torch.Tensor, anchor_pos: torch.Tensor) -> Neighbours:
    """Neighbours of the anchors at positions ``anchor_pos`` of a contiguous candidate run with
    document ids ``doc_ids`` ``[B]``: ``pos - 1`` and ``pos + 1`` if inside the run and in the
    same document."""
    B = doc_ids.shape[0]
    prev = anchor_pos - 1
    nxt = anchor_pos + 1
    has_prev = prev >= 0
    has_next = nxt < B
    prev_c, next_c = prev.clamp(0, B - 1), nxt.clamp(0, B - 1)
    own = doc_ids[anchor_pos]
    has_prev = has_prev & (doc_ids[prev_c] == own)
    has_next = has_next & (doc_ids[next_c] == own)
    return Neighbours(prev_c, next_c, has_prev, has_next)


def score_matrix(u: torch.Tensor, v: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """``f(S) g(C)^T / temperature`` in float32 or wider."""
    if u.dim() != 2 or v.dim() != 2 or u.shape[1] != v.shape[1]:
        raise ValueError(f"u and v must be [b, d] and [B, d], got {tuple(u.shape)} and {tuple(v.shape)}")
    if not 0 < temperature < float("inf"):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature}")
    wide = torch.promote_types(u.dtype, torch.float32)
    return (u.to(wide) @ v.to(wide).T) / temperature


def qt_loss(scores: torch.Tensor, nb: Neighbours, anchor_pos: torch.Tensor,
            self_score: str = "exclude") -> torch.Tensor:
    """S2V's soft-target softmax cross-entropy, mean over anchors with >= 1 neighbour."""
    b, B = scores.shape
    rows = torch.arange(b, device=scores.device)
    if self_score == "exclude":
        scores = scores.index_put((rows, anchor_pos), torch.tensor(NEG_INF, dtype=scores.dtype, device=scores.device))
    elif self_score == "zero":
        scores = scores.index_put((rows, anchor_pos), torch.tensor(0.0, dtype=scores.dtype, device=scores.device))
    else:
        raise ValueError(f"self_score must be 'exclude' or 'zero', got {self_score!r}")
    keep = nb.has_prev | nb.has_next
    targets = torch.zeros_like(scores)
    w_prev = nb.has_prev.to(scores.dtype)
    w_next = nb.has_next.to(scores.dtype)
    total = (w_prev + w_next).clamp_min(1.0)
    targets[rows, nb.prev] += w_prev / total
    targets[rows, nb.next] += w_next / total
    if not keep.any():
        raise ValueError("no sentence in this batch has a neighbour in the same document")
    logp = F.log_softmax(scores[keep], dim=-1)
    t = targets[keep]
    # 0 * -inf would be nan: only the target entries contribute
    return -(torch.where(t > 0, t * logp, torch.zeros_like(logp))).sum(-1).mean()


def turn_logits(scores: torch.Tensor, nb: Neighbours, anchor_pos: torch.Tensor):
    """``pos [b, 2]`` (prev, next; -inf if absent) and per-turn ``neg [b, 2, B]``: every candidate
    except the anchor itself and the turn's own positive."""
    b, B = scores.shape
    rows = torch.arange(b, device=scores.device)
    ninf = torch.tensor(NEG_INF, dtype=scores.dtype, device=scores.device)
    pos = torch.stack([scores[rows, nb.prev], scores[rows, nb.next]], dim=1)
    pos = torch.where(torch.stack([nb.has_prev, nb.has_next], dim=1), pos, ninf)
    base = scores.index_put((rows, anchor_pos), ninf)
    neg_prev = base.index_put((rows, nb.prev), torch.where(nb.has_prev, ninf, base[rows, nb.prev]))
    neg_next = base.index_put((rows, nb.next), torch.where(nb.has_next, ninf, base[rows, nb.next]))
    return pos, torch.stack([neg_prev, neg_next], dim=1)


def compute_loss(
    u: torch.Tensor,
    v: torch.Tensor,
    doc_ids: torch.Tensor,
    anchor_pos: torch.Tensor | None = None,
    objective: str = "qt",
    tau_plus: float = 0.0,
    beta: float = 1.0,
    temperature: float = 1.0,
    log_floor: str = "min_negative",
    self_score: str = "exclude",
) -> torch.Tensor:
    """Loss of anchors ``u = f(S_local)`` ``[b, d]`` against candidates ``v = g(S_all)`` ``[B, d]``.

    ``doc_ids`` ``[B]``: document of each candidate (contiguous corpus order). ``anchor_pos``
    ``[b]``: the anchors' positions among the candidates (default ``arange(b)``, i.e. the same
    sentences; with candidates gathered across processes, ``rank * b + arange(b)``). ``objective``: a name of
    :data:`OBJECTIVES` whose heads are ``qt`` (qt, debiased, hard); ``tau_plus``, ``beta``: its settings (as
    ``--tau-plus``, ``--beta``); ``temperature`` divides the scores; ``log_floor``: ``"min_negative"`` or
    ``"none"`` (:data:`LOG_FLOORS`, the debiased estimate's floor); ``self_score``: ``"exclude"`` or ``"zero"``
    (qt only: the sentence's own score kept at 0 in the softmax, as S2V).
    """
    obj = OBJECTIVES.get(objective)  # an unknown objective is refused
    if obj.heads != "qt":
        raise ValueError(f"objective {objective} trains the model's {obj.heads} heads on sequences of sentences: its "
                         "loss is sequence_loss, not this one over a score matrix")
    if log_floor not in LOG_FLOORS:
        raise ValueError(f"log_floor must be 'min_negative' or 'none', got {log_floor!r}")
    if self_score != NEUTRAL["self_score"] and "self_score" not in obj.uses:
        users = " or ".join(repr(o.name) for o in OBJECTIVES.values() if "self_score" in o.uses)
        raise ValueError(
            f"self_score='zero' (S2V's diagonal kept in the denominator) is only defined for objective {users}: "
            "the debiased estimator needs the sentence itself out of the negatives"
        )
    doc_ids = torch.as_tensor(doc_ids, device=u.device)
    if doc_ids.shape != (v.shape[0],):
        raise ValueError(f"doc_ids must have one entry per candidate ({v.shape[0]}), got {tuple(doc_ids.shape)}")
    if anchor_pos is None:
        if u.shape[0] != v.shape[0]:
            raise ValueError("anchor_pos is needed when there are more candidates than anchors")
        anchor_pos = torch.arange(u.shape[0], device=u.device)
    scores = score_matrix(u, v, temperature)
    nb = neighbours(doc_ids, anchor_pos)
    return obj.loss(scores=scores, neighbours=nb, anchor_pos=anchor_pos, tau_plus=tau_plus, beta=beta,
                    log_floor=log_floor, self_score=self_score)


# --- CPC: sequences of consecutive sentences ---------------------------------------------------------------------


@dataclass
class Sequences:
    """Where each sentence of a contiguous run sits when the run is cut into sequences: ``seq[i]``, ``pos[i]``;
    ``count`` sequences of at most ``length`` positions, and ``with_future`` the sentences that have a next one in
    their sequence (the loss's anchors at k = 1)."""

    seq: torch.Tensor  # [b] long
    pos: torch.Tensor  # [b] long
    count: int
    length: int
    with_future: int


def sequences(doc_ids: torch.Tensor, length: int) -> Sequences:
    """Cut a contiguous run of sentences with document ids ``doc_ids`` ``[b]`` into sequences: a new one at every
    document change and after every ``length`` sentences of a document."""
    if length < 2:
        raise ValueError(f"cpc_length must be >= 2 (a sequence needs a sentence to predict), got {length}")
    b = doc_ids.shape[0]
    dev = doc_ids.device
    idx = torch.arange(b, device=dev)
    doc_start = torch.ones(b, dtype=torch.bool, device=dev)
    doc_start[1:] = doc_ids[1:] != doc_ids[:-1]
    run = torch.cumsum(doc_start.long(), 0) - 1
    first_of_run = idx[doc_start]
    in_run = idx - first_of_run[run]
    start = doc_start | (in_run % length == 0)
    seq = torch.cumsum(start.long(), 0) - 1
    pos = idx - idx[start][seq]
    count = int(seq[-1].item()) + 1 if b else 0
    has_next = torch.zeros(b, dtype=torch.bool, device=dev)
    has_next[:-1] = seq[1:] == seq[:-1]
    return Sequences(seq, pos, count, int(pos.max().item()) + 1 if b else 0, int(has_next.sum().item()))


def sequence_loss(heads, u: torch.Tensor, doc_ids: torch.Tensor, length: int, tau_plus: float = 0.0,
                  temperature: float = 1.0, log_floor: str = "min_negative") -> tuple[torch.Tensor, int]:
    """CPC's loss of the sentence vectors ``u`` ``[b, d]`` of a contiguous run (document ids ``doc_ids``):
    ``(loss, anchors)``; with no sentence followed by another of its sequence, a zero loss (that keeps the graph)
    and 0 anchors."""
    from shared_losses import cpc_nce

    if log_floor not in LOG_FLOORS:
        raise ValueError(f"log_floor must be 'min_negative' or 'none', got {log_floor!r}")
    doc_ids = torch.as_tensor(doc_ids, device=u.device)
    cut = sequences(doc_ids, length)
    if cut.with_future == 0:
        return u.sum() * 0.0 + sum(p.sum() for p in heads.parameters()) * 0.0, 0
    latents = u.new_zeros(cut.count, cut.length, u.shape[1]).index_put((cut.seq, cut.pos), u)
    mask = torch.zeros(cut.count, cut.length, dtype=torch.bool, device=u.device)
    mask[cut.seq, cut.pos] = True
    # a sequence's positions are a prefix: the GRU's context at a present position never reads the padding
    context, _ = heads.context(latents)
    loss = cpc_nce(latents, heads.loss.predict(context), mask, temperature=temperature, tau_plus=tau_plus,
                   log_floor="auto" if log_floor == "min_negative" else None, similarity="dot")
    return loss, cut.with_future
