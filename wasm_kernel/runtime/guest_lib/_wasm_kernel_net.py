"""Runs inside the WASI guest: urllib through the host's network door.

The guest has no sockets. When the operator allows some hosts, `urllib.request`
(and so `urlopen`, `urlretrieve`, pandas' `read_csv(url)`, seaborn's
`load_dataset`, sklearn's fetchers) sends each request to the host as a message
(http_open), and reads the body a chunk at a time (http_read), as pyodide-http
routes them to the browser's fetch. The host checks every request against its
rules and makes it (runtime/network_door.py); a refusal comes back as the
PermissionError the socket module would raise, with the host's one line.

Installed by the shell's start (and resume) only when the operator's list is not
empty: without it, nothing here runs and the sandbox refuses as it always did.
"""

import base64
import email.message
import io
import json
import urllib.request
import urllib.response

import _wasm_kernel_guest as _guest
import _wasm_kernel_wire as wire

READ_SIZE = 1 << 20


class _Body(io.RawIOBase):
    """A response body read from the host a chunk at a time."""

    def __init__(self, transfer):
        super().__init__()
        self._transfer = transfer
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
            raise OSError(json.loads(raw[1:]).get("message", "the transfer failed"))
        return memoryview(raw)[1:]

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
        # calls per 10 MB. Whole chunks, joined once.
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


def open_url(method, url, headers, body):
    """One request through the door: (status, reason, headers, final url, body file)."""
    message = {"op": wire.OP_HTTP_OPEN, "method": method, "url": url, "headers": [[k, v] for k, v in headers]}
    if body is not None:
        message["body"] = base64.b64encode(body).decode("ascii")
    answer = _guest.call(message)
    if not answer.get("ok"):
        raise PermissionError(answer.get("message") or "network access is not available in this sandbox")
    stream = io.BufferedReader(_Body(answer["transfer"]), buffer_size=READ_SIZE)
    return answer["status"], answer.get("reason", ""), answer.get("headers", []), answer.get("url", url), stream


class DoorHandler(urllib.request.BaseHandler):
    """urllib's http and https handler, through the host's door. It runs before the
    standard ones (which would need a socket) and the host follows redirects."""

    handler_order = 100

    def http_open(self, req):
        headers = dict(req.unredirected_hdrs)
        headers.update(req.headers)
        status, reason, pairs, final_url, stream = open_url(req.get_method(), req.full_url, headers.items(),
                                                            _body_bytes(req.data))
        message = email.message.Message()
        for name, value in pairs:
            message[name] = value
        response = urllib.response.addinfourl(stream, message, final_url, status)
        response.msg = reason  # what urllib's error processor reads, as http.client's response has it
        response.reason = reason
        return response

    https_open = http_open


def _door_send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
    """requests' HTTPAdapter.send, through the door: the host verifies TLS and follows
    nothing for requests (its own redirects are requests' Session's, each a new send)."""
    from requests.models import Response
    from requests.structures import CaseInsensitiveDict
    from requests.utils import get_encoding_from_headers

    body = request.body
    if isinstance(body, str):
        body = body.encode("utf-8")
    status, reason, pairs, final_url, raw = open_url(request.method, request.url, request.headers.items(),
                                                     _body_bytes(body))
    response = Response()
    response.status_code = status
    response.reason = reason
    response.headers = CaseInsensitiveDict(pairs)
    response.encoding = get_encoding_from_headers(response.headers)
    response.raw = raw
    response.url = final_url
    response.request = request
    response.connection = self
    if not stream:
        # What requests does without stream=True, in one read (its iter_content reads
        # 10 KiB at a time, a thousand calls per 10 MB in the guest).
        response._content = raw.read()
        response._content_consumed = True
    return response


class _PatchRequests:
    """Replaces requests' HTTPAdapter.send when a notebook first imports requests:
    importing it at every start would cost every kernel its import time."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "requests.adapters":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            module.HTTPAdapter.send = _door_send

        loader.exec_module = exec_module
        return spec


def install():
    """urllib's default opener, and requests' adapter once imported, go through the door."""
    import sys

    urllib.request.install_opener(urllib.request.build_opener(DoorHandler()))
    if "requests.adapters" in sys.modules:
        sys.modules["requests.adapters"].HTTPAdapter.send = _door_send
    elif not any(isinstance(finder, _PatchRequests) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchRequests())
