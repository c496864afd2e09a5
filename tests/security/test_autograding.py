"""Autograding untrusted submissions (issue 22, section 4): hostile students in one
`nbgrader autograde` run on the wasm-python kernel, among honest ones.

The course is examples/teaching/ (tests/support/grading.py builds it in a temporary
folder and runs the real nbgrader commands). Each hostile submission hides its attack
in the `squares` answer, written so that `squares` works only if the attack worked:
it must lose exactly that question's points, with the reason in its output and in
the generated feedback, while the grader, the gradebook, the course's files and the
other students' grades are untouched. The limits are the course's
grading/jupyter_config.py, found by the kernel on JUPYTER_CONFIG_PATH.

What a submission's kernel sees of the course: `/app` is its own fresh session
workspace over its graded folder, autograded/<student>/ps1/, read-only (nbgrader
copies the student's submitted files and the source's data files there, and writes
the notebook it executes, hidden tests restored, beside them). Nothing else of the
host exists for it.
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from support.grading import ASSIGNMENT, HOSTILE, POINTS, Course, Run, honest_students, hostile_submission, tree_hash

pytestmark = pytest.mark.slow

HONEST_HERE = ("s01", "s02", "s04")  # graded after every hostile one (nbgrader goes in name order: m-* < s*)
# The course's files and what nbgrader adds; anything else was put there by a submission.
COURSE_ENTRIES = {"README.md", "nbgrader_config.py", "grading", "source", "release", "submitted", "autograded",
                  "feedback", "gradebook.db"}
TAGS = re.compile(r"<[^>]+>")


@dataclass
class Graded:
    course: Course
    autograde: Run
    feedback: Run
    connections: list[str]
    before: dict[str, str]  # tree hashes of what no submission may change
    honest: dict[str, float]  # student -> the score nbgrader must give

    def feedback_text(self, student: str) -> str:
        page = self.course.root / "feedback" / student / ASSIGNMENT / f"{ASSIGNMENT}.html"
        return html.unescape(TAGS.sub("", page.read_text()))


def _protected(course: Course) -> dict[str, str]:
    """Hashes of what no submission may change: the instructor's files and every submission."""
    root = course.root
    return {name: tree_hash(root / name) for name in ("source", "release", "submitted", "grading")} | {
        "nbgrader_config.py": hashlib.sha256((root / "nbgrader_config.py").read_bytes()).hexdigest()}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Graded]:
    course = Course(tmp_path_factory.mktemp("autograding"))
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        course.generate()
        honest = {s.student: s.expected for s in honest_students(30) if s.student in HONEST_HERE}
        for sub in honest_students(30):
            if sub.student in HONEST_HERE:
                course.submit(sub)
        for name in HOSTILE:
            course.submit(hostile_submission(name, course.root, port))
        before = _protected(course)
        # The course's own configuration chooses the kernel (c.Execute.kernel_name).
        autograde = course.autograde()
        feedback = course.nbgrader("generate_feedback", ASSIGNMENT, "--force")
        connections = []
        while True:
            try:
                conn, peer = listener.accept()
            except BlockingIOError:
                break
            connections.append(str(peer))
            conn.close()
        yield Graded(course, autograde, feedback, connections, before, honest)
    finally:
        listener.close()


def test_the_grader_finishes_and_the_gradebook_has_every_student(graded: Graded) -> None:
    assert graded.autograde.returncode == 0, graded.autograde.log[-6000:]
    assert graded.feedback.returncode == 0, graded.feedback.log[-4000:]
    students = {f"m-{name}" for name in HOSTILE} | set(graded.honest)
    assert set(graded.course.scores()) == students
    db = sqlite3.connect(graded.course.root / "gradebook.db")
    try:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        db.close()


@pytest.mark.parametrize("name", HOSTILE)
def test_a_hostile_submission_fails_its_own_tests_with_a_clear_reason(graded: Graded, name: str) -> None:
    student, attack = f"m-{name}", HOSTILE[name]
    cells = graded.course.cell_scores(student)
    lost = {"squares_tests": 0.0, **{test: 0.0 for test in attack.also_lost}}
    assert cells == {**POINTS, **lost}, cells  # only the attacked question (and what the attack broke itself)
    said = graded.course.outputs(student)[attack.where]
    assert re.search(attack.reason, said), said[-3000:]
    # The student reads the same reason in the feedback nbgrader generates.
    assert re.search(attack.reason, graded.feedback_text(student)), name


def test_honest_students_graded_after_the_hostile_ones_get_their_grades(graded: Graded) -> None:
    scores = graded.course.scores()
    assert {s: scores[s] for s in graded.honest} == graded.honest
    # ... and they were graded after every hostile one, by the same grader process.
    done = {p.parent.parent.name: p.stat().st_mtime
            for p in (graded.course.root / "autograded").glob(f"*/{ASSIGNMENT}/{ASSIGNMENT}.ipynb")}
    assert min(done[s] for s in graded.honest) >= max(done[f"m-{name}"] for name in HOSTILE)


