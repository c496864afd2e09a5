"""Wheels built by the tests, for %pip to install from a local folder: a wheel is a
zip with a dist-info (METADATA, WHEEL, RECORD), so the tests write them directly."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from pathlib import Path


def build_wheel(
    folder: Path, name: str, version: str, files: dict[str, str | bytes], *,
    requires: tuple[str, ...] = (), tag: str = "py3-none-any", requires_python: str | None = None,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    dist = f"{name.replace('-', '_')}-{version}"
    entries: dict[str, bytes] = {path: data.encode() if isinstance(data, str) else data for path, data in files.items()}
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {r}\n" for r in requires)
    metadata += f"Requires-Python: {requires_python}\n" if requires_python else ""
    entries[f"{dist}.dist-info/METADATA"] = metadata.encode()
    entries[f"{dist}.dist-info/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in entries.items()
    )
    entries[f"{dist}.dist-info/RECORD"] = (record + f"{dist}.dist-info/RECORD,,\n").encode()
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        for member, data in entries.items():
            z.writestr(member, data)
    return path


def course_wheelhouse(folder: Path) -> Path:
    """The wheels the %pip tests install."""
    build_wheel(folder, "greet", "1.0", {"greet/__init__.py": "def hello():\n    return 'hello from a wheel'\n"})
    build_wheel(folder, "greet", "2.0", {"greet/__init__.py": "def hello():\n    return 'hello from wheel 2'\n"})
    build_wheel(folder, "pkg-a", "1.0", {"pkg_a/__init__.py": "from pkg_b import B\nimport numpy\nA = 'a' + B\n"},
                requires=("pkg-b>=1", "numpy>=1.20"))
    build_wheel(folder, "pkg-b", "1.2", {"pkg_b/__init__.py": "B = 'b'\n"})
    build_wheel(folder, "fastmath", "1.0", {"fastmath/__init__.py": ""}, tag="cp311-cp311-manylinux_2_17_x86_64")
    build_wheel(folder, "needs-fastmath", "1.0", {"nf/__init__.py": ""}, requires=("fastmath>=1; python_version >= '3'",))
    # Markers read as the guest reads them (sys_platform "wasi"), not as the host does.
    build_wheel(folder, "marked", "1.0", {"marked/__init__.py": ""},
                requires=('fastmath; sys_platform != "wasi"', 'greet==2.0; sys_platform == "wasi"',
                          'pkg-b; platform_machine == "wasm32" and python_version >= "3.15"'))
    # Sphinx 9's: newer than the host's Python, as old as the guest's.
    build_wheel(folder, "guest-python-only", "1.0", {"gpo/__init__.py": ""}, requires_python=">=3.13")
    build_wheel(folder, "future-python-only", "1.0", {"fpo/__init__.py": ""}, requires_python=">=3.99")
    # otter-grader's over-pin: wrapt<2, where the guest has wrapt 2 built in.
    build_wheel(folder, "pins-wrapt", "1.0", {"pins_wrapt/__init__.py": "import wrapt\nWRAPT = wrapt.__version__\n"},
                requires=("wrapt>=1.16,<2",))
    build_wheel(folder, "needs-old-numpy", "1.0", {"nno/__init__.py": ""}, requires=("numpy<2",))
    build_wheel(folder, "sneaky", "1.0", {"sneaky/__init__.py": "", "sneaky/_speed.cpython-315-wasm32-wasi.so": b"\0asm"})
    build_wheel(folder, "bulky", "1.0", {"bulky/__init__.py": "", "bulky/data.bin": b"x" * 300_000})
    # A registry wheel of a built-in at the guest's very version, whose own dependency
    # is compiled (as PyPI's IPython pulls in psutil): the built-in must win.
    from wasm_kernel.host.guest_site import staged_versions

    traitlets = dict(staged_versions())["traitlets"]
    build_wheel(folder, "traitlets", traitlets, {"traitlets/__init__.py": "IMPOSTOR = True\n"}, requires=("fastmath",))
    build_wheel(folder, "uses-traitlets", "1.0", {"uses_traitlets/__init__.py": "import traitlets\n"},
                requires=(f"traitlets=={traitlets}",))
    build_wheel(folder, "uses-any-traitlets", "1.0", {"uses_any_traitlets/__init__.py": "import traitlets\n"},
                requires=("traitlets",))
    return folder


def serve_as_index(folder: Path, web: object) -> str:
    """The wheels of `folder` as a PEP 503 simple index on a LocalWeb, as a registry
    serves them (pip ranks an index's wheels after --find-links folders); its URL."""
    from packaging.utils import canonicalize_name, parse_wheel_filename

    projects: dict[str, list[str]] = {}
    for wheel in sorted(folder.glob("*.whl")):
        web.serve(f"/files/{wheel.name}", wheel.read_bytes(), "application/octet-stream")  # type: ignore[attr-defined]
        projects.setdefault(canonicalize_name(parse_wheel_filename(wheel.name)[0]), []).append(wheel.name)
    for project, names in projects.items():
        links = "".join(f'<a href="/files/{n}">{n}</a>\n' for n in names)
        web.serve(f"/simple/{project}/", f"<!DOCTYPE html><html><body>{links}</body></html>".encode(), "text/html")  # type: ignore[attr-defined]
    return web.url("/simple/")  # type: ignore[attr-defined,no-any-return]


# --- hostile wheels (tests/security/test_pip_quota.py) ------------------------------------


def add_members(wheel: Path, members: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    """Members appended to a wheel as given: any name, mode bits or compression,
    duplicates included (zipfile only warns), so a test can write what pip would refuse
    or never notice. RECORD does not list them, as in a wheel tampered with."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "Duplicate name"
        with zipfile.ZipFile(wheel, "a") as z:
            for info, data in members:
                z.writestr(info, data)
    return wheel


def add_zeros(wheel: Path, member: str, size: int) -> Path:
    """A deflated member of `size` zero bytes, written in chunks: a real zip bomb,
    about a thousandth of its size in the wheel."""
    info = zipfile.ZipInfo(member)
    info.compress_type = zipfile.ZIP_DEFLATED
    chunk = bytes(1 << 20)
    with zipfile.ZipFile(wheel, "a") as z, z.open(info, "w", force_zip64=size >= 1 << 31) as out:
        for start in range(0, size, len(chunk)):
            out.write(chunk[: size - start])
    return wheel


def declare_size(wheel: Path, member: str, size: int) -> Path:
    """Rewrite the central directory so `member` claims `size` bytes, compressed and
    not, though the file holds only its few real bytes: what a zip reader believes
    before it inflates anything. `size` must fit the 32-bit fields (no zip64)."""
    data = bytearray(wheel.read_bytes())
    name = member.encode()
    at = data.find(b"PK\x01\x02")
    while at != -1:
        name_len = int.from_bytes(data[at + 28:at + 30], "little")
        if data[at + 46:at + 46 + name_len] == name:
            data[at + 20:at + 24] = size.to_bytes(4, "little")  # compressed size
            data[at + 24:at + 28] = size.to_bytes(4, "little")  # uncompressed size
            wheel.write_bytes(bytes(data))
            return wheel
        at = data.find(b"PK\x01\x02", at + 4)
    raise KeyError(member)
