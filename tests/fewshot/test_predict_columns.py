"""fewshot.predict's --text-column defaults to the column the run was trained with (its config.json's text_column),
not `text`: predicting GLUE's test.tsv with a model trained on GLUE-style files used to need --text-column sentence."""

import json
import os
import re
from pathlib import Path

import pytest

from fewshot.predict import main as predict
from fewshot.train import train
from shared_losses.data import DataError

from .conftest import make_texts, text_config, write_tsv


def _run_folder(folder, text_column="review"):
    """A run folder as far as the default column is concerned: config.json (the run's options), metrics.json,
    model/ with the model's own config.json."""
    (folder / "model").mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"pipeline": "text", "text_column": text_column}))
    (folder / "metrics.json").write_text("{}")
    (folder / "model" / "config.json").write_text(json.dumps({"model_type": "fewshot_classifier"}))
    return folder


def test_the_run_s_text_column_is_found_from_the_run_its_model_folder_or_an_export_elsewhere(tmp_path):
    from fewshot.predict import recorded_text_column

    run = _run_folder(tmp_path / "run")
    want = ("review", run / "config.json")
    assert recorded_text_column(run, run / "model") == want  # --model RUN
    assert recorded_text_column(run / "model", run / "model") == want  # --model RUN/model
    elsewhere = tmp_path / "exported"  # python -m fewshot.export --run RUN --output exported: its marker names the run
    elsewhere.mkdir()
    (elsewhere / "config.json").write_text(json.dumps({"model_type": "fewshot_classifier"}))
    (elsewhere / "fewshot_export.json").write_text(json.dumps({"run": str(run.resolve())}))
    assert recorded_text_column(elsewhere, elsewhere) == want
    # a model folder on its own (copied, its run gone): no recorded column, predict falls back to `text`
    (elsewhere / "fewshot_export.json").write_text(json.dumps({"run": str(tmp_path / "gone")}))
    assert recorded_text_column(elsewhere, elsewhere) is None
    # ... unless the export records the column itself (every export since 2026-12-05): then the run is not needed
    (elsewhere / "fewshot_export.json").write_text(json.dumps({"run": str(tmp_path / "gone"), "text_column": "body"}))
    assert recorded_text_column(elsewhere, elsewhere) == ("body", elsewhere / "fewshot_export.json")
    # a folder above the model whose config.json is a model's (or no JSON object) is no run
    nested = tmp_path / "hub" / "model"
    nested.mkdir(parents=True)
    (tmp_path / "hub" / "config.json").write_text(json.dumps({"model_type": "bert", "text_column": "x"}))
    assert recorded_text_column(nested, nested) is None
    (tmp_path / "hub" / "config.json").write_text("[1, 2]")
    assert recorded_text_column(nested, nested) is None


@pytest.fixture(scope="module")
def sentence_run(tiny_encoder, tmp_path_factory):
    """A tiny run trained on GLUE-style files: the text in `sentence` (the default --text-column)."""
    folder = tmp_path_factory.mktemp("sentence_run")
    base = dict(encoder=tiny_encoder, dataset=write_tsv(folder / "train.tsv", make_texts(80, 0)),
                eval_file=write_tsv(folder / "dev.tsv", make_texts(20, 1)), objective="ce", n_labeled=10,
                n_unlabeled=20, max_steps=2, batch_labeled=10, batch_unlabeled=10, max_length=16, pooling="mean",
                proj_dim=16, eval_every=2, checkpoint_every=2, output_dir=str(folder / "run"), device="cpu",
                progress=False)
    train(text_config(base))
    return folder / "run"


def test_predict_reads_the_run_s_text_column_without_text_column(sentence_run, tmp_path, capsys):
    """GLUE's test.tsv (index, sentence) used to be refused with "column(s) ['text'] not found"."""
    test = tmp_path / "test.tsv"
    test.write_text("index\tsentence\n0\tthe movie was good\n1\tthe plot was awful\n")
    for model in (sentence_run, sentence_run / "model"):
        out = tmp_path / f"{model.name}.jsonl"
        predict(["--model", str(model), "--input", str(test), "--output", str(out)])
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert [(r["index"], r["text"]) for r in rows] == [("0", "the movie was good"), ("1", "the plot was awful")]
        assert all(r["label"] is not None for r in rows)
    assert "read its 'text' column" not in capsys.readouterr().err


