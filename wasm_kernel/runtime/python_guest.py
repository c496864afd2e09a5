"""A persistent CPython interpreter in a wasm store, and its life: start (from a warm
image or a plain boot), turns under limits, restart, stop.

The guest keeps one instance for its whole life. Its other jobs are mixins it
inherits, each in its own module: what stops a turn (turn_stops.py), checkpoints,
rollback and undo (checkpoints.py), warm images (guest_image.py), the engine and its
fuel (engine_upgrade.py), where its folders are mounted (guest_layout.py) and the
host door (host_door.py).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import wasmtime

from ..host.guest_memory import GuestMemory
from ..host.log import get_logger
from ..host.memory_checkpoint import MemoryCheckpoint
from ..host.memory_image import ImageError, MemoryImage
from ..host.state_file import SavedState, StateRefused
from ..host.wasi_shim import Original, instantiate_shim
from ..host.wasm_binary import GLOBAL_EXPORT_PREFIX, INTERRUPT_EXPORT
from ..host.wasmtime_private import int_call, set_epoch_callback
from .checkpoints import Checkpoints, first_line
from .disk_quota import SCRATCH_BYTES as QUOTA_SCRATCH_BYTES
from .disk_quota import DiskQuota, tree_usage_of
from .engine_upgrade import UNLIMITED_FUEL, EngineUpgrade, fuel_left
from .fd_ledger import FdLedger
from .course_mount import course_mount
from .guest_config import (
    GUEST_APP,
    GUEST_ENV,
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
)
from .guest_image import GuestImage
from .guest_devices import make_device_folder
from .guest_layout import GuestLayout, guest_mounts
from .guest_scratch import GuestScratch
from . import signal_words
from .guest_thread import GuestThread
from .hibernation import Hibernated, Hibernation
from .network_door import NetworkDoor
from .child_python import ChildRunner, ChildTally, child_request
from .host_door import HostDoor, Turn, guest_request
from .notebook_overlay import SCRATCH_BYTES, NotebookOverlay
from .output import OnOutput, TurnOutput
from .soft_interrupt import SoftInterrupt
from .stream_ring import StreamRing
from .turn_stops import StopNow, TurnStops
from .wasi_shadows import READDIR_SCRATCH_BYTES, ReaddirListings, define_shadows
from .warm_image import TMP_FOLDER, copy_tmp_tree
from .wire import CHILD_TURN, COMM_MSG_TYPES, QUERY_OPS, SERVE_TURN

log = get_logger("wasm_kernel.runtime")

ARGV0 = "/usr/local/bin/python3"
WASM_PAGE = 1 << 16


# Each base is one of the guest's jobs; they declare what they use of each other as
# attributes only, so their order does not matter.
class PythonGuest(TurnStops, Checkpoints, GuestImage, Hibernation, EngineUpgrade, GuestLayout, NetworkDoor, HostDoor):
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
        state_key: str | None = None,
        child_of: PythonGuest | None = None,
    ) -> None:
        """Made by provisioning.new_guest, which picks the engine, stages the site and
        finds the warm images. site: the packages folder on sys.path (the staged
        IPython site for a shell guest). images: where the warm image comes from, if
        any. image_build: boot only the shared part, importing these modules, for
        save_image(). state_key: what a saved state must have been saved with to be
        resumed here (the warm image's key: version, guest, site, code, preload).
        child_of: a `python` child of that guest (child_python.py): bare, on its mounts
        and its /tmp, for one turn, never checkpointed."""
        self.workspace = Path(workspace).resolve()
        self.memory_bytes = memory_bytes
        self.options = options or GuestOptions()
        self._shell = shell
        self._io_lock = threading.RLock()
        self._stop_lock = threading.Lock()
        self._turn_serial = 0
        self._turn_tid = 0
        self._stopping = False
        self._protected: tuple[int, int] | None = None
        self._clock_stopped_at: float | None = None
        self._engine_choice = engine  # the one a child of this guest runs on
        self._use_engine(engine)
        self._fuel_deadline_at: float | None = None
        self._cpu_clock: int | None = None
        self._cpu_started = 0.0
        self._cpu_deadline_at: float | None = None
        self._site = site
        # The process's course mount (set before its first guest); a child has its parent's.
        self._course = course_mount() if shell else child_of._course if child_of is not None else None
        self._one_shot = child_of is not None
        self._shared_tmp = child_of._tmp_folder() if child_of is not None else None
        self._children = ChildRunner(self, self.options.child_depth, self._new_child)
        self._images = images
        self._image_build = image_build
        self.boot_notice: str | None = None  # why this guest booted without its warm image
        self.started_from_image = False
        self._started_image: MemoryImage | None = None
        self._state_key = state_key
        self.resumed: Hibernated | None = None  # the saved state this guest woke from
        self.resume_notice: str | None = None  # why a saved state was found and not used
        self._resume_pending = True  # only the first boot resumes: a restart is a fresh start
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
    ) -> TurnOutcome:
        """Run one cell through the guest's IPython shell, as `options` asks (its
        keep_output=False: output handed to on_output/on_display is not also kept in
        the outcome)."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        if not self._shell:
            raise GuestUnavailable("this interpreter has no shell; use run_source()")
        options = options or CellOptions()
        return self._call_guest("run", {"request": options.request(code)}, limits=limits, on_output=on_output,
                                on_display=on_display, on_input=on_input, undo_point=True,
                                keep_output=options.keep_output)

    @property
    def executor(self) -> GuestThread:
        """The thread every call into this guest runs on (GuestThread.call runs inline there)."""
        return self._thread

    def run_source(self, source: str, *, limits: TurnLimits, on_output: OnOutput | None = None) -> TurnOutcome:
        """Run Python source as a turn of its own, outside any shell. It must end by
        sending its result (`_wasm_kernel_guest.call({"op": "result", ...})`)."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self._run_turn, source, limits, on_output, None, None, False)

    def run_child(self, args: Mapping[str, Any], *, limits: TurnLimits, output: TurnOutput) -> TurnOutcome:
        """A child's one turn: run `python` with these arguments (child_python.py), its
        streams into `output`, on the caller's thread (the child's own executor)."""
        if not self._one_shot:
            raise GuestUnavailable("only a child interpreter runs a program")
        return self._thread.call(self._run_turn, CHILD_TURN, limits, None, None, None, False, True, False,
                                 child_request(dict(args)), output)

    def _new_child(self, tally: ChildTally) -> PythonGuest:
        """A `python` child of this guest (child_python.ChildRunner makes one per program)."""
        options = dataclasses.replace(
            self.options, history=None, keep_state=None, resume=None, warm_image=False, host_magics={},
            child_depth=self.options.child_depth + 1, child_tally=tally,
        )
        return PythonGuest(self.workspace, engine=self._engine_choice, site=self._site, memory_bytes=self.memory_bytes,
                           name="wasm-kernel-child", options=options, shell=False, child_of=self)

    def _tmp_folder(self) -> Path:
        """The host folder that is this guest's /tmp (a child's is its parent's)."""
        if self._shared_tmp is not None:
            return self._shared_tmp
        assert self._private is not None
        return self._private / "tmp"

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

    def restart(self) -> None:
        """A fresh interpreter on the same workspace."""
        self._thread.call(self._restart)

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

    def _boot(self) -> None:
        state = None
        if self._resume_pending:
            self._resume_pending = False
            state = self._state_to_resume()
        image = self._image_for_boot()
        if state is not None:
            try:
                self._start(image, state)
                self.resumed = self._resume_result(state)
                return
            except (StateRefused, GuestUnavailable, ImageError, OSError, wasmtime.WasmtimeError,
                    wasmtime.Trap) as err:
                log.warning("guest.resume_failed", error=str(err)[:2000])
                self._teardown()
                # The user's line names what was wrong with the state, never a wasm trap's text.
                self._refuse_state(str(err) if isinstance(err, StateRefused) else
                                   "the guest could not take it back (an internal error, in the kernel's log)", state)
            finally:
                state.close()
        if image is not None:
            try:
                self._start(image)
                return
            except (GuestUnavailable, ImageError, OSError, wasmtime.WasmtimeError, wasmtime.Trap) as err:
                self.boot_notice = (
                    f"The warm image could not be used ({first_line(err)}); this sandbox started "
                    "without it, which takes longer."
                )
                log.warning("guest.image_start_failed", error=first_line(err))
                self._teardown()
        self._start(None)

    def _start(self, image: MemoryImage | None, state: SavedState | None = None) -> None:
        """Make the store and instance; then either map `image` and run the
        per-sandbox start, or boot the interpreter and the shell from scratch, or put
        a saved `state` back (over `image` if it was saved against it) and wake it."""
        scratch = GuestScratch()
        self._private = scratch.path
        # The guest's /tmp must not outlive it, even if close() is never called; one
        # left by a killed process is swept by the next GuestScratch.
        self._private_cleanup = weakref.finalize(self, scratch.remove)
        guest_tmp = self._tmp_folder()
        if self._shared_tmp is None:
            guest_tmp.mkdir()
        make_device_folder(self._private)
        # The quota counts the workspace and this guest's /tmp, in the session's ledger
        # with every other writer of the session when it has one; the image's /tmp
        # is counted there before it is copied in. A child's /tmp is its parent's: the
        # parent gives it back when it goes, so the child owns no tree of its own.
        self.quota = DiskQuota([self.workspace, guest_tmp], ledger=self.options.disk_ledger,
                               own_trees=self._shared_tmp is None)
        if image is not None and (image.folder / TMP_FOLDER).is_dir():
            self.quota.charge_own(*tree_usage_of(image.folder / TMP_FOLDER))
            copy_tmp_tree(image.folder / TMP_FOLDER, guest_tmp)
        (self._private / "stdin").write_bytes(b"")
        if self._uniform_layout() and self.options.packages is None:
            (self._private / "packages").mkdir()  # the mount exists in every shell guest, empty without %pip
        self.overlay: NotebookOverlay | None = None
        preopens = self._preopens()
        if self.options.notebook is not None:
            self.overlay = NotebookOverlay(self.options.notebook, self.workspace, len(preopens) + 1, len(preopens) + 2)
        self.ledger = FdLedger(range(3, 3 + len(preopens)))
        self.output: TurnOutput | None = None
        self.originals: dict[str, Original] = {}
        self.listings = ReaddirListings()
        self.ring: StreamRing | None = None  # registered by the guest as it boots or starts
        self._linker = self._new_linker()
        store = self._new_store()
        self._instantiate(store)
        self._store = store
        self._checkpoint = MemoryCheckpoint()
        if state is not None:
            self._apply_state(store, image, state)
            if state.manifest.get("base") is None:
                image = None  # not started over an image: the next save is a full one too
        elif image is not None:
            self._adopt_image(store, image)
        else:
            # Allocated before the first checkpoint, so every rollback keeps them.
            self.quota_scratch = self._alloc(store, QUOTA_SCRATCH_BYTES) & 0xFFFFFFFF
            self.readdir_scratch = self._alloc(store, READDIR_SCRATCH_BYTES) & 0xFFFFFFFF
            self.overlay_scratch = 0
            if self.overlay is not None or self._image_build is not None:
                self.overlay_scratch = self._alloc(store, SCRATCH_BYTES) & 0xFFFFFFFF
        if self.overlay is not None:
            self.overlay.set_scratch(self.overlay_scratch)
            self.overlay.quota = self.quota
        boot = self._boot_turn(image is not None, resume=state is not None)
        self._run_boot_turn(store, *boot, booting=image is None and state is None)
        self._find_signal_words(store)
        self.started_from_image = image is not None
        self._started_image = image
        if self._image_build is None and not self._one_shot:
            # The first checkpoint: from an image, only the pages the start wrote;
            # else all of memory (~35 ms at 40 MB). Queued behind this job, it runs
            # while the caller gets its sandbox, before any cell.
            self._thread.submit(self._take_checkpoint)

    def _find_signal_words(self, store: wasmtime.Store) -> None:
        """Where CPython keeps its interrupt words in this build (signal_words.py), or
        None: soft interrupts are then raised by the epoch callback, as before."""
        self._soft.words = None
        raise_fn = self._soft.raise_fn
        if raise_fn is not None:
            self._soft.words = signal_words.for_build(store, self.mem.window(store), raise_fn)

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
        self._grow_to(store, at_least)
        if getattr(self, "ring", None) is not None:
            # Once the memory has its size: a window taken before the growth keeps the
            # new instance's first size, and the ring may lie past it (a compaction).
            self.ring.bind(self.mem.window(store))  # type: ignore[union-attr]

    def _grow_to(self, store: wasmtime.Store, size: int) -> None:
        """Grow the memory to at least `size` bytes, for state about to be copied in."""
        missing = size - self._memory.data_len(store)
        if missing > 0:
            self._memory.grow(store, -(-missing // WASM_PAGE))

    def _boot_turn(self, from_image: bool, *, resume: bool = False) -> tuple[str, str | None]:
        """The first turn's code and its request (the shell's start, setup or build,
        called by name with JSON arguments as every later turn is). From an image the
        code is SERVE_TURN. A plain boot's code must first put our modules on
        sys.path and import the door: it is a fixed bootstrap built only from the
        host's own configuration (the guest's mounts and /app), never from anything
        a user or a notebook sends."""
        config = {
            "host_magics": dict(self.options.host_magics), "session_number": self.options.session_number,
            "environment": dict(self.options.environment), "shell_commands": bool(self.options.shell_commands),
        }
        if resume:
            return SERVE_TURN, guest_request("resume", {"config": config})
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
            f"import sys; sys.path += {self._python_path()!r}; import _wasm_kernel_boot; "
            f"_wasm_kernel_boot.setup({GUEST_APP!r})"
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
            raise GuestUnavailable(f"the guest interpreter failed to start: {first_line(err)}") from None
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
        self._turn_export = int_call(store, exports["turn"])
        self._alloc = int_call(store, exports["host_alloc"])
        self._soft.raise_fn = exports.get(INTERRUPT_EXPORT)
        self._globals = [
            e for name, e in _named_exports(exports) if name.startswith(GLOBAL_EXPORT_PREFIX)
        ]
        self.originals = instantiate_shim(store, self._engine, memory)

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
        quota = getattr(self, "quota", None)
        # The ledger gives the guest's /tmp back once its private folder is gone.
        if quota is not None:
            quota.close(self._remove_private)
        else:
            self._remove_private()

    def _remove_private(self) -> None:
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
        output: TurnOutput | None = None,
    ) -> TurnOutcome:
        """undo_point: a cell, the turn undo() undoes; queries are not. query: a
        query turn, whose value comes back in the outcome's query_result. request:
        the guest function the turn's code asks for (guest_request), if any."""
        if not self._one_shot:
            self._maybe_upgrade()
        store = self._require_store()
        if output is None:
            output = TurnOutput(on_output, limits.stdout_max_bytes, limits.stderr_max_bytes,
                                on_pending=self._ticker.wake, keep=keep_output)
        turn = Turn(output, on_display, on_input, limits.display_max_bytes, keep_output, query, request, limits,
                    self.options.child_tally)
        # The checkpoint the last turn owes comes first: its bookkeeping calls run
        # with unlimited fuel, and its time is not this turn's.
        self._settle()
        self.listings.clear()
        budget = UNLIMITED_FUEL if limits.fuel is None else max(1, int(limits.fuel))
        self._refuel(store, budget)
        if limits.memory_bytes != self.memory_bytes and limits.memory_bytes is not None:
            self.memory_bytes = limits.memory_bytes
            store.set_limits(memory_size=limits.memory_bytes)
        self._arm_stops(limits)
        self.quota.set_limits(limits.disk_max_bytes, limits.disk_max_files)
        self.quota.hit = False
        self._turn, self.output = turn, output
        data = code.encode()
        memory_at_start = self._memory.data_len(store)  # one call: the turn's growth is measured against it
        start = time.perf_counter()
        trapped: BaseException | None = None
        self._running = True
        ticker = self._ticker
        ticker.enter(id(self), self._needs_ticks, None if self._epochs else self._tick)
        try:
            if self._epochs:  # an engine without epochs has no deadline to set
                store.set_epoch_deadline(1)
            ptr = self._alloc(store, len(data))
            self.mem.write(store, ptr, data)
            self._place_request(store, turn)
            self._turn_export(store, ptr, len(data))
        except (wasmtime.Trap, wasmtime.WasmtimeError, StopNow) as err:
            trapped = err
        finally:
            ticker.leave(id(self))
            self._running = False
            self._soft.end_turn()
            self._settle_quota(store)
            self.drain_streams()
            turn.net.close_all()  # a transfer never outlives its turn
            self._turn, self.output = None, None
            output.finish()
        duration = (time.perf_counter() - start) * 1000
        cpu_ms = (self.turn_cpu_seconds() + turn.child_cpu_seconds) * 1000
        remaining = fuel_left(store) if self._counts_fuel else 0  # a store without fuel raises inside
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
            fuel_consumed=0 if not self._counts_fuel else max(0, budget - remaining) if limits.fuel is not None
            else UNLIMITED_FUEL - remaining,
            cpu_ms=cpu_ms,
            memory_used_bytes=memory_at_end,
            memory_growth_bytes=max(0, memory_at_end - memory_at_start),
            duration_ms=duration,
            network_requests=turn.net.requests,
            network_bytes=turn.net.bytes,
            outputs=turn.outputs,
            query_result=turn.query_result,
        )
        if isinstance(trapped, wasmtime.ExitTrap):
            # os._exit() and friends call proc_exit directly: an exit the cell asked
            # for, not a fault, so the interpreter restarts instead of rolling back.
            outcome.status = "exit"
            outcome.exit_code = trapped.code
            outcome.process_exited = True
            if not self._one_shot:  # a child ends with its one turn
                self._restart()
                outcome.restarted = True
        elif self._one_shot and (trapped is not None or turn.result is None):
            outcome.status, outcome.exit_code = "trap", None
            outcome.trap = self._classify(trapped)
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
            outcome.exit_code = turn.result.exit_code
            self._owed = undo_point
        self._disarm_stops()
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
        # Between turns this writer holds no reservation: the drive, the magics and
        # the session's other kernels may use all the room there is.
        self.quota.release()


def _named_exports(exports: Any) -> list[tuple[str, Any]]:
    return [(name, exports[name]) for name in exports]


# guest_mounts stays importable from here, where provisioning imports it.
__all__ = ["PythonGuest", "guest_mounts"]
