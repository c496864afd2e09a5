"""The guest's stdout and stderr through a ring in its own memory.

A host call costs ~25 us, and a line-buffered print() is one call per line, so
printing 10,000 lines cost 0.25 s in calls alone. Instead, the guest's streams
append records to a ring buffer in guest memory (`_wasm_kernel_guest._RingWriter`),
and the host reads them whenever it has control anyway: the 10 ms epoch check, a
door call, a slice of a sleep, any other write to fd 1 or 2, and the end of the
turn. Order is kept: everything that reaches the host some other way drains the
ring first.

Layout at `address` (guest-chosen, registered at start): head (u32, written only by
the guest), tail (u32, written only by the host), then `size` bytes of data.
Counters run mod 2**32; a record is a u32 `(fd << 24) | length` (4-aligned, so it
never wraps), its bytes (which may wrap at the end of the data) and padding to a
multiple of 4. The guest writes the record, then head; the host
never runs in the middle of a guest write except at an epoch check, which falls
between whole wasm stores, so it sees only whole records before head.

The ring is guest memory: its content is never trusted. A header that does not add
up (a length past head, an fd other than 1 or 2) drops what is in the ring.
"""

from __future__ import annotations

import ctypes
import struct
from collections.abc import Callable

from ..host.guest_memory import MemoryWindow
from ..host.log import get_logger

log = get_logger("wasm_kernel.runtime")

HEADER = 8
MAX_SIZE = 1 << 20
MIN_SIZE = 4096
Write = Callable[[int, bytes], None]  # (fd, bytes): TurnOutput.write


class StreamRing:
    def __init__(self, address: int, size: int) -> None:
        self.address = address
        self.size = size
        self._window: MemoryWindow | None = None

    @staticmethod
    def valid(address: int, size: int, memory_size: int) -> bool:
        return (
            MIN_SIZE <= size <= MAX_SIZE and size % 4 == 0 and address % 4 == 0
            and 0 < address and address + HEADER + size <= memory_size
        )

    def bind(self, window: MemoryWindow) -> None:
        """The guest memory the ring is in. Memory only grows and, in one instance,
        never moves, so this window stays valid for the ring's range until the guest
        is moved to another instance (then bind again)."""
        self._window = window

    def has_data(self) -> bool:
        """A racy peek from any thread: is something waiting? A stale answer only
        delays the hand-over by a tick."""
        window = self._window
        if window is None:
            return False
        head = ctypes.c_uint32.from_address(window.base + self.address).value
        tail = ctypes.c_uint32.from_address(window.base + self.address + 4).value
        return head != tail

    def drain(self, write: Write) -> None:
        """Hand every whole record to `write`, in order, and mark it read. Guest thread only."""
        window = self._window
        if window is None:
            return
        head, tail = struct.unpack("<II", window.read(self.address, HEADER))
        used = (head - tail) & 0xFFFFFFFF
        if not used:
            return
        if used > self.size:
            self._drop(window, head, "the ring's counters do not add up")
            return
        data = self.address + HEADER
        start = tail % self.size
        if start + used <= self.size:
            raw = window.read(data + start, used)
        else:
            first = self.size - start
            raw = window.read(data + start, first) + window.read(data, used - first)
        # Records are checked first and handed over after, a run of one stream's
        # records as one write: 10,000 prints are a few writes, not 10,000.
        runs: list[tuple[int, list[bytes]]] = []
        pos = 0
        unpack = struct.unpack_from
        while pos < used:
            if pos + 4 > used:
                self._drop(window, head, "a record header runs past head")
                return
            (word,) = unpack("<I", raw, pos)
            fd, length = word >> 24, word & 0xFFFFFF
            end = pos + 4 + length
            if fd not in (1, 2) or end > used:
                self._drop(window, head, "a record names another stream or runs past head")
                return
            if runs and runs[-1][0] == fd:
                runs[-1][1].append(raw[pos + 4 : end])
            else:
                runs.append((fd, [raw[pos + 4 : end]]))
            pos = end + (-length & 3)
        window.set_u32(self.address + 4, head)
        for fd, parts in runs:
            write(fd, b"".join(parts))

    def _drop(self, window: MemoryWindow, head: int, why: str) -> None:
        log.warning("stream_ring.dropped", reason=why)
        window.set_u32(self.address + 4, head)
