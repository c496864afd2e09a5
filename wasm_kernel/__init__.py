"""wasm-kernel: run untrusted Python in a persistent WebAssembly sandbox.

Layers, lowest first (a layer imports only those below it):
host (wasmtime, compile cache, WASI wiring) -> runtime (the guest interpreter,
its limits and rollback) -> core (policy, result, sandbox API) -> sessions
(UUID workspaces, host file operations, metadata, leases, pruning).
"""

import logging as _logging
from typing import TYPE_CHECKING

from .host.lazy_exports import lazy_exports

# The public names, by module, imported on first use (PEP 562): `python -m
# wasm_kernel` starts a kernel, and a kernel that imported the whole stack (wasmtime,
# SQLite, the guest runtime) before binding its sockets answered its first request
# one ZeroMQ reconnect interval (100 ms) later than ipykernel does.
_EXPORTS = {
    ".core.file_changes": ("FileChanges", "WorkspaceSnapshot"),
    ".core.logger": ("SandboxLogger",),
    ".core.policy": ("ExecutionPolicy",),
    ".core.result": ("ErrorInfo", "SandboxResult", "TrapReason"),
    ".core.sandbox": ("BaseSandbox", "CellOptions", "PythonSandbox", "QueryError", "RuntimeType", "create_sandbox"),
    ".runtime.guest_messages": ("DisplayOutput", "ErrorOutput"),
    ".sessions": (
        "CleanupResult", "RegistryEntry", "RegistryError", "SessionIdentity", "SessionRegistry",
        "derive_session_identity", "get_or_create_session", "PruneResult", "SessionSandbox", "UnsafePathError",
        "create_session_sandbox", "delete_session_path", "delete_session_workspace", "get_session_sandbox",
        "list_session_files", "prune_sessions", "read_session_file", "write_session_file",
    ),
}

if TYPE_CHECKING:
    from .core.file_changes import FileChanges, WorkspaceSnapshot
    from .core.logger import SandboxLogger
    from .core.policy import ExecutionPolicy
    from .core.result import ErrorInfo, SandboxResult, TrapReason
    from .core.sandbox import BaseSandbox, CellOptions, PythonSandbox, QueryError, RuntimeType, create_sandbox
    from .runtime.guest_messages import DisplayOutput, ErrorOutput
    from .sessions import (
        CleanupResult,
        RegistryEntry,
        RegistryError,
        SessionIdentity,
        SessionRegistry,
        derive_session_identity,
        get_or_create_session,
        PruneResult,
        SessionSandbox,
        UnsafePathError,
        create_session_sandbox,
        delete_session_path,
        delete_session_workspace,
        get_session_sandbox,
        list_session_files,
        prune_sessions,
        read_session_file,
        write_session_file,
    )


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Jupyter Server's entry: the Sandbox drive and the rename follower
    (kernel/server/extension.py), enabled by the wheel's jupyter-config file."""
    return [{"module": "wasm_kernel.kernel.server.extension"}]


__version__ = "0.1.0"

# A library stays silent unless the application configures logging.
_logging.getLogger("wasm_kernel").addHandler(_logging.NullHandler())

__all__ = [
    "BaseSandbox",
    "CellOptions",
    "DisplayOutput",
    "ErrorInfo",
    "ErrorOutput",
    "ExecutionPolicy",
    "FileChanges",
    "PythonSandbox",
    "QueryError",
    "RuntimeType",
    "SandboxLogger",
    "SandboxResult",
    "TrapReason",
    "WorkspaceSnapshot",
    "create_sandbox",
    # sessions
    "PruneResult",
    "SessionSandbox",
    "UnsafePathError",
    "create_session_sandbox",
    "delete_session_path",
    "delete_session_workspace",
    "get_session_sandbox",
    "list_session_files",
    "prune_sessions",
    "read_session_file",
    "write_session_file",
    # stable identity
    "CleanupResult",
    "RegistryEntry",
    "RegistryError",
    "SessionIdentity",
    "SessionRegistry",
    "derive_session_identity",
    "get_or_create_session",
]
