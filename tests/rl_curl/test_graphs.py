"""The CUDA-graph update (rl_curl.graphs, --cuda-graphs) on its CPU path: the batch gathered on the device equals the
replay's sample, the update that a graph would capture equals the default update bit for bit, reads no value on the
host, and is put back exactly after the warm-up a capture needs; whole runs with --cuda-graphs are the default runs.
The capture itself needs a GPU: scripts/bench_curl_gpu.py's self-test compares it with the default update there."""

import contextlib
import copy
import dataclasses
import csv

import numpy as np
import pytest
import torch

from rl_curl.agent import CurlAgent
from rl_curl.graphs import GraphedAct, GraphedUpdate, Snapshot
from rl_curl.replay import FrameReplay
from rl_curl.train import run
from shared_losses.training.runtime import TrainingDiverged

from .conftest import tiny_config
from .test_agent import CASES, OBS

B = 8


def filled_replay(device=None, n=60, seed=0, capacity=40):
    """A replay that has wrapped around (capacity 40, 60 transitions over 3 episodes)."""
    rng = np.random.default_rng(seed)
    rep = FrameReplay(capacity, OBS, 2, 3, seed=7, device=device)
    for i in range(n):
        if i % 20 == 0:
            rep.start_episode(rng.integers(0, 256, OBS, dtype=np.uint8))
        rep.add(rng.uniform(-1, 1, 2), float(rng.normal()), rng.integers(0, 256, OBS, dtype=np.uint8), i % 20 == 19)
    return rep


def test_device_gather_is_the_replays_sample():
    host = filled_replay()
    dev = filled_replay(device="cpu")  # the ring as a torch tensor: the --replay-on-device layout
    dev.enable_device_sampling()
    for _ in range(3):
        want = host.sample(B)
        got = dev.gather(torch.from_numpy(dev.sample_indices(B)))
        assert want.keys() == got.keys()
        for k in want:
            assert torch.equal(want[k], got[k]), k
    # the device copies follow what is added after, and a loaded state
    rng = np.random.default_rng(1)
    action, frame = rng.uniform(-1, 1, 2), rng.integers(0, 256, OBS, dtype=np.uint8)
    for rep in (host, dev):
        rep.add(action, 0.5, frame, False)
    other = filled_replay(device="cpu", seed=3)
    other.enable_device_sampling()
    other.load_state_dict(host.state_dict())
    idx = host.sample_indices(B)
    for rep in (dev, other):
        got = rep.gather(torch.from_numpy(idx))
        host_batch = {"obs": torch.from_numpy(host.stacks(idx)[0]), "next_obs": torch.from_numpy(host.stacks(idx)[1]),
                      "action": torch.from_numpy(host.actions[idx]),
                      "reward": torch.from_numpy(host.rewards[idx][:, None]),
                      "not_done": torch.from_numpy(host.not_dones[idx][:, None])}
        for k in host_batch:
            assert torch.equal(got[k], host_batch[k]), k


def test_device_sampling_needs_the_ring_on_a_device():
    with pytest.raises(ValueError, match="--replay-on-device"):
        filled_replay().enable_device_sampling()


def make_agent(**kw):
    torch.manual_seed(0)
    return CurlAgent(OBS, 2, tiny_config(batch_size=B, **kw).resolved())


def same_state(a: CurlAgent, b: CurlAgent) -> None:
    sa, sb = a.state_dict(), b.state_dict()
    for k in sa:
        assert torch.equal(sa[k], sb[k]), k
    for (name, oa), ob in zip(a.optimizers().items(), b.optimizers().values()):
        for pa, pb in zip((p for g in oa.param_groups for p in g["params"]),
                          (p for g in ob.param_groups for p in g["params"])):
            for k, v in oa.state.get(pa, {}).items():
                assert torch.equal(v, ob.state[pb][k]), (name, k)


