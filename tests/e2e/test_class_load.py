"""The short form of the class benchmark (benchmarks/bench_class.py opens 40
notebooks within a minute): 6 notebooks, each with its data file, opened within 10 s
on a real Jupyter Server with wasm-python and with ipykernel, then 19 more cells on
each kernel at once, and the same 6 opens through the pool (a gateway server, the
router, the manager and a sandbox host on a real Redis). Only correctness is
asserted, never a time: every first cell answered with its own notebook's data, no
kernel died, every later cell ran, the host's heartbeat never lapsed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import bench_class  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def test_a_short_class_opens_answers_and_runs_every_cell_with_no_kernel_lost(tmp_path: Path) -> None:
    short = bench_class.SHORT
    _, raw = bench_class.run_class(notebooks=short["notebooks"], cells=short["cells"], spread_s=short["spread"],
                                   base=tmp_path)
    n = short["notebooks"]
    # ipykernel is the oracle, not under test: its own start can lose a port race
    # (its half-alive kernel, see kernel_app.WasmKernelApp.init_sockets).
    assert raw["ipykernel"]["open"]["answered"] > 0, raw["ipykernel"]["open"]
    for part in ("wasm", "pool"):
        run = raw[part]
        assert run["open"]["failed"] == [], (part, run["open"]["failed"])
        assert run["open"]["answered"] == n, (part, run["open"])
        assert run["died"] == 0, (part, run["deaths"])
    cells = raw["wasm"]["cells"]
    assert cells["failed"] == [] and cells["ran"] == cells["expected"] == n * (short["cells"] - 1), cells
    assert raw["wasm"]["leftover_kernels_killed"] == [], raw["wasm"]["leftover_kernels_killed"]
    assert raw["pool"]["host_kernels"] == n, raw["pool"]
    beat = raw["pool"]["heartbeat"]
    assert beat["samples"] > 0 and beat["oldest_seen_s"] < beat["lapses_after_s"], beat
    assert raw["pass"]
