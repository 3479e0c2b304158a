"""The loss core as a user of torch's own tools meets it: second derivatives, ``torch.func``, tensors and numbers
where the functions take options, half-precision scores, the modules' options, and the errors for what it cannot
take. Each case here was a silent wrong number or an unclear error before."""

import copy

import numpy as np
import pytest
import torch

import shared_losses as S

D64 = torch.float64


def views(B=5, V=2, d=6, seed=0, dtype=D64):
    return torch.randn(B, V, d, generator=torch.Generator().manual_seed(seed), dtype=dtype)


FAST_PATH = [  # the losses whose row-wise log-sum-exp reuses the score matrix's memory
    lambda v: S.info_nce(v, temperature=0.5),
    lambda v: S.debiased_nce(v, temperature=0.5, tau_plus=0.1),
    lambda v: S.debiased_nce(v, temperature=0.3, tau_plus=0.2, similarity="dot"),
    lambda v: S.hard_negative_nce(v, temperature=0.5, tau_plus=0.1, beta=0.0),
]


@pytest.mark.parametrize("loss", FAST_PATH)
def test_second_derivatives_are_exact_inside_twice_differentiable_and_refused_outside(loss):
    x = views(4, 2, 5).requires_grad_()
    with S.twice_differentiable():
        assert torch.autograd.gradgradcheck(loss, (x,))
        exact = torch.autograd.functional.hessian(loss, x.detach())
    # outside it the first derivative is the same, and a second one raises instead of being wrong
    g, = torch.autograd.grad(loss(x), x)
    with S.twice_differentiable():
        g_exact, = torch.autograd.grad(loss(x), x)
    assert torch.allclose(g, g_exact, rtol=0, atol=1e-12)
    with pytest.raises(RuntimeError, match="twice_differentiable"):
        g, = torch.autograd.grad(loss(x), x, create_graph=True)
        g.sum().backward()
    # torch.func takes the out-of-place path by itself: its Hessian is the exact one
    assert torch.allclose(torch.func.hessian(loss)(x.detach()), exact, rtol=0, atol=1e-10)
    assert torch.allclose(torch.func.grad(loss)(x.detach()), g_exact, rtol=0, atol=1e-12)


def test_twice_differentiable_restores_the_fast_path_and_nests():
    x = views().requires_grad_()
    with S.twice_differentiable():
        with S.twice_differentiable():
            pass
        torch.autograd.grad(S.info_nce(x), x, create_graph=True)  # still inside the outer block
    with pytest.raises(RuntimeError, match="create_graph"):
        g, = torch.autograd.grad(S.info_nce(x), x, create_graph=True)


def test_temperature_a_learned_tensor_is_refused_a_plain_number_of_any_kind_taken():
    z1, z2 = views(dtype=torch.float32).unbind(1)
    log_t = torch.nn.Parameter(torch.tensor(-1.0))
    with pytest.raises(ValueError, match="requires grad.*_from_logits"):
        S.info_nce(z1, z2, temperature=log_t.exp())
    with pytest.raises(ValueError, match="requires grad"):
        S.supcon_loss(torch.randn(4, 3), torch.tensor([1, 1, -1, -1]), temperature=log_t.exp())
    with pytest.raises(ValueError, match=r"one number, got a tensor of shape \(2,\)"):
        S.info_nce(z1, z2, temperature=torch.tensor([0.5, 0.2]))
    with pytest.raises(ValueError, match="must be a number, got str"):
        S.info_nce(z1, z2, temperature="0.5")
    ref = S.info_nce(z1, z2, temperature=0.5)
    for t in (np.float32(0.5), np.float64(0.5), torch.tensor(0.5), 0.5):
        assert torch.equal(S.info_nce(z1, z2, temperature=t), ref)
    # the way to learn it: scores divided by it, into a logit-level loss (its gradient reaches it)
    scores = S.cosine_scores(z1, z2) / log_t.exp()
    n = scores.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    S.info_nce_from_logits(scores.diagonal(), scores[off].view(n, n - 1)).backward()
    assert log_t.grad is not None and log_t.grad != 0


