"""The text pipeline's encoding passes (the evaluation, the prior estimate, fewshot.predict): texts are batched
longest first, as sentence-transformers' encode batches them, and the results come back in the given order; each
pass shows a progress bar unless progress is off."""

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fewshot.heads import embed_all, head_accuracies, in_given_order, longest_first
from fewshot.model import FewShotModel, load_tokenizer
from fewshot.predict import main as predict
from fewshot.train import train

from .conftest import make_texts, text_config, write_tsv

TEXTS = ["it", "the movie was good and the plot was bad and the cast was dire", "good movie", "a",
         "the plot was awful", "the cast was really very nice", "bad", "the movie was a grim one"]


def test_longest_first_orders_by_length_keeping_ties_in_order():
    assert longest_first(["ab", "a", "abc", "xy", ""]) == [2, 0, 3, 1, 4]
    rows = torch.arange(5.0)[:, None] * torch.ones(1, 3)
    order = [3, 0, 4, 1, 2]
    torch.testing.assert_close(in_given_order(rows[order], order), rows)  # computed in `order`, given back


def test_embed_all_batches_texts_of_like_length_and_gives_the_vectors_in_the_given_order(tiny_encoder):
    torch.manual_seed(0)
    model = FewShotModel(tiny_encoder, "mean", 16)
    tok = load_tokenizer(tiny_encoder)
    seen = []

    def spy(texts, **kw):
        seen.append(list(texts))
        return tok(texts, **kw)

    feats, logits = embed_all(model, spy, TEXTS, 32, "cpu", batch_size=3)
    assert seen == [[TEXTS[i] for i in longest_first(TEXTS)[k:k + 3]] for k in (0, 3, 6)]
    one = [embed_all(model, tok, [t], 32, "cpu") for t in TEXTS]  # each text alone: no padding at all
    torch.testing.assert_close(feats, torch.cat([f for f, _ in one]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits, torch.cat([g for _, g in one]), atol=1e-5, rtol=1e-5)


def test_the_evaluation_shows_a_bar_unless_progress_is_off(tiny_encoder, capsys):
    torch.manual_seed(0)
    model = FewShotModel(tiny_encoder, "mean", 16)
    tok = load_tokenizer(tiny_encoder)
    rows = make_texts(80, 0)  # 70 to evaluate: two batches of 64 (one batch shows no bar)
    texts, labels = [t for t, _ in rows], np.array([y for _, y in rows])
    cfg = SimpleNamespace(max_length=16, probe_c=1.0, seed=0, eval_split="test")
    sample = SimpleNamespace(labeled=np.arange(10))
    capsys.readouterr()  # transformers' bar of the encoder's loading
    quiet = head_accuracies(model, tok, cfg, texts, labels, sample, texts[10:], labels[10:], "cpu", True)
    assert capsys.readouterr().err == ""
    shown = head_accuracies(model, tok, cfg, texts, labels, sample, texts[10:], labels[10:], "cpu", True,
                            progress=True)
    assert "evaluation: embedding 70 texts" in capsys.readouterr().err
    assert shown == quiet


@pytest.mark.parametrize("progress", [True, False])
def test_a_runs_evaluation_and_prior_estimate_show_bars_as_its_training_bar_does(tiny_encoder, tmp_path, capsys,
                                                                                 progress):
    train_file = write_tsv(tmp_path / "train.tsv", make_texts(120, 0))
    dev = write_tsv(tmp_path / "dev.tsv", make_texts(70, 1))
    cfg = text_config(dict(encoder=tiny_encoder, dataset=train_file, eval_file=dev, objective="ce+punce",
                           n_labeled=10, n_unlabeled=70, max_steps=2, batch_labeled=5, batch_unlabeled=10,
                           max_length=16, pooling="mean", proj_dim=16, eval_every=2, checkpoint_every=2,
                           output_dir=str(tmp_path / "run"), device="cpu", progress=progress,
                           estimate_prior=True))
    train(cfg)
    err = capsys.readouterr().err
    for label in ("evaluation: embedding 70 texts", "prior estimate: embedding the 70 unlabeled texts"):
        assert (label in err) == progress, err[-2000:]
    assert json.loads((tmp_path / "run" / "metrics.json").read_text())["prior_source"] == "elkan-noto"

    (tmp_path / "in.txt").write_text("\n".join(TEXTS) + "\n")
    predict(["--model", str(tmp_path / "run"), "--input", str(tmp_path / "in.txt"), "--output",
             str(tmp_path / "p.jsonl"), "--batch-size", "3", *([] if progress else ["--no-progress"])])
    assert ("classifying 8 texts" in capsys.readouterr().err) == progress
    predict(["--model", str(tmp_path / "run"), "--input", str(tmp_path / "in.txt"), "--output",
             str(tmp_path / "q.jsonl")])
    assert "classifying" not in capsys.readouterr().err  # one batch: no bar
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == TEXTS  # in the input's order, though classified longest first
