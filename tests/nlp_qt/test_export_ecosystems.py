"""The quick-thought model folder in sentence-transformers' hands: it fine-tunes there, and what sentence-transformers
saves loads in nlp_qt again (CPC heads, training configuration and step kept)."""

import json
import warnings

import numpy as np
import pytest
import torch

import nlp_qt
from nlp_qt.model import ModelConfig, QuickThought, save_model
from nlp_qt.vocab import Vocab

SENTENCES = ["the cat sat on the mat .", "a dog ran .", "the whale swam on .", "call me ishmael ."]
WORDS = "the cat sat on mat . a dog ran whale swam call me ishmael".split()


def tiny_model(folder, heads="qt", encoder="gru"):
    torch.manual_seed(0)
    vocab = Vocab(WORDS, max_len=12, lowercase=False)
    dims = {"word_dim": 8, "encoder_dim": 8 if encoder == "bow" else 6}
    qt = QuickThought(ModelConfig(vocab_size=len(vocab), encoder=encoder, heads=heads, **dims))
    return save_model(qt, vocab, folder, extra={"train_config": {"objective": "debiased", "seed": 0}, "step": 7})


def st_model(folder):
    from sentence_transformers import SentenceTransformer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)


def test_sentence_transformers_fine_tunes_the_quick_thought_module(tmp_path):
    """Issue: the module's vector was computed without gradient, so SentenceTransformerTrainer failed with "element
    0 of tensors does not require grad"; a few steps now change the embeddings, and encoding still needs none."""
    from datasets import Dataset
    from sentence_transformers import SentenceTransformerTrainer, SentenceTransformerTrainingArguments
    from sentence_transformers.losses import MultipleNegativesRankingLoss

    st = st_model(tiny_model(tmp_path / "model"))
    before = st.encode(SENTENCES)
    pairs = Dataset.from_dict({"anchor": [SENTENCES[i % 4] for i in range(8)],
                               "positive": [SENTENCES[(i + 1) % 4] for i in range(8)]})
    args = SentenceTransformerTrainingArguments(output_dir=str(tmp_path / "out"), max_steps=2,
                                                per_device_train_batch_size=4, learning_rate=0.05, report_to="none",
                                                save_strategy="no", use_cpu=True, disable_tqdm=True)
    SentenceTransformerTrainer(model=st, args=args, train_dataset=pairs,
                               loss=MultipleNegativesRankingLoss(st)).train()
    after = st.encode(SENTENCES, convert_to_tensor=True)
    assert not after.requires_grad
    assert np.abs(after.numpy() - before).max() > 1e-4


@pytest.mark.parametrize("encoder", ["conv", "gru"])
def test_a_cpc_model_saved_by_sentence_transformers_loads_in_nlp_qt(tmp_path, encoder):
    """Issue: the sentence-transformers save of a CPC model dropped the heads (cpc.*) and cpc_steps, and
    nlp_qt.load_encoder refused the folder; it now keeps them, and the training configuration and step too."""
    folder = tiny_model(tmp_path / "model", heads="cpc", encoder=encoder)
    st = st_model(folder)
    st.save(str(tmp_path / "saved"))
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    original = json.loads((folder / "config.json").read_text())
    assert saved == original  # model sizes with cpc_steps, train_config, step
    from safetensors.torch import load_file

    a, b = load_file(str(tmp_path / "saved" / "model.safetensors")), load_file(str(folder / "model.safetensors"))
    assert sorted(a) == sorted(b) and any(k.startswith("cpc.") for k in a)
    assert all(torch.equal(a[k], b[k]) for k in a)
    want = nlp_qt.load_encoder(folder).encode(SENTENCES)
    np.testing.assert_allclose(nlp_qt.load_encoder(tmp_path / "saved").encode(SENTENCES), want, atol=1e-6)
    np.testing.assert_allclose(st_model(tmp_path / "saved").encode(SENTENCES), want, atol=1e-6)


def test_a_cpc_folder_without_its_heads_encodes_in_nlp_qt(tmp_path):
    """A folder saved before the heads were kept (encoder weights only) loads for encoding."""
    from safetensors.torch import load_file, save_file

    folder = tiny_model(tmp_path / "model", heads="cpc", encoder="conv")
    want = nlp_qt.load_encoder(folder).encode(SENTENCES)
    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in state.items() if not k.startswith("cpc.")}, str(folder / "model.safetensors"))
    np.testing.assert_allclose(nlp_qt.load_encoder(folder).encode(SENTENCES), want, atol=1e-6)


def test_every_encoder_keeps_its_training_config_through_the_sentence_transformers_save(tmp_path):
    folder = tiny_model(tmp_path / "model", encoder="bow")
    st_model(folder).save(str(tmp_path / "saved"))
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert saved["train_config"] == {"objective": "debiased", "seed": 0} and saved["step"] == 7
