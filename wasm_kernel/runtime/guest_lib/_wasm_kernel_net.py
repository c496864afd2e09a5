"""Runs inside the WASI guest: the client side of the host's network door, and urllib through it.

The guest has no sockets. When the operator allows some hosts, `urllib.request`
(and so `urlopen`, `urlretrieve`, pandas' `read_csv(url)`, seaborn's
`load_dataset`, sklearn's fetchers) sends each request to the host as a message
(http_open), and reads the body a chunk at a time (http_read), as pyodide-http
routes them to the browser's fetch. http.client, urllib3 and requests reach the
same door through a socket-less connection (_wasm_kernel_net_http, whose install()
puts both in place). The host checks every request against its
rules and makes it (runtime/network_door.py); a refusal comes back as the
PermissionError the socket module would raise, with the host's one line.

Installed in every shell (the warm image has it), whether or not the operator
lists hosts: without a list the host refuses every request, and the refusal is
still the one line naming the host and the setting that would allow it, for every
client and both schemes (without the door, https had no handler at all: "unknown
url type", or urllib3's "the SSL module is not available").
"""

import base64
import email.message
import io
import json
import sys
import urllib.request
import urllib.response

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire
from _wasm_kernel_refusals import refused

READ_SIZE = 1 << 20
# Where a bytes object's data starts, from its address (id): CPython's tp_basicsize
# for bytes is offsetof(PyBytesObject, ob_sval) + 1. An exact read asks the host to
# write the body into a fresh bytes object of its length, so the body is in guest
# memory once (not also in an answer buffer it is copied from). Only for CPython.
_BYTES_DATA = bytes.__basicsize__ - 1 if sys.implementation.name == "cpython" else None


class DoorTransferError(OSError):
    """A transfer the host ended (its cap, its time, the server): what a socket's
    reset would be, with the host's one line."""


def _transfer_error(line):
    """The host's JSON line for a transfer it ended, as the error the reader raises."""
    return DoorTransferError(json.loads(line).get("message", "the transfer failed"))


class _Body(io.RawIOBase):
    """A response body read from the host a chunk at a time, as the server sent it."""

    def __init__(self, transfer, length=None, limit=wire.EXACT_READ_MAX):
        super().__init__()
        self._transfer = transfer
        self._left = length  # the bytes still to come, when the server said (Content-Length)
        self._limit = min(limit, wire.EXACT_READ_MAX)  # the most the host lets this body hold
        self._pending = memoryview(b"")
        self._done = False

    def readable(self):
        return True

    def _next(self, size):
        """The next chunk from the host (a memoryview), or None at the end."""
        if self._done:
            return None
        raw = _guest.call_raw({"op": wire.OP_HTTP_READ, "transfer": self._transfer, "size": size})
        if not raw:
            self._done = True
            return None
        if raw[:1] == wire.HTTP_ERROR:
            self._done = True
            raise _transfer_error(raw[1:])
        if self._left is not None:
            self._left -= len(raw) - 1
        return memoryview(raw)[1:]

    def read_rest(self):
        """The rest of a body whose length is known, as one bytes object: the host
        writes it straight into the one allocation this object is made from (an
        exact read), so the body is in guest memory once, not also as chunks to join.
        None when the length is unknown or small (read by chunks then), or more than
        the host lets the body hold: its first chunk is then the cap's one line, where
        an allocation of that size (5 GB in a 4 GB memory) would fail on its own."""
        left = self._left
        if self._done or self._pending or left is None or not wire.EXACT_READ_MIN <= left <= self._limit:
            return None
        message = {"op": wire.OP_HTTP_READ, "transfer": self._transfer, "size": left, "exact": True}
        body = None
        if _BYTES_DATA is not None:
            body = bytes(left)  # fresh (never a shared singleton at this size), not yet hashed
            message["into"] = id(body) + _BYTES_DATA
        raw = _guest.call_raw(message)
        if body is not None and not raw:
            self._left = 0
            return body
        if len(raw) != left:  # a failure's JSON line (far shorter than any exact read)
            self._done = True
            raise _transfer_error(raw)
        self._left = 0
        return raw

    def readinto(self, buffer):
        if not self._pending:
            chunk = self._next(max(len(buffer), READ_SIZE))
            if chunk is None:
                return 0
            self._pending = chunk
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def readall(self):
        # RawIOBase's readall reads 8 KiB at a time: in the guest that is a thousand
        # calls per 10 MB. The rest in one exact read when its length is known, else
        # whole chunks, joined once.
        rest = self.read_rest()
        if rest is not None:
            return rest
        parts = [self._pending] if self._pending else []
        self._pending = memoryview(b"")
        while (chunk := self._next(READ_SIZE)) is not None:
            parts.append(chunk)
        return b"".join(parts)

    def close(self):
        if not self.closed and not self._done:
            self._done = True
            try:
                _guest.call({"op": wire.OP_HTTP_CLOSE, "transfer": self._transfer})
            except Exception:
                pass
        super().close()


def _body_bytes(data):
    if data is None:
        return None
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    if hasattr(data, "read"):
        return data.read()
    return b"".join(bytes(piece) for piece in data)


def open_url(method, url, headers, body, follow=True):
    """One request through the door: (status, reason, headers, final url, body), the
    body an unbuffered raw file. follow=False: a redirect comes back as it is (for a
    client that follows redirects itself). A refusal is PermissionError, one line."""
    message = {"op": wire.OP_HTTP_OPEN, "method": method, "url": url, "headers": [[k, v] for k, v in headers]}
    if not follow:
        message["follow"] = False
    if body is not None:
        message["body"] = base64.b64encode(body).decode("ascii")
    answer = _guest.call(message)
    if not answer.get("ok"):
        raise refused(PermissionError, answer.get("message") or "network access is not available in this sandbox")
    status, pairs = answer["status"], answer.get("headers", [])
    return (status, answer.get("reason", ""), pairs, answer.get("url", url),
            _Body(answer["transfer"], _body_length(method, status, pairs), answer.get("limit", wire.EXACT_READ_MAX)))


def _body_length(method, status, pairs):
    """The body's length from its Content-Length, if it has a body and says one."""
    if method.upper() == "HEAD" or status < 200 or status in (204, 304):
        return 0
    lengths = {value.strip() for name, value in pairs if name.lower() == "content-length"}
    if len(lengths) == 1:
        (value,) = lengths
        if value.isdigit():
            return int(value)
    return None


class DoorHandler(urllib.request.BaseHandler):
    """urllib's http and https handler, through the host's door. It runs before the
    standard ones (which would need a socket) and the host follows redirects."""

    handler_order = 100

    def http_open(self, req):
        headers = dict(req.unredirected_hdrs)
        headers.update(req.headers)
        status, reason, pairs, final_url, body = open_url(req.get_method(), req.full_url, headers.items(),
                                                          _body_bytes(req.data))
        stream = io.BufferedReader(body, buffer_size=READ_SIZE)
        message = email.message.Message()
        for name, value in pairs:
            message[name] = value
        response = urllib.response.addinfourl(stream, message, final_url, status)
        response.msg = reason  # what urllib's error processor reads, as http.client's response has it
        response.reason = reason
        return response

    https_open = http_open
