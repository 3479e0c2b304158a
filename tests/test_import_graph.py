"""No import cycles inside the packages (issue 16: fewshot.train and fewshot.pu_pipeline imported each
other), and the packages import each other only as the layering allows: shared_losses (the shared
infrastructure: losses, run harness, shared data sets) imports no application; each application (rl_curl,
nlp_qt, fewshot) may import shared_losses but never another application; paper_tables (the papers' tables from the
runs) may import all of them and nothing imports it. Every import counts, also those inside functions."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def module_imports(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Every module of ``package``, subpackages' too, by dotted name inside it ("model", "senteval" for
    senteval/__init__.py, "senteval.tasks"; the package's own __init__ is "__init__") -> the modules of the
    package it imports, relative and absolute imports resolved to the longest module name they reach."""
    files = {}
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root / package)
        if "__pycache__" in path.parts or any(not (root / package / Path(*rel.parts[:k]) / "__init__.py").exists()
                                              for k in range(1, len(rel.parts))):
            continue  # a folder that is not a package (nlp_qt/data's scripts): not importable as a module
        parts = list(path.relative_to(root / package).with_suffix("").parts)
        folder = parts[:-1]  # the package the file is in (for an __init__.py, its own)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts) or "__init__"
        files[name] = (path, folder)

    def module_of(target: list[str]) -> str | None:
        for n in range(len(target), 0, -1):
            if ".".join(target[:n]) in files:
                return ".".join(target[:n])
        return None

    graph = {}
    for name, (path, folder) in files.items():
        targets = []
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = folder[:len(folder) - (node.level - 1)]
                elif node.module and node.module.startswith(package + "."):
                    base, node_module = [], node.module[len(package) + 1:]
                    targets += [node_module.split(".") + [a.name] for a in node.names]
                    continue
                else:
                    continue
                mod = node.module.split(".") if node.module else []
                targets += [base + mod + [a.name] for a in node.names]
            elif isinstance(node, ast.Import):
                targets += [a.name.split(".")[1:] for a in node.names if a.name.startswith(package + ".")]
        graph[name] = {m for t in targets if (m := module_of(t)) is not None} - {name}
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


@pytest.mark.parametrize("package", ["shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables"])
def test_package_has_no_import_cycle(package):
    graph = module_imports(package)
    assert graph, package
    assert find_cycle(graph) is None, f"{package}: import cycle {' -> '.join(find_cycle(graph))}"


