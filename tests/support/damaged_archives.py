"""Archives damaged the ways a download or a hand-made archive is: a bad CRC, an
encrypted member, an unknown compression method, data cut short or corrupt. For the
confined shell's unzip, gunzip and tar, against the real programs
(tests/runtime/test_confined_shell_differential.py) and in the guest
(tests/security/test_confined_shell_abuse.py).

Each zip holds a.txt (TEXT, the damaged member) then b.txt (intact); each tar holds
a.txt (24,000 bytes) then b.txt; each .txt.gz is TEXT."""

from __future__ import annotations

import gzip
import io
import struct
import tarfile
import zipfile
import zlib
from pathlib import Path

TEXT = b"hello world\n" * 100
# A zip's first member: where a field is in its local header and in its central directory entry.
_FLAGS, _METHOD, _CRC, _SIZE = (6, 8), (8, 10), (14, 16), (22, 24)
_FIRST_DATA = 30 + len("a.txt")  # where a.txt's data starts: its local header and name, no extra field


def _zip(method: int, first: bytes = TEXT) -> bytearray:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", method) as z:
        z.writestr(zipfile.ZipInfo("a.txt", (2024, 1, 2, 3, 4, 6)), first, method)
        z.writestr(zipfile.ZipInfo("b.txt", (2024, 1, 2, 3, 4, 6)), b"second\n", method)
    return bytearray(buf.getvalue())


def _set(z: bytearray, field: tuple[int, int], fmt: str, value: int) -> None:
    """A field of the first member, in both of its headers."""
    local, central = field
    struct.pack_into(fmt, z, local, value)
    struct.pack_into(fmt, z, z.find(b"PK\x01\x02") + central, value)


def bad_crc_zip() -> bytes:
    z = _zip(zipfile.ZIP_STORED)
    z[_FIRST_DATA + 5] ^= 0xFF  # stored: the data changes, its CRC stays
    return bytes(z)


def bad_data_zip() -> bytes:
    z = _zip(zipfile.ZIP_DEFLATED)
    for i in range(3):
        z[_FIRST_DATA + i] ^= 0xFF  # deflate data that cannot be inflated
    return bytes(z)


def encrypted_zip() -> bytes:
    """a.txt as a traditional PKWARE-encrypted member would look: the flag, and 12
    bytes of encryption header before its data (no program here needs the password)."""
    z = _zip(zipfile.ZIP_STORED, first=bytes(range(12)) + TEXT)
    flags = struct.unpack_from("<H", z, _FLAGS[0])[0]
    _set(z, _FLAGS, "<H", flags | 0x1)
    _set(z, _SIZE, "<I", len(TEXT))
    _set(z, _CRC, "<I", zlib.crc32(TEXT))
    return bytes(z)


def unknown_method_zip() -> bytes:
    z = _zip(zipfile.ZIP_STORED)
    _set(z, _METHOD, "<H", 99)  # AES's marker: a method neither unzip nor zipfile has
    return bytes(z)


def truncated_zip() -> bytes:
    z = _zip(zipfile.ZIP_DEFLATED)
    return bytes(z[: len(z) // 2])


def _gz(data: bytes = TEXT) -> bytearray:
    return bytearray(gzip.compress(data, mtime=0))


def bad_crc_gz(data: bytes = TEXT) -> bytes:
    g = _gz(data)
    g[-8] ^= 0xFF  # the trailer's CRC-32
    return bytes(g)


def bad_length_gz() -> bytes:
    g = _gz()
    g[-4] ^= 0xFF  # the trailer's length
    return bytes(g)


def bad_block_gz(data: bytes = TEXT) -> bytes:
    g = _gz(data)
    g[10] = 0xFF  # the first deflate block: an invalid block type
    return bytes(g)


def truncated_gz(data: bytes = TEXT) -> bytes:
    g = _gz(data)
    return bytes(g[: len(g) // 2])


def tar_bytes() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as t:
        for name, data in (("a.txt", TEXT * 20), ("b.txt", b"second\n")):
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), 1_700_000_000
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def damaged_archives() -> dict[str, bytes]:
    """Every damaged archive, by file name."""
    tar = tar_bytes()
    return {
        "bad-crc.zip": bad_crc_zip(), "bad-data.zip": bad_data_zip(), "encrypted.zip": encrypted_zip(),
        "unknown-method.zip": unknown_method_zip(), "truncated.zip": truncated_zip(),
        "bad-crc.txt.gz": bad_crc_gz(), "bad-length.txt.gz": bad_length_gz(), "bad-block.txt.gz": bad_block_gz(),
        "truncated.txt.gz": truncated_gz(),
        "truncated.tar": tar[:1500], "truncated.tgz": truncated_gz(tar), "bad-crc.tgz": bad_crc_gz(tar),
        "bad-block.tgz": bad_block_gz(tar),
    }


def write_damaged_archives(folder: Path) -> None:
    for name, data in damaged_archives().items():
        (folder / name).write_bytes(data)
