"""A persistent CPython interpreter in a wasm store: turns, limits, interrupts,
checkpoints and rollback.

The guest keeps one instance for its whole life. After every turn that ends
normally, the whole wasm state (memory and the stack-pointer global) is copied
into a checkpoint off the critical path, on the guest's own thread after the
caller already has its result. When a turn traps (fuel, deadline, interrupt, a
crash), that checkpoint is copied back and the WASI descriptors are reconciled,
so the interpreter is exactly as it was after the last good turn.

`undo()` goes one step further back: to the state before the last cell that
completed (see MemoryCheckpoint and FdLedger for the undo records). Queries never
move that point. Files are not rolled back.
"""

from __future__ import annotations

import ctypes
import json
import struct
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import wasmtime

from ..host.artifacts import GUEST_LIB, runtime_tree
from ..host.engine import get_engine
from ..host.epoch_ticker import ticker_for
from ..host.guest_memory import GuestMemory
from ..host.guest_site import guest_packages_path
from ..host.log import get_logger
from ..host.memory_checkpoint import NO_UNDO_YET, MemoryCheckpoint, release_pages
from ..host.memory_image import ImageError, MemoryImage, map_image, write_image
from ..host.module_cache import is_guest_cached, load_guest_module
from ..host.wasi_shim import instantiate_shim
from ..host.wasm_binary import GLOBAL_EXPORT_PREFIX, INTERRUPT_EXPORT
from ..host.wasmtime_private import set_epoch_callback
from .disk_quota import SCRATCH_BYTES as QUOTA_SCRATCH_BYTES
from .disk_quota import DiskQuota
from .guest_scratch import GuestScratch
from .fd_ledger import FdLedger
from .guest_config import (
    GUEST_APP,
    GUEST_ENV,
    GUEST_LIB_DIR,
    GUEST_NOTEBOOK,
    GUEST_SUPPORT,
    GUEST_TMP,
    CellOptions,
    GuestEngine,
    GuestOptions,
    GuestUnavailable,
    ImageSource,
    OnDisplay,
    OnInput,
    TrapReason,
    TurnLimits,
    TurnOutcome,
    SiteMount,
    UndoFailed,
)
from .wire import COMM_MSG_TYPES, QUERY_OPS, SERVE_TURN
from .host_door import HostDoor, Turn, guest_request
from .guest_thread import GuestThread
from .notebook_overlay import SCRATCH_BYTES, NotebookOverlay
from .output import OnOutput, TurnOutput
from .soft_interrupt import SoftInterrupt
from .stream_ring import StreamRing
from .wasi_shadows import define_shadows
from .warm_image import TMP_FOLDER, ImageBusy, ImageUnavailable, copy_tmp_tree

log = get_logger("wasm_kernel.runtime")

ARGV0 = "/usr/local/bin/python3"
UNLIMITED_FUEL = (1 << 63) - 1
# Fuel a second of guest work burns on the optimized engine (measured 10-18e9/s for
# pure Python and numpy; the lower end): on the baseline engine, which counts no
# fuel, a cell's fuel budget is enforced as the time it buys there.
BASELINE_FUEL_PER_SECOND = 10e9
MOVED_NO_UNDO = "the interpreter moved to the optimized compiler after the last cell (undo starts again with the next)"
MEMORY_HEADROOM = 1 << 20
WASM_PAGE = 1 << 16
# A rolled-back turn that grew memory by more than this is restored into a fresh
# instance, so the growth is given back (see _restore_into_fresh_instance).
COMPACT_AFTER_GROWTH = 64 << 20

