"""The file system operations of a session's workspace, on its open folder.

Every function takes the workspace's folder as a descriptor (SessionWorkspace opens
it once per use) and a path relative to it, checked before use: no absolute path, no
`..`, no NUL byte. It is walked one component at a time with O_NOFOLLOW (safe_fs.py),
so a symbolic link anywhere in the path, which a guest can plant pointing into a
sibling session, makes the operation fail with UnsafePathError (a ValueError)
instead of being followed; a link is listed and deleted as itself, never opened.
Names the kernel leaves in a workspace for a moment (an atomic write's temporary
file, a copy-up of the notebook folder, a whiteout marker) are internal: never
listed, never a valid target.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..host.safe_fs import (
    FolderWalk,
    UnsafePathError,
    copy_file_data,
    iter_tree,
    lstat_at,
    open_dir,
    open_dir_path,
    remove_tree_at,
    tree_usage,
)
from .workspace_glob import MAX_PATTERN_CHARS, compile_pattern, glob_match

# Every name the host creates inside a workspace starts with this (a write's
# ".wasm-kernel-tmp-", notebook_folder_fs' ".wasm-kernel-copy-" and ".wasm-kernel-wh.").
INTERNAL_PREFIX = ".wasm-kernel-"
TMP_PREFIX = INTERNAL_PREFIX + "tmp-"
MAX_FOLDER_ENTRIES = 10_000  # a browser cannot show more; the listing says it was cut
# A walk of the whole workspace visits at most this many entries, for at most this
# long: a guest can fill its workspace with more than anyone could read.
LIST_MAX_ENTRIES = 100_000
LIST_MAX_SECONDS = 10.0

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: never hang on a FIFO
_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                  (stat.S_ISBLK, "a device"))


def is_internal_name(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


@dataclass(frozen=True)
class WorkspaceEntry:
    """One entry of a workspace, as every door shows it."""

    name: str
    path: str  # workspace-relative, "/"-separated; "" for the workspace itself
    kind: str  # "directory", "file", "link" or "other" (a FIFO, a socket, a device)
    size: int  # bytes; a link's own size, never its target's
    modified: float  # mtime, seconds since the epoch
    created: float  # ctime

    @property
    def is_link(self) -> bool:
        return self.kind == "link"


@dataclass(frozen=True)
class Listing:
    entries: list[WorkspaceEntry]  # sorted by path
    cut: str | None = None  # why the walk stopped early, if it did


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


def checked_parts(relative_path: str | os.PathLike[str]) -> list[str]:
    """split_relative_path, with the kernel's internal names out of reach (as missing)."""
    parts = split_relative_path(relative_path)
    if any(is_internal_name(p) for p in parts):
        raise FileNotFoundError(errno.ENOENT, f"{os.fspath(relative_path)!r} does not exist in the session workspace")
    return parts


def file_parts(relative_path: str | os.PathLike[str]) -> tuple[str, list[str]]:
    """(the path as shown, its parts) of a path that names an entry, not the workspace."""
    parts = checked_parts(relative_path)
    if not parts:
        raise ValueError(f"path {os.fspath(relative_path)!r} names the workspace itself, not a file in it")
    return "/".join(parts), parts


def _kind(st: os.stat_result) -> str:
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return "other"


def entry_of(parts: list[str], st: os.stat_result) -> WorkspaceEntry:
    return WorkspaceEntry(parts[-1] if parts else "", "/".join(parts), _kind(st), st.st_size, st.st_mtime,
                          st.st_ctime)


# --- reading ---------------------------------------------------------------------------


def stat_entry(ws_fd: int, parts: list[str]) -> WorkspaceEntry | None:
    """What the path is (None if it does not exist); the workspace itself for []."""
    if not parts:
        return entry_of(parts, os.fstat(ws_fd))
    try:
        parent = open_dir_path(ws_fd, parts[:-1])
    except FileNotFoundError:
        return None
    try:
        st = lstat_at(parent, parts[-1])
    finally:
        os.close(parent)
    return None if st is None else entry_of(parts, st)


