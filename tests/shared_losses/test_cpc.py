"""CPC's k-step InfoNCE (shared_losses.cpc_nce, CPCLoss) against its float64 transcription (reference.cpc),
and its identities: K = 1 with one context per sequence is the logit-level InfoNCE / debiased loss."""

import math

import pytest
import torch

import shared_losses as S

from . import reference as R


def _seq(B, T, Tc, K, d, seed, dtype=torch.float64, scale=0.7):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(B, T, d, generator=g, dtype=dtype) * scale
    p = torch.randn(B, Tc, K, d, generator=g, dtype=dtype) * scale
    return z, p


def _close(got: torch.Tensor, terms: dict, valid_shape) -> None:
    B, Tc, K = valid_shape
    for b in range(B):
        for s in range(Tc):
            for k in range(1, K + 1):
                want = terms.get((b, s, k), 0.0)
                assert math.isclose(got[b, s, k - 1].item(), want, rel_tol=1e-9, abs_tol=1e-12), (b, s, k)


@pytest.mark.parametrize("K", [1, 2, 3])
@pytest.mark.parametrize("tau_plus,log_floor", [(0.0, None), (0.1, "auto"), (0.3, -0.5), (0.6, None)])
@pytest.mark.parametrize("negatives", ["mixed", "other_sequences"])
def test_cpc_matches_float64_transcription(K, tau_plus, log_floor, negatives):
    B, T, Tc, d = 3, 5, 4, 6
    z, p = _seq(B, T, Tc, K, d, seed=10 * K + int(tau_plus * 10))
    ref_floor = "min" if log_floor == "auto" else log_floor
    terms, mean = R.cpc(z.tolist(), p.tolist(), t=0.8, tau_plus=tau_plus, log_floor=ref_floor, negatives=negatives)
    kw = dict(temperature=0.8, tau_plus=tau_plus, log_floor=log_floor, negatives=negatives)
    _close(S.cpc_nce(z, p, reduction="none", **kw), terms, (B, Tc, K))
    assert math.isclose(S.cpc_nce(z, p, **kw).item(), mean, rel_tol=1e-9)
    assert math.isclose(S.cpc_nce(z, p, reduction="sum", **kw).item(), sum(terms.values()), rel_tol=1e-9)
    got32 = S.cpc_nce(z.float(), p.float(), **kw)
    assert got32.dtype == torch.float32 and math.isclose(got32.item(), mean, rel_tol=1e-5)


@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_cpc_masked_positions_and_cosine(tau_plus):
    """Sequences of different lengths: absent latents are neither targets, nor contexts, nor negatives."""
    B, T, K, d = 4, 6, 3, 5
    z, p = _seq(B, T, T, K, d, seed=7)
    lengths = [6, 4, 2, 5]
    mask = torch.tensor([[s < n for s in range(T)] for n in lengths])
    mask[3, 1] = False  # a hole inside a sequence
    z_junk = z.clone()
    z_junk[~mask] = 1e3  # what sits at an absent position must not matter
    for similarity in ("dot", "cosine"):
        ref_floor = ("min" if similarity == "dot" else -1 / 0.5) if tau_plus else None
        terms, mean = R.cpc(z.tolist(), p.tolist(), mask=mask.tolist(), t=0.5, tau_plus=tau_plus,
                            log_floor=ref_floor, similarity=similarity)
        assert (3, 0, 1) not in terms and (3, 1, 1) not in terms and (3, 0, 2) in terms
        got = S.cpc_nce(z_junk, p, mask, temperature=0.5, tau_plus=tau_plus, similarity=similarity,
                        reduction="none")
        _close(got, terms, (B, T, K))
        assert math.isclose(S.cpc_nce(z_junk, p, mask, temperature=0.5, tau_plus=tau_plus,
                                      similarity=similarity).item(), mean, rel_tol=1e-9)


