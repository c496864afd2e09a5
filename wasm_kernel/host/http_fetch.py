"""The host's side of the HTTP door: one request on a guest's behalf, under the operator's rules.

The guest never gets a socket. When the operator allows some hosts
(`c.WasmKernel.network_allow`), a guest's `urllib`, `requests` or `http.client` call
becomes a request the host makes here, and only if every rule holds:

- the URL is `http` or `https`, on the standard port unless the entry names another,
  and its host is on the list: an exact name, or `*.example.org` for the names under
  it (not the name itself);
- the name is resolved here, and every address it has must be global: loopback,
  private, link-local (169.254.169.254, the cloud metadata service), multicast,
  reserved and the like are refused unless the operator lists that network
  (`network_allow_addresses`);
- the connection goes to the very address that was checked (a DNS answer that changes
  between the check and the connect, DNS rebinding, changes nothing), while TLS still
  verifies the certificate for the name, against the host's CA store;
- redirects are followed here, at most MAX_REDIRECTS, each hop checked as the first;
- nothing in the URL or the headers may carry a line break or a control character
  (header injection);
- a response is read in chunks, under a byte cap, within a deadline, and stops at once
  when the caller says so (an interrupt).

urllib3 makes the requests (a dependency for this: it lets a connection go to one
address while TLS checks another name, `server_hostname` and `assert_hostname`,
which requests and httpx hide). Every refusal is a `NetworkRefused` whose message is
the one line the notebook shows.
"""

from __future__ import annotations

import http.client
import ipaddress
import queue
import re
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from .network_policy import CONFIG_HINT, DEFAULT_PORTS, NetworkPolicy, NetworkRefused, is_address, normalise_host

if TYPE_CHECKING:
    import urllib3

MAX_REDIRECTS = 5
CHUNK_BYTES = 1 << 20
QUEUED_CHUNKS = 4  # chunks read ahead of the guest: the most a transfer holds in host memory
POLL_S = 0.05  # how often a waiting caller looks at its stop flag and deadline
URL_MAX = 8192
HEADER_MAX = 8192
HEADERS_MAX = 100
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110 field-name
_REDIRECTS = {301, 302, 303, 307, 308}
# Hop-by-hop and framing headers are the client's, never the guest's to set.
_HOST_SET_HEADERS = {"host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer",
                     "keep-alive", "proxy-connection", "proxy-authorization"}

Resolver = Callable[[str, int], list[str]]  # (name, port) -> addresses, as getaddrinfo gives them
Stopped = Callable[[], bool]  # True once the caller wants the transfer to end (an interrupt)


# --- one request -----------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, never the fragment

    @property
    def url(self) -> str:
        default = DEFAULT_PORTS[self.scheme]
        netloc = self.host if self.port == default else f"{self.host}:{self.port}"
        if ":" in self.host:
            netloc = f"[{self.host}]" if self.port == default else f"[{self.host}]:{self.port}"
        return f"{self.scheme}://{netloc}{self.path}"


def refused_host(host: str) -> NetworkRefused:
    return NetworkRefused(f"network access to {host} is not allowed in this sandbox; {CONFIG_HINT}")


def check_url(url: str, policy: NetworkPolicy) -> Target:
    """The URL's scheme, host, port and path, if the list allows it; else NetworkRefused."""
    if not isinstance(url, str) or len(url) > URL_MAX:
        raise NetworkRefused("the URL is not text of at most 8,192 characters")
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise NetworkRefused("the URL holds a space, a line break or a control character; quote it")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as err:
        raise NetworkRefused(f"the URL is malformed ({err})") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise NetworkRefused(f"{scheme or 'a scheme-less'} URLs cannot be fetched in this sandbox; only http and "
                             "https, to hosts the operator allows")
    if parts.username is not None or parts.password is not None:
        raise NetworkRefused("URLs with a user name or password are not fetched; send credentials in a header")
    host = normalise_host(parts.hostname or "")
    port = port if port is not None else DEFAULT_PORTS[scheme]
    if not policy.allowed(host, port, scheme):
        shown = host if port == DEFAULT_PORTS[scheme] else f"{host}:{port}"
        raise refused_host(shown)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port, path)


def system_resolver(host: str, port: int) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise NetworkRefused(f"{host} could not be resolved ({err.strerror})") from None
    return [str(info[4][0]) for info in infos]


def checked_address(target: Target, policy: NetworkPolicy, resolver: Resolver) -> str:
    """The address to connect to: every address the name has must be global, or in a
    network the operator allows; the first is used (the connection goes there, and
    nowhere a later answer would say). An address in the URL is used as it is: it
    passed the list only if the operator listed that very address."""
    if is_address(target.host):
        return target.host
    addresses = resolver(target.host, target.port)
    if not addresses:
        raise NetworkRefused(f"{target.host} has no address")
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        mapped = getattr(address, "ipv4_mapped", None)
        if mapped is not None:
            address = mapped
        if any(address in net for net in policy.private_ok):
            continue
        if not address.is_global or address.is_multicast:
            raise NetworkRefused(f"network access to {target.host} is not allowed in this sandbox: it resolves to "
                                 f"{_kind(address)} address; the operator can allow that network with "
                                 "c.WasmKernel.network_allow_addresses")
    return addresses[0].split("%", 1)[0]


