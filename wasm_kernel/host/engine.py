"""The wasmtime engine configurations a guest runs on.

The optimized engine is the product's: Cranelift. Its metering is the operator's
choice (`c.WasmKernel.metering`):
- "time" (the default): no fuel, and no epochs where this process can stop a wasm
  thread by trap (host/thread_stop.py: Linux on x86-64 with ptrace allowed). Fuel
  instruments every basic block (about 1.4x on pure Python) and epochs every loop
  and function entry (1.22x); a budget of CPU time and a deadline bound a cell,
  enforced from another thread. Where stops by trap are not allowed, or
  WASM_KERNEL_HARD_STOPS=epochs, the engine keeps its epochs (interrupts, the
  deadline and the CPU-time budget checked at every tick).
- "fuel": fuel and epochs, a deterministic instruction budget per cell (the same
  count on any machine, which some graders need).
Each metering is its own compiled module (fuel changes the code); only the
configured one is compiled, 50-130 s and 2.5 GB once per machine and version.

The baseline engine exists for that first start only: wasmtime's baseline compiler
(Winch) compiles the guest in about 11 s, so a fresh machine answers its first cell
in seconds while the optimized module compiles in the background, and the guest
moves to it between cells (runtime/engine_upgrade.py). Winch in wasmtime 49 cannot
meter fuel for this module ("Illegal fuel state"), so the baseline engine has epochs
only, and a fuel budget is enforced as a time budget while a guest runs on it.
"""

from __future__ import annotations

import os
import threading
from importlib.metadata import version

import wasmtime

from . import thread_stop
from .wasmtime_private import set_baseline_strategy, set_wasm_stack

# CPython recurses deeply in C (the parser, pickle, repr of nested data); wasmtime's
# default 512 KiB native stack for wasm frames traps long before Python's own
# RecursionError would fire.
MAX_WASM_STACK = 8 << 20
ASYNC_STACK = MAX_WASM_STACK + (2 << 20)
# The guest runs on a thread of ours whose native stack must hold the wasm stack
# plus the host frames (wasmtime, ctypes, Python) beneath it.
GUEST_THREAD_STACK = MAX_WASM_STACK + (8 << 20)

WASMTIME_VERSION = version("wasmtime")
METERINGS = ("time", "fuel")
DEFAULT_METERING = "time"

# Everything about the engine that changes the compiled artifact: part of the
# compile-cache key.
BASELINE_FINGERPRINT = f"winch;fuel=0;epoch=1;max_wasm_stack={MAX_WASM_STACK};async_stack={ASYNC_STACK}"

_lock = threading.Lock()
_engines: dict[str, wasmtime.Engine] = {}
_baseline: wasmtime.Engine | None = None
_epoch_free_engines: dict[str, bool] = {}
_process_metering = DEFAULT_METERING


def config_fingerprint(metering: str | None = None) -> str:
    """The optimized engine's configuration for `metering`, as the cache key sees it."""
    fuel = int(checked_metering(metering) == "fuel")
    epoch = int(not epoch_free(metering))
    return f"fuel={fuel};epoch={epoch};max_wasm_stack={MAX_WASM_STACK};async_stack={ASYNC_STACK}"


HARD_STOPS_ENV = "WASM_KERNEL_HARD_STOPS"


def epoch_free(metering: str | None = None) -> bool:
    """Whether the optimized engine of `metering` runs without epochs: time metering
    in a process that can stop its wasm threads by trap (host/thread_stop.py), unless
    the operator keeps epochs (WASM_KERNEL_HARD_STOPS=epochs)."""
    if checked_metering(metering) != "time" or os.environ.get(HARD_STOPS_ENV, "") == "epochs":
        return False
    return thread_stop.unavailable_reason() is None


def has_epochs(engine: wasmtime.Engine) -> bool:
    """Whether stores of `engine` check epochs (every engine but time metering's
    where stops come by trap)."""
    return not any(engine is e and _epoch_free_engines.get(m, False) for m, e in _engines.items())


def checked_metering(metering: str | None) -> str:
    """`metering`, or this process's when None; ValueError for anything else."""
    metering = _process_metering if metering is None else metering
    if metering not in METERINGS:
        raise ValueError(f"metering must be one of {', '.join(METERINGS)}, not {metering!r}")
    return metering


def set_process_metering(metering: str) -> None:
    """The metering this process's guests use when none is named: a kernel's, from
    its configuration, set once as it starts (so the compile cache, the warm-up and
    precompile all mean the one module it runs)."""
    global _process_metering
    _process_metering = checked_metering(metering)


def process_metering() -> str:
    return _process_metering


def _config() -> wasmtime.Config:
    # wasmtime reads WASMTIME_BACKTRACE_DETAILS when a Config is made; set, it
    # changes the compiled artifact, so a user's environment would force a
    # recompile and flip the shared cache.
    saved = os.environ.pop("WASMTIME_BACKTRACE_DETAILS", None)
    try:
        config = wasmtime.Config()
    finally:
        if saved is not None:
            os.environ["WASMTIME_BACKTRACE_DETAILS"] = saved
    config.epoch_interruption = True
    set_wasm_stack(config, MAX_WASM_STACK, ASYNC_STACK)
    return config


def get_engine(metering: str | None = None) -> wasmtime.Engine:
    """The process-wide optimized engine for `metering` (compiled modules and stores
    are tied to it)."""
    metering = checked_metering(metering)
    with _lock:
        engine = _engines.get(metering)
        if engine is None:
            config = _config()
            config.consume_fuel = metering == "fuel"
            free = _epoch_free_engines[metering] = epoch_free(metering)
            config.epoch_interruption = not free
            engine = _engines[metering] = wasmtime.Engine(config)
        return engine


def get_baseline_engine() -> wasmtime.Engine:
    """The process-wide baseline engine: Winch, epochs, no fuel."""
    global _baseline
    with _lock:
        if _baseline is None:
            config = _config()
            set_baseline_strategy(config)
            _baseline = wasmtime.Engine(config)
        return _baseline


def engine_fingerprint(engine: wasmtime.Engine) -> str | None:
    """The configuration fingerprint of one of this process's engines (what a compile
    cache keys its code by), None for an engine made elsewhere."""
    with _lock:
        if engine is _baseline:
            return BASELINE_FINGERPRINT
        metering = next((m for m, e in _engines.items() if e is engine), None)
    return None if metering is None else config_fingerprint(metering)


def counts_fuel(engine: wasmtime.Engine) -> bool:
    """Whether stores of `engine` count fuel (the optimized engine in fuel metering)."""
    return engine is _engines.get("fuel")
