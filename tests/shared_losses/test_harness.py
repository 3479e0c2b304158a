"""The run harness the three trainers share (shared_losses.training.harness): a tiny training loop written against it
is interrupted by a real SIGINT, resumed, and must end exactly as the uninterrupted run; its logs keep no row
twice; its configuration check names the fields; the folder is claimed before anything is written."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal

import pytest
import torch

from shared_losses.training.harness import ConfigChanged, RunHarness, refuse_config_changes
from shared_losses.training.runtime import RUN_FILE, CheckpointError, RunFolderError, RunInterrupted, load_checkpoint

FREE = {"steps", "resume", "overwrite"}


def tiny_run(out, steps=6, resume=False, overwrite=False, interrupt_at=None, lr=0.1, checkpoint_every=4) -> dict:
    """A loop as the trainers write it: the harness owns the folder, config, logs, checkpoints and signals;
    the loop owns the model and its step. ``interrupt_at``: send SIGINT to this process during that step."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    config = {"steps": steps, "lr": lr, "resume": resume, "overwrite": overwrite}
    h = RunHarness("tiny", out, resume=resume, overwrite=overwrite, free=FREE)
    acc = Accelerator(cpu=True)
    if h.resuming:
        h.refuse_config_changes(json.loads((h.out / "config.json").read_text()), config)
    h.open(acc)
    h.write_config(config)
    set_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    model, opt = acc.prepare(model, opt)
    step = 0
    if h.resuming:
        step = h.saved_state()["step"]
        load_checkpoint(acc, h.checkpoint_dir)
    h.start_logging(step if h.resuming else None, config=config)
    with h.signals():
        while step < steps:
            x = torch.randn(5, 3)  # the global RNG: restored from the checkpoint on resume
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == interrupt_at:
                os.kill(os.getpid(), signal.SIGINT)
            h.csv().log({"step": step, "loss": loss.item()})
            h.tb.add_scalar("loss", loss.item(), step)
            due = h.checkpoint_due(step, checkpoint_every)
            if due:
                h.checkpoint({"step": step})
            if h.stop_requested() and step < steps:
                raise h.interrupted(f"step {step}", None if due else {"step": step})
    h.checkpoint({"step": step})
    return h.finish({"step": step, "weight": model.weight.detach().flatten().tolist()})


def log_steps(out) -> list[int]:
    with open(out / "log.csv") as fh:
        return [int(r["step"]) for r in csv.DictReader(fh)]


def test_harness_an_interrupted_and_resumed_run_ends_as_the_uninterrupted_one(tmp_path):
    whole = tiny_run(tmp_path / "whole")
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with pytest.raises(RunInterrupted, match=r"interrupted at step 3 \(checkpoint written to .*checkpoint\); "
                                             r"continue with --resume"):
        tiny_run(tmp_path / "cut", interrupt_at=3)
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers  # handlers given back
    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 3  # off the cadence: written on stop
    assert not (tmp_path / "cut" / "summary.json").exists()
    resumed = tiny_run(tmp_path / "cut", resume=True)
    assert resumed == whole
    assert log_steps(tmp_path / "cut") == list(range(1, 7))  # every step logged once
    assert json.loads((tmp_path / "cut" / "summary.json").read_text()) == whole
    assert json.loads((tmp_path / "cut" / RUN_FILE).read_text())["application"] == "tiny"


def test_a_finished_run_removes_a_previous_checkpoint_left_by_a_cut_save(tmp_path):
    """A save cut between its last two steps (the new checkpoint in place, .checkpoint.old not yet removed) left the
    old copy for good when the run then resumed and finished (it saves nothing again); a finished run removes it."""
    from accelerate import Accelerator

    out = tmp_path / "r"
    tiny_run(out)
    old = out / ".checkpoint.old"
    shutil.copytree(out / "checkpoint", old)  # as the kill left it
    (out / "summary.json").unlink()
    h = RunHarness("tiny", out, resume=True, free=FREE)  # resumed at its last step: no step, no save, finished
    h.open(Accelerator(cpu=True))
    h.finish({"step": 6})
    assert not old.exists() and (out / "checkpoint" / "COMPLETE").exists()
    # an .old beside a checkpoint that is not complete is the one a resume would read: kept
    shutil.copytree(out / "checkpoint", old)
    (out / "checkpoint" / "COMPLETE").unlink()
    from shared_losses.training.runtime import drop_previous_checkpoint

    drop_previous_checkpoint(out / "checkpoint")
    assert old.exists()


