"""paper_tables.table3_slices: the slices' run folders read, tabulated, plotted and imported (hand-made folders, no
training)."""

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest

from paper_tables import table3_slices as slices
from rl_curl import objectives
from shared_losses.training.stats import paired_stats

DEBIASED = "debiased τ⁺=0.05, M=1"


def write_run(root, objective="curl", seed=0, score=850.0, task="cartpole-swingup", reached=100_000,
              finished=None, date="2026-11-27", suffix="", evaluated=True, **extra):
    """A run folder as the slice driver writes it: slice.json, config.json (resolved as rl_curl writes it) and
    eval.csv with an evaluation every 10k steps up to ``reached``, rising linearly to ``score`` at 100k."""
    finished = reached >= 100_000 if finished is None else finished
    name = f"{task}__{objective.replace(':', '_')}__seed{seed}__H100__218da0f__{date}{suffix}"
    folder = root / name
    folder.mkdir(parents=True)
    info = {"task": task, "objective": objective, "seed": seed, "env_steps_target": 100_000,
            "env_steps_reached": reached, "finished": finished, "exit_code": 0 if finished else 124,
            "wall_seconds": 291.4, "env_steps_per_second": 343.2, "gpu": "NVIDIA H100 80GB HBM3",
            "commit": "218da0f0123456789", "date": date, "runs_together": 4, "batch_size": 512,
            "command": ["python", "-m", "rl_curl.train"], **extra}
    (folder / "slice.json").write_text(json.dumps(info))
    cfg = {"task": task, "seed": seed, "encoder_tanh": True, "update": "official", "batch_size": 512,
           "env_steps": 100_000, "action_repeat": 8, **slices.spec_config(objective)}
    (folder / "config.json").write_text(json.dumps(cfg))
    if evaluated:
        rows = ["env_step,episode,eval_return_mean,eval_return_std"]
        rows += [f"{s},{s // 1000},{score * s / 100_000!r},1.5" for s in range(10_000, reached + 1, 10_000)]
        (folder / "eval.csv").write_text("\n".join(rows) + "\n")
    return folder


def line_of(text, start):
    """The first line of ``text`` starting with ``start``."""
    return next(line for line in text.splitlines() if line.startswith(start))


def test_paper_numbers_are_keyed_by_the_row_labels_and_appear(tmp_path):
    assert slices.PAPER["cartpole-swingup"]["biased (CURL)"] == [
        {"source": "DCL Table 3", "mean": 850.0, "std": 20.0}, {"source": "CURL paper (100k)", "mean": 582.0,
                                                                 "std": 146.0}]
    assert set(slices.PAPER) == {"finger-spin", "cartpole-swingup", "reacher-easy", "cheetah-run", "walker-walk",
                                 "ball_in_cup-catch"}
    assert list(slices.PAPER["walker-walk"]) == ["biased (CURL)", "debiased τ⁺=0.01, M=1", DEBIASED,
                                                 "debiased τ⁺=0.1, M=1", "debiased τ⁺=0.01, M=2",
                                                 "debiased τ⁺=0.1, M=2"]
    assert slices.paper_number("walker-walk", "debiased τ⁺=0.01, M=2", "DCL Table 3")["mean"] == 746
    assert slices.paper_number("cartpole-swingup", DEBIASED, "CURL paper (100k)") is None
    write_run(tmp_path, "curl", 0, 840.0)
    write_run(tmp_path, "debiased:0.05:1", 0, 860.0)
    text = slices.tabulate(tmp_path)
    assert line_of(text, "| biased (CURL) | 1 |") == "| biased (CURL) | 1 | 840.00 ± – | 850 ± 20 | 582 ± 146 |"
    assert line_of(text, f"| {DEBIASED} | 1 |") == f"| {DEBIASED} | 1 | 860.00 ± – | 866 ± 7 | – |"
    # DCL's other rows are shown (n = 0) so that the paper's numbers and the missing cells are visible
    assert "| debiased τ⁺=0.1, M=2 | 0 | – | 864 ± 6 | – |" in text


