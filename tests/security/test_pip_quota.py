"""%pip and the host's disk: a session's packages are one quota, counted across
installs; a wheel is checked before pip unpacks a byte of it; what pip says carries
no host path; and a kernel killed mid-install leaves nothing the next one keeps.

Real pip, real wheels the tests write into a temporary wheelhouse (tests/support/wheelhouse.py),
never the network. These run at the sessions API, without a kernel: the %pip magic
only hands its words to install_packages (tests/kernel/test_pip.py drives it end to end).
"""

from __future__ import annotations

import fcntl
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path

import pytest

from wasm_kernel.sessions.packages import (
    PackageError,
    PipSettings,
    ensure_packages_dir,
    install_packages,
    list_packages,
    packages_path,
    parse_requirements,
)
from support.wheelhouse import add_members, add_zeros, build_wheel, declare_size

pytestmark = pytest.mark.slow  # real pip, killed and crashed on purpose

KIB, MIB = 1 << 10, 1 << 20


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "sessions"


@pytest.fixture
def session() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def host_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip's temporary folder if it used the host's: watched like the rest."""
    folder = tmp_path / "host-tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def settings(wheelhouse: Path, max_bytes: int = 200 * MIB) -> PipSettings:
    return PipSettings(find_links=(str(wheelhouse),), no_index=True, max_bytes=max_bytes)


def install(root: Path, session: str, words: str, wheelhouse: Path, max_bytes: int = 200 * MIB,
            said: list[str] | None = None) -> list[tuple[str, str]]:
    result = install_packages(root, session, parse_requirements(words.split()), settings(wheelhouse, max_bytes),
                              on_output=None if said is None else said.append)
    return result.installed


def refusal(root: Path, session: str, words: str, wheelhouse: Path, max_bytes: int = 200 * MIB) -> str:
    with pytest.raises(PackageError) as caught:
        install(root, session, words, wheelhouse, max_bytes)
    message = str(caught.value)
    assert message.startswith("%pip install") and "\n" not in message, message
    return message


class LargestFile:
    """The largest file seen under some folders while a block runs, looked at every
    few milliseconds: a file pip inflated and deleted again is still caught. Wheels
    themselves (pip's copy of the download) are not what is looked for."""

    def __init__(self, *folders: Path) -> None:
        self.folders = folders
        self.largest = (0, "")
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> LargestFile:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self._look()

    def _watch(self) -> None:
        while not self._done.is_set():
            self._look()
            time.sleep(0.002)

    def _look(self) -> None:
        for folder in self.folders:
            for dirpath, _dirs, files in os.walk(folder):
                for name in files:
                    if name.endswith(".whl"):
                        continue
                    try:
                        size = os.lstat(os.path.join(dirpath, name)).st_size
                    except FileNotFoundError:
                        continue
                    if size > self.largest[0]:
                        self.largest = (size, os.path.join(dirpath, name))


# --- 1. one quota for all of a session's installs ---------------------------------------


def test_the_size_limit_counts_what_the_session_already_has(tmp_path: Path, root: Path, session: str) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "first", "1.0", {"first/__init__.py": "X = 1\n", "first/data.bin": b"a" * 300 * KIB})
    build_wheel(wheels, "first", "2.0", {"first/__init__.py": "X = 2\n", "first/data.bin": b"b" * 300 * KIB})
    build_wheel(wheels, "second", "1.0", {"second/__init__.py": "", "second/data.bin": b"c" * 300 * KIB})
    cap = 500 * KIB  # one of them fits, two do not

    assert install(root, session, "first==1.0", wheels, cap) == [("first", "1.0")]
    # An upgrade replaces its own bytes: 1.0 leaves as 2.0 comes, so it fits.
    assert install(root, session, "first==2.0", wheels, cap) == [("first", "2.0")]
    before = {p.relative_to(packages_path(root, session)): p.read_bytes()
              for p in packages_path(root, session).rglob("*") if p.is_file()}

    message = refusal(root, session, "second", wheels, cap)
    assert "limit" in message and "pip_max_bytes" in message and "%pip uninstall" in message, message
    assert re.search(r"\d+(\.\d+)? KiB", message), message  # says how much, not only "too big"
    assert list_packages(root, session) == [("first", "2.0")]
    after = {p.relative_to(packages_path(root, session)): p.read_bytes()
             for p in packages_path(root, session).rglob("*") if p.is_file()}
    assert after == before  # nothing lost or half-changed
    assert [p.name for p in packages_path(root, session).parent.iterdir()] == [session]  # no scratch left