def _kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str:
    for attr, words in (("is_loopback", "a loopback"), ("is_link_local", "a link-local"),
                        ("is_multicast", "a multicast"), ("is_unspecified", "an unspecified"),
                        ("is_private", "a private"), ("is_reserved", "a reserved")):
        if getattr(address, attr):
            return words
    return "a non-global"


def checked_headers(headers: Mapping[str, str] | Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    items = list(headers.items() if isinstance(headers, Mapping) else headers)
    if len(items) > HEADERS_MAX:
        raise NetworkRefused(f"a request may carry at most {HEADERS_MAX} headers")
    kept = []
    for name, value in items:
        name, value = str(name), str(value)
        if not _TOKEN.fullmatch(name) or len(name) > 256:
            raise NetworkRefused(f"the header name {name[:40]!r} is not a valid HTTP field name")
        if len(value) > HEADER_MAX or any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            raise NetworkRefused(f"the header {name} holds a line break or a control character")
        if name.lower() in _HOST_SET_HEADERS:
            continue  # the client sets these itself, from the checked target
        kept.append((name, value))
    return kept


class Fetched:
    """A response whose body is read with chunks(); its URL after redirects.

    The transfer runs in a thread of its own: the caller waits for each chunk on a
    queue of a few chunks (so a large body is never held whole in host memory),
    looking at its stop flag and deadline every 50 ms, so an interrupt or the
    deadline ends it at once, even while the server sends nothing."""

    def __init__(self, transfer: _Transfer, status: int, reason: str, headers: list[tuple[str, str]],
                 url: str) -> None:
        self._transfer = transfer
        self.status, self.reason, self.headers, self.url = status, reason, headers, url

    @property
    def received(self) -> int:
        return self._transfer.received

    def chunks(self) -> Iterator[bytes]:
        """The body, a chunk at a time, within the byte cap and the deadline."""
        try:
            while True:
                piece = self._transfer.next_item()
                if piece is None:
                    return
                yield piece
        finally:
            self.close()

    def close(self) -> None:
        self._transfer.cancel()


_END = object()


class _Transfer:
    """One request in a worker thread; what it produces goes through `items`."""

    def __init__(self, stopped: Stopped, deadline: float, limit: int, url: str) -> None:
        self.items: queue.Queue[object] = queue.Queue(maxsize=QUEUED_CHUNKS)
        self.stopped, self.deadline, self.limit, self.url = stopped, deadline, limit, url
        self.cancelled = threading.Event()
        self.response: urllib3.BaseHTTPResponse | None = None
        self.pool: urllib3.HTTPConnectionPool | None = None
        self.received = 0

    # --- the caller's side ---

    def next_item(self) -> Any:
        while True:
            if self.stopped():
                self.cancel()
                raise NetworkRefused("the transfer was interrupted")
            if time.monotonic() > self.deadline:
                self.cancel()
                raise NetworkRefused(f"{self.url}: the transfer took longer than its time allows")
            try:
                item = self.items.get(timeout=POLL_S)
            except queue.Empty:
                continue
            if isinstance(item, BaseException):
                self.cancel()
                raise item
            if item is _END:
                return None
            return item

    def cancel(self) -> None:
        """End the transfer now, from any thread: a blocked read returns at once."""
        self.cancelled.set()
        response, pool = self.response, self.pool
        if response is not None:
            try:
                response.shutdown()
            except Exception:  # already closed
                pass
            response.close()
        if pool is not None:
            pool.close()

    # --- the worker's side ---

    def put(self, item: object) -> bool:
        while not self.cancelled.is_set():
            try:
                self.items.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def pump(self, response: urllib3.BaseHTTPResponse) -> None:
        """Read the body into the queue until its end, the cap or a cancel."""
        try:
            while not self.cancelled.is_set():
                piece = response.read1(CHUNK_BYTES)
                if not piece:
                    self.put(_END)
                    return
                self.received += len(piece)
                if self.received > self.limit:
                    self.put(NetworkRefused(f"{self.url}: the response is larger than the {self.limit:,} bytes "
                                            "a request may fetch"))
                    return
                if not self.put(piece):
                    return
        except Exception as err:
            if not self.cancelled.is_set():
                self.put(NetworkRefused(_transfer_failed(self.url, self.received, err)))
        finally:
            response.release_conn()


def fetch(method: str, url: str, *, policy: NetworkPolicy, headers: Mapping[str, str] | None = None,
          body: bytes | None = None, resolver: Resolver = system_resolver, stopped: Stopped = lambda: False,
          deadline: float | None = None, limit: int | None = None, follow_redirects: bool = True) -> Fetched:
    """Make the request under `policy`, following redirects (each hop checked) unless
    follow_redirects is False (a client that follows them itself, as http.client's
    users do, gets the 3xx). The body is read from the result's chunks() as the server
    sent it (its Content-Encoding undone by the guest's client, as on a socket).
    NetworkRefused with one line otherwise.
    deadline: a time.monotonic() moment the whole transfer must end by; limit: the
    most bytes the body may have (at most policy.max_response_bytes); stopped: the
    caller's interrupt flag, looked at every 50 ms."""
    if not policy.enabled:
        raise NetworkRefused("network access is not available in this sandbox")
    method = str(method).upper()
    if not _TOKEN.fullmatch(method) or len(method) > 16:
        raise NetworkRefused(f"{method[:20]!r} is not an HTTP method")
    kept = checked_headers(headers or {})
    end = min(deadline if deadline is not None else float("inf"), time.monotonic() + policy.timeout_s)
    cap = policy.max_response_bytes if limit is None else min(limit, policy.max_response_bytes)
    target = check_url(url, policy)
    transfer = _Transfer(stopped, end, cap, target.url)

    def work() -> None:
        try:
            head = _request(method, target, kept, body, policy, resolver, transfer, follow_redirects)
        except NetworkRefused as err:
            transfer.put(err)
            return
        except Exception as err:  # anything else is a failed request, in one line
            transfer.put(NetworkRefused(f"{target.url}: the request failed ({_first_line(err)})"))
            return
        if transfer.put(head) and transfer.response is not None:
            transfer.pump(transfer.response)

    threading.Thread(target=work, name="wasm-kernel-http", daemon=True).start()
    head = transfer.next_item()
    assert isinstance(head, tuple)
    status, reason, response_headers, final_url = head
    return Fetched(transfer, status, reason, response_headers, final_url)


def _request(method: str, target: Target, headers: list[tuple[str, str]], body: bytes | None,
             policy: NetworkPolicy, resolver: Resolver, transfer: _Transfer,
             follow: bool = True) -> tuple[int, str, list[tuple[str, str]], str]:
    """In the worker: resolve, connect, send, follow redirects; the final response is
    left in transfer.response for pump()."""
    for _ in range(MAX_REDIRECTS + 1):
        address = checked_address(target, policy, resolver)
        response = _send(method, target, address, headers, body, policy, transfer)
        location = response.headers.get("Location")
        if follow and response.status in _REDIRECTS and location:
            response.drain_conn()
            response.release_conn()
            target = check_url(urljoin(target.url, location), policy)
            transfer.url = target.url
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None
            continue
        return response.status, response.reason or "", list(response.headers.items()), target.url
    raise NetworkRefused(f"{transfer.url}: more than {MAX_REDIRECTS} redirects")


def _send(method: str, target: Target, address: str, headers: list[tuple[str, str]], body: bytes | None,
          policy: NetworkPolicy, transfer: _Transfer) -> urllib3.BaseHTTPResponse:
    import urllib3  # here, not at the top: ~25 ms of every kernel start, for cells that never fetch

    left = transfer.deadline - time.monotonic()
    if left <= 0 or transfer.cancelled.is_set():
        raise NetworkRefused(f"{target.url}: no time is left for the request")
    timeout = urllib3.Timeout(connect=min(left, 10.0), read=left)
    if target.scheme == "https":
        context = ssl.create_default_context(cafile=policy.ca_file)
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            address, target.port, server_hostname=target.host, assert_hostname=target.host, ssl_context=context,
            timeout=timeout, retries=False, maxsize=1)
    else:
        pool = urllib3.HTTPConnectionPool(address, target.port, timeout=timeout, retries=False, maxsize=1)
    if transfer.pool is not None:
        transfer.pool.close()
    transfer.pool = pool
    host_header = target.host if target.port == DEFAULT_PORTS[target.scheme] else f"{target.host}:{target.port}"
    request_headers = urllib3.HTTPHeaderDict({"Host": host_header})
    for name, value in headers:
        request_headers.add(name, value)
    try:
        response = pool.urlopen(method, target.path, body=body, headers=request_headers, redirect=False,
                                preload_content=False, decode_content=False, assert_same_host=False)
    except urllib3.exceptions.ReadTimeoutError:
        raise NetworkRefused(f"{target.url}: no answer within its time") from None
    except urllib3.exceptions.SSLError as err:
        raise NetworkRefused(f"{target.url}: TLS verification failed ({_first_line(err)})") from None
    except urllib3.exceptions.HTTPError as err:
        raise NetworkRefused(f"{target.url}: the request failed ({_first_line(err)})") from None
    transfer.response = response
    return response


def _transfer_failed(url: str, received: int, err: BaseException) -> str:
    import urllib3

    if any(isinstance(arg, (http.client.IncompleteRead, urllib3.exceptions.IncompleteRead)) for arg in err.args):
        return f"{url}: the server ended the body after {received:,} bytes, short of the length it announced"
    return f"{url}: the transfer failed ({_first_line(err)})"


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    line = text[0] if text else type(err).__name__
    # urllib3's messages name the pool's address, which is the checked IP: keep the reason only.
    return re.sub(r"HTTPS?ConnectionPool\([^)]*\): ", "", line)[:200]


__all__ = [
    "Fetched", "NetworkPolicy", "NetworkRefused", "Target", "check_url", "checked_address",
    "checked_headers", "fetch", "system_resolver",
]
