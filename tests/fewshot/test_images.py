"""fewshot on image arrays (fewshot.images, fewshot.image_run): loading and checking the arrays, the
positive-class mapping, the augmentation, the MLP / CNN encoders through the PU and PNU pipelines, exact
resume, the one-line errors, and the command line's preset for image data. Tiny arrays, a few steps each."""

import re
import csv
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from fewshot.config import ImageConfig, from_cli
from fewshot.image_export import CONFIG_FILE, ONNX_FILE, TORCHSCRIPT_FILE, WEIGHTS_FILE
from fewshot.image_run import TEST_FRACTION, load_image_classifier
from fewshot.images import Augment, CNNEncoder, ImageModel, MLPEncoder, binary_labels, features, stratified_split
from fewshot.train import train
from shared_losses.data import DataError, check_arrays, load_images
from shared_losses.training.runtime import run_id

from ..folder_rules import tree_hash
from tests import warm

ROOT = Path(__file__).resolve().parents[2]
#: six classes of 20 images each; the even ones form the positive class
N_CLASSES, PER_CLASS, POSITIVE = 6, 20, (0, 2, 4)


def make_images(n_per_class=PER_CLASS, classes=N_CLASSES, side=10, channels=None, seed=0):
    """uint8 images (N, side, side) or (N, side, side, channels): noise plus a bright bar in a row that
    depends on the class, so that a few steps learn something but not everything."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(classes), n_per_class)
    shape = (len(y), side, side) + ((channels,) if channels else ())
    x = rng.integers(0, 140, size=shape)
    for c in range(classes):
        x[y == c, c + 1] += 110
    return np.clip(x, 0, 255).astype(np.uint8), y


pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny networks: one thread (tests/conftest.py)

#: torch's exporter writes a working ONNX file of the CNN and patch encoders (adaptive pooling, unfold) from torch 2.7
#: on (with an onnxscript of its time); with torch 2.5-2.6 (the oldest the project supports) the run leaves that file
#: out and says so in metrics.json's exports notes. The MLP goes through the TorchScript-based exporter everywhere.
ONNX_OF_CONV = tuple(int(v) for v in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 7)


def onnx_expected(encoder: str) -> bool:
    return encoder == "mlp" or ONNX_OF_CONV


@pytest.fixture
def npz(tmp_path):
    """An .npz of 120 uint8 10x10 images, six classes; returns (path, x, y)."""
    x, y = make_images()
    path = tmp_path / "digits.npz"
    np.savez(path, x=x, y=y)
    return str(path), x, y


def image_cfg(dataset, out, **overrides):
    """A tiny image run: PU with n_P = 8 unless ``overrides`` say otherwise (--setting pnu takes labeled_percent)."""
    pu = overrides.get("setting", "pu") == "pu"
    fields = dict(dataset=str(dataset), encoder="mlp", setting="pu", contrastive="punce", **({"n_labeled": 8} if pu
                  else {}), positive_classes=POSITIVE, hidden=16, max_steps=4, passes=None, batch_size=16,
                  progress=False, output_dir=str(out))
    cfg = {**fields, **overrides}
    if cfg["encoder"] != "mlp" and "hidden" not in overrides:  # the mlp's width: refused for the other encoders
        del cfg["hidden"]
    return ImageConfig(**cfg)


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


# ---------------------------------------------------------------------------------------------- data


def test_images_are_converted_in_one_new_array_with_the_same_values():
    """A float copy and then a transposed one took about 8x the uint8 bytes at the peak (1.66 GB for 154 MB of RGB
    images, a probe); one float32 array now, the values bit for bit those of the two steps."""
    import tracemalloc

    from shared_losses.data import check_arrays

    rng = np.random.default_rng(0)
    y = np.zeros(2000, np.int64)
    for x in (rng.integers(0, 256, (2000, 32, 32, 3), dtype=np.uint8), rng.random((2000, 32, 32, 3)),
              rng.integers(0, 256, (2000, 16, 16), dtype=np.int64)):
        two_steps = x.astype(np.float32) / 255.0 if x.dtype.kind in "iu" else x.astype(np.float32)
        two_steps = two_steps[:, None] if x.ndim == 3 else np.ascontiguousarray(two_steps.transpose(0, 3, 1, 2))
        tracemalloc.start()
        got = check_arrays(x, y, "t").x
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert np.array_equal(got, two_steps) and got.dtype == np.float32 and got.flags["C_CONTIGUOUS"]
        assert peak < got.nbytes + x.size + 2 ** 20, (peak, got.nbytes)  # the result, the NaN check's mask


def test_npz_of_each_layout_loads_as_float_images_in_0_1(tmp_path):
    x, y = make_images(n_per_class=5, classes=2)  # (10, 10, 10) uint8
    np.savez(tmp_path / "u8.npz", x=x, y=y)
    s = load_images(str(tmp_path / "u8.npz"))
    assert s.x.shape == (10, 1, 10, 10) and s.x.dtype == np.float32 and s.shape == (1, 10, 10)
    np.testing.assert_array_equal(s.x[:, 0], x.astype(np.float32) / 255.0)
    assert s.y.dtype == np.int64 and s.y.tolist() == y.tolist()

    rgb = np.random.default_rng(1).random((10, 9, 8, 3))  # (N, H, W, C) float64 in [0, 1]
    np.savez(tmp_path / "rgb.npz", x=rgb, y=y)
    s = load_images(str(tmp_path / "rgb.npz"))
    assert s.x.shape == (10, 3, 9, 8) and s.x.dtype == np.float32
    np.testing.assert_allclose(s.x, rgb.transpose(0, 3, 1, 2).astype(np.float32))
    assert s.x.flags["C_CONTIGUOUS"]

    flat = np.random.default_rng(2).random((10, 37)).astype(np.float32)  # (N, D)
    np.savez(tmp_path / "flat.npz", x=flat, y=y)
    s = load_images(str(tmp_path / "flat.npz"))
    assert s.x.shape == (10, 37) and s.shape == (37,)
    np.testing.assert_array_equal(s.x, flat)
    # float class ids that are whole numbers are fine, and booleans are the ids 1 (True) and 0
    assert check_arrays(x, y.astype(np.float64), "t").y.dtype == np.int64
    flags = check_arrays(x, y == 1, "t").y
    assert flags.dtype == np.int64 and flags.tolist() == (y == 1).astype(int).tolist()
    for layout in (s.x, load_images(str(tmp_path / "u8.npz")).x, load_images(str(tmp_path / "rgb.npz")).x):
        assert 0.0 <= layout.min() and layout.max() <= 1.0


def test_mnist_is_the_shipped_5000_digits():
    s = load_images("mnist")
    assert s.x.shape == (5000, 1, 28, 28) and s.x.dtype == np.float32
    assert np.bincount(s.y).tolist() == [500] * 10
    assert s.x.min() == 0.0 and s.x.max() == 1.0
    # uint8 pixels divided by 255: every value is a multiple of 1/255
    assert np.allclose(np.round(s.x[:50] * 255), s.x[:50] * 255, atol=1e-4)


def test_positive_classes_map_exactly_the_named_ids_to_1():
    y = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 3, 3])
    assert binary_labels(y, (0, 2, 4, 6, 8), "t").tolist() == [1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 0, 0]
    assert binary_labels(y, (3,), "t").tolist() == [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1]
    b = np.array([1, 0, 0, 1, 1])
    assert binary_labels(b, None, "t").tolist() == [1, 0, 0, 1, 1]
    assert binary_labels(b, (0,), "t").tolist() == [0, 1, 1, 0, 0]  # the named class, even when it is 0
    with pytest.raises(DataError, match=r"t: 10 class ids.*--positive-classes") as err:
        binary_labels(y, None, "t")
    one_line(err)


def test_stratified_split_is_disjoint_per_class_and_seeded():
    y = np.repeat(np.arange(3), 10)
    a, b, rest = stratified_split(y, (0.2, 0.3), seed=4)
    assert np.bincount(y[a]).tolist() == [2, 2, 2] and np.bincount(y[b]).tolist() == [3, 3, 3]
    assert sorted(np.concatenate([a, b, rest]).tolist()) == list(range(30))
    assert all((p == np.sort(p)).all() for p in (a, b, rest))
    again = stratified_split(y, (0.2, 0.3), seed=4)
    assert all((p == q).all() for p, q in zip((a, b, rest), again))
    assert not (stratified_split(y, (0.2, 0.3), seed=5)[0] == a).all()


# ---------------------------------------------------------------------------------------------- views


@pytest.mark.parametrize("shape", [(5, 1, 28, 28), (5, 3, 8, 8), (5, 16)])
def test_augment_keeps_the_shape_and_range_and_follows_the_seed(shape):
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    aug = Augment()
    v1 = aug(x, torch.Generator().manual_seed(1))
    assert v1.shape == x.shape and v1.dtype == x.dtype
    assert v1.min() >= 0.0 and v1.max() <= 1.0
    assert not torch.equal(v1, x)  # a view, not a copy
    assert torch.equal(v1, aug(x, torch.Generator().manual_seed(1)))
    assert not torch.equal(v1, aug(x, torch.Generator().manual_seed(2)))
    # strength 0: the images themselves, and the generator untouched
    g = torch.Generator().manual_seed(3)
    state = g.get_state()
    assert torch.equal(Augment(strength=0.0)(x, g), x) and torch.equal(g.get_state(), state)


def test_augment_crops_small_images_less():
    aug = Augment()
    assert aug.area_floor(28) == pytest.approx(0.5)
    assert aug.area_floor(8) == pytest.approx(1 - 0.5 * 8 / 28)  # keeps at least ~86 % of an 8x8 image
    assert aug.area_floor(8) > aug.area_floor(16) > aug.area_floor(28)
    assert aug.area_floor(64) == aug.area_floor(28)
    assert Augment(strength=0.5).area_floor(28) == pytest.approx(0.75)
    # without jitter or rotation, the crop of a constant image is that constant (no padding pulled in)
    crop = Augment(rotate=0.0, jitter=0.0)(torch.full((4, 1, 8, 8), 0.5), torch.Generator().manual_seed(0))
    assert torch.allclose(crop, torch.full_like(crop, 0.5), atol=1e-5)


def test_encoders_take_any_size_from_8x8_and_give_features():
    for shape in [(1, 8, 8), (3, 10, 12), (1, 28, 28)]:
        x = torch.rand((4,) + shape)
        assert MLPEncoder(shape, hidden=16)(x).shape == (4, 50)
        assert CNNEncoder(shape, width=4)(x).shape == (4, 50)
    with pytest.raises(DataError, match="flat vectors of 64 values: use --encoder mlp"):
        CNNEncoder((64,))
    with pytest.raises(ValueError, match="--encoder mlp, cnn, patches, got 'vit'"):
        ImageModel("vit", (1, 8, 8))
    torch.manual_seed(0)
    m = ImageModel("mlp", (1, 8, 8), hidden=16)
    h, z, logit = m(torch.rand(4, 1, 8, 8))
    assert h.shape == (4, 50) and z.shape == (4, 50) and logit.shape == (4,)
    x = np.random.default_rng(0).random((5, 1, 8, 8)).astype(np.float32)
    f = features(m, x, batch_size=2)  # batches of 2, eval mode: the same as all at once
    assert f.shape == (5, 50) and m.training
    assert torch.allclose(f, features(m, x), atol=1e-6)


# ---------------------------------------------------------------------------------------------- runs


def eval_images(x, y, seed=0):
    """The test split a run without --eval-file scores (raw arrays) and its binary labels."""
    test = stratified_split(y, (TEST_FRACTION,), seed)[0]
    return x[test], np.isin(y[test], POSITIVE).astype(np.int64)


RUNS = {
    "mlp-pu-punce": dict(encoder="mlp", setting="pu", contrastive="punce", n_labeled=8),
    "cnn-pu-punce": dict(encoder="cnn", setting="pu", contrastive="punce", n_labeled=8),
    "mlp-pnu-scl": dict(encoder="mlp", setting="pnu", contrastive="scl", labeled_percent=20),
    "cnn-pnu-scl": dict(encoder="cnn", setting="pnu", contrastive="scl", labeled_percent=20),
    # end to end (lr 1e-2: enough for 4 steps to move the head off one class, so the check below bites)
    "mlp-pu-none": dict(encoder="mlp", setting="pu", contrastive="none", n_labeled=8, lr=1e-2),
    "cnn-pnu-none": dict(encoder="cnn", setting="pnu", contrastive="none", labeled_percent=50, lr=1e-2),
    "mlp-pu-infonce": dict(encoder="mlp", setting="pu", contrastive="infonce", n_labeled=8),
    "cnn-pu-dcl": dict(encoder="cnn", setting="pu", contrastive="dcl", n_labeled=8, tau_plus=0.2),
    "mlp-pnu-punce": dict(encoder="mlp", setting="pnu", contrastive="punce", labeled_percent=10),
}


@pytest.mark.parametrize("name", list(RUNS))
def test_image_run_writes_its_files_and_an_exported_classifier_that_scores_the_same(npz, tmp_path, name):
    path, x, y = npz
    opts = RUNS[name]
    out = tmp_path / "run"
    metrics = train(image_cfg(path, out, **opts))
    on_disk = json.loads((out / "metrics.json").read_text())
    assert on_disk["eval_accuracy"] == metrics["eval_accuracy"]
    assert 0.0 <= metrics["eval_accuracy"] <= 100.0
    assert metrics["contrastive"] == opts["contrastive"] and metrics["encoder"] == opts["encoder"]
    assert metrics["positive_classes"] == list(POSITIVE) and "preset" not in metrics
    assert metrics["n_test"] == 24 and metrics["n_eval"] == 24 and metrics["n_pool"] + metrics["n_dev"] == 96
    if opts["setting"] == "pu":
        assert set(metrics["probes"]) == {"pn", "upu", "nnpu"}
        assert metrics["eval_accuracy"] == metrics["probes"]["nnpu"]
    else:
        key = "ce" if opts["contrastive"] == "none" else "logreg"
        assert set(metrics["probes"]) == {key} and metrics["eval_accuracy"] == metrics["probes"][key]
    assert all(0.0 <= v <= 100.0 for v in metrics["probes"].values())
    scores = metrics["eval_scores"]  # the classifier of eval_accuracy: its F1, ROC-AUC, ... beside it
    assert scores["accuracy"] == metrics["eval_accuracy"] and on_disk["eval_scores"] == scores
    assert scores["n_positive"] + scores["n_negative"] == 24 and scores["roc_auc"] is not None

    config = json.loads((out / "config.json").read_text())
    assert config["encoder"] == opts["encoder"] and config["positive_classes"] == list(POSITIVE)
    assert config["pipeline"] == "images"
    # the image defaults, explicit options on top (--hidden is the mlp's: the others keep the default)
    assert config["hidden"] == (16 if opts["encoder"] == "mlp" else 256) and config["temperature"] == 0.5
    assert config["lr"] == opts.get("lr", 1e-3)
    sample = json.loads((out / "sample.json").read_text())
    labeled, unlabeled = np.array(sample["labeled"]), np.array(sample["unlabeled"])
    assert not set(labeled) & set(unlabeled) and len(labeled) + len(unlabeled) == metrics["n_pool"]
    assert metrics["n_labeled"] == len(labeled)
    # the pool's class ids: the dataset's minus the test and development splits, in order
    test = stratified_split(y, (TEST_FRACTION,), 0)[0]
    rest = np.setdiff1d(np.arange(len(y)), test)
    dev_rel, pool_rel = stratified_split(y[rest], (config["dev_fraction"],), 1)
    pool_y = np.isin(y[rest[pool_rel]], POSITIVE)
    if opts["setting"] == "pu":
        assert len(labeled) == opts["n_labeled"] and pool_y[labeled].all()  # labeled = positives only
    else:  # a percentage of each class of the pool
        assert pool_y[labeled].any() and not pool_y[labeled].all()
        assert len(labeled) == sum(max(1, round(opts["labeled_percent"] / 100 * (pool_y == c).sum()))
                                   for c in (0, 1))
        assert metrics["labeled_percent"] == opts["labeled_percent"]
    # exact priors: pi over the unlabeled images, pi_p over the whole pool
    assert metrics["prior"] == pytest.approx(pool_y[unlabeled].mean())
    if "encoder_labeled" in sample:  # --label-share's default: puNCE's pi over what the encoder reads as unlabeled
        enc_unlabeled = np.setdiff1d(np.arange(len(pool_y)), sample["encoder_labeled"])
        assert metrics["encoder_prior"] == pytest.approx(pool_y[enc_unlabeled].mean())
    assert metrics["pool_prior"] == pytest.approx(pool_y.mean())
    rows = list(csv.DictReader(open(out / "log.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]

    predict = load_image_classifier(out)
    ex, ey = eval_images(x, y)
    pred = predict(ex)  # raw uint8 arrays, as a user would pass them
    assert pred.shape == (24,) and set(pred.tolist()) <= {0, 1}
    assert float((pred == ey).mean() * 100.0) == pytest.approx(metrics["eval_accuracy"])
    assert predict.positive_classes == list(POSITIVE)
    assert (predict.scores(ex) > 0).astype(np.int64).tolist() == pred.tolist()
    with pytest.raises(ValueError, match="this classifier takes"):
        predict(np.zeros((2, 12, 12), np.uint8))
    onnx = onnx_expected(opts["encoder"])
    assert {p.name for p in (out / "model").iterdir()} == {
        "image_classifier.pt", TORCHSCRIPT_FILE, WEIGHTS_FILE, CONFIG_FILE} | ({ONNX_FILE} if onnx else set())
    assert metrics["exports"]["files"]
    if onnx:
        assert "notes" not in metrics["exports"]
    else:
        assert [n.split(":")[0] for n in metrics["exports"]["notes"]] == [f"{ONNX_FILE} not written"]


def test_rgb_and_flat_arrays_run_and_a_square_flat_vector_feeds_the_cnn(tmp_path):
    x, y = make_images(channels=3, side=8)
    np.savez(tmp_path / "rgb.npz", x=x.astype(np.float32) / 255.0, y=y)
    m = train(image_cfg(tmp_path / "rgb.npz", tmp_path / "rgb", encoder="cnn", max_steps=3))
    assert 0.0 <= m["eval_accuracy"] <= 100.0
    flat = x[..., 0].reshape(len(x), 64)
    np.savez(tmp_path / "flat.npz", x=flat, y=y)
    for encoder in ("mlp", "cnn"):
        m = train(image_cfg(tmp_path / "flat.npz", tmp_path / f"flat-{encoder}", encoder=encoder, max_steps=3))
        ex, ey = eval_images(flat, y)
        pred = load_image_classifier(tmp_path / f"flat-{encoder}")(ex)
        assert float((pred == ey).mean() * 100.0) == pytest.approx(m["eval_accuracy"])


def test_eval_file_and_dev_split_choose_what_is_scored(npz, tmp_path):
    path, _, y = npz
    ex, ey = make_images(n_per_class=5, seed=5)
    np.savez(tmp_path / "eval.npz", x=ex, y=ey)
    m = train(image_cfg(path, tmp_path / "evf", eval_file=str(tmp_path / "eval.npz"), max_steps=3))
    assert m["n_test"] == 0 and m["n_eval"] == 30 and m["n_pool"] + m["n_dev"] == 120
    assert m["eval_split"].startswith("--eval-file")
    pred = load_image_classifier(tmp_path / "evf")(ex)
    assert float((pred == np.isin(ey, POSITIVE)).mean() * 100.0) == pytest.approx(m["eval_accuracy"])
    m = train(image_cfg(path, tmp_path / "dev", eval_split="dev", max_steps=3))
    assert m["n_eval"] == m["n_dev"] == 12 and m["n_test"] == 24 and m["eval_split"].startswith("development split")
    np.savez(tmp_path / "big.npz", x=make_images(side=12)[0], y=y)
    with pytest.raises(DataError, match=r"big.npz: its examples have shape \(1, 12, 12\), the training data's "
                                        r"\(1, 10, 10\)") as err:
        train(image_cfg(path, tmp_path / "bad", eval_file=str(tmp_path / "big.npz")))
    one_line(err)
    assert not (tmp_path / "bad").exists()


def test_the_images_pipeline_has_the_chosen_defaults_and_explicit_options_win(npz, tmp_path, capsys):
    from fewshot.config import ImageConfig
    from fewshot.train import main

    assert isinstance(from_cli(["images", "--dataset", "x.npz"]), ImageConfig)
    assert from_cli(["images"]).dataset == "mnist" and from_cli(["images"]).lr == 1e-3
    path, _, _ = npz
    out = tmp_path / "cli"
    main(["images", "--dataset", path, "--encoder", "mlp", "--setting", "pu", "--positive-classes", "0", "2", "4",
          "--n-labeled", "8", "--hidden", "16", "--max-steps", "3", "--batch-size", "16",
          "--no-progress", "--output-dir", str(out)])
    config = json.loads((out / "config.json").read_text())
    assert config["lr"] == 1e-3 and config["temperature"] == 0.5  # the pipeline's defaults
    assert config["passes"] is None  # an explicit --max-steps replaces the default passes
    assert config["max_steps"] == 3 and config["batch_size"] == 16 and config["positive_classes"] == [0, 2, 4]
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["step"] == 3 and line["result"]["contrastive"] == "punce"
    assert set(line["result"]["probes"]) == {"pn", "upu", "nnpu"}


# ---------------------------------------------------------------------------------------------- resume


def checkpoint_weights(out: Path) -> dict:
    from safetensors.torch import load_file

    files = sorted((out / "checkpoint").glob("model*.safetensors"))
    assert files
    return {f"{f.name}:{k}": v for f in files for k, v in load_file(f).items()}


@pytest.mark.parametrize("name", ["mlp-pu-punce", "cnn-pnu-scl", "mlp-pu-none"])
def test_resumed_image_run_equals_a_straight_one(npz, tmp_path, name, capsys):
    path, _, _ = npz
    opts = {**RUNS[name], "checkpoint_every": 100}
    train(image_cfg(path, tmp_path / "full", max_steps=6, **opts))
    train(image_cfg(path, tmp_path / "cut", max_steps=3, **opts))
    cut = tmp_path / "cut"
    # a resume that changes an option, or asks for fewer steps than trained, is refused; nothing changes
    before = tree_hash(cut)
    with pytest.raises(ValueError, match=r"weight_decay: 1e-05 -> 0\.002") as err:
        train(image_cfg(path, cut, max_steps=6, resume=True, weight_decay=2e-3, **opts))
    one_line(err)
    with pytest.raises(ValueError, match="--max-steps 2 is below the 3 steps"):
        train(image_cfg(path, cut, max_steps=2, resume=True, **opts))
    assert tree_hash(cut) == before

    capsys.readouterr()
    train(image_cfg(path, cut, max_steps=6, resume=True, **opts))
    assert f"resumed from {cut / 'checkpoint'} at step 3 of 6\n" in capsys.readouterr().out  # it used to say nothing
    rows = {n: list(csv.DictReader(open(tmp_path / n / "log.csv"))) for n in ("full", "cut")}
    assert len(rows["full"]) == 6 and rows["full"] == rows["cut"]
    metrics = {n: json.loads((tmp_path / n / "metrics.json").read_text()) for n in ("full", "cut")}
    assert metrics["full"]["eval_accuracy"] == metrics["cut"]["eval_accuracy"]
    assert metrics["full"]["probes"] == metrics["cut"]["probes"] and metrics["cut"]["steps"] == 6
    full_w, cut_w = checkpoint_weights(tmp_path / "full"), checkpoint_weights(cut)
    assert full_w.keys() == cut_w.keys() and all(torch.equal(full_w[k], cut_w[k]) for k in full_w)
    assert json.loads((cut / "sample.json").read_text()) == json.loads((tmp_path / "full" / "sample.json").read_text())


def test_resume_of_a_finished_image_run_does_nothing_and_refuses_other_options(npz, tmp_path):
    path, _, _ = npz
    out = tmp_path / "run"
    first = train(image_cfg(path, out, max_steps=3))
    finished = tree_hash(out)
    assert train(image_cfg(path, out, max_steps=3, resume=True)) == first
    assert tree_hash(out) == finished
    for field, value in (("temperature", 0.7), ("augment", 0.5), ("positive_classes", (0, 2)), ("hidden", 8)):
        with pytest.raises(ValueError, match=f"{field}: ") as err:
            train(image_cfg(path, out, max_steps=3, resume=True, **{field: value}))
        one_line(err)
        assert tree_hash(out) == finished
    with pytest.raises(FileExistsError, match=r"--resume.*--overwrite"):
        train(image_cfg(path, out, max_steps=3))
    assert tree_hash(out) == finished


def test_resume_of_a_finished_zero_step_image_run_does_nothing(npz, tmp_path):
    path, _, _ = npz
    out = tmp_path / "run"
    first = train(image_cfg(path, out, max_steps=0))
    finished = tree_hash(out)
    assert train(image_cfg(path, out, max_steps=0, resume=True)) == first
    assert tree_hash(out) == finished


def test_ctrl_c_in_an_image_run_checkpoints_the_step_and_resumes_exactly(npz, tmp_path, monkeypatch, capsys):
    import fewshot.image_run as image_run

    from ..folder_rules import check_interrupt_exits_130, interrupt_on_call

    path, _, _ = npz
    kw = dict(max_steps=5, checkpoint_every=4)
    train(image_cfg(path, tmp_path / "full", **kw))
    interrupt_on_call(monkeypatch, image_run, "encoder_loss", at=2)
    check_interrupt_exits_130(capsys, lambda: train(image_cfg(path, tmp_path / "cut", **kw)), where="step 2")
    monkeypatch.undo()
    assert not (tmp_path / "cut" / "metrics.json").exists()
    train(image_cfg(path, tmp_path / "cut", resume=True, **kw))
    rows = {n: list(csv.DictReader(open(tmp_path / n / "log.csv"))) for n in ("full", "cut")}
    assert rows["full"] == rows["cut"]
    metrics = {n: json.loads((tmp_path / n / "metrics.json").read_text()) for n in ("full", "cut")}
    assert metrics["full"]["probes"] == metrics["cut"]["probes"]


def test_image_runs_follow_the_folder_rules(npz, tmp_path):
    from ..folder_rules import check_folder_rules

    path, _, _ = npz
    data = tmp_path / "data"
    data.mkdir()
    dataset = data / "d.npz"
    Path(path).rename(dataset)

    def run(folder, **flags):
        return train(image_cfg(dataset, folder, max_steps=2, **flags))

    check_folder_rules(tmp_path, "fewshot", run, other_app="nlp_qt")


# ---------------------------------------------------------------------------------------------- errors


BAD_ARRAYS = [
    (np.zeros((4, 8, 8, 1, 1), np.uint8), np.arange(4), r"x must have shape \(N, H, W\).*got \(4, 8, 8, 1, 1\)"),
    (np.zeros((4,), np.uint8), np.arange(4), r"x must have shape .*got \(4,\)"),
    (np.zeros((4, 8, 8), np.uint8), np.zeros((4, 1), np.int64), r"y must have shape \(N,\).*got \(4, 1\)"),
    (np.zeros((4, 8, 8), np.uint8), np.arange(3), "x holds 4 images but y holds 3 labels"),
    (np.zeros((0, 8, 8), np.uint8), np.arange(0), "no images"),
    (np.where(np.arange(4)[:, None, None] == 2, np.nan, 0.5) * np.ones((4, 8, 8)), np.arange(4),
     r"64 NaN or infinite values \(the first in image 2\)"),
    (np.full((4, 8, 8), np.inf), np.arange(4), "NaN or infinite"),
    (np.full((4, 8, 8), 1.5), np.arange(4), r"float pixels must lie in \[0, 1\], found values in \[1.5, 1.5\]"),
    (np.full((4, 8, 8), 200.0), np.arange(4), r"\[0, 1\].*divide by 255"),
    (np.full((4, 8, 8), -0.5), np.arange(4), r"float pixels must lie in \[0, 1\]"),
    (np.full((4, 8, 8), 300, np.int16), np.arange(4),
     r"integer pixels must lie in 0-255, found values in \[300, 300\]"),
    (np.full((4, 8, 8), -1, np.int32), np.arange(4), "integer pixels must lie in 0-255"),
    (np.zeros((4, 7, 8), np.uint8), np.arange(4), "images of 7x8 pixels are too small; 8x8"),
    (np.zeros((4, 8, 8, 5), np.uint8), np.arange(4), "5 channels; 1 to 4 expected"),
    (np.zeros((4, 3, 8, 8), np.uint8), np.arange(4), r"8 channels; 1 to 4 expected \(channels first\?"),
    (np.zeros((4, 8, 8), bool), np.arange(4), "x must hold numbers"),
    (np.zeros((4, 8, 8), np.uint8), np.array([0, 1, 0.5, 1]), r"y must hold integer class ids.*\[0\.5\]"),
    (np.zeros((4, 8, 8), np.uint8), np.array([0, 1, np.nan, 1]), "y must hold integer class ids"),
    (np.zeros((4, 8, 8), np.uint8), np.array(["b", "a", "a", "b"]),
     r"y holds text labels \('a', 'b'\); save class ids instead: names, y = numpy.unique\(labels, "
     r"return_inverse=True\), then name the positive ones by their ids \(here 'a' = 0, 'b' = 1\)"),
    (np.zeros((7, 8, 8), np.uint8), np.array(list("abcdefg")),
     r"\('a', 'b', 'c', 'd', 'e', \.\.\.\);.*'e' = 4, \.\.\.\)"),
    (np.zeros((4, 8, 8), np.uint8), np.array([1, 2, 3, 4], dtype=np.complex64), "y must hold integer class ids, got "
     "dtype complex64"),
]


@pytest.mark.parametrize("x,y,words", BAD_ARRAYS)
def test_bad_arrays_are_one_line_errors(x, y, words):
    with pytest.raises(DataError, match=words) as err:
        check_arrays(x, y, "--dataset my.npz")
    assert one_line(err).startswith("--dataset my.npz: ")


def test_bad_positive_classes_are_one_line_errors():
    y = np.repeat(np.arange(4), 3)
    with pytest.raises(DataError, match=r"--positive-classes \[7\] never occur in the labels, whose class ids are "
                                        r"\[0, 1, 2, 3\]") as err:
        binary_labels(y, (1, 7), "t")
    one_line(err)
    with pytest.raises(DataError, match="negative class is empty") as err:
        binary_labels(y, (0, 1, 2, 3), "t")
    one_line(err)


def test_bad_files_are_one_line_errors_and_write_nothing(tmp_path):
    x, y = make_images(n_per_class=4, classes=2)
    np.savez(tmp_path / "no_y.npz", x=x, labels=y)
    with pytest.raises(DataError, match=r"needs arrays 'x' \(images\) and 'y'.*missing \['y'\], it holds "
                                        r"\['x', 'labels'\]") as err:
        load_images(str(tmp_path / "no_y.npz"))
    one_line(err)
    (tmp_path / "text.npz").write_text("label,pixels\n1,0 0 0\n")
    # numpy reads what is neither a zip nor a .npy as a pickle and advised loading it "unsafely": not relayed
    with pytest.raises(DataError, match=r"--eval-file .*text.npz: not an .npz file \(neither a zip of arrays nor a "
                                        r"NumPy array; it begins b'label,pixels\\n1,0'\); write one with numpy.savez"
                       ) as err:
        load_images(str(tmp_path / "text.npz"), "--eval-file")
    one_line(err)
    assert "pickle" not in str(err.value)
    with pytest.raises(FileNotFoundError, match=r"--dataset .*missing.npz: file not found"):
        load_images(str(tmp_path / "missing.npz"))
    # through a run: refused before anything is written
    np.savez(tmp_path / "multi.npz", x=make_images()[0], y=make_images()[1])
    for dataset, error, words in ((tmp_path / "missing.npz", FileNotFoundError, "file not found"),
                                  (tmp_path / "no_y.npz", DataError, "missing"),
                                  (tmp_path / "multi.npz", DataError, "6 class ids .*--positive-classes")):
        out = tmp_path / "out"
        with pytest.raises(error, match=words):
            train(image_cfg(dataset, out, positive_classes=None))
        assert not out.exists()


@pytest.mark.parametrize("kind", ["empty", "truncated", "npy"])
def test_damaged_or_wrong_kind_npz_files_are_one_line_errors(tmp_path, kind):
    path = tmp_path / "bad.npz"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        x, y = make_images(n_per_class=4, classes=2)
        np.savez(path, x=x, y=y)
        path.write_bytes(path.read_bytes()[:200])
    else:
        with open(path, "wb") as fh:
            np.save(fh, np.zeros((4, 8, 8), np.uint8))
    with pytest.raises(DataError, match=r"bad.npz: ") as err:
        load_images(str(path))
    one_line(err)


def test_options_that_do_not_fit_image_data_are_refused_before_writing(npz, tmp_path):
    path, _, _ = npz
    out = tmp_path / "out"
    flat = tmp_path / "flat.npz"
    x, y = make_images()
    np.savez(flat, x=x.reshape(len(x), -1)[:, :60], y=y)  # 60 values: not a square
    small_square = tmp_path / "small.npz"
    np.savez(small_square, x=x.reshape(len(x), -1)[:, :49], y=y)  # 7x7: too small for the CNN
    cases = [
        (dict(dataset=str(flat), encoder="cnn"), DataError, "--encoder cnn needs images; these are flat vectors of 60"),
        (dict(dataset=str(small_square), encoder="cnn"), DataError, "flat vectors of 49 values"),
        (dict(encoder="roberta-base"), ValueError, "needs --encoder mlp / cnn / patches, got 'roberta-base'"),
        (dict(setting="pnu", labeled_percent=0), ValueError, r"--labeled-percent must be in \(0, 100\].*got 0"),
        (dict(setting="pnu", labeled_percent=150), ValueError, r"\(0, 100\] .*got 150"),
        (dict(setting="pnu", n_labeled=50), ValueError, "--n-labeled 50 applies to --setting pu.*--labeled-percent"),
        (dict(setting="pu", labeled_percent=5), ValueError, "--labeled-percent 5 applies to --setting pnu"),
        (dict(setting="pu", n_labeled=0), ValueError, r"--n-labeled must be >= 1 \(n_P labeled positives\)"),
        (dict(n_labeled=200), DataError, "--n-labeled 200: the training pool has .* positive images"),
        (dict(batch_size=None, batch_unlabeled=0), ValueError, "--batch-unlabeled must be >= 1"),
        (dict(batch_size=1), ValueError, r"--batch-size must be >= 2"),
        (dict(positive_classes=(0, 9)), DataError, r"--positive-classes \[9\] never occur"),
        (dict(positive_classes=tuple(range(6))), DataError, "negative class is empty"),
        (dict(augment=-1.0), ValueError, "--augment must be >= 0"),
        (dict(tau_plus=1.0), ValueError, r"--tau-plus must be in \[0, 1\)"),
    ]
    for overrides, error, words in cases:
        with pytest.raises(error, match=words) as err:
            train(image_cfg(overrides.pop("dataset", path), out, **overrides))
        one_line(err)
        assert not out.exists(), overrides


@pytest.mark.parametrize("pipeline,argv,words", [
    ("text", ["--contrastive", "infonce"], "--contrastive is not an option of the text pipeline; it belongs to "
                                            "`python -m fewshot.train images`"),
    ("text", ["--positive-classes", "1"], "--positive-classes is not an option of the text pipeline"),
    ("text", ["--tau-plus=0.2"], "--tau-plus is not an option of the text pipeline"),
    ("text", ["--labeled-percent", "5"], "belongs to `python -m fewshot.train images`"),
    ("text", ["--setting", "pu"], "text PU learning is its own pipeline: `python -m fewshot.train pu`"),
    ("text", ["--positive-file", "p.txt"], "belongs to `python -m fewshot.train pu`"),
    ("text", ["--dataset", "mnist"], "--dataset mnist is image data: run `python -m fewshot.train images"),
    ("pu", ["--dataset", "x.npz"], "--dataset x.npz is image data"),
    ("pu", ["--objective", "ce"], "--objective is not an option of the pu pipeline; it belongs to `python -m "
                                  "fewshot.train text`"),
    ("pu", ["--lam", "0.5"], "--lam is not an option of the pu pipeline"),
    ("images", ["--objective", "ce"], "--objective is not an option of the images pipeline"),
    ("images", ["--pooling", "mean"], "--pooling is not an option of the images pipeline; it belongs to `python -m "
                                      "fewshot.train text` or `python -m fewshot.train pu`"),
    ("images", ["--preset", "cpu"], "--preset is for the text pipelines"),
    ("images", ["--gather-across-processes"], "--gather-across-processes is not an option of the images pipeline"),
])
def test_an_option_of_another_pipeline_is_refused_naming_its_pipeline(pipeline, argv, words):
    with pytest.raises(ValueError, match=re.escape(words)) as err:
        from_cli([pipeline, *argv])
    one_line(err)


def test_each_config_refuses_data_of_another_pipeline(tmp_path):
    from fewshot.config import FewShotConfig, ImageConfig, PuConfig

    for cfg, words in ((FewShotConfig(dataset="mnist"), "--dataset mnist is image data"),
                       (PuConfig(dataset="d.npz"), "--dataset d.npz is image data"),
                       (ImageConfig(dataset="reuters"), "--dataset reuters is not image data")):
        cfg.output_dir = str(tmp_path / "out")
        with pytest.raises(ValueError, match=words) as err:
            train(cfg)
        one_line(err)
        assert not (tmp_path / "out").exists()


@pytest.mark.slow  # runs the entry point in a subprocess
def test_command_line_error_is_one_line_naming_positive_classes(tmp_path):
    x, y = make_images()
    np.savez(tmp_path / "multi.npz", x=x, y=y)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    res = warm.run([sys.executable, "-m", "fewshot.train", "images", "--dataset", str(tmp_path / "multi.npz"),
                          "--encoder",
                          "mlp", "--no-progress", "--output-dir", str(tmp_path / "out")], cwd=ROOT, env=env,
                   capture_output=True, text=True, timeout=300)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(errors) == 1, res.stderr
    assert "6 class ids" in errors[0] and "--positive-classes" in errors[0] and "multi.npz" in errors[0]
    assert not (tmp_path / "out").exists()


def test_the_prior_is_exact_given_or_estimated_and_the_pool_prior_follows_from_it(npz, tmp_path):
    path, _, _ = npz
    exact = train(image_cfg(path, tmp_path / "exact", max_steps=1))
    given = train(image_cfg(path, tmp_path / "given", max_steps=1, prior=0.3))
    est = train(image_cfg(path, tmp_path / "est", max_steps=1, estimate_prior=True))
    n_l, n_u = exact["n_labeled"], exact["n_unlabeled"]
    assert exact["prior_source"].startswith("exact") and given["prior_source"] == "given"
    assert est["prior_source"] == "elkan-noto (pixels)" and 0.0 <= est["prior"] <= 1.0
    for m in (exact, given, est):  # pi_p = (n_P + n_U pi) / (n_P + n_U): the positive share of the pool
        assert m["pool_prior"] == pytest.approx((n_l + n_u * m["prior"]) / (n_l + n_u))
    assert given["prior"] == 0.3
    config = json.loads((tmp_path / "est" / "config.json").read_text())
    assert config["prior_used"] == est["prior"] and config["pool_prior"] == est["pool_prior"]


def test_an_elkan_noto_estimate_of_0_is_refused_for_images_as_for_text(npz, tmp_path, monkeypatch):
    """The text pipeline refuses an estimate of 0 ("found no positives"); the image pipeline trained puNCE with pi = 0
    and the probes with pi_p = n_P / n, without a word."""
    import fewshot.image_run as image_run

    path, _, _ = npz
    monkeypatch.setattr(image_run, "elkan_noto_prior", lambda *a, **k: 0.0)
    with pytest.raises(ValueError, match=r"Elkan-Noto estimate of the prior came out as 0: it found no positives "
                                         r"among the unlabeled images.*--prior P"):
        train(image_cfg(path, tmp_path / "zero", max_steps=1, estimate_prior=True))
    assert not (tmp_path / "zero").exists()  # refused before the run folder is made


def test_passes_set_the_steps_from_the_pool_size(npz, tmp_path, capsys):
    path, _, _ = npz
    m = train(image_cfg(path, tmp_path / "p2", passes=2.0))
    assert m["n_pool"] == 84 and m["steps"] == int(round(2.0 * 84 / 16))  # 84 pool images, 16 per step
    assert json.loads((tmp_path / "p2" / "config.json").read_text())["max_steps"] == m["steps"]
    assert len(list(csv.DictReader(open(tmp_path / "p2" / "log.csv")))) == m["steps"]
    # resume with more passes trains on; the same passes again does nothing
    more = train(image_cfg(path, tmp_path / "p2", passes=3.0, resume=True))
    assert more["steps"] == int(round(3.0 * 84 / 16)) > m["steps"]
    capsys.readouterr()
    again = train(image_cfg(path, tmp_path / "p2", passes=3.0, resume=True))
    assert again == more and "nothing to do" in capsys.readouterr().out
    # the command line: the default passes unless --max-steps is given
    from fewshot.train import main

    main(["images", "--dataset", path, "--positive-classes", "0", "2", "4", "--n-labeled", "8", "--hidden", "16",
          "--batch-size", "16", "--no-progress", "--output-dir", str(tmp_path / "cli")])
    config = json.loads((tmp_path / "cli" / "config.json").read_text())
    assert config["passes"] == pytest.approx(300 * 256 / 3500) and config["max_steps"] == int(
        round(config["passes"] * 84 / 16))
    with pytest.raises(ValueError, match="--passes must be a positive number"):
        train(image_cfg(path, tmp_path / "bad", passes=0.0))


PORTABLE_CHECK = r"""
import sys
for name in ("fewshot", "shared_losses", "nlp_qt", "rl_curl"):  # the suite cannot be imported here
    sys.modules[name] = None
