"""Where a kernel start's time goes: a diagnostic, not part of run_all.py.

    .venv/bin/python benchmarks/experiments/diag_kernel_start.py [--rounds 5] [--reopen]

Starts wasm-python and native ipykernel through temporary kernelspecs whose launcher
is kernel_start_trace.py: the same kernels, with timers around the start-up phases
(imports, app.initialize, the kernel's __init__ with its registry bind and history
open, the background sandbox thread with the compiled-guest load, the guest boot
and the first checkpoint, kernel_info, the first cell). The driver does what
bench_kernel.py does (kernel_info, then `1+1`) and prints, per phase, the median
time since `start_kernel()` over the rounds (alternating the kernels). Each wasm
start gets a fresh JUPYTER_DATA_DIR unless --reopen (then one data dir and one
notebook identity for all rounds).

Uses wasm_kernel internals read-only (it wraps methods with timers and never changes
their behaviour), so it may need updating when those internals change.
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
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, bench_kernel

from bench_kernel import REOPEN_NOTEBOOK, DrivenKernel, kernel_env  # noqa: E402
from _common import log  # noqa: E402

HERE = Path(__file__).resolve().parent


def make_specs(base: Path) -> None:
    for kind in ("wasm", "native"):
        d = base / "kernels" / f"wk-trace-{kind}"
        d.mkdir(parents=True)
        spec = {
            "argv": [sys.executable, str(HERE / "kernel_start_trace.py"), kind, "-f", "{connection_file}"],
            "display_name": f"trace {kind}",
            "language": "python",
        }
        if kind == "wasm":
            spec["interrupt_mode"] = "signal"
        (d / "kernel.json").write_text(json.dumps(spec))


def one(kind: str, base: Path, rnd: int, reopen: bool, bytecode: bool) -> list[tuple[str, float, str]]:
    scratch = base / f"r{rnd}-{kind}"
    scratch.mkdir(parents=True)
    trace = scratch / "trace.jsonl"
    data = base / "reopen-data" if (reopen and kind == "wasm") else scratch / "data"
    env = kernel_env(base, bytecode)
    env.update(JUPYTER_DATA_DIR=str(data), WK_TRACE_FILE=str(trace))
    if reopen and kind == "wasm":
        env["JPY_SESSION_NAME"] = REOPEN_NOTEBOOK
    k = DrivenKernel(f"wk-trace-{kind}", env, scratch, scratch / "kernel.log")
    t0 = time.time()
    try:
        times = k.start()
    finally:
        k.shutdown()
    marks = [(label, t - t0, thread) for label, t, thread in map(json.loads, trace.read_text().splitlines())]
    marks.append(("CLIENT: Popen returned", times["launched_s"], "client"))
    marks.append(("CLIENT: kernel_info_reply received", times["kernel_info_s"], "client"))
    marks.append(("CLIENT: first 1+1 execute_reply received", times["first_result_s"], "client"))
    return marks


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reopen", action="store_true", help="wasm: same data dir and notebook identity every round")
    ap.add_argument("--no-pyc", action="store_true", help="keep this environment's bytecode settings (see bench_kernel.py)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wk-diag-start-"))
    os.environ["JUPYTER_PATH"] = str(base) + os.pathsep + os.environ.get("JUPYTER_PATH", "")
    make_specs(base)
    log(f"load {os.getloadavg()}")
    per: dict[str, dict[str, list[float]]] = {"wasm": defaultdict(list), "native": defaultdict(list)}
    order_of: dict[str, dict[str, float]] = {"wasm": {}, "native": {}}
    try:
        for rnd in range(args.rounds + 1):  # round 0: warm-up
            for kind in (("native", "wasm") if rnd % 2 == 0 else ("wasm", "native")):
                marks = one(kind, base, rnd, args.reopen, not args.no_pyc)
                if rnd == 0:
                    continue
                seen: dict[str, int] = defaultdict(int)
                for label, t, thread in marks:
                    seen[label] += 1
                    key = label if seen[label] == 1 else f"{label} #{seen[label]}"
                    if seen[label] > 2:
                        continue
                    per[kind][key].append(t)
                    order_of[kind].setdefault(key, t)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    log(f"load {os.getloadavg()}")
    for kind in ("native", "wasm"):
        print(f"\n{kind}: ms since start_kernel(), median (min-max) over {args.rounds} starts"
              + (" [wasm: reopened notebook]" if args.reopen and kind == "wasm" else ""))
        med = {k: statistics.median(v) for k, v in per[kind].items()}
        for key in sorted(med, key=lambda k: med[k]):
            v = per[kind][key]
            print(f"  {med[key] * 1000:8.1f}  ({min(v) * 1000:6.1f}-{max(v) * 1000:6.1f})  {key}")
        spans: dict[str, list[float]] = {}
        for key in per[kind]:
            if key.endswith(": enter"):
                stem = key[: -len(": enter")]
                if stem + ": exit" in per[kind]:
                    a, b = per[kind][key], per[kind][stem + ": exit"]
                    spans[stem] = [y - x for x, y in zip(a, b)]
        print("  durations (median ms):")
        for stem, v in sorted(spans.items(), key=lambda kv: -statistics.median(kv[1])):
            print(f"    {statistics.median(v) * 1000:8.1f}  {stem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
