"""DeepMind Control tasks from pixels as a ``gymnasium.Env``: rendering, action repeat, frame stack.

``make("cartpole-swingup", seed=0)`` gives observations of shape ``(3 * frame_stack, size, size)``
uint8 (channels-first, oldest frame first) and actions in ``[-1, 1]``. At reset the first frame is
repeated ``frame_stack`` times (as dm_control / CURL frame stacking does). DeepMind Control
episodes never terminate; they are truncated after 1000 simulator steps (``1000 / action_repeat``
agent steps), reported as ``truncated=True``.

Any other gymnasium environment with a bounded continuous action space works through
``make("gym:ENV_ID")`` (:class:`GymPixels`): its rendered frames (or its image observations) are
resized, stacked and paired with actions rescaled to ``[-1, 1]`` the same way. ``ENV_ID`` is what
``gymnasium.make`` takes, including ``"my_package.my_module:MyEnv-v0"`` to import a registering module.
"""

from __future__ import annotations

import atexit
import difflib
import os
import signal
import subprocess
import sys
import threading
import weakref
from collections import deque

# MuJoCo's rendering backend where MUJOCO_GL is not set: EGL on Linux (headless machines: a GPU's EGL, or Mesa's);
# elsewhere dm_control's own choice (GLFW on macOS and Windows, which have no EGL).
if sys.platform.startswith("linux"):
    os.environ.setdefault("MUJOCO_GL", "egl")

import gymnasium as gym
import numpy as np

from .tasks import task_default


class RenderingUnavailable(ValueError):
    """MuJoCo cannot render in this process: its ``MUJOCO_GL`` backend is misnamed or cannot load, has no display, or
    (GLFW) is asked to render off the main thread. One line, naming the backend and what to set."""


#: What to set, by platform.
GL_ADVICE = ("set MUJOCO_GL: egl on a Linux machine without a display (a GPU's EGL, or Mesa's), osmesa where only "
             "Mesa's software renderer is installed, glfw on macOS or on a desktop with a display")


def _gl_setting() -> str:
    value = os.environ.get("MUJOCO_GL")
    said = f"MUJOCO_GL={value}" if value is not None else "MUJOCO_GL unset (dm_control's own choice)"
    if value == "glfw" and sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        said += ", and no DISPLAY, which GLFW needs"
    return said


def _in_renderer(err: BaseException) -> bool:
    """Whether ``err`` was raised loading or starting MuJoCo's rendering (dm_control's renderers, PyOpenGL, GLFW)."""
    tb = err.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace(os.sep, "/")
        if "/dm_control/_render/" in name or "/OpenGL/" in name or "/glfw/" in name:
            return True
        tb = tb.tb_next
    return False


def dm_control_suite():
    """``dm_control.suite``. Importing it loads MuJoCo's rendering backend; a backend that cannot load (a misnamed
    ``MUJOCO_GL``, EGL or OSMesa missing) is a :class:`RenderingUnavailable`, not a long traceback."""
    try:
        from dm_control import suite
    except Exception as err:  # noqa: BLE001 - only what the renderer raised is turned into the one line
        if not _in_renderer(err):
            raise
        raise RenderingUnavailable(f"MuJoCo's rendering cannot load with {_gl_setting()} ({type(err).__name__}: "
                                   f"{_first_line(err)}); {GL_ADVICE}") from err
    return suite


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else "no message"


def valid_tasks() -> list[str]:
    """All DeepMind Control suite task names, as ``domain-task``."""
    suite = dm_control_suite()

    return sorted(f"{d}-{t}" for d, t in suite.ALL_TASKS)


def parse_task(task: str) -> tuple[str, str]:
    if task not in valid_tasks():  # the lqr tasks pass here and are refused by name when made (unbounded actions)
        names = list(DMC_TASKS)  # what the agent can train on
        raise ValueError(f"unknown DeepMind Control task {task!r}{_task_hint(task, names)}; valid tasks are: "
                         f"{', '.join(names)} (other gymnasium environments: 'gym:ENV_ID')")
    domain, name = task.split("-", 1)
    return domain, name


def _task_hint(task: str, names: list[str]) -> str:
    """What an unknown task name most likely meant: a gymnasium id without its ``gym:`` prefix, or the nearest
    DeepMind Control names (a typo, another case, ``_`` for ``-``)."""
    if task in gym.envs.registry:
        return f" (it is a gymnasium environment: pass --task gym:{task})"
    by_key = {n.lower().replace("_", "-"): n for n in names}
    close = difflib.get_close_matches(task.lower().replace("_", "-"), list(by_key), n=3, cutoff=0.75)
    return f" (did you mean {' or '.join(by_key[c] for c in close)}?)" if close else ""


