"""rl_curl --aux cpc (issue 44): the replay's sequences (the next K observations and actions of a transition, absent
past the episode's end), the agent's CPC loss against cpc_nce on inputs built by hand, a run that trains and resumes
exactly, and the options that cannot apply."""

import csv

import numpy as np
import pytest
import torch

import shared_losses as S
from rl_curl.agent import CurlAgent
from rl_curl.replay import FrameReplay
from rl_curl.train import run

from .conftest import tiny_config
from .test_replay import C, H, K, fill
from .test_train import BASE, agent_state


@pytest.mark.parametrize("capacity", [200, 13])  # 13: the transitions wrap around the ring
@pytest.mark.parametrize("device", [None, "cpu"])
def test_futures_are_the_next_observations_and_actions_within_the_episode(capacity, device):
    replay = FrameReplay(capacity, (K * C, H, H), 2, frame_stack=K, seed=0, device=device)
    lengths = [5, 1, 7, 4]
    ref = fill(replay, lengths, np.random.default_rng(0))
    episode = np.repeat(np.arange(len(lengths)), lengths)
    n = len(replay)
    steps = 3
    for back in range(1, n + 1):
        j = len(ref) - back  # the transition's place in ref
        idx = np.array([(replay.added - back) % replay.capacity])
        fut = replay.futures(idx, steps)
        obs = np.asarray(fut["future_obs"])[0]
        for m in range(steps):
            here = j + m < len(ref) and episode[j + m] == episode[j]
            assert bool(np.asarray(fut["future_valid"])[0, m]) == here, (back, m)
            if here:
                assert np.array_equal(obs[m], ref[j + m][3])  # the observation after m + 1 steps: next_obs of j + m
                assert np.allclose(fut["future_action"][0, m], ref[j + m][1])
            else:
                assert not np.any(fut["future_action"][0, m])
    state = replay.rng.bit_generator.state
    replay.sample(4, "cpu", future=steps)
    again = FrameReplay(capacity, (K * C, H, H), 2, frame_stack=K, seed=0, device=device)
    fill(again, lengths, np.random.default_rng(0))
    again.rng.bit_generator.state = state
    replay.rng.bit_generator.state = state
    a, b = replay.sample(4, "cpu", future=steps), again.sample(4, "cpu")  # futures draw nothing: the same batch
    assert torch.equal(a["obs"], b["obs"]) and a["future_obs"].shape == (4, steps, K * C, H, H)


def test_cpc_loss_is_cpc_nce_on_the_present_and_future_keys():
    torch.manual_seed(0)
    cfg = tiny_config(aux="cpc", cpc_steps=2, tau_plus=0.1).resolved()
    agent = CurlAgent(cfg.obs_shape, 2, cfg).double()
    B, Kc = 4, 2
    obs = torch.rand(B, *cfg.obs_shape[:1], cfg.crop_size, cfg.crop_size, dtype=torch.float64)
    now = torch.rand_like(obs)
    nxt = torch.rand(B * Kc, *obs.shape[1:], dtype=torch.float64)
    actions = torch.rand(B, Kc, 2, dtype=torch.float64) * 2 - 1
    valid = torch.tensor([[True, True], [True, False], [True, True], [True, False]])
    h = agent.critic.encoder.trunk(obs)
    got = agent.cpc_loss_from(h, [now, nxt], actions, valid)
    z_a = agent.critic.encoder.head(h)
    with torch.no_grad():
        lat = torch.cat([agent.critic_target.encoder(now).unsqueeze(1),
                         agent.critic_target.encoder(nxt).view(B, Kc, -1)], 1)
    c1 = agent.cpc_context(actions[:, 0], z_a)
    c2 = agent.cpc_context(actions[:, 1], c1)
    W = agent.cpc.predictors.weight.view(Kc, 8, 8)  # row block k is W_{k+1} (feature_dim 8)
    pred = torch.stack([c1 @ W[0].T, c2 @ W[1].T], 1).unsqueeze(1)  # W_k c_{t,k}
    mask = torch.cat([torch.ones(B, 1, dtype=torch.bool), valid], 1)
    want = S.cpc_nce(lat, pred, mask, tau_plus=0.1, log_floor="auto")
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    got.backward()
    assert agent.cpc.predictors.weight.grad.abs().sum() > 0 and agent.cpc_context.weight_ih.grad.abs().sum() > 0
    assert all(p.grad is None for p in agent.critic_target.parameters())


