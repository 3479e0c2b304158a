"""A tiny non-DeepMind-Control gymnasium environment for the tests: a dot that should reach the centre.

State observations (not images), so frames come from ``render()``; actions in [-2, 2]^2 so the
[-1, 1] rescaling is visible; reaching the centre terminates; a 30-step time limit truncates.
Importing this module registers ``TinyDot-v0``.
"""

import gymnasium as gym
import numpy as np


class TinyDot(gym.Env):
    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, render_mode=None, size=32):
        self.render_mode, self.size = render_mode, size
        self.action_space = gym.spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float32)
        self.pos = np.zeros(2)
        self.last_action = None

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, size=2)
        return self.pos.astype(np.float32), {}

    def step(self, action):
        self.last_action = np.asarray(action, dtype=np.float64)
        self.pos = np.clip(self.pos + 0.05 * self.last_action, -1.0, 1.0)
        dist = float(np.linalg.norm(self.pos))
        return self.pos.astype(np.float32), -dist, dist < 0.1, False, {}

    def render(self):
        img = np.zeros((self.size, self.size, 3), dtype=np.uint8)
        r, c = ((self.pos + 1.0) / 2.0 * (self.size - 1)).round().astype(int)
        img[max(r - 1, 0):r + 2, max(c - 1, 0):c + 2] = 255
        return img


gym.register(id="TinyDot-v0", entry_point=TinyDot, max_episode_steps=30)
