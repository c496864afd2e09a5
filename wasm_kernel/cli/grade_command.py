"""`wasm-kernel grade AUTOGRADER.zip SUBMISSION...`: otter-grader assignments graded
in the sandbox, without Docker (the work is in grading/).

It stays close to `otter grade`: the same autograder zip, submissions as notebooks or
otter's submission zips (a folder or globs), `-o`, `-n`, `--timeout` and a number of
kernels in parallel (`-j`), and otter's outputs: final_grades.csv in otter's columns
and, per submission, a results JSON of otter's results.json fields and the executed
notebook. Each submission runs in a fresh sandbox session; the course environment is
the zip's requirements, built once before the first submission.

Exit status: 0 every submission was graded (whatever its score); 1 some could not be
(each said in one line, a zero in final_grades.csv with the reason), or the
environment could not be built; 2 the command line or the autograder zip was wrong.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLES = """\
examples:
  wasm-kernel grade autograder.zip submissions/                  every notebook and zip in the folder
  wasm-kernel grade hw01-autograder.zip 'subs/*.ipynb' -o grades -j 2   two kernels at once
  wasm-kernel grade autograder.zip s01.zip --timeout 300 --deadline 30s   limits per submission and per cell

Writes OUTPUT/final_grades.csv (otter's columns), OUTPUT/results/NAME.json (otter's
results.json fields) and OUTPUT/notebooks/NAME.ipynb (the executed submission).
Submissions never see the hidden tests: each test reaches the sandbox only after the
submission's last cell has run (docs/teaching.md, "Grading otter assignments").

