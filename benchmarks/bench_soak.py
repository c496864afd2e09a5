"""Soak: many kernels, many cells; the host process must not grow.

    .venv/bin/python benchmarks/run_all.py --only soak [--kernels 8] [--soak-cells 1000] [--json out.json]
    (or: benchmarks/run_all.py --only soak)

Each kernel is a real `python -m wasm_kernel` process driven over jupyter_client,
all at once, running a mix of cells: prints, numpy, file writes, displays, errors,
interrupts of a sleeping cell, %undo, %files and variable churn. The kernel
process's RSS, open descriptors and threads are read from /proc after a warm-up
(the first fifth of the cells) and at the end, and descriptors and threads every
ten cells. Passing means: RSS grew by less than 5 %, the last fifth's fewest
descriptors and threads are no more than the first fifth's most (a leak raises
every later sample; a thread that comes and goes raises only some), wasmtime's
blocking pool (threads named tokio-rt-worker, which the runtime starts on demand
and retires after 10 s idle) never holds more than 16 threads, every cell did what
it should, and no private folder is left after shutdown (the kernels get a TMPDIR
of their own, so that is checked exactly).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.kernel_client import RunningKernel  # noqa: E402

RSS_GROWTH_MAX = 0.05
# The guest has one thread, so the WASI blocking pool needs a few threads at most;
# a leak of one per cell or per interrupt would pass this within the first hundred.
POOL_THREADS_MAX = 16
POOL_THREAD_NAME = "tokio-rt-worker"


def _cell(i: int) -> tuple[str, str]:
    """(kind, code) of cell i."""
    kind = ["print", "numpy", "write", "display", "interrupt", "assign", "undo", "error", "churn", "files"][i % 10]
    code = {
        "print": f"for k in range({i % 300}):\n    print('line', k)",
        "numpy": "import numpy as np\na = np.random.rand(200, 200)\nfloat((a @ a).sum())",
        "write": f"open('soak-{i % 20}.txt', 'w').write('x' * {i * 37 % 50_000})",
        "display": f"from IPython.display import HTML, display\ndisplay(HTML('<b>{i}</b>'))",
        "interrupt": "import time\ntime.sleep(5)",
        "assign": f"undone = {i}",
        "undo": "%undo",
        "error": "1 / 0",
        "churn": "x = [str(k) for k in range(20_000)]\ndel x",
        "files": "%files",
    }[kind]
    return kind, code


def _proc_stats(pid: int) -> dict[str, int]:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    names = [_thread_name(pid, t) for t in os.listdir(f"/proc/{pid}/task")]
    pool = names.count(POOL_THREAD_NAME)
    return {
        "rss_kib": int(fields["VmRSS"].split()[0]),
        "threads": len(names) - pool,
        "pool_threads": pool,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


def _thread_name(pid: int, tid: str) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
    except OSError:  # the thread ended between the listing and the read
        return ""


def _drive(kernel: RunningKernel, cells: int, out: dict[str, Any]) -> None:
    """Run the cells; sample the process every 10 cells. Threads come and go (an
    interrupt's helper, the input thread), so the first fifth's highest count is
    compared with the last fifth's lowest; the blocking pool is bounded instead."""
    pid = kernel.km.provisioner.process.pid
    warm_at = max(1, cells // 5)
    kinds: dict[str, int] = {}
    failures: list[str] = []
    samples: list[tuple[int, dict[str, int]]] = []
    for i in range(cells):
        kind, code = _cell(i)
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind == "interrupt":
            run = kernel.interrupt_once_running(code, 0.1)
            if run.reply["content"].get("ename") != "KeyboardInterrupt":
                failures.append(f"cell {i}: not interrupted: {run.reply['content'].get('ename')}")
        else:
            run = kernel.execute(code, timeout=120)
            if (run.status == "ok") == (kind == "error"):
                failures.append(f"cell {i} ({kind}): {run.status} {run.reply['content'].get('evalue', '')[:80]}")
        if i % 10 == 9 or i + 1 in (warm_at, cells):
            samples.append((i + 1, _proc_stats(pid)))
        if i + 1 == warm_at:
            out["warm"] = _proc_stats(pid)
    out["end"] = _proc_stats(pid)
    first = [st for n, st in samples if n <= warm_at]
    last = [st for n, st in samples if n > cells - warm_at]
    for key in ("threads", "fds"):
        out[f"{key}_warm_max"] = max(st[key] for st in first)
        out[f"{key}_end_min"] = min(st[key] for st in last)
        out[f"{key}_end_max"] = max(st[key] for st in last)
    out["pool_threads_max"] = max(st["pool_threads"] for _, st in samples)
    out["kinds"] = kinds
    out["failures"] = failures[:10]
    out["failed_cells"] = len(failures)


def run(kernels: int, cells: int, base: Path | None = None, progress: bool = True) -> dict[str, Any]:
    base = base or Path(tempfile.mkdtemp(prefix="wk-soak-"))
    tmp = base / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    running = [RunningKernel(base / f"jupyter-{k}", env={"TMPDIR": str(tmp)}) for k in range(kernels)]
    results: list[dict[str, Any]] = [{} for _ in running]
    threads = [threading.Thread(target=_drive, args=(k, cells, r)) for k, r in zip(running, results)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        time.sleep(5)
        if progress:
            print(f"soak: {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    for k in running:
        k.shutdown()
    shutdown_s = time.perf_counter() - t0
    parent = tmp / f"wasm-kernel-{os.getuid()}"
    left = sorted(os.listdir(parent)) if parent.exists() else []
    per_kernel = []
    for r in results:
        warm, end = r["warm"], r["end"]
        per_kernel.append({
            **r,
            "rss_growth": round(end["rss_kib"] / warm["rss_kib"] - 1, 4),
            # A leak raises every later sample; a thread that comes and goes (the
            # runtime's blocking pool, an interrupt's helper) raises a few.
            "fd_growth": r["fds_end_min"] - r["fds_warm_max"],
            "thread_growth": r["threads_end_min"] - r["threads_warm_max"],
            "thread_spread_end": [r["threads_end_min"], r["threads_end_max"]],
        })
    worst = max(p["rss_growth"] for p in per_kernel)
    ok = (worst < RSS_GROWTH_MAX and all(p["fd_growth"] <= 0 and p["thread_growth"] <= 0 for p in per_kernel)
          and all(p["pool_threads_max"] <= POOL_THREADS_MAX for p in per_kernel)
          and not left and not any(p["failed_cells"] for p in per_kernel))
    return {
        "kernels": kernels,
        "cells_per_kernel": cells,
        "seconds": round(time.perf_counter() - started, 1),
        "shutdown_seconds_all": round(shutdown_s, 2),
        "worst_rss_growth": worst,
        "rss_mib_end": [round(p["end"]["rss_kib"] / 1024) for p in per_kernel],
        "fd_growth": [p["fd_growth"] for p in per_kernel],
        "thread_growth": [p["thread_growth"] for p in per_kernel],
        "threads_end_min_max": [p["thread_spread_end"] for p in per_kernel],
        "pool_threads_max": [p["pool_threads_max"] for p in per_kernel],
        "leftover_folders": left,
        "failed_cells": sum(p["failed_cells"] for p in per_kernel),
        "failures": [f for p in per_kernel for f in p["failures"]][:10],
        "kinds": per_kernel[0]["kinds"],
        "pass": ok,
    }
