"""The fewshot sweep and benchmark scripts at tiny sizes."""

import json
import sys
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # every test runs a sweep or benchmark script end to end in subprocesses


def test_bench_fewshot_json(tiny_encoder):
    # one sequence length: each objective is a process of its own (about 6 s here); the loop over lengths repeats it
    cmd = [sys.executable, str(ROOT / "scripts/bench_fewshot.py"), "--encoder", tiny_encoder, "--seq-lens", "8",
           "--batch-labeled", "4", "--batch-unlabeled", "4", "--max-steps", "1", "--json"]
    res = warm.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [(r["seq_len"], r["objective"]) for r in rows] == [(8, o) for o in ("probe", "ce", "ce+punce")]
    assert [r["step_time_vs_ce"] for r in rows][1] == 1.0  # the ratio is taken against CE of the same run
    for r in rows:
        assert {"seq_len", "batch", "examples_per_s", "peak_mb"} <= set(r) and r["examples_per_s"] > 0


def test_table5_sweep_local_columns_and_refuses_runs_made_with_other_options(tiny_encoder, tmp_path):
    import csv

    from tests.fewshot.conftest import make_texts

    for name, seed in (("train.csv", 0), ("dev.csv", 1)):
        with open(tmp_path / name, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["id", "review", "sentiment"])
            w.writerows([i, t, "positive" if y else "negative"] for i, (t, y) in enumerate(make_texts(60, seed)))
    out = tmp_path / "sweep"
    cmd = [sys.executable, str(ROOT / "scripts/fewshot_table5.py"), "--encoder", tiny_encoder,
           "--dataset", str(tmp_path / "train.csv"), "--eval-file", str(tmp_path / "dev.csv"),
           "--text-column", "review", "--label-column", "sentiment", "--positive-label", "positive",
           "--methods", "ce", "--ns", "10", "--seeds", "0", "--max-steps", "1", "--n-unlabeled", "10",
           "--out", str(out)]
    warm.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    assert (out / "ce/N10/seed0/metrics.json").exists()
    # the finished 1-step run must not be counted in a table that says 3 steps
    other = [("3" if a == "1" and cmd[i - 1] == "--max-steps" else a) for i, a in enumerate(cmd)]
    for extra in ([], ["--aggregate-only"]):
        res = warm.run(other + extra, capture_output=True, text=True, timeout=600)
        assert res.returncode != 0 and "steps: 1 -> 3" in res.stderr and "runs to do" not in res.stdout
    again = warm.run(cmd + ["--aggregate-only"], capture_output=True, text=True, timeout=600, check=True)
    assert "| 10 |" in again.stdout
