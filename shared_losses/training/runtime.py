"""Training helpers the three applications share: atomic checkpoints, resumable CSV logs, JSON.

This module is the only part of ``shared_losses`` that touches the file system; it imports
``accelerate`` lazily (through the ``accelerator`` you pass) so the loss core stays pure torch.

Checkpoints are directories written by ``accelerator.save_state`` (models, optimisers, schedulers,
RNG states of every process, objects registered with ``register_for_checkpointing``) plus
``extra.pt`` (your step counters and other plain data: numbers, strings, containers, tensors and NumPy arrays), the
files a registered object keeps there itself (``write_files`` / ``read_files_from``: rl_curl's replay frames) and a
``COMPLETE`` marker. Every pickle of a checkpoint is read with ``weights_only=True`` (:func:`read_torch_file`): a
file holding other objects, which could run code when loaded, is refused, not loaded. They are
written into a temporary sibling directory and renamed into place only once complete, so a crash
mid-save never leaves a half-written checkpoint where the last good one was.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import errno
import json
import math
import os
import re
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import torch

MARKER = "COMPLETE"
#: The most threads ``--torch-threads`` may ask for: ``torch.set_num_threads`` takes a C int ("Overflow when
#: unpacking long" beyond)
MAX_THREADS = 2**31 - 1
EXTRA = "extra.pt"
ENTRIES = "entries.json"  # which custom_checkpoint_N.pkl holds what (register_named)


class CheckpointError(ValueError):
    """A checkpoint exists but cannot be used (incomplete, corrupt, or from another configuration)."""


def _safe_globals() -> list:
    """What a checkpoint's pickles may name besides torch's own types: NumPy arrays (with their dtypes, as NumPy 1 and
    2 spell them) and what NumPy's random states hold; nothing that runs code of its own when loaded."""
    import codecs

    import numpy as np

    try:
        reconstruct = np._core.multiarray._reconstruct
    except AttributeError:  # NumPy 1
        reconstruct = np.core.multiarray._reconstruct
    names = [reconstruct, np.ndarray, np.dtype, codecs.encode]
    if torch.__version__ >= "2.6":  # a name of one's own for a global: a checkpoint of the other NumPy major reads too
        names += [(reconstruct, f"numpy.{m}.multiarray._reconstruct") for m in ("core", "_core")]
    kinds = getattr(np, "dtypes", None)  # NumPy >= 1.25 pickles a dtype by its class
    if kinds is not None:
        names += [getattr(kinds, n) for n in dir(kinds) if n.endswith("DType")]
    return names


def read_torch_file(path: str | os.PathLike, what: str = "checkpoint file", map_location: Any = "cpu") -> Any:
    """``torch.load`` of ``path`` with ``weights_only=True``: tensors, numbers, strings, containers and NumPy arrays.
    A file naming any other object (a pickle that would run code when loaded: a checkpoint received from someone
    else) is refused with a :class:`CheckpointError`, and nothing of it runs; a file that is not a torch file at all
    raises what ``torch.load`` raises."""
    import pickle

    with torch.serialization.safe_globals(_safe_globals()):
        try:
            return torch.load(path, map_location=map_location, weights_only=True)
        except pickle.UnpicklingError as err:
            if "weights_only" not in str(err) and "Weights only" not in str(err):
                raise
            found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(err))
            first = f" (the first refused: {found.group(1)})" if found else ""
            raise CheckpointError(
                f"{what} {path} holds objects other than tensors, numbers, strings and arrays{first}: such a pickle "
                "can run code when it is loaded, so it was not loaded. This suite never writes one; load only "
                "checkpoints from people you trust, and this one not at all") from None


def _is_main(accelerator) -> bool:
    return accelerator is None or accelerator.is_main_process


def _wait(accelerator) -> None:
    if accelerator is not None:
        accelerator.wait_for_everyone()


def register_named(accelerator, **objects) -> None:
    """``accelerator.register_for_checkpointing`` with names: accelerate stores registered objects as
    ``custom_checkpoint_N.pkl`` by registration order; the names go into the checkpoint's ``entries.json``
    (``{"agent": "custom_checkpoint_0.pkl", ...}``), are checked on load (a checkpoint whose entries differ is
    refused naming them) and let other tools find an entry by name (:func:`checkpoint_entry`)."""
    names = getattr(accelerator, "_suite_entry_names", [])
    accelerator.register_for_checkpointing(*objects.values())
    accelerator._suite_entry_names = names + list(objects)


def _entries(accelerator) -> dict[str, str]:
    return {n: f"custom_checkpoint_{i}.pkl" for i, n in enumerate(getattr(accelerator, "_suite_entry_names", []))}


def _file_keepers(accelerator) -> list:
    """The registered objects that keep part of their state as files of the checkpoint folder, written once and
    linked from one checkpoint to the next (rl_curl's replay frames): they have ``write_files(folder, previous)``,
    called with the new checkpoint's folder (still being written) and the previous complete checkpoint (None where
    there is none) before their ``state_dict``, and ``read_files_from(folder)``, called before their
    ``load_state_dict``."""
    return [o for o in getattr(accelerator, "_custom_objects", [])
            if callable(getattr(o, "write_files", None)) and callable(getattr(o, "read_files_from", None))]


def _complete_checkpoint(directory: Path) -> Path | None:
    """The usable checkpoint at ``directory`` (:func:`resolve_checkpoint`), None where there is none or it is
    damaged (then nothing of it is reused)."""
    try:
        return resolve_checkpoint(directory) if checkpoint_exists(directory) else None
    except (OSError, CheckpointError):
        return None


def checkpoint_entry(directory: str | os.PathLike, name: str) -> Path:
    """The file of the entry ``name`` in a checkpoint written with :func:`register_named`."""
    path = resolve_checkpoint(directory)
    entries = read_json_file(path / ENTRIES, "checkpoint's table of entries") if (path / ENTRIES).exists() else {}
    if name not in entries:
        raise CheckpointError(f"checkpoint {path} has no entry {name!r} (entries: {', '.join(entries) or 'none'})")
    if not isinstance(entries[name], str) or not re.fullmatch(r"custom_checkpoint_\d+\.pkl", entries[name]):
        raise CheckpointError(f"checkpoint {path}: {ENTRIES} names {entries[name]!r} for {name!r}, not a file of the "
                              "checkpoint (custom_checkpoint_N.pkl); the table is damaged or was not written here")
    return path / entries[name]


def save_checkpoint(accelerator, directory: str | os.PathLike, state: dict[str, Any],
                    meta: Mapping[str, Any] | None = None) -> Path:
    """Atomically write a checkpoint to ``directory`` (replacing an older one only when done).

    Call it from every process (``save_state`` gathers RNG states of all of them). ``accelerator``
    may be None to save only ``state``. ``meta``: more of what the checkpoint's marker records (JSON, read back by
    :func:`checkpoint_meta` without loading the checkpoint). ``state`` and the registered objects' state dicts must
    be plain data (numbers, strings, containers, tensors, NumPy arrays): they are read back with
    :func:`read_torch_file`, which refuses anything else (a NumPy scalar, a path, a dataclass: convert them first).
    """
    directory = through_link(directory)  # a checkpoint/ linked to another disk is written there, the link kept
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = directory.with_name(f".{directory.name}.tmp")
    if _is_main(accelerator) and tmp.exists():
        shutil.rmtree(tmp)
    _wait(accelerator)
    try:
        keepers = _file_keepers(accelerator) if _is_main(accelerator) else []
        if keepers:  # their files first: the state_dict each gives accelerate names the files it wrote
            tmp.mkdir(parents=True, exist_ok=True)
            previous = _complete_checkpoint(directory)
            for obj in keepers:
                obj.write_files(tmp, previous)
        if accelerator is not None:
            accelerator.save_state(str(tmp), safe_serialization=True)
        _wait(accelerator)
        if _is_main(accelerator):
            tmp.mkdir(parents=True, exist_ok=True)
            with open(tmp / EXTRA, "wb") as fh:
                torch.save(state, fh)
                fh.flush()
                os.fsync(fh.fileno())
            if accelerator is not None and _entries(accelerator):
                (tmp / ENTRIES).write_text(json.dumps(_entries(accelerator), indent=1))
            marker = {"saved_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "keys": sorted(state),
                      **({"device": accelerator.device.type} if accelerator is not None else {}), **(meta or {})}
            (tmp / MARKER).write_text(json.dumps(marker))
    except Exception as err:
        if not _write_failed(err):
            raise
        shutil.rmtree(tmp, ignore_errors=True)  # the part written: the last complete checkpoint stays as it was
        raise RunStopped(f"could not write the checkpoint to {directory} ({error_line(err)}; "
                         f"{_free_space(directory.parent)}): {write_refusal_hint(err)}") from err
    if _is_main(accelerator):
        replace_directory(tmp, directory)
    _wait(accelerator)
    return directory


#: What a run stopped by a write the file system refused for lack of room advises.
DISK_REFUSED_HINT = "the disk is full, or a quota or file-size limit was reached; make room"

#: The file system refusing a write for lack of room: no space, the quota, the file-size limit.
ROOM_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
#: Errors that only a write can meet: lack of room, and a file system mounted read-only. A run stops on them in one
#: line wherever they come from (a log, an event file, the export); other OSErrors may come from a read and keep their
#: traceback.
WRITE_ERRNOS = (*ROOM_ERRNOS, errno.EROFS)

def is_refused_write(err: BaseException) -> bool:
    """Whether ``err`` is an error only a write can meet: an OSError with one of :data:`WRITE_ERRNOS`, or numpy's
    short write (``OSError: 946200 requested and 5088 written``, no errno), which is how a full disk or a file-size
    limit reaches ``np.save``."""
    if not isinstance(err, OSError):
        return False
    return err.errno in WRITE_ERRNOS or (err.errno is None and re.search(r"requested and \d+ written", str(err))
                                         is not None)


def refused_write_words(err: OSError) -> str:
    """What the writer said, for a message: the OSError's text without its errno."""
    return err.strerror or str(err)


#: What torch's and safetensors' writers say when the file system refuses a write (they lose the OSError's errno).
_WRITE_FAILURES = ("iostream error", "unexpected pos", "failed writing", "file write failed", "ioerror",
                   "no space left", "file too large", "quota exceeded")
#: ... and the words of theirs that say it was for lack of room
_ROOM_WORDS = ("no space left", "file too large", "quota", "storagefull")


