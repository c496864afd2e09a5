"""A copy of a guest's whole wasm state: linear memory plus its mutable globals.

Between turns the guest's native wasm stack is empty, so memory and globals are
all the state there is (the reactor's funcref table is fixed and never written).

The first checkpoint copies all of memory into a buffer that reserves the whole
wasm32 address space lazily (nothing is committed until written), so it never has
to move. Later checkpoints copy only the pages written since the previous one,
found with `DirtyPages`; a rollback copies back only the pages the failed turn
wrote. Without dirty-page support every checkpoint and restore is a full copy.

One level of undo. A checkpoint taken with `undo_point=True` (after a cell) keeps
what it overwrites in the buffer, the "undo record", so that `revert()` can put
the buffer back to the state before that cell and `restore()` then copies it into
the guest:
- an incremental checkpoint first saves the buffer's old contents of the pages it
  is about to overwrite into a journal (a `1+1` cell: ~700 KiB, in the same pass);
- a full-copy checkpoint copies into a second buffer and swaps the two, so the old
  buffer is the record at no extra copying (but a second copy's worth of memory).
Pages the cell added by growing memory need nothing: the state before the cell
never refers to them. A checkpoint taken without `undo_point` (after a query)
merges into the record: it saves the pages it overwrites for the first time, so
undo still goes back to before the last cell, not to before the query.
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import wasmtime

from .dirty_pages import DirtyPages, DirtyPagesError
from .log import get_logger
from .memory_image import MemoryImage, map_image

log = get_logger("wasm_kernel.host")

_WASM32_SPACE = 4 << 30
_PAGE = mmap.PAGESIZE
# A cell that overwrites more existing memory than this keeps no undo record: its
# pre-images would be a third copy of the guest, held only in case of %undo.
UNDO_JOURNAL_MAX = 256 << 20
_JOURNAL_KEEP = 8 << 20  # journal pages kept committed between records; the rest are given back
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MADV_DONTNEED = 4

NO_UNDO_YET = "no cell has completed since the interpreter started"
ALREADY_UNDONE = "the last cell was already undone (one level only)"
REWOUND = "the last step was a %rewind (%rewind goes back again)"


@dataclass(frozen=True)
class HandedRecord:
    """An undo record as it is replaced (MemoryCheckpoint.on_record): the pre-images
    that lead from the checkpoint's state back to the undo point's, or None and why
    there are none (the history's chain breaks there)."""

    ranges: list[tuple[int, int]] | None
    data: memoryview | bytes
    size: int
    globals: list[Any]
    reason: str | None = None

    def pieces(self) -> Iterable[tuple[int, int, memoryview]]:
        view, at = memoryview(self.data), 0
        for offset, end in self.ranges or ():
            yield offset, end, view[at:at + end - offset]
            at += end - offset


def release_pages(address: int, length: int) -> None:
    """Give a dead memory's pages back to the host (its mapping stays reserved)."""
    _libc.madvise(address, length, _MADV_DONTNEED)
_MAP_FAILED = ctypes.c_void_p(-1).value


def _view(address: int, length: int) -> memoryview:
    """Bytes at `address` as a memoryview: slice copies cost less per call than ctypes.memmove."""
    return memoryview((ctypes.c_char * length).from_address(address)).cast("B")


def _reserve(length: int) -> int:
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | getattr(mmap, "MAP_NORESERVE", 0)
    addr = _libc.mmap(None, length, mmap.PROT_READ | mmap.PROT_WRITE, flags, -1, 0)
    if addr in (None, _MAP_FAILED):
        raise MemoryError("cannot reserve address space for a guest checkpoint")
    return int(addr)


def _unmarked(pages: bytearray, page: int, last: int) -> Iterator[tuple[int, int]]:
    """The runs [first, stop) of pages in [page, last) not marked in `pages` (1 per page
    saved already): the pages whose pre-images are still to be kept."""
    while page < last:
        first = pages.find(0, page, last)
        if first < 0:
            return
        stop = pages.find(1, first, last)
        stop = last if stop < 0 else stop
        yield first, stop
        page = stop


def _mark(pages: bytearray, ranges: list[tuple[int, int]]) -> None:
    for offset, end in ranges:
        pages[offset // _PAGE : end // _PAGE] = b"\x01" * ((end - offset) // _PAGE)


@dataclass
class _UndoRecord:
    """How to put the buffer back to the checkpoint before the last cell."""

    size: int
    globals: list[Any]
    kind: str | None = None  # "journal" or "spare", set by the take that fills the record
    # Buffer ranges (offset, end) saved in the journal, back to back in this order.
    ranges: list[tuple[int, int]] = field(default_factory=list)
    used: int = 0  # journal bytes
    pages: bytearray | None = None  # 1 per page already in `ranges`; built by the first merge


class MemoryCheckpoint:
    def __init__(self, *, incremental: bool = True, no_undo_reason: str = NO_UNDO_YET) -> None:
        self._buffer = _reserve(_WASM32_SPACE)
        self._buffer_view = _view(self._buffer, _WASM32_SPACE)
        self._tracker = DirtyPages.open() if incremental else None
        self._base = 0  # guest memory address the tracker watches
        self._tracked = 0  # bytes of guest memory under tracking
        self._memory: tuple[int, int, memoryview] | None = None  # (base, size, view) of guest memory
        self.size = 0
        self.globals: list[Any] = []
        self.last_copied = 0  # bytes copied by the last take/restore, for benchmarks
        self._undo: _UndoRecord | None = None
        self._no_undo = no_undo_reason
        self._journal = 0  # reserved on first use, like the buffer
        self._journal_view: memoryview | None = None
        self._journal_max = UNDO_JOURNAL_MAX
        self._journal_high = 0  # journal bytes committed since the last release
        self._spare = 0  # the second buffer of full-copy undo, reserved on first use
        self._spare_view: memoryview | None = None
        # Buffer ranges (offset, end) that differ from memory although the tracker
        # has not seen them written: set by revert(), consumed by the next restore.
        self._stale: list[tuple[int, int]] = []
        # Told of each undo record as a new one replaces it (memory_history.py keeps it
        # as a point's delta); None: records are only dropped.
        self.on_record: Callable[[HandedRecord], None] | None = None
        # No record now, and none lost: the last was handed over or undone (True),
        # or dropped (False: on_record hears that the chain breaks there).
        self.handed = False

    @property
    def taken(self) -> bool:
        return self.size > 0

    @property
    def incremental(self) -> bool:
        return self._tracker is not None

    def _memory_view(self, base: int, size: int) -> memoryview:
        cached = self._memory
        if cached is None or cached[0] != base or cached[1] != size:
            self._memory = cached = (base, size, _view(base, size))
        return cached[2]

    # --- undo record -------------------------------------------------------------

    @property
    def undo_available(self) -> bool:
        return self._undo is not None and self._undo.kind is not None

    @property
    def undo_unavailable_reason(self) -> str | None:
        """None if revert() can undo the last cell, else why not."""
        return None if self.undo_available else self._no_undo

    @property
    def undo_size(self) -> int | None:
        """Memory size at the undo point, the size revert() returns to."""
        return self._undo.size if self.undo_available and self._undo is not None else None

    def revert(self) -> None:
        """Put the buffer back to the checkpoint before the last `undo_point` take,
        and drop the record (one level). The guest is not touched: `restore()` (or
        `restore_fresh()`) must follow, and copies back what revert changed."""
        record = self._undo
        if record is None or record.kind is None:
            raise RuntimeError(f"nothing to undo: {self._no_undo}")
        if record.kind == "journal":
            buffer, journal, at = self._buffer_view, self._journal_view, 0
            assert journal is not None or not record.ranges
            for offset, end in record.ranges:
                stop = at + end - offset
                buffer[offset:end] = journal[at:stop]  # type: ignore[index]
                at = stop
            self._stale = list(record.ranges)
        else:
            self._swap_buffers()
            self._stale = [(0, record.size)]
        self.size = record.size
        self.globals = record.globals
        self._drop_undo(ALREADY_UNDONE)
        self.handed = True  # consumed: the newest point goes with it (nothing of the chain lost)

    def undo(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        """The guest back to the state before the last cell, in place."""
        self.revert()
        self.restore(store, memory, globals_)

    def _swap_buffers(self) -> None:
        if not self._spare:
            self._spare = _reserve(_WASM32_SPACE)
            self._spare_view = _view(self._spare, _WASM32_SPACE)
        assert self._spare_view is not None
        self._buffer, self._spare = self._spare, self._buffer
        self._buffer_view, self._spare_view = self._spare_view, self._buffer_view

    def _begin_undo(self) -> None:
        self._hand_over_record()
        self._drop_undo(NO_UNDO_YET)
        if self.taken:
            self._undo = _UndoRecord(self.size, list(self.globals))
            self.handed = False

    def _hand_over_record(self) -> None:
        """Before the undo record is replaced: hand it to on_record (a journal's
        pre-images), or say why there is none (an undo consumed it: nothing lost)."""
        if self.on_record is None or not self.taken:
            return
        record = self._undo
        if record is not None and record.kind == "journal":
            journal = self._journal_view
            data: memoryview | bytes = journal[:record.used] if journal is not None else b""
            self.on_record(HandedRecord(list(record.ranges), data, record.size, list(record.globals)))
        elif record is not None and record.kind == "spare" and self._spare_view is not None:
            self.on_record(self._spare_difference(record))
        elif record is None and self.handed:
            return
        else:
            reason = "the checkpoint after a cell failed" if record is not None else self._no_undo
            self.on_record(HandedRecord(None, b"", self.size, list(self.globals), reason))
        self.handed = True

    def _spare_difference(self, record: _UndoRecord) -> HandedRecord:
        """Full-copy undo's record is the whole old buffer: its pages that differ from
        the new one are the same pre-images a journal would hold (found page by page:
        without dirty tracking there is nothing better)."""
        old, new = self._spare_view, self._buffer_view
        assert old is not None
        ranges: list[tuple[int, int]] = []
        chunks: list[bytes] = []
        limit = min(record.size, self.size)
        start = None
        for offset in range(0, limit, _PAGE):
            differs = old[offset:offset + _PAGE] != new[offset:offset + _PAGE]
            if differs and start is None:
                start = offset
            elif not differs and start is not None:
                ranges.append((start, offset))
                start = None
        if start is not None:
            ranges.append((start, limit))
        if record.size > limit:  # never seen (memory only grows), but then all of it is needed
            ranges.append((limit, record.size))
        for offset, end in ranges:
            chunks.append(bytes(old[offset:end]))
        return HandedRecord(ranges, b"".join(chunks), record.size, list(record.globals))

    def peek_record(self) -> HandedRecord | None:
        """The live undo record as a journal's pre-images, left in place (a saved
        state keeps the points), or None if there is no such record."""
        record = self._undo
        if record is None or record.kind != "journal":
            return None
        journal = self._journal_view
        return HandedRecord(list(record.ranges), journal[:record.used] if journal is not None else b"", record.size,
                            list(record.globals))

    def hand_over(self, reason: str = REWOUND) -> None:
        """Hand the undo record over now and drop it (a rewind, a move to another engine)."""
        self._hand_over_record()
        self._drop_undo(reason)
        self.handed = True

    def rewind_through(self, deltas: Iterable[Any]) -> HandedRecord:
        """Put the buffer back through `deltas` (each with pieces(), size and globals:
        memory_history.Delta, newest first, all read already, so nothing here fails
        half way), after handing the undo record over. Returns the pre-images of
        every page this overwrote: the delta from the new state back to the one
        before (given back to rewind_through, it undoes this). The guest is not
        touched: `restore()` (or `restore_fresh()`) must follow."""
        self.hand_over()
        limit = self.size  # pages past it did not exist in the state left: nothing to keep
        before_size, before_globals = self.size, list(self.globals)
        saved = bytearray(limit // _PAGE)
        ranges: list[tuple[int, int]] = []
        chunks: list[bytes] = []
        buffer = self._buffer_view
        for delta in deltas:
            for offset, end, piece in delta.pieces():
                for first, stop in _unmarked(saved, offset // _PAGE, min(end, limit) // _PAGE):
                    ranges.append((first * _PAGE, stop * _PAGE))
                    chunks.append(bytes(buffer[first * _PAGE:stop * _PAGE]))
                    saved[first:stop] = b"\x01" * (stop - first)
                buffer[offset:end] = piece
                self._stale.append((offset, end))
            self.size, self.globals = delta.size, list(delta.globals)
        return HandedRecord(ranges, b"".join(chunks), before_size, before_globals)

    def absorb(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global],
               back: HandedRecord) -> HandedRecord:
        """After a rewind's restore, a turn changed the guest (a resumed state's fix-up
        for this host): the buffer takes its pages, and `back` (the rewind's way back)
        gains their content from before it where it lacks them, so going back undoes
        the turn too. Returns the way back, extended."""
        base = ctypes.addressof(memory.data_ptr(store).contents)
        size = memory.data_len(store)
        if self._tracker is not None and base == self._base:
            written = [(start - base, end - base) for start, end in self._tracker.written(base, base + self._tracked)]
        else:  # no tracking: the pages that differ
            old, new = self._buffer_view, self._memory_view(base, size)
            written = [(o, o + _PAGE) for o in range(0, min(size, self.size), _PAGE) if old[o:o + _PAGE] != new[o:o + _PAGE]]
        limit = back.size
        saved = bytearray(limit // _PAGE)
        _mark(saved, [(o, min(e, limit)) for o, e in (back.ranges or []) if o < limit])
        ranges, chunks = list(back.ranges or []), [bytes(back.data)]
        buffer, current = self._buffer_view, self._memory_view(base, size)
        for offset, end in written:
            for first, stop in _unmarked(saved, offset // _PAGE, min(end, limit) // _PAGE):
                ranges.append((first * _PAGE, stop * _PAGE))
                chunks.append(bytes(buffer[first * _PAGE:stop * _PAGE]))
                saved[first:stop] = b"\x01" * (stop - first)
            buffer[offset:end] = current[offset:end]
        if size > self._tracked:  # grown by the turn: the new pages, tracked and copied
            if self._tracker is not None and base == self._base:
                self._tracker.track(base + self._tracked, size - self._tracked)
            buffer[self._tracked:size] = current[self._tracked:size]
            self._tracked = size
        self.size, self.globals = size, [g.value(store) for g in globals_]
        return HandedRecord(ranges, b"".join(chunks), back.size, back.globals)

    def _drop_undo(self, reason: str) -> None:
        self._undo = None
        self._no_undo = reason
        if self._journal_high > _JOURNAL_KEEP:
            # One cell that overwrote a lot must not pin that much host memory for good.
            release_pages(self._journal + _JOURNAL_KEEP, self._journal_high - _JOURNAL_KEEP)
            self._journal_high = _JOURNAL_KEEP

    def _reserve_journal(self) -> None:
        self._journal = _reserve(self._journal_max)
        self._journal_view = _view(self._journal, self._journal_max)

    def _too_much(self) -> str:
        return f"the last cell overwrote more than {self._journal_max >> 20} MiB of existing memory, more than undo keeps"

    def _journal_room(self, record: _UndoRecord, more: int) -> bool:
        """Whether `more` journal bytes fit; if not, the record is dropped."""
        if record.used + more > self._journal_max:
            self._drop_undo(self._too_much())
            return False
        if not self._journal:
            self._reserve_journal()
        return True

    def _journal_done(self, record: _UndoRecord, used: int) -> None:
        record.used = used
        if used > self._journal_high:
            self._journal_high = used

    def _save_first_overwrites(self, record: _UndoRecord, base: int, written: list[tuple[int, int]]) -> None:
        """A take after a query: journal the pages of `written` (addresses) that the
        record does not hold yet (those still hold what they held at the undo point)."""
        limit = record.size  # pages past it are growth since the undo point: nothing to keep
        pages = record.pages
        if pages is None:
            record.pages = pages = bytearray(limit // _PAGE)
            _mark(pages, record.ranges)
        fresh = [(first * _PAGE, stop * _PAGE) for start, end in written
                 for first, stop in _unmarked(pages, (start - base) // _PAGE, min(end - base, limit) // _PAGE)]
        if not fresh or not self._journal_room(record, sum(e - o for o, e in fresh)):
            return
        buffer, journal, at = self._buffer_view, self._journal_view, record.used
        assert journal is not None
        for offset, end in fresh:
            stop = at + end - offset
            journal[at:stop] = buffer[offset:end]
            at = stop
        record.ranges.extend(fresh)
        _mark(pages, fresh)
        self._journal_done(record, at)

    # --- take, restore -------------------------------------------------------------

    def take(
        self,
        store: wasmtime.Store,
        memory: wasmtime.Memory,
        globals_: list[wasmtime.Global],
        *,
        undo_point: bool = False,
    ) -> None:
        """Copy the guest's state. undo_point: this take follows a cell, and keeps
        what `revert()` needs to go back to the previous checkpoint; without it a
        take keeps the current undo record valid."""
        base = ctypes.addressof(memory.data_ptr(store).contents)
        size = memory.data_len(store)
        if undo_point:
            self._begin_undo()
        try:
            if self._tracker is not None and self.taken and base == self._base:
                try:
                    self._take_incremental(base, size)
                except DirtyPagesError as err:
                    self._give_up_tracking(err)
                    self._take_full(base, size)
            else:
                self._take_full(base, size)
        except BaseException:
            self._drop_undo("the checkpoint after the last cell failed")
            raise
        self.size = size
        self.globals = [g.value(store) for g in globals_]

    def _take_full(self, base: int, size: int) -> None:
        if self._tracker is not None and (base != self._base or size > self._tracked):
            try:
                if base != self._base:
                    # A moved memory (never seen on 64-bit hosts): track it afresh.
                    self._tracker.close()
                    self._tracker = DirtyPages.open()
                    self._tracked = 0
                if self._tracker is not None:
                    self._tracker.track(base + self._tracked, size - self._tracked)
                    self._tracked = size
            except DirtyPagesError as err:
                self._give_up_tracking(err)
        self._base = base
        record = self._undo
        if record is not None and record.kind is None:
            # After a cell: copy into the other buffer, and keep this one as the record.
            self._swap_buffers()
            record.kind = "spare"
        elif record is not None and record.kind == "journal":
            # A journal saves only pages an incremental take overwrote: this whole copy
            # would overwrite the rest too. Rare (dirty tracking failed after the cell).
            self._drop_undo("checkpoints switched to full copies after the last cell")
        ctypes.memmove(self._buffer, base, size)
        self.last_copied = size

    def _take_incremental(self, base: int, size: int) -> None:
        assert self._tracker is not None
        copied = 0
        if size > self._tracked:  # grown since: track the new pages, copy them whole
            self._tracker.track(base + self._tracked, size - self._tracked)
            ctypes.memmove(self._buffer + self._tracked, base + self._tracked, size - self._tracked)
            copied += size - self._tracked
            old = self._tracked
            self._tracked = size
        else:
            old = self._tracked
        written = self._tracker.written(base, base + old)
        buffer, memory = self._buffer_view, self._memory_view(base, size)
        record = self._undo
        if record is not None and record.kind is None:
            # The take right after a cell, the common path: every page it overwrites
            # is new to the record; save it to the journal in the same pass.
            record.kind = "journal"
            if not self._journal:
                self._reserve_journal()
            journal, room, ranges, at = self._journal_view, self._journal_max, record.ranges, 0
            assert journal is not None
            limit = record.size  # pages past it are growth since the undo point: nothing to keep
            overflow = False
            for start, end in written:
                offset, stop = start - base, end - base
                if offset < limit:
                    kept = stop if stop <= limit else limit
                    to = at + kept - offset
                    if to > room:  # too much to keep: stop saving, drop the record below
                        limit, overflow = 0, True
                    else:
                        journal[at:to] = buffer[offset:kept]
                        ranges.append((offset, kept))
                        at = to
                buffer[offset:stop] = memory[offset:stop]
                copied += stop - offset
            self._journal_done(record, at)
            if overflow:
                self._drop_undo(self._too_much())
            self.last_copied = copied
            return
        elif record is not None and record.kind == "journal":
            self._save_first_overwrites(record, base, written)
        for start, end in written:
            offset, stop = start - base, end - base
            buffer[offset:stop] = memory[offset:stop]
            copied += stop - offset
        self.last_copied = copied

    def restore(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        if not self.taken:
            raise RuntimeError("no checkpoint to restore")
        base = ctypes.addressof(memory.data_ptr(store).contents)
        if memory.data_len(store) < self.size:  # memory only grows; this cannot happen in place
            raise RuntimeError("guest memory is smaller than its checkpoint")
        restored = False
        if self._tracker is not None and base == self._base:
            try:
                regions = self._tracker.written(base, base + self.size)
                for start, end in regions:
                    ctypes.memmove(start, self._buffer + (start - base), end - start)
                copied = sum(e - s for s, e in regions)
                for offset, end in self._stale:  # what revert() changed
                    ctypes.memmove(base + offset, self._buffer + offset, end - offset)
                    copied += end - offset
                # Our own copy-back counts as writes; clear them so the next
                # checkpoint does not copy those pages again.
                self._tracker.written(base, base + self.size)
                self.last_copied = copied
                restored = True
            except DirtyPagesError as err:
                self._give_up_tracking(err)
        if not restored:
            ctypes.memmove(base, self._buffer, self.size)
            self.last_copied = self.size
        self._stale = []
        for g, value in zip(globals_, self.globals):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)

    def restore_fresh(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        """Restore into a memory this checkpoint has never seen (a new instance)."""
        if not self.taken:
            raise RuntimeError("no checkpoint to restore")
        base = ctypes.addressof(memory.data_ptr(store).contents)
        if memory.data_len(store) < self.size:
            raise RuntimeError("the fresh memory is smaller than the checkpoint")
        ctypes.memmove(base, self._buffer, self.size)
        self.last_copied = self.size
        self._stale = []
        if self._tracker is not None:
            try:
                self._tracker.close()
                self._tracker = DirtyPages.open()
                if self._tracker is not None:
                    self._tracker.track(base, memory.data_len(store))
            except DirtyPagesError as err:
                self._give_up_tracking(err)
        self._base = base
        self._tracked = memory.data_len(store)
        for g, value in zip(globals_, self.globals):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)

    def adopt_image(self, base: int, image: MemoryImage) -> None:
        """Take the guest's state as `image`, which the caller has just mapped over its
        memory at `base`: the buffer maps the same file (copy-on-write, nothing copied
        now) and tracking starts clean, so the first take copies only the pages
        written since; the image's untouched pages are never copied."""
        if self.taken:
            raise RuntimeError("adopt_image() is for a fresh checkpoint")
        map_image(image, self._buffer)
        self._base = base
        self.size = image.size
        self.globals = list(image.globals)
        self.last_copied = 0
        if self._tracker is not None:
            try:
                self._tracker.track(base, image.size)
                self._tracked = image.size
            except DirtyPagesError as err:
                self._give_up_tracking(err)

    def _give_up_tracking(self, err: OSError) -> None:
        log.warning("checkpoint.dirty_tracking_off", error=str(err))
        if self._tracker is not None:
            self._tracker.close()
        self._tracker = None

    def close(self) -> None:
        if getattr(self, "_tracker", None) is not None:
            self._tracker.close()  # type: ignore[union-attr]
            self._tracker = None
        self._undo = None
        self._memory = None
        for name in ("_buffer_view", "_journal_view", "_spare_view"):
            view = getattr(self, name, None)
            if view is not None:
                view.release()
                setattr(self, name, None)
        for name, length in (
            ("_buffer", _WASM32_SPACE), ("_journal", getattr(self, "_journal_max", 0)), ("_spare", _WASM32_SPACE)
        ):
            address = getattr(self, name, 0)
            if address:
                _libc.munmap(address, length)
                setattr(self, name, 0)

    def __del__(self) -> None:
        self.close()
