"""The store and the instance a guest runs in: the engine and module it is compiled
for, the current store, and what the host holds of the current instance (its memory,
exports and globals). Every other part of a guest receives this one object and asks
it for the store, as wasmtime-py's examples pass the store explicitly; only this
object makes a store or an instance (a start, the move to the optimized engine, a
compaction), so a part never holds a stale memory of an instance that was replaced.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import wasmtime

from ..host.engine import counts_fuel, has_epochs
from ..host.epoch_ticker import EpochTicker, ticker_for
from ..host.guest_memory import GuestMemory
from ..host.wasi_shim import Original, instantiate_shim
from ..host.wasm_binary import GLOBAL_EXPORT_PREFIX, INTERRUPT_EXPORT
from ..host.wasmtime_private import int_call
from .guest_config import GuestEngine, GuestUnavailable

UNLIMITED_FUEL = (1 << 63) - 1
WASM_PAGE = 1 << 16


@dataclass
class ScratchAreas:
    """Guest memory the host's own calls use, allocated before the first checkpoint
    (so every rollback keeps them), or where a warm image or a saved state had them."""

    quota: int = 0
    readdir: int = 0  # 0: none (an image built before it had one)
    overlay: int = 0  # 0: none (no notebook folder and not an image build)

    def as_list(self) -> list[int]:
        return [self.quota, self.readdir, self.overlay]


class GuestInstance:
    """The engine, the store and the bound instance of one guest."""

    def __init__(
        self,
        engine: GuestEngine,
        memory_bytes: int | None,
        *,
        define_imports: Callable[[wasmtime.Linker], None],
        configure_store: Callable[[wasmtime.Store], None],
        on_bind: Callable[[wasmtime.Store, Any], None],
    ) -> None:
        """define_imports: the guest's host functions, defined on each new linker;
        configure_store: its WASI context and epoch callback, on each new store;
        on_bind: told of each new instance's exports, once its memory has its size."""
        self.memory_bytes = memory_bytes
        self._define_imports = define_imports
        self._configure_store = configure_store
        self._on_bind = on_bind
        self.store: wasmtime.Store | None = None
        self.linker: wasmtime.Linker | None = None
        self.originals: dict[str, Original] = {}  # the WASI functions our shadows replace
        self.globals: list[wasmtime.Global] = []
        self.scratch = ScratchAreas()
        self.use_engine(engine)

    # --- the engine ------------------------------------------------------------

    def use_engine(self, engine: GuestEngine) -> None:
        """Run on `engine` from the next store on: its module and its epoch ticker."""
        self.choice = engine
        self.module, self.engine, self.optimized = engine.module, engine.engine, engine.optimized
        self.metering = engine.metering
        self.counts_fuel = counts_fuel(engine.engine)  # the optimized engine in fuel metering
        self.epochs = has_epochs(engine.engine)  # else stops come by trap (host/thread_stop.py)
        self.ticker: EpochTicker = ticker_for(self.engine)

    def refuel(self, store: wasmtime.Store, fuel: int) -> None:
        # Only the fuel engine counts fuel: set_fuel fails on other stores.
        if self.counts_fuel:
            store.set_fuel(fuel)

    # --- the store and the instance --------------------------------------------

    def require_store(self) -> wasmtime.Store:
        if self.store is None:
            raise GuestUnavailable("the guest is not running")
        return self.store

    def new_store(self) -> wasmtime.Store:
        """A store on the current engine, configured by the guest (the same mounts and
        descriptor numbers every time), with no fuel limit yet."""
        store = wasmtime.Store(self.engine)
        self.refuel(store, UNLIMITED_FUEL)
        if self.memory_bytes is not None:
            store.set_limits(memory_size=self.memory_bytes)
        self._configure_store(store)
        return store

    def new_linker(self) -> None:
        """WASI and the guest's host functions on the current engine, for each new
        store's instances (a start, the move to another engine)."""
        linker = wasmtime.Linker(self.engine)
        linker.define_wasi()
        self._define_imports(linker)
        self.linker = linker

    def instantiate(self, store: wasmtime.Store, at_least: int = 0) -> None:
        """A new instance of the module in `store`, bound, its memory grown to
        `at_least` bytes for the state about to be copied in."""
        assert self.linker is not None
        instance = self.linker.instantiate(store, self.module)
        exports = instance.exports(store)
        memory = exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        self.memory = memory
        self.mem = GuestMemory(memory)
        self.turn_export = int_call(store, exports["turn"])
        self.alloc = int_call(store, exports["host_alloc"])
        self.interrupt_export = exports.get(INTERRUPT_EXPORT)
        self.globals = [exports[name] for name in exports if name.startswith(GLOBAL_EXPORT_PREFIX)]
        self.originals = instantiate_shim(store, self.engine, memory)
        self.grow_to(store, at_least)
        # Once the memory has its size: a window taken before the growth keeps the new
        # instance's first size, and what lies past it would be out of reach.
        self._on_bind(store, exports)

    def grow_to(self, store: wasmtime.Store, size: int) -> None:
        """Grow the memory to at least `size` bytes, for state about to be copied in."""
        missing = size - self.memory.data_len(store)
        if missing > 0:
            self.memory.grow(store, -(-missing // WASM_PAGE))

    def close(self) -> None:
        self.store = None
        self.originals = {}

    # --- the memory and the globals ---------------------------------------------

    def base(self, store: wasmtime.Store) -> int:
        """The host address of the memory's first byte (valid until it grows)."""
        return ctypes.addressof(self.memory.data_ptr(store).contents)

    def size(self, store: wasmtime.Store) -> int:
        return self.memory.data_len(store)

    def global_values(self, store: wasmtime.Store) -> list[int]:
        return [int(g.value(store)) for g in self.globals]

    def set_globals(self, store: wasmtime.Store, values: list[int]) -> None:
        for g, value in zip(self.globals, values):
            g.set_value(store, wasmtime.Val.i32(value))

    def below_stack(self) -> int:
        """Between turns the guest's shadow stack is empty: the bytes just below the
        stack pointer are free, so host bookkeeping calls can use them."""
        sp = self.globals[0].value(self.require_store()) if self.globals else 0
        return int(sp) - 64

    def move_to(self, engine: GuestEngine) -> None:
        """Carry the instance's state (memory and globals) into a new store and
        instance on `engine`. The WASI context is made again with the same mounts: the
        caller moves only a guest holding no descriptor beyond them."""
        old_store = self.require_store()
        old_memory, size = self.memory, self.memory.data_len(old_store)
        values = [g.value(old_store) for g in self.globals]
        self.use_engine(engine)
        self.new_linker()
        store = self.new_store()
        self.instantiate(store, at_least=size)
        ctypes.memmove(self.base(store), ctypes.addressof(old_memory.data_ptr(old_store).contents), size)
        for g, value in zip(self.globals, values):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)
        self.store = store


def fuel_left(store: wasmtime.Store) -> int:
    """The store's fuel, 0 if it counts none (time metering, the baseline engine)."""
    try:
        return int(store.get_fuel())
    except wasmtime.WasmtimeError:
        return 0


__all__ = ["GuestInstance", "ScratchAreas", "UNLIMITED_FUEL", "WASM_PAGE", "fuel_left"]
