"""The operator's network rules: which hosts a guest's requests may reach (the
allow-list), which non-global networks are allowed anyway, and the limits.

Apart from host/http_fetch.py, which makes the requests: the kernel reads these rules
at every start, and the HTTP client (http.client, ssl, urllib3) is imported only
with a guest's first request.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

DEFAULT_PORTS = {"http": 80, "https": 443}
CONFIG_HINT = "the operator can allow it with c.WasmKernel.network_allow"
_HOST_LABEL = re.compile(r"(?!-)[a-z0-9-]{1,63}(?<!-)")


# A notebook's %network off narrowed the operator's list to nothing.
NOTEBOOK_OFF_HINT = "this notebook turned it off with %network off; %network reset turns it back on"


class NetworkRefused(Exception):
    """A request the rules refuse, or that failed; the message is one line for the notebook."""


# --- the operator's list ---------------------------------------------------------------


@dataclass(frozen=True)
class AllowEntry:
    host: str  # lower case, IDNA (ASCII); for a wildcard, the suffix after "*."
    wildcard: bool = False
    port: int | None = None  # None: the scheme's standard port

    def matches(self, host: str, port: int, scheme: str) -> bool:
        if self.wildcard:
            if is_address(host) or not host.endswith("." + self.host):
                return False  # a wildcard names domains, never addresses (*.0.0.1 is not 127.0.0.1)
        elif host != self.host:
            return False
        return port == (self.port if self.port is not None else DEFAULT_PORTS[scheme])

    def __str__(self) -> str:
        name = ("*." if self.wildcard else "") + self.host
        return name if self.port is None else f"{name}:{self.port}"


def parse_allow(entries: Iterable[str]) -> tuple[AllowEntry, ...]:
    """The operator's (or a notebook's) entries: `host`, `*.suffix`, either with `:port`.
    Raises ValueError with one line naming the entry that is wrong."""
    found = []
    for raw in entries:
        text = str(raw).strip().lower()
        host, port = text, None
        if text.startswith("["):
            raise ValueError(f"network_allow entry {raw!r}: IPv6 literals are not supported; name the host")
        if ":" in text:
            host, _, port_text = text.rpartition(":")
            if not port_text.isdigit() or not 0 < int(port_text) < 65536:
                raise ValueError(f"network_allow entry {raw!r}: the port must be a number from 1 to 65535")
            port = int(port_text)
        wildcard = host.startswith("*.")
        if wildcard:
            host = host[2:]
        try:
            host = normalise_host(host)
        except NetworkRefused:
            raise ValueError(f"network_allow entry {raw!r}: not a host name (e.g. data.example.org, "
                             "*.example.org, 127.0.0.1:8000)") from None
        if wildcard and "." not in host:
            raise ValueError(f"network_allow entry {raw!r}: a wildcard needs a domain with a dot, as *.example.org")
        found.append(AllowEntry(host, wildcard, port))
    return tuple(found)


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def normalise_host(host: str) -> str:
    """A URL's host as the list compares it: lower case, IDNA-encoded, no trailing dot.
    Raises NetworkRefused if it is no host name or address."""
    host = host.strip().rstrip(".").lower()
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise NetworkRefused(f"{host!r} is not a valid host name") from None
    labels = ascii_host.split(".")
    if not ascii_host or len(ascii_host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
        raise NetworkRefused(f"{host!r} is not a valid host name")
    return ascii_host


def no_network_line(url: object, turned_off: bool = False) -> str:
    """The one line for a request when no host may be reached (the operator lists
    none, or the notebook turned its list off): the URL's host as the allow-list
    would name it, and what would allow it. Light: read before any HTTP client loads."""
    from urllib.parse import urlsplit

    shown = None
    if isinstance(url, str) and len(url) <= 8192:
        try:
            parts = urlsplit(url)
            if parts.scheme.lower() in DEFAULT_PORTS and parts.hostname:
                host, port = normalise_host(parts.hostname), parts.port
                shown = host if port in (None, DEFAULT_PORTS[parts.scheme.lower()]) else f"{host}:{port}"
        except (ValueError, NetworkRefused):
            shown = None
    what = f"network access to {shown}" if shown else "network access"
    return f"{what} is not allowed in this sandbox; {NOTEBOOK_OFF_HINT if turned_off else CONFIG_HINT}"


@dataclass(frozen=True)
class NetworkPolicy:
    """What may be fetched: the allow-list, the non-global networks the operator
    allows anyway, and the limits."""

    allow: tuple[AllowEntry, ...] = ()
    private_ok: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()
    max_response_bytes: int = 100 << 20  # one response's body
    max_bytes_per_cell: int = 1 << 30  # every response's bodies in one cell
    max_requests_per_cell: int = 100
    timeout_s: float = 30.0  # one request in all (its connect to its body's end), within the cell's deadline
    ca_file: str | None = None  # None: the host's CA store

    @property
    def enabled(self) -> bool:
        return bool(self.allow)

    def allowed(self, host: str, port: int, scheme: str) -> bool:
        return any(entry.matches(host, port, scheme) for entry in self.allow)

    def narrowed(self, entries: Iterable[str]) -> NetworkPolicy:
        """The policy a notebook asks for: only entries the operator's list already
        allows (each name and port must match one of its entries). ValueError otherwise."""
        wanted = parse_allow(entries)
        for entry in wanted:
            if not any(_within(entry, mine) for mine in self.allow):
                raise ValueError(f"{entry} is not on the operator's list: a notebook may only narrow it")
        return replace(self, allow=wanted)


def _within(entry: AllowEntry, mine: AllowEntry) -> bool:
    if entry.port != mine.port:
        return False
    if not mine.wildcard:
        return not entry.wildcard and entry.host == mine.host
    return entry.host.endswith("." + mine.host)


def parse_networks(entries: Iterable[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    try:
        return tuple(ipaddress.ip_network(str(e).strip(), strict=False) for e in entries)
    except ValueError as err:
        raise ValueError(f"network_allow_addresses: {err} (expected networks such as 10.0.0.0/8)") from None


__all__ = ["CONFIG_HINT", "DEFAULT_PORTS", "NOTEBOOK_OFF_HINT", "AllowEntry", "NetworkPolicy", "NetworkRefused",
           "is_address", "no_network_line", "normalise_host", "parse_allow", "parse_networks"]
