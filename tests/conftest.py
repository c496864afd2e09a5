"""Shared fixtures. Every test runs against the real guest; the compiled module is
cached once per machine (see `wasm-kernel precompile`), so a warm run costs no compile."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from wasm_kernel import ExecutionPolicy, PythonSandbox, create_sandbox


@pytest.fixture(scope="session", autouse=True)
def _compiled_guest() -> None:
    from wasm_kernel.host.module_cache import load_guest_module

    load_guest_module()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def sandbox(workspace: Path) -> Iterator[PythonSandbox]:
    sb = create_sandbox(workspace=workspace)
    assert isinstance(sb, PythonSandbox)
    yield sb
    sb.close()


def make_sandbox(workspace: Path, **policy: object) -> PythonSandbox:
    sb = create_sandbox(workspace=workspace, policy=ExecutionPolicy(**policy))  # type: ignore[arg-type]
    assert isinstance(sb, PythonSandbox)
    return sb
