"""The confined shell's commands: which exist, and what they share.

Each command is a generator function `command(io, args, stdin)`: it yields its
output as bytes, writes its errors with `io.error(...)` in GNU coreutils' words, and
returns its exit status. `stdin` is an iterator of bytes chunks, or None (no input).
The commands live in `_wasm_kernel_sh_builtins` (echo, cd, ...), `_wasm_kernel_sh_text`
(cat, head, sort, ...), `_wasm_kernel_sh_search` (grep, diff), `_wasm_kernel_sh_files`
(ls, cp, rm, find, du, ...) and `_wasm_kernel_sh_archives` (unzip, tar, gzip); each
registers its commands here.
"""

import errno
import getopt

CHUNK = 64 * 1024
_TABLE = {}
NAMES = []  # sorted, for the "not found" line: each command's first name


class UsageError(Exception):
    """Bad options: `cmd: message` on stderr and the command's usage status."""

    def __init__(self, message, status=1):
        super().__init__(message)
        self.status = status


def command(*names):
    def register(fn):
        for name in names:
            _TABLE[name] = fn
        NAMES[:] = sorted(set(NAMES) | {names[0]})
        return fn
    return register


def lookup(name):
    """The function of command `name` (also as /bin/name or /usr/bin/name), or None."""
    for prefix in ("/usr/local/bin/", "/usr/bin/", "/bin/"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    _load()
    return _TABLE.get(name)


def _load():
    if not _TABLE.get("cat"):
        import importlib

        for module in ("_wasm_kernel_sh_builtins", "_wasm_kernel_sh_text", "_wasm_kernel_sh_search",
                       "_wasm_kernel_sh_files", "_wasm_kernel_sh_archives"):
            importlib.import_module(module)  # each registers its commands


def supported():
    _load()
    return list(NAMES)


# The messages GNU prints for the errors a notebook meets (the guest's C library
# words some of them differently).
_MESSAGES = {
    errno.ENOENT: "No such file or directory",
    errno.EISDIR: "Is a directory",
    errno.ENOTDIR: "Not a directory",
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.EEXIST: "File exists",
    errno.ENOTEMPTY: "Directory not empty",
    errno.EROFS: "Read-only file system",
    errno.ENOSPC: "No space left on device",
    errno.EDQUOT: "Disk quota exceeded",
    errno.EXDEV: "Invalid cross-device link",
    errno.ELOOP: "Too many levels of symbolic links",
    errno.ENAMETOOLONG: "File name too long",
    errno.EINVAL: "Invalid argument",
}


def strerror(err):
    return _MESSAGES.get(getattr(err, "errno", None)) or getattr(err, "strerror", None) or str(err)


_SAFE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-+,:@%^=")


def shell_quote(name):
    """A name as coreutils' messages show it: bare when plain, else in single quotes."""
    if name and all(c in _SAFE for c in name):
        return name
    return "'" + name.replace("'", "'\\''") + "'"


def quote(name):
    """A name in quotes always (ls: cannot access 'x'), escaping a quote inside."""
    return "'" + name.replace("'", "'\\''") + "'"


class Options(dict):
    """{option: [values]}, as parse_options returns them."""

    def has(self, *flags):
        """Whether any of `flags` (a short form and its long ones) was given."""
        return any(flag in self for flag in flags)


def parse_options(name, args, short, long=(), usage_status=1):
    """GNU getopt (options may follow operands; `--` ends them). Returns
    ({option: [values]}, operands); a bad option is coreutils' two lines."""
    try:
        found, operands = getopt.gnu_getopt(args, short, list(long))
    except getopt.GetoptError as err:
        if err.opt and len(err.opt) == 1 and "requires" not in err.msg:
            text = f"invalid option -- '{err.opt}'"
        elif err.opt and "requires" in err.msg:
            text = f"option requires an argument -- '{err.opt}'" if len(err.opt) == 1 else \
                f"option '--{err.opt}' requires an argument"
        else:
            text = f"unrecognized option '--{err.opt}'" if err.opt else err.msg
        raise UsageError(f"{text}\nTry '{name} --help' for more information.", usage_status) from None
    options = Options()
    for opt, value in found:
        options.setdefault(opt, []).append(value)
    return options, operands


def chunks_of(f):
    """The bytes of an open binary file, chunk by chunk; it is closed at the end."""
    try:
        while True:
            chunk = f.read(CHUNK)
            if not chunk:
                return
            yield chunk
    finally:
        f.close()


def lines_of(stream):
    """Lines (with their b"\\n", the last maybe without) from a chunk iterator."""
    rest = b""
    for chunk in stream:
        rest += chunk
        *lines, rest = rest.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if rest:
        yield rest


def open_input(io, name, who, message="{who}: {name}: {error}"):
    """A chunk iterator over file `name` ("-": stdin), or None after printing the
    error as `who` words it."""
    if name == "-":
        return stdin_chunks(io.stdin)
    try:
        f = open(io.path(name), "rb")
    except OSError as err:
        io.error(message.format(who=who, name=shell_quote(name), qname=quote(name), error=strerror(err)))
        return None
    return chunks_of(f)


def stdin_chunks(stdin):
    return iter(()) if stdin is None else stdin


def human_size(n):
    """ls -h / du -h: one decimal under 10, then whole units, always rounded up, as
    coreutils does (8,235 bytes: 8.1K)."""
    if n < 1024:
        return str(n)
    for power, unit in enumerate("KMGTPE", 1):
        scale = 1024 ** power
        tenths = -(-n * 10 // scale)
        if tenths < 100:
            return f"{tenths / 10:.1f}{unit}"
        whole = -(-n // scale)
        if whole < 1024 or unit == "E":
            return f"{whole}{unit}"
    return str(n)