def _causes(err: BaseException | None) -> Iterator[BaseException]:
    """``err`` and the exceptions it was raised from or while handling, outermost first."""
    while err is not None:
        yield err
        err = err.__cause__ or err.__context__


def _write_failed(err: BaseException) -> bool:
    """Whether ``err``, raised while a checkpoint was written, is the file system refusing the write (a full disk, a
    quota, a file-size limit, a read-only or failing file system) rather than a fault in what was being saved."""
    return any(isinstance(seen, OSError) or any(w in str(seen).lower() for w in _WRITE_FAILURES)
               for seen in _causes(err))


def _refused_errno(err: BaseException) -> int | None:
    """The errno of the file system's refusal in ``err``'s chain: an OSError's, or the ``code: N`` that safetensors'
    Rust writer prints (``IoError(Os { code: 28, kind: StorageFull ... })``); None when no writer said."""
    for seen in _causes(err):
        if isinstance(seen, OSError) and seen.errno is not None:
            return seen.errno
        found = re.search(r"\bOs \{ code: (\d+)", str(seen))
        if found:
            return int(found.group(1))
    return None


def write_refusal_hint(err: BaseException) -> str:
    """What to do about ``err``, a write the file system refused, by its cause: make room (no space, a quota, a
    file-size limit), or look at the file system (read-only, permissions, a failing or stale mount). torch's own
    writer loses the cause ("unexpected pos ..."): then both are named."""
    code = _refused_errno(err)
    if code in ROOM_ERRNOS:
        return DISK_REFUSED_HINT
    if code == errno.EROFS:
        return "the file system is mounted read-only; write the run to a writable folder, or remount it"
    if code in (errno.EACCES, errno.EPERM):
        return "this user may not write there; fix the folder's permissions"
    if code is not None:
        name = errno.errorcode.get(code, str(code))
        return (f"the file system failed ({name}: {os.strerror(code)}), not for lack of room; check the disk or "
                "the network file system the folder is on")
    words = " ".join(str(seen).lower() for seen in _causes(err))
    if any(w in words for w in _ROOM_WORDS):
        return DISK_REFUSED_HINT
    return ("the writer did not say why: the disk may be full, a quota or file-size limit reached, or the file "
            "system failing; make room, or check the disk")


def state_dict_mismatch(err: BaseException, most: int = 2) -> str:
    """What ``load_state_dict``'s RuntimeError says, in one line: its first ``most`` reasons (``size mismatch for
    f.embed.weight: ... [55, 16] ... [23, 16]``, the missing and unexpected keys), not only its header line."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    reasons = sorted(lines[1:], key=lambda r: not r.startswith("size mismatch"))  # the shapes say the most
    if not reasons:
        return lines[0] if lines else type(err).__name__
    more = f"; and {len(reasons) - most} more" if len(reasons) > most else ""
    return "; ".join(r.rstrip(". ") for r in reasons[:most]) + more


def error_line(err: BaseException) -> str:
    """``err`` in one line for a message: its type and its first line (the type alone where it says nothing, as a
    truncated file's ``EOFError()``)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def _free_space(folder: Path) -> str:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return "free space unknown"
    return f"{free / 2**20:,.0f} MiB free there"


def _umask() -> int:
    """This process's umask (Linux: read from /proc, which leaves it untouched; elsewhere set and put back)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def readable_as_umask_allows(path: str | os.PathLike) -> None:
    """Give the files under ``path`` (or the file ``path``) that were made 0600 the mode a file written with ``open``
    gets (0666 less the umask). safetensors' ``save_file`` (0.8) writes through a temporary file made 0600, so a
    model folder was readable by its owner alone, beside files of 0644 (safetensors issue 782); other modes are
    left as they are."""
    path, mode = Path(path), 0o666 & ~_umask()
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    for f in files:
        try:
            if f.stat().st_mode & 0o777 == 0o600 and mode != 0o600:
                os.chmod(f, mode)
        except OSError:
            pass  # a file system without modes


def keep_added_files(old: str | os.PathLike, new: str | os.PathLike, written: Iterable[str] | None = None) -> list[str]:
    """Copy into the new export folder ``new`` (not yet renamed into place) what a user added to the earlier export
    ``old`` that it replaces (notes, a conversion to another format): the names in ``old`` that neither the new export
    holds nor the earlier one recorded writing (``written``; None where it recorded nothing). Returns those names.
    An export's --overwrite replaced the folder whole, and deleted them with it."""
    old, new = Path(old), Path(new)
    if not old.is_dir():
        return []
    ours = {p.name for p in new.iterdir()} | set(written or ())
    kept = sorted(p.name for p in old.iterdir() if p.name not in ours)
    for name in kept:
        src = old / name
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, new / name, symlinks=True)
        else:
            shutil.copy2(src, new / name, follow_symlinks=False)
    return kept


def kept_files_line(folder: str | os.PathLike, kept: list[str]) -> str:
    """The line an export prints for :func:`keep_added_files`' names."""
    return (f"kept what you added to {folder} (not files of the export): {', '.join(kept[:5])}"
            + (", ..." if len(kept) > 5 else ""))


def replace_directory(tmp: str | os.PathLike, directory: str | os.PathLike) -> Path:
    """Move the complete folder ``tmp`` to ``directory``, replacing an older one: the old folder
    is first renamed to ``.NAME.old`` (which :func:`resolve_checkpoint` falls back to if we are cut
    off between the two renames) and removed only once the new one is in place."""
    tmp, directory = Path(tmp), through_link(directory)
    readable_as_umask_allows(tmp)
    old = _previous(directory)
    if directory.exists():
        if old.exists():
            shutil.rmtree(old)
        os.replace(directory, old)
    os.replace(tmp, directory)
    if old.exists():
        shutil.rmtree(old)
    return directory


def through_link(path: str | os.PathLike) -> Path:
    """``path``, or where it leads when it is a symbolic link (followed to the end): what a replaced folder or file
    is written beside and renamed into, so that a link (a checkpoint/ or an export on another disk) keeps pointing at
    the new copy instead of being moved aside itself."""
    path = Path(path)
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def files_under(root: str | os.PathLike, name: str | None = None, *, hidden: bool = True) -> list[Path]:
    """The files under the folder ``root`` (named ``name`` only, where given), sorted, folders behind symbolic links
    included (``Path.rglob`` leaves them out without a word): each real folder is walked once, so a link back to a
    folder above or a second link to one folder reads nothing twice (of two links, the first in sorted order). With
    ``hidden=False``, files and folders whose names start with ``.`` (.git/, .ipynb_checkpoints/) are left out."""
    root, found, seen = Path(root), [], set()
    for folder, dirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs[:] = sorted(d for d in dirs if hidden or not d.startswith("."))
        found.extend(Path(folder) / f for f in files if (name is None or f == name)
                     and (hidden or not f.startswith(".")) and (Path(folder) / f).is_file())
    return sorted(found)


def broken_link(path: str | os.PathLike) -> Path | None:
    """The first of ``path`` and the folders above it that is a symbolic link leading nowhere (its target missing,
    or links that loop), or None: writing under one fails with "[Errno 17] File exists" or "Too many levels of
    symbolic links" naming a temporary path."""
    path = Path(path).absolute()
    for p in (path, *path.parents):
        if p.is_symlink() and not p.exists():
            return p
    return None


def broken_link_words(link: Path) -> str:
    """What is wrong with the link :func:`broken_link` found, in words."""
    try:
        target = os.readlink(link)
    except OSError:
        target = "?"
    return (f"{link} is a symbolic link to {target}, which does not exist or loops back through links; "
            "fix or remove the link")


def run_folder_given(path: str | os.PathLike, option: str = "--run-dir") -> None:
    """Refuse in one line an ``option`` (a run's folder, as the exports take it) that names no folder: "no such
    folder", or "a file, not a run folder"."""
    if not Path(path).is_dir():
        raise FileNotFoundError(f"{option} {path}: " + ("a file, not a run folder" if Path(path).exists()
                                                         else "no such folder"))


def check_parent_folder(path: str | os.PathLike, option: str, nothing: str = "nothing was written") -> None:
    """Refuse in one line a ``path`` whose folder cannot exist because the nearest existing path above it is a file
    (``afile/out``: "[Errno 20] Not a directory" at the write, naming a temporary name); ``nothing`` says what was
    not done."""
    link = broken_link(Path(path).parent)
    if link is not None:
        raise NotADirectoryError(f"{option} {path}: {broken_link_words(link)} ({nothing})")
    existing = _nearest_existing(Path(path).parent)
    if not existing.is_dir():
        raise NotADirectoryError(f"{option} {path}: {existing} is a file, not a folder ({nothing})")


def _nearest_existing(folder: Path) -> Path:
    """``folder`` or the nearest folder above it that exists (the working folder for a relative path none of whose
    folders exist)."""
    return next((p for p in (folder, *folder.parents) if p.exists()), Path("."))


def check_folder_writable(path: str | os.PathLike, option: str, nothing: str = "nothing was written") -> None:
    """Refuse in one line a ``path`` under a folder this user cannot write (the nearest existing one: tried with
    :func:`write_refused`, so nothing is made), before the work: else refused at the write, naming a temporary copy
    (``Permission denied: 'ro/..m.export.tmp'``), after the work. ``nothing`` says what was not done."""
    existing = _nearest_existing(Path(path).parent)
    refused = write_refused(existing) if existing.is_dir() else None
    if refused is not None:
        raise PermissionError(f"{option} {path}: the folder {existing} is not writable by this user ("
                              f"{refused.strerror or refused}), so nothing can be written under it; choose another "
                              f"path ({nothing})")