def list_folder(ws_fd: int, parts: list[str], max_entries: int = MAX_FOLDER_ENTRIES) -> Listing:
    """The entries of one folder, sorted by name, internal names left out."""
    entries: list[WorkspaceEntry] = []
    cut = None
    fd = open_dir_path(ws_fd, parts)  # the folder itself, walked without following links
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
                entries.append(entry_of([*parts, item.name], st))
    finally:
        os.close(fd)
    entries.sort(key=lambda e: e.name)
    return Listing(entries, cut)


def find_files(ws_fd: int, pattern: str, max_entries: int = LIST_MAX_ENTRIES,
               max_seconds: float = LIST_MAX_SECONDS, folders: bool = False) -> Listing:
    """The files (and links, as themselves) whose paths match the glob `pattern`,
    sorted; folders too if asked, internal names never. Bounded in depth, entries
    and time (`cut` says where the walk stopped)."""
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern is {len(pattern):,} characters long; give at most {MAX_PATTERN_CHARS:,}")
    pattern_parts = compile_pattern(split_relative_path(pattern, "pattern"))
    walk = FolderWalk(ws_fd, max_entries=max_entries, deadline=time.monotonic() + max_seconds)
    found = sorted(
        (entry_of(parts, st) for parts, st in ((rel.split("/"), st) for rel, st in iter_tree(ws_fd, walk))
         if (folders or not stat.S_ISDIR(st.st_mode)) and not any(is_internal_name(p) for p in parts)
         and glob_match(pattern_parts, tuple(parts))),
        key=lambda entry: entry.path,
    )
    return Listing(found, walk.cut)


def open_file(ws_fd: int, parts: list[str], shown: str) -> tuple[int, int]:
    """(a read-only descriptor, size) of a regular file, opened without following a
    link and without blocking on a FIFO; the caller closes it."""
    parent = open_dir_path(ws_fd, parts[:-1])
    try:
        # Refused before it is opened: opening a device node can act on the device.
        require_regular(lstat_at(parent, parts[-1]), shown)
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=parent)
        except OSError as err:
            raise explain(err, parent, parts[-1], shown) from None
    finally:
        os.close(parent)
    st = os.fstat(fd)
    try:
        require_regular(st, shown)  # swapped for something else since the lstat
    except BaseException:
        os.close(fd)
        raise
    return fd, st.st_size


def read_head(fd: int, size: int, max_bytes: int | None) -> bytes:
    """The first max_bytes (all, for None) of an open file of `size` bytes."""
    want = size if max_bytes is None else min(size, max_bytes)
    chunks, got = [], 0
    while got < want and (chunk := os.read(fd, min(1 << 20, want - got))):
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def require_regular(st: os.stat_result | None, shown: str) -> None:
    """Refuse a folder or a special file (a link is left to O_NOFOLLOW, a missing
    name to the open): only regular files are read or written."""
    if st is None or stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, f"{shown!r} is a directory")
    kind = next((name for test, name in _SPECIAL_KINDS if test(st.st_mode)), "a special file")
    raise ValueError(f"{shown!r} is {kind}, not a regular file; only regular files are read or written")


def explain(err: OSError, dir_fd: int, name: str, shown: str) -> Exception:
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


# --- what a write costs ----------------------------------------------------------------


def cost_of_write(ws_fd: int, parts: list[str], length: int, append: bool) -> tuple[tuple[int, int], int]:
    """What a write of `length` bytes at the path would add, as (bytes, names): the
    file's growth, itself if new, and each folder on the way that it would make; and
    the bytes of the file it would replace."""
    fd = os.dup(ws_fd)
    try:
        for i, name in enumerate(parts[:-1]):
            st = lstat_at(fd, name)
            if st is None:
                return (length, len(parts) - i), 0  # these folders and the file are all new
            nxt = open_dir(fd, name, "/".join(parts[: i + 1]))
            os.close(fd)
            fd = nxt
        st = lstat_at(fd, parts[-1])
    finally:
        os.close(fd)
    if st is None:
        return (length, 1), 0
    if not stat.S_ISREG(st.st_mode):
        return (length, 0), 0  # refused by the write itself
    return ((length if append else length - st.st_size), 0), st.st_size