import json
from pathlib import Path

import numpy as np
import onnxruntime
import torch

model, x = Path(sys.argv[1]), np.load(sys.argv[2])
config = json.loads((model / "config.json").read_text())
assert config["input"]["dtype"] == str(x.dtype), (config["input"], x.dtype)
ts = torch.jit.load(str(model / "image_classifier.torchscript.pt"))
onnx = onnxruntime.InferenceSession(str(model / "image_classifier.onnx"))
out = {"torchscript": ts(torch.from_numpy(x)).numpy().tolist(),
       "onnx": onnx.run(None, {"images": x})[0].tolist(),
       "one": ts(torch.from_numpy(x[:1])).numpy().tolist()}
print(json.dumps(out))
"""


@pytest.mark.parametrize("encoder,setting,contrastive", [("mlp", "pu", "punce"), ("cnn", "pnu", "infonce")])
def test_the_exported_image_classifier_loads_and_predicts_without_the_suite(tmp_path, encoder, setting,
                                                                            contrastive):
    """Issue 46, item 3: TorchScript with torch alone and ONNX with onnxruntime, in a process where the suite's
    packages cannot be imported, give load_image_classifier's scores to 1e-5, on raw uint8 arrays (the
    normalisation inside), for any batch size; fewshot.export writes them again only with --overwrite."""
    if not onnx_expected(encoder):
        pytest.skip(f"torch {torch.__version__} writes no ONNX file of the {encoder} (torch 2.7 and later do)")
    from fewshot.export import export_run

    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    out = tmp_path / "run"
    train(image_cfg(tmp_path / "d.npz", out, encoder=encoder, setting=setting, contrastive=contrastive,
                    **({"n_labeled": 8} if setting == "pu" else {"labeled_percent": 20})))
    raw = make_images(n_per_class=3, seed=5)[0]  # raw uint8 (N, 10, 10), as a user holds them
    np.save(tmp_path / "x.npy", raw)
    ref = load_image_classifier(out).scores(raw)
    res = warm.run([sys.executable, "-c", PORTABLE_CHECK, str(out / "model"), str(tmp_path / "x.npy")],
                   capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    for name in ("torchscript", "onnx"):
        np.testing.assert_allclose(np.array(got[name]), ref, rtol=1e-5, atol=1e-5, err_msg=name)
    np.testing.assert_allclose(np.array(got["one"]), ref[:1], rtol=1e-5, atol=1e-5)
    with pytest.raises(FileExistsError, match="already holds this run's export; pass --overwrite"):
        export_run(out)
    assert export_run(out, overwrite=True) == out / "model"
    elsewhere = export_run(out, tmp_path / "portable")
    assert (elsewhere / "image_classifier.onnx").is_file() and (elsewhere / "image_classifier.pt").is_file()


def test_the_end_to_end_pu_risks_weight_a_batch_of_set_sizes_by_its_own_prior(npz, tmp_path, monkeypatch):
    """With --batch-labeled / --batch-unlabeled the raw-pixel PU learners' U (the whole batch) was weighted by the
    pool's prior, though its labeled share is the batch's (4 of 12 here, 8 of 120 in the pool): a biased risk.
    --batch-size B draws from the pool, and the pool's prior stays."""
    import fewshot.image_run as image_run

    path, _, _ = npz
    seen = []
    real = image_run.end_to_end_loss

    def spy(name, logits, y, n_lab, pi_p):
        seen.append((n_lab, len(logits), pi_p))
        return real(name, logits, y, n_lab, pi_p)

    monkeypatch.setattr(image_run, "end_to_end_loss", spy)
    m = train(image_cfg(path, tmp_path / "sets", contrastive="none", batch_size=None, batch_labeled=4,
                        batch_unlabeled=8, max_steps=1))
    pi = m["prior"]
    assert {s[:2] for s in seen} == {(4, 12)}
    assert all(s[2] == pytest.approx((4 + 8 * pi) / 12) for s in seen) and m["pool_prior"] != pytest.approx(seen[0][2])
    seen.clear()
    m = train(image_cfg(path, tmp_path / "drawn", contrastive="none", max_steps=1))  # --batch-size 16
    assert seen and all(s[2] == m["pool_prior"] for s in seen)


