"""A notebook's folder is never a place the client chose (issue 40, class 1).

A real Jupyter Server with wasm-kernel's server extension, as JupyterLab talks to it.
A client names the kernel's folder through the session's `name` (JPY_SESSION_NAME is
os.path.join(cwd, name): an absolute name replaces the cwd, `..` climbs) and the
kernel's `path` (its cwd; the kernels API does not refuse `..`, while the sessions
API's path goes through the contents manager, which does). Each vector
names a folder the server's account can read that is no notebook folder of this
server: another user's notes beside the server's root, a hidden folder and a link
inside it, the server's own Jupyter folders, /etc (the server runs as root in CI).
Each kernel must show no such folder under /app, say so in one line that names no
host path, and take no identity from the refused path. A notebook inside the root
still sees its folder.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.jupyter_server_client import JupyterServer, KernelChannels
from wasm_kernel.sessions.registry import SessionRegistry

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

SECRET = "secret-notes-5b1e.txt"
SECRET_TEXT = "another student's notes"
KERNEL = "wasm-python"


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    base = tmp_path_factory.mktemp("folder-rule")
    root = base / "notebooks"
    (root / "course").mkdir(parents=True)
    (root / "course" / "data.csv").write_text("x\n1\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / SECRET).write_text(SECRET_TEXT)
    outside = base / "bob"  # another student's folder, readable by the server's account
    outside.mkdir()
    (outside / SECRET).write_text(SECRET_TEXT)
    (root / "link-out").symlink_to(outside, target_is_directory=True)
    server = JupyterServer(base, root)
    try:
        server.create_notebook("course/lesson.ipynb")
        # The server's own Jupyter folders hold a file of the same name: shown, it would be read.
        (server.data_dir / SECRET).write_text(SECRET_TEXT)
        (server.runtime_dir / SECRET).write_text(SECRET_TEXT)
        yield {"server": server, "root": root, "outside": outside, "base": base}
    finally:
        killed = server.stop()
        assert not killed, f"kernels outlived the server: {killed}"


@contextmanager
def session(server: JupyterServer, body: dict[str, Any]) -> Iterator[KernelChannels]:
    model = server.post("/api/sessions", {"type": "notebook", "kernel": {"name": KERNEL}, **body})
    ch = server.connect(model["kernel"]["id"])
    try:
        yield ch
    finally:
        ch.close()
        server.delete_session(model["id"])


@contextmanager
def kernel(server: JupyterServer, body: dict[str, Any]) -> Iterator[KernelChannels]:
    model = server.post("/api/kernels", {"name": KERNEL, **body})
    ch = server.connect(model["id"])
    try:
        yield ch
    finally:
        ch.close()
        server.request("DELETE", f"/api/kernels/{model['id']}", expect=(204,))


def _listing(ch: KernelChannels) -> tuple[list[str], str]:
    """What /app shows, and the kernel's notices in the first cell (on stdout; and on
    stderr, were one a warning)."""
    first = ch.run_ok("import os\nprint(sorted(os.listdir('/app')))")
    return ast.literal_eval(first.printed().strip()), first.notices() + first.stream("stderr")


def assert_not_shown(ch: KernelChannels, place: dict[str, Any], shows: str = SECRET) -> None:
    listing, notice = _listing(ch)
    assert shows not in listing, f"/app shows the client's folder: {listing}"
    read = ch.execute(f"open({shows!r}).read()")
    assert read.status == "error" and SECRET_TEXT not in read.texts(), read.describe()
    lines = [line for line in notice.splitlines() if line.strip()]
    assert len(lines) == 1 and "not shown in /app" in lines[0], f"expected one line saying so: {notice!r}"
    for host in (str(place["base"]), "/etc", str(place["outside"])):
        assert host not in notice, f"the notice names a host path: {notice!r}"
    session = ch.run_ok("%session").texts()
    assert "not shown" in session and str(place["base"]) not in session, session


def assert_no_identity_from(place: dict[str, Any], refused: Path) -> None:
    """No registry row names a notebook in the refused folder: the identity did not come from it."""
    server: JupyterServer = place["server"]
    with SessionRegistry(server.data_dir / "wasm-kernel" / "sessions") as registry:
        rows = [e.notebook_path for e in registry.entries_under(str(refused))]
    assert not rows, f"the refused folder named a session: {rows}"


def test_a_notebook_inside_the_root_still_sees_its_folder(place: dict[str, Any]) -> None:
    with session(place["server"], {"path": "course/lesson.ipynb", "name": "lesson.ipynb"}) as ch:
        listing, notice = _listing(ch)
        assert "data.csv" in listing and notice == "", (listing, notice)


def test_an_absolute_session_name_does_not_show_another_users_folder(place: dict[str, Any]) -> None:
    name = str(place["outside"] / "hw1.ipynb")
    with session(place["server"], {"path": "course/lesson.ipynb", "name": name}) as ch:
        assert_not_shown(ch, place)
    assert_no_identity_from(place, place["outside"])


def test_a_climbing_session_name_does_not_show_another_users_folder(place: dict[str, Any]) -> None:
    with session(place["server"], {"path": "course/lesson.ipynb", "name": "../../bob/hw1.ipynb"}) as ch:
        assert_not_shown(ch, place)
    assert_no_identity_from(place, place["outside"])


def test_a_climbing_kernel_path_does_not_show_another_users_folder(place: dict[str, Any]) -> None:
    with kernel(place["server"], {"path": "../bob"}) as ch:
        assert_not_shown(ch, place)


def test_a_hidden_folder_inside_the_root_is_not_shown(place: dict[str, Any]) -> None:
    name = str(place["root"] / ".hidden" / "x.ipynb")
    with session(place["server"], {"path": "course/lesson.ipynb", "name": name}) as ch:
        assert_not_shown(ch, place)


def test_a_link_inside_the_root_is_not_followed_out(place: dict[str, Any]) -> None:
    with session(place["server"], {"path": "link-out/hw1.ipynb", "name": "hw1.ipynb"}) as ch:
        assert_not_shown(ch, place)


@pytest.mark.parametrize("folder", ["data_dir", "runtime_dir"])
def test_the_servers_own_jupyter_folders_are_not_shown(place: dict[str, Any], folder: str) -> None:
    name = str(getattr(place["server"], folder) / "x.ipynb")
    with session(place["server"], {"path": "course/lesson.ipynb", "name": name}) as ch:
        assert_not_shown(ch, place)


def test_etc_is_not_shown_to_a_server_running_as_root(place: dict[str, Any]) -> None:
    if not os.access("/etc/passwd", os.R_OK):
        pytest.skip("needs a readable /etc/passwd")
    with session(place["server"], {"path": "course/lesson.ipynb", "name": "/etc/x.ipynb"}) as ch:
        assert_not_shown(ch, place, shows="passwd")


def test_a_session_renamed_out_of_the_root_is_refused_at_its_restart(place: dict[str, Any]) -> None:
    server: JupyterServer = place["server"]
    model = server.post("/api/sessions", {"type": "notebook", "kernel": {"name": KERNEL},
                                          "path": "course/lesson.ipynb", "name": "lesson.ipynb"})
    try:
        server.request("PATCH", f"/api/sessions/{model['id']}",
                       {"path": "../bob/hw1.ipynb", "name": str(place["outside"] / "hw1.ipynb")})
        server.post(f"/api/kernels/{model['kernel']['id']}/restart")
        ch = server.connect(model["kernel"]["id"])
        try:
            ch.kernel_info()
            assert_not_shown(ch, place)
        finally:
            ch.close()
    finally:
        server.delete_session(model["id"])
    assert_no_identity_from(place, place["outside"])


def test_a_server_without_the_extension_hands_no_root_and_shows_no_folder(tmp_path: Path) -> None:
    root = tmp_path / "notebooks"
    (root / "course").mkdir(parents=True)
    (root / "course" / SECRET).write_text(SECRET_TEXT)
    # As `jupyter server extension disable wasm_kernel` does: in the (scratch) config dir, first on the path.
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"wasm_kernel": False}}}))
    server = JupyterServer(tmp_path, root)
    try:
        server.create_notebook("course/lesson.ipynb")
        with session(server, {"path": "course/lesson.ipynb", "name": "lesson.ipynb"}) as ch:
            listing, notice = _listing(ch)
            assert SECRET not in listing and "server extension" in notice and notice.count("\n") == 1, notice
    finally:
        assert not server.stop()