def cost_of(ws_fd: int, parts: list[str]) -> tuple[int, int]:
    """(bytes, names) an entry holds: what deleting it frees (no link followed)."""
    if not parts:
        return 0, 0
    fd = open_dir_path(ws_fd, parts[:-1])
    try:
        st = lstat_at(fd, parts[-1])
        if st is None:
            return 0, 0
        if stat.S_ISDIR(st.st_mode):
            inner = open_dir(fd, parts[-1], "/".join(parts))
            try:
                size, names = tree_usage(inner)
            finally:
                os.close(inner)
            return size, names + 1
        return (st.st_size if st.st_nlink <= 1 or stat.S_ISLNK(st.st_mode) else 0), 1
    finally:
        os.close(fd)


# --- writing ---------------------------------------------------------------------------


def append_file(ws_fd: int, parts: list[str], shown: str, data: bytes) -> bool:
    """Append `data` to a file (made if missing, with its folders), with O_APPEND:
    what is there already is never read. True if the file existed."""
    parent = open_dir_path(ws_fd, parts[:-1], create=True)
    try:
        before = lstat_at(parent, parts[-1])
        require_regular(before, shown)
        try:
            fd = os.open(parts[-1], _APPEND_FLAGS, 0o666, dir_fd=parent)
        except OSError as err:
            raise explain(err, parent, parts[-1], shown) from None
        try:
            require_regular(os.fstat(fd), shown)
            write_all(fd, data)
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return before is not None


def place_file(ws_fd: int, parts: list[str], shown: str, overwrite: bool, fill: Callable[[int], None]) -> bool:
    """Make a temporary file in the target's folder (made if missing), `fill` it, then
    move it into place: the guest never sees a half-written file. With overwrite=False
    any existing entry is refused (FileExistsError) and the last step is a hard link,
    which cannot replace. A link at the path is refused even with overwrite. True if
    it replaced a file."""
    parent = open_dir_path(ws_fd, parts[:-1], create=True)
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
    return existing is not None


def copy_into(source_fd: int, size: int) -> tuple[Callable[[int], None], Callable[[], int]]:
    """A `fill` for place_file that copies the first `size` bytes of an open file one
    piece at a time, holes kept (safe_fs.copy_file_data), and how many it copied."""
    copied = [0]

    def fill(fd: int) -> None:
        copied[0] = copy_file_data(source_fd, fd, size)

    return fill, lambda: copied[0]


def _write_temp(dir_fd: int, fill: Callable[[int], None]) -> str:
    name = TMP_PREFIX + secrets.token_hex(8)
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


def write_all(fd: int, data: bytes) -> None:
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


def make_folder(ws_fd: int, parts: list[str]) -> None:
    """Make one folder; its parent must exist, and nothing may be at the path."""
    if not parts:
        raise FileExistsError(errno.EEXIST, "the workspace itself already exists")
    parent = open_dir_path(ws_fd, parts[:-1])
    try:
        os.mkdir(parts[-1], 0o755, dir_fd=parent)
    except FileExistsError:
        raise FileExistsError(errno.EEXIST, f"{'/'.join(parts)!r} already exists") from None
    finally:
        os.close(parent)


def rename_entry(ws_fd: int, old: list[str], new: list[str]) -> None:
    """Rename an entry (a link as itself). The new name must not exist: a rename never
    replaces a file or a folder. The check and the rename are two steps, so a guest
    making the same name in between loses its entry to ours only if it is a file;
    that is the guest racing its own user."""
    if not old or not new:
        raise ValueError("the workspace itself cannot be renamed")
    if new[: len(old)] == old:
        raise ValueError(f"cannot move {'/'.join(old)!r} into itself")
    src = open_dir_path(ws_fd, old[:-1])
    try:
        dst = open_dir_path(ws_fd, new[:-1])
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


def delete_entry(ws_fd: int, parts: list[str], shown: str, recursive: bool) -> None:
    """Delete a file, a link (the link, not its target) or, recursive, a folder and
    everything in it. A non-empty folder without recursive is OSError(ENOTEMPTY), a
    missing path FileNotFoundError."""
    parent = open_dir_path(ws_fd, parts[:-1])
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