def test_max_steps_given_in_python_wins_over_the_default_passes(npz, tmp_path):
    """ImageConfig(max_steps=3) from Python trained the default passes' steps (2,400 on the digits, four minutes)
    without a word: only the command line dropped the passes for an explicit --max-steps."""
    path, _, _ = npz
    fields = dict(dataset=str(path), encoder="mlp", setting="pu", contrastive="punce", n_labeled=8,
                  positive_classes=POSITIVE, hidden=16, batch_size=16, progress=False)
    train(ImageConfig(**fields, max_steps=3, output_dir=str(tmp_path / "three")))
    saved = json.loads((tmp_path / "three" / "config.json").read_text())
    assert saved["max_steps"] == 3 and saved["passes"] is None
    default = ImageConfig(**fields, output_dir=str(tmp_path / "d"))  # the default passes still set the length
    from fewshot.train import explicit_steps_win

    assert explicit_steps_win(default) is default and default.passes is not None
    both = ImageConfig(**fields, max_steps=3, passes=0.5, output_dir=str(tmp_path / "b"))
    assert explicit_steps_win(both) is both  # passes given: they win, as --passes does


def test_an_image_export_is_replaced_only_by_its_own_run_and_a_damaged_classifier_is_named(tmp_path):
    """--overwrite let another run's export be replaced (the files were told apart by name only), refused without it
    as "this run's export"; a cut image_classifier.pt was a traceback (and was unpickled with code allowed)."""
    from fewshot.export import export_run

    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    runs = {}
    for name, seed in (("a", 0), ("b", 1)):
        runs[name] = tmp_path / name
        train(image_cfg(tmp_path / "d.npz", runs[name], encoder="mlp", setting="pu", n_labeled=8, seed=seed,
                        max_steps=2))
    portable = export_run(runs["a"], tmp_path / "portable")
    assert json.loads((portable / "config.json").read_text())["run_id"] == run_id(runs["a"])
    before = {p.name: p.read_bytes() for p in portable.iterdir()}
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match="holds another run's export"):
            export_run(runs["b"], portable, overwrite=overwrite)
    assert {p.name: p.read_bytes() for p in portable.iterdir()} == before
    assert export_run(runs["a"], portable, overwrite=True) == portable  # its own run's: replaced when asked
    cut = tmp_path / "cut"
    shutil.copytree(runs["a"], cut)
    blob = cut / "model" / "image_classifier.pt"
    blob.write_bytes(blob.read_bytes()[:2000])
    with pytest.raises(ValueError, match=r"image_classifier.pt could not be read .*the file is damaged"):
        export_run(cut, overwrite=True)
    with pytest.raises(ValueError, match="the file is damaged"):
        load_image_classifier(cut)


