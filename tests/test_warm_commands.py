"""tests/warm.py runs the tests' commands in processes forked from a warm server: the same command must give the same
status, output and process view (argv, working folder, import path, __name__, standard input) as a fresh
interpreter, and what it cannot reproduce must go to subprocess.run."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from tests import warm

# every test runs commands both ways (the warm server's start, then fresh interpreters): not the fast tier's
pytestmark = pytest.mark.slow

PROBE = textwrap.dedent("""
    import json, multiprocessing, os, sys
    print(json.dumps({"argv": sys.argv, "cwd": os.getcwd(), "path0": sys.path[0], "name": __name__,
                      "file": __file__, "stdin": sys.stdin.read(), "var": os.environ.get("CONTRASTIVE_SUITE_CACHE"),
                      "warm": multiprocessing.parent_process() is not None}))
    print("to stderr", file=sys.stderr)
    code = sys.argv[1] if len(sys.argv) > 1 else "0"
    if code == "raise":
        raise ValueError("a bad value")
    if code == "message":
        sys.exit("error: a message")
    sys.exit(int(code))
""")


@pytest.fixture
def probe(tmp_path):
    (tmp_path / "probe_pkg").mkdir()
    (tmp_path / "probe_pkg/__init__.py").write_text("")
    (tmp_path / "probe_pkg/probe.py").write_text(PROBE)
    (tmp_path / "probe.py").write_text(PROBE)
    return tmp_path


def _both(cmd, **kw):
    hot = warm.run(cmd, **kw)
    # a variable set in this worker by what an earlier test imported (Ray's init sets PYTHONBREAKPOINT) would send
    # every command of the suite to a fresh interpreter: say which
    differs = warm._env_differences(kw.get("env"), warm._SERVER_ENV)
    assert not differs, f"commands run cold here: the environment differs from the server's in {differs}"
    return hot, subprocess.run(cmd, **kw)


@pytest.mark.parametrize("code", ["0", "3", "raise", "message"])
def test_script_status_output_and_process_view_match_a_fresh_interpreter(probe, code):
    hot, cold = _both([sys.executable, str(probe / "probe.py"), code], capture_output=True, text=True,
                      cwd=probe, input="some input\n", env={**os.environ, "CONTRASTIVE_SUITE_CACHE": "x"})
    assert hot.returncode == cold.returncode == {"0": 0, "3": 3, "raise": 1, "message": 1}[code]
    seen_hot, seen_cold = (json.loads(r.stdout.splitlines()[0]) for r in (hot, cold))
    assert seen_hot.pop("warm") and not seen_cold.pop("warm")
    assert seen_hot == seen_cold and seen_hot["stdin"] == "some input\n" and seen_hot["var"] == "x"
    assert seen_hot["name"] == "__main__" and seen_hot["path0"] == str(probe)
    if code == "raise":  # the traceback's last line (its frames name the runner's lines too)
        assert hot.stderr.splitlines()[-1] == cold.stderr.splitlines()[-1] == "ValueError: a bad value"
        assert hot.stderr.startswith("to stderr\nTraceback (most recent call last):")
    else:
        assert hot.stderr == cold.stderr
    assert hot.stdout.splitlines()[1:] == cold.stdout.splitlines()[1:]


def test_module_runs_as_main_from_the_working_folder(probe):
    hot, cold = _both([sys.executable, "-m", "probe_pkg.probe"], capture_output=True, text=True, cwd=probe)
    seen_hot, seen_cold = (json.loads(r.stdout.splitlines()[0]) for r in (hot, cold))
    assert seen_hot.pop("warm") and not seen_cold.pop("warm")
    assert seen_hot == seen_cold and seen_hot["argv"][0].endswith("probe.py") and seen_hot["path0"] == str(probe)


def test_stderr_into_stdout_and_check(probe):
    hot, cold = _both([sys.executable, str(probe / "probe.py")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert hot.stderr is None and hot.stdout.endswith(b"to stderr\n") and isinstance(hot.stdout, bytes)
    assert hot.stdout.split(b"\n")[1:] == cold.stdout.split(b"\n")[1:]
    with pytest.raises(subprocess.CalledProcessError) as err:
        warm.run([sys.executable, str(probe / "probe.py"), "4"], capture_output=True, check=True)
    assert err.value.returncode == 4


def test_a_real_command_matches(tmp_path):
    """An error of the suite's own command line: status, the one error line and nothing on stdout, warm and cold."""
    corpus = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "nlp_qt/data/corpus_docstrings")
    cmd = [sys.executable, "-m", "nlp_qt.train", "--corpus", corpus, "--tau-plus", "1.5", "--output-dir",
           str(tmp_path / "r")]
    hot, cold = _both(cmd, capture_output=True, text=True)
    assert (hot.returncode, hot.stdout, hot.stderr) == (cold.returncode, cold.stdout, cold.stderr)
    assert hot.returncode == 2 and "tau_plus" in hot.stderr.replace("-", "_")


def test_what_it_cannot_reproduce_runs_cold(probe, monkeypatch):
    def warm_flag(res):
        return json.loads(res.stdout.splitlines()[0])["warm"]

    script = str(probe / "probe.py")
    # libraries read these at import: a command that changes them needs a fresh interpreter
    assert not warm_flag(warm.run([sys.executable, script], capture_output=True, text=True,
                                  env={**os.environ, "OMP_NUM_THREADS": "7"}))
    monkeypatch.setenv("HF_HOME", str(probe / "hf"))
    assert not warm_flag(warm.run([sys.executable, script], capture_output=True, text=True))
    monkeypatch.delenv("HF_HOME")
    # interpreter options, -c, other programs
    assert not warm_flag(warm.run([sys.executable, "-X", "utf8", script], capture_output=True, text=True))
    res = warm.run([sys.executable, "-c", "import multiprocessing; print(multiprocessing.parent_process())"],
                   capture_output=True, text=True)
    assert res.stdout == "None\n"
    assert warm.run(["true"]).returncode == 0
    monkeypatch.setenv("CONTRASTIVE_SUITE_COLD_COMMANDS", "1")
    assert not warm_flag(warm.run([sys.executable, script], capture_output=True, text=True))
    monkeypatch.delenv("CONTRASTIVE_SUITE_COLD_COMMANDS")
    assert warm_flag(warm.run([sys.executable, script], capture_output=True, text=True))


def test_timeout_ends_the_command(tmp_path):
    script = tmp_path / "sleep.py"
    script.write_text("import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n")
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as err:
        warm.run([sys.executable, str(script)], capture_output=True, timeout=3)
    assert time.monotonic() - start < 30
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(int(err.value.output), 0)
