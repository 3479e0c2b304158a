"""Issue 17, nlp_qt: a run's model/ is also a sentence-transformers model folder, and nlp_qt.load_encoder is a
small documented API; both give exactly the vectors the evaluator uses."""

import warnings

import numpy as np
import pytest

import nlp_qt
from nlp_qt.model import ModelConfig, QuickThought, save_model
from nlp_qt.vocab import Vocab

SENTENCES = ["It is a truth universally acknowledged.", "The whale swam on.", "unknownword zzz .",
             "Call me Ishmael, said he, and went on his way across the wide grey sea."]


@pytest.fixture
def model_dir(tmp_path):
    import torch

    torch.manual_seed(0)
    vocab = Vocab("it is a truth universally acknowledged . the whale swam on call me ishmael , said he".split() +
                  ["It", "The", "Call", "Ishmael"], max_len=12, lowercase=False)
    qt = QuickThought(ModelConfig(vocab_size=len(vocab), word_dim=8, encoder_dim=6))
    return save_model(qt, vocab, tmp_path / "run" / "model")


def test_sentence_transformers_loads_the_model_folder_and_encodes_the_same(model_dir, tmp_path):
    from sentence_transformers import SentenceTransformer

    from nlp_qt.senteval import load_encoder

    ours, _ = load_encoder(str(model_dir))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(str(model_dir), device="cpu", trust_remote_code=True)
    dim = getattr(st, "get_embedding_dimension", None) or st.get_sentence_embedding_dimension
    assert dim() == 12
    a, b = st.encode(SENTENCES), ours(SENTENCES)
    assert a.shape == (4, 12) and np.abs(a - b).max() < 1e-6
    # both read whole texts (the last sentence has 19 tokens, the vocabulary's training max_len is 12); a cut set
    # through sentence-transformers' own property gives what load_encoder(max_length=N) gives
    assert st.max_seq_length is None
    st.max_seq_length = 12
    cut = st.encode(SENTENCES)
    assert np.abs(cut - load_encoder(str(model_dir), max_length=12)[0](SENTENCES)).max() < 1e-6
    assert np.abs(cut[3] - a[3]).max() > 1e-3 and np.abs(cut[:3] - a[:3]).max() < 1e-6
    st.max_seq_length = 0
    with pytest.raises(ValueError, match="max_seq_length must be a positive int or None"):
        st.encode(SENTENCES)
    st.max_seq_length = None
    st.save(str(tmp_path / "saved"))  # save / reload round trip
    again = SentenceTransformer(str(tmp_path / "saved"), device="cpu", trust_remote_code=True).encode(SENTENCES)
    assert np.abs(again - a).max() < 1e-6


def test_load_encoder_api(model_dir):
    from nlp_qt.senteval import load_encoder

    enc = nlp_qt.load_encoder(model_dir.parent)  # the run folder works too
    ours, _ = load_encoder(str(model_dir))
    assert np.array_equal(enc.encode(SENTENCES), ours(SENTENCES))
    with pytest.raises(TypeError, match="list of sentences"):
        enc.encode("one sentence")
    with pytest.raises(FileNotFoundError, match="neither an nlp_qt model"):
        nlp_qt.load_encoder(model_dir.parent.parent)  # a folder that is no model


def test_docs_snippet_runs_as_written(model_dir, tmp_path, monkeypatch):
    """docs/nlp_qt.md's "Use what you trained" lines, on a tiny model at the path they name."""
    import re
    import shutil
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "nlp_qt.md").read_text()
    snippet = re.search(r"## Use what you trained.*?```python\n(.*?)```", doc, re.S).group(1)
    work = tmp_path / "work"
    shutil.copytree(model_dir, work / "runs" / "qt" / "model")
    monkeypatch.chdir(work)
    scope: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(snippet, scope)  # noqa: S102 - the documented lines themselves
    assert scope["vectors"].shape == (2, 12)
    assert np.abs(scope["model"].encode(["A sentence.", "Another one."]) - scope["vectors"]).max() < 1e-6


def _tree(folder):
    import hashlib

    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_of_a_checkpoint_is_a_model_folder_and_refuses_foreign_targets(tmp_path):
    """nlp_qt.export: any checkpoint becomes a model folder (sentence-transformers too) with the checkpoint's
    weights; an existing folder that is not this run's export is refused and left as it was."""
    import shutil

    from sentence_transformers import SentenceTransformer

    from nlp_qt.export import main as export_main, ExportArgs
    from nlp_qt.train import train

    from .test_train import _cfg

    train(_cfg(tmp_path, "run", max_steps=4, progress=False))
    run = tmp_path / "run"
    # a run stopped before its end has a checkpoint but no model/: simulate it on a copy
    cut = tmp_path / "cut"
    shutil.copytree(run, cut)
    shutil.rmtree(cut / "model")
    (cut / "summary.json").unlink()
    with pytest.raises(FileNotFoundError, match="nlp_qt.export"):
        nlp_qt.load_encoder(cut)
    out = export_main(ExportArgs(run_dir=str(cut)))
    assert out == {"model": str(cut / "model_step4"), "step": 4}
    want = nlp_qt.load_encoder(run).encode(SENTENCES)  # the finished run's model: the same checkpoint's weights
    assert np.abs(nlp_qt.load_encoder(cut / "model_step4").encode(SENTENCES) - want).max() < 1e-6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(str(cut / "model_step4"), device="cpu", trust_remote_code=True)
    assert np.abs(st.encode(SENTENCES) - want).max() < 1e-6
    before_export = _tree(cut / "model_step4")
    with pytest.raises(FileExistsError, match="pass --overwrite"):  # its own earlier export: only with --overwrite
        export_main(ExportArgs(run_dir=str(cut)))
    assert _tree(cut / "model_step4") == before_export
    export_main(ExportArgs(run_dir=str(cut), overwrite=True))
    assert _tree(cut / "model_step4") == before_export  # the same checkpoint: the same files

    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "config.json").write_text('{"my": "settings"}')
    before = _tree(foreign)
    with pytest.raises(FileExistsError, match="not an export of"):
        export_main(ExportArgs(run_dir=str(cut), output=str(foreign)))
    before_run = _tree(run / "model")
    with pytest.raises(FileExistsError, match="not an export of"):
        export_main(ExportArgs(run_dir=str(cut), output=str(run / "model")))  # another run's model
    assert _tree(foreign) == before and _tree(run / "model") == before_run
    with pytest.raises(FileNotFoundError, match="no config.json"):
        export_main(ExportArgs(run_dir=str(tmp_path)))
    shutil.rmtree(cut / "checkpoint")
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        export_main(ExportArgs(run_dir=str(cut)))


