"""What is found where one of our private files or folders goes, and is not one: set aside.

A kernel's start reads a handful of entries of the sessions' private folder (the
session's metadata, history, lease, packages, saved state, the state key, the
registry). Anything else found at one of those names, a folder where a file goes,
a file where a folder goes, a named pipe, a socket, a link, or a file that does not
read as what it should be, must neither stop the start nor be followed, nor be
deleted without a word: it is renamed beside itself, as

    <name>.set-aside-<UTC time>

(the entry itself: a link is renamed, never what it points to), one line says so,
and the start makes a fresh entry in its place. Whoever removes the session later
removes what was set aside for it too (remove_set_aside).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from datetime import datetime, timezone
from pathlib import Path

from .log import get_logger
from .safe_fs import DIR_NOFOLLOW, lstat_at, remove_entry_at

MARK = ".set-aside-"

log = get_logger("wasm_kernel.host")

# Where a caller collects the lines: a kernel shows them on its first cell.
Notes = list[str]


def kind_of(mode: int) -> str:
    """What an entry is, for a line: "a folder", "a named pipe"..."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def set_aside(dir_fd: int, name: str, what: str, why: str | None = None, notes: Notes | None = None) -> str | None:
    """Rename entry `name` of the folder dir_fd to `<name>.set-aside-<time>`, append
    the line that says so to `notes` ("<what> was <why>: set aside as <new name>")
    and return the new name; None if nothing is there (any more). why: what was
    wrong with it when it is a file (any other kind of entry is said by its kind)."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return None
    if why is None or not stat.S_ISREG(st.st_mode):
        why = kind_of(st.st_mode)
    # Microseconds: two set-asides of one name never meet (rename would replace the first).
    new = f"{name}{MARK}{datetime.now(timezone.utc):%Y%m%dT%H%M%S.%fZ}"
    try:
        os.rename(name, new, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except FileNotFoundError:
        return None  # someone else set it aside (or removed it) first
    line = f"{what} was {why}: set aside as {new}"
    log.warning("private.set_aside", entry=name, moved_to=new, reason=why)
    if notes is not None:
        notes.append(line)
    return new


def folder_at(parent_fd: int, name: str, what: str, notes: Notes | None = None, mode: int = 0o700) -> int:
    """A descriptor of folder `name` in parent_fd, made (with `mode`) if missing.
    Whatever else is there is set aside first, never followed."""
    for _ in range(3):  # a racing planter gets at most a couple of rounds
        try:
            os.mkdir(name, mode, dir_fd=parent_fd)
        except FileExistsError:
            pass
        try:
            return os.open(name, DIR_NOFOLLOW, dir_fd=parent_fd)
        except OSError as err:
            if err.errno not in (errno.ENOTDIR, errno.ELOOP):
                raise
        set_aside(parent_fd, name, what, notes=notes)
    raise NotADirectoryError(errno.ENOTDIR, f"{what} keeps being replaced by something that is not a folder")


def file_place(dir_fd: int, name: str, what: str, notes: Notes | None = None) -> bool:
    """Make sure `name` in dir_fd is a plain file of its own (regular, one link) or
    nothing: anything else is set aside. True if such a file is there."""
    st = lstat_at(dir_fd, name)
    if st is None:
        return False
    if stat.S_ISREG(st.st_mode) and st.st_nlink == 1:
        return True
    set_aside(dir_fd, name, what, f"a file with {st.st_nlink} hard links", notes)
    return False


# What opening a lock file's path (O_RDWR | O_NOFOLLOW) says of an entry that cannot be one.
_NOT_A_LOCK_FILE = (errno.EISDIR, errno.ELOOP, errno.ENXIO)


def open_lock_file(path: Path, what: str, notes: Notes | None = None) -> int | None:
    """A descriptor (read-write) of the lock file at `path`, made if missing. What
    cannot be a lock file there is set aside first: an entry open() refuses (a
    folder, a socket, a link: nobody can hold a lock on it), or one that is not a
    regular file once we hold it alone (LOCK_EX, not waiting: the holders of a
    planted pipe keep it, and it serves as their lock file). None after a few
    rounds of a racing planter."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o600)
        except OSError as err:
            if err.errno not in _NOT_A_LOCK_FILE:
                raise
            _set_aside_at(path, what, notes)
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return fd
        try:
            _set_aside_at(path, what, notes)  # while we hold it: who opened it meanwhile finds it renamed
        finally:
            os.close(fd)
    return None


def _set_aside_at(path: Path, what: str, notes: Notes | None) -> None:
    parent_fd = os.open(path.parent, DIR_NOFOLLOW)
    try:
        set_aside(parent_fd, path.name, what, notes=notes)
    finally:
        os.close(parent_fd)


def remove_set_aside(dir_fd: int, name: str) -> int:
    """Remove what was set aside of `name` in dir_fd (for whoever removes the entry
    itself for good: a session's removal); never following a link. How many."""
    removed = 0
    prefix = name + MARK
    for entry in os.listdir(dir_fd):
        if entry.startswith(prefix) and remove_entry_at(dir_fd, entry):
            removed += 1
    return removed


__all__ = ["MARK", "Notes", "file_place", "folder_at", "kind_of", "open_lock_file", "remove_set_aside", "set_aside"]
