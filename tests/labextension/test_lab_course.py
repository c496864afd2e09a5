"""otter-grader's export in a real JupyterLab, with the course's environment the
operator declares: `grader.export(pdf=False, force_save=True)` saves the notebook
through ipylab's comm (a JupyterLab command the kernel asks for), so the exported zip
holds what the student typed and had not saved, and the link otter prints downloads
the zip from the sandbox's workspace. The course is the fixture of tests/e2e/test_course.py."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.course_fixture import write_course
from support.course_wheels import COURSE_OVERRIDES, COURSE_REQUIREMENTS, DOWNLOAD, WHEELS, ready
from support.lab_browser import KERNEL_STATUS, require_chromium, running_lab
from support.private_cache import cache_env

pytestmark = pytest.mark.slow  # builds the course's environment in a fresh lab

pytest.importorskip("ipylab", reason="ipylab comes with otter-grader, in the test extras")


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory, private_cache: Path) -> Iterator[str]:
    require_chromium()
    if not ready():
        raise RuntimeError(f"the course fixture's wheels are not downloaded: `{DOWNLOAD}` (.ci/run does)")
    base = tmp_path_factory.mktemp("lab-course")
    root = base / "notebooks"
    notebook = write_course(root / "lab01")
    nb = json.loads(notebook.read_text())
    nb["metadata"]["kernelspec"] = {"name": "wasm-python", "display_name": "Python (WebAssembly sandbox)",
                                    "language": "python"}
    notebook.write_text(json.dumps(nb))
    config = base / "config"
    config.mkdir()
    (config / "jupyter_config.py").write_text(
        f"c.WasmKernel.guest_requirements = {list(COURSE_REQUIREMENTS)!r}\n"
        f"c.WasmKernel.guest_overrides = {list(COURSE_OVERRIDES)!r}\n"
        f"c.WasmKernel.pip_no_index = True\nc.WasmKernel.pip_find_links = [{str(WHEELS)!r}]\n")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(config), **cache_env(private_cache)}
    with running_lab(sys.executable, base, root, env=env) as url:
        yield url


def test_export_force_saves_through_ipylab_and_its_link_downloads_the_zip(lab: str, page: object) -> None:
    page.goto(f"{lab}/lab/tree/lab01/lab01.ipynb?reset")  # type: ignore[attr-defined]
    page.get_by_text(KERNEL_STATUS).wait_for(timeout=120_000)  # type: ignore[attr-defined]
    cells = page.locator(".jp-Notebook .jp-Cell")  # type: ignore[attr-defined]
    cells.first.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]  # import otter: waits for the course's build
    cells.first.locator(".jp-InputPrompt", has_text="[1]").wait_for(timeout=600_000)
    # A cell the student types and never saves, then the export that force-saves.
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    page.keyboard.press("a")  # type: ignore[attr-defined]  # a new cell above the next one
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.keyboard.type("marker = 'typed in the browser, never saved by hand'")  # type: ignore[attr-defined]
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    page.keyboard.press("Escape")  # type: ignore[attr-defined]
    page.keyboard.press("a")  # type: ignore[attr-defined]
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    page.keyboard.type("grader.export(pdf=False, force_save=True)")  # type: ignore[attr-defined]
    page.keyboard.press("Shift+Enter")  # type: ignore[attr-defined]
    link = page.locator(".jp-OutputArea-output a[download]", has_text="here")  # type: ignore[attr-defined]
    link.wait_for(timeout=120_000)
    outputs = page.locator(".jp-OutputArea-output").all_inner_texts()  # type: ignore[attr-defined]
    assert not any("Couldn't automatically save" in text for text in outputs), outputs
    with page.expect_download(timeout=60_000) as downloading:  # type: ignore[attr-defined]
        link.click()
    assert downloading.value.suggested_filename.startswith("lab01_")
    with zipfile.ZipFile(downloading.value.path()) as exported:
        saved = exported.read("lab01.ipynb").decode()
    assert "typed in the browser, never saved by hand" in saved
