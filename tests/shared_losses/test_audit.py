"""Independent audit of docs/equations.md sections 2-6: values *and gradients* against float64 loop transcriptions.

The transcriptions below are written from the papers (docs/equations.md) with torch float64 *scalar* ops in
Python loops (so autograd can differentiate them), sharing no code with ``shared_losses`` nor with
``reference.py``. Inputs are built so that the distinguishing terms matter: the floor binding and
not binding (both with a positive and with a negative estimator), M = 2 distinct positives, ragged
``-inf`` entries, per-turn negatives, unequal views per source, prior at 0 and 1, labeled negatives.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import shared_losses as S
import shared_losses.functional as SF

INF = math.inf
D64 = torch.float64


# ----------------------------------------------------------------------------------------------
# Transcriptions (torch scalars, loops)
# ----------------------------------------------------------------------------------------------


def t_debiased(pos, neg, tau_plus=0.0, floor=None, beta=0.0):
    """DCL eq. (7)-(8) + HCL reweighting (docs/equations.md sections 3-4), one anchor and one turn at a time.

    g_im = max( ((1/N) sum_n w_n e^{q_n} - tau+ (1/M) sum_m' e^{p_m'}) / tau-, e^{floor_i} or 0 ),
    w_n = e^{beta q_n} / ((1/N) sum_n' e^{beta q_n'}),  l_i = mean_m -log(e^{p_m} / (e^{p_m} + N g_im)).
    ``pos`` [B, M], ``neg`` [B, N] (shared by the turns) or [B, M, N]; -inf = absent.
    ``floor`` None, a float, or a list / 1-D tensor (constant: detached)."""
    B, M = pos.shape
    out = []
    for i in range(B):
        present = [pos[i, m] for m in range(M) if float(pos[i, m].detach()) != -INF]
        pos_mean = sum(torch.exp(p) for p in present) / len(present)
        turns = []
        for m in range(M):
            p = pos[i, m]
            if float(p.detach()) == -INF:
                continue
            row = neg[i, m] if neg.dim() == 3 else neg[i]
            qs = [row[n] for n in range(row.shape[0]) if float(row[n].detach()) != -INF]
            N = len(qs)
            if beta:
                ws = [torch.exp(beta * q) for q in qs]
                w_mean = sum(ws) / N
                neg_mean = sum((w / w_mean) * torch.exp(q) for w, q in zip(ws, qs)) / N
            else:
                neg_mean = sum(torch.exp(q) for q in qs) / N
            g = (neg_mean - tau_plus * pos_mean) / (1.0 - tau_plus)
            if floor is None:
                lower = 0.0
            elif isinstance(floor, (int, float)):
                lower = math.exp(floor)
            else:
                lower = math.exp(float(floor[i]))
            if not float(g.detach()) > lower:
                g = torch.tensor(lower, dtype=D64)
            e_p = torch.exp(p)
            turns.append(-torch.log(e_p / (e_p + N * g)))
        out.append(sum(turns) / len(turns))
    return torch.stack(out)


def raw_estimator(pos, neg, tau_plus):
    """The un-floored g of each (anchor, turn) as Python floats (shared negatives, M positives)."""
    out = []
    for i in range(pos.shape[0]):
        pm = sum(math.exp(float(p)) for p in pos[i]) / pos.shape[1]
        qs = [float(q) for q in neg[i] if float(q) != -INF]
        out.append((sum(math.exp(q) for q in qs) / len(qs) - tau_plus * pm) / (1 - tau_plus))
    return out


def t_sim(a, b, similarity):
    dot = (a * b).sum()
    if similarity == "dot":
        return dot
    return dot / (torch.sqrt((a * a).sum()) * torch.sqrt((b * b).sum()))


def t_multiview(X, t, tau_plus, floor, beta=0.0, similarity="cosine"):
    """SimCLR layout (docs/equations.md sections 2-3): anchor (v, b), view-major row v*B + b; positives = the other
    views of sample b (M = V-1 turns); negatives = every view of every other sample (N = V(B-1)).
    ``floor``: None, a float, or "min" (each anchor's smallest negative score, detached)."""
    B, V, _ = X.shape
    P, Q = [], []
    for v in range(V):
        for b in range(B):
            a = X[b, v]
            P.append(torch.stack([t_sim(a, X[b, w], similarity) / t for w in range(V) if w != v]))
            Q.append(torch.stack([t_sim(a, X[c, w], similarity) / t for w in range(V) for c in range(B) if c != b]))
    pos, neg = torch.stack(P), torch.stack(Q)
    if floor == "min":
        floor = [float(neg[i].min().detach()) for i in range(neg.shape[0])]
    return t_debiased(pos, neg, tau_plus, floor, beta)


def t_logp_matrix(X, t):
    """log P_ij = s_ij - log sum_{k != i} e^{s_ik}, s = cos / t (list of lists of scalars)."""
    n = X.shape[0]
    s = [[t_sim(X[i], X[j], "cosine") / t for j in range(n)] for i in range(n)]
    out = []
    for i in range(n):
        den = torch.log(sum(torch.exp(s[i][k]) for k in range(n) if k != i))
        out.append([s[i][j] - den for j in range(n)])
    return out


def t_punce(X, src, labels, prior, t):
    """puNCE eq. (7)-(10): labeled anchor -> SupCon over Q(i) (same label, labeled, != i);
    unlabeled anchor -> -[pi/|P(i)| sum_{P(i)} + (1-pi)/|N(i)| sum_{N(i)}] with
    P(i) = P u A(i), N(i) = N_l u A(i), A(i) = the other views of i's source (= {a(i)} with two)."""
    lp = t_logp_matrix(X, t)
    n = X.shape[0]
    Pset = {j for j in range(n) if labels[j] == 1}
    Nset = {j for j in range(n) if labels[j] == -1}
    out = []
    for i in range(n):
        if labels[i] != 0:
            Qi = [j for j in range(n) if j != i and labels[j] == labels[i]]
            out.append(-sum(lp[i][j] for j in Qi) / len(Qi))
        else:
            A = {j for j in range(n) if j != i and src[j] == src[i]}
            Pi, Ni = sorted(Pset | A), sorted(Nset | A)
            out.append(-(prior / len(Pi) * sum(lp[i][j] for j in Pi)
                         + (1 - prior) / len(Ni) * sum(lp[i][j] for j in Ni)))
    return torch.stack(out)


def t_punce_pu_eq8(X, src, labels, prior, t):
    """Eq. (7)-(8) literally (two views per source, labels in {1, 0}): |P|-1 and |P|+1."""
    lp = t_logp_matrix(X, t)
    n = X.shape[0]
    P = [j for j in range(n) if labels[j] == 1]
    out = []
    for i in range(n):
        if labels[i] == 1:
            out.append(-sum(lp[i][j] for j in P if j != i) / (len(P) - 1))
        else:
            (a,) = [j for j in range(n) if j != i and src[j] == src[i]]
            out.append(-(prior / (len(P) + 1) * sum(lp[i][j] for j in P + [a]) + (1 - prior) * lp[i][a]))
    return torch.stack(out)


def t_supcon(X, labels, t):
    lp = t_logp_matrix(X, t)
    n = X.shape[0]
    out = []
    for i in range(n):
        Qi = [j for j in range(n) if j != i and labels[j] == labels[i]]
        out.append(-sum(lp[i][j] for j in Qi) / len(Qi))
    return torch.stack(out)


def t_scl_pu(X, src, labels, t):
    """SupCon on labeled anchors, InfoNCE (positives = other views of the source) on unlabeled."""
    lp = t_logp_matrix(X, t)
    n = X.shape[0]
    out = []
    for i in range(n):
        if labels[i] != 0:
            Qi = [j for j in range(n) if j != i and labels[j] == labels[i]]
        else:
            Qi = [j for j in range(n) if j != i and src[j] == src[i]]
        out.append(-sum(lp[i][j] for j in Qi) / len(Qi))
    return torch.stack(out)


# ----------------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------------


def _leaf(*shape, seed, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g, dtype=D64) * scale).requires_grad_(True)


