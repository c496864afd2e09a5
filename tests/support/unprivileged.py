"""Running a check as an ordinary user, for tests about permission bits (root
ignores them)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def run_unprivileged(fn: Callable[[], Any]) -> Any:
    """fn() as an ordinary user; its JSON-able result. Root ignores permission bits,
    so as root fn runs in a forked child that has dropped to `nobody`."""
    if os.geteuid() != 0:
        return fn()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            os.close(read_end)
            os.setgid(65534)
            os.setuid(65534)
            payload = fn()
        except BaseException as err:  # noqa: BLE001
            payload = {"crash": repr(err)}
        os.write(write_end, json.dumps(payload).encode())
        os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    return json.loads(b"".join(chunks))
