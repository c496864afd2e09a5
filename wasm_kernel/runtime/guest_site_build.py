"""The staged IPython site, with its bytecode compiled by the guest itself.

The host is CPython 3.11 and the guest 3.15: the host cannot write the guest's
.pyc files, and a read-only site without them makes every kernel compile IPython
from source at start (0.74 s against 0.36 s, measured). So while the staged copy is
still a scratch folder, a bare guest with that folder mounted writable compiles it,
once per machine and version set, with unchecked-hash pycs (no source stat at
import). No user code runs in that guest. Part of provisioning: it makes guests, and
no guest module imports it.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..host.guest_site import guest_site_path, make_read_only, stage_guest_site
from ..host.log import get_logger
from ..host.work_meter import Progress, metered
from .background_warmup import choose_engine
from .guest_config import SiteMount, TurnLimits, TurnOutcome
from .python_guest import PythonGuest

log = get_logger("wasm_kernel.runtime")

_COMPILE = """
import compileall, py_compile, _wasm_kernel_guest
_ok = compileall.compile_dir({site!r}, quiet=1, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
_wasm_kernel_guest.call({{"op": "result", "status": "ok" if _ok else "error", "exit_code": 0}})
"""


@dataclass(frozen=True)
class StagedSite:
    path: Path  # host folder
    guest_path: str  # where the guest sees it, read-only
    key: str  # the staged versions' digest


BYTECODE_MARKER = ".bytecode"  # the site's .pyc files are there

_lock = threading.Lock()
_memo: StagedSite | None = None


def guest_site(progress: Progress | None = None, *, bytecode: bool = True) -> StagedSite:
    """The staged site for this host's IPython, staged (and its bytecode compiled)
    now if missing. bytecode=False (a first start on the baseline engine) stages the
    files only; add_bytecode() compiles them later, off the user's path."""
    global _memo
    with _lock:
        if _memo is None:
            prepare = (lambda scratch: _compile_bytecode(scratch, progress)) if bytecode else None
            # The copy's own count when it is the whole step (bytecode's compile, seconds
            # longer, reports itself: one figure per step, never going back).
            site = stage_guest_site(prepare=prepare, progress=None if bytecode else progress)
            _memo = StagedSite(site.path, guest_site_path(), site.key)
        return _memo


def add_bytecode(progress: Progress | None = None) -> None:
    """Compile the bytecode of a site staged without it, in place. Guests that use
    the site meanwhile are safe: each .pyc is written to a temporary name and
    renamed (importlib's own way), and the sources do not change. `progress` is
    called only if there is work to do."""
    site = guest_site()
    if (site.path / BYTECODE_MARKER).is_file():
        return
    folders = [Path(d) for d, _, _ in os.walk(site.path)]
    for folder in folders:
        folder.chmod(0o755)
    try:
        _compile_bytecode(site.path, progress)
    finally:
        make_read_only(site.path)


def _compile_bytecode(scratch: Path, progress: Progress | None) -> None:
    compile_bytecode(scratch, guest_site_path(), progress)


def compile_bytecode(scratch: Path, target: str, progress: Progress | None = None) -> None:
    """Compile the sources of `scratch` (a site being built, writable) in a bare guest
    that sees it at `target`, where guests will import it from; a marker file says
    it is done. Not fatal when incomplete: a module without its pyc compiles on import."""
    start = time.monotonic()
    log.info("guest_site.compile", path=str(scratch))

    def compile_all() -> TurnOutcome:
        with tempfile.TemporaryDirectory(prefix="wasm-kernel-compile-") as workspace:
            guest = PythonGuest(Path(workspace), engine=choose_engine(), shell=False,
                                site=SiteMount(scratch, target, True), name="wasm-kernel-compile")
            try:
                return guest.run_source(_COMPILE.format(site=target), limits=TurnLimits(deadline_seconds=600))
            finally:
                guest.close()

    outcome = metered("site-bytecode", compile_all, progress)
    took = time.monotonic() - start
    if outcome.status != "ok":
        # Not fatal: a module without its pyc is compiled when imported.
        log.warning("guest_site.compile_incomplete", status=outcome.status, stderr=outcome.stderr[-2000:])
    else:
        (scratch / BYTECODE_MARKER).write_text("")
    log.info("guest_site.compiled", seconds=round(took, 2))


__all__ = ["StagedSite", "compile_bytecode", "guest_site"]
