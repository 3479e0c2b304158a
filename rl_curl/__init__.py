"""CURL (SAC + contrastive auxiliary loss) from pixels, with the debiased loss as a drop-in.

Importing rl_curl registers every DeepMind Control task with gymnasium as ``rl_curl/<domain>-<task>-v0``
(``gymnasium.make("rl_curl/cartpole-swingup-v0", render_mode="rgb_array")``); :func:`load_policy` turns
a finished run's ``policy.pt`` into a callable from uint8 observations to actions, whose ``make_env()`` builds the
run's own environment (its action repeat, camera and frame size).
"""

from .env import register_envs as _register_envs

_register_envs()


def load_policy(path, device: str = "cpu"):
    """``act(obs) -> actions``: the policy of a finished run (its folder or its ``policy.pt``); see
    :func:`rl_curl.policy.load_policy`."""
    from .policy import load_policy as _load

    return _load(path, device)
