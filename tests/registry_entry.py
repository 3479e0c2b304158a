"""What a newcomer does to add a loss to an application: one more entry in its registry (docs/adding_a_loss.md).

``run_with_entry`` copies the application's package into a temporary folder, inserts ``entry`` as the last
entry of the registry that starts with ``registry`` (the text ``NAME: dict[str, ...] = {o.name: o for o in (``),
and runs ``code`` in a fresh interpreter that imports that copy (the rest of the suite, ``shared_losses``
included, is the checkout's). Nothing else of the copy is edited, so whatever ``code`` finds working (the
command line's choices, ``--help``, validation, the loss) follows from the one entry.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_with_entry(tmp_path: Path, package: str, registry: str, entry: str, code: str) -> str:
    copy = tmp_path / "src"
    shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    path = copy / package / "objectives.py"
    text = path.read_text()
    start = text.index(f"{registry}: dict[str, ")
    end = text.index("\n)}\n", start)  # the registry's closing line
    path.write_text(text[:end] + "\n    " + entry.strip() + "," + text[end:])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(ROOT)])}
    res = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{copy / package}" in res.stdout, "the copy was not the package imported"
    return res.stdout
