"""Several rl_curl runs trained together in one process, their updates made as one (:mod:`rl_curl.stacked`).

    python -m rl_curl.together --objectives curl debiased:0.05:1 --seeds 0 1 2 -- --env-steps 100000
    python -m rl_curl.together --objectives curl --seeds 0 1 --output-root runs/cartpole -- --preset cpu-small

Every run is an ``rl_curl.train`` run in every other respect: its own folder (the one ``rl_curl.train`` would use,
or ``OUTPUT_ROOT/OBJECTIVE/seedS``), environment, replay, logs, evaluations, checkpoints and final summary, each
written by the same code. What the runs share is the acting and the update: each run trains in a thread of its own,
and at every update the runs meet; the last to arrive computes every run's action for the observation it brought and
then makes one update of all of them (:class:`rl_curl.stacked.StackedAgents`, the runs' parameters stacked, every
forward pass vmapped over the runs), and each run takes its own action and metrics and steps its environment. Each run
draws its policy noise and its update's random crops and noise from a generator of its own, started
where a run alone would start its device's default generator and saved in its checkpoints, so a run equals the same
run alone up to float rounding (a grouped convolution adds in another order), and resumes exactly.

Each run's environment steps in a worker process of its own (``--env-worker``, on here unless ``--no-env-worker``
is given after ``--``), and so do its evaluation's (``--eval-worker``, likewise), so that the runs' threads step
their environments side by side.

The runs must be in step: the same task and lengths and everything that shapes the update (sizes, learning rates,
schedules, M); they differ in seed and objective among those on the bilinear logits (``curl``, ``debiased``,
``hard``). With ``--cuda-graphs --replay-on-device`` (every run) the stacked update is replayed from CUDA graphs
(:class:`rl_curl.stacked.GraphedStackedUpdate`: batches gathered from each run's replay inside the graph, each run's
random draws made outside it from its own generator). Not yet supported (refused): ``--mixed-precision bf16``,
``--update fused``, ``--cudnn-conv-relu`` and CPC. Ctrl-C stops every run at the end of the same episode, each
with its checkpoint; ``--resume`` continues them together (runs at different steps are refused by name).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import sys
import threading
import traceback

import numpy as np

from .config import Config, from_cli, refuse_unused_encoder_lr
from .objectives import folder_name, parse_spec, spec_syntax

#: rl_curl.train options that --objectives, --seeds and --output-root set for every run.
PER_RUN = ("--aux", "--tau-plus", "--positives", "--beta", "--seed", "--output-dir")
#: What the runs must have in common beyond the update's settings (rl_curl.stacked.SHARED).
IN_STEP = ("task", "env_steps", "action_repeat", "seed_steps", "image_size", "camera_id", "device", "cuda_graphs")


class Together:
    """Where the runs meet to act and update: ``seat(k)`` is run k's handle (``update(batch, step, obs)``,
    ``refresh()``, ``sync()``). The stacked update is made at the first meeting, from the runs' agents as they are then
    (built, and loaded from their checkpoints on a resume). At each meeting every run's training action comes from one
    vmapped pass of the runs' actors (:meth:`rl_curl.stacked.StackedAgents.act`), then the update. A run's agent is
    written from the stacked tensors only when the run reads it (``refresh``: before its finiteness check, which
    precedes every log row, evaluation, checkpoint and export), and its optimiser states before each of its
    checkpoints (``sync``)."""

    def __init__(self, n: int, stop=None):
        self.stop = stop
        self.apps: list = [None] * n
        self.cond = threading.Condition()
        self.pending: dict[int, tuple] = {}
        self.results: dict[int, dict] = {}
        self.meetings = 0
        self.active = set(range(n))
        self.stacked = None
        self.graphed = None  # the stacked update as CUDA graphs (--cuda-graphs)
        self.acting = None  # what acts for the runs: the stacked agents, or their acting as a CUDA graph
        self.order: list[int] = []
        self.stale: set[int] = set()  # runs whose agent lags behind the stacked update
        self.failed: str | None = None

    def seat(self, k: int, app) -> "Seat":
        self.apps[k] = app
        return Seat(self, k)

    # ------------------------------------------------------------------------------------------------ meeting
    def update(self, k: int, batch, step: int, obs=None) -> tuple:
        """Run k's part of the meeting at ``step``: wait until every run still training has arrived (the last to
        arrive, or the one that finds so when a run leaves, makes the meeting's acting and update); run k's
        ``(action, metrics)``: its training action for ``obs`` (None without one), acted before the update as a run
        alone acts, and the update's metrics."""
        with self.cond:
            self._check()
            self.pending[k] = (batch, step, obs)
            meeting = self.meetings
            while self.meetings == meeting:
                self._check()
                if set(self.pending) >= self.active:
                    try:
                        self._update_all()
                    except BaseException as err:
                        self.failed = f"the stacked update failed ({type(err).__name__}: {err})"
                        self.cond.notify_all()
                        raise
                    break
                self.cond.wait()
            return self.results[k]

    def _check(self) -> None:
        if self.failed is not None:
            raise RuntimeError(f"stopped because another run trained together with this one stopped: {self.failed}")

    def _update_all(self) -> None:
        from .stacked import StackedAgents

        steps = {step for _, step, _ in self.pending.values()}
        if len(steps) != 1:
            at = ", ".join(f"{self.apps[k].cfg.output_dir} at agent step {s}"
                           for k, (_, s, _) in sorted(self.pending.items()))
            raise ValueError(f"the runs are not in step ({at}): runs trained together must be at the same step; "
                             "continue them one by one with `python -m rl_curl.train ... --resume`")
        step = steps.pop()
        if self.stacked is None:
            self.order = sorted(self.pending)
            self.stacked = StackedAgents([self.apps[k].agent for k in self.order])
            first = self.apps[self.order[0]].cfg
            self.acting = self.stacked
            if first.cuda_graphs:
                from .stacked import GraphedStackedAct, GraphedStackedUpdate

                self.graphed = GraphedStackedUpdate(self.stacked, [self.apps[k].replay for k in self.order],
                                                    first.batch_size)
                self.acting = GraphedStackedAct(self.stacked)  # the acting pass as a CUDA graph too
        elif sorted(self.pending) != self.order:
            raise RuntimeError("a run left before the others finished")
        batches = [self.pending[k][0] for k in self.order]
        generators = [self.apps[k].generator for k in self.order]
        # Every run's action for the observation it brought, from its parameters before this update and noise from
        # its generator ahead of the update's draws: a run alone acts, then updates.
        obs = [self.pending[k][2] for k in self.order]
        if any(o is None for o in obs) and not all(o is None for o in obs):
            raise RuntimeError("internal error: some runs brought an observation to act on and others not")
        actions = self.acting.act(obs, generators) if obs[0] is not None else [None] * len(obs)
        if self.graphed is not None:  # batches of replay indices; metrics in the graphs' output tensors
            metrics = self.graphed.update(np.stack(batches), step, generators)
        else:
            metrics = self.stacked.update(batches, step, generators)
        self.stale = set(self.order)  # each run's agent is written when the run next reads it (refresh)
        self.results = {k: (actions[i], {name: v[i] for name, v in metrics.items()}) for i, k in enumerate(self.order)}
        self.pending = {}
        if self.stop is not None and self.stop.requested:  # every run reads it after this same step
            for app in self.apps:
                if app.harness.stop is not None:
                    app.harness.stop.requested = True
        self.meetings += 1
        self.cond.notify_all()

    def refresh(self, k: int) -> None:
        """Run k's parameters and non-finite flag from the stacked update into its agent, if an update since the last
        refresh changed them: before the run reads its agent (its finiteness check, which comes before every log row,
        evaluation, checkpoint and export)."""
        with self.cond:
            if k in self.stale:
                self.stacked.to_agent(self.order.index(k), states=False)
                self.stale.discard(k)

    def sync(self, k: int) -> None:
        """Run k's parameters and optimiser states from the stacked update into its agent (before its checkpoint)."""
        with self.cond:
            if self.stacked is not None and k in self.order:
                self.stacked.to_agent(self.order.index(k))
                self.stale.discard(k)

    def leave(self, k: int, error: BaseException | None = None) -> None:
        """Run k's thread ends (finished, or failed with ``error``): the others stop waiting for it."""
        with self.cond:
            self.active.discard(k)
            if error is not None and self.failed is None:
                self.failed = f"{self.apps[k].cfg.output_dir}: {type(error).__name__}: {error}"
            elif self.stacked is not None and self.pending and k in self.order and self.failed is None:
                self.failed = f"{self.apps[k].cfg.output_dir} ended while the others were still training"
            self.cond.notify_all()


