"""The Sandbox drive's REST handlers, shaped like Jupyter Server's Contents API.

    GET    /wasm-kernel/drive/api/contents/PATH[?content=0|1&format=&type=]   a model
    PUT    /wasm-kernel/drive/api/contents/PATH   save (a model; `chunk` for uploads in parts)
    POST   /wasm-kernel/drive/api/contents/PATH   new untitled file or folder, or {copy_from}
    PATCH  /wasm-kernel/drive/api/contents/PATH   rename ({path: NEW})
    DELETE /wasm-kernel/drive/api/contents/PATH
    GET    /wasm-kernel/drive/files/PATH          the file's bytes (a download)
    GET    /wasm-kernel/drive/status              whether the drive can serve here, and why not

Each handler is a Jupyter Server APIHandler: authenticated and authorised as the
contents API is (resource "contents"), XSRF-checked for cookie sessions, and
answering errors as JSON with one line in `message`. As in enterprise_gateway's
handler mixins, errors are mapped in one place (`_answering`): an exception
becomes a status and a message that never holds a host path; anything unexpected
is logged with a reference and answered as "internal error (reference …)".
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote

from jupyter_server.auth.decorator import authorized
from jupyter_server.base.handlers import APIHandler
from tornado import web

from ...host.safe_fs import UnsafePathError
from ...sessions.registry import RegistryError
from ..message_guard import new_reference
from .drive_service import DriveRefusal, DriveService

AUTH_RESOURCE = "contents"
STREAM_BYTES = 1 << 20
# Python's json recurses once per level of nesting and raises RecursionError at the
# interpreter's limit (about 1,000); this is the line a client gets for it.
TOO_DEEP = "the JSON nests deeper than the drive reads (a notebook nests a few levels); flatten it"
T = TypeVar("T")


class DriveHandler(APIHandler):
    auth_resource = AUTH_RESOURCE

    @property
    def drive(self) -> DriveService:
        return self.settings["wasm_kernel_drive"]

    @property
    def unavailable(self) -> str | None:
        return self.settings.get("wasm_kernel_drive_unavailable")

    def _scrub(self, text: str) -> str:
        for secret in (str(self.drive.config.root), self.drive.paths.server_root, os.path.expanduser("~")):
            if secret and secret != "/":
                text = text.replace(secret, "…")
        return text

    def _fail(self, status: int, message: str) -> web.HTTPError:
        return web.HTTPError(status, " ".join(self._scrub(message).split()) or "refused")

    @contextmanager
    def _answering(self) -> Iterator[None]:
        """Every exception as one HTTP status and line."""
        if self.unavailable:
            raise web.HTTPError(501, self.unavailable)
        try:
            yield
        except web.HTTPError:
            raise
        except DriveRefusal as err:
            raise self._fail(err.status, str(err)) from None
        except UnsafePathError as err:
            raise self._fail(403, str(err)) from None
        except FileNotFoundError as err:
            raise self._fail(404, err.strerror or "no such file or folder") from None
        except FileExistsError as err:
            raise self._fail(409, err.strerror or "it already exists") from None
        except (IsADirectoryError, NotADirectoryError) as err:
            raise self._fail(400, err.strerror or "a file where a folder is meant, or the other way round") from None
        except PermissionError as err:
            raise self._fail(403, err.strerror or "permission denied") from None
        except OSError as err:
            if err.errno in (errno.ENOSPC, errno.EDQUOT):
                raise self._fail(507, "the host's disk is full") from None
            if err.errno == errno.ENOTEMPTY:
                raise self._fail(409, "the folder is not empty") from None
            if err.errno == errno.ENAMETOOLONG:  # a filesystem with a shorter limit than drive_places checks
                raise self._fail(400, "a name in the path is longer than this host's filesystem takes; "
                                      "choose a shorter one") from None
            raise self._internal() from None
        except RecursionError:
            raise self._fail(400, TOO_DEEP) from None
        except (ValueError, RegistryError) as err:
            raise self._fail(400, str(err)) from None
        except Exception:
            raise self._internal() from None

    def _internal(self) -> web.HTTPError:
        reference = new_reference()
        self.log.exception("wasm-kernel drive: %s %s failed (reference %s)", self.request.method,
                           self.request.path[:200], reference)
        return web.HTTPError(500, f"the Sandbox drive could not answer this request (internal error, reference "
                                  f"{reference}); the Jupyter server's log has the details")

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        with self._answering():
            return await asyncio.to_thread(fn, *args)

    def _body(self) -> dict[str, Any]:
        if self._body_bytes > self._body_limit:
            raise web.HTTPError(413, f"the request is larger than the drive takes in one part "
                                     f"({self.drive.config.max_request_bytes >> 20} MiB); upload big files in parts")
        raw = b"".join(self._body_parts)
        if not raw:
            return {}
        try:
            body = json.loads(raw, parse_constant=_no_constant)
        except RecursionError:
            raise web.HTTPError(400, TOO_DEEP) from None
        except ValueError:
            raise web.HTTPError(400, "the body is not JSON") from None
        if not isinstance(body, dict):
            raise web.HTTPError(400, "the body must be a JSON object")
        return body

    def _answer(self, model: dict[str, Any], status: int = 200) -> None:
        try:
            text = json.dumps(model)
        except RecursionError:  # a notebook read at the limit, one level deeper in its model
            raise web.HTTPError(400, TOO_DEEP) from None
        self.set_status(status)
        self.set_header("Content-Type", "application/json")
        self.finish(text)


@web.stream_request_body
class DriveContentsHandler(DriveHandler):
    """The contents API. Its body is taken as it arrives (stream_request_body), so
    one past the part size is counted and dropped, never held: Jupyter Server
    would otherwise read a body of up to its max_body_size (512 MiB) into memory,
    twice over while joining it, before the handler could refuse it."""

    async def prepare(self) -> None:  # type:ignore[override]
        self._body_parts: list[bytes] = []
        self._body_bytes = 0
        await super().prepare()

    @property
    def _body_limit(self) -> int:
        # Base64 is 4/3 of the bytes; the model around them is small.
        return self.drive.config.max_request_bytes * 4 // 3 + 65536

    def data_received(self, chunk: bytes) -> None:
        self._body_bytes += len(chunk)
        # Nothing is kept for a request without a user (it is refused once the body
        # is in), nor for one past the limit (it is refused with 413).
        if self._body_bytes > self._body_limit:
            self._body_parts.clear()
        elif self.current_user:
            self._body_parts.append(chunk)

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def get(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        content = self.get_query_argument("content", "1") not in ("0", "false")
        fmt = self.get_query_argument("format", None)
        kind = self.get_query_argument("type", None)
        if fmt not in (None, "text", "base64", "json") or kind not in (None, "file", "directory", "notebook"):
            raise web.HTTPError(400, "format must be text, base64 or json; type file, directory or notebook")
        self._answer(await self._run(self.drive.get, path, content, fmt, kind))

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def put(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        body = self._body()
        self._answer(await self._run(self.drive.save, path, body))

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def post(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        body = self._body()
        copy_from = body.get("copy_from")
        if copy_from is not None:
            if not isinstance(copy_from, str):
                raise web.HTTPError(400, "copy_from must be a path of the drive")
            self._answer(await self._run(self.drive.copy, copy_from, path), 201)
            return
        self._answer(await self._run(self.drive.new_untitled, path, body.get("type", "file"), body.get("ext", "")), 201)

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def patch(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        new_path = self._body().get("path")
        if not isinstance(new_path, str) or not new_path:
            raise web.HTTPError(400, "give the new name as {\"path\": \"…\"}")
        self._answer(await self._run(self.drive.rename, path, new_path))

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def delete(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        await self._run(self.drive.delete, path)
        self.set_status(204)
        self.finish()


class DriveFilesHandler(DriveHandler):
    """A workspace file's bytes, streamed in 1 MiB pieces (a file may be as big as the quota)."""

    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def get(self, path: str | None = None) -> None:
        path = path or ""  # the root: the optional group did not match
        fd, size, name = await self._run(self.drive.open_file, path)
        try:
            self.set_header("Content-Type", "application/octet-stream")
            self.set_header("Content-Length", str(size))
            self.set_header("X-Content-Type-Options", "nosniff")
            disposition = "attachment" if self.get_query_argument("download", "0") not in ("0", "false") else "inline"
            self.set_header("Content-Disposition", f"{disposition}; filename*=UTF-8''{quote(name)}")
            sent = 0
            while sent < size:
                piece = await asyncio.to_thread(os.read, fd, min(STREAM_BYTES, size - sent))
                if not piece:
                    break  # shrunk while we sent it: the client sees a short body
                self.write(piece)
                await self.flush()
                sent += len(piece)
        finally:
            os.close(fd)
        self.finish()


class DriveStatusHandler(DriveHandler):
    @web.authenticated
    @authorized(resource=AUTH_RESOURCE)
    async def get(self) -> None:
        self._answer({"available": not self.unavailable, "reason": self.unavailable})


_PATH = r"(?:/(?P<path>.*))?"


def _no_constant(name: str) -> None:
    """NaN and Infinity: Python's json reads them, but they are not JSON, and a
    notebook written with one could not be read by JupyterLab again."""
    raise ValueError(f"{name} is not JSON")


def drive_handlers(base_url: str) -> list[tuple[str, type[DriveHandler]]]:
    base = base_url.rstrip("/") + "/wasm-kernel/drive"
    return [
        (base + "/api/contents" + _PATH, DriveContentsHandler),
        (base + "/files" + _PATH, DriveFilesHandler),
        (base + "/status", DriveStatusHandler),
    ]
