"""`!cmd`, `x = !cmd`, %sx, %system and %%bash/%%sh in the guest: the confined shell
(guest_lib/_wasm_kernel_sh*) runs them as Python on the guest's own files, through
IPython's own system_piped and getoutput, under the cell's limits.

What each command prints is pinned against GNU in test_confined_shell_differential.py;
this file pins what only the guest can show: IPython's side, the notebook folder's
rules, the quota, limits and interrupts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from wasm_kernel import PythonSandbox, create_sandbox
from wasm_kernel.core.policy import ExecutionPolicy
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_overlay import NotebookFolder


@dataclass
class Setup:
    sb: PythonSandbox
    nb: Path  # the notebook's folder (host)
    ws: Path  # the session workspace (host)


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    nb, ws = tmp_path / "course", tmp_path / "ws"
    (nb / "examples").mkdir(parents=True)
    (nb / "examples" / "ex1.csv").write_text("a,b,c,d,message\n1,2,3,4,hello\n5,6,7,8,world\n")
    (nb / "examples" / "frame_pickle").write_bytes(b"\x80\x04pickled")
    (nb / "notes.txt").write_text("from the notebook folder\n")
    sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve(), max_depth=4)))
    assert isinstance(sb, PythonSandbox)
    try:
        yield Setup(sb, nb, ws)
    finally:
        sb.close()


def result(sb: PythonSandbox, code: str) -> str:
    r = sb.execute(code)
    assert r.success, (code, r.error, r.stdout, r.stderr)
    return [o.data["text/plain"] for o in r.outputs if o.kind == "execute_result"][-1]


def test_bang_cat_shows_a_notebook_folder_file_as_ipykernel_does(setup: Setup) -> None:
    r = setup.sb.execute("!cat examples/ex1.csv")
    assert r.success and r.stdout == "a,b,c,d,message\r\n1,2,3,4,hello\r\n5,6,7,8,world\r\n"


def test_a_captured_command_is_an_slist_with_its_errors(setup: Setup) -> None:
    r = setup.sb.execute("x = !ls examples nofile\nprint(type(x).__name__, list(x))")
    assert r.stdout == ("SList [\"ls: cannot access 'nofile': No such file or directory\", 'examples:', 'ex1.csv', "
                        "'frame_pickle']\n"), r
    assert result(setup.sb, "get_ipython().getoutput('wc -l examples/ex1.csv')") == "['3 examples/ex1.csv']"
    assert result(setup.sb, "%sx head -n 1 examples/ex1.csv") == "['a,b,c,d,message']"
    assert result(setup.sb, "x = !echo two words\nx.fields(1)") == "['words']"


def test_exit_code_is_the_last_commands_status(setup: Setup) -> None:
    assert result(setup.sb, "!cat nofile\n_exit_code") == "1"
    assert result(setup.sb, "!true\n_exit_code") == "0"
    r = setup.sb.execute("!curl https://example.com\n_exit_code")
    assert r.stdout.startswith("sh: 1: curl: not found in this sandbox (supported: cat, cd, cp, ")
    assert r.outputs[-1].data["text/plain"] == "127"


def test_ipython_substitutes_python_values_first(setup: Setup) -> None:
    r = setup.sb.execute("name = 'examples/ex1.csv'\nn = 2\n!head -n $n {name}")
    assert r.success and r.stdout == "a,b,c,d,message\r\n1,2,3,4,hello\r\n"


def test_bash_and_sh_cells_keep_stdout_and_stderr_apart(setup: Setup) -> None:
    r = setup.sb.execute("%%bash\necho out\necho err >&2\ncut -d, -f5 examples/ex1.csv | tail -n 2")
    assert r.success and r.stdout == "out\nhello\nworld\n" and r.stderr == "err\n"
    r = setup.sb.execute("%%sh\ncat nofile")
    assert r.error is not None and r.error.ename == "CalledProcessError"
    assert r.error.evalue == "Command 'b'cat nofile\\n'' returned non-zero exit status 1."


def test_writes_land_in_the_workspace_and_a_notebook_file_is_copied_up(setup: Setup) -> None:
    before = (setup.nb / "notes.txt").read_text()
    r = setup.sb.execute("!mkdir -p out && sort -r examples/ex1.csv > out/sorted.csv && echo more >> notes.txt")
    assert r.success, r
    assert (setup.ws / "out" / "sorted.csv").read_text().splitlines()[0] == "a,b,c,d,message"
    assert (setup.ws / "notes.txt").read_text() == before + "more\n"
    assert (setup.nb / "notes.txt").read_text() == before  # the notebook's folder never changes
    assert not (setup.nb / "out").exists()


def test_rm_of_a_notebook_folder_file_hides_it_in_this_session_only(setup: Setup) -> None:
    r = setup.sb.execute("!rm examples/frame_pickle\nimport os\nos.path.exists('examples/frame_pickle')")
    assert r.success and r.stdout == "" and r.outputs[-1].data["text/plain"] == "False", r
    assert (setup.nb / "examples" / "frame_pickle").read_bytes() == b"\x80\x04pickled"
    assert result(setup.sb, "!ls examples\n_exit_code") == "0"


def test_the_file_changes_of_a_shell_cell_are_listed(setup: Setup) -> None:
    r = setup.sb.execute("!mkdir out && cp examples/ex1.csv out/copy.csv && touch notes.txt")
    assert r.success
    assert "out/copy.csv" in r.files_created, r.files_created
    # notes.txt was only the notebook folder's: touching it copies it up (a new file
    # in the workspace), and the folder itself is unchanged.
    assert "notes.txt" in r.files_created + r.files_modified, (r.files_created, r.files_modified)


def test_a_command_runs_under_the_cells_deadline(setup: Setup) -> None:
    setup.sb.policy = setup.sb.policy.with_changes(deadline_seconds=1.0)
    r = setup.sb.execute("!sleep 30")
    assert r.trap == "deadline", r
    setup.sb.policy = setup.sb.policy.with_changes(deadline_seconds=None)
    assert result(setup.sb, "1 + 1") == "2"


def test_an_interrupt_stops_a_command_as_ipykernel_stops_one(setup: Setup) -> None:
    # ipykernel echoes ^C, the command's status is -2 (SIGINT), and the cell goes on.
    timer = threading.Timer(1.0, setup.sb.interrupt)
    timer.start()
    r = setup.sb.execute("!sleep 60\nprint('after', _exit_code)")  # status -2: ended by the interrupt
    timer.cancel()
    assert r.success and r.stdout == "^C\r\nafter -2\n", r


def test_writes_count_against_the_disk_quota(tmp_path: Path) -> None:
    sb = create_sandbox(workspace=tmp_path / "ws", policy=ExecutionPolicy(disk_max_bytes=1 << 20))
    try:
        assert sb.execute("open('big.txt', 'w').write('x' * 700_000)").success
        r = sb.execute("!cp big.txt copy.txt\n_exit_code")
        assert r.stdout.startswith("cp: "), r.stdout
        assert "quota" in r.stdout.lower() or "No space left" in r.stdout, r.stdout
        assert r.outputs[-1].data["text/plain"] == "1"
        assert sb.disk_usage()[0] <= 1 << 20
    finally:
        sb.close()


def test_python_version_and_which_python_describe_the_guest(setup: Setup) -> None:
    import re

    out = setup.sb.execute("!python --version && which python").stdout
    assert re.fullmatch(r"Python 3\.\d+\.\d+\r\n/usr/local/bin/python\r\n", out), out
