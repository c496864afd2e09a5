"""What a cell cost, for execute_reply's content.metadata.sandbox and the session
comm's "cell" event (the same dict).

The lab extension shows it per cell, and nbclient users can assert on it
(`reply["content"]["metadata"]["sandbox"]["cpu_ms"]`). A cell split around host
magics runs several guest turns and host magics:
- metering: "time" or "fuel", what bounded the cell (the kernel's c.WasmKernel.metering);
- cpu_ms: the CPU time the guest turns used, added up;
- fuel_used: the guest turns' fuel (wasm instructions), added up, in fuel metering;
  None in time metering, which counts none;
- memory_peak_bytes: the largest the guest's linear memory reached, i.e. the
  interpreter's whole memory (wasm memory only grows), not this cell's alone;
- memory_growth_bytes: what this cell's guest turns added to that memory (0 for a
  cell that fit in memory the interpreter already had). It is the memory at the
  cell's end minus at its first turn's start, unless the interpreter was restarted
  between two of its turns (exit()): each turn's growth is added, so a restart's
  fresh, smaller memory does not make it negative;
- duration_ms: the cell's whole time, guest turns plus host magics (an input()
  answer the guest waited for is inside its turn, so it counts);
- host_ms: the part of duration_ms spent in host magics (%pip, %files...);
- network_requests, network_bytes: what the cell fetched through the network door.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.policy import ExecutionPolicy
from ..core.result import SandboxResult


@dataclass
class CellCost:
    metering: str = "time"
    fuel_used: int = 0
    cpu_ms: float = 0.0
    memory_peak_bytes: int = 0
    memory_growth_bytes: int = 0
    guest_ms: float = 0.0
    host_ms: float = 0.0
    network_requests: int = 0
    network_bytes: int = 0

    def add(self, result: SandboxResult) -> None:
        """One guest turn of the cell."""
        self.fuel_used += max(0, int(result.fuel_consumed))
        self.cpu_ms += max(0.0, float(result.cpu_ms))
        self.metering = result.metering
        self.memory_peak_bytes = max(self.memory_peak_bytes, int(result.memory_used_bytes))
        self.memory_growth_bytes += max(0, int(result.memory_growth_bytes))
        self.guest_ms += float(result.duration_ms)
        self.network_requests += int(result.network_requests)
        self.network_bytes += int(result.network_bytes)

    def add_host(self, seconds: float) -> None:
        """One host magic of the cell, timed where the kernel ran it (time.perf_counter)."""
        self.host_ms += max(0.0, seconds) * 1000

    @property
    def duration_ms(self) -> float:
        return self.guest_ms + self.host_ms

    def reply_metadata(self, policy: ExecutionPolicy) -> dict[str, Any]:
        return {
            "metering": self.metering,
            "fuel_used": self.fuel_used if self.metering == "fuel" else None,
            "cpu_ms": round(self.cpu_ms, 3),
            "memory_peak_bytes": self.memory_peak_bytes,
            "memory_growth_bytes": self.memory_growth_bytes,
            "duration_ms": round(self.duration_ms, 3),
            "host_ms": round(self.host_ms, 3),
            "network_requests": self.network_requests,
            "network_bytes": self.network_bytes,
            "limits": limits_metadata(policy),
        }


def limits_metadata(policy: ExecutionPolicy) -> dict[str, Any]:
    """The limits the cell ran under (None: off), named as %limits names them."""
    return {
        "fuel": policy.fuel_budget,
        "cpu_seconds": policy.cpu_seconds,
        "memory_bytes": policy.memory_bytes,
        "deadline_seconds": policy.deadline_seconds,
        "stdout_bytes": policy.stdout_max_bytes,
        "stderr_bytes": policy.stderr_max_bytes,
        "display_bytes": policy.display_max_bytes,
        "disk_bytes": policy.disk_max_bytes,
        "disk_files": policy.disk_max_files,
    }