def test_harness_a_run_cut_after_its_checkpoint_logs_the_redone_steps_once(tmp_path):
    """Rows logged after the last checkpoint are redone on resume; the log keeps each step once."""
    out = tmp_path / "r"
    with pytest.raises(RunInterrupted):
        tiny_run(out, interrupt_at=4, steps=6)  # on the cadence: the loop's own checkpoint is the one kept
    with open(out / "log.csv", "a") as fh:  # a row written after the checkpoint by a run killed later
        fh.write("5,0.5\n")
    tiny_run(out, resume=True)
    assert log_steps(out) == list(range(1, 7))


def test_a_log_deleted_or_cut_before_a_resume_is_warned_of(tmp_path):
    """log.csv (or eval.csv) deleted between a stop and --resume started again at the next step without a word: the
    rows up to the checkpoint were gone for good. The checkpoint records how many rows each log held."""
    import warnings

    out = tmp_path / "r"
    with pytest.raises(RunInterrupted):
        tiny_run(out, interrupt_at=4, steps=6)
    meta = json.loads((out / "checkpoint" / "COMPLETE").read_text())
    assert meta["log_rows"] == {"log.csv": 4}
    (out / "log.csv").unlink()
    with pytest.warns(UserWarning, match=r"log.csv had 4 rows at the checkpoint \(step 4\) and now is gone"):
        tiny_run(out, resume=True, steps=8)
    assert log_steps(out) == [5, 6, 7, 8]
    with pytest.raises(RunInterrupted):
        tiny_run(tmp_path / "s", interrupt_at=4, steps=6)
    lines = (tmp_path / "s" / "log.csv").read_text().splitlines()
    (tmp_path / "s" / "log.csv").write_text("\n".join(lines[:3]) + "\n")  # the header and two rows of four
    with pytest.warns(UserWarning, match=r"had 4 rows at the checkpoint \(step 4\) and now holds 2 of them"):
        tiny_run(tmp_path / "s", resume=True)
    with pytest.raises(RunInterrupted):
        tiny_run(tmp_path / "t", interrupt_at=4, steps=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the log as the checkpoint left it: no word
        tiny_run(tmp_path / "t", resume=True)


def test_harness_refuses_a_resume_with_other_options_naming_each_field(tmp_path):
    out = tmp_path / "c"
    tiny_run(out, steps=2)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(ConfigChanged, match=r"different configuration \(lr: 0.1 -> 0.2\)") as err:
        tiny_run(out, steps=4, resume=True, lr=0.2)
    assert isinstance(err.value, CheckpointError) and isinstance(err.value, ValueError)
    assert "--overwrite" in str(err.value) and "\n" not in str(err.value)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # a free field may change: the run continues to 4 steps
    assert tiny_run(out, steps=4, resume=True)["step"] == 4


def test_harness_config_check_uses_free_fields_and_refuses_missing_ones():
    refuse_config_changes({"a": 1, "steps": 3}, {"a": 1, "steps": 9}, free={"steps"})
    with pytest.raises(ConfigChanged, match=r"new: None -> True"):  # a run of an older version: no implied values
        refuse_config_changes({"a": 1}, {"a": 1, "new": True})
    with pytest.raises(ConfigChanged, match=r"\(a: 1 -> 2, b: None -> 3\)"):
        refuse_config_changes({"a": 1}, {"a": 2, "b": 3}, where="X")


def test_harness_claims_the_folder_before_writing_anything(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(RunFolderError, match="holds no run"):
        RunHarness("tiny", mine)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]
    h = RunHarness("tiny", tmp_path / "new")  # read-only until open()
    assert not (tmp_path / "new").exists() and not h.resuming


def test_harness_loggers_are_stand_ins_before_logging_starts_and_off_the_main_process(tmp_path):
    h = RunHarness("tiny", tmp_path / "x")
    h.csv().log({"step": 1})
    h.tb.add_scalar("loss", 1.0, 1)
    assert h.csv().rows == []

    class NotMain:
        is_main_process, num_processes = False, 2

        def wait_for_everyone(self):
            pass

    h.accelerator = NotMain()
    h.start_logging(None, config={"a": 1})
    h.write_config({"a": 1})
    h.finish({"step": 0})
    assert not (tmp_path / "x").exists()  # only the main process writes into the folder


def test_harness_checkpoint_cadence():
    assert [s for s in range(1, 10) if RunHarness.checkpoint_due(s, 4)] == [4, 8]
    assert not any(RunHarness.checkpoint_due(s, 0) for s in range(1, 10))


def test_harness_refuses_a_checkpoint_that_names_no_application(tmp_path):
    """A checkpoint without the application the harness records (another version of the suite) is refused in one
    line before anything reads it, and the folder is left as it was."""
    out = tmp_path / "run"
    tiny_run(out, steps=4)
    extra = out / "checkpoint" / "extra.pt"
    state = torch.load(extra, weights_only=False)
    assert state.pop("application") == "tiny"
    torch.save(state, extra)
    before = sorted(p.relative_to(out).as_posix() for p in out.rglob("*"))
    with pytest.raises(CheckpointError, match="names no application") as err:
        tiny_run(out, steps=6, resume=True)
    assert "\n" not in str(err.value)
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == before


def test_harness_compares_every_recorded_option_record_in_one_place(tmp_path):
    """refuse_changed_options, the one resume check the loop makes for every application: the checkpoint's record
    and config.json, each through the application's normaliser, free fields aside; a checkpoint that records no
    options or has another layout is refused; config.json alone only when asked (a run that keeps no checkpoint)."""
    from accelerate import Accelerator

    from shared_losses.training.runtime import save_checkpoint

    options = {"steps": 6, "lr": 0.1, "path": "data/x", "resume": True, "overwrite": False}
    h = RunHarness("tiny", tmp_path / "run", free=FREE)
    h.open(Accelerator(cpu=True))
    h.write_config(options)
    save_checkpoint(h.accelerator, h.checkpoint_dir, {"step": 2, "format": 3, "config": options, "application": "tiny"})
    h = RunHarness("tiny", tmp_path / "run", resume=True, free=FREE)
    saved = h.saved_state()
    same = lambda record: (record, options)  # noqa: E731
    h.refuse_changed_options(same, saved, checkpoint_format=3)
    h.refuse_changed_options(lambda record: (record, {**options, "steps": 9}), saved)  # a free field
    with pytest.raises(ConfigChanged, match=r"checkpoint.*lr: 0\.1 -> 0\.2") as err:
        h.refuse_changed_options(lambda record: (record, {**options, "lr": 0.2}), saved)
    assert len(str(err.value).splitlines()) == 1
    # the normaliser decides what is compared (a relative path read as the absolute one it names)
    absolute = {**options, "path": "/abs/data/x"}
    with pytest.raises(ConfigChanged, match="path: 'data/x' -> '/abs/data/x'"):
        h.refuse_changed_options(lambda record: (record, absolute), saved)
    h.refuse_changed_options(lambda record: ({**record, "path": "/abs/data/x"}, absolute), saved)
    # config.json is a record too: a copy edited by hand is refused although the checkpoint matches
    (h.out / "config.json").write_text(json.dumps({**options, "lr": 0.5}))
    with pytest.raises(ConfigChanged, match=r"config\.json.*lr: 0\.5 -> 0\.1"):
        h.refuse_changed_options(same, saved)
    with pytest.raises(ConfigChanged, match=r"lr: 0\.5 -> 0\.1"):  # without a checkpoint, when asked
        h.refuse_changed_options(same, None, without_checkpoint=True)
    h.refuse_changed_options(same, None)  # a new run compares nothing
    (h.out / "config.json").write_text(json.dumps(options))
    with pytest.raises(ConfigChanged, match="lr: None -> 0.1"):  # a field the record lacks counts as changed
        h.refuse_changed_options(same, {**saved, "config": {k: v for k, v in options.items() if k != "lr"}})
    with pytest.raises(CheckpointError, match="does not record the options it was trained with"):
        h.refuse_changed_options(same, {k: v for k, v in saved.items() if k != "config"})
    with pytest.raises(CheckpointError, match=r"another version of tiny \(checkpoint format 3, this one reads 4\)"):
        h.refuse_changed_options(same, saved, checkpoint_format=4)


def test_a_stop_signal_during_the_clean_up_of_a_failed_start_waits_for_it(tmp_path, monkeypatch):
    """torchrun sends SIGTERM to the other processes when one fails: a main process still removing its new run's
    folder was ended half-way (config.json, run.json, vocab.json left, and the corrected command then refused the
    folder). The signal now waits until the folder is gone, then goes to the handler of before."""
    import os
    import signal

    import shared_losses.training.harness as harness_module
    from accelerate import Accelerator

    h = RunHarness("tiny", tmp_path / "run", free=FREE)
    h.open(Accelerator(cpu=True))
    h.write_config({"steps": 1})
    real_rmtree, got = harness_module.shutil.rmtree, []

    def rmtree_after_a_signal(path, *args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)  # arrives before the first file is removed
        assert not got  # held: not yet acted on
        real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(harness_module.shutil, "rmtree", rmtree_after_a_signal)
    before = signal.signal(signal.SIGTERM, lambda signum, frame: got.append(signum))
    try:
        h.abandon()
    finally:
        signal.signal(signal.SIGTERM, before)
    assert not (tmp_path / "run").exists() and got == [signal.SIGTERM]
