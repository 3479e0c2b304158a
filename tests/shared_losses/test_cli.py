"""A bad option value or path on the command line ends in one line naming it (exit status 2), not a
traceback; bugs keep theirs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from shared_losses.training.cli import run_cli
from tests import warm

ROOT = Path(__file__).resolve().parents[2]


def test_run_cli_turns_user_errors_into_one_line(capsys, monkeypatch):
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def bad():
        raise ValueError("tau_plus must be in [0, 1), got 1.5")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(bad)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: tau_plus must be in [0, 1), got 1.5\n") and "Traceback" not in err
    monkeypatch.setenv("CONTRASTIVE_SUITE_TRACEBACK", "1")
    with pytest.raises(ValueError, match="tau_plus"):
        run_cli(bad)

    def bug():
        raise KeyError("a bug, not bad input")

    with pytest.raises(KeyError):
        run_cli(bug)
    assert run_cli(lambda: 7) == 7


class _Writes:
    """A stderr that records each write call."""

    def __init__(self):
        self.calls = []

    def write(self, text):
        self.calls.append(text)
        return len(text)

    def flush(self):
        pass


@pytest.mark.parametrize("raised", [ValueError("bad value"), "interrupted"])
def test_run_cli_writes_each_message_with_its_newline_in_one_call(monkeypatch, raised):
    """The processes of one launch share a pipe and stderr writes through: a message and its newline written apart
    (``print``) let another process's line land between them (seen in CI: two error lines run together)."""
    from shared_losses.training.runtime import RunInterrupted

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    writes = _Writes()
    monkeypatch.setattr(sys, "stderr", writes)

    def main():
        raise raised if isinstance(raised, Exception) else RunInterrupted("step 3")

    with pytest.raises(SystemExit):
        run_cli(main)
    assert len(writes.calls) == 1 and writes.calls[0].endswith("\n"), writes.calls
    first = writes.calls[0].splitlines()[0]
    expected = "error: bad value" if isinstance(raised, Exception) else "interrupted at step 3; continue with --resume"
    assert first == expected


def _group_up(store):
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    assert dist.is_initialized()


def test_run_cli_destroys_a_group_of_one_however_the_run_ends(tmp_path, monkeypatch):
    """A run in a process group of one process (nothing else can be inside a collective) ends with the group
    destroyed and returns or exits normally: after the run, an interrupt (130) and a user error (2)."""
    import torch.distributed as dist

    from shared_losses.training.runtime import RunInterrupted

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def run():
        _group_up(tmp_path / "a")
        return 7

    assert run_cli(run) == 7 and not dist.is_initialized()
    for name, error, code in (("b", RunInterrupted("step 3"), 130), ("c", ValueError("bad input"), 2)):
        def failing(name=name, error=error):
            _group_up(tmp_path / name)
            raise error

        with pytest.raises(SystemExit) as exit_info:
            run_cli(failing)
        assert exit_info.value.code == code and not dist.is_initialized()


STREAM_COMMAND = """
import atexit
import os
import sys


class Finalised:
    def __del__(self, write=os.write):  # run by the interpreter's finalisation, which os._exit skips
        write(1, b"finalised\\n")


kept = Finalised()
atexit.register(lambda: print("atexit ran", flush=True))


def main():
    from nlp_qt.corpus import iter_corpus

    rows = iter_corpus(sys.argv[2])
    print(next(iter(rows))[1], flush=True)  # a stream left part-read, as a run stopped at --max-steps leaves it
    if sys.argv[1] == "error":
        raise ValueError("bad input")


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    run_cli(main)
"""


@pytest.mark.parametrize("how", ["ok", "error"])
def test_a_command_that_read_a_datasets_stream_ends_without_the_interpreters_finalisation(tmp_path, how):
    """pyarrow's Parquet scanner behind a datasets stream left part-read can abort the process while the interpreter
    finalises ("terminate called without an active exception"), after all the work was written: such a command ends
    as a multi-process one does (atexit handlers, then os._exit), with its status and output."""
    import json
    import subprocess
    import sys

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Sentence number {i} ."}) + "\n" for i in range(50)))
    (tmp_path / "command.py").write_text(STREAM_COMMAND)
    root = Path(__file__).resolve().parents[2]
    res = subprocess.run([sys.executable, str(tmp_path / "command.py"), how, str(corpus)], capture_output=True,
                         text=True, timeout=120, cwd=root,
                         env={**os.environ, "PYTHONPATH": str(root), "HF_DATASETS_OFFLINE": "1"})
    assert res.returncode == (0 if how == "ok" else 2), res.stderr[-2000:]
    assert res.stdout.splitlines() == ["Sentence number 0 .", "atexit ran"], res.stdout  # no "finalised"
    assert ("error: bad input" in res.stderr) == (how == "error")


