"""The GPU-slice driver (scripts/gpu_table3.sh -> scripts/table3_gpu.py run) on its CPU path: tiny networks, a short
deadline; then the pack's import and tabulation (paper_tables.table3_slices)."""

import json
import os
import sys
import tarfile
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

from rehearse_gpu_command import TINY_BENCH, TINY_RUNS, prepared_command  # noqa: E402

TINY = list(TINY_RUNS)  # action repeat 50: a cartpole episode is 20 agent steps (1000 environment steps)


def slice_cmd(pack, work, *args, cwd=ROOT):
    env = {**os.environ, "PYTHON": sys.executable, "OUT": str(pack), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return warm.run(["bash", str(ROOT / "scripts/gpu_table3.sh"), "--work", str(work), "--commit", "abc1234def",
                           "--date", "2026-11-27", "--batch-size", "8", *TINY, *args],
                    cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def unpack(pack, dest):
    with tarfile.open(pack / "table3_runs.tar.gz") as tar:
        tar.extractall(dest, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))  # 3.11.0-3.11.3
    return {p.name: json.loads((p / "slice.json").read_text()) for p in dest.iterdir()}


@pytest.mark.slow  # two slices of tiny training runs in subprocesses (about a minute)
def test_slice_runs_packs_and_marks_unfinished_runs(tmp_path):
    import table3_gpu

    from paper_tables.table3_slices import import_pack, read_runs, tabulate

    # A slice whose runs finish well inside the deadline, with the solo timing run first; its --work is relative to
    # where the script is started (the runs themselves start in the repository's root).
    done = slice_cmd(tmp_path / "pack1", "work1", "--seeds", "0", "--env-steps", "2000", "--deadline",
                     "300", "--solo-env-steps", "1000", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    files = sorted(p.name for p in (tmp_path / "pack1").iterdir())
    assert files == sorted(table3_gpu.PACK_FILES) and len(files) <= 8  # a lent GPU machine brings back 8 files at most
    runs = unpack(tmp_path / "pack1", tmp_path / "x1")
    assert sorted(runs) == ["cartpole-swingup__curl__seed0__cpu__abc1234__2026-11-27",
                            "cartpole-swingup__debiased_0.05_1__seed0__cpu__abc1234__2026-11-27"]
    for name, meta in runs.items():
        assert meta["finished"] and meta["env_steps_reached"] == 2000 and meta["exit_code"] == 0
        assert meta["commit"] == "abc1234def" and meta["runs_together"] == 2 and meta["gpu"] == "cpu"
        for f in ("config.json", "eval.csv", "log.csv", "summary.json", "train.log"):
            assert (tmp_path / "x1" / name / f).exists(), f
        cfg = json.loads((tmp_path / "x1" / name / "config.json").read_text())
        assert cfg["eval_parallel"] and cfg["batch_size"] == 8 and not cfg["save_replay"]
    thr = json.loads((tmp_path / "pack1" / "throughput.json").read_text())
    assert thr["solo"]["finished"] and thr["solo"]["time_seconds"]["update"] > 0
    for r in (thr["solo"], *thr["runs"]):  # each run's GPU memory (None on a CPU)
        assert r["gpu_peak_allocated_gib"] is None and r["gpu_peak_reserved_gib"] is None
    assert set(thr["solo"]["time_seconds"]) >= {"act", "update", "env", "eval", "replay_sample", "replay_add"}
    assert "--sync-timing" in thr["solo"]["command"] and len(thr["runs"]) == 2
    text = (tmp_path / "pack1" / "slice.txt").read_text()
    assert "together:" in text and "together: None" not in text  # a rate, or why there is none
    assert ("env steps/s in all" in text) == (thr["together_env_steps_per_second"] is not None)

    # A slice whose runs cannot finish: stopped at the deadline, packed as unfinished with the step they reached
    # (20 s: enough to start and log a step with the suite's other worker beside it).
    cut = slice_cmd(tmp_path / "pack2", tmp_path / "work2", "--seeds", "1", "--objectives", "curl", "--env-steps",
                    "400000", "--deadline", "20", "--grace", "60", "--solo-after")
    assert cut.returncode == 0, cut.stdout + cut.stderr  # a run stopped at the deadline is not a failure
    (meta,) = unpack(tmp_path / "pack2", tmp_path / "x2").values()
    assert not meta["finished"] and meta["stopped_at_deadline"] and meta["exit_code"] == 130
    assert 0 < meta["env_steps_reached"] < 400000 and meta["final_eval_return"] is None
    assert "UNFINISHED (reached" in cut.stdout
    assert "alone after the slice: not run (0 s of the deadline left, under 30 s)" in cut.stdout  # the deadline spent

    # Both packs into one results folder: the finished pair is tabulated, the unfinished run shown as such.
    results = tmp_path / "results"
    results.mkdir()
    import_pack(tmp_path / "pack1" / "table3_runs.tar.gz", results)
    import_pack(tmp_path / "pack2" / "table3_runs.tar.gz", results)
    assert len(read_runs(results)) == 3
    md = tabulate(results, env_step=2000)
    assert "| biased (CURL) | 1 |" in md and "| debiased τ⁺=0.05, M=1 | 1 |" in md  # one finished seed each
    assert f"reached {meta['env_steps_reached']:,}" in md  # the unfinished run: listed, in no statistic

    # The same slice again, with seed 1 added, on that results folder: seed 0 is left out, seed 1 runs.
    more = slice_cmd(tmp_path / "pack3", tmp_path / "work3", "--seeds", "0", "1", "--objectives", "curl",
                     "--env-steps", "2000", "--deadline", "300", "--results", str(results), "--solo-after")
    assert more.returncode == 0, more.stdout + more.stderr
    assert "1 of 2 runs already finished" in more.stdout
    (meta3,) = unpack(tmp_path / "pack3", tmp_path / "x3").values()  # the run alone after it is not packed
    assert meta3["seed"] == 1 and meta3["finished"]
    alone = json.loads((tmp_path / "pack3" / "throughput.json").read_text())["alone_after"]  # in the time left
    assert alone["finished"] and alone["seed"] == 0 and alone["env_steps_reached"] == 2000 and alone["deadline"] < 300
    assert alone["wall_seconds"] > 0 and alone["env_steps_per_second"] > 0 and "--sync-timing" not in alone["command"]


def test_slice_options_are_checked_before_anything_runs(tmp_path):
    import table3_gpu
    from table3_gpu import RunArgs, check_run_args, slice_commands

    with pytest.raises(ValueError, match="--seeds is empty"):
        check_run_args(RunArgs(pack=str(tmp_path), seeds=[]))
    with pytest.raises(ValueError, match="--together-max must be >= 0"):
        check_run_args(RunArgs(pack=str(tmp_path), together_max=-1))
    with pytest.raises(ValueError, match="lists a seed twice"):
        check_run_args(RunArgs(pack=str(tmp_path), seeds=[1, 1]))
    with pytest.raises(ValueError, match="--deadline must be > 0"):
        check_run_args(RunArgs(pack=str(tmp_path), deadline=0))
    with pytest.raises(ValueError, match="--date must be YYYY-MM-DD"):
        check_run_args(RunArgs(pack=str(tmp_path), date="27.11.2026"))
    with pytest.raises(ValueError, match="sets --seed itself"):
        slice_commands(RunArgs(pack=str(tmp_path), extra=["--seed=3"]), tmp_path)
    with pytest.raises(ValueError, match="TAU_PLUS"):  # the objective parser, before any run starts
        slice_commands(RunArgs(pack=str(tmp_path), objectives=["debiased:1.5:1"]), tmp_path)
    with pytest.raises(ValueError, match="--crop-size 200 is larger than --image-size 100"):  # rl_curl.train's check
        slice_commands(RunArgs(pack=str(tmp_path), extra=["--crop-size=200"]), tmp_path)
    jobs = slice_commands(RunArgs(pack=str(tmp_path), seeds=[0, 1]), tmp_path)
    assert [(j["objective"], j["seed"]) for j in jobs] == [("curl", 0), ("debiased:0.05:1", 0), ("curl", 1),
                                                           ("debiased:0.05:1", 1)]  # seed by seed: pairs first
    cmd = jobs[1]["cmd"]
    assert cmd[cmd.index("--env-steps") + 1] == "100000" and cmd[cmd.index("--batch-size") + 1] == "512"
    assert "--eval-parallel" in cmd and "--no-save-replay" in cmd and "--tau-plus" in cmd
    assert not (tmp_path / "pack").exists() and not list(tmp_path.iterdir())  # nothing written
    assert table3_gpu.gpu_tag("NVIDIA H100 80GB HBM3") == "H100" and table3_gpu.gpu_tag("NVIDIA H200") == "H200"
    assert table3_gpu.gpu_tag("cpu") == "cpu"


def finished_folder(results, job, *, target=100_000, changes=None, finished=True, name=""):
    """A run folder as `import` leaves it, of ``job`` (a slice_commands job): config.json the job's own resolved
    configuration (with ``changes``), eval.csv up to ``target``, slice.json saying ``finished``."""
    import dataclasses

    from rl_curl.config import from_cli

    cfg = {**dataclasses.asdict(from_cli(job["cmd"][3:]).resolved()), **(changes or {})}
    folder = results / (name or f"{job['task']}__{job['objective'].replace(':', '_')}__seed{job['seed']}__H200__a__d")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n"
                                     + "".join(f"{s},{s // 1000},{s / 200:.1f},1.0\n" for s in (target // 2, target)))
    (folder / "slice.json").write_text(json.dumps({
        "task": job["task"], "objective": job["objective"], "seed": job["seed"], "env_steps_target": target,
        "env_steps_reached": target if finished else target // 2, "finished": finished, "date": "2026-11-28",
        "commit": "a" * 40, "batch_size": cfg["batch_size"]}))
    return folder


def test_a_slice_leaves_out_the_runs_already_finished_in_the_results(tmp_path):
    """The prepared command run again goes on with the cells still missing: a finished run in the results folder with
    the slice's settings is left out (fields a resumed run may change aside); one made with other settings, an
    unfinished one and one finished at another target are not."""
    from table3_gpu import RunArgs, left_to_run, slice_commands

    results = tmp_path / "results"
    results.mkdir()
    jobs = slice_commands(RunArgs(pack=str(tmp_path / "pack"), seeds=[0, 1, 2]), tmp_path / "work")
    by = {(j["objective"], j["seed"]): j for j in jobs}
    finished_folder(results, by["curl", 0])
    finished_folder(results, by["debiased:0.05:1", 0], changes={"lr": 5e-4})  # other settings: runs again
    finished_folder(results, by["curl", 1], finished=False)
    finished_folder(results, by["debiased:0.05:1", 1], changes={"cuda_graphs": True, "torch_threads": 1,
                                                                "eval_async": True})  # how it ran: free
    finished_folder(results, by["curl", 2], target=50_000)
    finished_folder(results, by["curl", 2], changes={"eval_episodes": 2},  # its score averages 2 episodes, not 10
                    name="cartpole-swingup__curl__seed2__H200__e__d")
    todo, done, redone = left_to_run(jobs, results, 100_000)
    assert [(d["objective"], d["seed"]) for d in done] == [("curl", 0), ("debiased:0.05:1", 1)]
    assert done[0]["run"] == "cartpole-swingup__curl__seed0__H200__a__d"
    assert [(j["objective"], j["seed"]) for j in todo] == [("debiased:0.05:1", 0), ("curl", 1), ("curl", 2),
                                                           ("debiased:0.05:1", 2)]  # still seed by seed
    other, fewer = redone
    assert (other["objective"], other["seed"]) == ("debiased:0.05:1", 0) and "lr: 0.0005 -> 0.001" in other["runs"][0]
    assert (fewer["objective"], fewer["seed"]) == ("curl", 2) and "eval_episodes: 2 -> 10" in fewer["runs"][0]
    # a run made before a field was added (its config.json lacks it): done all the same
    older = finished_folder(results, by["debiased:0.05:1", 2])
    cfg = json.loads((older / "config.json").read_text())
    del cfg["encoder_lr"]
    (older / "config.json").write_text(json.dumps(cfg))
    assert ("debiased:0.05:1", 2) in {(d["objective"], d["seed"]) for d in left_to_run(jobs, results, 100_000)[1]}
    # a second finished run of that cell with the slice's settings: done after all
    finished_folder(results, by["debiased:0.05:1", 0], name="cartpole-swingup__debiased_0.05_1__seed0__H200__b__d")
    assert ("debiased:0.05:1", 0) in {(d["objective"], d["seed"]) for d in left_to_run(jobs, results, 100_000)[1]}
    # the table's rows: debiased with M = 2 is another cell than M = 1
    m2 = slice_commands(RunArgs(pack=str(tmp_path / "pack"), seeds=[1], objectives=["debiased:0.05:2"]),
                        tmp_path / "work")
    assert len(left_to_run(m2, results, 100_000)[0]) == 1
    # bad results folders: named, before anything starts
    with pytest.raises(ValueError, match="is not a folder"):
        left_to_run(jobs, tmp_path / "nowhere", 100_000)
    (results / "cartpole-swingup__curl__seed0__H200__a__d" / "slice.json").write_text("{not json")
    with pytest.raises(ValueError, match="slice.json"):
        left_to_run(jobs, results, 100_000)


def test_a_slice_with_every_run_finished_packs_its_records_alone(tmp_path, capsys, monkeypatch):
    import table3_gpu
    from table3_gpu import RunArgs, slice_commands

    from paper_tables.table3_slices import import_slice_pack

    results, pack = tmp_path / "results", tmp_path / "pack"
    results.mkdir()
    pack.mkdir()
    (pack / "table3_runs.tar.gz").write_text("an earlier pack's runs")  # must not come back as this slice's
    for job in slice_commands(RunArgs(pack=str(pack), seeds=[0]), tmp_path / "w"):
        finished_folder(results, job)
    assert table3_gpu.main(["run", "--pack", str(pack), "--results", str(results), "--work", str(tmp_path / "work"),
                            "--commit", "abc1234def", "--date", "2026-11-29", "--fit"]) == 0
    out = capsys.readouterr().out
    assert "2 of 2 runs already finished" in out and "nothing to run" in out
    assert sorted(p.name for p in pack.iterdir()) == ["slice.txt", "throughput.json"]
    thr = json.loads((pack / "throughput.json").read_text())
    assert thr["runs"] == [] and thr["fit"] == {"fitted": False, "why": "nothing to run"}
    assert [d["objective"] for d in thr["results"]["already_finished"]] == ["curl", "debiased:0.05:1"]
    assert "already finished in" in (pack / "slice.txt").read_text()
    into = tmp_path / "into"
    into.mkdir()
    new, records = import_slice_pack(pack, into)  # a pack of records alone
    assert new == [] and len(records) == 2
    # the default results folder missing (a copy of the code without docs/data): nothing to leave out, no error
    import table3_gpu as driver

    busy = tmp_path / "busy0"
    (busy / "runs" / "cartpole-swingup" / "curl" / "seed0").mkdir(parents=True)
    (busy / "runs" / "cartpole-swingup" / "curl" / "seed0" / "x").write_text("")
    monkeypatch.setattr(driver, "DEFAULT_RESULTS", tmp_path / "no_results_here")
    with pytest.raises(ValueError, match="already holds runs"):  # it got as far as the runs
        driver.run_slice(RunArgs(pack=str(pack), results=str(driver.DEFAULT_RESULTS), work=str(busy)))
    assert "does not exist: no finished run to leave out" in capsys.readouterr().out
    with pytest.raises(ValueError, match="is not a folder"):  # one given by hand must exist
        table3_gpu.run_slice(RunArgs(pack=str(pack), results=str(tmp_path / "typo"), work=str(busy)))
    # --redo: every run again (here stopped before it starts: the work folder already holds runs)
    work = tmp_path / "busy"
    (work / "runs" / "cartpole-swingup" / "curl" / "seed0").mkdir(parents=True)
    (work / "runs" / "cartpole-swingup" / "curl" / "seed0" / "x").write_text("")
    with pytest.raises(ValueError, match="already holds runs"):
        table3_gpu.run_slice(RunArgs(pack=str(pack), results=str(results), work=str(work), redo=True))


def test_the_run_alone_after_the_slice_takes_what_is_left_of_the_deadline(tmp_path, capsys, monkeypatch):
    """--solo-after: the slice's first run again, alone, to --env-steps on the fastest path for one run, in what is left
    of the deadline (all of it when every run was already finished); not run with under 30 s left; recorded in
    throughput.json and slice.txt (finished: its wall time; stopped: its env steps/s from its progress)."""
    from types import SimpleNamespace

    import table3_gpu
    from table3_gpu import GRAPH_FLAGS, RunArgs, slice_commands

    results, pack = tmp_path / "results", tmp_path / "pack"
    results.mkdir()
    for job in slice_commands(RunArgs(pack=str(pack), seeds=[0]), tmp_path / "w"):
        finished_folder(results, job)
    checks = [{"path": p, "passed": True} for p in ("graphs", *table3_gpu.STACKED_CHECKS)]
    trains_together = {"selftest": {"checks": checks}, "variants": [
        {"name": "default", "median_ms": 12.0}, {"name": "graphs", "median_ms": 3.0},
        {"name": "graphs_stacked22", "runs": 22, "median_ms": 22.0, "ms_per_run_update": 1.0}]}
    assert table3_gpu.trains_together("auto", trains_together)  # the slice's runs would train together
    monkeypatch.setattr(table3_gpu, "run_bench", lambda *a: trains_together)
    started, outcome = [], {}

    def fake_run_all(jobs, deadline, grace, poll, label, **kw):
        (job,) = jobs
        started.append((job, deadline, label))
        out = Path(job["out"])
        out.mkdir(parents=True)
        if outcome.get("stopped"):  # reached 5000 steps, 4000 of them in the 20 s between its first and last look
            (out / "log.csv").write_text("env_step,x\n5000,1\n")
            return [SimpleNamespace(out=out, wall=31.0, stopped_at_deadline=True, proc=SimpleNamespace(returncode=130),
                                    samples=[(0.0, 0), (10.0, 1000), (20.0, 3000), (30.0, 5000)], log_path=out / "l")]
        (out / "summary.json").write_text(json.dumps({"env_steps": 100_000, "env_steps_per_second": 1234.5,
                                                      "train_seconds": 81.0, "time_seconds": {"update": 30.0}}))
        return [SimpleNamespace(out=out, wall=85.04, stopped_at_deadline=False, proc=SimpleNamespace(returncode=0),
                                samples=[(0.0, 0)], log_path=out / "l")]

    monkeypatch.setattr(table3_gpu, "run_all", fake_run_all)
    assert table3_gpu.main(["run", "--pack", str(pack), "--results", str(results), "--work", str(tmp_path / "work"),
                            "--commit", "abc1234def", "--date", "2026-11-29", "--bench", "--speed", "auto",
                            "--deadline", "400", "--solo-after"]) == 0
    ((job, deadline, label),) = started  # nothing else ran: every run of the slice was finished
    assert label == "alone" and 390 < deadline <= 400 and (job["task"], job["objective"], job["seed"]) == (
        "cartpole-swingup", "curl", 0)
    cmd = job["cmd"]
    assert cmd[cmd.index("--env-steps") + 1] == "100000" and "--eval-async" in cmd and "--sync-timing" not in cmd
    assert set(GRAPH_FLAGS) <= set(cmd) and Path(job["out"]).is_relative_to(tmp_path / "work" / "alone")
    alone = json.loads((pack / "throughput.json").read_text())["alone_after"]
    assert alone["ran"] and alone["finished"] and alone["wall_seconds"] == 85.0
    assert alone["env_steps_per_second"] == 1234.5 and alone["time_seconds"] == {"update": 30.0}
    assert alone["speed"]["flags"] == list(GRAPH_FLAGS) and "together" not in alone["speed"]["why"]
    line = ("alone after the slice: cartpole-swingup curl seed 0 on --cuda-graphs --replay-on-device, 100000 env "
            "steps in 85 s with start-up (1234.5 env steps/s)")
    assert line in (pack / "slice.txt").read_text() and line in capsys.readouterr().out
    # stopped at the deadline: its env steps/s between its first and last look; --speed default stays default
    outcome["stopped"] = True
    stopped = table3_gpu.solo_after(RunArgs(pack=str(pack), speed="default"), tmp_path / "w3", None, 60.0)
    assert stopped["ran"] and not stopped["finished"] and stopped["stopped_at_deadline"]
    assert stopped["env_steps_reached"] == 5000 and stopped["env_steps_per_second"] == 200.0
    assert stopped["speed"]["flags"] == [] and started[-1][1] == 60.0
    assert "the default path, stopped at the deadline at 5000 of 100000 env steps after 31 s (200.0 env steps/s)" in \
        table3_gpu.alone_line(stopped)
    # under 30 s left: not run
    assert table3_gpu.solo_after(RunArgs(pack=str(pack)), tmp_path / "w4", None, 12.4) == {
        "ran": False, "why": "12 s of the deadline left, under 30 s"}
    # its folder taken (the same --work again): not run, nothing overwritten
    taken = table3_gpu.solo_after(RunArgs(pack=str(pack), speed="default"), tmp_path / "w3", None, 60.0)
    assert not taken["ran"] and "already holds a run" in taken["why"]
    assert len(started) == 2


def test_objectives_with_seeds_of_their_own(tmp_path):
    """The issue's 22-run column in one command: 3 seeds of every objective, 5 of the pair DCL compares."""
    from table3_gpu import RunArgs, check_run_args, slice_commands

    args = RunArgs(pack=str(tmp_path), seeds=[0, 1, 2],
                   objectives=["curl@0-4", "debiased:0.05:1@0-4", "debiased:0.01:1", "debiased:0.1:1",
                               "debiased:0.01:2", "debiased:0.1:2"])
    check_run_args(args)
    jobs = slice_commands(args, tmp_path / "w")
    cells = [(j["objective"], j["seed"]) for j in jobs]
    assert len(cells) == len(set(cells)) == 22
    assert cells[-4:] == [("curl", 3), ("debiased:0.05:1", 3), ("curl", 4), ("debiased:0.05:1", 4)]  # the last to start
    assert [c[1] for c in cells[:18]] == [s for s in (0, 1, 2) for _ in range(6)]  # seed by seed
    seed4 = next(j for j in jobs if j["seed"] == 4)
    assert seed4["cmd"][seed4["cmd"].index("--seed") + 1] == "4" and seed4["out"].name == "seed4"
    assert "@" not in str(seed4["out"])
    mixed = slice_commands(RunArgs(pack=str(tmp_path), seeds=[1], objectives=["curl@0-2,5", "debiased:0.05:1"]),
                           tmp_path / "w")
    assert [(j["objective"], j["seed"]) for j in mixed] == [("curl", 1), ("debiased:0.05:1", 1), ("curl", 0),
                                                            ("curl", 2), ("curl", 5)]
    check_run_args(RunArgs(pack=str(tmp_path), seeds=[], objectives=["curl@3"]))  # every objective has its own
    for objectives, message in ((["curl@4-2"], "numbers, ranges or both"), (["curl@x"], "numbers, ranges or both"),
                                (["curl@"], "numbers, ranges or both"), (["curl@1,0-2"], "a seed twice"),
                                (["curl@0", "curl@1"], "names curl twice")):
        with pytest.raises(ValueError, match=message):
            check_run_args(RunArgs(pack=str(tmp_path), objectives=objectives))
    with pytest.raises(ValueError, match="--seeds is empty"):
        check_run_args(RunArgs(pack=str(tmp_path), seeds=[], objectives=["curl@3", "debiased:0.05:1"]))


def test_the_prepared_command_of_the_docs_parses_into_the_22_runs_of_the_column(tmp_path):
    """docs/clusters.md's prepared GPU command, as written there: its options parse, and it asks for DCL Table 3's
    cartpole column (6 objectives x 3 seeds, 5 seeds for CURL and tau+ = 0.05), checked against the repository's
    own results folder (readable, so the command does not stop there)."""
    import tyro
    from table3_gpu import DEFAULT_RESULTS, RunArgs, check_run_args, left_to_run, slice_commands

    argv = prepared_command("0123456789abcdef")
    assert argv[:2] == ["bash", "scripts/gpu_table3.sh"]
    args = tyro.cli(RunArgs, args=["--pack", str(tmp_path / "pack"), *argv[2:]])
    check_run_args(args)
    assert args.bench and args.fit and args.speed == "auto" and args.env_steps == 100_000 and args.batch_size == 512
    assert args.solo_after and args.deadline + args.grace < 580 - args.bench_deadline  # the run alone within it
    # whatever the bench takes, the runs are packed before the machine's 580 s (the install and the render check,
    # about 15 s, come before the script starts)
    assert 0 < args.finish_by <= 580 - 15
    jobs = slice_commands(args, tmp_path / "work")
    cells = {(j["objective"], j["seed"]) for j in jobs}
    dcl = ["curl", "debiased:0.01:1", "debiased:0.05:1", "debiased:0.1:1", "debiased:0.01:2", "debiased:0.1:2"]
    assert cells == {(o, s) for o in dcl for s in (0, 1, 2)} | {(o, s) for o in ("curl", "debiased:0.05:1")
                                                               for s in (3, 4)}
    todo, done, _ = left_to_run(jobs, DEFAULT_RESULTS, args.env_steps)
    assert len(todo) + len(done) == 22


def test_finish_by_shortens_the_deadline_so_that_the_runs_are_packed_in_time():
    import tyro
    from table3_gpu import PACK_SECONDS, RunArgs, check_run_args, deadline_within

    def args(*argv):
        a = tyro.cli(RunArgs, args=["--pack", "p", *argv])
        check_run_args(a)
        return a

    assert deadline_within(args("--deadline", "400"), 500.0) == (400.0, None)  # no --finish-by: as given
    a = args("--deadline", "400", "--grace", "30", "--finish-by", "555")
    assert deadline_within(a, 100.0) == (400.0, None)  # the bench was quick: room for all of it
    got, why = deadline_within(a, 140.0)
    assert got == 555 - 140 - 30 - PACK_SECONDS and "shortened to 365 s" in why and "140 s gone" in why
    assert deadline_within(a, 540.0)[0] == 0.0  # no time left: the runs stop at once and are packed unfinished
    solo = args("--deadline", "400", "--grace", "30", "--finish-by", "555", "--solo-env-steps", "2000",
                "--solo-deadline", "100")
    assert deadline_within(solo, 100.0)[0] == 555 - 100 - (100 + 30) - 30 - PACK_SECONDS  # the solo run comes first
    for bad, msg in ((["--finish-by", "-1"], ">= 0"), (["--finish-by", "60"], "leaves the runs no time"),
                     (["--bench", "--finish-by", "200"], "the bench's limit")):
        with pytest.raises(ValueError, match=msg):
            args(*bad)


def test_slice_script_without_its_packages_or_wheels_says_what_to_do(tmp_path):
    """On a machine lacking dm_control and with no .whl/ to install it from, the script stops naming the fix."""
    fake = tmp_path / "python3"
    fake.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that imports nothing
    fake.chmod(0o755)
    if (ROOT / ".whl").exists():
        pytest.skip(".whl/ exists in this checkout (the script would try to install from it)")
    res = warm.run(["bash", str(ROOT / "scripts/gpu_table3.sh")], cwd=ROOT, capture_output=True, text=True,
                   env={**os.environ, "PYTHON": str(fake), "OUT": str(tmp_path / "out")}, timeout=60)
    assert res.returncode == 2 and "fetch_gpu_deps.py" in res.stderr and not (tmp_path / "out").exists()


def test_speed_choice_and_the_fit_estimate():
    from table3_gpu import GRAPH_FLAGS, choose_speed, estimate_seconds, run_flags, variant_of

    bench = {"selftest": {"passed": True}, "variants": [{"name": "default", "median_ms": 12.0},
                                                        {"name": "graphs", "median_ms": 3.0}]}
    assert choose_speed("auto", bench)[0] == GRAPH_FLAGS
    assert choose_speed("auto", {**bench, "selftest": {"passed": False}}) == (
        (), "default: the fast path's self-test did not pass (selftest.txt)")
    slower = {**bench, "variants": [{"name": "default", "median_ms": 2.0}, {"name": "graphs", "median_ms": 3.0}]}
    assert choose_speed("auto", slower)[0] == () and choose_speed("auto", None)[0] == ()
    assert choose_speed("graphs", None)[0] == GRAPH_FLAGS and choose_speed("default", bench)[0] == ()
    # each fast path by its own self-test: the fastest that passed, if it beats the default
    checks = [{"path": "graphs", "passed": True}, {"path": "graphs_fused", "passed": False},
              {"path": "graphs_convrelu", "passed": True}]
    three = {"selftest": {"passed": False, "checks": checks},
             "variants": [*bench["variants"], {"name": "graphs_convrelu", "median_ms": 2.5}]}
    flags, why = choose_speed("auto", three)
    assert flags == (*GRAPH_FLAGS, "--cudnn-conv-relu") and variant_of(flags) == "graphs_convrelu" and "2.50" in why
    # the fused kernel's own check (conv_relu_op) failed: the graph's check alone does not make the path pass
    op = {"path": "conv_relu_op", "passed": False}
    with_op = {**three, "selftest": {"passed": False, "checks": [*checks, op]}}
    assert choose_speed("auto", with_op)[0] == GRAPH_FLAGS
    op["passed"] = True
    assert choose_speed("auto", with_op)[0] == (*GRAPH_FLAGS, "--cudnn-conv-relu")
    # a path with two checks of its own needs both
    twice = {**three, "selftest": {"passed": False, "checks": [*checks, {"path": "graphs_convrelu", "passed": False}]}}
    assert choose_speed("auto", twice)[0] == GRAPH_FLAGS
    checks[2]["passed"] = False  # its check failed: graphs, whose check passed
    assert choose_speed("auto", three)[0] == GRAPH_FLAGS and variant_of(GRAPH_FLAGS) == "graphs"
    checks[0]["passed"] = False
    assert choose_speed("auto", three)[0] == () and variant_of(()) == "default"
    # one run is bound by its own serial work; many by the GPU (here) or the CPUs
    one = estimate_seconds(1, updates=11_500, ms_per_update=3.0, cpu_seconds=100.0, cpus=16)
    assert one == pytest.approx(30 + 34.5 + 100)
    assert estimate_seconds(22, updates=11_500, ms_per_update=3.0, cpu_seconds=100.0, cpus=16) == \
        pytest.approx(30 + 22 * 34.5 / 0.8)
    assert estimate_seconds(22, updates=11_500, ms_per_update=0.2, cpu_seconds=100.0, cpus=16) == \
        pytest.approx(30 + 22 * 100 / 16)
    # runs trained together: the largest group's updates follow one another, and it acts once per step
    assert estimate_seconds(22, updates=11_500, ms_per_update=0.2, cpu_seconds=100.0, cpus=16, group=16,
                            act_seconds=50.0) == pytest.approx(30 + 16 * 2.3 + 100 + 50)
    assert {"--eval-parallel", "--eval-async"} <= set(run_flags(2, 16))
    assert not {"--eval-parallel", "--eval-async"} & set(run_flags(22, 16))
    # runs trained together evaluate beside training (one worker process each, no ten of them per run)
    assert "--eval-async" in run_flags(22, 16, together=True) and "--eval-parallel" not in run_flags(22, 16, True)


@pytest.mark.slow  # a tiny bench and a fitted slice in subprocesses (about a minute)
def test_slice_with_the_bench_the_speed_it_chooses_and_a_fit(tmp_path):
    import table3_gpu

    res = slice_cmd(tmp_path / "pack", tmp_path / "work", "--seeds", "0", "1", "--env-steps", "1000", "--deadline",
                    "400", "--bench", *TINY_BENCH,
                    # the variants --speed auto chooses between (the others are the same code at other settings)
                    "--bench-extra=--variants", "--bench-extra=checked", "--bench-extra=default",
                    "--bench-extra=graphs", "--bench-extra=graphs_convrelu",
                    "--speed", "auto", "--fit", "--finish-by", "300")
    assert res.returncode == 0, res.stdout + res.stderr
    files = sorted(p.name for p in (tmp_path / "pack").iterdir())
    # --finish-by 300 with the default grace (45 s) and packing (20 s): the 400 s deadline is cut after the bench
    thr = json.loads((tmp_path / "pack" / "throughput.json").read_text())
    assert thr["deadline_given"] == 400 and thr["finish_by"] == 300 and "[deadline]" in res.stdout
    assert 100 < thr["deadline"] < 300 - 45 - 20 and thr["deadline_shortened"].startswith("--deadline 400 s shortened")
    assert files == sorted(table3_gpu.PACK_FILES + table3_gpu.BENCH_FILES) and len(files) <= 8
    bench = json.loads((tmp_path / "pack" / "update_bench.json").read_text())
    assert bench["selftest"]["passed"] and [r["name"] for r in bench["variants"]] == ["checked", "default", "graphs",
                                                                                       "graphs_convrelu"]
    assert {c["path"] for c in bench["selftest"]["checks"] if c["passed"]} == {
        "graphs", "graphs_fused", "graphs_convrelu", "stacked", "stacked_act", "graphs_stacked", "graphs_stacked_act",
        "graphs_act", "replay_staged", "conv_relu_op"}
    assert all("median_ms" in r for r in bench["variants"])
    # what bf16 autocast does under vmap (torch 2.13's CPU build: a vmapped convolution stays float32, a linear is cast)
    assert bench["render"]["same_frames"] is True and bench["render"]["kept_camera_ms"] > 0  # the frame's cost
    cast = bench["autocast_under_vmap"]
    assert cast["conv2d"] == cast["linear"] == "torch.bfloat16" and cast["conv2d_vmapped"].startswith("torch.")
    acting = bench["acting"]  # the runs' acting one by one and as one (rl_curl.together)
    assert acting["runs"] == 6 and acting["single_ms"] > 0 and acting["stacked_ms"] > 0 and acting["copy_back_ms"] > 0
    assert acting["graphed_ms"] > 0 and acting["graphed_speedup"] > 0
    assert acting["one_run_ms"] > 0 and acting["one_run_graphed_ms"] > 0 and acting["one_run_speedup"] > 0
    added = bench["replay_add"]  # the runs' replay adds after their update: copies that wait, that don't, and staged
    assert added["runs"] == 6 and added["step_speedup"] > 0 and added["staged_step_speedup"] > 0
    assert "error" not in added
    assert all(len(added[f"{w}_{p}_ms"]) == 1 and added[f"{w}_{p}_median_ms"] > 0
               for w in ("blocking", "non_blocking", "staged") for p in ("add", "step"))
    staged = next(c for c in bench["selftest"]["checks"] if c["path"] == "replay_staged")
    assert staged["steps"] > 16 and not any(staged["values_differing"].values())
    assert [p["name"] for p in bench["profile"]] == ["device_replay_convrelu", "graphs_convrelu", "device_replay"]
    assert bench["work_per_update"]["bytes_float32_convrelu"] > 0  # on a CPU the default's computation
    thr = json.loads((tmp_path / "pack" / "throughput.json").read_text())
    assert thr["bench"]["selftest_passed"] and thr["speed"]["why"] and thr["fit"]["fitted"]
    assert 1 <= thr["fit"]["runs"] <= 4 and len(thr["runs"]) == thr["fit"]["runs"]
    assert thr["fit"]["runs_by_memory"].startswith("not checked")  # no GPU here
    fast = thr["speed"]["flags"]
    graphs, conv_relu = "--cuda-graphs" in fast, "--cudnn-conv-relu" in fast
    assert thr["bench"]["selftest_paths"]["graphs_convrelu"] is True
    runs = unpack(tmp_path / "pack", tmp_path / "x")
    assert [m["seed"] for m in sorted(runs.values(), key=lambda m: m["command"])]  # the runs ran
    for name in runs:
        cfg = json.loads((tmp_path / "x" / name / "config.json").read_text())
        assert cfg["cuda_graphs"] == graphs and cfg["replay_on_device"] == graphs
        assert cfg["cudnn_conv_relu"] == conv_relu
    assert "updates:" in (tmp_path / "pack" / "slice.txt").read_text()


def test_runs_train_together_only_if_the_stacked_self_test_passed():
    from table3_gpu import GRAPH_FLAGS, choose_speed, trains_together

    ok = {"selftest": {"checks": [{"path": "graphs", "passed": True}, {"path": "stacked", "passed": True},
                                  {"path": "graphs_stacked", "passed": True}]},
          "variants": [{"name": "default", "median_ms": 12.0}, {"name": "graphs", "median_ms": 3.0}]}
    assert trains_together("together", ok) and trains_together("together", None)
    assert choose_speed("together", ok)[0] == GRAPH_FLAGS and not trains_together("graphs", ok)
    bad = {**ok, "selftest": {"checks": [*ok["selftest"]["checks"][:2], {"path": "graphs_stacked", "passed": False}]}}
    assert not trains_together("together", bad)
    acting = {**ok, "selftest": {"checks": [*ok["selftest"]["checks"], {"path": "stacked_act", "passed": False}]}}
    assert not trains_together("together", acting)  # the runs act as one there
    graphed = {**ok, "selftest": {"checks": [*ok["selftest"]["checks"], {"path": "graphs_stacked_act",
                                                                         "passed": False}]}}
    assert not trains_together("together", graphed)  # ... as one CUDA graph under --cuda-graphs
    flags, why = choose_speed("together", bad)  # one by one, on the path auto would take
    assert flags == GRAPH_FLAGS and "not together" in why and "graphs_stacked" in why


def test_auto_trains_together_only_where_the_bench_shows_it_pays():
    from table3_gpu import GRAPH_FLAGS, TOGETHER_SHARE, choose_speed, stacked_row, trains_together

    checks = [{"path": p, "passed": True} for p in ("graphs", "stacked", "stacked_act", "graphs_stacked",
                                                    "graphs_stacked_act", "replay_staged")]
    single = [{"name": "default", "median_ms": 12.0}, {"name": "graphs", "median_ms": 3.0}]

    def bench(per_run22=None, per_run6=None, failed=()):
        rows = [*single]
        if per_run6 is not None:
            rows.append({"name": "graphs_stacked", "runs": 6, "median_ms": 6 * per_run6, "ms_per_run_update": per_run6})
        if per_run22 is not None:
            rows.append({"name": "graphs_stacked22", "runs": 22, "median_ms": 22 * per_run22,
                         "ms_per_run_update": per_run22})
        return {"selftest": {"checks": [{**c, "passed": c["path"] not in failed} for c in checks]}, "variants": rows}

    pays = bench(per_run22=1.0, per_run6=2.5)
    assert trains_together("auto", pays) and stacked_row(pays)["name"] == "graphs_stacked22"
    flags, why = choose_speed("auto", pays)
    assert flags == GRAPH_FLAGS and "together" in why and "22 runs" in why and "1.00 ms per run against 3.00" in why
    assert choose_speed("auto", pays, together=False) == (GRAPH_FLAGS, choose_speed("auto", bench())[1])
    # the 22 runs' time stands for the runs together; without it, the --stack runs'
    assert not trains_together("auto", bench(per_run22=3.0 * TOGETHER_SHARE + 0.01, per_run6=1.0))
    assert trains_together("auto", bench(per_run6=3.0 * TOGETHER_SHARE))
    # not where a check failed or is missing, nor without a stacked time, nor with --speed graphs / default
    for failed in ("stacked", "stacked_act", "graphs_stacked", "graphs_stacked_act", "replay_staged"):
        assert not trains_together("auto", bench(per_run22=1.0, failed=(failed,)))
        assert "together" not in choose_speed("auto", bench(per_run22=1.0, failed=(failed,)))[1]
    old = bench(per_run22=1.0)
    old["selftest"]["checks"] = [c for c in old["selftest"]["checks"] if c["path"] != "stacked_act"]
    assert not trains_together("auto", old) and not trains_together("auto", bench()) and not trains_together(
        "auto", None)
    assert not trains_together("graphs", pays) and not trains_together("default", pays)
    # against the default when no fast path passed
    slow_graphs = {**pays, "selftest": {"checks": [{**c, "passed": c["path"] != "graphs"} for c in checks]}}
    assert "against 12.00 ms for default" in choose_speed("auto", slow_graphs)[1]


def test_a_failed_check_of_the_gpu_replays_staged_copies_keeps_every_run_on_the_default_path():
    """Every fast path and the runs trained together keep their replay on the GPU, whose copies go through pinned
    staging slots (rl_curl.replay): where the bench's replay_staged check failed, --speed auto takes the default
    update (host replay) for the runs one by one, and --speed together trains them one by one on that path."""
    from table3_gpu import choose_speed, trains_together

    checks = [{"path": p, "passed": p != "replay_staged"} for p in ("graphs", "graphs_convrelu", "stacked",
                                                                      "stacked_act", "graphs_stacked",
                                                                      "graphs_stacked_act", "replay_staged")]
    bench = {"selftest": {"checks": checks},
             "variants": [{"name": "default", "median_ms": 12.0}, {"name": "graphs", "median_ms": 3.0},
                          {"name": "graphs_convrelu", "median_ms": 2.5},
                          {"name": "graphs_stacked22", "runs": 22, "median_ms": 22.0, "ms_per_run_update": 1.0}]}
    flags, why = choose_speed("auto", bench)
    assert flags == () and "replay_staged" in why
    assert not trains_together("auto", bench) and not trains_together("together", bench)
    flags, why = choose_speed("together", bench)
    assert flags == () and "not together" in why and "replay_staged" in why
    passing = {**bench, "selftest": {"checks": [{**c, "passed": True} for c in checks]}}
    assert choose_speed("auto", passing)[0] != () and trains_together("auto", passing)


def test_the_fit_keeps_the_runs_within_the_gpus_memory():
    """A slice's runs share one GPU: each run's update and frame ring (on the GPU under --replay-on-device) and each
    process's context must fit, whatever the time estimate allows."""
    from table3_gpu import MEMORY_SHARE, PROCESS_GIB, memory_fit, memory_per_run

    from rl_curl.config import Config
    from rl_curl.replay import FrameReplay

    # the paper's 100k-transition ring: about 3.3 GB of frames, of which a cartpole run (100k environment steps,
    # action repeat 8) fills 12,500 transitions: the device ring grows to its first allocation only (16,384 frames)
    cfg = Config().resolved()
    assert 3.2e9 < FrameReplay.estimate_bytes(100_000, cfg.obs_shape, 1, 3)["frames"] < 3.4e9
    ring = FrameReplay.estimate_bytes(100_000, cfg.obs_shape, 1, 3, transitions=12_500)["frames_device_peak"]
    assert ring == 16_384 * 3 * 100 * 100
    single = {"name": "graphs", "runs": 1, "peak_memory_gib": 2.0}
    stacked22 = {"name": "graphs_stacked22", "runs": 22, "peak_memory_gib": 44.0}
    assert memory_per_run(cfg, single, True) == pytest.approx(2 * 2**30 + ring)
    assert memory_per_run(cfg, single, False) == pytest.approx(2 * 2**30)  # the ring on the host
    assert memory_per_run(cfg, stacked22, True) == memory_per_run(cfg, single, True)  # per run of the stacked update
    assert memory_per_run(cfg, {"name": "graphs"}, True) is None and memory_per_run(cfg, None, True) is None
    total = 139 * 2**30  # an H200's
    per_run = memory_per_run(cfg, single, True)
    alone = memory_fit(80, per_run, lambda k: k, total)  # a process per run
    together = memory_fit(80, per_run, lambda k: 2, total)  # two processes for all
    assert alone * (per_run + PROCESS_GIB * 2**30) <= MEMORY_SHARE * total
    assert (alone + 1) * (per_run + PROCESS_GIB * 2**30) > MEMORY_SHARE * total
    assert alone < together < 80 and together * per_run + 2 * PROCESS_GIB * 2**30 <= MEMORY_SHARE * total
    assert memory_fit(30, 1.0, lambda k: 1, total) == 30 and memory_fit(30, 2 * total, lambda k: k, total) == 1
    # DCL Table 3's 22 cartpole runs fit an H100 (80 GB) with their rings on it, at 2 GiB of update each
    assert memory_fit(22, per_run, lambda k: 2, 80e9) == 22


def test_the_fit_of_runs_trained_together_counts_their_groups_and_their_acting(tmp_path, monkeypatch):
    """Runs trained together meet at every step: the fit counts the largest group's updates one after another and
    its one acting pass per step (the bench's acting row), so slower acting fits fewer runs."""
    import table3_gpu
    from table3_gpu import GRAPH_FLAGS, STACKED_CHECKS, RunArgs, fit_jobs, slice_commands

    # a GPU machine's environment step (2026-11-27's H200 run alone: about 4 ms per agent step), not this machine's
    monkeypatch.setattr(table3_gpu, "seconds_per_env_step", lambda cfg: 0.004)
    monkeypatch.setattr(table3_gpu.os, "cpu_count", lambda: 16)  # and its CPUs

    args = RunArgs(pack=str(tmp_path), seeds=[0, 1, 2], speed="together", deadline=400,
                   objectives=["curl@0-4", "debiased:0.05:1@0-4", "debiased:0.01:1", "debiased:0.1:1",
                               "debiased:0.01:2", "debiased:0.1:2"])
    jobs = slice_commands(args, tmp_path / "w")
    bench = {"selftest": {"checks": [{"path": p, "passed": True} for p in ("graphs", *STACKED_CHECKS)]},
             "variants": [{"name": "graphs", "median_ms": 4.0},
                          {"name": "graphs_stacked22", "runs": 22, "ms_per_run_update": 0.5, "median_ms": 11.0}],
             "acting": {"runs": 6, "stacked_ms": 2.0}}
    fitted, info = fit_jobs(jobs, args, bench, GRAPH_FLAGS)
    assert info["fitted"] and info["act_ms_per_step_of_a_group"] == 2.0 and info["ms_per_update"] == 0.5
    assert info["largest_group"] == max(sum(1 for j in fitted if j["objective"].endswith(":2")),
                                        sum(1 for j in fitted if not j["objective"].endswith(":2")))
    assert len(fitted) == info["runs"] == 22 and info["largest_group"] == 16  # M = 1: 5 + 5 + 3 + 3 runs
    graphed = {**bench, "acting": {"runs": 6, "stacked_ms": 9.0, "graphed_ms": 2.0}}  # the graph is what acts
    assert fit_jobs(jobs, args, graphed, GRAPH_FLAGS)[1]["act_ms_per_step_of_a_group"] == 2.0
    slow = {**bench, "acting": {"runs": 6, "stacked_ms": 14.0}}  # 12,500 steps x 14 ms: 175 s of acting
    fitted_slow, info_slow = fit_jobs(jobs, args, slow, GRAPH_FLAGS)
    assert all(info_slow["estimated_seconds"][n] >= info["estimated_seconds"][n] for n in info["estimated_seconds"])
    # 30 s + 125 s of each run's environment + 175 s of acting + 12 x 11,500 x 0.5 ms: groups of 12 at most, so
    # seeds 0-2 of every objective (12 runs at M = 1, 6 at M = 2)
    assert info_slow["runs"] == len(fitted_slow) == 18 and info_slow["largest_group"] == 12


def test_runs_trained_together_are_grouped_by_task_and_m(tmp_path):
    from table3_gpu import RunArgs, groups_of, slice_commands, together_command

    args = RunArgs(pack=str(tmp_path), objectives=["curl", "debiased:0.1:2", "debiased:0.05:1"], seeds=[0, 1],
                   env_steps=1000)
    jobs = slice_commands(args, tmp_path / "runs")
    groups = groups_of(jobs)
    assert [[(j["objective"], j["seed"]) for j in g] for g in groups] == [
        [("curl", 0), ("debiased:0.05:1", 0), ("curl", 1), ("debiased:0.05:1", 1)],
        [("debiased:0.1:2", 0), ("debiased:0.1:2", 1)]]
    pieces = groups_of(jobs, 3)  # at most 3 runs a process
    assert [len(g) for g in pieces] == [3, 1, 2] and [j for g in pieces for j in g] == [j for g in groups for j in g]
    cmd = together_command(groups[1])
    i = cmd.index("--")
    assert cmd[1:3] == ["-m", "rl_curl.together"] and cmd[3:i] == [
        "--run", "debiased:0.1:2", "0", str(groups[1][0]["out"]),
        "--run", "debiased:0.1:2", "1", str(groups[1][1]["out"])]
    rest = cmd[i + 1:]
    assert "--seed" not in rest and "--aux" not in rest and "--output-dir" not in rest
    assert rest[rest.index("--env-steps") + 1] == "1000" and "--resume" in rest
    other = {**groups[0][1], "cmd": [*groups[0][1]["cmd"], "--lr", "0.003"]}
    with pytest.raises(ValueError, match="differ in more than objective and seed"):
        together_command([groups[0][0], other])


@pytest.mark.slow  # a slice of tiny runs trained together in two subprocesses (about a minute)
def test_slice_with_runs_trained_together(tmp_path):
    res = slice_cmd(tmp_path / "pack", tmp_path / "work", "--seeds", "0", "1", "--objectives", "curl",
                    "debiased:0.05:1", "debiased:0.1:2", "--env-steps", "1000", "--deadline", "400",
                    "--speed", "together")
    assert res.returncode == 0, res.stdout + res.stderr
    runs = unpack(tmp_path / "pack", tmp_path / "x")
    assert len(runs) == 6 and all(m["finished"] for m in runs.values())
    by = {tuple(m["trained_together_by"]) for m in runs.values()}
    assert len(by) == 2 and all("rl_curl.together" in b for b in by)  # one process per M
    for name in runs:
        cfg = json.loads((tmp_path / "x" / name / "config.json").read_text())
        assert cfg["cuda_graphs"] and cfg["replay_on_device"] and cfg["env_worker"]
        assert cfg["eval_async"] and cfg["eval_worker"] and not cfg["eval_parallel"]  # beside training, one worker
    thr = json.loads((tmp_path / "pack" / "throughput.json").read_text())
    assert thr["speed"]["flags"] == ["--cuda-graphs", "--replay-on-device"] and "together" in thr["speed"]["why"]
    # each run's thread's CPU time (the group's host work per step, summed over the runs of a process)
    assert all(0 < r["thread_cpu_seconds"] <= r["wall_seconds"] for r in thr["runs"])
    from paper_tables.table3_slices import import_pack, tabulate

    (tmp_path / "results").mkdir()
    import_pack(tmp_path / "pack" / "table3_runs.tar.gz", tmp_path / "results")
    text = tabulate(tmp_path / "results", env_step=1000)
    assert text.count("trained together in one process with 3 other run(s)") == 4  # M = 1: curl and tau+ 0.05
    assert text.count("trained together in one process with 1 other run(s)") == 2  # M = 2
    assert "| GPU GiB | note |" in text


def test_tabulate_takes_the_step_of_short_slices(tmp_path, capsys):
    """`tabulate` had no option for the step: runs trained to another target (a short CPU slice) were only listed,
    'not used: target 2,000'."""
    from table3_gpu import RunArgs, main, slice_commands

    results = tmp_path / "results"
    results.mkdir()
    jobs = slice_commands(RunArgs(pack=str(tmp_path / "pack"), seeds=[0]), tmp_path / "work")
    for job in jobs[:2]:
        finished_folder(results, job, target=2000)
    main(["tabulate", str(results)])
    assert "not used: target 2,000" in capsys.readouterr().out
    main(["tabulate", str(results), "--env-step", "2000"])
    text = (results / "table3_gpu.md").read_text()
    assert "score at 2,000 environment steps" in text and "not used: target 2,000" not in text
    with pytest.raises(ValueError, match="--env-step must be >= 1"):
        main(["tabulate", str(results), "--env-step", "0"])


def test_an_archive_that_is_not_a_tar_gz_is_one_line(tmp_path):
    """tarfile's reasons for every compression it tried came out as a five-line error."""
    from paper_tables.table3_slices import import_pack

    plain = tmp_path / "table3_runs.tar.gz"
    plain.write_text("hello\n")
    with pytest.raises(ValueError, match=r"is not a readable tar archive \(it is not gzip-compressed; a pack's "
                                         r"archive is a .tar.gz\)") as err:
        import_pack(plain, tmp_path / "results")
    assert "\n" not in str(err.value) and not (tmp_path / "results").exists()
    import gzip

    plain.write_bytes(gzip.compress(b"not a tar"))
    with pytest.raises(ValueError, match="is not a readable tar archive") as err:
        import_pack(plain, tmp_path / "results")
    assert "\n" not in str(err.value)
