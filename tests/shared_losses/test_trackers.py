"""--report-to (issue 34, item 9): the training scalars go to the trackers accelerate drives (mlflow with a
local file store, wandb offline) as well as to log.csv, the same numbers; TensorBoard stays the default and
``none`` writes log.csv only. Checked on nlp_qt's tiny run (the three applications log through one harness)."""

import csv
import math

import pytest

from shared_losses.training.runtime import check_report_to


def _nlp_qt(tmp_path, name, **kw):
    from nlp_qt.train import train

    from ..nlp_qt.test_train import _cfg

    train(_cfg(tmp_path, name, max_steps=3, **kw))
    return tmp_path / name, list(csv.DictReader(open(tmp_path / name / "log.csv")))


def test_report_to_is_checked_before_anything_starts(monkeypatch):
    assert check_report_to(("tensorboard",)) == ("tensorboard",)
    assert check_report_to(("none",)) == ()
    with pytest.raises(ValueError, match="unknown tracker"):
        check_report_to(("comet",))
    with pytest.raises(ValueError, match="cannot be combined"):
        check_report_to(("none", "wandb"))
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    with pytest.raises(ValueError, match="wandb package is not installed"):
        check_report_to(("wandb",))


def test_none_writes_log_csv_and_no_tensorboard(tmp_path):
    out, rows = _nlp_qt(tmp_path, "none", report_to=("none",))
    assert len(rows) == 3 and not (out / "tb").exists()
    out, _ = _nlp_qt(tmp_path, "tb")
    assert any((out / "tb").iterdir())  # the default: TensorBoard


def test_mlflow_gets_the_same_numbers_as_log_csv(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3 keeps the file store behind this switch
    out, rows = _nlp_qt(tmp_path, "ml", report_to=("tensorboard", "mlflow"))
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("nlp_qt")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "ml" and run.data.params["objective"] == "qt"
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, "train/loss"))
    assert [s for s, _ in history] == [int(r["step"]) for r in rows]
    assert all(math.isclose(v, float(r["loss"]), rel_tol=1e-6) for (_, v), r in zip(history, rows))
    assert any((out / "tb").iterdir())  # TensorBoard as well


def wandb_records(folder, wait: float = 60.0) -> bytes:
    """The offline run's record file under ``folder``, once wandb's service has written the run's data into it (it
    writes after finish() returns; under load that took a few seconds)."""
    import time

    (run_dir,) = folder.glob("offline-run-*")
    (records,) = run_dir.glob("run-*.wandb")
    start = time.monotonic()
    while b"train/loss" not in (data := records.read_bytes()) and time.monotonic() - start < wait:
        time.sleep(0.5)
    return data


def test_wandb_offline_writes_a_run_in_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    out, rows = _nlp_qt(tmp_path, "wb", report_to=("wandb",))
    data = wandb_records(out / "wandb")
    assert b"train/loss" in data and b"objective" in data
    assert len(rows) == 3 and not (out / "tb").exists()


def test_wandb_dir_set_by_the_user_is_where_wandb_writes(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    out, _ = _nlp_qt(tmp_path, "wb", report_to=("wandb",))
    assert b"train/loss" in wandb_records(tmp_path / "elsewhere" / "wandb")
    assert not (out / "wandb").exists()


def no_wandb_login(tmp_path, monkeypatch):
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_DISABLED", "WANDB_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "netrc").write_text("machine example.org login x password y\n")
    monkeypatch.setenv("NETRC", str(tmp_path / "netrc"))


