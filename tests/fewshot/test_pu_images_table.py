"""scripts/pu_images_table.py (puNCE Tables 1, 2, 4 and the ceiling on image arrays) and the image runs' batch
composition, at tiny sizes."""

import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import tyro

from fewshot.config import ImageConfig
from fewshot.image_run import ImageData, batch_sizes

from .test_images import make_images
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("pu_images_table", ROOT / "scripts/pu_images_table.py")
T = importlib.util.module_from_spec(spec)
spec.loader.exec_module(T)


def _data(n_pool, n_lab):
    """A pool of n_pool images whose first n_lab are labeled (only the sizes matter here)."""
    z = np.zeros(n_pool)
    return ImageData(x=np.zeros((n_pool, 4)), y=z, eval_x=z, eval_y=z, labeled=np.arange(n_lab),
                     unlabeled=np.arange(n_lab, n_pool), eval_name="", n_dev=0, n_test=0)


def test_batch_holds_the_labeled_images_in_their_share_of_the_pool():
    cfg = ImageConfig(dataset="mnist", batch_size=256)
    assert batch_sizes(cfg, _data(3500, 100)) == (7, 249)  # 256 * 100 / 3500 = 7.3
    assert batch_sizes(cfg, _data(3500, 1000)) == (73, 183)
    assert batch_sizes(cfg, _data(3500, 3)) == (1, 255)  # at least one labeled image
    assert batch_sizes(cfg, _data(40, 30)) == (30, 10)  # capped at what there is
    cfg = ImageConfig(dataset="mnist", batch_size=None, batch_labeled=5, batch_unlabeled=9)
    assert batch_sizes(cfg, _data(3500, 100)) == (5, 9)


def test_the_grid_has_the_runs_each_table_needs():
    assert T.grid(["2"], [10, 20], [1]) == [("pu", "raw", 10), ("pu", "punce", 10),
                                            ("pu", "raw", 20), ("pu", "punce", 20)]
    assert {m for _, m, _ in T.grid(["1"], [10], [1])} == {"punce", "infonce", "dcl", "scl"}
    assert T.grid(["4"], [10], [1, 5]) == [("pnu", m, p) for p in (1, 5) for m in T.PNU_METHODS]
    assert T.grid(["ceiling"], [10], [1]) == [("pnu", "ceiling", 100)]
    assert len(T.grid(list(T.TABLES), [100, 300, 1000], [1, 5, 10])) == 15 + 15 + 1


def test_table_4_runs_punce_at_its_default_pull_and_as_eq_10_is_written(tmp_path):
    default = T.run_config({}, "pnu", "punce", 1, 0, tmp_path / "a")
    eq10 = T.run_config({}, "pnu", "punce-eq10", 1, 0, tmp_path / "b")
    assert default.label_pull is None and default.encoder_label_pull == ImageConfig.DEFAULT_LABEL_PULL
    assert eq10.contrastive == "punce" and eq10.encoder_label_pull == 1.0
    assert tyro.cli(ImageConfig, args=T.command(eq10)[4:], default=ImageConfig()) == eq10
    # --cpc: Table 1 gains CPC's patch encoder and InfoNCE on it; no other table changes
    assert T.grid(["1"], [10], [1], cpc=True) == T.grid(["1"], [10], [1]) + [("pu", m, 10) for m in T.CPC_METHODS]
    assert T.grid(["2", "4"], [10], [1], cpc=True) == T.grid(["2", "4"], [10], [1])
    few = T.grid(["1"], [10, 20], [1], cpc=True, patch_infonce_n_ps=[10])  # the dear InfoNCE-on-patches at n_P = 10
    assert ("pu", "infonce-patches", 10) in few and ("pu", "infonce-patches", 20) not in few
    assert ("pu", "cpc", 20) in few


