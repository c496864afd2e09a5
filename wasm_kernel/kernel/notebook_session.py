"""The notebook's session, as one kernel holds it: which session, its sandbox, its history, its limits.

A NotebookSession finds the notebook the kernel serves, binds its stable identity
to a session in the registry, opens the session's sandbox in the background (a
first start compiles the guest and builds the warm image, with progress), and
keeps the session's history. It is what the host magics and the lab panel act on
(session_protocol.SessionView): limits, prune, undo, reset, the notebook's name and
folder. It knows nothing of Jupyter's messages; the kernel (sandbox_kernel.py)
turns requests into calls on it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timezone
from contextlib import contextmanager
from pathlib import Path
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from ..core.logger import SandboxLogger
from ..core.policy import ExecutionPolicy
from ..core.file_changes import FileChanges
from ..core.sandbox import GuestOptions
from ..runtime.guest_config import PointLimits
from ..host.cache_dir import cache_root
from ..host.engine import set_process_metering
from ..host.network_policy import NetworkPolicy
from ..runtime.guest_messages import HistoryRequest
from ..runtime.startup import Preflight, StartupProgress, prepare_start
from ..runtime.hibernation import Hibernated, StateKeeping, StateTooLarge, load_saved_state
from ..runtime.wire_text import clean_text
from ..sessions.earlier_sessions import earlier_session_notice
from ..sessions.history_store import SessionHistory
from ..sessions.identity import SessionIdentity
from ..sessions.layout import ensure_points_parent, ensure_private_dirs
from ..sessions.lifecycle import delete_session_workspace, get_session_sandbox
from ..sessions.metadata import recover_metadata
from ..sessions.registry import SessionRegistry
from ..sessions.saved_state import SessionGenerations, StateKeyError, state_folder, state_key
from ..sessions.sandbox import SessionSandbox
from ..sessions.session_workspace import SessionWorkspace
from .cell_run import CellRun, Interrupted
from .course_environment import COURSE_PROGRESS, CourseEnvironment
from .kernel_limits import LIMITS, NOTEBOOK, RUN, RUN_CEILING, LimitError, Remedies, apply_limit
from .kernel_settings import KernelSettings
from .magics import MAGICS
from .message_guard import new_reference
from .notebook_folder import FolderChoice, choose_notebook_folder, private_kernel_folders
from .notebook_identity import NotebookSource, find_notebook, is_unnamed, kernel_identity, place_notebook, working_folder
from .notebook_roots import NotebookRoots
from .rewinds import Rewinds, SessionPackages, disk_limits
from .session_lifecycle import SessionLifecycle
from .time_text import format_when

if TYPE_CHECKING:
    from ..sessions.pip_runner import PipSettings
    from ..sessions.pruning import PruneResult

PROGRESS_EVERY_S = 1.0
SHARED_NOTICE = (
    "wasm-kernel: this notebook's session is also open in another kernel; both read and write "
    "the same files in /app, each with its own variables (shut the other kernel down to have it alone)"
)


INFORMATION, WARNING = "stdout", "stderr"  # the stream a notice is shown on


RECENT_CELLS = 10  # as many as the panel's "Last cells" shows


class Notice(NamedTuple):
    """A line for the first cell. Information goes to stdout: JupyterLab paints
    stderr as an error, and a resumed state or the folder shown is none."""

    stream: str
    text: str | None


class SandboxFailed(Exception):
    """The sandbox did not start; the log has why, under `reference`."""

    def __init__(self, reference: str) -> None:
        super().__init__(reference)
        self.reference = reference


class NotebookSession:
    """One kernel's session, from its binding at start to its close at shutdown."""

    def __init__(self, settings: KernelSettings, log: logging.Logger, connection_file: str | None,
                 control_thread: threading.Thread | None, interrupted: threading.Event) -> None:
        self.settings = settings
        self.log = log
        # One metering per kernel process: the compile cache, the first start's
        # compile and the warm-up all mean the module it runs.
        set_process_metering(settings.metering)
        # The course's packages, mounted for every guest of this process before the
        # warm image is looked for (its key holds them); built by _open if not yet.
        self.course = CourseEnvironment(settings, log)
        # The sandbox's first start-up checks need no session: they run now, beside
        # the registry bind and the history's open below (sqlite, mostly off the GIL).
        self._preflight = Preflight(settings.preload())
        self.sandbox_logger = SandboxLogger()
        self.policy = settings.startup_policy()
        self.operator_limits = self.policy  # the most a notebook may set: %limits goes downward only
        self.connection_file = connection_file
        # Where the notebook's folder lies, checked before the identity: a folder outside
        # every root the kernel trusts was a client's choice, and names no session.
        roots = NotebookRoots.for_kernel(os.environ, settings.notebook_roots)
        self.notebook: NotebookSource
        self.notebook, self._placement = place_notebook(find_notebook(os.environ, connection_file), roots,
                                                        working_folder())
        where = self._placement.path or (roots.roots[0] if roots.roots else None)
        self.identity: SessionIdentity
        self.identity, self._identity_notice = kernel_identity(
            self.notebook, settings.session_scope, connection_file, settings.agent_key,
            where=None if where is None else str(where),
        )
        # What the start found in the private folder where one of ours goes, and set
        # aside (host/set_aside.py): a line each, on the first cell.
        self._set_aside: list[str] = []
        self.rewinds: Rewinds | None = None  # %rewind's files and points (rewinds.py), once the sandbox is open
        self._rewind_notice: str | None = None
        self._earlier_notice: str | None = None  # a moved notebook's old session (earlier_sessions.py)
        self.session_id = self._bind()
        self.lifecycle = SessionLifecycle(
            self.workspace_root, lambda: self.session_id, unnamed=is_unnamed(self.notebook),
            keep_hours=settings.keep_unnamed_sessions_hours, logger=self.sandbox_logger, log=log,
            control_thread=control_thread,
        )
        self.history = SessionHistory(self.workspace_root, self.session_id, notes=self._set_aside)
        self.history_session = self.history.start_kernel_session()
        self._state_notice: str | None = None
        # The network door: the operator's rules, and the notebook's narrowing of them (%network).
        self.operator_network, self._network_notice = settings.network_policy()
        self.network = self.operator_network
        # Unreadable metadata is set aside first: it says which saved state is the latest.
        recover_metadata(self.workspace_root, self.session_id, self.sandbox_logger, self._set_aside)
        self.keeping = self._state_keeping()
        # Read (and authenticated) now, before any request: the kernel's execution
        # count continues from the saved one (WasmKernel.__init__).
        self.saved_state, self._state_notice = (None, self._state_notice) if self.keeping is None else \
            load_saved_state(self.keeping, self._set_aside)
        self._saved_rewinds: dict[str, Any] | None = None  # the files' side of a saved state's points
        if self.saved_state is not None:
            host = self.saved_state.manifest.get("host")
            self._restore_limits(host)
            if isinstance(host, dict) and isinstance(host.get("rewinds"), dict):
                self._saved_rewinds = host["rewinds"]
        self.sandbox: SessionSandbox | None = None
        self.ready = threading.Event()  # set once the sandbox opened, or failed to
        self.settled = threading.Event()  # set once the first cell replied (the start's work is done)
        self._reference = ""
        self.startup = StartupProgress()  # a first start's steps (runtime/startup.py), shown by the waiting cell
        self._folder = FolderChoice(None)  # the notebook's folder under /app, chosen as the sandbox opens
        self._notices_shown = False
        # What the last cells cost, newest first (session_comm.cell_event): a panel that
        # opens later, or binds again on a notebook switch, shows the kernel's history.
        self.recent_cells: deque[dict[str, Any]] = deque(maxlen=RECENT_CELLS)
        self._packages_changed = False
        self._interrupted = interrupted  # the kernel's: SIGINT during the current request
        self._magic_run: CellRun | None = None  # the cell a host magic runs in
        self._closing = threading.Lock()
        self._closed = self._shut_down = False
        self._files: SessionWorkspace | None = None

    def start(self) -> None:
        """Open the sandbox in the background, then run the automatic prune."""
        threading.Thread(target=self._open, name="wasm-kernel-start", daemon=True).start()
        self.lifecycle.prune_when_ready(self.ready, self.settled)

    @property
    def workspace_root(self) -> Path:
        return self.settings.workspace_root_path

    @property
    def files(self) -> SessionWorkspace:
        """The workspace as the host magics and the panel write to it: the ledger the
        sandbox's guest shares (a workspace of its own until the sandbox opened)."""
        sandbox = self.sandbox
        if sandbox is not None:
            return sandbox.files
        if self._files is None:
            self._files = SessionWorkspace(self.workspace_root, self.session_id)
        return self._files

    # --- saved state ----------------------------------------------------------------------

    def _state_keeping(self) -> StateKeeping | None:
        """Where this session's interpreter is saved at shutdown; None when it is not:
        the operator turned it off, or no later kernel could find the session again
        (an unnamed run's, a `run`-scoped one)."""
        settings = self.settings
        if not settings.keep_state or is_unnamed(self.notebook) or self.identity.mode == "run":
            return None
        try:
            key = state_key(self.workspace_root, self.session_id, settings.state_secret, self._set_aside)
        except (StateKeyError, OSError) as err:
            self.log.warning("wasm-kernel: no state is kept: %s", err)
            self._state_notice = f"the interpreter's state is not kept for this notebook: {err}"
            return None
        age = settings.state_max_age_hours
        return StateKeeping(state_folder(self.workspace_root, self.session_id), key, settings.state_max_bytes,
                            None if age is None else age * 3600,
                            SessionGenerations(self.workspace_root, self.session_id))

    def _restore_limits(self, host: object) -> None:
        """The limits the notebook had set (%limits) come back with its interpreter,
        through apply_limit as a %limits would: downward from the operator's only, so
        a state saved under looser rules (the operator lowered them since) gets today's."""
        limits = host.get("limits") if isinstance(host, dict) else None
        if not isinstance(limits, dict):
            return
        policy = self.policy
        for name, value in limits.items():
            if name not in LIMITS or value == getattr(policy, LIMITS[name].field):
                continue
            try:
                policy = apply_limit(policy, name, value, self.operator_limits)
            except LimitError as err:
                self.log.info("wasm-kernel: a saved limit was not restored: %s", err)
        self.policy = policy

    @property
    def saved_cells(self) -> int | None:
        """The execution count of the state this kernel will wake, if it found one."""
        state = self.saved_state
        return int(state.manifest.get("cells", 0)) if state is not None else None

    def hibernate(self, cells: int) -> None:
        """Save the interpreter for the notebook's next start. A state that does not
        fit is not saved, and the older one goes: waking a state older than the
        files would be worse than a fresh start. Never raises."""
        sandbox = self.sandbox
        if sandbox is None or self.keeping is None:
            return
        try:
            limits = {name: getattr(self.policy, spec.field) for name, spec in LIMITS.items()}
            host: dict[str, Any] = {"limits": limits}
            kept = self.rewinds.export() if self.rewinds is not None else None
            if kept is not None:
                host["rewinds"] = kept
            saved = sandbox.hibernate(cells, full=self.settings.state_portable, host=host)
            self.log.info("wasm-kernel: saved the interpreter's state (%d cells, %d bytes)", cells, saved.size_on_disk)
        except StateTooLarge as err:  # the older state is gone, and the next start says why
            self.log.warning("wasm-kernel: the interpreter's state was not saved: %s", err)
        except Exception as err:
            sandbox.discard_state()
            self.log.error("wasm-kernel: the interpreter's state could not be saved", exc_info=err)

    def discard_state(self) -> None:
        """A restart or %reset: the next start is a fresh one, as on ipykernel."""
        if self.sandbox is not None and self.keeping is not None:
            self.sandbox.discard_state()

    @property
    def limit_advice(self) -> tuple[ExecutionPolicy, Remedies]:
        """For a limit's line, where this kernel runs: the most its reader may raise a
        limit to, and how. A notebook: the operator's limits, with %limits. Under
        `wasm-kernel run` the reader is the operator: the hard bounds, with its flags."""
        return (RUN_CEILING, RUN) if self.settings.cli_run else (self.operator_limits, NOTEBOOK)

    def state_summary(self) -> str:
        """For %session: whether this kernel woke a saved state, and what is saved now."""
        if self.keeping is None:
            if self.settings.cli_run:  # by design, not the operator's choice
                return "not kept: `wasm-kernel run` keeps no state"
            if not self.settings.keep_state:
                return "not kept (the operator turned it off)"
            return "not kept (no later kernel finds this session: it is this kernel's alone)"
        sandbox = self.sandbox
        resumed = sandbox.resumed if sandbox is not None else None
        text = "kept at shutdown"
        if resumed is not None:
            when = format_when(datetime.fromtimestamp(resumed.saved_at, timezone.utc))
            text += f"; this kernel resumed the state saved {when} {_saved_facts(resumed)}"
        else:
            text += "; this kernel started afresh"
        return text

    def state_notices(self, sandbox: SessionSandbox) -> list[Notice]:
        """What the first cell says about a saved state: woken (information), or why
        not (a warning)."""
        resumed = sandbox.resumed
        if resumed is not None:
            # UTC, as every time the kernel shows (time_text.py); the date once it is not today's.
            moment = datetime.fromtimestamp(resumed.saved_at, timezone.utc)
            when = f"{moment:%H:%M} UTC" if time.time() - resumed.saved_at < 20 * 3600 else f"{moment:%Y-%m-%d %H:%M} UTC"
            line = f"resumed the state saved at {when} {_saved_facts(resumed)}"
            if resumed.closed_files:
                n = resumed.closed_files
                line += f"; {n} file{'s' if n != 1 else ''} open at shutdown {'were' if n != 1 else 'was'} closed: open {'them' if n != 1 else 'it'} again"
            return [Notice(INFORMATION, line)]
        notice = sandbox.resume_notice or self._state_notice
        return [Notice(WARNING, notice)] if notice else []

    # --- identity -------------------------------------------------------------------------

    def _bind(self) -> str:
        self.workspace_root.mkdir(parents=True, exist_ok=True)
        ensure_private_dirs(self.workspace_root, self._set_aside)
        with SessionRegistry(self.workspace_root, ttl_hours=self.settings.registry_ttl_hours,
                             notes=self._set_aside) as registry:
            bound = registry.bind(self.identity)
            if bound.created and self._identity_notice is None:  # a notebook's new session: moved there?
                try:
                    self._earlier_notice = earlier_session_notice(registry, self.identity)
                except Exception as err:  # only a hint: never a reason not to start
                    self.log.warning("wasm-kernel: no look for an earlier session of this notebook: %s", err)
            return bound.session_id

    def _bound_under_lease(self) -> str:
        """The identity's session, asked again once the lease is held. Its row still
        naming our session is the usual answer, and a read (no write, no sync) says
        so: the first bind refreshed it moments ago, and no prune can drop it while
        we hold the lease. Anything else is bound again."""
        with SessionRegistry(self.workspace_root, ttl_hours=self.settings.registry_ttl_hours) as registry:
            entry = registry.lookup_identity(self.identity)
            if entry is not None and entry.session_id == self.session_id:
                return self.session_id
            return registry.get_or_create_session(self.identity)

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
                with SessionRegistry(self.workspace_root) as registry:
                    entry = registry.lookup(self.session_id)
                if entry is not None:
                    path = entry.notebook_path
            except Exception as err:  # a broken registry costs the rename, not %session
                self.log.debug("wasm-kernel: the registry gave no notebook name: %s", err)
        # clean_text: a non-UTF-8 file name must not make the reply undecodable.
        return clean_text(os.path.basename(path))

    def notebook_folder_state(self) -> str:
        """For %session: whether the notebook's folder shows under /app (no host path)."""
        if self.settings.notebook_files == "off":
            return "not shown (the operator turned it off)"
        if self._folder.folder is not None:
            return f"shown read-only under /app, beneath the workspace ({self.settings.notebook_files_depth} folders deep)"
        return f"not shown: {self._folder.refused}" if self._folder.refused else "not shown"

    # --- opening the sandbox --------------------------------------------------------------

    def _choose_folder(self) -> FolderChoice:
        settings = self.settings
        return choose_notebook_folder(
            self._placement, mode=settings.notebook_files, max_files=settings.notebook_files_max,
            max_depth=settings.notebook_files_depth, protected=[self.workspace_root, cache_root()],
            private=private_kernel_folders(self.connection_file), quiet=self.notebook.outside,
        )

    def _guest_options(self) -> GuestOptions:
        network = self.network
        return GuestOptions(
            host_magics=MAGICS.kinds(), history=self.history_rows, session_number=self.history_session,
            notebook=self._folder.folder, warm_image=self.settings.warm_image, preload=self.settings.preload(),
            environment=self.settings.passed_environment(), shell_commands=self.settings.shell_commands,
            keep_state=self.keeping, resume=self.saved_state, network=network, metering=self.settings.metering,
            log_context={"session": self.session_id}, points=self._point_limits(),
        )

    def _start_rewinds(self, sandbox: SessionSandbox) -> None:
        """The files' side of the points, under the sandbox's lease: a rewind a kill
        broke off is put back first, before any cell."""
        limits = self._point_limits()
        if limits is None:
            return
        saved = self._saved_rewinds if sandbox.resumed is not None else None  # only with the state it was kept with
        self.rewinds = Rewinds(sandbox.files, limits.folder, limits.max_bytes, lambda: disk_limits(self.policy), saved,
                               packages=SessionPackages(self.workspace_root, self.session_id, self._looked_again))
        self._saved_rewinds = None
        self._rewind_notice = self.rewinds.notice

    def after_cell(self, count: int, code: str, changes: FileChanges) -> None:
        """A cell's files are its point's (before its reply)."""
        sandbox = self.sandbox
        if self.rewinds is not None and sandbox is not None:
            self.rewinds.after_cell(count, code, changes, sandbox.take_host_changes())

    def _point_limits(self) -> PointLimits | None:
        """Where the session's points go (%rewind), made owner-only and never through
        a link; None if that folder cannot be had: the kernel runs without points."""
        try:
            folder = ensure_points_parent(self.workspace_root, self.session_id, self._set_aside)
        except OSError as err:
            self.log.warning("wasm-kernel: no points are kept (%rewind): %s", err)
            return None
        return PointLimits(folder, self.settings.history_max_points, self.settings.history_max_bytes)

    def _open_session_sandbox(self, session_id: str) -> SessionSandbox:
        options = self._guest_options()
        self.saved_state = None  # the guest owns it now (and closes it): woken once at most
        return get_session_sandbox(
            session_id, policy=self.policy, workspace_root=self.workspace_root, logger=self.sandbox_logger,
            guest_options=options, notes=self._set_aside,
        )

    def _open(self) -> None:
        try:
            self._preflight.join()
            # The course's packages come before the image: its key holds them.
            course = [(COURSE_PROGRESS, self.course.build)] if self.course.pending else []
            prepare_start(self.settings.preload(), self.startup, more=course,
                          warm_image=self.settings.warm_image and (bool(course) or not self._preflight.image_ready))
            self._folder = self._choose_folder()
            sandbox = self._open_session_sandbox(self.session_id)
            # Bound again under the lease: a prune or rm that ran between our first
            # bind and the lease deleted the session and dropped its row, and what we
            # opened is a recreated empty folder. Then the identity's new session is
            # the one to use, and the empty orphan goes.
            bound = self._bound_under_lease()
            if bound != self.session_id:
                orphan = self.session_id
                sandbox.close()
                delete_session_workspace(orphan, self.workspace_root, logger=self.sandbox_logger)
                self.session_id = bound
                self.history, old_history = SessionHistory(self.workspace_root, bound), self.history
                self.history_session = self.history.start_kernel_session()
                old_history.close()
                sandbox = self._open_session_sandbox(bound)
            self.sandbox = sandbox
            self._start_rewinds(sandbox)
        except BaseException as err:  # shown to the user by the first cell, by reference
            self._reference = new_reference()
            self.log.error("wasm-kernel: the sandbox could not start (reference %s)", self._reference, exc_info=err)
        finally:
            self.ready.set()
            if not gc.isenabled():  # python -m wasm_kernel starts with it off (see there)
                gc.freeze()
                gc.enable()

    async def wait_until_open(self, run: CellRun | None) -> SessionSandbox:
        """The sandbox, once open. A cell that waits (a first start compiling the guest
        or building the warm image) shows progress in a display that is cleared when
        the wait ends: a person sees it, the saved notebook does not (nbclient, nbconvert
        and JupyterLab all apply clear_output), and the log has it too."""
        shown = 0.0
        display_id = None
        while not self.ready.is_set():
            if self._interrupted.is_set() and run is not None:
                if display_id is not None:
                    run.clear_output()
                raise Interrupted
            step = self.startup.current()
            if run is not None and step is not None and time.monotonic() - shown >= PROGRESS_EVERY_S:
                text = f"{step.what}: {step.reading.text()}"
                if display_id is None:
                    display_id = f"wasm-kernel-start-{new_reference()}"
                    run.send_display({"text/plain": text}, display_id)
                else:
                    run.update_display({"text/plain": text}, display_id)
                self.log.info("wasm-kernel: %s", text)
                shown = time.monotonic()
            # Woken the moment the sandbox is ready (an asyncio.sleep(0.1) poll here
            # cost a first cell up to 100 ms), and every 0.1 s for progress and SIGINT.
            await asyncio.to_thread(self.ready.wait, 0.1)
        if display_id is not None and run is not None:
            run.clear_output()
        if self.sandbox is None:
            raise SandboxFailed(self._reference)
        return self.sandbox

    def take_notices(self, sandbox: SessionSandbox) -> list[Notice]:
        """What the first cell shown tells the user once: how the identity was chosen,
        a session shared with another kernel, the notebook folder, the boot."""
        if self._notices_shown:
            return []
        self._notices_shown = True
        # Leases are shared: a second kernel on one notebook opens the same
        # session, as two ipykernels share the notebook's folder. It is told so.
        shared = SHARED_NOTICE if sandbox.lease.shared_with_others() else None
        image = f"wasm-kernel: {sandbox.boot_notice}" if sandbox.boot_notice else None
        state = [Notice(n.stream, f"wasm-kernel: {n.text}") for n in self.state_notices(sandbox)]
        aside = [Notice(WARNING, f"wasm-kernel: {line}") for line in self._set_aside]
        # What the kernel chose (the session, the folder shown): information. What
        # went wrong (a boot without the warm image, files set aside, a state or a
        # network list refused): a warning, on stderr.
        said = [Notice(INFORMATION, self._identity_notice), Notice(INFORMATION, self._earlier_notice),
                Notice(INFORMATION, shared),
                Notice(INFORMATION, self._folder.notice), Notice(WARNING, image), *aside, *state,
                Notice(WARNING, self._network_notice), Notice(WARNING, self.course.notice),
                Notice(WARNING, f"wasm-kernel: {self._rewind_notice}" if self._rewind_notice else None)]
        return [n for n in said if n.text is not None]

    # --- history --------------------------------------------------------------------------

    def history_rows(self, request: HistoryRequest) -> list[Any]:
        """This session's history from the host's store: the guest shell's reads
        (%history, In after a restart of the interpreter) and history_request."""
        history = self.history
        if request.kind == "tail":
            n = 10 if request.n is None else request.n
            return history.tail(n, raw=request.raw, output=request.output, include_latest=True)
        if request.kind == "search":
            return history.search(request.pattern, raw=request.raw, output=request.output, n=request.n, unique=request.unique)
        return history.get_range(request.session, request.start, request.stop, raw=request.raw, output=request.output)

    def store_history(self, execution_count: int, code: str, result_text: str | None) -> None:
        self.history.store(self.history_session, execution_count, code, result_text)

    # --- what host magics and the panel do ------------------------------------------------

    @contextmanager
    def magic_running_in(self, run: CellRun) -> Iterator[None]:
        """While a host magic runs: where say() streams to."""
        self._magic_run = run
        try:
            yield
        finally:
            self._magic_run = None

    def say(self, text: str) -> None:
        """Stream text to the cell a host magic runs in (%pip's progress)."""
        run = self._magic_run
        if run is not None:
            run.stream("stdout", text)

    def interrupted(self) -> bool:
        return self._interrupted.is_set()

    def pip_settings(self) -> PipSettings:
        """The operator's pip settings, with the course's packages counted as installed."""
        return replace(self.settings.pip_settings, provided=self.course.provided)

    def packages_changed(self) -> None:
        """%pip changed the session's packages: the guest's import caches must look again,
        and the set is this cell's point's."""
        self._packages_changed = True
        if self.rewinds is not None:
            self.rewinds.packages_changed(self.cell_count())


    def _looked_again(self) -> None:
        self._packages_changed = True  # a rewind uninstalled some: the guest's import caches look again

    def take_packages_changed(self) -> bool:
        """Whether packages changed since the last guest turn (which then looks again)."""
        changed, self._packages_changed = self._packages_changed, False
        return changed

    def prune(self, older_than_hours: float, dry_run: bool) -> PruneResult:
        """%prune: this user's idle sessions (all users' if the operator allows),
        never this kernel's own, never one a running kernel holds (leases)."""
        from ..sessions.pruning import prune_sessions  # %prune's: not every start's import

        root = self.workspace_root
        me, current, everyone = self.identity.agent_key, self.session_id, self.settings.prune_all_users
        with SessionRegistry(root) as registry:
            def mine(session_id: str) -> bool:
                if session_id == current:
                    return False
                if everyone:
                    return True
                entry = registry.lookup(session_id)
                return entry is not None and entry.agent_key == me

            return prune_sessions(older_than_hours, root, dry_run=dry_run, logger=self.sandbox_logger, only=mine)

    def set_limit(self, name: str, value: Any) -> None:
        """A notebook's change of one limit; LimitError (one line) if refused."""
        self.set_policy(apply_limit(self.policy, name, value, self.operator_limits))

    def set_network(self, policy: NetworkPolicy | None) -> None:
        """%network: the hosts this notebook may fetch from (narrowed by NetworkPolicy.narrowed)."""
        self.network = policy
        if self.sandbox is not None:
            self.sandbox.set_network(policy)

    def set_policy(self, policy: ExecutionPolicy) -> None:
        self.policy = policy
        if self.sandbox is not None:
            self.sandbox.policy = policy

    def reset_interpreter(self) -> None:
        sandbox = self.sandbox
        if sandbox is not None:
            sandbox.restart()
            self.discard_state()

    def cell_count(self) -> int:
        return int(getattr(self.settings, "execution_count", 0))  # the kernel's own count (settings is the kernel)

    def undo_last_cell(self) -> bool:
        sandbox = self.sandbox
        return bool(sandbox.undo()) if sandbox is not None else False

    # --- the end --------------------------------------------------------------------------

    def close(self, restart: bool = False, cells: int | None = None) -> None:
        """Close the sandbox (which releases the session's lease) and the history. A
        shutdown that is not a restart first saves the interpreter (keep_state), as
        of `cells` cells; a restart drops any saved one, as ipykernel's restart
        starts afresh."""
        with self._closing:  # once: a SIGTERM during a shutdown's save waits for it, never saves twice
            if self._closed:
                return
            self._closed = True
            self._close(restart, cells)

    def _close(self, restart: bool, cells: int | None) -> None:
        self.ready.wait(timeout=300)
        if self.sandbox is not None:
            if restart:
                self.discard_state()
            elif cells is not None:
                self.hibernate(cells)
            self.sandbox.close()
        if self.saved_state is not None:  # never handed to a guest (the start failed)
            self.saved_state.close()
            self.saved_state = None
        if self._files is not None:
            self._files.close()
        self.history.close()

    def shutdown(self, restart: bool) -> None:
        """After close: an unnamed kernel's session goes, unless this is a restart (session_lifecycle.py). Once."""
        with self._closing:
            if self._shut_down:
                return
            self._shut_down = True
        self.lifecycle.shutdown(restart)


def _saved_facts(resumed: Hibernated) -> str:
    """"(12 cells, 38 MB)": what the first cell's line and %session say of a woken state."""
    return f"({resumed.cells} cell{'s' if resumed.cells != 1 else ''}, {resumed.size_on_disk / 1e6:,.0f} MB)"


__all__ = ["INFORMATION", "WARNING", "Notice", "NotebookSession", "SandboxFailed"]
