"""A session's own packages: pure-Python wheels installed by %pip, kept with the
session, read-only to its guest.

    <root>/.wasm-kernel/packages/<uuid>/     on the guest's sys.path, read-only

pip runs on the host, but only ever installs wheels built for any platform
(`--only-binary=:all: --platform any --abi none`), so no package code runs on the
host: unpacking a wheel executes nothing. The guest's own distributions (numpy,
pandas, IPython...) are offered to pip as installed, through stand-in wheels
(host/builtin_packages.py) that are dropped afterwards. Each install goes to a
scratch folder first, is checked (no compiled file, not over the size cap), and
only then replaces the session's copies of the same distributions.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ..host.builtin_packages import builtin_distributions, standin_wheelhouse
from ..host.guest_site import COMPILED_SUFFIXES
from .layout import PRIVATE_DIR
from .session_ids import validate_session_id

PACKAGES_DIR = "packages"
# pip's lines shown while it works; its errors become one line of ours, and the
# result is reported once the install has passed our checks.
PROGRESS_LINES = ("Collecting ", "Downloading ", "Using cached ", "Requirement already satisfied")
MAX_REQUIREMENTS = 32
MAX_REQUIREMENT_CHARS = 200


class PackageError(Exception):
    """A refused or failed %pip request: one line, saying what to do."""


@dataclass(frozen=True)
class PipSettings:
    """The operator's pip settings."""

    index_url: str | None = None  # None: pip's default index (PyPI)
    find_links: tuple[str, ...] = ()
    no_index: bool = False
    max_bytes: int = 200 << 20
    timeout_seconds: float = 600.0


@dataclass
class InstallResult:
    installed: list[tuple[str, str]] = field(default_factory=list)  # (name, version)
    notes: list[str] = field(default_factory=list)  # one line each, e.g. what is built in


def packages_path(workspace_root: Path, session_id: str) -> Path:
    return Path(workspace_root) / PRIVATE_DIR / PACKAGES_DIR / validate_session_id(session_id)


def ensure_packages_dir(workspace_root: Path, session_id: str) -> Path:
    path = packages_path(workspace_root, session_id)
    path.mkdir(parents=True, exist_ok=True, mode=0o755)
    return path


def remove_packages(workspace_root: Path, session_id: str) -> None:
    shutil.rmtree(packages_path(workspace_root, session_id), ignore_errors=True)


def parse_requirements(words: Iterable[str]) -> list[Requirement]:
    """Requirement specifiers only: a name, extras and versions. No URL, no file,
    no environment marker."""
    found = []
    for word in words:
        if len(word) > MAX_REQUIREMENT_CHARS:
            raise PackageError(f"%pip install: requirement too long ({len(word)} characters)")
        try:
            req = Requirement(word)
        except InvalidRequirement:
            raise PackageError(
                f"%pip install: {word!r} is not a requirement; write a name with an optional version, "
                "e.g. %pip install 'tabulate>=0.9'"
            ) from None
        if req.url or req.marker is not None or "/" in word or "\\" in word:
            raise PackageError(f"%pip install: {word!r}: only names and versions are allowed, not URLs, paths or markers")
        found.append(req)
    if not found:
        raise PackageError("%pip install: name at least one package, e.g. %pip install tabulate")
    if len(found) > MAX_REQUIREMENTS:
        raise PackageError(f"%pip install: at most {MAX_REQUIREMENTS} requirements at a time")
    return found


def split_builtins(requirements: list[Requirement]) -> tuple[list[Requirement], list[str]]:
    """The requirements pip must install, and a note for each one the guest has."""
    builtins = builtin_distributions()
    wanted, notes = [], []
    for req in requirements:
        shipped = builtins.get(canonicalize_name(req.name))
        if shipped is None:
            wanted.append(req)
            continue
        name, version = shipped
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            raise PackageError(
                f"%pip install {req}: the sandbox has {name} {version} built in, and built-in packages "
                "cannot be replaced"
            )
        notes.append(f"{name} {version} is already built into the sandbox: nothing to install")
    return wanted, notes