def _value_and_grads(fn, inputs):
    """Per-anchor values, and the gradients of their sum w.r.t. ``inputs``."""
    for x in inputs:
        x.grad = None
    out = fn()
    grads = torch.autograd.grad(out.sum(), inputs, allow_unused=True)
    return out.detach(), [torch.zeros_like(x) if g is None else g for x, g in zip(inputs, grads)]


def _assert_same(impl, ref, inputs, rtol=1e-10, atol=1e-12):
    v1, g1 = _value_and_grads(impl, inputs)
    v2, g2 = _value_and_grads(ref, inputs)
    assert torch.allclose(v1, v2, rtol=rtol, atol=atol), (v1, v2)
    for a, b in zip(g1, g2):
        assert torch.allclose(a, b, rtol=1e-8, atol=1e-11), (a - b).abs().max()


def _regime_logits(M):
    """Anchors in the three regimes of g at tau+ = 0.3, log_floor = -3:
    0: estimator > floor (floor not binding); 1: estimator < 0 (floor binds, log-space r >= 0);
    2: 0 < estimator < e^-3 (floor binds with a positive estimator); 3-5: random."""
    pos_rows = [[0.5, -1.0], [3.0, 2.5], [-5.0, -4.5]][:3]
    neg_rows = [[0.1, -0.4, 0.3, 0.0, -0.2], [0.0, 0.0, 0.1, -0.1, 0.0], [-4.0, -4.2, -3.9, -4.1, -4.0]]
    g = torch.Generator().manual_seed(21)
    pos = torch.cat([torch.tensor(pos_rows, dtype=D64)[:, :M], torch.randn(3, M, generator=g, dtype=D64)])
    neg = torch.cat([torch.tensor(neg_rows, dtype=D64), torch.randn(3, 5, generator=g, dtype=D64) * 1.5])
    return pos.requires_grad_(True), neg.requires_grad_(True)