def test_the_sentence_transformers_api_around_the_module(model_dir, tmp_path):
    """What a sentence-transformers user reaches for beside encode (found by a probe of the API on an export):
    max_seq_length survives save (it was dropped: the reloaded model read whole texts again, 0.135 apart) and
    nlp_qt's own loader cuts alike; model.tokenizer exists (was AttributeError); output_value="token_embeddings" says
    the module has none (was a bare KeyError); model_kwargs' dtype loads the weights in that dtype and the
    model_max_length of processor_kwargs sets the cut (both were ignored without a word); another backend is
    refused."""
    import torch
    from sentence_transformers import SentenceTransformer

    from nlp_qt.senteval import load_encoder

    def load(path, **kw):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return SentenceTransformer(str(path), device="cpu", trust_remote_code=True, **kw)

    st = load(model_dir)
    whole = st.encode(SENTENCES)
    st.max_seq_length = 5
    cut = st.encode(SENTENCES)
    st.save(str(tmp_path / "cut"))
    again = load(tmp_path / "cut")
    assert again.max_seq_length == 5 and np.abs(again.encode(SENTENCES) - cut).max() < 1e-6
    ours, desc = load_encoder(str(tmp_path / "cut"))
    assert np.abs(ours(SENTENCES) - cut).max() < 1e-6 and "the max_seq_length it was saved with" in desc
    assert np.abs(load_encoder(str(tmp_path / "cut"), max_length=0)[0](SENTENCES) - whole).max() < 1e-6
    again.max_seq_length = None  # None saved: whole texts again
    again.save(str(tmp_path / "whole"))
    assert load(tmp_path / "whole").max_seq_length is None
    assert np.abs(load(tmp_path / "whole").encode(SENTENCES) - whole).max() < 1e-6

    tok = st.tokenizer
    assert tok.tokenize("The whale swam on.") == ["The", "whale", "swam", "on", "."]
    assert tok.convert_ids_to_tokens(tok.convert_tokens_to_ids(["whale", "nosuchword"])) == ["whale", "<unk>"]
    batch = tok(["The whale swam on.", "It is"])
    assert batch["input_ids"].shape == (2, 5) and batch["attention_mask"].sum().item() == 7
    assert tok.model_max_length == 5 and len(tok) == tok.vocab_size == len(tok.get_vocab())
    assert st.processor.vocab_size == tok.vocab_size

    with pytest.raises(KeyError, match="sentence embeddings only"):
        st.encode(SENTENCES, output_value="token_embeddings")

    half = load(model_dir, model_kwargs={"dtype": torch.float16})
    assert {p.dtype for p in half.parameters()} == {torch.float16}
    assert np.abs(half.encode(SENTENCES).astype(np.float32) - whole).max() < 5e-3
    assert load(model_dir, processor_kwargs={"model_max_length": 5}).max_seq_length == 5
    with pytest.raises(ValueError, match="runs in torch only, not backend='onnx'"):
        load(model_dir, backend="onnx")
    with pytest.warns(UserWarning, match="does not use attn_implementation"):
        load(model_dir, model_kwargs={"attn_implementation": "sdpa"})


@pytest.mark.parametrize("change, says", [
    (lambda v: {"itos": []}, "its itos does not begin with <pad> and <unk>"),
    (lambda v: [], "it is not a JSON object"),
    (lambda v: {**v, "itos": "abc"}, "its itos is not a list of words"),
    (lambda v: {**v, "itos": v["itos"] + ["it"]}, "its words are not distinct"),
    (lambda v: {**v, "max_len": "12"}, "its max_len is not a whole number >= 1"),
    (lambda v: {**v, "itos": v["itos"] + ["w1", "w2"]}, "vocab.json holds 25 words, the model's table 23"),
    (lambda v: {**v, "itos": v["itos"][:-2]}, "vocab.json holds 21 words, the model's table 23"),
])
def test_a_vocabulary_that_does_not_fit_the_model_is_refused_on_load(model_dir, change, says):
    """A vocab.json of another model or a damaged one: a KeyError / TypeError traceback, an IndexError at encode time
    (a word beyond the embedding table), or silently accepted (a shorter list; itos as a string was scored)."""
    import json
    import re

    from nlp_qt.model import load_model

    path = model_dir / "vocab.json"
    path.write_text(json.dumps(change(json.loads(path.read_text()))))
    with pytest.raises(ValueError, match=re.escape(says)):
        load_model(model_dir)
