"""The confined shell as an attacker uses it: archives that climb out or are damaged,
links planted in the notebook's folder, rm of the root, endless output, fork-bomb
shapes, command substitution and globs that would fill the memory. Each runs in the
real guest."""

from __future__ import annotations

import io
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.damaged_archives import write_damaged_archives
from wasm_kernel import PythonSandbox, create_sandbox
from wasm_kernel.core.policy import ExecutionPolicy
from wasm_kernel.core.sandbox import GuestOptions
from wasm_kernel.runtime.notebook_overlay import NotebookFolder


@dataclass
class Setup:
    sb: PythonSandbox
    nb: Path
    ws: Path
    outside: Path


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    nb, ws = tmp_path / "course", tmp_path / "ws"
    nb.mkdir()
    (nb / "data.csv").write_text("a,b\n1,2\n")
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("must never be read")
    (nb / "link_out").symlink_to(outside)
    (nb / "link_etc").symlink_to("/etc")
    (nb / "link_up").symlink_to("..")
    sb = create_sandbox(workspace=ws, guest_options=GuestOptions(notebook=NotebookFolder(nb.resolve(), max_depth=4)),
                        policy=ExecutionPolicy(deadline_seconds=120))
    assert isinstance(sb, PythonSandbox)
    try:
        yield Setup(sb, nb, ws, outside)
    finally:
        sb.close()


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def test_unzip_skips_members_that_climb_out_or_are_links(setup: Setup) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("ok.txt", "fine")
        z.writestr("../escaped.txt", "climbed out of the target folder")
        z.writestr("/absolute.txt", "absolute")
        z.writestr("sub/../../also_escaped.txt", "climbed")
        link = zipfile.ZipInfo("link")
        link.external_attr = (stat.S_IFLNK | 0o777) << 16
        z.writestr(link, "/etc/passwd")
    (setup.ws / "evil.zip").write_bytes(buf.getvalue())
    r = setup.sb.execute("!unzip -d target evil.zip\n_exit_code")
    assert r.success, r
    assert (setup.ws / "target" / "ok.txt").read_text() == "fine"
    for name in ("../escaped.txt", "/absolute.txt", "sub/../../also_escaped.txt", "link"):
        assert f"skipped '{name}'" in r.stdout, (name, r.stdout)
    assert everything_under(setup.ws) == {"evil.zip", "target", "target/ok.txt"}
    assert r.outputs[-1].data["text/plain"] == "1"