def test_an_input_with_only_a_text_column_is_still_read_and_stderr_says_so(sentence_run, tmp_path, capsys):
    (tmp_path / "in.jsonl").write_text('{"text": "good movie"}\n{"text": "awful plot"}\n')
    predict(["--model", str(sentence_run), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "o.csv")])
    assert (tmp_path / "o.csv").read_text().splitlines()[1].startswith("good movie,")
    err = capsys.readouterr().err
    assert "no column 'sentence' (the run's text column, from" in err and "read its 'text' column" in err


def test_an_input_without_the_run_s_column_names_where_the_default_came_from(sentence_run, tmp_path):
    (tmp_path / "in.csv").write_text("id,body\n0,good movie\n")
    with pytest.raises(DataError) as err:
        predict(["--model", str(sentence_run), "--input", str(tmp_path / "in.csv"), "--output",
                 str(tmp_path / "o.jsonl")])
    message = str(err.value)
    assert "column(s) ['sentence'] not found" in message and "available columns: ['id', 'body']" in message
    assert f"the run's text column 'sentence', from {sentence_run / 'config.json'}; nor has the input a 'text' " \
        "column" in message
    assert len(message.splitlines()) == 1 and not (tmp_path / "o.jsonl").exists()
    # --text-column given: that column, no default involved
    predict(["--model", str(sentence_run), "--input", str(tmp_path / "in.csv"), "--text-column", "body",
             "--output", str(tmp_path / "o.jsonl")])
    assert json.loads((tmp_path / "o.jsonl").read_text().splitlines()[0])["text"] == "good movie"


def test_an_export_keeps_its_text_column_when_its_run_is_moved(sentence_run, tmp_path):
    """fewshot.predict found the column through the absolute path of the run that the export's marker recorded: once
    the run was moved (or the export copied to another machine) it fell back to `text` and refused the input."""
    import shutil

    from fewshot.export import main as export

    run = tmp_path / "run"
    shutil.copytree(sentence_run, run)
    export(["--run-dir", str(run), "--output", str(tmp_path / "shared")])
    assert json.loads((tmp_path / "shared" / "fewshot_export.json").read_text())["text_column"] == "sentence"
    run.rename(tmp_path / "moved")
    test = tmp_path / "test.tsv"
    test.write_text("index\tsentence\n0\tthe movie was good\n")
    predict(["--model", str(tmp_path / "shared"), "--input", str(test), "--output", str(tmp_path / "p.jsonl")])
    assert json.loads((tmp_path / "p.jsonl").read_text())["text"] == "the movie was good"
    config = json.loads((tmp_path / "shared" / "config.json").read_text())
    assert "_name_or_path" not in config["encoder_config"]  # no path of the trainer's machine in what is shared
    marker = json.loads((tmp_path / "shared" / "fewshot_export.json").read_text())
    assert "run" not in marker and marker["run_name"] == "run"
    # the moved run replaces its own export (it was refused as "files that are not this run's export")
    export(["--run-dir", str(tmp_path / "moved"), "--output", str(tmp_path / "shared"), "--overwrite"])
    assert json.loads((tmp_path / "shared" / "fewshot_export.json").read_text())["run_name"] == "moved"


def test_an_output_that_cannot_be_written_is_refused_before_anything_is_predicted(sentence_run, tmp_path,
                                                                                   monkeypatch):
    """The folder of --output was first tried at the write, after the whole input was predicted; a file in the
    place of a folder came out as "[Errno 17] File exists: 'afile'"."""
    import fewshot.predict as P

    calls = []
    monkeypatch.setattr(P, "load_classifier", lambda *a: calls.append(a))
    test = tmp_path / "test.tsv"
    test.write_text("index\tsentence\n0\tthe movie was good\n")
    (tmp_path / "afile").write_text("x")
    with pytest.raises(NotADirectoryError, match=r"afile is a file, not a folder \(nothing was read or predicted\)"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "afile" / "o.jsonl")])
    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o500)
        try:
            with pytest.raises(ValueError, match="the folder .*ro cannot be written"):
                predict(["--model", str(sentence_run), "--input", str(test), "--output", str(ro / "o.jsonl")])
        finally:
            ro.chmod(0o700)
    monkeypatch.setattr("tempfile.NamedTemporaryFile", _refusing_temporary_file)  # a read-only file system
    with pytest.raises(ValueError, match=r"the folder .*new cannot be written \(Read-only file system\)"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "new" / "o.jsonl")])
    assert calls == [] and not list(tmp_path.glob("**/o.jsonl"))


