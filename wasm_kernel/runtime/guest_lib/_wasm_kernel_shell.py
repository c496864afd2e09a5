"""The real IPython shell inside the guest, playing the part of ipykernel's
ZMQInteractiveShell: its display publisher, display hook, tracebacks, payloads and
history all go to the host through the `_host` door instead of ZeroMQ.

The host owns what must outlive the interpreter (the history store, the session's
files) and everything a notebook must never reach (the host magics, the limits);
this module only asks. Like all guest code it may be broken by the user's own
code, and the host validates every message it sends.
"""

import contextlib
import json
import os
import sys

os.environ.setdefault("IPYTHONDIR", "/tmp/.ipython")
os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")

from IPython.core import page  # noqa: E402
from IPython.core.autocall import ZMQExitAutocall  # noqa: E402
from IPython.core.compilerop import CachingCompiler  # noqa: E402
from IPython.core.displayhook import DisplayHook  # noqa: E402
from IPython.core.displaypub import DisplayPublisher  # noqa: E402
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.history import HistoryManager, HistoryOutput  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell, InteractiveShellABC  # noqa: E402
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class  # noqa: E402
from traitlets import Any, Bool, Type, default  # noqa: E402

import _wasm_kernel_guest as _guest  # noqa: E402
import _wasm_kernel_wire as wire  # noqa: E402

call = _guest.call
_interrupt_words = _guest._interrupt_words


def _safe_point():
    """Calling a Python function is a safe point: an interrupt pending is raised here."""


NO_SHELL = (
    "shell commands are not available: this sandbox has no shell and runs nothing on the host; "
    "use Python instead (os, pathlib, shutil)"
)
NO_GUI = "GUI event loops are not available in this sandbox; matplotlib figures are shown inline"


def _send_output(message):
    """Send a display or a result; one the host refused (nested too deep, malformed)
    is an error in the cell, never an output that silently goes missing."""
    answer = call(message)
    if answer.get("ok") is False and answer.get("error") == "bad_message":
        raise ValueError(f"this output cannot be shown: {answer.get('message') or 'the host refused it'}")


class HostDisplayPublisher(DisplayPublisher):
    """display(), update_display() and clear_output() as messages to the host."""

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False, **kwargs):
        self._validate_data(data, metadata)
        _guest.flush_streams()
        message = {"op": wire.OP_DISPLAY, "data": data, "metadata": metadata or {}, "update": bool(update)}
        if transient:
            message["transient"] = transient
        _send_output(message)

    def clear_output(self, wait=False):
        _guest.flush_streams()
        call({"op": wire.OP_CLEAR_OUTPUT, "wait": bool(wait)})


class HostDisplayHook(DisplayHook):
    """The cell's value as an execute_result message, as ipykernel's display hook."""

    msg = None

    def start_displayhook(self):
        super().start_displayhook()
        self.msg = {"op": wire.OP_EXECUTE_RESULT, "data": {}, "metadata": {}, "execution_count": self.prompt_count}

    def write_output_prompt(self):
        pass  # the frontend draws Out[n] from execution_count

    def write_format_data(self, format_dict, md_dict=None):
        if self.msg is not None:
            self.msg["data"] = format_dict
            self.msg["metadata"] = md_dict or {}

    def finish_displayhook(self):
        _guest.flush_streams()
        msg, self.msg = self.msg, None
        try:
            if msg is not None and msg["data"]:
                _send_output(msg)
        finally:
            super().finish_displayhook()


