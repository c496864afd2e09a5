"""Host-side file operations on a session's workspace.

Every path is relative to the session's workspace and checked before use: no
absolute paths, no `..` components, no NUL bytes. Then it is walked one component
at a time with O_NOFOLLOW (safe_fs.py), so a symlink anywhere in the path, which
a guest can plant pointing into a sibling session, makes the operation fail with
UnsafePathError (a ValueError) instead of being followed. Listing reports a link as
itself; deleting a link removes the link, never its target. Listings leave out the
whiteout markers of removed notebook-folder files (runtime/notebook_folder_fs.py):
they are the kernel's bookkeeping, not the user's files.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..core.logger import SandboxLogger
from .layout import DEFAULT_WORKSPACE_ROOT
from ..host.safe_fs import (
    FolderWalk,
    UnsafePathError,
    copy_file_data,
    iter_tree,
    lstat_at,
    open_dir,
    open_dir_path,
    open_root,
    remove_tree_at,
)
from ..runtime.notebook_folder_fs import is_whiteout
from .session_ids import validate_session_id

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: never hang on a FIFO
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_TMP_PREFIX = ".wasm-kernel-tmp-"


def split_relative_path(relative_path: str | os.PathLike[str], what: str = "path") -> list[str]:
    """The components of a workspace-relative path, or ValueError saying what is wrong.

    `.` and empty components are dropped ("a//b/./c" is a/b/c); an empty result
    means the workspace itself.
    """
    text = os.fspath(relative_path)
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a str, got {type(text).__name__}")
    if "\x00" in text:
        raise ValueError(f"{what} {text!r} contains a NUL byte")
    if text.startswith("/"):
        raise ValueError(f"{what} {text!r} is absolute; give a path relative to the session workspace")
    parts = [p for p in text.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ValueError(f"{what} {text!r} contains '..'; paths must stay inside the session workspace")
    return parts


class _Workspace:
    """The open workspace of one session: a descriptor, closed on exit."""

    def __init__(self, session_id: str, workspace_root: Path) -> None:
        self.session_id = validate_session_id(session_id)
        root_fd = open_root(workspace_root)
        try:
            try:
                self.fd = open_dir(root_fd, self.session_id, self.session_id)
            except FileNotFoundError:
                raise FileNotFoundError(
                    errno.ENOENT, f"session {self.session_id} has no workspace under {str(workspace_root)!r}"
                ) from None
        finally:
            os.close(root_fd)

    def parent_of(self, parts: list[str]) -> int:
        """The folder holding parts[-1], opened without following links."""
        return open_dir_path(self.fd, parts[:-1])

    def __enter__(self) -> _Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)


def _require_file_path(relative_path: str | os.PathLike[str]) -> tuple[str, list[str]]:
    parts = split_relative_path(relative_path)
    if not parts:
        raise ValueError(f"path {os.fspath(relative_path)!r} names the workspace itself, not a file in it")
    return "/".join(parts), parts


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
    return [info.path for info in list_session_file_info(session_id, workspace_root, pattern, logger=logger).files]


@dataclass(frozen=True)
class SessionFileInfo:
    """One workspace entry as the magics and the file-change display show it."""

    path: str  # workspace-relative, "/"-separated
    size: int  # bytes; a symlink's own size, never its target's
    modified: float  # mtime, seconds since the epoch
    is_link: bool = False


def _info(rel: str, st: os.stat_result) -> SessionFileInfo:
    return SessionFileInfo(rel, st.st_size, st.st_mtime, stat.S_ISLNK(st.st_mode))


@dataclass(frozen=True)
class FileListing:
    files: list[SessionFileInfo]  # sorted by path
    cut: str | None = None  # why the walk stopped early (safe_fs.FolderWalk.cut), if it did


# A listing walks at most this many entries, for at most this long: a guest can
# fill its workspace with more than anyone could read.
LIST_MAX_ENTRIES = 100_000
LIST_MAX_SECONDS = 10.0


def list_session_file_info(
    session_id: str,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    pattern: str = "**",
    *,
    logger: SandboxLogger | None = None,
    max_entries: int = LIST_MAX_ENTRIES,
    max_seconds: float = LIST_MAX_SECONDS,
) -> FileListing:
    """list_session_files with each entry's size and mtime, from the same no-follow
    walk, bounded in depth, entries and time (`cut` says where it stopped)."""
    pattern_parts = _pattern(pattern)
    with _Workspace(session_id, workspace_root) as ws:
        walk = FolderWalk(ws.fd, max_entries=max_entries, deadline=time.monotonic() + max_seconds)
        found = sorted(
            (_info(rel, st) for rel, st in iter_tree(ws.fd, walk)
             if not stat.S_ISDIR(st.st_mode) and not is_whiteout(rel.rpartition("/")[2])
             and _glob_match(pattern_parts, tuple(rel.split("/")))),
            key=lambda info: info.path,
        )
    (logger or SandboxLogger()).log_event(
        "session.file.list", session_id=ws.session_id, pattern=pattern, count=len(found), cut=walk.cut
    )
    return FileListing(found, walk.cut)


def stat_session_paths(
    session_id: str, workspace_root: Path, relative_paths: list[str]
) -> dict[str, SessionFileInfo | None]:
    """Size and mtime of each path (None if gone, unsafe or a folder), walking every
    component without following links, as every other operation here does."""
    out: dict[str, SessionFileInfo | None] = {}
    with _Workspace(session_id, workspace_root) as ws:
        for rel in relative_paths:
            out[rel] = None
            try:
                parts = split_relative_path(rel)
                if not parts:
                    continue
                fd = ws.parent_of(parts)
            except (ValueError, OSError):
                continue
            try:
                st = lstat_at(fd, parts[-1])
            finally:
                os.close(fd)
            if st is not None and not stat.S_ISDIR(st.st_mode):
                out[rel] = _info("/".join(parts), st)
    return out


MAX_PATTERN_CHARS = 4096


def _pattern(pattern: str) -> tuple[str, ...]:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern is {len(pattern):,} characters long; give at most {MAX_PATTERN_CHARS:,}")
    parts: list[str] = []
    for part in split_relative_path(pattern, "pattern") or ["**"]:
        if not (part == "**" and parts and parts[-1] == "**"):  # a/**/**/b is a/**/b
            parts.append(part)
    return tuple(parts)


def _glob_match(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    """Whether the path's components match: one pass over them, carrying the set of
    pattern positions still possible, so no pattern can cost more than
    len(pattern) * len(parts) component matches."""
    states = _skip_globstars({0}, pattern)
    for part in parts:
        moved = set()
        for i in states:
            if i == len(pattern):
                continue
            if pattern[i] == "**":
                moved.add(i)  # ** takes this component too
            elif _component_match(part, pattern[i]):
                moved.add(i + 1)
        states = _skip_globstars(moved, pattern)
        if not states:
            return False
    return len(pattern) in states


def _skip_globstars(states: set[int], pattern: tuple[str, ...]) -> set[int]:
    """A ** may also match no component: wherever one stands, the next position is reachable."""
    out = set(states)
    for i in states:
        while i < len(pattern) and pattern[i] == "**":
            i += 1
            out.add(i)
    return out


@lru_cache(maxsize=4096)
def _component_match(name: str, pattern: str) -> bool:
    return fnmatch.fnmatchcase(name, pattern)


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
    shown, _parts = _require_file_path(relative_path)
    fd, size = open_session_file(session_id, shown, workspace_root)
    try:
        want = size if max_bytes is None else min(size, max_bytes)
        chunks, got = [], 0
        while got < want and (chunk := os.read(fd, min(1 << 20, want - got))):
            chunks.append(chunk)
            got += len(chunk)
        data = b"".join(chunks)
    finally:
        os.close(fd)
    (logger or SandboxLogger()).log_event(
        "session.file.read", session_id=validate_session_id(session_id), path=shown, size_bytes=len(data)
    )
    return data, size


def open_session_file(session_id: str, relative_path: str | os.PathLike[str],
                      workspace_root: Path = DEFAULT_WORKSPACE_ROOT) -> tuple[int, int]:
    """(a read-only descriptor, size) of a regular file of the workspace, opened
    without following a link and without blocking on a FIFO; the caller closes it
    (and may stream it: a file may be as big as the quota)."""
    shown, parts = _require_file_path(relative_path)
    with _Workspace(session_id, workspace_root) as ws:
        parent = ws.parent_of(parts)
        try:
            # Refused before it is opened: opening a device node can act on the device.
            _require_regular(lstat_at(parent, parts[-1]), shown)
            try:
                fd = os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
            except OSError as err:
                raise _explain(err, parent, parts[-1], shown) from None
        finally:
            os.close(parent)
    st = os.fstat(fd)
    try:
        _require_regular(st, shown)  # swapped for something else since the lstat
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                  (stat.S_ISBLK, "a device"))


def _require_regular(st: os.stat_result | None, shown: str) -> None:
    """Refuse a folder or a special file (a link is left to O_NOFOLLOW, a missing
    name to the open): only regular files are read or written."""
    if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{shown!r} is a directory")
    kind = next((name for test, name in _SPECIAL_KINDS if test(st.st_mode)), "a special file")
    raise ValueError(f"{shown!r} is {kind}, not a regular file; only regular files are read or written")


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
    shown, parts = _require_file_path(relative_path)
    with _Workspace(session_id, workspace_root) as ws:
        parent = open_dir_path(ws.fd, parts[:-1], create=True)
        try:
            before = lstat_at(parent, parts[-1])
            _require_regular(before, shown)
            existed = before is not None
            try:
                fd = os.open(parts[-1], _APPEND_FLAGS, 0o666, dir_fd=parent)
            except OSError as err:
                raise _explain(err, parent, parts[-1], shown) from None
            try:
                _require_regular(os.fstat(fd), shown)
                _write_all(fd, bytes(data))
            finally:
                os.close(fd)
        finally:
            os.close(parent)
    (logger or SandboxLogger()).log_event(
        "session.file.append", session_id=ws.session_id, path=shown, size_bytes=len(data)
    )
    return existed


def _explain(err: OSError, dir_fd: int, name: str, shown: str) -> Exception:
    """Turn O_NOFOLLOW's ELOOP (and a socket's ENXIO) into a message a caller can act on."""
    if err.errno == errno.ELOOP:
        st = lstat_at(dir_fd, name)
        if st is not None and stat.S_ISLNK(st.st_mode):
            return UnsafePathError(f"{shown!r} is a symbolic link; session file operations never follow links")
    if err.errno == errno.ENOENT:
        return FileNotFoundError(errno.ENOENT, f"{shown!r} does not exist in the session workspace")
    if err.errno == errno.ENXIO:  # a socket, or a FIFO with no reader, put there since the lstat
        return ValueError(f"{shown!r} is not a regular file; only regular files are read or written")
    return err


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
    data = bytes(data)
    sid, shown, existed = _place_file(session_id, relative_path, workspace_root, overwrite,
                                      lambda fd: _write_all(fd, data))
    (logger or SandboxLogger()).log_event("session.file.write", session_id=sid, path=shown, size_bytes=len(data))
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
    open_session_file gives it), streamed one piece at a time with its holes kept
    (safe_fs.copy_file_data), atomic and never replacing, as write_session_file
    with overwrite=False. Returns the bytes copied: a file as big as the quota costs
    one piece of memory to copy."""
    copied = 0

    def fill(fd: int) -> None:
        nonlocal copied
        copied = copy_file_data(source_fd, fd, size)

    sid, shown, _existed = _place_file(session_id, relative_path, workspace_root, False, fill)
    (logger or SandboxLogger()).log_event("session.file.copy", session_id=sid, path=shown, size_bytes=copied)
    return copied


