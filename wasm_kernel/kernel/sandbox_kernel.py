"""WasmKernel: the Jupyter kernel. Every cell runs in the session's WASI guest.

Built on ipykernel's `Kernel` base with async `do_*` methods. A cell runs on a
worker thread so the event loop stays free; the guest's output callbacks publish
`stream`/`display_data` messages as they come, tagged with the request they belong
to. Interrupts arrive as SIGINT (interrupt_mode "signal"): our handler stops the
running guest turn, which rolls back, and the kernel lives on.

The guest is started in the background at kernel start, so kernel_info answers at
once even when the guest must first be compiled (once per machine: BENCHMARKS.md); a cell
sent meanwhile shows that progress instead of hanging silently.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from ipykernel._version import kernel_protocol_version
from ipykernel.kernelbase import Kernel
from traitlets import Bool, Enum, Float, Int, List, Unicode, default

from .. import __version__
from ..core.file_changes import FileChanges
from ..core.logger import SandboxLogger
from ..core.policy import GIB, MIB, ExecutionPolicy
from ..core.result import SandboxResult
from ..host.artifacts import guest_artifacts
from ..core.sandbox import CellOptions, GuestOptions
from ..host.cache_dir import cache_root
from ..host.guest_site import is_site_staged
from ..host.module_cache import is_guest_cached, load_guest_module
from ..runtime.guest_site_build import guest_site
from ..runtime.background_warmup import baseline_allowed
from ..runtime.guest_config import guest_environment
from ..runtime.provisioning import is_warm_image_ready, prepare_warm_image
from ..runtime.wire import COMM_MSG_TYPES
from ..runtime.warm_image import DEFAULT_PRELOAD, ImageUnavailable
from ..runtime.guest_messages import CommOutput, ErrorOutput, HistoryRequest, Output
from ..runtime.wire_text import clean_text
from ..sessions.file_ops import stat_session_paths
from ..sessions.history_store import SessionHistory
from ..sessions.identity import SessionIdentity
from ..sessions.layout import default_workspace_root
from ..sessions.lifecycle import delete_session_workspace, get_session_sandbox
from ..sessions.packages import PipSettings
from ..sessions.pruning import PruneResult, prune_sessions
from ..sessions.registry import SessionRegistry
from ..sessions.sandbox import SessionSandbox
from .cell_cost import CellCost
from . import session_comm
from .comm_messages import comm_for_guest, comm_info_target
from .session_comm import SESSION_TARGET
from .file_changes_display import display_id_for, file_changes_bundle
from .kernel_limits import (
    LIMIT_TRAITS, LIMITS, MEMORY_ERRORS, LimitError, apply_limit, disk_full_line, is_memory_error, memory_error_hint,
    trap_line,
    truncation_hint,
)
from .magics import MAGICS
from .magics.registry import MagicError, MagicOutput, help_request, split_cell
from .message_guard import guard_handlers, guard_unpacker, internal_error_line, new_reference
from .notebook_folder import FolderChoice, choose_notebook_folder, private_kernel_folders
from .notebook_identity import NotebookSource, find_notebook, is_unnamed, kernel_identity
from .session_lifecycle import SessionLifecycle

_PROGRESS_EVERY_S = 1.0
_MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
COMPILE_PROGRESS = "Compiling the Python guest for this machine (first start only, about {expected:.0f} s)"
BASELINE_PROGRESS = ("Compiling the Python guest for this machine, quickly (first start only, about {expected:.0f} s; "
                     "the optimized build follows in the background)")
SITE_PROGRESS = "Preparing IPython for the guest (first start only, about {expected:.0f} s)"
IMAGE_PROGRESS = "Building the warm image: IPython and preloaded modules, imported once (about {expected:.0f} s)"


HOST_THREADS = 3  # see _started_pool
SUBSCRIBE_GRACE_S = 0.05  # from a client's iopub handshake to its subscription (see _iopub_subscribed)
SHARED_NOTICE = (
    "wasm-kernel: this notebook's session is also open in another kernel; both read and write "
    "the same files in /app, each with its own variables (shut the other kernel down to have it alone)"
)


class WasmKernel(Kernel):
    implementation = "wasm_kernel"
    implementation_version = __version__
    banner = "Python in a WebAssembly sandbox (wasm-kernel): no host files, no network, limits on every cell"
    help_links = [{"text": "wasm-kernel", "url": "https://github.com/wasm-kernel/wasm-kernel"}]

    # --- configuration (jupyter_config files, kernel.json argv, %config) -----------

    fuel = Int(500_000_000_000, allow_none=True, help="Wasm instructions a cell may run (None: no limit).").tag(config=True)
    memory = Int(2 * GIB, help="Guest memory cap in bytes (64 MiB - 4 GiB).").tag(config=True)
    deadline = Float(None, allow_none=True, help="Wall-clock seconds a cell may take (None: no deadline).").tag(config=True)
    stdout_max_bytes = Int(10 * MIB, allow_none=True, help="stdout kept and streamed per cell.").tag(config=True)
    stderr_max_bytes = Int(10 * MIB, allow_none=True, help="stderr kept and streamed per cell.").tag(config=True)
    display_max_bytes = Int(32 * MIB, allow_none=True, help="Rich outputs (displays, results) sent per cell.").tag(config=True)
    disk_max_bytes = Int(2 * GIB, allow_none=True, help="The session's disk quota: bytes in /app and /tmp.").tag(config=True)
    disk_max_files = Int(100_000, allow_none=True, help="The session's disk quota: files and folders in /app and /tmp.").tag(config=True)
    max_disk_bytes = Int(1 << 40, allow_none=True, help="Hard ceiling for disk_max_bytes, above any kernel's configuration.").tag(config=True)
    max_disk_files = Int(10_000_000, allow_none=True, help="Hard ceiling for disk_max_files, above any kernel's configuration.").tag(config=True)
    max_fuel = Int(5_000_000_000_000, allow_none=True, help="Hard ceiling for fuel, above any kernel's configuration (None: none).").tag(config=True)
    max_memory = Int(4 * GIB, help="Hard ceiling for memory, above any kernel's configuration.").tag(config=True)
    max_deadline = Float(None, allow_none=True, help="Hard ceiling for deadline, above any kernel's configuration (None: none).").tag(config=True)
    max_output_bytes = Int(100 * MIB, allow_none=True, help="Hard ceiling for the output caps, above any kernel's configuration.").tag(config=True)
    session_scope = Enum(
        ["notebook", "run", "day"], "notebook",
        help="notebook: one workspace per notebook and user, across restarts; run: one per kernel; day: one per notebook per UTC day.",
    ).tag(config=True)
    workspace_root = Unicode(help="Folder holding every session's workspace (default: wasm-kernel/sessions in "
                             "Jupyter's data folder, which `jupyter --data-dir` shows).").tag(config=True)
    show_file_changes = Bool(True, help="Show the files each cell created, modified or deleted.").tag(config=True)
    interrupt_keeps_state = Bool(
        True, help="An interrupt raises KeyboardInterrupt in the cell and keeps what it did so far, as ipykernel "
        "does; a cell that does not stop within interrupt_grace_seconds (a long call into compiled code) is "
        "rolled back. False: every interrupt rolls the cell back, all or nothing.",
    ).tag(config=True)
    interrupt_grace_seconds = Float(
        0.5, help="How long an interrupted cell may take to stop at a safe point before it is rolled back.",
    ).tag(config=True)
    agent_key = Unicode(None, allow_none=True, help="Who owns the sessions (default: $JUPYTERHUB_USER, then the OS user).").tag(config=True)
    prune_all_users = Bool(False, help="Let %prune consider every user's sessions, not only this user's.").tag(config=True)
    registry_ttl_hours = Float(24.0 * 30, help="How long an unused notebook identity keeps its session in the registry.").tag(config=True)
    keep_unnamed_sessions_hours = Float(
        0.0, min=0.0,
        help="Hours to keep the session of a kernel that no notebook names (nbconvert, nbclient, papermill runs "
        "without JPY_SESSION_NAME) after its last cell, for inspection. 0: removed when the kernel shuts down. "
        "A kept one, or a killed kernel's, goes at the next prune once idle that long; every kernel's start runs one.",
    ).tag(config=True)
    notebook_files = Enum(
        ["read", "off"], "read",
        help="read: the notebook's folder shows read-only under /app, beneath the workspace; off: only the workspace.",
    ).tag(config=True)
    notebook_files_max = Int(10_000, help="A notebook folder with more visible files than this is not shown.").tag(config=True)
    notebook_files_depth = Int(6, help="How many folders deep the notebook's folder shows under /app.").tag(config=True)
    pip_enabled = Bool(True, help="Let notebooks install pure-Python wheels into their session with %pip.").tag(config=True)
    pip_index_url = Unicode(None, allow_none=True, help="The index %pip installs from (None: pip's default, PyPI).").tag(config=True)
    pip_find_links = List(Unicode(), help="Extra wheel folders or pages for %pip (pip's --find-links).").tag(config=True)
    pip_no_index = Bool(False, help="Install with %pip only from pip_find_links, never from an index.").tag(config=True)
    pip_max_bytes = Int(200 * MIB, help="The most a session's %pip packages may take, installed.").tag(config=True)
    warm_image = Bool(
        True, help="Start each sandbox from a warm image (IPython and preload_modules imported once, saved, and "
        "mapped copy-on-write), built once per machine and version. Off: every sandbox boots the interpreter.",
    ).tag(config=True)
    preload_modules = List(
        Unicode(), default_value=list(DEFAULT_PRELOAD),
        help="Modules the warm image imports, so that a notebook's first import of them costs nothing. "
        "They are imported, not bound: a notebook's namespace starts empty.",
    ).tag(config=True)

    pass_environment = List(
        Unicode(), default_value=["NBGRADER_EXECUTION"],
        help="Names of the kernel's environment variables copied into the guest's os.environ when set (nothing else "
        "of the host's environment reaches it). nbgrader sets NBGRADER_EXECUTION for the kernels it grades with, "
        "and notebooks test it to skip slow work. Values must be printable text of up to 4,096 characters.",
    ).tag(config=True)

    iopub_subscriber_wait = Float(
        1.0, min=0.0,
        help="Seconds the first request after a start or restart waits for a client to subscribe to iopub, so that "
        "\"restart and run all\" loses none of the first cell's outputs (a Jupyter server reconnects its iopub "
        "subscription after its shell socket); 0 answers at once.",
    ).tag(config=True)

    @default("workspace_root")
    def _default_workspace_root(self) -> str:
        return str(default_workspace_root())

    LIMIT_TRAITS = LIMIT_TRAITS
    # What %config reaches: an allow-list, so a trait added later (or inherited from
    # ipykernel's Kernel) stays the operator's until it is listed here.
    NOTEBOOK_TRAITS = frozenset(LIMIT_TRAITS) | {"show_file_changes"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._environment_warned: set[str] = set()
        if self.session is not None:
            guard_unpacker(self.session)
        for msg_type in COMM_MSG_TYPES:
            self.shell_handlers[msg_type] = self._comm_message
        guard_handlers(self, self.shell_handlers)
        guard_handlers(self, self.control_handlers)
        self.sandbox_logger = SandboxLogger()
        self.policy = self._startup_policy()
        self.operator_limits = self.policy  # the most a notebook may set: %limits goes downward only
        self.connection_file = self._connection_file()
        self.notebook: NotebookSource = find_notebook(os.environ, self.connection_file)
        self.identity: SessionIdentity
        self.identity, self._identity_notice = kernel_identity(
            self.notebook, self.session_scope, self.connection_file, self.agent_key
        )
        self.session_id = self._bind_session()
        self._lifecycle = SessionLifecycle(
            Path(self.workspace_root), lambda: self.session_id, unnamed=is_unnamed(self.notebook),
            keep_hours=self.keep_unnamed_sessions_hours, logger=self.sandbox_logger, log=self.log,
            control_thread=self.control_thread,
        )
        self.history = SessionHistory(Path(self.workspace_root), self.session_id)
        self.history_session = self.history.start_kernel_session()
        self.sandbox: SessionSandbox | None = None
        self._sandbox_error: BaseException | None = None
        self._sandbox_reference = ""
        self._compile_progress: tuple[float, float] | None = None
        self._progress_what = COMPILE_PROGRESS
        self._sandbox_ready = threading.Event()
        self._running = False  # a guest turn runs for the request being handled
        self._session_comms: set[str] = set()  # comms of the lab extension's panel (session_comm.py)
        self._unrecorded: list[tuple[int, str]] = []  # host-magic-only cells not yet in the guest's In
        self._folder = FolderChoice(None)  # the notebook's folder under /app, chosen as the sandbox opens
        self._notices_shown = False
        self._iopub_waited = False
        self._magic_run: _CellRun | None = None  # the cell a host magic runs in
        self._packages_changed = False
        self._cancel_input = threading.Event()  # ends a pending input_request
        self._stdin_lock = threading.Lock()  # one input_request at a time on the stdin socket
        self._interrupted = threading.Event()  # SIGINT during the current request
        self._host_threads = _started_pool(HOST_THREADS)
        threading.Thread(target=self._open_sandbox, name="wasm-kernel-start", daemon=True).start()
        self._lifecycle.prune_when_ready(self._sandbox_ready)

    # --- start-up --------------------------------------------------------------------

    def _connection_file(self) -> str | None:
        app = self.parent
        path = getattr(app, "abs_connection_file", None) or getattr(app, "connection_file", None)
        return str(path) if path else None

    def _startup_policy(self) -> ExecutionPolicy:
        """The operator's limits, each clamped to its hard ceiling with a warning: a
        kernel that refused to start over a config slip would help no one."""
        defaults = ExecutionPolicy()
        ceiling = replace(defaults, fuel_budget=self.max_fuel, deadline_seconds=self.max_deadline,
                          stdout_max_bytes=self.max_output_bytes, stderr_max_bytes=self.max_output_bytes,
                          display_max_bytes=self.max_output_bytes, disk_max_bytes=self.max_disk_bytes,
                          disk_max_files=self.max_disk_files)
        try:
            ceiling = replace(ceiling, memory_bytes=self.max_memory)
        except ValueError as err:
            self.log.warning("wasm-kernel: max_memory: %s", err)
        grace = self.interrupt_grace_seconds if self.interrupt_keeps_state else None
        try:
            policy = replace(defaults, interrupt_grace_seconds=grace)
        except ValueError as err:
            self.log.warning("wasm-kernel: interrupt_grace_seconds: %s; using %s", err, defaults.interrupt_grace_seconds)
            policy = defaults
        for trait, limit in self.LIMIT_TRAITS.items():
            try:
                policy = apply_limit(policy, limit, getattr(self, trait), ceiling)
            except LimitError as err:
                policy = replace(policy, **{LIMITS[limit].field: getattr(ceiling, LIMITS[limit].field)})
                self.log.warning("wasm-kernel: %s; using %s", err, getattr(policy, LIMITS[limit].field))
        return policy

    def _bind_session(self) -> str:
        root = Path(self.workspace_root)
        with SessionRegistry(root, ttl_hours=self.registry_ttl_hours) as registry:
            return registry.get_or_create_session(self.identity)

    def _guest_options(self) -> GuestOptions:
        return GuestOptions(
            host_magics=MAGICS.kinds(), history=self._history_rows, session_number=self.history_session,
            notebook=self._folder.folder, warm_image=self.warm_image, preload=self._preload(),
            environment=self._passed_environment(),
        )

    def _passed_environment(self) -> dict[str, str]:
        """pass_environment's variables that are set here and may reach the guest; the
        others are left out and said once in the log."""
        passed: dict[str, str] = {}
        for name in self.pass_environment:
            value = os.environ.get(name)
            if value is None:
                continue
            try:
                passed.update(guest_environment({name: value}))
            except ValueError as err:
                if name not in self._environment_warned:
                    self._environment_warned.add(name)
                    self.log.warning("wasm-kernel: pass_environment: %s; left out", err)
        return passed

    def _preload(self) -> tuple[str, ...]:
        """preload_modules without the names that cannot be modules (said once, in the log)."""
        kept = tuple(name for name in self.preload_modules if _MODULE_NAME.fullmatch(name))
        if len(kept) != len(self.preload_modules) and not getattr(self, "_preload_warned", False):
            self._preload_warned = True
            bad = [name for name in self.preload_modules if name not in kept]
            self.log.warning("wasm-kernel: preload_modules: %s are not module names; left out", bad)
        return kept

    @property
    def workspace_root_path(self) -> Path:
        return Path(self.workspace_root)

    @property
    def pip_settings(self) -> PipSettings:
        return PipSettings(self.pip_index_url, tuple(self.pip_find_links), self.pip_no_index, self.pip_max_bytes)

    def say(self, text: str) -> None:
        """Stream text to the cell a host magic runs in (%pip's progress)."""
        run = self._magic_run
        if run is not None:
            run.stream("stdout", text)

    def interrupted(self) -> bool:
        return self._interrupted.is_set()

    def packages_changed(self) -> None:
        """%pip changed the session's packages: the guest's import caches must look again."""
        self._packages_changed = True

    def notebook_name(self) -> str | None:
        """The notebook's file name, the only part of its host path a notebook sees.

        Its current name: the registry row of this session, which a rename moves
        (sessions/moves.py), so %session and the panel follow a rename at once; the
        name the kernel started with when the row is gone or unreadable. Only for a
        session a notebook names: a `run` session of a kernel without a usable
        notebook keeps its folder in the row, not a notebook. One indexed SELECT
        that never creates a registry; never raises.
        """
        if not self.notebook.path:
            return None
        path = self.notebook.path
        if self._identity_notice is None:  # the identity is the notebook's (kernel_identity)
            try:
                with SessionRegistry(Path(self.workspace_root)) as registry:
                    entry = registry.lookup(self.session_id)
                if entry is not None:
                    path = entry.notebook_path
            except Exception as err:  # a broken registry costs the rename, not %session
                self.log.debug("wasm-kernel: the registry gave no notebook name: %s", err)
        # clean_text: a non-UTF-8 file name must not make the reply undecodable.
        return clean_text(os.path.basename(path))

    def notebook_folder_state(self) -> str:
        """For %session: whether the notebook's folder shows under /app (no host path)."""
        if self.notebook_files == "off":
            return "not shown (the operator turned it off)"
        if self._folder.folder is not None:
            return f"shown read-only under /app, beneath the workspace ({self.notebook_files_depth} folders deep)"
        return f"not shown: {self._folder.refused}" if self._folder.refused else "not shown"

    def _choose_folder(self) -> FolderChoice:
        return choose_notebook_folder(
            self.notebook, mode=self.notebook_files, max_files=self.notebook_files_max,
            max_depth=self.notebook_files_depth, protected=[Path(self.workspace_root), cache_root()],
            private=private_kernel_folders(self.connection_file),
        )

    def _history_rows(self, request: HistoryRequest) -> list[Any]:
        """This session's history from the host's store: the guest shell's reads
        (%history, In after a restart of the interpreter) and history_request."""
        history = self.history
        if request.kind == "tail":
            n = 10 if request.n is None else request.n
            return history.tail(n, raw=request.raw, output=request.output, include_latest=True)
        if request.kind == "search":
            return history.search(request.pattern, raw=request.raw, output=request.output, n=request.n, unique=request.unique)
        return history.get_range(request.session, request.start, request.stop, raw=request.raw, output=request.output)

    def _open_session_sandbox(self, session_id: str) -> SessionSandbox:
        return get_session_sandbox(
            session_id, policy=self.policy, workspace_root=Path(self.workspace_root), logger=self.sandbox_logger,
            guest_options=self._guest_options(),
        )

    def _open_sandbox(self) -> None:
        try:
            if not is_guest_cached():
                # A first start on this machine: the baseline compiler's module in
                # seconds (the optimized one compiles in the background, and the
                # guest moves to it between cells), memoised for the sandbox below.
                baseline = baseline_allowed()
                self._progress_what = BASELINE_PROGRESS if baseline else COMPILE_PROGRESS
                self._compile_progress = (0.0, 12.0 if baseline else 100.0)
                load_guest_module(self._on_compile_progress, baseline=baseline)
            if not is_site_staged():
                self._progress_what = SITE_PROGRESS
                self._compile_progress = (0.0, 5.0)
                guest_site(self._on_compile_progress, bytecode=is_guest_cached())
            if self.warm_image and is_guest_cached() and not is_warm_image_ready(self._preload()):
                self._progress_what = IMAGE_PROGRESS
                self._compile_progress = (0.0, 10.0)
                try:
                    # Never wait for another process's build (the background warm-up
                    # runs nice'd and may take minutes under load): boot plainly.
                    prepare_warm_image(self._preload(), self._on_compile_progress, wait=False)
                except ImageUnavailable:
                    pass  # the sandbox boots without it and says why (its boot notice)
            self._folder = self._choose_folder()
            root = Path(self.workspace_root)
            sandbox = self._open_session_sandbox(self.session_id)
            # Bound again under the lease: a prune or rm that ran between our first
            # bind and the lease deleted the session and dropped its row, and what we
            # opened is a recreated empty folder. Then the identity's new session is
            # the one to use, and the empty orphan goes.
            bound = self._bind_session()
            if bound != self.session_id:
                orphan = self.session_id
                sandbox.close()
                delete_session_workspace(orphan, root, logger=self.sandbox_logger)
                self.session_id = bound
                self.history, old_history = SessionHistory(root, bound), self.history
                self.history_session = self.history.start_kernel_session()
                old_history.close()
                sandbox = self._open_session_sandbox(bound)
            self.sandbox = sandbox
        except BaseException as err:  # shown to the user by the first cell, by reference
            self._sandbox_error = err
            self._sandbox_reference = new_reference()
            self.log.error("wasm-kernel: the sandbox could not start (reference %s)", self._sandbox_reference,
                           exc_info=err)
        finally:
            self._compile_progress = None
            self._sandbox_ready.set()
            if not gc.isenabled():  # python -m wasm_kernel starts with it off (see there)
                gc.freeze()
                gc.enable()

    def _on_compile_progress(self, elapsed: float, expected: float) -> None:
        self._compile_progress = (elapsed, expected)

    async def _wait_for_sandbox(self, run: _CellRun | None) -> SessionSandbox:
        """The sandbox, once open. A cell that waits (a first start compiling the guest
        or building the warm image) shows progress in a display that is cleared when
        the wait ends: a person sees it, the saved notebook does not (nbclient, nbconvert
        and JupyterLab all apply clear_output), and the log has it too."""
        shown = 0.0
        display_id = None
        while not self._sandbox_ready.is_set():
            if self._interrupted.is_set() and run is not None:
                if display_id is not None:
                    run.clear_output()
                raise _Interrupted
            progress = self._compile_progress
            if run is not None and progress is not None and time.monotonic() - shown >= _PROGRESS_EVERY_S:
                elapsed, expected = progress
                pct = min(99, int(100 * elapsed / expected)) if expected else 0
                text = self._progress_what.format(expected=expected) + f": {pct}% after {elapsed:.0f} s"
                if display_id is None:
                    display_id = f"wasm-kernel-start-{new_reference()}"
                    run.send_display({"text/plain": text}, display_id)
                else:
                    run.update_display({"text/plain": text}, display_id)
                self.log.info("wasm-kernel: %s", text)
                shown = time.monotonic()
            # Woken the moment the sandbox is ready (an asyncio.sleep(0.1) poll here
            # cost a first cell up to 100 ms), and every 0.1 s for progress and SIGINT.
            await asyncio.to_thread(self._sandbox_ready.wait, 0.1)
        if display_id is not None and run is not None:
            run.clear_output()
        if self.sandbox is None:
            raise _SandboxFailed(self._sandbox_reference)
        return self.sandbox

    # --- kernel_info -------------------------------------------------------------------

    @property
    def language_info(self) -> dict[str, Any]:  # type: ignore[override]
        return {
            "name": "python",
            "version": guest_artifacts().python_version,
            "mimetype": "text/x-python",
            "file_extension": ".py",
            "pygments_lexer": "ipython3",
            "codemirror_mode": {"name": "ipython", "version": 3},
            "nbconvert_exporter": "python",
        }

    @property
    def kernel_info(self) -> dict[str, Any]:
        # Built here rather than by the base class: it imports debugpy (slow, and
        # noisy on stderr) to advertise a debugger, and it advertises subshells.
        # Neither is implemented; advertised, JupyterLab would show a debugger and
        # send requests on other threads.
        return {
            "protocol_version": kernel_protocol_version,
            "implementation": self.implementation,
            "implementation_version": self.implementation_version,
            "language_info": self.language_info,
            "banner": self.banner,
            "help_links": self.help_links,
            "supported_features": [],
        }

    # --- the shell channel ---------------------------------------------------------------

    async def shell_main(self, subshell_id: str | None, msg: Any) -> None:
        """As ipykernel's, minus its shortcut for comm messages that arrive while a
        request runs. ipykernel 7 dispatches those at once, beside the running cell,
        so an async cell can await a widget; the guest has one thread and no safe
        point inside a cell, so nothing could be delivered before the cell ends
        anyway. And the shortcut restores the shell's parent, in a context all
        requests share, when its handler returns: ours awaits a guest turn, so a
        request that ran meanwhile lost its parent and its idle status went to the
        comm message. Here every shell message waits its turn, in arrival order."""
        if subshell_id is not None:  # subshells are not advertised; keep ipykernel's way for them
            await super().shell_main(subshell_id, msg)
            return
        async with self._main_asyncio_lock:
            await self._iopub_subscribed()
            await self.dispatch_shell(msg, subshell_id=None)

    async def _iopub_subscribed(self) -> None:
        """Hold the first requests until a client subscribes to iopub, for at most
        iopub_subscriber_wait. After a restart, a Jupyter server's shell socket
        reconnects before its iopub subscription does (ZeroMQ's 100 ms reconnect
        interval), and this kernel answers fast: "restart and run all" would lose the
        first cell's outputs and its idle status, which PUB drops while nobody
        subscribes. A client whose SUB has connected but not subscribed within
        SUBSCRIBE_GRACE_S subscribes lazily, when it next reads iopub (jupyter_client's
        blocking client does, and its wait_for_ready() checks iopub itself): it is
        not waited for."""
        if self._iopub_waited:
            return
        thread = self.iopub_thread
        subscribed: threading.Event | None = getattr(thread, "subscribed", None)
        deadline = time.monotonic() + self.iopub_subscriber_wait
        polls = 0
        while subscribed is not None and not subscribed.is_set() and time.monotonic() < deadline:
            if polls % 4 == 0:
                thread.poll_subscriptions()
            polls += 1
            connected = thread.connected_at
            if connected is not None and time.monotonic() - connected > SUBSCRIBE_GRACE_S:
                break
            await asyncio.sleep(0.005)
        self._iopub_waited = True  # once: a client without iopub is not held again
        if subscribed is not None:
            thread.stop_watching()

    # --- SIGINT -----------------------------------------------------------------------

    def pre_handler_hook(self) -> None:
        self._interrupted.clear()
        self._cancel_input.clear()
        self.saved_sigint_handler = signal.signal(signal.SIGINT, self._on_sigint)

    def post_handler_hook(self) -> None:
        signal.signal(signal.SIGINT, self.saved_sigint_handler)

    def _on_sigint(self, signum: int, frame: Any) -> None:
        # Never raise into the event loop: that would kill the kernel. Remember the
        # interrupt for the request (a cell still waiting for its sandbox ends at
        # once) and stop the guest if a turn runs.
        self._interrupted.set()
        self._cancel_input.set()
        if self.sandbox is not None and self._running and not self.sandbox.interrupt():
            # The cell is between steps or its turn is about to start: keep trying
            # until the turn takes it or the cell ends.
            threading.Thread(target=self._interrupt_when_running, daemon=True).start()

    def _interrupt_when_running(self) -> None:
        deadline = time.monotonic() + 2.0
        while self._running and time.monotonic() < deadline:
            if self.sandbox is not None and self.sandbox.interrupt():
                return
            time.sleep(0.005)

    # --- execute ----------------------------------------------------------------------

    async def do_execute(  # type: ignore[override]
        self,
        code: str,
        silent: bool,
        store_history: bool = True,
        user_expressions: dict[str, str] | None = None,
        allow_stdin: bool = False,
        *,
        cell_meta: dict[str, Any] | None = None,
        cell_id: str | None = None,
    ) -> dict[str, Any]:
        count = self.execution_count  # the number this cell gets if it is stored
        if not silent and not store_history:
            self.execution_count -= 1  # as IPython: only stored cells take a number
        parent = self.get_parent("shell")
        run = _CellRun(self, parent, silent, allow_stdin)
        cell = CellOptions(
            silent=silent, store_history=store_history, execution_count=count, parent=_parent_info(parent),
            cell_id=cell_id, backfill=tuple(self._unrecorded),
        )
        try:
            reply = await self._execute(run, code, cell)
        except _Interrupted:
            reply = run.interrupted_reply()
        except _SandboxFailed as failed:
            line = internal_error_line("start this notebook's sandbox", failed.reference)
            reply = run.error_reply("SandboxError", line, [f"SandboxError: {line}"])
        except Exception:  # never leave a request without a reply, nor show host internals
            reference = new_reference()
            self.log.exception("wasm-kernel: execute failed (reference %s)", reference)
            line = internal_error_line("run this cell", reference)
            reply = run.error_reply("KernelError", line, [f"KernelError: {line}"])
        if store_history and not silent:
            self.history.store(self.history_session, self.execution_count, code, run.result_text)
        reply["execution_count"] = self.execution_count
        if user_expressions and self.sandbox is not None and reply["status"] == "ok":
            reply["user_expressions"] = await self._user_expressions(user_expressions)
        else:
            reply.setdefault("user_expressions", {})
        return reply

    async def _execute(self, run: _CellRun, code: str, cell: CellOptions) -> dict[str, Any]:
        sandbox = await self._wait_for_sandbox(run)
        if not self._notices_shown and not cell.silent:
            # Leases are shared: a second kernel on one notebook opens the same
            # session, as two ipykernels share the notebook's folder. It is told so.
            shared = SHARED_NOTICE if sandbox.lease.shared_with_others() else None
            image = f"wasm-kernel: {sandbox.boot_notice}" if sandbox.boot_notice else None
            for notice in (self._identity_notice, shared, self._folder.notice, image):
                if notice is not None:
                    run.stream("stderr", notice + "\n")
            self._notices_shown = True
        asked = help_request(code, MAGICS)
        if asked is not None:
            return self._help(run, *asked)
        steps = split_cell(code, MAGICS)
        parts = sum(step.kind == "code" for step in steps)
        changes = FileChanges.none()
        cost = CellCost()
        reply: dict[str, Any] = run.ok_reply()
        guest_parts = 0
        for n, step in enumerate(steps):
            if self._interrupted.is_set():
                reply = run.interrupted_reply() if n == 0 else run.error_reply(
                    "KeyboardInterrupt", "", ["KeyboardInterrupt: the cell was interrupted between its parts; "
                                              "the parts before it ran, the rest did not"])
                break
            if step.kind == "code":
                if len(steps) > 1:  # one cell in parts: In[n] is the whole cell, stored once
                    cell = replace(cell, history_cell=code, first_part=guest_parts == 0)
                guest_parts += 1
                cell = replace(cell, packages_changed=self._packages_changed)
                self._packages_changed = False
                result = await self._run_in_guest(run, sandbox, step.text, cell)
                cost.add(result)
                if not result.rolled_back and not result.restarted:
                    self._unrecorded.clear()
                if result.restarted and cell.store_history and not cell.silent and cell.execution_count is not None:
                    # The interpreter restarted inside this cell (exit(), os._exit()): the
                    # fresh shell's In was restored from the store before this cell was in
                    # it, so the cell goes into In with the next one.
                    self._unrecorded.append((cell.execution_count, code))
                changes = changes.then(FileChanges(result.files_created, result.files_modified, result.files_deleted))
                reply = run.reply_for(result)
                if reply["status"] != "ok":
                    break
                continue
            magic = MAGICS.claimed(step.name, step.kind == "cell", step.text)
            assert magic is not None  # split_cell made this step for a host magic
            self._magic_run = run
            started = time.perf_counter()
            try:
                out: MagicOutput = await asyncio.get_running_loop().run_in_executor(
                    self._host_threads, magic.handler, self, step.text, step.body
                )
            except MagicError as err:
                reply = run.usage_error(str(err))
                break
            finally:
                self._magic_run = None
                cost.add_host(time.perf_counter() - started)  # a %pip's seconds are the cell's too
            run.show_magic_output(out)
            if out.page is not None:
                reply.setdefault("payload", []).append(out.page)
            changes = changes.then(FileChanges(out.created, out.modified, out.deleted))
        if parts == 0 and cell.store_history and not cell.silent and cell.execution_count is not None:
            # A cell of host magics only never reached the guest's shell: its In[n]
            # goes there with the next cell that does, so In counts every cell.
            self._unrecorded.append((cell.execution_count, code))
        self._show_file_changes(run, changes, cell.cell_id)
        reply.setdefault("metadata", {}).update(changes.reply_metadata())
        reply["metadata"]["sandbox"] = cost.reply_metadata(self.policy)
        if self._session_comms and not cell.silent:
            event = session_comm.cell_event(self.execution_count, reply["metadata"]["sandbox"], changes.created,
                                            changes.modified, changes.deleted)
            for comm_id in sorted(self._session_comms):
                run.send_comm(comm_id, event)
        return reply

    async def _run_in_guest(self, run: _CellRun, sandbox: SessionSandbox, code: str, cell: CellOptions) -> SandboxResult:
        turn_ended = threading.Event()  # a wait for an input() reply never outlives its turn

        def ask(prompt: str, password: bool) -> str:
            return self._ask_frontend(prompt, password, turn_ended)

        def execute() -> SandboxResult:
            return sandbox.execute(
                code,
                on_output=run.stream,
                on_display=run.display,
                on_input=ask if run.allow_stdin else None,
                cell=cell,
                checkpoint_soon=False,
                touch=False,
                keep_output=False,  # streamed and displayed as it came: not held as well
            )

        self._running = True
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(self._host_threads, execute)
        finally:
            self._running = False
            turn_ended.set()
        if result.metadata.get("files_not_tracked") and not run.silent:
            run.stream("stderr", f"wasm-kernel: not every file change is shown: {result.metadata['files_not_tracked']}\n")
        # The cell's checkpoint and the session's updated_at wait until the reply is
        # on its way (this callback runs after execute_request has sent it): the
        # checkpoint copies ~2 MB holding the GIL, and would hold the reply up.
        loop.call_soon(self._after_reply, sandbox)
        return result

    def _after_reply(self, sandbox: SessionSandbox) -> None:
        sandbox.checkpoint_soon()
        asyncio.get_running_loop().run_in_executor(self._host_threads, sandbox.touch)

    def _show_file_changes(self, run: _CellRun, changes: FileChanges, cell_id: str | None) -> None:
        if not changes or not self.show_file_changes or run.silent:
            return
        sizes = stat_session_paths(self.session_id, Path(self.workspace_root), changes.created + changes.modified)
        bundle = file_changes_bundle(changes, sizes, self.execution_count)
        run.send_display(bundle, display_id_for(self.session_id, self.execution_count, cell_id))

    # --- input() ---------------------------------------------------------------------

    def _ask_frontend(self, prompt: str, password: bool, turn_ended: threading.Event) -> str:
        """Called on a guest helper thread: send input_request on stdin, wait for the
        reply, and give up when the cell is interrupted, the kernel shuts down or the
        turn has ended for any other reason (ipykernel's own loop would keep a thread
        polling the stdin socket forever, and it would take the next cell's reply).

        A reply to an earlier input_request (typed into a box whose cell had already
        ended) is never taken as this one's answer: replies waiting from before are
        dropped before asking, as ipykernel does, and one that arrives later and names
        another request as its parent is ignored. A reply with no parent (jupyter_client's
        KernelClient.input sends none) answers the pending request."""
        import zmq

        from jupyter_client.session import json_clean  # type: ignore[attr-defined]

        parent = self.get_parent("shell")
        ident = self._get_shell_context_var(self._shell_parent_ident)
        assert self.session is not None
        with self._stdin_lock:
            while True:  # drop stale replies
                try:
                    self.stdin_socket.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    break
            sent = self.session.send(self.stdin_socket, "input_request",
                                     json_clean({"prompt": prompt, "password": password}), parent, ident=ident)
            request_id = sent["header"]["msg_id"] if sent else None
            while not (self._cancel_input.is_set() or turn_ended.is_set()):
                if not self.stdin_socket.poll(20):
                    continue
                try:
                    _ident, reply = self.session.recv(self.stdin_socket)
                except Exception:  # as ipykernel: a malformed message is not the answer
                    self.log.warning("wasm-kernel: invalid message on stdin", exc_info=True)
                    continue
                if reply is None:
                    continue
                answers = (reply.get("parent_header") or {}).get("msg_id")
                if answers and request_id and answers != request_id:
                    self.log.info("wasm-kernel: ignored an input_reply to an earlier input_request")
                    continue
                value = reply.get("content", {}).get("value", "")
                if value == "\x04":
                    raise EOFError
                return str(value)
        raise KeyboardInterrupt

    # --- user_expressions, complete, inspect, is_complete -------------------------------

    async def _query(self, op: str, **args: Any) -> Any:
        sandbox = await self._wait_for_sandbox(None)
        return await asyncio.get_running_loop().run_in_executor(self._host_threads, lambda: sandbox.query(op, **args))

    async def _user_expressions(self, expressions: dict[str, str]) -> dict[str, Any]:
        try:
            return await self._query("user_expressions", expressions=expressions)
        except Exception as err:
            return {
                name: {"status": "error", "ename": "QueryError", "evalue": str(err), "traceback": [str(err)]}
                for name in expressions
            }

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:  # type: ignore[override]
        cursor_pos = len(code) if cursor_pos is None else min(max(0, cursor_pos), len(code))
        empty = {"status": "ok", "matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos, "metadata": {}}
        try:
            found = await self._query("complete", code=code, cursor_pos=cursor_pos)
        except Exception as err:
            self.log.warning("wasm-kernel: completion failed: %s", err)
            found = {k: v for k, v in empty.items() if k != "status"}
        return {"status": "ok", **_with_host_magics(found, code, cursor_pos)}

    async def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> dict[str, Any]:  # type: ignore[override]
        cursor_pos = min(max(0, cursor_pos), len(code))
        detail_level = 1 if detail_level else 0
        try:
            found = await self._query("inspect", code=code, cursor_pos=cursor_pos, detail_level=detail_level)
        except Exception as err:
            self.log.warning("wasm-kernel: inspect failed: %s", err)
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": bool(found.get("found")), "data": found.get("data", {}), "metadata": found.get("metadata", {})}

    async def do_is_complete(self, code: str) -> dict[str, Any]:  # type: ignore[override]
        try:
            return await self._query("is_complete", code=code)
        except Exception:
            return {"status": "unknown"}

    def _help(self, run: _CellRun, name: str, detail: int) -> dict[str, Any]:
        """`%files?`: the host magic's help as a page, as IPython pages a magic's docstring."""
        magic = MAGICS.lookup(name)
        assert magic is not None
        reply = run.ok_reply()
        reply["payload"] = [{"source": "page", "data": {"text/plain": f"{magic.usage}\n\n{magic.help}\n"}, "start": 0}]
        return reply

    # --- comms ------------------------------------------------------------------------

    async def _comm_message(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        """A frontend's comm_open / comm_msg / comm_close: a turn in the guest, whose
        comm manager (ipywidgets' targets, a widget's comm) handles it, with busy and
        idle around it like any request. One that arrives while a cell runs is
        delivered when the cell ends (see shell_main)."""
        msg_type = parent["header"]["msg_type"]
        msg, refused = comm_for_guest(parent)
        if refused is not None:
            self.log.warning("wasm-kernel: dropped a %s from a client: %s", msg_type, refused)
            return
        run = _CellRun(self, parent, silent=False, allow_stdin=False)
        content = msg["content"]
        comm_id = content["comm_id"]
        if msg_type == "comm_open" and content.get("target_name") == SESSION_TARGET:
            self._session_comms.add(comm_id)  # the lab extension's panel: answered here, on the host
            return
        if comm_id in self._session_comms:
            if msg_type == "comm_close":
                self._session_comms.discard(comm_id)
                return
            await self._wait_for_sandbox(None)
            answered = await asyncio.get_running_loop().run_in_executor(
                self._host_threads, session_comm.answer, self, content.get("data"))
            run.send_comm(comm_id, answered)
            return
        sandbox = await self._wait_for_sandbox(None)
        self._running = True
        try:
            result = await asyncio.get_running_loop().run_in_executor(
                self._host_threads,
                lambda: sandbox.deliver_comm(msg_type, msg, on_output=run.stream, on_display=run.display),
            )
        finally:
            self._running = False
        if result.trap is not None:
            # Shown where the handler's own output goes (an Output widget, the log).
            line = ("it was interrupted; variables are as they were before it ran" if result.trap == "interrupted"
                    else trap_line(result.trap, self.policy, self.operator_limits))
            run.stream("stderr", f"wasm-kernel: a widget's handler was stopped and rolled back: {line}\n")
            self.log.warning("wasm-kernel: %s handler stopped: %s", msg_type, result.trap)
        elif result.error is not None:
            self.log.warning("wasm-kernel: %s refused by the guest: %s", msg_type, result.error.evalue[:200])

    async def comm_info_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:  # type: ignore[override]
        target, problem = comm_info_target(parent.get("content"))
        if problem is not None:
            reply = {"status": "error", "ename": "BadRequest", "evalue": problem, "traceback": [f"BadRequest: {problem}"],
                     "comms": {}}
        else:
            try:
                comms = (await self._query("comm_info", target_name=target))["comms"]
            except Exception as err:
                self.log.warning("wasm-kernel: comm_info failed: %s", err)
                comms = {}
            comms.update({cid: {"target_name": SESSION_TARGET} for cid in self._session_comms
                          if target in (None, SESSION_TARGET)})
            reply = {"status": "ok", "comms": comms}
        assert self.session is not None
        self.session.send(stream, "comm_info_reply", reply, parent, ident)

    # --- history ----------------------------------------------------------------------

    async def do_history(  # type: ignore[override]
        self, hist_access_type: str = "tail", output: bool = False, raw: bool = True, session: int | None = None,
        start: int | None = None, stop: int | None = None, n: int | None = None, pattern: str | None = None,
        unique: bool = False, **_extensions: Any,
    ) -> dict[str, Any]:
        """As ipykernel answers history_request. Fields a newer protocol adds are
        ignored; a field of the wrong type or range is an error reply in one line."""
        try:
            if hist_access_type not in ("tail", "range", "search"):
                raise ValueError(f"hist_access_type must be tail, range or search, got {str(hist_access_type)[:40]!r}")
            items = self._history_rows(HistoryRequest(
                kind=hist_access_type, raw=bool(raw), output=bool(output),
                n=n, pattern=pattern or "*", unique=bool(unique),
                session=session or 0, start=1 if start is None else start, stop=stop,
            ))
        except (TypeError, ValueError) as err:
            line = f"bad history_request: {str(err).splitlines()[0][:200]}"
            return {"status": "error", "ename": "BadRequest", "evalue": line, "traceback": [f"BadRequest: {line}"],
                    "history": []}
        return {"status": "ok", "history": [list(item) for item in items]}

    # --- restart, shutdown, %reset ------------------------------------------------------

    def reset_interpreter(self) -> None:
        sandbox = self.sandbox
        if sandbox is not None:
            sandbox.restart()

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:  # type: ignore[override]
        self._cancel_input.set()
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._host_threads, self._close)
        finally:  # an unnamed kernel's session goes, unless this is a restart (session_lifecycle.py)
            await loop.run_in_executor(self._host_threads, self._lifecycle.shutdown, restart)
        return {"status": "ok", "restart": restart}

    def _close(self) -> None:
        self._sandbox_ready.wait(timeout=300)
        if self.sandbox is not None:
            self.sandbox.close()  # releases the session's lease
        self.history.close()

    def undo_last_cell(self) -> bool:
        sandbox = self.sandbox
        undo = getattr(sandbox, "undo", None)
        return bool(undo()) if undo is not None else False

    def prune(self, older_than_hours: float, dry_run: bool) -> PruneResult:
        """%prune: this user's idle sessions (all users' if the operator allows),
        never this kernel's own, never one a running kernel holds (leases)."""
        root = Path(self.workspace_root)
        me, current = self.identity.agent_key, self.session_id
        with SessionRegistry(root) as registry:
            def mine(session_id: str) -> bool:
                if session_id == current:
                    return False
                if self.prune_all_users:
                    return True
                entry = registry.lookup(session_id)
                return entry is not None and entry.agent_key == me

            return prune_sessions(older_than_hours, root, dry_run=dry_run, logger=self.sandbox_logger, only=mine)

    def set_limit(self, name: str, value: Any) -> None:
        """A notebook's change of one limit; LimitError (one line) if refused."""
        self.set_policy(apply_limit(self.policy, name, value, self.operator_limits))

    def set_policy(self, policy: ExecutionPolicy) -> None:
        self.policy = policy
        if self.sandbox is not None:
            self.sandbox.policy = policy


def _started_pool(workers: int) -> ThreadPoolExecutor:
    """A pool whose threads all exist from the start: the cell's guest turn, the
    session's bookkeeping after a reply, and a query or magic can overlap, and a pool
    that grew its threads on demand would grow them at random moments for hours."""
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="wasm-kernel-host")
    ready = threading.Barrier(workers + 1)
    for _ in range(workers):
        pool.submit(ready.wait)
    ready.wait()
    return pool


class _Interrupted(Exception):
    """SIGINT arrived before the cell's guest turn could take it."""


class _SandboxFailed(Exception):
    """The sandbox did not start; the log has why, under `reference`."""

    def __init__(self, reference: str) -> None:
        super().__init__(reference)
        self.reference = reference


def _with_host_magics(found: dict[str, Any], code: str, cursor_pos: int) -> dict[str, Any]:
    """The guest's IPython knows only its own magics: `%fi<Tab>` also offers the
    host's %files, as one list, sorted as IPython sorts magics."""
    line_start = code.rfind("\n", 0, cursor_pos) + 1
    word = code[line_start:cursor_pos]
    if not word.startswith("%") or any(c.isspace() for c in word):
        return found
    cell = word.startswith("%%")
    names = MAGICS.cell_names() if cell else MAGICS.line_names()
    marks = "%%" if cell else "%"
    ours = [marks + n for n in names if n.startswith(word.lstrip("%"))]
    if not ours:
        return found
    if found.get("matches") and (found["cursor_start"], found["cursor_end"]) != (line_start, cursor_pos):
        return found  # the guest completed something else than the magic's name
    matches = sorted(set(found.get("matches", [])) | set(ours))
    types = [m for m in found.get("metadata", {}).get("_jupyter_types_experimental", []) if m.get("text") not in ours]
    types += [{"start": line_start, "end": cursor_pos, "text": m, "type": "magic", "signature": ""} for m in ours]
    return {"matches": matches, "cursor_start": line_start, "cursor_end": cursor_pos,
            "metadata": {"_jupyter_types_experimental": types}}


def _parent_info(parent: dict[str, Any]) -> dict[str, Any]:
    """What the guest's get_ipython().kernel.get_parent() shows of the request: its
    header and metadata (JupyterLab's cellId), not its content."""
    return {"header": dict(parent.get("header") or {}), "metadata": dict(parent.get("metadata") or {})}


class _CellRun:
    """One execute_request: sends its outputs, tagged with its parent, from any thread."""

    def __init__(self, kernel: WasmKernel, parent: dict[str, Any], silent: bool, allow_stdin: bool) -> None:
        self.kernel = kernel
        self.parent = parent
        self.silent = silent
        self.allow_stdin = allow_stdin
        self.result_text: str | None = None  # the cell's Out[] as text, for history

    def _send(self, msg_type: str, content: dict[str, Any], metadata: dict[str, Any] | None = None,
              buffers: list[bytes] | None = None) -> None:
        session = self.kernel.session
        if session is not None:
            session.send(self.kernel.iopub_socket, msg_type, content, self.parent, ident=self.kernel._topic(msg_type),
                         metadata=metadata, buffers=buffers)

    def stream(self, name: str, text: str) -> None:
        if not self.silent and text:
            self._send("stream", {"name": name, "text": text})

    def display(self, output: Output) -> None:
        if isinstance(output, CommOutput):  # a widget's messages go out even from a silent request
            self._send(output.msg_type, output.content, output.metadata, list(output.buffers))
            return
        if self.silent:
            return
        if isinstance(output, ErrorOutput):
            # Sent when the shell shows it, in order with the cell's other outputs, as
            # ipykernel does; the reply repeats it.
            self._send("error", {"ename": output.ename, "evalue": output.evalue, "traceback": output.traceback})
            return
        if output.kind == "clear_output":
            self._send("clear_output", {"wait": output.wait})
            return
        content: dict[str, Any] = {"data": output.data, "metadata": output.metadata}
        if output.kind == "execute_result":
            content["execution_count"] = self.kernel.execution_count
            plain = output.data.get("text/plain")
            self.result_text = plain if isinstance(plain, str) else None
        else:
            content["transient"] = {"display_id": output.display_id} if output.display_id else {}
        self._send(output.kind, content)

    def send_comm(self, comm_id: str, data: dict[str, Any]) -> None:
        """A comm_msg from the host itself (the session panel's answers and events)."""
        self._send("comm_msg", {"comm_id": comm_id, "data": data})

    def send_display(self, data: dict[str, Any], display_id: str | None = None) -> None:
        if self.silent:
            return
        self._send("display_data", {"data": data, "metadata": {}, "transient": {"display_id": display_id} if display_id else {}})

    def update_display(self, data: dict[str, Any], display_id: str) -> None:
        if not self.silent:
            self._send("update_display_data", {"data": data, "metadata": {}, "transient": {"display_id": display_id}})

    def clear_output(self) -> None:
        if not self.silent:
            self._send("clear_output", {"wait": False})

    def show_magic_output(self, out: MagicOutput) -> None:
        self.stream("stdout", out.text)
        for bundle in out.bundles:
            self.send_display(bundle)

    def ok_reply(self) -> dict[str, Any]:
        return {"status": "ok", "execution_count": self.kernel.execution_count, "payload": [], "user_expressions": {}}

    def error_reply(self, ename: str, evalue: str, traceback: list[str]) -> dict[str, Any]:
        if not self.silent:
            self._send("error", {"ename": ename, "evalue": evalue, "traceback": traceback})
        return {"status": "error", "execution_count": self.kernel.execution_count, "ename": ename,
                "evalue": evalue, "traceback": traceback}

    def interrupted_reply(self, grace: float | None = None) -> dict[str, Any]:
        """A cell stopped by an interrupt from outside its code (a soft interrupt is
        the cell's own KeyboardInterrupt, shown by IPython): rolled back, and why."""
        if grace is None:
            line = "KeyboardInterrupt: the cell was interrupted; variables are as they were before it ran"
        else:
            line = (f"KeyboardInterrupt: the cell did not stop within {grace:g} s of the interrupt (it was in a long "
                    "call into compiled code), so it was stopped and rolled back; variables are as they were before it ran")
        return self.error_reply("KeyboardInterrupt", "", [line])

    def usage_error(self, message: str) -> dict[str, Any]:
        # As IPython shows a UsageError: one line on stderr, no traceback; the
        # reply still says the cell failed.
        self.stream("stderr", f"UsageError: {message}\n")
        return {"status": "error", "execution_count": self.kernel.execution_count, "ename": "UsageError",
                "evalue": message, "traceback": []}

    def reply_for(self, result: SandboxResult) -> dict[str, Any]:
        for name in ("stdout", "stderr", "display"):
            if getattr(result, f"{name}_truncated"):
                self.stream("stderr", f"{truncation_hint(name, self.kernel.policy, self.kernel.operator_limits)}\n")
        if result.disk_full and self.kernel.sandbox is not None:
            used = self.kernel.sandbox.disk_usage()
            self.stream("stderr", f"{disk_full_line(self.kernel.policy, self.kernel.operator_limits, used)}\n")
        if result.error is not None and is_memory_error(result.error.ename, result.error.evalue):
            too_big = result.error.ename not in MEMORY_ERRORS
            self.stream("stderr", f"{memory_error_hint(self.kernel.policy, self.kernel.operator_limits, too_big)}\n")
        if result.trap == "interrupted":
            return self.interrupted_reply(self.kernel.policy.interrupt_grace_seconds if result.interrupt_grace_expired
                                          else None)
        if result.trap is not None:
            message = trap_line(result.trap, self.kernel.policy, self.kernel.operator_limits)
            name = {"out_of_fuel": "FuelExhausted", "deadline": "DeadlineExceeded", "memory": "MemoryLimit",
                    "stack_overflow": "StackOverflow"}.get(result.trap, "SandboxError")
            return self.error_reply(name, message, [f"{name}: {message}"])
        if result.error is not None:
            # The shell already sent its traceback as an `error` output (or, for a
            # UsageError, one line on stderr), as ipykernel does: the reply only says.
            error = result.error
            reply = {"status": "error", "execution_count": self.kernel.execution_count, "ename": error.ename,
                     "evalue": error.evalue, "traceback": list(error.traceback)}
        elif not result.success:  # os._exit(): ipykernel's kernel would have died
            text = result.metadata.get("restarted_reason", "the interpreter exited; it was restarted, files kept")
            return self.error_reply("SystemExit", str(result.exit_code), [f"SystemExit: {text}"])
        else:
            reply = self.ok_reply()
        if result.payload:
            reply["payload"] = list(result.payload)
        if result.restarted:
            self.stream("stderr", f"{result.metadata.get('restarted_reason', 'the interpreter was restarted')}\n")
        return reply


__all__ = ["WasmKernel"]
