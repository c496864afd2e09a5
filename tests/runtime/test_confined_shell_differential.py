"""Each command and option of the confined shell (`!cmd` in the guest) against GNU
coreutils, grep, diffutils, tar, gzip and Info-ZIP unzip, on the same files in the
same run (differential): the same output, exit status and resulting files.

GNU runs under bash (IPython runs `!` lines with the user's $SHELL) in the C.UTF-8
locale; `ls` on a terminal is compared through a real pseudo-terminal."""

from __future__ import annotations

import gzip
import os
import pty
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from support.damaged_archives import write_damaged_archives
from wasm_kernel.runtime.guest_config import GUEST_LIB_DIR

# The confined shell is guest code, and plain Python: here it runs natively, beside
# the real programs, on two copies of the same files.
sys.path.insert(0, str(GUEST_LIB_DIR))
from _wasm_kernel_sh import run_line  # noqa: E402

ENV = {"LC_ALL": "C.UTF-8", "TZ": "UTC", "PATH": "/usr/bin:/bin", "COLUMNS": "80"}

# The real programs to compare with (.ci/run installs what a minimal Debian lacks).
for _program in ("bash", "unzip", "tar", "gzip", "diff", "grep"):
    if shutil.which(_program, path=ENV["PATH"]) is None:
        pytest.fail(f"{_program} is not installed: the shell's commands are compared with the real programs "
                    "(apt-get install unzip diffutils)", pytrace=False)


