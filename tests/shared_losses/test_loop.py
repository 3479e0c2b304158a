"""The shared training loop (shared_losses.training.loop.run) on a toy application: checkpoints only where the app
can take one, a stop request honoured at the next such point, a resume that continues exactly, a finished
run left untouched, and the app's parts called in the documented order."""

import csv
import json

import numpy as np
import pytest

from shared_losses.training.harness import RunHarness
from shared_losses.training.loop import TrainingApp, run
from shared_losses.training.runtime import RunInterrupted, RunStopped, load_checkpoint

from ..folder_rules import tree_hash


class Counter(TrainingApp):
    """Adds a random number per step; can checkpoint only after every 3rd step ("episode ends")."""

    name = "toy"

    def __init__(self, out, steps=7, resume=False, stop_at=None, calls=None):
        super().__init__(RunHarness("toy", out, resume=resume))
        self.steps, self.stop_at, self.calls = steps, stop_at, calls if calls is not None else []
        self.total, self.evals = 0.0, []

    def check_resume(self, saved):
        self.calls.append("check_resume")
        if saved is not None and saved["step"] >= self.steps and (self.harness.out / "summary.json").exists():
            return json.loads((self.harness.out / "summary.json").read_text())
        return None

    def build(self, saved):
        self.calls.append("build")
        self.harness.open()
        self.rng = np.random.default_rng(0)

    @property
    def recorded_options(self):  # what a resume compares (the loop's one check; --steps is not among them)
        return {"rng_seed": 0}

    def state(self):
        return {"step": self.step, "total": self.total, "rng": self.rng.bit_generator.state, "evals": self.evals,
                "config": self.recorded_options}

    def load_state(self, state):
        self.calls.append("load_state")
        self.step, self.total, self.evals = state["step"], state["total"], state["evals"]
        self.rng.bit_generator.state = state["rng"]

    def total_steps(self):
        return self.steps

    def train_step(self):
        self.step += 1
        self.total += float(self.rng.random())
        return {"step": self.step, "total": self.total}

    def eval_due(self):
        return self.step % 2 == 0

    def evaluate(self):
        self.evals.append(self.step)
        return {"half": self.total / 2}

    def can_checkpoint(self):
        return self.step % 3 == 0

    def checkpoint_due(self):
        return self.step % 6 == 0

    def stop_requested(self):
        return self.stop_at is not None and self.step >= self.stop_at

    def finish(self):
        self.calls.append("finish")
        super().finish()

    def export(self):
        self.calls.append("export")

    def summary(self):
        return {"step": self.step, "total": self.total, "evals": self.evals}


def test_the_loop_runs_the_parts_in_order_and_logs_each_row(tmp_path):
    calls = []
    summary = run(Counter(tmp_path / "a", calls=calls))
    assert calls == ["check_resume", "build", "finish", "export"]
    assert summary["step"] == 7 and summary["evals"] == [2, 4, 6]
    rows = list(csv.DictReader(open(tmp_path / "a" / "log.csv")))
    assert [int(r["step"]) for r in rows] == list(range(1, 8))
    assert [r["half"] != "" for r in rows] == [s % 2 == 0 for s in range(1, 8)]  # evaluations join the step's row
    assert json.loads((tmp_path / "a" / "summary.json").read_text()) == summary
    assert load_checkpoint(None, tmp_path / "a" / "checkpoint")["step"] == 7  # finish() checkpoints the end


def test_a_stop_waits_for_a_checkpoint_point_and_the_resume_is_exact(tmp_path):
    full = run(Counter(tmp_path / "full"))
    with pytest.raises(RunInterrupted, match="step 6"):  # asked at step 4; step 6 is the next point it can stop
        run(Counter(tmp_path / "cut", stop_at=4))
    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 6
    assert not (tmp_path / "cut" / "summary.json").exists()
    calls = []
    assert run(Counter(tmp_path / "cut", resume=True, calls=calls)) == full
    assert calls == ["check_resume", "build", "load_state", "finish", "export"]
    logs = [list(csv.DictReader(open(tmp_path / name / "log.csv"))) for name in ("full", "cut")]
    assert logs[0] == logs[1]