@pytest.mark.parametrize("change", ["shuffled", "relabeled", "one pixel"])
def test_an_image_run_resumed_on_changed_images_is_refused_and_a_grid_does_not_count_it(npz, tmp_path, change):
    """A resume after the .npz was shuffled, relabeled or edited went on with other images (sample.json rewritten
    with new indices), as image runs recorded no fingerprint of their data."""
    from fewshot.grids import refuse_other_finished_run

    path, x, y = npz
    cfg = image_cfg(path, tmp_path / "run", max_steps=3, checkpoint_every=100)
    train(cfg)
    recorded = json.loads((tmp_path / "run" / "sample.json").read_text())
    assert len(recorded["data_sha256"]) == 64
    refuse_other_finished_run(tmp_path / "run", cfg)  # the same images: counted
    if change == "shuffled":
        p = np.random.default_rng(1).permutation(len(y))
        x, y = x[p], y[p]
    elif change == "relabeled":
        y = np.where(y == 1, 2, np.where(y == 2, 1, y))  # two negative classes swapped: the same binary labels
    else:
        x = x.copy()
        x[:, 0, 0] ^= 1
    np.savez(path, x=x, y=y)
    with pytest.raises(ValueError, match="the data differ from those the run was made with") as err:
        train(image_cfg(path, tmp_path / "run", max_steps=6, checkpoint_every=100, resume=True))
    one_line(err)
    assert json.loads((tmp_path / "run" / "sample.json").read_text()) == recorded
    with pytest.raises(ValueError, match="it cannot count as a run of this grid's data"):
        refuse_other_finished_run(tmp_path / "run", cfg)


