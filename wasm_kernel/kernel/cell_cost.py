"""What a cell cost, for execute_reply's content.metadata.sandbox.

The lab extension shows it per cell, and nbclient users can assert on it
(`reply["content"]["metadata"]["sandbox"]["fuel_used"]`). A cell split around host
magics runs several guest turns: their fuel and time add up, and the memory figure
is the largest the guest's linear memory reached (wasm memory only grows, so it is
also the interpreter's high-water mark so far, not this cell's alone).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.policy import ExecutionPolicy
from ..core.result import SandboxResult


@dataclass
class CellCost:
    fuel_used: int = 0
    memory_peak_bytes: int = 0
    duration_ms: float = 0.0

    def add(self, result: SandboxResult) -> None:
        self.fuel_used += max(0, int(result.fuel_consumed))
        self.memory_peak_bytes = max(self.memory_peak_bytes, int(result.memory_used_bytes))
        self.duration_ms += float(result.duration_ms)

    def reply_metadata(self, policy: ExecutionPolicy) -> dict[str, Any]:
        return {
            "fuel_used": self.fuel_used,
            "memory_peak_bytes": self.memory_peak_bytes,
            "duration_ms": round(self.duration_ms, 3),
            "limits": limits_metadata(policy),
        }


def limits_metadata(policy: ExecutionPolicy) -> dict[str, Any]:
    """The limits the cell ran under (None: off), named as %limits names them."""
    return {
        "fuel": policy.fuel_budget,
        "memory_bytes": policy.memory_bytes,
        "deadline_seconds": policy.deadline_seconds,
        "stdout_bytes": policy.stdout_max_bytes,
        "stderr_bytes": policy.stderr_max_bytes,
        "display_bytes": policy.display_max_bytes,
        "disk_bytes": policy.disk_max_bytes,
        "disk_files": policy.disk_max_files,
    }
