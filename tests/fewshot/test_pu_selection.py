"""--select pu-risk / pu-auc: the image runs' choice of the encoder's training length from PU data alone (issue 45
item 1). The held-out scores against a float64 transcription, the split's rules, that no negative label is read,
and whole runs: the kept encoder is the best-scored step's, and an interrupted run resumes to the same choice."""

import csv
import dataclasses
import json

import numpy as np
import pytest
import torch

from fewshot.config import ImageConfig
from fewshot.image_run import (ImageData, held_out_scores, select_steps, selection_scores, selection_split,
                                share_labels)
from fewshot.train import train

from .test_images import image_cfg, npz  # noqa: F401 - the fixture
from tests import warm

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def transcription(sp, su, pi):
    """Kiryo et al.'s nnPU risk (sigmoid loss), its zero-one version and the P-vs-U AUC, in float64, plainly."""
    sp, su = np.asarray(sp, np.float64), np.asarray(su, np.float64)
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    risk = pi * np.mean(sig(-sp)) + max(0.0, np.mean(sig(su)) - pi * np.mean(sig(sp)))
    risk01 = pi * np.mean(sp <= 0) + max(0.0, np.mean(su > 0) - pi * np.mean(sp > 0))
    pairs = [(1.0 if a > b else 0.5 if a == b else 0.0) for a in sp for b in su]
    return risk, risk01, float(np.mean(pairs))


@pytest.mark.parametrize("seed", range(4))
def test_held_out_scores_are_the_transcribed_equations(seed):
    rng = np.random.default_rng(seed)
    sp, su = rng.normal(1.0, 1.5, 7), rng.normal(-0.3, 2.0, 40)
    su[3] = sp[2]  # a tie counts one half in the AUC
    pi = float(rng.uniform(0.2, 0.7))
    got = held_out_scores(torch.from_numpy(sp), torch.from_numpy(su), pi)
    want = transcription(sp, su, pi)
    assert got["select_risk"] == pytest.approx(want[0], rel=1e-12)
    assert got["select_risk01"] == pytest.approx(want[1], abs=1e-12)
    assert got["select_auc"] == pytest.approx(want[2], abs=1e-12)
    # the non-negative correction: U scored all negative, P all positive -> the bracket clamps at 0
    low = held_out_scores(torch.full((3,), 9.0, dtype=torch.float64), torch.full((5,), -9.0, dtype=torch.float64), pi)
    assert low["select_risk01"] == 0.0 and low["select_auc"] == 1.0


def pool(n=60, n_lab=10, seed=0):
    rng = np.random.default_rng(seed)
    y = (np.arange(n) % 2 == 0).astype(np.int64)
    labeled = np.sort(rng.choice(np.flatnonzero(y == 1), n_lab, replace=False))
    return ImageData(rng.normal(size=(n, 5)).astype(np.float32), y, np.zeros((2, 5), np.float32), np.array([0, 1]),
                     labeled, np.setdiff1d(np.arange(n), labeled), "test", 0, 2)


def test_the_split_holds_out_positives_from_the_labels_and_unlabeled_images_beside_them():
    data = pool()
    cfg = ImageConfig(select="pu-auc", select_fraction=0.2, seed=3)
    sel = selection_split(cfg, data)
    enc = sel.encoder_data
    assert len(sel.positives) == 2 and set(sel.positives) <= set(data.labeled)
    assert len(sel.unlabeled) == 10 and set(sel.unlabeled) <= set(data.unlabeled)
    # the encoder sees the held-out positives as unlabeled images; the probe's U leaves both held-out sets out
    assert set(enc.labeled) == set(data.labeled) - set(sel.positives)
    assert set(enc.unlabeled) == set(data.unlabeled) | set(sel.positives)
    assert not (set(sel.fitted) & (set(sel.positives) | set(sel.unlabeled)))
    assert len(sel.fitted) == 60 - 2 - 10
    again = selection_split(cfg, data)
    assert np.array_equal(again.positives, sel.positives) and np.array_equal(again.unlabeled, sel.unlabeled)
    # at least one held out and one kept, whatever the fraction
    assert len(selection_split(dataclasses.replace(cfg, select_fraction=0.01), data).positives) == 1
    assert len(selection_split(dataclasses.replace(cfg, select_fraction=0.99), data).positives) == 9
    assert selection_split(ImageConfig(), data) is None


