"""Launching the kernel: `python -m wasm_kernel -f {connection_file}`."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq
from ipykernel.iostream import IOPubThread
from ipykernel.kernelapp import IPKernelApp
from ipykernel.parentpoller import ParentPollerUnix
from traitlets import Bool, DottedObjectName, default
from traitlets.config import Config

from .config_files import load_jupyter_config_files

SUBSCRIBE_GRACE_S = 0.05  # from a client's iopub handshake to its subscription (see wait_for_subscriber)


class SubscribedIOPubThread(IOPubThread):
    """ipykernel's IOPub thread, which also tells whether a client has subscribed,
    or has connected without subscribing: see wait_for_subscriber."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.subscribed = threading.Event()  # before super(): it starts the listener
        self.connected_at: float | None = None  # monotonic time of the first handshake
        super().__init__(*args, **kwargs)
        self._monitor: zmq.Socket | None = self.socket.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)

    def _handle_subscription(self, frames: list[bytes]) -> None:
        if any(frame[:1] == b"\x01" for frame in frames):
            self.subscribed.set()
        super()._handle_subscription(frames)

    async def wait_for_subscriber(self, wait: float, grace: float = SUBSCRIBE_GRACE_S) -> None:
        """Return once a client subscribes, after at most `wait` seconds. After a
        restart, a Jupyter server's shell socket reconnects before its iopub
        subscription does (ZeroMQ's 100 ms reconnect interval), and this kernel
        answers fast: "restart and run all" would lose the first cell's outputs and
        its idle status, which PUB drops while nobody subscribes. A client whose SUB
        has connected but not subscribed within `grace` subscribes lazily, when it
        next reads iopub (jupyter_client's blocking client does, and its
        wait_for_ready() checks iopub itself): it is not waited for. Then the
        monitor is dropped (stop_watching)."""
        deadline = time.monotonic() + wait
        polls = 0
        while not self.subscribed.is_set() and time.monotonic() < deadline:
            if polls % 4 == 0:
                self.poll_subscriptions()
            polls += 1
            connected = self.connected_at
            if connected is not None and time.monotonic() - connected > grace:
                break
            await asyncio.sleep(0.005)
        self.stop_watching()

    def poll_subscriptions(self) -> None:
        """Look at the XPUB socket and its monitor, from any thread. ZeroMQ's
        descriptors are edge-triggered: a subscription or handshake that came
        before the IOPub loop watched the socket would go unnoticed until something
        else happened on it."""
        self.io_loop.add_callback(self._read_subscriptions)

    def stop_watching(self) -> None:
        """The monitor has served (see wait_for_subscriber): drop it, as
        its open socket would keep the ZeroMQ context, and the process, from
        exiting."""
        self.io_loop.add_callback(self._close_monitor)

    def _close_monitor(self) -> None:
        monitor, self._monitor = self._monitor, None
        if monitor is not None:
            if self.socket is not None:
                self.socket.disable_monitor()
            monitor.close(linger=0)

    def close(self) -> None:
        self._close_monitor()  # the thread has stopped: safe from here
        super().close()

    def _read_subscriptions(self) -> None:
        try:
            while True:
                self._handle_subscription(self.socket.recv_multipart(zmq.NOBLOCK))
        except zmq.ZMQError:
            pass  # nothing more (zmq.Again), or closing
        if self._monitor is None:
            return
        try:
            while True:
                self._monitor.recv_multipart(zmq.NOBLOCK)
                if self.connected_at is None:
                    self.connected_at = time.monotonic()
        except zmq.ZMQError:
            pass


