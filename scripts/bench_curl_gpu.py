"""The update on a GPU: a self-test of the fast paths against the default one, their times at batch 512 side by side,
and where the time goes (issue 42). The first thing scripts/gpu_table3.sh runs on a GPU machine (--bench).

    python scripts/bench_curl_gpu.py --out OUT          # writes OUT/update_bench.json, selftest.txt, profile.txt

1. **Self-test** (selftest.txt; update_bench.json's "selftest"): for each fast path, two agents made from the same
   seed update on the same replay content with the same generator state, one the default way and one the fast way,
   for a few updates (with and without the actor step); then every metric and every parameter is compared,
   relative error ``|a - b| / |b|`` per tensor. The stacked update is checked twice: two runs stacked against each
   run's own default update (each run drawing from its own generator; in float64, tolerance 1e-9, see
   :func:`selftest_stacked`), and as CUDA graphs against itself eagerly; the runs' acting in one vmapped pass
   against each run's own (``stacked_act``, float64), and that pass as a CUDA graph against it eagerly
   (``graphs_stacked_act``, float32); a run's training action as a CUDA graph against its eager action
   (``graphs_act``, float32; a run also checks its recording once, rl_curl.graphs.GraphedAct); and the GPU replay's
   staged copies (``replay_staged``: a step's values copied into pinned slots and from there to the GPU without
   waiting, rl_curl.replay) against waiting copies, byte for byte, with the GPU busy so that the copies run late.
   The fused convolutions of ``--cudnn-conv-relu`` are checked twice: the graphed update against the same kernels
   run eagerly (``graphs_convrelu`` vs ``default_convrelu``: the fused kernel adds in another order than the default
   convolution, and Adam turns that into errors far above float32's within a few updates), and the kernel against
   the default convolution layer by layer, both measured against float64, with its outputs' memory NaN-filled first
   (``conv_relu_op``, :func:`check_conv_relu_op`); the path passes only with both.
   TF32 is off and cuDNN deterministic during the test, so what is compared is float32 arithmetic (tolerance 1e-4;
   NaN never passes; where the fused kernel fails without TF32, e.g. cuDNN has no fused engine for plain float32,
   the fused checks run with TF32 as the runs do, and say so). Each check's ``passed`` is what the slice reads before
   it uses that fast path.
2. **Timing** (update_bench.json's "variants"): ms per update, sampling included, as rl_curl.train does it, after a
   warm-up (cuDNN's algorithm search; the graphs' capture); CUDA events around ``updates`` updates, twice. Variants:
   ``checked`` (the update as of commit b3b304f: the losses' host checks on, one device sync per update; host
   replay), ``default`` (today's default: no host check; host replay), ``device_replay`` (the same, replay on the
   GPU; ``device_replay_convrelu`` with --cudnn-conv-relu), ``graphs`` (--cuda-graphs --replay-on-device),
   ``graphs_bf16`` (with --mixed-precision bf16), and
   ``graphs_fused`` (the fused schedule: not the official update, half the convolutions), ``graphs_convrelu``
   (``graphs`` with --cudnn-conv-relu: each convolution, its bias and its ReLU one cuDNN kernel) and
   ``graphs_bf16_convrelu`` (both), and ``graphs_stacked`` / ``stacked`` (``--stack`` runs' updates as one,
   rl_curl.stacked, as CUDA graphs and eagerly; timed per update of all the runs, ``ms_per_run_update`` per run) and
   ``graphs_stacked22`` (the 22 runs of DCL Table 3's cartpole column in one graphed update),
   timed in the order checked, default, graphs, graphs_convrelu, graphs_bf16_convrelu, graphs_stacked,
   graphs_stacked22, then the profile (3.), then the acting of
   ``--stack`` runs (update_bench.json's "acting": one run's act eagerly and as a CUDA graph; each run's act in
   turn against one vmapped pass,
   :meth:`rl_curl.stacked.StackedAgents.act`, eagerly and as a CUDA graph), the replay's adds after their update
   (update_bench.json's "replay_add": copies to the GPU that wait, copies launched without waiting from the caller's
   pageable arrays, and copies launched from pinned staging slots, :func:`time_replay_add`), then the others (a
   deadline skips the last first). Each with its
   TFLOP/s and GB/s (the FLOPs of one update by torch's FlopCounterMode, and the bytes it touches if every operator
   reads its inputs and writes its outputs once: the two numbers whose rates bound the time) and its peak GPU memory.
   The byte count sees operators as dispatched: the bias add that PyTorch's cuDNN convolution launches inside the
   operator is not in it, so the default's count is low by one read and write of every convolution's output.
3. **Profile** (profile.txt; "profile"): torch.profiler over a few updates of ``device_replay_convrelu`` (the
   kernels of ``graphs_convrelu`` launched one by one), ``graphs_convrelu`` and ``device_replay``, in that order
   (PROFILED): kernels per update, their summed GPU time, the host's time, and the 15 kernels that take the most GPU
   time.

Also recorded first: ms per cartpole frame from dm_control's ``physics.render`` and from the environment's kept camera
("render"), and ("autocast_under_vmap") the dtype a convolution and a linear layer give under bf16 autocast,
plainly and vmapped (on the CPU build of torch 2.13 a vmapped convolution is not cast), before a bf16 stacked update
is built.

Every step is guarded: a variant that fails is recorded with its error and the rest go on, so the command always
leaves its files. On a CPU (the tests) the same runs with tiny networks (``--tiny``): graphs become eager updates.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import functools
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np
import torch

from rl_curl.agent import CurlAgent
from rl_curl.config import Config
from rl_curl.graphs import GraphedAct, GraphedUpdate
from rl_curl.replay import FrameReplay
from rl_curl.stacked import GraphedStackedAct, GraphedStackedUpdate, StackedAgents

#: name -> how the variant updates: replay on the device, CUDA graphs, bf16 autocast, host checks, schedule
VARIANTS = {
    "checked": dict(device_replay=False, graphs=False, bf16=False, host_checks=True, update="official"),
    "default": dict(device_replay=False, graphs=False, bf16=False, host_checks=False, update="official"),
    "graphs": dict(device_replay=True, graphs=True, bf16=False, host_checks=False, update="official"),
    "graphs_convrelu": dict(device_replay=True, graphs=True, bf16=False, host_checks=False, update="official",
                            conv_relu=True),
    # --stack runs in one update (rl_curl.stacked), eager and as CUDA graphs; timed per update of all the runs
    "graphs_stacked": dict(device_replay=True, graphs=True, bf16=False, host_checks=False, update="official",
                           stacked=True),
    "stacked": dict(device_replay=True, graphs=False, bf16=False, host_checks=False, update="official", stacked=True),
    # the 22 runs of DCL Table 3's cartpole column in one update
    "graphs_stacked22": dict(device_replay=True, graphs=True, bf16=False, host_checks=False, update="official",
                             stacked=True, stack=22),
    "device_replay": dict(device_replay=True, graphs=False, bf16=False, host_checks=False, update="official"),
    # graphs_convrelu's kernels launched one by one (what its profile is taken of, see PROFILED)
    "device_replay_convrelu": dict(device_replay=True, graphs=False, bf16=False, host_checks=False, update="official",
                                   conv_relu=True),
    "graphs_bf16": dict(device_replay=True, graphs=True, bf16=True, host_checks=False, update="official"),
    "graphs_fused": dict(device_replay=True, graphs=True, bf16=False, host_checks=False, update="fused"),
    "graphs_bf16_convrelu": dict(device_replay=True, graphs=True, bf16=True, host_checks=False, update="official",
                                 conv_relu=True),
}
#: Timed first, before the profiles: the variants the slices choose between (and the first update, the baseline).
PRIMARY = ("checked", "default", "graphs", "graphs_convrelu")
#: Timed right after PRIMARY: the update with the fewest bytes (bf16 and the fused convolutions; at batch 512 on an
#: H200 the update is mostly kernel time, bounded by the bytes it moves: docs/results/rl_curl.md). Not a path the
#: slices choose (bf16 is not float32 arithmetic), but the lever the 3 ms goal needs, so a deadline does not skip it.
LEVERS_EARLY = ("graphs_bf16_convrelu",)
#: Timed after those, before the profiles: whether many runs in one graphed update pay (what decides whether
#: the slices train their runs together, rl_curl.together).
STACKED_EARLY = ("graphs_stacked", "graphs_stacked22")
#: Profiled (after PRIMARY, before the other variants).
#: Profiled, in this order: the kernels of the fastest float32 update launched one by one (the same kernels as its
#: CUDA graph; the profiler's view of kernels inside a graph is not trusted: CUPTI before CUDA 13.1 misreports
#: them), the graph itself (to see what the profiler makes of it), and the unfused update's kernels. The default
#: update's profile (checked) was taken on an H200 on 2026-12-04.
PROFILED = ("device_replay_convrelu", "graphs_convrelu", "device_replay")
#: The self-test: (fast path, the path it must equal).
#: graphs_convrelu is compared with the same fused convolutions run eagerly (isolating the graph, as graphs against
#: default does): on a GPU the fused kernel adds in another order than the default convolution, which Adam turns into
#: relative errors far above float32's within a few updates. The kernel itself is checked against the default
#: convolution layer by layer, against float64, in the "conv_relu_op" check (:func:`check_conv_relu_op`).
SELFTESTS = (("graphs", "default"), ("graphs_fused", "default_fused"), ("graphs_convrelu", "default_convrelu"))
TINY = dict(num_filters=4, num_layers=2, hidden_dim=16, feature_dim=8, image_size=20, crop_size=16)


@dataclass
class Args:
    """Self-test and time rl_curl's update paths on this machine's GPU (or, with --tiny, its CPU)."""

    out: str = ""
    """Folder for update_bench.json, selftest.txt and profile.txt (created; empty = print only)."""
    batch: int = 512
    """Batch size (DCL Table 3 and the CURL paper's table: 512)."""
    updates: int = 40
    """Timed updates per repetition (steps alternate, so the actor runs every second one)."""
    repeats: int = 2
    """Timed repetitions per variant (the spread says how much a difference must be to count)."""
    variants: list[str] = field(default_factory=lambda: list(VARIANTS))
    """Variants to time: checked, default, graphs, graphs_convrelu, graphs_stacked, stacked, graphs_stacked22,
    device_replay, device_replay_convrelu, graphs_bf16, graphs_fused, graphs_bf16_convrelu."""
    stack: int = 6
    """Runs in the stacked variants (K agents' updates as one, rl_curl.stacked; their ms_per_run_update is the time
    of one stacked update divided by K)."""
    selftest_updates: int = 4
    """Updates compared in the self-test."""
    tolerance: float = 1e-4
    """Largest relative error the self-test accepts (float32 arithmetic, TF32 off)."""
    profile_updates: int = 6
    """Updates under torch.profiler for the profile (0 = no profile)."""
    capacity: int = 4000
    """Transitions in the timed replays (random frames; more than fits in the GPU's cache)."""
    deadline: float = 240.0
    """Seconds after which the remaining variants and the profile are skipped (recorded as such)."""
    tiny: bool = False
    """Tiny networks and 20-pixel frames (the CPU tests)."""
    device: str = "auto"
    """auto (the GPU if there is one) or a torch device."""
    commit: str = ""
    """The code's commit, recorded (empty: unknown)."""


# ------------------------------------------------------------------------------------------------- set-up


def config(args: Args, update: str = "official", conv_relu: bool = False) -> Config:
    return Config(batch_size=args.batch, update=update, cudnn_conv_relu=conv_relu,
                  **(TINY if args.tiny else {})).resolved()


def make_agent(cfg: Config, device: torch.device, bf16: bool = False, host_checks: bool = False,
               seed: int = 0) -> CurlAgent:
    torch.manual_seed(seed)
    agent = CurlAgent(cfg.obs_shape, 1, cfg).to(device)
    agent.make_optimizers()
    agent.host_checks = host_checks
    if bf16:
        agent.autocast = functools.partial(torch.autocast, device.type, dtype=torch.bfloat16, cache_enabled=False)
    return agent


def make_replay(cfg: Config, capacity: int, device: torch.device | None) -> FrameReplay:
    """A replay of random frames (never zeros: they hide unwritten memory and run faster than real data), wrapped
    around once, the same content for every call."""
    rng = np.random.default_rng(0)
    rep = FrameReplay(capacity, cfg.obs_shape, 1, cfg.frame_stack, seed=1, device=device)
    obs = rng.integers(0, 256, cfg.obs_shape, dtype=np.uint8)
    for i in range(capacity + capacity // 4):
        if i % 125 == 0:
            rep.start_episode(obs)
        nxt = np.concatenate([obs[3:], rng.integers(0, 256, (3, *cfg.obs_shape[1:]), dtype=np.uint8)])
        rep.add(rng.uniform(-1, 1, 1), float(rng.normal()), nxt, i % 125 == 124)
        obs = nxt
    return rep


def stepper(args: Args, v: dict, device: torch.device, agent: CurlAgent | None = None):
    """``(agent, step(i) -> metrics)`` of a variant: one update at step i, its batch sampled as rl_curl.train does.
    A stacked variant's "agent" is the :class:`StackedAgents` of ``--stack`` runs (one replay serves them all)."""
    cfg = config(args, v["update"], v.get("conv_relu", False))
    if v.get("stacked"):
        return stacked_stepper(args, v, cfg, device)
    agent = agent or make_agent(cfg, device, v["bf16"], v["host_checks"])
    rep = make_replay(cfg, args.capacity, device if v["device_replay"] else None)
    if v["graphs"]:
        fast = GraphedUpdate(agent, rep, cfg.batch_size)
        return agent, lambda i: fast.update(rep.sample_indices(cfg.batch_size), i)
    return agent, lambda i: agent.update(rep.sample(cfg.batch_size, device), i)


def stacked_stepper(args: Args, v: dict, cfg: Config, device: torch.device):
    K = v.get("stack", args.stack)
    runs = StackedAgents([make_agent(cfg, device, v["bf16"], v["host_checks"], seed=k) for k in range(K)])
    rep = make_replay(cfg, args.capacity, device)
    B = cfg.batch_size
    if v["graphs"]:
        fast = GraphedStackedUpdate(runs, [rep] * K, B)
        return runs, lambda i: fast.update(np.stack([rep.sample_indices(B) for _ in range(K)]), i)
    return runs, lambda i: runs.update([rep.sample(B, device) for _ in range(K)], i)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def strict_float32(device: torch.device, tf32: bool = False):
    """TF32 off and cuDNN deterministic inside the block (plain float32 arithmetic), restored after it. ``tf32``:
    cuDNN's convolutions may use TF32 as torch's default allows (matrix products still not), still deterministic."""
    b = torch.backends
    saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.deterministic, b.cudnn.benchmark)
    b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.deterministic, b.cudnn.benchmark = False, tf32, True, False
    try:
        yield
    finally:
        b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.deterministic, b.cudnn.benchmark = saved


def seed_all(seed: int, device: torch.device) -> None:
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed(seed)


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double().cpu(), b.detach().double().cpu()
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        return float("nan")
    den = b.norm().item()
    return (a - b).norm().item() / den if den > 0 else (a - b).norm().item()


def action_err(got: np.ndarray, want: np.ndarray) -> float:
    """The largest difference of two actions, relative to the reference's largest magnitude (at least 1: actions are
    in [-1, 1]); what the acting checks compare with their tolerance."""
    return float(np.abs(got - want).max() / max(1.0, float(np.abs(want).max())))


# ------------------------------------------------------------------------------------------------- parts


def selftest(args: Args, device: torch.device) -> dict:
    """Every fast path of SELFTESTS against its reference, on the same batches and random draws."""
    checks, lines = [], []
    ref_variants = {"default": VARIANTS["default"], "default_fused": {**VARIANTS["default"], "update": "fused"},
                    "default_convrelu": {**VARIANTS["default"], "conv_relu": True}}

    def run_pair(fast_name: str, ref_name: str) -> dict:
        runs = {}
        for name, v in ((ref_name, ref_variants[ref_name]), (fast_name, VARIANTS[fast_name])):
            agent, step = stepper(args, v, device)
            metrics = []
            for i in range(args.selftest_updates):
                seed_all(1000 + i, device)
                metrics.append({k: t.detach().clone() for k, t in step(i).items()})
            sync(device)
            runs[name] = (agent, metrics)
        (ra, rm), (fa, fm) = runs[ref_name], runs[fast_name]
        return compare(fast_name, ref_name, args.selftest_updates, fm, rm, [fa.state_dict()], [ra.state_dict()],
                       args.tolerance)

    for fast_name, ref_name in SELFTESTS:
        try:
            try:
                with strict_float32(device):
                    check = run_pair(fast_name, ref_name)
            except RuntimeError as err:
                if not VARIANTS[fast_name].get("conv_relu"):
                    raise
                # cuDNN may have no fused engine for plain float32 (its error's wording varies between versions):
                # compare the graph with the eager fused update as the runs compute them (TF32 as torch leaves it),
                # still deterministic
                with strict_float32(device, tf32=True):
                    check = run_pair(fast_name, ref_name)
                check["tf32"], check["float32_error"] = True, repr(err)
                check["line"] = check["line"].replace(" -> ", f" (TF32 as in training; without it: {err!r}) -> ")
            lines.append(check.pop("line"))
            checks.append(check)
        except Exception as err:  # recorded, never fatal: the slice then runs the default path
            checks.append({"path": fast_name, "against": ref_name, "passed": False, "error": repr(err),
                           "traceback": traceback.format_exc()[-3000:]})
            lines.append(f"{fast_name} vs {ref_name}: ERROR {err!r}")
    check = check_conv_relu_op(args, device)
    checks.append(check)
    lines.append(check.pop("line"))
    with strict_float32(device):
        stacked_checks = selftest_stacked(args, device) + [check_graphed_single_act(args, device),
                                                           check_replay_staged(args, device)]
    for check in stacked_checks:
        checks.append(check)
        lines.append(check.pop("line"))
    passed = bool(checks) and all(c["passed"] for c in checks)
    lines.append(f"self-test {'PASSED' if passed else 'FAILED'} (tolerance {args.tolerance:g}, TF32 off)")
    return {"passed": passed, "tolerance": args.tolerance, "checks": checks, "text": "\n".join(lines)}


def compare(name: str, against: str, updates: int, got: list[dict], want: list[dict], got_states: list[dict],
            want_states: list[dict], tolerance: float) -> dict:
    """A self-test check: every metric (per update) and every state tensor (per run; named ``runR NAME`` when there are
    several runs) of a fast path against its reference, relative error per tensor; its line of selftest.txt under
    "line"."""
    m_err = max((rel_err(g[k], w[k]) for g, w in zip(got, want) for k in w), default=0.0)
    keys_same = all(g.keys() == w.keys() for g, w in zip(got, want))
    several = len(want_states) > 1
    p_errs = {(f"run{r} {k}" if several else k): rel_err(gs[k], ws[k])
              for r, (gs, ws) in enumerate(zip(got_states, want_states, strict=True)) for k in ws}
    worst = max(p_errs, key=lambda k: (np.nan_to_num(p_errs[k], nan=np.inf), k))
    ok = keys_same and all(np.isfinite(e) and e <= tolerance for e in (*p_errs.values(), m_err))
    return {"path": name, "against": against, "updates": updates, "max_rel_err_metrics": m_err,
            "max_rel_err_params": p_errs[worst], "worst_param": worst, "same_metrics": keys_same, "passed": bool(ok),
            "line": f"{name} vs {against}, {updates} updates: metrics {m_err:.3g}, parameters {p_errs[worst]:.3g} "
                    f"({worst}) -> {'PASS' if ok else 'FAIL'}"}


#: Tolerance of the stacked update against the runs' own updates, compared in float64.
STACKED_FLOAT64_TOLERANCE = 1e-9


def float64_agent(cfg: Config, device: torch.device, seed: int) -> CurlAgent:
    agent = make_agent(cfg, device, seed=seed).double()
    agent.make_optimizers()
    return agent


def selftest_stacked(args: Args, device: torch.device, runs: int = 2) -> list[dict]:
    """The stacked update (rl_curl.stacked) of ``runs`` agents against each agent's own default update on the same
    batches, each run drawing from its own generator seeded as the default generator is before the single update, in
    float64: a grouped convolution adds in another order than a plain one, and in float32 Adam turns that rounding
    into steps of the learning rate's size on parameters whose gradient is near zero (4e-3 relative error after 4
    updates at the paper's sizes on a CPU), while in float64 the two agree to about 1e-12. Then the graphed stacked
    update against the eager one in float32 (the same kernels; both from the default generator)."""
    cfg = config(args)
    n = args.selftest_updates
    out = []
    try:
        rep = make_replay(cfg, args.capacity, None)
        batches = [[rep.sample(cfg.batch_size, device) for _ in range(runs)] for _ in range(n)]
        singles = [float64_agent(cfg, device, k) for k in range(runs)]
        stacked = StackedAgents([float64_agent(cfg, device, k) for k in range(runs)])
        want, got = [], []
        for i in range(n):
            row = {}
            for k, (a, b) in enumerate(zip(singles, batches[i])):
                seed_all(1000 + 10 * i + k, device)
                row.update({f"run{k} {name}": t.detach().clone() for name, t in a.update(b, i).items()})
            want.append(row)
            gens = [torch.Generator(device).manual_seed(1000 + 10 * i + k) for k in range(runs)]
            m = stacked.update(batches[i], i, gens)
            got.append({f"run{k} {name}": t[k].detach().clone() for name, t in m.items() for k in range(runs)})
        sync(device)
        check = compare("stacked", "default", n, got, want, [a.state_dict() for a in stacked.to_agents()],
                        [a.state_dict() for a in singles], STACKED_FLOAT64_TOLERANCE)
        check.update(dtype="float64", tolerance=STACKED_FLOAT64_TOLERANCE)
        check["line"] = check["line"].replace("updates:",
                                              f"updates in float64 (tolerance {STACKED_FLOAT64_TOLERANCE:g}):")
        out.append(check)
        out.append(check_stacked_act(stacked, singles, device))
    except Exception as err:  # recorded, never fatal
        out.append({"path": "stacked", "against": "default", "passed": False, "error": repr(err),
                    "traceback": traceback.format_exc()[-3000:], "line": f"stacked vs default: ERROR {err!r}"})
    try:
        rep = make_replay(cfg, args.capacity, device)
        pair = {}
        for name in ("stacked", "graphs_stacked"):
            stacked = StackedAgents([make_agent(cfg, device, seed=k) for k in range(runs)])
            fast = GraphedStackedUpdate(stacked, [rep] * runs, cfg.batch_size)
            if name == "stacked":
                fast.graphed = False  # the same update, eager
            rep.rng = np.random.default_rng(5)  # the same indices for both
            metrics = []
            for i in range(n):
                seed_all(2000 + i, device)
                idx = np.stack([rep.sample_indices(cfg.batch_size) for _ in range(runs)])
                metrics.append({f"run{k} {key}": t[k].detach().clone() for key, t in fast.update(idx, i).items()
                                for k in range(runs)})
            sync(device)
            pair[name] = (metrics, [a.state_dict() for a in stacked.to_agents()])
        out.append(compare("graphs_stacked", "stacked", n, pair["graphs_stacked"][0], pair["stacked"][0],
                           pair["graphs_stacked"][1], pair["stacked"][1], args.tolerance))
    except Exception as err:
        out.append({"path": "graphs_stacked", "against": "stacked", "passed": False, "error": repr(err),
                    "traceback": traceback.format_exc()[-3000:], "line": f"graphs_stacked vs stacked: ERROR {err!r}"})
    out.append(check_graphed_act(args, device, runs))
    return out


def check_graphed_act(args: Args, device: torch.device, runs: int = 2) -> dict:
    """The runs' acting as a CUDA graph (:class:`rl_curl.stacked.GraphedStackedAct`, what rl_curl.together acts with
    under --cuda-graphs) against the same acting eagerly (:meth:`StackedAgents.act`), in float32 on the same
    observations and generators, twice (the call that records the graph, then a replay on other observations)."""
    try:
        cfg = config(args)
        stacked = StackedAgents([make_agent(cfg, device, seed=k) for k in range(runs)])
        graphed = GraphedStackedAct(stacked)
        errs = []
        for i in range(2):
            obs, gens = acting_inputs(stacked, device, seed=i)
            want, got = stacked.act(obs, gens(4000 + 10 * i)), graphed.act(obs, gens(4000 + 10 * i))
            errs.append(action_err(got, want))
        worst = float(np.max(errs))
        ok = bool(np.isfinite(worst) and worst <= args.tolerance)
        return {"path": "graphs_stacked_act", "against": "stacked_act", "tolerance": args.tolerance,
                "max_rel_err_actions": worst, "graphed": graphed.graphed, "passed": ok,
                "line": f"graphs_stacked_act vs stacked_act, 2 steps of {runs} runs: actions {worst:.3g} -> "
                        f"{'PASS' if ok else 'FAIL'}"}
    except Exception as err:  # recorded, never fatal
        return {"path": "graphs_stacked_act", "against": "stacked_act", "passed": False, "error": repr(err),
                "traceback": traceback.format_exc()[-3000:],
                "line": f"graphs_stacked_act vs stacked_act: ERROR {err!r}"}


def check_replay_staged(args: Args, device: torch.device, episodes: int = 5, length: int = 11) -> dict:
    """The GPU replay's staged copies (:attr:`rl_curl.replay.FrameReplay.staging`, on by default on a GPU: a step's
    frame and rows copied into a pinned slot, then to the GPU without waiting, the slot reused once its event says
    the copies ran) against copies that wait, straight from the caller's arrays. The steps are fed as an environment
    loop feeds them (one observation array and one action array, overwritten once the replay has taken them), and
    before each episode a long kernel is queued (on a GPU), so that the staged copies run well after the host moved
    on; the frame ring and the device rows must then be equal byte for byte, over more steps than there are slots."""
    try:
        cfg = config(args)
        reps = {}
        for way in ("waiting", "staged"):
            rep = FrameReplay(max(args.capacity, 16), cfg.obs_shape, 1, cfg.frame_stack, seed=1, device=device)
            rep.enable_device_sampling()
            rep.blocking_copies, rep.staging = way == "waiting", way == "staged"
            rng = np.random.default_rng(11)
            obs, act = np.empty(cfg.obs_shape, np.uint8), np.empty(1, np.float32)
            for _ in range(episodes):
                if device.type == "cuda":
                    torch.cuda._sleep(50_000_000)  # tens of ms of a busy GPU: the copies queue behind it
                obs[...] = rng.integers(0, 256, cfg.obs_shape, dtype=np.uint8)
                rep.start_episode(obs)
                for t in range(length):
                    obs[...], act[...] = rng.integers(0, 256, cfg.obs_shape, dtype=np.uint8), rng.uniform(-1, 1, 1)
                    rep.add(act, float(rng.normal()), obs, t == length - 1)
                    obs[...], act[...] = 0, 0.0
            sync(device)
            reps[way] = rep
        want, got = reps["waiting"], reps["staged"]
        n = min(want.frames_written, want.frame_capacity)
        differ = {"frames": int((got.frames[:n] != want.frames[:n]).sum())}
        differ.update({name: int((got._dev[name] != want._dev[name]).sum()) for name in want._dev})
        steps = episodes * length
        ok = steps > FrameReplay.STAGING_SLOTS and not any(differ.values())
        return {"path": "replay_staged", "against": "waiting copies", "steps": steps, "values_differing": differ,
                "passed": bool(ok),
                "line": f"replay_staged vs waiting copies, {steps} steps"
                        f"{' with the GPU busy' if device.type == 'cuda' else ''}: "
                        f"{sum(differ.values())} values differ -> {'PASS' if ok else 'FAIL'}"}
    except Exception as err:  # recorded, never fatal
        return {"path": "replay_staged", "against": "waiting copies", "passed": False, "error": repr(err),
                "traceback": traceback.format_exc()[-3000:], "line": f"replay_staged vs waiting copies: ERROR {err!r}"}


def poison_cache(device: torch.device, sizes: list[int]) -> None:
    """Blocks of the caching allocator filled with NaN and freed, one of each byte size, so that the next tensors of
    those sizes (outputs made with ``torch.empty``) start as NaN bit patterns instead of zeros or old data."""
    blocks = [torch.full((max(1, n // 4),), float("nan"), device=device) for n in sizes]
    sync(device)
    del blocks


def check_conv_relu_op(args: Args, device: torch.device) -> dict:
    """The fused convolution of ``--cudnn-conv-relu`` (rl_curl.networks.ConvReLU: on a GPU, cuDNN's convolution, bias
    and ReLU in one kernel) against the default one (``relu_(conv2d)``), layer by layer at the update's sizes: the
    trunk's output for a batch of random crops, and every weight's and bias's gradient for a fixed random output
    gradient. Both float32 computations are measured against the same trunk in float64, twice: with TF32 off (plain
    float32: the fused path's error must be within the tolerance) and with TF32 as torch leaves it for cuDNN (as
    the runs train: its error must be at most twice the default's plus 1e-6). Before every fused pass the allocator's
    blocks of the activations' sizes are filled with NaN (cuDNN's fused kernel takes its output, made with
    ``torch.empty``, as an addend scaled by zero, so a kernel that read it would turn NaN into its result); any
    non-finite value fails. On a CPU the fused path is the default computation, so only the plumbing is checked."""
    from rl_curl.networks import ConvTrunk, conv_output_size, weight_init

    try:
        cfg = config(args)
        torch.manual_seed(7)
        trunk = ConvTrunk(cfg.obs_shape[0], cfg.crop_size, cfg.num_filters, cfg.num_layers)
        trunk.apply(weight_init)
        for conv in trunk.convs:  # weight_init zeroes the biases and all but the centre taps: use every weight
            torch.nn.init.normal_(conv.weight, std=0.3)
            torch.nn.init.normal_(conv.bias, std=0.1)
        trunk = trunk.to(device, memory_format=torch.channels_last)
        gen = torch.Generator().manual_seed(8)
        obs = torch.randint(0, 256, (args.batch, cfg.obs_shape[0], cfg.crop_size, cfg.crop_size), generator=gen,
                            dtype=torch.uint8).to(device)
        g = torch.randn((args.batch, trunk.out_dim), generator=gen, dtype=torch.float64).to(device)
        sizes = [args.batch * conv.out_channels * conv_output_size(cfg.crop_size, i + 1) ** 2 * 4  # float32 bytes
                 for i, conv in enumerate(trunk.convs)]

        def run(net: ConvTrunk, fused: bool, dtype: torch.dtype) -> list[torch.Tensor]:
            net.cudnn_relu = fused
            net.zero_grad(set_to_none=True)
            if fused:
                poison_cache(device, sizes)
            out = net(obs)
            (out * g.to(dtype)).sum().backward()
            return [out.detach()] + [t.grad.detach() for c in net.convs for t in (c.weight, c.bias)]

        names = ["output"] + [f"conv{i} {t}.grad" for i in range(len(trunk.convs)) for t in ("weight", "bias")]
        ref = run(copy.deepcopy(trunk).double(), False, torch.float64)
        modes, ok, worst_line = {}, True, []
        for mode, tf32 in (("float32", False), ("tf32", True)):
            with strict_float32(device, tf32=tf32):
                try:
                    fused = run(trunk, True, torch.float32)
                except RuntimeError as err:  # e.g. cuDNN without a fused engine for plain float32
                    modes[mode] = {"error": repr(err)}
                    worst_line.append(f"{mode}: ERROR {err!r}")
                    ok = ok and mode == "float32"  # what the runs use (TF32 allowed) must work
                    continue
                plain = run(trunk, False, torch.float32)
            e_fused = {n: rel_err(a, b) for n, a, b in zip(names, fused, ref)}
            e_plain = {n: rel_err(a, b) for n, a, b in zip(names, plain, ref)}
            bound = {n: (args.tolerance if not tf32 else 2 * e_plain[n] + 1e-6) for n in names}
            bad = [n for n in names if not (np.isfinite(e_fused[n]) and e_fused[n] <= bound[n])]
            w = max(names, key=lambda n: np.nan_to_num(e_fused[n], nan=np.inf))
            modes[mode] = {"fused_rel_err": e_fused, "default_rel_err": e_plain, "failed": bad}
            ok = ok and not bad
            worst_line.append(f"{mode}: fused {e_fused[w]:.3g}, default {e_plain[w]:.3g} ({w})"
                              + (f", over the bound: {', '.join(bad)}" if bad else ""))
        return {"path": "conv_relu_op", "against": "relu(conv2d), both against float64", "tolerance": args.tolerance,
                "fused_kernel": device.type == "cuda", "modes": modes, "passed": bool(ok),
                "line": "conv_relu_op vs relu(conv2d), against float64, NaN-filled outputs: " + "; ".join(worst_line)
                        + f" -> {'PASS' if ok else 'FAIL'}"}
    except Exception as err:  # recorded, never fatal
        return {"path": "conv_relu_op", "against": "relu(conv2d)", "passed": False, "error": repr(err),
                "traceback": traceback.format_exc()[-3000:], "line": f"conv_relu_op vs relu(conv2d): ERROR {err!r}"}


def check_graphed_single_act(args: Args, device: torch.device) -> dict:
    """A run's training action as a CUDA graph (:class:`rl_curl.graphs.GraphedAct`, what rl_curl.train acts with under
    --cuda-graphs) against ``agent.act(obs, sample=True)`` eagerly, in float32 on the same observations and default
    generator state, twice (the call that records the graph, then a replay on another observation)."""
    try:
        agent = make_agent(config(args), device)
        graphed = GraphedAct(agent)
        rng, errs = np.random.default_rng(5), []
        for i in range(2):
            obs = rng.integers(0, 256, agent.cfg.obs_shape, dtype=np.uint8)
            seed_all(5000 + i, device)
            want = agent.act(obs, sample=True)
            seed_all(5000 + i, device)
            got = graphed.act(obs)
            errs.append(action_err(got, want))
        worst = float(np.max(errs))
        ok = bool(np.isfinite(worst) and worst <= args.tolerance)
        return {"path": "graphs_act", "against": "act", "tolerance": args.tolerance, "max_rel_err_actions": worst,
                "graphed": graphed.graphed, "recorded_rel_err": graphed.max_rel_err, "passed": ok,
                "line": f"graphs_act vs act, 2 steps: actions {worst:.3g}" + ("" if graphed.graphed or
                                                                            device.type != "cuda"
                                                                            else " (the graph was given up: eager)")
                        + f" -> {'PASS' if ok else 'FAIL'}"}
    except Exception as err:  # recorded, never fatal
        return {"path": "graphs_act", "against": "act", "passed": False, "error": repr(err),
                "traceback": traceback.format_exc()[-3000:], "line": f"graphs_act vs act: ERROR {err!r}"}


def autocast_under_vmap(device: torch.device) -> dict:
    """The dtype a convolution and a linear layer give under bf16 autocast, plainly and under ``torch.func.vmap`` (the
    stacked update's): on the CPU build of torch 2.13 a vmapped convolution is not cast (float32) while a vmapped
    linear layer is, so a stacked update under bf16 would keep its convolutions in float32. Recorded to see whether a
    GPU's autocast does the same before a bf16 stacked update is built."""
    import torch.nn.functional as F
    from torch.func import vmap

    try:
        x, w, b = (torch.randn(s, device=device) for s in ((2, 2, 4, 8, 8), (2, 5, 4, 3, 3), (2, 5)))
        xl, wl = torch.randn(2, 3, 7, device=device), torch.randn(2, 6, 7, device=device)
        with torch.autocast(device.type, dtype=torch.bfloat16):
            return {"conv2d": str(F.conv2d(x[0], w[0], b[0]).dtype),
                    "conv2d_vmapped": str(vmap(F.conv2d)(x, w, b).dtype),
                    "linear": str(F.linear(xl[0], wl[0]).dtype), "linear_vmapped": str(vmap(F.linear)(xl, wl).dtype)}
    except Exception as err:  # recorded, never fatal
        return {"error": repr(err)}


def render_row(frames: int = 100) -> dict:
    """ms per cartpole frame at 100x100 from dm_control's physics.render and from the environment's kept camera
    (scripts/bench_curl.py's render_times); recorded, never fatal (a machine that cannot render)."""
    try:
        from bench_curl import render_times

        return render_times("cartpole-swingup", frames)
    except Exception as err:  # noqa: BLE001 - recorded
        return {"error": repr(err)}


def acting_inputs(stacked: StackedAgents, device: torch.device, seed: int = 0):
    """One random uint8 observation per run and a generator per run (CPU ones for the observations' draws)."""
    rng = np.random.default_rng(seed)
    obs = [rng.integers(0, 256, stacked.cfg.obs_shape, dtype=np.uint8) for _ in range(stacked.K)]
    return obs, lambda base: [torch.Generator(device).manual_seed(base + k) for k in range(stacked.K)]


def check_stacked_act(stacked: StackedAgents, singles: list[CurlAgent], device: torch.device) -> dict:
    """The runs' acting in one vmapped pass (:meth:`StackedAgents.act`, what rl_curl.together acts with) against each
    run's own ``act(obs, sample=True, generator)`` with a generator seeded alike, in float64 after the stacked
    update's self-test (the two sides' parameters then agree to its tolerance)."""
    try:
        obs, gens = acting_inputs(stacked, device)
        got = stacked.act(obs, gens(3000))
        want = [a.act(o, sample=True, generator=g) for a, o, g in zip(singles, obs, gens(3000))]
        errs = [action_err(got[k], w) for k, w in enumerate(want)]
        worst = float(np.max(errs))  # a NaN propagates (Python's max would drop one that is not first)
        ok = bool(np.isfinite(worst) and worst <= STACKED_FLOAT64_TOLERANCE)
        return {"path": "stacked_act", "against": "act", "dtype": "float64", "tolerance": STACKED_FLOAT64_TOLERANCE,
                "max_rel_err_actions": worst, "passed": ok,
                "line": f"stacked_act vs act in float64 (tolerance {STACKED_FLOAT64_TOLERANCE:g}): actions of "
                        f"{stacked.K} runs {worst:.3g} -> {'PASS' if ok else 'FAIL'}"}
    except Exception as err:  # recorded, never fatal
        return {"path": "stacked_act", "against": "act", "passed": False, "error": repr(err),
                "traceback": traceback.format_exc()[-3000:], "line": f"stacked_act vs act: ERROR {err!r}"}


def time_acting(args: Args, device: torch.device) -> dict:
    """ms per environment step of acting: one run's ``act`` (``one_run_ms``) against its CUDA graph
    (:class:`rl_curl.graphs.GraphedAct`, a run alone under --cuda-graphs: ``one_run_graphed_ms``); for ``--stack``
    runs, each run's ``act`` in turn (runs trained together before they acted as one) against one
    :meth:`StackedAgents.act`, eagerly and as a CUDA graph, and the copy of every run's
    parameters out of the stacked tensors (what rl_curl.together did after every update before it copied a run's
    only when the run reads its agent). Wall clock (acting ends with the actions on the host), ``updates`` steps."""
    try:
        cfg = config(args)
        agents = [make_agent(cfg, device, seed=k) for k in range(args.stack)]
        stacked = StackedAgents(agents)
        obs, gens = acting_inputs(stacked, device)
        g_single, g_stacked, g_graphed = gens(0), gens(0), gens(0)
        graphed = GraphedStackedAct(stacked)

        def singles():
            for a, o, g in zip(agents, obs, g_single):
                a.act(o, sample=True, generator=g)

        alone = GraphedAct(agents[0])
        parts = {"one_run_ms": lambda: agents[0].act(obs[0], sample=True),
                 "one_run_graphed_ms": lambda: alone.act(obs[0]),
                 "single_ms": singles, "stacked_ms": lambda: stacked.act(obs, g_stacked),
                 "graphed_ms": lambda: graphed.act(obs, g_graphed),
                 "copy_back_ms": lambda: (stacked.to_agents(states=False), sync(device))}
        row: dict = {"runs": args.stack, "steps": args.updates}
        for key, fn in parts.items():
            for _ in range(3):
                fn()
            t0 = time.perf_counter()
            for _ in range(args.updates):
                fn()
            row[key] = round((time.perf_counter() - t0) * 1000 / args.updates, 3)
        row["one_run_speedup"] = round(row["one_run_ms"] / row["one_run_graphed_ms"], 2)
        row["speedup"] = round(row["single_ms"] / row["stacked_ms"], 2)
        row["graphed_speedup"] = round(row["single_ms"] / row["graphed_ms"], 2)
        return row
    except Exception as err:
        return {"error": repr(err), "traceback": traceback.format_exc()[-3000:]}


def time_replay_add(args: Args, device: torch.device) -> dict:
    """ms per environment step of ``--stack`` runs trained together, from the meeting's update to the next acting: the
    stacked update launched (CUDA graphs), then every run's ``FrameReplay.add`` of its step (device sampling on: the
    frame and four per-transition copies to the GPU each), then the wait for the GPU that the next acting makes. Two
    ways, alternated ``repeats`` times after a warm-up: the copies waiting (``blocking_copies``, rl_curl.replay up to
    2026-11-29: each add waits for the queued update), launched without waiting from the caller's pageable arrays
    (up to 2026-12-03; CUDA may still make such a copy wait for the stream), and launched from pinned staging slots
    (today's default on a GPU). ``*_add_ms``: the host's time in the adds (what the runs' threads could spend on other
    work meanwhile); ``*_step_ms``: the whole step. Wall clock; one replay serves every run here, as in the stacked
    variants."""
    try:
        cfg = config(args)
        K, B = args.stack, cfg.batch_size
        runs = StackedAgents([make_agent(cfg, device, seed=k) for k in range(K)])
        rep = make_replay(cfg, args.capacity, device)
        fast = GraphedStackedUpdate(runs, [rep] * K, B)  # turns on the replay's device sampling
        rng = np.random.default_rng(2)
        frame = rng.integers(0, 256, cfg.obs_shape, dtype=np.uint8)
        ways = ("blocking", "non_blocking", "staged")
        times: dict = {f"{w}_{part}": [] for w in ways for part in ("add_ms", "step_ms")}
        i = 0

        def steps(n: int) -> tuple[float, float]:
            nonlocal i
            add_s = step_s = 0.0
            for _ in range(n):
                w0 = time.perf_counter()
                fast.update(np.stack([rep.sample_indices(B) for _ in range(K)]), i)
                a0 = time.perf_counter()
                for _ in range(K):
                    rep.add(rng.uniform(-1, 1, 1), 0.0, frame, False)
                a1 = time.perf_counter()
                sync(device)  # the next acting reads the updated actor
                add_s, step_s, i = add_s + a1 - a0, step_s + time.perf_counter() - w0, i + 1
            return add_s * 1000 / n, step_s * 1000 / n

        steps(3)  # the graphs' capture (both kinds of step), cuDNN's search
        for _ in range(args.repeats):
            for w in ways:
                rep.blocking_copies, rep.staging = w == "blocking", w == "staged"
                add_ms, step_ms = steps(args.updates)
                times[f"{w}_add_ms"].append(round(add_ms, 3))
                times[f"{w}_step_ms"].append(round(step_ms, 3))
        row: dict = {"runs": K, "steps": args.updates, **times}
        for key in list(times):
            row[key.replace("_ms", "_median_ms")] = round(float(np.median(times[key])), 3)
        row["step_speedup"] = round(row["blocking_step_median_ms"] / row["non_blocking_step_median_ms"], 3)
        row["staged_step_speedup"] = round(row["blocking_step_median_ms"] / row["staged_step_median_ms"], 3)
        return row
    except Exception as err:
        return {"error": repr(err), "traceback": traceback.format_exc()[-3000:]}


#: Operators that only make a view (no memory traffic of their own).
VIEWS = frozenset({"view", "_unsafe_view", "t", "transpose", "permute", "expand", "as_strided", "detach", "unsqueeze",
                   "squeeze", "slice", "select", "diagonal", "alias", "_reshape_alias", "unfold", "empty",
                   "empty_strided", "empty_like"})


def bytes_touched(fn) -> float:
    """Bytes ``fn()`` reads and writes if every operator reads its inputs and writes its outputs once (no fusion, no
    cache): the memory-traffic model of an eager or graphed update. A view's input counts at most its storage."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    class Count(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, a=(), kw=None):
            out = func(*a, **(kw or {}))
            if func.__name__.split(".")[0] not in VIEWS:
                Count.total += sum(min(t.numel() * t.element_size(), t.untyped_storage().nbytes())
                                   for t in tree_flatten((a, kw, out))[0] if isinstance(t, torch.Tensor))
            return out

    with Count():
        fn()
    return float(Count.total)


def work_key(v: dict) -> str:
    """The suffix of a variant's counts in work_per_update: float32 or bf16, and _convrelu with --cudnn-conv-relu."""
    return ("bf16" if v["bf16"] else "float32") + ("_convrelu" if v.get("conv_relu") else "")


def work_per_update(args: Args, device: torch.device) -> dict:
    """FLOPs (torch's FlopCounterMode) and bytes touched (:func:`bytes_touched`) of one update, the mean of one
    without and one with the actor step, in float32 and under bf16 autocast, each without and with
    --cudnn-conv-relu (keys by :func:`work_key`): the two numbers behind every time."""
    from torch.utils.flop_counter import FlopCounterMode

    out: dict = {}
    for name in ("default", "graphs_bf16", "graphs_convrelu", "graphs_bf16_convrelu"):
        try:
            v = {**VARIANTS[name], "graphs": False, "device_replay": False}
            agent, step = stepper(args, v, device)
            step(0)  # Adam's state exists: count a steady update
            flops, moved = [], []
            for i in (1, 2):
                with FlopCounterMode(display=False) as fc:
                    step(i)
                flops.append(fc.get_total_flops())
                moved.append(bytes_touched(functools.partial(step, i + 2)))
            key = work_key(v)
            out[f"flops_{key}"], out[f"bytes_{key}"] = float(np.mean(flops)), float(np.mean(moved))
        except Exception as err:
            out[f"error_{name}"] = repr(err)
    return out


def time_variant(args: Args, name: str, device: torch.device, work: dict) -> dict:
    v = VARIANTS[name]
    runs = v.get("stack", args.stack) if v.get("stacked") else 1
    row: dict = {"name": name, **v, "runs": runs}
    try:
        if device.type == "cuda":
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(device)
        t0 = time.perf_counter()
        agent, step = stepper(args, v, device)
        for i in range(4):  # cuDNN's search; each kind of graph captured
            step(i)
        sync(device)
        row["warmup_seconds"] = round(time.perf_counter() - t0, 2)
        gpu_ms, wall_ms, i = [], [], 4
        for _ in range(args.repeats):
            start = torch.cuda.Event(enable_timing=True) if device.type == "cuda" else None
            end = torch.cuda.Event(enable_timing=True) if device.type == "cuda" else None
            w0 = time.perf_counter()
            if start is not None:
                start.record()
            for _ in range(args.updates):
                step(i)
                i += 1
            if end is not None:
                end.record()
            sync(device)
            wall = (time.perf_counter() - w0) * 1000 / args.updates
            wall_ms.append(round(wall, 3))
            gpu_ms.append(round(start.elapsed_time(end) / args.updates, 3) if start is not None else round(wall, 3))
        finite = agent.check_finite()  # a stacked variant: one flag per run
        row.update(ms_per_update=gpu_ms, wall_ms_per_update=wall_ms, median_ms=float(np.median(gpu_ms)),
                   finite=bool(all(finite) if isinstance(finite, list) else finite))
        row["ms_per_run_update"] = round(row["median_ms"] / runs, 3)
        flops, moved = work.get("flops_float32"), work.get(f"bytes_{work_key(v)}")
        if flops:
            row["tflops"] = float(f"{runs * flops / (row['median_ms'] / 1000) / 1e12:.4g}")
        if moved and v["update"] == "official":  # the fused schedule touches less: not counted
            row["gb_per_s"] = float(f"{runs * moved / (row['median_ms'] / 1000) / 1e9:.4g}")
        if device.type == "cuda":
            row["peak_memory_gib"] = round(torch.cuda.max_memory_allocated(device) / 2**30, 2)
    except Exception as err:
        row.update(error=repr(err), traceback=traceback.format_exc()[-3000:])
    return row


def _kernel_time_us(e) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total", "cuda_time_total"):
        value = getattr(e, attr, None)
        if value:
            return float(value)
    return 0.0


def profile_variant(args: Args, name: str, device: torch.device) -> dict:
    from torch.profiler import ProfilerActivity, profile

    try:
        agent, step = stepper(args, VARIANTS[name], device)
        for i in range(4):
            step(i)
        sync(device)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
        n = args.profile_updates
        t0 = time.perf_counter()
        with profile(activities=acts) as prof:
            for i in range(4, 4 + n):
                step(i)
            sync(device)
        wall = (time.perf_counter() - t0) * 1000 / n
        kernels = [e for e in prof.events() if str(getattr(e, "device_type", "")).endswith("CUDA")]
        table = ""
        for key in (("self_device_time_total", "self_cuda_time_total") if device.type == "cuda"
                    else ("self_cpu_time_total",)):
            try:
                table = prof.key_averages().table(sort_by=key, row_limit=15)
                break
            except (KeyError, AttributeError, ValueError, RuntimeError):
                continue
        ops = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::"))
        return {"name": name, "updates": n, "wall_ms_per_update": round(wall, 3),
                "kernels_per_update": round(len(kernels) / n, 1),
                "kernel_ms_per_update": round(sum(_kernel_time_us(e) for e in kernels) / 1000 / n, 3),
                "aten_ops_per_update": round(ops / n, 1), "table": table}
    except Exception as err:
        return {"name": name, "error": repr(err), "traceback": traceback.format_exc()[-3000:]}


# ------------------------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    from shared_losses.training.cli import parse_dataclass

    args = parse_dataclass(Args, args=argv, description=__doc__)
    unknown = [v for v in args.variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant {unknown[0]!r}; choose from {', '.join(VARIANTS)}")
    if args.batch < 2 or args.updates < 1 or args.repeats < 1 or args.capacity <= args.batch:
        raise ValueError("need --batch >= 2, --updates >= 1, --repeats >= 1 and --capacity > --batch")
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True  # as rl_curl.train (--cudnn-benchmark, its default)
    out = Path(args.out) if args.out else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    report: dict = {"device": name, "torch": torch.__version__, "commit": args.commit or "unknown",
                    "date": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d"), "batch": args.batch,
                    "sizes": "tiny" if args.tiny else "CURL paper (rl_curl.config defaults)",
                    "updates": args.updates, "repeats": args.repeats}

    def write() -> None:
        if out is not None:
            (out / "update_bench.json").write_text(json.dumps(report, indent=1) + "\n")

    print(f"bench_curl_gpu: {name}, torch {torch.__version__}, batch {args.batch}", flush=True)
    report["autocast_under_vmap"] = autocast_under_vmap(device)
    print(f"  bf16 autocast, plain and vmapped: {report['autocast_under_vmap']}", flush=True)
    report["render"] = render_row()
    print(f"  a cartpole frame (100x100): {report['render']}", flush=True)
    report["selftest"] = selftest(args, device)
    print(report["selftest"]["text"], flush=True)
    if out is not None:
        (out / "selftest.txt").write_text(report["selftest"]["text"] + "\n")
    write()
    report["work_per_update"] = work_per_update(args, device)
    work = report["work_per_update"]
    report["flops_per_update"] = work.get("flops_float32")
    print(f"  per update: {work.get('flops_float32', 0) / 1e12:.4g} TFLOP, {work.get('bytes_float32', 0) / 1e9:.4g} GB "
          f"touched in float32 ({work.get('bytes_bf16', 0) / 1e9:.4g} GB under bf16 autocast, "
          f"{work.get('bytes_float32_convrelu', 0) / 1e9:.4g} / {work.get('bytes_bf16_convrelu', 0) / 1e9:.4g} GB "
          "with --cudnn-conv-relu)", flush=True)
    report["variants"], report["profile"] = [], []

    def time_all(names: list[str]) -> None:
        for v in names:
            if time.perf_counter() - t_start > args.deadline:
                report["variants"].append({"name": v, "skipped": f"past the {args.deadline:.0f} s deadline"})
                continue
            row = time_variant(args, v, device, work)
            report["variants"].append(row)
            write()
            shown = (f"{row['median_ms']:8.3f} ms/update" + (f" of {row['runs']} runs ({row['ms_per_run_update']} ms "
                                                             "per run)" if row.get("runs", 1) > 1 else "")
                     + f" (repeats {row['ms_per_update']}; wall "
                     f"{row['wall_ms_per_update']})" + (f", {row['tflops']} TFLOP/s" if "tflops" in row else "")
                     + (f", {row['gb_per_s']} GB/s" if "gb_per_s" in row else "")
                     + (f", peak {row['peak_memory_gib']} GiB" if "peak_memory_gib" in row else "")
                     if "median_ms" in row else f"ERROR {row.get('error')}")
            print(f"  {v:20s} {shown}", flush=True)

    # What the slices choose between, the fewest bytes, runs together, then the profiles (where the time goes), then
    # acting, the replay's adds and the other variants: a deadline skips the last first.
    time_all([v for v in args.variants if v in PRIMARY])
    time_all([v for v in args.variants if v in LEVERS_EARLY])
    time_all([v for v in args.variants if v in STACKED_EARLY])
    if args.profile_updates > 0:
        texts = []
        for v in PROFILED:
            if time.perf_counter() - t_start > args.deadline:
                report["profile"].append({"name": v, "skipped": f"past the {args.deadline:.0f} s deadline"})
                continue
            p = profile_variant(args, v, device)
            report["profile"].append({k: x for k, x in p.items() if k != "table"})
            texts.append(f"== {v}: " + (json.dumps({k: x for k, x in p.items() if k != "table"}) + "\n" +
                                        p.get("table", "")))
            if out is not None:
                (out / "profile.txt").write_text("\n\n".join(texts) + "\n")
        write()
    if time.perf_counter() - t_start <= args.deadline:
        acting = report["acting"] = time_acting(args, device)
        write()
        print("  acting: " + (
            f"one run {acting['one_run_ms']} ms, as a CUDA graph {acting['one_run_graphed_ms']} ms "
            f"({acting['one_run_speedup']}x); {args.stack} runs {acting['single_ms']} ms one by one, "
            f"{acting['stacked_ms']} ms as one ({acting['speedup']}x), "
            f"{acting['graphed_ms']} ms as one CUDA graph ({acting['graphed_speedup']}x); copying "
            f"their parameters out of the stacked tensors {acting['copy_back_ms']} ms" if "error" not in acting
            else f"ERROR {acting['error']}"), flush=True)
    if time.perf_counter() - t_start <= args.deadline:
        added = report["replay_add"] = time_replay_add(args, device)
        write()
        print(f"  adding {args.stack} runs' steps to the GPU replay after their update: " + (
            f"{added['blocking_add_median_ms']} ms in the adds, {added['blocking_step_median_ms']} ms a step with the "
            f"copies waiting; {added['non_blocking_add_median_ms']} ms and {added['non_blocking_step_median_ms']} ms "
            f"launched without waiting ({added['step_speedup']}x a step); {added['staged_add_median_ms']} ms and "
            f"{added['staged_step_median_ms']} ms from pinned staging slots ({added['staged_step_speedup']}x)"
            if "error" not in added
            else f"ERROR {added['error']}"), flush=True)
    time_all([v for v in args.variants if v not in PRIMARY + LEVERS_EARLY + STACKED_EARLY])
    base = next((r for r in report["variants"] if r["name"] == "checked" and "median_ms" in r), None)
    for r in report["variants"]:
        if base and "median_ms" in r:  # per run's update (a stacked variant updates several)
            r["speedup_vs_checked"] = round(base["median_ms"] / r["ms_per_run_update"], 2)
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    write()
    print(f"bench_curl_gpu: {report['seconds']} s; self-test {'passed' if report['selftest']['passed'] else 'FAILED'}"
          + (f"; files in {out}" if out is not None else ""), flush=True)
    return 0


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
