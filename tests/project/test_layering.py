"""A lower layer never imports a higher one: host < runtime < core."""

import ast
from pathlib import Path

import pytest

from support.paths import REPO

PACKAGE = REPO / "wasm_kernel"
ORDER = ["host", "runtime", "core", "sessions", "kernel", "cluster"]


def _imported_layers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    rel_parts = path.relative_to(PACKAGE).parts
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against the file's package
                base = list(rel_parts[:-1])[: len(rel_parts) - node.level]
                parts = base + (node.module.split(".") if node.module else [])
            elif node.module and node.module.startswith("wasm_kernel"):
                parts = node.module.split(".")[1:]
            else:
                continue
            if parts and parts[0] in ORDER:
                found.add(parts[0])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "wasm_kernel" and len(parts) > 1 and parts[1] in ORDER:
                    found.add(parts[1])
    return found


@pytest.mark.parametrize("layer", [layer for layer in ORDER if (PACKAGE / layer).is_dir()])
def test_layer_imports_only_itself_and_lower_layers(layer: str) -> None:
    allowed = set(ORDER[: ORDER.index(layer) + 1])
    for path in (PACKAGE / layer).rglob("*.py"):
        if "guest_lib" in path.parts:
            continue  # runs inside the guest, imports nothing of ours
        bad = _imported_layers(path) - allowed
        assert not bad, f"{path.relative_to(PACKAGE)} imports higher layer(s) {sorted(bad)}"


# -- no import circles ------------------------------------------------------------------
#
# Every import counts, at module level or inside a function: a lazy import only hides a
# circle from the interpreter, not from whoever reads the code. `from . import x` of a
# submodule imports that submodule, not its package's __init__.


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node but those under `if TYPE_CHECKING:`, which never runs."""
    nodes: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        nodes.append(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return nodes


def _import_graph(root: Path, skip: tuple[str, ...] = ()) -> dict[str, set[str]]:
    paths = {_module_name(p, root): p for p in root.rglob("*.py") if not any(s in p.parts for s in skip)}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                submodules = {f"{target}.{alias.name}" for alias in node.names} & paths.keys()
                found |= submodules
                if target in paths and len(submodules) < len(node.names):
                    found.add(target)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names} & paths.keys()
        graph[name] = found - {name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_the_host_code_has_no_import_circle() -> None:
    assert _circles(_import_graph(PACKAGE, skip=("guest_lib",))) == []


def test_the_circle_check_finds_a_circle_hidden_in_a_function(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def later():\n    from .a import x\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import d\n")
    (package / "d.py").write_text("from . import c\n")  # c's import never runs: no circle
    assert _circles(_import_graph(package)) == [["pkg.a", "pkg.b"]]


def _guest_import_graph(folder: Path) -> dict[str, set[str]]:
    """The guest's own modules import each other by their bare names."""
    names = {p.stem for p in folder.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in folder.glob("*.py"):
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names} & names
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module in names:
                found.add(node.module)
        graph[path.stem] = found - {path.stem}
    return graph


def test_the_guests_own_modules_have_no_import_circle() -> None:
    assert _circles(_guest_import_graph(PACKAGE / "runtime" / "guest_lib")) == []