def holds_working_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is, or holds, the working folder (through links and ``..``)."""
    return Path.cwd().resolve().is_relative_to(Path(path).resolve())


def check_replaceable_folder(path: str | os.PathLike, option: str) -> None:
    """Refuse in one line a folder ``path`` that a command writes whole (renamed into place, the old one moved aside)
    where it is, or holds, the working folder: the shell would be left in a folder that is gone (``--output .``: the
    next command fails to load its libraries), or the name has nothing to rename (``PosixPath('.') has an empty
    name``)."""
    if holds_working_folder(path):
        raise ValueError(f"{option} {path} is (or holds) the working folder, which the output replaces whole: name a "
                         "folder beside it or below it, or run the command from elsewhere (nothing was written)")


@contextlib.contextmanager
def written_whole(path: str | os.PathLike, folder: bool = False) -> Iterator[Path]:
    """A temporary sibling of ``path`` (``.NAME.tmp``) to write into: a new empty folder when ``folder``, else a
    file's name. When the block ends, it replaces ``path`` whole (a folder through :func:`replace_directory`); when
    the block fails (a full disk, a bug), what it wrote is removed: no partial copy holds the room, and the last
    complete ``path`` stays as it was."""
    path = through_link(path)
    tmp = path.with_name(f".{path.name}.tmp")
    _remove(tmp)
    if folder:
        tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        _remove(tmp)
        raise
    if folder:
        replace_directory(tmp, path)
    else:
        if tmp.exists():
            readable_as_umask_allows(tmp)
        os.replace(tmp, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def _previous(directory: Path) -> Path:
    """Where :func:`replace_directory` keeps the previous checkpoint while it swaps in a new one."""
    directory = through_link(directory)
    return directory.with_name(f".{directory.name}.old")


def checkpoint_exists(directory: str | os.PathLike) -> bool:
    """Whether there is a checkpoint at ``directory`` to resume from (or a damaged one, for
    :func:`resolve_checkpoint` to name), counting the previous one that a save cut off between its
    two renames leaves as ``.NAME.old``."""
    directory = Path(directory)
    return directory.exists() or (_previous(directory) / MARKER).exists()


def checkpoint_meta(directory: str | os.PathLike) -> dict:
    """What the usable checkpoint at ``directory`` records in its marker (``saved_at``, ``keys``, and what
    :func:`save_checkpoint` was given as ``meta``); {} where there is none or it cannot be read."""
    try:
        path = resolve_checkpoint(directory)
    except (OSError, ValueError, CheckpointError):
        return {}
    return _marker_record(path)[0]


def _marker_record(path: Path) -> tuple[dict, str | None]:
    """(what the marker of the checkpoint folder ``path`` records, {} where it cannot be read; why it cannot, in
    words, or None where it can)."""
    try:
        meta = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return {}, error_line(err)
    return (meta, None) if isinstance(meta, dict) else ({}, f"holds {type(meta).__name__}, not a record")


def drop_previous_checkpoint(directory: str | os.PathLike) -> None:
    """Remove the previous checkpoint (``.NAME.old``) that a save cut off between its last two steps left beside a
    complete ``directory`` (the new one in place, the old not yet removed): a run resumed from there and finished
    writes no checkpoint again, so nothing else would remove it (a second copy of the model and its optimiser)."""
    directory = Path(directory)
    old = _previous(directory)
    if old.exists() and (directory / MARKER).exists():
        shutil.rmtree(old, ignore_errors=True)


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
        state = read_torch_file(path / EXTRA)
    except CheckpointError:
        raise
    except Exception as err:  # noqa: BLE001 - report any unpickling failure as corruption
        raise CheckpointError(f"checkpoint {path}: {EXTRA} is unreadable ({error_line(err)}); the file is corrupt"
                              ) from err
    if accelerator is not None:
        # accelerate skips an unreadable random-state file with a log line, and the run would go on
        # with other random numbers: read it here first, so a damaged one is refused like the rest.
        rng_file = path / f"random_states_{accelerator.process_index}.pkl"
        random_states = None
        if rng_file.exists():
            try:
                random_states = read_torch_file(rng_file)
            except CheckpointError:
                raise
            except Exception as err:  # noqa: BLE001
                raise CheckpointError(f"checkpoint {path}: {rng_file.name} is unreadable ({error_line(err)}); the file "
                                      "is damaged (e.g. truncated), so the run could not continue exactly") from err
        want = _entries(accelerator)
        if want and (path / ENTRIES).exists():
            have = read_json_file(path / ENTRIES, "checkpoint's table of entries")
            if have != want:
                raise CheckpointError(f"checkpoint {path} holds the entries {', '.join(have)} but this run registers "
                                      f"{', '.join(want)}: it was written by another version or configuration")
        for obj in _file_keepers(accelerator):
            obj.read_files_from(path)
        try:
            with _custom_states_read_safely():
                accelerator.load_state(str(path))
        except CheckpointError:
            raise
        except Exception as err:  # noqa: BLE001
            damaged = _damaged_file(path, accelerator)
            if damaged is not None:
                raise CheckpointError(f"checkpoint {path}: {damaged}; the run cannot continue from it (a checkpoint "
                                      "is whole or not used: --overwrite starts again, moving this run aside)") from err
            raise CheckpointError(
                f"checkpoint {path} could not be loaded into this run's models/optimisers ({error_line(err)}); was it "
                "written with a different configuration, or is one of its files damaged (e.g. truncated by a full disk "
                "or a copy that did not finish)?"
            ) from err
        for obj in [*getattr(accelerator, "_models", []), *getattr(accelerator, "_custom_objects", [])]:
            if isinstance(obj, torch.nn.Module):
                check_finite_weights(obj.state_dict(), f"checkpoint {path}")
        gpu_states_left = _set_random_states(random_states, rng_file) if random_states is not None else 0
        meta, damage = _marker_record(path)
        if damage is not None:  # cut by a copy that did not finish: its presence made the checkpoint usable
            warnings.warn(f"checkpoint {path}: its {MARKER} marker is damaged ({damage}); the run goes on from the "
                          "checkpoint's files, which all loaded, without the marker's record (the device it was "
                          "written on, the logs' rows at that point), so neither is checked", UserWarning, stacklevel=2)
        _say_if_continued_elsewhere(path, meta.get("device"), accelerator.device.type, gpu_states_left)
    return state


def _damaged_file(path: Path, accelerator) -> str | None:
    """Which file of the checkpoint ``path`` is missing or unreadable, in words (None: each reads), for a load that
    failed: accelerate's own errors name no file ("Number of custom checkpoints ... does not match", or an OSError of
    a truncated file)."""
    files = [(f, f"{name}'s state") for name, f in _entries(accelerator).items()] or \
        [(f"custom_checkpoint_{i}.pkl", f"registered object {i}'s state")
         for i in range(len(getattr(accelerator, "_custom_objects", [])))]
    for i in range(len(getattr(accelerator, "_optimizers", []))):
        files.append(("optimizer.bin" if i == 0 else f"optimizer_{i}.bin", "an optimiser's state"))
    for i in range(len(getattr(accelerator, "_models", []))):
        names = [f"model{'' if i == 0 else f'_{i}'}.safetensors", f"pytorch_model{'' if i == 0 else f'_{i}'}.bin"]
        files.append((next((n for n in names if (path / n).exists()), names[0]), "a model's weights"))
    for name, what in files:
        file = path / name
        if not file.exists():
            return f"{name} ({what}) is missing"
        try:
            if name.endswith(".safetensors"):
                from safetensors.torch import load_file

                load_file(str(file))
            else:
                read_torch_file(file)
        except CheckpointError:
            raise
        except Exception as err:  # noqa: BLE001
            return f"{name} ({what}) is unreadable ({error_line(err)}): the file is damaged (e.g. truncated by a " \
                   "full disk or a copy that did not finish)"
    return None


def _say_if_continued_elsewhere(path: Path, saved: str | None, here: str, gpu_states_left: int) -> None:
    """One warning where a run continues on another kind of device than the one its checkpoint was written on (a
    run trained on a GPU, continued on a CPU, or the other way), or where the GPU random states of a run that trained
    on GPUs could not be put back (fewer GPUs here): the run goes on from its checkpoint, but not as the
    uninterrupted run would (random numbers do not cross devices, and kernels round differently). Checkpoints written
    before the marker recorded the device are told by their GPU random states only. ``saved``: the device the
    marker records (None: none)."""
    if saved not in (None, here):
        what = f"checkpoint {path} was written on {saved} and this run continues on {here}"
    elif gpu_states_left and saved in (None, "cuda"):  # a CPU run on a GPU machine saves them too, unused
        what = (f"checkpoint {path} holds the random states of {gpu_states_left} GPU(s), which this process cannot "
                f"take (it sees {torch.cuda.device_count()})")
    else:
        return
    warnings.warn(what + ": it goes on from the checkpoint, but its random numbers (and the kernels' rounding) are not "
                  "those the uninterrupted run would have had", UserWarning, stacklevel=3)


def _load_custom_state(obj, path, index: int = 0) -> None:
    """accelerate's ``load_custom_state``, reading the file with :func:`read_torch_file`."""
    obj.load_state_dict(read_torch_file(Path(path) / f"custom_checkpoint_{index}.pkl"))


_SAFE_READERS = {"depth": 0, "real": None}  # how many loads are inside _custom_states_read_safely, accelerate's own
_SAFE_READERS_LOCK = threading.Lock()


@contextlib.contextmanager
def _custom_states_read_safely():
    """accelerate reads the objects registered for checkpointing (``custom_checkpoint_N.pkl``) with
    ``weights_only=False``, which runs whatever code a crafted file holds; within this block it reads them with
    :func:`read_torch_file` instead. Runs trained together in threads (rl_curl.together) may be inside at once: the
    reader is accelerate's again when the last one leaves."""
    import accelerate.accelerator as acc

    if getattr(acc, "load_custom_state", None) is None:  # another accelerate: tests/shared_losses/
        yield                                              # test_checkpoint_files.py fails there
        return
    with _SAFE_READERS_LOCK:
        if _SAFE_READERS["depth"] == 0:
            _SAFE_READERS["real"], acc.load_custom_state = acc.load_custom_state, _load_custom_state
        _SAFE_READERS["depth"] += 1
    try:
        yield
    finally:
        with _SAFE_READERS_LOCK:
            _SAFE_READERS["depth"] -= 1
            if _SAFE_READERS["depth"] == 0:
                acc.load_custom_state = _SAFE_READERS["real"]


