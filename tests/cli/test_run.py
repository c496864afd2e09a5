"""`wasm-kernel run`: a notebook through the installed kernel (nbclient), printed as
a terminal shows it, run as the real command in subprocesses; a `# %%` script as
before; and the pieces of the terminal rendering."""

from __future__ import annotations

import base64
import re
from pathlib import Path
from typing import Any

import nbformat
import pytest

from support.cli_runs import notebook, wk_run
from support.paths import EXAMPLES
from wasm_kernel.cli import notebook_runner
from wasm_kernel.cli.notebook_runner import bundle_text, ensure_kernelspec, error_line, png_size


@pytest.mark.slow
def test_run_getting_started_notebook_prints_cells_and_outputs(tmp_path: Path) -> None:
    proc = wk_run(EXAMPLES / "01-getting-started.ipynb", data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""  # the kernel process's own chatter goes to a log, not here
    lines = proc.stdout.splitlines()
    for expected in [
        "# Getting started: Python in a WebAssembly sandbox",  # markdown cells, as text
        "In [1]: import sys",
        "        answer = 6 * 7",  # continuation lines, aligned under the first
        "In [2]: answer",
        "Out[2]: 42",
        "**Markdown**, computed in the sandbox and rendered by your notebook.",
        "Out[4]: [text/html] <IPython.core.display.HTML object>",
        "working directory: /app",
        "Files created: +data/squares.csv (31 B), +notes.txt (11 B)",
        "Files modified: ~notes.txt (23 B)",
        "In [9]: %%writefile greeting.py",
        "Writing greeting.py",
        "Files created: +greeting.py (67 B)",
        "Out[10]: 'hello from a module in /app, reader'",
        "Files deleted: -notes.txt",
    ]:
        assert expected in lines, expected
    assert any(line.startswith("Python 3.15.") and line.endswith(" on wasi") for line in lines)
    assert lines[-1].startswith("15 code cells in ") and lines[-1].endswith("; 0 failed")
    assert "\033[" not in proc.stdout  # no colours when stdout is not a terminal
    assert not list(tmp_path.glob("*.ipynb")) and not (EXAMPLES / "01-getting-started.nbconvert.ipynb").exists()


@pytest.mark.slow
def test_run_notebook_shows_images_errors_and_exit_status(tmp_path: Path) -> None:
    (tmp_path / "nb").mkdir()
    path = notebook(
        tmp_path / "nb" / "mixed.ipynb",
        "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()",
        ("1 / 0", ["raises-exception"]),
        "print('after')\nundefined_name",
        "print('still runs')",
    )
    out = tmp_path / "executed.ipynb"
    proc = wk_run(path, "--output", out, data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # an untagged cell failed
    lines = proc.stdout.splitlines()
    assert any(re.fullmatch(r"\[image/png \d+x\d+\]", line) for line in lines), lines
    assert "ZeroDivisionError: division by zero" in lines
    assert "NameError: name 'undefined_name' is not defined" in lines
    assert "still runs" in lines  # every cell runs
    assert lines[-1].startswith("4 code cells in ")
    assert "; 1 failed: In [3]; 1 raised the error it was tagged to expect" in lines[-1]
    assert f"executed notebook written to {out}" in lines[-1]
    executed = nbformat.read(out, as_version=4)
    assert [c.execution_count for c in executed.cells] == [1, 2, 3, 4]
    assert "image/png" in executed.cells[0].outputs[0].data
    assert executed.cells[2].outputs[-1].ename == "NameError"


@pytest.mark.slow
def test_run_notebook_fresh_session_by_default_and_persist_keeps_files(tmp_path: Path) -> None:
    (tmp_path / "nb").mkdir()
    path = notebook(tmp_path / "nb" / "keep.ipynb", "import os\nprint('files:', sorted(os.listdir()))",
                    "open('kept.txt', 'a').write('k')")
    data_dir = tmp_path / "data"
    # /app shows the workspace over the notebook's folder, which holds the notebook.
    for _ in range(2):
        fresh = wk_run(path, data_dir=data_dir, cwd=tmp_path)
        assert "files: ['keep.ipynb']" in fresh.stdout.splitlines(), fresh.stdout
    first = wk_run(path, "--persist", data_dir=data_dir, cwd=tmp_path)
    assert "files: ['keep.ipynb']" in first.stdout.splitlines() and "Files created: +kept.txt (1 B)" in first.stdout
    second = wk_run(path, "--persist", data_dir=data_dir, cwd=tmp_path)
    assert "files: ['keep.ipynb', 'kept.txt']" in second.stdout.splitlines()
    assert "Files modified: ~kept.txt (2 B)" in second.stdout
    # A run keeps files, never an interpreter: the next run starts afresh, as nbconvert's.
    assert "resumed the state" not in second.stdout + second.stderr
    assert not list((data_dir / "wasm-kernel" / "sessions").glob(".wasm-kernel/state/*/state.bin"))


@pytest.mark.slow
def test_run_refuses_a_file_that_is_not_a_notebook(tmp_path: Path) -> None:
    bad = tmp_path / "broken.ipynb"
    bad.write_text("{not json")
    proc = wk_run(bad, data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("wasm-kernel run: error: ") and proc.stderr.count("\n") == 1
    missing = wk_run(tmp_path / "nope.ipynb", data_dir=tmp_path / "data", cwd=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.slow
def test_run_script_still_runs_cell_by_cell(tmp_path: Path) -> None:
    script = tmp_path / "tour.py"
    script.write_text("x = 20\nprint('x is', x)\n# %%\nx + 22\n# %%\nopen('out.txt', 'w').write('hi')\n")
    proc = wk_run(script, "--workspace", tmp_path / "ws", data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "x is 20" in proc.stdout and "42" in proc.stdout and "+out.txt" in proc.stdout
    assert (tmp_path / "ws" / "out.txt").read_text() == "hi"
    refused = wk_run(script, "--persist", data_dir=tmp_path / "data", cwd=tmp_path)
    assert refused.returncode == 2 and "for notebooks" in refused.stderr


# --- the rendering, without a kernel -------------------------------------------------


def _png(width: int, height: int) -> str:
    import struct
    import zlib

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = struct.pack(">I", len(ihdr)) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return base64.b64encode(b"\x89PNG\r\n\x1a\n" + chunk).decode()


def test_bundle_text_prefers_what_a_terminal_can_show() -> None:
    assert png_size(_png(640, 480)) == (640, 480)
    assert png_size("not base64 at all!") is None
    assert bundle_text({"image/png": _png(300, 200), "text/plain": "<Figure size 300x200 with 1 Axes>"}) == "[image/png 300x200]"
    assert bundle_text({"image/jpeg": "...", "text/plain": "<IPython.core.display.Image object>"}) == "[image/jpeg]"
    assert bundle_text({"text/plain": "   a\n0  1", "text/html": "<table>"}) == "   a\n0  1"  # a DataFrame
    assert bundle_text({"text/plain": "<IPython.display.Markdown object>", "text/markdown": "**hi**"}) == "**hi**"
    assert bundle_text({"text/plain": "<IPython.display.HTML object>", "text/html": "<b>"}) == "[text/html] <IPython.display.HTML object>"
    assert bundle_text({"text/html": "<b>"}) == "[text/html]"


def test_error_line_is_the_tracebacks_last_line() -> None:
    tb = ["Traceback (most recent call last):\n", "  File \"<cell-1>\", line 1\n", "\x1b[31mKeyError\x1b[0m: 'x'\n"]
    assert error_line({"traceback": tb, "ename": "KeyError", "evalue": "'x'"}) == "KeyError: 'x'"
    assert error_line({"traceback": [], "ename": "MemoryError", "evalue": ""}) == "MemoryError"


def test_missing_kernelspec_is_installed_here_or_reported_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    from wasm_kernel import kernelspec

    installed: list[Any] = []
    found = iter([False, True])

    def get_kernel_spec(self: Any, name: str) -> Any:
        if not next(found):
            raise NoSuchKernel(name)
        return object()

    monkeypatch.setattr(KernelSpecManager, "get_kernel_spec", get_kernel_spec)
    monkeypatch.setattr(kernelspec, "install", lambda **kw: installed.append(kw) or tmp_path)
    assert ensure_kernelspec(str(tmp_path)) is None
    assert installed == [{"prefix": str(tmp_path)}]

    def never(self: Any, name: str) -> Any:
        raise NoSuchKernel(name)

    monkeypatch.setattr(KernelSpecManager, "get_kernel_spec", never)
    message = ensure_kernelspec(str(tmp_path))
    assert message is not None and "\n" not in message and "wasm-kernel install" in message
    assert notebook_runner.KERNEL_NAME == "wasm-python"
