"""The seed's host-side file functions on a session's workspace, each one use of the
one door (session_workspace.SessionWorkspace) with its log event.

Every path is relative to the session's workspace and checked before use: no
absolute paths, no `..` components, no NUL bytes. Then it is walked one component
at a time with O_NOFOLLOW (workspace_fs.py), so a symlink anywhere in the path, which
a guest can plant pointing into a sibling session, makes the operation fail with
UnsafePathError (a ValueError) instead of being followed. Listing reports a link as
itself; deleting a link removes the link, never its target. The kernel's internal
names (an atomic write's temporary file, a notebook folder's copy-ups and
whiteouts) are never listed and never a target.

These write nothing to the session's disk ledger: they are the library's, whose
caller is the operator. The kernel's doors charge it (SessionWorkspace's limits).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..core.logger import SandboxLogger
from ..host.safe_fs import UnsafePathError
from .layout import DEFAULT_WORKSPACE_ROOT
from .session_workspace import SessionWorkspace
from .workspace_fs import (
    LIST_MAX_ENTRIES, LIST_MAX_SECONDS, Listing, WorkspaceEntry, file_parts, split_relative_path,
)


def _log(logger: SandboxLogger | None, event: str, **fields: object) -> None:
    (logger or SandboxLogger()).log_event(event, **fields)


def list_session_files(
    session_id: str,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    pattern: str = "**",
    *,
    logger: SandboxLogger | None = None,
) -> list[str]:
    """Workspace-relative paths of the files (and symlinks, as themselves) matching
    `pattern`, sorted. Folders are not listed; links are never followed. The walk
    is bounded as list_session_file_info's is.

    `pattern` has glob semantics on "/"-separated paths: `*`, `?` and `[...]` match
    within one component, `**` matches any number of components. So "*.csv" is the
    top level only, "**/*.csv" any depth, and the default "**" everything.
    """
    return [entry.path for entry in list_session_file_info(session_id, workspace_root, pattern, logger=logger).entries]


def list_session_file_info(
    session_id: str,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    pattern: str = "**",
    *,
    logger: SandboxLogger | None = None,
    max_entries: int = LIST_MAX_ENTRIES,
    max_seconds: float = LIST_MAX_SECONDS,
) -> Listing:
    """list_session_files with each entry's size and times, from the same no-follow
    walk, bounded in depth, entries and time (`cut` says where it stopped)."""
    with SessionWorkspace(workspace_root, session_id) as workspace:
        listing = workspace.find(pattern, max_entries=max_entries, max_seconds=max_seconds)
    _log(logger, "session.file.list", session_id=workspace.session_id, pattern=pattern, count=len(listing.entries),
         cut=listing.cut)
    return listing


def read_session_file(
    session_id: str,
    relative_path: str | os.PathLike[str],
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    *,
    logger: SandboxLogger | None = None,
) -> bytes:
    """The bytes of a regular file in the session's workspace."""
    return read_session_file_head(session_id, relative_path, workspace_root, None, logger=logger)[0]


def read_session_file_head(
    session_id: str,
    relative_path: str | os.PathLike[str],
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    max_bytes: int | None = None,
    *,
    logger: SandboxLogger | None = None,
) -> tuple[bytes, int]:
    """(the first max_bytes of a regular file, its size): the size comes from fstat,
    so a huge or sparse file costs no more to show than its head."""
    shown, _parts = file_parts(relative_path)
    with SessionWorkspace(workspace_root, session_id) as workspace:
        data, size = workspace.read(shown, max_bytes)
    _log(logger, "session.file.read", session_id=workspace.session_id, path=shown, size_bytes=len(data))
    return data, size


def open_session_file(session_id: str, relative_path: str | os.PathLike[str],
                      workspace_root: Path = DEFAULT_WORKSPACE_ROOT) -> tuple[int, int]:
    """(a read-only descriptor, size) of a regular file of the workspace, opened
    without following a link and without blocking on a FIFO; the caller closes it
    (and may stream it: a file may be as big as the quota)."""
    with SessionWorkspace(workspace_root, session_id) as workspace:
        return workspace.open_file(os.fspath(relative_path))


def append_session_file(
    session_id: str,
    relative_path: str | os.PathLike[str],
    data: bytes,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    *,
    logger: SandboxLogger | None = None,
) -> bool:
    """Append `data` to a file of the workspace (made if missing, with its folders),
    with O_APPEND: what is there already is never read. True if the file existed."""
    shown, _parts = file_parts(relative_path)
    with SessionWorkspace(workspace_root, session_id) as workspace:
        existed = workspace.write(shown, bytes(data), append=True)
    _log(logger, "session.file.append", session_id=workspace.session_id, path=shown, size_bytes=len(data))
    return existed


def write_session_file(
    session_id: str,
    relative_path: str | os.PathLike[str],
    data: bytes,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    overwrite: bool = False,
    *,
    logger: SandboxLogger | None = None,
) -> bool:
    """Write `data` to a file in the session's workspace, creating missing folders;
    True if it replaced a file.

    Atomic: the bytes go to a temp file in the same folder which is then renamed
    into place, so the guest never sees a half-written file. With overwrite=False
    any existing entry, even an empty file, is refused (FileExistsError); the final
    step is a hard link, which cannot replace, so a file that appears meanwhile is
    not clobbered either. A symlink at the path is refused even with overwrite.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    shown, _parts = file_parts(relative_path)
    with SessionWorkspace(workspace_root, session_id) as workspace:
        existed = workspace.write(shown, bytes(data), overwrite=overwrite)
    _log(logger, "session.file.write", session_id=workspace.session_id, path=shown, size_bytes=len(data))
    return existed


def copy_session_file(
    session_id: str,
    source_fd: int,
    size: int,
    relative_path: str | os.PathLike[str],
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    *,
    logger: SandboxLogger | None = None,
) -> int:
    """Write a new file holding the first `size` bytes of an open file (as
    open_session_file gives it), streamed one piece at a time with its holes kept,
    atomic and never replacing, as write_session_file with overwrite=False. Returns
    the bytes copied: a file as big as the quota costs one piece of memory to copy."""
    shown, _parts = file_parts(relative_path)
    with SessionWorkspace(workspace_root, session_id) as workspace:
        copied = workspace.copy_in(source_fd, size, shown)
    _log(logger, "session.file.copy", session_id=workspace.session_id, path=shown, size_bytes=copied)
    return copied


def delete_session_path(
    session_id: str,
    relative_path: str | os.PathLike[str],
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    recursive: bool = False,
    *,
    logger: SandboxLogger | None = None,
) -> None:
    """Delete a file, a symlink (the link, not its target) or, with recursive=True,
    a folder and everything in it. A non-empty folder without recursive raises
    OSError(ENOTEMPTY); a missing path raises FileNotFoundError. The workspace itself
    cannot be deleted here: use delete_session_workspace."""
    shown, _parts = file_parts(relative_path)
    with SessionWorkspace(workspace_root, session_id) as workspace:
        workspace.delete(shown, recursive=recursive)
    _log(logger, "session.file.delete", session_id=workspace.session_id, path=shown)


__all__ = [
    "UnsafePathError", "WorkspaceEntry", "append_session_file", "copy_session_file", "delete_session_path",
    "list_session_file_info", "list_session_files", "open_session_file", "read_session_file",
    "read_session_file_head", "split_relative_path", "write_session_file",
]
