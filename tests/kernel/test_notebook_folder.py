"""The kernel shows the notebook's folder read-only under /app, as Jupyter starts
ipykernel in it; it refuses folders that would show far more than a notebook's
data, with one notice and no host path (kernel/notebook_folder.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from wasm_kernel.kernel.notebook_folder import count_files


@pytest.fixture
def course(tmp_path: Path) -> Path:
    folder = tmp_path / "course"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "heights.csv").write_text("name,height\nada,1.70\n")
    (folder / "helper.py").write_text("GREETING = 'hello from helper.py'\n")
    (folder / ".env").write_text("TOKEN=secret")
    return folder


@pytest.fixture
def kernel(tmp_path: Path, course: Path) -> Iterator[RunningKernel]:
    k = RunningKernel(tmp_path / "jupyter", cwd=course, env={"JPY_SESSION_NAME": str(course / "lesson.ipynb")})
    yield k
    k.km.shutdown_kernel(now=True)


def text(run: object) -> str:
    return "".join(str(m["content"]["data"]["text/plain"]) for m in run.outputs  # type: ignore[attr-defined]
                   if m["msg_type"] == "execute_result")


@pytest.mark.slow
def test_a_notebook_reads_the_files_beside_it(kernel: RunningKernel, course: Path) -> None:
    first = kernel.execute("import os\nsorted(os.listdir('.'))")
    assert first.stream("stderr") == "" and first.notices() == ""  # no notice: the folder is shown
    assert text(first) == "['data', 'helper.py']"
    assert text(kernel.execute("from helper import GREETING\nGREETING")) == "'hello from helper.py'"
    assert text(kernel.execute("open('data/heights.csv').read()")) == "'name,height\\nada,1.70\\n'"
    run = kernel.execute("open('.env')")
    assert run.reply["content"]["ename"] == "FileNotFoundError"


@pytest.mark.slow
def test_writes_land_in_the_workspace_and_are_reported_there(kernel: RunningKernel, course: Path) -> None:
    run = kernel.execute("open('data/heights.csv', 'a').write('bob,1.82\\n')")
    assert run.reply["content"]["metadata"]["files_created"] == ["data/heights.csv"]
    assert (course / "data" / "heights.csv").read_text() == "name,height\nada,1.70\n"
    read = kernel.execute("import pandas as pd\nlen(pd.read_csv('data/heights.csv'))")
    assert text(read) == "2"
    assert read.reply["content"]["metadata"]["files_created"] == []


def test_a_removed_notebook_file_shows_as_deleted_and_its_marker_nowhere(kernel: RunningKernel, course: Path) -> None:
    import json

    run = kernel.execute("import os\nos.remove('helper.py')\nos.remove('data/heights.csv')")
    metadata = run.reply["content"]["metadata"]
    assert metadata["files_deleted"] == ["data/heights.csv", "helper.py"] and metadata["files_created"] == []
    files = kernel.execute("%files")
    assert files.stream().startswith("No files")  # the workspace holds only the two markers
    shown = json.dumps([m["content"] for m in run.outputs + files.outputs], default=str)
    assert ".wasm-kernel-wh." not in shown and "heights.csv" in shown
    assert text(kernel.execute("sorted(os.listdir('.')), os.listdir('data')")) == "(['data'], [])"
    assert (course / "helper.py").exists() and (course / "data" / "heights.csv").exists()


@pytest.mark.slow
def test_session_says_whether_the_folder_is_shown(kernel: RunningKernel, course: Path) -> None:
    shown = kernel.execute("%session").displays()[0]["data"]["text/plain"]
    assert "shown read-only under /app" in shown and str(course) not in shown.split("notebook ")[0]


def _notice(tmp_path: Path, cwd: Path, **kwargs: object) -> tuple[str, str]:
    k = RunningKernel(tmp_path / "jupyter", cwd=cwd, **kwargs)  # type: ignore[arg-type]
    try:
        first = k.execute("import os\nprint(sorted(os.listdir('.')))")
        second = k.execute("1")
        assert second.notices() == "" and second.stream("stderr") == ""  # said once
        # Information, not an error: on stdout, before what the cell printed.
        assert first.stream("stderr") == ""
        return first.notices(), first.printed()
    finally:
        k.km.shutdown_kernel(now=True)


@pytest.mark.slow
def test_a_home_folder_is_refused_with_one_notice_and_no_path(tmp_path: Path) -> None:
    notice, listing = _notice(tmp_path, Path.home())
    assert notice.count("\n") == 1 and "is a home folder" in notice
    assert str(Path.home()) not in notice
    assert listing == "[]\n"


@pytest.mark.slow
def test_the_root_and_the_kernels_own_folders_are_refused(tmp_path: Path) -> None:
    notice, _ = _notice(tmp_path, Path("/"))
    assert "filesystem root" in notice
    # The kernel's sessions live under JUPYTER_DATA_DIR, here inside the notebook's folder.
    notebook_folder = tmp_path
    notice, listing = _notice(tmp_path, notebook_folder)
    assert "holds the kernel's own sessions" in notice and listing == "[]\n"


@pytest.mark.slow
def test_a_folder_with_too_many_files_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(30):
        (big / f"f{i}.txt").write_text("")
    notice, listing = _notice(tmp_path, big, argv=["--WasmKernel.notebook_files_max=20"])
    assert "more than 20 files" in notice and listing == "[]\n"


@pytest.mark.slow
def test_the_operator_can_turn_it_off(tmp_path: Path, course: Path) -> None:
    notice, listing = _notice(tmp_path, course, argv=["--WasmKernel.notebook_files=off"])
    assert notice == "" and listing == "[]\n"


@pytest.mark.slow
def test_the_notebook_cannot_turn_it_on_or_widen_it(kernel: RunningKernel) -> None:
    for line in ("%config WasmKernel.notebook_files = 'off'", "%config WasmKernel.notebook_files_depth = 50",
                 "%config WasmKernel.notebook_files_max = 10**9"):
        run = kernel.execute(line)
        assert run.reply["content"]["ename"] == "UsageError" and "operator" in run.reply["content"]["evalue"]


def test_counting_stops_past_the_limit_and_skips_hidden_and_deep(tmp_path: Path) -> None:
    (tmp_path / ".hidden").mkdir()
    for i in range(50):
        (tmp_path / ".hidden" / f"{i}").write_text("")
    (tmp_path / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "a" / "b" / "c" / "deep.txt").write_text("")
    assert count_files(tmp_path, max_depth=2, limit=100) == 2  # a, a/b
    assert count_files(tmp_path, max_depth=4, limit=100) == 4
    assert count_files(tmp_path, max_depth=4, limit=2) == 3  # stopped just past the limit


# --- a name that is a folder is not a notebook (kernel/notebook_identity.py) ----------------
# Jupyter Server sends os.path.join(cwd, "") for a session created with an empty name;
# keyed on it, every such notebook of the folder would share one session.


@pytest.mark.parametrize("name", ["{course}/", "{course}", "{course}/data/", "{course}/not-made-yet/"])
def test_a_session_name_that_names_a_folder_is_not_a_notebook(course: Path, name: str) -> None:
    from wasm_kernel.kernel.notebook_identity import find_notebook

    source = find_notebook({"JPY_SESSION_NAME": name.format(course=course)}, None)
    assert source.path is None and source.origin == "JPY_SESSION_NAME"
    assert source.problem == "it names a folder, not a notebook"


def test_a_connection_files_jupyter_session_that_names_a_folder_is_not_a_notebook(tmp_path: Path, course: Path) -> None:
    import json

    from wasm_kernel.kernel.notebook_identity import find_notebook

    connection = tmp_path / "kernel-abc.json"
    connection.write_text(json.dumps({"jupyter_session": str(course) + "/"}))
    source = find_notebook({}, str(connection))
    assert (source.path, source.origin, source.problem) == (None, "connection file", "it names a folder, not a notebook")


def test_a_folder_named_kernel_gets_a_session_of_its_own_with_a_notice(
    tmp_path: Path, course: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from wasm_kernel.kernel.notebook_identity import find_notebook, kernel_identity

    monkeypatch.chdir(course)
    source = find_notebook({"JPY_SESSION_NAME": str(course) + "/"}, None)
    one, notice = kernel_identity(source, "notebook", str(tmp_path / "kernel-one.json"), "ada")
    other, _ = kernel_identity(source, "notebook", str(tmp_path / "kernel-two.json"), "ada")
    assert (one.mode, one.scope_key) == ("run", "one") and other.key != one.key  # two kernels, two sessions
    assert notice is not None and "because it names a folder, not a notebook" in notice
    assert "a session of its own" in notice and str(course) not in notice and notice.count("\n") == 0
    # A notebook in that folder is still a notebook, with its own identity.
    lesson = find_notebook({"JPY_SESSION_NAME": str(course / "lesson.ipynb")}, None)
    assert lesson.path == str(course / "lesson.ipynb") and lesson.problem is None
    identity, notice = kernel_identity(lesson, "notebook", str(tmp_path / "kernel-one.json"), "ada")
    assert identity.mode == "notebook" and notice is None
