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

import re
import subprocess
import sys
import time
from pathlib import Path

from support.lab_browser import DRIVE, KERNEL_STATUS, PANEL, SCREENSHOTS, open_notebook


def test_pip_install_makes_the_extension_enabled_and_ok_without_a_build() -> None:
    listed = subprocess.run([sys.executable, "-m", "jupyter", "labextension", "list"], capture_output=True,
                            text=True, timeout=120)
    text = re.sub(r"\x1b\[[0-9;]*m", "", listed.stdout + listed.stderr)
    [line] = [line for line in text.splitlines() if "jupyterlab-wasm-kernel" in line]
    assert "enabled" in line and "OK" in line and "(python, wasm-kernel)" in line, line
    assert "@jupyter-widgets/jupyterlab-manager" in text  # widgets come with the package


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


def test_a_link_in_an_output_downloads_the_file_the_sandbox_wrote_or_else_the_servers(
        lab: str, page: object) -> None:
    # otter's export links its zip by a path relative to the notebook; the sandbox wrote
    # the zip into its workspace, which the server's /files of the notebook's folder lacks.
    open_notebook(page, lab, "unit1/links.ipynb")
    page.keyboard.press("Shift+Enter")
    exported = page.locator(".jp-OutputArea-output a.exported")
    exported.wait_for(timeout=120_000)
    page.locator(".jp-OutputArea-output.jp-WasmFileChanges").wait_for(timeout=60_000)  # the cell is done
    with page.expect_download(timeout=60_000) as downloading:
        exported.click()
    assert downloading.value.suggested_filename == "lab01_export.zip"
    assert Path(downloading.value.path()).read_bytes() == b"PK from the sandbox"
    # A file only the notebook's folder has: the server's, as JupyterLab links it.
    with page.expect_download(timeout=60_000) as downloading:
        page.locator(".jp-OutputArea-output a.served").click()
    assert Path(downloading.value.path()).read_bytes() == b"a,b\n1,2\n"


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
    assert network[-1] == ("PermissionError: network access to example.org is not allowed in this sandbox; "
                           "the operator can allow it with c.WasmKernel.network_allow"), network  # on its one line
    assert not any("During handling" in line for line in network), network
    if SCREENSHOTS:
        page.locator(".jp-NotebookPanel").screenshot(path=str(Path(SCREENSHOTS) / "tracebacks.png"))


def test_the_sandbox_panel_counts_the_files_opens_the_sandbox_files_and_follows_limits_and_cost(
        lab: str, page: object) -> None:
    from playwright.sync_api import expect

    open_notebook(page, lab, "probe.ipynb")
    page.keyboard.press("Shift+Enter")
    page.locator(".jp-OutputArea-output.jp-WasmFileChanges").wait_for(timeout=120_000)
    page.locator('.jp-SideBar.jp-mod-right li[data-id="wasm-kernel-session-panel"]').click()
    panel = page.locator(PANEL)
    summary = panel.locator(".jp-WasmSessionPanel-fileSummary")
    expect(summary).to_have_text(re.compile(r"^1 file, "), timeout=60_000)
    assert panel.locator(".jp-WasmSessionPanel-session").inner_text().count("-") == 4  # the session's UUID
    assert panel.locator("[data-path]").count() == 0  # no file list of its own
    # The toolbar's folder button opens JupyterLab's file browser on the workspace.
    panel.locator(".jp-WasmSessionPanel-showFiles .jp-ToolbarButtonComponent").click()
    drive = page.locator(DRIVE)
    drive.locator(".jp-DirListing-itemText", has_text="hello.txt").wait_for(timeout=60_000)
    # Uploaded there (its toolbar's upload button, the file picker); a cell reads it
    # from /app, and the panel counts it without a cell.
    with page.expect_file_chooser(timeout=10_000) as choosing:  # type: ignore[attr-defined]
        drive.locator('[data-jp-item-name="upload"] .jp-ToolbarButtonComponent').click()
    choosing.value.set_files(files=[{"name": "uploaded.txt", "mimeType": "text/plain", "buffer": b"from the browser"}])
    drive.locator(".jp-DirListing-itemText", has_text="uploaded.txt").wait_for(timeout=60_000)
    expect(summary).to_have_text(re.compile(r"^2 files, "), timeout=30_000)
    # Back in the notebook: its last (empty) cell, in edit mode.
    page.locator(".jp-Notebook .jp-Cell").last.locator(".jp-InputArea-editor").click()
    page.keyboard.type("print(open('uploaded.txt').read())")
    page.keyboard.press("Shift+Enter")
    page.get_by_text("from the browser").first.wait_for(timeout=60_000)
    # %limits in a cell: the panel shows the new value after the cell.
    page.keyboard.type("%limits memory=256MiB")
    page.keyboard.press("Shift+Enter")
    panel.locator('tr[data-limit="memory"]').get_by_text("256 MiB").wait_for(timeout=60_000)
    assert "Sandbox: idle | last cell" in page.locator(".jp-WasmSandboxStatus").inner_text()
    if SCREENSHOTS:
        page.screenshot(path=str(Path(SCREENSHOTS) / "session-panel.png"))


