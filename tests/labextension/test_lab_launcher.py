"""A newcomer's first clicks in a fresh JupyterLab, driven through Chromium: the
Launcher's card and File > New > Notebook make a notebook where the ordinary file
browser is, whatever panel was clicked last (the Sandbox files panel included), and
its first cell runs in that notebook's own sandbox; a right-click in the Sandbox files
panel acts on that panel's file, never on the ordinary browser's selection.

The lab of this module is its own (conftest.py: one per test file), started with no
saved layout, as a user's first start is."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

from support.lab_browser import KERNEL_STATUS, SCREENSHOTS

BROWSER = "#jp-wasm-sandbox-files"
CARD = '.jp-LauncherCard[data-category="Notebook"]'
KERNEL = "Python (WebAssembly sandbox)"


def _shot(page: object, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / name))  # type: ignore[attr-defined]


def _fresh_lab(page: object, lab: str) -> None:
    page.goto(f"{lab}/lab?reset")  # type: ignore[attr-defined]
    page.locator(CARD).first.wait_for(timeout=120_000)  # type: ignore[attr-defined]


def _click_in_sandbox_files(page: object) -> None:
    """Open the Sandbox files panel and click in it: it is then the last panel used."""
    if not page.locator(BROWSER).is_visible():  # type: ignore[attr-defined]
        page.locator(f'.jp-SideBar.jp-mod-left li[data-id="{BROWSER[1:]}"]').click()  # type: ignore[attr-defined]
    page.locator(f"{BROWSER} .jp-DirListing-content").click()  # type: ignore[attr-defined]


def _file_menu(page: object, *labels: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="File").click()  # type: ignore[attr-defined]
    for label in labels[:-1]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{label}$")).first.hover()  # type: ignore[attr-defined]
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{labels[-1]}$")).first.click()  # type: ignore[attr-defined]


def _pick_the_sandbox_kernel(page: object) -> None:
    dialog = page.locator(".jp-Dialog")  # type: ignore[attr-defined]
    dialog.wait_for(timeout=30_000)
    dialog.locator("select").select_option(label=KERNEL)
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()


def _new_notebook_runs_where_the_file_browser_is(page: object, lab: str, shot: str) -> str:
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
    _shot(page, shot)
    return path


def test_the_launcher_card_makes_a_notebook_that_runs(lab: str, page: object) -> None:
    _fresh_lab(page, lab)
    _shot(page, "launcher.png")
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    _new_notebook_runs_where_the_file_browser_is(page, lab, "launcher-new-notebook.png")


def test_the_launcher_card_after_a_click_in_the_sandbox_files_panel_still_makes_it_in_the_file_browser(
        lab: str, page: object) -> None:
    _fresh_lab(page, lab)
    _click_in_sandbox_files(page)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    _new_notebook_runs_where_the_file_browser_is(page, lab, "launcher-after-sandbox-click.png")


def test_file_new_notebook_makes_a_notebook_that_runs(lab: str, page: object) -> None:
    _fresh_lab(page, lab)
    _file_menu(page, "New", "Notebook")
    _pick_the_sandbox_kernel(page)
    _new_notebook_runs_where_the_file_browser_is(page, lab, "file-new-notebook.png")


def test_file_new_notebook_after_a_click_in_the_sandbox_files_panel_still_makes_it_in_the_file_browser(
        lab: str, page: object) -> None:
    _fresh_lab(page, lab)
    _click_in_sandbox_files(page)
    _file_menu(page, "New", "Notebook")
    _pick_the_sandbox_kernel(page)
    _new_notebook_runs_where_the_file_browser_is(page, lab, "file-new-after-sandbox-click.png")


def test_a_right_click_in_the_sandbox_files_panel_acts_on_its_own_file(lab: str, page: object) -> None:
    _fresh_lab(page, lab)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    path = _new_notebook_runs_where_the_file_browser_is(page, lab, "before-right-click.png")
    if not page.locator(BROWSER).is_visible():  # type: ignore[attr-defined]
        page.locator(f'.jp-SideBar.jp-mod-left li[data-id="{BROWSER[1:]}"]').click()  # type: ignore[attr-defined]
    item = page.locator(f"{BROWSER} .jp-DirListing-item", has_text="made.txt")  # type: ignore[attr-defined]
    item.wait_for(timeout=60_000)
    item.click(button="right")
    menu = page.locator(".lm-Menu.jp-WasmSandboxDriveMenu")  # type: ignore[attr-defined]
    menu.wait_for(timeout=10_000)
    assert page.locator(".lm-Menu").count() == 1  # type: ignore[attr-defined]  # JupyterLab's did not open too
    assert [label.strip() for label in menu.locator(".lm-Menu-itemLabel").all_inner_texts()] == \
        ["Open", "Rename", "Duplicate", "Download", "Delete"]
    menu.locator(".lm-Menu-itemLabel", has_text="Delete").click()
    dialog = page.locator(".jp-Dialog")  # type: ignore[attr-defined]
    dialog.wait_for(timeout=10_000)
    assert "made.txt" in dialog.inner_text()
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    item.wait_for(state="detached", timeout=30_000)
    with urllib.request.urlopen(f"{lab}/wasm-kernel/drive/api/contents/{path}", timeout=30) as answer:
        assert "made.txt" not in [entry["name"] for entry in json.load(answer)["content"]]
    with urllib.request.urlopen(f"{lab}/api/contents/{path}?content=0", timeout=30) as answer:
        assert json.load(answer)["type"] == "notebook"  # the ordinary browser's notebook is untouched
