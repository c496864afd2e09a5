"""The session <-> sandbox mapping in Redis: seed 004's primitives, and the hosts.

Key layout (every key under one prefix, `wk` by default):

    {p}:session:{session_id}   JSON SessionRecord; PX = ttl + grace (see below)
    {p}:sandbox:{sandbox_id}   the session id of a sandbox; same expiry
    {p}:hostsessions:{host_id} SET of the session ids bound to a host
    {p}:lock:session:{sid}     SetSessionLockIfAbsent's lock (SET NX PX), value = owner
    {p}:gone:{session_id}      why a session ended ("host_lost", "drained", "deleted"); EX grace
    {p}:draining:{host_id}     a host being drained: no new session lands there; PX a day
    {p}:idem:{tenant}:{identity} the session id of a (tenant, principal, notebook); PX ttl
    {p}:home:{tenant}:{identity} the host a notebook's last session ran on (a preference)
    {p}:host:{host_id}         JSON HostInfo; PX = heartbeat TTL (a lost host's expires)
    {p}:hosts                  ZSET host id -> last heartbeat (ms): to find lost hosts
    {p}:rkernel:{kernel_id}    JSON RouterKernel (the router's kernel -> session); PX = ttl + grace
    {p}:rkernels:{tenant}:{principal}  SET of that owner's router kernel ids

A session's record holds `expires_at` (ms): activity moves it (touch()); the key
itself lives `grace` longer, so a lookup after expiry still finds it and answers
"expired" (410) instead of "no such session" (404). Every write that spans keys is
one MULTI/EXEC or one Lua script: a crash leaves all of it or none.

Redis errors become RedisInternal at once: the client is built to fail fast (no
retries, short timeouts) and reconnects on the next call, so a restarted Redis is
picked up without restarting anything.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from ..host.log import get_logger
from .errors import RedisInternal, SessionGone, SessionNotFound
from .records import HOST_ID, HostInfo, InvalidRecord, RouterKernel, Sandbox, SessionRecord, now_ms

log = get_logger("wasm_kernel.cluster")

T = TypeVar("T")
R = TypeVar("R")

GONE_MESSAGES = {
    "expired": "this notebook's sandbox session expired after a while without activity; restart the kernel to get a new sandbox",
    "host_lost": "the sandbox host was lost; restart the kernel to get a new sandbox",
    "deleted": "this notebook's sandbox session was deleted; restart the kernel to get a new sandbox",
    # The router moves a drained session by itself (router.py); this is what a caller
    # that asks the store directly is told.
    "drained": "this notebook's sandbox host was drained and the notebook's state saved; reconnect or restart the "
               "kernel to resume it on another host",
}


def connect(url: str, *, timeout_s: float = 1.0, max_connections: int = 64) -> aioredis.Redis:
    """A client that fails fast: no retries, short timeouts (see the module docstring).
    Its pool blocks a caller while all `max_connections` are busy (for at most
    `timeout_s`): redis-py's default pool refuses the call instead ("Too many
    connections", which 200 concurrent lookups hit)."""
    pool = aioredis.BlockingConnectionPool.from_url(
        url, max_connections=max_connections, timeout=timeout_s, socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s, retry=Retry(NoBackoff(), 0), retry_on_timeout=False, health_check_interval=0,
        decode_responses=True,
    )
    return aioredis.Redis(connection_pool=pool)


# KEYS: session, sandbox, hostsessions, gone   ARGV: reason, grace_ms
# Drops one session's mapping and leaves its tombstone, in one step.
_DELETE_SESSION = """
local raw = redis.call('GET', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[3])
redis.call('SET', KEYS[4], ARGV[1], 'PX', ARGV[2])
return raw
"""

