"""The fast tier (``bash scripts/test.sh -m "not slow"``) exercises every module of the five packages.

Checked from the source, without running the tests: a test is in the fast tier unless it carries the ``slow``
marker (``pytestmark`` of its file, a ``@pytest.mark.slow`` decorator, or all of its ``pytest.param(...,
marks=pytest.mark.slow)`` cases); what it imports is what its body, its file's top level, the fixtures it
takes (its file's and the conftest.py files above it) and the test helpers it uses import, closed over the
imports the package modules (and the scripts the tests load) make at their own top level. Every ``.py`` file
under the packages must be imported so by at least one fast test, or be in ``INDIRECT`` (loaded by a library or
by a function-level import), which names the fast test and the text in it that loads the module."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
PACKAGES = ("shared_losses", "rl_curl", "nlp_qt", "fewshot", "paper_tables")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    """Every .py file under the packages, by dotted name (``nlp_qt/data/build_demo_eval.py`` included)."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))
            if "__pycache__" not in p.parts}


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base[: len(base) - node.level + (1 if is_package else 0)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_names(nodes, module: str = "", is_package: bool = False) -> set[str]:
    """Dotted names that the import statements (and ``importlib.import_module("literal")`` calls) among
    ``nodes`` bring in: ``from a import b`` gives ``a`` and ``a.b`` (``b`` may be a module)."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            names.add(base)
            names |= {f"{base}.{a.name}" for a in node.names}
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)
    return names


def top_level(tree: ast.Module):
    """The nodes that run when the module is imported: everything but the bodies of functions."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def closure(names: set[str], graph: dict[str, set[str]]) -> set[str]:
    """The package modules that importing ``names`` imports: each name's parent packages, and what each
    package module imports at its top level, transitively."""
    seen: set[str] = set()
    todo = [n for n in names]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            mod = ".".join(parts[:i])
            if mod in graph and mod not in seen:
                seen.add(mod)
                todo.extend(graph[mod])
    return seen


@functools.lru_cache(maxsize=None)
def package_graph() -> dict[str, set[str]]:
    """Each package module, and each script of scripts/ (as the tests load them: ``import bench_curl`` with
    scripts/ on sys.path, or from its file), -> the names it imports at its top level."""
    graph = {}
    for name, path in package_modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        graph[name] = imported_names(top_level(tree), name, path.name == "__init__.py")
    for path in sorted((ROOT / "scripts").glob("*.py")):
        graph.setdefault(path.stem, imported_names(top_level(ast.parse(path.read_text(encoding="utf-8")))))
    return graph


def scripts_loaded(nodes) -> set[str]:
    """Scripts loaded from their file (``spec_from_file_location(name, ROOT / "scripts/x.py")``): the
    literal ``.py`` names among ``nodes`` that are files of scripts/."""
    return {Path(n.value).stem for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and n.value.endswith(".py") and (ROOT / "scripts" / Path(n.value).name).exists()}


class SourceFile:
    """One test (or helper) file: its functions, the imports of its top level, its fixtures."""

    def __init__(self, path: Path, source: str | None = None):
        self.path = path
        self.source = path.read_text(encoding="utf-8") if source is None else source
        self.tree = ast.parse(self.source)
        self.module = module_name(path) if path.is_relative_to(ROOT) else path.stem
        self.functions = {n.name: n for n in self.tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        top = list(top_level(self.tree))
        self.top_imports = imported_names(top, self.module, path.name == "__init__.py") | scripts_loaded(top)
        self.fixtures = {name for name, f in self.functions.items() if any(_is_fixture(d) for d in f.decorator_list)}
        self.constants = {t.id: n.value for n in self.tree.body if isinstance(n, ast.Assign)
                          for t in n.targets if isinstance(t, ast.Name)}
        self.file_slow = any(is_slow_mark(v) for name, v in self.constants.items() if name == "pytestmark")

    def tests(self) -> list[str]:
        return [n for n in self.functions if n.startswith("test")]

    def has_fast_case(self, name: str) -> bool:
        """Whether at least one case of test ``name`` is outside the slow tier."""
        f = self.functions[name]
        if self.file_slow or any(is_slow_mark(d) for d in f.decorator_list):
            return False
        for d in f.decorator_list:
            if isinstance(d, ast.Call) and _dotted(d.func).endswith("mark.parametrize") and len(d.args) > 1:
                cases = d.args[1]
                if isinstance(cases, ast.Name):
                    cases = self.constants.get(cases.id, cases)
                if isinstance(cases, (ast.List, ast.Tuple)) and cases.elts:
                    if all(_param_is_slow(c) for c in cases.elts):
                        return False
        return True


def _dotted(node) -> str:
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return node.id if isinstance(node, ast.Name) else ""


def is_slow_mark(node) -> bool:
    """``pytest.mark.slow`` (called or not), or a list / tuple holding it."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return any(is_slow_mark(e) for e in node.elts)
    if isinstance(node, ast.Call):
        node = node.func
    return _dotted(node) in ("pytest.mark.slow", "mark.slow")


def _param_is_slow(case) -> bool:
    return (isinstance(case, ast.Call) and _dotted(case.func).endswith("param")
            and any(k.arg == "marks" and is_slow_mark(k.value) for k in case.keywords))


def _is_fixture(decorator) -> bool:
    return _dotted(decorator.func if isinstance(decorator, ast.Call) else decorator).endswith("fixture")


def slow_marks_recognised(tf: SourceFile) -> bool:
    """Every ``mark.slow`` in the file is in a place :meth:`SourceFile.has_fast_case` reads."""
    found = sum(1 for n in ast.walk(tf.tree) if isinstance(n, ast.Attribute) and n.attr == "slow"
                and _dotted(n).endswith("mark.slow"))
    read = sum(1 for n, v in tf.constants.items() if n == "pytestmark" and is_slow_mark(v))
    for f in tf.functions.values():
        read += sum(1 for d in f.decorator_list if is_slow_mark(d))
        for d in f.decorator_list:
            if isinstance(d, ast.Call) and _dotted(d.func).endswith("mark.parametrize") and len(d.args) > 1:
                cases = d.args[1]
                if isinstance(cases, ast.Name):
                    cases = tf.constants.get(cases.id, cases)
                if isinstance(cases, (ast.List, ast.Tuple)):
                    read += sum(1 for c in cases.elts if _param_is_slow(c))
    return found == read


class Imports:
    """What each test imports, through its fixtures and the helpers it takes from other test files."""

    def __init__(self, files: dict[Path, SourceFile]):
        self.files = files

    def file(self, path: Path) -> SourceFile | None:
        if path not in self.files and path.exists():
            self.files[path] = SourceFile(path)
        return self.files.get(path)

    def _helper_path(self, name: str) -> Path | None:
        parts = name.split(".")
        if parts[0] != "tests":
            return None
        path = ROOT.joinpath(*parts).with_suffix(".py")
        return path if path.exists() else None

    def _conftests(self, path: Path) -> list[SourceFile]:
        out, folder = [], path.parent
        while folder.is_relative_to(TESTS):
            tf = self.file(folder / "conftest.py")
            if tf is not None and tf.path != path:
                out.append(tf)
            folder = folder.parent
        return out

    def imports_of(self, tf: SourceFile, name: str, seen: set | None = None) -> set[str]:
        """Package modules (and other names) imported when function ``name`` of ``tf`` runs."""
        seen = set() if seen is None else seen
        if (tf.path, name) in seen or name not in tf.functions:
            return set()
        seen.add((tf.path, name))
        f = tf.functions[name]
        body = list(ast.walk(f))
        names = (set(tf.top_imports) | imported_names(body, tf.module, tf.path.name == "__init__.py")
                 | scripts_loaded(body))
        for node in ast.walk(f):  # helpers of the same file it calls
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in tf.functions:
                names |= self.imports_of(tf, node.func.id, seen)
        args = [a.arg for a in f.args.args + f.args.kwonlyargs]
        for d in f.decorator_list:  # @pytest.mark.usefixtures("x")
            if isinstance(d, ast.Call) and _dotted(d.func).endswith("usefixtures"):
                args += [a.value for a in d.args if isinstance(a, ast.Constant)]
        for fixture_file in [tf, *self._conftests(tf.path)]:
            names |= {m for a in args if a in fixture_file.fixtures for m in self.imports_of(fixture_file, a, seen)}
            for a in fixture_file.functions:  # autouse fixtures
                if a in fixture_file.fixtures and _autouse(fixture_file.functions[a]):
                    names |= self.imports_of(fixture_file, a, seen)
        for imported in list(names):  # helpers taken from other test files: from .conftest import tiny_config
            base, _, helper = imported.rpartition(".")
            path = self._helper_path(base)
            if path is not None and (helper_file := self.file(path)) is not None:
                names |= self.imports_of(helper_file, helper, seen)
        return names


def _autouse(f) -> bool:
    return any(isinstance(d, ast.Call) and _is_fixture(d) and any(k.arg == "autouse" for k in d.keywords)
               for d in f.decorator_list)


def fast_tier_imports(test_files: dict[Path, SourceFile]) -> dict[str, list[str]]:
    """Package module -> the fast tests (``path::name``) that import it."""
    graph, tests, covered = package_graph(), Imports(dict(test_files)), {}
    for path, tf in test_files.items():
        for name in tf.tests():
            if tf.has_fast_case(name):
                for mod in closure(tests.imports_of(tf, name), graph):
                    covered.setdefault(mod, []).append(f"{path.relative_to(ROOT)}::{name}")
    return covered


# Modules the tests load without an import statement the check can read: module -> (the fast test, what in its body
# loads the module). Each entry is checked: the test exists, is fast and holds that text.
INDIRECT = {
    # `python -m nlp_qt.senteval` runs the package's __main__.py (in a subprocess)
    "nlp_qt.senteval.__main__": ("tests/nlp_qt/test_senteval_tasks.py::test_python_m_runs_the_package_cli",
                                 '"-m", "nlp_qt.senteval", "--help"'),
    # rl_curl.load_policy imports rl_curl.policy when called
    "rl_curl.policy": ("tests/rl_curl/test_gym_api.py::test_policy_bad_input", "rl_curl.load_policy("),
    # sentence-transformers imports the module class that a model folder's modules.json names
    "nlp_qt.st_module": ("tests/nlp_qt/test_st_export.py::test_sentence_transformers_loads_the_model_folder_and_"
                         "encodes_the_same",
                         "SentenceTransformer(str(model_dir), device=\"cpu\", trust_remote_code=True)"),
    # transformers imports the modeling_fewshot.py that an exported folder holds (a copy of fewshot/modeling_fewshot.py)
    "fewshot.modeling_fewshot": ("tests/fewshot/test_export.py::test_run_exports_a_model_that_pipeline_loads_with_our_"
                                 "predictions", "AutoModelForSequenceClassification.from_pretrained("),
    # fewshot.train imports fewshot.setfit_baseline for --objective setfit
    "fewshot.setfit_baseline": ("tests/fewshot/test_fewshot_protocol.py::test_setfit_baseline_runs_on_the_same_sample",
                                'objective="setfit"'),
}


def all_test_files() -> dict[Path, SourceFile]:
    return {p: SourceFile(p) for p in sorted(TESTS.rglob("test_*.py"))}


def test_every_package_module_is_imported_by_a_fast_test():
    files = all_test_files()
    odd = [str(p.relative_to(ROOT)) for p, tf in files.items() if not slow_marks_recognised(tf)]
    assert not odd, f"a slow marker this check does not read (module pytestmark, decorator, pytest.param): {odd}"
    covered = fast_tier_imports(files)
    for module, (test, text) in INDIRECT.items():
        path, name = test.split("::")
        tf = files.get(ROOT / path)
        assert tf is not None and name in tf.functions, f"{test} (INDIRECT, for {module}) not found"
        assert tf.has_fast_case(name), f"{test} (INDIRECT, for {module}) is marked slow"
        assert text in ast.get_source_segment(tf.source, tf.functions[name]), f"{test} no longer holds {text!r}"
        covered.setdefault(module, []).append(test)
    missing = sorted(set(package_modules()) - set(covered))
    assert not missing, f"modules no fast test imports (add one, or unmark one that does): {missing}"


def test_the_check_sees_slow_markers_fixtures_and_helpers():
    """The check itself on made-up test files: what only slow tests import is reported missing."""
    folder = TESTS / "_made_up"  # never written: the files are parsed from strings
    conftest = SourceFile(folder / "conftest.py", "import pytest\n\n@pytest.fixture\ndef agent():\n"
                        "    from rl_curl.agent import CurlAgent\n    return CurlAgent\n")
    source = (
        "import pytest\nfrom nlp_qt import vocab\n\n\n"
        "@pytest.mark.slow\ndef test_slow():\n    import fewshot.pu\n\n\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.slow), 2])\n"
        "def test_some_fast(x):\n    helper()\n\n\n"
        "@pytest.mark.parametrize('x', [pytest.param(1, marks=pytest.mark.slow)])\n"
        "def test_all_slow(x):\n    import fewshot.prior\n\n\n"
        "def helper():\n    from shared_losses.training import stats\n\n\n"
        "def test_with_fixture(agent):\n    pass\n")
    tf = SourceFile(folder / "test_made_up.py", source)
    assert slow_marks_recognised(tf)
    assert [n for n in tf.tests() if tf.has_fast_case(n)] == ["test_some_fast", "test_with_fixture"]
    files = {tf.path: tf}
    tests = Imports({**files, conftest.path: conftest})
    graph = package_graph()
    assert {"shared_losses.training.stats", "nlp_qt.vocab"} <= closure(tests.imports_of(tf, "test_some_fast"), graph)
    assert "rl_curl.agent" in closure(tests.imports_of(tf, "test_with_fixture"), graph)
    assert "rl_curl.networks" in closure({"rl_curl.agent"}, graph)  # what rl_curl.agent imports at its top
    fast = set()
    for name in tf.tests():
        if tf.has_fast_case(name):
            fast |= closure(tests.imports_of(tf, name), graph)
    assert "fewshot.pu" not in fast and "fewshot.prior" not in fast
    whole_file_slow = SourceFile(folder / "test_b.py", "import pytest\npytestmark = pytest.mark.slow\n\n"
                                                     "def test_a():\n    import fewshot.pu\n")
    assert not whole_file_slow.has_fast_case("test_a")
    odd = SourceFile(folder / "test_c.py", "import pytest\nSLOW = pytest.mark.slow\n\n@SLOW\ndef test_a():\n    pass\n")
    assert not slow_marks_recognised(odd)  # a form the check does not read is refused, not taken as fast
