"""Runs trained together (rl_curl.together): each is the run alone up to float rounding, they resume exactly, stop
together, and what cannot train together is refused before anything is written."""

import csv
import dataclasses
import json
import re

import pytest
import torch

from rl_curl.together import check_runs, configs_from_cli, run_together
from rl_curl.train import run
from shared_losses.training.runtime import RunInterrupted

from .conftest import tiny_config
from .test_train import BASE

SPECS = [dict(aux="curl", seed=0), dict(aux="debiased", tau_plus=0.05, seed=1)]


def cfg(tmp_path, name, **kw):
    return tiny_config(output_dir=str(tmp_path / name), **{**BASE, "eval_every": 500, **kw})


def rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def state(out, i=0):
    return torch.load(out / "checkpoint" / f"custom_checkpoint_{i}.pkl", weights_only=False)


def test_each_run_is_the_run_alone_up_to_rounding(tmp_path, monkeypatch):
    import rl_curl.train as train
    from rl_curl.together import Together

    for i, s in enumerate(SPECS):
        run(cfg(tmp_path, f"alone{i}", env_steps=1000, **s))
    # The runs act inside the meeting and a run's agent is written from the stacked tensors only when the run reads it:
    # every evaluation of the runs together (their returns are not compared here) must see the last update's
    # parameters, and so must the exported policy.
    tables, seen = [], []
    init = Together.__init__

    def keep(self, *a, **kw):
        init(self, *a, **kw)
        tables.append(self)

    def check(agent, cfg, episodes, *a, **kw):  # in place of the evaluation's episodes
        table = tables[0]
        if table.stacked is not None:
            k = next(k for k, app in enumerate(table.apps) if app.agent is agent)
            i = table.order.index(k)
            seen.append(all(torch.equal(p, table.stacked.params[n][i]) for n, p in agent.named_parameters()))
        return [0.0] * episodes

    monkeypatch.setattr(Together, "__init__", keep)
    monkeypatch.setattr(train, "evaluate", check)
    summaries = run_together([cfg(tmp_path, f"together{i}", env_steps=1000, **s) for i, s in enumerate(SPECS)])
    assert len(seen) == 2 * 2 and all(seen)  # at 500 and the final one, of each run
    actor = {n: t for n, t in tables[0].stacked.params.items() if n.startswith("actor.")}
    for i in range(2):  # the exported policy is the last update's actor
        policy = torch.load(tmp_path / f"together{i}" / "policy.pt", weights_only=False)
        shared = [n for n in policy["actor"] if "actor." + n in actor]  # the conv trunk is the critic's
        assert len(shared) >= 4 and all(torch.equal(policy["actor"][n], actor["actor." + n][i]) for n in shared)
    assert [s["seed"] for s in summaries] == [0, 1] and [s["aux"] for s in summaries] == ["curl", "debiased"]
    for i in range(2):
        alone, together = tmp_path / f"alone{i}", tmp_path / f"together{i}"
        for name in ("log.csv", "eval.csv"):
            a, b = rows(alone / name), rows(together / name)
            assert len(a) == len(b) and a[0].keys() == b[0].keys()
        a, b = rows(alone / "log.csv"), rows(together / "log.csv")
        # the first update's metrics: the same random draws and batches, a grouped convolution's rounding
        first = next(k for k, r in enumerate(a) if r["critic_loss"])
        for key in ("critic_loss", "aux_loss"):
            x, y = float(a[first][key]), float(b[first][key])
            assert abs(x - y) <= 1e-4 * abs(x), (key, x, y)
        assert a[0]["episode_return"] == b[0]["episode_return"] or first == 0
        for f in ("config.json", "summary.json", "policy.pt"):
            assert (together / f).exists()
        # the checkpoint holds this run's optimiser states (written from the stacked update), Adam's steps taken
        adam = state(together, 1)["state"]
        assert adam and all(int(s["step"]) > 0 for s in adam.values())
        # one run's tensors only (a view of the stacked tensors would save all the runs' storage)
        sizes = {k: v.untyped_storage().nbytes() for k, v in state(together).items()}
        assert sizes == {k: v.untyped_storage().nbytes() for k, v in state(alone).items()}


