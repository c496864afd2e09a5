"""A session's disk ledger: one count of its bytes and names, for every writer in every process.

Two kernels of one notebook write the same workspace, each guest has a /tmp of its
own, and the Sandbox drive, the lab panel and the magics write from other threads
and processes. A quota each writer kept alone let them pass it together (a cell and
a drive upload put 26 MiB under a 16 MiB quota). The ledger is the one count. It
lives in the session's private folder (`<root>/.wasm-kernel/ledger/<uuid>/`), which
no guest mounts, and every change to it is made under an exclusive flock:

- `ledger`: the record, the session's bytes and names as last committed, when the
  workspace was last counted, and whether it is stale (a writer died holding a
  reservation);
- `w-*`: one slot per long-lived writer (a guest), flock'ed by it for its life,
  holding the reservation the ledger granted it.

A guest writes often, so it counts its writes in memory against its reservation
and comes to the ledger only when a write would pass it: then it commits what it
spent and asks for more, which is granted only within

    free = quota - committed - every other slot's reservation,

so the writers together never pass the quota. A turn's end commits and hands the
reservation back. A host write (`charge`) is counted under the lock before it is
written, and what it did not write is refunded.

A writer that dies leaves its slot unlocked: its whole reservation is then taken
as spent (its writes may have used it all) and the record is marked stale. The
next writer to come when no other holds a slot counts the workspace again (as
every guest's start always did), which also forgets the dead writers' /tmp; so
does one that finds the count older than RECOUNT_S. Over-counts
are safe; nothing is ever under-counted but for a torn record, which is counted
again from the workspace at once.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import struct
import zlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .log import get_logger
from .safe_fs import open_root
from .set_aside import folder_at, set_aside

log = get_logger("wasm_kernel.disk")

RECORD = struct.Struct("<8sIIqqd")  # magic, version, flags, bytes, names, counted at; then a crc32
MAGIC = b"WKLEDGER"
VERSION = 1
STALE = 1
SLOT = struct.Struct("<qq")  # reserved bytes, names; then a crc32
SLOT_PREFIX = "w-"
RECORD_NAME = "ledger"
FILE_FLAGS = os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC
# A reservation is an eighth of what is free, at least what the write needs and
# at most this much: a writer that stops holds little that others could use.
CHUNK_BYTES = 16 << 20
CHUNK_NAMES = 1024
INF = 1 << 62  # the room of a dimension without a limit
# With no writer holding a slot, a count older than this is taken again from the
# workspace: what changed there without the ledger (files an operator copied in) is
# then counted too, within seconds, and a drive's uploads do not walk it every time.
RECOUNT_S = 10.0

Measure = Callable[[], tuple[int, int]]


class LedgerUnavailable(OSError):
    """The ledger's folder or files cannot be used (the caller counts alone, or refuses)."""


@dataclass
class _State:
    used_bytes: int
    used_names: int
    stale: bool
    slots: dict[str, tuple[int, int]]  # live slots' reservations, by file name
    counted_at: float = 0.0  # when the workspace was last counted (time.time())
    missing: bool = False  # no record (or a torn one): the count must be taken now
    counted_now: bool = False  # the count was just taken from the workspace

    def reserved(self, but: str | None = None) -> tuple[int, int]:
        others = [r for name, r in self.slots.items() if name != but]
        return sum(r[0] for r in others), sum(r[1] for r in others)


def _pack(payload: bytes) -> bytes:
    return payload + struct.pack("<I", zlib.crc32(payload))


def _unpack(raw: bytes, size: int) -> bytes | None:
    if len(raw) != size + 4:
        return None
    payload, (crc,) = raw[:size], struct.unpack("<I", raw[size:])
    return payload if zlib.crc32(payload) == crc else None


def _free(limit: int | None, used: int, reserved: int) -> int:
    return INF if limit is None else max(0, limit - used - reserved)


