"""Bad input to the lesser tools of scripts/ (benchmarks, checks): a count or prior out of range, data that do not
fit, an estimator that cannot be had, an --out that cannot be written. Each is refused in one line naming the option,
before anything runs (they used to give tracebacks, divisions by zero, or tables of nothing with exit status 0)."""

import importlib.util
import re
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def usage_error(capsys, main, argv, says):
    """The command's refusal of its command line (through run_cli, as the script runs): exit status 2 and one
    ``error:`` line naming the option (argparse's usage block before it, for the scripts on plain argparse)."""
    from shared_losses.training.cli import run_cli

    with pytest.raises(SystemExit) as err:
        run_cli(lambda: main(argv))
    assert err.value.code == 2
    printed = capsys.readouterr().err
    assert says in printed and printed.startswith("error: ") and len(printed.strip().splitlines()) == 1, printed


def test_number_in_refuses_values_outside_its_bounds_by_option(capsys):
    import argparse

    from shared_losses.training.cli import number_in

    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=number_in(1))
    p.add_argument("--pi", type=number_in(0, 1, float, open_low=True, open_high=True))
    assert p.parse_args(["--steps", "1", "--pi", "0.25"]).pi == 0.25
    for argv, says in ((["--steps", "0"], "argument --steps: must be a whole number >= 1, got 0"),
                       (["--steps", "2.5"], "argument --steps: must be a whole number >= 1, got '2.5'"),
                       (["--pi", "1"], "argument --pi: must be a number > 0 and < 1, got 1"),
                       (["--pi", "nan"], "argument --pi: must be a number > 0 and < 1, got 'nan'")):
        with pytest.raises(SystemExit):
            p.parse_args(argv)
        assert says in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["--steps", "0"], "argument --steps: must be a whole number >= 1, got 0"),
    (["--steps", "-1"], "argument --steps: must be a whole number >= 1, got -1"),
    (["--batch", "1"], "argument --batch: must be a whole number >= 2, got 1"),
    (["--classes", "0"], "argument --classes: must be a whole number >= 2, got 0"),
])
def test_sampling_bias_counts(capsys, tmp_path, argv, says):
    """--steps 0 printed a table of untrained encoders and "DCL's ordering ... holds here", exit 0; --classes 0 was a
    torch traceback; --batch 0 "views is an empty batch"."""
    usage_error(capsys, script("sampling_bias").main, argv + ["--out", str(tmp_path / "o")], says)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("data", ["synthetic", "digits.npz"])
@pytest.mark.parametrize("seeds, says", [(["-1"], r"^--seeds must be a whole number in \[0, 2\*\*32\)"),
                                         (["0", "0"], r"^--seeds must be distinct, got \[0, 0\]$")])
