"""Our losses against pytorch-metric-learning's, the library many users already train with: InfoNCE is its
NTXentLoss (and SelfSupervisedLoss around it), SupCon its SupConLoss, value and gradient, in float64. The debiased
loss at tau+ = 0 and the hard-negative loss at beta = 0 reduce to InfoNCE (SPEC's identities), so they equal
NTXentLoss too. docs/losses.md ("Coming from pytorch-metric-learning") shows the same correspondences."""

import pytest
import torch
from pytorch_metric_learning import losses as pml
from pytorch_metric_learning.distances import DotProductSimilarity

import shared_losses as L


def _value_and_grad(fn, *tensors):
    leaves = [t.detach().clone().requires_grad_(True) for t in tensors]
    value = fn(*leaves)
    value.backward()
    return value.detach(), [t.grad for t in leaves]


def _assert_same(ours, theirs, *tensors):
    (v1, g1), (v2, g2) = _value_and_grad(ours, *tensors), _value_and_grad(theirs, *tensors)
    torch.testing.assert_close(v1, v2, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g2):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-9)  # at t = 0.01 the gradients are ~1/t


@pytest.mark.parametrize("views", [2, 3, 4])  # M = V - 1 positives per anchor
@pytest.mark.parametrize("temperature", [0.01, 0.07, 0.5])
def test_info_nce_is_ntxent_over_the_views_of_each_sample(views, temperature):
    g = torch.Generator().manual_seed(10 * views)
    zs = [torch.randn(6, 12, generator=g, dtype=torch.float64) for _ in range(views)]
    labels = torch.arange(6).repeat(views)  # NTXentLoss: rows with the same label are positives, all others negatives
    ntxent = pml.NTXentLoss(temperature=temperature)
    _assert_same(lambda *v: L.info_nce(*v, temperature=temperature),
                 lambda *v: ntxent(torch.cat(v), labels), *zs)
    _assert_same(lambda *v: L.InfoNCELoss(temperature=temperature)(*v),  # the module, and views as [B, V, d]
                 lambda *v: ntxent(torch.cat(v), labels), *zs)
    _assert_same(lambda *v: L.info_nce(torch.stack(v, 1), temperature=temperature),
                 lambda *v: ntxent(torch.cat(v), labels), *zs)
    # the identities: debiased at tau+ = 0 (no floor) and hard-negative at beta = 0 are InfoNCE, so NTXentLoss too
    _assert_same(lambda *v: L.debiased_nce(*v, temperature=temperature, tau_plus=0.0, log_floor=None),
                 lambda *v: ntxent(torch.cat(v), labels), *zs)
    _assert_same(lambda *v: L.hard_negative_nce(*v, temperature=temperature, tau_plus=0.0, beta=0.0, log_floor=None),
                 lambda *v: ntxent(torch.cat(v), labels), *zs)


def test_info_nce_is_self_supervised_ntxent_with_either_similarity():
    """SelfSupervisedLoss(NTXentLoss()) (symmetric, its default) on two views is our two-view InfoNCE; pml's dot
    product normalises unless told not to, so our `similarity="dot"` is DotProductSimilarity(normalize_embeddings=
    False)."""
    g = torch.Generator().manual_seed(1)
    a, b = (0.3 * torch.randn(8, 16, generator=g, dtype=torch.float64) for _ in range(2))
    _assert_same(lambda x, y: L.info_nce(x, y, temperature=0.2),
                 lambda x, y: pml.SelfSupervisedLoss(pml.NTXentLoss(temperature=0.2))(x, y), a, b)
    dot = pml.NTXentLoss(temperature=0.2, distance=DotProductSimilarity(normalize_embeddings=False))
    _assert_same(lambda x, y: L.info_nce(x, y, temperature=0.2, similarity="dot"),
                 lambda x, y: pml.SelfSupervisedLoss(dot)(x, y), a, b)
    one_way = pml.SelfSupervisedLoss(pml.NTXentLoss(temperature=0.2), symmetric=False)(a, b)
    assert not torch.isclose(one_way, L.info_nce(a, b, temperature=0.2))  # its symmetric=False is another loss


@pytest.mark.parametrize("temperature", [0.1, 0.5])
def test_supcon_is_pml_supcon_where_every_row_has_a_positive(temperature):
    g = torch.Generator().manual_seed(2)
    feats = torch.randn(12, 16, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 3])
    _assert_same(lambda f: L.supcon_loss(f, labels, temperature=temperature),
                 lambda f: pml.SupConLoss(temperature=temperature)(f, labels), feats)
    _assert_same(lambda f: L.SupConLoss(temperature=temperature)(f, labels),
                 lambda f: pml.SupConLoss(temperature=temperature)(f, labels), feats)


def test_a_row_without_a_positive_is_refused_where_pml_leaves_it_out_of_the_mean():
    """A difference: pml's SupConLoss averages over the rows that have a positive (a label seen once adds a
    zero it leaves out); ours names the row, since SupCon's L_out is undefined for it (docs/losses.md)."""
    feats = torch.randn(5, 8, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2])
    assert torch.isfinite(pml.SupConLoss(temperature=0.5)(feats, labels))
    with pytest.raises(ValueError, match=r"anchor 4 \(label 2\) has no positive"):
        L.supcon_loss(feats, labels, temperature=0.5)


def test_a_batch_of_one_label_is_supcons_value_where_pml_returns_0():
    """The other difference (docs/losses.md): every row a positive of every other, no negative; pml's SupConLoss
    returns 0, ours L_out as the equation has it, checked against a float64 loop."""
    g = torch.Generator().manual_seed(3)
    feats = torch.randn(6, 8, generator=g, dtype=torch.float64)
    labels = torch.zeros(6, dtype=torch.long)
    assert pml.SupConLoss(temperature=0.5)(feats, labels).item() == 0.0
    z = torch.nn.functional.normalize(feats, dim=1)
    s = z @ z.T / 0.5
    want = 0.0
    for i in range(6):
        others = [a for a in range(6) if a != i]
        log_den = torch.logsumexp(s[i, others], 0)
        want += -sum(float(s[i, p] - log_den) for p in others) / len(others)
    got = L.supcon_loss(feats, labels, temperature=0.5).item()
    assert got > 0 and abs(got - want / 6) < 1e-12


@pytest.mark.parametrize("loss", ["info_nce", "debiased_nce", "hard_negative_nce"])
def test_the_pml_call_with_labels_is_told_what_these_losses_take(loss):
    """pytorch-metric-learning's habit, loss(embeddings, labels): the view losses said only "views must be floating
    point, view 1 is torch.int64" (a probe found it misleading); the message now says what they take and what to
    use for class labels."""
    import shared_losses as L

    with pytest.raises(ValueError, match=r"view 1 is torch.int64: a tensor of labels\? .* not \(embeddings, labels\) "
                                         r".* use supcon_loss\(features, labels\)"):
        getattr(L, loss)(torch.randn(8, 4), torch.arange(8), temperature=0.5)