def _shot(target: object, name: str) -> None:
    """Save a screenshot of `target` (a page or a locator) when a folder was asked for."""
    if SCREENSHOTS:
        target.screenshot(path=str(Path(SCREENSHOTS) / name))  # type: ignore[attr-defined]


def _run_cells(page: object, count: int) -> None:
    """Shift+Enter `count` times from the first cell; wait for the last one's reply."""
    for _ in range(count):
        page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    page.locator(".jp-Notebook .jp-Cell").nth(count - 1).locator(  # type: ignore[attr-defined]
        ".jp-InputPrompt", has_text=re.compile(r"\[\d+\]")).wait_for(timeout=120_000)


def _open_panel(page: object) -> object:
    """Show the Sandbox panel as the status item's click does (a click on its tab toggles it)."""
    page.evaluate(f"window.jupyterapp.shell.activateById('{PANEL[1:]}')")  # type: ignore[attr-defined]
    panel = page.locator(PANEL)  # type: ignore[attr-defined]
    panel.locator(".jp-WasmSessionPanel-session").wait_for(timeout=60_000)
    return panel


_COLOURS = """panel => {
    const body = panel.querySelector('.jp-WasmSessionPanel-body');
    const probe = document.createElement('div');
    probe.style.background = 'var(--jp-layout-color1)';
    probe.style.color = 'var(--jp-ui-font-color1)';
    document.body.appendChild(probe);
    const seen = getComputedStyle(body), theme = getComputedStyle(probe);
    const colours = {background: seen.backgroundColor, text: seen.color,
                     themeBackground: theme.backgroundColor, themeText: theme.color};
    probe.remove();
    return colours;
}"""


def _luminance(colour: str) -> float:
    red, green, blue = (int(n) for n in re.findall(r"\d+", colour)[:3])
    return (0.2126 * red + 0.7152 * green + 0.0722 * blue) / 255


