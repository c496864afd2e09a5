"""The WASI functions we shadow, exercised through a small wasm module.

fd_readdir: wasmtime 49.0.0 (GHSA-96f6-r43r-8c24) copies up to three bytes of
uninitialised host memory into each dirent's padding. Our shadow zeroes them. And
wasmtime lists the folder from its start for every call, so the shadow reads the
listing once, in large calls, and answers libc's small ones from it: the same
entries, cookies and cut entries as wasmtime's own.
"""

import struct
from pathlib import Path

import pytest
import wasmtime

from wasm_kernel.host.engine import get_engine
from wasm_kernel.host.guest_memory import GuestMemory
from wasm_kernel.host.wasi_shim import Original, instantiate_shim
from wasm_kernel.runtime.disk_quota import DiskQuota
from wasm_kernel.runtime.fd_ledger import FdLedger
from wasm_kernel.runtime.wasi_shadows import READDIR_SCRATCH_BYTES, ReaddirListings, define_shadows, zero_dirent_padding

BUF, BUF_LEN, USED, SCRATCH = 1024, 16384, 16, 65536
WAT = f"""(module
  (import "wasi_snapshot_preview1" "fd_readdir" (func $rd (param i32 i32 i32 i64 i32) (result i32)))
  (memory (export "memory") {(SCRATCH + READDIR_SCRATCH_BYTES) // 65536})
  (func (export "fill") (memory.fill (i32.const {BUF}) (i32.const 0xAA) (i32.const {BUF_LEN})))
  (func (export "readdir") (param i32 i32 i64) (result i32)
    (call $rd (local.get 0) (i32.const {BUF}) (local.get 1) (local.get 2) (i32.const {USED}))))"""


class _Ctx:
    def __init__(self) -> None:
        self.ledger = FdLedger(range(3, 4))
        self.output = None
        self.overlay = None
        self.originals: dict[str, Original] = {}
        self.quota = DiskQuota([])  # no limits: the quota's shadows step aside
        self.quota_scratch = 0
        self.readdir_scratch = 0
        self.listings = ReaddirListings()
        self.dev_fd = -1  # no /dev here

    def stop_requested(self) -> bool:
        return False

    def stop_soon(self) -> None:
        pass


def _instance(directory: Path, shadowed: bool, scratch: bool = False) -> tuple[wasmtime.Store, dict[str, object]]:
    engine = get_engine()
    store = wasmtime.Store(engine)
    store.set_epoch_deadline(1 << 30)
    wasi = wasmtime.WasiConfig()
    wasi.preopen_dir(str(directory), "/d", False)
    store.set_wasi(wasi)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    ctx = _Ctx()
    if shadowed:
        define_shadows(linker, ctx)  # type: ignore[arg-type]
    if scratch:
        ctx.readdir_scratch = SCRATCH
    instance = linker.instantiate(store, wasmtime.Module(engine, WAT))
    exports = dict(instance.exports(store))
    memory = exports["memory"]
    ctx.mem = GuestMemory(memory)  # type: ignore[attr-defined,arg-type]
    ctx.originals = instantiate_shim(store, engine, memory)  # type: ignore[arg-type]
    return store, exports


def _read_dirents(directory: Path, shadowed: bool) -> tuple[list[tuple[str, bytes]], int]:
    store, exports = _instance(directory, shadowed)
    memory = exports["memory"]
    exports["fill"](store)  # type: ignore[operator]
    assert exports["readdir"](store, 3, BUF_LEN, 0) == 0  # type: ignore[operator]
    data = memory.read(store, 0, BUF + BUF_LEN)  # type: ignore[union-attr]
    used = struct.unpack_from("<I", data, USED)[0]
    entries, off = [], BUF
    while off + 24 <= BUF + used:
        namlen = struct.unpack_from("<I", data, off + 16)[0]
        entries.append((bytes(data[off + 24 : off + 24 + namlen]).decode(), bytes(data[off + 21 : off + 24])))
        off += 24 + namlen
    return entries, used