def test_the_selection_reads_no_negative_label():
    """The split and the scores depend on the labeled indices and the features only: any labels of the unlabeled
    images give the same held-out images and the same scores."""
    data = pool(seed=1)
    cfg = ImageConfig(select="pu-risk", seed=0)
    feats = torch.from_numpy(np.random.default_rng(5).normal(size=(60, 5)).astype(np.float32))
    a_sel = selection_split(cfg, data)
    a = selection_scores(feats, a_sel, 0.4, seed=0)
    scrambled = data.y.copy()
    scrambled[data.unlabeled] = np.random.default_rng(9).integers(0, 2, len(data.unlabeled))
    b_sel = selection_split(cfg, dataclasses.replace(data, y=scrambled))
    b = selection_scores(feats, b_sel, 0.4, seed=0)
    assert np.array_equal(a_sel.positives, b_sel.positives) and np.array_equal(a_sel.unlabeled, b_sel.unlabeled)
    assert a == b


def test_scored_steps_are_evenly_spaced_up_to_the_last():
    assert select_steps(ImageConfig(select="pu-auc", max_steps=300, passes=None)) == [50, 100, 150, 200, 250, 300]
    assert select_steps(ImageConfig(select="pu-auc", select_points=4, max_steps=6, passes=None)) == [2, 3, 4, 6]
    assert select_steps(ImageConfig(select="pu-auc", select_points=10, max_steps=3, passes=None)) == [1, 2, 3]
    for points in (7, 8, 13):  # at least a point a step: every step, as the evenly spaced points round
        assert select_steps(ImageConfig(select="pu-auc", select_points=points, max_steps=7, passes=None)) == \
            sorted({max(1, round(k * 7 / points)) for k in range(1, points + 1)}) == list(range(1, 8))
    assert select_steps(ImageConfig(select="pu-auc", select_points=10**12, max_steps=7, passes=None)) == \
        list(range(1, 8))  # at once (a set of 10**12 points was built first: a hang)
    assert select_steps(ImageConfig(max_steps=300, passes=None)) == []


@pytest.mark.parametrize("overrides,words", [
    (dict(select="pu-auc", setting="pnu", labeled_percent=50.0), "--setting pu"),
    (dict(select="pu-risk", contrastive="none"), "not none"),
    (dict(select_points=3), "--select-points applies to --select"),
    (dict(select="pu-auc", select_points=0), "--select-points must be >= 1"),
    (dict(select="pu-auc", select_fraction=1.0), "--select-fraction must be in (0, 1)"),
    (dict(label_share=0.0), "--label-share must be in (0, 1]"),
    (dict(label_share=0.5, contrastive="none"), "--label-share applies to a contrastive encoder"),
    (dict(label_pull=1.5), "--label-pull must be in [0, 1]"),
    (dict(label_pull=0.5, contrastive="scl"), "--label-pull weighs puNCE's unlabeled anchors"),
])
def test_selection_options_that_do_not_fit_are_refused(npz, tmp_path, overrides, words):  # noqa: F811
    path, _, _ = npz
    fields = {k: v for k, v in overrides.items()}
    cfg = image_cfg(path, tmp_path / "run", **fields)
    with pytest.raises(ValueError) as err:
        cfg.validate()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_run_keeps_the_best_scored_encoder_and_resumes_to_the_same_choice(npz, tmp_path, monkeypatch,  # noqa: F811
                                                                             capsys):
    path, _, _ = npz
    kw = dict(select="pu-auc", select_points=3, max_steps=6, n_labeled=10, eval_split="dev", checkpoint_every=100)
    full = train(image_cfg(path, tmp_path / "full", **kw))
    cands = full["select_candidates"]
    assert [c["step"] for c in cands] == [2, 4, 6] and full["n_select_positives"] == 2
    best = max(cands, key=lambda c: (c["select_auc"], -c["step"]))  # ties: the earlier step
    assert full["selected_step"] == best["step"]
    # the kept encoder is that step's: its development accuracy (the nnPU probe on every label) is the run's
    assert full["probes"]["nnpu"] == pytest.approx(best["dev_accuracy"])
    rows = list(csv.DictReader(open(tmp_path / "full" / "log.csv")))
    assert [r["step"] for r in rows if r["select_auc"]] == ["2", "4", "6"]
    sample = json.loads((tmp_path / "full" / "sample.json").read_text())
    assert len(sample["select_positives"]) == 2 and set(sample["select_positives"]) <= set(sample["labeled"])
    # Ctrl-C at step 5 (after the scored steps 2 and 4), resumed: the same candidates, choice and probes
    import fewshot.image_run as image_run

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call

    interrupt_on_call(monkeypatch, image_run, "encoder_loss", at=5)
    check_interrupt_exits_130(capsys, lambda: train(image_cfg(path, tmp_path / "cut", **kw)), where="step 5")
    monkeypatch.undo()
    cut = train(image_cfg(path, tmp_path / "cut", **kw, resume=True))
    assert cut["select_candidates"] == cands and cut["selected_step"] == full["selected_step"]
    assert cut["probes"] == full["probes"]
    # another length would move the scored steps: refused in one line, the folder untouched
    with pytest.raises(ValueError, match="same --max-steps") as err:
        train(image_cfg(path, tmp_path / "cut", **{**kw, "max_steps": 9}, resume=True))
    assert "\n" not in str(err.value)


