"""Rehearse docs/clusters.md's prepared GPU command on this CPU, under the GPU machine's Python and torch.

The prepared command (``bash scripts/gpu_table3.sh --bench --speed auto --fit ...``) runs on a bare GPU machine
with Python 3.12, a CUDA build of torch 2.11 and a few packages of its image, and gets everything else from the
carried wheels (``.whl/``, ``scripts/fetch_gpu_deps.py``). The suite's tests run the same script under this
project's ``.venv`` (Python 3.11, torch 2.13, every package installed), so they cannot see an import that only the
set-up provides, a wheel that no longer fits, or code that needs a newer torch. This does what the machine will do,
on the CPU and at tiny sizes:

1. makes (once; reused after) a virtual environment of the given Python 3.12 with ``torch==2.11.0`` and
   :data:`IMAGE_PACKAGES` (what the GPU machine's image holds that the command imports), none of the carried ones;
2. runs the prepared command **as written in docs/clusters.md** (read from there; ``<full sha of HEAD>`` is this
   checkout's commit) with :data:`TINY` appended (the last value of a repeated option wins), the wheels installed
   into a scratch folder by the script itself, its pack written to a scratch ``OUT``;
3. checks the pack (its six files), imports it with ``scripts/table3_gpu.py import --into`` a scratch results
   folder, and checks that the repository's tree is as it was (``git status``).

It needs a package registry (step 1, the first time: torch's CUDA build and its NVIDIA libraries, 5.1 GB installed)
and ``.whl/`` (run ``scripts/fetch_gpu_deps.py`` first). It cannot check CUDA, NVIDIA's EGL, graph capture or any
time: the first device command still decides those. Exit status 0 when every step passed; each failure is one line
naming the step.

    python scripts/rehearse_gpu_command.py --python ~/.pyenv/versions/3.12.1/bin/python
    python scripts/rehearse_gpu_command.py --python python3.12 --dry-run     # print the command, run nothing
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))  # table3_gpu beside it, however this is run
from table3_gpu import BENCH_FILES, PACK_FILES  # noqa: E402

#: The GPU machine's Python (major, minor) and torch.
GPU_PYTHON = (3, 12)
GPU_TORCH = "torch==2.11.0"
#: Packages of the GPU machine's image that the prepared command imports (read there on 2026-11-27; numpy 2.5.5,
#: accelerate 1.15.0 then), installed from the registry beside torch. What the command needs beyond these and torch
#: must come from .whl/.
IMAGE_PACKAGES = ("numpy", "scipy", "accelerate", "tensorboard", "matplotlib", "imageio", "pillow", "tqdm", "absl-py",
                  "etils", "lxml", "protobuf", "pyparsing", "pyyaml", "typing-extensions", "cloudpickle", "attrs",
                  "wrapt", "packaging", "fsspec", "rich", "requests", "psutil", "scikit-learn")
#: Tiny sizes appended to the prepared command (tests/rl_curl/test_gpu_table3.py runs its slices with TINY_RUNS and
#: TINY_BENCH too): 4 filters, 2 layers, 20x20 frames, action repeat 50 (a cartpole episode is 20 agent steps),
#: 1000 env steps, batch 8, and a bench of 2 updates.
TINY_RUNS = ("--extra=--num-filters=4", "--extra=--num-layers=2", "--extra=--hidden-dim=16", "--extra=--feature-dim=8",
             "--extra=--image-size=20", "--extra=--crop-size=16", "--extra=--seed-steps=5", "--extra=--eval-every=1000",
             "--extra=--eval-episodes=2", "--extra=--replay-capacity=500", "--extra=--action-repeat=50",
             "--extra=--log-every=100", "--extra=--torch-threads=1")
TINY_BENCH = ("--bench-extra=--tiny", "--bench-extra=--updates=2", "--bench-extra=--repeats=1",
              "--bench-extra=--capacity=100", "--bench-extra=--profile-updates=2")
TINY = ("--batch-size=8", "--env-steps=1000", *TINY_RUNS, *TINY_BENCH)
#: What the prepared command's pack holds (with --bench).
PACK = PACK_FILES + BENCH_FILES
SHA_PLACEHOLDER = "<full sha of HEAD>"


class RehearsalError(Exception):
    """A step that failed: its one-line message."""


def prepared_command(sha: str, clusters_md: Path = ROOT / "docs" / "clusters.md") -> list[str]:
    """The prepared GPU command of docs/clusters.md as argv (``bash scripts/gpu_table3.sh --bench ...``), with
    ``sha`` for its commit placeholder; one such block must be there."""
    blocks = re.findall(r"```bash\n(bash scripts/gpu_table3\.sh --bench .*?)```", clusters_md.read_text(), flags=re.S)
    if len(blocks) != 1:
        raise RehearsalError(f"{clusters_md} holds {len(blocks)} prepared commands ('bash scripts/gpu_table3.sh "
                             "--bench ...' blocks), not one")
    if SHA_PLACEHOLDER not in blocks[0]:
        raise RehearsalError(f"the prepared command of {clusters_md} has no '--commit {SHA_PLACEHOLDER}'")
    return shlex.split(blocks[0].replace("\\\n", " ").replace(SHA_PLACEHOLDER, sha))


def rehearsal_argv(sha: str) -> list[str]:
    """The prepared command with this checkout's commit, and :data:`TINY` after it."""
    return prepared_command(sha) + list(TINY)


def python_version(python: str) -> tuple[int, int]:
    try:
        out = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RehearsalError(f"--python {python}: cannot run it ({e})") from None
    if out.returncode != 0:
        raise RehearsalError(f"--python {python}: exited with status {out.returncode}")
    major, minor = out.stdout.split()
    return int(major), int(minor)


