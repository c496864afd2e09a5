"""A guest that sleeps and wakes: its interpreter saved to a file between turns, and
a later guest started from that file instead of a fresh boot.

Between turns the guest's whole state is its linear memory and its mutable globals
(memory_checkpoint.py says why), plus what the host keeps for it: the WASI
descriptors, the scratch areas the host allocated in guest memory, the stream ring.
`hibernate()` saves the memory pages that differ from the warm image the guest
started from (all non-zero pages when it started without one, or when the state is
to travel to another host), the globals and the scratch addresses, authenticated
with the session's key (host/state_file.py). The guest never sees the file: it lives
in the sessions' private folder, which no guest mounts.

A new guest that finds a state (GuestOptions.keep_state, resume=True) makes its
store and instance as any start does, with the same mounts and descriptor numbers,
maps the same warm image, copies the saved pages over it and runs the guest's
`resume` instead of its `start`: the stream ring, the host magics and the
environment are this host's again, and nothing is reseeded (the state is the
session's own). What cannot come back is said, never faked: files that were open
keep their descriptor numbers, held by a placeholder on which every operation
fails cleanly, so a later open can never be handed a number a stale file object
still holds.

A state is used only by the same wasm-kernel, guest, site, guest-side code and
preload list (its key is the warm image's key), and, when saved as a difference,
only over the very image it was taken against (the image's build id). Anything
else is a fresh start with one line saying why.

A saved state is the session's latest one, never an older one put back in its
place: each save takes a generation from the session (StateGenerations, kept by the
host where no guest reaches), writes it into the authenticated manifest, and
records it once the file is in place; a load refuses a state whose generation is
not the recorded one. The order makes a kill at any moment safe: killed before the
new file is in place, the old state is still the recorded one; killed after it and
before the record, the new file's generation is the one taken, which a load
accepts (and records). A restart's or %reset's discard retires every generation
so far, so nothing saved before it wakes again.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any, Protocol
from dataclasses import dataclass
from pathlib import Path

import wasmtime

from ..host.log import get_logger
from ..host.memory_image import MemoryImage, map_readonly, unmap
from ..host.set_aside import Notes
from ..host.state_file import (
    SavedState, StateOutgrown, StateRefused, StateTooLarge, changed_runs, clear_state_place, read_state,
    remove_state, set_aside_state, state_lock, sweep_partial, take_note, write_note, write_state,
)
from .checkpoints import Checkpoints
from .descriptor_places import DescriptorPlaces, PlaceFailed
from .fd_ledger import OpenOrigin
from .guest_config import GuestOptions, GuestUnavailable
from .guest_image import GuestImage
from .guest_instance import UNLIMITED_FUEL, GuestInstance, ScratchAreas
from .guest_layout import GuestLayout
from .start_files import StartFiles

log = get_logger("wasm_kernel.runtime")

STATE_FORMAT = 1
CUT_SAVE_AGE_S = 10.0  # a temporary file untouched this long is a save that was killed, not one under way


class StateGenerations(Protocol):
    """Which of a session's saved states is its latest (sessions/saved_state.py keeps
    it in the session's metadata). Raise StateRefused when that cannot be told."""

    def span(self) -> tuple[int, int] | None:
        """(the latest state's generation, the highest a save took); None if the
        session records none (a legacy session without metadata)."""

    def reserve(self) -> int:
        """A new generation for a save about to write (0 where none is recorded)."""

    def commit(self, generation: int) -> None:
        """The state of `generation` is in place: it is the latest."""

    def retire(self) -> None:
        """No state saved so far is the latest any more (a restart, %reset)."""


@dataclass(frozen=True)
class StateKeeping:
    """Where one session's guest state is kept, and under which rules."""

    folder: Path  # private to the host: never mounted into a guest
    key: bytes  # host/state_file.session_key(secret, session_id)
    max_bytes: int | None = None  # the most one state file may take (the disk quota may allow less)
    max_age_s: float | None = None  # an older state is not resumed
    generations: StateGenerations | None = None  # None: any state of the session's key is its latest


@dataclass(frozen=True)
class Hibernated:
    """What a save wrote, or what a resume found."""

    saved_at: float  # time.time() of the save
    cells: int  # the execution count when it was saved
    size_on_disk: int
    closed_files: int = 0  # descriptors open at the save that could not be opened again (placeholders)
    full: bool = False  # all of memory, not a difference against the warm image


