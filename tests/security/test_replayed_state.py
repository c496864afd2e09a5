"""An older saved state of a notebook, put back where the latest one lives, as an attacker would.

A saved state is authenticated under the session's key, so an older state of the
same session verifies as well as the latest. These pin down that only the latest
wakes: each save takes a generation from the session's metadata (host-private)
into its authenticated manifest, and a start refuses, with one line and a fresh
start, a state that is not the recorded latest; also after a second kernel's
later save, and after a restart dropped the state. Real kernels over
jupyter_client, named by a notebook as Jupyter Server names them.

What these cannot stop, and need not: whoever can write the private folder (the
host's own user) can also put the old metadata back with the old state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from support.kernel_client import blank_notebook, notebook_kernel, saved_state_file

pytestmark = pytest.mark.slow  # several kernels per test

REFUSED = "wasm-kernel: the saved state was not resumed: it is not the session's latest saved state"


start, state_file = notebook_kernel, saved_state_file


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    return blank_notebook(tmp_path / "course" / "lesson.ipynb")


def run_and_shut_down(data: Path, notebook: Path, code: str) -> str:
    """A kernel on the notebook runs `code` and shuts down (saving its state); what
    its first cell said of the state it found (a resumed one on stdout, a refused
    one on stderr)."""
    k = start(data, notebook)
    try:
        run = k.execute(code)
        assert run.status == "ok", run.reply
        return run.notices() + run.stream("stderr")
    finally:
        k.shutdown()


def assert_refused_fresh_start(data: Path, notebook: Path) -> None:
    k = start(data, notebook)
    try:
        run = k.execute("print(globals().get('stage'))")
        assert run.stream() == "None\n", run.outputs
        notices = [line for line in run.stream("stderr").splitlines() if "saved state" in line]
        assert len(notices) == 1 and notices[0].startswith(REFUSED), notices
        assert "set aside as state.bin.set-aside-" in notices[0] and notices[0].endswith("this is a fresh start")
        assert run.reply["content"]["execution_count"] == 1
    finally:
        k.shutdown()


def test_an_older_state_copied_back_is_refused_with_one_line_and_a_fresh_start(tmp_path: Path,
                                                                             notebook: Path) -> None:
    data = tmp_path / "jupyter"
    run_and_shut_down(data, notebook, "stage = 'old'")
    old = tmp_path / "old-state.bin"
    shutil.copy2(state_file(data), old)  # what an attacker keeps aside
    said = run_and_shut_down(data, notebook, "print(stage); stage = 'new'")  # resumes it, then a newer save
    assert "resumed the state" in said
    shutil.copy2(old, state_file(data))  # put back where the latest one lives
    assert_refused_fresh_start(data, notebook)
    # Refused for good: the next start neither resumes it nor refuses it again.
    assert "saved state" not in run_and_shut_down(data, notebook, "pass")


def test_of_two_kernels_the_later_save_wins_and_the_earlier_never_resumes(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    first, second = start(data, notebook), start(data, notebook)
    try:
        assert first.execute("stage = 'first'").status == "ok"
        assert second.execute("stage = 'second'").status == "ok"
    finally:
        first.shutdown()  # saves first...
    earlier = tmp_path / "earlier.bin"
    shutil.copy2(state_file(data), earlier)
    second.shutdown()  # ...then the later save replaces it
    k = start(data, notebook)
    try:
        run = k.execute("print(stage)")
        assert run.printed() == "second\n" and "resumed the state" in run.notices(), run.outputs
    finally:
        k.shutdown()
    shutil.copy2(earlier, state_file(data))
    assert_refused_fresh_start(data, notebook)


def test_a_state_dropped_by_a_restart_never_wakes_again_when_copied_back(tmp_path: Path, notebook: Path) -> None:
    data = tmp_path / "jupyter"
    run_and_shut_down(data, notebook, "stage = 'before the restart'")
    path = state_file(data)
    dropped = tmp_path / "dropped.bin"
    shutil.copy2(path, dropped)
    k = start(data, notebook)
    try:
        assert k.execute("stage").status == "ok"
        k.restart()  # a fresh start, as on ipykernel: the saved state goes
        assert k.execute("print(globals().get('stage'))").stream() == "None\n"
        k.km.provisioner.process.kill()  # type: ignore[union-attr]  # SIGKILL: no save of its own
        k.km.provisioner.process.wait(10)  # type: ignore[union-attr]
    finally:
        k.shutdown()
    assert not path.exists()
    shutil.copy2(dropped, path)
    assert_refused_fresh_start(data, notebook)