def make_tree(root: Path) -> None:
    (root / "data").mkdir()
    (root / "data" / "ex1.csv").write_text("a,b,c,d,message\n1,2,3,4,hello\n5,6,7,8,world\n9,10,11,12,foo\n")
    (root / "data" / "ex2.csv").write_text("1,2,3,4,hello\n5,6,7,8,world\n")
    (root / "data" / "notes.txt").write_text("Alpha beta\nbeta gamma\n\n\nGamma delta epsilon\nalpha\n")
    (root / "data" / "nums.txt").write_text("10\n9\n100\n-3\n2.5\nabc\n9\n")
    (root / "data" / "words.txt").write_text("pear\napple\napple\nbanana\nApple\npear\npear\n")
    (root / "data" / "noeol.txt").write_text("one\ntwo")
    (root / "data" / "sub").mkdir()
    (root / "data" / "sub" / "deep.txt").write_text("deep hello\n" * 300)
    (root / "data" / ".hidden").write_text("secret\n")
    (root / "big.txt").write_text("".join(f"line {i} of the big file\n" for i in range(1, 2001)))
    (root / "with space.txt").write_text("spaced\n")
    with zipfile.ZipFile(root / "data.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("zipped/a.csv", (2024, 1, 2, 3, 4, 6)), "x,y\n" * 200, zipfile.ZIP_DEFLATED)
        z.writestr(zipfile.ZipInfo("zipped/b.txt", (2024, 1, 2, 3, 4, 6)), "b\n")
    with gzip.open(root / "g.txt.gz", "wb") as f:
        f.write(b"gzipped text\n")
    for p in root.rglob("*"):
        os.utime(p, (1_700_000_000, 1_700_000_000))


def gnu(line: str, cwd: Path, tty: bool = False) -> tuple[str, int]:
    env = dict(ENV, HOME=str(cwd))
    if not tty:
        p = subprocess.run(["bash", "-c", line], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        return p.stdout.decode(), p.returncode
    main, child = pty.openpty()
    p = subprocess.Popen(["bash", "-c", line], cwd=cwd, env=env, stdin=child, stdout=child, stderr=child)
    os.close(child)
    out = b""
    while True:
        try:
            data = os.read(main, 65536)
        except OSError:
            break
        if not data:
            break
        out += data
    os.close(main)
    return out.decode().replace("\r\n", "\n"), p.wait()


def ours(line: str, cwd: Path, tty: bool = False) -> tuple[str, int]:
    out: list[str] = []
    env = dict(ENV, HOME=str(cwd))
    if tty:
        env["_WASM_KERNEL_TTY"] = "1"
    status = run_line(line, out.append, env=env, cwd=str(cwd))
    return "".join(out), status


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("tree")
    make_tree(root)
    return root


def normalize(text: str) -> str:
    return text.replace(" root root ", " sandbox sandbox ")


READ_ONLY = [
    "cat data/ex1.csv", "cat data/ex1.csv data/ex2.csv", "cat -n data/notes.txt", "cat -b data/notes.txt",
    "cat -E data/noeol.txt", "cat -s data/notes.txt", "cat nofile", "cat data", "cat 'with space.txt'",
    "cat data/ex1.csv | cat - data/ex2.csv", "cat < data/ex2.csv",
    "head big.txt", "head -n 3 big.txt", "head -3 big.txt", "head -n -1995 big.txt", "head -c 20 big.txt",
    "head -n 2 data/ex1.csv data/ex2.csv", "head -q -n 1 data/ex1.csv data/ex2.csv", "head nofile",
    "tail big.txt", "tail -n 2 big.txt", "tail -n +1999 big.txt", "tail -2 big.txt", "tail -c 10 big.txt",
    "tail -n 1 data/ex1.csv data/ex2.csv", "tail data/noeol.txt", "tail nofile",
    "ls", "ls data", "ls -a data", "ls -A data", "ls -l data", "ls -la data", "ls -lh data", "ls -R data", "ls -1",
    "ls data/*.csv", "ls -d data", "ls nofile", "ls data nofile", "ls -r data", "ls -S data", "ls -t data",
    "ls -F data", "ls data big.txt",
    "wc data/ex1.csv", "wc -l data/ex1.csv", "wc -w data/notes.txt", "wc -c big.txt", "wc -l data/*.csv",
    "cat big.txt | wc -l", "cat big.txt | wc", "wc -l nofile", "wc -lw data/notes.txt data/ex1.csv",
    "grep hello data/ex1.csv", "grep -i alpha data/notes.txt", "grep -n a data/notes.txt", "grep -c pear data/words.txt",
    "grep -v a data/notes.txt", "grep -r hello data", "grep -rn world data", "grep -l hello data/*.csv",
    "grep -w beta data/notes.txt", "grep -x alpha data/notes.txt", "grep -o 'ap*le' data/words.txt",
    "grep -E 'pear|banana' data/words.txt", "grep 'pear\\|banana' data/words.txt", "grep -F 'a.b' data/notes.txt",
    "grep zzz data/notes.txt", "grep x nofile", "grep '^[0-9]' data/nums.txt", "grep -c '' big.txt",
    "grep -e alpha -e gamma data/notes.txt", "grep hello", "grep -q hello data/ex1.csv",
    "grep -h hello data/ex1.csv data/ex2.csv", "grep -i 'ALPHA\\|delta' data/notes.txt",
    "sort data/words.txt", "sort -r data/words.txt", "sort -u data/words.txt", "sort -n data/nums.txt",
    "sort -rn data/nums.txt", "sort -f data/words.txt", "sort -t, -k2 -n data/ex1.csv", "sort -t, -k5,5 data/ex1.csv",
    "sort data/words.txt | uniq", "sort data/words.txt | uniq -c", "sort data/words.txt | uniq -d",
    "sort data/words.txt | uniq -u", "uniq -i data/words.txt", "sort nofile",
    "cut -d, -f2 data/ex1.csv", "cut -d, -f1,3 data/ex1.csv", "cut -d, -f2-4 data/ex1.csv", "cut -d, -f3- data/ex1.csv",
    "cut -c1-4 big.txt | head -n 3", "cut -f1 data/ex1.csv", "cut -d, -s -f2 data/notes.txt",
    "find data -name '*.csv'", "find data -type d", "find data -type f -name '*.txt'", "find data -maxdepth 1",
    "find . -name 'ex*'", "find nofile", "find data -iname 'EX1*'",
    "du -sh data", "du -s data", "du data", "du -h data", "du -a data", "du -sh nofile",
    "diff data/ex1.csv data/ex2.csv", "diff data/ex2.csv data/ex2.csv", "diff -q data/ex1.csv data/ex2.csv",
    "diff data/noeol.txt data/ex2.csv", "diff data/ex1.csv nofile",
    "echo hello world", "echo -n no newline", "echo 'a\\tb'", "echo -e 'a\\tb\\nc'", "echo -ne 'x\\c' y", "echo \"$HOME\" | wc -c", "echo '$HOME'",
    "echo a; echo b", "false || echo fallback", "true && echo yes", "cat nofile && echo never",
    "cat nofile; echo status $?", "echo x | grep y; echo $?", "! false && echo negated",
    "X=5; echo $X ${X}x", "echo *.txt", "echo data/*.csv", "echo 'data/*.csv'", "echo nomatch*",
    "echo $(cat data/ex2.csv | wc -l) lines", "echo `echo backquoted`", "cat data/ex1.csv 2>/dev/null | head -n 1",
    "cat nofile 2>/dev/null; echo $?", "cat nofile 2>&1 | wc -l", "ls data nofile 2>/dev/null",
    "pwd | wc -l", "cd data && ls", "cd data; cat ex2.csv", "echo ~ | wc -c",
    "head -n 1 big.txt | cut -d' ' -f2", "cat big.txt | head -n 2 | tail -n 1",
    "unzip -l data.zip", "sort -t, -k2,2n data/ex1.csv", "sort -t, -k2,2nr data/ex1.csv", "sort -k1,1r data/words.txt",
    "ls -lR data", "ls -lhS data", "wc -m data/notes.txt", "du -c data/sub data/ex1.csv", "grep -in 'ALPHA' data/notes.txt",
    "grep -ic beta data/notes.txt", "grep -rl hello data", "grep -L hello data/ex1.csv data/notes.txt", "grep -n '' data/noeol.txt",
    "cut -c2 data/words.txt", "cut -d, -f1 --complement data/ex1.csv", "head -c 5 data/noeol.txt", "tail -c 3 data/noeol.txt",
    "tail -n 0 big.txt", "head -n 0 big.txt", "sort -u -f data/words.txt", "uniq -c data/words.txt",
    "echo \"a  b\"   c", "X='1 2'; echo $X; echo \"$X\"", "echo $NOPE | wc -c", "echo a\\ b", "echo 'it''s'",
    "echo \"$(ls data | head -n 2)\"", "ls data/e*.csv data/n*", "ls 'data/ex1.csv'", "cat data/ex*.csv | wc -l",
    "echo done # a comment", "ls -a | head -n 3", "find data -name '*.csv' | sort | head -n 1", "cat data/ex1.csv | grep -c ,",
    "diff -u data/ex1.csv data/ex2.csv | tail -n +3", "du -s data | cut -f1", "ls data | wc -l", "true; echo $?",
    "which nothing; echo $?",
]


@pytest.mark.parametrize("line", READ_ONLY)
def test_each_command_prints_what_gnu_prints(tree: Path, line: str) -> None:
    expected = gnu(line, tree)
    got = ours(line, tree)
    if line.startswith(("find", "grep -r", "du -a")):
        # GNU lists a folder in the order the disk keeps it; ours is sorted.
        expected = ("".join(sorted(expected[0].splitlines(True))), expected[1])
        got = ("".join(sorted(got[0].splitlines(True))), got[1])
    assert (normalize(got[0]), got[1]) == (normalize(expected[0]), expected[1])


@pytest.mark.parametrize("line", ["ls", "ls data", "ls -a data", "ls data/*.csv", "ls -R data", "ls -1 data",
                                  "ls -l", "ls -la data", "ls -F data"])
def test_ls_on_the_notebooks_output_prints_columns_as_on_a_terminal(tree: Path, line: str) -> None:
    got, expected = ours(line, tree, tty=True), gnu(line, tree, tty=True)
    assert (normalize(got[0]), got[1]) == (normalize(expected[0]), expected[1])


def snapshot(root: Path) -> dict[str, object]:
    """Every file and folder under root, with the contents of the files (of an
    archive: its members, since two compressors write different bytes)."""
    import tarfile

    out: dict[str, object] = {}
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if p.is_dir():
            out[rel] = "<dir>"
        elif p.name.endswith((".tgz", ".tar")):
            with tarfile.open(p) as t:
                out[rel] = sorted((m.name, m.isdir(), t.extractfile(m).read() if m.isfile() else b"") for m in t)
        elif p.name.endswith(".gz"):
            out[rel] = gzip.decompress(p.read_bytes())
        else:
            out[rel] = p.read_bytes().decode("latin-1")
    return out


WRITES = [
    "mkdir out", "mkdir -p out/a/b", "mkdir data", "mkdir -p data/sub", "mkdir x/y", "mkdir -v out",
    "touch new.txt", "touch data/ex1.csv", "touch -c nothere",
    "rm big.txt", "rm nofile", "rm -f nofile", "rm data", "rm -r data", "rm -rf data/sub", "rm -rf data/..",
    "rm -rf .", "rm -v big.txt", "rm -d data/sub", "rm 'with space.txt'", "rm data/*.csv",
    "cp big.txt copy.txt", "cp big.txt data", "cp data/ex1.csv data/ex2.csv /tmp/nowhere/", "cp data out",
    "cp -r data out", "cp -r data/sub data/sub/inner", "cp nofile x", "cp -v big.txt c.txt", "cp big.txt",
    "mv big.txt moved.txt", "mv big.txt data", "mv data/sub sub2", "mv nofile x", "mv -v big.txt m.txt",
    "echo hi > out.txt", "echo hi >> data/ex2.csv", "cat data/ex1.csv data/ex2.csv > both.csv",
    "sort data/words.txt | uniq > u.txt", "cat nofile > err.txt 2>&1", "cat nofile 2> err.txt",
    "ls data > listing.txt", "echo a > x; echo b >> x; cat x", "head -n 3 big.txt > h.txt && wc -l h.txt",
    "cat data/ex2.csv > data/ex2.csv; wc -c data/ex2.csv", "sort -o sorted.txt data/words.txt",
    "unzip data.zip", "unzip -q data.zip", "unzip -d into data.zip", "unzip nofile.zip", "unzip -o data.zip",
    "unzip data.zip && unzip data.zip", "unzip -n data.zip && unzip -n data.zip",
    "tar -czf t.tgz data && tar -tzf t.tgz", "tar -czf t.tgz data && rm -r data && tar -xzf t.tgz && ls data",
    "tar -cf t.tar data/sub && tar -xvf t.tar -C /dev/null", "tar -xzf nofile.tgz", "tar czf t.tgz big.txt && tar tzf t.tgz",
    "gunzip g.txt.gz && cat g.txt", "gunzip -k g.txt.gz", "gunzip nofile.gz", "gzip big.txt && ls",
    "gzip -k big.txt && gunzip big.txt.gz", "gunzip -c g.txt.gz", "gzip -d g.txt.gz",
]


@pytest.mark.parametrize("line", WRITES)
def test_each_write_leaves_what_gnu_leaves(tmp_path: Path, line: str) -> None:
    (tmp_path / "gnu").mkdir()
    (tmp_path / "ours").mkdir()
    make_tree(tmp_path / "gnu")
    make_tree(tmp_path / "ours")
    expected = gnu(line, tmp_path / "gnu")
    got = ours(line, tmp_path / "ours")
    if " -t" in line or "tar -c" in line or "tar c" in line or "tar t" in line:
        # GNU tar archives a folder in the order the disk keeps it; ours is sorted.
        expected = ("".join(sorted(expected[0].splitlines(True))), expected[1])
        got = ("".join(sorted(got[0].splitlines(True))), got[1])
    assert (normalize(got[0]).replace("/ours", "/X"), got[1]) == (normalize(expected[0]).replace("/gnu", "/X"),
                                                                  expected[1])
    if line in INODE_ORDERED:
        # GNU copies a folder's entries in inode order (fts sorts them so, for speed):
        # whether it copies them before it meets the new folder inside depends on the
        # inode that folder got, which another process's deletions change. Ours goes
        # in name order: it leaves all GNU leaves, and at most the entries GNU skipped.
        ours_left, gnu_left = snapshot(tmp_path / "ours"), snapshot(tmp_path / "gnu")
        assert {k: ours_left.get(k) for k in gnu_left} == gnu_left
        return
    assert snapshot(tmp_path / "ours") == snapshot(tmp_path / "gnu")


INODE_ORDERED = {"cp -r data/sub data/sub/inner"}


DAMAGED = [
    "unzip bad-crc.zip", "unzip -q bad-crc.zip", "unzip bad-data.zip", "unzip -q bad-data.zip",
    "unzip encrypted.zip", "unzip -q encrypted.zip", "unzip unknown-method.zip", "unzip -q unknown-method.zip",
    "unzip -d out bad-crc.zip", "unzip truncated.zip; echo $?",
    "gunzip bad-crc.txt.gz", "gunzip truncated.txt.gz", "gunzip bad-length.txt.gz", "gunzip bad-block.txt.gz",
    "gunzip -c truncated.txt.gz", "gunzip -c bad-crc.txt.gz | wc -l", "gunzip -k bad-block.txt.gz",
]


@pytest.mark.parametrize("line", DAMAGED)
def test_a_damaged_archive_gets_what_gnu_prints_and_leaves(tmp_path: Path, line: str) -> None:
    """Bad CRCs, an encrypted member, an unknown method, data corrupt or cut short:
    the real tool's lines and status (unzip's truncated archive: its status, in one
    line of ours, not its six), and the same files left."""
    for side in ("gnu", "ours"):
        (tmp_path / side).mkdir()
        write_damaged_archives(tmp_path / side)
    expected = gnu(line, tmp_path / "gnu")
    got = ours(line, tmp_path / "ours")
    if line.startswith("unzip truncated"):
        assert got == ("unzip:  cannot find zipfile directory in truncated.zip: not a zip file, or one cut short\n9\n",
                       0)
        assert expected[0].endswith("period.\n9\n")
    else:
        assert got == expected
    left = {side: {p.name: p.read_bytes() for p in (tmp_path / side).rglob("*") if p.is_file()}
            for side in ("gnu", "ours")}
    if "bad-data" in line:  # how much of a member that fails to inflate gets written is the inflater's
        assert left["ours"].keys() == left["gnu"].keys()
    else:
        assert left["ours"] == left["gnu"]