def test_the_panel_follows_the_light_and_dark_themes_and_long_values_stay_on_one_line(
        lab: str, page: object) -> None:
    from playwright.sync_api import expect

    name = "quarterly-analysis-of-sandbox-results.ipynb"
    open_notebook(page, lab, name)
    _run_cells(page, 3)
    panel = _open_panel(page)
    expect(panel.locator(".jp-WasmSessionPanel-cells tbody tr")).to_have_count(3, timeout=60_000)
    expect(panel.locator(".jp-WasmSessionPanel-fileSummary")).to_have_text(
        re.compile(r"^4 files, .* in 1 folder$"), timeout=60_000)
    # The "Last cells" table has column headers and human units; the memory cell grew.
    heads = panel.locator(".jp-WasmSessionPanel-cells th").all_inner_texts()
    assert heads == ["Cell", "Time", "Memory", "Work"], heads
    rows = [row.split("\t") for row in panel.locator(".jp-WasmSessionPanel-cells tbody tr").all_inner_texts()]
    assert rows[0][0] == "[3]" and rows[0][3] == "magics", rows  # %limits: host magics only
    assert re.fullmatch(r"\+4\d(\.\d)? MiB", rows[1][2]), rows  # bytearray(48 MiB): the cell's growth
    # Time metering (the default): the guest's CPU time, in human units.
    assert re.fullmatch(r"[\d.<]+ (ms|s)", rows[1][3]) and "fuel" not in " ".join(rows[1]), rows
    # A long notebook name ends in an ellipsis on one line, its title the whole name.
    notebook = panel.locator(".jp-WasmSessionPanel-notebook")
    assert notebook.get_attribute("title") == name
    # (Looked up inside one evaluation: the panel redraws after each answer from the kernel.)
    fits = panel.evaluate("p => { const n = p.querySelector('.jp-WasmSessionPanel-notebook'); "
                          "return [getComputedStyle(n).textOverflow, n.scrollWidth > n.clientWidth, "
                          "n.getBoundingClientRect().height, parseFloat(getComputedStyle(n).lineHeight) || 20]; }")
    assert fits[0] == "ellipsis" and fits[1] and fits[2] < 1.5 * fits[3], fits
    # The limits: one line each, no "at most" wrapping.
    heights = panel.locator(".jp-WasmSessionPanel-limits tbody tr").evaluate_all(
        "rows => rows.map(r => r.getBoundingClientRect().height)")
    assert heights and max(heights) < 24, heights

    light = panel.evaluate(_COLOURS)
    assert light["background"] == light["themeBackground"] and light["text"] == light["themeText"], light
    assert _luminance(light["background"]) > 0.5 > _luminance(light["text"]), light
    _shot(panel, "panel-light.png")
    try:
        page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
        page.wait_for_function("document.body.dataset.jpThemeLight === 'false'", timeout=60_000)
        page.wait_for_function(f"({_COLOURS})(document.querySelector('{PANEL}')).background !== "
                               f"'{light['background']}'", timeout=60_000)
        dark = panel.evaluate(_COLOURS)
        assert dark["background"] == dark["themeBackground"] and dark["text"] == dark["themeText"], dark
        assert _luminance(dark["background"]) < 0.5 < _luminance(dark["text"]), dark
        # The file-change output follows too: its text is the theme's, not black.
        output = page.locator(".jp-OutputArea-output.jp-WasmFileChanges").first
        assert _luminance(output.evaluate("n => getComputedStyle(n).color")) > 0.5
        page.wait_for_timeout(500)  # the icons' colours follow a frame later
        _shot(panel, "panel-dark.png")
    finally:  # the lab's settings outlive this test: back to the light theme
        page.evaluate("window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})")
        page.wait_for_function("document.body.dataset.jpThemeLight === 'true'", timeout=60_000)


def test_a_delete_in_the_sandbox_files_asks_in_a_jupyterlab_dialog_and_the_panels_disk_use_follows(
        lab: str, page: object) -> None:
    from playwright.sync_api import expect

    native: list[str] = []  # window.confirm() and friends: none may open
    page.on("dialog", lambda dialog: (native.append(dialog.message), dialog.dismiss()))  # type: ignore[attr-defined]
    open_notebook(page, lab, "delete.ipynb")
    _run_cells(page, 1)
    panel = _open_panel(page)
    used = panel.locator(".jp-WasmSessionPanel-quota-used")
    expect(panel.locator(".jp-WasmSessionPanel-fileSummary")).to_have_text(re.compile(r"^1 file, "), timeout=60_000)
    before = used.inner_text()
    page.evaluate(f"window.jupyterapp.shell.activateById('{DRIVE[1:]}')")
    drive = page.locator(DRIVE)
    kept = drive.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text="keep.txt"))
    kept.wait_for(timeout=60_000)
    with page.expect_file_chooser(timeout=10_000) as choosing:  # type: ignore[attr-defined]
        drive.locator('[data-jp-item-name="upload"] .jp-ToolbarButtonComponent').click()
    choosing.value.set_files(files=[{"name": "big.bin", "mimeType": "application/octet-stream",
                                     "buffer": b"\0" * 300_000}])
    big = drive.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text="big.bin"))
    big.wait_for(timeout=60_000)
    expect(used).not_to_have_text(before, timeout=30_000)  # the upload counted, and the panel knows
    uploaded = used.inner_text()

    def delete_big() -> object:
        big.click(button="right")
        page.locator(".jp-WasmSandboxDriveMenu .lm-Menu-itemLabel", has_text=re.compile("^Delete$")).click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=10_000)
        return dialog

    dialog = delete_big()
    assert "big.bin" in dialog.inner_text()
    _shot(page, "drive-delete-dialog.png")
    dialog.locator(".jp-Dialog-button.jp-mod-reject").click()
    dialog.wait_for(state="detached", timeout=10_000)
    page.wait_for_timeout(1000)
    assert big.count() == 1 and used.inner_text() == uploaded  # Cancel keeps it

    delete_big().locator(".jp-Dialog-button.jp-mod-warn").click()
    big.wait_for(state="detached", timeout=30_000)
    expect(used).to_have_text(before, timeout=30_000)  # the delete counted
    assert kept.count() == 1
    assert native == [], native