class HostHistoryManager(HistoryManager):
    """In-memory history for this interpreter; everything older (other kernel
    sessions, searches) is read from the host's store, which outlives the guest."""

    def __init__(self, shell=None, **kwargs):
        kwargs.setdefault("enabled", False)  # no SQLite file, no saving thread
        super().__init__(shell=shell, **kwargs)

    def _ask(self, request):
        answer = call({"op": wire.OP_HISTORY, **request})
        rows = answer.get("history") if answer.get("ok") else None
        return [_history_row(row) for row in rows or ()]

    def get_tail(self, n=10, raw=True, output=False, include_latest=False):
        # As IPython: the newest n (plus the latest, dropped unless include_latest,
        # as it is usually the cell asking), the current session's from memory, where
        # the host has not stored them yet, older ones from the host.
        n = 10 if n is None else n
        want = n if include_latest else n + 1
        number = self.session_number
        rows = [(number, line, entry) for _, line, entry in self._get_range_session(1, None, raw, output)][-want:]
        if len(rows) < want and number:
            older = self._ask({"kind": "tail", "n": want + len(rows), "raw": raw, "output": output})
            rows = [row for row in older if row[0] != number][len(rows) - want:] + rows
        return rows if include_latest else rows[:-1]

    def search(self, pattern="*", raw=True, search_raw=True, output=False, n=None, unique=False):
        return self._ask({"kind": "search", "pattern": pattern, "raw": raw, "output": output, "n": n, "unique": unique})

    def get_range(self, session=0, start=1, stop=None, raw=True, output=False):
        if session <= 0:
            session += self.session_number
        if session == self.session_number:
            return self._get_range_session(start, stop, raw, output)
        return self._ask({"kind": "range", "session": session, "start": start, "stop": stop, "raw": raw, "output": output})

    def get_last_session_id(self):
        return self.session_number


def _history_row(row):
    session, line, entry = row
    return (session, line, tuple(entry) if isinstance(entry, list) else entry)


class GuestKernel:
    """What libraries look for on get_ipython().kernel: the request being served."""

    def __init__(self):
        self._parent = {}
        self.comm_manager = None

    def get_parent(self, channel=None):
        return self._parent

    @property
    def parent_header(self):
        return self._parent.get("header", {})

    def set_parent(self, parent):
        self._parent = parent or {}


@magics_class
class SandboxRefusals(Magics):
    """Magics that would start a process: the sandbox has none. They replace
    IPython's script magics and system access with one line saying so."""

    def _refuse(self, line="", cell=None):
        raise UsageError(NO_SHELL)

    for _name in ("bash", "sh", "script", "perl", "ruby", "python2", "python3", "pypy", "sx", "system",
                  "killbgscripts", "clear", "man"):
        line_cell_magic(_name)(_refuse)
    del _name

    def _no_package_manager(self, line=""):
        raise UsageError("only %pip is available here: it installs pure-Python wheels into this session")

    for _name in ("conda", "mamba", "micromamba", "uv"):
        line_magic(_name)(_no_package_manager)
    del _name

    def _no_connection(self, line=""):
        raise UsageError("other clients cannot connect to a sandboxed kernel: it has no connection file to share")

    for _name in ("connect_info", "qtconsole", "subshell"):
        line_magic(_name)(_no_connection)
    del _name

    @line_magic
    def less(self, arg_s=""):
        """Show a file in the pager (ipykernel's %less); .py files are highlighted."""
        if not arg_s:
            raise UsageError("Missing filename.")
        if arg_s.endswith(".py"):
            from IPython.utils import openpy

            text = self.shell.pycolorize(openpy.read_py_file(arg_s, skip_encoding_cookie=False))
        else:
            with open(arg_s) as f:
                text = f.read()
        page.page(text)

    line_magic("more")(less)

    @line_magic
    def autosave(self, arg_s=""):
        """Set the notebook's autosave interval in seconds, as ipykernel's %autosave."""
        from IPython.display import Javascript, display

        try:
            interval = int(arg_s)
        except ValueError:
            raise UsageError(f"%autosave requires an integer, got {arg_s!r}") from None
        display(Javascript("IPython.notebook.set_autosave_interval(%i)" % (1000 * interval)),
                include=["application/javascript"])
        print(f"Autosaving every {interval} seconds" if interval else "Autosave disabled")

    @line_magic
    def lsmagic(self, line=""):
        """List the magics: the sandbox's own (on the host) and IPython's (in the sandbox)."""
        return _MagicsList(_lsmagic_text(self.shell))


class _MagicsList:
    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def _repr_pretty_(self, p, cycle):
        p.text(self.text)


def _lsmagic_text(sh):
    found = sh.magics_manager.lsmagic()
    line = sorted(n for n in found["line"] if n not in _host_magics)
    cell = sorted(n for n in found["cell"] if n not in _host_magics)
    return "\n".join([
        "Sandbox magics (run on the host, on this notebook's session; each on a line of its own):",
        "  ".join(_host_magic_label(n) for n in sorted(_host_magics)) or "(none)",
        "",
        "IPython magics (run in the sandbox):",
        "Available line magics:",
        "%" + "  %".join(line),
        "",
        "Available cell magics:",
        "%%" + "  %%".join(cell),
        "",
        sh.magics_manager.auto_status(),
    ])


