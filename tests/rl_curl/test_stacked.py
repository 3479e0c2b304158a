"""K runs' updates as one (rl_curl.stacked): each run's update equals its agent's own update on the same batch and the
same random draws (float64, objectives mixed, M = 1 and 2, with and without an auxiliary loss, from fresh agents and
from agents that have trained), a bad value stays in its run, and what cannot be stacked is refused by name."""

import copy

import numpy as np
import pytest
import torch

from rl_curl.agent import CurlAgent
from rl_curl.stacked import StackedAgents

from .conftest import tiny_config
from .test_agent import OBS, batch

STEPS = 5  # the actor and targets every second step, the aux loss every step


def make(dtype=torch.float64, **kw):
    torch.manual_seed(kw.pop("init", 0))
    agent = CurlAgent(OBS, 2, tiny_config(**kw).resolved()).to(dtype)
    agent.make_optimizers()
    return agent


def singles_step(agents, batches, step, seeds):
    out = []
    for a, b, s in zip(agents, batches, seeds):
        torch.manual_seed(s)  # the single update draws from the default generator
        out.append(a.update(b, step))
    return out


def stacked_step(stacked, batches, step, seeds):
    return stacked.update(batches, step, [torch.Generator().manual_seed(s) for s in seeds])


def rel(a, b):
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300)) if b.norm() > 0 else float((a - b).norm())


def assert_same_agents(got: CurlAgent, want: CurlAgent, tol: float) -> None:
    sg, sw = got.state_dict(), want.state_dict()
    assert sg.keys() == sw.keys()
    for k in sw:
        assert rel(sg[k], sw[k]) <= tol, k
    for (name, og), ow in zip(got.optimizers().items(), want.optimizers().values()):
        pg = [p for g in og.param_groups for p in g["params"]]
        pw = [p for g in ow.param_groups for p in g["params"]]
        for i, (p, q) in enumerate(zip(pg, pw, strict=True)):
            assert og.state.get(p, {}).keys() == ow.state.get(q, {}).keys(), (name, i)
            for key, v in ow.state.get(q, {}).items():
                assert rel(og.state[p][key], v) <= tol, (name, i, key)


def run_both(specs, steps=STEPS, dtype=torch.float64, pretrain=0):
    agents = [make(dtype, **s) for s in specs]
    for i in range(pretrain):  # agents that have trained (Adam state, moved targets) before they are stacked
        singles_step(agents, [batch(seed=900 + k) for k in range(len(agents))], i, [50 + k for k in range(len(agents))])
    singles = [copy.deepcopy(a) for a in agents]  # parameters and optimiser states copied together
    stacked = StackedAgents(agents)
    metrics = []
    for step in range(pretrain, pretrain + steps):
        batches = [batch(seed=10 * step + k) for k in range(len(specs))]
        seeds = [100 + 7 * step + k for k in range(len(specs))]
        want = singles_step(singles, batches, step, seeds)
        got = stacked_step(stacked, batches, step, seeds)
        metrics.append((got, want))
    return stacked, singles, metrics


MIXES = {
    "objectives M=1": [dict(aux="curl", init=0), dict(aux="debiased", tau_plus=0.05, init=1),
                       dict(aux="hard", tau_plus=0.1, beta=0.5, init=2)],
    "debiased M=2": [dict(aux="debiased", tau_plus=0.01, positives=2, init=3),
                     dict(aux="debiased", tau_plus=0.1, positives=2, init=4)],
    "no aux": [dict(aux="none", init=5), dict(aux="none", init=6), dict(aux="none", init=7)],
    "one run": [dict(aux="curl", init=8)],
}


@pytest.mark.parametrize("mix", list(MIXES))
def test_each_run_equals_its_own_update(mix):
    stacked, singles, metrics = run_both(MIXES[mix])
    for got, want in metrics:
        for k, w in enumerate(want):
            assert set(got) == set(w)
            for key, v in w.items():
                assert got[key].shape == (len(want),)
                assert rel(got[key][k], v) <= 1e-12, (key, k)
    agents = stacked.to_agents()
    for a, s in zip(agents, singles):
        assert_same_agents(a, s, 1e-12)
    assert stacked.check_finite() == [True] * len(singles)


def test_agents_that_have_trained_continue_as_they_would_alone():
    stacked, singles, metrics = run_both(MIXES["objectives M=1"], steps=3, pretrain=3)
    for got, want in metrics:
        for k, w in enumerate(want):
            for key, v in w.items():
                assert rel(got[key][k], v) <= 1e-12, (key, k)
    for a, s in zip(stacked.to_agents(), singles):
        assert_same_agents(a, s, 1e-12)


