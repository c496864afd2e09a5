"""What one start of a guest keeps about its files: the descriptor ledger (fd_ledger.py),
the notebook folder's overlay (notebook_overlay.py), the readdir listings being served
(wasi_shadows.py) and the disk quota (disk_quota.py). Each start makes them again;
this holder stays, so the parts of a guest that use them (checkpoints, saved states,
the WASI shadows, children) hold one reference and always see the current start's.
"""

from __future__ import annotations

import wasmtime

from ..host.log import get_logger
from .disk_quota import DiskQuota
from .fd_ledger import FdLedger
from .notebook_overlay import NotebookOverlay
from .wasi_shadows import ReaddirListings

log = get_logger("wasm_kernel.runtime")


class StartFiles:
    """The current start's ledger, overlay, listings and quota."""

    ledger: FdLedger
    quota: DiskQuota

    def __init__(self) -> None:
        self.overlay: NotebookOverlay | None = None
        self.listings = ReaddirListings()

    def begin(self, quota: DiskQuota) -> None:
        """A new start's files, its quota first (the start sets its ledger and overlay
        once its mounts are known)."""
        self.quota, self.overlay = quota, None
        self.listings = ReaddirListings()

    def settle_quota(self, store: wasmtime.Store) -> None:
        """Count the turn's lazily counted writes now: the host may change files and
        a rollback may move descriptors before the next turn (disk_quota.py), and a
        `python` child writes to the same ledger from here on (child_python.py)."""
        quota = self.quota
        try:
            quota.settle_all(store)
        except Exception as err:  # count the trees again rather than trust a guess
            log.warning("guest.quota_settle_failed", error=str(err))
            quota.unsettled, quota.unsettled_bytes = {}, 0
            quota.at_end.clear()
            quota.measure()
        # Between turns this writer holds no reservation: the drive, the magics and
        # the session's other kernels may use all the room there is.
        quota.release()

    def close(self) -> None:
        """The start ends: the overlay's descriptor of the notebook's folder goes."""
        if self.overlay is not None:
            self.overlay.close()


__all__ = ["StartFiles"]
