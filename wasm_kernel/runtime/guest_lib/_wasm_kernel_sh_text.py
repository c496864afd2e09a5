"""The confined shell's text commands: cat, head, tail, wc, sort, uniq and cut.

Each follows GNU coreutils for the options listed in its docstring, with its
messages and exit statuses. Runs in the guest.
"""

import os
import re

from _wasm_kernel_sh_commands import (
    UsageError, command, lines_of, open_input, parse_options, quote, shell_quote, stdin_chunks, strerror,
)


# --- cat, head, tail --------------------------------------------------------------

@command("cat")
def cat(io, args, stdin):
    """cat [-n] [-b] [-E] [-s] [file...] (- or none: standard input)."""
    options, names = parse_options("cat", args, "nbEsA", ["number", "number-nonblank", "show-ends", "squeeze-blank"])
    number = options.has("-n", "--number")
    nonblank = options.has("-b", "--number-nonblank")
    ends = options.has("-E", "--show-ends")
    squeeze = options.has("-s", "--squeeze-blank")
    status = 0
    count = 0
    blank_before = False
    for name in names or ["-"]:
        if name != "-" and os.path.isdir(io.path(name)):
            io.error(f"cat: {shell_quote(name)}: Is a directory")
            status = 1
            continue
        stream = open_input(io, name, "cat")
        if stream is None:
            status = 1
            continue
        if not (number or nonblank or ends or squeeze):
            yield from stream
            continue
        for line in lines_of(stream):
            blank = line in (b"\n",)
            if squeeze and blank and blank_before:
                continue
            blank_before = blank
            body = line[:-1] if line.endswith(b"\n") else line
            end = (b"$" if ends and line.endswith(b"\n") else b"") + (b"\n" if line.endswith(b"\n") else b"")
            if nonblank and not blank or number and not nonblank:
                count += 1
                yield b"%6d\t" % count + body + end
            else:
                yield body + end
    return status


def _count_option(value, who):
    sign = value[:1] if value[:1] in "+-" else ""
    digits = value[len(sign):]
    m = re.fullmatch(r"(\d+)([bkKmMG]?)", digits)
    if not m:
        raise UsageError(f"invalid number of lines: {quote(value)}" if who != "bytes" else
                         f"invalid number of bytes: {quote(value)}")
    n = int(m.group(1)) * {"": 1, "b": 512, "k": 1024, "K": 1024, "m": 1 << 20, "M": 1 << 20, "G": 1 << 30}[m.group(2)]
    return sign, n


def _numeric_shorthand(args):
    """head -5 / tail -5 / tail +5 mean -n 5 / -n +5 (the old forms still in use)."""
    out = []
    for i, arg in enumerate(args):
        if i and args[i - 1] in ("-n", "-c", "--lines", "--bytes"):
            out.append(arg)
        elif re.fullmatch(r"-\d+", arg):
            out += ["-n", arg[1:]]
        elif i == 0 and re.fullmatch(r"\+\d+", arg):
            out += ["-n", arg]
        else:
            out.append(arg)
    return out


def _headed(io, who, names, options, each):
    """Run each(stream) over every file, with ==> name <== headers as head/tail print
    them for more than one file (-q never, -v always)."""
    status = 0
    headers = ("-v" in options or len(names) > 1) and "-q" not in options
    first = True
    for name in names:
        if name != "-" and os.path.isdir(io.path(name)):
            io.error(f"{who}: error reading {quote(name)}: Is a directory")
            status = 1
            continue
        stream = open_input(io, name, who, "{who}: cannot open {qname} for reading: {error}")
        if stream is None:
            status = 1
            continue
        if headers:
            title = "standard input" if name == "-" else name
            yield ("" if first else "\n").encode() + f"==> {title} <==\n".encode()
        first = False
        yield from each(stream)
    return status


