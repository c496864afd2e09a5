"""sandboxMgr (seed 004): creates sandboxes on the pool's hosts and writes the mapping.

`wasm-kernel sandbox-manager --redis URL --port P` serves:

    POST   /v1/sandboxes          {kind, name, namespace, tenant, idempotency_key?}
                                  -> {session_id, sandbox: {id, endpoint, kernel_id}}
    DELETE /v1/sandboxes/{id}     the sandbox's kernel stopped, its mapping dropped
    GET    /healthz               Redis reachable and how many hosts are live
    GET    /metrics               Prometheus text

A create picks the live host with the most room, starts a wasm-python kernel there
through the host's Jupyter session API (so the kernel gets a notebook identity and
its host-side session is the same each time the same notebook of the same tenant
comes back), and writes the mapping with the seed's primitives: the session lock
(SET NX PX), BindSessionWithSandbox (MULTI/EXEC). Beyond the seed (5.2), a request
with an idempotency key returns the sandbox that key already made while it lives,
and concurrent requests with one key make one sandbox (a lock per key).

A loop drops the mappings of hosts that stopped heartbeating, each host in one
Lua script (DeleteSessionBySandboxIDTx's sibling, SessionStore.delete_host_tx):
their sessions then answer 410 "the sandbox host was lost".
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from tornado import web

from ..host.log import get_logger
from .host_client import UNREACHABLE, HostCallFailed, call_host
from .json_handler import JsonErrorHandler
from .errors import CreateSandboxFailed, RedisInternal, SessionManagerError, UpstreamUnavailable
from .session_store import HostInfo, Sandbox, SessionRecord, SessionStore, now_ms

log = get_logger("wasm_kernel.cluster")

KINDS = ("wasm-python",)
_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
LOCK_MS = 60_000  # longer than a kernel start on a loaded host
HOST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CreateRequest:
    kind: str
    namespace: str
    name: str = ""
    tenant: str = ""
    idempotency_key: str = ""

    @classmethod
    def parse(cls, body: Any) -> CreateRequest:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object: {kind, namespace, name?, tenant?, idempotency_key?}")
        fields = {k: body.get(k, "") for k in ("kind", "namespace", "name", "tenant", "idempotency_key")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise BadRequest("kind, namespace, name, tenant and idempotency_key must be strings")
        req = cls(**fields)
        if req.kind not in KINDS:
            raise BadRequest(f"kind must be one of {', '.join(KINDS)}, got {req.kind[:40]!r}")
        if not req.namespace:
            raise BadRequest("namespace is required")
        if req.tenant and not _TENANT.fullmatch(req.tenant):
            raise BadRequest("tenant must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
        if len(req.idempotency_key) > 512:
            raise BadRequest("idempotency_key is longer than 512 characters")
        return req


class BadRequest(SessionManagerError):
    code = "bad_request"
    status = 400


class SandboxManager:
    def __init__(self, store: SessionStore, *, host_token: str, registry: CollectorRegistry | None = None) -> None:
        self.store = store
        self.host_token = host_token
        self.registry = registry if registry is not None else CollectorRegistry()
        self.created = Counter("sandboxmgr_create_total", "Sandboxes created", registry=self.registry)
        self.reused = Counter("sandboxmgr_idempotent_reuse_total", "Creates answered by an idempotency key's sandbox",
                              registry=self.registry)
        self.failed = Counter("sandboxmgr_create_error_total", "Creates that failed", ["code"], registry=self.registry)
        self.deleted = Counter("sandboxmgr_delete_total", "Sandboxes deleted", registry=self.registry)
        self.hosts_lost = Counter("sandboxmgr_hosts_lost_total", "Hosts dropped for missing heartbeats",
                                  registry=self.registry)
        self.sessions_lost = Counter("sandboxmgr_sessions_lost_total", "Sessions dropped with their lost host",
                                     registry=self.registry)
        self.create_latency = Histogram("sandboxmgr_create_latency_seconds", "Create latency",
                                        registry=self.registry)

    # -- create ---------------------------------------------------------------------

    async def create(self, req: CreateRequest) -> SessionRecord:
        with self.create_latency.time():
            try:
                if not req.idempotency_key:
                    record = await self._create_new(req)
                else:
                    record = await self._create_idempotent(req)
            except SessionManagerError as err:
                self.failed.labels(err.code).inc()
                raise
        return record

    async def _create_idempotent(self, req: CreateRequest) -> SessionRecord:
        key = hashlib.sha256(req.idempotency_key.encode()).hexdigest()
        owner = secrets.token_hex(8)
        lock_id = f"idem-{req.tenant}-{key}"
        deadline = asyncio.get_running_loop().time() + HOST_TIMEOUT_S
        while True:
            existing = await self._existing(req.tenant, key)
            if existing is not None:
                self.reused.inc()
                return existing
            if await self.store.set_session_lock_if_absent(lock_id, owner, LOCK_MS):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise CreateSandboxFailed("another request with this idempotency key is still creating its sandbox")
            await asyncio.sleep(0.05)
        try:
            existing = await self._existing(req.tenant, key)
            if existing is not None:
                self.reused.inc()
                return existing
            record = await self._create_new(req)
            await self.store.remember_idempotent(req.tenant, key, record.session_id)
            return record
        finally:
            await self.store.release_session_lock(lock_id, owner)

    async def _existing(self, tenant: str, key: str) -> SessionRecord | None:
        session_id = await self.store.idempotent_session(tenant, key)
        if session_id is None:
            return None
        try:
            return await self.store.get_sandbox_by_session_id(session_id, tenant=tenant)
        except RedisInternal:
            raise
        except SessionManagerError:
            return None  # expired or its host was lost: a new one

    async def _create_new(self, req: CreateRequest) -> SessionRecord:
        host = await self._pick_host()
        session_id = str(uuid.uuid4())
        owner = secrets.token_hex(8)
        if not await self.store.set_session_lock_if_absent(session_id, owner, LOCK_MS):
            raise CreateSandboxFailed("the new session id is already being created")  # a uuid4 collision
        try:
            # The host-side notebook: one per tenant and notebook name, by digest, so no
            # client text becomes a path, and the same notebook finds the same session.
            digest = hashlib.sha256(f"{req.namespace}\0{req.name or session_id}".encode()).hexdigest()[:32]
            path = f"pool/{req.tenant or 'default'}/{digest}.ipynb"
            answer = await self._host_call(host, "POST", "/api/sessions", {
                "path": path, "type": "notebook", "name": f"{digest}.ipynb", "kernel": {"name": KINDS[0]},
            })
            try:
                kernel_id = str(answer["kernel"]["id"])
            except (KeyError, TypeError):
                raise CreateSandboxFailed(f"host {host.id} answered without a kernel") from None
            now = now_ms()
            record = SessionRecord(
                session_id=session_id,
                sandbox=Sandbox(id=f"sb-{uuid.uuid4().hex}", endpoint=host.endpoint, host_id=host.id,
                                kernel_id=kernel_id),
                tenant=req.tenant, created_at=now, expires_at=now + self.store.ttl_ms,
            )
            await self.store.bind_session_with_sandbox(record)
        finally:
            await self.store.release_session_lock(session_id, owner)
        self.created.inc()
        log.info("sandbox.created", session_id=session_id, host=host.id, kernel_id=kernel_id)
        return record

    async def _pick_host(self) -> HostInfo:
        live, _lost = await self.store.hosts()
        room = [h for h in live if h.free > 0]
        if not room:
            raise UpstreamUnavailable("no sandbox host has room for another kernel; try again later")
        return max(room, key=lambda h: (h.free, secrets.randbits(16)))

    # -- delete ---------------------------------------------------------------------

    async def delete(self, sandbox_id: str) -> bool:
        session_id = await self.store.redis.get(self.store.key("sandbox", sandbox_id))
        if session_id is None:
            return False
        raw = await self.store.redis.get(self.store.key("session", session_id))
        if raw is not None:
            record = SessionRecord.from_json(raw)
            live, _ = await self.store.hosts()
            host = next((h for h in live if h.id == record.sandbox.host_id), None)
            if host is not None:
                try:
                    await self._host_call(host, "DELETE", f"/api/kernels/{record.sandbox.kernel_id}")
                except SessionManagerError as err:
                    log.warning("sandbox.kernel_delete_failed", sandbox_id=sandbox_id, error=err.message)
        gone = await self.store.delete_session_by_sandbox_id_tx(sandbox_id, reason="deleted")
        if gone is not None:
            self.deleted.inc()
        return gone is not None

    # -- lost hosts -----------------------------------------------------------------

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

    async def reap_forever(self, every_s: float) -> None:
        while True:
            try:
                await self.reap_lost_hosts()
            except RedisInternal as err:
                log.warning("host.reap_failed", error=err.message)
            await asyncio.sleep(every_s)

    # -- hosts' REST ------------------------------------------------------------------

    async def _host_call(self, host: HostInfo, method: str, path: str, body: Any = None) -> Any:
        try:
            return await call_host(host.endpoint, self.host_token, method, path, body, HOST_TIMEOUT_S)
        except HostCallFailed as err:
            if err.status == UNREACHABLE:
                raise UpstreamUnavailable(f"sandbox host {host.id} is unreachable") from None
            raise CreateSandboxFailed(f"sandbox host {host.id} refused ({err.status})") from None


# -- HTTP --------------------------------------------------------------------------------


class _Handler(JsonErrorHandler):
    service = "the sandbox manager"
    manager: SandboxManager
    token: str

    def initialize(self, manager: SandboxManager, token: str) -> None:
        self.manager = manager
        self.token = token

    def prepare(self) -> None:
        if self.token and not secrets.compare_digest(self.request.headers.get("Authorization", ""),
                                                     f"token {self.token}"):
            self.fail(401, "unauthorized", "a token is required: Authorization: token <token>")


class SandboxesHandler(_Handler):
    async def post(self) -> None:
        try:
            body = json.loads(self.request.body or b"null")
        except ValueError:
            self.fail(400, "bad_request", "the body is not JSON")
            return
        record = await self.manager.create(CreateRequest.parse(body))
        self.set_status(201)
        self.finish({"session_id": record.session_id, "sandbox": {
            "id": record.sandbox.id, "endpoint": record.sandbox.endpoint, "kernel_id": record.sandbox.kernel_id}})


class SandboxHandler(_Handler):
    async def delete(self, sandbox_id: str) -> None:
        if not await self.manager.delete(sandbox_id):
            self.fail(404, "sandbox_not_found", "no such sandbox")
            return
        self.set_status(204)
        self.finish()


class HealthHandler(_Handler):
    def prepare(self) -> None:  # open: a load balancer's probe carries no token
        pass

    async def get(self) -> None:
        try:
            await self.manager.store.redis.ping()
            live, _ = await self.manager.store.hosts()
        except Exception:
            self.fail(503, RedisInternal.code, "the session store (Redis) is unavailable")
            return
        self.finish({"status": "ok", "live_hosts": len(live)})


class MetricsHandler(_Handler):
    def prepare(self) -> None:  # scraped by Prometheus; counts only, no session data
        pass

    def get(self) -> None:
        self.set_header("Content-Type", "text/plain; version=0.0.4")
        self.finish(generate_latest(self.manager.registry))


def make_app(manager: SandboxManager, token: str) -> web.Application:
    args = {"manager": manager, "token": token}
    return web.Application([
        (r"/v1/sandboxes", SandboxesHandler, args),
        (r"/v1/sandboxes/([A-Za-z0-9_-]{1,80})", SandboxHandler, args),
        (r"/healthz", HealthHandler, args),
        (r"/metrics", MetricsHandler, args),
    ])


TOKEN_ENV = "WASM_KERNEL_MANAGER_TOKEN"
HOST_TOKEN_ENV = "WASM_KERNEL_HOST_TOKEN"


def run_manager(args: Any) -> int:
    import os
    import sys

    from .session_store import connect

    token = os.environ.get(TOKEN_ENV, "")
    host_token = os.environ.get(HOST_TOKEN_ENV, "")
    if not host_token:
        print(f"wasm-kernel sandbox-manager: set ${HOST_TOKEN_ENV} to the hosts' token", file=sys.stderr)
        return 1

    async def serve() -> None:
        store = SessionStore(connect(args.redis), ttl_s=args.session_ttl)
        manager = SandboxManager(store, host_token=host_token)
        make_app(manager, token).listen(args.port, address=args.ip)
        log.info("sandbox_manager.listening", ip=args.ip, port=args.port)
        await manager.reap_forever(args.reap_every)

    asyncio.run(serve())
    return 0


__all__ = ["BadRequest", "CreateRequest", "SandboxManager", "make_app", "run_manager"]
