"""A real JupyterLab driven through Debian's chromium (playwright-python): what the
tests of tests/labextension/ share besides its fixtures (tests/labextension/conftest.py)."""

from __future__ import annotations

import os
import shutil

SCREENSHOTS = os.environ.get("WASM_KERNEL_SCREENSHOTS")  # a folder: save the e2e screenshots there
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
KERNEL_STATUS = "Python (WebAssembly sandbox) | Idle"
PANEL = "#wasm-kernel-session-panel"


def open_notebook(page: object, lab: str, name: str) -> None:
    """Open `name` alone (?reset: no panel restored from an earlier test), wait for
    its kernel to be idle, and put the cursor in its first cell."""
    page.goto(f"{lab}/lab/tree/{name}?reset")  # type: ignore[attr-defined]
    page.get_by_text(KERNEL_STATUS).wait_for(timeout=120_000)  # type: ignore[attr-defined]
    page.locator(".jp-NotebookPanel .jp-Cell .jp-InputArea-editor").first.click()  # type: ignore[attr-defined]