@pytest.mark.slow  # runs together stopped and resumed end to end (about 30 s)
def test_runs_together_resume_exactly_after_a_stop(tmp_path, monkeypatch):
    full = [cfg(tmp_path, f"full{i}", env_steps=2000, checkpoint_every=1000, **s) for i, s in enumerate(SPECS)]
    run_together(full)
    part = [cfg(tmp_path, f"part{i}", env_steps=2000, checkpoint_every=1000, **s) for i, s in enumerate(SPECS)]
    # Ctrl-C while they train (as the main thread's handler records it, during the third update): every run stops
    # at the end of the same episode with its checkpoint
    import shared_losses.training.runtime as runtime
    from rl_curl.stacked import StackedAgents

    made = []

    class Signals(runtime.StopSignals):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    update, calls = StackedAgents.update, []

    def counted(self, *a, **kw):
        calls.append(1)
        if len(calls) == 3:
            made[-1].requested = True
        return update(self, *a, **kw)

    monkeypatch.setattr(runtime, "StopSignals", Signals)
    monkeypatch.setattr(StackedAgents, "update", counted)
    with pytest.raises(RunInterrupted) as info:
        run_together(part)
    monkeypatch.undo()
    folders = ", ".join(str(tmp_path / f"part{i}" / "checkpoint") for i in range(2))  # every run's, in one line
    assert str(info.value) == (f"interrupted at {info.value.at} (checkpoints written to {folders}); continue with "
                               "--resume") and info.value.at.startswith("environment step ")
    stopped = {rows(tmp_path / f"part{i}" / "log.csv")[-1]["env_step"] for i in range(2)}
    assert len(stopped) == 1, stopped  # in step
    run_together([cfg(tmp_path, f"part{i}", env_steps=2000, checkpoint_every=1000, resume=True, **s)
                  for i, s in enumerate(SPECS)])
    for i in range(2):
        a, b = tmp_path / f"full{i}", tmp_path / f"part{i}"
        assert rows(a / "eval.csv") == rows(b / "eval.csv")
        drop = ("wall_seconds",)
        strip = lambda rs: [{k: v for k, v in r.items() if k not in drop} for r in rs]  # noqa: E731
        assert strip(rows(a / "log.csv")) == strip(rows(b / "log.csv"))
        sa, sb = state(a), state(b)
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


@pytest.mark.slow  # runs together end to end with environment worker processes (about 20 s)
def test_cuda_graphs_and_env_workers_on_the_cpu_are_the_default_path(tmp_path):
    """--cuda-graphs --replay-on-device together (rl_curl.stacked.GraphedStackedUpdate: eager on a CPU, batches
    gathered from the replays on the device, the draws made outside the graph from each run's generator), with each
    environment and its evaluation's in worker processes (--env-worker, --eval-worker), writes what the runs together
    write without them, bit for bit."""
    plain = [cfg(tmp_path, f"plain{i}", env_steps=1000, **s) for i, s in enumerate(SPECS)]
    graphed = [cfg(tmp_path, f"graphed{i}", env_steps=1000, cuda_graphs=True, replay_on_device=True, env_worker=True,
                   eval_worker=True, **s) for i, s in enumerate(SPECS)]
    run_together(plain)
    run_together(graphed)
    for i in range(2):
        a, b = tmp_path / f"plain{i}", tmp_path / f"graphed{i}"
        assert rows(a / "eval.csv") == rows(b / "eval.csv")
        strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rs]  # noqa: E731
        assert strip(rows(a / "log.csv")) == strip(rows(b / "log.csv"))
        sa, sb = state(a), state(b)
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


