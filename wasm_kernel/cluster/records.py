"""The pool's records in Redis, read as untrusted input: a strict schema and a signature.

Redis is shared plumbing, not a trusted party: whoever can write to it could point a
session at another tenant's kernel, or a host record at their own server to collect
the host token. So every record a service reads back is

- size-capped before it is parsed (no deep-nesting or huge-blob tricks),
- checked field by field against a strict schema (exact keys, types, patterns), and
- signed with HMAC-SHA256 under the pool key ($WASM_KERNEL_POOL_KEY), which Redis
  never sees; host records also carry their beat time and go stale.

A record that fails raises InvalidRecord; the caller skips it and logs, and never
lets it stop the service. The endpoint a token is sent to comes only from a host
record that passed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import time
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

MAX_RECORD = 4096  # bytes: the largest record we write is well under 1 KiB
HOST_RECORD_MAX_AGE_MS = 30_000  # a host record not renewed for this long is stale

TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
PRINCIPAL = re.compile(r"(user|group):[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
HOST_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
SANDBOX_ID = re.compile(r"sb-[0-9a-f]{32}")
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
DIGEST = re.compile(r"[0-9a-f]{64}")
_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")
_MAX_MS = 2**53


class InvalidRecord(ValueError):
    """A record from Redis that fails its schema or its signature (never shown to a tenant)."""


def now_ms() -> int:
    return int(time.time() * 1000)


# -- signing ---------------------------------------------------------------------------


def _canonical(kind: str, fields: dict[str, Any]) -> bytes:
    return json.dumps([kind, fields], sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def sign(key: bytes, kind: str, fields: dict[str, Any]) -> str:
    return hmac.new(key, _canonical(kind, fields), hashlib.sha256).hexdigest()


def _verify(key: bytes, kind: str, fields: dict[str, Any], sig: Any) -> None:
    if not isinstance(sig, str) or not DIGEST.fullmatch(sig):
        raise InvalidRecord(f"{kind}: no signature")
    if not hmac.compare_digest(sign(key, kind, fields), sig):
        raise InvalidRecord(f"{kind}: bad signature")


# -- schema checks ------------------------------------------------------------------------


def _load(raw: str | bytes, kind: str) -> dict[str, Any]:
    if len(raw) > MAX_RECORD:
        raise InvalidRecord(f"{kind}: {len(raw)} bytes, over {MAX_RECORD}")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        raise InvalidRecord(f"{kind}: not JSON") from None
    if not isinstance(data, dict):
        raise InvalidRecord(f"{kind}: not an object")
    return data


def _exact_keys(data: dict[str, Any], keys: set[str], kind: str) -> None:
    if set(data) != keys:
        raise InvalidRecord(f"{kind}: keys {sorted(map(str, data))[:12]} are not {sorted(keys)}")


def _text(value: Any, pattern: re.Pattern[str], kind: str, name: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise InvalidRecord(f"{kind}: bad {name}")
    return value


def _int(value: Any, low: int, high: int, kind: str, name: str) -> int:
    # cjson (the TTL refresh script) may write a whole number as a float: accept an
    # integral float, never a bool or a fraction.
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int or not low <= value <= high:
        raise InvalidRecord(f"{kind}: bad {name}")
    return value


def check_endpoint(value: Any) -> str:
    """http(s)://HOST:PORT and nothing else: no user info, path, query or fragment,
    so a token sent to it cannot be smuggled elsewhere by a crafted URL."""
    if not isinstance(value, str) or len(value) > 300:
        raise InvalidRecord("host: bad endpoint")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise InvalidRecord("host: bad endpoint") from None
    host = parts.hostname or ""
    ok_host = _HOSTNAME.fullmatch(host) is not None or (":" in host and re.fullmatch(r"[0-9a-fA-F:.]+", host))
    if (parts.scheme not in ("http", "https") or port is None or not ok_host or parts.username is not None
            or parts.password is not None or parts.path not in ("", "/") or parts.query or parts.fragment
            or "\\" in value or any(ord(c) < 33 or ord(c) > 126 for c in value)):
        raise InvalidRecord("host: bad endpoint")
    return value.rstrip("/")


# -- the records ----------------------------------------------------------------------------


@dataclass(frozen=True)
class HostInfo:
    id: str
    endpoint: str  # the host's base URL, e.g. http://127.0.0.1:8901
    capacity: int
    load: int
    shared_root: bool = False  # its workspace root is shared with the other hosts
    beat_at: int = 0  # ms: when the host wrote this record

    @property
    def free(self) -> int:
        return self.capacity - self.load

    def signed_json(self, key: bytes) -> str:
        fields = asdict(self)
        return json.dumps({**fields, "sig": sign(key, "host", fields)}, separators=(",", ":"))

    @classmethod
    def verified(cls, raw: str | bytes, key: bytes, *, now: int | None = None) -> HostInfo:
        data = _load(raw, "host")
        _exact_keys(data, {"id", "endpoint", "capacity", "load", "shared_root", "beat_at", "sig"}, "host")
        sig = data.pop("sig")
        _verify(key, "host", data, sig)
        capacity = _int(data["capacity"], 1, 100_000, "host", "capacity")
        if not isinstance(data["shared_root"], bool):
            raise InvalidRecord("host: bad shared_root")
        host = cls(id=_text(data["id"], HOST_ID, "host", "id"), endpoint=check_endpoint(data["endpoint"]),
                   capacity=capacity, load=_int(data["load"], 0, 100_000, "host", "load"),
                   shared_root=data["shared_root"], beat_at=_int(data["beat_at"], 0, _MAX_MS, "host", "beat_at"))
        if (now if now is not None else now_ms()) - host.beat_at > HOST_RECORD_MAX_AGE_MS:
            raise InvalidRecord("host: stale")
        return host


@dataclass(frozen=True)
class Sandbox:
    id: str
    host_id: str
    kernel_id: str  # the kernel on that host


@dataclass(frozen=True)
class SessionRecord:
    """A session of (tenant, principal, notebook): `identity` is the digest of the
    three that the sandbox manager derived, so an idempotency key in Redis that
    points at another identity's session is caught."""

    session_id: str
    sandbox: Sandbox
    tenant: str
    principal: str  # "user:NAME", or "group:NAME" for a sharing group
    identity: str  # sha256 hex of (tenant, principal, notebook)
    created_at: int  # ms
    expires_at: int  # ms; moved by activity, so not signed (the TTL script rewrites it)

    def _signed_fields(self) -> dict[str, Any]:
        fields = asdict(self)
        fields.pop("expires_at")
        return fields

    def signed_json(self, key: bytes) -> str:
        return json.dumps({**asdict(self), "sig": sign(key, "session", self._signed_fields())},
                          separators=(",", ":"))

    @classmethod
    def verified(cls, raw: str | bytes, key: bytes) -> SessionRecord:
        data = _load(raw, "session")
        _exact_keys(data, {"session_id", "sandbox", "tenant", "principal", "identity", "created_at", "expires_at",
                           "sig"}, "session")
        sandbox = data["sandbox"]
        if not isinstance(sandbox, dict):
            raise InvalidRecord("session: bad sandbox")
        _exact_keys(sandbox, {"id", "host_id", "kernel_id"}, "session.sandbox")
        record = cls(
            session_id=_text(data["session_id"], UUID, "session", "session_id"),
            sandbox=Sandbox(id=_text(sandbox["id"], SANDBOX_ID, "session", "sandbox id"),
                            host_id=_text(sandbox["host_id"], HOST_ID, "session", "host id"),
                            kernel_id=_text(sandbox["kernel_id"], UUID, "session", "kernel id")),
            tenant=_text(data["tenant"], TENANT, "session", "tenant"),
            principal=_text(data["principal"], PRINCIPAL, "session", "principal"),
            identity=_text(data["identity"], DIGEST, "session", "identity"),
            created_at=_int(data["created_at"], 0, _MAX_MS, "session", "created_at"),
            expires_at=_int(data["expires_at"], 0, _MAX_MS, "session", "expires_at"),
        )
        _verify(key, "session", record._signed_fields(), data["sig"])
        return record


