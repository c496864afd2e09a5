"""What a cell did to its workspace: files created, modified and deleted.

A snapshot records, for every file and symlink, its lstat identity (size,
mtime_ns, ctime_ns, inode, kind); symlinks are recorded by their target text and
never followed. Linux stamps mtime from a coarse clock, so a file rewritten with
the same size within one clock tick keeps its mtime: like git's "racily clean"
entries, any file whose timestamps are not safely older than the snapshot gets a
content hash, and the diff compares hashes where the stamps cannot tell.

A whiteout (runtime/notebook_folder_fs.py: the marker a cell leaves in the workspace
when it removes a file of the notebook's folder) is shown as what it did: a marker
made is its name deleted (or modified, when the same step made that name again);
a marker that goes is never shown (its folder went, or the host cleared it).
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

from ..host.safe_fs import Folder, FolderWalk
from ..runtime.notebook_folder_fs import WHITEOUT_PREFIX

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
    """What a step did to a workspace's paths (each path in one list at most)."""

    created: list[str]
    modified: list[str]
    deleted: list[str]

    def __bool__(self) -> bool:
        return bool(self.created or self.modified or self.deleted)

    @classmethod
    def none(cls) -> FileChanges:
        return cls([], [], [])

    def then(self, later: FileChanges) -> FileChanges:
        """This step followed by `later`, as one: what the two did to each path (a
        cell made of parts, code then a magic then code, shows one change list).
        Made then removed is nothing; removed then made again is modified."""
        state: dict[str, str] = {}
        for kind, paths in (("created", self.created), ("modified", self.modified), ("deleted", self.deleted)):
            for path in paths:
                state[path] = kind
        for kind, paths in (("created", later.created), ("modified", later.modified), ("deleted", later.deleted)):
            for path in paths:
                before = state.get(path)
                if kind == "deleted":
                    if before == "created":
                        del state[path]
                    else:
                        state[path] = "deleted"
                elif kind == "created":
                    state[path] = "modified" if before in ("deleted", "modified") else "created"
                else:
                    state[path] = "created" if before == "created" else "modified"
        return FileChanges(*([p for p, k in state.items() if k == kind] for kind in ("created", "modified", "deleted")))

    def without_whiteouts(self) -> FileChanges:
        """The step as the guest saw it: whiteout markers turned into the names they
        removed (see the module's docstring)."""
        if not any(WHITEOUT_PREFIX in p for paths in (self.created, self.modified, self.deleted) for p in paths):
            return self
        created = {p for p in self.created if not _is_whiteout(p)}
        modified = {p for p in self.modified if not _is_whiteout(p)}
        deleted = {p for p in self.deleted if not _is_whiteout(p)}
        for marker in self.created:
            if not _is_whiteout(marker):
                continue
            head, _, name = marker.rpartition("/")
            path = f"{head}/{name[len(WHITEOUT_PREFIX):]}" if head else name[len(WHITEOUT_PREFIX):]
            if path in created:  # the notebook's file replaced by a new one of the same name
                created.discard(path)
                modified.add(path)
            elif path not in modified:
                deleted.add(path)
        return FileChanges(sorted(created), sorted(modified), sorted(deleted))

    def reply_metadata(self) -> dict[str, list[str]]:
        """The execute_reply metadata keys, as SandboxResult names them."""
        return {"files_created": self.created, "files_modified": self.modified, "files_deleted": self.deleted}


class WorkspaceSnapshot:
    def __init__(self, root: Path, entries: dict[str, Entry], taken_ns: int, cut: str | None = None) -> None:
        self.root = root
        self.entries = entries
        self.taken_ns = taken_ns
        self.cut = cut  # why some of the tree is not in `entries` (FolderWalk.cut)

    @classmethod
    def take(cls, root: Path) -> WorkspaceSnapshot:
        taken = time.time_ns()
        entries: dict[str, Entry] = {}
        cut = _walk(str(root), entries, taken)
        return cls(root, entries, taken, cut)

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
        return FileChanges(created, sorted(modified), deleted).without_whiteouts()


def _is_whiteout(path: str) -> bool:
    return path.rpartition("/")[2].startswith(WHITEOUT_PREFIX)


_ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = _ROOT_FLAGS | getattr(os, "O_NOFOLLOW", 0)


def _walk(root: str, out: dict[str, Entry], taken: int) -> str | None:
    """Record every file and symlink under root (safe_fs.FolderWalk: no link
    followed, no recursion, bounded depth); return why the walk was cut, if it was."""
    try:
        root_fd = os.open(root, _ROOT_FLAGS)
    except OSError:
        return None
    try:
        walk = FolderWalk(root_fd)
        for folder in walk:
            _record(folder, out, taken)
        return walk.cut
    finally:
        os.close(root_fd)


def _record(folder: Folder, out: dict[str, Entry], taken: int) -> None:
    """Record the files and links of one folder."""
    for name, st in folder.entries:
        path = folder.path(name)
        mode = st.st_mode
        if stat.S_ISDIR(mode):
            continue
        kind = "file" if stat.S_ISREG(mode) else "link" if stat.S_ISLNK(mode) else "other"
        digest = None
        if kind == "link" or (kind == "file" and taken - max(st.st_mtime_ns, st.st_ctime_ns) < RACY_WINDOW_NS):
            digest = _digest_at(folder.fd, name, kind)
        out[path] = Entry(kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, digest)


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
