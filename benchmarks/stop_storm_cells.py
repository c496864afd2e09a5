"""The guest code of the stop storm (stop_storm.py): the canary, the good cell that
checks and moves it, the workloads a hard stop lands in, and the checks of what the
good cell prints and the files a stopped cell reported.

The canary is state only the good cells change: a counter, a dict of checksums, a
numpy array, a bytearray, a list, an open file in /tmp (its Python position and its
WASI descriptor's offset) and the names the namespace holds. Its fingerprint is
printed before and after each good cell moves it; a stopped cell moves it too (before
its workload), so only an exact rollback prints the same fingerprint again.

Each workload's loop never ends by itself, and swallows KeyboardInterrupt (mutation
included): a soft interrupt changes nothing, and only a hard stop ends the cell.
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

# Defined once per sandbox or kernel. `storm_*` are the canary and the workloads'
# inputs (made here, so that a workload's loop starts at once).
SETUP = """\
import hashlib as _sh, os as _so, zlib as _sz
import numpy as _np
storm = {
    'counter': 0,
    'sums': {},
    'arr': _np.arange(1 << 18, dtype=_np.int64),
    'blob': bytearray(1 << 20),
    'seen': [],
    'log': open('/tmp/storm-canary.log', 'w+'),
}
storm_src = bytes(range(256)) * ((24 << 20) // 256)  # 24 MiB, the copies' source
storm_big = _np.random.default_rng(1).random(1_000_000)
storm_mat = _np.random.default_rng(2).random((300, 300))
_so.makedirs('/app/storm', exist_ok=True)
_so.makedirs('/app/tracked', exist_ok=True)

def storm_print():
    s, f = storm, storm['log']
    h = _sh.sha256()
    h.update(repr((s['counter'], sorted(s['sums'].items()), s['seen'])).encode())
    h.update(s['arr'].tobytes())
    h.update(bytes(s['blob']))
    h.update(repr(sorted(n for n in globals() if not n.startswith('_'))).encode())
    return f"{s['counter']} {h.hexdigest()[:32]} {f.tell()} {_so.lseek(f.fileno(), 0, 1)}"

def storm_mutate(k):
    s = storm
    s['counter'] += 1
    s['sums'][k % 101] = _sz.crc32(repr(k).encode())
    s['arr'][_np.random.default_rng(abs(k)).integers(0, len(s['arr']), 512)] += k
    s['blob'][abs(k) * 4099 % len(s['blob'])] ^= (k & 0xFF) or 1
    s['seen'].append(k)
    s['log'].write(f'{k}\\n')
    s['log'].flush()
"""

# A kernel's comm target whose handler moves the canary and loops (comm_frontend).
COMM_TARGET = """\
from comm import create_comm as _storm_cc
storm_spin = _storm_cc(target_name='storm-spin')

def _storm_handler(msg):
    k = msg['content']['data']['k']
    while True:
        try:
            storm_mutate(k)
            while True:
                storm_spin.send({'k': k})
                _np.sort(storm_big[:100_000])
        except KeyboardInterrupt:
            pass

storm_spin.on_msg(_storm_handler)
print('COMM', storm_spin.comm_id)
"""

CANARY_MARK = "CANARY"


def setup_cell(kernel: bool) -> str:
    """The canary and the workloads' inputs (a kernel's comm target too), then the
    first fingerprint, once every name is defined."""
    return SETUP + (COMM_TARGET if kernel else "") + f"print('{CANARY_MARK}', storm_print())\n"


def good_cell(key: int, collect: bool = False) -> str:
    """Print the fingerprint (the last good cell's, if the rollback was exact), move the
    canary by `key`, print the new one. collect: a full garbage collection between, so
    a heap a stop broke shows as a crash here rather than later."""
    gc = "import gc as _sgc\n_sgc.collect()\n" if collect else ""
    return f"print('{CANARY_MARK}', storm_print())\nstorm_mutate({key})\n{gc}print('{CANARY_MARK}', storm_print())\n"


def canary_lines(stdout: str) -> list[str]:
    return [line[len(CANARY_MARK) + 1:] for line in stdout.splitlines() if line.startswith(CANARY_MARK + " ")]


@dataclass(frozen=True)
class Workload:
    """One place for a stop to land. group: the issue's name for it. body: the loop's
    code (runs forever), after `prelude`; {web} is the loopback server's base URL.
    where: "library" (a sandbox in a worker process), "kernel", or both. input:
    "answer" (each input() is answered at once), "never" (the guest waits), or None.
    computes: a CPU budget can stop it (a guest blocked in a host call uses none).
    cell: False for a frontend's comm message, stopped by interrupts only (a cell's
    %limits sets the deadline and the CPU budget of the cell it starts)."""

    name: str
    group: str
    body: str
    prelude: str = ""
    where: tuple[str, ...] = ("library", "kernel")
    input: str | None = None
    computes: bool = True
    cell: bool = True

    @property
    def stops(self) -> tuple[str, ...]:
        """The stops that can end it: a deadline stands still while input() waits for
        its answer, and a CPU budget runs out only in a workload that computes."""
        kinds = ["interrupt", "soft_then_hard"]
        if self.input is None and self.cell:
            kinds.append("deadline")
        if self.computes and self.cell:
            kinds.append("cpu")
        return tuple(kinds)


WORKLOADS = {w.name: w for w in (
    Workload("numpy_dot", "numpy C loop", "_a = _np.dot(_a, storm_mat)\n_a /= _a.max()", "_a = storm_mat.copy()"),
    Workload("numpy_sort", "numpy C loop", "_np.sort(storm_big)"),
    Workload("memory_copy", "memory.copy", "_b[:] = storm_src", "_b = bytearray(len(storm_src))"),
    Workload("bytes_copy", "memory.copy", "_d = bytes(storm_src)\n_e = _d[7:]\ndel _d, _e"),
    Workload("wasi_files", "WASI calls", (
        "_i += 1\n_p = f'/app/storm/w{_i % 8}.bin'\n"
        "with open(_p, 'wb') as _f:\n    _f.write(storm_src[:65536])\n"
        "with open(_p, 'rb') as _f:\n    _f.read()\n"
        "_so.stat(_p)\n_so.listdir('/app/storm')\n_so.stat('/tmp')\n"
        "with open(f'/tmp/storm-t{_i % 4}', 'w') as _f:\n    _f.write('x' * 4096)\n"
        "if _i % 16 == 0:\n    _so.replace(_p, '/app/storm/renamed.bin')"), "_i = 0"),
    Workload("wasi_stat", "WASI calls", "_so.stat('/app')\n_so.stat('/tmp/storm-canary.log')"),
    Workload("door_display", "host doors", (
        "_i += 1\n_disp(_HTML(f'<b>{_i}</b>'))\nif _i % 50 == 0:\n    _clear(wait=True)"),
        "from IPython.display import display as _disp, HTML as _HTML, clear_output as _clear\n_i = 0"),
    Workload("door_comm", "host doors", "_c.send({'n': 1}, buffers=[b'xyz'])",
             "from comm import create_comm as _cc\n_c = _cc(target_name='storm')"),
    Workload("door_input", "host doors", "input('storm? ')", input="answer", computes=False),
    Workload("door_history", "host doors", "_hm.search('*CANARY*')\n_hm.get_tail(20)",
             "_hm = get_ipython().history_manager", where=("kernel",)),
    # A CPU budget does not run while the guest waits for the server (a slow answer, the
    # request's own timeout): only the other stops are certain to end these.
    Workload("door_network", "host doors", "try:\n    _u.urlopen('{web}/api').read()\nexcept OSError:\n    pass",
             "import urllib.request as _u", computes=False),
    Workload("door_network_body", "host doors",
             "try:\n    _u.urlopen('{web}/bytes?n=8388608').read()\nexcept OSError:\n    pass",
             "import urllib.request as _u", computes=False),
    Workload("door_files", "host doors", (
        "_i += 1\n_p = f'/app/tracked/f{_i % 40}.txt'\n"
        "if _so.path.exists(_p):\n    _so.remove(_p)\nelse:\n    open(_p, 'w').write(str(_i))"), "_i = 0"),
    Workload("flood_stdout", "output floods", "print('storm flood ' * 8)"),
    Workload("flood_mixed", "output floods", "_sys.stdout.write('o' * 7777)\n_sys.stderr.write('e' * 333 + '\\n')",
             "import sys as _sys"),
    Workload("blocked_input", "guest in a host call", "input('never answered? ')", input="never", computes=False),
    Workload("blocked_sleep", "guest in a host call", "_t.sleep(30)", "import time as _t", computes=False),
    Workload("blocked_network", "guest in a host call",
             "try:\n    _u.urlopen('{web}/hang?s=20').read()\nexcept OSError:\n    pass",
             "import urllib.request as _u", computes=False),
    # Not a cell: a frontend's comm_msg to the kernel's looping handler (COMM_TARGET).
    Workload("comm_frontend", "host doors", "", where=("kernel",), cell=False),
)}


def stopped_cell(workload: Workload, key: int, web: str) -> str:
    """The cell a stop lands in: the canary moved by `key`, then the workload forever."""
    inner = textwrap.indent(workload.body.replace("{web}", web), " " * 8)
    prelude = textwrap.indent(workload.prelude.replace("{web}", web), " " * 8) + "\n" if workload.prelude else ""
    return (f"while True:\n    try:\n        storm_mutate({key})\n{prelude}        while True:\n"
            f"{textwrap.indent(inner, '    ')}\n    except KeyboardInterrupt:\n        pass\n")


def file_change_problems(workspace: Path, stopped: dict[str, list[str]], after: dict[str, list[str]]) -> list[str]:
    """The stopped cell's reported file changes against the disk, and the next cell's
    (which writes nothing in /app): the stopped cell's changes are not blamed on it."""
    problems = []
    for path in stopped["files_created"] + stopped["files_modified"]:
        if not (workspace / path).exists():
            problems.append(f"reported created or modified, but missing: {path}")
    for path in stopped["files_deleted"]:
        if (workspace / path).exists():
            problems.append(f"reported deleted, but present: {path}")
    blamed = {k: v for k, v in after.items() if v}
    if blamed:
        problems.append(f"the next cell was blamed for file changes it did not make: {blamed}")
    return problems[:5]


