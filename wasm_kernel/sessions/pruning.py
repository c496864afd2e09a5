"""Delete session workspaces that have been idle longer than a threshold.

A session is deleted only if all of these hold, checked while holding its
exclusive lease (so no sandbox can open it meanwhile):
- its name under the root is a canonical UUID and it is a real directory (a
  symlink in its place is never followed; other names are ignored, not counted);
- no sandbox, in any process, holds its lease ("in_use" otherwise);
- it has valid metadata ("no_metadata" / "corrupted_metadata" otherwise: a
  legacy session is never pruned, a corrupted file is left for a person to read);
- its updated_at is more than `older_than_hours` ago, or, for the session of an
  unattended run (unattended.py), more than the hours its marker keeps it, if fewer.

Saved interpreter states (saved_state.py) go first: a state older than
`states_older_than_hours` (by default the same threshold) is removed from a session
that is kept, under the same lease, since a state is the largest thing a session
keeps outside its workspace and the first a full disk should give back. A deleted
session's state goes with it, counted in the bytes reclaimed.

A deleted session's identity-registry row goes too (if there is a registry), so
its notebook gets a fresh session next time. A dry run takes the same decisions
with the same code and sizes the same trees, so it reports exactly the candidates
and bytes a real run would reclaim; it writes nothing.
"""

from __future__ import annotations

import math
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from ..core.logger import SandboxLogger
from .layout import DEFAULT_WORKSPACE_ROOT, ensure_private_dirs
from .removal import remove_private_files
from .saved_state import remove_saved_state, state_on_disk
from .leases import peek_in_use, try_exclusive_lease
from .lifecycle import forget_deleted_session
from .metadata import CorruptMetadataError, read_metadata, utc_now
from .registry import SessionRegistry
from ..host.safe_fs import open_dir, open_root, remove_tree_at, tree_size
from .session_ids import is_session_id
from .unattended import keep_hours_of, marked_sessions, remove_unattended_session, unmark


@dataclass
class PruneResult:
    deleted_sessions: list[str] = field(default_factory=list)  # in a dry run: the candidates
    skipped_sessions: list[str] = field(default_factory=list)  # no/corrupted metadata, in use, symlinked
    reclaimed_bytes: int = 0  # in a dry run: what a real run would reclaim
    errors: dict[str, str] = field(default_factory=dict)  # session id -> why it could not be deleted
    dry_run: bool = False
    dropped_states: list[str] = field(default_factory=list)  # kept sessions whose old saved state went

    def __str__(self) -> str:
        n = len(self.deleted_sessions)
        text = f"Deleted {n} session{'s' if n != 1 else ''}, skipped {len(self.skipped_sessions)}, reclaimed {format_bytes(self.reclaimed_bytes)}"
        if self.dropped_states:
            k = len(self.dropped_states)
            text += f", dropped {k} old saved state{'s' if k != 1 else ''}"
        if self.errors:
            text += f", {len(self.errors)} error{'s' if len(self.errors) != 1 else ''}"
        return text + (" (dry run)" if self.dry_run else "")


def format_bytes(count: int) -> str:
    """Decimal units, one decimal: 512 B, 1.5 kB... as in 1.5 MB = 1,500,000 bytes."""
    if count < 1000:
        return f"{count} B"
    value = float(count)
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if value < 999.95 or unit == "PB":
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")


def prune_sessions(
    older_than_hours: float,
    workspace_root: Path = DEFAULT_WORKSPACE_ROOT,
    dry_run: bool = False,
    logger: SandboxLogger | None = None,
    *,
    only: Callable[[str], bool] | None = None,
    states_older_than_hours: float | None = None,
) -> PruneResult:
    """Delete (or, with dry_run, report) sessions idle for more than older_than_hours.

    `only`, if given, narrows the run to the session ids it accepts (the kernel's
    %prune: one user's sessions, never its own); the others are not even counted.
    states_older_than_hours: drop saved states older than this from the sessions
    kept (default: older_than_hours).

    Raises FileNotFoundError / NotADirectoryError if the root is missing; problems
    with single sessions go into `errors` and pruning goes on.
    """
    if isinstance(older_than_hours, bool) or not isinstance(older_than_hours, (int, float)) or not older_than_hours >= 0:
        raise ValueError(f"older_than_hours must be a number >= 0, got {older_than_hours!r}")
    if states_older_than_hours is None:
        states_older_than_hours = older_than_hours
    elif isinstance(states_older_than_hours, bool) or not states_older_than_hours >= 0:
        raise ValueError(f"states_older_than_hours must be a number >= 0, got {states_older_than_hours!r}")
    logger = logger or SandboxLogger()
    root = Path(workspace_root)
    started = time.monotonic()
    root_fd = open_root(root)  # before logging: a missing root is an error, not a prune
    result = PruneResult(dry_run=dry_run)
    # One registry for the run: it opens a connection only if a registry file exists.
    registry = SessionRegistry(root)
    logger.log_event(
        "session.prune.started", threshold_hours=older_than_hours, workspace_root=str(root), dry_run=dry_run
    )
    try:
        with os.scandir(root_fd) as it:
            names = sorted(de.name for de in it if is_session_id(de.name) and (only is None or only(de.name)))
        if names and not dry_run:
            ensure_private_dirs(root)  # once, not once per session's lease
        now = utc_now()
        marked = set(marked_sessions(root))  # unattended runs' sessions: one listing, not a look per session
        for session_id in names:
            try:
                _consider(session_id, root, root_fd, older_than_hours, now, dry_run, result, logger, registry,
                          session_id in marked, states_older_than_hours)
            except (OSError, ValueError) as err:
                # ValueError: UnsafePathError, the entry became a symlink while we looked.
                result.errors[session_id] = f"{type(err).__name__}: {err}"
                logger.log_event("session.prune.error", level="warning", session_id=session_id, error=result.errors[session_id])
    finally:
        registry.close()
        os.close(root_fd)
    logger.log_event(
        "session.prune.completed",
        deleted_count=len(result.deleted_sessions),
        skipped_count=len(result.skipped_sessions),
        error_count=len(result.errors),
        reclaimed_bytes=result.reclaimed_bytes,
        duration=round(time.monotonic() - started, 6),
        dry_run=dry_run,
    )
    return result