def test_a_cell_of_three_finished_seeds(tmp_path):
    for seed, score in enumerate([840.0, 850.0, 860.0]):
        write_run(tmp_path, "curl", seed, score)
    runs = slices.read_runs(tmp_path)
    assert [r["score"] for r in runs] == [840.0, 850.0, 860.0]
    assert all(r["finished"] and r["label"] == "biased (CURL)" and r["reached"] == 100_000 for r in runs)
    assert runs[0]["last_eval"] == (100_000, 840.0) and len(runs[0]["steps"]) == 10
    text = slices.tabulate(tmp_path)
    assert line_of(text, "| biased (CURL) | 3 |").startswith("| biased (CURL) | 3 | 850.00 ± 10.00 |")
    assert "| seed 0 | seed 1 | seed 2 |" in text and "| biased (CURL) | 840.00 | 850.00 | 860.00 |" in text
    assert "**Under 5 finished seeds, of the rows with runs** (the others have none): biased (CURL) (3)." in text
    assert text.startswith("# DCL Table 3 on GPU slices: score at 100,000 environment steps")
    assert f"`python scripts/table3_gpu.py tabulate {tmp_path}`" in text
    assert "| biased (CURL) | 3 (under 5) |" in text and "have fewer than 5 finished seeds" in text
    assert "No biased (CURL) run" not in text and "No other objective than biased (CURL)" in text


def test_paired_differences_are_paired_stats_and_skip_missing_and_unfinished_seeds(tmp_path):
    curl = {0: 840.0, 1: 850.0, 2: 860.0, 4: 830.0}
    deb = {0: 860.0, 1: 855.0, 3: 870.0, 4: 845.0}
    for seed, score in curl.items():
        write_run(tmp_path, "curl", seed, score)
    write_run(tmp_path, "curl", 3, 800.0, reached=73_000)  # deadline hit: reached 73k, last eval at 70k
    for seed, score in deb.items():
        write_run(tmp_path, "debiased:0.05:1", seed, score)  # seed 2: no folder
    runs = {(r["objective"], r["seed"]): r for r in slices.read_runs(tmp_path)}
    cut = runs[("curl", 3)]
    assert not cut["finished"] and cut["score"] is None and cut["reached"] == 73_000
    assert cut["last_eval"] == (70_000, pytest.approx(560.0))
    text = slices.tabulate(tmp_path)
    assert line_of(text, "| biased (CURL) | 4 |").startswith("| biased (CURL) | 4 | 845.00 ± 12.91 |")
    assert line_of(text, f"| {DEBIASED} | 4 |").startswith(f"| {DEBIASED} | 4 | 857.50 ± 10.41 |")
    assert line_of(text, "| biased (CURL) | 840.00") == (
        "| biased (CURL) | 840.00 | 850.00 | 860.00 | unfinished (reached 73,000; last eval 560.00 at 70,000) | "
        "830.00 |")
    assert line_of(text, f"| {DEBIASED} | 860.00") == f"| {DEBIASED} | 860.00 | 855.00 | missing | 870.00 | 845.00 |"
    st = paired_stats(deb, curl)  # the finished seeds: seed 3 of curl counts nowhere
    assert st["seeds"] == [0, 1, 4] and st["diffs"] == [20.0, 5.0, 15.0]
    row = line_of(text, f"| {DEBIASED} | 3 | 0 1 4 |")
    assert row == (f"| {DEBIASED} | 3 | 0 1 4 | +20.00, +5.00, +15.00 | {st['mean']:+.2f} ± {st['std']:.2f} | "
                   f"[{st['t_ci'][0]:+.2f}, {st['t_ci'][1]:+.2f}] | "
                   f"[{st['bootstrap_ci'][0]:+.2f}, {st['bootstrap_ci'][1]:+.2f}] | 3/0 |")
    assert line_of(text, "Not paired: ") == (
        f"Not paired: {DEBIASED} seed 2 ({DEBIASED} missing); "
        f"{DEBIASED} seed 3 (biased (CURL) unfinished (reached 73,000))")
    runs_line = line_of(text, f"| {cut['name']} |")
    assert "| curl | 3 | reached 73,000 | NVIDIA H100 80GB HBM3 | 218da0f | 2026-11-27 | 4.9 | 343.2 | 4 |" \
        in runs_line and "exit code 124" in runs_line


def test_a_seed_run_twice_uses_the_earliest_and_lists_the_other(tmp_path):
    late = write_run(tmp_path, "curl", 0, 900.0, date="2026-11-28")
    early = write_run(tmp_path, "curl", 0, 840.0, date="2026-11-27")
    write_run(tmp_path, "curl", 0, 100.0, date="2026-11-26", reached=30_000)  # an unfinished try: just listed
    write_run(tmp_path, "curl", 1, 860.0)
    text = slices.tabulate(tmp_path)
    assert line_of(text, "| biased (CURL) | 2 |").startswith("| biased (CURL) | 2 | 850.00 ± 14.14 |")
    assert "| biased (CURL) | 840.00 | 860.00 |" in text
    assert line_of(text, f"| {late.name} |").endswith(f"| not used: duplicate of seed 0 ({early.name} is used) |")
    assert line_of(text, f"| {early.name} |").endswith("| 4 | – |  |")  # runs together, GPU GiB (none), note
    assert "reached 30,000" in text and text.count("not used") == 1