def test_only_a_commands_own_process_ends_without_finalising(monkeypatch):
    """end_without_finalising is honoured for the program's own main (python -m MODULE); a main called by other code
    (a test, a notebook) returns or raises SystemExit as before, whatever was read."""
    import shared_losses.training.cli as cli

    import atexit

    ended, handlers = [], []
    monkeypatch.setattr(cli.os, "_exit", lambda code: ended.append(code))
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: handlers.append(1))  # not this test process's handlers
    monkeypatch.setattr(cli, "_NO_FINALISING", {"a datasets stream"})
    monkeypatch.setitem(cli._COMMAND, "main_program", False)

    def main():
        return None

    assert cli.run_cli(main) is None and ended == []
    main.__module__ = "__main__"  # as in a process started with python -m
    cli.run_cli(main)
    assert ended == [0] and handlers == [1]


MULTI_PROCESS_SCRIPT = """
import sys
import torch
import torch.distributed as dist
from shared_losses.training.cli import run_cli
from shared_losses.training.runtime import RunInterrupted


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    for _ in range(20):  # collectives on Python tensors, the last one just before the process ends
        t = torch.ones(1000) * rank
        dist.all_reduce(t)
        parts = [torch.empty(1000) for _ in range(dist.get_world_size())]
        dist.all_gather(parts, t)
    print(f"rank {rank} done, sum {float(t.sum())}")
    if sys.argv[1] == "interrupt":
        raise RunInterrupted("step 20")
    if sys.argv[1] == "error":
        raise ValueError("bad input")
    if sys.argv[1] == "status":  # a main that returns its exit status, as the table scripts do
        return 3


sys.exit(run_cli(main))
"""