def check_finite_weights(weights: Any, where: str) -> None:
    """Refuse in one line (:class:`CheckpointError`) weights that hold NaN or infinite values: a run never writes a
    checkpoint of a diverged model (it stops first), so such values mean a damaged file (bytes overwritten, the size
    kept), which would otherwise load, export and predict NaN without a word. ``weights``: a state dict, or any
    nesting of dicts, lists and tuples of tensors (an agent's saved state)."""
    stack = [("", weights)]
    while stack:
        name, value = stack.pop()
        if isinstance(value, torch.Tensor):
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                bad = int((~torch.isfinite(value)).sum())
                raise CheckpointError(f"{where}: {name or 'a tensor'} holds {bad} NaN or infinite value(s) of "
                                      f"{value.numel()}; the file is damaged (a run never checkpoints a diverged "
                                      "model): train again, or restore the file from a copy")
        elif isinstance(value, Mapping):
            stack.extend((f"{name}.{k}" if name else str(k), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{name}[{i}]", v) for i, v in reversed(list(enumerate(value))))


def _set_random_states(states: Mapping[str, Any], source: Path) -> int:
    """Put back the random states accelerate saved (Python's, NumPy's, torch's CPU and CUDA generators), whether or
    not ``accelerator.load_state`` did: accelerate reads that file with ``weights_only=True``, which refuses the
    random state of NumPy 1.24 (1.26 passes), and then only logs "Could not load random states" at INFO level and
    goes on, so a run resumed there (accelerate 1.3 and 1.15 seen, torch 2.5) drew other random numbers than the
    uninterrupted run. Returns how many GPU random states the file holds that could not be put back (no GPU here,
    or another number of them)."""
    import random

    import numpy as np

    try:
        random.setstate(states["random_state"])
        np.random.set_state(states["numpy_random_seed"])
        torch.set_rng_state(states["torch_manual_seed"])
        cuda = states.get("torch_cuda_manual_seed")
        if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda)
            return 0
        return len(cuda or ())
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise CheckpointError(f"checkpoint {source.parent}: {source.name} does not hold the random states accelerate "
                              f"writes ({type(err).__name__}: {err}); the run could not continue exactly") from err


def local_path(value: Any) -> Any:
    """``value`` as an absolute path when it names an existing local file or folder (the current folder joined,
    ``..`` folded; links kept); any other value as it is: a name (``mnist``, ``glue/sst2``, ``hf:bookcorpus``, a hub
    model id), None, a number. The applications record their input files so, and compare them so on resume: the
    same file named relatively or absolutely is the same input, and one spelling from another folder is not."""
    if isinstance(value, str) and value and not value.startswith("hf:") and os.path.exists(value):
        return os.path.abspath(value)
    return value


def with_local_paths(config: Mapping[str, Any], fields: Iterable[str]) -> dict:
    """``config`` with each of ``fields`` (those it has) passed through :func:`local_path`."""
    return {**config, **{f: local_path(config[f]) for f in fields if f in config}}


def config_changes(saved: Mapping[str, Any], current: Mapping[str, Any],
                   free: Iterable[str] = ()) -> list[tuple[str, Any, Any]]:
    """What a resumed run would change: ``(field, saved value, current value)`` for every field, in
    name order, whose value differs between a run's saved configuration and the current one.

    Every field counts except those in ``free`` (the ones a resumed run may change, such as the total
    number of steps), so a field added later is checked by default (a saved configuration without it is
    refused). Values are compared after a JSON round trip, so a tuple saved to ``config.json`` still equals the
    list it comes back as.
    """
    free = set(free)
    old = json.loads(json.dumps(dict(saved)))
    new = json.loads(json.dumps(dict(current)))
    return [(k, old.get(k), new.get(k)) for k in sorted(set(old) | set(new))
            if k not in free and old.get(k) != new.get(k)]


def changes_text(changes: Iterable[tuple[str, Any, Any]]) -> str:
    """:func:`config_changes`' list as every refusal words it: ``field: old -> new, ...`` (values as repr)."""
    return ", ".join(f"{k}: {old!r} -> {new!r}" for k, old, new in changes)


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
    _check_writable(Path(directory), "TensorBoard's events")  # SummaryWriter's own failure is two threads' tracebacks
    _after_older_event_files(Path(directory))
    tb = SummaryWriter(str(directory), purge_step=0 if resume_step is None else resume_step + 1)
    if config is not None and resume_step is None:
        tb.add_text("config", config_markdown(config), 0)
    return tb


def write_refused(directory: str | os.PathLike) -> OSError | None:
    """Why ``directory`` cannot be written (made if missing, then a file made in it and removed), or None when it
    can: the check a command makes before work whose output would otherwise be lost at the write."""
    import tempfile

    try:
        Path(directory).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".write-check-"):
            pass
    except OSError as err:
        return err
    return None


def _check_writable(directory: Path, what: str) -> None:
    """Refuse in one line a folder of the run that cannot be written (made, or a file made in it), before a writer
    starts on it."""
    err = write_refused(directory)
    if err is not None:
        raise RunFolderError(f"{directory} cannot be written ({type(err).__name__}: {err.strerror or err}), so {what} "
                             "cannot go there; make it writable (chmod u+w), or pass --report-to none")


def _after_older_event_files(directory: Path) -> None:
    """Wait (at most about a second) until a new event file will sort after the ones in ``directory``.

    TensorBoard reads a folder's event files in name order, and applies a writer's purge to the files
    before it. The names are ``events.out.tfevents.<unix seconds>.<host>.<pid>.<writer counter>``: two
    writers of one process within the same second are ordered by the counter as text, so writer 10 sorted
    before writer 9 and the older run's events were shown instead of the new run's."""
    stamps = []
    for f in directory.glob("events.out.tfevents.*") if directory.is_dir() else ():
        field = f.name.split(".")[3]
        if field.isdigit():
            stamps.append(int(field))
    deadline = time.monotonic() + 2.0  # a file stamped in the future (another machine's clock): do not wait on it
    while stamps and int(time.time()) <= max(stamps) and time.monotonic() < deadline:
        time.sleep(0.05)


