"""``torchrun ... tests/fewshot/losses_per_rank.py OUT_FILE_PREFIX [fewshot.train arguments]``: fewshot.train's command
line, with each process's loss at every ``Accelerator.backward`` appended to ``PREFIX.RANK`` (the loss of that
process's share of the global batch), so that a test can compare what log.csv says with what each process trained
on. Nothing else is changed."""

import os
import sys

import accelerate

prefix = sys.argv.pop(1)
backward = accelerate.Accelerator.backward


def recording(self, loss, **kwargs):
    with open(f"{prefix}.{os.environ.get('RANK', '0')}", "a") as f:
        f.write(f"{loss.item()!r}\n")
    return backward(self, loss, **kwargs)


accelerate.Accelerator.backward = recording

from fewshot.train import main  # noqa: E402
from shared_losses.training.cli import run_cli  # noqa: E402

sys.argv[0] = "fewshot.train"
run_cli(main)
