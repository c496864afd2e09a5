"""IntCall: a function of i32s and i64s called without wasmtime-py's per-call type
building, with the same answers, traps and Python exceptions as Func.__call__."""

import pytest
import wasmtime

from wasm_kernel.host.wasmtime_private import IntCall, int_call

WAT = """
(module
  (import "host" "twice" (func $twice (param i32) (result i32)))
  (func (export "add") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1)))
  (func (export "via_host") (param i32) (result i32) (call $twice (local.get 0)))
  (func (export "nothing"))
  (func (export "boom") (param i32) (result i32) unreachable)
  (func (export "wide") (param i64) (result i64) (local.get 0))
  (func (export "mixed") (param i32 i64 i32) (result i32)
    (i32.add (i32.wrap_i64 (i64.shr_u (local.get 1) (i64.const 32))) (i32.add (local.get 0) (local.get 2))))
  (func (export "float") (param f32) (result f32) (local.get 0)))
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
    return store, {name: inst.exports(store)[name] for name in ("add", "via_host", "nothing", "boom", "wide", "mixed", "float")}


def test_integer_exports_get_the_fast_caller_with_the_same_answers_and_others_keep_func() -> None:
    store, ex = instance(lambda x: 2 * x)
    add, via_host, nothing, wide, mixed = (int_call(store, ex[n]) for n in ("add", "via_host", "nothing", "wide",
                                                                              "mixed"))
    assert all(isinstance(f, IntCall) for f in (add, via_host, nothing, wide, mixed))
    assert add(store, 2, 3) == ex["add"](store, 2, 3) == 5
    assert add(store, 0x7FFFFFFF, 1) == ex["add"](store, 0x7FFFFFFF, 1) == -(2**31)  # signed, as wasmtime-py
    assert via_host(store, 21) == 42
    assert nothing(store) is None
    for value in (2**40 + 7, -1, -(2**63), 2**63 - 1):
        assert wide(store, value) == ex["wide"](store, value) == value  # i64 both ways, signed
    assert mixed(store, 1, 5 << 32, 2) == ex["mixed"](store, 1, 5 << 32, 2) == 8  # each value in its own slot
    assert int_call(store, ex["float"]) is ex["float"]  # f32: not ours to call
    with pytest.raises(wasmtime.WasmtimeError):
        add(store, 1)


def test_traps_and_a_host_functions_exception_are_raised_as_func_call_raises_them() -> None:
    def twice(x: int) -> int:
        raise Raised("from the host")

    store, ex = instance(twice)
    with pytest.raises(wasmtime.Trap) as fast:
        int_call(store, ex["boom"])(store, 1)
    with pytest.raises(wasmtime.Trap) as slow:
        ex["boom"](store, 1)
    assert fast.value.trap_code == slow.value.trap_code
    with pytest.raises(Raised):
        int_call(store, ex["via_host"])(store, 1)
