"""Session metadata: created_at / updated_at, kept where no guest can reach it.

The file is `<root>/.wasm-kernel/sessions/<uuid>.json` (see layout.py for why it is
not inside the workspace):

    {"session_id": "<uuid>", "created_at": "2026-11-22T04:48:09.123456+00:00",
     "updated_at": "2026-11-22T04:48:09.123456+00:00", "version": 1}

Timestamps are UTC ISO 8601 with microseconds. Writes go to a temp file in the same
folder, fsync'ed, then os.replace()d over the old file: a reader sees the old or the
new content, never half of one. A file that does not parse exactly as above is
"corrupted": it is reported and never rewritten, so a person can still look at it.
A session without a file is a legacy one: nothing is written for it, ever.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ..core.logger import SandboxLogger
from .layout import ensure_private_dirs, metadata_path
from .session_ids import validate_session_id

SCHEMA_VERSION = 1
_FIELDS = {"session_id", "created_at", "updated_at", "version"}
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "created_at": format_timestamp(self.created_at),
            "updated_at": format_timestamp(self.updated_at),
            "version": self.version,
        }

    @classmethod
    def from_json(cls, raw: bytes, expected_id: str) -> SessionMetadata:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as err:
            raise CorruptMetadataError(f"not valid JSON: {err}") from None
        if not isinstance(data, dict) or set(data) != _FIELDS:
            raise CorruptMetadataError(f"expected exactly the fields {sorted(_FIELDS)}")
        if data["version"] != SCHEMA_VERSION or isinstance(data["version"], bool):
            raise CorruptMetadataError(f"unsupported version {data['version']!r}")
        if data["session_id"] != expected_id:
            raise CorruptMetadataError(f"session_id {data['session_id']!r} does not match {expected_id!r}")
        return cls(expected_id, parse_timestamp(data["created_at"]), parse_timestamp(data["updated_at"]))


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


def touch_metadata(workspace_root: Path, session_id: str, logger: SandboxLogger) -> None:
    """Move updated_at to now (strictly later than before). Never raises.

    Legacy sessions are skipped silently; corrupted metadata is logged and left as
    it is. updated_at is kept strictly increasing even if the wall clock steps back.
    """
    with _write_lock:
        try:
            current = read_metadata(workspace_root, session_id)
        except CorruptMetadataError as err:
            logger.log_event("session.metadata.corrupted", level="warning", session_id=session_id, error=str(err))
            return
        if current is None:
            return
        now = max(utc_now(), current.updated_at + timedelta(microseconds=1))
        try:
            write_metadata(workspace_root, SessionMetadata(session_id, current.created_at, now))
        except OSError as err:
            logger.log_event(
                "session.metadata.update_failed", level="warning", session_id=session_id,
                error=f"{type(err).__name__}: {err}",
            )
