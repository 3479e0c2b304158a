"""A normal (non-editable) install carries the shipped data (issue 17): the wheel holds every data file the
loaders read, so `python -m fewshot.train --dataset reuters` (its data in shared_losses/data) and the nlp_qt
corpora work from it."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_wheel_holds_the_shipped_data(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "runs", "build", "*.egg-info",
                                                              "__pycache__", ".*"))
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(src),
                          "-w", str(tmp_path / "dist")], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    names = set(zipfile.ZipFile(next((tmp_path / "dist").glob("*.whl"))).namelist())
    wanted = [p.relative_to(ROOT).as_posix() for d in ("shared_losses/data", "nlp_qt/data")
              for p in (ROOT / d).rglob("*") if p.is_file() and p.suffix != ".py" and "__pycache__" not in p.parts]
    assert len(wanted) > 130
    assert sorted(set(wanted) - names) == []
