"""The Sandbox panel's timeline in a real JupyterLab (Chromium): every cell a point,
"Rewind here" on an earlier one opens a dialog that lists the cells, variables and
files the rewind changes, and accepting it puts the interpreter and the workspace's
files back (a `%rewind N` cell of its own, said in a notification).

The browser set-up is tests/labextension/conftest.py's; skipped without chromium
unless WASM_KERNEL_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

from playwright.sync_api import expect

from support.lab_browser import WASM, cell, open_on, outputs, put_notebook, shot

CELLS = (
    "x = 1\nopen('/app/notes.txt', 'w').write('first')",
    "x = 2\nmodel = {'fitted': True}\nopen('/app/notes.txt', 'w').write('second')\nopen('/app/extra.csv', 'w').write('a,b')",
    "print(x, open('/app/notes.txt').read(), 'model' in dir())",
)


def test_rewind_here_lists_what_changes_and_puts_the_cell_back(lab: str, page: object) -> None:
    put_notebook(lab, "timeline.ipynb", WASM, *CELLS)
    open_on(page, lab, "timeline.ipynb", WASM)
    for n in range(2):
        cell(page, n).locator(".jp-InputArea-editor").click()
        page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
        cell(page, n).locator(".jp-InputPrompt", has_text=f"[{n + 1}]").wait_for(timeout=120_000)
    page.locator('.jp-SideBar.jp-mod-right li[data-id="wasm-kernel-session-panel"]').click()  # type: ignore[attr-defined]
    panel = page.locator("#wasm-kernel-session-panel")  # type: ignore[attr-defined]
    points = panel.locator(".jp-WasmSessionPanel-point")
    expect(points).to_have_count(2, timeout=60_000)
    assert points.nth(0).locator(".jp-WasmSessionPanel-pointNow").inner_text() == "now"
    first = panel.locator('.jp-WasmSessionPanel-point[data-execution-count="1"]')
    assert "x = 1" in first.locator(".jp-WasmSessionPanel-pointLine").inner_text()
    first.locator(".jp-WasmSessionPanel-rewind").click()
    dialog = page.locator(".jp-Dialog")  # type: ignore[attr-defined]
    expect(dialog.locator(".jp-Dialog-header")).to_have_text("Rewind to just after cell [1]?", timeout=30_000)
    body = dialog.locator(".jp-WasmRewindPreview")
    expect(body).to_contain_text("Goes back past 1 cell: [2].")
    expect(body.locator(".jp-WasmRewindPreview-names")).to_contain_text("x, model")
    files = body.locator(".jp-WasmRewindPreview-files li").all_inner_texts()
    assert sorted(files) == ["- extra.csv", "~ notes.txt"], files
    shot(page, "rewind-dialog.png")
    dialog.locator(".jp-Dialog-button.jp-mod-accept").click()
    page.locator(".jp-toast-container, .Toastify").get_by_text("Back to just after cell [1]").wait_for(  # type: ignore[attr-defined]
        timeout=60_000)
    expect(points).to_have_count(3, timeout=60_000)  # the rewind is a point too
    cell(page, 2).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    outputs(page, 2).get_by_text("1 first False").wait_for(timeout=60_000)
    assert cell(page, 2).locator(".jp-InputPrompt").inner_text().strip() == "[4]:"  # the rewind was [3]
    shot(page, "timeline.png")