@command("head")
def head(io, args, stdin):
    """head [-n N | -n -N | -N] [-c N] [-q] [-v] [file...]."""
    options, names = parse_options("head", _numeric_shorthand(args), "n:c:qv", ["lines=", "bytes="])
    lines = (options.get("-n") or options.get("--lines") or [None])[-1]
    size = (options.get("-c") or options.get("--bytes") or [None])[-1]

    def each(stream):
        if size is not None:
            sign, n = _count_option(size, "bytes")
            data = b"".join(stream) if sign == "-" else None
            if data is not None:
                yield data[:max(0, len(data) - n)]
                return
            left = n
            for chunk in stream:
                if left <= 0:
                    break
                yield chunk[:left]
                left -= len(chunk)
            return
        sign, n = _count_option(lines or "10", "lines")
        if sign == "-":
            kept = list(lines_of(stream))
            yield b"".join(kept[:max(0, len(kept) - n)])
            return
        if n == 0:
            return
        for i, line in enumerate(lines_of(stream), 1):
            yield line
            if i >= n:
                break

    return (yield from _headed(io, "head", names or ["-"], options, each))


@command("tail")
def tail(io, args, stdin):
    """tail [-n N | -n +N | -N] [-c N] [-q] [-v] [file...]. (-f: not in a sandbox,
    where a file never grows while the command runs.)"""
    options, names = parse_options("tail", _numeric_shorthand(args), "n:c:qvfF", ["lines=", "bytes=", "follow"])
    if options.has("-f", "-F", "--follow"):
        io.error("tail: -f is not available in this sandbox's shell (no file grows while it runs)")
        return 1
    lines = (options.get("-n") or options.get("--lines") or [None])[-1]
    size = (options.get("-c") or options.get("--bytes") or [None])[-1]

    def each(stream):
        if size is not None:
            sign, n = _count_option(size, "bytes")
            data = b"".join(stream)
            yield data[n - 1:] if sign == "+" else data[len(data) - n:] if n else b""
            return
        sign, n = _count_option(lines or "10", "lines")
        if sign == "+":
            for i, line in enumerate(lines_of(stream), 1):
                if i >= n:
                    yield line
            return
        from collections import deque

        kept = deque(lines_of(stream), maxlen=n) if n else ()
        yield b"".join(kept)

    return (yield from _headed(io, "tail", names or ["-"], options, each))


# --- wc -----------------------------------------------------------------------------

@command("wc")
def wc(io, args, stdin):
    """wc [-l] [-w] [-c] [-m] [file...]: GNU's columns and widths."""
    options, names = parse_options("wc", args, "lwcmL", ["lines", "words", "bytes", "chars"])
    want = [k for k, flags in (("l", ("-l", "--lines")), ("w", ("-w", "--words")), ("m", ("-m", "--chars")),
                               ("c", ("-c", "--bytes"))) if any(f in options for f in flags)]
    if not want:
        want = ["l", "w", "c"]
    rows = []
    status = 0
    regular_total = 0
    min_width = 1
    first_failed = False
    for i, name in enumerate(names or ["-"]):
        path = io.path(name) if name != "-" else None
        if path and os.path.isdir(path):
            io.error(f"wc: {shell_quote(name)}: Is a directory")
            rows.append(([0] * len(want), name))
            status = 1
            continue
        stream = open_input(io, name, "wc")
        if stream is None:
            status = 1
            first_failed = first_failed or i == 0
            continue
        if path is None:
            min_width = 7
        else:
            regular_total += os.stat(path).st_size
        counts = {"l": 0, "w": 0, "c": 0, "m": 0}
        in_word = False
        for chunk in stream:
            counts["l"] += chunk.count(b"\n")
            counts["c"] += len(chunk)
            if "w" in want or "m" in want:
                counts["m"] += len(chunk.decode("utf-8", "replace"))
                for byte in chunk:
                    space = byte in b" \t\n\r\v\f"
                    if not space and not in_word:
                        counts["w"] += 1
                    in_word = not space
        rows.append(([counts[k] for k in want], None if name == "-" and not names else name))
    if len(rows) > 1:
        rows.append(([sum(r[0][i] for r in rows) for i in range(len(want))], "total"))
    width = 1
    if not (len(want) == 1 and len(names or ["-"]) == 1) and not first_failed:
        width = max(len(str(regular_total)), min_width)
    for counts, name in rows:
        text = " ".join(str(n).rjust(width) for n in counts)
        yield (text + (f" {name}" if name is not None else "") + "\n").encode()
    return status


