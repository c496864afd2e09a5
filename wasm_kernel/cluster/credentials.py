"""What a pool service must hold before it starts: fail closed.

Each service refuses to start, with one line naming what is missing and how to set
it, when a secret is absent or too short:

- the pool key (every service; $WASM_KERNEL_POOL_KEY): the key that signs host
  records, session records and the router's kernel records (records.py). Redis never
  sees it, so whoever can write to Redis still cannot forge a host, a session or a
  kernel.
- the hosts' token (hosts, manager, router; $WASM_KERNEL_HOST_TOKEN): the hosts'
  Jupyter Server token.
- the sandbox manager's API token (manager, router; $WASM_KERNEL_MANAGER_TOKEN).
- who may use the gateway (router; $WASM_KERNEL_ROUTER_TOKENS, router_identity.py).
- the Redis URL's password (Redis AUTH, or an ACL user:password; rediss:// for TLS).

The router and the manager read them from their traits (service_app.py: a config
file, or these variables as the traits' defaults); the host from the variables.
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
REDIS_URL_ENV = "WASM_KERNEL_REDIS_URL"  # the Redis URL, with its password (not a secret alone, but it holds one)
MIN_SECRET = 16
MIN_POOL_KEY = 32


class MissingCredential(Exception):
    """A service cannot start safely: the message is one line for the operator."""


def check_secret(value: str, what: str, *, how: str, minimum: int = MIN_SECRET) -> str:
    """`value` if it is a usable secret, else MissingCredential saying `how` to set it
    (an environment variable, a config trait). Only printable ASCII: an HTTP header
    cannot carry anything else, and a key that differs by encoding between two
    services would fail in ways that are hard to see."""
    if not value:
        raise MissingCredential(f"{how} is not set: {what} is required (at least {minimum} characters, "
                                "e.g. from `python -c 'import secrets; print(secrets.token_urlsafe(32))'`)")
    if len(value) < minimum or not value.isascii() or not value.isprintable() or " " in value:
        raise MissingCredential(f"{how} must be at least {minimum} printable ASCII characters without spaces")
    return value


def secret_from_env(name: str, what: str, *, minimum: int = MIN_SECRET,
                    environ: dict[str, str] | os._Environ[str] = os.environ) -> str:
    """The secret in $name, or MissingCredential (check_secret)."""
    return check_secret(environ.get(name, ""), what, how=f"${name}", minimum=minimum)


POOL_KEY_WHAT = "the pool's signing key (the same on every host, manager and router)"
HOST_TOKEN_WHAT = "the hosts' token, which the manager and the router present"
MANAGER_TOKEN_WHAT = "the sandbox manager's API token"


def pool_key(environ: dict[str, str] | os._Environ[str] = os.environ) -> bytes:
    return secret_from_env(POOL_KEY_ENV, POOL_KEY_WHAT, minimum=MIN_POOL_KEY, environ=environ).encode()


def check_redis_url(url: str, *, insecure_demo: bool) -> None:
    """A Redis URL must carry a password (AUTH or ACL), unless --insecure-demo."""
    if not url:
        raise MissingCredential("no Redis URL: give --redis redis://:PASSWORD@HOST:6379/0, or set it in the config "
                                "file or $WASM_KERNEL_REDIS_URL")
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
    """What the manager and the router both hold (service_app.PoolServiceApp.secrets)."""

    pool_key: bytes
    host_token: str
    manager_token: str


def fail(service: str, err: MissingCredential) -> int:
    print(f"wasm-kernel {service}: {err}", file=sys.stderr)
    return 2


__all__ = [
    "HOST_TOKEN_ENV", "HOST_TOKEN_WHAT", "MANAGER_TOKEN_ENV", "MANAGER_TOKEN_WHAT", "MIN_POOL_KEY", "MIN_SECRET",
    "MissingCredential", "POOL_KEY_ENV", "POOL_KEY_WHAT", "REDIS_URL_ENV", "ServiceSecrets", "check_redis_url",
    "check_secret", "fail", "pool_key", "secret_from_env", "warn_insecure_demo",
]
