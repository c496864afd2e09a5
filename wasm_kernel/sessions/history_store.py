"""Per-session persistent input/output history, for Jupyter's history_request.

One SQLite file per session, in the private folder no guest can reach:

    <root>/.wasm-kernel/history/<uuid>.sqlite3

Modelled on IPython's HistoryManager, with its tables:

    sessions(session INTEGER PRIMARY KEY AUTOINCREMENT, start, end, num_cmds)
    history(session, line, source, source_raw)       PRIMARY KEY (session, line)
    output_history(session, line, output)            PRIMARY KEY (session, line)

A *session number* here is IPython's: 1, 2, 3... one per kernel start within the
same session UUID (start_kernel_session), so "the previous kernel run" is session
-1 relative to the current one, across restarts. Lines are execution counts.

Queries follow IPython (and so what ipykernel answers to a history_request):

    tail(n, raw, output, include_latest)      the last n entries over all sessions
    get_range(session, start, stop, raw, output)
    search(pattern, raw, output, n, unique)   SQLite GLOB on the raw source: * ? [..]

Each returns a list of (session, line, input), or (session, line, (input, output))
with output=True (output None when none was stored). raw=True returns the source as
typed, raw=False the transformed source (the same unless store() got source_raw).

Robustness. History is a convenience, so it never breaks execution: anything at
the file's (or a sidecar's) place that is not a plain file of its own (a folder, a
pipe, a socket, a symlink, a hard link to another file) is set aside beside it
(host/set_aside.py) and a fresh file started; when the file still cannot be used
(unwritable folder, a newer schema, an I/O error) the store runs on an in-memory
database instead (this kernel run's history still works, it just is not kept) and
logs `history.unavailable`; a file SQLite reports as corrupt is renamed to
`<uuid>.sqlite3.corrupt` (as IPython does) and a fresh one started. What was set
aside, each with a line, goes to `notes` (a kernel shows them on its first cell); an error in a later call is logged
(`history.error`, a warning the first time) and the call returns [] or does nothing.
Programming errors (a bad session id, a non-int line) still raise.

Concurrency: WAL, so readers never wait for the writer; two kernels on the same
session (two notebooks sharing an identity) take turns through SQLite's busy
handler for up to BUSY_TIMEOUT_S; AUTOINCREMENT keeps their session numbers
distinct. A SessionHistory may be used from several threads (one lock, one
connection).

Links: the folders are opened one at a time without following links, the file is
created with O_NOFOLLOW, refused if it has more than one link, and after SQLite has
opened it by path the path must still name the same inode. Guests cannot reach the
private folder at all; this guards against a confused host process.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import stat
import threading
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Union

from ..core.logger import SandboxLogger
from .layout import HISTORY_DIR, PRIVATE_DIR, history_path
from ..host.safe_fs import UnsafePathError, open_dir_path, open_root
from ..host.set_aside import Notes, file_place, remove_set_aside
from .session_ids import validate_session_id
from .sqlite_schema import SchemaTooNew, is_corrupt, prepare_database, write_transaction

SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 5.0
CORRUPT_SUFFIX = ".corrupt"
# SQLite's own files beside the database, by suffix.
SIDECARS = ("-wal", "-shm", "-journal")
# What remove_session_history deletes: the database, its sidecars, and a corrupt
# file set aside with its sidecars.
_ALL_SUFFIXES = ("", *SIDECARS, CORRUPT_SUFFIX, *(CORRUPT_SUFFIX + s for s in SIDECARS))

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session  INTEGER PRIMARY KEY AUTOINCREMENT,
    start    TEXT NOT NULL,
    end      TEXT,
    num_cmds INTEGER
);
CREATE TABLE IF NOT EXISTS history (
    session    INTEGER NOT NULL,
    line       INTEGER NOT NULL,
    source     TEXT NOT NULL,
    source_raw TEXT NOT NULL,
    PRIMARY KEY (session, line)
);
CREATE TABLE IF NOT EXISTS output_history (
    session INTEGER NOT NULL,
    line    INTEGER NOT NULL,
    output  TEXT NOT NULL,
    PRIMARY KEY (session, line)
);
"""

Entry = Union[tuple[int, int, str], tuple[int, int, tuple[str, Union[str, None]]]]


class _Unusable(Exception):
    """The history file cannot be used; the message says why."""


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


_BIG = 2**62  # far beyond any real count, and within SQLite's 64-bit integers