def write_text_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` via a temporary file and a rename: a reader (a second command, a stop in
    the middle) sees the old file or the new one, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_whole(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | os.PathLike, obj: Any) -> None:
    """Write ``obj`` as indented JSON to ``path`` via a temporary file and a rename; a write that fails leaves
    the old file as it was and no temporary file."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=str)  # an object that cannot be written fails here
    write_text_atomic(path, text)  # ASCII (json's default): the same bytes in any encoding


def _step_or_blank(value) -> bool:
    if value in (None, ""):
        return True
    try:
        return math.isfinite(float(value))
    except ValueError:
        return False


def _whole_lines(fh, cut: list[bool]) -> Iterator[str]:
    """The lines of ``fh`` (opened with ``newline=""``) up to its last "\\n": a run stopped while writing its last
    line leaves that line cut, and it is not yielded (``cut[0]`` is set). Read line by line: a log of any length
    takes no more memory than a line."""
    pending: list[str] = []
    for line in fh:
        pending.append(line)
        if line.endswith("\n"):
            yield from pending
            pending.clear()
    cut[0] = bool(pending)


class CsvLogger:
    """Append rows to a CSV file; the header comes from the first row and grows with new keys.

    ``resume_step``: on resume, drop rows whose ``step_key`` is beyond the checkpoint's step, so
    the log matches an uninterrupted run exactly.

    The rows are on disk only: the logger holds the header, the number of rows (:attr:`count`) and the last row
    (:attr:`last`), so a run that logs every step for millions of steps keeps its memory (every row in a list took
    about 250 bytes a row). A new column and a resume rewrite the file line by line through a temporary file.
    """

    def __init__(self, path: str | os.PathLike, resume_step: int | None = None, step_key: str = "step"):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fields: list[str] = []
        self.count = 0  # rows in the file
        self.last: dict[str, Any] | None = None  # the last of them (read back from the file: values as text)
        if self.path.exists() and resume_step is not None:
            self._resume(resume_step, step_key)
        elif self.path.exists():
            self.path.unlink()

    def _resume(self, resume_step: int, step_key: str) -> None:
        cut, damaged = [False], 0
        with written_whole(self.path) as tmp, open(self.path, newline="") as fh, open(tmp, "w", newline="") as out:
            reader = csv.DictReader(_whole_lines(fh, cut))
            self.fields = list(reader.fieldnames or [])
            writer = csv.DictWriter(out, fieldnames=self.fields)
            writer.writeheader()
            for r in reader:
                # as many cells as the header, and a step that is a number (a row logged without step_key reads
                # back with "" there: kept, like a file without the column)
                if None in r or None in r.values() or not _step_or_blank(r.get(step_key)):
                    damaged += 1
                elif r.get(step_key) in (None, "") or float(r[step_key]) <= resume_step:
                    writer.writerow(r)
                    self.count, self.last = self.count + 1, r
        if cut[0]:
            warnings.warn(f"{self.path}: its last line was cut off (the run stopped while writing it); dropped")
        if damaged:
            warnings.warn(f"{self.path}: {damaged} damaged row(s) dropped (another number of cells than the header's, "
                          f"or a {step_key} that is not a number)")

    @property
    def rows(self) -> list[dict[str, str]]:
        """Every row of the file, read back (values as text): for a look at a finished log, not for every step."""
        if not self.path.exists():
            return []
        with open(self.path, newline="") as fh:
            return list(csv.DictReader(fh))

    def _rewrite(self) -> None:
        """The file again with the (wider) header :attr:`fields`, its rows copied line by line."""
        with written_whole(self.path) as tmp, open(tmp, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=self.fields, extrasaction="ignore")  # a cell beyond the header
            writer.writeheader()                                                       # (a damaged row) is left out
            if self.path.exists():
                with open(self.path, newline="") as fh:
                    writer.writerows(csv.DictReader(fh))

    def log(self, row: dict[str, Any]) -> None:
        """Append ``row`` (tensors as numbers); a new column rewrites the file with the wider header."""
        row = {k: (v.item() if isinstance(v, torch.Tensor) else v) for k, v in row.items()}
        new = [k for k in row if k not in self.fields]
        if not self.path.exists() and self.count:
            warnings.warn(f"{self.path} was deleted while the run went on; it starts again from this row (its "
                          f"{self.count} earlier row(s) are not held in memory)", UserWarning, stacklevel=2)
            self.count = 0
        if new or not self.path.exists():
            self.fields += new
            self._rewrite()
        with open(self.path, "a", newline="") as fh:
            csv.DictWriter(fh, fieldnames=self.fields).writerow(row)
        self.count, self.last = self.count + 1, row

    def close(self) -> None:  # kept for symmetry with other loggers; every row is already on disk
        """Nothing to do: every row is on disk when :meth:`log` returns."""
        pass


# ------------------------------------------------------------------------------------- run folders

RUN_FILE = "run.json"


def checkpoint_application(state: Mapping[str, Any]) -> str | None:
    """The application whose run wrote the checkpoint ``state`` (its extra state), as the harness records it;
    None for a checkpoint that names none (written by another version of the suite, or not by a run)."""
    return str(state["application"]) if "application" in state else None


#: What to do with a finished run of each application (the command or call that reads it): named by the one-line
#: errors of a tool pointed at another application's run.
APPLICATION_TOOLS = {
    "rl_curl": "`python -m rl_curl.evaluate --run-dir RUN`, or rl_curl.load_policy(RUN) for its policy",
    "nlp_qt": "`python -m nlp_qt.export --run-dir RUN`, or `python -m nlp_qt.senteval --model RUN`",
    "fewshot": "`python -m fewshot.export --run-dir RUN`, or `python -m fewshot.predict`",
}


def another_application(folder: str | os.PathLike, owner: str, expected: str) -> str:
    """The one-line message for a tool of ``expected`` given ``folder``, a run of ``owner``: whose run it is, and
    what reads that application's runs."""
    tool = APPLICATION_TOOLS.get(owner)
    return f"{folder} holds a run of {owner}, not of {expected}" + (f": use {tool}" if tool else "")


def _new_id() -> str:
    import uuid

    return uuid.uuid4().hex


def run_id(folder: str | os.PathLike) -> str | None:
    """The ``id`` that ``run.json`` gives the run in ``folder`` (written when the run starts; it stays when the folder
    is moved or renamed, and a copy of the folder has it too); None for a folder without one (no run, or a run from
    before ids, until it is continued)."""
    try:
        record = json.loads((Path(folder) / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    value = record.get("id") if isinstance(record, dict) else None
    return value if isinstance(value, str) and value else None


def export_source(run_dir: str | os.PathLike, path_key: str) -> dict:
    """What an export records of the run it was made from: the run's id (:func:`run_id`) and its folder's name, no
    path (an export is shared, and its run may move); for a run from before ids (never continued since), its
    absolute path under ``path_key``, as exports recorded it before."""
    rid = run_id(run_dir)
    if rid is None:
        return {path_key: str(Path(run_dir).resolve())}
    return {"run_id": rid, "run_name": Path(run_dir).resolve().name}


def exported_from(record: Mapping[str, Any], run_dir: str | os.PathLike, path_key: str) -> bool:
    """Whether the export that wrote ``record`` (its marker or config) was made from the run in ``run_dir``: by the
    run's id where both have one (a moved run is still its own), else by the absolute path an export written before
    ids recorded under ``path_key``."""
    recorded, current = record.get("run_id"), run_id(run_dir)
    if isinstance(recorded, str) and recorded and current is not None:
        return recorded == current
    return record.get(path_key) == str(Path(run_dir).resolve())


class RunFolderError(FileExistsError):
    """The output folder cannot be used as asked (it holds a run, another application's run, or files
    that are not a run); nothing in it was changed."""


def run_application(folder: str | os.PathLike) -> str | None:
    """Which application's run ``folder`` holds: the ``application`` of its ``run.json`` ("unknown" for a folder
    with a checkpoint but no run.json); None if it holds no run."""
    folder = Path(folder)
    marker = folder / RUN_FILE
    if marker.is_file():
        try:
            return str(json.loads(marker.read_text())["application"])
        except (ValueError, KeyError, TypeError) as err:
            raise RunFolderError(f"{marker} is damaged ({type(err).__name__}: {err}); it should name the application "
                                 "whose run the folder holds. Fix or remove that file; nothing was changed") from err
    if checkpoint_exists(folder / "checkpoint"):
        return "unknown"
    return None


def _aside_name(folder: Path) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    candidate = folder.with_name(f"{folder.name}.replaced-{stamp}")
    k = 1
    while candidate.exists():
        k += 1
        candidate = folder.with_name(f"{folder.name}.replaced-{stamp}-{k}")
    return candidate


#: The run folders this process holds (its resolved path -> the open descriptor whose flock marks it in use).
_HELD: dict[str, int] = {}


def _flock(folder: Path) -> tuple[int | None, str | None]:
    """Try the exclusive, non-blocking flock of the run folder ``folder`` itself: (its descriptor, None) when taken,
    (None, the process holding it: its pid, or "" where /proc/locks does not say) when another holds it, (None, None)
    where there are no locks (no flock on this platform, a file system without them: some network ones)."""
    try:
        import fcntl
    except ImportError:
        return None, None
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return None, None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(os.fstat(fd))
        os.close(fd)
        return None, holder
    except OSError:
        os.close(fd)
        return None, None
    return fd, None


def _lock_holder(st: os.stat_result) -> str:
    """The pid of the process holding an flock on the file of ``st``, from Linux's /proc/locks ("" elsewhere)."""
    want = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        fields = line.split()
        if "->" not in fields and len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == want:
            return fields[4]
    return ""


def _in_use_error(folder: Path, pid: str, option: str) -> RunFolderError:
    who = f"process {pid}" if pid else "another process"
    return RunFolderError(f"{option} {folder} is in use by a run still going ({who}): wait for it to end, or stop it "
                          f"(Ctrl-C where it runs, or kill {pid or 'PID'}: it writes a checkpoint first) and continue "
                          "it with --resume; nothing was changed")


def note_if_run_going(folder: str | os.PathLike, what: str) -> None:
    """A note on stderr where ``folder`` is a run another process is still training (:func:`hold_run_folder`): a
    command that only reads it (an evaluation, an export) goes on, from ``what`` (its latest checkpoint), which the
    run replaces as it goes on."""
    holder = _held_by_another(Path(folder))
    if holder is not None:
        who = f"process {holder}" if holder else "another process"
        print(f"note: {folder} is a run still training ({who}): this reads {what} as it is now; the run goes on "
              "past it", file=sys.stderr, flush=True)


def _refuse_if_in_use(folder: Path, option: str) -> None:
    """Refuse (:class:`RunFolderError`) a folder another process holds as a run (:func:`hold_run_folder`); a folder
    this process holds is its own to reopen."""
    holder = _held_by_another(folder)
    if holder is not None:
        raise _in_use_error(folder, holder, option)


def _held_by_another(folder: Path) -> str | None:
    """The process (its pid, or "" where it cannot be told) that holds ``folder`` as a run (:func:`hold_run_folder`),
    None where none does or this process does."""
    if not folder.is_dir() or str(folder.resolve()) in _HELD:
        return None
    fd, holder = _flock(folder)
    if fd is not None:
        os.close(fd)  # free: the lock was only a test
    return holder


def hold_run_folder(folder: str | os.PathLike, option: str = "--output-dir") -> None:
    """Mark ``folder`` in use by this process for as long as it runs (an exclusive flock on the folder itself:
    nothing is written into it, and the lock goes with the process however it ends), or until
    :func:`release_run_folder`. Another process holding it already is a :class:`RunFolderError`. Where the file
    system has no locks, nothing is held."""
    folder = Path(folder)
    key = str(folder.resolve())
    if key in _HELD:
        return
    fd, holder = _flock(folder)
    if holder is not None:
        raise _in_use_error(folder, holder, option)
    if fd is not None:
        _HELD[key] = fd


def release_run_folder(folder: str | os.PathLike) -> None:
    """Give up this process's hold on ``folder`` (:func:`hold_run_folder`); nothing if it holds none."""
    fd = _HELD.pop(str(Path(folder).resolve()), None)
    if fd is not None:
        os.close(fd)  # closing the descriptor ends its flock


@dataclasses.dataclass
class RunFolder:
    """What :func:`claim_run_folder` decided for an output folder; ``open()`` carries it out.

    ``action``: ``"new"`` (missing or empty folder), ``"resume"`` (a run of this application, with
    ``--resume``) or ``"replace"`` (a run, with ``--overwrite``: moved aside to ``moved_to``, never
    deleted, and a new run started in the emptied name).
    """

    path: Path
    application: str
    action: str
    moved_to: Path | None = None
    option: str = "--output-dir"
    #: --resume was given (a ``"new"`` folder: nothing there to continue, said in a note when it opens)
    resume_asked: bool = False

    @property
    def resuming(self) -> bool:
        """Whether the folder holds a run of this application that is continued."""
        return self.action == "resume"

    def open(self, is_main: bool = True, announce: bool = True) -> "RunFolder":
        """Move an old run aside (``replace``), create the folder and write ``run.json`` for a new run.
        Call it on the main process only (``is_main``), after every process has called
        :func:`claim_run_folder` and before any of them writes into the folder."""
        if not is_main:
            return self
        marker = {"application": self.application, "format": 1}
        if self.action == "replace":
            release_run_folder(self.path)  # a run this process left open there: its folder goes aside
            before = _replaced_before(self.path)
            os.replace(self.path, self.moved_to)
            marker["replaced"] = self.moved_to.name  # where the run before this one went (named if this one is cut)
            if announce:
                print(f"--overwrite: moved the previous run in {self.path} to {self.moved_to}" + (
                    f" (it has no checkpoint: an earlier --overwrite started it and it stopped before its first "
                    f"one; the run it replaced is in {self.path.with_name(before)})" if before else ""))
        if announce and self.resume_asked and self.action == "new":  # a mistyped path would otherwise pass unseen
            print(f"note: --resume: {self.option} {self.path} holds no run yet ("
                  f"{'empty' if self.path.exists() else 'no such folder'}): starting a new run there",
                  file=sys.stderr, flush=True)
        self.path.mkdir(parents=True, exist_ok=True)
        hold_run_folder(self.path, self.option)  # until the run ends: a second command on this folder is refused
        if self.action != "resume" or not (self.path / RUN_FILE).exists():
            write_json_atomic(self.path / RUN_FILE, {**marker, "created": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                                     "id": _new_id()})
        elif run_id(self.path) is None:  # a run from before runs had ids: given one when it is continued
            record = read_json_file(self.path / RUN_FILE, "run.json")
            if isinstance(record, dict):
                write_json_atomic(self.path / RUN_FILE, {**record, "id": _new_id()})
        return self


def _replaced_before(folder: Path) -> str | None:
    """The folder name that ``folder``'s run.json records as the run its run replaced (``--overwrite``), where that run
    never got to a checkpoint (a command stopped early) and the named folder is still there; else None."""
    if checkpoint_exists(folder / "checkpoint"):
        return None
    try:
        name = json.loads((folder / RUN_FILE).read_text()).get("replaced")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and name and (folder.with_name(name)).is_dir() else None


def claim_run_folder(path: str | os.PathLike, application: str, *, resume: bool = False, overwrite: bool = False,
                     option: str = "--output-dir") -> RunFolder:
    """Apply the folder rules every trainer shares, without touching anything (see :meth:`RunFolder.open`):

    - a missing or empty folder starts a new run (``--resume`` there has nothing to continue: a new run);
    - a folder holding a run of this application is continued with ``resume`` and moved aside with
      ``overwrite``; with neither it is refused with a message naming both;
    - a folder holding another application's run is refused (``overwrite`` included: move it yourself);
    - a non-empty folder that holds no run is refused and left untouched, ``overwrite`` included.

    Raises :class:`RunFolderError` (one line, naming the folder and the way out) when refused.
    """
    if not str(path).strip():  # Path("") is the working folder: a run would be written among its files
        raise RunFolderError(f"{option} is empty: name the run's folder (nothing was changed)")
    folder = Path(path)
    if str(path).startswith("~") and not folder.exists():  # quoted, or from a config file: no shell expanded it
        import sys

        print(f"note: {option} {path} starts with '~', which only a shell expands (unquoted): the run goes to a folder "
              f"named '~' in {os.getcwd()}, not your home folder", file=sys.stderr, flush=True)
    if resume and overwrite:
        raise ValueError("--resume and --overwrite exclude each other: continue the run in "
                         f"{folder} (--resume) or move it aside and start a new one (--overwrite)")
    if folder.exists() and not folder.is_dir():
        raise RunFolderError(f"{option} {folder} is a file, not a folder; choose a folder (nothing was changed)")
    link = broken_link(folder)
    if link is not None:
        raise RunFolderError(f"{option} {folder}: {broken_link_words(link)} (nothing was changed)")
    holder = next((p for p in Path(os.path.abspath(folder)).parents if (p / RUN_FILE).is_file()), None)
    if holder is not None:  # its checkpoint/ is replaced whole at each save, and --overwrite moves it all aside
        raise RunFolderError(f"{option} {folder} is inside the run folder {holder}, whose own saves (its checkpoint/ "
                             "is replaced whole) and --overwrite would remove or move this run with it; choose a "
                             "folder outside it (nothing was changed)")
    for parent in folder.absolute().parents:  # the folder would go under a file: the first existing ancestor
        if parent.exists():
            if not parent.is_dir():
                raise RunFolderError(f"{option} {folder}: {parent} is a file, not a folder, so no run folder can be "
                                     "made under it; choose another path (nothing was changed)")
            if not os.access(parent, os.W_OK | os.X_OK) and not folder.exists():
                raise RunFolderError(f"{option} {folder}: {parent} is not writable, so the run folder cannot be made "
                                     "there; choose another path (nothing was changed)")
            break
    _refuse_if_in_use(folder, option)  # another command training there now (a second --resume, a job resubmitted)
    if not folder.exists() or not any(folder.iterdir()):
        return RunFolder(folder, application, "new", option=option, resume_asked=resume)
    owner = run_application(folder)
    if owner is None:
        names = sorted(p.name for p in folder.iterdir())
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise RunFolderError(f"{option} {folder} is not empty ({shown}) and holds no run: a new run starts only in a "
                             "missing or empty folder; choose another one (nothing was changed)")
    if owner not in (application, "unknown"):
        raise RunFolderError(f"{option} {folder} holds a run of {owner}, not of {application}: choose another folder "
                             f"(nothing was changed)")
    if resume:
        return RunFolder(folder, application, "resume", option=option)
    if overwrite:
        if holds_working_folder(folder):  # moved aside, the working folder would go too
            raise RunFolderError(f"--overwrite moves the run in {option} {folder} aside, but that folder is (or holds) "
                                 "the working folder: run the command from outside it, say from its parent "
                                 "(nothing was changed)")
        return RunFolder(folder, application, "replace", moved_to=_aside_name(folder), option=option)
    raise RunFolderError(f"{option} {folder} already holds a run of {application}: pass --resume to continue it, or "
                         "--overwrite to move it aside (to a .replaced-<time> folder next to it) and start a new "
                         "one; nothing was changed")


# ------------------------------------------------------------------------------------- interrupts

class TrainingDiverged(ValueError):
    """Training produced a NaN or infinite loss: the run stops without writing a checkpoint (its last one is kept),
    and ``run_cli`` prints the message as one ``error:`` line."""


class DivergenceWatch:
    """Stops a run whose training has diverged, before it writes a checkpoint of the diverged model: a loss that is not
    finite, or a weight that is not finite or has grown to :attr:`GROWTH` times the largest initial weight (a
    learning rate far too high can leave the loss finite and flat while the weights run off: nlp_qt's cosine loss at
    ``--lr 1e30`` sat at ln 15 with weights near 3e30). :meth:`check` reads the weights' largest magnitude on the
    host (one sync): call it where the run logs, evaluates and checkpoints, not every step."""

    GROWTH = 1e6

    def __init__(self, params, lr: float, unit: str = "step"):
        self.params = [p for p in params if p.numel()]
        self.lr, self.unit = lr, unit
        self.initial = max(1.0, self.largest())
        self.ok_until = 0  # the last step seen healthy
        self.checkpointed: int | None = None  # the step of the run's last checkpoint (set by the application)

    def largest(self) -> float:
        """The largest magnitude of any watched weight (NaN or inf when one is)."""
        with torch.no_grad():
            return float(torch.stack([p.detach().abs().amax().float() for p in self.params]).amax()) \
                if self.params else 0.0

    def resumed(self, step: int) -> None:
        """A run resumed from the checkpoint at ``step``."""
        self.ok_until = self.checkpointed = step

    def check(self, step: int, loss: float | None = None) -> None:
        """Raise :class:`TrainingDiverged` (one line: the steps, what went wrong, the learning rate, the checkpoint
        kept) if the training has diverged by ``step``."""
        biggest = self.largest()
        what = None
        if loss is not None and not math.isfinite(loss):
            what = f"the loss is {loss}"
        elif not math.isfinite(biggest):
            what = "a weight is NaN or infinite"
        elif biggest > self.GROWTH * self.initial:
            what = (f"a weight reached {biggest:.3g}, over {self.GROWTH:g} times the largest initial one "
                    f"({self.initial:.3g})")
        if what is None:
            self.ok_until = step
            return
        kept = ("it has no checkpoint yet: start again (--overwrite moves this folder aside)"
                if self.checkpointed is None
                else f"its last checkpoint, at {self.unit} {self.checkpointed}, is kept: --resume continues from there")
        raise TrainingDiverged(f"training diverged between {self.unit}s {self.ok_until} and {step}: {what} (--lr "
                               f"{self.lr:g}); the run stopped without writing a checkpoint ({kept}); lower --lr")


class RunInterrupted(Exception):
    """A run stopped on SIGINT/SIGTERM after writing a checkpoint; ``run_cli`` prints ``str(self)``
    and exits with status 130."""

    def __init__(self, where: str, option: str = "--resume", at: str | None = None):
        super().__init__(f"interrupted at {where}; continue with {option}")
        self.where = where
        self.at = where if at is None else at  # the step alone ("environment step 3000"), without the checkpoint


class RunStopped(RuntimeError):
    """The run cannot go on for a cause outside its training: a process it depends on ended (an environment's worker
    killed by the system's out-of-memory killer, a renderer that crashed), or the file system refused its checkpoint
    (:func:`save_checkpoint`: a full disk, a quota, a file-size limit). The checkpoints it wrote stand. The
    training loop adds where the run stopped and how to continue; ``run_cli`` prints ``error: ...`` in one line
    (no traceback: the cause is not in the code that raised it) and exits with status 1."""


#: Signals a scheduler sends as a warning before it ends a job (Slurm's ``--signal=USR2@120``, which submitit and
#: ``--backend slurm`` of the grid scripts use; ``--signal=USR1@90``, Lightning's habit): ahead of a time limit or a
#: preemption. Their default action ends the process at once.
SCHEDULER_WARNINGS = ("SIGUSR1", "SIGUSR2")


def _stop_signals() -> tuple:
    """The signals a run stops on: SIGINT (Ctrl-C), SIGTERM (a scheduler's cancel) and, where there are, SIGHUP
    (the terminal gone: a closed window, a dropped ssh session) and SIGUSR1 / SIGUSR2 (a scheduler's warning before
    a job's time limit or a preemption, :data:`SCHEDULER_WARNINGS`)."""
    import signal

    names = ("SIGINT", "SIGTERM", "SIGHUP", *SCHEDULER_WARNINGS)
    return tuple(getattr(signal, s) for s in names if hasattr(signal, s))


def point_at_null(fds) -> None:
    """Point each descriptor of ``fds`` at the null device: writes to it then succeed and go nowhere (a reader that
    went away, a terminal that hung up)."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            try:
                os.dup2(null, fd)
            except OSError:
                pass
    finally:
        os.close(null)


def _leave_the_terminal() -> None:
    """After SIGHUP, every write to what was the terminal fails (EIO), and the run's progress bar and last lines
    would stop it before its checkpoint: point stdout and stderr, where they were that terminal, at the null device.
    A terminal is told by its file type (a character device): ``isatty`` already fails on one that has hung up.
    (rl_curl.env's workers, which import no torch, do the same in their own handler.)"""
    import stat

    def terminal(fd: int) -> bool:
        try:
            return stat.S_ISCHR(os.fstat(fd).st_mode)
        except OSError:
            return False

    point_at_null([fd for fd in (1, 2) if terminal(fd)])


class StopSignals:
    """Turns SIGINT (Ctrl-C), SIGTERM, SIGHUP and a scheduler's warning (SIGUSR1 / SIGUSR2) into a request the
    training loop honours between steps.

    Used as ``with StopSignals() as stop: ... if stop.requested: checkpoint, raise RunInterrupted``.
    The first signal sets ``requested`` (and prints one line saying the run stops after its step; after another
    signal than SIGINT, "Ctrl-C again" in ``message`` reads "Ctrl-C", no Ctrl-C having been pressed);
    a second SIGINT raises KeyboardInterrupt at once, as usual, if it comes :attr:`again_after` seconds or more
    after the first: a launcher (torchrun, ``accelerate launch``) forwards the terminal's Ctrl-C to processes that
    the terminal already sent it to, so one press arrives twice, milliseconds apart. Outside the main thread (where
    handlers cannot be installed) it does nothing. Several processes must agree on stopping at the
    same step: combine ``requested`` across them (e.g. a sum in a reduce the loop already does). SIGHUP (the
    terminal closed, an ssh session dropped) also sends what the run writes to a terminal to the null device, since
    the terminal is gone; a log file or pipe keeps getting it.
    """

    #: Seconds after the first signal from which a second SIGINT stops at once (sooner: the same press, forwarded).
    again_after = 1.0

    def __init__(self, message: str = "stopping after the current step and writing a checkpoint "
                                      "(Ctrl-C again to stop at once, losing the steps since the last checkpoint)"):
        self.requested = False
        self.message = message
        self._old: dict = {}
        self._first = 0.0  # time.monotonic() of the first signal

    def _handle(self, signum, frame):
        import signal
        import sys
        import time

        now = time.monotonic()
        if self.requested and signum == signal.SIGINT and now - self._first >= self.again_after:
            raise KeyboardInterrupt
        if signum == getattr(signal, "SIGHUP", None):
            _leave_the_terminal()
        if not self.requested:
            message = self.message if signum == signal.SIGINT else self.message.replace("Ctrl-C again", "Ctrl-C")
            print(f"\n{signal.Signals(signum).name}: {message}", file=sys.stderr, flush=True)
            self._first = now
        self.requested = True

    def __enter__(self) -> "StopSignals":
        self._old = install_handlers(_stop_signals(), self._handle)
        return self

    def __exit__(self, *exc) -> None:
        import time

        if self.requested and self._old:
            # A run whose step and checkpoint took less than again_after would give SIGINT back to its default
            # (KeyboardInterrupt) while the same press, forwarded by a launcher, may still be on its way, and that
            # copy would cut the run's way out (the "interrupted at ..." line, the folder's release) short: keep
            # the handler until the window has passed (at most again_after, only on a stop).
            left = self._first + self.again_after - time.monotonic()
            if left > 0:
                time.sleep(left)  # a signal in the sleep runs _handle; the sleep then goes on (PEP 475)
        restore_handlers(self._old)
        self._old = {}


def install_handlers(signals, handler) -> dict:
    """``handler`` for each of ``signals``, in the main thread only (elsewhere handlers cannot be installed: nothing
    is done); the handlers they replace, for :func:`restore_handlers`."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.signal(sig, handler) for sig in signals}


def restore_handlers(old: dict) -> None:
    """Put back the handlers :func:`install_handlers` replaced."""
    import signal

    for sig, handler in old.items():
        signal.signal(sig, handler)


def is_main_process() -> bool:
    """Whether this process prints a run's last lines: the only one, or rank 0 of a torch.distributed group."""
    import torch.distributed as dist

    return not (dist.is_available() and dist.is_initialized() and dist.get_rank() != 0)


def print_run_result(application: str, output_dir: str | os.PathLike, step: int, result: Mapping[str, Any]) -> dict:
    """The last line of every run, the same keys in every application: one JSON object with
    ``application``, ``output_dir``, ``step`` (the run's final step, in the unit of its step option)
    and ``result`` (its headline numbers), printed by the main process only. Returns the object."""
    line = {"application": application, "output_dir": str(output_dir), "step": int(step), "result": dict(result)}
    if not is_main_process():
        return line  # one line per run, from the main process
    print(json.dumps(_finite_or_null(line), default=str, allow_nan=False), flush=True)
    return line


def _finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinite float (in dicts, lists and tuples, at any depth) as None, so that
    ``json.dumps(..., allow_nan=False)`` writes strict JSON (null, not the NaN / Infinity no JSON parser takes)."""
    if isinstance(value, float):  # numpy's float64 included
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_null(v) for v in value]
    return value


# ------------------------------------------------------------------------------------- up-front checks

def check_device(name: str, option: str = "--device") -> torch.device:
    """``torch.device(name)`` if this machine can use it, else a ValueError of one line naming ``option`` (a
    command-line flag such as ``--device``, or a Python argument such as ``device``): an unknown device type, CUDA
    asked of a torch built without it or on a machine without a GPU, or a GPU index beyond those visible. Checked
    before any work starts. ``auto`` (the trainers' ``--device`` default) is a CUDA GPU where one is visible, else
    the CPU."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cpu = f"{option} cpu" if option.startswith("-") else f"{option}='cpu'"
    said = f"{option} {name}" if option.startswith("-") else f"{option}={name!r}"
    quoted = f"{option} {name!r}" if option.startswith("-") else f"{option}={name!r}"
    try:
        dev = torch.device(name)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(f"{quoted} is not a torch device; use cpu, cuda, cuda:N, mps or auto") from None
    if dev.type == "cuda":
        if not torch.backends.cuda.is_built():
            raise ValueError(f"{said}: this torch ({torch.__version__}) was built without CUDA; "
                             f"use {cpu}, or install a CUDA build of torch")
        n = torch.cuda.device_count()
        if n == 0:
            raise ValueError(f"{said}: no CUDA GPU is visible here (CUDA_VISIBLE_DEVICES="
                             f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); use {cpu}")
        if dev.index is not None and dev.index >= n:
            raise ValueError(f"{said}: only {n} CUDA GPU(s) are visible (cuda:0 to cuda:{n - 1})")
    elif dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{said}: MPS is not available on this machine; use {cpu}")
    elif dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"{quoted}: only cpu, cuda and mps devices are supported")
    return dev


#: What ``--report-to`` takes: TensorBoard (the suite's own writer, which a resumed run trims), the experiment
#: trackers accelerate drives (``log_with``), or none (log.csv only).
TRACKERS = ("tensorboard", "wandb", "mlflow", "none")
ACCELERATE_TRACKERS = ("wandb", "mlflow")


def check_seed(seed: int, option: str = "--seed") -> None:
    """Refuse a seed numpy's generators (and the environments') cannot take: a ValueError naming the option."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**32:
        raise ValueError(f"{option} must be a whole number in [0, 2**32) (numpy's and the environments' generators "
                         f"take 32-bit seeds), got {seed}")


def check_report_to(report_to: Iterable[str]) -> tuple[str, ...]:
    """The trackers ``--report-to`` names, checked (known names, ``none`` alone, the packages importable);
    returns them without ``none``. A ValueError of one line otherwise."""
    import importlib.util

    names = tuple(report_to)
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(f"--report-to {' '.join(unknown)}: unknown tracker; choose from {', '.join(TRACKERS)}")
    if "none" in names and len(names) > 1:
        raise ValueError(f"--report-to {' '.join(names)}: 'none' logs to no tracker and cannot be combined")
    for name in names:
        if name in ACCELERATE_TRACKERS and importlib.util.find_spec(name) is None:
            package = "mlflow-skinny" if name == "mlflow" else name
            raise ValueError(f"--report-to {name}: the {name} package is not installed here; pip install {package} "
                             "(or contrastive-suite[trackers]), or leave it out")
    return tuple(n for n in names if n != "none")


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def check_tracker_setup(names: Iterable[str]) -> None:
    """Refuse, in one line and before anything is written, a tracker of ``--report-to`` whose own set-up would make
    it fail once the run has started (a traceback from inside the tracker, the run folder already made):

    * wandb online without a login: no ``WANDB_API_KEY`` and no entry for the W&B host in the netrc file that
      ``wandb login`` writes (``WANDB_MODE=offline`` / ``disabled`` need none);
    * mlflow on a file store (``MLFLOW_TRACKING_URI=file:...`` or a plain path) where MLflow refuses it (MLflow 3
      does, unless ``MLFLOW_ALLOW_FILE_STORE=true``)."""
    names = tuple(names)
    if "wandb" in names:
        mode = os.environ.get("WANDB_MODE", "").strip().lower()
        if mode not in ("offline", "dryrun", "disabled") and not _truthy("WANDB_DISABLED") and \
                not os.environ.get("WANDB_API_KEY"):
            import netrc
            from urllib.parse import urlparse

            host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname or "api.wandb.ai"
            try:
                entry = netrc.netrc(os.environ.get("NETRC") or None).authenticators(host)
            except (OSError, netrc.NetrcParseError):
                entry = None
            if not entry:
                raise ValueError(f"--report-to wandb: no W&B login for {host} (no WANDB_API_KEY, nothing from `wandb "
                                 "login` in the netrc file); log in, or set WANDB_MODE=offline to keep the run in the "
                                 "run folder (WANDB_DIR elsewhere) and `wandb sync` it later")
    if "mlflow" in names:
        from urllib.parse import urlparse

        import mlflow

        uri = mlflow.get_tracking_uri()
        scheme = urlparse(uri).scheme
        file_store = scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt")  # a Windows drive letter
        refuses = hasattr(getattr(mlflow, "environment_variables", None), "MLFLOW_ALLOW_FILE_STORE")
        # a database store (MLflow 3's default is sqlite) needs SQLAlchemy and Alembic, which mlflow-skinny lacks
        database = scheme.split("+")[0] in ("sqlite", "postgresql", "mysql", "mssql")
        import importlib.util

        missing = [m for m in ("sqlalchemy", "alembic") if importlib.util.find_spec(m) is None]
        if file_store and refuses and not _truthy("MLFLOW_ALLOW_FILE_STORE"):
            other = ("a database (MLFLOW_TRACKING_URI=sqlite:///mlflow.db)" if not missing else
                     "a database (MLFLOW_TRACKING_URI=sqlite:///mlflow.db, after pip install mlflow)")
            raise ValueError(f"--report-to mlflow: MLFLOW_TRACKING_URI={uri} is a file store, which this MLflow "
                             f"({mlflow.__version__}) refuses unless MLFLOW_ALLOW_FILE_STORE=true; set that, or use "
                             f"{other} or a tracking server")
        if database and missing:
            raise ValueError(f"--report-to mlflow: the tracking URI {uri} is a database store, which needs "
                             f"{' and '.join(missing)} (not installed: mlflow-skinny has neither); pip install mlflow, "
                             "or set MLFLOW_TRACKING_URI to a tracking server, or to a file: folder with "
                             "MLFLOW_ALLOW_FILE_STORE=true")


