"""Where a session's saved interpreter state lives, and the key that authenticates it.

    <root>/.wasm-kernel/
        state/<uuid>/state.bin   the state a shut-down kernel left (host/state_file.py)
        state.key                the secret, when the operator sets none (32 random bytes, 0600)

Both are in the private folder no guest mounts, so a guest can neither read its
own saved state nor plant one. The file's tag is made with a key derived from the
secret and the session's id: a state copied from another session is refused. Its
manifest names the generation its save took from the session's metadata
(SessionGenerations): an older state of the same session, put back in its place,
is refused too.

The secret is the operator's `state_secret` when set (a pool's hosts share it, so
a state saved on one host wakes on another); else one generated per workspace root
on first use. A pool that shares a root shares that file too.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ..host.safe_fs import DIR_NOFOLLOW, remove_entry_at
from ..host.set_aside import Notes, remove_set_aside, set_aside
from ..host.state_file import STATE_FILE, StateRefused, session_key
from .layout import STATE_DIR, private_dir
from .metadata import CorruptMetadataError, SessionMetadata, read_metadata, update_metadata
from .session_ids import validate_session_id

KEY_FILE = "state.key"
KEY_BYTES = 32
SECRET_MIN_CHARS = 16


class StateKeyError(ValueError):
    """The secret cannot be used; the message says what to do."""


def state_folder(workspace_root: Path, session_id: str) -> Path:
    return private_dir(Path(workspace_root)) / STATE_DIR / validate_session_id(session_id)


def state_key(workspace_root: Path, session_id: str, secret: str | None, notes: Notes | None = None) -> bytes:
    """The key one session's state is authenticated with. A key file that cannot be
    ours (not a private file of this user, cut short) is set aside, with a line in
    `notes`, and a new one made: the states made with it are refused as not this
    session's, with a line each."""
    return session_key(_secret(Path(workspace_root), secret, notes), validate_session_id(session_id))


def _secret(root: Path, configured: str | None, notes: Notes | None) -> bytes:
    if configured:
        if len(configured) < SECRET_MIN_CHARS:
            raise StateKeyError(f"state_secret is shorter than {SECRET_MIN_CHARS} characters; "
                                "set a long random value (e.g. `openssl rand -hex 32`)")
        return configured.encode()
    folder = private_dir(root)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    dir_fd = os.open(folder, DIR_NOFOLLOW | os.O_CLOEXEC)
    try:
        for _ in range(3):  # a racing planter gets at most a couple of rounds
            key, why = _read_key(dir_fd)
            if key is not None:
                return key
            if why is None:  # none yet: made, or read once another kernel has made it
                _make_key(dir_fd)
                continue
            set_aside(dir_fd, KEY_FILE, "the state key file", why, notes)
    finally:
        os.close(dir_fd)
    raise StateKeyError("the state key file keeps being replaced; set state_secret")


def _make_key(dir_fd: int) -> None:
    """Write a new key file, whole before it has its name: a kill leaves no half key
    that another kernel could read."""
    tmp = f".{KEY_FILE}.{os.getpid()}.{os.urandom(4).hex()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        os.write(fd, os.urandom(KEY_BYTES))
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, KEY_FILE, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)  # never over another's
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp, dir_fd=dir_fd)


def _read_key(dir_fd: int) -> tuple[bytes | None, str | None]:
    """(the key, None), (None, None) when there is no key file, or (None, what is
    wrong with the file there)."""
    try:
        fd = os.open(KEY_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
    except FileNotFoundError:
        return None, None
    except OSError as err:  # a link, a socket
        return None, f"not a file that can be opened safely ({os.strerror(err.errno or 0)})"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, "not a file"
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            return None, "not private to this user (others may have read it)"
        key = os.read(fd, 64)
    finally:
        os.close(fd)
    if len(key) < KEY_BYTES:
        return None, "cut short"
    return key, None


@dataclass(frozen=True)
class SessionGenerations:
    """Which saved state of a session is its latest (runtime/hibernation.py's
    StateGenerations), in the session's metadata (metadata.py), which only the host
    writes: `state_generation`, the latest state's, and `state_reserved`, the
    highest a save took. A save reserves the next one before its file is written and
    commits it once the file is in place; a state is the latest when its generation
    lies between the two (above the committed one only when its save was stopped
    between the two steps). Every step is one locked read-modify-write of the file."""

    workspace_root: Path
    session_id: str

    def span(self) -> tuple[int, int] | None:
        try:
            meta = read_metadata(self.workspace_root, self.session_id)
        except CorruptMetadataError:
            raise StateRefused(_UNREADABLE) from None
        return None if meta is None else (meta.state_generation, meta.state_reserved)

    def reserve(self) -> int:
        meta = self._update(lambda m: replace(m, state_reserved=m.state_reserved + 1))
        return 0 if meta is None else meta.state_reserved

    def commit(self, generation: int) -> None:
        self._update(lambda m: replace(m, state_generation=max(m.state_generation, generation),
                                       state_reserved=max(m.state_reserved, generation)))

    def retire(self) -> None:
        self._update(lambda m: replace(m, state_generation=m.state_reserved + 1, state_reserved=m.state_reserved + 1))

    def _update(self, change: Callable[[SessionMetadata], SessionMetadata]) -> SessionMetadata | None:
        try:
            return update_metadata(self.workspace_root, self.session_id, change)
        except CorruptMetadataError:
            raise StateRefused(_UNREADABLE) from None


_UNREADABLE = "the session's metadata, which says which saved state is the latest, cannot be read"


@dataclass(frozen=True)
class StateOnDisk:
    """A saved state as `sessions show` lists it, without reading its contents."""

    bytes: int
    saved_at: float

    @property
    def age_s(self) -> float:
        return max(0.0, time.time() - self.saved_at)


def state_on_disk(workspace_root: Path, session_id: str) -> StateOnDisk | None:
    path = state_folder(workspace_root, session_id) / STATE_FILE
    try:
        st = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return StateOnDisk(st.st_size, st.st_mtime)


def remove_saved_state(workspace_root: Path, session_id: str) -> bool:
    """Remove a session's saved state and its folder, with whatever was set aside in
    it or in its place, never following a link; True if there was a state."""
    folder = state_folder(workspace_root, session_id)
    try:
        parent_fd = os.open(folder.parent, DIR_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        found = state_on_disk(workspace_root, session_id) is not None
        try:
            SessionGenerations(Path(workspace_root), session_id).retire()  # never to be put back either
        except (StateRefused, OSError):
            pass  # the session's own removal: its metadata goes too
        remove_entry_at(parent_fd, folder.name)
        remove_set_aside(parent_fd, folder.name)
    finally:
        os.close(parent_fd)
    return found


__all__ = [
    "SessionGenerations", "StateKeyError", "StateOnDisk", "remove_saved_state", "state_folder", "state_key",
    "state_on_disk",
]
