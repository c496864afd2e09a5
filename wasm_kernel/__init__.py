"""wasm-kernel: run untrusted Python in a persistent WebAssembly sandbox.

Layers, lowest first (a layer imports only those below it):
host (wasmtime, compile cache, WASI wiring) -> runtime (the guest interpreter,
its limits and rollback) -> core (policy, result, sandbox API) -> sessions
(UUID workspaces, host file operations, metadata, leases, pruning).
"""

import logging as _logging

import lazy_loader as _lazy

# The public names are listed once, in __init__.pyi, and imported from their modules
# on first use (PEP 562): `python -m wasm_kernel` starts a kernel, and a kernel that
# imported the whole stack (wasmtime, SQLite, the guest runtime) before binding its
# sockets answered its first request one ZeroMQ reconnect interval (100 ms) later
# than ipykernel does.
__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Jupyter Server's entry: the Sandbox drive and the rename follower
    (kernel/server/extension.py), enabled by the wheel's jupyter-config file."""
    return [{"module": "wasm_kernel.kernel.server.extension"}]


__version__ = "0.1.0"

# A library stays silent unless the application configures logging.
_logging.getLogger("wasm_kernel").addHandler(_logging.NullHandler())