def test_label_share_keeps_a_seeded_share_of_the_labels_for_the_encoder_and_the_rest_unlabeled():
    data = pool(n_lab=10)
    enc = share_labels(ImageConfig(label_share=0.5, seed=2), data)
    assert len(enc.labeled) == 5 and set(enc.labeled) < set(data.labeled)
    assert set(enc.unlabeled) == set(data.unlabeled) | (set(data.labeled) - set(enc.labeled))
    assert np.array_equal(share_labels(ImageConfig(label_share=0.5, seed=2), data).labeled, enc.labeled)
    assert len(share_labels(ImageConfig(label_share=0.01), data).labeled) == 1  # at least one
    assert share_labels(ImageConfig(label_share=1.0), data) is data


def test_a_run_with_a_label_share_trains_on_fewer_labels_and_probes_with_all(npz, tmp_path):  # noqa: F811
    path, _, _ = npz
    m = train(image_cfg(path, tmp_path / "run", label_share=0.5, n_labeled=10))
    assert m["n_encoder_labeled"] == 5 and m["n_labeled"] == 10 and m["label_share"] == 0.5
    again = train(image_cfg(path, tmp_path / "again", label_share=0.5, n_labeled=10))
    assert again["probes"] == m["probes"]  # the same seeded draw
    # the default at n_P = 10 (puNCE): every label, pulled at the default lambda
    default = train(image_cfg(path, tmp_path / "default", n_labeled=10))
    assert default["label_share"] == 1.0 and default["n_encoder_labeled"] == 10
    assert default["label_pull"] == ImageConfig.DEFAULT_LABEL_PULL
    every = train(image_cfg(path, tmp_path / "every", n_labeled=10, label_share=1.0,
                            label_pull=ImageConfig.DEFAULT_LABEL_PULL))
    assert every["n_encoder_labeled"] == 10 and every["probes"] == default["probes"]
    # with --select too: the held-out positives leave the labels first, then the share is drawn from the rest
    m = train(image_cfg(path, tmp_path / "both", label_share=0.5, n_labeled=10, select="pu-auc", select_points=2))
    assert m["n_select_positives"] == 2 and m["n_encoder_labeled"] == 4 and m["n_labeled"] == 10


def test_a_label_pull_of_zero_trains_the_scl_encoder(npz, tmp_path):  # noqa: F811
    """--label-pull 0 is the SCL baseline (docs/equations.md section 5); 1 is the paper's puNCE; the default is
    ImageConfig.DEFAULT_LABEL_PULL on PNU data and on PU data up to 100 labeled positives, the paper's above."""
    path, _, _ = npz
    kw = dict(setting="pnu", labeled_percent=20.0, max_steps=3, passes=None)
    zero = train(image_cfg(path, tmp_path / "zero", label_pull=0.0, **kw))
    scl = train(image_cfg(path, tmp_path / "scl", contrastive="scl", **kw))
    assert zero["label_pull"] == 0.0 and "label_pull" not in scl
    assert zero["probes"] == scl["probes"]
    paper = train(image_cfg(path, tmp_path / "paper", label_pull=1.0, **kw))
    assert paper["label_pull"] == 1.0 and paper["probes"] != zero["probes"]
    default = train(image_cfg(path, tmp_path / "default", **kw))
    assert default["label_pull"] == ImageConfig.DEFAULT_LABEL_PULL < 1
    assert ImageConfig(setting="pnu", contrastive="scl").encoder_label_pull == 1.0


