"""Files that are not regular files, planted as a guest or a host process could leave
them in a workspace: a FIFO, a socket, a device node, a dangling link."""

from __future__ import annotations

import os
import socket
import stat
import tempfile
from pathlib import Path

import pytest

SPECIAL_KINDS = ("fifo", "socket", "device", "dangling link")


def make_special(path: Path, kind: str) -> None:
    """Make `path` a special file of `kind` (one of SPECIAL_KINDS); skip the test
    where this host cannot (a device node needs CAP_MKNOD)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        # A socket's path must fit in sun_path (108 bytes), a test's folder may not:
        # bind it in a short folder and link the socket file into place.
        with tempfile.TemporaryDirectory(dir="/tmp") as short, socket.socket(socket.AF_UNIX) as sock:
            sock.bind(os.path.join(short, "s"))
            os.link(os.path.join(short, "s"), path)
    elif kind == "device":
        try:
            os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # /dev/null's numbers
        except PermissionError:
            pytest.skip("making a device node needs CAP_MKNOD")
    elif kind == "dangling link":
        os.symlink("nowhere-at-all", path)
    else:
        raise ValueError(f"no special file of kind {kind!r}")
