"""fewshot baselines and protocol options: the probe objective, majority rates, the logreg head,
--train-layers, the development split and --preset."""

import dataclasses
import json
import warnings

import numpy as np
import pytest
import torch

from fewshot.config import PRESETS, FewShotConfig, preset_config
from fewshot.data import sample_fewshot
from fewshot.model import FewShotModel, load_tokenizer
from fewshot.heads import embed_all, logreg_accuracy
from fewshot.run import dev_split, freeze_lower_layers, majority_rates, prepare
from fewshot.train import main, train
from shared_losses.training.runtime import CheckpointError

from .conftest import make_texts
from .test_fewshot import _cfg as base_cfg


def _cfg(tiny_encoder, easy_task, tmp_path, **kw):
    """test_fewshot's tiny run, shortened to 20 steps."""
    return base_cfg(tiny_encoder, easy_task, tmp_path,
                    **{"max_steps": 20, "eval_every": 20, "checkpoint_every": 20, **kw})


def test_probe_is_logistic_regression_on_the_frozen_encoder(tiny_encoder, easy_task, tmp_path):
    cfg = _cfg(tiny_encoder, easy_task, tmp_path, objective="probe", probe_c=10.0, seed=3)
    m = train(cfg)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["eval_accuracy"] == m["eval_accuracy"] and saved["objective"] == "probe" and saved["steps"] == 0
    assert set(m["head_accuracies"]) == {"logreg"}  # an untrained linear head is not a baseline
    assert m["head"] == saved["head"] == "logreg"  # the head that scored it (was the default --head, linear)
    # the same number from a plain transcription: pretrained weights (seed-independent), the seed's sample
    run = prepare(_cfg(tiny_encoder, easy_task, tmp_path, objective="probe", seed=3, output_dir=str(tmp_path / "x")))
    fl, _ = embed_all(run.model, run.tokenizer, [run.train_x[i] for i in run.sample.labeled], 16, "cpu")
    fe, _ = embed_all(run.model, run.tokenizer, run.eval_x, 16, "cpu")
    from sklearn.linear_model import LogisticRegression

    unit = lambda f: f / np.linalg.norm(f, axis=1, keepdims=True)  # noqa: E731
    clf = LogisticRegression(C=10.0, max_iter=2000).fit(unit(fl.double().numpy()), run.train_y[run.sample.labeled])
    want = (clf.predict(unit(fe.double().numpy())) == np.asarray(run.eval_y)).mean() * 100
    assert m["eval_accuracy"] == pytest.approx(want)
    # the encoder was not changed by the probe
    enc = FewShotModel(tiny_encoder, "mean", 16).encoder.state_dict()
    assert all(torch.equal(v, enc[k]) for k, v in run.model.encoder.state_dict().items())
    # a finished probe folder (metrics.json, no checkpoint) is refused, untouched
    before = (tmp_path / "run" / "metrics.json").read_bytes()
    with pytest.raises(FileExistsError, match="already holds a run of fewshot: pass --resume"):
        train(cfg)
    assert (tmp_path / "run" / "metrics.json").read_bytes() == before
    # the baseline runs in the shared loop without steps: no log.csv, tb/ or checkpoint/; --resume of the finished
    # folder is its metrics, untouched; another option is refused by name, as for a trained run
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["config.json", "metrics.json", "run.json",
                                                                     "sample.json"]
    assert train(dataclasses.replace(cfg, resume=True)) == saved
    assert (tmp_path / "run" / "metrics.json").read_bytes() == before
    with pytest.raises(CheckpointError, match="probe_c"):
        train(dataclasses.replace(cfg, resume=True, probe_c=1.0))


@pytest.mark.slow  # a training run of every objective
def test_every_objective_records_majority_and_both_heads(tiny_encoder, easy_task, tmp_path):
    for obj in ("ce", "ce+scl", "ce+punce"):
        m = train(_cfg(tiny_encoder, easy_task, tmp_path, objective=obj, head="logreg", probe_c=100.0,
                       output_dir=str(tmp_path / obj)))
        assert m["eval_accuracy"] == m["head_accuracies"]["logreg"] and "linear" in m["head_accuracies"]
        assert m["majority_accuracy"] == pytest.approx(50.0)  # the easy task's evaluation split is balanced
        assert m["eval_accuracy"] > 75.0, (obj, m)  # learns the easy task through the logreg head
        assert not any(k.startswith("logreg_C") for k in m["head_accuracies"])  # C sweeps only on the dev split


def test_majority_rates():
    class S:
        labeled = np.array([0, 1, 2])
    rates = majority_rates(np.array([1, 1, 0, 0]), S, [0, 0, 0, 1])
    assert rates == {"majority_accuracy": 75.0, "labeled_majority_accuracy": 25.0}


