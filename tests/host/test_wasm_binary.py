"""The binary patch that exports a module's mutable globals."""

import pytest
import wasmtime

from wasm_kernel.host.engine import get_engine
from wasm_kernel.host.wasm_binary import WasmFormatError, export_mutable_globals, mutable_global_indices

WAT = """(module
  (import "env" "g" (global $imp i32))
  (global $sp (mut i32) (i32.const 1024))
  (global $c i32 (i32.const 7))
  (global $f (mut i64) (i64.const -5))
  (memory (export "memory") 1)
  (func (export "bump") (global.set $sp (i32.add (global.get $sp) (i32.const 1)))))"""


def test_mutable_globals_are_found_after_imported_ones() -> None:
    assert mutable_global_indices(wasmtime.wat2wasm(WAT)) == [1, 3]


def test_patched_module_validates_and_exports_live_globals() -> None:
    patched = export_mutable_globals(wasmtime.wat2wasm(WAT))
    engine = get_engine()
    module = wasmtime.Module(engine, patched)
    names = [e.name for e in module.exports]
    assert names == ["memory", "bump", "__wasm_kernel_global_1", "__wasm_kernel_global_3"]
    store = wasmtime.Store(engine)
    store.set_epoch_deadline(1 << 30)
    imported = wasmtime.Global(store, wasmtime.GlobalType(wasmtime.ValType.i32(), False), wasmtime.Val.i32(0))
    exports = wasmtime.Instance(store, module, [imported]).exports(store)
    exports["bump"](store)  # type: ignore[operator]
    sp = exports["__wasm_kernel_global_1"]
    assert sp.value(store) == 1025  # type: ignore[union-attr]
    sp.set_value(store, wasmtime.Val.i32(9))  # type: ignore[union-attr]
    exports["bump"](store)  # type: ignore[operator]
    assert sp.value(store) == 10  # type: ignore[union-attr]


def test_non_wasm_bytes_are_refused() -> None:
    with pytest.raises(WasmFormatError):
        export_mutable_globals(b"\x7fELF not wasm")
