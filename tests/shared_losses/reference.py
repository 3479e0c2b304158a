"""Plain float64 loop transcriptions of the paper equations: the oracle for the loss tests.

Deliberately naive: Python loops, ``math.exp``/``math.log``, one anchor at a time, written from
the papers (see docs/equations.md), sharing no code with ``shared_losses``.
"""

from __future__ import annotations

import math


def debiased(pos, neg, tau_plus=0.0, log_floor=None, beta=0.0):
    """DCL eq. (7)-(8) (+ HCL reweighting); pos [B][M], neg [B][N] or [B][M][N] nested lists.
    Entries equal to -inf are absent. Returns the list of per-anchor losses."""
    out = []
    for i in range(len(pos)):
        ps = [p for p in pos[i] if p != -math.inf]
        turns = []
        for m, p in enumerate(pos[i]):
            if p == -math.inf:
                continue
            row = neg[i][m] if isinstance(neg[i][0], list) else neg[i]
            qs = [q for q in row if q != -math.inf]
            N = len(qs)
            if beta:
                ws = [math.exp(beta * q) for q in qs]
                wmean = sum(ws) / N
                neg_mean = sum(w / wmean * math.exp(q) for w, q in zip(ws, qs)) / N
            else:
                neg_mean = sum(math.exp(q) for q in qs) / N
            pos_mean = sum(math.exp(x) for x in ps) / len(ps)
            g = (neg_mean - tau_plus * pos_mean) / (1.0 - tau_plus)
            g = (max(g, math.exp(log_floor[i] if isinstance(log_floor, list) else log_floor))
                 if log_floor is not None else max(g, 0.0))
            turns.append(-math.log(math.exp(p) / (math.exp(p) + N * g)))
        out.append(sum(turns) / len(turns))
    return out


def exp_space_m1(pos, neg, tau_plus, t):
    """DCL Figure 3 pseudocode (M = 1), exp space, as written in the paper."""
    out = []
    for i in range(len(pos)):
        N = len(neg[i])
        e_pos = math.exp(pos[i])
        e_neg = sum(math.exp(q) for q in neg[i])
        Ng = max((-N * tau_plus * e_pos + e_neg) / (1 - tau_plus), N * math.exp(-1 / t))
        out.append(-math.log(e_pos / (e_pos + Ng)))
    return out


def cos(a, b):
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def multiview_debiased(views, t, tau_plus, log_floor, beta=0.0):
    """SimCLR layout, any V: views[v][b] vectors. Anchor order view-major (v * B + b)."""
    V, B = len(views), len(views[0])
    out = []
    for v in range(V):
        for b in range(B):
            a = views[v][b]
            pos = [cos(a, views[w][b]) / t for w in range(V) if w != v]
            neg = [cos(a, views[w][c]) / t for w in range(V) for c in range(B) if c != b]
            out += debiased([pos], [neg], tau_plus, log_floor, beta)
    return out


def _log_p(s, i, j):
    """log( e^{s_ij} / sum_{k != i} e^{s_ik} )."""
    den = sum(math.exp(s[i][k]) for k in range(len(s)) if k != i)
    return s[i][j] - math.log(den)


def cos_matrix(feats, t):
    return [[cos(a, b) / t for b in feats] for a in feats]


def supcon(feats, labels, t):
    """puNCE eq. (5) / SupCon L_out."""
    s = cos_matrix(feats, t)
    n = len(feats)
    out = []
    for i in range(n):
        Q = [j for j in range(n) if j != i and labels[j] == labels[i]]
        out.append(-sum(_log_p(s, i, j) for j in Q) / len(Q))
    return out


def punce_pu(feats, src, labels, prior, t):
    """puNCE eq. (7)-(9), PU setting: labels in {1, 0}."""
    s = cos_matrix(feats, t)
    n = len(feats)
    P = [j for j in range(n) if labels[j] == 1]
    out = []
    for i in range(n):
        if labels[i] == 1:
            out.append(-sum(_log_p(s, i, j) for j in P if j != i) / (len(P) - 1))
        else:
            a = [j for j in range(n) if j != i and src[j] == src[i]][0]
            term = prior / (len(P) + 1) * sum(_log_p(s, i, j) for j in P + [a])
            term += (1 - prior) * _log_p(s, i, a)
            out.append(-term)
    return out


