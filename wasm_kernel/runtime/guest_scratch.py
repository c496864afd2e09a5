"""Each guest's private folder on the host (its /tmp and its stdin file), under one
parent per host user, so that a killed kernel's folder is found and swept.

    <tempdir>/wasm-kernel-<uid>/          0700: one per host user
        guest-<pid>-<random>.lock         flock()ed by the process that owns the folder
        guest-<pid>-<random>/             tmp/ (the guest's /tmp), stdin

The lock is made and locked before its folder, and removed after it, so a folder
whose lock nobody holds belongs to a process that is gone: `kill -9` leaves it,
and the next guest any process of the same user starts removes it. The pid in the
name is only for a person reading the listing; the lock is the proof.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from pathlib import Path

from ..host.safe_fs import DIR_NOFOLLOW, remove_entry_at

_PREFIX = "guest-"
_LOCK = ".lock"


def scratch_parent() -> Path:
    """This user's parent folder, made owner-only; refused if someone else owns it
    (another user could otherwise plant links or read guests' files)."""
    parent = Path(tempfile.gettempdir()) / f"wasm-kernel-{os.getuid()}"
    try:
        os.mkdir(parent, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(parent)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(
            f"{parent} is not a private folder of this user; remove it, or point TMPDIR at another folder"
        )
    return parent


class GuestScratch:
    """One guest's private folder, swept clean of dead guests' folders on creation."""

    def __init__(self) -> None:
        parent = scratch_parent()
        sweep_dead(parent)
        name = f"{_PREFIX}{os.getpid()}-{os.urandom(6).hex()}"
        self._parent = parent
        self._name = name
        self._lock_fd = os.open(parent / (name + _LOCK), os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        os.mkdir(parent / name, 0o700)
        self.path = parent / name

    def remove(self) -> None:
        """Delete the folder, never following a link the guest made in it; idempotent."""
        if self._lock_fd < 0:
            return
        try:
            _remove_folder_and_lock(self._parent, self._name)
        finally:
            os.close(self._lock_fd)
            self._lock_fd = -1


def sweep_dead(parent: Path) -> list[str]:
    """Remove every guest folder under `parent` whose owner is gone; their names."""
    swept = []
    try:
        names = os.listdir(parent)
    except OSError:
        return swept
    for lock in names:
        if not (lock.startswith(_PREFIX) and lock.endswith(_LOCK)):
            continue
        try:
            fd = os.open(parent / lock, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live process holds it
            try:
                _remove_folder_and_lock(parent, lock[: -len(_LOCK)])
                swept.append(lock[: -len(_LOCK)])
            except OSError:
                pass  # the next start tries again
        finally:
            os.close(fd)
    return swept


def _remove_folder_and_lock(parent: Path, name: str) -> None:
    fd = os.open(parent, DIR_NOFOLLOW)
    try:
        remove_entry_at(fd, name)
        try:
            os.unlink(name + _LOCK, dir_fd=fd)
        except FileNotFoundError:
            pass
    finally:
        os.close(fd)
