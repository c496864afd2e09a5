"""Descriptor-relative filesystem primitives that never follow a symlink.

A session guest can create relative symlinks that point anywhere, for example
`../<other-uuid>/secret`. It cannot follow them itself (WASI refuses), but host code
using ordinary paths would. So everything below walks a path one component at a
time, each opened relative to its parent's descriptor with O_NOFOLLOW, and trees
are walked and removed without recursion (a guest can build trees deeper than the
recursion limit and paths longer than PATH_MAX), in time linear in their entries
and with a bounded number of open descriptors.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
DIR_NOFOLLOW = DIR_FLAGS | os.O_NOFOLLOW


class UnsafePathError(ValueError):
    """A path that must not be used: it escapes the workspace or runs through a symlink."""


def open_root(path: Path | str) -> int:
    """The workspace root, opened as a directory.

    The root is chosen by the host's operator, not by a guest, so it may itself be
    reached through a symlink (e.g. /tmp -> /private/tmp); everything below it may not.
    """
    try:
        return os.open(path, DIR_FLAGS)
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"workspace root {str(path)!r} does not exist") from None
    except NotADirectoryError:
        raise NotADirectoryError(errno.ENOTDIR, f"workspace root {str(path)!r} is not a directory") from None


def open_dir(parent_fd: int, name: str, shown: str) -> int:
    """Open directory `name` under parent_fd without following a link; `shown` names it in errors."""
    try:
        return os.open(name, DIR_NOFOLLOW, dir_fd=parent_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
            except OSError:
                raise err from None
            if stat.S_ISLNK(st.st_mode):
                raise UnsafePathError(
                    f"{shown!r} is a symbolic link; session file operations never follow links"
                ) from None
            raise NotADirectoryError(errno.ENOTDIR, f"{shown!r} is not a directory") from None
        if err.errno == errno.ENOENT:
            raise FileNotFoundError(errno.ENOENT, f"{shown!r} does not exist") from None
        raise


def open_dir_path(
    top_fd: int, parts: list[str], shown_prefix: str = "", *, create: bool = False, mode: int = 0o755
) -> int:
    """Open the directory top/parts[0]/parts[1]/... one component at a time,
    making missing ones (with `mode`) first when `create` is set.

    Returns a new descriptor (a dup of top_fd when parts is empty); the caller closes it.
    """
    fd = os.dup(top_fd)
    walked = shown_prefix
    try:
        for name in parts:
            walked = f"{walked}/{name}" if walked else name
            if create:
                try:
                    os.mkdir(name, mode, dir_fd=fd)
                except FileExistsError:
                    pass
            nxt = open_dir(fd, name, walked)
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def lstat_at(dir_fd: int, name: str) -> os.stat_result | None:
    """lstat of `name` in dir_fd, or None when it does not exist."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None


# A walk that lists or tracks a tree stops this deep, and at relative paths this
# long: a guest can nest folders without end (WASI resolves names one component at
# a time), and every path string below such a folder would be longer than the last.
MAX_WALK_DEPTH = 64
MAX_WALK_PATH = 4096


@dataclass
class Folder:
    """One folder of a walk: its relative path, its descriptor (open only until the
    walk moves on) and the lstat of each entry in it, subfolders included."""

    rel: str
    fd: int
    entries: list[tuple[str, os.stat_result]]

    def path(self, name: str) -> str:
        return f"{self.rel}/{name}" if self.rel else name