def _grant(need: int, free: int, limit: int | None, chunk: int) -> int:
    """What to reserve for a need of `need` out of `free` (>= need). A dimension
    without a limit reserves nothing: its writer checks nothing there."""
    if limit is None or need <= 0:
        return 0
    return min(free, max(need, min(chunk, free // 8)))


class DiskLedger:
    """The ledger of one session, in the folder `base`/`parts` (made owner-only, no
    link followed on the way); `measure` counts the session's workspace when the
    ledger must count again."""

    def __init__(self, base: Path, parts: Sequence[str], measure: Measure) -> None:
        self.base = Path(base)
        self.parts = list(parts)
        self.measure = measure
        self._dir_fd = -1
        self._guard = threading.Lock()

    def close(self) -> None:
        with self._guard:
            if self._dir_fd >= 0:
                os.close(self._dir_fd)
                self._dir_fd = -1

    def __del__(self) -> None:  # a ledger left open by a caller that raised
        if getattr(self, "_dir_fd", -1) >= 0:
            os.close(self._dir_fd)

    # --- the lock ------------------------------------------------------------------

    def _folder(self) -> int:
        """The ledger folder's descriptor, opened once, made (owner-only) if missing;
        whatever is found at one of its folders' names instead of a folder is set
        aside, never followed (host/set_aside.py)."""
        with self._guard:
            if self._dir_fd < 0:
                try:
                    fd = open_root(self.base)
                    try:
                        for part in self.parts:
                            nxt = folder_at(fd, part, "the session's disk ledger folder")
                            os.close(fd)
                            fd = nxt
                    except BaseException:
                        os.close(fd)
                        raise
                    self._dir_fd = fd
                except (OSError, ValueError) as err:
                    raise LedgerUnavailable(errno.EIO, f"the session's disk ledger cannot be opened: {err}") from None
            return self._dir_fd

    @contextmanager
    def _locked(self, own_slot: str | None = None, recount: bool = True) -> Iterator[_State]:
        """The ledger's state under its exclusive lock, written back when the block ends.
        recount=False: the block applies a change measured before it (a refund), which
        a count taken now would already hold; the count waits for the next block."""
        dir_fd = self._folder()
        fd = self._open_record(dir_fd)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            state, fresh, reclaimed = self._read(fd, dir_fd, own_slot)
            if not recount and not state.missing:
                fresh = False
            if fresh:
                state.used_bytes, state.used_names = self.measure()
                state.stale = False
                state.counted_at = time.time()
                state.counted_now = True
            before = (state.used_bytes, state.used_names, state.stale)
            yield state
            if fresh or reclaimed or (state.used_bytes, state.used_names, state.stale) != before:
                flags = STALE if state.stale else 0
                raw = _pack(RECORD.pack(MAGIC, VERSION, flags, max(0, state.used_bytes), max(0, state.used_names),
                                        state.counted_at))
                os.pwrite(fd, raw, 0)
        finally:
            os.close(fd)  # drops the lock

    def _open_record(self, dir_fd: int) -> int:
        """The record, opened without following a link. Anything else found at its
        name (a folder, a link, a FIFO) is set aside, with a warning, and a new record
        is made: the next count is taken from the workspace."""
        for _ in range(3):
            try:
                fd = os.open(RECORD_NAME, FILE_FLAGS | os.O_CREAT | os.O_NONBLOCK, 0o600, dir_fd=dir_fd)
            except OSError as err:
                if err.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EACCES):
                    raise LedgerUnavailable(err.errno or errno.EIO,
                                            f"the session's disk ledger cannot be opened: {err}") from None
            else:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    return fd
                os.close(fd)
            set_aside(dir_fd, RECORD_NAME, "the session's disk ledger")
        raise LedgerUnavailable(errno.EIO, "the session's disk ledger keeps being replaced by something else")

    def _read(self, fd: int, dir_fd: int, own_slot: str | None) -> tuple[_State, bool, bool]:
        """The record and the live slots; dead slots reclaimed (then True last).
        `fresh`: the count must be taken again (no record, a torn one, or a stale
        one with no writer alive)."""
        payload = _unpack(os.pread(fd, RECORD.size + 4, 0), RECORD.size)
        fresh = payload is None
        used_b = used_n = 0
        stale = False
        counted_at = 0.0
        if payload is not None:
            magic, version, flags, used_b, used_n, counted_at = RECORD.unpack(payload)
            if magic != MAGIC or version != VERSION:
                fresh = True
            stale = bool(flags & STALE)
        if payload is None and os.fstat(fd).st_size:
            log.warning("disk.ledger_torn", folder=str(self.base.joinpath(*self.parts)))
        slots: dict[str, tuple[int, int]] = {}
        reclaimed = False
        for name in os.listdir(dir_fd):
            if not name.startswith(SLOT_PREFIX):
                continue
            found = self._slot(dir_fd, name, own_slot)
            if found is None:  # gone meanwhile, or not a file
                continue
            reserved, alive = found
            if alive:
                slots[name] = reserved
            else:
                used_b += reserved[0]
                used_n += reserved[1]
                stale = reclaimed = True
                log.warning("disk.ledger_writer_gone", slot=name, reserved_bytes=reserved[0], reserved_names=reserved[1])
                try:
                    os.unlink(name, dir_fd=dir_fd)
                except OSError:
                    pass
        # Counted again only with no writer holding a slot, this one included: the
        # count is the workspace's, and a live writer's /tmp is in the ledger alone.
        quiet = not slots
        old = not 0 <= time.time() - counted_at <= RECOUNT_S
        state = _State(used_b, used_n, stale, slots, counted_at, missing=payload is None or fresh)
        return state, fresh or (quiet and (stale or old)), reclaimed

    @staticmethod
    def _slot(dir_fd: int, name: str, own: str | None) -> tuple[tuple[int, int], bool] | None:
        """(reservation, alive) of a slot; None if it vanished or is not a file of ours."""
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=dir_fd)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            payload = _unpack(os.pread(fd, SLOT.size + 4, 0), SLOT.size)
            reserved = SLOT.unpack(payload) if payload is not None else (0, 0)
            if name == own:
                return reserved, True
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return reserved, True  # its writer holds it
            return reserved, False
        finally:
            os.close(fd)

    # --- one-shot host writes --------------------------------------------------------

    def charge(self, grow_bytes: int, grow_names: int, max_bytes: int | None, max_names: int | None) -> bool:
        """Count a host write before it is made: False (nothing counted) if it would
        pass the quota. Shrinking is always counted. Refund what was not written."""
        with self._locked() as state:
            reserved_b, reserved_n = state.reserved()
            if grow_bytes > 0 and grow_bytes > _free(max_bytes, state.used_bytes, reserved_b):
                return False
            if grow_names > 0 and grow_names > _free(max_names, state.used_names, reserved_n):
                return False
            state.used_bytes += grow_bytes
            state.used_names += grow_names
            return True

    def refund(self, bytes_: int, names: int) -> None:
        """Give back what a charge counted and the write did not make."""
        if bytes_ or names:
            with self._locked(recount=False) as state:
                if not state.counted_now:  # a count taken now (no record was left) holds it already
                    state.used_bytes -= bytes_
                    state.used_names -= names

    def usage(self) -> tuple[int, int]:
        """(bytes, names) committed: what the writers had written when they last came by."""
        with self._locked() as state:
            return state.used_bytes, state.used_names

    def room(self, max_bytes: int | None) -> int | None:
        """The bytes no writer has spent or holds (None: no limit)."""
        if max_bytes is None:
            return None
        with self._locked() as state:
            return min(INF, _free(max_bytes, state.used_bytes, state.reserved()[0]))

    # --- long-lived writers --------------------------------------------------------

    def join(self) -> LedgerSlot:
        """A slot for a writer that writes often (a guest), held until its close().

        Made and locked under the ledger's lock, so no other writer ever sees it
        unlocked (it would take it for a dead writer's). A writer joining a stale
        ledger that no other writer holds counts the workspace again: the dead
        writers' /tmp is gone (_read)."""
        dir_fd = self._folder()
        name = f"{SLOT_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
        with self._locked() as state:
            try:
                fd = os.open(name, FILE_FLAGS | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
            except OSError as err:
                raise LedgerUnavailable(err.errno or errno.EIO, f"the session's disk ledger cannot be joined: {err}") \
                    from None
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.pwrite(fd, _pack(SLOT.pack(0, 0)), 0)
            slot = LedgerSlot(self, name, fd)
            slot.committed = (state.used_bytes, state.used_names)
        return slot

    def _leave(self, name: str) -> None:
        try:
            os.unlink(name, dir_fd=self._folder())
        except OSError:
            pass


class LedgerSlot:
    """One writer's place in the ledger: its reservation, written in its slot file."""

    def __init__(self, ledger: DiskLedger, name: str, fd: int) -> None:
        self.ledger = ledger
        self.name = name
        self._fd = fd
        self.reserved = (0, 0)
        self.committed = (0, 0)  # the ledger's count as this writer last saw it

    def sync(self, spent: tuple[int, int], need: tuple[int, int], limits: tuple[int | None, int | None],
             keep: int = 0) -> bool:
        """Commit what was spent since the last sync (it may be negative), then hold a
        reservation of at least `need` (bytes, names), or only of `keep` bytes if the
        quota has no room for it (False). need (0, 0): hand the reservation back.

        `keep`: bytes this writer may already have written uncommitted (writes it
        counts only when their descriptor settles, within its reservation): they stay
        reserved, or another writer could take room that is no longer there."""
        max_b, max_n = limits
        with self.ledger._locked(own_slot=self.name) as state:
            state.used_bytes += spent[0]
            state.used_names += spent[1]
            others_b, others_n = state.reserved(but=self.name)
            free_b = _free(max_b, state.used_bytes, others_b)
            free_n = _free(max_n, state.used_names, others_n)
            ok = max(need[0], keep) <= free_b and need[1] <= free_n
            grant = (_grant(max(need[0], keep), free_b, max_b, CHUNK_BYTES),
                     _grant(need[1], free_n, max_n, CHUNK_NAMES)) if ok else \
                (min(keep, free_b) if max_b is not None else 0, 0)
            self._write(grant)
            self.reserved = grant
            self.committed = (state.used_bytes, state.used_names)
        return ok

    def _write(self, reserved: tuple[int, int]) -> None:
        os.pwrite(self._fd, _pack(SLOT.pack(*reserved)), 0)

    def close(self, spent: tuple[int, int]) -> None:
        """Commit the last spending (a guest's /tmp, which goes with it, as negative)
        and leave the ledger. Never raises."""
        if self._fd < 0:
            return
        try:
            with self.ledger._locked(own_slot=self.name) as state:
                state.used_bytes += spent[0]
                state.used_names += spent[1]
                self.ledger._leave(self.name)
        except OSError as err:
            log.warning("disk.ledger_close_failed", error=str(err)[:200])
        finally:
            os.close(self._fd)
            self._fd = -1


__all__ = ["DiskLedger", "LedgerSlot", "LedgerUnavailable"]
