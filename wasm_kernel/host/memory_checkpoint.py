"""A copy of a guest's whole wasm state: linear memory plus its mutable globals.

Between turns the guest's native wasm stack is empty, so memory and globals are
all the state there is (the reactor's funcref table is fixed and never written).

The first checkpoint copies all of memory into a buffer that reserves the whole
wasm32 address space lazily (nothing is committed until written), so it never has
to move. Later checkpoints copy only the pages written since the previous one,
found with `DirtyPages`; a rollback copies back only the pages the failed turn
wrote. Without dirty-page support every checkpoint and restore is a full copy.
"""

from __future__ import annotations

import ctypes
import mmap
from typing import Any

import wasmtime

from .dirty_pages import DirtyPages, DirtyPagesError
from .log import get_logger

log = get_logger("wasm_kernel.host")

_WASM32_SPACE = 4 << 30
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MADV_DONTNEED = 4


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


class MemoryCheckpoint:
    def __init__(self, *, incremental: bool = True) -> None:
        self._buffer = _reserve(_WASM32_SPACE)
        self._buffer_view = _view(self._buffer, _WASM32_SPACE)
        self._tracker = DirtyPages.open() if incremental else None
        self._base = 0  # guest memory address the tracker watches
        self._tracked = 0  # bytes of guest memory under tracking
        self._memory: tuple[int, int, memoryview] | None = None  # (base, size, view) of guest memory
        self.size = 0
        self.globals: list[Any] = []
        self.last_copied = 0  # bytes copied by the last take/restore, for benchmarks

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

    def take(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        base = ctypes.addressof(memory.data_ptr(store).contents)
        size = memory.data_len(store)
        if self._tracker is not None and self.taken and base == self._base:
            try:
                self._take_incremental(base, size)
            except DirtyPagesError as err:
                self._give_up_tracking(err)
                self._take_full(base, size)
        else:
            self._take_full(base, size)
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
        buffer, memory = self._buffer_view, self._memory_view(base, size)
        for start, end in self._tracker.written(base, base + old):
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
                # Our own copy-back counts as writes; clear them so the next
                # checkpoint does not copy those pages again.
                self._tracker.written(base, base + self.size)
                self.last_copied = sum(e - s for s, e in regions)
                restored = True
            except DirtyPagesError as err:
                self._give_up_tracking(err)
        if not restored:
            ctypes.memmove(base, self._buffer, self.size)
            self.last_copied = self.size
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

    def _give_up_tracking(self, err: OSError) -> None:
        log.warning("checkpoint.dirty_tracking_off", error=str(err))
        if self._tracker is not None:
            self._tracker.close()
        self._tracker = None

    def close(self) -> None:
        if getattr(self, "_tracker", None) is not None:
            self._tracker.close()  # type: ignore[union-attr]
            self._tracker = None
        self._memory = None
        if getattr(self, "_buffer_view", None) is not None:
            self._buffer_view.release()
            self._buffer_view = None  # type: ignore[assignment]
        if getattr(self, "_buffer", 0):
            _libc.munmap(self._buffer, _WASM32_SPACE)
            self._buffer = 0

    def __del__(self) -> None:
        self.close()
