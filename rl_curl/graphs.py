"""The agent's update as CUDA graphs (``rl_curl.train --cuda-graphs``): the same update, launched as one graph.

At batch 512 the update is about two thousand small operations, and on a GPU each costs a few microseconds of
Python and of kernel launch; the arithmetic itself (about 0.42 TFLOP) would take the GPU a few milliseconds.
:class:`GraphedUpdate` records the whole update once (a CUDA graph per kind of update step: with or without the
actor, the target update, the auxiliary loss) and then replays it with one call per step. For that, nothing in the
update may read a value on the host, and every tensor it reads or writes across steps must stay where it is:

* the batch is gathered inside the graph from the replay on the device (:meth:`FrameReplay.gather`), from
  indices drawn on the host by the replay's own generator and copied into one fixed index tensor, so the batches
  are the default path's, transition for transition;
* the losses run without their host checks (``host_checks=False``); a NaN or infinite loss is recorded on the
  device (:meth:`CurlAgent.watch`) and read when the training loop logs or checkpoints;
* the Adam steps are ``capturable`` (step counts on the device);
* the random crops and the policy's noise come from the device's default generator, which a graph advances as the
  eager code would.

Before recording a kind of step, the update runs a few times eagerly on a side stream (cuDNN picks its algorithms,
Adam makes its state), and then the agent, its optimisers and the generator are put back exactly as they were
(:class:`Snapshot`), so that the run is the default path's run: the same updates on the same batches. On a CPU the
same update runs eagerly (no graph), which is what the tests compare with the default path, bit for bit.
"""

from __future__ import annotations

import numpy as np
import torch

from .agent import CurlAgent, actor_pass
from .replay import FrameReplay


class Snapshot:
    """A copy of everything an update changes: the agent's parameters and tensors, every optimiser's state (Adam's
    moments and step counts; parameters without state yet are remembered as such) and the random generator of the
    agent's device. :meth:`restore` writes it back in place, so every tensor keeps its memory (a captured graph
    reads and writes them there), and state that an update created since is set to what a fresh Adam starts
    from (zeros, step 0)."""

    def __init__(self, agent: CurlAgent):
        self.agent = agent
        self.tensors = [t.detach().clone() for t in self._tensors()]
        self.opt_state: list[dict] = []
        for opt in self._optimizers():
            state = {}
            for group in opt.param_groups:
                for p in group["params"]:
                    st = opt.state.get(p)
                    state[p] = None if not st else {k: (v.clone() if torch.is_tensor(v) else v) for k, v in st.items()}
            self.opt_state.append(state)
        dev = self._device()
        self.rng = torch.cuda.get_rng_state(dev) if dev.type == "cuda" else torch.get_rng_state()

    def _tensors(self) -> list[torch.Tensor]:
        a = self.agent
        return [*a.parameters(), *a.buffers()]  # the buffers: the non-finite flag

    def _optimizers(self) -> list[torch.optim.Optimizer]:
        return list(self.agent.optimizers().values())

    def _device(self) -> torch.device:
        return self.agent.log_alpha.device

    @torch.no_grad()
    def restore(self) -> None:
        for t, saved in zip(self._tensors(), self.tensors, strict=True):
            t.copy_(saved)
        for opt, saved in zip(self._optimizers(), self.opt_state, strict=True):
            for p, st in saved.items():
                now = opt.state.get(p)
                if not now:
                    continue
                for k, v in now.items():
                    if not torch.is_tensor(v):
                        now[k] = st[k] if st is not None else v
                    elif st is None:
                        v.zero_()  # a fresh Adam: zero moments, step 0
                    else:
                        v.copy_(st[k])
        dev = self._device()
        if dev.type == "cuda":
            torch.cuda.set_rng_state(self.rng, dev)
        else:
            torch.set_rng_state(self.rng)


