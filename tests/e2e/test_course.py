"""A real course runs unchanged: the course fixture (support/course_fixture.py, a lab
in the style of a university data-science course) on native ipykernel and on
wasm-python side by side, compared cell by cell.

wasm-python gets only the documented operator setup (docs/teaching.md, "The course's
environment"): `guest_requirements` for the course's two packages from the registry,
datascience and otter-grader, and the override for otter's wrapt pin. Its wheels
come from the folder .ci/run downloads before the tests (support/course_wheels.py):
the build talks to no registry. ipykernel runs the same notebook with the same two
packages installed in the host's venv (the test extras)."""

from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.course_fixture import code_cells, write_course
from support.course_wheels import COURSE_OVERRIDES, COURSE_REQUIREMENTS, DOWNLOAD, WHEELS, ready
from support.kernel_client import Execution, RunningKernel
from support.parity import normalise
from support.private_cache import cache_env

pytestmark = pytest.mark.slow  # builds the course's environment, then runs the lab on two kernels

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")
pytest.importorskip("datascience", reason="datascience is in the test extras: pip install -e '.[test]'")

# The export's zip is named for the moment it was made; its link's text and target follow.
STAMP = re.compile(r"\d{4}_\d{2}_\d{2}T\d{2}_\d{2}_\d{2}_\d+")


def _guest_constant(name: str) -> str:
    """A constant of the guest's refusals, read without importing guest code on the host."""
    import ast

    import wasm_kernel

    source = Path(wasm_kernel.__file__).parent / "runtime" / "guest_lib" / "_wasm_kernel_refusals.py"
    for node in ast.parse(source.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == name:
            return str(ast.literal_eval(node.value))
    raise LookupError(name)


OTTER_RUN_TESTS = _guest_constant("OTTER_RUN_TESTS")
# otter cheers a passing check with an emoji it picks at random (otter/test_files/abstract_test.py).
CHEER = re.compile(r"passed! \S+(?=</p>)")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The course's folder, one copy per kernel: ipykernel's export writes its zip there."""
    if not ready():
        raise RuntimeError(f"the course fixture's wheels are not downloaded: `{DOWNLOAD}` (.ci/run does)")
    base = tmp_path_factory.mktemp("course")
    made = {}
    for kernel in ("native", "wasm"):
        made[kernel] = base / kernel / "lab01"
        write_course(made[kernel])
    return made


@pytest.fixture(scope="module")
def kernels(folders: dict[str, Path], tmp_path_factory: pytest.TempPathFactory,
            private_cache: Path) -> Iterator[dict[str, RunningKernel]]:
    base = tmp_path_factory.mktemp("course-kernels")
    env = {"MPLBACKEND": "module://matplotlib_inline.backend_inline"}
    argv = [
        f"--WasmKernel.guest_requirements={json.dumps(list(COURSE_REQUIREMENTS))}",
        f"--WasmKernel.guest_overrides={json.dumps(list(COURSE_OVERRIDES))}",
        "--WasmKernel.pip_no_index=True", f"--WasmKernel.pip_find_links={json.dumps([str(WHEELS)])}",
    ]
    started = {
        "native": RunningKernel(base / "native", cwd=folders["native"], kernel_name="python3",
                                env={**env, "JPY_SESSION_NAME": str(folders["native"] / "lab01.ipynb")}),
        "wasm": RunningKernel(base / "wasm", cwd=folders["wasm"], argv=argv,
                              env={**env, "JPY_SESSION_NAME": str(folders["wasm"] / "lab01.ipynb"),
                                   **cache_env(private_cache)}),
    }
    try:
        yield started
    finally:
        for k in started.values():
            k.km.shutdown_kernel(now=True)


@pytest.fixture(scope="module")
def ran(kernels: dict[str, RunningKernel]) -> tuple[list[Execution], list[Execution]]:
    # wasm-python's first cell waits for the course's environment, built once.
    runs = [(kernels["native"].execute(code, timeout=300), kernels["wasm"].execute(code, timeout=900))
            for code in code_cells()]
    return [n for n, _ in runs], [w for _, w in runs]


def shown(run: Execution, forgiving: bool = False) -> list[Any]:
    """What the cell shows, as the parity test compares it, with the export's timestamp
    and otter's random cheer left out, and wasm-python's own first-start progress (its
    displays with a wasm-kernel- display id). forgiving: numpy's int width too (the
    guest is 32-bit: an int64 array says its dtype), as the issue's 95% counts."""
    kept = [m for m in run.outputs
            if not str(m["content"].get("transient", {}).get("display_id", "")).startswith("wasm-kernel-")]
    if len(kept) != len(run.outputs):  # the progress went, and the clear_output that took it away
        kept = [m for m in kept if m["msg_type"] != "clear_output"]
    items = normalise(Execution(run.reply, kept) if kept != run.outputs else run, "exact")
    text = CHEER.sub("passed! <cheer>", STAMP.sub("<stamp>", repr(items)))
    if forgiving:
        text = text.replace(", dtype=int64", "")
    return [text]


