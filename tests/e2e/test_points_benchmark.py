"""The short form of the points benchmark (benchmarks/bench_points.py, run_all.py
--only points): every figure is measured and is a number, so the full run works when
it is wanted. No time is asserted."""

from __future__ import annotations

import math
import sys

from support.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import bench_points  # noqa: E402


def test_the_points_benchmark_measures_every_figure_in_its_short_form() -> None:
    rows, raw = bench_points.run_points(cells=4, rounds=1, big=64, notebook=6)
    assert len(rows) == 10, [r.name for r in rows]
    assert all(r.guest is not None and math.isfinite(r.guest) and r.guest > 0 for r in rows), rows
    assert raw["notebook"]["bytes"] > 0 and set(raw) == {"cost", "rewind_50", "rewind_64", "notebook"}
