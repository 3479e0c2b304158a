"""--report-to (issue 34, item 9): the training scalars go to the trackers accelerate drives (mlflow with a
local file store, wandb offline) as well as to log.csv, the same numbers; TensorBoard stays the default and
``none`` writes log.csv only. Checked on nlp_qt's tiny run (the three applications log through one harness)."""

import csv
import math

import pytest

from shared_losses.runtime import check_report_to


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


def test_wandb_offline_writes_a_run_in_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    out, rows = _nlp_qt(tmp_path, "wb", report_to=("wandb",))
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    (records,) = run_dir.glob("run-*.wandb")
    data = records.read_bytes()
    assert b"train/loss" in data and b"objective" in data
    assert len(rows) == 3 and not (out / "tb").exists()
