"""Running pip for %pip (packages.py): its two command lines, the process with its
output scrubbed of host paths and its scratch folder measured, and its errors
explained in one line.

pip runs with no configuration of the host's and only ever handles pure wheels for
the guest's Python, whose environment markers it evaluates (host/guest_pip.py). What it prints is shown with the host's folders replaced by
words (<scratch>, <find-links>, ...); its output is read on a thread so that a
silent pip still sees a stop, the time limit and the scratch folder's growth.
"""

from __future__ import annotations

import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING
from urllib.parse import unquote, urlparse

from packaging.utils import canonicalize_name

if TYPE_CHECKING:
    from packaging.requirements import Requirement

from ..host.builtin_packages import builtin_distributions, standin_wheelhouse
from ..host.cache_dir import cache_root
from ..host.guest_pip import OVERRIDES_ENV
from .wheel_checks import WheelFacts

# pip's lines shown while it works; its errors become one line of ours, and the
# result is reported once the install has passed our checks.
PROGRESS_LINES = ("Collecting ", "Downloading ", "Using cached ", "Requirement already satisfied")
KEPT_OUTPUT_LINES = 2000  # of pip's output, for _explain; the rest is not kept
POLL_SECONDS = 0.2
# pip, with the guest's environment markers (host/guest_pip.py).
GUEST_PIP = (sys.executable, "-m", "wasm_kernel.host.guest_pip")


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
    # The operator's pip constraints and overrides (guest_constraints, guest_overrides):
    # requirement specifiers, a name and a version range each.
    constraints: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    # Distributions the guest has beside its built-ins (the course's environment, as
    # (name, version)): installed as far as pip can tell, never installed again.
    provided: tuple[tuple[str, str], ...] = ()


def installed_distributions(settings: PipSettings) -> dict[str, tuple[str, str]]:
    """canonical name -> (name, version) of every distribution the guest already has."""
    found = dict(builtin_distributions())
    for name, version in settings.provided:
        found.setdefault(canonicalize_name(name), (name, version))
    return found


def tree_bytes(root: Path) -> int:
    """The bytes of every file and link under root (folders are not counted). Files
    may vanish while pip works: they count as nothing."""
    total = 0
    stack = [os.fspath(root)]
    while stack:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
                    except FileNotFoundError:
                        continue
        except (FileNotFoundError, NotADirectoryError):
            continue
    return total


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _pip_options() -> list[str]:
    """What both of pip's runs share: no configuration of the host's, pure wheels only,
    for the guest's Python."""
    from ..host.artifacts import guest_artifacts

    major, minor = guest_artifacts().python_version.split(".")[:2]
    return [
        "--isolated", "--disable-pip-version-check", "--no-input", "--progress-bar", "off", "--only-binary=:all:",
        "--platform", "any", "--python-version", f"{major}.{minor}", "--implementation", "py", "--abi", "none",
    ]


def download_command(
    wheels: Path, wanted: list[Requirement], settings: PipSettings, no_deps: bool, quiet: bool,
) -> list[str]:
    """`pip download` resolves dependencies as `pip install` would, with the same
    options, but only saves the wheels."""
    _check_operator_specifiers(settings.constraints, "guest_constraints")
    _check_operator_specifiers(settings.overrides, "guest_overrides")
    standins = standin_wheelhouse(settings.provided)
    command = [
        *GUEST_PIP, "download", *_pip_options(), "--dest", str(wheels),
        "--find-links", str(standins), "--constraint", str(standins / "constraints.txt"),
    ]
    if settings.no_index:
        command.append("--no-index")
    elif settings.index_url:
        command += ["--index-url", settings.index_url]
    for link in settings.find_links:
        command += ["--find-links", link]
    if settings.constraints:
        operator = wheels.parent / "operator-constraints.txt"
        operator.write_text("".join(f"{c}\n" for c in settings.constraints))
        command += ["--constraint", str(operator)]
    command += ["-q"] * quiet + ["--no-deps"] * no_deps
    return command + ["--", *(str(r) for r in wanted)]


def _check_operator_specifiers(entries: tuple[str, ...], setting: str) -> None:
    from packaging.requirements import InvalidRequirement, Requirement

    for entry in entries:
        try:
            req = Requirement(entry)
        except InvalidRequirement:
            req = None
        if req is None or req.url or req.marker is not None:
            raise PackageError(
                f"%pip install: the operator's {setting} entry {entry[:100]!r} is not a name with a version range "
                f"(e.g. 'wrapt>=1.16'); ask the operator to correct WasmKernel.{setting}"
            )


