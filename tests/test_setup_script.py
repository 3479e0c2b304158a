"""scripts/setup.sh on a machine where it ran before: it only checks, and installs nothing (it used to upgrade pip,
through the network, at every run, under the offline demos and the test command)."""

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fake_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A .venv whose python only records its arguments (and says torch imports), installed earlier: its stamp newer
    than pyproject.toml."""
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(f'#!/usr/bin/env bash\necho "$*" >> {log}\n')
    python.chmod(0o755)
    stamp = venv / ".suite-installed"
    stamp.touch()
    later = (ROOT / "pyproject.toml").stat().st_mtime + 60
    os.utime(stamp, (later, later))
    return venv, log


def test_a_second_setup_run_only_checks(tmp_path):
    venv, log = _fake_venv(tmp_path)
    res = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env={**os.environ, "VENV": str(venv)},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert log.read_text().splitlines() == ["-c import torch"]  # no pip call at all


def test_a_changed_pyproject_installs_the_suite_again(tmp_path):
    venv, log = _fake_venv(tmp_path)
    os.utime(venv / ".suite-installed", (0, 0))  # older than pyproject.toml
    res = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env={**os.environ, "VENV": str(venv)},
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "-c import torch" and any(c.startswith("-m pip install -q -e .[") for c in calls), calls
    assert not any("--upgrade pip" in c for c in calls)
