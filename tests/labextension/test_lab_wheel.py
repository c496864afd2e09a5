"""The package as a wheel, on a machine with no Node: the wheel carries the lab
extension's production build, and a fresh JupyterLab of an environment where the
wheel is installed and `node` is not on the PATH makes a sandbox notebook from the
Launcher, after a click in the Sandbox files panel too, and runs its first cell.

The wheel is built from this checkout with its own build backend and hook
(`pip wheel --no-build-isolation`: a test never reaches the network), then installed
with no dependencies into a new venv. Its dependencies (JupyterLab, ipykernel,
wasmtime...) are the test environment's, seen through a path entry, never its
.pth files: the test environment's editable install of this package is not seen, so
the kernel, the kernelspec, the server extension and the lab extension are the
wheel's. JupyterLab's own page assets come from the test environment's app folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.lab_browser import (
    CARD, KERNEL, click_in_sandbox_files, fresh_lab, new_notebook_runs_where_the_file_browser_is, require_chromium,
    running_lab,
)

ROOT = Path(__file__).resolve().parents[2]
EXTENSION = "share/jupyter/labextensions/jupyterlab-wasm-kernel/"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # The build's jlpm is the test environment's (jupyter-builder), with Node on this machine.
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(ROOT),
                    "-w", str(out)], check=True, timeout=900, cwd=ROOT, env=env)
    (built,) = out.glob("wasm_kernel-*.whl")
    return built


def test_the_wheel_ships_the_extensions_production_build(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = [n.split(".data/data/", 1)[1] for n in z.namelist() if ".data/data/" + EXTENSION in n]
        scripts = [n for n in names if n.endswith(".js")]
        assert scripts, names
        assert not [n for n in names if n.endswith(".map")], "source maps: a development build"
        # webpack's development output names its chunks after their sources (lib_index_js...).
        assert not [n for n in scripts if "/lib_" in n], scripts


@pytest.fixture(scope="module")
def lab(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    require_chromium()
    base = tmp_path_factory.mktemp("wheel-lab")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    python = str(venv / "bin" / "python")
    # The venv's own pip, before it sees anything else: the test environment's pip
    # given --prefix would first uninstall this checkout's editable install from it.
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   timeout=300, cwd=base)
    purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, cwd=base).stdout.strip()
    # Then the test environment's packages as a plain path entry: its .pth files (the
    # editable install of this checkout) are not read from there.
    Path(purelib, "test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    where = subprocess.run([python, "-c", "import wasm_kernel; print(wasm_kernel.__file__)"],
                           capture_output=True, text=True, check=True, cwd=base).stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel's package, not the checkout's
    path = str(venv / "bin")
    assert shutil.which("node", path=path) is None and shutil.which("npm", path=path) is None
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=path, VIRTUAL_ENV=str(venv))
    root = base / "notebooks"
    root.mkdir()
    app_dir = Path(sys.prefix, "share", "jupyter", "lab")
    with running_lab(python, base, root, env=env, extra_args=[f"--LabApp.app_dir={app_dir}"]) as url:
        yield url


def test_the_launcher_makes_and_runs_a_sandbox_notebook_from_the_wheel_with_no_node(lab: str, page: object) -> None:
    fresh_lab(page, lab)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    new_notebook_runs_where_the_file_browser_is(page, lab, "wheel-launcher.png")
    fresh_lab(page, lab)
    click_in_sandbox_files(page)
    page.locator(CARD, has_text=KERNEL).click()  # type: ignore[attr-defined]
    new_notebook_runs_where_the_file_browser_is(page, lab, "wheel-launcher-after-sandbox-click.png")
