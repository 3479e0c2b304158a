"""PU images from files (``python -m fewshot.train images --positive-file P.npz --unlabeled-file U.npz``): every image
of both files used, the positives labeled and the unlabeled images of unknown class, the prior given or estimated,
the labeled --eval-file the only source of accuracy; exact resume, and one-line refusals that write nothing."""

import csv
import json

import numpy as np
import pytest
import torch

from fewshot.config import ImageConfig, from_cli
from fewshot.image_run import image_data, load_image_classifier
from fewshot.train import main, train
from shared_losses.data import DataError, load_images

from .test_images import POSITIVE, checkpoint_weights, make_images, one_line

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: one thread (tests/conftest.py)


@pytest.fixture
def pu_files(tmp_path):
    """PU data as a user has it: 10 labeled positives (P), 90 unlabeled images of both classes (U, their labels
    dropped) and a labeled evaluation file; returns (P path, U path, eval path, the unlabeled images' true labels)."""
    x, y = make_images(n_per_class=20)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    x, y = x[order], y[order]
    train_x, train_y, ev_x, ev_y = x[:100], y[:100], x[100:], y[100:]
    positive = np.isin(train_y, POSITIVE)
    p_idx = np.flatnonzero(positive)[:10]
    u_idx = np.setdiff1d(np.arange(100), p_idx)
    paths = tmp_path / "pos.npz", tmp_path / "unl.npz", tmp_path / "eval.npz"
    np.savez(paths[0], x=train_x[p_idx])
    np.savez(paths[1], x=train_x[u_idx], y=train_y[u_idx])  # a y in the unlabeled file is not read
    np.savez(paths[2], x=ev_x, y=ev_y)
    return (*(str(p) for p in paths), np.isin(train_y[u_idx], POSITIVE).astype(int))


def files_cfg(pos, unl, out, **overrides):
    fields = dict(positive_file=pos, unlabeled_file=unl, encoder="mlp", contrastive="punce", hidden=16, max_steps=4,
                  passes=None, batch_size=16, progress=False, output_dir=str(out))
    return ImageConfig(**{**fields, **overrides})


def test_unlabeled_images_load_without_labels_and_an_x_is_required(tmp_path):
    x, y = make_images(n_per_class=2)
    np.savez(tmp_path / "u.npz", x=x, y=y)
    np.savez(tmp_path / "no_x.npz", images=x)
    u = load_images(str(tmp_path / "u.npz"), "--unlabeled-file", labels=False)
    assert u.x.shape == (len(x), 1, 10, 10) and (u.y == -1).all()  # its y is not read
    assert np.array_equal(u.x, load_images(str(tmp_path / "u.npz")).x)  # the same pixels as a labeled load
    with pytest.raises(DataError, match=r"--unlabeled-file .*no_x\.npz: needs an array 'x' \(the images\); missing "
                                        r"\['x'\], it holds \['images'\]") as err:
        load_images(str(tmp_path / "no_x.npz"), "--unlabeled-file", labels=False)
    one_line(err)


