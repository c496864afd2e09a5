"""%pip in the sandbox: pure-Python wheels into the session's own package folder,
read-only to the guest, kept across restarts and reopenings; everything else
refused in one line. The wheels come from a local wheelhouse the tests build."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from support.http_servers import LocalWeb
from support.wheelhouse import course_wheelhouse, serve_as_index

pytestmark = pytest.mark.slow  # real pip installs into a kernel's session


def result_text(run: object) -> str:
    return "".join(str(m["content"]["data"]["text/plain"]) for m in run.outputs  # type: ignore[attr-defined]
                   if m["msg_type"] == "execute_result")


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return course_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


def pip_argv(wheelhouse: Path, *more: str) -> list[str]:
    return ["--WasmKernel.pip_no_index=True", f"--WasmKernel.pip_find_links={wheelhouse}", *more]


@pytest.fixture
def notebook(tmp_path: Path) -> Path:
    folder = tmp_path / "course"
    folder.mkdir()
    return folder / "lesson.ipynb"


@pytest.fixture
def kernel(tmp_path: Path, wheelhouse: Path, notebook: Path) -> Iterator[RunningKernel]:
    k = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse), cwd=notebook.parent,
                      env={"JPY_SESSION_NAME": str(notebook)})
    yield k
    k.km.shutdown_kernel(now=True)


def packages_dir(kernel: RunningKernel) -> Path:
    return kernel.sessions_root / ".wasm-kernel" / "packages" / kernel.session_id()


def test_install_then_import_in_the_same_cell_and_the_next(kernel: RunningKernel) -> None:
    run = kernel.execute("%pip install greet==1.0\nimport greet\ngreet.hello()", timeout=120)
    assert run.status == "ok", run.stream("stderr")
    assert "Successfully installed greet-1.0" in run.stream()
    assert "restart the kernel" in run.stream()
    assert result_text(run) == "'hello from a wheel'"
    assert result_text(kernel.execute("import greet\ngreet.__file__")) == \
        "'/usr/local/lib/python3.15/session-packages/greet/__init__.py'"


def test_bang_pip_lines_are_pip_magic_lines(kernel: RunningKernel) -> None:
    # Notebooks write `!pip install x`; the shell's pip would install on the host, so
    # the line runs as %pip does (pip3 and python -m pip too), into the session.
    run = kernel.execute("!pip install greet==1.0\nimport greet\ngreet.hello()", timeout=120)
    assert run.status == "ok", run.stream("stderr")
    assert "Successfully installed greet-1.0" in run.stream()
    assert result_text(run) == "'hello from a wheel'"
    assert "greet" in kernel.execute("!python -m pip list").displays()[0]["data"]["text/plain"]
    assert kernel.execute("!pip3 install -r requirements.txt").reply["content"]["ename"] == "UsageError"


def test_dependencies_install_and_built_in_ones_are_used_not_copied(kernel: RunningKernel) -> None:
    run = kernel.execute("%pip install pkg-a\nimport pkg_a\npkg_a.A", timeout=120)
    assert run.status == "ok" and result_text(run) == "'ab'"
    assert "Successfully installed pkg-a-1.0 pkg-b-1.2" in run.stream()
    installed = sorted(p.name for p in packages_dir(kernel).iterdir())
    assert installed == ["pkg_a", "pkg_a-1.0.dist-info", "pkg_b", "pkg_b-1.2.dist-info"]  # no numpy stand-in


@pytest.fixture(scope="module")
def index_url(wheelhouse: Path) -> Iterator[str]:
    web = LocalWeb()
    yield serve_as_index(wheelhouse, web)
    web.close()


@pytest.mark.parametrize("package", ["uses-traitlets", "uses-any-traitlets"])
def test_a_built_in_is_never_replaced_by_a_registry_wheel_of_its_own_version(
    tmp_path: Path, index_url: str, notebook: Path, package: str, request: pytest.FixtureRequest,
) -> None:
    # The index holds traitlets at the guest's own version, needing a compiled
    # package, as PyPI's IPython needs psutil: had pip taken it, the install would
    # fail on fastmath.
    kernel = RunningKernel(tmp_path / "jupyter", argv=[f"--WasmKernel.pip_index_url={index_url}"], cwd=notebook.parent,
                           env={"JPY_SESSION_NAME": str(notebook)})
    request.addfinalizer(lambda: kernel.km.shutdown_kernel(now=True))
    run = kernel.execute(f"%pip install {package}\nimport traitlets\nhasattr(traitlets, 'IMPOSTOR')", timeout=120)
    assert run.status == "ok", run.stream() + run.stream("stderr")
    assert f"Successfully installed {package}-1.0" in run.stream() and "fastmath" not in run.stream()
    assert result_text(run) == "False"
    installed = sorted(p.name for p in packages_dir(kernel).iterdir())
    assert not [name for name in installed if name.startswith("traitlets")], installed


def test_dependencies_are_chosen_by_the_guests_markers_not_the_hosts(kernel: RunningKernel) -> None:
    run = kernel.execute("%pip install marked", timeout=120)
    assert run.status == "ok", run.stream() + run.stream("stderr")
    assert "Successfully installed greet-2.0 marked-1.0 pkg-b-1.2" in run.stream(), run.stream()


def test_a_dependency_over_pinned_against_a_built_in_resolves_with_the_operators_override(
    tmp_path: Path, wheelhouse: Path, notebook: Path, request: pytest.FixtureRequest,
) -> None:
    def kernel_with(*settings: str) -> RunningKernel:
        k = RunningKernel(tmp_path / f"jupyter-{len(settings)}-{abs(hash(settings))}", argv=pip_argv(wheelhouse, *settings),
                          cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
        request.addfinalizer(lambda: k.km.shutdown_kernel(now=True))
        return k

    from wasm_kernel.host.builtin_packages import builtin_distributions

    wrapt = builtin_distributions()["wrapt"][1]
    plain = kernel_with().execute("%pip install pins-wrapt", timeout=120)
    said = plain.stream() + plain.stream("stderr")
    assert f"depends on wrapt<2,>=1.16, but the sandbox has wrapt {wrapt} built in" in said, said
    assert "WasmKernel.guest_overrides" in said and said.count("\n") == 1, said
    run = kernel_with('--WasmKernel.guest_overrides=["wrapt>=1.16"]').execute(
        "%pip install pins-wrapt\nimport pins_wrapt\npins_wrapt.WRAPT", timeout=120)
    assert run.status == "ok", run.stream() + run.stream("stderr")
    assert "Successfully installed pins-wrapt-1.0" in run.stream() and result_text(run) == repr(wrapt)
    # An override the built-in does not satisfy still fails; a malformed one is refused.
    narrow = kernel_with('--WasmKernel.guest_overrides=["wrapt<2"]').execute("%pip install pins-wrapt", timeout=120)
    assert narrow.status == "error" and "wrapt" in narrow.stream("stderr")
    bad = kernel_with('--WasmKernel.guest_overrides=["wrapt @ file:///etc"]').execute("%pip install greet", timeout=120)
    assert "guest_overrides entry 'wrapt @ file:///etc' is not a name with a version range" in bad.stream("stderr")


def test_the_operators_constraints_narrow_every_install(tmp_path: Path, wheelhouse: Path, notebook: Path) -> None:
    k = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse, '--WasmKernel.guest_constraints=["greet<2"]'),
                      cwd=notebook.parent, env={"JPY_SESSION_NAME": str(notebook)})
    try:
        run = k.execute("%pip install greet", timeout=120)
        assert "Successfully installed greet-1.0" in run.stream(), run.stream() + run.stream("stderr")
    finally:
        k.km.shutdown_kernel(now=True)


def test_requires_python_is_the_guests(kernel: RunningKernel) -> None:
    run = kernel.execute("%pip install guest-python-only", timeout=120)
    assert "Successfully installed guest-python-only-1.0" in run.stream(), run.stream() + run.stream("stderr")
    refused = kernel.execute("%pip install future-python-only", timeout=120)
    assert refused.status == "error" and "future-python-only" in refused.stream("stderr")


def test_packages_survive_restart_and_reopening(tmp_path: Path, wheelhouse: Path, notebook: Path) -> None:
    env = {"JPY_SESSION_NAME": str(notebook)}
    first = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse), cwd=notebook.parent, env=env)
    try:
        assert first.execute("%pip install greet==1.0", timeout=120).status == "ok"
        first.km.restart_kernel(now=True)
        first.kc.wait_for_ready(timeout=60)
        assert result_text(first.execute("import greet; greet.hello()")) == "'hello from a wheel'"
    finally:
        first.km.shutdown_kernel(now=True)
    again = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse), cwd=notebook.parent, env=env)
    try:
        assert result_text(again.execute("import greet; greet.hello()")) == "'hello from a wheel'"
        assert "greet" in again.execute("%pip list").displays()[0]["data"]["text/plain"]
    finally:
        again.km.shutdown_kernel(now=True)


def test_the_guest_cannot_change_its_packages(kernel: RunningKernel) -> None:
    assert kernel.execute("%pip install greet==1.0", timeout=120).status == "ok"
    before = (packages_dir(kernel) / "greet" / "__init__.py").read_bytes()
    for code in ("open('/usr/local/lib/python3.15/session-packages/greet/__init__.py', 'w').write('pwned')",
                 "import os\nos.remove('/usr/local/lib/python3.15/session-packages/greet/__init__.py')",
                 "import os\nos.mkdir('/usr/local/lib/python3.15/session-packages/evil')",
                 "open('/usr/local/lib/python3.15/session-packages/sitecustomize.py', 'w').write('x')"):
        assert kernel.execute(code).status == "error", code
    assert (packages_dir(kernel) / "greet" / "__init__.py").read_bytes() == before
    assert sorted(p.name for p in packages_dir(kernel).iterdir()) == ["greet", "greet-1.0.dist-info"]


def test_upgrade_and_uninstall(kernel: RunningKernel) -> None:
    assert kernel.execute("%pip install greet==1.0", timeout=120).status == "ok"
    run = kernel.execute("%pip install -U greet", timeout=120)
    assert "Successfully installed greet-2.0" in run.stream()
    assert sorted(p.name for p in packages_dir(kernel).iterdir()) == ["greet", "greet-2.0.dist-info"]
    run = kernel.execute("%pip uninstall -y greet")
    assert run.stream().startswith("Successfully uninstalled greet 2.0")
    assert list(packages_dir(kernel).iterdir()) == []
    assert kernel.execute("%pip uninstall -y greet").reply["content"]["ename"] == "UsageError"


@pytest.mark.parametrize(
    "line,words",
    [
        ("%pip install numpy", "already built into the sandbox"),
        ("%pip install 'numpy<2'", "built in, and built-in packages cannot be replaced"),
        ("%pip install needs-old-numpy", "depends on numpy<2, but the sandbox has numpy"),
        ("%pip install fastmath", "fastmath has no pure-Python wheel for this sandbox"),
        ("%pip install needs-fastmath", "fastmath, which needs-fastmath needs, has no pure-Python wheel"),
        ("%pip install 'greet>5'", "no version of greet matches >5 (there are 1.0, 2.0)"),
        ("%pip install sneaky", "carries compiled code"),
        ("%pip install traitlets", "already built into the sandbox"),
    ],
)
def test_what_cannot_be_installed_says_why_in_one_line(kernel: RunningKernel, line: str, words: str) -> None:
    run = kernel.execute(line, timeout=120)
    said = run.stream() + run.stream("stderr")
    assert words in said and said.count("\n") == 1, said
    assert list(packages_dir(kernel).iterdir()) == []


@pytest.mark.parametrize(
    "line",
    [
        "%pip install -r requirements.txt", "%pip install -e .", "%pip install --index-url http://evil/ greet",
        "%pip install --extra-index-url http://evil/ greet", "%pip install --target /tmp greet",
        "%pip install --find-links /tmp greet", "%pip install --config-settings x=y greet",
        "%pip install ./greet-1.0-py3-none-any.whl", "%pip install /etc/passwd", "%pip install git+https://x/y.git",
        "%pip install 'greet @ file:///etc/passwd'", "%pip install 'greet; python_version > \"3\"'",
        "%pip install", "%pip download greet", "%pip config set global.index-url x", "%pip install --user greet",
        "%pip install 'greet==1.0' " + "x" * 300, "%pip install '", "%pip",
    ],
)
def test_only_names_and_a_few_options_reach_pip(kernel: RunningKernel, line: str) -> None:
    run = kernel.execute(line, timeout=120)
    assert run.reply["content"]["ename"] == "UsageError", line
    assert run.stream("stderr").count("\n") == 1 and run.stream() == ""
    assert list(packages_dir(kernel).iterdir()) == []


def test_a_size_cap_refuses_big_installs(tmp_path: Path, wheelhouse: Path) -> None:
    k = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse, "--WasmKernel.pip_max_bytes=100000"))
    try:
        run = k.execute("%pip install bulky", timeout=120)
        assert "over this kernel's 0 MiB limit" in run.stream("stderr") or "limit" in run.stream("stderr")
        assert list(packages_dir(k).iterdir()) == []
    finally:
        k.km.shutdown_kernel(now=True)


def test_the_operator_can_turn_pip_off(tmp_path: Path, wheelhouse: Path) -> None:
    k = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse, "--WasmKernel.pip_enabled=False"))
    try:
        run = k.execute("%pip install greet")
        assert "turned off" in run.reply["content"]["evalue"]
        run = k.execute("%config WasmKernel.pip_enabled = True")
        assert run.reply["content"]["ename"] == "UsageError" and "operator" in run.reply["content"]["evalue"]
    finally:
        k.km.shutdown_kernel(now=True)


def test_other_package_managers_refuse(kernel: RunningKernel) -> None:
    for line in ("%conda install greet", "%mamba install greet", "%uv pip install greet"):
        run = kernel.execute(line)
        assert run.reply["content"]["ename"] == "UsageError" and "only %pip" in run.reply["content"]["evalue"]


def test_a_relative_jupyter_data_dir_installs_where_the_kernel_keeps_its_sessions(
    tmp_path: Path, wheelhouse: Path, notebook: Path, request: pytest.FixtureRequest,
) -> None:
    # Read against the kernel's folder, as every Jupyter tool reads it; pip runs in a
    # scratch folder of its own, where the relative path once pointed nowhere.
    kernel = RunningKernel(tmp_path / "jupyter", argv=pip_argv(wheelhouse), cwd=notebook.parent,
                           env={"JPY_SESSION_NAME": str(notebook), "JUPYTER_DATA_DIR": "jdata"})
    request.addfinalizer(lambda: kernel.km.shutdown_kernel(now=True))
    run = kernel.execute("%pip install greet==1.0\nimport greet\ngreet.hello()", timeout=120)
    assert run.status == "ok", (run.stream(), run.stream("stderr"), run.reply["content"])
    assert result_text(run) == "'hello from a wheel'"
    shelf = notebook.parent / "jdata" / "wasm-kernel" / "sessions" / ".wasm-kernel" / "packages"
    assert [p.name for p in shelf.glob("*/greet-1.0.dist-info")] == ["greet-1.0.dist-info"]


def test_a_package_installed_after_a_point_is_gone_after_a_rewind_to_it(kernel: RunningKernel) -> None:
    assert kernel.execute("x = 1", timeout=120).status == "ok"  # a point before the install
    count = kernel.execute("x", timeout=120).reply["content"]["execution_count"] - 1
    run = kernel.execute("%pip install greet==1.0\nimport greet\nx = 2", timeout=180)
    assert run.status == "ok", run.outputs
    back = kernel.execute(f"%rewind {count}", timeout=120)
    assert back.status == "ok", back.outputs
    assert "uninstalled: greet 1.0" in back.printed(), back.printed()
    gone = kernel.execute("import importlib.util\nprint(x, importlib.util.find_spec('greet') is None)", timeout=120)
    assert gone.stream() == "1 True\n", gone.outputs
    listed = kernel.execute("%pip list", timeout=120)
    assert "greet" not in listed.stream() + str(listed.displays())
