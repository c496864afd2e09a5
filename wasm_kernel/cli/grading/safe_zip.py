"""Zip files from elsewhere (an autograder zip, a student's submission zip), read
within bounds: every member's name is a plain relative path, no link, no device, no
duplicate, and the sizes are capped before anything is inflated, then again while it
is (a member whose header lies about its size is cut off where the cap is reached).

Members are extracted only into a folder this process has just created for them
(0700, under its own temporary folder), with exclusive creation and O_NOFOLLOW, so an
extraction can neither leave that folder nor replace what it wrote.
"""

from __future__ import annotations

import os
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

_COPY_PIECE = 1 << 16


class ZipError(ValueError):
    """A zip refused: the message is one line and names the member."""


@dataclass(frozen=True)
class ZipLimits:
    max_members: int = 10_000
    max_member_bytes: int = 64 << 20
    max_total_bytes: int = 256 << 20
    max_depth: int = 32


def member_parts(name: str) -> tuple[str, ...]:
    """A member's path as its parts; ZipError for one that is not a plain relative path."""
    if "\\" in name or "\x00" in name or name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ZipError(f"member {name!r} is not a relative path")
    parts = tuple(p for p in PurePosixPath(name).parts if p not in ("", "."))
    if not parts or any(p == ".." for p in parts):
        raise ZipError(f"member {name!r} is not a path inside the zip")
    if any(len(p.encode()) > 255 for p in parts):
        raise ZipError(f"member {name[:80]!r}... has a name longer than 255 bytes")
    return parts


class BoundedZip:
    """A zip opened for reading within ZipLimits."""

    def __init__(self, path: Path, limits: ZipLimits = ZipLimits(), *, what: str = "zip") -> None:
        self.what, self.limits = what, limits
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise ZipError(f"{what} is not a readable zip file ({type(err).__name__})") from None
        infos = self._zip.infolist()
        if len(infos) > limits.max_members:
            raise ZipError(f"{what} has {len(infos):,} members, more than {limits.max_members:,}")
        self.files: dict[tuple[str, ...], zipfile.ZipInfo] = {}
        total = 0
        for info in infos:
            parts = member_parts(info.filename)
            if len(parts) > limits.max_depth:
                raise ZipError(f"member {info.filename[:80]!r} is more than {limits.max_depth} folders deep")
            mode = (info.external_attr >> 16) & 0o170000
            if info.is_dir() or mode == stat.S_IFDIR:
                continue
            if mode not in (0, stat.S_IFREG):
                raise ZipError(f"member {info.filename!r} is a link or a special file")
            if parts in self.files or any(parts[:i] in self.files for i in range(1, len(parts))):
                raise ZipError(f"member {info.filename!r} is in the zip twice, or under a file")
            if info.file_size > limits.max_member_bytes:
                raise ZipError(f"member {info.filename!r} inflates to {info.file_size:,} bytes, more than "
                               f"{limits.max_member_bytes:,}")
            total += info.file_size
            if total > limits.max_total_bytes:
                raise ZipError(f"{what} inflates to more than {limits.max_total_bytes:,} bytes")
            self.files[parts] = info

    def close(self) -> None:
        self._zip.close()

    def __enter__(self) -> BoundedZip:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def read(self, parts: tuple[str, ...], max_bytes: int | None = None) -> bytes:
        """A member's bytes, at most max_bytes (default: the member cap)."""
        info = self.files[parts]
        cap = min(max_bytes or self.limits.max_member_bytes, self.limits.max_member_bytes)
        try:
            with self._zip.open(info) as src:
                data = src.read(cap + 1)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError, RuntimeError) as err:
            raise ZipError(f"member {'/'.join(parts)!r} cannot be read ({type(err).__name__}: {err})") from None
        if len(data) > cap:
            raise ZipError(f"member {'/'.join(parts)!r} is larger than {cap:,} bytes")
        return data

    def extract(self, dest: Path, members: dict[tuple[str, ...], tuple[str, ...]] | None = None) -> int:
        """Members (all, or {member: path under dest}) written under dest; the bytes written."""
        chosen = members if members is not None else {parts: parts for parts in self.files}
        written = 0
        for src, target in chosen.items():
            data = self.read(src)
            written += len(data)
            if written > self.limits.max_total_bytes:
                raise ZipError(f"{self.what} inflates to more than {self.limits.max_total_bytes:,} bytes")
            write_new_file(dest, target, data)
        return written


def write_new_file(root: Path, parts: tuple[str, ...], data: bytes) -> None:
    """data as a new file root/parts..., its folders made as needed, nothing followed."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            try:
                os.mkdir(part, 0o700, dir_fd=fd)
            except FileExistsError:
                pass
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = child
        out = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        with os.fdopen(out, "wb") as f:
            for start in range(0, len(data), _COPY_PIECE):
                f.write(data[start:start + _COPY_PIECE])
    except FileExistsError:
        raise ZipError(f"{'/'.join(parts)!r} is there already") from None
    except NotADirectoryError:
        raise ZipError(f"{'/'.join(parts)!r} lies under a file") from None
    finally:
        os.close(fd)
