"""The one training loop of the three applications: :func:`run` owns it, each application supplies its parts.

drqv2's ``Workspace`` owns its loop and each agent supplies ``act`` / ``update``; here :func:`run` claims
nothing itself (the application's :class:`~shared_losses.training.harness.RunHarness` did, read-only, before any work)
and then, in order::

    harness.refuse_resume_without_checkpoint(...)  # --resume of a finished run without its checkpoint/ (unless the
                                           # app keeps none: keeps_checkpoint)
    saved = harness.saved_state()          # the checkpoint's counters, read once (None for a new run); another
                                           # application's checkpoint refused
    harness.refuse_changed_options(...)    # other options (or checkpoint layout) refused, in one place
    app.check_resume(saved)                # a finished run: its summary, nothing touched
    app.build(saved)                       # data, models, optimisers; the folder opened
    app.load_state(checkpoint)             # resume: models, optimisers, random states, counters
    harness.release_config()               # config.json, only now: a resume that failed left it as it was
    harness.start_logging(...)             # log.csv (+ more), TensorBoard, trimmed after the checkpoint
    while not app.done():                  # under SIGINT / SIGTERM handlers
        rows = app.train_step()            # None: nothing was left to train (an epoch-based stream ran out)
        rows += app.evaluate()             # when app.eval_due(): merge_rows
        app.log(rows)                      # every row of every log goes through here (log.csv, eval.csv, TensorBoard)
        harness.checkpoint(app.state())    # when app.can_checkpoint() and app.checkpoint_due()
        raise harness.interrupted(...)     # a stop request, at the next point the app can checkpoint
    app.finish()                           # final evaluation and checkpoint
    app.close()                            # on every way out of the loop or finish()
    app.export()                           # the trained model (main process)
    harness.finish(app.summary())          # summary.json / metrics.json, logs closed

A new run that fails before its first step (bad input found once the folder was made, such as a corpus
smaller than one batch) leaves no run behind: :meth:`~shared_losses.training.harness.RunHarness.abandon` removes the
folder (and puts back a run that ``--overwrite`` moved aside). A resumed run's folder is never removed.

An application is a :class:`TrainingApp` subclass: ``build``, ``state``, ``load_state``, ``train_step`` and
``recorded_options`` (what the run records and a resume compares) are required, everything else has a default that
fits a plain step-counted run.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm

from .harness import RunHarness, Rows, merge_rows
from .runtime import (RunInterrupted, RunStopped, checkpoint_exists, is_refused_write, load_checkpoint,
                      refused_write_words, write_refusal_hint)


class TrainingApp:
    """One application's parts of a training run (see :func:`run`). Attributes the loop reads: ``harness``
    (set by the constructor), ``step`` (steps trained), ``accelerator`` (set by :meth:`build`)."""

    #: the name the harness claims folders under and logs in the progress bar
    name = "app"
    #: the CSV logs opened in the run folder, and the column their rows are keyed by on resume
    logs: tuple[str, ...] = ("log.csv",)
    step_key = "step"
    #: what Ctrl-C prints (None: the harness's "finishing the current step" message)
    stop_message: str | None = None
    #: the file the summary is written to
    summary_file = "summary.json"

    def __init__(self, harness: RunHarness):
        self.harness = harness
        self.step = 0
        self.accelerator = None

    # ------------------------------------------------------------------------------ required

    def build(self, saved: dict | None) -> None:
        """Data, models and optimisers; ``harness.open(accelerator)`` and the configuration snapshot
        (``harness.write_config``: the loop holds it back until the checkpoint has loaded).
        ``saved``: the checkpoint's counters when resuming (already checked by :meth:`check_resume`), else None."""
        raise NotImplementedError

    def state(self) -> dict:
        """The counters and random states a checkpoint keeps beside the registered models."""
        raise NotImplementedError

    def load_state(self, state: dict) -> None:
        """Continue from a checkpoint's ``state`` (the models are already loaded)."""
        raise NotImplementedError

    def train_step(self) -> Rows | None:
        """One training step; returns what it logs (a row of log.csv, ``{}`` for nothing, or a list of
        :class:`~shared_losses.training.harness.LogRow` for rows of other logs or with scalars of their own), or None
        when nothing was left to train (the loop then ends). A step logs nothing by itself: the loop logs what it
        returns through :meth:`log`."""
        raise NotImplementedError

    @property
    def recorded_options(self) -> dict[str, Any]:
        """The options the run records in config.json and in every checkpoint (as ``config``); a resume compares them
        field by field (:meth:`shared_losses.training.harness.RunHarness.refuse_changed_options`)."""
        raise NotImplementedError

    # ------------------------------------------------------------------------------ defaults

    #: the checkpoint layout this code reads (a checkpoint's ``format``; None: not checked)
    checkpoint_format: Any = None
    #: whether a finished run keeps its checkpoint/. False for a run that trains nothing (fewshot's baselines: no
    #: steps, no logs, the work in :meth:`finish`): a resume then compares config.json alone, and a finished run is
    #: its summary (:meth:`check_resume`)
    keeps_checkpoint = True

    def compare_options(self, record: dict) -> tuple[dict, dict]:
        """(a run's recorded options, this command's) as a resume compares them: by default the record as written and
        :attr:`recorded_options`. Override to normalise (input paths made absolute, defaults resolved)."""
        return record, self.recorded_options

    def check_resume(self, saved: dict | None) -> dict | None:
        """Before anything is built or written, once the options have been checked: return the summary of a finished
        run that this command asks for no more training (the folder is left as it is), else None (``saved``: the
        checkpoint's counters, None for a new run). Refuse what else a resume cannot do (fewer steps than trained)."""
        return None

    def report_to(self) -> tuple[str, ...]:
        """The trackers the run logs to (``--report-to``: the configuration's ``report_to``, else TensorBoard)."""
        cfg = getattr(self, "cfg", None)
        return tuple(getattr(cfg, "report_to", ("tensorboard",)))

    def total_steps(self) -> int | None:
        """Steps the run trains in all (the progress bar's total; None: unknown)."""
        return None

    def done(self) -> bool:
        """Whether the run has trained all its steps (the loop then ends)."""
        total = self.total_steps()
        return total is not None and self.step >= total

    def log_resume_step(self) -> int:
        """The ``step_key`` value of the checkpoint a resumed run starts from (its logs are cut there)."""
        return self.step

    def eval_due(self) -> bool:
        """Whether to evaluate after the step just taken."""
        return False

    def evaluate(self) -> Rows:
        """An evaluation during training; returns what it logs, as :meth:`train_step` does (a plain row's fields are
        added to the step's plain row: :func:`~shared_losses.training.harness.merge_rows`)."""
        return {}

    def log(self, rows: Rows) -> None:
        """Log the step's rows (with the evaluation's when there was one), and the final evaluation's
        (:meth:`finish`)."""
        self.harness.log_rows(rows, self.step_key)

    def postfix(self) -> dict:
        """What the progress bar shows after the step."""
        return {}

    def can_checkpoint(self) -> bool:
        """Whether the run can be checkpointed (and so stopped) after the step just taken."""
        return True

    def checkpoint_due(self) -> bool:
        """Whether to write a checkpoint after the step just taken."""
        return False

    def stop_requested(self) -> bool:
        """Whether SIGINT / SIGTERM asked the run to stop (on every process alike)."""
        return self.harness.stop_requested()

    def where(self) -> str:
        """Where an interrupted run stopped, for the message."""
        return f"step {self.step}"

    def progress(self) -> tqdm:
        """The progress bar, made once the logs are open (a resumed run's logged rows can be read then)."""
        return tqdm(total=self.total_steps(), initial=self.step, unit="step", disable=True)

    def close(self) -> None:
        """Release what the run holds open (environments), on every way out of the loop or :meth:`finish`."""

    def finish(self) -> None:
        """After the last step: the final evaluation and checkpoint."""
        self.harness.checkpoint(self.state())

    def export(self) -> None:
        """The trained model into the run folder (called on the main process only)."""

    def summary(self) -> dict:
        """The run's summary (written to ``summary_file`` and returned by :func:`run`)."""
        raise NotImplementedError


