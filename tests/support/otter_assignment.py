"""An otter-grader assignment made for the tests (issue 43): a small master notebook
in otter assign's format, run through the real `otter assign`, and submissions of the
student notebook it releases.

The master notebook (`hw01`) has five questions with public and hidden cases and
point values that give partial credit, a data file otter ships as a support file,
and an otter config with a seed. `build(folder)` executes the master on ipykernel
(otter assign takes each test's expected output from its cell's output), then runs
`otter assign`, and returns the autograder zip and the student notebook.

Submissions are the student notebook with each answer cell filled in:
- HONEST: per question, the ways students answer (right, wrong, partly right, not
  answered, raising); `honest_students(n)` deals n students deterministically.
  One way of q5 rebinds its answer after its check: otter grades a question where
  the notebook checked it.
- HOSTILE (`hostile_submission(kind)`): one per kind of attack, each in q1's answer
  cell, the other answers right. `HOSTILE` maps each kind to the points q1 should get.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "otter"  # the master notebook, its data and a few submissions, committed
NAME = "hw01"
DATA = "city,temp\nOslo,4.5\nLima,19.0\nCairo,22.1\nPerth,18.4\nQuito,13.9\n"
POINTS = {"q1": 3.0, "q2": 2.0, "q3": 4.0, "q4": 1.0, "q5": 2.0}
TOTAL = sum(POINTS.values())

# (question, solution source, [(test source, hidden)]): the master's tests, each case's
# expected output from running it on the solution.
QUESTIONS: list[tuple[str, str, list[tuple[str, bool]]]] = [
    ("q1", "def square(x):\n    return x * x",
     [("square(3)", False), ("square(-4)", True), ("square(0)", True)]),
    ("q2", 'temps = pd.read_csv("data.csv")\nwarmest = temps.sort_values("temp").iloc[-1]["city"]',
     [("warmest", False), ("isinstance(warmest, str)", True)]),
    ("q3", "def fizzbuzz(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n"
           "        return 'Fizz'\n    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)",
     [("fizzbuzz(3)", False), ("fizzbuzz(10)", False), ("fizzbuzz(30)", True), ("fizzbuzz(7)", True)]),
    ("q4", "evens = [n for n in range(20) if n % 2 == 0]",
     [("len(evens)", False), ("evens[-1]", True)]),
    ("q5", "mean_temp = round(float(temps['temp'].mean()), 2)",
     [("mean_temp", False), ("type(mean_temp).__name__", True)]),
]


def master_notebook() -> nbformat.NotebookNode:
    cells = [nbformat.v4.new_raw_cell(
        "# ASSIGNMENT CONFIG\nname: hw01\nexport_cell: false\nseed:\n  variable: rng_seed\n  autograder_value: 42\n"
        "  student_value: 7\nfiles:\n  - data.csv\ngenerate:\n  show_hidden: false\n"),
        nbformat.v4.new_markdown_cell("# Homework 1"),
        nbformat.v4.new_code_cell("import numpy as np\nimport pandas as pd\nrng_seed = 7")]
    for name, solution, tests in QUESTIONS:
        cells.append(nbformat.v4.new_raw_cell(f"# BEGIN QUESTION\nname: {name}\npoints: {POINTS[name]:g}"))
        cells.append(nbformat.v4.new_markdown_cell(f"**{name}.** Answer below."))
        cells.append(nbformat.v4.new_raw_cell("# BEGIN SOLUTION"))
        cells.append(nbformat.v4.new_code_cell(f"# answer {name}\n" + solution))
        cells.append(nbformat.v4.new_raw_cell("# END SOLUTION"))
        cells.append(nbformat.v4.new_raw_cell("# BEGIN TESTS"))
        for source, hidden in tests:
            cells.append(nbformat.v4.new_code_cell(("# HIDDEN\n" if hidden else "") + source))
        cells.append(nbformat.v4.new_raw_cell("# END TESTS"))
        cells.append(nbformat.v4.new_raw_cell("# END QUESTION"))
    cells.append(nbformat.v4.new_markdown_cell("Done."))
    return nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


@dataclass
class Assignment:
    folder: Path
    autograder: Path
    student: Path  # the released notebook
    data: Path

    def submit(self, answers: dict[str, str], dest: Path, *, extra_cells: list[str] = (),
               as_zip: bool = False, extra_files: dict[str, bytes] | None = None) -> Path:
        """The student notebook with its answer cells set (question -> source), saved at dest."""
        nb = nbformat.read(self.student, as_version=4)
        for cell in nb.cells:
            first = cell.source.split("\n", 1)[0] if cell.cell_type == "code" else ""
            if first.startswith("# answer "):
                question = first.removeprefix("# answer ").strip()
                if question in answers:
                    cell.source = f"{first}\n{answers[question]}"
        for source in extra_cells:
            nb.cells.append(nbformat.v4.new_code_cell(source))
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not as_zip:
            nbformat.write(nb, dest)
            return dest
        with zipfile.ZipFile(dest, "w") as zf:
            zf.writestr(f"{NAME}.ipynb", nbformat.writes(nb))
            for name, data in (extra_files or {}).items():
                zf.writestr(name, data)
        return dest


def executed_master(folder: Path) -> Path:
    """The master notebook, executed on ipykernel (otter assign reads each test's expected
    output from its cell), with its data file, in folder."""
    from nbclient import NotebookClient

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.csv").write_text(DATA)
    nb = master_notebook()
    NotebookClient(nb, kernel_name="python3", timeout=120, resources={"metadata": {"path": str(folder)}}).execute()
    for i, cell in enumerate(nb.cells):  # what a master notebook in a course's repository holds
        cell.id = f"{NAME}-{i:02d}"
        if cell.cell_type == "code":
            cell.execution_count = None
            for out in cell.outputs:
                out.pop("execution_count", None)
                if out.get("output_type") == "execute_result":
                    out["execution_count"] = None
    nbformat.write(nb, folder / f"{NAME}.ipynb")
    return folder / f"{NAME}.ipynb"


def build(folder: Path) -> Assignment:
    """examples/otter/'s master notebook and data file, then `otter assign` on them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in (f"{NAME}.ipynb", "data.csv"):
        shutil.copy(EXAMPLE / name, folder / name)
    dist = folder / "dist"
    otter = Path(sys.executable).with_name("otter")
    proc = subprocess.run([str(otter), "assign", f"{NAME}.ipynb", "dist"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (zip_path,) = (dist / "autograder").glob("*.zip")
    autograder = folder / "autograder.zip"
    shutil.copy(zip_path, autograder)
    return Assignment(folder, autograder, dist / "student" / f"{NAME}.ipynb", dist / "student" / "data.csv")


# -- Honest answers: question -> way -> (source, points) -------------------------------

HONEST: dict[str, dict[str, tuple[str, float]]] = {
    "q1": {
        "right": ("def square(x):\n    return x * x", 3.0),
        "pow": ("def square(x):\n    return x ** 2", 3.0),
        "abs": ("def square(x):\n    return x * abs(x)", 2.0),  # wrong for negatives (a hidden case)
        "double": ("def square(x):\n    return 2 * x", 1.0),  # square(0) == 0 passes, the rest fail
        "missing": ("def square(x):\n    ...", 0.0),
    },
    "q2": {
        "right": ('temps = pd.read_csv("data.csv")\nwarmest = temps.sort_values("temp").iloc[-1]["city"]', 2.0),
        "idxmax": ('temps = pd.read_csv("data.csv")\nwarmest = temps.loc[temps["temp"].idxmax(), "city"]', 2.0),
        "coldest": ('temps = pd.read_csv("data.csv")\nwarmest = temps.sort_values("temp").iloc[0]["city"]', 1.0),
        "raises": ('temps = pd.read_csv("data.csv")\nwarmest = temps["temperature"].max()', 0.0),
    },
    "q3": {
        "right": (QUESTIONS[2][1], 4.0),
        "no-fizzbuzz": ("def fizzbuzz(n):\n    if n % 3 == 0:\n        return 'Fizz'\n    if n % 5 == 0:\n"
                        "        return 'Buzz'\n    return str(n)", 3.0),
        "int": ("def fizzbuzz(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n"
                "        return 'Fizz'\n    if n % 5 == 0:\n        return 'Buzz'\n    return n", 3.0),
        "missing": ("def fizzbuzz(n):\n    ...", 0.0),
    },
    "q4": {
        "right": ("evens = [n for n in range(20) if n % 2 == 0]", 1.0),
        "range": ("evens = list(range(0, 20, 2))", 1.0),
        "odds": ("evens = [n for n in range(20) if n % 2]", 0.5),
        "missing": ("evens = ...", 0.0),
    },
    "q5": {
        "right": ("mean_temp = round(float(temps['temp'].mean()), 2)", 2.0),
        "numpy": ("mean_temp = round(float(np.mean(temps['temp'])), 2)", 2.0),
        "unrounded": ("mean_temp = float(temps['temp'].mean())", 1.0),
        "np-float": ("mean_temp = np.round(temps['temp'].mean(), 2)", 0.0),
    },
}
# A way that rebinds its answer in a later cell, after the question's check: graded
# where it was checked, as otter does.
REBINDS_AFTER_CHECK = "mean_temp = None  # scratch work after the check"


@dataclass
class Student:
    """An honest student. Odd ones hand in otter's export zip (the notebook inside is
    hw01.ipynb, so the notebook's `otter.Notebook("hw01.ipynb")` works and otter grades
    each question where it was checked); even ones a notebook named after them, on
    which that line fails, on ipykernel as here, and otter grades the final state."""

    name: str
    ways: dict[str, str]
    rebinds: bool = False
    as_zip: bool = False
    answers: dict[str, str] = field(default_factory=dict)
    expected: dict[str, float] = field(default_factory=dict)

    def submit(self, assignment: Assignment, folder: Path) -> Path:
        extra = [REBINDS_AFTER_CHECK] if self.rebinds else []
        if self.as_zip:
            return assignment.submit(self.answers, folder / f"{self.name}.zip", extra_cells=extra, as_zip=True)
        return assignment.submit(self.answers, folder / f"{self.name}.ipynb", extra_cells=extra)


def honest_students(n: int, seed: int = 43) -> list[Student]:
    rng = random.Random(seed)
    students = []
    for i in range(n):
        ways = {q: (list(HONEST[q])[i % len(HONEST[q])] if i < 5 else rng.choice(list(HONEST[q]))) for q in HONEST}
        student = Student(f"s{i + 1:02d}", ways, rebinds=(i % 7 == 5), as_zip=(i % 2 == 1))
        if student.rebinds:  # right where it was checked, wrong after
            ways["q5"] = "right"
        for q, way in ways.items():
            student.answers[q], student.expected[q] = HONEST[q][way]
        if student.rebinds and not student.as_zip:
            student.expected["q5"] = 0.0  # graded on the final state, where mean_temp is None
        students.append(student)
    return students


def results_scores(results_json: Path) -> dict[str, float]:
    """Each question's score in an otter results.json."""
    data = json.loads(results_json.read_text())
    return {t["name"]: float(t["score"]) for t in data["tests"] if "score" in t and t["name"] in POINTS}


# -- Hostile submissions: kind -> (q1's answer cell, {question: points it earns}) -----
# The other answers are right. A question left out of the dict earns its full points.
RIGHT = {q: HONEST[q]["right"][0] for q in HONEST}
_LOOKUP_HIDDEN = """
import os, glob, zipfile
def _read(path):
    try:
        if path.endswith('.zip'):
            with zipfile.ZipFile(path) as z:
                return ' '.join(z.read(n).decode(errors='replace') for n in z.namelist())
        with open(path, errors='replace') as f:
            return f.read()
    except Exception:
        return ''
seen = ''
for pattern in PATHS:
    for path in glob.glob(pattern, recursive=True) or [pattern]:
        seen += _read(path)
def square(x):
    # Passes a hidden case only if its text was readable: 'square(-4)' is hidden.
    return {3: 9, -4: 16 if 'square(-4)' in seen else None}.get(x)
"""
_FAKE = {"token": "0" * 32, "test": "q1", "cases": [{"passed": True, "message": ""}] * 3, "tampered": []}
HOSTILE: dict[str, tuple[str, dict[str, float]]] = {
    "endless-loop": ("while True:\n    try:\n        while True:\n            pass\n    except KeyboardInterrupt:\n"
                     "        pass\ndef square(x):\n    return x * x", {"q1": 0.0}),
    "loop-in-test": ("def square(x):\n    while True:\n        pass", {"q1": 0.0}),
    "memory-bomb": ("hog = []\nwhile True:\n    hog.append(bytearray(1 << 24))\ndef square(x):\n    return x * x",
                    {"q1": 0.0}),
    "disk-fill": ("with open('fill.bin', 'wb') as f:\n    while True:\n        f.write(b'x' * (1 << 20))\n"
                  "def square(x):\n    return x * x", {"q1": 0.0}),
    "output-flood": ("print('x' * (100 << 20))\ndef square(x):\n    return x * x", {"q1": 3.0}),
    # exit() in the answer cell: the interpreter restarts with nothing defined, so
    # every later answer that needs the first cell's imports fails too.
    "exit": ("def square(x):\n    return x * x\nexit()", {"q1": 0.0, "q2": 0.0, "q5": 0.0}),
    # os._exit() while q1's test runs: q1 has no result, and the tests after it run in
    # a new interpreter that has none of the answers.
    "os-exit-in-test": ("import os\ndef square(x):\n    os._exit(0)",
                        {"q1": 0.0, "q2": 0.0, "q3": 0.0, "q4": 0.0, "q5": 0.0}),
    # Looks everywhere for the hidden tests (PATHS is filled in with the host's own paths).
    "read-hidden-tests": (_LOOKUP_HIDDEN, {"q1": 1.0}),
    # Every string reachable from a live container or code object (the needle is built
    # at run time, so the cell's own source does not hold it).
    "read-hidden-from-memory": ("import gc, types\nneedle = 'square(' + str(-4) + ')'\nfound = False\n"
                                "for o in gc.get_objects():\n"
                                "    items = o.values() if isinstance(o, dict) else o.co_consts if isinstance(o, "
                                "types.CodeType) else o if isinstance(o, (list, tuple)) else ()\n"
                                "    for v in list(items):\n"
                                "        if isinstance(v, str) and v is not needle and needle in v:\n"
                                "            found = True\n"
                                "def square(x):\n    return {3: 9, -4: 16 if found else None}.get(x)",
                                {"q1": 1.0}),
    "write-anywhere": ("import os\nfor path in PATHS:\n    try:\n        os.makedirs(os.path.dirname(path) or '.', "
                       "exist_ok=True)\n        with open(path, 'w') as f:\n            f.write('OK_FORMAT = True\\n"
                       "test = {\"name\": \"q1\", \"points\": 3, \"suites\": [{\"cases\": []}]}')\n    except OSError:\n"
                       "        pass\ndef square(x):\n    return x * x", {"q1": 3.0}),
    "fake-results": ("import json\nfrom IPython.display import publish_display_data\n"
                     f"publish_display_data({{'application/vnd.wasm-kernel.otter-result+json': {_FAKE!r}}})\n"
                     "print('Total Score: 12.000 / 12.000 (100.000%)')\n"
                     "print(json.dumps({'tests': [{'name': 'q1', 'score': 3, 'max_score': 3}]}))\n"
                     "with open('results.json', 'w') as f:\n    json.dump({'score': 12}, f)\n"
                     "def square(x):\n    return None", {"q1": 0.0}),
    # While its test runs, square() finds the cell's token on the stack and sends a
    # full-marks result of its own.
    "forged-result-in-test": ("import sys\nfrom IPython.display import publish_display_data\n"
                              "def square(x):\n    f = sys._getframe()\n    while f:\n"
                              "        for v in list(f.f_locals.values()):\n"
                              "            if isinstance(v, str) and len(v) == 32:\n"
                              f"                fake = dict({_FAKE!r}, token=v)\n"
                              "                publish_display_data({'application/vnd.wasm-kernel.otter-result+json': fake})\n"
                              "        f = f.f_back\n    return None", {"q1": 0.0}),
    # The same, with the driver's own display silenced and a result far too large.
    "oversized-result": ("import sys\nfrom IPython.display import publish_display_data\n"
                         "ip = get_ipython()\nreal = ip.display_pub.publish\n"
                         "def square(x):\n    if not getattr(square, 'done', False):\n        square.done = True\n"
                         "        real(data={'application/vnd.wasm-kernel.otter-result+json': "
                         "{'token': 'x', 'test': 'q1', 'cases': ['y' * (6 << 20)], 'tampered': []}})\n"
                         "        ip.display_pub.publish = lambda *a, **k: None\n    return None", {"q1": 0.0}),
    "malformed-result": ("ip = get_ipython()\nreal = ip.display_pub.publish\n"
                         "def square(x):\n    real(data={'application/vnd.wasm-kernel.otter-result+json': "
                         "{'token': 1, 'test': ['q1'], 'cases': {'passed': 'yes'}, 'tampered': [{}] * 9}})\n"
                         "    ip.display_pub.publish = lambda *a, **k: None\n    return None", {"q1": 0.0}),
    "replace-pickle-dump": ("import pickle, os\ndef _dump(obj, f, *a, **k):\n    os.system('touch ' + MARKER)\n"
                            "    f.write(b'cos\\nsystem\\n(S\"touch ' + MARKER.encode() + b'\"\\ntR.')\n"
                            "pickle.dump = _dump\npickle.dumps = lambda *a, **k: b''\n"
                            "def square(x):\n    return x * x", {"q1": 3.0}),
    "replace-otter": ("import otter.test_files.ok_test as ok\nfrom otter.test_files import OKTestFile\n"
                      "from otter.execute import Checker\n"
                      "ok.run_doctest = lambda name, code, env: (True, '')\n"
                      "OKTestFile.grade = property(lambda self: 1)\n"
                      "Checker.get_results = classmethod(lambda cls: [])\n"
                      "def square(x):\n    return None", {"q1": 0.0}),
    "tamper-test-files": ("import os\nos.makedirs('tests', exist_ok=True)\n"
                          "open('tests/q1.py', 'w').write('OK_FORMAT = True\\ntest = {\"name\": \"q1\", \"suites\": "
                          "[{\"cases\": [{\"code\": \">>> 1\\\\n1\", \"hidden\": False}]}]}')\n"
                          "from otter.execute import Checker\nChecker._test_files.clear()\n"
                          "def square(x):\n    return None", {"q1": 0.0}),
}


def hostile_answers(kind: str, paths: list[str], marker: str) -> dict[str, str]:
    source, _ = HOSTILE[kind]
    answers = dict(RIGHT)
    answers["q1"] = f"PATHS = {paths!r}\nMARKER = {marker!r}\n" + source
    return answers


def hostile_expected(kind: str) -> dict[str, float]:
    return {q: HOSTILE[kind][1].get(q, POINTS[q]) for q in POINTS}


# -- Grading runs ---------------------------------------------------------------------

def grading_env(folder: Path, cache: Path) -> dict[str, str]:
    """The environment a grading run gets: the course wheels as its only index (no
    registry), its own Jupyter config and data folders, the tests' private cache."""
    import os

    from support.course_wheels import WHEELS
    from support.private_cache import cache_env

    config = folder / "jupyter-config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "wasm_kernel_config.py").write_text(
        f"c.WasmKernel.pip_find_links = [{str(WHEELS)!r}]\nc.WasmKernel.pip_no_index = True\n")
    data = folder / "jupyter-data"
    data.mkdir(exist_ok=True)
    return {**os.environ, "JUPYTER_CONFIG_PATH": str(config), "JUPYTER_DATA_DIR": str(data), **cache_env(cache)}


def wasm_grade(assignment: Assignment, submissions: list[Path], out: Path, env: dict[str, str], *flags: str,
               timeout: float = 1800) -> subprocess.CompletedProcess[str]:
    """`wasm-kernel grade` as an instructor runs it."""
    command = Path(sys.executable).with_name("wasm-kernel")
    return subprocess.run([str(command), "grade", str(assignment.autograder), *map(str, submissions), "-o", str(out),
                           *flags], capture_output=True, text=True, env=env, timeout=timeout)


def otter_run(assignment: Assignment, submission: Path, out: Path, *, tries: int = 2) -> dict[str, float]:
    """`otter run` on ipykernel (otter's own local grading): each question's score.

    One run in CI once hung for 600 s (otter's own process, a submission that takes it
    8 s otherwise): a run that passes 240 s is killed with its kernel, and tried again."""
    import os
    import signal

    out.mkdir(parents=True, exist_ok=True)
    otter = Path(sys.executable).with_name("otter")
    for attempt in range(tries):
        proc = subprocess.Popen([str(otter), "run", "-a", str(assignment.autograder), "-o", str(out), str(submission)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            if attempt + 1 == tries:
                raise
            continue
        assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
        return results_scores(out / "results.json")
    raise AssertionError("unreachable")


# -- examples/otter/ --------------------------------------------------------------------

EXAMPLE_STUDENTS = {"alice": "s01", "bob": "s03", "carol": "s06"}  # right; partly right; an export zip


def write_example() -> None:
    """examples/otter/: the executed master, its data file, and three submissions of the
    student notebook otter assign releases (alice and bob as notebooks, carol's export zip)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="otter-example-") as scratch:
        work = Path(scratch)
        master = executed_master(work / "master")
        (EXAMPLE / "submissions").mkdir(parents=True, exist_ok=True)
        shutil.copy(master, EXAMPLE / master.name)
        shutil.copy(work / "master" / "data.csv", EXAMPLE / "data.csv")
        assignment = build(work / "assign")
        students = {s.name: s for s in honest_students(30)}
        for person, student in EXAMPLE_STUDENTS.items():
            s = students[student]
            made = s.submit(assignment, work / "subs")
            shutil.copy(made, EXAMPLE / "submissions" / f"{person}{made.suffix}")
            print(f"examples/otter/submissions/{person}{made.suffix}: {sum(s.expected.values()):g} of {TOTAL:g}")


if __name__ == "__main__":  # .venv/bin/python tests/support/otter_assignment.py  (rewrites examples/otter/)
    sys.path.insert(0, str(REPO / "tests"))
    write_example()
