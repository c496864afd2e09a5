"""A real JupyterLab driven through Debian's chromium (playwright-python): what the
tests of tests/labextension/ share besides its fixtures (tests/labextension/conftest.py)."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SCREENSHOTS = os.environ.get("WASM_KERNEL_SCREENSHOTS")  # a folder: save the e2e screenshots there
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
KERNEL_STATUS = "Python (WebAssembly sandbox) | Idle"
PANEL = "#wasm-kernel-session-panel"
DRIVE = "#jp-wasm-sandbox-files"  # the Sandbox files browser (labextension/src/drivePlugin.ts BROWSER_ID)
SANDBOX_FILES = "#jp-wasm-sandbox-files"
CARD = '.jp-LauncherCard[data-category="Notebook"]'  # the Launcher's notebook cards
KERNEL = "Python (WebAssembly sandbox)"


def open_notebook(page: object, lab: str, name: str) -> None:
    """Open `name` alone (?reset: no panel restored from an earlier test), wait for
    its kernel to be idle, and put the cursor in its first cell."""
    page.goto(f"{lab}/lab/tree/{name}?reset")  # type: ignore[attr-defined]
    page.get_by_text(KERNEL_STATUS).wait_for(timeout=120_000)  # type: ignore[attr-defined]
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first.click()  # type: ignore[attr-defined]


def require_chromium() -> None:
    """Skip without chromium, or fail where CI asks for the browser tests."""
    if CHROMIUM is None:
        if os.environ.get("WASM_KERNEL_REQUIRE_BROWSER") == "1":
            pytest.fail("chromium is not installed: apt-get install chromium")
        pytest.skip("chromium is not installed (apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_lab(python: str, base: Path, root: Path, env: dict[str, str] | None = None,
                extra_args: tuple[str, ...] | list[str] = ()) -> Iterator[str]:
    """A real `jupyter lab` of the environment whose interpreter is `python`, serving
    `root`, with its data, settings and saved layouts under `base` (a first start:
    nothing restored), on a free loopback port with no token. Yields its URL."""
    # Hide the news toast, which would cover panels.
    settings = base / "settings"
    (settings / "@jupyterlab" / "apputils-extension").mkdir(parents=True, exist_ok=True)
    (settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}))
    port = _free_port()
    environment = {**(env if env is not None else os.environ), "JUPYTER_DATA_DIR": str(base / "data"),
                   "JUPYTERLAB_SETTINGS_DIR": str(settings)}
    environment.pop("JPY_SESSION_NAME", None)
    log_path = base / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [python, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
             f"--ServerApp.root_dir={root}", "--allow-root", f"--LabApp.workspaces_dir={base / 'workspaces'}",
             # window.jupyterapp: a test runs commands (the theme) as a user's menu would.
             "--LabApp.expose_app_in_browser=True", *extra_args],
            # In its root, as a user starts it: never in the checkout, whose package
            # `python -m` would put first on the path.
            env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=root,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    urllib.request.urlopen(f"{url}/api/status", timeout=2)
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise RuntimeError(log_path.read_text()[-2000:]) from None
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"jupyter lab did not start in 90 s: {log_path.read_text()[-2000:]}") \
                            from None
                    time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)




def shot(page: object, name: str) -> None:
    """A screenshot into WASM_KERNEL_SCREENSHOTS, when it is set."""
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name))  # type: ignore[attr-defined]


def fresh_lab(page: object, lab: str) -> None:
    """The lab as a first start shows it (?reset: no saved layout), at its Launcher."""
    page.goto(f"{lab}/lab?reset")  # type: ignore[attr-defined]
    page.locator(CARD).first.wait_for(timeout=120_000)  # type: ignore[attr-defined]


def click_in_sandbox_files(page: object) -> None:
    """Open the Sandbox files panel and click in it: it is then the last panel used."""
    if not page.locator(SANDBOX_FILES).is_visible():  # type: ignore[attr-defined]
        page.locator(f'.jp-SideBar.jp-mod-left li[data-id="{SANDBOX_FILES[1:]}"]').click()  # type: ignore[attr-defined]
    page.locator(f"{SANDBOX_FILES} .jp-DirListing-content").click()  # type: ignore[attr-defined]


def file_menu(page: object, *labels: str) -> None:
    """File, then each submenu by its label, then the last label's item."""
    page.locator(".lm-MenuBar-itemLabel", has_text="File").click()  # type: ignore[attr-defined]
    for label in labels[:-1]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{label}$")).first.hover()  # type: ignore[attr-defined]
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{labels[-1]}$")).first.click()  # type: ignore[attr-defined]


