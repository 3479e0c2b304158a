"""Nothing silently lost or misread: fewshot.predict keeps every input row in its place (an empty text without a
prediction), blank and NaN cells are empty cells in training files, the errors suggest only options that would be
accepted, options a run would not read are refused, warnings are one line, and headers or .tsv quoting that
misread a file are named."""

import csv
import gzip
import json
import os
import sys
import warnings

import numpy as np
import pytest

from fewshot.config import ImageConfig, from_cli
from fewshot.data import load_splits, read_rows, read_texts
from fewshot.train import train
from shared_losses.data import DataError, LabelRule, parse_label_map, read_local

from .conftest import make_texts, text_config, write_tsv
from tests import warm


def predict_run(tiny_encoder, tmp_path):
    """A tiny trained run (its model/) to predict with."""
    write_tsv(tmp_path / "train.tsv", make_texts(40, 0))
    write_tsv(tmp_path / "dev.tsv", make_texts(10, 1))
    train(text_config(dict(encoder=tiny_encoder, dataset=str(tmp_path / "train.tsv"),
                           eval_file=str(tmp_path / "dev.tsv"), objective="ce", n_labeled=8, n_unlabeled=8,
                           max_steps=1, batch_labeled=4, batch_unlabeled=4, max_length=16, pooling="mean",
                           proj_dim=16, output_dir=str(tmp_path / "run"), device="cpu", progress=False)))
    return tmp_path / "run"


def test_predict_keeps_every_row_in_place_with_its_columns(tiny_encoder, tmp_path, capsys):
    from fewshot.predict import main as predict

    run = predict_run(tiny_encoder, tmp_path)
    # an empty, a blank and a missing text; a `label` column (an evaluation file) is kept as input_label
    with open(tmp_path / "in.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([["id", "text", "label"], [1, "good movie", "pos"], [2, "", "neg"],
                                  [3, "  ", "neg"], [4, "awful plot", "neg"]])
    capsys.readouterr()
    predict(["--model", str(run), "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "a.jsonl")])
    rows = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2", "3", "4"] and [r["input_label"] for r in rows] == ["pos", "neg",
                                                                                                   "neg", "neg"]
    assert [r["text"] for r in rows] == ["good movie", None, None, "awful plot"]
    assert [r["label"] is None for r in rows] == [False, True, True, False]
    assert rows[1]["score"] is None and rows[1]["probabilities"] is None
    assert set(rows[0]["probabilities"]) == {"0", "1"}  # the training labels' names
    err = capsys.readouterr().err
    assert "2 of 4 rows have an empty text" in err and "without a prediction" in err

    predict(["--model", str(run), "--input", str(tmp_path / "in.csv"), "--output", str(tmp_path / "a.csv")])
    out = list(csv.DictReader(open(tmp_path / "a.csv")))
    assert list(out[0]) == ["id", "input_label", "text", "label", "score", "p(0)", "p(1)"]
    assert [r["id"] for r in out] == ["1", "2", "3", "4"] and out[2]["label"] == "" and out[2]["p(1)"] == ""
    assert [r["label"] for r in out] == [r["label"] or "" for r in rows]

    # JSONL: a null, a missing key and a JSON string; .txt: blank lines skipped and counted
    (tmp_path / "in.jsonl").write_text('{"text": "good", "n": 1}\n{"text": null, "n": 2}\n{"n": 3}\n"bad"\n')
    predict(["--model", str(run), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "b.jsonl")])
    rows = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert [r.get("n") for r in rows] == [1, 2, 3, None] and [r["label"] is None for r in rows] == [False, True,
                                                                                                   True, False]
    (tmp_path / "in.txt").write_text("good\n\n   \nbad\n")
    capsys.readouterr()
    predict(["--model", str(run), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "c.jsonl")])
    assert [json.loads(line)["text"] for line in (tmp_path / "c.jsonl").read_text().splitlines()] == ["good", "bad"]
    assert "skipped 2 blank line(s)" in capsys.readouterr().err


