"""Issue 46, item 12: divergence is a result, not silence. A run whose loss stops being finite or whose weights run
off (a learning rate of 1e30) stops with one line naming the steps, what went wrong and the learning rate, and
writes no checkpoint of the diverged model (its last good checkpoint stays). rl_curl's own check is in
tests/rl_curl/test_graphs.py."""

import math

import pytest
import torch

from shared_losses.training.runtime import DivergenceWatch, TrainingDiverged


def test_the_watch_names_the_steps_what_went_wrong_and_the_checkpoint_kept():
    w = torch.nn.Parameter(torch.tensor([0.5, -3.0]))
    watch = DivergenceWatch([w], lr=1e-3)
    assert watch.initial == 3.0
    watch.check(10, loss=2.5)
    assert watch.ok_until == 10
    with torch.no_grad():
        w[0] = 2.9e6  # under 1e6 x 3: still healthy
    watch.check(20, loss=2.5)
    with pytest.raises(TrainingDiverged, match=r"between steps 20 and 30: the loss is nan \(--lr 0.001\).*no "
                                               r"checkpoint yet"):
        watch.check(30, loss=math.nan)
    watch.checkpointed = 20
    with torch.no_grad():
        w[1] = 4e6
    with pytest.raises(TrainingDiverged, match=r"a weight reached 4e\+06, over 1e\+06 times the largest initial one "
                                               r"\(3\).*its last checkpoint, at step 20, is kept"):
        watch.check(40, loss=1.0)
    with torch.no_grad():
        w[1] = float("inf")
    with pytest.raises(TrainingDiverged, match="a weight is NaN or infinite"):
        watch.check(50)
    tiny = DivergenceWatch([torch.nn.Parameter(torch.full((3,), 1e-3))], lr=1.0)
    assert tiny.initial == 1.0  # small initial weights: growth is measured from 1


def test_nlp_qt_at_lr_1e30_stops_at_its_first_step_without_a_checkpoint(tmp_path):
    from nlp_qt.train import train

    from .nlp_qt.test_train import _cfg

    with pytest.raises(TrainingDiverged, match=r"training diverged between steps 0 and 1: a weight reached .*"
                                               r"\(--lr 1e\+30\).*no checkpoint yet"):
        train(_cfg(tmp_path, "run", max_steps=6, lr=1e30))
    assert not (tmp_path / "run" / "checkpoint").exists() and not (tmp_path / "run" / "summary.json").exists()


def test_nlp_qt_diverging_later_keeps_its_last_good_checkpoint(tmp_path, monkeypatch):
    """Weights poisoned after step 3 (checkpoints every 2 steps): step 4's loss is NaN, the run stops there without
    its step-4 checkpoint, and step 2's stays."""
    from nlp_qt.train import QuickThoughtApp, train

    from .nlp_qt.test_train import _cfg

    step = QuickThoughtApp.train_step

    def poisoned(self):
        row = step(self)
        if self.step == 3:
            with torch.no_grad():
                next(self.model.parameters()).fill_(float("nan"))
        return row

    monkeypatch.setattr(QuickThoughtApp, "train_step", poisoned)
    with pytest.raises(TrainingDiverged, match=r"between steps 3 and 4: the loss is nan .*its last checkpoint, at step "
                                               r"2, is kept"):
        train(_cfg(tmp_path, "run", max_steps=6))
    saved = torch.load(tmp_path / "run" / "checkpoint" / "extra.pt", weights_only=False)
    assert saved["step"] == 2
