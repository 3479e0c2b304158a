import json

import numpy as np
import pytest
import torch

from rl_curl.replay import FrameReplay

K, C, H = 3, 3, 4


def frame(uid: int) -> np.ndarray:
    f = np.zeros((C, H, H), dtype=np.uint8)
    f[0, 0, 0], f[0, 0, 1] = uid % 256, (uid // 256) % 256
    return f


def fill(replay, lengths, rng):
    """Feed episodes of the given lengths; return the reference transitions in order."""
    ref, uid = [], 1
    for length in lengths:
        frames = [frame(uid)] * K  # reset stack repeats the first frame
        uid += 1
        obs = np.concatenate(frames)
        replay.start_episode(obs)
        for t in range(length):
            frames = frames[1:] + [frame(uid)]
            uid += 1
            nxt = np.concatenate(frames)
            a, r, d = rng.uniform(-1, 1, 2), float(rng.normal()), t == length - 1 and length % 2 == 0
            replay.add(a, r, nxt, d)
            ref.append((obs, a, r, nxt, d))
            obs = nxt
    return ref


def check_all(replay, ref):
    n = len(replay)
    assert 0 < n <= replay.capacity
    for back in range(1, n + 1):
        idx = np.array([(replay.added - back) % replay.capacity])
        obs, nxt = replay.stacks(idx)
        o, a, r, x, d = ref[-back]
        assert np.array_equal(obs[0], o) and np.array_equal(nxt[0], x)
        np.testing.assert_allclose(replay.actions[idx[0]], a, rtol=1e-6)
        assert replay.rewards[idx[0]] == np.float32(r) and replay.not_dones[idx[0]] == (0.0 if d else 1.0)


def test_stacks_exact_across_episodes_no_wrap():
    rb = FrameReplay(100, (K * C, H, H), 2, K, seed=0)
    ref = fill(rb, [5, 1, 7, 2], np.random.default_rng(0))
    assert len(rb) == 15
    check_all(rb, ref)


@pytest.mark.parametrize("lengths", [[7] * 20, [1] * 40, [3, 30, 2, 1, 50, 4]])
def test_stacks_exact_after_wraparound(lengths):
    rb = FrameReplay(20, (K * C, H, H), 2, K, seed=0)
    ref = fill(rb, lengths, np.random.default_rng(1))
    assert rb.added == sum(lengths) > rb.capacity
    check_all(rb, ref)  # every sampleable transition is exact (stale ones are excluded)
    valid = {(rb.added - b) % rb.capacity for b in range(1, len(rb) + 1)}
    assert set(rb.sample_indices(500).tolist()) <= valid


def load_bench(name: str = "bench_replay"):
    """scripts/NAME.py as a module. bench_replay's ``stale_by_indexing_all`` is the stale count as the equation states
    it (every stored transition's oldest frame indexed, oldest first), the baseline the bench times the search
    against."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


@pytest.mark.parametrize("capacity", [5, 20, 64])
def test_stale_count_by_binary_search_equals_indexing_every_transition(capacity):
    """_num_stale searches the stored transitions instead of indexing them all (0.6 ms a call at 100k): after every
    step of episodes short and long (short ones overwrite frames fastest: k extra frames each), the same count,
    stale transitions included (the test fails when the search is off by one either way)."""
    stale_by_indexing_all = load_bench().stale_by_indexing_all
    rng = np.random.default_rng(capacity)
    rb = FrameReplay(capacity, (K * C, H, H), 2, K, seed=0)
    seen = set()
    for length in rng.integers(1, 3 * capacity, size=25).tolist() + [1] * 30:
        rb.start_episode(np.concatenate([frame(0)] * K))
        for _ in range(length):
            rb.add(np.zeros(2), 0.0, np.concatenate([frame(1)] * K), False)
            want = stale_by_indexing_all(rb)
            assert rb._num_stale() == want
            assert len(rb) == min(rb.added, rb.capacity) - want
            seen.add(want)
    assert 0 in seen and max(seen) >= 2  # both the common case and runs of stale transitions were met


def test_the_replay_bench_times_the_search_against_indexing_all(capsys):
    bench = load_bench()
    assert bench.main(["--capacity", "60", "--stored", "20", "60", "--episode-length", "2", "--image-size", "4",
                       "--calls", "3", "--batch", "8", "--device", "cpu", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [r["stored"] for r in got["rows"]] == [20, 60] and got["rows"][1]["stale"] > 0  # stale ones searched
    for r in got["rows"]:
        assert r["stale_count_ms"] > 0 and r["stale_count_indexing_all_ms"] > 0 and r["add_ms"] > 0
    with pytest.raises(ValueError, match=r"--stored must be between 1 and --capacity \(60\)"):  # one error: line
        bench.main(["--capacity", "60", "--stored", "61"])


def test_sample_batch_types():
    rb = FrameReplay(50, (K * C, H, H), 2, K, seed=0)
    fill(rb, [10], np.random.default_rng(2))
    b = rb.sample(8)
    assert b["obs"].shape == (8, K * C, H, H) and str(b["obs"].dtype) == "torch.uint8"
    assert b["reward"].shape == (8, 1) and b["not_done"].shape == (8, 1) and b["action"].shape == (8, 2)


def test_sample_stacks_are_views_of_one_gather():
    """obs and next_obs of a batch hold the exact stacks, as overlapping views of one [B, k+1, c, H, W] copy."""
    rb = FrameReplay(50, (K * C, H, H), 2, K, seed=3)
    fill(rb, [7, 12], np.random.default_rng(4))
    state = rb.rng.bit_generator.state
    idx = rb.sample_indices(16)
    rb.rng.bit_generator.state = state  # sample() makes the same draw
    b = rb.sample(16)
    obs, nxt = rb.stacks(idx)
    assert np.array_equal(b["obs"].numpy(), obs) and np.array_equal(b["next_obs"].numpy(), nxt)
    assert b["obs"].untyped_storage().data_ptr() == b["next_obs"].untyped_storage().data_ptr()
    assert b["obs"].untyped_storage().nbytes() == 16 * (K + 1) * C * H * H


def test_staged_gather_matches_the_fresh_gather_and_cpu_batches_stay_independent():
    """The reused staging buffer of the host-ring -> GPU path holds exactly the frames of a fresh gather,
    across reuses and batch-size changes; CPU batches never share it (a kept batch is not overwritten)."""
    rb = FrameReplay(40, (K * C, H, H), 2, K, seed=5)
    fill(rb, [9, 30, 14], np.random.default_rng(6))  # wraps around
    for B in (16, 16, 5, 16):
        idx = rb.sample_indices(B)
        assert np.array_equal(rb._gather_staged(idx).numpy(), rb._gather(idx))
    first = rb.sample(16)
    kept = first["obs"].clone()
    rb.sample(16)
    assert torch.equal(first["obs"], kept)


def test_memory_at_most_a_fifth_of_obs_and_next_obs():
    rb = FrameReplay(1000, (9, 100, 100), 6, 3)
    assert rb.bytes_per_transition() <= 2 * 9 * 100 * 100 / 5


def test_state_dict_round_trip_continues_identically():
    rb = FrameReplay(20, (K * C, H, H), 2, K, seed=5)
    fill(rb, [6, 9, 4], np.random.default_rng(3))
    state = rb.state_dict()
    other = FrameReplay(20, (K * C, H, H), 2, K, seed=99)
    other.load_state_dict(state)
    a, b = rb.sample(6), other.sample(6)
    for k in a:
        assert (a[k] == b[k]).all()
    with pytest.raises(ValueError, match="capacity"):
        FrameReplay(30, (K * C, H, H), 2, K).load_state_dict(state)


def test_a_checkpoint_of_the_replay_holds_views_not_copies_and_the_numpy_form_still_loads(tmp_path):
    """Saving a replay of 212 MB of frames (NumPy arrays, pickled through bytes) peaked at 1.95 GB of memory and
    wrote 317 MB (a probe; extrapolated, about 30 GB for 100k transitions of 100x100 frames): the state is CPU
    tensors viewing the ring, whose bytes torch.save writes straight into the file. A checkpoint of the earlier form
    (NumPy copies) loads as before."""
    rb = FrameReplay(40, (K * C, H, H), 2, K, seed=5)
    fill(rb, [12, 15, 9], np.random.default_rng(3))
    state = rb.state_dict()
    for name in ("frames", "actions", "rewards", "not_dones", "next_frame"):
        assert isinstance(state[name], torch.Tensor) and np.shares_memory(state[name].numpy(), getattr(rb, name))
    torch.save(state, tmp_path / "r.pt")
    data = sum(state[n].numel() * state[n].element_size() for n in ("frames", "actions", "rewards", "not_dones",
                                                                    "next_frame"))
    assert (tmp_path / "r.pt").stat().st_size < data + 20_000  # the bytes once, not a pickled string of them
    from shared_losses.training.runtime import read_torch_file

    for loaded in (read_torch_file(tmp_path / "r.pt"), {k: v.numpy().copy() if isinstance(v, torch.Tensor) else v
                                                        for k, v in state.items()}):  # this form, the earlier one
        other = FrameReplay(40, (K * C, H, H), 2, K, seed=99)
        other.load_state_dict(loaded)
        a, b = rb.sample(6), other.sample(6)
        for k in a:
            assert (a[k] == b[k]).all()
        rb.rng = np.random.default_rng(5)  # the same draws again for the next form
        rb.rng.bit_generator.state = state["rng"]


def test_bad_input():
    rb = FrameReplay(20, (K * C, H, H), 2, K)
    with pytest.raises(RuntimeError, match="start_episode"):
        rb.add(np.zeros(2), 0.0, np.zeros((K * C, H, H), np.uint8), False)
    with pytest.raises(ValueError, match="uint8"):
        rb.start_episode(np.zeros((K * C, H, H), np.float32))
    with pytest.raises(ValueError, match="empty"):
        rb.sample(2)


def test_ring_on_a_torch_device_gives_identical_batches_and_checkpoints():
    """device= keeps the frames in a torch tensor (here on the CPU, as on a GPU): same stacks, batches,
    state and bytes as the host ring, and the checkpoints load into each other."""
    host, dev = (FrameReplay(20, (K * C, H, H), 2, K, seed=7, device=d) for d in (None, "cpu"))
    ref = fill(host, [6, 9, 4, 8], np.random.default_rng(5))
    fill(dev, [6, 9, 4, 8], np.random.default_rng(5))
    assert isinstance(dev.frames, torch.Tensor) and dev.frames.dtype == torch.uint8
    check_all(dev, ref)
    assert dev.bytes_per_transition() == host.bytes_per_transition()
    a, b = host.sample(12), dev.sample(12)
    for k in a:
        assert torch.equal(a[k], b[k])
    sh, sd = host.state_dict(), dev.state_dict()
    assert isinstance(sd["frames"], torch.Tensor) and sd["frames"].device.type == "cpu"
    assert torch.equal(sh["frames"], sd["frames"])
    sd["frames"][0] += 1  # the device ring's state is a host copy: changing it leaves the ring alone
    assert not torch.equal(sd["frames"][0], dev.frames[0])
    other = FrameReplay(20, (K * C, H, H), 2, K, seed=0, device="cpu")
    other.load_state_dict(sh)
    a, b = host.sample(5), other.sample(5)
    for k in a:
        assert torch.equal(a[k], b[k])


@pytest.mark.parametrize("blocking", [False, True])
def test_copies_to_the_device_ring_are_launched_without_waiting(monkeypatch, blocking):
    """On a GPU a copy that waits (``non_blocking=False``) waits for the update queued before it: adding a step's
    transition with device sampling made five such waits. Every host-to-ring copy of add(), start_episode() and
    load_state_dict() is now launched without waiting (CUDA stages pageable bytes before returning), and
    ``blocking_copies`` restores the waiting copies the bench times them against. The batches are the same."""
    seen = []
    to, copy_ = torch.Tensor.to, torch.Tensor.copy_

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("non_blocking", False))
        return to(self, *args, **kwargs)

    def spy_copy(self, src, non_blocking=False):
        seen.append(non_blocking)
        return copy_(self, src, non_blocking)

    ref_replay = FrameReplay(20, (K * C, H, H), 2, K, seed=7, device="cpu")
    fill(ref_replay, [6, 9], np.random.default_rng(5))
    ref_replay.enable_device_sampling()
    state = ref_replay.state_dict()  # the frames come back to the host with a copy that waits, as it must
    replay = FrameReplay(20, (K * C, H, H), 2, K, seed=7, device="cpu")
    replay.blocking_copies = blocking
    replay.enable_device_sampling()
    monkeypatch.setattr(torch.Tensor, "to", spy)
    monkeypatch.setattr(torch.Tensor, "copy_", spy_copy)
    fill(replay, [6, 9], np.random.default_rng(5))
    # per step: the frame and four per-transition arrays; per episode: K frames; each one copy into its place
    assert len(seen) == (6 + 9) * 5 + 2 * K
    assert set(seen) == {not blocking}
    seen.clear()
    replay.load_state_dict(state)
    assert seen and set(seen) == {not blocking}
    monkeypatch.undo()
    idx = torch.from_numpy(ref_replay.sample_indices(8))
    a, b = ref_replay.gather(idx), replay.gather(idx)
    for k in a:
        assert torch.equal(a[k], b[k])


class DeferredStream:
    """A CPU stand-in for a GPU stream: a copy launched without waiting runs later, in launch order, when an event
    recorded after it is waited on, when a waiting copy is launched, or at the end. What it reads from its source is
    what the source holds then, as a GPU's copy engine would."""

    def __init__(self, monkeypatch):
        self.queue, self.done = [], 0
        real = torch.Tensor.copy_

        def copy_(dst, src, non_blocking=False):
            if non_blocking:
                self.queue.append((dst, src))
                return dst
            self.run()
            return real(dst, src)

        self.real = real
        monkeypatch.setattr(torch.Tensor, "copy_", copy_)

    def run(self, upto=None):
        upto = len(self.queue) if upto is None else upto
        while self.done < upto:
            dst, src = self.queue[self.done]
            self.real(dst, src)
            self.done += 1

    def event(self):
        stream = self

        class Event:
            def record(self, *_):
                self.upto = len(stream.queue)

            def synchronize(self):
                stream.run(self.upto)

        return Event()


def fill_reusing_buffers(replay, lengths, rng):
    """Episodes fed as an environment loop feeds them: one observation array and one action array, overwritten with
    the next step's values (and with garbage after each call) once the replay has taken them."""
    obs_buf, act_buf, uid = np.empty((K * C, H, H), np.uint8), np.empty(2, np.float32), 1
    for length in lengths:
        frames = [frame(uid)] * K
        uid += 1
        obs_buf[...] = np.concatenate(frames)
        replay.start_episode(obs_buf)
        obs_buf[...] = 255
        for t in range(length):
            frames = frames[1:] + [frame(uid)]
            uid += 1
            obs_buf[...], act_buf[...] = np.concatenate(frames), rng.uniform(-1, 1, 2)
            replay.add(act_buf, float(rng.normal()), obs_buf, t == length - 1 and length % 2 == 0)
            obs_buf[...], act_buf[...] = 255, 9.0


@pytest.mark.parametrize("guarded", [True, False])
def test_staged_copies_arrive_intact_when_the_copies_run_late(monkeypatch, guarded):
    """A step's values reach the device ring through a small ring of (on a GPU, pinned) staging slots, copied from
    there without waiting; a slot is written again only once the copies out of it have run (its event). Here the copies
    run late (a deferred stand-in for the GPU's stream) and the caller reuses its arrays: the ring and the device rows
    equal a host ring's after more steps than there are slots. Without the wait on the slot's event (guarded=False) a
    late copy reads the slot's next values: the check then sees wrong frames, which shows it can fail."""
    rng_ref, rng = np.random.default_rng(3), np.random.default_rng(3)
    lengths = [7, 1, 12, 30, 2, 9]
    ref = FrameReplay(25, (K * C, H, H), 2, K, seed=4)
    fill_reusing_buffers(ref, lengths, rng_ref)
    replay = FrameReplay(25, (K * C, H, H), 2, K, seed=4, device="cpu")
    replay.enable_device_sampling()
    replay.staging = True
    stream = DeferredStream(monkeypatch)
    monkeypatch.setattr(replay, "_new_event", stream.event)
    if not guarded:
        take = FrameReplay._take_slot

        def no_wait(self):
            self._stage_events = [None] * self.STAGING_SLOTS if self._stage is not None else []
            return take(self)

        monkeypatch.setattr(FrameReplay, "_take_slot", no_wait)
    fill_reusing_buffers(replay, lengths, rng)
    assert replay.added == sum(lengths) > 2 * replay.STAGING_SLOTS and stream.done < len(stream.queue)
    stream.run()
    monkeypatch.undo()
    n = min(ref.frames_written, ref.frame_capacity)
    same_frames = torch.equal(replay.frames[:n], torch.from_numpy(ref.frames[:n]))
    assert same_frames == guarded
    if guarded:
        for name, dev in replay._dev.items():
            assert torch.equal(dev, torch.from_numpy(getattr(ref, name))), name
        idx = ref.sample_indices(16)
        assert np.array_equal(replay.sample_indices(16), idx)
        got = replay.gather(torch.from_numpy(idx))
        want_obs, want_next = ref.stacks(idx)
        assert np.array_equal(got["obs"].numpy(), want_obs) and np.array_equal(got["next_obs"].numpy(), want_next)


def test_staging_is_off_for_host_rings_and_waiting_copies_and_on_by_default_only_on_a_gpu():
    host = FrameReplay(10, (K * C, H, H), 2, K)
    cpu_ring = FrameReplay(10, (K * C, H, H), 2, K, device="cpu")
    assert not host._staged() and not cpu_ring._staged()  # copies to a CPU ring have run when launched
    cpu_ring.staging = True
    assert cpu_ring._staged()
    cpu_ring.blocking_copies = True  # the waiting copies the bench times: straight from the caller's arrays
    assert not cpu_ring._staged()
    fill(cpu_ring, [4], np.random.default_rng(0))
    assert cpu_ring._stage is None
    gpu_typed = FrameReplay(10, (K * C, H, H), 2, K, device="cpu")
    gpu_typed.device = torch.device("cuda")  # only the device's type decides (no GPU needed to read it)
    assert gpu_typed._staged()


# ---------------------------------------------------------------------------------- checkpoints of frame files
def _accelerator_with(replay, whole: bool = False):
    """A CPU accelerator with ``replay`` registered as rl_curl.train registers it (its frames as files), or whole
    (``whole``: the replay itself, as checkpoints were written before frame files)."""
    from accelerate import Accelerator

    from rl_curl.replay import ReplayCheckpoint
    from shared_losses.training.runtime import register_named

    acc = Accelerator(cpu=True)
    entry = replay if whole else ReplayCheckpoint(replay)
    register_named(acc, replay=entry)
    return acc, entry


def _same_replay(a, b):
    """``a`` and ``b`` hold the same transitions, frames and counters and draw the same batches next."""
    assert (a.frames_written, a.added, len(a), a._episode_open) == (b.frames_written, b.added, len(b), b._episode_open)
    n = min(a.added, a.capacity)
    for name in ("actions", "rewards", "not_dones", "next_frame"):
        assert np.array_equal(getattr(a, name)[:n], getattr(b, name)[:n]), name
    idx = np.array([(a.added - back) % a.capacity for back in range(1, len(a) + 1)])
    for x, y in zip(a.stacks(idx), b.stacks(idx)):  # every transition that can be sampled, frames included
        assert np.array_equal(x, y)
    state = a.rng.bit_generator.state
    batch_a = a.sample(7)
    a.rng.bit_generator.state = state  # a's draws as they were: the test does not change the run it checks
    batch_b = b.sample(7)
    for k in batch_a:
        assert torch.equal(batch_a[k], batch_b[k].to(batch_a[k].device)), k


def _frame_files(ckpt):
    from rl_curl.replay import FRAME_FILES

    return sorted((ckpt / FRAME_FILES).iterdir())


@pytest.mark.parametrize("device", [None, "cpu"])
def test_each_checkpoint_links_the_frames_it_had_and_writes_only_those_added_since(tmp_path, device):
    """The frames a run adds between two checkpoints are written once, in a file of their own; the next checkpoint
    hard-links it (the same file on disk) and writes only its own new frames. The replay's entry holds no frame.
    A resume from it (onto a host or a device ring) holds the same replay and draws the same batches."""
    from shared_losses.training.runtime import load_checkpoint, save_checkpoint

    rb = FrameReplay(200, (K * C, 16, 16), 2, K, seed=3, device=device)
    acc, entry = _accelerator_with(rb)
    ckpt, rng = tmp_path / "checkpoint", np.random.default_rng(0)
    frame_bytes = C * 16 * 16
    sizes, inodes = [], {}
    for step, lengths in enumerate(([9, 12], [5], [20, 3])):
        for length in lengths:  # episodes of 16x16 frames (fill() writes 4x4 ones: build them here)
            rb.start_episode(rng.integers(0, 255, (K * C, 16, 16), dtype=np.uint8))
            for t in range(length):
                rb.add(rng.uniform(-1, 1, 2), float(rng.normal()), rng.integers(0, 255, (K * C, 16, 16),
                                                                               dtype=np.uint8), t == length - 1)
        save_checkpoint(acc, ckpt, {"step": step})
        files = _frame_files(ckpt)
        assert len(files) == step + 1
        for f in files:
            inodes.setdefault(f.name, f.stat().st_ino)
            assert f.stat().st_ino == inodes[f.name]  # written once, then linked
        new = files[-1]
        first, end = (int(x) for x in new.stem.split("_")[1:])
        assert end == rb.frames_written and new.stat().st_size < (end - first) * frame_bytes + 2000
        sizes.append(sum(f.stat().st_size for f in files))
    entry_file = next(ckpt.glob("custom_checkpoint_*.pkl"))
    assert entry_file.stat().st_size < 20_000 < sizes[-1]  # the entry holds the rest, not the frames
    for ring in (None, "cpu"):
        other = FrameReplay(200, (K * C, 16, 16), 2, K, seed=99, device=ring)
        acc2, entry2 = _accelerator_with(other)
        load_checkpoint(acc2, ckpt)
        _same_replay(rb, other)
        assert entry2.files == entry.files


def test_checkpoints_across_the_ring_s_end_keep_only_frames_still_in_it(tmp_path):
    """Past the ring's end, a frame file whose frames are all overwritten is left out of the next checkpoint, and a
    resume from every checkpoint holds the replay exactly (short episodes: stale transitions too)."""
    from shared_losses.training.runtime import load_checkpoint, save_checkpoint

    rb = FrameReplay(20, (K * C, H, H), 2, K, seed=1)
    acc, _ = _accelerator_with(rb)
    ckpt, rng, dropped = tmp_path / "checkpoint", np.random.default_rng(2), 0
    for step in range(12):
        fill(rb, [3, 1, 7][: 1 + step % 3], rng)
        before = {f.name for f in _frame_files(ckpt)} if ckpt.exists() else set()
        save_checkpoint(acc, ckpt, {"step": step})
        live = rb.frames_written - rb.frame_capacity
        files = _frame_files(ckpt)
        assert all(int(f.stem.split("_")[2]) > live for f in files)  # none all overwritten
        dropped += len(before - {f.name for f in files})
        other = FrameReplay(20, (K * C, H, H), 2, K, seed=5)
        load_checkpoint(_accelerator_with(other)[0], ckpt)
        _same_replay(rb, other)
    assert rb.frames_written > 3 * rb.frame_capacity and dropped > 0


def test_without_hard_links_the_frames_still_in_the_ring_are_written_again(tmp_path, monkeypatch):
    """A file system without hard links (or a previous file gone): the next checkpoint writes the frames again from
    the ring, and resumes exactly."""
    import errno
    import os

    from shared_losses.training.runtime import load_checkpoint, save_checkpoint

    rb = FrameReplay(30, (K * C, H, H), 2, K, seed=4)
    acc, _ = _accelerator_with(rb)
    ckpt, rng = tmp_path / "checkpoint", np.random.default_rng(3)
    fill(rb, [6, 8], rng)
    save_checkpoint(acc, ckpt, {"step": 0})
    first = _frame_files(ckpt)[0].stat().st_ino

    def refuse(src, dst):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", refuse)
    fill(rb, [5], rng)
    save_checkpoint(acc, ckpt, {"step": 1})
    files = _frame_files(ckpt)
    assert len(files) == 2 and files[0].stat().st_ino != first
    other = FrameReplay(30, (K * C, H, H), 2, K, seed=0)
    load_checkpoint(_accelerator_with(other)[0], ckpt)
    _same_replay(rb, other)


def test_a_checkpoint_whose_replay_was_saved_whole_loads_and_the_next_writes_frame_files(tmp_path):
    """Checkpoints written before frame files hold the frames in the replay's entry: they load as they are."""
    from shared_losses.training.runtime import load_checkpoint, save_checkpoint

    rb = FrameReplay(30, (K * C, H, H), 2, K, seed=4)
    ckpt, rng = tmp_path / "checkpoint", np.random.default_rng(5)
    fill(rb, [6, 8, 9], rng)
    save_checkpoint(_accelerator_with(rb, whole=True)[0], ckpt, {"step": 0})
    assert not (ckpt / "replay_frames").exists()
    other = FrameReplay(30, (K * C, H, H), 2, K, seed=0)
    acc, entry = _accelerator_with(other)
    load_checkpoint(acc, ckpt)
    _same_replay(rb, other)
    assert entry.files == []
    fill(other, [4], rng)
    save_checkpoint(acc, ckpt, {"step": 1})
    assert [f.name for f in _frame_files(ckpt)] == [f"frames_{max(0, other.frames_written - other.frame_capacity):012d}"
                                                     f"_{other.frames_written:012d}.pt"]


def test_damaged_frame_files_are_refused_naming_the_file(tmp_path):
    from shared_losses.training.runtime import CheckpointError, load_checkpoint, save_checkpoint

    rb = FrameReplay(30, (K * C, H, H), 2, K, seed=4)
    acc, _ = _accelerator_with(rb)
    ckpt = tmp_path / "checkpoint"
    fill(rb, [6], np.random.default_rng(5))
    save_checkpoint(acc, ckpt, {"step": 0})
    fill(rb, [4], np.random.default_rng(6))
    save_checkpoint(acc, ckpt, {"step": 1})
    first, second = _frame_files(ckpt)

    def load():
        load_checkpoint(_accelerator_with(FrameReplay(30, (K * C, H, H), 2, K))[0], ckpt)

    data = second.read_bytes()
    second.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(CheckpointError, match=rf"frame file replay_frames/{second.name} is unreadable"):
        load()
    torch.save(torch.zeros((2, C, H, H), dtype=torch.uint8), second)  # another shape
    with pytest.raises(CheckpointError, match=rf"{second.name} holds torch.uint8 \(2, 3, 4, 4\), not the uint8 "
                                              r"frames \(7, 3, 4, 4\)"):
        load()
    second.unlink()
    with pytest.raises(CheckpointError, match=rf"frame file replay_frames/{second.name} is missing"):
        load()
    second.write_bytes(data)
    load()  # whole again
    entry_file = next(ckpt.glob("custom_checkpoint_*.pkl"))
    state = torch.load(entry_file, weights_only=False)
    for listing in ([["../../x", *state["frame_files"][0][1:]]], state["frame_files"][1:], state["frame_files"][:1]):
        torch.save({**state, "frame_files": listing}, entry_file)  # a path, a gap at the start, short of the end
        with pytest.raises(CheckpointError, match="list of frame files is damaged"):
            load()
    assert first.exists()


def test_the_checkpoint_bench_counts_each_way_s_bytes(capsys, monkeypatch):
    """scripts/bench_replay_checkpoints.py at a tiny size: frame files write each frame once (the bytes of the
    frames, plus a file's header per checkpoint), the whole replay every checkpoint's frames again; the whole
    replay's grow with the run."""
    import json

    bench = load_bench("bench_replay_checkpoints")
    assert bench.main(["--capacity", "200", "--transitions", "200", "--every", "20", "--episode-length", "9",
                       "--image-size", "32", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    files, whole = report["ways"]["frame files"], report["ways"]["whole"]
    frame = 3 * 32 * 32
    assert report["checkpoints"] == 10 and files["frames_bytes"] == whole["frames_bytes"] == (200 + 23 * 3) * frame
    # each checkpoint's files: one new frame file and the rest (the entry, random states, extra.pt: about 21 kB)
    assert files["frames_bytes"] < files["written_bytes"] < files["frames_bytes"] + 10 * 30_000
    # the whole replay: the frames of every checkpoint so far, at each (the ring of 226 slots full by the last two)
    held = sum(min(226, 20 * c + 3 * -(-20 * c // 9)) for c in range(1, 11)) * frame
    assert whole["written_bytes"] > held and report["written_ratio"] > 3
    # --sync: each checkpoint counted until it is on the disk (one checkpoint each way here: two os.sync calls)
    synced = []
    monkeypatch.setattr(bench.os, "sync", lambda: synced.append(1))
    assert bench.main(["--capacity", "200", "--transitions", "20", "--every", "20", "--image-size", "8", "--sync",
                       "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sync"] is True and len(synced) == 2
