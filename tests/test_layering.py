"""A lower layer never imports a higher one: host < runtime < core."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "wasm_kernel"
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
