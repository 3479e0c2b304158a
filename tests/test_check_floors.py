"""scripts/check_floors.py: pyproject.toml's floors read as pins (no install here: that needs a registry and
several GB), and the floors the getting-started page states are pyproject.toml's."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_floors", ROOT / "scripts" / "check_floors.py")
check_floors = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_floors)

PYPROJECT = """
[build-system]
requires = ["setuptools>=77"]
[project]
name = "x"
dependencies = ["torch>=2.5", "Bar_Baz.qux >= 3.1, <4", "plain", "dm-control==1.0.50",
                "numpy>=1.24; python_version < '3.13'"]
[project.optional-dependencies]
docs = ["mkdocstrings[python]>=0.26", "torch>=2.7"]
test = ["pytest>=8"]
"""


def test_requirements_are_the_build_system_the_core_then_the_extras_asked_for():
    assert check_floors.requirements(PYPROJECT, ())[:2] == ["setuptools>=77", "torch>=2.5"]
    assert check_floors.build_requirements(PYPROJECT) == ["setuptools>=77"]
    assert check_floors.requirements(PYPROJECT, ("docs",))[-2:] == ["mkdocstrings[python]>=0.26", "torch>=2.7"]
    assert "pytest>=8" not in check_floors.requirements(PYPROJECT, ("docs",))
    with pytest.raises(ValueError, match="no extra 'cluster' .*docs, test"):
        check_floors.requirements(PYPROJECT, ("cluster",))


def test_floors_normalise_names_strip_extras_and_keep_the_highest_floor():
    floor, open_ended = check_floors.floors(check_floors.requirements(PYPROJECT, ("docs", "test")))
    assert floor == {"setuptools": "77", "torch": "2.7", "bar-baz-qux": "3.1", "dm-control": "1.0.50", "numpy": "1.24",
                     "mkdocstrings": "0.26", "pytest": "8"}
    assert open_ended == ["plain"]
    with pytest.raises(ValueError, match="cannot read the requirement"):
        check_floors.floors(["=>2"])


def test_a_floor_is_pinned_to_its_oldest_release():
    assert check_floors.oldest_release("2.3", ["2.4.0", "2.3.1", "2.2.0", "2.10.0"]) == "2.3.1"
    assert check_floors.oldest_release("1.0", ["1.0.0", "0.9.35"]) == "1.0.0"
    assert check_floors.oldest_release("0.26", ["0.26.0", "0.26.1", "0.3.0"]) == "0.26.0"  # 0.3 < 0.26
    assert check_floors.oldest_release("5.0", []) == "5.0"  # nothing known: as written


def test_constraints_add_pyarrow_below_18_only_for_numpy_1():
    released = {"numpy": ["1.24.0", "1.24.1"], "pyarrow": []}.get
    lines = check_floors.constraints({"numpy": "1.24"}, lambda n: released(n) or [])
    assert lines == ["numpy==1.24.0", "pyarrow<18"]
    assert check_floors.constraints({"numpy": "2.0"}) == ["numpy==2.0"]
    assert check_floors.constraints({"torch": "2.5"}) == ["torch==2.5"]


def test_the_projects_floors_cover_every_dependency_and_the_page_states_them():
    floor, open_ended = check_floors.floors(check_floors.requirements((ROOT / "pyproject.toml").read_text()))
    assert not open_ended  # every dependency has a floor the check installs
    assert floor["torch"] == "2.5" and floor["mujoco"] == "3.17.0"
    page = (ROOT / "docs" / "getting_started.md").read_text()
    stated = re.search(r"Their floors are the oldest versions the fast tier passes with \([^)]*\): ([^.]+\.[^.]+(?:"
                       r"\.[^.]+)*?)\. `python scripts/check_floors.py`", " ".join(page.split()))
    assert stated, "docs/getting_started.md no longer states the floors"
    pairs = [item.strip().rsplit(" ", 1) for item in stated[1].split(",")]
    assert len(pairs) >= 10
    for name, version in pairs:
        assert floor[name] == version, (name, version, floor[name])


def test_floors_that_cannot_be_installed_together_are_named(monkeypatch, tmp_path):
    calls = []

    def run(cmd, **kw):
        calls.append(cmd)
        if "--dry-run" not in cmd:
            return check_floors.subprocess.CompletedProcess(cmd, 1)
        out = ("Collecting datasets==3.0.0\nERROR: Cannot install contrastive-suite because these package versions "
               "have conflicting dependencies.\n\nThe conflict is caused by:\n    contrastive-suite depends on "
               "tqdm==4.66.0\n    datasets 3.0.0 depends on tqdm>=4.66.3\n\nWARNING: a warning\n")
        return check_floors.subprocess.CompletedProcess(cmd, 1, out, "")

    monkeypatch.setattr(check_floors.subprocess, "run", run)
    with pytest.raises(check_floors.Failed) as err:
        check_floors._install_suite(tmp_path / "bin" / "python", tmp_path / "c.txt")
    text = str(err.value)
    assert text.startswith("pyproject.toml's floors cannot be installed together:\nThe conflict is caused by:")
    assert "datasets 3.0.0 depends on tqdm>=4.66.3" in text and "WARNING" not in text
    assert "-q" in calls[0] and "-q" not in calls[1] and calls[1][-1] == "--dry-run"
