"""A test's child process's output (stdout and stderr together) in one file: what a
failure message shows of it. The servers, hubs, kernels and pool services the tests
start all keep theirs in one of these."""

from __future__ import annotations

from pathlib import Path


class ProcessLog:
    """`file` is what the process writes to (Popen's stdout and stderr); `append`
    keeps what an earlier process left in the same file."""

    def __init__(self, path: Path, append: bool = False) -> None:
        self.path = path
        self.file = open(path, "ab" if append else "wb")

    def text(self) -> str:
        if not self.file.closed:
            self.file.flush()
        return self.path.read_text(errors="replace")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()
