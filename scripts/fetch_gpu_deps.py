"""Fetch (and slim) the wheels that the bare GPU machine lacks for DeepMind Control training.

Why: the GPU machine that runs ``python -m rl_curl.train`` has no internet and no package registry. It already has
torch, numpy, scipy, lxml, absl-py, etils, protobuf, ... but lacks mujoco, dm-control, dm-env, dm-tree, glfw,
PyOpenGL, gymnasium, Farama-Notifications, tyro, docstring-parser and typeguard. Those wheels travel with the working
tree in the ignored folder ``.whl/`` and are installed there with

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site

The tree that travels must stay under 64 MiB, and the raw dm-control (56 MB) and mujoco (27 MB) wheels are too big
together. Most of that is assets the DeepMind Control *suite* never touches (locomotion walkers and soccer, the dog
meshes, test data, the MuJoCo Studio app), so this script rewrites those two wheels without them (and without their
RECORD lines). ``from dm_control import suite`` and every non-dog suite task still load and render.

What it does, run on a machine with registry access before a GPU call:
  1. decides the versions: mujoco==3.17.0 and dm-control==1.0.50 pinned, the others at the version installed in this
     interpreter (``--pin NAME==VERSION`` overrides); shtab is added only if tyro's Requires-Dist needs it;
  2. ``pip download``s each as a manylinux x86-64 CPython wheel for ``--python-version`` (default 3.12) into ``--dest``,
     skipping wheels already there and keeping exactly one wheel per distribution there;
  3. slims the dm-control and mujoco wheels in place (idempotent);
  4. unless ``--no-gl``, downloads the EGL/GL loader .deb packages (libegl1, libglvnd0, ...) into ``--gl-dest`` with
     apt-get, for a GPU machine that lacks them (unpack there with ``dpkg -x``); a failure is only a warning;
  5. prints the files with their sizes and exits 1 if they total more than ``--max-mib``.

examples:
    python scripts/fetch_gpu_deps.py                          # .whl/ and .gl/ for the GPU command of docs/clusters.md
    python scripts/fetch_gpu_deps.py --no-gl --pin gymnasium==1.2.0
"""

from __future__ import annotations

import argparse
import csv
import importlib.metadata
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

PINNED = {"mujoco": "3.17.0", "dm-control": "1.0.50"}
# taken at the version installed in the running interpreter unless --pin says otherwise
FROM_LOCAL = ["dm-env", "dm-tree", "glfw", "PyOpenGL", "gymnasium", "Farama-Notifications", "tyro",
              "docstring-parser", "typeguard"]
# carried only when a carried wheel requires it unconditionally: (name, required by)
CONDITIONAL = [("shtab", "tyro")]

PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
MORE_PLATFORMS = ["manylinux_2_24_x86_64", "manylinux_2_31_x86_64", "manylinux_2_34_x86_64", "manylinux_2_35_x86_64"]

# members the DeepMind Control suite never imports or reads (checked: `from dm_control import suite`, `import mujoco`
# and suite.load of every non-dog task import nothing under them and open no file there)
SLIM = {
    "dm-control": [
        "dm_control/locomotion/",  # soccer (20 MB), walkers (17 MB), arenas: the locomotion library, not the suite
        "dm_control/suite/dog_assets/",  # 10 MB of meshes, only the dog-* tasks
        "dm_control/mujoco/testing/",
        "dm_control/blender/",
        "dm_control/mjcf/test_assets/",
        "dm_control/suite/all_domains.png",
    ],
    "mujoco": [
        "mujoco/experimental/",  # MuJoCo Studio, dear_imgui, implot: never imported by `import mujoco`
        "mujoco/testdata/",
    ],
}

GL_PACKAGES = ["libvulkan1", "libegl1", "libglvnd0", "libopengl0", "libgl1", "libglx0", "libgles2"]

# what the GPU machine already has: a requirement of a carried wheel on one of these is not reported
PRESENT_ON_GPU = {"torch", "numpy", "scipy", "accelerate", "tensorboard", "matplotlib", "imageio", "pillow", "tqdm",
                  "absl-py", "etils", "lxml", "protobuf", "pyparsing", "requests", "setuptools", "typing-extensions",
                  "rich", "cloudpickle", "attrs", "wrapt", "pyyaml", "packaging", "fsspec"}