@pytest.fixture
def many_names(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    d.mkdir()
    for i in range(60):
        (d / ("n" * (1 + i % 9) + str(i))).write_text("x")
    return d


def test_readdir_padding_bytes_are_zero_through_our_shadow(many_names: Path) -> None:
    entries, used = _read_dirents(many_names, shadowed=True)
    names = {n for n, _ in entries}
    assert {p.name for p in many_names.iterdir()} <= names
    assert all(pad == b"\0\0\0" for _, pad in entries)
    assert used > 0


def test_zero_dirent_padding_handles_a_truncated_last_entry() -> None:
    entry = b"\x01" * 16 + struct.pack("<I", 3) + b"\x04" + b"\xee\xee\xee" + b"abc"
    buf = bytearray(entry + entry[:23])  # second header cut inside its padding
    zero_dirent_padding(memoryview(buf), len(buf))
    assert buf[21:24] == b"\0\0\0"
    assert buf[len(entry) + 21 : len(entry) + 23] == b"\0\0"
    assert buf[24:27] == b"abc"


def _whole_listing(directory: Path, scratch: bool, buf_len: int) -> list[bytes]:
    """Every entry, read as wasi-libc reads a folder: calls of buf_len bytes, each from
    the cookie of the last whole entry, until a call fills less than its buffer."""
    store, exports = _instance(directory, shadowed=True, scratch=scratch)
    memory = exports["memory"]
    entries: list[bytes] = []
    cookie = 0
    while True:
        assert exports["readdir"](store, 3, buf_len, cookie) == 0  # type: ignore[operator]
        data = memory.read(store, 0, BUF + buf_len)  # type: ignore[union-attr]
        used = struct.unpack_from("<I", data, USED)[0]
        off = BUF
        while off + 24 <= BUF + used:
            namlen = struct.unpack_from("<I", data, off + 16)[0]
            if off + 24 + namlen > BUF + used:
                break
            entry = bytes(data[off : off + 24 + namlen])
            entries.append(entry)
            cookie = struct.unpack_from("<Q", entry)[0]
            off += 24 + namlen
        if used < buf_len:
            return entries


@pytest.mark.parametrize("count,buf_len", [(2500, 4096), (300, 300)])
def test_a_large_folder_reads_the_same_through_the_listing_cache(tmp_path: Path, count: int, buf_len: int) -> None:
    # 2,500 names of up to 200 bytes: about 280 KB of entries, more than one scratch
    # read; 300-byte calls cut an entry at nearly every call.
    d = tmp_path / "d"
    d.mkdir()
    for i in range(count):
        (d / (f"{i:05d}" + "x" * (i % 195))).touch()
    cached, plain = _whole_listing(d, True, buf_len), _whole_listing(d, False, buf_len)
    assert cached == plain
    assert len(cached) == count + 2 and all(e[21:24] == b"\0\0\0" for e in cached)


def test_a_listing_started_again_sees_what_changed(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "a").touch()
    store, exports = _instance(d, shadowed=True, scratch=True)
    assert exports["readdir"](store, 3, BUF_LEN, 0) == 0  # type: ignore[operator]
    (d / "b").touch()
    assert exports["readdir"](store, 3, BUF_LEN, 0) == 0  # type: ignore[operator]
    data = exports["memory"].read(store, BUF, BUF + 200)  # type: ignore[union-attr]
    assert b"b" in bytes(data)


@pytest.mark.slow
def test_a_listing_never_fails_while_another_writer_churns_the_folder(tmp_path: Path) -> None:
    # wasmtime fails a whole fd_readdir with ENOENT when an entry it listed is gone
    # before it looks at it; os.listdir of a folder another kernel (or the drive) is
    # changing then failed about one time in six. ipykernel's never does.
    import threading

    from wasm_kernel import create_sandbox

    (tmp_path / "churn").mkdir()
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            path = tmp_path / "churn" / f"f{i % 50}"
            path.write_text("x")
            path.unlink()
            i += 1

    with create_sandbox(workspace=tmp_path) as sandbox:
        writer = threading.Thread(target=churn)
        writer.start()
        try:
            result = sandbox.execute(
                "import os\nfailed = 0\nfor i in range(1500):\n"
                "    try:\n        os.listdir('churn')\n    except OSError:\n        failed += 1\nprint(failed)")
        finally:
            stop.set()
            writer.join()
    assert result.stdout.strip() == "0", result.stdout