def install_command(site: Path, wheels: Path, facts: list[WheelFacts]) -> list[str]:
    """The checked wheels and nothing else: no index, no other folder, no resolving.
    Named by version rather than by file, so that pip records no direct URL (the
    scratch path) in the installed metadata, which the guest can read."""
    return [
        *GUEST_PIP, "install", *_pip_options(), "-q", "--no-compile", "--target", str(site),
        # The download step checked each wheel's Requires-Python for the guest; pip
        # install checks it against the host's Python (3.11), which sphinx's >=3.13 fails.
        "--no-index", "--no-deps", "--ignore-requires-python", "--find-links", str(wheels),
        "--", *(f"{f.name}=={f.version}" for f in facts),
    ]


class PipRun:
    """Runs pip for one install: its output shown (scrubbed) and kept for _explain,
    the session's stop button and the time limit obeyed, and the scratch folder
    measured while pip writes to it."""

    def __init__(self, settings: PipSettings, stop: Callable[[], bool] | None, scrub: Scrubber,
                 on_output: Callable[[str], None] | None) -> None:
        self.settings = settings
        self.stop = stop
        self.scrub = scrub
        self.on_output = on_output or (lambda line: None)
        self.deadline = time.monotonic() + settings.timeout_seconds
        self.hidden = str(standin_wheelhouse(settings.provided))
        self._told_waiting = False

    def timed_out(self) -> str:
        return f"%pip install: pip took longer than {self.settings.timeout_seconds:g} s and was stopped"

    def check(self) -> None:
        if self.stop is not None and self.stop():
            raise PackageError("%pip install: stopped")
        if time.monotonic() > self.deadline:
            raise PackageError(self.timed_out())

    def waiting(self) -> None:
        """Called while another install of the session holds its lock."""
        if not self._told_waiting:
            self.on_output("Waiting for another %pip install of this session to finish...\n")
        self._told_waiting = True
        self.check()

    def run(self, command: list[str], scratch: Path, wanted: list[Requirement], *, cap: int, show: bool) -> None:
        # pip's temporary files (downloads, the unpacked wheels before they move into
        # place) go to the scratch folder, where they are measured and swept.
        env = dict(os.environ, TMPDIR=str(scratch / "tmp"))
        env[OVERRIDES_ENV] = "\n".join(self.settings.overrides)
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", cwd=scratch, env=env)
        assert proc.stdout is not None
        # A thread reads pip's output so that the loop below wakes up on time even
        # while pip says nothing (a slow download, a big wheel being unpacked).
        lines: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        reader = threading.Thread(target=_pump, args=(proc.stdout, lines), name="pip-output", daemon=True)
        reader.start()
        kept: deque[str] = deque(maxlen=KEPT_OUTPUT_LINES)
        next_measure = 0.0
        try:
            while True:
                try:
                    line = lines.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                if line:
                    kept.append(line)
                    if show and line.startswith(PROGRESS_LINES) and self.hidden not in line:
                        self.on_output(self.scrub(line))
                self.check()
                if time.monotonic() >= next_measure:
                    began = time.monotonic()
                    used = tree_bytes(scratch)
                    if used > cap:
                        raise PackageError(
                            f"%pip install: pip was stopped at {size_text(used)} written, past what this kernel's "
                            f"{size_text(self.settings.max_bytes)} limit for a session's packages allows; "
                            "ask the operator to raise pip_max_bytes"
                        )
                    # Measuring a big tree costs; never spend more than a tenth of the time on it.
                    next_measure = time.monotonic() + max(POLL_SECONDS, 10 * (time.monotonic() - began))
            code = proc.wait(timeout=max(1.0, self.deadline - time.monotonic()))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            reader.join(timeout=5)
        if code != 0:
            raise PackageError(self.scrub(_explain("".join(kept), wanted, installed_distributions(self.settings))))


def _pump(stream: IO[str], lines: queue.SimpleQueue[str | None]) -> None:
    try:
        for line in stream:
            lines.put(line)
    finally:
        lines.put(None)


