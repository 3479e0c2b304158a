"""A text run's data checked against what it was made with: sample.json records a fingerprint of the drawn
examples, and a resume, an export or a grid refuses data that changed (a file reordered or edited gives other
examples under the same indices)."""

import json

import pytest

from fewshot.train import train
from tests.fewshot.conftest import make_texts, write_tsv
from tests.fewshot.test_fewshot import _cfg


def _reorder(path):
    lines = open(path).read().splitlines()
    open(path, "w").write("\n".join([lines[0]] + sorted(lines[1:])) + "\n")


def test_a_resume_on_a_reordered_data_file_is_refused(tiny_encoder, easy_task, tmp_path):
    train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, checkpoint_every=2))
    recorded = json.loads((tmp_path / "run" / "sample.json").read_text())
    assert len(recorded["data_sha256"]) == 64
    _reorder(easy_task[0])  # the same rows in another order: the same indices draw other examples
    with pytest.raises(ValueError, match=r"the data differ from those the run was made with .the drawn rows hold "
                                         r"other texts or labels \(the labeled examples, the unlabeled examples "
                                         r"changed\)"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=4, eval_every=2, checkpoint_every=2, resume=True))
    assert json.loads((tmp_path / "run" / "sample.json").read_text()) == recorded  # nothing rewritten


def test_a_resume_on_an_edited_evaluation_file_is_refused_and_on_the_same_data_goes_on(tiny_encoder, easy_task,
                                                                                       tmp_path):
    train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, checkpoint_every=2))
    dev = easy_task[1]
    original = open(dev).read()
    write_tsv(dev, [(t, 1 - y) for t, y in make_texts(60, 1)])  # the evaluation labels flipped
    with pytest.raises(ValueError, match=r"the data differ .*\(the evaluation split changed\)"):
        train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=4, eval_every=2, checkpoint_every=2, resume=True))
    open(dev, "w").write(original)
    m = train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=4, eval_every=2, checkpoint_every=2, resume=True))
    assert m["steps"] == 4


def test_a_grid_refuses_to_count_a_finished_run_whose_data_changed(tiny_encoder, easy_task, tmp_path):
    from fewshot.grids import refuse_other_finished_run

    cfg = _cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, checkpoint_every=2)
    train(cfg)
    refuse_other_finished_run(tmp_path / "run", cfg)  # the same data: counted
    _reorder(easy_task[0])
    with pytest.raises(ValueError, match="the data differ.*it cannot count as a run of this grid's data"):
        refuse_other_finished_run(tmp_path / "run", cfg)


def test_an_export_that_fits_the_head_again_refuses_changed_data(tiny_encoder, easy_task, tmp_path):
    from fewshot.export import export_run

    train(_cfg(tiny_encoder, easy_task, tmp_path, max_steps=2, eval_every=2, checkpoint_every=2, head="logreg",
               export=False))
    _reorder(easy_task[0])
    with pytest.raises(ValueError, match="the data differ.*head cannot be fitted again"):
        export_run(tmp_path / "run", tmp_path / "exported")



def test_evaluation_texts_that_stand_in_the_training_pool_are_counted_in_a_warning(tiny_encoder, easy_task, tmp_path):
    from fewshot.data import load_splits

    train_file, _ = easy_task
    rows = make_texts(200, 0)
    leak = write_tsv(tmp_path / "leak.tsv", rows[:30] + make_texts(30, 7))
    cfg = _cfg(tiny_encoder, (train_file, leak), tmp_path)
    with pytest.warns(UserWarning, match=r"(3[0-9]|[4-5][0-9]) of the 60 evaluation texts \(--eval-file .*leak.tsv\) "
                                         r"also stand in the training pool"):
        load_splits(cfg)
    with pytest.warns(UserWarning, match="200 of the 200 evaluation texts"):
        load_splits(_cfg(tiny_encoder, (train_file, train_file), tmp_path))