def test_a_run_that_says_finished_without_the_final_evaluation_is_unfinished(tmp_path):
    folder = write_run(tmp_path, "curl", 0, 850.0, reached=90_000, finished=True)
    run, = slices.read_runs(tmp_path)
    assert not run["finished"] and run["score"] is None
    text = slices.tabulate(tmp_path)
    assert "slice.json says finished but eval.csv has no evaluation at 100,000" in line_of(text, f"| {folder.name}")
    assert "| biased (CURL) | 0 | – |" in text


def test_a_run_that_never_evaluated(tmp_path):
    write_run(tmp_path, "curl", 2, reached=4_000, evaluated=False)
    run, = slices.read_runs(tmp_path)
    assert not run["finished"] and run["last_eval"] is None and len(run["steps"]) == 0
    assert "unfinished (reached 4,000; no evaluation)" in slices.tabulate(tmp_path)


def test_empty_and_nonexistent_roots(tmp_path):
    (tmp_path / "not_a_run").mkdir()  # no slice.json: ignored
    assert slices.read_runs(tmp_path) == []
    text = slices.tabulate(tmp_path)
    assert "No runs yet" in text and "##" not in text
    with pytest.raises(FileNotFoundError, match="nowhere"):
        slices.read_runs(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError):
        slices.tabulate(tmp_path / "nowhere")


def test_damaged_slice_json_is_a_value_error_naming_the_file(tmp_path):
    folder = write_run(tmp_path, "curl", 0)
    (folder / "slice.json").write_text('{"task": "cartpole-swingup", ')
    with pytest.raises(ValueError, match=r"slice\.json is damaged") as err:
        slices.read_runs(tmp_path)
    assert str(folder / "slice.json") in str(err.value) and "\n" not in str(err.value)
    (folder / "slice.json").write_text(json.dumps({"task": "cartpole-swingup", "objective": "curl", "seed": 0}))
    with pytest.raises(ValueError, match="slice.json lacks env_steps_target, env_steps_reached, finished, date"):
        slices.read_runs(tmp_path)


def test_a_config_that_is_not_the_slices_run_is_refused(tmp_path):
    folder = write_run(tmp_path, "debiased:0.05:1", 0)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "tau_plus": 0.1}))
    with pytest.raises(ValueError, match=r"config\.json says tau_plus=0.1 but slice.json's objective is "
                                         r"'debiased:0.05:1'"):
        slices.read_runs(tmp_path)
    (folder / "config.json").unlink()  # without config.json the row comes from slice.json's objective
    assert slices.read_runs(tmp_path)[0]["label"] == DEBIASED


def test_other_tasks_come_after_dcls_in_their_order(tmp_path):
    write_run(tmp_path, "curl", 0, task="walker-walk")
    write_run(tmp_path, "curl", 0, task="cartpole-balance")
    write_run(tmp_path, "none", 0, task="cartpole-swingup")
    text = slices.tabulate(tmp_path)
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## cartpole-swingup", "## walker-walk", "## cartpole-balance"]
    assert "| objective | cartpole-swingup | walker-walk | cartpole-balance |" in text
    assert "| pixel SAC (no aux) | 1 (under 5) |  |  |" in text
    assert "No biased (CURL) run of this task: nothing to pair with." in text


def test_write_report_and_plot(tmp_path):
    (tmp_path / "slices").mkdir()  # records imported, no runs yet: an empty figure with a note
    md, png = slices.write_report(tmp_path)
    assert md == tmp_path / "table3_gpu.md" and png == tmp_path / "curves.png" and png.stat().st_size > 0
    for seed, score in enumerate([840.0, 850.0]):
        write_run(tmp_path, "curl", seed, score)
    write_run(tmp_path, "debiased:0.05:1", 0, 860.0)
    write_run(tmp_path, "debiased:0.05:1", 1, 0.0, reached=50_000)
    write_run(tmp_path, "curl", 0, 100.0, task="reacher-easy")
    md, png = slices.write_report(tmp_path)
    assert md.read_text(encoding="utf-8") == slices.tabulate(tmp_path)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(slices.read_runs(tmp_path)) == 5  # the report's files are not run folders
    from matplotlib.figure import Figure  # the legend says what the band is (a probe: nothing did)

    saved = []
    real = Figure.savefig
    Figure.savefig = lambda self, *a, **k: saved.append(self)
    try:
        slices.plot(tmp_path, tmp_path / "c.png")
    finally:
        Figure.savefig = real
    legends = [[t.get_text() for t in ax.get_legend().get_texts()] for ax in saved[0].axes if ax.get_legend()]
    assert all("band: ± sample std over finished seeds" in legend for legend in legends) and legends


