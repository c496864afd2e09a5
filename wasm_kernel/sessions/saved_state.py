"""Where a session's saved interpreter state lives, and the key that authenticates it.

    <root>/.wasm-kernel/
        state/<uuid>/state.bin   the state a shut-down kernel left (host/state_file.py)
        state.key                the secret, when the operator sets none (32 random bytes, 0600)

Both are in the private folder no guest mounts, so a guest can neither read its
own saved state nor plant one. The file's tag is made with a key derived from the
secret and the session's id: a state copied from another session is refused.

The secret is the operator's `state_secret` when set (a pool's hosts share it, so
a state saved on one host wakes on another); else one generated per workspace root
on first use. A pool that shares a root shares that file too.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ..host.state_file import STATE_FILE, remove_state, session_key
from .layout import private_dir
from .session_ids import validate_session_id

STATE_DIR = "state"
KEY_FILE = "state.key"
SECRET_MIN_CHARS = 16


class StateKeyError(ValueError):
    """The secret cannot be used; the message says what to do."""


def state_folder(workspace_root: Path, session_id: str) -> Path:
    return private_dir(Path(workspace_root)) / STATE_DIR / validate_session_id(session_id)


def state_key(workspace_root: Path, session_id: str, secret: str | None) -> bytes:
    """The key one session's state is authenticated with."""
    return session_key(_secret(Path(workspace_root), secret), validate_session_id(session_id))


def _secret(root: Path, configured: str | None) -> bytes:
    if configured:
        if len(configured) < SECRET_MIN_CHARS:
            raise StateKeyError(f"state_secret is shorter than {SECRET_MIN_CHARS} characters; "
                                "set a long random value (e.g. `openssl rand -hex 32`)")
        return configured.encode()
    folder = private_dir(root)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return _read_key(path)
    try:
        os.write(fd, os.urandom(32))
        os.fsync(fd)
    finally:
        os.close(fd)
    return _read_key(path)


def _read_key(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise StateKeyError(f"the state key file cannot be opened safely ({os.strerror(err.errno or 0)}); "
                            "remove it, or set state_secret") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise StateKeyError("the state key file is not private to this user; remove it, or set state_secret")
        key = os.read(fd, 64)
    finally:
        os.close(fd)
    if len(key) < 32:  # a create killed before its write: make it again next time
        path.unlink(missing_ok=True)
        raise StateKeyError("the state key file was incomplete and has been removed; start the kernel again")
    return key


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
    """Remove a session's saved state and its folder; True if there was a state."""
    folder = state_folder(workspace_root, session_id)
    found = remove_state(folder)
    try:
        folder.rmdir()
    except OSError:
        pass
    return found


__all__ = [
    "StateKeyError", "StateOnDisk", "remove_saved_state", "state_folder", "state_key", "state_on_disk",
]
