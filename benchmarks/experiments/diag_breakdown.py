"""Where a sandbox's time goes: a diagnostic, not part of run_all.py.

    .venv/bin/python benchmarks/experiments/diag_breakdown.py

Uses wasm_kernel internals read-only (it wraps a few methods with timers and never
changes their behaviour), so it may need updating when those internals change:
- create_sandbox(): the whole call vs the boot checkpoint (a full copy) inside it;
- the `1+1` turn, back to back and after a pause, split into: caller -> guest thread
  (workspace snapshot, queueing behind the previous checkpoint), the wasm turn
  (with its host calls), and guest thread -> caller (result, diff);
- MemoryCheckpoint.take for a fresh guest and after numpy+pandas+matplotlib (run it
  with WASM_KERNEL_FULL_CHECKPOINTS=1 for the full-copy mode);
- the cost of one wasmtime-py call into the guest (host_alloc of 8 bytes).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: _common, bench_kernel

from wasm_kernel import create_sandbox  # noqa: E402
from wasm_kernel.host.memory_checkpoint import MemoryCheckpoint  # noqa: E402

ms = 1000.0
med = statistics.median


def main() -> None:
    ws = Path(tempfile.mkdtemp(prefix="wk-diag-"))
    first = create_sandbox(workspace=ws)

    takes: list[float] = []
    real_take = MemoryCheckpoint.take

    def timed_take(self, *a, **kw):  # noqa: ANN001
        t = time.perf_counter()
        real_take(self, *a, **kw)
        takes.append(time.perf_counter() - t)

    MemoryCheckpoint.take = timed_take  # type: ignore[method-assign]

    creates, boots, inside = [], [], []
    for _ in range(6):
        t = time.perf_counter()
        sb = create_sandbox(workspace=ws)
        creates.append(time.perf_counter() - t)
        n = len(takes)
        sb._guest.wait_idle()  # the boot checkpoint may run after create returns
        boots.append(takes[-1] if takes else float("nan"))
        inside.append(n > 0 and len(takes) == n)
        del takes[:]
        sb.close()
    size = first._guest.checkpoints.checkpoint.size  # bytes the boot checkpoint copied
    where = "inside create_sandbox()" if all(inside) else "after create_sandbox() returned (background)"
    print(f"create_sandbox (warm): {med(creates) * ms:.1f} ms; the boot checkpoint (a full copy of "
          f"{size / 2**20:.0f} MiB of guest memory) took {med(boots) * ms:.1f} ms, {where}")

    g = first._guest
    marks: dict[str, float] = {}
    real_turn, real_answer = g._turn_export, g._answer

    def turn(*a):  # noqa: ANN001
        marks["turn_in"] = time.perf_counter()
        r = real_turn(*a)
        marks["turn_out"] = time.perf_counter()
        return r

    calls: list[float] = []

    def answer(raw):  # noqa: ANN001
        t = time.perf_counter()
        r = real_answer(raw)
        calls.append(time.perf_counter() - t)
        return r

    g._turn_export, g._answer = turn, answer
    for _ in range(20):
        first.execute("1+1")
    for label, pause in (("back-to-back", 0.0), ("after 30 ms pause", 0.03)):
        parts = []
        for _ in range(100):
            if pause:
                time.sleep(pause)
            t0 = time.perf_counter()
            r = first.execute("1+1")
            t1 = time.perf_counter()
            parts.append((marks["turn_in"] - t0, marks["turn_out"] - marks["turn_in"], t1 - marks["turn_out"], t1 - t0,
                          r.duration_ms / ms))
        a, b, c, tot, dur = (med(x) * ms for x in zip(*parts))
        print(f"1+1 {label}: total {tot:.2f} ms = to guest turn {a:.2f} + wasm turn {b:.2f} + back to caller {c:.2f} "
              f"(duration_ms {dur:.2f})")
    print(f"host calls per 1+1 turn: {len(calls) / 220:.0f}, median {med(calls) * ms:.3f} ms of host Python each")
    ck = g.checkpoints.checkpoint
    mode = "incremental" if getattr(ck, "incremental", False) else "full copies"
    print(f"MemoryCheckpoint.take ({mode}), fresh guest ({size / 2**20:.0f} MiB): {med(takes[-50:]) * ms:.2f} ms, "
          f"copied {getattr(ck, 'last_copied', size) / 2**10:.0f} KiB")
    r = first.execute("import numpy, pandas, matplotlib.pyplot")
    big = r.memory_used_bytes
    for _ in range(30):
        time.sleep(0.05)
        first.execute("1+1")
    print(f"MemoryCheckpoint.take ({mode}), after numpy+pandas+matplotlib ({big / 2**20:.0f} MiB): "
          f"{med(takes[-30:]) * ms:.2f} ms, copied {getattr(ck, 'last_copied', big) / 2**10:.0f} KiB")

    store = g.instance.store

    def allocs_on_guest_thread() -> list[float]:
        out = []
        for _ in range(200):
            t = time.perf_counter()
            g.instance.alloc(store, 8)
            out.append(time.perf_counter() - t)
        return out

    xs = g._thread.call(allocs_on_guest_thread)
    print(f"one wasmtime-py call into the guest (host_alloc(8)): {med(xs) * 1e6:.0f} us")
    first.close()


if __name__ == "__main__":
    main()
