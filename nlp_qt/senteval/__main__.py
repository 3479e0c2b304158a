"""``python -m nlp_qt.senteval``."""

from shared_losses.training.cli import run_cli

from .cli import main

run_cli(main)  # SentEvalDataError is a FileNotFoundError: one line, exit status 2