@pytest.mark.slow  # four runs end to end with environment and evaluation worker processes (about a minute)
def test_evaluations_beside_training_write_what_evaluations_in_turn_write(tmp_path):
    """--eval-async together (each run's evaluation on a thread of its own, acting with a snapshot of its actor, its
    episodes in its worker process, while the runs go on meeting and updating): the same eval.csv, log and final
    tensors as the runs evaluating in turn, bit for bit; and a checkpoint waits for the evaluation of its step. The
    runs beside also evaluate at step 0 (--eval-at-start): one more row of eval.csv, nothing else changed."""
    kw = dict(env_steps=2000, eval_every=500, checkpoint_every=1000, env_worker=True, eval_worker=True)
    in_turn = [cfg(tmp_path, f"turn{i}", **kw, **s) for i, s in enumerate(SPECS)]
    beside = [cfg(tmp_path, f"beside{i}", eval_async=True, eval_at_start=True, **kw, **s) for i, s in enumerate(SPECS)]
    run_together(in_turn)
    run_together(beside)
    for i in range(2):
        a, b = tmp_path / f"turn{i}", tmp_path / f"beside{i}"
        start, *later = rows(b / "eval.csv")
        assert (start["env_step"], start["episode"]) == ("0", "0")
        assert len(rows(a / "eval.csv")) == 4 and rows(a / "eval.csv") == later
        times = json.loads((b / "summary.json").read_text())["time_seconds"]
        assert times["eval_background"] > 0 and "eval_background" not in json.loads(
            (a / "summary.json").read_text())["time_seconds"]  # the evaluations did run beside training
        strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rs]  # noqa: E731
        assert strip(rows(a / "log.csv")) == strip(rows(b / "log.csv"))
        sa, sb = state(a), state(b)
        for k in sa:
            assert torch.equal(sa[k], sb[k]), k


def test_a_run_trained_alone_does_not_resume_together(tmp_path):
    run(cfg(tmp_path, "r0", env_steps=1000, checkpoint_every=1000, **SPECS[0]))
    with pytest.raises(Exception, match="trained alone"):
        run_together([cfg(tmp_path, "r0", env_steps=2000, checkpoint_every=1000, resume=True, **SPECS[0])])


def test_a_checkpoint_of_another_device_resumes_together_with_a_warning(tmp_path):
    """A run trained together on a GPU and continued on a CPU (or the other way) ended in a raw RuntimeError: its
    own generator's state is the CUDA generator's 16 bytes, which a CPU generator cannot take. It continues, seeded
    from its seed and step, with a warning; a damaged state of this device is refused in one line."""
    from shared_losses.training.runtime import EXTRA, CheckpointError

    runs = [cfg(tmp_path, f"g{i}", env_steps=1000, checkpoint_every=1000, **s) for i, s in enumerate(SPECS)]
    run_together(runs)
    extra = tmp_path / "g0" / "checkpoint" / EXTRA
    saved = torch.load(extra, weights_only=False)
    assert saved["torch_generator_device"] == "cpu" and len(saved["torch_generator"]) == 5056

    def again(**kw):
        return run_together([cfg(tmp_path, f"g{i}", env_steps=1500, checkpoint_every=500, resume=True, **s, **kw)
                             for i, s in enumerate(SPECS)])

    gpu = dict(saved, torch_generator=list(range(16)), torch_generator_device="cuda")  # as a CUDA generator's
    torch.save(gpu, extra)
    with pytest.warns(UserWarning, match=r"random generator of another device \(cuda\) than the one it continues "
                                         r"on \(cpu\).*seeded from the run's seed and step"):
        again()
    assert rows(tmp_path / "g0" / "eval.csv")[-1]["env_step"] == "1500"
    now = torch.load(extra, weights_only=False)
    assert now["step"] * 50 == 1500 and now["torch_generator_device"] == "cpu"  # continued on the CPU generator
    now.pop("torch_generator_device")  # a checkpoint written before the device was recorded
    torch.save(dict(now, torch_generator=list(range(16))), extra)
    with pytest.warns(UserWarning, match=r"another device \(a state of 16 bytes\)"):
        run_together([cfg(tmp_path, f"g{i}", env_steps=2000, checkpoint_every=500, resume=True, **s)
                      for i, s in enumerate(SPECS)])
    damaged = torch.load(extra, weights_only=False)
    torch.save(dict(damaged, torch_generator=damaged["torch_generator"][:100]), extra)  # this device's, cut short
    with pytest.raises(CheckpointError, match="random generator state cannot be restored"):
        run_together([cfg(tmp_path, f"g{i}", env_steps=2500, checkpoint_every=500, resume=True, **s)
                      for i, s in enumerate(SPECS)])