class Hibernation:
    """One guest's saved states: saving itself, and waking from one. Its methods run
    on the guest's thread, except discard_state."""

    def __init__(self, instance: GuestInstance, checkpoints: Checkpoints, files: StartFiles, image: GuestImage,
                 layout: GuestLayout, options: GuestOptions, state_key: str | None) -> None:
        """state_key: what a saved state must have been saved with to be resumed here
        (the warm image's key), None for a guest that keeps none."""
        self._instance = instance
        self._checkpoints = checkpoints
        self._files = files
        self._image = image
        self._layout = layout
        self._keeping = options.keep_state
        self._resume = options.resume
        self._state_key = state_key
        self.started_image: MemoryImage | None = None  # the warm image this start mapped, a save's base
        self.resume_notice: str | None = None  # why a saved state was found and not used
        self._lost_files = 0
        self._places = DescriptorPlaces(instance, files, layout)

    def discard_state(self) -> bool:
        """Remove the session's saved state (a restart or %reset: the next start is a
        fresh one, as on ipykernel). True if there was one."""
        keeping = self._keeping
        return discard_kept_state(keeping) if keeping is not None else False


    def hibernate(self, cells: int, full: bool, host: dict[str, Any], points: dict[str, Any] | None = None) -> Hibernated:
        keeping = self._keeping
        if keeping is None or self._state_key is None:
            raise GuestUnavailable("this sandbox keeps no state")
        self._checkpoints.settle()  # the last turn's checkpoint: its descriptor bookkeeping runs first
        store = self._instance.require_store()
        address, size = self._instance.base(store), self._instance.size(store)
        image = None if full else self.started_image
        if image is not None and not image.meta.get("build_id"):
            image = None  # an image from before build ids: no base to name, save it all
        base: tuple[int, int] | None = None
        started = time.perf_counter()
        try:
            if image is not None:
                base = map_readonly(image)
            runs = changed_runs(address, size, base[0] if base else None, image.size if image else 0)
        finally:
            if base is not None:
                unmap(*base)
        saved_at = time.time()
        manifest = {
            "format": STATE_FORMAT, "key": self._state_key, "size": size,
            "globals": self._instance.global_values(store),
            "scratch": self._instance.scratch.as_list(),
            "base": None if image is None else {"key": image.key, "build_id": image.meta["build_id"]},
            "fds": [self._descriptor_record(fd) for fd in sorted(self._files.ledger.open_numbers())],
            "saved_at": saved_at, "cells": int(cells), "host": host,
            "points": points,  # every cell's point (runtime/points.py), their deltas beside the state
        }
        room = keeping.max_bytes
        left = self._files.quota.room()  # what the session's quota leaves, with every writer's share
        if left is not None:
            room = left if room is None else min(room, left)
        try:
            written = save_kept_state(keeping, manifest, address, runs, room)
        except StateTooLarge as err:
            by = "by the session's disk quota" if room != keeping.max_bytes else "by state_max_bytes"
            write_note(keeping.folder, f"the interpreter was not saved at the last shutdown: {err} {by} (memory "
                                       "a cell used and freed still counts; %reset before leaving makes it small)")
            raise
        log.info("guest.hibernated", bytes=written, runs=len(runs), full=image is None, cells=cells,
                 seconds=round(time.perf_counter() - started, 3))
        return Hibernated(saved_at, int(cells), written, len(manifest["fds"]), image is None)

    def _descriptor_record(self, fd: int) -> list[Any]:
        """[fd, offset, how it was opened] for the manifest: enough to open the same
        file at the same place after a resume (no origin: it gets a placeholder)."""
        origin = self._files.ledger.origins.get(fd)
        offset = self._files.ledger.committed.get(fd)
        if origin is None:
            return [fd, offset, None]
        return [fd, offset, [origin.dirfd, origin.dirflags, origin.path.hex(), origin.oflags, origin.rights,
                             origin.inheriting, origin.fdflags]]

    def state_to_resume(self) -> SavedState | None:
        """The saved state this guest was given (GuestOptions.resume: read and
        verified by its caller, load_saved_state) if it may wake it; else None, with
        resume_notice saying why."""
        state = self._resume
        if state is None or self._keeping is None or self._state_key is None:
            return None
        manifest = state.manifest
        reason = None
        if manifest.get("format") != STATE_FORMAT or manifest.get("key") != self._state_key:
            reason = "it was saved by another version of wasm-kernel or its guest, or with other preloaded modules"
        if reason is not None:
            state.close()
            self.refuse_state(reason, state)
            return None
        return state

    def refuse_state(self, reason: str, state: SavedState) -> None:
        self.resume_notice = refusal_line(reason)
        log.info("guest.state_refused", reason=reason)
        keeping = self._keeping
        if keeping is not None:  # refused once is refused for good: do not read it again
            with state_lock(keeping.folder, create=False):
                remove_state(keeping.folder, if_still=state.identity)  # not a state saved since

    def apply_state(self, store: wasmtime.Store, image: MemoryImage | None, state: SavedState) -> None:
        """Put a verified state into the new instance: the warm image it was taken
        against (if any), its pages over it, its globals and scratch areas, and a
        placeholder at every descriptor number it held open."""
        manifest = state.manifest
        size = state.memory_size
        globals_ = [int(v) for v in manifest["globals"]]
        instance = self._instance
        if len(globals_) != len(instance.globals):
            raise StateRefused("it does not match the guest module's globals")
        if instance.memory_bytes is not None and size > instance.memory_bytes:
            raise StateRefused(f"its {size >> 20} MiB of memory are more than this sandbox's limit")
        base = manifest.get("base")
        if base is not None:
            if image is None or image.key != base.get("key") or image.meta.get("build_id") != base.get("build_id"):
                raise StateRefused("it was saved against a warm image this machine does not have")
            self._image.adopt(store, image)
        if instance.size(store) > size:
            raise StateRefused("it is smaller than a new interpreter's memory")
        instance.grow_to(store, size)
        address = instance.base(store)
        if base is None:
            ctypes.memset(address, 0, size)  # a full state lists only non-zero pages
        state.copy_into(address, size)
        instance.set_globals(store, globals_)
        instance.scratch = ScratchAreas(*(int(v) for v in manifest["scratch"]))
        overlay = self._files.overlay
        if overlay is not None:  # before the files are opened again: some open through it
            overlay.set_scratch(instance.scratch.overlay)
            overlay.quota = self._files.quota
        self._hold_descriptors(store, list(manifest.get("fds", [])))

    def _hold_descriptors(self, store: wasmtime.Store, records: list[Any]) -> None:
        """Descriptors open at the save were the old store's. Each is opened again,
        at its number and offset (descriptor_places.py); the others get a placeholder."""
        self._instance.refuel(store, UNLIMITED_FUEL)
        self._lost_files = 0
        for record in records:
            fd, offset, how = int(record[0]), record[1], record[2]
            if fd in self._files.ledger.fixed or fd < 3:
                continue
            origin = None
            if how is not None:
                dirfd, dirflags, path, oflags, rights, inheriting, fdflags = how
                origin = OpenOrigin(int(dirfd), int(dirflags), bytes.fromhex(path), int(oflags), int(rights),
                                    int(inheriting), int(fdflags))
            if origin is None or not self._places.reopen(store, fd, origin, offset):
                try:
                    self._places.placeholder(store, fd)
                except PlaceFailed as err:
                    raise StateRefused(str(err)) from None
                self._lost_files += 1
                origin = None
            self._files.ledger.hold(fd)
            if origin is not None:
                self._files.ledger.origins[fd] = origin

    def resume_result(self, state: SavedState) -> Hibernated:
        manifest = state.manifest
        return Hibernated(float(manifest["saved_at"]), int(manifest.get("cells", 0)), state.size_on_disk,
                          self._lost_files, manifest.get("base") is None)