# KEYS: hostsessions, host, hosts   ARGV: prefix, reason, grace_ms, host_id
# A lost host: every session bound to it, its record and its tombstone, at once.
_DELETE_HOST = """
local sids = redis.call('SMEMBERS', KEYS[1])
for _, sid in ipairs(sids) do
  local key = ARGV[1] .. ':session:' .. sid
  local raw = redis.call('GET', key)
  if raw then
    -- a record is untrusted input: a malformed one must not stop the reaping
    local ok, rec = pcall(cjson.decode, raw)
    if ok and type(rec) == 'table' and type(rec['sandbox']) == 'table'
        and type(rec['sandbox']['id']) == 'string' then
      redis.call('DEL', ARGV[1] .. ':sandbox:' .. rec['sandbox']['id'])
    end
  end
  redis.call('DEL', key)
  redis.call('SET', ARGV[1] .. ':gone:' .. sid, ARGV[2], 'PX', ARGV[3])
end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('ZREM', KEYS[3], ARGV[4])
return #sids
"""

# KEYS: session   ARGV: now_ms, ttl_ms, grace_ms, prefix
# Activity: a live session's expires_at moves to now + ttl, and its keys' expiry with
# it. (The sandbox key is named from the record: one Redis node, not a cluster.)
_TOUCH = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local ok, rec = pcall(cjson.decode, raw)
if not ok or type(rec) ~= 'table' or type(rec['sandbox']) ~= 'table' or type(rec['sandbox']['id']) ~= 'string'
    or type(rec['expires_at']) ~= 'number' then return -2 end