def test_the_pool_is_the_positives_then_the_unlabeled_images_and_the_eval_file_is_scored(pu_files, tmp_path,
                                                                                         capsys):
    pos, unl, ev, _ = pu_files
    cfg = files_cfg(pos, unl, tmp_path / "run", eval_file=ev, positive_classes=POSITIVE)
    data = image_data(cfg)
    p_x, u_x = load_images(pos, labels=False).x, load_images(unl, labels=False).x
    assert np.array_equal(data.x, np.concatenate([p_x, u_x]))
    assert data.labeled.tolist() == list(range(10)) and data.unlabeled.tolist() == list(range(10, 100))
    assert (data.y[data.labeled] == 1).all() and (data.y[data.unlabeled] == -1).all()  # unknown, never a class
    ev_set = load_images(ev)
    assert np.array_equal(data.eval_x, ev_set.x) and data.eval_y.tolist() == np.isin(ev_set.y, POSITIVE).tolist()
    assert data.n_dev == data.n_test == 0  # nothing held out of the files

    capsys.readouterr()
    m = train(cfg)
    assert m["n_labeled"] == 10 and m["n_unlabeled"] == 90 and m["n_pool"] == 100 and m["n_eval"] == len(data.eval_y)
    # the estimate, a number the user did not give, is said in words
    assert (f"prior: {m['prior']:.4g}, the Elkan-Noto estimate of the positive share of the 90 unlabeled images (from "
            "10 labeled positives, on the pixels; about") in capsys.readouterr().err
    assert m["dataset"] is None and m["positive_file"] == pos and m["unlabeled_file"] == unl
    assert m["prior_source"] == "elkan-noto (pixels)" and m["exact_prior"] is None and 0 < m["prior"] < 1
    assert m["pool_prior"] == pytest.approx((10 + 90 * m["prior"]) / 100)
    assert set(m["probes"]) == {"pn", "upu", "nnpu"} and m["eval_accuracy"] == m["probes"]["nnpu"]
    predict = load_image_classifier(tmp_path / "run")  # the exported nnPU head is what was scored
    right = (predict(np.load(ev)["x"]) == data.eval_y).sum()
    assert m["eval_accuracy"] == pytest.approx(100 * right / len(data.eval_y))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["dataset"] is None and config["n_labeled"] is None  # not read
    assert config["resolved_defaults"]["label_pull"] == 0.1  # n_P = 10 of the file: the scarce-label default


def test_the_label_pull_default_reads_the_positive_files_count(pu_files, tmp_path):
    pos, unl, _, _ = pu_files
    many = tmp_path / "many_pos.npz"
    x = np.load(pos)["x"]
    np.savez(many, x=np.concatenate([x] * 11)[:101])  # n_P = 101: above the scarce-label default's 100
    train(files_cfg(str(many), unl, tmp_path / "run", max_steps=1, prior=0.4))
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["resolved_defaults"]["label_pull"] == 1.0


def test_without_an_eval_file_the_run_trains_exports_and_says_why_there_is_no_accuracy(pu_files, tmp_path, capsys):
    pos, unl, _, _ = pu_files
    out = tmp_path / "run"
    main(["images", "--positive-file", pos, "--unlabeled-file", unl, "--hidden", "16", "--max-steps", "2",
          "--batch-size", "16", "--no-progress", "--prior", "0.5", "--output-dir", str(out)])
    printed = capsys.readouterr()
    assert "no --eval-file: no accuracy (the PU files have no labels to score on)" in printed.out
    assert "Elkan-Noto" not in printed.err  # --prior given: nothing estimated
    m = json.loads((out / "metrics.json").read_text())
    assert m["eval_accuracy"] is None and m["eval_scores"] is None and m["probes"] == {}
    assert m["majority_accuracy"] is None and m["prior_source"] == "given"
    assert m["eval_split"] == "none (no --eval-file)"
    labels = load_image_classifier(out)(np.load(pos)["x"])  # the nnPU head, exported all the same
    assert labels.shape == (10,) and set(labels.tolist()) <= {0, 1}
    from fewshot.predict import model_folder

    for given in (out, out / "model"):  # fewshot.predict classifies texts: an image run is told where to go
        with pytest.raises(ValueError, match="is an image classifier; fewshot.predict classifies texts: load it "
                                             "with fewshot.image_run.load_image_classifier") as err:
            model_folder(given)
        one_line(err)


def test_select_chooses_the_training_length_without_negative_labels(pu_files, tmp_path):
    pos, unl, _, _ = pu_files
    m = train(files_cfg(pos, unl, tmp_path / "run", max_steps=4, select="pu-risk", select_points=2))
    assert m["selected_step"] in (2, 4) and [c["step"] for c in m["select_candidates"]] == [2, 4]
    assert m["n_select_positives"] == 2 and m["eval_accuracy"] is None


