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
import secrets
import uuid
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from tornado import web

from ..host.log import get_logger
from .host_client import HOST_FULL, UNREACHABLE, HostCallFailed, call_host
from .json_handler import JsonErrorHandler, token_matches
from .errors import (
    CreateSandboxFailed, NoCapacity, RedisInternal, SessionManagerError, SessionNotFound, UpstreamUnavailable,
)
from .records import (
    PRINCIPAL, TENANT, UUID, HostInfo, Sandbox, SessionRecord, host_notebook_path, now_ms, session_identity,
)
from .session_store import SessionStore

log = get_logger("wasm_kernel.cluster")

KINDS = ("wasm-python",)
LOCK_MS = 60_000  # longer than a kernel start on a loaded host
HOST_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class CreateRequest:
    """A create for one (tenant, principal, notebook). The router fills tenant and
    principal from the caller's credentials; `name` is the notebook identity."""

    kind: str
    namespace: str
    tenant: str
    principal: str
    name: str = ""
    idempotency_key: str = ""

    @classmethod
    def parse(cls, body: Any) -> CreateRequest:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object: {kind, namespace, tenant, principal, name?, "
                             "idempotency_key?}")
        fields = {k: body.get(k, "") for k in ("kind", "namespace", "name", "tenant", "principal",
                                               "idempotency_key")}
        if not all(isinstance(v, str) for v in fields.values()):
            raise BadRequest("kind, namespace, name, tenant, principal and idempotency_key must be strings")
        req = cls(**fields)
        if req.kind not in KINDS:
            raise BadRequest(f"kind must be one of {', '.join(KINDS)}")
        if not req.namespace or len(req.namespace) > 200:
            raise BadRequest("namespace is required (at most 200 characters)")
        if not TENANT.fullmatch(req.tenant):
            raise BadRequest("tenant is required: 1-64 letters, digits, '.', '_' or '-', starting with a letter "
                             "or digit")
        if not PRINCIPAL.fullmatch(req.principal):
            raise BadRequest("principal is required: user:NAME or group:NAME, NAME 1-64 letters, digits or "
                             "'._@+-'")
        if len(req.name) > 5000 or len(req.idempotency_key) > 512:
            raise BadRequest("name is longer than 5000 characters or idempotency_key longer than 512")
        return req


