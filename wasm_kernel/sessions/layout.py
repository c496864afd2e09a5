"""Where a session's files live under the workspace root.

    <root>/
        <uuid>/                      the session's workspace, mounted at /app
        .wasm-kernel/                private: never mounted into any guest
            sessions/<uuid>.json     metadata (session_id, created_at, updated_at, version)
            leases/<uuid>.lock       flock()ed by every open sandbox of the session
            history/<uuid>.sqlite3   the session's input/output history (history_store.py)
            packages/<uuid>/         wheels %pip installed, read-only to the guest (packages.py)
            state/<uuid>/            the interpreter a shut-down kernel kept (saved_state.py)
            points/<uuid>/           every cell's point, for %rewind (runtime/points.py)

Anything found at one of these places that is not what goes there (a file where a
folder goes, a link, a pipe...) is set aside beside it, never followed
(host/set_aside.py): ensure_private_dirs does it for the folders, each file's owner
for its files.

Why the metadata is not `<root>/<uuid>/.metadata.json` as the seeds first
sketched: a WASI preopen has no per-file filter, so a dotfile inside the mounted
folder is visible to the guest, readable and writable. A guest that could rewrite
its `updated_at` could make its session unprunable (a date far in the future) or
get it pruned (a date in the past); one that could delete it would turn its
session into a "legacy" one that prune never touches. Keeping everything we own
in a sibling directory of the workspaces puts it out of every guest's reach: a
session guest sees only its own `<uuid>/`.

`.wasm-kernel` is not a UUID, so pruning and listing never take it for a session.
Never point a non-session sandbox (`create_sandbox(workspace=root)`) at the root
itself: that guest would see every session and this private folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..core.sandbox import SESSIONS_PRIVATE_DIR
from ..host.safe_fs import lstat_at, open_root
from ..host.set_aside import Notes, folder_at, set_aside
from .session_ids import validate_session_id

DEFAULT_WORKSPACE_ROOT = Path("workspace")


def default_workspace_root() -> Path:
    """Where the kernel and `wasm-kernel sessions` keep sessions unless configured
    otherwise (WasmKernel.workspace_root): the user's Jupyter data folder, so every
    notebook and the CLI find the same sessions. (DEFAULT_WORKSPACE_ROOT is the
    Python API's default, relative to the caller's folder.)

    A relative JUPYTER_DATA_DIR is read against this process's folder, as Jupyter
    reads it, and made absolute here once: pip and the guest's mounts run in other
    folders, where the relative path named somewhere else. (The server extension
    hands the kernels it starts an absolute one, read against the server's folder.)"""
    from jupyter_core.paths import jupyter_data_dir

    return Path(os.path.abspath(jupyter_data_dir())) / "wasm-kernel" / "sessions"
PRIVATE_DIR = SESSIONS_PRIVATE_DIR  # core refuses to mount a folder holding it
METADATA_DIR = "sessions"
LEASES_DIR = "leases"
HISTORY_DIR = "history"
STATE_DIR = "state"
PACKAGES_DIR = "packages"
POINTS_DIR = "points"
# The shared folders made here (the others are made by their owners, when first needed)...
_MADE = ((METADATA_DIR, "the sessions' metadata folder"), (LEASES_DIR, "the sessions' lease folder"))
# ...and those only cleared here: what is at their place and is not a folder is set aside.
_CLEARED = ((HISTORY_DIR, "the sessions' history folder"), (STATE_DIR, "the saved states' folder"),
            (PACKAGES_DIR, "the sessions' packages folder"), (POINTS_DIR, "the sessions' points folder"))


def workspace_path(workspace_root: Path, session_id: str) -> Path:
    """<root>/<uuid>: the folder the session's guest sees as /app."""
    return Path(workspace_root) / validate_session_id(session_id)


def private_dir(workspace_root: Path) -> Path:
    return Path(workspace_root) / PRIVATE_DIR


# These two run once or twice per session in a prune: one Path built from a joined
# string costs a third of three chained `/` operations.
def metadata_path(workspace_root: Path, session_id: str) -> Path:
    return Path(os.path.join(workspace_root, PRIVATE_DIR, METADATA_DIR, f"{validate_session_id(session_id)}.json"))


def lease_path(workspace_root: Path, session_id: str) -> Path:
    return Path(os.path.join(workspace_root, PRIVATE_DIR, LEASES_DIR, f"{validate_session_id(session_id)}.lock"))


def history_path(workspace_root: Path, session_id: str) -> Path:
    return Path(os.path.join(workspace_root, PRIVATE_DIR, HISTORY_DIR, f"{validate_session_id(session_id)}.sqlite3"))


def points_path(workspace_root: Path, session_id: str) -> Path:
    """<root>/.wasm-kernel/points/<uuid>: the deltas of the session's points."""
    return private_dir(Path(workspace_root)) / POINTS_DIR / validate_session_id(session_id)


def ensure_points_parent(workspace_root: Path, session_id: str, notes: Notes | None = None) -> Path:
    """The session's points folder's path, with the folders above it made owner-only
    and never followed through a link (the guest's history makes the last one)."""
    path = points_path(workspace_root, session_id)
    fd = open_root(workspace_root)
    try:
        for name, what in ((PRIVATE_DIR, "the sessions' private folder"), (POINTS_DIR, "the sessions' points folder")):
            inner = folder_at(fd, name, what, notes)
            os.close(fd)
            fd = inner
    finally:
        os.close(fd)
    return path


def ensure_private_dirs(workspace_root: Path, notes: Notes | None = None) -> None:
    """Create the private folders, owner-only: other host users have no business there.
    Whatever is at a folder's place and is not a folder is set aside (a line in
    `notes`), never followed."""
    root_fd = open_root(workspace_root)
    try:
        base_fd = folder_at(root_fd, PRIVATE_DIR, "the sessions' private folder", notes)
    finally:
        os.close(root_fd)
    try:
        for name, what in _MADE:
            os.close(folder_at(base_fd, name, what, notes))
        for name, what in _CLEARED:
            st = lstat_at(base_fd, name)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                set_aside(base_fd, name, what, notes=notes)
    finally:
        os.close(base_fd)
