"""Ending a test's own processes (servers, hubs, cullers, pool services) the same way
everywhere: asked first, killed if they do not go, never left running; and how much
memory one of them took over a block of a test."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager


def end_process(proc: subprocess.Popen, grace: float = 10.0) -> None:  # type: ignore[type-arg]
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def _status_kib(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(f"no {field} in /proc/{pid}/status")


class PeakRss:
    """How far a process's resident memory rose above where it started (bytes)."""

    growth = 0


@contextmanager
def peak_rss_growth(pid: int) -> Iterator[PeakRss]:
    """Measure the peak of `pid`'s RSS over the block, less its RSS at the start.

    Linux keeps the peak as VmHWM; writing 5 to /proc/PID/clear_refs resets it to the
    current RSS, so the peak read at the end is this block's own, not the process's
    since it started. The kernel records the peak before every unmap, so memory
    taken and freed again inside the block is counted.
    """
    start = _status_kib(pid, "VmRSS")
    with open(f"/proc/{pid}/clear_refs", "w") as f:
        f.write("5")
    peak = PeakRss()
    yield peak
    peak.growth = max(0, _status_kib(pid, "VmHWM") - start) * 1024
