"""Run many short commands of the project's scripts in ONE Python process, each as ``python SCRIPT ARGS`` would.

Why: a case that only checks an option (a refusal, a usage error) costs well under a second once torch is imported,
but a new interpreter per case pays the imports (1.2 s of torch alone, several seconds beside another busy worker)
every time; 31 refusals took 41 s alone and 136 s in the suite. Here each case runs the script's file as
``__main__`` (``runpy.run_path``, so its ``if __name__ == "__main__"`` block, ``run_cli`` and exit status are the
command's own) with ``sys.argv``, the working folder and ``sys.path[0]`` set as the interpreter would set them, and
its stdout and stderr captured. ``SystemExit`` gives the status (None: 0; a string: printed, 1) and any other
exception is printed with its traceback and gives 1, as the interpreter does. The imports stay between cases (that is
the point); nothing else the cases share is expected, and the tests that need a fresh interpreter (start-up, signals,
pipes shared by processes) still run the scripts as commands.

    python -m tests.script_batch RESULTS.json < cases.json

cases: a JSON list of {"script": path, "args": [...], "cwd": folder}; results: a list of {"returncode", "stdout",
"stderr"} in the same order, written to RESULTS.json (not to stdout, which a case's C code could write into).
:func:`run_batch` does this from a test.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import runpy
import sys
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace
from tests import warm

ROOT = Path(__file__).resolve().parents[1]


def run_one(script: str, args: list[str], cwd: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    saved_argv, saved_path0, saved_cwd = sys.argv, sys.path[0], os.getcwd()
    code = 0
    try:
        os.chdir(cwd)
        sys.argv = [script, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(script))
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_path(script, run_name="__main__")
            except SystemExit as exc:
                if isinstance(exc.code, int):
                    code = exc.code
                elif exc.code is not None:
                    print(exc.code, file=sys.stderr)
                    code = 1
            except BaseException:  # what the interpreter would print before exiting with status 1
                traceback.print_exc()
                code = 1
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path0
        os.chdir(saved_cwd)
    return {"returncode": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def run_batch(cases: list[tuple[str, list[str], str | os.PathLike]], env: dict | None = None,
              timeout: float = 600) -> list[SimpleNamespace]:
    """Run ``cases`` ((script path, args, working folder), ...) in one new interpreter with the environment ``env``
    (as subprocess's; None: this process's); one result per case with ``returncode``, ``stdout`` and ``stderr`` like
    subprocess.CompletedProcess's."""
    payload = json.dumps([{"script": str(s), "args": [str(a) for a in args], "cwd": str(cwd)}
                          for s, args, cwd in cases])
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory() as tmp:
        dest = Path(tmp) / "results.json"
        res = warm.run([sys.executable, "-m", "tests.script_batch", str(dest)], input=payload,
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env)
        if res.returncode != 0 or not dest.exists():
            raise RuntimeError(f"the batch runner failed (status {res.returncode}):\n{res.stderr[-3000:]}")
        results = json.loads(dest.read_text())
    assert len(results) == len(cases), (len(results), len(cases))
    return [SimpleNamespace(**r) for r in results]


def main() -> int:
    dest, cases = Path(sys.argv[1]), json.loads(sys.stdin.read())
    results = [run_one(c["script"], c["args"], c["cwd"]) for c in cases]
    dest.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
