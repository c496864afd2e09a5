"""A machine's first start: the optimized guest compiles in the background.

On an empty cache a guest starts on the baseline engine (Winch, ~11 s to compile)
and this starts one detached, low-priority process that compiles the optimized
module (Cranelift, 50-130 s) and then builds the warm image on it. Running guests
move to the optimized module between cells once it is cached
(PythonGuest._maybe_upgrade); the next kernel starts from the image.

One process per cache folder does the work (a file lock); a kernel that exits
meanwhile does not stop it, so the work is never thrown away. While it works it
says what it is doing in a status file beside the lock (warmup_status()), which
`wasm-kernel run` reports after a first run and `wasm-kernel precompile` shows while
it waits for the process rather than compiling the same module beside it.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..host.cache_dir import cache_root
from ..host.log import get_logger

log = get_logger("wasm_kernel.runtime")

BASELINE_ENV = "WASM_KERNEL_BASELINE"  # "0": never start on the baseline engine (compile first)
LOCK_NAME = "warmup.lock"
LOG_NAME = "warmup.log"
STATUS_NAME = "warmup.json"  # {"pid", "step", "since"}: what the process is doing now

# Run with -c, not -m: this module is already imported by the package's own imports.
_ENTRY = "import sys; from wasm_kernel.runtime.background_warmup import main; sys.exit(main(sys.argv[1:]))"

_started = False
_lock = threading.Lock()


def baseline_allowed() -> bool:
    return os.environ.get(BASELINE_ENV, "1") != "0"


def start_background_warmup(preload: Sequence[str] = ()) -> None:
    """Start the warm-up process, once per process (it exits at once if another
    process holds the lock, or if everything is built)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    log_path = cache_root() / LOG_NAME
    with open(log_path, "ab") as log_file:
        subprocess.Popen(
            [sys.executable, "-c", _ENTRY, *preload],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True, close_fds=True,
        )
    log.info("warmup.started", log=str(log_path))


@dataclass(frozen=True)
class WarmupStatus:
    pid: int
    step: str  # what it does now: "compiling the optimised guest", "building the warm image"
    since: float  # when the process started (time.time())
    log: Path


def _say(step: str, since: float) -> None:
    """The status file, replaced whole (a reader never sees half of it)."""
    path = cache_root() / STATUS_NAME
    tmp = path.with_name(f".{STATUS_NAME}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"pid": os.getpid(), "step": step, "since": since}))
        os.replace(tmp, path)
    except OSError as err:
        log.warning("warmup.status_unwritable", error=str(err))


def warmup_status() -> WarmupStatus | None:
    """What a running warm-up process is doing, or None when none runs."""
    path = cache_root() / STATUS_NAME
    try:
        data = json.loads(path.read_text())
        pid, step, since = int(data["pid"]), str(data["step"]), float(data["since"])
        os.kill(pid, 0)  # still alive (a process killed mid-way leaves its file)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return WarmupStatus(pid, step, since, cache_root() / LOG_NAME)


@contextmanager
def warmup_lock(wait: bool = True) -> Iterator[bool]:
    """Hold the warm-up's lock: the body does the work and no background process starts
    on it meanwhile. Yields False, without waiting, when another process holds it and
    wait is False; with wait, blocks until it is free."""
    lock = os.open(cache_root() / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(lock)


def warm_up(preload: tuple[str, ...]) -> int:
    """Compile the optimized guest and build the warm image, unless another process is."""
    from ..host.module_cache import guest_cache_path, load_guest_module
    from .guest_site_build import add_bytecode
    from .python_guest import prepare_warm_image
    from .warm_image import ImageUnavailable

    with warmup_lock(wait=False) as held:
        if not held:
            return 0  # another process is doing it
        since = time.time()
        try:
            _say("compiling the optimised guest", since)
            load_guest_module()
            log.info("warmup.compiled", path=str(guest_cache_path()))
            _say("compiling IPython's bytecode", since)
            add_bytecode()  # a site staged on the baseline engine has none yet
            _say("building the warm image", since)
            try:
                image = prepare_warm_image(preload)
                log.info("warmup.image", folder=str(image.folder))
            except ImageUnavailable as err:
                log.warning("warmup.image_failed", error=str(err))
                return 1
            return 0
        finally:
            (cache_root() / STATUS_NAME).unlink(missing_ok=True)


def main(argv: Sequence[str]) -> int:
    try:
        os.nice(10)  # the user's kernel keeps the CPU it needs
    except OSError:
        pass
    return warm_up(tuple(argv))