#: Whether this process made a MuJoCo rendering context with the EGL backend (:meth:`DMCPixels._render`), and whether
#: it is a child forked (``os.fork``: multiprocessing's default ``fork`` start method on Linux, gymnasium's async
#: vector environment with it) from a process that had: EGL does not survive a fork. The child's first frame would
#: wait forever (Mesa's EGL; also after the parent closed its environments), so it raises instead; and its exit would
#: too, in dm_control's ``eglTerminate`` at exit, which the child therefore leaves to its parent.
_egl_context_made = False
_egl_forked = False

EGL_FORK_ERROR = ("this process was forked from one that had rendered with MuJoCo's EGL backend (an rl_curl "
                  "environment reset or stepped before the fork): EGL does not survive a fork, and rendering here "
                  "would hang. Start the worker processes fresh instead: gymnasium.make_vec(..., "
                  "vectorization_mode='async', vector_kwargs={'context': 'spawn'}) (or 'forkserver'; the calling "
                  "script's code under `if __name__ == '__main__':`), multiprocessing.get_context('spawn'), or "
                  "vectorization_mode='sync'")


def _after_fork_in_child() -> None:
    global _egl_forked
    if not _egl_context_made:
        return
    _egl_forked = True
    try:  # the parent's EGL display is not the child's to terminate (it would hang the child's exit)
        import atexit
        import sys

        egl = sys.modules.get("dm_control._render.pyopengl.egl_renderer")
        if egl is not None:
            atexit.unregister(egl.EGL.eglTerminate)
    except Exception:  # noqa: BLE001 - a fork handler must not fail the fork
        pass


if hasattr(os, "register_at_fork"):  # runs in the child of os.fork (not of subprocess's fork-exec: EnvWorker's)
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _note_rendering_context() -> None:
    """Remember that this process made a rendering context, where it is EGL's (what a forked child cannot use)."""
    global _egl_context_made
    if not _egl_context_made:
        from dm_control import _render

        _egl_context_made = _render.BACKEND == "egl"


class _StackedPixels(gym.Env):
    """What both pixel environments share: the frame stack, the observation, render, action mapping."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    render_mode: str | None = None
    _frames: deque
    _low: np.ndarray
    _high: np.ndarray

    def _obs(self) -> np.ndarray:
        return np.concatenate(list(self._frames), axis=0)

    def _env_action(self, action) -> np.ndarray:
        """``action`` in [-1, 1] (clipped) mapped linearly onto the wrapped environment's bounds."""
        action = np.asarray(action, dtype=np.float64)
        if action.size != int(np.prod(self.action_space.shape)):
            raise ValueError(f"action of shape {list(action.shape)} for an action space of shape "
                             f"{list(self.action_space.shape)} ({getattr(self, 'task', 'this environment')})")
        action = action.reshape(self.action_space.shape)
        if not np.all(np.isfinite(action)):
            raise ValueError(f"action must be finite, got {action}")
        return self._low + (np.clip(action, -1.0, 1.0) + 1.0) * 0.5 * (self._high - self._low)

    def render(self):
        """The newest frame as ``[H, W, 3]`` uint8 (what ``render_mode="rgb_array"`` promises)."""
        return self._frames[-1].transpose(1, 2, 0).copy()

    def video_frame(self, size: int | None = None) -> np.ndarray:
        """The current state as a video frame ``[size, size, 3]`` uint8 (``size`` None, or the observation's: the
        newest observation frame, :meth:`render`; else :meth:`_video_frame`)."""
        return self.render() if size is None or size == self.image_size else self._video_frame(size)


def _check_render_mode(render_mode: str | None) -> str | None:
    if render_mode not in (None, "rgb_array"):
        raise ValueError(f"render_mode {render_mode!r} is not supported; these environments render "
                         "'rgb_array' frames (or pass None)")
    return render_mode