@pytest.mark.parametrize("update", ["official", "fused"])
@pytest.mark.parametrize("aux,tau_plus,m", CASES)
def test_the_graphed_update_is_the_default_update_bit_for_bit(aux, tau_plus, m, update):
    kw = dict(aux=aux, tau_plus=tau_plus, positives=m, update=update)
    default, graphed = make_agent(**kw), make_agent(**kw)
    host, dev = filled_replay(), filled_replay(device="cpu")
    fast = GraphedUpdate(graphed, dev, B)
    for step in range(5):  # odd and even steps: with and without the actor and the targets
        torch.manual_seed(100 + step)
        want = default.update(host.sample(B), step)
        torch.manual_seed(100 + step)
        got = fast.update(dev.sample_indices(B), step)
        assert want.keys() == got.keys()
        for k in want:
            assert torch.equal(want[k], got[k]), (step, k)
    same_state(default, graphed)
    assert graphed.check_finite() and fast.captures == 0  # no GPU here: nothing was captured


def test_a_replay_on_the_device_spelled_without_its_index_is_the_agents_device():
    # On a GPU the replay was made with device "cuda" and the agent's tensors are on "cuda:0": the check compared the
    # two spellings and refused every graphed update (seen on an H200, 2026-12-04). "cpu:0" against the agent's "cpu"
    # is the same case on this machine.
    rep = filled_replay(device="cpu:0")
    assert rep.device == torch.device("cpu") and rep.frames.device == rep.device
    agent = make_agent(aux="curl", tau_plus=0.0, positives=1)
    fast = GraphedUpdate(agent, rep, B)
    assert fast.update(rep.sample_indices(B), 0)


def test_the_graphed_action_is_the_agents_sampled_action_bit_for_bit():
    """GraphedAct (--cuda-graphs' training action) on its CPU path runs the pass a graph records: the same action as
    ``agent.act(obs, sample=True)`` bit for bit, its noise from the default generator, which both leave alike."""
    agent = make_agent(aux="curl", tau_plus=0.0, positives=1, update="official")
    graphed = GraphedAct(agent)
    rng = np.random.default_rng(4)
    for step in range(4):
        obs = rng.integers(0, 256, OBS, dtype=np.uint8)
        torch.manual_seed(200 + step)
        want = agent.act(obs, sample=True)
        after = torch.get_rng_state()
        torch.manual_seed(200 + step)
        got = graphed.act(obs)
        assert got.dtype == want.dtype == np.float32 and got.shape == want.shape == (agent.action_dim,)
        assert np.array_equal(got, want) and torch.equal(torch.get_rng_state(), after)
    assert graphed.captures == 0 and not graphed.graphed  # no GPU here: nothing was recorded
    with pytest.raises(ValueError, match=r"obs must be \[C, H, W\], got shape \(2, 9, 20, 20\)"):
        graphed.act(np.zeros((2, *OBS), dtype=np.uint8))
    # a GPU whose recording of the pass fails: a warning, then the same pass eagerly
    failing = GraphedAct(agent)
    failing.graphed = True

    def refuse(*a):
        raise RuntimeError("operation not permitted when stream is capturing")

    failing._capture = refuse
    for step in range(2):
        torch.manual_seed(300 + step)
        want = agent.act(obs, sample=True)
        torch.manual_seed(300 + step)
        with contextlib.nullcontext() if step else pytest.warns(RuntimeWarning, match="could not be recorded"):
            assert np.array_equal(failing.act(obs), want)
    assert not failing.graphed


@pytest.mark.parametrize("update", ["official", "fused"])
@pytest.mark.parametrize("aux,tau_plus,m", CASES)
def test_the_update_with_cudnn_conv_relu_is_the_default_update_bit_for_bit(aux, tau_plus, m, update):
    """--cudnn-conv-relu, eagerly and in the graphed update: on a CPU its forward is the default's and its backward is
    autograd's own for a convolution and a ReLU, so every metric, parameter and optimiser state is the same bits."""
    kw = dict(aux=aux, tau_plus=tau_plus, positives=m, update=update)
    default, eager, graphed = make_agent(**kw), make_agent(cudnn_conv_relu=True, **kw), \
        make_agent(cudnn_conv_relu=True, **kw)
    assert eager.critic.encoder.trunk.cudnn_relu and eager.critic_target.encoder.trunk.cudnn_relu
    host, host2, dev = filled_replay(), filled_replay(), filled_replay(device="cpu")
    fast = GraphedUpdate(graphed, dev, B)
    for step in range(4):  # with and without the actor and the targets
        torch.manual_seed(100 + step)
        want = default.update(host.sample(B), step)
        torch.manual_seed(100 + step)
        got_eager = eager.update(host2.sample(B), step)
        torch.manual_seed(100 + step)
        got_graphed = fast.update(dev.sample_indices(B), step)
        for got in (got_eager, got_graphed):
            assert want.keys() == got.keys()
            for k in want:
                assert torch.equal(want[k], got[k]), (step, k)
    same_state(default, eager)
    same_state(default, graphed)


