"""Grading an otter-grader assignment: `wasm-kernel grade` against `otter run` on
ipykernel (issue 43).

    .venv/bin/python benchmarks/bench_otter.py [--quick] [--students 30] [--rounds 1] [--json out.json]

The assignment is tests/support/otter_assignment.py's (the real `otter assign` output
of its master notebook) and the submissions its honest students (notebooks and export
zips: right, wrong, partly right, unanswered, raising). In one run, alternated round
by round so that a busy machine weighs on both:

- **Serially**: `wasm-kernel grade -j 1` over all the submissions (one command: the
  course environment's check, each submission's kernel, cells and tests, otter's
  outputs), against `otter run` on ipykernel once per submission, one after another
  (otter's only way to grade locally: a process per submission). Goal: at most 1.0x.
- **Two at once**: `wasm-kernel grade -j 2` against two `otter run` processes at a time.

Every run's grades are checked, question by question, against what the answers
deserve: a benchmark whose grades differ exits 1. Beside the figures, otter's own
published one for its Docker grading, which this machine cannot run: about 12 minutes
for 2 submissions (otter-grader#413). The course environment is built once, before
the timed runs, in a cache of the benchmark's own (removed at the end, with every
other file). `--quick` grades 6 students once.
"""

from __future__ import annotations

import argparse
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
from support.course_wheels import DOWNLOAD, ready  # noqa: E402
from support.otter_assignment import build, grading_env, honest_students, otter_run, results_scores, wasm_grade  # noqa: E402
from support.private_cache import make_private_cache  # noqa: E402

RATIO_GOAL = 1.0
DOCKER_PUBLISHED_S = 12 * 60 / 2  # otter-grader#413: "about 12 minutes" for 2 submissions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="6 students, one round")
    parser.add_argument("--students", type=int, help="honest submissions (default 30; --quick: 6)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per way of grading (default 1)")
    parser.add_argument("--json", type=Path, help="write the rows and raw times here")
    args = parser.parse_args()
    if not ready():
        print(f"the course wheels are not downloaded: {DOWNLOAD}", file=sys.stderr)
        return 2
    students = honest_students(args.students or (6 if args.quick else 30))
    base = Path(tempfile.mkdtemp(prefix="wk-bench-otter-"))
    wrong: list[str] = []
    times: dict[str, list[float]] = {"wasm-1": [], "wasm-2": [], "otter-1": [], "otter-2": []}
    try:
        assignment = build(base / "assignment")
        subs = {s.name: s.submit(assignment, base / "submissions") for s in students}
        env = grading_env(base, make_private_cache(base / "cache"))
        log("otter: building the grading environment (once, not timed)")
        warm = wasm_grade(assignment, [subs[students[0].name]], base / "warm", env, "-j", "1")
        if warm.returncode != 0:
            raise RuntimeError(warm.stderr[-4000:])

        def ours(jobs: int, r: int) -> None:
            out = base / f"wasm-{jobs}-{r}"
            log(f"otter: round {r + 1}, wasm-kernel grade -j {jobs}, {len(subs)} submissions")
            start = time.perf_counter()
            proc = wasm_grade(assignment, list(subs.values()), out, env, "-j", str(jobs))
            times[f"wasm-{jobs}"].append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-4000:])
            for s in students:
                got = results_scores(out / "results" / f"{s.name}.json")
                if got != s.expected:
                    wrong.append(f"wasm-kernel grade -j {jobs}: {s.name} got {got}, deserves {s.expected}")

        def theirs(jobs: int, r: int) -> None:
            log(f"otter: round {r + 1}, otter run on ipykernel, {jobs} at a time, {len(subs)} submissions")
            start = time.perf_counter()
            with ThreadPoolExecutor(jobs) as pool:
                got = dict(zip(subs, pool.map(lambda name: otter_run(assignment, subs[name],
                                                                     base / f"otter-{jobs}-{r}" / name), subs)))
            times[f"otter-{jobs}"].append(time.perf_counter() - start)
            for s in students:
                if got[s.name] != s.expected:
                    wrong.append(f"otter run ({jobs} at a time): {s.name} got {got[s.name]}, deserves {s.expected}")

        for r in range(args.rounds):
            for jobs in (1, 2):
                first, second = (ours, theirs) if (r + jobs) % 2 else (theirs, ours)
                first(jobs, r)
                second(jobs, r)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    n = len(students)
    med = {k: statistics.median(v) for k, v in times.items()}
    rows = [
        Row("otter", f"grading {n} submissions, serially", "s", med["wasm-1"], med["otter-1"], target_max=RATIO_GOAL,
            target_on="ratio", note="wasm-kernel grade -j 1 / otter run per submission", extra={"runs": times}),
        Row("otter", f"grading {n} submissions, 2 at once", "s", med["wasm-2"], med["otter-2"], target_max=RATIO_GOAL,
            target_on="ratio", note="wasm-kernel grade -j 2 / 2 otter run processes"),
        Row("otter", "per submission, serially", "s", med["wasm-1"] / n, med["otter-1"] / n,
            note=f"otter grade's published Docker figure: {DOCKER_PUBLISHED_S:.0f} s (otter-grader#413)"),
    ]
    return report_grades(rows, wrong, f"Every grade as deserved: {n} students, question by question, both graders, "
                         "every run.", args.json, times=times)

if __name__ == "__main__":
    sys.exit(main())
