"""wasm_kernel.sessions' public names, listed once: type checkers read this stub,
and the package's __init__ imports each name from its module when first used
(lazy_loader.attach_stub reads the same lines)."""

from .file_ops import (
    UnsafePathError as UnsafePathError,
    delete_session_path as delete_session_path,
    list_session_files as list_session_files,
    read_session_file as read_session_file,
    write_session_file as write_session_file,
)
from .history_store import SessionHistory as SessionHistory, remove_session_history as remove_session_history
from .identity import SessionIdentity as SessionIdentity, derive_session_identity as derive_session_identity
from .layout import DEFAULT_WORKSPACE_ROOT as DEFAULT_WORKSPACE_ROOT
from .leases import Lease as Lease, is_session_in_use as is_session_in_use
from .lifecycle import (
    create_session_sandbox as create_session_sandbox,
    delete_session_workspace as delete_session_workspace,
    get_session_sandbox as get_session_sandbox,
)
from .metadata import (
    CorruptMetadataError as CorruptMetadataError,
    SessionMetadata as SessionMetadata,
    read_metadata as read_metadata,
)
from .moves import (
    MovedSession as MovedSession,
    MoveResult as MoveResult,
    SessionMoveError as SessionMoveError,
    move_notebook_sessions as move_notebook_sessions,
)
from .pruning import PruneResult as PruneResult, prune_sessions as prune_sessions
from .registry import (
    CleanupResult as CleanupResult,
    RegistryEntry as RegistryEntry,
    RegistryError as RegistryError,
    SessionRegistry as SessionRegistry,
    get_or_create_session as get_or_create_session,
)
from .sandbox import SessionSandbox as SessionSandbox
from .session_ids import new_session_id as new_session_id, validate_session_id as validate_session_id
