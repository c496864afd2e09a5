"""`wasm-kernel doctor`: is this installation ready, and if not, what to do.

Each check says what it found and, when something is missing, the command that
fixes it. A missing piece that breaks the kernel is a failure (exit 1); one that
only makes it slower (a cold compile cache, no fast checkpoints) is a warning.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .kernel_config import kernel_metering, kernel_setting, kernel_workspace_root

OK, WARN, FAIL, INFO = "ok", "warn", "fail", "info"
_MARKS = {OK: "✓", WARN: "!", FAIL: "✗", INFO: "-"}
EXAMPLES = """\
examples:
  wasm-kernel doctor                                  check this installation
  wasm-kernel doctor --redis redis://127.0.0.1:6379/0 also check the scale-out pool's Redis
  wasm-kernel doctor --json                           the same, for scripts
"""
LAB_EXTENSION = "jupyterlab-wasm-kernel"
# Each kernel takes one inotify instance and a watch per folder in /app.
MIN_INOTIFY_INSTANCES = 64
MIN_INOTIFY_WATCHES = 8192


@dataclass
class Check:
    status: str
    name: str
    found: str
    fix: str = ""


def add_parser(sub: Any) -> None:
    p = sub.add_parser("doctor", help="check the installation (kernelspec, compile cache, checkpoints, inotify, "
                       "lab extension, Redis) and say how to fix what is missing", epilog=EXAMPLES)
    p.add_argument("--redis", metavar="URL", default=os.environ.get("WASM_KERNEL_REDIS_URL"),
                   help="also check that this Redis answers (default: $WASM_KERNEL_REDIS_URL, if set)")
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checks = [check_versions(), check_kernelspec(), *check_cache(), check_workspace_root(), check_checkpoints(),
              check_stops(), check_inotify(), check_lab_extension()]
    if args.redis:
        checks.append(check_redis(args.redis))
    if args.json:
        import json
        from dataclasses import asdict

        print(json.dumps([asdict(c) for c in checks], indent=2))
    else:
        color = sys.stdout.isatty() and "NO_COLOR" not in os.environ
        codes = {OK: "32", WARN: "33", FAIL: "31", INFO: "2"}
        for c in checks:
            mark = f"\033[{codes[c.status]}m{_MARKS[c.status]}\033[0m" if color else _MARKS[c.status]
            print(f"{mark} {c.name + ':':<16} {c.found}")
            if c.fix:
                print(f"  {'':<16} fix: {c.fix}")
        failed = sum(c.status == FAIL for c in checks)
        warned = sum(c.status == WARN for c in checks)
        print("\nall green" if not failed and not warned else
              f"\n{failed} problem{'s' * (failed != 1)}, {warned} warning{'s' * (warned != 1)}")
    return 1 if any(c.status == FAIL for c in checks) else 0


def check_versions() -> Check:
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "?"

    return Check(INFO, "versions", f"wasm-kernel {v('wasm-kernel')}, wasmtime {v('wasmtime')}, "
                 f"Python {sys.version.split()[0]} ({sys.executable})")


def check_kernelspec() -> Check:
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    from ..kernelspec import KERNEL_NAME

    fix = "wasm-kernel install"
    try:
        spec = KernelSpecManager().get_kernel_spec(KERNEL_NAME)
    except NoSuchKernel:
        return Check(FAIL, "kernelspec", f"Jupyter does not find the {KERNEL_NAME} kernel", fix)
    python = spec.argv[0] if spec.argv else ""
    where = f"{KERNEL_NAME} in {spec.resource_dir}"
    if python in ("python", "python3"):  # jupyter_client runs it with the launching Jupyter's own Python
        return Check(OK, "kernelspec", f"{where} (runs the Python that Jupyter runs in)")
    try:
        ok = subprocess.run([python, "-c", "import wasm_kernel"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        return Check(FAIL, "kernelspec", f"{where} runs {python}, which cannot import wasm_kernel", fix)
    return Check(OK, "kernelspec", f"{where} (runs {python})")


def check_cache() -> list[Check]:
    from ..host.cache_dir import cache_root, cache_usage
    from ..host.guest_site import is_site_staged
    from ..host.module_cache import guest_cache_path, is_guest_cached
    from ..runtime.provisioning import is_warm_image_ready
    from ..runtime.warm_image import DEFAULT_PRELOAD

    warm = "wasm-kernel precompile"
    root = cache_root()
    try:
        metering = kernel_metering()
    except ValueError as err:
        return [Check(FAIL, "compile cache", f"c.WasmKernel.{err}", 'set c.WasmKernel.metering to "time" or "fuel"')]
    if not is_guest_cached():
        return [Check(WARN, "compile cache", f"cold: the guest ({metering} metering) is not compiled yet in {root}; the first kernel "
                      "start compiles it (a first result in about 16 s, the optimized build 1-5 minutes later in the "
                      "background, on a 2-core machine: BENCHMARKS.md)", f"{warm} (do it once, now)")]
    size = guest_cache_path().stat().st_size
    used, files = cache_usage(root)
    checks = [Check(OK, "compile cache", f"guest compiled for {metering} metering ({size / 2**20:.0f} MiB) in {root}, "
                    f"which holds {used / 2**20:.0f} MiB on disk in {files:,} files")]
    preload = tuple(kernel_setting("preload_modules", DEFAULT_PRELOAD))
    if not kernel_setting("warm_image", True):
        checks.append(Check(INFO, "warm image", "off (WasmKernel.warm_image = False): each kernel boots the guest"))
    elif is_site_staged() and is_warm_image_ready(preload):
        checks.append(Check(OK, "warm image", f"built, preloading {', '.join(preload) or 'no modules'}"))
    else:
        checks.append(Check(WARN, "warm image", "not built yet: the first kernel builds it (a few seconds)", warm))
    return checks


def check_workspace_root() -> Check:
    root = kernel_workspace_root()
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return Check(FAIL, "sessions", f"{root} cannot be created or written ({existing} is not writable)",
                     "set c.WasmKernel.workspace_root in jupyter_config.py to a folder you can write")
    return Check(OK, "sessions", f"{root}" + ("" if root.exists() else " (created by the first kernel)"))


def check_checkpoints() -> Check:
    import platform

    from ..host.dirty_pages import DirtyPages

    tracker = DirtyPages.open()
    if tracker is not None:
        tracker.close()
        return Check(OK, "checkpoints", "fast: userfaultfd write-protect tracking (only written pages are copied)")
    if os.environ.get("WASM_KERNEL_FULL_CHECKPOINTS"):
        return Check(INFO, "checkpoints", "full copies (WASM_KERNEL_FULL_CHECKPOINTS is set)")
    setting = _read("/proc/sys/vm/unprivileged_userfaultfd")
    return Check(WARN, "checkpoints", f"slower: userfaultfd write-protect is not available (Linux {platform.release()}, "
                 f"vm.unprivileged_userfaultfd={setting or '?'}); each checkpoint copies all guest memory",
                 "Linux 6.7 or later, and no seccomp profile that blocks userfaultfd (containers)")


def check_stops() -> Check:
    from ..host.engine import HARD_STOPS_ENV
    from ..host.thread_stop import unavailable_reason

    if os.environ.get(HARD_STOPS_ENV, "") == "epochs":
        return Check(INFO, "stops", f"by epochs ({HARD_STOPS_ENV}=epochs): pure Python about 1.2x slower in time metering")
    reason = unavailable_reason()
    if reason is None:
        return Check(OK, "stops", "by trap (ptrace): time metering runs without epoch checks")
    return Check(WARN, "stops", f"by epochs: {reason}; pure Python about 1.2x slower in time metering",
                 "allow ptrace of a process's own threads (kernel.yama.ptrace_scope <= 1; a container's "
                 "seccomp profile that permits ptrace)")


def check_inotify() -> Check:
    instances, watches = _read("/proc/sys/fs/inotify/max_user_instances"), _read("/proc/sys/fs/inotify/max_user_watches")
    if not instances or not watches:
        return Check(WARN, "inotify", "no inotify limits found: file changes are found by scanning /app",
                     "run on Linux with inotify")
    found = f"{instances} instances, {watches} watches per user (a kernel takes 1 instance, 1 watch per folder)"
    if int(instances) < MIN_INOTIFY_INSTANCES or int(watches) < MIN_INOTIFY_WATCHES:
        return Check(WARN, "inotify", found + "; low for many kernels",
                     f"sudo sysctl fs.inotify.max_user_instances={max(int(instances), 512)} "
                     f"fs.inotify.max_user_watches={max(int(watches), 524288)}")
    return Check(OK, "inotify", found)


def check_lab_extension() -> Check:
    from jupyter_core.paths import jupyter_path

    found = next((Path(p) / LAB_EXTENSION for p in jupyter_path("labextensions")
                  if (Path(p) / LAB_EXTENSION / "package.json").is_file()), None)
    try:
        import jupyterlab  # noqa: F401
        lab = True
    except ImportError:
        lab = False
    if found is None:
        return Check(FAIL if lab else WARN, "lab extension", f"{LAB_EXTENSION} is not installed where JupyterLab looks",
                     "pip install --force-reinstall --no-deps wasm-kernel")
    if not lab:
        return Check(INFO, "lab extension", f"ready in {found}; JupyterLab is not installed here (pip install jupyterlab)")
    return Check(OK, "lab extension", f"{LAB_EXTENSION} in {found}")


def check_redis(url: str) -> Check:
    try:
        import redis
    except ImportError:
        return Check(FAIL, "redis", "the redis client is not installed", "pip install 'wasm-kernel[cluster]'")
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        client.ping()
        info = client.info("server")
        client.close()
    except (redis.RedisError, ValueError, OSError) as err:
        first = (str(err).splitlines() or [type(err).__name__])[0]
        return Check(FAIL, "redis", f"{_safe_url(url)} does not answer: {first}",
                     "start redis-server, or pass the right --redis URL")
    return Check(OK, "redis", f"{_safe_url(url)} answers (Redis {info.get('redis_version', '?')})")


def _safe_url(url: str) -> str:
    """The URL without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password:
        netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""
