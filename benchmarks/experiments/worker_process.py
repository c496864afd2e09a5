"""Issue 27's phase (b), measured before it is built: what running the guest in a worker
process that the kernel supervises (hard stops by killing it) would cost, against
what it would save (the epochs' share of pure-Python time, control_engines.py).

    .venv/bin/python benchmarks/experiments/worker_process.py [--cells 300] [--json out.json]

Per cell, paid by every cell: the same sandbox in this process and in a worker
process behind a pipe (a request and a reply per cell, each output line a message
as the kernel would need it), back to back, alternating: `1+1`, and a cell that
prints 200 lines one by one with a flush each (200 output messages).

Per hard stop, paid only when a cell must be killed (an interrupt of compiled code
that outlasts its grace, a deadline, the CPU budget):
- kill: SIGKILL of a worker busy in a C loop until it is reaped;
- a new worker: process spawn, sandbox from the warm image, first `1+1`; a spare
  started ahead of time leaves only the last step;
- the state back: today's resume of a saved state (a fresh interpreter's and one
  holding a 100 MB array), through the hibernation file format: an upper bound for
  a checkpoint kept in memory shared with the supervisor (no HMAC, no file);
- and today's in-process hard stop for comparison: a C loop stopped by the CPU
  budget and rolled back.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from _common import quiet_policy  # noqa: E402

PRINT_200 = "import sys\nfor i in range(200):\n    print(i, flush=True)"
C_LOOP = "sum(range(10**15))"


def worker(conn: Any, workspace: str) -> None:
    """The worker: one sandbox; ("exec", code) -> ("out", name, text)* then ("done", ok)."""
    from wasm_kernel import create_sandbox

    sb = create_sandbox(workspace=Path(workspace), policy=quiet_policy())
    conn.send(("ready", os.getpid()))
    while True:
        msg = conn.recv()
        if msg[0] == "exec":
            r = sb.execute(msg[1], on_output=lambda name, text: conn.send(("out", name, text)))
            conn.send(("done", r.success))
        elif msg[0] == "stop":
            sb.close()
            conn.send(("stopped",))
            return


class Worker:
    def __init__(self, workspace: Path) -> None:
        ctx = mp.get_context("spawn")  # never fork a process that runs wasmtime threads
        self.conn, theirs = ctx.Pipe()
        self.proc = ctx.Process(target=worker, args=(theirs, str(workspace)), daemon=True)
        self.proc.start()

    def ready(self) -> None:
        assert self.conn.recv()[0] == "ready"

    def execute(self, code: str) -> list[str]:
        self.conn.send(("exec", code))
        out = []
        while True:
            msg = self.conn.recv()
            if msg[0] == "out":
                out.append(msg[2])
            else:
                assert msg == ("done", True), msg
                return out

    def stop(self) -> None:
        self.conn.send(("stop",))
        self.conn.recv()
        self.proc.join()


def per_cell(n: int) -> dict[str, Any]:
    from wasm_kernel import create_sandbox

    folder = Path(tempfile.mkdtemp(prefix="wk-worker-"))
    local = create_sandbox(workspace=folder / "local", policy=quiet_policy())
    remote = Worker(folder / "remote")
    remote.ready()
    printed: list[str] = []
    times: dict[str, dict[str, list[float]]] = {c: {"in-process": [], "worker": []} for c in ("1+1", "print_200")}
    try:
        for cell, code, rounds in (("1+1", "1+1", n), ("print_200", PRINT_200, max(20, n // 10))):
            for _ in range(5):  # warm-up
                local.execute(code)
                remote.execute(code)
            for i in range(rounds):
                for side in (("in-process", "worker") if i % 2 else ("worker", "in-process")):
                    t = time.perf_counter()
                    if side == "worker":
                        remote.execute(code)
                    else:
                        r = local.execute(code, on_output=lambda name, text: printed.append(text))
                        assert r.success
                    times[cell][side].append(time.perf_counter() - t)
    finally:
        local.close()
        remote.stop()
    result = {}
    for cell, sides in times.items():
        med = {side: statistics.median(v) * 1000 for side, v in sides.items()}
        result[cell] = {**{f"{side}_ms": round(v, 3) for side, v in med.items()},
                        "added_ms": round(med["worker"] - med["in-process"], 3),
                        "ratio": round(med["worker"] / med["in-process"], 3)}
        print(f"{cell}: in-process {med['in-process']:.3f} ms, worker {med['worker']:.3f} ms "
              f"(+{med['worker'] - med['in-process']:.3f} ms)", flush=True)
    return result


def hard_stop(rounds: int) -> dict[str, Any]:
    from wasm_kernel import ExecutionPolicy, create_sandbox

    folder = Path(tempfile.mkdtemp(prefix="wk-worker-"))
    kill_s, spawn_s, spare_s = [], [], []
    for i in range(rounds):
        t = time.perf_counter()
        w = Worker(folder / f"w{i}")
        w.ready()
        w.execute("1+1")
        spawn_s.append(time.perf_counter() - t)
        # A spare, started ahead: only its first cell is on the stop's path.
        spare = Worker(folder / f"s{i}")
        spare.ready()
        w.conn.send(("exec", C_LOOP))
        time.sleep(0.3)
        t = time.perf_counter()
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.join()
        kill_s.append(time.perf_counter() - t)
        t = time.perf_counter()
        spare.execute("1+1")
        spare_s.append(time.perf_counter() - t)
        spare.stop()
    # Today's hard stop, in process: the CPU budget ends a C loop, the guest rolls back.
    sb = create_sandbox(workspace=folder / "inproc", policy=ExecutionPolicy(cpu_seconds=0.3))
    rollback_s = []
    try:
        for _ in range(rounds):
            t = time.perf_counter()
            r = sb.execute(C_LOOP)
            assert r.trap == "cpu_time" and r.rolled_back, r.trap
            rollback_s.append(time.perf_counter() - t - 0.3)
    finally:
        sb.close()
    out = {"kill_ms": statistics.median(kill_s) * 1000, "new_worker_to_first_result_ms": statistics.median(spawn_s) * 1000,
           "spare_first_result_ms": statistics.median(spare_s) * 1000,
           "in_process_stop_and_rollback_after_budget_ms": statistics.median(rollback_s) * 1000}
    for k, v in out.items():
        print(f"{k}: {v:.1f}", flush=True)
    return out


def state_back(rounds: int) -> dict[str, Any]:
    """Save a state (hibernation's format) and time a fresh sandbox resuming it."""
    from wasm_kernel import create_sandbox
    from wasm_kernel.runtime.guest_config import GuestOptions
    from wasm_kernel.runtime.hibernation import StateKeeping, load_saved_state

    out: dict[str, Any] = {}
    for name, setup in (("fresh", "x = 1"), ("100MB", "import numpy as np\na = np.ones(100 * 2**20 // 8)")):
        folder = Path(tempfile.mkdtemp(prefix="wk-state-"))
        keeping = StateKeeping(folder=folder / "state", key=b"k" * 32)
        (folder / "state").mkdir(mode=0o700)
        sb = create_sandbox(workspace=folder / "ws", policy=quiet_policy(), guest_options=GuestOptions(keep_state=keeping))
        assert sb.execute(setup).success
        saved = sb.hibernate(1)
        sb.close()
        times = []
        for _ in range(rounds):
            state, notice = load_saved_state(keeping)
            assert state is not None, notice
            t = time.perf_counter()
            sb = create_sandbox(workspace=folder / "ws", policy=quiet_policy(),
                                guest_options=GuestOptions(keep_state=keeping, resume=state))
            assert sb.execute("x" if name == "fresh" else "a.sum()").success
            times.append(time.perf_counter() - t)
            sb.close()
        out[name] = {"state_bytes": saved.size_on_disk, "resume_to_first_result_ms": statistics.median(times) * 1000}
        print(f"state {name}: {out[name]}", flush=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = {"per_cell": per_cell(args.cells), "hard_stop": hard_stop(args.rounds), "state_back": state_back(args.rounds)}
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
