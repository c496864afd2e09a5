"""One running turn as the host door sees it (Turn): the request it hands over once,
its output, displays and input, its caps and network traffic, the guest's result; and
what the turn sent, as a TurnOutcome's fields. A turn's own, or a kernel subshell's
work inside one (nested_work.py): both are Turns, and the door serves whichever is
current."""

from __future__ import annotations

from typing import Any, NamedTuple

from .child_python import ChildTally
from .guest_config import OnDisplay, OnInput, TurnLimits
from .guest_messages import CellResult, Output, QueryResult
from .network_door import TurnNetwork
from .output import TurnOutput


class Placed(NamedTuple):
    """An answer already in guest memory: host_alloc'd and written between turns,
    handed over as any answer is (the guest frees it once read)."""

    address: int
    size: int



class Turn:
    """What one running turn needs from host functions."""

    def __init__(
        self, output: TurnOutput, on_display: OnDisplay | None, on_input: OnInput | None,
        display_max_bytes: int | None, keep: bool, query: bool = False, request: str | None = None,
        limits: TurnLimits | None = None, children: ChildTally | None = None,
    ) -> None:
        # The guest function this turn calls (guest_request), handed over once;
        # placed in guest memory before the turn starts (HostDoor.place_request).
        self.request: str | Placed | None = request
        self.output = output
        self.on_display = on_display
        self.on_input = on_input
        # keep=False (a kernel): what was handed on to on_display is not held as well.
        self.keep = keep or on_display is None
        self.outputs: list[Output] = []
        self.result: CellResult | None = None
        self.query = query  # a query turn: the one kind that may send a query_result
        self.query_result: QueryResult | None = None
        self.display_left = display_max_bytes
        self.display_truncated = False
        self.net = TurnNetwork()  # the network door's requests (network_door.py)
        self.limits = limits or TurnLimits()
        # The `python` children this turn's cell started, its whole tree counted (a
        # child's turn shares its parent's), and the CPU time they spent.
        self.children = children or ChildTally()
        self.child_cpu_seconds = 0.0


def what_the_turn_sent(turn: Turn) -> dict[str, Any]:
    """A turn's output and door traffic, as TurnOutcome's fields (a turn's, or a
    subshell's work inside one)."""
    output = turn.output
    return {
        "stdout": output.text("stdout"), "stderr": output.text("stderr"),
        "stdout_truncated": output.truncated("stdout"), "stderr_truncated": output.truncated("stderr"),
        "display_truncated": turn.display_truncated, "network_requests": turn.net.requests,
        "network_bytes": turn.net.bytes, "outputs": turn.outputs,
    }


__all__ = ["Placed", "Turn", "what_the_turn_sent"]