def test_sampling_bias_checks_the_seeds_for_every_data(tmp_path, data, seeds, says):
    """Synthetic data took --seeds 0 0 (a table of "74.90 ± 0.00" over one seed counted twice) and --seeds -1; image
    data refused -1 in numpy's words."""
    with pytest.raises(ValueError, match=says):
        script("sampling_bias").main(["--data", data, "--steps", "1", "--seeds", *seeds, "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()


def test_sampling_bias_refuses_an_out_it_cannot_write_before_training(tmp_path):
    """A read-only --out failed with a PermissionError traceback after the whole training (the results lost)."""
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match=r"^--out .*file/o cannot be written \(.*\); give a folder you can write "
                                         r"\(nothing was run\)$"):
        script("sampling_bias").main(["--steps", "1", "--seeds", "0", "--out", str(tmp_path / "file" / "o")])


def test_prior_check_refuses_data_that_do_not_fit_and_estimators_it_cannot_have(capsys, tmp_path):
    main = script("fewshot_prior_check").main
    np.save(tmp_path / "f.npy", np.zeros((30, 3)))
    np.save(tmp_path / "y.npy", np.arange(30) % 2)
    np.save(tmp_path / "y10.npy", np.arange(10) % 2)
    np.save(tmp_path / "y12.npy", np.arange(30) % 2 + 1)
    (tmp_path / "empty.npy").write_bytes(b"")
    real = ["--no-synthetic", "--seeds", "0"]
    for argv, says in (
            (["--features", str(tmp_path / "f.npy")], "--features and --labels go together"),
            (["--labels", str(tmp_path / "y.npy")], "--features and --labels go together"),
            (["--features", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y10.npy")],
             "expected one label per row of --features (30), got shape (10,)"),
            (["--features", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y12.npy")],
             "expected labels 0 and 1 (1 = positive), got [1, 2]"),
            (["--features", str(tmp_path / "empty.npy"), "--labels", str(tmp_path / "y.npy")],
             "not a readable .npy array"),
            (["--estimator", "garbage"], "--estimator garbage: expected module:function"),
            (["--estimator", "nosuch_module_here:fn"], "cannot import nosuch_module_here"),
            (["--estimator", "fewshot.prior:nofn"], "fewshot.prior has no nofn"),
            (["--features", str(tmp_path / "f.npy"), "--labels", str(tmp_path / "y.npy"), "--real-n", "25"],
             "--real-n 25 / --real-u 300 on "),
            ([], "--no-synthetic: give --features and --labels")):
        with pytest.raises(ValueError, match=None) as err:
            main(real + argv if "--no-synthetic" not in argv else argv)
        assert says in str(err.value), (argv, str(err.value))
    for argv, says in ((["--pis", "1.5"], "argument --pis: must be a number > 0 and < 1, got 1.5"),
                       (["--n-u", "0"], "argument --n-u: must be a whole number >= 1, got 0"),
                       (["--dims", "0"], "argument --dims: must be a whole number >= 1, got 0"),
                       (["--n-p", "-3"], "argument --n-p: must be a whole number >= 1, got -3")):
        usage_error(capsys, main, argv, says)


def test_a_permission_error_is_one_line(capsys):
    """A file or folder the user may not read or write ended in a PermissionError traceback in every command."""
    from shared_losses.training.cli import run_cli

    def main():
        raise PermissionError(13, "Permission denied", "/somewhere/results.json")

    with pytest.raises(SystemExit) as err:
        run_cli(main)
    assert err.value.code == 2
    assert capsys.readouterr().err.splitlines()[0] == "error: [Errno 13] Permission denied: '/somewhere/results.json'"


@pytest.mark.parametrize("name, argv, says", [
    ("bench_losses", ["--repeats", "0"], "argument --repeats: must be a whole number >= 1, got 0"),
    ("bench_losses", ["--batches", "1"], "argument --batches: must be a whole number >= 2, got 1"),
    ("bench_losses", ["--tau-plus", "1.5"], "argument --tau-plus: must be a number >= 0 and < 1, got 1.5"),
    ("bench_losses", ["--temperatures", "0"], "argument --temperatures: must be a number > 0, got 0"),
    ("bench_qt", ["--steps", "0"], "argument --steps: must be a whole number >= 1, got 0"),
    ("bench_replay", ["--image-size", "0"], "argument --image-size: must be a whole number >= 1, got 0"),
    ("bench_replay_checkpoints", ["--every", "0"], "argument --every: must be a whole number >= 1, got 0"),
    ("bench_replay_checkpoints", ["--capacity", "1"], "argument --capacity: must be a whole number >= 2, got 1"),
    ("bench_pu_images", ["--repeats", "0"], "argument --repeats: must be a whole number >= 1, got 0"),
    ("bench_fewshot", ["--seq-lens", "0"], "argument --seq-lens: must be a whole number >= 1, got 0"),
    ("bench_fewshot", ["--max-steps", "0"], "argument --max-steps: must be a whole number >= 1, got 0"),
])
def test_benchmark_counts_are_refused_before_anything_is_timed(capsys, monkeypatch, name, argv, says):
    """A count of 0 divided by zero (bench_qt --steps 0, bench_curl --updates 0), took a median of nothing
    (bench_pu_images --repeats 0) or failed in a reshape (bench_fewshot --seq-lens 0); bench_losses printed its
    header and then the child's error inside the parent's traceback."""
    monkeypatch.setattr(sys, "argv", [name, *argv])
    main = script(name).main
    usage_error(capsys, lambda a: main(a) if name != "bench_qt" else main(), argv, says)


@pytest.mark.parametrize("field, value, says", [
    ("updates", 0, "--updates must be >= 1, got 0"),
    ("env_agent_steps", 0, "--env-agent-steps must be >= 1, got 0"),
    ("threads", -1, "--threads must be >= 0, got -1"),
    ("eval_episodes", -1, "--eval-episodes must be >= 0, got -1"),
    ("batches", [1], "--batches must be batch sizes >= 2, got 1"),
    ("device", "gpu", "--device 'gpu' is not a torch device"),
])
def test_bench_curl_refuses_counts_and_devices_before_timing(field, value, says):
    import dataclasses

    mod = script("bench_curl")
    with pytest.raises(ValueError, match=re.escape(says)):
        mod.check_args(dataclasses.replace(mod.Args(), **{field: value}))


@pytest.mark.parametrize("name", ["bench_replay", "bench_curl", "check_official_curl", "check_floors", "fetch_gpu_deps",
                                  "bench_qt", "bench_replay_checkpoints"])
def test_the_tools_help_shows_how_to_run_them(name):
    """--help of each tool ends its description with command lines to copy (the scripts' docstrings had them, --help
    did not, or bench_qt only its first line)."""
    import os
    import subprocess

    env = {**os.environ, "COLUMNS": "120", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "scripts" / f"{name}.py"), "--help"], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    examples = out.stdout.split("examples:", 1)
    assert len(examples) == 2, out.stdout
    assert re.search(rf"(python3?|\.venv/bin/python) scripts/{name}\.py", examples[1]), out.stdout


@pytest.mark.parametrize("command", [["-m", "rl_curl.evaluate"], ["-m", "rl_curl.export"], ["-m", "nlp_qt.export"],
                                     [str(ROOT / "scripts" / "curl_table3.py")]])
def test_the_commands_help_shows_their_docstrings_command_lines(command):
    """curl_table3.py's docstring has nine command lines, rl_curl.evaluate's, rl_curl.export's and nlp_qt.export's
    theirs; their --help showed none (fewshot's, qt_table2's and the tools' do)."""
    import os
    import subprocess

    env = {**os.environ, "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, *command, "--help"], capture_output=True, text=True, env=env, timeout=120,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    name = command[1] if command[0] == "-m" else "scripts/curl_table3.py"
    assert re.search(rf"examples:.*(python -m {re.escape(name)}|{re.escape(name)}) --", out.stdout, re.S), out.stdout
