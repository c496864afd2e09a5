"""Areas 1 and 6: the `1+1` turn round trip, and what rollback checkpoints cost per cell.

Guest: wall time of `sb.execute("1+1")` from the caller's thread: workspace
snapshot, turn on the guest thread, echo of `2` as a display bundle, workspace diff,
result object. After each good cell the guest thread copies the whole guest memory
into the rollback checkpoint, after the reply; the next cell queues behind it.

Native (in-process): NativeRepl.run("1+1"), i.e. ast.parse + compile + exec + eval +
repr of the result, what any REPL does per cell with no isolation at all.
Native (subprocess): the same mini-REPL in a child process behind a pipe, i.e. the
cheapest process-isolated interpreter (informative row, no target).

Checkpoint overhead = median back-to-back round trip - median round trip with a
20 ms pause before each cell (the pause lets the checkpoint finish off the
critical path), for a fresh guest and for one that imported numpy, pandas and
matplotlib.pyplot; in the default checkpoint mode (incremental: only the pages
written since the last checkpoint are copied, where the kernel supports
userfaultfd write-protect + PAGEMAP_SCAN) and with WASM_KERNEL_FULL_CHECKPOINTS=1
(a full copy of guest memory after every cell).
"""

from __future__ import annotations

import subprocess
import sys
import time

from _common import NativeRepl, Row, check, log, median, p90, quiet_policy, temp_workspace

import workloads

CELL = workloads.LATENCY_CELL
LATENCY_TARGET_MS = 2.0
PAUSE_S = 0.020
BIG_IMPORT = "import numpy, pandas, matplotlib.pyplot"


def guest_round_trips(sb, n: int, pause: float = 0.0) -> list[float]:
    """Milliseconds per sb.execute(CELL), n times, optionally pausing before each."""
    out = []
    for _ in range(n):
        if pause:
            time.sleep(pause)
        t = time.perf_counter()
        r = sb.execute(CELL)
        out.append((time.perf_counter() - t) * 1000)
        if not r.success or not r.outputs or r.outputs[0].data.get("text/plain") != "2":
            raise RuntimeError(f"1+1 gave {r}")
    return out


def native_round_trips(n: int, pause: float = 0.0) -> list[float]:
    repl = NativeRepl()
    for _ in range(50):
        repl.run(CELL)
    out = []
    for _ in range(n):
        if pause:
            time.sleep(pause)
        t = time.perf_counter()
        repl.run(CELL)
        out.append((time.perf_counter() - t) * 1000)
    assert repl.outputs[-1] == "2"
    return out


_PIPE_CHILD = r"""
import ast, sys
ns = {"__name__": "__main__"}
inp, out = sys.stdin.buffer, sys.stdout.buffer
while True:
    header = inp.readline()
    if not header:
        break
    src = inp.read(int(header)).decode()
    tree = ast.parse(src, "<cell>", "exec")
    last = ast.Expression(tree.body.pop().value) if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, "<cell>", "exec"), ns)
    text = ""
    if last is not None:
        v = eval(compile(last, "<cell>", "eval"), ns)
        text = repr(v) if v is not None else ""
    data = text.encode()
    out.write(b"%d\n" % len(data) + data)
    out.flush()
"""


