"""Every loss against its float64 loop transcription (tests/shared_losses/reference.py)."""

import math

import pytest
import torch

import shared_losses as S

from . import reference as R

SHAPES = [(1, 1, 3), (5, 1, 7), (6, 2, 9), (4, 3, 16)]  # (B, M, N)


def _rel(a, b):
    a = torch.as_tensor(a, dtype=torch.float64)
    b = torch.as_tensor(b, dtype=torch.float64)
    return ((a - b).abs() / b.abs().clamp(min=1e-12)).max().item()


def _logits(B, M, N, seed, scale=2.0, per_turn=False):
    g = torch.Generator().manual_seed(seed)
    pos = torch.randn(B, M, generator=g, dtype=torch.float64) * scale
    shape = (B, M, N) if per_turn else (B, N)
    neg = torch.randn(*shape, generator=g, dtype=torch.float64) * scale
    return pos, neg


@pytest.mark.parametrize("B,M,N", SHAPES)
@pytest.mark.parametrize("tau_plus", [0.0, 0.05, 0.3, 0.9])
@pytest.mark.parametrize("log_floor", [None, -1.5, "tensor"])
def test_debiased_matches_loop(B, M, N, tau_plus, log_floor):
    pos, neg = _logits(B, M, N, seed=B * 100 + M * 10 + N)
    floor = torch.linspace(-3, 1, B, dtype=torch.float64) if log_floor == "tensor" else log_floor
    ref_floor = floor.tolist() if isinstance(floor, torch.Tensor) else floor
    ref = R.debiased(pos.tolist(), neg.tolist(), tau_plus, ref_floor)
    got64 = S.debiased_nce_from_logits(pos, neg, tau_plus, floor, reduction="none")
    assert _rel(got64, ref) < 1e-6
    f32_floor = floor.float() if isinstance(floor, torch.Tensor) else floor
    got32 = S.debiased_nce_from_logits(pos.float(), neg.float(), tau_plus, f32_floor, reduction="none")
    assert got32.dtype == torch.float32
    assert _rel(got32, ref) < 1e-4
    assert math.isclose(S.debiased_nce_from_logits(pos, neg, tau_plus, floor).item(), sum(ref) / B, rel_tol=1e-9)
    assert math.isclose(S.debiased_nce_from_logits(pos, neg, tau_plus, floor, reduction="sum").item(), sum(ref),
                        rel_tol=1e-9)


@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_debiased_per_turn_and_ragged(tau_plus):
    pos, neg = _logits(6, 2, 8, seed=3, per_turn=True)
    pos[1, 0] = -math.inf  # anchor 1 has only its second positive
    neg[2, 1, :3] = -math.inf  # turn 1 of anchor 2 has 5 negatives
    ref = R.debiased(pos.tolist(), neg.tolist(), tau_plus, -2.0)
    got = S.debiased_nce_from_logits(pos, neg, tau_plus, -2.0, reduction="none")
    assert _rel(got, ref) < 1e-6


@pytest.mark.parametrize("beta", [0.5, 1.0, 3.0])
@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_hard_negative_matches_loop(beta, tau_plus):
    pos, neg = _logits(7, 2, 11, seed=11)
    ref = R.debiased(pos.tolist(), neg.tolist(), tau_plus, -1.0, beta=beta)
    got = S.hard_negative_nce_from_logits(pos, neg, tau_plus, beta, -1.0, reduction="none")
    assert _rel(got, ref) < 1e-6
    got32 = S.hard_negative_nce_from_logits(pos.float(), neg.float(), tau_plus, beta, -1.0, reduction="none")
    assert _rel(got32, ref) < 1e-4


def test_m1_matches_paper_exp_space_pseudocode():
    t = 0.5
    pos, neg = _logits(9, 1, 16, seed=5, scale=1.0)
    for tau_plus in (0.0, 0.1, 0.5):
        ref = R.exp_space_m1(pos[:, 0].tolist(), neg.tolist(), tau_plus, t)
        got = S.debiased_nce_from_logits(pos, neg, tau_plus, log_floor=-1 / t, reduction="none")
        assert _rel(got, ref) < 1e-6


def _views(B, V, d, seed, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, V, d, generator=g, dtype=dtype)


