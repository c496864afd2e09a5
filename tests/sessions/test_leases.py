"""Leases: shared for sandboxes, exclusive for prune/delete, and safe against the
lock file being unlinked by a prune while someone waits for it."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

from wasm_kernel.sessions.layout import lease_path
from wasm_kernel.sessions.leases import acquire_lease, is_session_in_use, try_exclusive_lease


def test_shared_leases_coexist_and_block_exclusive_ones(tmp_path: Path) -> None:
    sid = str(uuid.uuid4())
    a, b = acquire_lease(tmp_path, sid), acquire_lease(tmp_path, sid)
    assert try_exclusive_lease(tmp_path, sid) is None and is_session_in_use(tmp_path, sid)
    a.release()
    assert try_exclusive_lease(tmp_path, sid) is None
    b.release()
    b.release()  # idempotent
    ex = try_exclusive_lease(tmp_path, sid)
    assert ex is not None and try_exclusive_lease(tmp_path, sid) is None
    ex.release()
    assert not is_session_in_use(tmp_path, sid)


def test_a_waiter_never_ends_up_holding_an_unlinked_lock_file(tmp_path: Path) -> None:
    sid = str(uuid.uuid4())
    pruner = try_exclusive_lease(tmp_path, sid)
    assert pruner is not None
    got = []
    waiter = threading.Thread(target=lambda: got.append(acquire_lease(tmp_path, sid)), daemon=True)
    waiter.start()  # opens the current lock file and blocks on it
    time.sleep(0.2)
    assert not got
    pruner.release(unlink=True)  # the session was pruned: its lock file is gone
    waiter.join(10)
    lease = got[0]
    try:
        # The waiter retried on a fresh file: the path names the file it locked, so
        # a later prune sees the session as in use.
        assert lease_path(tmp_path, sid).exists()
        assert os.stat(lease_path(tmp_path, sid)).st_ino == os.fstat(lease._fd).st_ino  # type: ignore[arg-type]
        assert try_exclusive_lease(tmp_path, sid) is None
    finally:
        lease.release()


def test_a_holder_learns_whether_another_process_holds_the_session_too(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    root = tmp_path / "root"
    root.mkdir()
    sid = "0" * 8 + "-0000-4000-8000-" + "0" * 12
    mine = acquire_lease(root, sid)
    try:
        assert not mine.shared_with_others()
        # Another process holds it, then lets go: both are seen, at once.
        script = textwrap.dedent(f"""
            import sys
            from pathlib import Path
            from wasm_kernel.sessions.leases import acquire_lease
            lease = acquire_lease(Path({str(root)!r}), {sid!r})
            print(lease.shared_with_others(), flush=True)
            sys.stdin.readline()
            lease.release()
        """)
        other = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 text=True)
        assert other.stdout is not None and other.stdin is not None
        assert other.stdout.readline().strip() == "True"  # it sees this process
        assert mine.shared_with_others()
        other.stdin.write("\n")
        other.stdin.flush()
        other.wait(timeout=30)
        assert not mine.shared_with_others()
        # A second holder in the same process is not "another kernel".
        again = acquire_lease(root, sid)
        assert not mine.shared_with_others()
        again.release()
    finally:
        mine.release()