@dataclass
class RouterKernel:
    """A kernel as the router's clients know it: its own id, mapped to a session."""

    id: str
    tenant: str
    principal: str
    session_id: str
    notebook: str  # the notebook identity the client gave (kept to move the kernel on a restart)
    created_at: float

    def signed_json(self, key: bytes) -> str:
        fields = asdict(self)
        return json.dumps({**fields, "sig": sign(key, "rkernel", fields)}, separators=(",", ":"))

    @classmethod
    def verified(cls, raw: str | bytes, key: bytes) -> RouterKernel:
        data = _load(raw, "rkernel")
        _exact_keys(data, {"id", "tenant", "principal", "session_id", "notebook", "created_at", "sig"}, "rkernel")
        sig = data.pop("sig")
        _verify(key, "rkernel", data, sig)
        if not isinstance(data["notebook"], str) or len(data["notebook"]) > 5000:
            raise InvalidRecord("rkernel: bad notebook")
        created = data["created_at"]
        if not isinstance(created, (int, float)) or isinstance(created, bool):
            raise InvalidRecord("rkernel: bad created_at")
        return cls(id=_text(data["id"], UUID, "rkernel", "id"), tenant=_text(data["tenant"], TENANT, "rkernel", "tenant"),
                   principal=_text(data["principal"], PRINCIPAL, "rkernel", "principal"),
                   session_id=_text(data["session_id"], UUID, "rkernel", "session_id"), notebook=data["notebook"],
                   created_at=float(created))


def session_identity(tenant: str, principal: str, namespace: str, notebook: str) -> str:
    """The digest a session's idempotency key, host-side path and workspace derive from:
    (tenant, principal, notebook), never the notebook alone."""
    return hashlib.sha256("\0".join(("wasm-kernel-session", tenant, principal, namespace, notebook)).encode()).hexdigest()


def host_notebook_path(tenant: str, identity: str) -> str:
    """The notebook path a session's kernel gets on its host: a folder of its own under
    its tenant's, so its read-only notebook folder holds nothing of another session."""
    return f"pool/{tenant}/{identity}/notebook.ipynb"


HOST_NOTEBOOK_PATH = re.compile(r"pool/([A-Za-z0-9][A-Za-z0-9_.-]{0,63})/([0-9a-f]{64})/notebook\.ipynb")


__all__ = [
    "DIGEST", "HOST_ID", "HOST_NOTEBOOK_PATH", "HostInfo", "InvalidRecord", "PRINCIPAL", "RouterKernel", "Sandbox",
    "SessionRecord", "TENANT", "UUID", "check_endpoint", "host_notebook_path", "now_ms", "session_identity", "sign",
]
