"""Widgets during a running cell, in a real JupyterLab (Chromium), on wasm-python.

The kernel advertises subshells, so JupyterLab (commsOverSubshells, by default one
subshell per comm target) sends the widgets' messages on a subshell, and the kernel
handles them inside the running cell at its next safe point: a slider moved while a
loop runs changes the value the loop reads, and a button's click stops it.

The browser set-up is tests/labextension/conftest.py's; skipped without chromium
unless WASM_KERNEL_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

from support.lab_browser import WASM, cell, open_on, outputs, put_notebook, shot

WIDGETS = ("import time\nimport ipywidgets as widgets\nstop = False\n"
           "button = widgets.Button(description='Stop the loop')\n"
           "slider = widgets.IntSlider(value=1, min=0, max=10, description='speed')\n"
           "def stop_it(_):\n    global stop\n    stop = True\n"
           "button.on_click(stop_it)\ndisplay(slider, button)")
LOOP = ("seen = set()\nprint('looping', flush=True)\nfor n in range(1200):\n    if stop:\n        break\n"
        "    seen.add(slider.value)\n    time.sleep(0.05)\nprint('stopped', stop, 'saw', sorted(seen))")


def test_a_slider_reaches_a_running_cell_and_a_button_stops_it(lab: str, page: object) -> None:
    put_notebook(lab, "widgets_running.ipynb", WASM, WIDGETS, LOOP)
    open_on(page, lab, "widgets_running.ipynb", WASM)
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    outputs(page, 0).locator(".widget-button", has_text="Stop the loop").wait_for(timeout=120_000)
    cell(page, 1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    outputs(page, 1).get_by_text("looping").wait_for(timeout=60_000)
    readout = outputs(page, 0).locator(".widget-readout").first
    readout.click()
    page.keyboard.press("Control+A")  # type: ignore[attr-defined]
    page.keyboard.type("7")  # type: ignore[attr-defined]
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.wait_for_timeout(1000)  # type: ignore[attr-defined]  # the loop reads it a few times
    outputs(page, 0).locator(".widget-button", has_text="Stop the loop").click()
    outputs(page, 1).get_by_text("stopped True saw [1, 7]").wait_for(timeout=60_000)
    shot(page, "widgets-during-a-cell.png")
    assert cell(page, 1).locator(".jp-InputPrompt").inner_text().strip() == "[2]:"
