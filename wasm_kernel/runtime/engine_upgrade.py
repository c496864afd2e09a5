"""The engine a guest runs on, its fuel, and the move between them: a guest started
on the baseline engine (a machine's first start, before the optimized module is
compiled) moves to the optimized one between turns, as soon as it is ready.
PythonGuest inherits it; the state it reads is the guest's, declared below."""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from pathlib import Path

import wasmtime

from ..host.engine import counts_fuel, get_engine, has_epochs
from ..host.epoch_ticker import EpochTicker, ticker_for
from ..host.log import get_logger
from ..host.memory_checkpoint import MemoryCheckpoint
from ..host.module_cache import is_guest_cached, load_guest_module
from .fd_ledger import FdLedger
from .guest_config import GuestEngine

log = get_logger("wasm_kernel.runtime")

UNLIMITED_FUEL = (1 << 63) - 1
MOVED_NO_UNDO = "the interpreter moved to the optimized compiler after the last cell (undo starts again with the next)"


class EngineUpgrade:
    """The engine side of a guest. The guest sets these as it starts."""

    _module: wasmtime.Module
    _engine: wasmtime.Engine
    _optimized: bool  # on the optimized engine (not the baseline one of a first start)
    _counts_fuel: bool  # the optimized engine in fuel metering
    _epochs: bool  # the engine checks epochs (else stops come by trap: host/thread_stop.py)
    _metering: str
    _ticker: EpochTicker
    _image_build: tuple[str, ...] | None
    _store: wasmtime.Store | None
    _memory: wasmtime.Memory
    _globals: list[wasmtime.Global]
    _linker: wasmtime.Linker
    _checkpoint: MemoryCheckpoint | None
    ledger: FdLedger
    # Methods of the guest's other parts, declared as attributes only: a stub method
    # here would hide the real one from a base that comes later in the guest's MRO.
    _require_store: Callable[[], wasmtime.Store]
    _settle: Callable[[], None]
    _take_checkpoint: Callable[..., None]
    _new_linker: Callable[[], wasmtime.Linker]
    _new_store: Callable[[], wasmtime.Store]
    _instantiate: Callable[..., None]
    _preopens: Callable[[], list[tuple[Path, str, bool]]]

    def _use_engine(self, engine: GuestEngine) -> None:
        """Run on `engine` from the next store on: its module and its epoch ticker."""
        self._module, self._engine, self._optimized = engine.module, engine.engine, engine.optimized
        self._metering, self._counts_fuel = engine.metering, counts_fuel(engine.engine)
        self._epochs = has_epochs(engine.engine)
        self._ticker = ticker_for(self._engine)

    @property
    def optimized(self) -> bool:
        """Whether this guest runs on the optimized engine (not yet, on a first start)."""
        return self._optimized

    @property
    def metering(self) -> str:
        """What bounds a cell: "time" (CPU time and the deadline) or "fuel"."""
        return self._metering

    @property
    def counts_fuel(self) -> bool:
        """Whether cells are counted in fuel now (fuel metering, on the optimized engine)."""
        return self._counts_fuel

    def _refuel(self, store: wasmtime.Store, fuel: int) -> None:
        # Only the fuel engine counts fuel: set_fuel fails on other stores.
        if self._counts_fuel:
            store.set_fuel(fuel)

    def _maybe_upgrade(self) -> None:
        """A guest on the baseline engine moves to the optimized one as soon as it is
        compiled, between turns. Its state is memory plus globals, and its WASI
        context is made again with the same mounts, so only a guest holding no
        descriptor beyond its mounts can move: one that holds a file waits for a turn
        that does not. The undo record does not move."""
        if self._optimized or self._image_build is not None or not is_guest_cached(metering=self._metering):
            return
        if not self.ledger.only_fixed_open:
            return
        self._settle()
        old_store = self._require_store()
        old_memory, size = self._memory, self._memory.data_len(old_store)
        values = [g.value(old_store) for g in self._globals]
        self._use_engine(GuestEngine(load_guest_module(metering=self._metering), get_engine(self._metering),
                                     optimized=True, metering=self._metering))
        self._linker = self._new_linker()
        store = self._new_store()
        self._instantiate(store, at_least=size)
        ctypes.memmove(
            ctypes.addressof(self._memory.data_ptr(store).contents),
            ctypes.addressof(old_memory.data_ptr(old_store).contents), size,
        )
        for g, value in zip(self._globals, values):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)
        self._store = store
        if self._checkpoint is not None:
            self._checkpoint.close()
        self._checkpoint = MemoryCheckpoint(no_undo_reason=MOVED_NO_UNDO)
        self.ledger = FdLedger(range(3, 3 + len(self._preopens())))
        self._take_checkpoint()
        log.info("guest.optimized", bytes=size)


def fuel_left(store: wasmtime.Store) -> int:
    """The store's fuel, 0 if it counts none (time metering, the baseline engine)."""
    try:
        return int(store.get_fuel())
    except wasmtime.WasmtimeError:
        return 0


__all__ = ["EngineUpgrade", "UNLIMITED_FUEL", "fuel_left"]
