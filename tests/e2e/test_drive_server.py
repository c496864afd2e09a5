"""The Sandbox drive and renames on a real Jupyter Server with real kernels: what a
cell writes is in the drive, with or without a running kernel; uploads reach the
cell; a renamed notebook keeps its session; a copy gets its own."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.drive_client import bind_session, call, download, names, ok, upload
from support.jupyter_server_client import JupyterServer, KernelChannels, running_server

LESSON = "course/lesson.ipynb"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    with running_server(tmp_path_factory.mktemp("drive-server"), notebooks=[LESSON], token="drive-test-token") as srv:
        yield srv


@contextmanager
def kernel(server: JupyterServer, path: str) -> Iterator[KernelChannels]:
    model = server.start_session(path)
    kernel_id = model["kernel"]["id"]
    try:
        with server.connect(kernel_id) as channels:
            yield channels
    finally:
        pid = server.kernel_pid(kernel_id)
        server.delete_session(model["id"])
        server.wait_kernel_gone(pid)


def test_jupyter_server_lists_the_extension_enabled_after_install() -> None:
    out = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                         capture_output=True, text=True, timeout=120)
    text = out.stdout + out.stderr
    line = next((ln for ln in text.splitlines() if "wasm_kernel" in ln and "enabled" in ln), None)
    assert line is not None, text
    assert "wasm_kernel 0.1.0 \x1b[32mOK" in text or "wasm_kernel 0.1.0 OK" in text, text


def test_a_cells_files_are_in_the_drive_with_and_without_a_kernel(server: JupyterServer) -> None:
    with kernel(server, LESSON) as ch:
        ch.run_ok("import os; os.makedirs('out', exist_ok=True)\n"
                  "open('summary.csv','w').write('a,b\\n1,2\\n'); open('out/plot.png','wb').write(b'\\x89PNG\\r\\n')")
        session_id = ch.session_id()
        # While the kernel runs: the drive mirrors the server's folders down to the notebook.
        assert "course" in names(ok(server, "GET", ""))
        course = ok(server, "GET", "course")
        assert [(i["name"], i["type"]) for i in course["content"]] == [("lesson.ipynb", "directory")]
        listing = ok(server, "GET", LESSON)
        assert names(listing) == ["out", "summary.csv"], listing
    # The kernel is gone; the workspace is not.
    csv = ok(server, "GET", f"{LESSON}/summary.csv", query="type=file&format=text&content=1")
    assert csv["content"] == "a,b\n1,2\n" and csv["format"] == "text" and csv["mimetype"] == "text/csv"
    png = ok(server, "GET", f"{LESSON}/out/plot.png", query="type=file&format=base64&content=1")
    assert base64.b64decode(png["content"]) == b"\x89PNG\r\n" and png["mimetype"] == "image/png"
    status, body, headers = download(server, f"{LESSON}/summary.csv")
    assert status == 200 and body == b"a,b\n1,2\n", (status, body)
    assert headers["Content-Disposition"].startswith("attachment") and headers["X-Content-Type-Options"] == "nosniff"
    assert session_id in {p.name for p in (server.data_dir / "wasm-kernel" / "sessions").iterdir()}


def test_a_file_uploaded_in_parts_is_read_by_the_next_cell(server: JupyterServer) -> None:
    bind_session(server, LESSON)
    data = bytes(range(256)) * 9000  # 2.2 MiB: JupyterLab uploads it in 1 MiB parts
    assert upload(server, f"{LESSON}/data/upload.bin", data, part=1 << 20) in (200, 201)
    with kernel(server, LESSON) as ch:
        got = ch.run_ok("import hashlib; hashlib.sha256(open('data/upload.bin','rb').read()).hexdigest()")
        import hashlib

        assert got.result() == repr(hashlib.sha256(data).hexdigest()), got.describe()


def test_new_folder_rename_copy_and_delete_in_a_workspace(server: JupyterServer) -> None:
    bind_session(server, LESSON)
    folder = ok(server, "POST", LESSON, {"type": "directory"})
    assert folder["type"] == "directory" and folder["name"].startswith("Untitled Folder")
    ok(server, "PATCH", folder["path"], {"path": f"{LESSON}/results"})
    ok(server, "PUT", f"{LESSON}/results/a.txt", {"type": "file", "format": "text", "content": "hello"})
    copy = ok(server, "POST", f"{LESSON}/results", {"copy_from": f"{LESSON}/results/a.txt"})
    assert copy["name"] == "a-Copy1.txt"
    untitled = ok(server, "POST", f"{LESSON}/results", {"type": "file", "ext": ".txt"})
    assert untitled["name"] == "untitled.txt"
    assert names(ok(server, "GET", f"{LESSON}/results")) == ["a-Copy1.txt", "a.txt", "untitled.txt"]
    status, answer = call(server, "PATCH", f"{LESSON}/results/a.txt", {"path": f"{LESSON}/results/untitled.txt"})
    assert status == 409 and "already exists" in answer["message"], answer
    ok(server, "DELETE", f"{LESSON}/results")
    assert call(server, "GET", f"{LESSON}/results")[0] == 404


@pytest.mark.parametrize("body", [{"type": "notebook"}, {"type": "file", "ext": ".ipynb"}])
def test_a_new_notebook_inside_a_workspace_is_refused_with_where_to_make_it(server: JupyterServer,
                                                                            body: dict[str, str]) -> None:
    # Its kernel's /app would be a workspace of its own, not the folder it was made in.
    bind_session(server, LESSON)
    before = names(ok(server, "GET", LESSON))
    status, answer = call(server, "POST", LESSON, body)
    assert status == 403, answer
    assert answer["message"].startswith("a new notebook goes in the file browser") and "\n" not in answer["message"]
    assert names(ok(server, "GET", LESSON)) == before


def test_a_renamed_notebook_keeps_its_session_across_a_restart(server: JupyterServer) -> None:
    server.create_notebook("course/untitled.ipynb")
    with kernel(server, "course/untitled.ipynb") as ch:
        ch.run_ok("open('kept.txt','w').write('still here')")
        before = ch.session_id()
    # As JupyterLab renames: PATCH /api/contents; the server's event re-points the registry.
    server.request("PATCH", "/api/contents/course/untitled.ipynb", {"path": "course/hw1.ipynb"})
    deadline = time.monotonic() + 10
    while call(server, "GET", "course/hw1.ipynb")[0] != 200 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert names(ok(server, "GET", "course/hw1.ipynb")) == ["kept.txt"]
    with kernel(server, "course/hw1.ipynb") as ch:
        assert ch.session_id() == before, "the renamed notebook got a new session"
        assert ch.run_ok("open('kept.txt').read()").result() == "'still here'"


def test_a_rename_onto_a_name_with_its_own_session_keeps_both(server: JupyterServer) -> None:
    server.create_notebook("course/a.ipynb")
    a_id, a_ws = bind_session(server, "course/a.ipynb")
    b_id, b_ws = bind_session(server, "course/b.ipynb")  # b's notebook file was deleted; its session stays
    (a_ws / "a.txt").write_text("a")
    (b_ws / "b.txt").write_text("b")
    server.request("PATCH", "/api/contents/course/a.ipynb", {"path": "course/b.ipynb"})
    deadline = time.monotonic() + 10
    while "rename_not_followed" not in server.log() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "rename_not_followed" in server.log(), server.log_tail()
    assert names(ok(server, "GET", "course/b.ipynb")) == ["b.txt"], "b's session was replaced"
    assert bind_session(server, "course/b.ipynb")[0] == b_id and bind_session(server, "course/a.ipynb")[0] == a_id


def test_a_duplicated_notebook_gets_a_new_empty_session(server: JupyterServer) -> None:
    _sid, ws = bind_session(server, LESSON)
    (ws / "mine.txt").write_text("x")
    copy = server.request("POST", "/api/contents/course", {"copy_from": LESSON})
    assert copy["path"] != LESSON
    with kernel(server, copy["path"]) as ch:
        assert ch.session_id() != _sid
        # The notebook's folder shows through /app read-only; the original's own file does not.
        assert ch.run_ok("import os; 'mine.txt' in os.listdir('/app')").result() == "False"


def test_the_drive_says_it_cannot_serve_when_kernels_run_on_a_gateway(tmp_path: Path) -> None:
    # Another Jupyter Server stands in for the pool's router: both speak the gateway API.
    (tmp_path / "gw").mkdir()
    (tmp_path / "lab").mkdir()
    root = tmp_path / "nb"
    root.mkdir()
    gateway = JupyterServer(tmp_path / "gw", root)
    try:
        srv = JupyterServer(tmp_path / "lab", root, extra_argv=[f"--GatewayClient.url={gateway.url}"], token="t")
        try:
            for path in ("", "x.ipynb/a.txt"):
                status, answer = call(srv, "GET", path)
                assert status == 501 and "gateway" in answer["message"] and "Sandbox panel" in answer["message"], answer
        finally:
            srv.stop()
    finally:
        gateway.stop()
