"""Where a 10 MB download's time goes in a kernel: request -> reply back to back, against the
guest turn the reply reports, for the door (urllib, requests) beside plain 10 MB allocations.
Measured at 22c95da under load: alloc 23 ms (turn 7), urllib 85 ms (turn 34), requests 58 ms
(turn 29), 1+1 10 ms (turn 4). Back to back, a cell also waits for the previous cell's
checkpoint (its dirty pages: the body and its copies), which is outside its turn.
At a390715 (exact reads into the guest's own bytes object; load ~0.8): alloc 36 ms (turn 12),
urllib 36 ms (turn 26), requests 42 ms (turn 29), 1+1 18 ms (turn 7): a download now costs
the next checkpoint what bytes(10 << 20) does.

    PYTHONPATH=. .venv/bin/python benchmarks/experiments/network_overhead.py
"""
import pathlib
import statistics
import sys
import tempfile
import time
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "tests"))
from support.http_servers import LocalWeb
from support.kernel_client import RunningKernel
web = LocalWeb()
k = RunningKernel(pathlib.Path(tempfile.mkdtemp())/"j", argv=[f"--WasmKernel.network_allow=127.0.0.1:{web.port}"])
url = web.url(f"/bytes?n={10<<20}")
cells = {"alloc": "b = bytes(10 << 20)", "alloc2": "b = bytearray(10 << 20); b[::4096] = b'x' * len(b[::4096])",
         "urllib": f"import urllib.request\nb = urllib.request.urlopen({url!r}).read()",
         "requests": f"import requests\nb = requests.get({url!r}).content", "small": "1+1"}
for name, c in cells.items():
    k.execute(c)
    ts = []
    for _ in range(5):
        t = time.perf_counter(); r = k.execute(c); ts.append(time.perf_counter() - t)
        assert r.status == "ok", r.reply
    turn = r.reply["content"]["metadata"]["sandbox"]["duration_ms"]
    print(name, round(statistics.median(ts)*1000, 1), "ms; last turn", turn)
k.shutdown(); web.close()