@pytest.mark.slow  # torchrun: a multi-process launch
def test_processes_of_a_multi_process_run_end_with_their_status_and_output(tmp_path, torchrun):
    """Two torchrun processes whose last gloo collective comes just before they end. Without run_cli's
    os._exit, a gloo worker thread can release the collective's tensors while the interpreter finalises and
    the process aborts (SIGABRT after "terminate called without an active exception"): 17 of 30 such
    launches aborted on the 2-core machine (2026-11-25). Each launch must end with its status (0 / 130 / 2, or
    the status main returned),
    with its output flushed. Repeated, because the abort is a race."""

    script = tmp_path / "collectives.py"
    script.write_text(MULTI_PROCESS_SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    for how, code in [("run", 0)] * 4 + [("interrupt", 130), ("error", 2), ("status", 3)]:
        res = warm.run([torchrun, "--nproc_per_node", "2", str(script), how], capture_output=True, text=True,
                       timeout=120, env=env, cwd=tmp_path)
        assert "terminate called" not in res.stderr, res.stderr[-2000:]
        # both processes write to one pipe, so their lines can interleave
        assert sorted(re.findall(r"rank \d done, sum [\d.]+", res.stdout)) == \
            ["rank 0 done, sum 1000.0", "rank 1 done, sum 1000.0"], (how, res.stdout, res.stderr[-2000:])
        if code == 0:
            assert res.returncode == 0, res.stderr[-2000:]
        else:  # torchrun reports a worker's own exit status as a failure of the launch, naming the status
            assert res.returncode != 0 and f"exitcode  : {code}" in res.stderr, (how, res.stderr[-2000:])
        if how == "error":
            assert "error: bad input" in res.stderr


@pytest.mark.parametrize("argv,message", [
    (["-m", "rl_curl.train", "--aux", "debiased", "--tau-plus", "1.5"], "tau_plus must be in [0, 1)"),
    (["-m", "rl_curl.evaluate", "--run-dir", "/nonexistent/run"], "/nonexistent/run"),
    (["-m", "fewshot.train", "--lam", "1.5"], "lam"),
    (["-m", "nlp_qt.train", "--corpus", "/nonexistent/books", "--output-dir", "OUT"], "/nonexistent/books"),
    (["-m", "nlp_qt.senteval", "--model", "OUT", "--data", "human", "--max-length", "-1"], "--max-length must be >= 0"),
    (["-m", "nlp_qt.bow", "--corpus", "/nonexistent/books", "--output-dir", "OUT"], "corpus not found"),
])
@pytest.mark.slow  # each case runs an entry point in a subprocess
def test_entry_points_report_bad_input_in_one_line(tmp_path, argv, message):
    argv = [a.replace("OUT", str(tmp_path / "run")) for a in argv]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "MUJOCO_GL": "egl"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    res = warm.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr and message in res.stderr, res.stderr
    assert any(line.startswith("error: ") for line in res.stderr.splitlines()), res.stderr


def test_run_cli_prints_a_stopped_run_in_one_line_with_status_1(capsys, monkeypatch):
    """A run whose worker process ended (runtime.RunStopped) is not bad input (2) nor a bug (traceback): one line."""
    from shared_losses.training.runtime import RunStopped

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def main():
        raise RunStopped("the environment's worker process ended (killed by SIGKILL)")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err == "error: the environment's worker process ended (killed by SIGKILL)\n"
    monkeypatch.setenv("CONTRASTIVE_SUITE_TRACEBACK", "1")
    with pytest.raises(RunStopped):
        run_cli(main)


def test_output_read_by_a_program_that_stops_early_ends_quietly_with_status_141():
    """``--help | head`` and the like: the reader closes the pipe, the command ends as a SIGPIPE'd process would (a
    shell's 141), with no BrokenPipeError traceback and no "Exception ignored" at the interpreter's exit."""
    code = ("from shared_losses.training.cli import run_cli\n"
            "def main():\n"
            "    for i in range(100000):\n"
            "        print('line', i)\n"
            "run_cli(main)\n")
    env = {k: v for k, v in os.environ.items() if k != "CONTRASTIVE_SUITE_TRACEBACK"}
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "line 0\n"
    proc.stdout.close()  # the reader goes away
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err


def test_trainers_name_themselves_in_their_usage_line(capsys):
    """``python -m`` makes sys.argv[0] the module file's full path; --help and tyro's errors say the command."""
    from fewshot.config import from_cli as fewshot_cli
    from nlp_qt.config import from_cli as qt_cli
    from rl_curl.config import from_cli as curl_cli

    for parse, argv, prog in [(curl_cli, [], "python -m rl_curl.train"), (qt_cli, [], "python -m nlp_qt.train"),
                              (fewshot_cli, [], "python -m fewshot.train"),
                              (fewshot_cli, ["pu"], "python -m fewshot.train pu"),
                              (fewshot_cli, ["images"], "python -m fewshot.train images")]:
        with pytest.raises(SystemExit) as exit_info:
            parse([*argv, "--help"])
        assert exit_info.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: {prog} [-h]")


@pytest.mark.parametrize("module", ["rl_curl.evaluate", "nlp_qt.export"])
def test_a_module_parsed_by_parse_dataclass_names_its_command_in_its_usage_line(module):
    """Without a prog of their own, parse_dataclass's programs said `usage: /path/to/rl_curl/evaluate.py`."""
    res = warm.run([sys.executable, "-m", module, "--help"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith(f"usage: python -m {module} [-h]"), res.stdout[:200]


def test_run_cli_says_out_of_memory_in_one_line_with_status_1(capsys, monkeypatch):
    """numpy's or torch's MemoryError (a job's memory limit, ulimit -v) ended the command in a traceback."""
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def main():
        raise MemoryError("Unable to allocate 3.07 GiB for an array with shape (110006, 3, 100, 100)")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: out of memory (Unable to allocate 3.07 GiB for an array with shape (110006, 3, 100, "
                          "100)): ") and err.count("\n") == 1, err
    monkeypatch.setenv("CONTRASTIVE_SUITE_TRACEBACK", "1")
    with pytest.raises(MemoryError):
        run_cli(main)


def test_run_cli_says_out_of_gpu_memory_in_one_line_and_leaves_other_runtime_errors_alone(capsys, monkeypatch):
    """torch's CUDA out-of-memory error (a batch too large for the GPU) ended the command in a long traceback."""
    import torch

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)

    def main():
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
                                     "79.19 GiB of which 1.05 GiB is free.\nOf the allocated memory ...")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main)
    assert exit_info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: out of GPU memory (CUDA out of memory. Tried to allocate 2.00 GiB): lower "
                          "--batch-size") and err.count("\n") == 1, err

    def bug():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):  # any other RuntimeError keeps its traceback
        run_cli(bug)