def pick_the_sandbox_kernel(page: object) -> None:
    """The kernel dialog a new notebook asks in: the sandbox kernel."""
    dialog = page.locator(".jp-Dialog")  # type: ignore[attr-defined]
    dialog.wait_for(timeout=30_000)
    dialog.locator("select").select_option(label=KERNEL)
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()


def new_notebook_runs_where_the_file_browser_is(page: object, lab: str, screenshot: str) -> str:
    """The notebook just made: no error, a path outside the drive, in the server's
    root, and a first cell that runs in its own sandbox with the workspace at /app."""
    page.get_by_text(KERNEL_STATUS).wait_for(timeout=120_000)  # type: ignore[attr-defined]
    assert page.locator(".jp-Dialog").count() == 0, page.locator(".jp-Dialog").inner_text()  # type: ignore[attr-defined]
    path = page.evaluate("window.jupyterapp.shell.currentWidget.context.path")  # type: ignore[attr-defined]
    assert re.fullmatch(r"Untitled\d*\.ipynb", path), path  # not Sandbox:…, not inside a workspace
    with urllib.request.urlopen(f"{lab}/api/contents/{path}?content=0", timeout=30) as answer:
        assert json.load(answer)["type"] == "notebook"
    page.locator(".jp-NotebookPanel:visible .jp-Cell .jp-InputArea-editor").first.click()  # type: ignore[attr-defined]
    page.keyboard.type("import os; open('made.txt', 'w').write('hi'); os.getcwd()")  # type: ignore[attr-defined]
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    page.locator(".jp-NotebookPanel:visible .jp-OutputArea-output", has_text="'/app'").wait_for(  # type: ignore[attr-defined]
        timeout=120_000)
    # What the cell wrote is in this notebook's workspace, as the drive shows it.
    with urllib.request.urlopen(f"{lab}/wasm-kernel/drive/api/contents/{path}", timeout=30) as answer:
        assert "made.txt" in [item["name"] for item in json.load(answer)["content"]]
    shot(page, screenshot)
    return path


WASM = ("wasm-python", "Python (WebAssembly sandbox)")
NATIVE = ("python3", "Python 3 (ipykernel)")


def put_notebook(lab: str, name: str, kernel: tuple[str, str], *sources: str) -> None:
    """Write `name` into the lab's root through the contents API (with the _xsrf
    cookie a page load sets, as a browser sends it)."""
    cells = [{"cell_type": "code", "execution_count": None, "id": f"c{n}", "metadata": {}, "outputs": [],
              "source": source} for n, source in enumerate(sources, 1)]
    notebook = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
                "metadata": {"kernelspec": {"name": kernel[0], "display_name": kernel[1], "language": "python"}}}
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    opener.open(f"{lab}/lab", timeout=30).close()
    xsrf = next(c.value for c in jar if c.name == "_xsrf")
    body = json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode()
    request = urllib.request.Request(f"{lab}/api/contents/{name}", data=body, method="PUT",
                                     headers={"Content-Type": "application/json", "X-XSRFToken": xsrf})
    opener.open(request, timeout=30).close()


def open_on(page: object, lab: str, name: str, kernel: tuple[str, str]) -> None:
    if kernel == WASM:
        open_notebook(page, lab, name)
        return
    page.goto(f"{lab}/lab/tree/{name}?reset")  # type: ignore[attr-defined]
    page.get_by_text(f"{kernel[1]} | Idle").wait_for(timeout=120_000)  # type: ignore[attr-defined]
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first.click()  # type: ignore[attr-defined]


def cell(page: object, index: int) -> object:
    return page.locator(".jp-Notebook .jp-Cell").nth(index)  # type: ignore[attr-defined]


def outputs(page: object, index: int) -> object:
    return cell(page, index).locator(".jp-OutputArea")  # type: ignore[attr-defined]
