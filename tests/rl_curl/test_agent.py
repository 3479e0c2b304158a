import copy

import pytest
import torch
import torch.nn.functional as F

from rl_curl.agent import CurlAgent, auxiliary_loss, contrastive_logits
from rl_curl.networks import ScaledPixels
from shared_losses import BilinearScore

from .conftest import tiny_config

OBS = (9, 20, 20)


def batch(B=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"obs": torch.randint(0, 256, (B, *OBS), dtype=torch.uint8, generator=g),
            "next_obs": torch.randint(0, 256, (B, *OBS), dtype=torch.uint8, generator=g),
            "action": torch.rand(B, 2, generator=g) * 2 - 1, "reward": torch.rand(B, 1, generator=g),
            # some terminal transitions (the fused update's target once ignored not_done unseen: every row was 1)
            "not_done": (torch.arange(B) % 3 != 2).float().unsqueeze(1)}


def agent(**kw):
    torch.manual_seed(0)
    return CurlAgent(OBS, 2, tiny_config(**kw).resolved())


CASES = [("curl", 0.0, 1), ("curl", 0.0, 2), ("debiased", 0.05, 1), ("debiased", 0.1, 2),
         ("hard", 0.1, 1), ("hard", 0.05, 2), ("none", 0.0, 1)]


@pytest.mark.parametrize("aux,tau_plus,m", CASES)
def test_update_runs_for_every_aux_loss(aux, tau_plus, m):
    ag = agent(aux=aux, tau_plus=tau_plus, positives=m)
    before = copy.deepcopy(ag.state_dict())
    for step in range(2):
        metrics = ag.update(batch(), step)
    assert all(torch.isfinite(v) for v in metrics.values())
    assert ("aux_loss" in metrics) == (aux != "none")
    changed = {k for k, v in ag.state_dict().items() if not torch.equal(v, before[k])}
    assert any(k.startswith("critic_target.encoder") for k in changed)  # momentum encoder moved
    assert "log_alpha" in changed and any(k.startswith("actor.trunk") for k in changed)
    assert ("score.W" in changed) == (aux != "none")


@pytest.mark.parametrize("update", ["official", "fused"])
@pytest.mark.parametrize("aux", ["curl", "none"])
def test_update_reports_the_batchs_mean_reward(update, aux):
    """metrics["batch_reward"]: the mean reward of the update's batch (the official code's train/batch_reward, which
    scripts/check_official_curl.py compares too), on every step of both schedules."""
    ag = agent(aux=aux, update=update)
    for step in range(3):
        b = batch(seed=step)
        b["reward"] = torch.linspace(-1.0, 2.0 + step, len(b["reward"])).unsqueeze(1)
        metrics = ag.update(b, step)
        assert metrics["batch_reward"].shape == ()
        assert float(metrics["batch_reward"]) == pytest.approx((1.0 + step) / 2, rel=1e-6)


@pytest.mark.parametrize("aux,tau_plus,m", [c for c in CASES if c[0] != "none"])
def test_aux_loss_decreases_on_a_fixed_batch(aux, tau_plus, m):
    ag = agent(aux=aux, tau_plus=tau_plus, positives=m, encoder_lr=3e-3)
    b = batch(B=16)
    torch.manual_seed(1)
    anchor = b["obs"][:, :, 2:18, 2:18]
    keys = [b["obs"][:, :, 1:17, 3:19], b["obs"][:, :, 3:19, 1:17]][:m]
    losses = []
    for _ in range(30):
        h = ag.critic.encoder.trunk(anchor)
        losses.append(ag.update_aux(h, keys)["aux_loss"].item())
    assert losses[-1] < 0.8 * losses[0], losses


