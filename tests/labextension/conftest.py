"""The browser set-up of tests/labextension/: a real `jupyter lab` (module-scoped: one
per test file) with the notebooks the tests open, chromium, and a fresh page per test.

The browser tests need `chromium` on PATH (`apt-get install chromium`; .ci/run
installs it). Without it they are skipped, unless WASM_KERNEL_REQUIRE_BROWSER=1 (CI
sets it), which turns a missing browser into a failure."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.lab_browser import CHROMIUM, SCREENSHOTS

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
    "shutdown.ipynb": ["1 + 1"],
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if CHROMIUM is None:
        if os.environ.get("WASM_KERNEL_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed: apt-get install chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")
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
        (root / name).write_text(json.dumps(notebook))
    # Hide the news toast and the workspace restore, which would cover or reopen panels.
    settings = base / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = _free_port()
    env = {**os.environ, "JUPYTER_DATA_DIR": str(base / "data"), "JUPYTERLAB_SETTINGS_DIR": str(settings)}
    env.pop("JPY_SESSION_NAME", None)
    log = open(base / "lab.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--ServerApp.ip=127.0.0.1",
         f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
         f"--ServerApp.root_dir={root}", "--allow-root", f"--LabApp.workspaces_dir={base / 'workspaces'}",
         # window.jupyterapp: a test runs commands (the theme) as a user's menu would.
         "--LabApp.expose_app_in_browser=True"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/api/status", timeout=2)
            break
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError((base / "lab.log").read_text()[-2000:]) from None
            time.sleep(0.3)
    else:
        proc.terminate()
        raise TimeoutError("jupyter lab did not start in 60 s")
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


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