# ---------------------------------------------------------------------------------------------- import_pack


def make_pack(path, src, names):
    with tarfile.open(path, "w:gz") as tar:
        for name in names:
            tar.add(src / name, arcname=name)
    return path


def add_member(path, info, data=b""):
    with tarfile.open(path, "w:gz") as tar:
        tar.addfile(info, io.BytesIO(data) if data else None)
    return path


def test_import_pack_round_trip(tmp_path):
    src = tmp_path / "slice_out"
    a, b = write_run(src, "curl", 0, 840.0), write_run(src, "debiased:0.05:1", 0, 860.0, reached=60_000)
    pack = make_pack(tmp_path / "slice.tar.gz", src, [a.name, b.name])
    into = tmp_path / "results"
    assert slices.import_pack(pack, into) == sorted([into / a.name, into / b.name])
    assert (into / a.name / "eval.csv").read_text() == (a / "eval.csv").read_text()
    assert [r["name"] for r in slices.read_runs(into)] == sorted([a.name, b.name])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results", "slice.tar.gz", "slice_out"]  # no temp left
    # again: the folders exist, nothing is written
    c = write_run(src, "curl", 1, 850.0)
    pack = make_pack(tmp_path / "again.tar.gz", src, [c.name, a.name])
    before = sorted(p.relative_to(into) for p in into.rglob("*"))
    with pytest.raises(ValueError, match=f"run folder {a.name} already exists in .*results; nothing imported"):
        slices.import_pack(pack, into)
    assert sorted(p.relative_to(into) for p in into.rglob("*")) == before and not (into / c.name).exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.tar.gz", "results", "slice.tar.gz", "slice_out"]


@pytest.mark.parametrize("filters", [True, False], ids=["python_with_filters", "python_3_11_2"])
def test_imported_files_get_the_data_filters_modes_with_or_without_extraction_filters(tmp_path, monkeypatch, filters):
    # Python 3.11.0-3.11.3 have no tarfile.data_filter (and extractall takes no filter=): the import must still
    # work there and unpack with the data filter's modes (no set-id / sticky / group-other write bits)
    if not filters:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
        plain = tarfile.TarFile.extractall

        def extractall(self, path=".", members=None, *, numeric_owner=False, **kw):  # 3.11.2's signature
            if kw:
                raise TypeError(f"TarFile.extractall() got an unexpected keyword argument {next(iter(kw))!r}")
            return plain(self, path, members, numeric_owner=numeric_owner)

        monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)
    src = tmp_path / "slice_out"
    a = write_run(src, "curl", 0, 840.0)
    modes = {"slice.json": 0o6777, "config.json": 0o4666, "eval.csv": 0o640}
    pack = tmp_path / "slice.tar.gz"
    with tarfile.open(pack, "w:gz") as tar:
        for info in [tar.gettarinfo(a, arcname=a.name)] + [tar.gettarinfo(a / n, arcname=f"{a.name}/{n}")
                                                           for n in modes]:
            if info.isfile():
                info.mode = modes[Path(info.name).name]
                with open(a / Path(info.name).name, "rb") as f:
                    tar.addfile(info, f)
            else:
                info.mode = 0o1777
                tar.addfile(info)
    into = tmp_path / "results"
    assert slices.import_pack(pack, into) == [into / a.name]
    got = {n: (into / a.name / n).stat().st_mode & 0o7777 for n in modes}
    assert got == {"slice.json": 0o755, "config.json": 0o644, "eval.csv": 0o640}
    assert not (into / a.name).stat().st_mode & 0o7022  # the folder: no sticky bit, no group / other write
    assert (into / a.name / "eval.csv").read_text() == (a / "eval.csv").read_text()


