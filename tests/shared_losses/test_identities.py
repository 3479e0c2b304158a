"""The identities of docs/equations.md sections 2-5, gradients, low-temperature numerics and bad input."""

import math

import pytest
import torch
import torch.nn.functional as F

import shared_losses as S


def _emb(B, V, d=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, V, d, generator=g, dtype=dtype)


def test_debiased_tau0_is_infonce_logits():
    g = torch.Generator().manual_seed(0)
    pos, neg = (torch.randn(10, 1, generator=g, dtype=torch.float64),
                torch.randn(10, 30, generator=g, dtype=torch.float64))
    # InfoNCE as a cross-entropy with the positive in column 0
    ce = F.cross_entropy(torch.cat([pos, neg], 1), torch.zeros(10, dtype=torch.long))
    assert torch.allclose(S.debiased_nce_from_logits(pos, neg, 0.0), ce, rtol=1e-12)
    assert torch.allclose(S.info_nce_from_logits(pos, neg), ce, rtol=1e-12)


def test_debiased_tau0_is_nt_xent_embeddings():
    z = _emb(6, 2)
    # SimCLR NT-Xent as cross-entropy over the 2B x 2B cosine matrix with self removed
    t = 0.3
    flat = F.normalize(torch.cat([z[:, 0], z[:, 1]]), dim=1)
    s = flat @ flat.T / t
    s.fill_diagonal_(-math.inf)
    target = torch.cat([torch.arange(6, 12), torch.arange(6)])
    ce = F.cross_entropy(s, target)
    assert torch.allclose(S.debiased_nce(z, temperature=t, tau_plus=0.0, log_floor=None), ce, rtol=1e-12)
    assert torch.allclose(S.info_nce(z[:, 0], z[:, 1], temperature=t), ce, rtol=1e-12)
    assert torch.allclose(S.InfoNCELoss(t)(z), ce, rtol=1e-12)


def test_hard_beta0_is_debiased():
    z = _emb(5, 3, seed=1)
    a = S.hard_negative_nce(z, temperature=0.5, tau_plus=0.1, beta=0.0)
    b = S.debiased_nce(z, temperature=0.5, tau_plus=0.1)
    assert torch.allclose(a, b, rtol=1e-12)
    g = torch.Generator().manual_seed(2)
    pos, neg = torch.randn(4, 2, generator=g, dtype=torch.float64), torch.randn(4, 9, generator=g, dtype=torch.float64)
    assert torch.allclose(S.hard_negative_nce_from_logits(pos, neg, 0.2, 0.0, -1.0),
                          S.debiased_nce_from_logits(pos, neg, 0.2, -1.0), rtol=1e-12)


