"""SandboxResult is built from the guest's TurnOutcome by field name, not by hand."""

from __future__ import annotations

from dataclasses import fields

from wasm_kernel.core.result import OUTCOME_FIELDS, SandboxResult
from wasm_kernel.runtime.guest_config import TurnOutcome

# What a result does not carry as it is: the sandbox reads these to build its own.
SANDBOX_READS = {"status", "process_exited", "query_result", "error"}


def test_every_field_of_a_turn_reaches_the_result_or_is_read_by_the_sandbox() -> None:
    outcome_fields = {f.name for f in fields(TurnOutcome)}
    assert outcome_fields - set(OUTCOME_FIELDS) == SANDBOX_READS
    assert set(OUTCOME_FIELDS) <= {f.name for f in fields(SandboxResult)}


def test_a_result_copies_each_value_of_its_turn() -> None:
    values = {"stdout": "out", "stderr": "err", "stdout_truncated": True, "stderr_truncated": True,
              "display_truncated": True, "disk_full": True, "exit_code": 3, "trap": "deadline",
              "rolled_back": True, "restarted": True, "interrupt_grace_expired": True, "fuel_consumed": 7,
              "cpu_ms": 1.5, "memory_used_bytes": 11, "memory_growth_bytes": 5, "duration_ms": 2.5,
              "network_requests": 2, "network_bytes": 9, "outputs": [], "payload": [{"source": "page"}]}
    assert set(values) == set(OUTCOME_FIELDS)
    result = SandboxResult.from_outcome(TurnOutcome(status="trap", **values), success=False, metering="fuel")
    assert {name: getattr(result, name) for name in values} == values
    assert result.metering == "fuel" and not result.success


def test_what_the_sandbox_says_wins_over_the_turn() -> None:
    result = SandboxResult.from_outcome(TurnOutcome(status="ok", stdout="guest"), success=True, stdout="host")
    assert result.stdout == "host"
