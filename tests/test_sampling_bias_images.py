"""scripts/sampling_bias.py on image arrays (--data PATH.npz) at a tiny size, the synthetic default unchanged
against the script before the image version, and bad image input ending in one error line."""

import contextlib
import importlib.util
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from tests import warm

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "sampling_bias.py"
#: the last commit whose scripts/sampling_bias.py had only the synthetic experiment
BEFORE_IMAGES = "0b09668e8d031e8c3675584479ec4e2cab05beea"


def load_module(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[name]
    return mod


def run_main(mod, argv) -> str:
    """``mod.main(argv)`` in this process; its stdout. Restores torch's thread count."""
    threads, out = torch.get_num_threads(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            mod.main(argv)
    finally:
        torch.set_num_threads(threads)
    return out.getvalue()


def tiny_npz(path: Path, classes: int = 3, per_class: int = 20, side: int = 10) -> Path:
    """Grey side x side images whose class is a bright band at a class-specific height."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(classes), per_class)
    x = rng.random((len(y), side, side)) * 0.3
    for c in range(classes):
        x[y == c, 3 * c:3 * c + 3, :] += 0.6
    np.savez(path, x=np.clip(x, 0, 1).astype(np.float32), y=y)
    return path


def test_image_path_end_to_end(tmp_path):
    sb = load_module(SCRIPT, "sampling_bias_under_test")
    out = tmp_path / "run"
    stdout = run_main(sb, ["--data", str(tiny_npz(tmp_path / "tiny.npz")), "--steps", "3", "--batch", "16",
                           "--seeds", "0", "1", "--width", "4", "--feat-dim", "8", "--proj-dim", "4",
                           "--probe-draws", "1", "--out", str(out)])
    res = json.loads((out / "results.json").read_text())
    assert res["classes"] == 3 and res["tau_plus"] == pytest.approx(1 / 3) == res["tau_plus_true"]
    sweep = [row["tau_plus"] for row in res["sweep"]]
    assert sweep == pytest.approx([1 / 6, 1 / 3, 2 / 3])
    # the sweep's middle value is the debiased M=1 encoder itself; the other two are trained alongside
    assert [row["objective"] for row in res["sweep"]][1] == "debiased_m1"
    expected = {"biased", "debiased_m1", "debiased_m2", "unbiased", "untrained"} | {
        row["objective"] for row in res["sweep"]}
    assert set(res["summary"]) == expected and len(expected) == 7
    for v in res["summary"].values():
        assert len(v["per_seed"]) == 2 and all(0.0 <= a <= 100.0 for a in v["per_seed"])
    assert set(res["paired_vs_biased"]) == expected - {"biased", "untrained"}
    for st in res["paired_vs_biased"].values():
        assert st["n_seeds"] == 2 and st["t_ci"] is not None and st["bootstrap_ci"] is not None
    assert res["split"] == "held-out" and set(res["ordering_holds"]) == {"debiased_m1", "debiased_m2"}
    assert "| biased (InfoNCE) |" in stdout and "| unbiased (true negatives) − biased |" in stdout
    assert re.search(r"DCL's ordering unbiased >= debiased \(M=1\) >= biased (holds|does NOT hold) here", stdout)
    assert (out / "sampling_bias.png").stat().st_size > 0


def test_probe_never_reads_training_images():
    sb = load_module(SCRIPT, "sampling_bias_under_test")
    y = np.repeat(np.arange(4), 25)
    for dev in (False, True):
        s = sb.ImageSetting(dev=dev)
        train, probe = sb.image_split(y, s, seed=3)
        assert len(set(train) & set(probe)) == 0 and np.bincount(y[probe]).tolist() == [5] * 4
        if dev:  # the development split comes out of the training images: the held-out set stays unread
            _, held = sb.image_split(y, sb.ImageSetting(), seed=3)
            assert not set(held) & (set(train) | set(probe))
        else:
            assert len(train) + len(probe) == len(y)


def test_synthetic_default_is_unchanged(tmp_path):
    """The synthetic run gives the numbers, table and results.json of the script before the image version."""
    try:
        old_src = warm.run(["git", "-C", str(ROOT), "show", f"{BEFORE_IMAGES}:scripts/sampling_bias.py"],
                           capture_output=True, text=True, check=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("needs the git history (the script before the image version)")
    # the modules the old script imports have moved since (the run machinery into shared_losses.training)
    old_src = re.sub(r"shared_losses\.(cli|runtime|stats|sweep|harness|loop)\b", r"shared_losses.training.\1", old_src)
    old_src = old_src.replace("shared_losses.datasets", "shared_losses.data")
    (tmp_path / "old_sampling_bias.py").write_text(old_src)
    old = load_module(tmp_path / "old_sampling_bias.py", "old_sampling_bias")
    new = load_module(SCRIPT, "sampling_bias_under_test")
    argv = ["--steps", "3", "--batch", "32", "--seeds", "0", "1"]
    outputs, results = [], []
    for mod, name in ((old, "old"), (new, "new")):
        text = run_main(mod, argv + ["--out", str(tmp_path / name)])
        outputs.append(re.sub(r", \d+ s\n", ", N s\n", text).replace(str(tmp_path / name), "OUT"))
        res = json.loads((tmp_path / name / "results.json").read_text())
        res.pop("seconds")
        res.pop("torch_threads", None)  # recorded since (the thread count the sums' order came from)
        results.append(res)
    assert outputs[0] == outputs[1]
    assert results[0] == results[1]
    assert "| debiased τ⁺=1/10, M=2 |" in outputs[1]


@pytest.mark.slow  # runs scripts/sampling_bias.py in subprocesses
def test_bad_npz_is_one_error_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "CONTRASTIVE_SUITE_TRACEBACK"}
    np.savez(tmp_path / "bad.npz", x=np.zeros((5, 10, 10), np.float32), y=np.zeros(4, np.int64))
    cases = ((tmp_path / "missing.npz", "file not found"), (tmp_path / "bad.npz", "x holds 5 images but y holds 4"))
    for path, words in cases:
        res = warm.run([sys.executable, str(SCRIPT), "--data", str(path), "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=120, env=env)
        errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
        assert res.returncode == 2 and "Traceback" not in res.stderr and len(errors) == 1, res.stderr
        assert words in errors[0] and str(path) in errors[0]
    assert not (tmp_path / "out").exists()


def test_the_bars_start_at_zero_and_one_seed_has_no_whisker(tmp_path):
    """The y axis started 5 points below the lowest bar (a 4-point gap looked like a 1.5x one), and one seed was
    drawn and printed as "± 0" (a probe)."""
    sb = load_module(SCRIPT, "sampling_bias_under_test")
    rows = [{"mean": 65.0, "std": None}, {"mean": 69.0, "std": None}]
    fig = sb.bar_plot(str(tmp_path / "one.png"), rows, ["a", "b"], ["#999999", "#4c72b0"], "one seed")
    ax = fig.axes[0]
    assert ax.get_ylim() == (0.0, 100.0) and (tmp_path / "one.png").stat().st_size > 0
    assert not [c for c in ax.containers if type(c).__name__ == "ErrorbarContainer" and
                any(len(seg) for seg in c.lines[2][0].get_segments() if not np.isnan(seg).any())]
    assert "one seed: no spread" in ax.get_title()
    assert sb.mean_std(65.0, None) == "65.00 (1 seed)" and sb.mean_std(65.0, 1.234) == "65.00 ± 1.23"
    fig = sb.bar_plot(str(tmp_path / "two.png"), [{"mean": 65.0, "std": 2.0}, {"mean": 69.0, "std": 1.0}],
                      ["a", "b"], ["#999999", "#4c72b0"], "two seeds")
    assert fig.axes[0].get_ylim() == (0.0, 100.0) and "whiskers: sample std over seeds" in fig.axes[0].get_title()
