"""Smoke tests of the loss-core scripts at tiny sizes (real runs: docs/results/losses.md, docs/results/fewshot.md)."""

import json
import sys
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow  # every test runs a script in a subprocess


def test_sampling_bias_tiny(tmp_path):
    out = tmp_path / "sb"
    res = warm.run(
        [sys.executable, str(ROOT / "scripts/sampling_bias.py"), "--steps", "3", "--batch", "32", "--seeds", "0", "1",
         "--out", str(out)], capture_output=True, text=True, timeout=300, check=True)
    assert "| biased (InfoNCE) |" in res.stdout
    summary = json.loads((out / "results.json").read_text())["summary"]
    assert set(summary) == {"biased", "debiased_m1", "debiased_m2", "unbiased"}
    assert all(0.0 <= v["mean"] <= 100.0 and len(v["per_seed"]) == 2 for v in summary.values())
    assert (out / "sampling_bias.png").stat().st_size > 0
    # the thread count changes a result's last digits (one core against two): --threads sets it (it was refused as
    # an image option) and results.json records it
    one = warm.run(
        [sys.executable, str(ROOT / "scripts/sampling_bias.py"), "--steps", "3", "--batch", "32", "--seeds", "0", "1",
         "--threads", "1", "--out", str(tmp_path / "one")], capture_output=True, text=True, timeout=300, check=True)
    assert one.returncode == 0 and json.loads((tmp_path / "one/results.json").read_text())["torch_threads"] == 1
    assert json.loads((out / "results.json").read_text())["torch_threads"] >= 1


def test_bench_losses_json_fields():
    res = warm.run(
        [sys.executable, str(ROOT / "scripts/bench_losses.py"), "--json", "--batches", "16", "--temperatures", "0.5",
         "0.01", "--repeats", "1"], capture_output=True, text=True, timeout=300, check=True)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert len(rows) == 2
    for row in rows:
        for key in ("batch", "ours_ms", "exp_space_ms", "ours_peak_mb", "exp_space_peak_mb", "ours_finite",
                    "exp_space_finite"):
            assert key in row
        assert row["batch"] == 16 and row["ours_finite"] is True
