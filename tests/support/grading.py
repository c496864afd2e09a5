"""Autograding a course with nbgrader on the wasm-python kernel (issue 22, section 4).

The course is examples/teaching/: `nbgrader_config.py` (the grading kernel is
wasm-python), `source/ps1/ps1.ipynb` (five autograded answers, visible and hidden
tests, twelve points) and `grading/jupyter_config.py` (each submission's limits, read by
the kernel from Jupyter's config path). A `Course` is a copy of it in a temporary
folder, graded by the real `nbgrader` commands in subprocesses, as an instructor
would run them; its sessions go to a Jupyter data folder of its own.

Submissions are the released notebook with the answer cells filled in:
- HONEST: per question, a few ways students answer (right, wrong, right for the
  visible tests only, not answered); `honest_students(n)` deals n students
  deterministically, each with the score nbgrader must give it.
- HOSTILE: one per kind of attack. Each attack sits in the `squares` answer and
  `squares` only works if the attack worked, so the submission fails its own
  `squares_tests`, and the reason shows in that cell's output. The other four
  answers are right.

Used by tests/e2e/test_grading.py (honest parity with ipykernel), tests/security/
test_autograding.py (the hostile submissions) and benchmarks/bench_grading.py.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import re
import resource
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.paths import REPO

FIXTURE = REPO / "examples" / "teaching"
ASSIGNMENT = "ps1"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
QUESTIONS = ("squares", "mean_by_city", "normalize", "save_report", "fizzbuzz")
POINTS = {"squares_tests": 2.0, "mean_by_city_tests": 3.0, "normalize_tests": 2.0, "save_report_tests": 3.0,
          "fizzbuzz_tests": 2.0}
TOTAL = sum(POINTS.values())


# -- Honest answers: (source of the answer cell, points its tests give) ---------------

HONEST: dict[str, dict[str, tuple[str, float]]] = {
    "squares": {
        "comprehension": ("def squares(n):\n    return [i * i for i in range(1, n + 1)]", 2),
        "loop": ("def squares(n):\n    out = []\n    i = 1\n    while i <= n:\n        out.append(i ** 2)\n"
                 "        i += 1\n    return out", 2),
        "off-by-one": ("def squares(n):\n    return [i * i for i in range(n)]", 0),
        # right for the visible tests, wrong for n = 0 (a hidden test)
        "never-empty": ("def squares(n):\n    return [i * i for i in range(1, n + 1)] or [0]", 0),
        "not-answered": ("def squares(n):\n    # YOUR CODE HERE\n    raise NotImplementedError()", 0),
        # right, but it warns: nbgrader counts anything on stderr in a test cell as a failure
        "warns": ("import warnings\n\n\ndef squares(n):\n    warnings.warn('this could be faster')\n"
                  "    return [i * i for i in range(1, n + 1)]", 0),
    },
    "mean_by_city": {
        "csv": ("import csv\n\n\ndef mean_by_city(path):\n    sums, counts = {}, {}\n"
                "    with open(path, newline='') as f:\n        for row in csv.DictReader(f):\n"
                "            sums[row['city']] = sums.get(row['city'], 0.0) + float(row['celsius'])\n"
                "            counts[row['city']] = counts.get(row['city'], 0) + 1\n"
                "    return {city: sums[city] / counts[city] for city in sums}", 3),
        "pandas": ("import pandas as pd\n\n\ndef mean_by_city(path):\n"
                   "    return pd.read_csv(path).groupby('city')['celsius'].mean().to_dict()", 3),
        # the visible tests only read data/temperatures.csv; the hidden ones another file
        "hard-coded": ("def mean_by_city(path):\n    return {'Lyon': 12.75, 'Oslo': 1.25}", 0),
        "median": ("import statistics\nimport csv\n\n\ndef mean_by_city(path):\n    by_city = {}\n"
                   "    with open(path) as f:\n        for row in csv.DictReader(f):\n"
                   "            by_city.setdefault(row['city'], []).append(float(row['celsius']))\n"
                   "    return {c: statistics.median_low(v) for c, v in by_city.items()}", 0),
        "not-answered": ("def mean_by_city(path):\n    # YOUR CODE HERE\n    raise NotImplementedError()", 0),
    },
    "normalize": {
        "linalg": ("import numpy as np\n\n\ndef normalize(v):\n    v = np.asarray(v, dtype=float)\n"
                   "    return v / np.linalg.norm(v)", 2),
        "by-hand": ("import numpy as np\n\n\ndef normalize(v):\n    v = np.array(v, dtype=float)\n"
                    "    return v / np.sqrt((v ** 2).sum())", 2),
        # close enough for np.allclose, but a list (the hidden tests want an array)
        "list": ("import math\nimport numpy as np\n\n\ndef normalize(v):\n"
                 "    length = math.sqrt(sum(x * x for x in v))\n    return [x / length for x in v]", 0),
        "prints-and-plots": ("import numpy as np\nimport matplotlib.pyplot as plt\n\n\ndef normalize(v):\n"
                             "    v = np.asarray(v, dtype=float)\n    return v / np.linalg.norm(v)\n\n\n"
                             "u = normalize([3, 4])\nprint('unit vector:', u)\nfig, ax = plt.subplots()\n"
                             "ax.quiver(0, 0, u[0], u[1], angles='xy', scale_units='xy', scale=1)\n"
                             "ax.set_xlim(0, 1)\nax.set_ylim(0, 1)\nplt.show()", 2),
    },
    "save_report": {
        "json": ("import json\n\n\ndef save_report(path, means):\n    text = json.dumps(means, sort_keys=True)\n"
                 "    with open(path, 'w') as f:\n        f.write(text)\n    return len(text.encode())", 3),
        "pathlib": ("import json\nfrom pathlib import Path\n\n\ndef save_report(path, means):\n"
                    "    data = json.dumps(dict(sorted(means.items()))).encode()\n"
                    "    Path(path).write_bytes(data)\n    return len(data)", 3),
        # the visible test reads the JSON back; the hidden ones want the keys sorted
        "unsorted": ("import json\n\n\ndef save_report(path, means):\n    with open(path, 'w') as f:\n"
                     "        return f.write(json.dumps(means))", 0),
        "returns-nothing": ("import json\n\n\ndef save_report(path, means):\n    with open(path, 'w') as f:\n"
                            "        json.dump(means, f, sort_keys=True)", 0),
    },
    # The test cell's last value is the points it gives (partial credit): 2 * passed / 8.
    "fizzbuzz": {
        "modulo": ("def fizzbuzz(n):\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    if n % 3 == 0:\n"
                   "        return 'Fizz'\n    if n % 5 == 0:\n        return 'Buzz'\n    return str(n)", 2),
        "concatenate": ("def fizzbuzz(n):\n    return ('Fizz' * (n % 3 == 0) + 'Buzz' * (n % 5 == 0)) or str(n)", 2),
        # 15 and 30 say "Fizz": 6 of 8 cases
        "checks-3-first": ("def fizzbuzz(n):\n    if n % 3 == 0:\n        return 'Fizz'\n    if n % 5 == 0:\n"
                           "        return 'Buzz'\n    if n % 15 == 0:\n        return 'FizzBuzz'\n    return str(n)", 1.5),
        # 7 and 1 say "": 6 of 8 cases
        "no-numbers": ("def fizzbuzz(n):\n    return 'Fizz' * (n % 3 == 0) + 'Buzz' * (n % 5 == 0)", 1.5),
        "not-answered": ("def fizzbuzz(n):\n    # YOUR CODE HERE\n    raise NotImplementedError()", 0),
    },
}


@dataclass
class Submission:
    student: str
    answers: dict[str, str]  # grade_id of an answer cell -> its source
    files: dict[str, str] = field(default_factory=dict)  # more files submitted beside the notebook
    kernelspec: dict[str, str] | None = None  # the notebook's kernelspec metadata, if the student changed it
    expected: float | None = None  # the score nbgrader must give (honest ones)
    variants: tuple[str, ...] = ()


def honest_students(n: int, seed: int = 22) -> list[Submission]:
    """n honest students, s01..sNN: s01 answers everything right; the others draw one
    variant per question from a fixed seed, so a run is the same every time."""
    rng = random.Random(seed)
    out = []
    for i in range(1, n + 1):
        if i == 1:
            picks = {q: next(iter(HONEST[q])) for q in QUESTIONS}
        else:
            picks = {q: rng.choice(sorted(HONEST[q])) for q in QUESTIONS}
        answers = {q: HONEST[q][v][0] for q, v in picks.items()}
        expected = float(sum(HONEST[q][v][1] for q, v in picks.items()))
        out.append(Submission(f"s{i:02d}", answers, expected=expected, variants=tuple(picks.values())))
    return out


# -- Hostile submissions ---------------------------------------------------------------

@dataclass
class Hostile:
    """An attack: the squares answer (@COURSE@ becomes the course's absolute host
    path, @PORT@ a loopback port the test listens on), files submitted beside the
    notebook, and what the failing `squares_tests` (or the answer cell) must say."""
    answer: str
    reason: str  # a regex the outputs of `where` must match
    where: str = "squares_tests"
    files: dict[str, str] = field(default_factory=dict)
    kernelspec: dict[str, str] | None = None
    # Other tests the attack costs the submission itself, as it would on ipykernel.
    also_lost: tuple[str, ...] = ()


_PROBE = '''import os


def probe(label, action):
    """Print what the action gave, or the error it raised, on one line."""
    try:
        result = action()
    except BaseException as err:  # noqa: BLE001
        result = f"{type(err).__name__}: {err}"
    print(f"{label} -> {str(result)[:120]!r}")
    return result

'''

HOSTILE: dict[str, Hostile] = {
    # An endless loop that swallows KeyboardInterrupt and everything else: the
    # deadline stops it the hard way.
    "endless-loop": Hostile(
        "def squares(n):\n    while True:\n        try:\n            while True:\n                pass\n"
        "        except BaseException:\n            pass",
        r"DeadlineExceeded: the cell ran past its 10 s deadline"),
    "memory-bomb": Hostile(
        "def squares(n):\n    hoard = []\n    while True:\n        hoard.append(bytearray(64 << 20))",
        r"MemoryError(.|\n)*memory limit of 512 MiB"),
    "disk-fill": Hostile(
        "def squares(n):\n    with open('fill.bin', 'wb') as f:\n        while True:\n"
        "            f.write(b'x' * (1 << 20))",
        r"No space left on device(.|\n)*disk quota of 32 MiB"),
    # Another student's submission and graded notebook, the instructor's source (the
    # solutions) and the gradebook, by relative and absolute host paths.
    "thief": Hostile(
        _PROBE + '''COURSE = @COURSE@
print("cwd", os.getcwd(), "holds", sorted(os.listdir(".")))
TARGETS = [
    "../../s01/ps1/ps1.ipynb", "../../../submitted/s01/ps1/ps1.ipynb", "../../../source/ps1/ps1.ipynb",
    "../../../gradebook.db", "../gradebook.db", "/gradebook.db",
    COURSE + "/gradebook.db", COURSE + "/source/ps1/ps1.ipynb", COURSE + "/submitted/s01/ps1/ps1.ipynb",
    COURSE + "/autograded/s01/ps1/ps1.ipynb", COURSE + "/nbgrader_config.py",
]
stolen = {path: probe("read " + path, lambda: open(path, "rb").read()) for path in TARGETS}
probe("listdir ..", lambda: os.listdir(".."))
probe("listdir /", lambda: os.listdir("/"))
probe("listdir COURSE", lambda: os.listdir(COURSE))
probe("walk /app", lambda: sorted(os.path.join(d, f) for d, _, fs in os.walk("/app") for f in fs))


def squares(n):
    source = open("../../../source/ps1/ps1.ipynb").read()  # the solution is in there
    return eval(source.split("return ")[1].split(chr(10))[0])''',
        r"PermissionError: \[Errno 63\] Operation not permitted: '../../../source/ps1/ps1.ipynb'"),
    # Writes over the notebook, its data file and the gradebook; deletes the data. The
    # deletion hides the data file in the submission's own session (a whiteout), as it
    # would remove it on ipykernel: its later mean_by_city answer has no data either.
    "tamper": Hostile(
        _PROBE + '''COURSE = @COURSE@
probe("write ps1.ipynb", lambda: open("ps1.ipynb", "w").write('{"cells": [], "score": 10}'))
probe("write data/temperatures.csv", lambda: open("data/temperatures.csv", "w").write("day,city,celsius\\n"))
probe("read back data/temperatures.csv", lambda: open("data/temperatures.csv").read())
probe("remove data/temperatures.csv", lambda: os.remove("data/temperatures.csv"))
probe("rename ps1.ipynb", lambda: os.rename("ps1.ipynb", "gone.ipynb"))
probe("write ../../../gradebook.db", lambda: open("../../../gradebook.db", "wb").write(b"owned"))
probe("write COURSE/gradebook.db", lambda: open(COURSE + "/gradebook.db", "wb").write(b"owned"))
probe("write COURSE/source/ps1/ps1.ipynb", lambda: open(COURSE + "/source/ps1/ps1.ipynb", "w").write("owned"))
probe("write COURSE/autograded/s01/ps1/data/temperatures.csv",
      lambda: open(COURSE + "/autograded/s01/ps1/data/temperatures.csv", "w").write("owned"))


def squares(n):
    # full marks only if the gradebook could be written
    open(COURSE + "/gradebook.db", "ab").close()
    return [i * i for i in range(1, n + 1)]''',
        r"FileNotFoundError: \[Errno 44\] No such file or directory: '/.*/gradebook.db'",
        also_lost=("mean_by_city_tests",)),
    # 100 MB on stdout: the kernel keeps and sends 1 MiB of it.
    "output-flood": Hostile(
        "def squares(n):\n    for _ in range(100):\n        print('x' * 1_000_000)",
        r"stdout was cut at 1 MiB"),
    # exit() at the end of the answer: the interpreter restarts, squares is gone.
    "exit": Hostile(
        "def squares(n):\n    return [i * i for i in range(1, n + 1)]\n\n\nexit()",
        r"NameError: name 'squares' is not defined"),
    # os._exit(0) in the middle of the tests: the rest of the test cell never runs.
    "os-exit": Hostile(
        "import os\n\n\ndef squares(n):\n    os._exit(0)",
        r"SystemExit: the interpreter exited with status 0 \(os._exit\): it was restarted"),
    # A process, a thread, a connection to a port on the grader's machine.
    "escape": Hostile(
        _PROBE + '''import socket
import subprocess
import sys
import threading

probe("fork", lambda: os.fork())
probe("thread", lambda: threading.Thread(target=print).start())
probe("subprocess", lambda: subprocess.run(["cat", "/etc/passwd"], capture_output=True).stdout)
probe("os.system", lambda: os.system("nc 127.0.0.1 @PORT@"))
probe("connect", lambda: socket.create_connection(("127.0.0.1", @PORT@), timeout=2))
probe("child", lambda: subprocess.run(
    [sys.executable, "-c", "import socket; socket.create_connection(('127.0.0.1', @PORT@), timeout=2)"],
    capture_output=True, text=True).stderr.splitlines()[-1])
probe("ctypes", lambda: __import__("ctypes").CDLL(None))


def squares(n):
    # full marks only if a connection to the grader's machine goes through
    socket.create_connection(("127.0.0.1", @PORT@), timeout=2).close()
    return [i * i for i in range(1, n + 1)]''',
        r"PermissionError: network access is not available in this sandbox"),
    # The notebook asks for the native kernel; nbgrader grades on wasm-python anyway.
    "kernelspec-swap": Hostile(
        '''import sys


def squares(n):
    # full marks only outside the sandbox
    if sys.platform == "wasi":
        raise RuntimeError("still in the sandbox: " + sys.platform)
    return [i * i for i in range(1, n + 1)]''',
        r"RuntimeError: still in the sandbox: wasi",
        kernelspec={"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}),
    # Kernel configuration files submitted beside the notebook: they land in the
    # kernel's working directory, and would lift the deadline if the kernel read them.
    "config-smuggling": Hostile(
        """import time