def native_subprocess_round_trips(n: int) -> list[float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PIPE_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert proc.stdin and proc.stdout
    src = CELL.encode()
    msg = b"%d\n" % len(src) + src

    def once() -> bytes:
        proc.stdin.write(msg)
        proc.stdin.flush()
        size = int(proc.stdout.readline())
        return proc.stdout.read(size)

    try:
        for _ in range(50):
            once()
        out = []
        for _ in range(n):
            t = time.perf_counter()
            got = once()
            out.append((time.perf_counter() - t) * 1000)
        assert got == b"2", got
        return out
    finally:
        proc.stdin.close()
        proc.wait(timeout=10)


def run_latency(n: int = 500) -> list[Row]:
    from wasm_kernel import create_sandbox

    log(f"latency: {n} x execute({CELL!r})")
    with temp_workspace() as ws:
        sb = create_sandbox(workspace=ws, policy=quiet_policy())
        try:
            guest_round_trips(sb, 20)  # warm-up
            g = guest_round_trips(sb, n)
            turn = [sb.execute(CELL).duration_ms for _ in range(50)]
        finally:
            sb.close()
    nat = native_round_trips(n)
    pipe = native_subprocess_round_trips(n)
    extra = {"guest_turn_ms_median": median(turn), "samples": n}
    return [
        Row("latency", "1+1 round trip, median", "ms", median(g), median(nat), LATENCY_TARGET_MS,
            note="native = in-process parse/compile/exec/eval/repr", extra=extra),
        Row("latency", "1+1 round trip, p90", "ms", p90(g), p90(nat), LATENCY_TARGET_MS,
            note="native = in-process"),
        Row("latency", "1+1 vs native subprocess over a pipe", "ms", median(g), median(pipe),
            note="informative: the cheapest process-isolated REPL", extra={"native_p90_ms": p90(pipe)}),
    ]


def _checkpoint_pair(sb, label: str, n_b2b: int, n_pause: int, native_ms: float) -> list[Row]:
    guest_round_trips(sb, 10)
    b2b = guest_round_trips(sb, n_b2b)
    paused = guest_round_trips(sb, n_pause, pause=PAUSE_S)
    mem = sb.execute(CELL).memory_used_bytes
    overhead = median(b2b) - median(paused)
    ck = getattr(getattr(sb, "_guest", None), "_checkpoint", None)  # read-only peek, for the record
    extra = {
        "guest_memory_mb": mem / 2**20,
        "b2b_p90_ms": p90(b2b),
        "paused_p90_ms": p90(paused),
        "incremental": getattr(ck, "incremental", None),
        "last_copied_bytes": getattr(ck, "last_copied", None),
    }
    return [
        Row("checkpoint", f"1+1 back-to-back, {label}", "ms", median(b2b), native_ms, extra=extra,
            note=f"guest memory {mem / 2**20:.0f} MiB"),
        Row("checkpoint", f"1+1 after 20 ms pause, {label}", "ms", median(paused), native_ms, extra=extra),
        Row("checkpoint", f"checkpoint overhead per cell, {label}", "ms", overhead, None, extra=extra,
            note="back-to-back minus paused"),
    ]


FULL_ENV = "WASM_KERNEL_FULL_CHECKPOINTS"


def run_checkpoint(n_b2b: int = 200, n_pause: int = 100) -> list[Row]:
    """Both checkpoint modes side by side: the default (incremental, dirty pages only,
    where the kernel allows) and full copies (WASM_KERNEL_FULL_CHECKPOINTS=1, read
    when a sandbox boots)."""
    import os

    from wasm_kernel import create_sandbox

    native_ms = median(native_round_trips(200))
    rows: list[Row] = []
    for mode in ("default", "full"):
        with temp_workspace() as ws:
            saved = os.environ.get(FULL_ENV)
            if mode == "full":
                os.environ[FULL_ENV] = "1"
            try:
                sb = create_sandbox(workspace=ws, policy=quiet_policy())
            finally:
                if saved is None:
                    os.environ.pop(FULL_ENV, None)
                else:
                    os.environ[FULL_ENV] = saved
            tag = "" if mode == "default" else " [full copies]"
            try:
                log(f"checkpoint ({mode}): small (fresh) guest")
                rows += _checkpoint_pair(sb, f"fresh guest{tag}", n_b2b, n_pause, native_ms)
                log(f"checkpoint ({mode}): big guest ({BIG_IMPORT})")
                check(sb.execute(BIG_IMPORT), "big import")
                rows += _checkpoint_pair(sb, f"numpy+pandas+mpl guest{tag}", n_b2b // 2, n_pause // 2, native_ms)
            finally:
                sb.close()
    return rows
