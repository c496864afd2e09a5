"""The identity registry: one session UUID per stable identity (seed 002).

A SQLite file in the workspace root's private folder, out of every guest's reach:

    <root>/.wasm-kernel/registry.sqlite3

with seed 002's `agent_sessions` table, adapted to notebooks (the notebook path
instead of repo_root, no separate display name: agent_key is both):

    identity_key    full SHA-256 hex of the identity (UNIQUE: one row per identity)
    session_id      the session's UUID (PRIMARY KEY), i.e. its workspace <root>/<uuid>
    notebook_path, mode, scope_key, agent_key      the identity's parts
    created_at, last_active_at, expires_at         UTC ISO 8601 with microseconds

Timestamps are text in one fixed format, so comparing strings compares instants
(that is how cleanup finds expired rows through an index).

Why it is race-safe: get_or_create_session is a single INSERT ... ON CONFLICT DO
UPDATE ... RETURNING statement. SQLite runs it under the database write lock, so of
any number of threads and processes binding the same identity at once exactly one
inserts, and every one of them gets that row's session_id back. WAL lets readers
run alongside the one writer, and a writer that finds the database locked retries
until the busy timeout (busy_timeout_s, 30 s) instead of failing with "database is
locked" (see SessionRegistry._run for why not SQLite's own busy handler).
synchronous=NORMAL (safe with WAL): a crash of
the process loses nothing; a power cut may lose the last binds, which only means
those identities get fresh sessions.

sqlite3 connections must not be shared between threads, nor carried over a fork,
so each (process, thread) opens its own, on first use.

The registry only maps identities to ids: the workspace is made by
create/get_session_sandbox when a sandbox opens the id, as for any session.
Deleting a session (delete_session_workspace, prune_sessions, `sessions rm`) drops
its row too (forget_session), so its identity gets a fresh session next time
rather than the id of a deleted one.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from ..core.logger import SandboxLogger
from .identity import MODES, SessionIdentity
from .layout import DEFAULT_WORKSPACE_ROOT, ensure_private_dirs, private_dir
from .leases import try_exclusive_lease
from .metadata import format_timestamp, utc_now
from .removal import remove_session_files
from .session_ids import new_session_id, validate_session_id
from .sqlite_schema import is_corrupt, prepare_database, write_transaction
from ..host.safe_fs import DIR_NOFOLLOW
from ..host.set_aside import Notes, file_place, open_lock_file, set_aside

REGISTRY_FILE = "registry.sqlite3"
SCHEMA_VERSION = 1
DEFAULT_TTL_HOURS = 24.0
DEFAULT_BUSY_TIMEOUT_S = 30.0
# Longest sleep between tries of a locked statement. Shorter (250 us) measured
# worse on 2 CPUs: the pollers take CPU from the writer they wait for.
MAX_RETRY_SLEEP_S = 1e-3

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agent_sessions (
    session_id     TEXT PRIMARY KEY NOT NULL,
    identity_key   TEXT UNIQUE NOT NULL CHECK (length(identity_key) = 64),
    agent_key      TEXT NOT NULL,
    notebook_path  TEXT NOT NULL,
    mode           TEXT NOT NULL,
    scope_key      TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    last_active_at TEXT NOT NULL,
    expires_at     TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS idx_agent_sessions_last_active ON agent_sessions(last_active_at);
CREATE INDEX IF NOT EXISTS idx_agent_sessions_expires ON agent_sessions(expires_at, session_id);
"""
# identity_key needs no index of its own: UNIQUE already makes one.

_UPSERT = """
INSERT INTO agent_sessions
    (session_id, identity_key, agent_key, notebook_path, mode, scope_key, created_at, last_active_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (identity_key) DO UPDATE SET
    -- max(): two binds racing with slightly different clocks never move time back
    last_active_at = max(last_active_at, excluded.last_active_at),
    expires_at = max(expires_at, excluded.expires_at)
RETURNING session_id
"""

# Rows of one agent and mode whose notebook has a given file name, most recently
# active first (earlier_sessions.py). substr, not LIKE: a name is compared exactly,
# case and wildcards ('_', '%') alike. A scan, not an index: it runs only when a bind
# made a new session, over one row per notebook.
_NAMED = ("expires_at >= ? AND agent_key = ? AND mode = ? AND substr(notebook_path, -?) = ?"
          " ORDER BY last_active_at DESC LIMIT ?")

