"""A sandbox on a workspace with an ExecutionPolicy built from keywords: the shape
most runtime and core tests start from (the `sandbox` fixture is the default policy).
`metering="fuel"` gives one in fuel metering (its own compiled module, compiled on
first use), for the tests of the deterministic budget; the default is time metering."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from wasm_kernel import ExecutionPolicy, PythonSandbox, create_sandbox
from wasm_kernel.runtime.guest_config import GuestOptions
from wasm_kernel.runtime.python_guest import PythonGuest


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


@contextmanager
def fresh_guest(parent: Path) -> Iterator[PythonGuest]:
    """A PythonGuest (the runtime layer, without a Sandbox) on a new workspace `parent/ws`."""
    from wasm_kernel.runtime.provisioning import new_guest

    ws = parent / "ws"
    ws.mkdir()
    guest = new_guest(ws)
    try:
        yield guest
    finally:
        guest.close()
