"""What the warm image buys, kernel against kernel: wasm-python and native ipykernel
over jupyter_client, side by side in one run (the order alternates per round).

Per round and kernel, in one fresh process each:
- first import: the first cell `import numpy, pandas, matplotlib.pyplot` after the
  first `1+1`, execute_request to execute_reply;
- `%reset -f` then `1+1`: both replies, summed;
- kernel restart: from `restart_kernel()` to the execute_reply of the first `1+1` of
  the new process (the client stays connected, as a frontend's does).
Then density: N kernels of each kind started, each imports numpy, pandas and
matplotlib.pyplot, all idle for a few seconds, and the summed proportional set size
(PSS, /proc/PID/smaps_rollup: shared pages divided among their users) of every
kernel's process tree is compared, with RSS and private (USS) for reference.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Row, log, median
from bench_kernel import KERNELS, NATIVE, WASM, DrivenKernel, KernelFailed, kernel_env

IMPORT_CELL = "import numpy, pandas, matplotlib.pyplot"
TARGET_RATIO = 1.0
COLD_TARGET_S = 20.0


def _fresh(kernel: str, base: Path, common: dict[str, str], tag: str) -> DrivenKernel:
    scratch = base / tag
    cwd = scratch / "cwd"
    cwd.mkdir(parents=True, exist_ok=True)
    env = {**common, "JUPYTER_DATA_DIR": str(scratch / "data")}
    return DrivenKernel(kernel, env, cwd, scratch / f"{kernel}.log")


def _restart_to_first_result(k: DrivenKernel) -> float:
    t0 = time.perf_counter()
    k.km.restart_kernel(now=False)
    while True:  # the new process answers kernel_info once its channels are up
        probe = k.kc.kernel_info()
        try:
            k._wait_shell(probe, "kernel_info_reply", timeout=2.0)
            break
        except KernelFailed:
            if time.perf_counter() - t0 > 60:
                raise
    return k.first_result(t0)


def one_round(kernel: str, base: Path, common: dict[str, str], tag: str) -> dict[str, float]:
    k = _fresh(kernel, base, common, tag)
    try:
        k.start()
        imported = k.run_cell(IMPORT_CELL)["reply_s"]
        reset = k.run_cell("%reset -f")["reply_s"] + k.run_cell("1+1")["reply_s"]
        restart = _restart_to_first_result(k)
    finally:
        k.shutdown()
    return {"import_s": imported, "reset_s": reset, "restart_s": restart}


def _tree(pid: int) -> list[int]:
    import psutil

    try:
        proc = psutil.Process(pid)
        return [pid] + [c.pid for c in proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _memory_kib(pid: int) -> dict[str, int]:
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and parts[2] == "kB":
                fields[parts[0].rstrip(":")] = int(parts[1])
    return {
        "pss": fields.get("Pss", 0),
        "rss": fields.get("Rss", 0),
        "uss": fields.get("Private_Clean", 0) + fields.get("Private_Dirty", 0),
    }


def density(kernel: str, n: int, base: Path, common: dict[str, str], settle_s: float = 3.0) -> dict[str, Any]:
    kernels = [_fresh(kernel, base, common, f"density-{kernel}-{i}") for i in range(n)]
    try:
        for k in kernels:
            k.start()
            k.run_cell(IMPORT_CELL)
        time.sleep(settle_s)  # idle: background checkpoints done, nothing running
        totals = {"pss": 0, "rss": 0, "uss": 0}
        for k in kernels:
            for pid in _tree(k.km.provisioner.process.pid):
                for key, value in _memory_kib(pid).items():
                    totals[key] += value
    finally:
        for k in kernels:
            try:
                k.shutdown()
            except Exception as err:  # one that will not stop must not hide the figure
                log(f"density: {kernel} shutdown: {err}")
    return {key: value / 1024 for key, value in totals.items()}  # MiB


def cold_start(base: Path, common: dict[str, str]) -> dict[str, float]:
    """wasm-python on an empty cache: start -> first `1+1` result (the baseline
    compile, IPython staged, a plain boot), then, untimed, the background warm-up to
    its end, so it does not weigh on the figures after it."""
    cache = base / "cold-cache"
    env = {**common, "WASM_KERNEL_CACHE_DIR": str(cache)}
    k = _fresh(WASM, base, env, "cold")
    try:
        timing = k.start()
    finally:
        k.shutdown()
    deadline = time.monotonic() + 600
    images = cache / "images"
    while not any(images.glob("[0-9a-f]*/image.json")) and time.monotonic() < deadline:
        time.sleep(2)
    timing["warmup_done_s"] = time.monotonic() - deadline + 600
    return timing


def run_image(rounds: int = 5, density_kernels: int = 20, cold: bool = True) -> tuple[list[Row], dict[str, Any]]:
    from wasm_kernel.runtime.provisioning import prepare_warm_image
    from wasm_kernel.runtime.warm_image import DEFAULT_PRELOAD

    prepare_warm_image(DEFAULT_PRELOAD)  # built once, untimed: the figures are for a warm cache
    base = Path(tempfile.mkdtemp(prefix="wk-bench-image-"))
    common = kernel_env(base)
    raw: dict[str, Any] = {"rounds": [], "density": {}}
    for rnd in range(rounds + 1):  # round 0: warm-up
        order = KERNELS if rnd % 2 == 0 else KERNELS[::-1]
        entry: dict[str, Any] = {"round": rnd, "warmup": rnd == 0}
        for kernel in order:
            entry[kernel] = one_round(kernel, base, common, f"r{rnd}-{kernel}")
        raw["rounds"].append(entry)
        log(f"image round {rnd}: import native {entry[NATIVE]['import_s']:.3f} s, wasm {entry[WASM]['import_s']:.3f} s; "
            f"restart native {entry[NATIVE]['restart_s']:.3f} s, wasm {entry[WASM]['restart_s']:.3f} s")
    counted = [e for e in raw["rounds"] if not e["warmup"]]

    def med(kernel: str, key: str) -> float:
        return median([e[kernel][key] for e in counted])

    rows = [
        Row("image", f"first cell `{IMPORT_CELL}`", "s", med(WASM, "import_s"), med(NATIVE, "import_s"),
            TARGET_RATIO, "ratio"),
        Row("image", "`%reset -f` then `1+1`", "s", med(WASM, "reset_s"), med(NATIVE, "reset_s"), TARGET_RATIO, "ratio"),
        Row("image", "kernel restart -> first `1+1` result", "s", med(WASM, "restart_s"), med(NATIVE, "restart_s"),
            TARGET_RATIO, "ratio"),
    ]
    if cold:
        log("cold start: wasm-python on an empty cache (then waiting, untimed, for its background warm-up)")
        raw["cold"] = cold_start(base, common)
        rows.append(Row("image", "cold first start, empty cache: start -> first `1+1` result", "s",
                        raw["cold"]["first_result_s"], None, COLD_TARGET_S, "guest",
                        note="baseline compiler; the optimized module and the image follow in the background",
                        extra={"kernel_info_s": raw["cold"]["kernel_info_s"], "warmup_done_s": raw["cold"]["warmup_done_s"]}))
    if density_kernels:
        for kernel in (NATIVE, WASM):
            log(f"density: {density_kernels} {kernel} kernels, each importing numpy, pandas, matplotlib")
            raw["density"][kernel] = density(kernel, density_kernels, base, common)
        d = raw["density"]
        rows.append(Row("image", f"{density_kernels} idle kernels after the import: summed PSS", "MiB",
                        d[WASM]["pss"], d[NATIVE]["pss"], TARGET_RATIO, "ratio",
                        extra={"rss_mib": {k: d[k]["rss"] for k in d}, "uss_mib": {k: d[k]["uss"] for k in d}}))
    raw["scratch"] = str(base)
    return rows, raw
