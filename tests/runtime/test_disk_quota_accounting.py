"""The disk quota's running count matches a fresh walk of the trees, whatever the
write pattern: the shadows follow some descriptors without asking the host
(runtime/disk_quota.py), and these patterns are the ones that could fool them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.folders import usage_counter
from wasm_kernel.host.disk_ledger import DiskLedger
from wasm_kernel.runtime.disk_quota import DiskQuota
from support.sandboxes import fresh_guest
from wasm_kernel.runtime.guest_config import TurnLimits
from wasm_kernel.runtime.python_guest import PythonGuest

LIMITS = TurnLimits(disk_max_bytes=1 << 30, disk_max_files=100_000)

# name -> cells, run one after another in one guest.
EXACT = {
    "sequential": ["with open('a.bin', 'wb') as f:\n    for _ in range(50):\n        f.write(b'x' * 65536)"],
    "append": ["open('a.log', 'wb').write(b'1' * 1000)",
               "with open('a.log', 'ab') as f:\n    for _ in range(20):\n        f.write(b'y' * 3000)"],
    "overwrite-in-the-middle": ["open('m.bin', 'wb').write(b'x' * 100_000)",
                                "with open('m.bin', 'r+b') as f:\n    f.seek(10)\n    f.write(b'y' * 50_000)\n"
                                "    f.write(b'z' * 100_000)"],
    "rewind-and-extend": ["f = open('r.bin', 'w+b')\nf.write(b'x' * 70_000)\nf.seek(0)\nf.read(10)\n"
                          "f.write(b'y' * 200_000)\nf.close()"],
    "seek-past-the-end": ["with open('s.bin', 'wb') as f:\n    f.write(b'x' * 10)\n    f.seek(5_000_000)\n"
                          "    f.write(b'y')"],
    "truncated-behind-a-writer": ["a = open('t.bin', 'wb')\na.write(b'x' * 300_000)\na.flush()\n"
                                  "open('t.bin', 'wb').close()\na.write(b'y' * 1000)\na.close()"],
    "os-truncate-behind-a-writer": ["import os\na = open('u.bin', 'wb')\na.write(b'x' * 300_000)\na.flush()\n"
                                    "os.truncate('u.bin', 10)\na.write(b'y' * 1000)\na.close()"],
    "unlinked-and-made-again": ["import os\nf = open('v.bin', 'wb')\nf.write(b'x' * 40_000)\nf.close()\n"
                                "os.remove('v.bin')\nopen('v.bin', 'wb').write(b'y' * 7)"],
    "pwrite-inside-and-past": ["import os\nfd = os.open('p.bin', os.O_RDWR | os.O_CREAT)\nos.write(fd, b'x' * 1000)\n"
                               "os.pwrite(fd, b'y' * 10, 100)\nos.pwrite(fd, b'z', 1_000_000)\nos.write(fd, b'w' * 5)\n"
                               "os.close(fd)"],
    "kept-open-across-cells": ["keep = open('k.bin', 'wb')\nkeep.write(b'x' * 100_000)\nkeep.flush()",
                               "keep.write(b'y' * 100_000)\nkeep.flush()",
                               "keep.seek(0)\nkeep.write(b'z' * 300_000)\nkeep.close()"],
    "tmp-too": ["with open('/tmp/t.bin', 'wb') as f:\n    f.write(b'x' * 123_456)"],
    "rolled-back-cell": ["open('before.bin', 'wb').write(b'x' * 1000)",
                         "f = open('during.bin', 'wb')\nf.write(b'x' * 50_000)\nf.flush()\nwhile True:\n    pass"],
}


@pytest.fixture
def guest(tmp_path: Path) -> Iterator[PythonGuest]:
    with fresh_guest(tmp_path) as g:
        yield g


def walked(guest: PythonGuest) -> tuple[int, int]:
    fresh = DiskQuota(guest.files.quota.roots)
    return fresh.used_bytes, fresh.used_entries


@pytest.mark.parametrize("name", sorted(EXACT))
def test_the_running_count_equals_a_fresh_walk(guest: PythonGuest, name: str) -> None:
    guest.run_cell("1", limits=LIMITS)  # the quota counts from here
    for code in EXACT[name]:
        limits = TurnLimits(**{**LIMITS.__dict__, "deadline_seconds": 1.0}) if "while True" in code else LIMITS
        guest.run_cell(code, limits=limits)
        assert guest.disk_usage() == walked(guest), code


def test_two_descriptors_on_one_file_never_count_too_little(guest: PythonGuest) -> None:
    guest.run_cell("1", limits=LIMITS)
    code = ("a = open('two.bin', 'wb')\nb = open('two.bin', 'r+b')\na.write(b'x' * 100_000)\na.flush()\n"
            "b.write(b'y' * 150_000)\nb.flush()\na.write(b'z' * 10)\na.flush()\na.close()\nb.close()")
    out = guest.run_cell(code, limits=LIMITS)
    assert out.status == "ok", out.error
    used, entries = guest.disk_usage()
    real_bytes, real_entries = walked(guest)
    assert used >= real_bytes and entries == real_entries


def test_counting_again_shows_what_another_writer_committed_meanwhile(tmp_path: Path) -> None:
    # The panel's disk use: a guest that wrote nothing since its last turn must still
    # show an upload the host's door charged to the session's ledger.
    workspace, own = tmp_path / "ws", tmp_path / "tmp"
    workspace.mkdir()
    own.mkdir()
    (tmp_path / "private").mkdir()

    ledger = DiskLedger(tmp_path, ["private", "ledger"], usage_counter(workspace))
    quota = DiskQuota([workspace, own], ledger)
    quota.set_limits(1 << 20, 100)
    before = (quota.used_bytes, quota.used_entries)
    assert ledger.charge(300_000, 1, 1 << 20, 100)  # the drive's upload, counted first
    (workspace / "big.bin").write_bytes(b"\0" * 300_000)
    quota.measure()
    assert (quota.used_bytes, quota.used_entries) == (before[0] + 300_000, before[1] + 1)
