"""Training helpers the three applications share: atomic checkpoints, resumable CSV logs, JSON.

This module is the only part of ``shared_losses`` that touches the file system; it imports
``accelerate`` lazily (through the ``accelerator`` you pass) so the loss core stays pure torch.

Checkpoints are directories written by ``accelerator.save_state`` (models, optimisers, schedulers,
RNG states of every process, objects registered with ``register_for_checkpointing``) plus
``extra.pt`` (your step counters and anything picklable) and a ``COMPLETE`` marker. They are
written into a temporary sibling directory and renamed into place only once complete, so a crash
mid-save never leaves a half-written checkpoint where the last good one was.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Mapping

import torch

MARKER = "COMPLETE"
EXTRA = "extra.pt"


class CheckpointError(ValueError):
    """A checkpoint exists but cannot be used (incomplete, corrupt, or from another configuration)."""


def _is_main(accelerator) -> bool:
    return accelerator is None or accelerator.is_main_process


def _wait(accelerator) -> None:
    if accelerator is not None:
        accelerator.wait_for_everyone()


def save_checkpoint(accelerator, directory: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Atomically write a checkpoint to ``directory`` (replacing an older one only when done).

    Call it from every process (``save_state`` gathers RNG states of all of them). ``accelerator``
    may be None to save only ``state``.
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp")
    if _is_main(accelerator) and tmp.exists():
        shutil.rmtree(tmp)
    _wait(accelerator)
    if accelerator is not None:
        accelerator.save_state(str(tmp), safe_serialization=True)
    _wait(accelerator)
    if _is_main(accelerator):
        tmp.mkdir(parents=True, exist_ok=True)
        with open(tmp / EXTRA, "wb") as fh:
            torch.save(state, fh)
            fh.flush()
            os.fsync(fh.fileno())
        meta = {"saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "keys": sorted(state)}
        (tmp / MARKER).write_text(json.dumps(meta))
        replace_directory(tmp, directory)
    _wait(accelerator)
    return directory


def replace_directory(tmp: str | os.PathLike, directory: str | os.PathLike) -> Path:
    """Move the complete folder ``tmp`` to ``directory``, replacing an older one: the old folder
    is first renamed to ``.NAME.old`` (which :func:`resolve_checkpoint` falls back to if we are cut
    off between the two renames) and removed only once the new one is in place."""
    tmp, directory = Path(tmp), Path(directory)
    old = _previous(directory)
    if directory.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(directory, old)
    os.replace(tmp, directory)
    if old.exists():
        shutil.rmtree(old)
    return directory


def _previous(directory: Path) -> Path:
    """Where :func:`replace_directory` keeps the previous checkpoint while it swaps in a new one."""
    return directory.with_name(f".{directory.name}.old")


def checkpoint_exists(directory: str | os.PathLike) -> bool:
    """Whether there is a checkpoint at ``directory`` to resume from (or a damaged one, for
    :func:`resolve_checkpoint` to name), counting the previous one that a save cut off between its
    two renames leaves as ``.NAME.old``."""
    directory = Path(directory)
    return directory.exists() or (_previous(directory) / MARKER).exists()


def resolve_checkpoint(directory: str | os.PathLike) -> Path:
    """The usable checkpoint at ``directory`` (or the previous one, if a save was cut off between
    its two renames); raises FileNotFoundError / CheckpointError with a clear message."""
    directory = Path(directory)
    old = _previous(directory)
    if not directory.exists() and (old / MARKER).exists():
        return old
    if not directory.exists():
        raise FileNotFoundError(f"checkpoint not found: {directory} (nothing to resume from; check the path)")
    if not (directory / MARKER).exists():
        raise CheckpointError(
            f"checkpoint {directory} is incomplete or not a contrastive-suite checkpoint "
            f"(no {MARKER} marker); refusing to load it"
        )
    return directory


def load_checkpoint(accelerator, directory: str | os.PathLike) -> dict[str, Any]:
    """Restore ``accelerator``'s registered objects from ``directory`` and return the extra state."""
    path = resolve_checkpoint(directory)
    try:
        state = torch.load(path / EXTRA, map_location="cpu", weights_only=False)
    except Exception as err:  # noqa: BLE001 - report any unpickling failure as corruption
        raise CheckpointError(f"checkpoint {path}: {EXTRA} is unreadable ({err}); the file is corrupt") from err
    if accelerator is not None:
        # accelerate skips an unreadable random-state file with a log line, and the run would go on
        # with other random numbers: read it here first, so a damaged one is refused like the rest.
        rng_file = path / f"random_states_{accelerator.process_index}.pkl"
        if rng_file.exists():
            try:
                torch.load(rng_file, map_location="cpu", weights_only=False)
            except Exception as err:  # noqa: BLE001
                raise CheckpointError(f"checkpoint {path}: {rng_file.name} is unreadable ({err}); the file is damaged "
                                      "(e.g. truncated), so the run could not continue exactly") from err
        try:
            accelerator.load_state(str(path))
        except Exception as err:  # noqa: BLE001
            raise CheckpointError(
                f"checkpoint {path} could not be loaded into this run's models/optimisers ({type(err).__name__}: "
                f"{err}); was it written with a different configuration, or is one of its files damaged "
                "(e.g. truncated by a full disk or a copy that did not finish)?"
            ) from err
    return state


