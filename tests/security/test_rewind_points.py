"""%rewind's points are a way in: files on the host that a rewind copies into the guest.

Each point's delta is authenticated with its interpreter line's own key and bound to
its name, so one changed on disk, or copied from another session, is refused with one
line and nothing changed; the points folder is never followed through a link planted
in its place, and the guest cannot reach it."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from support.kernel_client import RunningKernel, blank_notebook, notebook_kernel


def _points_folder(kernel: RunningKernel) -> Path:
    return kernel.sessions_root / ".wasm-kernel" / "points" / kernel.session_id()


def _written(folder: Path) -> list[Path]:
    """The deltas on disk once the writer thread has written them (cells 1 and 2's by
    the end of cell 3's checkpoint)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = sorted(folder.glob("*.delta"))
        if found and not list(folder.glob(".*.tmp")):
            return found
        time.sleep(0.05)
    raise TimeoutError(f"no delta written in {folder}")


def _flip_a_bit(deltas: list[Path]) -> None:
    """One bit in each delta's pages: a forged state."""
    for delta in deltas:
        data = bytearray(delta.read_bytes())
        data[-100] ^= 0x01
        delta.write_bytes(bytes(data))


def _refused_in_one_line(kernel: RunningKernel) -> None:
    """%rewind 1 refuses the forged delta in one line, and the interpreter is as it was."""
    run = kernel.execute("%rewind 1", timeout=120)
    err = run.stream("stderr")
    assert run.status == "error" and "not the one this interpreter wrote" in err and err.count("\n") == 1, err
    assert _x(kernel) == "3"


def _three_cells(kernel: RunningKernel) -> None:
    for n in (1, 2, 3):
        assert kernel.execute(f"x = {n}", timeout=120).status == "ok"


def _x(kernel: RunningKernel) -> str:
    run = kernel.execute("x", timeout=120)
    return run.of_type("execute_result")[0]["data"]["text/plain"]


def test_a_delta_changed_on_disk_is_refused_in_one_line_and_nothing_changes(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        _three_cells(kernel)
        folder = _points_folder(kernel)
        kernel.execute("%timeline", timeout=120)  # the deltas on the way back to cell 1 are on disk
        _flip_a_bit(_written(folder))
        _refused_in_one_line(kernel)
    finally:
        kernel.shutdown()


def test_another_sessions_delta_under_the_same_name_is_refused(tmp_path: Path) -> None:
    one = RunningKernel(tmp_path / "one")
    two = RunningKernel(tmp_path / "two")
    try:
        for kernel in (one, two):
            _three_cells(kernel)
        theirs, mine = _points_folder(one), _points_folder(two)
        copied = 0
        _written(mine)
        for delta in _written(theirs):
            if (mine / delta.name).exists():
                (mine / delta.name).write_bytes(delta.read_bytes())
                copied += 1
        assert copied, "the two sessions' points have the same names"
        run = two.execute("%rewind 1", timeout=120)
        assert run.status == "error" and "not the one this interpreter wrote" in run.stream("stderr")
        assert _x(two) == "3"
    finally:
        one.shutdown()
        two.shutdown()


def _plant_link(tmp_path: Path, place: str) -> tuple[RunningKernel, Path, Path]:
    """A notebook's kernel run once (its session made), then a link to a folder outside
    planted at `place` in its points folder ('' for the folder itself), and the
    notebook's next kernel started: (that kernel, the link, the outside folder)."""
    notebook = blank_notebook(tmp_path / "nb" / "n.ipynb")
    data = tmp_path / "data"
    kernel = notebook_kernel(data, notebook)
    try:
        kernel.execute("x = 0", timeout=120)
        folder = _points_folder(kernel)
    finally:
        kernel.shutdown()
    outside = tmp_path / "outside"
    outside.mkdir()
    link = folder / place if place else folder
    if place:
        folder.mkdir(parents=True, exist_ok=True)
    if link.exists():
        shutil.rmtree(link)
    os.symlink(outside, link)
    return notebook_kernel(data, notebook), link, outside


def test_a_link_planted_in_place_of_the_points_folder_is_never_followed(tmp_path: Path) -> None:
    kernel, folder, outside = _plant_link(tmp_path, "")
    try:
        _three_cells(kernel)
        run = kernel.execute("%rewind 1", timeout=120)
        assert run.status == "error" and run.stream("stderr").count("\n") == 1
        assert _x(kernel) == "3"
        assert list(outside.iterdir()) == [], "a delta was written through the planted link"
    finally:
        kernel.shutdown()
    assert folder.is_symlink()  # left as it was, not followed to remove what it points at


def test_the_guest_cannot_reach_the_points(tmp_path: Path) -> None:
    kernel = RunningKernel(tmp_path / "data")
    try:
        _three_cells(kernel)
        probe = kernel.execute(
            "import os\nfound = []\n"
            "for top in ('/', '/app', '/tmp'):\n"
            "    for d, _, files in os.walk(top):\n"
            "        found += [f for f in files if f.endswith('.delta')]\n"
            "print(len(found))", timeout=120)
        assert probe.printed() == "0\n", probe.outputs
    finally:
        kernel.shutdown()


def test_a_link_planted_where_the_file_contents_go_is_never_followed(tmp_path: Path) -> None:
    kernel, _, outside = _plant_link(tmp_path, "files")
    try:
        assert kernel.execute("open('/app/secret.txt', 'w').write('s' * 1000)", timeout=120).status == "ok"
        assert kernel.execute("open('/app/secret.txt', 'w').write('t' * 1000)", timeout=120).status == "ok"
        table = kernel.execute("%timeline", timeout=120).of_type("display_data")[0]["data"]["text/plain"]
        assert "files are not kept" in table.splitlines()[0], table
        assert list(outside.iterdir()) == [], "a file's content was copied through the planted link"
    finally:
        kernel.shutdown()


def test_a_delta_changed_while_its_kernel_was_shut_down_is_refused_after_the_resume(tmp_path: Path) -> None:
    notebook = blank_notebook(tmp_path / "nb" / "kept.ipynb")
    data = tmp_path / "data"
    kernel = notebook_kernel(data, notebook)
    try:
        _three_cells(kernel)
        folder = _points_folder(kernel)
    finally:
        kernel.shutdown()  # kept: the points' deltas stay, under a key derived from the state's
    _flip_a_bit(_written(folder))
    kernel = notebook_kernel(data, notebook)
    try:
        assert _x(kernel) == "3"  # resumed
        _refused_in_one_line(kernel)
    finally:
        kernel.shutdown()
