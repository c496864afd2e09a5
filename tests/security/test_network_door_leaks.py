"""A request the cell gave up on leaves nothing behind on the host, even while its
server trickles the response's headers a byte at a time (a slow-loris answer that
never becomes a response): its total deadline, an interrupt or the cell's end shuts
its connection down from the host's side, so the host thread waiting on it returns,
and no host thread or socket of the request outlives its cell.

Against the host's client, a real guest in this process and a real kernel process
(its threads in /proc/<pid>/task, its sockets in /proc/<pid>/fd); loopback only. The
server's own count of trickles still going says whether the host hung up.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from support.http_servers import LocalWeb
from support.kernel_client import RunningKernel
from wasm_kernel.host.http_fetch import HTTP_THREAD_NAME, fetch
from wasm_kernel.host.network_policy import NetworkPolicy, NetworkRefused, parse_allow, parse_networks
from wasm_kernel.runtime.guest_config import CellOptions, GuestOptions, TurnLimits
from wasm_kernel.host.thread_names import native_name
from wasm_kernel.runtime.provisioning import new_guest

TRICKLE = "/trickle-headers?every=0.05"


def threads_and_sockets(pid: int | str = "self") -> tuple[int, int]:
    """The process's threads, and its descriptors that are sockets."""
    fds = Path(f"/proc/{pid}/fd")
    sockets = 0
    for fd in os.listdir(fds):
        try:
            sockets += os.readlink(fds / fd).startswith("socket:")
        except OSError:  # closed while listed
            pass
    return len(os.listdir(f"/proc/{pid}/task")), sockets


def http_tasks(pid: int | str) -> int:
    """The process's threads that are the network door's transfers, by their native
    name (its other threads, a stop's or a prune's, come and go on their own)."""
    count = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            count += Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip() == native_name(HTTP_THREAD_NAME)
        except OSError:  # ended while listed
            pass
    return count


def settled(pid: int | str, before: tuple[int, int], within: float = 10.0) -> tuple[int, int]:
    """The counts once they are back to `before` at most (other threads of the process
    come and go: in a worker of the whole suite, ~230 of them, one of which once took
    longer than 3 s to go), or as they are after `within` seconds."""
    until = time.monotonic() + within
    while True:
        now = threads_and_sockets(pid)
        if (now[0] <= before[0] and now[1] <= before[1]) or time.monotonic() > until:
            return now
        time.sleep(0.05)


def hung_up(web: LocalWeb, within: float = 3.0) -> bool:
    until = time.monotonic() + within
    while web.trickling and time.monotonic() < until:
        time.sleep(0.02)
    return web.trickling == 0


def policy_for(web: LocalWeb, timeout_s: float = 30.0) -> NetworkPolicy:
    return NetworkPolicy(allow=parse_allow([f"127.0.0.1:{web.port}"]), private_ok=parse_networks(["127.0.0.1/32"]),
                         timeout_s=timeout_s)


def http_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "wasm-kernel-http" and t.is_alive()]


@pytest.mark.parametrize("how", ["deadline", "interrupt"])
def test_a_transfer_given_up_while_headers_trickle_ends_its_thread_and_connection(web: LocalWeb, how: str) -> None:
    stop = threading.Event()
    if how == "interrupt":
        threading.Timer(0.3, stop.set).start()
    deadline = time.monotonic() + (0.3 if how == "deadline" else 30)
    with pytest.raises(NetworkRefused, match="took longer than its time allows|interrupted"):
        fetch("GET", web.url(TRICKLE), policy=policy_for(web), stopped=stop.is_set, deadline=deadline)
    assert http_threads() == [], "the host thread still waits for the headers"
    assert hung_up(web), "the connection is still open: the server still trickles"


GIVE_UP_S = 0.6  # the request's total time in the guest and the kernel below
INTERRUPT_S = 0.25  # an interrupt comes before it


def test_a_cell_whose_request_gave_up_or_was_interrupted_leaves_no_thread_or_socket(
        web: LocalWeb, tmp_path: Path) -> None:
    guest = new_guest(tmp_path, options=GuestOptions(network=policy_for(web, timeout_s=GIVE_UP_S)))
    try:
        assert guest.run_cell(f"import urllib.request\nurllib.request.urlopen({web.url('/api')!r}).read()",
                              limits=TurnLimits(), options=CellOptions()).status == "ok"
        before = settled("self", threads_and_sockets())
        gave_up = guest.run_cell("try:\n"
                                 f"    urllib.request.urlopen({web.url(TRICKLE)!r})\n"
                                 "except PermissionError as err:\n    print(err)",
                                 limits=TurnLimits(), options=CellOptions())
        assert gave_up.status == "ok", gave_up.error
        assert gave_up.stdout == f"{web.url(TRICKLE)}: the transfer took longer than its time allows\n"
        assert http_threads() == [], "the host thread still waits for the headers"
        assert hung_up(web), "the connection is still open: the server still trickles"
        now = settled("self", before)
        assert now[0] <= before[0] and now[1] <= before[1], (before, now)
        threading.Timer(INTERRUPT_S, guest.interrupt).start()
        interrupted = guest.run_cell(f"urllib.request.urlopen({web.url(TRICKLE)!r})", limits=TurnLimits(),
                                     options=CellOptions())
        assert interrupted.trap == "interrupted", interrupted
        assert http_threads() == []
        assert hung_up(web)
        now = settled("self", before)
        assert now[0] <= before[0] and now[1] <= before[1], (before, now)
    finally:
        guest.close()


@pytest.mark.slow  # a kernel of its own
def test_a_kernel_keeps_no_thread_or_socket_of_requests_its_cells_gave_up_on(tmp_path: Path, web: LocalWeb) -> None:
    k = RunningKernel(tmp_path / "jupyter", argv=[f"--WasmKernel.network_allow=127.0.0.1:{web.port}",
                                                  "--WasmKernel.network_allow_addresses=127.0.0.1/32",
                                                  f"--WasmKernel.network_timeout={GIVE_UP_S}"])
    try:
        pid = k.km.provisioner.process.pid  # type: ignore[union-attr]
        # A request that succeeds first: what the first request brings (its imports) is not a leak.
        assert k.execute(f"import urllib.request\nurllib.request.urlopen({web.url('/api')!r}).read()").status == "ok"
        before = settled(pid, threads_and_sockets(pid))
        for _ in range(2):
            run = k.execute(f"urllib.request.urlopen({web.url(TRICKLE)!r})")
            assert run.error is not None and run.error["evalue"].endswith("took longer than its time allows")
        assert hung_up(web), "the kernel still holds the connections open"
        after_gave_up = settled(pid, before)
        assert http_tasks(pid) == 0, "a transfer's host thread outlived its cell"
        assert after_gave_up[1] <= before[1], (before, after_gave_up)
        interrupted = k.interrupt_once_running(f"urllib.request.urlopen({web.url(TRICKLE)!r})", delay=INTERRUPT_S)
        assert interrupted.error is not None and interrupted.error["ename"] == "KeyboardInterrupt", interrupted.error
        assert hung_up(web), "the kernel still holds the interrupted request's connection open"
        after_interrupt = settled(pid, before)
        assert http_tasks(pid) == 0, "the interrupted transfer's host thread outlived its cell"
        assert after_interrupt[1] <= before[1], (before, after_interrupt)
    finally:
        k.shutdown()
