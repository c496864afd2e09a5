"""Just enough of the wasm binary format to export what the host needs of the guest.

Rollback needs the guest's whole wasm state from outside: linear memory (already
exported) plus every mutable global (`__stack_pointer` in the CPython reactor). The
stock module does not export its globals, so we add export entries for them.

A soft interrupt needs CPython's own `PyErr_SetInterruptEx`, the async-signal-safe
call a SIGINT handler makes: the host calls it from the epoch callback, and the
guest raises KeyboardInterrupt at its next eval-breaker check. It is found by name
in the module's `name` section and exported too.

The patch touches only the export section; code and data are copied byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = b"\x00asm\x01\x00\x00\x00"
SECTION_IMPORT = 2
SECTION_GLOBAL = 6
SECTION_EXPORT = 7
KIND_FUNC = 0
KIND_GLOBAL = 3
GLOBAL_EXPORT_PREFIX = "__wasm_kernel_global_"
INTERRUPT_EXPORT = "__wasm_kernel_set_interrupt"
INTERRUPT_FUNCTION = "PyErr_SetInterruptEx"
_NAME_SUBSECTION_FUNCTIONS = 1


class WasmFormatError(ValueError):
    """The bytes are not a wasm module this patcher understands."""


def _read_u32(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WasmFormatError("truncated LEB128 integer")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 35:
            raise WasmFormatError("LEB128 integer too long")


def _write_u32(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _name(text: str) -> bytes:
    raw = text.encode()
    return _write_u32(len(raw)) + raw


@dataclass(frozen=True)
class Section:
    id: int
    start: int  # offset of the section id byte
    body_start: int
    body_end: int


def sections(data: bytes | memoryview) -> list[Section]:
    if bytes(data[:8]) != MAGIC:
        raise WasmFormatError("not a wasm module (bad magic or version)")
    out = []
    pos = 8
    while pos < len(data):
        sid = data[pos]
        size, body = _read_u32(data, pos + 1)
        if body + size > len(data):
            raise WasmFormatError(f"section {sid} runs past the end of the module")
        out.append(Section(sid, pos, body, body + size))
        pos = body + size
    return out


def _skip_limits_or_type(data: bytes | memoryview, pos: int, kind: int) -> int:
    if kind == 0:  # func: type index
        return _read_u32(data, pos)[1]
    if kind == 1:  # table: reftype, limits
        pos += 1
        return _skip_limits(data, pos)
    if kind == 2:  # memory: limits
        return _skip_limits(data, pos)
    if kind == 3:  # global: valtype, mut
        return pos + 2
    if kind == 4:  # tag: attribute, type index
        return _read_u32(data, pos + 1)[1]
    raise WasmFormatError(f"unknown import kind {kind}")


def _skip_limits(data: bytes | memoryview, pos: int) -> int:
    flags = data[pos]
    pos = _read_u32(data, pos + 1)[1]
    if flags & 1:
        pos = _read_u32(data, pos)[1]
    return pos


def imported_global_count(data: bytes | memoryview, secs: list[Section]) -> int:
    count = 0
    for s in secs:
        if s.id != SECTION_IMPORT:
            continue
        n, pos = _read_u32(data, s.body_start)
        for _ in range(n):
            for _field in range(2):
                length, pos = _read_u32(data, pos)
                pos += length
            kind = data[pos]
            pos += 1
            if kind == KIND_GLOBAL:
                count += 1
            pos = _skip_limits_or_type(data, pos, kind)
    return count


def mutable_global_indices(data: bytes | memoryview) -> list[int]:
    """Indices (in the module's global index space) of the globals it defines as mutable."""
    secs = sections(data)
    base = imported_global_count(data, secs)
    found: list[int] = []
    for s in secs:
        if s.id != SECTION_GLOBAL:
            continue
        n, pos = _read_u32(data, s.body_start)
        for i in range(n):
            mutable = data[pos + 1]
            pos += 2
            # Constant init expression: opcodes until `end` (0x0b). Only simple
            # constants appear in a global initialiser of this module.
            while data[pos] != 0x0B:
                op = data[pos]
                pos += 1
                if op in (0x41, 0x42, 0x23):  # i32.const, i64.const, global.get
                    while data[pos] & 0x80:
                        pos += 1
                    pos += 1
                elif op == 0x43:  # f32.const
                    pos += 4
                elif op == 0x44:  # f64.const
                    pos += 8
                else:
                    raise WasmFormatError(f"unsupported opcode 0x{op:02x} in a global initialiser")
            pos += 1
            if mutable:
                found.append(base + i)
    return found


def function_index(data: bytes | memoryview, name: str) -> int | None:
    """The index of the function the `name` custom section calls `name`, or None."""
    wanted = name.encode()
    for s in sections(data):
        if s.id != 0:
            continue
        length, pos = _read_u32(data, s.body_start)
        if bytes(data[pos : pos + length]) != b"name":
            continue
        pos += length
        while pos < s.body_end:
            sub = data[pos]
            size, body = _read_u32(data, pos + 1)
            if sub == _NAME_SUBSECTION_FUNCTIONS:
                count, q = _read_u32(data, body)
                for _ in range(count):
                    index, q = _read_u32(data, q)
                    n, q = _read_u32(data, q)
                    if bytes(data[q : q + n]) == wanted:
                        return index
                    q += n
            pos = body + size
    return None


def add_exports(data: bytes, entries: list[tuple[str, int, int]]) -> bytes:
    """The module with export entries (name, kind, index) added."""
    view = memoryview(data)
    export = next((s for s in sections(view) if s.id == SECTION_EXPORT), None)
    if export is None:
        raise WasmFormatError("module has no export section")
    count, pos = _read_u32(view, export.body_start)
    existing = bytes(view[pos : export.body_end])
    added = b"".join(_name(name) + bytes([kind]) + _write_u32(index) for name, kind, index in entries)
    body = _write_u32(count + len(entries)) + existing + added
    return b"".join(
        [bytes(view[: export.start]), bytes([SECTION_EXPORT]), _write_u32(len(body)), body, bytes(view[export.body_end :])]
    )


def _global_exports(data: bytes) -> list[tuple[str, int, int]]:
    return [(f"{GLOBAL_EXPORT_PREFIX}{i}", KIND_GLOBAL, i) for i in mutable_global_indices(data)]


def export_mutable_globals(data: bytes) -> bytes:
    """The module with an export `__wasm_kernel_global_<i>` for every mutable global."""
    return add_exports(data, _global_exports(data))


def patch_guest_module(data: bytes) -> bytes:
    """The guest as the host runs it: its mutable globals exported, and CPython's
    PyErr_SetInterruptEx as INTERRUPT_EXPORT when the name section names it (without
    it, every interrupt rolls back)."""
    entries = _global_exports(data)
    interrupt = function_index(data, INTERRUPT_FUNCTION)
    if interrupt is not None:
        entries.append((INTERRUPT_EXPORT, KIND_FUNC, interrupt))
    return add_exports(data, entries)
