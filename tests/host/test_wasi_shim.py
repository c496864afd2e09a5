"""host/wasi_shim.py: the shim is compiled once per engine and process (~5 ms of
Cranelift that a kernel pays on its preflight thread, not in its first boot), even
when the preflight and a guest's boot ask for it at the same moment."""

from __future__ import annotations

import threading

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