if rec['expires_at'] < tonumber(ARGV[1]) then return -1 end
rec['expires_at'] = tonumber(ARGV[1]) + tonumber(ARGV[2])
local px = tonumber(ARGV[2]) + tonumber(ARGV[3])
redis.call('SET', KEYS[1], cjson.encode(rec), 'PX', px)
redis.call('PEXPIRE', ARGV[4] .. ':sandbox:' .. rec['sandbox']['id'], px)
return 1
"""

# KEYS: lock   ARGV: owner
_RELEASE_LOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class SessionStore:
    """Seed 004's Redis primitives over one client. Every method raises RedisInternal
    for a Redis failure, never a driver error. Records are written signed with the
    pool key and read back verified (records.py): one that fails is skipped and
    logged, never trusted and never fatal."""

    def __init__(self, client: aioredis.Redis, *, key: bytes, prefix: str = "wk", ttl_s: float = 3600.0,
                 grace_s: float = 7 * 24 * 3600.0) -> None:
        self.redis = client
        self.signing_key = key
        self.prefix = prefix
        self.ttl_ms = int(ttl_s * 1000)
        self.grace_ms = int(grace_s * 1000)
        self._delete_session = client.register_script(_DELETE_SESSION)
        self._delete_host = client.register_script(_DELETE_HOST)
        self._touch = client.register_script(_TOUCH)
        self._release = client.register_script(_RELEASE_LOCK)
        # Verified host records for a second: a lookup needs its host's endpoint, and
        # reading and verifying it on every lookup cost a third of the lookup rate.
        self.host_cache_s = 1.0
        self._hosts_seen: dict[str, tuple[float, HostInfo]] = {}

    # -- keys -----------------------------------------------------------------

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    # -- seed 004 ---------------------------------------------------------------

    async def set_session_lock_if_absent(self, session_id: str, owner: str, ttl_ms: int) -> bool:
        """SetSessionLockIfAbsent: SET NX PX. True if this owner now holds it."""
        return bool(await self.call(self.redis.set(self.key("lock", "session", session_id), owner, nx=True,
                                                    px=ttl_ms)))

    async def release_session_lock(self, session_id: str, owner: str) -> None:
        await self.call(self._release(keys=[self.key("lock", "session", session_id)], args=[owner]))

    async def bind_session_with_sandbox(self, record: SessionRecord) -> None:
        """BindSessionWithSandbox: the mapping both ways, the host's set, with TTL, atomically."""
        px = max(1, record.expires_at - now_ms()) + self.grace_ms
        async def write() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(self.key("session", record.session_id), record.signed_json(self.signing_key), px=px)
                pipe.set(self.key("sandbox", record.sandbox.id), record.session_id, px=px)
                pipe.sadd(self.key("hostsessions", record.sandbox.host_id), record.session_id)
                pipe.delete(self.key("gone", record.session_id))
                # Where this notebook's files are: a later session of it prefers that host.
                pipe.set(self.key("home", record.tenant, record.identity), record.sandbox.host_id,
                         px=self.ttl_ms + self.grace_ms)
                await pipe.execute()
        await self.call(write())

    async def delete_session_by_sandbox_id_tx(self, sandbox_id: str, reason: str = "deleted") -> str | None:
        """DeleteSessionBySandboxIDTx: the session of `sandbox_id`, unmapped in one
        script, with a tombstone saying why. Returns its session id, or None."""
        session_id = await self.session_of_sandbox(sandbox_id)
        if session_id is None:
            return None
        record = await self.session_record(session_id)
        host_id = record.sandbox.host_id if record is not None else ""
        await self.call(self._delete_session(
            keys=[self.key("session", session_id), self.key("sandbox", sandbox_id),
                  self.key("hostsessions", host_id), self.key("gone", session_id)],
            args=[reason, self.grace_ms, session_id],
        ))
        return str(session_id)

    async def session_of_sandbox(self, sandbox_id: str) -> str | None:
        """The session id a sandbox is mapped to, or None."""
        session_id = await self.call(self.redis.get(self.key("sandbox", sandbox_id)))
        return session_id if isinstance(session_id, str) and len(session_id) <= 64 else None

    async def session_record(self, session_id: str) -> SessionRecord | None:
        """The verified record of a session, or None (absent, or failing its checks: logged)."""
        raw = await self.call(self.redis.get(self.key("session", session_id)))
        return None if raw is None else self.verified("session", SessionRecord, session_id, raw, "session_id")

    def verified(self, kind: str, cls: type[R], key_id: str, raw: str, id_field: str = "id") -> R | None:
        """The record `raw` read under `key_id`, checked (records.py), or None, logged:
        it fails its schema or signature, or it is a valid record of another id copied
        under this key."""
        try:
            record = cls.verified(raw, self.signing_key)  # type: ignore[attr-defined]
        except InvalidRecord as err:
            why = str(err)
        else:
            if getattr(record, id_field) == key_id:
                return record  # type: ignore[no-any-return]
            why = f"{kind}: moved"
        log.warning("record.invalid", kind=kind, key=key_id[:128], why=why)
        return None

    async def get_sandbox_by_session_id(self, session_id: str, tenant: str, principal: str) -> SessionRecord:
        """GetSandboxBySessionID, for one tenant and principal. SessionNotFound (404) if
        there is none for them, SessionGone (410) if it expired or its host was lost,
        RedisInternal else."""
        async def read() -> tuple[Any, Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.get(self.key("session", session_id))
                pipe.get(self.key("gone", session_id))
                return tuple(await pipe.execute())  # type: ignore[return-value]
        raw, gone = await self.call(read())
        if raw is None:
            if gone is not None:
                reason = gone if gone in GONE_MESSAGES else "deleted"  # Redis is untrusted: only our words
                raise SessionGone(GONE_MESSAGES[reason], reason)
            raise SessionNotFound("no such sandbox session; restart the kernel to get a new one")
        record = self.verified("session", SessionRecord, session_id, raw, "session_id")
        if record is None or record.tenant != tenant or record.principal != principal:
            # Another tenant's or user's session looks exactly like one that does not exist.
            raise SessionNotFound("no such sandbox session; restart the kernel to get a new one")
        if record.expires_at < now_ms():
            raise SessionGone(GONE_MESSAGES["expired"], "expired")
        return record

    async def touch(self, session_id: str) -> bool:
        """Activity: push the session's expiry to now + ttl. False if it is gone."""
        got = await self.call(self._touch(
            keys=[self.key("session", session_id)], args=[now_ms(), self.ttl_ms, self.grace_ms, self.prefix],
        ))
        if got == -2:
            log.warning("record.invalid", kind="session", key=session_id[:64], why="session: not refreshable")
        return got == 1

    # -- idempotency (seed 004, 5.2) ---------------------------------------------

    async def idempotent_session(self, tenant: str, identity: str) -> str | None:
        return await self.call(self.redis.get(self.key("idem", tenant, identity)))  # type: ignore[no-any-return]

    async def remember_idempotent(self, tenant: str, identity: str, session_id: str) -> None:
        await self.call(self.redis.set(self.key("idem", tenant, identity), session_id,
                                        px=self.ttl_ms + self.grace_ms))

    async def home_host(self, tenant: str, identity: str) -> str | None:
        """The host the last session of (tenant, identity) ran on: a preference only."""
        found = await self.call(self.redis.get(self.key("home", tenant, identity)))
        return found if isinstance(found, str) and HOST_ID.fullmatch(found) else None

    # -- hosts --------------------------------------------------------------------

    async def register_host(self, host: HostInfo, ttl_ms: int) -> None:
        """A host's heartbeat: its signed record with a TTL, and its last beat in the ZSET."""
        async def write() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(self.key("host", host.id), host.signed_json(self.signing_key), px=ttl_ms)
                pipe.zadd(self.key("hosts"), {host.id: now_ms()})
                await pipe.execute()
        await self.call(write())

    async def hosts(self) -> tuple[list[HostInfo], list[str]]:
        """(live hosts, lost host ids): a lost host is in the ZSET without a record. A
        record that fails its checks is neither: skipped and logged."""
        ids = [i for i in await self.call(self.redis.zrange(self.key("hosts"), 0, 4999))
               if isinstance(i, str) and HOST_ID.fullmatch(i)]
        if not ids:
            return [], []
        raws = await self.call(self.redis.mget([self.key("host", i) for i in ids]))
        live, lost = [], []
        for host_id, raw in zip(ids, raws):
            if raw is None:
                lost.append(host_id)
                continue
            host = self.verified("host", HostInfo, host_id, raw)
            if host is not None:
                live.append(host)
        return live, lost

    async def host(self, host_id: str) -> HostInfo | None:
        """One live host's verified record, or None. A record verified less than
        host_cache_s ago is used again: a lost host is then seen a second later, and
        its endpoint just stops answering meanwhile (the same one line either way)."""
        now = time.monotonic()
        seen = self._hosts_seen.get(host_id)
        if seen is not None and now - seen[0] < self.host_cache_s:
            return seen[1]
        raw = await self.call(self.redis.get(self.key("host", host_id)))
        host = None if raw is None else self.verified("host", HostInfo, host_id, raw)
        if host is None:
            self._hosts_seen.pop(host_id, None)
        else:
            if len(self._hosts_seen) > 10_000:
                self._hosts_seen.clear()
            self._hosts_seen[host_id] = (now, host)
        return host

    async def sessions_of_host(self, host_id: str) -> list[SessionRecord]:
        """The verified records of the sessions bound to a host."""
        ids = [i for i in await self.call(self.redis.smembers(self.key("hostsessions", host_id)))
               if isinstance(i, str) and len(i) <= 64]
        if not ids:
            return []
        raws = await self.call(self.redis.mget([self.key("session", i) for i in ids]))
        found = (self.verified("session", SessionRecord, i, raw, "session_id") for i, raw in zip(ids, raws) if raw is not None)
        return [r for r in found if r is not None]

    async def session_counts(self, host_ids: list[str]) -> dict[str, int]:
        """How many sessions are mapped to each host (SCARD), in one round trip."""
        async def read() -> list[Any]:
            async with self.redis.pipeline(transaction=False) as pipe:
                for host_id in host_ids:
                    pipe.scard(self.key("hostsessions", host_id))
                return await pipe.execute()  # type: ignore[no-any-return]
        counts = await self.call(read()) if host_ids else []
        return {h: int(c) for h, c in zip(host_ids, counts)}

    async def mark_draining(self, host_id: str, ttl_ms: int = 24 * 3600 * 1000) -> None:
        """No new session lands on this host (it is being drained); for a day at most."""
        await self.call(self.redis.set(self.key("draining", host_id), "1", px=ttl_ms))

    async def draining(self, host_ids: list[str]) -> set[str]:
        """Which of these hosts are being drained."""
        if not host_ids:
            return set()
        found = await self.call(self.redis.mget([self.key("draining", h) for h in host_ids]))
        return {h for h, v in zip(host_ids, found) if v is not None}

    async def delete_host_tx(self, host_id: str, reason: str = "host_lost") -> int:
        """Every mapping of a host, and the host, in one script. Returns how many sessions."""
        return int(await self.call(self._delete_host(
            keys=[self.key("hostsessions", host_id), self.key("host", host_id), self.key("hosts")],
            args=[self.prefix, reason, self.grace_ms, host_id],
        )))

    # -- the router's kernels (stateless routers: every replica reads them here) -------

    async def save_router_kernel(self, kernel: RouterKernel) -> None:
        """A router kernel's signed record and its id in its owner's set, in one
        MULTI/EXEC; the record lives as long as a session's can."""
        async def write() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.set(self.key("rkernel", kernel.id), kernel.signed_json(self.signing_key),
                         px=self.ttl_ms + self.grace_ms)
                pipe.sadd(self.key("rkernels", kernel.tenant, kernel.principal), kernel.id)
                await pipe.execute()
        await self.call(write())

    async def router_kernel(self, kernel_id: str) -> RouterKernel | None:
        """A router kernel's verified record, or None (absent, or failing its checks: logged).
        Whose it is, the caller checks."""
        raw = await self.call(self.redis.get(self.key("rkernel", kernel_id)))
        return None if raw is None else self.verified("rkernel", RouterKernel, kernel_id, raw)

    async def router_kernel_ids(self, tenant: str, principal: str, limit: int = 1000) -> list[str]:
        """The ids in an owner's set, sorted, at most `limit` (some may be gone: see
        drop_router_kernel_id)."""
        ids = await self.call(self.redis.smembers(self.key("rkernels", tenant, principal)))
        return sorted(i for i in ids if isinstance(i, str))[:limit]

    async def drop_router_kernel_id(self, tenant: str, principal: str, kernel_id: str) -> None:
        """An id out of its owner's set (its record is gone or not theirs)."""
        await self.call(self.redis.srem(self.key("rkernels", tenant, principal), kernel_id))

    async def forget_router_kernel(self, kernel: RouterKernel) -> None:
        """A router kernel's record and its id in its owner's set, in one MULTI/EXEC."""
        async def write() -> None:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.delete(self.key("rkernel", kernel.id))
                pipe.srem(self.key("rkernels", kernel.tenant, kernel.principal), kernel.id)
                await pipe.execute()
        await self.call(write())

    # -- health -------------------------------------------------------------------

    async def ping(self) -> None:
        """Redis answers (a health probe), or RedisInternal."""
        await self.call(self.redis.ping())

    # -- plumbing -----------------------------------------------------------------

    async def call(self, work: Awaitable[T]) -> T:
        """Await one Redis command: a failure becomes RedisInternal, whose message names
        the kind of failure only (the driver's text names the server's address: logged,
        never answered). Every user of the store's client goes through here."""
        try:
            return await work
        except (RedisError, OSError) as err:
            log.error("redis.failed", error=_first_line(err))
            raise RedisInternal(_redis_message(err)) from None


def _redis_message(err: BaseException) -> str:
    """What a tenant is told: the kind of failure, no address, host or driver text."""
    text = str(err).lower()
    if "auth" in text or "password" in text or "noperm" in text:
        why = "it refused the pool's credentials"
    elif "timeout" in text or "timed out" in text:
        why = "it did not answer in time"
    elif "script" in text:
        why = "a stored record could not be updated"
    else:
        why = "it cannot be reached"
    return f"the session store (Redis) is unavailable: {why}; try again shortly"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return text[0][:200] if text else type(err).__name__


__all__ = ["GONE_MESSAGES", "HostInfo", "Sandbox", "SessionRecord", "SessionStore", "connect", "now_ms"]