def test_image_files_a_user_has_get_errors_that_say_how_to_make_the_npz(tmp_path):
    """A .npy or a folder of images was told it is 'not image data' and sent to the text pipelines; an object array
    (images of different sizes) was 'not a readable .npz file'."""
    x, y = make_images()
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "folder").mkdir()
    for bad in (tmp_path / "x.npy", tmp_path / "folder"):
        with pytest.raises(ValueError, match=r"numpy.savez\('images.npz', x=x, y=y\)") as err:
            ImageConfig(dataset=str(bad), encoder="mlp").validate()
        assert "text runs" not in one_line(err)
    mixed = np.empty(3, dtype=object)
    mixed[0], mixed[1], mixed[2] = np.zeros((10, 10)), np.zeros((10, 10)), np.zeros((12, 12))
    np.savez(tmp_path / "mixed.npz", x=mixed, y=np.array([0, 1, 0]))
    with pytest.raises(DataError, match="holds an array of Python objects, not of numbers .images of different") as err:
        load_images(str(tmp_path / "mixed.npz"))
    one_line(err)
    # a header claiming 400 TB (a damaged or crafted file): a raw MemoryError traceback before (a probe)
    import io
    import zipfile

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False,
                                                  "shape": (10 ** 6, 10 ** 4, 10 ** 4)})
    labels = io.BytesIO()
    np.save(labels, np.array([0, 1]))
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        z.writestr("x.npy", header.getvalue() + bytes(64))
        z.writestr("y.npy", labels.getvalue())
    with pytest.raises(DataError, match=r"huge.npz: its arrays do not fit in this machine's memory \(.*\); a damaged "
                                        "file can claim any size") as err:
        load_images(str(tmp_path / "huge.npz"))
    one_line(err)


