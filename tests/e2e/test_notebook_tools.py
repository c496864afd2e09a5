"""Tools that drive notebooks from outside work on wasm-python as on ipykernel:
testbook (it needs a real get_ipython()), papermill with parameters, and nbval."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from support.paths import EXAMPLES

NOTEBOOK = EXAMPLES / "06-data-folder.ipynb"


@pytest.fixture(autouse=True)
def private_jupyter_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter"))
    monkeypatch.delenv("JPY_SESSION_NAME", raising=False)


def test_testbook_refs_injects_and_values(tmp_path: Path) -> None:
    from testbook import testbook

    with testbook(str(NOTEBOOK), execute=True, kernel_name="wasm-python", timeout=120,
                  resources={"metadata": {"path": str(EXAMPLES)}}) as tb:
        to_unit = tb.ref("to_unit")
        assert to_unit(254, "in") == 100.0
        assert tb.value("len(survey)") == 16
        tb.inject("extra = summarize(survey, 'm').loc['art', 'height_m']")
        assert tb.value("extra") == 1.6
        assert tb.value("list(summary.shape)") == [5, 2]


def test_papermill_runs_with_parameters(tmp_path: Path) -> None:
    import papermill

    out = tmp_path / "inches.ipynb"
    papermill.execute_notebook(str(NOTEBOOK), str(out), parameters={"unit": "in"}, kernel_name="wasm-python",
                               cwd=str(EXAMPLES), progress_bar=False)
    ran = nbformat.read(out, as_version=4)
    injected = [c for c in ran.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert injected and 'unit = "in"' in injected[0].source
    tallest = next(c for c in ran.cells if c.cell_type == "code" and c.source.startswith("tallest ="))
    assert tallest.outputs[0].data["text/plain"] == "'Jonah is the tallest: 71.65 in'"


def test_nbval_lax_runs_the_notebook_as_a_test(tmp_path: Path) -> None:
    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "jupyter")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-kernel-name", "wasm-python", "--nbval-cell-timeout", "120", str(NOTEBOOK)],
        capture_output=True, text=True, cwd=EXAMPLES, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "7 passed" in proc.stdout, proc.stdout[-2000:]
