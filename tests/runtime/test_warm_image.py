"""Warm images: sandboxes start from a saved, pre-imported guest, and each is still
its own (entropy, descriptors, environment, clock, mounts), with rollback and
%undo working on top of the shared pages."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from support.sandboxes import make_sandbox
from wasm_kernel import ExecutionPolicy, create_sandbox
from wasm_kernel.core.sandbox import GuestOptions, PythonSandbox
from wasm_kernel.host.memory_image import MANIFEST_FILE, MEMORY_FILE, load_image, sweep_partial
from wasm_kernel.host.work_meter import WorkProgress
from wasm_kernel.runtime import warm_image as warm
from wasm_kernel.runtime.guest_config import GUEST_ENV
from wasm_kernel.runtime.provisioning import prepare_warm_image, warm_image_key

SMALL = ("json",)  # a quick image of its own for the tests that build one


def _sandbox(workspace: Path, **options: object) -> PythonSandbox:
    sb = create_sandbox(workspace=workspace, policy=ExecutionPolicy(), guest_options=GuestOptions(**options))  # type: ignore[arg-type]
    assert isinstance(sb, PythonSandbox)
    return sb


def _no_image_yet(preload: tuple[str, ...]) -> tuple[str, Path]:
    """The key and folder of `preload`'s image, with no image built or remembered."""
    import shutil

    key = warm_image_key(preload)
    folder = warm.image_folder(key)
    shutil.rmtree(folder, ignore_errors=True)
    warm._memo.pop(key, None)
    folder.parent.mkdir(parents=True, exist_ok=True)
    return key, folder


def _text(sb: PythonSandbox, code: str) -> str:
    r = sb.execute(code)
    assert r.success, (r.stderr, r.error)
    return r.stdout


def test_a_sandbox_starts_from_the_image_with_the_preloaded_modules_imported_not_bound(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws")
    try:
        assert sb.started_from_image and sb.boot_notice is None
        out = _text(sb, "import sys\nprint(all(m in sys.modules for m in ('numpy', 'pandas', 'matplotlib.pyplot')), "
                        "'np' in dir(), 'numpy' in dir(), 'pandas' in dir())")
        assert out == "True False False False\n"
    finally:
        sb.close()


def test_a_first_cell_from_the_image_opens_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What IPython's run_cell does the first time (import bdb, build its %logstart
    logger, probe the temporary folder for tempfile) is in the image: every sandbox's
    first cell did it, ~10 ms and ~1,700 page faults of each kernel's start. Each
    would open a file through the guest's WASI (observed here, not changed)."""
    from wasm_kernel.runtime import wasi_shadows

    opened: list[bytes] = []
    real = wasi_shadows._path_open

    def observed(ctx):  # type: ignore[no-untyped-def]
        inner = real(ctx)

        def path_open(caller, *args):  # type: ignore[no-untyped-def]
            opened.append(bytes(ctx.mem.read(caller, args[2], args[3])))
            return inner(caller, *args)

        return path_open

    monkeypatch.setattr(wasi_shadows, "_path_open", observed)
    sb = make_sandbox(tmp_path / "ws")
    try:
        assert sb.started_from_image
        opened.clear()
        assert sb.execute("1+1").success
        assert opened == []
        assert _text(sb, "import tempfile\nprint(tempfile.gettempdir(), open('/tmp/t', 'w').write('x'))") == "/tmp 1\n"
        assert opened  # the observer sees the guest's opens
    finally:
        sb.close()


def test_two_fresh_sandboxes_never_draw_the_same_random_numbers(tmp_path: Path) -> None:
    code = ("import random, numpy as np, tempfile, pickle, hashlib, _wasm_kernel_reseed as s\n"
            "def state(g):\n"
            "    raw = g.getstate() if isinstance(g, random.Random) else "
            "g.get_state() if isinstance(g, np.random.RandomState) else g.bit_generator.state\n"
            "    return hashlib.sha256(pickle.dumps(raw)).hexdigest()\n"
            "print(random.random(), np.random.rand(), next(tempfile._get_candidate_names()), "
            "__import__('json').dumps([state(g) for g in s.seeded_generators]))")
    seen = []
    for i in range(2):
        sb = make_sandbox(tmp_path / f"ws{i}")
        try:
            assert sb.started_from_image
            seen.append(_text(sb, code).split(" ", 3))
        finally:
            sb.close()
    (r1, n1, t1, gens1), (r2, n2, t2, gens2) = seen
    assert r1 != r2 and n1 != n2 and t1 != t2
    states1, states2 = json.loads(gens1), json.loads(gens2)
    # random's own generator and numpy's legacy global one at least, each reseeded.
    assert len(states1) >= 2
    assert all(a != b for a, b in zip(states1, states2))