# ----------------------------------------------------------------------------------------------
# Sections 2-3.1 at the logit level
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("M", [1, 2])
@pytest.mark.parametrize("beta", [0.0, 1.5])
def test_audit_debiased_floor_regimes_values_and_grads(M, beta):
    pos, neg = _regime_logits(M)
    tau_plus, floor = 0.3, -3.0
    if beta == 0.0 and M == 2:  # the three regimes really occur (with the M-positive mean)
        g = raw_estimator(pos.detach(), neg.detach(), tau_plus)
        assert g[0] > math.exp(floor) and g[1] < 0 and 0 < g[2] < math.exp(floor)
    impl = (lambda: S.debiased_nce_from_logits(pos, neg, tau_plus, floor, reduction="none")) if not beta else (
        lambda: S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, floor, reduction="none"))
    _assert_same(impl, lambda: t_debiased(pos, neg, tau_plus, floor, beta), [pos, neg])
    # a [B] tensor floor, binding for some anchors only
    tfloor = torch.tensor([-3.0, 1.0, -6.0, 0.5, -2.0, 2.0], dtype=D64)
    impl_t = (lambda: S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, tfloor, reduction="none"))
    _assert_same(impl_t, lambda: t_debiased(pos, neg, tau_plus, tfloor.tolist(), beta), [pos, neg])
    # no floor: g clamped at 0 where the estimator is negative (anchor 1 -> loss 0, gradient 0)
    impl_n = lambda: S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, None, reduction="none")
    _assert_same(impl_n, lambda: t_debiased(pos, neg, tau_plus, None, beta), [pos, neg])


def test_audit_m2_each_positive_takes_its_turn():
    """M = 2 with different positives: the loss is the mean of the two turns, and both positives
    enter tau+ (1/M) sum_m e^{p_m} (changing the *other* positive changes a turn's loss)."""
    pos = torch.tensor([[1.0, -0.5]], dtype=D64)
    neg = torch.tensor([[0.2, -0.3, 0.4]], dtype=D64)
    got = S.debiased_nce_from_logits(pos, neg, 0.2, -2.0).item()
    neg_mean = sum(math.exp(q) for q in (0.2, -0.3, 0.4)) / 3
    pos_mean = (math.exp(1.0) + math.exp(-0.5)) / 2
    g = max((neg_mean - 0.2 * pos_mean) / 0.8, math.exp(-2.0))
    want = sum(-math.log(math.exp(p) / (math.exp(p) + 3 * g)) for p in (1.0, -0.5)) / 2
    assert math.isclose(got, want, rel_tol=1e-13)


