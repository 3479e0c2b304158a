"""Replay buffer that stores each rendered frame once (uint8) and rebuilds frame stacks on sampling.

Frames go into one ring of ``frame_capacity`` slots in the order they are seen. An episode writes
the ``k`` frames of its reset observation, then one new frame per step, so the observation of every
transition is the ``k`` consecutive frames ending just before its newest frame and its next
observation is the ``k`` frames ending at it. Stacks are therefore exact across episode starts (the
reset stack, repeated first frame included, is stored as is) and across wrap-around; a transition
whose oldest frame has been overwritten is never sampled.

Per transition this costs one frame (plus ``k - 1`` frames per episode and a 10 % frame margin)
instead of the ``2k`` frames of storing ``obs`` and ``next_obs``.

The frame ring lives in host memory (numpy) by default. With ``device=`` it is a torch tensor on that
device instead (e.g. the training GPU): each new frame is copied there once when it is added, and a
sampled batch is gathered on the device, so sampling moves no frames from the host. Everything else
(indices, sampling RNG, checkpoint format) is the same, so the two give identical batches.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import torch


class FrameReplay:
    #: Frames a ring on a device holds at first; it grows (doubling, up to ``frame_capacity``) as frames arrive, so a
    #: run that stores fewer transitions than its capacity (a 100k-step cartpole run: 12.5k) holds only what it
    #: uses in GPU memory (0.4 GB instead of 3.3 GB at 100x100). Its positions are the full ring's: the same batches.
    DEVICE_RING_START = 16384
    #: Copies into the device ring and the device copies of the per-transition arrays are launched without waiting
    #: (``non_blocking``) and run in stream order after the update queued before them. A blocking copy would wait for
    #: that update (five per step with device sampling). On a GPU a step's values go through pinned staging slots
    #: (:attr:`staging`), since a copy from pageable memory may still wait for the stream; elsewhere (a CPU ring, the
    #: bulk copies of a resume) they are copied from the host arrays, whose bytes CUDA stages before returning. True
    #: makes every copy wait, which scripts/bench_curl_gpu.py's ``replay_add`` row times against the other two ways.
    blocking_copies = False
    #: Slots of the pinned staging ring (:attr:`staging`): one per added step or reset frame. A slot is written again
    #: only after the copies out of it have finished (its event), which on the training loop is long before: every
    #: step's acting waits for the GPU.
    STAGING_SLOTS = 16

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], action_dim: int, frame_stack: int = 3,
                 seed: int | np.random.SeedSequence = 0, device: torch.device | str | None = None):
        if len(obs_shape) != 3 or obs_shape[0] % frame_stack:
            raise ValueError(f"obs_shape must be (channels * frame_stack, H, W) with channels divisible by "
                             f"frame_stack={frame_stack}, got {obs_shape}")
        if capacity < 2:
            raise ValueError(f"capacity must be >= 2, got {capacity}")
        self.capacity, self.k, self.action_dim = capacity, frame_stack, action_dim
        self.obs_shape = tuple(obs_shape)
        self.frame_shape = (obs_shape[0] // frame_stack, *obs_shape[1:])
        self.frame_capacity = capacity + capacity // 10 + 2 * frame_stack
        self.device = None if device is None else torch.device(device)
        if self.device is None:
            self.frames = np.zeros((self.frame_capacity, *self.frame_shape), dtype=np.uint8)
        else:
            self.frames = torch.zeros((min(self.frame_capacity, self.DEVICE_RING_START), *self.frame_shape),
                                      dtype=torch.uint8, device=self.device)
            # the device the frames are on, as a tensor names it: "cuda" is cuda:0 (the current device), and the
            # agent's tensors say cuda:0; a comparison of the two spellings would fail (rl_curl.graphs)
            self.device = self.frames.device
        self.generation = 0  # counts the device ring's moves to a larger allocation (a CUDA graph must be recaptured)
        self.actions = np.zeros((capacity, action_dim), dtype=np.float32)
        self.rewards = np.zeros((capacity,), dtype=np.float32)
        self.not_dones = np.zeros((capacity,), dtype=np.float32)
        self.next_frame = np.zeros((capacity,), dtype=np.int64)  # absolute index of next_obs's newest frame
        self.frames_written = 0   # absolute count of frames ever written
        self.added = 0            # absolute count of transitions ever added
        self._episode_open = False
        self.rng = np.random.default_rng(seed)
        # Host ring, GPU training: batches are gathered into one reused (pinned) staging buffer and
        # copied asynchronously; the event marks when the last copy out of it has finished.
        self._staging: torch.Tensor | None = None
        self._staging_copied = None
        # Device copies of the per-transition arrays (enable_device_sampling): batches gathered by torch ops alone.
        self._dev: dict[str, torch.Tensor] | None = None
        #: Whether a step's host values reach the device ring through pinned staging buffers (None: on a CUDA ring,
        #: unless ``blocking_copies``). CUDA copies from pageable memory "may synchronize with the stream" (CUDA's API
        #: synchronization notes: the driver decides, by size among other things), i.e. wait for the update queued
        #: before them; a copy from pinned memory never does. The values are first copied into a slot of a small ring
        #: of pinned host buffers, the copies to the ring are launched from there, and an event recorded after them
        #: guards the slot until they have run (:meth:`_take_slot`). The bytes that arrive are the same either way.
        self.staging: bool | None = None
        self._stage: dict[str, torch.Tensor] | None = None  # pinned buffers [STAGING_SLOTS, ...] per kind of value
        self._stage_events: list = []
        self._stage_next = 0

    @staticmethod
    def estimate_bytes(capacity: int, obs_shape: tuple[int, ...], action_dim: int, frame_stack: int = 3,
                       transitions: int | None = None) -> dict:
        """Bytes a buffer of these sizes takes: ``{"frames": ..., "other": ..., "frames_device_peak": ...}`` (the
        frame ring, which may live on the training device, and the per-transition arrays, always on the host).
        ``transitions``: the most a run will add (its agent steps; None: ``capacity``). Only what is written takes
        memory: the host arrays are allocated as zero pages that become memory when first written, and the device
        ring grows as it fills, so a run of fewer transitions than ``capacity`` needs that of its transitions.
        ``frames_device_peak``: the device ring's largest allocation and the one it grows from, both held while
        the frames are copied over."""
        frame = (obs_shape[0] // frame_stack) * obs_shape[1] * obs_shape[2]
        used = capacity if transitions is None else max(1, min(capacity, transitions))
        ring = capacity + capacity // 10 + 2 * frame_stack  # FrameReplay.frame_capacity
        frames = min(ring, used + used // 10 + 2 * frame_stack)
        have = peak = min(ring, FrameReplay.DEVICE_RING_START)
        while have < frames:  # _reserve's doublings
            grown = min(ring, 2 * have)
            have, peak = grown, have + grown
        return {"frames": frames * frame, "other": used * (4 * action_dim + 4 + 4 + 8),
                "frames_device_peak": peak * frame}

    # ------------------------------------------------------------------------------------------
    def _to_ring(self, a: np.ndarray) -> np.ndarray | torch.Tensor:
        """A host array as the ring holds its data: itself for the numpy ring, a tensor on ``device`` otherwise."""
        if self.device is None:
            return a
        return torch.from_numpy(np.ascontiguousarray(a)).to(self.device, non_blocking=not self.blocking_copies)

    def _reserve(self, n: int) -> None:
        """Make the device ring's first ``n`` slots exist (doubling its allocation, at most to ``frame_capacity``)."""
        have = self.frames.shape[0]
        if self.device is None or n <= have:
            return
        bigger = torch.zeros((min(self.frame_capacity, max(n, 2 * have)), *self.frame_shape), dtype=torch.uint8,
                             device=self.device)
        bigger[:have] = self.frames
        self.frames = bigger
        self.generation += 1

    def _staged(self) -> bool:
        if self.device is None or self.blocking_copies:
            return False
        return self.device.type == "cuda" if self.staging is None else bool(self.staging)

    def _take_slot(self) -> int | None:
        """The next staging slot, once the copies launched from it before have run (their event); None when the
        copies are not staged (:meth:`_staged`)."""
        if not self._staged():
            return None
        if self._stage is None:
            S, pin = self.STAGING_SLOTS, self.device.type == "cuda"
            self._stage = {"frame": torch.empty((S, *self.frame_shape), dtype=torch.uint8, pin_memory=pin),
                           "actions": torch.empty((S, self.action_dim), dtype=torch.float32, pin_memory=pin),
                           "rewards": torch.empty((S,), dtype=torch.float32, pin_memory=pin),
                           "not_dones": torch.empty((S,), dtype=torch.float32, pin_memory=pin),
                           "next_frame": torch.empty((S,), dtype=torch.int64, pin_memory=pin)}
            self._stage_events = [None] * S
        s = self._stage_next
        self._stage_next = (s + 1) % self.STAGING_SLOTS
        if self._stage_events[s] is not None:
            self._stage_events[s].synchronize()
            self._stage_events[s] = None
        return s

    def _release_slot(self, s: int | None) -> None:
        """Mark slot ``s`` busy until the copies launched from it so far have run (nothing for None)."""
        if s is None:
            return
        event = self._new_event()
        event.record(torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None)
        self._stage_events[s] = event

    def _new_event(self):
        """An event on the ring's device, recorded on its current stream (where the copies into the ring go) after
        the copies it guards."""
        if self.device.type == "cuda":
            return torch.cuda.Event()
        return _HostCopiesDone()

    def _write_frame(self, frame: np.ndarray, slot_s: int | None = None) -> None:
        slot = self.frames_written % self.frame_capacity
        self._reserve(slot + 1)
        if self.device is None:
            self.frames[slot] = frame
        elif slot_s is not None:  # through the pinned staging slot, launched without waiting
            src = self._stage["frame"][slot_s]
            src.numpy()[...] = frame
            self.frames[slot].copy_(src, non_blocking=True)
        else:  # one copy from the host straight into the ring's slot (no device temporary, no second copy)
            src = torch.from_numpy(np.ascontiguousarray(frame))
            self.frames[slot].copy_(src, non_blocking=not self.blocking_copies)
        self.frames_written += 1

    def _split(self, obs: np.ndarray) -> np.ndarray:
        obs = np.asarray(obs)
        if obs.shape != self.obs_shape or obs.dtype != np.uint8:
            raise ValueError(f"observation must be uint8 of shape {self.obs_shape}, got {obs.dtype} {obs.shape}")
        return obs.reshape(self.k, *self.frame_shape)

    def start_episode(self, obs: np.ndarray) -> None:
        """Store the reset observation (all its ``k`` frames)."""
        for frame in self._split(obs):
            s = self._take_slot()
            self._write_frame(frame, s)
            self._release_slot(s)
        self._episode_open = True

    def add(self, action, reward: float, next_obs: np.ndarray, done: bool) -> None:
        """Store one transition; ``done`` = true termination (not a time-limit truncation)."""
        if not self._episode_open:
            raise RuntimeError("call start_episode(obs) with the reset observation before add()")
        frames = self._split(next_obs)
        s = self._take_slot()
        self._write_frame(frames[-1], s)
        i = self.added % self.capacity
        self.actions[i] = np.asarray(action, dtype=np.float32).reshape(self.action_dim)
        self.rewards[i] = reward
        self.not_dones[i] = 0.0 if done else 1.0
        self.next_frame[i] = self.frames_written - 1
        if self._dev is not None:
            self._mirror(slice(i, i + 1), s)
        self._release_slot(s)
        self.added += 1

    def __len__(self) -> int:
        return min(self.added, self.capacity) - self._num_stale()

    def _num_stale(self) -> int:
        """Stored transitions (oldest first) whose oldest frame has been overwritten.

        A transition's oldest frame grows with its insertion order, so the stale ones are the oldest few: a binary
        search over the stored transitions (a few dozen reads, where indexing them all cost about 0.6 ms a call at
        100k transitions, on every sampled batch); none stale, the common case, is one read."""
        n = min(self.added, self.capacity)
        if n == 0:
            return 0
        oldest_kept = self.frames_written - self.frame_capacity
        start, cap, nf, k = self.added - n, self.capacity, self.next_frame, self.k

        def first_frame(pos: int) -> int:  # the oldest frame of the pos-th stored transition, oldest first
            return int(nf[(start + pos) % cap]) - k

        if first_frame(0) >= oldest_kept:
            return 0
        lo, hi = 1, n  # the first position whose oldest frame is kept (n: none is)
        while lo < hi:
            mid = (lo + hi) // 2
            if first_frame(mid) < oldest_kept:
                lo = mid + 1
            else:
                hi = mid
        return lo

    # ------------------------------------------------------------------------------------------
    def sample_indices(self, batch_size: int) -> np.ndarray:
        n = min(self.added, self.capacity)
        stale = self._num_stale()
        if n - stale < 1:
            raise ValueError("cannot sample from an empty replay buffer")
        pick = self.rng.integers(stale, n, size=batch_size)
        return (self.added - n + pick) % self.capacity

    def _span(self, idx: np.ndarray) -> np.ndarray:
        """Ring slots ``[B, k+1]`` of the frames of transitions ``idx``, obs's oldest to next_obs's newest."""
        return (self.next_frame[idx][:, None] - self.k + np.arange(self.k + 1)[None, :]) % self.frame_capacity

    def _gather(self, idx: np.ndarray) -> np.ndarray | torch.Tensor:
        """The ``k + 1`` frames ``[B, k+1, c, H, W]`` of transitions ``idx`` (obs's oldest to next_obs's newest),
        one gather where the ring lives (numpy array on the host, tensor on ``device``)."""
        return self.frames[self._to_ring(self._span(idx))]

    def _gather_staged(self, idx: np.ndarray) -> torch.Tensor:
        """:meth:`_gather` of the host ring into a reused staging buffer (pinned when CUDA is available).

        A fresh 61 MB array per batch (B = 512) costs its page faults on every sample; a reused buffer
        pays them once. The buffer is only overwritten once the previous copy out of it has finished
        (``_staging_copied``)."""
        B, k1 = len(idx), self.k + 1
        if self._staging_copied is not None:
            self._staging_copied.synchronize()
            self._staging_copied = None
        if self._staging is None or self._staging.shape[0] != B * k1:
            self._staging = torch.empty((B * k1, *self.frame_shape), dtype=torch.uint8,
                                        pin_memory=torch.cuda.is_available())
        torch.index_select(torch.from_numpy(self.frames), 0, torch.from_numpy(self._span(idx).reshape(-1)),
                           out=self._staging)
        return self._staging.view(B, k1, *self.frame_shape)

    def stacks(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``obs`` and ``next_obs`` uint8 stacks ``[B, k * c, H, W]`` of transitions ``idx`` (views of one gather)."""
        frames = self._gather(idx)
        if self.device is not None:
            frames = frames.cpu().numpy()
        B = len(idx)
        obs = frames[:, :-1].reshape(B, *self.obs_shape)
        next_obs = frames[:, 1:].reshape(B, *self.obs_shape)
        return obs, next_obs

    def futures(self, idx: np.ndarray, steps: int) -> dict[str, np.ndarray | torch.Tensor]:
        """What follows transitions ``idx`` for ``steps`` agent steps: ``future_obs`` ``[B, steps, k * c, H, W]`` (the
        observations after 1, 2, .. ``steps`` steps; the first is ``next_obs``), ``future_action`` ``[B, steps, A]``
        (the action taken at each of those steps' starts, the sampled transition's own first) and ``future_valid``
        ``[B, steps]``: whether the transition that leads to each observation is stored and in the same episode (an
        episode's first frame stack starts ``k`` frames after the last one's, so a step ``m`` ahead is valid when its
        newest frame is exactly ``m - 1`` frames after ``next_obs``'s). What an invalid position holds is unspecified.
        The sampling RNG is not touched: a run that also reads these draws the batches it would draw without them."""
        idx = np.asarray(idx)
        n = min(self.added, self.capacity)
        ahead = np.arange(steps)[None, :]  # transitions idx + m, m = 0 .. steps - 1
        later = (idx[:, None] + ahead) % self.capacity
        age = (idx[:, None] - (self.added - n)) % self.capacity + ahead  # position from the oldest stored
        stored = age < n
        consecutive = self.next_frame[later] == self.next_frame[idx][:, None] + ahead
        valid = stored & consecutive
        first = self.next_frame[idx][:, None] - self.k + 1  # next_obs's oldest frame
        span = (first + np.arange(steps + self.k - 1)[None, :]) % self.frame_capacity  # [B, steps + k - 1]
        frames = self.frames[self._to_ring(span)]  # [B, steps + k - 1, c, H, W]
        windows = [frames[:, m:m + self.k] for m in range(steps)]
        stack = np.stack if self.device is None else torch.stack
        obs = stack(windows, 1).reshape(len(idx), steps, *self.obs_shape)
        actions = np.where(valid[..., None], self.actions[later], 0.0).astype(np.float32)
        return {"future_obs": obs, "future_action": actions, "future_valid": valid}

    def sample(self, batch_size: int, device: torch.device | str = "cpu", future: int = 0) -> dict[str, torch.Tensor]:
        """A uniform batch: uint8 ``obs``, ``next_obs`` and float ``action``, ``reward`` [B,1], ``not_done`` [B,1]; with
        ``future`` > 0 also :meth:`futures` of the same transitions.

        The ``k + 1`` frames of each transition are gathered once into one contiguous array (on the ring's
        device) and moved to ``device`` in one copy if they are not there already; ``obs`` and ``next_obs``
        are then overlapping views of it (no copy).
        Sending the two stacks separately would first copy each into contiguous memory and move
        ``2k`` frames per transition instead of ``k + 1``.
        """
        idx = self.sample_indices(batch_size)
        device = torch.device(device)
        if self.device is None and device.type == "cuda":  # host ring -> GPU: staged, asynchronous copy
            frames = self._gather_staged(idx).to(device, non_blocking=True)
            self._staging_copied = torch.cuda.Event()
            self._staging_copied.record(torch.cuda.current_stream(device))
        else:  # a fresh array: the caller may keep this batch
            frames = self._gather(idx)
            frames = (torch.from_numpy(frames) if self.device is None else frames).to(device)  # [B, k+1, c, H, W]
        obs, next_obs = frames[:, :-1].flatten(1, 2), frames[:, 1:].flatten(1, 2)  # views [B, k*c, H, W]
        to = lambda a: torch.as_tensor(a).to(device, non_blocking=True)  # noqa: E731
        batch = {"obs": obs, "next_obs": next_obs, "action": to(self.actions[idx]),
                 "reward": to(self.rewards[idx][:, None]), "not_done": to(self.not_dones[idx][:, None])}
        if future:  # CPC's sequences (--aux cpc): the observations and actions of the next `future` steps
            batch.update({k: to(v) for k, v in self.futures(idx, future).items()})
        return batch

    # ------------------------------------------------------------------------------------------
    def enable_device_sampling(self) -> None:
        """Keep device copies of the per-transition arrays (actions, rewards, not-dones, frame indices) beside the
        device frame ring, so that :meth:`gather` builds a batch from device indices with torch operations alone: no
        value crosses to the host, so a CUDA graph can capture it (rl_curl.graphs). Needs ``device=``."""
        if self.device is None:
            raise ValueError("device sampling needs the frame ring on a device (FrameReplay(..., device=...); "
                             "rl_curl.train --replay-on-device)")
        if self._dev is None:
            self._dev = {"actions": torch.zeros((self.capacity, self.action_dim), dtype=torch.float32,
                                                device=self.device),
                         "rewards": torch.zeros((self.capacity,), dtype=torch.float32, device=self.device),
                         "not_dones": torch.zeros((self.capacity,), dtype=torch.float32, device=self.device),
                         "next_frame": torch.zeros((self.capacity,), dtype=torch.int64, device=self.device)}
            self._arange = torch.arange(self.k + 1, device=self.device)
            self._mirror(slice(0, min(self.added, self.capacity)))

    def _mirror(self, rows: slice, slot: int | None = None) -> None:
        """Copy transitions ``rows`` of the host arrays to their device copies (one row through staging slot
        ``slot``, when given)."""
        wait = self.blocking_copies
        for name, dev in self._dev.items():  # straight into the rows of the device copy
            if slot is None:
                src = torch.from_numpy(getattr(self, name)[rows])
            else:  # a host write into the pinned slot (numpy's: no torch operation), then the copy from there
                src = self._stage[name][slot:slot + 1]
                src.numpy()[...] = getattr(self, name)[rows]
            dev[rows].copy_(src, non_blocking=not wait)

    def gather(self, idx: torch.Tensor) -> dict[str, torch.Tensor]:
        """The batch of transitions ``idx`` (an int64 tensor on the ring's device, from :meth:`sample_indices`), as
        :meth:`sample` gives it (the same values), built by torch operations on the device alone
        (:meth:`enable_device_sampling` first)."""
        d = self._dev
        if d is None:
            raise RuntimeError("call enable_device_sampling() before gather()")
        span = (d["next_frame"][idx].unsqueeze(1) - self.k + self._arange) % self.frame_capacity  # [B, k+1]
        frames = self.frames[span]  # [B, k+1, c, H, W]
        return {"obs": frames[:, :-1].flatten(1, 2), "next_obs": frames[:, 1:].flatten(1, 2),
                "action": d["actions"][idx], "reward": d["rewards"][idx].unsqueeze(1),
                "not_done": d["not_dones"][idx].unsqueeze(1)}

    def oldest_frame(self, written: int | None = None) -> int:
        """The absolute index of the oldest frame the ring holds after ``written`` frames (default: those written)."""
        return max(0, (self.frames_written if written is None else written) - self.frame_capacity)

    def frames_between(self, first: int, end: int) -> torch.Tensor:
        """The frames ``first`` .. ``end - 1`` (absolute indices, all still in the ring) as one CPU tensor of their own
        ``[end - first, c, H, W]``, for a checkpoint's frame file: a view of the numpy ring where they lie in one
        piece (``torch.save`` writes a view's bytes only), a copy otherwise (the ring's end crossed, a device ring)."""
        if not self.oldest_frame() <= first <= end <= self.frames_written:
            raise ValueError(f"frames {first}..{end} are not all in the ring (it holds "
                             f"{self.oldest_frame()}..{self.frames_written})")
        pieces, pos = [], first
        while pos < end:
            slot = pos % self.frame_capacity
            n = min(end - pos, self.frame_capacity - slot)
            piece = self.frames[slot:slot + n]
            pieces.append(torch.from_numpy(piece) if self.device is None else piece)
            pos += n
        if not pieces:
            return torch.zeros((0, *self.frame_shape), dtype=torch.uint8)
        if len(pieces) == 1:
            return pieces[0] if self.device is None else pieces[0].to("cpu", copy=True)
        return torch.cat(pieces).cpu()

    def put_frames(self, first: int, frames: torch.Tensor | np.ndarray) -> None:
        """Write ``frames`` (uint8 ``[n, c, H, W]``) into the ring as the frames of absolute indices ``first`` ..
        ``first + n - 1`` (a resume's frame files; their slots must exist: :meth:`_reserve`)."""
        frames = torch.as_tensor(frames)
        pos = 0
        while pos < len(frames):
            slot = (first + pos) % self.frame_capacity
            n = min(len(frames) - pos, self.frame_capacity - slot)
            part = frames[pos:pos + n]
            if self.device is None:
                self.frames[slot:slot + n] = part.numpy()
            else:
                self.frames[slot:slot + n].copy_(part, non_blocking=not self.blocking_copies)
            pos += n

    def _host_frames(self, n: int) -> torch.Tensor:
        """The first ``n`` slots of the frame ring as a CPU tensor, for a checkpoint: a view of the numpy ring (no copy;
        the checkpoint is written before training goes on), a host copy of the device ring."""
        return torch.from_numpy(self.frames[:n]) if self.device is None else self.frames[:n].to("cpu", copy=True)

    def bytes_per_transition(self) -> float:
        total = sum(a.nbytes for a in (self.frames, self.actions, self.rewards, self.not_dones, self.next_frame))
        return total / self.capacity

    # ------------------------------------------------------------------------------------------
    def state_dict(self, frames: bool = True) -> dict:
        """Everything needed to continue exactly (arrays trimmed to what was written), as CPU tensors that view the
        ring's arrays: ``torch.save`` writes a tensor's bytes straight into the file, where a NumPy array is pickled
        through bytes and a Latin-1 string (saving a replay of 212 MB of frames peaked at 1.95 GB of memory, 9 times
        the frames, and wrote 317 MB; extrapolated, about 30 GB for 100k transitions of 100x100 frames).
        ``frames=False``: all but the frame ring (:class:`ReplayCheckpoint` keeps the frames in files of their own)."""
        nf, nt = min(self.frames_written, self.frame_capacity), min(self.added, self.capacity)
        state = {"capacity": self.capacity, "obs_shape": self.obs_shape, "action_dim": self.action_dim, "k": self.k,
                 "actions": torch.from_numpy(self.actions[:nt]),
                 "rewards": torch.from_numpy(self.rewards[:nt]), "not_dones": torch.from_numpy(self.not_dones[:nt]),
                 "next_frame": torch.from_numpy(self.next_frame[:nt]), "frames_written": self.frames_written,
                 "added": self.added, "episode_open": self._episode_open, "rng": self.rng.bit_generator.state}
        if frames:
            state["frames"] = self._host_frames(nf)
        return state

    def load_state_dict(self, state: dict) -> None:
        self.check_layout(state)
        nf = len(state["frames"])
        self._reserve(nf)
        self.frames[:nf] = self._to_ring(np.asarray(state["frames"]))
        self.load_all_but_frames(state)

    def check_layout(self, state: dict) -> None:
        """Refuse the state of a replay of other sizes."""
        mine = (self.capacity, tuple(self.obs_shape), self.action_dim, self.k)
        theirs = (state["capacity"], tuple(state["obs_shape"]), state["action_dim"], state["k"])
        if mine != theirs:
            raise ValueError(f"replay state is for (capacity, obs_shape, action_dim, frame_stack)={theirs}, "
                             f"this buffer is {mine}")

    def load_all_but_frames(self, state: dict) -> None:
        """The per-transition arrays, counters and sampling stream of ``state`` (the frames are put in place
        first)."""
        nt = len(state["actions"])
        self.actions[:nt] = state["actions"]
        self.rewards[:nt], self.not_dones[:nt], self.next_frame[:nt] = (state["rewards"], state["not_dones"],
                                                                        state["next_frame"])
        self.frames_written, self.added = int(state["frames_written"]), int(state["added"])
        self._episode_open = bool(state["episode_open"])
        self.rng.bit_generator.state = state["rng"]
        if self._dev is not None:
            self._mirror(slice(0, nt))


#: The folder of a checkpoint that holds the replay's frame files (:class:`ReplayCheckpoint`).
FRAME_FILES = "replay_frames"
_FRAME_FILE = re.compile(r"frames_(\d{12})_(\d{12})\.pt")


class ReplayCheckpoint:
    """The replay as a checkpoint entry whose frames are written once. The frames a run adds between two checkpoints
    go into one file of the checkpoint's folder ``replay_frames/`` (``frames_FIRST_END.pt``, absolute frame
    indices); the next checkpoint hard-links the files it still needs from the previous one and writes only the
    frames added since, so a run writes each frame once, where a replay saved whole each time wrote all its frames
    again at every checkpoint (once its ring is full, 3.3 GB of 100x100 frames each time). A file whose
    frames the ring has all overwritten is left out (it goes with the previous checkpoint); where a link cannot be
    made (a file system without hard links, a file missing), the frames still in the ring are written again. Each
    checkpoint stays a folder of its own (copy or move it whole). The rest of the replay (actions, rewards, indices,
    counters, sampling stream: a few MB) is the entry itself, as are the frames of a checkpoint written before
    (:meth:`FrameReplay.state_dict` whole): those load as they are.

    Registered with the accelerator in place of the replay; :func:`shared_losses.training.runtime.save_checkpoint`
    calls :meth:`write_files` and :func:`~shared_losses.training.runtime.load_checkpoint` :meth:`read_files_from`."""

    def __init__(self, replay: FrameReplay):
        self.replay = replay
        #: [first, end, file name, bytes]: the frame files of the checkpoint last written or loaded, oldest first
        self.files: list[tuple[int, int, str, int]] = []
        self._folder: Path | None = None

    @staticmethod
    def largest_file(checkpoint: str | os.PathLike) -> int | None:
        """Bytes of the largest frame file of the checkpoint at ``checkpoint`` (a resume reads one at a time onto the
        host); None where it has none (a replay saved whole, read onto the host at once; no usable checkpoint)."""
        from shared_losses.training.runtime import CheckpointError, resolve_checkpoint

        try:
            files = list((resolve_checkpoint(checkpoint) / FRAME_FILES).glob("frames_*.pt"))
            return max(f.stat().st_size for f in files) if files else None
        except (OSError, CheckpointError):
            return None

    @staticmethod
    def file_name(first: int, end: int) -> str:
        return f"frames_{first:012d}_{end:012d}.pt"

    def write_files(self, folder: str | os.PathLike, previous: str | os.PathLike | None) -> None:
        """Put the frame files of the checkpoint being written to ``folder``: the previous checkpoint's (``previous``)
        that hold frames still in the ring, linked, and one file of the frames added since."""
        rb = self.replay
        live = rb.oldest_frame()
        out = Path(folder) / FRAME_FILES
        out.mkdir(parents=True, exist_ok=True)
        kept, end = [], live
        for first, last, name, size in self.files:
            if last <= live:
                continue  # all overwritten
            src = None if previous is None else Path(previous) / FRAME_FILES / name
            kept.append((first, last, name, size) if src is not None and _linked(src, out / name, size)
                        else self._write(out, max(first, live), last))
            end = last
        if rb.frames_written > end:
            kept.append(self._write(out, end, rb.frames_written))
        self.files = kept

    def _write(self, out: Path, first: int, end: int) -> tuple[int, int, str, int]:
        name = self.file_name(first, end)
        with open(out / name, "wb") as fh:
            torch.save(self.replay.frames_between(first, end), fh)
            fh.flush()
            os.fsync(fh.fileno())
        return first, end, name, (out / name).stat().st_size

    def read_files_from(self, folder: str | os.PathLike) -> None:
        """The checkpoint folder whose frame files the next :meth:`load_state_dict` reads."""
        self._folder = Path(folder)

    def state_dict(self) -> dict:
        return {**self.replay.state_dict(frames=False), "frame_files": [list(f) for f in self.files]}

    def load_state_dict(self, state: dict) -> None:
        from shared_losses.training.runtime import CheckpointError, read_torch_file

        rb = self.replay
        if "frames" in state:  # a replay saved whole (a checkpoint written before frame files)
            rb.load_state_dict(state)
            self.files = []
            return
        rb.check_layout(state)
        if self._folder is None:
            raise RuntimeError("internal error: the replay's frame files were asked for before read_files_from()")
        where, written = f"checkpoint {self._folder}", int(state["frames_written"])
        files = self.check_listing(state.get("frame_files"), written, where)
        live = rb.oldest_frame(written)
        rb._reserve(min(written, rb.frame_capacity))
        for first, end, name, _ in files:
            path = self._folder / FRAME_FILES / name
            if not path.is_file():
                raise CheckpointError(f"{where}: the replay's frame file {FRAME_FILES}/{name} is missing (was the "
                                      "checkpoint folder copied in part?); the run cannot continue exactly without "
                                      "it (--no-save-replay starts a run whose checkpoints hold no replay)")
            try:
                frames = read_torch_file(path, "replay frame file")
            except CheckpointError:
                raise
            except Exception as err:  # noqa: BLE001 - any unreadable file is a damaged one
                raise CheckpointError(f"{where}: the replay's frame file {FRAME_FILES}/{name} is unreadable ({err}); "
                                      "the file is damaged (e.g. truncated)") from err
            shape = (end - first, *rb.frame_shape)
            if not isinstance(frames, torch.Tensor) or frames.dtype != torch.uint8 or tuple(frames.shape) != shape:
                got = (f"{frames.dtype} {tuple(frames.shape)}" if isinstance(frames, torch.Tensor)
                       else type(frames).__name__)
                raise CheckpointError(f"{where}: the replay's frame file {FRAME_FILES}/{name} holds {got}, not the "
                                      f"uint8 frames {shape} its name says; the file is damaged or not this run's")
            lo = max(first, live)
            rb.put_frames(lo, frames[lo - first:])
        rb.load_all_but_frames(state)
        self.files = files

    def check_listing(self, listing, written: int, where: str) -> list[tuple[int, int, str, int]]:
        """The entry's list of frame files, checked: names of this form (never a path), consecutive, ending at the
        frames written and starting no later than the oldest frame the ring holds."""
        from shared_losses.training.runtime import CheckpointError

        bad = f"{where}: the replay's list of frame files is damaged or not this version's"
        if not isinstance(listing, list):
            raise CheckpointError(f"{bad} ({type(listing).__name__}, not a list)")
        files, end = [], None
        for item in listing:
            ok = (isinstance(item, (list, tuple)) and len(item) == 4 and isinstance(item[2], str)
                  and (m := _FRAME_FILE.fullmatch(item[2])) is not None
                  and [int(m.group(1)), int(m.group(2))] == [item[0], item[1]] and item[0] < item[1]
                  and (end is None or item[0] == end))
            if not ok:
                raise CheckpointError(f"{bad} (entry {item!r})")
            files.append((int(item[0]), int(item[1]), item[2], int(item[3])))
            end = item[1]
        live = self.replay.oldest_frame(written)
        if (files[-1][1] if files else 0) != written or (files and files[0][0] > live):
            raise CheckpointError(f"{bad} (its files hold frames "
                                  f"{files[0][0] if files else 0}..{files[-1][1] if files else 0}, the replay needs "
                                  f"{live}..{written})")
        return files


def _linked(src: Path, dst: Path, size: int) -> bool:
    """Hard-link ``src`` (of ``size`` bytes) to ``dst``; False where it cannot be (missing, of another size, a file
    system without links)."""
    try:
        if src.stat().st_size != size:
            return False
        os.link(src, dst)
        return True
    except OSError:
        return False


class _HostCopiesDone:
    """The event of a staging slot on a ring that is not on a GPU: copies there have run when launched."""

    def record(self, stream=None) -> None:
        pass

    def synchronize(self) -> None:
        pass
