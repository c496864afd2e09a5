"""A session's packages folder (what %pip installed, sessions/packages.py): where it
is, made when a kernel opens the session, removed with it, and the lock two kernels
of one session take turns on. Apart from the installer, so that opening or removing
a session does not import pip's machinery and packaging (~5 ms of every start)."""

from __future__ import annotations

import fcntl
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from ..host.safe_fs import DIR_NOFOLLOW, open_root
from ..host.set_aside import Notes, folder_at, remove_set_aside
from .layout import PACKAGES_DIR, PRIVATE_DIR
from .session_ids import validate_session_id
SCRATCH_PREFIX = ".pip-"  # + the session id + "." + random: whose it is, from its name alone
LOCK_POLL_SECONDS = 0.2  # how often a waiting holder is told it still waits


def packages_path(workspace_root: Path, session_id: str) -> Path:
    return Path(workspace_root) / PRIVATE_DIR / PACKAGES_DIR / validate_session_id(session_id)


def ensure_packages_dir(workspace_root: Path, session_id: str, notes: Notes | None = None) -> Path:
    """The session's packages folder, made if missing (whatever else is at its place,
    or at its parent's, is set aside first, with a line in `notes`: it is mounted
    into the guest, so it is never followed); a kernel opening its session also
    removes what a killed install left, unless an install holds the lock now."""
    path = packages_path(workspace_root, session_id)
    Path(workspace_root).mkdir(parents=True, exist_ok=True)  # the operator's root, as a sandbox's open makes it
    root_fd = open_root(workspace_root)
    try:
        private_fd = folder_at(root_fd, PRIVATE_DIR, "the sessions' private folder", notes)
    finally:
        os.close(root_fd)
    try:
        shelf_fd = folder_at(private_fd, PACKAGES_DIR, "the sessions' packages folder", notes, 0o755)
    finally:
        os.close(private_fd)
    try:
        fd = folder_at(shelf_fd, path.name, "the session's packages folder", notes, 0o755)
    finally:
        os.close(shelf_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)  # a live install: its scratch is its own, and it sweeps the rest
        return path
    try:
        sweep_scratch(path.parent, session_id)
    finally:
        os.close(fd)
    return path


def remove_packages(workspace_root: Path, session_id: str) -> None:
    """The session's packages, and the scratch of an install a kill interrupted; an
    install under way finishes first."""
    target = packages_path(workspace_root, session_id)
    if not target.parent.is_dir():
        return
    with locked_folder(target):
        shutil.rmtree(target, ignore_errors=True)
        sweep_scratch(target.parent, session_id)
        shelf_fd = os.open(target.parent, DIR_NOFOLLOW)
        try:
            remove_set_aside(shelf_fd, target.name)
        finally:
            os.close(shelf_fd)


def sweep_scratch(shelf: Path, session_id: str) -> None:
    """What killed installs of this session left. Call with the session's lock held:
    a live install holds it from before its scratch folder exists to after it is gone."""
    for leftover in shelf.glob(f"{SCRATCH_PREFIX}{validate_session_id(session_id)}.*"):
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)


class locked_folder:
    """flock on the packages folder, so two kernels of one session take turns. An
    install holds it throughout, which is also what lets the next one tell a killed
    install's scratch folder from a live one's. `waiting` is called every
    LOCK_POLL_SECONDS while another holder has it, and may raise to give up."""

    def __init__(self, folder: Path, waiting: Callable[[], None] | None = None) -> None:
        self.folder = folder
        self.waiting = waiting
        self.fd: int | None = None

    def __enter__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            if self.waiting is None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            else:
                while True:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        self.waiting()
                        time.sleep(LOCK_POLL_SECONDS)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
