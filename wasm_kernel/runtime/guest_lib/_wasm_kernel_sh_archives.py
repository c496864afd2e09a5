"""The confined shell's archive commands: unzip, tar, gzip and gunzip.

An archive is input from anyone, so a member is written only where a plain relative
name says: a member with an absolute path, a `..` component, or that is a link or a
device is refused with one line and the rest is still extracted (Info-ZIP's unzip
and GNU tar skip such members too). Every byte lands through the guest's own files,
so the disk quota counts it before it is written. Runs in the guest.
"""

import gzip
import os
import shutil
import stat
import tarfile
import zipfile

from _wasm_kernel_sh_commands import UsageError, command, parse_options, quote, strerror


def _unsafe_reason(name):
    """Why a member's name may not be written, or None."""
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "'..' in its path"
    return None


@command("unzip")
def unzip(io, args, stdin):
    """unzip [-o] [-n] [-q] [-l] [-d folder] archive.zip [member...]. Without -o an
    existing file is kept, as unzip does when no one answers its question."""
    options, names = parse_options("unzip", args, "onqld:")
    if not names:
        raise UsageError("no archive named\nusage: unzip [-o] [-n] [-q] [-l] [-d folder] archive.zip", 10)
    archive, wanted = names[0], set(names[1:])
    target = io.path(options["-d"][-1]) if "-d" in options else io.cwd
    quiet = "-q" in options

    def shown(name):
        return os.path.join(options["-d"][-1], name) if "-d" in options else name

    path = io.path(archive)
    if not os.path.exists(path) and os.path.exists(path + ".zip"):
        path += ".zip"
    try:
        z = zipfile.ZipFile(path)
    except FileNotFoundError:
        io.error(f"unzip:  cannot find or open {archive}, {archive}.zip or {archive}.ZIP.")
        return 9
    except (OSError, zipfile.BadZipFile) as err:
        io.error(f"unzip:  cannot read {archive}: {strerror(err) if isinstance(err, OSError) else 'not a zip file'}")
        return 9
    status = 0
    with z:
        if not quiet:
            yield f"Archive:  {archive}\n".encode()
        infos = [i for i in z.infolist() if not wanted or i.filename in wanted]
        if "-l" in options:
            yield from _zip_listing(infos)
            return 0
        for info in infos:
            name = info.filename
            reason = _unsafe_reason(name)
            mode = info.external_attr >> 16
            if reason is None and (stat.S_ISLNK(mode) or stat.S_ISCHR(mode) or stat.S_ISBLK(mode)):
                reason = "a link" if stat.S_ISLNK(mode) else "a device"
            if reason:
                io.error(f"unzip: skipped {quote(name)}: {reason} (not extracted in this sandbox)")
                status = max(status, 1)
                continue
            dest = os.path.join(target, name)
            if info.is_dir():
                os.makedirs(dest, exist_ok=True)
                if not quiet:
                    yield f"   creating: {shown(name)}\n".encode()
                continue
            if os.path.lexists(dest) and "-o" not in options:
                if "-n" not in options:
                    yield (f"replace {name}? [y]es, [n]o, [A]ll, [N]one, [r]ename:  NULL\n"
                           '(EOF or read error, treating as "[N]one" ...)\n').encode()
                    return 1
                continue
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with z.open(info) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
            except OSError as err:
                io.error(f"error:  cannot create {name}\n        {strerror(err)}")
                status = 50 if getattr(err, "errno", None) in (28, 122) else max(status, 1)
                if status == 50:
                    return status
                continue
            if not quiet:
                verb = "  inflating" if info.compress_type != zipfile.ZIP_STORED else " extracting"
                yield f"{verb}: {shown(name):<22s}  \n".encode()
    return status


def _zip_listing(infos):
    yield b"  Length      Date    Time    Name\n---------  ---------- -----   ----\n"
    total = 0
    for info in infos:
        y, mo, d, h, mi, _ = info.date_time
        total += info.file_size
        yield f"{info.file_size:>9}  {y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}   {info.filename}\n".encode()
    yield f"---------                     -------\n{total:>9}                     {len(infos)} file{'s' if len(infos) != 1 else ''}\n".encode()