def test_a_finished_run_made_under_an_older_default_is_refused_by_what_it_used(tmp_path):
    """config.json records an unset --label-share / --label-pull as unset and what it resolved to (resolved_defaults);
    the grids' check compares what the run used with what the default resolves to now, so a default that changed is
    not mistaken for the same options. Runs from before that record: their metrics.json says what they used (runs
    from before metrics.json recorded the key used 1)."""
    from fewshot.grids import refuse_other_finished_run
    from fewshot.run import RESOLVED_KEY, recorded_config
    from shared_losses.training.runtime import write_json_atomic

    def finished(cfg, metrics, resolved=None, before_the_record=False):
        folder = tmp_path / f"run{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        config = recorded_config(cfg)
        if before_the_record:
            del config[RESOLVED_KEY]
        elif resolved is not None:
            config[RESOLVED_KEY] = {**config[RESOLVED_KEY], **resolved}
        write_json_atomic(folder / "config.json", config)
        write_json_atomic(folder / "metrics.json", metrics)
        return folder

    pnu = ImageConfig(setting="pnu", labeled_percent=1.0)
    refuse_other_finished_run(finished(pnu, {}), pnu)  # the record says what it used: today's default
    with pytest.raises(ValueError, match=r"label_pull \(unset: its default\): 1.0 -> 0.1"):
        refuse_other_finished_run(finished(pnu, {}, resolved={"label_pull": 1.0}), pnu)
    # before the record: metrics.json
    refuse_other_finished_run(finished(pnu, {"label_pull": 0.1}, before_the_record=True), pnu)
    with pytest.raises(ValueError, match=r"label_pull \(unset: its default\): 1.0 -> 0.1"):
        refuse_other_finished_run(finished(pnu, {}, before_the_record=True), pnu)  # before the key: eq. 10
    pu = ImageConfig(setting="pu", n_labeled=50)
    refuse_other_finished_run(finished(pu, {"label_share": 1.0, "label_pull": 0.1}, before_the_record=True), pu)
    with pytest.raises(ValueError, match=r"label_pull \(unset: its default\): 1.0 -> 0.1"):
        refuse_other_finished_run(finished(pu, {"label_share": 1.0}, before_the_record=True), pu)
    # made under the half-the-labels default of 2026-11-28
    with pytest.raises(ValueError, match=r"label_share \(unset: its default\): 0.5 -> 1.0"):
        refuse_other_finished_run(finished(pu, {"label_share": 0.5, "label_pull": 1.0}, before_the_record=True), pu)
    above = ImageConfig(setting="pu", n_labeled=300)  # the paper's loss there, before and now
    refuse_other_finished_run(finished(above, {"label_share": 1.0, "label_pull": 1.0}, before_the_record=True), above)
    # an option given equals the default it spells out, both ways
    stated = ImageConfig(setting="pu", n_labeled=50, label_pull=0.1)
    refuse_other_finished_run(finished(pu, {}), stated)
    refuse_other_finished_run(finished(stated, {}), pu)
    with pytest.raises(ValueError, match=r"label_pull: 1.0 -> 0.1"):
        refuse_other_finished_run(finished(ImageConfig(setting="pu", n_labeled=50, label_pull=1.0), {}), pu)
    raw = ImageConfig(setting="pu", n_labeled=50, contrastive="none")  # nothing recorded, nothing changed
    refuse_other_finished_run(finished(raw, {}, before_the_record=True), raw)


