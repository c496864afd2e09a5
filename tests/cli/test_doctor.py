"""`wasm-kernel doctor`: green on a working install, and on each missing piece it
names the problem and the command that fixes it. Run as the real command."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli_runs import COMMAND
from wasm_kernel.host.dirty_pages import DirtyPages
from wasm_kernel.host.thread_stop import unavailable_reason

pytestmark = pytest.mark.slow  # the real command, with Redis probes that wait for their timeout


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != "WASM_KERNEL_REDIS_URL"} | env
    return subprocess.run([*COMMAND, "doctor", *args], capture_output=True, text=True, timeout=120, env=full)


def checks(*args: str, **env: str) -> dict[str, dict[str, str]]:
    proc = doctor("--json", *args, **env)
    return {c["name"]: c for c in json.loads(proc.stdout)}


def fast_checkpoints_possible() -> bool:
    tracker = DirtyPages.open()
    if tracker is None:
        return False
    tracker.close()
    return True


def test_doctor_on_this_installation_is_all_green() -> None:
    """The test run's own install: kernelspec, compiled guest and warm image
    (`wasm-kernel precompile` ran first), lab extension, sessions root."""
    proc = doctor()
    assert proc.returncode == 0, proc.stdout
    found = checks()
    for name in ("kernelspec", "compile cache", "warm image", "sessions", "inotify", "lab extension"):
        assert found[name]["status"] == "ok", found[name]
    assert found["checkpoints"]["status"] == ("ok" if fast_checkpoints_possible() else "warn")
    assert found["stops"]["status"] == ("ok" if unavailable_reason() is None else "warn")
    if fast_checkpoints_possible() and unavailable_reason() is None:
        assert proc.stdout.rstrip().endswith("all green"), proc.stdout
    assert "✗" not in proc.stdout


def test_doctor_says_how_cells_are_stopped_and_the_operators_switch_back_to_epochs() -> None:
    found = checks()["stops"]
    if unavailable_reason() is None:
        assert found["status"] == "ok" and "by trap" in found["found"], found
    else:
        assert found["status"] == "warn" and "by epochs" in found["found"] and found["fix"], found
    kept = checks(WASM_KERNEL_HARD_STOPS="epochs")["stops"]
    assert kept["status"] == "info" and "WASM_KERNEL_HARD_STOPS=epochs" in kept["found"], kept


def test_doctor_with_an_empty_cache_reports_the_cold_compile_and_how_to_warm_it(tmp_path: Path) -> None:
    proc = doctor(WASM_KERNEL_CACHE_DIR=str(tmp_path / "cache"))
    assert proc.returncode == 0  # slower, not broken
    line = next(ln for ln in proc.stdout.splitlines() if "compile cache:" in ln)
    assert line.startswith("! ") and "cold" in line and "16 s" in line and "BENCHMARKS.md" in line
    assert "fix: wasm-kernel precompile" in proc.stdout
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.cwasm"))  # looked, built nothing


def test_doctor_reports_an_unreachable_redis_with_the_fix(tmp_path: Path) -> None:
    proc = doctor("--redis", "redis://:hunter2@127.0.0.1:1/0")
    assert proc.returncode == 1
    line = next(ln for ln in proc.stdout.splitlines() if "redis:" in ln)
    assert line.startswith("✗ ") and "does not answer" in line
    assert "hunter2" not in proc.stdout and "***" in line
    assert "fix: start redis-server" in proc.stdout


def test_doctor_checks_the_configured_redis(redis_server) -> None:  # type: ignore[no-untyped-def]
    found = checks(WASM_KERNEL_REDIS_URL=redis_server.url)
    assert found["redis"]["status"] == "ok" and "answers (Redis 7" in found["redis"]["found"]


def test_doctor_reports_a_sessions_root_it_cannot_write(tmp_path: Path) -> None:
    config = tmp_path / "config"
    config.mkdir()
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    (config / "jupyter_config.py").write_text(f"c.WasmKernel.workspace_root = {str(locked / 'sessions')!r}\n")
    if os.geteuid() == 0:  # root writes anywhere: use a path under a file instead
        (tmp_path / "file").write_text("")
        (config / "jupyter_config.py").write_text(f"c.WasmKernel.workspace_root = {str(tmp_path / 'file' / 's')!r}\n")
    proc = doctor(JUPYTER_CONFIG_DIR=str(config))
    assert proc.returncode == 1
    assert "✗ sessions:" in proc.stdout and "fix: set c.WasmKernel.workspace_root" in proc.stdout


def test_doctor_reports_what_the_whole_cache_holds_on_disk() -> None:
    # Not only the compiled guest: every module, image and staged tree the cache keeps.
    from wasm_kernel.host.cache_dir import cache_root

    found = checks()["compile cache"]["found"]
    held = re.search(r"which holds (\d+) MiB on disk in ([\d,]+) files", found)
    assert held, found
    du = subprocess.run(["du", "-s", "-B1", str(cache_root())], capture_output=True, text=True, check=True)
    on_disk = int(du.stdout.split()[0])
    assert abs(int(held.group(1)) - on_disk / 2**20) <= max(8, on_disk / 2**20 * 0.05), (found, on_disk)


def test_precompile_removes_the_first_starts_baseline_module_once_the_optimized_one_is_there(tmp_path: Path) -> None:
    # A cache as a first start leaves it: the baseline module, and the optimized one the
    # background warm-up compiled (here, this machine's, copied in).
    from wasm_kernel.host.module_cache import guest_cache_path

    cache = tmp_path / "cache"
    env = {"WASM_KERNEL_CACHE_DIR": str(cache)}
    optimized, baseline = guest_cache_path(), guest_cache_path(baseline=True)
    (cache / "modules").mkdir(parents=True)
    shutil.copyfile(optimized, cache / "modules" / optimized.name)
    (cache / "modules" / baseline.name).write_bytes(b"\0" * 4096)
    proc = subprocess.run([*COMMAND, "precompile"], capture_output=True, text=True, timeout=900,
                          env={**os.environ, **env})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (cache / "modules" / optimized.name).is_file()
    assert not (cache / "modules" / baseline.name).exists()
