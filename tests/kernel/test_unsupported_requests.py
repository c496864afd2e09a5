"""A request the kernel does not serve gets a clean reply that says so.

The debugger is not supported yet (kernel_info advertises none), so a debug_request
gets a `debug_reply` with status "error" and one line saying so, not an internal
error. A request type the kernel has no handler for gets a `<type>_reply` the same
way, on either channel. Native ipykernel, side by side, is the oracle for where a
reply goes: the same reply type on the same channel for debug_request; for an
unknown type it logs "Unknown message type" and sends nothing, which leaves a
client waiting, and that is the one difference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.kernel_client import TIMEOUT, RunningKernel

pytestmark = pytest.mark.slow  # native ipykernel and wasm-python side by side

DEBUG_INFO = {"type": "request", "seq": 1, "command": "debugInfo", "arguments": {}}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    base = tmp_path_factory.mktemp("unsupported")
    native = RunningKernel(base / "native", kernel_name="python3")
    try:
        wasm = RunningKernel(base / "wasm")
        try:
            yield native, wasm
        finally:
            wasm.shutdown()
    finally:
        native.shutdown()


def replies_until_kernel_info(k: RunningKernel, channel: str, msg_type: str,
                              content: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Send `msg_type`, then a kernel_info_request on the same channel; every reply
    to either, by type. A channel's requests are answered in order, so a reply to
    the first that has not come by the second's never will."""
    kc = k.kc
    chan = kc.control_channel if channel == "control" else kc.shell_channel
    first = kc.session.msg(msg_type, content)
    info = kc.session.msg("kernel_info_request", {})
    chan.send(first)
    chan.send(info)
    wanted = {first["header"]["msg_id"], info["header"]["msg_id"]}
    got: dict[str, dict[str, Any]] = {}
    while "kernel_info_reply" not in got:
        reply = chan.get_msg(timeout=TIMEOUT)
        if reply["parent_header"].get("msg_id") in wanted:
            got[reply["msg_type"]] = reply
    return got


def test_a_debug_request_gets_a_clean_error_reply_where_ipykernel_answers(
    kernels: tuple[RunningKernel, RunningKernel],
) -> None:
    native, wasm = kernels
    oracle = replies_until_kernel_info(native, "control", "debug_request", DEBUG_INFO)
    got = replies_until_kernel_info(wasm, "control", "debug_request", DEBUG_INFO)
    assert set(got) == set(oracle) == {"debug_reply", "kernel_info_reply"}
    content = got["debug_reply"]["content"]
    assert content["status"] == "error" and content["ename"] == "NotSupported", content
    assert content["evalue"].startswith("the debugger is not supported by this kernel yet"), content
    assert "internal error" not in content["evalue"] and "\n" not in content["evalue"]
    assert content["traceback"] == [f"NotSupported: {content['evalue']}"]
    # And the kernel still advertises no debugger, as ipykernel advertises its own.
    assert "debugger" in oracle["kernel_info_reply"]["content"]["supported_features"]
    info = got["kernel_info_reply"]["content"]
    assert not info.get("debugger") and "debugger" not in info.get("supported_features", [])


@pytest.mark.parametrize("channel", ["shell", "control"])
def test_a_request_of_a_type_the_kernel_does_not_serve_gets_an_error_reply_naming_it(
    kernels: tuple[RunningKernel, RunningKernel], channel: str,
) -> None:
    native, wasm = kernels
    oracle = replies_until_kernel_info(native, channel, "teleport_request", {"where": "mars"})
    assert set(oracle) == {"kernel_info_reply"}  # ipykernel: no reply at all
    got = replies_until_kernel_info(wasm, channel, "teleport_request", {"where": "mars"})
    assert set(got) == {"teleport_reply", "kernel_info_reply"}
    content = got["teleport_reply"]["content"]
    line = "teleport_request is not supported by this kernel"
    assert content == {"status": "error", "ename": "NotSupported", "evalue": line, "traceback": [f"NotSupported: {line}"]}
    assert wasm.execute("1 + 1").status == "ok"  # and it goes on


def test_a_debug_request_on_the_shell_channel_is_answered_too(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    _native, wasm = kernels
    got = replies_until_kernel_info(wasm, "shell", "debug_request", DEBUG_INFO)
    assert got["debug_reply"]["content"]["status"] == "error"
    assert got["debug_reply"]["content"]["evalue"].startswith("the debugger is not supported by this kernel yet")


def test_the_kernel_log_says_which_request_was_not_served(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    _native, wasm = kernels
    replies_until_kernel_info(wasm, "shell", "warp_request", {})
    assert "answered a warp_request as not supported" in wasm.log()