_COLUMNS = "session_id, identity_key, notebook_path, mode, scope_key, agent_key, created_at, last_active_at, expires_at"


class RegistryError(RuntimeError):
    """The registry file cannot be used (corrupt, unwritable, closed); one-line message."""


class Bound(NamedTuple):
    """What a bind gave: the identity's session, and whether this bind created it."""

    session_id: str
    created: bool


class IdentityTaken(ValueError):
    """A move would give a row an identity another row already has (move_rows)."""

    def __init__(self, moving: RegistryEntry, identity: SessionIdentity, owner: RegistryEntry) -> None:
        super().__init__(f"session {owner.session_id} already has the identity session {moving.session_id} would get")
        self.moving, self.identity, self.owner = moving, identity, owner


@dataclass(frozen=True)
class RegistryEntry:
    """One row of agent_sessions."""

    session_id: str
    identity_key: str
    notebook_path: str
    mode: str
    scope_key: str
    agent_key: str
    created_at: datetime
    last_active_at: datetime
    expires_at: datetime

    @property
    def identity(self) -> SessionIdentity:
        """The identity as stored: its parts are for people (a non-UTF-8 byte of a
        path shows as \\xNN), its key is the one that was derived."""
        return SessionIdentity(self.notebook_path, self.mode, self.scope_key, self.agent_key, self.identity_key)

    def is_expired(self, now: datetime | None = None) -> bool:
        return self.expires_at < (now or utc_now())


@dataclass
class CleanupResult:
    removed_sessions: list[str] = field(default_factory=list)  # registry rows deleted
    deleted_workspaces: list[str] = field(default_factory=list)  # with prune_workspaces: workspaces removed
    in_use_sessions: list[str] = field(default_factory=list)  # expired but leased: row and files kept
    errors: dict[str, str] = field(default_factory=dict)  # session id -> why its files could not go
    batches: int = 0

    def __str__(self) -> str:
        n = len(self.removed_sessions)
        text = f"Removed {n} expired session{'s' if n != 1 else ''} from the registry"
        if self.deleted_workspaces:
            text += f", deleted {len(self.deleted_workspaces)} workspace(s)"
        if self.in_use_sessions:
            text += f", kept {len(self.in_use_sessions)} in use"
        if self.errors:
            text += f", {len(self.errors)} error(s)"
        return text


