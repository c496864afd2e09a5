"""A session's own packages: pure-Python wheels installed by %pip, kept with the
session, read-only to its guest.

    <root>/.wasm-kernel/packages/<uuid>/                  on the guest's sys.path, read-only
    <root>/.wasm-kernel/packages/.pip-<uuid>.<random>/    an install under way: scratch

pip runs on the host, but only ever installs wheels built for any platform
(`--only-binary=:all: --platform any --abi none`), so no package code runs on the
host: unpacking a wheel executes nothing. The guest's own distributions (numpy,
pandas, IPython...) are offered to pip as installed, through stand-in wheels
(host/builtin_packages.py) that are dropped afterwards.

A session's packages are one quota (PipSettings.max_bytes, operator setting
pip_max_bytes), counted across installs, and no byte is unpacked before it is
counted. An install holds the session's lock from start to end, and:

 1. removes the scratch folders of this session a killed install left behind (the
    lock is held, so none of them belongs to a live install);
 2. has pip *download* the wheels and what they depend on, unpacking nothing;
 3. looks inside each wheel before anything is inflated (wheel_checks.py): member
    names and kinds, compression, and the sizes the zip declares, which must fit in
    what the quota has left once the distributions being replaced are gone;
 4. has pip install exactly those wheels, from the scratch folder only (`--no-index
    --no-deps`), into the scratch folder;
 5. checks what landed (no compiled file, within the quota) and only then replaces
    the session's copies of the same distributions.

pip's temporary folder is inside the scratch folder, which is measured while pip
runs: past what the checks allowed, pip is stopped. What pip says is shown with the
host's paths replaced by words such as <scratch> or <find-links>.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from ..host.builtin_packages import builtin_distributions
from ..host.guest_site import COMPILED_SUFFIXES
from .session_ids import validate_session_id
from .package_folder import (
    SCRATCH_PREFIX, ensure_packages_dir, locked_folder, packages_path, remove_packages, sweep_scratch,
)
from .pip_runner import (
    PackageError, PipSettings, download_command, install_command, installed_distributions, PipRun, Scrubber,
    size_text, tree_bytes,
)
from .wheel_checks import UnsafeWheel, WheelFacts, inspect_wheel, wheel_name

MAX_REQUIREMENTS = 32
MAX_REQUIREMENT_CHARS = 200
# How far the scratch folder may grow past what the checks allowed before pip is
# stopped: the RECORD, INSTALLER and folders pip adds, and what it writes between two
# measurements.
SCRATCH_SLACK = 4 << 20


@dataclass
class InstallResult:
    installed: list[tuple[str, str]] = field(default_factory=list)  # (name, version)
    notes: list[str] = field(default_factory=list)  # one line each, e.g. what is built in


def parse_requirements(words: Iterable[str]) -> list[Requirement]:
    """Requirement specifiers only: a name, extras and versions. No URL, no file,
    no environment marker."""
    from packaging.requirements import InvalidRequirement, Requirement  # %pip's, not every start's (~5 ms)

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


def split_builtins(requirements: list[Requirement], settings: PipSettings | None = None) -> tuple[list[Requirement], list[str]]:
    """The requirements pip must install, and a note for each one the guest has."""
    settings = settings or PipSettings()
    builtins = installed_distributions(settings)
    course = {canonicalize_name(name) for name, _ in settings.provided} - set(builtin_distributions())
    wanted, notes = [], []
    for req in requirements:
        shipped = builtins.get(canonicalize_name(req.name))
        if shipped is None:
            wanted.append(req)
            continue
        name, version = shipped
        in_course = canonicalize_name(name) in course
        if req.specifier and not req.specifier.contains(version, prereleases=True):
            raise PackageError(
                f"%pip install {req}: the sandbox has {name} {version} in the course's environment, which a notebook "
                "cannot change" if in_course else
                f"%pip install {req}: the sandbox has {name} {version} built in, and built-in packages cannot be replaced"
            )
        where = "in the course's environment" if in_course else "built into the sandbox"
        notes.append(f"{name} {version} is already {where}: nothing to install")
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
    """Install wheels of `requirements` (and what they need) into the session.

    `upgrade` is accepted for pip's sake and changes nothing: each install starts
    from an empty scratch folder, so pip always takes the newest versions allowed."""
    del upgrade
    wanted, notes = split_builtins(requirements, settings)
    result = InstallResult(notes=notes)
    if not wanted:
        return result
    target = ensure_packages_dir(workspace_root, session_id)
    shelf = target.parent
    pip = PipRun(settings, stop, Scrubber.for_install(workspace_root, target, settings), on_output)
    try:
        with locked_folder(target, waiting=pip.waiting):
            sweep_scratch(shelf, session_id)
            scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{validate_session_id(session_id)}.", dir=shelf))
            pip.scrub.add(scratch, "<scratch>")
            try:
                result.installed = install_into(scratch, target, wanted, settings, pip, no_deps, quiet)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    except subprocess.TimeoutExpired:
        raise PackageError(pip.timed_out()) from None
    return result


def install_into(
    scratch: Path, target: Path, wanted: list[Requirement], settings: PipSettings, pip: PipRun,
    no_deps: bool, quiet: bool,
) -> list[tuple[str, str]]:
    """Steps 2-5 above in `scratch` (empty, the caller's), merged into `target`: a
    session's packages, or a course's site being built (course_site.py)."""
    wheels, site = scratch / "wheels", scratch / "site"
    for folder in (wheels, site, scratch / "tmp"):
        folder.mkdir()
    # 1. The wheels, nothing unpacked. pip keeps its own temporary copy of each download
    # until it exits, so the scratch folder may briefly hold the wheels twice.
    pip.run(
        download_command(wheels, wanted, settings, no_deps, quiet), scratch, wanted,
        cap=2 * settings.max_bytes + SCRATCH_SLACK, show=True,
    )
    # 2. Each wheel looked into before anything is inflated. The guest's own
    # distributions came as stand-ins (or as their real wheel, same version): dropped
    # unopened, they are never installed.
    saved = sorted(wheels.iterdir())
    if not saved:  # pip said it succeeded, yet saved nothing: never a silent "done"
        raise PackageError(f"%pip install {' '.join(map(str, wanted))}: pip saved no wheel, so nothing was installed")
    builtins = installed_distributions(settings)
    facts: list[WheelFacts] = []
    for path in saved:
        if wheel_name(path) in builtins:
            path.unlink()
            continue
        try:
            facts.append(inspect_wheel(path))
        except UnsafeWheel as err:
            raise PackageError(
                f"%pip install: refused {_shown(path.name)} before unpacking it: {err}; "
                "install another version or another package"
            ) from None
    if not facts:
        return []
    kept = _kept_bytes(target, {f.name for f in facts})
    declared = sum(f.declared_bytes for f in facts)
    if kept + declared > settings.max_bytes:
        raise PackageError(
            _over_quota(declared, kept, settings.max_bytes, "would unpack to", " (refused before unpacking)")
        )
    # 3. Exactly those wheels, from the scratch folder only; the guard is the quota's
    # remainder, as the zip files are still there.
    pip.run(
        install_command(site, wheels, facts), scratch, wanted,
        cap=tree_bytes(wheels) + settings.max_bytes - kept + SCRATCH_SLACK, show=False,
    )
    # 4. What landed, before the session's copies change.
    _drop_builtins(site, builtins)
    _refuse_compiled(site)
    kept = _kept_bytes(target, {canonicalize_name(dist_name_version(e)[0]) for e in _dist_infos(site)})
    landed = tree_bytes(site)
    if kept + landed > settings.max_bytes:
        raise PackageError(_over_quota(landed, kept, settings.max_bytes, "take", ""))
    return _merge(site, target)


def _over_quota(new: int, kept: int, limit: int, verb: str, when: str) -> str:
    if kept <= 0:
        return (
            f"%pip install: these packages {verb} {size_text(new)}, over this kernel's {size_text(limit)} limit for a "
            f"session's packages{when}; ask the operator to raise pip_max_bytes"
        )
    return (
        f"%pip install: these packages {verb} {size_text(new)} and the session's packages already take {size_text(kept)}, "
        f"{size_text(new + kept)} together, over this kernel's {size_text(limit)} limit for a session's packages{when}; "
        "make room with %pip uninstall NAME (%pip list shows them) or ask the operator to raise pip_max_bytes"
    )


def _shown(name: str, most: int = 100) -> str:
    return name if len(name) <= most else name[:most] + "..."


def list_packages(workspace_root: Path, session_id: str) -> list[tuple[str, str]]:
    target = packages_path(workspace_root, session_id)
    if not target.is_dir():
        return []
    return sorted(dist_name_version(entry) for entry in target.iterdir() if entry.name.endswith(".dist-info"))


def uninstall_packages(workspace_root: Path, session_id: str, names: Iterable[str]) -> list[str]:
    """Remove the session's distributions named; returns what was removed."""
    target = packages_path(workspace_root, session_id)
    wanted = {canonicalize_name(n) for n in names}
    removed = []
    with locked_folder(target):
        for entry in sorted(target.iterdir()) if target.is_dir() else []:
            if entry.name.endswith(".dist-info"):
                name, version = dist_name_version(entry)
                if canonicalize_name(name) in wanted:
                    _remove_dist(target, entry)
                    removed.append(f"{name} {version}")
    return removed


# --- the scratch install, checked and merged ---------------------------------------------


def _drop_builtins(scratch: Path, builtins: dict[str, tuple[str, str]]) -> None:
    for entry in list(scratch.iterdir()):
        if entry.name.endswith(".dist-info") and canonicalize_name(dist_name_version(entry)[0]) in builtins:
            _remove_dist(scratch, entry)


def _refuse_compiled(site: Path) -> None:
    """After pip, again: the wheels were looked into, but this is what the guest gets."""
    for dirpath, _dirnames, filenames in os.walk(site):
        for name in filenames:
            if name.endswith(COMPILED_SUFFIXES) or ".so." in name:
                rel = Path(dirpath, name).relative_to(site)
                raise PackageError(
                    f"%pip install: the wheel carries compiled code ({rel}), which cannot run in the sandbox"
                )


def _kept_bytes(target: Path, replaced: set[str]) -> int:
    """What the session's packages will still take once the distributions named in
    `replaced` (canonical names) are gone: the quota's part an install cannot use."""
    leaving: set[Path] = set()
    for entry in _dist_infos(target):
        if canonicalize_name(dist_name_version(entry)[0]) in replaced:
            leaving.update(_dist_files(target, entry))
    gone = 0
    for path in leaving:
        try:
            gone += path.lstat().st_size
        except FileNotFoundError:
            continue
    return tree_bytes(target) - gone


def _dist_infos(root: Path) -> list[Path]:
    return [e for e in root.iterdir() if e.name.endswith(".dist-info") and e.is_dir()] if root.is_dir() else []


def _merge(site: Path, target: Path) -> list[tuple[str, str]]:
    """Call with the session's lock held."""
    installed = []
    current = {canonicalize_name(dist_name_version(e)[0]): e for e in _dist_infos(target)}
    for entry in _dist_infos(site):
        name, version = dist_name_version(entry)
        old = current.get(canonicalize_name(name))
        if old is not None:
            _remove_dist(target, old)
        installed.append((name, version))
    for entry in site.iterdir():
        destination = target / entry.name
        if destination.is_dir() and not destination.is_symlink():
            shutil.rmtree(destination)
        elif destination.exists() or destination.is_symlink():
            destination.unlink()
        os.replace(entry, destination)
    return sorted(installed)


def _record_files(root: Path, dist_info: Path) -> list[Path]:
    """The files a distribution's RECORD lists, inside root only."""
    record = dist_info / "RECORD"
    if not record.is_file():
        return []
    found = []
    for line in record.read_text(errors="replace").splitlines():
        rel = line.split(",", 1)[0]
        if not rel or ".." in Path(rel).parts or Path(rel).is_absolute():
            continue
        path = root / rel
        if path.is_file() or path.is_symlink():
            found.append(path)
    return found


def _dist_files(root: Path, dist_info: Path) -> set[Path]:
    """Every file removing the distribution removes: RECORD's, and its dist-info's."""
    found = set(_record_files(root, dist_info))
    for dirpath, _dirnames, filenames in os.walk(dist_info):
        found.update(Path(dirpath, name) for name in filenames)
    return found


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


def dist_name_version(dist_info: Path) -> tuple[str, str]:
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


__all__ = [
    "InstallResult",
    "PackageError",
    "PipSettings",
    "ensure_packages_dir",
    "dist_name_version",
    "install_into",
    "install_packages",
    "list_packages",
    "packages_path",
    "parse_requirements",
    "remove_packages",
    "uninstall_packages",
]