class DMCPixels(_StackedPixels):
    """A DeepMind Control task rendered from pixels, with action repeat and frame stacking."""

    def __init__(self, task: str, seed: int | None = 0, action_repeat: int | None = None, frame_stack: int = 3,
                 image_size: int = 100, camera_id: int | None = None, render_mode: str | None = None):
        suite = dm_control_suite()
        self.render_mode = _check_render_mode(render_mode)
        domain, name = parse_task(task)
        if action_repeat is None:
            action_repeat = int(task_default(task, "action_repeat"))
        if action_repeat < 1 or frame_stack < 1 or image_size < 1:
            raise ValueError(f"action_repeat, frame_stack and image_size must be >= 1, got "
                             f"{action_repeat}, {frame_stack}, {image_size}")
        self.task, self.action_repeat, self.frame_stack, self.image_size = task, action_repeat, frame_stack, image_size
        # The official CURL code renders every task from camera 0 (dmc2gym's default); DrQ and later
        # work use camera 2 for quadruped: --camera-id 2.
        self.camera_id = 0 if camera_id is None else camera_id
        self._env = suite.load(domain, name, task_kwargs={"random": seed})
        self._cameras: dict = {}  # size -> (physics, model, camera) of _render
        n_cam = self._env.physics.model.ncam
        if not -1 <= self.camera_id < n_cam:
            raise ValueError(f"camera_id {self.camera_id} does not exist in {task!r}: its model has cameras "
                             f"0..{n_cam - 1} (and -1, MuJoCo's free camera)")
        spec = self._env.action_spec()
        self._low, self._high = spec.minimum.astype(np.float64), spec.maximum.astype(np.float64)
        # dm_control gives actuators without a control range bounds of +-mjMAXVAL (1e10; the lqr
        # tasks): mapping [-1, 1] onto those would send actions of order 1e9.
        if not np.all(np.maximum(np.abs(self._low), np.abs(self._high)) < 1e10):
            raise ValueError(f"DeepMind Control task {task!r} has unbounded actions (actuators without a control "
                             f"range: bounds {spec.minimum} .. {spec.maximum}); the agent needs a bounded action space")
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=spec.shape, dtype=np.float32)
        self.observation_space = gym.spaces.Box(0, 255, shape=(3 * frame_stack, image_size, image_size), dtype=np.uint8)
        self._frames: deque = deque(maxlen=frame_stack)
        self.max_episode_steps = -(-1000 // action_repeat)
        self._steps = 0

    def _render(self, size: int | None = None) -> np.ndarray:
        """The current frame ``[3, H, W]`` uint8 (``size`` x ``size``; default the observation's): what
        ``physics.render(H, W, camera_id)`` gives, from one camera per size kept for the environment's life.
        ``physics.render`` makes a camera per call (MuJoCo's scene of every renderable geom allocated, the GL context
        made current to set the offscreen buffer, the scene freed again), which took a third of a step's rendering
        time beside the rendering itself; the cameras are made again if the task reloads its physics or model."""
        if _egl_forked:  # a child forked after EGL was used: its first frame would hang
            raise RuntimeError(EGL_FORK_ERROR)
        size = self.image_size if size is None else size
        physics = self._env.physics
        if self._cameras and any(c[0] is not physics or c[1] is not physics.model.ptr for c in self._cameras.values()):
            self._free_camera()
        if size not in self._cameras:
            from dm_control import _render
            from dm_control.mujoco.engine import Camera

            if _render.BACKEND == "glfw" and threading.current_thread() is not threading.main_thread():
                raise RenderingUnavailable(
                    f"MuJoCo's GLFW backend ({_gl_setting()}) renders on a process's main thread only, and this "
                    f"environment renders on the thread {threading.current_thread().name!r}: in rl_curl, render in "
                    "worker processes (--eval-worker with --eval-async; rl_curl.together's default --env-worker), or "
                    "on Linux set MUJOCO_GL=egl")
            _note_rendering_context()  # before: a fork while the context is being made is a fork after it
            try:
                camera = Camera(physics, height=size, width=size, camera_id=self.camera_id)
            except ValueError:  # the camera's own refusals (a frame larger than the offscreen buffer)
                raise
            except Exception as err:  # noqa: BLE001 - the rendering context could not be made
                raise RenderingUnavailable(f"MuJoCo could not start rendering with {_gl_setting()} "
                                           f"({type(err).__name__}: {_first_line(err)}); {GL_ADVICE}") from err
            self._cameras[size] = (physics, physics.model.ptr, camera)
        frame = self._cameras[size][2].render()  # a view of the camera's buffer, flipped: copied here
        return np.ascontiguousarray(frame.transpose(2, 0, 1))

    def largest_video(self) -> int:
        """The largest square frame :meth:`video_frame` renders (the model's offscreen buffer: 480 for the suite's
        tasks)."""
        g = self._env.physics.model.vis.global_
        return int(min(g.offwidth, g.offheight))

    def _video_frame(self, size: int) -> np.ndarray:
        """The current state rendered again from the observation's camera at ``size`` x ``size``."""
        if not 1 <= size <= self.largest_video():
            raise ValueError(f"a video of {size}x{size} does not fit the offscreen buffer of {self.task} (at most "
                             f"{self.largest_video()}x{self.largest_video()})")
        return self._render(size).transpose(1, 2, 0).copy()

    def _free_camera(self) -> None:
        for camera in getattr(self, "_cameras", {}).values():
            camera[2].scene.free()
        self._cameras = {}

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is not None:  # a fresh task RNG makes the episode a function of the seed alone
            self._env.task._random = np.random.RandomState(seed)
        self._env.reset()
        self._steps = 0
        frame = self._render()
        for _ in range(self.frame_stack):
            self._frames.append(frame)
        return self._obs(), {}

    def step(self, action):
        scaled = self._env_action(action)  # the task's own bounds (all of dm_control's are [-1, 1] today)
        reward, last = 0.0, False
        for _ in range(self.action_repeat):
            ts = self._env.step(scaled)
            reward += ts.reward or 0.0
            if ts.last():
                last = True
                break
        self._frames.append(self._render())
        self._steps += 1
        truncated = last or self._steps >= self.max_episode_steps
        return self._obs(), float(reward), False, truncated, {}

    def close(self):
        self._free_camera()
        self._env.close()


GYM_PREFIX = "gym:"


def _to_unit_box(space, what: str):
    """Bounds of a gymnasium Box action space, refusing what SAC's tanh policy cannot drive."""
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"{what}: the agent needs a continuous Box action space, got {space}")
    low, high = np.asarray(space.low, dtype=np.float64), np.asarray(space.high, dtype=np.float64)
    if not (np.all(np.isfinite(low)) and np.all(np.isfinite(high)) and np.all(high > low)):
        raise ValueError(f"{what}: the action space must be bounded (finite low < high), got {space}")
    return low, high


