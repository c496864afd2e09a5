"""One way to open a session database: WAL, its schema installed once, and one way
to write in a transaction.

The registry and the history store are both SQLite files that several kernels open
at once; both want the same pragmas, the same guarded schema creation and the same
all-or-nothing writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class SchemaTooNew(sqlite3.DatabaseError):
    """The file was written by a newer wasm-kernel; it is left untouched."""


def is_corrupt(err: sqlite3.Error) -> bool:
    """Whether SQLite says the file is not a database (or a damaged one)."""
    code = getattr(err, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)
    text = str(err)
    return "not a database" in text or "malformed" in text


@contextmanager
def write_transaction(conn: sqlite3.Connection, begin: Callable[[], object] | None = None) -> Iterator[None]:
    """BEGIN IMMEDIATE, then COMMIT when the block ends, ROLLBACK when it raises
    (anything, a KeyboardInterrupt too). IMMEDIATE takes the write lock before the
    block reads, so what it checks cannot change before it writes. `begin` runs the
    BEGIN instead (the registry's, which retries while another process writes). The
    connection is in autocommit mode (isolation_level=None)."""
    if begin is None:
        conn.execute("BEGIN IMMEDIATE")
    else:
        begin()
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def prepare_database(conn: sqlite3.Connection, schema: str, version: int, *, needs_table: str | None = None) -> None:
    """Put `conn` in WAL mode and install `schema` (statements split on ';') unless
    the file's user_version already says `version` (and, if given, `needs_table`
    exists). A file with a newer version raises SchemaTooNew without a write."""
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode=WAL")  # kept in the file: done once per database
    # With WAL, a crash loses nothing and a power cut at most the last transactions.
    conn.execute("PRAGMA synchronous=NORMAL")
    found = conn.execute("PRAGMA user_version").fetchone()[0]
    if found > version:
        raise SchemaTooNew(f"schema version {found} is newer than this wasm-kernel's {version}")
    has_table = needs_table is None or conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (needs_table,)
    ).fetchone()
    if found == version and has_table:
        return  # the common case: no write, so read-only callers work on read-only files
    with write_transaction(conn):  # two kernels creating it at once take turns
        for statement in schema.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {int(version)}")