def test_cpc_run_trains_and_resumes_exactly(tmp_path):
    kw = dict(BASE, aux="cpc", cpc_steps=2, checkpoint_every=1000)
    run(tiny_config(output_dir=str(tmp_path / "full"), env_steps=2000, **kw))
    run(tiny_config(output_dir=str(tmp_path / "part"), env_steps=1000, **kw))
    run(tiny_config(output_dir=str(tmp_path / "part"), env_steps=2000, resume=True, **kw))
    a, b = agent_state(tmp_path / "full"), agent_state(tmp_path / "part")
    assert any(k.startswith("cpc.") for k in a) and any(k.startswith("cpc_context.") for k in a)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    log = list(csv.DictReader(open(tmp_path / "full" / "log.csv")))
    losses = [float(r["aux_loss"]) for r in log if r.get("aux_loss")]
    assert losses and all(np.isfinite(losses))


@pytest.mark.parametrize("kw,message", [
    (dict(cpc_steps=5), "--cpc-steps 5 only applies to --aux cpc"),
    (dict(aux="cpc", cpc_steps=0), "cpc_steps must be >= 1"),
    (dict(aux="cpc", positives=2), "--positives 2 only applies to --aux curl or debiased or hard"),
    (dict(aux="cpc", update="fused"), "--aux cpc has the official update only"),
    (dict(aux="cpc", cuda_graphs=True, replay_on_device=True), "not available with --cuda-graphs"),
    # steps that can never have a target: beyond an episode's agent steps, or the replay's capacity
    (dict(aux="cpc", cpc_steps=125), r"--cpc-steps 125: an episode of cartpole-swingup at action repeat 8 has 125 "
                                     r"agent steps .* at most 124 steps ahead"),
    (dict(aux="cpc", task="walker-walk", cpc_steps=500, replay_capacity=2000), "repeat 2 has 500 agent steps"),
    (dict(aux="cpc", action_repeat=1000), "is one agent step .* no observation has a future to predict"),
    (dict(aux="cpc", cpc_steps=100, replay_capacity=100), "--cpc-steps 100 must be below --replay-capacity 100"),
])
def test_cpc_settings_that_cannot_apply_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        tiny_config(**kw).resolved()


def test_help_and_spec_list_cpc():
    from rl_curl import objectives as O

    assert "cpc:TAU_PLUS" in O.spec_syntax() and O.parse_spec("cpc:0.05") == {"aux": "cpc", "tau_plus": 0.05}
    assert O.folder_name("cpc", 0.0) == "cpc-tau0" and O.label({"aux": "cpc", "tau_plus": 0.0, "positives": 1}) \
        == "CPC τ⁺=0"


def test_settings_that_change_a_run_change_its_folder_and_its_row():
    # CPC's K and the debiased losses' floor were left out of the default folder and of the table's row: two runs
    # that differ only there shared a folder name and would be averaged in one cell
    from rl_curl import objectives as O
    from rl_curl.config import Config

    k5 = Config(aux="cpc", tau_plus=0.05, cpc_steps=5).resolved()
    k3 = Config(aux="cpc", tau_plus=0.05).resolved()
    assert k5.output_dir != k3.output_dir and "cpc-tau0.05-K5" in k5.output_dir and "cpc-tau0.05/" in k3.output_dir
    assert O.label({"aux": "cpc", "tau_plus": 0.05, "cpc_steps": 5}) == "CPC τ⁺=0.05, K=5"
    assert O.label({"aux": "cpc", "tau_plus": 0.05, "cpc_steps": 3}) == "CPC τ⁺=0.05"
    floor = dict(aux="debiased", tau_plus=0.1, positives=1)
    assert O.folder_name(**floor, log_floor="none") == "debiased-tau0.1-nofloor"
    assert O.folder_name(**floor) == "debiased-tau0.1"
    assert O.label({**floor, "log_floor": "none"}) == "debiased τ⁺=0.1, M=1, no floor"
    assert O.label({**floor, "log_floor": "min-negative"}) == "debiased τ⁺=0.1, M=1"