_host_magics = {}  # name -> "line" | "cell" | "both", from the host at setup


def _host_magic_label(name):
    kind = _host_magics.get(name, "line")
    return {"line": f"%{name}", "cell": f"%%{name}", "both": f"%{name} %%{name}"}[kind]


class CellCompiler(CachingCompiler):
    """Names each cell as a file in /tmp/ipykernel_<pid>/, as ipykernel's compiler
    does for its debugger, so warnings and `obj?` show the same kind of name."""

    def get_code_name(self, raw_code, transformed_code, number):
        import tempfile
        import zlib

        return f"{tempfile.gettempdir()}/ipykernel_{os.getpid()}/{zlib.crc32(raw_code.encode())}.py"


class SandboxShell(InteractiveShell):
    compiler_class = Type(CellCompiler)
    displayhook_class = Type(HostDisplayHook)
    display_pub_class = Type(HostDisplayPublisher)
    kernel = Any()
    readline_use = Bool(False)
    autoindent = Bool(False)
    exit_requested = Bool(False)
    keepkernel_on_exit = None

    @default("exiter")
    def _default_exiter(self):
        return ZMQExitAutocall(self)

    def init_history(self):
        self.history_manager = HostHistoryManager(shell=self, parent=self)
        self.configurables.append(self.history_manager)

    def init_hooks(self):
        super().init_hooks()
        self.set_hook("show_in_pager", page.as_hook(self._page_payload), 99)

    def init_magics(self):
        super().init_magics()
        self.register_magics(SandboxRefusals)

    def init_virtualenv(self):
        pass

    def _page_payload(self, strg, start=0, screen_lines=0, pager_cmd=None):
        data = strg if isinstance(strg, dict) else {"text/plain": strg}
        self.payload_manager.write_payload({"source": "page", "data": data, "start": max(0, start)})

    def set_next_input(self, text, replace=False):
        self.payload_manager.write_payload({"source": "set_next_input", "text": text, "replace": replace})

    def ask_exit(self):
        # exit() / quit(): the host starts a fresh interpreter on the same files, as
        # a Jupyter frontend restarts ipykernel's process; exit(keep_kernel=True)
        # only tells the frontend.
        self.exit_requested = not self.keepkernel_on_exit
        self.payload_manager.write_payload({"source": "ask_exit", "keepkernel": self.keepkernel_on_exit})

    async def run_code(self, code_obj, result=None, *, async_=False):
        # The cell's own code: the only place the host may raise a soft interrupt
        # (_wasm_kernel_guest._interrupt_words[0]). The window opens and closes with a
        # store into an array, not a call: a call is a safe point, where an interrupt
        # already requested would be raised outside IPython's handling.
        _interrupt_words[0] = 1
        try:
            return await super().run_code(code_obj, result, async_=async_)
        except KeyboardInterrupt as err:  # taken before run_code's own handler was in place
            if result is not None:
                result.error_in_exec = err
            self.showtraceback()
            return True
        finally:
            _interrupt_words[0] = 0
            try:  # an interrupt raised as the cell's code ended: the cell is over anyway
                _safe_point()
            except KeyboardInterrupt:
                pass

    def run_cell(self, *args, **kwargs):
        self._last_traceback = None
        self._last_traceback_during_displayhook = False
        return super().run_cell(*args, **kwargs)

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
            self._keep_stream_output(count, captured)

    def _keep_stream_output(self, count, captured):
        runs = []  # consecutive writes of one stream, as IPython merges them
        for fd, data in captured:
            if runs and runs[-1][0] == fd:
                runs[-1][1].append(data)
            else:
                runs.append((fd, [data]))
        outputs = self.history_manager.outputs
        for fd, parts in runs:
            text = b"".join(parts).decode("utf-8", "replace")
            if not text:
                continue
            output_type = "out_stream" if fd == 1 else "err_stream"
            kept = outputs[count]
            if kept and kept[-1].output_type == output_type:
                kept[-1].bundle["stream"].append(text)
            else:
                kept.append(HistoryOutput(output_type=output_type, bundle={"stream": [text]}))

    def _get_exc_info(self, exc_tuple=None):
        etype, value, tb = super()._get_exc_info(exc_tuple)
        if value is not None and tb is not None:
            _guest.without_support_frames(value)
            tb = value.__traceback__
        return etype, value, tb

    def _showtraceback(self, etype, evalue, stb):
        if getattr(self.displayhook, "msg", None) is not None:
            # A _repr_*_ that raised while the cell's value was formatted: as in
            # ipykernel, the cell then counts as failed.
            self._last_traceback_during_displayhook = True
        _guest.flush_streams()
        call({"op": wire.OP_ERROR, "ename": str(etype.__name__), "evalue": str(evalue), "traceback": list(stb)})
        self._last_traceback = stb

    def _find_with_lazy_load(self, /, type_, magic_name):
        fn = super()._find_with_lazy_load(type_, magic_name)
        if fn is None:
            raise UsageError(_unknown_magic(self, type_, magic_name))
        return fn

    def system(self, cmd):
        raise UsageError(NO_SHELL)

    system_raw = system_piped = system

    def getoutput(self, cmd, split=True, depth=0):
        raise UsageError(NO_SHELL)

    def enable_gui(self, gui=None):
        if gui not in (None, "inline"):
            raise UsageError(NO_GUI)

    def enable_matplotlib(self, gui=None):
        if gui not in (None, "inline", "agg"):
            raise UsageError(f"%matplotlib {gui}: {NO_GUI}")
        return super().enable_matplotlib(gui)


