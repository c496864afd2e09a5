"""A request the kernel does not serve gets a clean reply that says so.

A request type the kernel has no handler for gets a `<type>_reply` with status
"error" and one line naming it, on either channel, not an internal error; so does a
debug_request on the shell channel (the debugger answers on control,
tests/kernel/test_debugger.py). Native ipykernel, side by side, is the oracle for
where a reply goes: for an unknown type it logs "Unknown message type" and sends
nothing, which leaves a client waiting, and that is the one difference."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from support.kernel_client import TIMEOUT, RunningKernel, native_and_wasm

pytestmark = pytest.mark.slow  # native ipykernel and wasm-python side by side

DEBUG_INFO = {"type": "request", "seq": 1, "command": "debugInfo", "arguments": {}}


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningKernel, RunningKernel]]:
    with native_and_wasm(tmp_path_factory.mktemp("unsupported")) as both:
        yield both


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
    assert got["debug_reply"]["content"]["evalue"] == (
        "a debug_request goes on the control channel, where this kernel's debugger answers it")


def test_the_kernel_log_says_which_request_was_not_served(kernels: tuple[RunningKernel, RunningKernel]) -> None:
    _native, wasm = kernels
    replies_until_kernel_info(wasm, "shell", "warp_request", {})
    assert "answered a warp_request as not supported" in wasm.log()
