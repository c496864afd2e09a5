"""The two wasmtime engine configurations a guest runs on.

The optimized engine is the product's: Cranelift, with fuel (a deterministic
per-cell budget) and epochs (interrupts and wall-clock deadlines). Its first
compile of the guest costs 50-130 s and 2.5 GB, once per machine and version.

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
# Everything about the engine that changes the compiled artifact: part of the
# compile-cache key.
CONFIG_FINGERPRINT = f"fuel=1;epoch=1;max_wasm_stack={MAX_WASM_STACK};async_stack={ASYNC_STACK}"
BASELINE_FINGERPRINT = f"winch;fuel=0;epoch=1;max_wasm_stack={MAX_WASM_STACK};async_stack={ASYNC_STACK}"

_lock = threading.Lock()
_engine: wasmtime.Engine | None = None
_baseline: wasmtime.Engine | None = None


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


def get_engine() -> wasmtime.Engine:
    """The process-wide optimized engine (compiled modules and stores are tied to it)."""
    global _engine
    with _lock:
        if _engine is None:
            config = _config()
            config.consume_fuel = True
            _engine = wasmtime.Engine(config)
        return _engine


def get_baseline_engine() -> wasmtime.Engine:
    """The process-wide baseline engine: Winch, epochs, no fuel."""
    global _baseline
    with _lock:
        if _baseline is None:
            config = _config()
            set_baseline_strategy(config)
            _baseline = wasmtime.Engine(config)
        return _baseline


def is_metered(engine: wasmtime.Engine) -> bool:
    """Whether stores of `engine` count fuel."""
    return engine is not _baseline
