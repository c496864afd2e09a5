"""The guest's site-packages: the real IPython and its pure-Python dependencies.

ipykernel already installs IPython, traitlets, pygments and the rest on the host.
A fixed, curated set of those distributions is copied, file by file as their
RECORD lists them, into a folder of the compile cache keyed by their versions; the
guest sees that folder read-only at `guest_site_path()`. The host's site-packages
is never mounted: it holds the host's own packages, compiled code and secrets of
no concern to a notebook.

A distribution that carries compiled code (a `.so`) cannot run in the guest and is
refused while staging. Optional dependencies that IPython only imports for a
terminal (prompt_toolkit) or for jedi completion are left out: the kernel uses
IPython's own completer, as a faster guest wants.

Staging copies the files into a scratch folder; the caller's `prepare` step (the
runtime compiles bytecode in a guest there, so no import ever compiles source)
runs before the folder is renamed into place, so a crash or a concurrent process
never leaves a half-built site that later runs would trust.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

from .artifacts import guest_artifacts
from .cache_dir import cache_root, private_dir
from .work_meter import CountedWork, Progress

# IPython, what it imports at run time in a kernel, and ipywidgets. Each is pure
# Python; the guest build already carries numpy, pandas, tqdm and friends.
STAGED_DISTRIBUTIONS = (
    "ipython",
    "traitlets",
    "pygments",
    "ipython-pygments-lexers",
    "stack-data",
    "executing",
    "asttokens",
    "pure-eval",
    "matplotlib-inline",
    "comm",
    "decorator",
    # Widgets in the guest (the frontend half, jupyterlab_widgets, stays on the host).
    "ipywidgets",
    # requests, for the network door (runtime/guest_lib/_wasm_kernel_net_http.py routes it
    # through the host): importable without %pip, as IPython is.
    "requests",
    "urllib3",
    "idna",
    "charset-normalizer",
    "certifi",
)
# Distributions whose compiled modules are optional accelerators of pure-Python ones
# beside them (mypyc): the compiled files are left out, the guest runs the Python.
PURE_FALLBACKS = frozenset({"charset-normalizer"})
# Left out when absent: IPython 9 no longer needs them.
OPTIONAL_DISTRIBUTIONS = frozenset({"decorator"})
COMPILED_SUFFIXES = (".so", ".pyd", ".dylib", ".dll")
COMPLETE_MARKER = ".staged"
# Bumped when the staging itself changes (what is copied, how it is prepared).
STAGING_VERSION = "2"  # 2: compiled accelerators with a pure-Python twin are left out

Prepare = Callable[[Path], None]


class StagingError(RuntimeError):
    """A staged distribution is missing or cannot run in the guest."""


@dataclass(frozen=True)
class GuestSite:
    path: Path  # host folder, read-only to guests
    key: str
    versions: tuple[tuple[str, str], ...]


def guest_site_path() -> str:
    """Where the guest sees the staged packages, as a CPython install would have them."""
    major, minor = guest_artifacts().python_version.split(".")[:2]
    return f"/usr/local/lib/python{major}.{minor}/site-packages"


def guest_course_path() -> str:
    """Where the guest sees the course's environment (sessions/course_site.py), read-only."""
    return guest_site_path().rsplit("/", 1)[0] + "/course-packages"


def guest_packages_path() -> str:
    """Where the guest sees its session's own packages (%pip), read-only."""
    return guest_site_path().rsplit("/", 1)[0] + "/session-packages"


@cache
def staged_versions() -> tuple[tuple[str, str], ...]:
    """The host's versions of the distributions the guest's site holds. Read once per
    process (asked three times by a kernel's start); a kernel started after a host
    upgrade reads the new ones."""
    listed = _dist_info_versions()
    found = []
    for name in STAGED_DISTRIBUTIONS:
        version = listed.get(name)
        if version is None:  # not installed from a wheel (an .egg-info, a zip): ask importlib.metadata
            try:
                version = md.version(name)
            except md.PackageNotFoundError:
                if name in OPTIONAL_DISTRIBUTIONS:
                    continue
                raise StagingError(
                    f"{name} is not installed on the host, and the guest needs it; run `pip install wasm-kernel` again"
                ) from None
        found.append((name, version))
    return tuple(found)


