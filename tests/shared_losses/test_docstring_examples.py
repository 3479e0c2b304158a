"""The examples in docstrings (``>>>``, shown on the API reference pages) run and print what they show: three of
them named objects they never made (``encoder``, ``aug``, ``gru``) or printed nothing where a value was shown."""

import doctest
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables")


def _modules_with_examples() -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if ">>> " in path.read_text(encoding="utf-8"):
                parts = path.relative_to(ROOT).with_suffix("").parts
                found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_the_loss_functions_docstrings_have_examples():
    assert "shared_losses.functional" in _modules_with_examples()  # the search finds what it looks for


@pytest.mark.parametrize("name", _modules_with_examples())
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, report=True)
    assert result.attempted > 0 and result.failed == 0, f"{name}: {result.failed} of {result.attempted} failed"
