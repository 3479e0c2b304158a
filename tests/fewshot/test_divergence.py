"""Issue 46, item 12, for fewshot's text and image runs (see tests/test_divergence.py)."""

import numpy as np
import pytest

from shared_losses.training.runtime import TrainingDiverged


def test_fewshot_at_lr_1e30_stops_naming_the_step_not_the_features(tiny_encoder, easy_task, tmp_path):
    from fewshot.train import train

    from .test_fewshot import _cfg

    with pytest.raises(TrainingDiverged, match=r"between steps 0 and 1: a weight reached .*\(--lr 1e\+30\)"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=4, eval_every=2, checkpoint_every=2, lr=1e30,
                   log_every=1))
    assert not (tmp_path / "run" / "checkpoint").exists()


def test_image_runs_at_lr_1e30_stop_before_their_probes(tmp_path):
    from fewshot.config import ImageConfig
    from fewshot.train import train

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", x=rng.integers(0, 256, (80, 8, 8), dtype=np.uint8), y=np.arange(80) % 4)
    cfg = ImageConfig(dataset=str(tmp_path / "d.npz"), encoder="mlp", setting="pu", contrastive="punce",
                        n_labeled=8, positive_classes=(1,), hidden=16, max_steps=3, passes=None, batch_size=16,
                        progress=False, output_dir=str(tmp_path / "run"), lr=1e30, log_every=1)
    with pytest.raises(TrainingDiverged, match=r"training diverged between steps 0 and 1"):
        train(cfg)
    assert not (tmp_path / "run" / "metrics.json").exists()