@pytest.mark.parametrize("update", ["official", "fused"])
@pytest.mark.parametrize("aux", ["curl", "debiased", "hard"])
@pytest.mark.parametrize("conv_relu", [False, True])
def test_the_update_reads_no_value_on_the_host(aux, update, conv_relu):
    """On the meta device tensors have no values: any .item(), .tolist(), bool(t) or data-dependent shape in the
    update raises there. The Adam steps are left out (PyTorch's capturable Adam is its own)."""
    agent = make_agent(aux=aux, tau_plus=0.0 if aux == "curl" else 0.1, positives=2, update=update,
                       cudnn_conv_relu=conv_relu).to("meta")
    for opt in agent.optimizers().values():
        opt.step = lambda *a, **k: None
    rep = FrameReplay(40, OBS, 2, 3, device="meta")
    rep.enable_device_sampling()
    batch = rep.gather(torch.zeros(B, dtype=torch.int64, device="meta"))
    for step in range(2):
        metrics = agent.update(batch, step)
        assert all(v.device.type == "meta" for v in metrics.values())
    agent.host_checks = True  # the losses' own checks read values: the test can see a host read
    with pytest.raises((RuntimeError, NotImplementedError)):
        agent.update(batch, 0)


def test_a_snapshot_puts_agent_optimisers_and_generator_back_exactly():
    a, b = make_agent(aux="debiased", tau_plus=0.1), make_agent(aux="debiased", tau_plus=0.1)
    rep = filled_replay()
    batches = [rep.sample(B) for _ in range(4)]
    # a: one update, then a snapshot, three "warm-up" updates, restore; b: the one update. Then both the same update.
    for ag in (a, b):
        torch.manual_seed(5)
        ag.update(batches[0], 0)
    torch.manual_seed(9)
    snap = Snapshot(a)
    for step in range(1, 4):
        a.update(batches[step], step)
    snap.restore()
    torch.manual_seed(9)
    same_state(a, b)
    # a state that did not exist at the snapshot (Adam's, lazily made) is put back as a fresh Adam's
    c, d = make_agent(), make_agent()
    snap = Snapshot(c)
    c.update(batches[0], 0)
    snap.restore()
    assert all(c.critic_opt.state[p]["step"] == 0 for p in c.critic.parameters())
    for ag in (c, d):
        torch.manual_seed(3)
        ag.update(batches[1], 0)
    same_state(c, d)
    assert torch.equal(torch.get_rng_state(), copy.deepcopy(torch.get_rng_state()))


# ----------------------------------------------------------------------------------------------- whole runs

BASE = dict(task="cartpole-swingup", action_repeat=50, seed_steps=5, eval_every=500, log_every=100)


def rows(path):
    return list(csv.DictReader(open(path)))


def checkpoint_state(out):
    return torch.load(out / "checkpoint" / "custom_checkpoint_0.pkl", weights_only=False)


@pytest.mark.slow  # four tiny runs (about 40 s)
def test_a_run_with_cuda_graphs_is_the_default_run_and_resumes_exactly(tmp_path):
    run(tiny_config(output_dir=str(tmp_path / "default"), env_steps=2000, checkpoint_every=1000, **BASE))
    fast = dict(cuda_graphs=True, replay_on_device=True)
    run(tiny_config(output_dir=str(tmp_path / "graphed"), env_steps=2000, checkpoint_every=1000, **BASE, **fast))
    for name in ("log.csv", "eval.csv"):
        assert rows(tmp_path / "default" / name) == rows(tmp_path / "graphed" / name), name
    a, b = checkpoint_state(tmp_path / "default"), checkpoint_state(tmp_path / "graphed")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # stopped after one episode and resumed (the flag is free to change on resume): the same run again
    run(tiny_config(output_dir=str(tmp_path / "part"), env_steps=1000, checkpoint_every=1000, **BASE, **fast))
    run(tiny_config(output_dir=str(tmp_path / "part"), env_steps=2000, checkpoint_every=1000, resume=True,
                    cudnn_conv_relu=True, **BASE))  # --cudnn-conv-relu is free to change on resume too
    assert rows(tmp_path / "default" / "log.csv") == rows(tmp_path / "part" / "log.csv")
    returns = lambda out: [(r["env_step"], r["eval_return_mean"]) for r in rows(out / "eval.csv")]  # noqa: E731
    assert returns(tmp_path / "default") == returns(tmp_path / "part")  # (the episode column of a run's end differs)
    c = checkpoint_state(tmp_path / "part")
    assert all(torch.equal(a[k], c[k]) for k in a)


