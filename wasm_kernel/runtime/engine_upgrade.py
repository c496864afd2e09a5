"""The move between a guest's engines: a guest started
on the baseline engine (a machine's first start, before the optimized module is
compiled) moves to the optimized one between turns, as soon as it is ready.
A guest holds one EngineUpgrade, asked before each turn."""

from __future__ import annotations

from ..host.engine import get_engine
from ..host.log import get_logger
from ..host.module_cache import is_guest_cached, load_guest_module
from .checkpoints import Checkpoints
from .fd_ledger import FdLedger
from .guest_config import GuestEngine
from .guest_instance import GuestInstance
from .guest_layout import GuestLayout
from .start_files import StartFiles

log = get_logger("wasm_kernel.runtime")

MOVED_NO_UNDO = "the interpreter moved to the optimized compiler after the last cell (undo starts again with the next)"


class EngineUpgrade:
    """Moves one guest to the optimized engine once it is compiled."""

    def __init__(self, instance: GuestInstance, checkpoints: Checkpoints, files: StartFiles, layout: GuestLayout,
                 *, image_build: bool) -> None:
        self._instance = instance
        self._checkpoints = checkpoints
        self._files = files
        self._layout = layout
        self._image_build = image_build  # an image is built on the engine it was asked for

    def maybe_upgrade(self) -> None:
        """A guest on the baseline engine moves to the optimized one as soon as it is
        compiled, between turns. Its state is memory plus globals, and its WASI
        context is made again with the same mounts, so only a guest holding no
        descriptor beyond its mounts can move: one that holds a file waits for a turn
        that does not. The undo record does not move."""
        instance = self._instance
        if instance.optimized or self._image_build or not is_guest_cached(metering=instance.metering):
            return
        if not self._files.ledger.only_fixed_open:
            return
        self._checkpoints.settle()
        size = instance.size(instance.require_store())
        instance.move_to(GuestEngine(load_guest_module(metering=instance.metering), get_engine(instance.metering),
                                     optimized=True, metering=instance.metering))
        self._checkpoints.begin(no_undo_reason=MOVED_NO_UNDO, moved=True)
        self._files.ledger = FdLedger(range(3, 3 + len(self._layout.preopens())))
        self._checkpoints.take()
        log.info("guest.optimized", bytes=size)


__all__ = ["EngineUpgrade"]
