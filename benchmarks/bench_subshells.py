"""Area subshells: a kernel subshell's reply time while the main shell's cell is busy,
on wasm-python (run inside the cell at its next safe point) beside native ipykernel (a
thread of its own), in one run; and the same with the main shell idle.

The main cell computes in a pure-Python loop until a flag is set; meanwhile a
subshell sends `1 + 1` `cells` times, one after another, and the figure is each
request's median request -> reply; a last subshell cell sets the flag. The order of
the kernels alternates round by round, each round on fresh kernels.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))  # the kernel client

from _common import Row, log, median  # noqa: E402
from support.kernel_client import TIMEOUT, RunningKernel  # noqa: E402

BUSY = "stop = False\nprint('busy', flush=True)\nn = 0\nwhile not stop:\n    n += 1\n"


def _send(k: RunningKernel, code: str, subshell: str | None) -> str:
    msg = k.kc.session.msg("execute_request", {"code": code, "silent": False, "store_history": True,
                                               "user_expressions": {}, "allow_stdin": False, "stop_on_error": True})
    if subshell is not None:
        msg["header"]["subshell_id"] = subshell
    k.kc.shell_channel.send(msg)
    return msg["header"]["msg_id"]


_early: dict[str, dict[str, Any]] = {}  # replies that came before they were waited for


def _reply(k: RunningKernel, msg_id: str) -> dict[str, Any]:
    if msg_id in _early:
        return _early.pop(msg_id)
    while True:
        reply = k.kc.shell_channel.get_msg(timeout=TIMEOUT)
        parent = reply["parent_header"].get("msg_id")
        if parent == msg_id:
            return reply
        _early[parent] = reply  # the main cell's, when it ends before its stopper's reply


def _subshell(k: RunningKernel) -> str:
    msg = k.kc.session.msg("create_subshell_request", {})
    k.kc.control_channel.send(msg)
    while True:
        reply = k.kc.control_channel.get_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") == msg["header"]["msg_id"]:
            return str(reply["content"]["subshell_id"])


def _replies(k: RunningKernel, sid: str, cells: int) -> list[float]:
    times = []
    for _ in range(cells):
        start = time.perf_counter()
        reply = _reply(k, _send(k, "1 + 1", sid))
        times.append(time.perf_counter() - start)
        assert reply["content"]["status"] == "ok", reply["content"]
    return times


def _wait_output(k: RunningKernel, msg_id: str, text: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        msg = k.kc.iopub_channel.get_msg(timeout=TIMEOUT)
        if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream" and text in msg["content"]["text"]:
            return
    raise TimeoutError(f"no {text!r} from the main cell")


def run_subshells(rounds: int = 3, cells: int = 20) -> tuple[list[Row], dict[str, Any]]:
    figures: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="wk-bench-subshells-") as tmp:
        for r in range(rounds):
            for name in (["wasm", "native"] if r % 2 == 0 else ["native", "wasm"]):
                kernel = RunningKernel(Path(tmp) / f"{name}-{r}",
                                       kernel_name="python3" if name == "native" else "wasm-python")
                try:
                    sid = _subshell(kernel)
                    _replies(kernel, sid, 3)  # warm
                    mine = figures.setdefault(name, {"idle": [], "busy": []})
                    mine["idle"].append(median(_replies(kernel, sid, cells)))
                    main = _send(kernel, BUSY, None)
                    _wait_output(kernel, main, "busy")
                    mine["busy"].append(median(_replies(kernel, sid, cells)))
                    _reply(kernel, _send(kernel, "stop = True", sid))
                    final = _reply(kernel, main)["content"]
                    assert final["status"] == "ok", final
                finally:
                    kernel.shutdown()
                log(f"subshells: round {r + 1} {name}: idle {1000 * mine['idle'][-1]:.2f} ms, "
                    f"busy {1000 * mine['busy'][-1]:.2f} ms")
    wasm, native = ({k: median(v) for k, v in figures[n].items()} for n in ("wasm", "native"))
    rows = [
        Row("subshells", "subshell 1+1 request -> reply, main shell busy", "ms", 1000 * wasm["busy"],
            1000 * native["busy"], note="native: ipykernel's subshell thread; here: inside the busy cell"),
        Row("subshells", "subshell 1+1 request -> reply, main shell idle", "ms", 1000 * wasm["idle"],
            1000 * native["idle"], note="native: ipykernel"),
    ]
    return rows, {"rounds": rounds, "cells": cells, "figures": figures}


if __name__ == "__main__":
    from _common import print_table

    rows, raw = run_subshells(rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 3)
    print_table(rows)
    print(json.dumps(raw))