def run(app: TrainingApp) -> dict:
    """Train (or resume) ``app``'s run to the end; returns its summary (also written to ``app.summary_file``)."""
    harness = app.harness
    if app.keeps_checkpoint:
        harness.refuse_resume_without_checkpoint(app.summary_file)
    saved = harness.saved_state()
    harness.refuse_changed_options(app.compare_options, saved, checkpoint_format=app.checkpoint_format,
                                   without_checkpoint=not app.keeps_checkpoint)
    done = app.check_resume(saved)
    if done is not None:
        return done
    first = app.step
    started = False  # a step was trained (or a checkpoint written): from then on the folder holds a run
    try:
        harness.hold_config()
        app.build(saved)
        if saved is not None:
            app.load_state(load_checkpoint(harness.accelerator, harness.checkpoint_dir))
            first = app.step
        harness.release_config()
        if app.logs or app.report_to():  # a run with neither (a baseline that trains nothing) writes no logs
            harness.start_logging(app.log_resume_step() if saved is not None else None, config=app.recorded_options,
                                  csv=app.logs, step_key=app.step_key, report_to=app.report_to())
        bar = app.progress()
    except BaseException:
        harness.abandon()
        harness.release()
        raise
    try:
        try:
            with harness.signals(app.stop_message):  # Ctrl-C / SIGTERM: stop at the next checkpoint, exit 130
                while not app.done():
                    rows = app.train_step()
                    started = started or app.step != first
                    if rows is None:
                        break
                    if app.eval_due():
                        rows = merge_rows(rows, app.evaluate())
                    app.log(rows)
                    bar.update(1)
                    postfix = app.postfix()
                    if postfix:
                        bar.set_postfix(postfix, refresh=False)
                    if not app.can_checkpoint():
                        continue
                    written = app.checkpoint_due()
                    if written:
                        harness.checkpoint(app.state())
                    if not app.done() and app.stop_requested():
                        raise harness.interrupted(app.where(), None if written else app.state())
        except BaseException as err:
            err = _refused_write(err, harness, "a log")
            if not (started or isinstance(err, RunInterrupted)):  # failed on its first step: bad input, no run
                harness.abandon()
            elif isinstance(err, RunStopped):  # a process the run steps ended: say where, and how to go on
                _stopped(err, harness, f"the run stopped at {app.where()}")
            harness.release()
            raise err
        finally:
            bar.close()
        try:
            app.finish()
        except BaseException as err:
            _after_training(err, app)
    finally:
        app.close()
    try:
        if harness.is_main:
            app.export()
        return harness.finish(app.summary(), app.summary_file)
    except BaseException as err:
        _after_training(err, app)


