"""The confined shell's file commands: ls, mkdir, touch, rm, cp, mv, find, du, and the
archives (unzip, tar, gzip, gunzip).

They reach files only through the guest's own `os` calls, so every rule of the
sandbox holds as for Python code: /app and /tmp are writable, the notebook's folder
is read-only with copy-up, a removed notebook-folder file is hidden in this session
only, and the disk quota counts every byte. Links are never followed out of a tree:
walks do not follow them, and the archive commands refuse members with absolute
paths, `..` or links. Runs in the guest.
"""

import os
import stat
import time

from _wasm_kernel_sh_commands import UsageError, command, human_size, parse_options, quote, shell_quote, strerror

# How ls shows an owner: the guest has no users (WASI), and never shows the host's.
OWNER = "sandbox"
_SIX_MONTHS = 183 * 24 * 3600


def _mode(st):
    """The permission bits, or the usual ones where WASI reports none."""
    bits = stat.S_IMODE(st.st_mode)
    if not bits:
        bits = 0o755 if stat.S_ISDIR(st.st_mode) else 0o644
    return bits


def _blocks_k(st):
    """Disk use in KiB: st_blocks where the system has it, else whole 4 KiB blocks."""
    blocks = getattr(st, "st_blocks", 0)
    if blocks:
        return (blocks * 512 + 1023) // 1024
    return 0 if not st.st_size else -(-st.st_size // 4096) * 4


def _type_char(st):
    return "d" if stat.S_ISDIR(st.st_mode) else "l" if stat.S_ISLNK(st.st_mode) else "-"


def _mode_text(st):
    return _type_char(st) + stat.filemode(_mode(st) | stat.S_IFREG)[1:]


def _when(mtime, now):
    t = time.gmtime(mtime) if "TZ" not in os.environ else time.localtime(mtime)
    if now - _SIX_MONTHS < mtime <= now + 60:
        return time.strftime("%b ", t) + f"{t.tm_mday:2d}" + time.strftime(" %H:%M", t)
    return time.strftime("%b ", t) + f"{t.tm_mday:2d}" + time.strftime("  %Y", t)


@command("ls")
def ls(io, args, stdin):
    """ls [-l] [-a] [-A] [-h] [-R] [-1] [-d] [-t] [-S] [-r] [-F] [name...]: in columns
    80 wide on the notebook's output (a terminal's), one a line when captured."""
    options, names = parse_options("ls", args, "laAhR1dtSrF", ["all", "almost-all", "human-readable", "recursive",
                                                                 "directory", "reverse"], usage_status=2)
    has = options.has
    view = _LsView(io, has)
    files, folders = [], []
    status = 0
    for name in names or ["."]:
        try:
            st = os.lstat(io.path(name))
        except OSError as err:
            io.error(f"ls: cannot access {quote(name)}: {strerror(err)}")
            status = 2
            continue
        (folders if stat.S_ISDIR(st.st_mode) and not has("-d", "--directory") else files).append((name, st))
    files = view.order(files)
    if files:
        yield view.block(files)
    titles = len(names) > 1 or has("-R", "--recursive")
    pending = view.order(folders)
    first = not files
    while pending:
        name, _ = pending.pop(0)
        entries, failed = view.entries(name)
        if failed:
            status = 1 if status == 0 else status
        text = b"" if first else b"\n"
        first = False
        if titles or files:
            text += (shell_quote(name) + ":\n").encode()
        if has("-l"):
            total = sum(_blocks_k(st) for _, st in entries)
            shown_total = human_size(total * 1024) if has("-h", "--human-readable") else str(total)
            text += f"total {shown_total}\n".encode()
        shown = [(os.path.basename(n), st) for n, st in entries]
        yield text + (view.block(shown) if shown else b"")
        if has("-R", "--recursive"):
            subfolders = [(n, st) for n, st in entries
                          if stat.S_ISDIR(st.st_mode) and os.path.basename(n) not in (".", "..")]
            pending[0:0] = subfolders
    return status


class _LsView:
    def __init__(self, io, has):
        self.io = io
        self.has = has
        self.now = time.time()
        self.columns = io.env.get("_WASM_KERNEL_TTY") == "1"

    def order(self, items):
        if self.has("-t"):
            items = sorted(items, key=lambda i: (-i[1].st_mtime, i[0]))
        elif self.has("-S"):
            items = sorted(items, key=lambda i: (-i[1].st_size, i[0]))
        else:
            items = sorted(items, key=lambda i: i[0].encode("utf-8", "surrogateescape"))
        return items[::-1] if self.has("-r", "--reverse") else items

    def entries(self, name):
        folder = self.io.path(name)
        try:
            listed = os.listdir(folder)
        except OSError as err:
            self.io.error(f"ls: cannot open directory {quote(name)}: {strerror(err)}")
            return [], True
        if self.has("-a", "--all"):
            listed += [".", ".."]
        elif not self.has("-A", "--almost-all"):
            listed = [n for n in listed if not n.startswith(".")]
        entries = []
        for entry in listed:
            try:
                entries.append((os.path.join(name, entry), os.lstat(os.path.join(folder, entry))))
            except OSError:
                continue
        return self.order(entries), False

    def block(self, items):
        suffix = (lambda st: "/" if stat.S_ISDIR(st.st_mode) else "") if self.has("-F") else (lambda st: "")
        names = [n + suffix(st) for n, st in items]
        if self.columns:
            names = _tty_names(names)
        if self.has("-l"):
            return self.long(items, names)
        if self.columns and not self.has("-1"):
            return _columns(names, 80)
        return "".join(n + "\n" for n in names).encode()

    def long(self, items, names):
        rows = []
        for (name, st), shown in zip(items, names):
            size = human_size(st.st_size) if self.has("-h", "--human-readable") else str(st.st_size)
            if stat.S_ISLNK(st.st_mode):
                try:
                    shown += " -> " + os.readlink(self.io.path(name))
                except OSError:
                    pass
            rows.append((_mode_text(st), str(st.st_nlink), OWNER, OWNER, size, _when(st.st_mtime, self.now), shown))
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        lines = []
        for r in rows:
            lines.append(f"{r[0]} {r[1]:>{widths[1]}} {r[2]:<{widths[2]}} {r[3]:<{widths[3]}} "
                         f"{r[4]:>{widths[4]}} {r[5]} {r[6]}\n")
        return "".join(lines).encode()


def _columns(names, width, tabsize=8):
    """GNU ls's columns (ls.c, calculate_columns and print_many_per_line): the most
    columns whose lines stay under `width`, filled top to bottom, the gaps made of
    tabs and spaces as ls writes them."""
    if not names:
        return b""
    n = len(names)
    max_cols = max(1, min(n, width // 3))
    fits = []
    for i in range(max_cols):
        rows = (n + i) // (i + 1)
        col_widths = [0] * (i + 1)
        for k, name in enumerate(names):
            idx = k // rows
            col_widths[idx] = max(col_widths[idx], len(name) + (0 if idx == i else 2))
        fits.append((sum(col_widths) < width, col_widths))
    cols = next((c for c in range(max_cols, 1, -1) if fits[c - 1][0]), 1)
    col_widths = fits[cols - 1][1]
    rows = n // cols + (n % cols != 0)
    out = []
    for row in range(rows):
        line, pos, k, col = [], 0, row, 0
        while True:
            line.append(names[k])
            end = pos + col_widths[col]
            col += 1
            k += rows
            if k >= n:
                break
            here = pos + len(names[k - rows])
            while here < end:
                if tabsize and end // tabsize > (here + 1) // tabsize:
                    line.append("\t")
                    here += tabsize - here % tabsize
                else:
                    line.append(" ")
                    here += 1
            pos = end
        out.append("".join(line) + "\n")
    return "".join(out).encode()


_PLAIN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789%+,-./:=@_")


def _tty_names(names):
    """Names as ls shows them on a terminal: quoted when a shell would need it, and
    then the others one space in, so the names stay aligned."""
    def needs(name):
        return not name or any(c not in _PLAIN for c in name) and not (name[0] in "#~" and all(
            c in _PLAIN for c in name[1:]))
    quoted = [("'" + n.replace("'", "'\\''") + "'" if "'" not in n else '"' + n + '"') if needs(n) else n
              for n in names]
    if any(needs(n) for n in names):
        quoted = [q if needs(n) else " " + q for q, n in zip(quoted, names)]
    return quoted


@command("mkdir")
def mkdir(io, args, stdin):
    """mkdir [-p] [-v] folder..."""
    options, names = parse_options("mkdir", args, "pvm:", ["parents", "verbose"])
    if not names:
        raise UsageError("missing operand\nTry 'mkdir --help' for more information.")
    parents = options.has("-p", "--parents")
    status = 0
    for name in names:
        path = io.path(name)
        try:
            if parents:
                os.makedirs(path, exist_ok=True)
            else:
                os.mkdir(path)
        except OSError as err:
            io.error(f"mkdir: cannot create directory \u2018{name}\u2019: {strerror(err)}")
            status = 1
            continue
        if options.has("-v", "--verbose"):
            yield f"mkdir: created directory {quote(name)}\n".encode()
    return status


@command("touch")
def touch(io, args, stdin):
    """touch [-c] file...: creates it, or sets its time to now."""
    options, names = parse_options("touch", args, "c", ["no-create"])
    if not names:
        raise UsageError("missing file operand\nTry 'touch --help' for more information.")
    status = 0
    for name in names:
        path = io.path(name)
        try:
            if not os.path.exists(path):
                if options.has("-c", "--no-create"):
                    continue
                open(path, "ab").close()
            os.utime(path)
        except OSError as err:
            io.error(f"touch: cannot touch {quote(name)}: {strerror(err)}")
            status = 1
    return status
    yield


def _walk_remove(io, path, shown):
    """Remove a tree without following links; True if all went."""
    ok = True
    for root, dirs, files in os.walk(path, topdown=False, followlinks=False):
        for entry in files + [d for d in dirs if os.path.islink(os.path.join(root, d))]:
            try:
                os.unlink(os.path.join(root, entry))
            except OSError as err:
                io.error(f"rm: cannot remove {quote(os.path.join(shown, os.path.relpath(root, path), entry))}: "
                         f"{strerror(err)}")
                ok = False
        for d in dirs:
            full = os.path.join(root, d)
            if os.path.islink(full):
                continue
            try:
                os.rmdir(full)
            except OSError as err:
                if ok:
                    io.error(f"rm: cannot remove {quote(os.path.normpath(os.path.join(shown, os.path.relpath(full, path))))}: "
                             f"{strerror(err)}")
                ok = False
    try:
        os.rmdir(path)
    except OSError as err:
        if ok:
            io.error(f"rm: cannot remove {quote(shown)}: {strerror(err)}")
        ok = False
    return ok


@command("rm")
def rm(io, args, stdin):
    """rm [-r] [-f] [-d] [-v] name...: as GNU rm, which refuses / and any . or .. ."""
    options, names = parse_options("rm", args, "rRfdvi", ["recursive", "force", "dir", "verbose"])
    has = options.has
    force = has("-f", "--force")
    recursive = has("-r", "-R", "--recursive")
    if not names and not force:
        raise UsageError("missing operand\nTry 'rm --help' for more information.")
    status = 0
    for name in names:
        path = os.path.normpath(io.path(name))
        if os.path.basename(name.rstrip("/")) in (".", "..") and recursive:
            io.error(f"rm: refusing to remove '.' or '..' directory: skipping {quote(name)}")
            status = 1
            continue
        if path == "/" and recursive:
            io.error("rm: it is dangerous to operate recursively on '/'\n"
                     "rm: use --no-preserve-root to override this failsafe")
            status = 1
            continue
        try:
            st = os.lstat(path)
        except OSError as err:
            if not force:
                io.error(f"rm: cannot remove {quote(name)}: {strerror(err)}")
                status = 1
            continue
        try:
            if stat.S_ISDIR(st.st_mode):
                if recursive:
                    if not _walk_remove(io, path, name):
                        status = 1
                        continue
                elif has("-d", "--dir"):
                    os.rmdir(path)
                else:
                    io.error(f"rm: cannot remove {quote(name)}: Is a directory")
                    status = 1
                    continue
            else:
                os.unlink(path)
        except OSError as err:
            io.error(f"rm: cannot remove {quote(name)}: {strerror(err)}")
            status = 1
            continue
        if has("-v", "--verbose"):
            yield f"removed {'directory ' if stat.S_ISDIR(st.st_mode) else ''}{quote(name)}\n".encode()
    return status


def _copy_file(src, dst):
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        while True:
            chunk = fin.read(1 << 20)
            if not chunk:
                break
            fout.write(chunk)


def _copy_tree(io, src, dst, who, shown):
    ok = True
    entries = sorted(os.listdir(src))  # listed first: a copy into itself stops there
    try:
        os.mkdir(dst)
    except FileExistsError:
        pass
    for entry in entries:
        s, d = os.path.join(src, entry), os.path.join(dst, entry)
        st = os.lstat(s)
        try:
            if stat.S_ISLNK(st.st_mode):
                io.error(f"{who}: not copying link {quote(os.path.join(shown, entry))} in this sandbox")
                ok = False
            elif stat.S_ISDIR(st.st_mode):
                ok = _copy_tree(io, s, d, who, os.path.join(shown, entry)) and ok
            else:
                _copy_file(s, d)
        except OSError as err:
            io.error(f"{who}: cannot create regular file {quote(d)}: {strerror(err)}")
            ok = False
    return ok


def _targets(io, who, names):
    """(source, destination) pairs of cp/mv: into a folder when the last name is one."""
    if len(names) < 2:
        raise UsageError(f"missing destination file operand after {quote(names[0])}\nTry '{who} --help' for more "
                         "information." if names else f"missing file operand\nTry '{who} --help' for more information.")
    *sources, dest = names
    dest_path = io.path(dest)
    if os.path.isdir(dest_path):
        return [(s, os.path.join(dest_path, os.path.basename(s.rstrip("/"))), os.path.join(dest, os.path.basename(
            s.rstrip("/")))) for s in sources]
    if len(sources) > 1 or dest.endswith("/"):
        reason = "is not a directory" if os.path.exists(dest_path) else ": No such file or directory"
        raise UsageError(f"target {quote(dest)}{' ' if reason[0] != ':' else ''}{reason}")
    return [(sources[0], dest_path, dest)]


@command("cp")
def cp(io, args, stdin):
    """cp [-r] [-f] [-n] [-v] source... dest."""
    options, names = parse_options("cp", args, "rRfnvap", ["recursive", "force", "no-clobber", "verbose"])
    has = options.has
    status = 0
    for src, dst, shown in _targets(io, "cp", names):
        src_path = io.path(src)
        try:
            st = os.stat(src_path)
        except OSError as err:
            io.error(f"cp: cannot stat {quote(src)}: {strerror(err)}")
            status = 1
            continue
        if stat.S_ISDIR(st.st_mode):
            if not has("-r", "-R", "-a", "--recursive"):
                io.error(f"cp: -r not specified; omitting directory {quote(src)}")
                status = 1
                continue
            into_itself = os.path.realpath(dst).startswith(os.path.realpath(src_path) + os.sep)
            if not _copy_tree(io, src_path, dst, "cp", src):
                status = 1
            if into_itself:  # GNU copies what was there, then says so
                io.error(f"cp: cannot copy a directory, {quote(src)}, into itself, {quote(shown)}")
                status = 1
                continue
        else:
            if has("-n", "--no-clobber") and os.path.exists(dst):
                continue
            try:
                _copy_file(src_path, dst)
            except OSError as err:
                io.error(f"cp: cannot create regular file {quote(shown)}: {strerror(err)}")
                status = 1
                continue
        if has("-v", "--verbose"):
            yield f"{quote(src)} -> {quote(shown)}\n".encode()
    return status


@command("mv")
def mv(io, args, stdin):
    """mv [-f] [-n] [-v] source... dest: a rename, or copy and remove across folders
    (from the read-only notebook folder, the original is hidden in this session)."""
    options, names = parse_options("mv", args, "fnvi", ["force", "no-clobber", "verbose"])
    status = 0
    for src, dst, shown in _targets(io, "mv", names):
        src_path = io.path(src)
        if not os.path.lexists(src_path):
            io.error(f"mv: cannot stat {quote(src)}: No such file or directory")
            status = 1
            continue
        if options.has("-n", "--no-clobber") and os.path.lexists(dst):
            continue
        try:
            os.rename(src_path, dst)
        except OSError as err:
            try:
                if os.path.isdir(src_path):
                    if not _copy_tree(io, src_path, dst, "mv", src) or not _walk_remove(io, src_path, src):
                        status = 1
                        continue
                else:
                    _copy_file(src_path, dst)
                    os.unlink(src_path)
            except OSError as err2:
                io.error(f"mv: cannot move {quote(src)} to {quote(shown)}: {strerror(err2 or err)}")
                status = 1
                continue
        if options.has("-v", "--verbose"):
            yield f"renamed {quote(src)} -> {quote(shown)}\n".encode()
    return status


@command("find")
def find(io, args, stdin):
    """find [path...] [-name P] [-iname P] [-type f|d] [-maxdepth N] [-mindepth N]
    [-print]: names in sorted order (GNU lists a folder in the order the disk keeps)."""
    import fnmatch

    paths = []
    while args and not args[0].startswith("-"):
        paths.append(args.pop(0))
    tests = []
    maxdepth, mindepth = None, 0
    while args:
        opt = args.pop(0)
        if opt == "-print":
            continue
        if opt in ("-name", "-iname", "-type", "-maxdepth", "-mindepth", "-path") and not args:
            io.error(f"find: missing argument to `{opt}'")
            return 1
        if opt == "-name":
            pat = args.pop(0)
            tests.append(lambda p, st, pat=pat: fnmatch.fnmatchcase(os.path.basename(p), pat))
        elif opt == "-iname":
            pat = args.pop(0).lower()
            tests.append(lambda p, st, pat=pat: fnmatch.fnmatchcase(os.path.basename(p).lower(), pat))
        elif opt == "-path":
            pat = args.pop(0)
            tests.append(lambda p, st, pat=pat: fnmatch.fnmatchcase(p, pat))
        elif opt == "-type":
            kind = args.pop(0)
            if kind not in ("f", "d", "l"):
                io.error(f"find: Unknown argument to -type: {kind}")
                return 1
            tests.append(lambda p, st, kind=kind: _type_char(st) == {"f": "-", "d": "d", "l": "l"}[kind])
        elif opt == "-maxdepth":
            maxdepth = int(args.pop(0))
        elif opt == "-mindepth":
            mindepth = int(args.pop(0))
        else:
            io.error(f"find: unknown predicate `{opt}' (this sandbox's find takes -name, -iname, -path, -type, "
                     "-maxdepth, -mindepth)")
            return 1
    status = 0
    for top in paths or ["."]:
        full = io.path(top)
        try:
            st = os.lstat(full)
        except OSError as err:
            io.error(f"find: \u2018{top}\u2019: {strerror(err)}")
            status = 1
            continue
        stack = [(top, full, st, 0)]
        while stack:
            shown, path, st, depth = stack.pop()
            if depth >= mindepth and all(t(shown, st) for t in tests):
                yield (shown + "\n").encode()
            if stat.S_ISDIR(st.st_mode) and (maxdepth is None or depth < maxdepth):
                try:
                    children = sorted(os.listdir(path), reverse=True)
                except OSError as err:
                    io.error(f"find: \u2018{shown}\u2019: {strerror(err)}")
                    status = 1
                    continue
                for child in children:
                    try:
                        cst = os.lstat(os.path.join(path, child))
                    except OSError:
                        continue
                    stack.append((os.path.join(shown, child) if shown != "/" else "/" + child,
                                  os.path.join(path, child), cst, depth + 1))
    return status


@command("du")
def du(io, args, stdin):
    """du [-s] [-h] [-a] [-c] [-d N] [name...]: disk use in KiB (in the guest, whole
    4 KiB blocks: the sandbox does not see the disk's own figure)."""
    options, names = parse_options("du", args, "shacd:", ["summarize", "human-readable", "all", "total", "max-depth="])
    has = options.has
    depth_limit = 0 if has("-s", "--summarize") else None
    if options.has("-d", "--max-depth"):
        depth_limit = int((options.get("-d") or options.get("--max-depth"))[-1])
    human = has("-h", "--human-readable")
    show = (lambda k: human_size(k * 1024)) if human else str
    grand = 0
    status = 0
    for name in names or ["."]:
        path = io.path(name)
        try:
            top = os.lstat(path)
        except OSError as err:
            io.error(f"du: cannot access {quote(name)}: {strerror(err)}")
            status = 1
            continue
        rows = []

        def walk(p, shown, st, depth):
            total = _blocks_k(st)
            if stat.S_ISDIR(st.st_mode):
                try:
                    children = sorted(os.listdir(p))
                except OSError as err:
                    io.error(f"du: cannot read directory {quote(shown)}: {strerror(err)}")
                    children = []
                for child in children:
                    cp_ = os.path.join(p, child)
                    cst = os.lstat(cp_)
                    total += walk(cp_, os.path.join(shown, child), cst, depth + 1)
                if depth_limit is None or depth <= depth_limit:
                    rows.append((total, shown))
            elif has("-a", "--all") and (depth_limit is None or depth <= depth_limit) or depth == 0:
                rows.append((total, shown))
            return total

        grand += walk(path, name, top, 0)
        for k, shown in rows:
            yield f"{show(k)}\t{shown}\n".encode()
    if has("-c", "--total"):
        yield f"{show(grand)}\ttotal\n".encode()
    return status