InteractiveShellABC.register(SandboxShell)


def _unknown_magic(shell, type_, name):
    mark = "%" if type_ == "line" else "%%"
    if name in _host_magics:
        return (
            f"{mark}{name} runs on the host: put it on a line of its own at the top level of a cell, "
            "not inside a block or a call"
        )
    ipython = shell.magics_manager.lsmagic()
    other = ipython["cell" if type_ == "line" else "line"]
    hint = ""
    if name in other:
        hint = f" (but {'%%' if type_ == 'line' else '%'}{name} exists, did you mean that instead?)"
    else:
        import difflib

        close = difflib.get_close_matches(name, list(_host_magics) + list(ipython[type_]), n=1)
        if close:
            hint = f" (did you mean {mark}{close[0]}?)"
    host = " ".join(_host_magic_label(n) for n in sorted(_host_magics)) or "none"
    names = " ".join(mark + n for n in sorted(ipython[type_]))
    kind = "Line magic function" if type_ == "line" else "Cell magic"
    return f"{kind} `{mark}{name}` not found{hint}. Sandbox magics: {host}. IPython magics: {names}."


shell = None


def setup(config_json="{}"):
    """Build the shell and start it for this sandbox, in one turn (a plain boot)."""
    build("[]")
    start(config_json)


def build(preload_json="[]"):
    """Build the shell and import `preload` (module names): the state a warm image
    holds, shared by every sandbox started from it. Nothing here may depend on the
    sandbox (its session, its history, its files); start() adds that."""
    global shell
    shell = SandboxShell.instance()
    shell.kernel = GuestKernel()
    import _wasm_kernel_comm

    _wasm_kernel_comm.install(shell.kernel)
    # tqdm starts a monitor thread for every bar and warns when it cannot; the guest
    # has no threads, and the bar works without it, as with monitor_interval = 0.
    import warnings

    warnings.filterwarnings("ignore", message="tqdm:disabling monitor support")
    shell.extension_manager.load_extension("storemagic")  # as IPKernelApp loads it
    _complete_modules_in_zips()
    import importlib

    for name in json.loads(preload_json):
        # Imported, not bound: a notebook's namespace starts empty, as on ipykernel.
        importlib.import_module(name)
    import IPython.core.getipython  # noqa: F401  (get_ipython() finds the instance)
    _collapse_library_frames()
    _warm_tracebacks()
    _find_seeded_generators()
    _settle_boot_objects()


class _LibraryFrame(str):
    """A frame format_record left out: library code shipped without source."""


