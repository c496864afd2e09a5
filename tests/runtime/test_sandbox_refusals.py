"""What the sandbox forbids on purpose fails with one clear line: an exception of the
type a program expects, whose message says it is not available in this sandbox.
And library frames without source fold into one traceback line."""

from __future__ import annotations

import re

import pytest

from support.sandboxes import make_sandbox

_ANSI = re.compile(r"\x1b\[[0-9;]*m")

FORBIDDEN = {
    "socket": ("import socket\nsocket.socket()", "PermissionError", "network access is not available in this sandbox"),
    "dns": ("import socket\nsocket.getaddrinfo('example.org', 80)", "PermissionError", "network access is not available"),
    "connection": ("import socket\nsocket.create_connection(('example.org', 80))", "PermissionError",
                   "network access is not available"),
    "urllib": ("import urllib.request\nurllib.request.urlopen('http://example.org')", "PermissionError",
               "network access to example.org is not allowed in this sandbox"),
    "thread": ("import threading\nthreading.Thread(target=print).start()", "RuntimeError",
               "threads are not available in this sandbox"),
    "thread_pool": ("from concurrent.futures import ThreadPoolExecutor\nThreadPoolExecutor().submit(print)",
                    "RuntimeError", "threads are not available in this sandbox"),
    "low_level_thread": ("import _thread\n_thread.start_new_thread(print, ())", "RuntimeError",
                         "threads are not available in this sandbox"),
    "subprocess": ("import subprocess\nsubprocess.run(['ls'])", "PermissionError",
                   "subprocesses are not available in this sandbox"),
    "popen": ("import subprocess\nsubprocess.Popen(['/bin/sh', '-c', 'id'])", "PermissionError",
              "subprocesses are not available in this sandbox"),
    "alarm": ("import signal\nsignal.alarm(1)", "OSError", "signals are not available in this sandbox"),
    "kill": ("import os\nos.kill(1, 9)", "OSError", "signals are not available in this sandbox"),
    "ctypes": ("import ctypes\nctypes.addressof(ctypes.c_int(5))", "OSError", "ctypes is not available in this sandbox"),
    "ctypes_library": ("import ctypes\nctypes.CDLL('libc.so.6')", "OSError", "ctypes is not available in this sandbox"),
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    with make_sandbox(tmp_path_factory.mktemp("refusals")) as sb:
        yield sb


@pytest.mark.parametrize("capability", sorted(FORBIDDEN))
def test_each_forbidden_capability_fails_with_one_line_saying_so(sandbox, capability: str) -> None:  # type: ignore[no-untyped-def]
    code, ename, text = FORBIDDEN[capability]
    r = sandbox.execute(code)
    assert r.error is not None and r.trap is None, (r.trap, r.stdout, r.stderr)
    assert r.error.ename == ename, r.error
    assert text in r.error.evalue and "\n" not in r.error.evalue.strip(), r.error.evalue
    last = [line for line in _ANSI.sub("", "".join(r.error.traceback)).splitlines() if line.strip()][-1]
    assert text in last and last.startswith(ename), last


def test_what_the_sandbox_allows_of_signals_and_sockets_still_works(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sandbox.execute("import signal, socket\nseen = []\nsignal.signal(signal.SIGUSR1, lambda s, f: seen.append(s))\n"
                        "signal.raise_signal(signal.SIGUSR1)\nprint(seen, socket.gethostname() is not None, hasattr(__import__('os'), 'fork'))")
    assert r.success, r.error
    assert r.stdout == "[10] True False\n"


def test_library_frames_without_source_fold_into_one_line(sandbox) -> None:  # type: ignore[no-untyped-def]
    r = sandbox.execute("import json\ndef load(text):\n    return json.loads(text)\nload('{not json')")
    assert r.error is not None and r.error.ename == "JSONDecodeError"
    text = _ANSI.sub("", "".join(r.error.traceback))
    assert "Cell In[" in text and "----> 4 load('{not json')" in text
    assert "python315.zip" not in text and "Could not get source" not in text
    assert re.search(r"\[\.\.\. \d+ frames? in library code without source; %xmode Verbose lists them\]", text), text
    verbose = sandbox.execute("%xmode Verbose\nload('{not json')")
    assert "python315.zip/json/" in _ANSI.sub("", "".join(verbose.error.traceback))
    sandbox.execute("%xmode Context")


def test_a_command_line_runs_in_the_confined_shell_and_an_unknown_program_is_one_line(sandbox) -> None:  # type: ignore[no-untyped-def]
    # os.system and os.popen run their line as `!` does; a program the shell has not
    # is a shell's "not found" (status 127), as on a machine without it.
    r = sandbox.execute("import os\nstatus = os.system('gcc x.c')\nprint(status, os.popen('echo hi').read(), end='')")
    assert r.success, r.error
    assert r.stdout.endswith("32512 hi\n"), r.stdout
    said = r.stdout.splitlines()[0] if r.stdout.startswith("sh:") else r.stderr.strip()
    assert said.startswith("sh: 1: gcc: not found in this sandbox (supported: ") and "\n" not in said, (r.stdout, r.stderr)