# --- 2. a wheel is checked before anything in it is unpacked -----------------------------


def bomb_wheels(folder: Path) -> dict[str, tuple[str, str]]:
    """name -> (requirement, words the refusal must say)."""
    def base(name: str) -> Path:
        return build_wheel(folder, name, "1.0", {f"{name.replace('-', '_')}/__init__.py": ""})

    add_zeros(base("deflate-bomb"), "deflate_bomb/zeros.bin", 64 * MIB)  # ~64 KiB on disk
    declare_size(add_members(base("declared-bomb"), [(zipfile.ZipInfo("declared_bomb/big.bin"), b"small")]),
                 "declared_bomb/big.bin", 3 << 30)  # claims 3 GiB, holds 5 bytes
    add_members(base("dotdot"), [(zipfile.ZipInfo("../outside.py"), b"print('escaped')\n")])
    add_members(base("absolute"), [(zipfile.ZipInfo("/etc/outside.py"), b"x = 1\n")])
    link = zipfile.ZipInfo("symlink/passwd")
    link.create_system = 3
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    add_members(base("symlink"), [(link, b"/etc/passwd")])
    add_members(base("duplicate"), [(zipfile.ZipInfo("duplicate/__init__.py"), b"x = 'second copy'\n")])
    add_members(base("many-members"), [(zipfile.ZipInfo(f"many_members/m{i}.py"), b"") for i in range(20_001)])
    return {
        "deflate-bomb": ("deflate-bomb", "compress"),
        "declared-bomb": ("declared-bomb", "limit"),
        "dotdot": ("dotdot", "'../outside.py'"),
        "absolute": ("absolute", "'/etc/outside.py'"),
        "symlink": ("symlink", "symbolic link"),
        "duplicate": ("duplicate", "twice"),
        "many-members": ("many-members", "20000"),
    }


@pytest.fixture(scope="module")
def bombs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[str, str]]]:
    folder = tmp_path_factory.mktemp("bombs")
    return folder, bomb_wheels(folder)


@pytest.mark.parametrize("vector", ["deflate-bomb", "declared-bomb", "dotdot", "absolute", "symlink", "duplicate",
                                    "many-members"])
def test_hostile_wheels_are_refused_before_they_are_unpacked(
    bombs: tuple[Path, dict[str, tuple[str, str]]], root: Path, session: str, host_tmp: Path, vector: str,
) -> None:
    folder, vectors = bombs
    requirement, words = vectors[vector]
    root.mkdir(parents=True)
    with LargestFile(root, host_tmp) as seen:
        message = refusal(root, session, requirement, folder)
    assert words in message and "before unpacking" in message, message
    assert seen.largest[0] < 1 * MIB, seen.largest  # nothing was inflated, not even for a moment
    assert list_packages(root, session) == []
    assert list(packages_path(root, session).iterdir()) == []
    assert [p.name for p in packages_path(root, session).parent.iterdir()] == [session]


# --- 3. what pip says is shown without the host's paths ---------------------------------


HOST_PATH = re.compile(r"(?<![\w.:/<>-])/[\w.-]+/")  # an absolute path, as a host would spell it