#: gymnasium environments that have rendered and are not closed: closed at exit (see _close_at_exit)
_rendering_gym_envs: weakref.WeakSet = weakref.WeakSet()
_close_registered = False


def _close_open_gym_envs() -> None:
    for env in list(_rendering_gym_envs):
        try:
            env.close()
        except Exception:  # noqa: BLE001 - the process is ending: a close that fails changes nothing
            pass


def _close_at_exit(env: "GymPixels") -> None:
    """Close ``env`` at interpreter exit if its user did not. MuJoCo's EGL context (gymnasium's offscreen renderer)
    left to the interpreter's teardown prints "Exception ignored in: GLContext.__del__ ... 'NoneType' object is not
    callable". Registered after the first frame, hence after MuJoCo's own exit hook (eglTerminate), so it runs
    before that one."""
    global _close_registered
    _rendering_gym_envs.add(env)
    if not _close_registered:
        _close_registered = True
        atexit.register(_close_open_gym_envs)


def _resized(frame: np.ndarray, size: int) -> np.ndarray:
    """``frame`` ``[H, W, 3]`` uint8 as ``size`` x ``size`` (PIL bilinear; as it is where it has that size)."""
    if frame.shape[:2] == (size, size):
        return frame
    from PIL import Image

    return np.asarray(Image.fromarray(frame).resize((size, size), Image.BILINEAR))


