"""The guest's ways out of its filesystem, through a real kernel.

Each vector is an attempt a hostile cell makes on its own (paths, symlinks, hard
links, renames, descriptor tricks, /proc and /dev, the read-only mounts, the
notebook folder's overlay, process and network calls); every one must be refused.
The cell prints ESCAPED with what it got if an attempt succeeds, so a leak shows
up both there and in the harness's checks (the host's secret never shown nor
changed, the notebook's folder unchanged, the session intact).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from wasm_kernel.host.artifacts import runtime_tree

from support.security_harness import SECRET, Target


def attempt(code: str) -> str:
    """`code` (an expression or statements ending in `result = ...`) as a cell that
    prints `refused <error>` or `ESCAPED <result>`."""
    body = code if "result =" in code else f"result = {code}"
    lines = "\n".join("    " + line for line in body.splitlines())
    return f"import os\ntry:\n{lines}\n    print('ESCAPED', repr(result)[:200])\nexcept BaseException as err:\n    print('refused', type(err).__name__)"


def escapes(target: Target) -> dict[str, str]:
    """The attempts, with the host's real paths where an attacker would guess them."""
    secret, folder = str(target.secret), str(target.notebook_dir)
    return {
        "dotdot-from-app": "open('/app/../host-secret.txt').read()",
        "dotdot-deep": "open('/app/' + '../' * 30 + 'etc/passwd').read()",
        "dotdot-relative": "open('../' * 10 + 'etc/passwd').read()",
        "absolute-host-path": f"open({secret!r}).read()",
        "etc-passwd": "open('/etc/passwd').read()",
        "proc-environ": "open('/proc/self/environ').read()",
        "proc-maps": "open('/proc/self/maps').read()",
        "proc-fd": "os.listdir('/proc/self/fd')",
        "dev-zero": "open('/dev/zero', 'rb').read(10)",
        "dev-mem": "open('/dev/mem', 'rb').read(10)",
        "dev-tty": "open('/dev/tty', 'w')",
        "symlink-absolute": f"os.symlink({secret!r}, '/app/abs-link')\nresult = open('/app/abs-link').read()",
        "symlink-relative": "os.symlink('../host-secret.txt', '/app/rel-link')\nresult = open('/app/rel-link').read()",
        "symlink-deep-relative": "os.symlink('../' * 20 + 'etc/passwd', '/app/deep-link')\nresult = open('/app/deep-link').read()",
        "symlink-to-hidden-mount": "os.symlink('/.wasm-kernel-notebook/.env', '/app/env-link')\nresult = open('/app/env-link').read()",
        "symlink-loop": "os.symlink('loop-b', '/app/loop-a')\nos.symlink('loop-a', '/app/loop-b')\nresult = open('/app/loop-a').read()",
        "symlink-dir-then-walk": "os.symlink('..', '/app/up')\nresult = open('/app/up/host-secret.txt').read()",
        "hardlink-from-lib": "os.link('/usr/local/lib/python315.zip', '/app/os-link')\nresult = 'linked'",
        "hardlink-from-host": f"os.link({secret!r}, '/app/secret-link')\nresult = open('/app/secret-link').read()",
        "hardlink-from-notebook": "os.link('/app/data/scores.csv', '/app/scores-link')\nresult = open('/app/scores-link', 'a').write('x')",
        "rename-out": "open('/app/x', 'w').write('x')\nos.rename('/app/x', '/app/../x')\nresult = 'moved'",
        "rename-into-lib": "open('/app/y', 'w').write('y')\nos.rename('/app/y', '/usr/local/lib/python3.15/y')\nresult = 'moved'",
        "rename-notebook-file": "os.rename('/app/data/scores.csv', '/app/stolen.csv')\nresult = 'moved'",
        "rename-notebook-folder": "os.rename('/app/data', '/app/data2')\nresult = 'moved'",
        "delete-notebook-file": "os.remove('/app/data/scores.csv')\nresult = 'deleted'",
        "whiteout-marker-made": "open('/app/.wasm-kernel-wh.data', 'w')",
        "whiteout-marker-link": "os.symlink('.wasm-kernel-wh.data', '/app/wh-link')\nresult = 'linked'",
        "write-lib": "open('/usr/local/lib/python315.zip', 'a').write('# pwned')",
        "delete-lib": "os.remove('/usr/local/lib/python315.zip')\nresult = 'deleted'",
        "mkdir-in-lib": "os.mkdir('/usr/local/lib/python3.15/evil')\nresult = 'made'",
        "write-support-code": "open('/opt/wasm-kernel/_wasm_kernel_shell.py', 'a').write('# pwned')",
        "chmod-lib": "os.chmod('/usr/local/lib/python315.zip', 0o777)\nresult = 'chmod'",
        "utime-lib": "os.utime('/usr/local/lib/python315.zip', (0, 0))\nresult = 'touched'",
        "hidden-notebook-mount": "os.listdir('/.wasm-kernel-notebook')",
        "hidden-notebook-env": "open('/.wasm-kernel-notebook/.env').read()",
        "notebook-dotenv": "open('/app/.env').read()",
        "notebook-host-path": f"open({folder + '/.env'!r}).read()",
        "dirfd-dotdot": "fd = os.open('/app', os.O_RDONLY)\nresult = os.open('..', os.O_RDONLY, dir_fd=fd)",
        "dirfd-absolute": "fd = os.open('/app', os.O_RDONLY)\nresult = os.open('/etc/passwd', os.O_RDONLY, dir_fd=fd)",
        "preopen-fd-read": "os.read(3, 100)",
        "high-fd": "os.fstat(1000)",
        "chdir-up": "os.chdir('/app/..')\nresult = open('host-secret.txt').read()",
        "nul-in-path": "open('/app/a\\x00/../../etc/passwd')",
        "long-path": "open('/app/' + 'a' * 100_000)",
        "ctypes": "__import__('ctypes').CDLL(None)",
        "socket": "__import__('socket').create_connection(('127.0.0.1', 22), timeout=1)",
        "subprocess": "__import__('subprocess').run(['id'])",
        "os-system": "os.system('id')",
        "python-child": ("import subprocess, sys\nresult = subprocess.run([sys.executable, '-c', "
                         "'print(open(\"/etc/passwd\").read())'], check=True, capture_output=True)"),
        "thread": "import threading\nt = threading.Thread(target=print)\nt.start()\nresult = 'started'",
        "fork": "os.fork()",
        "shell-escape": "get_ipython().system('cat /etc/passwd')",
    }


