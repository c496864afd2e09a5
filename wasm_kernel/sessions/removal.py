"""Removing a session's files: its workspace (never following links) and its metadata.

Its own module so that both lifecycle.py (delete_session_workspace) and
registry.py (cleanup with prune_workspaces) can use it, and lifecycle.py can in
turn use the registry without an import cycle.
"""

from __future__ import annotations

import os
from pathlib import Path

from .history_store import remove_session_history
from .layout import metadata_path
from .package_folder import remove_packages
from .saved_state import remove_saved_state
from .session_workspace import LEDGER_DIR
from ..host.safe_fs import DIR_NOFOLLOW, UnsafePathError, open_dir_path, open_root, remove_entry_at
from ..host.set_aside import remove_set_aside
from .layout import POINTS_DIR, PRIVATE_DIR
from .session_ids import validate_session_id


def remove_session_files(workspace_root: Path, session_id: str) -> bool:
    """Remove the workspace (never following links) and the metadata; True if the
    workspace existed. The caller decides about the lease: delete_session_workspace
    goes ahead even when a sandbox holds it, the registry's cleanup only with the
    exclusive lease in hand."""
    session_id = validate_session_id(session_id)
    root = Path(workspace_root)
    root_fd = open_root(root)
    try:
        existed = remove_entry_at(root_fd, session_id)
    finally:
        os.close(root_fd)
    remove_private_files(root, session_id)
    return existed


def remove_private_files(workspace_root: Path, session_id: str) -> None:
    """What we keep about a session outside its workspace: metadata, history, the
    packages %pip installed, its saved interpreter state and its disk ledger, with
    whatever was set aside at their places (host/set_aside.py)."""
    path = metadata_path(workspace_root, session_id)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    try:
        dir_fd = os.open(path.parent, DIR_NOFOLLOW)
    except OSError:
        pass
    else:
        try:
            remove_set_aside(dir_fd, path.name)
        finally:
            os.close(dir_fd)
    remove_session_history(workspace_root, session_id)
    remove_packages(workspace_root, session_id)
    remove_saved_state(workspace_root, session_id)
    _remove_private_entry(workspace_root, LEDGER_DIR, session_id)
    _remove_private_entry(workspace_root, POINTS_DIR, session_id)


def _remove_private_entry(workspace_root: Path, folder: str, session_id: str) -> None:
    """<root>/.wasm-kernel/<folder>/<session_id>, file or tree, never following a link."""
    try:
        top = open_root(workspace_root)
    except OSError:
        return
    try:
        parent = open_dir_path(top, [PRIVATE_DIR, folder])
    except (OSError, UnsafePathError):
        return
    finally:
        os.close(top)
    try:
        remove_entry_at(parent, session_id)
    finally:
        os.close(parent)
