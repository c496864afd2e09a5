"""The lab extension's session panel as a test drives it: a comm to the kernel's
`wasm_kernel.session` target over jupyter_client, one request and its answer at a
time (kernel/session_comm.py)."""

from __future__ import annotations

import itertools
import queue
import time
from typing import Any

from support.kernel_client import RunningKernel

_ids = itertools.count(1)


class Panel:
    """A comm to the session target, as the extension opens it."""

    def __init__(self, kernel: RunningKernel) -> None:
        self.kernel = kernel
        self.comm_id = f"panel-{next(_ids)}"
        kc = kernel.kc
        kc.shell_channel.send(kc.session.msg("comm_open", {"comm_id": self.comm_id, "target_name": "wasm_kernel.session",
                                                           "data": {}}))

    def ask(self, op: str, **args: Any) -> dict[str, Any]:
        request_id = next(_ids)
        kc = self.kernel.kc
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": self.comm_id,
                                                          "data": {"id": request_id, "op": op, **args}}))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                msg = kc.get_iopub_msg(timeout=0.2)
            except queue.Empty:
                continue
            if msg["msg_type"] != "comm_msg" or msg["content"]["comm_id"] != self.comm_id:
                continue
            data = msg["content"]["data"]
            if data.get("id") == request_id:  # (after-cell events carry no id)
                return data
        raise TimeoutError(op)