class PythonGuest(HostDoor):
    """One persistent interpreter whose /app is `workspace`, running IPython's shell.

    shell=False gives a bare interpreter with no shell and no staged packages (the
    runtime uses one to compile the staged packages' bytecode)."""

    def __init__(
        self,
        workspace: Path,
        *,
        engine: GuestEngine,
        site: SiteMount | None = None,
        images: ImageSource | None = None,
        memory_bytes: int | None = None,
        name: str = "wasm-kernel-guest",
        options: GuestOptions | None = None,
        shell: bool = True,
        image_build: tuple[str, ...] | None = None,
    ) -> None:
        """Made by provisioning.new_guest, which picks the engine, stages the site and
        finds the warm images. site: the packages folder on sys.path (the staged
        IPython site for a shell guest). images: where the warm image comes from, if
        any. image_build: boot only the shared part, importing these modules, for
        save_image()."""
        self.workspace = Path(workspace).resolve()
        self.memory_bytes = memory_bytes
        self.options = options or GuestOptions()
        self._shell = shell
        self._use_engine(engine)
        self._fuel_deadline_at: float | None = None
        self._site = site
        self._images = images
        self._image_build = image_build
        self.boot_notice: str | None = None  # why this guest booted without its warm image
        self.started_from_image = False
        self._thread = GuestThread(name)
        self.output: TurnOutput | None = None
        self._stop_reason: TrapReason | None = None
        self._deadline_at: float | None = None
        self._soft = SoftInterrupt()
        self._running = False
        self._closed = False
        self._turn: Turn | None = None
        self._checkpoint: MemoryCheckpoint | None = None
        self._checkpoint_error: BaseException | None = None
        # The checkpoint owed after the last turn, and whether it is an undo point
        # (None: none owed). Taken by checkpoint_soon(), or before the next turn.
        self._owed: bool | None = None
        self._booting = False
        self._store: wasmtime.Store | None = None
        self._private: Path | None = None
        try:
            self._thread.call(self._boot)
        except BaseException:
            self._thread.call(self._teardown)
            self._thread.stop()
            raise

    # --- public API (any thread) ---------------------------------------------

    def run_cell(
        self,
        code: str,
        *,
        limits: TurnLimits,
        options: CellOptions | None = None,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
        on_input: OnInput | None = None,
        keep_output: bool = True,
    ) -> TurnOutcome:
        """Run one cell through the guest's IPython shell. keep_output=False: output
        handed to on_output/on_display is not also kept in the outcome."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        if not self._shell:
            raise GuestUnavailable("this interpreter has no shell; use run_source()")
        request = json.loads((options or CellOptions()).request_json(code))
        return self._call_guest("run", {"request": request}, limits=limits, on_output=on_output,
                                on_display=on_display, on_input=on_input, undo_point=True, keep_output=keep_output)

    def run_source(self, source: str, *, limits: TurnLimits, on_output: OnOutput | None = None) -> TurnOutcome:
        """Run Python source as a turn of its own, outside any shell. It must end by
        sending its result (`_wasm_kernel_guest.call({"op": "result", ...})`)."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self._run_turn, source, limits, on_output, None, None, False)

    def run_comm(
        self,
        msg_type: str,
        msg: Mapping[str, Any],
        *,
        limits: TurnLimits,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
    ) -> TurnOutcome:
        """Deliver one comm_open / comm_msg / comm_close from a frontend to the guest's
        comm manager, as a turn with a cell's limits and rollback (not an undo point,
        not in history). msg: the message's header, metadata and content, with its
        buffers base64-encoded; it travels as JSON, so nothing in it becomes code."""
        if msg_type not in COMM_MSG_TYPES:
            raise ValueError(f"not a comm message: {msg_type!r}")
        if not self._shell:
            raise GuestUnavailable("this interpreter has no shell to deliver comm messages to")
        return self._call_guest("comm", {"msg_type": msg_type, "msg": dict(msg)}, limits=limits,
                                on_output=on_output, on_display=on_display, keep_output=False)

    def run_query(self, op: str, args_json: str, *, limits: TurnLimits) -> TurnOutcome:
        """Run one introspection function of the guest as a turn of its own.

        Its value comes back as the outcome's query_result (see
        guest_messages.query_value). The arguments travel as one JSON string, so
        nothing the caller passes becomes code."""
        if op not in QUERY_OPS:
            raise ValueError(f"unknown query {op!r}; allowed: {', '.join(sorted(QUERY_OPS))}")
        args = json.loads(args_json)
        if not isinstance(args, dict):
            raise ValueError("a query's arguments must be a JSON object")
        if not self._shell:
            raise GuestUnavailable("this interpreter has no shell to query")
        return self._call_guest("query", {"op": op, "args": args}, limits=limits, query=True)

    def _call_guest(
        self,
        name: str,
        args: Mapping[str, Any],
        *,
        limits: TurnLimits,
        on_output: OnOutput | None = None,
        on_display: OnDisplay | None = None,
        on_input: OnInput | None = None,
        undo_point: bool = False,
        keep_output: bool = True,
        query: bool = False,
    ) -> TurnOutcome:
        """Run one turn that calls the guest function `name` (the wire's
        GUEST_FUNCTIONS; any other name raises ValueError before anything runs) with
        `args` as its keyword arguments. The turn's code is always SERVE_TURN: the
        guest asks the door for this request, as JSON, so nothing in it becomes code."""
        request = guest_request(name, args)
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self._run_turn, SERVE_TURN, limits, on_output, on_display, on_input, undo_point,
                                 keep_output, query, request)

    def interrupt(self) -> bool:
        """Interrupt the running turn, if any, from any thread. True if one was running.

        With a grace (TurnLimits.interrupt_grace_seconds) the guest raises
        KeyboardInterrupt in the cell's code at its next safe point and the turn ends
        as a cell that raised, its work kept; one that has not taken it within the
        grace (a long call into compiled code) is stopped and rolled back, as every
        interrupt is without a grace."""
        if not self._running:
            return False
        # A turn that took a soft interrupt and still runs (it caught KeyboardInterrupt, or
        # its SIGINT handler ignores it; guest code may even fake the count) is stopped
        # the hard way by the next one: a notebook cannot make itself uninterruptible.
        if not self._soft.ask():
            self._stop_reason = "interrupted"
        self._ticker.wake()
        return True

    def soft_interrupt_raised(self, store: Any) -> bool:
        """On the guest thread: raise a soft interrupt that is due; True while one is
        raised and not yet taken (see SoftInterrupt.raise_if_due)."""
        return self._soft.raise_if_due(store, self.mem, self._require_store)

    def _interrupt_overdue(self) -> bool:
        if not self._soft.overdue():
            return False
        self._stop_reason = "interrupted"
        return True

    def stop_soon(self) -> None:
        if self._store is not None:
            self._store.set_epoch_deadline(0)

    def _needs_ticks(self) -> bool:
        output = self.output
        ring = self.ring
        return (
            (ring is not None and ring.has_data())
            or self._deadline_at is not None
            or self._fuel_deadline_at is not None
            or self._stop_reason is not None
            or self._soft.pending
            or (output is not None and output.has_pending)
        )

    def restart(self) -> None:
        """A fresh interpreter on the same workspace."""
        self._thread.call(self._restart)

    def undo(self) -> bool:
        """Put the interpreter back to how it was before the last cell that completed
        (ok or raising; a cell stopped by a limit was already rolled back, so it does
        not count). One level: False if there is nothing to undo, and then
        `undo_unavailable_reason()` says why. Files are not rolled back; files the
        undone cell opened are closed. Raises UndoFailed if it broke off half way."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self._undo)

    def undo_unavailable_reason(self) -> str | None:
        """None if undo() would undo a cell, else why it would not."""
        if self._closed:
            return "the sandbox is closed"
        return self._thread.call(self._undo_refusal)

    def wait_idle(self) -> None:
        """Wait until background work (the last checkpoint) is done."""
        self._thread.call(self._settle)

    def checkpoint_soon(self) -> None:
        """Take the last cell's checkpoint now, in the background. It is taken before
        the next turn anyway; a caller that has answered its own client first (a
        kernel sending its reply) starts it here, so the two do not contend."""
        self._thread.submit(self._settle)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._stop_reason = "interrupted"  # a running turn stops at its next tick
        self._ticker.wake()
        self._thread.call(self._teardown)
        self._thread.stop()

    # --- guest thread ----------------------------------------------------------

    def _require_store(self) -> wasmtime.Store:
        if self._store is None:
            raise GuestUnavailable("the guest is not running")
        return self._store

    def stop_requested(self) -> bool:
        return self._stop_reason is not None or self._deadline_passed() or self._interrupt_overdue()

    def _deadline_passed(self) -> bool:
        now = time.monotonic()
        if self._deadline_at is not None and now >= self._deadline_at:
            if self._stop_reason is None:
                self._stop_reason = "deadline"
            return True
        if self._fuel_deadline_at is not None and now >= self._fuel_deadline_at:
            if self._stop_reason is None:
                self._stop_reason = "out_of_fuel"
            return True
        return False

    def _epoch_decide(self) -> int | None:
        # Runs on the guest thread every tick while the guest computes: the moment
        # to hand over output that has waited long enough.
        if self.output is not None:
            self.drain_streams()
            self.output.maybe_flush()
        if self._soft.pending and self._store is not None:
            self.soft_interrupt_raised(self._store)
        return None if self.stop_requested() else 1

    def _boot(self) -> None:
        image = self._image_for_boot()
        if image is not None:
            try:
                self._start(image)
                return
            except (GuestUnavailable, ImageError, OSError, wasmtime.WasmtimeError, wasmtime.Trap) as err:
                self.boot_notice = (
                    f"The warm image could not be used ({_first_line(err)}); this sandbox started "
                    "without it, which takes longer."
                )
                log.warning("guest.image_start_failed", error=_first_line(err))
                self._teardown()
        self._start(None)

    def _uniform_layout(self) -> bool:
        return self._shell and self._site is not None and self._site.key is not None

    def _image_for_boot(self) -> MemoryImage | None:
        if (not self._uniform_layout() or not self.options.warm_image or self._image_build is not None
                or self._images is None):
            return None
        try:
            image = self._images(self._metered)
            if image is None:
                return None
        except ImageBusy:
            return None  # only slower this once: said in the log, not to the user
        except ImageUnavailable as err:
            self.boot_notice = (
                f"The warm image could not be built ({err}); this sandbox started without it, which takes "
                "longer. The log has the details."
            )
            return None
        if self.memory_bytes is not None and image.size > self.memory_bytes:
            self.boot_notice = (
                f"The warm image ({image.size >> 20} MiB) is larger than this sandbox's memory limit "
                f"({self.memory_bytes >> 20} MiB); started without it."
            )
            return None
        return image

    def save_image(self, folder: Path, key: str) -> MemoryImage:
        """This guest's state, between turns, as a warm image (an image_build guest)."""
        if self._image_build is None:
            raise GuestUnavailable("only a guest booted with image_build can be saved as an image")
        return self._thread.call(self._save_image, folder, key)

    def _save_image(self, folder: Path, key: str) -> MemoryImage:
        store = self._require_store()
        if self.ledger.opened or self.ledger.deferred:
            # A descriptor open in the image would be a number with nothing behind it
            # in every sandbox started from it.
            raise ImageUnavailable(f"descriptors {sorted(self.ledger.opened)} were left open by the build")
        base = ctypes.addressof(self._memory.data_ptr(store).contents)
        assert self._private is not None
        guest_tmp = self._private / "tmp"
        meta = {
            "quota_scratch": self.quota_scratch,
            "overlay_scratch": self.overlay_scratch,
            "globals": len(self._globals),
            "preload": list(self._image_build or ()),
        }
        return write_image(
            folder, key=key, address=base, size=self._memory.data_len(store),
            globals_=[int(g.value(store)) for g in self._globals], meta=meta,
            extra=lambda scratch: copy_tmp_tree(guest_tmp, scratch / TMP_FOLDER),
        )

    def _mounts(self) -> list[tuple[str, bool]]:
        """Guest paths of the preopens before /tmp and /app, in fd order, and whether writable."""
        packages = self._uniform_layout() or self.options.packages is not None
        return guest_mounts(self._site, packages)

    def _python_path(self) -> list[str]:
        return [guest for guest, _ in self._mounts()[2:]]

    def _start(self, image: MemoryImage | None) -> None:
        """Make the store and instance; then either map `image` and run the
        per-sandbox start, or boot the interpreter and the shell from scratch."""
        scratch = GuestScratch()
        self._private = scratch.path
        # The guest's /tmp must not outlive it, even if close() is never called; one
        # left by a killed process is swept by the next GuestScratch.
        self._private_cleanup = weakref.finalize(self, scratch.remove)
        guest_tmp = self._private / "tmp"
        guest_tmp.mkdir()
        if image is not None and (image.folder / TMP_FOLDER).is_dir():
            copy_tmp_tree(image.folder / TMP_FOLDER, guest_tmp)
        (self._private / "stdin").write_bytes(b"")
        if self._uniform_layout() and self.options.packages is None:
            (self._private / "packages").mkdir()  # the mount exists in every shell guest, empty without %pip
        # The quota counts the workspace and this guest's /tmp.
        self.quota = DiskQuota([self.workspace, guest_tmp])
        self.overlay: NotebookOverlay | None = None
        preopens = self._preopens()
        if self.options.notebook is not None:
            self.overlay = NotebookOverlay(self.options.notebook, self.workspace, len(preopens) + 1, len(preopens) + 2)
        self.ledger = FdLedger(range(3, 3 + len(preopens)))
        self.output: TurnOutput | None = None
        self.originals: dict[str, wasmtime.Func] = {}
        self.ring: StreamRing | None = None  # registered by the guest as it boots or starts
        self._linker = self._new_linker()
        store = self._new_store()
        self._instantiate(store)
        self._store = store
        self._checkpoint = MemoryCheckpoint()
        if image is not None:
            self._adopt_image(store, image)
        else:
            # Allocated before the first checkpoint, so every rollback keeps them.
            self.quota_scratch = self._alloc(store, QUOTA_SCRATCH_BYTES) & 0xFFFFFFFF
            self.overlay_scratch = 0
            if self.overlay is not None or self._image_build is not None:
                self.overlay_scratch = self._alloc(store, SCRATCH_BYTES) & 0xFFFFFFFF
        if self.overlay is not None:
            self.overlay.set_scratch(self.overlay_scratch)
            self.overlay.quota = self.quota
        self._run_boot_turn(store, *self._boot_turn(image is not None), booting=image is None)
        self.started_from_image = image is not None
        if self._image_build is None:
            # The first checkpoint: from an image, only the pages the start wrote;
            # else all of memory (~35 ms at 40 MB). Queued behind this job, it runs
            # while the caller gets its sandbox, before any cell.
            self._thread.submit(self._take_checkpoint)

    def _preopens(self) -> list[tuple[Path, str, bool]]:
        """(host folder, guest path, writable) in fd order: 3, 4, ... (see _mounts)."""
        assert self._private is not None
        tree = runtime_tree()
        hosts = [tree.lib_dir, tree.mpl_data_dir, GUEST_LIB_DIR]
        if self._site is not None:
            hosts.append(self._site.host)
        if self._uniform_layout() or self.options.packages is not None:
            hosts.append(self.options.packages or self._private / "packages")
        preopens = [(host, guest, writable) for host, (guest, writable) in zip(hosts, self._mounts())]
        preopens += [(self._private / "tmp", GUEST_TMP, True), (self.workspace, GUEST_APP, True)]
        if self.options.notebook is not None:
            preopens.append((self.options.notebook.path, GUEST_NOTEBOOK, False))  # the last one, so libc skips it
        return preopens

    def _new_store(self) -> wasmtime.Store:
        """A store on this guest's engine with its WASI context (the same mounts and
        descriptor numbers every time) and the epoch callback."""
        assert self._private is not None
        store = wasmtime.Store(self._engine)
        self._refuel(store, UNLIMITED_FUEL)
        if self.memory_bytes is not None:
            store.set_limits(memory_size=self.memory_bytes)
        wasi = wasmtime.WasiConfig()
        wasi.argv = [ARGV0]
        wasi.env = [list(pair) for pair in GUEST_ENV]
        wasi.stdin_file = str(self._private / "stdin")
        for host, guest, writable in self._preopens():
            wasi.preopen_dir(str(host), guest, writable)
        store.set_wasi(wasi)
        self._epoch_handle = set_epoch_callback(store, self._epoch_decide)
        store.set_epoch_deadline(1)
        return store

    def _use_engine(self, engine: GuestEngine) -> None:
        """Run on `engine` from the next store on: its module and its epoch ticker."""
        self._module, self._engine, self._metered = engine.module, engine.engine, engine.metered
        self._ticker = ticker_for(self._engine)

    def _new_linker(self) -> wasmtime.Linker:
        """WASI with our shadows (which know this start's notebook overlay) and the
        door, on this guest's engine: made for each new store's instances."""
        linker = wasmtime.Linker(self._engine)
        linker.define_wasi()
        define_shadows(linker, self)
        i32 = wasmtime.ValType.i32()  # a FuncType per engine: one shared between engines aborts
        linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), self._host_call, access_caller=True)
        return linker

    def _instantiate(self, store: wasmtime.Store, at_least: int = 0) -> None:
        """A new instance of the module in `store`, bound (the one way this guest makes
        one: a start, the move to the optimized engine, a compaction), its memory grown
        to `at_least` bytes for the state about to be copied in."""
        self._bind(store, self._linker.instantiate(store, self._module))
        missing = at_least - self._memory.data_len(store)
        if missing > 0:
            self._memory.grow(store, -(-missing // WASM_PAGE))

    @property
    def optimized(self) -> bool:
        """Whether this guest runs on the optimized engine (not yet, on a first start)."""
        return self._metered

    def _maybe_upgrade(self) -> None:
        """A guest on the baseline engine moves to the optimized one as soon as it is
        compiled, between turns. Its state is memory plus globals, and its WASI
        context is made again with the same mounts, so only a guest holding no
        descriptor beyond its mounts can move: one that holds a file waits for a turn
        that does not. The undo record does not move."""
        if self._metered or self._image_build is not None or not is_guest_cached():
            return
        if not self.ledger.only_fixed_open:
            return
        self._settle()
        old_store = self._require_store()
        old_memory, size = self._memory, self._memory.data_len(old_store)
        values = [g.value(old_store) for g in self._globals]
        self._use_engine(GuestEngine(load_guest_module(), get_engine(), metered=True))
        self._linker = self._new_linker()
        store = self._new_store()
        self._instantiate(store, at_least=size)
        ctypes.memmove(
            ctypes.addressof(self._memory.data_ptr(store).contents),
            ctypes.addressof(old_memory.data_ptr(old_store).contents), size,
        )
        for g, value in zip(self._globals, values):
            g.set_value(store, wasmtime.Val.i32(value) if isinstance(value, int) else value)
        self._store = store
        if self._checkpoint is not None:
            self._checkpoint.close()
        self._checkpoint = MemoryCheckpoint(no_undo_reason=MOVED_NO_UNDO)
        self.ledger = FdLedger(range(3, 3 + len(self._preopens())))
        self._take_checkpoint()
        log.info("guest.optimized", bytes=size)

    def _refuel(self, store: wasmtime.Store, fuel: int) -> None:
        if self._metered:
            store.set_fuel(fuel)

    def _adopt_image(self, store: wasmtime.Store, image: MemoryImage) -> None:
        if image.meta.get("globals") != len(self._globals) or len(image.globals) != len(self._globals):
            raise ImageError("the warm image does not match the guest module's globals")
        missing = image.size - self._memory.data_len(store)
        if missing > 0:
            self._memory.grow(store, -(-missing // WASM_PAGE))
        base = ctypes.addressof(self._memory.data_ptr(store).contents)
        map_image(image, base)
        for g, value in zip(self._globals, image.globals):
            g.set_value(store, wasmtime.Val.i32(value))
        assert self._checkpoint is not None
        self._checkpoint.adopt_image(base, image)
        self.quota_scratch = int(image.meta["quota_scratch"])
        self.overlay_scratch = int(image.meta["overlay_scratch"])

    def _boot_turn(self, from_image: bool) -> tuple[str, str | None]:
        """The first turn's code and its request (the shell's start, setup or build,
        called by name with JSON arguments as every later turn is). From an image the
        code is SERVE_TURN. A plain boot's code must first put our modules on
        sys.path and import the door: it is a fixed bootstrap built only from the
        host's own configuration (the guest's mounts and /app), never from anything
        a user or a notebook sends."""
        config = {
            "host_magics": dict(self.options.host_magics), "session_number": self.options.session_number,
            "environment": dict(self.options.environment),
        }
        if from_image:
            return SERVE_TURN, guest_request("start", {"config": config})
        request = None
        if self._image_build is not None:
            request = guest_request("build", {"preload": list(self._image_build)})
        elif self._shell:
            request = guest_request("setup", {"config": config})
        # Our modules and IPython are imported before the workspace joins sys.path,
        # so no file in /app can stand in for them; then, as in Jupyter, modules in
        # the notebook's folder are importable.
        code = (
            f"import sys; sys.path += {self._python_path()!r}; import _wasm_kernel_guest; "
            f"_wasm_kernel_guest.setup({GUEST_APP!r})"
        )
        if request is not None:
            code += f"; {SERVE_TURN}"
        return code + "; sys.path.insert(0, ''); del sys", request

    def _run_boot_turn(self, store: wasmtime.Store, code: str, request: str | None, *, booting: bool) -> None:
        output = TurnOutput(None, None, None)
        turn = Turn(output, None, None, None, True, request=request)
        self._turn, self.output = turn, output
        # Booting (not starting from an image) may make its objects immortal.
        self._booting = booting
        try:
            ptr = self._alloc(store, len(code))
            self.mem.write(store, ptr, code.encode())
            self._place_request(store, turn)
            status = self._turn_export(store, ptr, len(code))
        except (wasmtime.Trap, wasmtime.WasmtimeError) as err:
            raise GuestUnavailable(f"the guest interpreter failed to start: {_first_line(err)}") from None
        finally:
            self._booting = False
            self.drain_streams()
            self._turn, self.output = None, None
            output.finish()
        if status != 0:
            stderr = output.text("stderr")
            log.warning("guest.boot_failed", stderr=stderr[-4000:])
            # The exception's own line (a traceback ends with it) says what went wrong.
            lines = [line.strip() for line in stderr.splitlines() if line.strip()]
            raise GuestUnavailable(f"the guest interpreter failed to start: {lines[-1] if lines else 'no output'}")

    def _bind(self, store: wasmtime.Store, instance: wasmtime.Instance) -> None:
        """Point the host at `instance`'s memory, exports and globals."""
        exports = instance.exports(store)
        memory = exports["memory"]
        assert isinstance(memory, wasmtime.Memory)
        self._memory = memory
        self.mem = GuestMemory(memory)
        self._turn_export = exports["turn"]
        self._alloc = exports["host_alloc"]
        self._soft.raise_fn = exports.get(INTERRUPT_EXPORT)
        self._globals = [
            e for name, e in _named_exports(exports) if name.startswith(GLOBAL_EXPORT_PREFIX)
        ]
        self.originals = instantiate_shim(store, self._engine, memory)
        if getattr(self, "ring", None) is not None:
            self.ring.bind(self.mem.window(store))  # type: ignore[union-attr]

    def _teardown(self) -> None:
        self._owed = None
        if self._checkpoint is not None:
            self._checkpoint.close()
            self._checkpoint = None
        self._store = None
        self._turn = None
        self.originals = {}
        overlay = getattr(self, "overlay", None)
        if overlay is not None:
            overlay.close()  # its descriptor of the notebook's folder
        if self._private is not None:
            self._private_cleanup()
            self._private = None

    def _restart(self) -> None:
        self._teardown()
        self._boot()

    def measure_disk(self) -> None:
        """Count the disk quota's trees again: the host changed the workspace."""
        self._thread.call(lambda: self.quota.measure())

    def disk_usage(self) -> tuple[int, int]:
        """(bytes, entries) the quota counts now."""
        return self.quota.used_bytes, self.quota.used_entries

    def _run_turn(
        self,
        code: str,
        limits: TurnLimits,
        on_output: OnOutput | None,
        on_display: OnDisplay | None,
        on_input: OnInput | None,
        undo_point: bool,
        keep_output: bool = True,
        query: bool = False,
        request: str | None = None,
    ) -> TurnOutcome:
        """undo_point: a cell, the turn undo() undoes; queries are not. query: a
        query turn, whose value comes back in the outcome's query_result. request:
        the guest function the turn's code asks for (guest_request), if any."""
        self._maybe_upgrade()
        store = self._require_store()
        output = TurnOutput(on_output, limits.stdout_max_bytes, limits.stderr_max_bytes, on_pending=self._ticker.wake,
                            keep=keep_output)
        turn = Turn(output, on_display, on_input, limits.display_max_bytes, keep_output, query, request)
        # The checkpoint the last turn owes comes first: its bookkeeping calls run
        # with unlimited fuel, and its time is not this turn's.
        self._settle()
        budget = UNLIMITED_FUEL if limits.fuel is None else max(1, int(limits.fuel))
        self._refuel(store, budget)
        if limits.memory_bytes != self.memory_bytes and limits.memory_bytes is not None:
            self.memory_bytes = limits.memory_bytes
            store.set_limits(memory_size=limits.memory_bytes)
        self._stop_reason = None
        self._soft.begin_turn(limits.interrupt_grace_seconds)
        self._deadline_at = None if limits.deadline_seconds is None else time.monotonic() + limits.deadline_seconds
        self._fuel_deadline_at = None
        if not self._metered and limits.fuel is not None:
            # The baseline engine counts no fuel: the budget becomes the time it buys.
            self._fuel_deadline_at = time.monotonic() + limits.fuel / BASELINE_FUEL_PER_SECOND
        self.quota.set_limits(limits.disk_max_bytes, limits.disk_max_files)
        self.quota.hit = False
        self._turn, self.output = turn, output
        data = code.encode()
        memory_at_start = self._memory.data_len(store)  # one call: the turn's growth is measured against it
        start = time.perf_counter()
        trapped: BaseException | None = None
        self._running = True
        ticker = self._ticker
        ticker.enter(id(self), self._needs_ticks)
        try:
            store.set_epoch_deadline(1)
            ptr = self._alloc(store, len(data))
            self.mem.write(store, ptr, data)
            self._place_request(store, turn)
            self._turn_export(store, ptr, len(data))
        except (wasmtime.Trap, wasmtime.WasmtimeError) as err:
            trapped = err
        finally:
            ticker.leave(id(self))
            self._running = False
            self._soft.end_turn()
            self._settle_quota(store)
            self.drain_streams()
            self._turn, self.output = None, None
            output.finish()
        duration = (time.perf_counter() - start) * 1000
        remaining = _fuel_left(store)
        memory_at_end = self._memory.data_len(store)  # before a rollback or restart swaps the memory
        outcome = TurnOutcome(
            status="ok",
            stdout=output.text("stdout"),
            stderr=output.text("stderr"),
            stdout_truncated=output.truncated("stdout"),
            stderr_truncated=output.truncated("stderr"),
            display_truncated=turn.display_truncated,
            disk_full=self.quota.hit,
            interrupt_grace_expired=self._soft.grace_expired,
            fuel_consumed=0 if not self._metered else max(0, budget - remaining) if limits.fuel is not None
            else UNLIMITED_FUEL - remaining,
            memory_used_bytes=memory_at_end,
            memory_growth_bytes=max(0, memory_at_end - memory_at_start),
            duration_ms=duration,
            outputs=turn.outputs,
            query_result=turn.query_result,
        )
        if isinstance(trapped, wasmtime.ExitTrap):
            # os._exit() and friends call proc_exit directly: an exit the cell asked
            # for, not a fault, so the interpreter restarts instead of rolling back.
            outcome.status = "exit"
            outcome.exit_code = trapped.code
            outcome.process_exited = True
            self._restart()
            outcome.restarted = True
        elif trapped is not None:
            self._recover(outcome, trapped)
        elif turn.result is None:
            # The guest library was broken by the cell: treat as a crash.
            self._recover(outcome, None)
        elif turn.result.status == "exit":
            outcome.status = "exit"
            outcome.exit_code = turn.result.exit_code
            outcome.payload = turn.result.payload
            self._restart()
            outcome.restarted = True
        else:
            outcome.status = turn.result.status
            outcome.error = turn.result.error
            outcome.payload = turn.result.payload
            outcome.exit_code = 0 if turn.result.status == "ok" else 1
            self._owed = undo_point
        self._stop_reason = None
        self._deadline_at = self._fuel_deadline_at = None
        return outcome

    def _settle_quota(self, store: wasmtime.Store) -> None:
        """Count the turn's lazily counted writes now: the host may change files and
        a rollback may move descriptors before the next turn (disk_quota.py)."""
        try:
            self.quota.settle_all(store)
        except Exception as err:  # count the trees again rather than trust a guess
            log.warning("guest.quota_settle_failed", error=str(err))
            self.quota.unsettled, self.quota.unsettled_bytes = {}, 0
            self.quota.at_end.clear()
            self.quota.measure()

    def _recover(self, outcome: TurnOutcome, trapped: BaseException | None) -> None:
        outcome.status = "trap"
        outcome.exit_code = None
        outcome.trap = self._classify(trapped)
        log.info("guest.trap", trap=outcome.trap, detail=_first_line(trapped))
        # The stop is handled: the rollback's own shim calls must not be stopped too.
        self._stop_reason = None
        self._deadline_at = self._fuel_deadline_at = None
        if self._checkpoint is not None and self._checkpoint.taken and self._checkpoint_error is None:
            try:
                self._rollback()
                outcome.rolled_back = True
                return
            except Exception as err:  # fall back to a fresh interpreter, files kept
                log.warning("guest.rollback_failed", error=str(err))
        self._restart()
        outcome.restarted = True

    def _classify(self, trapped: BaseException | None) -> TrapReason:
        if self._stop_reason is not None:
            return self._stop_reason
        if isinstance(trapped, wasmtime.Trap):
            if trapped.trap_code == wasmtime.TrapCode.OUT_OF_FUEL:
                return "out_of_fuel"
            if trapped.trap_code == wasmtime.TrapCode.STACK_OVERFLOW:
                return "stack_overflow"
            if trapped.trap_code == wasmtime.TrapCode.INTERRUPT:
                return "interrupted"
        if self.memory_bytes is not None and self._store is not None:
            if self._memory.data_len(self._store) + MEMORY_HEADROOM >= self.memory_bytes:
                return "memory"
        return "crash"

    def _scratch(self) -> int:
        # Between turns the guest's shadow stack is empty: the bytes just below the
        # stack pointer are free, so host bookkeeping calls can use them.
        sp = self._globals[0].value(self._require_store()) if self._globals else 0
        return int(sp) - 64

    def _fd_close(self, fd: int) -> int:
        if self.overlay is not None:
            self.overlay.forget(fd)
        return int(self.originals["fd_close"](self._require_store(), fd))

    def _fd_tell(self, fd: int) -> int | None:
        store, scratch = self._require_store(), self._scratch()
        if self.originals["fd_tell"](store, fd, scratch) != 0:
            return None
        return int(struct.unpack("<Q", self.mem.read(store, scratch, 8))[0])

    def _fd_seek(self, fd: int, offset: int) -> None:
        self.originals["fd_seek"](self._require_store(), fd, offset, 0, self._scratch())

    def _settle(self) -> None:
        """Take the checkpoint the last turn owes, if any."""
        owed, self._owed = self._owed, None
        if owed is not None:
            self._take_checkpoint(owed)

    def _take_checkpoint(self, undo_point: bool = False) -> None:
        store = self._store
        if store is None:
            return
        try:
            self._refuel(store, UNLIMITED_FUEL)  # the bookkeeping calls below run shim code
            self.ledger.commit(self._fd_close, self._fd_tell, undo_point=undo_point)
            assert self._checkpoint is not None
            self._checkpoint.take(store, self._memory, self._globals, undo_point=undo_point)
            self._checkpoint_error = None
        except Exception as err:
            self._checkpoint_error = err
            log.warning("guest.checkpoint_failed", error=str(err))

    def _rollback(self) -> None:
        store = self._require_store()
        self._refuel(store, UNLIMITED_FUEL)  # an out-of-fuel trap left none for the shim calls
        checkpoint = self._checkpoint
        assert checkpoint is not None
        if self._memory.data_len(store) - checkpoint.size > COMPACT_AFTER_GROWTH:
            self._restore_into_fresh_instance(store, checkpoint)
        else:
            checkpoint.restore(store, self._memory, self._globals)
        self.ledger.rollback(self._fd_close, self._fd_seek)

    def _undo_refusal(self) -> str | None:
        self._settle()
        checkpoint = self._checkpoint
        if self._store is None or checkpoint is None or not checkpoint.taken:
            return NO_UNDO_YET
        if self._checkpoint_error is not None:
            return f"the checkpoint after the last turn failed ({_first_line(self._checkpoint_error)})"
        reason = checkpoint.undo_unavailable_reason
        if reason is None and not self.ledger.can_undo:
            reason = "the last cell's descriptor record is missing"
        return reason

    def _undo(self) -> bool:
        reason = self._undo_refusal()
        if reason is not None:
            log.info("guest.undo_refused", reason=reason)
            return False
        store = self._require_store()
        self._refuel(store, UNLIMITED_FUEL)  # the descriptor bookkeeping runs shim code
        checkpoint = self._checkpoint
        assert checkpoint is not None and checkpoint.undo_size is not None
        grown = self._memory.data_len(store) - checkpoint.undo_size
        try:
            checkpoint.revert()
            if grown > COMPACT_AFTER_GROWTH:  # as a rollback: give the undone growth back
                self._restore_into_fresh_instance(store, checkpoint)
            else:
                checkpoint.restore(store, self._memory, self._globals)
            closed = self.ledger.undo(self._fd_close, self._fd_seek)
        except Exception as err:
            log.warning("guest.undo_failed", error=str(err))
            self._restart()
            raise UndoFailed(f"undo failed ({_first_line(err)}); the interpreter was restarted, files kept") from err
        log.info("guest.undone", copied_bytes=checkpoint.last_copied, closed_fds=len(closed))
        return True

    def _restore_into_fresh_instance(self, store: wasmtime.Store, checkpoint: MemoryCheckpoint) -> None:
        """Memory a failed turn grew is never reused by the restored allocator: each
        such rollback would eat wasm32 address space until nothing is left. So after
        a large growth the checkpoint goes into a new instance of the module in the
        same store (WASI descriptors live in the store and are kept), and the old
        memory's pages are handed back to the host."""
        old = self._memory
        old_base, old_size = ctypes.addressof(old.data_ptr(store).contents), old.data_len(store)
        self._instantiate(store, at_least=checkpoint.size)
        checkpoint.restore_fresh(store, self._memory, self._globals)
        release_pages(old_base, old_size)
        log.info("guest.compacted", released_bytes=old_size, kept_bytes=checkpoint.size)

    # --- the host.call door (guest thread, inside a turn) -----------------------


def guest_mounts(site: SiteMount | None, packages: bool) -> list[tuple[str, bool]]:
    tree = runtime_tree()
    mounts = [(GUEST_LIB, False), (tree.mpl_data_guest_path, False), (GUEST_SUPPORT, False)]
    if site is not None:
        mounts.append((site.guest_path, site.writable))
    if packages:
        mounts.append((guest_packages_path(), False))
    return mounts


def _named_exports(exports: Any) -> list[tuple[str, Any]]:
    return [(name, exports[name]) for name in exports]


def _fuel_left(store: wasmtime.Store) -> int:
    try:
        return int(store.get_fuel())
    except wasmtime.WasmtimeError:
        return 0


def _first_line(err: BaseException | None) -> str:
    if err is None:
        return "the cell ended without a result"
    text = str(err).strip().splitlines()
    return text[0] if text else type(err).__name__


__all__ = ["PythonGuest", "guest_mounts"]
