"""The library-source door (wire.OP_SOURCE) as an attacker uses it: a cell asks for
any path it likes, and the host answers only with a regular file inside this guest
build's sources folder, reached without a link, of a bounded size."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wasm_kernel.core.sandbox import PythonSandbox
from wasm_kernel.host import library_sources
from wasm_kernel.host.library_sources import MAX_SOURCE_BYTES, read_source


@pytest.fixture()
def sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "sources"
    (folder / "numpy" / "lib").mkdir(parents=True)
    (folder / "numpy" / "lib" / "real.py").write_text("def f():\n    return 1\n")
    (tmp_path / "secret.py").write_text("SECRET = 'host'\n")
    monkeypatch.setattr(library_sources, "sources_folder", lambda: folder)
    return folder


def test_a_real_source_is_read(sources: Path) -> None:
    assert read_source("numpy/lib/real.py") == b"def f():\n    return 1\n"


@pytest.mark.parametrize("path", [
    "../secret.py", "numpy/../../secret.py", "/etc/passwd", "numpy/lib/../../../secret.py", "numpy//lib/real.py",
    "numpy/lib/real.pyc", "numpy/lib/real.py\0", "./numpy/lib/real.py", "~/secret.py", "numpy\\lib\\real.py",
    "a" * 2000 + ".py", "",
])
def test_a_path_that_is_not_a_plain_relative_py_path_is_refused(sources: Path, path: str) -> None:
    assert read_source(path) is None


def test_a_link_in_the_folder_is_never_followed(sources: Path, tmp_path: Path) -> None:
    (sources / "numpy" / "lib" / "linked.py").symlink_to(tmp_path / "secret.py")
    (sources / "pandas").symlink_to(tmp_path, target_is_directory=True)  # a folder that is a link
    assert read_source("numpy/lib/linked.py") is None
    assert read_source("pandas/secret.py") is None


def test_what_is_not_a_regular_file_or_is_too_big_is_refused(sources: Path) -> None:
    os.mkfifo(sources / "numpy" / "fifo.py")  # opened without blocking, then refused
    assert read_source("numpy/fifo.py") is None
    (sources / "numpy" / "big.py").write_bytes(b"#" * (MAX_SOURCE_BYTES + 1))
    assert read_source("numpy/big.py") is None
    (sources / "numpy" / "folder.py").mkdir()
    assert read_source("numpy/folder.py") is None


def test_a_cell_asking_the_door_for_a_host_file_gets_nothing(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(
        "import _wasm_kernel_guest as g\n"
        "for p in ('../../../../etc/passwd', '/etc/passwd', 'numpy/../../../../etc/hostname.py', 42):\n"
        "    print(repr(g.call_raw({'op': 'source', 'path': p})[:40]))")
    assert r.success, r.error
    lines = r.stdout.splitlines()
    assert lines[:3] == ["b''"] * 3 and "bad_message" in lines[3], r.stdout
