"""Issue 34 for rl_curl: a second Ctrl-C stops at once with one line (exit 130), another application's checkpoint
is refused as such (not as an old agent format), a failed resume leaves the folder as it was, and
rl_curl.evaluate on a folder that holds no run says so."""

import json

import pytest

from rl_curl.train import run as train
from shared_losses.training.runtime import CheckpointError

from ..folder_rules import check_second_ctrl_c_stops_at_once, tree_hash
from .test_train import cfg


def test_a_second_ctrl_c_stops_at_once_with_one_line(tmp_path, monkeypatch, capsys):
    from rl_curl.agent import CurlAgent

    check_second_ctrl_c_stops_at_once(monkeypatch, capsys, CurlAgent, "update", at=3,
                                      start=lambda: train(cfg(tmp_path, "run", env_steps=3000, checkpoint_every=0)))
    assert not (tmp_path / "run" / "summary.json").exists()


def test_a_foreign_checkpoint_is_not_called_an_old_agent_format(tmp_path):
    import torch

    train(cfg(tmp_path, "run", env_steps=1000))
    out = tmp_path / "run"
    extra = out / "checkpoint" / "extra.pt"
    assert torch.load(extra, weights_only=False)["application"] == "rl_curl"
    for foreign, app in (({"step": 3, "epoch": 0, "batch_in_epoch": 4, "application": "nlp_qt"}, "nlp_qt"),
                         ({"step": 3, "config": {}, "application": "fewshot"}, "fewshot"),
                         ({"step": 3, "episode": 0, "signature": {}, "config": {}}, None)):
        torch.save(foreign, extra)
        before = tree_hash(out)
        said = f"not a checkpoint of rl_curl: it was written by {app}" if app else "names no application"
        with pytest.raises(CheckpointError, match=said) as err:
            train(cfg(tmp_path, "run", env_steps=2000, resume=True))
        assert "format" not in str(err.value)
        assert tree_hash(out) == before


def test_a_failed_resume_leaves_the_folder_as_it_was(tmp_path):
    train(cfg(tmp_path, "run", env_steps=1000))
    out = tmp_path / "run"
    target = out / "checkpoint" / "custom_checkpoint_0.pkl"  # the agent's networks
    target.write_bytes(target.read_bytes()[:100])
    before = tree_hash(out)
    with pytest.raises(CheckpointError):  # --env-steps is free on resume: config.json would say 2000
        train(cfg(tmp_path, "run", env_steps=2000, resume=True))
    assert tree_hash(out) == before


def test_evaluate_on_a_folder_that_holds_no_run_says_so(tmp_path):
    from rl_curl.evaluate import load_agent

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text(json.dumps({"learning_rate": 0.1}))
    with pytest.raises(ValueError, match="holds no run") as err:
        load_agent(mine)
    assert "None" not in str(err.value)
