"""Local HTTP and HTTPS servers for the network door's tests: loopback only.

`LocalWeb` serves, on 127.0.0.1, a few paths the tests need: small files, JSON, a body
of N bytes streamed, redirects, a server that answers slowly or never, a chunked
answer, a body cut short, headers trickled a byte at a time, cookies, and echoes of the request's headers; and files a test adds with
`serve()`, gzip-encoded for a client that asks (as real data hosts do). `LocalWeb(tls=True)` serves HTTPS with a certificate for
`localhost` and 127.0.0.1 signed by a CA made for the run (its PEM in `ca_file`).
"""

from __future__ import annotations

import datetime
import gzip
import ipaddress
import json
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

CSV = b"day,total\nmon,3\ntue,5\n"
# seaborn's "tips", three rows, served where seaborn.utils.DATASET_SOURCE is pointed.
TIPS = (b"total_bill,tip,sex,smoker,day,time,size\n16.99,1.01,Female,No,Sun,Dinner,2\n"
        b"10.34,1.66,Male,No,Sun,Dinner,3\n21.01,3.5,Male,No,Sat,Dinner,3\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet: pytest shows failures, not traffic
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/octet-stream",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._send(200, json.dumps({"method": "POST", "body": body.decode("latin-1")}).encode(), "application/json")

    def do_GET(self) -> None:  # noqa: N802
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        self.server.requests.append(self.path)  # type: ignore[attr-defined]
        served = self.server.files.get(parts.path)  # type: ignore[attr-defined]
        if served is not None:
            body, content_type = served
            if "gzip" in self.headers.get("Accept-Encoding", ""):
                self._send(200, gzip.compress(body, mtime=0), content_type, {"Content-Encoding": "gzip"})
            else:
                self._send(200, body, content_type)
        elif parts.path == "/chunked":
            # Transfer-Encoding: chunked, no length: the pieces of `text` as they come.
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in query.get("text", "").split(","):
                data = piece.encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
        elif parts.path == "/short":
            # Announces n bytes, sends `send` of them and hangs up: a body cut short.
            self.send_response(200)
            self.send_header("Content-Length", query["n"])
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"x" * int(query["send"]))
            self.wfile.flush()
            self.close_connection = True
        elif parts.path == "/set-cookie":
            self._send(200, b"set", "text/plain", {"Set-Cookie": f"{query['name']}={query['value']}; Path=/"})
        elif parts.path == "/data.csv":
            self._send(200, CSV, "text/csv")
        elif parts.path == "/seaborn-data/dataset_names.txt":
            self._send(200, b"tips\n", "text/plain")
        elif parts.path == "/seaborn-data/tips.csv":
            self._send(200, TIPS, "text/csv")
        elif parts.path == "/api":
            self._send(200, json.dumps({"ok": True, "items": [1, 2, 3]}).encode(), "application/json")
        elif parts.path == "/headers":
            self._send(200, json.dumps(dict(self.headers.items())).encode(), "application/json")
        elif parts.path == "/bytes":
            n = int(query.get("n", "0"))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = bytes(range(256)) * 256  # 64 KiB
            sent = 0
            while sent < n:
                piece = block[: min(len(block), n - sent)]
                self.wfile.write(piece)
                sent += len(piece)
        elif parts.path == "/loop":
            self._send(302, b"", headers={"Location": "/loop"})
        elif parts.path == "/redirect":
            self._send(int(query.get("status", "302")), b"", headers={"Location": query["to"]})
        elif parts.path == "/slow":
            # Headers at once, then a byte every `every` seconds: a slow-loris answer.
            every = float(query.get("every", "0.5"))
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            for _ in range(1_000_000):
                self.wfile.write(b"x")
                self.wfile.flush()
                time.sleep(every)
        elif parts.path == "/trickle-headers":
            # A status line, then one header a byte every `every` seconds, never the
            # headers' end: a slow-loris answer before there is a response at all.
            # Ends when the client hangs up; `trickling` counts those still going.
            every = float(query.get("every", "0.1"))
            self.server.trickling.add(self)  # type: ignore[attr-defined]
            try:
                self.wfile.write(b"HTTP/1.1 200 OK\r\nX-Slow: ")
                while True:
                    self.wfile.write(b"a")
                    time.sleep(every)
            except OSError:
                self.close_connection = True
            finally:
                self.server.trickling.discard(self)  # type: ignore[attr-defined]
        elif parts.path == "/hang":
            time.sleep(float(query.get("s", "60")))
            self._send(200, b"late")
        else:
            self._send(404, b"not found", "text/plain")


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that hangs up early (a cancelled transfer) is what the tests do on purpose


class LocalWeb:
    """A threaded HTTP(S) server on 127.0.0.1 and a free port, until close()."""

    def __init__(self, folder: Path | None = None, *, tls: bool = False) -> None:
        self.server = _QuietServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.requests = []  # type: ignore[attr-defined]
        self.server.files = {}  # type: ignore[attr-defined]
        self.server.trickling = set()  # type: ignore[attr-defined]
        self.tls = tls
        self.ca_file: str | None = None
        if tls:
            assert folder is not None, "an HTTPS server needs a folder for its certificates"
            cert, key, ca = make_certificates(folder)
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(cert, key)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
            self.ca_file = str(ca)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def requests(self) -> list[str]:
        return self.server.requests  # type: ignore[attr-defined,no-any-return]

    @property
    def trickling(self) -> int:
        """How many /trickle-headers answers are still being sent: their clients have not hung up."""
        return len(self.server.trickling)  # type: ignore[attr-defined]

    def serve(self, path: str, body: bytes, content_type: str = "application/json") -> str:
        """Serve `body` at `path` (gzip-encoded when the client accepts it); its URL."""
        self.server.files[path] = (body, content_type)  # type: ignore[attr-defined]
        return self.url(path)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for localhost and 127.0.0.1: (cert, key, ca) PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "wasm-kernel test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = folder / "server.pem", folder / "server.key", folder / "ca.pem"
    paths[0].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    return paths