def test_import_pack_refuses_unsafe_members(tmp_path):
    into = tmp_path / "results"
    evil = tarfile.TarInfo("../evil/slice.json")
    evil.size = 2
    with pytest.raises(ValueError, match=r"'\.\./evil/slice\.json' is an absolute path or leaves the folder"):
        slices.import_pack(add_member(tmp_path / "evil.tar.gz", evil, b"{}"), into)
    link = tarfile.TarInfo("run/slice.json")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    with pytest.raises(ValueError, match="'run/slice.json' is not a regular file or folder"):
        slices.import_pack(add_member(tmp_path / "link.tar.gz", link), into)
    top = tarfile.TarInfo("slice.json")
    top.size = 2
    with pytest.raises(ValueError, match="'slice.json' is not inside a run folder"):
        slices.import_pack(add_member(tmp_path / "top.tar.gz", top, b"{}"), into)
    absolute = tarfile.TarInfo("/tmp/run/slice.json")
    absolute.size = 2
    with pytest.raises(ValueError, match="is an absolute path"):
        slices.import_pack(add_member(tmp_path / "abs.tar.gz", absolute, b"{}"), into)
    src = tmp_path / "src"
    bad = write_run(src, "curl", 0)
    (bad / "slice.json").write_text("not json")
    with pytest.raises(ValueError, match=f"{bad.name}/slice.json is damaged.*; nothing imported"):
        slices.import_pack(make_pack(tmp_path / "bad.tar.gz", src, [bad.name]), into)
    (src / "no_slice").mkdir()
    with pytest.raises(ValueError, match="run folder no_slice has no slice.json"):
        slices.import_pack(make_pack(tmp_path / "none.tar.gz", src, ["no_slice"]), into)
    (tmp_path / "plain.tar.gz").write_bytes(b"not a tarball")
    with pytest.raises(ValueError, match="not a readable tar archive"):
        slices.import_pack(tmp_path / "plain.tar.gz", into)
    assert not into.exists() and not (tmp_path / "evil").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results.import-")]


def test_labels_and_orders_match_the_objectives_table():
    cfg = slices.spec_config("debiased:0.1:2")
    assert objectives.label(cfg) == "debiased τ⁺=0.1, M=2" and slices.PAPER_ORDER[objectives.label(cfg)] == \
        objectives.order(cfg)
    assert np.isclose(slices.paper_number("finger-spin", "debiased τ⁺=0.1, M=2", "DCL Table 3")["std"], 24)


# ------------------------------------------------------------------------ a whole pack, every part of it hostile


def write_pack(folder, runs=(("curl", 0),), throughput=None, extra_records=()):
    """A pack folder as a slice writes it: table3_runs.tar.gz of the runs, throughput.json, slice.txt."""
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "src"
    names = [write_run(src, obj, seed).name for obj, seed in runs]
    if names:
        make_pack(folder / "table3_runs.tar.gz", src, names)
    meta = {"date": "2026-11-27", "gpu_tag": "H200", "commit": "b3b304f3c5f6", "gpu": "NVIDIA H200"}
    text = json.dumps(meta if throughput is None else throughput) if not isinstance(throughput, str) else throughput
    (folder / "throughput.json").write_text(text)
    (folder / "slice.txt").write_text("slice of 2026-11-27\n")
    for name in extra_records:
        (folder / name).write_text(f"{name}\n")
    return folder


