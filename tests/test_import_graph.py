"""No import cycles inside the packages (issue 16: fewshot.train and fewshot.pu_pipeline imported each
other). Every import counts, also those inside functions."""

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
