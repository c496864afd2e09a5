"""input() in a real JupyterLab (Chromium), on the wasm-python kernel and on ipykernel.

Waiting for a person is not compute: under `%limits deadline=2s` an input() answered
after 4 s works. A cell never ends with its input box still open: JupyterLab 4.6
itself leaves the box in place when a cell waiting in input() is interrupted or its
kernel restarted, on ipykernel too (pinned below), and what is typed there afterwards
goes to a kernel that waits for nothing. On wasm-python the extension's stdin plugin
(labextension/src/stdin.ts) closes the box when the cell ends and keeps what was
typed in it, unsent, as a line of the output.

The browser set-up is tests/labextension/conftest.py's; skipped without chromium
unless WASM_KERNEL_REQUIRE_BROWSER=1.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from support.lab_browser import NATIVE, SCREENSHOTS, WASM, cell, open_on, outputs, put_notebook

BOX = ".jp-OutputArea-stdin-item"
TYPED = "typed but not sent"


def kernel_menu(page: object, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()  # type: ignore[attr-defined]
    page.locator(".lm-Menu-itemLabel", has_text=item).first.click()  # type: ignore[attr-defined]


def wait_in_input(page: object) -> None:
    """Run the current cell; once its box shows, type into it without pressing Enter."""
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    box = page.locator(".jp-Stdin-input")  # type: ignore[attr-defined]
    box.wait_for(timeout=120_000)
    box.type(TYPED)


def shot(page: object, name: str) -> None:
    if SCREENSHOTS:
        page.locator(".jp-NotebookPanel").screenshot(path=str(Path(SCREENSHOTS) / name))  # type: ignore[attr-defined]


def test_an_input_answered_after_the_deadline_works(lab: str, page: object) -> None:
    put_notebook(lab, "slow_answer.ipynb", WASM, "%limits deadline=2s",
                 "name = input('name? ')\nprint('hello', name)")
    open_on(page, lab, "slow_answer.ipynb", WASM)
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    cell(page, 0).locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=120_000)
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    box = page.locator(".jp-Stdin-input")  # type: ignore[attr-defined]
    box.wait_for(timeout=120_000)
    time.sleep(4)  # twice the deadline: a person's time is not the cell's
    box.type("Ada")
    box.press("Enter")
    outputs(page, 1).get_by_text("hello Ada").wait_for(timeout=60_000)
    shown = outputs(page, 1).inner_text()  # type: ignore[attr-defined]
    assert "DeadlineExceeded" not in shown and "input not sent" not in shown, shown
    assert re.search(r"name\?\s+Ada\n", shown), shown  # JupyterLab's echo of the answer, as on ipykernel
    shot(page, "input-after-deadline.png")


def test_an_interrupt_closes_the_box_keeps_the_typed_text_and_the_next_cell_runs(lab: str, page: object) -> None:
    put_notebook(lab, "interrupt_input.ipynb", WASM, "asked = 'yes'\nname = input('name? ')",
                 "print('next ran', asked)")
    open_on(page, lab, "interrupt_input.ipynb", WASM)
    wait_in_input(page)
    kernel_menu(page, "Interrupt Kernel")
    first = cell(page, 0)
    first.locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=60_000)
    outputs(page, 0).get_by_text("KeyboardInterrupt").first.wait_for(timeout=60_000)
    page.locator(BOX).wait_for(state="detached", timeout=30_000)  # type: ignore[attr-defined]
    outputs(page, 0).get_by_text(f"input not sent: {TYPED}").wait_for(timeout=30_000)
    shot(page, "input-interrupted.png")
    cell(page, 1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    outputs(page, 1).get_by_text("next ran yes").wait_for(timeout=60_000)
    assert page.locator(".jp-Dialog").count() == 0  # type: ignore[attr-defined]  # no "pending input" refusal


def test_a_restart_closes_the_box_and_keeps_the_typed_text(lab: str, page: object) -> None:
    put_notebook(lab, "restart_input.ipynb", WASM, "name = input('name? ')", "print('after the restart')")
    open_on(page, lab, "restart_input.ipynb", WASM)
    wait_in_input(page)
    kernel_menu(page, "Restart Kernel…")
    page.locator(".jp-Dialog-button.jp-mod-accept").click()  # type: ignore[attr-defined]
    page.locator(BOX).wait_for(state="detached", timeout=60_000)  # type: ignore[attr-defined]
    outputs(page, 0).get_by_text(f"input not sent: {TYPED}").wait_for(timeout=30_000)
    page.get_by_text(f"{WASM[1]} | Idle").wait_for(timeout=120_000)  # type: ignore[attr-defined]
    cell(page, 1).locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    outputs(page, 1).get_by_text("after the restart").wait_for(timeout=120_000)


def test_on_ipykernel_jupyterlab_itself_leaves_the_box_open_after_an_interrupt(lab: str, page: object) -> None:
    """What the stdin plugin is for, measured: ipykernel ends the cell (KeyboardInterrupt:
    Interrupted by user, its reply) and JupyterLab keeps the box, text and all. If this
    fails, JupyterLab closes the box itself now, and the plugin has nothing left to do."""
    put_notebook(lab, "native_input.ipynb", NATIVE, "name = input('name? ')")
    open_on(page, lab, "native_input.ipynb", NATIVE)
    wait_in_input(page)
    kernel_menu(page, "Interrupt Kernel")
    first = cell(page, 0)
    first.locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=60_000)
    outputs(page, 0).get_by_text("KeyboardInterrupt: Interrupted by user").wait_for(timeout=60_000)
    time.sleep(1.5)  # the plugin acts as the reply and idle come: long enough for it to have
    box = page.locator(BOX)  # type: ignore[attr-defined]
    assert box.count() == 1 and "jp-OutputArea-stdin-hiding" not in (box.get_attribute("class") or "")
    assert box.locator("input").input_value() == TYPED
    assert outputs(page, 0).get_by_text("input not sent").count() == 0