def tree(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else None


def test_a_whole_pack_is_imported_with_its_records(tmp_path):
    pack = write_pack(tmp_path / "pack", runs=(("curl", 0), ("debiased:0.05:1", 0)),
                      extra_records=("dmon.txt", "update_bench.json", "notes.txt"))
    into = tmp_path / "results"
    new, records = slices.import_slice_pack(pack, into)
    assert len(new) == 2 and all((p / "slice.json").is_file() for p in new)
    assert [p.name for p in records] == ["2026-11-27__H200__b3b304f__throughput.json",
                                         "2026-11-27__H200__b3b304f__slice.txt",
                                         "2026-11-27__H200__b3b304f__update_bench.json",
                                         "2026-11-27__H200__b3b304f__dmon.txt"]  # notes.txt is not a record
    # another pack of that date, GPU and commit: numbered, never over the first
    meta = {"date": "2026-11-27", "gpu_tag": "H200", "commit": "b3b304f3c5f6", "runs": []}
    again = write_pack(tmp_path / "again", runs=(), throughput=meta)
    new2, records2 = slices.import_slice_pack(again, into, label="solo_defaults")
    assert new2 == [] and [p.name for p in records2] == ["2026-11-27__H200__b3b304f__solo_defaults__throughput.json",
                                                          "2026-11-27__H200__b3b304f__solo_defaults__slice.txt"]
    third = write_pack(tmp_path / "third", runs=(), throughput={**meta, "runs": [1]})
    new3, records3 = slices.import_slice_pack(third, into)
    assert records3[0].name == "2026-11-27__H200__b3b304f__2__throughput.json"


@pytest.mark.parametrize("throughput, message", [
    ({"date": "/some/dir/victim", "gpu_tag": "x", "commit": "y"}, "date = '/some/dir/victim' is not a date"),
    ({"date": "../../X", "gpu_tag": "x", "commit": "y"}, "is not a date"),
    ({"date": "2026-13-45", "gpu_tag": "x", "commit": "y"}, "is not a date"),
    ({"date": "2026-11-27", "gpu_tag": "../x", "commit": "y"}, "gpu_tag = '../x' is not a plain name"),
    ({"date": "2026-11-27", "gpu_tag": "H200", "commit": "a/../../b"}, "commit = 'a/../../b' is not a plain name"),
    ({"date": "2026-11-27", "gpu_tag": "H200", "commit": 7}, "commit = 7 is not a plain name"),
    ({"date": "2026-11-27", "commit": "abc"}, "gpu_tag = None"),
    ([1, 2], "holds a JSON list, not an object"),
    ("{not json", "throughput.json is damaged (not valid JSON"),
])
def test_a_hostile_throughput_record_is_refused_before_anything_is_written(tmp_path, throughput, message):
    pack = write_pack(tmp_path / "pack", throughput=throughput)
    victim = tmp_path / "some" / "dir"
    into = tmp_path / "results"
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        slices.import_slice_pack(pack, into)
    assert not into.exists() and not victim.exists()  # no empty results folder, nothing outside it
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results.import-")]


def test_hostile_archives_are_refused_whole(tmp_path):
    into = tmp_path / "results"
    into.mkdir()
    write_run(into, "curl", 5)
    before = tree(into)
    # truncated archive: refused naming it, not an EOFError traceback
    pack = write_pack(tmp_path / "trunc", runs=(("curl", 0), ("curl", 1), ("curl", 2)))
    data = (pack / "table3_runs.tar.gz").read_bytes()
    (pack / "table3_runs.tar.gz").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="table3_runs.tar.gz is truncated or damaged"):
        slices.import_slice_pack(pack, into)
    # a run folder named like the report's files
    src = tmp_path / "src"
    run = write_run(src, "curl", 0)
    for reserved in ("curves.png", "table3_gpu.md", "slices"):
        pack = tmp_path / f"reserved_{reserved}"
        write_pack(pack, runs=())
        with tarfile.open(pack / "table3_runs.tar.gz", "w:gz") as tar:
            tar.add(run, arcname=reserved)
        with pytest.raises(ValueError, match=f"run folder name '{reserved}' is not allowed"):
            slices.import_slice_pack(pack, into)
    # the same folder twice: the second copy would replace the first
    other = write_run(src, "curl", 1)
    pack = write_pack(tmp_path / "twice", runs=())
    with tarfile.open(pack / "table3_runs.tar.gz", "w:gz") as tar:
        tar.add(run, arcname=run.name)
        tar.add(other / "slice.json", arcname=f"{run.name}/slice.json")
    with pytest.raises(ValueError, match="appears twice in the archive"):
        slices.import_slice_pack(pack, into)
    # a good archive beside a damaged throughput.json: the runs are not moved in
    pack = write_pack(tmp_path / "late", runs=(("curl", 3),), throughput=[1])
    with pytest.raises(ValueError, match="not an object"):
        slices.import_slice_pack(pack, into)
    assert tree(into) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".results.import-")]


def test_a_pack_of_neither_runs_nor_records_and_a_results_path_that_is_a_file(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds neither table3_runs.tar.gz nor throughput.json"):
        slices.import_slice_pack(tmp_path / "empty", tmp_path / "results")
    with pytest.raises(FileNotFoundError, match="not found"):
        slices.import_slice_pack(tmp_path / "nothing", tmp_path / "results")
    pack = write_pack(tmp_path / "pack")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a folder"):
        slices.import_slice_pack(pack, tmp_path / "afile")
    assert (tmp_path / "afile").read_text() == "x"


def test_a_row_whose_runs_differ_in_settings_says_so(tmp_path):
    """Seeds of one row made with another batch size are named beside the row (the mean would hide it); fields a
    resumed run may change (CUDA graphs, threads) are not a difference."""
    write_run(tmp_path, seed=0, score=800.0)
    write_run(tmp_path, seed=1, score=810.0)
    md = slices.tabulate(tmp_path)
    assert "Settings differ" not in md
    for seed, extra in ((0, {"cuda_graphs": False, "torch_threads": 2}),
                        (1, {"cuda_graphs": True, "torch_threads": 1})):  # how a run ran: not a setting
        folder = tmp_path / f"cartpole-swingup__curl__seed{seed}__H100__218da0f__2026-11-27"
        cfg = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**cfg, **extra}))
    assert "Settings differ" not in slices.tabulate(tmp_path)
    folder = write_run(tmp_path, seed=2, score=820.0)  # made with another batch size
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "batch_size": 256}))
    folder = write_run(tmp_path, seed=3, score=830.0)  # its evaluations averaged 2 episodes
    (folder / "config.json").write_text(json.dumps({**cfg, "seed": 3, "eval_episodes": 2}))
    (tmp_path / "cartpole-swingup__curl__seed0__H100__218da0f__2026-11-27" / "config.json").write_text(json.dumps(
        {**json.loads((tmp_path / "cartpole-swingup__curl__seed0__H100__218da0f__2026-11-27" / "config.json")
                      .read_text()), "eval_episodes": 10}))
    md = slices.tabulate(tmp_path)
    line = line_of(md, "**Settings differ within a row**")
    assert "biased (CURL) seed 2 against seed 0: batch_size 256 against 512" in line and "seed 1" not in line
    assert "seed 3 against seed 0: eval_episodes 2 against 10" in line