@dataclasses.dataclass
class Seat:
    """Run k's handle on :class:`Together` (``CurlApp.together``)."""

    table: Together
    k: int

    def update(self, batch, step: int, obs=None) -> tuple:
        return self.table.update(self.k, batch, step, obs)

    def refresh(self) -> None:
        self.table.refresh(self.k)

    def sync(self) -> None:
        self.table.sync(self.k)


# ---------------------------------------------------------------------------------------------------- the runs


def check_runs(cfgs: list[Config]) -> None:
    """Refuse, before anything is built or written, runs that cannot train together (naming what differs)."""
    from .stacked import check_stackable

    if not cfgs:
        raise ValueError("no runs to train together")
    dirs = [c.output_dir for c in cfgs]
    where = [os.path.realpath(d) for d in dirs]  # one folder spelled two ways (./x/, x, an absolute path, a link)
    for i, d in enumerate(where):
        if where.count(d) > 1:
            j = where.index(d, i + 1)
            same = "" if dirs[i] == dirs[j] else f" (given as {dirs[i]} and as {dirs[j]})"
            raise ValueError(f"two runs would write to {dirs[i]}{same}: give each objective and seed once")
    for c in cfgs:  # the stacked update runs without autocast (refused there by the agent's autocast context)
        if c.mixed_precision != "no":
            raise ValueError(f"{c.output_dir}: --mixed-precision {c.mixed_precision} is not supported by runs trained "
                             "together (rl_curl.together); train these runs one by one with rl_curl.train")
    check_stackable(cfgs, dirs, "runs trained together (rl_curl.together)", also=IN_STEP)


