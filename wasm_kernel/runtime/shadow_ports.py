"""A guest's parts as its WASI shadows see them (wasi_shadows.ShadowContext): the
instance's memory and original functions, the start's files, the turn's output and
its stops, each read from the part that owns it, so a shadow defined once per start
always sees the current instance and turn."""

from __future__ import annotations

from ..host.guest_memory import GuestMemory
from ..host.wasi_shim import Original
from .disk_quota import DiskQuota
from .fd_ledger import FdLedger
from .guest_instance import GuestInstance
from .guest_streams import GuestStreams
from .notebook_overlay import NotebookOverlay
from .output import TurnOutput
from .start_files import StartFiles
from .turn_stops import TurnStops
from .wasi_shadows import ReaddirListings


class ShadowPorts:
    """A guest's parts as the shadows see them (a ShadowContext): each read goes to the
    part that owns it, so a shadow always sees the current instance, start and turn."""

    def __init__(self, instance: GuestInstance, files: StartFiles, streams: GuestStreams, stops: TurnStops,
                 dev_fd: int) -> None:
        self._instance, self._files, self._streams, self._stops = instance, files, streams, stops
        self.dev_fd = dev_fd
        self.stop_requested = stops.stop_requested
        self.soft_interrupt_raised = stops.soft_interrupt_raised
        self.stop_soon = stops.stop_soon
        self.drain_streams = streams.drain

    @property
    def mem(self) -> GuestMemory:
        return self._instance.mem

    @property
    def originals(self) -> dict[str, Original]:
        return self._instance.originals

    @property
    def quota_scratch(self) -> int:
        return self._instance.scratch.quota

    @property
    def readdir_scratch(self) -> int:
        return self._instance.scratch.readdir

    @property
    def output(self) -> TurnOutput | None:
        return self._streams.output

    @property
    def ledger(self) -> FdLedger:
        return self._files.ledger

    @property
    def overlay(self) -> NotebookOverlay | None:
        return self._files.overlay

    @property
    def quota(self) -> DiskQuota:
        return self._files.quota

    @property
    def listings(self) -> ReaddirListings:
        return self._files.listings


__all__ = ["ShadowPorts"]
