"""The kernel's two meterings over jupyter_client: time (the default: CPU time and the
deadline bound a cell, no fuel is counted) and fuel (the operator's
c.WasmKernel.metering = "fuel": a deterministic instruction budget)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from support.kernel_client import RunningKernel
from support.sandboxes import compiled

pytestmark = pytest.mark.slow  # kernels of their own (the fuel one may compile its module first)

LOOP = "while True:\n    pass"


def table(run) -> str:  # type: ignore[no-untyped-def]
    return "".join(d["data"].get("text/plain", "") for d in run.displays())


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningKernel]:
    k = RunningKernel(tmp_path_factory.mktemp("time") / "jupyter")
    yield k
    k.shutdown()


@pytest.fixture(scope="module")
def fueled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningKernel]:
    compiled("fuel")
    k = RunningKernel(tmp_path_factory.mktemp("fuel") / "jupyter", argv=["--WasmKernel.metering=fuel"])
    yield k
    k.shutdown()


def test_time_metering_is_the_default_and_counts_cpu_time_not_fuel(timed: RunningKernel) -> None:
    run = timed.execute("s = 0\nfor i in range(200_000):\n    s += i\ns")
    assert run.status == "ok", run.reply
    cost = run.reply["content"]["metadata"]["sandbox"]
    assert cost["metering"] == "time" and cost["fuel_used"] is None and cost["cpu_ms"] > 0
    assert cost["limits"]["cpu_seconds"] == 60.0
    limits = table(timed.execute("%limits"))
    assert "metering" in limits and "time" in limits and "cpu" in limits and "fuel" not in limits


def test_a_cell_past_its_cpu_time_stops_in_one_line_and_rolls_back(timed: RunningKernel) -> None:
    assert timed.execute("kept = 'before'\n%limits cpu=0.5s").status == "ok"
    try:
        run = timed.execute("kept = 'changed'\n" + LOOP)
        assert run.status == "error" and run.reply["content"]["ename"] == "CpuTimeExceeded"
        assert run.reply["content"]["evalue"] == (
            "the cell used its 0.5 s of CPU time; variables are as they were before the cell; "
            "raise it with %limits cpu=1s (at most 1 min)")
        assert timed.execute("print(kept)").stream() == "before\n"
    finally:
        timed.execute("%limits cpu=1min")


def test_a_limit_the_metering_does_not_count_is_refused_in_one_line(timed: RunningKernel) -> None:
    run = timed.execute("%limits fuel=1e9")
    assert run.status == "error"
    assert run.reply["content"]["evalue"] == (
        "%limits: fuel is not counted in this kernel (its metering is time); its limit on work is cpu")


def test_fuel_metering_counts_instructions_and_stops_on_its_budget(fueled: RunningKernel) -> None:
    run = fueled.execute("s = 0\nfor i in range(200_000):\n    s += i\ns")
    assert run.status == "ok", run.reply
    cost = run.reply["content"]["metadata"]["sandbox"]
    assert cost["metering"] == "fuel" and cost["fuel_used"] > 0 and cost["cpu_ms"] > 0
    limits = table(fueled.execute("%limits"))
    assert "fuel" in limits and "cpu" not in limits.replace("metering", "")
    assert fueled.execute("%limits fuel=1e8").status == "ok"
    try:
        stopped = fueled.execute(LOOP)
        assert stopped.reply["content"]["ename"] == "FuelExhausted"
        assert stopped.reply["content"]["evalue"].startswith("the cell ran out of fuel (1e8 instructions)")
    finally:
        fueled.execute("%limits fuel=5e11")
    assert fueled.execute("%limits cpu=1s").status == "error"