def _pu_batch(labels, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = len(labels)
    feats = torch.randn(2 * n, 6, generator=g, dtype=torch.float64)
    src = torch.arange(n).repeat(2)
    return feats, src, torch.tensor(labels).repeat(2)


def test_punce_all_labeled_is_supcon():
    feats, src, lab = _pu_batch([1, -1, 1, -1, 1], seed=3)
    for prior in (0.0, 0.5, 1.0):
        assert torch.allclose(S.punce_loss(feats, src, lab, prior, 0.5), S.supcon_loss(feats, lab, 0.5), rtol=1e-12)
    pu_only = torch.ones_like(lab)  # only positives labeled, none unlabeled or negative
    assert torch.allclose(S.punce_loss(feats, src, pu_only, 0.3, 0.5), S.supcon_loss(feats, pu_only, 0.5), rtol=1e-12)


def test_punce_none_labeled_is_infonce():
    feats, src, lab = _pu_batch([0] * 6, seed=4)
    z = torch.stack([feats[:6], feats[6:]], dim=1)  # [B, 2, d], same sources
    for prior in (0.0, 0.4, 1.0):
        assert torch.allclose(S.punce_loss(feats, src, lab, prior, 0.5), S.info_nce(z, temperature=0.5), rtol=1e-12)


def test_pu_is_pnu_without_labeled_negatives():
    from . import reference as R

    feats, src, lab = _pu_batch([1, 0, 1, 0, 0], seed=5)
    pu = R.punce_pu(feats.tolist(), src.tolist(), lab.tolist(), 0.35, 0.5)
    pnu = R.punce_pnu(feats.tolist(), src.tolist(), lab.tolist(), 0.35, 0.5)
    assert max(abs(a - b) for a, b in zip(pu, pnu)) < 1e-12
    got = S.punce_loss(feats, src, lab, 0.35, 0.5, reduction="none")
    assert torch.allclose(got, torch.tensor(pnu, dtype=torch.float64), rtol=1e-10)


def test_gradcheck_float64():
    g = torch.Generator().manual_seed(6)
    pos = torch.randn(4, 2, generator=g, dtype=torch.float64, requires_grad=True)
    neg = torch.randn(4, 7, generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda p, n: S.debiased_nce_from_logits(p, n, 0.1, -3.0), (pos, neg))
    assert torch.autograd.gradcheck(lambda p, n: S.hard_negative_nce_from_logits(p, n, 0.1, 1.5, -3.0), (pos, neg))
    z = _emb(4, 3, d=5, seed=7).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda x: S.debiased_nce(x, temperature=0.5, tau_plus=0.1), (z,))
    feats, src, lab = _pu_batch([1, -1, 0, 0], seed=8)
    feats.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda f: S.punce_loss(f, src, lab, 0.3, 0.5), (feats,))
    assert torch.autograd.gradcheck(lambda f: S.supcon_loss(f, lab, 0.5), (feats,))
    assert torch.autograd.gradcheck(lambda f: S.scl_pu_loss(f, src, lab, 0.5), (feats,))


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 3e-2)])
def test_low_temperature_finite_and_close_to_float64(dtype, tol):
    t = 0.01
    base = _emb(32, 1, d=16, seed=9)
    z64 = F.normalize(base + 0.6 * _emb(32, 2, d=16, seed=19), dim=-1)  # two close views per sample
    feats, src, lab = _pu_batch([1, -1, 0, 0, 1, 0, 0, 0], seed=10)
    for fn, inp in [
        (lambda x: S.debiased_nce(x, temperature=t, tau_plus=0.1), z64),
        (lambda x: S.info_nce(x, temperature=t), z64),
        (lambda x: S.punce_loss(x, src, lab, 0.4, t), feats),
    ]:
        x = inp.to(dtype).requires_grad_(True)
        loss = fn(x)
        assert loss.dtype in (torch.float32, torch.float64)
        assert torch.isfinite(loss)
        loss.backward()
        assert torch.isfinite(x.grad.float()).all()
        # compare against float64 on the same (rounded) inputs
        r_same = fn(x.detach().double())
        assert abs(loss.item() - r_same.item()) <= tol * max(abs(r_same.item()), 1.0)
    # the exp-space formulation overflows float32 here; ours does not
    s = (z64[:, 0].float() @ z64[:, 1].float().T) / t  # the positives are near cos = 1 -> e^{~100}
    assert not torch.isfinite(torch.exp(s)).all()


def test_floor_is_used_when_estimator_goes_negative():
    pos = torch.tensor([[5.0]], dtype=torch.float64)
    neg = torch.tensor([[0.0, 0.0]], dtype=torch.float64)
    # (1/N) sum e^q = 1 < tau+ e^5 -> g clamps to the floor
    got = S.debiased_nce_from_logits(pos, neg, tau_plus=0.5, log_floor=-2.0)
    want = -math.log(math.exp(5) / (math.exp(5) + 2 * math.exp(-2)))
    assert math.isclose(got.item(), want, rel_tol=1e-12)
    # no floor: g clamps at 0, loss 0
    assert S.debiased_nce_from_logits(pos, neg, tau_plus=0.5).item() == 0.0


