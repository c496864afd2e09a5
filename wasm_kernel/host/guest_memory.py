"""Bounds-checked access to a guest's linear memory from host functions.

Every pointer and length here comes from untrusted guest code: each access is
checked against the memory's current size before any host byte is touched.
"""

from __future__ import annotations

import ctypes
import struct
from typing import Any

import wasmtime


class GuestFault(Exception):
    """A guest pointer or length outside its memory (answered with WASI EFAULT)."""


class GuestMemory:
    def __init__(self, memory: wasmtime.Memory) -> None:
        self.memory = memory

    def _base(self, store: Any, ptr: int, length: int) -> int:
        ptr &= 0xFFFFFFFF
        length &= 0xFFFFFFFF
        if ptr + length > self.memory.data_len(store):
            raise GuestFault(f"guest range {ptr}+{length} is outside its memory")
        return ctypes.addressof(self.memory.data_ptr(store).contents) + ptr

    def read(self, store: Any, ptr: int, length: int) -> bytes:
        return ctypes.string_at(self._base(store, ptr, length), length)

    def write(self, store: Any, ptr: int, data: bytes) -> None:
        ctypes.memmove(self._base(store, ptr, len(data)), data, len(data))

    def view(self, store: Any, ptr: int, length: int) -> memoryview:
        addr = self._base(store, ptr, length)
        return memoryview((ctypes.c_ubyte * length).from_address(addr)).cast("B")

    def u32(self, store: Any, ptr: int) -> int:
        return struct.unpack("<I", self.read(store, ptr, 4))[0]

    def set_u32(self, store: Any, ptr: int, value: int) -> None:
        self.write(store, ptr, struct.pack("<I", value & 0xFFFFFFFF))

    def size(self, store: Any) -> int:
        return self.memory.data_len(store)

    def window(self, store: Any) -> MemoryWindow:
        """Base address and size fetched once, for a host call that touches memory
        several times (each fetch is two calls into wasmtime). Valid until the guest
        runs again: memory cannot grow or move during a host call."""
        return MemoryWindow(ctypes.addressof(self.memory.data_ptr(store).contents), self.memory.data_len(store))


class MemoryWindow:
    __slots__ = ("base", "size")

    def __init__(self, base: int, size: int) -> None:
        self.base = base
        self.size = size

    def _at(self, ptr: int, length: int) -> int:
        ptr &= 0xFFFFFFFF
        length &= 0xFFFFFFFF
        if ptr + length > self.size:
            raise GuestFault(f"guest range {ptr}+{length} is outside its memory")
        return self.base + ptr

    def read(self, ptr: int, length: int) -> bytes:
        return ctypes.string_at(self._at(ptr, length), length)

    def set_u32(self, ptr: int, value: int) -> None:
        ctypes.memmove(self._at(ptr, 4), struct.pack("<I", value & 0xFFFFFFFF), 4)
