"""A machine's first start: the optimized guest compiles in the background.

On an empty cache a guest starts on the baseline engine (Winch, ~11 s to compile)
and this starts one detached, low-priority process that compiles the optimized
module (Cranelift, 50-130 s) and then builds the warm image on it. Running guests
move to the optimized module between cells once it is cached
(engine_upgrade.EngineUpgrade); the next kernel starts from the image.

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
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..host.cache_dir import cache_root
from ..host.engine import checked_metering, get_baseline_engine, get_engine
from ..host.log import get_logger
from ..host.module_cache import is_guest_cached, load_guest_module
from ..host.work_meter import Progress
from .course_mount import course_argv
from .guest_config import GuestEngine
from .warm_image import DEFAULT_PRELOAD

log = get_logger("wasm_kernel.runtime")

BASELINE_ENV = "WASM_KERNEL_BASELINE"  # "0": never start on the baseline engine (compile first)
LOCK_NAME = "warmup.lock"
LOG_NAME = "warmup.log"
STATUS_NAME = "warmup.json"  # {"pid", "step", "since"}: what the process is doing now

# Run with -c, not -m: the module is already imported by the package's own imports.
# provisioning.warmup_main does the work (it builds guests; this module only starts it).
_ENTRY = "import sys; from wasm_kernel.runtime.provisioning import warmup_main; sys.exit(warmup_main(sys.argv[1:]))"

_started = False
_lock = threading.Lock()


def baseline_allowed() -> bool:
    return os.environ.get(BASELINE_ENV, "1") != "0"


def choose_engine(preload: Sequence[str] = DEFAULT_PRELOAD, progress: Progress | None = None,
                  metering: str | None = None) -> GuestEngine:
    """The optimized module of `metering` (this process's when None) if this machine
    has it compiled; else (a first start) the baseline one, compiled in seconds,
    while the background process compiles the optimized one and builds the warm
    image of `preload`."""
    metering = checked_metering(metering)
    optimized = is_guest_cached(metering=metering) or not baseline_allowed()
    module = load_guest_module(progress, baseline=not optimized, metering=metering)
    engine = GuestEngine(module, get_engine(metering) if optimized else get_baseline_engine(), optimized, metering)
    if not optimized:
        start_background_warmup(preload, metering)
    return engine


def start_background_warmup(preload: Sequence[str] = (), metering: str | None = None) -> None:
    """Start the warm-up process for `metering`'s module, once per process (it exits
    at once if another process holds the lock, or if everything is built)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    log_path = cache_root() / LOG_NAME
    with open(log_path, "ab") as log_file:
        subprocess.Popen(
            [sys.executable, "-c", _ENTRY, f"--metering={checked_metering(metering)}", *course_argv(), *preload],
            stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file, start_new_session=True, close_fds=True,
        )
    log.info("warmup.started", log=str(log_path))


@dataclass(frozen=True)
class WarmupStatus:
    pid: int
    step: str  # what it does now: "compiling the optimised guest", "building the warm image"
    since: float  # when the process started (time.time())
    log: Path


def say(step: str, since: float) -> None:
    """The status file, replaced whole (a reader never sees half of it)."""
    path = cache_root() / STATUS_NAME
    tmp = path.with_name(f".{STATUS_NAME}.{os.getpid()}")
    try:
        tmp.write_text(json.dumps({"pid": os.getpid(), "step": step, "since": since}))
        os.replace(tmp, path)
    except OSError as err:
        log.warning("warmup.status_unwritable", error=str(err))


def clear_status() -> None:
    (cache_root() / STATUS_NAME).unlink(missing_ok=True)


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
