"""K runs' updates as one (issue 42, "many runs in one process"): the parameters of K agents stacked along a first
axis, every forward pass of the update ``torch.func.vmap``-ed over it (PyTorch's model-ensembling recipe:
``functional_call`` on one agent's modules with each run's slice of the stacked tensors), and one Adam step per
optimiser on the stacked tensors. A convolution of K runs is then one grouped convolution, a linear layer one batched
matrix product: the kernels of one update for all K runs instead of K updates' kernels.

What each run gets is its own update, equal to :meth:`rl_curl.agent.CurlAgent.update` of that run alone:

* every loss is the agent's own method (``critic_loss``, ``actor_loss``, ``alpha_loss``, ``aux_logits``) called on
  the run's slice, and the loss that reaches the backward is the sum over runs, whose gradient for run k's parameters
  is exactly that of run k's loss;
* Adam works element by element with the same settings in every run, so one Adam on the stacked tensors is K Adams;
* each run draws its random crops and its policy noise from its own generator, in the order the single update draws
  them (crops of obs, next_obs and the keys, then the critic's and the actor's noise), so a run seeded like a single
  one sees the same random numbers;
* the runs may differ in their seed and in their objective among the ones on the bilinear logits (``curl``,
  ``debiased``, ``hard``, each with its own ``tau_plus`` and ``beta``): the logits come out of the vmap and each run's
  loss is computed on its own. Everything else that shapes the update (sizes, learning rates, schedules, the number of
  positives M) must be the same.

The results equal the single updates up to float rounding (a grouped convolution may add in another order), tested
in float64 against K single agents (tests/rl_curl/test_stacked.py). :meth:`StackedAgents.to_agents` writes the runs
back into their agents (parameters and optimiser states), whose checkpoints and evaluations are then the usual ones.

Not covered (refused by name): the fused schedule, CPC (``--aux cpc``), ``--cudnn-conv-relu`` (a custom autograd
function without a vmap rule) and bf16 autocast.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
import torch.nn as nn
from torch.func import functional_call, vmap

from .agent import CurlAgent
from .augment import center_crop, crop_at
from .graphs import GraphedUpdate, Snapshot, record
from .networks import ScaledPixels, scale_pixels
from .objectives import OBJECTIVES, auxiliary_loss

#: Config fields in which stacked runs may differ (besides what the update never reads: task names, folders,
#: logging, evaluation, lengths).
FREE = ("seed", "aux", "tau_plus", "beta")
#: Config fields the update reads: equal in every run.
SHARED = ("batch_size", "crop_size", "frame_stack", "num_filters", "num_layers", "feature_dim", "encoder_tanh",
          "hidden_dim", "log_std_min", "log_std_max", "discount", "lr", "actor_lr", "critic_lr", "critic_beta1",
          "encoder_lr", "alpha_lr", "alpha_beta1", "actor_beta1", "critic_tau", "encoder_tau", "actor_update_every",
          "target_update_every", "aux_update_every", "positives", "log_floor", "subtract_row_max", "update",
          "cudnn_conv_relu", "detach_encoder")


def check_stackable(cfgs: list, names: list[str], what: str, also: tuple[str, ...] = ()) -> None:
    """Refuse (a ValueError naming the run and the setting) configurations whose updates cannot be one stacked update:
    the fused schedule, CPC, ``--cudnn-conv-relu``, runs that differ from the first in a :data:`SHARED` field (or one of
    ``also``), or some with an auxiliary loss and some without. ``names``: how each run is called in the message;
    ``what``: what is refusing (the stacked update, runs trained together)."""
    first = cfgs[0]
    for c, name in zip(cfgs, names, strict=True):
        refused = (("--update fused", c.update != "official", "the stacked update is the official schedule's"),
                   ("--aux cpc", OBJECTIVES.get(c.aux).kind == "future", "CPC"),
                   ("--cudnn-conv-relu", c.cudnn_conv_relu, "its custom autograd function has no vmap rule"))
        for flag, bad, why in refused:
            if bad:
                raise ValueError(f"{name}: {flag} is not supported by {what} ({why})")
        differ = [f for f in (*also, *SHARED) if getattr(c, f) != getattr(first, f)]
        if differ:
            raise ValueError(f"{name} differs from {names[0]} in {', '.join(differ)}: {what} may differ only in "
                             f"{', '.join(FREE)}")
        if (c.aux == "none") != (first.aux == "none"):
            raise ValueError(f"{name}: --aux {c.aux} beside --aux {first.aux}: either every run has an auxiliary loss "
                             "or none has")


def autocasts(agent: CurlAgent) -> bool:
    """Whether the agent's autocast context casts (accelerate's, without mixed precision, does not)."""
    device_type = agent.log_alpha.device.type
    with agent.autocast():
        try:
            return torch.is_autocast_enabled(device_type)
        except RuntimeError:  # a device type without autocast (meta)
            return False


class _Runner(nn.Module):
    """``forward(fn, *args) = fn(agent, *args)``: what :func:`torch.func.functional_call` calls, so that any of the
    agent's methods runs on the parameters it is given."""

    def __init__(self, agent: CurlAgent):
        super().__init__()
        self.agent = agent

    def forward(self, fn, *args):
        return fn(self.agent, *args)


