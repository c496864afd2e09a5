"""The CLI puts what untrusted code controls on the operator's terminal: what a
cell prints, returns and raises, the names of the files it makes, and the notebook
names the sessions keep. None of it may drive the terminal (retitle it, clear it,
plant a hyperlink, overwrite a line, reorder text with bidi controls), and no name
may split a table row. The real command, in subprocesses, against real guests.

Cell sources below spell the hostile characters as Python escapes, so the source
printed before each cell is plain ASCII: only what the guest makes is hostile.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import threading
import tty
import unicodedata
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

from support.cli_runs import COMMAND, env_for, make_session, notebook, wk, wk_as_user, wk_run
from wasm_kernel import derive_session_identity, get_or_create_session
from wasm_kernel.sessions.metadata import SessionMetadata, write_metadata

pytestmark = pytest.mark.slow  # real commands on real kernels

# Every way in: OSC (title, OSC 8 hyperlink), CSI (clear screen), a carriage
# return that overwrites, backspace and DEL, C1 CSI, and bidi override and isolate.
HOSTILE = ("\\x1b]0;pwned\\x07" "\\x1b[2J" "\\x1b]8;;http://evil.example/\\x1b\\\\click\\x1b]8;;\\x1b\\\\"
           "real\\rforged" "\\x08\\x7f" "\\x9b31m" "\\u202eexe.txt\\u202c" "\\u2066iso\\u2069\\u200f")
FILE_NAMES = ("new\\nline.txt", "esc\\x1b[31mred.txt", "c1\\x9b2J.txt", "bidi\\u202etxt.exe")
BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
SGR = r"\x1b\[[0-9;]*m"

CELLS = (
    f"print('{HOSTILE}')\nimport sys\nsys.stderr.write('{HOSTILE}\\n')",
    f"class Shown:\n    def __repr__(self):\n        return '{HOSTILE}'\nShown()",
    f"from IPython.display import display\ndisplay({{'text/plain': '{HOSTILE}'}}, raw=True)",
    "for name in [" + ", ".join(f"'{name}'" for name in FILE_NAMES) + "]:\n    open(name, 'w').write('x')",
    f"raise ValueError('{HOSTILE}')",
)


def unsafe(text: str) -> list[str]:
    """The characters of `text` that would drive a terminal: every control but
    newline and tab, and every bidi control."""
    return sorted({repr(c) for c in text
                   if (unicodedata.category(c) == "Cc" and c not in "\n\t") or c in BIDI})


def assert_shown_not_obeyed(text: str) -> None:
    """Nothing hostile reached the terminal raw, and it was shown, not dropped."""
    assert unsafe(text) == [], text
    for visible in ("]0;pwned", "[2J", "http://evil.example/", "real", "forged", "exe.txt"):
        assert visible in text, visible


def test_run_notebook_shows_hostile_output_and_file_names_as_text(tmp_path: Path) -> None:
    path = notebook(tmp_path / "hostile.ipynb", *CELLS[:-1], (CELLS[-1], ["raises-exception"]))
    proc = wk_run(path, data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_shown_not_obeyed(proc.stdout + proc.stderr)
    (files,) = [line for line in proc.stdout.splitlines() if line.startswith("Files created: ")]
    assert all(f"+{name}" in files for name in FILE_NAMES), files  # each name whole, on the one line
    assert any(line.startswith("ValueError: ") and "]0;pwned" in line for line in proc.stdout.splitlines())


def test_run_script_shows_hostile_output_file_names_and_a_plain_traceback(tmp_path: Path) -> None:
    script = tmp_path / "hostile.py"
    script.write_text("\n# %%\n".join(CELLS) + "\n# %%\n1 / 0\n")
    proc = wk_run(script, "--workspace", tmp_path / "ws", data_dir=tmp_path / "data", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert_shown_not_obeyed(out)
    assert "\x1b" not in out  # not even colours: nothing here is a terminal
    (files,) = [line for line in proc.stdout.splitlines() if line.startswith("files: ")]
    assert all(f"+{name}" in files for name in FILE_NAMES), files
    assert "ZeroDivisionError: division by zero" in proc.stderr.splitlines()  # IPython's colours gone


def test_run_script_on_a_terminal_keeps_only_colours(tmp_path: Path) -> None:
    """On a terminal plain SGR colours may stay (IPython's tracebacks use them);
    every other sequence is still shown as text."""
    script = tmp_path / "hostile.py"
    script.write_text("\n# %%\n".join(CELLS) + "\n# %%\nprint('\\x1b[31mred\\x1b[8m')\n# %%\nprint('after')\n")
    main, child = pty.openpty()
    tty.setraw(child)  # no newline translation: what the command writes is what arrives
    env = {k: v for k, v in os.environ.items() if k not in ("JPY_SESSION_NAME", "NO_COLOR")}
    env["JUPYTER_DATA_DIR"] = str(tmp_path / "data")
    chunks: list[bytes] = []

    def drain() -> None:
        while True:
            try:
                data = os.read(main, 65536)
            except OSError:  # EIO: the command closed its side
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([*COMMAND, "run", str(script), "--workspace", str(tmp_path / "ws")],
                              stdin=subprocess.DEVNULL, stdout=child, stderr=child, env=env, cwd=tmp_path,
                              timeout=300)
    finally:
        os.close(child)
    reader.join(30)
    os.close(main)
    out = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, out
    assert re.search(SGR, out), out  # colours are kept on a terminal...
    plain = re.sub(SGR, "", out)
    assert_shown_not_obeyed(plain)  # ...and nothing else
    # A colour the guest left on (here: concealed text) ends with the output that set it,
    # before the next cell's prompt.
    concealed = out.index("\x1b[8m")
    assert "\x1b[0m" in out[concealed:out.index("In [", concealed)], out


def _notebook_session(root: Path, notebook_path: Path, mode: str = "notebook") -> str:
    """A session the registry binds to `notebook_path`, as a kernel would."""
    identity = derive_session_identity(notebook_path, mode, "r1" if mode == "run" else None)
    sid = get_or_create_session(identity, root)
    (root / sid).mkdir()
    now = datetime.now(timezone.utc)
    write_metadata(root, SessionMetadata(sid, now, now))
    return sid


def test_sessions_list_and_show_give_a_hostile_notebook_name_one_row(root: Path, tmp_path: Path) -> None:
    forged = str(uuid.uuid4())
    name = f"ok.ipynb\n{forged}  /home/alice/forged.ipynb  2020-01-01 00:00:00  -  1 B  no\x1b]0;pwned\x07\u202ebd.ipynb"
    hostile = _notebook_session(root, tmp_path / name)
    folder = tmp_path / "class\r\x9b2J\u2066"
    folder.mkdir()
    run_mode = _notebook_session(root, folder, "run")
    plain = make_session(root, 1)

    listing = wk("sessions", "list", "--root", root).stdout
    assert unsafe(listing) == [], listing
    rows = listing.splitlines()[1:]
    assert sorted(row.split()[0] for row in rows) == sorted([hostile, run_mode, plain])  # one line each
    assert forged not in [row.split()[0] for row in rows]
    (row,) = [row for row in rows if row.startswith(hostile)]
    assert "ok.ipynb\\n" in row and "]0;pwned" in row

    for sid in (hostile, run_mode):
        shown = wk("sessions", "show", sid, "--root", root).stdout
        assert unsafe(shown) == [], shown
        assert all(re.match(r"[a-z_]+:\s", line) for line in shown.splitlines()), shown  # no line but a field's
        as_json = wk("sessions", "show", sid, "--json", "--root", root).stdout
        assert unsafe(as_json) == [] and as_json.isascii()
        assert json.loads(as_json)["session_id"] == sid
    listed = wk("sessions", "list", "--json", "--root", root).stdout
    assert unsafe(listed) == [] and listed.isascii()
    assert {d["notebook"] for d in json.loads(listed)} == {str((tmp_path / name).resolve()), None}


def test_a_persisted_run_of_a_notebook_named_with_a_newline_is_one_row(tmp_path: Path) -> None:
    env = env_for(tmp_path)
    forged = str(uuid.uuid4())
    path = notebook(tmp_path / f"lab.ipynb\n{forged}  (forged)\u202e.ipynb", "open('kept.txt', 'w').write('k')")
    run = wk_as_user(env, "run", path, "--persist", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert unsafe(run.stdout + run.stderr) == []
    listing = wk_as_user(env, "sessions", "list", cwd=tmp_path)
    assert listing.returncode == 0, listing.stderr
    assert unsafe(listing.stdout) == [], listing.stdout
    header, *rows = listing.stdout.splitlines()
    assert header.startswith("ID") and len(rows) == 1, listing.stdout
    assert rows[0].split()[0] != forged and f"lab.ipynb\\n{forged}" in rows[0]


def test_the_rule_for_streams_and_for_one_line_fields() -> None:
    from wasm_kernel.cli.terminal_text import terminal_field, terminal_text

    assert terminal_text("a\tb\nc") == "a\tb\nc"
    assert terminal_text("\x1b[1;31mred\x1b[0m") == "red"  # no terminal: colours go
    assert terminal_text("\x1b[31mred", keep_sgr=True) == "\x1b[31mred\x1b[0m"  # and never outlive their text
    assert terminal_text("\x1b[2J\x1b]0;t\x07", keep_sgr=True) == "\\x1b[2J\\x1b]0;t\\x07"
    assert terminal_text("a\rb\x08\x7f\x9b\x85") == "a\\rb\\x08\\x7f\\x9b\\x85"
    assert terminal_text("\u202eabc\u202c\u2066\u200e\u061c") == "\\u202eabc\\u202c\\u2066\\u200e\\u061c"
    assert terminal_text("\u2028\udcff") == "\\u2028\\udcff"  # a line separator; an undecodable byte
    assert terminal_text("caf\u00e9 \U0001F469\u200d\U0001F4BB \u00ad") == "caf\u00e9 \U0001F469\u200d\U0001F4BB \u00ad"
    assert terminal_field("a\nb\tc\x1b[31m") == "a\\nb\\tc\\x1b[31m"  # a field keeps nothing, drops nothing
