"""A guest's saved state on disk: page runs of its memory, authenticated, written atomically.

A kernel that shuts down keeps its interpreter (runtime/hibernation.py). What it
writes here is one file:

    MAGIC | u64 manifest length | manifest (JSON) | run data | HMAC-SHA256 tag

The manifest says what the runs are ([offset, end] pairs of linear memory, in
order, page-aligned) and anything else its caller needs; the run data is those
bytes back to back. The tag covers everything before it, under a key derived from
the operator's secret *and the session's id*: a file copied from another session,
edited, cut short or made by anyone without the secret fails verification, and
nothing in it is parsed before the tag is checked.

Writes go to a fresh temporary file in the same folder, are synced and renamed
over the old file, then the folder is synced: a process killed at any moment
leaves the old state or the new one, never half of one. Every file operation goes
through a descriptor of the folder opened with O_NOFOLLOW, and the folder must be
ours and private: a link planted at the folder or at the file is refused, never
followed, even if the folder is swapped while we work. Whatever is found at the
folder's or the file's place and is not one (clear_state_place), and a file that
must not be loaded for what it is (set_aside_state), is set aside (set_aside.py),
never read again nor followed. Saves, loads and removals of one folder's state
take turns (state_lock), across processes.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import hmac
import json
import mmap
import os
import stat
import struct
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .safe_fs import DIR_NOFOLLOW, lstat_at
from .set_aside import Notes, file_place, set_aside

MAGIC = b"WKSTATE1"
TAG_BYTES = 32
MANIFEST_MAX = 1 << 20  # a manifest is a few KiB; a bigger length is not ours
STATE_FILE = "state.bin"
_TMP_PREFIX = ".state-"
PAGE = mmap.PAGESIZE
_CHUNK = 1 << 16  # compared first in 64 KiB chunks, then page by page inside a chunk that differs
_ZERO = ctypes.create_string_buffer(_CHUNK)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.memcmp.restype = ctypes.c_int
_libc.memcmp.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t]

Runs = list[tuple[int, int]]


class StateRefused(Exception):
    """A saved state that must not be loaded, with a line saying why."""


class StateOutgrown(StateRefused):
    """A state file bigger than the room a state has now (the operator lowered it):
    nothing suspicious, removed rather than set aside."""


class StateTooLarge(Exception):
    """The state would be bigger than the room it is allowed."""


def session_key(secret: bytes, session_id: str) -> bytes:
    """The key one session's files are authenticated with: a file moved to another
    session does not verify there."""
    return hmac.new(secret, b"wasm-kernel state v1\0" + session_id.encode(), hashlib.sha256).digest()


# --- what differs -------------------------------------------------------------------------


def changed_runs(address: int, size: int, base_address: int | None, base_size: int = 0) -> Runs:
    """The page runs of the `size` bytes at `address` that differ from the base (the
    memory a resume starts from: a warm image mapped at base_address, its first
    base_size bytes), or that are not zero where the base has nothing."""
    runs: Runs = []
    start = -1
    for offset in range(0, size, _CHUNK):
        length = min(_CHUNK, size - offset)
        if not _differs(address, offset, length, base_address, base_size):
            if start >= 0:
                runs.append((start, offset))
                start = -1
            continue
        for page in range(offset, offset + length, PAGE):
            if _differs(address, page, PAGE, base_address, base_size):
                if start < 0:
                    start = page
            elif start >= 0:
                runs.append((start, page))
                start = -1
    if start >= 0:
        runs.append((start, size))
    return runs


def _differs(address: int, offset: int, length: int, base_address: int | None, base_size: int) -> bool:
    if base_address is not None and offset + length <= base_size:
        return _libc.memcmp(address + offset, base_address + offset, length) != 0
    if base_address is not None and offset < base_size:  # straddles the base's end: compare page by page
        return True
    zero = ctypes.addressof(_ZERO)
    return _libc.memcmp(address + offset, zero, length) != 0


# --- writing --------------------------------------------------------------------------------


def _manifest_bytes(manifest: dict[str, Any], runs: Runs) -> bytes:
    return json.dumps({**manifest, "runs": [[o, e] for o, e in runs]}, separators=(",", ":")).encode()


def write_state(folder: Path, *, key: bytes, manifest: dict[str, Any], address: int, runs: Runs,
                max_bytes: int | None = None) -> int:
    """Write the runs of memory at `address` with `manifest` as folder/state.bin,
    atomically. Raises StateTooLarge (nothing written) if the file would be bigger
    than max_bytes, OSError or StateRefused if the folder is not safe. Returns the
    file's size."""
    header = _manifest_bytes(manifest, runs)
    total = len(MAGIC) + 8 + len(header) + sum(e - o for o, e in runs) + TAG_BYTES
    if max_bytes is not None and total > max_bytes:
        raise StateTooLarge(f"its {_mib(total)} are more than the {_mib(max_bytes)} allowed")
    dir_fd = open_private_folder(folder, create=True)
    tmp = f"{_TMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                     dir_fd=dir_fd)
        try:
            mac = hmac.new(key, digestmod=hashlib.sha256)
            with os.fdopen(fd, "wb", closefd=False) as out:
                for piece in (MAGIC, struct.pack("<Q", len(header)), header):
                    mac.update(piece)
                    out.write(piece)
                view = memoryview((ctypes.c_char * max((e for _, e in runs), default=1)).from_address(address)).cast("B")
                try:
                    for offset, end in runs:
                        piece = view[offset:end]
                        mac.update(piece)
                        out.write(piece)
                finally:
                    view.release()
                out.write(mac.digest())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, STATE_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # a link at STATE_FILE is replaced, not followed
        os.fsync(dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    finally:
        os.close(dir_fd)
    return total


def open_private_folder(folder: Path, *, create: bool) -> int:
    """A descriptor of `folder`, which must be a real folder of ours that no one else
    may write (a link there is refused, not followed). create: make it (0700) and
    any missing parent first."""
    if create:
        folder.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise StateRefused(f"the state's folder cannot be opened safely ({os.strerror(err.errno or 0)})") from None
    st = os.fstat(fd)
    if st.st_uid != os.getuid() or st.st_mode & 0o022:
        os.close(fd)
        raise StateRefused("the state's folder is not private to this user")
    return fd


@contextmanager
def state_lock(folder: Path, *, create: bool) -> Iterator[None]:
    """Hold the folder's state to ourselves (a flock on the folder) while a save, a
    load or a removal runs: two kernels of one session take turns, so a load never
    judges a file a save is replacing, and the later save is the one that stays.
    Without create, a folder that is missing (or not ours) is not locked: there is
    no state in it to guard."""
    try:
        fd = open_private_folder(folder, create=create)
    except StateRefused:
        if create:
            raise
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def clear_state_place(folder: Path, notes: Notes) -> None:
    """Before a load: whatever is at the folder's place and is not a private folder
    of ours, or at the state file's or the note's and is not a file, is set aside
    (a line in `notes`), so what follows finds a state or nothing."""
    try:
        parent_fd = os.open(folder.parent, DIR_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return  # no state folder yet: nothing to clear
    try:
        st = lstat_at(parent_fd, folder.name)
        if st is None:
            return
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            why = None if not stat.S_ISDIR(st.st_mode) else "a folder others may write to"
            set_aside(parent_fd, folder.name, "the saved state's folder", why, notes)
            return
        dir_fd = os.open(folder.name, DIR_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)
    finally:
        os.close(parent_fd)
    try:
        file_place(dir_fd, STATE_FILE, "the saved state's file", notes)
        file_place(dir_fd, NOTE_FILE, "the note the last shutdown left", notes)
    finally:
        os.close(dir_fd)


def set_aside_state(folder: Path, why: str) -> str | None:
    """Set aside a state file that must never be loaded for what it is (it failed
    its check, or is not the session's latest): kept beside, for a person to look
    at, never read again. Its new name, or None if it is not there."""
    try:
        dir_fd = open_private_folder(folder, create=False)
    except StateRefused:
        return None
    try:
        return set_aside(dir_fd, STATE_FILE, "the saved state", why)
    finally:
        os.close(dir_fd)


def sweep_partial(folder: Path, older_than_s: float = 0.0) -> int:
    """Remove what a killed save left (its temporary files, those not written to for
    older_than_s: a save under way elsewhere writes to its own all the time); the
    number removed."""
    try:
        dir_fd = open_private_folder(folder, create=False)
    except StateRefused:
        return 0
    removed = 0
    try:
        now = time.time()
        for name in os.listdir(dir_fd):
            if name.startswith(_TMP_PREFIX):
                try:
                    if older_than_s and now - os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mtime < older_than_s:
                        continue
                    os.unlink(name, dir_fd=dir_fd)
                    removed += 1
                except OSError:
                    pass
    finally:
        os.close(dir_fd)
    return removed


# --- reading --------------------------------------------------------------------------------


@dataclass
class SavedState:
    """A verified state file, mapped read-only until close()."""

    manifest: dict[str, Any]
    runs: Runs
    size_on_disk: int
    _map: mmap.mmap
    _data_at: int
    identity: tuple[int, int] = (0, 0)  # the file's (st_dev, st_ino): remove_state(if_still=) removes only it

    @property
    def memory_size(self) -> int:
        return int(self.manifest["size"])

    def copy_into(self, address: int, size: int) -> int:
        """Copy the runs into the memory of `size` bytes at `address`; bytes copied."""
        if self.runs and self.runs[-1][1] > size:
            raise StateRefused("the saved state is larger than the memory it is copied into")
        view = memoryview((ctypes.c_char * size).from_address(address)).cast("B")
        data = memoryview(self._map)
        try:
            at = self._data_at
            for offset, end in self.runs:
                view[offset:end] = data[at:at + end - offset]
                at += end - offset
        finally:
            data.release()
            view.release()
        return at - self._data_at

    def close(self) -> None:
        try:
            self._map.close()
        except (BufferError, ValueError):
            pass


def read_state(folder: Path, *, key: bytes, max_bytes: int | None = None) -> SavedState | None:
    """The state in folder/state.bin, verified; None if there is none. Raises
    StateRefused (with a line saying why) for one that must not be loaded: not a
    plain private file, too big, cut short, or failing its tag."""
    try:
        dir_fd = open_private_folder(folder, create=False)
    except StateRefused:
        if not os.path.lexists(folder):
            return None
        raise
    try:
        try:
            fd = os.open(STATE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except FileNotFoundError:
            return None
        except OSError as err:  # ELOOP: a link planted at the file
            raise StateRefused(f"the state file cannot be opened safely ({os.strerror(err.errno or 0)})") from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            raise StateRefused("the state file is not a private file of this user")
        size = st.st_size
        if size < len(MAGIC) + 8 + TAG_BYTES:
            raise StateRefused("the state file is cut short")
        if max_bytes is not None and size > max_bytes:
            raise StateOutgrown(f"the state file ({_mib(size)}) is larger than the {_mib(max_bytes)} allowed")
        mapped = mmap.mmap(fd, size, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)
    try:
        state = _verified(mapped, size, key)
        state.identity = (st.st_dev, st.st_ino)
        return state
    except BaseException:
        mapped.close()
        raise


def _verified(mapped: mmap.mmap, size: int, key: bytes) -> SavedState:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    data = memoryview(mapped)
    try:
        mac.update(data[: size - TAG_BYTES])
        tag = bytes(data[size - TAG_BYTES:])
    finally:
        data.release()
    if not hmac.compare_digest(mac.digest(), tag):
        raise StateRefused("the state file failed its authentication check (changed, or not this session's)")
    # Authenticated: from here the bytes are ours, still checked for shape.
    if mapped[: len(MAGIC)] != MAGIC:
        raise StateRefused("the state file has another format")
    (length,) = struct.unpack("<Q", mapped[len(MAGIC): len(MAGIC) + 8])
    data_at = len(MAGIC) + 8 + length
    if length > MANIFEST_MAX or data_at > size - TAG_BYTES:
        raise StateRefused("the state file's manifest is malformed")
    try:
        manifest = json.loads(mapped[len(MAGIC) + 8: data_at])
        runs = [(int(o), int(e)) for o, e in manifest.pop("runs")]
        memory = int(manifest["size"])
    except (ValueError, KeyError, TypeError) as err:
        raise StateRefused(f"the state file's manifest is malformed ({err})") from None
    _check_runs(runs, memory, size - TAG_BYTES - data_at)
    return SavedState(manifest, runs, size, mapped, data_at)


def _check_runs(runs: Iterable[tuple[int, int]], memory: int, data_bytes: int) -> None:
    last, total = 0, 0
    for offset, end in runs:
        if offset < last or end <= offset or end > memory or offset % PAGE:
            raise StateRefused("the state file's page runs are malformed")
        last, total = end, total + end - offset
    if total != data_bytes:
        raise StateRefused("the state file's page runs do not match its data")


NOTE_FILE = "not-saved.txt"
NOTE_MAX = 500


def write_note(folder: Path, text: str) -> None:
    """Leave one line for the next start (why the last save did not happen): a
    small private file, written as the state is, never through a link."""
    dir_fd = open_private_folder(folder, create=True)
    try:
        tmp = f"{_TMP_PREFIX}note-{os.getpid()}-{os.urandom(6).hex()}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        try:
            os.write(fd, text[:NOTE_MAX].encode())
        finally:
            os.close(fd)
        os.replace(tmp, NOTE_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)


def take_note(folder: Path) -> str | None:
    """The line write_note() left, removed as it is read; None if there is none."""
    try:
        dir_fd = open_private_folder(folder, create=False)
    except StateRefused:
        return None
    try:
        if not file_place(dir_fd, NOTE_FILE, "the note the last shutdown left"):
            return None  # none, or something else, now set aside
        try:
            fd = os.open(NOTE_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            raw = os.read(fd, NOTE_MAX) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
        finally:
            os.close(fd)
        os.unlink(NOTE_FILE, dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    text = raw.decode("utf-8", "replace")
    return "".join(c if c.isprintable() else " " for c in text).strip() or None


def remove_state(folder: Path, *, if_still: tuple[int, int] | None = None) -> bool:
    """Remove the saved state (and any partial save); True if there was one. if_still:
    only if the file is still the one read (SavedState.identity), not one a save
    put there since. Something else than a file at its place is left alone (a load
    sets it aside)."""
    try:
        dir_fd = open_private_folder(folder, create=False)
    except StateRefused:
        return False
    try:
        st = lstat_at(dir_fd, STATE_FILE)
        found = st is not None and not stat.S_ISDIR(st.st_mode) and \
            (if_still is None or (st.st_dev, st.st_ino) == if_still)
        if found:
            try:
                os.unlink(STATE_FILE, dir_fd=dir_fd)
            except FileNotFoundError:
                found = False
    finally:
        os.close(dir_fd)
    sweep_partial(folder)
    return found


def _mib(n: int) -> str:
    return f"{n / 2**20:,.1f} MiB"


__all__ = [
    "NOTE_FILE", "STATE_FILE", "take_note", "write_note", "SavedState", "StateOutgrown", "StateRefused", "StateTooLarge",
    "changed_runs", "clear_state_place", "read_state", "remove_state", "session_key", "set_aside_state", "state_lock",
    "sweep_partial", "write_state",
]