def logits(B=6, M=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    score = BilinearScore(5)
    with torch.no_grad():
        score.W.copy_(torch.randn(5, 5, generator=g) * 3)
    z_a = torch.randn(B, 5, generator=g, requires_grad=True)
    z_k = [torch.randn(B, 5, generator=g) for _ in range(M)]
    return score, z_a, z_k


@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("floor", ["min-negative", "none"])
def test_debiased_with_tau_plus_zero_equals_curl(m, floor):
    score, z_a, z_k = logits(M=m)
    grads = []
    for aux in ("curl", "debiased", "hard"):
        z_a.grad, score.W.grad = None, None
        pos, neg = contrastive_logits(z_a, z_k, score)
        kw = {"beta": 0.0} if aux == "hard" else {}
        loss = auxiliary_loss(pos, neg, aux, tau_plus=0.0, log_floor=floor, **kw)
        loss.backward()
        grads.append((loss.detach(), z_a.grad.clone(), score.W.grad.clone()))
    for other in grads[1:]:
        for x, y in zip(grads[0], other):
            torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-6)


def test_curl_equals_official_cross_entropy_form():
    score, z_a, z_k = logits(B=7)
    pos, neg = contrastive_logits(z_a, z_k, score)
    ours = auxiliary_loss(pos, neg, "curl")
    full = z_a @ score.W @ z_k[0].T
    official = F.cross_entropy(full - full.max(1, keepdim=True).values, torch.arange(7))
    torch.testing.assert_close(ours, official, rtol=1e-6, atol=1e-6)


def test_m2_layout_positives_and_negatives():
    score, z_a, z_k = logits(B=4, M=2)
    pos, neg = contrastive_logits(z_a, z_k, score, subtract_row_max=False)
    assert pos.shape == (4, 2) and neg.shape == (4, 8)
    assert (torch.isinf(neg).sum(1) == 2).all()  # own two keys are not negatives: N = 2 (B - 1)
    for m in range(2):
        torch.testing.assert_close(pos[:, m], (z_a @ score.W @ z_k[m].T).diagonal())
        torch.testing.assert_close(neg[:, 4 * m:4 * m + 4], (z_a @ score.W @ z_k[m].T).fill_diagonal_(-torch.inf))


def test_row_max_shift_leaves_debiased_loss_unchanged():
    score, z_a, z_k = logits(B=6, M=2)
    for aux in ("debiased", "hard"):
        a = auxiliary_loss(*contrastive_logits(z_a, z_k, score, True), aux, tau_plus=0.1)
        b = auxiliary_loss(*contrastive_logits(z_a, z_k, score, False), aux, tau_plus=0.1)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_min_negative_floor_binds_when_debiasing_overshoots():
    # Positives far larger than negatives with a big tau_plus: the estimator goes negative, so g is
    # the floor e^{min negative logit} and loss_i = -log(e^p / (e^p + N e^{min q})).
    pos = torch.tensor([[5.0], [4.0]])
    neg = torch.tensor([[0.0, -1.0, -2.0], [1.0, 0.5, float("-inf")]])
    loss = auxiliary_loss(pos, neg, "debiased", tau_plus=0.5, log_floor="min-negative")
    expected = torch.stack([-(5 - torch.logaddexp(torch.tensor(5.0), torch.log(torch.tensor(3.0)) - 2)),
                            -(4 - torch.logaddexp(torch.tensor(4.0), torch.log(torch.tensor(2.0)) + 0.5))]).mean()
    torch.testing.assert_close(loss, expected)


def test_unknown_aux_is_refused():
    score, z_a, z_k = logits()
    with pytest.raises(ValueError, match="--aux must be one of curl, debiased, hard, cpc, none, got .infonce."):
        auxiliary_loss(*contrastive_logits(z_a, z_k, score), "infonce")


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="positives"):
        tiny_config(positives=3).resolved()
    with pytest.raises(ValueError, match="--tau-plus 0.1 only applies to"):
        tiny_config(aux="curl", tau_plus=0.1).resolved()


def test_update_under_bf16_autocast():
    ag = agent(aux="debiased", tau_plus=0.1, positives=2)
    ag.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    for step in range(2):
        metrics = ag.update(batch(), step)
    assert all(torch.isfinite(v) and v.dtype == torch.float32 for v in metrics.values())
    assert ag.act(batch()["obs"][0]).shape == (2,)


