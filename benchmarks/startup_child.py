"""Child for the cold-start benchmark: the first sandbox of a fresh process.

    python benchmarks/startup_child.py WORKSPACE

Prints "READY" as soon as the first sandbox exists (the parent times spawn ->
READY), then one JSON line with the in-process breakdown: import of wasm_kernel,
create_sandbox, the first execute("1+1"), and close.
"""

from __future__ import annotations

import time

T0 = time.perf_counter()

import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402


def main() -> None:
    ws = Path(sys.argv[1])
    t_start = time.perf_counter()
    from wasm_kernel import create_sandbox

    t_import = time.perf_counter()
    sb = create_sandbox(workspace=ws)
    t_create = time.perf_counter()
    print("READY", flush=True)
    r = sb.execute("1+1")
    t_exec = time.perf_counter()
    ok = r.success and r.outputs and r.outputs[0].data.get("text/plain") == "2"
    sb.close()
    t_close = time.perf_counter()
    print(
        json.dumps(
            {
                "ok": bool(ok),
                "interpreter_to_main_s": t_start - T0,
                "import_s": t_import - t_start,
                "create_s": t_create - t_import,
                "first_execute_s": t_exec - t_create,
                "close_s": t_close - t_exec,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
