"""Child of diag_cell_steps.py: a kernel launcher that stamps each step of a cell.

    python cell_steps_trace.py wasm|native -f CONNECTION_FILE

Wraps, with timers that never change behaviour: kernelbase's execute_request (the
main thread takes the request), do_execute, the execute_reply's Session.send and, in
wasm-python, the guest's run_cell (its own thread) and the wait for the IOPub thread
(`_iopub_drained`). Stamps are time.monotonic() (one clock for every process on the
machine, the driver's too), kept in memory and appended to $WK_CELL_TRACE in batches
as `[label, time, thread]` lines; then it launches the kernel as its kernelspec would.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import threading
import time

from stamps import wrapper  # this folder: the launcher runs as a script

TRACE = os.environ["WK_CELL_TRACE"]
_buffer: list[tuple[str, float, str]] = []
_lock = threading.Lock()


def _flush() -> None:
    with open(TRACE, "a") as f:
        f.writelines(json.dumps(e) + "\n" for e in _buffer)
    _buffer.clear()


def mark(label: str) -> None:
    with _lock:
        _buffer.append((label, time.monotonic(), threading.current_thread().name))
        if len(_buffer) >= 64:  # a file write per stamp would be a step of its own
            _flush()


def _flush_at_exit() -> None:
    with _lock:
        _flush()


atexit.register(_flush_at_exit)


wrap = wrapper(mark)


def common() -> None:
    from ipykernel import kernelbase
    from jupyter_client.session import Session

    wrap(kernelbase.Kernel, "execute_request", "execute_request")
    send = Session.send

    def traced_send(self, stream, msg_or_type, *a, **k):  # type: ignore[no-untyped-def]
        kind = msg_or_type if isinstance(msg_or_type, str) else msg_or_type.get("header", {}).get("msg_type")
        if kind != "execute_reply":
            return send(self, stream, msg_or_type, *a, **k)
        mark("send execute_reply: enter")
        try:
            return send(self, stream, msg_or_type, *a, **k)
        finally:
            mark("send execute_reply: exit")

    Session.send = traced_send


def wasm() -> None:
    import gc

    gc.disable()  # as python -m wasm_kernel does
    common()
    from wasm_kernel.kernel import kernel_app
    from wasm_kernel.kernel import sandbox_kernel as sk
    from wasm_kernel.runtime import python_guest

    wrap(sk.WasmKernel, "do_execute", "do_execute")
    wrap(sk.WasmKernel, "_iopub_drained", "wait for the IOPub thread")
    wrap(python_guest.PythonGuest, "run_cell", "guest run_cell")
    kernel_app.main()


def native() -> None:
    common()
    import ipykernel.kernelapp as ka
    from ipykernel import ipkernel

    wrap(ipkernel.IPythonKernel, "do_execute", "do_execute")
    ka.launch_new_instance()


if __name__ == "__main__":
    kind = sys.argv.pop(1)
    {"wasm": wasm, "native": native}[kind]()