def test_predict_reads_what_training_reads(tiny_encoder, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from fewshot.predict import main as predict

    run = predict_run(tiny_encoder, tmp_path)
    with gzip.open(tmp_path / "in.csv.gz", "wt") as fh:
        fh.write("text\ngood movie\nawful plot\n")
    pq.write_table(pa.table({"text": ["good movie", None, "awful plot"], "id": [7, 8, 9]}), tmp_path / "in.parquet")
    with gzip.open(tmp_path / "in.txt.gz", "wt") as fh:
        fh.write("good movie\n\nawful plot\n")
    for name in ("in.csv.gz", "in.txt.gz"):
        predict(["--model", str(run), "--input", str(tmp_path / name), "--output", str(tmp_path / "a.jsonl"),
                 "--overwrite"])
        assert [json.loads(line)["text"] for line in (tmp_path / "a.jsonl").read_text().splitlines()] == [
            "good movie", "awful plot"]
    predict(["--model", str(run), "--input", str(tmp_path / "in.parquet"), "--output", str(tmp_path / "b.csv")])
    out = list(csv.DictReader(open(tmp_path / "b.csv")))
    assert [r["id"] for r in out] == ["7", "8", "9"] and [r["label"] == "" for r in out] == [False, True, False]
    # what Parquet gives back besides text and numbers (dates, decimals, bytes), a NaN, and input columns named
    # label and input_label: written as strict JSON, none lost
    import datetime
    import decimal

    pq.write_table(pa.table({"text": ["good movie", "awful plot"], "day": [datetime.date(2026, 12, 3)] * 2,
                             "price": [decimal.Decimal("1.50")] * 2, "raw": [b"ab", b"cd"], "x": [float("nan"), 1.0],
                             "label": ["pos", "neg"], "input_label": ["p", "n"]}), tmp_path / "types.parquet")
    predict(["--model", str(run), "--input", str(tmp_path / "types.parquet"), "--output", str(tmp_path / "c.jsonl")])
    lines = (tmp_path / "c.jsonl").read_text().splitlines()
    rows = [json.loads(line, parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}")) for line in lines]
    assert rows[0]["day"] == "2026-12-03" and rows[0]["price"] == "1.50" and rows[0]["raw"] == "ab"
    assert [r["x"] for r in rows] == [None, 1.0]
    assert [(r["input_label"], r["input_label_2"]) for r in rows] == [("p", "pos"), ("n", "neg")]
    predict(["--model", str(run), "--input", str(tmp_path / "types.parquet"), "--output", str(tmp_path / "c.csv")])
    assert list(csv.DictReader(open(tmp_path / "c.csv")))[0]["day"] == "2026-12-03"


def test_blank_and_nan_cells_are_empty_in_training_files(tmp_path):
    """A label of blanks used to become a third value '', a JSON NaN label the value 'nan', and a text of blanks
    was trained on."""
    f = tmp_path / "t.csv"
    f.write_text("text,label\ngood,1\n   ,0\nbad, \nfine,1\nawful,0\n")
    with pytest.warns(UserWarning, match=r"skipped 2 of 5 rows with an empty 'text' or 'label'"):
        assert read_local(str(f), "text", "label") == (["good", "fine", "awful"], ["1", "1", "0"])
    g = tmp_path / "t.jsonl"
    g.write_text('{"text": "good", "label": 1}\n{"text": "x", "label": NaN}\n{"text": NaN, "label": 0}\n'
                 '{"text": "bad", "label": 0}\n')
    with pytest.warns(UserWarning, match=r"skipped 2 of 4 rows"):
        assert read_local(str(g), "text", "label") == (["good", "bad"], [1, 0])
    # a PU file's empty texts are skipped with a count, not silently
    (tmp_path / "p.csv").write_text("text\ngood\n \n\nbad\n")
    with pytest.warns(UserWarning, match=r"p.csv: skipped 1 of 3 rows with an empty text"):
        assert read_texts(str(tmp_path / "p.csv"), "text", "--positive-file") == ["good", "bad"]


def test_the_label_map_an_error_suggests_is_accepted(tmp_path):
    def suggestion(values):
        with pytest.raises(DataError) as err:
            LabelRule().apply(values, "f.csv")
        msg = str(err.value)
        return msg.split("--label-map ")[-1].rstrip(")") if "to do that with" in msg else None

    spec = suggestion(["1", "2", "3", "1"])
    assert spec == "1=1,2=0,3=0" and parse_label_map(spec) == {"1": 1, "2": 0, "3": 0}
    assert suggestion(["neg", "pos", "neutral"]) is None  # "1" is not a value: no map of "1" against the rest
    spec = suggestion(["1", "a,b", "c=d"])  # values a VALUE=0|1 list cannot hold: a JSON object, quoted
    assert spec.startswith("'{") and parse_label_map(spec.strip("'")) == {"1": 1, "a,b": 0, "c=d": 0}
    # a column of blank labels next to 0 / 1 is no third value
    (tmp_path / "blank.csv").write_text("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(10)) + "x, \n")
    with pytest.warns(UserWarning, match="skipped 1 of 11"):
        assert len(load_splits(_text_cfg(tmp_path / "blank.csv"))[0]) == 8


def _text_cfg(path):
    from fewshot.config import FewShotConfig

    return FewShotConfig(dataset=str(path), text_column="text", label_column="label")


@pytest.mark.parametrize("argv,words", [
    (["images", "--dataset", "mnist", "--batch-labeled", "4"], "--batch-labeled: read with --batch-size None only"),
    (["images", "--dataset", "mnist", "--batch-size", "64", "--batch-labeled", "4", "--batch-unlabeled", "4"],
     "--batch-labeled / --batch-unlabeled: read with --batch-size None only; --batch-size 64"),
    (["pu", "--positive-file", "p.txt", "--unlabeled-file", "u.txt", "--dataset", "t.csv", "--n-unlabeled", "9"],
     "--dataset / --n-unlabeled: not read with --positive-file and --unlabeled-file"),
])
def test_options_a_run_would_not_read_are_refused(argv, words):
    with pytest.raises(ValueError, match=words) as err:
        from_cli(argv)
    assert len(str(err.value).splitlines()) == 1


def test_options_a_run_reads_are_taken():
    cfg = from_cli(["images", "--dataset", "mnist", "--batch-size", "None", "--batch-labeled", "4"])
    assert cfg.batch_size is None and cfg.batch_labeled == 4
    assert from_cli(["pu", "--positive-file", "p.txt", "--unlabeled-file", "u.txt"]).positive_file == "p.txt"


def test_an_evaluation_file_without_positives_is_named(tmp_path):
    from fewshot.image_run import image_data

    rng = np.random.default_rng(0)
    np.savez(tmp_path / "train.npz", x=rng.integers(0, 255, (40, 8, 8), dtype=np.uint8), y=np.arange(40) % 4)
    np.savez(tmp_path / "test.npz", x=rng.integers(0, 255, (10, 8, 8), dtype=np.uint8), y=np.full(10, 1))
    cfg = ImageConfig(dataset=str(tmp_path / "train.npz"), eval_file=str(tmp_path / "test.npz"), positive_classes=(3,))
    with pytest.raises(DataError, match=rf"^--eval-file {tmp_path / 'test.npz'}: the evaluation split has 0 positive"):
        image_data(cfg)


@pytest.mark.parametrize("header,hint", [("text;label", "separated by ';'"), ("text, label", "blanks around it")])
def test_a_header_that_misses_the_columns_gets_a_hint(tmp_path, header, hint):
    f = tmp_path / "t.csv"
    f.write_text(f"{header}\nx{header[4:-5]}1\n")
    with pytest.raises(DataError, match=hint):
        read_local(str(f), "text", "label")


def test_a_tsv_quoted_the_csv_way_is_warned(tmp_path):
    import pandas as pd

    df = pd.DataFrame({"text": ["a mess\nfrom start to end", 'a "sharp" script', "plain"] + ["fine"] * 3,
                       "label": [0, 1, 0, 1, 0, 1]})
    df.to_csv(tmp_path / "q.tsv", sep="\t", index=False)
    with pytest.warns(UserWarning) as record:
        read_local(str(tmp_path / "q.tsv"), "text", "label")
    messages = [str(w.message) for w in record]
    assert any("2 cell(s) look quoted the CSV way" in m for m in messages), messages
    assert any("skipped 1 of 7 rows" in m for m in messages)  # the line cut off the quoted text's first line
    write_tsv(tmp_path / "glue.tsv", [('" a lone quote opens it', 1), ("plain", 0)], "text")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # GLUE's unquoted texts may start with a quote: no warning
        read_local(str(tmp_path / "glue.tsv"), "text", "label")


@pytest.mark.parametrize("suffix,sep", [(".csv", ","), (".tsv", "\t")])
def test_rows_with_more_fields_than_the_header_are_warned_and_their_extras_not_kept(tmp_path, suffix, sep):
    f = tmp_path / f"t{suffix}"
    f.write_text(f"id{sep}text\n1{sep}good\n2{sep}bad{sep} really\n3{sep}fine\n4{sep}x{sep}y{sep}z\n")
    with pytest.warns(UserWarning, match=r"2 row\(s\) have more fields than the header \(the first ends on line 3\)"):
        texts, others = read_rows(str(f), "text", "--input")
    assert texts == ["good", "bad", "fine", "x"] and others == [{"id": str(i)} for i in range(1, 5)]


@pytest.mark.slow  # runs the entry point in a subprocess
def test_the_command_line_shows_a_skipped_row_warning_as_one_line(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("text,label\n" + "".join(f"t{i},{i % 2}\n" for i in range(10)) + " ,1\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    res = warm.run([sys.executable, "-m", "fewshot.train", "--dataset", str(f), "--text-column", "text",
                    "--n-labeled", "100", "--output-dir", str(tmp_path / "out")], capture_output=True, text=True,
                   timeout=300, env=env)
    assert res.returncode == 2 and "too few examples" in res.stderr
    assert f"warning: {f}: skipped 1 of 11 rows with an empty 'text' or 'label'\n" in res.stderr
    assert "UserWarning" not in res.stderr and "data.py" not in res.stderr