def test_the_seeded_generators_include_random_and_numpys_global_state(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws")
    try:
        out = _text(sb, "import random, numpy as np, _wasm_kernel_reseed as s\n"
                        "ids = {id(g) for g in s.seeded_generators}\n"
                        "print(id(random._inst) in ids, id(np.random.mtrand._rand) in ids)")
        assert out == "True True\n"
    finally:
        sb.close()


@pytest.mark.slow
def test_the_environment_clock_and_working_folder_are_the_new_sandboxes(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws")
    try:
        out = _text(sb, "import os, time, json\nprint(json.dumps([dict(os.environ), time.time(), os.getcwd()]))")
        env, now, cwd = json.loads(out)
        assert dict(GUEST_ENV).items() <= env.items()
        plain = _sandbox(tmp_path / "plain", warm_image=False)
        try:
            plain_env = json.loads(_text(plain, "import os, json\nprint(json.dumps(dict(os.environ)))"))
        finally:
            plain.close()
        assert env == plain_env  # what IPython adds (IPYTHONDIR) included
        assert abs(now - time.time()) < 5  # the real time, not the build's
        assert cwd == "/app"
        # The monotonic clock runs.
        out = _text(sb, "import time\na = time.monotonic(); time.sleep(0.05); print(time.monotonic() - a >= 0.05)")
        assert out == "True\n"
    finally:
        sb.close()


def test_the_mounts_and_descriptors_are_those_of_the_new_sandbox(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "mine.py").write_text("VALUE = 'from this workspace'\n")
    sb = _sandbox(ws)
    try:
        assert sb.started_from_image
        first_free = max(sb._guest.files.ledger.fixed) + 1  # after stdio and the preopens
        # Nothing the build opened is open here: every number past the preopens is free.
        free = _text(sb, "import os\ndef is_open(fd):\n    try:\n        os.fstat(fd)\n        return True\n"
                         f"    except OSError:\n        return False\nprint([is_open(fd) for fd in range({first_free} - 1, {first_free} + 16)])")
        assert free == str([True] + [False] * 16) + "\n"
        out = _text(sb, "import os, mine\nfd = os.open('/app/out.txt', os.O_WRONLY | os.O_CREAT)\nos.write(fd, b'x')\n"
                        "os.close(fd)\nprint(mine.VALUE, fd, sorted(os.listdir('/app')))")
        assert out == f"from this workspace {first_free} ['mine.py', 'out.txt']\n"
        assert (ws / "out.txt").read_text() == "x"  # this sandbox's workspace, not the build's
    finally:
        sb.close()


def test_the_first_checkpoint_never_copies_the_images_untouched_pages(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws")
    try:
        checkpoint = sb._guest.checkpoints.checkpoint
        assert checkpoint is not None
        if not checkpoint.incremental:
            pytest.skip("this kernel does not offer userfaultfd write-protect tracking")
        sb._guest.wait_idle()
        assert checkpoint.size > 64 << 20  # the image holds numpy, pandas and matplotlib
        assert checkpoint.last_copied < checkpoint.size // 20
        sb.execute("x = 1")
        sb._guest.wait_idle()
        assert checkpoint.last_copied < checkpoint.size // 20
    finally:
        sb.close()


def test_rollback_and_undo_work_on_an_image_started_guest(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws", cpu_seconds=2.0)
    try:
        assert sb.started_from_image
        assert sb.execute("import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3]})").success
        r = sb.execute("df['a'] = 0\nwhile True:\n    pass")
        assert r.trap == "cpu_time" and r.rolled_back
        assert _text(sb, "print(df['a'].sum())") == "6\n"
        assert sb.execute("df['b'] = df['a'] * 2").success
        assert sb.undo()
        assert _text(sb, "print(list(df.columns))") == "['a']\n"
    finally:
        sb.close()


def test_a_restarted_interpreter_starts_from_the_image_again(tmp_path: Path) -> None:
    sb = make_sandbox(tmp_path / "ws")
    try:
        sb.execute("x = 1")
        r = sb.execute("import os\nos._exit(3)")
        assert r.restarted
        assert sb.started_from_image
        assert _text(sb, "print('x' in dir(), __import__('sys').modules.get('pandas') is not None)") == "False True\n"
    finally:
        sb.close()


def test_the_image_key_covers_every_input() -> None:
    base = dict(preload=("numpy",), site_key="s", stdlib_sha256="z", layout="l", guest_code="g")
    keys = {warm.image_key(**base)}
    for field, other in [("preload", ("pandas",)), ("site_key", "s2"), ("stdlib_sha256", "z2"),
                         ("layout", "l2"), ("guest_code", "g2")]:
        keys.add(warm.image_key(**{**base, field: other}))
    assert len(keys) == 6
    # The guest module, wasmtime and our version are in it too (through guest_cache_key).
    assert warm_image_key(("numpy",)) != warm_image_key(("numpy", "pandas"))


def test_a_changed_guest_module_changes_the_key(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    before = warm.code_digest(tmp_path)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert warm.code_digest(tmp_path) != before


def test_the_code_digest_is_read_once_until_a_file_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's start asks for the digest two or three times (~2 ms each): files
    that have not changed since are not read again; a changed one is."""
    import builtins
    import os

    (tmp_path / "sub").mkdir()
    for name in ("a.py", "sub/b.py"):
        (tmp_path / name).write_text(f"# {name}\n")
        os.utime(tmp_path / name, (1_000_000_000, 1_000_000_000))  # long ago: not racy
    reads: list[str] = []

    def counting_open(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        reads.append(str(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(warm, "open", counting_open, raising=False)
    first = warm.code_digest(tmp_path)
    assert len(reads) == 2
    assert warm.code_digest(tmp_path) == first and len(reads) == 2  # remembered
    (tmp_path / "sub" / "b.py").write_text("# changed\n")
    assert warm.code_digest(tmp_path) != first and len(reads) == 4  # read again, whole


def test_a_stale_or_tampered_image_is_never_used(tmp_path: Path) -> None:
    image = prepare_warm_image(SMALL)
    key = image.key
    assert load_image(image.folder, key) is not None
    assert load_image(image.folder, "another-key") is None  # made for another key: stale
    copy = tmp_path / "copy"
    copy.mkdir(mode=0o700)
    for name in (MANIFEST_FILE, MEMORY_FILE):
        (copy / name).write_bytes((image.folder / name).read_bytes())
        (copy / name).chmod(0o600)
    assert load_image(copy, key) is not None
    with open(copy / MEMORY_FILE, "ab") as f:  # truncated or grown: refused
        f.write(b"\0" * 4096)
    assert load_image(copy, key) is None
    os.truncate(copy / MEMORY_FILE, image.size)
    (copy / MEMORY_FILE).chmod(0o666)  # writable by others: refused
    assert load_image(copy, key) is None
    (copy / MEMORY_FILE).chmod(0o600)
    (copy / MEMORY_FILE).rename(copy / "real.bin")
    (copy / MEMORY_FILE).symlink_to(copy / "real.bin")  # a link: refused
    assert load_image(copy, key) is None


@pytest.mark.slow
def test_a_failed_build_falls_back_to_a_plain_boot_with_a_notice(tmp_path: Path) -> None:
    sb = _sandbox(tmp_path / "ws", preload=("json", "no_such_module_for_the_image_test"))
    try:
        assert not sb.started_from_image
        assert sb.boot_notice is not None and "could not be built" in sb.boot_notice
        assert "no_such_module_for_the_image_test" in sb.boot_notice
        assert _text(sb, "print(1 + 1)") == "2\n"
    finally:
        sb.close()


@pytest.mark.slow
def test_an_image_larger_than_the_memory_limit_is_not_used(tmp_path: Path) -> None:
    sb = create_sandbox(workspace=tmp_path / "ws", policy=ExecutionPolicy(memory_bytes=64 << 20))
    try:
        assert isinstance(sb, PythonSandbox)
        assert not sb.started_from_image
        assert sb.boot_notice is not None and "memory limit" in sb.boot_notice
        assert _text(sb, "print(2 + 2)") == "4\n"
    finally:
        sb.close()


@pytest.mark.slow
def test_building_an_image_shows_progress_and_sweeps_a_killed_builds_leftovers(tmp_path: Path) -> None:
    preload = ("json", "csv")
    key, folder = _no_image_yet(preload)
    # What a build killed half way leaves: its scratch folder, never a usable image.
    (folder.parent / f".image-{folder.name}-killed").mkdir()
    seen: list[WorkProgress] = []
    start = time.monotonic()
    image = prepare_warm_image(preload, seen.append)
    assert image.key == key and load_image(folder, key) is not None
    # Measured readings (host/work_meter.py): from 0%, never 100% before the last, which says done.
    assert seen and seen[0].percent < 100 and not any(r.done for r in seen[:-1])
    assert seen[-1].done and seen[-1].elapsed <= time.monotonic() - start + 1
    assert not list(folder.parent.glob(f".image-{folder.name}-*"))
    assert sweep_partial(folder) == []
    sb = _sandbox(tmp_path / "ws", preload=preload)
    try:
        assert sb.started_from_image
        assert _text(sb, "import sys\nprint('csv' in sys.modules, 'pandas' in sys.modules)") == "True False\n"
    finally:
        sb.close()


@pytest.mark.slow
def test_string_hashing_is_the_same_with_or_without_an_image_as_the_readme_says(tmp_path: Path) -> None:
    code = "import sys\nprint(hash('abc'), sys.flags.hash_randomization)"
    warm_sb, plain_sb = _sandbox(tmp_path / "a"), _sandbox(tmp_path / "b", warm_image=False)
    try:
        assert warm_sb.started_from_image and not plain_sb.started_from_image
        warm_out, plain_out = _text(warm_sb, code), _text(plain_sb, code)
    finally:
        warm_sb.close()
        plain_sb.close()
    assert warm_out == plain_out and warm_out.endswith(" 0\n")


@pytest.mark.slow
def test_two_fresh_kernels_print_different_random_numbers(tmp_path: Path) -> None:
    from support.kernel_client import RunningKernel

    printed = []
    for name in ("a", "b"):
        k = RunningKernel(tmp_path / name)
        try:
            run = k.execute("import random, numpy as np\nprint(random.random(), np.random.rand())")
            assert run.status == "ok"
            printed.append(run.stream("stdout"))
        finally:
            k.shutdown()
    (r1, n1), (r2, n2) = (p.split() for p in printed)
    assert r1 != r2 and n1 != n2


def test_images_of_other_preload_lists_are_kept_and_stale_ones_swept(tmp_path: Path) -> None:
    default_key = warm_image_key(warm.DEFAULT_PRELOAD)
    parent = warm.image_folder(default_key).parent
    # A stale image: another base (another version), unused for two days.
    stale = parent / ("0" * warm.BASE_CHARS + "f" * (40 - warm.BASE_CHARS))
    stale.mkdir(exist_ok=True)
    old = time.time() - 2 * 24 * 3600
    os.utime(stale, (old, old))
    recent_other_version = parent / ("1" * 40)
    recent_other_version.mkdir(exist_ok=True)
    warm._sweep_other_images(parent, keep=warm_image_key(SMALL))
    assert not stale.exists()  # stale: dropped
    assert recent_other_version.exists()  # another checkout's, in use lately: kept
    assert (parent / default_key).is_dir()  # this version's, another preload list: kept
    recent_other_version.rmdir()


@pytest.mark.slow
def test_a_sandbox_rebuilds_an_image_removed_while_its_process_ran(tmp_path: Path) -> None:
    import shutil

    image = prepare_warm_image(SMALL)
    shutil.rmtree(image.folder)
    sb = _sandbox(tmp_path / "ws", preload=SMALL)
    try:
        assert sb.started_from_image and sb.boot_notice is None
    finally:
        sb.close()


@pytest.mark.slow
def test_a_sandbox_never_waits_for_an_image_another_process_is_building(tmp_path: Path) -> None:
    import subprocess
    import sys

    preload = ("json", "string")
    key, folder = _no_image_yet(preload)
    lock_path = folder.parent / f"{key}.lock"
    # Another process (the background warm-up, say) holds the build lock and takes long.
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(lock_path)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\ntime.sleep(600)\n"],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(warm.ImageBusy):
            prepare_warm_image(preload, wait=False)
        sb = _sandbox(tmp_path / "a", preload=preload)
        try:
            assert not sb.started_from_image
            assert sb.boot_notice is None  # only slower this once: nothing the user must act on
            assert _text(sb, "print(1 + 1)") == "2\n"
        finally:
            sb.close()
    finally:
        holder.kill()
        holder.wait()
    assert not (folder / MANIFEST_FILE).exists()
    sb = _sandbox(tmp_path / "b", preload=preload)  # the lock is free: built now, not remembered as failed
    try:
        assert sb.started_from_image and sb.boot_notice is None
    finally:
        sb.close()


def test_the_baseline_module_is_removed_once_the_optimized_one_replaces_it(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # A first start's ~400 MB baseline module serves no later start: kept, the cache
    # held it (and doctor did not say) after every first run.
    from wasm_kernel.host.module_cache import guest_cache_path
    from wasm_kernel.runtime.provisioning import drop_baseline_module

    monkeypatch.setenv("WASM_KERNEL_CACHE_DIR", str(tmp_path / "cache"))
    baseline = guest_cache_path(baseline=True)
    baseline.parent.mkdir(parents=True, exist_ok=True)
    baseline.write_bytes(b"\0" * 4096)
    drop_baseline_module()
    assert not baseline.exists()
    drop_baseline_module()  # nothing to remove: no error