@pytest.mark.parametrize("method,contrastive", [("cpc", "cpc"), ("infonce-patches", "infonce")])
def test_the_cpc_rows_run_the_patch_encoder_whatever_the_grids_encoder(tmp_path, method, contrastive):
    cfg = T.run_config({"dataset": "mnist", "encoder": "mlp", "positive_classes": (0, 2)}, "pu", method, 100, 1,
                       tmp_path / "r")
    assert (cfg.encoder, cfg.contrastive) == ("patches", contrastive)
    cfg.validate()
    parsed = tyro.cli(ImageConfig, args=T.command(cfg)[4:], default=ImageConfig())
    assert parsed == cfg


def test_a_run_command_parses_back_to_its_configuration(tmp_path):
    cfg = T.run_config({"dataset": "mnist", "positive_classes": (0, 2), "max_steps": 7}, "pnu", "ceiling", 100, 3,
                       tmp_path / "r")
    cmd = T.command(cfg)
    assert cmd[1:4] == ["-m", "fewshot.train", "images"]
    parsed = tyro.cli(ImageConfig, args=cmd[4:], default=ImageConfig())
    assert parsed == cfg and parsed.contrastive == "none" and parsed.labeled_percent == 100 and parsed.resume
    pu = T.run_config({"dataset": "mnist"}, "pu", "punce", 50, 0, tmp_path / "p")  # n_P, not a percentage
    assert (pu.n_labeled, pu.labeled_percent) == (50, ImageConfig.labeled_percent)
    assert tyro.cli(ImageConfig, args=T.command(pu)[4:], default=ImageConfig()) == pu


def test_a_grids_set_reaches_only_the_runs_that_read_it(tmp_path):
    """--set temperature=0.2 / augment=0 are the contrastive stage's; the raw learners (--contrastive none) refuse
    them, so the grid leaves them at their defaults for those runs; the contrastive runs take them."""
    base = {"dataset": "mnist", "positive_classes": (0, 2), "temperature": 0.2, "augment": 0.0}
    raw = T.run_config(base, "pu", "raw", 100, 0, tmp_path / "r")
    assert (raw.temperature, raw.augment) == (ImageConfig.temperature, ImageConfig.augment)
    raw.validate()
    assert tyro.cli(ImageConfig, args=T.command(raw)[4:], default=ImageConfig()) == raw
    punce = T.run_config(base, "pu", "punce", 100, 0, tmp_path / "p")
    assert (punce.temperature, punce.augment) == (0.2, 0.0)
    punce.validate()
    cpc = T.run_config({**base, "hidden": 64}, "pu", "cpc", 100, 0, tmp_path / "c")  # patches: no --hidden
    assert cpc.hidden == ImageConfig.hidden and cpc.temperature == 0.2
    cpc.validate()
    # --set tau_plus / label_pull were refused by every run that does not read them, so a grid could not set DCL's
    # tau+ or puNCE's lambda beside the other rows: each reaches its own rows now
    mixed = {**base, "tau_plus": 0.2, "label_pull": 0.5}
    runs = {m: T.run_config(mixed, "pu", m, 100, 0, tmp_path / m) for m in ("dcl", "punce", "infonce", "raw")}
    for cfg in runs.values():
        cfg.validate()
    assert (runs["dcl"].tau_plus, runs["punce"].tau_plus) == (0.2, ImageConfig.tau_plus)
    assert (runs["punce"].label_pull, runs["infonce"].label_pull, runs["dcl"].label_pull) == (0.5, None, None)


def test_a_set_no_run_of_the_grid_reads_is_refused(tmp_path):
    """Once a --set option reached only the rows that read it, one that no row reads was accepted and labelled the
    tables ("overrides {'tau_plus': 0.2}") while every run used the default: refused before anything runs."""
    with pytest.raises(ValueError, match=r"--set patch_pool, tau_plus: no run of this grid reads it"):
        T.main(["--tables", "2", "--set", "tau_plus=0.2", "--set", "patch_pool=2", "--out", str(tmp_path / "g")])
    assert not (tmp_path / "g").exists()


