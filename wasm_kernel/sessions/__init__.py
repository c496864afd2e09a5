"""Sessions: one UUID-named workspace per session, safe host-side file operations,
metadata kept out of the guest's reach, leases, pruning, the stable identity
registry (one session per notebook, run or day), which follows a renamed
notebook (moves.py), and each session's input/output history (history_store.py,
for Jupyter's history_request).

Layer rule: imports wasm_kernel.core, .runtime and .host only.
"""

from typing import TYPE_CHECKING

from ..host.lazy_exports import lazy_exports

# Imported when first named: `from wasm_kernel.sessions.registry import ...` (what
# the kernel does) then costs the kernel's start only the modules it uses, not the
# moves, pruning and file operations every start paid for before.
_EXPORTS = {
    ".file_ops": ("delete_session_path", "list_session_files", "read_session_file", "write_session_file"),
    ".history_store": ("SessionHistory", "remove_session_history"),
    ".identity": ("SessionIdentity", "derive_session_identity"),
    ".layout": ("DEFAULT_WORKSPACE_ROOT",),
    ".leases": ("Lease", "is_session_in_use"),
    ".lifecycle": ("create_session_sandbox", "delete_session_workspace", "get_session_sandbox"),
    ".metadata": ("CorruptMetadataError", "SessionMetadata", "read_metadata"),
    ".moves": ("MovedSession", "MoveResult", "SessionMoveError", "move_notebook_sessions"),
    ".pruning": ("PruneResult", "prune_sessions"),
    ".registry": ("CleanupResult", "RegistryEntry", "RegistryError", "SessionRegistry", "get_or_create_session"),
    "..host.safe_fs": ("UnsafePathError",),
    ".sandbox": ("SessionSandbox",),
    ".session_ids": ("new_session_id", "validate_session_id"),
}

if TYPE_CHECKING:
    from ..host.safe_fs import UnsafePathError
    from .file_ops import delete_session_path, list_session_files, read_session_file, write_session_file
    from .history_store import SessionHistory, remove_session_history
    from .identity import SessionIdentity, derive_session_identity
    from .layout import DEFAULT_WORKSPACE_ROOT
    from .leases import Lease, is_session_in_use
    from .lifecycle import create_session_sandbox, delete_session_workspace, get_session_sandbox
    from .metadata import CorruptMetadataError, SessionMetadata, read_metadata
    from .moves import MovedSession, MoveResult, SessionMoveError, move_notebook_sessions
    from .pruning import PruneResult, prune_sessions
    from .registry import CleanupResult, RegistryEntry, RegistryError, SessionRegistry, get_or_create_session
    from .sandbox import SessionSandbox
    from .session_ids import new_session_id, validate_session_id

__all__ = [
    # stable identity
    "CleanupResult",
    "RegistryEntry",
    "RegistryError",
    "SessionIdentity",
    "SessionRegistry",
    "derive_session_identity",
    "get_or_create_session",
    # a session follows its notebook
    "MoveResult",
    "MovedSession",
    "SessionMoveError",
    "move_notebook_sessions",
    # history
    "SessionHistory",
    "remove_session_history",
    # sessions
    "DEFAULT_WORKSPACE_ROOT",
    "CorruptMetadataError",
    "Lease",
    "PruneResult",
    "SessionMetadata",
    "SessionSandbox",
    "UnsafePathError",
    "create_session_sandbox",
    "delete_session_path",
    "delete_session_workspace",
    "get_session_sandbox",
    "is_session_in_use",
    "list_session_files",
    "new_session_id",
    "prune_sessions",
    "read_metadata",
    "read_session_file",
    "validate_session_id",
    "write_session_file",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
