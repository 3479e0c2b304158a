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


def _stopped_venv(tmp_path: Path, *, pip: bool, torch_installs: str) -> tuple[Path, Path, dict]:
    """A .venv left by a set-up stopped part-way, with stand-ins that keep state in marker files: its python has pip
    once ``pip-ok`` exists, imports torch once ``torch-ok`` exists; ``pip install`` of torch makes torch importable
    (``torch_installs="always"``), only with --force-reinstall (``"forced"``: pip took a half-installed torch for
    installed), or never (``"never"``); the system python (``PYTHON``) puts pip into a venv made again in place."""
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    if pip:
        (venv / "pip-ok").touch()
    python = venv / "bin" / "python"
    python.write_text(f"""#!/usr/bin/env bash
echo "venv: $*" >> {log}
case "$*" in
  "-c import torch") [ -f {venv}/torch-ok ] ||
    {{ echo "ImportError: libtorch_cpu.so: cannot open shared object file" >&2; exit 1; }} ;;
  "-m pip --version") [ -f {venv}/pip-ok ] ;;
  "-m pip install -q"*torch*)
    [ -f {venv}/pip-ok ] || {{ echo "No module named pip" >&2; exit 1; }}
    case "{torch_installs}:$*" in always:*|forced:*--force-reinstall*) touch {venv}/torch-ok ;; esac ;;
esac
""")
    system = tmp_path / "system-python"
    system.write_text(f'#!/usr/bin/env bash\necho "system: $*" >> {log}\n'
                      '[ "$1 $2" = "-m venv" ] && touch "$3/pip-ok"\n')
    for f in (python, system):
        f.chmod(0o755)
    stamp = venv / ".suite-installed"  # the suite's own install is not what these tests are about
    stamp.touch()
    later = (ROOT / "pyproject.toml").stat().st_mtime + 60
    os.utime(stamp, (later, later))
    return venv, log, {**os.environ, "VENV": str(venv), "PYTHON": str(system), "TORCH_SPEC": "torch==2.13.0"}


def test_a_venv_stopped_while_it_was_made_gets_pip_and_torch_when_the_setup_runs_again(tmp_path):
    """Ctrl-C in the set-up's first seconds (``python -m venv``) left a .venv with a python and no pip: every later
    set-up ended in "No module named pip"."""
    venv, log, env = _stopped_venv(tmp_path, pip=False, torch_installs="always")
    res = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert log.read_text().splitlines() == [
        "venv: -c import torch", "venv: -m pip --version", f"system: -m venv {venv}",
        "venv: -m pip install -q torch==2.13.0", "venv: -c import torch", "venv: -c import torch"]


def test_a_torch_that_pip_takes_for_installed_but_does_not_import_is_installed_again(tmp_path):
    venv, log, env = _stopped_venv(tmp_path, pip=True, torch_installs="forced")
    res = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    calls = log.read_text().splitlines()
    assert "venv: -m pip install -q --force-reinstall --no-deps torch==2.13.0" in calls, calls
    assert not any(c.startswith("system:") for c in calls), calls  # the venv had pip: not made again


def test_a_torch_that_never_imports_ends_the_setup_with_what_to_do(tmp_path):
    venv, log, env = _stopped_venv(tmp_path, pip=True, torch_installs="never")
    res = subprocess.run(["bash", str(ROOT / "scripts" / "setup.sh")], env=env, capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 1
    assert res.stderr.strip().splitlines()[-1] == (
        f"error: torch is installed in {venv} but cannot be imported (ImportError: libtorch_cpu.so: cannot open "
        f"shared object file); remove {venv} and run scripts/setup.sh again"), res.stderr