def test_cpc_one_step_one_context_is_logit_level_infonce():
    """K = 1, T_c = 1: each sequence's prediction picks z_1 out of every other latent: debiased_nce_from_logits
    with the positive's score and the other B*T - 1 scores, at any tau+ (with the same floor)."""
    B, T, d = 5, 3, 4
    z, p = _seq(B, T, 1, 1, d, seed=3)
    scores = torch.einsum("bd,jd->bj", p[:, 0, 0], z.reshape(B * T, d))
    target = torch.arange(B) * T + 1
    pos = scores.gather(1, target.unsqueeze(1))
    neg = scores.scatter(1, target.unsqueeze(1), float("-inf"))
    for tau_plus, floor in ((0.0, None), (0.2, -1.0)):
        want = S.debiased_nce_from_logits(pos, neg, tau_plus, floor, reduction="none")
        got = S.cpc_nce(z, p, tau_plus=tau_plus, log_floor=floor, reduction="none")[:, 0, 0]
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_cpc_log_space_finite_at_large_scores():
    """Scores far past exp's float32 range stay finite (log space), and agree with float64."""
    z, p = _seq(3, 4, 4, 2, 8, seed=1, scale=1.0)
    z = torch.nn.functional.normalize(z, dim=-1)
    p = torch.nn.functional.normalize(p, dim=-1)
    for tau_plus in (0.0, 0.1):
        got32 = S.cpc_nce(z.float(), p.float(), temperature=0.01, tau_plus=tau_plus, similarity="cosine")
        got64 = S.cpc_nce(z, p, temperature=0.01, tau_plus=tau_plus, similarity="cosine")
        assert torch.isfinite(got32) and math.isclose(got32.item(), got64.item(), rel_tol=1e-4)


def test_cpc_gradients_float64():
    z, p = _seq(2, 4, 3, 2, 3, seed=2)
    z.requires_grad_(True)
    p.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b: S.cpc_nce(a, b, tau_plus=0.1, log_floor=-2.0), (z, p))
    assert torch.autograd.gradcheck(lambda a, b: S.cpc_nce(a, b), (z, p))


def test_cpc_module_holds_one_map_per_step():
    torch.manual_seed(0)
    loss = S.CPCLoss(context_dim=6, latent_dim=4, steps=3, tau_plus=0.05).double()
    z = torch.randn(2, 5, 4, dtype=torch.float64)
    c = torch.randn(2, 5, 6, dtype=torch.float64)
    W = loss.predictors.weight.view(3, 4, 6)  # row block k is W_{k+1}
    pred = torch.einsum("kdc,btc->btkd", W, c)
    torch.testing.assert_close(loss.predict(c), pred)
    per_step = torch.randn(2, 3, 6, dtype=torch.float64)  # context k predicts step k only: predict's diagonal
    torch.testing.assert_close(loss.predict_each(per_step),
                               loss.predict(per_step).diagonal(dim1=1, dim2=2).permute(0, 2, 1))
    torch.testing.assert_close(loss(z, c), S.cpc_nce(z, pred, tau_plus=0.05))
    loss(z, c).backward()
    assert loss.predictors.weight.grad is not None and loss.predictors.weight.grad.abs().sum() > 0
    assert loss.get_config_dict()["steps"] == 3


@pytest.mark.parametrize("call,words", [
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 3, 1, 5)), "predictions must be [B, T_c, K, d]"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 4, 1, 4)), "1 <= T_c <= T"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 3, 0, 4)), "K = 0"),
    (lambda: S.cpc_nce(torch.randn(2, 1, 4), torch.randn(2, 1, 1, 4)), "no prediction has a target"),
    (lambda: S.cpc_nce(torch.randn(1, 3, 4), torch.randn(1, 2, 1, 4), negatives="other_sequences"),
     "needs B >= 2"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 2, 1, 4), negatives="same"), "negatives must be one of"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 2, 1, 4), torch.ones(2, 3)), "mask must be a bool"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4), torch.randn(2, 2, 1, 4), tau_plus=1.0), "tau_plus"),
    (lambda: S.cpc_nce(torch.randn(2, 3, 4) * 1e30, torch.randn(2, 2, 1, 4) * 1e30), "overflow"),
    (lambda: S.CPCLoss(4, 4, steps=0), "steps must be a whole number"),
    (lambda: S.CPCLoss(4, 4, log_floor="min"), "log_floor must be None, a float, a tensor or 'auto'"),
    (lambda: S.CPCLoss(4, 4, 3, 1.0, 0.0, "cosine"), "log_floor must be None"),  # the docs' old positional order
    (lambda: S.CPCLoss(4, 4).predict(torch.randn(2, 3, 5)), "context must be [B, T_c, 4]"),
    (lambda: S.CPCLoss(4, 4).predict_each(torch.randn(2, 2, 4)), "contexts must be [B, 3, 4]"),
])
def test_cpc_bad_input_names_the_problem(call, words):
    with pytest.raises(ValueError) as err:
        call()
    assert words in str(err.value)