def squares(n):
    time.sleep(30)  # right, but slower than the deadline
    return [i * i for i in range(1, n + 1)]""",
        r"DeadlineExceeded: the cell ran past its 10 s deadline",
        files={name: ("c = get_config()\nc.WasmKernel.deadline = None\nc.WasmKernel.max_deadline = None\n"
                      "c.WasmKernel.memory = 4 << 30\nc.WasmKernel.max_memory = 4 << 30\n"
                      "c.WasmKernel.fuel = None\nc.WasmKernel.max_fuel = None\n"
                      "c.WasmKernel.notebook_files = 'read'\n"
                      "c.IPKernelApp.exec_lines = ['import os; print(os.listdir(\"/\"))']\n")
               for name in ("wasm_kernel_config.py", "jupyter_config.py", "ipython_config.py",
                            "ipython_kernel_config.py")}),
    # The notebook's own %limits may lower a limit, never lift the operator's: the
    # answer cell is refused whole.
    "limits-magic": Hostile(
        "%limits deadline=none memory=4GiB\nimport time\n\n\ndef squares(n):\n    time.sleep(30)\n"
        "    return [i * i for i in range(1, n + 1)]",
        r"UsageError: deadline none is above this kernel's limit",
        where="squares"),
}


def hostile_submission(name: str, course: Path, port: int) -> Submission:
    h = HOSTILE[name]
    answers = {q: HONEST[q][next(iter(HONEST[q]))][0] for q in QUESTIONS}
    answers["squares"] = h.answer.replace("@COURSE@", repr(str(course))).replace("@PORT@", str(port))
    return Submission(f"m-{name}", answers, files=dict(h.files), kernelspec=h.kernelspec,
                      expected=TOTAL - POINTS["squares_tests"])


# -- The course ------------------------------------------------------------------------

def python3_spec_dirs(base: Path, env: dict[str, str]) -> list[str]:
    """JUPYTER_PATH entries that give a `python3` kernelspec (ipykernel's) under env:
    none when `jupyter kernelspec list` has one there already, else one written under base."""
    listed = subprocess.run([sys.executable, "-m", "jupyter", "kernelspec", "list", "--json"], env=env,
                            capture_output=True, text=True, timeout=300, check=True)
    if "python3" in json.loads(listed.stdout)["kernelspecs"]:
        return []
    from ipykernel.kernelspec import write_kernel_spec

    write_kernel_spec(str(base / "share" / "kernels" / "python3"))
    return [str(base / "share")]


def tree_hash(root: Path) -> str:
    """Names and bytes of every file under root (links not followed)."""
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in sorted(os.walk(root)):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath, name)
            digest.update(str(path.relative_to(root)).encode())
            digest.update(b"L" + os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
    return digest.hexdigest()


@dataclass
class Run:
    argv: list[str]
    returncode: int
    seconds: float
    log: str
    cpu_seconds: float = 0.0  # user + system of nbgrader and its kernels (meaningful when run alone)


class Course:
    """A copy of the example course under `base`, with the environment nbgrader and
    the kernels run in: a Jupyter data folder (the sessions) and config folder of its
    own, the course's grading/ on the config path (the kernel's limits)."""

    def __init__(self, base: Path, name: str = "course") -> None:
        self.base = base
        self.root = base / name
        shutil.copytree(FIXTURE, self.root, ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        self.data_dir = base / f"{name}-jupyter-data"
        config_dir = base / f"{name}-jupyter-config"
        config_dir.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items()
               if k not in ("JPY_SESSION_NAME", "JUPYTERHUB_USER", "JUPYTER_PATH", "JUPYTER_CONFIG_PATH")}
        env.update(
            # nbgrader runs `alembic` (the gradebook's migrations) from PATH
            PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
            JUPYTER_DATA_DIR=str(self.data_dir),
            JUPYTER_CONFIG_DIR=str(config_dir),
            JUPYTER_CONFIG_PATH=str(self.root / "grading"),
            PYTHONUNBUFFERED="1",
        )
        extra = python3_spec_dirs(base / f"{name}-kernels", env)
        if extra:
            env["JUPYTER_PATH"] = os.pathsep.join(extra)
        self.env = env

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.root / 'gradebook.db'}"

    def nbgrader(self, *args: str, timeout: float = 1800) -> Run:
        argv = [sys.executable, "-m", "nbgrader", *args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(argv, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return Run(argv, proc.returncode, seconds, proc.stdout + proc.stderr, cpu)

    def generate(self) -> Run:
        run = self.nbgrader("generate_assignment", ASSIGNMENT, "--force")
        assert run.returncode == 0, run.log[-4000:]
        return run

    def released(self) -> dict[str, Any]:
        return json.loads((self.root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())

    def submit(self, sub: Submission) -> Path:
        nb = copy.deepcopy(self.released())
        for cell in nb["cells"]:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if meta.get("solution") and meta["grade_id"] in sub.answers:
                cell["source"] = sub.answers[meta["grade_id"]]
        if sub.kernelspec is not None:
            nb["metadata"]["kernelspec"] = sub.kernelspec
        folder = self.root / "submitted" / sub.student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(json.dumps(nb, indent=1))
        for name, text in sub.files.items():
            (folder / name).write_text(text)
        return folder

    def autograde(self, *args: str, timeout: float = 1800) -> Run:
        return self.nbgrader("autograde", ASSIGNMENT, "--force", *args, timeout=timeout)

    def scores(self) -> dict[str, float]:
        from nbgrader.api import Gradebook

        with Gradebook(self.db_url) as gb:
            return {s.student.id: s.score for s in gb.assignment_submissions(ASSIGNMENT)}

    def cell_scores(self, student: str) -> dict[str, float]:
        return self.all_cell_scores([student])[student]

    def all_cell_scores(self, students: list[str]) -> dict[str, dict[str, float]]:
        """student -> {test cell: its score}, read from the gradebook in one session."""
        from nbgrader.api import Gradebook

        with Gradebook(self.db_url) as gb:
            return {s: {g.name: g.score for g in gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, s).grades}
                    for s in students}

    def graded(self, student: str) -> dict[str, Any]:
        return json.loads((self.root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())

    def outputs(self, student: str) -> dict[str, str]:
        """grade_id -> the text of that cell's outputs in the graded notebook."""
        out = {}
        for cell in self.graded(student)["cells"]:
            if cell["cell_type"] != "code":
                continue
            parts = []
            for o in cell.get("outputs", []):
                if o["output_type"] == "stream":
                    parts.append("".join(o["text"]))
                elif o["output_type"] == "error":
                    parts.append(f"{o['ename']}: {o['evalue']}\n" + "\n".join(o.get("traceback", [])))
                else:
                    parts.append("".join(o.get("data", {}).get("text/plain", "")))
            out[cell["metadata"]["nbgrader"]["grade_id"]] = ANSI.sub("", "\n".join(parts))
        return out


def grade_on(course: Course, kernel: str, *args: str, timeout: float = 1800) -> Run:
    """`nbgrader autograde ps1` with the given grading kernel (the command line wins
    over the course's nbgrader_config.py)."""
    return course.autograde(f"--Execute.kernel_name={kernel}", *args, timeout=timeout)