def test_pip_errors_name_no_host_path(tmp_path: Path, root: Path, session: str) -> None:
    wheels = tmp_path / "find-links-folder"
    wheels.mkdir()
    (wheels / "broken-1.0-py3-none-any.whl").write_bytes(b"this is not a zip file")
    build_wheel(wheels, "greet", "1.0", {"greet/__init__.py": ""})
    message = refusal(root, session, "broken", wheels)
    assert "broken" in message, message
    said: list[str] = []
    install(root, session, "greet", wheels, said=said)
    for text in [message, *said]:
        for secret in (str(tmp_path), str(root), str(wheels), sys.prefix, str(Path.home()), tempfile.gettempdir()):
            assert secret not in text, (secret, text)
        assert not HOST_PATH.search(text), text


# --- 4. a killed install leaves nothing that lasts --------------------------------------


CHILD = """
import sys
from pathlib import Path
from wasm_kernel.sessions.packages import PipSettings, install_packages, parse_requirements
install_packages(Path(sys.argv[1]), sys.argv[2], parse_requirements(['slow']),
                 PipSettings(find_links=(sys.argv[3],), no_index=True))
"""


def test_a_killed_install_leaves_no_scratch_behind(tmp_path: Path, root: Path, session: str) -> None:
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "slow", "1.0", {"slow/__init__.py": "", "slow/data.bin": os.urandom(8 * MIB)})
    build_wheel(wheels, "greet", "1.0", {"greet/__init__.py": ""})
    build_wheel(wheels, "other", "1.0", {"other/__init__.py": ""})
    shelf = packages_path(root, session).parent

    # kill -9 of the kernel (and its pip) while the install is under way
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(root), session, str(wheels)], start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (shelf.is_dir() and any(p.name.startswith(".pip-") for p in shelf.iterdir())):
            assert child.poll() is None and time.monotonic() < deadline, "the install never started"
            time.sleep(0.005)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert any(p.name.startswith(".pip-") for p in shelf.iterdir())  # what a killed install leaves

    # The next installs sweep it; two at once in the same session each keep their own.
    done: list[object] = []
    threads = [threading.Thread(target=lambda n=name: done.append(install(root, session, n, wheels)))
               for name in ("greet", "other")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(done) == [[("greet", "1.0")], [("other", "1.0")]], done
    assert list_packages(root, session) == [("greet", "1.0"), ("other", "1.0")]
    assert [p.name for p in shelf.iterdir()] == [session]


def test_a_crash_is_swept_whatever_it_left(root: Path, session: str, tmp_path: Path) -> None:
    """A scratch folder left half-filled, as by a kill -9 between pip and the merge."""
    wheels = tmp_path / "wheels"
    build_wheel(wheels, "greet", "1.0", {"greet/__init__.py": ""})
    install(root, session, "greet", wheels)
    shelf = packages_path(root, session).parent
    stale = Path(tempfile.mkdtemp(prefix=f".pip-{session}.", dir=shelf))
    (stale / "site" / "half").mkdir(parents=True)
    (stale / "site" / "half" / "big.bin").write_bytes(bytes(2 * MIB))
    other_session = shelf / f".pip-{uuid.uuid4()}.busy"  # another session's: not this install's business
    other_session.mkdir()
    install(root, session, "greet", wheels)
    assert sorted(p.name for p in shelf.iterdir()) == sorted([session, other_session.name])
    assert list_packages(root, session) == [("greet", "1.0")]



def test_the_next_start_of_the_session_sweeps_a_killed_installs_scratch(root: Path, session: str) -> None:
    """A kernel opening its session (ensure_packages_dir) removes what a kill -9 left,
    without waiting for the next %pip; a live install's scratch is left to it."""
    shelf = ensure_packages_dir(root, session).parent
    stale = Path(tempfile.mkdtemp(prefix=f".pip-{session}.", dir=shelf))
    (stale / "wheels").mkdir()
    ensure_packages_dir(root, session)
    assert not stale.exists()
    live = Path(tempfile.mkdtemp(prefix=f".pip-{session}.", dir=shelf))
    fd = os.open(packages_path(root, session), os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # as an install under way holds it
        ensure_packages_dir(root, session)
        assert live.exists()
    finally:
        os.close(fd)