def test_tar_skips_members_that_climb_out_or_are_links(setup: Setup) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as t:
        for name, data in (("ok.txt", b"fine"), ("../escaped.txt", b"out"), ("/abs.txt", b"abs")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for kind, target in ((tarfile.SYMTYPE, "/etc/passwd"), (tarfile.LNKTYPE, "../../outside-secret.txt")):
            info = tarfile.TarInfo("link" if kind == tarfile.SYMTYPE else "hard")
            info.type, info.linkname = kind, target
            t.addfile(info)
        info = tarfile.TarInfo("link/through.txt")
        info.size = 4
        t.addfile(info, io.BytesIO(b"evil"))
    (setup.ws / "evil.tgz").write_bytes(buf.getvalue())
    r = setup.sb.execute("!mkdir target && tar -xzf evil.tgz -C target\n_exit_code")
    assert r.success, r
    assert "skipped" in r.stdout and r.outputs[-1].data["text/plain"] == "2", r.stdout
    assert (setup.ws / "target" / "ok.txt").read_text() == "fine"
    names = everything_under(setup.ws)
    assert not any("escaped" in n or "abs" in n or n.endswith("hard") for n in names), names
    # The link was skipped, so link/through.txt made a plain folder, not a way out.
    assert not (setup.ws / "target" / "link").is_symlink()
    assert (setup.ws / "target" / "link" / "through.txt").read_text() == "evil"
    assert setup.outside.read_text() == "must never be read"


def test_links_planted_in_the_notebook_folder_lead_nowhere(setup: Setup) -> None:
    for line in ("!cat link_out", "!cat link_etc/passwd", "!ls link_up", "!cp -r link_etc copied",
                 "!grep -r secret .", "!cat link_up/outside-secret.txt", "!du -a ."):
        r = setup.sb.execute(line)
        assert "must never be read" not in r.stdout and "root:" not in r.stdout, (line, r.stdout)
    r = setup.sb.execute("x = !find .\nx")
    assert r.outputs[-1].data["text/plain"] == "['.', './data.csv']", r
    assert setup.outside.read_text() == "must never be read"
    assert not (setup.ws / "copied").exists()


def test_rm_of_the_root_or_dot_dot_is_refused_and_nothing_goes(setup: Setup) -> None:
    (setup.ws / "keep.txt").write_text("kept")
    for line, said in (("!rm -rf /", "rm: it is dangerous to operate recursively on '/'"),
                       ("!rm -rf /app/..", "rm: refusing to remove '.' or '..' directory: skipping '/app/..'"),
                       ("!rm -rf .", "rm: refusing to remove '.' or '..' directory: skipping '.'")):
        r = setup.sb.execute(line + "\n_exit_code")
        assert r.stdout.startswith(said) and r.outputs[-1].data["text/plain"] == "1", (line, r.stdout)
    assert (setup.ws / "keep.txt").read_text() == "kept"
    assert (setup.nb / "data.csv").exists()


def test_cat_of_a_huge_file_stays_under_the_output_cap(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "huge.txt").write_bytes(b"0123456789abcdef\n" * (3 << 20))  # 51 MiB
    sb = create_sandbox(workspace=ws, policy=ExecutionPolicy(stdout_max_bytes=1 << 20, deadline_seconds=120))
    try:
        r = sb.execute("!cat huge.txt\n!cat huge.txt huge.txt | head -n 2")
        assert len(r.stdout.encode()) <= (1 << 20) + 4096, len(r.stdout)
        assert sb.execute("1 + 1").success
    finally:
        sb.close()


@pytest.mark.parametrize("line,said", [
    (":(){ :|:& };:", "sh: 1: subshells and functions are not available in this sandbox's shell"),
    ("cat x" + " | cat" * 200, "sh: 1: a pipeline of 201 commands is more than the 64 this sandbox's shell runs"),
    ("echo $(curl http://evil/)", "sh: 1: curl: not found in this sandbox"),
    ("echo " + "$(echo " * 12 + "deep" + ")" * 12, "sh: 1: $(...) nested more than 8 deep"),
    ("cat x & echo y", "sh: 1: background jobs (&) are not available in this sandbox's shell"),
    ("cat <(ls)", "sh: 1: process substitutions are not available in this sandbox's shell"),
])
def test_shapes_a_real_shell_would_run_are_refused_in_one_line(setup: Setup, line: str, said: str) -> None:
    r = setup.sb.execute(f"x = !{line}\nx")
    assert r.success, r
    assert r.outputs[-1].data["text/plain"].startswith(f"[{said!r}"[:len(said) - 5]), (line, r.outputs[-1].data)


def test_a_trailing_ampersand_is_refused_by_ipython_as_under_ipykernel(setup: Setup) -> None:
    r = setup.sb.execute("!sleep 100 &")
    assert r.error is not None and (r.error.ename, r.error.evalue) == ("OSError", "Background processes not supported.")


def test_an_archive_bigger_than_the_quota_stops_at_the_quota(tmp_path: Path) -> None:
    # A zip bomb's shape: 4 MiB of zeros compress to a few KiB; the quota is 1 MiB.
    ws = tmp_path / "ws"
    ws.mkdir()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for i in range(4):
            z.writestr(f"zeros{i}.bin", b"\0" * (1 << 20))
    (ws / "bomb.zip").write_bytes(buf.getvalue())
    sb = create_sandbox(workspace=ws, policy=ExecutionPolicy(disk_max_bytes=1 << 20, deadline_seconds=120))
    try:
        r = sb.execute("!unzip bomb.zip\n_exit_code")
        assert r.success and r.outputs[-1].data["text/plain"] != "0", r.stdout
        assert "cannot create" in r.stdout, r.stdout
        assert sb.disk_usage()[0] <= 1 << 20
    finally:
        sb.close()


@pytest.mark.slow
def test_a_glob_over_a_hundred_thousand_names_is_an_error_not_a_full_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "many").mkdir(parents=True)
    for i in range(100_001):
        (ws / "many" / f"f{i}").touch()
    sb = create_sandbox(workspace=ws, policy=ExecutionPolicy(disk_max_files=None, deadline_seconds=300))
    try:
        r = sb.execute("!echo many/*\n_exit_code")
        assert r.stdout == "sh: 1: many/*: matches more than 100,000 names; narrow the pattern\r\n", r.stdout[:300]
        assert r.outputs[-1].data["text/plain"] == "2"
    finally:
        sb.close()


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[PythonSandbox, Path]]:
    ws = tmp_path_factory.mktemp("damaged")
    sb = create_sandbox(workspace=ws, policy=ExecutionPolicy(deadline_seconds=120))
    assert isinstance(sb, PythonSandbox)
    try:
        yield sb, ws
    finally:
        sb.close()


