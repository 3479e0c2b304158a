"""CPC on image arrays (issue 44, item 4; CPC section 3.2): the patch grid, the masked context, the grid loss
against a float64 transcription written over patches, and `--contrastive cpc` through the PU and PNU pipelines
(files, export, exact resume, refusals). Tiny 16x16 arrays, a few steps each."""

import csv
import json
import math

import numpy as np
import pytest
import torch

from fewshot.config import from_cli
from fewshot.image_run import load_image_classifier
from fewshot.images import (CPC_GRID, CPCHeads, ImageModel, MaskedContext, PatchEncoder, cpc_grid_loss,
                            patch_layout)
from fewshot.train import train
from shared_losses import cpc_nce
from shared_losses.data import DataError

from ..folder_rules import tree_hash
from .test_images import ONNX_OF_CONV, checkpoint_weights, image_cfg, make_images, one_line

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def npz16(tmp_path):
    """An .npz of 120 uint8 16x16 images, six classes (the smallest side a patch grid takes)."""
    x, y = make_images(side=16)
    path = tmp_path / "digits16.npz"
    np.savez(path, x=x, y=y)
    return str(path), x, y


def cpc_cfg(path, out, **overrides):
    return image_cfg(path, out, **{"encoder": "patches", "contrastive": "cpc", "cpc_steps": 2, "cpc_group": 4,
                                   **overrides})


# ---------------------------------------------------------------------------------------------- the model


@pytest.mark.parametrize("h,w,want", [
    (28, 28, (8, 4, (2, 2, 2, 2))),  # digits: 8x8 patches, stride 4, on the image padded to 32x32
    (16, 16, (4, 2, (0, 0, 0, 0))),  # the smallest
    (256, 256, (64, 32, (0, 0, 0, 0))),  # the paper's: 64x64 crops, 32 apart, on 256x256
    (20, 30, (8, 4, (1, 1, 6, 6))),  # padded to the longer side's grid, evenly
])
def test_patch_layout_keeps_the_papers_proportions(h, w, want):
    patch, stride, pad = patch_layout(h, w)
    assert (patch, stride, pad) == want
    assert patch == 2 * stride and (CPC_GRID - 1) * stride + patch == w + pad[0] + pad[1] == h + pad[2] + pad[3]


def test_images_under_16_pixels_are_refused_in_one_line():
    with pytest.raises(DataError, match="at least 16 pixels a side") as err:
        PatchEncoder((1, 15, 15))
    one_line(err)
    with pytest.raises(DataError, match="needs images"):
        PatchEncoder((784,))


