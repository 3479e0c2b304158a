"""nlp_qt --objective cpc (CPC section 3.3) and --encoder conv: the conv encoder against a float64 loop, the cut of a
batch into sequences, the loss of a batch against cpc_nce on sequences laid out by hand, and a CPC run that trains,
resumes exactly, exports and loads in sentence-transformers with its one encoder's vector."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import shared_losses as S
from nlp_qt.model import ConvEncoder, ModelConfig, QuickThought, load_model
from nlp_qt.objectives import sequence_loss, sequences
from nlp_qt.train import train

from .test_bow_encoder import SENTENCES, assert_encodes_everywhere
from .test_train import _cfg


def test_conv_encoder_matches_a_float64_loop():
    """f(s) = (1/|s|) sum_i ReLU(b + sum_j W_j E[s_{i+j-1}]) over the sentence's positions (zero padding)."""
    torch.manual_seed(0)
    enc = ConvEncoder(ModelConfig(vocab_size=12, word_dim=4, encoder_dim=5, encoder="conv")).double()
    ids = torch.tensor([[3, 1, 7, 9, 0], [2, 2, 2, 2, 11], [5, 0, 0, 0, 0]])  # ids[0, 3] is past the sentence
    lengths = torch.tensor([3, 5, 1])
    got = enc(ids, lengths).detach().numpy()
    E = enc.embed.weight.detach().numpy()
    W = enc.conv.weight.detach().numpy()  # [out, in, 3]
    bias = enc.conv.bias.detach().numpy()
    for b in range(3):
        n = int(lengths[b])
        x = [E[ids[b, i]] if 0 <= i < n else np.zeros(4) for i in range(-1, n + 1)]  # x[i + 1] is word i
        outs = []
        for i in range(n):
            h = bias.copy()
            for j in range(3):
                h += W[:, :, j] @ x[i + j]
            outs.append(np.maximum(h, 0.0))
        assert np.abs(got[b] - np.mean(outs, axis=0)).max() < 1e-12


def test_a_batch_is_cut_at_document_ends_and_every_length_sentences():
    doc = torch.tensor([0, 0, 0, 0, 0, 1, 1, 2, 3, 3, 3])
    cut = sequences(doc, 3)
    assert cut.seq.tolist() == [0, 0, 0, 1, 1, 2, 2, 3, 4, 4, 4]
    assert cut.pos.tolist() == [0, 1, 2, 0, 1, 0, 1, 0, 0, 1, 2]
    assert (cut.count, cut.length, cut.with_future) == (5, 3, 6)
    with pytest.raises(ValueError, match="cpc_length must be >= 2"):
        sequences(doc, 1)


@pytest.mark.parametrize("tau_plus", [0.0, 0.1])
def test_the_batch_loss_is_cpc_nce_on_the_sequences_laid_out_by_hand(tau_plus):
    torch.manual_seed(1)
    model = QuickThought(ModelConfig(vocab_size=10, word_dim=6, encoder_dim=6, encoder="bow", heads="cpc",
                                     cpc_steps=2)).double()
    u = torch.randn(7, 6, dtype=torch.float64)
    doc = torch.tensor([0, 0, 0, 0, 1, 1, 1])  # length 3: [0 1 2] [3] [4 5 6]
    loss, anchors = sequence_loss(model.cpc, u, doc, 3, tau_plus=tau_plus)
    runs = [[0, 1, 2], [3], [4, 5, 6]]
    lat = torch.zeros(3, 3, 6, dtype=torch.float64)
    mask = torch.zeros(3, 3, dtype=torch.bool)
    for s, run in enumerate(runs):
        for t, i in enumerate(run):
            lat[s, t], mask[s, t] = u[i], True
    ctx = torch.zeros(3, 3, 6, dtype=torch.float64)  # each sequence's GRU run alone, on its own positions
    for s, run in enumerate(runs):
        ctx[s, :len(run)] = model.cpc.context(lat[s:s + 1, :len(run)])[0][0]
    pred = model.cpc.loss.predict(ctx)
    want = S.cpc_nce(lat, pred, mask, tau_plus=tau_plus, log_floor="auto" if tau_plus else None)
    assert anchors == 4 and torch.allclose(loss, want, rtol=1e-12, atol=1e-12)
    none, zero = sequence_loss(model.cpc, u[:2], torch.tensor([0, 1]), 3)  # no sentence has a next one
    assert zero == 0 and none.item() == 0.0 and none.requires_grad