@pytest.mark.parametrize("tau_plus,beta", [(0.0, 0.0), (0.25, 0.0), (0.25, 2.0)])
def test_audit_ragged_shared_negatives_float64_exact(tau_plus, beta):
    """[B, N] negatives with -inf holes: N counts the present ones per anchor. Tolerance 1e-12:
    float64 inputs must be computed in float64 throughout (log N included)."""
    pos, neg = _leaf(5, 2, seed=31), _leaf(5, 7, seed=32)
    with torch.no_grad():
        neg[0, :2] = -INF
        neg[3, 4:] = -INF
        pos[2, 0] = -INF  # anchor 2: one positive only
    floor = -2.5
    impl = lambda: S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, floor, reduction="none")
    _assert_same(impl, lambda: t_debiased(pos, neg, tau_plus, floor, beta), [pos, neg], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("beta", [0.0, 1.0])
def test_audit_per_turn_ragged_values_and_grads(beta):
    pos, neg = _leaf(4, 2, seed=41, scale=1.5), _leaf(4, 2, 6, seed=42, scale=1.5)
    with torch.no_grad():
        neg[1, 0, :3] = -INF  # turn 0 of anchor 1 has N = 3
        neg[2, 1, 5] = -INF
        pos[3, 1] = -INF  # anchor 3 has one turn
    for tau_plus, floor in [(0.0, None), (0.4, -1.0), (0.4, None)]:
        impl = lambda: S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, floor, reduction="none")
        _assert_same(impl, lambda: t_debiased(pos, neg, tau_plus, floor, beta), [pos, neg], rtol=1e-12, atol=1e-14)


def test_audit_per_turn_equal_to_shared_when_repeated():
    pos, neg = _leaf(5, 3, seed=51), _leaf(5, 8, seed=52)
    for tp, beta in [(0.0, 0.0), (0.3, 0.0), (0.3, 1.0)]:
        shared = S.hard_negative_nce_from_logits(pos, neg, tp, beta, -1.0, reduction="none")
        turns = S.hard_negative_nce_from_logits(pos, neg.unsqueeze(1).expand(5, 3, 8), tp, beta, -1.0, reduction="none")
        assert torch.allclose(shared, turns, rtol=1e-13)


def test_audit_reductions_all_entry_points():
    pos, neg = _leaf(4, 2, seed=61), _leaf(4, 6, seed=62)
    X = _leaf(4, 3, 5, seed=63)
    F_ = _leaf(8, 5, seed=64)
    src, lab = torch.arange(4).repeat(2), torch.tensor([1, 0, -1, 0]).repeat(2)
    calls = [
        lambda r: S.debiased_nce_from_logits(pos, neg, 0.1, -2.0, reduction=r),
        lambda r: S.hard_negative_nce_from_logits(pos, neg, 0.1, 1.0, -2.0, reduction=r),
        lambda r: S.info_nce_from_logits(pos, neg, reduction=r),
        lambda r: S.debiased_nce(X, temperature=0.3, tau_plus=0.1, reduction=r),
        lambda r: S.hard_negative_nce(X, temperature=0.3, reduction=r),
        lambda r: S.info_nce(X, temperature=0.3, reduction=r),
        lambda r: S.punce_loss(F_, src, lab, 0.4, 0.3, reduction=r),
        lambda r: S.supcon_loss(F_, lab, 0.3, reduction=r),
        lambda r: S.scl_pu_loss(F_, src, lab, 0.3, reduction=r),
    ]
    for call in calls:
        none = call("none")
        assert none.dim() == 1
        assert torch.allclose(call("sum"), none.sum(), rtol=1e-13)
        assert torch.allclose(call("mean"), none.mean(), rtol=1e-13)


# ----------------------------------------------------------------------------------------------
# Sections 2-3.1 on embeddings (SimCLR layout, temperature, auto floor, dot similarity)
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("V", [2, 3])
def test_audit_multiview_cosine_values_and_grads(V):
    X = _leaf(4, V, 5, seed=70 + V)
    for t, tp, beta in [(0.2, 0.6, 0.0), (1.0, 0.1, 0.0), (0.5, 0.3, 1.0)]:
        impl = lambda: S.hard_negative_nce(X, temperature=t, tau_plus=tp, beta=beta, reduction="none")
        _assert_same(impl, lambda: t_multiview(X, t, tp, -1.0 / t, beta), [X])
    # InfoNCE (tau+ = 0, no floor) through the in-place logsumexp path
    _assert_same(lambda: S.info_nce(X, temperature=0.3, reduction="none"),
                 lambda: t_multiview(X, 0.3, 0.0, None), [X])


