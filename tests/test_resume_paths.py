"""Issue 46, item 13: a resume compares files, not path spellings. The same corpus named by its absolute path
continues an nlp_qt run exactly; an image run resumed from another folder with the same relative spelling of a
different file is refused, naming both paths."""

import json
import os

import numpy as np
import pytest

from shared_losses.training.runtime import local_path, with_local_paths


def test_local_paths_are_absolute_and_names_stay_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.npz").write_bytes(b"")
    assert local_path("data/x.npz") == str(tmp_path / "data" / "x.npz")
    assert local_path("./data/../data/x.npz") == str(tmp_path / "data" / "x.npz")
    for name in ("mnist", "glue/sst2", "hf:bookcorpus", "roberta-base", None, 3, ""):
        assert local_path(name) == name
    cfg = {"dataset": "data/x.npz", "encoder": "mlp", "lr": 0.1}
    assert with_local_paths(cfg, ("dataset", "encoder", "eval_file")) == {**cfg, "dataset": str(tmp_path / "data" /
                                                                                                   "x.npz")}


def test_nlp_qt_resumes_with_the_corpus_named_absolutely(tmp_path, monkeypatch):
    from nlp_qt.train import train

    from .nlp_qt.test_train import _cfg, _corpus

    _corpus(tmp_path)
    monkeypatch.chdir(tmp_path)
    full = train(_cfg(tmp_path, "full", max_steps=4, corpus="corpus"))
    train(_cfg(tmp_path, "cut", max_steps=2, corpus="corpus"))
    again = train(_cfg(tmp_path, "cut", max_steps=4, corpus=str(tmp_path / "corpus")))  # was refused
    assert again["final_loss"] == full["final_loss"]
    recorded = json.loads((tmp_path / "cut" / "config.json").read_text())
    assert recorded["corpus"] == str(tmp_path / "corpus")
    # the same spelling from another folder names another corpus: refused
    other = tmp_path / "elsewhere"
    other.mkdir()
    _corpus(other)
    monkeypatch.chdir(other)
    with pytest.raises(ValueError, match=r"corpus: '.*/corpus' -> '.*/elsewhere/corpus'"):
        train(_cfg(tmp_path, "cut", max_steps=6, corpus="corpus", output_dir=str(tmp_path / "cut")))


def test_an_image_run_resumed_elsewhere_with_the_same_spelling_of_another_file_is_refused(tmp_path, monkeypatch):
    from fewshot.config import ImageConfig
    from fewshot.train import train

    rng = np.random.default_rng(0)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        np.savez(tmp_path / folder / "d.npz", x=rng.integers(0, 256, (80, 8, 8), dtype=np.uint8),
                 y=np.arange(80) % 4)

    def cfg(steps):
        return ImageConfig(dataset="d.npz", encoder="mlp", setting="pu", contrastive="punce", n_labeled=8,
                             positive_classes=(1,), hidden=16, max_steps=steps, passes=None, batch_size=16,
                             progress=False, output_dir=str(tmp_path / "run"), resume=True, checkpoint_every=2)

    monkeypatch.chdir(tmp_path / "a")
    train(cfg(2))
    monkeypatch.chdir(tmp_path / "b")
    before = sorted(os.listdir(tmp_path / "run"))
    with pytest.raises(ValueError, match=r"dataset: '.*/a/d.npz' -> '.*/b/d.npz'"):
        train(cfg(4))
    assert sorted(os.listdir(tmp_path / "run")) == before
    monkeypatch.chdir(tmp_path)
    m = train(cfg(4).__class__(**{**cfg(4).__dict__, "dataset": str(tmp_path / "a" / "d.npz")}))  # the same file
    assert m["steps"] == 4
