"""A sandbox on a workspace with an ExecutionPolicy built from keywords: the shape
most runtime and core tests start from (the `sandbox` fixture is the default policy)."""

from __future__ import annotations

from pathlib import Path

from wasm_kernel import ExecutionPolicy, PythonSandbox, create_sandbox


def make_sandbox(workspace: Path, **policy: object) -> PythonSandbox:
    sb = create_sandbox(workspace=workspace, policy=ExecutionPolicy(**policy))  # type: ignore[arg-type]
    assert isinstance(sb, PythonSandbox)
    return sb
