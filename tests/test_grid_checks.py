"""The grid scripts refuse impossible options before the first run: scripts/curl_table3.py, qt_table2.py,
fewshot_table5.py and pu_images_table.py, each run as a subprocess with one bad option. Every case must exit
with status 2 and an `error: ...` line naming the option and the value (no traceback), before any run starts
and before --out is created; --aggregate-only on a folder without runs is such an error too. Then, in process,
that the named data sets (hf:NAME, human, glue/sst2, mnist) still pass the checks without being loaded."""

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

QT_BASE = ["--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"), "--data", str(ROOT / "nlp_qt/data/senteval_demo"),
           "--tasks", "MR"]
T5_BASE = ["--preset", "cpu", "--encoder", "minilm", "--pooling", "mean", "--dataset", "drugreview"]

# (script, options, fragments of stderr); "{tmp}" is the test's temporary folder
CASES = [
    ("curl_table3", ["--env-steps", "-5"], ["--env-steps must be >= 1", "got -5"]),
    ("curl_table3", ["--objectives", "debiased:-0.5:1"], ["TAU_PLUS (must be in [0, 1)) = '-0.5'"]),
    ("curl_table3", ["--seeds", "-1"], ["--seed must be a whole number in [0, 2**32)", "got -1",
                                        "rl_curl.train's check"]),
    ("curl_table3", ["--batch-size", "1"], ["batch_size must be >= 2", "got 1"]),
    ("curl_table3", ["--tasks"], ["--tasks is empty"]),
    ("curl_table3", ["--extra=--discount=2"], ["--discount must be in (0, 1], got 2.0"]),
    ("curl_table3", ["--aggregate-only"], ["--aggregate-only: no runs under", "out"]),
    ("qt_table2", [*QT_BASE, "--tau-plus", "-0.5"], ["tau_plus must be in [0, 1), got -0.5", "nlp_qt.train's check"]),
    ("qt_table2", [*QT_BASE, "--lr", "nan"], ["--lr must be positive, got nan"]),
    ("qt_table2", [*QT_BASE, "--epochs", "0"], ["--epochs must be positive, got 0"]),
    ("qt_table2", [*QT_BASE, "--seeds", "-1"], ["--seeds must be >= 0", "got -1"]),
    ("qt_table2", [*QT_BASE, "--seeds", "0", "0"], ["--seeds 0 0 names a seed twice"]),
    ("qt_table2", [*QT_BASE, "--corpus", "{tmp}/empty.txt"], ["empty.txt has no usable sentences"]),
    ("qt_table2", [*QT_BASE, "--kfold", "1"], ["--kfold must be >= 2, got 1"]),
    ("qt_table2", [*QT_BASE, "--vocab-size", "0"], ["--vocab-size must be >= 1, got 0"]),
    ("qt_table2", [*QT_BASE, "--corpus", "{tmp}/missing/corpus.txt"], ["corpus not found", "missing/corpus.txt"]),
    ("qt_table2", [*QT_BASE, "--data", "{tmp}/no_senteval"], ["SentEval data folder not found", "no_senteval"]),
    ("fewshot_table5", [*T5_BASE, "--ns", "0"], ["--ns must be >= 2", "got 0"]),
    ("fewshot_table5", [*T5_BASE, "--seeds", "-1"], ["--seeds must be >= 0", "got -1"]),
    ("fewshot_table5", [*T5_BASE, "--n-unlabeled", "-1"], ["--n-unlabeled must be >= 0, got -1"]),
    ("fewshot_table5", [*T5_BASE, "--lr=-1e-4"], ["--lr must be a positive number, got -0.0001"]),
    ("fewshot_table5", [*T5_BASE, "--eval-split", "dev", "--dev-fraction", "1.5"],
     ["--dev-fraction must be in (0, 1), got 1.5"]),
    ("fewshot_table5", [*T5_BASE, "--dataset", "{tmp}/missing.csv", "--eval-file", "{tmp}/missing_eval.csv"],
     ["--dataset", "missing.csv", "nor an existing file"]),
    ("fewshot_table5", [*T5_BASE, "--dataset", "{tmp}/train.csv", "--eval-file", "{tmp}/missing_eval.csv"],
     ["--eval-file", "missing_eval.csv"]),
    ("fewshot_table5", [*T5_BASE, "--aggregate-only"], ["--aggregate-only: no finished runs under"]),
    ("fewshot_table5", [*T5_BASE, "--parallel", "0"], ["--parallel 0: must be at least 1"]),
    ("pu_images_table", ["--n-ps", "0"], ["--n-ps 0: --n-ps are labeled positives, at least 1"]),
    ("pu_images_table", ["--percents", "101"], ["--percents 101: --percents are percentages of the pool, 1 to 100"]),
    ("pu_images_table", ["--seeds", "-1"], ["--seeds must be >= 0", "got -1"]),
    ("pu_images_table", ["--set", "lr=0"], ["--lr must be a positive number, got 0"]),
    ("pu_images_table", ["--set", "tau_plus=-0.5"], ["--tau-plus must be in [0, 1), got -0.5"]),
    ("pu_images_table", ["--dataset", "{tmp}/missing.npz"], ["--dataset", "missing.npz: file not found"]),
    ("pu_images_table", ["--aggregate-only"], ["--aggregate-only: no finished runs under"]),
    ("pu_images_table", ["--n-ps", "100", "5000"], ["--n-ps 5000: the training pool has", "positive images",
                                                   "lower --n-ps"]),
    # a Ray cluster that is not there: refused before "N runs to do" and before --out is made (it used to be after)
    *[(script, [*base, "--backend", "ray", "--address", "127.0.0.1:1"],
       ["--address 127.0.0.1:1: no Ray cluster reachable there"])
      for script, base in (("curl_table3", []), ("qt_table2", QT_BASE), ("fewshot_table5", [*T5_BASE, "--ns", "20"]),
                           ("pu_images_table", []))],
]


