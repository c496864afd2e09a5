"""The router: a Jupyter gateway (REST + websocket) in front of the pool.

`wasm-kernel router --redis URL --sandbox-manager URL --port P` (router_app.py: its
configuration, from traits, a config file and the environment). A Jupyter Server
started with `--GatewayClient.url=http://ROUTER` (and `--GatewayClient.auth_token`)
uses the pool unchanged, and so do JupyterLab, Notebook and nbclient through it:

    GET  /api/kernelspecs                  the wasm-python spec
    GET  /api/kernels                      this tenant's kernels
    POST /api/kernels                      {name, env}: a sandbox for the notebook
    GET|DELETE /api/kernels/{id}
    POST /api/kernels/{id}/interrupt|restart
    WS   /api/kernels/{id}/channels        relayed to the host's kernel

Which notebook: the kernel-start request's env, as Jupyter Server's gateway client
sends it. `JPY_SESSION_NAME` (the notebook's path; forward it with
`--GatewayClient.allowed_envs=JPY_SESSION_NAME`) is the notebook identity; without
it, `KERNEL_WORKING_DIR` (the notebook's folder, always sent). The tenant and the user
are the ones the request's token belongs to (router_identity.py), never a value the
client chose, so a kernel or session id alone never reaches another tenant's or
another user's sandbox. The same notebook of the same user reopened gets the same
session (the idempotency key), hence the same host and files.

Every request asks sessionMgr for the session's endpoint; errors answer with the
seed's table and a JSON body {code, message} that Jupyter shows. Activity
(requests, websocket traffic) refreshes the session's TTL, at most every few
seconds. A restart of a kernel whose host was lost lands on a live host (a new
sandbox under the same router kernel id).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
import uuid
from datetime import datetime, timezone
from typing import Any

from jupyter_client.jsonutil import json_default
from jupyter_client.session import Session
from prometheus_client import Counter
from tornado import web, websocket
from tornado.httpclient import HTTPRequest

from ..host.log import get_logger
from ..kernelspec import KERNEL_NAME
from .host_client import UNREACHABLE, HostCallFailed, call_host
from .errors import InvalidSessionID, RedisInternal, SessionGone, SessionManagerError, SessionNotFound, UpstreamUnavailable
from .json_handler import JsonErrorHandler, bearer
from .records import RouterKernel
from .router_identity import Caller, Identities
from .session_manager import GetSandboxBySessionRequest, GetSandboxBySessionResponse, SessionManager
from .session_store import GONE_MESSAGES, SessionStore

log = get_logger("wasm_kernel.cluster")

TOUCH_EVERY_S = 5.0
# A host that does not answer is, to the user, a lost host, before the manager has
# seen its heartbeat lapse (503 then, 410 after): one message either way.
HOST_LOST = GONE_MESSAGES["host_lost"]
JUPYTER_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"  # what jupyter_server writes and its gateway client reads
_KERNEL_ID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


class Router:
    def __init__(self, manager: SessionManager, *, host_token: str, namespace: str = "default") -> None:
        self.manager = manager
        self.store: SessionStore = manager.store
        self.host_token = host_token
        self.namespace = namespace
        self._touched: dict[str, float] = {}
        # At most every 5 s, and often enough for a short TTL to be refreshed in time.
        self.touch_every = min(TOUCH_EVERY_S, self.store.ttl_ms / 4000)
        # The router's own reads (its kernels' sessions) beside sessionMgr's seed metrics.
        self.redis_errors = Counter("router_redis_error_total", "Router requests that failed reading Redis",
                                    registry=manager.registry)

    # -- router kernels in Redis (stateless routers), signed: SessionStore keeps them -------

    async def save(self, kernel: RouterKernel) -> None:
        await self.store.save_router_kernel(kernel)

    async def load(self, kernel_id: str, caller: Caller) -> RouterKernel:
        try:
            kernel = await self.store.router_kernel(kernel_id)
        except RedisInternal:
            self.redis_errors.inc()
            raise
        if kernel is None or kernel.tenant != caller.tenant or kernel.principal != caller.principal:
            raise SessionNotFound(f"no such kernel: {kernel_id}")  # another tenant's or user's looks like none
        return kernel

    async def forget(self, kernel: RouterKernel) -> None:
        await self.store.forget_router_kernel(kernel)

    async def kernels_of(self, caller: Caller) -> list[RouterKernel]:
        found = []
        for kernel_id in await self.store.router_kernel_ids(caller.tenant, caller.principal):
            try:
                found.append(await self.load(kernel_id, caller))
            except SessionNotFound:
                await self.store.drop_router_kernel_id(caller.tenant, caller.principal, kernel_id)
        return found

    # -- sessions -----------------------------------------------------------------------

    async def sandbox_for_notebook(self, caller: Caller, notebook: str) -> GetSandboxBySessionResponse:
        """The notebook's sandbox for this caller: the one (tenant, principal, notebook)
        already has, or a new one. The manager derives the session's identity from all
        three, so the same path of another user or tenant is another session."""
        digest = hashlib.sha256(notebook.encode()).hexdigest()
        return await self.manager.get_sandbox_by_session(GetSandboxBySessionRequest(
            kind=KERNEL_NAME, name=digest, namespace=self.namespace, tenant=caller.tenant,
            principal=caller.principal, idempotency_key=f"notebook:{digest}",
        ))

    async def sandbox_of(self, kernel: RouterKernel) -> GetSandboxBySessionResponse:
        found = await self.manager.get_sandbox_by_session(GetSandboxBySessionRequest(
            kernel.session_id, tenant=kernel.tenant, principal=kernel.principal))
        await self.touch(kernel.session_id)
        return found

    async def sandbox_or_moved(self, kernel: RouterKernel, caller: Caller) -> GetSandboxBySessionResponse:
        """The kernel's sandbox; if its host was drained (its state saved), a new one
        on a live host, under the same kernel id: the notebook's next request is all
        it takes, and with a shared root the kernel there resumes the saved state."""
        try:
            return await self.sandbox_of(kernel)
        except SessionGone as err:
            if err.reason != "drained":
                raise
        found = await self.sandbox_for_notebook(caller, kernel.notebook)
        kernel.session_id = found.session_id
        await self.save(kernel)
        log.info("router.drained_moved", kernel_id=kernel.id, session_id=found.session_id)
        return found

    async def touch(self, session_id: str) -> None:
        now = time.monotonic()
        if now - self._touched.get(session_id, 0.0) >= self.touch_every:
            self._touched[session_id] = now
            await self.store.touch(session_id)

    async def close(self, kernel: RouterKernel, caller: Caller) -> None:
        """A kernel closed: its sandbox's host kernel shut down (capacity freed), unless
        another kernel of the same owner (a sharing group, a second client) uses it."""
        await self.forget(kernel)
        others = [k for k in await self.kernels_of(caller) if k.session_id == kernel.session_id]
        if others:
            return
        try:
            found = await self.manager.get_sandbox_by_session(GetSandboxBySessionRequest(
                kernel.session_id, tenant=kernel.tenant, principal=kernel.principal))
        except SessionManagerError:
            return  # already gone, or its host was lost (the reaper drops it)
        await self.manager.delete_sandbox(found.sandbox_id)

    # -- hosts' REST ----------------------------------------------------------------------

    async def host_call(self, endpoint: str, method: str, path: str, body: Any = None, timeout: float = 60) -> Any:
        try:
            return await call_host(endpoint, self.host_token, method, path, body, timeout)
        except HostCallFailed as err:
            if err.status == UNREACHABLE:
                raise UpstreamUnavailable(HOST_LOST) from None
            if err.status == 404:
                raise SessionGone("the sandbox's kernel is gone; restart the kernel to get a new sandbox") from None
            raise UpstreamUnavailable(f"the sandbox host refused the request ({err.status})") from None

    def model(self, kernel: RouterKernel, host_model: Any) -> dict[str, Any]:
        # A Jupyter Server's gateway client parses every model's last_activity
        # (strptime, Jupyter's own format) and answers 500 to GET /api/kernels on a
        # null: without the host's word, the kernel's start is its last known activity.
        started = datetime.fromtimestamp(kernel.created_at, timezone.utc).strftime(JUPYTER_TIME)
        model = {"id": kernel.id, "name": KERNEL_NAME, "last_activity": started, "execution_state": "starting",
                 "connections": 0}
        if isinstance(host_model, dict):  # a host's answer: only the fields we know, of the types we expect
            for k, kinds in (("last_activity", str), ("execution_state", str), ("connections", int)):
                if isinstance(host_model.get(k), kinds) and not isinstance(host_model.get(k), bool):
                    model[k] = host_model[k] if kinds is int else host_model[k][:64]
        return model


def notebook_identity(env: Any) -> str:
    """The notebook a kernel-start request is for (see the module docstring)."""
    if not isinstance(env, dict):
        return ""
    for name in ("JPY_SESSION_NAME", "KERNEL_WORKING_DIR"):
        value = env.get(name)
        if isinstance(value, str) and value and len(value) <= 4096:
            return f"{name}={value}"
    return ""


# -- HTTP -------------------------------------------------------------------------------


class _Base(JsonErrorHandler):
    service = "the router"
    router: Router
    identities: Identities
    caller: Caller

    def initialize(self, router: Router, identities: Identities) -> None:
        self.router = router
        self.identities = identities

    def prepare(self) -> None:
        caller = self.identities.caller(bearer(self.request.headers.get("Authorization", "")))
        if caller is None:
            self.fail(401, "unauthorized", "a token is required: Authorization: token <token>")
            return
        self.caller = caller


class KernelSpecsHandler(_Base):
    def get(self) -> None:
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
        self.finish({"default": KERNEL_NAME, "kernelspecs": {KERNEL_NAME: {
            "name": KERNEL_NAME, "spec": {"argv": [], "display_name": spec.display_name, "language": spec.language,
                                         "metadata": spec.metadata, "interrupt_mode": spec.interrupt_mode},
            "resources": {}}}})


class KernelsHandler(_Base):
    async def get(self) -> None:
        kernels = await self.router.kernels_of(self.caller)
        # Each kernel's host is asked at once: a gateway server takes execution_state
        # and last_activity from this list (its culler and JupyterLab's kernel list).
        models = await asyncio.gather(*(self._host_model(k) for k in kernels))
        self.finish(json.dumps([self.router.model(k, m) for k, m in zip(kernels, models)]))

    async def _host_model(self, kernel: RouterKernel) -> Any:
        try:  # not sandbox_of(): a list polled by a culler must not keep idle sessions alive
            found = await self.router.manager.get_sandbox_by_session(GetSandboxBySessionRequest(
                kernel.session_id, tenant=kernel.tenant, principal=kernel.principal))
            return await self.router.host_call(found.endpoint, "GET", f"/api/kernels/{found.kernel_id}", timeout=10)
        except SessionManagerError:  # gone, moved or its host unreachable: the model without the host's word
            return None

    async def post(self) -> None:
        body = self.json_body({})
        name = (body.get("name") or KERNEL_NAME) if isinstance(body, dict) else None
        if name != KERNEL_NAME:
            self.fail(400, "bad_request", f"this gateway serves only the {KERNEL_NAME} kernel")
            return
        # No notebook named: a kernel of its own (a fresh idempotency key).
        notebook = notebook_identity(body.get("env")) or f"kernel={uuid.uuid4()}"
        found = await self.router.sandbox_for_notebook(self.caller, notebook)
        kernel = RouterKernel(str(uuid.uuid4()), self.caller.tenant, self.caller.principal, found.session_id,
                              notebook, time.time())
        await self.router.save(kernel)
        log.info("router.kernel_started", kernel_id=kernel.id, session_id=found.session_id, endpoint=found.endpoint)
        self.set_status(201)
        self.finish(self.router.model(kernel, None))


class KernelHandler(_Base):
    async def get(self, kernel_id: str) -> None:
        kernel = await self.router.load(kernel_id, self.caller)
        found = await self.router.sandbox_or_moved(kernel, self.caller)
        host_model = await self.router.host_call(found.endpoint, "GET", f"/api/kernels/{found.kernel_id}")
        self.finish(self.router.model(kernel, host_model))

    async def delete(self, kernel_id: str) -> None:
        kernel = await self.router.load(kernel_id, self.caller)
        # Closing frees: the host kernel shuts down, its slot returns to the pool. The
        # session's files stay on the host (its workspace is keyed on the notebook's
        # identity there), so the notebook reopened finds them.
        await self.router.close(kernel, self.caller)
        self.set_status(204)
        self.finish()


class KernelActionHandler(_Base):
    async def post(self, kernel_id: str, action: str) -> None:
        kernel = await self.router.load(kernel_id, self.caller)
        try:
            found = await self.router.sandbox_or_moved(kernel, self.caller)
            host_model = await self.router.host_call(found.endpoint, "POST",
                                                     f"/api/kernels/{found.kernel_id}/{action}")
        except (SessionGone, UpstreamUnavailable):
            if action != "restart":
                raise
            # The host was lost: a restart lands on a live host, under the same kernel id.
            found = await self.router.sandbox_for_notebook(self.caller, kernel.notebook)
            kernel.session_id = found.session_id
            await self.router.save(kernel)
            host_model = None
            log.warning("router.restart_moved", kernel_id=kernel.id, session_id=found.session_id,
                        endpoint=found.endpoint)
        if action == "interrupt":
            self.set_status(204)
            self.finish()
            return
        self.finish(self.router.model(kernel, host_model))


class ChannelsHandler(websocket.WebSocketHandler, _Base):
    """Relays one client's websocket to the kernel's on its host, frame for frame."""

    upstream: websocket.WebSocketClientConnection | None = None

    def initialize(self, router: Router, identities: Identities) -> None:  # type: ignore[override]
        _Base.initialize(self, router, identities)
        self.upstream = None
        self.kernel: RouterKernel | None = None
        # execute_requests sent and not answered yet, by msg_id: if the host goes
        # away, each is answered here, so a cell (and nbclient) ends with one line.
        self.pending: dict[str, dict[str, Any]] = {}

    def select_subprotocol(self, subprotocols: list[str]) -> str | None:
        return None  # the legacy JSON protocol, as Jupyter Server's gateway client asks

    def check_origin(self, origin: str) -> bool:
        return True  # a server-to-server connection, authenticated by its token

    async def get(self, kernel_id: str) -> None:  # type: ignore[override]
        _Base.prepare(self)
        if self._finished:
            return
        try:
            self.kernel = await self.router.load(kernel_id, self.caller)
            found = await self.router.sandbox_or_moved(self.kernel, self.caller)
        except SessionManagerError as err:
            self.fail_with(err)
            return
        url = found.endpoint.replace("http", "ws", 1) + f"/api/kernels/{found.kernel_id}/channels"
        session = self.get_argument("session_id", "")
        if session:
            url += "?session_id=" + re.sub(r"[^A-Za-z0-9_-]", "", session)[:64]
        try:
            self.upstream = await websocket.websocket_connect(
                HTTPRequest(url, headers={"Authorization": f"token {self.router.host_token}"}, connect_timeout=10),
                on_message_callback=self._from_kernel,
            )
        except Exception:
            self.fail_with(UpstreamUnavailable(HOST_LOST))
            return
        await super().get(kernel_id)

    def prepare(self) -> None:  # type: ignore[override]
        pass  # checked in get(): the websocket upgrade must not be finished by prepare

    def open(self, *args: str) -> None:
        # Small frames at once: tornado leaves Nagle's algorithm on, which with delayed
        # ACKs holds a reply ~40 ms (measured: every 1+1 over Jupyter Server's own
        # kernel websocket takes 44 ms, native ipykernel included).
        self.set_nodelay(True)

    def _from_kernel(self, message: str | bytes | None) -> None:
        if message is None:  # the host closed (a lost host, a shutdown)
            self._end_pending()
            if self.ws_connection is not None:
                self.close(1011, "the sandbox host closed the connection")
            return
        if self.pending and isinstance(message, str):
            parsed = _parsed(message)
            if _msg_type(parsed) == "execute_reply":
                parent = parsed.get("parent_header")
                if isinstance(parent, dict):
                    self.pending.pop(str(parent.get("msg_id", "")), None)
        if self.ws_connection is not None:
            self.write_message(message, binary=isinstance(message, bytes))

    def _end_pending(self) -> None:
        """Each unanswered execute_request gets HOST_LOST on stderr, an error reply and
        idle, as the kernel would have sent them for a failed cell."""
        if self.ws_connection is None:
            return
        for parent in self.pending.values():
            self.write_message(_message("iopub", "stream", parent, {"name": "stderr", "text": HOST_LOST + "\n"}))
            self.write_message(_message("shell", "execute_reply", parent, {
                "status": "error", "ename": "SandboxHostLost", "evalue": HOST_LOST, "traceback": [HOST_LOST],
                "execution_count": None, "user_expressions": {}, "payload": []}))
            self.write_message(_message("iopub", "status", parent, {"execution_state": "idle"}))
        self.pending.clear()

    async def on_message(self, message: str | bytes) -> None:
        if isinstance(message, str):
            parsed = _parsed(message)
            header = parsed.get("header")
            if _msg_type(parsed) == "execute_request" and isinstance(header, dict) and isinstance(header.get("msg_id"), str):
                self.pending[header["msg_id"]] = header
        if self.upstream is not None:
            await self.upstream.write_message(message, binary=isinstance(message, bytes))
        if self.kernel is not None:
            try:
                await self.router.touch(self.kernel.session_id)
            except SessionManagerError:
                pass

    def on_close(self) -> None:
        if self.upstream is not None:
            self.upstream.close()


def _parsed(message: str) -> dict[str, Any]:
    """A text frame of the kernel websocket's JSON protocol (one message, as Jupyter
    Server's gateway client sends it), or {} if it is not one: a peer's frame is read,
    never trusted to be well formed. Binary frames (messages with buffers) are relayed
    unread."""
    try:
        value = json.loads(message)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _msg_type(message: dict[str, Any]) -> str | None:
    header = message.get("header")
    msg_type = header.get("msg_type") if isinstance(header, dict) else None
    return msg_type if isinstance(msg_type, str) else None


# The router's own messages (a lost host's replies), made by jupyter_client's Session:
# its header, its protocol version, its date format. Unsigned: the websocket's JSON
# frames carry no signature (Jupyter Server signs on its ZeroMQ side only).
_SESSION = Session(username="wasm-kernel-router", key=b"")


def _message(channel: str, msg_type: str, parent: dict[str, Any], content: dict[str, Any]) -> str:
    msg = _SESSION.msg(msg_type, content, parent=parent)
    msg["header"]["session"] = str(parent.get("session", ""))  # the client's session, as the kernel's replies have
    msg["channel"] = channel
    msg["buffers"] = []
    return json.dumps(msg, default=json_default)


class MalformedIdHandler(_Base):
    """A kernel path whose id is not a canonical UUID: the seed's InvalidSessionID."""

    def _refuse(self, *_: str) -> None:
        if not self._finished:
            self.fail_with(InvalidSessionID("the kernel id is not a canonical UUID"))

    get = post = delete = _refuse  # type: ignore[assignment]


