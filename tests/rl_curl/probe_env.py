"""A test environment that reports, in its reset's info, which heavy modules its process has imported: the tests
start it in rl_curl.env.EnvWorker's process (``gym:tests.rl_curl.probe_env:Probe-v0``, which the worker can only find
through the parent's import path). Importing this module registers ``Probe-v0``."""

import os
import sys

import gymnasium as gym

from tests.rl_curl.tiny_pixel_env import TinyDot

HEAVY = ("torch", "rl_curl.train", "shared_losses")


class Probe(TinyDot):
    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, "imported": [m for m in HEAVY if m in sys.modules], "pid": os.getpid()}


gym.register(id="Probe-v0", entry_point=Probe, max_episode_steps=30)
