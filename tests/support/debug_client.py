"""A debugger frontend over jupyter_client, as JupyterLab's debugger drives a kernel:
DAP requests as debug_request on the control channel, their replies as debug_reply,
the debugger's events as debug_event on iopub. The same client drives native
ipykernel (the oracle) and wasm-python in one test."""

from __future__ import annotations

import queue
import time
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient

TIMEOUT = 60
# What JupyterLab's debugger service sends first (packages/debugger/src/session.ts).
INITIALIZE = {
    "clientID": "jupyterlab", "clientName": "JupyterLab", "adapterID": "python", "pathFormat": "path",
    "linesStartAt1": True, "columnsStartAt1": True, "supportsVariableType": True, "supportsVariablePaging": True,
    "supportsRunInTerminalRequest": True, "locale": "en",
}


class DebugClient:
    def __init__(self, kc: BlockingKernelClient) -> None:
        self.kc = kc
        self.seq = 0
        self.events: list[dict[str, Any]] = []  # every debug_event seen, in order
        self.iopub: list[dict[str, Any]] = []  # every other iopub message seen

    def request(self, command: str, timeout: float = TIMEOUT, **arguments: Any) -> dict[str, Any]:
        """One DAP request; its debug_reply's content."""
        self.seq += 1
        content = {"type": "request", "seq": self.seq, "command": command, "arguments": arguments}
        msg = self.kc.session.msg("debug_request", content)
        self.kc.control_channel.send(msg)
        reply = _reply_to(self.kc.control_channel, msg["header"]["msg_id"], timeout, f"debug_reply to {command}")
        assert reply["msg_type"] == "debug_reply", reply["msg_type"]
        return reply["content"]

    def drain(self, timeout: float = 0.0) -> None:
        """Read iopub until it has been quiet for `timeout` seconds."""
        while True:
            try:
                msg = self.kc.iopub_channel.get_msg(timeout=timeout)
            except queue.Empty:
                return
            self._keep(msg)

    def _keep(self, msg: dict[str, Any]) -> None:
        if msg["msg_type"] == "debug_event":
            self.events.append(msg["content"])
        else:
            self.iopub.append(msg)

    def wait_event(self, event: str, timeout: float = TIMEOUT, after: int = 0) -> dict[str, Any]:
        """The first debug_event named `event` at index `after` or later."""
        deadline = time.monotonic() + timeout
        while True:
            for seen in self.events[after:]:
                if seen.get("event") == event:
                    return seen
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {event} debug_event in {timeout} s; saw {[e.get('event') for e in self.events]}")
            try:
                self._keep(self.kc.iopub_channel.get_msg(timeout=min(left, 1)))
            except queue.Empty:
                pass

    def execute(self, code: str) -> str:
        return self.kc.execute(code)

    def wait_reply(self, msg_id: str, timeout: float = TIMEOUT) -> dict[str, Any]:
        return _reply_to(self.kc.shell_channel, msg_id, timeout, "execute_reply")["content"]

    def start(self) -> dict[str, Any]:
        """initialize, attach and debugInfo, as JupyterLab starts its debugger."""
        init = self.request("initialize", **INITIALIZE)
        attach = self.request("attach")
        info = self.request("debugInfo")
        return {"initialize": init, "attach": attach, "debugInfo": info}


def _reply_to(channel: Any, msg_id: str, timeout: float, what: str) -> dict[str, Any]:
    """The message on `channel` whose parent is `msg_id` (others are passed over)."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"no {what} in {timeout} s")
        try:
            reply = channel.get_msg(timeout=min(left, 1))
        except queue.Empty:
            continue
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply
