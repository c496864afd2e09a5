"""Whether running binaryen's wasm-opt once over the guest module pays: its cost
(wall time, peak RSS), the run-time speed it buys the CPU set, and what it does to
the compile a first start pays.

    taskset -c 1 .venv/bin/python benchmarks/experiments/wasm_opt.py [--rounds 3] [--winch] [--recompile] [--json out.json]

Steps:
1. The module: the guest as guest_run compiles it (export_mutable_globals of the
   snapshot), written to ~/.cache/wasm-kernel-bench/wasm-opt/; wasm-opt (npm's
   `binaryen` BINARYEN_VERSION, a wasm build run by node, installed once into
   ~/.cache/wasm-kernel-bench/ with npm) runs WASM_OPT_FLAGS over it when the
   optimized file is missing, timed (wall, the child's peak RSS) and recorded beside
   the output (`<output>.json`), so later runs report that first measurement.
2. Compile and check: each wasmtime configuration (epochs = the product's time
   metering, default = no instrumentation, baseline = Winch with epochs, the engine of
   a first start) compiles each module in a child of its own, timed when not yet
   cached (engine_configs.py's cache, /tmp/wasm-kernel-engine-configs/; --recompile
   drops this script's entries first), then runs CHECK; both modules must print the
   same line.
3. Rounds: the CPU set (benchmarks/workloads.py, control_engines.py's harness: each
   cell REPS times in a fresh namespace, the best of all but the first) in a fresh
   child per side and round, in a rotating order. Sides: native, wasmtime-epochs,
   wasmtime-epochs-wasm-opt, wasmtime-default, wasmtime-default-wasm-opt (with
   --winch also wasmtime-baseline and wasmtime-baseline-wasm-opt).
Figures: per cell the median over rounds; per side the geometric mean over the cells
of median / native's median (and of best / native's best, and per round against that
round's native); per configuration the speedup original / optimized, the same ways.
Run it on one core (taskset): wasmtime compiles in parallel, so compile times are
one core's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from control_engines import REPS, _json_line, work_code  # noqa: E402
from engine_configs import CACHE, guest_run  # noqa: E402

BINARYEN_VERSION = "132.0.0"
WASM_OPT_FLAGS = ["-O2"]
WASM_OPT_TIMEOUT = 3600.0
CONFIGS: dict[str, dict[str, object]] = {
    "epochs": {"fuel": False, "epochs": True},
    "default": {"fuel": False, "epochs": False},
    "baseline": {"fuel": False, "epochs": True, "winch": True},
}
MODULES = ("original", "optimized")


def side_name(config: str, module: str) -> str:
    return f"wasmtime-{config}" + ("-wasm-opt" if module == "optimized" else "")


# Observable results that must not depend on the optimizer: an exception caught
# (exception handling), a deep recursion stopped, the stdlib's C code, and the values
# the CPU set's cells compute.
CHECK = (
    "import decimal, hashlib, json, re, zlib\n"
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
    "def deep(n):\n    return deep(n + 1)\n"
    "out = {'1+1': 1 + 1, 'fib_20': fib(20)}\n"
    "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    out['raised'] = type(e).__name__\n"
    "try:\n    deep(0)\nexcept RecursionError as e:\n    out['deep'] = type(e).__name__\n"
    "out['sha256'] = hashlib.sha256(b'wasm-opt' * 1000).hexdigest()\n"
    "out['zlib'] = zlib.crc32(zlib.compress(b'abc' * 10000))\n"
    "out['re'] = re.sub(r'\\d+', '#', 'a1b22c333')\n"
    "out['decimal'] = str(decimal.Decimal(1) / 7)\n"
    "out['float'] = f'{3.5e-7:.6e} {2 ** 0.5!r}'\n"
    f"cells = {workloads.CPU_CELLS!r}\n"
    "for name, src in cells.items():\n"
    "    ns = {}\n"
    "    exec(src, ns)\n"
    "    out[name] = sorted((k, v) for k, v in ns.items() if isinstance(v, int))\n"
    "print(json.dumps(out, sort_keys=True), flush=True)\n"
)


def bench_cache() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "wasm-kernel-bench"


def wasm_opt_script() -> Path:
    """npm's binaryen BINARYEN_VERSION's wasm-opt (a node script), installed once."""
    prefix = bench_cache() / f"binaryen-{BINARYEN_VERSION}"
    script = prefix / "node_modules" / "binaryen" / "bin" / "wasm-opt"
    if not script.is_file():
        subprocess.run(["npm", "install", "--prefix", str(prefix), f"binaryen@{BINARYEN_VERSION}"], check=True)
    return script


def module_paths() -> tuple[Path, Path]:
    """The patched guest (written once) and where its optimized form goes (named by
    the snapshot, the binaryen version and the flags)."""
    from wasm_kernel.host.artifacts import guest_artifacts
    from wasm_kernel.host.wasm_binary import export_mutable_globals

    folder = bench_cache() / "wasm-opt"
    folder.mkdir(parents=True, exist_ok=True)
    sha = guest_artifacts().snapshot_sha256[:16]
    original = folder / f"guest-globals-{sha}.wasm"
    if not original.is_file():
        tmp = original.with_suffix(".tmp")
        tmp.write_bytes(export_mutable_globals(guest_artifacts().snapshot.read_bytes()))
        tmp.rename(original)
    tag = hashlib.sha256(" ".join([BINARYEN_VERSION, *WASM_OPT_FLAGS]).encode()).hexdigest()[:8]
    return original, folder / f"guest-globals-{sha}.wasm-opt-{tag}.wasm"


def run_wasm_opt(original: Path, optimized: Path) -> dict[str, Any]:
    """wasm-opt over `original` into `optimized` unless already there; the record of
    the run that made it (kept beside it)."""
    record_path = optimized.with_suffix(".json")
    if optimized.is_file() and record_path.is_file():
        record = json.loads(record_path.read_text())
        record["reused"] = True
        return record  # type: ignore[no-any-return]
    script = wasm_opt_script()
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    tmp = optimized.with_suffix(".part")
    cmd = ["node", str(script), *WASM_OPT_FLAGS, str(original), "-o", str(tmp)]
    print("running: " + " ".join(cmd), flush=True)
    with tempfile.TemporaryFile() as err_file:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=err_file, stderr=err_file)
        status, usage, timed_out = None, None, False
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, usage = st, ru
            elif time.perf_counter() - start > WASM_OPT_TIMEOUT:
                proc.kill()
                timed_out = True
                _, status, usage = os.wait4(proc.pid, 0)
            else:
                time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        err_file.seek(0)
        output = err_file.read().decode(errors="replace")
    record: dict[str, Any] = {
        "command": " ".join(cmd), "binaryen": BINARYEN_VERSION, "node": node, "flags": WASM_OPT_FLAGS,
        "wall_s": round(wall, 1), "peak_rss_mb": round(usage.ru_maxrss / 1024), "user_s": round(usage.ru_utime, 1),
        "in_bytes": original.stat().st_size, "exit_code": proc.returncode, "timed_out": timed_out,
        "measured_by": "wasm_opt.py",
    }
    if output.strip():
        record["output"] = output[-2000:]
    if proc.returncode == 0 and not timed_out:
        tmp.rename(optimized)
        record["out_bytes"] = optimized.stat().st_size
        record_path.write_text(json.dumps(record, indent=1) + "\n")
    else:
        tmp.unlink(missing_ok=True)
    return record


def child(side: str, module: Path, code_file: Path) -> None:
    from importlib.metadata import version

    config = side.removeprefix("wasmtime-").removesuffix("-wasm-opt")
    result = guest_run(side, CONFIGS[config], code_file.read_text(), 1, module)
    result["wasmtime"] = version("wasmtime")
    print(json.dumps(result), flush=True)


def run_child(side: str, module: Path, code_file: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", side, str(module), str(code_file)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"exit {proc.returncode}: " + " ".join((proc.stderr or proc.stdout).split())[-400:])
    return _json_line(proc.stdout)


def geo(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--winch", action="store_true", help="also time the CPU set on Winch (baseline)")
    parser.add_argument("--recompile", action="store_true", help="drop this script's cached compiles first")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return

    original, optimized = module_paths()
    report: dict[str, Any] = {"cpus": sorted(os.sched_getaffinity(0)), "python": platform.python_version()}
    report["wasm_opt"] = run_wasm_opt(original, optimized)
    print("wasm-opt: " + json.dumps({k: v for k, v in report["wasm_opt"].items() if k != "output"}), flush=True)
    if not optimized.is_file():
        print("wasm-opt made no module: stopping", flush=True)
        if args.json:
            args.json.write_text(json.dumps(report, indent=1) + "\n")
        sys.exit(1)
    paths = {"original": original, "optimized": optimized}
    report["modules"] = {m: {"path": str(p), "bytes": p.stat().st_size,
                             "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for m, p in paths.items()}

    folder = Path(tempfile.mkdtemp(prefix="wk-wasm-opt-"))
    check_file = folder / "check.py"
    check_file.write_text(CHECK)
    work = folder / "work.py"
    work.write_text(work_code())

    # Compile (timed when not cached) and check every configuration on both modules.
    native_check = subprocess.run([sys.executable, str(check_file)], capture_output=True, text=True,
                                  check=True).stdout.strip().splitlines()[-1]
    compiles = []
    checks: dict[str, Any] = {"native": native_check}
    for config in CONFIGS:
        outs = {}
        for module in MODULES:
            side = side_name(config, module)
            cached = CACHE / f"{side}-{paths[module].stem}.cwasm"
            if args.recompile:
                cached.unlink(missing_ok=True)
            row: dict[str, Any] = {"side": side, "config": config, "module": module}
            try:
                res = run_child(side, paths[module], check_file)
            except RuntimeError as err:
                row["error"] = str(err)
            else:
                row.update({k: res[k] for k in ("compile_s", "peak_rss_mb", "wasmtime", "error") if k in res})
                row["cwasm_bytes"] = cached.stat().st_size if cached.is_file() else None
                row["check_same_as_native"] = res.get("guest_out") == native_check
                outs[module] = res.get("guest_out")
            compiles.append(row)
            print("compile+check " + json.dumps(row), flush=True)
        same = len(outs) == 2 and outs["original"] is not None and outs["original"] == outs["optimized"]
        for row in compiles[-2:]:
            row["check_same_as_original"] = same
        checks[config] = outs
        print(f"{config}: check output {'identical' if same else 'DIFFERS or missing'}: {outs.get('original')}",
              flush=True)
    report["compile"] = compiles
    report["check_output"] = checks

    configs = [c for c in CONFIGS if c != "baseline" or args.winch]
    sides = ["native"] + [side_name(c, m) for c in configs for m in MODULES]
    module_of = {side_name(c, m): paths[m] for c in configs for m in MODULES}
    cells = list(workloads.CPU_CELLS)
    times: dict[str, dict[str, list[float]]] = {s: {c: [] for c in cells} for s in sides}
    per_round: list[dict[str, dict[str, float]]] = []
    errors: dict[str, str] = {}
    for rnd in range(args.rounds):
        order = sides[rnd % len(sides):] + sides[:rnd % len(sides)]
        this_round: dict[str, dict[str, float]] = {}
        for side in order:
            if side in errors:
                continue
            try:
                if side == "native":
                    proc = subprocess.run([sys.executable, str(work)], capture_output=True, text=True, check=True)
                    got = _json_line(proc.stdout)
                else:
                    res = run_child(side, module_of[side], work)
                    if res.get("compile_s") != "cached":
                        print(f"{side}: compiled in the round ({res.get('compile_s')} s)", flush=True)
                    got = json.loads(res["guest_out"])
            except (subprocess.CalledProcessError, RuntimeError) as err:
                errors[side] = " ".join(str(getattr(err, "stderr", "") or err).split())[-300:]
                print(f"{side}: failed: {errors[side]}", flush=True)
                continue
            this_round[side] = got
            for name, seconds in got.items():
                times[side][name].append(seconds)
            print(f"round {rnd + 1} {side}: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in got.items()),
                  flush=True)
        per_round.append(this_round)

    native_med = {c: statistics.median(times["native"][c]) for c in cells}
    native_best = {c: min(times["native"][c]) for c in cells}
    rows = []
    for side in sides:
        if side in errors or not times[side][cells[0]]:
            rows.append({"side": side, "error": errors.get(side, "no runs")})
            continue
        med = {c: statistics.median(times[side][c]) for c in cells}
        best = {c: min(times[side][c]) for c in cells}
        rounds_geo = [round(geo([r[side][c] / r["native"][c] for c in cells]), 3)
                      for r in per_round if side in r and "native" in r]
        row = {"side": side, "median_s": med, "best_s": best,
               "ratio": {c: round(med[c] / native_med[c], 3) for c in cells},
               "geo": round(geo([med[c] / native_med[c] for c in cells]), 3),
               "geo_best": round(geo([best[c] / native_best[c] for c in cells]), 3),
               "geo_per_round": rounds_geo}
        rows.append(row)
    report["rows"] = rows
    by_side = {r["side"]: r for r in rows if "error" not in r}
    speedups = []
    for config in configs:
        a, b = side_name(config, "original"), side_name(config, "optimized")
        if a not in by_side or b not in by_side:
            continue
        ra, rb = by_side[a], by_side[b]
        speedups.append({
            "config": config,
            "per_cell": {c: round(ra["median_s"][c] / rb["median_s"][c], 3) for c in cells},
            "geo": round(geo([ra["median_s"][c] / rb["median_s"][c] for c in cells]), 3),
            "geo_best": round(geo([ra["best_s"][c] / rb["best_s"][c] for c in cells]), 3),
            "geo_per_round": [round(geo([r[a][c] / r[b][c] for c in cells]), 3)
                              for r in per_round if a in r and b in r],
        })
    report["speedup_optimized_over_original"] = speedups

    print()
    print(f"{'side':28s} " + " ".join(f"{c:>9s}" for c in cells) + "   geo(med)  geo(best)  per round")
    for row in rows:
        if "error" in row:
            print(f"{row['side']:28s} error: {row['error']}")
            continue
        print(f"{row['side']:28s} " + " ".join(f"{row['median_s'][c] * 1000:7.0f}ms" for c in cells)
              + f"   {row['geo']:7.3f}x  {row['geo_best']:8.3f}x  {row['geo_per_round']}")
    for s in speedups:
        print(f"speedup {s['config']:9s} original/optimized: geo(med) {s['geo']:.3f}, geo(best) {s['geo_best']:.3f}, "
              f"per round {s['geo_per_round']}, per cell {s['per_cell']}")
    for row in compiles:
        print(f"compile {row['side']:28s} {row.get('compile_s')} s  cwasm {row.get('cwasm_bytes')}  "
              f"check same as original: {row.get('check_same_as_original')}, as native: "
              f"{row.get('check_same_as_native')}  {row.get('error', '')}")
    if args.json:
        args.json.write_text(json.dumps({"rounds": args.rounds, "reps": REPS, **report, "raw_s": times,
                                         "per_round_s": per_round}, indent=1) + "\n")


if __name__ == "__main__":
    main()
