"""The one wasmtime engine configuration every guest runs on.

Fuel metering and epoch interruption change the compiled code, and the guest's
first compile costs about 100 s and 2.4 GB, so the product uses exactly one
configuration: fuel (deterministic per-cell budget) and epochs (interrupts and
wall-clock deadlines) together.
"""

from __future__ import annotations

import os
import threading
from importlib.metadata import version

import wasmtime

from .wasmtime_private import set_wasm_stack

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

_lock = threading.Lock()
_engine: wasmtime.Engine | None = None


def get_engine() -> wasmtime.Engine:
    """The process-wide engine (compiled modules and stores are tied to it)."""
    global _engine
    with _lock:
        if _engine is None:
            # wasmtime reads WASMTIME_BACKTRACE_DETAILS when a Config is made; set, it
            # changes the compiled artifact, so a user's environment would force a
            # 100 s recompile and flip the shared cache. The product has one config.
            saved = os.environ.pop("WASMTIME_BACKTRACE_DETAILS", None)
            try:
                config = wasmtime.Config()
            finally:
                if saved is not None:
                    os.environ["WASMTIME_BACKTRACE_DETAILS"] = saved
            config.consume_fuel = True
            config.epoch_interruption = True
            set_wasm_stack(config, MAX_WASM_STACK, ASYNC_STACK)
            _engine = wasmtime.Engine(config)
        return _engine
