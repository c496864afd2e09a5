"""The WASI preview 1 numbers the host-side WASI code shares (wasi_snapshot_preview1's
witx: errno, filetype, oflags, fdflags, rights, and the sizes of its structs), one
spelling for each. Errno values keep POSIX's names, as wasi-libc maps them."""

from __future__ import annotations

# errno
SUCCESS = 0
EACCES = 2
EBADF = 8
EEXIST = 20
EFAULT = 21
EINVAL = 28
EIO = 29
EISDIR = 31
ENAMETOOLONG = 37
ENOENT = 44
ENOSPC = 51
ENOTDIR = 54
EROFS = 69
ESPIPE = 70
ENOTCAPABLE = 76

# filetype
FILETYPE_UNKNOWN = 0
FILETYPE_DIRECTORY = 3
FILETYPE_REGULAR = 4
FILETYPE_SYMLINK = 7

# path_open's oflags and fdflags
OFLAG_CREAT = 1
OFLAG_DIRECTORY = 2
OFLAG_EXCL = 4
OFLAG_TRUNC = 8
FDFLAG_APPEND = 1
FDFLAG_NONBLOCK = 4

# rights
RIGHT_FD_READ = 1 << 1
RIGHT_FD_WRITE = 1 << 6
RIGHT_FD_ALLOCATE = 1 << 8
RIGHT_FD_READDIR = 1 << 14
RIGHT_FD_FILESTAT_SET_SIZE = 1 << 22

# struct sizes
FILESTAT_BYTES = 64
DIRENT_HEADER = 24
SUBSCRIPTION_SIZE = 48
EVENT_SIZE = 32

# clocks
CLOCK_REALTIME = 0
CLOCK_MONOTONIC = 1
SUBCLOCK_ABSTIME = 1
