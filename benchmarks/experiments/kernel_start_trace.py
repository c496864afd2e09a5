"""Child of diag_kernel_start.py: a kernel launcher that stamps each start-up phase.

    python kernel_start_trace.py wasm|native -f CONNECTION_FILE

It imports the kernel's modules step by step, wraps a few methods with timers that
never change their behaviour, and appends `[label, unix time, thread]` lines to
$WK_TRACE_FILE; then it launches the kernel as its kernelspec would
(`python -m wasm_kernel` / `python -m ipykernel_launcher`).
"""

from __future__ import annotations

import time

T_UP = time.time()

import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

from stamps import wrapper  # noqa: E402 (this folder: the launcher runs as a script)

TRACE = os.environ["WK_TRACE_FILE"]


def mark(label: str, t: float | None = None) -> None:
    with open(TRACE, "a") as f:
        f.write(json.dumps([label, t if t is not None else time.time(), threading.current_thread().name]) + "\n")


wrap = wrapper(mark)


def wasm() -> None:
    import ipykernel.kernelapp  # noqa: F401
    mark("imported ipykernel.kernelapp")
    from wasm_kernel.kernel import kernel_app
    mark("imported wasm_kernel.kernel.kernel_app")

    wrap(kernel_app.WasmKernelApp, "initialize", "app.initialize")
    wrap(kernel_app.WasmKernelApp, "init_sockets", "app.init_sockets")
    wrap(kernel_app.WasmKernelApp, "start", "app.start (serving)", enter_only=True)
    real_init_kernel = kernel_app.WasmKernelApp.init_kernel

    def init_kernel(app):  # type: ignore[no-untyped-def]
        # The kernel imports its sandbox stack here (kernel_app's lazy kernel_class),
        # so the timers go on once it is imported, as the kernel itself would.
        mark("app.init_kernel: enter")
        from wasm_kernel.kernel import notebook_session as ns
        from wasm_kernel.kernel import sandbox_kernel as sk
        mark("imported the sandbox stack")
        instrument(sk, ns)
        try:
            return real_init_kernel(app)
        finally:
            mark("app.init_kernel: exit")

    kernel_app.WasmKernelApp.init_kernel = init_kernel  # type: ignore[method-assign]
    kernel_app.main()


def instrument(sk, ns) -> None:  # type: ignore[no-untyped-def]
    from wasm_kernel.core import sandbox as core_sandbox
    from wasm_kernel.host import memory_checkpoint, thread_stop
    from wasm_kernel.runtime import background_warmup, python_guest
    from wasm_kernel.sessions import lifecycle

    wrap(sk.WasmKernel, "__init__", "WasmKernel.__init__")
    wrap(ns.NotebookSession, "_bind", "registry bind")
    if hasattr(ns.NotebookSession, "_bound_under_lease"):
        wrap(ns.NotebookSession, "_bound_under_lease", "registry check under the lease")
    wrap(ns.SessionHistory, "__init__", "history open")
    wrap(ns.SessionHistory, "start_kernel_session", "history start_kernel_session")
    wrap(ns.NotebookSession, "_open", "sandbox thread")
    wrap(ns, "is_guest_cached", "is_guest_cached")
    wrap(ns, "is_site_staged", "is_site_staged")
    wrap(ns, "is_warm_image_ready", "is_warm_image_ready")
    wrap(ns.NotebookSession, "_choose_folder", "choose notebook folder")
    wrap(ns.NotebookSession, "_guest_options", "guest options")
    wrap(thread_stop, "unavailable_reason", "stops probe")
    wrap(lifecycle, "acquire_lease", "lease")
    wrap(lifecycle, "create_metadata", "session metadata")
    wrap(core_sandbox, "WorkspaceTracker", "workspace tracker")
    wrap(background_warmup, "load_guest_module", "load compiled guest (cache)")
    wrap(python_guest.PythonGuest, "_boot", "guest boot")
    wrap(memory_checkpoint.MemoryCheckpoint, "take", "checkpoint take")
    wrap(sk.WasmKernel, "kernel_info_request", "kernel_info_request")
    wrap(sk.WasmKernel, "_iopub_subscribed", "wait for an iopub subscriber")
    wrap(sk.WasmKernel, "do_execute", "do_execute")
    wrap(ns.NotebookSession, "wait_until_open", "wait for sandbox")
    wrap(python_guest.PythonGuest, "run_cell", "guest run_cell")


def native() -> None:
    import ipykernel.kernelapp as ka
    mark("imported ipykernel.kernelapp")
    from ipykernel import ipkernel
    mark("imported ipykernel.ipkernel")

    wrap(ka.IPKernelApp, "initialize", "app.initialize")
    wrap(ka.IPKernelApp, "init_sockets", "app.init_sockets")
    wrap(ka.IPKernelApp, "init_kernel", "app.init_kernel")
    wrap(ka.IPKernelApp, "start", "app.start (serving)", enter_only=True)
    wrap(ipkernel.IPythonKernel, "__init__", "IPythonKernel.__init__")
    wrap(ipkernel.IPythonKernel, "kernel_info_request", "kernel_info_request")
    wrap(ipkernel.IPythonKernel, "do_execute", "do_execute")
    ka.launch_new_instance()


if __name__ == "__main__":
    mark("interpreter up (site done)", T_UP)
    kind = sys.argv.pop(1)
    {"wasm": wasm, "native": native}[kind]()