def make_venv(python: str, venv: Path) -> Path:
    """``venv``'s interpreter, the environment made and filled first where it has no torch 2.11."""
    py = venv / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import torch, sys; sys.exit(not torch.__version__"
                                       ".startswith('2.11'))"], capture_output=True).returncode == 0:
        print(f"[venv] {venv}: reused (torch 2.11 there)")
        return py
    t = time.monotonic()
    if subprocess.run([python, "-m", "venv", str(venv)]).returncode != 0:
        raise RehearsalError(f"[venv] could not make a virtual environment in {venv} with {python}")
    pip = [str(py), "-m", "pip", "install", "-q", GPU_TORCH, *IMAGE_PACKAGES]
    print(f"[venv] {shlex.join(pip)}", flush=True)
    if subprocess.run(pip).returncode != 0:
        raise RehearsalError(f"[venv] installing {GPU_TORCH} and the image's packages into {venv} failed (a package "
                             "registry is needed the first time)")
    print(f"[venv] {venv} made in {time.monotonic() - t:.0f} s")
    return py


def git_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout


def rehearse(py: Path, scratch: Path, sha: str, timeout: float) -> None:
    argv = rehearsal_argv(sha) + [f"--work={scratch / 'work'}"]  # the runs' folders in the scratch folder too
    site, out, results = scratch / "site", scratch / "pack", scratch / "results"
    out.mkdir(parents=True)
    env = {**os.environ, "PYTHON": str(py), "GPU_SITE": str(site), "OUT": str(out)}
    for var in ("PYTHONPATH", "VIRTUAL_ENV"):  # the GPU machine has neither this checkout's path nor its .venv
        env.pop(var, None)
    before = git_status()
    if before:
        print("[tree] uncommitted changes: the command runs the working tree as it is, under HEAD's commit", flush=True)
    t = time.monotonic()
    print(f"[command] {shlex.join(argv)}", flush=True)
    with open(scratch / "command.log", "w") as log:
        try:
            rc = subprocess.run(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            raise RehearsalError(f"[command] still running after {timeout:.0f} s (its log: {log.name})") from None
    print(f"[command] status {rc} in {time.monotonic() - t:.0f} s; its log: {scratch / 'command.log'}")
    tail = (scratch / "command.log").read_text(errors="replace").splitlines()
    print("\n".join(f"    {line}" for line in tail[-30:]))
    if rc != 0:
        raise RehearsalError(f"[command] exited with status {rc} (its log: {scratch / 'command.log'})")
    missing = [f for f in PACK if not (out / f).is_file()]
    extra = sorted(p.name for p in out.iterdir() if p.name not in PACK)
    if missing or extra:
        raise RehearsalError(f"[pack] {out}: missing {missing}, unexpected {extra}")
    imp = subprocess.run([sys.executable, str(ROOT / "scripts" / "table3_gpu.py"), "import", str(out), "--into",
                          str(results)], cwd=ROOT, capture_output=True, text=True)
    if imp.returncode != 0:
        raise RehearsalError(f"[import] status {imp.returncode}: {imp.stderr.strip().splitlines()[-1:]}")
    runs = [p for p in results.iterdir() if (p / "slice.json").is_file()]
    print(f"[import] {len(runs)} run folder(s) and the records into {results}")
    after = git_status()
    if after != before:
        changed = sorted(set(after.splitlines()) ^ set(before.splitlines()))
        raise RehearsalError(f"[tree] the rehearsal changed the repository's tree: {changed}")
    print("[tree] the repository's tree is as it was")


def main(argv: list[str] | None = None) -> int:
    from shared_losses.training.cli import ArgumentParser

    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="python3.12",
                        help="a Python %d.%d interpreter (the GPU machine's version); default: python3.12 on PATH"
                        % GPU_PYTHON)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "gpu_rehearsal_venv",
                        help="the environment made with it (reused when it has torch 2.11; default: %(default)s)")
    parser.add_argument("--scratch", type=Path, default=None,
                        help="an empty or missing folder for the wheels, the pack, the import and the log (default: a "
                        "new temporary folder, kept)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds the command may take (default: %(default)s; it took 90-180 s on 2 cores)")
    parser.add_argument("--dry-run", action="store_true", help="print the command that would run, run nothing")
    args = parser.parse_args(argv)
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.strip()
        if args.dry_run:
            print(shlex.join(rehearsal_argv(sha)))
            return 0
        version = python_version(args.python)
        if version != GPU_PYTHON:
            raise RehearsalError(f"--python {args.python} is Python {version[0]}.{version[1]}; the GPU machine's is "
                                 f"{GPU_PYTHON[0]}.{GPU_PYTHON[1]}")
        if not list((ROOT / ".whl").glob("*.whl")):
            raise RehearsalError(f"{ROOT / '.whl'} holds no wheels: run 'python scripts/fetch_gpu_deps.py' first")
        if args.scratch is not None and args.scratch.exists() and any(args.scratch.iterdir()):
            raise RehearsalError(f"--scratch {args.scratch} is not empty")
        scratch = args.scratch or Path(tempfile.mkdtemp(prefix="gpu_rehearsal_"))
        scratch.mkdir(parents=True, exist_ok=True)
        py = make_venv(args.python, args.venv)
        rehearse(py, scratch.resolve(), sha, args.timeout)
    except RehearsalError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"rehearsal passed: the prepared command of docs/clusters.md at {sha[:12]} (scratch: {scratch})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # shared_losses from this checkout, installed or not
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main, interrupted="stopped (Ctrl-C): the scratch folder is kept as it was"))
