"""No import cycles inside the packages (issue 16: fewshot.train and fewshot.pu_pipeline imported each
other), and the packages import each other only as the layering allows: shared_losses (the shared
infrastructure: losses, run harness, shared data sets) imports no application; each application (rl_curl,
nlp_qt, fewshot) may import shared_losses but never another application. Every import counts, also those
inside functions."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def module_imports(package: str) -> dict[str, set[str]]:
    graph = {}
    for path in sorted((ROOT / package).glob("*.py")):
        name = path.stem
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level == 1:  # from .x import y / from . import x
                    deps |= {node.module} if node.module else {a.name for a in node.names}
                elif node.module and node.module.startswith(package + "."):
                    deps.add(node.module.split(".")[1])
            elif isinstance(node, ast.Import):
                deps |= {a.name.split(".")[1] for a in node.names if a.name.startswith(package + ".")}
        graph[name] = {d.split(".")[0] for d in deps} - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep] if dep in stack else [node, dep]
            if dep not in state:
                found = visit(dep, stack + [dep])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


@pytest.mark.parametrize("package", ["shared_losses", "rl_curl", "nlp_qt", "fewshot"])
def test_package_has_no_import_cycle(package):
    graph = module_imports(package)
    assert graph, package
    assert find_cycle(graph) is None, f"{package}: import cycle {' -> '.join(find_cycle(graph))}"


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


APPLICATIONS = ("rl_curl", "nlp_qt", "fewshot")
PACKAGES = ("shared_losses", *APPLICATIONS)
#: the suite packages each package may import (besides itself)
MAY_IMPORT = {"shared_losses": set(), **{app: {"shared_losses"} for app in APPLICATIONS}}


def package_imports(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Every .py file under ``package`` (its data folders' scripts too) -> the suite packages it imports:
    ``import``, ``from ... import`` (relative ones resolved), also inside functions, and
    ``importlib.import_module("...")`` with a literal name."""
    graph = {}
    for path in sorted((root / package).rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        here = path.relative_to(root).with_suffix("").parts  # (package, ..., module)
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative to the file's folder, one level up per extra dot
                    names.add(".".join(here[:len(here) - node.level] + ((node.module,) if node.module else ())))
                else:
                    names.add(node.module or "")
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                  and node.func.attr == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                  and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
        graph["/".join(here)] = {n.split(".")[0] for n in names} & set(PACKAGES)
    return graph


def forbidden_imports(package: str, graph: dict[str, set[str]]) -> list[str]:
    return [f"{module} imports {dep}" for module, deps in sorted(graph.items())
            for dep in sorted(deps - MAY_IMPORT[package] - {package})]


@pytest.mark.parametrize("package", PACKAGES)
def test_packages_import_only_what_their_layer_allows(package):
    graph = package_imports(package)
    assert len(graph) > 3, package
    assert forbidden_imports(package, graph) == []


def test_the_layering_check_finds_a_forbidden_import(tmp_path):
    """The check can fail: a synthetic suite where an application imports another inside a function, in a
    subfolder and through importlib, and shared_losses imports an application; imports of shared_losses and
    relative imports within a package are allowed."""
    files = {
        "shared_losses/core.py": "import numpy\nfrom . import other\n",
        "shared_losses/data/build.py": "def main():\n    import rl_curl.train as t\n",
        "fewshot/run.py": "from shared_losses.datasets import DataError\nfrom .data import x\n\n\n"
                          "def f():\n    from nlp_qt import senteval\n",
        "fewshot/sub/deep.py": "from .. import data\nfrom ..images import load\nimport nlp_qt.senteval as se\n",
        "rl_curl/train.py": "import importlib\nm = importlib.import_module('fewshot.train')\n",
        "nlp_qt/train.py": "import shared_losses\nfrom shared_losses import punce_loss\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {pkg: forbidden_imports(pkg, package_imports(pkg, tmp_path)) for pkg in PACKAGES}
    assert found == {
        "shared_losses": ["shared_losses/data/build imports rl_curl"],
        "rl_curl": ["rl_curl/train imports fewshot"],
        "nlp_qt": [],
        "fewshot": ["fewshot/run imports nlp_qt", "fewshot/sub/deep imports nlp_qt"],
    }