def test_a_stop_between_checkpoint_points_writes_one(tmp_path):
    """Stopping at a point that can checkpoint but is not on the cadence writes the checkpoint there."""
    with pytest.raises(RunInterrupted, match="step 3"):
        run(Counter(tmp_path / "cut", stop_at=1))
    assert load_checkpoint(None, tmp_path / "cut" / "checkpoint")["step"] == 3


def test_a_finished_run_is_left_as_it_is(tmp_path):
    first = run(Counter(tmp_path / "a"))
    before = tree_hash(tmp_path / "a")
    calls = []
    assert run(Counter(tmp_path / "a", resume=True, calls=calls)) == first
    assert calls == ["check_resume"]
    assert tree_hash(tmp_path / "a") == before


class Crashing(Counter):
    """A toy run that raises ``error`` after step ``crash_at`` (by default: its worker process ends)."""

    def __init__(self, out, crash_at, error=None, **kw):
        super().__init__(out, **kw)
        self.crash_at = crash_at
        self.error = error or RunStopped("the environment's worker process ended (killed by SIGKILL)")

    def train_step(self):
        if self.step == self.crash_at:
            raise self.error
        return super().train_step()


def test_a_run_whose_worker_ends_says_where_it_stopped_and_how_to_go_on(tmp_path):
    # after its checkpoint at step 6: resume from it (and the resume finishes the run as an uninterrupted one would)
    with pytest.raises(RunStopped) as info:
        run(Crashing(tmp_path / "a", crash_at=7, steps=9))
    msg = str(info.value)
    assert msg.startswith("the environment's worker process ended (killed by SIGKILL); the run stopped at step 7: "
                          "continue from its last checkpoint (") and msg.endswith(") with --resume"), msg
    assert load_checkpoint(None, tmp_path / "a" / "checkpoint")["step"] == 6
    resumed = run(Counter(tmp_path / "a", steps=9, resume=True))
    assert resumed == run(Counter(tmp_path / "b", steps=9))
    # before any checkpoint: nothing to resume from, and the folder is kept (it holds the logged steps)
    with pytest.raises(RunStopped, match="it wrote no checkpoint yet, so start it again") as info:
        run(Crashing(tmp_path / "c", crash_at=4, steps=9))
    assert (tmp_path / "c" / "log.csv").exists() and not (tmp_path / "c" / "checkpoint").exists()


def test_a_resume_of_a_run_that_stopped_before_its_first_checkpoint_says_it_starts_again(tmp_path, capsys):
    """Such a run was started again from step 0 without a word (a user expected it to go on)."""
    with pytest.raises(RunStopped):
        run(Crashing(tmp_path / "c", crash_at=2, steps=9))
    capsys.readouterr()
    assert run(Counter(tmp_path / "c", steps=9, resume=True)) == run(Counter(tmp_path / "d", steps=9))
    err = capsys.readouterr().err
    assert err == (f"note: --resume: {tmp_path / 'c'} holds a run that stopped before its first checkpoint, so there "
                   "is nothing to continue: it starts again from the beginning\n")
    run(Counter(tmp_path / "d", steps=12, resume=True))  # a resume from a checkpoint says nothing of the kind
    assert "note:" not in capsys.readouterr().err


def test_a_run_whose_logs_the_disk_refuses_says_so_where_it_stopped_and_how_to_go_on(tmp_path):
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a" / "log.csv"))  # as a log write says it
    with pytest.raises(RunStopped) as info:
        run(Crashing(tmp_path / "a", crash_at=7, error=full, steps=9))
    assert str(info.value) == (
        f"could not write to {tmp_path / 'a'} (No space left on device: {tmp_path / 'a' / 'log.csv'}): the disk is "
        "full, or a quota or file-size limit was reached; make room; the run stopped at step 7: continue from its "
        f"last checkpoint ({tmp_path / 'a' / 'checkpoint'}) with --resume")
    assert isinstance(info.value.__cause__.__cause__, OSError)  # the file system's own error, kept for the traceback
    assert run(Counter(tmp_path / "a", steps=9, resume=True)) == run(Counter(tmp_path / "b", steps=9))