def test_cuda_graphs_need_the_replay_on_the_device(tmp_path):
    with pytest.raises(ValueError, match="--cuda-graphs gathers each batch inside the graph.*--replay-on-device"):
        run(tiny_config(output_dir=str(tmp_path / "r"), env_steps=200, cuda_graphs=True, **BASE))
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("fast", [False, True])
def test_divergence_stops_the_run_naming_the_steps_and_keeps_the_last_checkpoint(tmp_path, fast):
    """Issue 46 item 12: learning rates of 1e30. The first episode (1000 environment steps) is all seed steps, so a
    checkpoint is written at 1000; the first update, at 1250, diverges; the next log row (1300) sees it."""
    out = tmp_path / "r"
    extra = dict(cuda_graphs=True, replay_on_device=True) if fast else {}
    cfg = tiny_config(output_dir=str(out), env_steps=3000, checkpoint_every=1000, lr=1e30, encoder_lr=1e30,
                      **{**BASE, "seed_steps": 25}, **extra)
    with pytest.raises(TrainingDiverged, match=r"a loss became NaN or infinite between environment steps 1000 and "
                                               r"1300 \(--lr 1e\+30, --encoder-lr 1e\+30.*its last checkpoint, at "
                                               r"environment step 1000, is kept: lower the learning rates and start "
                                               r"again, or --resume continues from there\)$"):
        run(cfg)
    assert (out / "checkpoint" / "COMPLETE").exists() and not (out / "summary.json").exists()
    assert torch.load(out / "checkpoint" / "extra.pt", weights_only=False)["step"] == 20  # agent steps: 1000 env
    if not fast:  # before any checkpoint: it said "start again or --resume", with nothing to resume
        with pytest.raises(TrainingDiverged, match=r"\(it has no checkpoint yet: lower the learning rates and start "
                                                   r"again \(--overwrite moves this folder aside\)\)$"):
            run(dataclasses.replace(cfg, output_dir=str(tmp_path / "early"), checkpoint_every=5000))


def test_a_device_ring_grows_as_frames_arrive_and_samples_as_the_full_one(monkeypatch):
    monkeypatch.setattr(FrameReplay, "DEVICE_RING_START", 8)
    host, dev = filled_replay(), filled_replay(device="cpu")  # 60 transitions in 3 episodes: 69 frames, ring of 50
    assert dev.frames.shape[0] == dev.frame_capacity == 50 and dev.generation == 3  # 8 -> 16 -> 32 -> 50
    dev.enable_device_sampling()
    for _ in range(3):
        want, got = host.sample(B), dev.gather(torch.from_numpy(dev.sample_indices(B)))
        assert all(torch.equal(want[k], got[k]) for k in want)
    small = filled_replay(device="cpu", n=5)
    assert small.frames.shape[0] == 8 and small.generation == 0  # 8 frames written: the first allocation
    loaded = FrameReplay(40, OBS, 2, 3, seed=7, device="cpu")
    loaded.load_state_dict(host.state_dict())
    assert loaded.frames.shape[0] == 50 and torch.equal(loaded.frames, torch.from_numpy(host.frames))


