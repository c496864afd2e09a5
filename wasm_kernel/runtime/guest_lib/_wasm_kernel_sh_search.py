"""The confined shell's grep and diff: GNU grep's and diffutils' output, messages
and exit statuses for the options in their docstrings. Runs in the guest.
"""

import difflib
import os
import re

from _wasm_kernel_sh_commands import (
    UsageError, chunks_of, command, lines_of, parse_options, quote, shell_quote, stdin_chunks, strerror,
)


# --- grep ---------------------------------------------------------------------------

def _bre_to_python(pattern):
    """A POSIX basic regular expression as Python's re reads it: in a BRE, + ? | ( ) {
    are literal and their backslashed forms are the operators (GNU's extension)."""
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            out.append(nxt if nxt in "+?|(){}" else "\\" + nxt)
            i += 2
            continue
        if c == "[":
            end = _bracket_end(pattern, i)
            out.append(_bracket(pattern[i:end]))
            i = end
            continue
        out.append("\\" + c if c in "+?|(){}" else c)
        i += 1
    return "".join(out)


def _bracket_end(pattern, i):
    j = i + 1
    if pattern[j:j + 1] == "^":
        j += 1
    if pattern[j:j + 1] == "]":
        j += 1
    while j < len(pattern) and pattern[j] != "]":
        j += 2 if pattern[j:j + 2] in ("[:", "[.", "[=") and pattern.find("]", j + 2) > 0 and \
            pattern.find(":]", j) > 0 else 1
        if pattern[j - 2:j] == "[:":
            j = pattern.find(":]", j) + 2
    return min(j + 1, len(pattern))


_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
            "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": "!-/:-@\\[-`{-~", "xdigit": "0-9A-Fa-f"}


def _bracket(text):
    body = text[1:-1]
    for name, chars in _CLASSES.items():
        body = body.replace(f"[:{name}:]", chars)
    return "[" + body.replace("\\", "\\\\") + "]"


def _ere_to_python(pattern):
    out = []
    i = 0
    while i < len(pattern):
        if pattern[i] == "[":
            end = _bracket_end(pattern, i)
            out.append(_bracket(pattern[i:end]))
            i = end
            continue
        out.append(pattern[i:i + 2] if pattern[i] == "\\" else pattern[i])
        i += 2 if pattern[i] == "\\" else 1
    return "".join(out)


@command("grep", "egrep", "fgrep")
def grep(io, args, stdin):
    """grep [-i] [-n] [-c] [-r] [-v] [-l] [-L] [-w] [-x] [-o] [-q] [-s] [-h] [-H] [-E] [-F]
    [-e PATTERN]... PATTERN [file...]. Exit 0: a line matched; 1: none; 2: an error."""
    options, operands = parse_options(
        "grep", args, "inrRvlLwxoqshHEFe:cm:",
        ["ignore-case", "line-number", "recursive", "invert-match", "count", "files-with-matches",
         "word-regexp", "line-regexp", "only-matching", "quiet", "silent", "no-messages", "extended-regexp",
         "fixed-strings", "regexp=", "include=", "exclude="], usage_status=2)
    patterns = options.get("-e", []) + options.get("--regexp", [])
    if not patterns:
        if not operands:
            raise UsageError("Usage: grep [OPTION]... PATTERNS [FILE]...\nTry 'grep --help' for more information.", 2)
        patterns = [operands.pop(0)]
    has = options.has
    fixed = has("-F", "--fixed-strings")
    extended = has("-E", "--extended-regexp")
    sources = []
    for p in patterns:
        for piece in p.split("\n"):
            sources.append(re.escape(piece) if fixed else _ere_to_python(piece) if extended else _bre_to_python(piece))
    expr = "|".join(f"(?:{s})" for s in sources)
    if has("-w", "--word-regexp"):
        expr = rf"(?<!\w)(?:{expr})(?!\w)"
    if has("-x", "--line-regexp"):
        expr = rf"^(?:{expr})$"
    try:
        regex = re.compile(expr.encode("utf-8", "surrogateescape"), re.IGNORECASE if has("-i", "--ignore-case") else 0)
    except re.error as err:
        io.error(f"grep: {err}")
        return 2
    recursive = has("-r", "-R", "--recursive")
    names = operands or (["."] if recursive else ["-"])
    files = []
    status = 1
    errors = False
    quiet_errors = has("-s", "--no-messages")
    for name in names:
        path = io.path(name) if name != "-" else None
        if path and os.path.isdir(path):
            if not recursive:
                if not quiet_errors:
                    io.error(f"grep: {shell_quote(name)}: Is a directory")
                continue
            for root, dirs, found in os.walk(path):
                dirs.sort()
                rel = os.path.relpath(root, path)
                for f in sorted(found):
                    shown = f if not operands and rel == "." else \
                        os.path.join(name if operands else "", rel, f) if rel != "." else os.path.join(name, f)
                    files.append((os.path.normpath(shown) if not shown.startswith("./") or operands else shown,
                                  os.path.join(root, f)))
            continue
        files.append((name, path))
    prefix_names = (len(files) > 1 or recursive) and not has("-h")
    if has("-H"):
        prefix_names = True
    invert = has("-v", "--invert-match")
    count_only = has("-c", "--count")
    list_files = has("-l", "--files-with-matches")
    list_missing = has("-L")
    quiet = has("-q", "--quiet", "--silent")
    number = has("-n", "--line-number")
    only = has("-o", "--only-matching")
    max_count = int(options["-m"][-1]) if "-m" in options else None
    for shown, path in files:
        if path is None:
            stream = stdin_chunks(stdin)
            shown = "(standard input)"
        else:
            try:
                f = open(path, "rb")
            except OSError as err:
                if not quiet_errors:
                    io.error(f"grep: {shell_quote(shown)}: {strerror(err)}")
                errors = True
                continue
            stream = chunks_of(f)
        head = (shown.encode() + b":") if prefix_names else b""
        matches = 0
        binary = False
        for n, line in enumerate(lines_of(stream), 1):
            if b"\0" in line:
                binary = True
            body = line[:-1] if line.endswith(b"\n") else line
            hit = regex.search(body)
            if bool(hit) == invert:
                continue
            matches += 1
            status = 0
            if quiet:
                return 0
            if list_files or list_missing:
                break
            if not count_only and not binary:
                lead = head + (b"%d:" % n if number else b"")
                if only and not invert:
                    for m in regex.finditer(body):
                        if m.group():
                            yield lead + m.group() + b"\n"
                else:
                    yield lead + body + b"\n"
            if max_count is not None and matches >= max_count:
                break
        if hasattr(stream, "close"):
            stream.close()
        if count_only:
            yield head + b"%d\n" % matches
        elif list_files and matches:
            yield shown.encode() + b"\n"
        elif list_missing and not matches:
            yield shown.encode() + b"\n"
        elif binary and matches:
            io.error(f"grep: {shown}: binary file matches")
    return 2 if errors and not (quiet and status == 0) else status