@pytest.mark.parametrize("B,V", [(2, 2), (5, 2), (4, 3), (3, 5)])
@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_multiview_debiased_matches_loop(B, V, tau_plus):
    t = 0.5
    z = _views(B, V, 6, seed=B + V)
    views = [[z[b, v].tolist() for b in range(B)] for v in range(V)]
    ref = R.multiview_debiased(views, t, tau_plus, -1 / t)
    got = S.debiased_nce(z, temperature=t, tau_plus=tau_plus, reduction="none")
    assert _rel(got, ref) < 1e-6
    got32 = S.debiased_nce(z.float(), temperature=t, tau_plus=tau_plus, reduction="none")
    assert _rel(got32, ref) < 1e-4
    # hard-negative on embeddings as well
    ref_h = R.multiview_debiased(views, t, tau_plus, -1 / t, beta=1.0)
    got_h = S.hard_negative_nce(z, temperature=t, tau_plus=tau_plus, beta=1.0, reduction="none")
    assert _rel(got_h, ref_h) < 1e-6


def _labelled_batch(labels_per_source, d=5, seed=0, views=2):
    g = torch.Generator().manual_seed(seed)
    n_src = len(labels_per_source)
    feats = torch.randn(n_src * views, d, generator=g, dtype=torch.float64)
    src = torch.arange(n_src).repeat(views)  # view-major: both views of source s at s and s+n_src
    labels = torch.tensor(labels_per_source).repeat(views)
    return feats, src, labels


PU_CASES = [[1, 1, 0, 0, 0], [1, 0, 0], [1, 1, 1, 0], [0, 1, 0, 1, 0, 0]]
PNU_CASES = [[1, -1, 0, 0], [1, 1, -1, -1, 0, 0, 0], [-1, 0, 1, 0, -1]]


@pytest.mark.parametrize("labels", PU_CASES)
@pytest.mark.parametrize("prior", [0.0, 0.3, 1.0])
def test_punce_pu_matches_loop(labels, prior):
    feats, src, lab = _labelled_batch(labels, seed=len(labels))
    ref = R.punce_pu(feats.tolist(), src.tolist(), lab.tolist(), prior, 0.5)
    got = S.punce_loss(feats, src, lab, prior, 0.5, reduction="none")
    assert _rel(got, ref) < 1e-6
    got32 = S.punce_loss(feats.float(), src, lab, prior, 0.5, reduction="none")
    assert _rel(got32, ref) < 1e-4
    assert math.isclose(S.punce_loss(feats, src, lab, prior, 0.5).item(), sum(ref) / len(ref), rel_tol=1e-9)


@pytest.mark.parametrize("labels", PNU_CASES)
@pytest.mark.parametrize("prior", [0.2, 0.7])
def test_punce_pnu_matches_loop(labels, prior):
    feats, src, lab = _labelled_batch(labels, seed=7 + len(labels))
    ref = R.punce_pnu(feats.tolist(), src.tolist(), lab.tolist(), prior, 0.3)
    got = S.punce_loss(feats, src, lab, prior, 0.3, reduction="none")
    assert _rel(got, ref) < 1e-6


@pytest.mark.parametrize("labels", PNU_CASES + PU_CASES)
@pytest.mark.parametrize("label_pull", [0.0, 0.3, 1.0])
def test_punce_label_pull_matches_loop(labels, label_pull):
    """The label-pull variant against its float64 transcription (PU cases are eq. 8 with N_l empty)."""
    feats, src, lab = _labelled_batch(labels, seed=11 + len(labels))
    ref = R.punce_pnu(feats.tolist(), src.tolist(), lab.tolist(), 0.4, 0.3, label_pull=label_pull)
    got = S.punce_loss(feats, src, lab, 0.4, 0.3, reduction="none", label_pull=label_pull)
    assert _rel(got, ref) < 1e-6
    W = S.punce_weights(src, lab, 0.4, dtype=torch.float64, label_pull=label_pull)
    assert torch.allclose(W.sum(1), torch.ones(len(lab), dtype=torch.float64))


