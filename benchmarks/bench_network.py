"""The network door: a 10 MB download through the host against native `requests`,
side by side in one run, on the same loopback server.

    .venv/bin/python benchmarks/run_all.py --only network [--rounds 5] [--json out.json]

A local HTTP server (tests/support/http_servers.LocalWeb) serves 10 MB. Per round,
each kernel in turn (the order alternates) runs, after a warm-up request:
1. `requests.get(url).content` (10 MB, its length checked), request -> idle;
2. `urllib.request.urlopen(url).read()`, the same.
wasm-python allows the server with c.WasmKernel.network_allow (127.0.0.1:PORT);
ipykernel's requests opens a socket to it directly.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from _common import Row, median  # noqa: E402
from bench_kernel import NATIVE, WASM, DrivenKernel, alternating_rounds, kernel_env  # noqa: E402
from support.http_servers import LocalWeb  # noqa: E402

AREA = "network"
BYTES = 10 << 20


def one_round(kernel: str, env: dict[str, str], folder: Path, scratch: Path, url: str) -> dict[str, Any]:
    k = DrivenKernel(kernel, env, folder, scratch / f"{kernel}.log")
    try:
        k.start()
        k.run_cell(f"import requests, urllib.request\nassert len(requests.get({url!r}).content) == {BYTES}")
        got = k.run_cell(f"assert len(requests.get({url!r}).content) == {BYTES}")
        lib = k.run_cell(f"assert len(urllib.request.urlopen({url!r}).read()) == {BYTES}")
        for cell in (got, lib):
            errors = [m for m in cell["outputs"] if m["msg_type"] == "error"]
            assert not errors, (kernel, errors)
        return {"requests_s": got["idle_s"], "urllib_s": lib["idle_s"]}
    finally:
        k.shutdown()


def run_network(rounds: int = 5) -> tuple[list[Row], dict[str, Any]]:
    base = Path(tempfile.mkdtemp(prefix="wk-bench-network-"))
    folder = base / "notebook"
    folder.mkdir()
    web = LocalWeb()
    url = web.url(f"/bytes?n={BYTES}")
    common = kernel_env(base)
    raw: dict[str, Any] = {"rounds": [], "bytes": BYTES}
    try:
        raw["rounds"] = alternating_rounds(
            AREA, rounds, base, common, lambda kernel, env, scratch: one_round(kernel, env, folder, scratch, url),
            lambda got: f"requests {got['requests_s']:.3f} s urllib {got['urllib_s']:.3f} s",
            wasm_config=f"c.WasmKernel.network_allow = ['127.0.0.1:{web.port}']\n")
    finally:
        web.close()
        shutil.rmtree(base, ignore_errors=True)
    return rows_from(raw), raw


def rows_from(raw: dict[str, Any]) -> list[Row]:
    counted = [r for r in raw["rounds"] if not r["warmup"]]
    rows = []
    for key, name, target in (("requests_s", f"`requests.get` of {raw['bytes'] >> 20} MB, request -> idle", 1.5),
                              ("urllib_s", f"`urlopen().read()` of {raw['bytes'] >> 20} MB, request -> idle", None)):
        guest = median([r[WASM][key] for r in counted]) * 1000
        native = median([r[NATIVE][key] for r in counted]) * 1000
        rows.append(Row(AREA, name, "ms", guest, native, target_max=target, target_on="ratio",
                        note=f"median of {len(counted)}; native: ipykernel's requests on a socket"))
    return rows


if __name__ == "__main__":
    from _common import print_table

    rows, _ = run_network(int(os.environ.get("ROUNDS", "3")))  # a quick look; run_all.py is the way
    print_table(rows)