def _check_int(name: str, value: object, minimum: int = -_BIG) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not minimum <= value <= _BIG:
        raise ValueError(f"{name} must be between {minimum} and 2**62, got {value}")
    return value


class SessionHistory:
    """The input/output history of one session UUID; see the module docstring."""

    def __init__(self, workspace_root: Path | str, session_id: str, *, logger: SandboxLogger | None = None,
                 notes: Notes | None = None) -> None:
        self._notes = notes
        self.session_id = validate_session_id(session_id)
        self.workspace_root = Path(os.path.abspath(workspace_root))
        self.path = history_path(self.workspace_root, self.session_id)
        self._logger = logger or SandboxLogger()
        self._lock = threading.Lock()
        self._errors = 0
        self._session_number: int | None = None
        self._conn: sqlite3.Connection | None = self._open()

    # -- state -------------------------------------------------------------

    @property
    def persistent(self) -> bool:
        """True when entries go to the session's file, False on the in-memory fallback
        (or once closed)."""
        return self._conn is not None and self._file_backed

    @property
    def session_number(self) -> int | None:
        """The session number start_kernel_session returned, if it was called."""
        return self._session_number

    def close(self) -> None:
        """Record the current session's end and close the database. Idempotent; later
        calls store nothing and find nothing."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is None:
                return
            try:
                if self._session_number is not None:
                    conn.execute(
                        "UPDATE sessions SET end = ?, num_cmds = (SELECT COUNT(*) FROM history WHERE session = ?)"
                        " WHERE session = ?",
                        (_now(), self._session_number, self._session_number),
                    )
            except sqlite3.Error as err:
                self._failed("close", err)
            finally:
                conn.close()

    def __enter__(self) -> SessionHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -----------------------------------------------------------

    def start_kernel_session(self) -> int:
        """Begin a new IPython-style session (one per kernel start) and return its
        number: 1 for the first kernel run of this session UUID, then 2, 3... as
        recorded in the file. Raises ValueError once closed."""
        with self._lock:
            if self._conn is None:
                raise ValueError("start_kernel_session on a closed SessionHistory")
            try:
                number = self._conn.execute("INSERT INTO sessions (start) VALUES (?)", (_now(),)).lastrowid
            except sqlite3.Error as err:
                self._failed("start_kernel_session", err)
                # Nothing recorded: carry on with a number of our own; store() of it may
                # still fail (or succeed, when the error was passing) and is harmless.
                number = (self._session_number or 0) + 1
            self._session_number = int(number)
            return self._session_number

    def store(
        self,
        session_number: int,
        line_number: int,
        source: str,
        output: str | None = None,
        *,
        source_raw: str | None = None,
    ) -> None:
        """Record input line `line_number` (the execution count) of a session, and its
        output when given. Storing the same line again replaces its input, and its
        output when one is given (an output stored earlier is kept otherwise), so a
        kernel can store the input before running the cell and the output after.
        `source_raw`: the source as typed, when `source` is a transformed version."""
        _check_int("session_number", session_number, 1)
        _check_int("line_number", line_number, 0)
        if not isinstance(source, str) or not isinstance(source_raw, (str, type(None))):
            raise TypeError("source and source_raw must be str")
        if not isinstance(output, (str, type(None))):
            raise TypeError(f"output must be a str or None, got {type(output).__name__}")
        with self._lock:
            conn = self._conn
            if conn is None:
                return
            try:
                with write_transaction(conn):
                    conn.execute(
                        "INSERT INTO history (session, line, source, source_raw) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (session, line) DO UPDATE SET source = excluded.source,"
                        " source_raw = excluded.source_raw",
                        (session_number, line_number, source, source if source_raw is None else source_raw),
                    )
                    if output is not None:
                        conn.execute(
                            "INSERT INTO output_history (session, line, output) VALUES (?, ?, ?)"
                            " ON CONFLICT (session, line) DO UPDATE SET output = excluded.output",
                            (session_number, line_number, output),
                        )
            except sqlite3.Error as err:
                self._failed("store", err)

    # -- reading -----------------------------------------------------------

    def tail(self, n: int = 10, raw: bool = True, output: bool = False, include_latest: bool = False) -> list[Entry]:
        """The last `n` entries over all sessions, oldest first. As IPython's get_tail,
        the very latest entry is left out unless include_latest (it is usually the
        cell asking); ipykernel's history_request passes include_latest=True."""
        _check_int("n", n, 0)
        limit = n if include_latest else n + 1
        rows = self._select("ORDER BY session DESC, line DESC LIMIT ?", (limit,), raw, output, "tail")
        if not include_latest:
            rows = rows[1:]
        rows.reverse()
        return rows

    def get_range(
        self, session: int = 0, start: int = 1, stop: int | None = None, raw: bool = True, output: bool = False
    ) -> list[Entry]:
        """Lines start <= line < stop of one session (stop None or 0: to the end).

        session 0 is the current one (the one start_kernel_session began, else the
        latest recorded), -1 the one before it, and so on; a positive number is that
        session. As IPython does for the current session, a negative start or stop
        counts back from the session's last line + 1 (start=-1: the last line)."""
        _check_int("session", session)
        _check_int("start", start)
        if stop is not None:
            _check_int("stop", stop)
        with self._lock:
            conn = self._conn
            if conn is None:
                return []
            try:
                if session <= 0:
                    current = self._session_number
                    if current is None:
                        current = conn.execute("SELECT MAX(session) FROM sessions").fetchone()[0] or 0
                    session += current
                if session <= 0:
                    return []
                if start < 0 or (stop is not None and stop < 0):
                    last = conn.execute("SELECT MAX(line) FROM history WHERE session = ?", (session,)).fetchone()[0]
                    count = (last or 0) + 1
                    if start < 0:
                        start = max(0, start + count)
                    if stop is not None and stop < 0:
                        stop = stop + count
                        if stop <= start:
                            return []
            except sqlite3.Error as err:
                self._failed("get_range", err)
                return []
        if stop:
            return self._select("WHERE session = ? AND line >= ? AND line < ? ORDER BY line", (session, start, stop),
                                raw, output, "get_range")
        return self._select("WHERE session = ? AND line >= ? ORDER BY line", (session, start), raw, output, "get_range")

    def search(
        self, pattern: str | None = "*", raw: bool = True, output: bool = False, n: int | None = None, unique: bool = False
    ) -> list[Entry]:
        """Entries whose raw source matches the glob `pattern` (SQLite GLOB, case
        sensitive: `*`, `?`, `[abc]`), oldest first. `n`: only the last n matches.
        `unique`: each distinct source once, at its latest occurrence."""
        if pattern is None:
            pattern = "*"
        if not isinstance(pattern, str):
            raise TypeError(f"pattern must be a str, got {type(pattern).__name__}")
        if n is not None:
            _check_int("n", n, 0)
        sql = "WHERE history.source_raw GLOB ?"
        params: tuple[object, ...] = (pattern,)
        if unique:
            sql += " GROUP BY history.source_raw"
        if n is not None:
            sql += " ORDER BY session DESC, line DESC LIMIT ?"
            params += (n,)
        else:
            sql += " ORDER BY session, line"
        rows = self._select(sql, params, raw, output, "search", latest=unique)
        if n is not None:
            rows.reverse()
        return rows

    def _select(
        self, where: str, params: tuple[object, ...], raw: bool, output: bool, op: str, *, latest: bool = False
    ) -> list[Entry]:
        """IPython's _run_sql: the columns and the output join; `latest` makes each
        GROUP BY group take its values from its newest row (SQLite's bare columns
        with MAX)."""
        column = "history.source_raw" if raw else "history.source"
        columns = f"history.session, history.line, {column}"
        if output:
            columns += ", output_history.output"
            table = "history LEFT JOIN output_history USING (session, line)"
        else:
            table = "history"
        if latest:
            columns += ", MAX(history.session * 4294967296 + history.line)"
        with self._lock:
            conn = self._conn
            if conn is None:
                return []
            try:
                rows: Iterable[tuple[Any, ...]] = conn.execute(f"SELECT {columns} FROM {table} {where}", params).fetchall()
            except sqlite3.Error as err:
                self._failed(op, err)
                return []
        if output:
            return [(r[0], r[1], (r[2], r[3])) for r in rows]
        return [(r[0], r[1], r[2]) for r in rows]

    # -- opening -----------------------------------------------------------

    def _open(self) -> sqlite3.Connection:
        """The file's connection, or an in-memory one when the file cannot be used."""
        self._file_backed = False
        try:
            conn = self._open_file()
            self._file_backed = True
            return conn
        except (OSError, sqlite3.Error, _Unusable, UnsafePathError) as err:
            self._logger.log_event(
                "history.unavailable", level="warning", session_id=self.session_id, path=str(self.path),
                error=f"{type(err).__name__}: {err}", fallback="memory",
            )
        conn = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        conn.executescript(_SCHEMA)
        return conn

    def _open_file(self) -> sqlite3.Connection:
        dir_fd = _open_history_dir(self.workspace_root, create=True)
        try:
            try:
                return self._connect(dir_fd)
            except sqlite3.DatabaseError as err:
                if not is_corrupt(err):
                    raise
                self._set_aside_corrupt(dir_fd, err)
                return self._connect(dir_fd)
        finally:
            os.close(dir_fd)

    def _connect(self, dir_fd: int) -> sqlite3.Connection:
        identity = self._claim_file(dir_fd)
        conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
        try:
            # SQLite opened the file by its path; that must still be the file we checked.
            here = os.stat(self.path.name, dir_fd=dir_fd, follow_symlinks=False)
            there = os.stat(self.path)
            if not (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino) == identity:
                raise _Unusable(f"{self.path} changed while it was being opened")
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _claim_file(self, dir_fd: int) -> tuple[int, int]:
        """Make sure the database and its sidecars are plain files of their own
        (whatever else is there is set aside), creating the database, owner-only, if
        missing; return the database's (st_dev, st_ino)."""
        name = self.path.name
        for suffix in ("", *SIDECARS):
            file_place(dir_fd, name + suffix, f"the session's history{' ' + suffix[1:] if suffix else ''}", self._notes)
        try:
            fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600, dir_fd=dir_fd)
        except OSError as err:
            if err.errno == errno.ELOOP:
                raise _Unusable(f"{self.path} is a symbolic link") from None
            raise
        try:
            st = os.fstat(fd)
        finally:
            os.close(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _Unusable(f"{self.path} is not a regular file")
        if st.st_nlink != 1:
            raise _Unusable(f"{self.path} has {st.st_nlink} hard links")
        return st.st_dev, st.st_ino

    def _prepare(self, conn: sqlite3.Connection) -> None:
        try:
            prepare_database(conn, _SCHEMA, SCHEMA_VERSION)
        except SchemaTooNew as err:
            raise _Unusable(f"history {err}") from None

    def _set_aside_corrupt(self, dir_fd: int, err: sqlite3.Error) -> None:
        """Rename a corrupt database (and its sidecars, which belong to it) to
        <uuid>.sqlite3.corrupt*, replacing an older one, so a fresh file can start."""
        for suffix in ("", *SIDECARS):
            try:
                os.rename(self.path.name + suffix, self.path.name + CORRUPT_SUFFIX + suffix,
                          src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except FileNotFoundError:
                pass
        self._logger.log_event(
            "history.corrupt", level="warning", session_id=self.session_id, path=str(self.path),
            error=str(err), moved_to=str(self.path) + CORRUPT_SUFFIX,
        )
        if self._notes is not None:
            self._notes.append(f"the session's history was not a SQLite database: set aside as "
                               f"{self.path.name}{CORRUPT_SUFFIX}")

    def _failed(self, op: str, err: BaseException) -> None:
        self._errors += 1
        self._logger.log_event(
            "history.error", level="warning" if self._errors == 1 else "debug",
            session_id=self.session_id, operation=op, error=f"{type(err).__name__}: {err}", errors=self._errors,
        )


def _open_history_dir(workspace_root: Path, *, create: bool) -> int:
    """<root>/.wasm-kernel/history opened without following a link below the root;
    with `create`, missing folders are made owner-only (as ensure_private_dirs does,
    but relative to the opened parent, so a link in their place is never followed)."""
    root_fd = open_root(workspace_root)
    try:
        return open_dir_path(root_fd, [PRIVATE_DIR, HISTORY_DIR], create=create, mode=0o700)
    finally:
        os.close(root_fd)


def remove_session_history(workspace_root: Path | str, session_id: str) -> bool:
    """Delete a session's history file, its SQLite sidecars and any corrupt copy set
    aside; True if the database existed. Nothing is followed: a link in place of a
    file is removed as a link, a link in place of a folder means there is nothing of
    ours to remove. For whoever deletes or prunes the session."""
    name = history_path(Path(workspace_root), session_id).name
    try:
        dir_fd = _open_history_dir(Path(workspace_root), create=False)
    except (FileNotFoundError, NotADirectoryError, UnsafePathError):
        return False
    existed = False
    try:
        for suffix in _ALL_SUFFIXES:
            try:
                os.unlink(name + suffix, dir_fd=dir_fd)
            except FileNotFoundError:
                continue
            existed = existed or suffix == ""
        for suffix in ("", *SIDECARS):
            remove_set_aside(dir_fd, name + suffix)
    finally:
        os.close(dir_fd)
    return existed
