"""A gymnasium MuJoCo environment left open by its user ends the process quietly: rl_curl closes it at exit, before
MuJoCo's EGL teardown (else "Exception ignored in: GLContext.__del__ ... 'NoneType' object is not callable")."""

import os
import subprocess
import sys

import pytest

LEFT_OPEN = """
from rl_curl.env import make
env = make("gym:InvertedPendulum-v5", image_size=16)
env.reset(seed=0)
env.step(env.action_space.sample())
print("stepped")
"""


def test_an_unclosed_gym_env_ends_the_process_without_teardown_noise():
    pytest.importorskip("mujoco")
    res = subprocess.run([sys.executable, "-c", LEFT_OPEN], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")})
    assert res.returncode == 0 and "stepped" in res.stdout, res.stderr[-2000:]
    assert "Exception ignored" not in res.stderr, res.stderr[-2000:]
