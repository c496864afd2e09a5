"""The guest cannot reach host files: every way out of its preopens is refused.

Every test puts a secret on the host OUTSIDE the workspace (a file next to it and a
sibling folder, each holding a unique token), runs real escape attempts in the real
guest, and checks three things: each attempt raised OSError in the guest, the token
never shows up in anything the cell produced, and the host files are byte-for-byte
and stamp-for-stamp unchanged. A positive control proves the same calls work inside
the workspace, so these tests cannot pass just because file access is broken.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from wasm_kernel import PythonSandbox, SandboxResult
from wasm_kernel.host.artifacts import guest_artifacts, runtime_tree
from wasm_kernel.runtime.guest_site_build import guest_site
from wasm_kernel.runtime.guest_scratch import scratch_parent
from wasm_kernel.runtime.guest_config import GUEST_LIB_DIR

from support.sandboxes import make_sandbox

# Defined in the guest before every batch of attempts. An attempt's value is
# "error:<OSError subclass>" or "ok:<repr of what the call returned>", so a
# successful read carries the secret into stdout, where the leak check sees it.
PRELUDE = """
import json, os, shutil
def _try(fn):
    try:
        value = fn()
    except OSError as err:
        return "error:" + type(err).__name__
    return "ok:" + repr(value)
"""


@dataclass
class Host:
    root: Path  # tmp_path: holds the workspace and the secrets beside it
    workspace: Path
    secret: Path  # root/secret.txt
    sibling: Path  # root/sibling/, holds inside.txt
    token: str

    @property
    def inside(self) -> Path:
        return self.sibling / "inside.txt"


@pytest.fixture
def host(tmp_path: Path, workspace: Path) -> Host:
    token = f"HOST-SECRET-{uuid.uuid4().hex}"
    secret = tmp_path / "secret.txt"
    secret.write_text(token)
    sibling = tmp_path / "sibling"
    sibling.mkdir()
    (sibling / "inside.txt").write_text(token)
    return Host(tmp_path, workspace, secret, sibling, token)


def attempt(sb: PythonSandbox, attempts: dict[str, str], setup: str = "") -> tuple[SandboxResult, dict[str, str]]:
    """Run each expression in the guest; return the cell result and label -> outcome."""
    body = ",\n".join(f"    {label!r}: _try(lambda: {expr})" for label, expr in attempts.items())
    code = f"{PRELUDE}\n{setup}\nprint(json.dumps({{\n{body}\n}}))"
    result = sb.execute(code)
    assert result.success, (result.error, result.stderr)
    return result, json.loads(result.stdout.splitlines()[-1])


def assert_refused(outcomes: dict[str, str], *labels: str) -> None:
    checked = labels or tuple(outcomes)
    allowed = {label: outcomes[label] for label in checked if not outcomes[label].startswith("error:")}
    assert not allowed, f"escape attempts that were NOT refused: {allowed}"


def assert_no_leak(result: SandboxResult, *secrets: str) -> None:
    blobs = {
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": repr(result.error),
        "outputs": json.dumps([o.to_dict() for o in result.outputs], default=str),
    }
    for secret in secrets:
        for name, blob in blobs.items():
            assert secret not in blob, f"{secret!r} leaked into the cell's {name}"


def tree_state(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[object, ...]]:
    """Every entry under root (not following symlinks): lstat identity and file bytes."""
    state: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if Path(dirpath, d) not in skip]
        for name in [*dirnames, *filenames, ""]:
            path = Path(dirpath, name)
            st = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            link = os.readlink(path) if path.is_symlink() else None
            rel = str(path.relative_to(root))
            state[rel] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_nlink, content, link)
    return state


def outside_state(host: Host) -> dict[str, tuple[object, ...]]:
    return tree_state(host.root, skip=(host.workspace,))


@contextmanager
def host_untouched(host: Host) -> Iterator[None]:
    before = outside_state(host)
    yield
    assert outside_state(host) == before, "host files outside the workspace changed"
    assert host.secret.read_text() == host.token


def _runtime_state() -> dict[str, object]:
    tree = runtime_tree()
    return {
        "lib": tree_state(tree.lib_dir),
        "mpl": tree_state(tree.mpl_data_dir),
        "support": tree_state(GUEST_LIB_DIR, skip=(GUEST_LIB_DIR / "__pycache__",)),
        "site": tree_state(guest_site().path),
    }


@contextmanager
def runtime_guard() -> Iterator[None]:
    """Safety net for the shared read-only mounts (the compile cache's runtime tree and
    this package's guest library): if a regression ever lets the guest write them,
    undo it before the test fails, so one broken run cannot poison later ones."""
    tree = runtime_tree()
    roots = [tree.lib_dir, tree.mpl_data_dir, GUEST_LIB_DIR, guest_site().path]

    def entries() -> set[Path]:
        found = set()
        for root in roots:
            for dirpath, dirnames, filenames in os.walk(root):
                dirnames[:] = [d for d in dirnames if d != "__pycache__"]
                found.update(Path(dirpath, n) for n in dirnames + filenames)
        return found

    before = entries()
    small = {p: p.read_bytes() for p in before if p.is_file() and not p.is_symlink() and p.stat().st_size < 1 << 20}
    try:
        yield
    finally:
        for path in sorted(entries() - before, key=lambda p: len(p.parts), reverse=True):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
        for path, data in small.items():
            if not path.is_file() or path.read_bytes() != data:
                path.write_bytes(data)


# --- positive control ---------------------------------------------------------------


def test_workspace_is_fully_usable_from_the_guest_so_refusals_are_meaningful(host: Host, sandbox: PythonSandbox) -> None:
    (host.workspace / "from_host.txt").write_text("written by host")
    result, out = attempt(
        sandbox,
        {
            "write": "open('x.txt', 'w').write('guest data')",
            "read": "open('/app/x.txt').read()",
            "read_host_file": "open('from_host.txt').read()",
            "append": "open('x.txt', 'a').write('+')",
            "makedirs": "os.makedirs('sub/dir', exist_ok=True)",
            "dotdot_inside": "open('sub/dir/../../x.txt').read()",
            "rename": "os.rename('x.txt', 'sub/dir/y.txt')",
            "symlink_inside": "os.symlink('dir/y.txt', 'sub/lnk')",
            "read_link_inside": "open('sub/lnk').read()",
            "hardlink_inside": "os.link('sub/dir/y.txt', 'hard.txt')",
            "tmp_roundtrip": "(open('/tmp/t.txt', 'w').write('t'), open('/tmp/t.txt').read())",
            "listdir": "sorted(os.listdir('.'))",
            "stat": "os.stat('hard.txt').st_size",
        },
    )
    assert not [k for k, v in out.items() if not v.startswith("ok:")], out
    assert out["read"] == "ok:'guest data'"
    assert out["read_host_file"] == "ok:'written by host'"
    assert out["read_link_inside"] == "ok:'guest data+'"
    assert out["listdir"] == "ok:['from_host.txt', 'hard.txt', 'sub']"
    assert (host.workspace / "sub/dir/y.txt").read_text() == "guest data+"
    assert os.readlink(host.workspace / "sub/lnk") == "dir/y.txt"
    assert (host.workspace / "hard.txt").stat().st_ino == (host.workspace / "sub/dir/y.txt").stat().st_ino
    assert result.files_created == ["hard.txt", "sub/dir/y.txt", "sub/lnk"]


# --- `..` traversal -------------------------------------------------------------------


def test_dotdot_traversal_from_app_cannot_read_stat_or_list_host_files(host: Host, sandbox: PythonSandbox) -> None:
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "open ../secret": "open('../secret.txt').read()",
                "open /app/../secret": "open('/app/../secret.txt').read()",
                "open /app/./../secret": "open('/app/./../secret.txt').read()",
                "open //app//..//secret": "open('//app//..//secret.txt').read()",
                "open via subdir": "open('sub/../../secret.txt').read()",
                "open sibling file": "open('../sibling/inside.txt').read()",
                "binary os.open": "os.read(os.open('../secret.txt', os.O_RDONLY), 100)",
                "os.open dir_fd": "os.open('../secret.txt', os.O_RDONLY, dir_fd=os.open('.', os.O_RDONLY))",
                "deep passwd": "open('../../../../etc/passwd').read()",
                "very deep passwd": "open('/app/' + '../' * 40 + 'etc/passwd').read()",
                "back into own workspace": "open('../workspace/sub/f.txt').read()",
                "from /tmp into /app": "open('/tmp/../app/sub/f.txt').read()",
                "stat ../secret": "os.stat('../secret.txt').st_size",
                "listdir ..": "os.listdir('..')",
                "listdir /app/..": "os.listdir('/app/..')",
                "listdir ../sibling": "os.listdir('../sibling')",
                "scandir ..": "[e.name for e in os.scandir('..')]",
                "listdir /tmp/..": "os.listdir('/tmp/..')",
                "chdir ..": "(os.chdir('..'), os.listdir('.'))",
            },
            setup="os.makedirs('sub', exist_ok=True); open('sub/f.txt', 'w').write('mine')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
        # The refused chdir left the guest where it was.
        assert sandbox.execute("print(os.getcwd(), os.path.exists('../secret.txt'))").stdout == "/app False\n"


def test_dotdot_traversal_cannot_write_delete_or_rename_host_files(host: Host, sandbox: PythonSandbox) -> None:
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "overwrite": "open('../secret.txt', 'w').write('pwned')",
                "append": "open('../secret.txt', 'a').write('pwned')",
                "r+": "open('../secret.txt', 'r+').write('pwned')",
                "truncate": "os.truncate('../secret.txt', 0)",
                "utime": "os.utime('../secret.txt', (0, 0))",
                "create beside": "open('../new.txt', 'x').write('pwned')",
                "create in sibling": "open('../sibling/new.txt', 'w').write('pwned')",
                "remove": "os.remove('../secret.txt')",
                "remove sibling file": "os.unlink('../sibling/inside.txt')",
                "rmdir sibling": "os.rmdir('../sibling')",
                "rmtree sibling": "shutil.rmtree('../sibling')",
                "mkdir beside": "os.mkdir('../newdir')",
                "rename secret in": "os.rename('../secret.txt', 'stolen.txt')",
                "rename over secret": "os.rename('mine.txt', '../secret.txt')",
                "replace over secret": "os.replace('mine.txt', '../secret.txt')",
                "symlink beside": "os.symlink('x', '../planted')",
            },
            setup="open('mine.txt', 'w').write('mine')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert sorted(p.name for p in host.workspace.iterdir()) == ["mine.txt"]


# --- absolute host paths --------------------------------------------------------------


def test_absolute_host_paths_do_not_exist_in_the_guest(host: Host, sandbox: PythonSandbox) -> None:
    (host.workspace / "own.txt").write_text("own")
    paths = {
        "secret": str(host.secret),
        "sibling file": str(host.inside),
        "workspace file": str(host.workspace / "own.txt"),
        "etc passwd": "/etc/passwd",
        "proc environ": "/proc/self/environ",
        "proc cmdline": "/proc/self/cmdline",
        "home": str(Path.home() / ".bashrc"),
        "guest lib on host": str(GUEST_LIB_DIR / "_wasm_kernel_guest.py"),
        "stdlib zip on host": str(runtime_tree().lib_dir / guest_artifacts().zip_name),
    }
    dirs = {
        "root": "/root",
        "host workspace": str(host.workspace),
        "host sibling": str(host.sibling),
        "host tmp_path": str(host.root),
        "etc": "/etc",
        "proc": "/proc",
        "dev shm": "/dev/shm",
        "home dir": str(Path.home()),
    }
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                **{f"read {k}": f"open({v!r}, 'rb').read()" for k, v in paths.items()},
                **{f"stat {k}": f"os.stat({v!r}).st_size" for k, v in paths.items()},
                **{f"list {k}": f"os.listdir({v!r})" for k, v in dirs.items()},
                "write secret path": f"open({str(host.secret)!r}, 'w').write('pwned')",
                "dev tty": "open('/dev/tty', 'rb').read()",
                "dev sda": "open('/dev/sda', 'rb').read(1)",
                "dev fd": "os.listdir('/dev/fd')",
            },
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
        # The guest's /dev is its own six devices (runtime/guest_devices.py), not the host's.
        listed = sandbox.execute("import os\nprint(sorted(os.listdir('/dev')))")
        assert listed.stdout == "['null', 'random', 'stderr', 'stdout', 'urandom', 'zero']\n", listed.error


def test_absolute_host_path_under_tmp_lands_in_the_private_tmp_not_on_the_host(host: Host, sandbox: PythonSandbox) -> None:
    # tmp_path lives under the host's /tmp, and the guest has its own /tmp: writing
    # the secret's absolute path from the guest creates a guest-private file.
    assert str(host.secret).startswith(tempfile.gettempdir())
    path = str(host.secret)
    with host_untouched(host):
        result = sandbox.execute(
            f"import os\nos.makedirs(os.path.dirname({path!r}), exist_ok=True)\n"
            f"open({path!r}, 'w').write('guest copy')\nprint(open({path!r}).read())"
        )
        assert result.success, result.error
        assert result.stdout == "guest copy\n"
        assert_no_leak(result, host.token)


# --- what exists in the guest ---------------------------------------------------------


def test_guest_root_holds_only_the_documented_paths(sandbox: PythonSandbox) -> None:
    zip_name = guest_artifacts().zip_name
    documented = ["/app", "/tmp", "/dev", "/usr/local/lib", f"/usr/local/lib/{zip_name}", "/opt/wasm-kernel"]
    host_like = [
        "/etc", "/proc", "/sys", "/home", "/root", "/var", "/bin", "/usr/bin", "/lib",
        "/usr", "/opt", "/usr/local", "/usr/local/bin", "/run", "/mnt", "/srv", "/boot", "/work",
    ]
    code = f"""
import json, os
try:
    root = sorted(os.listdir('/'))
except OSError as err:
    root = type(err).__name__
print(json.dumps({{
    "root": root,
    "documented": [p for p in {documented!r} if os.path.exists(p)],
    "host_like": [p for p in {host_like!r} if os.path.lexists(p)],
    "lib": sorted(os.listdir('/usr/local/lib')),
    "support": sorted(os.listdir('/opt/wasm-kernel')),
    "cwd": os.getcwd(),
}}))
"""
    result = sandbox.execute(code)
    assert result.success, result.error
    seen = json.loads(result.stdout)
    # '/' itself is not a preopen: listing it fails, or at most shows the mount points.
    assert seen["root"] in ("FileNotFoundError", "PermissionError", "NotADirectoryError") or set(seen["root"]) <= {
        "app", "tmp", "usr", "opt", "dev"
    }, seen["root"]
    assert seen["documented"] == documented
    assert seen["host_like"] == []
    assert seen["lib"] == [zip_name]
    assert seen["support"] == sorted(p.name for p in GUEST_LIB_DIR.iterdir() if p.name != "__pycache__")
    assert seen["cwd"] == "/app"


def test_host_environment_variables_are_not_visible_in_the_guest(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"WASM_KERNEL_TEST_{uuid.uuid4().hex.upper()}"
    value = f"HOST-ENV-SECRET-{uuid.uuid4().hex}"
    monkeypatch.setenv(name, value)
    assert os.environ.get("PYTEST_CURRENT_TEST")  # a host-only variable that is surely set
    sb = make_sandbox(workspace)
    try:
        result = sb.execute("import os, json\nprint(json.dumps(dict(os.environ)))")
        assert result.success, result.error
        guest_env = json.loads(result.stdout)
        assert name not in guest_env
        assert value not in result.stdout
        for host_only in ("PYTEST_CURRENT_TEST", "PATH", "VIRTUAL_ENV", "PWD", "USER", "LD_PRELOAD"):
            assert host_only not in guest_env, host_only
        assert guest_env["HOME"] == "/tmp" and guest_env["TMPDIR"] == "/tmp"
        assert sb.execute(f"import os; print(os.getenv({name!r}))").stdout == "None\n"
    finally:
        sb.close()


# --- host-planted symlinks ------------------------------------------------------------


def test_host_planted_absolute_symlink_to_a_secret_file_cannot_be_followed(host: Host, sandbox: PythonSandbox) -> None:
    os.symlink(host.secret, host.workspace / "abs_link")
    os.symlink(host.sibling, host.workspace / "abs_dir_link")
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "read": "open('abs_link').read()",
                "read /app path": "open('/app/abs_link').read()",
                "os.open": "os.read(os.open('abs_link', os.O_RDONLY), 100)",
                "write": "open('abs_link', 'w').write('pwned')",
                "append": "open('abs_link', 'a').write('pwned')",
                "r+": "open('abs_link', 'r+').write('pwned')",
                "truncate": "os.truncate('abs_link', 0)",
                "utime": "os.utime('abs_link', (0, 0))",
                "stat": "os.stat('abs_link').st_size",
                "listdir dir link": "os.listdir('abs_dir_link')",
                "read through dir link": "open('abs_dir_link/inside.txt').read()",
                "create through dir link": "open('abs_dir_link/new.txt', 'w').write('pwned')",
                "unlink through dir link": "os.unlink('abs_dir_link/inside.txt')",
                "mkdir through dir link": "os.mkdir('abs_dir_link/d')",
            },
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
        # The guest still sees the links as links, and can remove them (not their targets).
        assert sandbox.execute("print(os.path.islink('abs_link'), os.path.islink('abs_dir_link'))").stdout == "True True\n"
        assert sandbox.execute("os.remove('abs_link'); os.remove('abs_dir_link')").success
    assert not os.path.lexists(host.workspace / "abs_link")


def test_host_planted_relative_symlinks_to_a_sibling_folder_and_file_cannot_be_followed(
    host: Host, sandbox: PythonSandbox
) -> None:
    os.symlink("../sibling", host.workspace / "sib")
    os.symlink("../secret.txt", host.workspace / "rel_link")
    (host.workspace / "nested").mkdir()
    os.symlink("../../sibling/inside.txt", host.workspace / "nested" / "deep_link")
    # A chain: an inside link to a link that points out.
    os.symlink("rel_link", host.workspace / "chain")
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "listdir": "os.listdir('sib')",
                "listdir slash": "os.listdir('sib/')",
                "scandir": "[e.name for e in os.scandir('sib')]",
                "read through": "open('sib/inside.txt').read()",
                "write new through": "open('sib/new.txt', 'w').write('pwned')",
                "append through": "open('sib/inside.txt', 'a').write('pwned')",
                "remove through": "os.remove('sib/inside.txt')",
                "mkdir through": "os.mkdir('sib/d')",
                "rename into": "os.rename('x.txt', 'sib/x.txt')",
                "rename out of": "os.rename('sib/inside.txt', 'stolen.txt')",
                "rmtree link": "shutil.rmtree('sib')",
                "read file link": "open('rel_link').read()",
                "append file link": "open('rel_link', 'a').write('pwned')",
                "write file link": "open('rel_link', 'w').write('pwned')",
                "read nested link": "open('nested/deep_link').read()",
                "read chain": "open('chain').read()",
                "write chain": "open('chain', 'w').write('pwned')",
                "walk following links": "[f for _, _, fs in os.walk('.', followlinks=True) for f in fs if f == 'inside.txt'] or os.stat('sib/inside.txt')",
            },
            setup="open('x.txt', 'w').write('x')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert (host.workspace / "x.txt").read_text() == "x"


# --- guest-made symlinks --------------------------------------------------------------


def test_guest_made_relative_symlinks_pointing_outside_are_unusable(host: Host, sandbox: PythonSandbox) -> None:
    made = sandbox.execute(
        "import os\n"
        "os.symlink('../secret.txt', 'link')\n"
        "os.makedirs('a/b')\n"
        "os.symlink('../../../sibling', 'a/b/up')\n"
        "os.symlink('../new_on_host.txt', 'dangling')\n"
        "os.symlink('../../../secret.txt', '/tmp/tmplink')\n"
    )
    # Creating them may succeed (the link text is just a string)...
    assert made.success, made.error
    assert os.readlink(host.workspace / "link") == "../secret.txt"
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "read": "open('link').read()",
                "write": "open('link', 'w').write('pwned')",
                "append": "open('link', 'a').write('pwned')",
                "truncate": "os.truncate('link', 0)",
                "stat": "os.stat('link').st_size",
                "listdir up": "os.listdir('a/b/up')",
                "read through up": "open('a/b/up/inside.txt').read()",
                "create through up": "open('a/b/up/new.txt', 'w').write('pwned')",
                "create through dangling": "open('dangling', 'w').write('pwned')",
                "read tmp link": "open('/tmp/tmplink').read()",
            },
        )
        # ...but nothing can be read or written through them.
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert not (host.root / "new_on_host.txt").exists()


def test_guest_made_absolute_symlinks_are_refused_or_unusable(host: Host, sandbox: PythonSandbox) -> None:
    targets = {
        "host secret": str(host.secret),
        "host sibling": str(host.sibling),
        "passwd": "/etc/passwd",
        # Inside the guest this is its own workspace, but on the host /app is another path.
        "guest app": "/app/own.txt",
        "guest tmp": "/tmp",
    }
    (host.workspace / "own.txt").write_text("own")
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {f"create {k}": f"os.symlink({v!r}, {'l_' + str(i)!r})" for i, (k, v) in enumerate(targets.items())},
        )
        refused_create = {k for k, v in out.items() if v.startswith("error:")}
        result2, used = attempt(
            sandbox,
            {
                **{f"read {i}": f"open('l_{i}').read()" for i in range(len(targets))},
                **{f"write {i}": f"open('l_{i}', 'a').write('pwned')" for i in range(len(targets))},
                **{f"list {i}": f"os.listdir('l_{i}')" for i in range(len(targets))},
            },
        )
        for i, label in enumerate(targets):
            if f"create {label}" not in refused_create:
                assert_refused(used, f"read {i}", f"write {i}", f"list {i}")
        assert_no_leak(result, host.token)
        assert_no_leak(result2, host.token)
    # Host code walking the workspace must never meet an absolute link made by the guest.
    for dirpath, dirnames, filenames in os.walk(host.workspace):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                assert not os.path.isabs(os.readlink(path)), path
    assert (host.workspace / "own.txt").read_text() == "own"


# --- renames --------------------------------------------------------------------------


def test_renames_out_of_app_are_refused(host: Host, sandbox: PythonSandbox) -> None:
    with host_untouched(host), runtime_guard():
        result, out = attempt(
            sandbox,
            {
                "rename /app/../x": "os.rename('/app/x', '/app/../x')",
                "rename ../x": "os.rename('x', '../x')",
                "rename into sibling": "os.rename('x', '../sibling/x')",
                "replace over secret": "os.replace('x', '../secret.txt')",
                "rename dir out": "os.rename('d', '../d')",
                "rename to host abs path": f"os.rename('x', {str(host.root / 'x')!r})",
                "rename into read-only lib": "os.rename('x', '/usr/local/lib/x')",
                "rename into read-only support": "os.rename('x', '/opt/wasm-kernel/x')",
            },
            setup="open('x', 'w').write('x'); os.makedirs('d', exist_ok=True)",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert sorted(p.name for p in host.workspace.iterdir()) == ["d", "x"]


def test_rename_from_app_to_tmp_moves_the_file_only_into_the_private_temp_dir(host: Host, sandbox: PythonSandbox) -> None:
    name = f"moved-{uuid.uuid4().hex}.txt"
    host_tmp = Path(tempfile.gettempdir())
    private = str(scratch_parent() / "guest-*" / "tmp" / name)
    try:
        with host_untouched(host):
            result = sandbox.execute(
                f"import os\nopen('x.txt', 'w').write('payload')\nos.rename('/app/x.txt', '/tmp/{name}')\n"
                f"print(open('/tmp/{name}').read(), os.path.exists('/app/x.txt'))"
            )
            assert result.success, result.error
            assert result.stdout == "payload False\n"
            assert result.files_created == [] and result.files_deleted == []
        assert list(host.workspace.iterdir()) == []
        assert not (host_tmp / name).exists()
        assert not list(host.root.rglob(name))
        # It is in exactly one place: this interpreter's private temp folder...
        hits = glob.glob(private)
        assert len(hits) == 1 and Path(hits[0]).read_text() == "payload"
        sandbox.close()
        # ...which is removed when the sandbox closes.
        assert glob.glob(private) == []
    finally:
        (host_tmp / name).unlink(missing_ok=True)  # only there if the test failed


def test_renaming_a_host_planted_symlink_does_not_make_it_usable(host: Host, sandbox: PythonSandbox) -> None:
    os.symlink(host.secret, host.workspace / "abs_link")
    os.symlink(host.secret, host.workspace / "abs_link2")
    os.symlink("../secret.txt", host.workspace / "rel_link")
    (host.root / "own.txt").write_text(host.token)  # what 'd/inner' reaches once moved up
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "read moved abs": "open('moved_abs').read()",
                "append moved abs": "open('moved_abs', 'a').write('pwned')",
                "read abs moved to tmp": "open('/tmp/abs_in_tmp').read()",
                "read rel moved to tmp": "open('/tmp/rel_in_tmp').read()",
                "write rel moved to tmp": "open('/tmp/rel_in_tmp', 'w').write('pwned')",
                # 'd/inner' -> '../own.txt' stays inside while in d/, points out once moved up.
                "read inside link moved up": "open('inner_moved_up').read()",
                "write inside link moved up": "open('inner_moved_up', 'w').write('pwned')",
            },
            setup=(
                "open('own.txt', 'w').write('own')\n"
                "os.makedirs('d', exist_ok=True)\n"
                "os.rename('abs_link', 'moved_abs')\n"
                "os.rename('abs_link2', '/tmp/abs_in_tmp')\n"
                "os.rename('rel_link', '/tmp/rel_in_tmp')\n"
                "os.symlink('../own.txt', 'd/inner')\n"
                "assert open('d/inner').read() == 'own'\n"
                "os.rename('d/inner', 'inner_moved_up')\n"
            ),
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert os.readlink(host.workspace / "moved_abs") == str(host.secret)
    assert (host.workspace / "own.txt").read_text() == "own"


def test_replace_through_a_symlinked_directory_is_refused(host: Host, sandbox: PythonSandbox) -> None:
    os.symlink("../sibling", host.workspace / "sib")
    os.symlink(host.sibling, host.workspace / "abs_sib")
    with host_untouched(host):
        result, out = attempt(
            sandbox,
            {
                "replace into rel dir link": "os.replace('x', 'sib/x')",
                "replace over file via rel dir link": "os.replace('x', 'sib/inside.txt')",
                "replace into abs dir link": "os.replace('x', 'abs_sib/x')",
                "replace over file via abs dir link": "os.replace('x', 'abs_sib/inside.txt')",
                "replace out of rel dir link": "os.replace('sib/inside.txt', 'got.txt')",
                "replace out of abs dir link": "os.replace('abs_sib/inside.txt', 'got.txt')",
                "replace via link then dotdot": "os.replace('x', 'sib/../secret.txt')",
            },
            setup="open('x', 'w').write('x')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert (host.workspace / "x").read_text() == "x"
    assert not (host.workspace / "got.txt").exists()


# --- hard links -----------------------------------------------------------------------


def test_hard_links_cannot_reach_files_outside(host: Host, sandbox: PythonSandbox) -> None:
    os.symlink("../sibling", host.workspace / "sib")
    os.symlink(host.secret, host.workspace / "abs_link")
    zip_path = runtime_tree().lib_dir / guest_artifacts().zip_name
    guarded = [zip_path, GUEST_LIB_DIR / "_wasm_kernel_guest.py"]
    links_before = [p.stat().st_nlink for p in guarded]
    with host_untouched(host), runtime_guard():
        result, out = attempt(
            sandbox,
            {
                "link ../secret": "os.link('../secret.txt', 'hl1')",
                "link host abs path": f"os.link({str(host.secret)!r}, 'hl2')",
                "link via dir link": "os.link('sib/inside.txt', 'hl3')",
                "link out": "os.link('mine.txt', '../hl4')",
                "link into sibling": "os.link('mine.txt', 'sib/hl5')",
                "link stdlib zip": f"os.link('/usr/local/lib/{guest_artifacts().zip_name}', 'hl6')",
                "link support file": "os.link('/opt/wasm-kernel/_wasm_kernel_guest.py', 'hl7')",
                "link support into tmp": "os.link('/opt/wasm-kernel/_wasm_kernel_guest.py', '/tmp/hl8')",
                # Linking the planted symlink itself may succeed (it links the link,
                # not the file), but the new name must be as unusable as the old one.
                "read link of abs link": "(os.link('abs_link', 'hl9') if not os.path.lexists('hl9') else None, open('hl9').read())[1]",
                "write link of abs link": "open('hl9', 'a').write('pwned')",
            },
            setup="open('mine.txt', 'w').write('mine')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
    assert host.secret.stat().st_nlink == 1
    assert host.inside.stat().st_nlink == 1
    assert [p.stat().st_nlink for p in guarded] == links_before
    assert not any((host.workspace / f"hl{i}").exists() for i in range(1, 9))


# --- read-only runtime paths ----------------------------------------------------------


@pytest.mark.slow
def test_read_only_runtime_paths_reject_every_write_and_stay_untouched(host: Host, sandbox: PythonSandbox) -> None:
    zip_guest = f"/usr/local/lib/{guest_artifacts().zip_name}"
    mpl = f"{zip_guest}/matplotlib/mpl-data"
    support = "/opt/wasm-kernel/_wasm_kernel_shell.py"
    site = guest_site().guest_path
    ipython = f"{site}/IPython/__init__.py"
    rc = f"{mpl}/matplotlibrc"
    before = _runtime_state()
    with runtime_guard():
        result, out = attempt(
            sandbox,
            {
                # The zip: only attempts that would be harmless if they succeeded.
                "zip open r+": f"open({zip_guest!r}, 'r+b').close()",
                "zip open append": f"open({zip_guest!r}, 'ab').close()",
                "zip utime": f"os.utime({zip_guest!r}, ns=(os.stat({zip_guest!r}).st_atime_ns, os.stat({zip_guest!r}).st_mtime_ns))",
                "lib create": "open('/usr/local/lib/new.txt', 'w').write('x')",
                "lib mkdir": "os.mkdir('/usr/local/lib/d')",
                "lib symlink": "os.symlink('x', '/usr/local/lib/l')",
                "lib rename into": "os.rename('mine.txt', '/usr/local/lib/mine.txt')",
                "lib link into": "os.link('mine.txt', '/usr/local/lib/mine.txt')",
                "support create": "open('/opt/wasm-kernel/new.py', 'w').write('x')",
                "support overwrite": f"open({support!r}, 'w').write('pwned')",
                "support append": f"open({support!r}, 'a').write('pwned')",
                "support truncate": f"os.truncate({support!r}, 0)",
                "support unlink": f"os.unlink({support!r})",
                "support rename away": f"os.rename({support!r}, '/app/stolen.py')",
                "support rename within": f"os.rename({support!r}, '/opt/wasm-kernel/other.py')",
                "support rmdir": "os.rmdir('/opt/wasm-kernel/__pycache__')",
                "support mkdir": "os.mkdir('/opt/wasm-kernel/d')",
                "support utime": f"os.utime({support!r}, (0, 0))",
                "support symlink": "os.symlink('x', '/opt/wasm-kernel/l')",
                "site create": f"open({site + '/sitecustomize.py'!r}, 'w').write('x')",
                "site overwrite": f"open({ipython!r}, 'w').write('pwned')",
                "site append": f"open({ipython!r}, 'a').write('pwned')",
                "site unlink": f"os.unlink({ipython!r})",
                "site rename": f"os.rename({ipython!r}, '/app/stolen.py')",
                "site pycache": f"open({site + '/IPython/__pycache__/x.pyc'!r}, 'wb').write(b'x')",
                "site mkdir": f"os.mkdir({site + '/evil'!r})",
                "site rmtree": f"__import__('shutil').rmtree({site + '/traitlets'!r})",
                "mpl create": f"open({mpl + '/new.txt'!r}, 'w').write('x')",
                "mpl overwrite": f"open({rc!r}, 'w').write('pwned')",
                "mpl unlink": f"os.unlink({rc!r})",
                "mpl rename away": f"os.rename({rc!r}, '/tmp/rc')",
                "mpl mkdir": f"os.mkdir({mpl + '/stylelib/d'!r})",
                "mpl dotdot": f"os.listdir({mpl + '/..'!r})",
            },
            setup="open('mine.txt', 'w').write('mine')",
        )
        assert_refused(out)
        # Reading them still works: the refusals are about writing.
        check = sandbox.execute(
            f"import zipfile\nprint(len(open({support!r}).read()) > 0, os.path.isfile({rc!r}), "
            f"zipfile.is_zipfile({zip_guest!r}))"
        )
        assert check.stdout == "True True True\n"
    assert _runtime_state() == before
    assert sorted(p.name for p in host.workspace.iterdir()) == ["mine.txt"]


# --- private /tmp and separate workspaces ---------------------------------------------


def test_guest_tmp_is_not_the_host_tmp(host: Host, sandbox: PythonSandbox) -> None:
    host_tmp = Path(tempfile.gettempdir())
    on_host = host_tmp / f"wasm-kernel-test-{uuid.uuid4().hex}"
    from_guest = f"wasm-kernel-test-{uuid.uuid4().hex}"
    on_host.write_text(host.token)
    try:
        result, out = attempt(
            sandbox,
            {
                "read host tmp file": f"open('/tmp/{on_host.name}').read()",
                "stat host tmp file": f"os.stat('/tmp/{on_host.name}').st_size",
                "listdir shows it": f"{on_host.name!r} in os.listdir('/tmp') or os.stat('/tmp/{on_host.name}')",
                "delete host tmp file": f"os.remove('/tmp/{on_host.name}')",
            },
            setup=f"open('/tmp/{from_guest}', 'w').write('guest')",
        )
        assert_refused(out)
        assert_no_leak(result, host.token)
        assert on_host.read_text() == host.token
        assert not (host_tmp / from_guest).exists()
    finally:
        on_host.unlink()
        (host_tmp / from_guest).unlink(missing_ok=True)  # only there if the test failed


def test_two_sandboxes_do_not_share_tmp(workspace: Path, sandbox: PythonSandbox) -> None:
    # Same workspace on purpose: /tmp is the only thing that differs.
    token_a, token_b = f"A-{uuid.uuid4().hex}", f"B-{uuid.uuid4().hex}"
    shared = f"/tmp/shared-{uuid.uuid4().hex}.txt"
    other = make_sandbox(workspace)
    try:
        assert sandbox.execute(f"open({shared!r}, 'w').write({token_a!r})").success
        # IPython's profile (~/.ipython, HOME being /tmp) and matplotlib's font cache
        # (copied from the warm image) are each interpreter's own.
        r = other.execute(f"import os\nprint(sorted(os.listdir('/tmp')), os.path.exists({shared!r}))")
        assert r.stdout == "['.ipython', '.matplotlib'] False\n"
        assert token_a not in r.stdout
        assert other.execute(f"open({shared!r}, 'w').write({token_b!r})").success
        assert sandbox.execute(f"print(open({shared!r}).read())").stdout == f"{token_a}\n"
        assert other.execute(f"print(open({shared!r}).read())").stdout == f"{token_b}\n"
        # The workspace, by contrast, is shared: the control that both see the same /app.
        assert sandbox.execute("open('both.txt', 'w').write('w')").success
        assert other.execute("print(open('both.txt').read())").stdout == "w\n"
    finally:
        other.close()


def test_sandboxes_with_different_workspaces_cannot_see_each_others_files(
    tmp_path: Path, workspace: Path, sandbox: PythonSandbox
) -> None:
    token = f"WS1-{uuid.uuid4().hex}"
    other_ws = tmp_path / "other"
    other = make_sandbox(other_ws)
    try:
        assert sandbox.execute(f"open('mine.txt', 'w').write({token!r})").success
        before = tree_state(workspace)
        result, out = attempt(
            other,
            {
                "read by dotdot": "open('../workspace/mine.txt').read()",
                "read by host path": f"open({str(workspace / 'mine.txt')!r}).read()",
                "list by dotdot": "os.listdir('../workspace')",
                "list by host path": f"os.listdir({str(workspace)!r})",
                "write by dotdot": "open('../workspace/new.txt', 'w').write('x')",
                "delete by dotdot": "os.remove('../workspace/mine.txt')",
            },
        )
        assert_refused(out)
        assert_no_leak(result, token)
        assert tree_state(workspace) == before
        assert other.execute("import os; print(os.listdir('.'))").stdout == "[]\n"
        assert sandbox.execute("print(open('mine.txt').read())").stdout == f"{token}\n"
    finally:
        other.close()


def test_the_private_tmp_is_removed_even_without_close(tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "import sys\nfrom pathlib import Path\nfrom wasm_kernel import create_sandbox\n"
        "sb = create_sandbox(workspace=Path(sys.argv[1]))\n"
        "sb.execute(\"open('/tmp/left-behind', 'w').write('x')\")\n"
        "print(sb._guest.layout.private)\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "ws")], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    private = Path(out.stdout.strip())
    assert private.parent == scratch_parent() and private.name.startswith("guest-")
    assert not private.exists()
    assert not private.with_name(private.name + ".lock").exists()


def test_a_sessions_root_is_never_mounted_as_a_plain_workspace(tmp_path: Path) -> None:
    from wasm_kernel import create_sandbox, create_session_sandbox

    root = tmp_path / "root"
    session_id, sb = create_session_sandbox(workspace_root=root)
    sb.execute("open('mine.txt', 'w').write('private to this session')")
    sb.close()
    with pytest.raises(ValueError, match="sessions root"):
        create_sandbox(workspace=root)
