"""The confined shell's archive commands: unzip, tar, gzip and gunzip.

An archive is input from anyone, so a member is written only where a plain relative
name says: a member with an absolute path, a `..` component, or that is a link or a
device is refused with one line and the rest is still extracted (Info-ZIP's unzip
and GNU tar skip such members too). A damaged archive (a bad CRC, an encrypted
member, an unknown compression method, data cut short or corrupt) gets the line the
real tool prints for it and its exit status, never a Python traceback: unzip goes on
with the other members, as Info-ZIP's does; tar and gunzip stop there, as GNU's do.
Every byte lands through the guest's own files, so the disk quota counts it before
it is written. Runs in the guest.
"""

import gzip
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
import zlib

from _wasm_kernel_sh_commands import UsageError, command, parse_options, quote, strerror


def _unsafe_reason(name):
    """Why a member's name may not be written, or None."""
    if name.startswith("/") or name.startswith("\\") or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "'..' in its path"
    return None


# What Python raises for a damaged compressed stream (gzip, bzip2, xz) or tar data;
# OSError is also a full disk or a folder that cannot be made, which _damage tells apart.
_DAMAGE = (EOFError, zlib.error, lzma.LZMAError, OSError, tarfile.ReadError)


def _damage(err):
    """What is wrong with an archive's data, in gzip's words, or None when the error is
    not the archive's (a full disk, a folder that cannot be made)."""
    if isinstance(err, EOFError) or (isinstance(err, tarfile.ReadError) and "unexpected end" in str(err)):
        return "unexpected end of file"
    if isinstance(err, gzip.BadGzipFile):
        text = str(err)
        if text.startswith("CRC check failed"):
            return "invalid compressed data--crc error"
        if text.startswith("Incorrect length"):
            return "invalid compressed data--length error"
        return "not in gzip format"
    if isinstance(err, zlib.error):
        return "invalid compressed data--format violated"
    if isinstance(err, lzma.LZMAError) or (isinstance(err, OSError) and err.errno is None):
        return "compressed data is corrupt"  # xz's and bzip2's (bz2 raises a bare OSError)
    if isinstance(err, tarfile.ReadError):
        return "This does not look like a tar archive"
    return None