exit status: 0 every submission graded; 1 some could not be (each said); 2 a wrong
command line or autograder zip.
"""

# Each submission's limits unless the kernel's configuration sets them (c.WasmKernel.*)
# or a flag does; the same values become the ceilings, so no %limits raises them.
GRADING_LIMITS = {"deadline": 60.0, "memory": 512 << 20, "disk": 64 << 20, "files": 5_000,
                  "stdout": 1 << 20, "stderr": 1 << 20, "display": 4 << 20}
_CEILINGS = {"fuel": "max_fuel", "cpu": "max_cpu_time", "memory": "max_memory", "deadline": "max_deadline",
             "disk": "max_disk_bytes", "files": "max_disk_files"}
_OUTPUT_LIMITS = ("stdout", "stderr", "display")
# The modules each grading kernel's warm image holds already (otter's import is 0.6 s a kernel).
GRADING_PRELOAD = ("otter", "otter.execute", "otter.test_files", "_wasm_kernel_otter_grading")
# otter-grader pins wrapt<2; the guest's wrapt 2 is built in, and otter runs on it.
_OTTER_OVERRIDES = ("wrapt>=1.16",)


def add_parser(sub: Any) -> None:
    grade = sub.add_parser(
        "grade", help="grade otter-grader submissions in the sandbox, without Docker",
        description="Grade otter-grader submissions with an otter autograder zip, each in a fresh sandbox "
        "session: the submission's cells, then otter's tests, whose results come back as checked data. "
        "Writes final_grades.csv, a results JSON and the executed notebook per submission.",
        epilog=EXAMPLES,
    )
    grade.add_argument("autograder", type=Path, help="otter's autograder zip (otter assign's autograder/*.zip)")
    grade.add_argument("submissions", nargs="+", metavar="SUBMISSION",
                       help="notebooks (.ipynb), otter submission zips (.zip), folders of them, or globs")
    grade.add_argument("-o", "--output-dir", type=Path, default=Path("."), metavar="DIR",
                       help="where final_grades.csv, results/ and notebooks/ go (default: here)")
    grade.add_argument("-n", "--name", metavar="NAME",
                       help="the assignment's name: a notebook that names another gets a zero "
                       "(default: otter_config.json's assignment_name)")
    grade.add_argument("--timeout", type=float, metavar="SECONDS",
                       help="the most one submission may take, tests included (default: none)")
    grade.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                       help="submissions graded at once, each in its own kernel (default: the CPU count, up to 4)")
    limits = grade.add_argument_group("limits per cell (as `wasm-kernel run` takes them; defaults: 60s, 512MiB, "
                                      "a 64MiB disk, 1MiB of output per stream)")
    limits.add_argument("--deadline", metavar="TIME")
    limits.add_argument("--memory", metavar="SIZE")
    limits.add_argument("--limit", action="append", default=[], metavar="NAME=VALUE",
                        help="any limit %%limits knows: stdout, stderr, display, disk, files, fuel, cpu (repeatable)")
    grade.set_defaults(func=run)


def _error(message: str, status: int = 2) -> int:
    from .terminal_text import terminal_text

    print(f"wasm-kernel grade: error: {terminal_text(message)}", file=sys.stderr)
    return status


def grading_limits(flags: dict[str, Any]) -> tuple[list[str], float | None]:
    """The kernel's limit arguments (the flags, else the configuration, else
    GRADING_LIMITS; ceilings alike), and the deadline per cell they set."""
    from ..kernel.kernel_limits import LIMIT_TRAITS, LIMITS
    from .kernel_config import kernel_config

    configured = kernel_config().get("WasmKernel", {})
    chosen: dict[str, Any] = {}
    for trait, name in LIMIT_TRAITS.items():
        if name in flags:
            chosen[name] = flags[name]
        elif trait in configured:
            chosen[name] = configured[trait]
        elif name in GRADING_LIMITS:
            chosen[name] = GRADING_LIMITS[name]
    args = [f"--WasmKernel.{LIMITS[name].trait}={value!r}" for name, value in chosen.items()]
    for name, trait in _CEILINGS.items():
        if name in chosen and chosen[name] is not None:
            args.append(f"--WasmKernel.{trait}={chosen[name]!r}")
    outputs = [chosen[n] for n in _OUTPUT_LIMITS if chosen.get(n) is not None]
    if outputs:
        args.append(f"--WasmKernel.max_output_bytes={max(outputs)!r}")
    deadline = chosen.get("deadline")
    return args, float(deadline) if deadline is not None else None


def _list_arguments(trait: str, values: list[str] | tuple[str, ...]) -> list[str]:
    return [f"--WasmKernel.{trait}={value}" for value in values]


def environment(requirements: list[str]) -> list[str] | str:
    """The course environment for the zip's requirements, built now (pip's lines on
    stderr), with a warm image holding otter: the kernels' arguments for it, or a
    one-line error."""
    from .kernel_config import kernel_settings
    from .precompile_command import prepare_course_environment
    from .progress import prepare_guest, warmup_turn

    settings = kernel_settings()
    wanted = list(settings.guest_requirements)
    for line in requirements:
        if line not in wanted:
            wanted.append(line)
    if not any(line.lower().replace("_", "-").startswith("otter-grader") for line in wanted):
        from otter import __version__ as otter_version

        wanted.append(f"otter-grader=={otter_version}")  # the host's otter grades: the guest's checks match it
    overrides = list(settings.guest_overrides)
    if not any(o.lower().startswith("wrapt") for o in overrides):
        overrides += _OTTER_OVERRIDES
    settings.guest_requirements, settings.guest_overrides = wanted, overrides
    preload = tuple(dict.fromkeys([*settings.preload_modules, *GRADING_PRELOAD]))
    problem = prepare_course_environment(settings)
    if problem is not None:
        return problem
    with warmup_turn():
        prepare_guest(preload, precompile=True)
    return [*_list_arguments("guest_requirements", wanted), *_list_arguments("guest_overrides", overrides),
            *_list_arguments("preload_modules", preload)]


def run(args: argparse.Namespace) -> int:
    from concurrent.futures import ThreadPoolExecutor, as_completed

    from tqdm import tqdm

    from ..kernel.kernel_limits import LimitError
    from .grading.autograder import Autograder, AutograderError
    from .grading.grade_runner import GradeSettings, grade_submission, one_line
    from .grading.submissions import find_submissions
    from .notebook_runner import ensure_kernelspec
    from .run_options import limit_flags

    try:
        grader = Autograder.open(args.autograder)
    except AutograderError as err:
        return _error(str(err))
    if args.name:
        grader.config["assignment_name"] = args.name
    try:
        flags = limit_flags(args.deadline, args.memory, None, args.limit)
    except LimitError as err:
        return _error(str(err))
    if args.jobs is not None and args.jobs < 1:
        return _error("-j takes a number of kernels, 1 or more")
    if args.timeout is not None and args.timeout <= 0:
        return _error("--timeout takes seconds, more than 0")
    subs, problems = find_submissions(args.submissions)
    for line in problems:
        print(f"wasm-kernel grade: {one_line(line)}", file=sys.stderr)
    if not subs:
        return _error("no submissions to grade")
    try:
        args.output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return _error(f"{args.output_dir}: cannot be made ({err.strerror})")
    problem = ensure_kernelspec()
    if problem is not None:
        return _error(problem, 1)
    kernel_args = environment(grader.requirements)
    if isinstance(kernel_args, str):
        return _error(kernel_args, 1)
    limits, deadline = grading_limits(flags)
    settings = GradeSettings(
        # No network while grading (whatever the students' kernels may reach), no %pip,
        # no kept state, no file-change displays in the executed notebooks.
        kernel_arguments=[*kernel_args, *limits, "--WasmKernel.network_allow=[]", "--WasmKernel.keep_state=False",
                          "--WasmKernel.pip_enabled=False", "--WasmKernel.show_file_changes=False"],
        timeout=args.timeout, cell_timeout=(deadline * 2 + 60) if deadline else None, output_dir=args.output_dir,
    )
    jobs = args.jobs or max(1, min(4, os.cpu_count() or 1))
    started = time.monotonic()
    graded = {}
    pool = ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="grade")
    try:
        with tqdm(total=len(subs), desc="Grading", unit="submission", file=sys.stderr, dynamic_ncols=True) as bar:
            futures = {pool.submit(grade_submission, sub, grader, settings): sub for sub in subs}
            for future in as_completed(futures):
                sub = futures[future]
                try:
                    result = future.result()
                except Exception as exc:  # a bug of ours: that submission is ungraded, the rest go on
                    from .grading.results import Graded

                    result = Graded(sub.file, failure=f"the grader failed: {type(exc).__name__}: {exc}")
                graded[sub] = result
                if result.failure is not None:
                    bar.write(f"wasm-kernel grade: {one_line(sub.file)}: not graded: {one_line(result.failure)}",
                              file=sys.stderr)
                for note in result.notes:
                    bar.write(f"wasm-kernel grade: {one_line(sub.file)}: {one_line(note)}", file=sys.stderr)
                bar.update(1)
    except KeyboardInterrupt:
        # Ctrl-C: no submission starts, the running ones' kernels are killed, nothing is written.
        pool.shutdown(wait=False, cancel_futures=True)
        settings.stops.stop_all()
        pool.shutdown(wait=True)
        print(f"wasm-kernel grade: interrupted after {len(graded)} of {len(subs)} submissions; "
              "final_grades.csv was not written", file=sys.stderr)
        return 130
    pool.shutdown(wait=True)
    failed = write_outputs(grader, [graded[s] for s in subs], [s.label for s in subs], args.output_dir)
    took = time.monotonic() - started
    print(f"graded {len(subs) - failed} of {len(subs)} submissions in {took:.1f} s "
          f"({jobs} at a time); final_grades.csv, results/ and notebooks/ in {args.output_dir}")
    return 1 if failed else 0


def write_outputs(grader: Any, graded: list[Any], labels: list[str], out: Path) -> int:
    """final_grades.csv and results/LABEL.json, as otter writes them; how many failed."""
    import json

    from otter.grade.utils import merge_scores_to_df

    ag = grader.ag_config()
    (out / "results").mkdir(exist_ok=True)
    results = []
    for one, label in zip(graded, labels):
        scores = one.grading_results(grader.tests)
        results.append(scores)
        with open(out / "results" / f"{label}.json", "w", encoding="utf-8") as f:
            json.dump(scores.to_gradescope_dict(ag), f, indent=4)
    merge_scores_to_df(results).to_csv(out / "final_grades.csv", index=False)
    return sum(1 for one in graded if one.failure is not None)