def test_a_run_on_pu_files_resumes_exactly_and_refuses_changed_images(pu_files, tmp_path):
    pos, unl, ev, _ = pu_files
    opts = dict(eval_file=ev, positive_classes=POSITIVE, checkpoint_every=100)
    train(files_cfg(pos, unl, tmp_path / "full", max_steps=6, **opts))
    train(files_cfg(pos, unl, tmp_path / "cut", max_steps=3, **opts))
    train(files_cfg(pos, unl, tmp_path / "cut", max_steps=6, resume=True, **opts))
    rows = {n: list(csv.DictReader(open(tmp_path / n / "log.csv"))) for n in ("full", "cut")}
    assert len(rows["full"]) == 6 and rows["full"] == rows["cut"]
    full_w, cut_w = checkpoint_weights(tmp_path / "full"), checkpoint_weights(tmp_path / "cut")
    assert all(torch.equal(full_w[k], cut_w[k]) for k in full_w)
    metrics = {n: json.loads((tmp_path / n / "metrics.json").read_text()) for n in ("full", "cut")}
    assert metrics["full"]["probes"] == metrics["cut"]["probes"]

    x = np.load(unl)["x"]
    x[0, 0, 0] ^= 1  # one pixel of one unlabeled image
    np.savez(unl, x=x)
    with pytest.raises(ValueError, match="other images") as err:
        train(files_cfg(pos, unl, tmp_path / "cut", max_steps=8, resume=True, **opts))
    one_line(err)


def test_images_in_both_files_are_warned_of_and_a_u_made_of_p_is_refused(pu_files, tmp_path):
    pos, unl, _, _ = pu_files
    p_x = np.load(pos)["x"]
    np.savez(tmp_path / "u_shared.npz", x=np.concatenate([np.load(unl)["x"], p_x[:3]]))
    with pytest.warns(UserWarning, match=r"3 of the 93 images of --unlabeled-file .* are also in --positive-file"):
        image_data(files_cfg(pos, str(tmp_path / "u_shared.npz"), tmp_path / "run"))
    np.savez(tmp_path / "u_copy.npz", x=p_x[::-1])
    with pytest.raises(DataError, match=r"every image of --unlabeled-file .* \(10\) is also in --positive-file") as err:
        image_data(files_cfg(pos, str(tmp_path / "u_copy.npz"), tmp_path / "run"))
    one_line(err)


@pytest.mark.parametrize("argv,words", [
    (["--positive-file", "P"], "--positive-file needs its partner"),
    (["--unlabeled-file", "U"], "--unlabeled-file needs its partner"),
    (["--positive-file", "P", "--unlabeled-file", "P"], "are the same file"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--setting", "pnu", "--labeled-percent", "10"],
     "they need --setting pu, not --setting pnu"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--eval-split", "dev"], "--eval-split dev needs labels"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--dataset", "mnist"], "--dataset: not read with"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--n-labeled", "5"], "--n-labeled: not read with"),
    (["--positive-file", "pos.txt", "--unlabeled-file", "U"], "--positive-file pos.txt: PU images from files are .npz"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--positive-classes", "0"],
     "--positive-classes names the positive classes of --eval-file's labels"),
    (["--positive-file", "P", "--unlabeled-file", "SMALL"],
     "its images have shape (1, 8, 8), those of --positive-file"),
    (["--positive-file", "P", "--unlabeled-file", "ONE"], "holds 1 image; the PU probes standardise"),
    (["--positive-file", "P", "--unlabeled-file", "U", "--eval-file", "U"], "needs arrays 'x' (images) and 'y'"),
])
def test_bad_pu_files_and_options_are_one_line_errors_that_write_nothing(pu_files, tmp_path, argv, words):
    pos, unl, _, _ = pu_files
    np.savez(tmp_path / "small.npz", x=make_images(n_per_class=2, side=8)[0])
    np.savez(tmp_path / "one.npz", x=np.load(unl)["x"][:1])
    np.savez(tmp_path / "u_only_x.npz", x=np.load(unl)["x"])
    names = {"P": pos, "U": str(tmp_path / "u_only_x.npz"), "SMALL": str(tmp_path / "small.npz"),
             "ONE": str(tmp_path / "one.npz")}
    out = tmp_path / "run"
    argv = ["images", *(names.get(a, a) for a in argv), "--hidden", "16", "--max-steps", "1", "--no-progress",
            "--output-dir", str(out)]
    with pytest.raises((ValueError, DataError)) as err:
        train(from_cli(argv))
    assert words in one_line(err)
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- the prior check