def test_binary_mask_pixels_are_warned_of():
    x, y = make_images()
    with pytest.warns(UserWarning, match="integer pixels of 0 and 1 only"):
        check_arrays((x > 128).astype(np.int64), y, "masks.npz")


def test_evaluation_images_in_the_training_pool_are_counted(npz, tmp_path):
    from fewshot.image_run import image_data

    path, x, y = npz
    np.savez(tmp_path / "eval.npz", x=x[:30], y=y[:30])
    cfg = image_cfg(path, tmp_path / "run", eval_file=str(tmp_path / "eval.npz"))
    with pytest.warns(UserWarning, match=r"of the 30 evaluation images \(--eval-file .*eval.npz\) also stand in the "
                                         r"training pool \(--dataset .*\), pixel for pixel: the run may train "
                                         r"on images it is scored on"):
        image_data(cfg)


def test_a_pu_prior_of_zero_is_refused_as_in_the_text_pu_pipeline(npz, tmp_path):
    path, _, _ = npz
    with pytest.raises(ValueError, match="--prior must be above 0 with --setting pu"):
        image_cfg(path, tmp_path / "run", prior=0.0).validate()
    image_cfg(path, tmp_path / "run", prior=0.0, setting="pnu", labeled_percent=20.0).validate()


def test_one_image_given_to_a_saved_classifier_is_told_to_be_a_batch_of_one(npz, tmp_path):
    path, x, _ = npz
    train(image_cfg(path, tmp_path / "run", encoder="cnn", contrastive="none", max_steps=1))
    clf = load_image_classifier(tmp_path / "run")
    with pytest.raises(ValueError, match=r"one image\? pass a batch of one: images\[None\]"):
        clf.scores(x[0])
    assert clf.scores(x[0][None]).shape == (1,)


