"""Runs inside the WASI guest: executes cells, formats rich results, and talks to the
host through the `_host` door with small JSON messages.

Everything here is guest code: it may be replaced or broken by the user's own code,
so the host validates every message it receives and never trusts this module.
"""

import ast
import builtins
import io
import json
import linecache
import os
import sys
import time

import _host

# base64, tokenize, traceback, uuid and pprint are imported where they are used:
# interpreter start-up pays only for what every cell needs.

_MIME_METHODS = (
    ("_repr_html_", "text/html"),
    ("_repr_markdown_", "text/markdown"),
    ("_repr_svg_", "image/svg+xml"),
    ("_repr_png_", "image/png"),
    ("_repr_jpeg_", "image/jpeg"),
    ("_repr_latex_", "text/latex"),
    ("_repr_json_", "application/json"),
    ("_repr_javascript_", "application/javascript"),
    ("_repr_pdf_", "application/pdf"),
)
_BINARY_MIMES = {"image/png", "image/jpeg", "application/pdf"}
_THIS_FILE = __file__


def call(message):
    """Send one message to the host and return its JSON answer."""
    raw = _host.call(json.dumps(message, default=str).encode())
    return json.loads(raw) if raw else {}


def _flush_streams():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


# --- rich display -----------------------------------------------------------


def _encode(mime, value):
    if mime in _BINARY_MIMES and isinstance(value, (bytes, bytearray, memoryview)):
        import base64

        return base64.b64encode(bytes(value)).decode("ascii")
    if mime == "application/json":
        return value
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    return value if isinstance(value, (str, dict, list)) else str(value)


def _plain(obj):
    try:
        if isinstance(obj, (dict, list, tuple, set, frozenset)):
            import pprint

            return pprint.pformat(obj, width=79, sort_dicts=True)
        return repr(obj)
    except Exception as err:  # a broken __repr__ must not end the cell
        return f"<{type(obj).__name__} object: repr() failed: {err!r}>"


def _warn_repr(name, err):
    print(f"{name} raised {type(err).__name__}: {err}", file=sys.stderr)


def format_bundle(obj, include=None, exclude=None):
    """(data, metadata) for `obj`, as IPython's display formatter builds them."""
    data, metadata = {}, {}
    is_class = isinstance(obj, type)
    bundle = None if is_class else getattr(obj, "_repr_mimebundle_", None)
    if callable(bundle):
        try:
            got = bundle(include=include, exclude=exclude)
        except Exception as err:
            _warn_repr("_repr_mimebundle_", err)
            got = None
        if isinstance(got, tuple) and len(got) == 2:
            got, more = got
            if isinstance(more, dict):
                metadata.update(more)
        if isinstance(got, dict):
            for mime, value in got.items():
                data[str(mime)] = _encode(str(mime), value)
    for method, mime in () if is_class else _MIME_METHODS:
        if mime in data:
            continue
        fn = getattr(obj, method, None)
        if not callable(fn):
            continue
        try:
            value = fn()
        except NotImplementedError:
            continue
        except Exception as err:
            _warn_repr(method, err)
            continue
        if isinstance(value, tuple) and len(value) == 2:
            value, more = value
            if isinstance(more, dict):
                metadata[mime] = more
        if value is None:
            continue
        data[mime] = _encode(mime, value)
    if "text/plain" not in data:
        data["text/plain"] = _plain(obj)
    if include:
        data = {k: v for k, v in data.items() if k in include or k == "text/plain"}
    if exclude:
        data = {k: v for k, v in data.items() if k not in exclude}
    return data, metadata


def _new_id():
    return os.urandom(16).hex()


class DisplayHandle:
    """What `display(..., display_id=...)` returns, as in IPython."""

    def __init__(self, display_id=None):
        self.display_id = display_id or _new_id()

    def __repr__(self):
        return f"<DisplayHandle display_id={self.display_id}>"

    def display(self, obj, **kwargs):
        display(obj, display_id=self.display_id, **kwargs)

    def update(self, obj, **kwargs):
        display(obj, display_id=self.display_id, update=True, **kwargs)