def _collapse_library_frames():
    """Tracebacks as ipykernel's read, where library frames show their source: the
    guest's stdlib and built-in packages ship as bytecode only, so each of their
    frames would be a bare `File ...python315.zip/...` line with no code. A run of
    them becomes one line; `%xmode Verbose` lists them all."""
    import linecache

    from IPython.core import ultratb
    from IPython.utils.PyColorize import Token, theme_table

    real_record = ultratb.VerboseTB.format_record
    real_whole = ultratb.VerboseTB.format_exception_as_a_whole

    def without_source(frame_info):
        filename = getattr(frame_info, "filename", None)
        return bool(filename) and filename.startswith(_LIBRARY_ROOTS) and not linecache.getlines(filename)

    def format_record(self, frame_info):
        if getattr(self, "mode", "Context") != "Verbose" and without_source(frame_info):
            return _LibraryFrame("")
        return real_record(self, frame_info)

    def format_exception_as_a_whole(self, *args, **kwargs):
        theme = theme_table[self._theme_name]
        parts = real_whole(self, *args, **kwargs)
        for n, part in enumerate(parts):
            collapsed, run = [], 0
            for entry in part + [None]:
                if isinstance(entry, _LibraryFrame):
                    run += 1
                    continue
                if run:
                    what = f"{run} frame{'s' * (run != 1)} in library code without source"
                    collapsed.append(theme.format(
                        [(Token, "    "), (Token.ExcName, f"[... {what}; %xmode Verbose lists them]"), (Token, "\n")]))
                    run = 0
                if entry is not None:
                    collapsed.append(entry)
            parts[n] = collapsed
        return parts

    ultratb.VerboseTB.format_record = format_record
    ultratb.VerboseTB.format_exception_as_a_whole = format_exception_as_a_whole


# Where the guest's own libraries live (the stdlib zip holds numpy, pandas... too).
_LIBRARY_ROOTS = ("/usr/local/lib/",)


def _warm_tracebacks():
    """Format one traceback now, so the first error a user meets does not pay for
    importing stack_data and for inspect's map of every loaded module to its file
    (~900 modules with pandas: 6,000 lstat calls, 0.4 s). No shell state changes:
    nothing is shown and sys.last_exc is not set."""
    try:
        raise RuntimeError("warm-up")
    except RuntimeError as err:
        shell.InteractiveTB.structured_traceback(type(err), err, err.__traceback__)


def start(config_json="{}"):
    """Make the built shell this sandbox's. config: host_magics {name: kind},
    session_number, environment {name: value} (checked on the host) for os.environ."""
    config = json.loads(config_json)
    os.environ.update(config.get("environment", {}))
    _guest.register_stream_ring()
    _host_magics.clear()
    _host_magics.update(config.get("host_magics", {}))
    _reseed()
    _forget_sandbox_finders()
    shell.history_manager.session_number = int(config.get("session_number", 0) or 0)
    _restore_history(shell)


# Mounts that are the same in every sandbox made from one image (the image key
# covers them): their import finders' caches stay valid.
_SHARED_MOUNTS = ("/usr/local/lib/", "/opt/wasm-kernel")


def _forget_sandbox_finders():
    """A warm image was made on another /app and another packages folder: the
    finders cached for those (and for '', the working directory) must look afresh.
    Not importlib.invalidate_caches(): that rereads the stdlib zip's directory too
    (~150M instructions)."""
    from importlib.metadata import MetadataPathFinder

    for entry in list(sys.path_importer_cache):
        if not entry.startswith(_SHARED_MOUNTS) or entry.endswith("/session-packages"):
            del sys.path_importer_cache[entry]
    MetadataPathFinder.invalidate_caches()


# Random generators that exist when the shell is built, seeded at import. A warm
# image holds them as they were when it was made, so each sandbox reseeds them
# from its own entropy (WASI random_get) before any cell runs.
_seeded_generators = []


def _find_seeded_generators():
    import gc
    import random

    kinds = [random.Random]
    np = sys.modules.get("numpy")
    if np is not None:
        kinds += [np.random.RandomState, np.random.Generator]
    kinds = tuple(kinds)
    # SystemRandom draws from the OS each time: it has no state to share.
    _seeded_generators[:] = [
        obj for obj in gc.get_objects() if isinstance(obj, kinds) and not isinstance(obj, random.SystemRandom)
    ]