def test_a_finished_run_of_another_training_length_is_refused_though_a_resume_may_change_it(tmp_path):
    """A resume may change --max-steps (to train on); a grid that finds a finished run must not count a run of another
    length in a table whose header names this one (it did, for the image grids, until 2026-11-29). Options that do not
    change the result (logging, checkpoints) stay free; a run without config.json is refused by name."""
    from fewshot.config import FewShotConfig
    from fewshot.grids import refuse_other_finished_run
    from fewshot.run import recorded_config
    from shared_losses.training.runtime import write_json_atomic

    def finished(cfg, name):
        folder = tmp_path / name
        folder.mkdir()
        write_json_atomic(folder / "config.json", recorded_config(cfg))
        write_json_atomic(folder / "metrics.json", {})
        return folder

    made = ImageConfig(setting="pu", n_labeled=50, max_steps=300, passes=None)  # --max-steps 300
    folder = finished(made, "image")
    with pytest.raises(ValueError, match=r"max_steps: 300 -> 600"):
        refuse_other_finished_run(folder, ImageConfig(setting="pu", n_labeled=50, max_steps=600, passes=None))
    with pytest.raises(ValueError, match=r"passes: None -> 5.0"):
        refuse_other_finished_run(folder, ImageConfig(setting="pu", n_labeled=50, passes=5.0))
    refuse_other_finished_run(folder, ImageConfig(setting="pu", n_labeled=50, max_steps=300, passes=None, log_every=7,
                                                  checkpoint_every=11, progress=False))
    # --passes: the run records the steps they resolved to on its pool (108 on the 8x8 digits), the grid's
    # configuration the unresolved default; the passes are compared
    by_passes = finished(ImageConfig(setting="pu", n_labeled=50, max_steps=108), "passes")
    refuse_other_finished_run(by_passes, ImageConfig(setting="pu", n_labeled=50))
    with pytest.raises(ValueError, match=r"passes: 21.94\d* -> 10.0"):
        refuse_other_finished_run(by_passes, ImageConfig(setting="pu", n_labeled=50, passes=10.0))
    text = finished(FewShotConfig(n_labeled=20, max_steps=40), "text")
    with pytest.raises(ValueError, match=r"max_steps: 40 -> 200"):
        refuse_other_finished_run(text, FewShotConfig(n_labeled=20, max_steps=200))
    refuse_other_finished_run(text, FewShotConfig(n_labeled=20, max_steps=40, eval_every=5))
    (text / "config.json").unlink()
    with pytest.raises(ValueError, match="has metrics.json but no config.json: cannot tell which options"):
        refuse_other_finished_run(text, FewShotConfig(n_labeled=20, max_steps=40))


def test_a_run_is_not_resumed_under_a_default_that_changed_after_it_started(npz, tmp_path, monkeypatch):  # noqa: F811
    """A checkpoint records what --label-pull resolved to; a resume under another default is refused by name, before
    anything is written, and resumes when the command states the run's value."""
    from shared_losses.training.harness import ConfigChanged

    path, _, _ = npz
    out = tmp_path / "run"
    first = train(image_cfg(path, out, max_steps=2, checkpoint_every=1))
    assert first["label_pull"] == ImageConfig.DEFAULT_LABEL_PULL and json.loads(
        (out / "config.json").read_text())["resolved_defaults"] == {"label_share": 1.0, "label_pull": 0.1}
    before = {str(f.relative_to(out)): f.read_bytes() for f in out.rglob("*") if f.is_file()}
    monkeypatch.setattr(ImageConfig, "DEFAULT_LABEL_PULL", 0.3)
    with pytest.raises(ConfigChanged, match=r"label_pull \(unset: its default\): 0.1 -> 0.3"):
        train(image_cfg(path, out, max_steps=4, resume=True))
    assert {str(f.relative_to(out)): f.read_bytes() for f in out.rglob("*") if f.is_file()} == before
    resumed = train(image_cfg(path, out, max_steps=4, resume=True, label_pull=0.1))
    assert resumed["label_pull"] == 0.1 and resumed["steps"] == 4


