"""`wasm-kernel grade` gives honest otter submissions the grades `otter run` gives them
on ipykernel (issue 43), question by question, partial credit included.

The assignment is the real `otter assign` output of tests/support/otter_assignment.py's
master notebook; the same submissions are graded by `wasm-kernel grade` (two kernels
at once) and, one by one, by `otter run` on ipykernel, otter's own local grading. The
students here are the seven of the full run's 30 (benchmarks/bench_otter.py grades all
30) that between them give every way of answering every question, as a notebook and
as otter's export zip, and the two kinds of rebinding an answer after its check.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.otter_assignment import (DATA, EXAMPLE, EXAMPLE_STUDENTS, POINTS, Assignment, Student, build, grading_env,
                                      honest_students, master_notebook, otter_run, wasm_grade)

pytestmark = pytest.mark.slow

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")

CI_STUDENTS = ("s01", "s02", "s03", "s04", "s05", "s06", "s13")


@dataclass
class Both:
    assignment: Assignment
    students: list[Student]
    subs: dict[str, Path]
    out: Path
    stdout: str
    stderr: str
    returncode: int
    native: dict[str, Path]  # student -> otter run's output folder


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, private_cache: Path) -> Iterator[Both]:
    from support.course_wheels import require_wheels

    require_wheels()
    base = tmp_path_factory.mktemp("otter-honest")
    assignment = build(base / "assignment")
    students = [s for s in honest_students(30) if s.name in CI_STUDENTS]
    subs = {s.name: s.submit(assignment, base / "submissions") for s in students}
    out = base / "out"
    proc = wasm_grade(assignment, list(subs.values()), out, grading_env(base, private_cache), "-j", "2")
    native = {}
    for s in students:
        native[s.name] = base / "native" / s.name
        otter_run(assignment, subs[s.name], native[s.name])
    yield Both(assignment, students, subs, out, proc.stdout, proc.stderr, proc.returncode, native)


def _results(path: Path) -> dict:
    return json.loads(path.read_text())


def test_every_honest_submission_gets_the_grade_otter_run_gives_on_ipykernel(both: Both) -> None:
    assert both.returncode == 0, both.stderr[-5000:]
    for s in both.students:
        ours = _results(both.out / "results" / f"{s.name}.json")
        theirs = _results(both.native[s.name] / "results.json")
        assert [(t["name"], t.get("score"), t.get("max_score")) for t in ours["tests"]] == \
               [(t["name"], t.get("score"), t.get("max_score")) for t in theirs["tests"]], s.name
        scores = {t["name"]: t["score"] for t in ours["tests"] if t["name"] in POINTS}
        assert scores == s.expected, (s.name, s.ways)


# What differs between Python versions in a doctest's traceback: the host's 3.11 shows
# doctest's own frame (with the host's path), the guest's 3.15 does not and marks the
# failing expression with carets.
_DOCTEST_FRAME = re.compile(r'\n *File "[^"]*doctest\.py", line \d+, in __run\n[^\n]*')
_CARETS = re.compile(r"\n *[~^]+ *(?=\n)")


def _same_python(text: str) -> str:
    return _CARETS.sub("", _DOCTEST_FRAME.sub("", text))


def test_the_results_json_is_otters_field_for_field(both: Both) -> None:
    for s in both.students:
        ours = _results(both.out / "results" / f"{s.name}.json")
        theirs = _results(both.native[s.name] / "results.json")
        assert ours.keys() == theirs.keys()
        for mine, native in zip(ours["tests"], theirs["tests"]):
            assert mine.keys() == native.keys()
            assert mine["visibility"] == native["visibility"]
            assert _same_python(mine["output"]) == _same_python(native["output"]), (s.name, mine["name"])


def test_partial_credit_and_where_a_question_was_checked(both: Both) -> None:
    by_name = {s.name: s for s in both.students}
    # s03: each question partly right (2 of 3, 1 of 2, 3 of 4, 1 of 2, 1 of 2 cases).
    assert by_name["s03"].expected == {"q1": 2.0, "q2": 1.0, "q3": 3.0, "q4": 0.5, "q5": 1.0}
    # s06 (export zip) rebinds mean_temp after q5's check: graded where it was checked.
    # s13 (a notebook named after the student: otter.Notebook("hw01.ipynb") fails on
    # both kernels) rebinds it too: graded on the final state, as otter does.
    assert by_name["s06"].rebinds and by_name["s06"].as_zip and by_name["s06"].expected["q5"] == 2.0
    assert by_name["s13"].rebinds and not by_name["s13"].as_zip and by_name["s13"].expected["q5"] == 0.0


def test_final_grades_csv_is_otters(both: Both) -> None:
    rows = list(csv.DictReader((both.out / "final_grades.csv").open()))
    assert list(rows[0]) == ["file", *sorted(POINTS), "total_points_earned", "percent_correct", "grading_status"]
    assert rows[0]["file"] == "points-per-question" and float(rows[0]["total_points_earned"]) == sum(POINTS.values())
    got = {row["file"]: float(row["total_points_earned"]) for row in rows[1:]}
    assert got == {both.subs[s.name].name: sum(s.expected.values()) for s in both.students}


def test_each_executed_notebook_is_the_submissions_cells_with_their_outputs(both: Both) -> None:
    import nbformat

    for s in both.students:
        executed = nbformat.read(both.out / "notebooks" / f"{s.name}.ipynb", as_version=4)
        sources = [c.source for c in executed.cells if c.cell_type == "code"]
        assert not any("_wasm_kernel_otter_grading" in src for src in sources)  # the grader's cells are gone
        answer = next(c for c in executed.cells if c.cell_type == "code" and "# answer q1" in c.source)
        assert s.answers["q1"] in answer.source
        checks = [c for c in executed.cells if c.cell_type == "code" and 'grader.check("q1")' in c.source]
        assert checks and all(c.execution_count for c in checks)


def test_progress_and_summary_lines(both: Both) -> None:
    assert f"graded {len(both.students)} of {len(both.students)} submissions" in both.stdout
    assert "Grading" in both.stderr and "100%" in both.stderr  # tqdm's bar, on stderr


def test_the_teaching_pages_commands_grade_the_example_assignment(tmp_path: Path, private_cache: Path) -> None:
    """docs/teaching.md's block, run as written in a copy of examples/otter/: the master
    notebook, its data, and a folder of three submissions."""
    import os
    import shutil
    import subprocess
    import sys

    from support.course_hub import TEACHING

    blocks = re.findall(r"^```bash\n(# grading otter assignments\n.*?)^```", TEACHING.read_text(),
                        re.MULTILINE | re.DOTALL)
    assert len(blocks) == 1, "docs/teaching.md has no bash block titled '# grading otter assignments'"
    course = tmp_path / "course"
    shutil.copytree(EXAMPLE, course, ignore=shutil.ignore_patterns("dist", "grades"))
    env = grading_env(tmp_path, private_cache)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0]], cwd=course, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    rows = list(csv.DictReader((course / "grades" / "final_grades.csv").open()))
    got = {row["file"]: float(row["total_points_earned"]) for row in rows[1:]}
    students = {s.name: s for s in honest_students(30)}
    assert got == {f"{person}{'.zip' if students[s].as_zip else '.ipynb'}": sum(students[s].expected.values())
                   for person, s in EXAMPLE_STUDENTS.items()}


def test_the_example_master_notebook_is_the_one_the_tests_describe() -> None:
    import nbformat

    committed = nbformat.read(EXAMPLE / "hw01.ipynb", as_version=4)
    assert [(c.cell_type, c.source) for c in committed.cells] == \
           [(c.cell_type, c.source) for c in master_notebook().cells], \
           "examples/otter/ is stale: .venv/bin/python tests/support/otter_assignment.py rewrites it"
    assert (EXAMPLE / "data.csv").read_text() == DATA


@pytest.mark.timeout(1200)
def test_the_benchmarks_short_form_runs_and_checks_its_grades() -> None:
    """benchmarks/bench_otter.py with two students: both graders, every grade checked."""
    import subprocess
    import sys

    from support.paths import REPO

    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_otter.py"), "--students", "2"],
                          capture_output=True, text=True, timeout=1100)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "grading 2 submissions, serially" in done.stdout
    assert "Every grade as deserved: 2 students" in done.stdout
