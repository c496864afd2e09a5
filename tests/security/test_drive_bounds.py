"""The Sandbox drive's memory, bounded whatever a workspace or a request holds: on a
real Jupyter Server with token authentication, the server process's peak RSS
(VmHWM, reset before each vector) stays far below the size of what it handles.

Before these bounds, two concurrent copies of a 1 GiB sparse file took the server
from 146 MiB to 2.2 GiB (each read the file whole, then checked the quota); two
200 MiB bodies were each held, and joined, before the part size refused them; and
a 16 MiB notebook file of empty lists took hundreds of MiB to parse; and the quota's
count of a workspace of 100,000 files held every entry of a folder at once."""

from __future__ import annotations

import os
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from support.drive_client import FILES, bind_session, call, empty_workspace, quoted
from support.jupyter_server_client import JupyterServer, running_server
from support.processes import peak_rss_growth

pytestmark = pytest.mark.slow  # a real Jupyter Server, and a GiB of (sparse) data

NB = "hw.ipynb"
GIB = 1 << 30
MIB = 1 << 20
QUOTA = 2 * GIB  # the kernel's default quota: room for one copy of a 1 GiB file, not two
PART = 8 * MIB  # the largest upload part (a body may be 4/3 of it, base64)
TOKEN = "drive-bounds-token"
GROWTH_LIMIT = 64 * MIB  # what the server may grow by while handling a GiB


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    argv = [f"--SandboxDrive.disk_max_bytes={QUOTA}", f"--SandboxDrive.max_request_bytes={PART}"]
    with running_server(tmp_path_factory.mktemp("drive-bounds"), notebooks=[NB], token=TOKEN, extra_argv=argv) as srv:
        yield srv


@pytest.fixture()
def workspace(server: JupyterServer) -> Iterator[Path]:
    _sid, ws = bind_session(server, NB)
    yield ws
    empty_workspace(ws)  # a GiB, even sparse, is not left for the next test


def _sparse_gib(path: Path) -> dict[int, bytes]:
    """A 1 GiB file that is a hole but for three marks; the marks, by offset."""
    marks = {0: b"first", 512 * MIB + 7: b"middle", GIB - 4: b"last"}
    with open(path, "wb") as f:
        f.truncate(GIB)
        for offset, mark in marks.items():
            f.seek(offset)
            f.write(mark)
    return marks


def _together(*calls: Callable[[], Any]) -> list[Any]:
    """Run the calls at once, as two browser tabs would; their results in order."""
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        results[i] = calls[i]()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return results


def test_two_concurrent_copies_of_a_sparse_gib_file_stream_and_check_the_quota_first(
        server: JupyterServer, workspace: Path) -> None:
    marks = _sparse_gib(workspace / "big.bin")
    copy = lambda: call(server, "POST", NB, {"copy_from": f"{NB}/big.bin"})  # noqa: E731
    with peak_rss_growth(server.proc.pid) as peak:
        answers = _together(copy, copy)
    assert peak.growth < GROWTH_LIMIT, f"the server grew by {peak.growth >> 20} MiB copying a 1 GiB file twice"
    # The quota holds one copy: the first to take the session's lock makes it, the other is refused.
    assert sorted(status for status, _ in answers) == [201, 413], answers
    refused = next(answer for status, answer in answers if status == 413)
    assert "quota" in refused["message"] and "\n" not in refused["message"], refused
    copied = workspace / "big-Copy1.bin"
    assert copied.stat().st_size == GIB
    assert copied.stat().st_blocks * 512 < 16 * MIB  # its holes are holes still
    with open(copied, "rb") as f:
        for offset, mark in marks.items():
            f.seek(offset)
            assert f.read(len(mark)) == mark, offset
    assert sorted(p.name for p in workspace.iterdir()) == ["big-Copy1.bin", "big.bin"]  # no temp file left


