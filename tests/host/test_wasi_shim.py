"""host/wasi_shim.py: the shim is made once per engine and process, even when the
kernel's preflight and a guest's boot ask for it at the same moment, and for our own
engines it comes from the compile cache (compiling it was ~5 ms of every start)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import wasmtime

from wasm_kernel.host import wasi_shim


def test_the_shim_is_compiled_once_per_engine_even_when_asked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = wasmtime.Engine()
    compiled: list[int] = []
    real = wasmtime.Module

    def counting_module(eng: wasmtime.Engine, wat: str) -> wasmtime.Module:
        compiled.append(id(eng))
        return real(eng, wat)

    monkeypatch.setattr(wasi_shim.wasmtime, "Module", counting_module)
    got: list[wasmtime.Module] = []
    threads = [threading.Thread(target=lambda: got.append(wasi_shim.shim_module(engine))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert compiled == [id(engine)]
    assert all(m is got[0] for m in got)
    other = wasmtime.Engine()
    assert wasi_shim.shim_module(other) is not got[0] and compiled == [id(engine), id(other)]


def test_the_shim_of_our_engine_comes_from_the_compile_cache_in_the_next_process(tmp_path: Path) -> None:
    """Compiled once per machine and wasmtime, engine configuration and shim: the
    next process maps it, and compiles nothing."""
    probe = (
        "import wasmtime\n"
        "from wasm_kernel.host import engine, wasi_shim\n"
        "eng = engine.get_engine()\n"
        "if {forbid}:\n"
        "    def no_compile(*a, **k):\n"
        "        raise AssertionError('compiled again')\n"
        "    wasmtime.Module.__init__ = no_compile\n"
        "print(type(wasi_shim.shim_module(eng)).__name__)\n"
    )
    env = {**os.environ, "WASM_KERNEL_CACHE_DIR": str(tmp_path / "cache")}
    for forbid in (False, True):
        out = subprocess.run([sys.executable, "-c", probe.format(forbid=forbid)], env=env, capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "Module", out.stderr[-2000:]
    assert len(list((tmp_path / "cache" / "modules").glob("wasi-shim-*.cwasm"))) == 1


def test_every_forwarded_wasi_function_gets_the_fast_caller_and_answers_as_func_does(tmp_path: Path) -> None:
    """The runtime calls these many times a cell: none may fall back to Func.__call__
    (70-170 us a call), and the answers are wasmtime's own."""
    from wasm_kernel.host.wasmtime_private import IntCall

    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    wasi = wasmtime.WasiConfig()
    (tmp_path / "f.txt").write_text("x")
    wasi.preopen_dir(str(tmp_path), "/d", False)
    store.set_wasi(wasi)
    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(1, None)))
    originals = wasi_shim.instantiate_shim(store, engine, memory)
    assert set(originals) == set(wasi_shim.FORWARDED)
    assert all(isinstance(f, IntCall) for f in originals.values())
    memory.write(store, b"f.txt", 0)
    linker = wasmtime.Linker(engine)  # the same shim's exports, left as wasmtime-py's Func
    linker.define_wasi()
    linker.define(store, "env", "memory", memory)
    slow = linker.instantiate(store, wasi_shim.shim_module(engine)).exports(store)
    # path_open (i64 rights among i32s): the file opens at the same errno either way.
    for fn in (originals["path_open"], slow["path_open"]):
        assert fn(store, 3, 0, 0, 5, 0, 2, 2, 0, 64) == 0  # type: ignore[operator]
    assert originals["fd_close"](store, 999) == slow["fd_close"](store, 999) == 8  # EBADF


def test_a_shim_module_is_kept_no_longer_than_its_engine() -> None:
    # Keyed by id(engine), a dead engine's module stayed, and a new engine born at the
    # same address was handed it: "cross-`Engine` instantiation is not currently supported".
    import gc

    engine = wasmtime.Engine()
    wasi_shim.shim_module(engine)
    assert engine in wasi_shim._modules
    held = len(wasi_shim._modules)
    del engine
    gc.collect()
    assert len(wasi_shim._modules) == held - 1
    fresh = wasmtime.Engine()
    store = wasmtime.Store(fresh)
    store.set_wasi(wasmtime.WasiConfig())
    memory = wasmtime.Memory(store, wasmtime.MemoryType(wasmtime.Limits(1, None)))
    assert set(wasi_shim.instantiate_shim(store, fresh, memory)) == set(wasi_shim.FORWARDED)
