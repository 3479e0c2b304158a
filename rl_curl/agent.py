"""SAC + CURL (docs/equations.md section 7): critic, actor on the detached critic encoder, temperature, momentum key
encoder, bilinear ``W``, and the auxiliary contrastive objective, all losses from ``shared_losses``.

The whole objective is in :func:`contrastive_logits` and :func:`auxiliary_loss`:
logits ``z_a W z_k^T`` between the anchors (critic encoder on the critic's crop of ``obs``) and
``M`` batches of keys (the momentum encoder on fresh crops of the same ``obs``); anchor i's
positives are its own keys, its negatives the other samples' keys of every view (N = M (B - 1)).
"""

from __future__ import annotations

import contextlib
import copy
import functools

import torch
import torch.nn as nn
import torch.nn.functional as F

from shared_losses import BilinearScore, CPCLoss, cpc_nce

from .augment import center_crop, random_crop
from .config import Config
from .networks import Actor, ConvTrunk, Critic, Encoder, ScaledPixels, weight_init
from .objectives import auxiliary_loss  # noqa: F401  (the loss of each --aux: rl_curl.objectives)
from .objectives import OBJECTIVES


def contrastive_logits(z_anchor: torch.Tensor, z_keys: list[torch.Tensor], score: BilinearScore,
                       subtract_row_max: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``pos [B, M]`` (anchor i vs its own M keys) and ``neg [B, M*B]`` (own keys masked to -inf)."""
    B, M = z_anchor.shape[0], len(z_keys)
    logits = torch.cat([score(z_anchor, z) for z in z_keys], dim=1)  # [B, M*B]
    if subtract_row_max:  # official CURL; every loss here is invariant to a per-row shift
        logits = logits - logits.max(dim=1, keepdim=True).values.detach()
    # The diagonal of each [B, B] block, read as a view: a boolean-mask index would need a device
    # sync (its size is data-dependent) on every update.
    pos = logits.view(B, M, B).diagonal(dim1=0, dim2=2).t()
    own = torch.eye(B, dtype=torch.bool, device=logits.device).repeat(1, M)
    neg = logits.masked_fill(own, float("-inf"))
    return pos, neg


@torch.no_grad()
def act_with(actor: Actor, obs, crop_size: int, autocast, device: torch.device, sample: bool = False,
             generator: torch.Generator | None = None):
    """``actor``'s actions for uint8 observations (see :meth:`CurlAgent.act`)."""
    x = torch.as_tensor(obs, device=device)
    if x.dim() not in (3, 4):
        raise ValueError(f"obs must be [C, H, W] or [B, C, H, W], got shape {tuple(x.shape)}")
    one = x.dim() == 3
    x = x[None] if one else x
    noise = None
    if sample and generator is not None:  # the same draws as randn_like of the mean, from this generator
        last = actor.trunk[-1]
        noise = torch.randn((x.shape[0], last.out_features // 2), generator=generator, device=device,
                            dtype=last.weight.dtype)
    out = actor_pass(actor, x, crop_size, autocast, sample, noise).float().cpu().numpy()
    return out[0] if one else out


def actor_pass(actor: Actor, x: torch.Tensor, crop_size: int, autocast, sample: bool,
               noise: torch.Tensor | None = None) -> torch.Tensor:
    """The actions ``[B, action_dim]`` on the device for uint8 observations ``x`` ``[B, C, H, W]`` there: centre crop,
    then the actor's pass (its sample when ``sample``, with ``noise`` or, if None, ``randn_like`` drawn from the
    default generator; else its mean). The part of acting that rl_curl.graphs.GraphedAct records as a CUDA graph."""
    with autocast():
        mu, pi, _, _ = actor(center_crop(x, crop_size), sample=sample, noise=noise)
    return pi if sample else mu


class Acting:
    """An actor (its encoder and conv trunk included) that acts as an agent acts: its centre crop, autocast and
    device (:func:`act_with`); what an evaluation needs of an agent."""

    def __init__(self, actor, crop_size: int, autocast, device: torch.device):
        self.actor, self.crop_size, self.autocast, self.device = actor, crop_size, autocast, device

    def act(self, obs, sample: bool = False):
        return act_with(self.actor, obs, self.crop_size, self.autocast, self.device, sample)


class ActorSnapshot(Acting):
    """A copy of an agent's actor that acts as the agent did when the copy was taken, while the agent trains on: what
    an evaluation in the background acts with (``--eval-async``)."""

    def __init__(self, agent: "CurlAgent"):
        super().__init__(copy.deepcopy(agent.actor).requires_grad_(False), agent.cfg.crop_size, agent.autocast,
                         agent.log_alpha.device)


def full(x: torch.Tensor) -> torch.Tensor:
    """``x`` in at least float32: autocast's bf16 outputs go up to float32 for the losses; float32 and
    float64 stay as they are."""
    return x.float() if x.dtype in (torch.bfloat16, torch.float16) else x


class CurlAgent(nn.Module):
    """All learned state of the agent (critic, target critic, actor, W, log alpha) in one module."""

    def __init__(self, obs_shape: tuple[int, int, int], action_dim: int, cfg: Config):
        super().__init__()
        self.cfg, self.action_dim = cfg, action_dim
        trunk = ConvTrunk(obs_shape[0], cfg.crop_size, cfg.num_filters, cfg.num_layers)
        trunk.cudnn_relu = cfg.cudnn_conv_relu  # the target critic's copy keeps it
        self.critic = Critic(Encoder(trunk, cfg.feature_dim, cfg.encoder_tanh), action_dim, cfg.hidden_dim)
        # The actor shares the critic's conv trunk (gradients stopped there) and has its own head.
        self.actor = Actor(Encoder(trunk, cfg.feature_dim, cfg.encoder_tanh), action_dim, cfg.hidden_dim,
                           cfg.log_std_min, cfg.log_std_max)
        self.apply(weight_init)
        trunk.to(memory_format=torch.channels_last)
        self.critic_target = copy.deepcopy(self.critic)  # its encoder is CURL's momentum key encoder
        for p in self.critic_target.parameters():
            p.requires_grad_(False)
        self.score = BilinearScore(cfg.feature_dim)
        if OBJECTIVES.get(cfg.aux).kind == "future":  # CPC's heads: a GRU over the actions, the K maps W_k
            self.cpc_context = nn.GRUCell(action_dim, cfg.feature_dim)
            self.cpc = CPCLoss(cfg.feature_dim, cfg.feature_dim, steps=cfg.cpc_steps, tau_plus=cfg.tau_plus,
                               log_floor="auto" if cfg.log_floor == "min-negative" else None, similarity="dot")
        self.log_alpha = nn.Parameter(torch.tensor(float(cfg.init_temperature)).log())
        self.target_entropy = -float(action_dim)
        self.autocast = contextlib.nullcontext
        # The losses' value checks would read the host: a device sync in every update, which a CUDA graph cannot
        # hold and which stops the CPU from running ahead of the GPU. Off: a bad value shows as a non-finite loss
        # instead, recorded on the device in ``nonfinite`` and read by check_finite() (the training loop does, when
        # it logs, evaluates or checkpoints). True: the losses raise at once, at the cost of that sync.
        self.host_checks = False
        # Not in the state dict (checkpoints stay as they were); moves with the agent.
        self.register_buffer("nonfinite", torch.zeros((), dtype=torch.bool), persistent=False)
        self.make_optimizers()

    def make_optimizers(self) -> None:
        c = self.cfg
        rates = c.rates()  # (lr, beta1) of the actor and of the critic
        # Adam's fused kernel where torch has one: the same update, about 4x faster than the default
        # per-tensor loop on CPU for these ~2M-parameter layers.
        adam = functools.partial(torch.optim.Adam, fused=self.log_alpha.device.type in ("cpu", "cuda"))
        trunk_ids = {id(p) for p in self.critic.encoder.trunk.parameters()}
        lr, beta1 = rates["critic"]
        self.critic_opt = adam(self.critic.parameters(), lr=lr, betas=(beta1, 0.999))
        lr, beta1 = rates["actor"]
        self.actor_opt = adam([p for p in self.actor.parameters() if id(p) not in trunk_ids], lr=lr,
                              betas=(beta1, 0.999))
        self.alpha_opt = adam([self.log_alpha], lr=c.alpha_lr, betas=(c.alpha_beta1, 0.999))
        # As in the official code: the encoder has its own optimiser and is also in the aux optimiser with W.
        self.encoder_opt = adam(self.critic.encoder.parameters(), lr=c.encoder_lr)
        heads = ([*self.cpc_context.parameters(), *self.cpc.parameters()] if hasattr(self, "cpc")
                 else [self.score.W])
        self.aux_opt = adam([*heads, *self.critic.encoder.parameters()], lr=c.encoder_lr)

    def optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"critic_opt": self.critic_opt, "actor_opt": self.actor_opt, "alpha_opt": self.alpha_opt,
                "encoder_opt": self.encoder_opt, "aux_opt": self.aux_opt}

    def set_capturable(self, on: bool) -> None:
        """Adam steps that a CUDA graph can capture (``capturable``: the step count and every decision stay on the
        device), or the default. The same arithmetic; a loaded checkpoint brings its own setting, so this is set
        after loading."""
        for opt in self.optimizers().values():
            for group in opt.param_groups:
                group["capturable"] = on

    def watch(self, metrics: dict[str, torch.Tensor]) -> None:
        """Record on the device, without reading it, whether any of this update's losses is not finite; the flag stays
        set until :meth:`check_finite` reads it."""
        bad = torch.stack([v.detach().float() for v in metrics.values()]).isfinite().all().logical_not()
        self.nonfinite.logical_or_(bad)

    def check_finite(self) -> bool:
        """Whether every update since the agent was made had finite losses (reads the device flag: one sync)."""
        return not bool(self.nonfinite)

    @property
    def alpha(self) -> torch.Tensor:
        return self.log_alpha.exp()

    # ---------------------------------------------------------------------------------------------
    def act(self, obs, sample: bool = False, generator: torch.Generator | None = None):
        """Actions in [-1, 1] for one uint8 observation ``[C, H, W]`` (returns ``[action_dim]``) or a batch
        ``[B, C, H, W]`` (returns ``[B, action_dim]``), centre-cropped as in CURL. ``sample``: the policy's sample,
        its noise drawn from ``generator`` (None: the device's default generator)."""
        return act_with(self.actor, obs, self.cfg.crop_size, self.autocast, self.log_alpha.device, sample, generator)

    def update(self, batch: dict[str, torch.Tensor], step: int) -> dict[str, float]:
        """One full update at agent step ``step``: critic, actor + alpha (every k), targets (every k), aux (every k)."""
        c = self.cfg
        dtype = self.log_alpha.dtype  # float32, or float64 for exact comparisons
        # Each crop is converted to float once and read by every trunk that needs it (obs: critic
        # before and after its step; next_obs: actor and target; keys: the momentum encoder).
        obs = ScaledPixels(random_crop(batch["obs"], c.crop_size), dtype)
        next_obs = ScaledPixels(random_crop(batch["next_obs"], c.crop_size), dtype)
        run_actor = step % c.actor_update_every == 0
        run_aux = c.aux != "none" and step % c.aux_update_every == 0
        future = run_aux and hasattr(self, "cpc")
        keys = ([ScaledPixels(random_crop(batch["obs"], c.crop_size), dtype)
                 for _ in range(1 if future else c.positives)] if run_aux else [])
        if future:  # CPC: fresh crops of the next K observations, read by the key encoder
            fut = batch["future_obs"]
            keys.append(ScaledPixels(random_crop(fut.flatten(0, 1), c.crop_size), dtype))
        if c.update == "fused":
            metrics = self.update_fused(obs, batch["action"], batch["reward"], next_obs, batch["not_done"], keys, step)
            metrics["batch_reward"] = batch["reward"].mean().to(dtype)
            self.watch(metrics)
            return metrics
        metrics = self.update_critic(obs, batch["action"], batch["reward"], next_obs, batch["not_done"])
        # The critic's conv features of obs after the critic step, shared (exactly) by the actor
        # update (detached) and the auxiliary loss (with gradients): neither step changes the trunk
        # before the other reads it.
        with torch.set_grad_enabled(run_aux), self.autocast():
            h = self.critic.encoder.trunk(obs)
        if run_actor:
            metrics.update(self.update_actor_and_alpha(h.detach()))
        if step % c.target_update_every == 0:
            self.update_targets()
        if run_aux:
            metrics.update(self.update_aux(h, keys, batch if future else None))
        metrics["batch_reward"] = batch["reward"].mean().to(dtype)  # the official train/batch_reward
        self.watch(metrics)
        return metrics

    def fused_losses(self, obs, action, reward, next_obs, not_done, keys) -> tuple[dict, torch.Tensor]:
        """The losses of the fused update (docs/rl_curl.md, "The fused update") from three conv passes:
        the target trunk on ``next_obs`` (target Q and, through the actor's head, the next action), the
        online trunk on ``obs`` (critic loss and auxiliary anchors; returned as ``h`` for the actor), the
        target trunk on all key crops at once. Returns ``({"critic_loss", "aux_loss"?}, h)``."""
        c = self.cfg
        with torch.no_grad(), self.autocast():
            h_next = self.critic_target.encoder.trunk(next_obs)
            _, next_pi, next_log_pi, _ = self.actor.from_features(self.actor.encoder.head(h_next))
            tq = torch.cat([self.critic_target.encoder.head(h_next), next_pi], dim=-1)
            target_v = full(torch.min(self.critic_target.q1(tq), self.critic_target.q2(tq))) \
                - self.alpha.detach() * full(next_log_pi)
            target_q = reward + not_done * c.discount * target_v
        with self.autocast():
            h = self.critic.encoder.trunk(obs)
            z = self.critic.encoder.head(h)
            # --detach-encoder: the critic's loss stops at the conv features; the auxiliary anchors keep z
            qa = torch.cat([self.critic.encoder.head(h.detach()) if c.detach_encoder else z, action], dim=-1)
            q1, q2 = self.critic.q1(qa), self.critic.q2(qa)
        losses = {"critic_loss": F.mse_loss(full(q1), target_q) + F.mse_loss(full(q2), target_q)}
        if keys:
            with torch.no_grad(), self.autocast():
                # One pass per view: one pass over all M views at once (batch M x B) was slower on CPU
                # at batch 128 (its activations no longer fit in the cache).
                z_k = [full(self.critic_target.encoder(k)) for k in keys]
            pos, neg = contrastive_logits(full(z), z_k, self.score, c.subtract_row_max)
            losses["aux_loss"] = auxiliary_loss(pos, neg, c.aux, c.tau_plus, c.beta, c.log_floor, self.host_checks)
        return losses, h

    def update_fused(self, obs, action, reward, next_obs, not_done, keys, step: int) -> dict[str, float]:
        """One fused update: critic + auxiliary loss in one backward (the encoder's gradient is
        grad L_critic + (encoder_lr / lr) grad L_aux, one Adam step with the critic's optimiser; W an Adam
        step on grad L_aux with the auxiliary optimiser), then the actor and alpha from the detached
        features of the same pass, then the targets."""
        c = self.cfg
        losses, h = self.fused_losses(obs, action, reward, next_obs, not_done, keys)
        weight = c.encoder_lr / self.critic_opt.param_groups[0]["lr"]
        total = losses["critic_loss"] + (weight * losses["aux_loss"] if "aux_loss" in losses else 0.0)
        self.critic_opt.zero_grad(set_to_none=True)
        self.aux_opt.zero_grad(set_to_none=True)
        total.backward()
        self.critic_opt.step()
        if "aux_loss" in losses:
            for p in self.critic.encoder.parameters():  # stepped above: the aux optimiser steps W only
                p.grad = None
            self.score.W.grad.div_(weight)
            self.aux_opt.step()
        metrics = {k: v.detach() for k, v in losses.items()}
        if step % c.actor_update_every == 0:
            metrics.update(self.update_actor_and_alpha(h.detach()))
        if step % c.target_update_every == 0:
            self.update_targets()
        return metrics

    def critic_loss(self, obs, action, reward, next_obs, not_done, noise: torch.Tensor | None = None) -> torch.Tensor:
        """The critic's loss: both Q heads against the soft target of ``next_obs`` (the next action drawn with
        ``noise``, the policy's standard normal draws; None: drawn here). Under ``--detach-encoder`` its gradient
        stops at the conv features."""
        with torch.no_grad(), self.autocast():
            _, next_pi, next_log_pi, _ = self.actor(next_obs, noise=noise)
            tq1, tq2 = self.critic_target(next_obs, next_pi)
            target_v = full(torch.min(tq1, tq2)) - self.alpha.detach() * full(next_log_pi)
            target_q = reward + not_done * self.cfg.discount * target_v
        with self.autocast():  # --detach-encoder: the loss stops at the conv features, as the official code's
            q1, q2 = self.critic(obs, action, detach_encoder=self.cfg.detach_encoder)
        return F.mse_loss(full(q1), target_q) + F.mse_loss(full(q2), target_q)

    def update_critic(self, obs, action, reward, next_obs, not_done) -> dict[str, float]:
        loss = self.critic_loss(obs, action, reward, next_obs, not_done)
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        return {"critic_loss": loss.detach()}

    def actor_loss(self, h: torch.Tensor, noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """``(actor loss, log pi)`` from the detached conv features ``h`` of the critic's crop of obs (``noise``: the
        policy's standard normal draws; None: drawn here)."""
        with self.autocast():
            _, pi, log_pi, _ = self.actor.from_features(self.actor.encoder.head(h), noise=noise)
            with torch.no_grad():
                z = self.critic.encoder.head(h)
            q = torch.cat([z, pi], dim=-1)
            actor_q = full(torch.min(self.critic.q1(q), self.critic.q2(q)))
        log_pi = full(log_pi)
        return (self.alpha.detach() * log_pi - actor_q).mean(), log_pi

    def alpha_loss(self, log_pi: torch.Tensor) -> torch.Tensor:
        """The temperature's loss for the policy's ``log pi`` (gradients reach ``log_alpha`` only)."""
        return (self.alpha * (-log_pi - self.target_entropy).detach()).mean()

    def update_actor_and_alpha(self, h: torch.Tensor) -> dict[str, float]:
        """Actor and temperature from the detached conv features ``h`` of the critic's crop of obs."""
        actor_params = self.actor_opt.param_groups[0]["params"]
        actor_loss, log_pi = self.actor_loss(h)
        self.actor_opt.zero_grad(set_to_none=True)
        actor_loss.backward(inputs=actor_params)  # the critic is not updated here: skip its weight gradients
        self.actor_opt.step()
        alpha_loss = self.alpha_loss(log_pi)
        self.alpha_opt.zero_grad(set_to_none=True)
        alpha_loss.backward()
        self.alpha_opt.step()
        return {"actor_loss": actor_loss.detach(), "alpha_loss": alpha_loss.detach(), "alpha": self.alpha.detach(),
                "entropy": -log_pi.mean().detach()}

    @torch.no_grad()
    def update_targets(self) -> None:
        c = self.cfg
        for src, tgt, tau in ((self.critic.q1, self.critic_target.q1, c.critic_tau),
                              (self.critic.q2, self.critic_target.q2, c.critic_tau),
                              (self.critic.encoder, self.critic_target.encoder, c.encoder_tau)):
            torch._foreach_lerp_(list(tgt.parameters()), list(src.parameters()), tau)

    def aux_logits(self, h: torch.Tensor, keys: list) -> tuple[torch.Tensor, torch.Tensor]:
        """``(pos [B, M], neg [B, M*B])``: the bilinear logits of the anchors (the critic's encoder head on the conv
        features ``h``) against the momentum encoder's keys of the scaled key crops (:func:`contrastive_logits`)."""
        with self.autocast():
            z_a = full(self.critic.encoder.head(h))
            with torch.no_grad():
                z_k = [full(self.critic_target.encoder(k)) for k in keys]
        return contrastive_logits(z_a, z_k, self.score, self.cfg.subtract_row_max)

    def aux_loss_from(self, h: torch.Tensor, keys: list[torch.Tensor]) -> torch.Tensor:
        """Auxiliary loss from the anchors' conv features ``h`` and the uint8 key crops."""
        c = self.cfg
        pos, neg = self.aux_logits(h, keys)
        return auxiliary_loss(pos, neg, c.aux, c.tau_plus, c.beta, c.log_floor, self.host_checks)

    def cpc_loss_from(self, h: torch.Tensor, keys: list[torch.Tensor], actions: torch.Tensor,
                      valid: torch.Tensor) -> torch.Tensor:
        """CPC's auxiliary loss (``--aux cpc``; docs/rl_curl.md): from the present observation's anchor
        ``z_t`` (the critic's encoder on its conv features ``h``), a GRU cell over the actions ``a_t .. a_{t+k-1}``
        gives ``c_{t,k}``, and ``W_k c_{t,k}`` is scored against the key encoder's latents of the batch: the
        positive is observation ``t + k`` of the same sequence, the negatives every other present latent, the
        present observations' keys (``keys[0]``, a fresh crop) included. ``keys[1]`` holds the crops of the next K
        observations ``[B * K, ...]``, ``actions`` ``[B, K, A]``, ``valid`` ``[B, K]`` (a step past the episode's end
        is absent)."""
        c = self.cfg
        B, K = actions.shape[0], c.cpc_steps
        with self.autocast():
            z_a = full(self.critic.encoder.head(h))
            with torch.no_grad():
                z_now = full(self.critic_target.encoder(keys[0]))
                z_next = full(self.critic_target.encoder(keys[1])).view(B, K, -1)
        latents = torch.cat([z_now.unsqueeze(1), z_next], dim=1)  # [B, K + 1, d]
        context, steps = z_a, []
        for k in range(K):  # c_{t,k+1} after the actions a_t .. a_{t+k}
            context = self.cpc_context(actions[:, k].to(z_a.dtype), context)
            steps.append(context)
        pred = self.cpc.predict_each(torch.stack(steps, dim=1)).unsqueeze(1)  # W_k c_{t,k}: [B, 1, K, d]
        mask = torch.cat([torch.ones(B, 1, dtype=torch.bool, device=valid.device), valid.bool()], dim=1)
        return cpc_nce(latents, pred, mask, temperature=self.cpc.temperature, tau_plus=self.cpc.tau_plus,
                       log_floor=self.cpc.log_floor, similarity=self.cpc.similarity)

    def update_aux(self, h: torch.Tensor, keys: list[torch.Tensor], future: dict | None = None) -> dict[str, float]:
        loss = (self.aux_loss_from(h, keys) if future is None
                else self.cpc_loss_from(h, keys, future["future_action"], future["future_valid"]))
        self.encoder_opt.zero_grad(set_to_none=True)
        self.aux_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.encoder_opt.step()
        self.aux_opt.step()
        return {"aux_loss": loss.detach()}
