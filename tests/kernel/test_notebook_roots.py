"""Where a notebook's folder may lie (kernel/notebook_roots.py) and what is never
shown wherever it lies (kernel/notebook_folder.py): the rule on real folders."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from wasm_kernel.kernel.notebook_folder import choose_notebook_folder
from wasm_kernel.kernel.notebook_identity import NotebookSource, kernel_identity, place_notebook
from wasm_kernel.kernel.notebook_roots import SERVER_ROOT_ENV, NotebookRoots, Placement, launched_by_server

LOCAL = ["/usr/bin/python3", "-m", "pytest"]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "root" / "course" / "week1").mkdir(parents=True)
    (tmp_path / "root" / ".local" / "share").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "root" / "out").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return tmp_path / "root"


def served(root: Path, *operator: str) -> NotebookRoots:
    return NotebookRoots.for_kernel({SERVER_ROOT_ENV: str(root)}, operator, parent_command=LOCAL)


def test_a_folder_inside_the_servers_root_is_placed_link_free(root: Path) -> None:
    placed = served(root).place(root / "course" / "week1")
    assert placed == Placement(root / "course" / "week1", root)
    assert served(root).place(root) == Placement(root, root)


@pytest.mark.parametrize("where", ["/etc", "{root}/..", "{root}/course/../../elsewhere", "{root}2"])
def test_a_folder_outside_the_root_is_refused_however_it_is_spelt(root: Path, where: str) -> None:
    placed = served(root).place(where.format(root=root))
    assert placed.path is None and placed.refused == "it lies outside this server's notebooks"


def test_a_link_or_a_hidden_folder_on_the_way_is_refused(root: Path) -> None:
    assert served(root).place(root / "out").refused == "a link lies on the way to it"
    assert served(root).place(root / ".local" / "share").refused == "it is or lies in a hidden folder"
    assert served(root).place(root / "missing").refused == "it cannot be read"


def test_a_root_reached_through_a_link_is_read_both_ways(root: Path, tmp_path: Path) -> None:
    (tmp_path / "via").symlink_to(root, target_is_directory=True)
    roots = served(tmp_path / "via")
    assert roots.place(tmp_path / "via" / "course").path == root / "course"
    assert roots.place(root / "course").path == root / "course"


def test_the_operators_roots_admit_folders_beside_the_servers(root: Path, tmp_path: Path) -> None:
    roots = served(root, str(tmp_path / "elsewhere"))
    assert roots.place(tmp_path / "elsewhere").path == tmp_path / "elsewhere"
    assert roots.place("/etc").path is None
    alone = NotebookRoots.for_kernel({}, [str(tmp_path / "elsewhere")], parent_command=LOCAL)
    assert alone.place(root).refused == "it lies outside the folders the operator lists (c.WasmKernel.notebook_roots)"


def test_an_empty_handed_root_trusts_nothing_of_the_servers(root: Path) -> None:
    roots = NotebookRoots.for_kernel({SERVER_ROOT_ENV: ""}, [], parent_command=LOCAL)
    assert roots.confined and roots.place(root).path is None


def test_a_local_launcher_is_trusted_and_a_server_without_the_extension_is_not(root: Path) -> None:
    assert NotebookRoots.for_kernel({}, [], parent_command=LOCAL).place(root / "out").path == Path(
        os.path.realpath(root / "out"))
    for command in (["/opt/venv/bin/python", "/opt/venv/bin/jupyter-lab"], ["python3", "-m", "jupyter_server"],
                    ["/usr/bin/python3", "-m", "jupyterhub.singleuser", "--port=1"], ["jupyter-notebook"]):
        assert launched_by_server(command), command
        placed = NotebookRoots.for_kernel({}, [], parent_command=command).place(root)
        assert placed.path is None and "server extension" in (placed.refused or "")
    assert not launched_by_server(["/usr/bin/python3", "/usr/bin/papermill", "jupyter-lab.ipynb"])


def test_a_notebook_outside_the_roots_names_no_session_and_says_so_once(root: Path, tmp_path: Path) -> None:
    source = NotebookSource(str(tmp_path / "elsewhere" / "hw1.ipynb"), "JPY_SESSION_NAME")
    placed_source, placement = place_notebook(source, served(root), str(root))
    assert placed_source.path is None and placed_source.outside
    identity, notice = kernel_identity(placed_source, "notebook", str(tmp_path / "kernel-k1.json"), "ada",
                                       where=str(root))
    assert identity.mode == "run" and identity.notebook_path == str(root)
    assert notice is not None and notice.count("\n") == 0 and str(tmp_path) not in notice
    choice = choose_notebook_folder(placement, mode="read", max_files=100, max_depth=6, protected=[], quiet=True)
    assert choice.folder is None and choice.notice is None  # the identity's line says it


def test_a_placed_notebook_is_named_by_its_link_free_path(root: Path, tmp_path: Path) -> None:
    (tmp_path / "via").symlink_to(root, target_is_directory=True)
    source = NotebookSource(str(tmp_path / "via" / "course" / "hw1.ipynb"), "JPY_SESSION_NAME")
    placed_source, placement = place_notebook(source, served(tmp_path / "via"), str(root))
    assert placed_source.path == str(root / "course" / "hw1.ipynb") and placement.path == root / "course"


def _refusal(folder: Path, root: Path | None = None) -> str | None:
    return choose_notebook_folder(Placement(folder, root), mode="read", max_files=1000, max_depth=6,
                                  protected=[]).refused


def test_jupyterhubs_folder_and_a_runtime_folder_are_never_shown(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    (hub / "course").mkdir(parents=True)
    (hub / "jupyterhub_cookie_secret").write_text("x")
    assert _refusal(hub) == "it is or holds JupyterHub's own folder (its cookie secret or database)"
    assert _refusal(tmp_path) == "it is or holds JupyterHub's own folder (its cookie secret or database)"
    assert _refusal(hub / "course") is None  # a folder inside it shows none of it
    runtime = tmp_path / "rt"
    runtime.mkdir()
    (runtime / "kernel-0a1b.json").write_text("{}")
    assert "Jupyter runtime folder" in (_refusal(runtime) or "")


def test_no_folder_in_any_sessions_root_is_shown(tmp_path: Path) -> None:
    sessions = tmp_path / "bob-sessions"
    (sessions / ".wasm-kernel").mkdir(parents=True)
    (sessions / "5f0c" / "sub").mkdir(parents=True)
    assert _refusal(sessions / "5f0c" / "sub") == (
        "it lies in a sessions folder (every session's workspace and saved interpreter)")
    assert "a sessions folder" in (_refusal(sessions) or "")


def test_jupyters_own_folders_are_never_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "course-config"
    config.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(config))
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    for folder in (config, data, tmp_path):
        assert _refusal(folder) == "it is, lies in or holds one of Jupyter's own folders (data, config or runtime)"


def test_under_a_root_wider_than_a_home_another_users_home_is_theirs() -> None:
    import pwd

    found = [(Path(e.pw_dir), d) for e in pwd.getpwall() if e.pw_uid != os.geteuid() and e.pw_dir not in ("", "/")
             and os.path.isdir(e.pw_dir) and os.access(e.pw_dir, os.R_OK)
             for d in sorted(os.listdir(e.pw_dir)) if not d.startswith(".") and os.path.isdir(os.path.join(e.pw_dir, d))]
    if not found:
        pytest.skip("no other user's home folder with a folder in it on this machine")
    home, sub = found[0]
    home = Path(os.path.realpath(home))
    assert _refusal(home / sub, Path("/")) == "it lies in another user's home folder"
    assert _refusal(home / sub, home) != "it lies in another user's home folder"  # a root inside it: its owner's choice
