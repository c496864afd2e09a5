"""How much of the guest's pure-Python slowdown is fuel metering?

Not part of run_all.py: it compiles the guest a second time without fuel (about
100-160 s and 2.4 GB, cached in /tmp/wasm-kernel-nofuel.cwasm for reruns) and times
the same 3M-iteration loop, inside a function and at module level, in both engines.

    .venv/bin/python benchmarks/experiments/fuel_cost_experiment.py
"""

from __future__ import annotations

import os
import time

import wasmtime

from wasm_kernel.host.artifacts import GUEST_LIB, guest_artifacts, runtime_tree
from wasm_kernel.host.engine import ASYNC_STACK, MAX_WASM_STACK, get_engine
from wasm_kernel.host.module_cache import load_guest_module
from wasm_kernel.host.wasmtime_private import set_wasm_stack

NOFUEL_CACHE = "/tmp/wasm-kernel-nofuel.cwasm"
CODE = (
    b"import time\n"
    b"def f():\n s = 0\n for i in range(3000000):\n  s += i\n return s\n"
    b"t = time.perf_counter(); f(); print('in a function', round(time.perf_counter() - t, 3), 's')\n"
    b"s = 0\nt = time.perf_counter()\nfor i in range(3000000):\n s += i\n"
    b"print('module level ', round(time.perf_counter() - t, 3), 's')\n"
)


def run(engine: wasmtime.Engine, module: wasmtime.Module, fuel: bool) -> None:
    store = wasmtime.Store(engine)
    if fuel:
        store.set_fuel(1 << 62)
    store.set_epoch_deadline(1 << 40)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["python"]
    wasi.inherit_stdout()
    wasi.preopen_dir(str(runtime_tree().lib_dir), GUEST_LIB, False)
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    i32 = wasmtime.ValType.i32()
    linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), lambda *a: -1)
    exports = linker.instantiate(store, module).exports(store)
    for _ in range(2):  # the second run is the one to read
        ptr = exports["host_alloc"](store, len(CODE))  # type: ignore[operator]
        exports["memory"].write(store, CODE, ptr)  # type: ignore[union-attr]
        exports["turn"](store, ptr, len(CODE))  # type: ignore[operator]


def main() -> None:
    print("native CPython:")
    exec(CODE.decode(), {})
    print("guest, fuel + epochs (the product's engine):", flush=True)
    run(get_engine(), load_guest_module(), fuel=True)
    config = wasmtime.Config()
    config.consume_fuel = False
    config.epoch_interruption = True
    set_wasm_stack(config, MAX_WASM_STACK, ASYNC_STACK)
    engine = wasmtime.Engine(config)
    start = time.time()
    if os.path.exists(NOFUEL_CACHE):
        module = wasmtime.Module.deserialize_file(engine, NOFUEL_CACHE)
    else:
        print("compiling the guest without fuel (100-160 s)...", flush=True)
        module = wasmtime.Module(engine, guest_artifacts().snapshot.read_bytes())
        with open(NOFUEL_CACHE, "wb") as f:
            f.write(module.serialize())
    print(f"guest, epochs only (loaded in {time.time() - start:.0f} s):", flush=True)
    run(engine, module, fuel=False)


if __name__ == "__main__":
    main()
