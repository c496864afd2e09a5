"""WasmKernel: the Jupyter kernel. Every cell runs in the session's WASI guest.

Built on ipykernel's `Kernel` base with async `do_*` methods. A cell runs on a
worker thread so the event loop stays free; the guest's output callbacks publish
`stream`/`display_data` messages as they come, tagged with the request they belong
to. Interrupts arrive as SIGINT (interrupt_mode "signal"): our handler stops the
running guest turn, which rolls back, and the kernel lives on.

The guest is started in the background at kernel start, so kernel_info answers at
once even when the guest must first be compiled (~100 s, once per machine); a cell
sent meanwhile shows that progress instead of hanging silently.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ipykernel._version import kernel_protocol_version
from ipykernel.kernelbase import Kernel
from jupyter_core.paths import jupyter_data_dir
from traitlets import Bool, Enum, Float, Int, Unicode, default

from .. import __version__
from ..core.logger import SandboxLogger
from ..core.policy import GIB, MIB, ExecutionPolicy
from ..core.result import SandboxResult
from ..host.artifacts import guest_artifacts
from ..host.module_cache import is_guest_cached, load_guest_module
from ..runtime.guest_messages import DisplayOutput
from ..sessions.file_ops import stat_session_paths
from ..sessions.history_store import SessionHistory
from ..sessions.identity import SessionIdentity
from ..sessions.lifecycle import delete_session_workspace, get_session_sandbox
from ..sessions.pruning import PruneResult, prune_sessions
from ..sessions.registry import SessionRegistry
from ..sessions.sandbox import SessionSandbox
from .file_changes_display import CellFileChanges, display_id_for, file_changes_bundle
from .kernel_limits import LIMITS, Ceilings, LimitError, apply_limit, trap_line, truncation_hint
from .magics import MAGICS
from .magics.registry import MagicError, MagicOutput, help_request, split_cell
from .notebook_identity import NotebookSource, find_notebook, kernel_identity

_PROGRESS_EVERY_S = 5.0


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
    max_fuel = Int(5_000_000_000_000, allow_none=True, help="Ceiling for fuel that a notebook may set (None: none).").tag(config=True)
    max_memory = Int(4 * GIB, help="Ceiling for memory that a notebook may set.").tag(config=True)
    max_deadline = Float(None, allow_none=True, help="Ceiling for deadline that a notebook may set (None: none).").tag(config=True)
    max_output_bytes = Int(100 * MIB, allow_none=True, help="Ceiling for the output caps a notebook may set.").tag(config=True)
    session_scope = Enum(
        ["notebook", "run", "day"], "notebook",
        help="notebook: one workspace per notebook and user, across restarts; run: one per kernel; day: one per notebook per UTC day.",
    ).tag(config=True)
    workspace_root = Unicode(help="Folder holding every session's workspace.").tag(config=True)
    show_file_changes = Bool(True, help="Show the files each cell created, modified or deleted.").tag(config=True)
    agent_key = Unicode(None, allow_none=True, help="Who owns the sessions (default: $JUPYTERHUB_USER, then the OS user).").tag(config=True)
    prune_all_users = Bool(False, help="Let %prune consider every user's sessions, not only this user's.").tag(config=True)
    registry_ttl_hours = Float(24.0 * 30, help="How long an unused notebook identity keeps its session in the registry.").tag(config=True)

    @default("workspace_root")
    def _default_workspace_root(self) -> str:
        return str(Path(jupyter_data_dir()) / "wasm-kernel" / "sessions")

    # Traits only the operator may set: %config refuses them at run time.
    OPERATOR_ONLY = frozenset(
        {"max_fuel", "max_memory", "max_deadline", "max_output_bytes", "workspace_root", "session_scope",
         "agent_key", "prune_all_users", "registry_ttl_hours"}
    )
    LIMIT_TRAITS = {"fuel": "fuel", "memory": "memory", "deadline": "deadline",
                    "stdout_max_bytes": "stdout", "stderr_max_bytes": "stderr"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sandbox_logger = SandboxLogger()
        self.policy = self._startup_policy()
        self.connection_file = self._connection_file()
        self.notebook: NotebookSource = find_notebook(os.environ, self.connection_file)
        self.identity: SessionIdentity = kernel_identity(
            self.notebook, self.session_scope, self.connection_file, self.agent_key
        )
        self.session_id = self._bind_session()
        self.history = SessionHistory(Path(self.workspace_root), self.session_id)
        self.history_session = self.history.start_kernel_session()
        self.sandbox: SessionSandbox | None = None
        self._sandbox_error: BaseException | None = None
        self._compile_progress: tuple[float, float] | None = None
        self._sandbox_ready = threading.Event()
        self._running = False
        self._cancel_input = threading.Event()  # ends a pending input_request
        self._interrupted = threading.Event()  # SIGINT during the current request
        threading.Thread(target=self._open_sandbox, name="wasm-kernel-start", daemon=True).start()

    # --- start-up --------------------------------------------------------------------

    def _connection_file(self) -> str | None:
        app = self.parent
        path = getattr(app, "abs_connection_file", None) or getattr(app, "connection_file", None)
        return str(path) if path else None

    @property
    def ceilings(self) -> Ceilings:
        return Ceilings(self.max_fuel, self.max_memory, self.max_deadline, self.max_output_bytes)

    def _startup_policy(self) -> ExecutionPolicy:
        """The operator's limits, each clamped to its ceiling with a warning: a
        kernel that refused to start over a config slip would help no one."""
        policy = ExecutionPolicy()
        for trait, limit in self.LIMIT_TRAITS.items():
            value = getattr(self, trait)
            try:
                policy = apply_limit(policy, limit, value, self.ceilings)
            except LimitError as err:
                self.log.warning("wasm-kernel: %s; using %s", err, getattr(policy, LIMITS[limit][0]))
        return policy

    def _bind_session(self) -> str:
        root = Path(self.workspace_root)
        with SessionRegistry(root, ttl_hours=self.registry_ttl_hours) as registry:
            return registry.get_or_create_session(self.identity)

    def _open_sandbox(self) -> None:
        try:
            if not is_guest_cached():
                # Compiled once per machine and memoised in this process, so the
                # sandbox below finds it ready.
                self._compile_progress = (0.0, 100.0)
                load_guest_module(self._on_compile_progress)
            root = Path(self.workspace_root)
            sandbox = get_session_sandbox(self.session_id, policy=self.policy, workspace_root=root, logger=self.sandbox_logger)
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
                sandbox = get_session_sandbox(bound, policy=self.policy, workspace_root=root, logger=self.sandbox_logger)
            self.sandbox = sandbox
        except BaseException as err:  # shown to the user by the first cell
            self._sandbox_error = err
        finally:
            self._compile_progress = None
            self._sandbox_ready.set()

    def _on_compile_progress(self, elapsed: float, expected: float) -> None:
        self._compile_progress = (elapsed, expected)

    async def _wait_for_sandbox(self, show: Callable[[str], None] | None) -> SessionSandbox:
        shown = 0.0
        while not self._sandbox_ready.is_set():
            if self._interrupted.is_set() and show is not None:
                raise _Interrupted
            progress = self._compile_progress
            if show is not None and progress is not None and time.monotonic() - shown >= _PROGRESS_EVERY_S:
                elapsed, expected = progress
                pct = min(99, int(100 * elapsed / expected)) if expected else 0
                show(
                    f"Compiling the Python guest for this machine (first start only, about {expected:.0f} s): "
                    f"{pct}% after {elapsed:.0f} s\n"
                )
                shown = time.monotonic()
            await asyncio.sleep(0.1)
        if self.sandbox is None:
            err = self._sandbox_error
            raise RuntimeError(f"the sandbox could not start: {err}") from None
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
        if not silent and not store_history:
            self.execution_count -= 1  # as IPython: only stored cells take a number
        parent = self.get_parent("shell")
        run = _CellRun(self, parent, silent, allow_stdin)
        try:
            reply = await self._execute(run, code, cell_id)
        except _Interrupted:
            reply = run.interrupted_reply()
        except Exception as err:  # never leave a request without a reply
            self.log.exception("wasm-kernel: execute failed")
            reply = run.error_reply("KernelError", f"{type(err).__name__}: {err}", [f"KernelError: {err}"])
        if store_history and not silent:
            self.history.store(self.history_session, self.execution_count, code, run.result_text)
        reply["execution_count"] = self.execution_count
        if user_expressions and self.sandbox is not None and reply["status"] == "ok":
            reply["user_expressions"] = await self._user_expressions(user_expressions)
        else:
            reply.setdefault("user_expressions", {})
        return reply

    async def _execute(self, run: _CellRun, code: str, cell_id: str | None) -> dict[str, Any]:
        sandbox = await self._wait_for_sandbox(lambda text: run.stream("stderr", text))
        asked = help_request(code)
        if asked is not None:
            return await self._help(run, *asked)
        try:
            steps = split_cell(code)
        except MagicError as err:
            return run.usage_error(str(err))
        changes = CellFileChanges([], [], [])
        reply: dict[str, Any] = run.ok_reply()
        for step in steps:
            if self._interrupted.is_set():
                reply = run.interrupted_reply()
                break
            if step.kind == "code":
                result = await self._run_in_guest(run, sandbox, step.text, cell_id)
            else:
                try:
                    magic = MAGICS.get(step.name, cell=step.kind == "cell")
                    out: MagicOutput = await asyncio.get_running_loop().run_in_executor(
                        None, magic.handler, self, step.text, step.body
                    )
                except MagicError as err:
                    reply = run.usage_error(str(err))
                    break
                run.show_magic_output(out)
                if out.page is not None:
                    reply["payload"] = [out.page]
                changes = _merge_lists(changes, out.created, out.modified, out.deleted)
                if out.guest_code is None:
                    continue
                result = await self._run_in_guest(run, sandbox, out.guest_code, cell_id, timed=out.timed)
            changes = _merge(changes, result)
            reply = run.reply_for(result)
            if reply["status"] != "ok":
                break
        self._show_file_changes(run, changes, cell_id)
        reply.setdefault("metadata", {}).update(changes.reply_metadata())
        return reply

    async def _run_in_guest(
        self, run: _CellRun, sandbox: SessionSandbox, code: str, cell_id: str | None, timed: bool = False
    ) -> SandboxResult:
        filename = f"<cell-{self.execution_count}>"
        kwargs: dict[str, Any] = {}
        if timed:
            kwargs["timed"] = True

        def execute() -> SandboxResult:
            return sandbox.execute(
                code,
                on_output=run.stream,
                on_display=run.display,
                on_input=self._ask_frontend if run.allow_stdin else None,
                filename=filename,
                **kwargs,
            )

        self._running = True
        try:
            result = await asyncio.get_running_loop().run_in_executor(None, execute)
        finally:
            self._running = False
        return result

    def _show_file_changes(self, run: _CellRun, changes: CellFileChanges, cell_id: str | None) -> None:
        if not changes or not self.show_file_changes or run.silent:
            return
        sizes = stat_session_paths(self.session_id, Path(self.workspace_root), changes.created + changes.modified)
        bundle = file_changes_bundle(changes, sizes, self.execution_count)
        run.send_display(bundle, display_id_for(self.session_id, self.execution_count, cell_id))

    # --- input() ---------------------------------------------------------------------

    def _ask_frontend(self, prompt: str, password: bool) -> str:
        """Called on a guest helper thread: send input_request on stdin, wait for the
        reply, and give up when the cell is interrupted (ipykernel's own loop would
        keep a thread polling the stdin socket forever)."""
        import zmq

        from jupyter_client.session import json_clean  # type: ignore[attr-defined]

        parent = self.get_parent("shell")
        ident = self._get_shell_context_var(self._shell_parent_ident)
        while True:  # drop stale replies
            try:
                self.stdin_socket.recv_multipart(zmq.NOBLOCK)
            except zmq.ZMQError:
                break
        assert self.session is not None
        self.session.send(self.stdin_socket, "input_request", json_clean({"prompt": prompt, "password": password}),
                          parent, ident=ident)
        while not self._cancel_input.is_set():
            if self.stdin_socket.poll(20):
                _ident, reply = self.session.recv(self.stdin_socket)
                if reply is None:
                    continue
                value = reply.get("content", {}).get("value", "")
                if value == "\x04":
                    raise EOFError
                return str(value)
        raise KeyboardInterrupt

    # --- user_expressions, complete, inspect, is_complete -------------------------------

    async def _query(self, op: str, **args: Any) -> Any:
        sandbox = await self._wait_for_sandbox(None)
        return await asyncio.get_running_loop().run_in_executor(None, lambda: sandbox.query(op, **args))

    async def _user_expressions(self, expressions: dict[str, str]) -> dict[str, Any]:
        try:
            return await self._query("user_expressions", expressions=expressions)
        except Exception as err:
            return {
                name: {"status": "error", "ename": "QueryError", "evalue": str(err), "traceback": [str(err)]}
                for name in expressions
            }

    async def do_complete(self, code: str, cursor_pos: int | None) -> dict[str, Any]:  # type: ignore[override]
        cursor_pos = len(code) if cursor_pos is None else cursor_pos
        empty = {"status": "ok", "matches": [], "cursor_start": cursor_pos, "cursor_end": cursor_pos, "metadata": {}}
        line_start = code.rfind("\n", 0, cursor_pos) + 1
        line = code[line_start:cursor_pos]
        if line.startswith("%") and " " not in line:
            prefix = line.lstrip("%")
            cell = line.startswith("%%")
            names = MAGICS.cell_names() if cell else MAGICS.line_names()
            marks = "%%" if cell else "%"
            return {**empty, "matches": [marks + n for n in names if n.startswith(prefix)], "cursor_start": line_start}
        try:
            found = await self._query("complete", code=code, cursor_pos=cursor_pos)
        except Exception as err:
            self.log.warning("wasm-kernel: completion failed: %s", err)
            return empty
        return {"status": "ok", **found}

    async def do_inspect(self, code: str, cursor_pos: int, detail_level: int = 0, omit_sections: Any = ()) -> dict[str, Any]:  # type: ignore[override]
        try:
            found = await self._query("inspect", code=code, cursor_pos=cursor_pos, detail_level=detail_level)
        except Exception as err:
            self.log.warning("wasm-kernel: inspect failed: %s", err)
            return {"status": "ok", "found": False, "data": {}, "metadata": {}}
        return {"status": "ok", "found": bool(found.get("found")), "data": found.get("data", {}), "metadata": found.get("metadata", {})}

    async def do_is_complete(self, code: str) -> dict[str, Any]:  # type: ignore[override]
        if code.lstrip().startswith("%%"):
            return {"status": "complete" if code.endswith("\n\n") else "incomplete", "indent": ""}
        if code.lstrip().startswith(("%", "!")) and "\n" not in code.strip():
            return {"status": "complete"}
        try:
            return await self._query("is_complete", code=code)
        except Exception:
            return {"status": "unknown"}

    async def _help(self, run: _CellRun, what: str, detail: int) -> dict[str, Any]:
        if what.startswith("%"):
            name = what.lstrip("%")
            magic = MAGICS.lookup(name)
            if magic is None:
                return run.usage_error(f"no magic named {what}; %lsmagic lists them")
            text = f"{magic.usage}\n\n{magic.help}\n"
        else:
            found = await self.do_inspect(what, len(what), detail)
            if not found["found"]:
                return run.usage_error(f"Object `{what}` not found.")
            text = found["data"].get("text/plain", "")
        reply = run.ok_reply()
        reply["payload"] = [{"source": "page", "data": {"text/plain": text}, "start": 0}]
        return reply

    # --- history ----------------------------------------------------------------------

    async def do_history(  # type: ignore[override]
        self, hist_access_type: str, output: bool, raw: bool, session: int | None = None, start: int | None = None,
        stop: int | None = None, n: int | None = None, pattern: str | None = None, unique: bool = False,
    ) -> dict[str, Any]:
        if hist_access_type == "tail":
            items = self.history.tail(n or 10, raw=raw, output=output, include_latest=True)
        elif hist_access_type == "range":
            items = self.history.get_range(session or 0, start or 1, stop, raw=raw, output=output)
        elif hist_access_type == "search":
            items = self.history.search(pattern or "*", raw=raw, output=output, n=n, unique=unique)
        else:
            items = []
        return {"status": "ok", "history": [list(item) for item in items]}

    # --- restart, shutdown, %reset ------------------------------------------------------

    def reset_interpreter(self) -> None:
        sandbox = self.sandbox
        if sandbox is not None:
            sandbox.restart()

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:  # type: ignore[override]
        self._cancel_input.set()
        await asyncio.get_running_loop().run_in_executor(None, self._close)
        return {"status": "ok", "restart": restart}

    def _close(self) -> None:
        self._sandbox_ready.wait(timeout=300)
        if self.sandbox is not None:
            self.sandbox.close()  # releases the session's lease
        self.history.close()

    def query_sync(self, op: str, **args: Any) -> Any:
        """A guest query from a magic (already on a worker thread)."""
        if not self._sandbox_ready.wait(timeout=600) or self.sandbox is None:
            raise RuntimeError("the sandbox is not running")
        return self.sandbox.query(op, **args)

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
        self.set_policy(apply_limit(self.policy, name, value, self.ceilings))

    def set_policy(self, policy: ExecutionPolicy) -> None:
        self.policy = policy
        if self.sandbox is not None:
            self.sandbox.policy = policy


class _Interrupted(Exception):
    """SIGINT arrived before the cell's guest turn could take it."""


