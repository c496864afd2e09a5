"""Independent sandboxes run in parallel threads without touching each other's
limits or interrupts."""

import threading
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox

pytestmark = pytest.mark.slow  # several sandboxes computing for seconds at once

WORK = "s = 0\nfor i in range(1_500_000):\n    s += i\ns"


def test_four_sandboxes_run_at_the_same_time_outside_the_gil(tmp_path: Path) -> None:
    sbs = [make_sandbox(tmp_path / f"ws{i}") for i in range(4)]
    try:
        spans: dict[int, tuple[float, float]] = {}
        results: dict[int, object] = {}

        def run(i: int) -> None:
            start = time.monotonic()
            results[i] = sbs[i].execute(WORK + f"\nprint('sandbox', {i})")
            spans[i] = (start, time.monotonic())

        threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        # Guests run with the GIL released: a pure-Python loop on this thread keeps
        # going while all four compute (with the GIL held it would stall).
        spins = 0
        while any(t.is_alive() for t in threads):
            spins += 1
        for t in threads:
            t.join()
        for i in range(4):
            r = results[i]
            assert r.success and r.stdout == f"sandbox {i}\n"  # type: ignore[attr-defined]
        # All four were running at one moment: nothing serialises them.
        assert max(s for s, _ in spans.values()) < min(e for _, e in spans.values())
        assert spins > 100_000, spins
    finally:
        for sb in sbs:
            sb.close()


def test_limits_and_interrupts_stay_with_their_own_sandbox(tmp_path: Path) -> None:
    cpu_limited = make_sandbox(tmp_path / "cpu", cpu_seconds=0.2)
    deadline_limited = make_sandbox(tmp_path / "deadline", deadline_seconds=0.5)
    interrupted = make_sandbox(tmp_path / "interrupted")
    free = make_sandbox(tmp_path / "free")
    sbs = [cpu_limited, deadline_limited, interrupted, free]
    results: dict[str, object] = {}
    loop = "while True:\n    pass"
    try:
        def run(name: str, sb: object, code: str) -> None:
            results[name] = sb.execute(code)  # type: ignore[attr-defined]

        jobs = [
            ("cpu", cpu_limited, loop),
            ("deadline", deadline_limited, loop),
            ("interrupted", interrupted, loop),
            ("free", free, "import time\ns = 0\nfor i in range(3_000_000):\n    s += i\nprint(s)"),
        ]
        threads = [threading.Thread(target=run, args=job) for job in jobs]
        for t in threads:
            t.start()
        time.sleep(1.0)
        interrupted.interrupt()
        for t in threads:
            t.join(60)
        assert results["cpu"].trap == "cpu_time"  # type: ignore[attr-defined]
        assert results["deadline"].trap == "deadline"  # type: ignore[attr-defined]
        stopped = results["interrupted"]  # a soft interrupt: the cell's own KeyboardInterrupt
        assert stopped.trap is None and stopped.error.ename == "KeyboardInterrupt"  # type: ignore[attr-defined]
        free_result = results["free"]
        assert free_result.success and free_result.trap is None  # type: ignore[attr-defined]
        assert free_result.stdout == f"{sum(range(3_000_000))}\n"  # type: ignore[attr-defined]
    finally:
        for sb in sbs:
            sb.close()
