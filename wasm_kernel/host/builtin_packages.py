"""The distributions every guest already has, and stand-in wheels for them.

The guest's stdlib zip carries numpy, pandas, scipy and the rest with their
`.dist-info` folders, and the staged site carries IPython and its dependencies.
%pip must treat those as installed: most of them are compiled and have no wheel a
guest could use, and none of them can be replaced. pip has no notion of "provided
by the platform", so each gets a stand-in: an empty `py3-none-any` wheel of the
same name and version, offered with `--find-links` and pinned with a constraint.
A requirement such as `seaborn -> numpy>=1.20` then resolves to the stand-in, which
is dropped after the install, and one such as `numpy<2` fails to resolve with
pip's own explanation.

A stand-in's version carries a local label (`2.1.3+wasmkernel`, PEP 440), and the
constraint names it whole: a registry wheel of the very same public version can then
never be chosen in its place (pip had no reason to prefer ours, and the registry's
IPython pulls in compiled dependencies), while `numpy==2.1.3`, `>=`, `<=` and `~=`
written by a package still match it, as local labels are ignored against a public
version.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import zipfile
from functools import cache
from pathlib import Path

from packaging.utils import canonicalize_name

from .artifacts import guest_artifacts
from .cache_dir import cache_root, private_dir
from .guest_site import staged_versions

STANDIN_VERSION = "2"  # bump when the stand-in wheels change shape (2: local version labels)
LOCAL_LABEL = "wasmkernel"


@cache
def builtin_distributions() -> dict[str, tuple[str, str]]:
    """canonical name -> (name as shipped, version), for every distribution a guest has."""
    found: dict[str, tuple[str, str]] = {}
    with zipfile.ZipFile(guest_artifacts().stdlib_zip) as z:
        for member in z.namelist():
            top = member.split("/", 1)[0]
            if top.endswith(".dist-info") and "-" in top:
                name, version = top[: -len(".dist-info")].rsplit("-", 1)
                found[canonicalize_name(name)] = (name, version)
    for name, version in staged_versions():
        found.setdefault(canonicalize_name(name), (name, version))
    return found


def standin_wheelhouse(provided: tuple[tuple[str, str], ...] = ()) -> Path:
    """A folder of stand-in wheels for builtin_distributions() and the (name, version)
    pairs `provided` (a course environment's), made once per set."""
    every = dict(builtin_distributions())
    for name, version in provided:
        every.setdefault(canonicalize_name(name), (name, version))
    key = hashlib.sha256(
        (STANDIN_VERSION + repr(sorted(every.items()))).encode()
    ).hexdigest()[:24]
    folder = cache_root() / "standins" / key
    if (folder / "constraints.txt").is_file():
        return folder
    parent = private_dir(folder.parent)
    scratch = Path(tempfile.mkdtemp(prefix=".standins-", dir=parent))
    for name, version in every.values():
        _write_standin(scratch, name, standin_version(version))
    lines = [f"{name}=={standin_version(version)}\n" for name, version in every.values()]
    (scratch / "constraints.txt").write_text("".join(lines))
    try:
        os.replace(scratch, folder)
    except OSError:  # another process made it first
        if not (folder / "constraints.txt").is_file():
            raise
    return folder


def standin_version(version: str) -> str:
    """The built-in's version with our local label: above the public one, never equal
    to any wheel a registry can serve (PyPI refuses local versions)."""
    return f"{version}.{LOCAL_LABEL}" if "+" in version else f"{version}+{LOCAL_LABEL}"


def _write_standin(folder: Path, name: str, version: str) -> None:
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{dist}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: wasm-kernel\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},sha256={_digest(text)},{len(text.encode())}\n" for path, text in files.items())
    files[f"{dist}.dist-info/RECORD"] = record + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{dist}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


def _digest(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()


__all__ = ["builtin_distributions", "standin_version", "standin_wheelhouse"]
