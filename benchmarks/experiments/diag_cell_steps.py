"""Where a `1+1` cell's round trip goes, step by step: a diagnostic, not part of run_all.py.

    .venv/bin/python benchmarks/experiments/diag_cell_steps.py [--cells 200] [--rounds 3]

Starts wasm-python and native ipykernel (alternating, `--rounds` each) through
temporary kernelspecs whose launcher is cell_steps_trace.py, runs 30 warm-up cells
and then `--cells` cells of `1+1` as bench_kernel.py does (each waits for its reply
and its idle status), and prints, per kernel, the median over the rounds of each
step's per-round median: the client's send -> the main thread taking the request ->
do_execute -> (wasm) the guest's turn -> the wait for the IOPub thread -> the reply's
send -> the client's receipt. Every clock is time.monotonic(), shared by the
processes. Uses kernel internals read-only (it wraps methods with timers).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: bench_kernel

from bench_kernel import DrivenKernel, kernel_env  # noqa: E402

HERE = Path(__file__).resolve().parent
STEPS = ("execute_request: enter", "do_execute: enter", "guest run_cell: enter", "guest run_cell: exit",
         "wait for the IOPub thread: enter", "wait for the IOPub thread: exit", "do_execute: exit",
         "send execute_reply: enter", "send execute_reply: exit")


def make_specs(base: Path) -> None:
    for kind in ("wasm", "native"):
        folder = base / "kernels" / f"wk-steps-{kind}"
        folder.mkdir(parents=True)
        spec = {"argv": [sys.executable, str(HERE / "cell_steps_trace.py"), kind, "-f", "{connection_file}"],
                "display_name": f"steps {kind}", "language": "python"}
        if kind == "wasm":
            spec["interrupt_mode"] = "signal"
        (folder / "kernel.json").write_text(json.dumps(spec))


def one(kind: str, base: Path, rnd: int, cells: int) -> dict[str, float]:
    scratch = base / f"r{rnd}-{kind}"
    (scratch / "cwd").mkdir(parents=True)
    trace = scratch / "trace.jsonl"
    env = {**kernel_env(base, True), "JUPYTER_DATA_DIR": str(scratch / "data"), "WK_CELL_TRACE": str(trace)}
    kernel = DrivenKernel(f"wk-steps-{kind}", env, scratch / "cwd", scratch / "kernel.log")
    sent: list[tuple[float, float, float]] = []  # (send, reply received, idle received)
    try:
        kernel.start()
        for _ in range(30):
            kernel.run_cell("1+1")
        for _ in range(cells):
            t0 = time.monotonic()
            r = kernel.run_cell("1+1")
            sent.append((t0, t0 + r["reply_s"], t0 + r["idle_s"]))
    finally:
        kernel.shutdown()
    stamps = [json.loads(line) for line in trace.read_text().splitlines()]
    steps: dict[str, list[float]] = {}
    for t0, t_reply, t_idle in sent:
        mine = [s for s in stamps if t0 <= s[1] <= t_idle]
        points = [("client sends", t0)]
        for label in STEPS:
            found = next((s[1] for s in mine if s[0] == label), None)
            if found is not None:
                points.append((label, found))
        points.append(("client has the reply", t_reply))
        for (a, ta), (b, tb) in zip(points, points[1:]):
            steps.setdefault(f"{a} -> {b}", []).append((tb - ta) * 1000)
        steps.setdefault("request -> reply", []).append((t_reply - t0) * 1000)
    return {name: statistics.median(values) for name, values in steps.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cells", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wk-cell-steps-"))
    try:
        make_specs(base)
        os.environ["JUPYTER_PATH"] = str(base) + os.pathsep + os.environ.get("JUPYTER_PATH", "")
        per: dict[str, list[dict[str, float]]] = {"wasm": [], "native": []}
        for rnd in range(args.rounds):
            for kind in (("wasm", "native") if rnd % 2 == 0 else ("native", "wasm")):
                per[kind].append(one(kind, base, rnd, args.cells))
        for kind, rounds in per.items():
            print(f"{kind}: ms, median over {len(rounds)} rounds of each round's median over {args.cells} cells")
            for name in rounds[0]:
                print(f"  {statistics.median(r.get(name, float('nan')) for r in rounds):7.3f}  {name}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
