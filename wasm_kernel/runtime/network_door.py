"""The network door's guest side on the host: the http_open / http_read / http_close
messages of one turn, answered with host/http_fetch.py under the guest's policy.

A request lives only inside the turn that opened it: the turn's end closes every
transfer it left open (a rolled-back turn's objects would otherwise hold host
sockets). A turn may make at most `max_requests_per_cell` requests and read at most
`max_bytes_per_cell` bytes; each request's time counts against the cell's deadline
and stops at once when the cell is interrupted or stopped. The body reaches the
guest a chunk at a time, as raw bytes (HTTP_DATA + bytes), never as JSON; or, when
the guest knows how much is left (Content-Length) and wants it all, in one answer
of exactly that many bytes (an exact read): the host allocates it in guest memory
and writes each chunk into it as it arrives, so neither side holds the body twice.
A guest holds one NetworkDoor, which reads the running turn's stops.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..host.network_policy import NetworkPolicy, NetworkRefused, no_network_line
from ..host.log import get_logger
from .guest_config import GuestOptions
from .guest_instance import GuestInstance
from .guest_messages import HttpClose, HttpOpen, HttpRead
from .turn_stops import TurnStops
from .wire import HTTP_DATA, HTTP_ERROR

if TYPE_CHECKING:
    from ..host.http_fetch import Fetched

log = get_logger("wasm_kernel.runtime")

MAX_OPEN_TRANSFERS = 16
_TRANSFER_IDS = itertools.count(1)


@dataclass
class _Open:
    fetched: Fetched
    chunks: object  # the body's iterator
    host: str
    started: float
    context: dict[str, str]  # GuestOptions.log_context: the session the request is for
    pending: bytes = b""


class Gather(NamedTuple):
    """An exact read, answered by NetworkDoor.gather() with the door call's caller."""

    net: "TurnNetwork"
    transfer: int
    size: int
    into: int | None  # the guest's own buffer for it, else an allocation answers it


class Gathered(NamedTuple):
    """An exact read's answer, already in guest memory (the guest frees it once read)."""

    address: int
    size: int


@dataclass
class TurnNetwork:
    """One turn's requests: the open transfers, and what the turn fetched."""

    transfers: dict[int, _Open] = field(default_factory=dict)
    requests: int = 0
    bytes: int = 0

    def end(self, transfer: int, how: str) -> None:
        """The transfer is over (closed, done, failed): its connection closed, its request logged."""
        open_ = self.transfers.pop(transfer, None)
        if open_ is not None:
            _finish(open_, how)

    def close_all(self) -> None:
        for open_ in self.transfers.values():
            _finish(open_, "closed_at_turn_end")
        self.transfers.clear()


