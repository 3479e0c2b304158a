"""``host_checks=False`` of the logit-level losses: the checked path's arithmetic (bit for bit, so the float64
transcriptions of test_equations hold for it too) without one value reaching the host; bad values become a
non-finite loss instead of an error.

"Without one value reaching the host" is tested on the meta device, whose tensors have shapes but no data: any
``.item()``, ``.tolist()``, ``bool(t)`` or data-dependent shape there raises. That is what a CUDA graph cannot
capture and what makes Python wait for the GPU."""

import re

import pytest
import torch

import shared_losses as S

from . import reference as R


def logits(B, M, N, per_turn=False, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    pos = torch.randn(B, M, generator=g, dtype=dtype) * 3
    neg = torch.randn(*((B, M, N) if per_turn else (B, N)), generator=g, dtype=dtype) * 3
    # absent negatives, as the RL agent's own keys: -inf in every row
    neg[..., torch.arange(B) % N] = float("-inf")
    return pos, neg


CASES = [  # (loss, kwargs)
    (S.info_nce_from_logits, {}),
    (S.debiased_nce_from_logits, {"tau_plus": 0.1}),
    (S.debiased_nce_from_logits, {"tau_plus": 0.05, "log_floor": -2.0}),
    (S.debiased_nce_from_logits, {"tau_plus": 0.3, "log_floor": "min-negative"}),
    (S.hard_negative_nce_from_logits, {"tau_plus": 0.1, "beta": 1.0, "log_floor": "min-negative"}),
    (S.hard_negative_nce_from_logits, {"tau_plus": 0.0, "beta": 0.5}),
]


@pytest.mark.parametrize("per_turn", [False, True])
@pytest.mark.parametrize("M", [1, 2])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_no_host_read_and_the_same_bits(case, M, per_turn):
    loss, kw = CASES[case]
    pos, neg = logits(9, M, 12, per_turn, seed=case)
    if kw.get("log_floor") == "min-negative":
        kw = {**kw, "log_floor": S.log_floor_min_negative(neg)}
    meta = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    for reduction in ("mean", "none"):
        checked = loss(pos, neg, **kw, reduction=reduction)
        free = loss(pos, neg, **kw, reduction=reduction, host_checks=False)
        assert torch.equal(free, checked)
        out = loss(pos.to("meta"), neg.to("meta"), **meta, reduction=reduction, host_checks=False)
        assert out.shape == checked.shape  # computed without reading a value
        with pytest.raises((RuntimeError, NotImplementedError)):  # the checked path reads values
            loss(pos.to("meta"), neg.to("meta"), **meta, reduction=reduction)


def test_no_host_read_matches_the_float64_transcription():
    pos, neg = logits(6, 2, 7, dtype=torch.float64)
    got = S.debiased_nce_from_logits(pos, neg, tau_plus=0.1, log_floor=-1.5, reduction="none", host_checks=False)
    want = R.debiased(pos.tolist(), neg.tolist(), tau_plus=0.1, log_floor=-1.5)
    torch.testing.assert_close(got, torch.tensor(want, dtype=torch.float64), rtol=1e-12, atol=1e-12)


def test_bad_values_give_a_non_finite_loss_instead_of_an_error():
    pos, neg = logits(5, 1, 6)
    pos[2, 0] = float("nan")
    with pytest.raises(ValueError, match="pos_logits contains NaN"):
        S.debiased_nce_from_logits(pos, neg, tau_plus=0.1)
    assert not torch.isfinite(S.debiased_nce_from_logits(pos, neg, tau_plus=0.1, host_checks=False))
    pos, neg = logits(5, 1, 6)
    pos[1, 0] = float("-inf")  # an anchor without its positive
    assert not torch.isfinite(S.info_nce_from_logits(pos, neg, host_checks=False))
    # shapes are still checked on the host
    with pytest.raises(ValueError, match="pos_logits has 5 anchors but neg_logits has 4"):
        S.info_nce_from_logits(pos, neg[:4], host_checks=False)


def test_embedding_scores_that_overflow_are_refused_not_nan():
    """Issue 46, item 14: dot products of vectors of norm 1e20 overflow float32; the loss was NaN, silently."""
    g = torch.Generator().manual_seed(0)
    z1, z2 = torch.randn(8, 16, generator=g), torch.randn(8, 16, generator=g)
    assert torch.isfinite(S.info_nce(z1, z2, similarity="dot"))
    for loss in (S.info_nce, S.debiased_nce):
        with pytest.raises(ValueError, match="overflow torch.float32.*similarity='cosine'"):
            loss(z1 * 1e20, z2 * 1e20, similarity="dot")
    with pytest.raises(ValueError, match="overflow torch.float32.*raise the temperature"):
        S.info_nce(z1, z2, temperature=1e-45)
    assert torch.isfinite(S.info_nce(z1.double() * 1e20, z2.double() * 1e20, similarity="dot"))  # float64 holds them


def test_labelled_losses_refuse_scores_that_overflow_and_a_batch_of_one_source():
    """puNCE, SupCon and SCL-PU gave inf or NaN at a temperature whose scores overflow float32 (the InfoNCE family
    names it), and puNCE / SCL-PU a constant 0 for a batch of one source (no negatives; debiased refuses it)."""
    g = torch.Generator().manual_seed(0)
    f = torch.nn.functional.normalize(torch.randn(16, 8, generator=g), dim=1)
    ids, labels = torch.arange(8).repeat(2), torch.tensor([1, 0, 0, -1, 1, 0, 0, 0]).repeat(2)
    losses = {"punce": lambda t, x=f, i=ids, y=labels: S.punce_loss(x, i, y, prior=0.4, temperature=t),
              "supcon": lambda t, x=f, i=ids, y=labels: S.supcon_loss(x, y, temperature=t),
              "scl_pu": lambda t, x=f, i=ids, y=labels: S.scl_pu_loss(x, i, y, temperature=t)}
    for name, loss in losses.items():
        assert torch.isfinite(loss(0.01)), name
        for t in (1e-38, 1e-40):
            with pytest.raises(ValueError, match=r"overflow torch.float32: the loss is infinite or NaN .*raise the "
                                                 "temperature"):
                loss(t)
        assert torch.isfinite(loss(1e-38, f.double())), name  # float64 holds those scores
    one = torch.zeros(2, dtype=torch.long)
    for loss in (lambda: S.punce_loss(f[:2], one, one, prior=0.4), lambda: S.scl_pu_loss(f[:2], one, one)):
        with pytest.raises(ValueError, match="anchor 0 has no candidate of another source: need at least 2 sources"):
            loss()


def test_score_functions_and_the_floor_name_bad_shapes():
    with pytest.raises(ValueError, match="a has 8 features per row and b has 6"):
        S.cosine_scores(torch.randn(4, 8), torch.randn(4, 6))
    with pytest.raises(ValueError, match="b must be 2-D"):
        S.dot_scores(torch.randn(4, 8), torch.randn(8))
    with pytest.raises(ValueError, match=r"neg_logits has no negatives \(shape \(3, 0\)\)"):
        S.log_floor_min_negative(torch.zeros(3, 0))
    with pytest.raises(ValueError, match="neg_logits is an empty batch"):
        S.log_floor_min_negative(torch.zeros(0, 4))


def test_a_prior_array_and_a_bilinear_size_are_refused_by_name():
    """prior=np.array([0.3]) was numpy's raw TypeError; BilinearScore(-1) torch's "negative dimension", and
    BilinearScore(0) was taken."""
    import numpy as np

    f = torch.nn.functional.normalize(torch.randn(8, 4, generator=torch.Generator().manual_seed(0)), dim=1)
    ids, labels = torch.arange(4).repeat(2), torch.tensor([1, 0, 0, 0]).repeat(2)
    assert torch.isfinite(S.punce_loss(f, ids, labels, prior=np.float64(0.3)))  # a NumPy scalar is one number
    assert S.punce_loss(f, ids, labels, prior=np.array(0.3)) == S.punce_loss(f, ids, labels, prior=0.3)
    with pytest.raises(ValueError, match=r"prior must be one number, got an array of shape \(1,\) \(pass "):
        S.punce_loss(f, ids, labels, prior=np.array([0.3]))
    with pytest.raises(ValueError, match=r"prior must be one number, got an array of shape \(2,\)$"):
        S.punce_loss(f, ids, labels, prior=np.array([0.3, 0.4]))
    from shared_losses import BilinearScore

    for dim in (-1, 0, 2.0, True):
        with pytest.raises(ValueError, match="BilinearScore\\(dim\\): dim is the features' size"):
            BilinearScore(dim)
    assert BilinearScore(np.int64(3)).W.shape == (3, 3)


def test_bilinear_score_refuses_inputs_that_are_not_two_batches():
    """A 3-D key batch was turned around whole by ``.T`` (scores of the wrong pairs, no error) and a 1-D query gave a
    vector; both are refused naming the shapes. vmap over runs (the stacked update's use) sees 2-D batches."""
    score = S.BilinearScore(4)
    a, b = torch.randn(3, 4), torch.randn(5, 4)
    assert score(a, b).shape == (3, 5)
    for x, y in ((a[0], b), (a, b[None]), (a[None], b[None])):
        with pytest.raises(ValueError, match=r"BilinearScore\(4\) scores two batches of features \[N, 4\] and \[M, "
                                             rf"4\], got shapes {re.escape(str(tuple(x.shape)))} and"):
            score(x, y)
    batched = torch.func.vmap(score)(torch.stack([a, a + 1]), torch.stack([b, b - 1]))
    assert torch.allclose(batched[1], score(a + 1, b - 1), atol=1e-5)


def test_cpc_loss_names_latents_of_another_size():
    """CPCLoss(16, 8) given latents of 10 features blamed the predictions ("predictions must be [B, T_c, K, d] = [4,
    T_c, K, 10]"), which the module makes itself."""
    loss = S.CPCLoss(16, 8)
    with pytest.raises(ValueError, match=r"^latents must be \[B, T, latent_dim\] = \[B, T, 8\], got \[4, 6, 10\]"):
        loss(torch.randn(4, 6, 10), torch.randn(4, 6, 16))
    assert torch.isfinite(loss(torch.randn(4, 6, 8), torch.randn(4, 6, 16)))
