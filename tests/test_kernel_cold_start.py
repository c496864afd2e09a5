"""A kernel started on a machine whose guest is not compiled yet: kernel_info
answers at once, and the first cell shows the compile's progress, not silence."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from kernel_client import RunningKernel


@pytest.mark.slow
def test_first_start_on_a_cold_cache_shows_compile_progress(tmp_path: Path) -> None:
    started = time.monotonic()
    k = RunningKernel(tmp_path / "data", env={"WASM_KERNEL_CACHE_DIR": str(tmp_path / "empty-cache")})
    try:
        ready_after = time.monotonic() - started
        assert ready_after < 30, f"kernel_info took {ready_after:.0f} s: it must not wait for the compile"
        run = k.execute("1 + 1", timeout=600)
        assert run.status == "ok"
        progress = run.stream("stderr")
        assert "Compiling the Python guest" in progress
        assert "%" in progress
        assert run.of_type("execute_result")[0]["data"]["text/plain"] == "2"
        assert any((tmp_path / "empty-cache").rglob("*.cwasm"))  # and it was cached for next time
    finally:
        k.shutdown()
