"""Run the tests' ``python -m MODULE ...`` and ``python SCRIPT ...`` commands in a process forked from a warm one.

Most of a tiny command's time in this suite is importing the libraries it uses (torch, transformers, scikit-learn,
scipy: 2-6 s a command on the 2-core CI machine, census of 2026-12-02), not its own work. :func:`run` takes
:func:`subprocess.run`'s arguments and, where it can, runs the command in a child of a server process that imported
those libraries once (:mod:`multiprocessing`'s ``forkserver``, started by the first such command of a test worker; it
has run no torch operation, holds no threads and no GPU state). The child is a separate process as before: it takes
the command's working folder, environment, ``sys.argv``, import path, standard input and output, runs the module or
script as ``__main__`` (:mod:`runpy`), and ends with the command's exit status, a traceback and status 1 for an
uncaught exception, as Python does. What it cannot reproduce goes to :func:`subprocess.run` unchanged (a "cold" run):

* a command that is not ``sys.executable`` followed by ``-m MODULE`` or a ``.py`` script (interpreter options,
  ``-c``, other programs);
* an environment that differs from the server's in a variable a library may read at import
  (:data:`IMPORT_TIME_PREFIXES`: ``OMP_NUM_THREADS``, ``HF_HOME``, ``PYTHONPATH`` ...);
* arguments this module does not handle (``stdin`` other than none, ``preexec_fn``, ``pass_fds`` ...).

``CONTRASTIVE_SUITE_COLD_COMMANDS=1`` makes every command cold (a check of the suite without this runner);
tests/test_warm_commands.py checks that warm and cold runs of the same commands agree.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

#: Imported once in the server; every warm command finds them imported. Libraries only: an entry module of the
#: project imported here would be imported twice (runpy warns when a module it runs as __main__ is already loaded).
PRELOAD = (
    "numpy", "torch", "scipy.stats", "scipy.optimize", "sklearn.linear_model", "sklearn.model_selection",
    "sklearn.metrics", "transformers", "transformers.models.bert.modeling_bert", "tyro", "yaml", "PIL.Image",
    "tests.warm",
)

#: Environment variables the preloaded libraries (or what they import: pandas, pyarrow, huggingface_hub, accelerate,
#: rich ...) may read when they are imported, by prefix: a command whose environment differs from the server's in one
#: of them needs a fresh interpreter. Any other variable (the suite's own, Ray's, a tracker's, ``PATH``, MuJoCo's and
#: PyOpenGL's: those libraries are not preloaded) is read from the command's environment, which the child takes whole.
IMPORT_TIME_PREFIXES = (
    "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "GOTO", "BLIS_", "VECLIB", "NUMEXPR", "NPY_", "NUMPY", "SCIPY",
    "SKLEARN", "JOBLIB", "LOKY", "PANDAS", "ARROW", "MALLOC", "JE_", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "CUBLAS",
    "NCCL", "TRITON", "SYMPY", "HF_", "HUGGINGFACE", "TRANSFORMERS", "SENTENCE_TRANSFORMERS", "DATASETS",
    "SAFETENSORS", "USE_TORCH", "USE_TF", "USE_JAX", "USE_FLAX", "ACCELERATE", "TYRO", "PYTHON", "MPL", "MATPLOTLIB",
    "LD_", "XDG_", "HOME", "LANG", "LC_", "TZ", "TMP", "TEMP", "TERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR",
    "COLUMNS", "LINES",
)

#: Read only when the code runs (checked in the libraries' source), though their prefix is above. torch's compiler
#: sets TORCHINDUCTOR_CACHE_DIR in the process that compiles (the test worker), and reads it in ``cache_dir()``;
#: accelerate reads ACCELERATE_USE_CPU when a ``PartialState`` is made; tokenizers reads TOKENIZERS_PARALLELISM each
#: time it would run in parallel; Python reads PYTHONBREAKPOINT at each ``breakpoint()`` (Ray's ``init`` sets it in
#: the test worker).
CALL_TIME_VARIABLES = frozenset({"TORCHINDUCTOR_CACHE_DIR", "ACCELERATE_USE_CPU", "TOKENIZERS_PARALLELISM",
                                 "PYTHONBREAKPOINT"})

#: The environment the server starts with: this process's when this module is first imported (at collection, after
#: tests/conftest.py set the thread counts), not whatever a test has patched in by the time the first command runs.
_START_ENV: dict[str, str] = dict(os.environ)
#: The server's environment after its imports (the libraries set some variables themselves: scikit-learn two KMP_
#: ones), which a command's must match in the :data:`IMPORT_TIME_PREFIXES` variables; read from the server.
_SERVER_ENV: dict[str, str] = {}
_CONTEXT = None
_COLD_PATH: list[str] | None = None


def _context():
    """The forkserver context, its server started on first use with :data:`_START_ENV`."""
    global _CONTEXT, _COLD_PATH
    if _CONTEXT is None:
        import json
        import multiprocessing
        import multiprocessing.forkserver

        # the import path a fresh `python` has here (without pytest's additions), read once
        out = subprocess.run([sys.executable, "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
                             capture_output=True, text=True, check=True, env=_START_ENV)
        _COLD_PATH = json.loads(out.stdout)
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(list(PRELOAD))
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(_START_ENV)
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
            where = os.path.join(tmp, "env.json")
            proc = ctx.Process(target=_report_environment, args=(where,))
            proc.start()
            proc.join(120)
            if proc.exitcode != 0:
                raise RuntimeError(f"tests/warm.py: the server's first child failed (exit {proc.exitcode})")
            _SERVER_ENV.update(json.loads(Path(where).read_text()))
        _CONTEXT = ctx
    return _CONTEXT


def _entry(args) -> tuple[str, str, list[str]] | None:
    """``("module", name, argv)`` or ``("path", script, argv)`` for a command :func:`run` can run warm, else None."""
    if isinstance(args, (str, bytes)) or not args:
        return None
    args = [os.fspath(a) for a in args]
    if any(not isinstance(a, str) for a in args) or os.path.realpath(args[0]) != os.path.realpath(sys.executable):
        return None
    if len(args) >= 3 and args[1] == "-m" and not args[2].startswith("-"):
        return "module", args[2], args[2:]
    if len(args) >= 2 and args[1].endswith(".py") and not args[1].startswith("-"):
        return "path", args[1], args[1:]
    return None


def _env_differences(env: dict[str, str] | None, server: dict[str, str]) -> list[str]:
    """The :data:`IMPORT_TIME_PREFIXES` variables in which ``env`` (None: this process's) and the server's differ,
    either way (set in one and not the other counts)."""
    if env is None:
        env = dict(os.environ)
    keys = {k for k in set(env) | set(server) if k.startswith(IMPORT_TIME_PREFIXES) and k not in CALL_TIME_VARIABLES}
    own = _set_by_imports()  # missing from env: a fresh interpreter's imports would set them the same way
    return sorted(k for k in keys if env.get(k) != server.get(k) and not (k in own and k not in env))


def _set_by_imports() -> dict[str, str]:
    """The variables the preloaded libraries set in the server while they were imported (``os.environ.setdefault``:
    scikit-learn's KMP_DUPLICATE_LIB_OK and KMP_INIT_AT_FORK)."""
    return {k: v for k, v in _SERVER_ENV.items() if k not in _START_ENV}


def _log(args, why: str | None, start: float) -> None:
    """With ``CONTRASTIVE_SUITE_WARM_LOG=FILE``: one JSON line a command (warm or why cold, seconds), for censuses."""
    path = os.environ.get("CONTRASTIVE_SUITE_WARM_LOG")
    if path:
        import json
        import time

        line = {"cmd": [os.path.basename(str(a)) for a in list(args)[:3]] if not isinstance(args, (str, bytes))
                else str(args)[:80], "warm": why is None, "why": why, "seconds": round(time.monotonic() - start, 2),
                "test": os.environ.get("PYTEST_CURRENT_TEST")}
        with open(path, "a") as fh:
            fh.write(json.dumps(line) + "\n")


def run(args, *, capture_output: bool = False, stdout=None, stderr=None, text: bool | None = None,
        universal_newlines: bool | None = None, encoding: str | None = None, errors: str | None = None,
        timeout: float | None = None, check: bool = False, env: dict[str, str] | None = None, cwd=None,
        input=None, **other) -> subprocess.CompletedProcess:
    """:func:`subprocess.run`, warm where it can be (the module docstring says when)."""
    cold = dict(capture_output=capture_output, stdout=stdout, stderr=stderr, text=text,
                universal_newlines=universal_newlines, encoding=encoding, errors=errors, timeout=timeout,
                check=check, env=env, cwd=cwd, input=input, **other)
    import time

    start = time.monotonic()
    entry = _entry(args)
    why = ("CONTRASTIVE_SUITE_COLD_COMMANDS" if os.environ.get("CONTRASTIVE_SUITE_COLD_COMMANDS") else
           "arguments: " + ", ".join(sorted(other)) if other else
           "not python -m / python SCRIPT.py" if entry is None else
           "output" if (capture_output and (stdout is not None or stderr is not None)
                        or stdout not in (None, subprocess.PIPE, subprocess.DEVNULL)
                        or stderr not in (None, subprocess.PIPE, subprocess.STDOUT, subprocess.DEVNULL)) else None)
    if why is None:
        ctx = _context()
        differs = _env_differences(env, _SERVER_ENV)
        why = "environment: " + ", ".join(differs) if differs else None
    if why is not None:
        try:
            return subprocess.run(args, **cold)
        finally:
            _log(args, why, start)
    if capture_output:
        stdout = stderr = subprocess.PIPE
    as_text = bool(text or universal_newlines or encoding or errors)
    full_env = {**_set_by_imports(), **(os.environ if env is None else env)}
    folder = os.fspath(cwd) if cwd is not None else os.getcwd()
    with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
        out_path, err_path, in_path = (os.path.join(tmp, n) for n in ("stdout", "stderr", "stdin"))
        if input is not None:
            data = input.encode(encoding or "utf-8", errors or "strict") if isinstance(input, str) else input
            Path(in_path).write_bytes(data)
        else:
            in_path = os.devnull
        err_target = out_path if stderr == subprocess.STDOUT else err_path
        proc = ctx.Process(target=_child, args=(entry, folder, full_env, in_path, out_path, err_target, _COLD_PATH),
                           daemon=False)
        proc.start()
        try:
            proc.join(timeout)
        finally:  # a timeout, or the test interrupted while waiting (pytest-timeout): the command ends too
            timed_out = proc.is_alive()
            if timed_out:
                proc.kill()
                proc.join()
        out = Path(out_path).read_bytes() if os.path.exists(out_path) else b""
        err = Path(err_path).read_bytes() if os.path.exists(err_path) and err_target == err_path else b""
    code = proc.exitcode
    if as_text:
        import locale

        coding = encoding or locale.getpreferredencoding(False)
        out, err = (b.decode(coding, errors or "strict").replace("\r\n", "\n").replace("\r", "\n")
                    for b in (out, err))
    # what the caller did not capture goes where a child's output would have gone: this process's own
    shown_out = None if stdout == subprocess.PIPE else out
    shown_err = None if stderr in (subprocess.PIPE, subprocess.STDOUT) else err
    for shown, stream, wanted in ((shown_out, sys.stdout, stdout), (shown_err, sys.stderr, stderr)):
        if shown and wanted != subprocess.DEVNULL:
            stream.write(shown if isinstance(shown, str) else shown.decode("utf-8", "replace"))
            stream.flush()
    res_out = out if stdout == subprocess.PIPE else None
    res_err = err if stderr == subprocess.PIPE else None
    if timed_out:
        raise subprocess.TimeoutExpired(list(args), timeout, output=res_out, stderr=res_err)
    result = subprocess.CompletedProcess(list(args), code, res_out, res_err)
    _log(args, None, start)
    if check:
        result.check_returncode()
    return result


def _report_environment(path: str) -> None:
    """In a forked process: write the environment it inherited from the server (JSON)."""
    import json

    Path(path).write_text(json.dumps(dict(os.environ)))


def _child(entry, folder, env, in_path, out_path, err_path, cold_path) -> None:
    """In the forked process: become the command, run it, exit with its status (never returns)."""
    import runpy
    import traceback

    fds = {0: os.open(in_path, os.O_RDONLY), 1: os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)}
    fds[2] = fds[1] if err_path == out_path else os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    for target, fd in fds.items():
        os.dup2(fd, target)
    sys.stdin = open(0, closefd=False, encoding=sys.stdin.encoding if sys.stdin else None)
    os.chdir(folder)
    os.environ.clear()
    os.environ.update(env)
    kind, name, argv = entry
    here = os.getcwd() if kind == "module" else os.path.dirname(os.path.abspath(name))
    sys.path[:] = [here, *cold_path]
    sys.argv = list(argv)
    code = 0
    try:
        if kind == "module":
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(name, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:  # as the interpreter: the traceback, then the process ends by SIGINT
        traceback.print_exc()
        code = -2
    except BaseException:  # noqa: BLE001 - as the interpreter: print the traceback, exit 1
        traceback.print_exc()
        code = 1
    try:
        import atexit

        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        if code == -2:
            import signal

            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        os._exit(code & 0xFF)