@pytest.mark.slow  # the script end to end: 5 tiny runs in subprocesses
def test_the_selection_script_runs_its_methods_side_by_side_and_reports_the_choices(npz, tmp_path):  # noqa: F811
    import sys
    from pathlib import Path

    path, _, _ = npz
    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "sel"
    cmd = [sys.executable, str(root / "scripts" / "pu_selection.py"), "--dataset", path, "--positive-classes", "0", "2",
           "4", "--n-ps", "8", "--seeds", "0", "--label-shares", "0.5", "--eval-split", "dev", "--out", str(out),
           "--parallel", "1"]
    done = warm.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = (out / "selection.md").read_text()
    for row in ("raw nnPU", "puNCE last step", "puNCE --label-share 0.5", "puNCE --select pu-auc"):
        assert f"| {row} |" in report
    assert "| 8 | pu-auc |" in report and "| 8 | last step |" in report
    saved = json.loads((out / "selection.json").read_text())
    sel = saved["results"]["8"]["selection"]["0"]
    run = json.loads((out / "select" / "n8" / "seed0" / "metrics.json").read_text())
    assert sel["pu-auc"]["step"] == run["selected_step"]  # the report's pick is the run's
    assert json.loads((out / "share0.5" / "n8" / "seed0" / "metrics.json").read_text())["n_encoder_labeled"] == 4
    again = warm.run(cmd, capture_output=True, text=True, timeout=600)  # finished runs are skipped, and it says so
    assert again.returncode == 0 and "0 runs to do (4 finished earlier, skipped)" in again.stdout
    # --aggregate-only over seeds not run: the cells' (n) and a line naming the runs the report lacks
    seeds = cmd.index("--seeds")
    partial = warm.run(cmd[:seeds + 2] + ["1"] + cmd[seeds + 2:] + ["--aggregate-only"], capture_output=True,
                       text=True, timeout=600)
    assert partial.returncode == 0, partial.stderr[-2000:]
    assert ("Not in the report: 4 of the 8 runs have no metrics.json (not finished): raw n=8 seed=1, punce n=8 "
            "seed=1, share0.5 n=8 seed=1, select n=8 seed=1.") in (out / "selection.md").read_text()
    assert not (out / "raw" / "n8" / "seed1").exists()  # nothing was run
    # a damaged metrics.json is named (it was a bare "Expecting value: line 1 column 1 (char 0)")
    metrics = out / "select" / "n8" / "seed0" / "metrics.json"
    kept = metrics.read_text()
    metrics.write_text(kept[:25])
    damaged = warm.run(cmd + ["--aggregate-only"], capture_output=True, text=True, timeout=600)
    assert damaged.returncode == 2 and f"{metrics} is damaged (not valid JSON" in damaged.stderr
    metrics.write_text(kept)
    # a finished run made with other options is refused by name, not skipped as if it were this grid's
    other = warm.run(cmd + ["--encoder", "cnn"], capture_output=True, text=True, timeout=600)
    assert other.returncode != 0 and "made with other settings (encoder: 'mlp' -> 'cnn'" in other.stderr


def test_the_defaults_read_every_label_and_pull_at_0_1_up_to_100_labeled_positives_and_in_pnu():
    for n, pull in ((25, 0.1), (100, 0.1), (101, 1.0), (1000, 1.0)):  # the defaults: PU, puNCE
        assert ImageConfig(n_labeled=n).encoder_label_share == 1.0
        assert ImageConfig(n_labeled=n).encoder_label_pull == pull
    assert ImageConfig(setting="pnu", labeled_percent=1.0).encoder_label_pull == 0.1
    for other in ("infonce", "scl", "none"):
        assert ImageConfig(n_labeled=50, contrastive=other).encoder_label_pull == 1.0
    assert ImageConfig(n_labeled=50, label_pull=1.0).encoder_label_pull == 1.0  # given: it wins
    assert ImageConfig(n_labeled=500, label_pull=0.25).encoder_label_pull == 0.25
    assert ImageConfig(n_labeled=500, label_share=0.25).encoder_label_share == 0.25
    ImageConfig(setting="pnu").validate()  # the default is no option given: PNU and raw runs take it
    ImageConfig(contrastive="none").validate()
    ImageConfig(contrastive="none", label_share=1.0).validate()  # 1 is every label: nothing to refuse


