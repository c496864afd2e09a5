"""Launching the kernel: `python -m wasm_kernel -f {connection_file}`."""

from __future__ import annotations

import threading
from typing import Any

import zmq
from ipykernel.iostream import IOPubThread
from ipykernel.kernelapp import IPKernelApp
from traitlets import Bool, DottedObjectName, default


class SubscribedIOPubThread(IOPubThread):
    """ipykernel's IOPub thread, which also tells when the first client has
    subscribed (its XPUB socket sees the subscription): see WasmKernel.shell_main."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.subscribed = threading.Event()  # before super(): it starts the listener
        super().__init__(*args, **kwargs)

    def _handle_subscription(self, frames: list[bytes]) -> None:
        if any(frame[:1] == b"\x01" for frame in frames):
            self.subscribed.set()
        super()._handle_subscription(frames)


class WasmKernelApp(IPKernelApp):
    name = "wasm-kernel"

    # Host-side stdout/stderr stay the kernel's own log (the Jupyter server's
    # terminal): redirected to the notebook, a host warning or traceback would show
    # host paths to the untrusted side. Cell output reaches the notebook only
    # through the guest's streams.
    outstream_class = DottedObjectName(None, allow_none=True).tag(config=True)
    capture_fd_output = Bool(False).tag(config=True)

    @default("kernel_class")
    def _default_kernel_class(self) -> type:
        # Imported here, in init_kernel, after the sockets are bound: the sandbox
        # stack takes ~60 ms to import, and a client's first request reaches a port
        # only at its ZeroMQ reconnect ticks (every 100 ms), so binding late cost a
        # whole tick (benchmarks/experiments/diag_kernel_start.py).
        from .sandbox_kernel import WasmKernel

        return WasmKernel

    def init_iopub(self, context: zmq.Context) -> None:  # type: ignore[override]
        """As IPKernelApp's, with SubscribedIOPubThread."""
        self.iopub_socket = context.socket(zmq.XPUB)
        self.iopub_socket.linger = 1000
        self._apply_curve_server_options(self.iopub_socket)
        self.iopub_port = self._bind_socket(self.iopub_socket, self.iopub_port)
        self.configure_tornado_logger()
        self.iopub_thread = SubscribedIOPubThread(self.iopub_socket, pipe=True, session=self.session)
        self.iopub_thread.start()
        self.iopub_socket = self.iopub_thread.background_socket

    def init_gui_pylab(self) -> None:
        """There is no host-side IPython shell or matplotlib here."""


def main() -> None:
    WasmKernelApp.launch_instance()