def _extract_member(z, info, dest):
    """The member's bytes into the file `dest` (made only once the member opens: an
    unknown method leaves an existing file alone); its CRC-32 as computed. zipfile
    checks the CRC itself only at the end, raising with the last chunk kept back:
    like unzip, the whole member is written here and the caller compares the CRC."""
    crc = 0
    with z.open(info) as src:
        if hasattr(src, "_expected_crc"):
            src._expected_crc = None
        with open(dest, "wb") as out:
            while chunk := src.read(1 << 20):
                out.write(chunk)
                crc = zlib.crc32(chunk, crc)
    return crc


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
    except zipfile.BadZipFile:
        io.error(f"unzip:  cannot find zipfile directory in {archive}: not a zip file, or one cut short")
        return 9
    except OSError as err:
        io.error(f"unzip:  cannot read {archive}: {strerror(err)}")
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
            # Info-ZIP's words and statuses for a member it cannot extract (it goes on
            # with the others): 5 for a password it cannot ask for, 81 for a method it
            # lacks, 2 for data that is damaged or fails its CRC.
            column = f"{shown(name):<22s}  "
            if info.flag_bits & 0x1:
                io.error(f"   skipping: {column}unable to get password")
                status = max(status, 5)
                continue
            verb = "  inflating" if info.compress_type != zipfile.ZIP_STORED else " extracting"
            try:
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                crc = _extract_member(z, info, dest)
            except NotImplementedError:
                if not quiet:
                    io.error(f"   skipping: {column}unsupported compression method {info.compress_type}")
                status = max(status, 81)
                continue
            except (zlib.error, EOFError, lzma.LZMAError, zipfile.BadZipFile, OSError) as err:
                if isinstance(err, OSError) and _damage(err) is None:  # not the archive's: the disk's, a folder's
                    io.error(f"error:  cannot create {name}\n        {strerror(err)}")
                    status = 50 if err.errno in (28, 122) else max(status, 1)
                    if status == 50:
                        return status
                    continue
                if quiet:
                    io.error(f"  error:  invalid compressed data to inflate {shown(name)}")
                else:
                    yield f"{verb}: {column}".encode()
                    io.error("\n  error:  invalid compressed data to inflate")
                status = max(status, 2)
                continue
            if crc != info.CRC:
                if not quiet:
                    yield f"{verb}: {column}".encode()
                io.error(f"{column if quiet else ' '}bad CRC {crc:08x}  (should be {info.CRC:08x})")
                status = max(status, 2)
            elif not quiet:
                yield f"{verb}: {column}\n".encode()
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
        raw = open(path, "rb")  # opened here: tarfile's own object on it tells a compressed archive
    except FileNotFoundError as err:
        if compression:  # GNU tar reads through a child gzip, which reports first
            io.error(f"tar (child): {archive}: Cannot open: {strerror(err)}\n"
                     "tar (child): Error is not recoverable: exiting now\ntar: Child returned status 2\n"
                     "tar: Error is not recoverable: exiting now")
        else:
            io.error(f"tar: {archive}: Cannot open: {strerror(err)}\ntar: Error is not recoverable: exiting now")
        return 2
    except OSError:  # a folder, say
        return _not_a_tar(io)
    try:
        t = tarfile.open(fileobj=raw, mode="r:*")
    except (*_DAMAGE, tarfile.TarError):
        with raw:
            problem = _gzip_problem(raw)
        if problem is None:
            return _not_a_tar(io)
        io.error(f"tar: {archive}: {problem}")
        return 2
    status = 0
    current = None  # the member being extracted, which a damage is in
    with raw, t:
        try:
            for member in t:
                if names and not any(member.name == n or member.name.startswith(n.rstrip("/") + "/") for n in names):
                    continue
                shown = member.name + ("/" if member.isdir() and not member.name.endswith("/") else "") + "\n"
                if mode == "t":
                    yield shown.encode()
                    continue
                reason = _unsafe_reason(member.name)
                if reason is None and not (member.isfile() or member.isdir()):
                    reason = "a link" if member.issym() or member.islnk() else "not a file or folder"
                if reason:
                    io.error(f"tar: {member.name}: skipped: {reason} (not extracted in this sandbox)")
                    status = 2
                    continue
                current = member
                try:
                    t.extract(member, folder, filter="data")
                except (OSError, tarfile.TarError) as err:
                    if isinstance(err, _DAMAGE) and _damage(err) is not None:
                        raise  # the archive's, not this member's: below
                    io.error(f"tar: {member.name}: Cannot open: {strerror(err) if isinstance(err, OSError) else err}")
                    status = 2
                    continue
                current = None
                if verbose:
                    yield shown.encode()
            if t.fileobj is not raw:  # compressed: read to the stream's end, where its CRC is checked, as gzip does
                while t.fileobj.read(1 << 20):
                    pass
        except _DAMAGE as err:
            # GNU tar stops at a damaged archive ("Error is not recoverable"): one line, status 2.
            problem = _tar_problem(err) or f"Cannot read: {strerror(err)}"
            io.error(f"tar: {current.name if current is not None else archive}: {problem}")
            return 2
    if status:
        io.error("tar: Exiting with failure status due to previous errors")
    return status


def _tar_problem(err):
    problem = _damage(err)
    return "Unexpected EOF in archive" if problem == "unexpected end of file" else problem


def _gzip_problem(raw):
    """What is wrong with a gzip stream tarfile could not open (its first block is
    damaged or cut short), or None: not gzip, or no tar inside."""
    raw.seek(0)
    if raw.read(2) != b"\x1f\x8b":
        return None
    raw.seek(0)
    try:
        with gzip.GzipFile(fileobj=raw) as stream:
            stream.read(tarfile.BLOCKSIZE)
    except _DAMAGE as err:
        return _tar_problem(err)
    return None


def _not_a_tar(io):
    io.error("tar: This does not look like a tar archive\ntar: Exiting with failure status due to previous errors")
    return 2


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
            try:
                with opener(src, "rb") as f:
                    if decompress:  # read1: what came before a damage is written first, as gzip writes it
                        while chunk := f.read1(1 << 20):
                            yield chunk
                    else:
                        yield gzip.compress(f.read())
            except (OSError, EOFError, zlib.error) as err:
                _gzip_failed(io, name, err)
                status = 1
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
        except (OSError, EOFError, zlib.error) as err:
            _gzip_failed(io, name, err)
            if os.path.exists(dest):
                os.unlink(dest)
            status = 1
            continue
        if not has("-k", "--keep"):
            os.unlink(src)
    return status


def _gzip_failed(io, name, err):
    """gzip's line for a file it could not (de)compress; a damaged one's comes after a
    blank line, as gzip prints it."""
    problem = _damage(err)
    io.error(f"gzip: {name}: {strerror(err)}" if problem is None else f"\ngzip: {name}: {problem}")
