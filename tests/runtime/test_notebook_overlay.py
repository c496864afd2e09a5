"""The notebook's own folder under /app, read-only, beneath the session workspace
(runtime/notebook_overlay.py): relative paths resolve as they do next to the
notebook on ipykernel, writes go to the workspace, and the folder never changes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.folders import folder_state

from wasm_kernel import PythonSandbox, create_sandbox
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_overlay import NotebookFolder, join_union


@dataclass
class Setup:
    sb: PythonSandbox
    nb: Path  # the notebook's folder (host)
    ws: Path  # the session workspace (host)
    outside: Path  # a secret beside the notebook's folder


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    nb, ws = tmp_path / "course", tmp_path / "ws"
    (nb / "data" / "deep" / "er").mkdir(parents=True)
    (nb / "data" / "heights.csv").write_text("name,height\nada,1.70\nbob,1.82\n")
    (nb / "data" / "deep" / "er" / "bottom.txt").write_text("bottom")
    (nb / "helper.py").write_text("def f():\n    return 'helped'\n")
    (nb / "script.py").write_text("print('ran', __name__)\nresult = 6 * 7\n")
    (nb / "notes.txt").write_text("from the notebook folder\n")
    (nb / ".env").write_text("SECRET=hidden")
    (nb / ".git").mkdir()
    (nb / ".git" / "config").write_text("[core]")
    (nb / ".ipynb_checkpoints").mkdir()
    (nb / "data" / ".cache").write_text("hidden too")
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("must never be read")
    (nb / "link_out").symlink_to(outside)
    (nb / "link_out_rel").symlink_to("../outside-secret.txt")
    (nb / "link_etc").symlink_to("/etc")
    (nb / "link_in").symlink_to("data/heights.csv")
    (nb / "link_in_abs").symlink_to(nb / "notes.txt")
    (nb / "link_hidden").symlink_to(".env")
    (nb / "link_loop").symlink_to("link_loop")
    (nb / "link_dir").symlink_to("data")
    sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve(), max_depth=3)))
    assert isinstance(sb, PythonSandbox)
    assert sb.execute("import os").success
    try:
        yield Setup(sb, nb, ws, outside)
    finally:
        sb.close()


def run(s: Setup, code: str) -> str:
    r = s.sb.execute(code)
    assert r.success, (code, r.error, r.stderr)
    return r.stdout


def value(s: Setup, code: str) -> str:
    """repr() of the cell's last expression (not IPython's pretty form, which wraps)."""
    lines = code.rsplit("\n", 1)
    last = f"print(repr(({lines[-1]})), end='')"
    return run(s, last if len(lines) == 1 else f"{lines[0]}\n{last}")


def fails(s: Setup, code: str) -> tuple[str, str]:
    r = s.sb.execute(code)
    assert not r.success and r.error is not None, code
    return r.error.ename, r.error.evalue


# --- reading, as next to the notebook ------------------------------------------


def test_relative_paths_read_the_notebooks_files(setup: Setup) -> None:
    assert run(setup, "print(open('data/heights.csv').read(), end='')") == "name,height\nada,1.70\nbob,1.82\n"
    assert value(setup, "import pandas as pd\nround(float(pd.read_csv('data/heights.csv').height.sum()), 2)") == "3.52"
    assert value(setup, "from helper import f\nf()") == "'helped'"
    assert run(setup, "%run script.py") == "ran __main__\n"
    assert value(setup, "result") == "42"
    assert value(setup, "import os\nos.path.isfile('notes.txt'), os.path.isdir('data'), os.path.getsize('notes.txt')") == \
        "(True, True, 25)"


def test_listing_shows_both_layers_and_the_workspace_wins(setup: Setup) -> None:
    (setup.ws / "notes.txt").write_text("workspace copy\n")
    (setup.ws / "mine.txt").write_text("mine")
    listing = value(setup, "import os\nsorted(os.listdir('.'))")
    assert listing == "['data', 'helper.py', 'link_dir', 'link_in', 'link_in_abs', 'mine.txt', 'notes.txt', 'script.py']"
    assert run(setup, "print(open('notes.txt').read(), end='')") == "workspace copy\n"
    assert value(setup, "sorted(e.name for e in os.scandir('data'))") == "['deep', 'heights.csv']"
    assert value(setup, "import glob\nsorted(glob.glob('data/*.csv'))") == "['data/heights.csv']"


@pytest.mark.slow
def test_hidden_entries_are_invisible_by_every_path(setup: Setup) -> None:
    for path in (".env", ".git/config", "data/.cache", "./.env", "data/../.env", "data/deep/../../.git/config",
                 ".ipynb_checkpoints", "link_hidden"):
        ename, _ = fails(setup, f"open({path!r}).read()")
        assert ename in ("FileNotFoundError", "IsADirectoryError"), path
    assert value(setup, "import os\nos.path.exists('.env'), os.path.exists('.git'), os.path.lexists('.env')") == \
        "(False, False, False)"
    assert ".env" not in run(setup, "import os\nprint(os.listdir('.'), os.listdir('data'))")


def test_links_that_leave_the_folder_are_not_followed(setup: Setup) -> None:
    for path in ("link_out", "link_out_rel", "link_etc/passwd", "link_loop"):
        ename, _ = fails(setup, f"open({path!r}).read()")
        assert ename == "FileNotFoundError", path
    assert value(setup, "import os\n[os.path.exists(p) for p in ('link_out', 'link_out_rel', 'link_etc')]") == \
        "[False, False, False]"
    # Links inside the folder show as what they point to.
    assert value(setup, "open('link_in').read().splitlines()[0]") == "'name,height'"
    assert value(setup, "open('link_in_abs').read()") == "'from the notebook folder\\n'"
    assert value(setup, "sorted(os.listdir('link_dir'))") == "['deep', 'heights.csv']"
    assert value(setup, "os.path.islink('link_in')") == "False"


def test_nothing_beyond_the_depth_limit_shows(setup: Setup) -> None:
    # max_depth=3: data/deep/er is the third level; its files are the fourth.
    assert value(setup, "os.listdir('data/deep')") == "['er']"
    assert value(setup, "os.listdir('data/deep/er')") == "[]"
    assert fails(setup, "open('data/deep/er/bottom.txt')")[0] == "FileNotFoundError"


def test_the_folder_has_no_guest_path_of_its_own(setup: Setup) -> None:
    out = run(setup, "import os\nfor p in ('/', '/.wasm-kernel-notebook', '/.wasm-kernel-notebook/notes.txt'):\n"
                     "    try:\n        print(os.listdir(p) if p.endswith(('/', 'notebook')) else open(p).read())\n"
                     "    except OSError as e:\n        print(type(e).__name__)")
    assert "from the notebook folder" not in out and "notes.txt" not in out


# --- writing goes to the workspace ------------------------------------------------


def test_writes_never_change_the_notebooks_folder(setup: Setup) -> None:
    before = folder_state(setup.nb)
    run(setup, "open('data/heights.csv', 'a').write('cy,1.65\\n')")  # append: copied up first
    assert run(setup, "print(open('data/heights.csv').read(), end='')").endswith("bob,1.82\ncy,1.65\n")
    run(setup, "open('notes.txt', 'w').write('rewritten')")  # truncate: no copy needed
    assert value(setup, "open('notes.txt').read()") == "'rewritten'"
    run(setup, "f = open('helper.py', 'r+')\nf.seek(0, 2)\nf.write('# edited\\n')\nf.close()")
    run(setup, "open('data/new.csv', 'w').write('made in a folder only the notebook has')")
    run(setup, "open('script.py', 'a').write('# appended\\n')")  # append at the top: copied up too
    assert value(setup, "open('script.py').read().splitlines()[1:]") == "['result = 6 * 7', '# appended']"
    assert fails(setup, "open('notes.txt', 'x')")[0] == "FileExistsError"
    run(setup, "import os\nos.utime('script.py', (0, 0))")
    run(setup, "import shutil\nshutil.copy('data/heights.csv', 'data/copy.csv')")
    assert folder_state(setup.nb) == before
    assert (setup.ws / "data" / "heights.csv").read_text().endswith("cy,1.65\n")
    assert (setup.ws / "helper.py").read_text() == "def f():\n    return 'helped'\n# edited\n"
    assert (setup.ws / "data" / "new.csv").exists() and (setup.ws / "script.py").stat().st_mtime == 0
    assert not (setup.ws / "data" / "deep").exists()  # only what was written came up


def test_what_only_the_notebook_has_is_removed_from_the_view_not_from_disk(setup: Setup) -> None:
    # Whiteouts (runtime/notebook_folder_fs.py); tests/test_notebook_folder_whiteouts.py has the details.
    before = folder_state(setup.nb)
    run(setup, "import os\nos.remove('notes.txt')\nos.rename('helper.py', 'h2.py')\nos.rmdir('data/deep/er')")
    assert value(setup, "os.path.exists('notes.txt'), os.path.exists('helper.py'), open('h2.py').read()[:8]") == \
        "(False, False, 'def f():')"
    assert value(setup, "os.listdir('data/deep')") == "[]"
    ename, _ = fails(setup, "import os\nos.rename('data', 'd2')")  # a folder the notebook has cannot move
    assert ename == "OSError"
    assert fails(setup, "import os\nos.mkdir('data')")[0] == "FileExistsError"
    run(setup, "os.makedirs('data', exist_ok=True)")
    run(setup, "import shutil\nshutil.rmtree('data')")
    assert value(setup, "sorted(os.listdir('.'))") == "['h2.py', 'link_dir', 'link_in', 'link_in_abs', 'script.py']"
    assert folder_state(setup.nb) == before


def test_a_copied_up_file_that_is_deleted_is_gone(setup: Setup) -> None:
    # Removing a name removes it from /app, whichever layers had it; the notebook's
    # copy comes back only when the host deletes the workspace's marker (%rm of its folder).
    run(setup, "open('notes.txt', 'w').write('mine')\nimport os\nos.remove('notes.txt')")
    assert value(setup, "os.path.exists('notes.txt')") == "False"
    assert (setup.nb / "notes.txt").read_text() == "from the notebook folder\n"


def test_file_changes_list_only_workspace_writes(setup: Setup) -> None:
    r = setup.sb.execute("import pandas as pd\ndf = pd.read_csv('data/heights.csv')\nopen('notes.txt').read()")
    assert (r.files_created, r.files_modified, r.files_deleted) == ([], [], [])
    r = setup.sb.execute("open('notes.txt', 'a').write('more')")
    assert r.files_created == ["notes.txt"] and r.files_modified == []


# --- descriptors as a way round ----------------------------------------------------


def test_descriptors_of_the_notebooks_folder_are_read_only(setup: Setup) -> None:
    before = folder_state(setup.nb)
    setup_code = "import os\nd = os.open('data', os.O_RDONLY | os.O_DIRECTORY)\n"
    run(setup, setup_code)
    fd = value(setup, "os.open('heights.csv', os.O_RDONLY, dir_fd=d)")
    assert value(setup, f"os.read({fd}, 11)") == "b'name,height'"
    for code in ("os.open('heights.csv', os.O_RDWR, dir_fd=d)", "os.open('x', os.O_CREAT | os.O_WRONLY, dir_fd=d)",
                 "os.unlink('heights.csv', dir_fd=d)", "os.mkdir('m', dir_fd=d)", "os.symlink('/etc', 'l', dir_fd=d)",
                 "os.rename('heights.csv', 'r.csv', src_dir_fd=d, dst_dir_fd=d)",
                 "os.utime('heights.csv', (0, 0), dir_fd=d)"):
        assert fails(setup, code)[0] in ("OSError", "PermissionError", "NotImplementedError"), code
    assert fails(setup, f"os.write({fd}, b'pwned')")[0] == "OSError"
    for code in ("os.open('../../outside-secret.txt', os.O_RDONLY, dir_fd=d)", "os.open('/etc/passwd', os.O_RDONLY, dir_fd=d)",
                 "os.open('../.env', os.O_RDONLY, dir_fd=d)", "os.open('../link_out', os.O_RDONLY, dir_fd=d)"):
        assert fails(setup, code)[0] in ("PermissionError", "FileNotFoundError"), code
    assert folder_state(setup.nb) == before


def test_every_descriptor_number_is_refused_the_hidden_and_the_outside(setup: Setup) -> None:
    # Whatever descriptor the guest guesses (the hidden preopen among them), the
    # notebook's hidden files and the world outside stay out of reach.
    out = run(setup, "import os\nfor n in range(3, 40):\n    for p in ('.env', '../outside-secret.txt', '.git/config'):\n"
                     "        try:\n            print(n, p, os.read(os.open(p, os.O_RDONLY, dir_fd=n), 100))\n"
                     "        except OSError:\n            pass")
    assert out == ""


def test_hard_links_to_read_only_files_are_refused(setup: Setup) -> None:
    for code in ("os.link('/usr/local/lib/python315.zip', 'z')", "os.link('/opt/wasm-kernel/_wasm_kernel_shell.py', 's')",
                 "os.link('notes.txt', 'hl.txt')", "os.link('data/heights.csv', 'data/hl.csv')"):
        assert fails(setup, "import os\n" + code)[0] in ("PermissionError", "OSError", "FileNotFoundError"), code
    assert not (setup.ws / "hl.txt").exists() and (setup.nb / "notes.txt").stat().st_nlink == 1


@pytest.mark.slow
def test_a_rolled_back_cell_leaves_the_union_consistent(setup: Setup) -> None:
    setup.sb.policy = setup.sb.policy.with_changes(deadline_seconds=1.0)
    r = setup.sb.execute("import os, time\nds = [os.open('data', os.O_RDONLY | os.O_DIRECTORY) for _ in range(5)]\n"
                         "while True:\n    pass")
    assert r.trap == "deadline" and r.rolled_back
    setup.sb.policy = setup.sb.policy.with_changes(deadline_seconds=None)
    assert value(setup, "import os\nsorted(os.listdir('data')), open('notes.txt').read()") == \
        "(['deep', 'heights.csv'], 'from the notebook folder\\n')"


# --- the folder changes while the kernel runs --------------------------------------


def test_files_appearing_in_either_layer_show_at_once(setup: Setup) -> None:
    (setup.nb / "late.txt").write_text("late")
    assert value(setup, "open('late.txt').read()") == "'late'"
    (setup.ws / "late.txt").write_text("workspace late")
    assert value(setup, "open('late.txt').read()") == "'workspace late'"
    (setup.nb / ".late_hidden").write_text("x")
    assert value(setup, "import os\nos.path.exists('.late_hidden')") == "False"
    (setup.nb / "late_link").symlink_to(setup.outside)
    assert value(setup, "os.path.exists('late_link')") == "False"


def test_names_that_only_look_hidden_are_what_the_host_says(setup: Setup) -> None:
    # A name is hidden when it starts with "." on the host, as a file manager shows it;
    # a look-alike dot is an ordinary name there and here.
    (setup.nb / "\uff0eenv").write_text("fullwidth")
    (setup.nb / ".ENV").write_text("upper")
    assert value(setup, "open('\uff0eenv').read()") == "'fullwidth'"
    assert fails(setup, "open('.ENV')")[0] == "FileNotFoundError"
    assert fails(setup, "open('.env'.upper())")[0] == "FileNotFoundError"


def test_a_wide_folder_lists_completely(setup: Setup) -> None:
    wide = setup.nb / "wide"
    wide.mkdir()
    for i in range(3000):
        (wide / f"f{i:05d}.txt").write_text("")
    assert value(setup, "len(os.listdir('wide')), len(set(os.listdir('wide')))") == "(3000, 3000)"


@pytest.mark.parametrize(
    "base,path,expected",
    [("", "a/b", "a/b"), ("a", "../b", "b"), ("", "..", None), ("a", "../..", None), ("", "/etc", None),
     ("a/b", "./c/../d", "a/b/d"), ("", "", ""), ("", "a//b/", "a/b")],
)
def test_union_paths_never_climb_out(base: str, path: str, expected: str | None) -> None:
    assert join_union(base, path) == expected