def test_label_pull_and_log_floor_take_numbers_as_their_siblings_do():
    """label_pull refuses a learned tensor and a bool as temperature, tau_plus and prior do; a numpy float floor is a
    floor like Python's."""
    feats, labels, roles = torch.randn(4, 8), torch.arange(2).repeat(2), torch.tensor([1, 0, 1, 0])
    with pytest.raises(ValueError, match="label_pull is a tensor that requires grad"):
        S.punce_loss(feats, labels, roles, prior=0.3, label_pull=torch.tensor(0.5, requires_grad=True))
    with pytest.raises(ValueError, match="label_pull must be a number, got bool"):
        S.punce_loss(feats, labels, roles, prior=0.3, label_pull=True)
    ref = S.punce_loss(feats, labels, roles, prior=0.3, label_pull=0.5)
    for v in (np.float32(0.5), torch.tensor(0.5)):
        assert torch.equal(S.punce_loss(feats, labels, roles, prior=0.3, label_pull=v), ref)
    pos, neg = torch.randn(3, 1), torch.randn(3, 5)
    ref = S.debiased_nce_from_logits(pos, neg, 0.1, -2.0)
    for floor in (np.float32(-2.0), np.float64(-2.0), -2):
        assert torch.equal(S.debiased_nce_from_logits(pos, neg, 0.1, floor), ref)
    with pytest.raises(ValueError, match="log_floor must be None, a float or a \\[B\\] tensor, got bool"):
        S.debiased_nce_from_logits(pos, neg, 0.1, True)


def test_views_that_are_not_float_tensors_are_named():
    z1, z2 = views(dtype=torch.float32).unbind(1)
    with pytest.raises(ValueError, match="view 2 is float .*temperature= .* by name"):
        S.info_nce(z1, z2, 0.5)
    with pytest.raises(ValueError, match="view 0 is ndarray"):
        S.info_nce(z1.numpy(), z2.numpy())
    with pytest.raises(ValueError, match="view 1 is torch.int64"):
        S.info_nce([z1, z2.long()])
    assert torch.equal(S.info_nce(v for v in (z1, z2)), S.info_nce(z1, z2))  # any iterable of views


def test_a_floor_tensor_of_nan_is_refused_at_the_embedding_level():
    z = views(4, 2, 3)
    with pytest.raises(ValueError, match="log_floor contains NaN or \\+inf"):
        S.debiased_nce(z, tau_plus=0.1, log_floor=torch.full((8,), float("nan"), dtype=D64))
    with pytest.raises(ValueError, match="log_floor contains NaN or \\+inf"):
        S.hard_negative_nce(z, tau_plus=0.1, beta=1.0, log_floor=torch.full((8,), float("inf"), dtype=D64))
    fine = torch.full((8,), -2.0, dtype=D64)
    assert torch.equal(S.debiased_nce(z, tau_plus=0.1, log_floor=fine), S.debiased_nce(z, tau_plus=0.1,
                                                                                         log_floor=-2.0))


def test_an_anchor_without_negatives_is_named_before_the_floor_it_makes_infinite():
    pos = torch.tensor([[1.0], [0.5]])
    neg = torch.tensor([[0.2, -0.3], [float("-inf"), float("-inf")]])
    with pytest.raises(ValueError, match="anchor 1 has no negative"):
        S.debiased_nce_from_logits(pos, neg, 0.1, S.log_floor_min_negative(neg))


