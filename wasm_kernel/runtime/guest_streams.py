"""Where a guest's stdout and stderr go while a turn runs: the turn's output (output.py)
and the stream ring the guest writes into (stream_ring.py), handed over by whichever
thread holds the host's attention (the guest's, or the ticker's on an engine without
epochs). One object, given to the stops, the door and the WASI shadows, so all three
hand over to the same turn's output under the same lock.
"""

from __future__ import annotations

import threading

from ..host.guest_memory import GuestFault
from ..host.log import get_logger
from .output import TurnOutput
from .stream_ring import StreamRing

log = get_logger("wasm_kernel.runtime")


class GuestStreams:
    """The running turn's output and the guest's ring."""

    def __init__(self) -> None:
        self.output: TurnOutput | None = None  # the running turn's, else None
        self.ring: StreamRing | None = None  # registered by the guest as it boots or starts
        # Guest memory read off the guest thread is read under this lock, which a stop
        # by trap takes before it makes the memory inaccessible (turn_stops.py).
        self.io_lock = threading.RLock()

    def drain(self) -> None:
        """Hand what the guest's streams left in its ring to this turn's output."""
        ring, output = self.ring, self.output
        if ring is None or output is None:
            return
        with self.io_lock:  # the ticker's thread drains too, on an engine without epochs
            try:
                ring.drain(output.write)
            except GuestFault as err:  # the guest broke its own ring: streams go through fd_write
                log.warning("guest.stream_ring_fault", error=str(err))
                self.ring = None

    def reset(self) -> None:
        """A new start: the guest registers its ring again as it boots or starts."""
        self.output = None
        self.ring = None


__all__ = ["GuestStreams"]
