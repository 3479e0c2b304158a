"""Issue 19: the fused update (--update fused), against a float64 transcription of its own definition
(docs/rl_curl.md, "The fused update"), and the conv passes it saves."""

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from rl_curl.agent import CurlAgent
from rl_curl.networks import ConvTrunk, ScaledPixels

from .conftest import tiny_config
from .test_agent import CASES, OBS, batch


def agent64(**kw):
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        torch.manual_seed(0)
        return CurlAgent(OBS, 2, tiny_config(update="fused", **kw).resolved())
    finally:
        torch.set_default_dtype(old)


# ------------------------------------------------------------------ the definition, written out plainly


def trunk(P, prefix, x, layers):
    for i in range(layers):
        x = F.relu(F.conv2d(x, P[f"{prefix}.convs.{i}.weight"], P[f"{prefix}.convs.{i}.bias"],
                            stride=2 if i == 0 else 1))
    return x.permute(0, 2, 3, 1).reshape(x.shape[0], -1)


def head(P, prefix, h, tanh=True):
    z = F.linear(h, P[f"{prefix}.fc.weight"], P[f"{prefix}.fc.bias"])
    z = F.layer_norm(z, z.shape[-1:], P[f"{prefix}.ln.weight"], P[f"{prefix}.ln.bias"])
    return torch.tanh(z) if tanh else z


def mlp(P, prefix, x):
    x = F.relu(F.linear(x, P[f"{prefix}.0.weight"], P[f"{prefix}.0.bias"]))
    x = F.relu(F.linear(x, P[f"{prefix}.2.weight"], P[f"{prefix}.2.bias"]))
    return F.linear(x, P[f"{prefix}.4.weight"], P[f"{prefix}.4.bias"])


def fused_definition(P, cfg, obs, next_obs, keys, action, reward, not_done, noise):
    """L_critic and L_aux of the fused update, term by term (float64)."""
    L = cfg.num_layers
    # next action from the actor's head on the TARGET trunk's features of next_obs
    h_next = trunk(P, "critic_target.encoder.trunk", next_obs, L)
    mu, log_std = mlp(P, "actor.trunk", head(P, "actor.encoder", h_next)).chunk(2, dim=-1)
    log_std = cfg.log_std_min + 0.5 * (cfg.log_std_max - cfg.log_std_min) * (torch.tanh(log_std) + 1)
    u = mu + noise * log_std.exp()
    log_pi = (-0.5 * noise ** 2 - log_std).sum(-1, keepdim=True) - 0.5 * math.log(2 * math.pi) * mu.shape[-1]
    a_next = torch.tanh(u)
    log_pi = log_pi - torch.log(torch.relu(1 - a_next ** 2) + 1e-6).sum(-1, keepdim=True)
    zt = head(P, "critic_target.encoder", h_next)
    xq = torch.cat([zt, a_next], -1)
    alpha = P["log_alpha"].exp()
    y = reward + not_done * cfg.discount * (torch.min(mlp(P, "critic_target.q1", xq), mlp(P, "critic_target.q2", xq))
                                            - alpha * log_pi)
    y = y.detach()
    # critic loss on the online pass of obs
    z = head(P, "critic.encoder", trunk(P, "critic.encoder.trunk", obs, L))
    xa = torch.cat([z, action], -1)
    l_critic = ((mlp(P, "critic.q1", xa) - y) ** 2).mean() + ((mlp(P, "critic.q2", xa) - y) ** 2).mean()
    if not keys:
        return l_critic, None
    # DCL with M positives (tau+ = 0: CURL's InfoNCE), anchors z, keys from the target encoder
    B, M, tp = z.shape[0], len(keys), cfg.tau_plus
    zk = [head(P, "critic_target.encoder", trunk(P, "critic_target.encoder.trunk", k, L)).detach() for k in keys]
    S = [z @ P["score.W"] @ k.T for k in zk]  # [B, B] each
    total = 0.0
    for i in range(B):
        pos = torch.stack([S[m][i, i] for m in range(M)])
        neg = torch.stack([S[m][i, j] for m in range(M) for j in range(B) if j != i])
        N = neg.numel()
        g = (neg.exp().mean() - tp * pos.exp().mean()) / (1 - tp)
        g = torch.maximum(g, neg.detach().min().exp())
        total = total + sum(-torch.log(pos[m].exp() / (pos[m].exp() + N * g)) for m in range(M)) / M
    return l_critic, total / B