def load_prior_script():
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "pu_files_prior", Path(__file__).resolve().parents[2] / "scripts" / "pu_files_prior.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_prior_check_makes_the_files_runs_both_arms_per_seed_and_pairs_them(tmp_path, capsys):
    x, y = make_images(n_per_class=20)
    np.savez(tmp_path / "labeled.npz", x=x, y=y)
    script, out = load_prior_script(), tmp_path / "check"
    argv = ["--dataset", str(tmp_path / "labeled.npz"), "--positive-classes", *map(str, POSITIVE), "--pool", "80",
            "--n-eval", "30", "--n-p", "8", "--seeds", "0", "1", "--max-steps", "2", "--hidden", "16",
            "--batch-size", "16", "--out", str(out)]
    assert script.main(argv) == 0
    split = json.loads((out / "data" / "split.json").read_text())
    order = np.random.default_rng(0).permutation(len(y))
    positive = np.isin(y, POSITIVE)
    pos = order[:80][positive[order[:80]]][:8]
    unl = np.setdiff1d(order[:80], pos)
    assert np.array_equal(np.load(out / "data" / "pos.npz")["x"], x[pos])  # as the data set held them: uint8
    assert np.array_equal(np.load(out / "data" / "unl.npz")["x"], x[unl])
    assert "y" not in np.load(out / "data" / "unl.npz")
    assert np.array_equal(np.load(out / "data" / "eval.npz")["y"], positive[order[80:110]].astype(int))
    assert split["true_prior"] == pytest.approx(positive[unl].mean()) and split["n_p"] == 8 and split["n_u"] == 72
    acc = {}
    for arm in ("est", "given"):
        for seed in (0, 1):
            m = json.loads((out / f"{arm}{seed}" / "metrics.json").read_text())
            assert m["seed"] == seed and m["n_labeled"] == 8 and m["steps"] == 2
            assert (m["prior"] == pytest.approx(split["true_prior"])) == (arm == "given")
            acc[arm, seed] = m["eval_accuracy"]
    table = (out / "table.md").read_text()
    diffs = ", ".join(f"{acc['given', s] - acc['est', s]:+.2f}" for s in (0, 1))
    assert f"Given - estimated, paired per seed: {diffs}; mean" in table
    assert f"{acc['est', 0]:.2f}, {acc['est', 1]:.2f}" in table and table in capsys.readouterr().out

    assert script.main(argv) == 0  # again: the finished runs are read, not run again
    assert capsys.readouterr().out.count("already holds this run, finished") == 4
    assert (out / "table.md").read_text() == table


@pytest.mark.parametrize("argv,words", [
    (["--n-p", "0"], "--n-p must be >= 1, got 0"),
    (["--seeds", "1", "1"], "--seeds lists a seed twice"),
    (["--pool", "100", "--n-eval", "30"], "--pool 100 and --n-eval 30 need 130 images; "),
    (["--n-p", "60"], "--n-p 60: the 80 training images hold "),
])
def test_the_prior_check_refuses_bad_sizes_in_one_line(tmp_path, argv, words):
    x, y = make_images(n_per_class=20)
    np.savez(tmp_path / "labeled.npz", x=x, y=y)
    with pytest.raises(ValueError) as err:
        load_prior_script().main(["--dataset", str(tmp_path / "labeled.npz"), "--positive-classes", "0", "2", "4",
                                  "--pool", "80", "--n-eval", "30", "--out", str(tmp_path / "o"), *argv])
    assert words in one_line(err)
