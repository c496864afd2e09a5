"""What a cell did to its workspace: files created, modified and deleted.

A snapshot records, for every file and symlink, its lstat identity (size,
mtime_ns, ctime_ns, inode, kind); symlinks are recorded by their target text and
never followed. Linux stamps mtime from a coarse clock, so a file rewritten with
the same size within one clock tick keeps its mtime: like git's "racily clean"
entries, any file whose timestamps are not safely older than the snapshot gets a
content hash, and the diff compares hashes where the stamps cannot tell.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Files stamped this close to the snapshot may change without a visible stamp change.
RACY_WINDOW_NS = 2_000_000_000
HASH_LIMIT = 64 << 20  # bigger racy files are compared by stamps only


@dataclass(frozen=True, slots=True)
class Entry:
    kind: str  # "file" | "link" | "other"
    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    digest: bytes | None = None  # content hash (files) or target (links), when racy

    def stamp(self) -> tuple[str, int, int, int, int]:
        return (self.kind, self.size, self.mtime_ns, self.ctime_ns, self.ino)


@dataclass(frozen=True)
class FileChanges:
    created: list[str]
    modified: list[str]
    deleted: list[str]

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted)


class WorkspaceSnapshot:
    def __init__(self, root: Path, entries: dict[str, Entry], taken_ns: int) -> None:
        self.root = root
        self.entries = entries
        self.taken_ns = taken_ns

    @classmethod
    def take(cls, root: Path, *, exclude: frozenset[str] = frozenset()) -> WorkspaceSnapshot:
        taken = time.time_ns()
        entries: dict[str, Entry] = {}
        _walk(str(root), entries, taken, exclude)
        return cls(root, entries, taken)

    def diff(self, after: WorkspaceSnapshot) -> FileChanges:
        before, now = self.entries, after.entries
        created = sorted(p for p in now if p not in before)
        deleted = sorted(p for p in before if p not in now)
        modified = []
        for path, old in before.items():
            new = now.get(path)
            if new is None:
                continue
            if old.stamp() != new.stamp():
                modified.append(path)
            elif old.digest is not None:
                # Racy at the first snapshot: the stamps prove nothing, compare contents.
                current = new.digest if new.digest is not None else _digest_rel(str(after.root), path, new.kind)
                if current != old.digest:
                    modified.append(path)
        return FileChanges(created, sorted(modified), deleted)


# Folders held open at once while walking; deeper ones are reopened from the root.
MAX_OPEN_DIRS = 64
_ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = _ROOT_FLAGS | getattr(os, "O_NOFOLLOW", 0)


def _walk(root: str, out: dict[str, Entry], taken: int, exclude: frozenset[str]) -> None:
    """Record every file and symlink under root, depth first, without recursion.

    Each folder is opened relative to its parent's descriptor with O_NOFOLLOW, so no
    symlink is ever followed and no host path grows past one name: the guest can make
    trees deeper than the recursion limit or longer than PATH_MAX (WASI resolves its
    paths component by component), and they are still walked.
    """
    try:
        root_fd = os.open(root, _ROOT_FLAGS)
    except OSError:
        return
    # Frames: [fd or None (closed to bound descriptors), relative path, subfolders to visit].
    stack: list[list[Any]] = [[root_fd, "", _list(root_fd, "", out, taken, exclude)]]
    try:
        while stack:
            frame = stack[-1]
            fd, rel, pending = frame
            if not pending:
                stack.pop()
                if fd is not None and fd != root_fd:
                    os.close(fd)
                continue
            if fd is None:
                try:
                    fd = frame[0] = _open_rel(root_fd, rel)
                except OSError:
                    stack.pop()
                    continue
            name = pending.pop()
            path = f"{rel}/{name}" if rel else name
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                continue
            if len(stack) >= MAX_OPEN_DIRS and fd != root_fd:
                os.close(fd)
                frame[0] = None
            frame = [child, path, []]
            stack.append(frame)  # on the stack first, so the finally below closes it
            frame[2] = _list(child, path, out, taken, exclude)
    finally:
        for fd, _, _ in stack:
            if fd is not None and fd != root_fd:
                os.close(fd)
        os.close(root_fd)


def _list(fd: int, rel: str, out: dict[str, Entry], taken: int, exclude: frozenset[str]) -> list[str]:
    """Record the files and links of one open folder; return its subfolders' names."""
    folders: list[str] = []
    try:
        it = os.scandir(fd)
    except OSError:
        return folders
    with it:
        for de in it:
            path = f"{rel}/{de.name}" if rel else de.name
            if path in exclude:
                continue
            try:
                st = de.stat(follow_symlinks=False)
            except OSError:
                continue
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                folders.append(de.name)
                continue
            kind = "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else "other"
            digest = None
            if kind == "link" or (kind == "file" and taken - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_WINDOW_NS):
                digest = _digest_at(fd, de.name, kind)
            out[path] = Entry(kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)
    return folders


def _open_rel(root_fd: int, rel: str) -> int:
    """The folder at `rel` under root_fd, opened one component at a time, never following links."""
    fd = root_fd
    try:
        for name in rel.split("/"):
            nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            if fd != root_fd:
                os.close(fd)
            fd = nxt
    except OSError:
        if fd != root_fd:
            os.close(fd)
        raise
    return fd


@contextmanager
def parent_dir(root: str, rel: str) -> Iterator[tuple[int, str] | None]:
    """(fd of the folder holding `rel`, its last name), reached from `root` one
    component at a time without following links; None if that folder is gone."""
    parent, _, name = rel.rpartition("/")
    try:
        root_fd = os.open(root, _ROOT_FLAGS)
    except OSError:
        yield None
        return
    try:
        fd = _open_rel(root_fd, parent) if parent else root_fd
    except OSError:
        os.close(root_fd)
        yield None
        return
    try:
        yield fd, name
    finally:
        if fd != root_fd:
            os.close(fd)
        os.close(root_fd)


def _digest_rel(root: str, rel: str, kind: str) -> bytes | None:
    with parent_dir(root, rel) as found:
        return None if found is None else _digest_at(found[0], found[1], kind)


def _digest_at(dir_fd: int, name: str, kind: str) -> bytes | None:
    try:
        if kind == "link":
            return os.readlink(name, dir_fd=dir_fd).encode("utf-8", "surrogateescape")
        if kind != "file":
            return None
        # O_NOFOLLOW: the path was a regular file at lstat time; never follow a
        # symlink swapped in since. O_NONBLOCK: never hang on a FIFO swapped in.
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0), dir_fd=dir_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > HASH_LIMIT:
            return None
        h = hashlib.blake2b(digest_size=16)
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.digest()
    except OSError:
        return None
    finally:
        os.close(fd)