IDS = [f"{k}-{s}:{' '.join(a[-2:] if len(a) > 1 else a)}" for k, (s, a, _) in enumerate(CASES)]


def script_env() -> dict:
    """The scripts' environment here: offline, and user errors as one line (no traceback asked for)."""
    env = {k: v for k, v in os.environ.items() if k != "CONTRASTIVE_SUITE_TRACEBACK"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    return env


def run_script(script: str, args: list[str], cwd=ROOT) -> subprocess.CompletedProcess:
    return warm.run([sys.executable, str(ROOT / "scripts" / f"{script}.py"), *args], capture_output=True,
                    text=True, timeout=120, cwd=cwd, env=script_env())


@pytest.fixture(scope="module")
def refused(tmp_path_factory) -> dict:
    """{case id: (its temporary folder, the finished command)}: the commands run one after the other in one
    interpreter (tests/script_batch.py: each as ``python scripts/X.py ...`` would, its exit status and output its
    own), so the imports are paid once instead of once a command (31 commands as separate processes: 41 s alone,
    136 s beside the other worker); the other tests of this file run the scripts as real commands."""
    from tests.script_batch import run_batch

    cases, tmps = [], []
    for script, args, _ in CASES:
        tmp = tmp_path_factory.mktemp("case")
        (tmp / "train.csv").write_text("sentence,label\ngood film,1\nbad film,0\n")
        (tmp / "empty.txt").write_text("")
        tmps.append(tmp)
        cases.append((ROOT / "scripts" / f"{script}.py", [a.replace("{tmp}", str(tmp)) for a in args]
                      + ["--out", str(tmp / "out")], ROOT))
    return dict(zip(IDS, zip(tmps, run_batch(cases, env=script_env()))))


@pytest.mark.slow  # the grid scripts run as commands (subprocesses)
@pytest.mark.timeout(600)  # the first case's setup runs all 37 commands
@pytest.mark.parametrize("case_id, fragments", [(i, c[2]) for i, c in zip(IDS, CASES)], ids=IDS)
def test_bad_option_is_refused_before_anything_runs(refused, case_id, fragments):
    tmp, res = refused[case_id]
    out = tmp / "out"
    assert res.returncode == 2, (res.returncode, res.stdout[-2000:], res.stderr[-2000:])
    assert "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, res.stderr
    for fragment in fragments:
        assert fragment in errors[0], (fragment, errors[0])
    assert not out.exists()
    assert "runs to do" not in res.stdout and "models (" not in res.stdout  # nothing was started


@pytest.mark.slow  # the grid scripts run as commands (subprocesses)
@pytest.mark.parametrize("script", ["curl_table3", "fewshot_table5", "pu_images_table"])
def test_aggregate_only_on_an_existing_folder_without_runs(tmp_path, script):
    (tmp_path / "stray").mkdir()
    (tmp_path / "stray" / "notes.txt").write_text("not a run")
    res = run_script(script, [*(T5_BASE if script == "fewshot_table5" else []), "--aggregate-only",
                              "--out", str(tmp_path)])
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert f"no runs under {tmp_path}" in res.stderr or f"no finished runs under {tmp_path}" in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["stray"]  # no table written


@pytest.mark.slow  # the grid scripts run as commands (subprocesses)
@pytest.mark.parametrize("script", ["curl_table3", "fewshot_table5", "pu_images_table"])
def test_a_relative_out_is_the_callers_folder_for_runs_and_tables(tmp_path, script):
    """The runs start in the repository's root; a relative --out used to put the run folders there and the tables
    in the caller's folder. It is now the caller's for both (resolved before anything uses it)."""
    if script == "curl_table3":
        res = run_script(script, ["--tasks", "cartpole-swingup", "--objectives", "curl", "--seeds", "0", "--dry-run",
                                  "--out", "rel/grid"], cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert f"--output-dir {tmp_path / 'rel/grid/cartpole-swingup/curl/seed0'}" in res.stdout
    else:
        res = run_script(script, [*(T5_BASE if script == "fewshot_table5" else []), "--aggregate-only", "--out",
                                  "rel/grid"], cwd=tmp_path)
        assert res.returncode == 2 and f"no finished runs under {tmp_path / 'rel/grid'}" in res.stderr, res.stderr
    assert not (ROOT / "rel").exists()


@pytest.mark.slow  # the grid scripts run as commands (subprocesses)
def test_a_relative_input_is_read_from_the_callers_folder(tmp_path):
    """qt_table2's runs start in the repository's root: a corpus given relative to the caller's folder is passed to
    them as an absolute path (the sweep then stops at the next check, the missing SentEval folder, not at the
    corpus)."""
    (tmp_path / "corpus.txt").write_text("One sentence here.\nAnother one follows.\nAnd a third.\n")
    res = run_script("qt_table2", ["--corpus", "corpus.txt", "--data", "no_such_senteval", "--tasks", "MR", "--out",
                                   "grid"], cwd=tmp_path)
    assert res.returncode == 2 and "SentEval data folder not found" in res.stderr, res.stderr
    assert "corpus not found" not in res.stderr and not (tmp_path / "grid").exists()


@pytest.mark.slow  # the grid scripts run as commands (subprocesses)
def test_empty_list_option_is_a_usage_error():
    res = run_script("fewshot_table5", [*T5_BASE, "--ns"])
    assert res.returncode == 2 and "--ns: expected at least one argument" in res.stderr


# ------------------------------------------------------------------------- the same checks in process: named data


def _load(name: str):
    import importlib

    return importlib.import_module(name)  # scripts/ is on sys.path (above)


def test_curl_grid_defaults_and_presets_pass(tmp_path):
    curl = _load("curl_table3")
    for argv in ([], ["--preset", "cpu", "--tasks", "cartpole-swingup", "--objectives", "none", "curl",
                      "debiased:0.05:1", "hard:0.1:1:1"], ["--updates", "official", "fused", "--seeds", "0"]):
        curl.check_grid(curl.parse_args([*argv, "--out", str(tmp_path / "x")]))
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("argv", [
    ["--preset", "cpu"], ["--preset", "demo"], ["--preset", "cpu-bow"],
    ["--corpus", "hf:bookcorpus", "--data", "human", "--tasks", "RT"],  # a hub corpus is not looked up here
    ["--corpus", "nlp_qt/data/corpus_docstrings", "--data", "nlp_qt/data/senteval_demo", "--tasks", "MR", "CR",
     "TREC", "MRPC", "--epochs", "2", "--batch-size", "100", "--word-dim", "64", "--encoder-dim", "256", "--lr",
     "2e-3", "--kfold", "5"],  # the docstring's example, relative paths read from the repository root
])
def test_qt_sweep_presets_and_named_data_pass(tmp_path, argv, monkeypatch):
    qt = _load("qt_table2")
    monkeypatch.chdir(tmp_path)  # the runs read relative paths from the repository root, wherever the sweep starts
    a = qt.parse_args([*argv, "--out", str(tmp_path / "x")])
    qt.check_sweep(a, qt.jobs(a))
    assert not (tmp_path / "x").exists()


def test_fewshot_named_sets_are_not_loaded_up_front(tmp_path, monkeypatch):
    t5 = _load("fewshot_table5")
    import fewshot.data

    monkeypatch.setattr(fewshot.data, "load_splits", lambda cfg: pytest.fail(f"loaded {cfg.dataset}"))
    for name in ("glue/sst2", "drugreview", "mnist"):
        t5.check_data(t5.run_config("cpu", {"dataset": name}, "ce", 20, 0, tmp_path / "r"))


def test_pu_images_shipped_digits_are_not_loaded_up_front(tmp_path, monkeypatch):
    pu = _load("pu_images_table")
    import shared_losses.data

    monkeypatch.setattr(shared_losses.data, "load_images", lambda *a: pytest.fail(f"loaded {a}"))
    pu.check_data(types.SimpleNamespace(dataset="mnist", eval_file=None), [0, 2, 4, 6, 8])
    with pytest.raises(ValueError, match=r"--positive-classes \[42\] never occur"):  # its digits are known: 0-9
        pu.check_data(types.SimpleNamespace(dataset="mnist", eval_file=None), [42])


def test_pu_images_set_reads_none_and_refuses_text_for_a_number():
    """--set passes=None is the default (Python's null spelling); --set passes=abc was a TypeError traceback in
    the configuration's check; now a usage error naming the option (argparse's, exit 2)."""
    sets = _load("pu_images_table").parse_set(["passes=None", "lr=1e-3", "encoder=cnn", "max_steps=5"])
    assert sets == {"passes": None, "lr": 0.001, "encoder": "cnn", "max_steps": 5}
    with pytest.raises(ValueError, match="passes takes a number .* got 'abc'"):
        _load("pu_images_table").parse_set(["passes=abc"])