def test_float32_within_rounding():
    stacked, singles, _ = run_both(MIXES["objectives M=1"], steps=3, dtype=torch.float32)
    for a, s in zip(stacked.to_agents(), singles):
        assert_same_agents(a, s, 1e-4)  # the GPU self-test's float32 tolerance


def test_a_bad_value_stays_in_its_run():
    specs = MIXES["objectives M=1"]
    agents = [make(**s) for s in specs]
    singles = [copy.deepcopy(a) for a in agents]
    for a in singles:
        a.make_optimizers()
    stacked = StackedAgents(agents)
    batches = [batch(seed=k) for k in range(3)]
    batches[1]["reward"] = torch.full_like(batches[1]["reward"], float("nan"))
    seeds = [1, 2, 3]
    stacked_step(stacked, batches, 0, seeds)
    singles_step(singles, batches, 0, seeds)
    assert stacked.check_finite() == [True, False, True]
    agents = stacked.to_agents()
    for k in (0, 2):
        assert_same_agents(agents[k], singles[k], 1e-12)
    assert not agents[1].check_finite() and agents[0].check_finite()


def test_default_generators_and_shapes():
    stacked = StackedAgents([make(torch.float32, init=k) for k in range(2)])
    m = stacked.update([batch(seed=k) for k in range(2)], 0)
    assert all(v.shape == (2,) and torch.isfinite(v).all() for v in m.values())
    with pytest.raises(ValueError, match="3 batches for 2 stacked runs"):
        stacked.update([batch()] * 3, 1)
    with pytest.raises(ValueError, match="1 generators for 2 stacked runs"):
        stacked.update([batch()] * 2, 1, [torch.Generator()])


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-12), (torch.float32, 1e-6)])
def test_acting_for_every_run_is_each_agents_own_act(dtype, tol):
    """StackedAgents.act (rl_curl.together's acting): run k's row is its agent's act(obs, sample=True) with the same
    generator (the noise drawn as the agent draws it), before any update and after stacked updates; the generators
    advance as the agents' would."""
    from rl_curl.stacked import GraphedStackedAct

    specs = MIXES["objectives M=1"]
    stacked = StackedAgents([make(dtype, **s) for s in specs])
    graphed = GraphedStackedAct(stacked)  # what --cuda-graphs acts with: on a CPU the same code, eagerly
    rng = np.random.default_rng(0)
    for step in range(3):
        obs = [rng.integers(0, 256, OBS, dtype=np.uint8) for _ in specs]
        gens = [torch.Generator().manual_seed(40 + 3 * step + k) for k in range(len(specs))]
        alike = [torch.Generator().manual_seed(40 + 3 * step + k) for k in range(len(specs))]
        again = [torch.Generator().manual_seed(40 + 3 * step + k) for k in range(len(specs))]
        got = stacked.act(obs, gens)
        assert np.array_equal(graphed.act(obs, again), got)
        assert all(torch.equal(a.get_state(), g.get_state()) for a, g in zip(again, gens))
        agents = stacked.to_agents(states=False)
        assert got.shape == (len(specs), 2) and got.dtype == np.float32
        for k, a in enumerate(agents):
            want = a.act(obs[k], sample=True, generator=alike[k])
            assert np.abs(got[k] - want).max() <= tol * max(1.0, np.abs(want).max()), (step, k)
            assert torch.equal(gens[k].get_state(), alike[k].get_state())
        assert not np.allclose(got[0], got[1])  # the runs act with their own parameters and noise
        stacked_step(stacked, [batch(seed=5 * step + k) for k in range(len(specs))], step, [7 + step + k
                                                                                          for k in range(len(specs))])
    with pytest.raises(ValueError, match="2 observations and 3 generators for 3 stacked runs"):
        stacked.act(obs[:2], gens)
    with pytest.raises(ValueError, match="2 observations and 3 generators for 3 stacked runs"):
        graphed.act(obs[:2], gens)
    # a GPU whose capture of the pass fails: a warning, then the same pass eagerly (the draws already made are used)
    failing = GraphedStackedAct(stacked)
    failing.graphed = True

    def refuse(*a):
        raise RuntimeError("operation not permitted when stream is capturing")

    failing._capture = refuse
    def seeded(base):
        return [torch.Generator().manual_seed(base + k) for k in range(len(specs))]

    with pytest.warns(RuntimeWarning, match="could not be recorded as a CUDA graph"):
        assert np.array_equal(failing.act(obs, seeded(90)), stacked.act(obs, seeded(90)))
    assert not failing.graphed and np.array_equal(failing.act(obs, seeded(95)), stacked.act(obs, seeded(95)))
    with pytest.raises(ValueError, match=r"must be \[C, H, W\]"):
        stacked.act([o[None] for o in obs], gens)


