"""The PU paths of fewshot at their edges: one unlabeled example, priors of 0 or 1 (given, exact or estimated),
positive and unlabeled files that share texts, --prior beside --estimate-prior, --batch-unlabeled 0, a text PU run that
diverges, the batch sizes a run used, an evaluation file of negatives only, the objective an exported PU model names,
a prior tensor that requires grad, and the MLP image classifier's input shapes. Tiny inputs; most call the functions
directly."""

import json
import warnings

import numpy as np
import pytest
import torch

from fewshot.config import PU_OBJECTIVE, ImageConfig, PuConfig
from fewshot.data import FewShotSample, load_pu_files
from fewshot.pu import pu_risk, train_probe
from fewshot.train import train
from shared_losses import punce_loss
from shared_losses.data import DataError

from .conftest import make_texts, text_config, write_tsv
from .test_images import image_cfg, make_images


def one_line(err) -> str:
    text = str(err.value)
    assert "\n" not in text, text
    return text


def _pu_cfg(tiny_encoder, easy_task, out, **kw):
    train_file, dev = easy_task
    base = dict(encoder=tiny_encoder, dataset=train_file, eval_file=dev, n_labeled=10, n_unlabeled=40, max_steps=2,
                batch_labeled=4, batch_unlabeled=8, lr=3e-3, max_length=16, pooling="mean", proj_dim=16,
                checkpoint_every=30, output_dir=str(out), device="cpu", progress=False)
    return text_config(base, setting="pu", **kw)


def _files(tmp_path, pos, unl, name="u.txt"):
    (tmp_path / "p.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / name).write_text("\n".join(unl) + "\n")
    return str(tmp_path / "p.txt"), str(tmp_path / name)


# ------------------------------------------------------------------ 1. one unlabeled example: refused, never NaN

def test_pu_risk_and_train_probe_refuse_empty_or_non_finite_inputs():
    p, u = torch.randn(4), torch.randn(6)
    for bad_p, bad_u, words in ((p[:0], u, "scores_p is empty"), (p, u[:0], "scores_u is empty"),
                                (p, torch.tensor([0.0, float("nan")]), "scores_u contains NaN")):
        with pytest.raises(ValueError, match=words):
            pu_risk(bad_p, bad_u, 0.3)
    for prior in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match=r"pi_p must be in \(0, 1\)"):
            pu_risk(p, u, prior)
    fp, fu = torch.randn(3, 5), torch.randn(8, 5)
    with pytest.raises(ValueError, match="feats_u must be a non-empty"):  # was: torch's "random_ expects 'from'..."
        train_probe(fp, fu[:0], 0.3, "nnpu", epochs=1)
    with pytest.raises(ValueError, match="feats_p must be a non-empty"):
        train_probe(fp[:0], fu, 0.3, "nnpu", epochs=1)
    nan_u = fu.clone()
    nan_u[0, 0] = float("nan")
    with pytest.raises(ValueError, match="feats_u contains NaN or inf"):  # was: a NaN probe, silently
        train_probe(fp, nan_u, 0.3, "nnpu", epochs=1)
    assert torch.isfinite(train_probe(fp, fu, 0.3, "nnpu", epochs=2).weight).all()


def test_one_unlabeled_example_is_refused_up_front(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="--n-unlabeled must be >= 2 in the PU pipeline") as err:
        PuConfig(n_unlabeled=1).validate()
    one_line(err)
    pos, unl = _files(tmp_path, ["a good film", "a great film"], ["a bad film"])
    with pytest.raises(DataError, match="--unlabeled-file .* holds 1 text.* at least 2"):
        load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl))
    # the probes themselves: the unlabeled spread of one row is NaN (and the probes with it)
    import fewshot.pu_probes as probes

    monkeypatch.setattr(probes, "embed_all", lambda model, tok, texts, *a, **k: (torch.randn(len(texts), 4), None))
    sample = FewShotSample(np.arange(3), np.arange(3, 4))
    with pytest.raises(ValueError, match="at least 2 unlabeled examples, got 1"):
        probes._probes(None, None, PuConfig(), ["x"] * 4, sample, [], [], 0.3, "cpu", risks=("nnpu",))


# ------------------------------------------------------------------ 2. image --prior 1, and estimates of 1

