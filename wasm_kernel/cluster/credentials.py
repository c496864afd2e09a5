"""What a pool service must hold before it starts: fail closed.

Each service reads its secrets from the environment and refuses to start, with one
line naming what is missing and how to set it, when one is absent or too short:

- $WASM_KERNEL_POOL_KEY (every service): the key that signs host records, session
  records and the router's kernel records (record_signing.py). Redis never sees it,
  so whoever can write to Redis still cannot forge a host, a session or a kernel.
- $WASM_KERNEL_HOST_TOKEN (hosts, manager, router): the hosts' Jupyter Server token.
- $WASM_KERNEL_MANAGER_TOKEN (manager, router): the sandbox manager's API token.
- $WASM_KERNEL_ROUTER_TOKENS (router): who may use the gateway (router_identity.py).
- the Redis URL's password (Redis AUTH, or an ACL user:password; rediss:// for TLS).

`--insecure-demo` lets a service use a Redis without a password, on a machine where
nothing else can reach it, and prints a warning saying so; it never waives a token
or the pool key, which cost nothing to set.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

POOL_KEY_ENV = "WASM_KERNEL_POOL_KEY"
HOST_TOKEN_ENV = "WASM_KERNEL_HOST_TOKEN"
MANAGER_TOKEN_ENV = "WASM_KERNEL_MANAGER_TOKEN"
MIN_SECRET = 16
MIN_POOL_KEY = 32


class MissingCredential(Exception):
    """A service cannot start safely: the message is one line for the operator."""


def secret_from_env(name: str, what: str, *, minimum: int = MIN_SECRET,
                    environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The secret in $name, or MissingCredential. Only printable ASCII: an HTTP
    header cannot carry anything else, and a key that differs by encoding between two
    services would fail in ways that are hard to see."""
    value = environ.get(name, "")
    if not value:
        raise MissingCredential(f"${name} is not set: {what} is required (at least {minimum} characters, "
                                "e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
    if len(value) < minimum or not value.isascii() or not value.isprintable() or " " in value:
        raise MissingCredential(f"${name} must be at least {minimum} printable ASCII characters without spaces")
    return value


def pool_key(environ: dict[str, str] | os._Environ[str] = os.environ) -> bytes:
    return secret_from_env(POOL_KEY_ENV, "the pool's signing key (the same on every host, manager and router)",
                           minimum=MIN_POOL_KEY, environ=environ).encode()


def check_redis_url(url: str, *, insecure_demo: bool) -> None:
    """A Redis URL must carry a password (AUTH or ACL), unless --insecure-demo."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        raise MissingCredential("the Redis URL is not a URL: use redis://:PASSWORD@HOST:6379/0 "
                                "(or rediss:// for TLS)") from None
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise MissingCredential(f"the Redis URL's scheme must be redis, rediss or unix, not {parts.scheme[:20]!r}")
    if password or insecure_demo:
        return
    raise MissingCredential("the Redis URL has no password: use redis://:PASSWORD@HOST:6379/0 (requirepass) or "
                            "redis://USER:PASSWORD@... (an ACL user), rediss:// for TLS; --insecure-demo runs "
                            "without, on a machine nothing else reaches")


def warn_insecure_demo(service: str, url: str) -> None:
    """The warning --insecure-demo prints, once, at start."""
    try:
        has_password = bool(urlsplit(url).password)
    except ValueError:
        has_password = False
    if not has_password:
        print(f"wasm-kernel {service}: WARNING: --insecure-demo: Redis without a password; anyone who reaches "
              "it can delete or redirect sessions. Never run a pool like this where others can connect.",
              file=sys.stderr)


@dataclass(frozen=True)
class ServiceSecrets:
    """What the manager and the router both hold."""

    pool_key: bytes
    host_token: str
    manager_token: str


def service_secrets(service: str, redis_url: str, *, insecure_demo: bool) -> ServiceSecrets:
    """The manager's and the router's secrets, or MissingCredential for the first
    that is missing (the Redis password included); warns once if --insecure-demo
    let a password-less Redis through."""
    check_redis_url(redis_url, insecure_demo=insecure_demo)
    if insecure_demo:
        warn_insecure_demo(service, redis_url)
    return ServiceSecrets(
        pool_key=pool_key(),
        host_token=secret_from_env(HOST_TOKEN_ENV, "the hosts' token"),
        manager_token=secret_from_env(MANAGER_TOKEN_ENV, "the sandbox manager's API token"),
    )


def fail(service: str, err: MissingCredential) -> int:
    print(f"wasm-kernel {service}: {err}", file=sys.stderr)
    return 2


__all__ = [
    "HOST_TOKEN_ENV", "MANAGER_TOKEN_ENV", "MissingCredential", "POOL_KEY_ENV", "ServiceSecrets", "check_redis_url",
    "fail", "pool_key", "secret_from_env", "service_secrets", "warn_insecure_demo",
]
