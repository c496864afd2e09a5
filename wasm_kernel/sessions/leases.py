"""Leases: an open session sandbox holds its session, so prune leaves it alone.

A lease is flock() on `<root>/.wasm-kernel/leases/<uuid>.lock`:
- every open sandbox of the session holds LOCK_SH (several sandboxes, in any
  number of processes, may share a session);
- prune and delete take LOCK_EX without waiting; if any sandbox holds the session,
  that fails and the session is skipped, however old its `updated_at` is (a
  long-idle notebook with an open kernel keeps its files);
- the kernel drops a flock when the last descriptor of it closes, so a process
  that dies, even by SIGKILL, never leaves a stale lease behind.

A flock cannot tell its holder whether others share it, so a sandbox also holds a
POSIX read lock on byte 0 of `<uuid>.present`: F_GETLK reports the locks of other
processes, never the caller's own, which is exactly "is this session open in
another kernel too?". Only the holder ever opens that file in its process (closing
any descriptor of a file drops a process's POSIX locks on it).

What is at a lock file's place and cannot be one (a folder, a socket, a link, or
a pipe no one holds) is set aside beside it (host/set_aside.py), never followed,
and a new lock file made: taking a lease never fails on what it finds.

Prune unlinks the lock file while it holds LOCK_EX. Someone who opened the old file
just before and then gets the lock would hold a lock on a file nobody else can
find, so every acquire checks, after locking, that the path still names the file
it locked, and starts over if not.
"""

from __future__ import annotations

import errno
import fcntl
import os
import struct
from pathlib import Path

from ..host.set_aside import Notes, open_lock_file
from .layout import ensure_private_dirs, lease_path


# struct flock on Linux (64-bit off_t): l_type, l_whence, l_start, l_len, l_pid.
_FLOCK = "hhqqi4x"


class Lease:
    """A held flock on a session's lock file; release() is idempotent."""

    def __init__(self, fd: int, path: Path, exclusive: bool) -> None:
        self._fd: int | None = fd
        self.path = path
        self.exclusive = exclusive
        self._presence: int | None = None

    def announce(self, notes: Notes | None = None) -> None:
        """Hold the presence lock, so other holders can tell this one is there."""
        fd = open_lock_file(self.path.with_suffix(".present"), "the session's presence file", notes)
        if fd is None:
            return  # the presence is only for the "open in another kernel too" line
        try:
            fcntl.lockf(fd, fcntl.LOCK_SH | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            return
        self._presence = fd

    def shared_with_others(self) -> bool:
        """Whether another process holds this session open too (after announce())."""
        if self._presence is None:
            return False
        probe = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, 0, 1, 0)
        found = struct.unpack(_FLOCK, fcntl.fcntl(self._presence, fcntl.F_GETLK, probe))
        return found[0] != fcntl.F_UNLCK

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self, *, unlink: bool = False) -> None:
        """Drop the lock; with unlink (exclusive holders only) remove the lock file first."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        presence, self._presence = self._presence, None
        if presence is not None:
            os.close(presence)
        try:
            if unlink and self.exclusive:
                for path in (self.path, self.path.with_suffix(".present")):
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
        finally:
            os.close(fd)  # closing the last descriptor drops the flock

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            self.release()


def _lock(workspace_root: Path, session_id: str, operation: int, ensure_dirs: bool = True,
          notes: Notes | None = None) -> Lease | None:
    path = lease_path(workspace_root, session_id)
    if ensure_dirs:
        ensure_private_dirs(workspace_root, notes)
    while True:
        fd = open_lock_file(path, "the session's lease file", notes)
        if fd is None:
            raise OSError(errno.ENOTRECOVERABLE, f"{path} keeps being replaced by something that is not a file")
        try:
            fcntl.flock(fd, operation)
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        try:
            on_disk = os.stat(path, follow_symlinks=False)
        except FileNotFoundError:
            on_disk = None
        mine = os.fstat(fd)
        if on_disk is not None and (on_disk.st_dev, on_disk.st_ino) == (mine.st_dev, mine.st_ino):
            return Lease(fd, path, exclusive=bool(operation & fcntl.LOCK_EX))
        os.close(fd)  # the file was unlinked (pruned) while we waited: use the new one


def acquire_lease(workspace_root: Path, session_id: str, notes: Notes | None = None) -> Lease:
    """A shared lease for a sandbox; waits while a prune or delete of it is in progress.
    notes: a line for each entry set aside at the lock files' places."""
    lease = _lock(workspace_root, session_id, fcntl.LOCK_SH, notes=notes)
    assert lease is not None  # a blocking lock either succeeds or raises
    lease.announce(notes)
    return lease


def try_exclusive_lease(workspace_root: Path, session_id: str, *, ensure_dirs: bool = True) -> Lease | None:
    """The exclusive lease prune and delete need, or None if a sandbox holds the session.

    ensure_dirs=False skips creating the private folders, for a caller (prune) that
    made sure of them once for many sessions.
    """
    return _lock(workspace_root, session_id, fcntl.LOCK_EX | fcntl.LOCK_NB, ensure_dirs)


def peek_in_use(workspace_root: Path, session_id: str) -> bool:
    """is_session_in_use for read-only callers (the CLI's list and show): creates
    nothing, neither the private folders nor a lock file, and unlinks nothing.

    No lock file means no sandbox holds the session (every holder keeps the file
    it locked in place). Otherwise LOCK_EX|LOCK_NB is tried and dropped at once: a
    sandbox opening the session meanwhile waits for microseconds, one that is
    running is not touched at all.
    """
    path = lease_path(workspace_root, session_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        return False
    finally:
        os.close(fd)  # also drops our lock, if we got it


def is_session_in_use(workspace_root: Path, session_id: str) -> bool:
    """True if some open sandbox, in this or another process, holds the session."""
    lease = try_exclusive_lease(workspace_root, session_id)
    if lease is None:
        return True
    lease.release()
    return False