def test_a_file_without_repeated_texts_gives_no_overlap_warning(tiny_encoder, tmp_path):
    import warnings

    from fewshot.data import load_splits

    rows = [(f"{t} number {i}", y) for i, (t, y) in enumerate(make_texts(200, 0))]  # every text distinct
    train_file = write_tsv(tmp_path / "train.tsv", rows)
    cfg = _cfg(tiny_encoder, (train_file, None), tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_splits(cfg)


def test_texts_longer_than_max_length_are_counted_in_a_note(tiny_encoder, tmp_path, capsys):
    from fewshot.run import prepare

    rows = [((t + " ") * (6 if i % 4 == 0 else 1), y) for i, (t, y) in enumerate(make_texts(200, 0))]
    train_file = write_tsv(tmp_path / "train.tsv", rows)
    dev = write_tsv(tmp_path / "dev.tsv", make_texts(60, 1))
    prepare(_cfg(tiny_encoder, (train_file, dev), tmp_path, max_length=16))
    out = capsys.readouterr().out
    drawn = json.loads((tmp_path / "run" / "sample.json").read_text())
    long = sum(i % 4 == 0 for i in drawn["labeled"] + drawn["unlabeled"])  # 42 tokens (this tokenizer adds none)
    assert 0 < long < 120
    assert f"note: {long} of the 120 drawn training texts (longest 42 tokens) are longer than --max-length 16 " in out
    assert "evaluation texts" not in out  # 7 words: none cut


def test_a_max_length_over_the_tokenizers_own_limit_says_which_limit_binds(tiny_encoder, easy_task, tmp_path):
    import shutil

    folder = tmp_path / "enc"
    shutil.copytree(tiny_encoder, folder)
    conf = json.loads((folder / "tokenizer_config.json").read_text())
    (folder / "tokenizer_config.json").write_text(json.dumps({**conf, "model_max_length": 16}))
    with pytest.raises(ValueError, match=r"--max-length 32 exceeds the tokenizer's model_max_length 16 .* position "
                                         r"embeddings take 64 tokens.*raise model_max_length in its "
                                         r"tokenizer_config.json \(up to 64\)"):
        train(_cfg(str(folder), easy_task, tmp_path, max_length=32))


def test_the_hint_for_too_few_examples_leaves_room_for_the_unlabeled_ones():
    from fewshot.data import DataError, sample_fewshot

    labels = [0, 1] * 80  # 160 examples
    with pytest.raises(DataError, match=r"lower --n-labeled \(at most 144 here with --n-unlabeled 16\)"):
        sample_fewshot(labels, 300, 16, 0)
    sample_fewshot(labels, 144, 16, 0)  # the hint's numbers work
    with pytest.raises(DataError, match=r"at most 160\) and --n-unlabeled \(labeled \+ unlabeled at most 160\)"):
        sample_fewshot(labels, 300, 500, 0)


def test_ce_punce_without_unlabeled_examples_warns(tiny_encoder, easy_task, tmp_path):
    with pytest.warns(UserWarning, match="--n-unlabeled 0 with --objective ce\\+punce"):
        _cfg(tiny_encoder, easy_task, tmp_path, objective="ce+punce", n_unlabeled=0).validate()


def _unlabeled_file(path, n=150, seed=5):
    texts = [t for t, _ in make_texts(n, seed)]
    path.write_text("\n".join(texts) + "\n")
    return str(path)


def test_the_text_pipeline_draws_its_unlabeled_examples_from_an_unlabeled_file(tiny_encoder, easy_task, tmp_path):
    """Texts without labels could only go to the PU pipeline (`--unlabeled-file ... belongs to python -m fewshot.train
    pu`); a file's rows without labels were skipped as empty."""
    from fewshot.data import sample_fewshot
    from fewshot.run import prepare, training_data

    unl = _unlabeled_file(tmp_path / "unlabeled.txt")
    cfg = _cfg(tiny_encoder, easy_task, tmp_path, unlabeled_file=unl, n_unlabeled=40, prior=0.5)
    train_x, train_y, _, _, sample = training_data(cfg)
    pool = 200 - 0  # the easy task's training file, every row (the evaluation split is its own file)
    assert len(train_x) == pool + 150 and train_y[pool:] == [-1] * 150
    assert len(sample.unlabeled) == 40 and sample.unlabeled.min() >= pool
    # the labeled draw is the one the run makes without the file
    assert sample.labeled.tolist() == sample_fewshot(train_y[:pool], 20, 0, cfg.seed).labeled.tolist()
    assert set(train_x[i] for i in sample.unlabeled) <= set(open(unl).read().splitlines())
    run = prepare(cfg)
    assert (run.prior, run.prior_source, run.exact_prior) == (0.5, "given", None)
    m = train(_cfg(tiny_encoder, easy_task, tmp_path / "b", unlabeled_file=unl, n_unlabeled=40, prior=0.5,
                   objective="ce+punce", max_steps=2, eval_every=2, checkpoint_every=2))
    assert m["prior"] == 0.5 and json.loads((tmp_path / "b" / "run" / "config.json").read_text())["unlabeled_file"]


def test_an_unlabeled_file_without_a_prior_gets_an_estimate_and_its_limits_are_named(tiny_encoder, easy_task,
                                                                                    tmp_path, capsys):
    from fewshot.run import prepare

    unl = _unlabeled_file(tmp_path / "unlabeled.txt")
    run = prepare(_cfg(tiny_encoder, easy_task, tmp_path / "a", unlabeled_file=unl, n_unlabeled=40))
    assert run.prior_source == "elkan-noto" and 0.0 <= run.prior <= 1.0
    # the estimate is said in words: a number the user did not give
    assert f"prior: {run.prior:.4g}, the Elkan-Noto estimate of the positive share of the 40 unlabeled texts" in \
        capsys.readouterr().err
    with pytest.raises(ValueError, match=r"holds 150 texts, fewer than --n-unlabeled 500: lower --n-unlabeled"):
        prepare(_cfg(tiny_encoder, easy_task, tmp_path / "b", unlabeled_file=unl, n_unlabeled=500))
    with pytest.raises(ValueError, match="--n-unlabeled 0 draws none of them"):
        _cfg(tiny_encoder, easy_task, tmp_path / "c", unlabeled_file=unl, n_unlabeled=0).validate()


def test_an_unlabeled_file_sharing_texts_with_the_evaluation_split_is_warned_of(tiny_encoder, easy_task, tmp_path):
    from fewshot.run import training_data

    dev_texts = [t for t, _ in make_texts(60, 1)]
    unl = tmp_path / "unlabeled.txt"
    unl.write_text("\n".join(dev_texts[:10] + [t for t, _ in make_texts(100, 9)]) + "\n")
    with pytest.warns(UserWarning, match=r"of the 60 evaluation texts \(the evaluation split\) also stand in the "
                                         r"training pool \(--unlabeled-file"):
        training_data(_cfg(tiny_encoder, easy_task, tmp_path, unlabeled_file=str(unl), n_unlabeled=40, prior=0.5))


def test_the_command_line_takes_unlabeled_file_in_the_text_pipeline():
    from fewshot.config import check_pipeline_options

    check_pipeline_options("text", ["--unlabeled-file", "u.txt"])  # refused before as the PU pipeline's option
    with pytest.raises(ValueError, match="--positive-file is not an option of the text pipeline"):
        check_pipeline_options("text", ["--positive-file", "p.txt"])


def test_a_mistyped_pipeline_is_named_and_export_takes_run_dir_as_the_other_exporters(tmp_path, capsys):
    from fewshot.config import from_cli
    from fewshot.export import main as export_main

    with pytest.raises(ValueError, match=r"'imagez' is not a pipeline of python -m fewshot.train: text, pu, images "
                                         r"\(did you mean images\?\)"):
        from_cli(["imagez", "--help"])
    with pytest.raises(FileNotFoundError):  # --run-dir is read (argparse said "required: --run" before)
        export_main(["--run-dir", str(tmp_path / "absent")])
    with pytest.raises(SystemExit):
        export_main(["--help"])
    text = capsys.readouterr().out
    import re

    assert "(default: RUN/model)" in text and not re.search(r"\(default: RUN/model\)\s+\(default", text)


def test_a_pu_evaluation_file_sharing_texts_with_the_pu_files_is_warned_of(tmp_path):
    """The text pipeline warned of evaluation texts in its training pool; the PU pipeline's files did not."""
    from fewshot.config import PuConfig
    from fewshot.data import load_pu_files

    pos = [t for t, y in make_texts(60, 3) if y == 1]
    unl = [t for t, _ in make_texts(80, 4)]
    (tmp_path / "pos.txt").write_text("\n".join(pos) + "\n")
    (tmp_path / "unl.txt").write_text("\n".join(unl) + "\n")
    ev = write_tsv(tmp_path / "ev.tsv", [(t, 1) for t in pos[:10]] + make_texts(20, 5))
    cfg = PuConfig(positive_file=str(tmp_path / "pos.txt"), unlabeled_file=str(tmp_path / "unl.txt"), eval_file=ev)
    with pytest.warns(UserWarning, match=r"of the 30 evaluation texts \(--eval-file .*ev.tsv\) also stand in the "
                                         r"training pool \(--positive-file"):
        load_pu_files(cfg)


def test_the_recorded_data_fingerprints_stay_those_older_runs_wrote():
    """sample.json files written before the fingerprints were computed in one pass hold these values for these
    examples: a change of the serialisation would refuse every older run's resume as changed data."""
    import numpy as np

    from fewshot.data import FewShotSample, data_fingerprints

    sample = FewShotSample(np.array([2, 0]), np.array([1, 3]))
    whole, parts = data_fingerprints(["a good film", "dull", "é — ünïcode", "plain"], [1, 0, 1, -1],
                                     ["eval one", "eval two"], [1, 0], sample)
    assert whole == "e4f28409087df43e8393d1bb465d1c8337222f70f90a812ba3c40eab156e0d44"
    assert parts == {"labeled": "6e415db184c661532b4dec19237709e33c1c79770ee8b7e5a924566ae821a957",
                     "unlabeled": "49ac433ac56ae46b1872ecfdffa162531e083c095d7f21b416aec3643bb75920",
                     "eval": "9e4869fcb8bd197a34fa93b81bac9bc93c0bc98aa0b665aa4fb4738a747009d7"}