class NetworkDoor:
    """The network side of a guest's door."""

    def __init__(self, instance: GuestInstance, stops: TurnStops, options: GuestOptions) -> None:
        self.instance = instance
        self.stops = stops
        self.policy = options.network  # the operator's rules, or a notebook's narrowed ones
        self.log_context = dict(options.log_context)  # the session the requests are for

    def set_network(self, policy: NetworkPolicy | None) -> None:
        """Narrowed rules (a notebook's %network), read by the next request: the
        guest's urllib handler, installed or not at start, asks the host each time."""
        self.policy = policy

    def _network_policy(self) -> NetworkPolicy | None:
        policy = self.policy
        return policy if isinstance(policy, NetworkPolicy) and policy.enabled else None

    def _stopped(self) -> bool:
        stops = self.stops
        return stops.reason is not None or stops.soft.pending or stops.interrupt_overdue()

    def http(self, net: TurnNetwork, message: HttpOpen | HttpRead | HttpClose) -> str | bytes:
        if isinstance(message, HttpOpen):
            return self._http_open(net, message)
        if isinstance(message, HttpRead):
            return self._http_read(net, message)
        net.end(message.transfer, "closed")
        return json.dumps({"ok": True})

    def _http_open(self, net: TurnNetwork, message: HttpOpen) -> str:
        policy = self._network_policy()
        if policy is None:  # no list, or the notebook's %network off: the host and what would allow it
            return _refusal(no_network_line(message.url, turned_off=isinstance(self.policy, NetworkPolicy)))
        if net.requests >= policy.max_requests_per_cell:
            return _refusal(f"this cell made {policy.max_requests_per_cell} requests, the most a cell may make")
        if len(net.transfers) >= MAX_OPEN_TRANSFERS:
            return _refusal(f"at most {MAX_OPEN_TRANSFERS} requests may be open at once; close the others")
        net.requests += 1
        started = time.monotonic()
        left = policy.max_bytes_per_cell - net.bytes
        # The HTTP client (http.client, ssl, urllib3) comes with a kernel's first
        # request: most never make one, and it was ~3 ms of every start.
        from ..host.http_fetch import fetch

        try:
            fetched = fetch(message.method, message.url, policy=policy, headers=dict(message.headers),
                            body=message.body, stopped=self._stopped, deadline=self.stops.deadline_at,
                            limit=max(0, left), follow_redirects=message.follow)
        except NetworkRefused as err:
            log.info("network.refused", url=message.url[:200], reason=str(err), **self.log_context)
            return _refusal(str(err))
        # Numbers never repeat across turns: a response object of an earlier cell, closed
        # when it is collected during a later one, must not close that cell's transfer.
        transfer = next(_TRANSFER_IDS)
        host = fetched.url.split("/")[2] if "//" in fetched.url else fetched.url
        net.transfers[transfer] = _Open(fetched, iter(fetched.chunks()), host, started, dict(self.log_context))
        # limit: the most the body may hold, so the guest never sets out to hold more
        # (a body that announces more fails at its first read, with the cap's line).
        return json.dumps({"ok": True, "transfer": transfer, "status": fetched.status, "reason": fetched.reason,
                           "headers": fetched.headers, "url": fetched.url, "limit": fetched.limit})

    def _http_read(self, net: TurnNetwork, message: HttpRead) -> bytes | Gather:
        open_ = net.transfers.get(message.transfer)
        if open_ is None:
            return HTTP_ERROR + json.dumps({"message": "this response is closed"}).encode()
        if message.exact:
            return Gather(net, message.transfer, message.size, message.into)
        if not open_.pending:
            try:
                open_.pending = next(open_.chunks, b"")  # type: ignore[call-overload]
            except NetworkRefused as err:
                net.end(message.transfer, "failed")
                return HTTP_ERROR + json.dumps({"message": str(err)}).encode()
            if not open_.pending:  # the end of the body
                net.end(message.transfer, "done")
                return b""
        piece, open_.pending = open_.pending[: message.size], open_.pending[message.size:]
        net.bytes += len(piece)
        return HTTP_DATA + piece

    def gather(self, caller: Any, gather: Gather) -> Gathered | bytes:
        """Answer an exact read: into the guest's own buffer (`into`, checked to lie in
        its memory; the answer is then empty), or into an allocation made first (guest
        code: memory may grow); each chunk is written there as it arrives, and no
        guest code runs in between, so the address stays good. A failure (the body
        ends short, the cap, the deadline, an interrupt) ends the transfer, and the
        answer is its JSON line instead (in the allocation: far smaller than it)."""
        net, size, into = gather.net, gather.size, gather.into
        open_ = net.transfers[gather.transfer]
        if into is not None and into + size > self.instance.mem.size(caller):
            net.end(gather.transfer, "failed")
            return json.dumps({"message": "the buffer for the body is outside guest memory"}).encode()
        address = into if into is not None else self.instance.alloc(caller, size) & 0xFFFFFFFF
        if not address:
            net.end(gather.transfer, "failed")
            return json.dumps({"message": f"the guest has no room for a {size:,}-byte body"}).encode()
        at, failure = 0, ""
        while at < size:
            if not open_.pending:
                try:
                    open_.pending = next(open_.chunks, b"")  # type: ignore[call-overload]
                except NetworkRefused as err:
                    failure = str(err)
                    break
                if not open_.pending:
                    failure = f"the body ended after {at:,} of the {size:,} bytes it announced"
                    break
            piece = open_.pending[: size - at]
            open_.pending = open_.pending[len(piece):]
            self.instance.mem.write(caller, address + at, piece)
            at += len(piece)
            net.bytes += len(piece)
        if failure:
            net.end(gather.transfer, "failed")
            line = json.dumps({"message": failure[:1000]}).encode()
            if into is not None:
                return line
            self.instance.mem.write(caller, address, line)
            return Gathered(address, len(line))
        return b"" if into is not None else Gathered(address, size)


def _finish(open_: _Open, how: str) -> None:
    open_.fetched.close()
    log.info("network.request", host=open_.host, status=open_.fetched.status, bytes=open_.fetched.received,
             seconds=round(time.monotonic() - open_.started, 3), end=how, **open_.context)


def _refusal(line: str) -> str:
    return json.dumps({"ok": False, "error": "refused", "message": line})


__all__ = ["Gather", "Gathered", "NetworkDoor", "TurnNetwork"]
