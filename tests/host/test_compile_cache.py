"""The compiled-module cache: keyed, reused, and recompiled instead of crashing on
a stale or corrupt entry. Uses a tiny module so no test pays the guest's compile."""

import os
from pathlib import Path

import pytest
import wasmtime

from wasm_kernel.host import module_cache
from wasm_kernel.host.engine import get_engine
from wasm_kernel.host.module_cache import cache_key, guest_cache_key, load_module
from wasm_kernel.host.work_meter import WorkProgress

WAT = '(module (func (export "answer") (result i32) i32.const 42))'


def _wasm() -> bytes:
    return wasmtime.wat2wasm(WAT)


def _answer(module: wasmtime.Module) -> int:
    store = wasmtime.Store(get_engine())
    store.set_epoch_deadline(1 << 30)
    return int(wasmtime.Instance(store, module, []).exports(store)["answer"](store))  # type: ignore[operator]


@pytest.fixture(autouse=True)
def _fresh_memo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module_cache, "_memo", {})


def test_first_load_compiles_and_stores_then_the_file_is_reused(tmp_path: Path) -> None:
    path = tmp_path / "m.cwasm"
    compiled: list[int] = []

    def wasm() -> bytes:
        compiled.append(1)
        return _wasm()

    assert _answer(load_module("k1", path, wasm)) == 42
    assert path.is_file() and oct(path.stat().st_mode & 0o777) == "0o600"
    module_cache._memo.clear()
    assert _answer(load_module("k1", path, wasm)) == 42
    assert compiled == [1]


def test_a_corrupt_cache_file_is_recompiled_not_crashed_on(tmp_path: Path) -> None:
    path = tmp_path / "m.cwasm"
    path.write_bytes(b"garbage, not a serialized module")
    os.chmod(path, 0o600)
    assert _answer(load_module("k2", path, _wasm)) == 42
    assert path.read_bytes() != b"garbage, not a serialized module"


def test_a_cache_file_others_can_write_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "m.cwasm"
    load_module("k3", path, _wasm)
    module_cache._memo.clear()
    os.chmod(path, 0o666)
    compiled: list[int] = []

    def wasm() -> bytes:
        compiled.append(1)
        return _wasm()

    assert _answer(load_module("k3", path, wasm)) == 42
    assert compiled == [1]


def test_progress_is_reported_while_compiling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))  # its measured cost is recorded there
    seen: list[WorkProgress] = []
    load_module("k4", tmp_path / "m.cwasm", _wasm, progress=seen.append, step="test-tiny-module")
    assert seen and seen[-1].done and not any(r.done for r in seen[:-1])  # the final call says "done"
    assert seen[0].percent < 100 and seen[-1].percent == 100


def test_the_guest_key_covers_wasmtime_version_config_and_artifact(monkeypatch: pytest.MonkeyPatch) -> None:
    base = guest_cache_key()
    monkeypatch.setattr(module_cache, "WASMTIME_VERSION", "0.0.0")
    assert guest_cache_key() != base
    monkeypatch.undo()
    # Each metering is its own module (fuel changes the code), and so its own key and file.
    assert guest_cache_key(metering="fuel") != guest_cache_key(metering="time")
    assert module_cache.guest_cache_path(metering="fuel") != module_cache.guest_cache_path(metering="time")
    assert cache_key("a", "b") != cache_key("a", "c")


def test_cache_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from wasm_kernel.host.cache_dir import cache_root

    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    assert cache_root() == tmp_path / "cache"
    assert oct((tmp_path / "cache").stat().st_mode & 0o777) == "0o700"


def test_staging_the_runtime_again_never_replaces_a_tree_a_guest_may_be_using(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two first starts on one empty cache: the second saw half of the tree staged and
    # staged again. It used to remove the first's lib folder, which that guest was
    # booting from ("No such file or directory: '/usr/local/lib/python315.zip'").
    from wasm_kernel.host.artifacts import _stage, guest_artifacts, runtime_tree

    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    tree = runtime_tree.__wrapped__()  # not this process's memo: the tree in this cache
    lib_before, mpl_before = tree.lib_dir.stat().st_ino, tree.mpl_data_dir.stat().st_ino
    _stage(guest_artifacts(), tree.lib_dir.parent, tree.lib_dir, tree.mpl_data_dir)
    assert tree.lib_dir.stat().st_ino == lib_before and tree.mpl_data_dir.stat().st_ino == mpl_before
    assert (tree.lib_dir / tree.zip_name).is_file()
    # An incomplete part (a lib folder without its zip) is replaced by a whole one.
    (tree.lib_dir / tree.zip_name).unlink()
    assert (runtime_tree.__wrapped__().lib_dir / tree.zip_name).is_file()
    assert not any(p.name.startswith(".stage-") for p in tree.lib_dir.parent.iterdir())