def _scaled(xs: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """K uint8 crops ``[B, C, H, W]`` as one ``[K, B, C, H, W]`` tensor in [0, 1] whose run slices are channels-last,
    each converted as :func:`rl_curl.networks.scale_pixels` converts it (the same values bit for bit)."""
    K, (B, C, H, W) = len(xs), xs[0].shape
    out = torch.empty((K, B, H, W, C), dtype=dtype, device=xs[0].device).permute(0, 1, 4, 2, 3)
    for k, x in enumerate(xs):
        scale_pixels(x, dtype, out=out[k])
    return out


class StackedAgents:
    """K agents' updates as one (see the module's docstring). ``agents`` keep their own parameters; the stacked copy
    trains, and :meth:`to_agents` writes it back."""

    def __init__(self, agents: list[CurlAgent]):
        if not agents:
            raise ValueError("StackedAgents needs at least one agent")
        first = agents[0]
        c = first.cfg
        check_stackable([a.cfg for a in agents], [f"run {i}" for i in range(len(agents))], "the stacked update")
        for i, a in enumerate(agents):
            if autocasts(a):
                raise ValueError(f"run {i}: the stacked update runs without autocast (bf16 is not supported)")
            if a.action_dim != first.action_dim or a.critic.encoder.trunk.convs[0].in_channels != \
                    first.critic.encoder.trunk.convs[0].in_channels:
                raise ValueError(f"run {i}: its observations or actions have another shape than run 0's")
        self.agents, self.K, self.cfg = list(agents), len(agents), c
        self.host_checks = first.host_checks
        names = [n for n, _ in first.named_parameters()]  # tied parameters once (the actor's conv trunk)
        # functional_call's module: a copy of run 0's agent (its own tensors are swapped for each run's slices during
        # a call; the agents themselves are never touched)
        self.runner = _Runner(copy.deepcopy(first))
        self.params: dict[str, torch.Tensor] = {}
        for n, p in first.named_parameters():
            self.params[n] = torch.stack([dict(a.named_parameters())[n].detach() for a in agents]) \
                .requires_grad_(p.requires_grad)
        self.names = names
        # each agent's parameters in the order of names, for the copies back (rl_curl.together: when a run reads it)
        self._own = [[dict(a.named_parameters())[n] for n in names] for a in agents]
        self.nonfinite = torch.stack([a.nonfinite.clone() for a in agents])
        # acting reads only the actor (its conv trunk is the critic's): its own copy, and its parameters' names in
        # self.params, so that a call swaps the actor's tensors and not the whole agent's
        stacked_name = {id(p): n for n, p in first.named_parameters()}
        self.actor = copy.deepcopy(first.actor)
        self._actor_names = {local: stacked_name[id(p)]
                             for local, p in first.actor.named_parameters(remove_duplicate=False)}
        self._make_optimizers()

    # -------------------------------------------------------------------------------------------- state
    def _make_optimizers(self) -> None:
        """The agents' five Adams on the stacked tensors: the same groups and settings, each state stacked."""
        first = self.agents[0]
        name_of = {id(p): n for n, p in first.named_parameters()}
        self.opts: dict[str, torch.optim.Optimizer] = {}
        for key, opt in first.optimizers().items():
            groups = []
            for g in opt.param_groups:
                groups.append({**{k: v for k, v in g.items() if k != "params"},
                               "params": [self.params[name_of[id(p)]] for p in g["params"]]})
            self.opts[key] = torch.optim.Adam(groups)
        self._load_optimizer_states()

    def _opt_pairs(self, key: str):
        """``(stacked tensor, [each agent's parameter])`` of optimiser ``key``, in its order."""
        per_agent = [[p for g in a.optimizers()[key].param_groups for p in g["params"]] for a in self.agents]
        stacked = [p for g in self.opts[key].param_groups for p in g["params"]]
        return zip(stacked, zip(*per_agent), strict=True)

    def _load_optimizer_states(self) -> None:
        for key in self.opts:
            opt = self.opts[key]
            for sp, ps in self._opt_pairs(key):
                states = [a.optimizers()[key].state.get(p) for a, p in zip(self.agents, ps)]
                if not any(states):
                    continue
                if not all(states):
                    raise ValueError(f"optimiser {key}: some runs have taken Adam steps and others not; stacked runs "
                                     "must be at the same update")
                steps = {float(s["step"]) for s in states}
                if len(steps) != 1:
                    raise ValueError(f"optimiser {key}: the runs are at different Adam steps {sorted(steps)}; stacked "
                                     "runs must be at the same update")
                st = {k: (torch.stack([s[k] for s in states]) if k != "step" else states[0][k].clone())
                      for k in states[0]}
                opt.state[sp] = st

    @torch.no_grad()
    def to_agent(self, i: int, states: bool = True) -> CurlAgent:
        """Write run ``i``'s parameters and non-finite flag (and, with ``states``, its optimiser states) back into its
        agent, in place (the agent's tensors keep their memory); returns the agent."""
        a = self.agents[i]
        torch._foreach_copy_([p.data for p in self._own[i]], [self.params[n][i] for n in self.names])
        a.nonfinite.copy_(self.nonfinite[i])
        if states:
            for key, opt in self.opts.items():
                target = a.optimizers()[key]
                for sp, ps in self._opt_pairs(key):
                    st = opt.state.get(sp)
                    if st:
                        target.state[ps[i]] = {name: (v.clone() if name == "step" else v[i].clone())
                                               for name, v in st.items()}
        return a

    def to_agents(self, states: bool = True) -> list[CurlAgent]:
        """:meth:`to_agent` for every run; returns the agents."""
        return [self.to_agent(i, states) for i in range(self.K)]

    def set_capturable(self, on: bool) -> None:
        """Adam steps a CUDA graph can capture (see :meth:`rl_curl.agent.CurlAgent.set_capturable`)."""
        for opt in self.opts.values():
            for group in opt.param_groups:
                group["capturable"] = on

    def check_finite(self) -> list[bool]:
        """Per run: whether every update so far had finite losses (one device read)."""
        return [not bool(f) for f in self.nonfinite.cpu()]

    # -------------------------------------------------------------------------------------------- the update
    def _map(self, fn, *xs, with_grad: bool = True):
        """``fn(agent, *x_k)`` for every run k on its slice of the stacked parameters and of each ``x`` (a tensor
        ``[K, ...]``, or a list of them passed on as a list of slices); outputs stacked along a first axis."""
        def one(params, *x):
            return functional_call(self.runner, {"agent." + n: t for n, t in params.items()}, (fn, *x))

        with torch.set_grad_enabled(with_grad and torch.is_grad_enabled()):
            return vmap(one, randomness="error")(self.params, *xs)

    @torch.no_grad()
    def act(self, obs: list, generators: list[torch.Generator | None] | None = None) -> np.ndarray:
        """Every run's training action (the policy's sample) for its one uint8 observation ``obs[k]`` ``[C, H, W]``,
        from one vmapped pass of the runs' actors: row k equals ``agents[k].act(obs[k], sample=True,
        generator=generators[k])`` with the agent's parameters as they stand in the stacked tensors (its noise drawn
        from ``generators[k]`` as the agent draws it; None: the device's default generator). ``[K, action_dim]``."""
        x = self.act_input(obs, generators)
        return self.act_drawn(torch.as_tensor(x, device=self.params["log_alpha"].device),
                              self.act_noise(generators)).float().cpu().numpy()

    def act_input(self, obs: list, generators) -> np.ndarray:
        """The runs' observations as one array ``[K, C, H, W]``, checked against the runs and their generators."""
        K = self.K
        if len(obs) != K or (generators is not None and len(generators) != K):
            raise ValueError(f"{len(obs)} observations and {len(generators) if generators is not None else K} "
                             f"generators for {K} stacked runs")
        x = np.stack(obs)
        if x.ndim != 4:
            raise ValueError(f"each observation must be [C, H, W], got shape {tuple(x.shape[1:])}")
        return x

    def act_noise(self, generators: list[torch.Generator | None] | None = None) -> torch.Tensor:
        """Each run's policy noise for its action, ``[K, 1, action_dim]``, from its own generator (None: the device's
        default), as its agent draws it."""
        dtype, dev = self.params["log_alpha"].dtype, self.params["log_alpha"].device
        generators = list(generators) if generators is not None else [None] * self.K
        action_dim = self.agents[0].action_dim
        return torch.stack([torch.randn((1, action_dim), generator=g, dtype=dtype, device=dev) for g in generators])

    @torch.no_grad()
    def act_drawn(self, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """:meth:`act` on the device: ``x`` the runs' observations ``[K, C, H, W]`` there, ``noise`` from
        :meth:`act_noise`; the actions ``[K, action_dim]`` on the device (what a CUDA graph of acting records)."""
        K, dtype = self.K, self.params["log_alpha"].dtype
        x = center_crop(x, self.cfg.crop_size)

        def one(params, o, z):
            return functional_call(self.actor, params, (ScaledPixels.of(o),), {"sample": True, "noise": z})[1]

        params = {local: self.params[name] for local, name in self._actor_names.items()}
        return vmap(one, randomness="error")(params, _scaled([x[k:k + 1] for k in range(K)], dtype), noise)[:, 0]

    def draw(self, step: int, batch_size: int, frame_size: int, action_dim: int,
             generators: list[torch.Generator | None] | None = None) -> dict[str, torch.Tensor | None]:
        """Every run's random draws of the update at ``step``, from its own generator (None: the device's default
        generator), in the order the single update draws them: the crops' offsets of obs, next_obs and the M keys
        (:func:`rl_curl.augment.random_crop`: rows, then columns), then the critic's and the actor's policy noise.
        Returns ``{"offsets": [K, crops, 2, B], "critic_noise": [K, B, A], "actor_noise": [K, B, A] or None}``."""
        c, K = self.cfg, self.K
        generators = list(generators) if generators is not None else [None] * K
        if len(generators) != K:
            raise ValueError(f"{len(generators)} generators for {K} stacked runs")
        dtype, dev = self.params["log_alpha"].dtype, self.params["log_alpha"].device
        run_actor = step % c.actor_update_every == 0
        crops = 2 + (c.positives if c.aux != "none" and step % c.aux_update_every == 0 else 0)
        span = frame_size - c.crop_size + 1
        offsets, critic, actor = [], [], []
        for g in generators:
            offsets.append(torch.stack([torch.randint(0, span, (batch_size,), device=dev, generator=g)
                                        for _ in range(2 * crops)]).view(crops, 2, batch_size))
            critic.append(torch.randn((batch_size, action_dim), generator=g, dtype=dtype, device=dev))
            if run_actor:
                actor.append(torch.randn((batch_size, action_dim), generator=g, dtype=dtype, device=dev))
        return {"offsets": torch.stack(offsets), "critic_noise": torch.stack(critic),
                "actor_noise": torch.stack(actor) if actor else None}

    def update(self, batches: list[dict[str, torch.Tensor]], step: int,
               generators: list[torch.Generator | None] | None = None) -> dict[str, torch.Tensor]:
        """One update of every run at agent step ``step``: run k on ``batches[k]`` (a batch as
        ``FrameReplay.sample`` gives it), drawing from ``generators[k]`` (None: the device's default generator).
        Returns each metric as a ``[K]`` tensor."""
        if len(batches) != self.K:
            raise ValueError(f"{len(batches)} batches for {self.K} stacked runs")
        B, A = batches[0]["action"].shape
        drawn = self.draw(step, B, batches[0]["obs"].shape[-1], A, generators)
        return self.update_drawn(batches, step, drawn)

    def update_drawn(self, batches: list[dict[str, torch.Tensor]], step: int,
                     drawn: dict[str, torch.Tensor | None]) -> dict[str, torch.Tensor]:
        """:meth:`update` with the random draws given (:meth:`draw`): what a CUDA graph records, its draws made
        outside it (:class:`GraphedStackedUpdate`)."""
        if len(batches) != self.K:
            raise ValueError(f"{len(batches)} batches for {self.K} stacked runs")
        c = self.cfg
        run_actor = step % c.actor_update_every == 0
        run_aux = c.aux != "none" and step % c.aux_update_every == 0
        dtype = self.params["log_alpha"].dtype
        off = drawn["offsets"]

        def crop(key: str, j: int) -> torch.Tensor:  # crop j of every run, as random_crop would have cut it
            return _scaled([crop_at(b[key], off[k, j, 0], off[k, j, 1], c.crop_size) for k, b in enumerate(batches)],
                           dtype)

        crops = {"obs": crop("obs", 0), "next_obs": crop("next_obs", 1),
                 "keys": [crop("obs", 2 + m) for m in range(c.positives if run_aux else 0)]}
        noise = {"critic": drawn["critic_noise"], "actor": drawn["actor_noise"]}
        stack = {k: torch.stack([b[k] for b in batches]) for k in ("action", "reward", "not_done")}

        critic_loss = self._map(
            lambda a, o, act, r, no, nd, z: a.critic_loss(ScaledPixels.of(o), act, r, ScaledPixels.of(no), nd, z),
            crops["obs"], stack["action"], stack["reward"], crops["next_obs"], stack["not_done"], noise["critic"])
        self._step_with("critic_opt", critic_loss)
        metrics = {"critic_loss": critic_loss.detach()}

        def trunk(a, o):
            with a.autocast():
                return a.critic.encoder.trunk(ScaledPixels.of(o))

        h = self._map(trunk, crops["obs"], with_grad=run_aux)  # shared by the actor (detached) and the aux loss
        if run_actor:
            actor_loss, log_pi = self._map(lambda a, x, z: a.actor_loss(x, z), h.detach(), noise["actor"])
            self._step_with("actor_opt", actor_loss, inputs=[p for g in self.opts["actor_opt"].param_groups
                                                             for p in g["params"]])
            alpha_loss = self._map(lambda a, lp: a.alpha_loss(lp), log_pi)
            self._step_with("alpha_opt", alpha_loss)
            entropy = vmap(lambda lp: -lp.mean())(log_pi.detach())
            metrics.update(actor_loss=actor_loss.detach(), alpha_loss=alpha_loss.detach(),
                           alpha=self.params["log_alpha"].detach().exp(), entropy=entropy)
        if step % c.target_update_every == 0:
            self._update_targets()
        if run_aux:
            pos, neg = self._map(lambda a, x, *keys: a.aux_logits(x, [ScaledPixels.of(k) for k in keys]),
                                 h, *crops["keys"])
            losses = torch.stack([
                auxiliary_loss(pos[k], neg[k], a.cfg.aux, a.cfg.tau_plus, a.cfg.beta, c.log_floor, self.host_checks)
                for k, a in enumerate(self.agents)])
            for key in ("encoder_opt", "aux_opt"):
                self.opts[key].zero_grad(set_to_none=True)
            losses.sum().backward()
            self.opts["encoder_opt"].step()
            self.opts["aux_opt"].step()
            metrics["aux_loss"] = losses.detach()
        metrics["batch_reward"] = stack["reward"].flatten(1).mean(1).to(dtype)  # each run's, as CurlAgent.update's
        self._watch(metrics)
        return metrics

    def _step_with(self, key: str, losses: torch.Tensor, inputs=None) -> None:
        """Backward of the runs' summed losses (each run's gradient is its own loss's), then optimiser ``key``."""
        opt = self.opts[key]
        opt.zero_grad(set_to_none=True)
        losses.sum().backward(inputs=inputs)
        opt.step()

    @torch.no_grad()
    def _update_targets(self) -> None:
        c = self.cfg
        pairs = (("critic.q1.", c.critic_tau), ("critic.q2.", c.critic_tau), ("critic.encoder.", c.encoder_tau))
        for src, tau in pairs:
            names = [n for n in self.names if n.startswith(src)]
            torch._foreach_lerp_([self.params["critic_target." + n[len("critic."):]] for n in names],
                                 [self.params[n] for n in names], tau)

    def _watch(self, metrics: dict[str, torch.Tensor]) -> None:
        bad = torch.stack([v.detach().float() for v in metrics.values()]).isfinite().all(0).logical_not()
        self.nonfinite.logical_or_(bad)



class StackedSnapshot(Snapshot):
    """:class:`rl_curl.graphs.Snapshot` of a :class:`StackedAgents`: its stacked tensors, optimiser states and the
    device's generator."""

    def _tensors(self) -> list[torch.Tensor]:
        return [*self.agent.params.values(), self.agent.nonfinite]

    def _optimizers(self) -> list[torch.optim.Optimizer]:
        return list(self.agent.opts.values())

    def _device(self) -> torch.device:
        return self.agent.params["log_alpha"].device


class GraphedStackedUpdate(GraphedUpdate):
    """:meth:`StackedAgents.update` on K batches of replay indices (run k's from ``replays[k]``; one replay may serve
    several runs), replayed from CUDA graphs on a GPU and eager elsewhere, as :class:`rl_curl.graphs.GraphedUpdate`
    does for one agent. The random draws (:meth:`StackedAgents.draw`: crop offsets and policy noise) are made before
    each replay, outside the graph, from each run's generator (or the device's default one), into fixed tensors the
    graph reads, as it reads the indices: each run keeps its own random stream. ``update(idx [K, B], step,
    generators)`` returns each metric as a ``[K]`` tensor that later updates overwrite in place."""

    def __init__(self, stacked: StackedAgents, replays: list, batch_size: int, warmup: int = 3):
        if len(replays) != stacked.K:
            raise ValueError(f"{len(replays)} replays for {stacked.K} stacked runs")
        self.replays = list(replays)
        self._start(stacked, self.replays, (stacked.K, batch_size), stacked.params["log_alpha"].device, warmup)
        c, K = stacked.cfg, stacked.K
        self.batch_size, self.frame_size = batch_size, replays[0].obs_shape[-1]
        self.action_dim = stacked.agents[0].action_dim
        dtype = stacked.params["log_alpha"].dtype
        crops = 2 + (c.positives if c.aux != "none" else 0)
        self.drawn = {"offsets": torch.zeros((K, crops, 2, batch_size), dtype=torch.int64, device=self.device),
                      "critic_noise": torch.zeros((K, batch_size, self.action_dim), dtype=dtype, device=self.device),
                      "actor_noise": torch.zeros((K, batch_size, self.action_dim), dtype=dtype, device=self.device)}

    def _generation(self) -> tuple:
        return tuple(r.generation for r in self.replays)

    def _snapshot(self) -> Snapshot:
        return StackedSnapshot(self.agent)

    def update(self, idx, step: int, generators: list[torch.Generator | None] | None = None) -> dict[str, torch.Tensor]:
        d = self.agent.draw(step, self.batch_size, self.frame_size, self.action_dim, generators)
        self.drawn["offsets"][:, :d["offsets"].shape[1]].copy_(d["offsets"])
        self.drawn["critic_noise"].copy_(d["critic_noise"])
        if d["actor_noise"] is not None:
            self.drawn["actor_noise"].copy_(d["actor_noise"])
        return super().update(idx, step)

    def _run(self, step: int) -> dict[str, torch.Tensor]:
        drawn = {**self.drawn, "actor_noise": self.drawn["actor_noise"] if self.kind(step)[0] else None}
        return self.agent.update_drawn([rep.gather(self.idx[k]) for k, rep in enumerate(self.replays)], step, drawn)


class GraphedStackedAct:
    """:meth:`StackedAgents.act` replayed from one CUDA graph on a GPU: the vmapped pass of the runs' actors is a few
    dozen small kernels whose launches and Python (vmap, ``functional_call``) cost more than their arithmetic, once per
    environment step of every run trained together. The observations are copied into a fixed input tensor and each
    run's noise, drawn from its own generator outside the graph as :meth:`StackedAgents.act` draws it, into another;
    the graph reads the stacked parameters where they are (the update changes them in place). Recorded at the first
    call after a warm-up on a side stream (cuDNN's algorithm search), again if the observations' shape changes; if
    the recording fails, a warning says so and the runs act eagerly from then on. On a CPU the same code runs
    eagerly: :meth:`StackedAgents.act` exactly."""

    def __init__(self, stacked: StackedAgents, warmup: int = 2):
        self.stacked, self.warmup = stacked, warmup
        self.device = stacked.params["log_alpha"].device
        self.graphed = self.device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.obs: torch.Tensor | None = None
        self.noise: torch.Tensor | None = None
        self.out: torch.Tensor | None = None
        self.captures = 0

    @torch.no_grad()
    def act(self, obs: list, generators: list[torch.Generator | None] | None = None) -> np.ndarray:
        """:meth:`StackedAgents.act`, from the graph on a GPU."""
        x = torch.from_numpy(self.stacked.act_input(obs, generators))
        noise = self.stacked.act_noise(generators)
        if self.graphed and (self.graph is None or self.obs.shape != x.shape or self.obs.dtype != x.dtype):
            try:
                self._capture(x, noise)
            except RuntimeError as err:  # acting is not worth a run: the same pass, eagerly, from now on
                import warnings

                warnings.warn(f"the runs' acting could not be recorded as a CUDA graph ({type(err).__name__}: {err}); "
                              "they act eagerly (the same pass)", RuntimeWarning, stacklevel=2)
                self.graphed, self.graph = False, None
        if not self.graphed:
            return self.stacked.act_drawn(x.to(self.device), noise).float().cpu().numpy()
        self.obs.copy_(x)
        self.noise.copy_(noise)
        self.graph.replay()
        return self.out.float().cpu().numpy()

    def _capture(self, x: torch.Tensor, noise: torch.Tensor) -> None:
        self.obs = torch.empty(x.shape, dtype=x.dtype, device=self.device)
        self.noise = torch.empty_like(noise)
        self.obs.copy_(x)
        self.noise.copy_(noise)
        # the noise is drawn outside the graph, so the pass draws nothing; acting changes no state
        self.graph, self.out = record(lambda: self.stacked.act_drawn(self.obs, self.noise), self.device, self.warmup)
        self.captures += 1