def display(
    *objs,
    include=None,
    exclude=None,
    metadata=None,
    transient=None,
    display_id=None,
    raw=False,
    clear=False,
    update=False,
    **kwargs,
):
    """Show objects as rich output, like IPython.display.display."""
    if clear:
        clear_output(wait=True)
    if display_id is True:
        display_id = _new_id()
    if update and not display_id:
        raise TypeError("display_id required for update")
    _flush_streams()
    for obj in objs:
        if raw:
            data, md = dict(obj), {}
        else:
            data, md = format_bundle(obj, include=include, exclude=exclude)
        if metadata:
            md.update(metadata)
        message = {"op": "display", "data": data, "metadata": md, "update": bool(update)}
        tr = dict(transient or {})
        if display_id:
            tr["display_id"] = str(display_id)
        if tr:
            message["transient"] = tr
        call(message)
    if display_id and not update:
        return DisplayHandle(display_id)
    return None


def update_display(obj, *, display_id, **kwargs):
    display(obj, display_id=display_id, update=True, **kwargs)


def clear_output(wait=False):
    _flush_streams()
    call({"op": "clear_output", "wait": bool(wait)})


# --- matplotlib -------------------------------------------------------------


def show_figures(close=True):
    """Display every open pyplot figure as PNG, as IPython's inline backend does."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    import base64

    for num in plt.get_fignums():
        fig = plt.figure(num)
        buf = io.BytesIO()
        try:
            fig.canvas.print_figure(buf, format="png", bbox_inches="tight")
        except Exception as err:
            _warn_repr("matplotlib figure", err)
            continue
        call(
            {
                "op": "display",
                "data": {
                    "image/png": base64.b64encode(buf.getvalue()).decode("ascii"),
                    "text/plain": f"<Figure size {fig.get_figwidth() * fig.dpi:g}x"
                    f"{fig.get_figheight() * fig.dpi:g} with {len(fig.axes)} Axes>",
                },
                "metadata": {},
                "update": False,
            }
        )
    if close:
        plt.close("all")


# --- input ------------------------------------------------------------------


def _ask(prompt, password):
    _flush_streams()
    answer = call({"op": "input", "prompt": str(prompt), "password": bool(password)})
    if answer.get("ok"):
        return str(answer.get("value", ""))
    if answer.get("error") == "interrupted":
        raise KeyboardInterrupt
    raise EOFError(answer.get("message") or "input() is not available in this sandbox")


def input(prompt=""):
    return _ask(prompt, False)


def getpass(prompt="Password: ", stream=None):
    return _ask(prompt, True)


# --- cells ------------------------------------------------------------------

_history = []  # last three results, for _, __ and ___
_initial_names = {}  # __main__ as the interpreter started: hidden from %who


def remember_initial_names():
    import __main__

    _initial_names.update(__main__.__dict__)


def format_time(seconds, precision=3):
    """A duration as IPython's _format_time writes it: 1.23 ms, 456 ns, 1min 3s."""
    if seconds >= 60.0:
        parts, left = [], seconds
        for suffix, length in (("d", 86400), ("h", 3600), ("min", 60), ("s", 1)):
            value = int(left / length)
            if value > 0:
                left = left % length
                parts.append(f"{value}{suffix}")
            if left < 1:
                break
        return " ".join(parts)
    import math

    order = min(-int(math.floor(math.log10(seconds)) // 3), 3) if seconds > 0.0 else 3
    return "%.*g %s" % (precision, seconds * (1, 1e3, 1e6, 1e9)[order], ("s", "ms", "\xb5s", "ns")[order])


def _ends_with_semicolon(source):
    if ";" not in source.rsplit("\n", 1)[-1] and ";" not in source[-200:]:
        return False  # the common case, without tokenizing
    import tokenize

    try:
        tokens = [
            t
            for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type
            not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.ENDMARKER,
                    tokenize.INDENT, tokenize.DEDENT)
        ]
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return False
    return bool(tokens) and tokens[-1].string == ";"


_SUPPORT_DIR = os.path.dirname(_THIS_FILE) + "/"


def _without_support_frames(err, seen):
    """Drop the frames of our own support code (run_cell, input(), display...) from
    err's traceback and from the exceptions chained to it: the user sees their code."""
    if err is None or id(err) in seen:
        return
    seen.add(id(err))
    kept = []
    tb = err.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(_SUPPORT_DIR):
            kept.append(tb)
        tb = tb.tb_next
    for before, after in zip(kept, kept[1:] + [None]):
        before.tb_next = after
    err.__traceback__ = kept[0] if kept else None
    _without_support_frames(err.__cause__, seen)
    _without_support_frames(err.__context__, seen)


def _user_traceback(err):
    """The traceback lines of the user's code only."""
    import traceback

    if isinstance(err, SyntaxError):
        return traceback.format_exception_only(type(err), err)
    _without_support_frames(err, set())
    return traceback.format_exception(type(err), err, err.__traceback__)


def _result_bundle(value, namespace):
    """The execute_result for `value`, and IPython's _, __ and ___ updated."""
    if value is None:
        return None
    _history.insert(0, value)
    del _history[3:]
    for name, item in zip(("_", "__", "___"), _history):
        namespace[name] = item
    data, metadata = format_bundle(value)
    return {"data": data, "metadata": metadata}


def run_cell(source, filename="<cell>", timed=False):
    """Execute one cell in __main__; the last bare expression is displayed.

    timed: print the cell's wall time afterwards, as IPython's %time does. Only wall
    time: under wasmtime the guest's process_time() is wall time too (it counts
    sleeps), so there is no CPU time to report.
    """
    import __main__

    namespace = __main__.__dict__
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    status, error, exit_code, result = "ok", None, 0, None
    try:
        tree = ast.parse(source, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(source):
            last = ast.Expression(tree.body.pop().value)
        body, last_code = compile(tree, filename, "exec"), None
        if last is not None:
            last_code = compile(last, filename, "eval")
        started = time.perf_counter()
        exec(body, namespace)
        value = None if last_code is None else eval(last_code, namespace)
        if timed:
            print(f"Wall time: {format_time(time.perf_counter() - started)}")
        result = _result_bundle(value, namespace)
        plt = sys.modules.get("matplotlib.pyplot")
        if plt is not None and plt.get_fignums():
            if result is not None:  # the value comes before the figures, as in IPython
                _flush_streams()
                call({"op": "execute_result", **result})
                result = None
            show_figures()
    except SystemExit as err:
        code = err.code
        status = "exit"
        if code is None:
            exit_code = 0
        elif isinstance(code, int):
            exit_code = code
        else:
            print(code, file=sys.stderr)
            exit_code = 1
    except BaseException as err:  # KeyboardInterrupt from input() too
        status = "error"
        error = {
            "ename": type(err).__name__,
            "evalue": str(err),
            "traceback": _user_traceback(err),
        }
    finally:
        _flush_streams()
    message = {"op": "result", "status": status, "exit_code": exit_code}
    if error is not None:
        message["error"] = error
    if result is not None and status == "ok":
        message["execute_result"] = result
    call(message)


def introspect():
    """The introspection module (completion, %who, %timeit...), loaded on first use
    from our own folder by path: loaded at start-up it cost every new sandbox
    ~15 ms of compiling, and imported by name a workspace file of the same name
    (the workspace is first on sys.path) could stand in for it."""
    module = sys.modules.get("_wasm_kernel_introspect")
    if module is None:
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "_wasm_kernel_introspect", _SUPPORT_DIR + "_wasm_kernel_introspect.py"
        )
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


_real_sleep = None


def _sleep(seconds):
    # A progress dot printed without a newline must show before the wait, not after.
    _flush_streams()
    _real_sleep(seconds)


def setup(app_dir="/app"):
    os.chdir(app_dir)
    # As in Jupyter, modules in the notebook's folder (the workspace) are importable.
    if "" not in sys.path:
        sys.path.insert(0, "")
    for fd, name in ((1, "stdout"), (2, "stderr")):
        # Line-buffered: every host call costs ~25 us, and print() writes the text
        # and its newline separately, so write-through doubled the cost of a line.
        # A partial line goes out at the newline, an explicit flush, a sleep or an
        # input() (see _sleep) and the end of the cell.
        stream = io.TextIOWrapper(
            io.BufferedWriter(io.FileIO(fd, "wb", closefd=False), 1 << 16),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    builtins.display = display
    builtins.input = input
    import time as _time_module

    global _real_sleep
    _real_sleep = _time_module.sleep
    _sleep.__doc__ = _real_sleep.__doc__
    _time_module.sleep = _sleep
    import getpass as _getpass_module

    _getpass_module.getpass = getpass
    os.environ.setdefault("MPLBACKEND", "module://_wasm_kernel_mpl_backend")