@contextlib.contextmanager
def torch_settings_given_back() -> Iterator[None]:
    """Around a run called from Python (a notebook, a sweep script calling one run after another): the process-wide
    torch settings a run sets for itself (``--torch-threads``, ``--cudnn-benchmark``) are given back when it returns or
    fails, so a later run, or the caller's own code, does not take them over."""
    threads, benchmark = torch.get_num_threads(), torch.backends.cudnn.benchmark
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.backends.cudnn.benchmark = benchmark


def _accelerate_state_for(cpu: bool, mixed_precision: str) -> None:
    """accelerate keeps one state a process: a second run in the same process (a notebook, a sweep script) with
    another ``--mixed-precision`` was refused ("AcceleratorState has already been initialized and cannot be
    changed, restart your runtime"), as was ``--device cpu`` after a GPU run, and a GPU run after a ``--device cpu``
    one went on the CPU. In a process of one, a state made for other settings is reset; a launch of several
    processes keeps its state (its runs share the launch's settings)."""
    from accelerate.state import AcceleratorState, PartialState

    held = AcceleratorState._shared_state
    if "_mixed_precision" not in held or PartialState._shared_state.get("num_processes", 1) > 1:
        return
    device = getattr(held.get("device"), "type", "cpu")
    other_device = device != "cpu" if cpu else device == "cpu" and gpu_available()
    if held["_mixed_precision"] != mixed_precision or other_device:
        AcceleratorState._reset_state(reset_partial_state=True)