class FolderWalk:
    """Every folder from top_fd down, each before its subfolders, without recursion
    and without following a link.

    It holds one descriptor per level (at most max_depth + 1) and does O(entries)
    work. Past max_depth, past MAX_WALK_PATH, past max_entries or past the
    monotonic `deadline`, it stops descending or stops altogether, and `cut` says
    why in words a notebook can be shown. `on_open(fd, rel)` runs before a folder
    is listed (a watch set there misses nothing created after). Entries that vanish
    mid-walk are skipped: a running guest may be changing the tree.
    """

    def __init__(
        self,
        top_fd: int,
        *,
        max_depth: int = MAX_WALK_DEPTH,
        max_entries: int | None = None,
        deadline: float | None = None,
        on_open: Callable[[int, str], None] | None = None,
        start_depth: int = 0,
    ) -> None:
        self.top_fd = top_fd
        self.start_depth = start_depth  # how deep top_fd itself is, in the tree max_depth counts
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.deadline = deadline
        self.on_open = on_open
        self.cut: str | None = None
        self.entries_seen = 0

    def _note(self, why: str) -> None:
        if self.cut is None:
            self.cut = why

    def _list(self, fd: int) -> list[tuple[str, os.stat_result]] | None:
        entries = []
        try:
            with os.scandir(fd) as it:
                for de in it:
                    try:
                        entries.append((de.name, de.stat(follow_symlinks=False)))
                    except OSError:
                        continue
                    self.entries_seen += 1
                    if self.max_entries is not None and self.entries_seen > self.max_entries:
                        self._note(f"the tree holds more than {self.max_entries:,} entries")
                        return None
        except OSError:
            pass
        return entries

    def __iter__(self) -> Iterator[Folder]:
        # Frames: (fd, rel, depth, subfolders left to visit).
        stack: list[tuple[int, str, int, list[str]]] = []
        fd = os.dup(self.top_fd)
        try:
            rel, depth = "", self.start_depth
            while True:
                if self.on_open is not None:
                    self.on_open(fd, rel)
                entries = self._list(fd)
                if entries is None:
                    os.close(fd)
                    return
                folder = Folder(rel, fd, entries)
                stack.append((fd, rel, depth, [n for n, st in reversed(entries) if stat.S_ISDIR(st.st_mode)]))
                yield folder
                fd = -1
                while stack and fd < 0:
                    if self.deadline is not None and time.monotonic() > self.deadline:
                        self._note("walking the tree took longer than the time allowed")
                        return
                    top, rel, depth, pending = stack[-1]
                    if not pending:
                        os.close(top)
                        stack.pop()
                        continue
                    name = pending.pop()
                    child_rel = f"{rel}/{name}" if rel else name
                    if depth + 1 > self.max_depth:
                        self._note(f"folders nest more than {self.max_depth} deep")
                        continue
                    if len(child_rel) > MAX_WALK_PATH:
                        self._note(f"paths run longer than {MAX_WALK_PATH:,} characters")
                        continue
                    try:
                        fd = os.open(name, DIR_NOFOLLOW, dir_fd=top)
                    except OSError:
                        continue  # gone, or swapped for a link since it was listed
                    rel, depth = child_rel, depth + 1
                if fd < 0:
                    return
        finally:
            for top, *_ in stack:
                os.close(top)