def record(fn, device: torch.device, warmup: int):
    """``fn()`` recorded as one CUDA graph after ``warmup`` eager calls on a side stream (cuDNN's algorithm search),
    with the device's default generator put back after them, as if they never drew. Returns ``(graph, what fn
    returned while recorded)``: its output tensors, which every replay overwrites. What the acting graphs record
    (:class:`GraphedAct`, rl_curl.stacked.GraphedStackedAct); the update's own recording also puts back the agent
    (:class:`Snapshot`)."""
    rng = torch.cuda.get_rng_state(device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    torch.cuda.set_rng_state(rng, device)
    graph = torch.cuda.CUDAGraph()
    # thread_local: an evaluation in the background (--eval-async) may launch its own work meanwhile
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        out = fn()
    return graph, out


class GraphedUpdate:
    """``agent.update`` on the batch of replay indices ``idx``, replayed from CUDA graphs on a GPU (see the module's
    docstring); eager, with the same code, elsewhere. ``update(idx, step)`` returns the metrics as tensors that
    later updates overwrite in place (read them before the next update to keep a value)."""

    def __init__(self, agent: CurlAgent, replay: FrameReplay, batch_size: int, warmup: int = 3):
        self.replay = replay
        self._start(agent, [replay], (batch_size,), agent.log_alpha.device, warmup)

    def _start(self, agent, replays: list, idx_shape: tuple, device: torch.device, warmup: int) -> None:
        """What every graphed update sets up: ``agent`` (an agent, or the stacked runs) updating without host reads
        and with capturable Adam steps on ``device``, the replays sampled there, the index tensor the graphs read."""
        self.agent, self.warmup, self.device = agent, warmup, device
        self.graphed = device.type == "cuda"
        for replay in {id(r): r for r in replays}.values():  # one replay may serve several runs
            replay.enable_device_sampling()
            if replay.device != torch.empty(0, device=device).device:  # both as a tensor names its device
                raise ValueError(f"the replay's frames are on {replay.device}, the agent on {device}: --cuda-graphs "
                                 "needs the replay on the training device (--replay-on-device)")
        agent.host_checks = False
        agent.set_capturable(self.graphed)
        self.idx = torch.zeros(idx_shape, dtype=torch.int64, device=device)  # the graphs' input
        self.out: dict[str, torch.Tensor] = {}  # the graphs' outputs: fixed tensors, written in place
        self.graphs: dict[tuple, tuple[torch.cuda.CUDAGraph, tuple[str, ...]]] = {}  # kind -> (graph, its metrics)
        self.pool = None
        self.captures = 0
        self.generation = self._generation()

    def kind(self, step: int) -> tuple[bool, bool, bool]:
        """Which parts an update at ``step`` runs (the actor, the targets, the auxiliary loss): one graph each."""
        c = self.agent.cfg
        return (step % c.actor_update_every == 0, step % c.target_update_every == 0,
                c.aux != "none" and step % c.aux_update_every == 0)

    def _run(self, step: int) -> dict[str, torch.Tensor]:
        """The update itself, on the batch of the index tensor."""
        return self.agent.update(self.replay.gather(self.idx), step)

    def _update(self, step: int) -> dict[str, torch.Tensor]:
        metrics = self._run(step)
        for k, v in metrics.items():
            if k not in self.out:  # made outside any graph (the first eager run): its memory stays put
                self.out[k] = torch.zeros(v.shape, dtype=torch.float32, device=self.device)
            self.out[k].copy_(v.detach())
        return {k: self.out[k] for k in metrics}

    def _snapshot(self) -> Snapshot:
        return Snapshot(self.agent)

    def _generation(self) -> tuple:
        """The replay allocations the graphs read (a ring that moved to a larger one invalidates them)."""
        return (self.replay.generation,)

    def _capture(self, step: int) -> tuple[torch.cuda.CUDAGraph, tuple[str, ...]]:
        snap = self._snapshot()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            for _ in range(self.warmup):  # cuDNN's algorithm search, Adam's state, the outputs' tensors
                self._update(step)
        torch.cuda.current_stream(self.device).wait_stream(side)
        snap.restore()  # as if the warm-up never ran
        graph = torch.cuda.CUDAGraph()
        # thread_local: an evaluation in the background (--eval-async) may launch its own work meanwhile
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            keys = tuple(self._update(step))
        # Graphs share one memory pool: safe because they never run at once and everything that lives from one
        # update to the next (parameters, optimiser state, the index and output tensors) was allocated outside them.
        self.pool = graph.pool()
        self.captures += 1
        return graph, keys

    def update(self, idx: np.ndarray, step: int) -> dict[str, torch.Tensor]:
        # launched without waiting: CUDA stages the host indices before the call returns (rl_curl.replay's copies)
        self.idx.copy_(torch.from_numpy(np.asarray(idx, dtype=np.int64)), non_blocking=True)
        if not self.graphed:
            return self._update(step)
        if self._generation() != self.generation:  # a ring moved to a larger allocation: record again
            self.graphs, self.pool, self.generation = {}, None, self._generation()
        kind = self.kind(step)
        if kind not in self.graphs:
            self.graphs[kind] = self._capture(step)
        graph, keys = self.graphs[kind]
        graph.replay()
        return {k: self.out[k] for k in keys}


class GraphedAct:
    """A run's training action (``agent.act(obs, sample=True)``, its noise from the device's default generator) replayed
    from one CUDA graph on a GPU: the actor's pass on one observation is a few dozen small kernels whose launches cost
    more than their arithmetic, once per agent step. The observation is copied into a fixed input tensor, the graph
    reads the actor's parameters where they are (the update changes them in place) and draws the policy's noise from
    the default generator as the eager pass does (a replay advances it as the pass would). Recorded at the first call,
    after a warm-up on a side stream (cuDNN's algorithm search) with the generator put back after it; the recording
    is then checked once against the eager pass on the same observation and draws, and if the two differ by more than
    :attr:`TOLERANCE` (relative) or the recording fails, a warning says so and the run acts eagerly from then on. On a
    CPU the same pass runs eagerly: ``agent.act(obs, sample=True)`` exactly (tested)."""

    TOLERANCE = 1e-4

    def __init__(self, agent: CurlAgent, warmup: int = 2):
        self.agent, self.warmup = agent, warmup
        self.device = agent.log_alpha.device
        self.graphed = self.device.type == "cuda"
        self.graph: torch.cuda.CUDAGraph | None = None
        self.obs: torch.Tensor | None = None
        self.out: torch.Tensor | None = None
        self.captures = 0
        self.max_rel_err: float | None = None  # the recording against the eager pass, once recorded

    def _pass(self, x: torch.Tensor) -> torch.Tensor:
        """The sampled action ``[1, action_dim]`` for the uint8 observation ``x`` ``[1, C, H, W]`` on the device."""
        a = self.agent
        return actor_pass(a.actor, x, a.cfg.crop_size, a.autocast, sample=True)

    @torch.no_grad()
    def act(self, obs) -> np.ndarray:
        """``agent.act(obs, sample=True)`` for one uint8 observation ``[C, H, W]``; from the graph on a GPU."""
        x = torch.from_numpy(np.ascontiguousarray(obs))
        if x.dim() != 3:
            raise ValueError(f"obs must be [C, H, W], got shape {tuple(x.shape)}")
        x = x[None]
        if self.graphed and (self.graph is None or self.obs.shape != x.shape or self.obs.dtype != x.dtype):
            try:
                return self._capture(x)
            except RuntimeError as err:  # acting is not worth a run: the same pass, eagerly, from now on
                self._give_up(f"{type(err).__name__}: {err}")
        if not self.graphed:
            return self._pass(x.to(self.device, non_blocking=True)).float().cpu().numpy()[0]
        self.obs.copy_(x, non_blocking=True)
        self.graph.replay()
        return self.out.float().cpu().numpy()[0]

    def _give_up(self, why: str) -> None:
        import warnings

        warnings.warn(f"the run's acting could not be recorded as a CUDA graph ({why}); it acts eagerly (the same "
                      "pass)", RuntimeWarning, stacklevel=3)
        self.graphed, self.graph = False, None

    def _capture(self, x: torch.Tensor) -> np.ndarray:
        dev = self.device
        self.obs = torch.empty(x.shape, dtype=x.dtype, device=dev)
        self.obs.copy_(x)
        rng = torch.cuda.get_rng_state(dev)  # what the recording's check draws with (record puts it back too)
        graph, self.out = record(lambda: self._pass(self.obs), dev, self.warmup)
        self.graph = graph
        self.captures += 1
        # checked once: the eager pass and the graph on the same observation and the same draws
        want = self._pass(self.obs).float()
        torch.cuda.set_rng_state(rng, dev)
        graph.replay()
        got = self.out.float()
        err = float(((got - want).norm() / want.norm().clamp_min(1e-12)).item())
        self.max_rel_err = err
        if not err <= self.TOLERANCE:  # NaN fails too
            self._give_up(f"its action differs from the eager pass's by {err:.3g} relative")
            return want.cpu().numpy()[0]  # the eager pass drew exactly what the replay did
        return got.cpu().numpy()[0]