def test_image_prior_1_is_refused_before_anything_is_written(tmp_path):
    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    with pytest.raises(ValueError, match="--prior must be below 1 with --setting pu") as err:
        train(image_cfg(tmp_path / "d.npz", tmp_path / "run", prior=1.0))
    one_line(err)
    assert not (tmp_path / "run").exists()
    image_cfg(tmp_path / "d.npz", tmp_path / "run", setting="pnu", prior=1.0).validate()  # PNU: puNCE's pi only


def test_an_image_estimate_of_1_is_refused_before_training_and_leaves_no_folder(tmp_path, monkeypatch):
    import fewshot.image_run as image_run

    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    monkeypatch.setattr(image_run, "elkan_noto_prior", lambda *a, **k: 1.0)
    with pytest.raises(ValueError, match=r"elkan-noto.* came out as 1.*pass --prior") as err:
        train(image_cfg(tmp_path / "d.npz", tmp_path / "run", estimate_prior=True))
    one_line(err)
    assert not (tmp_path / "run").exists()  # a rerun is not told the folder "already holds a run"


# ------------------------------------------------------------------ 3. positive and unlabeled files sharing texts

def test_pu_files_sharing_texts_warn_and_the_same_file_or_u_inside_p_is_refused(tmp_path):
    texts = [t for t, _ in make_texts(12, 0)]
    pos, _ = _files(tmp_path, texts[:4], [])
    with pytest.raises(DataError, match="are the same file"):
        load_pu_files(PuConfig(positive_file=pos, unlabeled_file=pos))
    _, unl = _files(tmp_path, texts[:4], texts[:3], "inside.txt")
    with pytest.raises(DataError, match=r"every text of --unlabeled-file .* \(3\) is also in --positive-file"):
        load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl))
    _, unl = _files(tmp_path, texts[:4], texts[2:10], "some.txt")
    with pytest.warns(UserWarning, match=r"^2 of the 8 texts of --unlabeled-file .* are also in --positive-file"):
        train_x, *_ = load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl))
    assert len(train_x) == 12
    _, unl = _files(tmp_path, texts[:4], texts[4:10], "none.txt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl))


# ------------------------------------------------------------------ 4-6. the prior's options and where it came from

def test_prior_beside_estimate_prior_and_batch_unlabeled_0_are_refused():
    for cfg in (PuConfig(prior=0.3, estimate_prior=True), ImageConfig(prior=0.3, estimate_prior=True)):
        with pytest.raises(ValueError, match="--prior 0.3 and --estimate-prior contradict each other"):
            cfg.validate()
    with pytest.raises(ValueError, match="--batch-unlabeled must be >= 1 in the PU pipeline"):
        PuConfig(batch_unlabeled=0).validate()
    for prior in (0.0, 1.0):
        with pytest.raises(ValueError, match="--prior must be strictly between 0 and 1 in the PU pipeline"):
            PuConfig(prior=prior).validate()


def test_an_exact_prior_of_0_says_where_it_came_from_before_the_encoder_loads(tmp_path):
    rows = make_texts(40, 0)
    few_pos = [(t, y) for t, y in rows if y == 0] + [(t, y) for t, y in rows if y == 1][:3]
    train_file = write_tsv(tmp_path / "few.tsv", few_pos)
    cfg = PuConfig(encoder="no such encoder: never loaded", dataset=train_file, eval_file=train_file, n_labeled=3,
                   n_unlabeled=10, output_dir=str(tmp_path / "run"), device="cpu", progress=False)
    with pytest.raises(ValueError, match=r"the exact prior of the drawn unlabeled sample \(10 examples\) is 0: none "
                                         r"of its examples is positive.*pass --prior") as err:
        train(cfg)
    one_line(err)
    assert not (tmp_path / "run").exists()


def test_the_estimate_advice_fits_the_path(tmp_path, monkeypatch):
    import fewshot.run as run

    monkeypatch.setattr(run, "embed_all", lambda model, tok, texts, *a, **k: (torch.randn(len(texts), 4), None))
    pos, unl = _files(tmp_path, ["a good film"], ["a bad film", "a fine film", "a dull film"])
    cfg = PuConfig(positive_file=pos, unlabeled_file=unl)
    train_x, train_y, _, _, sample = load_pu_files(cfg)
    with pytest.raises(ValueError, match="needs >= 4 labeled positives") as err:
        run.resolve_prior(cfg, np.asarray(train_y), sample, train_x=train_x)
    assert "--positive-file" in str(err.value) and "--n-labeled" not in str(err.value)  # --n-labeled is refused there
    with pytest.raises(ValueError, match=r"the Elkan-Noto estimate of the prior came out as 1: .*pass --prior P"):
        run.check_pu_prior(1.0, "elkan-noto", 3, pu_files=True)


def test_an_estimate_that_is_0_or_1_in_all_but_name_is_refused_as_0_and_1_are():
    """A user's 12 positives and 30 unlabeled texts gave the estimate 1.5e-07: nnPU then ran as if every unlabeled
    text were negative, and nothing said so."""
    import fewshot.run as run

    with pytest.raises(ValueError, match=r"came out as 1\.5e-07: it found no positives among the unlabeled texts; .*"
                                         r"0 in all but name \(4\.5e-06 expected positives among the 30 unlabeled "
                                         r"texts\): pass --prior P"):
        run.check_pu_prior(1.5e-7, "elkan-noto", 30, pu_files=True)
    with pytest.raises(ValueError, match=r"came out as 0\.99: it could not tell .* 1 in all but name \(0\.3 "
                                         r"expected negatives among the 30"):
        run.check_pu_prior(0.99, "elkan-noto", 30)
    for prior, n in ((0.02, 30), (0.98, 30), (1e-4, 10_000), (0.5, 1)):  # half an expected positive or more: kept
        run.check_pu_prior(prior, "elkan-noto", n)
    run.check_pu_prior(1e-4, "exact", 30)  # an exact prior is what the labels say
    run.check_pu_prior(1e-4, "given", 30)


# ------------------------------------------------------------------ 4, 8, 9. what a PU run records

@pytest.mark.slow  # a PU pipeline run end to end (tiny encoder, 2 steps)
def test_a_pu_run_records_the_exact_prior_the_batches_used_and_its_objective(tiny_encoder, easy_task, tmp_path,
                                                                            capsys):
    cfg = _pu_cfg(tiny_encoder, easy_task, tmp_path / "run", prior=0.05, batch_labeled=64)
    with pytest.warns(UserWarning, match=r"--prior 0.05 is far from the exact prior of the drawn unlabeled examples"):
        metrics = train(cfg)
    assert metrics["prior"] == 0.05 and 0.3 < metrics["exact_prior"] < 0.7
    assert metrics["batch_labeled_used"] == 10 and metrics["batch_unlabeled_used"] == 8  # 64 capped to n_P = 10
    assert metrics["eval_scores"]["accuracy"] == metrics["eval_accuracy"]  # the nnPU probe's scores, one float
    assert metrics["eval_scores"]["f1"] is not None
    assert "batches capped to the data: --batch-labeled 64" in capsys.readouterr().err
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["exact_prior"] == metrics["exact_prior"] and saved["objective"] == PU_OBJECTIVE
    export = json.loads((tmp_path / "run" / "model" / "fewshot_export.json").read_text())
    assert export["objective"] == PU_OBJECTIVE  # was "ce+punce", the text pipeline's default


def test_image_prior_far_from_the_exact_one_is_warned_about(tmp_path):
    from fewshot.image_run import exact_image_prior, image_data, priors

    x, y = make_images()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    cfg = image_cfg(tmp_path / "d.npz", tmp_path / "run", prior=0.9)
    data = image_data(cfg)
    with pytest.warns(UserWarning, match="--prior 0.9 is far from the exact prior of the drawn unlabeled images"):
        assert priors(cfg, data)[0] == 0.9
    close = image_cfg(tmp_path / "d.npz", tmp_path / "run", prior=round(exact_image_prior(data), 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        priors(close, data)


# ------------------------------------------------------------------ 7. a text PU run that diverges

def test_a_diverging_text_pu_run_stops_naming_the_steps_and_the_lr(tiny_encoder, easy_task, tmp_path, monkeypatch):
    import fewshot.pu_pipeline as pipeline
    from shared_losses.training.runtime import TrainingDiverged

    calls = []
    real = pipeline.forward_views

    def overflowing(*args):  # finite weights, features that overflow from the second step on
        calls.append(1)
        logits, views = real(*args)
        return logits, [v * float("inf") for v in views] if len(calls) > 1 else views

    monkeypatch.setattr(pipeline, "forward_views", overflowing)
    cfg = _pu_cfg(tiny_encoder, easy_task, tmp_path / "run", max_steps=3, eval_file=None, prior=0.5)
    with pytest.raises(TrainingDiverged, match=r"training diverged between steps 1 and 2: .*lower --lr") as err:
        train(cfg)  # was: "features contains NaN or inf", from the loss's input check
    one_line(err)
    assert not (tmp_path / "run" / "checkpoint").exists() and not (tmp_path / "run" / "metrics.json").exists()


# ------------------------------------------------------------------ 9. evaluation file of negatives only; prior tensor

def test_an_evaluation_file_of_negatives_only_is_scored_with_pu_files(tmp_path):
    texts = [t for t, _ in make_texts(12, 0)]
    pos, unl = _files(tmp_path, texts[:4], texts[4:10])
    neg = write_tsv(tmp_path / "neg.tsv", [(t, 0) for t in texts[10:]])
    with pytest.warns(UserWarning, match="every row has the label '0', not --positive-label '1'"):
        *_, eval_x, eval_y, _ = load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl, eval_file=neg))
    assert eval_y == [0, 0] and len(eval_x) == 2
    other = write_tsv(tmp_path / "two.tsv", [(texts[10], "a"), (texts[11], "b")])
    with pytest.raises(DataError, match="--positive-label '1' is not among"):  # two values, neither positive: a typo
        load_pu_files(PuConfig(positive_file=pos, unlabeled_file=unl, eval_file=other))


def test_a_prior_tensor_that_requires_grad_is_refused_like_the_temperature():
    z = torch.randn(8, 4)
    src, roles = torch.arange(4).repeat(2), torch.tensor([1, 0, 0, 0]).repeat(2)
    with pytest.raises(ValueError, match="prior is a tensor that requires grad"):
        punce_loss(z, src, roles, torch.tensor(0.3, requires_grad=True))
    with pytest.raises(ValueError, match="prior must be one number"):
        punce_loss(z, src, roles, torch.tensor([0.3, 0.4]))
    assert torch.isclose(punce_loss(z, src, roles, torch.tensor(0.3)), punce_loss(z, src, roles, 0.3))


# ------------------------------------------------------------------ 10. the MLP image classifier's input shapes

def test_the_mlp_classifier_takes_flat_and_shaped_images_like_the_cnn(tmp_path):
    from fewshot.image_run import load_image_classifier
    from fewshot.images import ImageModel

    torch.manual_seed(0)
    model = ImageModel("mlp", (1, 10, 10), hidden=16)
    head = {"learner": "nnpu probe", "weight": torch.randn(1, 50), "bias": torch.zeros(1), "mean": None, "std": None}
    (tmp_path / "model").mkdir()
    torch.save({"kind": "mlp", "in_shape": [1, 10, 10], "hidden": 16, "patch_pool": 3,
                "state_dict": model.state_dict(), "head": head, "positive_classes": [1], "eval_accuracy": 50.0,
                "contrastive": "punce", "setting": "pu", "raw_shape": [10, 10], "raw_integer": True},
               tmp_path / "model" / "image_classifier.pt")
    predict = load_image_classifier(tmp_path)  # loads with weights_only=True
    x, _ = make_images(n_per_class=2)
    shaped = predict.scores(x)
    np.testing.assert_allclose(predict.scores(x.reshape(len(x), 100)), shaped)  # was: refused
    with pytest.raises(ValueError, match=r"images of shape \(81,\); this classifier takes images of shape \(1, 10, "
                                         r"10\) \(or flat vectors of 100 values\)$"):
        predict.scores(x[:, :9, :9].reshape(len(x), 81))
    # one image without its batch axis was "images of shape (10,)", not the (10, 10) given
    with pytest.raises(ValueError, match=r"^an array of shape \(10, 10\) is 10 images of shape \(10,\); .* \(one "
                                         r"image\? pass a batch of one: images\[None\]\)$"):
        predict.scores(x[0])
    assert predict.scores(x[0][None]).shape == (1,)


def test_the_probes_show_a_bar_when_asked_and_the_same_probe_either_way(capsys):
    """The PU probes' epochs grow with the unlabeled examples (minutes at 35k image features) and ran silently after
    the training's bar (a probe): the pipelines now label a bar for each; the probe is the same with or without."""
    g = torch.Generator().manual_seed(0)
    fp, fu = torch.randn(20, 4, generator=g) + 1.0, torch.randn(60, 4, generator=g)
    quiet = train_probe(fp, fu, 0.3, "nnpu", epochs=3)
    assert capsys.readouterr().err == ""
    shown = train_probe(fp, fu, 0.3, "nnpu", epochs=3, progress="PU probes: the nnpu probe")
    assert "PU probes: the nnpu probe" in capsys.readouterr().err
    assert torch.equal(quiet.weight, shown.weight) and torch.equal(quiet.bias, shown.bias)
