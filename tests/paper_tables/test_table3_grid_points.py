"""paper_tables.table3 and scripts/curl_table3.py: one folder per objective whatever its spelling, every grid point
run once, a (task, objective, seed) counted once in the tables, and one grid at a time on an --out (no training:
hand-made run folders, and grids refused before their first run)."""

import json
import sys
import warnings
from pathlib import Path

import pytest

from paper_tables import table3 as t3
from tests.shared_losses.test_sweep import _hold_lock  # another grid, still running

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

DEBIASED = "debiased τ⁺=0.05, M=1"


def test_spellings_of_one_objective_share_one_folder_and_the_usual_names_stay():
    for spec in ("curl", "none", "debiased:0.05:1", "debiased:0.1:2", "debiased:0.01:1", "hard:0.1:1:1", "cpc:0.1"):
        assert t3.objective_folder(spec) == spec.replace(":", "_")  # earlier grids' folders are still found
    for spec in ("debiased:0.050:1", "debiased:5e-2:1", "debiased:.05:01"):
        assert t3.objective_folder(spec) == "debiased_0.05_1"
    assert t3.objective_folder("hard:0.10:1:1.0") == "hard_0.1_1_1"


def test_a_grid_point_given_twice_is_one_run(tmp_path):
    args = t3.Args(out=str(tmp_path), tasks=["cartpole-swingup", "cartpole-swingup"],
                   objectives=["curl", "debiased:0.05:1", "debiased:0.050:1", "debiased:5e-2:1", "curl"],
                   seeds=[1, 0, 1], env_steps=20, batch_size=8)
    outs = [out for out, _ in t3.commands(args)]
    assert [o.relative_to(tmp_path).as_posix() for o in outs] == [
        "cartpole-swingup/curl/seed1", "cartpole-swingup/curl/seed0",
        "cartpole-swingup/debiased_0.05_1/seed1", "cartpole-swingup/debiased_0.05_1/seed0"]
    _, dropped = t3.grid_points(args)
    assert dropped == ["--tasks cartpole-swingup", "--objectives debiased:0.050:1 (same settings as debiased:0.05:1)",
                       "--objectives debiased:5e-2:1 (same settings as debiased:0.05:1)", "--objectives curl",
                       "--seeds 1"]


def fake_run(root, folder, seed, returns, aux="debiased", tau=0.05, m=1, task="cartpole-swingup"):
    d = root / task / folder / f"seed{seed}"
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({"task": task, "aux": aux, "tau_plus": tau, "positives": m,
                                               "beta": 1.0, "seed": seed, "update": "official"}))
    (d / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n" + "".join(
        f"{(i + 1) * 50000},0,{r},0\n" for i, r in enumerate(returns)))
    return d


def test_two_folders_of_one_seed_are_counted_once_and_named(tmp_path):
    """An earlier grid's spellings (debiased_0.05_1, debiased_0.050_1) trained one seed twice: the table showed
    it as two seeds (std 0, no "(n=...)"). Counted once now, the run in the grid's own folder kept when both got
    as far, the one that got further otherwise; a warning names the folders."""
    fake_run(tmp_path, "debiased_0.05_1", 0, [100, 800])
    fake_run(tmp_path, "debiased_0.050_1", 0, [100, 800])
    fake_run(tmp_path, "debiased_5e-2_1", 0, [100, 800])
    fake_run(tmp_path, "debiased_0.05_1", 1, [100])  # not at 100k yet
    fake_run(tmp_path, "debiased_0.050_1", 1, [100, 600])  # got further: kept
    with pytest.warns(t3.TwoRunsOfOneSeed) as caught:
        md = t3.table3(tmp_path)
    assert f"| {DEBIASED} | 700±141 (n=2) |" in md.splitlines()  # 800 and 600: sample std
    texts = sorted(str(w.message) for w in caught)
    assert len(texts) == 2
    assert texts[0].startswith(f"cartpole-swingup, {DEBIASED}, seed 0: 3 runs under the grid's folder; the table "
                               f"counts {tmp_path / 'cartpole-swingup/debiased_0.05_1/seed0'} only")
    assert texts[1].startswith(f"cartpole-swingup, {DEBIASED}, seed 1: 2 runs under the grid's folder; the table "
                               f"counts {tmp_path / 'cartpole-swingup/debiased_0.050_1/seed1'} only")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert t3.final_scores(tmp_path)["cartpole-swingup"][DEBIASED] == {0: 800.0, 1: 600.0}
        assert len(t3.collect(tmp_path)) == 2


