"""I32Call: an export of i32s called without wasmtime-py's per-call type building,
with the same answers, traps and Python exceptions as Func.__call__."""

import pytest
import wasmtime

from wasm_kernel.host.wasmtime_private import I32Call, i32_call

WAT = """
(module
  (import "host" "twice" (func $twice (param i32) (result i32)))
  (func (export "add") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1)))
  (func (export "via_host") (param i32) (result i32) (call $twice (local.get 0)))
  (func (export "nothing"))
  (func (export "boom") (param i32) (result i32) unreachable)
  (func (export "wide") (param i64) (result i64) (local.get 0)))
"""


class Raised(Exception):
    pass


def instance(twice) -> tuple[wasmtime.Store, dict]:  # type: ignore[no-untyped-def]
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    linker = wasmtime.Linker(engine)
    i32 = wasmtime.ValType.i32()
    linker.define_func("host", "twice", wasmtime.FuncType([i32], [i32]), twice)
    inst = linker.instantiate(store, wasmtime.Module(engine, WAT))
    return store, {name: inst.exports(store)[name] for name in ("add", "via_host", "nothing", "boom", "wide")}


def test_i32_exports_get_the_fast_caller_with_the_same_answers_and_others_keep_func() -> None:
    store, ex = instance(lambda x: 2 * x)
    add, via_host, nothing = (i32_call(store, ex[n]) for n in ("add", "via_host", "nothing"))
    assert isinstance(add, I32Call) and isinstance(nothing, I32Call)
    assert add(store, 2, 3) == ex["add"](store, 2, 3) == 5
    assert add(store, 0x7FFFFFFF, 1) == ex["add"](store, 0x7FFFFFFF, 1) == -(2**31)  # signed, as wasmtime-py
    assert via_host(store, 21) == 42
    assert nothing(store) is None
    assert i32_call(store, ex["wide"]) is ex["wide"]  # i64: not ours to call
    with pytest.raises(wasmtime.WasmtimeError):
        add(store, 1)


def test_traps_and_a_host_functions_exception_are_raised_as_func_call_raises_them() -> None:
    def twice(x: int) -> int:
        raise Raised("from the host")

    store, ex = instance(twice)
    with pytest.raises(wasmtime.Trap) as fast:
        i32_call(store, ex["boom"])(store, 1)
    with pytest.raises(wasmtime.Trap) as slow:
        ex["boom"](store, 1)
    assert fast.value.trap_code == slow.value.trap_code
    with pytest.raises(Raised):
        i32_call(store, ex["via_host"])(store, 1)
