"""The CURL paper's per-task defaults (action repeat, learning rate), in a module of their own that imports nothing
heavy: rl_curl.env reads them, and an environment's worker process imports rl_curl.env without torch."""

from __future__ import annotations

# The CURL paper's settings (Srinivas, Laskin & Abbeel 2020, appendix): action repeat 8 cartpole;
# 2 finger spin, walker; 4 cheetah, reacher, ball_in_cup.
# Learning rate 1e-3 except 2e-4 for cheetah (encoder, policy and Q function alike: lr and encoder_lr). Other tasks
# of these domains take their domain's values; tasks of other domains fall back to the DEFAULT_ values.
TASK_DEFAULTS: dict[str, dict[str, float]] = {
    "cartpole-swingup": {"action_repeat": 8, "lr": 1e-3},
    "cartpole-balance": {"action_repeat": 8, "lr": 1e-3},
    "finger-spin": {"action_repeat": 2, "lr": 1e-3},
    "walker-walk": {"action_repeat": 2, "lr": 1e-3},
    "walker-stand": {"action_repeat": 2, "lr": 1e-3},
    "walker-run": {"action_repeat": 2, "lr": 1e-3},
    "cheetah-run": {"action_repeat": 4, "lr": 2e-4, "encoder_lr": 2e-4},
    "reacher-easy": {"action_repeat": 4, "lr": 1e-3},
    "reacher-hard": {"action_repeat": 4, "lr": 1e-3},
    "ball_in_cup-catch": {"action_repeat": 4, "lr": 1e-3},
}
DEFAULT_ACTION_REPEAT = 4
DEFAULT_LR = 1e-3
DEFAULT_ENCODER_LR = 1e-3


def task_default(task: str, key: str) -> float | int:
    """The per-task default ``key`` ("action_repeat", an int; "lr" or "encoder_lr", floats) of ``task``."""
    fallback = {"action_repeat": DEFAULT_ACTION_REPEAT, "lr": DEFAULT_LR, "encoder_lr": DEFAULT_ENCODER_LR}[key]
    if task.startswith("gym:") and key == "action_repeat":
        return 1  # a generic gymnasium environment: no action repeat unless asked for
    if task in TASK_DEFAULTS:
        return TASK_DEFAULTS[task].get(key, fallback)
    # Other tasks of a listed domain (cartpole-swingup_sparse, finger-turn_easy, ...) take its value.
    domain = task.split("-", 1)[0]
    for name, values in TASK_DEFAULTS.items():
        if name.split("-", 1)[0] == domain:
            return values.get(key, fallback)
    return fallback
