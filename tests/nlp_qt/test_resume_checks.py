"""Issue 34, items 1-4 for nlp_qt: a resume that fails leaves the folder byte for byte as it was (config.json
included), a resume whose config.json was deleted is still checked against the checkpoint's options, another
application's checkpoint is refused before it is read, a start that fails on bad input leaves no run, and
``--mixed-precision fp16`` on the CPU is refused before anything starts."""

import json
import shutil

import pytest

from nlp_qt.train import train
from shared_losses.training.harness import ConfigChanged
from shared_losses.training.runtime import CheckpointError

from ..folder_rules import tree_hash
from .test_train import _cfg


def _damage(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_failed_resume_leaves_the_folder_and_config_json_as_they_were(tmp_path):
    train(_cfg(tmp_path, "run", max_steps=2))
    out = tmp_path / "run"
    _damage(out / "checkpoint" / "model.safetensors")
    before = tree_hash(out)
    # --max-steps is free on resume, so config.json would be rewritten with 4 if the resume got that far
    with pytest.raises(CheckpointError, match=r"model.safetensors \(a model's weights\) is unreadable"):
        train(_cfg(tmp_path, "run", max_steps=4))
    assert tree_hash(out) == before


def test_resume_without_config_json_is_checked_against_the_checkpoint(tmp_path):
    train(_cfg(tmp_path, "run", max_steps=2, objective="debiased", tau_plus=0.01))
    out = tmp_path / "run"
    (out / "config.json").unlink()
    before = tree_hash(out)
    for other in (dict(objective="qt"), dict(objective="debiased", tau_plus=0.05),
                  dict(objective="debiased", tau_plus=0.01, lr=0.5)):
        with pytest.raises(ConfigChanged, match="different configuration"):
            train(_cfg(tmp_path, "run", max_steps=4, **other))
        assert tree_hash(out) == before
    # the same options continue the run, and config.json is written again
    assert train(_cfg(tmp_path, "run", max_steps=4, objective="debiased", tau_plus=0.01))["step"] == 4
    assert json.loads((out / "config.json").read_text())["tau_plus"] == 0.01


def test_a_checkpoint_of_another_application_is_refused_before_it_is_read(tmp_path):
    import torch

    train(_cfg(tmp_path, "run", max_steps=2))
    out = tmp_path / "run"
    extra = out / "checkpoint" / "extra.pt"
    state = torch.load(extra, weights_only=False)
    assert state["application"] == "nlp_qt"
    # only the application the checkpoint names counts: one that names none is refused as well
    cases = {"rl_curl": {"format": 2, "step": 5, "episode": 1, "signature": {}, "config": {}},
             "fewshot": {"step": 5, "config": {"objective": "ce"}, "history": []}}
    for app, foreign in cases.items():
        for marked in (True, False):
            torch.save({**foreign, "application": app} if marked else foreign, extra)
            before = tree_hash(out)
            said = f"not a checkpoint of nlp_qt: it was written by {app}" if marked else "names no application"
            with pytest.raises(CheckpointError, match=said):
                train(_cfg(tmp_path, "run", max_steps=4))
            assert tree_hash(out) == before


def test_a_start_that_fails_on_bad_input_leaves_no_run(tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.txt").write_text("Only one sentence here. And a second one.\n")
    with pytest.raises(ValueError, match="fewer than one batch"):
        train(_cfg(tmp_path, "run", max_steps=2, corpus=str(small)))
    assert not (tmp_path / "run").exists()
    # an empty folder the user made stays, empty
    (tmp_path / "mine").mkdir()
    with pytest.raises(ValueError, match="fewer than one batch"):
        train(_cfg(tmp_path, "mine", max_steps=2, corpus=str(small)))
    assert (tmp_path / "mine").is_dir() and not any((tmp_path / "mine").iterdir())
    # --overwrite of a run, then a failed start: the old run is back, byte for byte, and nothing is left aside
    train(_cfg(tmp_path, "old", max_steps=2))
    before = tree_hash(tmp_path / "old")
    with pytest.raises(ValueError, match="fewer than one batch"):
        train(_cfg(tmp_path, "old", max_steps=2, corpus=str(small), resume=False, overwrite=True))
    assert tree_hash(tmp_path / "old") == before
    assert not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
    # and the folder counts as the same run as before: --resume finds it finished
    shutil.copytree(tmp_path / "old", tmp_path / "copy")
    assert train(_cfg(tmp_path, "copy", max_steps=2))["step"] == 2


def test_fp16_on_the_cpu_is_refused_before_anything_is_written(tmp_path):
    with pytest.raises(ValueError, match="fp16 needs a GPU"):
        train(_cfg(tmp_path, "run", max_steps=2, mixed_precision="fp16", device="cpu"))
    assert not (tmp_path / "run").exists()