def test_scaled_pixels_are_bit_identical_to_converting_in_the_trunk():
    """The update converts each crop once (ScaledPixels) for several trunks: same bits as obs.float() / 255."""
    from rl_curl.networks import ConvTrunk, ScaledPixels, scale_pixels

    torch.manual_seed(0)
    x = torch.randint(0, 256, (3, 9, 20, 20), dtype=torch.uint8)
    ref = x.float() / 255.0
    got = scale_pixels(x)
    assert torch.equal(got, ref) and got.is_contiguous(memory_format=torch.channels_last)
    every = torch.arange(256, dtype=torch.uint8).reshape(1, 1, 16, 16).expand(2, 3, 16, 16)  # every byte value
    for dtype in (torch.float32, torch.float64, torch.bfloat16):  # one division, or a copy then a division
        assert torch.equal(scale_pixels(every, dtype), every.to(dtype) / 255), dtype
    assert torch.equal(scale_pixels(every.float()), every.float() / 255)  # float pixels in 0..255
    trunk = ConvTrunk(9, 20, num_filters=4, num_layers=2)
    assert torch.equal(trunk(ScaledPixels(x)), trunk(x))
    assert torch.equal(trunk(x), trunk(x.float()))  # float pixels in 0..255 read the same as uint8


@pytest.mark.parametrize("field", ["log_every", "seed_steps", "actor_update_every", "target_update_every",
                                   "aux_update_every"])
def test_config_refuses_zero_periods(field):
    """0 used to pass validation and stop the run later (ZeroDivisionError, or sampling an empty replay)."""
    with pytest.raises(ValueError, match="--" + field.replace("_", "-")):  # the option, as the command line names it
        tiny_config(**{field: 0}).resolved()


def test_too_small_crop_names_its_size():
    from rl_curl.networks import ConvTrunk

    with pytest.raises(ValueError, match="image of 8 pixels .* 4 conv layers .* at least 15"):
        ConvTrunk(9, 8, num_filters=4, num_layers=4)
    ConvTrunk(9, 15, num_filters=4, num_layers=4)


def test_actor_beta1_help_says_which_optimisers_it_sets():
    """--help said actor_beta1 also set the auxiliary optimisers; as in the official code they keep 0.9."""
    import ast
    import inspect

    import rl_curl.config as config_module

    body = next(n for n in ast.parse(inspect.getsource(config_module)).body
                if isinstance(n, ast.ClassDef) and n.name == "Config").body
    i = next(i for i, n in enumerate(body) if isinstance(n, ast.AnnAssign) and n.target.id == "actor_beta1")
    doc = body[i + 1].value.value
    ag = agent(actor_beta1=0.5)
    assert ag.actor_opt.defaults["betas"][0] == ag.critic_opt.defaults["betas"][0] == 0.5
    assert ag.aux_opt.defaults["betas"][0] == ag.encoder_opt.defaults["betas"][0] == 0.9
    assert "actor and critic optimisers" in doc and "keep Adam's default 0.9" in doc


def test_actor_and_critic_rates_set_apart():
    """--actor-lr, --critic-lr and --critic-beta1 (the official --actor_lr, --critic_lr, --critic_beta) each set one
    optimiser, the other keeping --lr / --actor-beta1; unset, both follow --lr and --actor-beta1; bad values are
    refused by name; older records read as unset (the same run); stacked runs must agree on them."""
    from rl_curl.config import Config
    from rl_curl.stacked import SHARED

    ag = agent(lr=2e-3, critic_lr=4e-3, critic_beta1=0.7)
    assert (ag.critic_opt.defaults["lr"], ag.critic_opt.defaults["betas"][0]) == (4e-3, 0.7)
    assert (ag.actor_opt.defaults["lr"], ag.actor_opt.defaults["betas"][0]) == (2e-3, 0.9)
    ag = agent(lr=2e-3, actor_lr=5e-4)
    assert (ag.actor_opt.defaults["lr"], ag.critic_opt.defaults["lr"]) == (5e-4, 2e-3)
    assert ag.critic_opt.defaults["betas"][0] == ag.actor_opt.defaults["betas"][0] == 0.9
    assert tiny_config(lr=2e-3).resolved().rates() == {"actor": (2e-3, 0.9), "critic": (2e-3, 0.9)}
    for field, bad in (("critic_lr", -1.0), ("actor_lr", float("nan")), ("critic_beta1", 1.0),
                       ("actor_beta1", -0.1), ("alpha_beta1", float("nan"))):
        with pytest.raises(ValueError, match=f"--{field.replace('_', '-')} must be"):
            tiny_config(**{field: bad}).resolved()
    assert {Config.with_added_fields({})[k] for k in ("actor_lr", "critic_lr", "critic_beta1")} == {None}
    assert {"actor_lr", "critic_lr", "critic_beta1"} <= set(SHARED)