# required by a carried wheel but only used by what slimming removed: not carried
UNUSED_BY_SUITE = {"labmaze": "dm_control.locomotion only", "websockets": "mujoco.experimental.studio only"}


class FetchError(Exception):
    """A problem to report on one line."""


def normalize(name: str) -> str:
    """PEP 503 name, with '_' as wheel file names write it: 'PyOpenGL' -> 'pyopengl', 'dm-control' -> 'dm_control'."""
    return re.sub(r"[-_.]+", "_", name).lower()


def parse_wheel_name(filename: str) -> tuple[str, str, list[str], list[str], list[str]] | None:
    """(normalized name, version, python tags, abi tags, platform tags) of a wheel file name, or None."""
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    if len(parts) == 6:  # with a build tag
        parts = parts[:2] + parts[3:]
    if len(parts) != 5:
        return None
    name, version, py, abi, plat = parts
    return normalize(name), version, py.split("."), abi.split("."), plat.split(".")


def wheel_fits(filename: str, name: str, version: str, python_version: str, platforms: list[str]) -> bool:
    """Whether a wheel file is `name`==`version` and installs on CPython `python_version` on one of `platforms`."""
    parsed = parse_wheel_name(filename)
    if parsed is None:
        return False
    wname, wversion, pys, abis, plats = parsed
    if wname != normalize(name) or wversion != version:
        return False
    major, minor = python_version.split(".")[:2]
    cp = f"cp{major}{minor}"
    if not any(p == "any" or p in platforms for p in plats):
        return False
    ok_py = {cp, f"py{major}", f"py{major}{minor}"}
    for abi in abis:
        if abi in (cp, "none") and any(p in ok_py for p in pys):
            return True
        if abi == "abi3" and any(re.fullmatch(r"cp(\d)(\d+)", p) and p[2] == major and int(p[3:]) <= int(minor)
                                 for p in pys):
            return True
    return False


def prune_other_versions(dest: Path, name: str, keep: str) -> list[str]:
    """Remove the wheels of distribution `name` in `dest` other than the file `keep`; other files are left alone.

    Returns the names removed."""
    removed = []
    for path in sorted(dest.glob("*.whl")):
        parsed = parse_wheel_name(path.name)
        if parsed and parsed[0] == normalize(name) and path.name != keep:
            path.unlink()
            removed.append(path.name)
    return removed


def _dropped(member: str, prefixes: list[str]) -> bool:
    for prefix in prefixes:
        bare = prefix.rstrip("/")
        if member == bare or member.startswith(bare + "/"):
            return True
    return False


def slim_wheel(path: str | os.PathLike, drop_prefixes: list[str]) -> tuple[int, int]:
    """Rewrite the wheel at `path` without the members under `drop_prefixes` and without their lines in
    ``*.dist-info/RECORD``. A prefix names a folder ('pkg/assets/') or one file ('pkg/big.png').

    Atomic (a temporary file in the same folder, then os.replace) and idempotent: a wheel with nothing to drop is not
    touched. Returns (bytes before, bytes after)."""
    path = Path(path)
    before = path.stat().st_size
    with zipfile.ZipFile(path) as zin:
        infos = zin.infolist()
        if not any(_dropped(i.filename, drop_prefixes) for i in infos):
            return before, before
        fd, tmp = tempfile.mkstemp(prefix=".slim-", suffix=".whl", dir=path.parent)
        os.close(fd)
        try:
            with zipfile.ZipFile(tmp, "w") as zout:
                for info in infos:
                    if _dropped(info.filename, drop_prefixes):
                        continue
                    out = zipfile.ZipInfo(info.filename, info.date_time)
                    out.compress_type = info.compress_type
                    out.external_attr = info.external_attr
                    out.create_system = info.create_system
                    if re.fullmatch(r"[^/]+\.dist-info/RECORD", info.filename):
                        text = zin.read(info).decode("utf-8")
                        rows = [r for r in csv.reader(io.StringIO(text)) if r and not _dropped(r[0], drop_prefixes)]
                        buf = io.StringIO()
                        csv.writer(buf, lineterminator="\n").writerows(rows)
                        zout.writestr(out, buf.getvalue().encode("utf-8"))
                    else:
                        out.file_size = info.file_size  # lets zipfile decide on zip64 up front
                        with zin.open(info) as src, zout.open(out, "w") as dst:
                            shutil.copyfileobj(src, dst, 1 << 20)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
    return before, path.stat().st_size