def test_the_end_to_end_pu_risks_are_the_formulas_with_the_whole_batch_as_u():
    """end_to_end_loss on a hand-made batch against uPU's and nnPU's formulas written out (sigmoid loss
    l(z, t) = sigmoid(-t z)): P the labeled first rows, U every row of the batch, the labeled ones included
    (a spy test saw only the arguments; U as the unlabeled rows alone went unnoticed)."""
    from fewshot.image_run import end_to_end_loss

    logits = torch.tensor([2.0, 0.5, -1.0, 1.5, -0.5, -2.0, 0.3])
    y = torch.tensor([1, 1, 0, 1, 0, 0, 1])
    n_lab, pi = 2, 0.4
    lp, lu = logits[:n_lab], logits  # U: the whole batch

    def loss(z, t):
        return torch.sigmoid(-t * z).mean()

    pos, neg = pi * loss(lp, 1.0), loss(lu, -1.0) - pi * loss(lp, -1.0)
    assert neg > 0  # so nnPU's objective is its risk, pos + neg, here
    torch.testing.assert_close(end_to_end_loss("upu", logits, y, n_lab, pi), pos + neg)
    torch.testing.assert_close(end_to_end_loss("nnpu", logits, y, n_lab, pi), pos + neg)
    torch.testing.assert_close(end_to_end_loss("ce", logits, y, n_lab, pi),
                               torch.nn.functional.binary_cross_entropy_with_logits(lp, y[:n_lab].float()))


