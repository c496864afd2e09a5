"""A sandbox on a workspace with an ExecutionPolicy built from keywords: the shape
most runtime and core tests start from (the `sandbox` fixture is the default policy).
`metering="fuel"` gives one in fuel metering (its own compiled module, compiled on
first use), for the tests of the deterministic budget; the default is time metering."""

from __future__ import annotations

from pathlib import Path

from wasm_kernel import ExecutionPolicy, PythonSandbox, create_sandbox
from wasm_kernel.runtime.guest_config import GuestOptions


def compiled(metering: str) -> None:
    """Compile `metering`'s module now if this machine has not (once, 1-2 minutes), so a
    sandbox or kernel of that metering starts on it, not on a first start's baseline
    engine (which counts no fuel)."""
    from wasm_kernel.host.module_cache import load_guest_module

    load_guest_module(metering=metering)


def make_sandbox(workspace: Path, metering: str | None = None, **policy: object) -> PythonSandbox:
    if metering is not None:
        compiled(metering)
    options = None if metering is None else GuestOptions(metering=metering)
    sb = create_sandbox(workspace=workspace, policy=ExecutionPolicy(**policy), guest_options=options)  # type: ignore[arg-type]
    assert isinstance(sb, PythonSandbox)
    return sb
