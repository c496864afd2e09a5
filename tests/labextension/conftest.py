"""The browser set-up of tests/labextension/: a real `jupyter lab` (module-scoped: one
per test file) with the notebooks the tests open, chromium, and a fresh page per test.

The browser tests need `chromium` on PATH (`apt-get install chromium`; .ci/run
installs it). Without it they are skipped, unless WASM_KERNEL_REQUIRE_BROWSER=1 (CI
sets it), which turns a missing browser into a failure."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.lab_browser import CHROMIUM, SCREENSHOTS, require_chromium, running_lab

PANEL_NOTEBOOKS = {
    # A name too long for the sidebar, files in a folder, a cell that grows memory, a magic.
    "quarterly-analysis-of-sandbox-results.ipynb": [
        "import os\nos.makedirs('out', exist_ok=True)\nfor i in range(3):\n"
        "    open(f'out/result-{i}.csv', 'w').write('x' * 4000 * (i + 1))\n"
        "open('report-with-a-rather-long-descriptive-name.txt', 'w').write('done')",
        "grown = bytearray(48 * 1024 * 1024)",
        "%limits memory=1GiB",
    ],
    "delete.ipynb": ["open('keep.txt', 'w').write('kept')"],
    "many.ipynb": [
        "import os\nos.makedirs('out', exist_ok=True)\nfor i in range(300):\n"
        "    open(f'out/part-{i:03}.csv', 'w').write('x' * i)\nopen('top.txt', 'w').write('top')",
    ],
    "status.ipynb": ["grown = bytearray(24 * 1024 * 1024)"],
    "settings.ipynb": ["1 + 1"],
    "shutdown.ipynb": ["1 + 1"],
    # A link the cell's HTML gives relative to the notebook, as otter's export does: to a
    # file the sandbox wrote, and to one only the notebook's folder on the server has.
    "unit1/links.ipynb": [
        "open('lab01_export.zip', 'wb').write(b'PK from the sandbox')\n"
        "from IPython.display import HTML, display\n"
        "display(HTML('<p>Click <a class=\"exported\" href=\"lab01_export.zip\" download=\"lab01_export.zip\" '\n"
        "             'target=\"_blank\">here</a> or <a class=\"served\" href=\"data.csv\" download=\"data.csv\">the data</a></p>'))",
    ],
}


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    base = tmp_path_factory.mktemp("lab")
    root = base / "notebooks"
    root.mkdir()
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": "c1", "metadata": {}, "outputs": [],
                   "source": "open('hello.txt', 'w').write('hello from the sandbox')"}],
        "metadata": {"kernelspec": {"display_name": "Python (WebAssembly sandbox)", "language": "python",
                                    "name": "wasm-python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    (root / "probe.ipynb").write_text(json.dumps(notebook))
    notebook["cells"] = [
        {"cell_type": "code", "execution_count": None, "id": "w1", "metadata": {}, "outputs": [],
         "source": "from ipywidgets import interact\n@interact(n=(1, 10))\ndef show(n=3):\n    print('squared', n * n)"},
        {"cell_type": "code", "execution_count": None, "id": "w2", "metadata": {}, "outputs": [],
         "source": "from tqdm.notebook import tqdm\nfor _ in tqdm(range(30)):\n    pass"},
    ]
    (root / "widgets.ipynb").write_text(json.dumps(notebook))
    notebook["cells"] = [
        {"cell_type": "code", "execution_count": None, "id": "e1", "metadata": {}, "outputs": [],
         "source": "import json\ndef parse(text):\n    return json.loads(text)\ndef load():\n    return parse('{not json')\nload()"},
        {"cell_type": "code", "execution_count": None, "id": "e2", "metadata": {}, "outputs": [],
         "source": "import urllib.request\nurllib.request.urlopen('http://example.org')"},
    ]
    (root / "errors.ipynb").write_text(json.dumps(notebook))
    # The Sandbox panel's own notebooks, one kernel (and workspace) each.
    for name, sources in PANEL_NOTEBOOKS.items():
        notebook["cells"] = [{"cell_type": "code", "execution_count": None, "id": f"p{i}", "metadata": {},
                              "outputs": [], "source": source} for i, source in enumerate(sources)]
        (root / name).parent.mkdir(exist_ok=True)
        (root / name).write_text(json.dumps(notebook))
    (root / "unit1" / "data.csv").write_text("a,b\n1,2\n")
    with running_lab(sys.executable, base, root) as url:
        yield url


@pytest.fixture(scope="module")
def browser(lab: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    """A fresh browser page per test; the screenshot folder exists if one was asked for."""
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
    opened = browser.new_page(viewport={"width": 1280, "height": 800})  # type: ignore[attr-defined]
    yield opened
    opened.close()