def bar_interval(terminal: float = 0.1, elsewhere: float = 10.0) -> float:
    """The seconds between a progress bar's redraws (tqdm's ``mininterval``): ``terminal`` (tqdm's 0.1 for the
    training bars) on a terminal; ``elsewhere`` where stderr is a file or a pipe (a cluster job's log, a notebook's
    output), which keeps every redraw: at 0.1 s, up to 36,000 an hour of run."""
    try:
        on_terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):  # no stderr, or a closed one
        on_terminal = False
    return terminal if on_terminal else elsewhere


def _cgroups(controller: str, v1_mounts: tuple[str, ...], proc_cgroup: str, root: str) -> list[tuple[bool, Path]]:
    """The folders of this process's cgroups that hold ``controller``'s files, the process's own first and then
    those above it, each with whether it is cgroup v2: the v2 entry (``0::PATH``) under ``root``, a v1 entry naming
    ``controller`` under the first of ``root/MOUNT`` there (a container's own cgroup is the root of its view, where
    PATH is not found). Empty where /proc/self/cgroup cannot be read (not Linux)."""
    try:
        lines = Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        number, controllers, path = parts
        v2 = number == "0" and controllers == ""
        if v2:
            top = Path(root)
        elif controller in controllers.split(","):
            top = next((Path(root) / m for m in v1_mounts if (Path(root) / m).is_dir()), None)
            if top is None:
                continue
        else:
            continue
        folder = top / path.lstrip("/")
        if not folder.is_dir():
            folder = top
        found.append((v2, folder))
        while folder != top and top in folder.parents:
            folder = folder.parent
            found.append((v2, folder))
    return found