def test_audit_auto_floor_binds_for_cosine():
    """tau+ large enough that the paper's floor e^{-1/t} binds for some anchors and not others."""
    X = _leaf(4, 2, 5, seed=81)
    t, tp = 0.5, 0.45
    ref = t_multiview(X, t, tp, -1.0 / t).detach()
    ref_nofloor = t_multiview(X, t, tp, None).detach()
    bound = (ref != ref_nofloor)
    assert bound.any() and not bound.all(), (ref, ref_nofloor)
    _assert_same(lambda: S.debiased_nce(X, temperature=t, tau_plus=tp, reduction="none"),
                 lambda: t_multiview(X, t, tp, -1.0 / t), [X])


def test_audit_dot_similarity_auto_floor_is_min_negative():
    """Unbounded scores: "auto" is each anchor's smallest negative score (detached)."""
    X = _leaf(5, 3, 4, seed=91, scale=0.7)
    for tp in (0.1, 0.6):
        impl = lambda: S.debiased_nce(X, temperature=0.5, tau_plus=tp, similarity="dot", reduction="none")
        _assert_same(impl, lambda: t_multiview(X, 0.5, tp, "min", similarity="dot"), [X])
    ref = t_multiview(X, 0.5, 0.6, "min", similarity="dot").detach()
    assert not torch.allclose(ref, t_multiview(X, 0.5, 0.6, None, similarity="dot").detach())  # floor binds


# ----------------------------------------------------------------------------------------------
# Section 4: SupCon, SCL-PU, puNCE
# ----------------------------------------------------------------------------------------------


# rows deliberately not view-major; source 2 has three views, source 5 has three views
UNEQUAL_SRC = [0, 2, 1, 3, 2, 0, 4, 1, 5, 3, 2, 4, 5, 5]
UNEQUAL_PU = {0: 1, 1: 1, 2: 0, 3: 0, 4: 1, 5: 0}
UNEQUAL_PNU = {0: 1, 1: -1, 2: 0, 3: 0, 4: -1, 5: 0}


@pytest.mark.parametrize("setting", ["pu", "pnu"])
@pytest.mark.parametrize("prior", [0.0, 0.35, 1.0])
def test_audit_punce_unequal_views_values_and_grads(setting, prior):
    by_src = UNEQUAL_PU if setting == "pu" else UNEQUAL_PNU
    src = torch.tensor(UNEQUAL_SRC)
    lab = torch.tensor([by_src[s] for s in UNEQUAL_SRC])
    X = _leaf(len(UNEQUAL_SRC), 4, seed=100 + int(prior * 10))
    t = 0.4
    _assert_same(lambda: S.punce_loss(X, src, lab, prior, t, reduction="none"),
                 lambda: t_punce(X, src.tolist(), lab.tolist(), prior, t), [X])


@pytest.mark.parametrize("prior", [0.0, 0.6, 1.0])
def test_audit_punce_pu_eq8_literal_values_and_grads(prior):
    """Two views per source, PU labels: eq. (7)-(8) with |P|-1 and |P|+1 written literally."""
    src = torch.tensor([0, 1, 2, 3, 4, 3, 1, 0, 4, 2])
    lab = torch.tensor([1, 0, 1, 0, 0, 0, 0, 1, 0, 1])
    X = _leaf(10, 5, seed=111)
    _assert_same(lambda: S.punce_loss(X, src, lab, prior, 0.3, reduction="none"),
                 lambda: t_punce_pu_eq8(X, src.tolist(), lab.tolist(), prior, 0.3), [X])
    # the prior really matters for unlabeled anchors and not for labeled ones
    a = S.punce_loss(X, src, lab, 0.0, 0.3, reduction="none").detach()
    b = S.punce_loss(X, src, lab, 1.0, 0.3, reduction="none").detach()
    assert torch.equal(a[lab == 1], b[lab == 1]) and (a[lab == 0] - b[lab == 0]).abs().min() > 1e-6