# What each damaged archive prints (Info-ZIP's and GNU's words for it) and its status.
DAMAGED = [
    ("unzip bad-crc.zip", "Archive:  bad-crc.zip\n extracting: a.txt                    bad CRC b135eef9  (should be "
                          "5db0f92e)\n extracting: b.txt                   \n", 2),
    ("unzip bad-data.zip", "Archive:  bad-data.zip\n  inflating: a.txt                   \n  error:  invalid "
                           "compressed data to inflate\n  inflating: b.txt                   \n", 2),
    ("unzip encrypted.zip", "Archive:  encrypted.zip\n   skipping: a.txt                   unable to get password\n"
                            " extracting: b.txt                   \n", 5),
    ("unzip unknown-method.zip", "Archive:  unknown-method.zip\n   skipping: a.txt                   unsupported "
                                 "compression method 99\n extracting: b.txt                   \n", 81),
    ("unzip truncated.zip", "unzip:  cannot find zipfile directory in truncated.zip: not a zip file, or one cut "
                            "short\n", 9),
    ("gunzip bad-crc.txt.gz", "\ngzip: bad-crc.txt.gz: invalid compressed data--crc error\n", 1),
    ("gunzip bad-block.txt.gz", "\ngzip: bad-block.txt.gz: invalid compressed data--format violated\n", 1),
    ("gunzip truncated.txt.gz", "\ngzip: truncated.txt.gz: unexpected end of file\n", 1),
    ("tar -xzf bad-crc.tgz", "tar: bad-crc.tgz: invalid compressed data--crc error\n", 2),
    ("tar -xzf bad-block.tgz", "tar: bad-block.tgz: invalid compressed data--format violated\n", 2),
    ("tar -xf truncated.tar", "tar: a.txt: Unexpected EOF in archive\n", 2),
    ("tar -tzf truncated.tgz", "a.txt\ntar: truncated.tgz: Unexpected EOF in archive\n", 2),
]


@pytest.mark.parametrize("line,said,status", DAMAGED, ids=[line for line, _, _ in DAMAGED])
def test_a_damaged_archive_is_one_line_and_a_status_never_a_traceback(
        damaged: tuple[PythonSandbox, Path], line: str, said: str, status: int) -> None:
    sb, ws = damaged
    case = ws / line.replace(" ", "_")
    case.mkdir()
    write_damaged_archives(case)
    r = sb.execute(f"print('before')\n!cd {case.name} && {line}\nprint('after', _exit_code)")
    assert r.success and r.error is None, r.error
    assert r.stdout.replace("\r\n", "\n") == f"before\n{said}after {status}\n"
