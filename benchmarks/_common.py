"""Shared helpers: rows of the result table, timing, RSS, native REPL, child processes."""

from __future__ import annotations

import ast
import json
import platform
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


@dataclass
class Row:
    """One line of the result table.

    `target` is checked against the guest figure (`target_on="guest"`) or against the
    ratio guest/native (`target_on="ratio"`); `target_max` is the bound (lower is better).
    """

    area: str
    name: str
    unit: str
    guest: float | None
    native: float | None = None
    target_max: float | None = None
    target_on: str = "guest"  # "guest" | "ratio"
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float | None:
        if self.guest is None or not self.native:
            return None
        return self.guest / self.native

    @property
    def target(self) -> str:
        if self.target_max is None:
            return ""
        if self.target_on == "ratio":
            return f"<= {self.target_max:g}x"
        return f"<= {fmt(self.target_max)} {self.unit}"

    @property
    def status(self) -> str:
        if self.target_max is None:
            return "-"
        value = self.ratio if self.target_on == "ratio" else self.guest
        if value is None:
            return "n/a"
        return "PASS" if value <= self.target_max else "FAIL"

    def as_json(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(ratio=self.ratio, target=self.target, status=self.status)
        return d


def fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    if ax >= 0.01:
        return f"{x:.3f}"
    return f"{x:.2g}"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "-"
    if r >= 100:
        return f"{r:,.0f}x"
    return f"{r:.2f}x"


def print_table(rows: list[Row], file: Any = None) -> None:
    file = file or sys.stdout
    headers = ["area", "name", "unit", "guest", "native", "ratio", "target", "status"]
    table = [
        [r.area, r.name, r.unit, fmt(r.guest), fmt(r.native), fmt_ratio(r.ratio), r.target, r.status]
        for r in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths))
    print(line, file=file)
    print("  ".join("-" * w for w in widths), file=file)
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths)), file=file)


def report_grades(rows: list[Row], wrong: list[str], all_right: str, path: Path | None, **raw: Any) -> int:
    """A grading benchmark's end: the table, the grades that differ from what the answers
    deserve (or `all_right`), the JSON if asked; 1 if any grade differs."""
    print_table(rows)
    if wrong:
        print("\nGRADES DIFFER FROM WHAT THE ANSWERS DESERVE:\n  " + "\n  ".join(wrong))
    else:
        print(f"\n{all_right}")
    if path is not None:
        path.write_text(json.dumps({"machine": machine_facts(), "rows": [r.as_json() for r in rows], **raw,
                                    "wrong": wrong}, indent=2) + "\n")
    return 1 if wrong else 0


def emit_json(result: dict[str, Any], path: Path | None) -> None:
    """Print a script's result as JSON, and save it to `path` if one was given."""
    text = json.dumps(result, indent=2)
    print(text)
    if path is not None:
        path.write_text(text + "\n")


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))]


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of fn takes (perf_counter)."""
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def rss_kib(pid: int | str = "self") -> dict[str, int]:
    """VmRSS and its anon/file split from /proc/<pid>/status, plus Pss from
    smaps_rollup (proportional: a page mapped twice, e.g. the same compiled-guest
    page in two sandboxes, counts once), in KiB."""
    out: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "RssShmem", "VmHWM"):
                out[key] = int(rest.split()[0])
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Pss", "Pss_Anon", "Pss_File"):
                    out[key] = int(rest.split()[0])
    except OSError:
        pass
    return out


@contextmanager
def temp_workspace(prefix: str = "wk-bench-") -> Iterator[Path]:
    import shutil

    d = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def quiet_policy(**changes: Any) -> Any:
    """The default ExecutionPolicy, with a CPU-time and a fuel budget big enough for every cell here."""
    from wasm_kernel import ExecutionPolicy

    return ExecutionPolicy(**{"fuel_budget": 10**13, "cpu_seconds": 3600.0, **changes})


def check(result: Any, what: str) -> Any:
    """Fail loudly if a guest cell did not succeed: a benchmark of an error is no benchmark."""
    if not result.success:
        err = result.error
        raise RuntimeError(
            f"{what}: guest cell failed: trap={result.trap} error={err and (err.ename, err.evalue)} "
            f"stderr={result.stderr[-500:]!r}"
        )
    return result


# --- native REPL ----------------------------------------------------------------


class NativeRepl:
    """What a REPL does for one cell, natively and in-process, the way the guest's
    run_cell does it: parse, split off a trailing expression, compile, exec, eval the
    expression, and capture its repr (plus `_`) as the echoed result. No isolation,
    no IPC: the floor a sandboxed turn is compared with."""

    def __init__(self) -> None:
        self.ns: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
        self.outputs: list[str] = []
        self.n = 0

    def run(self, source: str) -> None:
        self.n += 1
        filename = f"<cell-{self.n}>"
        tree = ast.parse(source, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, filename, "exec"), self.ns)
        if last is not None:
            value = eval(compile(last, filename, "eval"), self.ns)
            if value is not None:
                self.ns["_"] = value
                self.outputs.append(repr(value))


# --- child processes --------------------------------------------------------------


def python_for_children() -> str:
    return sys.executable


def run_child_json(args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300) -> Any:
    """Run a child that prints one JSON document as its last stdout line."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.run(args, capture_output=True, text=True, env=full_env, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    if not lines:
        raise RuntimeError(f"child {args} printed nothing; stderr:\n{proc.stderr[-2000:]}")
    return json.loads(lines[-1])


def write_results(
    path: Path, rows: list[Row], raw: Any, *, elapsed: float, note: str | None, machine: dict[str, Any], **extra: Any
) -> None:
    """The --json document every benchmark script writes: how it was run, on what, and its rows."""
    doc = {
        "command": " ".join([sys.executable, *sys.argv]),
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "elapsed_s": elapsed,
        "note": note,
        "machine": machine,
        "loadavg_at_end": os.getloadavg(),
        **extra,
        "rows": [r.as_json() for r in rows],
        "raw": raw,
    }
    path.write_text(json.dumps(doc, indent=1, default=str))
    log(f"wrote {path}")


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def machine_facts() -> dict[str, Any]:
    cpu = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    from importlib.metadata import version

    def v(pkg: str) -> str | None:
        try:
            return version(pkg)
        except Exception:
            return None

    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "kernel": platform.release(),
        "mem_total_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "loadavg_at_start": load,
        "host_python": platform.python_version(),
        "wasmtime": v("wasmtime"),
        "wasm_kernel": v("wasm-kernel"),
        "numpy": v("numpy"),
        "pandas": v("pandas"),
        "wasm_kernel_path": _package_dir(),
        "git_commit": _git_commit(),
        "wasm_kernel_uncommitted": _git_dirty(),
    }


def _package_dir() -> str:
    """Where the wasm_kernel being measured was imported from (an editable install, or
    another checkout put first on PYTHONPATH)."""
    import importlib.util

    spec = importlib.util.find_spec("wasm_kernel")
    return str(Path(spec.origin).parent) if spec and spec.origin else "?"


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], capture_output=True, text=True, cwd=Path(_package_dir()).parent)
    except OSError:
        return None
    return proc.stdout if proc.returncode == 0 else None


def _git_commit() -> str | None:
    out = _git("rev-parse", "--short", "HEAD")
    return out.strip() if out else None


def _git_dirty() -> list[str] | None:
    """Files of the measured package that differ from its commit."""
    out = _git("status", "--porcelain", "--", "wasm_kernel")
    return None if out is None else [line[3:] for line in out.splitlines()]