# --- sort, uniq, cut --------------------------------------------------------------

_NUMBER = re.compile(rb"^\s*(-?)(\d*)(?:\.(\d*))?")


def _numeric(key):
    m = _NUMBER.match(key)
    sign, whole, frac = m.group(1), m.group(2), m.group(3) or b""
    if not whole and not frac:
        return 0.0
    value = float((whole or b"0") + b"." + (frac or b"0"))
    return -value if sign else value


def _fields(line, sep):
    """sort's fields: split at sep, or at each blank-to-nonblank edge with the blanks
    kept at the start of the field (POSIX)."""
    if sep is not None:
        return line.split(sep)
    return re.findall(rb"\s*\S+|\s+$", line) or [b""]


@command("sort")
def sort(io, args, stdin):
    """sort [-n] [-r] [-u] [-f] [-b] [-k F[,F]] [-t SEP] [-o FILE] [file...]: in the C
    locale's byte order, lines equal by key ordered by the whole line (as GNU)."""
    options, names = parse_options("sort", args, "nrufbk:t:o:s",
                                   ["numeric-sort", "reverse", "unique", "ignore-case", "key=", "field-separator=",
                                    "output="], usage_status=2)
    has = options.has
    sep = (options.get("-t") or options.get("--field-separator") or [None])[-1]
    sep = sep.encode() if sep is not None else None
    keys = options.get("-k", []) + options.get("--key", [])
    numeric = has("-n", "--numeric-sort")
    fold = has("-f", "--ignore-case")
    blanks = has("-b")
    data = []
    status = 0
    for name in names or ["-"]:
        stream = stdin_chunks(stdin) if name == "-" else open_input(
            io, name, "sort", "{who}: cannot read: {name}: {error}")
        if stream is None:
            return 2
        for line in lines_of(stream):
            data.append(line[:-1] if line.endswith(b"\n") else line)

    specs = []
    for spec in keys:
        m = re.fullmatch(r"(\d+)(?:\.(\d+))?([bfnr]*)(?:,(\d+)(?:\.(\d+))?([bfnr]*))?", spec)
        if not m or m.group(1) == "0":
            raise UsageError(f"invalid number at field start: invalid count at start of {quote(spec)}", 2)
        flags = set((m.group(3) or "") + (m.group(6) or ""))
        specs.append((int(m.group(1)), int(m.group(4)) if m.group(4) else None, flags))

    def key_of(line):
        parts = []
        for start, end, flags in specs or [(None, None, set())]:
            if start is None:
                text = line
            else:
                fields = _fields(line, sep)
                text = (sep or b"").join(fields[start - 1:end] if end else fields[start - 1:])
            key_numeric = numeric or "n" in flags
            if blanks or key_numeric or "b" in flags:
                text = text.lstrip()
            value = _numeric(text) if key_numeric else text.lower() if fold or "f" in flags else text
            parts.append(_Reversed(value) if "r" in flags else value)
        return parts

    decorated = [(key_of(line), line) for line in data]
    reverse = has("-r", "--reverse")
    stable = has("-s")
    unique = has("-u", "--unique")
    # Ties on the key are broken by the whole line (GNU's last resort), unless -s or -u.
    decorated.sort(key=lambda kl: kl[0] if stable or unique else (kl[0], kl[1]), reverse=reverse)
    lines = []
    last = object()
    for key, line in decorated:
        if unique and key == last:
            continue
        last = key
        lines.append(line + b"\n")
    out = (options.get("-o") or options.get("--output") or [None])[-1]
    if out is not None:
        try:
            with open(io.path(out), "wb") as f:
                f.writelines(lines)
        except OSError as err:
            io.error(f"sort: open failed: {out}: {strerror(err)}")
            return 2
        return status
    yield b"".join(lines)
    return status


