"""Issue 16, item 5: bad input that used to end in a traceback or a vague message now gets one `error:` line
naming the file or option at fault, before any work starts and with nothing written."""

import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def cli(*argv, cwd=ROOT):
    """The one `error:` line of a command that must fail with status 2 (offline, no traceback)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "MUJOCO_GL": "egl"}
    env.pop("CONTRASTIVE_SUITE_TRACEBACK", None)
    # a fresh interpreter on purpose (not tests/warm.py): what a user sees includes what the imports print
    res = subprocess.run([sys.executable, *argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    errors = [line for line in res.stderr.splitlines() if line.startswith("error: ")]
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(errors) == 1, res.stderr
    return errors[0]


def fake_run(folder: Path, application: str, config: dict | str) -> Path:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"application": application}))
    (folder / "config.json").write_text(config if isinstance(config, str) else json.dumps(config))
    return folder


@pytest.mark.slow  # runs the entry point in a subprocess
def test_rl_curl_evaluate_names_another_applications_run(tmp_path):
    run = fake_run(tmp_path / "qt", "nlp_qt", {"objective": "qt", "bidirectional": True})
    assert "holds a run of nlp_qt, not of rl_curl" in cli("-m", "rl_curl.evaluate", "--run-dir", str(run))


@pytest.mark.parametrize("device,words", [("foo", "'foo' is not a torch device"), ("cuda:x", "not a torch device"),
                                          ("cuda", "CUDA")])
@pytest.mark.slow  # each case runs the entry point in a subprocess
def test_rl_curl_evaluate_checks_the_device_first(tmp_path, device, words):
    if device == "cuda" and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    run = fake_run(tmp_path / "rl", "rl_curl", {"task": "cartpole-swingup"})
    line = cli("-m", "rl_curl.evaluate", "--run-dir", str(run), "--device", device)
    assert f"--device {device}" in line.replace("'", "") and words in line


@pytest.mark.slow  # runs the entry point in a subprocess
def test_rl_curl_evaluate_names_a_damaged_config(tmp_path):
    run = fake_run(tmp_path / "rl", "rl_curl", '{"task": ')
    line = cli("-m", "rl_curl.evaluate", "--run-dir", str(run))
    assert f"{run / 'config.json'} is damaged (not valid JSON" in line


@pytest.mark.slow  # runs the entry point in a subprocess
def test_rl_curl_train_refuses_a_replay_that_cannot_fit_before_writing(tmp_path):
    line = cli("-m", "rl_curl.train", "--replay-capacity", "10000000000", "--output-dir", str(tmp_path / "run"))
    assert "--replay-capacity 10000000000 needs" in line and "GiB" in line and "available" in line
    assert not (tmp_path / "run").exists()


def test_replay_estimate_matches_what_the_buffer_allocates():
    from rl_curl.replay import FrameReplay

    rb = FrameReplay(1000, (9, 20, 20), 6, 3)
    est = FrameReplay.estimate_bytes(1000, (9, 20, 20), 6, 3)
    assert est["frames"] == rb.frames.nbytes
    assert est["other"] == rb.actions.nbytes + rb.rewards.nbytes + rb.not_dones.nbytes + rb.next_frame.nbytes


@pytest.mark.parametrize("damaged", ["config.json", "vocab.json"])
def test_nlp_qt_model_files_are_named_when_damaged(tmp_path, damaged):
    from nlp_qt.model import ModelConfig, QuickThought, load_model, save_model
    from nlp_qt.vocab import Vocab

    vocab = Vocab(["the", "cat"], max_len=8, lowercase=False)
    model = QuickThought(ModelConfig(vocab_size=len(vocab), word_dim=4, encoder_dim=4))
    folder = save_model(model, vocab, tmp_path / "model")
    load_model(folder)  # intact: loads
    (folder / damaged).write_text('{"itos": [')
    with pytest.raises(ValueError, match=f"{damaged} is damaged \\(not valid JSON"):
        load_model(folder)


@pytest.mark.slow  # runs the entry point in a subprocess
def test_fewshot_names_a_missing_local_encoder_folder(tmp_path):
    missing = tmp_path / "models" / "my-roberta"
    line = cli("-m", "fewshot.train", "--encoder", str(missing), "--dataset", "reuters", "--n-unlabeled", "100",
               "--output-dir", str(tmp_path / "run"))
    assert f"--encoder {missing}: no such folder" in line and "Repo id" not in line
    assert not (tmp_path / "run").exists()


def test_each_applications_tools_name_the_owner_of_another_applications_run_and_what_reads_it(tmp_path):
    # in process: the messages, not the entry points (those are the tests above and tests/test_battery.py)
    from fewshot.export import run_config
    from nlp_qt.export import _run_settings
    from rl_curl import load_policy
    from rl_curl.evaluate import load_agent

    rl = fake_run(tmp_path / "rl", "rl_curl", {"task": "cartpole-swingup"})
    qt = fake_run(tmp_path / "qt", "nlp_qt", {"objective": "qt"})
    fs = fake_run(tmp_path / "fs", "fewshot", {"pipeline": "text"})
    with pytest.raises(FileNotFoundError, match="holds a run of rl_curl, not of nlp_qt: use .*rl_curl.evaluate"):
        _run_settings(rl)
    with pytest.raises(FileNotFoundError, match="holds a run of rl_curl, not of fewshot: use .*rl_curl.load_policy"):
        run_config(rl)
    with pytest.raises(FileNotFoundError, match="holds a run of nlp_qt, not of fewshot: use .*nlp_qt.export"):
        run_config(qt)
    with pytest.raises(FileNotFoundError, match="holds a run of fewshot, not of rl_curl: use .*fewshot.export"):
        load_policy(fs)
    with pytest.raises(ValueError, match="holds a run of nlp_qt, not of rl_curl: use .*nlp_qt.export"):
        load_agent(qt)
    with pytest.raises(FileNotFoundError, match=r"policy.pt not found: a run writes .*--resume`, or write the "
                                                r"policy of its last checkpoint with `python -m rl_curl.export "
                                                rf"--run-dir {rl}`"):  # its own, unfinished
        load_policy(rl)


def test_rl_curl_refuses_a_checkpoint_written_by_another_application():
    from rl_curl.train import check_checkpoint_format
    from shared_losses.training.runtime import CheckpointError

    with pytest.raises(CheckpointError, match="written by a run of nlp_qt, not of rl_curl"):
        check_checkpoint_format({"application": "nlp_qt", "step": 3}, "ck")


@pytest.mark.parametrize("script, argv, words", [
    ("qt_table2", ["--bogus"], "unrecognized arguments: --bogus (see qt_table2.py --help)"),
    ("qt_table2", ["--seeds", "x"], "argument --seeds: invalid int value: 'x' (see qt_table2.py --help)"),
    ("qt_table2", [], "--corpus and --data are required (or a --preset: cpu, cpu-bow, cpu-w2v, demo) (see "
                      "qt_table2.py --help)"),
    ("pu_images_table", ["--bogus"], "unrecognized arguments: --bogus (see pu_images_table.py --help)"),
    ("pu_images_table", ["--set", "passes=0.25", "--set", "max_steps=2"],
     "--set passes and --set max_steps both set the training length; give one (max_steps alone replaces the default "
     "passes) (see pu_images_table.py --help)"),
])
def test_table_scripts_refuse_a_bad_command_line_in_one_line(script, argv, words, capsys, monkeypatch):
    import importlib.util

    from shared_losses.training.cli import run_cli

    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location(script, root / "scripts" / f"{script}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(sys, "argv", [f"{script}.py", *argv])
    monkeypatch.delenv("CONTRASTIVE_SUITE_TRACEBACK", raising=False)
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: mod.main(argv) if script == "pu_images_table" else mod.parse_args(argv))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.strip() == f"error: {words}", err


@pytest.mark.parametrize("module, argv, words", [
    # --run-dir missing: rl_curl.export named its default --output (a file in that folder) instead
    ("rl_curl.export", ["--run-dir", "{tmp}/nodir"], "--run-dir {tmp}/nodir: no such folder"),
    ("rl_curl.export", ["--run-dir", "{tmp}/afile"], "--run-dir {tmp}/afile: a file, not a run folder"),
    ("nlp_qt.export", ["--run-dir", "{tmp}/afile"], "--run-dir {tmp}/afile: a file, not a run folder"),
    # an --output under a file: "[Errno 20] Not a directory" naming a temporary name
    ("nlp_qt.export", ["--run-dir", "{tmp}/nodir", "--output", "{tmp}/afile/m"],
     "--output {tmp}/afile/m: {tmp}/afile is a file, not a folder (nothing was written)"),
    ("fewshot.export", ["--run-dir", "{tmp}/nodir", "--output", "{tmp}/afile/m"],
     "--output {tmp}/afile/m: {tmp}/afile is a file, not a folder (nothing was written)"),
])
@pytest.mark.slow  # each case runs the entry point in a subprocess
def test_exports_name_the_option_at_fault(tmp_path, module, argv, words):
    (tmp_path / "afile").write_text("x")
    line = cli("-m", module, *[a.format(tmp=tmp_path) for a in argv])
    assert line == "error: " + words.format(tmp=tmp_path)


@pytest.mark.parametrize("entry, build, words", [
    ("rl_curl", lambda out: __import__("rl_curl.config", fromlist=["Config"]).Config(batch_size="16", output_dir=out),
     "batch_size must be a whole number (int), got '16' (str)"),
    ("rl_curl", lambda out: __import__("rl_curl.config", fromlist=["Config"]).Config(env_steps=1e5, output_dir=out),
     "env_steps must be a whole number (int), got 100000.0 (float)"),
    ("nlp_qt", lambda out: __import__("nlp_qt.config", fromlist=["Config"]).Config(
        corpus="c.txt", lr="1e-3", output_dir=out), "lr must be a number, got '1e-3' (str)"),
    ("fewshot", lambda out: __import__("fewshot.config", fromlist=["FewShotConfig"]).FewShotConfig(
        objective="ce+punce", report_to=("tensorbord",), output_dir=out),
     "report_to must be a tuple of one of 'tensorboard', 'wandb', 'mlflow', 'none', got ('tensorbord',)"),
    ("fewshot", lambda out: __import__("fewshot.config", fromlist=["ImageConfig"]).ImageConfig(
        mixed_precision="fp8", output_dir=out), "mixed_precision must be one of 'no', 'fp16', 'bf16'"),
])
def test_a_configuration_built_in_code_with_a_wrong_type_is_named_before_anything_is_written(tmp_path, entry, build,
                                                                                            words):
    """In-process use: a field holding another type than its annotation (a string for a number, a float step count, a
    misspelt Literal) is one ValueError naming the field, before the run's folder is made (it was a TypeError from a
    comparison deep inside, or a float that failed later)."""
    import fewshot.train
    import nlp_qt.train
    import rl_curl.train

    out = str(tmp_path / "run")
    cfg = build(out)
    start = {"rl_curl": rl_curl.train.run, "nlp_qt": nlp_qt.train.train, "fewshot": fewshot.train.train}[entry]
    with pytest.raises(ValueError, match="invalid ") as err:
        start(cfg)
    assert words in str(err.value)
    assert not Path(out).exists()


def test_the_type_check_passes_what_the_fields_mean():
    """A path for a string, a list for a tuple, numpy's whole numbers for an int, an int for a float and None where
    the field is optional all pass; a bool is not a whole number."""
    import numpy as np

    from rl_curl.config import Config
    from shared_losses.training.cli import check_field_types

    check_field_types(Config(output_dir=Path("x"), report_to=["none"], seed=np.int64(3), tau_plus=0, lr=None,
                             save_video=np.bool_(True)))
    with pytest.raises(ValueError, match=r"seed must be a whole number \(int\), got True \(bool\)"):
        check_field_types(Config(seed=True))
    from fewshot.config import FewShotConfig
    from nlp_qt.config import Config as QtConfig

    for c in (Config(env_steps=np.int64(16), lr=np.float32(0.5)), QtConfig(max_steps=np.int64(3), lr=np.float32(0.5)),
              FewShotConfig(max_steps=np.int64(4), lr=np.float32(0.5), report_to=(np.str_("none"),))):
        check_field_types(c)  # numpy's numbers become Python's (JSON takes no np.int64)
        values = [getattr(c, f) for f in ("lr", "env_steps" if hasattr(c, "env_steps") else "max_steps")]
        assert [type(v) for v in values] == [float, int] and values[0] == 0.5


@pytest.mark.parametrize("module, argv, words", [
    ("fewshot.config", ["--learning_rate", "1e-3"], "--learning_rate is not an option here: --lr"),
    ("fewshot.config", ["--eval-steps=5"], "--eval-steps is not an option here: --eval-every"),
    ("rl_curl.config", ["--eval_freq", "1000"], "--eval_freq is not an option here: --eval-every, in environment"),
    ("rl_curl.config", ["--save_model"], "--save_model is not an option here: --keep-policies"),
    ("nlp_qt.config", ["--learning_rate=0.1"], "--learning_rate is not an option here: --lr"),
    ("nlp_qt.config", ["--Glove_path", "g.txt"], "--Glove_path is not an option here: --word-vectors FILE"),
])
def test_another_tools_option_names_what_gives_the_same_here(module, argv, words):
    """transformers.Trainer's arguments given to fewshot.train, the official CURL flags given to rl_curl.train and the
    official quick-thought (S2V) flags given to nlp_qt.train (probes of each): tyro's box said "Unrecognized options"
    and, for most, nothing of the option to use."""
    import importlib

    from shared_losses.training.cli import UsageError

    with pytest.raises(UsageError, match=re.escape(words)):
        importlib.import_module(module).from_cli(argv)


def test_the_official_image_size_spelling_is_warned_of_its_other_meaning():
    from rl_curl.config import from_cli

    with pytest.warns(UserWarning, match="--image_size: the render size here .* is --crop-size"):
        cfg = from_cli(["--image_size", "84", "--crop-size", "64"])
    assert cfg.image_size == 84
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_cli(["--image-size", "84", "--crop-size", "64"])  # our spelling: no warning
    with pytest.warns(UserWarning, match="--save_video: the final evaluation's video only here .* --video-every-eval"):
        assert from_cli(["--save_video"]).save_video  # the official flag's meaning is ours under another name
