"""host/thread_stop.py: a thread running wasm is made to trap at its next memory
access, wherever it is, with no epoch or fuel instrumentation in its code; a thread
in host code is never faulted there (that would crash the process)."""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import wasmtime

from wasm_kernel.host import thread_stop
from wasm_kernel.host.thread_stop import protect, stop_thread, wasm_code_ranges

pytestmark = pytest.mark.skipif(
    thread_stop.unavailable_reason() is not None, reason=f"no stops by trap here: {thread_stop.unavailable_reason()}"
)

# A counter in memory, forever: every iteration loads and stores.
COUNTING = """(module (memory (export "memory") 1)
  (func (export "run") (loop (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (i32.const 1))) (br 0))))"""
# memory.fill of a MiB, forever: nearly all of its time is in wasmtime's own fill
# (host code), where a fault would kill the process. (Between fills it stores once,
# as every loop of CPython's does: wasm code that touches no memory cannot be made
# to trap this way, and is only ever a leaf loop that ends.)
FILLING = """(module (memory (export "memory") 16)
  (func (export "run") (loop (memory.fill (i32.const 0) (i32.const 7) (i32.const 1048576))
                             (i32.store (i32.const 0) (i32.const 1)) (br 0))))"""
# Host calls, forever: the thread is in Python most of the time.
CALLING = """(module (import "host" "tick" (func $tick)) (memory (export "memory") 1)
  (func (export "run") (loop (call $tick) (i32.store (i32.const 0) (i32.const 1)) (br 0))))"""
# Six functions calling each other 600 deep and back, then WASI stats of "." forever:
# the thread waits in wasmtime's WASI nearly all the time, and the chain's return
# addresses are left in the stack memory that call's frames cover, more of them below
# the live return address than there are debug registers.
_CHAIN = "\n".join(
    f"""(func $f{i} (param i32) (result i32) (local i64 i64 i64 i64 i64 i64 i64 i64)
      (if (result i32) (i32.eqz (local.get 0)) (then (i32.const 0))
        (else (i32.add (call $f{(i + 1) % 6} (i32.sub (local.get 0) (i32.const 1))) (i32.const {i})))))"""
    for i in range(6))
STATTING_UNDER_A_DEEP_PAST = f"""(module
  (import "wasi_snapshot_preview1" "path_filestat_get" (func $stat (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1) (data (i32.const 16) ".") {_CHAIN}
  (func (export "run") (i32.store (i32.const 0) (call $f0 (i32.const 600)))
    (loop (i32.store (i32.const 4) (call $stat (i32.const 3) (i32.const 0) (i32.const 16) (i32.const 1) (i32.const 64)))
          (br 0))))"""


def _engine() -> wasmtime.Engine:
    config = wasmtime.Config()
    config.epoch_interruption = False  # nothing in the code checks for a stop
    return wasmtime.Engine(config)


class Running:
    """A module's `run` on a thread of its own; the call's error once it returns."""

    def __init__(self, wat: str, tmp: Path, host_tick: Callable[[], None] | None = None, wasi: bool = False) -> None:
        engine = _engine()
        compiled = tmp / "module.cwasm"
        compiled.write_bytes(wasmtime.Module(engine, wat).serialize())
        # From its file, as the product loads a cached module: its code is a .cwasm mapping.
        self.module = wasmtime.Module.deserialize_file(engine, str(compiled))
        self.store = wasmtime.Store(engine)
        if wasi:  # wasmtime's own WASI, with `tmp` as its first preopen (descriptor 3)
            config = wasmtime.WasiConfig()
            config.preopen_dir(str(tmp), "/")
            self.store.set_wasi(config)
            linker = wasmtime.Linker(engine)
            linker.define_wasi()
            instance = linker.instantiate(self.store, self.module)
        else:
            imports = []
            if host_tick is not None:
                imports.append(wasmtime.Func(self.store, wasmtime.FuncType([], []), host_tick))
            instance = wasmtime.Instance(self.store, self.module, imports)
        exports = instance.exports(self.store)
        self.memory = exports["memory"]
        self.run = exports["run"]
        self.error: BaseException | None = None
        self.tid = 0
        started = threading.Event()

        def body() -> None:
            self.tid = threading.get_native_id()
            started.set()
            try:
                self.run(self.store)
            except BaseException as err:  # noqa: BLE001 - the trap is the result
                self.error = err

        self.thread = threading.Thread(target=body, daemon=True)
        self.thread.start()
        started.wait()
        time.sleep(0.2)

    def stop(self) -> bool:
        base = ctypes.addressof(self.memory.data_ptr(self.store).contents)
        size = self.memory.data_len(self.store)
        return stop_thread(
            self.tid, wasm_code_ranges(),
            protect_memory=lambda: (protect(base, size, accessible=False), True)[1],
            unprotect_memory=lambda: protect(base, size, accessible=True),
            still_running=self.thread.is_alive,
        )