def test_no_submission_reads_another_the_source_or_the_gradebook(graded: Graded) -> None:
    said = graded.course.outputs("m-thief")["squares"]
    # The kernel's working directory is /app: the notebook's own folder and nothing else.
    assert "cwd /app holds ['data', 'ps1.ipynb']" in said, said
    assert "walk /app -> \"['/app/data/temperatures.csv', '/app/ps1.ipynb']\"" in said, said
    reads = [line for line in said.splitlines() if line.startswith("read ")]
    assert len(reads) == 11
    for line in reads:  # every path, relative or the host's absolute one, is refused
        assert re.search(r"-> \"(PermissionError: \[Errno 63\] Operation not permitted|"
                         r"FileNotFoundError: \[Errno 44\] No such file or directory)", line), line
    for listing in ("listdir ..", "listdir /", "listdir COURSE"):
        assert re.search(rf"^{listing} -> \"(PermissionError|FileNotFoundError)", said, re.M), said
    everything = json.dumps([c.get("outputs", []) for c in graded.course.graded("m-thief")["cells"]])
    assert "SQLite format 3" not in everything and "BEGIN SOLUTION" not in everything


def test_no_submission_changes_the_course_or_another_submission(graded: Graded) -> None:
    course = graded.course
    assert _protected(course) == graded.before
    assert {p.name for p in course.root.iterdir()} == COURSE_ENTRIES
    data = (course.root / "source" / ASSIGNMENT / "data" / "temperatures.csv").read_bytes()
    for folder in sorted((course.root / "autograded").iterdir()):
        graded_folder = folder / ASSIGNMENT
        files = sorted(str(p.relative_to(graded_folder)) for p in graded_folder.rglob("*") if p.is_file())
        submitted = sorted(p.name for p in (course.root / "submitted" / folder.name / ASSIGNMENT).iterdir()
                           if p.suffix != ".ipynb")
        # nbgrader's files only: the data it copied, the student's extra files, the graded notebook.
        # Whatever the cells wrote (extra.csv, report.json, fill.bin ...) went to their workspace.
        assert files == sorted(["data/temperatures.csv", "ps1.ipynb", *submitted]), (folder.name, files)
        assert (graded_folder / "data" / "temperatures.csv").read_bytes() == data, folder.name
        nb = json.loads((graded_folder / "ps1.ipynb").read_text())
        assert len(nb["cells"]) == 16 and nb["metadata"]["kernelspec"]["name"] == "wasm-python", folder.name
    said = course.outputs("m-tamper")["squares"]
    # The writes landed in the workspace: the guest reads its own copy back ...
    assert "read back data/temperatures.csv -> 'day,city,celsius\\n'" in said, said
    # ... and nothing outside /app is even there to write.
    for target in ("../../../gradebook.db", "COURSE/gradebook.db", "COURSE/source/ps1/ps1.ipynb",
                   "COURSE/autograded/s01/ps1/data/temperatures.csv"):
        assert re.search(rf"^write {re.escape(target)} -> \"(PermissionError|FileNotFoundError)", said, re.M), said


def test_no_connection_reaches_the_graders_machine(graded: Graded) -> None:
    assert graded.connections == []
    said = graded.course.outputs("m-escape")["squares"]
    for attempt in ("fork", "thread", "subprocess", "connect", "child", "ctypes"):
        assert re.search(rf"^{re.escape(attempt)} -> [\"'](AttributeError|RuntimeError|PermissionError|OSError): ",
                         said, re.M), (attempt, said)
    # A command line runs in the confined shell, which has no nc: a shell's "not found" (127).
    assert re.search(r"^os\.system -> '32512'", said, re.M), said


def test_an_output_flood_is_cut_before_it_reaches_the_grader(graded: Graded) -> None:
    notebook = graded.course.root / "autograded" / "m-output-flood" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    # 100 MB printed; the kernel sent 1 MiB (nbgrader's own LimitOutput keeps 1000 lines, which all 100 are)
    assert notebook.stat().st_size < 2 << 20
    streams = [o for c in graded.course.graded("m-output-flood")["cells"] for o in c.get("outputs", [])
               if o["output_type"] == "stream"]
    assert sum(len("".join(o["text"])) for o in streams) < (1 << 20) + 4096


def test_a_submission_cannot_choose_its_kernel_or_its_limits(graded: Graded) -> None:
    swapped = json.loads((graded.course.root / "submitted" / "m-kernelspec-swap" / ASSIGNMENT /
                          f"{ASSIGNMENT}.ipynb").read_text())
    assert swapped["metadata"]["kernelspec"]["name"] == "python3"  # asked for; graded on wasm-python (above)
    smuggled = graded.course.root / "autograded" / "m-config-smuggling" / ASSIGNMENT
    # The config files sat in the kernel's working directory; the kernel read only Jupyter's config path.
    assert (smuggled / "wasm_kernel_config.py").is_file() and (smuggled / "jupyter_config.py").is_file()
    assert "DeadlineExceeded" in graded.course.outputs("m-config-smuggling")["squares_tests"]
