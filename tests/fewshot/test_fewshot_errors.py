"""Issue 34, tracebacks to one line: a damaged (truncated) model file given to fewshot.predict or fewshot.export, an
--encoder that is not a model (a folder without one, a name that is no folder and not reachable offline), and label
columns that cannot be made binary each end in one `error:` line and exit status 2, with nothing written."""

import json
from pathlib import Path

import pytest

from fewshot.config import FewShotConfig
from fewshot.export import export_run, safetensors_problem
from fewshot.model import FewShotModel, load_tokenizer
from fewshot.predict import load_classifier

from ..test_errors_one_line import cli
from .conftest import make_texts, write_tsv



@pytest.fixture
def tiny_run(tiny_encoder, easy_task, tmp_path):
    """A finished 2-step run with its exported model/."""
    from fewshot.train import train

    train_file, dev = easy_task
    train(FewShotConfig(encoder=tiny_encoder, dataset=train_file, eval_file=dev, n_labeled=10, n_unlabeled=20,
                        max_steps=2,
                        batch_labeled=5, batch_unlabeled=5, max_length=16, pooling="mean", proj_dim=8, eval_every=2,
                        checkpoint_every=2, output_dir=str(tmp_path / "run"), device="cpu", progress=False))
    return tmp_path / "run"


def truncate(path: Path, size: int) -> bytes:
    """Cut ``path`` to ``size`` bytes (negative: that many bytes fewer); the bytes left."""
    data = path.read_bytes()
    path.write_bytes(data[:size])
    return path.read_bytes()


def test_safetensors_problem_finds_every_cut(tiny_run):
    weights = tiny_run / "model" / "model.safetensors"
    whole = weights.read_bytes()
    assert safetensors_problem(weights) is None
    header = 8 + int.from_bytes(whole[:8], "little")
    for size, words in [(0, "too short"), (5, "too short"), (100, "its header needs"), (header, "header describes"),
                        (header + 10, "header describes"), (len(whole) - 1, "header describes")]:
        weights.write_bytes(whole[:size])
        assert words in safetensors_problem(weights), size
    weights.write_bytes(whole + b"\0")  # bytes after the last tensor: not this file either
    assert "header describes" in safetensors_problem(weights)
    weights.write_bytes(b"\x08" + b"\0" * 7 + b"not json")
    assert safetensors_problem(weights) == "its header is not a safetensors header"


def test_predict_names_a_truncated_model_file_in_one_line(tiny_run):
    weights = tiny_run / "model" / "model.safetensors"
    left = truncate(weights, -100)
    with pytest.raises(ValueError) as err:
        load_classifier(tiny_run)
    message = str(err.value)
    assert len(message.splitlines()) == 1 and str(weights) in message and "is damaged" in message
    assert weights.read_bytes() == left  # read, never rewritten


def test_predict_names_a_damaged_tokenizer_file_in_one_line(tiny_run):
    truncate(tiny_run / "model" / "tokenizer.json", 100)
    with pytest.raises(ValueError, match="its tokenizer files could not be loaded") as err:
        load_classifier(tiny_run)
    assert len(str(err.value).splitlines()) == 1


def test_export_names_a_truncated_checkpoint(tiny_run, tmp_path):
    weights = tiny_run / "checkpoint" / "model.safetensors"
    truncate(weights, -1)
    with pytest.raises(ValueError, match=rf"the checkpoint of .*{weights} is damaged") as err:
        export_run(tiny_run, tmp_path / "elsewhere")
    assert len(str(err.value).splitlines()) == 1 and not (tmp_path / "elsewhere").exists()


@pytest.mark.slow  # runs the entry point in a subprocess
def test_predict_cli_on_a_truncated_model_file(tiny_run, tmp_path):
    weights = tiny_run / "model" / "model.safetensors"
    left = truncate(weights, weights.stat().st_size // 2)
    (tmp_path / "in.txt").write_text("good movie\n")
    line = cli("-m", "fewshot.predict", "--model", str(tiny_run), "--input", str(tmp_path / "in.txt"),
               "--output", str(tmp_path / "out.jsonl"))
    assert str(weights) in line and "is damaged" in line and "fewshot.export" in line
    assert not (tmp_path / "out.jsonl").exists() and weights.read_bytes() == left


def _not_a_model(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    junk = tmp_path / "junk"
    junk.mkdir()
    (junk / "notes.txt").write_text("not a model")
    return {"empty": (str(empty), "it is empty"), "junk": (str(junk), "it holds ['notes.txt']")}


def test_a_folder_without_a_model_is_named_in_one_line(tmp_path):
    for folder, holds in _not_a_model(tmp_path).values():
        for load in (load_tokenizer, FewShotModel):
            with pytest.raises(ValueError) as err:
                load(folder)
            message = str(err.value)
            assert len(message.splitlines()) == 1 and "sentencepiece" not in message
            assert f"--encoder {folder}: the folder is not a model: it has no config.json ({holds})" in message


@pytest.mark.slow  # runs the entry point in subprocesses
@pytest.mark.parametrize("which", ["empty", "junk", "hub name"])
def test_fewshot_train_with_an_encoder_that_is_not_a_model(easy_task, tmp_path, which):
    encoder, words = _not_a_model(tmp_path)[which] if which != "hub name" else (
        "NOT_A_MODEL", "is not a model here: no such local folder, and not in the local hub cache. Offline: the "
                       "Hugging Face hub could not be reached (HF_HUB_OFFLINE=1)")
    train_file, dev = easy_task
    out = tmp_path / "run"
    line = cli("-m", "fewshot.train", "--encoder", encoder, "--dataset", train_file, "--eval-file", dev,
               "--n-unlabeled", "50", "--max-steps", "1", "--output-dir", str(out), "--device", "cpu")
    assert f"--encoder {encoder}" in line and words in line and "sentencepiece" not in line
    assert not out.exists()


@pytest.mark.slow  # runs the entry point in subprocesses
def test_fewshot_train_with_labels_that_cannot_be_made_binary(tiny_encoder, tmp_path):
    rows = [(t, 1 + i % 5) for i, (t, _) in enumerate(make_texts(60, 0))]
    train_file = write_tsv(tmp_path / "train.tsv", rows, text_col="review", label_col="stars")
    before = Path(train_file).read_bytes()
    out = tmp_path / "run"
    common = ("-m", "fewshot.train", "--encoder", tiny_encoder, "--dataset", train_file, "--eval-file", train_file,
              "--text-column", "review", "--label-column", "stars", "--n-unlabeled", "20", "--output-dir", str(out))
    line = cli(*common)
    assert "the labels are not binary, found 5 values ['1', '2', '3', '4', '5']" in line
    assert "--positive-label V" in line and "--label-map" in line
    line = cli(*common, "--positive-label", "6")
    assert "--positive-label '6' is not among the label values ['1', '2', '3', '4', '5']" in line
    line = cli(*common, "--label-map", "1=0,2=0,4=1,5=one")
    assert "--label-map 1=0,2=0,4=1,5=one: '5' goes to 'one'" in line
    assert not out.exists() and Path(train_file).read_bytes() == before
    json.dumps(line)  # one printable line
