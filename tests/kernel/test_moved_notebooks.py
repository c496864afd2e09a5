"""A notebook moved outside Jupyter (a bare `mv`) is told where its work went.

Real kernels over jupyter_client, named by a notebook as Jupyter Server names them
(JPY_SESSION_NAME), and the real `wasm-kernel sessions move` in a subprocess: the
moved notebook's first cell says in one line that an earlier session of its file
name exists, with the command that takes it back, relative to the notebook's
folder; that command, run after the kernel is shut down, brings the files back.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli_runs import wk_as_user
from support.kernel_client import RunningKernel, blank_notebook, notebook_kernel

pytestmark = pytest.mark.slow  # several kernels per test

EARLIER = re.compile(
    r"wasm-kernel: this notebook has a new, empty session; an earlier session of hw1\.ipynb "
    r"\(last used \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC\) belonged to (?P<old>\S+), which is gone: to take it back, "
    r"shut this kernel down and run `(?P<command>[^`]+)` in this notebook's folder"
)
WRITE = "open('/app/answers.txt', 'w').write('42')"


def cli_env(data: Path) -> dict[str, str]:
    """The user's shell: the same Jupyter data folder as their kernels, so the CLI
    finds the sessions where the kernel keeps them (no --root)."""
    return {**{k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}, "JUPYTER_DATA_DIR": str(data)}


def typed(command: str, data: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command as the line shows it, typed in a shell in `cwd`."""
    argv = shlex.split(command)
    assert argv[0] == "wasm-kernel", command
    return wk_as_user(cli_env(data), *argv[1:], cwd=cwd)


def worked_on(data: Path, notebook: Path) -> str:
    """A notebook that ran a cell writing a file in /app, shut down; its session id."""
    k = notebook_kernel(data, notebook)
    try:
        assert k.execute(WRITE).status == "ok"
        return k.session_id()
    finally:
        k.shutdown()


def earlier_lines(k: RunningKernel) -> tuple[list[str], str]:
    """The first cell's lines about an earlier session, and all it showed."""
    first = k.execute("print('hello')")
    assert first.status == "ok", first.reply
    shown = first.stream() + first.stream("stderr")
    return [line for line in shown.splitlines() if "earlier session" in line], shown


def test_a_notebook_moved_by_mv_says_where_its_session_is_and_the_command_takes_it_back(tmp_path: Path) -> None:
    data = tmp_path / "jupyter"
    old = blank_notebook(tmp_path / "old" / "hw1.ipynb")
    session = worked_on(data, old)
    new = tmp_path / "course" / "hw1.ipynb"
    new.parent.mkdir()
    old.rename(new)  # mv old/hw1.ipynb course/

    k = notebook_kernel(data, new)
    try:
        lines, shown = earlier_lines(k)
        assert len(lines) == 1, shown
        found = EARLIER.fullmatch(lines[0])
        assert found is not None, lines[0]
        assert found["old"] == "../old/hw1.ipynb"
        assert found["command"] == "wasm-kernel sessions move --replace ../old/hw1.ipynb hw1.ipynb"
        assert str(tmp_path) not in shown  # relative paths only: no host path reaches the notebook
        assert k.execute("import os; print(os.path.exists('/app/answers.txt'))").printed() == "False\n"
        # While this kernel holds the new session, the command changes nothing.
        busy = typed(found["command"], data, new.parent)
        assert busy.returncode == 1 and len(busy.stderr.splitlines()) == 1, busy.stderr
        assert "is in use by a running kernel: shut it down first; nothing was changed" in busy.stderr
    finally:
        k.shutdown()

    moved = typed(found["command"], data, new.parent)
    assert moved.returncode == 0, moved.stderr
    k = notebook_kernel(data, new)
    try:
        back = k.execute("print(open('/app/answers.txt').read())")
        assert back.printed() == "42\n", back.reply
        assert "earlier session" not in back.stream()
        assert k.session_id() == session
    finally:
        k.shutdown()


def test_no_line_for_a_copy_whose_original_is_still_there_nor_for_a_name_never_used(tmp_path: Path) -> None:
    data = tmp_path / "jupyter"
    original = blank_notebook(tmp_path / "old" / "hw1.ipynb")
    worked_on(data, original)
    copy = tmp_path / "course" / "hw1.ipynb"
    copy.parent.mkdir()
    shutil.copy(original, copy)  # cp, not mv: the original keeps its session

    for notebook in (copy, blank_notebook(tmp_path / "course" / "hw2.ipynb")):
        k = notebook_kernel(data, notebook)
        try:
            lines, shown = earlier_lines(k)
            assert lines == [], shown
        finally:
            k.shutdown()

    # The contrast: once the original is gone, another copy is told of its session.
    original.unlink()
    k = notebook_kernel(data, blank_notebook(tmp_path / "other" / "hw1.ipynb"))
    try:
        lines, shown = earlier_lines(k)
        assert len(lines) == 1, shown
        found = EARLIER.fullmatch(lines[0])
        assert found is not None and found["old"] == "../old/hw1.ipynb", lines[0]
    finally:
        k.shutdown()
