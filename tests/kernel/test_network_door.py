"""The network door in a real kernel over jupyter_client: the operator's list as a
trait, what a cell fetched in its reply, and a bad list failing closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.http_servers import CSV, LocalWeb
from support.kernel_client import RunningKernel

pytestmark = pytest.mark.slow  # kernels of their own


def kernel(tmp_path: Path, *argv: str) -> RunningKernel:
    return RunningKernel(tmp_path / "jupyter", argv=list(argv))


def test_a_listed_host_is_fetched_and_the_reply_says_how_much(tmp_path: Path, web: LocalWeb) -> None:
    k = kernel(tmp_path, f"--WasmKernel.network_allow=127.0.0.1:{web.port}")
    try:
        run = k.execute(f"import pandas as pd\ndf = pd.read_csv({web.url('/data.csv')!r})\nint(df.total.sum())")
        assert run.status == "ok", run.reply
        assert run.of_type("execute_result")[0]["data"]["text/plain"] == "8"
        cost = run.reply["content"]["metadata"]["sandbox"]
        assert cost["network_requests"] == 1 and cost["network_bytes"] == len(CSV)
        refused = k.execute("import urllib.request\nurllib.request.urlopen('https://example.com/')")
        assert refused.error is not None and refused.error["ename"] == "PermissionError"
        assert refused.error["evalue"] == ("network access to example.com is not allowed in this sandbox; the operator "
                                           "can allow it with c.WasmKernel.network_allow")
    finally:
        k.shutdown()


def test_a_bad_list_fails_closed_with_one_line(tmp_path: Path, web: LocalWeb) -> None:
    k = kernel(tmp_path, "--WasmKernel.network_allow=not a host")
    try:
        run = k.execute(f"import urllib.request\nurllib.request.urlopen({web.url('/data.csv')!r})")
        assert "wasm-kernel: the network door is off: network_allow entry 'not a host'" in run.stream("stderr")
        assert run.error is not None and run.error["evalue"].startswith(f"network access to 127.0.0.1:{web.port} is not allowed")
    finally:
        k.shutdown()


def test_network_magic_narrows_the_list_and_never_widens_it(tmp_path: Path, web: LocalWeb) -> None:
    other = LocalWeb()
    try:
        k = kernel(tmp_path, f"--WasmKernel.network_allow=127.0.0.1:{web.port}",
                   f"--WasmKernel.network_allow=127.0.0.1:{other.port}")
        try:
            shown = k.execute("%network").displays()[0]["data"]["text/plain"]
            assert f"127.0.0.1:{web.port}, 127.0.0.1:{other.port}" in shown
            assert k.execute(f"%network allow 127.0.0.1:{web.port}").status == "ok"
            fetch_other = f"import urllib.request\nurllib.request.urlopen({other.url('/api')!r})"
            refused = k.execute(fetch_other)
            assert refused.error is not None and f"127.0.0.1:{other.port} is not allowed" in refused.error["evalue"]
            assert k.execute(f"urllib.request.urlopen({web.url('/api')!r}).read()").status == "ok"
            wider = k.execute("%network allow example.com")
            assert wider.status == "error" and "only narrow" in wider.reply["content"]["evalue"]
            assert k.execute("%network off").status == "ok"
            assert k.execute(f"urllib.request.urlopen({web.url('/api')!r})").error is not None
            assert k.execute("%network reset").status == "ok"
            assert k.execute(fetch_other + ".read()").status == "ok"
        finally:
            k.shutdown()
    finally:
        other.close()
