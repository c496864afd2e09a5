"""A tiny wasm module that lets Python host functions call the real WASI functions.

We shadow some of the guest's WASI imports with Python (stdout streaming, sliced
sleeps, descriptor bookkeeping, the fd_readdir padding fix). A Python function
cannot call wasmtime's WASI implementation directly, because WASI reads the
*calling instance's* exported memory. This shim imports the guest's memory,
re-exports it, and wraps each original import in a wasm function, so calling the
shim's export from Python runs real WASI against the guest's memory.
"""

from __future__ import annotations

import hashlib
import threading
import weakref

import wasmtime

from .cache_dir import cache_root
from .engine import WASMTIME_VERSION, engine_fingerprint
from .module_cache import cache_key, load_module
from .wasmtime_private import IntCall, int_call

WASI = "wasi_snapshot_preview1"

# A WASI function of the shim as runtime code calls it: IntCall, since all of
# FORWARDED take and return i32 and i64 only (Func.__call__ costs 70-170 us a call).
Original = IntCall | wasmtime.Func

# name -> (param count, all i32 except where noted by 'I' for i64)
FORWARDED: dict[str, str] = {
    "fd_write": "iiii",
    "fd_readdir": "iiiIi",
    "path_open": "iiiiiIIii",
    "fd_close": "i",
    "poll_oneoff": "iiii",
    "clock_time_get": "iIi",
    "fd_tell": "ii",
    "fd_seek": "iIii",
    # The notebook folder's union (runtime/notebook_overlay.py).
    "fd_prestat_get": "ii",
    "path_filestat_get": "iiiii",
    "fd_filestat_get": "ii",  # what the overlay's open really opened (its inode)
    "path_readlink": "iiiiii",
    "path_rename": "iiiiii",
    "path_create_directory": "iii",
    "path_unlink_file": "iii",
    "path_remove_directory": "iii",
    "path_symlink": "iiiii",
    "path_link": "iiiiiii",
    "path_filestat_set_times": "iiiiIIi",
    # The disk quota (runtime/disk_quota.py).
    "fd_pwrite": "iiiIi",
    "fd_allocate": "iII",
    "fd_filestat_set_size": "iI",
    "fd_filestat_get": "ii",
    "fd_fdstat_get": "ii",
    # A resumed state's descriptor placeholders (runtime/hibernation.py).
    "fd_renumber": "ii",
    # The guest's /dev (runtime/guest_devices.py).
    "fd_read": "iiii",
    "fd_pread": "iiiIi",
    "random_get": "ii",
}

_WAT_TYPE = {"i": "i32", "I": "i64"}


def shim_wat() -> str:
    imports = []
    funcs = []
    for name, sig in FORWARDED.items():
        params = " ".join(_WAT_TYPE[c] for c in sig)
        imports.append(
            f'(import "{WASI}" "{name}" (func ${name} (param {params}) (result i32)))'
        )
        gets = " ".join(f"(local.get {i})" for i in range(len(sig)))
        funcs.append(
            f'(func (export "{name}") (param {params}) (result i32) (call ${name} {gets}))'
        )
    return "\n".join(
        [
            "(module",
            *imports,
            '(import "env" "memory" (memory 0))',
            '(export "memory" (memory 0))',
            *funcs,
            ")",
        ]
    )


# By the engine itself, held weakly: a key of id(engine) outlived its engine, and a new
# engine at the same address got the old one's module ("cross-Engine instantiation").
_modules: weakref.WeakKeyDictionary[wasmtime.Engine, wasmtime.Module] = weakref.WeakKeyDictionary()
_modules_lock = threading.Lock()


def shim_module(engine: wasmtime.Engine) -> wasmtime.Module:
    """The shim for `engine`, once per process: from the compile cache for this
    process's own engines (compiling it took ~5 ms of Cranelift on both cores, in
    every kernel's start), compiled in memory for any other engine."""
    with _modules_lock:
        module = _modules.get(engine)
        if module is None:
            module = _modules[engine] = _cached_or_compiled(engine)
        return module


def _cached_or_compiled(engine: wasmtime.Engine) -> wasmtime.Module:
    wat = shim_wat()
    fingerprint = engine_fingerprint(engine)
    if fingerprint is None:
        return wasmtime.Module(engine, wat)
    key = cache_key(WASMTIME_VERSION, fingerprint, hashlib.sha256(wat.encode()).hexdigest())
    return load_module(key, cache_root() / "modules" / f"wasi-shim-{key}.cwasm", lambda: wasmtime.wat2wasm(wat),
                       engine=engine)


def instantiate_shim(
    store: wasmtime.Store, engine: wasmtime.Engine, memory: wasmtime.Memory
) -> dict[str, Original]:
    """The shim bound to `memory`: a dict of the original WASI functions by name."""
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    linker.define(store, "env", "memory", memory)
    instance = linker.instantiate(store, shim_module(engine))
    exports = instance.exports(store)
    return {name: int_call(store, exports[name]) for name in FORWARDED}  # type: ignore[arg-type]