def punce_pnu(feats, src, labels, prior, t, label_pull=1.0):
    """puNCE eq. (10), PNU setting: labels in {1, 0, -1}. ``label_pull`` lambda (the suite's variant): an unlabeled
    anchor's term is lambda x eq. (10)'s plus (1 - lambda) x log P_{i a(i)}."""
    s = cos_matrix(feats, t)
    n = len(feats)
    P = [j for j in range(n) if labels[j] == 1]
    Nl = [j for j in range(n) if labels[j] == -1]
    out = []
    for i in range(n):
        if labels[i] != 0:
            Q = [j for j in range(n) if j != i and labels[j] == labels[i]]
            out.append(-sum(_log_p(s, i, j) for j in Q) / len(Q))
        else:
            a = [j for j in range(n) if j != i and src[j] == src[i]][0]
            Pi, Ni = P + [a], Nl + [a]
            term = prior / len(Pi) * sum(_log_p(s, i, j) for j in Pi)
            term += (1 - prior) / len(Ni) * sum(_log_p(s, i, j) for j in Ni)
            out.append(-(label_pull * term + (1 - label_pull) * _log_p(s, i, a)))
    return out


def scl_pu(feats, src, labels, t):
    """puNCE section 5 baseline: SupCon over labeled positives for labeled anchors, InfoNCE else."""
    s = cos_matrix(feats, t)
    n = len(feats)
    out = []
    for i in range(n):
        if labels[i] != 0:
            Q = [j for j in range(n) if j != i and labels[j] == labels[i]]
            out.append(-sum(_log_p(s, i, j) for j in Q) / len(Q))
        else:
            a = [j for j in range(n) if j != i and src[j] == src[i]][0]
            out.append(-_log_p(s, i, a))
    return out


def cpc(latents, predictions, mask=None, t=1.0, tau_plus=0.0, log_floor=None, similarity="dot",
        negatives="mixed"):
    """CPC eq. (3)-(4), k-step, written out: latents[b][t] vectors, predictions[b][t][k-1] vectors (W_k c_t).
    f_k(z_j, c_t) = exp(z_j . W_k c_t / t); the positive is z_{b, t+k}; the negatives every other present
    latent (``"other_sequences"``: of the other sequences only). With tau_plus > 0 the negatives' sum is
    N * max((mean_n f_n - tau+ f_pos) / (1 - tau+), floor) (DCL eq. 7-8, M = 1); ``log_floor`` "min" is
    the prediction's smallest negative score. Returns ({(b, t, k): loss}, mean over k of each step's mean)."""
    B, T = len(latents), len(latents[0])
    Tc, K = len(predictions[0]), len(predictions[0][0])
    here = (lambda b, s: True) if mask is None else (lambda b, s: mask[b][s])

    def score(z, p):
        if similarity == "cosine":
            return cos(z, p) / t
        return sum(x * y for x, y in zip(z, p)) / t

    terms = {}
    for b in range(B):
        for s in range(Tc):
            for k in range(1, K + 1):
                if s + k >= T or not here(b, s) or not here(b, s + k):
                    continue
                p = predictions[b][s][k - 1]
                pos = score(latents[b][s + k], p)
                negs = [score(latents[b2][s2], p) for b2 in range(B) for s2 in range(T)
                        if here(b2, s2) and (b2, s2) != (b, s + k)
                        and not (negatives == "other_sequences" and b2 == b)]
                N = len(negs)
                total = sum(math.exp(q) for q in negs)
                if tau_plus > 0:
                    g = (total / N - tau_plus * math.exp(pos)) / (1 - tau_plus)
                    floor = min(negs) if log_floor == "min" else log_floor
                    g = max(g, math.exp(floor)) if floor is not None else max(g, 0.0)
                    total = N * g
                terms[(b, s, k)] = -math.log(math.exp(pos) / (math.exp(pos) + total))
    step_means = []
    for k in range(1, K + 1):
        ks = [v for (b, s, kk), v in terms.items() if kk == k]
        if ks:
            step_means.append(sum(ks) / len(ks))
    return terms, sum(step_means) / len(step_means)
