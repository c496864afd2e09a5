"""Runs inside the WASI guest: the door to the host, the live streams, input().

Everything here is guest code: it may be replaced or broken by the user's own code,
so the host validates every message it receives and never trusts this module. The
IPython shell (`_wasm_kernel_shell`) is built on top of it, and every turn after
boot enters through `_wasm_kernel_serve`.
"""

import array
import base64
import builtins
import io
import json
import os
import sys

import _host
import _wasm_kernel_wire as wire

SUPPORT_DIR = os.path.dirname(__file__) + "/"


def _json_default(value):
    # As jupyter_client's packer: bytes travel base64-encoded (images), dates as ISO.
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    datetime = sys.modules.get("datetime")  # no date can exist before datetime is imported
    if datetime is not None and isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    import numbers

    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return str(value)


MAX_MESSAGE_BYTES = wire.MAX_MESSAGE_BYTES


def call(message):
    """Send one message to the host and return its JSON answer."""
    data = json.dumps(message, default=_json_default).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(f"this output is {len(data) >> 20} MiB, more than the {MAX_MESSAGE_BYTES >> 20} MiB "
                         "the kernel takes in one message")
    raw = _host.call(data)
    return json.loads(raw) if raw else {}


def call_raw(message):
    """Send one message and return the host's answer as bytes, unparsed (a response
    body's chunk through the network door)."""
    data = json.dumps(message, default=_json_default).encode()
    if len(data) > MAX_MESSAGE_BYTES:
        raise ValueError(f"this message is {len(data) >> 20} MiB, more than the {MAX_MESSAGE_BYTES >> 20} MiB "
                         "the kernel takes in one message")
    return _host.call(data) or b""


def flush_streams():
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass


def without_support_frames(err, seen=None):
    """Drop the frames of this support code (input(), the shell's plumbing) from
    err's traceback and the exceptions chained to it: the user sees their code."""
    seen = set() if seen is None else seen
    if err is None or id(err) in seen:
        return
    seen.add(id(err))
    kept = []
    tb = err.__traceback__
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(SUPPORT_DIR):
            kept.append(tb)
        tb = tb.tb_next
    for before, after in zip(kept, kept[1:] + [None]):
        before.tb_next = after
    err.__traceback__ = kept[0] if kept else None
    without_support_frames(err.__cause__, seen)
    without_support_frames(err.__context__, seen)


# --- input ------------------------------------------------------------------


def _ask(prompt, password):
    flush_streams()
    # ipykernel's words for an interrupt while input() waits, however it arrives (the
    # host's answer, or the soft interrupt's signal during the wait), without the frames.
    try:
        answer = call({"op": wire.OP_INPUT, "prompt": str(prompt), "password": bool(password)})
    except KeyboardInterrupt:
        raise KeyboardInterrupt("Interrupted by user") from None
    if answer.get("ok"):
        return str(answer.get("value", ""))
    if answer.get("error") == "interrupted":
        raise KeyboardInterrupt("Interrupted by user")
    raise EOFError(answer.get("message") or "input() is not available in this sandbox")


def input(prompt=""):
    return _ask(prompt, False)


def getpass(prompt="Password: ", stream=None):
    return _ask(prompt, True)


# --- time.sleep ---------------------------------------------------------------

_real_sleep = None


def _sleep(seconds):
    # A progress dot printed without a newline must show before the wait, not after.
    flush_streams()
    _real_sleep(seconds)


# --- asyncio ------------------------------------------------------------------


def _allow_event_loops(selector_events):
    """asyncio's selector loop wakes itself through a socketpair, which WASI lacks:
    every new loop (asyncio.run, IPython's top-level await) failed in its
    constructor. The guest has one thread, so nothing ever needs to wake a loop from
    outside: the loop runs without that pipe, and timers sleep in poll_oneoff. Applied
    to asyncio.selector_events as it is imported."""
    base = selector_events.BaseSelectorEventLoop
    make, close = base._make_self_pipe, base._close_self_pipe

    def _make_self_pipe(self):
        try:
            make(self)
        except OSError:
            self._ssock = self._csock = None

    def _close_self_pipe(self):
        if self._ssock is not None:
            close(self)

    base._make_self_pipe = _make_self_pipe
    base._close_self_pipe = _close_self_pipe


# --- stdout and stderr -----------------------------------------------------------

# A ring in this interpreter's memory that the host reads when it has control
# anyway (runtime/stream_ring.py): a line costs a copy, not a ~25 us host call.
_RING_SIZE = 1 << 18
_ring = array.array("B", bytes(8 + _RING_SIZE))
_ring_header = memoryview(_ring).cast("I")  # [head (ours), tail (the host's)]
_ring_data = memoryview(_ring)[8:]
_ring_words = _ring_data.cast("I")  # record headers: every record starts 4-aligned


class _RingWriter(io.RawIOBase):
    """A raw stream on fd 1 or 2 that appends to the ring: a u32 header (fd << 24 |
    length), the bytes, padding to 4. Past a full ring it writes to the descriptor
    itself: the host then drains the ring first (order kept)."""

    def __init__(self, fd):
        self._fd = fd
        self._tag = fd << 24

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    def write(self, b):
        global _captured_room
        n = len(b)
        if _captured is not None and _captured_room > 0:
            kept = bytes(b[:_captured_room])
            _captured.append((self._fd, kept))
            _captured_room -= len(kept)
        head = _ring_header[0]
        step = 4 + ((n + 3) & ~3)
        if ((head - _ring_header[1]) & 0xFFFFFFFF) + step > _RING_SIZE or n >= 1 << 24:
            return os.write(self._fd, b)
        start = head % _RING_SIZE
        _ring_words[start >> 2] = self._tag | n
        start += 4
        end = start + n
        if end <= _RING_SIZE:
            _ring_data[start:end] = b
        else:  # the bytes wrap around the end of the ring
            cut = _RING_SIZE - start
            _ring_data[start:] = b[:cut]
            _ring_data[: n - cut] = b[cut:]
        _ring_header[0] = (head + step) & 0xFFFFFFFF
        return n


