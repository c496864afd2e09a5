"""The Sandbox drive's REST handlers as an attacker meets them, on a real Jupyter
Server with token authentication: no token, traversal, links planted in a
workspace and in the server's folders, other users' and other servers' sessions,
internal names, uploads against the quota, and errors that would name host paths."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.drive_client import (
    bind_session,
    call,
    download,
    empty_workspace,
    names,
    ok,
    sessions_root,
    upload,
)
from support.jupyter_server_client import JupyterServer, running_server
from support.special_files import SPECIAL_KINDS, make_special
from wasm_kernel.sessions.identity import derive_session_identity
from wasm_kernel.sessions.registry import SessionRegistry

pytestmark = pytest.mark.slow  # a real Jupyter Server

NB = "hw.ipynb"
QUOTA = 1 << 20  # the drive's disk quota for this server: 1 MiB
QUOTA_FILES = 50  # and its names
TOKEN = "drive-security-token"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JupyterServer]:
    base = tmp_path_factory.mktemp("drive-security")
    (base / "outside").mkdir()
    (base / "outside" / "secret.txt").write_text("host secret")
    argv = [f"--SandboxDrive.disk_max_bytes={QUOTA}", f"--SandboxDrive.disk_max_files={QUOTA_FILES}",
            f"--SandboxDrive.max_request_bytes={QUOTA * 2}"]
    with running_server(base, notebooks=[NB], token=TOKEN, extra_argv=argv) as srv:
        yield srv


@pytest.fixture()
def workspace(server: JupyterServer) -> Path:
    _sid, ws = bind_session(server, NB)
    empty_workspace(ws)  # each test starts from an empty workspace
    return ws


def _no_host_path(server: JupyterServer, answer: object) -> None:
    text = str(answer)
    for secret in (str(server.base), str(sessions_root(server)), os.path.expanduser("~")):
        assert secret not in text, f"a host path leaked: {text}"


@pytest.mark.parametrize("method", ["GET", "PUT", "POST", "PATCH", "DELETE"])
@pytest.mark.parametrize("token", ["", "wrong-token"])
def test_requests_without_the_servers_token_are_refused(server: JupyterServer, workspace: Path, method: str,
                                                        token: str) -> None:
    (workspace / "a.txt").write_text("private")
    body = {"type": "file", "format": "text", "content": "x"} if method in ("PUT", "POST") else (
        {"path": f"{NB}/b.txt"} if method == "PATCH" else None)
    status, answer = call(server, method, f"{NB}/a.txt", body, token=token)
    assert status == 403, (status, answer)
    assert "private" not in str(answer)
    assert (workspace / "a.txt").read_text() == "private" and not (workspace / "b.txt").exists()
    assert download(server, f"{NB}/a.txt", token=token)[0] == 403


@pytest.mark.parametrize("path", [
    f"{NB}/../../outside/secret.txt", f"{NB}/sub/../../x", "../outside/secret.txt", f"{NB}/a\x00b",
    f"{NB}//..//..//outside//secret.txt",
])
def test_traversal_out_of_a_workspace_or_the_server_root_is_refused(server: JupyterServer, workspace: Path,
                                                                    path: str) -> None:
    status, answer = call(server, "GET", path, query="content=1&format=text")
    assert status in (400, 404), (status, answer)
    assert "host secret" not in str(answer)
    _no_host_path(server, answer)
    status, answer = call(server, "PUT", path, {"type": "file", "format": "text", "content": "pwned"})
    assert status in (400, 404), (status, answer)
    assert (server.base / "outside" / "secret.txt").read_text() == "host secret"


def test_links_planted_in_a_workspace_are_never_followed(server: JupyterServer, workspace: Path) -> None:
    outside = server.base / "outside"
    (workspace / "leak.txt").symlink_to(outside / "secret.txt")
    (workspace / "dir").symlink_to(outside, target_is_directory=True)
    listing = ok(server, "GET", NB)
    leak = next(item for item in listing["content"] if item["name"] == "leak.txt")
    assert leak["type"] == "file" and leak["writable"] is False  # shown as itself
    for path in (f"{NB}/leak.txt", f"{NB}/dir/secret.txt", f"{NB}/dir"):
        status, answer = call(server, "GET", path, query="content=1&format=text")
        assert status in (400, 403), (path, status, answer)
        assert "host secret" not in str(answer)
        _no_host_path(server, answer)
        assert download(server, path)[1] != b"host secret"
    for path in (f"{NB}/leak.txt", f"{NB}/dir/new.txt"):
        status, _ = call(server, "PUT", path, {"type": "file", "format": "text", "content": "pwned"})
        assert status in (400, 403), (path, status)
    status, _ = call(server, "PATCH", f"{NB}/dir/secret.txt", {"path": f"{NB}/stolen.txt"})
    assert status in (400, 403)
    assert call(server, "DELETE", f"{NB}/dir/secret.txt")[0] in (400, 403)
    ok(server, "DELETE", f"{NB}/dir")  # removes the link, never what it points at
    assert (outside / "secret.txt").read_text() == "host secret" and not (outside / "new.txt").exists()
    assert not (workspace / "stolen.txt").exists()


def test_a_link_in_the_servers_folders_does_not_lead_out_of_its_root(server: JupyterServer, workspace: Path) -> None:
    # A notebook reached through a link out of the server root, with a session bound to where it leads.
    outside_nb = server.base / "outside" / "x.ipynb"
    outside_nb.write_text("{}")
    (server.root_dir / "escape").symlink_to(server.base / "outside", target_is_directory=True)
    with SessionRegistry(sessions_root(server)) as registry:
        sid = registry.get_or_create_session(derive_session_identity(outside_nb))
    (sessions_root(server) / sid).mkdir(exist_ok=True)
    (sessions_root(server) / sid / "theirs.txt").write_text("other")
    status, answer = call(server, "GET", "escape/x.ipynb")
    assert status == 403, (status, answer)
    _no_host_path(server, answer)


def test_another_users_or_another_servers_sessions_are_not_reachable(server: JupyterServer, workspace: Path,
                                                                     tmp_path: Path) -> None:
    server.create_notebook("shared.ipynb")
    _sid, theirs = bind_session(server, "shared.ipynb", agent_key="someone-else")
    (theirs / "answers.txt").write_text("theirs")
    assert call(server, "GET", "shared.ipynb")[0] == 404
    assert "shared.ipynb" not in names(ok(server, "GET", ""))
    # A session id is never a drive path, and a registry elsewhere is never read.
    other_root = tmp_path / "other-sessions"
    with SessionRegistry(other_root) as registry:
        other = registry.get_or_create_session(derive_session_identity(server.root_dir / "other.ipynb"))
    (other_root / other).mkdir(parents=True)
    for path in (other, f"{other}/x", "other.ipynb", f"{_sid}/answers.txt"):
        assert call(server, "GET", path)[0] == 404, path


def test_internal_names_stay_hidden_and_cannot_be_targets(server: JupyterServer, workspace: Path) -> None:
    (workspace / ".wasm-kernel-tmp-abc").write_text("half")
    (workspace / "seen.txt").write_text("x")
    assert names(ok(server, "GET", NB)) == ["seen.txt"]
    assert call(server, "GET", f"{NB}/.wasm-kernel-tmp-abc")[0] == 404
    assert call(server, "PUT", f"{NB}/.wasm-kernel-copy-1", {"type": "file", "format": "text", "content": ""})[0] == 404
    assert not (workspace / ".wasm-kernel-copy-1").exists()
    assert call(server, "PATCH", f"{NB}/seen.txt", {"path": f"{NB}/.wasm-kernel-tmp-x"})[0] == 404


def test_uploads_past_the_quota_are_refused_before_a_byte_is_written(server: JupyterServer, workspace: Path) -> None:
    status = upload(server, f"{NB}/big.bin", b"x" * (QUOTA + 1))
    assert status == 413 and not (workspace / "big.bin").exists()
    # In parts: the part that would pass the quota is refused, and the file holds only what fitted.
    status = upload(server, f"{NB}/parts.bin", b"y" * (QUOTA + 300_000), part=400_000)
    assert status == 413
    assert (workspace / "parts.bin").stat().st_size <= QUOTA
    status, answer = call(server, "PUT", f"{NB}/huge.bin", raw=b"{" + b" " * (QUOTA * 3) + b"}")
    assert status == 413 and "in parts" in answer["message"], answer
    # The file count is a quota too: the drive's own writes fill it, and the next is refused.
    empty_workspace(workspace)
    # many/ and 48 files: 49 names, and the 49th file's write had room for its temporary copy.
    for i in range(QUOTA_FILES - 2):
        status, _ = call(server, "PUT", f"{NB}/many/{i}", {"type": "file", "format": "text", "content": ""})
        assert status in (200, 201), (i, status)
    status, answer = call(server, "PUT", f"{NB}/one-more.txt", {"type": "file", "format": "text", "content": ""})
    assert status == 413 and "quota" in answer["message"], answer


def test_a_rename_or_move_cannot_leave_its_workspace_or_replace_a_file(server: JupyterServer, workspace: Path) -> None:
    server.create_notebook("second.ipynb")
    _sid, second = bind_session(server, "second.ipynb")
    (workspace / "a.txt").write_text("a")
    (workspace / "b.txt").write_text("b")
    assert call(server, "PATCH", f"{NB}/a.txt", {"path": "second.ipynb/a.txt"})[0] == 400
    assert call(server, "PATCH", f"{NB}/a.txt", {"path": f"{NB}/b.txt"})[0] == 409
    assert call(server, "PATCH", NB, {"path": "renamed.ipynb"})[0] == 403
    assert call(server, "DELETE", NB)[0] == 403
    assert (workspace / "a.txt").read_text() == "a" and (workspace / "b.txt").read_text() == "b"
    assert not (second / "a.txt").exists()


@pytest.mark.parametrize("body", [
    b"[1, 2]", b"not json", b'{"type": "file", "format": "base64", "content": "!!!"}',
    b'{"type": "file", "format": "text", "content": 5}', b'{"type": "file", "format": "text", "content": "", "chunk": 0}',
    b'{"type": "symlink", "content": "/etc/passwd"}', b'{"type": "notebook", "format": "json", "content": "x"}',
    # Not nbformat 4: JupyterLab could not open what would be written.
    b'{"type": "notebook", "format": "json", "content": {"x": 1}}',
    b'{"type": "notebook", "content": {"nbformat": "4", "nbformat_minor": 5, "cells": [], "metadata": {}}}',
    b'{"type": "notebook", "content": {"nbformat": 4, "nbformat_minor": 5, "cells": "x", "metadata": {}}}',
    b'{"type": "notebook", "content": {"nbformat": 4, "nbformat_minor": 5, "cells": [{"cell_type": "code"}], '
    b'"metadata": {}}}',
    # NaN is not JSON: a file written with it could not be read back.
    b'{"type": "notebook", "content": {"nbformat": 4, "nbformat_minor": 5, "cells": [], "metadata": {"x": NaN}}}',
    # A lone surrogate is not text (UTF-8 cannot hold it).
    b'{"type": "file", "format": "text", "content": "\\ud800"}',
    b'{"type": "file", "format": "base64", "content": "\\u00e9\\u00e9=="}',
])
def test_malformed_bodies_get_one_line_and_write_nothing(server: JupyterServer, workspace: Path, body: bytes) -> None:
    status, answer = call(server, "PUT", f"{NB}/x.txt", raw=body)
    assert status == 400, (status, answer)
    assert "\n" not in answer["message"] and "Traceback" not in str(answer)
    assert not (workspace / "x.txt").exists()
    status, _ = call(server, "GET", f"{NB}/x.txt", query="format=exe")
    assert status == 400


def test_a_notebook_without_a_session_says_how_to_get_one(server: JupyterServer, workspace: Path) -> None:
    server.create_notebook("fresh.ipynb")
    status, answer = call(server, "GET", "fresh.ipynb")
    assert status == 404 and "run a cell" in answer["message"], answer
    ok(server, "PUT", f"{NB}/t.txt", {"type": "file", "format": "base64", "content": base64.b64encode(b"ok").decode()})
    assert (workspace / "t.txt").read_bytes() == b"ok"


def _one_line_without_host_path(server: JupyterServer, status: int, answer: object, *allowed: int) -> None:
    assert status in allowed, (status, answer)
    assert isinstance(answer, dict) and "\n" not in answer["message"] and "internal error" not in answer["message"], answer
    _no_host_path(server, answer)


DEEP = 10_000


@pytest.mark.parametrize("method", ["PUT", "POST", "PATCH"])
def test_json_nested_ten_thousand_deep_is_refused_in_one_line(server: JupyterServer, workspace: Path,
                                                              method: str) -> None:
    deep = b"[" * DEEP + b"]" * DEEP
    for raw in (deep, b'{"type": "notebook", "format": "json", "content": {"a": ' + deep + b"}}",
                b'{"path": ' + deep + b"}"):
        status, answer = call(server, method, f"{NB}/x.ipynb", raw=raw)
        _one_line_without_host_path(server, status, answer, 400)
        assert "nests" in answer["message"], answer
    assert not (workspace / "x.ipynb").exists()


def test_a_notebook_file_nested_ten_thousand_deep_is_refused_in_one_line(server: JupyterServer,
                                                                         workspace: Path) -> None:
    (workspace / "deep.ipynb").write_bytes(b'{"cells": ' + b"[" * DEEP + b"]" * DEEP + b"}")
    status, answer = call(server, "GET", f"{NB}/deep.ipynb", query="content=1")
    _one_line_without_host_path(server, status, answer, 400)
    assert "open it as a file" in answer["message"], answer
    assert call(server, "GET", f"{NB}/deep.ipynb", query="content=1&type=file&format=text")[0] == 200


LONG_PATH = "/".join(["d" * 200] * 21) + "/f.txt"  # 4,226 bytes: past PATH_MAX less its NUL


@pytest.mark.parametrize("name", [
    "a" * 300,  # over 255 characters
    "é" * 200,  # 200 characters, 400 bytes in UTF-8
    "\U0001F600" * 64 + ".txt",  # 68 characters, 260 bytes
    LONG_PATH,
], ids=["300-chars", "400-bytes-in-200-chars", "260-bytes-of-emoji", "over-path-max"])
def test_names_and_paths_longer_than_a_filesystem_takes_get_a_400(server: JupyterServer, workspace: Path,
                                                                  name: str) -> None:
    (workspace / "a.txt").write_text("a")
    path = f"{NB}/{name}"
    file = {"type": "file", "format": "text", "content": "x"}
    for method, where, body in (("GET", path, None), ("PUT", path, file), ("PUT", path, {"type": "directory"}),
                                ("PATCH", f"{NB}/a.txt", {"path": path}), ("DELETE", path, None),
                                ("POST", path, {"copy_from": f"{NB}/a.txt"})):
        status, answer = call(server, method, where, body)
        _one_line_without_host_path(server, status, answer, 400)
        assert "at most" in answer["message"], (method, answer)
    assert download(server, path)[0] == 400
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"]


def test_a_copy_whose_name_would_pass_name_max_gets_a_400(server: JupyterServer, workspace: Path) -> None:
    (workspace / ("n" * 250 + ".txt")).write_text("x")  # 254 bytes; its copy's name would be 260
    status, answer = call(server, "POST", NB, {"copy_from": f"{NB}/{'n' * 250}.txt"})
    _one_line_without_host_path(server, status, answer, 400)
    assert len(list(workspace.iterdir())) == 1


@pytest.mark.parametrize("name", ["a\nb.txt", "tab\there", "esc\x1b[31m", "del\x7f"])
def test_the_drive_makes_no_name_with_a_control_character(server: JupyterServer, workspace: Path, name: str) -> None:
    (workspace / "a.txt").write_text("a")
    for method, where, body in (("PUT", f"{NB}/{name}", {"type": "file", "format": "text", "content": "x"}),
                                ("PUT", f"{NB}/{name}", {"type": "directory"}),
                                ("PUT", f"{NB}/{name}/inner.txt", {"type": "file", "format": "text", "content": "x"}),
                                ("PATCH", f"{NB}/a.txt", {"path": f"{NB}/{name}"}),
                                ("POST", NB, {"type": "file", "ext": name})):
        status, answer = call(server, method, where, body)
        _one_line_without_host_path(server, status, answer, 400)
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"]
    # One a guest made is listed, opened, renamed away and deleted like any other.
    (workspace / name).write_text("guest")
    assert name in names(ok(server, "GET", NB))
    assert ok(server, "GET", f"{NB}/{name}", query="content=1&type=file&format=text")["content"] == "guest"
    ok(server, "PATCH", f"{NB}/{name}", {"path": f"{NB}/renamed.txt"})
    ok(server, "DELETE", f"{NB}/renamed.txt")


@pytest.mark.parametrize("name", ["\ud800", "\udcff", "x\udfff.txt"])
def test_a_lone_surrogate_in_a_name_is_refused_and_no_raw_byte_name_is_made(server: JupyterServer, workspace: Path,
                                                                            name: str) -> None:
    # JSON bodies can carry a lone surrogate (a URL's path cannot: it must be UTF-8);
    # os would write \udc80-\udcff as a raw byte, a name no client could send back.
    (workspace / "a.txt").write_text("a")
    for method, where, body in (("PATCH", f"{NB}/a.txt", {"path": f"{NB}/{name}"}),
                                ("POST", NB, {"copy_from": f"{NB}/{name}"})):
        status, answer = call(server, method, where, raw=json.dumps(body).encode())
        _one_line_without_host_path(server, status, answer, 400)
        assert "surrogate" in answer["message"], answer
    assert os.listdir(os.fsencode(workspace)) == [b"a.txt"]


@pytest.mark.parametrize("kind", SPECIAL_KINDS)
def test_special_files_are_listed_and_every_operation_on_them_answers_in_one_line(
        server: JupyterServer, workspace: Path, kind: str) -> None:
    make_special(workspace / "odd", kind)
    item = next(i for i in ok(server, "GET", NB)["content"] if i["name"] == "odd")
    assert item["type"] == "file" and item["writable"] is False, item
    assert ok(server, "GET", f"{NB}/odd", query="content=0")["name"] == "odd"
    for fmt in ("text", "base64"):
        status, answer = call(server, "GET", f"{NB}/odd", query=f"content=1&type=file&format={fmt}")
        _one_line_without_host_path(server, status, answer, 400)
    status, answer = call(server, "POST", NB, {"copy_from": f"{NB}/odd"})
    _one_line_without_host_path(server, status, answer, 400)
    status, body, _headers = download(server, f"{NB}/odd")
    _one_line_without_host_path(server, status, json.loads(body), 400, 403)
    status, answer = call(server, "PUT", f"{NB}/odd", {"type": "file", "format": "text", "content": "x",
                                                        "chunk": 2})
    _one_line_without_host_path(server, status, answer, 400, 403)
    ok(server, "PATCH", f"{NB}/odd", {"path": f"{NB}/odd2"})
    ok(server, "DELETE", f"{NB}/odd2")
    assert list(workspace.iterdir()) == []


def test_folders_a_save_makes_are_charged_to_the_file_quota(server: JupyterServer, workspace: Path) -> None:
    # disk_max_files is 50: one save may not make 60 folders on its way to one file.
    deep = "/".join(["f"] * 60) + "/x.txt"
    status, answer = call(server, "PUT", f"{NB}/{deep}", {"type": "file", "format": "text", "content": "x"})
    _one_line_without_host_path(server, status, answer, 413)
    assert "quota" in answer["message"] and list(workspace.iterdir()) == []
    ok(server, "PUT", f"{NB}/f/g/x.txt", {"type": "file", "format": "text", "content": "x"})  # three entries fit
    assert (workspace / "f" / "g" / "x.txt").read_text() == "x"


def test_copies_and_untitled_files_go_only_into_folders_that_exist(server: JupyterServer, workspace: Path) -> None:
    # Each is charged one entry: it may not make the folders on its way (60 here, past the file quota).
    (workspace / "a.txt").write_text("a")
    deep = f"{NB}/" + "/".join(["f"] * 60)
    for body in ({"copy_from": f"{NB}/a.txt"}, {"type": "file", "ext": ".txt"}, {"type": "directory"}):
        status, answer = call(server, "POST", deep, body)
        _one_line_without_host_path(server, status, answer, 404)
        status, answer = call(server, "POST", f"{NB}/a.txt", body)  # a file is not a folder
        _one_line_without_host_path(server, status, answer, 400)
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"]


def test_the_sessions_points_are_not_reachable_through_the_drive(server: JupyterServer, workspace: Path) -> None:
    sid = workspace.name
    points = sessions_root(server) / ".wasm-kernel" / "points" / sid
    (points / "files").mkdir(parents=True, exist_ok=True)
    (points / "1.delta").write_bytes(b"a point's pages")
    (points / "files" / ("0" * 64)).write_bytes(b"a point's file")
    for path in (f"{NB}/../.wasm-kernel/points/{sid}/1.delta", f"{NB}/../.wasm-kernel/points/{sid}/files",
                 f"{NB}/../../.wasm-kernel/points", f"{NB}/.wasm-kernel/points/{sid}/1.delta"):
        status, answer = call(server, "GET", path, query="content=1&format=text")
        assert status in (400, 404), (path, status, answer)
        assert "a point's" not in str(answer)
        _no_host_path(server, answer)
        status, answer = call(server, "DELETE", path)
        assert status in (400, 404), (path, status, answer)
    assert (points / "1.delta").read_bytes() == b"a point's pages"
    assert ".wasm-kernel" not in names(ok(server, "GET", NB))
