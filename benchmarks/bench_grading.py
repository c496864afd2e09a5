"""Autograding with nbgrader: the wasm-python kernel against ipykernel (issue 22, section 4).

    .venv/bin/python benchmarks/bench_grading.py [--quick] [--students 30] [--rounds 2] [--json out.json]

The course is examples/teaching/ and the submissions are tests/support/grading.py's
honest students (s01..s30: right, wrong, partial, printing, plotting ...). Each
kernel grades its own copy of the course, with the same submissions:

- **One grader**: `nbgrader autograde ps1` over all the submissions, wasm-python
  (the course's configuration and grading/jupyter_config.py's limits) and ipykernel
  (`--Execute.kernel_name=python3`), alternated round by round (wasm, native, native,
  wasm, ...) so that a busy machine weighs on both. Reported: the whole command's wall
  time (what an instructor waits for, nbgrader's own work included) and, from
  nbgrader's log, each submission's execution (kernel start, the cells, shutdown);
  medians over the rounds, and the CPU time (user + system) the command and its
  kernels used per submission. Goal: wasm-python within 1.5x of ipykernel on the command.
- **N graders**: the submissions split over N copies of the course (one gradebook
  each: nbgrader's sqlite gradebook is not meant for concurrent autograde runs), N
  `nbgrader autograde` processes at once; submissions graded per minute for N = 1, 2
  on both kernels.

Every run's grades are checked against what the answers deserve (every student, both
kernels): a benchmark whose grades differ exits 1. `--quick` grades 6 students once
(about 3 minutes). Sessions go to a temporary Jupyter data folder, removed at the end.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))

from _common import Row, log, report_grades  # noqa: E402
from support.grading import Course, Run, Submission, grade_on, honest_students  # noqa: E402

KERNELS = ("wasm-python", "python3")
RATIO_GOAL = 1.5
LOG_FORMAT = "--NbGrader.log_format=%(created).3f [%(name)s | %(levelname)s] %(message)s"
STAMP = re.compile(r"^(\d+\.\d+) \[AutogradeApp \| INFO\] (Autograding|Setting destination file permissions)", re.M)


def per_submission(run: Run) -> list[float]:
    """Seconds from 'Autograding <notebook>' to the graded notebook's permissions being
    set, for each submission: its kernel's start, its cells and the kernel's shutdown."""
    times, start = [], None
    for match in STAMP.finditer(run.log):
        if match.group(2) == "Autograding":
            start = float(match.group(1))
        elif start is not None:
            times.append(float(match.group(1)) - start)
            start = None
    return times


def make_course(base: Path, name: str, students: list[Submission]) -> Course:
    course = Course(base, name)
    course.generate()
    for sub in students:
        course.submit(sub)
    return course


def check_grades(course: Course, students: list[Submission], what: str) -> list[str]:
    scores = course.scores()
    return [f"{what}: {s.student} got {scores.get(s.student)}, deserves {s.expected} ({', '.join(s.variants)})"
            for s in students if scores.get(s.student) != s.expected]


def one_grader(base: Path, students: list[Submission], rounds: int) -> tuple[list[Row], dict, list[str]]:
    courses = {k: make_course(base, f"one-{k}", students) for k in KERNELS}
    walls: dict[str, list[float]] = {k: [] for k in KERNELS}
    cpus: dict[str, list[float]] = {k: [] for k in KERNELS}
    each: dict[str, list[float]] = {k: [] for k in KERNELS}
    wrong: list[str] = []
    for r in range(rounds):
        order = KERNELS if r % 2 == 0 else KERNELS[::-1]
        for kernel in order:
            log(f"grading: round {r + 1}/{rounds}, {len(students)} submissions on {kernel}")
            run = grade_on(courses[kernel], kernel, LOG_FORMAT)
            if run.returncode != 0:
                raise RuntimeError(f"nbgrader autograde on {kernel} failed:\n{run.log[-4000:]}")
            walls[kernel].append(run.seconds)
            cpus[kernel].append(run.cpu_seconds)
            each[kernel] += per_submission(run)
            wrong += check_grades(courses[kernel], students, f"{kernel}, round {r + 1}")
    n = len(students)
    wall = {k: statistics.median(v) for k, v in walls.items()}
    sub = {k: statistics.median(v) for k, v in each.items()}
    cpu = {k: statistics.median(v) / n for k, v in cpus.items()}
    rows = [
        Row("grading", f"nbgrader autograde, {n} submissions, one grader", "s", wall["wasm-python"], wall["python3"],
            target_max=RATIO_GOAL, target_on="ratio", note=f"median of {rounds}, alternated",
            extra={"runs": walls}),
        Row("grading", "one submission: kernel start, cells, shutdown", "s", sub["wasm-python"], sub["python3"],
            note=f"median of {len(each['wasm-python'])}, from nbgrader's log",
            extra={"p90": {k: sorted(v)[int(0.9 * (len(v) - 1))] for k, v in each.items()}}),
        Row("grading", "CPU per submission, grader and kernel", "s", cpu["wasm-python"], cpu["python3"],
            note="user + system of the whole command / submissions; what N graders share"),
    ]
    return rows, {"walls": walls, "cpus": cpus, "each": each}, wrong


def n_graders(base: Path, students: list[Submission], n: int, kernel: str) -> tuple[float, list[str]]:
    shards = [students[i::n] for i in range(n)]
    courses = [make_course(base, f"n{n}-{kernel}-{i}", shard) for i, shard in enumerate(shards)]
    log(f"grading: {n} graders at once on {kernel}, {len(students)} submissions")
    start = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(lambda c: grade_on(c, kernel), courses))
    wall = time.perf_counter() - start
    wrong = []
    for course, shard, run in zip(courses, shards, runs):
        if run.returncode != 0:
            raise RuntimeError(f"nbgrader autograde on {kernel} failed:\n{run.log[-4000:]}")
        wrong += check_grades(course, shard, f"{kernel}, {n} graders")
    return wall, wrong


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 students, one round (about 3 minutes)")
    parser.add_argument("--students", type=int, help="honest submissions (default 30; --quick: 6)")
    parser.add_argument("--rounds", type=int, help="one-grader rounds per kernel (default 2; --quick: 1)")
    parser.add_argument("--json", type=Path, help="write the rows and raw times here")
    args = parser.parse_args()
    students = honest_students(args.students or (6 if args.quick else 30))
    rounds = args.rounds or (1 if args.quick else 2)
    base = Path(tempfile.mkdtemp(prefix="wk-bench-grading-"))
    wrong: list[str] = []
    try:
        rows, raw, bad = one_grader(base, students, rounds)
        wrong += bad
        per_minute: dict[str, dict[int, float]] = {k: {} for k in KERNELS}
        for kernel in KERNELS:
            per_minute[kernel][1] = 60 * len(students) / statistics.median(raw["walls"][kernel])
            wall, bad = n_graders(base, students, 2, kernel)
            wrong += bad
            per_minute[kernel][2] = 60 * len(students) / wall
        for n in (1, 2):
            rows.append(Row("grading", f"throughput, {n} grader{'s' if n > 1 else ''} at once", "/min",
                            per_minute["wasm-python"][n], per_minute["python3"][n],
                            note="submissions graded per minute (higher is better)"))
        rows.append(Row("grading", "speedup of 2 graders over 1", "x",
                        per_minute["wasm-python"][2] / per_minute["wasm-python"][1],
                        per_minute["python3"][2] / per_minute["python3"][1], note="2 cores"))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return report_grades(rows, wrong, f"Every grade as deserved: {len(students)} students, both kernels, every run.",
                         args.json, raw=raw, per_minute=per_minute)

if __name__ == "__main__":
    sys.exit(main())