def config_changes(saved: Mapping[str, Any], current: Mapping[str, Any], free: Iterable[str] = (),
                   legacy: Mapping[str, Any] | None = None) -> list[tuple[str, Any, Any]]:
    """What a resumed run would change: ``(field, saved value, current value)`` for every field, in
    name order, whose value differs between a run's saved configuration and the current one.

    Every field counts except those in ``free`` (the ones a resumed run may change, such as the total
    number of steps), so a field added later is checked by default. ``legacy`` gives the value that a
    field missing from an older saved configuration had implicitly. Values are compared after a JSON
    round trip, so a tuple saved to ``config.json`` still equals the list it comes back as.
    """
    free = set(free)
    old = json.loads(json.dumps({**(legacy or {}), **saved}))
    new = json.loads(json.dumps(dict(current)))
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
            if k not in free and old.get(k) != new.get(k)]


def config_markdown(config: Mapping[str, Any]) -> str:
    """A run configuration as a two-column Markdown table (TensorBoard's text tab renders it)."""
    def cell(v: Any) -> str:
        return repr(v).replace("|", "\\|").replace("\n", " ")
    return "| field | value |\n|---|---|\n" + "\n".join(f"| {k} | {cell(v)} |" for k, v in config.items())


class _NoWriter:
    """Stands in for a SummaryWriter when tensorboard is missing: every call does nothing."""

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def tensorboard_writer(directory: str | os.PathLike, resume_step: int | None = None,
                       config: Mapping[str, Any] | None = None):
    """A ``SummaryWriter`` on ``directory`` for a fresh or a resumed run. If tensorboard is not
    installed, a writer that drops everything (with one warning): logging never stops a run.

    ``resume_step``: the step of the checkpoint a run resumes from. The interrupted run may have logged
    steps after it, which the resumed run logs again; TensorBoard hides those older events
    (``purge_step = resume_step + 1``), as :class:`CsvLogger` drops their rows. A fresh run
    (``resume_step=None``) hides every older event in ``directory`` (a run stopped before its first
    checkpoint and started again), as :class:`CsvLogger` starts its file anew. ``config``: written
    once, on a fresh run, as a Markdown table under the text tag ``config``. Flush the writer before
    writing a checkpoint: events it still buffers would be lost with the process, and a resumed run
    does not log those steps again.
    """
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        warnings.warn("tensorboard is not installed: no TensorBoard events are written (log.csv has the same numbers)")
        return _NoWriter()
    tb = SummaryWriter(str(directory), purge_step=0 if resume_step is None else resume_step + 1)
    if config is not None and resume_step is None:
        tb.add_text("config", config_markdown(config), 0)
    return tb


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` via a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


class CsvLogger:
    """Append rows to a CSV file; the header comes from the first row and grows with new keys.

    ``resume_step``: on resume, drop rows whose ``step_key`` is beyond the checkpoint's step, so
    the log matches an uninterrupted run exactly.
    """

    def __init__(self, path: str | os.PathLike, resume_step: int | None = None, step_key: str = "step"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []
        self.fields: list[str] = []
        if self.path.exists() and resume_step is not None:
            with open(self.path, newline="") as fh:
                reader = csv.DictReader(fh)
                self.fields = list(reader.fieldnames or [])
                # a row logged without step_key reads back with "" there: keep it, like a file without the column
                self.rows = [r for r in reader if r.get(step_key) in (None, "") or float(r[step_key]) <= resume_step]
            self._rewrite()
        elif self.path.exists():
            self.path.unlink()

    def _rewrite(self) -> None:
        tmp = self.path.with_name(f".{self.path.name}.tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.fields)
            writer.writeheader()
            writer.writerows(self.rows)
        os.replace(tmp, self.path)

    def log(self, row: dict[str, Any]) -> None:
        row = {k: (v.item() if isinstance(v, torch.Tensor) else v) for k, v in row.items()}
        self.rows.append(row)
        new = [k for k in row if k not in self.fields]
        if new or not self.path.exists():
            self.fields += new
            self._rewrite()
            return
        with open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self.fields).writerow(row)

    def close(self) -> None:  # kept for symmetry with other loggers; every row is already on disk
        pass
