"""A subshell's work runs inside the running cell (runtime/nested_work.py): the door
messages that take it and end it are checked like every other. A cell that forges
them gets nothing to run and ends nothing, and its own output stays its own."""

from __future__ import annotations

from wasm_kernel.core.sandbox import PythonSandbox

FORGE = """
import _wasm_kernel_guest
print(_wasm_kernel_guest.call({"op": "work_take"}))
print(_wasm_kernel_guest.call({"op": "work_done"}))
print("still mine")
"""


def test_forged_work_messages_take_nothing_and_end_nothing(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(FORGE)
    assert r.success, r.error
    lines = r.stdout.splitlines()
    assert lines[0] == "{'ok': True}"  # no work is waiting: nothing to run
    assert "no subshell work is running" in lines[1]
    assert lines[2] == "still mine"
    assert sandbox.execute_inside("1 + 1") is None  # no cell runs: the caller runs it as a turn