def test_encoder_tanh_switch():
    """encoder_tanh=False leaves LayerNorm's output as it is (the official code's output_logits=True)."""
    with_tanh, without = agent(), agent(encoder_tanh=False)
    without.load_state_dict(with_tanh.state_dict())
    x = batch()["obs"][:, :, :16, :16]
    z_plain = without.critic.encoder(x)
    ln = with_tanh.critic.encoder.ln(with_tanh.critic.encoder.fc(with_tanh.critic.encoder.trunk(x)))
    torch.testing.assert_close(z_plain, ln)
    torch.testing.assert_close(with_tanh.critic.encoder(x), torch.tanh(ln))
    assert z_plain.abs().max() > 1  # LayerNorm output is not bounded by 1
    for enc in (without.actor.encoder, without.critic_target.encoder):
        assert not enc.tanh


def test_float64_agent_stays_float64():
    """A float64 agent computes in float64 end to end (crops, losses, parameters): the exact
    comparisons with the official update rely on it."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        ag = agent(aux="debiased", tau_plus=0.1, positives=2)
    finally:
        torch.set_default_dtype(old)
    for step in range(2):
        metrics = ag.update(batch(), step)
    assert all(v.dtype == torch.float64 for v in metrics.values())
    assert {p.dtype for p in ag.parameters()} == {torch.float64}


def conv_weights(ag):
    return [p.detach().clone() for p in ag.critic.encoder.trunk.parameters()]


@pytest.mark.parametrize("update", ["official", "fused"])
def test_detach_encoder_keeps_the_critic_loss_off_the_convolutions(update):
    """--detach-encoder (the official code's --detach_encoder): one critic update leaves the conv weights as they
    were, while the default changes them; the encoder's linear layer still learns from the critic. With the fused
    schedule (no auxiliary loss, so only the critic could move them) likewise."""
    for detach in (False, True):
        ag = agent(detach_encoder=detach, update=update, aux="none" if update == "fused" else "curl")
        b = batch()
        before, fc = conv_weights(ag), ag.critic.encoder.fc.weight.detach().clone()
        if update == "official":
            obs, next_obs = ScaledPixels(b["obs"][:, :, :16, :16]), ScaledPixels(b["next_obs"][:, :, :16, :16])
            ag.update_critic(obs, b["action"], b["reward"], next_obs, b["not_done"])
        else:
            ag.update(b, 1)  # odd step: critic only
        same = [torch.equal(p, q) for p, q in zip(before, conv_weights(ag))]
        assert all(same) == detach, (detach, same)
        assert not torch.equal(fc, ag.critic.encoder.fc.weight)


def test_detach_encoder_leaves_the_convolutions_to_the_auxiliary_loss():
    """With --detach-encoder a full update still trains the convolutions, through the auxiliary (CURL) loss."""
    ag = agent(detach_encoder=True)
    before = conv_weights(ag)
    ag.update(batch(), 1)
    assert not any(torch.equal(p, q) for p, q in zip(before, conv_weights(ag)))


def test_the_official_random_seed_is_refused_with_what_to_give():
    """The official --seed -1 draws a seed at random; a run here records its seed in its folder's name and
    config.json, so -1 is refused with the way to get a random one that is kept."""
    with pytest.raises(ValueError, match=r"--seed must be a whole number .*, got -1: the official .* --seed \$RANDOM"):
        tiny_config(seed=-1).resolved()
    with pytest.raises(ValueError, match=r"--seed must be a whole number in \[0, 2\*\*32\)"):
        tiny_config(seed=-2).resolved()
