"""scripts/fewshot_table5.py: the paired statistics, --set parsing, the aggregation of finished runs
(fake metrics.json folders) and the files it writes; one real sweep on the tiny encoder; and
scripts/bench_fewshot.py --protocol at tiny size."""

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from fewshot.run import recorded_config
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts/fewshot_table5.py"


def _load():
    spec = importlib.util.spec_from_file_location("fewshot_table5", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


t5 = _load()


# ------------------------------------------------------------------------------------ statistics

def test_paired_stats_hand_computed():
    st = t5.paired_stats({0: 81.0, 1: 72.0, 2: 93.0}, {0: 80.0, 1: 70.0, 2: 90.0})
    assert st["seeds"] == [0, 1, 2] and st["diffs"] == pytest.approx([1.0, 2.0, 3.0])
    assert st["mean"] == pytest.approx(2.0) and st["std"] == pytest.approx(1.0)
    half = 4.302652729911275 / math.sqrt(3)  # t(0.975, df 2) * sd / sqrt(n)
    assert st["t_ci"] == pytest.approx([2.0 - half, 2.0 + half], abs=1e-9)
    assert (st["wins"], st["losses"], st["ties"]) == (3, 0, 0)
    # another sample, the same critical value (scipy.stats, as every interval now)
    st_table = t5.paired_stats({0: 1.0, 1: 2.0, 2: 3.0}, {0: 0.0, 1: 0.0, 2: 0.0})
    t2 = 4.302652729749462  # t_{0.975, 2}
    assert st_table["t_crit"] == pytest.approx(t2)
    assert st_table["t_ci"] == pytest.approx([2.0 - t2 / math.sqrt(3), 2.0 + t2 / math.sqrt(3)])


def test_paired_stats_wins_losses_ties_and_signs():
    st = t5.paired_stats({0: 50.0, 1: 60.0, 2: 70.0, 3: 55.0}, {0: 52.0, 1: 60.0, 2: 65.0, 3: 54.0})
    assert st["diffs"] == pytest.approx([-2.0, 0.0, 5.0, 1.0])
    assert (st["wins"], st["losses"], st["ties"]) == (2, 1, 1)
    assert st["mean"] == pytest.approx(1.0)
    assert st["std"] == pytest.approx(np.std([-2.0, 0.0, 5.0, 1.0], ddof=1))


def test_bootstrap_ci_contains_mean_and_is_deterministic():
    a = {s: 80.0 + d for s, d in enumerate([1.0, 2.0, 3.0, -0.5, 4.0])}
    b = {s: 80.0 for s in range(5)}
    one, two = t5.paired_stats(a, b), t5.paired_stats(a, b)
    lo, hi = one["bootstrap_ci"]
    assert lo <= one["mean"] <= hi and lo < hi
    assert one["bootstrap_ci"] == two["bootstrap_ci"]  # fixed rng seed 0
    assert min(one["diffs"]) <= lo and hi <= max(one["diffs"])  # resampled means stay inside the data's range
    # the same computation written out: 10,000 resamples of the seeds, percentile interval
    d = np.array(one["diffs"])
    means = d[np.random.default_rng(0).integers(0, 5, size=(10_000, 5))].mean(axis=1)
    assert one["bootstrap_ci"] == pytest.approx(list(np.percentile(means, [2.5, 97.5])))
    assert one["n_boot"] == 10_000
    # another rng seed gives another (close) interval
    assert t5.paired_stats(a, b, rng_seed=1)["bootstrap_ci"] != one["bootstrap_ci"]


def test_paired_stats_pairs_only_common_seeds():
    st = t5.paired_stats({0: 90.0, 1: 91.0, 2: 95.0, 7: 99.0}, {1: 90.0, 2: 93.0, 3: 10.0, 0: 88.0})
    assert st["seeds"] == [0, 1, 2] and st["diffs"] == pytest.approx([2.0, 1.0, 2.0]) and st["n_seeds"] == 3
    one = t5.paired_stats({0: 90.0, 5: 1.0}, {0: 85.0})
    assert one["n_seeds"] == 1 and one["mean"] == pytest.approx(5.0) and one["t_ci"] is None and (
        one["bootstrap_ci"] is None)
    none = t5.paired_stats({0: 90.0}, {1: 85.0})
    assert none["n_seeds"] == 0 and none["mean"] is None and none["diffs"] == []


def test_summarize_sample_std():
    s = t5.summarize({1: 80.0, 0: 90.0, 2: 85.0})
    assert s["mean"] == pytest.approx(85.0) and s["std"] == pytest.approx(5.0) and s["n_runs"] == 3
    assert list(s["per_seed"]) == [0, 1, 2]
    assert t5.summarize({0: 70.0})["std"] is None


# ------------------------------------------------------------------------------------ --set

def test_set_parses_with_field_types():
    got = t5.parse_set(["lr=1e-4", "train-layers=2", "head=logreg", "max_eval=none", "gather_across_processes=true",
                        "temperature=0.5", "text_column=review", "prior=0.4", "mixed_precision=no", "progress=0"])
    assert got == {"lr": 1e-4, "train_layers": 2, "head": "logreg", "max_eval": None, "gather_across_processes": True,
                   "temperature": 0.5, "text_column": "review", "prior": 0.4, "mixed_precision": "no",
                   "progress": False}
    assert isinstance(got["train_layers"], int) and isinstance(got["lr"], float)
    assert t5.parse_set(["train-layers=None"]) == {"train_layers": None}
    assert t5.parse_set(["max_steps=7"]) == {"max_steps": 7}


@pytest.mark.parametrize("item, message", [
    ("learning_rate=1e-4", "no field 'learning_rate'"),
    ("tempreature=0.5", "did you mean temperature"),
    ("max_steps=1.5", "must be an integer"),
    ("lr=fast", "must be a number"),
    ("progress=maybe", "true or false"),
    ("head=mlp", "must be one of linear, logreg"),
    ("max_steps=none", "must be an integer"),  # max_steps is not Optional
    ("objective=ce", "use --methods"),
    ("seed=3", "use --seeds"),
    ("n_labeled=5", "use --ns"),
    ("estimate_prior=true", "ce+punce-est"),
    ("lr", "expected KEY=VALUE"),
])
def test_set_refuses(item, message):
    with pytest.raises(ValueError, match=message.replace("+", r"\+")):
        t5.parse_set([item])


def test_set_refuses_a_field_twice():
    with pytest.raises(ValueError, match="given twice"):
        t5.parse_set(["lr=1e-4", "lr=2e-4"])


@pytest.mark.slow  # runs scripts/fewshot_table5.py in subprocesses
def test_cli_set_errors_are_usage_errors(tmp_path):
    for extra, message in ((["--set", "nope=1"], "no field 'nope'"),
                           (["--max-steps", "3", "--set", "max_steps=4"], "repeats the option --max-steps"),
                           (["--set", "prior=0.5"], "ce+punce-est would not estimate it")):
        res = warm.run([sys.executable, str(SCRIPT), "--out", str(tmp_path / "x"), "--aggregate-only", *extra],
                       capture_output=True, text=True, timeout=120)
        assert res.returncode == 2 and message in res.stderr, (extra, res.stderr)
    assert not (tmp_path / "x").exists()


def test_run_config_preset_then_explicit_options(tmp_path):
    from fewshot.config import PRESETS

    cfg = t5.run_config("cpu", {"lr": 2e-4, "max_eval": 50}, "ce+punce-est", 20, 3, tmp_path / "r")
    assert cfg.max_steps == PRESETS["cpu"]["max_steps"] and cfg.batch_labeled == PRESETS["cpu"]["batch_labeled"]
    assert cfg.lr == 2e-4 and cfg.max_eval == 50 and cfg.preset == "cpu"
    assert cfg.objective == "ce+punce" and cfg.estimate_prior is True and cfg.n_labeled == 20 and cfg.seed == 3
    # a missing folder starts a new run, an interrupted one continues
    assert cfg.eval_every == cfg.max_steps and cfg.resume is True
    assert t5.run_config("cpu", {"max_steps": 7}, "ce+punce", 20, 0, tmp_path / "r").estimate_prior is False
    assert t5.run_config("cpu", {"max_steps": 7}, "ce", 20, 0, tmp_path / "r").max_steps == 7
    assert t5.run_config(None, {"eval_every": 5}, "ce", 20, 0, tmp_path / "r").eval_every == 5
    paper = t5.run_config("paper", {}, "probe", 100, 0, tmp_path / "r")
    assert paper.objective == "probe" and paper.max_steps == PRESETS["paper"]["max_steps"]


def test_an_option_no_method_of_the_grid_reads_is_refused(tmp_path):
    """`--methods probe ce --set lam=0.9` ran every run at the preset's lam and headed the table "lam 0.9"."""
    with pytest.raises(ValueError, match=r"lam \(--set or the option\): read by none of --methods probe ce"):
        t5.main(["--methods", "probe", "ce", "--set", "lam=0.9", "--out", str(tmp_path / "g")])
    assert not (tmp_path / "g").exists()


def test_a_grids_options_reach_only_the_methods_that_read_them(tmp_path):
    """A run refuses options its objective does not read (a probe's --lr, a ce run's --lam): the grid leaves them at
    the preset's values for those methods, so their commands parse, and a finished baseline made when the grid still
    passed them (recorded, unused) still counts."""
    from fewshot.config import PRESETS, from_cli
    from fewshot.grids import refuse_other_finished_run
    from fewshot.run import recorded_config
    from shared_losses.training.runtime import write_json_atomic

    given = {"lr": 2e-4, "lam": 0.9, "max_steps": 7, "max_eval": 50}
    for method in ("probe", "setfit", "ce", "ce+scl", "ce+punce"):
        cfg = t5.run_config("cpu", given, method, 20, 0, tmp_path / method)
        parsed = from_cli(t5.train_command("cpu", cfg)[3:])  # the run's own parse: nothing refused
        assert parsed.objective == cfg.objective and parsed.max_eval == 50
        trains = method not in ("probe", "setfit")
        assert (cfg.lr, cfg.max_steps) == ((2e-4, 7) if trains else (PRESETS["cpu"]["lr"], PRESETS["cpu"]["max_steps"]))
        assert cfg.lam == (0.9 if method in ("ce+scl", "ce+punce") else PRESETS["cpu"]["lam"])
    probe = t5.run_config("cpu", given, "probe", 20, 0, tmp_path / "old")
    old = {**recorded_config(probe), "lr": 2e-4, "lam": 0.9, "max_steps": 7, "eval_every": 7}  # as passed before
    (tmp_path / "old").mkdir()
    write_json_atomic(tmp_path / "old/config.json", old)
    write_json_atomic(tmp_path / "old/metrics.json", {"accuracy": 70.0})
    refuse_other_finished_run(tmp_path / "old", probe)  # counted: those options did not shape it
    write_json_atomic(tmp_path / "old/config.json", {**old, "max_length": 32})
    with pytest.raises(ValueError, match="max_length"):  # what a probe reads still counts
        refuse_other_finished_run(tmp_path / "old", probe)
    assert t5.run_config("cpu", given, "probe", 20, 0, tmp_path / "r").eval_every == PRESETS["cpu"].get(
        "eval_every", 50)


# ------------------------------------------------------------------------------------ aggregation (fake runs)

ACC = {  # method -> N -> seed -> accuracy
    "probe": {20: {0: 70.0, 1: 72.0, 2: 68.0}, 100: {0: 80.0, 1: 81.0, 2: 82.0}},
    "ce": {20: {0: 75.0, 1: 74.0, 2: 77.0}, 100: {0: 85.0, 1: 86.0, 2: 84.0}},
    "ce+punce": {20: {0: 78.0, 1: 76.0, 2: 80.0}, 100: {0: 87.0, 1: 86.0}},  # seed 2 at N=100 missing
    "ce+punce-est": {20: {0: 77.0, 1: 77.0, 2: 79.0}, 100: {0: 86.0, 1: 86.5, 2: 85.0}},
}
MAJ = {20: {0: 55.0, 1: 56.0, 2: 54.0}, 100: {0: 55.5, 1: 55.5, 2: 55.5}}


def fake_runs(out, preset="cpu", overrides=None, acc=ACC, maj=MAJ):
    """metrics.json and config.json as fewshot.train writes them, for each (method, N, seed) in ``acc``."""
    for m, by_n in acc.items():
        for n, by_s in by_n.items():
            for s, a in by_s.items():
                folder = t5.run_dir(out, m, n, s)
                cfg = t5.run_config(preset, overrides or {}, m, n, s, folder)
                folder.mkdir(parents=True)
                prior = 0.5 + 0.01 * s + (0.03 if m == "ce+punce-est" else 0.0)
                source = "elkan-noto" if m == "ce+punce-est" else "exact"
                (folder / "config.json").write_text(json.dumps(recorded_config(cfg) | {"prior_used": prior,
                                                                                       "prior_source": source}))
                (folder / "metrics.json").write_text(json.dumps({
                    "eval_accuracy": a, "majority_accuracy": maj[n][s], "labeled_majority_accuracy": 50.0,
                    "train_seconds": 10.0 + s, "prior": prior, "prior_source": source, "n_eval": 200,
                    "objective": cfg.objective, "seed": s, "n_labeled": n}))


def test_aggregate_fake_runs(tmp_path):
    fake_runs(tmp_path)
    agg = t5.aggregate(tmp_path, list(t5.METHODS), [20, 100], [0, 1, 2])
    res = agg["results"]
    assert res["majority"][20]["per_seed"] == MAJ[20]  # read from the runs of each (N, seed)
    assert res["majority"][20]["mean"] == pytest.approx(55.0) and res["majority"][20]["std"] == pytest.approx(1.0)
    assert res["ce+scl"] == {}  # never ran
    assert res["ce"][20]["mean"] == pytest.approx(np.mean([75, 74, 77]))
    assert res["ce"][20]["std"] == pytest.approx(np.std([75, 74, 77], ddof=1))
    assert res["ce+punce"][100]["n_runs"] == 2 and res["ce+punce"][100]["per_seed"] == {0: 87.0, 1: 86.0}
    assert res["ce"][20]["train_seconds_mean"] == pytest.approx(11.0)
    pairs = {(p["n_labeled"], p["a"], p["b"]): p for p in agg["paired"]}
    # ce+punce against every other method, ce+punce-est against the rest (ce+punce once, not twice)
    assert set(pairs) == {
        (n, "ce+punce", b) for n in (20, 100) for b in ("majority", "probe", "ce", "ce+punce-est")} | {
        (n, "ce+punce-est", b) for n in (20, 100) for b in ("majority", "probe", "ce")}
    p = pairs[(20, "ce+punce", "ce")]
    assert p["diffs"] == pytest.approx([3.0, 2.0, 3.0]) and p["wins"] == 3
    p = pairs[(100, "ce+punce", "ce")]  # only the seeds both ran
    assert p["seeds"] == [0, 1] and p["diffs"] == pytest.approx([2.0, 0.0]) and p["ties"] == 1
    assert pairs[(20, "ce+punce", "majority")]["diffs"] == pytest.approx([23.0, 20.0, 26.0])
    assert agg["warnings"] == []


def test_majority_only_from_the_runs_of_that_n_and_seed(tmp_path):
    fake_runs(tmp_path, acc={"ce": {20: {0: 70.0}}, "probe": {20: {1: 60.0}}})
    agg = t5.aggregate(tmp_path, ["majority", "ce", "probe"], [20], [0, 1, 2])
    assert agg["results"]["majority"][20]["per_seed"] == {0: 55.0, 1: 56.0}  # seed 2: no run, no majority
    # disagreeing majority rates (they are scored on the same rows) are reported
    fake_runs(tmp_path / "b", acc={"ce": {20: {0: 70.0}}})
    fake_runs(tmp_path / "b", acc={"probe": {20: {0: 60.0}}}, maj={20: {0: 60.0}})
    agg = t5.aggregate(tmp_path / "b", ["majority", "ce", "probe"], [20], [0])
    assert agg["warnings"] and "disagree" in agg["warnings"][0]


@pytest.mark.slow  # runs scripts/fewshot_table5.py in a subprocess
def test_aggregate_only_writes_md_json_png(tmp_path):
    fake_runs(tmp_path, overrides={"lr": 2e-4, "dataset": "drugreview", "encoder": "minilm", "pooling": "mean"})
    cmd = [sys.executable, str(SCRIPT), "--aggregate-only", "--preset", "cpu", "--dataset", "drugreview",
           "--encoder", "minilm", "--pooling", "mean", "--ns", "20", "100", "--seeds", "0", "1", "2",
           "--set", "lr=2e-4", "--out", str(tmp_path)]
    res = warm.run(cmd, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "table5.md").read_text()
    assert md.strip() in res.stdout
    assert "drugreview" in md and "minilm" in md and "Preset cpu" in md and "40 steps" in md and "U = 500" in md
    assert "lr 0.0002" in md and "DEVELOPMENT" not in md
    assert "| 20 | 55.00±1.00 | 70.00±2.00 | 75.33±1.53 | — | 78.00±2.00 | 77.67±1.15 |" in md
    assert "86.50±0.71 (2 runs)" in md
    assert "| 20 | ce+punce − ce | 3 | +3.00, +2.00, +3.00 | +2.67 |" in md
    data = json.loads((tmp_path / "table5.json").read_text())
    assert data["methods"] == t5.DEFAULT_METHODS and data["header"]["preset"] == "cpu"
    assert data["header"]["max_steps"] == 40
    assert data["results"]["ce"]["20"]["per_seed"] == {"0": 75.0, "1": 74.0, "2": 77.0}
    pair = next(p for p in data["paired"] if (p["n_labeled"], p["a"], p["b"]) == (20, "ce+punce", "ce"))
    assert pair["mean"] == pytest.approx(8 / 3) and len(pair["t_ci"]) == 2 and len(pair["bootstrap_ci"]) == 2
    png = (tmp_path / "table5.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
    # the same finished runs with other options are refused, nothing rewritten
    (tmp_path / "table5.md").unlink()
    res = warm.run([a if a != "lr=2e-4" else "lr=3e-4" for a in cmd], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "lr: 0.0002 -> 0.0003" in res.stderr and not (tmp_path / "table5.md").exists()
    res = warm.run([a for a in cmd if a not in ("--preset", "cpu")], capture_output=True, text=True, timeout=300)
    assert res.returncode != 0 and "preset: 'cpu' -> None" in res.stderr


@pytest.mark.slow  # runs scripts/fewshot_table5.py in a subprocess
def test_dev_split_header_is_loud(tmp_path):
    fake_runs(tmp_path, acc={"ce": {20: {0: 70.0, 1: 71.0}}, "ce+punce": {20: {0: 72.0, 1: 70.5}}},
              overrides={"eval_split": "dev", "dev_fraction": 0.25})
    res = warm.run([sys.executable, str(SCRIPT), "--aggregate-only", "--preset", "cpu", "--eval-split", "dev",
                          "--dev-fraction", "0.25", "--methods", "majority", "ce", "ce+punce", "--ns", "20",
                          "--seeds", "0", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    md = (tmp_path / "table5.md").read_text()
    assert md.startswith("# DEVELOPMENT-SPLIT sweep") and "**DEVELOPMENT split** (0.25 of the training pool" in md
    assert "| 20 | ce+punce − ce | 2 | +2.00, -0.50 | +0.75 |" in md and "1/2" in md
    assert (tmp_path / "table5.png").exists()


# ------------------------------------------------------------------------------------ real runs (tiny encoder)

@pytest.mark.slow  # the sweep end to end, trainings in subprocesses
def test_sweep_end_to_end_tiny(tiny_encoder, easy_task, tmp_path):
    train, dev = easy_task
    out = tmp_path / "sweep"
    cmd = [sys.executable, str(SCRIPT), "--preset", "cpu", "--encoder", tiny_encoder, "--dataset", train,
           "--eval-file", dev, "--methods", "majority", "probe", "ce", "ce+punce", "ce+punce-est", "--ns", "20",
           "--seeds", "0", "1",
           "--max-steps", "2", "--n-unlabeled", "20", "--pooling", "mean", "--set", "max_length=16",
           "--set", "batch_unlabeled=8", "--out", str(out)]
    res = warm.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    progress = [line for line in res.stdout.splitlines() if line.startswith("[")]
    assert len(progress) == 8 and progress[0] == "[1/8] done: probe N=20 seed=0 (in progress 0, failed 0)"
    assert "  probe N=20 seed=0: acc " in res.stdout  # each run's accuracy as it finishes
    assert "  ce+punce N=20 seed=1: acc " in res.stdout and "| 20 |" in res.stdout
    assert f"results in {out}: table5.md, table5.json, table5.png" in res.stdout  # where to look, in one line
    assert (out / "ce+punce" / "N20" / "seed1.log").exists()  # each run's output beside its folder
    assert sorted(p.relative_to(out).parts[0] for p in out.glob("*/N*/seed*/metrics.json")) == \
        ["ce"] * 2 + ["ce+punce"] * 2 + ["ce+punce-est"] * 2 + ["probe"] * 2
    cfg = json.loads((out / "ce+punce/N20/seed1/config.json").read_text())
    assert (cfg["preset"], cfg["max_steps"], cfg["lr"], cfg["batch_unlabeled"], cfg["max_length"]) == (
        "cpu", 2, 5e-5, 8, 16)
    ce = json.loads((out / "ce/N20/seed1/config.json").read_text())  # ce draws no unlabeled batch: the preset's
    assert (ce["max_steps"], ce["batch_unlabeled"], ce["max_length"]) == (2, 16, 16)
    data = json.loads((out / "table5.json").read_text())
    assert data["results"]["majority"]["20"]["per_seed"] == {"0": 50.0, "1": 50.0}  # the balanced easy task
    for m in ("probe", "ce", "ce+punce", "ce+punce-est"):
        assert set(data["results"][m]["20"]["per_seed"]) == {"0", "1"}
    assert set(data["results"]["ce+punce"]["20"]["prior_source"].values()) == {"exact"}
    assert set(data["results"]["ce+punce-est"]["20"]["prior_source"].values()) == {"elkan-noto"}
    assert json.loads((out / "ce+punce-est/N20/seed0/config.json").read_text())["estimate_prior"] is True
    assert {(p["a"], p["b"]) for p in data["paired"]} == {
        ("ce+punce", b) for b in ("majority", "probe", "ce", "ce+punce-est")} | {
        ("ce+punce-est", b) for b in ("majority", "probe", "ce")}
    assert (out / "table5.png").exists() and (out / "table5.md").exists()
    again = warm.run(cmd, capture_output=True, text=True, timeout=600, check=True)  # finished runs are skipped
    assert not any(line.startswith("[") for line in again.stdout.splitlines())
    assert "nothing to run: the grid's 8 runs finished earlier" in again.stdout


@pytest.mark.slow  # runs a benchmark script in a subprocess
def test_bench_protocol_json(tiny_encoder, easy_task):
    train, dev = easy_task
    cmd = [sys.executable, str(ROOT / "scripts/bench_fewshot.py"), "--protocol", "--encoder", tiny_encoder,
           "--dataset", train, "--eval-file", dev, "--n-labeled", "10", "--n-unlabeled", "20", "--max-steps", "2",
           "--set", "max_length=16", "--json"]
    res = warm.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["method"] for r in rows] == ["probe", "ce", "ce+scl", "ce+punce"]
    ce = next(r for r in rows if r["method"] == "ce")
    assert ce["time_vs_ce"] == pytest.approx(1.0)
    for r in rows:
        assert r["wall_s"] > 0 and r["time_vs_ce"] == pytest.approx(r["wall_s"] / ce["wall_s"], rel=1e-2)
        assert r["preset"] == "cpu" and r["n_labeled"] == 10 and 0 <= r["eval_accuracy"] <= 100
        assert r["steps"] == (0 if r["method"] == "probe" else 2)


# ------------------------------------------------------------------------------------ checks before the first run

T5_BASE = ["--preset", "cpu", "--encoder", "minilm", "--pooling", "mean", "--dataset", "drugreview", "--methods", "ce",
           "--max-steps", "2", "--n-unlabeled", "24"]


def test_an_n_larger_than_a_named_sets_training_set_is_refused_before_any_run(tmp_path, capsys):
    """drugreview's training set has 546 examples: every N=1000 run of the default --ns failed after launch ("too few
    examples" in its log). The named sets shipped with the suite are read (in a moment) and the largest N checked."""
    with pytest.raises(ValueError, match=r"^--ns 1000 does not fit --dataset drugreview: its training set has 546 "
                                         r"examples, too few for 1000 labeled \+ 24 unlabeled; use N of at most 522 "
                                         r"with --n-unlabeled 24"):
        t5.main([*T5_BASE, "--ns", "20", "1000", "--seeds", "0", "--out", str(tmp_path / "out")])
    with pytest.raises(ValueError, match=r"^--ns 400 does not fit --dataset drugreview: its training set has 546 "
                                         r"examples, 382 left after the development split \(--dev-fraction 0.3\)"):
        t5.main([*T5_BASE, "--ns", "400", "--seeds", "0", "--eval-split", "dev", "--dev-fraction", "0.3",
                 "--out", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists() and "runs to do" not in capsys.readouterr().out
    cfg = t5.run_config("cpu", {"dataset": "reuters", "n_unlabeled": 0}, "ce", 20, 0, tmp_path / "r")
    t5.check_data(cfg, [20, 346])  # reuters: 346 examples, all of them may be labeled
    with pytest.raises(ValueError, match="--ns 347 does not fit --dataset reuters: its training set has 346"):
        t5.check_data(cfg, [347])


def test_bad_options_are_one_error_line(capsys, monkeypatch):
    from shared_losses.training.cli import run_cli

    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    for argv, message in ((["--bogus"], "error: unrecognized arguments: --bogus"),
                          (["--ns", "x"], "error: argument --ns: invalid int value: 'x'"),
                          (["--set", "nope=1", "--aggregate-only"], "error: --set nope: FewShotConfig has no field")):
        with pytest.raises(SystemExit) as exit_:
            run_cli(lambda: t5.main(argv))
        err = capsys.readouterr().err
        assert exit_.value.code == 2 and len(err.splitlines()) == 1 and err.startswith(message), err
        assert "--help)" in err and "usage:" not in err


def test_a_grid_point_given_twice_is_one_column_and_one_run(tmp_path, capsys):
    fake_runs(tmp_path, overrides={"dataset": "drugreview", "encoder": "minilm", "pooling": "mean"},
              acc={"ce": {20: {0: 70.0}}})
    assert t5.main(["--preset", "cpu", "--encoder", "minilm", "--pooling", "mean", "--dataset", "drugreview",
                    "--methods", "ce", "ce", "--ns", "20", "20", "--seeds", "0", "0", "--aggregate-only",
                    "--out", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "| N | method | seed 0 | mean train s |" in out and "seed 0 | seed 0" not in out
    assert out.count("| 20 | ce |") == 1
    assert "note: given twice, run once: --methods ce, --ns 20, --seeds 0" in err


def test_a_second_grid_on_a_busy_out_and_an_out_that_cannot_be_made_are_refused_before_any_run(tmp_path, capsys):
    import subprocess

    from shared_losses.training.sweep import SweepError

    code = ("import sys, time\nfrom shared_losses.training.sweep import grid_lock\nwith grid_lock(sys.argv[1]):\n"
            "    print('held', flush=True)\n    time.sleep(300)\n")
    holder = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "grid")], cwd=ROOT, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'grid'} is in use by another grid still running "
                                             rf"\(pid {holder.pid} "):
            t5.main([*T5_BASE, "--ns", "20", "--seeds", "0", "--out", str(tmp_path / "grid")])
    finally:
        holder.kill()
        holder.wait()
    (tmp_path / "file").write_text("")
    with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'file' / 'x'}: cannot make the folder"):
        t5.main([*T5_BASE, "--ns", "20", "--seeds", "0", "--out", str(tmp_path / "file" / "x")])
    assert "runs to do" not in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == [".grid.lock"]  # the killed holder's, no run


def test_the_plot_shows_ties_no_whisker_for_one_seed_and_says_when_nothing_finished(tmp_path, monkeypatch):
    """A probe looked at table5.png: "(0/2 wins)" where the table says "0/2, 1 tied", one seed drawn with a whisker
    of 0, and a grid whose runs all failed drew an empty legend on a 0-1 axis labelled in %."""
    import matplotlib.pyplot as plt

    figs = []
    monkeypatch.setattr(plt, "close", figs.append)
    header = {"eval_split": "test", "dataset": "d", "encoder": "e", "preset": "cpu", "max_steps": 2, "n_unlabeled": 5}
    one = {"mean": 70.0, "std": None, "per_seed": {0: 70.0}}
    agg = {"results": {"ce+punce": {20: one}, "ce": {20: {"mean": 71.0, "std": None, "per_seed": {0: 71.0}}}},
           "paired": [{"n_labeled": 20, "a": "ce+punce", "b": "ce", "mean": 0.0, "t_ci": None, "wins": 0,
                       "n_seeds": 2, "ties": 1}]}
    assert t5.plot(tmp_path / "t.png", header, agg, ["ce+punce", "ce"], [20])
    left, right = figs[-1].axes[:2]
    assert [t.get_text() for t in right.get_yticklabels()] == ["N=20 vs ce (0/2 wins, 1 tied)"]
    segments = [seg for c in left.containers for seg in c.lines[2][0].get_segments()]
    assert not [seg for seg in segments if len(seg) and not np.isnan(seg).any()]
    assert t5.plot(tmp_path / "none.png", header, {"results": {"ce+punce": {}, "ce": {}}, "paired": []},
                   ["ce+punce", "ce"], [20])
    left = figs[-1].axes[0]
    assert left.get_legend() is None and left.get_ylim() == (0.0, 100.0)
    assert "no finished runs" in [t.get_text() for t in left.texts]
