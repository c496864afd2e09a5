"""The short form of the stop storm (benchmarks/stop_storm.py runs 10,000 stops): a
few hundred hard stops at random moments, in sandboxes through the library API and in
two real kernels (one rolling every interrupt back, one with soft interrupts), across
a numpy C loop, memory.copy, WASI calls, each host door, output floods and a guest
waiting in a host call. No process may die, every stop must roll the cell back
exactly (the canary the last good cell left, the files reported, the disk count), the
next cell must run, and every workload must have been stopped at least once."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.paths import BENCHMARKS
from wasm_kernel.host import thread_stop

sys.path.insert(0, str(BENCHMARKS))

import stop_storm  # noqa: E402

pytestmark = [
    pytest.mark.slow,  # about a minute on two cores
    pytest.mark.skipif(thread_stop.unavailable_reason() is not None,
                       reason=f"no stops by trap here: {thread_stop.unavailable_reason()}"),
]

STOPS = 240


def test_hard_stops_across_workloads_roll_back_exactly(tmp_path: Path) -> None:
    result = stop_storm.run(STOPS, workers=1, sandboxes=2, kernels=2, base=tmp_path, progress=False)
    report = "\n".join(stop_storm.summary_lines(result))
    assert result["stops"] == STOPS, report
    assert result["failures"] == {name: 0 for name in stop_storm.FAILURES}, report
    assert result["unreached_workloads"] == [], report
    assert all(w["stops"] > 0 for w in result["workloads"].values()), report
    assert result["pass"], report