class GymPixels(_StackedPixels):
    """Any gymnasium environment seen from pixels, with action repeat and frame stacking.

    Frames are the environment's observations when those are ``(H, W, 3)`` uint8 images, otherwise
    ``env.render()`` with ``render_mode="rgb_array"``; each is resized to ``image_size`` (PIL
    bilinear) and stacked channels-first, oldest first, like :class:`DMCPixels`. Actions in
    ``[-1, 1]`` are mapped linearly onto the environment's Box bounds. ``terminated`` and
    ``truncated`` are passed through (a terminal state is not bootstrapped; a time limit is). Float frames are read
    as 0-1 where every value is within [0, 1], else as 0-255. The environment needs a time limit
    (``max_episode_steps`` in its registration, or given to ``gymnasium.make``): an episode must end.
    """

    def __init__(self, env_id: str, seed: int = 0, action_repeat: int = 1, frame_stack: int = 3,
                 image_size: int = 100, render_mode: str | None = None, **make_kwargs):
        self.render_mode = _check_render_mode(render_mode)
        if action_repeat < 1 or frame_stack < 1 or image_size < 1:
            raise ValueError(f"action_repeat, frame_stack and image_size must be >= 1, got "
                             f"{action_repeat}, {frame_stack}, {image_size}")
        what = f"gymnasium environment {env_id!r}"
        try:
            try:  # render at the target size where the env takes one (MuJoCo envs: 480x480 by default, ~10x slower)
                sized = {"width": image_size, "height": image_size}
                self._env = gym.make(env_id, render_mode="rgb_array", **{**sized, **make_kwargs})
            except (TypeError, ValueError, AssertionError):  # no width/height arguments, or not these values
                self._env = gym.make(env_id, render_mode="rgb_array", **make_kwargs)
        except gym.error.DependencyNotInstalled as e:  # a known environment whose extra is missing (mujoco, box2d)
            raise ValueError(f"{what} needs a package that is not installed: {e}") from e
        except (gym.error.Error, ModuleNotFoundError) as e:  # NameNotFound, ...; gym:MODULE:ID whose module is missing
            raise ValueError(f"unknown gymnasium environment {env_id!r}: {e}") from e
        except (TypeError, AssertionError) as e:
            if "render" not in str(e):
                raise
            raise ValueError(f"{what} cannot render rgb_array frames, which rl_curl learns from: {e}") from e
        if self._env.spec is None or self._env.spec.max_episode_steps is None:
            self._env.close()
            raise ValueError(f"{what} has no time limit (its spec's max_episode_steps is None), so an episode that "
                             f"never terminates would never end, nor an evaluation: register it with "
                             f"gymnasium.register(..., max_episode_steps=N)")
        self._low, self._high = _to_unit_box(self._env.action_space, what)
        space = self._env.observation_space
        self._image_obs = (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8
                           and len(space.shape) == 3 and space.shape[-1] == 3)
        modes = (getattr(self._env, "metadata", None) or {}).get("render_modes") or []
        if not self._image_obs and "rgb_array" not in modes:
            self._env.close()
            raise ValueError(f"{what} cannot render rgb_array frames, which rl_curl learns from (its render modes: "
                             f"{list(modes)}; its observations are no (H, W, 3) uint8 images either)")
        self.task, self.action_repeat, self.frame_stack, self.image_size = (GYM_PREFIX + env_id, action_repeat,
                                                                            frame_stack, image_size)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=self._env.action_space.shape, dtype=np.float32)
        self.observation_space = gym.spaces.Box(0, 255, shape=(3 * frame_stack, image_size, image_size), dtype=np.uint8)
        self._frames: deque = deque(maxlen=frame_stack)
        self._seed = seed
        self._what = what

    def _frame(self, obs) -> np.ndarray:
        try:
            frame = obs if self._image_obs else self._env.render()
        except gym.error.DependencyNotInstalled as e:  # classic control renders with pygame, an optional extra
            raise ValueError(f"{self._what} cannot render its frames: {e}") from e
        if not self._image_obs and self not in _rendering_gym_envs:
            _close_at_exit(self)
        if frame is None:
            raise ValueError(f"{self._what}: render() returned None, not an RGB frame (H, W, 3)")
        frame = np.asarray(frame)
        if frame.ndim != 3 or frame.shape[-1] != 3:
            raise ValueError(f"{self._what}: expected RGB frames of shape (H, W, 3), got {frame.shape}")
        if frame.dtype != np.uint8:
            # floats in [0, 1] are the other usual encoding of a frame (0-255 cut to uint8 made them black)
            scale = 255.0 if np.issubdtype(frame.dtype, np.floating) and frame.size and frame.max() <= 1.0 else 1.0
            frame = np.clip(np.rint(frame * scale) if scale != 1.0 else frame, 0, 255).astype(np.uint8)
        self._raw = frame
        return np.ascontiguousarray(_resized(frame, self.image_size).transpose(2, 0, 1))

    def _video_frame(self, size: int) -> np.ndarray:
        """The environment's own frame (its image observation or ``render()``) resized (PIL bilinear)."""
        if size < 1:
            raise ValueError(f"a video's frames need a size >= 1, got {size}")
        return np.array(_resized(self._raw, size))

    def reset(self, *, seed: int | None = None, options=None):
        super().reset(seed=seed)
        if seed is None and self._seed is not None:
            seed, self._seed = self._seed, None  # the constructor's seed seeds the first episode
        obs, info = self._env.reset(seed=seed, options=options)
        frame = self._frame(obs)
        for _ in range(self.frame_stack):
            self._frames.append(frame)
        return self._obs(), info

    def step(self, action):
        scaled = self._env_action(action).astype(self._env.action_space.dtype)
        reward, terminated, truncated, info = 0.0, False, False, {}
        for _ in range(self.action_repeat):
            obs, r, terminated, truncated, info = self._env.step(scaled)
            reward += float(r)
            if terminated or truncated:
                break
        self._frames.append(self._frame(obs))
        return self._obs(), reward, bool(terminated), bool(truncated), info

    def close(self):
        _rendering_gym_envs.discard(self)
        self._env.close()


