"""The notebook's folder under /app, attacked on the host side while cells run.

- A folder swapped for a link to outside, thousands of times while the guest copies a
  file up: the secret outside never reaches the workspace (short form of
  benchmarks/race_notebook_folder.py swap; on the code before openat walks it leaked
  about once in 65 rounds). Each round copies a fresh file up (removing a copy to
  copy the same file again would leave a whiteout instead).
- A folder swapped for a link to the folder's own hidden .private/, by a host process,
  while the guest reads and stats a file under it: the hidden file's content and size
  never reach it (short form
  of ... hidden; while wasmtime resolved the walked path whole, about one read in 20
  got the hidden file).
- A kill -9 in the middle of a copy-up never leaves a partial copy that shadows the
  notebook's file, and the next start sweeps the temporaries (short form of ... kill9).
- Two sandboxes of one notebook appending to the same notebook file lose no line.
- FIFOs, sockets and devices in the notebook's folder are invisible and never block.
- The system temp folder and folders private to kernels are never a notebook folder.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from wasm_kernel import create_sandbox
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.guest_scratch import scratch_parent
from wasm_kernel.runtime.notebook_folder_fs import COPY_PREFIX
from wasm_kernel.runtime.notebook_overlay import NotebookFolder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import race_notebook_folder  # noqa: E402

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]  # races run for many rounds, kill -9 included


def test_a_folder_swapped_for_a_link_mid_copy_up_never_brings_the_outside_in(tmp_path: Path) -> None:
    result = race_notebook_folder.swap_race(600, tmp_path, progress=False)
    assert result["leaks"] == 0, result
    assert result["swaps"] > 1000 and result["copies"] > 100, result  # the race really ran


def test_a_folder_swapped_for_a_link_to_a_hidden_folder_mid_read_never_reads_the_hidden_file(tmp_path: Path) -> None:
    result = race_notebook_folder.hidden_race(1000, tmp_path, progress=False)
    assert result["hidden"] == 0 and result["hidden_stats"] == 0, (
        f"the hidden file's content reached the guest {result['hidden']} times, its size "
        f"{result['hidden_stats']} times: {result}")
    assert result["swaps"] > 1000 and result["public"] > 20 and result["failed"] > 20, result  # the race really ran


def test_a_kill_9_mid_copy_up_leaves_the_whole_file_or_none_and_is_swept(tmp_path: Path) -> None:
    result = race_notebook_folder.kill9_copy_up(8, tmp_path, size=32 << 20, progress=False)
    assert result["failure"] is None, result


def test_two_sandboxes_of_one_notebook_appending_to_its_file_lose_no_line(tmp_path: Path) -> None:
    nb, ws = tmp_path / "nb", tmp_path / "ws"
    nb.mkdir()
    # Big enough that a copy-up takes many chunks: the window the old copy left open.
    head = b"".join(b"%08d,original\n" % i for i in range(400_000))
    (nb / "log.csv").write_bytes(head)
    options = GuestOptions(notebook=NotebookFolder(nb.resolve()))
    boxes = [create_sandbox(workspace=ws, guest_options=options) for _ in range(2)]
    try:
        for box in boxes:
            assert box.execute("import os").success
        start = threading.Barrier(2)
        results = []

        def append(box: object, who: str) -> None:
            start.wait()
            results.append(box.execute(  # type: ignore[attr-defined]
                f"for i in range(200):\n    with open('log.csv', 'a') as f:\n        f.write('{who},%d\\n' % i)"))

        threads = [threading.Thread(target=append, args=(box, who)) for box, who in zip(boxes, "ab")]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert all(r.success for r in results), [(r.error, r.stderr) for r in results]
    finally:
        for box in boxes:
            box.close()
    data = (ws / "log.csv").read_bytes()
    assert data.startswith(head)
    added = data[len(head):].decode().splitlines()
    assert sorted(added) == sorted([f"a,{i}" for i in range(200)] + [f"b,{i}" for i in range(200)])
    assert (nb / "log.csv").read_bytes() == head  # the notebook's folder never changes
    assert not [p for p in ws.iterdir() if p.name.startswith(COPY_PREFIX)]


def test_fifos_sockets_and_devices_in_the_notebook_folder_are_invisible_and_never_block(tmp_path: Path) -> None:
    nb = tmp_path / "nb"
    nb.mkdir()
    (nb / "ok.txt").write_text("fine")
    os.mkfifo(nb / "pipe")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(nb / "sock"))
    unblock_s = 8.0
    unblock = threading.Timer(unblock_s, _open_for_writing, args=(nb / "pipe",))  # frees a blocked reader
    unblock.start()
    sb = create_sandbox(workspace=tmp_path / "ws", guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve())))
    try:
        started = time.monotonic()
        r = sb.execute(
            "import os\n"
            "print(sorted(os.listdir('.')))\n"
            "for name in ('pipe', 'sock'):\n"
            "    try:\n"
            "        open(name).close()\n"
            "        print(name, 'opened')\n"
            "    except OSError as e:\n"
            "        print(name, type(e).__name__)\n"
            "print(os.path.exists('pipe'), os.path.exists('sock'))\n"
            "open('pipe', 'a').write('a file of the workspace')\n"  # the name is free: a new, plain file
            "print(open('pipe').read())"
        )
        elapsed = time.monotonic() - started
    finally:
        unblock.cancel()
        sb.close()
        sock.close()
    assert r.success, (r.error, r.stderr)
    lines = r.stdout.splitlines()
    assert lines == ["['ok.txt']", "pipe FileNotFoundError", "sock FileNotFoundError", "False False",
                     "a file of the workspace"]
    assert elapsed < unblock_s / 2  # nothing waited for a writer (only one would free a blocked reader)
    assert (tmp_path / "ws" / "pipe").is_file()


def _open_for_writing(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def _notice(tmp_path: Path, folder: Path) -> str:
    k = RunningKernel(tmp_path / "jupyter", cwd=folder, env={"JPY_SESSION_NAME": str(folder / "nb.ipynb")})
    try:
        return k.execute("import os\nprint(sorted(os.listdir('.'))[:3])").notices()
    finally:
        k.km.shutdown_kernel(now=True)


@pytest.mark.parametrize("which", ["system temp folder", "guests' scratch parent", "a guest's private folder",
                                   "jupyter runtime folder"])
def test_private_folders_are_never_a_notebook_folder(tmp_path: Path, which: str) -> None:
    runtime = tmp_path / "jupyter" / "runtime"
    runtime.mkdir(parents=True)
    (runtime / "kernel-other.json").write_text('{"key": "another kernel\'s signing key"}')
    guest_private = scratch_parent() / "a-guest-private-folder-for-the-test"
    guest_private.mkdir(exist_ok=True)
    try:
        folder = {"system temp folder": Path("/tmp"), "guests' scratch parent": scratch_parent(),
                  "a guest's private folder": guest_private, "jupyter runtime folder": runtime}[which]
        notice = _notice(tmp_path, folder)
    finally:
        guest_private.rmdir()
    assert "folder is not shown in /app" in notice, notice
    assert str(folder) not in notice