class HostFull(NoCapacity):
    """One host refused a kernel for want of room (the manager then tries another)."""


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
        self.drained = Counter("sandboxmgr_drained_sessions_total", "Sessions moved off drained hosts",
                               registry=self.registry)
        self.create_latency = Histogram("sandboxmgr_create_latency_seconds", "Create latency",
                                        registry=self.registry)

    # -- create ---------------------------------------------------------------------

    async def create(self, req: CreateRequest) -> SessionRecord:
        with self.create_latency.time():
            try:
                if not req.idempotency_key:
                    record = await self._create_new(req, session_identity(req.tenant, req.principal, req.namespace,
                                                                          f"unnamed:{uuid.uuid4()}"))
                else:
                    record = await self._create_idempotent(req)
            except SessionManagerError as err:
                self.failed.labels(err.code).inc()
                raise
        return record

    async def _create_idempotent(self, req: CreateRequest) -> SessionRecord:
        identity = session_identity(req.tenant, req.principal, req.namespace, req.idempotency_key)
        owner = secrets.token_hex(8)
        lock_id = f"idem-{identity}"
        deadline = asyncio.get_running_loop().time() + HOST_TIMEOUT_S
        while True:
            existing = await self._existing(req, identity)
            if existing is not None:
                self.reused.inc()
                return existing
            if await self.store.set_session_lock_if_absent(lock_id, owner, LOCK_MS):
                break
            if asyncio.get_running_loop().time() > deadline:
                raise CreateSandboxFailed("another request for this notebook is still creating its sandbox")
            await asyncio.sleep(0.05)
        try:
            existing = await self._existing(req, identity)
            if existing is not None:
                self.reused.inc()
                return existing
            record = await self._create_new(req, identity)
            await self.store.remember_idempotent(req.tenant, identity, record.session_id)
            return record
        finally:
            await self.store.release_session_lock(lock_id, owner)

    async def _existing(self, req: CreateRequest, identity: str) -> SessionRecord | None:
        session_id = await self.store.idempotent_session(req.tenant, identity)
        if session_id is None:
            return None
        try:
            record = await self.store.get_sandbox_by_session_id(session_id, req.tenant, req.principal)
        except RedisInternal:
            raise
        except SessionManagerError:
            return None  # expired, deleted or its host was lost: a new one
        if record.identity != identity:  # a key in Redis pointing at another notebook's session
            log.warning("record.invalid", kind="idem", key=identity, why="points at another identity")
            return None
        if await self.store.host(record.sandbox.host_id) is None:
            return None  # its host stopped beating: the reaper will drop it; start anew
        return record

    async def _create_new(self, req: CreateRequest, identity: str) -> SessionRecord:
        home = await self.store.home_host(req.tenant, identity)
        full: set[str] = set()
        while True:  # a host that says it is full (creates racing for its last slot): the next one
            host = await self._pick_host(home, skip=full)
            try:
                return await self._create_on(host, req, identity)
            except HostFull:
                full.add(host.id)

    async def _create_on(self, host: HostInfo, req: CreateRequest, identity: str) -> SessionRecord:
        session_id = str(uuid.uuid4())
        owner = secrets.token_hex(8)
        if not await self.store.set_session_lock_if_absent(session_id, owner, LOCK_MS):
            raise CreateSandboxFailed("the new session id is already being created")  # a uuid4 collision
        kernel_id = ""
        try:
            # The host-side notebook: a folder of its own per (tenant, principal,
            # notebook), made by the host, so the kernel's read-only notebook folder
            # holds nothing else and the same notebook finds the same session.
            answer = await self.host_call(host, "POST", "/api/sessions", {
                "path": host_notebook_path(req.tenant, identity), "type": "notebook", "name": "notebook.ipynb",
                "kernel": {"name": KINDS[0]},
            })
            try:
                kernel_id = str(answer["kernel"]["id"])
            except (KeyError, TypeError):
                raise CreateSandboxFailed("the sandbox host answered without a kernel") from None
            if not UUID.fullmatch(kernel_id):
                raise CreateSandboxFailed("the sandbox host answered with a malformed kernel id")
            now = now_ms()
            record = SessionRecord(
                session_id=session_id,
                sandbox=Sandbox(id=f"sb-{uuid.uuid4().hex}", host_id=host.id, kernel_id=kernel_id),
                tenant=req.tenant, principal=req.principal, identity=identity, created_at=now,
                expires_at=now + self.store.ttl_ms,
            )
            await self.store.bind_session_with_sandbox(record)
        except BaseException:
            # A kernel no mapping names would hold a slot of the host's capacity forever.
            if UUID.fullmatch(kernel_id):
                await self._stop_kernel(host, kernel_id)
            raise
        finally:
            await self.store.release_session_lock(session_id, owner)
        self.created.inc()
        log.info("sandbox.created", session_id=session_id, host=host.id, kernel_id=kernel_id)
        return record

    async def _pick_host(self, home: str | None = None, skip: set[str] | frozenset[str] = frozenset()) -> HostInfo:
        """The notebook's previous host if it is live and has room (its files are
        there, unless the root is shared), else the live host with the most room."""
        live, _lost = await self.store.hosts()
        if not live:
            raise UpstreamUnavailable("no sandbox host is running; try again later")
        draining = await self.store.draining([h.id for h in live])
        live = [h for h in live if h.id not in skip and h.id not in draining]
        # A host reports its load at its next heartbeat; the sessions mapped to it count
        # at once, so creates in a row never overfill it.
        mapped = await self.store.session_counts([h.id for h in live])
        room = [h for h in live if h.capacity - max(h.load, mapped.get(h.id, 0)) > 0]
        if not room:
            raise NoCapacity("every sandbox host is full; try again when a notebook closes")
        return max(room, key=lambda h: (h.id == home, h.free, secrets.randbits(16)))

    # -- delete ---------------------------------------------------------------------

    async def delete(self, sandbox_id: str, reason: str = "deleted") -> bool:
        """The sandbox's kernel shut down on its host (capacity freed) and its mapping
        dropped. False if there is no such sandbox."""
        session_id = await self.store.session_of_sandbox(sandbox_id)
        if session_id is None:
            return False
        record = await self.store.session_record(session_id)
        if record is not None and record.sandbox.id == sandbox_id:
            host = await self.store.host(record.sandbox.host_id)
            if host is not None:
                await self._stop_kernel(host, record.sandbox.kernel_id)
        gone = await self.store.delete_session_by_sandbox_id_tx(sandbox_id, reason=reason)
        if gone is not None:
            self.deleted.inc()
        return gone is not None

    async def drain(self, host_id: str) -> int:
        """Empty a host for maintenance: no new session lands there, and each of its
        kernels is shut down as a notebook's shutdown does, which saves its
        interpreter (keep_state); only then is its session marked drained, so the
        router's next request for it starts it on a live host, where it resumes
        (with a shared root, where its files and saved state are). Returns how many
        sessions were drained. UpstreamUnavailable if the host is not live."""
        host = await self.store.host(host_id)
        if host is None:
            raise SessionNotFound("no such live sandbox host")
        await self.store.mark_draining(host_id)
        drained = 0
        for record in await self.store.sessions_of_host(host_id):
            await self._stop_kernel(host, record.sandbox.kernel_id)  # waits for the kernel's save
            if await self.store.delete_session_by_sandbox_id_tx(record.sandbox.id, reason="drained") is not None:
                drained += 1
        self.drained.inc(drained)
        log.info("host.drained", host=host_id, sessions=drained)
        return drained

    async def _stop_kernel(self, host: HostInfo, kernel_id: str) -> bool:
        try:
            await self.host_call(host, "DELETE", f"/api/kernels/{kernel_id}")
            return True
        except SessionManagerError as err:
            log.warning("sandbox.kernel_delete_failed", host=host.id, kernel_id=kernel_id, error=err.message)
            return False

    # -- hosts' REST ------------------------------------------------------------------

    async def host_call(self, host: HostInfo, method: str, path: str, body: Any = None) -> Any:
        try:
            return await call_host(host.endpoint, self.host_token, method, path, body, HOST_TIMEOUT_S)
        except HostCallFailed as err:
            # The host's id and address stay in the log: a tenant sees neither.
            log.warning("host.call_failed", host=host.id, method=method, status=err.status)
            if err.status == UNREACHABLE:
                raise UpstreamUnavailable("a sandbox host did not answer; try again shortly") from None
            if err.status == 404 and method == "DELETE":
                return None  # already gone: what a delete wants
            if HOST_FULL in err.body:
                raise HostFull(f"sandbox host {host.id} is full") from None
            raise CreateSandboxFailed(f"a sandbox host refused the request ({err.status})") from None