def test_every_grader_check_gives_ipykernels_verdict(ran: tuple[list[Execution], list[Execution]]) -> None:
    native, wasm = ran
    checks = [i for i, code in enumerate(code_cells()) if "grader.check(" in code]
    assert len(checks) == 5
    for i in checks:
        assert shown(wasm[i]) == shown(native[i]), code_cells()[i]
    # Four right answers and one wrong one, on both: the verdict is otter's, not a crash.
    verdicts = [m["content"]["data"]["text/plain"] for i in checks for m in wasm[i].outputs
                if m["msg_type"] == "execute_result"]
    assert sum("passed!" in v for v in verdicts) == 4, verdicts
    assert any("q3 results:" in v and "Trying:" in v for v in verdicts), verdicts


def test_at_least_95_percent_of_the_cells_show_what_ipykernel_shows(
        ran: tuple[list[Execution], list[Execution]]) -> None:
    native, wasm = ran
    cells = code_cells()
    differ = [(cells[i], shown(w, True), shown(n, True)) for i, (n, w) in enumerate(zip(native, wasm))
              if shown(w, True) != shown(n, True)]
    # The one cell that differs on purpose: export(run_tests=True) says why it cannot run here.
    assert [c for c, _, _ in differ] == ["grader.export(pdf=False, run_tests=True)"] or \
        len(differ) <= 0.05 * len(cells), "\n\n".join(f"{c}\n  wasm:   {w}\n  native: {n}" for c, w, n in differ)


def test_check_all_matches_and_export_with_run_tests_says_in_one_line_why_it_cannot_run(
        ran: tuple[list[Execution], list[Execution]]) -> None:
    native, wasm = ran
    cells = code_cells()
    check_all = cells.index("grader.check_all()")
    assert shown(wasm[check_all]) == shown(native[check_all])
    export = cells.index("grader.export(pdf=False, run_tests=True)")
    # run_tests=True runs `python -m otter.check.validate_export`, which executes the notebook
    # in a new Jupyter kernel through nbconvert: otter installs no nbconvert for wasi, and no
    # sandboxed kernel can start another. The export goes on without that run, in one line.
    assert wasm[export].reply["content"]["status"] == "ok", wasm[export].stream("stderr")
    assert wasm[export].stream("stderr") == OTTER_RUN_TESTS + "\n"
    links = [m for m in wasm[export].outputs if m["msg_type"] == "display_data"
             and "Your submission has been exported" in m["content"]["data"].get("text/html", "")]
    assert len(links) == 1
    assert "Your submission received the following results" in native[export].stream()


def test_the_exported_zip_is_in_the_workspace_and_the_notebooks_folder_is_unchanged(
        ran: tuple[list[Execution], list[Execution]], folders: dict[str, Path],
        kernels: dict[str, RunningKernel]) -> None:
    assert list(folders["native"].glob("lab01_*.zip"))  # ipykernel writes beside the notebook
    assert not list(folders["wasm"].glob("*.zip"))  # the notebook's folder is read-only to the guest
    zips = list(kernels["wasm"].sessions_root.glob("*/lab01_*.zip"))
    assert len(zips) == 1, zips
    with zipfile.ZipFile(zips[0]) as exported:
        assert "lab01.ipynb" in exported.namelist()
