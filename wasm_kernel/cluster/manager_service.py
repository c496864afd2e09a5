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
    from .credentials import (
        HOST_TOKEN_ENV, MANAGER_TOKEN_ENV, MissingCredential, check_redis_url, fail, pool_key, secret_from_env,
        warn_insecure_demo,
    )
    from .pool_reaper import PoolReaper
    from .session_store import connect

    try:
        check_redis_url(args.redis, insecure_demo=args.insecure_demo)
        key = pool_key()
        token = secret_from_env(MANAGER_TOKEN_ENV, "the sandbox manager's API token")
        host_token = secret_from_env(HOST_TOKEN_ENV, "the hosts' token")
    except MissingCredential as err:
        return fail("sandbox-manager", err)
    if args.insecure_demo:
        warn_insecure_demo("sandbox-manager", args.redis)
    configure_service_logging()

    async def serve() -> None:
        store = SessionStore(connect(args.redis), key=key, ttl_s=args.session_ttl)
        manager = SandboxManager(store, host_token=host_token)
        make_app(manager, token).listen(args.port, address=args.ip)
        log.info("sandbox_manager.listening", ip=args.ip, port=args.port)
        reaper = PoolReaper(manager, orphan_grace_s=args.orphan_grace)
        await reaper.run_forever(args.reap_every, args.sweep_every)

    asyncio.run(serve())
    return 0


__all__ = ["run_manager"]
