"""Issue 27's phase (b), the other place a supervisor could sit: in front of the whole
kernel, forwarding its ZeroMQ traffic, so that a hard stop kills the kernel process
and no method of the sandbox crosses a process boundary.

    .venv/bin/python benchmarks/experiments/supervisor_hop.py [--rounds 3] [--cells 100] [--json out.json]

A forwarder binds the ports of one connection file and passes every message to a
kernel bound on another's (shell, control, stdin and heartbeat ROUTER -> DEALER,
iopub XPUB <- XSUB; pyzmq's `zmq.proxy`, a C loop per channel, no Python per
message). A `1+1` cell's request, status, input, result and reply each take one more
hop. Both ipykernel and wasm-kernel run direct and forwarded, in rotating rounds;
the figure is the median `1+1` round trip through jupyter_client and the difference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq
from jupyter_client import BlockingKernelClient
from jupyter_client.connect import write_connection_file

med = statistics.median
KERNELS = {
    "ipykernel": [sys.executable, "-m", "ipykernel_launcher", "-f"],
    "wasm-kernel": [sys.executable, "-m", "wasm_kernel", "-f"],
}
CHANNELS = ("shell_port", "control_port", "stdin_port", "hb_port")


def forward(front: dict[str, int], back: dict[str, int], ctx: zmq.Context) -> None:
    def url(ports: dict[str, int], name: str) -> str:
        return f"tcp://127.0.0.1:{ports[name]}"

    pairs = []
    for name in CHANNELS:
        outer, inner = ctx.socket(zmq.ROUTER), ctx.socket(zmq.DEALER)
        outer.bind(url(front, name))
        inner.connect(url(back, name))
        pairs.append((outer, inner))
    outer, inner = ctx.socket(zmq.XPUB), ctx.socket(zmq.XSUB)
    outer.bind(url(front, "iopub_port"))
    inner.connect(url(back, "iopub_port"))
    pairs.append((outer, inner))
    for outer, inner in pairs:
        threading.Thread(target=zmq.proxy, args=(outer, inner), daemon=True).start()


def one_plus_one(connection_file: str, cells: int) -> list[float]:
    client = BlockingKernelClient(connection_file=connection_file)
    client.load_connection_file()
    client.start_channels()
    client.wait_for_ready(timeout=120)
    times = []
    for i in range(cells + 10):
        start = time.perf_counter()
        client.execute_interactive("1+1", output_hook=lambda msg: None, timeout=60)
        if i >= 10:
            times.append(time.perf_counter() - start)
    client.stop_channels()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--json")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="wk-hop-")
    ctx = zmq.Context()
    files, procs = {}, []
    for kernel, argv in KERNELS.items():
        back, front = os.path.join(folder, f"{kernel}-back.json"), os.path.join(folder, f"{kernel}-front.json")
        write_connection_file(back, ip="127.0.0.1", key=b"bench")
        write_connection_file(front, ip="127.0.0.1", key=b"bench")
        procs.append(subprocess.Popen([*argv, back], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=folder))
        forward(json.loads(Path(front).read_text()), json.loads(Path(back).read_text()), ctx)
        files[kernel] = {"direct": back, "forwarded": front}
    times: dict[str, dict[str, list[float]]] = {k: {"direct": [], "forwarded": []} for k in KERNELS}
    try:
        for r in range(args.rounds):
            order = [(k, w) for k in KERNELS for w in ("direct", "forwarded")]
            order = order[r % len(order):] + order[: r % len(order)]
            for kernel, way in order:
                times[kernel][way] += one_plus_one(files[kernel][way], args.cells)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
    out = {}
    for kernel, ways in times.items():
        direct, forwarded = med(ways["direct"]) * 1e3, med(ways["forwarded"]) * 1e3
        out[kernel] = {"direct_ms": round(direct, 2), "forwarded_ms": round(forwarded, 2),
                       "added_ms": round(forwarded - direct, 2)}
        print(f"{kernel}: 1+1 direct {direct:.2f} ms, forwarded {forwarded:.2f} ms, added {forwarded - direct:+.2f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
