"""What fuel metering costs pure Python: the CPU set in time metering (epochs only, the
default) and in fuel metering (fuel + epochs), beside native CPython, in one run.

    .venv/bin/python benchmarks/experiments/metering_modes.py [--rounds 5] [--json out.json]

Two sandboxes, one per metering (each its own compiled module: the first run of a
metering not yet cached compiles it, 1-2 minutes), and a native child
(benchmarks/native_child.py). Per round and cell, the three run in a rotating order
after a pause (the previous cell's checkpoint done), so all see the same load. The
figure is the geometric mean over the cells of each side's median time divided by
native's, and the ratio fuel / time.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from bench_compute import NativeServer  # noqa: E402

PAUSE = 0.15


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    from wasm_kernel import ExecutionPolicy, create_sandbox
    from wasm_kernel.runtime.guest_config import GuestOptions

    policy = ExecutionPolicy(fuel_budget=None, cpu_seconds=None, stdout_max_bytes=None)
    folder = Path(tempfile.mkdtemp(prefix="wk-metering-"))
    sides = {}
    for metering in ("time", "fuel"):
        started = time.monotonic()
        sides[metering] = create_sandbox(workspace=folder / metering, policy=policy,
                                         guest_options=GuestOptions(metering=metering))
        print(f"{metering}: sandbox ready in {time.monotonic() - started:.1f} s", flush=True)
    native = NativeServer("cpu")
    times: dict[str, dict[str, list[float]]] = {name: {"native": [], "time": [], "fuel": []}
                                                for name in workloads.CPU_CELLS}
    try:
        for name, code in workloads.CPU_CELLS.items():
            for sb in sides.values():
                assert sb.execute(code).success, name  # warm-up
            for rnd in range(args.rounds):
                order = ["native", "time", "fuel"]
                order = order[rnd % 3:] + order[:rnd % 3]
                for side in order:
                    time.sleep(PAUSE)
                    if side == "native":
                        times[name]["native"].append(native.run(name))
                        continue
                    t = time.perf_counter()
                    r = sides[side].execute(code)
                    times[name][side].append(time.perf_counter() - t)
                    assert r.success, (name, side, r.error)
            med = {side: statistics.median(v) for side, v in times[name].items()}
            print(f"{name}: native {med['native'] * 1000:.0f} ms, time {med['time'] * 1000:.0f} ms "
                  f"({med['time'] / med['native']:.2f}x), fuel {med['fuel'] * 1000:.0f} ms "
                  f"({med['fuel'] / med['native']:.2f}x), fuel/time {med['fuel'] / med['time']:.2f}", flush=True)
    finally:
        native.close()
        for sb in sides.values():
            sb.close()

    def geo(side: str, over: str = "native") -> float:
        ratios = [statistics.median(v[side]) / statistics.median(v[over]) for v in times.values()]
        return math.exp(sum(math.log(r) for r in ratios) / len(ratios))

    summary = {"time_x_native": geo("time"), "fuel_x_native": geo("fuel"), "fuel_x_time": geo("fuel", "time")}
    print(" ".join(f"{k}={v:.2f}" for k, v in summary.items()))
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "seconds": times, "rounds": args.rounds}, indent=1))


if __name__ == "__main__":
    main()