def _place_file(session_id: str, relative_path: str | os.PathLike[str], workspace_root: Path, overwrite: bool,
                fill: Callable[[int], None]) -> tuple[str, str, bool]:
    """Make a temp file in the target's folder, `fill` it, then move it into place
    (write_session_file's rules); (session id, shown path, whether it replaced)."""
    shown, parts = _require_file_path(relative_path)
    with _Workspace(session_id, workspace_root) as ws:
        parent = open_dir_path(ws.fd, parts[:-1], create=True)
        try:
            name = parts[-1]
            existing = lstat_at(parent, name)
            if existing is not None:
                if stat.S_ISLNK(existing.st_mode):
                    raise UnsafePathError(f"{shown!r} is a symbolic link; session file operations never follow links")
                if stat.S_ISDIR(existing.st_mode):
                    raise IsADirectoryError(errno.EISDIR, f"{shown!r} is a directory")
                if not overwrite:
                    raise FileExistsError(errno.EEXIST, f"{shown!r} already exists (pass overwrite=True to replace it)")
            try:
                tmp = _write_temp(parent, fill)
            except OSError as err:
                # Name the caller's path, not our temp file's.
                raise type(err)(err.errno, f"cannot write {shown!r}: {err.strerror}") from None
            try:
                if overwrite:
                    os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
                else:
                    _link_no_replace(parent, tmp, name, shown)
            finally:
                try:
                    os.unlink(tmp, dir_fd=parent)
                except FileNotFoundError:
                    pass
        finally:
            os.close(parent)
    return ws.session_id, shown, existing is not None


