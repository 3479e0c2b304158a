"""A bad option value or path on the command line ends in one line naming it (exit status 2), not a
traceback; bugs keep theirs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from shared_losses.cli import run_cli

ROOT = Path(__file__).resolve().parents[2]


def test_run_cli_turns_user_errors_into_one_line(capsys, monkeypatch):
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def bad():
        raise ValueError("tau_plus must be in [0, 1), got 1.5")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(bad)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tau_plus must be in [0, 1), got 1.5\n") and "Traceback" not in err
    monkeypatch.setenv("CONTRASTIVE_SUITE_TRACEBACK", "1")
    with pytest.raises(ValueError, match="tau_plus"):
        run_cli(bad)

    def bug():
        raise KeyError("a bug, not bad input")

    with pytest.raises(KeyError):
        run_cli(bug)
    assert run_cli(lambda: 7) == 7


@pytest.mark.parametrize("argv,message", [
    (["-m", "rl_curl.train", "--aux", "debiased", "--tau-plus", "1.5"], "tau_plus must be in [0, 1)"),
    (["-m", "rl_curl.evaluate", "--run-dir", "/nonexistent/run"], "/nonexistent/run"),
    (["-m", "fewshot.train", "--lam", "1.5"], "lam"),
    (["-m", "nlp_qt.train", "--corpus", "/nonexistent/books", "--output-dir", "OUT"], "/nonexistent/books"),
])
def test_entry_points_report_bad_input_in_one_line(tmp_path, argv, message):
    argv = [a.replace("OUT", str(tmp_path / "run")) for a in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MUJOCO_GL": "egl"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    res = subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and message in res.stderr, res.stderr
    assert any(line.startswith("error: ") for line in res.stderr.splitlines()), res.stderr
