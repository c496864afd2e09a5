"""`wasm-kernel precompile` builds the course's environment the kernel's configuration
declares (c.WasmKernel.guest_requirements), with pip's lines on stderr, and the warm
image with it; a kernel of that configuration then starts on both, building nothing.
A course that cannot be built fails the command with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli_runs import env_for, wk_as_user
from support.kernel_client import RunningKernel
from support.wheelhouse import course_wheelhouse
from support.private_cache import cache_env

pytestmark = pytest.mark.slow


def test_precompile_builds_the_course_and_its_warm_image_for_the_kernel(tmp_path: Path, private_cache: Path) -> None:
    wheels = course_wheelhouse(tmp_path / "wheels")
    config = (f"c.WasmKernel.guest_requirements = ['pkg-a']\nc.WasmKernel.pip_no_index = True\n"
              f"c.WasmKernel.pip_find_links = [{str(wheels)!r}]\n")
    env = {**env_for(tmp_path, config), **cache_env(private_cache)}
    proc = wk_as_user(env, "precompile", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Building the course's environment" in proc.stderr
    assert "course environment (2 distributions)" in proc.stdout, proc.stdout
    images = set((private_cache / "images").iterdir())
    again = wk_as_user(env, "precompile", cwd=tmp_path)
    assert again.returncode == 0 and "Building the course's environment" not in again.stderr
    assert "its warm image is built" in again.stdout, again.stdout
    # The kernel reads the same configuration: it starts on that site and that image.
    k = RunningKernel(tmp_path / "data", env={"JUPYTER_CONFIG_DIR": env["JUPYTER_CONFIG_DIR"], **cache_env(private_cache)})
    try:
        run = k.execute("import pkg_a\npkg_a.A")
        assert run.status == "ok", run.stream("stderr")
    finally:
        k.km.shutdown_kernel(now=True)
    assert set((private_cache / "images").iterdir()) == images


def test_a_course_that_cannot_be_built_fails_precompile_in_one_line(tmp_path: Path, private_cache: Path) -> None:
    wheels = course_wheelhouse(tmp_path / "wheels")
    config = (f"c.WasmKernel.guest_requirements = ['fastmath']\nc.WasmKernel.pip_no_index = True\n"
              f"c.WasmKernel.pip_find_links = [{str(wheels)!r}]\n")
    proc = wk_as_user({**env_for(tmp_path, config), **cache_env(private_cache)}, "precompile", cwd=tmp_path)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert errors == ["wasm-kernel precompile: error: the course's environment: fastmath "
                      "has no pure-Python wheel for this sandbox: a package that needs compiled code cannot be installed "
                      "here (built in already: contourpy, fonttools, kiwisolver, lxml, markupsafe, matplotlib, numpy, "
                      "pandas, pillow, pyyaml, regex, scikit_learn, scipy, statsmodels, wrapt)"], proc.stderr
