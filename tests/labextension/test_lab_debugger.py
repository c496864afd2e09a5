"""JupyterLab's debugger on the wasm-python kernel, in a real JupyterLab (Chromium):
the bug icon in the notebook toolbar is enabled and turns the debugger on, a
breakpoint set in a cell's gutter stops the cell there, the Variables panel shows
its variables, Next steps to the next line, and Continue lets the cell finish.

The browser set-up is tests/labextension/conftest.py's; skipped without chromium
unless WASM_KERNEL_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

from support.lab_browser import WASM, cell, open_on, outputs, put_notebook, shot

CODE = "total = 40\nstep = 2\ntotal = total + step\nprint('total', total)"


def debugger_button(page: object, command: str) -> object:
    """A button of the Callstack panel's toolbar, by its command (debugger:next, ...)."""
    return page.locator(f'jp-button[data-command="debugger:{command}"]').first  # type: ignore[attr-defined]


def test_the_bug_icon_a_gutter_breakpoint_variables_next_and_continue(lab: str, page: object) -> None:
    put_notebook(lab, "debugged.ipynb", WASM, CODE)
    open_on(page, lab, "debugged.ipynb", WASM)
    bug = page.locator(".jp-DebuggerBugButton").first  # type: ignore[attr-defined]
    bug.wait_for(timeout=60_000)
    page.locator(".jp-DebuggerBugButton[aria-disabled='false']").wait_for(timeout=60_000)  # type: ignore[attr-defined]
    bug.click()
    page.locator(".jp-DebuggerBugButton[aria-pressed='true']").wait_for(timeout=60_000)  # type: ignore[attr-defined]
    # Line 3's place in the breakpoint gutter: at the height of its line number.
    number = cell(page, 0).locator(".cm-lineNumbers .cm-gutterElement", has_text="3").first  # type: ignore[attr-defined]
    number.wait_for(timeout=30_000)
    line = number.bounding_box()
    gutter = cell(page, 0).locator(".cm-gutter.cm-breakpoint-gutter").first.bounding_box()  # type: ignore[attr-defined]
    page.mouse.click(gutter["x"] + gutter["width"] / 2, line["y"] + line["height"] / 2)  # type: ignore[attr-defined]
    cell(page, 0).locator(".cm-gutterElement .cm-breakpoint-icon").last.wait_for(timeout=30_000)
    cell(page, 0).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    frame = page.locator(".jp-DebuggerCallstackFrame").first  # type: ignore[attr-defined]
    frame.wait_for(timeout=120_000)
    assert "<module>" in frame.inner_text()
    variables = page.locator(".jp-DebuggerVariables-body")  # type: ignore[attr-defined]
    variables.get_by_text("total").first.wait_for(timeout=60_000)
    variables.get_by_text("step").first.wait_for(timeout=60_000)
    shot(page, "debugger-stopped.png")
    location = page.locator(".jp-DebuggerCallstackFrame-location").first  # type: ignore[attr-defined]
    assert location.inner_text().endswith(":3"), location.inner_text()
    debugger_button(page, "next").click()
    page.wait_for_function(  # type: ignore[attr-defined]
        "() => { const l = document.querySelector('.jp-DebuggerCallstackFrame-location');"
        " return l && l.textContent.endsWith(':4') }", timeout=60_000)
    debugger_button(page, "continue").click()
    outputs(page, 0).get_by_text("total 42").wait_for(timeout=60_000)
    cell(page, 0).locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=60_000)
