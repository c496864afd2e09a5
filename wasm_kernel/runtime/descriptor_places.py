"""Putting a file back at a descriptor number the guest's memory already holds.

A woken state (hibernation.py) and a rewind (checkpoints.py) both give the guest
back memory in which Python file objects hold descriptor numbers that the host's
WASI table may not hold, or hold for another file. Each such number is opened again
from the preopen and path it was opened with (fd_ledger.OpenOrigin), through the
notebook folder's overlay as the guest's own open would go, and moved to its
number; where that cannot be done (a file deleted since, one opened another way) a
placeholder, a rightless descriptor of /app, holds the number, so the stale file
object fails cleanly and the number is never handed to a new file.
"""

from __future__ import annotations

import wasmtime

from .fd_ledger import OpenOrigin
from .guest_config import GUEST_APP
from .guest_instance import GuestInstance
from .guest_layout import GuestLayout
from .start_files import StartFiles
from .wasi_abi import EBADF, OFLAG_DIRECTORY

MAX_FILLERS = 1024  # numbers taken for the while to reach a free one (a guest holds fewer)


class PlaceFailed(Exception):
    """A descriptor that could not be opened again at its number (its WASI error)."""


class DescriptorPlaces:
    """Opens files at given descriptor numbers in the guest's WASI table. On the
    guest's thread, between turns."""

    def __init__(self, instance: GuestInstance, files: StartFiles, layout: GuestLayout) -> None:
        self._instance = instance
        self._files = files
        self._layout = layout

    def reopen(self, store: wasmtime.Store, fd: int, origin: OpenOrigin, offset: int | None) -> bool:
        """`origin` opened again at `fd`, at `offset`; False if it cannot be."""
        if origin.dirfd not in self._files.ledger.fixed:
            return False
        try:
            self.place(store, fd, origin)
        except PlaceFailed:
            return False
        if offset is not None:
            self._instance.originals["fd_seek"](store, fd, int(offset), 0, self._instance.below_stack())
        return True

    def placeholder(self, store: wasmtime.Store, fd: int) -> None:
        """A rightless descriptor of /app at `fd`: every operation on it fails."""
        app = 3 + next(i for i, (_, guest, _) in enumerate(self._layout.preopens()) if guest == GUEST_APP)
        self.place(store, fd, OpenOrigin(app, 0, b".", OFLAG_DIRECTORY, 0, 0, 0))

    def place(self, store: wasmtime.Store, fd: int, origin: OpenOrigin) -> None:
        """Open `origin` at number `fd`: over the descriptor there (fd_renumber
        replaces it at once), or, where `fd` is free, as the table hands it out."""
        instance = self._instance
        opened = self._open(store, fd, origin)
        if opened == fd:
            return
        close = instance.originals["fd_close"]
        errno = instance.originals["fd_renumber"](store, opened, fd)
        if errno == 0:
            return
        if errno != EBADF:
            close(store, opened)
            raise PlaceFailed(f"descriptor {fd} could not be held (WASI error {errno})")
        # `fd` is free: renumbering onto it is refused (EBADF), so the table must hand
        # it out itself. It gives the most recently freed number first, then new ones
        # past its last: opens held for the while reach `fd` either way.
        fillers = [opened]
        try:
            while len(fillers) < MAX_FILLERS:
                opened = self._open(store, fd, origin)
                if opened == fd:
                    return
                fillers.append(opened)
            raise PlaceFailed(f"descriptor {fd} could not be held (the table did not give it)")
        finally:
            for number in fillers:
                if number != fd:
                    close(store, number)

    def _open(self, store: wasmtime.Store, fd: int, origin: OpenOrigin) -> int:
        instance = self._instance
        path_at = instance.below_stack() - len(origin.path)  # free stack below the stack pointer
        out = (path_at - 8) & ~7  # WASI checks a u32 pointer's alignment
        instance.mem.write(store, path_at, origin.path)
        args = (origin.dirfd, origin.dirflags, path_at, len(origin.path), origin.oflags, origin.rights,
                origin.inheriting, origin.fdflags, out)
        overlay = self._files.overlay
        errno = overlay.path_open(store, instance.mem, instance.originals, args) if overlay is not None \
            else instance.originals["path_open"](store, *args)
        if errno != 0:
            raise PlaceFailed(f"descriptor {fd} could not be opened again (WASI error {errno})")
        return int(instance.mem.u32(store, out))


__all__ = ["DescriptorPlaces", "PlaceFailed"]
