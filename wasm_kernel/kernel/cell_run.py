"""One request's outputs and its reply: what a cell shows on IOPub, and what its execute_reply says.

The guest's callbacks call a CellRun from the guest's thread, while the request's
coroutine waits on the event loop. So every message carries the request as its
parent explicitly, as ipykernel's own display publisher and output streams do
(they keep a `parent_header`), rather than through `Kernel.send_response`, which
reads the parent from the request's context variable: a guest thread has none, and
ipykernel's fallback for one is whichever request was parented last.

Replies are the dicts ipykernel's `execute_request` sends (it json_cleans them and
adds nothing): `ok_reply`, `error_reply` and the rest build them as ipykernel's own
`do_execute` does (ipkernel.py), with the sandbox's reasons added.
"""

from __future__ import annotations

from typing import Any

from ..core.file_changes import FileChanges
from ..core.result import SandboxResult
from ..runtime.guest_messages import CommOutput, ErrorOutput, Output
from .file_changes_display import display_id_for, file_changes_bundle
from .kernel_limits import (
    MEMORY_ERRORS, disk_full_line, interrupted_line, is_memory_error, memory_error_hint, trap_line, truncation_hint,
)
from .magics.registry import MagicOutput
from .session_protocol import KernelChannels, SessionView

# A trap's name in the reply and the error output, as a person reads it.
TRAP_NAMES = {"out_of_fuel": "FuelExhausted", "cpu_time": "CpuTimeExceeded", "deadline": "DeadlineExceeded", "memory": "MemoryLimit",
              "stack_overflow": "StackOverflow"}


class Interrupted(Exception):
    """SIGINT arrived before the cell's guest turn could take it."""


class CellRun:
    """One request (a cell, or a comm message): sends its outputs, tagged with its parent, from any thread."""

    def __init__(self, kernel: KernelChannels, parent: dict[str, Any], silent: bool, allow_stdin: bool) -> None:
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

    # --- outputs ------------------------------------------------------------------------

    def stream(self, name: str, text: str) -> None:
        if not self.silent and text:
            self._send("stream", {"name": name, "text": text})

    def display(self, output: Output) -> None:
        """One rich output of the guest's, as it comes."""
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

    def show_file_changes(self, changes: FileChanges, session: SessionView, cell_id: str | None) -> None:
        """The cell's file changes as one display, which a later run of the cell replaces."""
        if not changes or not session.settings.show_file_changes or self.silent:
            return
        count = self.kernel.execution_count
        sizes = session.files.stat_files(changes.created + changes.modified)
        self.send_display(file_changes_bundle(changes, sizes, count), display_id_for(session.session_id, count, cell_id))

    # --- replies ------------------------------------------------------------------------

    def ok_reply(self) -> dict[str, Any]:
        return {"status": "ok", "execution_count": self.kernel.execution_count, "payload": [], "user_expressions": {}}

    def error_reply(self, ename: str, evalue: str, traceback: list[str]) -> dict[str, Any]:
        """An error the host found (not the guest's shell): shown as an `error` output, and replied."""
        if not self.silent:
            self._send("error", {"ename": ename, "evalue": evalue, "traceback": traceback})
        return {"status": "error", "execution_count": self.kernel.execution_count, "ename": ename,
                "evalue": evalue, "traceback": traceback}

    def interrupted_reply(self, grace: float | None = None) -> dict[str, Any]:
        """A cell stopped by an interrupt from outside its code (a soft interrupt is
        the cell's own KeyboardInterrupt, shown by IPython): rolled back, and why."""
        return self.error_reply("KeyboardInterrupt", "", [f"KeyboardInterrupt: {interrupted_line(grace)}"])

    def usage_error(self, message: str) -> dict[str, Any]:
        # As IPython shows a UsageError: one line on stderr, no traceback; the
        # reply still says the cell failed.
        self.stream("stderr", f"UsageError: {message}\n")
        return {"status": "error", "execution_count": self.kernel.execution_count, "ename": "UsageError",
                "evalue": message, "traceback": []}

    def reply_for(self, result: SandboxResult, session: SessionView) -> dict[str, Any]:
        """The reply to one guest turn, with a line on stderr for each limit it met."""
        # The remedies fit where the kernel runs: %limits in a notebook, the flags
        # under `wasm-kernel run` (WasmKernel.cli_run), so each line names one way.
        policy, (ceiling, remedies) = session.policy, session.limit_advice
        for name in ("stdout", "stderr", "display"):
            if getattr(result, f"{name}_truncated"):
                self.stream("stderr", f"{truncation_hint(name, policy, ceiling, remedies)}\n")
        if result.disk_full and session.sandbox is not None:
            self.stream("stderr", f"{disk_full_line(policy, ceiling, session.sandbox.disk_usage(), remedies)}\n")
        if result.error is not None and is_memory_error(result.error.ename, result.error.evalue):
            too_big = result.error.ename not in MEMORY_ERRORS
            self.stream("stderr", f"{memory_error_hint(policy, ceiling, too_big, remedies)}\n")
        if result.trap == "interrupted":
            return self.interrupted_reply(policy.interrupt_grace_seconds if result.interrupt_grace_expired else None)
        if result.trap is not None:
            message = trap_line(result.trap, policy, ceiling, remedies)
            name = TRAP_NAMES.get(result.trap, "SandboxError")
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


__all__ = ["CellRun", "Interrupted"]