@pytest.mark.parametrize("other,match", [
    (dict(lr=3e-3), "differs from run 0 in lr"),
    (dict(positives=2), "differs from run 0 in positives"),
    (dict(batch_size=4), "differs from run 0 in batch_size"),
    (dict(aux="none"), "either every run has an auxiliary loss or none has"),
    (dict(update="fused"), "--update fused is not supported"),
    (dict(aux="cpc"), "CPC"),
    (dict(cudnn_conv_relu=True), "--cudnn-conv-relu is not supported"),
])
def test_what_cannot_be_stacked_is_refused(other, match):
    with pytest.raises(ValueError, match=match):
        StackedAgents([make(torch.float32), make(torch.float32, init=1, **other)])


def test_refusals_of_state():
    with pytest.raises(ValueError, match="at least one agent"):
        StackedAgents([])
    a, b = make(torch.float32), make(torch.float32, init=1)
    b.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="without autocast"):
        StackedAgents([a, b])
    b = make(torch.float32, init=1)
    torch.manual_seed(0)
    b.update(batch(), 0)  # b has taken Adam steps, a has not
    with pytest.raises(ValueError, match="some runs have taken Adam steps and others not"):
        StackedAgents([a, b])
    a.update(batch(), 0)
    a.update(batch(seed=1), 1)  # a is one update further than b
    with pytest.raises(ValueError, match="different Adam steps"):
        StackedAgents([a, b])
    with pytest.raises(ValueError, match="other shape"):
        StackedAgents([make(torch.float32), CurlAgent(OBS, 3, tiny_config().resolved())])


def stacked_state(st):
    return ([t.detach().clone() for t in st.params.values()],
            [{k: v.clone() for k, v in s.items()} for o in st.opts.values() for s in o.state.values()])


@pytest.mark.parametrize("per_run", [False, True], ids=["default generator", "a generator per run"])
def test_graphed_stacked_update_on_the_cpu_is_the_stacked_update(per_run):
    """What a GPU captures (rl_curl.stacked.GraphedStackedUpdate): the batches gathered from each run's replay by the
    index tensor, the draws made before it (from the default generator, or each run's own) into the tensors it reads;
    eager here, equal to StackedAgents.update bit for bit."""
    from rl_curl.stacked import GraphedStackedUpdate

    from .test_graphs import filled_replay

    specs = MIXES["objectives M=1"]
    reps = [filled_replay(device="cpu", seed=k) for k in range(2)]
    replays = [reps[0], reps[1], reps[0]]  # one replay may serve two runs
    plain = StackedAgents([make(torch.float32, **s) for s in specs])
    graphed_runs = StackedAgents([make(torch.float32, **s) for s in specs])
    fast = GraphedStackedUpdate(graphed_runs, replays, 8)
    assert graphed_runs.host_checks is False and not fast.graphed
    for step in range(4):
        idx = [r.sample_indices(8) for r in replays]
        gens = (lambda: [torch.Generator().manual_seed(10 * step + k) for k in range(3)]) if per_run else (lambda: None)
        torch.manual_seed(step)
        want = plain.update([r.gather(torch.from_numpy(i)) for r, i in zip(replays, idx)], step, gens())
        torch.manual_seed(step)
        got = fast.update(np.stack(idx), step, gens())
        assert got.keys() == want.keys()
        for k in want:
            assert torch.equal(got[k], want[k]), k
    for a, b in zip(stacked_state(graphed_runs)[0], stacked_state(plain)[0]):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="2 replays for 3 stacked runs"):
        GraphedStackedUpdate(plain, reps, 8)
    with pytest.raises(ValueError, match="--replay-on-device"):
        GraphedStackedUpdate(plain, [filled_replay()] * 3, 8)


def test_stacked_snapshot_restores_exactly():
    from rl_curl.stacked import StackedSnapshot

    st = StackedAgents([make(torch.float32, init=k) for k in range(2)])
    snap = StackedSnapshot(st)  # before any Adam state exists
    before = stacked_state(st)[0]
    rng = torch.get_rng_state()
    st.update([batch(seed=k) for k in range(2)], 0)
    snap.restore()
    for a, b in zip(stacked_state(st)[0], before):
        assert torch.equal(a, b)
    for o in st.opts.values():  # the state made since is a fresh Adam's
        for s in o.state.values():
            assert all(float(v.abs().sum()) == 0 for v in s.values())
    assert torch.equal(torch.get_rng_state(), rng)
