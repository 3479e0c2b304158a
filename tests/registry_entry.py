"""What a newcomer does to add a loss to an application: one more entry in its registry (docs/adding_a_loss.md).

``run_with_entry`` copies the application's package into a temporary folder, inserts ``entry`` as the last
entry of the registry ``registry`` (the text ``NAME: Registry[...] = Registry("--option", (`` up to its closing
``)`` at the start of a line),
and runs ``code`` in a fresh interpreter that imports that copy (the rest of the suite, ``shared_losses``
included, is the checkout's). Nothing else of the copy is edited, so whatever ``code`` finds working (the
command line's choices, ``--help``, validation, the loss) follows from the one entry.
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
import typing
from pathlib import Path

import pytest
from tests import warm

ROOT = Path(__file__).resolve().parents[1]


def run_with_entry(tmp_path: Path, package: str, registry: str, entry: str, code: str) -> str:
    copy = tmp_path / "src"
    shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "data"))
    path = copy / package / "objectives.py"
    text = path.read_text()
    start = text.index(f"{registry}: Registry[")
    end = text.index("\n)", start)  # the registry's closing line
    path.write_text(text[:end] + "\n    " + entry.strip() + "," + text[end:])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(copy), str(ROOT)])}
    res = warm.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                   cwd=tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"{copy / package}" in res.stdout, "the copy was not the package imported"
    return res.stdout


def check_choices_and_help(capsys, config_cls, from_cli, registries: dict) -> None:
    """Each configuration field named in ``registries`` has its registry's keys, in order, as its choices, and
    ``--help`` lists those choices and every entry's help line."""
    hints = typing.get_type_hints(config_cls, include_extras=True)
    for field, registry in registries.items():
        assert typing.get_args(hints[field]) == tuple(registry), field
    with pytest.raises(SystemExit):
        from_cli(["--help"])
    out = capsys.readouterr().out
    for registry in registries.values():
        assert "{" + ",".join(registry) + "}" in out
        for entry in registry.values():
            assert entry.help and entry.help in out
