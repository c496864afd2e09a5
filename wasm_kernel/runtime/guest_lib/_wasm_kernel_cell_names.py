"""The file name of each cell's code: ipykernel's, so JupyterLab's debugger finds a
cell from its code alone (debugInfo gives it the prefix, the hash and the seed).
murmur2 as ipykernel.compiler.murmur2_x86 computes it (MurmurHash2, 32 bits, of the
code's UTF-8 bytes); tests/runtime/test_debugger_guest.py pins that the two agree."""

import struct

import _wasm_kernel_wire as wire

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(text, seed):
    data = text.encode("utf-8")
    length = len(data)
    h = (seed ^ length) & _MASK
    whole = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[whole:]
    if tail:
        h ^= int.from_bytes(tail, "little")
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def cell_path(code):
    return f"{wire.CELL_FILE_PREFIX}{murmur2(code, wire.CELL_HASH_SEED)}.py"


def is_cell(filename):
    return filename.startswith(wire.CELL_FILE_PREFIX)
