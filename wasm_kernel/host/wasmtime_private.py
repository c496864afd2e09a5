"""The one module that touches wasmtime-py's private bindings.

wasmtime-py 49 has no public setter for the wasm stack sizes and no public epoch
deadline callback; both exist in its generated C bindings (`wasmtime._bindings`).
Its `Func.__call__` rebuilds the function's type on every call; `IntCall` does not.
Keeping every such use here means a wasmtime bump is checked in one place.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable
from typing import Any

import wasmtime
from wasmtime import _bindings as _b
from wasmtime._ffi import WASMTIME_I32, WASMTIME_I64
from wasmtime._func import enter_wasm as _enter_wasm

_I32 = WASMTIME_I32.value
_I64 = WASMTIME_I64.value

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


class IntCall:
    """Calls a function whose parameters and result are all i32 or i64, without
    wasmtime-py's per-call type introspection (`Func.__call__` builds the function's
    type, its parameter and result types and their values anew on every call: ~50 us
    of Python for an export of the guest, 70-170 us for a WASI function of the shim
    (runtime code calls those many times a cell). Traps and exits are raised exactly
    as `Func.__call__` raises them (its own `enter_wasm`). Built by `int_call`, which
    checks the signature once and otherwise returns the Func itself."""

    def __init__(self, func: wasmtime.Func, wide: tuple[bool, ...], results: tuple[bool, ...]) -> None:
        self._func = func._func
        self._wide = wide  # per parameter: i64 (else i32)
        self._results = results  # the same, for at most one result

    def __call__(self, store: wasmtime.Store, *args: int) -> int | None:
        wide, n, nr = self._wide, len(self._wide), len(self._results)
        if len(args) != n:
            raise wasmtime.WasmtimeError(f"expected {n} parameters, got {len(args)}")
        # Fresh arrays per call: a host call inside this one may call in again.
        params = (_b.wasmtime_val_t * n)()
        for i, value in enumerate(args):
            if wide[i]:
                params[i].kind = _I64
                params[i].of.i64 = value
            else:
                params[i].kind = _I32
                params[i].of.i32 = value
        results = (_b.wasmtime_val_t * max(nr, 1))()
        with _enter_wasm(store) as trap:
            error = _b.wasmtime_func_call(store._context(), ctypes.byref(self._func), params, n, results, nr, trap)
            if error:
                raise wasmtime.WasmtimeError._from_ptr(error)
        if not nr:
            return None
        return int(results[0].of.i64 if self._results[0] else results[0].of.i32)


def int_call(store: wasmtime.Store, func: wasmtime.Func) -> IntCall | wasmtime.Func:
    """A fast caller for `func` if it takes and returns only i32 and i64 (at most one result)."""
    ty = func.type(store)
    i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
    params, results = ty.params, ty.results
    if len(results) > 1 or any(t not in (i32, i64) for t in (*params, *results)):
        return func
    return IntCall(func, tuple(t == i64 for t in params), tuple(t == i64 for t in results))
