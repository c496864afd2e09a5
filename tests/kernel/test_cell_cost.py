"""What a cell cost (kernel/cell_cost.py), as execute_reply's metadata.sandbox and the
session comm's "cell" event carry it: the memory the cell itself added to the
guest's, and the whole cell's time, host magics included.

Times are only compared with 0 and with each other, never with a number of ms."""

from __future__ import annotations

from typing import Any

import pytest

from support.kernel_client import Execution, RunningKernel
from support.session_panel import Panel

from wasm_kernel.core.policy import ExecutionPolicy
from wasm_kernel.core.result import SandboxResult
from wasm_kernel.kernel.cell_cost import CellCost


def sandbox_cost(run: Execution) -> dict[str, Any]:
    assert run.status == "ok", run.reply
    return run.reply["content"]["metadata"]["sandbox"]


# --- CellCost, without a kernel -------------------------------------------------------


def test_duration_is_the_guest_turns_plus_the_host_magics() -> None:
    cost = CellCost()
    cost.add(SandboxResult(success=True, cpu_ms=1.5, memory_used_bytes=100, duration_ms=2.0))
    cost.add_host(0.5)
    cost.add(SandboxResult(success=True, cpu_ms=0.5, memory_used_bytes=300, duration_ms=1.0))
    meta = cost.reply_metadata(ExecutionPolicy())
    assert meta["duration_ms"] == 503.0 and meta["host_ms"] == 500.0 and meta["cpu_ms"] == 2.0
    assert meta["metering"] == "time" and meta["fuel_used"] is None  # no fuel is counted in time metering


def test_fuel_metering_reports_the_instructions_added_up() -> None:
    cost = CellCost(metering="fuel")
    for fuel in (10, 5):
        cost.add(SandboxResult(success=True, fuel_consumed=fuel, cpu_ms=1.0, metering="fuel", duration_ms=1.0))
    meta = cost.reply_metadata(ExecutionPolicy())
    assert meta["metering"] == "fuel" and meta["fuel_used"] == 15 and meta["cpu_ms"] == 2.0


def test_a_host_magic_only_cell_has_its_host_time_as_its_duration() -> None:
    cost = CellCost()
    cost.add_host(1.4)
    meta = cost.reply_metadata(ExecutionPolicy())
    assert meta["duration_ms"] == meta["host_ms"] == 1400.0
    assert meta["cpu_ms"] == 0 and meta["memory_growth_bytes"] == 0


def test_memory_growth_adds_each_turns_growth_and_peak_stays_the_guests_total() -> None:
    cost = CellCost()
    cost.add(SandboxResult(success=True, memory_used_bytes=80 << 20, memory_growth_bytes=48 << 20))
    # After a restart between turns the memory is smaller again: the peak keeps the
    # largest total, the growth still only what the turns added.
    cost.add(SandboxResult(success=True, memory_used_bytes=40 << 20, memory_growth_bytes=1 << 20))
    meta = cost.reply_metadata(ExecutionPolicy())
    assert meta["memory_peak_bytes"] == 80 << 20 and meta["memory_growth_bytes"] == 49 << 20


# --- through a real kernel ------------------------------------------------------------


@pytest.mark.slow
def test_a_cell_that_allocates_reports_its_memory_growth_and_a_small_cell_none(kernel: RunningKernel) -> None:
    big = sandbox_cost(kernel.execute("x = bytearray(50_000_000)"))
    small = sandbox_cost(kernel.execute("1+1"))
    assert big["memory_growth_bytes"] > 0
    assert big["memory_growth_bytes"] <= big["memory_peak_bytes"]
    # 1+1 fits in memory the interpreter already has (a page at most, never the 50 MB).
    assert small["memory_growth_bytes"] < big["memory_growth_bytes"] // 10
    assert small["memory_peak_bytes"] >= big["memory_peak_bytes"]  # the guest's total, which only grows


def test_a_host_magic_only_cell_reports_its_host_time(kernel: RunningKernel) -> None:
    cost = sandbox_cost(kernel.execute("%files"))
    assert cost["host_ms"] > 0 and cost["duration_ms"] > 0
    assert cost["duration_ms"] == cost["host_ms"]  # no guest turn: all of it is host time
    assert cost["cpu_ms"] == 0 and cost["memory_growth_bytes"] == 0


def test_a_cell_split_around_a_host_magic_counts_both_its_parts(kernel: RunningKernel) -> None:
    cost = sandbox_cost(kernel.execute("a = 1\n%files\nb = a + 1"))
    assert cost["host_ms"] > 0 and cost["cpu_ms"] > 0
    assert cost["duration_ms"] > cost["host_ms"]


def test_a_pure_guest_cell_has_no_host_time(kernel: RunningKernel) -> None:
    cost = sandbox_cost(kernel.execute("sum(range(1000))"))
    assert cost["host_ms"] == 0 and cost["duration_ms"] > 0


@pytest.mark.slow
def test_the_panels_cell_event_carries_the_same_cost_as_the_reply(kernel: RunningKernel) -> None:
    panel = Panel(kernel)
    panel.ask("info")  # the comm is open before the cells
    for code in ("y = bytearray(20_000_000)", "%files"):
        run = kernel.execute(code)
        [event] = [m["content"]["data"] for m in run.outputs
                   if m["msg_type"] == "comm_msg" and m["content"]["comm_id"] == panel.comm_id]
        assert event["event"] == "cell"
        assert event["cost"] == sandbox_cost(run)
        assert {"memory_growth_bytes", "host_ms", "duration_ms", "memory_peak_bytes"} <= set(event["cost"])