def _skip(result: PruneResult, logger: SandboxLogger, session_id: str, reason: str) -> None:
    result.skipped_sessions.append(session_id)
    logger.log_event("session.prune.skipped", level="warning", session_id=session_id, reason=reason)


def _consider(
    session_id: str,
    root: Path,
    root_fd: int,
    older_than_hours: float,
    now: datetime,
    dry_run: bool,
    result: PruneResult,
    logger: SandboxLogger,
    registry: SessionRegistry,
    marked: bool = False,
    states_older_than_hours: float | None = None,
) -> None:
    st = os.stat(session_id, dir_fd=root_fd, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        # A symlink (or file) under a session's name: never followed, never ours to remove.
        _skip(result, logger, session_id, "symlink" if stat.S_ISLNK(st.st_mode) else "not_a_directory")
        return
    # A dry run writes nothing, not even lock files: it only asks whether a sandbox
    # holds the lease (no lock file: none can), which is what a real run's attempt
    # to take it would find. A real run holds the lease while it decides and deletes.
    if dry_run:
        if peek_in_use(root, session_id):
            _skip(result, logger, session_id, "in_use")
            return
        lease, leased_at = None, now
    else:
        lease = try_exclusive_lease(root, session_id, ensure_dirs=False)
        if lease is None:
            _skip(result, logger, session_id, "in_use")
            return
        leased_at = utc_now()  # a bind after this keeps its row (registry.forget_session)
    deleted = False
    try:
        try:
            metadata = read_metadata(root, session_id)
        except CorruptMetadataError as err:
            _skip(result, logger, session_id, "corrupted_metadata")
            logger.log_event("session.metadata.corrupted", level="warning", session_id=session_id, error=str(err))
            return
        if metadata is None:
            _skip(result, logger, session_id, "no_metadata")
            return
        age_hours = (now - metadata.updated_at).total_seconds() / 3600
        keep_hours = keep_hours_of(root, session_id) if marked else None
        limit = older_than_hours if keep_hours is None else min(older_than_hours, keep_hours)
        saved = state_on_disk(root, session_id)
        if not age_hours > limit:
            state_limit = older_than_hours if states_older_than_hours is None else states_older_than_hours
            if saved is not None and saved.age_s / 3600 > state_limit:
                if not dry_run:
                    remove_saved_state(root, session_id)
                result.dropped_states.append(session_id)
                result.reclaimed_bytes += saved.bytes
                logger.log_event("session.prune.state_dropped", session_id=session_id, size_bytes=saved.bytes)
            return
        ws_fd = open_dir(root_fd, session_id, session_id)
        try:
            size = tree_size(ws_fd) + (saved.bytes if saved is not None else 0)
        finally:
            os.close(ws_fd)
        logger.log_event("session.prune.candidate", session_id=session_id, age_hours=round(age_hours, 3), size_bytes=size)
        if not dry_run:
            remove_tree_at(root_fd, session_id)
            remove_private_files(root, session_id)
            if marked:
                unmark(root, session_id)
            deleted = True
            logger.log_event("session.prune.deleted", session_id=session_id, size_bytes=size)
            forget_deleted_session(root, session_id, leased_at, logger, registry)
        result.deleted_sessions.append(session_id)
        result.reclaimed_bytes += size
    finally:
        # Unlink the lock file only once the session is gone; acquirers that raced
        # with us notice the unlink and retry on a fresh file (leases.py).
        if lease is not None:
            lease.release(unlink=deleted)


def prune_unattended_sessions(
    workspace_root: Path, logger: SandboxLogger | None = None, *, skip: Callable[[str], bool] | None = None
) -> PruneResult:
    """The automatic prune every kernel runs as it starts: the sessions of unattended
    runs (unattended.py) idle past their keep time that no kernel holds (their kernel
    was killed, or the operator kept them a while), and what a removal cut short left
    of one. No other session is considered; `skip` leaves out more (the caller's own).

    Cheap when there is nothing to do: one listing of the markers' folder."""
    logger = logger or SandboxLogger()
    root = Path(workspace_root)
    marked = {sid for sid in marked_sessions(root) if skip is None or not skip(sid)}
    if not marked:
        return PruneResult()
    # Sessions a kernel holds are passed over here, not reported as skipped: at every
    # kernel's start that would be a warning per run under way in other kernels.
    result = prune_sessions(math.inf, root, logger=logger,
                            only=lambda sid: sid in marked and not peek_in_use(root, sid))
    now = time.time()
    for session_id in sorted(marked - set(result.deleted_sessions)):
        # A marker without its workspace: a removal killed halfway, or `sessions rm`.
        if os.path.lexists(root / session_id) or keep_hours_of(root, session_id, now) is None:
            continue
        try:
            if remove_unattended_session(root, session_id, logger):
                result.deleted_sessions.append(session_id)
        except (OSError, ValueError) as err:
            result.errors[session_id] = f"{type(err).__name__}: {err}"
    return result