def test_run_cli_shows_the_suites_warnings_as_one_line_and_a_librarys_as_python_does(monkeypatch):
    import warnings

    import fewshot.data
    import numpy

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    monkeypatch.setattr(warnings, "formatwarning", warnings.formatwarning)  # restored after the test
    python_s = warnings.formatwarning("a library's", FutureWarning, numpy.__file__, 20)
    run_cli(lambda: None)
    run_cli(lambda: None)  # a second command in the same process: the same form, not one wrapped in another
    assert warnings.formatwarning("t.csv: skipped 1 of 3 rows", UserWarning, fewshot.data.__file__, 10) == (
        "warning: t.csv: skipped 1 of 3 rows\n")
    assert warnings.formatwarning("a library's", FutureWarning, numpy.__file__, 20) == python_s
    assert python_s.startswith(f"{numpy.__file__}:20: FutureWarning: a library's")
    with pytest.warns(UserWarning, match="still recorded"):  # where warnings go is unchanged
        warnings.warn_explicit("still recorded", UserWarning, fewshot.data.__file__, 10)


def test_run_cli_reports_a_write_the_file_system_refused_in_one_line_with_status_1(capsys, monkeypatch):
    """A full disk or a read-only file system in any command (an evaluation's results, predictions, a table) is the
    machine's state, not a bug: one line naming the file and what to do, status 1. An OSError a read can meet keeps
    its traceback."""
    import errno

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    for code, strerror, hint in ((errno.ENOSPC, "No space left on device", "the disk is full"),
                                 (errno.EROFS, "Read-only file system", "mounted read-only")):
        def main():
            raise OSError(code, strerror, "/runs/t2/senteval.json")

        with pytest.raises(SystemExit) as exit_info:
            run_cli(main)
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: could not write /runs/t2/senteval.json ({strerror}): ") and hint in err, err
        assert err.count("\n") == 1

    def read_failed():
        raise OSError(errno.EIO, "Input/output error", "/data/corpus.txt")

    with pytest.raises(OSError, match="Input/output error"):
        run_cli(read_failed)


def test_every_command_of_the_packages_and_scripts_goes_through_run_cli():
    """A module a user runs with ``python -m`` (its ``__main__`` block), a data builder or a script of scripts/ reports
    bad input and refused writes through run_cli. nlp_qt.bow did not: a missing corpus was a traceback; nor did the
    benchmarks and data builders (a builder given the wrong folder wrote empty files over the shipped data). Two
    scripts print their own one-line errors: fetch_gpu_deps (FetchError) and check_floors (Failed), which run where
    the suite may not import."""
    own_errors = {"scripts/fetch_gpu_deps.py", "scripts/check_floors.py"}
    paths = [p for package in ("nlp_qt", "fewshot", "rl_curl", "shared_losses", "paper_tables")
             for p in (ROOT / package).rglob("*.py")] + list((ROOT / "scripts").glob("*.py"))
    missing = []
    for path in sorted(paths):
        text = path.read_text()
        name = str(path.relative_to(ROOT))
        if 'if __name__ == "__main__":' in text and name not in own_errors:
            if "run_cli(" not in text.split('if __name__ == "__main__":')[-1]:
                missing.append(name)
    assert not missing, missing
    for name in own_errors:
        assert 'print(f"error: {' in (ROOT / name).read_text(), name