@command("tar")
def tar(io, args, stdin):
    """tar -x|-c|-t [-z] [-j] [-v] -f archive [-C folder] [name...] (also the old
    form `tar xzf archive`). Extraction uses Python's "data" filter as well as the
    checks above: no absolute names, no `..`, no links or devices."""
    if args and not args[0].startswith("-"):
        args = ["-" + args[0]] + args[1:]
    options, names = parse_options("tar", args, "xctzjJvf:C:", ["extract", "create", "list", "gzip", "file=",
                                                                "directory=", "verbose"], usage_status=2)
    has = options.has
    mode = "x" if has("-x", "--extract") else "c" if has("-c", "--create") else "t" if has("-t", "--list") else None
    if mode is None:
        raise UsageError("You must specify one of the '-Acdtrux', '--delete' or '--test-label' options\n"
                         "Try 'tar --help' or 'tar --usage' for more information.", 2)
    archive = (options.get("-f") or options.get("--file") or [None])[-1]
    if archive is None:
        io.error("tar: an archive file is needed (-f name) in this sandbox: there is no tape")
        return 2
    folder = io.path((options.get("-C") or options.get("--directory") or ["."])[-1])
    compression = "gz" if has("-z", "--gzip") else "bz2" if has("-j") else "xz" if has("-J") else ""
    verbose = has("-v", "--verbose")
    path = io.path(archive)
    if mode == "c":
        try:
            with tarfile.open(path, "w:" + compression) as t:
                for name in names:
                    for member in _tar_walk(io, folder, name):
                        t.add(os.path.join(folder, member), arcname=member, recursive=False)
                        if verbose:
                            yield (member + ("/" if os.path.isdir(os.path.join(folder, member)) else "") + "\n").encode()
        except OSError as err:
            io.error(f"tar: {archive}: Cannot open: {strerror(err)}\ntar: Error is not recoverable: exiting now")
            return 2
        if not names:
            io.error("tar: Cowardly refusing to create an empty archive\nTry 'tar --help' or 'tar --usage' for more "
                     "information.")
            return 2
        return 0
    if not os.path.isdir(folder):
        io.error(f"tar: {(options.get('-C') or options.get('--directory'))[-1]}: Cannot open: "
                 f"{'Not a directory' if os.path.exists(folder) else 'No such file or directory'}\n"
                 "tar: Error is not recoverable: exiting now")
        return 2
    try:
        t = tarfile.open(path, "r:*")
    except FileNotFoundError as err:
        if compression:  # GNU tar reads through a child gzip, which reports first
            io.error(f"tar (child): {archive}: Cannot open: {strerror(err)}\n"
                     "tar (child): Error is not recoverable: exiting now\ntar: Child returned status 2\n"
                     "tar: Error is not recoverable: exiting now")
        else:
            io.error(f"tar: {archive}: Cannot open: {strerror(err)}\ntar: Error is not recoverable: exiting now")
        return 2
    except (OSError, tarfile.TarError):
        io.error("tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors")
        return 2
    status = 0
    with t:
        for member in t:
            if names and not any(member.name == n or member.name.startswith(n.rstrip("/") + "/") for n in names):
                continue
            if mode == "t":
                yield (member.name + ("/" if member.isdir() and not member.name.endswith("/") else "") + "\n").encode()
                continue
            reason = _unsafe_reason(member.name)
            if reason is None and not (member.isfile() or member.isdir()):
                reason = "a link" if member.issym() or member.islnk() else "not a file or folder"
            if reason:
                io.error(f"tar: {member.name}: skipped: {reason} (not extracted in this sandbox)")
                status = 2
                continue
            try:
                t.extract(member, folder, filter="data")
            except (OSError, tarfile.TarError) as err:
                io.error(f"tar: {member.name}: Cannot open: {strerror(err) if isinstance(err, OSError) else err}")
                status = 2
                continue
            if verbose:
                yield (member.name + ("/" if member.isdir() and not member.name.endswith("/") else "") + "\n").encode()
    if status:
        io.error("tar: Exiting with failure status due to previous errors")
    return status


def _tar_walk(io, folder, name):
    """Names under `name` (itself first), relative to folder; links are not followed."""
    yield name
    full = os.path.join(folder, name)
    if os.path.isdir(full) and not os.path.islink(full):
        for root, dirs, files in os.walk(full):
            dirs.sort()
            rel = os.path.relpath(root, folder)
            for entry in dirs + sorted(files):
                yield os.path.join(rel, entry)


@command("gunzip")
def gunzip(io, args, stdin):
    """gunzip [-k] [-c] [-f] file.gz...: file.gz becomes file."""
    return (yield from _gzip(io, ["-d"] + args, "gunzip"))


@command("gzip")
def gzip_(io, args, stdin):
    """gzip [-d] [-k] [-c] [-f] file...: file becomes file.gz (or back, with -d)."""
    return (yield from _gzip(io, args, "gzip"))


def _gzip(io, args, who):
    options, names = parse_options(who, args, "dkcfq", ["decompress", "keep", "stdout", "force"])
    has = options.has
    decompress = has("-d", "--decompress")
    status = 0
    for name in names:
        src = io.path(name)
        if decompress:
            if not name.endswith((".gz", ".tgz")):
                io.error(f"gzip: {name}: unknown suffix -- ignored")
                status = max(status, 2)
                continue
            dest = src[:-3] if name.endswith(".gz") else src[:-4] + ".tar"
        else:
            dest = src + ".gz"
        if not os.path.exists(src):
            io.error(f"gzip: {name}: {strerror(FileNotFoundError(2, ''))}")
            status = 1
            continue
        if has("-c", "--stdout"):
            opener = gzip.open if decompress else open
            with opener(src, "rb") as f:
                if decompress:
                    while chunk := f.read(1 << 20):
                        yield chunk
                else:
                    yield gzip.compress(f.read())
            continue
        if os.path.exists(dest) and not has("-f", "--force"):
            io.error(f"gzip: {os.path.relpath(dest, io.cwd) if not os.path.isabs(name) else dest} already exists;"
                     "\tnot overwritten")
            status = 2
            continue
        try:
            with (gzip.open(src, "rb") if decompress else open(src, "rb")) as fin, \
                    (open(dest, "wb") if decompress else gzip.open(dest, "wb")) as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
        except (OSError, EOFError, gzip.BadGzipFile) as err:
            message = strerror(err) if isinstance(err, OSError) and not isinstance(err, gzip.BadGzipFile) \
                else "not in gzip format"
            io.error(f"gzip: {name}: {message}")
            if os.path.exists(dest):
                os.unlink(dest)
            status = 1
            continue
        if not has("-k", "--keep"):
            os.unlink(src)
    return status