def _refusing_temporary_file(*args, **kwargs):
    raise OSError(30, "Read-only file system")


def test_an_export_of_a_checkpoint_with_nan_weights_is_refused(sentence_run, tmp_path):
    """A checkpoint's weights overwritten with 0xff bytes (the size kept) exported an all-NaN classifier silently."""
    import shutil

    from fewshot.export import main as export
    from shared_losses.training.runtime import CheckpointError

    from ..nlp_qt.test_export_travel import _overwrite_weights_with_ff

    run = tmp_path / "run"
    shutil.copytree(sentence_run, run)
    _overwrite_weights_with_ff(run / "checkpoint" / "model.safetensors")
    with pytest.raises(CheckpointError, match="NaN or infinite value"):
        export(["--run-dir", str(run), "--output", str(tmp_path / "out")])
    assert not (tmp_path / "out").exists()
    # an export damaged the same way: fewshot.predict wrote NaN probabilities and label 0 for every text
    export(["--run-dir", str(sentence_run), "--output", str(tmp_path / "shared")])
    _overwrite_weights_with_ff(tmp_path / "shared" / "model.safetensors")
    (tmp_path / "in.txt").write_text("good movie\n")
    with pytest.raises(CheckpointError, match=r"--model .*shared: .* holds \d+ NaN or infinite value"):
        predict(["--model", str(tmp_path / "shared"), "--input", str(tmp_path / "in.txt"), "--output",
                 str(tmp_path / "p.jsonl")])
    assert not (tmp_path / "p.jsonl").exists()


def test_predictions_are_scored_against_a_label_column(sentence_run, tmp_path, capsys):
    """Trainer.predict's metrics on a labeled file (a probe found fewshot.predict passed the labels through and scored
    nothing): --label-column scores the predictions (the model's class names, or the run's label rule), --scores
    writes them; a missing column and --scores without --label-column are refused before anything is predicted."""
    import csv

    rows = make_texts(30, 5)
    test = write_tsv(tmp_path / "test.tsv", rows)
    out = tmp_path / "p.csv"
    predict(["--model", str(sentence_run), "--input", str(test), "--output", str(out), "--label-column", "label",
             "--scores", str(tmp_path / "scores.json")])
    said = capsys.readouterr().err
    preds = list(csv.DictReader(open(out)))
    right = sum(int(p["label"]) == y for p, (_, y) in zip(preds, rows))
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["rows_scored"] == 30 and scores["accuracy"] == pytest.approx(100.0 * right / 30)
    assert scores["labels_read_as"] == "the model's class names" and scores["n_positive"] == sum(y for _, y in rows)
    assert f"scored 30 rows against --label-column label (read as the model's class names): accuracy " \
           f"{100.0 * right / 30:.2f} %" in said
    # labels spelled otherwise than the classes: read by the run's own rule (--positive-label 1: 1.0 is 1, 0.0 is 0)
    other = tmp_path / "other.tsv"
    other.write_text("sentence\tlabel\n" + "".join(f"{t}\t{float(y)}\n" for t, y in rows))
    predict(["--model", str(sentence_run), "--input", str(other), "--output", str(tmp_path / "o.csv"),
             "--label-column", "label", "--scores", str(tmp_path / "o.json")])
    assert json.loads((tmp_path / "o.json").read_text())["accuracy"] == scores["accuracy"]
    words = tmp_path / "words.tsv"
    words.write_text("sentence\tlabel\n" + "".join(f"{t}\t{'yes' if y else 'no'}\n" for t, y in rows))
    with pytest.raises(DataError, match=r"values \['no', 'yes'\] are neither the model's classes .* nor read by the "
                                        r"run's label rule .*write the labels as the model's classes$"):
        predict(["--model", str(sentence_run), "--input", str(words), "--output", str(tmp_path / "w.csv"),
                 "--label-column", "label"])
    assert not (tmp_path / "w.csv").exists()  # refused before any prediction was written (a rerun was refused too)
    with pytest.raises(ValueError, match="--label-column stars: no such column in --input .* label"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "m.csv"),
                 "--label-column", "stars"])
    # the column read as the texts named as the labels (a probe: it said the column was missing)
    with pytest.raises(ValueError, match=r"--label-column sentence is the column read as the texts to classify "
                                         r"\(--text-column sentence, the run's or the default\): name the column"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "m.csv"),
                 "--label-column", "sentence"])
    with pytest.raises(ValueError, match=r"--label-column sentence is the column read as the texts to classify "
                                         r"\(--text-column sentence\): name"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "m.csv"),
                 "--text-column", "sentence", "--label-column", "sentence"])
    with pytest.raises(ValueError, match="--scores writes the scores against --label-column"):
        predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "n.csv"),
                 "--scores", str(tmp_path / "n.json")])
    assert not (tmp_path / "m.csv").exists() and not (tmp_path / "n.csv").exists()
    # --scores naming the predictions' file or the input (with --overwrite): the one replaced the other, silently
    before = Path(test).read_bytes()
    for scores, words in ((tmp_path / "s.csv", "is the --output file: the scores would replace the predictions"),
                          (Path(test), "is the --input file: the scores would replace the texts and labels")):
        with pytest.raises(ValueError, match=rf"^--scores {re.escape(str(scores))} {words}; write them to another "
                                             r"file \(nothing was written\)$"):
            predict(["--model", str(sentence_run), "--input", str(test), "--output", str(tmp_path / "s.csv"),
                     "--label-column", "label", "--scores", str(scores), "--overwrite"])
    assert Path(test).read_bytes() == before and not (tmp_path / "s.csv").exists()