def canary_count(line: str) -> int:
    """The good cells a canary's second line counts."""
    return int(line.split()[0])


def check_canary(stdout: str, expected: str, good: int) -> tuple[list[str], str | None]:
    """(problems, the new expected fingerprint) from a good cell's two canary lines."""
    lines = canary_lines(stdout)
    if len(lines) != 2:
        return [f"the good cell printed {len(lines)} canary lines: {stdout[-300:]!r}"], None
    problems = []
    if lines[0] != expected:
        problems.append(f"canary after the stop {lines[0]!r} != before it {expected!r}")
    if lines[1].split()[0] != str(good):
        problems.append(f"canary counter {lines[1].split()[0]} after {good} good cells")
    return problems, lines[1]


def diagnose(pid: int, path: Path) -> str:
    """A hung process's threads, for the storm's report: native stacks (gdb), then
    Python's (faulthandler, which the storm's processes run with, on SIGABRT: the
    process ends). Returns where they were written."""
    import signal
    import subprocess

    with open(path, "w") as out:
        for task in sorted(Path(f"/proc/{pid}/task").glob("*")):  # each thread's signals: pending, blocked
            try:
                fields = dict(line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                              if ":\t" in line)
            except OSError:
                continue
            out.write(f"task {task.name} {fields.get('Name', '').strip()} state={fields.get('State', '').strip()} "
                      + " ".join(f"{k}={fields.get(k, '').strip()}" for k in ("SigPnd", "ShdPnd", "SigBlk", "SigCgt"))
                      + f" tracer={fields.get('TracerPid', '').strip()}\n")
        out.flush()
        try:
            subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt"], stdout=out,
                           stderr=subprocess.STDOUT, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as err:
            out.write(f"gdb: {err}\n")
    try:
        os.kill(pid, signal.SIGABRT)
    except ProcessLookupError:
        pass
    return str(path)
