"""Tracebacks and inspect through the guest's built-in libraries show their source, as
on ipykernel: the real guest, with the sources `wasm-kernel precompile` fetched from
the registry's wheels of the same versions (host/library_sources.py)."""

from __future__ import annotations

import re

import pytest

from wasm_kernel.core.sandbox import PythonSandbox
from wasm_kernel.host.library_sources import is_fetched, sources_folder

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(autouse=True)
def fetched() -> None:
    if not is_fetched():
        raise RuntimeError(f"the libraries' sources are not in {sources_folder()}: run `wasm-kernel precompile`")


def test_inspect_getsource_works_on_numpy_and_pandas(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import inspect, numpy as np, pandas as pd\n"
                        "print(inspect.getsource(np.mean).splitlines()[:2])\n"
                        "print(inspect.getsourcelines(pd.DataFrame.head)[0][0].strip())")
    assert r.success, r.error
    assert r.stdout == ("['@array_function_dispatch(_mean_dispatcher)', "
                        "'def mean(a, axis=None, dtype=None, out=None, keepdims=np._NoValue, *,']\n"
                        "@final\n")


def test_a_traceback_through_numpy_shows_its_lines_and_folds_nothing_of_it(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import numpy as np\nnp.loadtxt('missing.txt')")
    assert r.error is not None and r.error.ename == "FileNotFoundError"
    shown = ANSI.sub("", "".join(r.error.traceback))
    assert "numpy/lib/_datasource.py:529, in DataSource.open(self, path, mode, encoding, newline)" in shown
    assert '--> 529             raise FileNotFoundError(f"{path} not found.")' in shown, shown
    assert "library code without source" not in shown


def test_the_stdlib_still_folds_where_no_source_is_kept(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("import json\njson.loads('{x')")
    shown = ANSI.sub("", "".join(r.error.traceback))  # type: ignore[union-attr]
    assert "in library code without source; %xmode Verbose lists them" in shown, shown