class Refusing(Counter):
    """A toy run whose ``where`` part ("finish": the final checkpoint, "export", "summary") meets ``error``."""

    def __init__(self, out, where, error, **kw):
        super().__init__(out, **kw)
        self.where_, self.error = where, error

    def finish(self):
        if self.where_ == "finish":
            import shared_losses.training.runtime as rt

            real = rt.torch.save
            rt.torch.save = lambda *a, **k: (_ for _ in ()).throw(self.error)
            try:
                super().finish()
            finally:
                rt.torch.save = real
        else:
            super().finish()

    def export(self):
        super().export()
        if self.where_ == "export":
            raise self.error

    def summary(self):
        if self.where_ == "summary":
            raise self.error
        return super().summary()


@pytest.mark.parametrize("where", ["finish", "export", "summary"])
def test_a_write_refused_after_the_last_step_says_so_and_a_resume_writes_the_outputs(tmp_path, where):
    """A full disk while the final checkpoint, the trained model or the summary is written (after every step was
    trained): one line naming the cause and how to go on, no traceback; --resume then writes what is missing, as an
    uninterrupted run would have."""
    import errno

    full = OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "a" / "model.safetensors"))
    with pytest.raises(RunStopped) as info:
        run(Refusing(tmp_path / "a", where, full, steps=9))
    msg = str(info.value)
    assert "the disk is full, or a quota or file-size limit was reached; make room; the run trained to step 9 and " \
           "stopped before its outputs were all written: continue from its last checkpoint (" in msg, msg
    assert msg.endswith(") with --resume"), msg
    if where != "finish":
        assert msg.startswith(f"could not write to {tmp_path / 'a'} (No space left on device: {full.filename}): ")
    assert not (tmp_path / "a" / "summary.json").exists()
    calls = []
    assert run(Counter(tmp_path / "a", steps=9, resume=True, calls=calls)) == run(Counter(tmp_path / "b", steps=9))
    assert calls == ["check_resume", "build", "load_state", "finish", "export"]


def test_an_error_after_the_last_step_that_is_no_refused_write_keeps_its_traceback(tmp_path):
    import errno

    with pytest.raises(ValueError, match="a bug"):
        run(Refusing(tmp_path / "a", "export", ValueError("a bug"), steps=3))
    with pytest.raises(FileNotFoundError):  # a read (or a bug's path) may meet this: not taken for the disk
        run(Refusing(tmp_path / "b", "export", FileNotFoundError(errno.ENOENT, "No such file", "x"), steps=3))


@pytest.mark.parametrize("error, hint", [
    (OSError(28, "No space left on device"), "the disk is full"),
    (OSError(122, "Disk quota exceeded"), "the disk is full, or a quota"),
    (OSError(30, "Read-only file system"), "mounted read-only"),
    (OSError(13, "Permission denied"), "fix the folder's permissions"),
    (OSError(5, "Input/output error"), "the file system failed (EIO: Input/output error), not for lack of room"),
    (OSError(116, "Stale file handle"), "the file system failed (ESTALE"),
    (RuntimeError("Error while serializing: IoError(Os { code: 122, kind: FilesystemQuotaExceeded })"),
     "the disk is full, or a quota"),
    (RuntimeError("Error while serializing: IoError(Os { code: 5, kind: Uncategorized })"), "(EIO: "),
    (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 29696 vs 29584"),
     "the writer did not say why: the disk may be full"),
    (RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"), "did not say why"),
])
def test_a_refused_write_is_told_by_its_cause(error, hint):
    """Only lack of room is told to make room: an input/output error of a failing disk or a stale network mount, a
    read-only file system and permissions each get their own advice (torch's writer loses the cause: both named)."""
    from shared_losses.training.runtime import write_refusal_hint

    assert hint in write_refusal_hint(error)
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = error
    assert hint in write_refusal_hint(wrapped)  # found through the cause chain, as accelerate raises it
