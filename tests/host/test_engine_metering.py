"""The optimized engine per metering (host/engine.py): time metering counts no fuel,
fuel metering does; each is its own engine, fingerprint and compiled module."""

from __future__ import annotations

import pytest
import wasmtime

from wasm_kernel.host import engine as engines

WAT = '(module (func (export "spin") (param i32) (loop $l (br_if $l (local.tee 0 (i32.sub (local.get 0) (i32.const 1)))))))'


def _spin(engine: wasmtime.Engine, fuel: int | None) -> wasmtime.Store:
    store = wasmtime.Store(engine)
    if fuel is not None:
        store.set_fuel(fuel)
    store.set_epoch_deadline(1 << 30)
    instance = wasmtime.Instance(store, wasmtime.Module(engine, WAT), [])
    instance.exports(store)["spin"](store, 1000)  # type: ignore[operator]
    return store


def test_time_metering_counts_no_fuel_and_fuel_metering_does() -> None:
    timed, fueled = engines.get_engine("time"), engines.get_engine("fuel")
    assert timed is not fueled
    assert not engines.counts_fuel(timed) and engines.counts_fuel(fueled)
    with pytest.raises(wasmtime.WasmtimeError):  # a store of an engine without fuel has none to set
        _spin(timed, 10_000)
    _spin(timed, None)  # runs unmetered
    store = _spin(fueled, 1_000_000)
    assert 0 < 1_000_000 - store.get_fuel() < 1_000_000
    with pytest.raises(wasmtime.Trap):  # and stops when it runs out
        _spin(fueled, 100)


def test_each_metering_has_its_own_fingerprint_and_a_bad_name_is_refused() -> None:
    assert engines.config_fingerprint("time") != engines.config_fingerprint("fuel")
    assert "fuel=0" in engines.config_fingerprint("time") and "fuel=1" in engines.config_fingerprint("fuel")
    with pytest.raises(ValueError, match="metering must be one of time, fuel, not 'instructions'"):
        engines.get_engine("instructions")


def test_the_process_metering_is_the_default_until_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engines, "_process_metering", engines.DEFAULT_METERING)
    assert engines.DEFAULT_METERING == "time" and engines.checked_metering(None) == "time"
    engines.set_process_metering("fuel")
    assert engines.checked_metering(None) == "fuel" and engines.get_engine() is engines.get_engine("fuel")
    with pytest.raises(ValueError):
        engines.set_process_metering("nope")
