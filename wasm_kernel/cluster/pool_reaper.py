"""The sandbox manager's sweeps: what a pool no longer needs is given back.

- Lost hosts (every `reap_every` seconds): a host in the pool's ZSET whose record
  lapsed has its sessions dropped in one Lua script (SessionStore.delete_host_tx);
  they answer 410 "the sandbox host was lost".
- Expired sessions (every `sweep_every`): a session past its `expires_at` has its
  kernel shut down on its host and its mapping dropped ("expired", 410), so an
  abandoned notebook stops holding a slot of the host's capacity.
- Orphaned kernels (every `sweep_every`): a kernel running on a live host that no
  session maps to (a create that died between the host and Redis, a delete that
  could not reach the host) is shut down once it has been seen unmapped for
  `orphan_grace_s`, longer than any create takes, so an in-flight create is never
  taken for an orphan.

Every sweep is idempotent: two managers running it side by side do no harm.
"""

from __future__ import annotations

import asyncio
import time

from prometheus_client import Counter

from ..host.log import get_logger
from .errors import SessionManagerError
from .records import UUID, now_ms
from .sandbox_manager import SandboxManager

log = get_logger("wasm_kernel.cluster")


class PoolReaper:
    def __init__(self, manager: SandboxManager, *, orphan_grace_s: float = 120.0) -> None:
        self.manager = manager
        self.store = manager.store
        self.orphan_grace_s = orphan_grace_s
        self._unmapped_since: dict[tuple[str, str], float] = {}
        registry = manager.registry
        self.hosts_lost = Counter("sandboxmgr_hosts_lost_total", "Hosts dropped for missing heartbeats",
                                  registry=registry)
        self.sessions_lost = Counter("sandboxmgr_sessions_lost_total", "Sessions dropped with their lost host",
                                     registry=registry)
        self.expired = Counter("sandboxmgr_sessions_expired_total", "Expired sessions whose kernels were stopped",
                               registry=registry)
        self.orphans = Counter("sandboxmgr_orphan_kernels_total", "Kernels no session mapped, stopped",
                               registry=registry)

    async def reap_lost_hosts(self) -> int:
        _live, lost = await self.store.hosts()
        total = 0
        for host_id in lost:
            count = await self.store.delete_host_tx(host_id)
            self.hosts_lost.inc()
            self.sessions_lost.inc(count)
            total += count
            log.warning("host.lost", host=host_id, sessions=count)
        return total

    async def sweep(self) -> tuple[int, int]:
        """(expired sessions stopped, orphaned kernels stopped) on the live hosts."""
        live, _lost = await self.store.hosts()
        expired = orphans = 0
        now = now_ms()
        seen: set[tuple[str, str]] = set()
        for host in live:
            sessions = await self.store.sessions_of_host(host.id)
            mapped = set()
            for record in sessions:
                if record.expires_at < now:
                    if await self.manager.delete(record.sandbox.id, reason="expired"):
                        expired += 1
                        self.expired.inc()
                        log.info("session.expired", session_id=record.session_id, host=host.id)
                else:
                    mapped.add(record.sandbox.kernel_id)
            try:
                running = await self.manager.host_call(host, "GET", "/api/kernels")
            except SessionManagerError:
                continue  # unreachable now: the heartbeat decides whether it is lost
            for kernel_id in _kernel_ids(running):
                if kernel_id in mapped:
                    continue
                key = (host.id, kernel_id)
                seen.add(key)
                first = self._unmapped_since.setdefault(key, time.monotonic())
                if time.monotonic() - first >= self.orphan_grace_s:
                    if await self.manager._stop_kernel(host, kernel_id):
                        orphans += 1
                        self.orphans.inc()
                        log.warning("kernel.orphan_stopped", host=host.id, kernel_id=kernel_id)
                    seen.discard(key)
        # Forget kernels that are mapped or gone now.
        self._unmapped_since = {k: v for k, v in self._unmapped_since.items() if k in seen}
        return expired, orphans

    async def run_forever(self, reap_every: float, sweep_every: float) -> None:
        next_sweep = time.monotonic() + sweep_every
        while True:
            try:
                await self.reap_lost_hosts()
                if time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + sweep_every
                    await self.sweep()
            except SessionManagerError as err:
                log.warning("host.reap_failed", error=err.message)
            await asyncio.sleep(reap_every)


def _kernel_ids(answer: object) -> list[str]:
    """The ids in a host's GET /api/kernels answer: untrusted, so only well-formed ones."""
    if not isinstance(answer, list):
        return []
    ids = (item.get("id") for item in answer[:10_000] if isinstance(item, dict))
    return [i for i in ids if isinstance(i, str) and UUID.fullmatch(i)]


__all__ = ["PoolReaper"]
