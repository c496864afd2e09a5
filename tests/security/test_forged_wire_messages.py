"""Messages a cell forges on the guest's door (_wasm_kernel_guest.call) to pass for
the host's own machinery: a query's answer sent from a cell is refused, and the next
query's answer is the guest's real one."""

from __future__ import annotations

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
