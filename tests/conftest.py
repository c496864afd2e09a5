"""Shared fixtures and hooks for every folder of the suite. Every test runs against the
real guest; the compiled module is cached once per machine (see `wasm-kernel
precompile`), so a warm run costs no compile.

The helpers the tests share are the package tests/support/ (pyproject's `pythonpath`
puts tests/ on sys.path: `from support.kernel_client import RunningKernel`); test
modules are imported by path (`--import-mode=importlib`), so two folders may hold
files of the same name."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

# The helpers' own asserts explain themselves as the tests' do (before any import of them).
pytest.register_assert_rewrite("support")

from support.events import Events  # noqa: E402
from wasm_kernel import PythonSandbox, create_sandbox  # noqa: E402

if TYPE_CHECKING:
    from support.http_servers import LocalWeb
    from support.kernel_client import RunningKernel
    from support.redis_server import RedisServer


# The suite's property tests are reproducible: the same examples on every run, so a
# CI result never depends on luck. `HYPOTHESIS_PROFILE=explore` draws fresh random
# examples, 40 times as many (tests/support/security_harness.py `examples`), for a long
# fuzzing run; README "Security model" has the command.
settings.register_profile("suite", derandomize=True, database=None, deadline=None)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


# --- the fast tier: pytest -m "not slow" ------------------------------------------
#
# Whole folders are slow: end-to-end runs on real servers, hubs and tools (e2e), the
# pool's processes on Redis (cluster), and JupyterLab in Chromium (labextension).
# Elsewhere a test is marked where it is written (pytest.mark.slow / pytestmark).

SLOW_FOLDERS = ("e2e", "cluster", "labextension")
_TESTS = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        folder = item.path.relative_to(_TESTS).parts[0] if item.path.is_relative_to(_TESTS) else ""
        if folder in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)


# --- the user's own sessions root stays as it was -------------------------------------
#
# A kernel that a test starts without JUPYTER_DATA_DIR (plain nbclient from the repo,
# as tests/cluster/test_router.py's direct run did) would keep its session in the
# user's Jupyter data folder, where runs of the suite left one each. So the whole run
# gets a Jupyter data folder of its own, and the user's sessions root, as it was
# before that override, is checked at the end.

_USER_SESSIONS_ROOT: Path | None = None
_SUITE_DATA_DIR: tuple[str, str | None] | None = None  # (the suite's folder, the JUPYTER_DATA_DIR it replaced)


def pytest_configure(config: pytest.Config) -> None:
    global _USER_SESSIONS_ROOT, _SUITE_DATA_DIR
    from wasm_kernel.sessions.layout import default_workspace_root

    _USER_SESSIONS_ROOT = default_workspace_root()  # before the override below
    folder = tempfile.mkdtemp(prefix="wk-suite-jupyter-")
    _SUITE_DATA_DIR = (folder, os.environ.get("JUPYTER_DATA_DIR"))
    os.environ["JUPYTER_DATA_DIR"] = folder


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SUITE_DATA_DIR is None:
        return
    folder, before = _SUITE_DATA_DIR
    if before is None:
        os.environ.pop("JUPYTER_DATA_DIR", None)
    else:
        os.environ["JUPYTER_DATA_DIR"] = before
    shutil.rmtree(folder, ignore_errors=True)


def _sessions_under(root: Path) -> set[str]:
    from wasm_kernel.sessions.session_ids import is_session_id

    try:
        return {name for name in os.listdir(root) if is_session_id(name)}
    except (FileNotFoundError, NotADirectoryError):
        return set()


def _described(root: Path, session_ids: set[str]) -> str:
    """Each new session with what the registry says of it: the folder its kernel ran in
    points at the test."""
    from wasm_kernel.sessions.registry import SessionRegistry

    lines = []
    with SessionRegistry(root) as registry:
        for sid in sorted(session_ids):
            try:
                entry = registry.lookup(sid)
            except Exception:  # noqa: BLE001 - a broken registry only costs the hint
                entry = None
            hint = f" ({entry.mode} session, kernel started in {entry.notebook_path})" if entry else ""
            lines.append(f"  {root / sid}{hint}")
    return "\n".join(lines)


@pytest.fixture(scope="session", autouse=True)
def _no_session_outside_the_suites_roots() -> Iterator[None]:
    assert _USER_SESSIONS_ROOT is not None
    before = _sessions_under(_USER_SESSIONS_ROOT)
    yield
    new = _sessions_under(_USER_SESSIONS_ROOT) - before
    if new:
        pytest.fail(f"the suite left {len(new)} session(s) in the user's own sessions root; a test started a "
                    f"kernel without a JUPYTER_DATA_DIR of its own:\n{_described(_USER_SESSIONS_ROOT, new)}",
                    pytrace=False)


@pytest.fixture(scope="session", autouse=True)
def _compiled_guest() -> None:
    from wasm_kernel.host.module_cache import load_guest_module

    load_guest_module()


@pytest.fixture(scope="session")
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One wasm-kernel cache of the run's own, with the compiled modules
    (support/private_cache.py): for what a test builds per configuration (a course's
    site and its warm image), which the user's cache never gets."""
    from support.private_cache import make_private_cache

    return make_private_cache(tmp_path_factory.mktemp("wasm-kernel-cache"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "workspace"
    ws.mkdir()
    return ws


@pytest.fixture
def sandbox(workspace: Path) -> Iterator[PythonSandbox]:
    sb = create_sandbox(workspace=workspace)
    assert isinstance(sb, PythonSandbox)
    yield sb
    sb.close()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A sessions root any user can reach (pytest's tmp_path is private to root)."""
    base = Path(tempfile.mkdtemp(prefix="wk-shared-"))
    base.chmod(0o755)
    yield base / "root"
    for dirpath, dirnames, _ in os.walk(base):
        for d in dirnames:
            os.chmod(os.path.join(dirpath, d), 0o755)
    shutil.rmtree(base)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Kernels the tests killed left their private /tmp behind; sweep them as the next
    start would, so the suite leaves no guest folder (issue 10, class 8)."""
    from wasm_kernel.runtime.guest_scratch import scratch_parent, sweep_dead

    sweep_dead(scratch_parent())


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator["RedisServer"]:
    """A real redis-server for the scale-out tests (tests/support/redis_server.py)."""
    from support.redis_server import start_or_skip

    server = start_or_skip(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def web() -> Iterator["LocalWeb"]:
    """A loopback HTTP server for the network door's tests (tests/support/http_servers.py)."""
    from support.http_servers import LocalWeb

    server = LocalWeb()
    yield server
    server.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A sessions root of the test's own, made empty."""
    made = tmp_path / "root"
    made.mkdir()
    return made


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> Iterator["RunningKernel"]:
    """A real wasm-python kernel over jupyter_client (tests/support/kernel_client.py),
    shared by a module's tests, with its sandbox open: one cell has run. A module that
    needs other settings makes its own."""
    from support.kernel_client import RunningKernel

    started = RunningKernel(tmp_path_factory.mktemp("kernel") / "jupyter")
    started.execute("1")
    yield started
    started.shutdown()
