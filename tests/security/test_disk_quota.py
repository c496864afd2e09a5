"""Class 7: disk is a limit like fuel and memory.

A per-session quota on bytes and names over /app and the private /tmp, enforced at
every WASI call that grows the tree; past it the guest gets "No space left on
device" and the cell one line naming the quota. Each vector runs in a real kernel
with the quota lowered to 20 MB and 300 names, then checks the four invariants.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from support.security_harness import Target

pytestmark = pytest.mark.slow  # each vector fills the quota

QUOTA = "%limits disk=20MB files=300"
NOSPC = "No space left on device"


@pytest.fixture
def quota(target: Target) -> Iterator[Target]:
    assert target.run(QUOTA).status == "ok"
    yield target
    # Everything the vector made goes; the precious file stays, and `data` is the
    # notebook's folder, read-only under /app.
    clean = target.run("import os, shutil\nfor top in ('/app', '/tmp'):\n    for n in os.listdir(top):\n"
                       "        p = f'{top}/{n}'\n        if p in ('/app/precious.bin', '/app/data'):\n            continue\n"
                       "        shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)")
    assert clean.status == "ok", target.shown_text(clean)
    target.run("%limits disk=2GiB files=100000")


def assert_refused(target: Target, code: str) -> None:
    run = target.run(code + "\nafter = 'not reached'")
    assert run.status == "error", target.shown_text(run)
    assert run.reply["content"]["ename"] == "OSError" and NOSPC in run.reply["content"]["evalue"]
    [line] = [line for line in run.stream("stderr").splitlines() if "disk quota" in line]
    assert re.search(r"%limits (disk|files)=", line), line
    assert "after" not in str(target.run("%who").stream())
    target.assert_safe(run)


VECTORS = {
    "one-big-write": "open('big.bin', 'wb').write(b'x' * 30_000_000)",
    "many-small-writes": "with open('grow.bin', 'wb') as f:\n    for _ in range(3000):\n        f.write(b'x' * 10_000)",
    "truncate-sparse": "import os\nopen('s.bin', 'wb').close()\nos.truncate('s.bin', 10**12)",
    "ftruncate-sparse": "import os\nfd = os.open('s.bin', os.O_WRONLY | os.O_CREAT)\nos.ftruncate(fd, 10**10)",
    "seek-past-end": "with open('s.bin', 'wb') as f:\n    f.seek(10**11)\n    f.write(b'x')\n    f.flush()",
    "pwrite-far": "import os\nfd = os.open('p.bin', os.O_WRONLY | os.O_CREAT)\nos.pwrite(fd, b'x', 10**11)",
    "append-mode": "with open('a.log', 'ab') as f:\n    for _ in range(30):\n        f.write(b'y' * 1_000_000)\n        f.flush()",
    "os-write": "import os\nfd = os.open('w.bin', os.O_WRONLY | os.O_CREAT)\nfor _ in range(30):\n    os.write(fd, b'z' * 1_000_000)",
    "many-empty-files": "for i in range(1000):\n    open(f'e{i}', 'w').close()",
    "many-folders": "import os\nfor i in range(1000):\n    os.mkdir(f'd{i}')",
    "deep-folders": "import os\np = '/app'\nfor i in range(1000):\n    p += '/d'\n    os.mkdir(p)",
    "many-symlinks": "import os\nfor i in range(1000):\n    os.symlink('precious.bin', f'l{i}')",
    "many-hardlinks": "import os\nopen('h', 'w').close()\nfor i in range(1000):\n    os.link('h', f'h{i}')",
    "private-tmp": "open('/tmp/big.bin', 'wb').write(b'x' * 30_000_000)",
    "tmp-and-app-together": "open('/tmp/a.bin', 'wb').write(b'x' * 12_000_000)\nopen('/app/b.bin', 'wb').write(b'x' * 12_000_000)",
    "shutil-copy": "open('src.bin', 'wb').write(b'x' * 8_000_000)\nimport shutil\nfor i in range(5):\n    shutil.copy('src.bin', f'c{i}.bin')",
    "numpy-save": "import numpy as np\nnp.save('arr.npy', np.zeros(5_000_000))",
    "pandas-to-csv": "import pandas as pd\npd.DataFrame({'x': range(3_000_000)}).to_csv('big.csv')",
    # The quota follows a descriptor's writes without asking the host when it knows
    # where they land: a seek forward, a truncation behind the writer or a rewind
    # must each bring the exact count back.
    "seek-forward-after-writes": "with open('s.bin', 'wb') as f:\n    f.write(b'x' * 100)\n    f.flush()\n"
                                 "    f.seek(10**11)\n    f.write(b'x')\n    f.flush()",
    "truncated-behind-a-writer": "a = open('t.bin', 'wb')\na.write(b'x' * 15_000_000)\na.flush()\n"
                                 "open('t.bin', 'wb').close()\na.write(b'x' * 10_000_000)\na.flush()",
    "os-truncate-behind-a-writer": "import os\na = open('t.bin', 'wb')\na.write(b'x' * 15_000_000)\na.flush()\n"
                                   "os.truncate('t.bin', 0)\na.write(b'x' * 10_000_000)\na.flush()",
    "rewind-then-extend": "f = open('r.bin', 'wb')\nf.write(b'x' * 15_000_000)\nf.flush()\nf.seek(0)\n"
                          "f.write(b'y' * 22_000_000)\nf.flush()",
    "copy-up-of-notebook-file": "%limits disk=1B\nopen('data/scores.csv', 'a').write('more\\n')",
}


@pytest.mark.parametrize("code", VECTORS.values(), ids=VECTORS.keys())
def test_every_way_to_grow_the_tree_stops_at_the_quota(quota: Target, code: str) -> None:
    assert_refused(quota, code)


def test_deleting_frees_what_the_quota_counts(quota: Target) -> None:
    assert_refused(quota, "open('a.bin', 'wb').write(b'x' * 15_000_000)\nopen('b.bin', 'wb').write(b'x' * 15_000_000)")
    ok = quota.run("import os\nos.remove('a.bin')\nos.remove('b.bin')\nopen('c.bin', 'wb').write(b'x' * 15_000_000)")
    assert ok.status == "ok", quota.shown_text(ok)
    # Replacing a file by rename frees the one it replaces; truncating frees too.
    ok = quota.run("open('d.bin', 'wb').write(b'x' * 4_000_000)\nimport os\nos.replace('d.bin', 'c.bin')\n"
                   "open('e.bin', 'wb').write(b'x' * 10_000_000)\nopen('e.bin', 'wb').close()\n"
                   "open('f.bin', 'wb').write(b'x' * 12_000_000)")
    assert ok.status == "ok", quota.shown_text(ok)
    quota.assert_safe(ok)


def test_the_count_survives_a_restart_of_the_kernel(quota: Target) -> None:
    assert quota.run("open('kept.bin', 'wb').write(b'x' * 15_000_000)").status == "ok"
    quota.kernel.restart()
    quota.run(QUOTA)
    shown = quota.run("%limits").displays()[0]["data"]["text/plain"]
    assert re.search(r"disk\s+19\.1 MiB \(14\.\d MiB used\)", shown), shown
    assert_refused(quota, "open('more.bin', 'wb').write(b'x' * 10_000_000)")


def test_a_quota_lowered_below_the_usage_refuses_growth_but_not_deletion(quota: Target) -> None:
    assert quota.run("open('a.bin', 'wb').write(b'x' * 10_000_000)").status == "ok"
    assert quota.run("%limits disk=5MB").status == "ok"
    assert_refused(quota, "with open('b.bin', 'wb') as f:\n    f.write(b'x')")
    ok = quota.run("import os\nos.remove('a.bin')\nopen('b.bin', 'wb').write(b'x' * 1000)")
    assert ok.status == "ok", quota.shown_text(ok)


def test_writefile_obeys_the_quota_with_one_line(quota: Target) -> None:
    body = "x" * 1000
    assert quota.run("open('a.bin', 'wb').write(b'x' * 19_999_000)").status == "ok"
    run = quota.run(f"%%writefile notes.txt\n{body}")
    assert run.status == "error" and run.reply["content"]["ename"] == "UsageError"
    assert "disk quota" in run.reply["content"]["evalue"]
    assert not (quota.workspace() / "notes.txt").exists()
    quota.assert_safe(run)


def test_the_quota_cannot_be_raised_past_the_operators_value(target: Target) -> None:
    for line in ("%limits disk=3GiB", "%limits files=200000", "%limits disk=none", "%config WasmKernel.disk_max_bytes = None"):
        run = target.run(line)
        assert run.status == "error" and " accepts " in run.reply["content"]["evalue"], line
    target.assert_safe()