def _dist_info_versions() -> dict[str, str | None]:
    """Normalised name -> version of every `{name}-{version}.dist-info` folder on
    sys.path, the first one on the path winning as in importlib.metadata. The
    folder's name is the installed wheel's own (both parts escaped, so the first '-'
    splits them): one listing per sys.path folder, where md.version() parsed each
    METADATA file as an e-mail (4-5 ms for the 17 names, on the GIL beside a
    kernel's start). A name whose first install is an `.egg-info` maps to None:
    importlib.metadata is asked for that one."""
    found: dict[str, str | None] = {}
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip, a missing folder
            continue
        for folder in names:
            if folder.endswith(".dist-info"):
                name, dash, version = folder[: -len(".dist-info")].partition("-")
                if dash and version:
                    found.setdefault(_normalized(name), version)
            elif folder.endswith(".egg-info"):
                found.setdefault(_normalized(folder.partition("-")[0].removesuffix(".egg-info")), None)
    return found


def _normalized(name: str) -> str:
    # PEP 503 as STAGED_DISTRIBUTIONS writes the names (a name with a run of
    # separators matches none of them and is asked of importlib.metadata).
    return name.lower().replace("_", "-").replace(".", "-")


def site_key(versions: tuple[tuple[str, str], ...]) -> str:
    art = guest_artifacts()
    text = ";".join(f"{n}=={v}" for n, v in versions) + f";python={art.python_version};staging={STAGING_VERSION}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


@cache
def _site_for(key: str) -> Path:
    return cache_root() / "site" / key


def is_site_staged() -> bool:
    versions = staged_versions()
    return (_site_for(site_key(versions)) / COMPLETE_MARKER).is_file()


def stage_guest_site(prepare: Prepare | None = None, progress: Progress | None = None) -> GuestSite:
    """The staged site for the host's current versions, staged now if missing;
    `progress` hears how many of its files are copied."""
    versions = staged_versions()
    key = site_key(versions)
    final = _site_for(key)
    if not (final / COMPLETE_MARKER).is_file():
        parent = private_dir(final.parent)
        scratch = Path(tempfile.mkdtemp(prefix=".stage-", dir=parent))
        try:
            dists = [(name, md.distribution(name)) for name, _version in versions]
            copied = CountedWork(sum(len(dist.files or ()) for _, dist in dists), progress)
            for name, dist in dists:
                _copy_distribution(name, dist, scratch, copied)
            copied.finish()
            if prepare is not None:
                prepare(scratch)
            (scratch / COMPLETE_MARKER).write_text("\n".join(f"{n}=={v}" for n, v in versions) + "\n")
            make_read_only(scratch)
            if (final / COMPLETE_MARKER).is_file():
                # Another process staged it meanwhile (a site lands whole, by one
                # rename): its guests may be reading it, so it is never replaced.
                return GuestSite(final, key, versions)
            if final.exists():  # a half-built folder from a crashed run: moved aside whole, then removed
                _set_aside(final)
            try:
                os.replace(scratch, final)
            except OSError:
                if not (final / COMPLETE_MARKER).is_file():  # another process won the rename
                    raise
        finally:
            if scratch.exists():
                remove_tree(scratch)
    return GuestSite(final, key, versions)


def _copy_distribution(name: str, dist: md.Distribution, dest: Path, copied: CountedWork) -> None:
    for entry in dist.files or ():
        copied.advance()
        rel = PurePosixPath(str(entry))
        # Scripts (../../bin/...) and caches are not part of an importable package.
        if ".." in rel.parts or rel.is_absolute() or "__pycache__" in rel.parts or rel.suffix == ".pyc":
            continue
        if rel.suffix in COMPILED_SUFFIXES or ".so." in rel.name:
            twin = Path(dist.locate_file(rel.parent / (rel.name.split(".", 1)[0] + ".py")))
            if name in PURE_FALLBACKS and twin.is_file():
                continue
            raise StagingError(f"{name} carries compiled code ({rel}); the guest can only run pure-Python packages")
        src = Path(dist.locate_file(entry))
        if not src.is_file():
            continue
        target = dest.joinpath(*rel.parts)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, target)


def make_read_only(root: Path) -> None:
    # Read-only for everyone, as the guest's mount is: nothing writes here after staging.
    for dirpath, dirnames, filenames in os.walk(root):
        for f in filenames:
            os.chmod(os.path.join(dirpath, f), 0o444)
        os.chmod(dirpath, 0o555)


def _set_aside(path: Path) -> None:
    aside = path.with_name(f".stale-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.replace(path, aside)
    except FileNotFoundError:  # another process set it aside first
        return
    remove_tree(aside)


def remove_tree(path: Path) -> None:
    """A site's folder, read-only or not, removed whole."""
    for dirpath, dirnames, _ in os.walk(path):
        os.chmod(dirpath, 0o755)
    shutil.rmtree(path, ignore_errors=True)


__all__ = [
    "GuestSite",
    "guest_course_path",
    "guest_packages_path",
    "StagingError",
    "guest_site_path",
    "is_site_staged",
    "make_read_only",
    "remove_tree",
    "stage_guest_site",
    "staged_versions",
]