def _reseed():
    """Fresh entropy for every generator, in fixed-size arrays: seeding from a Python
    int (numpy's default) allocates as many digits as the entropy happens to need,
    which shifts the heap and makes the same cell cost different fuel in two
    sandboxes."""
    import random
    import tempfile

    tempfile._name_sequence = None  # made again, from the reseeded entropy, on first use
    np = sys.modules.get("numpy")
    for gen in _seeded_generators:
        if isinstance(gen, random.Random):
            gen.seed()  # C's own path: 624 words from os.urandom
        elif np is not None and isinstance(gen, np.random.RandomState):
            gen.seed(np.frombuffer(os.urandom(624 * 4), dtype=np.uint32))
        elif np is not None and isinstance(gen, np.random.Generator):
            bits = gen.bit_generator
            bits.state = type(bits)(np.frombuffer(os.urandom(32), dtype=np.uint32)).state


def _settle_boot_objects():
    """Make what exists now (IPython, the stdlib modules, their functions and
    classes) immortal and out of the collector's reach, as CPython does for its
    own static objects: then a cell's reference counting never writes to their
    pages, and a checkpoint copies only what the cell itself changed. The host
    writes the immortal reference count (the guest cannot write its own object
    headers); these objects live as long as the interpreter anyway."""
    import array
    import gc

    # Every object is held in `keep` until the host has written its header: an
    # address whose object was freed meanwhile (a temporary int of this loop)
    # would be reused memory, and a write there would corrupt the allocator.
    keep, seen = [], set()
    ours = {id(keep), id(seen)}
    for obj in gc.get_objects():
        for item in (obj, *gc.get_referents(obj)):
            address = id(item)
            if address not in seen and address not in ours:
                seen.add(address)
                keep.append(item)
    found = array.array("I", map(id, keep))
    address, count = found.buffer_info()
    call({"op": wire.OP_IMMORTALIZE, "address": address, "count": count})
    del found, keep, seen
    gc.freeze()


def _restore_history(sh):
    """In and _iN as the host's store has them for this kernel session: the
    interpreter may be new (exit(), %reset, a failed rollback) while the kernel
    session goes on."""
    hm = sh.history_manager
    if not hm.session_number:
        return
    rows = hm._ask({"kind": "range", "session": hm.session_number, "start": 1, "stop": None, "raw": True, "output": False})
    for _session, line, source in rows:
        _pad_history(hm, line)
        hm.store_inputs(line, source, source)
    if rows:
        sh.execution_count = rows[-1][1] + 1


def _pad_history(hm, line):
    # A cell the host counted but this interpreter never kept (rolled back by an
    # interrupt or a limit, or undone) leaves its In[n] empty, so In[n] stays the
    # cell numbered n.
    while len(hm.input_hist_parsed) < line:
        hm.input_hist_parsed.append("")
        hm.input_hist_raw.append("")


def run(request_json):
    """Run one cell as ipykernel's do_execute does, and report its end to the host."""
    request = json.loads(request_json)
    sh = shell
    code = request["code"]
    if request.get("packages_changed"):
        import importlib

        importlib.invalidate_caches()
    silent = bool(request.get("silent", False))
    store_history = bool(request.get("store_history", True))
    sh.kernel.set_parent(request.get("parent"))
    count = request.get("execution_count")
    if count is not None:
        sh.execution_count = int(count)
    history_cell = request.get("history_cell")
    hm = sh.history_manager
    for line, source in request.get("backfill", ()):
        _pad_history(hm, line)
        if len(hm.input_hist_parsed) == line:
            hm.store_inputs(line, source, source)
    if store_history and not silent:
        _pad_history(sh.history_manager, sh.execution_count)
        if history_cell is not None:
            # One cell split around host magics: In[n] is the whole cell, stored once.
            if request.get("first_part", True):
                sh.history_manager.store_inputs(sh.execution_count, history_cell, history_cell)
            store_history = False
    sh.payload_manager.clear_payload()
    sh.exit_requested = False
    kwargs = {"store_history": store_history, "silent": silent}
    if request.get("cell_id"):
        kwargs["cell_id"] = request["cell_id"]
    result = sh.run_cell(code, **kwargs)
    err = result.error_before_exec if result.error_before_exec is not None else result.error_in_exec
    message = {"op": wire.OP_RESULT, "status": "ok", "exit_code": 0, "payload": sh.payload_manager.read_payload()}
    sh.payload_manager.clear_payload()
    if sh.exit_requested:
        message["status"] = "exit"
    elif not result.success or sh._last_traceback_during_displayhook:
        message["status"] = "error"
        message["error"] = {
            "ename": type(err).__name__,
            "evalue": str(err),
            "traceback": list(sh._last_traceback or []),
        }
    _guest.flush_streams()
    call(message)


