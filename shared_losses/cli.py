"""Command-line entry points: a user's mistake ends in one line that names it, not a traceback.

``run_cli(main)`` calls ``main()``; the errors our code raises for bad input (a wrong option value, a
missing or existing path, a corrupt checkpoint or data file: ``ValueError`` and its subclasses such
as ``CheckpointError``, ``CorpusError`` and ``DataError``, ``FileNotFoundError``,
``FileExistsError``) are printed as ``error: ...`` on stderr and the process exits with status 2,
argparse's status for a usage error. Anything else (a bug, an out-of-memory) keeps its traceback.
A run stopped by SIGINT/SIGTERM (:class:`shared_losses.runtime.RunInterrupted`: it wrote a checkpoint
first) prints one line, ``interrupted at ...; continue with --resume``, and exits with status 130.
``CONTRASTIVE_SUITE_TRACEBACK=1`` shows the traceback for user errors too.

A process of a multi-process run (``torchrun``, ``accelerate launch``: a ``torch.distributed`` group of
more than one process is up) ends in all three cases with ``os._exit`` after flushing its output and
running its ``atexit`` handlers, i.e. without the interpreter's finalisation. Gloo's worker threads
release a finished collective's tensors a moment after the collective returns, and that needs the GIL;
if the interpreter is being finalised by then, the thread is killed inside a destructor and the process
aborts ("terminate called without an active exception", SIGABRT), so a run that did all its work was
reported failed by torchrun. ``destroy_process_group`` does not prevent it: a DistributedDataParallel
model keeps the group and its threads alive. A process with no group, or a group of one, exits normally
(a group of one is destroyed first).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable

USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError)


def run_cli(main: Callable[[], Any]) -> Any:
    from .runtime import RunInterrupted

    try:
        result = main()
    except RunInterrupted as err:  # SIGINT/SIGTERM: the run wrote its checkpoint and stopped
        print(str(err), file=sys.stderr)
        end_process(130)
        raise SystemExit(130) from None
    except USER_ERRORS as err:
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        print(f"error: {err}", file=sys.stderr)
        print("(CONTRASTIVE_SUITE_TRACEBACK=1 shows where it was raised)", file=sys.stderr)
        end_process(2)
        raise SystemExit(2) from None
    # a main that returns its exit status (the table scripts: ``sys.exit(run_cli(main))``) keeps it
    end_process(result if isinstance(result, int) and not isinstance(result, bool) else 0)
    return result


def _group_size() -> int:
    """Processes in the default ``torch.distributed`` group (0: none is up)."""
    if "torch" not in sys.modules:  # nothing imported torch, so no group can exist
        return 0
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 0


def end_process(code: int) -> None:
    """How a command ends with status ``code`` (see the module's docstring): in a process group of several processes, flush,
    run the ``atexit`` handlers (``atexit._run_exitfuncs``: what a normal exit would run before finalising)
    and ``os._exit(code)``; a group of one is destroyed and the caller goes on to exit normally."""
    size = _group_size()
    if size > 1:
        import atexit

        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    if size == 1:
        import torch.distributed as dist

        dist.destroy_process_group()


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """argparse help for the scripts: keeps the module docstring's layout and shows every option's default."""
