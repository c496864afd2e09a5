"""Sessions of unattended runs: gone when their kernel shuts down, or at the next prune.

A kernel that no notebook names (nbconvert, nbclient, papermill, nbgrader, otter
without JPY_SESSION_NAME) gets a session of its own, which no later kernel can find
again. Such a session is marked by a file in the private folder, out of every guest's
reach:

    <root>/.wasm-kernel/unattended/<uuid>.json    {"keep_hours": 0.0, "version": 1}

Its kernel removes it when it shuts down (kernel/session_lifecycle.py), unless the
operator keeps such sessions for a while (keep_hours > 0). Prune (pruning.py) takes a
marked session once it has been idle longer than keep_hours, whatever age it was
asked for, and as for any session only if no kernel holds its lease: so a run whose
kernel was killed leaves its session to the next prune, which every kernel runs as it
starts (prune_unattended_sessions).

Why a file of its own: metadata readers refuse any field they do not know (an older
wasm-kernel would call a marked session corrupted and never prune it), and the
registry's schema would need a migration. A session without the file is an ordinary
one; an unreadable file marks nothing (we never remove what we are unsure of).

The file's mtime says when a kernel last started on the session, or asked for its
restart: a restart (same connection file) ends the old process before the new one
binds the session again, and for that moment no lease holds it. A marker younger
than MARK_GRACE_S keeps the session to the ordinary rules meanwhile.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..core.logger import SandboxLogger
from .layout import ensure_private_dirs, private_dir
from .leases import try_exclusive_lease
from .lifecycle import forget_deleted_session
from .metadata import utc_now, write_private_file
from .removal import remove_session_files
from .session_ids import is_session_id, validate_session_id

UNATTENDED_DIR = "unattended"
MARKER_VERSION = 1
# From the old process's shutdown_request (restart=True) to the new process binding
# the session: seconds of imports, minutes on a machine under heavy load.
MARK_GRACE_S = 120.0


def marker_path(workspace_root: Path, session_id: str) -> Path:
    return private_dir(Path(workspace_root)) / UNATTENDED_DIR / f"{validate_session_id(session_id)}.json"


def mark_unattended(workspace_root: Path, session_id: str, keep_hours: float) -> None:
    """Mark (or mark again, which also refreshes the grace) a session as an
    unattended run's, kept keep_hours after its last activity. Atomic: a reader sees
    the old marker or the new one."""
    if isinstance(keep_hours, bool) or not isinstance(keep_hours, (int, float)) or not keep_hours >= 0:
        raise ValueError(f"keep_hours must be a number >= 0, got {keep_hours!r}")
    root = Path(workspace_root)
    ensure_private_dirs(root)
    try:
        os.mkdir(private_dir(root) / UNATTENDED_DIR, 0o700)
    except FileExistsError:
        pass
    path = marker_path(root, session_id)
    write_private_file(path, json.dumps({"keep_hours": float(keep_hours), "version": MARKER_VERSION}).encode())


def refresh_mark(workspace_root: Path, session_id: str) -> bool:
    """Restart the grace of a marked session (its kernel is restarting); False if unmarked."""
    try:
        os.utime(marker_path(workspace_root, session_id), follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def unmark(workspace_root: Path, session_id: str) -> None:
    try:
        os.unlink(marker_path(workspace_root, session_id))
    except FileNotFoundError:
        pass


def marked_sessions(workspace_root: Path) -> list[str]:
    """The ids that carry a marker, whether or not their workspace exists."""
    try:
        names = os.listdir(private_dir(Path(workspace_root)) / UNATTENDED_DIR)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n[:-5] for n in names if n.endswith(".json") and is_session_id(n[:-5]))


def keep_hours_of(workspace_root: Path, session_id: str, now: float | None = None) -> float | None:
    """How long prune must leave the session idle before taking it, if it is an
    unattended run's and its marker is past the grace; else None (ordinary rules)."""
    path = marker_path(workspace_root, session_id)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None  # no marker (or a link in its place: not ours)
    try:
        st = os.fstat(fd)
        raw = os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)
    if (now if now is not None else time.time()) - st.st_mtime < MARK_GRACE_S:
        return None
    try:
        data = json.loads(raw)
        keep = data["keep_hours"]
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        return None
    if isinstance(keep, bool) or not isinstance(keep, (int, float)) or not keep >= 0:
        return None
    return float(keep)


def remove_unattended_session(workspace_root: Path, session_id: str, logger: SandboxLogger) -> bool:
    """Remove a session as `wasm-kernel sessions rm` does (workspace, metadata,
    history, packages, registry row), and its marker; False, with nothing removed,
    if a sandbox in any process holds it: then it is left for prune.

    The marker goes last: a removal cut short (the process killed meanwhile) stays
    marked, and prune_unattended_sessions finishes it."""
    root = Path(workspace_root)
    lease = try_exclusive_lease(root, session_id)
    if lease is None:
        logger.log_event("session.unattended.kept", session_id=session_id, reason="in_use")
        return False
    removed = False
    try:
        leased_at = utc_now()
        existed = remove_session_files(root, session_id)
        forget_deleted_session(root, session_id, leased_at, logger)
        unmark(root, session_id)
        removed = True
    finally:
        lease.release(unlink=removed)
    logger.log_event("session.unattended.removed", session_id=session_id, existed=existed)
    return True


__all__ = [
    "MARK_GRACE_S",
    "keep_hours_of",
    "mark_unattended",
    "marked_sessions",
    "refresh_mark",
    "remove_unattended_session",
    "unmark",
]
