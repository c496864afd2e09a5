"""Runs inside the WASI guest: http.client, urllib3 and requests through the host's network door.

These clients speak HTTP/1.1 over a socket, which the guest has not. Each of their
connections gets a DoorSocket instead: it keeps the request's bytes as the client
sends them, and when the client reads the response, it sends the whole request
through the door (without following redirects: these clients follow them
themselves, each hop a request the host checks) and serves the answer back as the
bytes of an HTTP/1.1 response. So each client's own code runs as it does on a
socket: its parser, redirects, cookies, retries, gzip decoding and streaming. As
urllib3's emscripten support does for the browser, urllib3's pools get connection
classes of their own (HTTPS included: the host makes the TLS connection and
verifies it, so the guest needs no ssl module).

Refusals stay one line: PermissionError from http.client and requests; urllib3,
which retries any OSError, gets NetworkDoorError (an urllib3 HTTPError it does not
retry), so nothing is retried silently.
"""

import http.client
import io
import socket
import sys

import _wasm_kernel_net as net
import _wasm_kernel_wire as wire
from _wasm_kernel_refusals import REFUSAL_MARK, refused

MAX_REQUEST_BYTES = wire.MAX_HTTP_BODY + (64 << 10)  # the door's body cap and room for the head
# Hop-by-hop headers of the server's connection to the host, not of this one.
_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection"}
_TLS_ARGUMENTS = ("cert_file", "key_file", "key_password", "cert_reqs", "ca_certs", "ca_cert_dir", "ca_cert_data",
                  "assert_hostname", "assert_fingerprint", "ssl_version", "ssl_minimum_version",
                  "ssl_maximum_version", "server_hostname", "ssl_context")


def _dechunk(data):
    """A chunked request body (http.client's encode_chunked) as its bytes."""
    out, rest = bytearray(), memoryview(data)
    while True:
        line_end = bytes(rest[:1024]).find(b"\r\n")
        if line_end < 0:
            raise OSError("the request's chunked body is cut short")
        size = int(bytes(rest[:line_end]).split(b";")[0], 16)
        rest = rest[line_end + 2:]
        if size == 0:
            return bytes(out)
        out += rest[:size]
        rest = rest[size + 2:]