# -- HTTP --------------------------------------------------------------------------------


class _Handler(JsonErrorHandler):
    service = "the sandbox manager"
    manager: SandboxManager
    token: str

    def initialize(self, manager: SandboxManager, token: str) -> None:
        self.manager = manager
        self.token = token

    def prepare(self) -> None:
        if not token_matches(self.request.headers.get("Authorization", ""), self.token):
            self.fail(401, "unauthorized", "a token is required: Authorization: token <token>")


class SandboxesHandler(_Handler):
    async def post(self) -> None:
        record = await self.manager.create(CreateRequest.parse(self.json_body()))
        host = await self.manager.store.host(record.sandbox.host_id)
        self.set_status(201)
        self.finish({"session_id": record.session_id, "sandbox": {
            "id": record.sandbox.id, "host_id": record.sandbox.host_id, "kernel_id": record.sandbox.kernel_id,
            "endpoint": host.endpoint if host is not None else ""}})


class DrainHandler(_Handler):
    async def post(self, host_id: str) -> None:
        self.finish({"host_id": host_id, "drained_sessions": await self.manager.drain(host_id)})


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
            await self.manager.store.ping()
            live, _ = await self.manager.store.hosts()
        except Exception:  # whatever it is, the probe says unavailable
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
    if not token:
        raise ValueError("the sandbox manager's API needs a token")  # fail closed, never an open API
    args = {"manager": manager, "token": token}
    return web.Application([
        (r"/v1/sandboxes", SandboxesHandler, args),
        (r"/v1/sandboxes/(sb-[0-9a-f]{32})", SandboxHandler, args),
        # An admin's: host ids are HOST_ID's shape, checked by the route itself.
        (r"/v1/hosts/([A-Za-z0-9][A-Za-z0-9._:-]{0,127})/drain", DrainHandler, args),
        (r"/healthz", HealthHandler, args),
        (r"/metrics", MetricsHandler, args),
    ])


__all__ = ["BadRequest", "CreateRequest", "SandboxManager", "make_app"]
