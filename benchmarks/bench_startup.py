"""Area 2: sandbox start, cold (first sandbox of a fresh process) and warm (later ones).

Cold, guest: spawn `python benchmarks/startup_child.py` and time until it prints
READY, i.e. interpreter start + `import wasm_kernel` + the first create_sandbox
(loading the cached compiled guest, instantiating, booting CPython in wasm, the boot
checkpoint). The compile cache is warm (a cache miss is a one-off ~100 s compile).
Cold, native: spawn `python -c "print('READY', flush=True)"` with the same Python
and time until READY: a fresh isolated native interpreter. (`python -c pass`
spawn-to-exit is kept in `extra` as well.)

Warm, guest: create_sandbox() in a process that already has one sandbox open.
Warm, native: code.InteractiveInterpreter() with a fresh namespace, the in-process
equivalent of a new REPL. There is no isolation in the native figure, so the ratio
is huge by construction; `python -c pass` is the native figure for an isolated one.
"""

from __future__ import annotations

import code
import subprocess
import sys
import time

from _common import HERE, Row, log, median, quiet_policy, temp_workspace

COLD_TARGET_S = 0.5
WARM_TARGET_MS = 50.0


def _spawn_until_ready(args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    ready = time.perf_counter() - t
    if line.strip() != "READY":
        proc.kill()
        raise RuntimeError(f"{args}: expected READY, got {line!r}; stderr: {proc.stderr.read()[-2000:] if proc.stderr else ''}")
    rest, err = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"{args} failed: {err[-2000:]}")
    return ready, rest


def run_cold(repeats: int = 5) -> list[Row]:
    import json

    log(f"startup: cold x{repeats}")
    guest, breakdown = [], []
    with temp_workspace() as ws:
        for _ in range(repeats):
            ready, rest = _spawn_until_ready([sys.executable, str(HERE / "startup_child.py"), str(ws)])
            info = json.loads(rest.strip().splitlines()[-1])
            if not info["ok"]:
                raise RuntimeError(f"cold child: first execute failed: {info}")
            guest.append(ready)
            breakdown.append(info)
    native = [_spawn_until_ready([sys.executable, "-c", "print('READY', flush=True)"])[0] for _ in range(repeats)]
    native_pass = []
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        native_pass.append(time.perf_counter() - t)
    extra = {k: median([b[k] for b in breakdown]) for k in breakdown[0] if k != "ok"}
    extra["native_python_c_pass_s"] = median(native_pass)
    extra["guest_samples_s"] = guest
    return [
        Row("startup", "cold: spawn -> first sandbox ready", "s", median(guest), median(native), COLD_TARGET_S,
            note="native = spawn python until it prints", extra=extra),
        Row("startup", "cold: first execute('1+1') after create", "s", extra["first_execute_s"], None,
            note="in the fresh process, informative"),
    ]


def run_warm(repeats: int = 10) -> list[Row]:
    from wasm_kernel import create_sandbox

    log(f"startup: warm x{repeats}")
    creates, closes, firsts = [], [], []
    with temp_workspace() as ws:
        first = create_sandbox(workspace=ws, policy=quiet_policy())
        try:
            for _ in range(repeats):
                t = time.perf_counter()
                sb = create_sandbox(workspace=ws, policy=quiet_policy())
                creates.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                sb.execute("1+1")
                firsts.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                sb.close()
                closes.append((time.perf_counter() - t) * 1000)
        finally:
            first.close()
    native = []
    for _ in range(200):
        t = time.perf_counter()
        code.InteractiveInterpreter(locals={"__name__": "__console__", "__doc__": None})
        native.append((time.perf_counter() - t) * 1000)
    return [
        Row("startup", "warm: later create_sandbox()", "ms", median(creates), median(native), WARM_TARGET_MS,
            note="native = code.InteractiveInterpreter() in-process",
            extra={"close_ms": median(closes), "first_execute_ms": median(firsts), "samples_ms": creates}),
        Row("startup", "warm: create_sandbox() + first execute('1+1')", "ms",
            median([a + b for a, b in zip(creates, firsts)]), None,
            note="informative: work deferred past create (e.g. the boot checkpoint) shows here"),
        Row("startup", "warm: close()", "ms", median(closes), None, note="informative"),
    ]