def _refused_write(err: BaseException, harness: RunHarness, what: str) -> BaseException:
    """``err``, or a :class:`RunStopped` naming the folder when it is a write the file system refused (only a write
    meets these errors: :func:`~shared_losses.training.runtime.is_refused_write`); ``what``: the file, when the error
    does not name it."""
    if not is_refused_write(err):
        return err
    refused = RunStopped(f"could not write to {harness.out} ({refused_write_words(err)}: {err.filename or what}): "
                         f"{write_refusal_hint(err)}")
    refused.__cause__ = err
    return refused


def _stopped(err: RunStopped, harness: RunHarness, where: str) -> None:
    """Close the run's logs (release the folder where their last flush fails too) and raise ``err`` completed with
    ``where`` the run stopped and how to go on."""
    try:
        harness.close()
    except OSError:  # the logs' last flush, on the disk that is full
        harness.release()
    how = (f"continue from its last checkpoint ({harness.checkpoint_dir}) with --resume"
           if checkpoint_exists(harness.checkpoint_dir) else
           "it wrote no checkpoint yet, so start it again (--overwrite moves the folder aside)")
    raise RunStopped(f"{err}; {where}: {how}") from err


def _after_training(err: BaseException, app: TrainingApp) -> None:
    """A failure after the last step (the final evaluation and checkpoint, the export, the summary): a write the file
    system refused stops the run in one line (a resume writes what is missing: a finished run's outputs are only
    complete once its summary is written); anything else is raised as it is."""
    harness = app.harness
    err = _refused_write(err, harness, "the run's outputs")
    if not isinstance(err, RunStopped):
        harness.release()
        raise err
    _stopped(err, harness, f"the run trained to {app.where()} and stopped before its outputs were all written")