def test_a_loop_over_memory_traps_at_its_next_access_and_the_store_is_usable_after(tmp_path: Path) -> None:
    running = Running(COUNTING, tmp_path)
    assert running.stop()
    running.thread.join(5)
    assert not running.thread.is_alive()
    assert isinstance(running.error, wasmtime.Trap), running.error
    counted = int.from_bytes(running.memory.read(running.store, 0, 4), "little")
    assert counted > 0  # the memory is readable again, with what the loop wrote


def test_a_thread_living_in_memory_fill_is_never_faulted_in_host_code(tmp_path: Path) -> None:
    # Without the tracer's look at where the thread is, protecting memory while it
    # is inside wasmtime's fill kills this process (a fault outside wasm code).
    running = Running(FILLING, tmp_path)
    assert running.stop()
    running.thread.join(5)
    assert isinstance(running.error, wasmtime.Trap), running.error


def test_a_thread_living_in_python_host_calls_is_stopped_between_them(tmp_path: Path) -> None:
    calls = []
    running = Running(CALLING, tmp_path, host_tick=lambda: calls.append(1))
    assert running.stop()
    running.thread.join(5)
    assert isinstance(running.error, wasmtime.Trap), running.error
    assert calls


def test_a_thread_waiting_in_wasi_under_stale_return_addresses_is_stopped_as_a_call_returns(tmp_path: Path) -> None:
    # The first words into wasm above its stack pointer are stale ones: breakpoints on
    # those alone never fire, and the thread, almost never in wasm code when looked
    # at, outlasted every attempt (a storm's cell of os.stat calls took up to 30 s to
    # stop). Each look at the same call now arms the next candidates.
    running = Running(STATTING_UNDER_A_DEEP_PAST, tmp_path, wasi=True)
    assert running.thread.is_alive(), running.error
    assert running.stop()  # within one attempt (ATTEMPT_SECONDS): no retry by the caller
    running.thread.join(5)
    assert isinstance(running.error, wasmtime.Trap), running.error


def test_a_stop_for_a_turn_that_ended_is_given_up_without_touching_memory(tmp_path: Path) -> None:
    running = Running(COUNTING, tmp_path)
    protected: list[bool] = []
    ended = threading.Event()
    ended.set()  # as if the turn had ended before the tracer looked
    assert not stop_thread(
        running.tid, wasm_code_ranges(),
        protect_memory=lambda: protected.append(True) or True,
        unprotect_memory=lambda: None,
        still_running=lambda: not ended.is_set(),
    )
    assert not protected
    assert running.stop()  # the thread was let go, and still runs until stopped
    running.thread.join(5)


def test_wasm_code_ranges_hold_a_loaded_modules_code_and_no_shared_library(tmp_path: Path) -> None:
    engine = _engine()
    path = tmp_path / "m.cwasm"
    path.write_bytes(wasmtime.Module(engine, COUNTING).serialize())
    module = wasmtime.Module.deserialize_file(engine, str(path))
    mapped = [line for line in Path("/proc/self/maps").read_text().splitlines()
              if line.endswith(str(path)) and "x" in line.split()[1]]
    assert mapped, "the module's code is mapped from its file"
    lo = int(mapped[0].split()[0].split("-")[0], 16)
    ranges = wasm_code_ranges()
    assert any(a <= lo < b for a, b in ranges)
    libc_getpid = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value
    assert not any(a <= libc_getpid < b for a, b in ranges)
    del module


def test_a_stop_that_fails_on_our_side_lets_the_thread_go_cleanly(tmp_path: Path) -> None:
    # Mostly in host code: the tracer holds it at breakpoints. Stopped answering, the
    # tracer must clear its breakpoint and detach without leaving the thread a SIGTRAP
    # (which would kill this process) before it exits.
    running = Running(FILLING, tmp_path)

    def refuse() -> bool:
        raise OSError("cannot protect now")

    for _ in range(3):
        with pytest.raises(OSError):
            stop_thread(running.tid, wasm_code_ranges(), protect_memory=refuse,
                        unprotect_memory=lambda: None, still_running=running.thread.is_alive)
    time.sleep(0.3)
    assert running.thread.is_alive()
    assert running.stop()
    running.thread.join(5)


def test_a_probe_started_ahead_runs_once_on_its_own_thread_and_answers_the_first_question(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = thread_stop._probe
    seen: list[str] = []

    def probe() -> str | None:
        seen.append(threading.current_thread().name)
        return real()

    monkeypatch.setattr(thread_stop, "_probed", [])
    monkeypatch.setattr(thread_stop, "_probe", probe)
    thread_stop.start_probe()
    deadline = time.monotonic() + 10
    while not seen and time.monotonic() < deadline:
        time.sleep(0.001)
    answer = thread_stop.unavailable_reason()  # waits for the running probe, then reads its answer
    thread_stop.start_probe()  # answered: no second probe
    assert seen == ["wasm-kernel-stop-probe-start"]
    assert answer == thread_stop._probed[0]