def test_audit_punce_weight_matrix_by_hand():
    """puNCE as per-anchor positive weights (docs/equations.md section 5), prior 0.3, written out by hand.
    Rows: s0(+1) s1(-1) s2(U) s3(U) s0 s1 s2 s3 s2 (source 2 has three views)."""
    src = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3, 2])
    lab = torch.tensor([1, -1, 0, 0, 1, -1, 0, 0, 0])
    p, q = 0.3, 0.7
    W = S.punce_weights(src, lab, p, dtype=D64)
    want = torch.tensor([
        [0, 0, 0, 0, 1, 0, 0, 0, 0],  # labeled +: Q = {4}
        [0, 0, 0, 0, 0, 1, 0, 0, 0],  # labeled -: Q = {5}
        [p / 4, q / 4, 0, 0, p / 4, q / 4, 0.25, 0, 0.25],  # P(i) = {0,4,6,8}, N(i) = {1,5,6,8}
        [p / 3, q / 3, 0, 0, p / 3, q / 3, 0, 1 / 3, 0],  # P(i) = {0,4,7}, N(i) = {1,5,7}
        [1, 0, 0, 0, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0, 0, 0, 0],
        [p / 4, q / 4, 0.25, 0, p / 4, q / 4, 0, 0, 0.25],
        [p / 3, q / 3, 0, 1 / 3, p / 3, q / 3, 0, 0, 0],
        [p / 4, q / 4, 0.25, 0, p / 4, q / 4, 0.25, 0, 0],
    ], dtype=D64)
    assert torch.allclose(W, want, rtol=0, atol=1e-15)
    # PU form (no -1 labels): unlabeled rows put (1 - pi) on a(i) alone and pi/(|P|+1) on P u a(i)
    lab_pu = torch.tensor([1, 1, 0, 0, 1, 1, 0, 0, 0])
    W = S.punce_weights(src[:8], lab_pu[:8], p, dtype=D64)
    assert torch.allclose(W[3], torch.tensor([p / 5, p / 5, 0, 0, p / 5, p / 5, 0, p / 5 + q, 0][:8], dtype=D64))


@pytest.mark.parametrize("labels", [[0, 1, 2, 1, 0, 2, 2], [-1, 0, 1, 1, 0, -1]])
def test_audit_supcon_values_and_grads(labels):
    X = _leaf(len(labels), 4, seed=121)
    lab = torch.tensor(labels)
    _assert_same(lambda: S.supcon_loss(X, lab, 0.15, reduction="none"), lambda: t_supcon(X, labels, 0.15), [X])


def test_audit_scl_pu_values_and_grads_and_is_punce_prior0_in_pu():
    src = torch.tensor(UNEQUAL_SRC)
    for by_src in (UNEQUAL_PU, UNEQUAL_PNU):
        lab = torch.tensor([by_src[s] for s in UNEQUAL_SRC])
        X = _leaf(len(UNEQUAL_SRC), 4, seed=131)
        _assert_same(lambda: S.scl_pu_loss(X, src, lab, 0.5, reduction="none"),
                     lambda: t_scl_pu(X, src.tolist(), lab.tolist(), 0.5), [X])
    # puNCE (docs/equations.md section 5): with no labeled negatives and pi = 0, puNCE is the SCL-PU baseline
    lab = torch.tensor([UNEQUAL_PU[s] for s in UNEQUAL_SRC])
    assert torch.allclose(S.punce_loss(X, src, lab, 0.0, 0.5, reduction="none"),
                          S.scl_pu_loss(X, src, lab, 0.5, reduction="none"), rtol=1e-13)


