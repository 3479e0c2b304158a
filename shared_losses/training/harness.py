"""The run harness the three trainers share: one object that owns a run's folder, configuration snapshot,
logs, checkpoints and signals. The loop that drives it is :func:`shared_losses.training.loop.run` (each application
supplies its parts as a :class:`shared_losses.training.loop.TrainingApp`); the calls it makes, in order::

    h = RunHarness("nlp_qt", cfg.output_dir, resume=cfg.resume, overwrite=cfg.overwrite,
                   free=Config.RESUME_FREE)            # the folder rules, read-only: nothing written yet
    h.saved_state()                                    # resume: the checkpoint's counters (read once)
    h.refuse_changed_options(compare, saved)           # resume: only the fields the config declares free differ
    h.open(accelerator)                                # move an old run aside (--overwrite), write run.json
    h.write_config(config)                             # config.json, the run's configuration snapshot
    h.start_logging(resume_step, config=config)        # log.csv (and more CSVs) + TensorBoard, trimmed on resume
    with h.signals():                                  # SIGINT/SIGTERM: a request honoured between steps
        ... steps ...
        h.log_rows(rows)                               # log.csv (or another CSV) and TensorBoard
        h.checkpoint(state)                            # atomic
        raise h.interrupted(where, state)              # checkpoint, close the logs; exit 130 via run_cli
    h.finish(summary)                                  # summary.json, logs closed

On processes other than the main one the loggers are stand-ins that drop everything, so a loop logs without
asking which process it is on; only the main process writes files into the folder, and every process takes
part in the checkpoint (accelerate saves each process's random state).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import torch

from .runtime import (CheckpointError, CsvLogger, RunFolder, RunInterrupted, StopSignals, _NoWriter, _stop_signals,
                      changes_text, checkpoint_application, checkpoint_exists, checkpoint_meta, claim_run_folder,
                      config_changes, drop_previous_checkpoint, load_checkpoint, release_run_folder, save_checkpoint,
                      tensorboard_writer, write_json_atomic)

CHECKPOINT = "checkpoint"
CONFIG_FILE = "config.json"


@contextlib.contextmanager
def _stop_signals_held():
    """SIGINT / SIGTERM / ... arriving inside the block are noted, not acted on (a clean-up of a few file operations
    that a signal's default action would cut in half, leaving a half-made run folder); outside the main thread,
    where handlers cannot be set, nothing changes. A signal noted is then sent again under the handlers of before."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    before = {sig: signal.signal(sig, lambda signum, frame: got.append(signum)) for sig in _stop_signals()}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if got:
            signal.raise_signal(got[0])


class ConfigChanged(CheckpointError):
    """A resumed run's options differ from the run's in fields its configuration does not declare free
    (a ValueError: one ``error:`` line at the command line)."""


def refuse_config_changes(saved: Mapping[str, Any], current: Mapping[str, Any], *, free: Iterable[str] = (),
                          where: str | os.PathLike = "the output folder") -> None:
    """The one refusal of a resume with other options, worded alike in every application: a
    :class:`ConfigChanged` naming each differing field outside ``free`` as ``field: saved -> now``."""
    changes = config_changes(saved, current, free=free)
    if changes:
        raise ConfigChanged(f"cannot resume the run in {where}: it was written with a different configuration "
                            f"({changes_text(changes)}), as the run's value -> this command's; use the same options, "
                            "another --output-dir, or --overwrite (moves that run aside)")


def fp16_continued_elsewhere(saved: Mapping[str, Any], current: Mapping[str, Any]) -> bool:
    """Whether a resume continues a run trained with ``mixed_precision`` fp16 in another precision where fp16 cannot
    run: this command's device is ``cpu``, or there is no GPU (a run trained on a GPU, continued on a laptop)."""
    from .runtime import gpu_available

    if saved.get("mixed_precision") != "fp16" or current.get("mixed_precision") in (None, "fp16"):
        return False
    return current.get("device") == "cpu" or not gpu_available()


#: The run folder's record of the tracker runs (wandb, mlflow) it logs to, so that a resumed run logs on in them
#: instead of starting new ones: ``{"wandb": RUN_ID, "mlflow": RUN_ID}``.
TRACKER_RUNS = "trackers.json"


def _mlflow_run(run_id: str) -> tuple[dict[str, str], dict[str, int]] | None:
    """(the parameters, each metric -> the last step it holds) of the MLflow run ``run_id`` in the tracking store in
    use, or None where the store does not hold it (a resumed run whose MLFLOW_TRACKING_URI moved starts a new run
    there, with a warning, instead of failing in MLflow)."""
    try:
        from mlflow.tracking import MlflowClient

        client = MlflowClient()
        run = client.get_run(run_id)
    except Exception as err:  # noqa: BLE001 - MlflowException (not found), or the store cannot be reached
        warnings.warn(f"the MLflow run {run_id} this run logged to is not in the tracking store now "
                      f"({type(err).__name__}); the resumed run starts a new MLflow run", UserWarning, stacklevel=4)
        return None
    last = {key: max((m.step for m in client.get_metric_history(run_id, key)), default=-1) for key in run.data.metrics}
    return dict(run.data.params), last


class _Scalars:
    """The scalar writer a run logs through: TensorBoard (or a stand-in) and the accelerate trackers of
    ``--report-to`` (wandb, mlflow) alike; everything else goes to TensorBoard's writer."""

    def __init__(self, tb, accelerator, floors: Mapping[str, Mapping[str, int]] | None = None):
        self._writer, self._accelerator, self._floors = tb, accelerator, floors or {}

    def add_scalar(self, tag: str, value: Any, step: int) -> None:
        self._writer.add_scalar(tag, value, step)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            for tracker in self._accelerator.trackers:  # those of the main process (accelerate starts no others)
                if tracker.name == "wandb" and int(step) < getattr(getattr(tracker, "run", None), "step", 0):
                    continue  # a resumed wandb run has this step already (wandb would drop it with a warning)
                if int(step) <= self._floors.get(tracker.name, {}).get(tag, -1):
                    continue  # a resumed MLflow run has it (a killed part logged it; the value is the same)
                tracker.log({tag: float(value)}, step=int(step))

    def __getattr__(self, name):
        return getattr(self._writer, name)


def tracker_config(config: Mapping[str, Any]) -> dict:
    """A run's configuration as the trackers take it: values that are not numbers, strings or booleans as text."""
    return {k: v if isinstance(v, (int, float, str, bool)) or v is None else str(v) for k, v in config.items()}


class _NoLogger:
    """Stands in for a :class:`CsvLogger` on processes that write no files."""

    count, last = 0, None

    @property
    def rows(self) -> list:
        return []

    def log(self, row: Mapping[str, Any]) -> None:
        pass

    def close(self) -> None:
        pass


def scalar_tag(field: str) -> str:
    """The TensorBoard / tracker tag of a log row's field, the same in every application: ``eval_accuracy`` ->
    ``eval/accuracy``, ``dev_loss`` -> ``dev/loss``, ``loss`` -> ``train/loss``; a field that already has a
    ``/`` keeps it."""
    if "/" in field:
        return field
    for part in ("eval", "dev", "test"):
        if field.startswith(part + "_"):
            return f"{part}/{field[len(part) + 1:]}"
    return f"train/{field}"


@dataclass(frozen=True)
class LogRow:
    """One row of one of a run's CSV logs and the scalars it stands for. A training step or an evaluation returns a
    plain dict for a row of log.csv whose every field but the step key is a scalar (tagged by :func:`scalar_tag`),
    or a list of these where a row goes elsewhere (``file``: eval.csv) or names its own scalars (``scalars``: tag ->
    value, logged at the row's step key)."""

    values: Mapping[str, Any]
    file: str = "log.csv"
    scalars: Mapping[str, Any] | None = None


#: What a step, an evaluation or a final evaluation gives the loop to log: one row of log.csv, or rows of any log.
Rows = Mapping[str, Any] | list[LogRow]


def as_rows(rows: Rows) -> list[LogRow]:
    """``rows`` as a list of :class:`LogRow` (an empty dict: none)."""
    if isinstance(rows, list):
        return rows
    return [LogRow(rows)] if rows else []


def merge_rows(step: Rows, evaluation: Rows) -> Rows:
    """A step's rows with its evaluation's: two plain rows of log.csv become one (the evaluation's fields added to the
    step's), else the evaluation's rows follow the step's."""
    if not isinstance(step, list) and not isinstance(evaluation, list):
        return {**step, **evaluation}
    return as_rows(step) + as_rows(evaluation)


class RunHarness:
    """The lifecycle of one training run: output folder, configuration snapshot and its check on resume,
    loggers, checkpoints, SIGINT/SIGTERM and the final summary.

    ``free``: the configuration fields a resumed run may change (every other field, new ones included,
    must equal the run's); each application's configuration declares them (``RESUME_FREE``).
    """

    def __init__(self, application: str, output_dir: str | os.PathLike, *, resume: bool = False,
                 overwrite: bool = False, free: Iterable[str] = (), option: str = "--output-dir"):
        self.application = application
        self.folder: RunFolder = claim_run_folder(output_dir, application, resume=resume, overwrite=overwrite,
                                                  option=option)
        self.out = self.folder.path
        self.checkpoint_dir = self.out / CHECKPOINT
        #: continuing a run from its checkpoint (--resume on a folder holding one)
        self.resuming = self.folder.resuming and checkpoint_exists(self.checkpoint_dir)
        self.free = set(free)
        self.accelerator = None
        #: the folder existed before this run (new runs only: an empty one is emptied again, not removed)
        self._existed = self.out.exists()
        self._opened = False
        #: config.json held back until the checkpoint has loaded (see :meth:`hold_config`)
        self._hold, self._held_config = False, None
        self.stop: StopSignals | None = None
        self._csv: dict[str, CsvLogger] = {}
        self._said_fp16 = False  # the warning of an fp16 run continued in another precision, given once
        self._tb = None
        self._tracking = False  # accelerate's trackers (--report-to wandb / mlflow) were started
        #: tracker -> {tag: the last step it holds}: a resumed run does not send those steps again
        self._floors: dict[str, dict[str, int]] = {}

    # ------------------------------------------------------------------------------ configuration

    def saved_state(self) -> dict | None:
        """The checkpoint's counters and extra state (no models are loaded) when resuming, else None. A
        checkpoint another application wrote, or one that names none, is refused (a :class:`CheckpointError`) before
        anything reads it."""
        if not self.resuming:
            return None
        state = load_checkpoint(None, self.checkpoint_dir)
        owner = checkpoint_application(state)
        if owner is None:
            raise CheckpointError(f"{self.checkpoint_dir} names no application, so it was not written by this version "
                                  f"of the suite: start a new {self.application} run (--overwrite moves the folder "
                                  "aside) or in another folder; nothing was changed")
        if owner != self.application:
            raise CheckpointError(f"{self.checkpoint_dir} is not a checkpoint of {self.application}: it was written by "
                                  f"{owner}. Resume it with {owner}, or start a new {self.application} run in another "
                                  "folder; nothing was changed")
        return state

    def refuse_resume_without_checkpoint(self, summary_file: str, option: str = "--output-dir") -> None:
        """Refuse ``--resume`` of a finished run whose checkpoint/ is gone: with nothing to continue from, the run
        would start again from step 0 and overwrite the finished run's logs, summary and model."""
        if self.folder.resuming and not self.resuming and (self.out / summary_file).exists():
            raise FileExistsError(f"{self.out} holds a finished run ({summary_file}) but no checkpoint/ to continue it "
                                  "from, so starting there would overwrite its logs and model: pass --overwrite (moves "
                                  f"it aside) or choose another {option} to start a new run; nothing was changed")

    def refuse_config_changes(self, saved: Mapping[str, Any], current: Mapping[str, Any],
                              where: str | os.PathLike | None = None) -> None:
        """Raise :class:`ConfigChanged` (one line naming every differing field, and the ways out) if resuming
        would change a field the configuration does not declare free. A run trained with ``--mixed-precision fp16``
        (a GPU's) may continue in another precision where fp16 cannot run (no GPU, or ``--device cpu``), with a
        warning: there the run could not be continued at all (fp16 is refused on a CPU)."""
        elsewhere = fp16_continued_elsewhere(saved, current)
        if elsewhere and not self._said_fp16:  # once, though the checkpoint and config.json both record it
            self._said_fp16 = True
            warnings.warn(f"{where or self.out}: the run was trained with --mixed-precision fp16, which cannot run "
                          f"here (no GPU, or --device cpu); it continues with --mixed-precision "
                          f"{current['mixed_precision']}, so it is no longer the run fp16 would have made",
                          UserWarning, stacklevel=2)
        free = {*self.free, "mixed_precision"} if elsewhere else self.free
        refuse_config_changes(saved, current, free=free, where=where or self.out)

    def refuse_changed_options(self, compare: Callable[[Mapping[str, Any]], tuple[Mapping, Mapping]],
                               saved: Mapping[str, Any] | None = None, *, checkpoint_format: Any = None,
                               without_checkpoint: bool = False) -> None:
        """The resume check of every application, in one place (the loop calls it before anything is built).

        The options a run recorded, its checkpoint's ``config`` and the folder's config.json when there is one, are
        each compared with this command's, field by field, the configuration's free fields aside
        (:meth:`refuse_config_changes`: one line naming every field that differs). ``compare(record)`` returns (the
        record, this command's options) as the application compares them (input paths made absolute, defaults
        resolved: :meth:`shared_losses.training.loop.TrainingApp.compare_options`). ``saved``: the checkpoint's
        counters (:meth:`saved_state`); a checkpoint that records no options, or (``checkpoint_format``: the layout
        this code reads) another layout, is refused in one line. ``without_checkpoint``: compare config.json also
        when there is no checkpoint (a finished run that keeps none, such as fewshot's baselines)."""
        from .runtime import read_json_file

        records = []
        if saved is not None:
            if checkpoint_format is not None and saved.get("format") != checkpoint_format:
                raise CheckpointError(f"checkpoint {self.checkpoint_dir} was written by another version of "
                                      f"{self.application} (checkpoint format {saved.get('format')}, this one reads "
                                      f"{checkpoint_format}); start a new run (--overwrite moves this one aside)")
            if "config" not in saved:
                raise CheckpointError(f"{self.checkpoint_dir} does not record the options it was trained with, so it "
                                      f"was not written by this version of {self.application}: start a new run "
                                      "(--overwrite moves this one aside); nothing was changed")
            records.append((saved["config"], self.checkpoint_dir))
        config_file = self.out / CONFIG_FILE
        if (saved is not None or without_checkpoint) and self.folder.resuming and config_file.exists():
            records.append((read_json_file(config_file, "run's configuration"), config_file))
        for record, where in records:
            self.refuse_config_changes(*compare(record), where=where)

    # ------------------------------------------------------------------------------ folder

    @property
    def is_main(self) -> bool:
        """Whether this is the process that writes files (the only one, or rank 0)."""
        return self.accelerator is None or self.accelerator.is_main_process

    def _wait(self) -> None:
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()

    def open(self, accelerator=None) -> "RunHarness":
        """Carry out the folder decision: an old run moved aside (--overwrite), the folder created and
        ``run.json`` written for a new run. Every process must have read the folder before (all of them
        call this); only the main process changes it."""
        self.accelerator = accelerator
        self._wait()
        self.folder.open(is_main=self.is_main)
        if self.is_main and self.folder.resuming and not self.resuming:  # else it would start again unsaid
            print(f"note: --resume: {self.out} holds a run that stopped before its first checkpoint, so there is "
                  "nothing to continue: it starts again from the beginning", file=sys.stderr, flush=True)
        self._opened = True
        self._wait()
        return self

    def write_config(self, config: Mapping[str, Any], name: str = CONFIG_FILE) -> None:
        """The run's configuration snapshot (main process only); held back, while :meth:`hold_config` is in
        force, until :meth:`release_config`."""
        if self._hold:
            self._held_config = (dict(config), name)
        elif self.is_main:
            write_json_atomic(self.out / name, dict(config))

    def hold_config(self) -> None:
        """Hold the configuration snapshot back until :meth:`release_config`: the loop does so while a resumed
        run loads its checkpoint, so a resume that fails (a damaged file, other options) leaves config.json as
        the run wrote it."""
        self._hold = True

    def release_config(self) -> None:
        """Write the snapshot :meth:`write_config` held back (if any) and stop holding."""
        self._hold = False
        if self._held_config is not None:
            config, name = self._held_config
            self._held_config = None
            self.write_config(config, name)

    def abandon(self) -> None:
        """Undo the start of a new run that failed before its first step (bad input found once the folder was
        made): the folder is removed (emptied, if it existed empty before), and with ``--overwrite`` the run that
        was moved aside is put back, so nothing that counts as a run is left. A resumed run's folder is never
        touched. Main process only."""
        folder = self.folder
        if not (self._opened and self.is_main) or folder.action == "resume":
            return
        with _stop_signals_held():  # a launcher's SIGTERM (torchrun's, when another process failed first) waits
            self.close()
            if self.out.is_dir():
                shutil.rmtree(self.out)
            if self._existed and folder.action == "new":
                self.out.mkdir()
            if folder.action == "replace" and folder.moved_to is not None and folder.moved_to.exists():
                os.replace(folder.moved_to, self.out)
                print(f"the new run did not start: the previous run is back in {self.out}", file=sys.stderr)
            self._opened = False

    # ------------------------------------------------------------------------------ logging

    def start_logging(self, resume_step: int | None, *, config: Mapping[str, Any] | None = None,
                      csv: Iterable[str] = ("log.csv",), step_key: str = "step",
                      report_to: Iterable[str] = ("tensorboard",)) -> None:
        """CSV logs (one per name in ``csv``) and the trackers of ``report_to``: a TensorBoard writer in ``tb/``
        and those accelerate drives (wandb, mlflow: the accelerator's ``log_with``, see
        :func:`shared_losses.training.runtime.make_accelerator`), each given ``config``. ``resume_step``: the step of
        the checkpoint a resumed run starts from (CSV rows and TensorBoard events after it are dropped, they are
        logged again; a wandb or mlflow run the run started goes on, :data:`TRACKER_RUNS`); None for a new
        run (older rows and events in the folder are dropped)."""
        acc = self.accelerator
        if acc is not None and getattr(acc, "log_with", None):
            # wandb's files go to WANDB_DIR where the user set it, else into the run folder
            wandb = {"name": self.out.name, "dir": os.environ.get("WANDB_DIR") or str(self.out)}
            mlflow = {"run_name": self.out.name}
            known = self._tracker_runs() if resume_step is not None else {}
            if known.get("wandb"):  # a resumed run goes on in the tracker run it started (TRACKER_RUNS)
                wandb.update(id=known["wandb"], resume="allow")
            found = _mlflow_run(known["mlflow"]) if known.get("mlflow") else None
            params = None
            if found is not None:
                mlflow["run_id"] = known["mlflow"]
                # steps a killed part logged after its last checkpoint: the resumed part logs them again, equal
                params, self._floors = found[0], {"mlflow": found[1]}
            acc.init_trackers(self.application, config=None, init_kwargs={"wandb": wandb, "mlflow": mlflow})
            values = None if config is None else tracker_config(config)
            kept = {}
            for tracker in acc.trackers if values is not None else ():
                if tracker.name == "mlflow" and params is not None:
                    # MLflow refuses to change a logged parameter: a resumed run's new --max-steps stays in
                    # config.json, the MLflow run keeps the first part's
                    kept = {k: params[k] for k, v in values.items() if k in params and params[k] != str(v)}
                    tracker.store_init_configuration({k: v for k, v in values.items() if k not in kept})
                else:
                    tracker.store_init_configuration(values)
            self._tracking = True
            if self.is_main:
                self._record_tracker_runs(resumed=known, kept=kept)
        if not self.is_main:
            return
        self._csv = {name: CsvLogger(self.out / name, resume_step=resume_step, step_key=step_key) for name in csv}
        if resume_step is not None:
            self._say_lost_rows(resume_step)
        if "tensorboard" in tuple(report_to):
            self._tb = tensorboard_writer(self.out / "tb", resume_step=resume_step,
                                          config=None if config is None else dict(config))

    def _tracker_runs(self) -> dict:
        """The tracker runs the run started (:data:`TRACKER_RUNS`): tracker -> its run's id; {} when none are known."""
        path = self.out / TRACKER_RUNS
        if not path.is_file():
            return {}
        try:
            import json

            known = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            warnings.warn(f"{path} cannot be read ({err}): the trackers start new runs", UserWarning, stacklevel=3)
            return {}
        return {k: v for k, v in known.items() if isinstance(v, str) and v} if isinstance(known, dict) else {}

    def _record_tracker_runs(self, resumed: Mapping[str, str], kept: Mapping[str, str]) -> None:
        """Write the ids of the tracker runs this run logs to (:data:`TRACKER_RUNS`; those of ``resumed`` this part
        does not log to kept), and say which ones a resumed run goes on in, with the parameters MLflow ``kept``."""
        ids = {}
        for tracker in self.accelerator.trackers:
            if tracker.name == "wandb" and getattr(tracker, "run", None) is not None:
                ids["wandb"] = tracker.run.id
            elif tracker.name == "mlflow" and getattr(tracker, "active_run", None) is not None:
                ids["mlflow"] = tracker.active_run.info.run_id
        if not ids:
            return
        # a tracker left out of this part keeps its run for a later part that names it again
        write_json_atomic(self.out / TRACKER_RUNS, {**resumed, **ids})
        again = [f"{name} run {run}" for name, run in ids.items() if resumed.get(name) == run]
        if again:
            note = "" if not kept else ("; MLflow keeps the first part's " + ", ".join(
                f"{k}={v}" for k, v in kept.items()) + " (this part's are in config.json)")
            print(f"logging on in the {' and '.join(again)} (the run's own, from {TRACKER_RUNS}){note}", flush=True)

    def _say_lost_rows(self, resume_step: int) -> None:
        """A warning for each CSV log holding fewer rows up to the checkpoint than the checkpoint recorded: deleted or
        replaced since, its rows are not written again (the log goes on from the checkpoint)."""
        recorded = checkpoint_meta(self.checkpoint_dir).get("log_rows")
        for name, n in (recorded.items() if isinstance(recorded, dict) else ()):
            log = self._csv.get(name)
            if isinstance(log, CsvLogger) and isinstance(n, int) and log.count < n:
                gone = "is gone" if not log.count else f"holds {log.count} of them"
                warnings.warn(f"{log.path} had {n} rows at the checkpoint (step {resume_step}) and now {gone} (deleted "
                              "or replaced since?); those rows are not written again: the log goes on from the "
                              "checkpoint", UserWarning, stacklevel=3)

    def log_row(self, row: Mapping[str, Any], step_key: str = "step", name: str = "log.csv",
                scalars: Mapping[str, Any] | None = None) -> None:
        """One row of ``name`` and its numbers as TensorBoard scalars at the row's step: ``scalars`` (tag -> value), by
        default every field but ``step_key``, tagged as every application tags them (:func:`scalar_tag`)."""
        self.csv(name).log(row)
        if scalars is None:
            scalars = {scalar_tag(k): v for k, v in row.items() if k != step_key}
        for tag, v in scalars.items():
            self.tb.add_scalar(tag, v, row[step_key])

    def log_rows(self, rows: Rows, step_key: str = "step") -> None:
        """Each of ``rows`` (:class:`LogRow`, or a plain row of log.csv) as :meth:`log_row` logs it, in order."""
        for row in as_rows(rows):
            self.log_row(row.values, step_key, row.file, row.scalars)

    def csv(self, name: str = "log.csv"):
        """The CSV logger ``name`` (a stand-in that drops rows on other processes)."""
        return self._csv.get(name, _NoLogger()) if self.is_main else _NoLogger()

    @property
    def tb(self):
        """The scalar writer: TensorBoard's (a stand-in that drops everything on other processes, before logging
        starts or without --report-to tensorboard), which also logs every scalar to the wandb / mlflow trackers
        of --report-to."""
        writer = self._tb if self._tb is not None else _NoWriter()
        return _Scalars(writer, self.accelerator, self._floors) if self._tracking else writer

    def close(self) -> None:
        """Close the loggers (every row is already on disk; TensorBoard's buffer is flushed)."""
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        if self._tracking:  # each tracker's finish() (not end_training(), which would end the process group)
            for tracker in self.accelerator.trackers:
                tracker.finish()
            self.accelerator.trackers = []
            self._tracking = False
        for logger in self._csv.values():
            logger.close()
        self.release()

    def release(self) -> None:
        """Free the run folder for the next command (the hold :meth:`open` took; it also ends with the process)."""
        if self._opened and self.is_main:
            release_run_folder(self.out)

    # ------------------------------------------------------------------------------ checkpoints

    @staticmethod
    def checkpoint_due(step: int, every: int) -> bool:
        """Whether ``step`` is on the checkpoint cadence (every ``every`` steps; 0 or less: never)."""
        return every > 0 and step % every == 0

    def checkpoint(self, state: Mapping[str, Any]) -> Path:
        """Write the checkpoint atomically: the objects registered with the accelerator (named entries, see
        :func:`shared_losses.training.runtime.register_named`) and ``state``. TensorBoard's buffer goes to disk first:
        a resumed run does not log the steps before its checkpoint again."""
        if self._tb is not None:
            self._tb.flush()
        # the rows each CSV log holds: a resume finds out whether some were lost since (the file deleted or replaced)
        rows = {name: log.count for name, log in self._csv.items() if isinstance(log, CsvLogger)}
        return save_checkpoint(self.accelerator, self.checkpoint_dir, {**state, "application": self.application},
                               meta={"log_rows": rows} if rows else None)

    # ------------------------------------------------------------------------------ interrupts

    def signals(self, message: str | None = None) -> StopSignals:
        """The stop signals' handlers for the training loop (``with h.signals(): ...``): SIGINT, SIGTERM, SIGHUP and a
        scheduler's warning (SIGUSR1 / SIGUSR2)."""
        self.stop = StopSignals() if message is None else StopSignals(message)
        return self.stop

    def stop_requested(self) -> bool:
        """Whether any process got SIGINT/SIGTERM: every process stops after the same step."""
        local = bool(self.stop is not None and self.stop.requested)
        acc = self.accelerator
        if acc is None or acc.num_processes == 1:
            return local
        flag = torch.tensor([float(local)], device=acc.device)
        return bool(acc.reduce(flag, reduction="sum").item())

    def interrupted(self, where: str, state: Mapping[str, Any] | None = None) -> RunInterrupted:
        """Checkpoint ``state`` (None: the loop has just written one), close the logs and return the
        exception to raise: ``run_cli`` prints "interrupted at WHERE (checkpoint written to ...); continue
        with --resume" and exits 130."""
        if state is not None:
            self.checkpoint(state)
        self.close()
        return RunInterrupted(f"{where} (checkpoint written to {self.checkpoint_dir})", at=where)

    # ------------------------------------------------------------------------------ the end

    def finish(self, summary: Mapping[str, Any], name: str = "summary.json") -> dict:
        """Write the run's summary (main process) and close the logs; returns the summary."""
        summary = dict(summary)
        if self.is_main:
            write_json_atomic(self.out / name, summary)
            drop_previous_checkpoint(self.checkpoint_dir)
        self.close()
        return summary
