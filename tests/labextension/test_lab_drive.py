"""The Sandbox drive and renames in a real JupyterLab, driven through Chromium: a
workspace CSV opens in JupyterLab's CSV viewer, a file dropped on the drive is read
by the next cell, a renamed notebook keeps its files across a restart, and a
duplicated notebook gets a session of its own."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from support.lab_browser import DRIVE as BROWSER, SCREENSHOTS, open_notebook



def _put_notebook(lab: str, name: str, cells: list[str]) -> None:
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"c{i}", "metadata": {}, "outputs": [],
                   "source": source} for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python (WebAssembly sandbox)", "language": "python",
                                    "name": "wasm-python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    body = json.dumps({"type": "notebook", "format": "json", "content": notebook}).encode()
    req = urllib.request.Request(f"{lab}/api/contents/{name}", data=body, method="PUT",
                                 headers={"Content-Type": "application/json", "Cookie": "_xsrf=drive-test", "X-XSRFToken": "drive-test"})
    urllib.request.urlopen(req, timeout=30).close()


def _run_cell(page: object, index: int) -> None:
    """Run cell `index` and wait for its reply (its prompt gets a number)."""
    cell = page.locator(".jp-Notebook .jp-Cell").nth(index)  # type: ignore[attr-defined]
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    cell.locator(".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for(timeout=120_000)


def _open_drive(page: object) -> object:
    if not page.locator(BROWSER).is_visible():  # type: ignore[attr-defined]
        page.locator(f'.jp-SideBar.jp-mod-left li[data-id="{BROWSER[1:]}"]').click()  # type: ignore[attr-defined]
    return page.locator(BROWSER)  # type: ignore[attr-defined]


def _item(drive: object, name: str) -> object:
    return drive.locator(".jp-DirListing-item", has=drive.page.locator(".jp-DirListing-itemText", has_text=name))  # type: ignore[attr-defined]


def test_a_workspace_csv_opens_from_the_drive_in_the_csv_viewer(lab: str, page: object) -> None:
    _put_notebook(lab, "drive_csv.ipynb", ["open('summary.csv', 'w').write('city,count\\nOslo,3\\nLima,5\\n')"])
    open_notebook(page, lab, "drive_csv.ipynb")
    _run_cell(page, 0)
    drive = _open_drive(page)
    # The drive follows the current notebook into its workspace, and the cell's file is there.
    _item(drive, "summary.csv").wait_for(timeout=60_000)
    assert "drive_csv.ipynb" in drive.locator(".jp-BreadCrumbs").inner_text()
    # Its columns read whole, as the ordinary file browser's do: no "Mo…" for Modified.
    header = drive.locator(".jp-DirListing-headerItem.jp-id-modified")
    shown = header.evaluate(
        "h => [...h.querySelectorAll('.jp-DirListing-headerItemText')].filter(e => e.offsetWidth > 0)"
        ".map(e => [e.textContent, e.scrollWidth <= e.clientWidth])")
    assert shown and all(whole for _, whole in shown), shown
    _item(drive, "summary.csv").dblclick()
    viewer = page.locator(".jp-CSVViewer")
    viewer.wait_for(timeout=60_000)
    assert page.locator(".lm-TabBar-tab.lm-mod-current", has_text="summary.csv").count() == 1
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "drive-csv.png"))


def test_a_file_dropped_on_the_drive_is_read_by_the_next_cell(lab: str, page: object) -> None:
    _put_notebook(lab, "drive_drop.ipynb", ["open('first.txt', 'w').write('x')",
                                            "print(open('dropped.txt').read())"])
    open_notebook(page, lab, "drive_drop.ipynb")
    _run_cell(page, 0)
    drive = _open_drive(page)
    _item(drive, "first.txt").wait_for(timeout=60_000)
    # A drop as the browser delivers one from the desktop. A page cannot build a
    # DataTransfer whose items are file-system entries, so the event carries the
    # file list only: the listing then uploads each file, as it does for a real drop.
    drive.locator(".jp-DirListing-content").evaluate(
        "node => { const ev = new DragEvent('drop', {bubbles: true, cancelable: true});"
        " const file = new File(['dropped from the desktop'], 'dropped.txt', {type: 'text/plain'});"
        " Object.defineProperty(ev, 'dataTransfer', {value: {files: [file], types: ['Files']}});"
        " node.dispatchEvent(ev); }")
    _item(drive, "dropped.txt").wait_for(timeout=60_000)
    _run_cell(page, 1)
    page.locator(".jp-OutputArea-output", has_text="dropped from the desktop").wait_for(timeout=60_000)


def test_a_renamed_notebook_keeps_its_files_after_a_restart(lab: str, page: object) -> None:
    _put_notebook(lab, "Untitled.ipynb", ["open('kept.txt', 'w').write('still here')",
                                          "print(open('kept.txt').read())"])
    open_notebook(page, lab, "Untitled.ipynb")
    _run_cell(page, 0)
    # Rename as a student does: the tab's context menu, then the dialog.
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Untitled.ipynb").click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Rename Notebook")).click()
    name = page.locator(".jp-Dialog input")
    name.fill("hw1.ipynb")
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="hw1.ipynb").wait_for(timeout=30_000)
    # Restart the kernel (Kernel menu), then read the file in the renamed notebook.
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Restart Kernel…")).first.click()
    page.locator(".jp-Dialog .jp-mod-accept").click()
    page.get_by_text("Python (WebAssembly sandbox) | Idle").wait_for(timeout=120_000)
    _run_cell(page, 1)
    page.locator(".jp-OutputArea-output", has_text="still here").wait_for(timeout=60_000)
    drive = _open_drive(page)
    drive.locator(".jp-BreadCrumbs", has_text="hw1.ipynb").wait_for(timeout=30_000)  # it followed the rename
    _item(drive, "kept.txt").wait_for(timeout=60_000)


def test_a_duplicated_notebook_gets_its_own_session(lab: str, page: object) -> None:
    _put_notebook(lab, "original.ipynb", ["open('mine.txt', 'w').write('x')",
                                          "import os; print('has mine:', os.path.exists('/app/mine.txt'))"])
    open_notebook(page, lab, "original.ipynb")
    _run_cell(page, 0)
    # Duplicate from the default file browser, as a user does.
    if not page.locator("#filebrowser").is_visible():  # its tab toggles: open it only if closed
        page.locator('.jp-SideBar.jp-mod-left li[data-id="filebrowser"]').click()
    page.locator("#filebrowser .jp-DirListing-item", has_text="original.ipynb").click(button="right")
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Duplicate$")).click()
    copy = page.locator("#filebrowser .jp-DirListing-item", has_text="original-Copy1.ipynb")
    copy.wait_for(timeout=30_000)
    copy.dblclick()
    page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current", has_text="original-Copy1.ipynb").wait_for(
        timeout=30_000)
    page.get_by_text("Python (WebAssembly sandbox) | Idle").wait_for(timeout=120_000)
    notebook = page.locator(".jp-NotebookPanel:visible")
    notebook.locator(".jp-Cell").nth(1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")
    notebook.locator(".jp-OutputArea-output", has_text="has mine: False").wait_for(timeout=120_000)