def test_an_absent_turn_names_anchor_and_turn_and_its_filled_negatives_do_not_count():
    inf = float("-inf")
    pos = torch.tensor([[1.0, 0.5], [0.8, inf]])
    neg = torch.randn(2, 2, 3)
    neg[1, 1] = inf
    with pytest.raises(ValueError, match=r"anchor 1, turn 1 has no negative .*filled"):
        S.debiased_nce_from_logits(pos, neg, 0.1, -2.0)
    a, b = neg.clone(), neg.clone()
    a[1, 1], b[1, 1] = 0.0, torch.tensor([5.0, -3.0, 1.0])
    la = S.debiased_nce_from_logits(pos, a, 0.1, -2.0, reduction="none")
    assert torch.equal(la, S.debiased_nce_from_logits(pos, b, 0.1, -2.0, reduction="none"))
    # anchor 1's loss is its one present turn's, with that turn's negatives
    assert torch.allclose(la[1], S.debiased_nce_from_logits(pos[1:, :1], neg[1:, 0], 0.1, -2.0), rtol=0, atol=1e-6)


def test_half_precision_scores_are_computed_in_float32():
    a, b = torch.randn(6, 8), torch.randn(6, 8)
    ah, bh = a.bfloat16(), b.bfloat16()
    for fn in (S.cosine_scores, S.dot_scores):
        got = fn(ah, bh, 0.01)
        assert got.dtype == torch.float32
        assert torch.allclose(got, fn(ah.float(), bh.float(), 0.01), rtol=0, atol=1e-4)
    score = S.BilinearScore(8)
    got = score(ah, bh)
    assert got.dtype == torch.float32 and torch.allclose(got, score(ah.float(), bh.float()), rtol=1e-6, atol=1e-5)
    with pytest.raises(ValueError, match="float64 .* W of torch.float32"):
        score(a.double(), b.double())
    wide = copy.deepcopy(score).double()
    assert torch.allclose(wide(a.double(), b.double()), score(a, b).double(), rtol=1e-5, atol=1e-5)
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast casts the matmuls itself, as before
        assert score(a, b).dtype == torch.bfloat16


MODULES = [  # (module with reduction="none", the function it calls, inputs)
    (lambda r: S.InfoNCELoss(0.5, reduction=r), lambda x: S.info_nce(x, temperature=0.5, reduction="none"), "views"),
    (lambda r: S.DebiasedNCELoss(0.5, 0.1, reduction=r),
     lambda x: S.debiased_nce(x, temperature=0.5, tau_plus=0.1, reduction="none"), "views"),
    (lambda r: S.HardNegativeNCELoss(0.5, 0.1, 1.0, reduction=r),
     lambda x: S.hard_negative_nce(x, temperature=0.5, tau_plus=0.1, beta=1.0, reduction="none"), "views"),
    (lambda r: S.SupConLoss(0.5, reduction=r), lambda f, y: S.supcon_loss(f, y, 0.5, reduction="none"), "labels"),
    (lambda r: S.PUNCELoss(0.4, 0.5, reduction=r),
     lambda f, s, y: S.punce_loss(f, s, y, 0.4, 0.5, reduction="none"), "pu"),
    (lambda r: S.SCLPULoss(0.5, reduction=r), lambda f, s, y: S.scl_pu_loss(f, s, y, 0.5, reduction="none"), "pu"),
]


@pytest.mark.parametrize("make, fn, kind", MODULES)
def test_modules_take_the_reduction_of_their_functions(make, fn, kind):
    feats = torch.randn(8, 5, generator=torch.Generator().manual_seed(1), dtype=D64)
    src = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    inputs = {"views": (feats.view(4, 2, 5),), "labels": (feats, torch.tensor([1, 1, 1, 1, -1, -1, -1, -1])),
              "pu": (feats, src, torch.tensor([1, 1, 0, 0, 0, 0, 1, 1]))}[kind]
    per_anchor = make("none")(*inputs)
    assert per_anchor.shape == (8,) and torch.equal(per_anchor, fn(*inputs))
    assert torch.allclose(make("mean")(*inputs), per_anchor.mean(), rtol=0, atol=1e-12)
    assert torch.allclose(make("sum")(*inputs), per_anchor.sum(), rtol=0, atol=1e-12)
    assert make("none").get_config_dict()["reduction"] == "none"
    with pytest.raises(ValueError, match="reduction must be one of"):
        make("avg")


