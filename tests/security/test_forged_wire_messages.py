"""Messages a cell forges on the guest's door (_wasm_kernel_guest.call) to pass for
the host's own machinery: a query's answer sent from a cell is refused, and the next
query's answer is the guest's real one; a turn's request (the guest function the host
calls) is handed over once, to the guest's own serve(), and only for a name in the
guest's fixed table."""

from __future__ import annotations

import json

import pytest

from wasm_kernel.core.sandbox import PythonSandbox

FORGE = """
import _wasm_kernel_guest
answer = _wasm_kernel_guest.call({"op": "query_result", "value": {"status": "complete", "indent": "FORGED"}})
print(answer)
"""


def test_a_cell_cannot_send_a_query_answer(sandbox: PythonSandbox) -> None:
    r = sandbox.execute(FORGE)
    assert r.success, r.error
    assert "query_result outside a query" in r.stdout
    # The answer the kernel gets for its next question is the guest's own.
    assert sandbox.query("is_complete", code="x = (") == {"status": "incomplete", "indent": ""}


def test_an_answer_forged_inside_a_query_is_checked_like_any_other(sandbox: PythonSandbox) -> None:
    # User code that runs during a query (a __dir__ here) may send a query_result of
    # its own; the guest's real answer comes after it and is the one used, and a
    # malformed value never reaches the kernel unchecked.
    sandbox.execute(
        "import _wasm_kernel_guest\n"
        "class Sneaky:\n"
        "    def __dir__(self):\n"
        "        _wasm_kernel_guest.call({'op': 'query_result', 'value': {'matches': 'not a list'}})\n"
        "        return ['real_attribute']\n"
        "s = Sneaky()\n"
    )
    reply = sandbox.query("complete", code="s.real", cursor_pos=6)
    assert reply["matches"] == ["s.real_attribute"] or "real_attribute" in " ".join(reply["matches"])


# --- the turn's request: the host calls named guest functions, once per turn --------


def test_a_cell_asking_for_a_request_is_refused(sandbox: PythonSandbox) -> None:
    # The turn's request was taken by the guest's own serve() before the cell ran.
    r = sandbox.execute("import _wasm_kernel_guest as g\nprint(g.call({'op': 'request'}))\n"
                        "print(g.call({'op': 'request'})['error'])")
    assert r.success, r.error
    assert r.stdout.count("no_request") == 2 and "'name'" not in r.stdout
    assert sandbox.execute("1 + 1").outputs[0].data == {"text/plain": "2"}  # type: ignore[union-attr]


def test_a_cell_serving_a_second_request_only_fails_itself(sandbox: PythonSandbox) -> None:
    r = sandbox.execute("x = 1\nimport _wasm_kernel_serve\n_wasm_kernel_serve.serve()")
    assert not r.success and r.error is not None and r.error.ename == "RuntimeError"
    assert "no request" in r.error.evalue
    assert sandbox.query("is_complete", code="x = (") == {"status": "incomplete", "indent": ""}
    assert sandbox.execute("print(x)").stdout == "1\n"


def test_a_source_turn_has_no_request_to_take(sandbox: PythonSandbox) -> None:
    from wasm_kernel.runtime.guest_config import TurnLimits

    source = ("import _wasm_kernel_guest as g\n"
              "a = g.call({'op': 'request'})\n"
              "g.call({'op': 'result', 'status': 'ok' if a.get('error') == 'no_request' else 'error'})\n")
    assert sandbox._guest.run_source(source, limits=TurnLimits(deadline_seconds=30)).status == "ok"


def test_a_name_outside_the_guests_table_is_refused_before_anything_runs(sandbox: PythonSandbox) -> None:
    from wasm_kernel.runtime.guest_config import TurnLimits

    sandbox.execute("runs = 0")
    for name in ("exec", "eval", "_run", "serve", "run_source", ""):
        with pytest.raises(ValueError, match="unknown guest function"):
            sandbox._guest._call_guest(name, {"code": "runs += 1"}, limits=TurnLimits())
    assert sandbox.execute("print(runs)").stdout == "0\n"


def test_the_door_answers_the_request_once_and_never_outside_a_turn(sandbox: PythonSandbox) -> None:
    from wasm_kernel.runtime.host_door import NO_REQUEST, Turn, guest_request
    from wasm_kernel.runtime.output import TurnOutput

    door = sandbox._guest.door  # between turns: the guest's own door, no turn on it
    ask = json.dumps({"op": "request"}).encode()
    assert json.loads(door._answer(ask)) == {"ok": False, "error": "no turn"}
    request = guest_request("query", {"op": "is_complete", "args": {"code": "__import__('os')"}})
    door.turn = Turn(TurnOutput(None, None, None), None, None, None, True, request=request)
    try:
        assert json.loads(door._answer(ask)) == {
            "ok": True, "name": "query", "args": {"op": "is_complete", "args": {"code": "__import__('os')"}}}
        assert door._answer(ask) == NO_REQUEST
        door.turn = Turn(TurnOutput(None, None, None), None, None, None, True)  # a turn without one
        assert door._answer(ask) == NO_REQUEST
    finally:
        door.turn = None
    assert sandbox.execute("print(1)").stdout == "1\n"
    with pytest.raises(ValueError, match="unknown guest function"):
        guest_request("__import__", {})