def check_checkpoints(apps) -> list:
    """The resume checks of every run, before any of them starts (in its thread a run writes its folder at once, so a
    refusal there would come after the others had begun): each checkpoint's options against its run's (the refusal
    names the folder and how to change one run of a group), no checkpoint of a run trained alone among runs still to
    train, and every run still to train at one step (a run added to a group that has trained would never meet it).
    Returns the configurations of the runs still to train."""
    from shared_losses.training.harness import ConfigChanged

    steps = {}
    to_train = []
    for app in apps:
        cfg, harness = app.cfg, app.harness
        if app.keeps_checkpoint:
            harness.refuse_resume_without_checkpoint(app.summary_file)
        saved = harness.saved_state()
        try:
            harness.refuse_changed_options(app.compare_options, saved, checkpoint_format=app.checkpoint_format)
        except ConfigChanged as err:
            text = str(err).split("; use the same options")[0]
            raise ConfigChanged(f"{text}; give that run its own options in its --run, or move its folder aside "
                                "yourself (--overwrite after -- moves every run's folder aside); nothing was "
                                "changed") from None
        if saved is not None and saved["step"] >= cfg.agent_steps:
            continue  # finished (or asked for fewer steps): its own check says so, it trains no step
        if saved is not None and "torch_generator" not in saved:
            raise ValueError(f"{cfg.output_dir}: its checkpoint was written by a run trained alone (rl_curl.train), "
                             "whose random stream is the process's, not a generator of its own: continue it alone "
                             "with `python -m rl_curl.train ... --output-dir "
                             f"{cfg.output_dir} --resume`, or leave it out of this group; nothing was changed")
        steps[cfg.output_dir] = 0 if saved is None else int(saved["step"])
        to_train.append(cfg)
    if len(set(steps.values())) > 1:
        at = ", ".join(f"{d} at agent step {s}" for d, s in steps.items())
        raise ValueError(f"the runs are not in step ({at}): runs trained together must be at the same step; continue "
                         "them one by one with `python -m rl_curl.train ... --resume`, or group the runs at one step; "
                         "nothing was changed")
    return to_train