def test_a_taken_folder_is_refused_before_any_run_starts(tmp_path):
    run(cfg(tmp_path, "taken", env_steps=1000, **SPECS[1]))  # a finished run of other settings in run 1's folder
    with pytest.raises(Exception, match="taken.*already holds a run"):
        run_together([cfg(tmp_path, "fresh", env_steps=1000, **SPECS[0]),
                      cfg(tmp_path, "taken", env_steps=1000, **{**SPECS[1], "tau_plus": 0.1})])
    assert not (tmp_path / "fresh").exists()


def test_a_run_that_fails_stops_the_others_and_its_error_is_raised(tmp_path, monkeypatch):
    from rl_curl.train import CurlApp

    step = CurlApp.train_step

    def failing(self):
        if self.cfg.seed == 1 and self.step == 8:  # after the runs have met a few times
            raise RuntimeError("boom in run 1")
        return step(self)

    monkeypatch.setattr(CurlApp, "train_step", failing)
    with pytest.raises(RuntimeError, match="boom in run 1"):
        run_together([cfg(tmp_path, f"r{i}", env_steps=1000, **s) for i, s in enumerate(SPECS)])
    # the other run stopped at its next meeting (no hang); both folders are kept (they had trained)
    assert (tmp_path / "r0" / "config.json").exists() and (tmp_path / "r1" / "config.json").exists()
    assert not (tmp_path / "r0" / "summary.json").exists()


@pytest.mark.parametrize("other,match", [
    (dict(env_steps=2000), "differs from .* in env_steps"),
    (dict(lr=3e-3), "differs from .* in lr"),
    (dict(positives=2, aux="debiased"), "differs from .* in positives"),
    (dict(cuda_graphs=True, replay_on_device=True), "differs from .* in cuda_graphs"),
    (dict(update="fused"), "--update fused is not supported"),
    (dict(aux="cpc"), "--aux cpc is not supported"),
    (dict(aux="none"), "either every run"),
])
def test_what_cannot_train_together_is_refused(tmp_path, other, match):
    cfgs = [cfg(tmp_path, "a", env_steps=1000).resolved(),
            cfg(tmp_path, "b", **{"env_steps": 1000, "seed": 1, **other}).resolved()]
    with pytest.raises(ValueError, match=match):
        check_runs(cfgs)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="two runs would write to"):
        check_runs([cfgs[0], cfgs[0]])


