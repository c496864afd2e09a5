"""`python` as a command: wasm-python's child interpreter (a fresh guest of the same
sandbox) against ipykernel's real process, side by side in one run.

    .venv/bin/python benchmarks/run_all.py --only python [--rounds 5] [--json out.json]

Per round, each kernel in turn (the order alternates) starts in the same notebook
folder and, after a warm-up cell that runs one child, runs three cells of RUNS
children each, timed request -> idle and divided by RUNS:
1. RUNS lines of `!python -c pass` (the confined shell's python; bash and a real
   python on a pty under ipykernel);
2. a loop of `subprocess.run([sys.executable, "-c", "pass"])`;
3. a loop of `subprocess.run([sys.executable, "-c", "import json; print(json.dumps(...))"],
   capture_output=True)`, whose output is checked.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Row  # noqa: E402
from bench_kernel import DrivenKernel, alternating_rounds, kernel_env, paired_rows  # noqa: E402

AREA = "python"
RUNS = 10
CELLS = {
    "bang_s": "\n".join(["!python -c pass"] * RUNS),
    "run_s": f"import subprocess, sys\nfor _ in range({RUNS}):\n    subprocess.run([sys.executable, '-c', 'pass'])",
    "json_s": (f"import subprocess, sys\nfor i in range({RUNS}):\n"
               "    r = subprocess.run([sys.executable, '-c', 'import json, sys; print(json.dumps({\"n\": sys.argv[1]}))', "
               "str(i)], capture_output=True, text=True)\n"
               "    assert r.stdout == '{\"n\": \"%d\"}\\n' % i, r"),
}


def one_round(kernel: str, env: dict[str, str], folder: Path, scratch: Path) -> dict[str, Any]:
    k = DrivenKernel(kernel, env, folder, scratch / f"{kernel}.log")
    try:
        k.start()
        k.run_cell("import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'pass'], check=True)")
        times = {}
        for key, code in CELLS.items():
            ran = k.run_cell(code, timeout=600)
            errors = [m for m in ran["outputs"] if m["msg_type"] == "error"]
            assert not errors, (kernel, key, errors[0]["content"]["evalue"] if errors else None)
            times[key] = ran["idle_s"] / RUNS
        return times
    finally:
        k.shutdown()


def run_python_child(rounds: int = 5) -> tuple[list[Row], dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="wk-bench-python-"))
    folder = base / "notebook"
    folder.mkdir()
    common = kernel_env(base)
    common["SHELL"] = "/bin/bash"  # IPython runs `!` lines with $SHELL; bash is the usual one
    raw: dict[str, Any] = {"rounds": [], "runs_per_cell": RUNS}
    try:
        raw["rounds"] = alternating_rounds(AREA, rounds, base, common,
                                           lambda kernel, env, scratch: one_round(kernel, env, folder, scratch),
                                           lambda got: f"run {got['run_s'] * 1000:.0f} ms")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return rows_from(raw), raw


def rows_from(raw: dict[str, Any]) -> list[Row]:
    return paired_rows(AREA, raw, [("bang_s", "`!python -c pass`, per run"),
                                   ("run_s", "`subprocess.run([sys.executable, '-c', 'pass'])`, per run"),
                                   ("json_s", "`subprocess.run(...)` of a json one-liner, output captured, per run")],
                       f"{raw['runs_per_cell']} runs a cell; native: a real process (ipykernel)")


if __name__ == "__main__":
    from _common import print_table

    rows, _ = run_python_child(int(os.environ.get("ROUNDS", "3")))  # a quick look; run_all.py is the way
    print_table(rows)