def run_together(cfgs: list[Config]) -> list[dict]:
    """Train (or resume) the runs of ``cfgs`` together; returns their summaries, in order. A run that fails stops
    the others (each keeps its last checkpoint), and its error is raised."""
    from shared_losses.training.loop import run as run_app
    from shared_losses.training.runtime import RunInterrupted, StopSignals

    from .env import EnvWorker
    from .train import CurlApp, check_replay_memory, env_kwargs

    cfgs = [c.resolved() for c in cfgs]
    check_runs(cfgs)
    # every run's folder is checked here, before anything starts (rl_curl.train's check when a run is set up)
    apps = [CurlApp(c if k == 0 else dataclasses.replace(c, progress=False)) for k, c in enumerate(cfgs)]
    to_train = check_checkpoints(apps)  # in this thread, before any run writes: each run's own check is too late
    # every replay at once (each run's own check, when it is built, sees the memory the others will fill as free)
    check_replay_memory(to_train)
    results: list = [None] * len(cfgs)
    errors: list = [None] * len(cfgs)
    stop = StopSignals("stopping every run at the end of the same episode and writing its checkpoint (Ctrl-C again "
                       "to stop at once, losing the steps since the last checkpoints)")
    table = Together(len(cfgs), stop)

    def work(k: int) -> None:
        try:
            results[k] = run_app(apps[k])
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            traceback.clear_frames(err.__traceback__)  # the lines stay; the frames let go of the run's objects
            errors[k] = err
            table.leave(k, err)
        else:
            table.leave(k)
        finally:
            # A MuJoCo rendering context must be freed by the thread that made it: drop the run's environments
            # here (they were closed by the run) rather than wherever the garbage collector next runs.
            for name in ("env", "eval_envs"):
                if hasattr(apps[k], name):
                    setattr(apps[k], name, None)
            gc.collect()

    with stop:
        try:
            for k, app in enumerate(apps):
                app.together = table.seat(k, app)
                if app.cfg.env_worker:  # every run's worker starts now, side by side (each imports for seconds)
                    app.env_started = EnvWorker(wait=False, **env_kwargs(app.cfg))
            threads = [threading.Thread(target=work, args=(k,), name=f"rl_curl run {k}", daemon=True)
                       for k in range(len(apps))]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
        finally:
            for app in apps:  # a worker no run took (a finished run resumed builds nothing); closing twice is a no-op
                if app.env_started is not None:
                    app.env_started.close()
    if len(errors) > 1 and all(isinstance(e, RunInterrupted) for e in errors):  # stopped together: name every one
        folders = ", ".join(str(app.harness.checkpoint_dir) for app in apps)
        raise RunInterrupted(f"{errors[0].at} (checkpoints written to {folders})", at=errors[0].at) from errors[0]
    first = next((e for e in errors if e is not None and not _follows(e)), None) or \
        next((e for e in errors if e is not None), None)
    if first is not None:
        raise first
    return results


def _follows(err: BaseException) -> bool:
    """An error a run raised only because another run trained with it stopped first."""
    return isinstance(err, RuntimeError) and "another run trained together" in str(err)


