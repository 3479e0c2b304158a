import os

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every rl_curl test runs torch on one thread (tests/conftest.py)."""
    yield


def tiny_config(**kw):
    from rl_curl.config import Config

    base = dict(num_filters=4, num_layers=2, hidden_dim=16, feature_dim=8, image_size=20, crop_size=16,
                batch_size=8, replay_capacity=500, seed_steps=5, eval_episodes=1, progress=False, torch_threads=1,
                video_size=None)  # videos of the observations' frames: a 256x256 frame takes ~80 ms on 2 CPU cores
    base.update(kw)
    return Config(**base)
