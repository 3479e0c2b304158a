"""fewshot labels as users have them (issue 34): one value against the rest (--positive-label on a column of more
than two values), --label-map for any other grouping, numbers that compare by value whatever their spelling, the
evaluation file read with the training file's rule; and the trained encoder exported as a sentence-transformers
folder that gives the run's sentence vectors."""

import csv
import dataclasses
import json
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from fewshot.config import FewShotConfig
from fewshot.data import class_names, load_pu_files, load_splits
from shared_losses.data import DataError, LabelRule, label_text, parse_label_map

from .conftest import make_texts, text_config

DOCS = Path(__file__).resolve().parents[2] / "docs" / "fewshot.md"
LONG = " ".join(["the movie was good and the plot was bad"] * 4)  # longer than --max-length 16


def star_rows(n, seed):
    """(text, stars 1-5): the easy task's positives get 4 or 5 stars, its negatives 1, 2 or 3."""
    return [(t, (4 + i // 2 % 2) if y else (1 + i // 2 % 3)) for i, (t, y) in enumerate(make_texts(n, seed))]


def write_csv(path, rows, text="review", label="stars"):
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow([text, label])
        w.writerows(rows)
    return str(path)


def write_jsonl(path, rows, text="review", label="stars"):
    Path(path).write_text("".join(json.dumps({text: t, label: y}) + "\n" for t, y in rows))
    return str(path)


def cfg_for(train, dev, **kw):
    return text_config(dict(dataset=train, eval_file=dev, text_column="review", label_column="stars"), **kw)


def test_label_values_compare_by_value_whatever_their_spelling():
    assert {label_text(v) for v in (5, "5", 5.0, "5.0", " 05 ", np.int64(5), np.float32(5.0))} == {"5"}
    assert {label_text(v) for v in (0.5, "0.50", ".5")} == {"0.5"}
    assert [label_text(v) for v in (True, False, " pos ", "1_0", "nan")] == ["true", "false", "pos", "1_0", "nan"]
    # --positive-label and the map's keys are read the same way
    assert LabelRule.of("5.0").apply([5, "4", 3.0], "f")[1] == [1, 0, 0]
    assert parse_label_map("1.0=0, 2=0 ,4=1,5.0=1") == {"1": 0, "2": 0, "4": 1, "5": 1}


def test_positive_label_on_many_values_is_one_against_the_rest(tmp_path, capsys):
    # the training file's stars are CSV text, the evaluation file's JSON numbers, some written as floats
    train = write_csv(tmp_path / "train.csv", star_rows(40, 0))
    dev_rows = [(t, float(y) if i % 2 else y) for i, (t, y) in enumerate(star_rows(20, 1))]
    dev = write_jsonl(tmp_path / "dev.jsonl", dev_rows)
    train_x, train_y, eval_x, eval_y = load_splits(cfg_for(train, dev, positive_label="5"))
    assert train_y == [int(y == 5) for _, y in star_rows(40, 0)] and len(train_x) == 40
    assert eval_y == [int(y == 5) for _, y in dev_rows] and eval_x == [t for t, _ in dev_rows]
    out = capsys.readouterr().out
    assert f"'5' is the positive class ({sum(train_y)} rows), the other 4 values ['1', '2', '3', '4'] the negative " \
           f"class ({40 - sum(train_y)} rows)" in out
    assert 0 < sum(train_y) < 20 and 0 < sum(eval_y) < 10  # 4 stars are not positive
    assert class_names(cfg_for(train, dev, positive_label="5")) == ("not 5", "5")
    # the same with the training file as JSON floats and --positive-label 5.0
    train_f = write_jsonl(tmp_path / "train_f.jsonl", [(t, float(y)) for t, y in star_rows(40, 0)])
    assert load_splits(cfg_for(train_f, dev, positive_label="5.0"))[1] == train_y


def test_a_value_that_is_the_positive_label_in_another_case_is_warned_of(tmp_path):
    """"Positive" beside "positive" went to the negative class with only the stdout line of the split; a warning names
    it now. Values that differ otherwise are one against the rest without a warning."""
    rows = [(f"text {i}", ("positive", "Positive", "negative")[i % 3]) for i in range(30)]
    dev_rows = [(f"other {t}", y) for t, y in rows]
    train, dev = write_csv(tmp_path / "train.csv", rows), write_csv(tmp_path / "dev.csv", dev_rows)
    with pytest.warns(UserWarning, match=r"\['Positive'\] differ from --positive-label 'positive' only in case"):
        _, train_y, _, _ = load_splits(cfg_for(train, dev, positive_label="positive"))
    assert sum(train_y) == 10
    plain = [(t, y.lower()) for t, y in rows]
    train = write_csv(tmp_path / "train2.csv", plain)
    dev = write_csv(tmp_path / "dev2.csv", [(t, y.lower()) for t, y in dev_rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_splits(cfg_for(train, dev, positive_label="positive"))


def test_labels_that_cannot_be_made_binary_name_the_options(tmp_path):
    train = write_csv(tmp_path / "train.csv", star_rows(40, 0))
    dev = write_csv(tmp_path / "dev.csv", star_rows(20, 1))
    # the default --positive-label 1 is no choice of a class: 1 star against the rest would be a silent guess
    with pytest.raises(DataError, match=r"train.csv: the labels are not binary, found 5 values \['1', '2', '3', '4', "
                                        r"'5'\]: pass --positive-label V .* or --label-map .*1=1,2=0,3=0,4=0,5=0"):
        load_splits(cfg_for(train, dev))
    # a value the column does not hold names the values it holds
    with pytest.raises(DataError, match=r"--positive-label '6' is not among the label values \['1', '2', '3', '4', "
                                        r"'5'\]; pass --positive-label V .* or --label-map"):
        load_splits(cfg_for(train, dev, positive_label="6"))
    # a training file of one class
    only5 = write_csv(tmp_path / "five.csv", [(t, 5) for t, _ in star_rows(10, 0)])
    with pytest.raises(DataError, match="every row has the label '5': a binary task needs rows of both classes"):
        load_splits(cfg_for(only5, dev, positive_label="5"))
    # an evaluation value the training file lacks would silently count as negative
    with pytest.raises(DataError, match=r"dev.csv: label value\(s\) \['6'\] do not occur in the training file "
                                        r".*train.csv .*--label-map"):
        load_splits(cfg_for(train, write_csv(tmp_path / "dev.csv", [("good", 6), ("bad", 5)]), positive_label="5"))


def test_label_map_groups_values_and_drops_the_rest_with_a_count(tmp_path):
    train_rows, dev_rows = star_rows(40, 0), star_rows(20, 1)
    train = write_csv(tmp_path / "train.csv", train_rows)
    dev = write_jsonl(tmp_path / "dev.jsonl", [(t, float(y)) for t, y in dev_rows])
    for spec in ("1=0,2=0,4=1,5=1", '{"1": 0, "2": "0", "4.0": 1, "5": 1}'):
        cfg = cfg_for(train, dev, label_map=spec)
        with pytest.warns(UserWarning) as record:
            train_x, train_y, eval_x, eval_y = load_splits(cfg)
        kept = [(t, int(y >= 4)) for t, y in train_rows if y != 3]
        assert list(zip(train_x, train_y)) == kept
        assert list(zip(eval_x, eval_y)) == [(t, int(y >= 4)) for t, y in dev_rows if y != 3]
        messages = [str(w.message) for w in record]
        n3, n3_dev = len(train_rows) - len(kept), sum(y == 3 for _, y in dev_rows)
        assert n3 > 0 and n3_dev > 0
        assert any(f"train.csv: dropped {n3} of 40 rows whose label is not in --label-map ('3': {n3})" in m
                   for m in messages)
        assert any(f"dev.jsonl: dropped {n3_dev} of 20 rows" in m for m in messages)
        assert class_names(cfg) == ("1/2", "4/5")
    # a value of the evaluation file that the training file lacks is fine when the map names it
    dev6 = write_csv(tmp_path / "dev6.csv", [("good", 6), ("bad", 1)])
    with pytest.warns(UserWarning, match="dropped"):  # the training file's 3s
        assert load_splits(cfg_for(train, dev6, label_map="1=0,2=0,4=1,5=1,6=1"))[3] == [1, 0]
    # PU data from files: the labeled evaluation file takes the map too
    (tmp_path / "pos.txt").write_text("good movie\n")
    (tmp_path / "unl.txt").write_text("bad movie\nfine movie\n")
    pu = cfg_for("unused", dev, setting="pu", positive_file=str(tmp_path / "pos.txt"),
                 unlabeled_file=str(tmp_path / "unl.txt"), label_map="1=0,2=0,4=1,5=1")
    with pytest.warns(UserWarning, match=f"dropped {sum(y == 3 for _, y in dev_rows)} of 20"):
        _, _, eval_x, eval_y, _ = load_pu_files(pu)
    assert eval_y == [int(y >= 4) for _, y in dev_rows if y != 3]
    assert class_names(pu) == ("not 4/5", "4/5")


@pytest.mark.parametrize("spec, words", [
    ("1=0,2=2", "'2' goes to '2'; each value goes to 0"), ("1=0,2=0", "at least one value to 0 and one to 1"),
    ("stars", "'stars' is not VALUE=0|1"), ('{"1": 0, "2"}', "not a valid JSON object"),
    ("1=0,1.0=1", "'1' is sent to both 0 and 1"), ("7=0,8=1", "names none of its label values"),
    ("1=0,2=0,3=1", "leaves only class 0 (negative)")])
@pytest.mark.filterwarnings("ignore:.*dropped:UserWarning")
def test_bad_label_maps_are_named(tmp_path, spec, words):
    rows = [(t, y) for t, y in star_rows(40, 0) if y != 3]  # 1, 2, 4, 5
    train = write_csv(tmp_path / "train.csv", rows)
    with pytest.raises(DataError, match=re.escape(words)):
        load_splits(cfg_for(train, train, label_map=spec))


def test_label_map_and_positive_label_are_one_or_the_other(tmp_path):
    train = write_csv(tmp_path / "train.csv", star_rows(40, 0))
    with pytest.raises(DataError, match="--positive-label 5 and --label-map 1=0,5=1 both say"):
        load_splits(cfg_for(train, train, positive_label="5", label_map="1=0,5=1"))
    from fewshot.config import ImageConfig

    assert "label_map" not in {f.name for f in dataclasses.fields(ImageConfig)}  # image data: --positive-classes
    with pytest.raises(DataError, match="--dataset reuters has its own two classes"):  # not silently ignored
        load_splits(FewShotConfig(dataset="reuters", label_map="1=0,2=1"))


def _docs_stars_commands() -> list[list[str]]:
    """The arguments of docs/fewshot.md's examples with the user's own files (--label-column stars)."""
    doc = DOCS.read_text()
    lines = [ln for ln in doc.splitlines() if "--label-column stars" in ln and ln.startswith("python -m")
             and not ln.rstrip().endswith("\\")]  # one-line commands (the --unlabeled-file one goes on)
    assert len(lines) == 3 and all(shlex.split(ln)[:3] == ["python", "-m", "fewshot.train"] for ln in lines)
    return [shlex.split(ln)[3:] for ln in lines]


@pytest.mark.parametrize("which", ["one-file", "positive-label", "label-map"])
def test_docs_stars_examples_run_as_written(tiny_encoder, tmp_path, monkeypatch, capsys, which):
    """`--dataset train.tsv --eval-file dev.tsv --text-column review --label-column stars --positive-label 5` (the
    docs' example, refused before: "labels must be binary"), the same without --eval-file (20 % of each class held
    out) and its --label-map 1=0,2=0,4=1,5=1 twin, on a tiny encoder and a few steps."""
    from fewshot.train import main

    flag = "--label-map" if which == "label-map" else "--positive-label"
    args = next(a for a in _docs_stars_commands() if flag in a and ("--eval-file" in a) != (which == "one-file"))
    dev_rows = star_rows(30, 1)
    for name, rows in (("train.tsv", star_rows(120, 0)), ("dev.tsv", dev_rows)):
        (tmp_path / name).write_text("review\tstars\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    monkeypatch.chdir(tmp_path)
    tiny = ["--encoder", tiny_encoder, "--n-labeled", "10", "--n-unlabeled", "20", "--max-steps", "2",
            "--batch-labeled",
            "5", "--batch-unlabeled", "5", "--max-length", "16", "--proj-dim", "8", "--eval-every", "2",
            "--output-dir", "run", "--device", "cpu", "--no-progress"]
    if which != "label-map":
        main(args + tiny)
        out = capsys.readouterr().out
        assert "'5' is the positive class" in out
        n_eval, names = (30 if which == "positive-label" else 24), {"0": "not 5", "1": "5"}
        assert (which == "one-file") == ("24 of its 120 examples (20% of each class" in out)
        assert "always answering the majority class" in out  # the last lines say where the accuracy stands
        assert "positive class (" in out and "ROC-AUC" in out  # and the positive class's F1, recall, ...
    else:
        with pytest.warns(UserWarning) as record:
            main(args + tiny)
        messages = [str(w.message) for w in record]
        for name, n in (("train.tsv", 120), ("dev.tsv", 30)):
            dropped = rf"--(dataset|eval-file) {name}: dropped \d+ of {n} rows whose label is not in --label-map \('3'"
            assert any(re.match(dropped, m) for m in messages), messages
        n_eval, names = sum(y != 3 for _, y in dev_rows), {"0": "1/2", "1": "4/5"}
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["n_eval"] == n_eval and metrics["eval_accuracy"] is not None
    assert metrics["eval_scores"]["accuracy"] == metrics["eval_accuracy"]  # the chosen head's scores: one float
    assert metrics["eval_scores"]["n_positive"] + metrics["eval_scores"]["n_negative"] == n_eval
    config = json.loads((tmp_path / "run" / "model" / "config.json").read_text())
    assert config["id2label"] == names
    assert (tmp_path / "run" / "model" / "sentence-transformers" / "modules.json").is_file()


def _tiny_run(tiny_encoder, easy_task, out, **kw):
    from fewshot.train import train

    train_file, dev = easy_task
    base = dict(encoder=tiny_encoder, dataset=train_file, eval_file=dev, n_labeled=10, n_unlabeled=20, max_steps=2,
                batch_labeled=5, batch_unlabeled=5, max_length=16, pooling="mean", proj_dim=8, eval_every=2,
                checkpoint_every=2, output_dir=str(out), device="cpu", progress=False, lr=3e-3)
    cfg = FewShotConfig(**(base | kw))
    return cfg, train(cfg)


@pytest.mark.parametrize("pooling", ["mean", "cls", "max"])
def test_export_writes_a_sentence_transformers_folder_with_the_runs_vectors(tiny_encoder, easy_task, tmp_path,
                                                                            monkeypatch, pooling):
    """RUN/model/sentence-transformers/ loads with SentenceTransformer(path), offline, and encodes texts into the
    sentence vectors of the fine-tuned encoder that the run's heads read (FewShotModel.embed), texts cut at
    --max-length as the run cut them; --pooling auto reads its pooling back."""
    from safetensors.torch import load_file
    from sentence_transformers import SentenceTransformer

    from fewshot.model import FewShotModel, load_tokenizer, resolve_pooling
    from fewshot.heads import embed_all

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cfg, metrics = _tiny_run(tiny_encoder, easy_task, tmp_path / "run", pooling=pooling)
    folder = tmp_path / "run" / "model" / "sentence-transformers"
    texts = ["good movie", "the plot was awful and the cast was dire", LONG, "it"]
    model = FewShotModel(tiny_encoder, pooling, cfg.proj_dim)
    model.load_state_dict(load_file(str(tmp_path / "run" / "checkpoint" / "model.safetensors")))
    ours, _ = embed_all(model, load_tokenizer(tiny_encoder), texts, cfg.max_length, "cpu")
    pretrained = FewShotModel(tiny_encoder, pooling, cfg.proj_dim)
    before, _ = embed_all(pretrained, load_tokenizer(tiny_encoder), texts, cfg.max_length, "cpu")
    assert (ours - before).abs().max() > 1e-4  # fine-tuned: the comparison below can fail

    st = SentenceTransformer(str(folder), device="cpu")
    assert st.max_seq_length == cfg.max_length
    got = st.encode(texts, convert_to_tensor=True, batch_size=2)
    torch.testing.assert_close(got.cpu(), ours, atol=1e-5, rtol=1e-5)
    assert resolve_pooling("auto", str(folder))[0] == pooling
    info = json.loads((tmp_path / "run" / "model" / "fewshot_export.json").read_text())
    assert "sentence-transformers" in info["sentence_transformer"]


def test_export_run_writes_the_sentence_transformers_folder_too(tiny_encoder, easy_task, tmp_path):
    from sentence_transformers import SentenceTransformer

    from fewshot.export import export_run

    _tiny_run(tiny_encoder, easy_task, tmp_path / "run", export=False)
    assert not (tmp_path / "run" / "model").exists()
    out = export_run(tmp_path / "run", tmp_path / "elsewhere")
    st = SentenceTransformer(str(out / "sentence-transformers"), device="cpu")
    assert st.encode(["good movie"]).shape == (1, 32) and st.max_seq_length == 16