def test_a_cell_that_writes_300_files_is_summarised_in_its_output_and_in_the_panel(lab: str, page: object) -> None:
    from playwright.sync_api import expect

    open_notebook(page, lab, "many.ipynb")
    _run_cells(page, 1)
    output = page.locator(".jp-OutputArea-output.jp-WasmFileChanges")
    output.wait_for(timeout=120_000)
    page.keyboard.type("%files")
    page.keyboard.press("Shift+Enter")
    # %files's own line, once it is there (under load the output area first shows others).
    files_line = re.compile(r"301 files, [\d.]+\s\w+")
    listed = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output").filter(has_text=files_line)
    # text_content, as the filter above reads: once under CI load the filter matched and the
    # table's inner_text (which depends on layout) did not.
    caption = files_line.search(listed.first.locator("caption").text_content(timeout=60_000) or "")
    assert "Files: 301 created" in output.locator(".jp-WasmFileChanges-summary").inner_text()
    out = output.locator('.jp-WasmFileChanges-folders tr[data-folder="out"]')
    assert out.inner_text().split("\t")[:2] == ["out/", "300"], out.inner_text()
    # The list is there, collapsed: the output stays a few lines high.
    assert output.locator("details.jp-WasmFileChanges-details").evaluate("d => d.open") is False
    assert not output.locator('tr[data-path="out/part-000.csv"]').is_visible()
    assert output.bounding_box()["height"] < 200, output.bounding_box()  # type: ignore[index]
    _shot(output, "file-changes-summary.png")
    output.locator("details.jp-WasmFileChanges-details > summary").click()
    output.locator('tr[data-path="out/part-000.csv"]').wait_for(timeout=10_000)

    panel = _open_panel(page)
    summary = panel.locator(".jp-WasmSessionPanel-fileSummary")
    expect(summary).to_contain_text("301 files", timeout=60_000)
    assert caption and summary.inner_text().startswith(caption.group(0)), (caption, summary.inner_text())  # as %files
    assert "Sandbox files browser" in panel.locator(".jp-WasmSessionPanel-driveHint").inner_text()
    assert panel.locator("[data-path]").count() == 0  # a count, not 301 rows: the browser lists them
    _shot(panel, "panel-many-files.png")
    # "Last cells" stays on screen above it (once the panel's layout has settled).
    deadline = time.monotonic() + 20
    while True:
        cells = panel.locator(".jp-WasmSessionPanel-cells").bounding_box()
        box = panel.bounding_box()
        inside = bool(cells and box and box["y"] <= cells["y"]
                      and cells["y"] + cells["height"] <= box["y"] + box["height"])
        if inside or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert inside, (cells, box)
    panel.locator(".jp-WasmSessionPanel-showFiles .jp-ToolbarButtonComponent").click()
    page.locator(DRIVE).locator(".jp-DirListing-itemText", has_text="top.txt").wait_for(timeout=60_000)


