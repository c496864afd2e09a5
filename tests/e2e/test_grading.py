"""Autograding honest submissions with nbgrader: the wasm-python kernel gives each
student the grade ipykernel gives (issue 22, section 4).

The same submissions are graded twice, in two copies of the example course
(examples/teaching/): once on wasm-python (the course's nbgrader_config.py) and once
on ipykernel (`--Execute.kernel_name=python3`), and every student's score and every
test cell's score must match, and match what the answers deserve. The students here
are the seven of the full run's 30 (benchmarks/bench_grading.py grades all 30) that
between them give every kind of answer: right, wrong, right for the visible tests
only, not answered, printing and plotting, warning on stderr, partial credit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.grading import ASSIGNMENT, Course, Run, Submission, grade_on, honest_students

pytestmark = pytest.mark.slow

# Every variant of every answer, in 7 of the 30 (a greedy cover, fixed by the seed).
CI_STUDENTS = ("s01", "s02", "s04", "s14", "s16", "s22", "s23")


@dataclass
class Both:
    students: list[Submission]
    wasm: Course
    native: Course
    wasm_run: Run
    native_run: Run


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Both]:
    students = [s for s in honest_students(30) if s.student in CI_STUDENTS]
    courses = {}
    runs = {}
    for kernel in ("wasm-python", "python3"):
        course = Course(tmp_path_factory.mktemp(f"grading-{kernel}"))
        course.generate()
        for sub in students:
            course.submit(sub)
        runs[kernel] = grade_on(course, kernel)
        courses[kernel] = course
    yield Both(students, courses["wasm-python"], courses["python3"], runs["wasm-python"], runs["python3"])


def test_every_honest_submission_gets_the_grade_it_gets_on_ipykernel(both: Both) -> None:
    assert both.wasm_run.returncode == 0, both.wasm_run.log[-6000:]
    assert both.native_run.returncode == 0, both.native_run.log[-6000:]
    expected = {s.student: s.expected for s in both.students}
    assert both.native.scores() == expected  # the answers' own worth, on ipykernel
    assert both.wasm.scores() == expected
    names = [s.student for s in both.students]
    wasm, native = both.wasm.all_cell_scores(names), both.native.all_cell_scores(names)
    for sub in both.students:
        assert wasm[sub.student] == native[sub.student], sub.variants


def test_partial_credit_and_failures_show_the_same_on_both_kernels(both: Both) -> None:
    # s14 answers fizzbuzz with 6 of 8 cases right: the test cell's value is the points.
    assert both.wasm.cell_scores("s14")["fizzbuzz_tests"] == 1.5
    wasm, native = both.wasm.outputs("s14"), both.native.outputs("s14")
    assert wasm["fizzbuzz_tests"] == native["fizzbuzz_tests"] == "1.5"
    # A failing hidden test says the same thing to the student on both kernels.
    for student, cell in (("s02", "mean_by_city_tests"), ("s04", "squares_tests"), ("s23", "save_report_tests")):
        assert wasm_last_line(both.wasm.outputs(student)[cell]) == wasm_last_line(both.native.outputs(student)[cell])
    # A warning on stderr costs the points on both (nbgrader's rule: stderr in a test cell fails it).
    assert "UserWarning: this could be faster" in both.wasm.outputs("s23")["squares_tests"]


def wasm_last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_the_grading_kernel_is_wasm_python_and_its_writes_stay_in_its_workspace(both: Both) -> None:
    for sub in both.students:
        nb = both.wasm.graded(sub.student)
        assert nb["metadata"]["kernelspec"]["name"] == "wasm-python"
        folder = both.wasm.root / "autograded" / sub.student / ASSIGNMENT
        # The tests write report.json (and extra.csv): on ipykernel into the graded
        # folder, on wasm-python into the submission's own workspace.
        assert sorted(p.name for p in folder.iterdir()) == ["data", "ps1.ipynb"]
        native_folder = both.native.root / "autograded" / sub.student / ASSIGNMENT
        assert "report.json" in {p.name for p in native_folder.iterdir()}


# -- otter-grader ------------------------------------------------------------------------
#
# otter-grader's own local grading, `otter run`, cannot grade on a sandboxed kernel:
# the kernel hands the results back by pickling them to a file in the grader's own
# temporary folder (a path the guest does not have: its /tmp is private) and sends
# its logs to a TCP server on the grader (the guest has no sockets), and the grader
# unpickles both, so a submission that replaces pickle.dump runs code in the grader's
# own process (tried with otter-grader 7.0.0 on python3: the submission's `touch` ran
# on the host). `wasm-kernel grade` is the way to grade otter assignments in the
# sandbox (tests/e2e/test_otter_grading.py). This test pins the difference down: the
# same submission gets full marks from `otter run` on ipykernel, and on wasm-python
# otter reports that its autograder failed.
# Installed, otter also enables jupytext's Jupyter Server extension (it replaces every
# server's contents manager in the environment) and two more lab extensions; the
# server, drive, lab and hub tests run with them.

OTTER_TEST = '''OK_FORMAT = True

test = {
    "name": "squares",
    "points": 2,
    "suites": [{"cases": [
        {"code": ">>> squares(3)\\n[1, 4, 9]", "hidden": False, "locked": False},
        {"code": ">>> squares(0)\\n[]", "hidden": True, "locked": False},
    ], "scored": True, "setup": "", "teardown": "", "type": "doctest"}],
}
'''


def test_otter_grader_runs_its_checks_inside_the_kernel_so_not_in_the_sandbox(tmp_path: Path) -> None:
    pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")
    import nbformat

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "squares.py").write_text(OTTER_TEST)
    (tmp_path / "requirements.txt").write_text("")
    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("JPY_SESSION_NAME", None)
    otter = [sys.executable, "-m", "otter"]
    done = subprocess.run([*otter, "generate", "-t", "tests"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    answer = honest_students(1)[0].answers["squares"]
    results = {}
    for kernel in ("python3", "wasm-python"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(answer)], metadata={
            "kernelspec": {"name": kernel, "display_name": kernel, "language": "python"}})
        nbformat.write(nb, tmp_path / f"{kernel}.ipynb")
        out = tmp_path / f"out-{kernel}"
        out.mkdir()
        done = subprocess.run([*otter, "run", "--no-logo", "-a", "autograder.zip", "-o", str(out), f"{kernel}.ipynb"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        results[kernel] = json.loads((out / "results.json").read_text())
    # Gradescope's results format: a total, or one score per test.
    score = {k: r.get("score", sum(t.get("score") or 0 for t in r["tests"])) for k, r in results.items()}
    assert score == {"python3": 2.0, "wasm-python": 0}
    said = json.dumps(results["wasm-python"])
    assert "The autograder failed to produce any results" in said, said[:2000]