# ------------------------------------------------- what an import creates, and what the pack may hold (F8, F9)


def test_a_refused_pack_creates_no_folder_and_a_failed_import_removes_only_those_it_created(tmp_path, monkeypatch):
    into = tmp_path / "imp" / "par" / "x" / "results"
    evil = tarfile.TarInfo("../escaped/slice.json")
    evil.size = 2
    pack = write_pack(tmp_path / "pack", runs=())
    add_member(pack / "table3_runs.tar.gz", evil, b"{}")
    with pytest.raises(ValueError, match="leaves the folder"):
        slices.import_slice_pack(pack, into)
    assert not (tmp_path / "imp").exists() and not (tmp_path / "escaped").exists()
    # a failure after the folders were made (a record that cannot be copied): they go again, those that were there stay
    (tmp_path / "imp").mkdir()
    (tmp_path / "imp" / "keep").write_text("x")
    plain = slices._copy_record

    def fail_second(source, target, copied):
        if copied:
            raise OSError("disk full")
        plain(source, target, copied)

    monkeypatch.setattr(slices, "_copy_record", fail_second)
    pack = write_pack(tmp_path / "good", runs=(("curl", 0),))
    with pytest.raises(ValueError, match=r"could not import .* \(disk full\); nothing imported"):
        slices.import_slice_pack(pack, into)
    assert tree(tmp_path / "imp") == ["keep"]
    assert not [p for p in (tmp_path / "imp").iterdir() if p.name.startswith(".results.import-")]
    # Ctrl-C part-way (the second record's copy): taken back as well, so that the same import can be run again
    # (it used to leave the runs and the first record there, and a second import was refused over them)
    def interrupted(source, target, copied):
        if copied:
            raise KeyboardInterrupt
        plain(source, target, copied)

    monkeypatch.setattr(slices, "_copy_record", interrupted)
    with pytest.raises(KeyboardInterrupt):
        slices.import_slice_pack(pack, into)
    assert tree(tmp_path / "imp") == ["keep"]
    monkeypatch.setattr(slices, "_copy_record", plain)
    new, records = slices.import_slice_pack(pack, into)  # the same pack, nothing in the way: the parents made
    assert [p.parent for p in new] == [into] and len(records) == 2 and (tmp_path / "imp" / "keep").is_file()
    # a parent that is a file: refused before anything is made
    before = tree(tmp_path / "imp")
    with pytest.raises(ValueError, match="keep is not a folder"):
        slices.import_slice_pack(write_pack(tmp_path / "other", runs=(("curl", 1),)),
                                 tmp_path / "imp" / "keep" / "sub" / "results")
    assert tree(tmp_path / "imp") == before and (tmp_path / "imp" / "keep").read_text() == "x"


def test_the_same_records_imported_twice_are_refused(tmp_path):
    pack = write_pack(tmp_path / "pack", runs=())
    into = tmp_path / "results"
    _, records = slices.import_slice_pack(pack, into)
    before = tree(into)
    for label in ("", "again"):  # identical records, whatever the label: the same slice
        with pytest.raises(ValueError, match=r"is already imported: its throughput\.json, slice\.txt are identical "
                                             r"to .*2026-11-27__H200__b3b304f__\*; nothing imported"):
            slices.import_slice_pack(pack, into, label=label)
    assert tree(into) == before
    (pack / "slice.txt").write_text("slice of 2026-11-27, printed again\n")  # not identical: another record
    _, again = slices.import_slice_pack(pack, into)
    assert [p.name for p in again] == ["2026-11-27__H200__b3b304f__2__throughput.json",
                                       "2026-11-27__H200__b3b304f__2__slice.txt"]


