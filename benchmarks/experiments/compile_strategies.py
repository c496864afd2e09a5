"""How long the guest module takes to compile under each strategy wasmtime offers,
and whether the result runs: the cold-start question of issue 12.

    .venv/bin/python benchmarks/experiments/compile_strategies.py [--only NAME ...] [--json out.json]

Each strategy compiles the patched guest module (the one the product compiles) in a
child process of its own, so peak memory (ru_maxrss) is per strategy. Strategies:
cranelift (the product's: speed opt level, fuel + epochs), cranelift-none (opt level
none), winch (baseline compiler, fuel + epochs), winch-epoch (winch, epochs only).
wasmtime-py 49 names only "auto" and "cranelift"; winch is the C API's strategy 2.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

STRATEGIES = {
    "cranelift": {"strategy": 1, "fuel": True, "opt": "speed"},
    "cranelift-none": {"strategy": 1, "fuel": True, "opt": "none"},
    "winch": {"strategy": 2, "fuel": True, "opt": None},
    "winch-epoch": {"strategy": 2, "fuel": False, "opt": None},
}


def child(name: str) -> None:
    import wasmtime
    from wasmtime import _ffi as ffi

    from wasm_kernel.host.artifacts import guest_artifacts
    from wasm_kernel.host.wasm_binary import export_mutable_globals

    spec = STRATEGIES[name]
    config = wasmtime.Config()
    ffi.wasmtime_config_strategy_set(config.ptr(), spec["strategy"])
    config.consume_fuel = spec["fuel"]
    config.epoch_interruption = True
    if spec["opt"]:
        config.cranelift_opt_level = spec["opt"]
    engine = wasmtime.Engine(config)
    data = export_mutable_globals(guest_artifacts().snapshot.read_bytes())
    start = time.perf_counter()
    result: dict[str, object] = {"strategy": name}
    try:
        wasmtime.Module(engine, data)
        result["ok"] = True
    except Exception as err:  # record why, e.g. winch's fuel support
        result["ok"] = False
        result["error"] = " ".join(str(err).split())[-300:]
    result["seconds"] = round(time.perf_counter() - start, 2)
    result["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", choices=sorted(STRATEGIES))
    parser.add_argument("--json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    results = []
    for name in args.only or STRATEGIES:
        out = subprocess.run([sys.executable, __file__, "--child", name], capture_output=True, text=True)
        line = (out.stdout.strip().splitlines() or ["{}"])[-1]
        row = json.loads(line) if line.startswith("{") else {"strategy": name, "ok": False, "error": out.stderr[-300:]}
        print(json.dumps(row), flush=True)
        results.append(row)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