class HealthHandler(_Base):
    def prepare(self) -> None:  # open: a load balancer's probe carries no token
        pass

    async def get(self) -> None:
        try:
            await self.router.store.ping()
        except Exception:  # whatever it is, the probe says unavailable
            self.fail(503, RedisInternal.code, "the session store (Redis) is unavailable")
            return
        self.finish({"status": "ok"})


class MetricsHandler(_Base):
    def prepare(self) -> None:
        pass

    def get(self) -> None:
        from prometheus_client import generate_latest

        self.set_header("Content-Type", "text/plain; version=0.0.4")
        self.finish(generate_latest(self.router.manager.registry))


def make_app(router: Router, identities: Identities) -> web.Application:
    args = {"router": router, "identities": identities}
    return web.Application([
        (r"/api/kernelspecs", KernelSpecsHandler, args),
        (r"/api/kernels", KernelsHandler, args),
        (rf"/api/kernels/({_KERNEL_ID})", KernelHandler, args),
        (rf"/api/kernels/({_KERNEL_ID})/(interrupt|restart)", KernelActionHandler, args),
        (rf"/api/kernels/({_KERNEL_ID})/channels", ChannelsHandler, args),
        (r"/api/kernels/([^/]+)(?:/.*)?", MalformedIdHandler, args),
        (r"/healthz", HealthHandler, args),
        (r"/metrics", MetricsHandler, args),
    ])


__all__ = ["Router", "RouterKernel", "make_app", "notebook_identity"]
