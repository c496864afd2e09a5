"""A wheel looked at before pip unpacks it.

A wheel is a zip, and a zip's central directory says what each member is and how big
it will be before a byte of it is inflated. Python's zipfile (which pip unpacks with)
never writes more of a member than its declared size, so the sum of declared sizes
bounds what unpacking can put on the host's disk: a small wheel that declares
gigabytes is refused here, while it is still small. Also refused, as no honest wheel
has them: names that would land outside the install folder (absolute, `..`, a drive
letter), symbolic links, a name given twice (which copy wins depends on the reader),
more members than any pure-Python package needs, compression past what real files
reach (200:1 over a mebibyte: zeros, not code), compiled code the sandbox cannot run,
and tags other than "any platform, no ABI".

Messages name the wheel's members, never a host path: the caller adds the file name.
"""

from __future__ import annotations

import posixpath
import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename

from ..host.guest_site import COMPILED_SUFFIXES

MAX_MEMBERS = 20_000
MAX_RATIO = 200
# Below this, a member may compress as well as it likes: small files of repeated text
# are common (empty __init__.py stubs, padded tables) and cannot fill a disk.
RATIO_FLOOR = 1 << 20
NAME_SHOWN = 80  # characters of a member name quoted in a message

_DRIVE = re.compile(r"^[A-Za-z]:")


class UnsafeWheel(ValueError):
    """Why a wheel is refused: one clause, no path of the host."""


@dataclass(frozen=True)
class WheelFacts:
    filename: str
    name: NormalizedName
    version: str
    declared_bytes: int  # the sum of its members' uncompressed sizes, as the zip says


def wheel_name(path: Path) -> NormalizedName | None:
    """The project a wheel file is of, from its file name; None if the name is not a wheel's."""
    try:
        return parse_wheel_filename(path.name)[0]
    except InvalidWheelFilename:
        return None


def inspect_wheel(path: Path) -> WheelFacts:
    """What `path` would unpack to, from its central directory only; UnsafeWheel if
    it must not be unpacked at all."""
    try:
        name, version, _build, tags = parse_wheel_filename(path.name)
    except InvalidWheelFilename:
        raise UnsafeWheel("its file name is not a wheel's (name-version-tags.whl)") from None
    foreign = sorted(str(t) for t in tags if t.abi != "none" or t.platform != "any")
    if foreign:
        raise UnsafeWheel(f"it is built for {foreign[0]}, not for any platform")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError):
        raise UnsafeWheel("it is not a readable zip archive") from None
    if len(members) > MAX_MEMBERS:
        raise UnsafeWheel(f"it has {len(members)} members, more than the {MAX_MEMBERS} a wheel may have")
    seen: set[str] = set()
    declared = 0
    for info in members:
        _check_member(info, seen)
        declared += info.file_size
    return WheelFacts(path.name, name, str(version), declared)


def _check_member(info: zipfile.ZipInfo, seen: set[str]) -> None:
    name = info.filename.replace("\\", "/")
    shown = repr(info.filename[:NAME_SHOWN] + ("..." if len(info.filename) > NAME_SHOWN else ""))
    if not name.strip("/") or name.startswith("/") or _DRIVE.match(name):
        raise UnsafeWheel(f"member {shown} has an absolute or empty name")
    if ".." in name.split("/"):
        raise UnsafeWheel(f"member {shown} points outside the package folder")
    # Only a zip written on a Unix-like system carries mode bits; a symbolic link from
    # anywhere else is not a link. Checked whatever the system, as a link has no place
    # in a wheel at all.
    if stat.S_ISLNK(info.external_attr >> 16):
        raise UnsafeWheel(f"member {shown} is a symbolic link")
    # Equal after normalising ("a/./b", "a//b", "a/b/") is the same file to an unpacker.
    key = posixpath.normpath(name)
    if key in seen:
        raise UnsafeWheel(f"member {shown} appears twice")
    seen.add(key)
    base = posixpath.basename(key)
    if base.endswith(COMPILED_SUFFIXES) or ".so." in base:
        raise UnsafeWheel(f"the wheel carries compiled code ({shown}), which cannot run in the sandbox")
    if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
        ratio = info.file_size // max(info.compress_size, 1)
        raise UnsafeWheel(
            f"member {shown} would inflate {ratio}:1 to {info.file_size / (1 << 20):.1f} MiB, past the "
            f"{MAX_RATIO}:1 compression a wheel may use"
        )


__all__ = ["MAX_MEMBERS", "MAX_RATIO", "UnsafeWheel", "WheelFacts", "inspect_wheel", "wheel_name"]
