"""sessionMgr (seed 004): the router's one entry point, get_sandbox_by_session.

With a session id it reads Redis only (SessionStore.get_sandbox_by_session_id);
without one it asks sandboxMgr over HTTP to create a sandbox (POST /v1/sandboxes),
with a configurable timeout, retrying only when the request carries an idempotency
key (seed 004, 5.2: then a retry cannot make a second sandbox). It never writes
the mapping itself.

It raises exactly the seed's domain errors (errors.py), logs with structlog and
counts with prometheus-client under the seed's metric names, in a registry of its
own (`registry`, served by the router's /metrics).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from tornado.httpclient import HTTPClientError, HTTPRequest

from ..host.log import get_logger
from ..sessions.session_ids import validate_session_id
from .host_client import fetch
from .errors import (
    CreateSandboxFailed, InvalidSessionID, NoCapacity, RedisInternal, SessionManagerError, SessionNotFound,
    UpstreamUnavailable,
)
from .session_store import GONE_MESSAGES, SessionStore

log = get_logger("wasm_kernel.cluster")

MAX_NAME = 200  # seed 004, 3.3: an over-long name is cut, not refused


@dataclass(frozen=True)
class GetSandboxBySessionRequest:
    session_id: str = ""
    kind: str = "wasm-python"
    name: str = ""
    namespace: str = "default"
    tenant: str = ""
    principal: str = ""  # "user:NAME" or "group:NAME": whose session it is, within the tenant
    idempotency_key: str = ""  # beyond the seed (5.2): the notebook identity


@dataclass(frozen=True)
class GetSandboxBySessionResponse:
    session_id: str
    endpoint: str
    sandbox_id: str
    kernel_id: str  # the kernel on the host that `endpoint` names


class SessionManagerMetrics:
    """The seed's metrics (section 3), by their names."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.get_success = Counter("sessionmgr_get_by_session_success_total", "Lookups that found a sandbox",
                                   registry=registry)
        self.not_found = Counter("sessionmgr_session_not_found_total", "Lookups of a session that is not there",
                                 registry=registry)
        self.redis_error = Counter("sessionmgr_redis_error_total", "Lookups that failed in Redis", registry=registry)
        self.get_latency = Histogram("sessionmgr_get_by_session_latency_seconds",
                                     "Lookup latency, success and failure", registry=registry)
        self.create_success = Counter("sessionmgr_create_sandbox_success_total", "Sandboxes created",
                                      registry=registry)
        self.create_error = Counter("sessionmgr_create_sandbox_error_total", "Sandbox creations that failed",
                                    registry=registry)
        self.create_latency = Histogram("sessionmgr_create_sandbox_latency_seconds", "Sandbox creation latency",
                                        registry=registry)