@pytest.mark.parametrize("similarity", ["dot", "cosine"])
@pytest.mark.parametrize("K,Tc", [(1, 4), (2, 4), (3, 2)])
def test_cpc_unmasked_paper_loss_takes_the_cross_entropy_path_with_the_same_values_and_gradients(similarity, K, Tc):
    """Without a mask, with mixed negatives and tau+ = 0, eq. 4 is the cross-entropy of each prediction's whole row
    against its target column; cpc_nce computes it so (one fused pass). An all-True mask takes the general path:
    both give the same terms, reductions and gradients."""
    z, p = _seq(3, 4, Tc, K, 5, seed=K)
    full = torch.ones(3, 4, dtype=torch.bool)
    for reduction in ("none", "sum", "mean"):
        fast = S.cpc_nce(z, p, temperature=0.4, similarity=similarity, reduction=reduction)
        general = S.cpc_nce(z, p, full, temperature=0.4, similarity=similarity, reduction=reduction)
        torch.testing.assert_close(fast, general, rtol=1e-12, atol=1e-12)
    grads = []
    for mask in (None, full):
        zz, pp = z.clone().requires_grad_(), p.clone().requires_grad_()
        S.cpc_nce(zz, pp, mask, temperature=0.4, similarity=similarity).backward()
        grads.append((zz.grad, pp.grad))
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="overflow"):  # the fast path names an overflow as the general one does
        S.cpc_nce(z.float() * 1e30, p.float() * 1e30)


@pytest.mark.parametrize("similarity", ["dot", "cosine"])
@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_cpc_padding_of_any_value_reaches_no_gradient(similarity, tau_plus):
    """NaN or inf at absent latents (and at absent contexts' predictions) gave a finite loss but NaN gradients
    (0 * NaN in the scores' backward); now the loss and every gradient equal those of zero padding."""
    z, p = _seq(3, 5, 5, 2, 4, seed=3)
    mask = torch.tensor([[s < n for s in range(5)] for n in (5, 3, 4)])
    grads = []
    for pad in (0.0, float("nan"), float("inf")):
        zz, pp = z.clone(), p.clone()
        zz[~mask], pp[~mask] = pad, pad
        zz.requires_grad_(True)
        pp.requires_grad_(True)
        loss = S.cpc_nce(zz, pp, mask, tau_plus=tau_plus, similarity=similarity, temperature=0.5)
        loss.backward()
        assert torch.isfinite(zz.grad).all() and torch.isfinite(pp.grad).all()
        assert (zz.grad[~mask] == 0).all() and (pp.grad[~mask] == 0).all()
        grads.append((loss.detach(), zz.grad, pp.grad))
    for other in grads[1:]:
        for a, b in zip(grads[0], other):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_cpc_steps_without_a_target_in_the_batch_are_left_out_of_the_mean():
    """K = 10 on T = 4 positions: steps 4..10 have no target anywhere; the mean is that of steps 1..3 (documented;
    the applications refuse such a K up front)."""
    z, p = _seq(2, 4, 4, 10, 3, seed=5)
    torch.testing.assert_close(S.cpc_nce(z, p), S.cpc_nce(z, p[:, :, :3]))
    assert (S.cpc_nce(z, p, reduction="none")[:, :, 3:] == 0).all()
