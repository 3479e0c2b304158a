"""Time the test suite's commands run cold (a fresh interpreter, subprocess.run) and warm (tests/warm.py: forked
from a server that imported the libraries once), alternating, in one process; prints each command's median and the
ratio cold / warm. The server's start (its imports) is timed on its own, once.

    .venv/bin/python scripts/bench_suite_commands.py --repeats 3

Run it with the suite's environment (HF_HUB_OFFLINE=1 ...; scripts/test.sh exports it) on an otherwise idle machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def commands(out: str) -> dict[str, tuple[list[str], int]]:
    """Each command (``out``: a folder of its own for this run) and the exit status it must end with."""
    py = sys.executable
    return {
        "nlp_qt.train --help": ([py, "-m", "nlp_qt.train", "--help"], 0),
        "fewshot.train, a bad --tau-plus": ([py, "-m", "fewshot.train", "--tau-plus", "1.5", "--output-dir", out], 2),
        "nlp_qt.train, 2 steps": ([py, "-m", "nlp_qt.train", "--corpus", str(ROOT / "nlp_qt/data/corpus_docstrings"),
                                   "--max-steps", "2", "--batch-size", "8", "--word-dim", "8", "--encoder-dim", "8",
                                   "--vocab-size", "300", "--no-progress", "--output-dir", out], 0),
        "scripts/table3_gpu.py --help": ([py, str(ROOT / "scripts/table3_gpu.py"), "--help"], 0),
    }


def main() -> int:
    from shared_losses.training.cli import ArgumentParser  # usage errors: one error: line

    parser = ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command each way (default 3)")
    args = parser.parse_args()
    from tests import warm

    start = time.monotonic()
    warm._context()
    print(f"server start (its imports): {time.monotonic() - start:.2f} s")
    with tempfile.TemporaryDirectory() as tmp:
        for name in commands(tmp):
            times: dict[str, list[float]] = {"cold": [], "warm": []}
            for _ in range(args.repeats):
                for how, run in (("cold", subprocess.run), ("warm", warm.run)):
                    cmd, status = commands(os.path.join(tempfile.mkdtemp(dir=tmp), "out"))[name]
                    t = time.monotonic()
                    res = run(cmd, capture_output=True, text=True, timeout=600)
                    times[how].append(time.monotonic() - t)
                    if res.returncode != status:
                        print(f"{name} ({how}) ended with status {res.returncode}, not {status}:\n{res.stderr[-2000:]}",
                              file=sys.stderr)
                        return 1
            cold, hot = (statistics.median(times[k]) for k in ("cold", "warm"))
            each = "; ".join(f"{k} " + " ".join(f"{x:.2f}" for x in times[k]) for k in ("cold", "warm"))
            print(f"{name}: cold {cold:.2f} s, warm {hot:.2f} s (medians of {args.repeats}), "
                  f"cold / warm {cold / hot:.1f}  [{each}]")
    return 0


if __name__ == "__main__":
    from shared_losses.training.cli import run_cli

    sys.exit(run_cli(main))
