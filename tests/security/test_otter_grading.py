"""Grading hostile otter submissions with `wasm-kernel grade` (issue 43): every kind
of attack in one run, among honest submissions graded after them.

The assignment is otter's own `otter assign` output of tests/support/otter_assignment.py's
master notebook. Each hostile submission hides its attack in q1's answer, the other
answers right: it must get the points it earned (support/otter_assignment.py's HOSTILE
says which), with the reason in its results, while the grader's files, the other
submissions and the honest students' grades are untouched, and nothing it does runs
on the host. The hidden tests are never where a submission can read them: the
attacks that look for them (on disk, in a zip, in memory) find only the public case.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.grading import tree_hash
from support.otter_assignment import (HOSTILE, POINTS, Assignment, build, grading_env,
                                      honest_students, hostile_answers, hostile_expected, results_scores, wasm_grade)

pytestmark = pytest.mark.slow

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")

HONEST_AFTER = ("s01", "s06", "s13")  # s06: a zip that rebinds after its check; s13: a notebook that does  # graded after every hostile one (-j 1, in argument order)


@dataclass
class Run:
    assignment: Assignment
    out: Path
    stdout: str
    stderr: str
    returncode: int
    before: dict[str, str]
    after: dict[str, str]
    marker: Path
    expected_honest: dict[str, dict[str, float]]

    def scores(self, label: str) -> dict[str, float]:
        return results_scores(self.out / "results" / f"{label}.json")

    def output(self, label: str, question: str) -> str:
        data = json.loads((self.out / "results" / f"{label}.json").read_text())
        return next(t["output"] for t in data["tests"] if t["name"] == question)


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory, private_cache: Path) -> Iterator[Run]:
    from support.course_wheels import require_wheels

    require_wheels()
    base = tmp_path_factory.mktemp("otter-hostile")
    assignment = build(base / "assignment")
    subs_dir = base / "submissions"
    marker = base / "host-marker"
    # Where a submission would look for the hidden tests or write: the grader's own paths.
    paths = [str(assignment.autograder), str(base / "assignment" / "dist" / "autograder" / "*"),
             str(subs_dir / "*"), "tests/*.py", "/app/**/*.py", "../**/*.py", "/autograder/source/tests/*.py",
             "/*/q1.py", "/*/*/q1.py", "/tmp/**/*.py", "results/results.json"]
    subs = [assignment.submit(hostile_answers(kind, paths, str(marker)), subs_dir / f"{kind}.ipynb")
            for kind in HOSTILE]
    students = {s.name: s for s in honest_students(30) if s.name in HONEST_AFTER}
    subs += [students[name].submit(assignment, subs_dir) for name in HONEST_AFTER]
    protected = {"assignment": base / "assignment", "submissions": subs_dir}
    before = {name: tree_hash(path) for name, path in protected.items()}
    out = base / "out"
    env = grading_env(base, private_cache)
    proc = wasm_grade(assignment, subs, out, env, "-j", "1", "--deadline", "5s", "--limit", "disk=16MiB",
                      "--timeout", "300")
    after = {name: tree_hash(path) for name, path in protected.items()}
    yield Run(assignment, out, proc.stdout, proc.stderr, proc.returncode, before, after, marker,
              {name: students[name].expected for name in HONEST_AFTER})


def test_every_hostile_submission_is_graded_and_the_run_finishes(graded: Run) -> None:
    assert graded.returncode == 0, graded.stderr[-5000:]
    assert f"graded {len(HOSTILE) + len(HONEST_AFTER)} of {len(HOSTILE) + len(HONEST_AFTER)}" in graded.stdout


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_hostile_submission_gets_the_points_it_earned(graded: Run, kind: str) -> None:
    assert graded.scores(kind) == hostile_expected(kind), graded.stderr[-3000:]


def test_honest_submissions_graded_after_them_keep_their_scores(graded: Run) -> None:
    for name, expected in graded.expected_honest.items():
        assert graded.scores(name) == expected, name


def test_nothing_a_submission_does_reaches_the_grader_or_another_submission(graded: Run) -> None:
    assert graded.after == graded.before
    assert not graded.marker.exists()  # replace-pickle-dump's os.system and its pickle never ran here
    # The output flood is cut in the sandbox: its executed notebook stays small.
    assert (graded.out / "notebooks" / "output-flood.ipynb").stat().st_size < 3 << 20


def test_the_hidden_tests_are_never_readable_before_the_submission_has_finished(graded: Run) -> None:
    # Each found only what the student already has: square(3), the public case.
    for kind in ("read-hidden-tests", "read-hidden-from-memory"):
        assert graded.scores(kind)["q1"] == 1.0
        assert "square(-4)" in graded.output(kind, "q1")  # the hidden case ran, at the end, and failed


def test_the_reasons_are_in_the_results(graded: Run) -> None:
    assert "DeadlineExceeded" in graded.output("loop-in-test", "q1")
    assert "sent results of its own" in graded.output("forged-result-in-test", "q1")
    assert "sent results of its own" in graded.output("malformed-result", "q1")
    assert "not graded" in graded.output("os-exit-in-test", "q1")


def test_replacing_otters_code_is_noticed_and_undone(graded: Run) -> None:
    line = next(line for line in graded.stderr.splitlines() if "replace-otter.ipynb" in line)
    assert "otter.test_files.ok_test.run_doctest" in line and "put back" in line
    assert "otter.execute.checker.Checker.get_results" in line or "..." in line
    assert graded.scores("replace-otter")["q1"] == 0.0  # its square is wrong, and otter's doctest said so


def test_final_grades_has_every_submission_in_otters_columns(graded: Run) -> None:
    import csv

    rows = list(csv.DictReader((graded.out / "final_grades.csv").open()))
    assert list(rows[0]) == ["file", *sorted(POINTS), "total_points_earned", "percent_correct", "grading_status"]
    assert rows[0]["file"] == "points-per-question"
    files = {row["file"]: row for row in rows[1:]}
    assert set(files) == {f"{k}.ipynb" for k in HOSTILE} | {"s01.ipynb", "s06.zip", "s13.ipynb"}
    assert all(row["grading_status"] == "Completed" for row in files.values())
    assert float(files["endless-loop.ipynb"]["total_points_earned"]) == sum(hostile_expected("endless-loop").values())
