"""The JupyterLab extension, installed by `pip install` and seen in a real JupyterLab.

`jupyter labextension list` must show it enabled and OK with no build step; and in a
real `jupyter lab` driven by Debian's chromium (playwright-python, no browser
download), a cell of the real wasm-python kernel that writes a file shows the
extension's file-change renderer, which wins over the bundle's HTML table.

The browser tests need `chromium` on PATH (`apt-get install chromium`; .ci/run
installs it). Without it they are skipped, unless WASM_KERNEL_REQUIRE_BROWSER=1 (CI
sets it), which turns a missing browser into a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCREENSHOTS = os.environ.get("WASM_KERNEL_SCREENSHOTS")  # a folder: save the e2e screenshots there
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
KERNEL_STATUS = "Python (WebAssembly sandbox) | Idle"


def test_pip_install_makes_the_extension_enabled_and_ok_without_a_build() -> None:
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    [line] = [line for line in text.splitlines() if "jupyterlab-wasm-kernel" in line]
    assert "enabled" in line and "OK" in line and "(python, wasm-kernel)" in line, line
    assert "@jupyter-widgets/jupyterlab-manager" in text  # widgets come with the package


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
         f"--ServerApp.root_dir={root}", "--allow-root", f"--LabApp.workspaces_dir={base / 'workspaces'}"],
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


def open_notebook(page: object, lab: str, name: str) -> None:
    """Open `name` alone (?reset: no panel restored from an earlier test), wait for
    its kernel to be idle, and put the cursor in its first cell."""
    page.goto(f"{lab}/lab/tree/{name}?reset")  # type: ignore[attr-defined]
    page.get_by_text(KERNEL_STATUS).wait_for(timeout=120_000)  # type: ignore[attr-defined]
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first.click()  # type: ignore[attr-defined]


def test_a_cell_that_writes_a_file_shows_the_file_change_renderer(lab: str, page: object) -> None:
    open_notebook(page, lab, "probe.ipynb")
    page.keyboard.press("Shift+Enter")
    rendered = page.locator(".jp-OutputArea-output.jp-WasmFileChanges")
    rendered.wait_for(timeout=120_000)
    text = rendered.inner_text()
    assert "Files: 1 created" in text and "hello.txt" in text and "22 B" in text, text
    # The HTML table of the same bundle is not what shows: rank 0 wins.
    assert page.locator(".wasm-kernel-file-changes").count() == 0
    row = rendered.locator("tr.jp-WasmFileChanges-created")
    assert row.get_attribute("data-path") == "hello.txt"
    # A name in the list downloads that file from the workspace.
    with page.expect_download(timeout=60_000) as downloading:
        row.locator("a.jp-WasmFileChanges-download").click()
    assert Path(downloading.value.path()).read_bytes() == b"hello from the sandbox"
    assert downloading.value.suggested_filename == "hello.txt"
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.locator(".jp-NotebookPanel").screenshot(path=str(Path(SCREENSHOTS) / "file-changes-renderer.png"))


def test_an_interact_slider_moved_in_the_browser_reruns_in_the_sandbox_and_tqdm_shows_a_bar(
        lab: str, page: object) -> None:
    open_notebook(page, lab, "widgets.ipynb")
    page.keyboard.press("Shift+Enter")
    page.keyboard.press("Shift+Enter")
    output = page.locator(".widget-output").first
    output.get_by_text("squared 9").wait_for(timeout=60_000)
    # The slider's handle takes the keyboard as a user's would: one step right.
    handle = page.locator(".widget-slider .noUi-handle").first
    handle.focus()
    handle.press("ArrowRight")
    output.get_by_text("squared 16").wait_for(timeout=60_000)
    bar = page.locator(".widget-hprogress, .widget-progress").first
    bar.wait_for(timeout=60_000)
    page.get_by_text("30/30").first.wait_for(timeout=60_000)
    assert page.get_by_text("TqdmMonitorWarning").count() == 0
    if SCREENSHOTS:
        page.locator(".jp-NotebookPanel").screenshot(path=str(Path(SCREENSHOTS) / "widgets.png"))


def test_tracebacks_read_as_ipykernels_and_the_network_refusal_is_one_line(lab: str, page: object) -> None:
    open_notebook(page, lab, "errors.ipynb")
    errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
    page.keyboard.press("Shift+Enter")
    errors.nth(0).wait_for(timeout=120_000)
    # One at a time: a cell that raises cancels the cells queued after it, and its error
    # output arrives before its reply, so wait for the reply (the prompt's number) too.
    page.locator(".jp-Notebook .jp-Cell").nth(0).locator(".jp-InputPrompt", has_text="[1]").wait_for(
        timeout=120_000)
    page.keyboard.press("Shift+Enter")
    errors.nth(1).wait_for(timeout=120_000)
    traceback = errors.nth(0).inner_text()
    # IPython's shape: the cell and its two functions as `Cell In[1], line N`, each with
    # its arrow; the stdlib frames (no source in the guest) folded into one line.
    for marker in ("JSONDecodeError", "Traceback (most recent call last)", "Cell In[1], line 6",
                   "----> 6 load()", "Cell In[1], line 5, in load()", "Cell In[1], line 3, in parse(text)",
                   "----> 3     return json.loads(text)", "in library code without source; %xmode Verbose lists them"):
        assert marker in traceback, (marker, traceback)
    assert "python315.zip" not in traceback and "Could not get source" not in traceback, traceback
    assert "\n\n\n" not in traceback, traceback
    network = [line for line in errors.nth(1).inner_text().splitlines() if line.strip()]
    assert network[-1].startswith("URLError: <urlopen error network access is not available in this sandbox"), network
    assert network[-1].endswith(">"), network  # the whole message on its one line
    if SCREENSHOTS:
        page.locator(".jp-NotebookPanel").screenshot(path=str(Path(SCREENSHOTS) / "tracebacks.png"))


def test_the_sandbox_panel_lists_uploads_and_follows_limits_and_the_status_bar_shows_cost(
        lab: str, page: object) -> None:
    open_notebook(page, lab, "probe.ipynb")
    page.keyboard.press("Shift+Enter")
    page.locator(".jp-OutputArea-output.jp-WasmFileChanges").wait_for(timeout=120_000)
    page.locator('.jp-SideBar.jp-mod-right li[data-id="wasm-kernel-session-panel"]').click()
    panel = page.locator("#wasm-kernel-session-panel")
    panel.locator('tr[data-path="hello.txt"]').wait_for(timeout=60_000)
    assert panel.locator(".jp-WasmSessionPanel-session").inner_text().count("-") == 4  # the session's UUID
    # Upload through the panel; a cell reads it from /app.
    panel.locator(".jp-WasmSessionPanel-picker").set_input_files(
        files=[{"name": "uploaded.txt", "mimeType": "text/plain", "buffer": b"from the browser"}])
    panel.locator('tr[data-path="uploaded.txt"]').wait_for(timeout=60_000)
    page.keyboard.type("print(open('uploaded.txt').read())")
    page.keyboard.press("Shift+Enter")
    page.get_by_text("from the browser").first.wait_for(timeout=60_000)
    # %limits in a cell: the panel shows the new value after the cell.
    page.keyboard.type("%limits memory=256MiB")
    page.keyboard.press("Shift+Enter")
    panel.locator('tr[data-limit="memory"]').get_by_text("256 MiB").wait_for(timeout=60_000)
    assert "Sandbox: idle; last cell" in page.locator(".jp-WasmSandboxStatus").inner_text()
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "session-panel.png"))
