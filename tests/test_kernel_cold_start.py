"""A notebook run by nbclient on a machine whose guest is not compiled yet (an
empty cache): kernel_info answers at once, the first cell shows the compile's and
the warm image's progress while it waits, and none of that progress is saved in
the notebook."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient


class RecordingClient(NotebookClient):
    """nbclient as nbconvert runs it, keeping every iopub message it processed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.seen: list[dict[str, Any]] = []

    def process_message(self, msg: dict[str, Any], cell: Any, cell_index: int) -> Any:
        self.seen.append(msg)
        return super().process_message(msg, cell, cell_index)


@pytest.mark.slow
def test_a_cold_nbclient_run_shows_progress_and_saves_none_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "empty-cache"
    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(cache))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("1 + 1"),
        nbformat.v4.new_code_cell("import sys\nprint('pandas' in sys.modules)"),
    ])
    nb.metadata.kernelspec = {"name": "wasm-python", "display_name": "Python (wasm)", "language": "python"}
    # startup_timeout: kernel_info must answer long before the ~100 s compile ends.
    folder = tmp_path / "notebooks"  # the notebook's own folder, apart from the cache
    folder.mkdir()
    client = RecordingClient(nb, kernel_name="wasm-python", timeout=900, startup_timeout=30,
                             resources={"metadata": {"path": str(folder)}})
    client.execute()
    first, second = nb.cells
    assert [o.get("data", {}).get("text/plain") for o in first.outputs] == ["2"], first.outputs
    assert second.outputs[0]["text"] == "True\n"  # started from the warm image the run built
    saved = nbformat.writes(nb)
    assert "Compiling" not in saved and "warm image" not in saved
    # While it waited, the cell showed progress, in one display updated in place and cleared.
    types = [m["msg_type"] for m in client.seen]
    shown = [m for m in client.seen if m["msg_type"] in ("display_data", "update_display_data")]
    texts = " ".join(m["content"]["data"]["text/plain"] for m in shown)
    assert "Compiling the Python guest" in texts and "Building the warm image" in texts, texts
    assert len({m["content"]["transient"]["display_id"] for m in shown}) == 1
    assert "clear_output" in types and types.index("clear_output") > types.index("display_data")
    assert not any(m["msg_type"] == "stream" and "Compiling" in m["content"]["text"] for m in client.seen)
    assert any(cache.rglob("*.cwasm")) and any((cache / "images").iterdir())  # kept for next time
    assert os.environ["WASM_KERNEL_CACHE_DIR"] == str(cache)