def make(task: str, seed: int = 0, action_repeat: int | None = None, frame_stack: int = 3,
         image_size: int = 100, camera_id: int | None = None, render_mode: str | None = None) -> gym.Env:
    """A pixel environment: a DeepMind Control task like ``cartpole-swingup`` (unknown names list the
    valid ones), or ``gym:ENV_ID`` for any gymnasium environment with a bounded Box action space."""
    if task.startswith(GYM_PREFIX):
        return GymPixels(task[len(GYM_PREFIX):], seed=seed, action_repeat=action_repeat or 1,
                         frame_stack=frame_stack, image_size=image_size, render_mode=render_mode)
    return DMCPixels(task, seed=seed, action_repeat=action_repeat, frame_stack=frame_stack, image_size=image_size,
                     camera_id=camera_id, render_mode=render_mode)


class EnvGroup:
    """``episodes`` environments of :func:`make` stepped one after another in one process (what an evaluation's
    worker holds, :class:`EnvWorker` with ``episodes``): ``reset(seed=[s_0, ...])`` gives the stacked first
    observations; ``step((idx, actions))`` steps environment ``idx[j]`` with ``actions[j]`` and gives the stacked
    observations, the rewards and whether each episode ended (terminated or truncated)."""

    def __init__(self, episodes: int, **kwargs):
        self.envs = [make(**kwargs) for _ in range(episodes)]
        self.observation_space, self.action_space = self.envs[0].observation_space, self.envs[0].action_space

    def reset(self, seed=None):
        if seed is None or len(seed) != len(self.envs):
            raise ValueError(f"EnvGroup.reset needs one seed per environment ({len(self.envs)})")
        return np.stack([env.reset(seed=s)[0] for env, s in zip(self.envs, seed)]), {}

    def step(self, arg):
        idx, actions = arg
        out = [self.envs[i].step(a) for i, a in zip(idx, actions)]
        return (np.stack([o[0] for o in out]), np.array([o[1] for o in out], dtype=np.float64),
                np.array([bool(o[2] or o[3]) for o in out]))

    def video_frame(self, size: int | None = None) -> np.ndarray:
        """The first environment's video frame (an evaluation's video is its first episode's)."""
        return self.envs[0].video_frame(size)

    def close(self):
        for env in self.envs:
            env.close()


#: The program of :class:`EnvWorker`'s process (``python -c``; argv: the pipe's descriptor, the parent's sys.path, which
#: replaces the worker's, as multiprocessing's spawn does). Its first act: ignore SIGINT, SIGTERM, SIGHUP, SIGUSR1 and
#: SIGUSR2 (then :func:`_worker_main` takes SIGHUP to leave the terminal that hung up, :func:`_hung_up`). A
#: terminal's Ctrl-C (and its hang-up) reaches every process of the foreground group, and a scheduler's cancel
#: (Slurm's scancel, ``timeout``) or its warning before a time limit (Slurm's ``--signal``) every process of the job,
#: workers included; the run asks to stop at the end of its episode and write a checkpoint, which needs its
#: environment to the end. The worker ends when its run closes it or its pipe closes (the run gone).
_WORKER_CODE = ("import signal; [signal.signal(getattr(signal, s), signal.SIG_IGN) for s in ('SIGINT', 'SIGTERM', "
                "'SIGHUP', 'SIGUSR1', 'SIGUSR2') if hasattr(signal, s)]; "
                "import json, sys; sys.path[:] = json.loads(sys.argv[2]); "
                "from rl_curl.env import _worker_main; _worker_main(int(sys.argv[1]))")


def _hung_up(signum, frame) -> None:
    """A worker's SIGHUP (its terminal closed): what it would write to that terminal goes to the null device, since a
    write there now fails and would end the worker before its run has checkpointed (runtime's StopSignals does the same
    for the run)."""
    import stat

    null = os.open(os.devnull, os.O_WRONLY)
    for out in (1, 2):
        try:
            if stat.S_ISCHR(os.fstat(out).st_mode):
                os.dup2(null, out)
        except OSError:
            pass
    os.close(null)


def _worker_main(fd: int) -> None:
    """:class:`EnvWorker`'s process: the pipe from descriptor ``fd``, the environment's arguments from it, then
    :func:`_serve`."""
    from multiprocessing.connection import Connection

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _hung_up)
    conn = Connection(fd)
    try:
        kwargs, episodes = conn.recv()
    except EOFError:  # the parent ended before sending them
        return
    _serve(conn, kwargs, episodes)


