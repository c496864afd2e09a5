"""Which wasmtime engine configuration runs the guest fastest, and what each costs
to compile: the run-time question of issue 12.

    .venv/bin/python benchmarks/experiments/engine_configs.py [--only NAME ...] [--json out.json]

Each configuration compiles the patched guest module (cached under
/tmp/wasm-kernel-engine-configs/, so reruns skip the compile) in a child process of
its own and times the same pure-Python work inside the guest, twice (the second run
counts), against native CPython in this process:
- product: Cranelift (opt level speed), fuel + epochs, static memory with guard pages
  (no explicit bounds checks), signals-based traps (the product's engine);
- epoch-only: the same without fuel metering (what a kernel with no fuel limit could
  run, at the price of a second compile and a second cached module);
- speed-and-size: Cranelift's other optimising level;
- opt-none: Cranelift without optimisation (compiles in less than half the time);
- bounds-checked: no memory reservation to speak of, so every access is
  bounds-checked in code (what a host without a 4 GiB address-space reservation
  per guest would get);
- baseline: Winch, epochs only (the first-start engine);
- winch-fuel: Winch with fuel (wasmtime 49 refuses this module: recorded as such).
It replaces the earlier compile_strategies.py and fuel_cost_experiment.py, whose
findings BENCHMARKS.md keeps.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

CACHE = Path("/tmp/wasm-kernel-engine-configs")
WORK = (
    "import time\n"
    "def loop():\n s = 0\n for i in range(3000000):\n  s += i\n return s\n"
    "def fib(n):\n return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    "def strings():\n return len(','.join(f'{i:08d}|{i * 3.5:.2f}' for i in range(200000)))\n"
    "out = {}\n"
    "for name, f in (('loop_3M', loop), ('fib_25', lambda: fib(25)), ('strings', strings)):\n"
    " t = time.perf_counter(); f(); out[name] = time.perf_counter() - t\n"
)
CONFIGS = {
    "product": {"fuel": True},
    "epoch-only": {"fuel": False},
    "speed-and-size": {"fuel": True, "opt": "speed_and_size"},
    "opt-none": {"fuel": True, "opt": "none"},
    "bounds-checked": {"fuel": True, "reservation": 0, "guard": 0},
    "baseline": {"fuel": False, "winch": True},
    "winch-fuel": {"fuel": True, "winch": True},
}


def guest_run(name: str, spec: dict[str, object], code: str, runs: int,
              module_path: Path | None = None) -> dict[str, object]:
    """Compile (or load from CACHE) the patched guest under `spec`'s configuration and
    run `code` in it `runs` times; the result holds the compile time, the peak RSS and
    the guest's last line of stdout (`guest_out`). control_engines.py and wasm_opt.py
    share it. `module_path`, when given, is a module file to compile instead of the
    patched guest (already patched; cached under its file name's stem)."""
    import wasmtime

    from wasm_kernel.host.artifacts import GUEST_LIB, guest_artifacts, runtime_tree
    from wasm_kernel.host.engine import ASYNC_STACK, MAX_WASM_STACK
    from wasm_kernel.host.wasm_binary import export_mutable_globals
    from wasm_kernel.host.wasmtime_private import set_baseline_strategy, set_wasm_stack

    config = wasmtime.Config()
    config.consume_fuel = bool(spec["fuel"])
    epochs = bool(spec.get("epochs", True))
    config.epoch_interruption = epochs
    set_wasm_stack(config, MAX_WASM_STACK, ASYNC_STACK)
    if spec.get("winch"):
        set_baseline_strategy(config)
    if "opt" in spec:
        config.cranelift_opt_level = spec["opt"]
    if "reservation" in spec:
        config.memory_reservation = spec["reservation"]
        config.memory_guard_size = spec["guard"]
    engine = wasmtime.Engine(config)
    CACHE.mkdir(exist_ok=True)
    key = guest_artifacts().snapshot_sha256[:16] if module_path is None else module_path.stem
    cached = CACHE / f"{name}-{key}.cwasm"
    result: dict[str, object] = {"config": name}
    start = time.perf_counter()
    if cached.is_file():
        module = wasmtime.Module.deserialize_file(engine, str(cached))
        result["compile_s"] = "cached"
    else:
        try:
            wasm = (export_mutable_globals(guest_artifacts().snapshot.read_bytes()) if module_path is None
                    else module_path.read_bytes())
            module = wasmtime.Module(engine, wasm)
        except wasmtime.WasmtimeError as err:  # e.g. Winch's fuel support
            result["compile_s"] = round(time.perf_counter() - start, 1)
            result["error"] = " ".join(str(err).split())[-300:]
            return result
        result["compile_s"] = round(time.perf_counter() - start, 1)
        cached.write_bytes(module.serialize())
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    store = wasmtime.Store(engine)
    if spec["fuel"]:
        store.set_fuel(1 << 62)
    if epochs:
        store.set_epoch_deadline(1 << 40)
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["python"]
    out_file = CACHE / f"{name}.out"
    wasi.stdout_file = str(out_file)
    wasi.preopen_dir(str(runtime_tree().lib_dir), GUEST_LIB, False)
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    i32 = wasmtime.ValType.i32()
    linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), lambda *a: -1)
    exports = linker.instantiate(store, module).exports(store)
    encoded = code.encode()
    for _ in range(runs):
        ptr = exports["host_alloc"](store, len(encoded))  # type: ignore[operator]
        exports["memory"].write(store, encoded, ptr)  # type: ignore[union-attr]
        exports["turn"](store, ptr, len(encoded))  # type: ignore[operator]
    result["guest_out"] = out_file.read_text().strip().splitlines()[-1]
    return result


def child(name: str) -> None:
    result = guest_run(name, CONFIGS[name], WORK + "import json\nprint(json.dumps(out))\n", 2)  # the second run counts
    if "guest_out" in result:
        result["guest_s"] = json.loads(str(result.pop("guest_out")))
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(CONFIGS))
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    native: dict[str, float] = {}
    ns: dict[str, object] = {}
    exec(WORK, ns)
    exec(WORK, ns)
    native = dict(ns["out"])  # type: ignore[arg-type]
    rows = []
    for name in args.only or CONFIGS:
        proc = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True)
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
        row = json.loads(lines[-1]) if lines else {"config": name, "error": proc.stderr[-400:]}
        if "guest_s" in row:
            row["ratio"] = {k: round(v / native[k], 2) for k, v in row["guest_s"].items()}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.json:
        Path(args.json).write_text(json.dumps({"native_s": native, "configs": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