# --- diff ---------------------------------------------------------------------------

def _read_lines(io, name, stdin):
    if name == "-":
        return list(lines_of(stdin_chunks(stdin)))
    with open(io.path(name), "rb") as f:
        return f.read().splitlines(keepends=True)


def _range(lo, hi):
    return f"{lo + 1}" if hi - lo == 1 else f"{lo + 1},{hi}" if hi > lo else f"{lo}"


def _normal_hunks(a, b):
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        code = {"replace": "c", "delete": "d", "insert": "a"}[tag]
        left = _range(i1, i2) if tag != "insert" else f"{i1}"
        right = _range(j1, j2) if tag != "delete" else f"{j1}"
        yield f"{left}{code}{right}\n".encode()
        for line in a[i1:i2]:
            yield b"< " + _terminated(line)
        if tag == "replace":
            yield b"---\n"
        for line in b[j1:j2]:
            yield b"> " + _terminated(line)


def _terminated(line):
    return line if line.endswith(b"\n") else line + b"\n\\ No newline at end of file\n"


@command("diff")
def diff(io, args, stdin):
    """diff [-u] [-q] FILE1 FILE2: normal or unified format; 0 same, 1 different, 2
    trouble. Hunks come from difflib, which may group a change differently from GNU
    diff where several groupings are equally short."""
    options, names = parse_options("diff", args, "uqU:", ["unified", "brief"], usage_status=2)
    if len(names) != 2:
        io.error(f"diff: {'missing operand after ' + quote(names[0]) if names else 'missing operand'}\n"
                 "diff: Try 'diff --help' for more information.")
        return 2
    try:
        a, b = (_read_lines(io, n, stdin) for n in names)
    except OSError as err:
        which = names[0] if not os.path.exists(io.path(names[0])) else names[1]
        io.error(f"diff: {which}: {strerror(err)}")
        return 2
    if a == b:
        return 0
    if options.has("-q", "--brief"):
        yield f"Files {names[0]} and {names[1]} differ\n".encode()
        return 1
    if options.has("-u", "--unified", "-U"):
        context = int(options["-U"][-1]) if "-U" in options else 3
        stamps = [_stamp(io, n) for n in names]
        lines = difflib.diff_bytes(difflib.unified_diff, a, b, f"{names[0]}\t{stamps[0]}".encode(),
                                   f"{names[1]}\t{stamps[1]}".encode(), n=context, lineterm=b"\n")
        for line in lines:
            if isinstance(line, str):
                line = line.encode()
            yield line if line.startswith((b"---", b"+++", b"@@")) else _terminated(line)
        return 1
    yield from _normal_hunks(a, b)
    return 1


def _stamp(io, name):
    from datetime import datetime, timezone

    if name == "-":
        return datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f000 +0000")
    st = os.stat(io.path(name))
    return datetime.fromtimestamp(st.st_mtime_ns // 1_000_000_000, timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + \
        f".{st.st_mtime_ns % 1_000_000_000:09d} +0000"