def load_saved_state(keeping: StateKeeping, notes: Notes | None = None) -> tuple[SavedState | None, str | None]:
    """The session's saved state, verified, for GuestOptions.resume; or None and, if
    one was there but refused (tampered, another session's, a planted link, not the
    session's latest, too old), the line saying so. A refused state is never read
    again: set aside when it must not be loaded for what it is, removed when it is
    only out of date. Whatever is at the state's place and is not one is set aside,
    with a line in `notes`. A save that was cut short (the kernel killed before it
    finished: Jupyter kills a kernel 5 s after asking it to shut down) is said too,
    and the state before it is used."""
    clear_state_place(keeping.folder, notes if notes is not None else [])
    with state_lock(keeping.folder, create=False):  # never judged while another kernel's save replaces it
        cut = sweep_partial(keeping.folder, older_than_s=CUT_SAVE_AGE_S)
        unsaved = take_note(keeping.folder)
        state, notice = _load(keeping)
    if unsaved is not None and notice is None and state is None:
        return None, f"{unsaved}; this is a fresh start"
    if cut and notice is None:
        notice = ("the interpreter's last save was cut short (the kernel was stopped before it finished; an "
                  "operator can give kernels longer with c.KernelManager.shutdown_wait_time)")
        notice += "; resuming the state saved before it" if state is not None else "; this is a fresh start"
    return state, notice


