"""JupyterLab's debugger on wasm-python, with native ipykernel (debugpy) as the oracle.

One DAP sequence, as JupyterLab's debugger sends it, runs against both kernels in
the same test, and the replies are compared field by field after normalising what
legitimately differs: seq numbers, the numbers debugpy and the guest give frames
and variables (compared by the order they appear in), and each kernel's own
temporary folder in the cell's path (ipykernel's pid, the guest's). Then what the
oracle cannot show: breakpoints in a notebook's file, conditions, hit counts, log
points, stepping in and out, the exception filters, an interrupt while stopped.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.debug_client import DebugClient
from support.kernel_client import RunningKernel, native_and_wasm

pytestmark = pytest.mark.slow  # native ipykernel with debugpy and wasm-python side by side

CELL = "a = 3\nb = [a, {'k': 'v'}]\nc = a + 1\nprint(c)\n"


@pytest.fixture
def kernels(tmp_path: Path) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    with native_and_wasm(tmp_path) as both:
        yield both


def sequence(kernel: RunningKernel) -> dict[str, Any]:
    """initialize, attach, debugInfo, dumpCell, a breakpoint at line 2, the cell run
    to it, stackTrace, scopes, variables, evaluate in the frame, next, continue, the
    variable explorer, disconnect."""
    dc = DebugClient(kernel.kc)
    out = dc.start()
    out["dumpCell"] = dump = dc.request("dumpCell", code=CELL)
    path = dump["body"]["sourcePath"]
    out["setBreakpoints"] = dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 2}],
                                       sourceModified=False)
    out["debugInfo with a breakpoint"] = dc.request("debugInfo")
    out["configurationDone"] = dc.request("configurationDone")
    msg_id = dc.execute(CELL)
    out["stopped"] = dc.wait_event("stopped")
    out["debugInfo stopped"] = dc.request("debugInfo")
    out["stackTrace"] = trace = dc.request("stackTrace", threadId=1)
    frame = trace["body"]["stackFrames"][0]["id"]
    out["scopes"] = scopes = dc.request("scopes", frameId=frame)
    out["variables"] = dc.request("variables", variablesReference=scopes["body"]["scopes"][0]["variablesReference"])
    out["evaluate"] = dc.request("evaluate", expression="a * 10", frameId=frame, context="watch")
    seen = len(dc.events)
    out["next"] = dc.request("next", threadId=1)
    out["stopped after next"] = dc.wait_event("stopped", after=seen)
    out["continued"] = dc.wait_event("continued", after=seen)
    out["stackTrace after next"] = dc.request("stackTrace", threadId=1)
    seen = len(dc.events)
    out["continue"] = dc.request("continue", threadId=1)
    out["continued after continue"] = dc.wait_event("continued", after=seen)
    out["execute_reply"] = dc.wait_reply(msg_id)["status"]
    out["inspectVariables"] = dc.request("inspectVariables")
    out["richInspectVariables"] = dc.request("richInspectVariables", variableName="b")["body"]
    out["disconnect"] = dc.request("disconnect", restart=False, terminateDebuggee=True)
    out["debugInfo after disconnect"] = dc.request("debugInfo")
    return out


class Normaliser:
    """Numbers given by each debugger, by order of appearance; the kernel's own temp folder."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.numbers: dict[int, str] = {}

    def __call__(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            if {"id", "name", "line", "source"} <= value.keys() and isinstance(value["id"], int):
                # A stack frame's id is an opaque handle. debugpy's is the frame object's
                # address: after `next` IPython runs the cell's next statement in a new
                # frame, whose address CPython may or may not reuse, so the oracle's id
                # repeats or not from run to run. Only that it is a number is compared.
                value = {**value, "id": "#frame"}
            return {k: self(v, k) for k, v in value.items() if k != "seq"}
        if isinstance(value, list):
            return [self(v, key) for v in value]
        if isinstance(value, str):
            return value.replace(self.prefix, "TMP/")
        if key in ("id", "variablesReference") and isinstance(value, int) and value and key != "line":
            return self.numbers.setdefault(value, f"#{len(self.numbers)}")
        return value


def test_one_debug_sequence_answers_as_ipykernel_answers_it(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    native, wasm = kernels
    for k in (native, wasm):
        info = k.request("kernel_info")["content"]
        assert "debugger" in info["supported_features"], info
    oracle, got = sequence(native), sequence(wasm)
    oracle_caps, got_caps = oracle.pop("initialize"), got.pop("initialize")
    assert got_caps["success"] and oracle_caps["success"]
    # Every capability we declare, debugpy declares the same (it has more: completions, goto).
    assert {k: v for k, v in got_caps["body"].items() if k != "exceptionBreakpointFilters"}.items() \
        <= oracle_caps["body"].items()
    assert got_caps["body"]["exceptionBreakpointFilters"] == oracle_caps["body"]["exceptionBreakpointFilters"][:2]
    # ipykernel counts its own helper threads as stopped too (its Debugger's
    # forbid_list misses one); the guest has one thread, the one that stopped.
    oracle_stopped = oracle["debugInfo stopped"]["body"].pop("stoppedThreads")
    assert got["debugInfo stopped"]["body"].pop("stoppedThreads") == [1] and 1 in oracle_stopped
    want = Normaliser(oracle["debugInfo"]["body"]["tmpFilePrefix"])(oracle)
    have = Normaliser(got["debugInfo"]["body"]["tmpFilePrefix"])(got)
    assert got["debugInfo"]["body"]["tmpFilePrefix"] == "/tmp/ipykernel_42/"  # a guest path, never the host's
    for step in want:
        assert have[step] == want[step], f"{step}: wasm-python {have[step]} != ipykernel {want[step]}"


@pytest.fixture
def wasm(tmp_path: Path) -> Iterator[RunningKernel]:
    kernel = RunningKernel(tmp_path / "wasm")
    try:
        yield kernel
    finally:
        kernel.shutdown()


def started(kernel: RunningKernel) -> DebugClient:
    dc = DebugClient(kernel.kc)
    dc.start()
    dc.request("configurationDone")
    return dc


def stop_at(dc: DebugClient, code: str, path: str, lines: list[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    assert dc.request("setBreakpoints", source={"path": path}, breakpoints=lines)["success"]
    seen = len(dc.events)
    msg_id = dc.execute(code)
    return msg_id, dc.wait_event("stopped", after=seen)


TWO_LINES = "x = 1\ny = 2\n"


def stopped_at_line_2(dc: DebugClient) -> tuple[str, str]:
    """TWO_LINES run and stopped at its line 2: the request's msg_id and the cell's path."""
    path = dc.request("dumpCell", code=TWO_LINES)["body"]["sourcePath"]
    msg_id, _ = stop_at(dc, TWO_LINES, path, [{"line": 2}])
    return msg_id, path


@pytest.fixture
def deadline_2s(tmp_path: Path) -> Iterator[RunningKernel]:
    kernel = RunningKernel(tmp_path / "wasm", argv=["--WasmKernel.deadline=2"])
    try:
        yield kernel
    finally:
        kernel.shutdown()


def frames(dc: DebugClient) -> list[tuple[str, int, str]]:
    trace = dc.request("stackTrace", threadId=1)["body"]["stackFrames"]
    return [(f["name"], f["line"], re.sub(r"\d+\.py$", "CELL.py", f["source"]["path"])) for f in trace]


def test_a_breakpoint_in_a_workspace_file_stops_in_it_and_steps_out_to_the_cell(wasm: RunningKernel) -> None:
    assert wasm.execute("open('helper.py', 'w').write('def double(n):\\n    m = n * 2\\n    return m\\n')").status == "ok"
    dc = started(wasm)
    code = "import helper\nr = helper.double(21)\nprint(r)\n"
    msg_id, stopped = stop_at(dc, code, "/app/helper.py", [{"line": 2}])
    assert stopped["body"]["reason"] == "breakpoint"
    assert frames(dc) == [("double", 2, "/app/helper.py"), ("<module>", 2, "/tmp/ipykernel_42/CELL.py")]
    seen = len(dc.events)
    assert dc.request("stepOut", threadId=1)["success"]
    dc.wait_event("stopped", after=seen)
    assert frames(dc)[0][:2] in (("<module>", 2), ("<module>", 3))
    assert dc.request("continue", threadId=1)["success"]
    assert dc.wait_reply(msg_id)["status"] == "ok"


def test_conditions_hit_counts_and_log_points(wasm: RunningKernel) -> None:
    dc = started(wasm)
    code = "total = 0\nfor i in range(10):\n    total += i\nprint(total)\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    msg_id, _ = stop_at(dc, code, path, [{"line": 3, "condition": "i == 7"}])
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    assert dc.request("evaluate", expression="i", frameId=frame, context="watch")["body"]["result"] == "7"
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
    # A hit count: the third time the line runs.
    msg_id, _ = stop_at(dc, code, path, [{"line": 3, "hitCondition": "3"}])
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    assert dc.request("evaluate", expression="i", frameId=frame, context="watch")["body"]["result"] == "2"
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
    # A log point prints and does not stop.
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 3, "logMessage": "i is {i}"}])
    seen = len(dc.events)
    assert dc.wait_reply(dc.execute(code))["status"] == "ok"
    dc.drain(0.5)
    logged = [e["body"]["output"] for e in dc.events[seen:] if e.get("event") == "output"]
    assert logged == [f"i is {i}\n" for i in range(10)]
    assert not [e for e in dc.events[seen:] if e.get("event") == "stopped"]


def test_step_in_enters_a_function_and_nested_variables_page(wasm: RunningKernel) -> None:
    dc = started(wasm)
    code = "def f(n):\n    data = {'xs': list(range(n))}\n    return data\nout = f(50)\nprint(len(out))\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    msg_id, _ = stop_at(dc, code, path, [{"line": 4}])
    seen = len(dc.events)
    dc.request("stepIn", threadId=1)
    dc.wait_event("stopped", after=seen)
    assert [f[:2] for f in frames(dc)] == [("f", 2), ("<module>", 4)]
    seen = len(dc.events)
    dc.request("next", threadId=1)
    dc.wait_event("stopped", after=seen)
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    local = dc.request("scopes", frameId=frame)["body"]["scopes"][0]["variablesReference"]
    names = {v["name"]: v for v in dc.request("variables", variablesReference=local)["body"]["variables"]}
    assert names["n"]["value"] == "50" and names["data"]["type"] == "dict"
    xs = {v["name"]: v for v in dc.request("variables", variablesReference=names["data"]["variablesReference"])
          ["body"]["variables"]}["'xs'"]
    page = dc.request("variables", variablesReference=xs["variablesReference"], start=10, count=5)["body"]["variables"]
    assert [(v["name"], v["value"]) for v in page] == [(str(i), str(i)) for i in range(10, 15)]
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"


@pytest.mark.parametrize(("filters", "code", "where", "ename"), [
    # "raised": where the exception is raised, inside the function.
    ("raised", "def g():\n    return {}['missing']\ng()\n", ("g", 2), "KeyError"),
    # "uncaught": one caught inside goes by; one leaving the cell stops in the cell's frame.
    ("uncaught", "try:\n    int('x')\nexcept ValueError:\n    pass\nraise RuntimeError('out')\n",
     ("<module>", 5), "RuntimeError"),
])
def test_exception_filters_stop_where_they_say(wasm: RunningKernel, filters: str, code: str,
                                                where: tuple[str, int], ename: str) -> None:
    dc = started(wasm)
    assert dc.request("setExceptionBreakpoints", filters=[filters])["success"]
    seen = len(dc.events)
    msg_id = dc.execute(code)
    stopped = dc.wait_event("stopped", after=seen)
    assert stopped["body"]["reason"] == "exception" and ename in stopped["body"]["description"]
    assert frames(dc)[0][:2] == where
    dc.request("setExceptionBreakpoints", filters=[])
    dc.request("continue", threadId=1)
    reply = dc.wait_reply(msg_id)
    assert reply["status"] == "error" and reply["ename"] == ename


def test_an_interrupt_while_stopped_ends_the_cell_and_the_kernel_goes_on(wasm: RunningKernel) -> None:
    dc = started(wasm)
    msg_id, path = stopped_at_line_2(dc)
    assert dc.request("debugInfo")["body"]["stoppedThreads"] == [1]
    wasm.km.interrupt_kernel()
    reply = dc.wait_reply(msg_id)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert dc.request("debugInfo")["body"]["stoppedThreads"] == []
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    assert wasm.execute("print(x)").stream() == "1\n"


def test_time_stopped_at_a_breakpoint_is_not_the_cells_time(deadline_2s: RunningKernel) -> None:
    """As with input(): the deadline stands still while the debugger is stopped."""
    kernel = deadline_2s
    dc = started(kernel)
    msg_id, path = stopped_at_line_2(dc)
    time.sleep(4)  # twice the deadline, stopped
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
    # And a cell that runs past it is still stopped by it.
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    assert kernel.execute("while True: pass").error["ename"] != "KeyboardInterrupt"


def test_a_shutdown_while_stopped_ends_the_kernel_by_itself(wasm: RunningKernel) -> None:
    dc = started(wasm)
    stopped_at_line_2(dc)
    wasm.kc.shutdown()
    process = wasm.km.provisioner.process  # type: ignore[union-attr]
    assert process.wait(timeout=60) == 0, wasm.log()


def test_a_restart_while_stopped_gives_a_fresh_interpreter_on_the_same_files(wasm: RunningKernel) -> None:
    assert wasm.execute("open('kept.txt', 'w').write('here')").status == "ok"
    dc = started(wasm)
    stopped_at_line_2(dc)
    wasm.restart()
    assert wasm.execute("print(open('kept.txt').read())").stream() == "here\n"
    assert wasm.execute("x").error["ename"] == "NameError"


def test_pause_stops_a_running_cell_and_a_breakpoint_set_while_it_runs_is_hit(wasm: RunningKernel) -> None:
    """A request for a cell that runs reaches the guest at its next safe point."""
    dc = started(wasm)
    code = "i = 0\nwhile True:\n    i += 1\n    j = i * 2\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    msg_id = dc.execute(code)
    time.sleep(1)  # the loop runs
    seen = len(dc.events)
    assert dc.request("pause", threadId=1)["success"]
    assert dc.wait_event("stopped", after=seen)["body"]["reason"] == "pause"
    assert frames(dc)[0][0] == "<module>" and frames(dc)[0][1] in (2, 3, 4)
    dc.request("continue", threadId=1)
    time.sleep(0.5)  # running again
    seen = len(dc.events)
    assert dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": 4}])["success"]
    assert dc.wait_event("stopped", after=seen)["body"]["reason"] == "breakpoint"
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    assert int(dc.request("evaluate", expression="i", frameId=frame, context="watch")["body"]["result"]) > 0
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    time.sleep(0.2)
    wasm.km.interrupt_kernel()
    reply = dc.wait_reply(msg_id)
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt"
    assert wasm.execute("print(i > 0)").stream() == "True\n"


def test_library_code_stops_only_with_just_my_code_off(tmp_path: Path) -> None:
    # A library with its sources in the guest (the stdlib zip has bytecode only).
    where = "import dis\nfrom traitlets.utils.importstring import import_item as f\n" \
            "line = sorted({l for _, l in dis.findlinestarts(f.__code__) if l})[1]\nprint(f.__code__.co_filename, line)"
    for just_my_code in (True, False):
        kernel = RunningKernel(tmp_path / f"jmc-{just_my_code}", argv=[f"--WasmKernel.debug_just_my_code={just_my_code}"])
        try:
            path, line = kernel.execute(where).stream().split()
            dc = started(kernel)
            assert dc.request("setBreakpoints", source={"path": path}, breakpoints=[{"line": int(line)}])["success"]
            seen = len(dc.events)
            msg_id = dc.execute("from traitlets.utils.importstring import import_item\nout = import_item('json')\n")
            if just_my_code:
                assert dc.wait_reply(msg_id)["status"] == "ok"
                dc.drain(0.3)
                assert not [e for e in dc.events[seen:] if e.get("event") == "stopped"]
                continue
            dc.wait_event("stopped", after=seen)
            assert [f[:2] for f in frames(dc)] == [("import_item", int(line)), ("<module>", 2)]
            assert dc.request("source", source={"path": path})["body"]["content"].count("def import_item(") == 1
            dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
            dc.request("continue", threadId=1)
            assert dc.wait_reply(msg_id)["status"] == "ok"
        finally:
            kernel.shutdown()


def test_an_evaluate_stopped_by_a_limit_still_gets_its_reply(deadline_2s: RunningKernel) -> None:
    """The clock stands still while stopped, not while an evaluate runs: a runaway one
    is stopped with its cell, and its request, and the debugger, still get answers."""
    kernel = deadline_2s
    dc = started(kernel)
    msg_id, path = stopped_at_line_2(dc)
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    runaway = dc.request("evaluate", expression="[0 for _ in iter(int, 1)]", frameId=frame, context="repl")
    assert runaway["success"] is False and "\n" not in runaway["message"], runaway
    assert dc.wait_reply(msg_id)["status"] == "error"
    assert dc.request("debugInfo")["body"]["stoppedThreads"] == []
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    assert kernel.execute("print('after')").stream() == "after\n"


def test_a_stopped_frames_variable_renders_rich_and_copies_to_globals(wasm: RunningKernel) -> None:
    dc = started(wasm)
    code = "def f():\n    secret = [1, 2]\n    return len(secret)\nf()\n"
    path = dc.request("dumpCell", code=code)["body"]["sourcePath"]
    msg_id, _ = stop_at(dc, code, path, [{"line": 3}])
    frame = dc.request("stackTrace", threadId=1)["body"]["stackFrames"][0]["id"]
    rich = dc.request("richInspectVariables", variableName="secret", frameId=frame)
    assert rich["success"] and rich["body"]["data"] == {"text/plain": "[1, 2]"}, rich
    copied = dc.request("copyToGlobals", srcVariableName="secret", dstVariableName="copied", srcFrameId=frame)
    assert copied["success"], copied
    dc.request("setBreakpoints", source={"path": path}, breakpoints=[])
    dc.request("continue", threadId=1)
    assert dc.wait_reply(msg_id)["status"] == "ok"
    assert wasm.execute("print(copied)").stream() == "[1, 2]\n"
