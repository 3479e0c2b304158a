"""Command-line entry points: a user's mistake ends in one line that names it, not a traceback.

``run_cli(main)`` calls ``main()``; the errors our code raises for bad input (a wrong option value, a
missing or existing path, a corrupt checkpoint or data file: ``ValueError`` and its subclasses such
as ``CheckpointError``, ``CorpusError`` and ``DataError``, ``FileNotFoundError``,
``FileExistsError``) are printed as ``error: ...`` on stderr and the process exits with status 2,
argparse's status for a usage error. Anything else (a bug, an out-of-memory) keeps its traceback.
A run that cannot go on because a process it depends on ended or its checkpoint could not be written
(:class:`shared_losses.training.runtime.RunStopped`: an environment's worker killed, a full disk) prints one
``error:`` line saying where it stopped and how to continue, and exits with status 1. A run stopped by
SIGINT/SIGTERM (:class:`shared_losses.training.runtime.RunInterrupted`: it wrote a checkpoint first) prints one
line, ``interrupted at ...; continue with --resume``, and exits with status 130.
A write the file system refuses anywhere in a command (a full disk, a quota, a file-size limit, a read-only file
system: :data:`shared_losses.training.runtime.WRITE_ERRNOS`) prints one ``error:`` line naming the file and what to
do, and exits with status 1; a path that loops through symbolic links or whose name is too long for the file system
(ELOOP, ENAMETOOLONG) is one ``error:`` line naming it, status 2; other OSErrors (a read can meet them too) keep their
traceback.
Output read by a program that stops reading early (``--help | head``) ends the command quietly with status 141,
as a shell reports a process ended by SIGPIPE, instead of a ``BrokenPipeError`` traceback.
A second Ctrl-C (which stops at once, without a checkpoint) prints one line too and exits with 130.
``CONTRASTIVE_SUITE_TRACEBACK=1`` shows the traceback for user errors too.

A process of a multi-process run (``torchrun``, ``accelerate launch``: a ``torch.distributed`` group of
more than one process is up) ends in all three cases with ``os._exit`` after flushing its output and
running its ``atexit`` handlers, i.e. without the interpreter's finalisation. Gloo's worker threads
release a finished collective's tensors a moment after the collective returns, and that needs the GIL;
if the interpreter is being finalised by then, the thread is killed inside a destructor and the process
aborts ("terminate called without an active exception", SIGABRT), so a run that did all its work was
reported failed by torchrun. ``destroy_process_group`` does not prevent it: a DistributedDataParallel
model keeps the group and its threads alive. A process with no group, or a group of one, exits normally
(a group of one is destroyed first), unless the command read a stream whose native threads abort the same way when
torn down at finalisation (:func:`end_without_finalising`: pyarrow's Parquet scanner, behind a ``datasets``
stream that a run left part-read): then it ends as a multi-process one does.

``config_from_cli(Config, PRESETS, argv)`` parses a trainer's command line into its configuration
dataclass with tyro and gives every trainer the same ``--preset NAME``: the preset's values become the
defaults that explicit options override, ``--help`` lists the presets (each application declares its
``PRESETS`` beside its configuration, in its ``config.py``) and, in ``sections``, the entries of the
registries its options choose from (:meth:`shared_losses.training.registry.Registry.help_text`); an unknown preset is
a one-line error naming the choices.

Every tyro command of the suite parses through :func:`parse_dataclass` (or :func:`parse_subcommands`): tyro with
each option's help the field's docstring as paragraphs (:func:`reflow`), not broken where the source file wraps it.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import errno
import inspect
import os
import re
import shlex
import sys
import textwrap
import types
import typing
import warnings
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, TypeVar

T = TypeVar("T")

#: Errors of the user's input or environment: one ``error:`` line (a file or folder the user may not read or write
#: included: PermissionError, which names the path).
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError)


#: Where the suite's own code lives (the four packages and scripts/): a warning raised there is a message to the user.
OWN_CODE = tuple(str(Path(__file__).resolve().parents[2] / d) + os.sep
                 for d in ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "scripts"))
_PYTHONS_FORMAT = warnings.formatwarning


def _warning_line(message, category, filename, lineno, line=None) -> str:
    if os.path.realpath(filename).startswith(OWN_CODE):
        return f"warning: {message}\n"
    return _PYTHONS_FORMAT(message, category, filename, lineno, line)


def show_warnings_as_lines() -> None:
    """Show the suite's own warnings (rows a data file skipped, an episode started again, ...) as one ``warning:
    ...`` line on stderr, without the file, line and source line Python adds to them; a library's warnings keep
    Python's form, and so do ours under CONTRASTIVE_SUITE_TRACEBACK=1 (to find where one was raised). Only the
    text changes (``warnings.formatwarning``): where warnings go, and whether they are recorded (pytest's
    ``warns``), is as before."""
    if not os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
        warnings.formatwarning = _warning_line


#: Why this command's process ends without the interpreter's finalisation even when it runs alone
#: (:func:`end_without_finalising`); and whether the ``main`` that :func:`run_cli` runs is the process's program
#: (``python -m MODULE``, ``python SCRIPT.py``), not a function called by other code (a test, a notebook).
_NO_FINALISING: set[str] = set()
_COMMAND = {"main_program": False}


def end_without_finalising(reason: str) -> None:
    """Have the command this process runs end as a process of a multi-process run does (:func:`end_process`: flush,
    ``atexit`` handlers, ``os._exit``), because ``reason`` started native threads that may abort the process when the
    interpreter's finalisation tears them down ("terminate called without an active exception", SIGABRT, after all
    the work was written). nlp_qt's corpus reader calls it when it opens a ``datasets`` stream, whose Parquet reader
    (pyarrow's dataset scanner; apache/arrow#45214, huggingface/datasets#7566) ended processes so now and then: 1 of
    60 scripts that dropped a part-read stream (as a run stopped at ``--max-steps`` before the corpus's end drops
    it), and once a test's script that read hub corpora to their end (not again in 16 reruns). Only a command's own
    process ends so (:func:`run_cli` with the program's ``main``); code that called the function goes on as
    before."""
    _NO_FINALISING.add(reason)


#: What a Ctrl-C says by default: the command trains a run.
STOPPED_RUN = ("stopped at once (Ctrl-C): work since the last checkpoint is lost; a run continues from its last "
               "checkpoint with --resume")


#: OSErrors of a path as the user gave it (a checked option's path would have been refused by name before), in words
_PATH_ERRNOS = {
    errno.ELOOP: "too many levels of symbolic links (links that lead back to themselves): fix or remove the link",
    errno.ENAMETOOLONG: "the name is too long for the file system (at most 255 bytes a name, with what the command "
                        "adds for its temporary copy, such as a leading . and .tmp): choose a shorter name",
}


def run_cli(main: Callable[[], Any], interrupted: str = STOPPED_RUN) -> Any:
    """Call ``main()`` as a command: user errors as one ``error:`` line and status 2, a run stopped by a process it
    depends on as one ``error:`` line and status 1, a stopped run as one line and status 130 (see the module's
    docstring); returns what ``main`` returns. ``interrupted``: the line for a Ctrl-C that reaches ``main`` (a
    command that trains nothing, an export say, says what became of its output instead of a run's checkpoint)."""
    from .processes import GridDetached, GridInterrupted
    from .runtime import RunInterrupted, RunStopped, is_refused_write, refused_write_words, write_refusal_hint

    _COMMAND["main_program"] = getattr(main, "__module__", None) == "__main__"
    show_warnings_as_lines()
    try:
        result = main()
    except GridDetached as err:  # a grid's jobs submitted, not waited for (--slurm-detach): done, as asked
        print(err, flush=True)
        end_process(0)
        raise SystemExit(0) from None
    except RunInterrupted as err:  # SIGINT/SIGTERM: the run wrote its checkpoint and stopped
        _exit(str(err), 130)
    except GridInterrupted as err:  # a grid's runs in progress stopped with their checkpoints
        _exit(f"\n{err}", 130)
    except RunStopped as err:  # a process the run depends on ended: its cause is outside our code
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _exit(f"error: {err}", 1)
    except KeyboardInterrupt:  # a second Ctrl-C (or one before the training loop): stop at once
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _exit(f"\n{interrupted}", 130)
    except UsageError as err:  # argparse's refusal of the command line: where it was raised says nothing more
        _exit(f"error: {err}", 2)
    except USER_ERRORS as err:
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _exit(f"error: {err}\n(CONTRASTIVE_SUITE_TRACEBACK=1 shows where it was raised)", 2)
    except MemoryError as err:  # an allocation the machine or a limit refused (a job's memory, ulimit -v): no bug
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _out_of_memory(str(err))
    except BrokenPipeError:  # the reader of our output went away (``--help | head``): end quietly, as Unix tools do
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _quiet_after_closed_pipe()
        end_process(PIPE_CLOSED)
        raise SystemExit(PIPE_CLOSED) from None
    except OSError as err:  # a write the file system refused (full, a quota, read-only): not a bug in the command
        path_words = _PATH_ERRNOS.get(err.errno)
        if path_words is not None and not os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):  # a path given: bad input
            _exit(f"error: {err.filename or 'a path'}: {path_words}", 2)
        if not is_refused_write(err) or os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        _exit(f"error: could not write {err.filename or 'a file'} ({refused_write_words(err)}): "
              f"{write_refusal_hint(err)}", 1)
    except RuntimeError as err:  # torch's out of GPU memory (torch.OutOfMemoryError is a RuntimeError)
        oom = getattr(sys.modules.get("torch"), "OutOfMemoryError", None)
        cpu = _cpu_allocation_refused(err)
        if cpu is not None and not os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            _out_of_memory(cpu)
        if oom is None or not isinstance(err, oom) or os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        text = str(err).strip()
        what = text.splitlines()[0].split(". GPU ")[0] if text else "an allocation failed"
        _exit(f"error: out of GPU memory ({what}): lower --batch-size (or the model's size), train fewer runs on this "
              "GPU at once, or use one with more memory (a run continues from its last checkpoint with --resume; "
              "CONTRASTIVE_SUITE_TRACEBACK=1 shows torch's whole message)", 1)
    # a main that returns its exit status (the table scripts: ``sys.exit(run_cli(main))``) keeps it
    end_process(result if isinstance(result, int) and not isinstance(result, bool) else 0)
    return result


PIPE_CLOSED = 128 + 13  # the status of a process ended by SIGPIPE, as a shell reports it (``yes | head``)


def _quiet_after_closed_pipe() -> None:
    """Point stdout (and stderr, when it is the closed pipe too) at the null device, so the interpreter's last
    flush at exit does not fail again on the closed pipe and print "Exception ignored"."""
    closed = []
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (BrokenPipeError, ValueError):  # the closed pipe itself; ValueError: a stream already closed
            try:
                closed.append(stream.fileno())
            except (OSError, ValueError):  # a stream with no descriptor (a test's capture): nothing to redirect
                pass
    from .runtime import point_at_null

    point_at_null(closed)


def _out_of_memory(what: str) -> None:
    """End the command with the one line of an allocation refused on the host (status 1)."""
    _exit(f"error: out of memory ({what or 'an allocation was refused'}): the machine's memory, a job's or a "
          "container's limit, or ulimit -v; use smaller sizes (batch, replay, vocabulary, data, the networks' widths) "
          "or give the process more memory (a run continues from its last checkpoint with --resume)", 1)


def _cpu_allocation_refused(err: RuntimeError) -> str | None:
    """torch's words for a host tensor it could not allocate (its RuntimeError, not Python's MemoryError: "can't
    allocate memory: you tried to allocate N bytes", or a size beyond what a tensor can hold), else None."""
    text = str(err)
    if "DefaultCPUAllocator: can't allocate memory" in text:
        return "you tried to allocate" + text.split("you tried to allocate", 1)[1].split(". Error code")[0] \
            if "you tried to allocate" in text else "torch could not allocate a tensor"
    if text.startswith("Storage size calculation overflowed"):
        return "a tensor of more elements than memory can address: " + text.splitlines()[0]
    return None


def _exit(text: str, status: int) -> None:
    """End the command with ``text`` (one write to stderr) and ``status``, without the traceback."""
    _to_stderr(text)
    end_process(status)
    raise SystemExit(status) from None


def _to_stderr(text: str) -> None:
    """Write ``text`` and its newline to stderr in one call: ``print`` writes the newline separately (stderr writes
    through), so the processes of one launch sharing a pipe could run their lines together."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _group_size() -> int:
    """Processes in the default ``torch.distributed`` group (0: none is up)."""
    if "torch" not in sys.modules:  # nothing imported torch, so no group can exist
        return 0
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 0


def end_process(code: int) -> None:
    """How a command ends with status ``code`` (see the module's docstring): in a process group of several
    processes, or a command's own process that :func:`end_without_finalising` was called in, flush, run the
    ``atexit`` handlers (``atexit._run_exitfuncs``: what a normal exit would run before finalising) and
    ``os._exit(code)``; a group of one is destroyed first; otherwise the caller goes on to exit normally."""
    size = _group_size()
    if size == 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    if size > 1 or (_NO_FINALISING and _COMMAND["main_program"]):
        import atexit

        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """argparse help for the scripts: keeps the module docstring's layout and shows every option's default, except
    where the help already says it ("(default: RUN/model)") or the option is required."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "(default" in text or action.required:
            return text
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """argparse for the scripts run through :func:`run_cli`: a usage error (an unknown option, a missing or bad
    value, ``parser.error(...)``) is one ``error: ...`` line and status 2, as every other command line of the suite,
    instead of argparse's usage block. ``--help`` is argparse's, with :class:`HelpFormatter` by default.

    Long options are read as the tyro commands of the suite read theirs: whole (no abbreviations: argparse's
    default would take ``--k 5`` as ``--kfold 5``, and an option added later would change what a short prefix
    means), and with ``_`` for ``-`` (``--max_length``, the spelling of the scripts users come from, is
    ``--max-length``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's, after :meth:`dashed`."""
        return super().parse_known_args(self.dashed(sys.argv[1:] if args is None else args), namespace)

    def dashed(self, args: Sequence[str]) -> list[str]:
        """A copy of ``args`` with each long option spelt with ``_`` (``--max_length=5``) written with ``-`` where only
        that spelling is an option of this parser; arguments after ``--`` are left as they are."""
        known = self._option_string_actions
        out = list(args)
        for i, arg in enumerate(out):
            if arg == "--":
                break
            name, eq, value = arg.partition("=")
            if name.startswith("--") and "_" in name and name not in known:
                dashed = "--" + name[2:].replace("_", "-")
                if dashed in known:
                    out[i] = dashed + eq + value
        return out

    def error(self, message: str):
        """argparse's hook for a refused command line: a :class:`UsageError` (one line through :func:`run_cli`)."""
        raise UsageError(f"{message} (see {self.prog} --help)")


def number_in(low: float | None = None, high: float | None = None, kind: type = int, open_low: bool = False,
              open_high: bool = False) -> Callable[[str], Any]:
    """An argparse ``type`` for a number of ``kind`` within [low, high] (``open_low`` / ``open_high``: the bound
    itself excluded; None: no bound): a value outside is refused by argparse in one usage line naming the option
    ("argument --steps: must be a whole number >= 1, got 0"), before anything runs."""
    what = "a whole number" if kind is int else "a number"
    bounds = ([f"{'>' if open_low else '>='} {low:g}"] if low is not None else []) + \
        ([f"{'<' if open_high else '<='} {high:g}"] if high is not None else [])
    wanted = f"{what} {' and '.join(bounds)}".strip()

    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}") from None
        if kind is float and value != value:  # NaN compares with nothing
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text!r}")
        too_low = low is not None and (value <= low if open_low else value < low)
        too_high = high is not None and (value >= high if open_high else value > high)
        if too_low or too_high:
            raise argparse.ArgumentTypeError(f"must be {wanted}, got {text}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in its "invalid ... value" fallback
    return parse


def _type_name(hint: Any) -> str:
    """``hint`` in words, for :func:`check_field_types`' message."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (typing.Union, types.UnionType):
        return " or ".join("None" if a is type(None) else _type_name(a) for a in args)
    if origin is tuple:
        return f"a tuple of {_type_name(args[0])}" if args else "a tuple"
    return {bool: "True or False", int: "a whole number (int)", float: "a number", str: "a string"}.get(
        hint, getattr(hint, "__name__", str(hint)))


def _fits(value: Any, hint: Any) -> bool | None:
    """Whether ``value`` is of the type ``hint`` (None: a type this check does not know, taken as fitting)."""
    import numbers

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return any(value == a and type(value) is type(a) for a in args) or (
            isinstance(value, str) and value in args)
    if origin in (typing.Union, types.UnionType):
        results = [True if a is type(None) and value is None else _fits(value, a) for a in args if
                   a is not type(None) or value is None]
        return any(r is None or r for r in results)
    if origin is tuple:
        if not isinstance(value, (tuple, list)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) is not False for v in value)
        return len(args) == len(value) and all(_fits(v, a) is not False for v, a in zip(value, args))
    if hint is bool:  # numpy's np.bool_ is a bool by now (_plain)
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, (str, os.PathLike))
    return None


def _plain(value: Any) -> Any:
    """``value`` with numpy's scalars (np.int64, np.float32, np.bool_; also inside a list or tuple) as Python's own,
    the same object where there is none."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)) and any(isinstance(v, np.generic) for v in value):
        return type(value)(v.item() if isinstance(v, np.generic) else v for v in value)
    return value


def check_field_types(obj: Any) -> None:
    """Refuse a configuration dataclass whose fields hold values of another type than their annotations say, in one
    ValueError naming each such field: what a configuration built in code gets (``Config(batch_size="16")``) instead
    of a TypeError from deep inside a comparison, or a float step count that fails later. A whole number passes for a
    float and a path for a string; a list passes for a tuple; types other than bool, int, float, str, Literal,
    Optional and tuple are not checked. numpy's numbers (a sweep over ``np.arange``) are turned into Python's in
    place: kept as they were, they passed this check and failed at the run's end, when config.json and policy.pt
    were written (JSON takes no np.int64)."""
    hints = typing.get_type_hints(type(obj))
    wrong = []
    for field in dataclasses.fields(obj):
        if not field.init or field.name not in hints:
            continue
        value = _plain(getattr(obj, field.name))
        if value is not getattr(obj, field.name):  # numpy's numbers as Python's (config.json, comparisons, torch)
            setattr(obj, field.name, value)
        if _fits(value, hints[field.name]) is False:
            wrong.append(f"{field.name} must be {_type_name(hints[field.name])}, got {value!r} "
                         f"({type(value).__name__})")
    if wrong:
        raise ValueError(f"invalid {type(obj).__name__}: " + "; ".join(wrong))


def field_default(field: dataclasses.Field) -> Any:
    """A dataclass field's default value (its factory called), or ``dataclasses.MISSING`` where it has none."""
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return field.default


def preset_config(config_cls: type[T], presets: Mapping[str, Mapping[str, Any]], preset: str | None,
                  fields: Mapping[str, Any]) -> T:
    """A ``config_cls`` with ``preset``'s values, then ``fields``: what ``--preset NAME`` and options do on the
    command line, for a configuration made in code (``Config(preset=NAME)`` records the name only). An unknown
    preset is a ValueError naming the choices."""
    if preset is not None and preset not in presets:
        raise ValueError(f"unknown preset {preset!r}; choose one of {', '.join(presets) or 'none'}")
    if "preset" in fields:
        raise ValueError("give the preset as preset_config's first argument, not among the fields")
    named = {"preset": preset} if preset is not None and any(f.name == "preset"
                                                               for f in dataclasses.fields(config_cls)) else {}
    return config_cls(**{**(presets[preset] if preset is not None else {}), **fields}, **named)


def check_preset_applied(cfg: Any, presets: Mapping[str, Mapping[str, Any]], how: str) -> None:
    """Refuse a configuration that names a preset (its field ``preset``) but holds the class's defaults where the
    preset sets other values: a dataclass made in code (``Config(preset="cpu", task=...)``) takes the name only, so
    the run trained with the class's defaults and recorded the preset's name in config.json. The values that tell
    are the preset's fields whose value differs from the class's default; a configuration is refused when more of
    them hold the class's default than the preset's value (the command line's, one made with ``how`` and one read
    back from a run hold the preset's values but where options were given). ``how``: the call that applies a
    preset, for the message."""
    name = getattr(cfg, "preset", None)
    if name is None or name not in presets:
        return
    defaults = {f.name: field_default(f) for f in dataclasses.fields(cfg)}
    defaults = {k: v for k, v in defaults.items() if v is not dataclasses.MISSING}
    telling = {k: v for k, v in presets[name].items() if k in defaults and defaults[k] != v}
    at_default = {k: v for k, v in telling.items() if getattr(cfg, k) == defaults[k]}
    if len(at_default) > sum(getattr(cfg, k) == v for k, v in telling.items()):
        shown = ", ".join(f"{k} {getattr(cfg, k)!r} (the preset's: {v!r})" for k, v in list(at_default.items())[:3])
        raise ValueError(f"preset {name!r} is named but {len(at_default)} of the {len(telling)} values it sets hold "
                         f"the class's defaults ({shown}{', ...' if len(at_default) > 3 else ''}): a configuration "
                         f"made directly takes the preset's name only; make it with {how}, which sets the preset's "
                         "values and then yours")


def examples_from(doc: str | None) -> str:
    """The command lines of a script's docstring (its indented lines that start with ``python``, ``.venv/bin/python``
    or ``bash``, comments kept), as an ``examples:`` block for its ``--help`` (argparse's ``epilog`` with a raw
    formatter, or the end of a tyro description); empty when the docstring has none."""
    lines = [line.rstrip() for line in (doc or "").splitlines()
             if re.match(r"^\s{2,}(python3?|\.venv/bin/python|bash)\s", line)]
    return ("examples:\n" + "\n".join(lines)) if lines else ""


class UsageError(ValueError):
    """A command line argparse refused (see :class:`ArgumentParser`); printed by :func:`run_cli` as one line."""


# --- presets: one ``--preset NAME`` for every trainer ---------------------------------------------------------

def option_name(arg: str) -> str | None:
    """The option ``arg`` names (``--max-steps`` for ``--max_steps=3``: tyro and :class:`ArgumentParser` read ``_``
    as ``-``), or None for a value."""
    return arg.split("=", 1)[0].replace("_", "-") if arg.startswith("--") and arg != "--" else None


def option_given(argv: Sequence[str], *flags: str) -> bool:
    """Whether one of ``flags`` is on the command line ``argv`` (``--flag VALUE``, ``--flag=VALUE`` or a bare
    ``--flag``; in either spelling, ``--max-steps`` or ``--max_steps``; not after ``--``)."""
    return option_value(argv, *flags, given=True) is not None


def option_value(argv: Sequence[str], *flags: str, given: bool = False) -> str | None:
    """The value of the last of ``flags`` on the command line ``argv`` (``--flag VALUE`` or ``--flag=VALUE``, in
    either spelling, ``--max-steps`` or ``--max_steps``; not after ``--``), else None. With ``given``, a bare
    ``--flag`` counts too (its value is then ``""``)."""
    wanted = {f.replace("_", "-") for f in flags}
    value = None
    for i, a in enumerate(argv):
        if a == "--":
            break
        if option_name(a) not in wanted:
            continue
        if "=" in a:
            value = a.split("=", 1)[1]
        elif i + 1 < len(argv) and argv[i + 1] != "--":
            value = argv[i + 1]
        elif given:
            value = ""
    return value


def _preset_on_command_line(argv: Sequence[str], presets: Mapping[str, Mapping[str, Any]]) -> str | None:
    """The ``--preset`` named on the command line (the last one, as argparse reads it; ``None`` if absent), checked."""
    if argv and argv[-1] == "--preset":
        raise ValueError(f"--preset needs a value: one of {', '.join(presets)}")
    name = option_value(argv, "--preset")
    if name is None or name == "None":
        return None
    if name not in presets:
        raise ValueError(f"unknown --preset {name!r}; choose one of {', '.join(presets)}")
    return name


def _as_option(field: str, value: Any) -> str:
    """``field = value`` in its command-line spelling: ``--batch-size 64``, ``--save-video`` / ``--no-save-video``."""
    flag = "--" + field.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else "--no-" + flag[2:]
    if isinstance(value, float):
        short = f"{value:g}"
        return f"{flag} {short if float(short) == value else repr(value)}"
    if isinstance(value, (list, tuple)):
        return " ".join([flag, *(shlex.quote(str(v)) for v in value)])
    return f"{flag} {shlex.quote(str(value))}"


def presets_help(presets: Mapping[str, Mapping[str, Any]], width: int = 100) -> str:
    """The presets as ``--help`` shows them: each name, then the options it sets, in their command-line spelling."""
    import textwrap

    lines = ["presets (--preset NAME: the preset's values become the defaults; options given on the command line win):"]
    pad = max((len(n) for n in presets), default=0) + 4
    for name, fields in presets.items():
        sets = " ".join(_as_option(k, v) for k, v in fields.items())
        lines += textwrap.wrap(sets, width=width, initial_indent=f"  {name}".ljust(pad), subsequent_indent=" " * pad,
                               break_on_hyphens=False, break_long_words=False)
    return "\n".join(lines)


def config_from_cli(config_cls: type[T], presets: Mapping[str, Mapping[str, Any]], argv: Sequence[str] | None = None,
                    description: str | None = None, *, default_preset: Callable[[list[str]], str | None] | None = None,
                    finish: Callable[[T, list[str]], T] | None = None, sections: Sequence[str] = (),
                    prog: str | None = None) -> T:
    """Parse the command line into ``config_cls`` (a dataclass) with tyro, ``--preset NAME`` included.

    ``presets`` maps each preset's name to the fields it sets (declared beside the configuration, in the
    application's ``config.py``). The named preset's values become the defaults, so every option given on the
    command line wins over it; ``--help`` lists the presets and what each sets (after ``description``, by
    default the class's docstring, and ``sections``: more text for the top of ``--help``); an unknown preset
    is a ``ValueError`` naming the choices (one line through :func:`run_cli`). A configuration with a field
    ``preset`` records the name there (tyro then lists ``--preset`` among the options; its type should be a
    ``Literal`` of the presets' names); without one, ``--preset NAME`` is taken off the command line here.

    Hooks: ``default_preset(argv)`` names the preset to use when the command line names none (or returns
    None); ``finish(config, argv)`` returns the parsed configuration adjusted (``argv`` tells which options
    were given: :func:`option_given`). ``prog`` is the command as ``--help``'s usage line names it (``python -m
    rl_curl.train``; default: the script's path, which ``python -m`` makes a full path to the module's file)."""
    args = respell_choices(config_cls, list(sys.argv[1:] if argv is None else argv))
    refuse_other_names(config_cls, args)
    name = _preset_on_command_line(args, presets)
    if name is None and default_preset is not None and not option_given(args, "--preset"):  # --preset None: none
        name = default_preset(args)
        if name is not None and name not in presets:
            raise ValueError(f"default preset {name!r} is not one of {', '.join(presets)}")
    has_field = any(f.name == "preset" for f in dataclasses.fields(config_cls))
    if not has_field:  # take --preset NAME / --preset=NAME off the command line
        kept, skip = [], False
        for a in args:
            if skip:
                skip = False
            elif a == "--preset":
                skip = True
            elif not a.startswith("--preset="):
                kept.append(a)
        args = kept
    default = preset_config(config_cls, presets, name, {}) if name is not None else None
    text = reflow(description if description is not None else (inspect.getdoc(config_cls) or ""))
    text = "\n\n".join(t.strip("\n") for t in (text, *sections, presets_help(presets) if presets else "") if t)
    cfg = parse_dataclass(config_cls, args=args, default=default, description=text, prog=prog)
    return finish(cfg, args) if finish is not None else cfg


def respell_choices(config_cls: type, args: Sequence[str]) -> list[str]:
    """``args`` with a choice of a ``Literal`` option spelled with ``-`` for ``_`` or the other way round taken as
    the choice (``--log-floor min_negative`` where the choices are ``min-negative`` and ``none``: rl_curl spells it
    one way, nlp_qt the other, and a command copied from one was refused by the other)."""
    hints = typing.get_type_hints(config_cls)
    choices = {}
    for f in dataclasses.fields(config_cls):
        hint = hints.get(f.name)
        if typing.get_origin(hint) is typing.Literal and all(isinstance(c, str) for c in typing.get_args(hint)):
            choices[f"--{f.name.replace('_', '-')}"] = set(typing.get_args(hint))

    def respelled(flag: str, value: str) -> str:
        known = choices.get(flag.replace("_", "-"), ())
        if value in known:
            return value
        other = [c for c in known if c.replace("_", "-") == value.replace("_", "-")]
        return other[0] if len(other) == 1 else value

    out, args = [], list(args)
    for i, arg in enumerate(args):
        if arg == "--":
            return out + args[i:]
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            out.append(f"{flag}={respelled(flag, value)}")
        elif i and args[i - 1].startswith("--") and "=" not in args[i - 1] and not arg.startswith("--"):
            out.append(respelled(args[i - 1], arg))
        else:
            out.append(arg)
    return out


def refuse_other_names(config_cls: type, args: Sequence[str]) -> None:
    """Options of the tools a user comes from (the official code's flags, transformers.Trainer's arguments) that are
    not this configuration's: one :class:`UsageError` naming what gives the same here, from the class's
    ``OTHER_NAMES`` (``{"--learning-rate": "--lr"}``: keys with dashes; an underscore spelling is matched too),
    before tyro refuses them in a box that names no replacement. ``SAME_NAME_OTHER_MEANING`` (the exact spelling ->
    a warning): an option this configuration has under a name another tool gives another meaning."""
    other = {k.replace("_", "-").lower(): v for k, v in getattr(config_cls, "OTHER_NAMES", {}).items()}
    same = getattr(config_cls, "SAME_NAME_OTHER_MEANING", {})
    if not other and not same:
        return
    fields = {f"--{f.name.replace('_', '-')}" for f in dataclasses.fields(config_cls)}
    fields |= {f"--no-{name[2:]}" for name in fields}
    for arg in args:
        if arg == "--":
            break
        if not arg.startswith("--"):
            continue
        name = arg.split("=", 1)[0]
        key = name.replace("_", "-")
        if key.lower() in other and key not in fields:
            raise UsageError(f"{name} is not an option here: {other[key.lower()]} (see --help)")
        if name in same:
            warnings.warn(f"{name}: {same[name]}", UserWarning, stacklevel=3)


# --------------------------------------------------------------------------------------------------------------
# --help from the fields' docstrings, as paragraphs
# --------------------------------------------------------------------------------------------------------------

_LIST_ITEM = re.compile(r"([-*\u2022]|\d+[.)])\s")  # "- ", "* ", "• ", "1. ", "2) " begin a line of their own


def reflow(doc: str) -> str:
    """A docstring as ``--help`` text: each paragraph (paragraphs are separated by blank lines) on one line, for
    the terminal to wrap, and each list item (a line starting with ``- ``, ``* ``, ``1. ``) on a line of its own;
    an indented paragraph (example commands) is kept as it is. The source's line breaks are where the source file
    wraps, not where the help should."""
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", inspect.cleandoc(doc)):
        if all(line[:1] in (" ", "\t") for line in block.split("\n") if line.strip()):
            paragraphs.append(block.rstrip())
            continue
        lines: list[str] = []
        for raw in block.split("\n"):
            line = raw.strip()
            if lines and not _LIST_ITEM.match(line):
                lines[-1] += " " + line
            elif line:
                lines.append(line)
        if lines:
            paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of a dataclass (``x: int = 0`` followed by ``\"\"\"...\"\"\"``), read from the
    source of the class and of its dataclass bases (a subclass's wins); fields without one are left out."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):  # no source (made at run time, a frozen build)
            continue
        body = next((n.body for n in tree.body if isinstance(n, ast.ClassDef)), [])
        for node, after in zip(body, body[1:]):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and isinstance(after, ast.Expr)
                    and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
                docs[node.target.id] = after.value.value
    return docs


def _with_help(cls: type) -> type:
    """A dataclass with ``cls``'s fields (types, defaults) whose help is each field's docstring reflowed
    (:func:`reflow`), given to tyro as ``tyro.conf.arg(help=...)``. tyro reads the docstrings itself but keeps every
    line break of the source (its test for a list item sees the indentation of the continuation lines), so a
    help text was broken where the source wraps, then again where the terminal does."""
    import tyro

    hints = typing.get_type_hints(cls, include_extras=True)
    docs = field_docs(cls)
    specs = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        typ = hints.get(f.name, f.type)
        if f.name in docs:
            typ = typing.Annotated[typ, tyro.conf.arg(help=reflow(docs[f.name]))]
        default: dict[str, Any] = {}
        if f.default is not dataclasses.MISSING:
            default["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default["default_factory"] = f.default_factory
        specs.append((f.name, typ, dataclasses.field(**default)))
    made = dataclasses.make_dataclass(cls.__name__, specs)
    made.__module__ = cls.__module__
    if cls.__doc__ != cls.__name__ + str(inspect.signature(cls)).replace(" -> None", ""):  # not dataclass's stand-in
        made.__doc__ = reflow(cls.__doc__ or "")  # the description tyro prints
    return made


def _init_values(obj: Any, cls: type) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls) if f.init}


def _prog() -> str | None:
    """How the running program was started, for its usage line: ``python -m rl_curl.evaluate`` for a module run with
    ``-m`` (whose ``sys.argv[0]`` is the module's file path, which argparse would show); None (argparse's own
    choice, the script's name) otherwise."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None and spec.name else ""
    # one of the suite's (a command parsed in a process that `python -m pytest` started is not pytest)
    return f"python -m {name}" if name.split(".")[0] in ("shared_losses", "rl_curl", "nlp_qt", "fewshot") else None


def parse_dataclass(cls: type[T], args: Sequence[str] | None = None, default: T | None = None, **tyro_kw: Any) -> T:
    """``tyro.cli(cls, args=args, default=default, **tyro_kw)`` with each field's help its docstring as
    paragraphs (:func:`reflow`); returns a ``cls`` (made from the parsed values, so its ``__post_init__`` checks
    run once, as with tyro). Help comes from docstrings only: a field documented by a ``#`` comment (which tyro
    would read) has none here."""
    import tyro

    made = _with_help(cls)
    start = None if default is None else made(**_init_values(default, cls))
    parsed = tyro.cli(made, args=args, default=start, **{"prog": _prog(), **tyro_kw})
    return cls(**_init_values(parsed, made))


def parse_subcommands(classes: Mapping[str, type], args: Sequence[str] | None = None, **tyro_kw: Any) -> Any:
    """``tyro.extras.subcommand_cli_from_dict(classes, args=args, ...)`` with the fields' help as in
    :func:`parse_dataclass`; returns an instance of the chosen class."""
    import tyro

    made = {name: _with_help(cls) for name, cls in classes.items()}
    parsed = tyro.extras.subcommand_cli_from_dict(made, args=args, **{"prog": _prog(), **tyro_kw})
    for name, cls in classes.items():
        if isinstance(parsed, made[name]):
            return cls(**_init_values(parsed, made[name]))
    return parsed
