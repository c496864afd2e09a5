"""Compiled-module cache: compile the guest once, then map it in ~10 ms.

The cache file name is a digest of everything that changes the compiled code: the
wasmtime version, the engine configuration, our patch of the module and the
artifact's own hash. A file that wasmtime refuses (another version, a truncated
write, garbage) is compiled again and replaced, never crashed on.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from .log import get_logger
import wasmtime

from .artifacts import guest_artifacts
from .cache_dir import cache_root
from .engine import (
    BASELINE_FINGERPRINT,
    WASMTIME_VERSION,
    checked_metering,
    config_fingerprint,
    get_baseline_engine,
    get_engine,
)
from .wasm_binary import patch_guest_module
from .work_meter import Progress, metered

log = get_logger("wasm_kernel.host")

# Bump when patch_guest_module changes what it produces.
PATCH_VERSION = "globals-1+interrupt-1"


_memo: dict[str, wasmtime.Module] = {}
_memo_lock = threading.Lock()


def cache_key(*parts: str) -> str:
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def guest_cache_key(baseline: bool = False, metering: str | None = None) -> str:
    """The compiled guest's key: for the baseline engine, or the optimized engine of
    `metering` (this process's when None)."""
    art = guest_artifacts()
    config = BASELINE_FINGERPRINT if baseline else config_fingerprint(metering)
    return cache_key(WASMTIME_VERSION, config, PATCH_VERSION, art.snapshot_sha256)


def guest_module_key() -> str:
    """What the guest's wasm state depends on, whichever compiler runs it: the module
    and its patch (a warm image made on one engine serves the other)."""
    return cache_key(WASMTIME_VERSION, PATCH_VERSION, guest_artifacts().snapshot_sha256)


def guest_cache_path(baseline: bool = False, metering: str | None = None) -> Path:
    prefix = "python-baseline" if baseline else f"python-{checked_metering(metering)}"
    return cache_root() / "modules" / f"{prefix}-{guest_cache_key(baseline, metering)}.cwasm"


def is_guest_cached(baseline: bool = False, metering: str | None = None) -> bool:
    return guest_cache_key(baseline, metering) in _memo or guest_cache_path(baseline, metering).is_file()


def load_guest_module(progress: Progress | None = None, *, baseline: bool = False,
                      metering: str | None = None) -> wasmtime.Module:
    """The patched CPython reactor, compiled for the optimized engine of `metering`
    (this process's when None), or for the baseline one."""
    art = guest_artifacts()
    return load_module(
        guest_cache_key(baseline, metering),
        guest_cache_path(baseline, metering),
        lambda: patch_guest_module(art.snapshot.read_bytes()),
        progress=progress,
        step="compile-baseline" if baseline else "compile-optimized",
        engine=get_baseline_engine() if baseline else get_engine(metering),
    )


def read_cached_guest(metering: str | None = None) -> bool:
    """Read the optimized engine's compiled guest from the cache into this process's
    memo, never compiling: False when there is no file wasmtime accepts (the
    sandbox's start then compiles it, and shows its progress)."""
    with _memo_lock:
        return _remembered(guest_cache_key(False, metering), guest_cache_path(False, metering),
                           get_engine(metering)) is not None


def load_module(
    key: str,
    path: Path,
    wasm: Callable[[], bytes],
    *,
    progress: Progress | None = None,
    step: str = "module",  # the name its measured cost is recorded under (host/work_meter.py)
    engine: wasmtime.Engine | None = None,
) -> wasmtime.Module:
    """From this process's memo, else the cache file at `path`, else compiled and stored."""
    with _memo_lock:
        engine = engine or get_engine()
        module = _remembered(key, path, engine)
        if module is None:
            module = _memo[key] = _compile(engine, wasm(), progress, step)
            _store(module, path)
        return module


def _remembered(key: str, path: Path, engine: wasmtime.Engine) -> wasmtime.Module | None:
    """The module of `key` from this process's memo, else from its cache file (then
    memoised); None if neither has it. Call with _memo_lock held."""
    module = _memo.get(key)
    if module is None:
        module = _deserialize(engine, path)
        if module is not None:
            _memo[key] = module
    return module


def _deserialize(engine: wasmtime.Engine, path: Path) -> wasmtime.Module | None:
    try:
        st = path.lstat()
    except FileNotFoundError:
        return None
    # Native code from disk: load only a plain file of ours that nobody else can write.
    if not path.is_file() or path.is_symlink() or st.st_uid != os.getuid() or st.st_mode & 0o022:
        log.warning("module_cache.refused", path=str(path))
        return None
    try:
        return wasmtime.Module.deserialize_file(engine, str(path))
    except (wasmtime.WasmtimeError, OSError) as err:
        log.warning("module_cache.stale", path=str(path), error=str(err).splitlines()[0])
        return None


def _compile(engine: wasmtime.Engine, wasm: bytes, progress: Progress | None, step: str) -> wasmtime.Module:
    log.info("module_cache.compile", bytes=len(wasm))
    # One blocking call with no progress of its own: its CPU time is the measure.
    return metered(step, lambda: wasmtime.Module(engine, wasm), progress)


def _store(module: wasmtime.Module, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".cwasm-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(module.serialize())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        log.warning("module_cache.unwritable", path=str(path), error=str(err))