# The attempts that must fail with an exception: the others may succeed harmlessly
# (a listing of the guest's own /proc, say) and are judged by the harness alone.
# WASI has no chmod: Python's is a no-op there. A notebook file renamed or deleted is
# hidden in the workspace (a whiteout), the notebook's folder unchanged. A `!cat` runs
# in the guest's confined shell, which sees only the guest's files (no /etc at all).
# /dev/zero is the guest's own device (runtime/guest_devices.py), never the host's:
# tests/security/test_guest_devices.py pins what it is; /dev/mem, not one of them, is refused.
# os.system runs its line in the confined shell too, which has no `id` (status 127). A
# python child is the same sandbox again: it fails to open what its parent cannot.
MAY_SUCCEED = {"dev-zero", "proc-fd", "chmod-lib", "rename-notebook-file", "delete-notebook-file", "shell-escape",
               "os-system"}
NAMES = [
    "dotdot-from-app", "dotdot-deep", "dotdot-relative", "absolute-host-path", "etc-passwd", "proc-environ",
    "proc-maps", "proc-fd", "dev-zero", "dev-mem", "dev-tty", "symlink-absolute", "symlink-relative", "symlink-deep-relative",
    "symlink-to-hidden-mount", "symlink-loop", "symlink-dir-then-walk", "hardlink-from-lib", "hardlink-from-host",
    "hardlink-from-notebook", "rename-out", "rename-into-lib", "rename-notebook-file", "rename-notebook-folder",
    "delete-notebook-file", "whiteout-marker-made", "whiteout-marker-link", "write-lib", "delete-lib", "mkdir-in-lib", "write-support-code", "chmod-lib", "utime-lib",
    "hidden-notebook-mount", "hidden-notebook-env", "notebook-dotenv", "notebook-host-path", "dirfd-dotdot",
    "dirfd-absolute", "preopen-fd-read", "high-fd", "chdir-up", "nul-in-path", "long-path", "ctypes", "socket",
    "subprocess", "os-system", "python-child", "thread", "fork", "shell-escape",
]


def _stamp(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_mode, st.st_size, st.st_mtime_ns


@pytest.mark.parametrize("name", NAMES)
def test_every_way_out_of_the_sandbox_is_refused(target: Target, name: str) -> None:
    code = escapes(target)[name]
    stdlib = runtime_tree().lib_dir / "python315.zip"
    before = _stamp(stdlib)
    run = target.run(attempt(code))
    assert _stamp(stdlib) == before, "the read-only standard library changed"
    out = run.stream()
    assert SECRET not in out and "root:x:0" not in out
    if name not in MAY_SUCCEED:
        assert "ESCAPED" not in out and "refused" in out, (name, target.shown_text(run))
    try:
        target.assert_safe(run)
    finally:
        target.run("import os\nfor n in os.listdir('/app'):\n    p = '/app/' + n\n"
                   "    if os.path.islink(p) or n in ('x', 'y', 'stolen.csv'):\n        os.remove(p)\nos.chdir('/app')")
        if name in ("rename-notebook-file", "delete-notebook-file"):
            target.run("%rm -r data")  # the workspace's part of data/, its whiteout with it


def test_the_notebook_folder_is_seen_but_never_changed(target: Target) -> None:
    run = target.run("import os\nprint(sorted(os.listdir('/app')), open('/app/data/scores.csv').read())\n"
                     "open('/app/data/scores.csv', 'a').write('eve,0\\n')\nprint(open('/app/data/scores.csv').read())")
    out = run.stream()
    assert "'data'" in out and ".env" not in out
    assert out.count("ada,3") == 2 and "eve,0" in out  # the write went to the workspace's copy
    assert (target.workspace() / "data" / "scores.csv").read_text().endswith("eve,0\n")
    target.assert_safe(run)  # ...and the notebook's folder is as it was
    target.run("%rm -r data")