def test_a_floor_at_a_tie_passes_the_whole_gradient():
    """One negative, tau+ = 0, the min-negative floor: the floor equals the estimate, so the loss is InfoNCE's and so
    is its gradient (the floor is a constant of the step). A tensor floor and the same floor as a float agree."""
    pos = torch.tensor([[1.0], [0.3]], dtype=torch.float64, requires_grad=True)
    neg = torch.tensor([[0.5], [-0.2]], dtype=torch.float64, requires_grad=True)
    want = torch.autograd.grad(S.info_nce_from_logits(pos, neg), [pos, neg])
    got = torch.autograd.grad(S.debiased_nce_from_logits(pos, neg, 0.0, S.log_floor_min_negative(neg)), [pos, neg])
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=1e-15)
    for row in range(2):  # a tensor floor and a float floor, each at the tie
        p, q = pos[row:row + 1], neg[row:row + 1]
        by_tensor = torch.autograd.grad(S.debiased_nce_from_logits(p, q, 0.0, q.detach()[:, 0]), [p, q])
        by_float = torch.autograd.grad(S.debiased_nce_from_logits(p, q, 0.0, float(q[0, 0])), [p, q])
        for g, w in zip(by_tensor, by_float):
            torch.testing.assert_close(g, w, rtol=0, atol=1e-15)
    # a NaN estimate is not hidden by the floor (host checks off, where NaN inputs reach the loss)
    nan = S.debiased_nce_from_logits(torch.tensor([[1.0]]), torch.tensor([[float("nan")]]), 0.0,
                                     torch.tensor([0.0]), host_checks=False)
    assert torch.isnan(nan)


def test_log_floor_min_negative():
    neg = torch.tensor([[1.0, -2.0, -math.inf], [3.0, 0.5, 2.0]])
    assert torch.equal(S.log_floor_min_negative(neg), torch.tensor([-2.0, 0.5]))
    assert not S.log_floor_min_negative(neg.requires_grad_(True)).requires_grad


def test_modules_and_config():
    m = S.HardNegativeNCELoss(temperature=0.2, tau_plus=0.05, beta=2.0)
    assert m.get_config_dict()["beta"] == 2.0
    z = _emb(4, 2, seed=11)
    assert torch.allclose(m(z), S.hard_negative_nce(z, temperature=0.2, tau_plus=0.05, beta=2.0))
    assert torch.allclose(S.DebiasedNCELoss(0.5, 0.1)(z[:, 0], z[:, 1]), S.debiased_nce(z, tau_plus=0.1))
    feats, src, lab = _pu_batch([1, 0, 0], seed=12)
    assert torch.allclose(S.PUNCELoss(0.3)(feats, src, lab), S.punce_loss(feats, src, lab, 0.3))
    assert torch.allclose(S.SupConLoss()(feats, lab), S.supcon_loss(feats, lab))
    assert torch.allclose(S.SCLPULoss()(feats, src, lab), S.scl_pu_loss(feats, src, lab))
    bil = S.BilinearScore(4)
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    assert torch.allclose(bil(a, b), a @ bil.W @ b.T, atol=1e-6)
    lg = S.DebiasedNCEFromLogits(0.1, beta=1.0)
    pos, neg = torch.randn(3, 1), torch.randn(3, 4)
    assert torch.allclose(lg(pos, neg, -1.0), S.hard_negative_nce_from_logits(pos, neg, 0.1, 1.0, -1.0))