@pytest.mark.slow  # three tiny runs with evaluations (about 40 s)
def test_evaluation_in_the_background_gives_the_same_run(tmp_path):
    """--eval-async: the same eval.csv and training as evaluating in turn, in this process or in workers; a
    checkpoint waits for the evaluation still running, so every checkpoint has eval.csv up to its step."""
    kw = dict(env_steps=2000, checkpoint_every=0, eval_episodes=2, **BASE)
    run(tiny_config(output_dir=str(tmp_path / "sync"), **kw))
    summary = run(tiny_config(output_dir=str(tmp_path / "async"), eval_async=True, **kw))
    run(tiny_config(output_dir=str(tmp_path / "workers"), eval_async=True, eval_parallel=True, **kw))
    for name in ("async", "workers"):
        assert rows(tmp_path / "sync" / "eval.csv") == rows(tmp_path / name / "eval.csv"), name
        assert rows(tmp_path / "sync" / "log.csv") == rows(tmp_path / name / "log.csv"), name
    assert [r["env_step"] for r in rows(tmp_path / "async" / "eval.csv")] == ["500", "1000", "1500", "2000"]
    assert summary["time_seconds"]["eval_background"] > 0
    a, b = checkpoint_state(tmp_path / "sync"), checkpoint_state(tmp_path / "async")
    assert all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow  # three tiny runs with evaluations (about 40 s)
def test_an_evaluation_at_the_start_adds_a_row_at_step_0_and_changes_no_training(tmp_path):
    """--eval-at-start (the official code's evaluation at step 0): eval.csv gains a row at env_step 0, in turn and in
    the background alike, with the untrained policy kept (--keep-policies); every other row, log.csv and the trained
    weights are the run's without it."""
    kw = dict(env_steps=1500, checkpoint_every=0, eval_episodes=2, **BASE)
    run(tiny_config(output_dir=str(tmp_path / "plain"), **kw))
    for name, extra in (("start", {}), ("start_async", {"eval_async": True})):
        run(tiny_config(output_dir=str(tmp_path / name), eval_at_start=True, keep_policies=True, **extra, **kw))
        first, *rest = rows(tmp_path / name / "eval.csv")
        assert (first["env_step"], first["episode"]) == ("0", "0"), name
        assert rest == rows(tmp_path / "plain" / "eval.csv"), name
        assert rows(tmp_path / name / "log.csv") == rows(tmp_path / "plain" / "log.csv"), name
        a, b = checkpoint_state(tmp_path / "plain"), checkpoint_state(tmp_path / name)
        assert all(torch.equal(a[k], b[k]) for k in a), name
        assert (tmp_path / name / "policies" / "env_step_0.pt").is_file(), name
    assert rows(tmp_path / "start" / "eval.csv") == rows(tmp_path / "start_async" / "eval.csv")


@pytest.mark.slow  # two tiny runs with evaluations, one stopped and resumed (about 30 s)
def test_a_stop_during_a_background_evaluation_checkpoints_it_and_resumes_exactly(tmp_path, monkeypatch, capsys):
    """Ctrl-C while an --eval-async evaluation runs (the one at 500 steps, during the first episode): the run stops at
    the episode's end with both evaluations (500 and 1000) in eval.csv and in its checkpoint, and resumes to the same
    logs and agent as a run that was never stopped."""
    from rl_curl.agent import CurlAgent

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call

    kw = dict(env_steps=2000, checkpoint_every=1000, eval_episodes=2, **BASE)
    run(tiny_config(output_dir=str(tmp_path / "straight"), **kw))
    interrupt_on_call(monkeypatch, CurlAgent, "update", at=8)  # step 12 of 20: the evaluation at step 10 is running
    check_interrupt_exits_130(capsys, lambda: run(tiny_config(output_dir=str(tmp_path / "cut"), eval_async=True, **kw)),
                              "environment step 1000")
    assert [r["env_step"] for r in rows(tmp_path / "cut" / "eval.csv")] == ["500", "1000"]
    monkeypatch.undo()
    run(tiny_config(output_dir=str(tmp_path / "cut"), eval_async=True, resume=True, **kw))
    for name in ("eval.csv", "log.csv"):
        assert rows(tmp_path / "straight" / name) == rows(tmp_path / "cut" / name), name
    a, b = checkpoint_state(tmp_path / "straight"), checkpoint_state(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_background_evaluation_that_fails_raises_when_it_is_collected():
    from rl_curl.train import EvalThread

    def broken():
        raise RuntimeError("the environment broke")

    thread = EvalThread()
    job = thread.submit(broken, 500, 0)
    with pytest.raises(RuntimeError, match="the environment broke"):
        job.result()
    assert thread.submit(lambda: [1.0, 2.0]).result() == [1.0, 2.0]  # the thread goes on
    thread.close()