def test_the_status_item_explains_itself_lines_up_and_opens_the_panel(lab: str, page: object) -> None:
    from playwright.sync_api import expect

    open_notebook(page, lab, "status.ipynb")
    _run_cells(page, 1)
    status = page.locator(".jp-WasmSandboxStatus")
    # The cell's own memory growth (24 MiB, in wasm pages), not the guest's whole memory.
    expect(status).to_have_text(re.compile(r"^Sandbox: idle \| last cell [\d.]+ (ms|s), \+[12]\d(\.\d)? MiB$"),
                                timeout=60_000)
    title = status.get_attribute("title") or ""
    for piece in ("Last cell [1]: ", "grew by ", "MiB in all", "CPU time: ", "Click to open the Sandbox panel"):
        assert piece in title, (piece, title)
    # On the status bar's line, as the kernel's status next to it.
    glyphs = "n => { const r = document.createRange(); r.selectNodeContents(n); const b = r.getBoundingClientRect(); " \
             "return [b.top, b.bottom]; }"
    mine = status.locator(".jp-StatusBar-TextItem").evaluate(glyphs)
    kernel = page.locator(".jp-StatusBar-TextItem", has_text=KERNEL_STATUS).evaluate(glyphs)
    assert abs(mine[0] - kernel[0]) <= 0.5 and abs(mine[1] - kernel[1]) <= 0.5, (mine, kernel)
    panel = page.locator(PANEL)
    assert not panel.is_visible()
    status.click()
    panel.locator(".jp-WasmSessionPanel-session").wait_for(timeout=30_000)
    assert panel.is_visible()
    _shot(page, "status-bar.png")


SETTINGS_PUT = """async ([plugin, raw]) => {
    const xsrf = (document.cookie.match(/_xsrf=([^;]+)/) || [])[1] || '';
    const r = await fetch(`/lab/api/settings/${plugin}`, {method: 'PUT', headers: {'X-XSRFToken': xsrf},
                                                          body: JSON.stringify({raw})});
    return [r.status, await r.text()];
}"""


def test_the_extensions_settings_are_served_checked_and_turn_the_status_item_off(lab: str, page: object) -> None:
    """The settings schemas (labextension/schema/) as JupyterLab's own settings API serves
    and checks them, and the status item following its setting after a reload."""
    from playwright.sync_api import expect

    open_notebook(page, lab, "settings.ipynb")
    _run_cells(page, 1)
    status = page.locator(".jp-WasmSandboxStatus")
    expect(status).to_be_visible(timeout=60_000)
    put = lambda plugin, raw: page.evaluate(SETTINGS_PUT, [f"jupyterlab-wasm-kernel:{plugin}", raw])  # noqa: E731
    code, text = put("drive", '{"refreshInterval": 10}')
    assert code == 400 and "refreshInterval" in text, (code, text[:300])  # below the schema's minimum
    code, text = put("session-panel", '{"showStatusItem": false}')
    assert code == 204, (code, text[:300])
    try:
        open_notebook(page, lab, "settings.ipynb")
        _run_cells(page, 1)
        # Bound to the kernel (the panel shows its session), yet not in the status bar.
        page.locator(PANEL).locator(".jp-WasmSessionPanel-session").wait_for(state="attached", timeout=60_000)
        expect(status).to_be_hidden(timeout=30_000)
    finally:
        assert put("session-panel", '{"showStatusItem": true}')[0] == 204
    open_notebook(page, lab, "settings.ipynb")
    _run_cells(page, 1)
    expect(status).to_be_visible(timeout=60_000)


def test_after_shut_down_kernel_the_panel_says_the_kernel_is_shut_down(lab: str, page: object) -> None:
    open_notebook(page, lab, "shutdown.ipynb")
    panel = _open_panel(page)
    page.locator(".lm-MenuBar-itemLabel", has_text="Kernel").click()
    page.get_by_text("Shut Down Kernel", exact=True).click()
    shown = panel.get_by_text("The kernel is shut down. Start it again to see the sandbox.")
    shown.wait_for(timeout=60_000)
    assert "not the WebAssembly sandbox" not in panel.inner_text()
    assert not page.locator(".jp-WasmSandboxStatus").is_visible()
