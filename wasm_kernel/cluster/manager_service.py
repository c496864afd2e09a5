"""`wasm-kernel sandbox-manager`: the manager's API and its sweeps in one process.

Apart from sandbox_manager.py so the reaper (which uses the manager) and the
manager never import each other.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..host.log import configure_service_logging, get_logger
from .sandbox_manager import SandboxManager, make_app
from .session_store import SessionStore

log = get_logger("wasm_kernel.cluster")


def run_manager(args: Any) -> int:
    from .credentials import MissingCredential, fail, service_secrets
    from .pool_reaper import PoolReaper
    from .session_store import connect

    try:
        secrets = service_secrets("sandbox-manager", args.redis, insecure_demo=args.insecure_demo)
    except MissingCredential as err:
        return fail("sandbox-manager", err)
    configure_service_logging()

    async def serve() -> None:
        store = SessionStore(connect(args.redis), key=secrets.pool_key, ttl_s=args.session_ttl)
        manager = SandboxManager(store, host_token=secrets.host_token)
        make_app(manager, secrets.manager_token).listen(args.port, address=args.ip)
        log.info("sandbox_manager.listening", ip=args.ip, port=args.port)
        reaper = PoolReaper(manager, orphan_grace_s=args.orphan_grace)
        await reaper.run_forever(args.reap_every, args.sweep_every)

    asyncio.run(serve())
    return 0


__all__ = ["run_manager"]
