"""wasm-kernel's public names, listed once: type checkers read this stub, and the
package's __init__ imports each name from its module when first used
(lazy_loader.attach_stub reads the same lines)."""

from .core.file_changes import FileChanges as FileChanges, WorkspaceSnapshot as WorkspaceSnapshot
from .core.logger import SandboxLogger as SandboxLogger
from .core.policy import ExecutionPolicy as ExecutionPolicy
from .core.result import ErrorInfo as ErrorInfo, SandboxResult as SandboxResult, TrapReason as TrapReason
from .core.sandbox import (
    BaseSandbox as BaseSandbox,
    CellOptions as CellOptions,
    PythonSandbox as PythonSandbox,
    QueryError as QueryError,
    RuntimeType as RuntimeType,
    create_sandbox as create_sandbox,
)
from .runtime.guest_messages import DisplayOutput as DisplayOutput, ErrorOutput as ErrorOutput
from .sessions import (
    CleanupResult as CleanupResult,
    PruneResult as PruneResult,
    RegistryEntry as RegistryEntry,
    RegistryError as RegistryError,
    SessionIdentity as SessionIdentity,
    SessionRegistry as SessionRegistry,
    SessionSandbox as SessionSandbox,
    UnsafePathError as UnsafePathError,
    create_session_sandbox as create_session_sandbox,
    delete_session_path as delete_session_path,
    delete_session_workspace as delete_session_workspace,
    derive_session_identity as derive_session_identity,
    get_or_create_session as get_or_create_session,
    get_session_sandbox as get_session_sandbox,
    list_session_files as list_session_files,
    prune_sessions as prune_sessions,
    read_session_file as read_session_file,
    write_session_file as write_session_file,
)

__version__: str

def _jupyter_server_extension_points() -> list[dict[str, str]]: ...
