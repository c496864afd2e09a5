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
from dataclasses import dataclass
from pathlib import Path

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
        _walk(str(root), "", entries, taken, exclude)
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
                current = new.digest if new.digest is not None else _digest(os.path.join(str(after.root), path), new.kind)
                if current != old.digest:
                    modified.append(path)
        return FileChanges(created, sorted(modified), deleted)


def _walk(base: str, rel: str, out: dict[str, Entry], taken: int, exclude: frozenset[str]) -> None:
    try:
        it = os.scandir(os.path.join(base, rel) if rel else base)
    except OSError:
        return
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
                _walk(base, path, out, taken, exclude)
                continue
            kind = "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else "other"
            digest = None
            if kind == "link" or (kind == "file" and taken - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_WINDOW_NS):
                digest = _digest(de.path, kind)
            out[path] = Entry(kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)


def _digest(path: str, kind: str) -> bytes | None:
    try:
        if kind == "link":
            return os.readlink(path).encode("utf-8", "surrogateescape")
        if kind != "file":
            return None
        # O_NOFOLLOW: the path was a regular file at lstat time; never follow a
        # symlink swapped in since.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) or os.fstat(fd).st_size > HASH_LIMIT:
            return None
        h = hashlib.blake2b(digest_size=16)
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.digest()
    except OSError:
        return None
    finally:
        os.close(fd)