class _Response(io.RawIOBase):
    """The answer as a socket would carry it: a status line and headers, then the
    body. The request goes through the door at the first read: the client's
    response object exists by then, so a refusal is raised where a socket's error
    would be (reading the status line), and the object is whole when it is closed."""

    def __init__(self, exchange):
        super().__init__()
        self._exchange = exchange
        self._head = None
        self._body = None
        self._body_read = False  # whether the buffered reader above may hold body bytes

    def readable(self):
        return True

    def _start(self):
        exchange, self._exchange = self._exchange, None
        head, self._body = exchange()
        self._head = memoryview(head)

    def readinto(self, buffer):
        if self._exchange is not None:
            self._start()
        if self._body is None:
            return 0
        if self._head:
            n = min(len(buffer), len(self._head))
            buffer[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        self._body_read = True
        return self._body.readinto(buffer)

    def readall(self):
        if self._exchange is not None:
            self._start()
        if self._body is None:
            return b""
        head, self._head = bytes(self._head), memoryview(b"")
        self._body_read = True
        return head + self._body.readall()

    def read_rest(self):
        """The whole body in one exact read (_wasm_kernel_net._Body.read_rest), if the
        client has read only the head; else None."""
        if self._body is None or self._head or self._body_read:
            return None
        self._body_read = True
        return self._body.read_rest()

    def close(self):
        self._exchange = None
        if self._body is not None:
            self._body.close()
        super().close()


class DoorSocket:
    """What a client's connection sees as its socket. One request per socket: the
    answer says `Connection: close`, so the client opens another for the next."""

    def __init__(self, scheme, host, port, timeout=None):
        self._scheme, self._host, self._port, self._timeout = scheme, host, port, timeout
        self._sent = bytearray()
        self._response = None
        self.used = False

    # --- what the client sends ---

    def sendall(self, data, flags=0):
        if self.used:
            raise OSError("this connection's request was already sent")
        self._sent += data
        if len(self._sent) > MAX_REQUEST_BYTES:
            raise OSError("a request through the network door is at most 16 MiB")

    def send(self, data, flags=0):
        self.sendall(data)
        return len(data)

    # --- what the client reads ---

    def makefile(self, mode="r", *args, **kwargs):
        if "r" not in mode:
            raise OSError("the network door's connection is read through its response")
        if self._response is None:
            self.used = True
            self._response = io.BufferedReader(_Response(self._exchange), buffer_size=net.READ_SIZE)
        return self._response

    def _exchange(self):
        request = bytes(self._sent)
        self._sent = bytearray()
        head, sep, rest = request.partition(b"\r\n\r\n")
        if not sep:
            raise OSError("the request was not complete when its answer was read")
        lines = head.split(b"\r\n")
        try:
            method, target, _version = lines[0].decode("latin-1").split(" ", 2)
        except ValueError:
            raise OSError("the request line is not HTTP") from None
        fields = http.client.parse_headers(io.BytesIO(b"\r\n".join(lines[1:]) + b"\r\n\r\n"))
        if "chunked" in fields.get("Transfer-Encoding", "").lower():
            body = _dechunk(rest)
        else:
            body = rest[: int(fields.get("Content-Length") or 0)]
        headers = [(k, v) for k, v in fields.items() if k.lower() not in _HOP and k.lower() != "host"]
        status, reason, pairs, _url, raw = net.open_url(method, self._url(target), headers,
                                                        body if body or "Content-Length" in fields else None,
                                                        follow=False)
        out = [f"HTTP/1.1 {status} {reason}"]
        out += [f"{k}: {v}" for k, v in pairs if k.lower() not in _HOP]
        out.append("Connection: close")
        return ("\r\n".join(out) + "\r\n\r\n").encode("latin-1", "replace"), raw

    def _url(self, target):
        if target.startswith(("http://", "https://")):  # the absolute form (a proxy's)
            return target
        host = f"[{self._host}]" if ":" in self._host else self._host
        default = 443 if self._scheme == "https" else 80
        port = "" if self._port in (None, default) else f":{self._port}"
        return f"{self._scheme}://{host}{port}{target}"

    # --- the rest of a socket's face ---

    def settimeout(self, timeout):
        self._timeout = timeout

    def gettimeout(self):
        return self._timeout

    def setsockopt(self, *args):
        pass

    def setblocking(self, flag):
        pass

    def fileno(self):
        raise OSError("the network door's connection has no file descriptor")

    def shutdown(self, how=None):
        if self._response is not None:
            self._response.close()

    def close(self):
        pass  # the response, if read, stays readable until the client closes it, as a socket's makefile


# --- http.client ---

def _connect(self):
    if getattr(self, "_tunnel_host", None):
        raise OSError("proxies are not used in this sandbox: the host makes the request")
    self.sock = DoorSocket(self._door_scheme, self.host, self.port, self.timeout)


class HTTPSConnection(http.client.HTTPConnection):
    """http.client's HTTPS connection, which a guest without ssl lacks: the host
    makes the TLS connection and verifies it with its own CA store."""

    default_port = http.client.HTTPS_PORT
    _door_scheme = "https"

    def __init__(self, host, port=None, *, timeout=socket._GLOBAL_DEFAULT_TIMEOUT,
                 source_address=None, context=None, blocksize=8192, **ignored):
        super().__init__(host, port, timeout, source_address, blocksize=blocksize)
        self._context = context


def _install_http_client():
    http.client.HTTPConnection._door_scheme = "http"
    http.client.HTTPConnection.connect = _connect
    if not hasattr(http.client, "HTTPSConnection") or http.client.HTTPSConnection is not HTTPSConnection:
        http.client.HTTPSConnection = HTTPSConnection
        if "HTTPSConnection" not in http.client.__all__:
            http.client.__all__.append("HTTPSConnection")


# --- urllib3 (and requests, which uses it) ---

def _install_urllib3(connectionpool):
    import urllib3.connection
    import urllib3.exceptions
    from urllib3.exceptions import ProtocolError

    if hasattr(urllib3.exceptions, "NetworkDoorError"):  # installed already (a resumed kernel)
        return

    class NetworkDoorError(urllib3.exceptions.HTTPError):
        """A refusal or failed transfer of the network door, in one line. Not an
        OSError: urllib3 would retry it."""

        def __init__(self, message, refused):
            super().__init__(message)
            self.refused = refused
            if refused:  # shown as the sandbox's other refusals: the cell's line, then this one
                setattr(self, REFUSAL_MARK, True)

    NetworkDoorError.__module__ = "urllib3.exceptions"

    class DoorHTTPConnection(urllib3.connection.HTTPConnection):
        door_scheme = "http"

        def _new_conn(self):
            return DoorSocket(self.door_scheme, self.host, self.port, self.timeout)

        @property
        def is_connected(self):
            return self.sock is not None and not self.sock.used

        def getresponse(self):
            try:
                return super().getresponse()
            except PermissionError as err:
                raise NetworkDoorError(str(err), refused=True) from None
            except ProtocolError as err:  # a failure while urllib3 preloads the body
                cause = err.__cause__
                if isinstance(cause, net.DoorTransferError):
                    raise NetworkDoorError(str(cause), refused=False) from None
                raise

    class DoorHTTPSConnection(DoorHTTPConnection):
        default_port = 443
        door_scheme = "https"
        is_verified = True  # the host verified the server's certificate

        def __init__(self, host, port=None, **kwargs):
            for name in _TLS_ARGUMENTS:
                setattr(self, name, kwargs.pop(name, None))
            super().__init__(host, port, **kwargs)

        def set_cert(self, *args, **kwargs):
            pass

    connectionpool.HTTPConnectionPool.ConnectionCls = DoorHTTPConnection
    connectionpool.HTTPSConnectionPool.ConnectionCls = DoorHTTPSConnection
    urllib3.connection.HTTPSConnection = DoorHTTPSConnection
    urllib3.connection.VerifiedHTTPSConnection = DoorHTTPSConnection
    urllib3.exceptions.NetworkDoorError = NetworkDoorError


def _install_requests(adapters):
    from requests.exceptions import ChunkedEncodingError, ConnectionError, ContentDecodingError
    from urllib3.exceptions import DecodeError, NetworkDoorError, ProtocolError, ReadTimeoutError

    send = adapters.HTTPAdapter.send
    if hasattr(send, "__wrapped__"):  # installed already
        return

    def door_send(self, request, *args, **kwargs):
        try:
            response = send(self, request, *args, **kwargs)
        except NetworkDoorError as err:
            if err.refused:
                raise refused(PermissionError, str(err)) from None
            raise ConnectionError(str(err), request=request) from None
        if not kwargs.get("stream", args[0] if args else False) and response.raw is not None:
            # What Session.send does next for a response not streamed (Response.content),
            # in one read: content joins 10 KiB pieces, each a round through urllib3 and
            # http.client, and holds them all until the join (a second copy of the body
            # in guest memory, and so in the next checkpoint). Its errors as content's.
            try:
                content = _door_body(response.raw)
                if content is None:
                    content = response.raw.read(decode_content=True)
                response._content = content or b""
            except ProtocolError as err:
                door = next((arg for arg in err.args if isinstance(arg, net.DoorTransferError)), None)
                if door is not None:  # the host's one line (its cap, its time, a body cut short)
                    raise ChunkedEncodingError(str(door), request=request) from None
                raise ChunkedEncodingError(err) from err
            except DecodeError as err:
                raise ContentDecodingError(err) from err
            except ReadTimeoutError as err:
                raise ConnectionError(err) from err
            response._content_consumed = True
            response.raw.release_conn()
        return response

    door_send.__wrapped__ = send
    adapters.HTTPAdapter.send = door_send


def _door_body(raw):
    """An unencoded body not yet read, in one exact read from the door (its only
    copy in guest memory); then the urllib3 response is closed, as a full read
    leaves it. None where that does not apply (urllib3 reads it)."""
    original = getattr(raw, "_original_response", None)
    door = getattr(getattr(original, "fp", None), "raw", None)
    if not isinstance(door, _Response) or raw.headers.get("Content-Encoding", "identity").lower() != "identity":
        return None
    try:
        content = door.read_rest()
    except net.DoorTransferError as err:
        raw.close()
        from urllib3.exceptions import ProtocolError

        raise ProtocolError(f"Connection broken: {err}", err) from err
    if content is not None:
        raw.close()
    return content


_WHEN_IMPORTED = {"urllib3.connectionpool": _install_urllib3, "requests.adapters": _install_requests}


class _PatchOnImport:
    """Patches urllib3's pools and requests' adapter when a notebook first imports
    them: importing them at every start would cost every kernel their import time."""

    def find_spec(self, fullname, path=None, target=None):
        patch = _WHEN_IMPORTED.get(fullname)
        if patch is None:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        original = spec.loader.exec_module

        def exec_module(module):
            original(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


_installed = False


def install():
    """urllib's default opener, http.client's connections, and urllib3's pools (so
    requests) once imported, go through the door. Once per interpreter (the warm
    image has it done; a resumed older state may not)."""
    global _installed
    if _installed:
        return
    _installed = True
    import urllib.request

    urllib.request.install_opener(urllib.request.build_opener(net.DoorHandler()))
    _install_http_client()
    for name, patch in _WHEN_IMPORTED.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if not any(isinstance(finder, _PatchOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport())