class SessionManager:
    def __init__(self, store: SessionStore, sandbox_manager_url: str, *, create_timeout_s: float = 30.0,
                 create_retries: int = 2, token: str = "", registry: CollectorRegistry | None = None) -> None:
        self.store = store
        self.sandbox_manager_url = sandbox_manager_url.rstrip("/")
        self.create_timeout_s = create_timeout_s
        self.create_retries = create_retries
        self.token = token
        self.registry = registry if registry is not None else CollectorRegistry()
        self.metrics = SessionManagerMetrics(self.registry)

    async def get_sandbox_by_session(self, request: GetSandboxBySessionRequest) -> GetSandboxBySessionResponse:
        if request.session_id:
            return await self._existing(request)
        return await self._create(request)

    # -- a session id: Redis only -------------------------------------------------

    async def _existing(self, request: GetSandboxBySessionRequest) -> GetSandboxBySessionResponse:
        try:
            session_id = validate_session_id(request.session_id)
        except ValueError:
            raise InvalidSessionID("the session id is not a canonical UUID") from None
        start = time.perf_counter()
        try:
            record = await self.store.get_sandbox_by_session_id(session_id, request.tenant, request.principal)
            # The endpoint a token goes to comes from the host's own signed record,
            # never from the session record or any other text in Redis.
            host = await self.store.host(record.sandbox.host_id)
            if host is None:
                raise UpstreamUnavailable(GONE_MESSAGES["host_lost"])
        except SessionNotFound as err:
            self.metrics.not_found.inc()
            log.warning("session not found", session_id=session_id, code=err.code)
            raise
        except RedisInternal as err:
            self.metrics.redis_error.inc()
            log.error("get sandbox by session failed", session_id=session_id, err=err.message)
            raise
        finally:
            self.metrics.get_latency.observe(time.perf_counter() - start)
        self.metrics.get_success.inc()
        log.info("get sandbox by session success", session_id=session_id, endpoint=host.endpoint)
        return GetSandboxBySessionResponse(record.session_id, host.endpoint, record.sandbox.id,
                                           record.sandbox.kernel_id)

    # -- no session id: sandboxMgr over HTTP -----------------------------------------

    async def _create(self, request: GetSandboxBySessionRequest) -> GetSandboxBySessionResponse:
        if not request.kind or not request.namespace:
            self.metrics.create_error.inc()
            raise CreateSandboxFailed("a new sandbox needs a kind and a namespace")
        body = {"kind": request.kind, "name": request.name[:MAX_NAME], "namespace": request.namespace,
                "tenant": request.tenant, "principal": request.principal}
        if request.idempotency_key:
            body["idempotency_key"] = request.idempotency_key
        attempts = 1 + (self.create_retries if request.idempotency_key else 0)
        start = time.perf_counter()
        try:
            for attempt in range(attempts):
                try:
                    answer = await self._post(body)
                    break
                except UpstreamUnavailable:
                    if attempt + 1 == attempts:
                        raise
                    await asyncio.sleep(0.1 * (attempt + 1))
        except SessionManagerError as err:
            self.metrics.create_error.inc()
            log.error("create sandbox failed", code=err.code, err=err.message)
            raise
        finally:
            self.metrics.create_latency.observe(time.perf_counter() - start)
        try:
            sandbox = answer["sandbox"]
            host = await self.store.host(str(sandbox["host_id"]))
            if host is None:
                raise UpstreamUnavailable(GONE_MESSAGES["host_lost"])
            response = GetSandboxBySessionResponse(str(answer["session_id"]), host.endpoint, str(sandbox["id"]),
                                                   str(sandbox["kernel_id"]))
        except (KeyError, TypeError) as err:
            self.metrics.create_error.inc()
            raise CreateSandboxFailed(f"the sandbox manager's answer lacks {err}") from None
        self.metrics.create_success.inc()
        log.info("create sandbox success", session_id=response.session_id, endpoint=response.endpoint)
        return response

    async def delete_sandbox(self, sandbox_id: str) -> bool:
        """DELETE /v1/sandboxes/{id}: the host kernel shut down, the mapping dropped."""
        try:
            await self._request("DELETE", f"/v1/sandboxes/{sandbox_id}", None)
        except CreateSandboxFailed:
            return False  # 404: already gone
        return True

    async def _post(self, body: dict[str, str]) -> dict:
        answer = await self._request("POST", "/v1/sandboxes", body)
        if not isinstance(answer, dict):
            raise CreateSandboxFailed("the sandbox manager's answer is not an object")
        return answer

    async def _request(self, method: str, path: str, body: dict[str, str] | None) -> Any:
        headers = {"Content-Type": "application/json", "Authorization": f"token {self.token}"}
        req = HTTPRequest(f"{self.sandbox_manager_url}{path}", method=method,
                          body=None if body is None else json.dumps(body), headers=headers,
                          request_timeout=self.create_timeout_s, connect_timeout=2.0)
        try:
            resp = await fetch(req)  # a client of its own: see host_client.fetch
        except HTTPClientError as err:
            code = _error_code(err)
            if code == NoCapacity.code:
                raise NoCapacity(_error_message(err)) from None
            if err.code == 599 or err.code >= 502 and err.code != 500:
                raise UpstreamUnavailable(f"the sandbox manager is unavailable ({err.code}); try again shortly") \
                    from None
            raise CreateSandboxFailed(_error_message(err)) from None
        except OSError as err:
            log.warning("sandbox_manager.unreachable", error=str(err))
            raise UpstreamUnavailable("the sandbox manager is unavailable; try again shortly") from None
        try:
            return json.loads(resp.body) if resp.body else None
        except ValueError:
            raise CreateSandboxFailed("the sandbox manager's answer is not JSON") from None


def _error_body(err: HTTPClientError) -> dict[str, Any]:
    try:
        body = json.loads(err.response.body) if err.response is not None and err.response.body else {}
    except ValueError:
        body = {}
    return body if isinstance(body, dict) else {}


def _error_code(err: HTTPClientError) -> str:
    code = _error_body(err).get("code")
    return code if isinstance(code, str) else ""


def _error_message(err: HTTPClientError) -> str:
    message = _error_body(err).get("message")
    if isinstance(message, str) and message and len(message) <= 300:
        return message
    return f"the sandbox manager refused to create a sandbox ({err.code})"


__all__ = ["GetSandboxBySessionRequest", "GetSandboxBySessionResponse", "SessionManager", "SessionManagerMetrics"]
