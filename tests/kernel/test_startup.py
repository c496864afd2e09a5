"""How a kernel starts: sockets bound before the sandbox stack is imported, and the
first request held until a client subscribes to iopub, so nothing it publishes is lost.

A Jupyter server that restarts a kernel keeps its sockets: the shell reconnects at
once, the iopub subscription ~100 ms later (ZeroMQ's reconnect interval). A kernel
that answers faster than that would publish a "restart and run all" first cell's
outputs and idle status to nobody. Here the client's iopub is started late on
purpose, and the kernel must hold the request until it subscribes.
"""

from __future__ import annotations

import os
import queue
import time
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

from support.kernel_client import split_notices

pytestmark = pytest.mark.slow  # kernels started with clients that subscribe late on purpose

WAIT_S = 30.0  # the kernel's cap for this test: far longer than the pause below


def _start(tmp_path: Path, wait_s: float) -> KernelManager:
    env = {**{k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}, "JUPYTER_DATA_DIR": str(tmp_path)}
    km = KernelManager(kernel_name="wasm-python")
    km.start_kernel(env=env, extra_arguments=[f"--WasmKernel.iopub_subscriber_wait={wait_s}"], cwd=str(tmp_path))
    return km


def _collect_until_idle(kc, msg_id: str, timeout: float = 60.0) -> list[dict]:  # noqa: ANN001
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            msg = kc.get_iopub_msg(timeout=1)
        except queue.Empty:
            continue
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen
    raise AssertionError(f"no idle status for the request; saw {[m['msg_type'] for m in seen]}")


