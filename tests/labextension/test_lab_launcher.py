"""A newcomer's first clicks in a fresh JupyterLab, driven through Chromium: the
Launcher's card and File > New > Notebook make a notebook where the ordinary file
browser is, whatever panel was clicked last (the Sandbox files panel included), and
its first cell runs in that notebook's own sandbox; a right-click in the Sandbox files
panel acts on that panel's file, never on the ordinary browser's selection.

The lab of this module is its own (conftest.py: one per test file), started with no
saved layout, as a user's first start is."""

from __future__ import annotations

import json
import urllib.request

from support.lab_browser import (
    CARD, KERNEL, SANDBOX_FILES, click_in_sandbox_files, file_menu, fresh_lab, new_notebook_runs_where_the_file_browser_is,
    pick_the_sandbox_kernel, shot,
)


def test_the_launcher_card_makes_a_notebook_that_runs(lab: str, page: object) -> None:
    fresh_lab(page, lab)
    shot(page, "launcher.png")
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    new_notebook_runs_where_the_file_browser_is(page, lab, "launcher-new-notebook.png")


def test_the_launcher_card_after_a_click_in_the_sandbox_files_panel_still_makes_it_in_the_file_browser(
        lab: str, page: object) -> None:
    fresh_lab(page, lab)
    click_in_sandbox_files(page)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    new_notebook_runs_where_the_file_browser_is(page, lab, "launcher-after-sandbox-click.png")


def test_file_new_notebook_makes_a_notebook_that_runs(lab: str, page: object) -> None:
    fresh_lab(page, lab)
    file_menu(page, "New", "Notebook")
    pick_the_sandbox_kernel(page)
    new_notebook_runs_where_the_file_browser_is(page, lab, "file-new-notebook.png")


def test_file_new_notebook_after_a_click_in_the_sandbox_files_panel_still_makes_it_in_the_file_browser(
        lab: str, page: object) -> None:
    fresh_lab(page, lab)
    click_in_sandbox_files(page)
    file_menu(page, "New", "Notebook")
    pick_the_sandbox_kernel(page)
    new_notebook_runs_where_the_file_browser_is(page, lab, "file-new-after-sandbox-click.png")


def test_a_right_click_in_the_sandbox_files_panel_acts_on_its_own_file(lab: str, page: object) -> None:
    fresh_lab(page, lab)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    path = new_notebook_runs_where_the_file_browser_is(page, lab, "before-right-click.png")
    if not page.locator(SANDBOX_FILES).is_visible():  # type: ignore[attr-defined]
        page.locator(f'.jp-SideBar.jp-mod-left li[data-id="{SANDBOX_FILES[1:]}"]').click()  # type: ignore[attr-defined]
    item = page.locator(f"{SANDBOX_FILES} .jp-DirListing-item", has_text="made.txt")  # type: ignore[attr-defined]
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
