"""input() and getpass() in a cell, answered by the frontend on the stdin channel.

This is ipykernel's `Kernel._input_request` (kernelbase.py, behind `raw_input` and
`getpass`) with three changes, and that is why it is not called:

- its wait ends only with a reply or a KeyboardInterrupt raised in the waiting
  thread. Ours waits on the guest's helper thread, where SIGINT never raises, so
  its loop would outlive the cell's turn (an interrupt, a deadline, a shutdown)
  and poll the stdin socket forever, taking the next cell's reply. Here the wait
  also ends when the turn does (`turn_ended`) or `cancel` is set;
- it takes any input_reply, also one whose parent is an earlier input_request
  (typed into a box whose cell had already ended). Here such a reply is ignored;
- it flushes sys.stdout and sys.stderr, which are the kernel's log here (kernel_app),
  not the cell's output, and it reads `Kernel._allow_stdin`, one flag per kernel
  that ipykernel's IPythonKernel sets per request: ours is the request's own
  (CellRun.allow_stdin).

What it does the same way is kept the same: stale replies are dropped before
asking, a malformed message is logged and skipped, "\\x04" is EOF, and the request
goes out with the shell request as parent and to the shell client's identity.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import zmq
from jupyter_client.session import json_clean  # type: ignore[attr-defined]

from .session_protocol import KernelChannels

POLL_MS = 20  # how often a wait looks at `cancel` and `turn_ended`


class FrontendInput:
    """The stdin channel's one user: one input_request at a time."""

    def __init__(self, kernel: KernelChannels) -> None:
        self._kernel = kernel
        self._lock = threading.Lock()
        self.cancel = threading.Event()  # SIGINT or shutdown: ends a pending input_request

    def asker(self, parent: dict[str, Any], ident: Any, turn_ended: threading.Event) -> Callable[[str, bool], str]:
        """The guest's on_input for one turn of the request `parent`, whose client is `ident`."""
        def ask(prompt: str, password: bool) -> str:
            return self.ask(prompt, password, parent, ident, turn_ended)

        return ask

    def ask(self, prompt: str, password: bool, parent: dict[str, Any], ident: Any, turn_ended: threading.Event) -> str:
        """Send input_request on stdin and wait for its reply; KeyboardInterrupt when
        the cell is interrupted, the kernel shuts down or the turn has ended.

        A reply to an earlier input_request is never taken as this one's answer:
        replies waiting from before are dropped before asking, as ipykernel does, and
        one that arrives later and names another request as its parent is ignored. A
        reply with no parent (jupyter_client's KernelClient.input sends none) answers
        the pending request."""
        kernel = self._kernel
        session, socket = kernel.session, kernel.stdin_socket
        assert session is not None
        with self._lock:
            while True:  # drop stale replies
                try:
                    socket.recv_multipart(zmq.NOBLOCK)
                except zmq.ZMQError:
                    break
            sent = session.send(socket, "input_request", json_clean({"prompt": prompt, "password": password}), parent,
                                ident=ident)
            request_id = sent["header"]["msg_id"] if sent else None
            while not (self.cancel.is_set() or turn_ended.is_set()):
                if not socket.poll(POLL_MS):
                    continue
                try:
                    _ident, reply = session.recv(socket)
                except Exception:  # as ipykernel: a malformed message is not the answer
                    kernel.log.warning("wasm-kernel: invalid message on stdin", exc_info=True)
                    continue
                if reply is None:
                    continue
                answers = (reply.get("parent_header") or {}).get("msg_id")
                if answers and request_id and answers != request_id:
                    kernel.log.info("wasm-kernel: ignored an input_reply to an earlier input_request")
                    continue
                value = reply.get("content", {}).get("value", "")
                if value == "\x04":
                    raise EOFError
                return str(value)
        raise KeyboardInterrupt


__all__ = ["FrontendInput"]