def test_subpackages_are_in_the_graph_with_their_imports_resolved(tmp_path):
    files = {"pkg/__init__.py": "from .sub import f\n", "pkg/model.py": "import numpy\n",
             "pkg/sub/__init__.py": "from .a import f\n", "pkg/sub/a.py": "from ..model import M\nfrom . import b\n",
             "pkg/sub/b.py": "from pkg.sub.a import f\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = module_imports("pkg", tmp_path)
    assert graph == {"__init__": {"sub"}, "model": set(), "sub": {"sub.a"}, "sub.a": {"model", "sub.b"},
                     "sub.b": {"sub.a"}}
    assert find_cycle(graph) == ["sub.a", "sub.b", "sub.a"]


#: the subpackages of shared_losses that are not the loss core; the core (every other module) imports none of them
NOT_CORE = ("training", "data")


def core_imports_upward(graph: dict[str, set[str]]) -> list[str]:
    def outside(name):
        return name.split(".")[0] in NOT_CORE
    return [f"{m} imports {d}" for m, deps in sorted(graph.items()) if not outside(m)
            for d in sorted(deps) if outside(d)]


def test_the_loss_core_imports_no_run_machinery_or_data():
    """shared_losses' top level is the loss core: the run machinery (training) and the shared data (data) import
    it, never the other way round."""
    graph = module_imports("shared_losses")
    assert {"functional", "modules", "training.runtime", "training.harness", "data"} <= set(graph)
    assert core_imports_upward(graph) == []
    assert "distributed" in graph["training.runtime"]  # the machinery does use the core


def test_the_core_check_finds_an_upward_import(tmp_path):
    files = {"pkg/__init__.py": "from .functional import f\n", "pkg/functional.py": "import torch\n",
             "pkg/modules.py": "def g():\n    from .training.runtime import save\n",
             "pkg/training/__init__.py": "", "pkg/training/runtime.py": "from ..functional import f\n",
             "pkg/data/__init__.py": "from ..training import runtime\n", "pkg/notes/build.py": "from pkg import data\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = module_imports("pkg", tmp_path)
    assert "notes.build" not in graph  # notes/ has no __init__.py: scripts, not modules
    assert core_imports_upward(graph) == ["modules imports training.runtime"]


def test_the_cycle_finder_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


APPLICATIONS = ("rl_curl", "nlp_qt", "fewshot")
PACKAGES = ("shared_losses", *APPLICATIONS, "paper_tables")
#: the suite packages each package may import (besides itself): paper_tables (the papers' tables from the runs)
#: sits above the applications, and nothing imports it
MAY_IMPORT = {"shared_losses": set(), **{app: {"shared_losses"} for app in APPLICATIONS},
              "paper_tables": {"shared_losses", *APPLICATIONS}}


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
    assert len(graph) >= 3, package
    assert forbidden_imports(package, graph) == []


def test_the_layering_check_finds_a_forbidden_import(tmp_path):
    """The check can fail: a synthetic suite where an application imports another inside a function, in a
    subfolder and through importlib, an application imports paper_tables, and shared_losses imports an
    application; imports of shared_losses, paper_tables' imports of the applications and relative imports within a
    package are allowed."""
    files = {
        "shared_losses/core.py": "import numpy\nfrom . import other\n",
        "shared_losses/data/build.py": "def main():\n    import rl_curl.train as t\n",
        "fewshot/run.py": "from shared_losses.data import DataError\nfrom .data import x\n\n\n"
                          "def f():\n    from nlp_qt import senteval\n",
        "fewshot/sub/deep.py": "from .. import data\nfrom ..images import load\nimport nlp_qt.senteval as se\n",
        "rl_curl/train.py": "import importlib\nm = importlib.import_module('fewshot.train')\n",
        "nlp_qt/train.py": "import shared_losses\nfrom shared_losses import punce_loss\n\n\n"
                           "def report():\n    from paper_tables import table3\n",
        "paper_tables/table3.py": "from rl_curl import objectives\nfrom shared_losses.training import stats\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {pkg: forbidden_imports(pkg, package_imports(pkg, tmp_path)) for pkg in PACKAGES}
    assert found == {
        "shared_losses": ["shared_losses/data/build imports rl_curl"],
        "rl_curl": ["rl_curl/train imports fewshot"],
        "nlp_qt": ["nlp_qt/train imports paper_tables"],
        "fewshot": ["fewshot/run imports nlp_qt", "fewshot/sub/deep imports nlp_qt"],
        "paper_tables": [],
    }


def plain_tqdm_imports(root: Path = ROOT) -> list[str]:
    """Where the packages and scripts import tqdm's plain (terminal) bar instead of ``tqdm.auto``'s."""
    found = []
    for folder in ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables", "scripts"):
        for path in sorted((root / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([node.module] if isinstance(node, ast.ImportFrom) and node.module
                         else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
                if any(n in ("tqdm", "tqdm.std", "tqdm.tqdm") for n in names):
                    found.append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_every_progress_bar_is_tqdm_autos(tmp_path):
    """Progress bars come from tqdm.auto: widgets in a notebook, text in a terminal (rl_curl and fewshot printed text
    bars in a notebook where nlp_qt drew widgets)."""
    assert plain_tqdm_imports() == []
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "x.py").write_text("def f():\n    from tqdm import tqdm\n    return tqdm\n")
    assert plain_tqdm_imports(tmp_path) == ["scripts/x.py:2"]