def test_command_line(tmp_path, capsys):
    cfgs = configs_from_cli(["--objectives", "curl", "debiased:0.05:2", "--seeds", "3", "4", "--output-root",
                             str(tmp_path), "--", "--env-steps", "3000", "--lr", "0.002"])
    got = [(c.aux, c.tau_plus, c.positives, c.seed, c.env_steps, c.lr, c.output_dir) for c in cfgs]
    assert got == [("curl", 0.0, 1, 3, 3000, 0.002, f"{tmp_path}/curl/seed3"),
                   ("curl", 0.0, 1, 4, 3000, 0.002, f"{tmp_path}/curl/seed4"),
                   ("debiased", 0.05, 2, 3, 3000, 0.002, f"{tmp_path}/debiased-tau0.05-M2/seed3"),
                   ("debiased", 0.05, 2, 4, 3000, 0.002, f"{tmp_path}/debiased-tau0.05-M2/seed4")]
    default = configs_from_cli(["--seeds", "0"])[0].resolved()
    assert default.output_dir == "runs/rl_curl/cartpole-swingup/curl/seed0"  # rl_curl.train's own folder
    # environments, and the evaluations', in worker processes by default
    assert all(c.env_worker and c.eval_worker for c in cfgs) and default.env_worker and default.eval_worker
    assert not configs_from_cli(["--", "--no-env-worker"])[0].env_worker
    assert not configs_from_cli(["--", "--no-eval-worker"])[0].eval_worker
    assert not configs_from_cli(["--", "--no_env_worker"])[0].env_worker  # either spelling, as rl_curl.train's
    assert not configs_from_cli(["--", "--no_eval_worker"])[0].eval_worker
    for bad, match in ((["--", "--seed", "1"], "--seed is set per run"),
                       (["--", "--aux=debiased"], "--aux is set per run"),
                       (["--", "--output_dir", "x"], "--output_dir is set per run"),
                       (["--", "--tau_plus=0.1"], "--tau_plus is set per run"),
                       (["--objectives", "debiased:2"], "TAU_PLUS"),
                       (["--seeds", "1", "1"], "names a seed twice")):
        with pytest.raises(ValueError, match=re.escape(match)):  # a usage error: one error: line through run_cli
            configs_from_cli(bad)
    runs = configs_from_cli(["--run", "curl", "5", str(tmp_path / "a"), "--run", "debiased:0.1:1", "6",
                             str(tmp_path / "b"), "--", "--env-steps", "2000"])
    assert [(c.aux, c.tau_plus, c.seed, c.output_dir, c.env_steps) for c in runs] == [
        ("curl", 0.0, 5, str(tmp_path / "a"), 2000), ("debiased", 0.1, 6, str(tmp_path / "b"), 2000)]
    for bad, match in ((["--run", "curl", "x", "o"], "the seed must be an integer"),
                       (["--run", "curl", "1", "o", "--seeds", "2"], "leave out --objectives"),
                       (["--run", "curl", "1", "o", "--output_root", "r"], "leave out --objectives"),
                       (["--run", "curl:1", "1", "o"], "is not one of")):
        with pytest.raises(ValueError, match=re.escape(match)):
            configs_from_cli(bad)
    with pytest.raises(SystemExit):
        configs_from_cli(["--help"])
    out = capsys.readouterr().out
    assert "--objectives" in out and "rl_curl.train --help" in out


def test_a_run_that_leaves_before_the_first_meeting_is_not_waited_for():
    """A run that ends before the runs first meet (a finished run resumed with unfinished ones builds nothing): the
    runs already waiting make the update without it, whichever arrived first."""
    import threading

    from rl_curl.together import Together

    from types import SimpleNamespace

    table = Together(3)
    table.apps = [SimpleNamespace(cfg=SimpleNamespace(output_dir=f"run{k}")) for k in range(3)]
    made = []

    def fake_update_all():  # what the meeting did, without agents
        made.append(sorted(table.pending))
        table.results = {k: {"step": s} for k, (_, s, _) in table.pending.items()}
        table.pending = {}
        table.meetings += 1
        table.cond.notify_all()

    table._update_all = fake_update_all
    got = {}
    threads = [threading.Thread(target=lambda k=k: got.setdefault(k, table.update(k, None, 7))) for k in (0, 1)]
    for t in threads:
        t.start()
    for _ in range(100):  # both wait for run 2
        if len(table.pending) == 2:
            break
        threading.Event().wait(0.01)
    assert len(table.pending) == 2 and not made
    table.leave(2)
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert made == [[0, 1]] and got == {0: {"step": 7}, 1: {"step": 7}}
    table.leave(1, RuntimeError("boom"))  # a run that fails: the next meeting raises, naming it
    with pytest.raises(RuntimeError, match="another run trained together.*run1: RuntimeError: boom"):
        table.update(0, None, 8)


def test_one_folder_spelled_two_ways_is_refused(tmp_path, monkeypatch):
    """`--run curl 0 H/a --run debiased:0.05:1 1 ./H/a/` passed the check (raw strings compared) and both runs wrote
    into one folder: interleaved log.csv, one run's config.json beside the other's summary.json."""
    monkeypatch.chdir(tmp_path)
    a = cfg(tmp_path, "a", env_steps=1000).resolved()
    b = cfg(tmp_path, "b", env_steps=1000, seed=1).resolved()
    for spelling in ("./a/", str(tmp_path / "a"), "a"):
        b.output_dir = spelling
        a.output_dir = "a"
        if spelling == "a":
            continue
        with pytest.raises(ValueError, match=rf"two runs would write to a \(given as a and as {spelling}\)"):
            check_runs([a, b])
    (tmp_path / "real").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "real", target_is_directory=True)
    a.output_dir, b.output_dir = "real", "alias"
    with pytest.raises(ValueError, match="two runs would write to"):
        check_runs([a, b])


