"""Runs inside the WASI guest: the source lines of the built-in libraries' frames.

numpy, pandas, scipy and the rest live in the stdlib zip as bytecode only, so
linecache found no line for `/usr/local/lib/python315.zip/numpy/...py`: tracebacks
showed none, and inspect.getsource raised OSError. The host keeps their sources
(host/library_sources.py, fetched by `wasm-kernel precompile`); linecache asks it for
a file once, when a traceback or inspect first needs it, and keeps the lines.
Nothing changes where the host has none: the frame stays folded, as before.
"""

import linecache

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire

ZIP_ROOT = "/usr/local/lib/python315.zip/"


def install():
    real = linecache.updatecache

    def updatecache(filename, module_globals=None):
        lines = real(filename, module_globals)
        if lines or not isinstance(filename, str) or not filename.startswith(ZIP_ROOT) or not filename.endswith(".py"):
            return lines
        try:
            data = _guest.call_raw({"op": wire.OP_SOURCE, "path": filename[len(ZIP_ROOT):]})
        except Exception:  # a guest without a door (never ours), or one that broke it
            return lines
        if not data:
            return lines
        text = data.decode("utf-8", "replace")
        lines = text.splitlines(keepends=True)
        if lines and not lines[-1].endswith("\n"):
            lines[-1] += "\n"
        # No mtime: checkcache leaves the entry alone (there is no file to stat).
        linecache.cache[filename] = (len(text), None, lines, filename)
        return lines

    updatecache.__doc__ = real.__doc__
    linecache.updatecache = updatecache