def test_cpc_model_has_one_encoder_and_heads_and_embeds_f():
    m = QuickThought(ModelConfig(vocab_size=20, word_dim=6, encoder_dim=8, encoder="conv", heads="cpc"))
    names = sorted(n for n, _ in m.named_parameters())
    assert m.g is None and not any(n.startswith("g.") for n in names)
    assert {"cpc.context.weight_ih_l0", "cpc.loss.predictors.weight", "f.conv.weight"} <= set(names)
    assert m.cpc.loss.predictors.weight.shape == (3 * 8, 8)
    ids, lengths = torch.tensor([[2, 3, 4], [5, 0, 0]]), torch.tensor([3, 1])
    e = m.embed(ids, lengths)
    assert e.shape == (2, 8) and m.embedding_dim == 8
    assert torch.allclose(e, torch.nn.functional.normalize(m.f(ids, lengths), dim=-1))


def test_cpc_run_trains_resumes_exactly_and_loads_everywhere(tmp_path):
    kw = dict(objective="cpc", encoder="conv", cpc_steps=2, cpc_length=4, dev_every=3, epochs=3)
    full = train(_cfg(tmp_path, "full", max_steps=5, **kw))
    train(_cfg(tmp_path, "cut", max_steps=3, **kw))
    cut = train(_cfg(tmp_path, "cut", max_steps=5, **kw))
    assert full["step"] == cut["step"] == 5 and full["final_loss"] == cut["final_loss"]
    assert np.isfinite(full["final_loss"]) and full["dev_losses"] and np.isfinite(full["dev_loss"])
    a = load_file(str(tmp_path / "full/model/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert "cpc.loss.predictors.weight" in a and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((tmp_path / "full/config.json").read_text())["objective"] == "cpc"
    with pytest.raises(ValueError, match="objective: 'cpc' -> 'qt'"):  # a resume with another objective
        train(_cfg(tmp_path, "cut", max_steps=7, encoder="conv", cpc_steps=3, cpc_length=10))

    model, vocab = load_model(tmp_path / "full/model")
    ids, lengths = vocab.batch(SENTENCES)
    want = torch.nn.functional.normalize(model.f(ids, lengths), dim=-1).detach().numpy()
    assert_encodes_everywhere(tmp_path / "full", tmp_path / "exported", want, dim=8)


@pytest.mark.parametrize("kw,message", [
    (dict(cpc_steps=5), "--cpc-steps 5 only applies to --objective cpc"),
    (dict(objective="cpc", cpc_steps=0), "--cpc-steps must be >= 1, got 0"),
    (dict(objective="cpc", cpc_length=1), "--cpc-length must be >= 2, got 1"),
    (dict(objective="cpc", cpc_steps=3, cpc_length=3), "--cpc-steps 3 must be below --cpc-length 3"),
    (dict(conv_width=5), "--conv-width is the conv encoder's"),
    (dict(objective="cpc", gather_across_processes=True), "not available with --objective cpc"),
    (dict(objective="cpc", beta=2.0), "--beta 2 only applies to --objective hard"),
])
def test_cpc_settings_that_cannot_apply_are_refused(tmp_path, kw, message):
    with pytest.raises(ValueError, match=message):
        train(_cfg(tmp_path, "bad", max_steps=1, **kw))
    assert not (tmp_path / "bad").exists()


def test_help_lists_cpc(capsys):
    from nlp_qt.config import from_cli

    with pytest.raises(SystemExit):
        from_cli(["--help"])
    out = capsys.readouterr().out
    assert "cpc" in out and "Contrastive Predictive Coding" in out and "--cpc-steps" in out
