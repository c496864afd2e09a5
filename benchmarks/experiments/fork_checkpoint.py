"""Issue 27's phase (b), an alternative measured and rejected: a frozen fork of the
guest's process as the state a hard stop goes back to.

    .venv/bin/python benchmarks/experiments/fork_checkpoint.py [--forks 15] [--big] [--json out.json]

After each cell the guest thread forks its process; the child waits on a pipe with
everything a restore needs already in place (guest memory, WASI descriptors, the
interpreter's host state). A hard stop would kill the busy process and wake the
child. Measured, in one process holding a live sandbox (`--big`: after numpy, pandas
and matplotlib are imported):
- fork(): what the guest thread pays per cell (page tables, write-protecting memory);
- the next `1+1` right after a fork against one without (the copy-on-write faults of
  every page the cell writes);
- wake -> first result: the child, woken, runs `len(x)` on the state it was forked with.
Uses wasm_kernel internals read-only (the guest's thread and its wait_idle()).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common

from _common import quiet_policy  # noqa: E402

from wasm_kernel import create_sandbox  # noqa: E402

med = statistics.median


class _OnThisThread:
    """The child's only thread is the guest thread: calls run where they are made."""

    def call(self, fn: Any, *args: Any) -> Any:
        return fn(*args)

    def submit(self, fn: Any, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        future.set_result(fn(*args))
        return future


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forks", type=int, default=15)
    parser.add_argument("--big", action="store_true")
    parser.add_argument("--json")
    args = parser.parse_args()
    sb = create_sandbox(workspace=Path(tempfile.mkdtemp(prefix="wk-fork-")), policy=quiet_policy())
    guest = sb._guest  # type: ignore[attr-defined]
    sb.execute("x = list(range(10**6))")
    if args.big:
        sb.execute("import numpy, pandas, matplotlib.pyplot")
    for _ in range(20):
        sb.execute("1+1")
    guest.wait_idle()

    def fork_here() -> tuple[int, int, int, float]:
        wake_r, wake_w = os.pipe()
        answer_r, answer_w = os.pipe()
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the frozen copy
            os.close(wake_w)
            os.close(answer_r)
            os.read(wake_r, 1)
            t0 = time.perf_counter()
            guest._thread = _OnThisThread()
            result = sb.execute("len(x)")
            text = result.outputs[0].data.get("text/plain") if result.outputs else None
            os.write(answer_w, json.dumps({"turn_ms": (time.perf_counter() - t0) * 1e3, "out": text}).encode())
            os._exit(0)
        took = time.perf_counter() - start
        os.close(wake_r)
        os.close(answer_w)
        return pid, wake_w, answer_r, took

    forks, after, plain, children = [], [], [], []
    for _ in range(args.forks):
        t = time.perf_counter()
        sb.execute("1+1")
        plain.append(time.perf_counter() - t)
        guest.wait_idle()
        pid, wake_w, answer_r, took = guest._thread.call(fork_here)
        forks.append(took)
        t = time.perf_counter()
        sb.execute("1+1")
        after.append(time.perf_counter() - t)
        guest.wait_idle()
        children.append((pid, wake_w, answer_r))
    for pid, _, _ in children[:-1]:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    pid, wake_w, answer_r = children[-1]
    t = time.perf_counter()
    os.write(wake_w, b"x")
    answer = json.loads(os.read(answer_r, 4096))
    wake = time.perf_counter() - t
    os.waitpid(pid, 0)
    sb.close()
    out = {
        "big": args.big,
        "fork_ms": {"median": round(med(forks) * 1e3, 2), "min": round(min(forks) * 1e3, 2)},
        "one_plus_one_ms": {"after_fork": round(med(after) * 1e3, 2), "without": round(med(plain) * 1e3, 2)},
        "wake_to_first_result_ms": round(wake * 1e3, 1),
        "child_turn_ms": round(answer["turn_ms"], 1),
        "child_answer": answer["out"],
    }
    print(json.dumps(out))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