def iter_tree(top_fd: int, walk: FolderWalk | None = None) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below top_fd as (relative path, lstat), no link followed; folders
    are yielded too. Pass a FolderWalk to bound it and read why it stopped."""
    for folder in walk if walk is not None else FolderWalk(top_fd):
        for name, st in folder.entries:
            yield folder.path(name), st


def tree_size(top_fd: int) -> int:
    """Apparent bytes of every non-directory entry below top_fd (a link counts as
    itself, never its target), each inode counted once: what deleting it frees."""
    return tree_usage(top_fd)[0]


def tree_usage(top_fd: int) -> tuple[int, int]:
    """(apparent bytes, entries) below top_fd at any depth: bytes as tree_size,
    entries counting every name (folders, files, links). Linear time, three
    descriptors, no link followed: what a disk quota charges for the tree."""
    seen: set[tuple[int, int]] = set()
    total = count = 0
    fd = os.dup(top_fd)
    # Frames: (name in its parent, (dev, ino), subfolders left or None before listing).
    frames: list[list[Any]] = [["", _identity(fd), None]]
    try:
        while True:
            frame = frames[-1]
            if frame[2] is None:
                frame[2] = []
                # Counted as listed, keeping only subfolders' names: a folder of
                # 200,000 files held as DirEntry objects with their stats was 150 MiB.
                try:
                    with os.scandir(fd) as it:
                        for de in it:
                            try:
                                st = de.stat(follow_symlinks=False)
                            except OSError:
                                continue
                            count += 1
                            if stat.S_ISDIR(st.st_mode):
                                frame[2].append(de.name)
                            elif st.st_nlink <= 1 or (key := (st.st_dev, st.st_ino)) not in seen:
                                if st.st_nlink > 1:
                                    seen.add(key)
                                total += st.st_size
                except OSError:
                    pass
            if frame[2]:
                child = frame[2].pop()
                try:
                    child_fd = os.open(child, DIR_NOFOLLOW, dir_fd=fd)
                except OSError:
                    continue
                os.close(fd)
                fd = child_fd
                frames.append([child, _identity(fd), None])
                continue
            if len(frames) == 1:
                break
            frames.pop()
            up = _climb(fd, frames[-1][1], top_fd, [f[0] for f in frames[1:]])
            os.close(fd)
            fd = up
    finally:
        os.close(fd)
    return total, count


def remove_tree_at(parent_fd: int, name: str) -> None:
    """Delete directory `name` (in parent_fd) and everything in it, at any depth,
    without following links or recursing, in O(entries) time and three descriptors.

    It climbs back through "..", checked against the device and inode it came down
    from; only if that fails (the tree was moved meanwhile) does it reopen the path
    from the top. Removal is never cut short: a tree too deep to list is still one
    a session must be able to delete.
    """
    top = open_dir(parent_fd, name, name)
    # Frames: (name in its parent, (dev, ino), subfolders left or None before listing).
    frames: list[list[Any]] = [[name, _identity(top), None]]
    fd = top
    try:
        while True:
            frame = frames[-1]
            if frame[2] is None:
                frame[2] = _unlink_files(fd)
            if frame[2]:
                child = frame[2].pop()
                try:
                    child_fd = os.open(child, DIR_NOFOLLOW, dir_fd=fd)
                except OSError as err:
                    if err.errno == errno.ENOENT:
                        continue
                    if err.errno in (errno.ELOOP, errno.ENOTDIR):
                        os.unlink(child, dir_fd=fd)  # swapped for a link or file: remove it, not its target
                        continue
                    raise
                os.close(fd)
                fd = child_fd
                frames.append([child, _identity(fd), None])
                continue
            if len(frames) == 1:
                break
            done = frames.pop()
            up = _climb(fd, frames[-1][1], parent_fd, [f[0] for f in frames])
            os.close(fd)
            fd = up
            try:
                os.rmdir(done[0], dir_fd=fd)
            except OSError as err:
                if err.errno == errno.ENOENT:
                    continue
                if err.errno != errno.ENOTEMPTY:
                    raise
                frames[-1][2] = None  # something was added meanwhile: list this folder again
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=parent_fd)


def _identity(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _climb(fd: int, expected: tuple[int, int], base_fd: int, names: list[str]) -> int:
    """The parent of folder `fd`, reached through "..", checked to be the folder
    with identity `expected`; when it is not (the tree was moved meanwhile), that
    folder reopened by its names from base_fd."""
    try:
        up = os.open("..", DIR_FLAGS, dir_fd=fd)
    except OSError:
        up = -1
    if up >= 0 and _identity(up) == expected:
        return up
    if up >= 0:
        os.close(up)
    found = open_dir_path(base_fd, names)
    if _identity(found) != expected:
        os.close(found)
        raise OSError(errno.ESTALE, "the folder being walked was moved")
    return found


def _unlink_files(fd: int) -> list[str]:
    """Unlink every non-directory entry of an open folder; return the subfolders."""
    folders = []
    with os.scandir(fd) as it:
        entries = list(it)
    for de in entries:
        st = lstat_at(fd, de.name)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            folders.append(de.name)
        else:
            try:
                os.unlink(de.name, dir_fd=fd)
            except FileNotFoundError:
                pass
    return folders


def remove_entry_at(parent_fd: int, name: str) -> bool:
    """Remove `name` whatever it is (a link is removed, never followed); False if absent."""
    st = lstat_at(parent_fd, name)
    if st is None:
        return False
    if stat.S_ISDIR(st.st_mode):
        remove_tree_at(parent_fd, name)
    else:
        try:
            os.unlink(name, dir_fd=parent_fd)
        except FileNotFoundError:
            return False
    return True


COPY_PIECE = 1 << 20


def copy_file_data(src_fd: int, dst_fd: int, size: int, piece: int = COPY_PIECE) -> int:
    """Copy the first `size` bytes of src_fd into dst_fd (both from offset 0), one
    `piece` at a time, so a copy costs one piece of memory whatever the file's size.

    Holes stay holes: only the data regions that lseek(SEEK_DATA/SEEK_HOLE) reports
    are read and written, and the size is set at the end, as `cp --sparse=auto`
    does, so copying a sparse 1 GiB file reads and writes only its data. A source
    that shrinks meanwhile (a guest truncating it) ends the copy at its new size.
    Returns the copy's size. (shutil's copies neither keep holes nor stop at a size.)
    """
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src_fd, offset, os.SEEK_DATA)
            end = min(os.lseek(src_fd, start, os.SEEK_HOLE), size)
        except OSError as err:
            if err.errno == errno.ENXIO:  # only a hole, or the end, from offset on
                break
            if err.errno != errno.EINVAL:
                raise
            start, end = offset, size  # no SEEK_DATA on this filesystem: copy every byte
        if start >= size:
            break
        while start < end:
            data = os.pread(src_fd, min(piece, end - start), start)
            if not data:
                break  # it shrank under us
            written = 0
            while written < len(data):
                written += os.pwrite(dst_fd, memoryview(data)[written:], start + written)
            start += len(data)
        if start < end:
            break
        offset = end
    size = min(size, os.fstat(src_fd).st_size)
    os.ftruncate(dst_fd, size)
    return size
