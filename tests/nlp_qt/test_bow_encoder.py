"""nlp_qt --encoder bow: S2V's bag-of-words encoder (mean word embedding) trained by the quick-thought objectives.
Its forward pass against a float64 loop over each sentence's words, its training run (resume, export, loading in
sentence-transformers), its evaluation embedding from word2vec vectors, and the errors for sizes that cannot work."""

import json
import warnings

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import nlp_qt
from nlp_qt.model import BowEncoder, ModelConfig, QuickThought, load_model, save_model
from nlp_qt.train import train

from .test_train import _cfg, _word_vectors

SENTENCES = ["Book 1 tells part 3 of the story about the cat.", "the dog zebra-unknown story",
             "cat", "A good line here."]


def _reference_bow(weight: np.ndarray, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """f(s) = (1/|s|) sum over the sentence's first |s| tokens of their embedding rows, one word at a time."""
    out = np.zeros((len(ids), weight.shape[1]), dtype=np.float64)
    for b in range(len(ids)):
        for t in range(int(lengths[b])):
            out[b] += weight[ids[b, t]]
        out[b] /= lengths[b]
    return out


def test_bow_forward_and_gradient_match_a_float64_loop():
    torch.manual_seed(0)
    enc = BowEncoder(ModelConfig(vocab_size=12, word_dim=5, encoder_dim=5, encoder="bow")).double()
    ids = torch.tensor([[3, 1, 7, 0, 0], [2, 2, 2, 2, 11], [5, 0, 0, 0, 0]])  # 1 = <unk> counts, 0 = padding
    lengths = torch.tensor([3, 5, 1])
    ids[0, 3] = 9  # a token past the sentence's length is not part of it, whatever its id
    got = enc(ids, lengths)
    want = _reference_bow(enc.embed.weight.detach().numpy(), ids.numpy(), lengths.numpy())
    assert np.abs(got.detach().numpy() - want).max() < 1e-12
    # d/dE[w] of sum_b c_b . f(s_b) = sum over occurrences of w in s_b of c_b / |s_b|
    c = torch.randn(3, 5, dtype=torch.float64)
    (got * c).sum().backward()
    grad = np.zeros((12, 5))
    for b in range(3):
        for t in range(int(lengths[b])):
            grad[ids[b, t]] += c[b].numpy() / float(lengths[b])
    grad[0] = 0.0  # the padding row never learns
    assert np.abs(enc.embed.weight.grad.numpy() - grad).max() < 1e-12
    assert not enc.embed.weight.grad[9].any()


def test_bow_model_has_two_embedding_tables_and_no_gru():
    m = QuickThought(ModelConfig(vocab_size=20, word_dim=6, encoder_dim=6, encoder="bow"))
    assert sorted(n for n, _ in m.named_parameters()) == ["f.embed.weight", "g.embed.weight"]
    assert not torch.equal(m.f.embed.weight, m.g.embed.weight)
    e = m.embed(torch.tensor([[2, 3, 4], [5, 0, 0]]), torch.tensor([3, 1]))
    assert e.shape == (2, 12) and torch.allclose(e[:, :6].norm(dim=1), torch.ones(2))


@pytest.mark.parametrize("kwargs, message", [
    (dict(encoder="bow", word_dim=6, encoder_dim=8), "encoder_dim must equal word_dim"),
    (dict(encoder="lstm", word_dim=6, encoder_dim=6), "encoder must be one of gru, bow"),
])
def test_bad_bow_model_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ModelConfig(vocab_size=20, **kwargs)


def test_bow_with_another_encoder_dim_is_refused_before_reading_the_corpus(tmp_path):
    with pytest.raises(ValueError, match="--encoder-dim must equal --word-dim.*set --encoder-dim 8"):
        train(_cfg(tmp_path, "bad", encoder="bow", word_dim=8, encoder_dim=6))
    assert not (tmp_path / "bad").exists()


def test_bow_run_trains_resumes_exactly_and_loads_everywhere(tmp_path):
    full = train(_cfg(tmp_path, "full", encoder="bow", max_steps=5, objective="debiased", tau_plus=0.01))
    train(_cfg(tmp_path, "cut", encoder="bow", max_steps=3, objective="debiased", tau_plus=0.01))
    cut = train(_cfg(tmp_path, "cut", encoder="bow", max_steps=5, objective="debiased", tau_plus=0.01))
    assert full["step"] == cut["step"] == 5 and full["final_loss"] == cut["final_loss"]
    a = load_file(str(tmp_path / "full/model/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert sorted(a) == ["f.embed.weight", "g.embed.weight"] and all(torch.equal(a[k], b[k]) for k in a)
    untrained = train(_cfg(tmp_path, "zero", encoder="bow", max_steps=0))
    assert untrained["step"] == 0
    z = load_file(str(tmp_path / "zero/model/model.safetensors"))
    assert not torch.equal(a["f.embed.weight"], z["f.embed.weight"])  # training moved the word vectors
    assert json.loads((tmp_path / "full/config.json").read_text())["encoder"] == "bow"
    with pytest.raises(ValueError, match="encoder: 'bow' -> 'gru'"):  # a resume with the other encoder is refused
        train(_cfg(tmp_path, "cut", max_steps=7, objective="debiased", tau_plus=0.01))

    # the evaluation embedding is [f/|f| ; g/|g|] of the mean word vectors, in every way of loading the run
    model, vocab = load_model(tmp_path / "full/model")
    assert model.cfg.encoder == "bow"
    ids, lengths = vocab.batch(SENTENCES)
    f = _reference_bow(a["f.embed.weight"].double().numpy(), ids.numpy(), lengths.numpy())
    g = _reference_bow(a["g.embed.weight"].double().numpy(), ids.numpy(), lengths.numpy())
    want = np.concatenate([f / np.linalg.norm(f, axis=1, keepdims=True),
                           g / np.linalg.norm(g, axis=1, keepdims=True)], 1)
    assert_encodes_everywhere(tmp_path / "full", tmp_path / "exported", want, dim=16)


def assert_encodes_everywhere(run, export_to, want: np.ndarray, dim: int) -> None:
    """The finished ``run`` encodes SENTENCES as ``want`` (``dim`` entries) through nlp_qt.load_encoder, through
    sentence-transformers from its model/ folder, and from its checkpoint exported to ``export_to``."""
    from sentence_transformers import SentenceTransformer

    from nlp_qt.export import ExportArgs, main as export_main

    assert np.abs(nlp_qt.load_encoder(run).encode(SENTENCES) - want).max() < 1e-5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(str(run / "model"), device="cpu", trust_remote_code=True)
    assert st.get_embedding_dimension() == dim
    assert np.abs(st.encode(SENTENCES) - want).max() < 1e-5
    exported = export_main(ExportArgs(run_dir=str(run), output=str(export_to)))
    assert np.abs(nlp_qt.load_encoder(exported["model"]).encode(SENTENCES) - want).max() < 1e-6


def test_untrained_bow_encoder_from_word_vectors_is_their_normalised_mean(tmp_path):
    """With --word-vectors and no step, a sentence of words that all have a vector embeds as [m/|m|; m/|m|],
    m the mean of the vectors: the bag-of-words baseline's direction, the point training starts from."""
    words = ["story", "cat", "Book", "the", "dog", "of"]
    vectors = _word_vectors(tmp_path / "wv", words, dim=8)
    train(_cfg(tmp_path, "zero", encoder="bow", max_steps=0, word_vectors=str(tmp_path / "wv")))
    enc = nlp_qt.load_encoder(tmp_path / "zero")
    sentence = "the story of the cat"
    m = vectors[[words.index(w) for w in sentence.split()]].astype(np.float64).mean(axis=0)
    m /= np.linalg.norm(m)
    assert np.abs(enc.encode([sentence])[0] - np.concatenate([m, m])).max() < 1e-6


def test_a_model_saved_before_the_encoder_field_loads_as_a_gru(tmp_path):
    from nlp_qt.vocab import Vocab

    vocab = Vocab("a b c".split(), max_len=5, lowercase=False)
    path = save_model(QuickThought(ModelConfig(vocab_size=len(vocab), word_dim=4, encoder_dim=4)), vocab,
                      tmp_path / "m")
    meta = json.loads((path / "config.json").read_text())
    del meta["model"]["encoder"]
    (path / "config.json").write_text(json.dumps(meta))
    model, _ = load_model(path)
    assert model.cfg.encoder == "gru" and hasattr(model.f, "gru")


def test_a_run_whose_configuration_lacks_a_field_is_refused_naming_it(tmp_path):
    train(_cfg(tmp_path, "old", max_steps=2))
    cfg_path = tmp_path / "old/config.json"
    saved = json.loads(cfg_path.read_text())
    del saved["encoder"]
    cfg_path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="encoder: None -> 'gru'"):
        train(_cfg(tmp_path, "old", max_steps=4))


def test_evaluation_reads_whole_texts_unless_max_length_cuts_them(tmp_path):
    """nlp_qt.senteval --max-length: by default (or with 0) an nlp_qt model reads the whole text, as the bag of
    words does, not only the first training --max-length tokens (12 here); --max-length N reads the first N."""
    from nlp_qt.senteval import load_encoder
    from nlp_qt.vocab import tokenize

    train(_cfg(tmp_path, "run", encoder="bow", max_steps=2))
    weights = load_file(str(tmp_path / "run/model/model.safetensors"))
    _, vocab = load_model(tmp_path / "run/model")
    long_text = " ".join(["the story of the cat and the dog"] * 4)  # 32 tokens
    assert vocab.max_len == 12 and len(tokenize(long_text)) == 32

    def reference(n_tokens):
        ids = np.array([[vocab.stoi.get(t, 1) for t in tokenize(long_text)[:n_tokens]]])
        parts = [_reference_bow(weights[k].double().numpy(), ids, np.array([ids.shape[1]])) for k in
                 ("f.embed.weight", "g.embed.weight")]
        return np.concatenate([p / np.linalg.norm(p) for p in parts], axis=1)[0]

    cut, desc_cut = load_encoder(str(tmp_path / "run"), max_length=12)
    whole, desc_whole = load_encoder(str(tmp_path / "run"))
    assert "texts cut to 12 tokens" in desc_cut and "whole texts" in desc_whole
    assert np.abs(cut([long_text])[0] - reference(12)).max() < 1e-5
    assert np.abs(whole([long_text])[0] - reference(32)).max() < 1e-5
    assert np.abs(whole([long_text])[0] - cut([long_text])[0]).max() > 1e-3
    assert np.array_equal(load_encoder(str(tmp_path / "run"), max_length=0)[0]([long_text]), whole([long_text]))
    assert np.abs(load_encoder(str(tmp_path / "run"), max_length=20)[0]([long_text])[0] - reference(20)).max() < 1e-5
    with pytest.raises(ValueError, match="max_length must be >= 0"):
        load_encoder(str(tmp_path / "run"), max_length=-1)
    _word_vectors(tmp_path / "wv", ["cat"], dim=8)
    with pytest.raises(ValueError, match="applies to nlp_qt models only"):
        load_encoder(str(tmp_path / "wv"), max_length=0)
