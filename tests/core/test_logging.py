"""SandboxLogger emits execution.start / execution.complete with the figures."""

from pathlib import Path

from structlog.testing import CapturingLogger

import structlog

from wasm_kernel import ExecutionPolicy, SandboxLogger, create_sandbox


def test_execution_events_carry_cpu_time_duration_and_trap(workspace: Path) -> None:
    cap = CapturingLogger()
    logger = SandboxLogger(structlog.wrap_logger(cap, processors=[]))
    sb = create_sandbox(workspace=workspace, policy=ExecutionPolicy(cpu_seconds=0.05), logger=logger)
    try:
        sb.execute("1 + 1")
        sb.execute("while True:\n    pass")
    finally:
        sb.close()
    events = [(c.method_name, c.kwargs["event"], c.kwargs) for c in cap.calls]
    names = [e[1] for e in events]
    assert names == ["execution.start", "execution.complete", "execution.start", "execution.complete"]
    ok, trapped = events[1][2], events[3][2]
    assert ok["success"] is True and ok["cpu_ms"] > 0 and ok["duration_ms"] > 0 and "trap" not in ok
    assert ok["metering"] == "time" and ok["fuel_consumed"] == 0 and events[0][2]["cpu_seconds"] == 0.05
    assert trapped["trap"] == "cpu_time" and trapped["rolled_back"] is True
    assert events[3][0] == "warning"
    assert "session_id" not in events[0][2]


def test_session_id_is_included_when_bound(workspace: Path) -> None:
    cap = CapturingLogger()
    sb = create_sandbox(
        workspace=workspace, logger=SandboxLogger(structlog.wrap_logger(cap, processors=[])), session_id="s-1"
    )
    try:
        r = sb.execute("1")
    finally:
        sb.close()
    assert all(c.kwargs.get("session_id") == "s-1" for c in cap.calls)
    assert r.metadata["session_id"] == "s-1"