def test_logit_module_takes_reduction_and_host_checks():
    pos, neg = torch.randn(6, 1, dtype=D64), torch.randn(6, 9, dtype=D64)
    floor = S.log_floor_min_negative(neg)
    ref = S.debiased_nce_from_logits(pos, neg, 0.1, floor, reduction="none")
    assert torch.equal(S.DebiasedNCEFromLogits(0.1, reduction="none")(pos, neg, floor), ref)
    assert torch.equal(S.DebiasedNCEFromLogits(0.1, host_checks=False)(pos, neg, floor), ref.mean())
    hard = S.DebiasedNCEFromLogits(0.1, beta=1.0, reduction="sum")(pos, neg, floor)
    assert torch.allclose(hard, S.hard_negative_nce_from_logits(pos, neg, 0.1, 1.0, floor).mul(6), rtol=1e-12)


def test_modules_refuse_bad_options_when_made_not_at_the_first_batch():
    with pytest.raises(ValueError, match="similarity must be 'cosine' or 'dot', got 'euclid'"):
        S.InfoNCELoss(similarity="euclid")
    with pytest.raises(ValueError, match="log_floor must be None, a float, a tensor or 'auto', got 'nope'"):
        S.DebiasedNCELoss(log_floor="nope")
    with pytest.raises(ValueError, match="log_floor must be a number or -inf"):
        S.HardNegativeNCELoss(log_floor=float("nan"))
    assert S.DebiasedNCELoss(log_floor=None).log_floor is None and S.DebiasedNCELoss(log_floor=-2).log_floor == -2


def test_punce_weights_checks_its_inputs_and_says_what_its_rows_sum_to():
    src, lab = torch.tensor([0, 0, 1, 1, 2]), torch.tensor([1, 1, 0, 0, -1])
    W = S.punce_weights(src, lab, 0.4, dtype=D64)
    assert W.dtype == D64 and torch.allclose(W[:4].sum(1), torch.ones(4, dtype=D64))
    assert not W[4].any()  # the lone labeled negative: no other view with its label, a row of zeros (documented)
    for kw, msg in [(dict(source_ids=src.numpy()), "source_ids must be a torch.Tensor"),
                    (dict(labels=torch.tensor([5, 5, 0, 0, 1])), r"labels must be in \{-1, 0, 1\}.*\[5\]"),
                    (dict(labels=lab[:3]), r"labels must have shape \[5\]"),
                    (dict(dtype=torch.int64), "floating-point torch dtype"),
                    (dict(self_offset=1), r"self_offset must be a whole number in \[0, 0\]"),
                    (dict(cand_source_ids=src), "together")]:
        args = {"source_ids": src, "labels": lab, "prior": 0.4, **kw}
        with pytest.raises(ValueError, match=msg):
            S.punce_weights(**args)


def test_cpc_predictions_take_the_contexts_dtype_and_nan_latents_are_not_called_an_overflow():
    loss = S.CPCLoss(context_dim=4, latent_dim=3, steps=2)
    ctx = torch.randn(2, 5, 4, dtype=D64)
    w = loss.predictors.weight.detach().double().view(2, 3, 4)
    assert torch.allclose(loss.predict(ctx), torch.einsum("kdc,btc->btkd", w, ctx), rtol=0, atol=1e-6)
    assert torch.allclose(loss.predict(ctx)[:, :2].diagonal(dim1=1, dim2=2).permute(0, 2, 1),
                          loss.predict_each(ctx[:, :2]), rtol=0, atol=1e-6)
    lat = torch.randn(2, 5, 3)
    lat[0, 1] = float("nan")
    with pytest.raises(ValueError, match="latents or the predictions hold NaN or inf"):
        S.cpc_nce(lat, torch.randn(2, 5, 2, 3))