class SessionRegistry:
    """The identity -> session UUID map of one workspace root.

    Opening the object touches nothing on disk: the file is created by the first
    write (get_or_create_session), and lookup() on a root without a registry is None,
    so read-only callers (the CLI's list/show) never create one.
    """

    def __init__(
        self,
        workspace_root: Path | str = DEFAULT_WORKSPACE_ROOT,
        ttl_hours: float = DEFAULT_TTL_HOURS,
        *,
        busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S,
        notes: Notes | None = None,
    ) -> None:
        """notes: where a line goes for what a creating open set aside (a file
        that is not a registry at its place: see _conn)."""
        if isinstance(ttl_hours, bool) or not isinstance(ttl_hours, (int, float)) or not ttl_hours > 0:
            raise ValueError(f"ttl_hours must be a number > 0, got {ttl_hours!r}")
        if isinstance(busy_timeout_s, bool) or not isinstance(busy_timeout_s, (int, float)) or not busy_timeout_s >= 0:
            raise ValueError(f"busy_timeout_s must be a number >= 0, got {busy_timeout_s!r}")
        self.workspace_root = Path(workspace_root)
        self.path = private_dir(self.workspace_root) / REGISTRY_FILE
        self.ttl = timedelta(hours=ttl_hours)
        self._busy_timeout_s = busy_timeout_s
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[tuple[int, sqlite3.Connection]] = []  # (pid that opened it, connection)
        self._closed = False
        self._notes = notes

    # --- connections ---------------------------------------------------------------

    def _conn(self, create: bool) -> sqlite3.Connection | None:
        if self._closed:
            raise RegistryError(f"session registry {self.path} is closed")
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        # A connection inherited over fork() belongs to the parent: SQLite forbids
        # using it here, and closing it could disturb the parent's locks, so it is
        # simply not used (nor closed) in this process.
        if not create and not os.path.lexists(self.path):
            return None
        try:
            if create:
                self.workspace_root.mkdir(parents=True, exist_ok=True)
                ensure_private_dirs(self.workspace_root, self._notes)
            with _open_lock(self._lock_path, create, self._notes):
                if not create:
                    conn = self._connect()
                else:
                    # Nothing is followed, nothing found stops a start: what is not a
                    # registry of its own at its place (a folder, a link, a pipe, a
                    # file SQLite cannot read) is set aside, and a new registry begun
                    # (its notebooks get new sessions; their files stay where they are).
                    self._clear_place()
                    try:
                        conn = self._connect()
                    except sqlite3.DatabaseError as err:
                        if not is_corrupt(err):
                            raise
                        self._clear_place(why="not a SQLite database")
                        conn = self._connect()
        except (sqlite3.Error, OSError) as err:
            raise self._error(err) from None
        with self._lock:
            self._connections.append((os.getpid(), conn))
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None, check_same_thread=False)
        try:
            self._prepare(conn)
            conn.execute("PRAGMA busy_timeout = 0")  # from here on, _run waits (see there)
        except BaseException:
            conn.close()
            raise
        return conn

    def _clear_place(self, why: str | None = None) -> None:
        """Set aside the registry's file and SQLite's files beside it: those that are
        not plain files of their own, or (why: what is wrong with them) all of them."""
        dir_fd = os.open(self.path.parent, DIR_NOFOLLOW)
        try:
            for suffix in ("", "-wal", "-shm", "-journal"):
                what = f"the session registry{' ' + suffix[1:] if suffix else ''}"
                if why is None:
                    file_place(dir_fd, REGISTRY_FILE + suffix, what, self._notes)
                else:
                    set_aside(dir_fd, REGISTRY_FILE + suffix, what, why, self._notes)
        finally:
            os.close(dir_fd)

    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(REGISTRY_FILE + ".lock")

    def _run(self, conn: sqlite3.Connection, sql: str, params: tuple[object, ...]) -> list[tuple[object, ...]]:
        """Run one statement to completion, retrying while the database is locked.

        SQLite serialises writers itself; what matters is how a loser waits. Its
        built-in busy handler sleeps 1, 2, 5, 10... ms between tries, which with 4
        processes binding back to back made p99 8-12 ms for a statement that takes
        0.1 ms. (A flock() queue in front of the writes was no better; see
        BENCHMARKS.md, "Sessions: identity registry".) So connections have no busy
        timeout after setup, and a locked statement is retried here after a short
        randomised sleep (20 us doubling to 1 ms) until busy_timeout_s has passed.
        Retrying is safe: an autocommit statement that got SQLITE_BUSY changed nothing.
        fetchall, not fetchone: the statement must finish to end its implicit
        transaction and release the write lock.
        """
        deadline = None
        delay = 20e-6
        while True:
            try:
                return conn.execute(sql, params).fetchall()
            except sqlite3.OperationalError as err:
                if not _is_busy(err):
                    raise
                now = time.monotonic()
                if deadline is None:
                    deadline = now + self._busy_timeout_s
                elif now >= deadline:
                    raise
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, MAX_RETRY_SLEEP_S)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        prepare_database(conn, _SCHEMA, SCHEMA_VERSION, needs_table="agent_sessions")

    def _error(self, err: BaseException) -> RegistryError:
        text = " ".join(str(err).split()) or type(err).__name__
        return RegistryError(f"session registry {self.path} is not usable: {text}")

    def close(self) -> None:
        """Close every connection this object opened, in any thread. Idempotent."""
        with self._lock:
            self._closed = True
            conns, self._connections = self._connections, []
        for pid, conn in conns:
            if pid != os.getpid():
                continue  # inherited over fork: the parent's to close (see _conn)
            try:
                conn.close()
            except sqlite3.Error:
                pass

    def __enter__(self) -> SessionRegistry:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the API -------------------------------------------------------------------

    def get_or_create_session(self, identity: SessionIdentity) -> str:
        """The one session UUID of `identity`, a fresh uuid4 the first time; refreshes
        last_active_at and expires_at (now + ttl). Safe against concurrent callers in
        any number of threads and processes."""
        return self.bind(identity).session_id

    def bind(self, identity: SessionIdentity) -> Bound:
        """get_or_create_session, and whether this very call created the row: the id
        it proposed came back (of racing binds, only the one that inserted)."""
        _check_identity(identity)
        now = utc_now()
        stamp = format_timestamp(now)
        proposed = new_session_id()
        params = (
            proposed, identity.key, _text(identity.agent_key), _text(identity.notebook_path), identity.mode,
            _text(identity.scope_key), stamp, stamp, format_timestamp(now + self.ttl),
        )
        conn = self._conn(create=True)
        assert conn is not None
        try:
            rows = self._run(conn, _UPSERT, params)
        except sqlite3.Error as err:
            raise self._error(err) from None
        return Bound(rows[0][0], rows[0][0] == proposed)

    def lookup(self, session_id: str) -> RegistryEntry | None:
        """The registry row of a session id, or None (also when there is no registry).
        ValueError for a malformed id."""
        session_id = validate_session_id(session_id)
        conn = self._conn(create=False)
        if conn is None:
            return None
        try:
            rows = self._run(conn, f"SELECT {_COLUMNS} FROM agent_sessions WHERE session_id = ?", (session_id,))
        except sqlite3.Error as err:
            raise self._error(err) from None
        return _entry(rows[0]) if rows else None

    def lookup_identity(self, identity: SessionIdentity) -> RegistryEntry | None:
        """The row bound to an identity, without creating or refreshing it."""
        _check_identity(identity)
        conn = self._conn(create=False)
        if conn is None:
            return None
        try:
            rows = self._run(conn, f"SELECT {_COLUMNS} FROM agent_sessions WHERE identity_key = ?", (identity.key,))
        except sqlite3.Error as err:
            raise self._error(err) from None
        return _entry(rows[0]) if rows else None

    def entries_under(self, folder: str, limit: int = 10_000) -> list[RegistryEntry]:
        """The rows of notebooks at any depth below `folder` (an absolute, canonical
        path), at most `limit`, by path. A range scan on the path: '/' + 1 is '0', so
        [folder/, folder0) holds exactly the paths under folder/ (not 'folder2/...')."""
        prefix = folder.rstrip("/") + "/"
        return self._select("notebook_path >= ? AND notebook_path < ? ORDER BY notebook_path LIMIT ?",
                            (_text(prefix), _text(prefix[:-1] + "0"), int(limit)))

    def entries_at(self, notebook_path: str) -> list[RegistryEntry]:
        """Every row of one notebook (an absolute, canonical path): its modes and agents."""
        return self._select("notebook_path = ?", (_text(notebook_path),))

    def entries_named(self, file_name: str, agent_key: str, mode: str, limit: int) -> list[RegistryEntry]:
        """The unexpired rows of `agent_key` and `mode` whose notebook's file name is
        `file_name`, at most `limit`, most recently active first."""
        suffix = "/" + _text(file_name)
        return self._select(_NAMED, (format_timestamp(utc_now()), _text(agent_key), mode, len(suffix), suffix,
                                     int(limit)))

    def _select(self, where: str, params: tuple[object, ...]) -> list[RegistryEntry]:
        conn = self._conn(create=False)
        if conn is None:
            return []
        try:
            rows = self._run(conn, f"SELECT {_COLUMNS} FROM agent_sessions WHERE {where}", params)
        except sqlite3.Error as err:
            raise self._error(err) from None
        return [_entry(row) for row in rows]

    def forget_session(self, session_id: str, bound_before: datetime) -> bool:
        """Drop the row of a session whose files were just deleted, so its identity
        gets a fresh session next time instead of the deleted one. True if a row went.

        Creates nothing: without a registry file this is a no-op. The row is kept if
        it was bound at or after `bound_before` (the moment the deleter took the
        session's lease): that bind's caller is about to open the session, which
        makes its workspace again, and the identity should keep pointing at it.
        A caller that bound before the lease was taken and opens only after the
        delete gets an empty workspace whose row is gone; binding again after
        opening tells it so.
        """
        session_id = validate_session_id(session_id)
        conn = self._conn(create=False)
        if conn is None:
            return False
        try:
            rows = self._run(
                conn,
                "DELETE FROM agent_sessions WHERE session_id = ? AND last_active_at < ? RETURNING session_id",
                (session_id, format_timestamp(bound_before)),
            )
        except sqlite3.Error as err:
            raise self._error(err) from None
        return bool(rows)

    def move_rows(
        self, old_path: str, relocate: Callable[[RegistryEntry], SessionIdentity]
    ) -> list[tuple[RegistryEntry, SessionIdentity]]:
        """Re-key every row of the notebook `old_path` (canonical) and of the notebooks
        under it (a folder), each to relocate(row); [(row as it was, its new identity)].

        All or nothing, in one transaction: IdentityTaken when a new key already has a
        row (nothing changes), and an error from relocate rolls back too. BEGIN
        IMMEDIATE takes the write lock before the rows are read, so no bind of the new
        name slips in between the check and the update: a bind before the move makes
        the move refuse; one after finds the moved row. Creates nothing.
        """
        conn = self._conn(create=False)
        if conn is None:
            return []
        prefix = old_path.rstrip("/") + "/"  # the range [prefix, prefix-with-'0'): as entries_under
        try:
            with write_transaction(conn, lambda: self._run(conn, "BEGIN IMMEDIATE", ())):
                rows = conn.execute(
                    f"SELECT {_COLUMNS} FROM agent_sessions WHERE notebook_path = ?"
                    " OR (notebook_path >= ? AND notebook_path < ?) ORDER BY notebook_path",
                    (_text(old_path), _text(prefix), _text(prefix[:-1] + "0")),
                ).fetchall()
                moves = [(entry, relocate(entry)) for entry in map(_entry, rows)]
                claimed: dict[str, RegistryEntry] = {}
                for entry, identity in moves:
                    _check_identity(identity)
                    # Any row holding the new key is a clash, a moving one too: a
                    # rename never needs that, and it keeps every UPDATE below unique.
                    owner = conn.execute(f"SELECT {_COLUMNS} FROM agent_sessions WHERE identity_key = ?",
                                         (identity.key,)).fetchone()
                    taken = _entry(owner) if owner is not None else claimed.get(identity.key)
                    if taken is not None and taken.session_id != entry.session_id:
                        raise IdentityTaken(entry, identity, taken)
                    claimed[identity.key] = entry
                for entry, identity in moves:
                    conn.execute("UPDATE agent_sessions SET identity_key = ?, notebook_path = ? WHERE session_id = ?",
                                 (identity.key, _text(identity.notebook_path), entry.session_id))
        except sqlite3.Error as err:
            raise self._error(err) from None
        return moves

    def cleanup_expired_sessions(
        self,
        batch_size: int = 500,
        prune_workspaces: bool = False,
        logger: SandboxLogger | None = None,
    ) -> CleanupResult:
        """Remove rows whose expires_at has passed, `batch_size` per transaction so
        binds from other processes get in between batches.

        With prune_workspaces the expired sessions' workspaces and metadata go too,
        each under the session's exclusive lease: a session that a sandbox holds (in
        any process) keeps its row and its files (`in_use_sessions`). An expired row
        that is bound again meanwhile is kept as well. Files that cannot be removed
        go into `errors`; their row is gone, and prune_sessions reclaims them by age.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        logger = logger or SandboxLogger()
        result = CleanupResult()
        conn = self._conn(create=False)
        if conn is not None:
            now = format_timestamp(utc_now())
            try:
                if prune_workspaces:
                    self._cleanup_with_workspaces(conn, now, batch_size, result, logger)
                else:
                    self._cleanup_rows(conn, now, batch_size, result)
            except sqlite3.Error as err:
                raise self._error(err) from None
        logger.log_event(
            "session.registry.cleanup.completed",
            removed_count=len(result.removed_sessions),
            deleted_workspaces=len(result.deleted_workspaces),
            in_use_count=len(result.in_use_sessions),
            error_count=len(result.errors),
            batches=result.batches,
            prune_workspaces=prune_workspaces,
        )
        return result

    def _cleanup_rows(self, conn: sqlite3.Connection, now: str, batch_size: int, result: CleanupResult) -> None:
        while True:
            rows = self._run(
                conn,
                "DELETE FROM agent_sessions WHERE session_id IN ("
                " SELECT session_id FROM agent_sessions WHERE expires_at < ? ORDER BY expires_at LIMIT ?"
                ") RETURNING session_id",
                (now, batch_size),
            )
            if not rows:
                return
            result.batches += 1
            result.removed_sessions.extend(sorted(r[0] for r in rows))
            if len(rows) < batch_size:
                return

    def _cleanup_with_workspaces(
        self, conn: sqlite3.Connection, now: str, batch_size: int, result: CleanupResult, logger: SandboxLogger
    ) -> None:
        # Keyset pagination over (expires_at, session_id): rows that stay (in use,
        # rebound) are passed over instead of being fetched again forever.
        after = ("", "")
        while True:
            rows = self._run(
                conn,
                "SELECT expires_at, session_id FROM agent_sessions"
                " WHERE expires_at < ? AND (expires_at, session_id) > (?, ?)"
                " ORDER BY expires_at, session_id LIMIT ?",
                (now, after[0], after[1], batch_size),
            )
            if not rows:
                return
            result.batches += 1
            for expires_at, session_id in rows:
                self._expire_one(conn, session_id, now, result, logger)
            after = rows[-1]
            if len(rows) < batch_size:
                return

    def _expire_one(
        self, conn: sqlite3.Connection, session_id: str, now: str, result: CleanupResult, logger: SandboxLogger
    ) -> None:
        # Lease first, row second: once we hold LOCK_EX no sandbox can open the
        # session, and the row is deleted only if it is still expired (a bind that
        # refreshed it since our SELECT wins). A bind after the delete gets a new id.
        try:
            lease = try_exclusive_lease(self.workspace_root, session_id)
        except OSError as err:
            result.errors[session_id] = f"{type(err).__name__}: {err}"
            return
        if lease is None:
            result.in_use_sessions.append(session_id)
            logger.log_event("session.registry.cleanup.skipped", session_id=session_id, reason="in_use")
            return
        removed = False
        try:
            gone = self._run(
                conn,
                "DELETE FROM agent_sessions WHERE session_id = ? AND expires_at < ? RETURNING session_id",
                (session_id, now),
            )
            if not gone:
                return
            result.removed_sessions.append(session_id)
            try:
                if remove_session_files(self.workspace_root, session_id):
                    result.deleted_workspaces.append(session_id)
                removed = True
            except (OSError, ValueError) as err:  # ValueError: UnsafePathError
                result.errors[session_id] = f"{type(err).__name__}: {err}"
                logger.log_event("session.registry.cleanup.error", level="warning", session_id=session_id,
                                 error=result.errors[session_id])
        finally:
            lease.release(unlink=removed)


def get_or_create_session(
    identity: SessionIdentity,
    workspace_root: Path | str = DEFAULT_WORKSPACE_ROOT,
    *,
    ttl_hours: float = DEFAULT_TTL_HOURS,
) -> str:
    """One-shot SessionRegistry(workspace_root).get_or_create_session(identity)."""
    with SessionRegistry(workspace_root, ttl_hours) as registry:
        return registry.get_or_create_session(identity)


@contextmanager
def _open_lock(path: Path, create: bool, notes: Notes | None = None) -> Iterator[None]:
    """Serialise opening connections across processes.

    Switching a new database to WAL (and creating the schema) while other processes
    open it fails with an immediate "database is locked": SQLite does not run the
    busy handler for that step. The 4-process test hit it about one run in three.
    Once a connection is open, ordinary busy waiting applies and no lock is needed.
    A read-only caller that cannot create the lock file goes on without it: it only
    reads a registry someone else already set up.
    """
    if create:  # what is not a file at its place is set aside
        fd = open_lock_file(path, "the session registry's lock file", notes)
        if fd is None:
            raise OSError(errno.ENOTRECOVERABLE, f"{path} keeps being replaced by something that is not a file")
    else:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            yield
            return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _is_busy(err: sqlite3.OperationalError) -> bool:
    # Python 3.11 exposes sqlite_errorcode; the message is the fallback.
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return "locked" in str(err) or "busy" in str(err)


def _check_identity(identity: SessionIdentity) -> None:
    # A hand-made SessionIdentity whose key does not match its parts would bind a
    # session under a key nobody can derive again; recompute rather than trust it.
    if not isinstance(identity, SessionIdentity):
        raise ValueError(f"expected a SessionIdentity (see derive_session_identity), got {type(identity).__name__}")
    if identity.mode not in MODES:
        raise ValueError(f"unknown session mode {identity.mode!r}")
    if hashlib.sha256(identity.material.encode("utf-8", "surrogateescape")).hexdigest() != identity.key:
        raise ValueError("identity key does not match its parts; build identities with derive_session_identity")


def _entry(row: tuple[str, ...]) -> RegistryEntry:
    sid, key, path, mode, scope, agent, created, active, expires = row
    return RegistryEntry(
        sid, key, path, mode, scope, agent,
        datetime.fromisoformat(created), datetime.fromisoformat(active), datetime.fromisoformat(expires),
    )


__all__ = [
    "Bound",
    "CleanupResult",
    "IdentityTaken",
    "RegistryEntry",
    "RegistryError",
    "SessionRegistry",
    "get_or_create_session",
]


def _text(value: str) -> str:
    """A part as SQLite can store it: a path from a non-UTF-8 file name holds lone
    surrogates (os.fsdecode), which are kept as \\xNN; the key keeps the exact bytes."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
