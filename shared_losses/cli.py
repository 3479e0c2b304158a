"""Command-line entry points: a user's mistake ends in one line that names it, not a traceback.

``run_cli(main)`` calls ``main()``; the errors our code raises for bad input (a wrong option value, a
missing or existing path, a corrupt checkpoint or data file: ``ValueError`` and its subclasses such
as ``CheckpointError``, ``CorpusError`` and ``DataError``, ``FileNotFoundError``,
``FileExistsError``) are printed as ``error: ...`` on stderr and the process exits with status 2,
argparse's status for a usage error. Anything else (a bug, an out-of-memory) keeps its traceback.
A run stopped by SIGINT/SIGTERM (:class:`shared_losses.runtime.RunInterrupted`: it wrote a checkpoint
first) prints one line, ``interrupted at ...; continue with --resume``, and exits with status 130.
``CONTRASTIVE_SUITE_TRACEBACK=1`` shows the traceback for user errors too.
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
        return main()
    except RunInterrupted as err:  # SIGINT/SIGTERM: the run wrote its checkpoint and stopped
        print(str(err), file=sys.stderr)
        raise SystemExit(130) from None
    except USER_ERRORS as err:
        if os.environ.get("CONTRASTIVE_SUITE_TRACEBACK"):
            raise
        print(f"error: {err}", file=sys.stderr)
        print("(CONTRASTIVE_SUITE_TRACEBACK=1 shows where it was raised)", file=sys.stderr)
        raise SystemExit(2) from None


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """argparse help for the scripts: keeps the module docstring's layout and shows every option's default."""
