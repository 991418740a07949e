"""A deliberately plain reference packer (struct/ctypes), for differential tests only.

It follows the untyped mapping table in DESIGN.md and C alignment rules, independently of
kernarg's implementation. It also names the C type of each value for the NVRTC oracle.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

_NP_CTYPE = {
    np.bool_: "bool", np.int8: "signed char", np.uint8: "unsigned char", np.int16: "short",
    np.uint16: "unsigned short", np.int32: "int", np.uint32: "unsigned int",
    np.int64: "long long", np.uint64: "unsigned long long", np.float16: "__half",
    np.float32: "float", np.float64: "double", np.complex64: "float2", np.complex128: "double2",
}
_CT_CTYPE = {
    ctypes.c_bool: "bool", ctypes.c_char: "char", ctypes.c_byte: "signed char",
    ctypes.c_ubyte: "unsigned char", ctypes.c_short: "short", ctypes.c_ushort: "unsigned short",
    ctypes.c_int: "int", ctypes.c_uint: "unsigned int", ctypes.c_long: "long",
    ctypes.c_ulong: "unsigned long", ctypes.c_longlong: "long long",
    ctypes.c_ulonglong: "unsigned long long", ctypes.c_float: "float",
    ctypes.c_double: "double", ctypes.c_void_p: "void*", ctypes.c_size_t: "size_t",
    ctypes.c_ssize_t: "long", ctypes.c_int8: "signed char", ctypes.c_uint8: "unsigned char",
    ctypes.c_int16: "short", ctypes.c_uint16: "unsigned short", ctypes.c_int32: "int",
    ctypes.c_uint32: "unsigned int", ctypes.c_int64: "long long",
    ctypes.c_uint64: "unsigned long long", ctypes.c_wchar: "unsigned int",
}


class Pointer:
    """Marks an argument the reference packs as an 8-byte address."""

    def __init__(self, address: int):
        self.address = address


def encode(value, address_of=None) -> tuple[bytes, int]:
    """Return (bytes, alignment) of one argument."""
    if address_of is not None:
        addr = address_of(value)
        if addr is not None:
            return struct.pack("<Q", addr), 8
    if isinstance(value, Pointer):
        return struct.pack("<Q", value.address), 8
    if value is None:
        return bytes(8), 8
    if isinstance(value, np.generic):
        raw = value.tobytes()
        if isinstance(value, np.complexfloating):
            return raw, len(raw)
        return raw, _c_alignment(value.dtype)
    if isinstance(value, bool):
        return (b"\x01" if value else b"\x00"), 1
    if isinstance(value, int):
        return struct.pack("<q" if value < 2**63 else "<Q", value), 8
    if isinstance(value, float):
        return struct.pack("<d", value), 8
    if isinstance(value, complex):
        return struct.pack("<dd", value.real, value.imag), 16
    if isinstance(value, ctypes._SimpleCData | ctypes.Structure | ctypes.Union | ctypes.Array):
        return bytes(memoryview(value).cast("B")), ctypes.alignment(type(value))
    raise TypeError(f"reference packer: no mapping for {type(value)}")


def pack(args, address_of=None) -> tuple[bytes, tuple[int, ...], tuple[int, ...]]:
    out = bytearray()
    offsets, sizes = [], []
    for value in args:
        raw, align = encode(value, address_of)
        out += bytes(-len(out) % align)
        offsets.append(len(out))
        sizes.append(len(raw))
        out += raw
    return bytes(out), tuple(offsets), tuple(sizes)


def _struct_decl(name: str, fields: list[tuple[str, str]], align: int | None) -> str:
    body = " ".join(f"{t} {n};" for n, t in fields)
    spec = f"__align__({align}) " if align else ""
    return f"struct {spec}{name} {{ {body} }};"


def _c_alignment(dtype: np.dtype) -> int:
    """A C struct's alignment is its widest-aligned member's; numpy says so for an aligned
    struct dtype, but 1 for the same dtype rewrapped as numpy.record or numpy.void."""
    if not dtype.names or not dtype.isalignedstruct:
        return dtype.alignment
    return max(_c_alignment(dtype.fields[name][0].base) for name in dtype.names)


def c_type(value, structs: dict[str, str]) -> str:
    """The C parameter type for ``value``; struct definitions are added to ``structs``."""
    if value is None or isinstance(value, Pointer):
        return "void*"
    if ml_dtypes is not None and type(value) is ml_dtypes.bfloat16:
        return "__nv_bfloat16"
    if isinstance(value, np.void):
        return _np_struct(value.dtype, structs)
    if isinstance(value, np.generic):
        return _NP_CTYPE[type(value)]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "long long" if value < 2**63 else "unsigned long long"
    if isinstance(value, float):
        return "double"
    if isinstance(value, complex):
        return "double2"
    if isinstance(value, ctypes.Array):
        elem = _ctypes_type(value._type_, structs)
        name = f"Arr{len(structs)}"
        structs[name] = f"struct {name} {{ {elem} v[{value._length_}]; }};"
        return name
    return _ctypes_type(type(value), structs)


def _ctypes_type(t, structs) -> str:
    if t in _CT_CTYPE:
        return _CT_CTYPE[t]
    if issubclass(t, ctypes.Structure | ctypes.Union):
        name = f"S{len(structs)}"
        kw = "union" if issubclass(t, ctypes.Union) else "struct"
        fields = []
        for fname, ftype in t._fields_:
            if issubclass(ftype, ctypes.Array):
                fields.append(f"{_ctypes_type(ftype._type_, structs)} {fname}[{ftype._length_}];")
            else:
                fields.append(f"{_ctypes_type(ftype, structs)} {fname};")
        structs[name] = f"{kw} {name} {{ {' '.join(fields)} }};"
        return name
    raise TypeError(t)


def _np_struct(dtype: np.dtype, structs) -> str:
    name = f"S{len(structs)}"
    fields = []
    for fname in dtype.names:
        ftype = dtype.fields[fname][0]
        if ftype.names:
            fields.append((fname, _np_struct(ftype, structs)))
        else:
            fields.append((fname, _NP_CTYPE[ftype.type]))
    structs[name] = _struct_decl(name, fields, None)
    return name