def test_bodies_past_the_part_size_are_counted_and_dropped_not_held(server: JupyterServer, workspace: Path) -> None:
    body = b'{"type": "file", "format": "text", "content": "' + b"x" * (200 * MIB) + b'"}'
    put = lambda: call(server, "PUT", f"{NB}/big.txt", raw=body)  # noqa: E731
    with peak_rss_growth(server.proc.pid) as peak:
        answers = _together(put, put)
    assert peak.growth < GROWTH_LIMIT, f"the server grew by {peak.growth >> 20} MiB refusing two 200 MiB bodies"
    for status, answer in answers:
        assert status == 413 and "in parts" in answer["message"], (status, answer)
    assert not (workspace / "big.txt").exists()


def test_a_notebook_file_of_millions_of_tiny_values_is_refused_before_it_is_parsed(server: JupyterServer,
                                                                                     workspace: Path) -> None:
    # A guest writes it; the user clicks it in the file browser.
    values = b"[]," * (16 * MIB // 3)  # 16 MiB of empty lists: 5.6 million values, ~80 bytes each once parsed
    (workspace / "tiny.ipynb").write_bytes(b'{"cells": [' + values + b'[]]}')
    with peak_rss_growth(server.proc.pid) as peak:
        status, answer = call(server, "GET", f"{NB}/tiny.ipynb", query="content=1")
    assert status == 413 and "open it as a file" in answer["message"], (status, answer)
    assert peak.growth < 4 * 16 * MIB, f"the server grew by {peak.growth >> 20} MiB for a 16 MiB notebook"
    # The file itself is still there to download, or to open as text.
    assert call(server, "GET", f"{NB}/tiny.ipynb", query="content=1&type=file&format=text")[0] == 200


def test_a_gib_files_content_is_refused_in_one_line_and_its_download_streams(server: JupyterServer,
                                                                            workspace: Path) -> None:
    _sparse_gib(workspace / "big.bin")
    with peak_rss_growth(server.proc.pid) as peak:
        status, answer = call(server, "GET", f"{NB}/big.bin", query="content=1&format=base64")
        req = urllib.request.Request(server.url + FILES + quoted(f"{NB}/big.bin"),
                                     headers={"Authorization": f"token {TOKEN}"})
        got = 0
        with urllib.request.urlopen(req, timeout=120) as resp:
            while piece := resp.read(4 * MIB):
                got += len(piece)
    assert status == 413 and "download it" in answer["message"] and "\n" not in answer["message"], answer
    assert got == GIB
    assert peak.growth < GROWTH_LIMIT, f"the server grew by {peak.growth >> 20} MiB sending a 1 GiB file"


def test_a_workspace_of_100000_files_is_counted_and_deleted_without_holding_its_listing(
        server: JupyterServer, workspace: Path) -> None:
    wide = workspace / "wide"
    wide.mkdir()
    fd = os.open(wide, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(100_000):  # with the folder, past the kernel's default quota of 100,000 names
            os.close(os.open(f"file-{i:06d}-with-a-name-as-long-as-a-real-one", os.O_CREAT | os.O_WRONLY, dir_fd=fd))
    finally:
        os.close(fd)
    with peak_rss_growth(server.proc.pid) as peak:
        status, answer = call(server, "PUT", f"{NB}/one-more.txt", {"type": "file", "format": "text", "content": "x"})
    assert status == 413 and "quota" in answer["message"], (status, answer)
    # Held as DirEntry objects with their stats, the listing was about 75 MiB.
    assert peak.growth < 32 * MIB, f"the server grew by {peak.growth >> 20} MiB counting 100,000 files"
    with peak_rss_growth(server.proc.pid) as peak:
        status, _ = call(server, "DELETE", f"{NB}/wide")
    assert status == 204 and not wide.exists()
    assert peak.growth < 32 * MIB, f"the server grew by {peak.growth >> 20} MiB deleting 100,000 files"
