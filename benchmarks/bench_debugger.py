"""Area debugger: what JupyterLab's debugger costs a cell that it does not stop, on
wasm-python (the guest's sys.monitoring debugger) beside native ipykernel (debugpy),
in one run.

Each round starts a fresh kernel of each kind, which runs two cells, a loop of
arithmetic and a loop of small function calls, `cells` times each with the debugger
off, then on (initialize, attach, a breakpoint in another cell's file,
configurationDone, as JupyterLab turns it on); the order alternates between kernels
round by round. The figure is each cell's median
request -> reply time, and the ratio on/off per kernel. Also the round trip of two
requests between cells: debugInfo (answered by the kernel) and inspectVariables (the
variable explorer; by the guest's shell here, by ipykernel's own code there).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the kernel and debugger clients

from _common import Row, log, median  # noqa: E402
from support.debug_client import DebugClient  # noqa: E402
from support.kernel_client import RunningKernel  # noqa: E402

CELLS = {
    "arithmetic": "t = 0\nfor i in range(200_000):\n    t += i * i\n",
    "calls": "def f(x):\n    return x + 1\nt = 0\nfor i in range(50_000):\n    t = f(t)\n",
}
ELSEWHERE = "def never_called():\n    return 1\n"  # the breakpoint's cell: set, never hit


def _timed(dc: DebugClient, code: str, cells: int) -> float:
    times = []
    for _ in range(cells):
        start = time.perf_counter()
        reply = dc.wait_reply(dc.execute(code))
        times.append(time.perf_counter() - start)
        assert reply["status"] == "ok", reply
    return median(times)


def _request_time(dc: DebugClient, command: str, times: int = 20) -> float:
    spent = []
    for _ in range(times):
        start = time.perf_counter()
        assert dc.request(command)["success"] is not False
        spent.append(time.perf_counter() - start)
    return median(spent)


def _debugger_on(dc: DebugClient) -> None:
    dc.start()
    path = dc.request("dumpCell", code=ELSEWHERE)["body"]["sourcePath"]
    dc.wait_reply(dc.execute(ELSEWHERE))
    assert dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 2}])["success"]
    dc.request("configurationDone")


def run_debugger(rounds: int = 3, cells: int = 10) -> tuple[list[Row], dict[str, Any]]:
    raw: dict[str, Any] = {"rounds": rounds, "cells": cells}
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="wk-bench-debugger-") as tmp:
        for r in range(rounds):
            # Fresh kernels each round: ipykernel's debugpy does not come back cleanly
            # after a disconnect, and a round must not measure the one before it.
            order = ["wasm", "native"] if r % 2 == 0 else ["native", "wasm"]
            for name in order:
                kernel = RunningKernel(Path(tmp) / f"{name}-{r}", kernel_name="python3" if name == "native" else
                                       "wasm-python")
                try:
                    dc = DebugClient(kernel.kc)
                    for code in CELLS.values():
                        _timed(dc, code, 2)  # warm
                    mine = figures.setdefault(name, {})
                    for cell, code in CELLS.items():
                        mine.setdefault(f"{cell} off", []).append(_timed(dc, code, cells))
                    _debugger_on(dc)
                    for cell, code in CELLS.items():
                        mine.setdefault(f"{cell} on", []).append(_timed(dc, code, cells))
                    mine.setdefault("debugInfo", []).append(_request_time(dc, "debugInfo"))
                    mine.setdefault("inspectVariables", []).append(_request_time(dc, "inspectVariables"))
                finally:
                    kernel.shutdown()
                log(f"debugger: round {r + 1} {name}: " + ", ".join(f"{k} {1000 * v[-1]:.1f} ms" for k, v in mine.items()))
    raw["figures"] = figures
    wasm, native = ({k: median(v) for k, v in figures[n].items()} for n in ("wasm", "native"))
    rows: list[Row] = []
    for cell in CELLS:
        rows.append(Row("debugger", f"{cell} cell, debugger off", "ms", 1000 * wasm[f"{cell} off"],
                        1000 * native[f"{cell} off"], note="native: ipykernel"))
        rows.append(Row("debugger", f"{cell} cell, debugger on, not stopped", "ms", 1000 * wasm[f"{cell} on"],
                        1000 * native[f"{cell} on"], note="native: ipykernel with debugpy"))
        rows.append(Row("debugger", f"{cell} cell, on/off (each kernel against itself)", "x",
                        wasm[f"{cell} on"] / wasm[f"{cell} off"], native[f"{cell} on"] / native[f"{cell} off"],
                        note="guest column: wasm-python's on/off; native: ipykernel's"))
    for command in ("debugInfo", "inspectVariables"):
        rows.append(Row("debugger", f"{command} request -> reply, between cells", "ms", 1000 * wasm[command],
                        1000 * native[command], note="native: ipykernel"))
    return rows, raw


if __name__ == "__main__":
    from _common import print_table

    rows, raw = run_debugger(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    print_table(rows)
    print(json.dumps(raw))