def test_logreg_accuracy_separable():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 5)) + np.where(np.arange(40)[:, None] % 2 == 0, 3.0, -3.0) * np.eye(5)[0]
    y = (np.arange(40) % 2 == 0).astype(int)
    assert logreg_accuracy(x[:20], y[:20], x[20:], y[20:], 100.0, 0) == 100.0


def test_train_layers_freezes_all_but_the_top(tiny_encoder, easy_task, tmp_path):
    model = FewShotModel(tiny_encoder, "mean", 16)
    freeze_lower_layers(model.encoder, 0)
    assert not any(p.requires_grad for p in model.encoder.parameters())
    assert all(p.requires_grad for p in model.classifier.parameters())
    with pytest.raises(ValueError, match="exceeds"):
        freeze_lower_layers(model.encoder, 5)
    cfg = _cfg(tiny_encoder, easy_task, tmp_path, objective="ce+punce", train_layers=1, max_steps=3, eval_every=3)
    model = FewShotModel(tiny_encoder, "mean", 16)
    frozen = {k: v.clone() for k, v in model.encoder.embeddings.state_dict().items()}
    layer0 = {k: v.clone() for k, v in model.encoder.encoder.layer[0].state_dict().items()}
    train(cfg, model, load_tokenizer(tiny_encoder))
    assert all(torch.equal(v, model.encoder.embeddings.state_dict()[k]) for k, v in frozen.items())
    assert not all(torch.equal(v, model.encoder.encoder.layer[0].state_dict()[k]) for k, v in layer0.items())


def test_dev_split_is_fixed_disjoint_and_never_the_eval_split(tiny_encoder, easy_task, tmp_path):
    xs = [f"s{i}" for i in range(100)]
    ys = [i % 2 for i in range(100)]
    px, py, dx, dy = dev_split(xs, ys, 0.3)
    assert len(dx) == 30 and len(px) == 70 and not set(px) & set(dx)
    assert dev_split(xs, ys, 0.3)[2] == dx  # the same rows every time, whatever the seed
    assert all(int(x[1:]) % 2 == y for x, y in zip(dx, dy))
    with pytest.raises(ValueError, match="dev-fraction"):
        dev_split(xs[:2], ys[:2], 0.5)
    with pytest.raises(ValueError, match="dev_fraction|dev-fraction"):
        _cfg(tiny_encoder, easy_task, tmp_path, dev_fraction=1.0).validate()
    # a run on the dev split scores training-pool rows only, and sweeps --probe-c there
    cfg = _cfg(tiny_encoder, easy_task, tmp_path, objective="probe", eval_split="dev", n_unlabeled=50)
    run = prepare(cfg)
    train_rows = [t for t, _ in make_texts(200, 0)]
    assert len(run.eval_x) == 60 and len(run.train_x) == 140
    assert sorted(run.eval_x + run.train_x) == sorted(train_rows)
    m = train(_cfg(tiny_encoder, easy_task, tmp_path, objective="probe", eval_split="dev", n_unlabeled=50,
                   output_dir=str(tmp_path / "dev")))
    assert "DEVELOPMENT" in m["eval_split"] and "logreg_C100" in m["head_accuracies"]


def test_same_sample_for_every_objective():
    y = np.arange(300) % 3 == 0
    a = sample_fewshot(y.astype(int), 20, 100, 4)
    b = sample_fewshot(y.astype(int), 20, 0, 4)  # probe, ce and ce+scl draw the same labeled set
    assert np.array_equal(a.labeled, b.labeled)


def test_preset_sets_defaults_and_explicit_options_win(tiny_encoder, easy_task, tmp_path, monkeypatch):
    cfg = preset_config("paper", max_steps=7)
    assert cfg.preset == "paper" and cfg.max_steps == 7 and cfg.lr == PRESETS["paper"]["lr"]
    assert preset_config("cpu").max_steps == PRESETS["cpu"]["max_steps"]
    with pytest.raises(ValueError, match="preset"):
        preset_config("gpu")
    seen = {}
    monkeypatch.setattr("fewshot.train.train", lambda c: seen.setdefault("cfg", c) and {})
    train_file, dev = easy_task
    main(["--preset", "cpu", "--dataset", train_file, "--eval-file", dev, "--lr", "0.123"])
    got = seen["cfg"]
    assert got.preset == "cpu" and got.lr == 0.123
    assert all(getattr(got, k) == v for k, v in PRESETS["cpu"].items() if k != "lr")
    seen.clear()
    main(["--dataset", train_file, "--eval-file", dev])
    assert seen["cfg"].preset is None and seen["cfg"].max_steps == FewShotConfig().max_steps


