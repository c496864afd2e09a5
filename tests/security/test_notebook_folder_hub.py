"""One student never sees another's folders through the notebook folder (issue 40, class 1).

The course hub of docs/teaching.md on a real JupyterHub with configurable-http-proxy:
two students, alice and bob, share one OS account (SimpleLocalProcessSpawner), each
with a folder of their own as their server's root, and the servers run as root in
CI. alice names, through ordinary Jupyter Server requests to her own server, folders
the account can read: bob's notebooks, bob's sessions (his workspace and saved
interpreter), the instructor's nbgrader source, the hub's own folder (its cookie
secret), her own Jupyter data folder, /etc. None may show under /app.
"""

from __future__ import annotations

import ast
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from support.course_hub import course_hub
from support.hub import UserServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]

SECRET_TEXT = "bob's notes: the answer to q3 is 17"
SESSIONS = ".local/share/jupyter/wasm-kernel/sessions"


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with course_hub(tmp_path_factory.mktemp("hub-folders")) as course:
        users = course["course_dir"] / "users"
        (users / "bob" / "course" / "notes.txt").write_text(SECRET_TEXT)
        bob_workspace = users / "bob" / SESSIONS / course["sessions"]["bob"]["id"]
        (bob_workspace / "notes.txt").write_text(SECRET_TEXT)
        solution = course["course_dir"] / "source" / "ps1"
        solution.mkdir(parents=True)
        (solution / "notes.txt").write_text(SECRET_TEXT)
        course["hub_dir"] = course["hub"].base
        assert (course["hub_dir"] / "jupyterhub_cookie_secret").exists()
        yield course


def fresh() -> str:
    """A notebook path of alice's with no session yet (the sessions API hands an
    existing session back for a path it knows, with its kernel)."""
    return f"course/attack-{uuid.uuid4().hex[:8]}.ipynb"


@contextmanager
def alices_session(course: dict[str, Any], body: dict[str, Any], endpoint: str = "/api/sessions") -> Iterator[Any]:
    alice: UserServer = course["servers"]["alice"]
    status, model = alice.call("POST", endpoint, {"kernel": {"name": "wasm-python"}, "name": "wasm-python",
                                                  "type": "notebook", **body})
    assert status in (200, 201), (status, model)
    kernel_id = model["kernel"]["id"] if "kernel" in model and endpoint == "/api/sessions" else model["id"]
    ch = alice.connect(kernel_id)
    try:
        yield ch
    finally:
        ch.close()
        if endpoint == "/api/sessions":
            alice.call("DELETE", f"/api/sessions/{model['id']}")
        else:
            alice.call("DELETE", f"/api/kernels/{kernel_id}")


def assert_nothing_shown(ch: Any, course: dict[str, Any], name: str = "notes.txt") -> None:
    first = ch.run_ok("import os\nprint(sorted(os.listdir('/app')))")
    listing = ast.literal_eval(first.printed().strip())
    assert name not in listing, f"alice's /app shows a folder that is not hers: {listing}"
    read = ch.execute(f"open({name!r}).read()")
    assert read.status == "error" and SECRET_TEXT not in read.texts(), read.describe()
    notice = [line for line in first.notices().splitlines() if line.strip()]
    assert len(notice) == 1 and "not shown in /app" in notice[0], notice
    assert str(course["hub_dir"]) not in notice[0] and "/etc" not in notice[0], notice


def test_a_session_named_in_the_other_students_folder_shows_nothing_of_it(course: dict[str, Any]) -> None:
    name = str(course["course_dir"] / "users" / "bob" / "course" / "hw1.ipynb")
    with alices_session(course, {"path": fresh(), "name": name}) as ch:
        assert_nothing_shown(ch, course)


def test_a_session_named_in_the_other_students_workspace_shows_nothing_of_it(course: dict[str, Any]) -> None:
    workspace = course["course_dir"] / "users" / "bob" / SESSIONS / course["sessions"]["bob"]["id"]
    with alices_session(course, {"path": fresh(), "name": str(workspace / "x.ipynb")}) as ch:
        assert_nothing_shown(ch, course)


def test_a_kernel_path_climbing_to_the_other_student_shows_nothing_of_theirs(course: dict[str, Any]) -> None:
    with alices_session(course, {"path": "../bob/course"}, endpoint="/api/kernels") as ch:
        assert_nothing_shown(ch, course)


def test_the_instructors_source_folder_is_not_shown(course: dict[str, Any]) -> None:
    name = str(course["course_dir"] / "source" / "ps1" / "ps1.ipynb")
    with alices_session(course, {"path": fresh(), "name": name}) as ch:
        assert_nothing_shown(ch, course)


def test_the_hubs_own_folder_is_not_shown(course: dict[str, Any]) -> None:
    name = str(course["hub_dir"] / "x.ipynb")
    with alices_session(course, {"path": fresh(), "name": name}) as ch:
        assert_nothing_shown(ch, course, name="jupyterhub_cookie_secret")


def test_a_students_own_jupyter_data_folder_is_not_shown(course: dict[str, Any]) -> None:
    alice: UserServer = course["servers"]["alice"]
    (alice.data_dir / "notes.txt").write_text(SECRET_TEXT)
    with alices_session(course, {"path": fresh(), "name": str(alice.data_dir / "x.ipynb")}) as ch:
        assert_nothing_shown(ch, course)


def test_etc_is_not_shown_by_a_server_running_as_root(course: dict[str, Any]) -> None:
    if not os.access("/etc/passwd", os.R_OK):
        pytest.skip("needs a readable /etc/passwd")
    with alices_session(course, {"path": fresh(), "name": "/etc/x.ipynb"}) as ch:
        assert_nothing_shown(ch, course, name="passwd")


def test_a_session_moved_to_the_other_students_folder_is_refused_at_restart(course: dict[str, Any]) -> None:
    alice: UserServer = course["servers"]["alice"]
    status, model = alice.call("POST", "/api/sessions", {"path": fresh(), "name": "hw1.ipynb", "type": "notebook",
                                                         "kernel": {"name": "wasm-python"}})
    assert status in (200, 201), model
    try:
        name = str(course["course_dir"] / "users" / "bob" / "course" / "hw1.ipynb")
        status, _ = alice.call("PATCH", f"/api/sessions/{model['id']}", {"name": name})
        assert status == 200
        status, _ = alice.call("POST", f"/api/kernels/{model['kernel']['id']}/restart")
        assert status == 200
        ch = alice.connect(model["kernel"]["id"])
        try:
            ch.kernel_info()
            assert_nothing_shown(ch, course)
        finally:
            ch.close()
    finally:
        alice.call("DELETE", f"/api/sessions/{model['id']}")
