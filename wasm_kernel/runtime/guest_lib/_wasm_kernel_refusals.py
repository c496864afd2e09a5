"""Runs inside the WASI guest: what the sandbox forbids on purpose, refused in one line.

WASI has no sockets, threads, processes or signals, and the guest's CPython says so
in its own words, when it does at all: `AttributeError: module '_socket' has no
attribute 'getaddrinfo'`, `[Errno 58] wasi does not support processes.`. A notebook
user should read what happened instead: each entry point raises the exception type
a program expects for it (OSError or PermissionError for the operating system's
refusals, RuntimeError for threads, as CPython raises when it cannot start one)
with a message that says it is not available in this sandbox and what to do.

Installed once by _wasm_kernel_boot.setup(), so it is in the warm image (the processes
themselves: _wasm_kernel_processes). The
notebook can undo any of it (it is its own interpreter); that only brings back the
less clear messages, never a capability. The IPython shell's own ways in (`!cmd`,
the script magics, %gui, other package managers) refuse with the words below too
(_wasm_kernel_magics, _wasm_kernel_shell); this module imports no IPython, as a bare
guest has none.
"""

import sys

NETWORK = "network access is not available in this sandbox (it has no sockets); read the data from files in /app"
THREADS = "threads are not available in this sandbox (the notebook runs on one thread); run the work directly"
PROCESSES = ("subprocesses are not available in this sandbox (it runs no programs but python, in a child "
             "interpreter of the sandbox); use Python instead")
SIGNALS = "signals are not available in this sandbox (nothing can send or deliver them)"
CTYPES = "ctypes is not available in this sandbox (it cannot load or call native code)"
SHELL = (
    "shell commands are not available: this sandbox has no shell and runs nothing on the host; "
    "use Python instead (os, pathlib, shutil)"
)
GUI = "GUI event loops are not available in this sandbox; matplotlib figures are shown inline"
PACKAGE_MANAGERS = "only %pip is available here: it installs pure-Python wheels into this session"
CONNECTION = "other clients cannot connect to a sandboxed kernel: it has no connection file to share"


REFUSAL_MARK = "_wasm_kernel_refusal"  # read by _wasm_kernel_zipped_libs (which imports nothing of ours)


def refused(exc_type, message):
    """The exception for one of the sandbox's refusals: IPython shows it with the
    cell's frames and the message only (_wasm_kernel_zipped_libs folds the library
    frames between them into one line). Raise it `from None` where a library would
    chain it."""
    exc = exc_type(message)
    setattr(exc, REFUSAL_MARK, True)
    return exc


def _refuse(exc_type, message, name):
    def refuse(*args, **kwargs):
        raise refused(exc_type, message)

    refuse.__name__ = refuse.__qualname__ = name
    refuse.__doc__ = f"Not available in this sandbox: raises {exc_type.__name__}."
    return refuse


def _network():
    def patch(socket):
        for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                     "create_connection", "create_server", "socketpair", "fromfd", "getfqdn"):
            setattr(socket, name, _refuse(PermissionError, NETWORK, name))

        def __init__(self, *args, **kwargs):
            raise refused(PermissionError, NETWORK)

        socket.socket.__init__ = __init__

    after_import("socket", patch)


def _threads():
    import _thread

    def patch(module):
        for name in ("start_new_thread", "start_new", "start_joinable_thread", "_start_joinable_thread",
                     "_start_new_thread"):
            if hasattr(module, name):
                setattr(module, name, _refuse(RuntimeError, THREADS, name))

    patch(_thread)
    after_import("threading", patch)


def _signals():
    import os
    import signal

    # The calls a notebook makes by hand (a timeout with alarm, os.kill); signal.signal
    # and raise_signal keep working within the interpreter (SIGINT is how an
    # interrupt arrives).
    for module, names in ((signal, ("alarm", "setitimer", "pause")), (os, ("kill",))):
        for name in names:
            setattr(module, name, _refuse(OSError, SIGNALS, name))


class _AfterImport:
    """Imports a module as it ships, then applies our words to it: each patch runs once,
    right after its module's first import (ctypes' stub, otter's export, the modules
    of the network, threads and processes). Patching on import, not at setup, keeps a
    bare interpreter's start light (a `python` child imports what its program does).
    The module's own loader does the work through a wrapper made for this one import:
    a loader may be shared (the stdlib zip's zipimporter loads every module in it)."""

    patches = {}  # module name -> function(module)

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        patch = cls.patches.get(name)
        if patch is None:
            return None
        sys.meta_path.remove(cls)
        try:
            import importlib.util

            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, cls)
        if spec is None or spec.loader is None:
            return spec
        cls.patches.pop(name, None)
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


class _PatchingLoader:
    def __init__(self, loader, patch):
        self._loader = loader
        self._patch = patch

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        loader = self._loader
        module.__loader__ = loader  # the module keeps its own loader, as if we had not been there
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = loader
        loader.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def after_import(name, patch):
    """Run patch(module) on `name` now if it is imported, else right after its import."""
    if name in sys.modules:
        patch(sys.modules[name])
    else:
        _AfterImport.patches[name] = patch


def _ctypes_refusal():
    """The stub raises OSError(_MSG) from its _types module: the message is ours."""
    import importlib

    try:
        types = importlib.import_module("ctypes._types")
    except ImportError:
        return
    if isinstance(getattr(types, "_MSG", None), str):
        types._MSG = CTYPES


OTTER_RUN_TESTS = (
    "otter's export(run_tests=True) runs the notebook again in a new Jupyter kernel, which this sandbox "
    "cannot start (otter installs no nbconvert on WebAssembly); the zip was exported without that run, "
    "and grader.check_all() checks the answers here"
)


def _otter_export(module):
    """otter.check.notebook: export(run_tests=True) says in one line that its run cannot
    happen here, and exports as run_tests=False does, rather than fail half way (otter's
    validate_export imports nbconvert, which otter does not install for wasi)."""
    import functools
    import inspect

    notebook = getattr(module, "Notebook", None)
    real = getattr(notebook, "export", None)
    if real is None:
        return
    try:
        signature = inspect.signature(real)
    except (TypeError, ValueError):
        return

    @functools.wraps(real)
    def export(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return real(*args, **kwargs)  # otter's own error for its own arguments
        if bound.arguments.get("run_tests"):
            bound.arguments["run_tests"] = False
            sys.stderr.write(OTTER_RUN_TESTS + "\n")
        return real(*bound.args, **bound.kwargs)

    notebook.export = export


def install():
    sys.meta_path.insert(0, _AfterImport)
    _network()
    _threads()
    _signals()
    after_import("ctypes", lambda module: _ctypes_refusal())  # numpy imports it: in the warm image
    after_import("otter.check.notebook", _otter_export)