def install_packages(
    workspace_root: Path,
    session_id: str,
    requirements: list[Requirement],
    settings: PipSettings,
    *,
    upgrade: bool = False,
    no_deps: bool = False,
    quiet: bool = False,
    on_output: Callable[[str], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> InstallResult:
    """Install wheels of `requirements` (and what they need) into the session."""
    wanted, notes = split_builtins(requirements)
    result = InstallResult(notes=notes)
    if not wanted:
        return result
    target = ensure_packages_dir(workspace_root, session_id)
    scratch = Path(tempfile.mkdtemp(prefix=".pip-", dir=target.parent))
    try:
        _run_pip(scratch, wanted, settings, upgrade, no_deps, quiet, on_output, stop)
        _drop_builtins(scratch)
        _check(scratch, settings.max_bytes)
        result.installed = _merge(scratch, target)
    except subprocess.TimeoutExpired:
        raise PackageError(f"%pip install: pip took longer than {settings.timeout_seconds:g} s and was stopped") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def list_packages(workspace_root: Path, session_id: str) -> list[tuple[str, str]]:
    target = packages_path(workspace_root, session_id)
    if not target.is_dir():
        return []
    return sorted(_dist_name_version(entry) for entry in target.iterdir() if entry.name.endswith(".dist-info"))


def uninstall_packages(workspace_root: Path, session_id: str, names: Iterable[str]) -> list[str]:
    """Remove the session's distributions named; returns what was removed."""
    target = packages_path(workspace_root, session_id)
    wanted = {canonicalize_name(n) for n in names}
    removed = []
    with _locked(target):
        for entry in sorted(target.iterdir()) if target.is_dir() else []:
            if entry.name.endswith(".dist-info"):
                name, version = _dist_name_version(entry)
                if canonicalize_name(name) in wanted:
                    _remove_dist(target, entry)
                    removed.append(f"{name} {version}")
    return removed


# --- pip ---------------------------------------------------------------------------


def _run_pip(
    scratch: Path, wanted: list[Requirement], settings: PipSettings, upgrade: bool, no_deps: bool, quiet: bool,
    on_output: Callable[[str], None] | None, stop: Callable[[], bool] | None,
) -> None:
    from ..host.artifacts import guest_artifacts

    standins = standin_wheelhouse()
    major, minor = guest_artifacts().python_version.split(".")[:2]
    command = [
        sys.executable, "-m", "pip", "install", "--isolated", "--disable-pip-version-check", "--no-input",
        "--progress-bar", "off", "--target", str(scratch), "--only-binary=:all:", "--platform", "any",
        "--python-version", f"{major}.{minor}", "--implementation", "py", "--abi", "none", "--no-compile",
        "--find-links", str(standins), "--constraint", str(standins / "constraints.txt"),
    ]
    if settings.no_index:
        command.append("--no-index")
    elif settings.index_url:
        command += ["--index-url", settings.index_url]
    for link in settings.find_links:
        command += ["--find-links", link]
    command += ["-q"] * quiet + ["--upgrade"] * upgrade + ["--no-deps"] * no_deps
    command += ["--", *(str(r) for r in wanted)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, errors="replace", cwd=scratch)
    lines: list[str] = []
    deadline = time.monotonic() + settings.timeout_seconds
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line)
            if on_output is not None and line.startswith(PROGRESS_LINES) and str(standins) not in line:
                on_output(line)
            if (stop is not None and stop()) or time.monotonic() > deadline:
                proc.kill()
                raise PackageError("%pip install: stopped")
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if code != 0:
        raise PackageError(_explain("".join(lines), wanted))


def _explain(output: str, wanted: list[Requirement]) -> str:
    """pip's failure as one line."""
    builtins = builtin_distributions()
    lines = [line.strip() for line in output.splitlines()]
    for line in lines:
        if line.startswith("ERROR: No matching distribution found for"):
            name = line.rsplit(" ", 1)[-1]
            compiled = ", ".join(sorted(n for n, _ in builtins.values() if n.lower() in _COMPILED_BUILTINS))
            return (
                f"%pip install: no pure-Python wheel of {name} for this sandbox: a package that needs "
                f"compiled code cannot be installed here (built in already: {compiled})"
            )
    conflict = [line for line in lines if " depends on " in line]
    for line in conflict:
        dependency = line.split(" depends on ", 1)[1]
        try:
            name = canonicalize_name(Requirement(dependency).name)
        except InvalidRequirement:
            continue
        if name in builtins:
            shipped, version = builtins[name]
            return (
                f"%pip install: {line}, but the sandbox has {shipped} {version} built in, and built-in "
                "packages cannot be replaced"
            )
    errors = [line for line in lines if line.startswith("ERROR:")]
    detail = errors[-1].removeprefix("ERROR: ") if errors else "pip failed"
    return f"%pip install {' '.join(str(r) for r in wanted)}: {detail}"


# Compiled distributions of the guest, named in the message about compiled packages.
_COMPILED_BUILTINS = {
    "numpy", "pandas", "scipy", "scikit_learn", "matplotlib", "statsmodels", "pillow", "lxml", "contourpy",
    "kiwisolver", "fonttools", "regex", "pyyaml", "markupsafe", "wrapt",
}


# --- the scratch install, checked and merged ---------------------------------------------


def _drop_builtins(scratch: Path) -> None:
    builtins = builtin_distributions()
    for entry in list(scratch.iterdir()):
        if entry.name.endswith(".dist-info") and canonicalize_name(_dist_name_version(entry)[0]) in builtins:
            _remove_dist(scratch, entry)


def _check(scratch: Path, max_bytes: int) -> None:
    total = 0
    for dirpath, _dirnames, filenames in os.walk(scratch):
        for name in filenames:
            path = Path(dirpath, name)
            if name.endswith(COMPILED_SUFFIXES) or ".so." in name:
                raise PackageError(
                    f"%pip install: the wheel carries compiled code ({path.relative_to(scratch)}), "
                    "which cannot run in the sandbox"
                )
            total += path.lstat().st_size
    if total > max_bytes:
        raise PackageError(
            f"%pip install: the packages take {total / 2**20:.1f} MiB, over this kernel's "
            f"{max_bytes / 2**20:.0f} MiB limit for a session's packages (operator setting pip_max_bytes)"
        )


def _merge(scratch: Path, target: Path) -> list[tuple[str, str]]:
    installed = []
    with _locked(target):
        new = [entry for entry in scratch.iterdir() if entry.name.endswith(".dist-info")]
        current = {canonicalize_name(_dist_name_version(e)[0]): e for e in target.iterdir() if e.name.endswith(".dist-info")}
        for entry in new:
            name, version = _dist_name_version(entry)
            old = current.get(canonicalize_name(name))
            if old is not None:
                _remove_dist(target, old)
            installed.append((name, version))
        for entry in scratch.iterdir():
            destination = target / entry.name
            if destination.is_dir() and not destination.is_symlink():
                shutil.rmtree(destination)
            elif destination.exists() or destination.is_symlink():
                destination.unlink()
            os.replace(entry, destination)
    return sorted(installed)


def _remove_dist(root: Path, dist_info: Path) -> None:
    """A distribution's files as its RECORD lists them (inside root only), then its dist-info."""
    record = dist_info / "RECORD"
    top_levels = set()
    if record.is_file():
        for line in record.read_text(errors="replace").splitlines():
            rel = line.split(",", 1)[0]
            parts = Path(rel).parts
            if not rel or ".." in parts or Path(rel).is_absolute():
                continue
            path = root / rel
            if path.is_file() or path.is_symlink():
                path.unlink()
            top_levels.add(parts[0])
    for name in top_levels:  # folders the files left empty
        folder = root / name
        if folder.is_dir() and not folder.is_symlink():
            for dirpath, _dirnames, _files in sorted(os.walk(folder, topdown=False)):
                try:
                    os.rmdir(dirpath)
                except OSError:
                    pass
    shutil.rmtree(dist_info, ignore_errors=True)


def _dist_name_version(dist_info: Path) -> tuple[str, str]:
    metadata = dist_info / "METADATA"
    name = version = None
    if metadata.is_file():
        for line in metadata.read_text(errors="replace").splitlines():
            if line.startswith("Name:"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("Version:"):
                version = line.split(":", 1)[1].strip()
            elif not line.strip():
                break
    stem = dist_info.name[: -len(".dist-info")]
    fallback_name, _, fallback_version = stem.rpartition("-")
    return name or fallback_name, version or fallback_version


class _locked:
    """flock on the packages folder, so two kernels of one session take turns."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.fd: int | None = None

    def __enter__(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)


__all__ = [
    "InstallResult",
    "PackageError",
    "PipSettings",
    "ensure_packages_dir",
    "install_packages",
    "list_packages",
    "packages_path",
    "parse_requirements",
    "remove_packages",
    "uninstall_packages",
]
