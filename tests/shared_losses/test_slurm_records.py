"""The Slurm backend's record of a grid's jobs (slurm/jobs.json, shared_losses.training.slurm) stays in one place
from one start of the grid to the next, whichever of its runs are still unfinished: a grid script gives the backend
only the runs left to do, and their common folder sinks as runs finish. Stand-in sbatch / squeue as in
test_sweep_slurm.py; the runs' logs laid out as curl_table3.py lays them out (OUT/TASK/OBJECTIVE/seedS.log)."""

import os
from pathlib import Path

import pytest

pytest.importorskip("submitit")

from shared_losses.training import slurm  # noqa: E402
from shared_losses.training.processes import GridDetached  # noqa: E402
from shared_losses.training.sweep import Run, SweepOptions, _Progress, run_sweep  # noqa: E402

from .test_sweep_slurm import _fake_slurm, _result  # noqa: E402


def _grid(tmp_path: Path) -> list[Run]:
    """Two runs of one task, each in its objective's folder (curl_table3's layout)."""
    task = tmp_path / "grid" / "cartpole"
    return [Run(f"cartpole/{obj}/seed0", ["python", "-c", "pass", obj], task / obj / "seed0.log")
            for obj in ("curl", "debiased")]


def _records(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "grid").rglob(slurm.JOBS_FILE))


def _detached(**kw) -> SweepOptions:
    options = SweepOptions(backend="slurm", slurm_detach=True, **kw)
    options.validate()
    return options


def test_a_run_that_failed_in_its_job_stays_failed_once_the_other_runs_have_finished(tmp_path, monkeypatch, capsys):
    """The first start submits both runs (record: OUT/cartpole/slurm). curl's job finishes its run, debiased's run
    fails in its job (exit 2). The grid started again gets debiased alone (curl is done): it reports it failed, from
    the same record, and submits nothing; --slurm-resubmit submits it again, recorded in the same place."""
    curl, debiased = runs = _grid(tmp_path)
    _fake_slurm(tmp_path, monkeypatch)
    folder = tmp_path / "grid" / "cartpole" / "slurm"
    with pytest.raises(GridDetached, match="2 job\\(s\\) submitted"):
        run_sweep(runs, _detached())
    assert _records(tmp_path) == [folder / slurm.JOBS_FILE]
    _result(folder, "4242", 0)
    _result(folder, "4243", 2)
    capsys.readouterr()

    assert slurm.grid_folder([debiased]) == folder  # not OUT/cartpole/debiased/slurm, where the runs left are
    assert run_sweep([debiased], _detached()) == [2]
    out = capsys.readouterr().out
    assert ("cartpole/debiased/seed0: its last job 4243 ended with exit 2 (the run failed: see its log); not "
            "submitted again (once the cause is mended, start the command with --slurm-resubmit") in out
    assert f"FAILED (exit 2, see {debiased.log})" in out and "submitted as job" not in out
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 2
    assert _records(tmp_path) == [folder / slurm.JOBS_FILE]

    with pytest.raises(GridDetached, match="1 job\\(s\\) submitted"):
        run_sweep([debiased], _detached(slurm_resubmit=True))
    assert "its last job 4243 ended with exit 2 (the run failed: see its log); submitted as job 4244" in \
        capsys.readouterr().out
    assert _records(tmp_path) == [folder / slurm.JOBS_FILE]
    assert slurm.recorded_jobs(folder)[slurm.job_name(debiased)]["job"] == "4244"
    assert (folder / "4244" / "4244_submitted.pkl").exists()  # submitit's files beside the record
    _result(folder, "4244", 0)
    assert run_sweep([debiased], _detached()) == [0]
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 3


def test_lost_jobs_count_against_retries_across_starts_with_fewer_runs(tmp_path, monkeypatch, capsys):
    """A run whose jobs are lost: each start with the runs left submits it again, counting the losses in the one
    record, until --retries is spent; then it is reported failed, not submitted a fourth time."""
    curl, debiased = runs = _grid(tmp_path)
    _fake_slurm(tmp_path, monkeypatch)
    folder = tmp_path / "grid" / "cartpole" / "slurm"
    with pytest.raises(GridDetached):
        run_sweep(runs, _detached(retries=2))
    _result(folder, "4242", 0)  # curl done; debiased's job 4243 lost (no result)
    for job, retries in (("4244", 1), ("4245", 2)):
        with pytest.raises(GridDetached, match="1 job\\(s\\) submitted"):
            run_sweep([debiased], _detached(retries=2))
        assert f"submitted as job {job}" in capsys.readouterr().out
        assert slurm.recorded_jobs(folder)[slurm.job_name(debiased)] | {"command": ""} == \
            {"job": job, "retries": retries, "command": ""}
    assert run_sweep([debiased], _detached(retries=2)) == [-1]
    assert "its last job 4245 ended without a result" in capsys.readouterr().out
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 4
    assert _records(tmp_path) == [folder / slurm.JOBS_FILE]


