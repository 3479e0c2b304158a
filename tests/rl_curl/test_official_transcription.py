"""Our full update against a plain float64 transcription of the official CURL update.

The transcription follows MishaLaskin/curl's ``CurlSacAgent.update`` as its code reads (not our
modules): functional conv/linear/LayerNorm on a dict of tensors, the conv features flattened in
(channel, row, column) order, an actor encoder with its own linear + LayerNorm on the critic's conv
weights, the optimisers over the official parameter lists (the actor's includes the tied convs, the
CPC optimiser the whole CURL module: W, the critic encoder and the momentum encoder), the actor loss
back-propagated into everything, soft updates as ``tau * src + (1 - tau) * tgt`` and InfoNCE as
``cross_entropy`` over the row-max-shifted bilinear logits. With ``tanh=False`` it is the official
code's encoder (``output_logits=True``); with ``tanh=True`` the CURL paper's text (our default).
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import rl_curl.agent as agent_module
from rl_curl.agent import CurlAgent

from .conftest import tiny_config

OBS = (9, 20, 20)
A = 2


@pytest.fixture
def float64():
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


class Transcription:
    def __init__(self, ours: CurlAgent, tanh: bool):
        c = self.cfg = ours.cfg
        self.tanh, self.L = tanh, c.num_layers
        sd = {k: v.detach().clone() for k, v in ours.state_dict().items()}
        self.hw = int(math.isqrt(ours.critic.encoder.trunk.out_dim // c.num_filters))
        p = {name: (self.to_nchw(sd[ours_name]) if name.endswith(".fc.w") else sd[ours_name].contiguous())
             for name, ours_name in self.names().items()}
        self.p = {k: v.clone().requires_grad_(not k.startswith("target.")) for k, v in p.items()}
        P = self.p
        conv = [P[f"critic.conv{i}.{x}"] for i in range(self.L) for x in "wb"]
        enc = conv + [P[f"critic.{m}.{x}"] for m in ("fc", "ln") for x in "wb"]
        critic = enc + [P[f"critic.{q}.{j}.{x}"] for q in ("q1", "q2") for j in (0, 2, 4) for x in "wb"]
        actor = conv + [P[f"actor.{m}.{x}"] for m in ("fc", "ln") for x in "wb"] + \
            [P[f"actor.mlp.{j}.{x}"] for j in (0, 2, 4) for x in "wb"]
        target_enc = [P[k] for k in P if k.startswith("target.") and (".conv" in k or ".fc." in k or ".ln." in k)]
        # the official --critic_lr / --critic_beta and --actor_lr / --actor_beta (ours: --lr and --actor-beta1 for
        # both, --critic-lr, --critic-beta1, --actor-lr where given)
        critic_lr = c.lr if c.critic_lr is None else c.critic_lr
        critic_beta = c.actor_beta1 if c.critic_beta1 is None else c.critic_beta1
        self.critic_opt = torch.optim.Adam(critic, lr=critic_lr, betas=(critic_beta, 0.999))
        self.actor_opt = torch.optim.Adam(actor, lr=c.lr if c.actor_lr is None else c.actor_lr,
                                          betas=(c.actor_beta1, 0.999))
        self.alpha_opt = torch.optim.Adam([P["log_alpha"]], lr=c.alpha_lr, betas=(c.alpha_beta1, 0.999))
        self.encoder_opt = torch.optim.Adam(enc, lr=c.encoder_lr)
        self.cpc_opt = torch.optim.Adam([P["W"]] + enc + target_enc, lr=c.encoder_lr)

    def to_nchw(self, w):  # ours reads (row, column, channel); the official flatten is (channel, row, column)
        F_ = self.cfg.num_filters
        return w.view(w.shape[0], self.hw, self.hw, F_).permute(0, 3, 1, 2).reshape(w.shape[0], -1)

    def to_ours(self, w):
        F_ = self.cfg.num_filters
        return w.view(w.shape[0], F_, self.hw, self.hw).permute(0, 2, 3, 1).reshape(w.shape[0], -1)

    # -- networks, as the official modules compute them --------------------------------------
    def conv(self, net, x):
        h = x / 255.0
        for i in range(self.L):
            h = torch.relu(F.conv2d(h, self.p[f"{net}.conv{i}.w"], self.p[f"{net}.conv{i}.b"],
                                    stride=2 if i == 0 else 1))
        return h.reshape(h.shape[0], -1)

    def encode(self, conv_net, head_net, x, detach=False):
        h = self.conv(conv_net, x)
        if detach:
            h = h.detach()
        ln_w, ln_b = self.p[f"{head_net}.ln.w"], self.p[f"{head_net}.ln.b"]
        z = F.layer_norm(F.linear(h, self.p[f"{head_net}.fc.w"], self.p[f"{head_net}.fc.b"]), (ln_w.numel(),),
                         ln_w, ln_b)
        return torch.tanh(z) if self.tanh else z

    def mlp(self, prefix, x):
        for j in (0, 2, 4):
            x = F.linear(x, self.p[f"{prefix}.{j}.w"], self.p[f"{prefix}.{j}.b"])
            if j != 4:
                x = torch.relu(x)
        return x

    def actor(self, x, detach=False):
        c = self.cfg
        mu, log_std = self.mlp("actor.mlp", self.encode("critic", "actor", x, detach)).chunk(2, dim=-1)
        log_std = torch.tanh(log_std)
        log_std = c.log_std_min + 0.5 * (c.log_std_max - c.log_std_min) * (log_std + 1)
        noise = torch.randn_like(mu)
        pi = mu + noise * log_std.exp()
        log_pi = (-0.5 * noise.pow(2) - log_std).sum(-1, keepdim=True) - 0.5 * np.log(2 * np.pi) * noise.size(-1)
        mu, pi = torch.tanh(mu), torch.tanh(pi)
        log_pi = log_pi - torch.log(F.relu(1 - pi.pow(2)) + 1e-6).sum(-1, keepdim=True)
        return mu, pi, log_pi

    def critic(self, net, x, a, detach=False):
        h = torch.cat([self.encode(net, net, x, detach), a], dim=1)
        return self.mlp(f"{net}.q1", h), self.mlp(f"{net}.q2", h)

    # -- CurlSacAgent.update -------------------------------------------------------------------
    def update(self, obs, action, reward, next_obs, not_done, pos, step):
        c, P = self.cfg, self.p
        alpha = P["log_alpha"].exp()
        with torch.no_grad():
            _, npi, nlp = self.actor(next_obs)
            t1, t2 = self.critic("target", next_obs, npi)
            target_q = reward + not_done * c.discount * (torch.min(t1, t2) - alpha.detach() * nlp)
        q1, q2 = self.critic("critic", obs, action)
        critic_loss = F.mse_loss(q1, target_q) + F.mse_loss(q2, target_q)
        self.critic_opt.zero_grad()
        critic_loss.backward()
        self.critic_opt.step()
        out = {"critic_loss": critic_loss.item()}
        if step % c.actor_update_every == 0:
            _, pi, log_pi = self.actor(obs, detach=True)
            a1, a2 = self.critic("critic", obs, pi, detach=True)
            actor_loss = (P["log_alpha"].exp().detach() * log_pi - torch.min(a1, a2)).mean()
            self.actor_opt.zero_grad()
            actor_loss.backward()
            self.actor_opt.step()
            self.alpha_opt.zero_grad()
            alpha_loss = (P["log_alpha"].exp() * (-log_pi - (-float(A))).detach()).mean()
            alpha_loss.backward()
            self.alpha_opt.step()
            out.update(actor_loss=actor_loss.item(), alpha_loss=alpha_loss.item())
        if step % c.target_update_every == 0:
            with torch.no_grad():
                for k in P:
                    if k.startswith("target."):
                        tau = c.critic_tau if ".q" in k else c.encoder_tau
                        P[k].copy_(tau * P["critic." + k[len("target."):]] + (1 - tau) * P[k])
        if step % c.aux_update_every == 0:
            z_a = self.encode("critic", "critic", obs)
            with torch.no_grad():
                z_pos = self.encode("target", "target", pos)
            logits = z_a @ (P["W"] @ z_pos.T)
            logits = logits - torch.max(logits, 1)[0][:, None]
            aux = F.cross_entropy(logits, torch.arange(logits.shape[0]))
            self.encoder_opt.zero_grad()
            self.cpc_opt.zero_grad()
            aux.backward()
            self.encoder_opt.step()
            self.cpc_opt.step()
            out["aux_loss"] = aux.item()
        return out

    def names(self) -> dict[str, str]:
        """Transcription parameter name -> our state_dict name."""
        out = {}
        for net, dst in (("critic", "critic"), ("target", "critic_target")):
            for i in range(self.L):
                out[f"{net}.conv{i}.w"] = f"{dst}.encoder.trunk.convs.{i}.weight"
                out[f"{net}.conv{i}.b"] = f"{dst}.encoder.trunk.convs.{i}.bias"
            for q in ("q1", "q2"):
                for j in (0, 2, 4):
                    out[f"{net}.{q}.{j}.w"], out[f"{net}.{q}.{j}.b"] = f"{dst}.{q}.{j}.weight", f"{dst}.{q}.{j}.bias"
        for net, dst in (("critic", "critic"), ("target", "critic_target"), ("actor", "actor")):
            for part in ("fc", "ln"):
                out[f"{net}.{part}.w"], out[f"{net}.{part}.b"] = (f"{dst}.encoder.{part}.weight",
                                                                  f"{dst}.encoder.{part}.bias")
        for j in (0, 2, 4):
            out[f"actor.mlp.{j}.w"], out[f"actor.mlp.{j}.b"] = f"actor.trunk.{j}.weight", f"actor.trunk.{j}.bias"
        out["W"], out["log_alpha"] = "score.W", "log_alpha"
        return out

    def ours_layout(self) -> dict[str, torch.Tensor]:
        """Every transcribed parameter under our state_dict name and layout."""
        return {ours_name: (self.to_ours(self.p[name]) if name.endswith(".fc.w") else self.p[name]).detach()
                for name, ours_name in self.names().items()}


#: the actor's and the critic's rates set apart (the official --actor_lr, --critic_lr, --actor_beta, --critic_beta)
APART = dict(actor_lr=1e-3, critic_lr=5e-3, actor_beta1=0.8, critic_beta1=0.5)


@pytest.mark.parametrize("tanh,every,rates", [(False, (2, 2), {}), (True, (2, 2), {}), (False, (1, 3), {}),
                                              (False, (2, 2), APART)])
def test_update_equals_official_transcription(float64, monkeypatch, tanh, every, rates):
    """``every``: the actor's and the targets' update periods (the official --actor_update_freq and
    --critic_target_update_freq); 1 and 3 tell the two schedules apart, which the defaults (2 and 2) cannot.
    ``rates``: the actor's and the critic's learning rates and beta1 apart, or all from --lr and --actor-beta1."""
    torch.manual_seed(0)
    cfg = tiny_config(encoder_tanh=tanh, aux="curl", lr=3e-3, encoder_lr=3e-3, alpha_lr=1e-2,
                      actor_update_every=every[0], target_update_every=every[1], **rates).resolved()
    ours = CurlAgent(OBS, A, cfg)
    assert ours.log_alpha.dtype == torch.float64 and ours.critic.encoder.fc.weight.dtype == torch.float64
    ref = Transcription(ours, tanh)
    g = torch.Generator().manual_seed(1)
    B, S = cfg.batch_size, cfg.crop_size
    for step in range(5):
        frames = torch.randint(0, 256, (B, *OBS), dtype=torch.uint8, generator=g)
        nxt = torch.randint(0, 256, (B, *OBS), dtype=torch.uint8, generator=g)
        offs = torch.randint(0, OBS[1] - S + 1, (3, 2, B), generator=g)
        crop = lambda x, o: torch.stack([x[b, :, o[0][b]:o[0][b] + S, o[1][b]:o[1][b] + S] for b in range(B)])  # noqa: E731
        obs_c, next_c, pos_c = crop(frames, offs[0]), crop(nxt, offs[1]), crop(frames, offs[2])
        action = torch.rand(B, A, generator=g) * 2 - 1
        reward = torch.rand(B, 1, generator=g)
        not_done = (torch.rand(B, 1, generator=g) > 0.2).double()
        torch.manual_seed(100 + step)
        expect = ref.update(obs_c.double(), action, reward, next_c.double(), not_done, pos_c.double(), step)
        queue = [obs_c, next_c, pos_c]
        monkeypatch.setattr(agent_module, "random_crop", lambda x, size, generator=None: queue.pop(0))
        torch.manual_seed(100 + step)
        got = ours.update({"obs": frames, "next_obs": nxt, "action": action, "reward": reward, "not_done": not_done},
                          step)
        assert not queue
        assert set(got) >= set(expect)
        for k, v in expect.items():
            assert abs(float(got[k]) - v) <= 1e-10 * max(1.0, abs(v)), (step, k, float(got[k]), v)
        state = ours.state_dict()
        for k, v in ref.ours_layout().items():
            torch.testing.assert_close(state[k], v, rtol=1e-9, atol=1e-11, msg=f"step {step}: {k}")
    # The run moved every part (so the comparison above is not of untouched initial weights).
    assert ours.state_dict()["critic_target.encoder.trunk.convs.0.weight"].abs().sum() > 0
