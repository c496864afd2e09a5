"""`wasm-kernel sandbox-manager`: the manager's configuration, its API and its sweeps
in one process.

SandboxManagerApp is a traitlets Application like the router's (service_app.py: a
config file, the command's flags, the environment variables as the traits'
defaults); it refuses to start, with one line, without the pool key, the hosts' and
its own API token, or a Redis URL with a password. Apart from sandbox_manager.py so
the reaper (which uses the manager) and the manager never import each other.
"""

from __future__ import annotations

from traitlets import Float

from ..host.log import get_logger
from .pool_reaper import PoolReaper
from .sandbox_manager import SandboxManager, make_app
from .service_app import PoolServiceApp

log = get_logger("wasm_kernel.cluster")


class SandboxManagerApp(PoolServiceApp):
    """Seed 004's sandboxMgr: creates sandboxes on the pool's hosts, maps sessions to them."""

    name = "wasm-kernel-sandbox-manager"
    description = "Create sandboxes on the pool's hosts and map sessions to them in Redis."
    service = "sandbox-manager"
    default_port = 8900

    reap_every = Float(1.0, help="Seconds between checks for lost hosts.").tag(config=True)
    sweep_every = Float(30.0, help="Seconds between sweeps for expired sessions and orphaned kernels.").tag(
        config=True)
    orphan_grace = Float(120.0, help="Seconds a kernel no session maps to may run before it is stopped.").tag(
        config=True)

    def prepare(self) -> None:
        self.pool_secrets = self.secrets()

    async def serve(self) -> None:
        secrets = self.pool_secrets
        manager = SandboxManager(self.session_store(), host_token=secrets.host_token)
        make_app(manager, secrets.manager_token).listen(self.port, address=self.ip)
        log.info("sandbox_manager.listening", ip=self.ip, port=self.port, config_files=self._loaded_config_files)
        reaper = PoolReaper(manager, orphan_grace_s=self.orphan_grace)
        await reaper.run_forever(self.reap_every, self.sweep_every)


__all__ = ["SandboxManagerApp"]