def test_the_selection_grid_checks_out_and_its_lock_before_it_counts_runs(npz, tmp_path, capsys):  # noqa: F811
    """--aggregate-only of a mistyped --out wrote a report of dashes (and made the folder), exit 0; a second grid on
    a busy --out printed "3 runs to do" before it was refused (the lock was taken in the runner)."""
    import importlib.util
    from pathlib import Path

    from shared_losses.training.sweep import SweepError
    from tests.shared_losses.test_sweep import _hold_lock

    spec = importlib.util.spec_from_file_location("pu_selection", Path(__file__).resolve().parents[2]
                                                  / "scripts" / "pu_selection.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    argv = ["--dataset", npz[0], "--positive-classes", "0", "2", "4", "--n-ps", "8", "--seeds", "0"]
    with pytest.raises(ValueError, match=r"--aggregate-only: no finished runs under .*typo .*check --out"):
        mod.main(argv + ["--out", str(tmp_path / "typo"), "--aggregate-only"])
    assert not (tmp_path / "typo").exists()
    holder = _hold_lock(tmp_path / "grid")
    try:
        with pytest.raises(SweepError, match=rf"^--out {tmp_path / 'grid'} is in use by another grid still running"):
            mod.main(argv + ["--out", str(tmp_path / "grid")])
        assert "runs to do" not in capsys.readouterr().out
        assert sorted(p.name for p in (tmp_path / "grid").iterdir()) == [".grid.lock"]
    finally:
        holder.kill()
        holder.wait()


def test_a_finished_run_of_an_earlier_version_is_named_as_such(tmp_path):
    """A grid over a run made by an earlier version (options since renamed, or no pipeline recorded) listed them as
    other settings ("cpu: False -> None, steps: 2 -> None, pipeline: None -> 'text'") and advised the run's settings,
    which no option of this version gives."""
    from fewshot.config import FewShotConfig
    from fewshot.grids import refuse_other_finished_run
    from fewshot.run import recorded_config
    from shared_losses.training.runtime import write_json_atomic

    cfg = ImageConfig(setting="pu", n_labeled=50)
    for name, record, says in (
            ("renamed", {**recorded_config(cfg), "steps": 2, "cpu": False}, "records cpu, steps, which this version "
                                                                            "does not have"),
            ("nopipeline", {k: v for k, v in recorded_config(cfg).items() if k != "pipeline"}, "names no pipeline")):
        folder = tmp_path / name
        folder.mkdir()
        write_json_atomic(folder / "config.json", record)
        write_json_atomic(folder / "metrics.json", {})
        with pytest.raises(ValueError, match=rf"^{folder} holds a finished run made by an earlier version of the suite "
                                             rf"\(its config.json {says}\): it cannot be counted as this grid's run; "
                                             r"run the grid into another --out \(or move the folder aside\)$"):
            refuse_other_finished_run(folder, cfg)
    # a run of another pipeline, or with other settings, is still said to be so; what a run of this version records
    # beside its options (the priors it used) is not taken for an earlier version's
    extras = {"prior_used": 0.4, "pool_prior": 0.5, "prior_source": "given"}
    write_json_atomic(tmp_path / "renamed" / "config.json", recorded_config(FewShotConfig(n_labeled=8)) | extras)
    with pytest.raises(ValueError, match=r"made with other settings \(.*pipeline: 'text' -> 'images'"):
        refuse_other_finished_run(tmp_path / "renamed", cfg)
    write_json_atomic(tmp_path / "renamed" / "config.json", recorded_config(dataclasses.replace(cfg, lr=0.5)) | extras)
    with pytest.raises(ValueError, match=r"made with other settings \(lr: 0.5 -> "):
        refuse_other_finished_run(tmp_path / "renamed", cfg)


def test_the_report_shows_no_std_for_one_run_and_counts_ties():
    """One seed has no std (it printed "± 0.00", a spread never measured), and a tie is named beside the wins."""
    import importlib.util
    from pathlib import Path
    from types import SimpleNamespace

    path = Path(__file__).resolve().parents[2] / "scripts" / "pu_selection.py"
    spec = importlib.util.spec_from_file_location("pu_selection_script", path)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    args = SimpleNamespace(eval_split="dev", dataset="mnist", encoder="mlp", seeds=[0], n_ps=[50], criterion="none",
                           with_infonce=False, label_shares=[])
    res = {50: {"acc": {"raw nnPU": {0: 80.0}, "puNCE last step": {0: 80.0}}, "selection": {}}}
    md, paired = script.markdown(args, res)
    assert "| raw nnPU | 80.00 (1) |" in md.splitlines(), md
    assert "| n_P=50 | puNCE last step − raw nnPU | +0.00 | +0.00 | — | 0/1, 1 tied |" in md.splitlines(), md


def test_pu_selection_help_shows_every_default_and_a_usage_error_is_one_line(capsys):
    """--seeds and --out had no help, so --help showed neither default; a usage error printed argparse's usage block,
    where the other grids print one error: line (status 2 both ways)."""
    import importlib.util
    from pathlib import Path

    from shared_losses.training.cli import UsageError

    spec = importlib.util.spec_from_file_location("pu_selection", Path(__file__).resolve().parents[2]
                                                  / "scripts" / "pu_selection.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    with pytest.raises(SystemExit):
        mod.build_parser().parse_args(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: [0, 1, 2, 3, 4])" in text and "(default: runs/pu_selection)" in text
    with pytest.raises(UsageError, match="unrecognized arguments: --bogus"):
        mod.build_parser().parse_args(["--bogus"])