class WasmKernelApp(IPKernelApp):
    name = "wasm-kernel"

    # Host-side stdout/stderr stay the kernel's own log (the Jupyter server's
    # terminal): redirected to the notebook, a host warning or traceback would show
    # host paths to the untrusted side. Cell output reaches the notebook only
    # through the guest's streams.
    outstream_class = DottedObjectName(None, allow_none=True).tag(config=True)
    capture_fd_output = Bool(False).tag(config=True)

    def load_config_file(self, suppress_errors: bool | None = None) -> None:  # type: ignore[override]
        """IPython's profile files, then Jupyter's (config_files.py): an operator's
        `c.WasmKernel.x` in jupyter_config.py reaches the kernel."""
        super().load_config_file() if suppress_errors is None else super().load_config_file(suppress_errors)
        load_jupyter_config_files(self)

    @default("kernel_class")
    def _default_kernel_class(self) -> type:
        # Imported here, in init_kernel, after the sockets are bound: the sandbox
        # stack takes ~60 ms to import, and a client's first request reaches a port
        # only at its ZeroMQ reconnect ticks (every 100 ms), so binding late cost a
        # whole tick (benchmarks/experiments/diag_kernel_start.py).
        from .sandbox_kernel import WasmKernel

        return WasmKernel

    def init_kernel(self) -> None:
        """The kernel class's options in argv, parsed again now that it is imported,
        then the kernel, as IPKernelApp makes it."""
        self.parse_kernel_options()
        super().init_kernel()

    def parse_kernel_options(self) -> None:
        """`--WasmKernel.<trait>=...` as traitlets parses the options of a class its
        application lists: `--WasmKernel.network_allow=["a:80", "b"]` is a list of two,
        as ipykernel's own classes take it (unlisted, traitlets kept the text as one
        entry). The kernel class is not among `classes` when the command line is first
        parsed: importing it then would bind the sockets ~60 ms later."""
        kernel_class = self.kernel_class
        name = kernel_class.__name__
        if not any(arg.startswith(f"--{name}.") for arg in self.argv):
            return
        flags, aliases = self.flatten_flags()
        classes = [*self._classes_with_config_traits(), kernel_class]
        section = self._create_loader(self.argv, aliases, flags, classes=classes).load_config().get(name)
        if section:
            self.cli_config[name] = section  # the command line keeps its priority over files
            self.update_config(Config({name: section}))

    def init_sockets(self) -> None:
        """As IPKernelApp's, but a port that cannot be bound ends the process at once,
        with one line. The ports are the connection file's, which the server chose a
        moment before; when a class's kernels start at once, another process can take
        one in between. ipykernel then prints a traceback and stays half-alive: its
        atexit close() waits in context.term() for the sockets already bound, so the
        server sees a running process, never restarts it, and the notebook waits for a
        kernel_info reply until the server gives up. Exiting instead lets the server's
        restarter start the kernel again on fresh ports. Nothing of the sandbox exists
        yet (init_kernel comes later), so there is nothing to save or clean."""
        try:
            super().init_sockets()
        except zmq.ZMQError as err:
            sys.stderr.write(f"wasm-kernel: could not bind the kernel's ports ({err}); exiting, so that the "
                             "server starts the kernel again\n")
            sys.stderr.flush()
            os._exit(1)

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

    def init_poller(self) -> None:
        """ipykernel's parent poller, which ends the kernel when its Jupyter server is
        gone, but saves the interpreter first (SavingParentPoller)."""
        super().init_poller()
        if isinstance(self.poller, ParentPollerUnix):
            self.poller = SavingParentPoller(self.poller.parent_pid, self._end_orphaned)

    def _end_orphaned(self) -> None:
        kernel = getattr(self, "kernel", None)
        end = getattr(kernel, "end_orphaned", None)
        if end is not None:
            end()


class SavingParentPoller(ParentPollerUnix):
    """Ends the kernel when its parent (the Jupyter server) is gone, as ipykernel's
    poller does, after `before_exit` has run (the kernel saves its interpreter). A
    server can die without shutting its kernels down: JupyterHub stops a
    single-user server with SIGINT, which a server without a terminal does not
    catch (jupyter_server installs its SIGINT handler only on a tty), so a culled
    server's kernels would lose their state."""

    def __init__(self, parent_pid: int, before_exit: Callable[[], None]) -> None:
        super().__init__(parent_pid=parent_pid)
        self.before_exit = before_exit

    def run(self) -> None:
        expected = self.parent_pid if os.getppid() == self.parent_pid else 0
        while True:
            parent = os.getppid()
            if (expected and parent != expected) or (not expected and parent == 1):
                try:
                    self.before_exit()
                finally:
                    os._exit(1)
            time.sleep(1.0)


def main() -> None:
    WasmKernelApp.launch_instance()