def mlflow_refuses_file_stores() -> bool:
    """MLflow 3 refuses a file store unless MLFLOW_ALLOW_FILE_STORE=true; MLflow 2 takes one. Read from the installed
    version, without importing mlflow: imported under a test's capsys after an rl_curl run in the same process,
    mlflow-skinny 2.16 left pytest's capture closed for every later test of that worker (not looked into further)."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("mlflow", "mlflow-skinny"):
        try:
            return int(version(dist).split(".")[0]) >= 3
        except PackageNotFoundError:
            continue
    pytest.skip("mlflow is not installed")


def test_trackers_that_would_fail_after_the_start_are_refused_in_one_line(tmp_path, monkeypatch):
    from shared_losses.training.runtime import check_tracker_setup

    no_wandb_login(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match="--report-to wandb: no W&B login for api.wandb.ai.*WANDB_MODE=offline"):
        check_tracker_setup(["wandb"])
    for env, value in (("WANDB_MODE", "offline"), ("WANDB_MODE", "disabled"), ("WANDB_API_KEY", "k" * 40)):
        monkeypatch.setenv(env, value)
        check_tracker_setup(["wandb"])
        monkeypatch.delenv(env)
    (tmp_path / "netrc").write_text("machine api.wandb.ai login user password " + "k" * 40 + "\n")
    check_tracker_setup(["wandb"])  # what `wandb login` writes
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    if mlflow_refuses_file_stores():
        with pytest.raises(ValueError, match="--report-to mlflow: MLFLOW_TRACKING_URI=file:.*is a file store.*"
                                             "MLFLOW_ALLOW_FILE_STORE=true"):
            check_tracker_setup(["mlflow"])
        monkeypatch.setenv("MLFLOW_TRACKING_URI", str(tmp_path / "mlruns"))  # a plain path is a file store too
        with pytest.raises(ValueError, match="is a file store"):
            check_tracker_setup(["mlflow"])
    else:  # MLflow 2 (mlflow-skinny>=2.16 is the trackers extra's floor) takes a file store: nothing to refuse
        check_tracker_setup(["mlflow"])
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    check_tracker_setup(["mlflow"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///" + str(tmp_path / "mlflow.db"))
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")
    check_tracker_setup(["mlflow"])  # the set-up's trackers extra brings SQLAlchemy and Alembic
    import importlib.util

    find_spec = importlib.util.find_spec  # mlflow-skinny alone: the database stores' two packages are missing
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("sqlalchemy", "alembic") else find_spec(name, *a))
    with pytest.raises(ValueError, match="is a database store, which needs sqlalchemy and alembic.*pip install mlflow"):
        check_tracker_setup(["mlflow"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "postgresql+psycopg2://u@host/db")
    with pytest.raises(ValueError, match="is a database store"):
        check_tracker_setup(["mlflow"])
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    if mlflow_refuses_file_stores():  # and the file store's message suggests a database only with the install
        with pytest.raises(ValueError, match=r"sqlite:///mlflow.db, after pip install mlflow"):
            check_tracker_setup(["mlflow"])
    assert not (tmp_path / "mlruns").exists() and not (tmp_path / "mlflow.db").exists()


def test_a_resumed_run_logs_on_in_its_own_mlflow_run(tmp_path, monkeypatch, capsys):
    """A run stopped and resumed (a preempted job, a kill) logged its second part to a new MLflow run of the same
    name, the first left RUNNING; the run folder now records its tracker runs (trackers.json) and the resumed part
    logs on in the same run, which ends FINISHED with one history over all the steps. A tracking store that no longer
    holds the run gets a new run, with a warning."""
    from mlflow.tracking import MlflowClient

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    import json

    from nlp_qt.train import train

    from ..nlp_qt.test_train import _cfg

    out = tmp_path / "ml"
    train(_cfg(tmp_path, "ml", max_steps=2, report_to=("mlflow",)))  # a checkpoint every 2 steps
    first = json.loads((out / "trackers.json").read_text())["mlflow"]
    capsys.readouterr()
    train(_cfg(tmp_path, "ml", max_steps=4, report_to=("mlflow",)))  # --resume (the helper's default), 2 more
    said = capsys.readouterr().out
    assert f"logging on in the mlflow run {first}" in said and "MLflow keeps the first part's max_steps=2" in said
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("nlp_qt").experiment_id])
    assert run.info.run_id == first and run.info.status == "FINISHED"
    rows = list(csv.DictReader(open(out / "log.csv")))
    steps = sorted({m.step for m in client.get_metric_history(first, "train/loss")})
    assert steps == [int(r["step"]) for r in rows] and steps[0] == 1 and steps[-1] > 3  # both parts, one history

    moved = (tmp_path / "mlruns2").as_uri()  # the store moved: a new run there, said so
    monkeypatch.setenv("MLFLOW_TRACKING_URI", moved)
    with pytest.warns(UserWarning, match=f"MLflow run {first} this run logged to is not in the tracking store now"):
        train(_cfg(tmp_path, "ml", max_steps=5, report_to=("mlflow",)))
    (new,) = MlflowClient(tracking_uri=moved).search_runs(
        [MlflowClient(tracking_uri=moved).get_experiment_by_name("nlp_qt").experiment_id])
    assert new.info.run_id != first and json.loads((out / "trackers.json").read_text())["mlflow"] == new.info.run_id


def test_a_resumed_run_asks_wandb_for_its_own_run(tmp_path, monkeypatch):
    """wandb (offline here): the resumed part asks for the run the first part started (its id, resume="allow"), so
    an online run goes on in one W&B run; steps below the resumed run's last one are not sent again (wandb drops
    them with a warning each)."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    out, _ = _nlp_qt(tmp_path, "wb", report_to=("wandb",))
    import json

    import wandb

    first = json.loads((out / "trackers.json").read_text())["wandb"]
    seen = []
    real = wandb.init
    monkeypatch.setattr(wandb, "init", lambda *a, **kw: seen.append(kw) or real(*a, **kw))
    from nlp_qt.train import train

    from ..nlp_qt.test_train import _cfg

    train(_cfg(tmp_path, "wb", max_steps=5, report_to=("wandb",)))
    assert seen and seen[0]["id"] == first and seen[0]["resume"] == "allow"
    assert json.loads((out / "trackers.json").read_text())["wandb"] == first