def test_a_model_folder_whose_tokenizer_asks_to_run_its_own_code_is_refused(sentence_run, tmp_path, monkeypatch):
    """A probe added auto_map to a copied model folder's tokenizer_config.json with a module of its own: transformers
    asked "Do you wish to run the custom code? [y/N]" and, answered y, ran it, although predict says it runs no code
    from the folder. Now refused at once, without asking and without running it."""
    import io
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(sentence_run / "model", folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    config["auto_map"] = {"AutoTokenizer": ["evil_tok.EvilTokenizer", None]}
    config["tokenizer_class"] = "EvilTokenizer"
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    pwned = tmp_path / "PWNED"
    (folder / "evil_tok.py").write_text(f"import pathlib\npathlib.Path({str(pwned)!r}).touch()\n"
                                        "from transformers import PreTrainedTokenizer as EvilTokenizer\n")
    (tmp_path / "in.txt").write_text("a text\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    with pytest.raises(ValueError, match=r"its tokenizer_config.json asks to run tokenizer code shipped in the "
                                         r"folder; fewshot.predict runs no code from a model folder"):
        predict(["--model", str(folder), "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "p.jsonl")])
    assert not pwned.exists() and not (tmp_path / "p.jsonl").exists()


def test_the_exports_loading_line_is_python_for_any_folder_name(sentence_run, tmp_path, capsys):
    """The printed line to load an export wrapped its folder in hand-written quotes: for a folder named `it's` the
    pasted line was a syntax error. The folder is a Python string literal now."""
    import ast

    from fewshot.export import main as export

    out = tmp_path / "it's ours" / "model"
    export(["--run-dir", str(sentence_run), "--output", str(out)])
    line = capsys.readouterr().out.strip()
    call = line[line.index("transformers.pipeline("):]
    tree = ast.parse(call)  # a syntax error before
    (model,) = [k.value.value for k in tree.body[0].value.keywords if k.arg == "model"]
    assert model == str(out)


def test_a_command_named_in_an_error_takes_the_folder_quoted_for_the_shell(tmp_path):
    """The errors that name a command to run printed the folder as it is: a folder with a space broke the pasted
    command. It is quoted for the shell (a plain folder as it is)."""
    import shlex

    from fewshot.predict import model_folder

    for name in ("my runs", "plain"):
        run = tmp_path / name / "r"
        run.mkdir(parents=True)
        (run / "config.json").write_text("{}")
        (run / "metrics.json").write_text("{}")
        with pytest.raises(ValueError) as info:
            model_folder(run)
        assert str(info.value).endswith(f"python -m fewshot.export --run-dir {shlex.quote(str(run))}")
    assert str(info.value).endswith(f"--run-dir {run}")  # nothing to quote