def test_curl_table3_warns_once_per_pair(tmp_path, capsys):
    import curl_table3

    fake_run(tmp_path, "debiased_0.05_1", 0, [100, 800])
    fake_run(tmp_path, "debiased_0.050_1", 0, [100, 800])
    fake_run(tmp_path, "curl", 0, [100, 700], aux="curl", tau=0.0)
    assert curl_table3.main(curl_table3.Args(out=str(tmp_path), aggregate_only=True)) == 0
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line]
    assert len(lines) == 1 and lines[0].startswith(f"warning: cartpole-swingup, {DEBIASED}, seed 0: 2 runs"), err
    assert f"| {DEBIASED} | 800 (n=1) |" in (tmp_path / "table3.md").read_text()


def test_a_second_grid_on_a_busy_out_is_refused_before_anything_starts(tmp_path, capsys):
    import curl_table3

    from shared_losses.training.sweep import SweepError

    args = curl_table3.Args(out=str(tmp_path / "grid"), tasks=["cartpole-swingup"], objectives=["curl"], seeds=[0],
                            env_steps=20, batch_size=8)
    holder = _hold_lock(tmp_path / "grid")
    try:
        with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'grid'} is in use by another grid still running "
                                             rf"\(pid {holder.pid} on .*: wait for it to end, or use another --out"):
            curl_table3.main(args)
        assert "runs to do" not in capsys.readouterr().out
        assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == [".grid.lock"]  # the holder's, nothing else
        curl_table3.main(curl_table3.Args(out=str(tmp_path / "grid"), tasks=["cartpole-swingup"], dry_run=True))
    finally:
        holder.kill()
        holder.wait()
    # --out that cannot be made: one line naming it, before the first run (it used to fail in the runner's mkdir)
    (tmp_path / "file").write_text("")
    with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'file' / 'out'}: cannot make the folder"):
        curl_table3.main(curl_table3.Args(out=str(tmp_path / "file" / "out"), tasks=["cartpole-swingup"],
                                          objectives=["curl"], seeds=[0], env_steps=20, batch_size=8))
    assert "runs to do" not in capsys.readouterr().out


def test_curves_give_an_objective_one_colour_in_every_figure_and_name_the_band(tmp_path, monkeypatch):
    """A probe looked at the committed curves: CURL blue in one figure and orange in the next (the colour cycle in
    label order), and nothing said what the band was (the sample std, the table's summary cells')."""
    from matplotlib.figure import Figure

    saved = []
    monkeypatch.setattr(Figure, "savefig", lambda self, *a, **k: saved.append(self))
    for root, objectives in ((tmp_path / "a", ("curl", "debiased")), (tmp_path / "b", ("none", "debiased", "curl"))):
        for seed in (0, 1):
            for aux in objectives:
                fake_run(root, aux, seed, [100 + seed, 200 * (seed + 1)], aux=aux)
            fake_run(root, "debiased_0.05_2", seed, [150, 300 + seed], m=2)
        t3.plot_grid(root, root / "curves.png")
    colours = []
    for fig in saved:
        ax = fig.axes[0]
        lines = {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}
        colours.append({k: lines[k].get_color() for k in lines})
        legend = [t.get_text() for t in ax.get_legend().get_texts()]
        assert "band: ± std over seeds (sample)" in legend
        assert lines[f"{DEBIASED} (2 seeds)"].get_marker() != lines["debiased τ⁺=0.05, M=2 (2 seeds)"].get_marker()
    shared = set(colours[0]) & set(colours[1])
    assert len(shared) == 3 and all(colours[0][k] == colours[1][k] for k in shared)