def test_steps_a_killed_part_logged_after_its_checkpoint_are_not_sent_again(tmp_path, monkeypatch):
    """A part killed after logging steps past its last checkpoint: the resumed part trains and logs them again (the
    same numbers); MLflow then held each of those steps twice (found by a probe: [.. 1200, 1400, 1200, 1400 ..]).
    Simulated by putting back an earlier checkpoint after a part logged on. A tracker left out of one part keeps its
    run in trackers.json for a later part that names it again."""
    import json
    import shutil

    from mlflow.tracking import MlflowClient

    from nlp_qt.train import train

    from ..nlp_qt.test_train import _cfg

    uri = (tmp_path / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    out = tmp_path / "ml"
    train(_cfg(tmp_path, "ml", max_steps=2, report_to=("mlflow",)))
    shutil.copytree(out / "checkpoint", tmp_path / "at2")
    train(_cfg(tmp_path, "ml", max_steps=4, report_to=("mlflow",)))  # logs 3 and 4, checkpoints at 4
    shutil.rmtree(out / "checkpoint")
    shutil.copytree(tmp_path / "at2", out / "checkpoint")  # as if killed after logging 3 and 4
    first = json.loads((out / "trackers.json").read_text())["mlflow"]
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.delenv("WANDB_DIR", raising=False)
    train(_cfg(tmp_path, "ml", max_steps=4, report_to=("wandb",)))  # a part with wandb instead of MLflow
    assert json.loads((out / "trackers.json").read_text())["mlflow"] == first
    shutil.rmtree(out / "checkpoint")
    shutil.copytree(tmp_path / "at2", out / "checkpoint")
    train(_cfg(tmp_path, "ml", max_steps=4, report_to=("mlflow",)))  # trains 3 and 4 again, in the same MLflow run
    client = MlflowClient(tracking_uri=uri)
    steps = [m.step for m in client.get_metric_history(first, "train/loss")]
    assert sorted(steps) == [1, 2, 3, 4]  # each once