def test_a_request_sent_before_anyone_subscribes_publishes_its_outputs_once_someone_does(tmp_path: Path) -> None:
    km = _start(tmp_path, WAIT_S)
    kc = km.client()
    try:
        kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        msg_id = kc.execute("print('after the subscription')")
        time.sleep(3.0)  # the kernel is up by now and would have run the cell
        try:
            early = kc.get_shell_msg(timeout=0.1)
        except queue.Empty:
            early = None
        assert early is None, "the kernel answered while no client subscribed to iopub"
        kc.iopub_channel.start()
        seen = _collect_until_idle(kc, msg_id)
        texts = [m["content"]["text"] for m in seen if m["msg_type"] == "stream" and m["content"]["name"] == "stdout"]
        # The kernel's own notices (information, on stdout) may come first.
        assert split_notices("".join(texts))[1] == "after the subscription\n", [m["msg_type"] for m in seen]
        reply = kc.get_shell_msg(timeout=30)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "ok"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_a_client_that_never_subscribes_is_answered_after_the_wait(tmp_path: Path) -> None:
    # A wait long enough that a second wait could not hide in a slow machine's noise:
    # the next request must come back in well under half of it (a generous ceiling;
    # how fast it comes back is the benchmarks' business).
    wait = 6.0
    km = _start(tmp_path, wait)
    kc = km.client()
    try:
        kc.start_channels(shell=True, iopub=False, stdin=False, hb=False, control=False)
        msg_id = kc.kernel_info()
        reply = kc.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["msg_type"] == "kernel_info_reply"
        start = time.monotonic()
        kc.execute("1 + 1")
        assert kc.get_shell_msg(timeout=60)["content"]["status"] == "ok"
        assert time.monotonic() - start < wait / 2, "the wait is once per kernel, not per request"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_the_kernel_binds_its_sockets_before_importing_the_sandbox_stack() -> None:
    """`python -m wasm_kernel` imports the package and the kernel app, then binds;
    wasmtime and the guest runtime come with the kernel class, after the bind. A
    client's first request reaches a port only at its reconnect ticks (100 ms), so
    a kernel that imported them first answered a whole tick after ipykernel."""
    import subprocess
    import sys

    probe = (
        "import sys, wasm_kernel, wasm_kernel.kernel.kernel_app as app\n"
        "heavy = sorted(m for m in ('wasmtime', 'sqlite3', 'wasm_kernel.runtime', 'wasm_kernel.core.sandbox',"
        " 'wasm_kernel.kernel.sandbox_kernel') if m in sys.modules)\n"
        "print(heavy)\n"
        "print(app.WasmKernelApp().kernel_class.__name__)\n"
        "print(wasm_kernel.create_sandbox.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "WasmKernel", "wasm_kernel.core.sandbox"], out


def test_the_kernel_class_imports_no_http_client_requirement_parser_nor_structlog_until_used() -> None:
    """urllib3 took ~25 ms of every start (its URL patterns compile at import),
    packaging's requirement parser ~5 ms, the host's HTTP client (http.client) ~3 ms and
    structlog ~6 ms; the network door imports the client with its first request, %pip
    the parser, and a logger structlog with its first event that is written."""
    import subprocess
    import sys

    probe = (
        "import sys, wasm_kernel.kernel.kernel_app as app\n"
        "app.WasmKernelApp().kernel_class\n"
        "print(sorted(m for m in ('urllib3', 'packaging.requirements', 'http.client', 'wasm_kernel.host.http_fetch',"
        " 'structlog') if m in sys.modules))\n"
        "from wasm_kernel.sessions.packages import parse_requirements\n"
        "print(parse_requirements(['six==1.0'])[0].name, 'urllib3' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "six False"], out


def test_the_kernel_class_imports_no_installer_nor_pruning_until_used() -> None:
    """%pip's installer (pip's runner, wheel checks, packaging) and the prune's
    machinery were ~8 ms of every start; they come with the first %pip and the first
    prune (the automatic one runs after the first cell)."""
    import subprocess
    import sys

    heavy = ("packaging.utils", "wasm_kernel.sessions.packages", "wasm_kernel.sessions.pip_runner",
             "wasm_kernel.sessions.pruning", "wasm_kernel.sessions.moves")
    probe = (
        "import sys, wasm_kernel.kernel.kernel_app as app\n"
        "app.WasmKernelApp().kernel_class\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))\n"
        "from wasm_kernel.sessions import prune_sessions, SessionRegistry\n"
        "print(prune_sessions.__module__, SessionRegistry.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.splitlines() == ["[]", "wasm_kernel.sessions.pruning wasm_kernel.sessions.registry"], out


def test_a_restarted_kernel_does_not_hold_a_client_that_subscribes_lazily(tmp_path: Path) -> None:
    """jupyter_client's blocking client re-subscribes only when it next reads iopub,
    and its wait_for_ready() reads iopub only after a shell reply: holding it until it
    subscribes would stall it for the whole wait. Its iopub handshake says it is there."""
    km = _start(tmp_path, WAIT_S)
    kc = km.client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        km.restart_kernel(now=False)
        kc.wait_for_ready(timeout=10)  # well under WAIT_S: not held for the cap
        msg_id = kc.execute("print('after the restart')")
        seen = _collect_until_idle(kc, msg_id)
        assert any(m["msg_type"] == "stream" and m["content"]["text"] == "after the restart\n" for m in seen)
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_reading_the_cached_guest_never_compiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A refused cache file (truncated, say) is compiled again by the sandbox's start,
    with its progress shown; the preflight's read only says it could not."""
    from wasm_kernel.host import module_cache

    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(module_cache, "_memo", {})
    monkeypatch.setattr(module_cache, "_compile", lambda *a, **k: pytest.fail("compiled"))
    assert module_cache.read_cached_guest() is False  # no file
    path = module_cache.guest_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"truncated")
    path.chmod(0o600)
    assert module_cache.read_cached_guest() is False  # a file wasmtime refuses


def test_a_kernel_whose_port_is_taken_exits_with_one_line_so_the_server_can_restart_it(tmp_path: Path) -> None:
    """The server chose the ports a moment before the kernel binds them; with a class's
    kernels starting at once, another process may hold one by then. The kernel must
    exit (the server's restarter then starts it on fresh ports), not stay half-alive."""
    import json
    import socket
    import subprocess
    import sys

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    ports = []
    for _ in range(4):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    connection = tmp_path / "kernel.json"
    connection.write_text(json.dumps({
        "shell_port": ports[0], "iopub_port": taken.getsockname()[1], "stdin_port": ports[1],
        "control_port": ports[2], "hb_port": ports[3], "ip": "127.0.0.1", "key": "k", "transport": "tcp",
        "signature_scheme": "hmac-sha256", "kernel_name": "wasm-python"}))
    env = {**{k: v for k, v in os.environ.items() if k != "JPY_SESSION_NAME"}, "JUPYTER_DATA_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "wasm_kernel", "-f", str(connection)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"the kernel still ran a minute after failing to bind its port:\n{err[-1500:]}") from None
    finally:
        taken.close()
    assert proc.returncode != 0, err[-1500:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("wasm-kernel: could not bind the kernel's ports (") and "Traceback" not in err, err[-1500:]