def _write_temp(dir_fd: int, fill: Callable[[int], None]) -> str:
    name = _TMP_PREFIX + secrets.token_hex(8)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=dir_fd)
    try:
        fill(fd)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(name, dir_fd=dir_fd)
        raise
    os.close(fd)
    return name


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _link_no_replace(dir_fd: int, tmp: str, name: str, shown: str) -> None:
    try:
        os.link(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{shown!r} already exists (pass overwrite=True to replace it)") from None
    except OSError as err:
        if err.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EMLINK):
            raise
        # No hard links on this filesystem: check, then rename (a small race remains).
        if lstat_at(dir_fd, name) is not None:
            raise FileExistsError(errno.EEXIST, f"{shown!r} already exists (pass overwrite=True to replace it)") from None
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


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
    shown, parts = _require_file_path(relative_path)
    with _Workspace(session_id, workspace_root) as ws:
        parent = ws.parent_of(parts)
        try:
            name = parts[-1]
            st = lstat_at(parent, name)
            if st is None:
                raise FileNotFoundError(errno.ENOENT, f"{shown!r} does not exist in the session workspace")
            if not stat.S_ISDIR(st.st_mode):
                os.unlink(name, dir_fd=parent)
            elif recursive:
                remove_tree_at(parent, name)
            else:
                try:
                    os.rmdir(name, dir_fd=parent)
                except OSError as err:
                    if err.errno == errno.ENOTEMPTY:
                        raise OSError(errno.ENOTEMPTY, f"{shown!r} is a non-empty directory (pass recursive=True)") from None
                    raise
        finally:
            os.close(parent)
    (logger or SandboxLogger()).log_event("session.file.delete", session_id=ws.session_id, path=shown)
