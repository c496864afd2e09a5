"""Class 6: identity never merges two notebooks.

Each case starts real kernels and compares the sessions they find: names that
differ must never share a session, the same name must find its own again, and
names a launcher or a hub may well produce (relative, non-UTF-8, with ':' or
spaces) must never stop a kernel from starting.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from support.security_harness import assert_kernel_answers

pytestmark = pytest.mark.slow  # several kernels per case


def _session_of(base: Path, cwd: Path, env: dict[str, str], connection_file: Path | None = None,
                notices: list[str] | None = None) -> str:
    # Kept after shutdown: an unnamed kernel's session is removed otherwise, and two
    # kernels whose identities clashed would then look apart.
    kernel = RunningKernel(base / "jupyter", cwd=cwd, env=env, connection_file=connection_file,
                           argv=["--WasmKernel.keep_unnamed_sessions_hours=1"])
    try:
        first = kernel.execute("1+1")
        assert_kernel_answers(first)
        if notices is not None:
            notices.append(first.notices())
        return kernel.session_id()
    finally:
        kernel.shutdown()


@pytest.fixture
def course(tmp_path: Path) -> Path:
    for folder in ("a", "b"):
        (tmp_path / "course" / folder).mkdir(parents=True)
        (tmp_path / "course" / folder / "lesson.ipynb").write_text("{}")
    return tmp_path / "course"


def test_a_relative_name_keeps_its_folders(tmp_path: Path, course: Path) -> None:
    a = _session_of(tmp_path, course, {"JPY_SESSION_NAME": "a/lesson.ipynb"})
    b = _session_of(tmp_path, course, {"JPY_SESSION_NAME": "b/lesson.ipynb"})
    assert a != b, "two notebooks of the same name in two folders shared a session"
    assert _session_of(tmp_path, course, {"JPY_SESSION_NAME": "a/lesson.ipynb"}) == a
    # The same notebook named absolutely is the same notebook.
    assert _session_of(tmp_path, course / "a", {"JPY_SESSION_NAME": str(course / "a" / "lesson.ipynb")}) == a


@pytest.mark.parametrize("name", ["missing/lesson.ipynb", "/no/such/folder/lesson.ipynb", "Untitled folder/x.ipynb"])
def test_a_name_that_cannot_be_resolved_gets_a_run_session_and_a_notice(
    tmp_path: Path, course: Path, name: str
) -> None:
    sessions = []
    for _ in range(2):
        kernel = RunningKernel(tmp_path / "jupyter", cwd=course, env={"JPY_SESSION_NAME": name})
        try:
            first = kernel.execute("1+1")
            assert_kernel_answers(first)
            notice = first.notices()  # information: on stdout
            assert first.stream("stderr") == ""
            assert "cannot identify its session because its folder does not exist" in notice, notice
            assert "a session of its own" in notice and str(tmp_path) not in notice
            assert kernel.execute("%session").displays()[0]["data"]["text/plain"].count("scope              run") == 1
            sessions.append(kernel.session_id())
        finally:
            kernel.shutdown()
    assert sessions[0] != sessions[1], "two kernels given the same unresolvable name shared a session"


def test_non_utf8_notebook_names_start_and_stay_apart(tmp_path: Path, course: Path) -> None:
    first = os.fsdecode(bytes(course / "a") + b"/le\xffsson.ipynb")
    second = os.fsdecode(bytes(course / "a") + b"/le\xfesson.ipynb")
    one = _session_of(tmp_path, course / "a", {"JPY_SESSION_NAME": first})
    other = _session_of(tmp_path, course / "a", {"JPY_SESSION_NAME": second})
    assert one != other
    assert _session_of(tmp_path, course / "a", {"JPY_SESSION_NAME": first}) == one


def test_a_non_utf8_notebook_folder_is_not_shown_and_the_kernel_runs(tmp_path: Path) -> None:
    folder = Path(os.fsdecode(bytes(tmp_path) + b"/cours\xe9"))
    folder.mkdir()
    notices: list[str] = []
    _session_of(tmp_path, folder, {"JPY_SESSION_NAME": str(folder / "lesson.ipynb")}, notices=notices)
    assert "not UTF-8" in notices[0], notices


@pytest.mark.parametrize("names", [("kernel-a:b.json", "kernel-a%3Ab.json"), ("kernel-with space.json", "kernel-with.json"),
                                   ("kernel- lead.json", "kernel-lead.json"), ("kernel-ü:ß.json", "kernel-ü%3Aß.json")])
def test_connection_file_names_with_colons_and_spaces_start_and_stay_apart(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    runtime = tmp_path / "runtime dir: with colon"
    runtime.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    one = _session_of(tmp_path, cwd, {}, connection_file=runtime / names[0])
    other = _session_of(tmp_path, cwd, {}, connection_file=runtime / names[1])
    assert one != other, names


@pytest.fixture
def notebook(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "nb").mkdir()
    yield tmp_path / "nb"


@pytest.mark.parametrize("users", [("a:b", "a%3Ab"), ("Ada Lovelace", "Ada"), (" padded ", "padded"),
                                   ("ユーザー", "ユーザ"), ("tab\tuser", "tab user"), ("x" * 2000, "x" * 2001)])
def test_hub_user_names_start_and_never_share_a_notebook(tmp_path: Path, notebook: Path, users: tuple[str, str]) -> None:
    env = {"JPY_SESSION_NAME": str(notebook / "lesson.ipynb")}
    one = _session_of(tmp_path, notebook, {**env, "JUPYTERHUB_USER": users[0]})
    other = _session_of(tmp_path, notebook, {**env, "JUPYTERHUB_USER": users[1]})
    assert one != other, users
    assert _session_of(tmp_path, notebook, {**env, "JUPYTERHUB_USER": users[0]}) == one


def test_escaping_is_injective_and_leaves_plain_names_alone() -> None:
    from wasm_kernel.sessions.identity import escape_part

    assert escape_part("alice") == "alice" and escape_part("Ada Lovelace") == "Ada Lovelace"
    names = ["a:b", "a%3Ab", "a%b", "a%25b", " a", "%20a", "a\tb", "a%09b", "ü:", "ü%3A", "x" * 5000, "x" * 5001]
    escaped = [escape_part(n) for n in names]
    assert len(set(escaped)) == len(names)
    assert all(":" not in e and e.isprintable() and e == e.strip() and len(e) <= 1024 for e in escaped)


def test_a_notebook_folder_removed_while_the_kernel_runs_leaves_app_working(tmp_path: Path, course: Path) -> None:
    folder = course / "a"
    kernel = RunningKernel(tmp_path / "jupyter", cwd=folder, env={"JPY_SESSION_NAME": str(folder / "lesson.ipynb")})
    try:
        assert "lesson.ipynb" in kernel.execute("import os; sorted(os.listdir('/app'))").of_type("execute_result")[0]["data"]["text/plain"]
        shutil.rmtree(folder)
        listed = kernel.execute("open('/app/mine.txt', 'w').write('x'); sorted(os.listdir('/app'))")
        assert listed.status == "ok" and listed.of_type("execute_result")[0]["data"]["text/plain"] == "['mine.txt']"
        assert_kernel_answers(kernel.execute("import bdb\n1+1"))
    finally:
        kernel.shutdown()


def test_four_kernels_opening_one_notebook_at_once_get_one_session_and_say_so(tmp_path: Path, course: Path) -> None:
    import threading

    env = {"JPY_SESSION_NAME": str(course / "a" / "lesson.ipynb")}
    kernels: list[RunningKernel] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            kernels.append(RunningKernel(tmp_path / "jupyter", cwd=course / "a", env=env))
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    try:
        assert not errors and len(kernels) == 4, errors
        notices = []
        for k in kernels:
            run = k.execute(f"open('/app/from-{len(notices)}.txt', 'w').write('x')\n1+1")
            assert run.status == "ok", run.reply
            notices.append(run.notices())
        assert len({k.session_id() for k in kernels}) == 1, "one notebook opened at once got several sessions"
        # Every kernel that found the session open says so; the files are shared.
        assert sum("also open in another kernel" in n for n in notices) >= 3, notices
        listed = kernels[0].execute("import os; sorted(n for n in os.listdir('/app') if n.startswith('from-'))")
        assert listed.of_type("execute_result")[0]["data"]["text/plain"] == str([f"from-{i}.txt" for i in range(4)])
    finally:
        for k in kernels:
            k.shutdown()


@pytest.mark.slow
def test_a_rename_racing_kernel_starts_never_loses_or_shares_a_session(tmp_path: Path) -> None:
    """The short form of benchmarks/race_rename_start.py: a rename followed by the
    server extension while kernels start on the old and the new name."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import race_rename_start

    result = race_rename_start.rename_race(120, tmp_path, progress=False)
    assert result["ok"], result["problems"]
    # Both orders happened: a start before the rename and one after it.
    assert result["old_start_before_rename"] and result["old_start_after_rename"], result
