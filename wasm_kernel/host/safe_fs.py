"""Descriptor-relative filesystem primitives that never follow a symlink.

A session guest can create relative symlinks that point anywhere, for example
`../<other-uuid>/secret`. It cannot follow them itself (WASI refuses), but host code
using ordinary paths would. So everything below walks a path one component at a
time, each opened relative to its parent's descriptor with O_NOFOLLOW, and trees
are walked and removed without recursion (a guest can build trees deeper than the
recursion limit and paths longer than PATH_MAX) and with a bounded number of open
descriptors.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
DIR_NOFOLLOW = DIR_FLAGS | os.O_NOFOLLOW
# Folders held open at once while walking; deeper ones are reopened from the top.
MAX_OPEN_DIRS = 64


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


def iter_tree(top_fd: int) -> Iterator[tuple[str, os.stat_result]]:
    """Every entry below top_fd as (relative path, lstat), depth first, no link followed.

    Directories are yielded too. Entries that vanish while walking are skipped: a
    running guest may be changing the tree.
    """
    # Frames: [fd or None (closed to bound descriptors), relative path, subfolders left].
    stack: list[list[Any]] = []
    try:
        stack.append([os.dup(top_fd), "", []])
        first = True
        while stack:
            frame = stack[-1]
            if first:
                first = False
                yield from _list_into(frame)
                continue
            fd, rel, pending = frame
            if not pending:
                stack.pop()
                if fd is not None:
                    os.close(fd)
                continue
            if fd is None:
                try:
                    fd = frame[0] = open_dir_path(top_fd, rel.split("/"))
                except (OSError, ValueError):
                    stack.pop()
                    continue
            name = pending.pop()
            try:
                child = os.open(name, DIR_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue  # gone, or swapped for a link since it was listed
            if len(stack) >= MAX_OPEN_DIRS:
                os.close(fd)
                frame[0] = None
            child_frame = [child, f"{rel}/{name}" if rel else name, []]
            stack.append(child_frame)
            yield from _list_into(child_frame)
    finally:
        for frame in stack:
            if frame[0] is not None:
                os.close(frame[0])


def _list_into(frame: list[Any]) -> Iterator[tuple[str, os.stat_result]]:
    fd, rel, pending = frame
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return
    for de in entries:
        try:
            st = de.stat(follow_symlinks=False)
        except OSError:
            continue
        path = f"{rel}/{de.name}" if rel else de.name
        if stat.S_ISDIR(st.st_mode):
            pending.append(de.name)
        yield path, st


def tree_size(top_fd: int) -> int:
    """Apparent bytes of every non-directory entry below top_fd (a link counts as
    itself, never its target), each inode counted once: what deleting it frees."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for _, st in iter_tree(top_fd):
        if stat.S_ISDIR(st.st_mode):
            continue
        key = (st.st_dev, st.st_ino)
        if st.st_nlink > 1:
            if key in seen:
                continue
            seen.add(key)
        total += st.st_size
    return total


def remove_tree_at(parent_fd: int, name: str) -> None:
    """Delete directory `name` (in parent_fd) and everything in it, without
    following links, recursing or holding more than MAX_OPEN_DIRS descriptors."""
    top = open_dir(parent_fd, name, name)
    # Frames: [fd or None, relative path, subfolders left or None before listing].
    stack: list[list[Any]] = [[top, "", None]]
    try:
        while stack:
            frame = stack[-1]
            if frame[0] is None:
                frame[0] = open_dir_path(top, frame[1].split("/"))
            fd = frame[0]
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
                if len(stack) >= MAX_OPEN_DIRS and fd != top:
                    os.close(fd)
                    frame[0] = None
                stack.append([child_fd, f"{frame[1]}/{child}" if frame[1] else child, None])
                continue
            stack.pop()
            if not stack:
                break
            os.close(fd)
            frame[0] = None
            parent = stack[-1]
            if parent[0] is None:
                parent[0] = open_dir_path(top, parent[1].split("/")) if parent[1] else os.dup(top)
            try:
                os.rmdir(frame[1].rpartition("/")[2], dir_fd=parent[0])
            except OSError as err:
                if err.errno != errno.ENOTEMPTY:
                    raise
                # Something was added meanwhile: list that folder again.
                stack.append([None, frame[1], None])
    finally:
        for frame in stack:
            if frame[0] is not None and frame[0] != top:
                os.close(frame[0])
        os.close(top)
    os.rmdir(name, dir_fd=parent_fd)


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
