"""Ending a test's own processes (servers, hubs, cullers, pool services) the same way
everywhere: asked first, killed if they do not go, never left running."""

from __future__ import annotations

import subprocess


def end_process(proc: subprocess.Popen, grace: float = 10.0) -> None:  # type: ignore[type-arg]
    """SIGTERM, then SIGKILL if `proc` has not exited within `grace` seconds."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
