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
- a response is read in chunks, under a byte cap (a response that announces more is
  refused before its body is read), within one deadline for the whole transfer (from
  the connect to the body's last byte: a server that trickles its headers or body a
  byte at a time is cut off there too), and stops at once when the caller says so
  (an interrupt, the cell's end);
- a cancel reaches the connection wherever it waits (connecting, in the TLS handshake,
  for the headers, for the body): its socket is shut down from the cancelling side, so
  the blocked call returns, and the worker thread has ended when cancel() returns.

urllib3 makes the requests (a dependency for this: it lets a connection go to one
address while TLS checks another name, `server_hostname` and `assert_hostname`,
which requests and httpx hide). Every refusal is a `NetworkRefused` whose message is
the one line the notebook shows.
"""

from __future__ import annotations

import errno
import functools
import http.client
import ipaddress
import os
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

from .thread_names import name_this_thread
from .network_policy import CONFIG_HINT, DEFAULT_PORTS, NetworkPolicy, NetworkRefused, is_address, normalise_host

if TYPE_CHECKING:
    import urllib3

MAX_REDIRECTS = 5
HTTP_THREAD_NAME = "wasm-kernel-http"  # a transfer's worker, by this name in /proc too
CHUNK_BYTES = 1 << 20
QUEUED_CHUNKS = 4  # chunks read ahead of the guest: the most a transfer holds in host memory
POLL_S = 0.05  # how often a waiting caller looks at its stop flag and deadline
CONNECT_S = 10.0  # the most a connect may take, within the transfer's deadline
JOIN_S = 2.0  # how long a cancel waits for the worker: only a name lookup under way takes more
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

    @property
    def limit(self) -> int:
        """The most bytes this body may have: a longer one ends in the cap's line."""
        return self._transfer.limit

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
        """End the transfer: its socket closed and its thread ended when this returns."""
        self._transfer.cancel()


_END = object()


class _Transfer:
    """One request in a worker thread; what it produces goes through `items`.

    The worker's live connection is reachable from any thread through `_handle`, a
    duplicate of its socket made once it is connected (the connect itself is polled):
    shutting that down ends a TLS handshake or a read under way (closing a descriptor
    would not wake a call blocked on it; shutting the socket down does), and the
    duplicate stays valid while TLS takes the socket over."""

    def __init__(self, stopped: Stopped, deadline: float, limit: int, url: str) -> None:
        self.items: queue.Queue[object] = queue.Queue(maxsize=QUEUED_CHUNKS)
        self.stopped, self.deadline, self.limit, self.url = stopped, deadline, limit, url
        self.cancelled = threading.Event()
        self.received = 0
        self.worker: threading.Thread | None = None
        self._lock = threading.Lock()  # _handle: shut down by a cancel, closed by the worker, never both at once
        self._handle: socket.socket | None = None

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
        """End the transfer now, from any thread: a blocked connect or read returns at
        once, and the worker has ended (its sockets closed) when this returns, unless
        it is in a name lookup, which nothing can interrupt (it ends by itself then)."""
        self.cancelled.set()
        with self._lock:
            if self._handle is not None:
                try:
                    self._handle.shutdown(socket.SHUT_RDWR)
                except OSError:  # the server reset it already
                    pass
        while True:  # a worker waiting for room in the queue gets it, and sees the cancel
            try:
                self.items.get_nowait()
            except queue.Empty:
                break
        worker = self.worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(JOIN_S)

    # --- the worker's side ---

    def connect(self, address: tuple[str, int], timeout: float) -> socket.socket:
        """A connected socket to the checked address (urllib3's connections call this).
        The connect is polled, so a cancel ends it within 50 ms; once connected, the
        socket is reachable by cancel() before anything is sent or read on it."""
        from urllib3.util.wait import wait_for_write

        sock = socket.socket(socket.AF_INET6 if ":" in address[0] else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            until = min(time.monotonic() + timeout, self.deadline)
            while code in (errno.EINPROGRESS, errno.EAGAIN):
                if self.cancelled.is_set():
                    raise NetworkRefused("the transfer was cancelled")
                if time.monotonic() > until:
                    raise NetworkRefused(f"{self.url}: the connection was not made within its time")
                if wait_for_write(sock, POLL_S):
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise NetworkRefused(f"{self.url}: the request failed (cannot connect: {os.strerror(code)})")
            sock.settimeout(timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                if self.cancelled.is_set():
                    raise NetworkRefused("the transfer was cancelled")
                self._drop_handle()
                self._handle = sock.dup()
        except BaseException:
            sock.close()
            raise
        return sock

    def release(self) -> None:
        """The worker is done with its connection: the duplicate goes too."""
        with self._lock:
            self._drop_handle()

    def _drop_handle(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def put(self, item: object) -> bool:
        while not self.cancelled.is_set() and time.monotonic() <= self.deadline:
            try:
                self.items.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False  # cancelled, or past the deadline with no one reading: the transfer is over

    def pump(self, response: urllib3.BaseHTTPResponse) -> None:
        """Read the body into the queue until its end, the cap, the deadline or a cancel."""
        announced = response.length_remaining
        if announced is not None and announced > self.limit:
            # Refused before a byte is read: the whole body could never be had, and a
            # guest asking for all of it at once would ask for more than it may hold.
            self.put(self._too_large(f" (it announces {announced:,})"))
            return
        try:
            while not self.cancelled.is_set() and time.monotonic() <= self.deadline:
                piece = response.read1(CHUNK_BYTES)
                if not piece:
                    self.put(_END)
                    return
                self.received += len(piece)
                if self.received > self.limit:
                    self.put(self._too_large())
                    return
                if not self.put(piece):
                    return
        except Exception as err:
            if not self.cancelled.is_set():
                self.put(NetworkRefused(_transfer_failed(self.url, self.received, err)))

    def _too_large(self, detail: str = "") -> NetworkRefused:
        return NetworkRefused(f"{self.url}: the response is larger than the {self.limit:,} bytes a request may "
                              f"fetch{detail}")


def fetch(method: str, url: str, *, policy: NetworkPolicy, headers: Mapping[str, str] | None = None,
          body: bytes | None = None, resolver: Resolver = system_resolver, stopped: Stopped = lambda: False,
          deadline: float | None = None, limit: int | None = None, follow_redirects: bool = True) -> Fetched:
    """Make the request under `policy`, following redirects (each hop checked) unless
    follow_redirects is False (a client that follows them itself, as http.client's
    users do, gets the 3xx). The body is read from the result's chunks() as the server
    sent it (its Content-Encoding undone by the guest's client, as on a socket).
    NetworkRefused with one line otherwise.
    deadline: a time.monotonic() moment the whole transfer must end by (and at most
    policy.timeout_s from now); limit: the most bytes the body may have (at most
    policy.max_response_bytes); stopped: the caller's interrupt flag, looked at every
    50 ms. The result's close() ends the transfer, its socket and its thread."""
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
        name_this_thread(HTTP_THREAD_NAME)
        connections: list[Any] = []
        try:
            head = _request(method, target, kept, body, policy, resolver, transfer, follow_redirects, connections)
            if transfer.put(head):
                transfer.pump(connections[-1].response)
        except NetworkRefused as err:
            transfer.put(err)
        except Exception as err:  # anything else is a failed request, in one line
            if not transfer.cancelled.is_set():
                transfer.put(NetworkRefused(f"{target.url}: the request failed ({_first_line(err)})"))
        finally:
            for conn in connections:
                _close_quietly(conn)
            transfer.release()

    transfer.worker = threading.Thread(target=work, name=HTTP_THREAD_NAME, daemon=True)
    transfer.worker.start()
    head = transfer.next_item()
    assert isinstance(head, tuple)
    status, reason, response_headers, final_url = head
    return Fetched(transfer, status, reason, response_headers, final_url)


def _request(method: str, target: Target, headers: list[tuple[str, str]], body: bytes | None,
             policy: NetworkPolicy, resolver: Resolver, transfer: _Transfer, follow: bool,
             connections: list[Any]) -> tuple[int, str, list[tuple[str, str]], str]:
    """In the worker: resolve, connect, send, follow redirects; each hop's connection
    goes on `connections` (the worker closes them all), the last one's response
    (its `response`) is the one pump() reads."""
    for _ in range(MAX_REDIRECTS + 1):
        address = checked_address(target, policy, resolver)
        conn = _connection(target, address, policy, transfer)
        connections.append(conn)
        response = _send(method, target, headers, body, conn, transfer)
        location = response.headers.get("Location")
        if follow and response.status in _REDIRECTS and location:
            _close_quietly(conn)
            target = check_url(urljoin(target.url, location), policy)
            transfer.url = target.url
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None
            continue
        return response.status, response.reason or "", list(response.headers.items()), target.url
    raise NetworkRefused(f"{transfer.url}: more than {MAX_REDIRECTS} redirects")


class _HeldConnection:
    """Mixed into urllib3's connections: the socket comes from the transfer's connect(),
    so a cancel can reach it from the moment it exists."""

    transfer: _Transfer
    host: str
    port: int
    timeout: float
    response: Any = None  # the response read on it, for pump()

    def _new_conn(self) -> socket.socket:
        return self.transfer.connect((self.host, self.port), self.timeout)


@functools.cache
def _connection_classes() -> tuple[type, type]:
    import urllib3.connection  # here, not at the top: ~25 ms of every kernel start, for cells that never fetch

    return (type("HeldHTTPConnection", (_HeldConnection, urllib3.connection.HTTPConnection), {}),
            type("HeldHTTPSConnection", (_HeldConnection, urllib3.connection.HTTPSConnection), {}))


def _connection(target: Target, address: str, policy: NetworkPolicy, transfer: _Transfer) -> Any:
    """A connection to the checked address (TLS verified for the name), not yet connected."""
    plain, secure = _connection_classes()
    left = transfer.deadline - time.monotonic()
    if left <= 0 or transfer.cancelled.is_set():
        raise NetworkRefused(f"{target.url}: no time is left for the request")
    if target.scheme == "https":
        context = ssl.create_default_context(cafile=policy.ca_file)
        conn = secure(address, target.port, server_hostname=target.host, assert_hostname=target.host,
                      ssl_context=context, timeout=min(left, CONNECT_S))
    else:
        conn = plain(address, target.port, timeout=min(left, CONNECT_S))
    conn.transfer = transfer
    return conn


def _send(method: str, target: Target, headers: list[tuple[str, str]], body: bytes | None, conn: Any,
          transfer: _Transfer) -> urllib3.BaseHTTPResponse:
    import urllib3

    host_header = target.host if target.port == DEFAULT_PORTS[target.scheme] else f"{target.host}:{target.port}"
    request_headers = urllib3.HTTPHeaderDict({"Host": host_header})
    for name, value in headers:
        request_headers.add(name, value)
    try:
        conn.connect()
        # Each read waits at most what is left of the deadline; a server that sends a
        # byte at a time within that is cut off by the caller, whose cancel shuts the socket.
        conn.timeout = max(0.001, transfer.deadline - time.monotonic())
        conn.request(method, target.path, body=body, headers=request_headers, preload_content=False,
                     decode_content=False)
        response = conn.getresponse()
    except NetworkRefused:
        raise
    except TimeoutError:
        raise NetworkRefused(f"{target.url}: no answer within its time") from None
    except (ssl.SSLError, ssl.CertificateError, urllib3.exceptions.SSLError) as err:
        raise NetworkRefused(f"{target.url}: TLS verification failed ({_first_line(err)})") from None
    except (OSError, http.client.HTTPException, urllib3.exceptions.HTTPError) as err:
        raise NetworkRefused(f"{target.url}: the request failed ({_first_line(err)})") from None
    conn.response = response
    return response


def _close_quietly(conn: Any) -> None:
    try:
        if conn.response is not None:
            conn.response.close()
        conn.close()
    except Exception:  # a connection a cancel already reset
        pass


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
