"""Who is calling the router: a tenant and a user, from the credential alone.

Every session of the pool belongs to (tenant, user, notebook). The tenant and the
user come from the request's token, never from anything else the client sends, so
two students of one course never reach each other's kernels or files, and two
tenants with the same notebook path never share a workspace.

The router's `tokens` (c.RouterApp.tokens in its config file, or
$WASM_KERNEL_ROUTER_TOKENS, comma-separated) are entries

    TENANT/USER:TOKEN   one user's token (at least 16 characters)
    TENANT/*:KEY        a tenant key (at least 32 characters): the router accepts
                        `USER.SIGNATURE` tokens made from it by user_token(), so a
                        course issues each student's token (JupyterHub's
                        Spawner.environment) without listing them here

A bare `TENANT:TOKEN` (one identity for a whole tenant) is refused: it is how two
students came to share a kernel.

Users of one tenant share sessions only in a sharing group the operator names
(`--share-group TENANT/GROUP=USER,USER`, or c.RouterApp.share_groups): then the
group, not the user, owns the session, and each member reaches the same kernel and
files for the same notebook.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass

from .records import TENANT

TOKENS_ENV = "WASM_KERNEL_ROUTER_TOKENS"
USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@+-]{0,63}")
MIN_TOKEN = 16
MIN_KEY = 32


class IdentityConfigError(ValueError):
    """The router's token or group configuration is unusable: one line for the operator."""


@dataclass(frozen=True)
class Caller:
    tenant: str
    user: str
    principal: str  # "user:NAME", or "group:NAME" when the user is in a sharing group


def user_token(key: str, tenant: str, user: str) -> str:
    """The token of `user` under a tenant key (`TENANT/*:KEY`): what a hub gives each user."""
    if not USER.fullmatch(user):
        raise ValueError("a user name is 1-64 letters, digits or '._@+-', starting with a letter or digit")
    return f"{user}.{_signature(key, tenant, user)}"


def _signature(key: str, tenant: str, user: str) -> str:
    return hmac.new(key.encode(), f"wasm-kernel-user\0{tenant}\0{user}".encode(), hashlib.sha256).hexdigest()


class Identities:
    """The router's credentials and sharing groups, checked once at start.

    `tokens` is a list of entries, or one comma-separated string of them (the
    environment variable's form). `source` and `groups_source` name where the operator
    set them, for the one-line error a bad entry gets."""

    def __init__(self, tokens: str | Iterable[str], share_groups: Iterable[str] = (), *,
                 source: str = f"${TOKENS_ENV}", groups_source: str = "--share-group") -> None:
        self.source = source
        self.groups_source = groups_source
        self.user_tokens: dict[bytes, tuple[str, str]] = {}  # token -> (tenant, user)
        self.tenant_keys: dict[str, str] = {}  # tenant -> key
        entries = tokens.split(",") if isinstance(tokens, str) else tokens
        for item in filter(None, (part.strip() for part in entries)):
            self._add_token(item)
        if not self.user_tokens and not self.tenant_keys:
            raise IdentityConfigError(f"{source} is not set: the router's users are required, as TENANT/USER:TOKEN "
                                      "or TENANT/*:KEY entries")
        self.groups: dict[tuple[str, str], str] = {}  # (tenant, user) -> group
        for spec in share_groups:
            self._add_group(spec)

    def _add_token(self, item: str) -> None:
        where = self.source
        who, sep, secret = item.partition(":")
        tenant, slash, user = who.partition("/")
        if not sep or not slash:
            raise IdentityConfigError(f"{where}: an entry is TENANT/USER:TOKEN or TENANT/*:KEY; "
                                      "TENANT:TOKEN would give every user of a tenant one identity")
        if not TENANT.fullmatch(tenant) or not (user == "*" or USER.fullmatch(user)):
            raise IdentityConfigError(f"{where}: a tenant is 1-64 letters, digits or '._-', a user 1-64 "
                                      "letters, digits or '._@+-'")
        if not secret.isascii() or not secret.isprintable() or " " in secret:
            raise IdentityConfigError(f"{where}: tokens and keys are printable ASCII without spaces")
        if user == "*":
            if len(secret) < MIN_KEY:
                raise IdentityConfigError(f"{where}: a tenant key (TENANT/*:KEY) is at least {MIN_KEY} "
                                          "characters")
            self.tenant_keys[tenant] = secret
        else:
            if len(secret) < MIN_TOKEN:
                raise IdentityConfigError(f"{where}: a token is at least {MIN_TOKEN} characters")
            if secret.encode() in self.user_tokens:
                raise IdentityConfigError(f"{where}: one token is given to two users")
            self.user_tokens[secret.encode()] = (tenant, user)

    def _add_group(self, spec: str) -> None:
        where, sep, members = spec.partition("=")
        tenant, slash, group = where.partition("/")
        if not sep or not slash or not TENANT.fullmatch(tenant) or not USER.fullmatch(group):
            raise IdentityConfigError(f"{self.groups_source}: a group is TENANT/GROUP=USER,USER")
        users = [u.strip() for u in members.split(",") if u.strip()]
        if len(users) < 2 or not all(USER.fullmatch(u) for u in users):
            raise IdentityConfigError(f"{self.groups_source} {where}: name two or more users, comma-separated")
        for user in users:
            if self.groups.get((tenant, user), group) != group:
                raise IdentityConfigError(f"{self.groups_source}: {tenant}/{user} is in two groups; a user shares "
                                          "with one group at most")
            self.groups[(tenant, user)] = group

    def caller(self, token: str) -> Caller | None:
        """The caller a token belongs to, or None. Constant-time over the user tokens."""
        raw = token.encode("utf-8", "surrogateescape")
        found = None
        for known, who in self.user_tokens.items():
            if hmac.compare_digest(known, raw):
                found = who
        if found is None:
            found = self._derived(token)
        if found is None:
            return None
        tenant, user = found
        group = self.groups.get((tenant, user))
        return Caller(tenant, user, f"group:{group}" if group else f"user:{user}")

    def _derived(self, token: str) -> tuple[str, str] | None:
        user, dot, signature = token.rpartition(".")
        if not dot or not USER.fullmatch(user) or not re.fullmatch(r"[0-9a-f]{64}", signature):
            return None
        found = None
        for tenant, key in self.tenant_keys.items():
            if hmac.compare_digest(_signature(key, tenant, user), signature):
                found = (tenant, user)
        return found


__all__ = ["Caller", "Identities", "IdentityConfigError", "TOKENS_ENV", "USER", "user_token"]