def _read_int(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None  # "max": no limit


def _stat(path: Path) -> dict[str, int]:
    try:
        pairs = (line.split() for line in path.read_text().splitlines())
        return {p[0]: int(p[1]) for p in pairs if len(p) == 2 and p[1].isdigit()}
    except OSError:
        return {}


def cgroup_memory_room(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> int | None:
    """Bytes this process's memory cgroup still lets it allocate (a Slurm job's ``--mem``, a container's or a
    systemd unit's limit, which the host's free memory does not show): the tightest limit of its cgroup and those
    above it, less what each uses besides the file cache it can give back (``inactive_file``). None where no limit
    is set or none can be read (no cgroup, not Linux). cgroup v2 (``memory.max``) and v1 (``memory.limit_in_bytes``;
    v1 writes "no limit" as about 2**63)."""
    rooms = []
    for v2, folder in _cgroups("memory", ("memory",), proc_cgroup, root):
        stat = _stat(folder / "memory.stat")
        if v2:
            limit, used = _read_int(folder / "memory.max"), _read_int(folder / "memory.current")
            cache = stat.get("inactive_file", 0)
        else:
            limit, used = _read_int(folder / "memory.limit_in_bytes"), _read_int(folder / "memory.usage_in_bytes")
            cache = stat.get("total_inactive_file", stat.get("inactive_file", 0))
        if limit is not None and used is not None and limit < 2**60:
            rooms.append(limit - used + cache)
    return max(0, min(rooms)) if rooms else None


def cpu_quota(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> float | None:
    """The CPUs per unit of time the process's cgroup allows (a container's ``--cpus``, a Kubernetes CPU limit, a
    systemd ``CPUQuota``): the tightest quota / period of its cgroup and those above it (v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``). None where none is set or none can be read. Unlike a Slurm job's
    CPUs (an affinity), a quota leaves every core visible: threads beyond it wait their turn."""
    quotas = []
    for v2, folder in _cgroups("cpu", ("cpu", "cpu,cpuacct"), proc_cgroup, root):
        try:
            if v2:
                quota, period = (folder / "cpu.max").read_text().split()[:2]
            else:
                quota = (folder / "cpu.cfs_quota_us").read_text().strip()
                period = (folder / "cpu.cfs_period_us").read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0:
                quotas.append(int(quota) / int(period))
        except (OSError, ValueError):
            continue
    return min(quotas) if quotas else None


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a Slurm job's CPUs, ``taskset``), not the machine's count,
    which ``os.cpu_count()`` gives (all 64 of a node for a job given 4), and no more than its cgroup's CPU quota
    (:func:`cpu_quota`, rounded up)."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cpu_quota()
    if quota is not None:
        cpus = min(cpus, math.ceil(quota))
    return max(1, cpus)


def threads_within_the_cpu_limit() -> None:
    """Where neither ``--torch-threads`` nor ``OMP_NUM_THREADS`` chose torch's thread count: no more threads than
    :func:`usable_cpus`. torch follows the affinity but not a cgroup's CPU quota (a container's ``--cpus``), and
    threads beyond the quota slow the run down (a convolution step under a 1-CPU quota with 2 cores visible was
    fastest with 1 thread, slower with 2 and slower still with 8; the times are in
    docs/lab_notes/2026-12-06_runs_under_a_schedulers_limits.md)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return
    cap = usable_cpus()
    if torch.get_num_threads() > cap:
        torch.set_num_threads(cap)


def gpu_available() -> bool:
    """Whether accelerate's device here would be a GPU (CUDA, or an Apple GPU through MPS)."""
    return torch.cuda.is_available() or (torch.backends.mps.is_available() and torch.backends.mps.is_built())


def nvidia_gpus_here() -> int:
    """How many NVIDIA GPUs this machine's driver lists (/proc/driver/nvidia/gpus, or /dev/nvidiaN), whatever torch
    makes of them; 0 where there is none or no NVIDIA driver."""
    gpus = Path("/proc/driver/nvidia/gpus")
    try:
        listed = len(list(gpus.iterdir())) if gpus.is_dir() else 0
    except OSError:
        listed = 0
    return listed or len([p for p in Path("/dev").glob("nvidia[0-9]*")])


def say_if_the_gpu_goes_unused(cpu: bool) -> None:
    """One warning where a run on its default device (not ``--device cpu``) trains on the CPU of a machine whose
    NVIDIA driver lists GPUs: torch cannot use them, most often because the torch installed is a CPU-only build (a
    CPU wheel, the default of some package indexes), or CUDA_VISIBLE_DEVICES hides them. Without it the run goes
    on at CPU speed, which for the papers' sizes is hours instead of minutes, and says nothing."""
    if cpu or gpu_available() or os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes"):
        return
    found = nvidia_gpus_here()
    if not found:
        return
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES")
    if torch.version.cuda is None:
        why = (f"the torch installed ({torch.__version__}) is a CPU-only build; install a CUDA build into the "
               "environment (docs/getting_started.md, \"Which torch\")")
    elif hidden is not None and hidden.strip() in ("", "-1"):
        why = f"CUDA_VISIBLE_DEVICES={hidden!r} hides them"
    else:
        why = (f"torch {torch.__version__} (CUDA {torch.version.cuda}) cannot use them (torch.cuda.is_available() "
               "is False: the driver may be older than that CUDA)")
    warnings.warn(f"this machine has {found} NVIDIA GPU(s) but the run trains on the CPU: {why}; --device cpu "
                  "chooses the CPU and says nothing", UserWarning, stacklevel=3)


def make_accelerator(*, cpu: bool, mixed_precision: str = "no", report_to: Iterable[str] = ("tensorboard",),
                     one_process: str | None = None, **kwargs):
    """The ``accelerate.Accelerator`` of a training run, with the experiment trackers of ``report_to`` (wandb,
    mlflow: accelerate's ``log_with``; TensorBoard is the harness's own writer). Refuses what accelerate would
    otherwise accept silently: ``--mixed-precision fp16`` on a CPU (accelerate then runs float32 and says
    nothing; bf16 autocast works there), a launch of several processes that runs this one alone
    (:func:`shared_losses.distributed.check_launch`, e.g. ``accelerate launch --cpu --num_processes 2``) and a
    tracker whose set-up would fail once the run has started (:func:`check_tracker_setup`). Raises a ValueError of
    one line before anything is written. ``one_process``: the refusal of a program that runs as one process only,
    given for any launch of several processes (also one that runs this process alone), instead of the command
    that would start several."""
    from accelerate import Accelerator

    log_with = [n for n in check_report_to(report_to) if n in ACCELERATE_TRACKERS]
    check_tracker_setup(log_with)
    if mixed_precision == "fp16" and (cpu or not gpu_available()):
        raise ValueError("--mixed-precision fp16 needs a GPU: on the CPU accelerate would run float32 without "
                         "saying so; use --mixed-precision bf16 (CPU autocast) or no")
    say_if_the_gpu_goes_unused(cpu)
    _accelerate_state_for(cpu, mixed_precision)
    accelerator = Accelerator(cpu=cpu, mixed_precision=mixed_precision, log_with=log_with or None, **kwargs)
    from ..distributed import check_launch, launch_problem

    if one_process is not None:
        if accelerator.num_processes > 1 or launch_problem(accelerator.num_processes) is not None:
            raise ValueError(one_process)
        return accelerator
    check_launch(accelerator.num_processes)  # a launch asked for several processes but this one runs alone
    return accelerator


def read_json_file(path: str | os.PathLike, what: str = "file") -> Any:
    """The JSON in ``path``; a ValueError naming the file (and ``what`` it should be) if it is damaged."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as err:
        raise ValueError(f"{path} is damaged (not UTF-8 text: {err.reason}); it should be the {what}") from None
    except json.JSONDecodeError as err:
        # json's "Invalid control character at" ends in "at" itself
        raise ValueError(f"{path} is damaged (not valid JSON: {err.msg.removesuffix(' at')} at line {err.lineno}, "
                         f"column {err.colno}); "
                         f"it should be the {what}") from None