def wheel_requires(path: Path, python_version: str) -> list[str]:
    """Normalized names that the wheel requires for a plain install (no extras) on Linux x86-64 CPython."""
    try:
        from packaging.requirements import Requirement
    except ImportError:  # pip always carries a copy
        from pip._vendor.packaging.requirements import Requirement
    env = {"python_version": python_version, "python_full_version": python_version + ".0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython", "extra": ""}
    with zipfile.ZipFile(path) as zf:
        meta = next(n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n))
        text = zf.read(meta).decode("utf-8")
    names = []
    for line in text.split("\n\n", 1)[0].splitlines():
        if line.startswith("Requires-Dist:"):
            req = Requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(env):
                names.append(normalize(req.name))
    return names


def local_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def parse_pins(pins: list[str]) -> dict[str, str]:
    out = {}
    for pin in pins:
        m = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s=]+)\s*", pin)
        if not m:
            raise FetchError(f"--pin {pin!r}: expected NAME==VERSION")
        out[normalize(m.group(1))] = m.group(2)
    return out


def resolve_version(name: str, pins: dict[str, str]) -> str:
    if normalize(name) in pins:
        return pins[normalize(name)]
    if name in PINNED:
        return PINNED[name]
    version = local_version(name)
    if version is None:
        raise FetchError(f"{name} is not installed in this interpreter ({sys.executable}): install it or pass "
                         f"--pin {name}==VERSION")
    return version


def find_fitting(dest: Path, name: str, version: str, python_version: str, platforms: list[str]) -> Path | None:
    for path in sorted(dest.glob("*.whl")):
        if wheel_fits(path.name, name, version, python_version, platforms):
            return path
    return None