def _load(keeping: StateKeeping) -> tuple[SavedState | None, str | None]:
    try:
        state = read_state(keeping.folder, key=keeping.key, max_bytes=keeping.max_bytes)
        if state is None:
            return None, None
    except StateOutgrown as err:  # the operator lowered state_max_bytes since: out of date, not suspect
        remove_state(keeping.folder)
        return None, refusal_line(str(err))
    except (StateRefused, OSError) as err:
        return None, _set_aside(keeping, str(err) if isinstance(err, StateRefused) else
                                f"it could not be read ({err.strerror})")
    try:
        stale = _not_latest(keeping, state)
    except (StateRefused, OSError) as err:
        state.close()
        return None, refusal_line(str(err) if isinstance(err, StateRefused) else
                                  f"the session's metadata could not be read ({err.strerror})")
    if stale is not None:
        state.close()
        return None, _set_aside(keeping, stale)
    saved_at = state.manifest.get("saved_at")
    if keeping.max_age_s is not None and (not isinstance(saved_at, (int, float))
                                          or time.time() - saved_at > keeping.max_age_s):
        state.close()
        remove_state(keeping.folder, if_still=state.identity)
        return None, refusal_line(f"it is older than the {keeping.max_age_s / 3600:g} hours a state is kept")
    return state, None


def _not_latest(keeping: StateKeeping, state: SavedState) -> str | None:
    """Why a verified state is not the session's latest one (an older state put back
    in its place), or None. Raises StateRefused if the session cannot tell."""
    generations = keeping.generations
    if generations is None:
        return None
    span = generations.span()
    if span is None:
        return None  # a legacy session records no generation: its states are as they were
    latest, reserved = span
    generation = state.manifest.get("generation", 0)  # a state saved before generations: 0
    if isinstance(generation, bool) or not isinstance(generation, int):
        return "its generation is malformed"
    if generation < latest:
        return ("it is not the session's latest saved state (an older one was put back in its place"
                + (", saved before states had generations)" if "generation" not in state.manifest else ")"))
    if generation > reserved:
        return "the session's metadata has no record of it (the metadata was replaced since it was saved)"
    if generation > latest:
        generations.commit(generation)  # its save was stopped after the file was in place, before the record
    return None


def _set_aside(keeping: StateKeeping, reason: str) -> str:
    """A state that must never be loaded for what it is: kept beside for a person to
    look at (never deleted unsaid), never read again; the line that says so."""
    log.warning("guest.state_refused", reason=reason)
    moved = set_aside_state(keeping.folder, reason)
    return refusal_line(reason if moved is None else f"{reason}; it was set aside as {moved}")


def save_kept_state(keeping: StateKeeping, manifest: dict[str, Any], address: int, runs: list[tuple[int, int]],
                    max_bytes: int | None) -> int:
    """Write the runs of memory at `address` as the session's latest state, with its
    generation in `manifest`: taken (and recorded) before the file is written,
    recorded as the latest once the file is in place. The file's size. Raises
    StateTooLarge when it does not fit: then the older state goes too (waking one
    older than the files would be worse than a fresh start)."""
    generations = keeping.generations
    with state_lock(keeping.folder, create=True):  # another kernel's save of this session waits, or we do
        sweep_partial(keeping.folder, older_than_s=CUT_SAVE_AGE_S)  # not a save under way elsewhere
        manifest["generation"] = generations.reserve() if generations is not None else 0
        try:
            written = write_state(keeping.folder, key=keeping.key, manifest=manifest, address=address, runs=runs,
                                  max_bytes=max_bytes)
        except StateTooLarge:
            _retire_and_remove(keeping)
            raise
        if generations is not None:
            generations.commit(manifest["generation"])
    return written


def discard_kept_state(keeping: StateKeeping) -> bool:
    """Remove the session's saved state and retire its generation, so that no state
    saved so far wakes again, not even one put back; True if there was one."""
    with state_lock(keeping.folder, create=False):
        return _retire_and_remove(keeping)


def _retire_and_remove(keeping: StateKeeping) -> bool:
    if keeping.generations is not None:
        try:
            keeping.generations.retire()
        except (StateRefused, OSError) as err:  # the state still goes: a restart is a fresh start
            log.warning("guest.state_retire_failed", error=str(err))
    return remove_state(keeping.folder)


def refusal_line(reason: str) -> str:
    return f"the saved state was not resumed: {reason}; this is a fresh start"


__all__ = ["Hibernated", "Hibernation", "StateGenerations", "StateKeeping", "StateRefused", "StateTooLarge",
           "discard_kept_state", "load_saved_state", "refusal_line", "save_kept_state"]