def _serve(conn, kwargs: dict, episodes: int | None = None) -> None:
    """The loop of :class:`EnvWorker`'s process: make the environment (an :class:`EnvGroup` of ``episodes``), then
    answer reset / step / video_frame / close."""
    import traceback

    try:
        env = make(**kwargs) if episodes is None else EnvGroup(episodes, **kwargs)
        conn.send(("ok", (env.observation_space, env.action_space)))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        conn.send(("error", f"{type(err).__name__}: {err}", traceback.format_exc()))
        return
    try:
        while True:
            cmd, arg = conn.recv()
            try:
                if cmd == "reset":
                    out = env.reset(seed=arg)
                elif cmd == "step":
                    out = env.step(arg)
                elif cmd == "video_frame":
                    out = env.video_frame(arg)
                elif cmd == "close":
                    env.close()
                    conn.send(("ok", None))
                    return
                else:
                    raise ValueError(f"unknown command {cmd!r}")
            except BaseException as err:  # noqa: BLE001
                conn.send(("error", f"{type(err).__name__}: {err}", traceback.format_exc()))
                continue
            conn.send(("ok", out))
    except (EOFError, OSError):  # the parent is gone (its pipe closed or broken)
        env.close()


def describe_exit(code: int | None) -> str:
    """A worker process's exit status in words: a signal by name, with its usual cause where there is one."""
    if code is None:
        return "still running, but its pipe is closed"
    if code >= 0:
        return f"exit status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        return f"killed by signal {-code}"
    why = {"SIGKILL": ": the system's out-of-memory killer sends it",
           "SIGSEGV": ": a crash in the simulator or its renderer"}
    return f"killed by {name}{why.get(name, '')}"


