"""A real redis-server on a free loopback port, with its own temporary folder.

Debian's redis-server (installed by .ci/run). No persistence by default; `restart()`
stops and starts the same server on the same port, as an operator's restart would.
It requires a password (AUTH), as every pool component requires of its Redis.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, folder: Path) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: `apt-get install redis-server` (.ci/run does)")
        self.binary = binary
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.password = secrets.token_hex(16)
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def url_without_password(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.folder),
             "--save", "", "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no", "--requirepass", self.password],
            stdout=open(self.folder / "redis.log", "ab"), stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as conn:
                    conn.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
                    if b"+PONG" in conn.recv(64):
                        return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}: {(self.folder / 'redis.log').read_text()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


REQUIRE_ENV = "WASM_KERNEL_REQUIRE_REDIS"  # .ci/run sets it: there a missing server fails


def start_or_skip(folder: Path) -> RedisServer:
    """A started server; without redis-server installed the test is skipped, unless
    $WASM_KERNEL_REQUIRE_REDIS=1 (CI), where that is a failure."""
    import pytest

    if shutil.which("redis-server") is None and os.environ.get(REQUIRE_ENV) != "1":
        pytest.skip("redis-server is not installed (apt-get install redis-server); CI installs it")
    return RedisServer(folder)
