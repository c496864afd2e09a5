"""The interrupt area: how long from the frontend's interrupt to the cell's
execute_reply, and whether the cell's work so far is kept, for the wasm-python
kernel and native ipykernel side by side in one run (both through jupyter_client's
KernelManager.interrupt_kernel(), as JupyterLab's stop button).

Workloads (each cell first sets `progress = 1`, then keeps raising it):
  loop    `while True: progress += 1` (the eval loop's safe points: a soft interrupt)
  numpy   a loop of 200x200 matrix products (C calls of a few ms between safe points)
  sleep   `time.sleep(60)` (a wait the sandbox's clock shadow cuts short)
  long_c  one 3000x3000 matrix product (7.6 s in the guest, no safe point inside:
          the guest falls back to rolling the cell back after interrupt_grace_seconds;
          ipykernel's SIGINT handler also waits for the call to return)
The row's figure is the median over --rounds of seconds from interrupt_kernel() to
the execute_reply; `kept` says whether `progress > 1` afterwards.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from _common import Row, log, median

from bench_kernel import DrivenKernel, kernel_env

WORKLOADS = {
    "loop": "progress = 1\nwhile True:\n    progress += 1",
    "numpy": "import numpy as np\nprogress = 1\nwhile True:\n    np.ones((200, 200)) @ np.ones((200, 200))\n"
             "    progress += 1",
    "sleep": "import time\nprogress = 2\ntime.sleep(60)",
    "long_c": "import numpy as np\nprogress = 2\na = np.ones((3000, 3000))\nb = a @ a",
}
DELAY_S = 1.0


def _interrupted_cell(k: DrivenKernel, code: str, timeout: float = 120) -> tuple[float | None, dict[str, Any]]:
    """Run `code`, interrupt it DELAY_S after sending; (seconds to the reply, reply
    content). None: the cell ended before the interrupt (native BLAS is that fast)."""
    box: dict[str, float] = {}

    def fire() -> None:
        time.sleep(DELAY_S)
        box["t"] = time.perf_counter()
        k.km.interrupt_kernel()

    msg_id = k.kc.execute(code)
    threading.Thread(target=fire, daemon=True).start()
    reply = k._wait_shell(msg_id, "execute_reply", timeout)
    took = time.perf_counter() - box["t"] if "t" in box else None
    k._settle_iopub(msg_id)
    if took is None:
        time.sleep(DELAY_S)  # the interrupt then finds an idle kernel, and is lost
    return took, reply["content"]


def _kept(k: DrivenKernel) -> bool:
    k.run_cell("kept = 'progress' in globals() and progress > 1")
    out = k.run_cell("print(kept)")["outputs"]
    return any(m["msg_type"] == "stream" and "True" in m["content"]["text"] for m in out)


def run_interrupt(rounds: int = 5) -> tuple[list[Row], dict[str, Any]]:
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="wk-bench-interrupt-") as scratch:
        base = Path(scratch)
        env = kernel_env(base)
        env["JUPYTER_DATA_DIR"] = str(base / "data")
        for name in ("wasm-python", "python3"):
            k = DrivenKernel(name, env, base, base / f"{name}.log")
            k.start()
            try:
                for workload, code in WORKLOADS.items():
                    n = 1 if workload == "long_c" else rounds
                    samples, kept, enames = [], [], []
                    for _ in range(n):
                        k.run_cell("progress = 0")
                        took, content = _interrupted_cell(k, code)
                        samples.append(took)
                        enames.append(content.get("ename"))
                        kept.append(_kept(k))
                    raw.setdefault(workload, {})[name] = {"seconds": samples, "kept": kept, "ename": enames}
                    log(f"interrupt: {name} {workload}: {samples} s, kept {kept}, {enames}")
            finally:
                k.shutdown()
    rows = []

    def mid(xs: list[float | None]) -> float | None:
        known = [x for x in xs if x is not None]
        return median(known) if known else None

    for workload in WORKLOADS:
        ours, native = raw[workload]["wasm-python"], raw[workload]["python3"]
        rows.append(Row(
            "interrupt", f"interrupt -> reply, {workload}", "s", mid(ours["seconds"]), mid(native["seconds"]),
            target_max=1.0 if workload != "long_c" else None,
            note=f"work kept: ours {all(ours['kept'])}, ipykernel {all(native['kept'])}",
            extra={"wasm-python": ours, "python3": native},
        ))
    return rows, raw