def _merge(changes: CellFileChanges, result: SandboxResult) -> CellFileChanges:
    return _merge_lists(changes, result.files_created, result.files_modified, result.files_deleted)


def _merge_lists(
    changes: CellFileChanges, created: list[str], modified: list[str], deleted: list[str]
) -> CellFileChanges:
    """Several steps in one cell (code, a magic, code) make one change list: what
    the cell as a whole did to each path."""
    state: dict[str, str] = {}
    for kind, paths in (("created", changes.created), ("modified", changes.modified), ("deleted", changes.deleted)):
        for path in paths:
            state[path] = kind
    for kind, paths in (("created", created), ("modified", modified), ("deleted", deleted)):
        for path in paths:
            before = state.get(path)
            if kind == "deleted":
                if before == "created":
                    del state[path]  # made and removed within the cell: nothing to show
                else:
                    state[path] = "deleted"
            elif kind == "created":
                state[path] = "modified" if before in ("deleted", "modified") else "created"
            else:
                state[path] = "created" if before == "created" else "modified"
    return CellFileChanges(
        *([p for p, k in state.items() if k == kind] for kind in ("created", "modified", "deleted"))
    )


class _CellRun:
    """One execute_request: sends its outputs, tagged with its parent, from any thread."""

    def __init__(self, kernel: WasmKernel, parent: dict[str, Any], silent: bool, allow_stdin: bool) -> None:
        self.kernel = kernel
        self.parent = parent
        self.silent = silent
        self.allow_stdin = allow_stdin
        self.result_text: str | None = None  # the cell's Out[] as text, for history

    def _send(self, msg_type: str, content: dict[str, Any]) -> None:
        session = self.kernel.session
        if session is not None:
            session.send(self.kernel.iopub_socket, msg_type, content, self.parent, ident=self.kernel._topic(msg_type))

    def stream(self, name: str, text: str) -> None:
        if not self.silent and text:
            self._send("stream", {"name": name, "text": text})

    def display(self, output: DisplayOutput) -> None:
        if self.silent:
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

    def send_display(self, data: dict[str, Any], display_id: str | None = None) -> None:
        if self.silent:
            return
        self._send("display_data", {"data": data, "metadata": {}, "transient": {"display_id": display_id} if display_id else {}})

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

    def interrupted_reply(self) -> dict[str, Any]:
        return self.error_reply(
            "KeyboardInterrupt", "",
            ["KeyboardInterrupt: the cell was interrupted; variables are as they were before it ran"],
        )

    def usage_error(self, message: str) -> dict[str, Any]:
        return self.error_reply("UsageError", message, [f"UsageError: {message}"])

    def reply_for(self, result: SandboxResult) -> dict[str, Any]:
        for name in ("stdout", "stderr"):
            if getattr(result, f"{name}_truncated"):
                self.stream("stderr", f"{truncation_hint(name, self.kernel.policy, self.kernel.ceilings)}\n")
        if result.trap == "interrupted":
            return self.interrupted_reply()
        if result.trap is not None:
            message = trap_line(result.trap, self.kernel.policy, self.kernel.ceilings)
            name = {"out_of_fuel": "FuelExhausted", "deadline": "DeadlineExceeded", "memory": "MemoryLimit",
                    "stack_overflow": "StackOverflow"}.get(result.trap, "SandboxError")
            return self.error_reply(name, message, [f"{name}: {message}"])
        if result.error is not None:
            return self.error_reply(result.error.ename, result.error.evalue, list(result.error.traceback))
        if not result.success:  # exit() with a non-zero code
            text = f"SystemExit: {result.exit_code}; the interpreter was restarted, files kept"
            return self.error_reply("SystemExit", str(result.exit_code), [text])
        reply = self.ok_reply()
        if result.restarted:
            self.stream("stderr", f"{result.metadata.get('restarted_reason', 'the interpreter was restarted')}\n")
        return reply


__all__ = ["WasmKernel"]