FUSED_CASES = [("curl", 0.0, 1), ("debiased", 0.05, 1), ("debiased", 0.1, 2), ("none", 0.0, 1)]


@pytest.mark.parametrize("aux,tau_plus,m", FUSED_CASES)
def test_fused_losses_and_gradients_match_their_definition_in_float64(aux, tau_plus, m):
    ag = agent64(aux=aux, tau_plus=tau_plus, positives=m, encoder_lr=2e-3)  # weight encoder_lr / lr = 2
    b = batch(B=6)
    crop = lambda x, dy, dx: ScaledPixels(x[:, :, dy:dy + 16, dx:dx + 16].contiguous(), torch.float64)
    obs, nxt = crop(b["obs"], 2, 2), crop(b["next_obs"], 1, 3)
    keys = [crop(b["obs"], 0, 1), crop(b["obs"], 3, 0)][:m] if aux != "none" else []
    action, reward, nd = b["action"].double(), b["reward"].double(), b["not_done"].double()
    torch.manual_seed(7)
    losses, _ = ag.fused_losses(obs, action, reward, nxt, nd, keys)
    torch.manual_seed(7)
    noise = torch.randn(6, 2, dtype=torch.float64)  # the one draw of the next action's noise
    P = {k: v.detach().clone().requires_grad_(True) for k, v in ag.named_parameters()}
    P.update({k: v for k, v in ag.named_buffers()})
    P.update({k: v.detach() for k, v in ag.critic_target.named_parameters(prefix="critic_target")})
    l_c, l_a = fused_definition(P, ag.cfg, obs.data, nxt.data, [k.data for k in keys], action, reward, nd, noise)
    assert torch.allclose(losses["critic_loss"], l_c, rtol=1e-12, atol=1e-12)
    assert ("aux_loss" in losses) == (l_a is not None)
    weight = ag.cfg.encoder_lr / ag.cfg.lr
    total_def = l_c + (weight * l_a if l_a is not None else 0.0)
    if l_a is not None:
        assert torch.allclose(losses["aux_loss"], l_a, rtol=1e-12, atol=1e-12)
    # the gradient of the one backward, for every parameter that gets one
    total = losses["critic_loss"] + (weight * losses["aux_loss"] if "aux_loss" in losses else 0.0)
    names = [k for k, p in ag.named_parameters() if p.requires_grad and not k.startswith("critic_target")]
    got = torch.autograd.grad(total, [dict(ag.named_parameters())[k] for k in names], allow_unused=True)
    want = torch.autograd.grad(total_def, [P[k] for k in names], allow_unused=True)
    for k, g, w in zip(names, got, want):
        if w is None:
            assert g is None or not g.any(), k
        else:
            assert g is not None and torch.allclose(g, w, rtol=1e-10, atol=1e-12), k
    assert any(k.startswith("critic.encoder.trunk") for k, w in zip(names, want) if w is not None)


