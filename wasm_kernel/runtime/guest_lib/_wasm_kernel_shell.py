"""The real IPython shell inside the guest. Like ipykernel's ZMQInteractiveShell it
overrides only what its transport needs: displays, results, tracebacks, history and
payloads go to the host through the `_host` door instead of ZeroMQ; what would need
a process or a GUI refuses in one line.

Its parts live beside it: the display publisher and hook (_wasm_kernel_display),
history (_wasm_kernel_history), the sandbox's magics (_wasm_kernel_magics); the
kernel object that runs cells and answers queries (_wasm_kernel_kernel); the build
and per-sandbox start (_wasm_kernel_image).
"""

import contextlib

from IPython.core import page, payloadpage
from IPython.core.autocall import ZMQExitAutocall
from IPython.core.compilerop import CachingCompiler
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell
from traitlets import Any, Bool, Type, default

import _wasm_kernel_guest as _guest
import _wasm_kernel_refusals as refusals
import _wasm_kernel_wire as wire
from _wasm_kernel_cell_names import cell_path
from _wasm_kernel_display import HostDisplayHook, HostDisplayPublisher
from _wasm_kernel_history import HostHistoryManager
from _wasm_kernel_magics import SandboxMagics, unknown_magic


def _safe_point():
    """Calling a Python function is a safe point: an interrupt pending is raised here."""


class CellCompiler(CachingCompiler):
    """Names each cell as a file in /tmp/ipykernel_42/ from the murmur2 hash of its
    code, as ipykernel's compiler does for its debugger
    (ipykernel.compiler.XCachingCompiler.get_code_name): JupyterLab's debugger
    computes the same name from the cell's code to set its breakpoints."""

    def get_code_name(self, raw_code, transformed_code, number):
        return cell_path(raw_code)


class SandboxShell(InteractiveShell):
    compiler_class = Type(CellCompiler)
    displayhook_class = Type(HostDisplayHook)
    display_pub_class = Type(HostDisplayPublisher)
    kernel = Any()  # the GuestKernel, where libraries look for get_parent() and comm_manager
    readline_use = Bool(False)
    autoindent = Bool(False)
    keepkernel_on_exit = None

    @default("exiter")
    def _default_exiter(self):
        return ZMQExitAutocall(self)

    def init_history(self):
        self.history_manager = HostHistoryManager(shell=self, parent=self)
        self.configurables.append(self.history_manager)

    def init_hooks(self):
        # As ipykernel's ZMQInteractiveShell.init_hooks, with IPython's own payload pager.
        super().init_hooks()
        self.set_hook("show_in_pager", page.as_hook(payloadpage.page), 99)

    def init_magics(self):
        super().init_magics()
        self.register_magics(SandboxMagics)

    def init_virtualenv(self):
        pass  # as ipykernel: a kernel does not guess a virtualenv

    # --- payloads: copied from ipykernel.zmqshell.ZMQInteractiveShell --------------

    def set_next_input(self, text, replace=False):
        self.payload_manager.write_payload({"source": "set_next_input", "text": text, "replace": replace})

    def ask_exit(self):
        # ZMQInteractiveShell.ask_exit. The host then starts a fresh interpreter on the
        # same files, as a Jupyter frontend restarts ipykernel's process;
        # exit(keep_kernel=True) only tells the frontend.
        self.exit_now = not self.keepkernel_on_exit
        self.payload_manager.write_payload({"source": "ask_exit", "keepkernel": self.keepkernel_on_exit})

    def run_cell(self, *args, **kwargs):
        # ZMQInteractiveShell.run_cell.
        self._last_traceback = None
        self._last_traceback_during_displayhook = False
        return super().run_cell(*args, **kwargs)

    def _showtraceback(self, etype, evalue, stb):
        # ZMQInteractiveShell._showtraceback, its message sent through the door.
        if getattr(self.displayhook, "msg", None) is not None:
            # A _repr_*_ that raised while the cell's value was formatted: the cell
            # then counts as failed.
            self._last_traceback_during_displayhook = True
        _guest.flush_streams()
        _guest.call({"op": wire.OP_ERROR, "ename": str(etype.__name__), "evalue": str(evalue),
                     "traceback": list(stb)})
        self._last_traceback = stb

    # --- the guest's own transport: interrupts, streams, support frames ------------

    async def run_code(self, code_obj, result=None, *, async_=False):
        # The cell's own code: the only place the host may raise a soft interrupt
        # (_wasm_kernel_guest._interrupt_words[0]). The window opens and closes with a
        # store into an array, not a call: a call is a safe point, where an interrupt
        # already requested would be raised outside IPython's handling.
        words = _guest._interrupt_words
        words[0] = 1
        try:
            return await super().run_code(code_obj, result, async_=async_)
        except KeyboardInterrupt as err:  # taken before run_code's own handler was in place
            if result is not None:
                result.error_in_exec = err
            self.showtraceback()
            return True
        finally:
            words[0] = 0
            try:  # an interrupt raised as the cell's code ended: the cell is over anyway
                _safe_point()
            except KeyboardInterrupt:
                pass

    @contextlib.contextmanager
    def _tee(self, channel):
        """What IPython's _tee keeps (each cell's stream text in
        history_manager.outputs, for %notebook), collected by the ring writer: its
        Python wrapper around every write() doubled the cost of print() in the
        guest. run_cell nests the stdout tee around the stderr one; the outer one
        collects both streams, in their order."""
        if channel != "stdout":
            yield
            return
        count = self.execution_count
        captured = _guest.capture_streams()
        try:
            yield
        finally:
            _guest.stop_capture()
            self.history_manager.keep_streams(count, captured)

    def _get_exc_info(self, exc_tuple=None):
        etype, value, tb = super()._get_exc_info(exc_tuple)
        if value is not None and tb is not None:
            _guest.without_support_frames(value)
            tb = value.__traceback__
        return etype, value, tb

    # --- what the sandbox has not: GUI loops, other magics --------------------------

    def _find_with_lazy_load(self, /, type_, magic_name):
        fn = super()._find_with_lazy_load(type_, magic_name)
        if fn is None:
            raise UsageError(unknown_magic(self, type_, magic_name))
        return fn

    def enable_gui(self, gui=None):
        if gui not in (None, "inline"):
            raise UsageError(refusals.GUI)

    def enable_matplotlib(self, gui=None):
        if gui not in (None, "inline", "agg"):
            raise UsageError(f"%matplotlib {gui}: {refusals.GUI}")
        return super().enable_matplotlib(gui)
