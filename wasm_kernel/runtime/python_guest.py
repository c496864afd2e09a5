"""A persistent CPython interpreter in a wasm store, and its life: start (from a warm
image, a saved state or a plain boot), turns under limits, restart, stop.

The guest is made of parts, each in its own module, each holding its own state and
given the parts it needs: the store and instance (guest_instance.py), the folders it
sees (guest_layout.py), what stops a turn (turn_stops.py), the stream hand-over
(guest_streams.py), the door and the network door (host_door.py, network_door.py),
the start's files (start_files.py), checkpoints, rollback and undo
(checkpoints.py), warm images (guest_image.py), saved states (hibernation.py) and the
move to the optimized engine (engine_upgrade.py). This module wires them together
and runs the turns; every call into the guest runs on its one thread.
"""

from __future__ import annotations

import dataclasses
import json
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import wasmtime

from ..host.log import get_logger
from ..host.memory_image import ImageError, MemoryImage
from ..host.network_policy import NetworkPolicy
from ..host.memory_history import MemoryHistory
from ..host.state_file import SavedState, StateRefused
from ..host.wasmtime_private import set_epoch_callback
from . import signal_words
from .checkpoints import Checkpoints, first_line
from .descriptor_places import DescriptorPlaces
from .points import PointInfo, Points, RewindRefused, Rewound
from .child_python import ChildRunner, ChildTally, child_request
from .course_mount import course_mount
from .disk_quota import SCRATCH_BYTES as QUOTA_SCRATCH_BYTES
from .disk_quota import DiskQuota, tree_usage_of
from .engine_upgrade import EngineUpgrade
from .fd_ledger import FdLedger
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
    TurnLimits,
    TurnOutcome,
    SiteMount,
)
from .guest_devices import make_device_folder
from .guest_image import GuestImage
from .guest_instance import UNLIMITED_FUEL, GuestInstance, ScratchAreas
from .guest_layout import GuestLayout, guest_mounts
from .guest_scratch import GuestScratch
from .guest_streams import GuestStreams
from .guest_thread import GuestThread
from .guest_turns import TurnRunner
from .hibernation import Hibernated, Hibernation
from .debug_door import DebugDoor
from .host_door import HostDoor, guest_request
from .nested_work import NestedWork
from .network_door import NetworkDoor
from .notebook_overlay import SCRATCH_BYTES, NotebookOverlay
from .output import OnOutput, TurnOutput
from .shadow_ports import ShadowPorts
from .soft_interrupt import SoftInterrupt
from .start_files import StartFiles
from .turn_stops import TurnStops
from .wasi_shadows import READDIR_SCRATCH_BYTES, define_shadows
from .warm_image import TMP_FOLDER, copy_tmp_tree
from .wire import CHILD_TURN, COMM_MSG_TYPES, QUERY_OPS, SERVE_TURN

log = get_logger("wasm_kernel.runtime")

ARGV0 = "/usr/local/bin/python3"
U32 = 0xFFFFFFFF