@pytest.mark.slow  # a bag-of-words training in a subprocess
def test_a_command_whose_output_outgrows_a_file_size_limit_ends_in_one_line(tmp_path):
    """numpy's np.save meets a file-size limit as a short write (an OSError without errno); the command says what
    could not be written and why, with status 1, and no traceback."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20 * 1024, 20 * 1024))

    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    res = warm.run([sys.executable, "-m", "nlp_qt.bow", "--corpus", "nlp_qt/data/corpus_docstrings",
                          "--output-dir", str(tmp_path / "bow"), "--epochs", "1"], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=300, preexec_fn=limited)
    assert res.returncode == 1, res.stderr[-2000:]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("error: could not write a file (") and "requested and" in lines[-1], res.stderr
    assert "the writer did not say why: the disk may be full" in lines[-1] and "Traceback" not in res.stderr


def test_argparse_commands_read_whole_options_and_underscore_spellings():
    """The argparse commands (nlp_qt.senteval, nlp_qt.bow, fewshot.export / predict, the scripts) read long options
    as the tyro commands do: a prefix is no option (argparse's default took `--k 5` as `--kfold 5`), and `--a_b`
    is `--a-b` where only that spelling is an option; after `--` nothing is rewritten."""
    from shared_losses.training.cli import ArgumentParser, UsageError

    p = ArgumentParser(prog="demo")
    p.add_argument("--kfold", type=int, default=10)
    p.add_argument("--max-length", type=int, default=None)
    p.add_argument("--keep_me", default="x")  # an option spelt with _ stays itself
    p.add_argument("rest", nargs="*")
    a = p.parse_args(["--kfold", "3", "--max_length=7", "--keep_me", "y"])
    assert (a.kfold, a.max_length, a.keep_me) == (3, 7, "y")
    assert p.parse_args(["--max_length", "5"]).max_length == 5
    for prefix in (["--k", "5"], ["--max", "5"], ["--kf=5"]):
        with pytest.raises(UsageError, match="unrecognized arguments"):
            p.parse_args(prefix)
    with pytest.raises(UsageError, match="unrecognized arguments: --no_such"):
        p.parse_args(["--no_such", "1"])
    assert p.parse_args(["--", "--max_length=5"]).rest == ["--max_length=5"]
    # a subcommand's parser is one of these too
    top = ArgumentParser(prog="top")
    sub = top.add_subparsers(dest="cmd").add_parser("go")
    sub.add_argument("--inner-kfold", type=int)
    assert top.parse_args(["go", "--inner_kfold", "2"]).inner_kfold == 2
    with pytest.raises(UsageError):
        top.parse_args(["go", "--inner", "2"])


def test_a_path_of_looping_links_or_too_long_a_name_ends_in_one_line_with_status_2(capsys, monkeypatch, tmp_path):
    """Tracebacks, status 1: "Too many levels of symbolic links: 'lp1/sub'", "File name too long: '.ppp...jsonl.tmp'"
    (a valid name, 253 characters, and the temporary copy's prefix and suffix beyond the limit)."""
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for path, words in ((tmp_path / "a" / "sub", "too many levels of symbolic links (links that lead back to "
                                                 "themselves): fix or remove the link"),
                        (tmp_path / ("p" * 300), "the name is too long for the file system")):
        with pytest.raises(SystemExit) as exit_info:
            run_cli(lambda: path.mkdir())
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {path}: {words}") and err.count("\n") == 1, err
    monkeypatch.setenv("CONTRASTIVE_SUITE_TRACEBACK", "1")
    with pytest.raises(OSError):
        run_cli(lambda: (tmp_path / "a" / "sub").mkdir())


def test_a_host_tensor_torch_cannot_allocate_ends_in_the_out_of_memory_line(capsys, monkeypatch):
    """--hidden-dim 1e12 and the like: torch's RuntimeError ("[enforce fail at alloc_cpu.cpp:...] ...
    DefaultCPUAllocator: can't allocate memory", or "Storage size calculation overflowed") was a traceback."""
    import torch

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    for make, words in ((lambda: torch.empty(10**13), r"you tried to allocate 40000000000000 bytes\)"),
                        (lambda: torch.empty(10**12, 10**12), r"a tensor of more elements than memory can address: "
                                                              r"Storage size calculation overflowed")):
        with pytest.raises(SystemExit) as exit_info:
            run_cli(make)
        assert exit_info.value.code == 1
        err = capsys.readouterr().err
        assert re.match(rf"error: out of memory \({words}", err) and err.count("\n") == 1, err

    def other():
        raise RuntimeError("a bug")

    with pytest.raises(RuntimeError, match="a bug"):
        run_cli(other)
