"""`wasm-kernel router`: the router's configuration and its process.

RouterApp is a traitlets Application (service_app.py: a config file, the command's
flags, the environment variables as the traits' defaults). It checks every
credential before it serves, and refuses to start, with one line, without one:
the router's users (`tokens`), the pool key, the hosts' and the manager's tokens, a
Redis URL with a password. Then it serves router.py's handlers.

    # wasm_kernel_router_config.py (or --config FILE)
    c.RouterApp.redis_url = "redis://:PASSWORD@10.0.0.5:6379/0"
    c.RouterApp.sandbox_manager_url = "http://10.0.0.6:8900"
    c.RouterApp.tokens = ["course-a/*:A-TENANT-KEY-OF-32-CHARACTERS-OR-MORE"]
    c.RouterApp.share_groups = ["course-a/team1=alice,bob"]
"""

from __future__ import annotations

import asyncio
import os

from traitlets import List, Unicode, default

from ..host.log import get_logger
from .router import Router, make_app
from .router_identity import TOKENS_ENV, Identities, IdentityConfigError
from .service_app import ConfigProblem, PoolServiceApp
from .session_manager import SessionManager

log = get_logger("wasm_kernel.cluster")


class RouterApp(PoolServiceApp):
    """The Jupyter gateway in front of the pool."""

    name = "wasm-kernel-router"
    description = "A Jupyter gateway (kernelspecs, kernels, channels) in front of the pool of sandbox hosts."
    service = "router"
    default_port = 8888

    sandbox_manager_url = Unicode("", help="The sandbox manager's URL, e.g. http://127.0.0.1:8900.").tag(config=True)
    namespace = Unicode("default", help="The namespace of the sandboxes this router asks for.").tag(config=True)

    tokens = List(Unicode(), help=f"""Who may use the gateway: TENANT/USER:TOKEN entries (one user's token, 16+
        characters) or TENANT/*:KEY entries (a tenant key, 32+ characters, for tokens made per user by
        router_identity.user_token). Required: the router refuses to start without
        (${TOKENS_ENV} env var, comma-separated).""").tag(config=True)

    @default("tokens")
    def _tokens_default(self) -> list[str]:
        return [part.strip() for part in os.environ.get(TOKENS_ENV, "").split(",") if part.strip()]

    share_groups = List(Unicode(), help="""Users of a tenant who share sessions, TENANT/GROUP=USER,USER each: the
        same notebook reaches the same kernel and files. Without, no two users share anything.""").tag(config=True)

    SECRETS = (*PoolServiceApp.SECRETS, "tokens")

    identities: Identities

    def prepare(self) -> None:
        from_flags = "share_groups" in self.cli_config[type(self).__name__]
        try:
            self.identities = Identities(self.tokens, self.share_groups, source=self.source("tokens", TOKENS_ENV),
                                         groups_source="--share-group" if from_flags else self.source("share_groups"))
        except IdentityConfigError as err:
            raise ConfigProblem(str(err)) from None
        if not self.sandbox_manager_url:
            raise ConfigProblem("no sandbox manager: give --sandbox-manager URL, or c.RouterApp.sandbox_manager_url "
                                "in the config file")
        self.pool_secrets = self.secrets()

    async def serve(self) -> None:
        secrets = self.pool_secrets
        manager = SessionManager(self.session_store(), self.sandbox_manager_url, token=secrets.manager_token)
        router = Router(manager, host_token=secrets.host_token, namespace=self.namespace)
        make_app(router, self.identities).listen(self.port, address=self.ip)
        log.info("router.listening", ip=self.ip, port=self.port, config_files=self._loaded_config_files)
        await asyncio.Event().wait()


__all__ = ["RouterApp"]
