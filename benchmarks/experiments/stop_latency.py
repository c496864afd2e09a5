"""Issue 27: how long a stop takes, by trap (time metering without epochs) against
epochs, on the cells a stop has to reach.

    .venv/bin/python benchmarks/experiments/stop_latency.py [--runs 5] [--json out.json]
    WASM_KERNEL_HARD_STOPS=epochs .venv/bin/python benchmarks/experiments/stop_latency.py ...

Each cell runs under a 0.5 s deadline until it is stopped and rolled back; the figure
is the cell's duration past the deadline (the stop, the rollback, the result), median
and worst of --runs, for:
  python_loop  `while True: n += 1`               (the interpreter: memory at every step)
  c_loop       `sum(range(10**15))`               (one long call into C)
  memory_copy  `while True: b[:] = c` of 40 MB    (nearly all in wasmtime's memory.copy)
  host_calls   `while True: os.stat('/app')`      (nearly all in WASI calls)
The epochs side needs the time module with epochs compiled (`WASM_KERNEL_HARD_STOPS=epochs
wasm-kernel precompile`, about 2.5 minutes once).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import quiet_policy  # noqa: E402

from wasm_kernel import create_sandbox  # noqa: E402

CELLS = {
    "python_loop": "n = 0\nwhile True:\n    n += 1",
    "c_loop": "sum(range(10**15))",
    "memory_copy": "b = bytearray(40_000_000)\nc = bytes(40_000_000)\nwhile True:\n    b[:] = c",
    "host_calls": "import os\nwhile True:\n    os.stat('/app')",
}
DEADLINE = 0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    sb = create_sandbox(workspace=Path(tempfile.mkdtemp(prefix="wk-stop-")),
                        policy=quiet_policy(deadline_seconds=DEADLINE))
    mode = "epochs" if sb._guest.instance.epochs else "trap"  # type: ignore[attr-defined]
    sb.execute("x = 1")
    out: dict[str, object] = {"stops": mode, "hard_stops_env": os.environ.get("WASM_KERNEL_HARD_STOPS", "")}
    for name, code in CELLS.items():
        past = []
        for _ in range(args.runs):
            r = sb.execute(code)
            assert r.trap == "deadline" and r.rolled_back, (name, r.trap, r.error)
            past.append(r.duration_ms - DEADLINE * 1000)
        out[name] = {"median_ms": round(statistics.median(past), 1), "worst_ms": round(max(past), 1)}
        print(f"{mode} {name}: {statistics.median(past):.1f} ms past the deadline (worst {max(past):.1f})", flush=True)
    sb.close()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