def test_set_parses_values_and_refuses_unknown_keys():
    assert T.parse_set(["max_steps=600", "temperature=0.2", "eval_file=null", "augment=1"]) == {
        "max_steps": 600, "temperature": 0.2, "eval_file": None, "augment": 1}
    with pytest.raises(ValueError, match="KEY=VALUE with KEY a fewshot option"):
        T.parse_set(["no_such_option=1"])


@pytest.mark.slow  # the grid end to end, runs in subprocesses
def test_the_grid_runs_tabulates_and_refuses_a_run_made_otherwise(tmp_path):
    x, y = make_images()
    data = tmp_path / "d.npz"
    np.savez(data, x=x, y=y)
    out = tmp_path / "grid"
    cmd = [sys.executable, str(ROOT / "scripts/pu_images_table.py"), "--dataset", str(data), "--positive-classes",
           "0", "2", "4", "--tables", "2", "--n-ps", "6", "--seeds", "0", "1", "--set", "max_steps=2", "--set",
           "hidden=16", "--set", "batch_size=16", "--set", "export=false", "--parallel", "2", "--out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    r = warm.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0, r.stdout + r.stderr
    table = (out / "tables.md").read_text()
    assert "## Table 2: PU learning" in table and "| nnPU, raw pixels |" in table
    got = json.loads((out / "tables.json").read_text())
    rows = {(e["method"], e["n"]): e for e in got["results"]}
    punce = json.loads((out / "pu/punce/n6/seed1/metrics.json").read_text())
    assert rows[("punce", 6)]["acc"]["nnpu"]["1"] == punce["probes"]["nnpu"]
    pairs = {p["comparison"] for p in got["paired"]}
    assert "puNCE+nnPU − nnpu raw" in pairs and all(p["n_seeds"] == 2 for p in got["paired"])
    assert (out / "tables.png").stat().st_size > 0
    assert f"results in {out}: tables.md, tables.json, tables.png" in r.stdout
    # nothing left to do: the finished runs are reused, not trained again
    r = warm.run(cmd, capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 0 and "runs to do" not in r.stdout
    # a finished run made with other settings is refused, naming the field
    r = warm.run(cmd[:-2] + ["--set", "temperature=0.9", "--out", str(out)], capture_output=True, text=True,
                 env=env, timeout=240)
    first = r.stderr.splitlines()[0]
    assert r.returncode == 2 and first.startswith("error: ") and "temperature: 0.5 -> 0.9" in first, r.stderr


@pytest.mark.slow  # the grid end to end, runs in subprocesses
def test_the_cpc_rows_run_and_are_paired_with_the_other_losses(tmp_path):
    x, y = make_images(side=16)
    data = tmp_path / "d16.npz"
    np.savez(data, x=x, y=y)
    out = tmp_path / "grid"
    cmd = [sys.executable, str(ROOT / "scripts/pu_images_table.py"), "--dataset", str(data), "--positive-classes",
           "0", "2", "4", "--tables", "1", "--cpc", "--n-ps", "6", "--seeds", "0", "1", "--set", "max_steps=2", "--set",
           "hidden=16", "--set", "batch_size=16", "--set", "export=false", "--parallel", "2", "--out", str(out)]
    r = warm.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    table = (out / "tables.md").read_text()
    assert "| cpc (patch encoder) |" in table and "| infonce (patch encoder) |" in table
    cpc = json.loads((out / "pu/cpc/n6/seed0/metrics.json").read_text())
    assert (cpc["contrastive"], cpc["encoder"]) == ("cpc", "patches")
    pairs = {p["comparison"] for p in json.loads((out / "tables.json").read_text())["paired"]}
    assert {"CPC − infonce", "CPC − dcl", "CPC − scl", "CPC − punce", "CPC − infonce-patches",
            "infonce-patches − infonce"} <= pairs


@pytest.mark.slow  # runs scripts/bench_pu_images.py in a subprocess
def test_the_benchmark_times_both_runs_and_reports_ratios():
    r = warm.run([sys.executable, str(ROOT / "scripts/bench_pu_images.py"), "--max-steps", "2", "--json"],
                 capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=240)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for run in ("punce_run", "raw_baselines_run"):
        m = got[run]
        assert m["steps"] == 2 and m["wall_s"] >= m["train_s"] + m["probe_s"] > 0 and 0 <= m["eval_accuracy"] <= 100
    assert got["punce_over_raw"] == pytest.approx(got["punce_run"]["wall_s"] / got["raw_baselines_run"]["wall_s"])
    assert got["punce_over_budget"] == pytest.approx(got["punce_run"]["wall_s"] / 180.0)


def test_the_feature_check_reads_a_finished_image_run(tmp_path):
    from fewshot.train import train

    spec2 = importlib.util.spec_from_file_location("pu_feature_check", ROOT / "scripts/pu_feature_check.py")
    check = importlib.util.module_from_spec(spec2)
    spec2.loader.exec_module(check)
    x, y = make_images()
    data = tmp_path / "d.npz"
    np.savez(data, x=x, y=y)
    run = tmp_path / "run"
    assert ImageConfig().setting == "pu"  # image data defaults to the PU setting; pnu is asked for
    m = train(ImageConfig(dataset=str(data), positive_classes=(0, 2, 4), n_labeled=20, hidden=16, max_steps=3,
                          passes=None, batch_size=16, progress=False, output_dir=str(run)))
    got = check.check(run)
    assert got["run_accuracy"] == m["eval_accuracy"] and got["n_labeled"] == 20 and got["setting"] == "pu"
    assert 0 <= got["all_label_probe"] <= 100 and got["class_gap"] > 0
    assert 0 <= got["labeled_vs_unlabeled_positives_auc"] <= 1
    with pytest.raises(FileNotFoundError, match="image_classifier.pt: not found"):
        (run / "model" / "image_classifier.pt").unlink()
        check.check(run)


def test_the_feature_check_reads_a_cpc_run_with_its_pooled_grid(tmp_path):
    """The patch encoder is rebuilt with its --patch-pool (450 features at 3x3), as the run's probes read it."""
    from fewshot.train import train

    spec2 = importlib.util.spec_from_file_location("pu_feature_check", ROOT / "scripts/pu_feature_check.py")
    check = importlib.util.module_from_spec(spec2)
    spec2.loader.exec_module(check)
    x, y = make_images(side=16)
    data = tmp_path / "d16.npz"
    np.savez(data, x=x, y=y)
    run = tmp_path / "run"
    m = train(ImageConfig(dataset=str(data), positive_classes=(0, 2, 4), n_labeled=20, max_steps=2,
                          passes=None, batch_size=16, progress=False, output_dir=str(run), contrastive="cpc",
                          encoder="patches", patch_pool=2, cpc_group=4))
    got = check.check(run)
    assert got["run_accuracy"] == m["eval_accuracy"] and got["contrastive"] == "cpc"
    assert 0 <= got["all_label_probe"] <= 100 and got["class_gap"] > 0


def test_a_second_grid_on_a_busy_out_is_refused_before_it_counts_runs(tmp_path, capsys):
    """The lock was taken in the runner, so a second grid printed "N runs to do" before it was refused."""
    from shared_losses.training.sweep import SweepError
    from tests.shared_losses.test_sweep import _hold_lock

    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    holder = _hold_lock(tmp_path / "grid")
    try:
        with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'grid'} is in use by another grid still running"):
            T.main(["--dataset", str(tmp_path / "d.npz"), "--positive-classes", "0", "2", "4", "--tables", "2",
                    "--n-ps", "6", "--seeds", "0", "--set", "max_steps=2", "--out", str(tmp_path / "grid")])
        assert "runs to do" not in capsys.readouterr().out
        assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == [".grid.lock"]
    finally:
        holder.kill()
        holder.wait()


def test_the_plot_names_lines_as_the_tables_do_and_draws_no_whisker_for_one_seed(tmp_path, monkeypatch):
    """A probe looked at tables.png: "punce" in the legend meant two losses in two figures (the code's keys), one
    seed had whiskers of 0, a log axis of under a decade labelled its minor ticks, and the digits tables' header said
    they ran on the 5k MNIST digits."""
    import matplotlib.pyplot as plt

    figs = []
    monkeypatch.setattr(plt, "close", figs.append)
    res = {("pnu", m, p): {"acc": {"main": {0: 80.0 + k + p / 10}}}
           for k, m in enumerate(T.PNU_METHODS) for p in (1, 5, 10)}
    res.update({("pu", m, n): {"acc": {"nnpu": {0: 70.0 + n / 10, 1: 72.0 + n / 10}}}
                for m in ("infonce", "punce") for n in (25, 50)})
    assert T.plot(tmp_path / "t.png", res, ["1", "4"], [25, 50], [1, 5, 10])
    table1, table4 = figs[0].axes
    assert [t.get_text() for t in table4.get_legend().get_texts()] == [
        "InfoNCE", "SCL", "puNCE (--label-pull default)", "puNCE, eq. 10 as written (label pull 1)",
        "cross-entropy, end to end"]
    for ax, whiskers in ((table4, False), (table1, True)):  # one seed: none; two seeds: the sample std
        segments = [seg for c in ax.containers for seg in c.lines[2][0].get_segments()]
        drawn = [seg for seg in segments if len(seg) and not np.isnan(seg).any()]
        assert bool(drawn) == whiskers
        assert not [t for t in ax.xaxis.get_minorticklabels() if t.get_text()]
    assert [t.get_text() for t in table1.get_xticklabels()] == ["25", "50"]
    assert T.ours_data("mnist") == "the 5k digits, about 3.5k in the training pool"
    assert T.ours_data("/tmp/digits8x8.npz") == "digits8x8.npz"


def test_a_cell_with_a_missing_seed_says_how_many_ran_and_ties_are_counted():
    """A seed not finished (or failed) is not hidden in a mean ± std cell, and a tied seed is named beside the
    wins (``2/3`` read as two wins and one loss when it was one tie)."""
    res = {("pu", "raw", 50): {"acc": {"nnpu": {0: 80.0, 1: 82.0, 2: 84.0}, "pn": {0: 70.0, 1: 71.0, 2: 72.0},
                                       "upu": {0: 75.0, 1: 76.0, 2: 77.0}}, "seconds": [1.0], "prior": {}},
           ("pu", "punce", 50): {"acc": {"nnpu": {0: 85.0, 1: 82.0}, "pn": {0: 1.0, 1: 2.0}, "upu": {0: 1.0, 1: 2.0}},
                                 "seconds": [1.0], "prior": {}}}
    header = {"batch_size": 256, "passes": 1.0, "dataset": "mnist", "positive_classes": "0,2,4,6,8",
              "encoder": "mlp", "eval_split": "test", "overrides": {}, "lr": 1e-3, "temperature": 0.5,
              "augment": "none", "hidden": 16}
    md, paired = T.tables_markdown(res, header, ("2",), [50], [], [0, 1, 2])
    lines = md.splitlines()
    assert any(line.startswith("| nnPU, raw pixels | 82.00 ± 2.00 |") for line in lines), md
    assert any(line.startswith("| puNCE encoder + nnPU probe | 83.50 ± 2.12 (n=2) |") for line in lines), md
    row = next(line for line in lines if "puNCE − raw nnPU" in line or ("+5.00, +0.00" in line))
    assert row.endswith("| 1/2, 1 tied |"), row
    assert "bootstrap (percentile, narrow)" in md
