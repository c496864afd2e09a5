"""The guest's /dev (runtime/guest_devices.py): null, zero, random, urandom, stdout
and stderr behave as on Linux, which the host's own Python is the oracle for, and
they keep behaving so across a rolled-back cell and under the disk quota, which they never touch."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.sandboxes import fresh_guest
from support.unprivileged import run_unprivileged
from wasm_kernel.runtime.guest_config import TurnLimits
from wasm_kernel.runtime.provisioning import new_guest
from wasm_kernel.runtime.python_guest import PythonGuest

LIMITS = TurnLimits(disk_max_bytes=1 << 30, disk_max_files=100_000)

# Each line prints what the same code prints on Linux.
PROGRAM = r"""
import os, stat
print(os.devnull, os.path.exists(os.devnull), os.path.isfile(os.devnull))
with open(os.devnull, "w") as f:
    print(f.write("x" * 100_000), f.write(""))
with open(os.devnull, "ab") as f:
    print(f.write(b"y" * 10))
print(repr(open(os.devnull).read()), repr(open(os.devnull, "rb").read(10)))
fd = os.open(os.devnull, os.O_RDWR)
print(os.write(fd, b"abc"), os.read(fd, 5), os.pwrite(fd, b"zz", 7))
os.close(fd)
with open("/dev/zero", "rb") as f:
    print(f.read(5), len(f.read(70_000)), set(f.read(3000)))
with open("/dev/urandom", "rb") as u, open("/dev/random", "rb") as r:
    a, b = u.read(64), r.read(64)
    print(len(a), len(b), a != b, len(set(a)) > 8)
for name in ("null", "zero", "random", "urandom"):
    print(name, stat.S_ISCHR(os.stat(f"/dev/{name}").st_mode), stat.S_ISREG(os.stat(f"/dev/{name}").st_mode))
with open("/dev/zero", "rb") as f:
    print(stat.S_ISCHR(os.fstat(f.fileno()).st_mode))
print("print's first line", flush=True)
with open("/dev/stdout", "w") as f:
    f.write("to /dev/stdout\n")
print("print's second line", flush=True)
with open("/dev/stderr", "w") as f:
    f.write("to /dev/stderr\n")
print(os.path.isdir("/dev"), all(n in os.listdir("/dev") for n in ("null", "zero", "random", "urandom")))
"""


@pytest.fixture
def guest(tmp_path: Path) -> Iterator[PythonGuest]:
    with fresh_guest(tmp_path) as g:
        yield g


def test_the_devices_behave_as_on_linux(guest: PythonGuest) -> None:
    native = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert native.returncode == 0, native.stderr
    out = guest.run_cell(PROGRAM, limits=LIMITS)
    assert out.status == "ok", out.error
    assert out.stdout == native.stdout
    assert out.stderr == native.stderr == "to /dev/stderr\n"


def test_a_device_opened_in_an_earlier_cell_stays_one_across_a_rolled_back_cell(guest: PythonGuest) -> None:
    assert guest.run_cell("sink = open('/dev/null', 'w')\nzero = open('/dev/zero', 'rb')", limits=LIMITS).status == "ok"
    stopped = guest.run_cell("import time\nother = open('/dev/urandom', 'rb')\nwhile True:\n    pass",
                             limits=TurnLimits(deadline_seconds=0.5, disk_max_bytes=1 << 30, disk_max_files=100_000))
    assert stopped.rolled_back
    out = guest.run_cell("print(sink.write('x' * 5000), zero.read(3), 'other' in dir())", limits=LIMITS)
    assert out.stdout == "5000 b'\\x00\\x00\\x00' False\n", (out.stdout, out.error)


def test_writing_to_the_sinks_counts_nothing_against_the_disk_quota(guest: PythonGuest) -> None:
    small = TurnLimits(disk_max_bytes=1 << 20, disk_max_files=100)
    code = ("for name in ('null', 'zero', 'random', 'urandom'):\n    with open(f'/dev/{name}', 'wb') as f:\n"
            "        for _ in range(20):\n            f.write(b'x' * (1 << 20))\nprint('wrote 80 MiB')")
    out = guest.run_cell(code, limits=small)
    assert out.status == "ok" and not out.disk_full, (out.stdout, out.error)
    assert guest.files.quota.used_bytes < 1 << 20


def test_a_device_held_open_in_a_saved_state_is_the_device_when_woken(tmp_path: Path) -> None:
    from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions
    from wasm_kernel.runtime.hibernation import StateKeeping, load_saved_state

    keep = StateKeeping(tmp_path / "private" / "state", b"k" * 32)
    ws = tmp_path / "ws"
    ws.mkdir()
    guest = new_guest(ws, options=GuestOptions(keep_state=keep))
    try:
        opened = guest.run_cell("sink = open('/dev/null', 'w')\nzero = open('/dev/zero', 'rb')", limits=LIMITS,
                                options=CellOptions(execution_count=1))
        assert opened.status == "ok", opened.error
        guest.hibernate(1)
    finally:
        guest.close()
    state, notice = load_saved_state(keep)
    assert notice is None
    again = new_guest(ws, options=GuestOptions(keep_state=keep, resume=state))
    try:
        out = again.run_cell("print(sink.write('x' * 5000), zero.read(3))", limits=LIMITS)
        assert out.stdout == "5000 b'\\x00\\x00\\x00'\n", (out.stdout, out.error)
    finally:
        again.close()
    assert sorted(os.listdir(ws)) == []


def test_the_folder_behind_dev_can_be_removed_by_its_owner_without_root() -> None:
    def made_and_removed() -> list[str]:
        import shutil
        import tempfile

        from wasm_kernel.runtime.guest_devices import make_device_folder

        private = Path(tempfile.mkdtemp())
        make_device_folder(private)
        shutil.rmtree(private, ignore_errors=True)
        return [str(p.relative_to(private)) for p in private.rglob("*")] if private.exists() else []

    assert run_unprivileged(made_and_removed) == []