def test_audit_punce_identities_with_prior_extremes():
    """All labeled = SupCon and none labeled = InfoNCE hold at every prior, including 0 and 1."""
    X = _leaf(12, 5, seed=141)
    src = torch.arange(6).repeat(2)
    z = torch.stack([X[:6], X[6:]], dim=1)
    for prior in (0.0, 1.0):
        lab = torch.tensor([1, -1, -1, 1, 1, -1]).repeat(2)
        assert torch.allclose(S.punce_loss(X, src, lab, prior, 0.25, reduction="none"),
                              S.supcon_loss(X, lab, 0.25, reduction="none"), rtol=1e-13)
        none = torch.zeros(12, dtype=torch.long)
        assert torch.allclose(S.punce_loss(X, src, none, prior, 0.25, reduction="none"),
                              S.info_nce(z, temperature=0.25, reduction="none"), rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Section 5: gathering, simulated in one process (the real two-process gloo run is
# test_distributed.py). The fake all_gather returns every rank's slice computed from one leaf
# tensor, so each rank's loss back-propagates into every slice, as the all_reduce in backward does.
# ----------------------------------------------------------------------------------------------


def _fake_gather(parts_per_call, rank, world):
    calls = iter(parts_per_call)

    def gather(t):
        parts = next(calls)
        return torch.cat([t if r == rank else parts[r] for r in range(world)], dim=0), rank, world

    return gather


def test_audit_gather_scaling_simulated(monkeypatch):
    W, B, V = 2, 3, 3
    X = _leaf(W * B, V, 4, seed=151)
    F_ = _leaf(W * 8, 4, seed=152)
    src_local = [torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])] * W  # local ids collide across ranks
    lab_local = [torch.tensor([1, 0, -1, 0]).repeat(2), torch.tensor([0, 1, 0, 0]).repeat(2)]
    src_single = torch.cat([s * W + r for r, s in enumerate(src_local)])
    lab_single = torch.cat(lab_local)

    def multiview(fn):
        def per_rank(r):
            parts = [[fn.prep(X[q * B:(q + 1) * B]) for q in range(W)]]
            monkeypatch.setattr(SF, "gather_with_grad", _fake_gather(parts, r, W))
            return fn(X[r * B:(r + 1) * B], True)
        return per_rank, lambda: fn(X, False), lambda r: [v * W * B + r * B + b for v in range(V) for b in range(B)]

    def labelled(fn):
        def per_rank(r):
            parts = [[F.normalize(F_[q * 8:(q + 1) * 8], dim=-1) for q in range(W)], lab_local,
                     [src_local[q] * W + q for q in range(W)]]
            monkeypatch.setattr(SF, "gather_with_grad", _fake_gather(parts, r, W))
            return fn(F_[r * 8:(r + 1) * 8], src_local[r], lab_local[r], True)
        return per_rank, lambda: fn(F_, src_single, lab_single, False), lambda r: list(range(r * 8, (r + 1) * 8))

    def mv(f, prep):
        f.prep = prep
        return f

    cos, ident = (lambda x: F.normalize(x, dim=-1)), (lambda x: x)
    cases = {
        "debiased_dot_auto_floor": multiview(mv(lambda x, g, r="none": S.debiased_nce(
            x, temperature=0.5, tau_plus=0.5, similarity="dot", reduction=r, gather_distributed=g), ident)),
        "hard_cos": multiview(mv(lambda x, g, r="none": S.hard_negative_nce(
            x, temperature=0.4, tau_plus=0.2, beta=1.0, reduction=r, gather_distributed=g), cos)),
        "info_nce": multiview(mv(lambda x, g, r="none": S.info_nce(
            x, temperature=0.4, reduction=r, gather_distributed=g), cos)),
        "punce": labelled(lambda f, s, l, g, r="none": S.punce_loss(
            f, s, l, 0.3, 0.4, reduction=r, gather_distributed=g)),
        "scl_pu": labelled(lambda f, s, l, g, r="none": S.scl_pu_loss(f, s, l, 0.4, reduction=r, gather_distributed=g)),
        "supcon": labelled(lambda f, s, l, g, r="none": S.supcon_loss(
            f, l, 0.4, reduction=r, source_ids=s, gather_distributed=g)),
    }
    for name, (per_rank, single, rows) in cases.items():
        leaf = F_ if name in ("punce", "scl_pu", "supcon") else X
        whole = single()
        whole_grad = torch.autograd.grad(whole.mean(), leaf)[0]
        total = 0.0
        for r in range(W):
            local = per_rank(r)  # per-anchor losses of the local anchors against global candidates
            assert torch.allclose(local, whole[rows(r)], rtol=1e-12), name
            total = total + local.mean() / W  # mean over local anchors; DDP averages over ranks
        grad = torch.autograd.grad(total, leaf)[0]
        assert torch.allclose(total, whole.mean(), rtol=1e-12), name
        assert torch.allclose(grad, whole_grad, rtol=1e-9, atol=1e-12), name