def test_a_run_seeds_pythons_and_numpys_generators_too(npz, tmp_path):
    """Two runs of one seed saved different Python random states in their checkpoints (only torch was seeded): no
    result used them, but a library drawing from them would have been unseeded, and a resume restored a state seeded
    by the clock. Now the run's seed sets them all (accelerate's set_seed), so the saved states are equal."""
    path, _, _ = npz
    import random

    states = []
    for k, name in enumerate(("warm-up", "a", "b")):  # the warm-up: a library imported at the first run draws once
        random.seed(k)  # each process's generators start where the clock put them
        np.random.seed(k)
        train(image_cfg(path, tmp_path / name, checkpoint_every=2))
        states.append(torch.load(tmp_path / name / "checkpoint" / "random_states_0.pkl", weights_only=False))
    assert states[1]["random_state"] == states[2]["random_state"]
    assert (states[1]["numpy_random_seed"][1] == states[2]["numpy_random_seed"][1]).all()


def test_torch_threads_is_an_option_as_in_rl_curl(npz, tmp_path):
    """fewshot.train had no option for torch's thread count (only OMP_NUM_THREADS), which changes a CPU run's last
    digits; --torch-threads is rl_curl.train's and nlp_qt.train's option too, and a resume may change it."""
    path, _, _ = npz
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train(image_cfg(path, tmp_path / "run", torch_threads=1))
        assert torch.get_num_threads() == 2  # the caller's count given back (a notebook's next run took the run's)
    finally:
        torch.set_num_threads(before)
    assert json.loads((tmp_path / "run" / "config.json").read_text())["torch_threads"] == 1
    train(image_cfg(path, tmp_path / "run", torch_threads=0, resume=True, max_steps=5))  # free on a resume
    with pytest.raises(ValueError, match="--torch-threads must be >= 0"):
        train(image_cfg(path, tmp_path / "bad", torch_threads=-1))


def test_a_run_made_before_an_unread_option_was_refused_still_resumes(npz, tmp_path):
    """An end-to-end run made with `--contrastive none --temperature 0.3` (accepted then, without effect) could not
    be continued once the option was refused ("temperature: 0.3 -> 0.5", and giving it again was refused); nor could
    a grid's interrupted raw row resume. A resume does not compare the options the run does not read."""
    path, _, _ = npz
    run = tmp_path / "old"
    train(image_cfg(path, run, contrastive="none", max_steps=2, checkpoint_every=2))
    for where in ("config.json", "checkpoint/extra.pt"):
        if where.endswith(".json"):
            config = json.loads((run / where).read_text())
            (run / where).write_text(json.dumps({**config, "temperature": 0.3, "augment": 0.0}))
        else:
            extra = torch.load(run / where, weights_only=False)
            extra["config"] = {**extra["config"], "temperature": 0.3, "augment": 0.0}
            torch.save(extra, run / where)
    assert train(image_cfg(path, run, contrastive="none", max_steps=4, resume=True))
    with pytest.raises(ValueError, match="lr"):  # what the run reads is still compared
        train(image_cfg(path, run, contrastive="none", max_steps=6, resume=True, lr=2e-3))