def test_fused_update_steps_w_on_the_aux_gradient_alone_and_the_rest_on_the_sum():
    ag = agent64(aux="debiased", tau_plus=0.1, positives=2, encoder_lr=2e-3)
    b = batch(B=6)
    crop = lambda x, dy, dx: ScaledPixels(x[:, :, dy:dy + 16, dx:dx + 16].contiguous(), torch.float64)
    obs, nxt, keys = crop(b["obs"], 2, 2), crop(b["next_obs"], 1, 3), [crop(b["obs"], 0, 1), crop(b["obs"], 3, 0)]
    a, r, nd = b["action"].double(), b["reward"].double(), b["not_done"].double()
    twin = copy.deepcopy(ag)
    torch.manual_seed(3)
    losses, _ = twin.fused_losses(obs, a, r, nxt, nd, keys)
    w_grad = torch.autograd.grad(losses["aux_loss"], twin.score.W)[0]
    q_grad = torch.autograd.grad(losses["critic_loss"], twin.critic.q1[0].weight)[0]
    torch.manual_seed(3)
    W0 = ag.score.W.detach().clone()
    metrics = ag.update_fused(obs, a, r, nxt, nd, keys, step=1)  # odd step: no actor, no target update
    assert set(metrics) == {"critic_loss", "aux_loss"}
    assert torch.allclose(ag.score.W.grad, w_grad, rtol=1e-10) and torch.allclose(ag.critic.q1[0].weight.grad, q_grad)
    assert not torch.equal(ag.score.W, W0)
    assert all(p.grad is None for p in ag.critic.encoder.parameters())  # not stepped twice
    assert all(torch.equal(p, q) for p, q in zip(ag.critic_target.parameters(), twin.critic_target.parameters()))
    metrics = ag.update_fused(obs, a, r, nxt, nd, keys, step=2)
    assert {"actor_loss", "alpha_loss"} <= set(metrics)
    assert not all(torch.equal(p, q) for p, q in zip(ag.critic_target.parameters(), twin.critic_target.parameters()))


def _count_trunk_passes(ag, b, step):
    counts = {"forward": 0, "backward": 0}
    hooks = []
    for mod in ag.modules():
        if isinstance(mod, ConvTrunk):
            hooks.append(mod.register_forward_hook(lambda *a: counts.__setitem__("forward", counts["forward"] + 1)))
            if mod.convs[0].weight.requires_grad:  # a backward through this trunk reaches its first weight
                hooks.append(mod.convs[0].weight.register_hook(
                    lambda g: counts.__setitem__("backward", counts["backward"] + 1)))
    ag.update(b, step)
    for h in hooks:
        h.remove()
    return counts


def test_fused_update_makes_three_conv_passes_and_one_backward_where_the_official_makes_five_and_two():
    b = batch()
    torch.manual_seed(0)
    official = CurlAgent(OBS, 2, tiny_config(aux="curl").resolved())
    torch.manual_seed(0)
    fused = CurlAgent(OBS, 2, tiny_config(aux="curl", update="fused").resolved())
    # agent step 0: critic, actor, targets and aux all update
    assert _count_trunk_passes(official, b, 0) == {"forward": 5, "backward": 2}
    assert _count_trunk_passes(fused, b, 0) == {"forward": 3, "backward": 1}


@pytest.mark.parametrize("aux,tau_plus,m", CASES)
def test_fused_update_runs_for_every_aux_loss_and_under_bf16(aux, tau_plus, m):
    torch.manual_seed(0)
    ag = CurlAgent(OBS, 2, tiny_config(aux=aux, tau_plus=tau_plus, positives=m, update="fused").resolved())
    before = copy.deepcopy(ag.state_dict())
    for step in range(2):
        metrics = ag.update(batch(), step)
    assert all(torch.isfinite(v) for v in metrics.values()) and ("aux_loss" in metrics) == (aux != "none")
    changed = {k for k, v in ag.state_dict().items() if not torch.equal(v, before[k])}
    assert "log_alpha" in changed and any(k.startswith("critic.encoder.trunk") for k in changed)
    assert ("score.W" in changed) == (aux != "none")
    ag.autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    metrics = ag.update(batch(), 2)
    assert all(torch.isfinite(v) and v.dtype == torch.float32 for v in metrics.values())


def test_fused_runs_have_their_own_folder_and_row():
    from rl_curl.objectives import label

    cfg = tiny_config(update="fused").resolved()
    official = tiny_config().resolved()
    assert cfg.output_dir.endswith("/curl-fused/seed0") and official.output_dir.endswith("/curl/seed0")
    assert cfg.output_dir == official.output_dir.replace("/curl/seed0", "/curl-fused/seed0")  # same task, same seed
    assert label({"aux": "curl", "positives": 1, "update": "fused"}) == "biased (CURL), fused update"
    assert label({"aux": "curl", "positives": 1}) == "biased (CURL)"