def test_punce_label_pull_ends_are_the_paper_and_scl():
    feats, src, lab = _labelled_batch([1, -1, 0, 0, 1, 0], seed=5)
    paper = S.punce_loss(feats, src, lab, 0.6, 0.5, reduction="none")
    assert torch.equal(S.punce_loss(feats, src, lab, 0.6, 0.5, reduction="none", label_pull=1.0), paper)
    scl = S.scl_pu_loss(feats, src, lab, 0.5, reduction="none")
    assert torch.allclose(S.punce_loss(feats, src, lab, 0.6, 0.5, reduction="none", label_pull=0.0), scl)
    half = S.punce_loss(feats, src, lab, 0.6, 0.5, reduction="none", label_pull=0.5)
    unl = lab == 0
    assert torch.allclose(half[unl], 0.5 * (paper[unl] + scl[unl]))  # linear in lambda on unlabeled anchors
    assert torch.equal(half[~unl], paper[~unl])  # labeled anchors keep SupCon
    assert not torch.allclose(half[unl], paper[unl])


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_punce_label_pull_out_of_range_is_refused(bad):
    feats, src, lab = _labelled_batch([1, 0, 0], seed=1)
    with pytest.raises(ValueError, match="label_pull"):
        S.punce_loss(feats, src, lab, 0.5, label_pull=bad)
    with pytest.raises(ValueError, match="label_pull"):
        S.PUNCELoss(0.5, label_pull=bad)


def test_punce_weights_rows_sum_to_one_and_match_loss():
    feats, src, lab = _labelled_batch([1, -1, 0, 0, 1], seed=2)
    W = S.punce_weights(src, lab, 0.4, dtype=torch.float64)
    assert torch.allclose(W.sum(1), torch.ones(len(lab), dtype=torch.float64))
    assert (W.diagonal() == 0).all()
    s = S.cosine_scores(feats, feats, 0.5)
    s.fill_diagonal_(-math.inf)
    logp = torch.log_softmax(s, 1)
    manual = -(W * torch.where(W > 0, logp, torch.zeros_like(logp))).sum(1)
    assert torch.allclose(manual, S.punce_loss(feats, src, lab, 0.4, 0.5, reduction="none"))


@pytest.mark.parametrize("labels", [[0, 1, 2, 1, 0, 2], [3, 3, 7, 7, 7]])
def test_supcon_matches_loop(labels):
    g = torch.Generator().manual_seed(1)
    feats = torch.randn(len(labels), 4, generator=g, dtype=torch.float64)
    lab = torch.tensor(labels)
    ref = R.supcon(feats.tolist(), labels, 0.2)
    assert _rel(S.supcon_loss(feats, lab, 0.2, reduction="none"), ref) < 1e-6
    assert _rel(S.supcon_loss(feats.float(), lab, 0.2, reduction="none"), ref) < 1e-4


@pytest.mark.parametrize("labels", [[1, 1, 0, 0], [1, -1, -1, 0, 0]])
def test_scl_pu_matches_loop(labels):
    feats, src, lab = _labelled_batch(labels, seed=4)
    ref = R.scl_pu(feats.tolist(), src.tolist(), lab.tolist(), 0.5)
    assert _rel(S.scl_pu_loss(feats, src, lab, 0.5, reduction="none"), ref) < 1e-6


def test_float64_terms_keep_float64_precision_where_the_softplus_is_large():
    """-log(e^p / (e^p + N g)) = log(1 + e^x), x = log(N g) - p: torch's softplus returns x itself above 20, off by
    up to e^-20 = 2e-9, a billion times float64's resolution; checked against x + log1p(e^-x) for x from 15 to 35."""
    import math

    import shared_losses as S

    gaps = torch.arange(15.0, 36.0, 2.5, dtype=torch.float64)
    pos = -gaps.unsqueeze(1)  # [A, 1]
    neg = torch.zeros(len(gaps), 3, dtype=torch.float64)  # N g = 3 e^0 at tau+ = 0: x = gap + ln 3
    got = S.debiased_nce_from_logits(pos, neg, reduction="none")
    for g, value in zip(gaps.tolist(), got.tolist()):
        x = g + math.log(3.0)
        assert value == pytest.approx(x + math.log1p(math.exp(-x)), rel=1e-15, abs=0)
