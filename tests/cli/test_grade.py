"""`wasm-kernel grade`'s command line (issue 43): what it takes, what it refuses in one
line, and what a submission it cannot grade gets (a zero with its reason, in
final_grades.csv and on stderr), on the tests' otter assignment."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from support.otter_assignment import Assignment, build, grading_env, honest_students, wasm_grade

pytestmark = pytest.mark.slow

pytest.importorskip("otter", reason="otter-grader is in the test extras: pip install -e '.[test]'")


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory, private_cache: Path) -> tuple[Assignment, dict[str, str]]:
    from support.course_wheels import require_wheels

    require_wheels()
    base = tmp_path_factory.mktemp("otter-cli")
    return build(base / "assignment"), grading_env(base, private_cache)


def grade(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = Path(sys.executable).with_name("wasm-kernel")
    return subprocess.run([str(command), "grade", *args], capture_output=True, text=True, env=env, timeout=600)


def rows(out: Path) -> dict[str, dict[str, str]]:
    return {row["file"]: row for row in csv.DictReader((out / "final_grades.csv").open())}


def test_a_wrong_command_line_or_autograder_is_one_line_and_exit_2(course: tuple[Assignment, dict],
                                                                    tmp_path: Path) -> None:
    assignment, env = course
    notebook = assignment.submit({}, tmp_path / "s.ipynb")
    (tmp_path / "not-a-zip.zip").write_text("hello")
    for args, said in (
        ((str(tmp_path / "missing.zip"), str(notebook)), "no such file"),
        ((str(tmp_path / "not-a-zip.zip"), str(notebook)), "is not a readable zip file"),
        ((str(assignment.autograder), str(tmp_path / "nothing-here")), "no submissions to grade"),
        ((str(assignment.autograder), str(notebook), "-j", "0"), "-j takes a number"),
        ((str(assignment.autograder), str(notebook), "--timeout", "0"), "--timeout takes seconds"),
        ((str(assignment.autograder), str(notebook), "--deadline", "soon"), "deadline"),
    ):
        done = grade(*args, "-o", str(tmp_path / "out"), env=env)
        assert done.returncode == 2, (args, done.stderr)
        errors = [line for line in done.stderr.splitlines() if "error:" in line]
        assert len(errors) == 1 and said in errors[0], (args, done.stderr)
        assert "Traceback" not in done.stderr


def test_a_submission_that_cannot_be_graded_is_a_zero_with_its_reason(course: tuple[Assignment, dict],
                                                                       tmp_path: Path) -> None:
    assignment, env = course
    good = honest_students(1)[0]
    subs = tmp_path / "subs"
    ok = good.submit(assignment, subs)
    (subs / "broken.ipynb").write_text("{ this is not a notebook")
    out = tmp_path / "out"
    done = wasm_grade(assignment, [subs], out, env)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "broken.ipynb: not graded: the notebook is not readable" in done.stderr
    table = rows(out)
    assert float(table["broken.ipynb"]["total_points_earned"]) == 0
    assert table["broken.ipynb"]["grading_status"].startswith("the notebook is not readable")
    assert float(table[ok.name]["total_points_earned"]) == sum(good.expected.values())
    assert "graded 1 of 2 submissions" in done.stdout


def test_a_notebook_of_another_assignment_gets_otters_refusal(course: tuple[Assignment, dict],
                                                              tmp_path: Path) -> None:
    assignment, env = course
    sub = honest_students(1)[0].submit(assignment, tmp_path / "subs")
    done = wasm_grade(assignment, [sub], tmp_path / "out", env, "-n", "hw02")
    assert done.returncode == 1
    status = rows(tmp_path / "out")[sub.name]["grading_status"]
    assert status == "Received submission for assignment 'hw01' (this is assignment 'hw02')"


def test_timeout_ends_a_submission_and_the_next_is_graded(course: tuple[Assignment, dict], tmp_path: Path) -> None:
    assignment, env = course
    slow = assignment.submit({"q1": "import time\ntime.sleep(600)"}, tmp_path / "subs" / "slow.ipynb")
    good = honest_students(1)[0]
    ok = good.submit(assignment, tmp_path / "subs")
    done = wasm_grade(assignment, [slow, ok], tmp_path / "out", env, "--timeout", "20", "-j", "1")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "slow.ipynb: not graded: the submission ran past --timeout 20 s" in done.stderr
    table = rows(tmp_path / "out")
    assert float(table["slow.ipynb"]["total_points_earned"]) == 0
    assert float(table[ok.name]["total_points_earned"]) == sum(good.expected.values())


def test_folders_globs_and_two_submissions_of_one_name(course: tuple[Assignment, dict], tmp_path: Path) -> None:
    assignment, env = course
    students = honest_students(2)
    a = students[0].submit(assignment, tmp_path / "a")  # s01.ipynb
    b = assignment.submit(students[1].answers, tmp_path / "b" / "s01.ipynb")  # another s01.ipynb
    done = wasm_grade(assignment, [tmp_path / "a", str(tmp_path / "b" / "*.ipynb"), a], tmp_path / "out", env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "graded 2 of 2 submissions" in done.stdout  # a named twice is graded once
    assert sorted(p.name for p in (tmp_path / "out" / "results").iterdir()) == ["s01-2.json", "s01.json"]
    assert b.exists()


def test_ctrl_c_stops_the_grading_at_once_and_writes_nothing(course: tuple[Assignment, dict], tmp_path: Path) -> None:
    import os
    import signal
    import threading
    import time

    assignment, env = course
    subs = [assignment.submit({"q1": "import time\ntime.sleep(600)"}, tmp_path / "subs" / f"slow{i}.ipynb")
            for i in range(3)]
    command = Path(sys.executable).with_name("wasm-kernel")
    proc = subprocess.Popen([str(command), "grade", str(assignment.autograder), *map(str, subs), "-o",
                             str(tmp_path / "out"), "-j", "2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)
    said: list[bytes] = []

    def read() -> None:  # tqdm redraws with \r: read what comes, not lines
        assert proc.stderr is not None
        while chunk := os.read(proc.stderr.fileno(), 4096):
            said.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 300
        while b"Grading" not in b"".join(said) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(8)  # two kernels started, their cells asleep
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends
        proc.wait(timeout=60)
        took = time.monotonic() - started
        reader.join(10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    err = b"".join(said).decode(errors="replace")
    assert proc.returncode == 130, err[-3000:]
    assert "interrupted after 0 of 3 submissions; final_grades.csv was not written" in err
    assert not (tmp_path / "out" / "final_grades.csv").exists()
    assert took < 600 / 10  # not the 600 s each cell sleeps, nor the third submission's turn
    assert "Traceback" not in err
