"""The course's environment (sessions/course_site.py, kernel/course_environment.py):
packages the operator declares once are in every kernel's guest, read-only, from one
site in the cache that every session shares and no session's quota counts; %pip
counts them as installed; a course that cannot be built leaves the kernel running,
with one line saying why. The wheels come from the tests' local wheelhouse."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.kernel_client import RunningKernel
from support.wheelhouse import course_wheelhouse
from support.private_cache import cache_env

pytestmark = pytest.mark.slow  # builds course sites and their warm images

COURSE_PATH = "/usr/local/lib/python3.15/course-packages"


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return course_wheelhouse(tmp_path_factory.mktemp("wheelhouse"))


def course_argv(wheelhouse: Path, requirements: list[str], *more: str) -> list[str]:
    return [
        "--WasmKernel.pip_no_index=True", f"--WasmKernel.pip_find_links={wheelhouse}",
        f"--WasmKernel.guest_requirements={json.dumps(requirements)}", *more,
    ]


def start(tmp_path: Path, name: str, argv: list[str], request: pytest.FixtureRequest) -> RunningKernel:
    folder = tmp_path / f"{name}-folder"
    folder.mkdir()
    cache = request.getfixturevalue("private_cache")  # the sites and images built here are the tests' own
    k = RunningKernel(tmp_path / f"{name}-jupyter", argv=argv, cwd=folder,
                      env={"JPY_SESSION_NAME": str(folder / f"{name}.ipynb"), **cache_env(cache)})
    request.addfinalizer(lambda: k.km.shutdown_kernel(now=True))
    return k


def result(run: object) -> str:
    return "".join(str(m["content"]["data"]["text/plain"]) for m in run.outputs  # type: ignore[attr-defined]
                   if m["msg_type"] == "execute_result")


def test_the_courses_packages_are_in_every_kernel_from_one_read_only_site(
    tmp_path: Path, wheelhouse: Path, request: pytest.FixtureRequest,
) -> None:
    argv = course_argv(wheelhouse, ["pkg-a", "pins-wrapt"], '--WasmKernel.guest_overrides=["wrapt>=1.16"]')
    first = start(tmp_path, "lab1", argv, request)
    run = first.execute("import pkg_a, pins_wrapt, wrapt\n(pkg_a.A, pkg_a.__file__, pins_wrapt.WRAPT == wrapt.__version__)",
                        timeout=300)
    assert run.status == "ok", run.stream() + run.stream("stderr")
    assert result(run) == f"('ab', '{COURSE_PATH}/pkg_a/__init__.py', True)"
    # Read-only to the guest, and no session's: its packages folder stays empty.
    denied = first.execute(f"open('{COURSE_PATH}/pkg_a/x.py', 'w')")
    assert denied.reply["content"]["ename"] in ("PermissionError", "OSError"), denied.reply["content"]
    packages = first.sessions_root / ".wasm-kernel" / "packages"
    assert not any(packages.glob("*/*")) if packages.is_dir() else True
    # A second notebook's kernel uses the same site: nothing is built again.
    sites = sorted((request.getfixturevalue("private_cache") / "course").glob("[0-9a-f]*"))
    second = start(tmp_path, "lab2", argv, request)
    assert result(second.execute("import pkg_b\npkg_b.B")) == "'b'"
    assert sorted((request.getfixturevalue("private_cache") / "course").glob("[0-9a-f]*")) == sites
    # %pip sees them as installed, at their versions.
    said = second.execute("%pip install pkg-b").stream()
    assert "pkg-b 1.2 is already in the course's environment: nothing to install" in said, said
    refused = second.execute("%pip install 'pkg-b<1'").stream("stderr")
    assert "in the course's environment, which a notebook cannot change" in refused, refused


def test_a_courses_module_can_be_preloaded_into_the_warm_image(
    tmp_path: Path, wheelhouse: Path, request: pytest.FixtureRequest,
) -> None:
    argv = course_argv(wheelhouse, ["pkg-b"], '--WasmKernel.preload_modules=["pkg_b"]')
    k = start(tmp_path, "preloaded", argv, request)
    k.execute("1", timeout=300)  # the first start builds the site and the image
    k.km.restart_kernel(now=True)
    k.kc.wait_for_ready(timeout=120)
    run = k.execute("import sys\n('pkg_b' in sys.modules, sys.modules['pkg_b'].__file__)")
    assert result(run) == f"(True, '{COURSE_PATH}/pkg_b/__init__.py')", run.stream() + run.stream("stderr")


@pytest.mark.parametrize(
    "requirements,words",
    [
        (["fastmath"], "fastmath has no pure-Python wheel for this sandbox"),
        (["needs-old-numpy"], "needs-old-numpy 1.0 depends on numpy<2, but the sandbox has numpy"),
        (["greet @ file:///etc/passwd"], "only names and versions are allowed"),
    ],
)
def test_a_course_that_cannot_be_built_leaves_the_kernel_running_and_says_why(
    tmp_path: Path, wheelhouse: Path, request: pytest.FixtureRequest, requirements: list[str], words: str,
) -> None:
    k = start(tmp_path, "broken", course_argv(wheelhouse, requirements), request)
    run = k.execute("1 + 1", timeout=300)
    assert result(run) == "2"
    line = [ln for ln in run.stream("stderr").splitlines() if "course's packages are not available" in ln]
    assert len(line) == 1 and words in line[0], run.stream("stderr")
    assert "/tmp/" not in line[0] and str(Path.home()) not in line[0]


def test_a_requirements_file_holds_names_and_versions_only(
    tmp_path: Path, wheelhouse: Path, request: pytest.FixtureRequest,
) -> None:
    good = tmp_path / "requirements.txt"
    good.write_text("# the course's packages\ngreet==1.0  # pinned for the term\n\npkg-b\n")
    k = start(tmp_path, "fromfile", course_argv(wheelhouse, [], f"--WasmKernel.guest_requirements_file={good}"), request)
    assert result(k.execute("import greet, pkg_b\ngreet.hello()", timeout=300)) == "'hello from a wheel'"
    bad = tmp_path / "bad.txt"
    bad.write_text("greet\n--index-url http://evil/\n")
    k2 = start(tmp_path, "badfile", course_argv(wheelhouse, [], f"--WasmKernel.guest_requirements_file={bad}"), request)
    said = k2.execute("1").stream("stderr")
    assert "bad.txt line 2: '--index-url http://evil/' is an option" in said, said


def test_the_teaching_pages_course_block_is_what_the_kernel_reads() -> None:
    from traitlets.config import Config

    from support.course_hub import doc_block
    from wasm_kernel.kernel.kernel_settings import KernelSettings

    c = Config()
    exec(doc_block("/srv/course/jupyter/wasm_kernel_config.py: the course's packages"), {"c": c})  # noqa: S102
    request = KernelSettings(**c.WasmKernel).course_request()
    assert request is not None
    assert request.requirements == ("datascience==0.18.1", "otter-grader==7.0.0")
    assert request.pip.overrides == ("wrapt>=1.16",)