BAD = [
    (lambda: S.debiased_nce_from_logits(torch.randn(3, 1), torch.randn(4, 5)), "anchors"),
    (lambda: S.debiased_nce_from_logits(torch.randn(3, 1), torch.randn(3, 5), tau_plus=1.0), "tau_plus"),
    (lambda: S.debiased_nce_from_logits(torch.randn(3, 1), torch.randn(3, 5), tau_plus=-0.1), "tau_plus"),
    (lambda: S.debiased_nce_from_logits(torch.randn(0, 1), torch.randn(0, 5)), "empty"),
    (lambda: S.debiased_nce_from_logits(torch.randn(3, 2), torch.randn(3, 3, 5)), "per-turn"),
    (lambda: S.debiased_nce_from_logits(torch.full((2, 1), -math.inf), torch.randn(2, 5)), "no positive"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.full((2, 5), -math.inf)), "no negative"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.randn(2, 5), log_floor=torch.zeros(3)), "log_floor"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.randn(2, 5), reduction="avg"), "reduction"),
    (lambda: S.debiased_nce_from_logits(torch.tensor([[float("nan")]]), torch.randn(1, 5)), "pos_logits contains NaN"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.tensor([[0.0, float("nan")], [0.0, 1.0]])),
     "neg_logits contains NaN"),
    (lambda: S.hard_negative_nce_from_logits(torch.randn(2, 1), torch.tensor([[0.0, math.inf], [0.0, 1.0]])), r"\+inf"),
    (lambda: S.debiased_nce_from_logits(torch.tensor([[0.0], [-math.inf]]), torch.randn(2, 5)),
     "anchor 1 has no positive"),
    (lambda: S.debiased_nce(torch.randn(4, 8), torch.randn(5, 8)), "shape"),
    (lambda: S.debiased_nce(torch.randn(4, 1, 8)), "2 views"),
    (lambda: S.debiased_nce(torch.randn(1, 2, 8)), "2 samples"),
    (lambda: S.debiased_nce(torch.randn(4, 2, 8), temperature=0.0), "temperature"),
    # a negative tau+ used to be told that "tau+ = 1 would leave no negatives"
    (lambda: S.debiased_nce(torch.randn(4, 2, 8), tau_plus=-0.1),
     r"got -0\.1: a prior is a probability, never negative"),
    (lambda: S.debiased_nce(torch.randn(4, 2, 8), tau_plus=float("nan")), r"must be in \[0, 1\), got nan"),
    (lambda: S.debiased_nce(torch.randn(4, 2, 8), tau_plus=1.0), "would leave no negatives"),
    (lambda: S.punce_loss(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 0]), 1.5), "prior"),
    (lambda: S.punce_loss(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 2]), 0.5), "labels"),
    (lambda: S.punce_loss(torch.randn(4, 3), torch.tensor([0, 0, 1, 1]), torch.tensor([1, 0, 0, 0]), 0.5),
     "different labels"),
    (lambda: S.punce_loss(torch.randn(4, 3), torch.tensor([0, 1, 2, 2]), torch.tensor([1, -1, 0, 0]), 0.5),
     "no positive"),
    (lambda: S.punce_loss(torch.randn(3, 3), torch.tensor([0, 0, 1]), torch.tensor([1, 1, 0]), 0.5), "no other view"),
    (lambda: S.punce_loss(torch.randn(4, 3), torch.tensor([0, 0, 1]), torch.tensor([1, 1, 0, 0]), 0.5), "source_ids"),
    (lambda: S.punce_loss(torch.randn(0, 3), torch.tensor([], dtype=torch.long), torch.tensor([], dtype=torch.long),
                          0.5), "empty"),
    (lambda: S.supcon_loss(torch.randn(3, 3), torch.tensor([0, 1, 1])), "no positive"),
    (lambda: S.supcon_loss(torch.randn(3, 3), torch.tensor([0.0, 1.0, 1.0])), "integer"),
    # non-finite inputs and hyperparameters used to give a silent 0 / NaN loss
    (lambda: S.hard_negative_nce_from_logits(torch.randn(3, 1), torch.randn(3, 4), 0.1, float("nan")), "beta"),
    (lambda: S.hard_negative_nce(torch.randn(4, 2, 8), beta=float("inf")), "beta"),
    (lambda: S.debiased_nce(torch.randn(4, 2, 8), temperature=math.inf), "temperature"),
    (lambda: S.debiased_nce(torch.randn(4, 8), torch.full((4, 8), math.inf)), "inf"),
    (lambda: S.supcon_loss(torch.full((4, 3), math.inf), torch.tensor([0, 0, 1, 1])), "inf"),
    (lambda: S.punce_loss(torch.full((4, 3), math.inf), torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 0]), 0.5),
     "inf"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.randn(2, 5), 0.1, float("nan")), "log_floor"),
    (lambda: S.debiased_nce_from_logits(torch.randn(2, 1), torch.randn(2, 5), 0.1, torch.tensor([0.0, math.nan])),
     "log_floor"),
]


@pytest.mark.parametrize("call,words", BAD)
def test_bad_input_names_the_problem(call, words):
    with pytest.raises(ValueError, match=words):
        call()


def test_meta_device_mismatch_is_reported():
    with pytest.raises(ValueError, match="device"):
        S.debiased_nce_from_logits(torch.randn(2, 1), torch.randn(2, 5, device="meta"))


@pytest.mark.parametrize("t", [0.0, -0.5, float("inf"), float("nan")])
def test_score_functions_refuse_a_bad_temperature(t):
    """cosine_scores / dot_scores with t = 0 gave +-inf logits, and a negative t flipped every score."""
    from shared_losses.scores import cosine_scores, dot_scores

    a = torch.randn(3, 4)
    for score in (cosine_scores, dot_scores):
        with pytest.raises(ValueError, match="temperature must be finite and > 0"):
            score(a, a, t)