class Scrubber:
    """Host paths out of pip's lines. Each folder the install knows of becomes a word
    (<scratch>, <packages>, <find-links>...), longest first so a folder inside another
    gets its own; an absolute path left after that loses its folders to <path>."""

    def __init__(self) -> None:
        self._words: dict[str, str] = {}

    @classmethod
    def for_install(cls, root: Path, target: Path, settings: PipSettings, root_word: str = "<sessions>") -> Scrubber:
        """`root`: the sessions root for %pip, the course's folder in the cache for its build."""
        scrub = cls()
        scrub.add(target, "<packages>")
        scrub.add(target.parent, "<packages>")
        scrub.add(root, root_word)
        for link in settings.find_links:
            scrub.add(_local_path(link), "<find-links>")
        if settings.index_url:
            scrub.add(_local_path(settings.index_url), "<index>")
        scrub.add(standin_wheelhouse(settings.provided), "<built-in>")
        scrub.add(cache_root(), "<cache>")
        for prefix in {sys.prefix, sys.exec_prefix, sys.base_prefix, os.path.dirname(sys.executable)}:
            scrub.add(prefix, "<python>")
        scrub.add(tempfile.gettempdir(), "<tmp>")
        home = os.path.expanduser("~")  # left as "~" when there is no telling
        scrub.add(home if home != "~" else None, "<home>")
        return scrub

    def add(self, path: str | os.PathLike[str] | None, word: str) -> None:
        if path is None:
            return
        for spelled in {os.path.abspath(path), os.path.realpath(path)}:
            spelled = spelled.rstrip("/")
            if len(spelled) > 1:  # never "/" itself
                self._words.setdefault(spelled, word)

    def __call__(self, text: str) -> str:
        for path in sorted(self._words, key=len, reverse=True):
            text = text.replace(path, self._words[path])
        return _ABSOLUTE_PATH.sub(_folders_dropped, text)


# A slash that starts a path: not inside a word, a URL ("https://x/y") or a path
# already replaced ("<scratch>/wheels"). file:///x is a URL whose path is host's.
_ABSOLUTE_PATH = re.compile(r"(?:file://|(?<![\w.:/<>~-]))/[^\s'\"(),;]*")


def _folders_dropped(match: re.Match[str]) -> str:
    last = match.group(0).rstrip("/").rsplit("/", 1)[-1]
    return f"<path>/{last}" if last else "<path>"


def _local_path(link: str) -> str | None:
    """The folder a --find-links or --index-url names on this host, if it names one."""
    if "://" not in link:
        return os.path.abspath(link)
    parsed = urlparse(link)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _explain(output: str, wanted: list[Requirement], builtins: dict[str, tuple[str, str]]) -> str:
    """pip's failure as one line."""
    from packaging.requirements import InvalidRequirement, Requirement  # %pip's, not every start's (~5 ms)

    lines = [line.strip() for line in output.splitlines()]
    for line in lines:
        missing = _NOT_FOUND.match(line)
        if missing:
            return _no_wheel(missing, builtins)
    conflict = [line for line in lines if " depends on " in line]
    for line in conflict:
        parent, dependency = line.split(" depends on ", 1)
        try:  # pip writes a range as "wrapt<2 and >=1.16"
            req = Requirement(dependency.replace(" and ", ","))
        except InvalidRequirement:
            continue
        name = canonicalize_name(req.name)
        if name in builtins:
            shipped, version = builtins[name]
            return (
                f"%pip install: {parent} depends on {req}, but the sandbox has {shipped} {version} built in, and built-in "
                "packages cannot be replaced (if the package runs on it, the operator can say so with "
                f"WasmKernel.guest_overrides = ['{name}>=...'])"
            )
    errors = [line for line in lines if line.startswith("ERROR:")]
    detail = errors[-1].removeprefix("ERROR: ") if errors else "pip failed"
    return f"%pip install {' '.join(str(r) for r in wanted)}: {detail}"


# pip's line for a requirement nothing satisfies; the requirement may carry a marker
# ("psutil>=7; sys_platform != ..."), the package that asked for it is in "(from ...)".
_NOT_FOUND = re.compile(
    r"ERROR: Could not find a version that satisfies the requirement (?P<req>.+?)"
    r"(?: \(from (?P<parent>[^()]+)\))? \(from versions: (?P<versions>[^()]*)\)$"
)


def _no_wheel(missing: re.Match[str], builtins: dict[str, tuple[str, str]]) -> str:
    from packaging.requirements import InvalidRequirement, Requirement

    text = missing["req"]
    try:
        req = Requirement(text)
        name, spec = req.name, str(req.specifier)
    except InvalidRequirement:
        name, spec = text.split(";", 1)[0].strip(), ""
    parent = re.split(r"[\s<>=!~\[;]", (missing["parent"] or "").strip(), maxsplit=1)[0]
    needed = f", which {parent} needs," if parent else ""
    if missing["versions"].strip() != "none":
        return f"%pip install: no version of {name}{needed} matches {spec} (there are {missing['versions'].strip()})"
    compiled = ", ".join(sorted(n for n, _ in builtins.values() if n.lower() in _COMPILED_BUILTINS))
    return (
        f"%pip install: {name}{needed} has no pure-Python wheel for this sandbox: a package that needs "
        f"compiled code cannot be installed here (built in already: {compiled})"
    )


# Compiled distributions of the guest, named in the message about compiled packages.
_COMPILED_BUILTINS = {
    "numpy", "pandas", "scipy", "scikit_learn", "matplotlib", "statsmodels", "pillow", "lxml", "contourpy",
    "kiwisolver", "fonttools", "regex", "pyyaml", "markupsafe", "wrapt",
}
