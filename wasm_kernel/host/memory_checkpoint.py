"""A copy of a guest's whole wasm state: linear memory plus its mutable globals.

Between turns the guest's native wasm stack is empty, so memory and globals are
all the state there is (the reactor's funcref table is fixed and never written).
The copy buffer is reused across checkpoints: a fresh 100 MB allocation costs
eight times the copy itself.
"""

from __future__ import annotations

import ctypes
from typing import Any

import wasmtime


class MemoryCheckpoint:
    def __init__(self) -> None:
        self._buffer: ctypes.Array[ctypes.c_char] | None = None
        self.size = 0
        self.globals: list[Any] = []

    @property
    def taken(self) -> bool:
        return self.size > 0

    def take(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        size = memory.data_len(store)
        if self._buffer is None or len(self._buffer) < size:
            self._buffer = ctypes.create_string_buffer(size)
        ctypes.memmove(self._buffer, memory.data_ptr(store), size)
        self.size = size
        self.globals = [g.value(store) for g in globals_]

    def restore(self, store: wasmtime.Store, memory: wasmtime.Memory, globals_: list[wasmtime.Global]) -> None:
        if not self.taken or self._buffer is None:
            raise RuntimeError("no checkpoint to restore")
        if memory.data_len(store) < self.size:  # memory only grows; this cannot happen in place
            raise RuntimeError("guest memory is smaller than its checkpoint")
        ctypes.memmove(memory.data_ptr(store), self._buffer, self.size)
        for g, value in zip(globals_, self.globals):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)
