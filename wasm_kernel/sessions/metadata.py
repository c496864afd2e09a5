"""Session metadata: created_at / updated_at, kept where no guest can reach it.

The file is `<root>/.wasm-kernel/sessions/<uuid>.json` (see layout.py for why it is
not inside the workspace):

    {"session_id": "<uuid>", "created_at": "2026-11-22T04:48:09.123456+00:00",
     "updated_at": "2026-11-22T04:48:09.123456+00:00", "version": 1,
     "state_generation": 7, "state_reserved": 8}

Timestamps are UTC ISO 8601 with microseconds. The two counters say which saved
interpreter state of the session is its latest (saved_state.py, SessionGenerations):
a session that never saved one has neither, and its file is the very one earlier
versions wrote and read. Writes go to a temp file in the same folder, fsync'ed, then
os.replace()d over the old file: a reader sees the old or the new content, never
half of one; every read-modify-write (a touch, a generation's step) holds a flock on
the metadata folder, so two kernels of one session never write back what the other
just changed. A file that does not parse exactly as above is "corrupted": it is
reported and never rewritten, so a person can still look at it (a kernel's start
sets it aside and starts a new one, recover_metadata). A session without a file is
a legacy one: nothing is written for it, ever.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..core.logger import SandboxLogger
from ..host.safe_fs import DIR_NOFOLLOW
from ..host.set_aside import Notes, set_aside
from .layout import METADATA_DIR, ensure_private_dirs, metadata_path, private_dir
from .session_ids import validate_session_id

SCHEMA_VERSION = 1
_FIELDS = {"session_id", "created_at", "updated_at", "version"}
_COUNTERS = ("state_generation", "state_reserved")  # optional: absent is 0
# One writer at a time in this process, so concurrent refreshes stay monotonic.
_write_lock = threading.Lock()


class CorruptMetadataError(ValueError):
    """The metadata file exists but is not valid version-1 session metadata."""


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def format_timestamp(moment: datetime) -> str:
    """UTC ISO 8601 with microseconds, e.g. 2026-11-22T04:48:09.123456+00:00."""
    return moment.astimezone(timezone.utc).isoformat(timespec="microseconds")


def parse_timestamp(text: object) -> datetime:
    if not isinstance(text, str):
        raise CorruptMetadataError(f"timestamp must be a string, got {text!r}")
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as err:
        raise CorruptMetadataError(f"bad timestamp {text!r}: {err}") from None
    if moment.utcoffset() != timedelta(0):
        raise CorruptMetadataError(f"timestamp {text!r} is not UTC")
    return moment


@dataclass(frozen=True)
class SessionMetadata:
    session_id: str
    created_at: datetime
    updated_at: datetime
    version: int = SCHEMA_VERSION
    # The generation of the session's latest saved state, and the highest one a save
    # has taken (saved_state.py, SessionGenerations); 0 while it never saved one.
    state_generation: int = 0
    state_reserved: int = 0

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "session_id": self.session_id,
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
            "version": self.version,
        }
        if self.state_reserved:  # else the file is the one earlier versions wrote
            data.update(state_generation=self.state_generation, state_reserved=self.state_reserved)
        return data

    @classmethod
    def from_json(cls, raw: bytes, expected_id: str) -> SessionMetadata:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            raise CorruptMetadataError(f"not valid JSON: {err}") from None
        if not isinstance(data, dict) or not _FIELDS <= set(data) <= _FIELDS | set(_COUNTERS):
            raise CorruptMetadataError(f"expected exactly the fields {sorted(_FIELDS)}, and {' and '.join(_COUNTERS)}")
        if data["version"] != SCHEMA_VERSION or isinstance(data["version"], bool):
            raise CorruptMetadataError(f"unsupported version {data['version']!r}")
        if data["session_id"] != expected_id:
            raise CorruptMetadataError(f"session_id {data['session_id']!r} does not match {expected_id!r}")
        generation, reserved = (data.get(name, 0) for name in _COUNTERS)
        for value in (generation, reserved):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**53:
                raise CorruptMetadataError(f"a state generation must be a whole number >= 0, got {value!r}")
        if generation > reserved:
            raise CorruptMetadataError(f"state_generation {generation} is above state_reserved {reserved}")
        return cls(expected_id, parse_timestamp(data["created_at"]), parse_timestamp(data["updated_at"]),
                   state_generation=generation, state_reserved=reserved)


def read_metadata(workspace_root: Path, session_id: str) -> SessionMetadata | None:
    """The session's metadata; None for a legacy session; CorruptMetadataError if unreadable."""
    session_id = validate_session_id(session_id)
    path = metadata_path(workspace_root, session_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except (FileNotFoundError, NotADirectoryError):
        return None  # no metadata (a legacy session, or its write failed at creation)
    except OSError as err:
        raise CorruptMetadataError(f"cannot open {path}: {err}") from None
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(1 << 16)
    except OSError as err:
        raise CorruptMetadataError(f"cannot read {path}: {err}") from None
    return SessionMetadata.from_json(raw, session_id)


def write_private_file(path: Path, data: bytes) -> None:
    """Atomically replace one of our private files (owner-only, never through a
    link): a reader sees the old bytes or the new, never half of them."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_metadata(workspace_root: Path, metadata: SessionMetadata) -> None:
    """Atomically replace the session's metadata file."""
    ensure_private_dirs(workspace_root)
    path = metadata_path(workspace_root, metadata.session_id)
    write_private_file(path, json.dumps(metadata.to_dict(), separators=(",", ":")).encode())


def create_metadata(workspace_root: Path, session_id: str, logger: SandboxLogger) -> SessionMetadata | None:
    """Write fresh metadata (created_at == updated_at). A failure is logged as a
    warning and swallowed: a session without metadata still works, it is only
    never pruned."""
    now = utc_now()
    metadata = SessionMetadata(session_id, now, now)
    try:
        write_metadata(workspace_root, metadata)
    except OSError as err:
        logger.log_event(
            "session.metadata.write_failed", level="warning", session_id=session_id,
            error=f"{type(err).__name__}: {err}",
        )
        return None
    return metadata


@contextmanager
def _metadata_lock(workspace_root: Path) -> Iterator[None]:
    """Every read-modify-write of a metadata file in turn, across threads and
    processes: a flock on the metadata folder (a few hundred microseconds held)."""
    with _write_lock:
        ensure_private_dirs(workspace_root)
        fd = os.open(private_dir(workspace_root) / METADATA_DIR, DIR_NOFOLLOW)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def update_metadata(workspace_root: Path, session_id: str,
                    change: Callable[[SessionMetadata], SessionMetadata]) -> SessionMetadata | None:
    """Replace the session's metadata with change(current), under the metadata lock;
    the new metadata, or None (nothing written) for a legacy session. Raises
    CorruptMetadataError (nothing written) or OSError."""
    with _metadata_lock(workspace_root):
        current = read_metadata(workspace_root, session_id)
        if current is None:
            return None
        new = change(current)
        if new != current:
            write_metadata(workspace_root, new)
        return new


def touch_metadata(workspace_root: Path, session_id: str, logger: SandboxLogger) -> None:
    """Move updated_at to now (strictly later than before). Never raises.

    Legacy sessions are skipped silently; corrupted metadata is logged and left as
    it is. updated_at is kept strictly increasing even if the wall clock steps back.
    """
    def later(current: SessionMetadata) -> SessionMetadata:
        return replace(current, updated_at=max(utc_now(), current.updated_at + timedelta(microseconds=1)))

    try:
        update_metadata(workspace_root, session_id, later)
    except CorruptMetadataError as err:
        logger.log_event("session.metadata.corrupted", level="warning", session_id=session_id, error=str(err))
    except OSError as err:
        logger.log_event(
            "session.metadata.update_failed", level="warning", session_id=session_id,
            error=f"{type(err).__name__}: {err}",
        )


def recover_metadata(workspace_root: Path, session_id: str, logger: SandboxLogger, notes: Notes) -> None:
    """A kernel's start: metadata that cannot be read (not a file, not JSON, not
    ours) is set aside, with a line in `notes`, and fresh metadata takes its place,
    so the session is pruned and its saved state checked as any other's. A legacy
    session (no file) stays one. Never raises."""
    with _metadata_lock(workspace_root):
        try:
            read_metadata(workspace_root, session_id)
            return
        except CorruptMetadataError as err:
            logger.log_event("session.metadata.corrupted", level="warning", session_id=session_id, error=str(err))
        try:
            fd = os.open(private_dir(workspace_root) / METADATA_DIR, DIR_NOFOLLOW)
            try:
                set_aside(fd, metadata_path(workspace_root, session_id).name, "the session's metadata",
                          "unreadable", notes)
            finally:
                os.close(fd)
        except OSError as err:
            logger.log_event("session.metadata.set_aside_failed", level="warning", session_id=session_id,
                             error=f"{type(err).__name__}: {err}")
            return
    create_metadata(workspace_root, session_id, logger)
