"""WasmKernel: the Jupyter kernel. Every cell runs in the session's WASI guest.

Built on ipykernel's `Kernel` base with async `do_*` methods; this module is the
protocol only, request by request. What a request acts on is elsewhere:

- the configuration: kernel_settings.KernelSettings, a mixin of traits;
- the notebook's session, its sandbox and history: notebook_session.NotebookSession,
  which the host magics and the lab panel's comm use through session_protocol;
- a request's outputs and reply: cell_run.CellRun;
- input() on the stdin channel: frontend_input.FrontendInput.

A cell runs on a worker thread so the event loop stays free; the guest's output
callbacks publish `stream`/`display_data` messages as they come, tagged with the
request they belong to. Interrupts arrive as control messages (interrupt_mode
"message"), or as SIGINT from a client that sends one: either stops the running guest
turn, which rolls back, and the kernel lives on.

The guest is started in the background at kernel start, so kernel_info answers at
once even when the guest must first be compiled (once per machine: BENCHMARKS.md); a cell
sent meanwhile shows that progress instead of hanging silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

from ipykernel._version import kernel_protocol_version
from ipykernel.kernelbase import Kernel
from traitlets import Float

from .. import __version__
from ..core.file_changes import FileChanges
from ..core.result import SandboxResult
from ..core.sandbox import CellOptions
from ..host.artifacts import guest_artifacts
from ..runtime.guest_messages import HistoryRequest
from ..runtime.wire import COMM_MSG_TYPES
from ..sessions.sandbox import SessionSandbox
from . import session_comm
from .cell_cost import CellCost
from .cell_run import CellRun, Interrupted
from .comm_messages import comm_for_guest, comm_info_target
from .debug_service import DebugService
from .error_abort import EarlyAbort
from .frontend_input import FrontendInput
from .kernel_limits import trap_line
from .kernel_settings import KernelSettings
from .magics import MAGICS
from .magics.registry import MagicError, MagicOutput, help_request, split_cell, with_host_magics
from .message_guard import guard_handlers, guard_unpacker, internal_error_line, new_reference
from .notebook_session import NotebookSession, SandboxFailed
from .request_interrupts import RequestInterrupts
from .session_comm import SESSION_TARGET
from .sigint_relay import SigintRelay

HOST_THREADS = 3  # see _started_pool
TOUCH_EVERY_S = 10.0  # the most often a kernel rewrites its session's updated_at (see _after_reply)


class WasmKernel(KernelSettings, Kernel):
    implementation = "wasm_kernel"
    implementation_version = __version__
    banner = "Python in a WebAssembly sandbox (wasm-kernel): no host files, no network, limits on every cell"
    help_links = [{"text": "wasm-kernel", "url": "https://github.com/wasm-kernel/wasm-kernel"}]

    # ipykernel flushes its stdout and stderr streams before each execute_reply (a
    # round trip to the IOPub thread each) and then sleeps 0.5 ms, so that a cell's
    # outputs usually leave before its reply. A cell's outputs here are iopub messages
    # already: one round trip (_iopub_drained) hands every one of them to ZeroMQ
    # before the reply is built, and the blind sleep goes (0.5 ms of every cell).
    _execute_sleep = Float(0.0).tag(config=True)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if self.session is not None:
            guard_unpacker(self.session)
        for msg_type in COMM_MSG_TYPES:
            self.shell_handlers[msg_type] = self._comm_message
        self.shell_handlers = guard_handlers(self, self.shell_handlers)
        self.control_handlers = guard_handlers(self, self.control_handlers)
        self._interrupted = threading.Event()  # SIGINT during the current request
        self.notebook_session = NotebookSession(self, self.log, self._connection_file(), self.control_thread,
                                                self._interrupted)
        self._input = FrontendInput(self)
        self._interrupts = RequestInterrupts(lambda: self.notebook_session.sandbox, self._interrupted,
                                             self._input.cancel)
        self._session_comms: set[str] = set()  # comms of the lab extension's panel (session_comm.py)
        self._unrecorded: list[tuple[int, str]] = []  # host-magic-only cells not yet in the guest's In
        self._iopub_waited = False
        self._host_threads = _started_pool(HOST_THREADS)
        self.debugger = DebugService(self)
        self._early_abort = EarlyAbort(super()._abort_queues)
        self._debug_tasks: set[asyncio.Task[None]] = set()
        # A saved state is woken with its execution count: the next cell numbers on.
        self._saved_at_count = -1  # the count of the last periodic save (state_save_every)
        self._touched_at = -TOUCH_EVERY_S  # monotonic time of the last metadata touch
        self._touch_owed = False  # activity since then that the metadata does not show yet
        self._resume_count = self.notebook_session.saved_cells
        if self._resume_count is not None:
            self.execution_count = self._resume_count
        self.notebook_session.start()
        self._terminating = False
        self._sigint: SigintRelay | None = None  # made as the first cell installs its handler
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._on_sigterm)

    def _connection_file(self) -> str | None:
        app = self.parent
        path = getattr(app, "abs_connection_file", None) or getattr(app, "connection_file", None)
        return str(path) if path else None

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
        # noisy on stderr) to advertise a debugger, which here is the guest's own
        # (debug_service.py). Subshells run inside the main cell (nested_work.py).
        return {
            "protocol_version": kernel_protocol_version,
            "implementation": self.implementation,
            "implementation_version": self.implementation_version,
            "language_info": self.language_info,
            "banner": self.banner,
            "help_links": self.help_links,
            "supported_features": ["kernel subshells", "debugger"],
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
        if subshell_id is not None:
            # A kernel subshell (JEP 91): ipykernel's own thread and lock for it; its
            # cells and comm messages run inside a running main cell (_run_in_guest).
            await super().shell_main(subshell_id, msg)
            return
        async with self._main_asyncio_lock:
            await self._iopub_subscribed()
            await self.dispatch_shell(msg, subshell_id=None)

    async def _iopub_subscribed(self) -> None:
        """Hold the first requests until a client subscribes to iopub, for at most
        iopub_subscriber_wait (kernel_app.SubscribedIOPubThread.wait_for_subscriber):
        once, so a client without iopub is not held again."""
        if self._iopub_waited:
            return
        self._iopub_waited = True
        wait = getattr(self.iopub_thread, "wait_for_subscriber", None)
        if wait is not None:
            await wait(self.iopub_subscriber_wait)

    # --- the debugger (debug_service.py) ------------------------------------------------

    @property
    def host_threads(self) -> ThreadPoolExecutor:
        return self._host_threads

    async def debug_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:  # type: ignore[override]
        """Answered in a task of its own: the control channel serves one message at a
        time, and a request for a stopped or running cell may wait for the guest,
        while an interrupt must still get through."""
        task = asyncio.ensure_future(self._debug_reply(stream, ident, parent))
        self._debug_tasks.add(task)
        task.add_done_callback(self._debug_tasks.discard)

    async def _debug_reply(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:
        try:
            reply = await self.debugger.handle(parent.get("content"), parent)
        except Exception:
            reference = new_reference()
            self.log.exception("wasm-kernel: debug_request failed (reference %s)", reference)
            content = parent.get("content") if isinstance(parent.get("content"), dict) else {}
            reply = {"type": "response", "request_seq": content.get("seq", 0), "success": False,
                     "command": str(content.get("command", ""))[:64],
                     "message": internal_error_line("answer this debug request", reference)}
        if self.session is not None:
            self.session.send(stream, "debug_reply", reply, parent, ident)

    def publish_debug_event(self, event: dict[str, Any], parent: dict[str, Any] | None) -> None:
        if self.session is not None:
            self.session.send(self.iopub_socket, "debug_event", event, parent=parent,
                              ident=self._topic("debug_event"))

    # --- SIGTERM ----------------------------------------------------------------------

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        """A kernel told to end (a supervisor, a drained host, `kill`) ends as a
        shutdown does: the running cell is stopped and rolled back, the interpreter
        saved (keep_state), the sandbox closed, then the loops stop. A second
        SIGTERM ends the process at once."""
        if self._terminating:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        self._terminating = True
        threading.Thread(target=self._end_after_sigterm, name="wasm-kernel-sigterm", daemon=True).start()

    def _end_after_sigterm(self) -> None:
        try:
            self._stop_and_save("SIGTERM")
        finally:
            for stream in (self.control_stream, self.shell_stream):
                loop = getattr(stream, "io_loop", None)
                if loop is not None:
                    loop.add_callback(loop.stop)
            self.io_loop.add_callback(self.io_loop.stop)

    def end_orphaned(self) -> None:
        """The Jupyter server is gone (kernel_app.SavingParentPoller): called from the
        poller's thread, which exits the process when this returns."""
        self.log.warning("wasm-kernel: the Jupyter server is gone; saving the interpreter before exiting")
        self._stop_and_save("the server's exit")

    def _stop_and_save(self, why: str) -> None:
        """Stop the running cell, then close the session as a shutdown does (which
        saves the interpreter). A shutdown already under way is waited for, not
        repeated (NotebookSession.close runs once)."""
        self._interrupts.stop()
        try:
            self.notebook_session.close(False, self.execution_count)
            self.notebook_session.shutdown(False)
        except Exception:
            self.log.exception("wasm-kernel: closing the session after %s failed", why)

    # --- interrupts -------------------------------------------------------------------

    def pre_handler_hook(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # a subshell's request: its interrupts are not the main shell's, nor its signals
        self._interrupts.begin_request()
        if self._sigint is None:  # once: its thread serves every cell's interrupts (sigint_relay.py)
            loop = asyncio.get_running_loop()
            self._sigint = SigintRelay(self._interrupts.interrupt, self.log, lambda: loop.call_soon_threadsafe(_nothing))
        self._sigint.arm()
        self.saved_sigint_handler = signal.signal(signal.SIGINT, self._sigint.handler)

    def post_handler_hook(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._interrupts.end_request()  # an interrupt being served finishes first
        if self._sigint is not None and threading.current_thread() is threading.main_thread():
            self._sigint.disarm()
            signal.signal(signal.SIGINT, self.saved_sigint_handler)

    async def interrupt_request(self, stream: Any, ident: Any, parent: dict[str, Any]) -> None:  # type: ignore[override]
        """The kernelspec's interrupt_mode is "message": an interrupt comes as this
        control message and is served at once, on the control thread. Unlike SIGINT,
        two never merge into one (the OS keeps one standard signal pending, so a soft
        interrupt's hardening second one was lost on a loaded machine), and nothing is
        sent to the kernel's process group. A SIGINT still works (sigint_relay.py)."""
        if not self.session:
            return
        self._interrupts.interrupt()
        self.session.send(stream, "interrupt_reply", {"status": "ok"}, parent, ident=ident)

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
        run = CellRun(self, parent, silent, allow_stdin)
        cell = CellOptions(
            silent=silent, store_history=store_history, execution_count=count, parent=_parent_info(parent),
            cell_id=cell_id, backfill=tuple(self._unrecorded),
        )
        try:
            reply = await self._execute(run, code, cell)
        except Interrupted:
            reply = run.interrupted_reply()
        except SandboxFailed as failed:
            line = internal_error_line("start this notebook's sandbox", failed.reference)
            reply = run.error_reply("SandboxError", line, [f"SandboxError: {line}"])
        except Exception:  # never leave a request without a reply, nor show host internals
            reference = new_reference()
            self.log.exception("wasm-kernel: execute failed (reference %s)", reference)
            line = internal_error_line("run this cell", reference)
            reply = run.error_reply("KernelError", line, [f"KernelError: {line}"])
        if store_history and not silent:
            # Before the reply (~0.1 ms): a cell the client saw complete is in the
            # history even if the kernel is killed the next moment (tests/e2e/test_kill9_fuzz.py).
            self.notebook_session.store_history(self.execution_count, code, run.result_text)
        reply["execution_count"] = self.execution_count
        if user_expressions and self.notebook_session.sandbox is not None and reply["status"] == "ok":
            reply["user_expressions"] = await self._user_expressions(user_expressions)
        else:
            reply.setdefault("user_expressions", {})
        self._early_abort.before_reply(parent, reply, silent)
        self._iopub_drained()
        return reply

    def _abort_queues(self, subshell_id: str | None = None) -> None:
        if not self._early_abort.already_posted(subshell_id):
            super()._abort_queues(subshell_id)

    def _iopub_drained(self, timeout: float = 1.0) -> None:
        """Wait until the IOPub thread has handed every message sent so far to ZeroMQ
        (what ipykernel's OutStream.flush waits for), at most `timeout` seconds."""
        thread = self.iopub_thread
        if thread is None or not thread.thread.is_alive():
            return
        done = threading.Event()
        thread.schedule(done.set)
        done.wait(timeout)

    async def _execute(self, run: CellRun, code: str, cell: CellOptions) -> dict[str, Any]:
        """The cell's steps in order (guest code, host magics), its file changes and cost."""
        notebook = self.notebook_session
        sandbox = await notebook.wait_until_open(run)
        if self._resume_count is not None:
            # The count went on from a saved state; if the guest did not wake it after
            # all (another version, say), this first cell is cell 1 of a fresh start.
            if sandbox.resumed is None and cell.execution_count == self._resume_count + 1:
                self.execution_count = 1
                cell = replace(cell, execution_count=1)
            self._resume_count = None
        if not cell.silent:
            for notice in notebook.take_notices(sandbox):
                run.stream(notice.stream, f"{notice.text}\n")
        asked = help_request(code, MAGICS)
        if asked is not None:
            return self._help(run, *asked)
        steps = split_cell(code, MAGICS)
        parts = sum(step.kind == "code" for step in steps)
        changes = FileChanges.none()
        cost = CellCost(metering=self.metering)
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
                cell = replace(cell, packages_changed=notebook.take_packages_changed())
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
                reply = run.reply_for(result, notebook)
                if reply["status"] != "ok":
                    break
                continue
            magic = MAGICS.claimed(step.name, step.kind == "cell", step.text)
            assert magic is not None  # split_cell made this step for a host magic
            started = time.perf_counter()
            with notebook.magic_running_in(run):
                try:
                    out: MagicOutput = await asyncio.get_running_loop().run_in_executor(
                        self._host_threads, magic.handler, notebook, step.text, step.body
                    )
                except MagicError as err:
                    reply = run.usage_error(str(err))
                    break
                finally:
                    cost.add_host(time.perf_counter() - started)  # a %pip's seconds are the cell's too
            run.show_magic_output(out)
            if out.page is not None:
                reply.setdefault("payload", []).append(out.page)
            changes = changes.then(FileChanges(out.created, out.modified, out.deleted))
        if parts == 0 and cell.store_history and not cell.silent and cell.execution_count is not None:
            # A cell of host magics only never reached the guest's shell: its In[n]
            # goes there with the next cell that does, so In counts every cell.
            self._unrecorded.append((cell.execution_count, code))
        # The files of this cell's point, before its reply (a silent cell's join the last one's).
        await asyncio.get_running_loop().run_in_executor(self._host_threads, notebook.after_cell,
                                                         self.execution_count, code, changes)
        run.show_file_changes(changes, notebook, cell.cell_id)
        reply.setdefault("metadata", {}).update(changes.reply_metadata())
        reply["metadata"]["sandbox"] = cost.reply_metadata(notebook.policy)
        if not cell.silent:
            event = session_comm.cell_event(self.execution_count, reply["metadata"]["sandbox"], changes.created,
                                            changes.modified, changes.deleted)
            notebook.recent_cells.appendleft(event)
            for comm_id in sorted(self._session_comms):
                run.send_comm(comm_id, event)
        return reply

    async def _run_in_guest(self, run: CellRun, sandbox: SessionSandbox, code: str, cell: CellOptions) -> SandboxResult:
        subshell = _subshell_of(run.parent) is not None
        if subshell:
            # A subshell's cell while the main shell's runs: inside it, at its next
            # safe point (the guest has one thread); else as any cell, in turn.
            inside = await asyncio.get_running_loop().run_in_executor(
                self._host_threads, lambda: sandbox.execute_inside(
                    code, on_output=run.stream, on_display=run.display,
                    cell=replace(cell, keep_output=False, settle_later=True)))
            if inside is not None:
                return inside
        turn_ended = threading.Event()  # a wait for an input() reply never outlives its turn
        # The request and its client, taken here, in the request's context: the guest
        # asks from its own thread, where ipykernel's context variables are not set.
        ask = self._input.asker(run.parent, self._get_shell_context_var(self._shell_parent_ident), turn_ended)

        def execute() -> SandboxResult:
            return sandbox.execute(
                code,
                on_output=run.stream,
                on_display=run.display,
                on_input=ask if run.allow_stdin else None,
                # Streamed and displayed as it came: not held as well. The checkpoint
                # and the metadata wait until the reply is on its way (_after_reply).
                cell=replace(cell, keep_output=False, settle_later=True),
            )

        loop = asyncio.get_running_loop()
        try:
            with self._turn_interrupts(subshell):
                # On the guest's thread itself: one thread hop each way fewer than a host thread.
                result = await loop.run_in_executor(sandbox.executor, execute)
        finally:
            turn_ended.set()
        if result.metadata.get("files_not_tracked") and not run.silent:
            run.stream("stderr", f"wasm-kernel: not every file change is shown: {result.metadata['files_not_tracked']}\n")
        # The cell's checkpoint and the session's updated_at wait until the reply is
        # on its way (this callback runs after execute_request has sent it): the
        # checkpoint copies ~2 MB holding the GIL, and would hold the reply up.
        loop.call_soon(self._after_reply, sandbox)
        return result

    def _turn_interrupts(self, subshell: bool) -> contextlib.AbstractContextManager[None]:
        """A main shell's turn is what an interrupt stops; a subshell's is not, as
        ipykernel's SIGINT reaches its main thread only."""
        return contextlib.nullcontext() if subshell else self._interrupts.turn()

    def _after_reply(self, sandbox: SessionSandbox) -> None:
        sandbox.checkpoint_soon()
        self.notebook_session.settled.set()
        loop = asyncio.get_running_loop()
        # updated_at measures idleness for prune (days); an fsync'd rewrite per cell
        # slowed the next request's arrival by ~0.3 ms (measured): at most one every
        # TOUCH_EVERY_S, and the owed one at shutdown.
        now = time.monotonic()
        if now - self._touched_at >= TOUCH_EVERY_S:
            self._touched_at, self._touch_owed = now, False
            loop.run_in_executor(self._host_threads, sandbox.touch)
        else:
            self._touch_owed = True
        every, count = self.state_save_every, self.execution_count
        if every and count % every == 0 and count != self._saved_at_count:
            self._saved_at_count = count  # a kernel killed with -9 resumes from here
            loop.run_in_executor(self._host_threads, self.notebook_session.hibernate, count)

    def _help(self, run: CellRun, name: str, detail: int) -> dict[str, Any]:
        """`%files?`: the host magic's help as a page, as IPython pages a magic's docstring."""
        magic = MAGICS.lookup(name)
        assert magic is not None
        reply = run.ok_reply()
        reply["payload"] = [{"source": "page", "data": {"text/plain": f"{magic.usage}\n\n{magic.help}\n"}, "start": 0}]
        return reply

    # --- user_expressions, complete, inspect, is_complete -------------------------------

    async def _query(self, op: str, **args: Any) -> Any:
        sandbox = await self.notebook_session.wait_until_open(None)
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
        return {"status": "ok", **with_host_magics(found, code, cursor_pos, MAGICS)}

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
        run = CellRun(self, parent, silent=False, allow_stdin=False)
        content = msg["content"]
        comm_id = content["comm_id"]
        if msg_type == "comm_open" and content.get("target_name") == SESSION_TARGET:
            self._session_comms.add(comm_id)  # the lab extension's panel: answered here, on the host
            return
        notebook = self.notebook_session
        if comm_id in self._session_comms:
            if msg_type == "comm_close":
                self._session_comms.discard(comm_id)
                return
            await notebook.wait_until_open(None)
            answered = await asyncio.get_running_loop().run_in_executor(
                self._host_threads, session_comm.answer, notebook, content.get("data"))
            run.send_comm(comm_id, answered)
            return
        sandbox = await notebook.wait_until_open(None)
        result = None
        subshell = _subshell_of(parent) is not None
        if subshell:  # a widget's event during a cell: handled inside it
            result = await asyncio.get_running_loop().run_in_executor(
                self._host_threads,
                lambda: sandbox.deliver_comm_inside(msg_type, msg, on_output=run.stream, on_display=run.display))
        if result is None:
            with self._turn_interrupts(subshell):
                result = await asyncio.get_running_loop().run_in_executor(
                    self._host_threads,
                    lambda: sandbox.deliver_comm(msg_type, msg, on_output=run.stream, on_display=run.display),
                )
        if result.trap is not None:
            # Shown where the handler's own output goes (an Output widget, the log).
            line = trap_line(result.trap, notebook.policy, *notebook.limit_advice)
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
            items = self.notebook_session.history_rows(HistoryRequest(
                kind=hist_access_type, raw=bool(raw), output=bool(output),
                n=n, pattern=pattern or "*", unique=bool(unique),
                session=session or 0, start=1 if start is None else start, stop=stop,
            ))
        except (TypeError, ValueError) as err:
            line = f"bad history_request: {str(err).splitlines()[0][:200]}"
            return {"status": "error", "ename": "BadRequest", "evalue": line, "traceback": [f"BadRequest: {line}"],
                    "history": []}
        return {"status": "ok", "history": [list(item) for item in items]}

    # --- shutdown ---------------------------------------------------------------------

    async def do_shutdown(self, restart: bool) -> dict[str, Any]:  # type: ignore[override]
        self._input.cancel.set()
        loop = asyncio.get_running_loop()
        sandbox = self.notebook_session.sandbox
        if self._touch_owed and sandbox is not None:
            self._touch_owed = False
            await loop.run_in_executor(self._host_threads, sandbox.touch)
        try:
            await loop.run_in_executor(self._host_threads, self.notebook_session.close, restart,
                                       self.execution_count)
        finally:  # an unnamed kernel's session goes, unless this is a restart (session_lifecycle.py)
            await loop.run_in_executor(self._host_threads, self.notebook_session.shutdown, restart)
        return {"status": "ok", "restart": restart}


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


def _subshell_of(parent: dict[str, Any]) -> str | None:
    """The kernel subshell (JEP 91) a request came on, or None for the main shell."""
    header = parent.get("header") if isinstance(parent, dict) else None
    found = header.get("subshell_id") if isinstance(header, dict) else None
    return found if isinstance(found, str) else None


def _parent_info(parent: dict[str, Any]) -> dict[str, Any]:
    """What the guest's get_ipython().kernel.get_parent() shows of the request: its
    header and metadata (JupyterLab's cellId), not its content."""
    return {"header": dict(parent.get("header") or {}), "metadata": dict(parent.get("metadata") or {})}



def _nothing() -> None:
    """A callback that only wakes the loop: the main thread then runs the Python-level
    handlers of signals that came (SIGTERM's)."""


__all__ = ["WasmKernel"]
