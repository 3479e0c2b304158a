"""Issue 34 for fewshot: a second Ctrl-C stops at once with one line (exit 130), another application's
checkpoint is refused before it is read (it ended in KeyError: 'config'), a failed resume leaves the folder
as it was, fp16 on the CPU is refused before anything is written, and the PU pipeline honours --no-progress."""

import pytest

from fewshot.train import train
from shared_losses.training.runtime import CheckpointError

from ..folder_rules import check_second_ctrl_c_stops_at_once, tree_hash
from .test_fewshot import _cfg


def test_a_second_ctrl_c_stops_at_once_with_one_line(tiny_encoder, easy_task, tmp_path, monkeypatch, capsys):
    import fewshot.train as fs_train

    check_second_ctrl_c_stops_at_once(monkeypatch, capsys, fs_train, "fewshot_loss", at=2, start=lambda: train(
        _cfg(tiny_encoder, easy_task, tmp_path, max_steps=4, eval_every=4, checkpoint_every=4)))
    assert not (tmp_path / "run" / "metrics.json").exists()


def test_a_checkpoint_of_another_application_is_refused(tiny_encoder, easy_task, tmp_path):
    import torch

    kw = dict(max_steps=2, eval_every=2, checkpoint_every=2)
    train(_cfg(tiny_encoder, easy_task, tmp_path, **kw))
    out = tmp_path / "run"
    extra = out / "checkpoint" / "extra.pt"
    assert torch.load(extra, weights_only=False)["application"] == "fewshot"
    for foreign, app in (({"step": 1, "epoch": 0, "batch_in_epoch": 4, "application": "nlp_qt"}, "nlp_qt"),
                         ({"step": 1, "episode": 0, "signature": {}, "application": "rl_curl"}, "rl_curl"),
                         ({"step": 1, "config": {}}, None)):
        torch.save(foreign, extra)
        before = tree_hash(out)
        said = f"not a checkpoint of fewshot: it was written by {app}" if app else "names no application"
        with pytest.raises(CheckpointError, match=said):
            train(_cfg(tiny_encoder, easy_task, tmp_path, resume=True, **{**kw, "max_steps": 4}))
        assert tree_hash(out) == before


def test_a_failed_resume_leaves_the_folder_as_it_was(tiny_encoder, easy_task, tmp_path):
    kw = dict(max_steps=2, eval_every=2, checkpoint_every=2)
    train(_cfg(tiny_encoder, easy_task, tmp_path, **kw))
    out = tmp_path / "run"
    model = out / "checkpoint" / "model.safetensors"
    model.write_bytes(model.read_bytes()[:200])
    before = tree_hash(out)
    with pytest.raises(CheckpointError):  # --max-steps is free: config.json would say 4 if the resume got that far
        train(_cfg(tiny_encoder, easy_task, tmp_path, resume=True, **{**kw, "max_steps": 4}))
    assert tree_hash(out) == before


def test_fp16_on_the_cpu_is_refused_before_anything_is_written(tiny_encoder, easy_task, tmp_path):
    with pytest.raises(ValueError, match="fp16 needs a GPU"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, mixed_precision="fp16"))
    assert not (tmp_path / "run").exists()


def test_the_pu_pipeline_shows_no_progress_bar_with_no_progress(tiny_encoder, easy_task, tmp_path, capsys):
    train(_cfg(tiny_encoder, easy_task, tmp_path, setting="pu", n_labeled=30, n_unlabeled=100, max_steps=3,
               checkpoint_every=3, progress=False))
    err = capsys.readouterr().err
    assert "it/s" not in err and "step/s" not in err and "%|" not in err, err
    train(_cfg(tiny_encoder, easy_task, tmp_path, setting="pu", n_labeled=30, n_unlabeled=100, max_steps=3,
               checkpoint_every=3, output_dir=str(tmp_path / "shown")))
    assert "%|" in capsys.readouterr().err  # the bar is there without --no-progress (the check can fail)