def test_a_waiting_grid_started_again_finds_its_queued_jobs_files_in_the_grids_folder(tmp_path, monkeypatch,
                                                                                    capsys):
    """A grid that waits, started again while a job of an earlier start is queued and the other runs have finished:
    the job is waited for with submitit's files where that start put them (its result is read there)."""
    curl, debiased = runs = _grid(tmp_path)
    _fake_slurm(tmp_path, monkeypatch)
    folder = tmp_path / "grid" / "cartpole" / "slurm"
    options = SweepOptions(backend="slurm")
    options.validate()
    jobs = slurm.submit_or_attach(runs, options, slurm.executor(options, folder), folder)  # the first start
    assert [j.job_id for j in jobs.values()] == ["4242", "4243"]
    (tmp_path / "queue.txt").write_text(f"4243|{slurm.job_name(debiased)}\n")  # curl has finished; debiased waits

    here = slurm.grid_folder([debiased])
    assert here == folder
    again = slurm.submit_or_attach([debiased], options, slurm.executor(options, here), here)
    assert again[0].job_id == "4243" and Path(again[0].paths.result_pickle).parent == folder / "4243"
    assert "already in Slurm's queue as job 4243" in capsys.readouterr().out
    _result(folder, "4243", 0)
    assert slurm.run_jobs([debiased], options, _Progress(1), None, poll_s=0.05) == [0]
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 2


def test_records_an_earlier_version_left_where_the_unfinished_runs_were_are_read(tmp_path, monkeypatch, capsys):
    """Earlier versions put the record in the folder of the runs then unfinished: after the first start, a second one
    with debiased alone recorded its next job under OUT/cartpole/debiased/slurm. That job (the later one) is the
    run's last: its failure is reported and nothing is submitted; a later submission goes to the first record."""
    curl, debiased = runs = _grid(tmp_path)
    _fake_slurm(tmp_path, monkeypatch)
    folder = tmp_path / "grid" / "cartpole" / "slurm"
    with pytest.raises(GridDetached):
        run_sweep(runs, _detached())  # 4242, 4243 in OUT/cartpole/slurm
    _result(folder, "4242", 0)
    lower = debiased.log.parent / "slurm"
    old = slurm.submit(slurm.executor(_detached(), lower), debiased, retries=1)  # what the earlier version did
    assert old.job_id == "4244" and (lower / slurm.JOBS_FILE).exists()
    submitted = folder / "4243" / "4243_submitted.pkl"
    os.utime(submitted, (submitted.stat().st_mtime - 60,) * 2)  # job 4243 was submitted a while before 4244
    _result(lower, "4244", 2)
    capsys.readouterr()

    assert slurm.grid_folder([debiased]) == folder
    assert slurm.last_jobs([debiased])[slurm.job_name(debiased)][0] == lower
    assert run_sweep([debiased], _detached()) == [2]
    assert "its last job 4244 ended with exit 2 (the run failed: see its log); not submitted again" in \
        capsys.readouterr().out
    assert slurm.recorded_jobs(folder)[slurm.job_name(debiased)] | {"command": ""} == \
        {"job": "4244", "retries": 1, "command": "", "folder": str(lower.resolve())}  # gathered into the grid's
    with pytest.raises(GridDetached, match="1 job\\(s\\) submitted"):
        run_sweep([debiased], _detached(slurm_resubmit=True))
    assert slurm.recorded_jobs(folder)[slurm.job_name(debiased)]["job"] == "4245"
    assert slurm.last_jobs([debiased])[slurm.job_name(debiased)][0] == folder


def test_the_record_of_a_grid_with_fewer_runs_first_is_read_when_more_are_unfinished(tmp_path, monkeypatch, capsys):
    """The first start had one run to do (the other finished with another backend): its record is in that run's
    folder. A later start with both (the other's output removed) records in their common folder, and still reads the
    first run's last job from the first record; another grid's record above this one is not taken for its own."""
    curl, debiased = runs = _grid(tmp_path)
    _fake_slurm(tmp_path, monkeypatch)
    lower = debiased.log.parent / "slurm"
    (tmp_path / "slurm").mkdir()
    (tmp_path / "slurm" / slurm.JOBS_FILE).write_text('{"other@12345678": {"job": "1", "retries": 0}}')
    with pytest.raises(GridDetached):
        run_sweep([debiased], _detached())  # 4242
    assert slurm.recorded_jobs(lower).keys() == {slurm.job_name(debiased)}
    _result(lower, "4242", 2)
    capsys.readouterr()
    folder = tmp_path / "grid" / "cartpole" / "slurm"
    assert slurm.grid_folder(runs) == folder
    with pytest.raises(GridDetached, match="1 job\\(s\\) submitted, 0 still in Slurm's queue. 1 run\\(s\\) failed"):
        run_sweep(runs, _detached())
    out = capsys.readouterr().out
    assert "cartpole/debiased/seed0: its last job 4242 ended with exit 2" in out
    assert "cartpole/curl/seed0: submitted as job 4243" in out
    record = slurm.recorded_jobs(folder)  # the grid's record now: debiased's last job, its files left where they are
    assert record[slurm.job_name(curl)]["job"] == "4243"
    assert record[slurm.job_name(debiased)] | {"command": ""} == {"job": "4242", "retries": 0, "command": "",
                                                                 "folder": str(lower.resolve())}
    assert slurm.grid_folder([debiased]) == folder  # from now on, whichever runs are left
    assert run_sweep([debiased], _detached()) == [2]
    assert "its last job 4242 ended with exit 2" in capsys.readouterr().out
    assert (tmp_path / "sbatch.calls").read_text().count("x") == 2