def configs_from_cli(argv: list[str] | None = None) -> list[Config]:
    """The runs of ``python -m rl_curl.together ARGS``: one per objective and seed, other options rl_curl.train's."""
    argv = list(sys.argv[1:] if argv is None else argv)
    from shared_losses.training.cli import ArgumentParser, option_given  # usage errors: one error: line

    parser = ArgumentParser(
        prog="python -m rl_curl.together",
        description="Train several rl_curl runs together in one process, their updates made as one "
                    "(every objective with every seed). Options after -- are rl_curl.train's (python -m "
                    "rl_curl.train --help), the same for every run.",
        epilog=__doc__.split("\n\n")[2])
    parser.add_argument("--objectives", nargs="+", default=["curl"], metavar="SPEC",
                        help=f"objectives, each {spec_syntax()} (default: curl)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0], metavar="S", help="seeds (default: 0)")
    parser.add_argument("--output-root", default="",
                        help="folder of the runs (OUTPUT_ROOT/OBJECTIVE/seedS); default: each run's rl_curl.train "
                             "folder, runs/rl_curl/TASK/OBJECTIVE/seedS")
    parser.add_argument("--run", nargs=3, action="append", default=[], metavar=("SPEC", "SEED", "OUTPUT_DIR"),
                        help="one run by its objective, seed and folder (repeated; instead of --objectives, --seeds "
                             "and --output-root: what scripts/table3_gpu.py --speed together starts)")
    if "--" in argv:
        i = argv.index("--")
        own, rest = argv[:i], argv[i + 1:]
    else:
        own, rest = argv, []
    args = parser.parse_args(own)
    clash = [a.split("=")[0] for a in rest if option_given([a], *PER_RUN)]
    if clash:
        parser.error(f"{clash[0]} is set per run here: use --objectives, --seeds and --output-root (or --run)")
    if args.run and option_given(own, "--objectives", "--seeds", "--output-root"):
        parser.error("--run names each run whole: leave out --objectives, --seeds and --output-root")
    try:
        specs = [parse_spec(s) for s in args.objectives]
        runs = [(parse_spec(spec), seed, out) for spec, seed, out in args.run]
    except ValueError as err:
        parser.error(str(err))
    if len(set(args.seeds)) != len(args.seeds):
        parser.error(f"--seeds {' '.join(map(str, args.seeds))} names a seed twice")
    for _, seed, _ in args.run:
        if not seed.lstrip("-").isdigit():
            parser.error(f"--run ... {seed} ...: the seed must be an integer")
    base = from_cli(rest)
    # each run's environment, and its evaluation's, in a worker process unless --no-env-worker / --no-eval-worker:
    # threads would take turns for Python's interpreter lock while they step and render
    base = dataclasses.replace(base, env_worker=base.env_worker or not option_given(rest, "--no-env-worker"),
                               eval_worker=base.eval_worker or not option_given(rest, "--no-eval-worker"))
    if not runs:
        runs = [(spec, seed, "") for spec in specs for seed in args.seeds]
    cfgs = []
    for spec, seed, out in runs:
        fields = {"aux": spec["aux"], "tau_plus": spec.get("tau_plus", 0.0), "positives": spec.get("positives", 1),
                  "beta": spec.get("beta", 1.0), "seed": int(seed)}
        if args.output_root:
            name = folder_name(fields["aux"], fields["tau_plus"], fields["positives"], fields["beta"], base.cpc_steps,
                               base.log_floor)
            out = f"{args.output_root.rstrip('/')}/{name}/seed{seed}"
        # each run's objective, as rl_curl.train checks it (from_cli(rest) checked the base's, --aux curl)
        cfgs.append(refuse_unused_encoder_lr(dataclasses.replace(base, output_dir=out, **fields), rest))
    return cfgs


def main(argv: list[str] | None = None) -> None:
    from shared_losses.training.runtime import print_run_result

    cfgs = [c.resolved() for c in configs_from_cli(argv)]
    for c, summary in zip(cfgs, run_together(cfgs)):
        print_run_result("rl_curl", c.output_dir, summary["env_steps"], summary)


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