@pytest.mark.parametrize("what", ["record_link", "record_folder", "archive_link"])
def test_links_and_other_non_files_in_a_pack_folder_are_refused(tmp_path, what):
    secret = tmp_path / "secret.txt"
    secret.write_text("not the pack's\n")
    pack = write_pack(tmp_path / "pack")
    if what == "record_link":
        (pack / "slice.txt").unlink()
        (pack / "slice.txt").symlink_to(secret)
        message = r"slice\.txt is a symbolic link"
    elif what == "record_folder":
        (pack / "dmon.txt").mkdir()
        message = r"dmon\.txt is not a regular file"
    else:
        (pack / "table3_runs.tar.gz").rename(tmp_path / "runs.tar.gz")
        (pack / "table3_runs.tar.gz").symlink_to(tmp_path / "runs.tar.gz")
        message = r"table3_runs\.tar\.gz is a symbolic link"
    into = tmp_path / "results"
    with pytest.raises(ValueError, match=message + ".*nothing imported"):
        slices.import_slice_pack(pack, into)
    assert not into.exists()


@pytest.mark.parametrize("where", ["after_gzip", "inside_gzip"])
def test_data_after_the_archives_end_is_refused(tmp_path, where):
    import gzip

    pack = write_pack(tmp_path / "pack")
    archive = pack / "table3_runs.tar.gz"
    good = archive.read_bytes()
    if where == "after_gzip":
        archive.write_bytes(good + b"garbage" * 100)
    else:  # a second archive (or anything) behind the first's end-of-archive marker
        archive.write_bytes(gzip.compress(gzip.decompress(good) + b"garbage" * 100))
    into = tmp_path / "results"
    with pytest.raises(ValueError, match=r"table3_runs\.tar\.gz has data after the archive's end.*nothing imported"):
        slices.import_slice_pack(pack, into)
    assert not into.exists()
    archive.write_bytes(good + b"\0" * 1024)  # zeros (padding) after it are no data
    assert len(slices.import_slice_pack(pack, into)[0]) == 1


def curl_table3_grid(out):
    """What scripts/curl_table3.py --out OUT leaves: runs under TASK/OBJECTIVE/seedS, its table3.md and curves.png."""
    run = out / "cartpole-swingup" / "curl" / "seed0"
    run.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"task": "cartpole-swingup", "seed": 0, "aux": "curl"}))
    (run / "eval.csv").write_text("env_step,episode,eval_return_mean,eval_return_std\n1000,1,10.0,1.0\n")
    (out / "table3.md").write_text("Score at 1000 environment steps\n")
    (out / "curves.png").write_bytes(b"\x89PNG\r\n\x1a\nthe grid's own curves")
    return out


def test_tabulate_refuses_a_folder_of_no_imported_slices_and_keeps_its_files(tmp_path, capsys):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    import table3_gpu

    grid = curl_table3_grid(tmp_path / "grid")
    before = {p: p.read_bytes() for p in grid.rglob("*") if p.is_file()}
    for call in (lambda: slices.write_report(grid), lambda: table3_gpu.main(["tabulate", str(grid)])):
        with pytest.raises(ValueError, match=r"grid holds no imported GPU slice .* tabulate expects a results folder "
                                             r"that `scripts/table3_gpu.py import` fills.*curl_table3\.py grid.*"
                                             r"--aggregate-only`; nothing written$"):
            call()
    assert {p: p.read_bytes() for p in grid.rglob("*") if p.is_file()} == before  # no table3_gpu.md, curves kept
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no imported GPU slice"):
        slices.write_report(tmp_path / "empty")
    assert tree(tmp_path / "empty") == []
    assert capsys.readouterr().out == ""


def test_write_report_replaces_only_its_own_table_and_curves(tmp_path):
    root = tmp_path / "results"
    write_run(root, "curl", 0)
    foreign = b"\x89PNG\r\n\x1a\nsomeone else's"
    (root / "curves.png").write_bytes(foreign)
    with pytest.raises(ValueError, match=r"curves\.png was not written by `scripts/table3_gpu.py tabulate`"):
        slices.write_report(root)
    assert (root / "curves.png").read_bytes() == foreign and not (root / "table3_gpu.md").exists()
    (root / "curves.png").unlink()
    md, png = slices.write_report(root)
    first = png.read_bytes()
    write_run(root, "curl", 1)
    slices.write_report(root)  # its own (marked) curves: replaced
    assert png.read_bytes() != first
    # curves.png written before the mark existed, beside the table this module wrote: taken as its own
    from PIL import Image

    Image.new("RGB", (4, 4)).save(png)
    slices.write_report(root)
    assert slices._png_software(png).startswith(slices.PNG_SOFTWARE)
    md.write_text("# my notes\n")
    with pytest.raises(ValueError, match=r"table3_gpu\.md was not written by .*not replaced; nothing written"):
        slices.write_report(root)
    assert md.read_text() == "# my notes\n"
