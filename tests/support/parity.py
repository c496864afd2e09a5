"""What a frontend shows of a cell, comparable across kernels: the messages of one
execution normalised for what legitimately differs between native ipykernel and
wasm-python (ANSI colours, object addresses, timings, each kernel's file paths, the
file-changes display wasm-python adds). Used by tests/kernel/test_ipykernel_parity.py
and tests/e2e/test_course.py."""

from __future__ import annotations

import re
from typing import Any

from support.kernel_client import Execution

FILE_CHANGES = "application/vnd.wasm-kernel.file-changes+json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
ADDRESS = re.compile(r"0x[0-9a-f]{4,}")
# %timeit prints 3 significant digits, so a standard deviation near 1000 ns reads `1e+03 ns`.
DURATION = re.compile(r"\d+(?:\.\d+)?(?:e[+-]?\d+)? ?(?:ns|µs|μs|us|ms|s)\b")
LOOPS = re.compile(r"\d[\d,]* loops?")


# %timeit's note on variance comes and goes with the machine's load, on either kernel.
SLOWEST_RUN = re.compile(r"The slowest run took [^\n]*\n(?:[^\n]*intermediate result is being cached\.\n)?")


def normalise_text(text: str) -> str:
    text = SLOWEST_RUN.sub("", ANSI.sub("", text))
    text = ADDRESS.sub("0x…", text)
    text = LOOPS.sub("N loops", DURATION.sub("T", text))
    return text


def normalise(run: Execution, compare: str) -> list[Any]:
    """The messages a frontend would show, in order, as comparable values."""
    shown: list[Any] = []
    for message in run.outputs:
        kind, content = message["msg_type"], message["content"]
        if kind == "stream":
            text = normalise_text(content["text"]) if compare == "exact" else ""
            if shown and shown[-1][0] == "stream" and shown[-1][1] == content["name"]:
                shown[-1] = ("stream", content["name"], shown[-1][2] + text)
            else:
                shown.append(("stream", content["name"], text))
        elif kind in ("display_data", "execute_result", "update_display_data"):
            data = content["data"]
            if FILE_CHANGES in data:
                continue  # wasm-python's own addition: the files the cell changed
            if compare == "shape":
                shown.append((kind, sorted(data)))
            else:
                plain = normalise_text(data.get("text/plain", ""))
                rich = {k: v for k, v in data.items() if k not in ("text/plain", "image/png")}
                shown.append((kind, plain, rich, "image/png" in data, content.get("transient", {})))
        elif kind == "error":
            last = normalise_text(content["traceback"][-1]) if content["traceback"] else ""
            shown.append(("error", content["ename"], content["evalue"], last))
        elif kind == "clear_output":
            shown.append(("clear_output", content["wait"]))
    reply = run.reply["content"]
    payload = [(p["source"], normalise_text(p.get("text", ""))) for p in reply.get("payload", [])]
    status = (reply["status"], reply.get("ename"), payload)
    return [*[_paths(item) for item in shown], status]


def _paths(item: Any) -> Any:
    """Host and guest paths are each kernel's own: they are replaced by a marker
    (a cell's file name is a hash of its code, by each kernel's own function)."""
    text = repr(item)
    if "/" not in text:
        return item
    text = re.sub(r"ipykernel_\d+/\d+\.py", "ipykernel_PID/CELL.py", text)
    return re.sub(r"(/[\w.\-]+)+/", "<path>/", text)
