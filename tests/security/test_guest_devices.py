"""The guest's /dev is a new way in (runtime/guest_devices.py): a read-only host
folder of six empty files in the guest's scratch. Whatever the guest does through
it, by a device's descriptor or by a path naming /dev, the host folder keeps its six
empty files and nothing else, and the disk quota counts nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.sandboxes import fresh_guest
from wasm_kernel.runtime.guest_config import TurnLimits
from wasm_kernel.runtime.python_guest import PythonGuest

LIMITS = TurnLimits(disk_max_bytes=1 << 30, disk_max_files=100_000)
DEVICES = ["null", "random", "stderr", "stdout", "urandom", "zero"]

# label -> an attempt on the host folder behind /dev; each must fail or change nothing.
ATTEMPTS = {
    "make a folder": "os.mkdir('/dev/x')",
    "make a file": "open('/dev/new', 'w')",
    "make a file exclusively": "os.open('/dev/null', os.O_WRONLY | os.O_CREAT | os.O_EXCL)",
    "remove a device": "os.remove('/dev/null')",
    "remove the folder": "os.rmdir('/dev')",
    "rename a device": "os.rename('/dev/null', '/dev/nil')",
    "rename a device out": "os.rename('/dev/zero', '/app/zero')",
    "rename a file in": "os.rename('/app/mine.txt', '/dev/mine.txt')",
    "replace a device": "os.replace('/app/mine.txt', '/dev/null')",
    "hard link in": "os.link('/app/mine.txt', '/dev/mine.txt')",
    "hard link out": "os.link('/dev/null', '/app/null')",
    "symlink in": "os.symlink('/app/mine.txt', '/dev/link')",
    "truncate a device by path": "os.truncate('/dev/null', 1 << 20)",
    "truncate a device by descriptor": "os.ftruncate(os.open('/dev/zero', os.O_RDWR), 1 << 20)",
    "set times": "os.utime('/dev/null', (0, 0))",
}


@pytest.fixture
def guest(tmp_path: Path) -> Iterator[PythonGuest]:
    with fresh_guest(tmp_path) as g:
        yield g


def host_devices(guest: PythonGuest) -> dict[str, int]:
    folder = guest.layout.private / "dev"  # type: ignore[operator]
    return {entry.name: entry.stat(follow_symlinks=False).st_size for entry in os.scandir(folder)}


def test_nothing_reaches_the_host_folder_behind_dev(guest: PythonGuest) -> None:
    assert guest.run_cell("open('/app/mine.txt', 'w').write('mine')", limits=LIMITS).status == "ok"
    used = guest.files.quota.used_bytes, guest.files.quota.used_entries
    body = ",\n".join(f"    {label!r}: attempt(lambda: {code})" for label, code in ATTEMPTS.items())
    code = ("import json, os\ndef attempt(fn):\n    try:\n        fn()\n        return 'done'\n"
            "    except OSError as err:\n        return type(err).__name__\n"
            "for name in ('null', 'zero', 'random', 'urandom'):\n"
            "    fd = os.open(f'/dev/{name}', os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND)\n"
            "    os.write(fd, b'x' * 100_000)\n    os.pwrite(fd, b'y' * 100_000, 1 << 30)\n    os.close(fd)\n"
            f"print(json.dumps({{\n{body}\n}}))")
    out = guest.run_cell(code, limits=LIMITS)
    assert out.status == "ok", out.error
    outcomes = json.loads(out.stdout.splitlines()[-1])
    assert {label: result for label, result in outcomes.items() if result == "done"} == {}
    assert host_devices(guest) == {name: 0 for name in DEVICES}
    assert (guest.files.quota.used_bytes, guest.files.quota.used_entries) == used
    assert sorted(os.listdir(guest.workspace)) == ["mine.txt"]


def test_a_device_descriptor_holds_no_right_to_write_the_host_file(guest: PythonGuest) -> None:
    # A call this layer does not serve goes to wasmtime, which must refuse it: the
    # device was opened read-only on a read-only mount.
    out = guest.run_cell("import os\nfd = os.open('/dev/null', os.O_WRONLY)\n"
                         "print(os.fstat(fd).st_size)\ntry:\n    os.posix_fallocate(fd, 0, 1 << 20)\n"
                         "except (OSError, AttributeError) as err:\n    print(type(err).__name__)",
                         limits=LIMITS)
    assert out.status == "ok", out.error
    assert out.stdout.splitlines()[0] == "0"
    assert host_devices(guest) == {name: 0 for name in DEVICES}
