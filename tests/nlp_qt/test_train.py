import csv
import json
import math
import re

import numpy as np

import pytest
from safetensors.torch import load_file

from nlp_qt.config import Config
from nlp_qt.model import load_model
from nlp_qt.train import train
from tests import warm


def _corpus(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    for b in range(3):
        text = " ".join(f"Book {b} tells part {i} of the story about the {['cat', 'dog', 'bird'][i % 3]}."
                        for i in range(14))
        (d / f"book{b}.txt").write_text(text + "\n")
    (d / "book3.txt").write_bytes(b"A good line here.\n\xff\xfe broken\nAnother good line.\n")
    return d


def _cfg(tmp_path, out, **kw):
    base = dict(corpus=str(_corpus(tmp_path) if not (tmp_path / "corpus").exists() else tmp_path / "corpus"),
                output_dir=str(tmp_path / out), batch_size=8, word_dim=8, encoder_dim=8, vocab_size=200,
                max_length=12, log_every=1, checkpoint_every=2, lr=1e-2, resume=True)
    base.update(kw)
    return Config(**base)


def test_train_writes_model_logs_and_resumes_exactly(tmp_path):
    full = train(_cfg(tmp_path, "full", max_steps=5, objective="debiased", tau_plus=0.01))
    assert full["step"] == 5
    # interrupted run: 3 steps, then resumed to 5 with the same config
    train(_cfg(tmp_path, "cut", max_steps=3, objective="debiased", tau_plus=0.01))
    resumed = train(_cfg(tmp_path, "cut", max_steps=5, objective="debiased", tau_plus=0.01))
    assert resumed["step"] == 5
    a = load_file(str(tmp_path / "full/model/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    rows_full = (tmp_path / "full/log.csv").read_text().splitlines()
    rows_cut = (tmp_path / "cut/log.csv").read_text().splitlines()
    assert [r.split(",")[:3] for r in rows_full] == [r.split(",")[:3] for r in rows_cut]
    assert json.loads((tmp_path / "full/config.json").read_text())["objective"] == "debiased"
    assert list((tmp_path / "full/tb").iterdir())
    model, vocab = load_model(tmp_path / "full/model")
    assert model.cfg.encoder_dim == 8 and len(vocab) > 10


def test_epochs_pass_over_corpus_and_bad_lines_counted(tmp_path, capsys):
    s = train(_cfg(tmp_path, "ep", epochs=2, objective="qt"))
    # 3 x 14 + 2 good sentences = 44 -> 5 full batches of 8 per epoch
    assert s["step"] == 10 and s["epoch"] == 2
    assert s["corpus_stats_last_pass"]["undecodable_lines"] == 1
    assert "not UTF-8" in capsys.readouterr().out


def test_resume_with_other_config_is_refused(tmp_path):
    train(_cfg(tmp_path, "r", max_steps=2))
    with pytest.raises(ValueError, match="different configuration"):
        train(_cfg(tmp_path, "r", max_steps=4, objective="debiased", tau_plus=0.01))


def test_resume_refuses_a_corpus_that_changed(tmp_path):
    """A resume skips the batches it already used by count; files added to (or grown in) the corpus
    folder used to shift the rest silently."""
    train(_cfg(tmp_path, "c", max_steps=2))
    extra = tmp_path / "corpus" / "book0a.txt"  # sorts before book1: every later batch would move
    extra.write_text("An added book begins here. It has two sentences.\n")
    with pytest.raises(ValueError, match=r"the corpus .* changed since the checkpoint "
                                         r"\(4 files, \d+ bytes then; 5 files"):
        train(_cfg(tmp_path, "c", max_steps=4))
    extra.unlink()
    assert train(_cfg(tmp_path, "c", max_steps=4))["step"] == 4


def test_bad_config_and_corpus_errors(tmp_path):
    from nlp_qt.corpus import CorpusError

    with pytest.raises(ValueError, match="corpus"):
        train(Config(corpus="", output_dir=str(tmp_path / "x")))
    with pytest.raises(ValueError, match="--tau-plus 0.1 only applies to"):
        train(_cfg(tmp_path, "x", tau_plus=0.1))
    with pytest.raises(CorpusError, match="not found"):
        train(_cfg(tmp_path, "x", corpus=str(tmp_path / "missing")))
    with pytest.raises(ValueError, match="fewer than one batch"):
        train(_cfg(tmp_path, "y", batch_size=1000))


@pytest.mark.parametrize("field, value, message", [
    ("temperature", 0.0, "--temperature must be a finite number > 0"), ("clip_norm", -1.0, "clip_norm must be >= 0"),
    ("temperature", float("inf"), "--temperature must be a finite number > 0, got inf"),  # every score 0: no training
    ("max_steps", -1, "max_steps must be >= 0"), ("max_sentences", 0, "max_sentences must be >= 1"),
    ("vocab_sentences", 0, "vocab_sentences must be >= 1"), ("dev_every", 1, "dev_every must be 0"),
    ("dev_every", -2, "dev_every must be 0"), ("dev_max_batches", 0, "dev_max_batches must be >= 1"),
])
def test_bad_values_are_refused_before_reading_the_corpus(tmp_path, field, value, message):
    """These failed only at the first step after the vocabulary pass (temperature), said "the corpus
    has no tokens" (max/vocab_sentences 0), or were taken silently (no clipping; 0 steps and a model)."""
    with pytest.raises(ValueError, match=message):
        train(_cfg(tmp_path, "bad", **{field: value}))
    assert not (tmp_path / "bad").exists()


@pytest.mark.slow  # runs the entry point in a subprocess
def test_cli_help_documents_fields():
    import sys

    out = warm.run([sys.executable, "-m", "nlp_qt.train", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--tau-plus" in out.stdout and "Class prior" in out.stdout


def test_senteval_cli_on_our_checkpoint(tmp_path, capsys):
    from nlp_qt import senteval as se
    from tests.nlp_qt.test_senteval import _write_task_folder

    train(_cfg(tmp_path, "ev", max_steps=2))
    root = _write_task_folder(tmp_path / "data", n=10)
    res = se.main(["--model", str(tmp_path / "ev"), "--tasks", "MR", "TREC", "MRPC", "--data", str(root),
                   "--kfold", "2"])
    out = capsys.readouterr().out
    assert "nlp_qt model" in out and "| ev |" in out
    assert res["MR"]["n"] == 20 and 0 <= res["MRPC"]["f1"] <= 100
    with pytest.raises(FileNotFoundError, match="neither"):
        se.load_encoder(str(tmp_path / "data"))


@pytest.mark.slow  # torchrun: two processes
def test_two_processes_with_gathered_candidates_match_single_process(tmp_path, torchrun):
    """2 CPU processes x 8 sentences with --gather-across-processes == 1 process x 16 sentences, the held-out
    loss included (each process scored its block of 8 against its own 8 candidates: about ln 7 at chance against
    training's ln 15, so a gathered run's dev loss looked far below its training loss)."""
    import os

    corpus = _corpus(tmp_path)
    common = ["--corpus", str(corpus), "--word-dim", "8", "--encoder-dim", "8", "--vocab-size", "200",
              "--max-steps", "2", "--lr", "1e-2", "--objective", "debiased", "--tau-plus", "0.01",
              "--clip-mode", "global", "--log-every", "1", "--dev-every", "2", "--epochs", "2"]
    train(Config(**{**_cfg(tmp_path, "single").__dict__, "corpus": str(corpus), "max_steps": 2,
                    "objective": "debiased", "tau_plus": 0.01, "clip_mode": "global", "batch_size": 16,
                    "dev_every": 2, "epochs": 2}))  # 2 batches an epoch, 1 held out
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}
    out = warm.run(
        [torchrun, "--nproc_per_node", "2", "-m", "nlp_qt.train", *common, "--batch-size", "8",
         "--gather-across-processes", "--output-dir", str(tmp_path / "multi")],
        capture_output=True, text=True, timeout=240, env=env, cwd=os.getcwd(),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    a = load_file(str(tmp_path / "single/model/model.safetensors"))
    b = load_file(str(tmp_path / "multi/model/model.safetensors"))
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-4
    single, multi = (json.loads((tmp_path / d / "summary.json").read_text()) for d in ("single", "multi"))
    assert multi["sentences_seen"] == 32
    assert single["dev_loss"] == pytest.approx(multi["dev_loss"], rel=1e-5) and math.isfinite(multi["dev_loss"])


def test_resume_refuses_changed_clipping_or_process_count(tmp_path):
    """Settings that change the updates (clipping) or the data each step reads (process count)
    are part of the resume check, not silently taken over."""
    train(_cfg(tmp_path, "rc", max_steps=2))
    with pytest.raises(ValueError, match="clip_mode"):
        train(_cfg(tmp_path, "rc", max_steps=4, clip_mode="global"))
    with pytest.raises(ValueError, match="clip_norm"):
        train(_cfg(tmp_path, "rc", max_steps=4, clip_norm=1.0))
    cfg_path = tmp_path / "rc" / "config.json"
    cfg_path.write_text(json.dumps({**json.loads(cfg_path.read_text()), "num_processes": 2}))
    with pytest.raises(ValueError, match="num_processes"):
        train(_cfg(tmp_path, "rc", max_steps=4))


def test_batch_of_one_sentence_documents_does_not_stop_training(tmp_path):
    """A batch in which every sentence is its own document (e.g. a run of one-line documents) has
    no positives; training goes on instead of failing there (and again on every resume)."""
    many = " ".join(f"Sentence {i} of the long document is here." for i in range(8))
    lines = [many] + [f"Lonely line {i} stands alone." for i in range(8)] + [many.replace("long", "other")]
    (tmp_path / "lines.txt").write_text("\n".join(lines) + "\n")
    s = train(_cfg(tmp_path, "lone", corpus=str(tmp_path / "lines.txt"), doc_boundary="line", objective="debiased",
                   tau_plus=0.01))
    assert s["step"] == 3 and s["final_loss"] > 0

    # Two batches of a real document, then two of one-sentence documents: those two are skipped (an
    # Adam step on a zero gradient would still move the weights by its momentum), so the model equals
    # the one trained on the first two batches only.
    doc = " ".join(f"Sentence {i} of the long document is here." for i in range(16))
    (tmp_path / "mixed.txt").write_text("\n".join([doc] + [f"Lonely line {i} stands alone." for i in range(16)]) + "\n")
    kw = dict(corpus=str(tmp_path / "mixed.txt"), doc_boundary="line", epochs=1, max_steps=None)
    s = train(_cfg(tmp_path, "all", **kw))
    assert s["step"] == 4 and s["no_neighbour_batches"] == 2
    import torch

    assert s["torch_threads"] == torch.get_num_threads()  # the count the sums' order came from
    train(_cfg(tmp_path, "first2", **{**kw, "max_steps": 2}))
    import torch

    from nlp_qt.model import load_model

    a, b = load_model(tmp_path / "all" / "model")[0], load_model(tmp_path / "first2" / "model")[0]
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_tensorboard_has_no_duplicate_steps_after_a_cut_off_resume(tmp_path):
    """A run cut off after logging past its last checkpoint logs those steps again on resume; TensorBoard
    must show each step once, as log.csv does, and the run's configuration once."""
    import shutil

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    train(_cfg(tmp_path, "tb", max_steps=2))  # checkpoint at step 2
    out = tmp_path / "tb"
    shutil.copytree(out / "checkpoint", tmp_path / "ckpt2")
    train(_cfg(tmp_path, "tb", max_steps=4))  # logs 3, 4 (and checkpoints 4) ...
    shutil.rmtree(out / "checkpoint")  # ... but is "cut off" before that checkpoint
    shutil.copytree(tmp_path / "ckpt2", out / "checkpoint")
    train(_cfg(tmp_path, "tb", max_steps=4))  # logs 3, 4 again
    acc = EventAccumulator(str(out / "tb"))
    acc.Reload()
    assert [e.step for e in acc.Scalars("train/loss")] == [1, 2, 3, 4]
    assert len(acc.Tensors("config/text_summary")) == 1


@pytest.mark.slow  # torchrun: two processes
def test_two_processes_with_unequal_anchor_counts_match_single_process(tmp_path, torchrun):
    """Process 0 gets an 8-sentence document (8 anchors), process 1 six one-sentence documents and a
    2-sentence one (2 anchors). Each process's loss is weighted by its share of the global anchors, so
    2 processes x 8 sentences still train exactly like 1 process x 16 (a plain mean of the processes'
    means gave process 1's two anchors the weight of eight)."""
    import os
    import sys

    corpus = tmp_path / "uneven"
    corpus.mkdir()
    (corpus / "a.txt").write_text("".join(f"The long story goes on with part {i} of the tale.\n" for i in range(8)))
    for j in range(6):
        (corpus / f"b{j}.txt").write_text(f"A lone remark number {j} about the dog.\n")
    (corpus / "c.txt").write_text("The cat sat down.\nThe bird flew off.\n")
    common = ["--corpus", str(corpus), "--one-sentence-per-line", "True", "--word-dim", "8", "--encoder-dim", "8",
              "--vocab-size", "200", "--max-length", "12", "--epochs", "2", "--lr", "1e-2", "--objective", "debiased",
              "--tau-plus", "0.01", "--clip-mode", "global", "--log-every", "1", "--checkpoint-every", "100"]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1"}
    single = warm.run([sys.executable, "-m", "nlp_qt.train", *common, "--batch-size", "16",
                             "--output-dir", str(tmp_path / "single")],
                      capture_output=True, text=True, timeout=240, env=env, cwd=os.getcwd())
    assert single.returncode == 0, single.stderr[-3000:]
    multi = warm.run([torchrun, "--nproc_per_node", "2", "-m", "nlp_qt.train", *common, "--batch-size", "8",
                            "--gather-across-processes", "--output-dir", str(tmp_path / "multi")],
                     capture_output=True, text=True, timeout=240, env=env, cwd=os.getcwd())
    assert multi.returncode == 0, multi.stderr[-3000:]
    assert json.loads((tmp_path / "multi/summary.json").read_text())["step"] == 2
    a = load_file(str(tmp_path / "single/model/model.safetensors"))
    b = load_file(str(tmp_path / "multi/model/model.safetensors"))
    assert max((a[k] - b[k]).abs().max().item() for k in a) < 1e-5
    rows = lambda d: [float(r["loss"]) for r in csv.DictReader(open(tmp_path / d / "log.csv"))]  # noqa: E731
    np.testing.assert_allclose(rows("single"), rows("multi"), rtol=1e-5)


def test_clip_unscales_fp16_gradients_once_before_norm_and_clipping():
    """Under fp16 the gradients are loss-scaled: the reported norm and the clipping must act on the
    unscaled ones (they clipped each tensor to 5 in scaled units), and unscale_ may run only once per
    step (global clipping through accelerate unscaled a second time and raised)."""
    import torch

    from nlp_qt.train import _clip

    class FakeAccelerator:
        scaler, calls = object(), 0

        def __init__(self, model, scale):
            self.model, self.scale = model, scale

        def unscale_gradients(self):
            self.calls += 1
            if self.calls > 1:
                raise RuntimeError("unscale_() has already been called on this optimizer since the last update()")
            for p in self.model.parameters():
                p.grad /= self.scale

    for mode in ("per_tensor", "global"):
        model = torch.nn.Linear(3, 1)
        model.weight.grad = torch.full_like(model.weight, 1024.0 * 2.0)  # scaled by 1024; true value 2
        model.bias.grad = torch.full_like(model.bias, 1024.0 * 0.5)
        acc = FakeAccelerator(model, 1024.0)
        norm = _clip(model, Config(corpus="x", clip_norm=5.0, clip_mode=mode), acc)
        assert acc.calls == 1
        assert norm == pytest.approx((3 * 4.0 + 0.25) ** 0.5)  # the unscaled norm, 3.5: under 5, no clipping
        assert torch.allclose(model.weight.grad, torch.full_like(model.weight, 2.0))


def test_resuming_a_finished_run_keeps_its_final_loss(tmp_path):
    import math

    first = train(_cfg(tmp_path, "fin", max_steps=2))
    again = train(_cfg(tmp_path, "fin", max_steps=2))  # --resume: nothing left to do
    assert again["step"] == 2 and math.isfinite(again["final_loss"]) and again["final_loss"] == first["final_loss"]


def test_non_finite_loss_stops_the_run(tmp_path, monkeypatch):
    import torch

    import nlp_qt.train as qt_train

    monkeypatch.setattr(qt_train, "compute_loss", lambda u, *a, **k: u.sum() * torch.tensor(float("nan")))
    from shared_losses.training.runtime import TrainingDiverged

    with pytest.raises(TrainingDiverged, match="training diverged between steps 0 and 1: the loss is nan"):
        train(_cfg(tmp_path, "nan", max_steps=2))


def _dev_loss_by_hand(run, cfg, held_out_indices):
    """The run's objective on the held-out batches, recomputed from the saved model and the corpus."""
    import torch

    from nlp_qt.corpus import contiguous_batches
    from nlp_qt.objectives import compute_loss
    from nlp_qt.train import sentence_stream

    model, vocab = load_model(run / "model")
    batches = list(contiguous_batches(sentence_stream(cfg), cfg.batch_size))
    losses = []
    with torch.no_grad():
        for i in held_out_indices:
            ids, lengths = vocab.batch(batches[i].sentences, "cpu")
            u, v = model(ids, lengths)
            losses.append(compute_loss(u, v, torch.tensor(batches[i].doc_ids), None, cfg.objective, cfg.tau_plus,
                                       cfg.beta, cfg.temperature, cfg.log_floor, cfg.self_score).item())
    return sum(losses) / len(losses)


def test_held_out_batches_are_never_trained_on_and_scored_each_epoch(tmp_path):
    """--dev-every 3 on 5 batches per epoch: batch 2 is held out (4 steps an epoch, not 5), and the dev loss
    after the last epoch is the objective of the final model on that batch, recomputed by hand."""
    cfg = _cfg(tmp_path, "dev", epochs=3, objective="debiased", tau_plus=0.01, dev_every=3)
    s = train(cfg)
    assert s["step"] == 3 * 4 and s["epoch"] == 3
    assert [d["epoch"] for d in s["dev_losses"]] == [1, 2, 3]
    assert [d["step"] for d in s["dev_losses"]] == [4, 8, 12]
    assert s["dev_loss"] == s["dev_losses"][-1]["dev_loss"]
    assert s["dev_loss"] == pytest.approx(_dev_loss_by_hand(tmp_path / "dev", cfg, [2]), rel=1e-5)
    rows = list(csv.DictReader(open(tmp_path / "dev/log.csv")))
    dev_rows = [r for r in rows if r["dev_loss"]]
    assert [int(r["step"]) for r in dev_rows] == [4, 8, 12]
    assert [float(r["dev_loss"]) for r in dev_rows] == pytest.approx([d["dev_loss"] for d in s["dev_losses"]])
    # each epoch's dev row comes after the step it scored and before the next epoch's first step
    for i, r in enumerate(rows):
        if r["dev_loss"]:
            assert not rows[i - 1]["dev_loss"] and int(rows[i - 1]["step"]) == int(r["step"])
            assert i + 1 == len(rows) or int(rows[i + 1]["step"]) == int(r["step"]) + 1
    # the dev losses differ between epochs: the model moved (a stuck number would pass the checks above)
    assert len({round(d["dev_loss"], 6) for d in s["dev_losses"]}) == 3
    # at most dev_max_batches are scored
    one = train(_cfg(tmp_path, "dev1", epochs=1, dev_every=2, dev_max_batches=1))
    assert one["step"] == 3  # batches 0, 2, 4 trained; 1 and 3 held out
    assert one["dev_loss"] == pytest.approx(_dev_loss_by_hand(tmp_path / "dev1", _cfg(tmp_path, "x"), [1]), rel=1e-5)
    # without --dev-every nothing is held out and nothing reported
    assert "dev_loss" not in train(_cfg(tmp_path, "nodev", epochs=1))


def test_held_out_batches_resume_exactly(tmp_path):
    """Cut in the second epoch (after a held-out batch of the first and before the epoch's own), resumed: the
    same weights, dev losses and log as the uninterrupted run."""
    kw = dict(epochs=2, objective="qt", dev_every=3, checkpoint_every=1)
    full = train(_cfg(tmp_path, "full", **kw))
    train(_cfg(tmp_path, "cut", max_steps=6, **kw))
    cut = train(_cfg(tmp_path, "cut", **kw))
    assert cut["step"] == full["step"] == 8
    assert cut["dev_losses"] == full["dev_losses"]
    a = load_file(str(tmp_path / "full/model/model.safetensors"))
    b = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert all((a[k] == b[k]).all() for k in a)
    strip = [{k: v for k, v in r.items() if k != "sentences_per_s"}
             for r in csv.DictReader(open(tmp_path / "full/log.csv"))]
    strip_cut = [{k: v for k, v in r.items() if k != "sentences_per_s"}
                 for r in csv.DictReader(open(tmp_path / "cut/log.csv"))]
    assert strip == strip_cut


def test_a_max_steps_run_scores_its_held_out_batches_at_the_end(tmp_path, capsys):
    """--dev-every with --max-steps gave dev_loss null and no warning (the held-out loss was only scored when an
    epoch ended). The final model is now scored on the pass's held-out batches at the end, also when the stream
    has not reached them yet; it is not logged (a resume with a larger --max-steps goes on as the uninterrupted run,
    test_held_out_batches_resume_exactly)."""
    kw = dict(epochs=3, objective="qt", dev_every=3)  # 5 batches an epoch, batch 2 held out: 4 steps an epoch
    early = train(_cfg(tmp_path, "early", max_steps=2, **kw))  # stopped before batch 2 was read
    assert early["dev_losses"] == [] and early["dev_loss"] == pytest.approx(
        _dev_loss_by_hand(tmp_path / "early", _cfg(tmp_path, "x", **kw), [2]), rel=1e-5)
    assert "step 2 (the end): dev loss" in capsys.readouterr().out
    # what was read on to reach the held-out batches is not counted in the pass's statistics (summary, checkpoint)
    from nlp_qt.train import QuickThoughtApp

    score = QuickThoughtApp.score_held_out_at_the_end
    QuickThoughtApp.score_held_out_at_the_end = lambda self: None
    try:
        unscored = train(_cfg(tmp_path, "unscored", max_steps=2, **kw))
    finally:
        QuickThoughtApp.score_held_out_at_the_end = score
    assert early["corpus_stats_last_pass"] == unscored["corpus_stats_last_pass"]
    mid = train(_cfg(tmp_path, "mid", max_steps=6, **kw))  # inside the second epoch
    assert [d["step"] for d in mid["dev_losses"]] == [4]
    assert mid["dev_loss"] == pytest.approx(_dev_loss_by_hand(tmp_path / "mid", _cfg(tmp_path, "x", **kw), [2]),
                                            rel=1e-5)
    assert mid["dev_loss"] != pytest.approx(mid["dev_losses"][0]["dev_loss"], rel=1e-6)  # the model moved
    assert [r["step"] for r in csv.DictReader(open(tmp_path / "mid/log.csv")) if r["dev_loss"]] == ["4"]


def test_a_run_resumed_at_its_last_step_scores_the_same_held_out_loss(tmp_path, capsys):
    """Killed after its final checkpoint but before summary.json, a --max-steps run resumed, trained nothing and
    wrote dev_loss null, with a warning that no batch was held out (the end's held-out loss is scored from the corpus
    stream, which a resume at the last step never opened)."""
    kw = dict(epochs=3, objective="qt", dev_every=3)
    for steps in (2, 6):  # before the pass's held-out batch was read; inside the second pass
        done = train(_cfg(tmp_path, f"r{steps}", max_steps=steps, **kw))
        (tmp_path / f"r{steps}" / "summary.json").unlink()  # as a kill between the checkpoint and the summary
        capsys.readouterr()
        again = train(_cfg(tmp_path, f"r{steps}", max_steps=steps, **kw))
        out = capsys.readouterr().out
        assert again["dev_loss"] == done["dev_loss"] is not None and again["dev_losses"] == done["dev_losses"]
        assert again["corpus_stats_last_pass"] == done["corpus_stats_last_pass"]
        assert "held out no batch" not in out and f"step {steps} (the end): dev loss" in out


def test_the_last_line_says_which_limit_ended_the_run(tmp_path, capsys):
    """`--max-steps 200` on a corpus of one epoch's 50 batches said "done: 50 steps" without saying that --epochs
    (default 1) ended it first."""
    train(_cfg(tmp_path, "steps", max_steps=2))
    assert "done: 2 steps, 16 sentences (the end of --max-steps 2)" in capsys.readouterr().out
    s = train(_cfg(tmp_path, "epochs", max_steps=10_000, epochs=1))
    assert s["step"] < 10_000
    assert "sentences (the end of --epochs 1: 1 pass over the corpus)" in capsys.readouterr().out


def test_batches_without_a_neighbour_are_no_optimiser_steps(tmp_path, capsys):
    """A run whose batches were all skipped (no sentence with a neighbour) said "done: 2 steps" with final_loss -0.0
    and logged a loss of -0.0: the zero stand-in loss of a skipped step. Steps still count batches (--max-steps,
    checkpoints and resumes count them); a skipped one has no loss."""
    (tmp_path / "lonely.txt").write_text("".join(f"Lonely line {i} stands alone.\n\n" for i in range(32)))
    s = train(_cfg(tmp_path, "lonely", corpus=str(tmp_path / "lonely.txt"), doc_boundary="blank_line", max_steps=2))
    assert (s["step"], s["optimizer_steps"], s["no_neighbour_batches"], s["final_loss"]) == (2, 0, 2, None)
    assert "done: 2 steps (0 optimiser steps)" in capsys.readouterr().out
    assert [r["loss"] for r in csv.DictReader(open(tmp_path / "lonely/log.csv"))] == ["", ""]
    # two batches of a document, then two skipped: the final loss is the second step's, resumed or not
    doc = " ".join(f"Sentence {i} of the long document is here." for i in range(16))
    (tmp_path / "mixed.txt").write_text("\n".join([doc] + [f"Lonely line {i} stands alone." for i in range(16)]) + "\n")
    kw = dict(corpus=str(tmp_path / "mixed.txt"), doc_boundary="line", epochs=1, checkpoint_every=1)
    two = train(_cfg(tmp_path, "two", max_steps=2, **kw))
    full = train(_cfg(tmp_path, "full", **kw))
    assert (full["step"], full["optimizer_steps"], full["final_loss"]) == (4, 2, two["final_loss"])
    assert [r["loss"] == "" for r in csv.DictReader(open(tmp_path / "full/log.csv"))] == [False, False, True, True]
    train(_cfg(tmp_path, "cut", max_steps=3, **kw))
    assert train(_cfg(tmp_path, "cut", **kw))["final_loss"] == full["final_loss"]


def _word_vectors(folder, words, dim, lowercase=False, seed=0):
    """A folder in nlp_qt.bow's format, written by hand (no gensim needed)."""
    folder.mkdir()
    vectors = np.random.default_rng(seed).normal(size=(len(words), dim)).astype(np.float32)
    np.save(folder / "word_vectors.npy", vectors)
    (folder / "words.json").write_text(json.dumps(words))
    (folder / "bow.json").write_text(json.dumps({"config": {"lowercase": lowercase, "dim": dim}, "tokenizer": 3}))
    return vectors


def test_word_vectors_initialise_both_encoders_rows_and_nothing_else(tmp_path):
    import torch

    from nlp_qt.model import QuickThought, ModelConfig, init_word_vectors

    words = ["story", "cat", "Book", "zebra-not-in-corpus", "the"]
    vectors = _word_vectors(tmp_path / "wv", words, dim=8)
    untrained = train(_cfg(tmp_path, "init", max_steps=0, word_vectors=str(tmp_path / "wv")))
    plain = train(_cfg(tmp_path, "plain", max_steps=0))
    a, vocab = load_model(tmp_path / "init/model")
    b, _ = load_model(tmp_path / "plain/model")
    in_vocab = [w for w in words if w in vocab.stoi]
    assert untrained["word_vectors_covered"] == len(in_vocab) == 4 and "word_vectors_covered" not in plain
    for enc_a, enc_b in ((a.f, b.f), (a.g, b.g)):
        wa, wb = enc_a.embed.weight, enc_b.embed.weight
        for w in in_vocab:  # the word's row is exactly its vector
            assert torch.equal(wa[vocab.stoi[w]], torch.from_numpy(vectors[words.index(w)]))
        rest = [i for i, w in enumerate(vocab.itos) if w not in in_vocab]
        assert 0 in rest and 1 in rest  # <pad> and <unk> keep theirs
        assert torch.equal(wa[rest], wb[rest])  # same seed: every other row (and the GRUs) as without vectors
        assert all(torch.equal(p, q) for p, q in zip(enc_a.gru.parameters(), enc_b.gru.parameters()))
    assert not a.f.embed.weight[0].any()
    # a training run from the vectors moves them (they are trained on) and resumes exactly
    full = train(_cfg(tmp_path, "full", max_steps=4, word_vectors=str(tmp_path / "wv")))
    train(_cfg(tmp_path, "cut", max_steps=2, word_vectors=str(tmp_path / "wv")))
    cut = train(_cfg(tmp_path, "cut", max_steps=4, word_vectors=str(tmp_path / "wv")))
    assert full["step"] == cut["step"] == 4 and full["word_vectors_covered"] == cut["word_vectors_covered"] == 4
    fa = load_file(str(tmp_path / "full/model/model.safetensors"))
    fb = load_file(str(tmp_path / "cut/model/model.safetensors"))
    assert all(torch.equal(fa[k], fb[k]) for k in fa)
    row = vocab.stoi["cat"]
    assert not torch.equal(fa["f.embed.weight"][row], torch.from_numpy(vectors[1]))
    with pytest.raises(ValueError, match="word_vectors"):  # a resume with other vectors is refused
        train(_cfg(tmp_path, "cut", max_steps=6))
    m = QuickThought(ModelConfig(10, 4, 4))
    with pytest.raises(ValueError, match="8 dimensions, the model's word embeddings 4"):
        init_word_vectors(m, ["<pad>", "<unk>", "cat"], ["cat"], vectors[:1])


@pytest.mark.parametrize("break_it, message", [
    (lambda d: (d / "words.json").unlink(), "no words.json there"),
    (lambda d: (d / "words.json").write_text(json.dumps(["a", "b"])), r"shape \(5, 8\), expected \[2 words"),
    (lambda d: (d / "words.json").write_text("{not json"), "unreadable"),
    (lambda d: np.save(d / "word_vectors.npy", np.full((5, 8), np.nan, np.float32)), "non-finite"),
    (lambda d: None, "has 8-d vectors but --word-dim is 6"),
])
def test_bad_word_vectors_are_refused_before_reading_the_corpus(tmp_path, break_it, message):
    _word_vectors(tmp_path / "wv", ["story", "cat", "Book", "dog", "the"], dim=8)
    break_it(tmp_path / "wv")
    with pytest.raises(ValueError, match=message):
        train(_cfg(tmp_path, "bad", word_dim=6 if "word-dim" in message else 8, word_vectors=str(tmp_path / "wv")))
    assert not (tmp_path / "bad").exists()


def test_word_vectors_with_another_case_rule_are_refused(tmp_path):
    _word_vectors(tmp_path / "wv", ["story"], dim=8, lowercase=True)
    with pytest.raises(ValueError, match="lowercase=True"):
        train(_cfg(tmp_path, "bad", word_vectors=str(tmp_path / "wv")))
    with pytest.raises(ValueError, match="no bow.json, word_vectors.npy, words.json there"):
        train(_cfg(tmp_path, "bad", word_vectors=str(tmp_path / "missing")))


def test_torch_threads_is_an_option_as_in_rl_curl_and_the_summary_records_the_count(tmp_path):
    """The thread count changes a CPU run's weights in their last digits; nlp_qt.train had no option for it (only
    OMP_NUM_THREADS) where rl_curl.train has --torch-threads."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        assert train(_cfg(tmp_path, "one", max_steps=2, torch_threads=1, resume=False))["torch_threads"] == 1
        assert torch.get_num_threads() == 2  # the caller's count given back (a notebook's next run took the run's)
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match=r"--torch-threads must be >= 0 \(0: torch's default\), got -1"):
        train(_cfg(tmp_path, "bad", torch_threads=-1))
    assert not (tmp_path / "bad").exists()


def test_checkpoint_every_0_writes_the_checkpoint_at_the_end_only(tmp_path):
    """As rl_curl.train's --checkpoint-every 0 (only at the end); nlp_qt.train refused it ("must be positive")."""
    import torch

    assert train(_cfg(tmp_path, "run", max_steps=3, checkpoint_every=0, resume=False))["step"] == 3
    state = torch.load(tmp_path / "run" / "checkpoint" / "extra.pt", weights_only=False)
    assert state["step"] == 3
    with pytest.raises(ValueError, match=r"--checkpoint-every must be >= 0 \(0: only at the end\), got -1"):
        train(_cfg(tmp_path, "bad", checkpoint_every=-1))


@pytest.mark.parametrize("field, message", [
    ("clip_norm", r"clip_norm must be >= 0 .*got nan"),
    ("temperature", "temperature must be a finite number > 0, got nan"),
    ("lr", "--lr must be positive, got nan"),  # it named four options at once ("epochs, lr, log_every and ...")
])
def test_nan_values_are_refused_before_reading_the_corpus(tmp_path, field, message):
    """Issue 34: `x < 0` lets NaN through (--clip-norm nan clipped every gradient to NaN); refused up front."""
    with pytest.raises(ValueError, match=message):
        train(_cfg(tmp_path, "bad", **{field: float("nan")}))
    assert not (tmp_path / "bad").exists()


def test_max_length_below_1_is_refused_by_its_option(tmp_path):
    """--max-length 0 was refused as the vocabulary's "max_len must be >= 1", an argument the user never named."""
    with pytest.raises(ValueError, match=r"^--max-length must be positive, got 0$"):
        train(_cfg(tmp_path, "bad", max_length=0))
    assert not (tmp_path / "bad").exists()


def test_the_corpus_stream_changes_nothing_of_the_run(tmp_path):
    """The stream of batches and epoch ends is data only: reading it all leaves the run's counters as they were
    (the held-out loss and the counters are the step's work, logged through the loop)."""
    from nlp_qt.train import QuickThoughtApp

    app = QuickThoughtApp(_cfg(tmp_path, "stream", epochs=2, dev_every=3))
    before = (app.step, app.epoch, app.batch_in_epoch, app.sentences_seen, list(app.dev_losses), app.stats)
    events = list(app.corpus_events(0, 0))
    assert (app.step, app.epoch, app.batch_in_epoch, app.sentences_seen, app.dev_losses, app.stats) == before
    kinds = [kind for kind, _ in events]
    assert kinds.count("epoch") == kinds.count("end") == 2 and kinds.count("batch") == 8 and kinds.count("held") == 2
    # from epoch 1 after its first 2 batches (0, 1; batch 2 is held out): batches 3 and 4 are left to train
    assert [k for k, _ in app.corpus_events(1, 2)] == ["epoch", "held", "batch", "batch", "end"]


def test_a_bad_file_met_mid_run_keeps_the_steps_trained_and_the_run_continues_once_it_is_fixed(tmp_path):
    """On a large corpus the vocabulary pass (--vocab-sentences) may never reach a bad file (an interrupted download,
    here a truncated .gz): the run stopped there without a checkpoint of the steps since the last one, and no resume
    was possible: with the file fixed or removed the corpus had changed. Now the error writes a checkpoint, and
    --accept-corpus-change resumes on the fixed corpus."""
    import gzip

    import torch

    from nlp_qt.corpus import CorpusError

    corpus = tmp_path / "books"
    corpus.mkdir()
    (corpus / "a.txt").write_text("".join(f"Part {i} of the long story tells of the {['cat', 'dog'][i % 2]}. "
                                          f"Then the {['bird', 'fox'][i % 2]} ran off again {i} times.\n\n"
                                          for i in range(60)))
    whole = gzip.compress(b"The last book starts here. It goes on and on.\n" * 200)
    (corpus / "z.txt.gz").write_bytes(whole[: len(whole) // 2])  # cut short
    cfg = dict(corpus=str(corpus), vocab_sentences=50, max_steps=40, checkpoint_every=1000, resume=False)
    with pytest.raises(CorpusError, match=r"met at step (\d+): the checkpoint holds every step trained; .*"
                                          r"--resume --accept-corpus-change") as err:
        train(_cfg(tmp_path, "run", **cfg))
    stopped_at = int(re.search(r"met at step (\d+)", str(err.value)).group(1))
    assert stopped_at > 0
    saved = torch.load(tmp_path / "run" / "checkpoint" / "extra.pt", weights_only=False)
    assert saved["step"] == stopped_at  # every step trained kept (the last checkpoint was only at the start)
    (corpus / "z.txt.gz").write_bytes(whole)  # the file downloaded again
    with pytest.raises(ValueError, match="changed since the checkpoint .* add --accept-corpus-change"):
        train(_cfg(tmp_path, "run", **{**cfg, "resume": True}))
    with pytest.warns(UserWarning, match="--accept-corpus-change: the corpus .* changed since the checkpoint"):
        summary = train(_cfg(tmp_path, "run", **{**cfg, "resume": True, "accept_corpus_change": True}))
    assert summary["step"] == 40


def test_zstd_files_are_refused_and_files_a_folder_does_not_read_are_named(tmp_path):
    """A .txt.zst (The Pile's compression) was read as text: 42,706 of 43,112 lines undecodable and a vocabulary of
    control characters, exit 0; files of other suffixes in a corpus folder were skipped without a word."""
    from nlp_qt.corpus import CorpusError, CorpusStats, iter_corpus

    folder = tmp_path / "books"
    folder.mkdir()
    (folder / "emma.txt").write_text("Emma was handsome. She was clever. She was rich.\n")
    (folder / "persuasion.chapter.01").write_text("Sir Walter was vain. He read the baronetage.\n")
    (folder / "notes.rst").write_text("Notes.\n")
    with pytest.warns(UserWarning, match=r"2 file\(s\) not read, .*\(notes.rst, persuasion.chapter.01\)"):
        sentences = list(iter_corpus(str(folder), CorpusStats()))
    assert sentences and all("Walter" not in s for _, s in sentences)
    import warnings
    with warnings.catch_warnings(record=True) as caught:  # the next pass (an epoch): said once per process, even
        warnings.simplefilter("always")                   # where a library reset the filters in between (it printed
        assert list(iter_corpus(str(folder), CorpusStats())) == sentences  # twice in every nlp_qt.train run)
    assert not [w for w in caught if "not read" in str(w.message)]
    (tmp_path / "pile.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd" + bytes(range(200)))
    with pytest.raises(CorpusError, match=r"pile.txt.zst is zstd-compressed: decompress it first \(zstd -d"):
        list(iter_corpus(str(tmp_path / "pile.txt.zst"), CorpusStats()))


@pytest.mark.parametrize("kw,message", [
    (dict(objective="qt", log_floor="none"), "--log-floor none only applies to --objective debiased or hard or cpc"),
    (dict(encoder="bow", no_direction=True), "--no-bidirectional is the gru encoder's; --encoder bow has no direction"),
    (dict(encoder="conv", no_direction=True), "--no-bidirectional is the gru encoder's"),
    (dict(dev_max_batches=5), "--dev-max-batches 5 sizes the held-out batches of --dev-every, which is 0"),
    (dict(accept_corpus_change=True, resume=False), "--accept-corpus-change lets --resume continue"),
    (dict(clip_mode="global", clip_norm=0.0), "--clip-mode global chooses how --clip-norm clips"),
])
def test_options_that_would_do_nothing_are_refused_before_the_corpus_is_read(tmp_path, kw, message):
    """Each was accepted, recorded in config.json and ignored (the same loss to the last digit): --log-floor with
    qt, --no-bidirectional with bow or conv, --dev-max-batches without held-out batches, --accept-corpus-change on a
    new run, --clip-mode with clipping off."""
    if kw.pop("no_direction", False):
        kw["bidirectional"] = False
    with pytest.raises(ValueError, match=message):
        train(_cfg(tmp_path, "bad", max_steps=1, **kw))
    assert not (tmp_path / "bad").exists()


def test_the_vocabulary_pass_shows_a_bar_and_no_bar_without_progress(tmp_path, capsys):
    """The vocabulary pass (minutes on a large corpus: 5M sentences by default) printed nothing until it ended."""
    from nlp_qt.train import build_vocab

    build_vocab(_cfg(tmp_path, "v", progress=True))
    assert "vocabulary pass" in capsys.readouterr().err
    build_vocab(_cfg(tmp_path, "v", progress=False))
    assert "vocabulary pass" not in capsys.readouterr().err


def test_the_last_step_is_logged_and_a_resumes_rate_counts_only_the_batches_it_trains(tmp_path, monkeypatch):
    """--max-steps 6 with --log-every 4 logged steps 1 and 4 only (summary.json's loss was step 6's); a run that ends
    with its epochs too. After a resume the rate (sentences_per_s) counted the reading past the batches already
    trained as training time: 6.66 sentences/s at the first rows where an unbroken run made 190."""
    import nlp_qt.train as qt_train

    def rows(out):
        return list(csv.DictReader(open(tmp_path / out / "log.csv")))

    assert train(_cfg(tmp_path, "six", max_steps=6, log_every=4, epochs=5))["step"] == 6
    assert [int(r["step"]) for r in rows("six") if r["loss"]] == [1, 4, 6]
    done = train(_cfg(tmp_path, "epoch", epochs=1, log_every=100))
    assert [int(r["step"]) for r in rows("epoch") if r["loss"]] == [1, done["step"]] and done["step"] > 1
    # a clock that moves only while sentences are read: one second a sentence
    clock = [0.0]
    real_stream = qt_train.sentence_stream

    def slow_stream(cfg, stats=None):
        for item in real_stream(cfg, stats):
            clock[0] += 1.0
            yield item

    monkeypatch.setattr(qt_train, "sentence_stream", slow_stream)
    monkeypatch.setattr(qt_train.time, "perf_counter", lambda: clock[0])
    train(_cfg(tmp_path, "cut", max_steps=4, log_every=1))
    train(_cfg(tmp_path, "cut", max_steps=5, log_every=1))
    first_resumed = next(r for r in rows("cut") if int(r["step"]) == 5)
    assert float(first_resumed["sentences_per_s"]) >= 0.5  # 8 sentences in about 8 s of reading, not 40


def test_a_debiased_batch_of_two_is_refused_before_the_run_folder(tmp_path):
    """--batch-size 2 with debiased or hard failed at step 1 ("anchor 0, turn 1 has no negative"), after the folder
    was made: a neighbour's term takes the batch but the sentence and that neighbour as negatives."""
    for objective in ("debiased", "hard"):
        with pytest.raises(ValueError, match=f"--objective {objective} needs --batch-size >= 3"):
            train(_cfg(tmp_path, objective, batch_size=2, objective=objective, tau_plus=0.01, max_steps=1))
        assert not (tmp_path / objective).exists()
    # QT at 2 with the sentence excluded: its neighbour was the only candidate, the loss 0 (-0.0) at every step and
    # the gradient 0, and the run ended with status 0; refused too. With the sentence kept as a candidate it trains.
    with pytest.raises(ValueError, match="--objective qt with --self-score exclude needs --batch-size >= 3"):
        train(_cfg(tmp_path, "qt", batch_size=2, max_steps=1))
    assert not (tmp_path / "qt").exists()
    done = train(_cfg(tmp_path, "qt_zero", batch_size=2, max_steps=2, self_score="zero"))
    assert done["step"] == 2 and done["final_loss"] > 0.1


@pytest.mark.parametrize("form", ["glove", "glove.gz", "vec", "bin", "bin.gz"])
def test_word_vectors_from_the_files_their_authors_publish(tmp_path, form, capsys):
    """--word-vectors FILE: GloVe's text files (no header), word2vec / fastText text (.vec, a header) and word2vec's
    binary files, each also gzip-compressed (only nlp_qt.bow's folder was read: "no bow.json ... there", found by a
    probe). A vocabulary word's row is its vector exactly; a capitalised vocabulary word the lower-case file lacks
    takes its lower-case form's vector, and the line says how many did."""
    import gzip

    import torch

    rng = np.random.default_rng(0)
    words = ["story", "cat", "the", "a word", "zebra-not-in-corpus", "book"]  # GloVe 840B has words with spaces
    if form.startswith("bin"):  # binary word2vec ends a word at a space: none has one
        words[3] = "a-word"
    vectors = rng.normal(size=(len(words), 8)).astype(np.float32)
    name = {"glove": "g.txt", "glove.gz": "g.txt.gz", "vec": "w.vec", "bin": "w.bin", "bin.gz": "w.bin.gz"}[form]
    path = tmp_path / name
    if form.startswith("bin"):
        data = f"{len(words)} 8\n".encode() + b"".join(w.encode() + b" " + v.astype("<f4").tobytes() + b"\n"
                                                       for w, v in zip(words, vectors))
    else:
        lines = [f"{w} " + " ".join(repr(float(x)) for x in v) for w, v in zip(words, vectors)]
        data = ("\n".join(([f"{len(words)} 8"] if form == "vec" else []) + lines) + "\n").encode()
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    train(_cfg(tmp_path, "init", max_steps=0, word_vectors=str(path)))
    model, vocab = load_model(tmp_path / "init/model")
    for w in ("story", "cat", "the"):
        assert torch.equal(model.f.embed.weight[vocab.stoi[w]], torch.from_numpy(vectors[words.index(w)])), w
        assert torch.equal(model.g.embed.weight[vocab.stoi[w]], torch.from_numpy(vectors[words.index(w)])), w
    capitalised = [w for w in vocab.itos if w != w.lower() and w.lower() in words]
    assert capitalised  # the corpus has "Book" (or another), the file only "book"
    for w in capitalised:
        assert torch.equal(model.f.embed.weight[vocab.stoi[w]], torch.from_numpy(vectors[words.index(w.lower())]))
    assert f"({len(capitalised)} of them by their lower-case form, which the file has instead)" in \
        capsys.readouterr().out


def test_a_word_vector_file_that_does_not_fit_is_refused_before_the_corpus_is_read(tmp_path):
    (tmp_path / "g.txt").write_text("cat 0.1 0.2 0.3\nthe 0.4 0.5 0.6\n")
    with pytest.raises(ValueError, match="has 3-d vectors but --word-dim is 8; set --word-dim 3"):
        train(_cfg(tmp_path, "dim", max_steps=0, word_vectors=str(tmp_path / "g.txt")))
    assert not (tmp_path / "dim").exists()
    (tmp_path / "bad.txt").write_text("cat " + " ".join(["0.1"] * 8) + "\nthe 0.4 oops\n")
    with pytest.raises(ValueError, match=r"bad.txt, line 2: expected a word and 8 numbers, got 3 fields"):
        train(_cfg(tmp_path, "bad", max_steps=0, word_vectors=str(tmp_path / "bad.txt")))
    (tmp_path / "cut.bin").write_bytes(b"2 8\ncat " + np.zeros(8, "<f4").tobytes() + b"\nthe " + b"\0" * 5)
    with pytest.raises(ValueError, match="cut.bin: the file ends inside entry 2 of 2"):
        train(_cfg(tmp_path, "cut", max_steps=0, word_vectors=str(tmp_path / "cut.bin")))
    (tmp_path / "x.bin").write_bytes(b"cat 0.1 0.2\n")
    with pytest.raises(ValueError, match="a binary word2vec file starts with a line '<count> <dim>'"):
        train(_cfg(tmp_path, "x", max_steps=0, word_vectors=str(tmp_path / "x.bin")))


def test_a_run_made_before_an_unread_option_was_refused_still_resumes(tmp_path):
    """A run made with `--objective qt --log-floor none` (accepted then, without effect) could not be continued once
    the option was refused: the resume named log_floor as changed, and giving it again was refused. A resume does not
    compare the options the run does not read."""
    import json

    import torch

    train(_cfg(tmp_path, "old", max_steps=2, objective="qt"))
    run = tmp_path / "old"
    for key, value in (("log_floor", "none"), ("dev_max_batches", 7)):  # as the earlier version recorded them
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, key: value}))
        extra = torch.load(run / "checkpoint" / "extra.pt", weights_only=False)
        extra["config"] = {**extra["config"], key: value}
        torch.save(extra, run / "checkpoint" / "extra.pt")
    assert train(_cfg(tmp_path, "old", max_steps=4, objective="qt"))["step"] == 4
    with pytest.raises(ValueError, match="temperature"):  # what the run reads is still compared
        train(_cfg(tmp_path, "old", max_steps=6, objective="qt", temperature=0.5))


def test_a_run_trained_in_fp16_continues_where_fp16_cannot_run(tmp_path, monkeypatch):
    """A run trained on a GPU with --mixed-precision fp16 could not be continued on a CPU: fp16 is refused there, and
    any other precision was refused as a changed option. Where fp16 cannot run it continues in the precision given,
    with a warning; where it can (a GPU), the change is still refused."""
    import json

    import torch

    import shared_losses.training.runtime as runtime

    train(_cfg(tmp_path, "gpu", max_steps=2))
    run = tmp_path / "gpu"

    def trained_in_fp16():  # the run's records as a GPU run with fp16 leaves them
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "mixed_precision": "fp16"}))
        extra = torch.load(run / "checkpoint" / "extra.pt", weights_only=False)
        extra["config"] = {**extra["config"], "mixed_precision": "fp16"}
        torch.save(extra, run / "checkpoint" / "extra.pt")

    trained_in_fp16()
    with monkeypatch.context() as m:
        m.setattr(runtime, "gpu_available", lambda: True)  # a GPU here: give fp16 again, or another folder
        with pytest.raises(ValueError, match=r"mixed_precision: 'fp16' -> 'no'"):
            train(_cfg(tmp_path, "gpu", max_steps=4))
        with pytest.warns(UserWarning, match=r"trained with --mixed-precision fp16, which cannot run here .* "
                                             r"continues with --mixed-precision no"):  # --device cpu on a GPU host
            assert train(_cfg(tmp_path, "gpu", max_steps=3, device="cpu"))["step"] == 3
    assert json.loads((run / "config.json").read_text())["mixed_precision"] == "no"  # the precision it went on in
    trained_in_fp16()
    with pytest.warns(UserWarning, match=r"continues with --mixed-precision no") as said:  # no GPU
        assert train(_cfg(tmp_path, "gpu", max_steps=4))["step"] == 4
    assert sum("fp16" in str(w.message) for w in said) == 1  # once, though the checkpoint and config.json both say it


def test_runs_of_other_precisions_follow_each_other_in_one_process(tmp_path):
    """A notebook or a sweep script calling train() twice: the second run with another --mixed-precision was refused
    by accelerate ("AcceleratorState has already been initialized and cannot be changed, restart your runtime").
    Each run now gets the precision it asks for; the last one puts the process back at "no" for the tests after."""
    from accelerate.state import AcceleratorState

    first = train(_cfg(tmp_path, "no", max_steps=2, resume=False))
    assert AcceleratorState._shared_state["_mixed_precision"] == "no"
    second = train(_cfg(tmp_path, "bf16", max_steps=2, resume=False, mixed_precision="bf16"))
    assert AcceleratorState._shared_state["_mixed_precision"] == "bf16"
    third = train(_cfg(tmp_path, "again", max_steps=2, resume=False))
    assert AcceleratorState._shared_state["_mixed_precision"] == "no"
    assert first["step"] == second["step"] == third["step"] == 2
    logs = [[r["loss"] for r in csv.DictReader(open(tmp_path / name / "log.csv"))] for name in ("no", "again")]
    assert logs[0] == logs[1]  # the same run again after a bf16 one: the same losses


def test_an_output_folder_inside_the_corpus_folder_is_refused(tmp_path):
    """The run's files (config.json, checkpoint/COMPLETE, ...) were read as corpus text by the next run, and the
    run itself could not be resumed (its corpus had changed: its own files)."""
    corpus = tmp_path / "books"
    corpus.mkdir()
    (corpus / "a.txt").write_text("".join(f"Alpha beta gamma {i}. Delta epsilon zeta {i}.\n" for i in range(60)))
    for out in (corpus / "run", corpus):
        with pytest.raises(ValueError, match=r"--output-dir .* is inside --corpus .*: the run's own files would "
                                             "be read as text"):
            train(_cfg(tmp_path, "x", corpus=str(corpus), output_dir=str(out)))
    assert sorted(p.name for p in corpus.iterdir()) == ["a.txt"]


@pytest.mark.parametrize("field, low", [("word_dim", 1), ("encoder_dim", 1), ("conv_width", 1), ("cpc_length", 2)])
def test_sizes_are_refused_by_their_own_option(tmp_path, field, low):
    """--word-dim 0 said "invalid model sizes: ModelConfig(...)"; --conv-width 0 named cpc_steps and cpc_length too."""
    extra = {"conv_width": {"encoder": "conv"}, "cpc_length": {"objective": "cpc"}}.get(field, {})
    with pytest.raises(ValueError, match=rf"^--{field.replace('_', '-')} must be >= {low}, got {low - 1}$"):
        train(_cfg(tmp_path, "x", **{field: low - 1}, **extra))
