"""Areas 3 and 4: pure-Python CPU cells and numpy/pandas cells, guest vs native.

Guest: wall time of `sb.execute(cell)` (the whole turn as a caller sees it), after
an untimed warm-up run and a pause so the previous cell's checkpoint is done.
Native: the same source exec'd in a child process of the host Python
(native_child.py serve), also after a warm-up. Guest and native runs alternate
(native, guest, native, guest, ...) so both see the same load on a shared machine.
Medians over REPEATS runs; the median of the per-pair ratios is kept in `extra`.

numpy/pandas natively: the ratio uses a child with OPENBLAS/OMP/MKL threads = 1,
since the guest has one thread (no BLAS threads); a default-threads native child's
time is kept in `extra` for reference.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time

from _common import HERE, Row, check, log, median, quiet_policy, run_child_json, temp_workspace

import workloads
from bench_pyodide import newest_node, run_pyodide

CPU_TARGET = 2.5
PAUSE = 0.15
ONE_THREAD = {k: "1" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}


class NativeServer:
    """A native_child.py `serve` process: run(name) -> seconds for one run."""

    def __init__(self, which: str, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "native_child.py"), "serve", which],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ, **(env or {})},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"native child for {which!r} died")
        self.info = json.loads(line)

    def run(self, name: str) -> float:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _paired(sb, native: NativeServer, cells: dict[str, str], repeats: int) -> dict[str, dict[str, list[float]]]:
    """Alternate native and guest runs of every cell; seconds."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, code in cells.items():
        check(sb.execute(code), name)  # warm-up (the native side warmed up at start)
        walls, inner, nat = [], [], []
        for _ in range(repeats):
            nat.append(native.run(name))
            time.sleep(PAUSE)
            t = time.perf_counter()
            r = sb.execute(code)
            walls.append(time.perf_counter() - t)
            check(r, name)
            inner.append(r.duration_ms / 1000)
        out[name] = {"wall": walls, "turn": inner, "native": nat}
    return out


def _other_native_pythons() -> list[str]:
    """A newer native CPython, if one is on the machine (pyenv), for a second opinion:
    the host venv is 3.11 while the guest is 3.15."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[3-9]*/bin/python3")))
    return found[-1:]


def run_cpu(repeats: int = 5) -> list[Row]:
    from wasm_kernel import create_sandbox

    others = {}
    for py in _other_native_pythons():
        try:
            others[py] = run_child_json([py, str(HERE / "native_child.py"), "batch", "cpu", str(repeats)])
        except Exception as err:  # informative only
            log(f"cpu: {py} failed: {err}")
    log("cpu: guest and native, alternating")
    native = NativeServer("cpu")
    with temp_workspace() as ws:
        sb = create_sandbox(workspace=ws, policy=quiet_policy())
        try:
            res = _paired(sb, native, workloads.CPU_CELLS, repeats)
        finally:
            sb.close()
            native.close()
    log("cpu: Pyodide under node (the peer a user would otherwise pick for Python in wasm)")
    pyodide = run_pyodide(workloads.CPU_CELLS, repeats)
    log("cpu: Pyodide under the newest node npm offers")
    pyodide_new = run_pyodide(workloads.CPU_CELLS, repeats, node=newest_node())
    rows = []
    for name in workloads.CPU_CELLS:
        r = res[name]
        native_ms = median(r["native"]) * 1000
        target = CPU_TARGET
        pyodide_extra: dict[str, object] = {"pyodide": "not run (node or npm missing, or npm install failed)"}
        if pyodide is not None:
            pyodide_ms = median(pyodide["cells"][name]) * 1000
            # The target: no worse than Pyodide's own ratio on the machine's node (20),
            # and at most 2.5x.
            target = min(CPU_TARGET, pyodide_ms / native_ms)
            pyodide_extra = {"pyodide_ms": pyodide_ms, "pyodide_ratio": pyodide_ms / native_ms,
                             "pyodide_version": pyodide["pyodide"], "pyodide_python": pyodide["python"],
                             "node": pyodide["node"], "v8": pyodide.get("v8"), "pyodide_load_s": pyodide["load_s"],
                             "pyodide_1plus1_ms": median(pyodide["one_plus_one_s"]) * 1000}
        if pyodide_new is not None:
            newest_ms = median(pyodide_new["cells"][name]) * 1000
            pyodide_extra.update({"pyodide_newest_node_ms": newest_ms, "pyodide_newest_node_ratio": newest_ms / native_ms,
                                  "newest_node": pyodide_new["node"], "newest_v8": pyodide_new.get("v8")})
        extra = {**pyodide_extra, 
            "guest_turn_ms": median(r["turn"]) * 1000,
            "guest_samples_ms": [x * 1000 for x in r["wall"]],
            "native_samples_ms": [x * 1000 for x in r["native"]],
            "paired_ratio_median": median([g / n for g, n in zip(r["wall"], r["native"])]),
            "native_python": native.info["python"],
        }
        for other in others.values():
            extra[f"native_{other['python']}_ms"] = median(other["cells"][name]) * 1000
        rows.append(
            Row("cpu", name, "ms", median(r["wall"]) * 1000, native_ms, target, "ratio",
                note=f"native = CPython {native.info['python']} in a child process", extra=extra)
        )
    return rows


def run_numpy(repeats: int = 5) -> list[Row]:
    from wasm_kernel import create_sandbox

    log("numpy: native with default BLAS threads (reference)")
    native_mt = run_child_json([sys.executable, str(HERE / "native_child.py"), "batch", "numpy", str(repeats)])
    log("numpy: guest and native (1 BLAS thread), alternating")
    native = NativeServer("numpy", ONE_THREAD)
    with temp_workspace() as ws:
        sb = create_sandbox(workspace=ws, policy=quiet_policy())
        try:
            t = time.perf_counter()
            r = check(sb.execute(workloads.NUMPY_SETUP + "print(np.__version__, pd.__version__)"), "setup")
            setup_s = time.perf_counter() - t
            guest_versions = r.stdout.split()
            res = _paired(sb, native, workloads.NUMPY_CELLS, repeats)
        finally:
            sb.close()
            native.close()
    rows = []
    for name in workloads.NUMPY_CELLS:
        r = res[name]
        rows.append(
            Row(
                "numpy",
                name,
                "ms",
                median(r["wall"]) * 1000,
                median(r["native"]) * 1000,
                None,  # the issue sets no target for this set
                "ratio",
                note="native = 1 BLAS thread",
                extra={
                    "guest_turn_ms": median(r["turn"]) * 1000,
                    "native_default_threads_ms": median(native_mt["cells"][name]) * 1000,
                    "guest_samples_ms": [x * 1000 for x in r["wall"]],
                    "native_samples_ms": [x * 1000 for x in r["native"]],
                    "paired_ratio_median": median([g / n for g, n in zip(r["wall"], r["native"])]),
                    "guest_numpy_pandas": guest_versions,
                    "native_numpy_pandas": [native.info.get("numpy"), native.info.get("pandas")],
                    "guest_setup_cell_s": setup_s,
                },
            )
        )
    return rows