def test_setfit_baseline_runs_on_the_same_sample(tiny_encoder, easy_task, tmp_path):
    pytest.importorskip("setfit")  # the optional extra; scripts/setup.sh installs it, so CI runs this
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m = train(_cfg(tiny_encoder, easy_task, tmp_path, objective="setfit", max_length=16))
    # torch's warning about SetFit's pinned-memory loaders on a CPU machine is not the user's concern
    assert not [w for w in seen if "pin_memory" in str(w.message)], [str(w.message) for w in seen]
    assert m["objective"] == "setfit" and m["steps"] == 0 and 0.0 <= m["eval_accuracy"] <= 100.0
    assert m["head_accuracies"] == {"setfit": m["eval_accuracy"]}
    sample = json.loads((tmp_path / "run" / "sample.json").read_text())
    probe = train(_cfg(tiny_encoder, easy_task, tmp_path, objective="probe", output_dir=str(tmp_path / "probe")))
    assert json.loads((tmp_path / "probe" / "sample.json").read_text())["labeled"] == sample["labeled"]
    assert probe["majority_accuracy"] == m["majority_accuracy"]
    assert not (tmp_path / "checkpoints").exists()


def test_lam_0_with_the_linear_head_is_refused():
    """--lam 0 gives CE no weight: the linear head that --head linear scores with never trained, and its random
    scores were eval_accuracy without a word."""
    from fewshot.config import FewShotConfig

    for objective in ("ce+punce", "ce+scl"):
        with pytest.raises(ValueError, match="--lam 0 gives cross-entropy no weight.*--head logreg"):
            FewShotConfig(objective=objective, lam=0.0).validate()
        FewShotConfig(objective=objective, lam=0.0, head="logreg").validate()  # the contrastive term alone: fine
    FewShotConfig(objective="ce", lam=0.0).validate()  # CE alone reads no --lam


def test_settings_that_switch_the_contrastive_term_off_are_refused():
    """Both ran with status 0 and a normal result: --batch-unlabeled 0 with ce+punce trained byte-equal to
    --n-unlabeled 0 (metrics.json still giving the unlabeled examples' prior), and ce+scl at --batch-labeled 1 had a
    SupCon term of exactly 0 (one example's two views, no other example), training 0.1 x CE."""
    with pytest.raises(ValueError, match=r"--batch-unlabeled 0 puts none of the --n-unlabeled 16 unlabeled examples "
                                         r"in a batch, so ce\+punce would train on the labeled examples alone"):
        FewShotConfig(objective="ce+punce", n_unlabeled=16, batch_unlabeled=0).validate()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # --n-unlabeled 0: that setting on purpose, warned
        FewShotConfig(objective="ce+punce", n_unlabeled=0, batch_unlabeled=0).validate()
    FewShotConfig(objective="ce", n_unlabeled=16, batch_unlabeled=0).validate()  # CE reads no unlabeled example
    with pytest.raises(ValueError, match=r"--objective ce\+scl needs --batch-labeled >= 2"):
        FewShotConfig(objective="ce+scl", batch_labeled=1).validate()
    FewShotConfig(objective="ce+scl", batch_labeled=1, gather_across_processes=True).validate()  # others' rows
    FewShotConfig(objective="ce+punce", batch_labeled=1).validate()  # puNCE keeps its unlabeled terms


def test_a_text_run_says_when_its_batches_are_capped_and_records_the_sizes_used(tiny_encoder, easy_task, tmp_path,
                                                                                capsys):
    """The PU pipeline said it and recorded batch_*_used; the text pipeline capped --batch-labeled 64 to N silently."""
    m = train(_cfg(tiny_encoder, easy_task, tmp_path, objective="ce+punce", max_steps=2, eval_every=2,
                   checkpoint_every=2, batch_labeled=64, batch_unlabeled=8))
    err = capsys.readouterr().err
    assert "batches capped to the data: --batch-labeled 64 x 1 process(es) to the 20 labeled examples (metrics.json: " \
        "batch_labeled_used, batch_unlabeled_used)" in err
    assert (m["batch_labeled_used"], m["batch_unlabeled_used"]) == (20, 8)
    ce = train(_cfg(tiny_encoder, easy_task, tmp_path, objective="ce", max_steps=2, eval_every=2, checkpoint_every=2,
                    output_dir=str(tmp_path / "ce")))
    assert ce["batch_labeled_used"] == 10 and "batch_unlabeled_used" not in ce  # CE draws no unlabeled example
    assert "batches capped" not in capsys.readouterr().err


def test_the_no_unlabeled_warning_is_said_once_per_run():
    """A run validates its options twice (train, then prepare); the warning came once for each caller."""
    cfg = FewShotConfig(objective="ce+punce", n_unlabeled=0)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")  # Python's own filter for UserWarning: once per place it is raised
        cfg.validate()
        cfg.validate()
    assert len(seen) == 1 and str(seen[0].message).startswith("--n-unlabeled 0 with --objective ce+punce")
