"""Folder-level operations on a session's workspace, for the file browser's drive.

file_ops.py reads, writes and deletes single paths; a file browser also lists one
folder at a time, makes folders, renames entries and needs to know what the
workspace already holds before it accepts an upload. The same rules hold: every
path is relative to the workspace, walked one component at a time without
following a link (safe_fs.open_dir_path), and a link is shown as itself, never
opened. Names the kernel itself leaves in a workspace for a moment (the temp
files of an atomic write, the copy-ups of the notebook folder) are internal:
never listed, never a valid target.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..host.safe_fs import UnsafePathError, lstat_at, open_dir_path
from .file_ops import _Workspace, split_relative_path
from .file_ops import open_session_file as _open_file

# Every name the host creates inside a workspace starts with this (file_ops'
# ".wasm-kernel-tmp-", notebook_folder_fs' ".wasm-kernel-copy-").
INTERNAL_PREFIX = ".wasm-kernel-"
MAX_FOLDER_ENTRIES = 10_000  # a browser cannot show more; the listing says it was cut


def is_internal_name(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


@dataclass(frozen=True)
class FolderEntry:
    name: str
    path: str  # workspace-relative, "/"-separated
    kind: str  # "directory", "file", "link" or "other" (a FIFO, a socket)
    size: int  # a link's own size, never its target's
    modified: float
    created: float


@dataclass(frozen=True)
class FolderListing:
    entries: list[FolderEntry]  # sorted by name
    cut: str | None = None


def _kind(st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return "other"


def _entry(parts: list[str], st: os.stat_result) -> FolderEntry:
    return FolderEntry(parts[-1] if parts else "", "/".join(parts), _kind(st), st.st_size, st.st_mtime, st.st_ctime)


def _checked(relative_path: str) -> list[str]:
    parts = split_relative_path(relative_path)
    if any(is_internal_name(p) for p in parts):
        raise FileNotFoundError(errno.ENOENT, f"{relative_path!r} does not exist in the session workspace")
    return parts


def stat_session_entry(session_id: str, relative_path: str, workspace_root: Path) -> FolderEntry | None:
    """What a workspace path is (None if it does not exist); the workspace itself for ''."""
    parts = _checked(relative_path)
    with _Workspace(session_id, workspace_root) as ws:
        if not parts:
            return _entry(parts, os.fstat(ws.fd))
        try:
            parent = ws.parent_of(parts)
        except FileNotFoundError:
            return None
        try:
            st = lstat_at(parent, parts[-1])
        finally:
            os.close(parent)
    return None if st is None else _entry(parts, st)


def list_session_folder(
    session_id: str, relative_path: str, workspace_root: Path, max_entries: int = MAX_FOLDER_ENTRIES
) -> FolderListing:
    """The entries of one workspace folder, sorted by name, internal names left out."""
    parts = _checked(relative_path)
    entries: list[FolderEntry] = []
    cut = None
    with _Workspace(session_id, workspace_root) as ws:
        fd = open_dir_path(ws.fd, parts)  # the folder itself, walked without following links
        try:
            with os.scandir(fd) as it:
                for item in it:
                    if is_internal_name(item.name):
                        continue
                    if len(entries) >= max_entries:
                        cut = f"showing the first {max_entries:,} entries of this folder"
                        break
                    try:
                        st = item.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue  # gone while we listed
                    entries.append(_entry([*parts, item.name], st))
        finally:
            os.close(fd)
    entries.sort(key=lambda e: e.name)
    return FolderListing(entries, cut)


def make_session_folder(session_id: str, relative_path: str, workspace_root: Path) -> None:
    """Make one folder; its parent must exist, and nothing may be at the path."""
    parts = _checked(relative_path)
    if not parts:
        raise FileExistsError(errno.EEXIST, "the workspace itself already exists")
    with _Workspace(session_id, workspace_root) as ws:
        parent = ws.parent_of(parts)
        try:
            os.mkdir(parts[-1], 0o755, dir_fd=parent)
        except FileExistsError:
            raise FileExistsError(errno.EEXIST, f"{'/'.join(parts)!r} already exists") from None
        finally:
            os.close(parent)


def rename_session_path(session_id: str, old_path: str, new_path: str, workspace_root: Path) -> None:
    """Rename an entry inside the workspace (a link is renamed as itself). The new
    name must not exist: a rename never replaces a file or a folder. The check and
    the rename are two steps, so a guest making the same name in between loses its
    entry to ours only if it is a file; that is the guest racing its own user."""
    old, new = _checked(old_path), _checked(new_path)
    if not old or not new:
        raise ValueError("the workspace itself cannot be renamed")
    if new[: len(old)] == old:
        raise ValueError(f"cannot move {'/'.join(old)!r} into itself")
    with _Workspace(session_id, workspace_root) as ws:
        src = ws.parent_of(old)
        try:
            dst = ws.parent_of(new)
            try:
                if lstat_at(src, old[-1]) is None:
                    raise FileNotFoundError(errno.ENOENT, f"{'/'.join(old)!r} does not exist in the session workspace")
                if lstat_at(dst, new[-1]) is not None:
                    raise FileExistsError(errno.EEXIST, f"{'/'.join(new)!r} already exists; choose another name")
                os.rename(old[-1], new[-1], src_dir_fd=src, dst_dir_fd=dst)
            finally:
                os.close(dst)
        finally:
            os.close(src)


def open_session_file(session_id: str, relative_path: str, workspace_root: Path) -> tuple[int, int]:
    """file_ops.open_session_file, with the kernel's internal names out of reach."""
    return _open_file(session_id, "/".join(_checked(relative_path)) or ".", workspace_root)


__all__ = [
    "FolderEntry",
    "FolderListing",
    "UnsafePathError",
    "is_internal_name",
    "list_session_folder",
    "make_session_folder",
    "open_session_file",
    "rename_session_path",
    "stat_session_entry",
]
