"""A machine's first start (an empty cache), as nbclient meets it: kernel_info at
once, the first cell answered in seconds on the baseline compiler with its progress
shown and never saved, the optimized module and the warm image built in the
background, and the guest moved to the optimized module between cells with its
variables."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

KERNELSPEC = {"name": "wasm-python", "display_name": "Python (wasm)", "language": "python"}


class RecordingClient(NotebookClient):
    """nbclient as nbconvert runs it, keeping every iopub message it processed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[dict[str, Any]] = []

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        self.seen.append(msg)
        return super().process_message(msg, cell, cell_index)


def _run(folder: Path, *sources: str, timeout: float) -> tuple[Any, RecordingClient]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    nb.metadata.kernelspec = KERNELSPEC
    # startup_timeout: kernel_info must answer while the guest still compiles.
    client = RecordingClient(nb, kernel_name="wasm-python", timeout=timeout, startup_timeout=30,
                             resources={"metadata": {"path": str(folder)}})
    client.execute()
    return nb, client


def _wait_for(what: str, done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"{what} not done within {seconds:.0f} s"
        time.sleep(2)


@pytest.fixture(scope="module")
def empty_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """One empty cache for both tests, and the migration script already running on it:
    the two first starts then share one optimized compile (the warm-up's file lock
    lets one process do it), which costs 50-130 s on two cores, instead of one each."""
    root = tmp_path_factory.mktemp("cold")
    cache = root / "empty-cache"
    # In a process of its own: this one may have the optimized module in memory already.
    env = {**os.environ, "WASM_KERNEL_CACHE_DIR": str(cache)}
    proc = subprocess.Popen([sys.executable, "-c", MIGRATION, str(root / "ws")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    yield cache, proc
    if proc.poll() is None:
        proc.kill()
        proc.communicate()


@pytest.mark.slow
def test_a_first_start_answers_on_the_baseline_compiler_and_saves_no_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_cache: tuple[Path, subprocess.Popen[str]]
) -> None:
    cache, _ = empty_cache
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(cache))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    folder = tmp_path / "notebooks"  # the notebook's own folder, apart from the cache
    folder.mkdir()
    # A cell timeout far below the optimized compile (50-130 s): the baseline one is
    # what the first cell waits for.
    nb, client = _run(folder, "1 + 1", "import sys\nprint('pandas' in sys.modules)", timeout=60)
    first, second = nb.cells
    assert [o.get("data", {}).get("text/plain") for o in first.outputs] == ["2"], first.outputs
    assert second.outputs[0]["text"] == "False\n"  # no warm image yet: it is built in the background
    saved = nbformat.writes(nb)
    assert "Compiling" not in saved and "Preparing" not in saved
    # While it waited, the cell showed progress, in one display updated in place and cleared.
    types = [m["msg_type"] for m in client.seen]
    shown = [m for m in client.seen if m["msg_type"] in ("display_data", "update_display_data")]
    texts = " ".join(m["content"]["data"]["text/plain"] for m in shown)
    assert "Compiling the Python guest for this machine, quickly" in texts, texts
    # Each update is the measured reading (host/work_meter.py): how far, and the time left or "still working".
    assert all(re.search(r": \d+% after \d+ s, (about \d+ (s|min) left|still working)$", m["content"]["data"]["text/plain"])
               for m in shown), texts
    assert len({m["content"]["transient"]["display_id"] for m in shown}) == 1
    assert "clear_output" in types and types.index("clear_output") > types.index("display_data")
    assert not any(m["msg_type"] == "stream" and "Compiling" in m["content"]["text"] for m in client.seen)

    # The background warm-up outlives the kernel: the optimized module, then the image.
    images = cache / "images"
    # The configured metering's module (time, the default), not "python-baseline-...".
    optimized = re.compile(r"python-time-[0-9a-f]{40}\.cwasm")
    _wait_for("the optimized compile",
              lambda: any(optimized.fullmatch(p.name) for p in cache.glob("modules/*.cwasm")), 600)
    # A whole image: its manifest, in a folder of its own (a build's scratch folders start with ".").
    _wait_for("the warm image", lambda: any(images.glob("[0-9a-f]*/image.json")), 180)
    nb, client = _run(folder, "import sys\nprint('pandas' in sys.modules)", timeout=60)
    assert nb.cells[0].outputs[0]["text"] == "True\n"  # this start came from the image
    assert not any(m["msg_type"] in ("display_data", "update_display_data") for m in client.seen)


MIGRATION = r"""
import json, sys, time
from pathlib import Path
from wasm_kernel import ExecutionPolicy, create_sandbox
# Time metering (the default): 2 s of CPU time a cell, on either engine (numpy's import fits).
sb = create_sandbox(workspace=Path(sys.argv[1]), policy=ExecutionPolicy(cpu_seconds=2.0))
out = {"baseline": not sb._guest.optimized}
out["set"] = sb.execute("import numpy as np\nx = np.arange(10)\ny = 'kept'").success
r = sb.execute("while True:\n    pass")  # the CPU-time budget, on the baseline engine
out["loop"] = [r.trap, r.rolled_back]
open_file = sb.execute("f = open('held.txt', 'w')\nf.write('a')").success
out["held_file"] = open_file
from wasm_kernel.host.module_cache import is_guest_cached
deadline = time.monotonic() + 400
while not is_guest_cached() and time.monotonic() < deadline:
    time.sleep(1)
sb.execute("pass")  # the turn that would move it, but a file is open
out["moved_while_file_open"] = sb._guest.optimized
sb.execute("f.close()")
# Undo keeps a closed file's descriptor until the next cell completes; then it moves.
sb.execute("pass")
sb.execute("pass")
out["moved"] = sb._guest.optimized
r = sb.execute("print(int(x.sum()), y, open('held.txt').read())")
out["after"] = r.stdout
r = sb.execute("while True:\n    pass")
out["loop_after"] = [r.trap, r.rolled_back, r.cpu_ms]
sb.close()
print(json.dumps(out))
"""


@pytest.mark.slow
def test_a_guest_moves_to_the_optimized_module_between_cells_with_its_variables(
    empty_cache: tuple[Path, subprocess.Popen[str]]
) -> None:
    _, proc = empty_cache
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    out = json.loads(stdout.strip().splitlines()[-1])
    assert out["baseline"] and out["set"]
    assert out["loop"] == ["cpu_time", True]
    assert out["held_file"] and out["moved_while_file_open"] is False  # a held file keeps it where it is
    assert out["moved"] is True
    assert out["after"] == "45 kept a\n"
    trap, rolled_back, cpu_ms = out["loop_after"]
    assert trap == "cpu_time" and rolled_back and cpu_ms >= 2000  # the same budget on the optimized engine
