"""Launching the kernel: `python -m wasm_kernel -f {connection_file}`."""

from __future__ import annotations

from ipykernel.kernelapp import IPKernelApp
from traitlets import Bool, DottedObjectName, default

from .sandbox_kernel import WasmKernel


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
        return WasmKernel

    def init_gui_pylab(self) -> None:
        """There is no host-side IPython shell or matplotlib here."""


def main() -> None:
    WasmKernelApp.launch_instance(kernel_class=WasmKernel)
