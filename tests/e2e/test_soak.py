"""The short form of the soak (benchmarks/bench_soak.py runs 8 kernels x 1,000
cells): 2 real kernels x 300 mixed cells at once; the kernel processes' memory,
descriptors and threads must not grow after warm-up, wasmtime's blocking pool
stays bounded, and nothing is left behind."""

from __future__ import annotations

import sys
from pathlib import Path

from support.paths import BENCHMARKS

sys.path.insert(0, str(BENCHMARKS))

import bench_soak  # noqa: E402


def test_two_kernels_running_300_mixed_cells_do_not_grow_or_leave_folders(tmp_path: Path) -> None:
    result = bench_soak.run(2, 300, base=tmp_path, progress=False)
    assert result["failed_cells"] == 0, result["failures"]
    assert result["worst_rss_growth"] < bench_soak.RSS_GROWTH_MAX, result
    assert max(result["fd_growth"]) <= 0, result
    assert max(result["thread_growth"]) <= 0, result
    assert max(result["pool_threads_max"]) <= bench_soak.POOL_THREADS_MAX, result
    assert result["leftover_folders"] == [], result
    assert result["pass"]
