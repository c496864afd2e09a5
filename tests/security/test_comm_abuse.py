"""Comms as an attacker uses them: floods, huge and deep messages, forged door
messages from the guest; unknown ids, huge and malformed messages from a client.

Each gets a clear error in the cell or a drop with a notice (the output cap's
line, the kernel's log), never a host exception, and the kernel, the workspace and
the metadata come through intact (the four invariants of harness.assert_safe).
"""

from __future__ import annotations

import pytest

from support.security_harness import Target, raw_request

pytestmark = pytest.mark.slow  # a kernel of its own for a few vectors

GUEST_REFUSED = {
    "nested too deep": "from comm import create_comm\nd = x = {}\nfor _ in range(5000):\n    x['a'] = x = {}\n"
                       "create_comm(target_name='deep', data=d)",
    "buffers past the door": "from comm import create_comm\nc = create_comm(target_name='big')\n"
                             "c.send({}, buffers=[b'x' * (70 << 20)])",
    "forged: unknown type": "import _host\n_host.call(b'{\"op\": \"comm\", \"msg_type\": \"comm_steal\", "
                            "\"content\": {\"comm_id\": \"x\"}}')\nraise ValueError('refused: ' + "
                            "__import__('json').loads(_host.call(b'{\"op\": \"comm\", \"msg_type\": \"comm_steal\", "
                            "\"content\": {\"comm_id\": \"x\"}}'))['message'])",
    "forged: no comm id": "import _wasm_kernel_guest as g\na = g.call({'op': 'comm', 'msg_type': 'comm_msg', "
                          "'content': {'data': {}}})\nraise ValueError(a['message'])",
    "forged: bad buffers": "import _wasm_kernel_guest as g\na = g.call({'op': 'comm', 'msg_type': 'comm_msg', "
                           "'content': {'comm_id': 'c', 'data': {}}, 'buffers': ['not base64!']})\n"
                           "raise ValueError(a['message'])",
    "forged: huge comm id": "import _wasm_kernel_guest as g\na = g.call({'op': 'comm', 'msg_type': 'comm_open', "
                            "'content': {'comm_id': 'i' * 100000, 'target_name': 't', 'data': {}}})\n"
                            "raise ValueError(a['message'])",
}


@pytest.mark.parametrize("code", GUEST_REFUSED.values(), ids=GUEST_REFUSED.keys())
def test_a_comm_message_the_host_refuses_is_one_clear_error_in_the_cell(target: Target, code: str) -> None:
    run = target.run(code)
    assert run.status == "error", target.shown_text(run)[:300]
    # The host's refusal is a ValueError; JSON's own guard against deep data in the
    # guest is a RecursionError, raised before anything leaves.
    assert run.reply["content"]["ename"] in ("ValueError", "RecursionError"), run.reply["content"]
    assert not [m for m in run.outputs if m["msg_type"] == "comm_open" and m["content"]["target_name"] == "deep"]
    target.assert_safe(run)


def test_a_flood_of_comm_messages_stops_at_the_output_cap_with_a_notice(target: Target) -> None:
    assert target.run("%limits display=1MB").status == "ok"
    try:
        run = target.run("from comm import create_comm\nflood = create_comm(target_name='flood')\n"
                         "for i in range(200_000):\n    flood.send({'i': i, 'pad': 'x' * 100})\n'done'")
        assert run.status == "ok", run.reply
        sent = [m for m in run.outputs if m["msg_type"] == "comm_msg"]
        assert 0 < len(sent) < 20_000  # ~150 bytes each under a 1 MB cap
        assert "output cap" in run.stream("stderr") or "display" in run.stream("stderr"), run.stream("stderr")[:300]
        assert run.of_type("execute_result") == []  # past the cap the result is dropped too, as any rich output
        target.assert_safe(run)
    finally:
        target.run("%limits display=32MiB")


CLIENT_DROPPED = {
    "huge data": {"comm_id": "c", "data": {"x": "y" * (20 << 20)}},
    "no comm id": {"data": {}},
    "comm id not a string": {"comm_id": {"nested": ["list"]}, "data": {}},
    "comm id too long": {"comm_id": "c" * 10_000, "data": {}},
}


@pytest.mark.parametrize("content", CLIENT_DROPPED.values(), ids=CLIENT_DROPPED.keys())
def test_a_client_comm_message_the_kernel_cannot_take_is_dropped_and_logged(target: Target, content: dict) -> None:
    kc = target.kernel.kc
    kc.shell_channel.send(kc.session.msg("comm_msg", content))
    assert raw_request(target, "kernel_info_request", {})["content"]["status"] == "ok"
    target.assert_safe()
    assert "dropped a comm_msg from a client" in target.kernel.log()


def test_a_handler_that_raises_is_logged_in_the_guest_and_the_comm_stays_usable(target: Target) -> None:
    run = target.run("from comm import create_comm\nboom = create_comm(target_name='boom')\nhits = []\n"
                     "def handler(msg):\n    hits.append(1)\n    raise RuntimeError('handler failed')\n"
                     "boom.on_msg(handler)\nboom.comm_id")
    comm_id = run.of_type("execute_result")[0]["data"]["text/plain"].strip("'")
    kc = target.kernel.kc
    for _ in range(2):
        kc.shell_channel.send(kc.session.msg("comm_msg", {"comm_id": comm_id, "data": {}}))
    assert raw_request(target, "kernel_info_request", {})["content"]["status"] == "ok"
    shown = target.run("len(hits)")
    assert shown.of_type("execute_result")[0]["data"]["text/plain"] == "2"
    target.assert_safe(shown)