def test_a_group_that_cannot_resume_is_refused_before_any_run_writes(tmp_path):
    """A run trained alone, or a new run beside runs that have trained, was refused only once the runs had started:
    the other runs had rewritten their config.json and opened new event files, and the new run's folder was left
    holding a run."""
    run_together([cfg(tmp_path, f"g{i}", env_steps=1000, checkpoint_every=1000, **s) for i, s in enumerate(SPECS)])
    run(cfg(tmp_path, "alone", env_steps=1000, checkpoint_every=1000, **{**SPECS[1], "seed": 2}))

    def files(name):
        return sorted((p.relative_to(tmp_path), p.stat().st_mtime_ns) for p in (tmp_path / name).rglob("*"))

    before = files("g0")
    with pytest.raises(ValueError, match=r"alone: its checkpoint was written by a run trained alone"):
        run_together([cfg(tmp_path, "g0", env_steps=2000, checkpoint_every=1000, resume=True, **SPECS[0]),
                      cfg(tmp_path, "alone", env_steps=2000, checkpoint_every=1000, resume=True,
                          **{**SPECS[1], "seed": 2})])
    assert files("g0") == before
    with pytest.raises(ValueError, match=r"not in step \(.*g0 at agent step \d+, .*new at agent step 0\)"):
        run_together([cfg(tmp_path, "g0", env_steps=2000, checkpoint_every=1000, resume=True, **SPECS[0]),
                      cfg(tmp_path, "new", env_steps=2000, checkpoint_every=1000, resume=True, **SPECS[1])])
    assert files("g0") == before and not (tmp_path / "new").exists()
    with pytest.raises(ValueError, match=r"cannot resume the run in .*g1.*tau_plus: 0.05 -> 0.1.*give that run its own "
                                         r"options in its --run"):
        run_together([cfg(tmp_path, "g0", env_steps=2000, checkpoint_every=1000, resume=True, **SPECS[0]),
                      cfg(tmp_path, "g1", env_steps=2000, checkpoint_every=1000, resume=True,
                          **{**SPECS[1], "tau_plus": 0.1})])
    assert files("g0") == before


def test_replays_that_fit_one_by_one_but_not_together_are_refused_before_any_run_starts(tmp_path, monkeypatch):
    """Each run checked its own replay against the free memory when it was built, all at once, before any had
    filled its ring: runs trained together whose replays fit only one by one passed, and were killed for memory
    when the rings were nearly full (and again at the same step on every resume)."""
    import rl_curl.train as train
    from rl_curl.replay import FrameReplay

    cfgs = [cfg(tmp_path, f"r{i}", env_steps=1000, **s) for i, s in enumerate(SPECS)]
    c = cfgs[0].resolved()
    one = sum(v for k, v in FrameReplay.estimate_bytes(c.replay_capacity, c.obs_shape, 64, c.frame_stack,
                                                      transitions=c.agent_steps).items()
              if k != "frames_device_peak")  # what one run fills
    monkeypatch.setattr(train, "available_memory", lambda: (int(one * 1.5), "on this machine"))
    with pytest.raises(ValueError, match=r"the runs will need .* GiB of memory for the 2 runs' replays \(.* "
                                         r"transitions each .*\) but only .* GiB is available on this machine; lower "
                                         r"--replay-capacity .*, or train fewer runs together"):
        run_together(cfgs)
    assert not any((tmp_path / f"r{i}").exists() for i in range(2))
    run(cfgs[0])  # one of them alone fits
    # a finished run of the group trains nothing and needs no replay: the other one alone is counted
    monkeypatch.setattr(train, "available_memory", lambda: (int(one * 1.5), "on this machine"))
    summaries = run_together([dataclasses.replace(cfgs[0], resume=True), cfgs[1]])
    assert len(summaries) == 2