def pip_download(name: str, version: str, dest: Path, python_version: str, platforms: list[str]) -> bool:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
           python_version, "--implementation", "cp"]
    for plat in platforms:
        cmd += ["--platform", plat]
    cmd += ["-q", "--disable-pip-version-check", "-d", str(dest), f"{name}=={version}"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        print(f"  pip download {name}=={version}: {last}")
    return proc.returncode == 0


def fetch_wheel(name: str, version: str, dest: Path, python_version: str) -> Path:
    """The one wheel of `name`==`version` for the target in `dest`, downloaded unless already there."""
    platforms = PLATFORMS
    found = find_fitting(dest, name, version, python_version, platforms + MORE_PLATFORMS)
    if found is not None:
        print(f"  {name}=={version}: have {found.name}")
    else:
        print(f"  {name}=={version}: downloading", flush=True)
        if not pip_download(name, version, dest, python_version, platforms):
            platforms = PLATFORMS + MORE_PLATFORMS
            print(f"  {name}=={version}: no wheel for {', '.join(PLATFORMS)}; retrying with "
                  f"{', '.join(MORE_PLATFORMS)} too")
            if not pip_download(name, version, dest, python_version, platforms):
                raise FetchError(f"no {name}=={version} wheel for CPython {python_version} on manylinux x86-64")
        found = find_fitting(dest, name, version, python_version, platforms)
        if found is None:
            raise FetchError(f"pip downloaded {name}=={version} but no fitting wheel is in {dest}")
    for gone in prune_other_versions(dest, name, found.name):
        print(f"  removed {gone} (another file of {name})")
    return found


def fetch_gl(gl_dest: Path) -> None:
    """apt-get download the GL/EGL loader packages into gl_dest; warn on one line and go on if that fails."""
    apt = shutil.which("apt-get")
    if apt is None:
        print("warning: apt-get not found; no GL .deb packages fetched (the GPU machine may already have them)")
        return
    gl_dest.mkdir(parents=True, exist_ok=True)
    have = {p: sorted(gl_dest.glob(f"{p}_*.deb")) for p in GL_PACKAGES}
    if all(have.values()):
        print(f"  GL packages: have all {len(GL_PACKAGES)} in {gl_dest}")
        return
    # apt's package lists in a folder of this run's own, removed afterwards (they are tens of MB, and a fixed name
    # in the shared temporary folder could be another user's)
    with tempfile.TemporaryDirectory(prefix="apt_lists_") as lists:
        (Path(lists) / "partial").mkdir()
        opts = ["-oAPT::Architecture=amd64", "-oAPT::Architectures=amd64", f"-oDir::State::Lists={lists}"]
        try:
            for step, args, cwd in (("update", ["update"], None), ("download", ["download", *GL_PACKAGES], gl_dest)):
                proc = subprocess.run([apt, *opts, "-q", *args], cwd=cwd, capture_output=True, text=True)
                if proc.returncode != 0:
                    last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
                    print(f"warning: apt-get {step} failed ({last}); GL .deb packages not fetched (the GPU machine "
                          "may already have them)")
                    return
        except OSError as exc:
            print(f"warning: apt-get could not run ({exc}); GL .deb packages not fetched")
            return
    for pkg in GL_PACKAGES:  # keep the newest file of each package
        files = sorted(gl_dest.glob(f"{pkg}_*.deb"), key=lambda p: p.stat().st_mtime)
        for old in files[:-1]:
            old.unlink()


def size_table(folders: list[Path]) -> int:
    rows = [(p, p.stat().st_size) for folder in folders if folder.is_dir()
            for p in sorted(folder.rglob("*")) if p.is_file()]
    width = max([len(str(p)) for p, _ in rows] + [5])
    for p, size in rows:
        print(f"{str(p):<{width}}  {size / 2**20:8.2f} MiB")
    total = sum(size for _, size in rows)
    print(f"{'total':<{width}}  {total / 2**20:8.2f} MiB  ({len(rows)} files)")
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--dest", type=Path, default=Path(".whl"), help="folder of the wheels (default .whl)")
    parser.add_argument("--python-version", default="3.12", help="the GPU machine's Python, X.Y (default 3.12)")
    gl = parser.add_mutually_exclusive_group()
    gl.add_argument("--gl-dest", type=Path, default=Path(".gl"), help="folder of the GL .deb packages (default .gl)")
    gl.add_argument("--no-gl", action="store_true", help="do not fetch the GL .deb packages")
    parser.add_argument("--max-mib", type=float, default=40.0,
                        help="fail if the wheels (and GL packages) total more than this many MiB (default 40)")
    parser.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION",
                        help="version of one distribution instead of the pinned or locally installed one (repeatable)")
    args = parser.parse_args(argv)
    try:
        if not re.fullmatch(r"\d+\.\d+", args.python_version):
            raise FetchError(f"--python-version {args.python_version!r}: expected X.Y, e.g. 3.12")
        pins = parse_pins(args.pin)
        wanted = [(name, resolve_version(name, pins)) for name in [*PINNED, *FROM_LOCAL]]
        args.dest.mkdir(parents=True, exist_ok=True)
        print(f"wheels for CPython {args.python_version} manylinux x86-64 into {args.dest}:")
        wheels = {name: fetch_wheel(name, version, args.dest, args.python_version) for name, version in wanted}
        for extra, by in CONDITIONAL:
            if normalize(extra) in wheel_requires(wheels[by], args.python_version):
                print(f"  {by} requires {extra}")
                wheels[extra] = fetch_wheel(extra, resolve_version(extra, pins), args.dest, args.python_version)
        carried = {normalize(n) for n in wheels} | {normalize(n) for n in PRESENT_ON_GPU}
        for name, path in wheels.items():
            missing = [r for r in wheel_requires(path, args.python_version) if r not in carried]
            for req in missing:
                why = UNUSED_BY_SUITE.get(req.replace("_", "-"), "assumed present on the GPU machine")
                print(f"  note: {name} requires {req}, not carried ({why})")
        for name, prefixes in SLIM.items():
            before, after = slim_wheel(wheels[name], prefixes)
            what = "already slim" if before == after else f"{before / 2**20:.1f} -> {after / 2**20:.1f} MiB"
            print(f"  slimmed {wheels[name].name}: {what}")
        folders = [args.dest]
        if not args.no_gl:
            print(f"GL loader packages into {args.gl_dest}:")
            fetch_gl(args.gl_dest)
            folders.append(args.gl_dest)
        print()
        total = size_table(folders)
        if total > args.max_mib * 2**20:
            raise FetchError(f"{' + '.join(map(str, folders))} total {total / 2**20:.1f} MiB, over --max-mib "
                             f"{args.max_mib:g}: the working tree that travels must stay under 64 MiB")
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
