"""The one module that touches wasmtime-py's private bindings.

wasmtime-py 49 has no public setter for the wasm stack sizes and no public epoch
deadline callback; both exist in its generated C bindings (`wasmtime._bindings`).
Keeping every such use here means a wasmtime bump is checked in one place.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import wasmtime
from wasmtime import _bindings as _b

# wasmtime_update_deadline_kind_t
UPDATE_DEADLINE_CONTINUE = 0
UPDATE_DEADLINE_YIELD = 1

EpochCallbackType = ctypes.CFUNCTYPE(
    ctypes.c_size_t,
    ctypes.POINTER(_b.wasmtime_context_t),
    ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_uint64),
    ctypes.POINTER(_b.wasmtime_update_deadline_kind_t),
)
_FinalizerType = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_NO_FINALIZER = _FinalizerType()


def set_wasm_stack(config: wasmtime.Config, max_wasm_stack: int, async_stack: int) -> None:
    """wasmtime refuses a config whose async stack is not larger than the wasm stack,
    so both are set, async first."""
    _b.wasmtime_config_async_stack_size_set(config.ptr(), async_stack)
    _b.wasmtime_config_max_wasm_stack_set(config.ptr(), max_wasm_stack)


# wasmtime_strategy_t: WASMTIME_STRATEGY_WINCH. wasmtime-py names only auto and cranelift.
_STRATEGY_WINCH = 2


def set_baseline_strategy(config: wasmtime.Config) -> None:
    """Compile with Winch, wasmtime's baseline compiler (about 10x faster to compile)."""
    _b.wasmtime_config_strategy_set(config.ptr(), _STRATEGY_WINCH)


def set_epoch_callback(store: wasmtime.Store, decide: Callable[[], int | None]) -> Any:
    """Install an epoch-deadline callback on `store`.

    `decide()` runs on the guest's thread each time the store's epoch deadline is
    reached. It returns the number of ticks until the next check, or None to trap the
    guest now. The returned handle must be kept alive as long as the store.
    """

    def callback(_ctx: Any, _env: Any, delta: Any, kind: Any) -> int:
        try:
            ticks = decide()
        except BaseException:  # never unwind through wasmtime's C frames
            ticks = None
        if ticks is None:
            err = _b.wasmtime_error_new(b"wasm-kernel: guest stopped")
            return ctypes.cast(err, ctypes.c_void_p).value or 0
        delta[0] = max(1, ticks)
        kind[0] = UPDATE_DEADLINE_CONTINUE
        return 0

    handle = EpochCallbackType(callback)
    _b.wasmtime_store_epoch_deadline_callback(store.ptr(), handle, None, _NO_FINALIZER)
    return handle