class _Reversed:
    """A key that sorts backwards (a key's own r flag: -k2,2r)."""

    def __init__(self, value):
        self.value = value

    def __lt__(self, other):
        return other.value < self.value

    def __eq__(self, other):
        return self.value == other.value


@command("uniq")
def uniq(io, args, stdin):
    """uniq [-c] [-d] [-u] [-i] [input [output]]: adjacent equal lines once."""
    options, names = parse_options("uniq", args, "cdui", ["count", "repeated", "unique", "ignore-case"])
    has = options.has
    stream = stdin_chunks(stdin) if not names or names[0] == "-" else open_input(io, names[0], "uniq")
    if stream is None:
        return 1
    fold = has("-i", "--ignore-case")
    groups = []
    for line in lines_of(stream):
        body = line if line.endswith(b"\n") else line + b"\n"
        key = body.lower() if fold else body
        if groups and groups[-1][0] == key:
            groups[-1][2] += 1
        else:
            groups.append([key, body, 1])
    out = []
    for _, body, n in groups:
        if has("-d", "--repeated") and n < 2 or has("-u", "--unique") and n > 1:
            continue
        out.append((b"%7d " % n if has("-c", "--count") else b"") + body)
    if len(names) > 1:
        with open(io.path(names[1]), "wb") as f:
            f.writelines(out)
        return 0
    yield b"".join(out)
    return 0


def _ranges(spec, who):
    ranges = []
    for piece in spec.split(","):
        m = re.fullmatch(r"(\d*)(-?)(\d*)", piece)
        if not m or not (m.group(1) or m.group(3)) or m.group(1) == "0":
            raise UsageError(f"fields and positions are numbered from 1\nTry '{who} --help' for more information."
                             if m and m.group(1) == "0" else f"invalid field range\nTry '{who} --help' for more information.")
        lo = int(m.group(1)) if m.group(1) else 1
        hi = (int(m.group(3)) if m.group(3) else None) if m.group(2) else lo
        ranges.append((lo, hi))
    return lambda i: any(lo <= i and (hi is None or i <= hi) for lo, hi in ranges)


@command("cut")
def cut(io, args, stdin):
    """cut -f LIST [-d DELIM] [-s] | -c LIST | -b LIST [--complement] [file...]."""
    options, names = parse_options("cut", args, "f:d:c:b:s", ["fields=", "delimiter=", "characters=", "bytes=",
                                                              "complement"])
    fields = (options.get("-f") or options.get("--fields") or [None])[-1]
    chars = (options.get("-c") or options.get("-b") or options.get("--characters") or options.get("--bytes") or [None])[-1]
    if fields is None and chars is None:
        raise UsageError("you must specify a list of bytes, characters, or fields\nTry 'cut --help' for more information.")
    delim = (options.get("-d") or options.get("--delimiter") or ["\t"])[-1].encode()
    if len(delim) != 1:
        raise UsageError("the delimiter must be a single character\nTry 'cut --help' for more information.")
    picked = _ranges(fields or chars, "cut")
    chosen = (lambda i: not picked(i)) if "--complement" in options else picked
    status = 0
    for name in names or ["-"]:
        stream = open_input(io, name, "cut")
        if stream is None:
            status = 1
            continue
        for line in lines_of(stream):
            body = line[:-1] if line.endswith(b"\n") else line
            if chars is not None:
                yield bytes(b for i, b in enumerate(body, 1) if chosen(i)) + b"\n"
                continue
            if delim not in body:
                if "-s" not in options:
                    yield body + b"\n"
                continue
            yield delim.join(p for i, p in enumerate(body.split(delim), 1) if chosen(i)) + b"\n"
    return status