class EnvWorker(gym.Env):
    """:func:`make`'s environment in a process of its own (``rl_curl.train --env-worker``): ``reset`` and ``step``
    are answered by that process, so while it steps the physics and renders, the calling process is free (runs
    trained together in threads, ``rl_curl.together``, step their environments side by side instead of taking turns
    for Python's interpreter lock). The same environment, seeds and observations as in-process (tested)."""

    def __init__(self, wait: bool = True, episodes: int | None = None, **kwargs):
        """Start the worker with :func:`make`'s ``kwargs`` (``episodes``: an :class:`EnvGroup` of that many
        environments, an evaluation's); ``wait=False``: return at once (the worker imports and makes its environment
        meanwhile), :meth:`ready` waits for it."""
        import json
        import multiprocessing
        import sys

        # A fresh interpreter (no copy of the parent's CUDA or EGL state) that imports rl_curl.env and what the
        # environment needs, nothing else: multiprocessing's spawn would also import the parent's main module
        # (rl_curl.train, and torch with it: about 2 s a worker). The worker's import path is the parent's (not `-c`'s
        # current folder first, where another checkout of rl_curl may lie), so it finds what the parent finds; the
        # pipe's end is passed as a descriptor.
        self._conn, child = multiprocessing.Pipe()
        fd = child.fileno()
        self._proc = subprocess.Popen([sys.executable, "-c", _WORKER_CODE, str(fd), json.dumps(sys.path)],
                                      pass_fds=(fd,))
        child.close()
        self._conn.send((kwargs, episodes))
        self._closed, self._ready = False, False
        if wait:
            self.ready()

    def ready(self) -> "EnvWorker":
        """Wait until the worker has made its environment (its spaces are then known); returns self."""
        if not self._ready:
            self.observation_space, self.action_space = self._call(None)
            self._ready = True
        return self

    def _call(self, message):
        if message is not None:
            self._send(message)
        return self._receive()

    def _send(self, message) -> None:
        try:
            self._conn.send(message)
        except OSError:  # the pipe is broken: the worker is gone
            raise self._ended() from None

    def _receive(self):
        """The worker's answer to the last message sent (its error raised here)."""
        try:
            reply = self._conn.recv()
        except (EOFError, OSError):
            raise self._ended() from None
        if reply[0] == "error":
            kind, _, text = reply[1].partition(": ")
            if kind == RenderingUnavailable.__name__:  # the user's setting, not a fault: one line here too
                raise RenderingUnavailable(f"{text} (in the environment's worker process)")
            err = RuntimeError(f"in the environment's worker process: {reply[1]}")
            err.add_note(reply[2])  # the worker's traceback, shown with the full traceback
            raise err
        return reply[1]

    def _ended(self) -> Exception:
        """The error for a worker that ended while the run needed it (a :class:`RunStopped`: the training loop says
        where the run stopped and how to continue, and the command prints it in one line)."""
        from shared_losses.training.runtime import RunStopped  # the parent's import only: workers import no torch

        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        return RunStopped(f"the environment's worker process ended ({describe_exit(code)})")

    def reset(self, *, seed=None, options: dict | None = None):
        return self._call(("reset", seed))

    def step(self, action):
        return self._call(("step", action if isinstance(action, tuple) else np.asarray(action)))

    def video_frame(self, size: int | None = None) -> np.ndarray:
        """The worker's environment's :meth:`~DMCPixels.video_frame` (an evaluation's group: its first episode's)."""
        return self._call(("video_frame", size))

    def close(self):
        if getattr(self, "_closed", True):
            return
        self._closed = True
        try:
            self._call(("close", None))
        except (RuntimeError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._conn.close()


def side_by_side(workers: list[EnvWorker], messages: list) -> list:
    """Send each worker its message (``("reset", seed)``, ``("step", action)``), then take their answers in turn: the
    workers do the work at the same time (a vector of environments, one per process)."""
    sent, error = [], None
    for w, m in zip(workers, messages, strict=True):
        try:
            w._send(m)
        except RuntimeError as err:  # a worker gone (RunStopped): the others are not sent theirs
            error = err
            break
        sent.append(w)
    answers = []
    for w in sent:  # every answer sent for is read, also after an error, so that none is left for the next call
        try:
            answers.append(w._receive())
        except RuntimeError as err:
            error = error or err
    if error is not None:
        raise error
    return answers


# Every DeepMind Control suite task of dm-control 1.0.50 (``dm_control.suite.ALL_TASKS``; a test keeps the
# two equal) except the lqr tasks, whose actuators have no control range (the agent needs bounded actions).
# Kept here as data so that registering them does not import dm_control (and MuJoCo) with rl_curl.
DMC_TASKS = (
    "acrobot-swingup", "acrobot-swingup_sparse", "ball_in_cup-catch", "cartpole-balance", "cartpole-balance_sparse",
    "cartpole-swingup", "cartpole-swingup_sparse", "cartpole-three_poles", "cartpole-two_poles", "cheetah-run",
    "dog-fetch", "dog-run", "dog-stand", "dog-trot", "dog-walk", "finger-spin", "finger-turn_easy", "finger-turn_hard",
    "fish-swim", "fish-upright", "hopper-hop", "hopper-stand", "humanoid-run", "humanoid-run_pure_state",
    "humanoid-stand", "humanoid-walk", "humanoid_CMU-run", "humanoid_CMU-stand", "humanoid_CMU-walk",
    "manipulator-bring_ball", "manipulator-bring_peg", "manipulator-insert_ball", "manipulator-insert_peg",
    "pendulum-swingup", "point_mass-easy", "point_mass-hard", "quadruped-escape", "quadruped-fetch",
    "quadruped-run", "quadruped-walk", "reacher-easy", "reacher-hard", "stacker-stack_2", "stacker-stack_4",
    "swimmer-swimmer15", "swimmer-swimmer6", "walker-run", "walker-stand", "walker-walk",
)
NAMESPACE = "rl_curl"


def gym_id(task: str) -> str:
    """The gymnasium id of a DeepMind Control task: ``rl_curl/cartpole-swingup-v0``."""
    return f"{NAMESPACE}/{task}-v0"


def register_envs() -> None:
    """Register every task of :data:`DMC_TASKS` with gymnasium as ``rl_curl/<task>-v0`` (done when rl_curl is
    imported; calling it again does nothing). ``gymnasium.make(id, **kwargs)`` passes ``seed``,
    ``action_repeat``, ``frame_stack``, ``image_size``, ``camera_id`` and ``render_mode`` to
    :class:`DMCPixels`. ``max_episode_steps`` in the spec is 1000 simulator steps at the task's default
    action repeat (CURL's); with another ``action_repeat`` pass ``max_episode_steps=ceil(1000 / repeat)``
    too (the environment truncates at 1000 simulator steps by itself either way)."""
    for task in DMC_TASKS:
        env_id = gym_id(task)
        if env_id in gym.registry:
            continue
        repeat = int(task_default(task, "action_repeat"))
        # seed None unless given: environments made without one differ (gymnasium's convention; make_vec's copies
        # would otherwise step in lockstep), reset(seed=...) makes an episode a function of its seed
        gym.register(id=env_id, entry_point="rl_curl.env:DMCPixels", kwargs={"task": task, "seed": None},
                     max_episode_steps=-(-1000 // repeat), disable_env_checker=False)