# --- queries: the kernel's questions about the live namespace ----------------------


def _complete(code, cursor_pos):
    from IPython.core.completer import Completion, provisionalcompleter, rectify_completions

    with provisionalcompleter():
        found = list(rectify_completions(code, shell.Completer.completions(code, cursor_pos)))
        if found and all(c.text.startswith(".") and code[c.start:c.start + 1] == "." for c in found):
            # Without jedi, IPython 9 completes `str.upp` as `.upper` from the dot;
            # ipykernel (with jedi) answers `upper` after it, which frontends expect.
            found = [Completion(c.start + 1, c.end, c.text[1:], type=c.type, signature=c.signature) for c in found]
    comps = [
        {"start": c.start, "end": c.end, "text": c.text, "type": c.type, "signature": c.signature}
        for c in found
    ]
    start, end = (found[0].start, found[0].end) if found else (cursor_pos, cursor_pos)
    return {
        "matches": [c.text for c in found],
        "cursor_start": start,
        "cursor_end": end,
        "metadata": {"_jupyter_types_experimental": comps},
    }


def _inspect(code, cursor_pos, detail_level=0):
    from IPython.utils.tokenutil import token_at_cursor

    name = token_at_cursor(code, cursor_pos)
    try:
        bundle = shell.object_inspect_mime(name, detail_level=detail_level)
    except KeyError:
        return {"found": False, "data": {}, "metadata": {}}
    if not shell.enable_html_pager:
        bundle.pop("text/html", None)
    return {"found": True, "data": bundle, "metadata": {}}


def _is_complete(code):
    status, indent = shell.input_transformer_manager.check_complete(code)
    reply = {"status": status}
    if status == "incomplete":
        reply["indent"] = " " * (indent or 0)
    return reply


def _user_expressions(expressions):
    return shell.user_expressions(expressions)


def _comm_info(target_name=None):
    import _wasm_kernel_comm

    return _wasm_kernel_comm.comm_info(target_name)


_QUERIES = {
    "complete": _complete,
    "inspect": _inspect,
    "is_complete": _is_complete,
    "user_expressions": _user_expressions,
    "comm_info": _comm_info,
}


def query(op, args_json):
    """Answer one of the kernel's queries; the value goes back in a query_result
    message, never into the user's namespace or history."""
    try:
        value = _QUERIES[op](**json.loads(args_json))
    except BaseException as err:  # user code (a __repr__, a __dir__) may raise anything
        error = {"ename": type(err).__name__, "evalue": str(err), "traceback": []}
        call({"op": wire.OP_RESULT, "status": "error", "exit_code": 1, "error": error})
        return
    call({"op": wire.OP_QUERY_RESULT, "value": value})
    call({"op": wire.OP_RESULT, "status": "ok", "exit_code": 0})


def _complete_modules_in_zips():
    """IPython lists importable modules by walking sys.path folders; the guest's
    stdlib and its packages live in a zip, which IPython 9 no longer reads on this
    Python, and the statically linked extensions show up in
    sys.builtin_module_names with dotted names. `import nu<Tab>` should offer numpy."""
    import zipfile

    from IPython.core import completerlib

    folder_modules = completerlib.module_list
    root_modules = completerlib.get_root_modules

    def module_list(path):
        if path.endswith(".zip") and zipfile.is_zipfile(path):
            names = [n for n in zipfile.ZipFile(path).namelist() if n.count("/") <= 1]
            return list({m.group("name") for m in map(completerlib.import_re.match, names) if m})
        return folder_modules(path)

    completerlib.module_list = module_list
    completerlib.get_root_modules = lambda: [m for m in root_modules() if "." not in m]
