"""Each host of the pool applies its own network list: real hosts, manager, router,
Redis and a Jupyter Server on the gateway, and a loopback web server.

Host 1's kernels have a wasm_kernel_config.py allowing the web server; host 2 has
none (the door is off, the default). A notebook placed on host 1 fetches; one on
host 2 is refused in one line, and the server never sees its request: the list is
the host's that runs the kernel, never the notebook's or the router's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.http_servers import CSV, LocalWeb
from support.redis_server import RedisServer
from support.routed_pool import host_of, open_notebook, start_pool, stop_pool

pytestmark = pytest.mark.timeout(300)


def test_each_host_of_the_pool_applies_its_own_list(redis_server: RedisServer, web: LocalWeb,
                                                    tmp_path: Path) -> None:
    allowing = (f"c.WasmKernel.network_allow = ['127.0.0.1:{web.port}']\n"
                "c.WasmKernel.network_allow_addresses = ['127.0.0.1/32']\n")
    pool = start_pool(redis_server.url, tmp_path / "pool", kernel_configs=(allowing, None))
    try:
        server, (open_host, closed_host) = pool["server"], pool["hosts"]
        placed: dict[object, object] = {}
        for n in range(8):  # the manager places each new notebook on the less loaded host
            model, channels = open_notebook(server, f"course/n{n}.ipynb")
            placed.setdefault(host_of(pool, model["kernel"]["id"]), channels)
            if len(placed) == 2:
                break
        assert set(placed) == {open_host, closed_host}, "the pool never used both hosts"
        fetch = f"import urllib.request\nurllib.request.urlopen({web.url('/data.csv')!r}).read()"
        allowed = placed[open_host].run_ok(fetch)  # type: ignore[attr-defined]
        assert allowed.result() == repr(CSV), allowed.describe()
        before = len(web.requests)
        refused = placed[closed_host].execute(fetch)  # type: ignore[attr-defined]
        assert refused.status == "error"
        # The host without a list refuses it too, naming the host and the setting.
        assert refused.reply["evalue"] == (f"network access to 127.0.0.1:{web.port} is not allowed in this sandbox; "
                                           "the operator can allow it with c.WasmKernel.network_allow"), \
            refused.describe()
        assert len(web.requests) == before, "the refused notebook's request reached the server"
    finally:
        stop_pool(pool)
