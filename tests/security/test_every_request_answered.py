"""Class 1: every request gets a reply, whatever the strings and whatever the shape.

Lone surrogates from the guest (reprs, names, completions, user_expressions,
inspection text) and from a client (code, patterns, ids), malformed and deeply
nested content, bad history arguments: each request is answered, by a result or by
an error reply in one line, and the kernel goes on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.security_harness import RawContent, Target, ascii_packer, raw_request

pytestmark = pytest.mark.slow  # a kernel of its own, and a request of hundreds of MB

SURROGATE_REPR = "class S:\n    def __repr__(self):\n        return 'x\\ud800y'\n"


# --- from the guest -----------------------------------------------------------------

GUEST_VECTORS = {
    "repr with a lone surrogate": SURROGATE_REPR + "S()",
    "display of it": SURROGATE_REPR + "display(S())",
    "html with one": "from IPython.display import HTML\nHTML('<b>\\udfff</b>')",
    "exception text": "raise ValueError('bad \\ud800 value')",
    "exception name": "E = type('E\\ud800', (Exception,), {})\nraise E('x')",
    "printed": "print('\\ud800')",
    "stderr": "import sys\nprint('\\udc80', file=sys.stderr)",
    "json bundle": "from IPython.display import JSON\nJSON({'\\ud800': ['\\udbff']})",
    "markdown": "from IPython.display import Markdown\nMarkdown('\\ud83d')",
    "display metadata": "display({'text/plain': 'x'}, raw=True, metadata={'k\\ud800': 1})",
    "deep json": "from IPython.display import JSON\nd = x = {}\nfor _ in range(5000):\n    x['a'] = x = {}\nJSON(d)",
    "cyclic json": "from IPython.display import JSON\nd = {}\nd['self'] = d\nJSON(d)",
    "huge display id": "display('x', display_id='i' * 100000)",
    "update without id": "import _wasm_kernel_guest as g\ng.call({'op': 'display', 'data': {'text/plain': 'x'}, 'update': True})",
    "forged message": "import _host\n_host.call(b'{\"op\": \"display\", \"data\": 5}')",
    "not json": "import _host\n_host.call(b'\\xff\\xfe not json')",
    "nested door message": "import _host\n_host.call(b'[' * 100000 + b']' * 100000)",
    "huge door message": "import _host\n_host.call(b' ' * (65 << 20))",
}


@pytest.mark.parametrize("name", sorted(GUEST_VECTORS))
def test_guest_strings_and_shapes_never_silence_a_reply(target: Target, name: str) -> None:
    run = target.run(GUEST_VECTORS[name])
    assert run.reply["content"]["status"] in ("ok", "error")
    target.assert_safe(run)


def test_surrogate_names_completions_inspection_and_expressions_are_answered(target: Target) -> None:
    target.run(SURROGATE_REPR + "globals()['s\\ud800x'] = S()\ns_doc = S()\nS.__doc__ = 'doc \\udfff'")
    for msg_type, content in (
        ("complete_request", {"code": "s", "cursor_pos": 1}),
        ("complete_request", {"code": "s_doc.", "cursor_pos": 6}),
        ("inspect_request", {"code": "s_doc", "cursor_pos": 5, "detail_level": 0}),
        ("inspect_request", {"code": "S", "cursor_pos": 1, "detail_level": 1}),
        ("is_complete_request", {"code": "x = '\ud800"}),
    ):
        reply = raw_request(target, msg_type, content)
        assert reply["content"]["status"] in ("ok", "error", "complete", "incomplete", "invalid", "unknown"), reply
    run = target.run("1", user_expressions={"a": "s_doc", "b": "'\\ud800'", "c": "1/0"})
    assert set(run.reply["content"]["user_expressions"]) == {"a", "b", "c"}
    target.assert_safe(run)


# --- from a client ------------------------------------------------------------------

CLIENT_VECTORS: list[tuple[str, Any]] = [
    ("execute_request", {"code": "x = '\ud800'\nx", "silent": False, "store_history": True, "user_expressions": {},
                         "allow_stdin": False}),
    ("execute_request", {"code": "1", "silent": False, "user_expressions": {"\udc80": "1", "k": "'\ud800'"}}),
    ("execute_request", {"code": "%files \ud800", "silent": False}),
    ("execute_request", {"code": "%cat \udfff", "silent": False}),
    ("execute_request", {"silent": False}),  # no code at all
    ("execute_request", {"code": 12345}),
    ("execute_request", {"code": ["not", "a", "string"]}),
    ("complete_request", {"code": "pri\ud800", "cursor_pos": 3}),
    ("complete_request", {"code": "x"}),  # no cursor
    ("complete_request", {"code": "x", "cursor_pos": -5}),
    ("complete_request", {"code": "x", "cursor_pos": 10**12}),
    ("inspect_request", {"code": "\udbff", "cursor_pos": 1}),
    ("inspect_request", {}),
    ("is_complete_request", {"code": None}),
    ("history_request", {"hist_access_type": "search", "pattern": "\ud800*", "raw": True, "output": False}),
    ("history_request", {"hist_access_type": "tail", "n": "ten", "raw": True, "output": False}),
    ("history_request", {"hist_access_type": "tail", "n": -3, "raw": True, "output": False}),
    ("history_request", {"hist_access_type": "range", "session": "x", "start": [], "stop": {}, "raw": 1, "output": 0}),
    ("history_request", {"hist_access_type": "bogus"}),
    ("history_request", {"hist_access_type": "tail", "n": 5, "newer_protocol_field": True}),
    ("history_request", {"hist_access_type": "tail", "n": 10**30, "raw": True, "output": False}),
    ("kernel_info_request", {"\ud800": "x"}),
    ("comm_info_request", {"target_name": "\ud800"}),
]


@pytest.mark.parametrize("index", range(len(CLIENT_VECTORS)), ids=[f"{t}-{i}" for i, (t, _) in enumerate(CLIENT_VECTORS)])
def test_client_strings_and_shapes_always_get_a_reply(target: Target, index: int) -> None:
    msg_type, content = CLIENT_VECTORS[index]
    reply = raw_request(target, msg_type, content)
    assert reply["msg_type"] == msg_type.replace("_request", "_reply")
    status = reply["content"].get("status", "ok")
    assert status in ("ok", "error", "aborted", "complete", "incomplete", "invalid", "unknown")
    if status == "error":
        assert "\n" not in reply["content"].get("evalue", "")
        target.assert_no_host_path(json.dumps(reply["content"]))
    target.assert_safe()


def test_deeply_nested_client_content_gets_an_error_reply(target: Target) -> None:
    # Written as text: no JSON library encodes something this deep.
    nested = "[" * 3000 + '"leaf"' + "]" * 3000
    raw = ('{"code": "1", "silent": false, "user_expressions": {"x": ' + nested + "}}").encode()
    reply = raw_request(target, "execute_request", RawContent(raw))
    assert reply["content"]["status"] == "error" and reply["content"]["ename"] == "BadRequest"
    target.assert_safe()


def test_a_huge_code_string_is_answered(target: Target) -> None:
    reply = raw_request(target, "execute_request", {"code": "x = 1  # " + "y" * (8 << 20), "silent": False})
    assert reply["content"]["status"] == "ok"
    target.assert_safe()


COMM_VECTORS: list[tuple[str, Any]] = [
    ("comm_open", {"comm_id": "c1", "target_name": "no-such-target", "data": {}}),
    ("comm_open", {"comm_id": "\ud800", "target_name": "\udfff", "data": {"\ud800": 1}}),
    ("comm_open", {}),
    ("comm_msg", {"comm_id": "never-opened", "data": {"method": "update"}}),
    ("comm_msg", {"comm_id": ["not", "a", "string"], "data": None}),
    ("comm_msg", {"data": {"x": "y" * (4 << 20)}}),
    ("comm_close", {"comm_id": "never-opened", "data": {}}),
    ("comm_close", {"comm_id": 7}),
]


def test_comm_messages_with_bad_ids_and_targets_leave_the_kernel_answering(target: Target) -> None:
    # comm_* messages get no reply by the protocol: what must hold is that each is
    # dropped (or answered with a comm_close) and the very next request is answered.
    kc = target.kernel.kc
    packer = kc.session.pack
    kc.session.pack = ascii_packer
    try:
        for msg_type, content in COMM_VECTORS:
            kc.shell_channel.send(kc.session.msg(msg_type, content))
    finally:
        kc.session.pack = packer
    reply = raw_request(target, "kernel_info_request", {})
    assert reply["content"]["status"] == "ok"
    run = target.run("'still here'")
    assert run.status == "ok" and "still here" in target.shown_text(run)
    target.assert_safe()