# (fd, bytes) of each flushed write while IPython's output history listens
# (SandboxShell._tee), else None: one list append per line instead of IPython's
# Python-level wrapper around every write() call. At most CAPTURE_MAX_BYTES a cell:
# past them the history keeps no more (a cell flooding its streams must meet its
# output and time limits, not run the guest out of memory keeping what nobody sees).
CAPTURE_MAX_BYTES = 4 << 20
_captured = None
_captured_room = 0


def capture_streams():
    """Start collecting what the streams write; returns the list it fills."""
    global _captured, _captured_room
    _captured = []
    _captured_room = CAPTURE_MAX_BYTES
    return _captured


def stop_capture():
    global _captured
    flush_streams()  # a partial line counts as written, as IPython's tee sees it
    _captured = None


def swap_capture(kept):
    """Put a capture (captured list, room left) in place and return the one there was:
    a subshell's cell run inside a cell keeps its streams out of the cell's capture."""
    global _captured, _captured_room
    flush_streams()
    before = (_captured, _captured_room)
    _captured, _captured_room = kept if kept is not None else (None, 0)
    return before


def register_stream_ring():
    """Tell this sandbox's host where the ring is, and the interrupt words (again
    after a warm image start)."""
    _ring_header[1] = _ring_header[0]  # a new host has read nothing of an old one's
    _interrupt_words[0] = 0
    call({"op": wire.OP_STREAM_RING, "address": _ring.buffer_info()[0], "size": _RING_SIZE,
          "interrupt_words": _interrupt_words.buffer_info()[0]})


# --- interrupts ---------------------------------------------------------------
# A soft interrupt (runtime/soft_interrupt.py) is CPython's own: the host calls
# PyErr_SetInterruptEx(SIGINT) and the interpreter raises KeyboardInterrupt at its
# next safe point, keeping what the cell did so far. Two words the host reads:
# [0] is 1 while a cell's own code runs, the only time it raises the interrupt;
# [1] counts interrupts taken at a safe point (the SIGINT handler ran), so the host
# knows the cell stopped by itself and does not roll it back;
# [2] is set by the host, with the same signal, when it has work for the guest at
# its next safe point instead (a debugger's request while a cell runs): the handler
# then does that work and the cell runs on.
_interrupt_words = array.array("I", [0, 0, 0])
host_work = []  # what to call for it (_wasm_kernel_kernel registers the debugger's)


def _took_interrupt():
    _interrupt_words[1] = (_interrupt_words[1] + 1) & 0xFFFFFFFF


def _host_work_due():
    """The host's work, if the signal was for that: True if it was."""
    if not _interrupt_words[2]:
        return False
    _interrupt_words[2] = 0  # before the work: work asked for meanwhile signals again
    for work in list(host_work):
        try:
            work()
        except Exception:  # never into the running cell's code, which was only paused here
            pass
    return True


def _on_sigint(signum, frame):
    if _host_work_due():
        return
    _took_interrupt()
    raise KeyboardInterrupt


def _install_sigint_handler():
    """KeyboardInterrupt on SIGINT, as CPython's default handler, counted for the
    host; a handler the notebook sets for SIGINT is counted the same way."""
    import signal

    real_signal, real_getsignal = signal.signal, signal.getsignal
    chosen = {}

    def counted(handler):
        def on_sigint(signum, frame):
            if _host_work_due():
                return None
            _took_interrupt()
            return handler(signum, frame)

        return on_sigint

    def signal_(signum, handler):
        if signum != signal.SIGINT:
            return real_signal(signum, handler)
        before = chosen.get("handler", signal.default_int_handler)
        real_signal(signum, counted(handler) if callable(handler) else handler)
        chosen["handler"] = handler
        return before

    def getsignal(signum):
        if signum == signal.SIGINT and "handler" in chosen:
            return chosen["handler"]
        return real_getsignal(signum)

    signal_.__doc__, getsignal.__doc__ = real_signal.__doc__, real_getsignal.__doc__
    real_signal(signal.SIGINT, _on_sigint)
    signal.signal, signal.getsignal = signal_, getsignal


def _use_our_getpass(module):
    module.getpass = getpass


def setup(app_dir="/app"):
    os.chdir(app_dir)
    _install_sigint_handler()
    import _wasm_kernel_refusals

    _wasm_kernel_refusals.install()
    register_stream_ring()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        # Line-buffered: print() writes the text and its newline separately. A
        # partial line goes out at the newline, an explicit flush, a sleep or an
        # input() (see _sleep) and the end of the cell.
        stream = io.TextIOWrapper(
            io.BufferedWriter(_RingWriter(fd), 1 << 16),
            encoding="utf-8",
            errors="backslashreplace",
            line_buffering=True,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)
    builtins.input = input
    import time as _time_module

    global _real_sleep
    _real_sleep = _time_module.sleep
    _sleep.__doc__ = _real_sleep.__doc__
    _time_module.sleep = _sleep
    _wasm_kernel_refusals.after_import("getpass", _use_our_getpass)
    _wasm_kernel_refusals.after_import("asyncio.selector_events", _allow_event_loops)
