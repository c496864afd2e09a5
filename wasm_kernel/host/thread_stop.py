"""Stop a thread that runs wasm, with no instrumentation in the wasm code.

wasmtime turns a memory fault in compiled wasm code into a trap: the call that
runs the guest returns with an error, and the store stays usable (the rollback that
follows puts the guest's memory back). So a guest that must stop (its deadline, its
CPU budget, an interrupt it did not take) can be made to fault: make its linear
memory inaccessible, and its next load or store traps.

Only in wasm code, though. A fault in the host code a guest calls (wasmtime's own
memory.copy and memory.grow, WASI, our Python doors) is a crash of the process. So
a tracer, a child forked for the stop, seizes the guest's thread with ptrace and
looks where it is. While it is in host code the tracer lets it run on until it
returns into wasm (breakpoints in the thread's own debug registers at the first
words on its stack that point into wasm code: the return address and any stale ones
below it; when the stale ones fill the registers, the next look at the same call
arms the words after them), or a moment, and looks again (never asking us
anything while it holds it there: in host code the thread may hold the GIL); once it is in wasm code the tracer asks us to protect the memory and
single-steps it, one instruction at a time, until a step faults (then the memory is
given back and the fault delivered: wasmtime's trap) or leaves wasm code (the
memory is given back first, and the tracer waits again). Nothing but the stopped
thread may touch the memory while it is protected: `protect()` says whether it
could take everything that does.

It costs nothing until a stop: no epoch check in every loop and function (1.22x on
pure Python), no process boundary per cell. A stop costs a fork (a few ms), one or
two steps for a loop in the interpreter, and for a thread that spends its time in
memory.copy, as many looks as it takes to find it between copies.

Linux on x86-64 only, where ptrace is allowed (`unavailable_reason()`); elsewhere
the engine keeps its epochs.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import sys
import threading
import time
import warnings
from collections.abc import Callable, Sequence

from .log import get_logger

log = get_logger("wasm_kernel.host")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
_libc.waitpid.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.c_int]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.process_vm_readv.restype = ctypes.c_ssize_t
_libc.process_vm_readv.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong,
                                   ctypes.c_ulong]

_PTRACE_POKEUSER, _PTRACE_CONT, _PTRACE_SINGLESTEP, _PTRACE_GETREGS, _PTRACE_DETACH = 6, 7, 9, 12, 17
_PTRACE_SEIZE, _PTRACE_INTERRUPT = 0x4206, 0x4207
_WALL, _WNOHANG = 0x40000000, 1
_DEBUGREG = 848  # offsetof(struct user, u_debugreg) on x86-64: DR0-DR3, then DR7 at +56
_BREAKPOINTS = 4
_PR_SET_PTRACER = 0x59616D61  # Yama: let this child trace us
_RIP, _RSP = 16, 19  # user_regs_struct's instruction and stack pointers, in 8-byte words
_REGS_WORDS = 27
# How long a thread in host code runs before the tracer looks again: with a
# breakpoint where it returns into wasm, and without one (none found on its stack).
BREAKPOINT_WAIT_SECONDS = 0.05
LOOK_AGAIN_SECONDS = 0.001
POLL_SECONDS = 0.0005
REAP_SECONDS = 2.0
# How much of the thread's stack above its stack pointer is searched for the return
# into wasm (host frames: wasmtime's, libffi's, a Python callback's).
STACK_SCAN_BYTES = 1 << 20
# A stop the tracer could not finish in this long is given up (the caller retries).
ATTEMPT_SECONDS = 5.0
# Steps without a memory access before the tracer lets the thread run on and looks
# again (wasm code that keeps to registers for that long is a leaf loop, and ends).
STEP_BUDGET = 20_000

Ranges = Sequence[tuple[int, int]]


class ThreadStopError(RuntimeError):
    """The tracer could not stop the thread (ptrace refused, the tracer died)."""


def wasm_code_ranges() -> list[tuple[int, int]]:
    """Where compiled wasm code can be in this process: executable mappings of a
    `.cwasm` file (a module wasmtime deserialized from the cache) or of no file at
    all (a module compiled in memory). Anything else executable is host code: a
    shared library, the interpreter. (libffi's closure trampolines are anonymous
    too; they touch no guest memory, so a step through one is harmless.)"""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) < 5 or "x" not in fields[1]:
                continue
            path = fields[5].strip() if len(fields) == 6 else ""
            if path == "" or path.endswith(".cwasm"):
                lo, hi = fields[0].split("-")
                ranges.append((int(lo, 16), int(hi, 16)))
    return ranges


def protect(address: int, length: int, accessible: bool) -> None:
    """Make guest memory inaccessible (a stop) or readable and writable again."""
    prot = 3 if accessible else 0  # PROT_READ | PROT_WRITE, PROT_NONE
    if _libc.mprotect(address, length, prot) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mprotect: {os.strerror(err)}")


_probe_lock = threading.Lock()
_probed: list[str | None] = []


def unavailable_reason() -> str | None:
    """None if this process can stop its wasm threads this way, else why not.
    Probed once per process: a forked child seizes and releases a thread of ours."""
    with _probe_lock:
        if not _probed:
            _probed.append(_probe())
        return _probed[0]


def start_probe() -> None:
    """Run the probe on a thread of its own now, so that the first
    unavailable_reason() finds its answer ready (a kernel starts it before the
    sandbox's other start-up checks, and its fork runs beside them)."""
    if not _probed and not _probe_lock.locked():
        threading.Thread(target=unavailable_reason, name="wasm-kernel-stop-probe-start", daemon=True).start()


def _probe() -> str | None:
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"hard stops by trap need Linux on x86-64, not {sys.platform} on {platform.machine()}"
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            scope = int(f.read().strip() or 0)
        if scope >= 2:
            return f"ptrace is restricted (kernel.yama.ptrace_scope={scope})"
    except (OSError, ValueError):
        pass
    parked = threading.Event()
    tid: list[int] = []

    def park() -> None:
        tid.append(threading.get_native_id())
        parked.wait()

    thread = threading.Thread(target=park, name="wasm-kernel-stop-probe", daemon=True)
    thread.start()
    while not tid:
        time.sleep(0.0005)
    try:
        pid, to_child, from_child = _fork_tracer(tid[0], [], probe=True)
        answer = _read(from_child, 1)
        os.close(to_child)
        os.close(from_child)
        os.waitpid(pid, 0)
    except OSError as err:
        return f"cannot fork a tracer ({err})"
    finally:
        parked.set()
        thread.join()
    if answer != b"D":
        return "ptrace refused to attach to a thread of this process (seccomp, a container's policy, or Yama)"
    return None


def _read(fd: int, n: int) -> bytes:
    try:
        return os.read(fd, n)
    except OSError:
        return b""


def _fork_tracer(tid: int, ranges: Ranges, *, probe: bool = False) -> tuple[int, int, int]:
    """Fork the tracer for thread `tid`; returns (pid, write end to it, read end from it)."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+ warns about forking with threads;
        warnings.simplefilter("ignore", DeprecationWarning)  # the child only calls ptrace
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe and exits
        code = 1
        try:
            # Deaf to signals: an interrupt sent to the kernel's process group (as
            # jupyter_client sends it) reached the tracer too, broke its waitpid
            # (EINTR read as "the thread is gone"), and ran the kernel's handler
            # here, which wrote a byte to the kernel's own wake-up fd. Three stops
            # failed that way in a row end the kernel (STOP_FAILURES_FATAL).
            signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
            os.close(down_w)
            os.close(up_r)
            if _read(down_r, 1) == b"g":
                _trace(tid, ranges, down_r, up_w, probe)
                code = 0
        except BaseException as err:  # the parent sees the pipe close: a failed stop
            os.write(2, f"wasm-kernel stop tracer: {err!r}\n".encode())
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    _libc.prctl(_PR_SET_PTRACER, pid, 0, 0, 0)  # fails harmlessly without Yama
    os.write(down_w, b"g")
    return pid, down_w, up_r


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def _trace(tid: int, ranges: Ranges, down: int, up: int, probe: bool) -> None:  # pragma: no cover - in the child
    """The tracer, in the forked child: only ptrace, waitpid, process_vm_readv and the
    two pipes."""
    regs = (ctypes.c_ulong * _REGS_WORDS)()
    status = ctypes.c_int()
    tgid = os.getppid()  # the thread is one of our parent's
    stack = (ctypes.c_char * STACK_SCAN_BYTES)()

    def ptrace(request: int, data: int = 0, addr: int = 0) -> bool:
        return _libc.ptrace(request, tid, ctypes.c_void_p(addr), ctypes.c_void_p(data)) >= 0

    def wait(block: bool = True) -> int:
        """The next stop's signal (0: none yet without `block`; -1: the thread is gone)."""
        got = _libc.waitpid(tid, ctypes.byref(status), _WALL | (0 if block else _WNOHANG))
        if got == 0:
            return 0
        s = status.value
        if got < 0 or (s & 0xFF) != 0x7F:
            return -1
        return (s >> 8) & 0xFF

    def where() -> int:
        return regs[_RIP] if _libc.ptrace(_PTRACE_GETREGS, tid, None, regs) >= 0 else 0

    def in_wasm(pc: int) -> bool:
        return any(lo <= pc < hi for lo, hi in ranges)

    def say(word: bytes) -> None:
        try:
            os.write(up, word)
        except OSError:  # the parent stopped listening: each question then reads b""
            pass

    def ask(word: bytes) -> bytes:
        say(word)
        return _read(down, 1)

    def returns_into_wasm(skip: int) -> list[int]:
        """Where the host code the thread is in may return to wasm: the words above its
        stack pointer that point into wasm code, distinct, past the first `skip` of
        them, at most as many as there are debug registers. The return address of the
        call out of wasm is the first live one; words below it may be stale ones, left
        in slots the host frames have not written yet (a wasm stack that was deeper
        once), so each gets a breakpoint; and when they are more than the registers,
        the next look at the same call takes the next ones (`skip`)."""
        rsp = regs[_RSP]
        pages = STACK_SCAN_BYTES // 4096
        local = _IoVec(ctypes.addressof(stack), STACK_SCAN_BYTES)
        remote = (_IoVec * pages)(*[_IoVec(rsp + i * 4096, 4096) for i in range(pages)])
        got = _libc.process_vm_readv(tgid, ctypes.byref(local), 1, remote, pages, 0)
        found: list[int] = []
        if got > 0:
            for word in memoryview(stack).cast("B")[: got - got % 8].cast("Q"):
                if in_wasm(word) and word not in found:
                    found.append(int(word))
                    if len(found) == skip + _BREAKPOINTS:
                        break
        return found[skip:]

    def breakpoints_at(addresses: list[int]) -> bool:
        """Execute breakpoints in this thread's own debug registers (no other thread
        running the same code sees them; ptrace clears them when it lets go)."""
        enable = 0
        for i, address in enumerate(addresses):
            if ptrace(_PTRACE_POKEUSER, address, _DEBUGREG + i * 8):
                enable |= 1 << (2 * i)  # DR7's local enable of DRi: execute, one byte
        return bool(enable) and ptrace(_PTRACE_POKEUSER, enable, _DEBUGREG + 7 * 8)

    def clear_breakpoint() -> None:
        ptrace(_PTRACE_POKEUSER, 0, _DEBUGREG + 7 * 8)

    def hold() -> int:
        """Stop the running thread again; its signal (-1: gone)."""
        ptrace(_PTRACE_INTERRUPT)
        return wait()

    def trap_pending() -> bool:
        """Whether a SIGTRAP waits in the thread's own queue: a breakpoint that fired
        as hold() stopped the thread is reported by its stop, and its signal stays
        queued; let go with it, the thread dies of it (Trace/breakpoint trap)."""
        try:
            fd = os.open(f"/proc/{tgid}/task/{tid}/status", os.O_RDONLY)
        except OSError:
            return False
        try:
            text = os.read(fd, 4096)
        finally:
            os.close(fd)
        for line in text.split(b"\n"):
            if line.startswith(b"SigPnd:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTRAP - 1)))
        return False

    def leave(word: bytes, running: bool) -> None:
        """Let the thread go, with no breakpoint and no signal of ours left behind (a
        signal meant for it is passed on)."""
        sig = hold() if running else 0
        if sig < 0:
            say(word)
            return
        clear_breakpoint()
        for _ in range(3):
            if not trap_pending():
                break
            ptrace(_PTRACE_CONT)  # the queued SIGTRAP is taken at once: its stop, suppressed below
            if wait() < 0:
                say(word)
                return
        ptrace(_PTRACE_DETACH, 0 if sig in (0, signal.SIGTRAP, signal.SIGSTOP) else sig)
        say(word)

    if not ptrace(_PTRACE_SEIZE):
        say(b"E")
        return
    if not ptrace(_PTRACE_INTERRUPT) or wait() < 0:
        say(b"E")
        return
    if probe:
        where()
        ptrace(_PTRACE_DETACH)
        say(b"D")
        return
    pending = 0  # a signal meant for the thread, delivered when it next runs
    run_first = False  # let the thread run a little before the next look
    # The host call the last look armed breakpoints in (its stack pointer), and how many
    # of its candidate return addresses have had theirs without the thread reaching one.
    armed_at, tried = 0, 0
    while True:
        # Held in wasm code, the thread holds no lock of the host (wasmtime-py lets the
        # GIL go for every call into wasm): the parent can answer. Held in host code it
        # may hold the GIL, which the parent needs to answer anything: let it run first,
        # until it returns into wasm (a breakpoint there) or for a moment.
        pc = where()
        if in_wasm(pc):
            armed_at = 0  # out of that call (a breakpoint fired): the next starts afresh
        if run_first or not in_wasm(pc) or ask(b"P") != b"y":
            targets: list[int] = []
            if not run_first and not in_wasm(pc):
                # Still in the call whose breakpoints did not fire: those addresses were
                # stale ones, and the live one is further up (a thread waiting in a WASI
                # call found at the same place look after look, else stopped only by the
                # luck of a look between two calls). Past the last candidate: round again.
                tried = tried + _BREAKPOINTS if regs[_RSP] == armed_at else 0
                targets = returns_into_wasm(tried)
                if not targets and tried:
                    tried = 0
                    targets = returns_into_wasm(0)
                armed_at = regs[_RSP]
            armed = bool(targets) and breakpoints_at(targets)
            run_first = False
            ptrace(_PTRACE_CONT, pending)
            pending = 0
            if ask(b"W") != b"c":
                leave(b"Q", running=True)
                return
            sig = 0
            waited = 0.0
            limit = BREAKPOINT_WAIT_SECONDS if armed else LOOK_AGAIN_SECONDS
            while waited < limit:
                sig = wait(block=False)
                if sig:
                    break
                time.sleep(POLL_SECONDS)
                waited += POLL_SECONDS
            if not sig:
                sig = hold()
            if armed:
                clear_breakpoint()
            if sig < 0:
                say(b"Q")
                return
            if sig not in (signal.SIGTRAP, signal.SIGSTOP):
                pending = sig
            continue
        steps = 0
        while True:  # memory protected, the thread in wasm code: one step at a time
            steps += 1
            if steps > STEP_BUDGET:  # a loop that keeps to registers: look again later
                ask(b"U")
                run_first = True
                break
            ptrace(_PTRACE_SINGLESTEP, pending)
            pending = 0
            sig = wait()
            if sig == signal.SIGSEGV:  # the fault: memory back, then wasmtime's trap
                ask(b"U")
                ptrace(_PTRACE_DETACH, int(signal.SIGSEGV))
                say(b"D")
                return
            if sig < 0:
                ask(b"U")
                say(b"Q")
                return
            if sig != signal.SIGTRAP:
                pending = sig
            if not in_wasm(where()):
                ask(b"U")
                break


def stop_thread(
    tid: int,
    ranges: Ranges,
    *,
    protect_memory: Callable[[], bool],
    unprotect_memory: Callable[[], None],
    still_running: Callable[[], bool],
) -> bool:
    """Make thread `tid` (of this process) trap at its next memory access in wasm code
    (`ranges`). protect_memory() makes the guest's memory inaccessible and returns
    True, or False if it cannot now (something else is using the memory); it holds
    whatever it took until unprotect_memory(). still_running(): False once the turn
    ended by itself, and the stop is given up. True if the thread trapped."""
    reason = unavailable_reason()
    if reason is not None:
        raise ThreadStopError(reason)
    pid, to_child, from_child = _fork_tracer(tid, ranges)
    protected = False
    finished = False
    started = time.monotonic()
    try:
        while True:
            word = _read(from_child, 1)
            if word == b"P":
                protected = still_running() and protect_memory()
                os.write(to_child, b"y" if protected else b"n")
            elif word == b"U":
                if protected:
                    unprotect_memory()
                    protected = False
                os.write(to_child, b"y")
            elif word == b"W":
                go_on = still_running() and time.monotonic() - started < ATTEMPT_SECONDS
                os.write(to_child, b"c" if go_on else b"q")
            elif word == b"D":
                finished = True
                return True
            elif word == b"Q":
                finished = True
                return False
            else:  # "E" (ptrace refused) or the tracer is gone
                raise ThreadStopError("the tracer could not seize the guest's thread")
    finally:
        if protected:  # never leave the memory locked (first: the thread is still held)
            unprotect_memory()
        os.close(to_child)
        os.close(from_child)
        if not finished:
            _reap(pid)
        else:
            os.waitpid(pid, 0)


def _reap(pid: int) -> None:
    """A tracer we stopped answering: its next question reads end-of-file, and it lets
    the thread go cleanly (no breakpoint, no signal of its own delivered) and exits.
    Killed only if it does not: a tracer killed while it holds the thread at its
    breakpoint would leave the thread a SIGTRAP to die of."""
    deadline = time.monotonic() + REAP_SECONDS
    while time.monotonic() < deadline:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return
        time.sleep(POLL_SECONDS)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


__all__ = ["ThreadStopError", "protect", "stop_thread", "unavailable_reason", "wasm_code_ranges"]