def test_grid_latents_are_each_patch_through_the_same_cnn_and_features_the_pooled_grid():
    torch.manual_seed(0)
    enc = PatchEncoder((2, 20, 30), width=4, latent_dim=5, pool=1).double()
    x = torch.rand(3, 2, 20, 30, dtype=torch.float64)
    z = enc.grid_latents(x)
    assert z.shape == (3, CPC_GRID, CPC_GRID, 5)
    left, right, top, bottom = enc.pad
    padded = torch.zeros(3, 2, 20 + top + bottom, 30 + left + right, dtype=torch.float64)
    padded[:, :, top:top + 20, left:left + 30] = x
    p, s = enc.patch, enc.stride
    for i in range(CPC_GRID):
        for j in range(CPC_GRID):
            want = enc.net(padded[:, :, i * s:i * s + p, j * s:j * s + p])
            torch.testing.assert_close(z[:, i, j], want, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(enc(x), z.mean(dim=(1, 2)), rtol=1e-12, atol=1e-12)  # pool 1: the paper's mean
    enc.pool, enc.feat_dim = 3, 45
    cells = [(0, 3), (2, 5), (4, 7)]  # adaptive pooling of 7 rows into 3: overlapping windows
    want = torch.cat([z[:, r0:r1, c0:c1].mean(dim=(1, 2)) for r0, r1 in cells for c0, c1 in cells], dim=1)
    torch.testing.assert_close(enc(x), want, rtol=1e-12, atol=1e-12)
    assert ImageModel("patches", (1, 16, 16)).head.in_features == 50 * 9  # the default, 3x3 cells
    with pytest.raises(ValueError, match="--patch-pool must be 1 to 7"):
        PatchEncoder((1, 16, 16), pool=8)


def test_masked_context_sees_the_rows_above_and_its_own_never_below():
    torch.manual_seed(0)
    ctx = MaskedContext(latent_dim=3, context_dim=4).double()
    z = torch.randn(2, CPC_GRID, CPC_GRID, 3, dtype=torch.float64)
    base = ctx(z)
    assert base.shape == (2, CPC_GRID, CPC_GRID, 4)
    for r in range(CPC_GRID):
        moved = z.clone()
        moved[:, r] += 1.0
        changed = (ctx(moved) - base).abs().amax(dim=(0, 2, 3)) > 1e-12  # per row of the context
        assert not changed[:r].any(), r  # nothing above row r reads it
        assert changed[r:].all(), r  # row r and every row below do (3 layers reach 6 rows down)


def transcription(z, c, W, K, t, group):
    """CPC's image loss written over patches: for image b, column j, row i and step k with i + k < g, the score of
    every patch (b2, i2, j2) of b's group is z[b2, i2, j2] . W_k c[b, i, j] / t; the term is -log of the target's
    (b, i + k, j) softmax among them. Each step's mean over its terms, then the mean over the steps."""
    B, g = len(z), len(z[0])
    per_step = {k: [] for k in range(1, K + 1)}
    for b in range(B):
        members = range((b // group) * group, min(B, (b // group + 1) * group))
        for j in range(g):
            for i in range(g):
                for k in range(1, K + 1):
                    if i + k >= g:
                        continue
                    pred = [sum(W[k - 1][e][f] * c[b][i][j][f] for f in range(len(c[b][i][j])))
                            for e in range(len(W[k - 1]))]
                    scores = {(b2, i2, j2): sum(a * q for a, q in zip(z[b2][i2][j2], pred)) / t
                              for b2 in members for i2 in range(g) for j2 in range(g)}
                    top = max(scores.values())
                    log_total = top + math.log(sum(math.exp(s - top) for s in scores.values()))
                    per_step[k].append(log_total - scores[(b, i + k, j)])
    means = [sum(v) / len(v) for v in per_step.values() if v]
    return sum(means) / len(means)


@pytest.mark.parametrize("group", [1, 2, 5])
def test_grid_loss_matches_a_float64_transcription_over_patches(group):
    torch.manual_seed(1)
    B, d, K, t = 5, 3, 2, 0.5
    heads = CPCHeads(latent_dim=d, steps=K, temperature=t, context_dim=4).double()
    z = torch.randn(B, CPC_GRID, CPC_GRID, d, dtype=torch.float64)
    got = cpc_grid_loss(z, heads, group)
    c = heads.context(z)
    W = heads.loss.predictors.weight.detach().view(K, d, 4)
    want = transcription(z.tolist(), c.tolist(), W.tolist(), K, t, group)
    assert got.item() == pytest.approx(want, rel=1e-10, abs=1e-10)
    if group >= B:  # one group: one cpc_nce call over every column of the batch
        seq_z, seq_c = z.transpose(1, 2).reshape(B * CPC_GRID, CPC_GRID, d), c.transpose(1, 2).reshape(
            B * CPC_GRID, CPC_GRID, 4)
        torch.testing.assert_close(got, cpc_nce(seq_z, heads.loss.predict(seq_c), temperature=t))


def test_grid_loss_trains_the_encoder_the_context_and_the_maps():
    torch.manual_seed(0)
    model = ImageModel("patches", (1, 16, 16), cpc_steps=3, temperature=0.5)
    loss = cpc_grid_loss(model.encoder.grid_latents(torch.rand(6, 1, 16, 16)), model.cpc, 4)
    assert math.log(4 * CPC_GRID ** 2) - 1 < loss.item() < math.log(4 * CPC_GRID ** 2) + 1  # near chance at init
    loss.backward()
    for name, p in model.named_parameters():
        if name.startswith(("encoder.", "cpc.")):
            assert p.grad is not None and p.grad.abs().sum() > 0, name
        else:  # projector and head: not CPC's
            assert p.grad is None, name


def test_cpc_heads_need_the_patch_encoder_and_a_step_inside_the_grid():
    with pytest.raises(ValueError, match="need the patch encoder"):
        ImageModel("cnn", (1, 16, 16), cpc_steps=2)
    with pytest.raises(ValueError, match="at most 6 rows below"):
        ImageModel("patches", (1, 16, 16), cpc_steps=7)


# ---------------------------------------------------------------------------------------------- runs


@pytest.mark.parametrize("setting,n,pool", [("pu", 8, 3), ("pnu", 20, 1)])
def test_cpc_image_run_writes_its_files_and_exports_a_classifier_without_the_heads(npz16, tmp_path, setting, n,
                                                                                   pool):
    path, x, y = npz16
    out = tmp_path / "run"
    metrics = train(cpc_cfg(path, out, setting=setting, n_labeled=n, patch_pool=pool))
    assert metrics["contrastive"] == "cpc" and metrics["encoder"] == "patches"
    assert set(metrics["probes"]) == ({"pn", "upu", "nnpu"} if setting == "pu" else {"logreg"})
    rows = list(csv.DictReader(open(out / "log.csv")))
    assert [int(r["step"]) for r in rows] == [1, 2, 3, 4]
    assert all(0 < float(r["loss_cpc"]) < 2 * math.log(4 * CPC_GRID ** 2) for r in rows)
    config = json.loads((out / "config.json").read_text())
    assert (config["cpc_steps"], config["cpc_group"], config["encoder"]) == (2, 4, "patches")
    blob = torch.load(out / "model" / "image_classifier.pt", weights_only=False)
    assert blob["kind"] == "patches" and not any(k.startswith("cpc.") for k in blob["state_dict"])
    predict = load_image_classifier(out)
    scores = predict.scores(x[:7])
    assert scores.shape == (7,) and np.isfinite(scores).all()
    portable = json.loads((out / "model" / "config.json").read_text())
    assert portable["architecture"]["encoder_module"] == "fewshot.images.PatchEncoder"
    assert portable["architecture"]["patch_pool"] == pool and blob["patch_pool"] == pool
    # float32 sums over 49 patches in another order, then standardised: 1e-4 (the MLP and CNN hold 1e-5)
    ts = torch.jit.load(str(out / "model" / "image_classifier.torchscript.pt"))
    np.testing.assert_allclose(ts(torch.from_numpy(x[:7])).numpy(), scores, rtol=1e-4, atol=1e-4)
    if not ONNX_OF_CONV:  # torch 2.5-2.6: the ONNX file is left out, and metrics.json says so
        assert [n.split(":")[0] for n in metrics["exports"]["notes"]] == ["image_classifier.onnx not written"]
        return
    assert metrics["exports"]["files"] and "notes" not in metrics["exports"], metrics["exports"]
    import onnxruntime

    onnx = onnxruntime.InferenceSession(str(out / "model" / "image_classifier.onnx"))
    np.testing.assert_allclose(onnx.run(None, {"images": x[:7]})[0], scores, rtol=1e-4, atol=1e-4)


def test_cpc_checkpoint_holds_the_heads_and_a_resumed_run_equals_a_straight_one(npz16, tmp_path):
    path, _, _ = npz16
    train(cpc_cfg(path, tmp_path / "full", max_steps=6, checkpoint_every=100))
    train(cpc_cfg(path, tmp_path / "cut", max_steps=3, checkpoint_every=100))
    cut = tmp_path / "cut"
    before = tree_hash(cut)
    with pytest.raises(ValueError, match=r"cpc_steps: 2 -> 3") as err:
        train(cpc_cfg(path, cut, max_steps=6, resume=True, cpc_steps=3, checkpoint_every=100))
    one_line(err)
    assert tree_hash(cut) == before
    train(cpc_cfg(path, cut, max_steps=6, resume=True, checkpoint_every=100))
    rows = {n: list(csv.DictReader(open(tmp_path / n / "log.csv"))) for n in ("full", "cut")}
    assert len(rows["full"]) == 6 and rows["full"] == rows["cut"]
    full_w, cut_w = checkpoint_weights(tmp_path / "full"), checkpoint_weights(cut)
    assert any(k.split(":")[1].startswith("cpc.") for k in full_w)  # the heads are checkpointed
    assert full_w.keys() == cut_w.keys() and all(torch.equal(full_w[k], cut_w[k]) for k in full_w)
    metrics = {n: json.loads((tmp_path / n / "metrics.json").read_text()) for n in ("full", "cut")}
    assert metrics["full"]["probes"] == metrics["cut"]["probes"]


def test_the_command_line_gives_cpc_its_encoder_and_refuses_what_does_not_fit(npz16, tmp_path):
    path, _, _ = npz16
    base = ["images", "--dataset", path, "--positive-classes", "0", "2", "4", "--output-dir", str(tmp_path / "r")]
    cfg = from_cli(base + ["--contrastive", "cpc"])
    assert (cfg.encoder, cfg.cpc_steps, cfg.cpc_group, cfg.patch_pool) == ("patches", 5, 16, 3)
    cfg.validate()
    assert from_cli(base + ["--contrastive", "infonce", "--encoder", "patches"]).encoder == "patches"
    refusals = [
        (["--contrastive", "cpc", "--encoder", "mlp"], "--contrastive cpc trains the patches encoder: pass "
                                                       "--encoder patches"),
        (["--contrastive", "infonce", "--cpc-steps", "3"], "--cpc-steps applies to --contrastive cpc only"),
        (["--contrastive", "dcl", "--cpc-group", "8"], "--cpc-group applies to --contrastive cpc only"),
        (["--contrastive", "cpc", "--cpc-steps", "7"], "--cpc-steps must be 1 to 6"),
        (["--contrastive", "cpc", "--cpc-group", "0"], "--cpc-group must be >= 1"),
        (["--contrastive", "infonce", "--patch-pool", "1"], "--patch-pool applies to --encoder patches only"),
        (["--contrastive", "cpc", "--patch-pool", "0"], "--patch-pool must be 1 to 7"),
        # recorded in config.json and without effect (the same log.csv to the byte): now refused
        (["--encoder", "cnn", "--hidden", "512"], "--hidden is the mlp encoder's width; --encoder cnn"),
        (["--contrastive", "cpc", "--hidden", "64"], "--hidden is the mlp encoder's width; --encoder patches"),
        (["--contrastive", "none", "--augment", "0"], "--augment shapes the contrastive stage's views"),
        (["--contrastive", "none", "--temperature", "0.05", "--augment", "2"],
         "--augment / --temperature shape the contrastive stage's views .* --contrastive none has none"),
    ]
    for extra, words in refusals:
        with pytest.raises(ValueError, match=words) as err:
            from_cli(base + extra).validate()
        one_line(err)
    from_cli(base + ["--hidden", "64", "--augment", "0", "--temperature", "0.2"]).validate()  # read: mlp + punce
    with pytest.raises(ValueError, match="--cpc-steps is not an option of the text pipeline; it belongs to `python -m "
                                         "fewshot.train images`"):
        from_cli(["--dataset", "reuters", "--cpc-steps", "3"])


def test_cpc_on_images_too_small_for_the_grid_is_one_line_and_writes_nothing(tmp_path):
    x, y = make_images(side=10)
    np.savez(tmp_path / "d.npz", x=x, y=y)
    out = tmp_path / "run"
    with pytest.raises(DataError, match="at least 16 pixels a side") as err:
        train(cpc_cfg(tmp_path / "d.npz", out))
    one_line(err)
    assert not out.exists() or not any(out.iterdir())


def test_a_short_side_under_16_pixels_is_refused_and_a_grid_of_padding_is_warned_about():
    """8x40 images passed (only the longer side was checked) and were padded to 40x40, 4 of the 7 rows of patches
    only padding; now the shorter side must be 16 or more too, and a grid with rows (or columns) of padding alone
    warns, naming how many."""
    with pytest.raises(DataError, match="at least 16 pixels a side .* these are 8x40") as err:
        PatchEncoder((1, 8, 40))
    one_line(err)
    with pytest.warns(UserWarning, match="pads 16x100 images to a square: 4 of its 7 rows of patches hold only"):
        PatchEncoder((1, 16, 100))
    with pytest.warns(UserWarning, match="pads 40x16 images to a square: 2 of its 7 columns"):
        PatchEncoder((1, 40, 16))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        PatchEncoder((1, 20, 30))  # padded 6 rows top and bottom: every row of patches still sees the image
        PatchEncoder((1, 28, 28))


def test_tau_plus_is_refused_for_every_loss_but_dcl(tmp_path):
    """--contrastive cpc (or punce, infonce, ...) with --tau-plus 0.3 trained as without it, saying nothing."""
    for contrastive in ("cpc", "punce", "infonce", "scl", "none"):
        with pytest.raises(ValueError, match=f"--tau-plus applies to --contrastive dcl only, not --contrastive "
                                             f"{contrastive}"):
            image_cfg(tmp_path / "d.npz", tmp_path / "run", contrastive=contrastive, tau_plus=0.3,
                      encoder="patches" if contrastive == "cpc" else "mlp").validate()
    image_cfg(tmp_path / "d.npz", tmp_path / "run", contrastive="dcl", tau_plus=0.3).validate()