class PythonGuest:
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
        self.options = options = options or GuestOptions()
        self._shell = shell
        self._one_shot = child_of is not None
        self._image_build = image_build
        # The process's course mount (set before its first guest); a child has its parent's.
        course = course_mount() if shell else child_of.layout.course if child_of is not None else None
        self.layout = GuestLayout(self.workspace, options, shell=shell, site=site, course=course,
                                  shared_tmp=child_of.layout.tmp_folder() if child_of is not None else None)
        self.instance = GuestInstance(engine, memory_bytes, define_imports=self._define_imports,
                                      configure_store=self._configure_store, on_bind=self._on_bind)
        self.streams = GuestStreams()
        self.files = StartFiles()
        self.stops = TurnStops(self.instance, SoftInterrupt(), self.streams)
        self.network = NetworkDoor(self.instance, self.stops, options)
        children = ChildRunner(self.instance, self.stops, self.files, shell_commands=bool(options.shell_commands),
                               depth=options.child_depth, new_child=self._new_child)
        self.debug = DebugDoor()  # the debugger's requests while a cell runs (debug_door.py)
        self.debug.wake = self.stops.ask_for_work
        self.nested = NestedWork(self.instance, self.stops, self.streams)  # subshells' work (nested_work.py)
        self.door = HostDoor(self.instance, self.stops, self.streams, self.network, children, self.debug,
                             self.nested, options)
        self._ports = ShadowPorts(self.instance, self.files, self.streams, self.stops, self.layout.dev_fd)
        self.checkpoints = Checkpoints(self.instance, self.files, self.stops, self._restart)
        self.points: Points | None = None
        if options.points is not None and shell and image_build is None and child_of is None:
            limits = options.points
            keeping = options.keep_state
            self.points = Points(self.instance, self.files, self.checkpoints,
                                 DescriptorPlaces(self.instance, self.files, self.layout),
                                 MemoryHistory(limits.folder, limits.max_points, limits.max_bytes),
                                 state_key=getattr(keeping, "key", None), fixup=self._resume_fixup)
            self.checkpoints.points = self.points
        self.image = GuestImage(self.instance, self.checkpoints, self.files, self.layout, images=images,
                                image_build=image_build, warm_image=options.warm_image)
        self.upgrade = EngineUpgrade(self.instance, self.checkpoints, self.files, self.layout,
                                     image_build=image_build is not None)
        self.hibernation = Hibernation(self.instance, self.checkpoints, self.files, self.image, self.layout,
                                       options, state_key)
        self.turns = TurnRunner(self.instance, self.stops, self.door, self.streams, self.files, self.checkpoints,
                                self.upgrade, restart=self._restart, one_shot=self._one_shot,
                                child_tally=options.child_tally)
        self.boot_notice: str | None = None  # why this guest booted without its warm image
        self.started_from_image = False
        self.resumed: Hibernated | None = None  # the saved state this guest woke from
        self._resume_pending = True  # only the first boot resumes: a restart is a fresh start
        self._thread = GuestThread(name)
        self._closed = False
        self._points_saved = False  # the last save kept the points: their files outlive this guest
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
        request = guest_request("run", {"request": options.request(code)})
        points = self.points

        def turn() -> TurnOutcome:
            if points is not None:  # what this cell's point will say about it
                points.label_next(options.history_cell or code, options.execution_count,
                                  options.store_history and not options.silent, not options.first_part)
            return self.turns.run(SERVE_TURN, limits, on_output, on_display, on_input, True, options.keep_output,
                                  False, request)

        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(turn)

    @property
    def executor(self) -> GuestThread:
        """The thread every call into this guest runs on (GuestThread.call runs inline there)."""
        return self._thread

    def run_source(self, source: str, *, limits: TurnLimits, on_output: OnOutput | None = None) -> TurnOutcome:
        """Run Python source as a turn of its own, outside any shell. It must end by
        sending its result (`_wasm_kernel_guest.call({"op": "result", ...})`)."""
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")
        return self._thread.call(self.turns.run, source, limits, on_output, None, None, False)

    def run_child(self, args: Mapping[str, Any], *, limits: TurnLimits, output: TurnOutput) -> TurnOutcome:
        """A child's one turn: run `python` with these arguments (child_python.py), its
        streams into `output`, on the caller's thread (the child's own executor)."""
        if not self._one_shot:
            raise GuestUnavailable("only a child interpreter runs a program")
        return self._thread.call(self.turns.run, CHILD_TURN, limits, None, None, None, False, True, False,
                                 child_request(dict(args)), output)

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

    def run_inside(self, code: str | None, *, limits: TurnLimits, options: CellOptions | None = None,
                   comm: tuple[str, Mapping[str, Any]] | None = None, on_output: OnOutput | None = None,
                   on_display: OnDisplay | None = None) -> TurnOutcome | None:
        """A kernel subshell's cell (code) or comm message (comm: its type and
        message), run inside the turn that runs now, at its next safe point, from
        any thread but the guest's (nested_work.py). None if no turn runs or it
        ended first: the caller runs it as a turn of its own."""
        if self._closed or not self._shell:
            return None
        if comm is not None:
            if comm[0] not in COMM_MSG_TYPES:
                raise ValueError(f"not a comm message: {comm[0]!r}")
            name, args = "comm", {"msg_type": comm[0], "msg": dict(comm[1])}
        else:
            name, args = "run", {"request": (options or CellOptions()).request(code or "")}
        return self.nested.run(name, json.loads(json.dumps(args, default=str)), limits=limits, on_output=on_output,
                               on_display=on_display)

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
        return self._thread.call(self.turns.run, SERVE_TURN, limits, on_output, on_display, on_input, undo_point,
                                 keep_output, query, request)

    def restart(self) -> None:
        """A fresh interpreter on the same workspace."""
        self._thread.call(self._restart)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.stops.reason = "interrupted"  # a running turn stops at its next tick
        self.instance.ticker.wake()
        self._thread.call(self._teardown)
        if self.points is not None:  # the line ends: its deltas go, unless a saved state names them
            self.points.history.close(keep_files=self._points_saved)
        self._thread.stop()

    def interrupt(self) -> bool:
        """Interrupt the running turn, if any (TurnStops.interrupt). True if one was running."""
        return self.stops.interrupt()

    def undo(self) -> bool:
        """Put the interpreter back to how it was before the last cell that completed
        (ok or raising; a cell stopped by a limit was already rolled back, so it does
        not count). One level: False if there is nothing to undo, and then
        `undo_unavailable_reason()` says why. Files are not rolled back; files the
        undone cell opened are closed. Raises UndoFailed if it broke off half way."""
        self._require_open()
        return self._thread.call(self.checkpoints.undo)

    def undo_unavailable_reason(self) -> str | None:
        """None if undo() would undo a cell, else why it would not."""
        if self._closed:
            return "the sandbox is closed"
        return self._thread.call(self.checkpoints.undo_refusal)

    def timeline(self, wait: bool = True) -> list[PointInfo]:
        """The points this interpreter line keeps, oldest first (points.py); [] if none.
        wait=False: as they are now, without waiting for a running cell (the panel's
        request during one): the last cell's point may not be taken yet."""
        self._require_open()
        points = self.points
        if points is None:
            return []
        if not wait:
            return points.timeline()
        return self._thread.call(lambda: (self.checkpoints.settle(), points.timeline())[1])

    def rewind(self, seq: int, code: str, count: int | None, reopen: bool = False) -> Rewound:
        """The interpreter back to point `seq` (Points.rewind): RewindRefused with
        nothing changed, or UndoFailed if it broke off (restarted, files kept)."""
        self._require_open()
        points = self.points
        if points is None:
            raise RewindRefused("this interpreter keeps no points")
        return self._thread.call(points.rewind, seq, code, count, reopen)

    @property
    def history_bytes(self) -> int:
        """Bytes the points' deltas keep on disk (counted apart from the workspace)."""
        points = self.points
        return 0 if points is None else points.history.bytes_kept

    def wait_idle(self) -> None:
        """Wait until background work (the last checkpoint) is done."""
        self._thread.call(self.checkpoints.settle)

    def checkpoint_soon(self) -> None:
        """Take the last cell's checkpoint now, in the background. It is taken before
        the next turn anyway; a caller that has answered its own client first (a
        kernel sending its reply) starts it here, so the two do not contend."""
        self._thread.submit(self.checkpoints.settle)

    def hibernate(self, cells: int, *, full: bool = False, host: dict[str, Any] | None = None) -> Hibernated:
        """Save the interpreter between turns to the session's state folder, replacing
        the last save. full: every page, for a state that must wake on another host
        (whose warm image is not this one). Raises StateTooLarge if it does not fit
        its cap or the session's disk quota (nothing is written), GuestUnavailable
        without a state folder. host: what the caller keeps beside the interpreter
        (the notebook's limits), JSON, read back from the saved state's manifest
        ("host") by the caller of the next start."""
        self._require_open()
        points = self.points

        def save() -> Hibernated:
            self.checkpoints.settle()
            kept = points.persist() if points is not None else None
            saved = self.hibernation.hibernate(cells, full, dict(host or {}), points=kept)
            self._points_saved = kept is not None
            return saved

        return self._thread.call(save)

    def discard_state(self) -> bool:
        """Remove the session's saved state (a restart or %reset: the next start is a
        fresh one, as on ipykernel). True if there was one."""
        return self.hibernation.discard_state()

    @property
    def resume_notice(self) -> str | None:
        """Why a saved state was found and not used, if it was."""
        return self.hibernation.resume_notice

    def save_image(self, folder: Path, key: str) -> MemoryImage:
        """This guest's state, between turns, as a warm image (an image_build guest)."""
        return self._thread.call(self.image.save, folder, key)

    def set_network(self, policy: NetworkPolicy | None) -> None:
        """Narrowed rules (a notebook's %network), read by the next request; a child
        started after it has them too."""
        self.options = dataclasses.replace(self.options, network=policy)
        self.network.set_network(policy)

    @property
    def optimized(self) -> bool:
        """Whether this guest runs on the optimized engine (not yet, on a first start)."""
        return self.instance.optimized

    @property
    def metering(self) -> str:
        """What bounds a cell: "time" (CPU time and the deadline) or "fuel"."""
        return self.instance.metering

    @property
    def counts_fuel(self) -> bool:
        """Whether cells are counted in fuel now (fuel metering, on the optimized engine)."""
        return self.instance.counts_fuel

    def measure_disk(self) -> None:
        """Count the disk quota's trees again: the host changed the workspace."""
        self._thread.call(lambda: self.files.quota.measure())

    def disk_usage(self) -> tuple[int, int]:
        """(bytes, entries) the quota counts now."""
        quota = self.files.quota
        return quota.used_bytes, quota.used_entries

    def _require_open(self) -> None:
        if self._closed:
            raise GuestUnavailable("this sandbox is closed; create a new one")

    def _new_child(self, tally: ChildTally) -> PythonGuest:
        """A `python` child of this guest (child_python.ChildRunner makes one per program)."""
        options = dataclasses.replace(
            self.options, history=None, keep_state=None, resume=None, warm_image=False, host_magics={},
            child_depth=self.options.child_depth + 1, child_tally=tally,
        )
        return PythonGuest(self.workspace, engine=self.instance.choice, site=self.layout.site,
                           memory_bytes=self.instance.memory_bytes, name="wasm-kernel-child", options=options,
                           shell=False, child_of=self)

    # --- the parts' wiring -------------------------------------------------------

    def _define_imports(self, linker: wasmtime.Linker) -> None:
        """WASI with our shadows (which know this start's notebook overlay) and the door."""
        define_shadows(linker, self._ports)
        i32 = wasmtime.ValType.i32()  # a FuncType per engine: one shared between engines aborts
        linker.define_func("host", "call", wasmtime.FuncType([i32] * 4, [i32]), self.door.host_call,
                           access_caller=True)

    def _configure_store(self, store: wasmtime.Store) -> None:
        """The WASI context (the same mounts and descriptor numbers every time) and the
        epoch callback."""
        private = self.layout.private
        assert private is not None
        wasi = wasmtime.WasiConfig()
        wasi.argv = [ARGV0]
        wasi.env = [list(pair) for pair in GUEST_ENV]
        wasi.stdin_file = str(private / "stdin")
        for host, guest, writable in self.layout.preopens():
            wasi.preopen_dir(str(host), guest, writable)
        store.set_wasi(wasi)
        self._epoch_handle = set_epoch_callback(store, self.stops.epoch_decide)
        store.set_epoch_deadline(1)

    def _on_bind(self, store: wasmtime.Store, exports: Any) -> None:
        """A new instance: its interrupt export, and the stream ring in its memory (a
        compaction or an engine move keeps the ring where the guest put it)."""
        self.stops.soft.raise_fn = self.instance.interrupt_export
        ring = self.streams.ring
        if ring is not None:
            ring.bind(self.instance.mem.window(store))

    # --- guest thread ----------------------------------------------------------
    def _boot(self) -> None:
        state = None
        if self._resume_pending:
            self._resume_pending = False
            state = self.hibernation.state_to_resume()
        image, notice = self.image.for_boot()
        if notice is not None:
            self.boot_notice = notice
        if state is not None:
            try:
                self._start(image, state)
                self.resumed = self.hibernation.resume_result(state)
                return
            except (StateRefused, GuestUnavailable, ImageError, OSError, wasmtime.WasmtimeError,
                    wasmtime.Trap) as err:
                log.warning("guest.resume_failed", error=str(err)[:2000])
                self._teardown()
                # The user's line names what was wrong with the state, never a wasm trap's text.
                self.hibernation.refuse_state(
                    str(err) if isinstance(err, StateRefused) else
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
        layout, instance, options = self.layout, self.instance, self.options
        scratch = GuestScratch()
        layout.private = scratch.path
        # The guest's /tmp must not outlive it, even if close() is never called; one
        # left by a killed process is swept by the next GuestScratch.
        self._private_cleanup = weakref.finalize(self, scratch.remove)
        guest_tmp = layout.tmp_folder()
        if layout.shared_tmp is None:
            guest_tmp.mkdir()
        make_device_folder(scratch.path)
        # The quota counts the workspace and this guest's /tmp, in the session's ledger
        # with every other writer of the session when it has one; the image's /tmp
        # is counted there before it is copied in. A child's /tmp is its parent's: the
        # parent gives it back when it goes, so the child owns no tree of its own.
        quota = DiskQuota([self.workspace, guest_tmp], ledger=options.disk_ledger,
                          own_trees=layout.shared_tmp is None)
        self.files.begin(quota)  # from here a teardown gives this start's /tmp back
        if image is not None and (image.folder / TMP_FOLDER).is_dir():
            quota.charge_own(*tree_usage_of(image.folder / TMP_FOLDER))
            copy_tmp_tree(image.folder / TMP_FOLDER, guest_tmp)
        (scratch.path / "stdin").write_bytes(b"")
        if layout.uniform() and options.packages is None:
            (scratch.path / "packages").mkdir()  # the mount exists in every shell guest, empty without %pip
        preopens = layout.preopens()
        overlay = None
        if options.notebook is not None:
            overlay = NotebookOverlay(options.notebook, self.workspace, len(preopens) + 1, len(preopens) + 2)
        self.files.ledger, self.files.overlay = FdLedger(range(3, 3 + len(preopens))), overlay
        self.streams.reset()
        instance.new_linker()  # the shadows it defines know this start's overlay
        store = instance.new_store()
        instance.instantiate(store)
        instance.store = store
        self.checkpoints.begin(resume_points=state.manifest.get("points") if state is not None else None)
        if state is not None:
            self.hibernation.apply_state(store, image, state)
            if state.manifest.get("base") is None:
                image = None  # not started over an image: the next save is a full one too
        elif image is not None:
            self.image.adopt(store, image)
        else:
            # Allocated before the first checkpoint, so every rollback keeps them.
            alloc = instance.alloc
            instance.scratch = ScratchAreas(
                alloc(store, QUOTA_SCRATCH_BYTES) & U32, alloc(store, READDIR_SCRATCH_BYTES) & U32,
                alloc(store, SCRATCH_BYTES) & U32 if overlay is not None or self._image_build is not None else 0,
            )
        if overlay is not None:
            overlay.set_scratch(instance.scratch.overlay)
            overlay.quota = quota
        boot = self._boot_turn(image is not None, resume=state is not None)
        resumed_points = state is not None and self.points is not None and self.points.resumed
        if resumed_points:
            # The saved state as it was, before the resume turn makes it this host's:
            # the point the resume turn's changes lead back to.
            self.checkpoints.take()
        self.turns.boot(store, *boot, booting=image is None and state is None)
        self._find_signal_words(store)
        self.started_from_image = image is not None
        self.hibernation.started_image = image
        if resumed_points:
            assert self.points is not None
            self.points.label_next("(resumed)", None, stored=False, part=False)
            self.checkpoints.take(undo_point=True)  # a point, so a rewind past the resume undoes it first
        elif self._image_build is None and not self._one_shot:
            # The first checkpoint: from an image, only the pages the start wrote;
            # else all of memory (~35 ms at 40 MB). Queued behind this job, it runs
            # while the caller gets its sandbox, before any cell.
            self._thread.submit(self.checkpoints.take)

    def _find_signal_words(self, store: wasmtime.Store) -> None:
        """Where CPython keeps its interrupt words in this build (signal_words.py), or
        None: soft interrupts are then raised by the epoch callback, as before."""
        soft = self.stops.soft
        soft.words = None
        raise_fn = soft.raise_fn
        if raise_fn is not None:
            soft.words = signal_words.for_build(store, self.instance.mem.window(store), raise_fn)

    def _resume_fixup(self) -> None:
        """After a rewind to a point from before a resume: the guest's `resume` again,
        so it holds this host's ring, environment and magics (on the guest thread)."""
        store = self.instance.require_store()
        self.instance.refuel(store, UNLIMITED_FUEL)
        self.turns.boot(store, *self._boot_turn(True, resume=True), booting=False)

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
            f"import sys; sys.path += {self.layout.python_path()!r}; import _wasm_kernel_boot; "
            f"_wasm_kernel_boot.setup({GUEST_APP!r})"
        )
        if request is not None:
            code += f"; {SERVE_TURN}"
        return code + "; sys.path.insert(0, ''); del sys", request

    def _teardown(self) -> None:
        self.checkpoints.close()
        self.instance.close()
        self.door.turn = None
        self.files.close()  # the overlay's descriptor of the notebook's folder
        quota = getattr(self.files, "quota", None)
        # The ledger gives the guest's /tmp back once its private folder is gone.
        if quota is not None:
            quota.close(self._remove_private)
        else:
            self._remove_private()

    def _remove_private(self) -> None:
        if self.layout.private is not None:
            self._private_cleanup()
            self.layout.private = None

    def _restart(self) -> None:
        self._teardown()
        self._boot()



# guest_mounts stays importable from here, where provisioning imports it.
__all__ = ["PythonGuest", "guest_mounts"]
