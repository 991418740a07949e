# cython: language_level=3, embedsignature=True, binding=True
"""Kernel signatures: C parameter lists -> layout + a typed packing plan.

Construction (parsing, layout) runs once and may be slow; ``Signature.pack`` runs a precomputed
plan: one C struct per parameter with its code, offset and size, so packing does no parsing.
"""
cimport cython
from cpython.buffer cimport PyBUF_SIMPLE, PyBuffer_Release, PyObject_CheckBuffer
from cpython.buffer cimport PyObject_GetBuffer
from cpython.number cimport PyNumber_Index
from cpython.long cimport PyLong_Check
from cpython.object cimport PyObject, PyTypeObject
from cpython.ref cimport Py_DECREF, Py_INCREF
from cpython.tuple cimport PyTuple_GET_SIZE

from libc.stdint cimport int8_t, int16_t, int32_t, uint8_t, uint16_t, uint32_t
from libc.stdint cimport uint64_t
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset

from kernarg._handler cimport (
    KERNARG_INLINE_ARGS,
    KERNARG_INLINE_BYTES,
    KERNARG_MAX_PARAM_BYTES,
    BlockState,
    arena_block,
    block_init,
    as_arg_tuple,
    CacheEntry,
    ParamBlock,
    cache_table,
    cache_view,
    view_or_lookup,
    device_ordinal,
    set_launch_device,
    state_take_pointer,
    put_tensor_map,
    buffer_address,
    buffer_known,
    elsewhere,
    check_buffer,
    lookup_type,
)
from kernarg._interop cimport (
    DTYPE_BIG_ENDIAN,
    DTYPE_OTHER,
    KIND_BUFFER,
    KIND_CTYPES,
    KIND_CTYPES_BUFFER,
    KIND_DRIVER_PTR,
    KIND_FLOAT,
    KIND_HANDLE,
    KIND_INLINE,
    KIND_INT,
    KIND_NPVOID,
    KIND_POINTER,
    KIND_PROBE,
    KIND_TENSOR_MAP,
    CTYPES_HOLDS_POINTERS,
    NUM_BFLOAT16,
    CTYPES_POINTER,
    PtrResult,
    MrCache,
    TypeInfo,
    _reraise,
    copy_ctypes_pointers,
    ctypes_pointer_value,
    ctypes_target_refusal,
    getter_t,
    mr_cache,
    handle_value,
    is_ctypes_pointer,
    name_raised,
    npvoid_data_offset,
    pointer_of,
    probed_kind,
    tensor_map_source,
)

import bisect
import contextlib
import ctypes
import math
import re
import struct
import warnings
from fractions import Fraction

import numpy as np

from kernarg._interop import (
    _ON_CPU, CTYPES_POINTER_TYPES, SMALL_FLOAT_KINDS, TENSOR_MAP_ALIGN, TENSOR_MAP_SIZE,
    ctypes_fields, ctypes_pointer_fields, ctypes_problem, record_alignment, record_problem,
    swapped_scalar,
)

__all__ = ["Signature"]

from kernarg._stream cimport (
    KERNARG_GUARDED_BUILD,
    LazySection,
    enter_lazily,
    guard_module,
    in_section,
    kernarg_object_lock,
    kernarg_object_unlock,
    kernarg_section,
    leave_lazily,
    stream_handle,
)

from kernarg._cdefs cimport (
    Py_None,
    Py_True,
    Py_TYPE_P,
    PyBool_Type,
    PyComplex_Type,
    PyComplexObject,
    PyDict_Next_P,
    PyDict_Type,
    PyTuple_GET_SIZE_P,
    PyTuple_Type,
    PyTupleObject,
    PyMethodDef,
    PyUnicode_Compare_P,
    PyUnicode_Type,
    PyVarObject,
    PyFloat_AS_DOUBLE_P,
    PyFloat_AsDouble,
    PyFloat_Type,
    PyLong_AsLongLongAndOverflow,
    PyLong_Type,
    exc_text,
    kernarg_ctypes_copy,
    kernarg_double_to_bfloat16,
    kernarg_double_to_half,
    kernarg_bfloat16_to_double,
    kernarg_half_to_double,
    kernarg_fastcall_def,
    kernarg_int64_bits,
    kernarg_install_method,
    kernarg_small_int,
    kernarg_typed_int_run,
    kernarg_typed_int_run_call,
    kernarg_unlikely,
    or_default,
    parse_pack_call,
    shown_value,
    tuple_items,
    tuple_of,
)


# Parameter codes. Scalars first, in the order of _SCALARS below.
cdef enum Code:
    C_BOOL = 0
    C_I8
    C_U8
    C_I16
    C_U16
    C_I32
    C_U32
    C_I64
    C_U64
    C_F16
    C_BF16
    C_F32
    C_F64
    C_VECTOR      # a CUDA vector type: `count` elements of scalar code `elem`
    C_STRUCT      # by-value struct described by a numpy dtype or a ctypes type
    C_POINTER     # T*: device address, with pointee checks
    C_U64_OR_PTR  # PTX .u64: an integer or anything that packs as a pointer
    C_OPAQUE      # `size` bytes the layout knows but not the type (from PTX)
    C_SMALL_FLOAT  # cuda_fp8/fp6/fp4 by value: `count` lanes of format `elem` (_SMALL_FORMATS)
    C_I128        # __int128 (NVRTC's --device-int128): 16 bytes, aligned to 16
    C_U128        # unsigned __int128


# Codes whose 8 bytes take any non-negative int as is (kernarg_typed_int_run's bit set).
cdef uint32_t _UNSIGNED64 = (
    (<uint32_t>1 << C_U64) | (<uint32_t>1 << C_POINTER) | (<uint32_t>1 << C_U64_OR_PTR))

# name -> (code, size, numpy kind, display name)
_SCALARS = {
    "bool": (C_BOOL, 1, "b"), "char": (C_I8, 1, "i"), "signed char": (C_I8, 1, "i"),
    "unsigned char": (C_U8, 1, "u"), "short": (C_I16, 2, "i"), "unsigned short": (C_U16, 2, "u"),
    "int": (C_I32, 4, "i"), "unsigned int": (C_U32, 4, "u"), "long": (C_I64, 8, "i"),
    "unsigned long": (C_U64, 8, "u"), "long long": (C_I64, 8, "i"),
    "unsigned long long": (C_U64, 8, "u"), "float": (C_F32, 4, "f"),
    "double": (C_F64, 8, "f"), "__half": (C_F16, 2, "f"), "__nv_bfloat16": (C_BF16, 2, "B"),
}
_ALIASES = {
    "int8_t": "signed char",
    "uint8_t": "unsigned char", "int16_t": "short", "uint16_t": "unsigned short",
    "int32_t": "int", "uint32_t": "unsigned int", "int64_t": "long long",
    "uint64_t": "unsigned long long", "size_t": "unsigned long", "ptrdiff_t": "long",
    "intptr_t": "long", "uintptr_t": "unsigned long", "ssize_t": "long", "half": "__half",
    "bfloat16": "__nv_bfloat16", "nv_bfloat16": "__nv_bfloat16", "_Bool": "bool",
    # Texture and surface objects (cuda.h's and the runtime's names for one 64-bit handle).
    "cudaTextureObject_t": "unsigned long long", "cudaSurfaceObject_t": "unsigned long long",
    "CUtexObject": "unsigned long long", "CUsurfObject": "unsigned long long",
    "dim3": "uint3",        # three unsigned ints, as uint3 (its constructors change no layout)
    "CUtensorMap_st": "CUtensorMap",
    # <cuComplex.h>: typedefs of the vector types, which complex values pack into.
    "cuFloatComplex": "float2", "cuComplex": "float2", "cuDoubleComplex": "double2",
    # The character types are integers to a kernel: their width and sign, as NVRTC lays them
    # out on Linux (wchar_t is a signed 32-bit int there, char16_t and char32_t unsigned).
    "char16_t": "unsigned short", "char32_t": "unsigned int", "wchar_t": "int",
    "char8_t": "unsigned char",
    # GCC's (and NVRTC's) names of the 128-bit integers.
    "__int128_t": "__int128", "__uint128_t": "unsigned __int128",
}
# The 128-bit integers (NVRTC takes them with --device-int128): 16 bytes aligned to 16, any
# Python int in range. Name -> (code, numpy-style pointee kind).
_WIDE_INTS = {"__int128": (C_I128, "i"), "unsigned __int128": (C_U128, "u")}
# The words C lets a basic arithmetic type be spelled with, in any order
# (`long unsigned int`, `long long signed`, `char unsigned`).
_SPECIFIERS = frozenset(("signed", "unsigned", "char", "short", "int", "long", "double",
                         "__int128"))
_VECTOR_BASES = {
    "char": "signed char", "uchar": "unsigned char", "short": "short", "ushort": "unsigned short",
    "int": "int", "uint": "unsigned int", "long": "long", "ulong": "unsigned long",
    "longlong": "long long", "ulonglong": "unsigned long long", "float": "float",
    "double": "double",
}
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "__grid_constant__"}
_CODE_NAMES = {v[0]: k for k, v in _SCALARS.items()}
_CODE_NAMES[C_I64] = "long long"
_CODE_NAMES[C_U64] = "unsigned long long"
_CODE_NAMES[C_I8] = "signed char"
_INT_RANGE = {C_I8: (-2**7, 2**7 - 1), C_U8: (0, 2**8 - 1), C_I16: (-2**15, 2**15 - 1),
              C_U16: (0, 2**16 - 1), C_I32: (-2**31, 2**31 - 1), C_U32: (0, 2**32 - 1),
              C_I64: (-2**63, 2**63 - 1), C_U64: (0, 2**64 - 1)}
_INT128_RANGE = {C_I128: (-2**127, 2**127 - 1), C_U128: (0, 2**128 - 1)}


cdef CacheEntry* _cache = cache_table()
cdef const MrCache* _mrc = mr_cache()     # cuda.core Buffers: the last memory resource
cdef PyTypeObject* _NPVOID = <PyTypeObject*>np.void     # numpy keeps the type alive


cdef long long _INT_MIN[C_U64 + 1]
cdef long long _INT_MAX[C_U64 + 1]
for _code, (_lo, _hi) in _INT_RANGE.items():
    _INT_MIN[<int>_code] = _lo
    _INT_MAX[<int>_code] = min(_hi, 2**63 - 1)
_INT_MIN[<int>C_BOOL] = 0
_INT_MAX[<int>C_BOOL] = 1


cdef inline bint _int_fits(int code, long long v) noexcept nogil:
    """Whether ``v`` is in the range of integer code ``code`` (C_BOOL: 0 and 1; C_U64: any
    non-negative long long, the rest of its range being past a long long)."""
    return _INT_MIN[code] <= v <= _INT_MAX[code] or (code == C_U64 and v >= 0)


cdef inline int _number_at(const char* src, char kind, Py_ssize_t size, double* d,
                           long long* v) noexcept:
    """Read the number of numpy dtype kind ``kind`` ('f', 'i', 'u' or 'b'; NUM_BFLOAT16 for
    ml_dtypes.bfloat16) and ``size`` bytes at ``src``. Sets *d and returns 1 for a float (a
    bfloat16 too), sets *v and returns 2 for an integer or a bool, sets *v to the bits of an
    unsigned 64-bit integer of 2**63 or more and returns 3, returns 0 for anything else
    (another kind or size: the general path takes those)."""
    cdef float f
    cdef int8_t i8
    cdef int16_t i16
    cdef int32_t i32
    cdef uint16_t u16
    cdef uint32_t u32
    if kind == ord("f"):
        if size == 8:
            memcpy(d, src, 8)
            return 1
        if size == 4:
            memcpy(&f, src, 4)
            d[0] = f
            return 1
        if size == 2:         # numpy.float16
            memcpy(&u16, src, 2)
            d[0] = kernarg_half_to_double(u16)
            return 1
        return 0
    if kind == NUM_BFLOAT16 and size == 2:     # ml_dtypes.bfloat16
        memcpy(&u16, src, 2)
        d[0] = kernarg_bfloat16_to_double(u16)
        return 1
    if kind == ord("i"):
        if size == 8:
            memcpy(v, src, 8)
        elif size == 4:
            memcpy(&i32, src, 4)
            v[0] = i32
        elif size == 2:
            memcpy(&i16, src, 2)
            v[0] = i16
        else:
            i8 = (<int8_t*>src)[0]
            v[0] = i8
        return 2
    if kind == ord("u"):
        if size == 8:
            memcpy(v, src, 8)
            if v[0] < 0:
                return 3        # 2**63 or above: *v holds its bits
        elif size == 4:
            memcpy(&u32, src, 4)
            v[0] = u32
        elif size == 2:
            memcpy(&u16, src, 2)
            v[0] = u16
        else:
            v[0] = (<uint8_t*>src)[0]
        return 2
    if kind == ord("b"):
        # Any byte but 0 is true, as bool(value) reads it: a ctypes.c_bool over memory
        # ctypes did not write (from_buffer) can hold 2.
        v[0] = (<uint8_t*>src)[0] != 0
        return 2
    return 0


cdef inline int _inline_number(PyObject* item, TypeInfo* info, double* d, long long* v) noexcept:
    """Read a numpy scalar's value in place (as _number_at)."""
    return _number_at(<char*>item + info.offset, info.num_kind, info.size, d, v)


cdef inline int _ctypes_number_at(PyObject* item, TypeInfo* info, double* d,
                                  long long* v) noexcept:
    """Read the value of one of ctypes' own number types (_interop's CTYPES_NUMBER_KINDS: the
    type's num_kind is its numpy dtype kind) behind the object's b_ptr, under the object's
    lock (kernarg_ctypes_copy), as _number_at; 0 for any other ctypes type."""
    cdef char value[8]
    cdef char kind = info.num_kind
    if kind != ord("f") and kind != ord("i") and kind != ord("u") and kind != ord("b"):
        return 0
    kernarg_ctypes_copy(value, item, info.offset, info.size)
    return _number_at(value, kind, info.size, d, v)


cdef inline int _cached_number(int code, PyObject* item, const TypeInfo* info, double* d,
                               long long* v) noexcept:
    """Read ``item``, which the per-type cache classifies as ``info``, as a number for a scalar
    of code ``code``, as _number_at (1: *d, 2: *v, 3: *v the bits of an unsigned 64-bit
    number past 2**63, 0: none; _store_number writes it): a numpy scalar (read in place), a
    ctypes number (copied under the object's lock, with no section), an int subclass for an
    integer (its own value, as PyNumber_Index takes it, not its __index__), a float subclass
    for a float (its own, as PyFloat_AsDouble takes it, not its __float__). An int subclass
    for a float is 0: the general path honours its __float__."""
    if info.kind == KIND_INLINE:
        return _inline_number(item, info, d, v)
    if kernarg_unlikely(info.kind == KIND_CTYPES):
        return _ctypes_number_at(item, info, d, v)
    if info.kind == KIND_INT:
        return 2 if code <= C_U64 and kernarg_small_int(item, v) else 0
    if info.kind == KIND_FLOAT and code >= C_F16:
        d[0] = PyFloat_AS_DOUBLE_P(item)
        return 1
    return 0


cdef inline bint _store_number(int code, int got, double d, long long v, char* dst) noexcept:
    """The number _cached_number read (``got``, ``d``, ``v``) written at ``dst`` as a scalar
    of code ``code``, as the general path (_put_scalar) writes it. False, writing nothing,
    where it does not fit, or is not a number: the general path converts it, or refuses."""
    if kernarg_unlikely(got == 3):
        # An unsigned 64-bit number past 2**63: its bits, for an unsigned long long.
        if code != C_U64:
            return False
        memcpy(dst, &v, 8)
    elif got == 2 and code <= C_U64:
        # (A bool takes 0 and 1, as the general path does.)
        if not _int_fits(code, v):
            return False
        _store_int(dst, v, _scalar_size(code))
    elif got == 1 and code >= C_F16:
        _store_float(code, d, dst)
    elif got == 2 and code >= C_F16 and (
            code == C_F64 or -_EXACT_IN_DOUBLE <= v <= _EXACT_IN_DOUBLE):
        # (Past 2**53 the general path rounds the int once, to the format.)
        _store_float(code, <double>v, dst)
    else:
        return False
    return True


# CUDA's vector type names. Only the 4-vectors of 8-byte elements have the explicitly aligned
# variants (CUDA 13's vector_types.h: long4_16a ... double4_32a); `float4_32a` is no type.
_VECTOR_NAME = re.compile(rf"({'|'.join(_VECTOR_BASES)})([1-4])"
                          r"|(u?long|u?longlong|double)(4)(_16a|_32a)")
_NO_ALIGNED_VARIANT = re.compile(rf"(?:{'|'.join(_VECTOR_BASES)})[1-4]_(?:16|32)a")


def _unknown_type(text, type_name=None):
    """The refusal of a parameter whose type kernarg does not know; for a made-up aligned
    vector (`float4_16a`), which aligned vectors there are."""
    hint = "pass a numpy dtype or a ctypes type for structs"
    if type_name is not None and _NO_ALIGNED_VARIANT.fullmatch(type_name):
        hint = ("CUDA has _16a and _32a variants only of long4, ulong4, longlong4, ulonglong4 "
                "and double4")
    return ValueError(f"{text.strip()!r}: unknown parameter type; {hint}")


def _vector_type(name):
    """(base scalar name, count, align) for a CUDA vector type name, or None."""
    if name == "half2" or name == "__half2":
        return "__half", 2, 4
    if name in ("__nv_bfloat162", "nv_bfloat162", "bfloat162"):
        return "__nv_bfloat16", 2, 4
    m = _VECTOR_NAME.fullmatch(name)
    if m is None:
        return None
    if m.group(1) is not None:
        base, count, suffix = _VECTOR_BASES[m.group(1)], int(m.group(2)), None
    else:
        base, count, suffix = _VECTOR_BASES[m.group(3)], 4, m.group(5)
    size = _SCALARS[base][1]
    if suffix == "_32a":
        align = 32
    elif count in (1, 3):
        align = size
    else:
        align = min(size * count, 16)
    return base, count, align


def _describe_param(Py_ssize_t index, name):
    return f"parameter {index} ({name!r})" if name else f"parameter {index}"


class _Spec:
    """A parsed parameter before layout: code, size, align and type details."""

    __slots__ = ("code", "size", "align", "elem", "count", "pointee_kind", "pointee_size",
                 "is_const", "struct", "record", "text", "any_sign", "header_aligned")

    def __init__(self, code, size, align, text, **kw):
        self.code, self.size, self.align, self.text = code, size, align, text
        self.elem = kw.get("elem", 0)
        self.count = kw.get("count", 0)
        self.pointee_kind = kw.get("pointee_kind", "")
        self.pointee_size = kw.get("pointee_size", 0)
        self.is_const = kw.get("is_const", False)
        self.struct = kw.get("struct")
        # A struct's numpy dtype, for packing dicts and tuples field by field (None: a ctypes
        # type numpy cannot describe, which ctypes builds).
        self.record = kw.get("record")
        self.any_sign = kw.get("any_sign", False)
        # The alignment is the headers' choice, not the type's (CUtensorMap: 64 before CUDA 13,
        # 128 since): from_source takes the compiler's.
        self.header_aligned = kw.get("header_aligned", False)


def _tensor_map_spec(text):
    """cuda.h's CUtensorMap, by value: 128 opaque bytes, aligned as the cuda.h kernarg is built
    against aligns it; takes TMA tensor maps (cuda.bindings, cuda.core) or 128 bytes."""
    return _Spec(C_OPAQUE, TENSOR_MAP_SIZE, TENSOR_MAP_ALIGN, text, header_aligned=True)


def _scalar_spec(name, text):
    code, size, _ = _SCALARS[name]
    return _Spec(code, size, size, text)


# cuda_fp8.h's, cuda_fp6.h's and cuda_fp4.h's formats: per format, its CUDA type, the
# ml_dtypes type whose scalars hold its bits, exponent and mantissa widths, exponent bias,
# whether it has a sign bit, the code of its NaN and of its +infinity (-1: none). Encodings from
# the OCP MX formats, as cuda_fp8/fp6/fp4.hpp and ml_dtypes have them.
_SMALL_FORMATS = (
    ("__nv_fp8_e4m3", "float8_e4m3fn", 4, 3, 7, True, 0x7F, -1),
    ("__nv_fp8_e5m2", "float8_e5m2", 5, 2, 15, True, 0x7E, 0x7C),
    ("__nv_fp8_e8m0", "float8_e8m0fnu", 8, 0, 127, False, 0xFF, -1),
    ("__nv_fp6_e2m3", "float6_e2m3fn", 2, 3, 1, True, -1, -1),
    ("__nv_fp6_e3m2", "float6_e3m2fn", 3, 2, 3, True, -1, -1),
    ("__nv_fp4_e2m1", "float4_e2m1fn", 2, 1, 1, True, -1, -1),
)
# Their types and the x2 and x4 vectors of them (__nv_fp8_e4m3, __nv_fp8x2_e4m3, ...): pointees
# checked against arrays of the format (torch.float8_e4m3fn, ml_dtypes, DLPack 1.1), and
# parameters by value (`__nv_fp8_e4m3 scale`). Name -> the format's element kind.
_SMALL_FLOAT_POINTEES = {f"{cuda[:-5]}{lanes}{cuda[-5:]}": SMALL_FLOAT_KINDS[ml_name]
                         for cuda, ml_name, *_ in _SMALL_FORMATS for lanes in ("", "x2", "x4")}
_KIND_NAMES = {ord(kind): name for name, kind in reversed(SMALL_FLOAT_KINDS.items())}
_KIND_NAMES[ord("B")] = "bfloat16"
_SMALL_FORMAT_INDEX = {f[0][-4:]: k for k, f in enumerate(_SMALL_FORMATS)}
_SMALL_FORMAT_OF_DTYPE = {f[1]: k for k, f in enumerate(_SMALL_FORMATS)}
_SMALL_FLOAT_TYPE = re.compile(r"__nv_(fp8|fp6|fp4)(x2|x4)?_(e4m3|e5m2|e8m0|e2m3|e3m2|e2m1)")
# Format index -> the TypeInfo.num_kind of its ml_dtypes scalar type (_interop's
# _classify_numpy gives such a type its SMALL_FLOAT_KINDS letter).
cdef char _SMALL_KIND[8]
assert len(_SMALL_FORMATS) <= 8
for _k, _f in enumerate(_SMALL_FORMATS):
    _SMALL_KIND[_k] = ord(SMALL_FLOAT_KINDS[_f[1]])
_small_values = {}      # format index -> {finite non-negative value: code}, built when first used
_small_codes = {}       # format index -> {code: value}, its inverse (for defaults' bytes)


cdef inline int _lane_bits(int fmt):
    # The bits of one lane of format ``fmt``: fp4's lanes are nibbles, the others bytes.
    return 4 if _SMALL_FORMATS[fmt][0] == "__nv_fp4_e2m1" else 8


def _small_float_spec(base):
    """``base``, one of _SMALL_FLOAT_POINTEES' names, by value. Each lane is a byte, but fp4's
    lanes are nibbles (``__nv_fp4x2_e2m1`` is one byte); aligned to its size (cuda_fp*.hpp's
    __CUDA_ALIGN__)."""
    m = _SMALL_FLOAT_TYPE.fullmatch(base)
    lanes = {None: 1, "x2": 2, "x4": 4}[m[2]]
    size = max(1, lanes // 2) if m[1] == "fp4" else lanes
    return _Spec(C_SMALL_FLOAT, size, size, base, elem=_SMALL_FORMAT_INDEX[m[3]], count=lanes)


def _small_float_values(int fmt):
    """{value: code} of every finite, non-negative value of format ``fmt`` (its index)."""
    table = _small_values.get(fmt)
    if table is not None:
        return table
    _, _, e_bits, m_bits, bias, _, nan, inf = _SMALL_FORMATS[fmt]
    table = {}
    for code in range(1 << (e_bits + m_bits)):      # the codes without the sign bit
        if code == nan or code == inf or (inf >= 0 and code >> m_bits == (1 << e_bits) - 1):
            continue            # NaN, infinity, and e5m2's other NaNs
        e, mant = code >> m_bits, code & ((1 << m_bits) - 1)
        if e == 0 and m_bits:   # subnormal (e8m0 has no mantissa and no subnormals)
            value = math.ldexp(mant, 1 - bias - m_bits)
        else:
            value = math.ldexp((1 << m_bits) + mant, e - bias - m_bits)
        table[value] = code
    _small_values[fmt] = table
    return table


def _small_float_lanes(int fmt, int count, bytes data):
    """The ``count`` lanes of format ``fmt`` in ``data`` (the bytes of a constant of the type,
    lanes from the lowest bits up) as the packer takes them back: a float, or a tuple of them.
    Every code the packer can write comes back as the value it writes it for (the inverse of
    _small_float_values, so the round trip is exact, -0.0 included); a NaN other than the one
    code the packer writes for NaN, or bits outside the format, give _NOT_DECODED."""
    cdef int k, code, bits = _lane_bits(fmt)
    _, _, e_bits, m_bits, _, signed, nan, inf = _SMALL_FORMATS[fmt]
    values = _small_codes.get(fmt)
    if values is None:
        values = _small_codes[fmt] = {c: v for v, c in _small_float_values(fmt).items()}
    word = int.from_bytes(data, "little")
    magnitude_bits = e_bits + m_bits
    lanes = []
    for k in range(count):
        code = (word >> (bits * k)) & ((1 << bits) - 1)
        if code >> (magnitude_bits + signed):
            return _NOT_DECODED             # fp6 in a byte: its two top bits are not zero
        negative = signed and code >> magnitude_bits
        magnitude = code & ((1 << magnitude_bits) - 1)
        if magnitude in values:
            value = values[magnitude]
        elif magnitude == inf:
            value = math.inf
        elif code == nan:
            value = math.nan
        else:
            return _NOT_DECODED
        lanes.append(-value if negative else value)
    return lanes[0] if count == 1 else tuple(lanes)


def _pointee_of(base, stars=1):
    """numpy-style (kind, size) of the elements a ``base`` pointer of ``stars`` levels points at;
    ('', 0) for any. Past one level the elements are pointers (an array of addresses, as ints of
    any kind), which no element type names."""
    if base == "void" or stars != 1:
        return "", 0
    if base in _SCALARS:
        _, size, kind = _SCALARS[base]
        if base == "char":
            kind = "c8"     # plain char: signed or unsigned bytes
        return kind, size
    vec = _vector_type(base)
    if vec is not None:
        _, size, kind = _SCALARS[vec[0]]
        return kind, size
    kind = _SMALL_FLOAT_POINTEES.get(base)
    if kind is not None:    # __nv_fp8_e4m3 ...: arrays of that format only
        return kind, 1
    if base in _WIDE_INTS:  # DLPack's 128-bit ints, a CUDA Array Interface's "<i16"
        return _WIDE_INTS[base][1], 16
    return "", 0            # structs and unknown names: any memory


_ATTRIBUTE = re.compile(r"\[\[|\b__attribute__\s*\(")


def _without_attributes(text):
    """``text`` without its C++11 ``[[...]]`` and GNU ``__attribute__((...))`` attributes
    (``[[maybe_unused]] float* out``), which say nothing about the parameter's type or layout;
    None where one is not closed."""
    m = _ATTRIBUTE.search(text)
    while m is not None:
        close, opening = ("]", "[") if m[0] == "[[" else (")", "(")
        depth, i = 1 if close == ")" else 2, m.end()
        while depth and i < len(text):
            depth += (text[i] == opening) - (text[i] == close)
            i += 1
        if depth:
            return None
        text = text[:m.start()] + " " + text[i:]
        m = _ATTRIBUTE.search(text, m.start())
    return text


# libcu++'s, Thrust's and the C++ library's complex numbers: a pair of floats in the layout of
# the vector type of the same size and alignment (alignas(2 * sizeof(T))), which complex values
# pack into.
_COMPLEX = re.compile(r"(?<![\w:])(?:::)?(?:(?:cuda::)?std::|thrust::)?complex\s*<\s*"
                      r"(float|double|__half|half|__nv_bfloat16)\s*>")
_COMPLEX_AS = {"float": "float2", "double": "double2", "__half": "half2", "half": "half2",
               "__nv_bfloat16": "__nv_bfloat162"}


# libcu++'s and the C++ library's fixed-size arrays by value, `cuda::std::array<float, 4> a`: N
# elements of a scalar type, aligned as one element is (a struct holding `T[N]`), which take a
# sequence of N numbers as a vector type's lanes do.
_STD_ARRAY = re.compile(
    r"(?P<head>(?:\s*\b(?:const|volatile|__grid_constant__)\b)*)\s*(?:::)?(?:cuda::)?std::"
    r"array\s*<\s*(?P<elem>[^<>,]+?)\s*,\s*(?P<count>[0-9]+)[uUlLzZ]*\s*>"
    r"(?P<tail>(?:\s*\b(?:const|volatile|__grid_constant__)\b)*)\s*(?P<name>[A-Za-z_]\w*)?\s*")


def _std_array_param(text, m):
    """(spec, name) of a ``std::array<T, N>`` parameter (_STD_ARRAY's match ``m``): N lanes of
    scalar T, aligned as T; ValueError for an element type that is no scalar kernarg knows."""
    written = " ".join(m["elem"].split())
    elem = _canonical(written)
    if elem not in _SCALARS:
        raise ValueError(f"{text.strip()!r}: kernarg reads std::array of scalar types (int, "
                         f"float, __half, ...), not of {written!r}")
    count = int(m["count"])
    if count < 1:
        raise ValueError(f"{text.strip()!r}: an array of no elements")
    code, size, _ = _SCALARS[elem]
    plain = m.group(0)
    shown = " ".join(plain[:m.start("name")].split()) if m["name"] else " ".join(plain.split())
    return _Spec(C_VECTOR, size * count, size, shown, elem=code, count=count), m["name"]


# libcu++'s (and the C++ library's) span by value, `cuda::std::span<const float> x`: a pointer
# and a count of elements (size_t), or with a static extent (`span<float, 4>`) the pointer
# alone, as libcu++ lays it out (tests/test_source_structs_nvrtc.py reads NVRTC's).
_SPAN = re.compile(
    r"(?P<head>(?:\s*\b(?:const|volatile|__grid_constant__)\b)*)\s*(?:::)?(?:cuda::)?std::"
    r"span\s*<\s*(?P<elem>[^<>,]+?)\s*(?:,\s*(?P<count>[0-9]+[uUlLzZ]*|(?:(?:::)?(?:cuda::)?"
    r"std::)?dynamic_extent)\s*)?>"
    r"(?P<tail>(?:\s*\b(?:const|volatile|__grid_constant__)\b)*)\s*(?P<name>[A-Za-z_]\w*)?\s*")


def _span_param(text, m):
    """(spec, name) of a ``span<T>`` or ``span<T, N>`` parameter (_SPAN's match ``m``): a
    struct whose record has a pointer field ``data`` (to T, as a ``T*`` parameter checks
    it) and, for a span of dynamic extent, a ``size_t`` field ``size``; "span" metadata (its
    static extent, or 0) lets it take an array alone (_span_value)."""
    written = " ".join(m["elem"].split())
    pointer, _ = _parse_c_param(f"{written}* data")
    count = m["count"]
    extent = int(count.rstrip("uUlLzZ")) if count and count[0].isdigit() else 0
    if count and count[0].isdigit() and extent < 1:
        raise ValueError(f"{text.strip()!r}: a span of no elements")
    plain = m.group(0)
    shown = " ".join(plain[:m.start("name")].split()) if m["name"] else " ".join(plain.split())
    names, formats = ["data"], [np.dtype(np.uint64, metadata={"pointer": pointer})]
    if not extent:
        names.append("size")
        formats.append(np.dtype(np.uint64))
    record = np.dtype({"names": names, "formats": formats, "offsets": [0, 8][:len(names)],
                       "itemsize": 8 * len(names)},
                      metadata={"name": shown, "align": 8, "pod": True, "span": extent})
    return _Spec(C_STRUCT, record.itemsize, 8, shown, record=record), m["name"]


# A pointer to a function: `int (*f)(int, float)`, `void (* const cb)()`, `float (**table)(float)`,
# the name optional (a prototype's `int (*)(int)`). It and _ARRAY_POINTER name their parts
# alike for _declarator: `head (ptr name) tail`, head the return or element type, tail the
# parameter list or the extents.
_FUNCTION_POINTER = re.compile(
    r"(?P<head>[^()]*[\w*&>])\s*\(\s*(?P<ptr>\*(?:\s*(?:\*|const\b|volatile\b|__restrict__\b))*)"
    r"\s*(?P<name>[A-Za-z_]\w*)?\s*\)\s*(?P<tail>\([^()]*(?:\([^()]*\)[^()]*)*\))\s*",
    re.S)


# A pointer or an lvalue reference to an array: `float (*rows)[4]`, `const float (&v)[3]`,
# `int (*)[2][3]`, `float (*&p)[4]` (a reference to such a pointer), the name optional.
_ARRAY_POINTER = re.compile(
    r"(?P<head>[^()\[\]]*[\w*>])\s*\(\s*(?P<ptr>[*&](?:\s*(?:[*&]|const\b|volatile\b|"
    r"__restrict__\b))*)\s*(?P<name>[A-Za-z_]\w*)?\s*\)\s*(?P<tail>(?:\[[^\[\]]*\]\s*)+)",
    re.S)


def _declarator(str shown, name):
    """Parameter ``name`` of type ``shown`` written as C declares it: ``float* p``, and a
    function pointer's or an array pointer's name inside its parentheses, ``int (*f)(int)``,
    ``float (&v)[3]``."""
    if not name:
        return shown
    m = None
    if "(" in shown:
        m = _FUNCTION_POINTER.fullmatch(shown) or _ARRAY_POINTER.fullmatch(shown)
    if m is None or m["name"] is not None:
        return f"{shown} {name}"
    return f"{m['head']} ({m['ptr']}{'' if m['ptr'][-1] in '*&' else ' '}{name}){m['tail']}"


_ZERO_EXTENT = re.compile(r"\s*(?:0+|0[xX]0+)\s*")
_BRACKETED = re.compile(r"\[([^\[\]]*)\]")


def _array_pointer(text, m):
    """The parameter ``text``, matched by _ARRAY_POINTER as ``m``: the address of an array,
    whose elements are ``m['head']``, as a pointer to those elements takes (``float (*rows)[4]``
    takes what ``float* rows`` takes). A reference binds to one array (``float (&v)[3]``);
    ``*&`` is a reference to a pointer, read from memory as ``T*&`` is."""
    levels = "".join(re.findall(r"[*&]", m["ptr"]))       # the qualifiers say nothing here
    if "&&" in levels:
        raise ValueError(f"{text.strip()!r}: CUDA does not allow rvalue-reference kernel "
                         "parameters")
    if "&" in levels[:-1]:
        raise ValueError(f"{text.strip()!r}: a reference kernarg cannot read; write a "
                         "reference as `T& name` or `T*& name`, or use a pointer")
    dims = _BRACKETED.findall(m["tail"])
    for i, dim in enumerate(dims):
        if _ZERO_EXTENT.fullmatch(dim):
            raise ValueError(f"{text.strip()!r}: an array extent of 0 ([{dim.strip()}]); no "
                             "array is empty")
        if not re.fullmatch(r"\s*(?:[1-9]\d*|0[xX]0*[1-9a-fA-F][0-9a-fA-F]*)\s*", dim) \
                and not (i == 0 and not dim.strip()):
            raise ValueError(f"{text.strip()!r}: an array extent kernarg cannot read "
                             f"([{dim.strip()}]); write it as a number")
    if re.sub(r"\b(?:const|volatile)\b", "", m["head"]).strip() == "void":
        raise ValueError(f"{text.strip()!r}: there are no arrays of void; use void* for "
                         "untyped memory")
    stars = len(levels)
    try:
        spec, _ = _parse_c_param(f"{m['head']} {'*' * stars}")
    except ValueError as exc:
        # The message quotes the pointer declaration made up here: quote the user's instead.
        raise ValueError(f"{text.strip()!r}: {str(exc).split(': ', 1)[-1]}") from None
    spec.text = (f"{spec.text[:-stars]} ({levels})"
                 + "".join(f"[{d.strip()}]" for d in dims))
    return spec, m["name"]


# What a declaration may hold besides identifiers, `*`, `&`, parentheses and whitespace: an
# `__align__(N)`, array extents (read by _array_as_pointer and _ARRAY_POINTER), template
# argument lists (innermost first; an opaque pointer's type reads them).
_ALIGN_PART = re.compile(r"(?:__align__|alignas)\s*\(\s*\d+\s*\)")
_TEMPLATE_PART = re.compile(r"<[^<>]*>")
_IDENTIFIER_PART = re.compile(r"(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*")
_STRAY = re.compile(r"[^\s*&()]+")


def _stray_part(str plain):
    """The first run of characters in the declaration ``plain`` (no comments, attributes or
    default) that no part of a declaration accounts for (``5`` in ``int 5 n``, ``;``, ``@``,
    ``...``, a lone ``:``), or None. The tokens _parse_c_param reads skip every other
    character, so without this check ``int; n`` would read as ``int n``."""
    rest = _BRACKETED.sub(" ", _ALIGN_PART.sub(" ", plain))
    while "<" in rest:
        less = _TEMPLATE_PART.sub(" ", rest)
        if less == rest:
            break
        rest = less
    m = _STRAY.search(_IDENTIFIER_PART.sub(" ", rest))
    return None if m is None else m[0]


def _unbalanced(str plain):
    """What is wrong with the parentheses and brackets of ``plain``, or None."""
    closing = []
    for ch in plain:
        if ch == "(" or ch == "[":
            closing.append(")" if ch == "(" else "]")
        elif ch == ")" or ch == "]":
            if not closing or closing.pop() != ch:
                return f"{ch!r} closes nothing"
    return None if not closing else f"a {'(' if closing[-1] == ')' else '['!r} is not closed"


# C++'s keywords (C++20's, with CUDA's and GCC's own type words): none names a parameter, and
# the ones that are no part of a type (`return`, `operator`, `template`) are in no declaration
# kernarg reads.
_CXX_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
    __int128 __restrict__ __restrict __grid_constant__ __global__ __device__ __host__
    __shared__ __constant__ __managed__
""".split())
# The keywords a parameter's type is spelled with (its specifiers, qualifiers and elaborated
# type specifiers); every other keyword is refused where a declaration has it.
_TYPE_KEYWORDS = _SPECIFIERS | _QUALIFIERS | frozenset((
    "bool", "void", "float", "wchar_t", "char8_t", "char16_t", "char32_t", "struct", "class",
    "union", "enum", "typename"))
# A type that is no struct: an elaborated type specifier (`struct int`) cannot name it.
_FUNDAMENTAL = ((frozenset(_SCALARS) - {"__half", "__nv_bfloat16"}) | {"void"}
                | frozenset(_WIDE_INTS))
_ELABORATED = frozenset(("struct", "class", "union", "enum"))
_RESTRICT = frozenset(("__restrict__", "__restrict", "restrict"))
# The names kernarg knows that CUDA's headers declare with typedef (`struct half2` names no
# type); CUtensorMap_st and dim3 are struct tags.
_TYPEDEF_NAMES = ((frozenset(_ALIASES) - {"CUtensorMap_st", "dim3"})
                  | {"half2", "nv_bfloat162", "CUtensorMap"})


def _keyword_refusal(str text, words, name, bint type_name=False):
    """The refusal of a declaration (``text``) that uses a C++ keyword as its ``name`` or among
    its type's ``words`` where no type has it (``type_name``: where ``words`` name a type of
    the source's own, which no keyword is part of), or None."""
    for w in words:
        if w in _CXX_KEYWORDS and (type_name or w not in _TYPE_KEYWORDS):
            return ValueError(f"{text.strip()!r}: {w!r} is a C++ keyword, not part of a "
                              "parameter declaration")
    if name is not None and name in _CXX_KEYWORDS:
        return ValueError(f"{text.strip()!r}: {name!r} is a C++ keyword, not a parameter name")
    return None


def _after_name_refusal(str text, str name):
    return ValueError(f"{text.strip()!r}: something follows the name {name!r}; a parameter "
                      "declaration ends with its name (`const T* const name`)")


_INNERMOST_GROUP = re.compile(r"\(([^()]*)\)")


def _function_type(str plain):
    """Whether ``plain`` (no function pointer, attributes, ``__align__`` or default) declares
    a parameter of function type, which C adjusts to a pointer to that function: a
    parenthesized part that is a parameter list, empty or holding a type word (``int ()``,
    ``signed(int)``), not a declarator (``int (n)``, ``float (*rows)[4]``). A list after a
    parenthesized declarator, ``int (&f)(int)``, is a reference's or a pointer's, which the
    caller reads or refuses."""
    for m in _INNERMOST_GROUP.finditer(plain):
        if plain[:m.start()].rstrip().endswith(")"):
            continue
        inner = m[1].strip()
        if not inner or ("*" not in inner and "&" not in inner and all(
                w in _QUALIFIERS for w in _IDENTIFIER_PART.findall(inner))):
            return True     # `int ()`, `__half (const)`: a list, of nothing or of no type
        for w in _IDENTIFIER_PART.findall(inner):
            if w not in _QUALIFIERS and (w in _CXX_KEYWORDS or _canonical(w) is not None):
                return True
    return False


def _dtype_hint(str text):
    """For a str in a list of parameter types that is no C declaration but names a numpy dtype
    (``'<f4'``, ``'float32'``): how to pass that dtype; else None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # numpy's deprecated aliases ('a') warn
            dtype = np.dtype(text)
    except Exception:
        return None
    if dtype.kind not in "biufc":
        return None
    return f"for the numpy dtype {text!r}, pass np.dtype({text!r}) ({dtype})"


def _parse_c_param(text):
    """Parse one C parameter declaration; return (spec, name). In stages: the declaration as a
    whole (_declaration_text: its default, attributes, stray characters, brackets, function
    types), a function pointer (_function_pointer_param), an array adjusted to the pointer it
    is, a reference (_reference_param), then its tokens (_check_tokens) and what its words
    name (_spec_of_words)."""
    text, plain, m = _declaration_text(text)
    if m is not None:
        return _function_pointer_param(text, m)
    if "complex" in plain:
        plain = _COMPLEX.sub(lambda m: _COMPLEX_AS[m[1]], plain)
    if "array" in plain:
        m = _STD_ARRAY.fullmatch(plain)
        if m is not None:
            return _std_array_param(text, m)
    if "span" in plain:
        m = _SPAN.fullmatch(plain)
        if m is not None:
            return _span_param(text, m)
    if "(" in plain and "[" in plain:
        m = _ARRAY_POINTER.fullmatch(plain.strip())
        if m is not None:
            return _array_pointer(text, m)
    cdef bint array = False
    if "[" in plain:
        adjusted = _array_as_pointer(plain)
        array = adjusted != plain
        plain = adjusted
    tokens = re.findall(r"(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\*|&|\[|\]", plain)
    if "&" in tokens:
        return _reference_param(text, plain, tokens)
    if "[" in tokens:
        zero = next((m for m in _BRACKETED.finditer(plain) if _ZERO_EXTENT.fullmatch(m[1])),
                    None)
        if zero is not None:
            raise ValueError(f"{text.strip()!r}: an array extent of 0 ([{zero[1].strip()}]); "
                             "no array is empty")
        raise ValueError(f"{text.strip()!r}: an array parameter kernarg cannot read; use a "
                         "pointer")
    _check_tokens(text, tokens)
    return _spec_of_words(text, plain, tokens, array)


def _declaration_text(text):
    """``(text, plain, m)``: the declaration without its default argument, the same without
    attributes, and its _FUNCTION_POINTER match or None; ValueError for what no parameter
    declaration is as a whole (an empty default, an open attribute, stray characters,
    unbalanced brackets, a function type, something after a parenthesized declarator)."""
    declaration, default = _split_default(text)
    if default is None and len(declaration) < len(text):
        raise ValueError(f"{text.strip()!r}: nothing follows '=', where a default argument "
                         "would be")
    text = declaration
    plain = _without_attributes(text)
    if plain is None:
        raise ValueError(f"{text.strip()!r}: an attribute is not closed")
    m = _FUNCTION_POINTER.fullmatch(plain.strip())
    # A function pointer's parameter list is a prototype's (it may end in `...`): only the
    # return type and the declarator are checked for stray characters.
    stray = _stray_part(plain if m is None else m["head"] + m["ptr"])
    if stray is not None:
        raise ValueError(f"{text.strip()!r}: {stray!r} has no place in a parameter "
                         "declaration")
    unbalanced = _unbalanced(plain)
    if unbalanced is not None:
        raise ValueError(f"{text.strip()!r}: {unbalanced}")
    bare = _ALIGN_PART.sub(" ", plain) if "(" in plain else plain
    if m is None and "(" in bare and _function_type(bare):
        raise ValueError(f"{text.strip()!r}: a parameter of function type, which C adjusts "
                         "to a pointer to the function; write the pointer, `R (*name)(args)`")
    if m is None and "(" in bare and "[" not in bare and not bare.rstrip().endswith(")"):
        # `char (*) Foo`: a parenthesized declarator ends the declaration (arrays and
        # functions after it are _ARRAY_POINTER's and _FUNCTION_POINTER's).
        raise ValueError(f"{text.strip()!r}: something follows the parenthesized declarator; "
                         "a parameter declaration ends with it (`int (*p)`)")
    return text, plain, m


def _function_pointer_param(text, m):
    """The (spec, name) of a function pointer parameter, ``m`` its _FUNCTION_POINTER match."""
    try:
        _parse_c_param(m["head"] + "*")     # the return type must be a type
    except ValueError:
        raise ValueError(f"{text.strip()!r}: unknown return type {m['head'].strip()!r}; "
                         "write a function pointer as `R (*name)(args)`") from None
    # An address as any pointer is (an int, None, ...); the function's type says nothing
    # kernarg can check against an array, so like void* it takes any.
    shown = (f"{' '.join(m['head'].split())} ({' '.join(m['ptr'].split())})"
             f"{' '.join(m['tail'].split())}")
    return _Spec(C_POINTER, 8, 8, shown, pointee_kind="", pointee_size=0), m["name"]


def _reference_param(text, plain, tokens):
    """The (spec, name) of a reference parameter. An lvalue reference is passed as the
    address it binds to, as a pointer is: the memory must be the kernel's to reach. NVRTC
    refuses rvalue references as kernel parameters."""
    refusal = _reference_refusal(plain, tokens)
    if refusal is not None:
        raise ValueError(f"{text.strip()!r}: {refusal}")
    try:
        spec, name = _parse_c_param(plain.replace("&", "*"))
    except ValueError as exc:
        # The message quotes the pointer declaration made up here: quote the user's.
        raise ValueError(f"{text.strip()!r}: {str(exc).split(': ', 1)[-1]}") from None
    if re.fullmatch(r"(?:const )?void\*", spec.text):
        raise ValueError(f"{text.strip()!r}: there are no references to void; use void* "
                         "for untyped memory")
    spec.text = spec.text[:-1] + "&"      # the last level, shown as declared
    return spec, name


def _check_tokens(text, tokens):
    """ValueError for tokens out of their place: an elaborated-type keyword not followed by a
    type's name (or followed by a typedef's), a restrict qualifier on what is not a pointer,
    a __grid_constant__ parameter that is not const itself."""
    for i, tok in enumerate(tokens):
        if tok in _ELABORATED and (i + 1 == len(tokens) or not _IDENTIFIER_PART.fullmatch(
                tokens[i + 1]) or tokens[i + 1] in _CXX_KEYWORDS):
            # `struct const Foo*`, `struct *`: the name of the type comes next.
            raise ValueError(f"{text.strip()!r}: {tok!r} is not followed by the name of a "
                             "type")
        if tok in _ELABORATED and tokens[i + 1] in _TYPEDEF_NAMES:
            raise ValueError(f"{text.strip()!r}: {tokens[i + 1]!r} is a typedef, which "
                             f"{tok!r} cannot name")
        if tok in _RESTRICT and "*" not in tokens[:i]:
            # `const float __restrict__ x` (a `*` left out?), `__restrict__ float* p`: the
            # qualifier of a pointer, on what is not one.
            raise ValueError(f"{text.strip()!r}: {tok} qualifies a pointer; write it after "
                             "the `*`, as in `const float* __restrict__ x`")
    stars = tokens.count("*")
    if "__grid_constant__" in tokens and "const" not in (
            tokens[len(tokens) - tokens[::-1].index("*"):] if stars else tokens):
        raise ValueError(f"{text.strip()!r}: a __grid_constant__ parameter must be const "
                         "itself (`__grid_constant__ const T name`, `T* const name`)")


def _spec_of_words(text, plain, tokens, bint array):
    """The (spec, name) the words of a declaration's ``tokens`` name: the type (before the
    name, if one ends them) and its pointer levels; ValueError for what no C type is or a
    word out of its place. ``array``: the declaration was an array, adjusted to a pointer."""
    stars = tokens.count("*")
    is_const = False
    words = []
    cdef Py_ssize_t last_word_at = -1, type_end_at = -1
    word_at = []
    for i, tok in enumerate(tokens):
        if tok == "*":
            continue
        if tok == "const":
            # `const T*` / `T const*` make the pointee const; `T* const` only the pointer.
            if stars == 0 or "*" not in tokens[:i]:
                is_const = True
            continue
        if tok in _QUALIFIERS or tok in ("struct", "__align__"):
            continue
        words.append(tok)
        word_at.append(i)
        last_word_at = i
    name = None
    base = _canonical(" ".join(words))
    if base is None and len(words) > 1 and words[-1] not in _SPECIFIERS:
        # The last word names the parameter, unless it is a type word (`int int`,
        # `unsigned int signed`: no type C has).
        base = _canonical(" ".join(words[:-1]))
        name = words[-1]
    if base is not None and ("<" in plain or ">" in plain):
        base = None     # `int<float> n`, `int <5> n`: no type kernarg names takes arguments
    if base in _FUNDAMENTAL and _ELABORATED.intersection(tokens):
        base = None     # `struct int`: a struct, class, union or enum is not a built-in type
    if base is not None and ("enum" in tokens or "union" in tokens):
        base = None     # `enum float2`: the types kernarg names that are no scalar are structs
    if base is not None or not stars:
        refusal = _keyword_refusal(text, words, name)
        if refusal is not None:
            raise refusal
    if base is not None:
        # Where the type's words end: before the name, if there is one.
        type_end_at = word_at[-2] if name is not None else word_at[-1]
        if "struct" in tokens and tokens.index("struct") > word_at[0]:
            raise ValueError(f"{text.strip()!r}: 'struct' after the type it would name")
        if name is not None and "::" in name:
            raise ValueError(f"{text.strip()!r}: a parameter's name is not qualified "
                             f"({name!r})")
    if base is not None and name is not None and last_word_at < len(tokens) - 1:
        # `int n*`, `float x uint3 *`, `int n const`: the name ends the declaration.
        raise _after_name_refusal(text, name)
    if base is not None and stars and type_end_at > tokens.index("*"):
        # `* int p`, `unsigned* char`: the type comes first, then the declarator's `*`s.
        raise ValueError(f"{text.strip()!r}: a '*' before the end of the type; write the type "
                         "first, as in `T* name`")
    if array and base == "void" and stars == 1:
        raise ValueError(f"{text.strip()!r}: there are no arrays of void; use void* for "
                         "untyped memory")
    if base is None and stars:
        return _opaque_pointer(text, plain, tokens, is_const)
    if base is None:
        raise _unknown_type(text, words[0] if words else None)
    if stars:
        return _pointer_spec(base, stars, is_const), name
    if base == "void":
        raise ValueError(f"{text.strip()!r}: a parameter cannot have type void")
    if base in _SCALARS:
        return _scalar_spec(base, base), name
    if base in _WIDE_INTS:
        return _Spec(_WIDE_INTS[base][0], 16, 16, base), name
    if base == "CUtensorMap":
        return _tensor_map_spec(base), name
    if base in _SMALL_FLOAT_POINTEES:
        return _small_float_spec(base), name
    elem, count, align = _vector_type(base)
    code, size, _ = _SCALARS[elem]
    return _Spec(C_VECTOR, size * count, align, base, elem=code, count=count), name


def _reference_refusal(plain, tokens):
    """Why the reference parameter ``plain`` (its ``tokens``) is not one kernarg passes, or
    None: a single lvalue reference, its last declarator level (``const float& x``,
    ``float*& p``), to a type a pointer could point to."""
    if re.search(r"&\s*&", plain):
        return "CUDA does not allow rvalue-reference kernel parameters"
    at = tokens.index("&")
    if tokens.count("&") > 1 or "*" in tokens[at + 1:] or "[" in tokens or "(" in plain:
        return ("a reference kernarg cannot read; write a reference as `T& name` or "
                "`T*& name`, or use a pointer")
    return None


_ARRAY_DECLARATOR = re.compile(r"(?P<head>[^()\[\]]*?)(?P<last>[A-Za-z_]\w*)\s*"
                               r"(?P<dims>(?:\[[^\[\]]*\]\s*)+)")
_QUALIFIER_WORDS = re.compile(r"(?:\s*\b(?:const|volatile|__restrict__|__restrict|restrict)\b)*\s*")


def _array_as_pointer(plain):
    """An array parameter as the pointer C adjusts it to: ``int x[4]`` and ``const float b[]``
    are ``int *x`` and ``const float *b``; ``float m[][4]`` is a pointer to rows of floats,
    read as ``float *m`` (its elements are floats). Unnamed (``int [4]``), the whole
    declaration is the element type. Anything else with brackets is left as it is."""
    m = _ARRAY_DECLARATOR.fullmatch(plain.strip())
    if m is None:
        return plain
    dims = [d.strip() for d in _BRACKETED.findall(m["dims"])]
    if any(not d for d in dims[1:]) or any(_ZERO_EXTENT.fullmatch(d) for d in dims):
        # `int x[4][]`: only the first extent may be left out; `int x[0]`: no array is
        # empty. Refused after, as an array kernarg cannot read.
        return plain
    head, last = m["head"], m["last"]
    words = head.split()
    if last in _QUALIFIERS or _QUALIFIER_WORDS.fullmatch(head) \
            or _canonical(" ".join([w for w in words if w not in _QUALIFIERS] + [last])):
        return f"{head}{last} *"                # no name: `int [4]`, `unsigned int [2]`
    return f"{head} *{last}"


_TYPE_WORDS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|"
                         r"__grid_constant__|struct|class|union|enum)\b|__align__\s*\(\s*\d+\s*\)")


_HEAD_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict|"
                              r"__grid_constant__)\b|__align__\s*\(\s*\d+\s*\)")
_ELABORATED_HEAD = re.compile(r"\s*(?:(struct|class|union|enum|typename)\b)?(.*?)\s*", re.S)


def _opaque_pointer(text, plain, tokens, is_const):
    """A pointer to a type kernarg's scalar and vector tables do not name (a struct, a template
    instantiation, a namespaced or library type such as ``cutlass::half_t``): 8 bytes like every
    pointer. Its const-ness is checked (read-only arrays are refused for a non-const pointee);
    its element type only for cuda_fp8/fp6/fp4's types, whose formats arrays name. The name is
    the one identifier after the last ``*``. ``plain`` is ``text`` without its attributes;
    messages quote ``text``, as written."""
    last_star = len(tokens) - 1 - tokens[::-1].index("*")
    after = [t for t in tokens[last_star + 1:] if t not in _QUALIFIERS]
    # The type: its qualifiers aside, one name (template arguments and all), after at most one
    # elaborated type specifier; `typename Box<T>::type*`, in a template's source, is shown so.
    head = _HEAD_QUALIFIERS.sub(" ", plain[:plain.index("*")])
    m = _ELABORATED_HEAD.fullmatch(head)
    type_text = " ".join(m[2].split())
    if m[1] in ("enum", "union") and _canonical(m[2].strip()) is not None:
        # `enum float2*`: the types kernarg names that are no scalar are structs.
        raise ValueError(f"{text.strip()!r}: unknown parameter type; pass a numpy dtype or a "
                         "ctypes type for structs")
    if m[1] == "typename":
        type_text = "typename " + type_text
        if "::" not in type_text:
            raise ValueError(f"{text.strip()!r}: 'typename' names a member of a class or "
                             "namespace (`typename A::type`), and this name is not one")
    name_only = m[2].strip()
    while "<" in name_only:
        shorter = _TEMPLATE_PART.sub("", name_only)
        if shorter == name_only:
            break
        name_only = shorter
    if len(after) > 1 or not re.fullmatch(r"(?:::)?[A-Za-z_][\w:<>,\s]*", m[2].strip()) \
            or not re.fullmatch(r"(?:::)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*", name_only) \
            or _SPECIFIERS.issuperset(name_only.split()) \
            or ("<" in m[2] and _canonical(m[2].partition("<")[0].strip())) \
            or _canonical(name_only) in _FUNDAMENTAL \
            or "<" in plain[plain.index("*"):] or ">" in plain[plain.index("*"):]:
        # Stray words after the name (`Foo* a b`), an unclosed function pointer
        # (`int (*f)(int`): not a pointer declaration. A whole function pointer is
        # _FUNCTION_POINTER's, matched before this. Arithmetic specifiers that _canonical
        # found no type for (`int int*`, `signed unsigned*`) name none, nor does a type
        # kernarg names given template arguments (`float<2>*`) or an elaborated specifier
        # (`typename bool*`). The type is one name, its template arguments aside, and those
        # come before the `*`s (`p short*`, `Foo Bar*`, `Foo* p<int>` name no type).
        raise ValueError(f"{text.strip()!r}: unknown parameter type; pass a numpy dtype or a "
                         "ctypes type for structs")
    name = after[0] if after else None
    refusal = _keyword_refusal(text, re.findall(r"[A-Za-z_]\w*", name_only), name, True)
    if refusal is None and name is not None and tokens[-1] != name:
        refusal = _after_name_refusal(text, name)
    if refusal is not None:
        raise refusal
    between = [t for t in tokens[tokens.index("*"):last_star] if t != "*" and t not in _QUALIFIERS]
    if between or (name is not None and "::" in name):
        # `Foo* Bar* p`: a word among the `*`s; `Foo* ::ns::p`: a qualified name.
        raise ValueError(f"{text.strip()!r}: unknown parameter type; pass a numpy dtype or a "
                         "ctypes type for structs")
    return _pointer_spec(type_text, tokens.count("*"), is_const), name


def _pointer_spec(base, stars, is_const):
    """A pointer parameter of ``stars`` levels to ``base``, its elements checked as
    _pointee_of says."""
    kind, size = _pointee_of(base, stars)
    shown = ("const " if is_const else "") + base + "*" * stars
    vec = _vector_type(base) if stars == 1 else None
    # `count`: the pointee's lanes, for a vector type (float2* also takes complex64 arrays).
    return _Spec(C_POINTER, 8, 8, shown, pointee_kind=kind, pointee_size=size,
                 is_const=is_const, count=vec[1] if vec is not None else 0)


# <cstdint>'s and <cstddef>'s names, which C++ kernels also write as std::size_t, ::size_t or
# cuda::std::int32_t (libcu++): the same types.
_STD_NAMES = frozenset(("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
                        "int64_t", "uint64_t", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t"))
_STD_QUALIFIED = re.compile(r"(?:::)?(?:(?:cuda::)?std::)?(\w+)")


def _canonical(type_name):
    if type_name in _SCALARS or type_name == "void" or type_name == "CUtensorMap" or \
            type_name in _SMALL_FLOAT_POINTEES or type_name in _WIDE_INTS:
        return type_name
    if ":" in type_name:
        m = _STD_QUALIFIED.fullmatch(type_name)
        return _ALIASES[m[1]] if m is not None and m[1] in _STD_NAMES else None
    if type_name in _ALIASES:
        return _ALIASES[type_name]
    if _vector_type(type_name) is not None:
        return type_name
    return _from_specifiers(type_name.split())


def _from_specifiers(words):
    """The type that C's arithmetic type specifiers name, in whatever order they are written,
    or None where they name none (or are not all specifiers): `long` at most twice, every other
    word at most once, `short` and `long` not together, `signed` and `unsigned` not together."""
    if not words or not _SPECIFIERS.issuperset(words):
        return None
    n = {w: words.count(w) for w in _SPECIFIERS}
    if n["long"] > 2 or any(n[w] > 1 for w in _SPECIFIERS if w != "long"):
        return None
    sign = n["signed"] + n["unsigned"]
    if n["__int128"]:
        # GCC's `__int128` takes a sign and nothing else (`unsigned __int128`, in any order).
        if sign > 1 or len(words) > 1 + sign:
            return None
        return "unsigned __int128" if n["unsigned"] else "__int128"
    if n["double"]:
        # `long double`: device code has no wider type; NVRTC compiles it as .f64.
        ok = n["long"] <= 1 and not (sign or n["short"] or n["int"] or n["char"])
        return "double" if ok else None
    if n["char"]:
        if n["short"] or n["long"] or n["int"] or sign > 1:
            return None
        return "unsigned char" if n["unsigned"] else "signed char" if n["signed"] else "char"
    if sign > 1 or (n["short"] and n["long"]):
        return None
    size = "short" if n["short"] else "long long" if n["long"] == 2 else "long" if n["long"] \
        else "int"
    return "unsigned " + size if n["unsigned"] else size


cdef list _items(str text, bint without_defaults, bint template_list=False):
    """``text``'s top-level comma-separated items (parameters, template arguments), each as
    written or, ``without_defaults``, cut at its default argument: commas inside brackets,
    braces, template argument lists and string or character literals do not split. In a
    default argument (after an ``=`` outside brackets) ``<`` and ``>`` are comparisons, not
    brackets: ``int n = (1 < 2)``. In a ``template_list`` (a template's parameters or
    arguments) they are brackets, defaults included, but inside parentheses, where they
    compare (C++ ends the list at the first ``>`` outside them: ``N = (3 > 2)``)."""
    parts = []
    cdef Py_ssize_t i = 0, start = 0, n = len(text), depth = 0, default_at = -1, passed = 0
    cdef Py_ssize_t separator = -1
    cdef Py_ssize_t parens = 0          # of depth, the open ( [ {
    cdef bint angles
    while i < n:
        ch = text[i]
        if ch == "'" and _in_number(text, i, passed, separator):
            separator = i
        elif ch == '"' or ch == "'":
            i = passed = _past_literal(text, i)
            continue
        angles = parens == 0 if template_list else default_at < 0
        if ch in "([{":
            depth += 1
            parens += 1
        elif ch in ")]}":
            depth -= 1
            parens -= 1
        elif ch == "<" and angles:
            depth += 1
        elif ch == ">" and angles:
            depth -= 1
        elif ch == "=" and depth == 0 and default_at < 0:
            default_at = i
        elif ch == "," and depth == 0 and (parens == 0 or not template_list):
            parts.append(text[start:default_at if without_defaults and default_at >= 0 else i])
            start = i + 1
            default_at = -1
        i += 1
    parts.append(text[start:default_at if without_defaults and default_at >= 0 else n])
    return parts


def _split_params(str text, bint without_defaults=False):
    """_items, refusing an empty one. Parameter lists are split ``without_defaults``: a
    default argument (``float x = 1.5f``, ``P p = P{1, 2}``) says nothing about the type, and
    its words are not the parameter's name."""
    parts = _items(text, without_defaults)
    if any(not p.strip() for p in parts):
        raise ValueError(f"empty parameter in {text!r}")
    return parts


def _split_default(str piece):
    """One parameter declaration as (the declaration without its default argument, the
    default as written or None): ``int n = 4`` is ``('int n ', '4')``."""
    parts = _items(piece, True)
    if len(parts) != 1 or len(parts[0]) == len(piece):
        return piece, None
    return parts[0], piece[len(parts[0]) + 1:].strip() or None


def _without_default(str piece):
    """One parameter declaration without its default argument."""
    return _split_default(piece)[0]


def _declared_defaults(list declarations, Py_ssize_t n):
    """Per parameter, the declaration of it (as written) in the first of a kernel's
    ``declarations`` (parameter lists) that gives it a default argument, or None. C++ lets a
    later declaration add defaults for parameters an earlier one left without."""
    found = [None] * n
    for decl in declarations:
        pieces = [] if decl.strip() in ("", "void") else _split_params(decl)
        if len(pieces) == n:
            for i, piece in enumerate(pieces):
                if found[i] is None and _default_text(piece) is not None:
                    found[i] = piece
    return found


def _default_text(str piece):
    """One parameter declaration's default argument as written (``int n = 4``: ``'4'``), or
    None where it has none."""
    return _split_default(piece)[1]


_NOT_LITERAL = object()
# A literal out of its own type's range (1e999, 1e39f, an integer of more than 128 bits): no
# value, as a literal C++ does not convert has none.
_ILL_FORMED = object()
# A default NVRTC evaluated whose bytes kernarg does not pass back as a value (a NaN of another
# code than the one kernarg writes): refused as _NOT_LITERAL is, with its own reason.
_NOT_DECODED = object()
# A default NVRTC evaluated to an address (a function's, a __device__ variable's: `= twice`,
# `= table + 1`): the module's loader fixes it, so it has no value before then.
_ADDRESS = object()
# C++ literals a default argument may be, read as the packer then reads the value for the
# parameter's type: integers (decimal, hex, octal, binary; digit separators; u/l suffixes),
# decimal floating-point (f/l suffixes), true/false, nullptr/NULL (a null pointer), a
# character without an escape ('x').
_INT_LITERAL = re.compile(r"(0[xX][0-9a-fA-F']+|0[bB][01']+|0[0-7']*|[1-9][0-9']*)"
                          r"(?:[uU](?:ll|LL|l|L)?|(?:ll|LL|l|L)[uU]?)?")
_FLOAT_LITERAL = re.compile(r"((?:[0-9][0-9']*\.[0-9']*|\.[0-9][0-9']*)(?:[eE][+-]?[0-9]+)?"
                            r"|[0-9][0-9']*[eE][+-]?[0-9]+)[fFlL]?")


def _default_value(str text):
    """The value of the default argument ``text``, or _NOT_LITERAL where it is not a literal
    (a name, a call, an expression: kernarg evaluates no C++)."""
    text = text.strip()
    while text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text in ("true", "false"):
        return text == "true"
    if text in ("nullptr", "NULL"):
        return None
    if len(text) == 3 and text[0] == text[2] == "'" and text[1] != "\\" and text[1] < "\x80":
        # A character literal, no escape: 'x'. (Not 'ä': in UTF-8 source, two bytes, a
        # multicharacter literal, an int of the compiler's choosing.)
        return ord(text[1])
    sign = 1
    if text[:1] in ("-", "+"):
        sign, text = (-1 if text[0] == "-" else 1), text[1:].strip()
    m = _INT_LITERAL.fullmatch(text)
    if m:
        digits = m[1].replace("'", "")
        if digits[:2] in ("0x", "0X", "0b", "0B"):
            value = int(digits, 0)
        elif digits[0] != "0" and len(digits) > 39:
            # Past 2**128 (39 digits), as below; and int() of over 4,300 decimal digits
            # raises (sys.set_int_max_str_digits).
            return _ILL_FORMED
        else:
            value = int(digits, 8 if len(digits) > 1 and digits[0] == "0" else 10)
        if value >> 128:
            # Beyond 128 bits: "integer constant is too large" (NVRTC), no value. (NVRTC keeps
            # any narrower literal exact, converting it as it converts an __int128.)
            return _ILL_FORMED
        if sign < 0:
            # Minus applies to the literal's own type: an unsigned one wraps (-1u is
            # 4294967295, and stays so in a long long or a double).
            width = _unsigned_width(text[m.end(1):], digits[:1] in "123456789", value)
            if width:
                return -value % (1 << width)
        return sign * value
    m = _FLOAT_LITERAL.fullmatch(text)
    if m:
        value = float(m[1].replace("'", ""))
        if text[-1] in "fF" and math.isfinite(value):
            value = _decimal_to_float(m[1].replace("'", ""), value)
        nonzero = re.search(r"[1-9]", re.split(r"[eE]", m[1])[0]) is not None
        if math.isinf(value) or (value == 0 and nonzero):
            # Out of its own type's range (1e999, 2e-324, 1e39f): ill-formed, NVRTC refuses
            # it ("floating constant is out of range"), so there is no value to pass.
            return _ILL_FORMED
        return sign * value
    return _NOT_LITERAL


def _unsigned_width(str suffix, bint decimal, value):
    """The width of an integer literal's type (C++'s rules for a literal's type, on LP64, where
    int is 32 bits and long and long long 64) if that type is unsigned, else 0: the first of
    the suffix's candidate types that holds ``value``. A decimal literal without ``u`` is
    signed; a hexadecimal, octal or binary one may be unsigned (0x80000000 is an unsigned
    int). Past 64 bits NVRTC uses __int128, then unsigned __int128."""
    kind = _literal_type(suffix, decimal, value)
    if kind is not None:
        return kind[0] if kind[1] else 0
    return 128 if "u" in suffix.lower() or value >> 127 else 0


def _literal_type(str suffix, bint decimal, value):
    """(bits, unsigned) of an integer literal's type, as C++ (on LP64) types it: the first of
    its suffix's candidates that holds ``value``; None past 64 bits."""
    suffix = suffix.lower()
    if "u" in suffix:
        candidates = [(32, True), (64, True)]
    elif decimal:
        candidates = [(32, False), (64, False)]
    else:
        candidates = [(32, False), (32, True), (64, False), (64, True)]
    if "l" in suffix:
        candidates = [c for c in candidates if c[0] == 64]
    for kind in candidates:
        if not _out_of(value, kind):
            return kind
    return None


def _decimal_to_float(str digits, double nearest):
    """The float (IEEE single) nearest the decimal ``digits``, whose nearest double is
    ``nearest``, as C++ reads a literal `1.5f`: rounded once. Rounding the double instead rounds
    twice, and differs where the double is a tie between two floats but the decimal is not
    (1.0000000596046447753906251f is 1.0000001192092896, not 1.0)."""
    cdef double f = _rounded_to_float(nearest)
    if f == nearest or not math.isfinite(f):
        return f
    other = float(np.nextafter(np.float32(f), np.float32(math.copysign(math.inf, nearest - f))))
    if nearest - f != other - nearest:
        return f                        # not a tie: the double's rounding is the decimal's
    exact = Fraction(digits)
    if exact == Fraction(nearest):
        return f                        # a true tie, which _rounded_to_float broke to even
    return other if (exact > Fraction(nearest)) == (other > f) else f


def _rounded_to_float(double value):
    """``value`` rounded to the nearest float (IEEE single), inf where it overflows."""
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


# Default arguments that are not literals (a macro, a constexpr name, an expression) are left to
# the compiler: from_source compiles the source again with, right after the kernel's last
# declaration (so in its namespace, seeing what it sees), one constant of each parameter's
# declared type initialised with its default as written, and reads the constants' bytes back
# from the PTX. What C++ would pass is what the compiler computed. A default that is not a
# constant expression (a call to a non-constexpr function, say) fails to compile there and
# stays one the call must pass.
_EVAL_NAME = "__kernarg_default_"
_EVAL_FILE = "__kernarg_defaults__"
# Lane formats of vector parameters (struct module codes), by scalar code; bfloat16 apart.
_LANE_FORMATS = {C_BOOL: "?", C_I8: "b", C_U8: "B", C_I16: "h", C_U16: "H", C_I32: "i",
                 C_U32: "I", C_I64: "q", C_U64: "Q", C_F16: "e", C_F32: "f", C_F64: "d"}
# Words that end a parameter declaration without naming it (``unsigned int``, ``float*
# __restrict__``).
_UNNAMING_WORDS = _SPECIFIERS | _QUALIFIERS | {"bool", "float", "void"}
_SIGNED_CODES = frozenset([C_I8, C_I16, C_I32, C_I64, C_I128])
_UNSIGNED_CODES = frozenset([C_U8, C_U16, C_U32, C_U64, C_U128, C_U64_OR_PTR])


def _namespaces_at(str plain, Py_ssize_t at):
    """The namespaces open at index ``at`` of ``plain`` (a source without comments, its
    literals blanked: _without_comments), outermost first: ``('a', 'b')`` inside ``namespace a
    { namespace b {``; an anonymous one is ``''``."""
    stack = []
    for m in re.finditer(r"\bnamespace\s+([A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*)?\s*\{|[{}]",
                         plain[:at]):
        if m[0] == "}":
            if stack:
                stack.pop()
        elif m[0] == "{":
            stack.append(None)          # a body, a struct, extern "C" { ...: no name of its own
        else:
            stack.append(tuple(re.split(r"\s*::\s*", m[1])) if m[1] else ("",))
    return tuple(part for names in stack if names is not None for part in names)


def _declarations_end(str source, str kernel_name):
    """The index just past the last ``__global__`` declaration of ``kernel_name`` in
    ``source`` (past its body's closing brace, or its semicolon); -1 where there is none, and
    None where it cannot say which: declarations in several namespaces (see
    _kernel_declarations)."""
    text = _without_dead_branches(_without_comments(source, True, True))
    try:
        found = _kernel_declarations(text, kernel_name)
    except ValueError:
        return None
    if len({d[3] for d in found}) > 1:
        return None
    end = -1
    for _, _, j, _, _ in found:
        body = _BODY.match(text, j + 1)
        k = (_closing(text, body.end(), "{", "}") if body is not None
             else text.find(";", j + 1))
        if k < 0:
            return None
        end = k + 1
    return end


def _declared_type(str piece):
    """A parameter declaration's type as written, without its name, default argument and
    ``__grid_constant__`` (a type a C++ alias can name: ``const float* __restrict__``)."""
    decl = re.sub(r"\b__grid_constant__\b", " ", _without_default(piece))
    m = _FUNCTION_POINTER.fullmatch(decl.strip())
    if m is not None:           # `int (*f)(int)`: the name is inside the parentheses
        return " ".join((m["head"] + " (" + m["ptr"] + ")" + m["tail"]).split())
    tokens = list(re.finditer(r"[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|[^\sA-Za-z_]", decl))
    if len(tokens) > 1:
        last = tokens[-1]
        if re.fullmatch(r"[A-Za-z_]\w*", last[0]) and last[0] not in _UNNAMING_WORDS:
            decl = decl[:last.start()] + decl[last.end():]      # the parameter's name
    return " ".join(decl.split())


def _ptx_constant(str ptx, str name):
    """The bytes of the initialised PTX variable ``name`` (``.global .align 4 .u32 name =
    1024;``; no initialiser: zeros), None where there is no such variable, or _ADDRESS where
    its initialiser is not plain numbers: it names a symbol (``_Z5twicei``,
    ``generic(table)+4``), whose address the driver fixes when it loads the module."""
    m = re.search(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:global|const)\s+(?:\.align\s+\d+\s+)?"
                  r"\.([bsuf])(8|16|32|64)\s+" + re.escape(name) +
                  r"(?:\[(\d+)\])?\s*(?:=\s*([^;]*))?;", ptx, re.M)
    if m is None:
        return None
    width = int(m[2]) // 8
    count = int(m[3]) if m[3] is not None else 1
    init = (m[4] or "").strip()
    if init.startswith("{") and init.endswith("}"):
        items = [t.strip() for t in init[1:-1].split(",") if t.strip()]
    else:
        items = [init] if init else []
    if len(items) > count:
        return None
    out = bytearray()
    for item in items:
        if re.fullmatch(r"0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16}", item):
            value = int(item[2:], 16)
        elif re.fullmatch(r"-?(?:0[xX][0-9a-fA-F]+|[0-9]+)[uU]?", item):
            value = int(item.rstrip("uU"), 0)
        else:
            return _ADDRESS
        out += (value % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(out) + bytes(width * count - len(out))


def _bf16(bytes data):
    """The float whose bfloat16 bits are the two bytes ``data``."""
    return struct.unpack("<f", b"\0\0" + data)[0]


def _value_of_bytes(spec, bytes data):
    """The Python value the packer takes for ``spec`` whose bytes are ``data``: an int, a
    bool, a float, None (a null pointer), a tuple (a vector's lanes) or the bytes themselves (a
    struct or an opaque type), a float or a tuple of floats for cuda_fp8/fp6/fp4's types;
    _NOT_DECODED for bytes kernarg would not pass back exactly (see _small_float_lanes)."""
    code = spec.code
    if len(data) != spec.size:
        return _NOT_DECODED
    if code == C_BOOL:
        return data != bytes(len(data))
    if code in _SIGNED_CODES or code in _UNSIGNED_CODES:
        return int.from_bytes(data, "little", signed=code in _SIGNED_CODES)
    if code == C_POINTER:
        address = int.from_bytes(data, "little")
        return address if address else None
    if code == C_BF16:
        return _bf16(data)
    if code in _LANE_FORMATS:
        return struct.unpack("<" + _LANE_FORMATS[code], data)[0]
    if code == C_VECTOR and spec.elem in _LANE_FORMATS:
        lane = struct.calcsize(_LANE_FORMATS[spec.elem])
        return struct.unpack(f"<{spec.count}{_LANE_FORMATS[spec.elem]}",
                             data[:lane * spec.count])
    if code == C_VECTOR and spec.elem == C_BF16:
        return tuple(_bf16(data[2 * k:2 * k + 2]) for k in range(spec.count))
    if code == C_SMALL_FLOAT:
        return _small_float_lanes(spec.elem, spec.count, data)
    if code == C_STRUCT or code == C_OPAQUE:
        return data
    return _NOT_DECODED


cdef object _as_parameter(const Param* p, object value):
    """A literal default ``value`` converted to parameter ``p``'s type as C++ converts it
    (``unsigned char c = -1`` is 255, ``int n = 2.7`` is 2, ``float* q = 0`` a null pointer),
    or _NOT_LITERAL where C++ would not (a non-zero int for a pointer). Types with no literal
    of their own (structs, vectors) get the value as is, for the packer to judge."""
    cdef int code = p.code
    cdef object bits = 8 * p.size     # Python ints: 1 << 64 must not overflow
    if value is _NOT_LITERAL or value is _ILL_FORMED:
        return _NOT_LITERAL
    if code == C_BOOL:
        return _NOT_LITERAL if value is None else bool(value)
    if code == C_U64_OR_PTR and value is None:
        # A .u64 the source does not type for kernarg (a pointer typedef, say) defaulting to
        # nullptr: C++ took it, so it is a pointer, which None packs as null.
        return None
    if code in _SIGNED_CODES or code in _UNSIGNED_CODES:
        if value is None:
            return _NOT_LITERAL
        if type(value) is float:
            # Truncated; outside the type's range the conversion is undefined in C++.
            if not math.isfinite(value):
                return _NOT_LITERAL
            value = int(value)
            low = -(1 << (bits - 1)) if code in _SIGNED_CODES else 0
            if not low <= value < low + (1 << bits):
                return _NOT_LITERAL
        value = int(value) % (1 << bits)        # modulo 2**bits, as C++ converts integers
        if code in _SIGNED_CODES and value >= 1 << (bits - 1):
            value -= 1 << bits
        return value
    if code == C_F16 or code == C_BF16 or code == C_F32 or code == C_F64:
        if value is None:
            return _NOT_LITERAL
        if type(value) is int:
            value = _rounded_int(value, _significand_bits(code))
        value = float(value)
        if code == C_F32 and math.isinf(_rounded_to_float(value)) and math.isfinite(value):
            # Beyond float's range (float x = 1e39): undefined in C++. (__half and
            # __nv_bfloat16 convert through their constructors, which round to inf.)
            return _NOT_LITERAL
        return value
    if code == C_POINTER:
        return None if value is None or (type(value) is int and value == 0) else _NOT_LITERAL
    return value


def _evaluator(str source, options, arch, headers):
    """What from_source gives _from_source_and_ptx for the default arguments that are not
    literals: ``(source, compile)``, ``compile(text)`` giving the PTX of ``text`` compiled as
    ``source`` was (options, headers, architecture; PTX only)."""
    from kernarg._nvrtc import normalize_options, split_arch_option

    named, without = split_arch_option(normalize_options(options))
    if named is not None:       # the target (compile_program refused one that differs)
        arch, options = named, without
    if isinstance(arch, str) and arch.startswith("sm_"):
        arch = "compute_" + arch[len("sm_"):]

    def compile(str text):
        from kernarg._nvrtc import compile_program_cached

        return compile_program_cached(text, options=options, arch=arch, headers=headers).ptx

    return source, compile


# How _evaluate_defaults has the compiler evaluate a value (see _evaluate_line).
_EVAL_WRAPPED = 0       # through a constexpr copy only
_EVAL_EITHER = 1        # through a constexpr copy, else directly
_EVAL_PLAIN = 2         # directly


def _evaluate_line(i, str type_text, text, bint wrapped, str prelude=""):
    """The line of _evaluate_defaults that has the compiler evaluate ``text`` (None: the
    type's value-initialized ``T{}``) as a ``type_text`` into the PTX variable numbered ``i``,
    after the declarations ``prelude`` (one line, as the line numbers of refusals count).
    ``wrapped``: through a constexpr copy. NVRTC (13.5) emits `const W w = {};` (and `W{}`)
    with only the first row of a member `P g[2][2]` of structs with default member
    initializers, the others zero, where its constant evaluator gives every element, as C++
    does. T{} is wrapped in a struct, which takes arrays too; a default argument (never an
    array) is copy-initialized from its text as the parameter is. The copy is refused for a
    type whose copy is not constexpr (__half2's is user-provided), which is evaluated
    unwrapped where the bug cannot touch it."""
    using = f"{prelude}using __kernarg_type_{i} = {type_text}; "
    if not wrapped:
        return (using + f'extern "C" __device__ const __kernarg_type_{i} {_EVAL_NAME}{i} = '
                f"{'{}' if text is None else text};")
    if text is not None:
        return (using + f"constexpr __kernarg_type_{i} __kernarg_value_{i} = {text}; "
                f'extern "C" __device__ const __kernarg_type_{i} {_EVAL_NAME}{i} = '
                f"__kernarg_value_{i};")
    return (using + f"struct __kernarg_value_type_{i} {{ __kernarg_type_{i} __kernarg_value; "
            f"}}; constexpr __kernarg_value_type_{i} __kernarg_value_{i}{{}}; "
            f'extern "C" __device__ const __kernarg_value_type_{i} {_EVAL_NAME}{i} = '
            f"__kernarg_value_{i};")


def _evaluation(spec):
    """How a value of ``spec``'s type is evaluated (_EVAL_*): a struct's through a constexpr
    copy, directly only where it holds no grid NVRTC gets wrong (_has_struct_grid); other
    types directly."""
    if spec.code == C_OPAQUE:
        return _EVAL_EITHER     # its layout unknown: wrapped where the compiler takes that
    if spec.code != C_STRUCT or spec.record is None or spec.record.fields is None:
        return _EVAL_PLAIN
    return _EVAL_WRAPPED if _has_struct_grid(spec.record) else _EVAL_EITHER


def _has_struct_grid(dt):
    """Whether struct dtype ``dt`` holds, at any depth, an array of two dimensions or more of
    structs with default member initializers: what NVRTC's unwrapped T{} gets wrong (see
    _evaluate_line)."""
    for name in dt.names:
        field = dt.fields[name][0]
        base = field.subdtype[0] if field.subdtype is not None else field
        if base.fields is None:
            continue
        if field.subdtype is not None and len(field.subdtype[1]) > 1 and \
                (base.metadata or {}).get("defaulted"):
            return True
        if _has_struct_grid(base):
            return True
    return False


# How many compilations from_source may take to evaluate the array extents of a kernel's
# structs: every extent is asked in the first (a struct is read on past one not known yet);
# a second is the guard should one be named only once another is known.
_EXTENT_ROUNDS = 2


def _evaluate_extents(str source, str kernel_name, dict queries, compile):
    """``{query: extent}`` of the array extents ``queries`` (_SourceStructs.wanted: each a
    ``sizeof`` ratio the compiler evaluates where the kernel is declared, in order), as the
    compiler evaluates them; those it refuses are asked once more without access checks
    (_unchecked: a private member's, or one inside a private member), in one more
    compilation; what it refuses then (an object kernarg named wrongly) is left out, and its
    struct stays opaque bytes."""
    spec = _parse_c_param("unsigned long long")[0]
    order = list(queries)
    lines = {}
    for i, q in enumerate(order):
        member = queries[q]
        if member is not None and member[2] == "width":
            # A bit-field's width (_SourceStructs._bit_width).
            prelude, text = _width_query(i, member[0], member[1])
            lines[i] = ("unsigned long long", text, spec, _EVAL_PLAIN, prelude)
        elif member is not None and member[1] is None and member[0].endswith("::"):
            # A base's alignment or size (_SourceStructs._asked): through its object's type.
            prelude, text = _base_query(i, member[0], member[2])
            lines[i] = ("unsigned long long", text, spec, _EVAL_PLAIN, prelude)
        else:
            lines[i] = ("unsigned long long", q, spec, _EVAL_PLAIN)
    values = _evaluate_defaults(source, kernel_name, lines, compile)
    found = {order[i]: v for i, v in values.items() if type(v) is int and v > 0}
    again = {}
    for i, q in enumerate(order):
        member = queries[q]
        # (A base's, refused: a private base's injected name; asked no more.)
        asked = None if q in found or member is None or len(lines[i]) > 4 else \
            _unchecked(i, *member)
        if asked is not None:
            again[i] = ("unsigned long long", asked[1], spec, _EVAL_PLAIN, asked[0])
    if again:
        values = _evaluate_defaults(source, kernel_name, again, compile)
        found.update((order[i], v) for i, v in values.items() if type(v) is int and v > 0)
    return found


def _unchecked(i, str path, name, dimension):
    """(declarations, expression) that give extent ``dimension`` of array member ``name`` of
    the object ``path`` names (see _SourceStructs._shape), or with ``name`` None the
    alignment of that object or its size (``dimension`` "alignof" or "sizeof":
    _SourceStructs._asked), as _evaluate_line's ``prelude`` and
    ``text``, where ``sizeof`` or ``alignof`` refuses it for access (a private member, or one
    of a private member); None for the parameter itself (nothing of it is private). C++
    checks no access in the names that specify an explicit instantiation ([temp.spec] in
    C++17, [temp.spec.general] later): there the member's pointer is taken, and a friend
    function the instantiation defines gives the extent or alignment of its type."""
    cdef bint alignment = name is None
    if alignment:               # `s.q.` (or `s.qs[0].`): s's member q, of the type of q
        path = path[:-1]
        while path.endswith("[0]"):
            path = path[:-3]
        if "." not in path:
            return None
        at = path.rfind(".")
        path, name = path[:at + 1], path[at + 1:]
    at = path.rfind(".")
    owner, member = path[:at], path[at + 1:] + name     # (`....B::` + v: B's member v)
    held = f"__kernarg_held_{i}<decltype({owner})>::type::{member}"
    # (Every name __kernarg_'s: the source's macros, `#define N 3`, would replace others.)
    t, n, k, c, m = "__kernarg_T", "__kernarg_N", "__kernarg_K", "__kernarg_C", "__kernarg_M"
    dim, value = f"__kernarg_dim_{i}", "static constexpr unsigned long long value"
    prelude = (
        f"struct __kernarg_tag_{i}; "
        f"__device__ constexpr unsigned long long __kernarg_extent_{i}(__kernarg_tag_{i}*); "
        f"template <class {t}> struct __kernarg_held_{i} {{ typedef {t} type; }}; "
        f"template <class {t}> struct __kernarg_held_{i}<{t}&> {{ typedef {t} type; }}; "
        f"template <class {t}, int {k}> struct {dim} {{ {value} = 0; }}; "
        f"template <class {t}, unsigned long long {n}> struct {dim}<{t} (*)[{n}], 0> "
        f"{{ {value} = {n}; }}; "
        f"template <class {t}, unsigned long long {n}, int {k}> struct {dim}<{t} (*)[{n}], {k}> "
        f"{{ {value} = {dim}<{t}*, {k} - 1>::value; }}; "
        f"template <class {c}, class {t}> __device__ {t}* __kernarg_member_{i}({t} {c}::*); "
        f"template <class {t}, {t} {m}> struct __kernarg_unchecked_{i} {{ friend __device__ "
        f"constexpr unsigned long long __kernarg_extent_{i}(__kernarg_tag_{i}*) {{ return "
        + (f"{dim}<decltype(__kernarg_member_{i}({m})), {dimension}>::value; }} }}; "
           if not alignment else
           f"{dimension}(typename __kernarg_held_{i}<decltype(*__kernarg_member_{i}({m}))>"
           "::type); "
           "} }; ") +
        f"template struct __kernarg_unchecked_{i}<decltype(&{held}), &{held}>; ")
    return prelude, f"__kernarg_extent_{i}(nullptr)"


def _evaluate_defaults(str source, str kernel_name, dict wanted, compile):
    """``{parameter index: value}`` of the default arguments ``wanted`` (``{index: (declared
    type, default as written or None for the type's T{}, _Spec, how: _EVAL_*)}``, see
    _evaluate_line) as the compiler evaluates
    them in ``source``, where the kernel is declared; ``compile(text)`` compiles a text as
    ``source`` was and gives its PTX. Defaults the compiler refuses (not constant expressions)
    are left out."""
    from kernarg._nvrtc import NvrtcError

    at = _declarations_end(source, kernel_name)
    if at is None:
        return {}               # which declaration's scope is not clear: none evaluated
    if at < 0:
        at = len(source)        # declared in a header: evaluated at the end, in global scope
    resume = source.count("\n", 0, at) + 1
    return _evaluate_group(source, at, resume, wanted, sorted(wanted),
                           {i for i in wanted if wanted[i][3] == _EVAL_PLAIN}, compile,
                           [_EVAL_COMPILES])


# How many compilations evaluating one kernel's defaults may take: halving a group the
# compiler refuses as a whole takes two more each time.
_EVAL_COMPILES = 16


def _evaluate_group(str source, Py_ssize_t at, Py_ssize_t resume, dict wanted, list order,
                    set unwrapped, compile, list budget):
    """_evaluate_defaults' values of the defaults ``order`` (those in ``unwrapped`` evaluated
    as _EVAL_PLAIN), evaluated together; where the compiler refuses them for a reason it
    reports outside their lines (a struct's deleted constructor is reported where the struct
    is defined), each half is evaluated apart, so that one such value leaves out only
    itself, within ``budget[0]`` compilations in all."""
    from kernarg._nvrtc import NvrtcError

    while order:
        if budget[0] <= 0:
            return {}
        budget[0] -= 1
        lines = [_evaluate_line(i, wanted[i][0], wanted[i][1], i not in unwrapped,
                                *wanted[i][4:]) for i in order]
        # Diagnostics of these lines name _EVAL_FILE; the source's lines after them keep
        # their numbers and compile_program's file name.
        text = (f'{source[:at]}\n#line 1 "{_EVAL_FILE}"\n' + "\n".join(lines) +
                f'\n#line {resume} "kernarg_source.cu"\n{source[at:]}')
        try:
            ptx = compile(text)
        except NvrtcError as exc:
            # Drop the lines the compiler refused, and try the others again.
            bad = {int(line) for line in
                   re.findall(re.escape(_EVAL_FILE) + r"\((\d+)\): error", exc.log)}
            # A value refused wrapped is tried unwrapped, where that is right.
            retry = {i for k, i in enumerate(order, 1) if k in bad and i not in unwrapped
                     and wanted[i][3] == _EVAL_EITHER}
            keep = [i for k, i in enumerate(order, 1) if k not in bad or i in retry]
            if not bad or (len(keep) == len(order) and not retry):
                # Refused for a reason outside these lines.
                if len(order) < 2:
                    return {}
                half = len(order) // 2
                out = _evaluate_group(source, at, resume, wanted, order[:half], unwrapped,
                                      compile, budget)
                out.update(_evaluate_group(source, at, resume, wanted, order[half:],
                                           unwrapped, compile, budget))
                return out
            unwrapped |= retry
            order = keep
            continue
        out = {}
        for i in order:
            data = _ptx_constant(ptx, f"{_EVAL_NAME}{i}")
            if data is _ADDRESS:
                out[i] = data
            elif data is not None:
                out[i] = _value_of_bytes(wanted[i][2], data)
        return out
    return {}


def _struct_initials(list specs, list declared, evaluate, str kernel_name):
    """Give each struct parameter of ``specs`` whose fields have default member initializers
    (its record's "defaulted" metadata) the bytes of its value-initialized ``T{}`` as the
    compiler evaluates them (``evaluate``: _evaluator's), as its record's "initial": a dict
    that leaves such fields out then packs what C++'s ``T{.b = 3}`` does. Where the compiler
    does not evaluate it, a dict must give those fields (see _put_record)."""
    wanted, nested = {}, {}
    for i, spec in enumerate(specs):
        record = spec.record if spec.code == C_STRUCT else None
        if record is not None and (record.metadata or {}).get("defaulted"):
            type_text = _declared_type(declared[i])
            wanted[i] = (type_text, None, spec, _evaluation(spec))
            # The structs inside it with defaults of their own, each type once: a dict that
            # gives such a field in part (C++'s R{.p = {.b = 3}}) takes the field's own type's
            # P{}, not what R's T{} holds there (R may initialize p otherwise: P p = {9, 9}).
            # The compiler names the type: decltype(((R*)0)->p), a member's declared type.
            for base, member, whole in _nested_defaulted(record, ""):
                if id(base) not in nested:
                    k = len(specs) + len(nested)
                    nested[id(base)] = k
                    # (Unwrapped, an array's later rows may be wrong; its first element,
                    # the one taken, is right where the element's own type holds no grid.)
                    wanted[k] = (f"decltype(static_cast<{type_text}*>(nullptr)->{member})",
                                 None, _Spec(C_STRUCT, whole.itemsize, 1, member),
                                 _EVAL_WRAPPED if _has_struct_grid(base) else _EVAL_EITHER)
    if not wanted:
        return
    values = _evaluate_defaults(evaluate[0], kernel_name, wanted, evaluate[1])
    initials = {}
    for key, k in nested.items():
        data = values.get(k)
        if isinstance(data, bytes):     # an array of them (P ps[3]) is that many P{}s
            initials[key] = data
    memo = {}
    for i, spec in enumerate(specs):
        if i not in wanted:
            continue
        record = _with_initials(spec.record, initials, memo)
        data = values.get(i)
        if isinstance(data, bytes) and len(data) == record.itemsize:
            record = np.dtype(record, metadata={**record.metadata, "initial": data})
        spec.record = record


def _nested_defaulted(record, str path):
    """Each struct field inside ``record`` (at any depth, in arrays too) whose type has
    fields with default member initializers: ``(its struct dtype, the C++ member access that
    names it from the outermost struct, the field's dtype: the struct or an array of it)``."""
    for name in record.names:
        whole = record.fields[name][0]
        base = whole.subdtype[0] if whole.subdtype is not None else whole
        if base.fields is None or not (base.metadata or {}).get("defaulted"):
            continue
        member = f"{path}.{name}" if path else name
        yield base, member, whole
        if whole.subdtype is not None:
            member += "[0]" * len(whole.subdtype[1])
        yield from _nested_defaulted(base, member)


def _with_initials(dt, dict initials, dict memo):
    """``dt`` with each struct inside it (at any depth) whose dtype's id is in ``initials``
    given those bytes, its value-initialized T{}, as its "initial" metadata (see _put_initial);
    ``initials`` holds the bytes the compiler evaluated for the struct's type, which are an
    array's where the member was one (its first element's bytes are taken)."""
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        new = _with_initials(base, initials, memo)
        return dt if new is base else np.dtype((new, shape))
    if dt.fields is None:
        return dt
    if id(dt) in memo:
        return memo[id(dt)]
    formats = [_with_initials(dt.fields[name][0], initials, memo) for name in dt.names]
    metadata = dict(dt.metadata or {})
    data = initials.get(id(dt))
    if data is not None and len(data) >= dt.itemsize and len(data) % dt.itemsize == 0:
        metadata["initial"] = data[:dt.itemsize]
    new = dt
    if "initial" in metadata or any(f is not dt.fields[name][0]
                                    for f, name in zip(formats, dt.names)):
        new = np.dtype({"names": list(dt.names), "formats": formats,
                        "offsets": [dt.fields[name][1] for name in dt.names],
                        "itemsize": dt.itemsize}, metadata=metadata)
    memo[id(dt)] = new
    return new


_CTYPES_SCALARS = {
    ctypes.c_bool: "bool", ctypes.c_byte: "signed char", ctypes.c_ubyte: "unsigned char",
    ctypes.c_char: "char", ctypes.c_short: "short", ctypes.c_ushort: "unsigned short",
    ctypes.c_int: "int", ctypes.c_uint: "unsigned int", ctypes.c_long: "long",
    ctypes.c_ulong: "unsigned long", ctypes.c_longlong: "long long",
    ctypes.c_ulonglong: "unsigned long long", ctypes.c_float: "float",
    ctypes.c_double: "double",
}
_NUMPY_SCALARS = {"b": {1: "bool"}, "i": {1: "signed char", 2: "short", 4: "int", 8: "long long"},
                  "u": {1: "unsigned char", 2: "unsigned short", 4: "unsigned int",
                        8: "unsigned long long"},
                  "f": {2: "__half", 4: "float", 8: "double"}}


def _spec_from_object(obj):
    """A parameter given as a numpy dtype/scalar type or a ctypes type."""
    if obj is None:     # numpy would read it as float64: a double where a pointer was meant
        raise TypeError("None is not a parameter type (where cuda.bindings' kernelParams types "
                        "say None for a CUdeviceptr or a Structure, give 'void*' or "
                        "ctypes.c_void_p for a pointer, or the Structure type)")
    if isinstance(obj, type) and issubclass(obj, ctypes._SimpleCData):
        if obj in (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p):
            return _Spec(C_POINTER, 8, 8, obj.__name__)
        native = obj
        if swapped_scalar(obj):
            # c_int32.__ctype_be__: the parameter is the native type; values are converted.
            native = obj.__ctype_le__       # (CUDA's hosts are little-endian)
        for base in native.__mro__:
            if base in _CTYPES_SCALARS:
                return _scalar_spec(_CTYPES_SCALARS[base], obj.__name__)
        raise ValueError(f"ctypes type {obj.__name__} has no CUDA parameter type")
    if isinstance(obj, type) and issubclass(obj, ctypes._Pointer):
        inner = obj._type_
        kind, size = "", 0
        if inner in _CTYPES_SCALARS:
            kind, size = _pointee_of(_CTYPES_SCALARS[inner])
        return _Spec(C_POINTER, 8, 8, obj.__name__, pointee_kind=kind, pointee_size=size)
    if isinstance(obj, type) and tensor_map_source(<type>obj):
        return _tensor_map_spec("CUtensorMap")
    if isinstance(obj, type) and issubclass(obj, (ctypes.Structure, ctypes.Union, ctypes.Array)):
        size = ctypes.sizeof(obj)
        if size == 0:
            raise ValueError(f"{obj.__name__} has size 0")
        return _Spec(C_STRUCT, size, ctypes.alignment(obj), obj.__name__, struct=obj,
                     record=_ctypes_record(obj))
    try:
        dtype = np.dtype(obj)
    except Exception:       # numpy's TypeError, or what writing its message raised
        raise TypeError(f"cannot use {shown_value(obj, True)} as a parameter type; expected a "
                        "C type string, a numpy dtype or a ctypes type") from None
    if dtype.fields is not None:
        _refuse(record_problem(dtype, str(dtype)))
        return _Spec(C_STRUCT, dtype.itemsize, record_alignment(dtype), str(dtype), struct=dtype,
                     record=dtype)
    if dtype.name == "bfloat16":
        return _scalar_spec("__nv_bfloat16", "bfloat16")
    if dtype.name in _SMALL_FORMAT_OF_DTYPE:   # ml_dtypes.float8_e4m3fn: __nv_fp8_e4m3
        return _small_float_spec(_SMALL_FORMATS[_SMALL_FORMAT_OF_DTYPE[dtype.name]][0])
    if dtype.kind == "c" and dtype.itemsize in (8, 16):
        elem = "float" if dtype.itemsize == 8 else "double"
        code = _SCALARS[elem][0]
        return _Spec(C_VECTOR, dtype.itemsize, dtype.itemsize, str(dtype), elem=code, count=2)
    name = _NUMPY_SCALARS.get(dtype.kind, {}).get(dtype.itemsize)
    if name is None:
        raise ValueError(f"numpy dtype {dtype} has no CUDA parameter type")
    return _scalar_spec(name, str(dtype))


def _refuse(problem):
    """Raise record_problem's or ctypes_problem's answer, if any, as the construction error."""
    if problem is not None:
        raise ValueError(problem)


def _ctypes_record(t):
    """ctypes struct type ``t`` as a numpy dtype of the same layout, for packing dicts and
    tuples field by field; None where numpy has no equivalent (bitfields) or a dict may name
    fields the dtype does not (an anonymous member's): ctypes builds those."""
    _refuse(ctypes_problem(t, t.__name__))
    if getattr(t, "_anonymous_", None):
        return None
    dt = _ctypes_dtype(t)
    return dt if dt is not None and dt.itemsize == ctypes.sizeof(t) else None


def _ctypes_dtype(t):
    """ctypes type ``t`` as a numpy dtype, where numpy's own conversion refuses pointers: a
    pointer field or element is ``uint64`` whose metadata carry its pointer spec (it takes what
    a pointer parameter takes: arrays, buffers, addresses), the rest as numpy converts it;
    None where numpy has no equivalent (bitfields)."""
    if issubclass(t, CTYPES_POINTER_TYPES):
        return np.dtype(np.uint64, metadata={"pointer": _spec_from_object(t)})
    if issubclass(t, ctypes.Array) and ctypes_pointer_fields(t):
        inner = _ctypes_dtype(t._type_)
        return None if inner is None else np.dtype((inner, (t._length_,)))
    if issubclass(t, (ctypes.Structure, ctypes.Union)) and ctypes_pointer_fields(t):
        names, formats, offsets = [], [], []
        for field in ctypes_fields(t):
            inner = None if len(field) > 2 else _ctypes_dtype(field[1])
            if inner is None:
                return None
            names.append(field[0])
            formats.append(inner)
            offsets.append(getattr(t, field[0]).offset)
        return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                         "itemsize": ctypes.sizeof(t)})
    try:
        return np.dtype(t)
    except (TypeError, ValueError, NotImplementedError):
        return None


_PTX_PARAM = re.compile(
    r"(?:\.align\s+(?P<align>\d+)\s+)?"            # the parameter's alignment
    r"\.(?P<kind>[bsuf])(?P<bits>\d+)"            # its type: .b8, .u32, .f64, ...
    r"(?:\s+\.ptr(?:\s+\.(?:global|const|local|shared))?(?:\s+\.align\s+\d+)?)?"
    #  ^ a pointer's attributes (its pointee's state space and alignment)
    r"\s+(?P<name>[A-Za-z_$%][\w$%]*)"
    r"(?:\s*\[\s*(?P<count>\d+)\s*\])?\s*")


def _ptx_number(digits, absent):
    """The decimal ``digits`` of a PTX parameter declaration as an int, ``absent`` where there
    are none. Past 18 digits, 2**62: as far past every width, count and alignment the checks
    take, and a power of two, as an alignment must be (int() of over 4,300 digits raises)."""
    if digits is None:
        return absent
    return int(digits) if len(digits) <= 18 else 1 << 62


def _ptx_param(decl, i, entry):
    """(kind, bits, count, align, name, text) of one PTX kernel parameter declaration (what
    follows ``.param``): ``[.align N] .TYPE name[COUNT]``, where a .u64 or .u32 may carry a
    pointer's attributes (``.ptr .global .align 16``), which say nothing of the parameter's own
    layout. Anything else is a ValueError naming the parameter, not a misread layout."""
    m = _PTX_PARAM.fullmatch(decl)
    shown = " ".join(f".param {decl}".split())
    bits = _ptx_number(m.group("bits"), 0) if m else 0
    count = _ptx_number(m.group("count"), 1) if m else 0
    align = _ptx_number(m.group("align"), bits // 8) if m else 0
    if m is None or bits % 8 or not 8 <= bits <= 128 or count < 1 or align < 1 or \
            align & (align - 1) or (m.group("kind") == "f" and bits not in (16, 32, 64)):
        raise ValueError(f"PTX entry {entry}: cannot read parameter {i}, '{shown}' (kernarg "
                         "reads '[.align N] .TYPE name[COUNT]', TYPE one of .b/.s/.u 8-128 "
                         "bits, .f16/.f32/.f64)")
    if align > KERNARG_MAX_PARAM_BYTES or bits // 8 * count > KERNARG_MAX_PARAM_BYTES:
        raise ValueError(f"PTX entry {entry}: parameter {i}, '{shown}', is larger or more "
                         f"aligned than CUDA's limit of {KERNARG_MAX_PARAM_BYTES} bytes of "
                         "parameters")
    # The PTX type, without the parameter's (often mangled) name: ".align 4 .b8 [8]".
    text = " ".join(decl[:m.start("name")].split())
    if m.group("count"):
        text += f" [{count}]"
    return m.group("kind"), bits, count, align, m.group("name"), text


cdef str ptx_text(object ptx, str who):
    """PTX given as a str or as bytes (bytes, bytearray, memoryview), as a str; ``who`` names
    the caller in the refusals."""
    if isinstance(ptx, str):
        return ptx
    if not isinstance(ptx, (bytes, bytearray, memoryview)):
        raise TypeError(f"{who}: ptx must be PTX text (str or bytes), got {type(ptx).__name__}")
    try:
        return bytes(ptx).decode()
    except UnicodeDecodeError as exc:
        raise ValueError(f"{who}: ptx is not PTX text ({exc})") from None


# `inline namespace v1`, and `namespace a::inline b` (C++20: `::inline` is nothing else).
_INLINE_NAMESPACE = re.compile(r"\binline\s+namespace\s+([A-Za-z_]\w*)"
                               r"|::\s*inline\s+([A-Za-z_]\w*)")


def _inline_namespaces(str source):
    """The names of the inline namespaces ``source`` opens (``inline namespace v1 {``,
    ``namespace a::inline b {``), which C++ lets a name leave out."""
    return frozenset(a or b for a, b in _INLINE_NAMESPACE.findall(source))


def _nested_name(entry, inline=()):
    """The qualified name a C++ mangled entry of a kernel in a namespace stands for
    (`_ZN2ns1fEf` -> 'ns::f'; `_ZN2ns4axpyIfEE...` -> 'ns::axpy'), or None where it is not
    that simple (std:: abbreviations, a kernel in the global namespace). An anonymous
    namespace (`_GLOBAL__N_...` in the mangled name) is left out, as C++ code leaves it out:
    `namespace { __global__ void f(); }` is 'f'; so is the `_INTERNAL_...` prefix NVRTC gives a
    variable of internal linkage in a namespace (`namespace ns { static __device__ int x; }`
    is 'ns::x'). ``inline``: names of inline namespaces to leave out too."""
    if not entry.startswith("_ZN"):
        return None
    parts, i = [], 3
    while i < len(entry) and entry[i].isdigit():
        j = i
        while j < len(entry) and entry[j].isdigit():
            j += 1
        n = int(entry[i:j])
        if n == 0 or j + n > len(entry):
            return None
        if not entry.startswith(("_GLOBAL__N", "_INTERNAL_"), j) and \
                entry[j:j + n] not in inline:
            parts.append(entry[j:j + n])
        i = j + n
    return "::".join(parts) if parts and entry[i:i + 1] in ("E", "I") else None


def _cpp_name(entry):
    """The name C++ code gives the kernel whose entry (or symbol) is ``entry``: ``ns::f`` for
    `_ZN2ns1fEf`, ``f`` for `_Z1fPf`, ``axpy<float, 4>`` for `_Z4axpyIfLi4EEvPT_`, else the
    entry itself."""
    from kernarg._demangle import cxx_name

    named = cxx_name(entry)
    if named != entry:
        return named
    nested = _nested_name(entry)
    if nested is not None:
        return nested
    m = re.match(r"_Z(\d+)", entry)
    if m is not None:
        n = int(m.group(1))
        own = entry[m.end():m.end() + n]
        if n and len(own) == n:
            return own
    return entry


def _did_you_mean(str name, names):
    """``"; did you mean ..."`` naming what ``name`` may have meant among ``names`` (C++ names
    of kernels or variables): those of that own name in a namespace; else the closest by
    spelling or case. ``""`` where there are none."""
    import difflib

    wanted = name.strip().removeprefix("::").strip()
    names = sorted(set(names))
    close = [n for n in names if n != wanted and _own_name(n) == wanted]
    if not close and split_template_name(wanted)[1] is not None:
        # An instantiation that is not there: those of that template that are.
        template = split_template_name(wanted)[0]
        close = [n for n in names if split_template_name(n)[0] == template][:6]
    if not close:
        close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.75)
        close += [n for n in names if n.lower() == wanted.lower() and n not in close]
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


def _template_symbols(symbols, str name):
    """The symbols among ``symbols`` (mangled names) of template instantiation ``name``
    (``'ns::axpy<float, 4>'``, as C++ names it: _demangle reads the symbols), or None where
    ``name`` is not a qualified name with template arguments. Those whose arguments are the
    ones given, else those that begin with them: ``axpy<float>`` is ``axpy<float, 4, int>``
    where the template's defaults fill in the rest, which only the source says."""
    from kernarg._demangle import demangle, template_key

    qualified, args = split_template_name(name)
    parts = [part.strip() for part in qualified.removeprefix("::").split("::")]
    if args is None or not all(re.fullmatch(r"[A-Za-z_]\w*", part) for part in parts):
        return None
    qualified = "::".join(parts)
    keys = [template_key(a) for a in args]
    exact, longer = [], []
    for symbol in symbols:
        found = demangle(symbol)
        if found is None or found[1] is None or found[0] != qualified:
            continue
        theirs = [template_key(a) for a in found[1]]
        if theirs == keys:
            exact.append(symbol)
        elif theirs[:len(keys)] == keys:
            longer.append(symbol)
    return exact or longer


def ptx_entry_name(entries, str name, str where="the PTX", inline=frozenset()):
    """The ``.entry`` among ``entries`` (the names a PTX module defines; a cubin's symbols) for
    kernel ``name``: itself, or the C++ mangled form of a kernel of that name, in the global
    namespace (`_Z1fPf`, `_Z4axpyIfEvPT_S0_`), an anonymous one, or another (`ns::f`:
    `_ZN2ns1fE...`, `_ZN2ns4axpyIfEE...`); a template instantiation as C++ names it
    (``'ns::axpy<float>'``: see _template_symbols); ``inline``, the names of inline
    namespaces a name may leave out (where the source is known). LookupError, naming
    ``where`` and listing the entries, where there is none or more than one (overloads, and
    instantiations the arguments given do not tell apart: name the entry itself)."""
    if name in entries:
        return name
    found = _template_symbols(entries, name)
    if found is not None:
        if len(found) == 1:
            return found[0]
        if found:
            raise LookupError(
                f"kernel {name!r} can be any of {len(found)} kernels in {where} "
                f"({', '.join(sorted(map(_cpp_name, found)))}): give each template argument, "
                f"or name the .entry itself ({', '.join(sorted(found))})")
    parts = [part.strip() for part in name.strip().removeprefix("::").split("::")]
    if all(re.fullmatch(r"[A-Za-z_]\w*", part) for part in parts):
        qualified = "::".join(parts)
        prefix = f"_Z{len(qualified)}{qualified}" if len(parts) == 1 else None
        mangled = [e for e in entries
                   if _nested_name(e) == qualified or prefix and e.startswith(prefix)
                   or inline and _nested_name(e, inline) == qualified]
        if len(mangled) == 1:
            return mangled[0]
        if mangled:
            named = sorted({_cpp_name(e) for e in mangled})
            raise LookupError(
                f"kernel {name!r} is overloaded in {where} ({sorted(mangled)}): name the "
                ".entry itself" + (f", or the instantiation ({', '.join(named)})"
                                   if len(named) == len(mangled) and all(
                                       "<" in n for n in named) else ""))
    hint = _did_you_mean(name, map(_cpp_name, entries))
    raise LookupError(f"kernel {name!r} not found in {where} (entries: {sorted(entries)})"
                      f"{hint}")


def _parse_ptx_entry(ptx, kernel_name, inline=frozenset()):
    entries = {m.group(1): m for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(([^)]*)\)", ptx)}
    if not entries:
        entries = {m.group(1): m for m in re.finditer(r"\.entry\s+([\w$]+)\s*\(\s*\)", ptx)}
    match = entries[ptx_entry_name(entries, kernel_name, inline=inline)]
    body = match.group(2) if match.lastindex and match.lastindex >= 2 else ""
    body = re.sub(r"//[^\n]*|/\*.*?\*/", " ", body, flags=re.S)     # PTX comments are C's
    specs, names = [], []
    for i, decl in enumerate(re.findall(r"\.param\b\s*([^,]*)", body)):
        kind, bits, count, align, pname, text = _ptx_param(decl, i, match.group(1))
        size = bits // 8 * count
        if "[" in text or kind == "b":
            spec = _Spec(C_OPAQUE, size, align, text)
        elif kind == "u" and bits == 64:
            spec = _Spec(C_U64_OR_PTR, 8, 8, text)
        elif kind == "f" and bits in (32, 64):
            spec = _scalar_spec({32: "float", 64: "double"}[bits], text)
        elif kind in ("s", "u") and bits <= 64:
            # PTX gives the width, not the C sign (NVVM declares an `int` parameter .u32):
            # accept either sign's range of that width.
            names_by_bits = {("s", 8): "signed char", ("u", 8): "unsigned char",
                             ("s", 16): "short", ("u", 16): "unsigned short", ("s", 32): "int",
                             ("u", 32): "unsigned int", ("s", 64): "long long"}
            spec = _scalar_spec(names_by_bits[(kind, bits)], text)
            spec.any_sign = True
        else:       # .f16, .s128/.u128: bytes of that size
            spec = _Spec(C_OPAQUE, size, align, text)
        specs.append(spec)
        names.append(pname)
    return specs, names


@cython.final
cdef class Signature:
    """A kernel's parameter list: layout, plus a typed packer.

    Parameters
    ----------
    params : str or sequence
        A C parameter list (``"float* out, const float* x, int n"``; names optional) or a
        sequence whose items are C type strings, numpy dtypes (structs must be aligned:
        ``np.dtype(..., align=True)``) or ctypes types.

    Examples
    --------
    >>> sig = kernarg.Signature("float* out, const float* x, float alpha, int n")
    >>> sig.offsets
    (0, 8, 16, 20)
    >>> block = sig.pack((out, x, 2.0, 1024))   # alpha packed as float, n as int

    A signature pickles (and copies) as its layout, names and defaults, as read. It is made
    once: ``__init__`` called again raises TypeError, as packs may be reading its layout.
    """

    def __cinit__(self):
        # Signature.__new__ without __init__ is a list of no parameters (until __init__).
        self._params = NULL
        self._fields = NULL
        self._names = self._types = self._structs = self._records = self._default_texts = ()
        self._field_names = ()

    def __dealloc__(self):
        free(self._params)      # the columns live in the same allocation
        free(self._fields)

    def __init__(self, params):
        if self._params != NULL:
            # _build would free the columns that a pack running now (another thread's, or
            # this thread's, under a value's __index__) reads: a signature is made once.
            raise TypeError("Signature.__init__: this signature is already made, and a "
                            "signature does not change; make a new Signature")
        texts = []
        if isinstance(params, str):
            # Comments first, as the preprocessor removes them: a comment's `*`s and words are
            # not the declaration's, and its commas do not split it.
            body = _without_comments(params, refuse_unclosed=True).strip()
            if body in ("", "void"):
                pairs = []
            else:
                pieces = _split_params(body)
                pairs = [_parse_c_param(p) for p in pieces]
                texts = [_default_text(p) for p in pieces]
        else:
            pairs = []
            if isinstance(params, (bytes, bytearray)) or not hasattr(type(params), "__iter__"):
                raise TypeError("Signature: params must be a C parameter list (a str) or a "
                                "sequence of parameter types (C type strs, numpy dtypes, "
                                f"ctypes types), got {type(params).__name__}")
            for i, item in enumerate(params):
                if isinstance(item, str):
                    item = _without_comments(item, refuse_unclosed=True)
                    try:
                        pairs.append(_parse_c_param(item))
                    except ValueError as exc:
                        hint = _dtype_hint(item)
                        if hint is None:
                            raise
                        raise ValueError(f"{exc_text(exc)}; {hint}") from None
                    texts.append(_default_text(item))
                    continue
                try:
                    pairs.append((_spec_from_object(item), None))
                    texts.append(None)
                except (TypeError, ValueError) as exc:
                    raise type(exc)(f"parameter {i} ({shown_value(item, True)}): "
                                    f"{exc_text(exc)}") from None
        self._build([p[0] for p in pairs], [p[1] for p in pairs])
        self._set_defaults(texts)

    cdef _build(self, list specs, list names):
        cdef Py_ssize_t n = len(specs), i, cur = 0
        # One allocation holds the plan and its columns, largest alignment first:
        # params[n] | offsets[n] | sizes[n] | gaps[2n] (uint16) | codes[n] (uint8).
        # At least KERNARG_INLINE_ARGS rows, so that the sizes column can be copied into an
        # Arena's sizes with one fixed-size copy.
        cdef size_t m = max(n, KERNARG_INLINE_ARGS)
        cdef size_t per_param = sizeof(Param) + 4 * sizeof(uint16_t) + sizeof(uint8_t)
        cdef char* mem = <char*>malloc(m * per_param)
        if mem == NULL:
            raise MemoryError()
        memset(mem, 0, m * per_param)
        free(self._params)
        params = <Param*>mem
        offsets = <uint16_t*>(mem + m * sizeof(Param))
        sizes = offsets + m
        gaps = sizes + m
        codes = <uint8_t*>(gaps + 2 * m)
        self._params = params
        self._offsets = offsets
        self._sizes = sizes
        self._gaps = gaps
        self._codes = codes
        self._ngaps = 0
        plains = [_param_fields(s) for s in specs]     # Param.fields' pairs in one allocation
        cdef Py_ssize_t npairs = sum([len(plain[0]) for plain in plains if plain is not None])
        free(self._fields)
        self._fields = <uint16_t*>malloc(max(npairs, 1) * 2 * sizeof(uint16_t))
        if self._fields == NULL:
            raise MemoryError()
        cdef uint16_t* pairs = self._fields
        for i in range(n):
            s = specs[i]
            start = cur
            cur = (cur + s.align - 1) // s.align * s.align
            if cur != start and cur <= KERNARG_MAX_PARAM_BYTES:
                gaps[2 * self._ngaps] = <uint16_t>start
                gaps[2 * self._ngaps + 1] = <uint16_t>(cur - start)
                self._ngaps += 1
            params[i].code = s.code
            params[i].elem = s.elem
            params[i].count = s.count
            params[i].size = s.size
            params[i].align = s.align
            params[i].offset = cur
            params[i].pointee_kind = _pointee_char(s.pointee_kind)
            params[i].pointee_size = s.pointee_size
            params[i].is_const = s.is_const
            params[i].any_sign = s.any_sign
            params[i].ctypes_type = (<PyTypeObject*>s.struct
                                     if s.code == C_STRUCT and isinstance(s.struct, type)
                                     else NULL)
            params[i].np_dtype = NULL
            if (s.code == C_STRUCT and isinstance(s.struct, np.dtype)
                    and s.struct.itemsize == s.size and npvoid_data_offset() >= 0):
                params[i].np_dtype = <PyObject*>s.struct
            params[i].fields = NULL
            plain = plains[i]
            if plain is not None:
                params[i].fields = pairs
                params[i].nfields = len(plain[0])
                params[i].field_names = <PyObject*>plain[1] if plain[1] is not None else NULL
                params[i].dict_fields = plain[2]
                params[i].zero_first = plain[3]
                for code_offset in plain[0]:
                    pairs[0], pairs[1] = code_offset
                    pairs += 2
            codes[i] = <uint8_t>s.code
            offsets[i] = <uint16_t>min(cur, KERNARG_MAX_PARAM_BYTES)
            cur += s.size
            if cur <= KERNARG_MAX_PARAM_BYTES:
                sizes[i] = <uint16_t>s.size
        if cur > KERNARG_MAX_PARAM_BYTES:
            raise ValueError(f"the parameters take {cur} bytes, more than CUDA's limit of "
                             f"{KERNARG_MAX_PARAM_BYTES} bytes")
        self._n = n
        self._nbytes = cur
        self._fits_arena = n <= KERNARG_INLINE_ARGS and cur <= KERNARG_INLINE_BYTES
        self._names = tuple(names)
        self._default_texts = (None,) * n
        self._defaults = None
        self._first_default = n
        self._types = tuple(s.text for s in specs)
        self._structs = tuple(s.struct for s in specs)
        self._records = tuple(s.record for s in specs)
        self._field_names = tuple(None if plain is None else plain[1] for plain in plains)

    @classmethod
    def from_ptx(cls, ptx, kernel_name):
        """The layout the compiler emitted for ``kernel_name`` in ``ptx``.

        PTX names each parameter's size and alignment but not always its C type: ``.f32``/
        ``.f64`` become float/double; ``.sN``/``.uN`` become N-bit ints taking either sign's
        range (NVVM declares an ``int`` parameter ``.u32``), stored as two's complement;
        ``.u64`` also accepts a pointer; and ``.b8`` arrays are opaque bytes of that size
        (bytes, ctypes or numpy values of exactly that size).
        """
        ptx = ptx_text(ptx, "Signature.from_ptx")
        if not isinstance(kernel_name, str):
            raise TypeError(f"Signature.from_ptx: kernel_name must be a str, got "
                            f"{type(kernel_name).__name__}")
        specs, names = _parse_ptx_entry(ptx, kernel_name)
        cdef Signature sig = cls.__new__(cls)
        sig._build(specs, names)
        return sig

    @classmethod
    def from_source(cls, source, kernel_name, options=(), *, arch=None, headers=None):
        """Compile ``source`` with NVRTC and read ``kernel_name``'s declaration from it.

        Parameters whose types kernarg knows are typed from the declaration, and so are
        structs the source defines that kernarg can lay out (their fields take a dict or a
        tuple); others take size and alignment from the compiled PTX. The declared layout is
        checked against the PTX. ``kernel_name`` may name a template instantiation
        (``'saxpy<float>'``) or a namespaced kernel (``'ns::kern'``): NVRTC instantiates it, and
        the template's arguments are substituted into its declaration. ``headers`` maps
        include names to header texts the source may ``#include``; the declaration may be in
        one. A kernel declared nowhere in these texts (a file included with ``-I``, a macro)
        takes the PTX's layout, with no names. Default arguments that are not literals are
        evaluated by NVRTC in one more compilation, run only when there are any (see
        :attr:`defaults`).
        """
        from kernarg._nvrtc import declaration_text, normalize_headers

        headers = normalize_headers(headers)
        ptx, entry, _ = compile_kernel(source, kernel_name, options, arch, headers)
        return cls._from_source_and_ptx(declaration_text(source, headers), kernel_name, ptx,
                                        entry, _evaluator(source, options, arch, headers))

    @classmethod
    def _from_source_and_ptx(cls, source, kernel_name, ptx, entry=None, evaluate=None):
        """from_source with the PTX already compiled (Kernel.from_source compiles once);
        ``entry`` is the kernel's PTX entry name when NVRTC lowered it. ``evaluate``: None, or
        the ``(source, compile)`` of _evaluator, to have the compiler evaluate the default
        arguments that are not literals."""
        source = _without_comments(source)
        source = _without_dead_branches(source, _without_comments(source, True, True))
        try:
            ptx_specs = _parse_ptx_entry(ptx, entry or kernel_name,
                                         _inline_namespaces(source))[0]
        except LookupError as exc:
            name = _split_kernel_name(kernel_name)[0]
            if entry is not None:
                raise
            # What comes before each `name(` since the last ; { or }: a declaration's
            # specifiers, or a statement's start (one pass: linear in the source).
            heads = [m.group(1) for m in re.finditer(
                r"(?:^|[;{}])([^;{}]*?)(?<!\w)" + re.escape(name) + r"\s*\(", source)]
            for head in heads:
                template = re.search(r"\btemplate\s*<", head)
                if template is not None and "__global__" in head[template.end():]:
                    raise LookupError(f"{exc}; {name!r} is a template: name an instantiation, "
                                      f"such as '{name}<float>'") from None
            words = [set(re.findall(r"\w+", h)) for h in heads
                     if not h.rstrip().endswith((":", "."))]    # not ns::name(, x.name(
            if (any("__device__" in w for w in words)
                    and not any("__global__" in w for w in words)):
                raise LookupError(f"{exc}; {name!r} is a __device__ function, which a kernel "
                                  "calls; only __global__ functions are launched") from None
            raise
        try:
            decls = _find_declarations(source, kernel_name)
        except LookupError:
            # Compiled, but not declared in this text: the kernel comes from an included
            # header or a macro. The PTX's layout is the compiler's own, so take it (names
            # unknown; ints of either sign, .u64 an int or a pointer).
            return _new_signature(cls, ptx_specs, [None] * len(ptx_specs))
        # The text the typedefs and structs are read from: without what string and character
        # literals hold (a "typedef int real;" in a string declares nothing).
        code = _without_comments(source, True, True)
        aliases = _source_aliases(code)
        if len({spaces for _, _, spaces, _ in decls}) > 1:
            # Kernels of one name in several namespaces, the name not saying which: their
            # names and defaults may differ, so take the PTX's own types (names unknown).
            return _new_signature(cls, ptx_specs, [None] * len(ptx_specs))
        # (Names looked up from the kernel's namespace first.)
        decls = [(_substitute_aliases(d, aliases, "::".join(p for p in spaces if p)), d,
                  is_definition, special) for d, is_definition, spaces, special in decls]
        structs = _SourceStructs(code, aliases)
        groups = {}
        for d in decls:
            groups.setdefault(_declared_types(d[0]), []).append(d)
        if len(groups) > 1:
            # Declarations of different parameter types: overloads, or the branches of an
            # #ifdef. Where only one of them can be what the PTX holds (its layout, and floats
            # where the PTX has floats), it is the one compiled; else the source alone does not
            # say which, so take the PTX's own types (names unknown).
            fitting = [g for g in groups.values() if _fits_ptx(g[0][0], ptx_specs, structs)]
            if len(fitting) != 1:
                return _new_signature(cls, ptx_specs, [None] * len(ptx_specs))
            decls = fitting[0]
        # The names are the definition's (a prototype may leave them out, or use others), and
        # an explicit specialization's before the template's: it is the code compiled.
        decl, written = max(decls, key=lambda d: (d[3], d[2]))[:2]
        if _DIRECTIVE_LINE.search(written):
            # `#if` inside the parameter list: which parameters the compiler saw depends on
            # macros kernarg does not evaluate, so the PTX's layout it is (names unknown).
            return _new_signature(cls, ptx_specs, [None] * len(ptx_specs))
        pieces = [] if decl.strip() in ("", "void") else _split_params(decl, True)
        if len(pieces) != len(ptx_specs):
            raise ValueError(f"{kernel_name}: the declaration has {len(pieces)} parameters but "
                             f"the PTX has {len(ptx_specs)}")
        originals = pieces if written is decl else _split_params(written, True)
        if len(groups) > 1:
            structs = _SourceStructs(code, aliases)     # (not as _fits_ptx left it: no paths)
        specs, names, declared = _declared_specs(pieces, originals, ptx_specs, structs,
                                                 kernel_name)
        asked, extents = set(), {}
        for _ in range(_EXTENT_ROUNDS if evaluate is not None else 0):
            # Array extents that are not literals (`float v[K]`, K a constant or a macro):
            # the compiler's to evaluate, in one more compilation; the structs holding them
            # are laid out again with its answers.
            wanted = {q: how for q, how in structs.wanted.items() if q not in asked}
            if not wanted:
                break
            asked.update(wanted)
            found = _evaluate_extents(evaluate[0], kernel_name, wanted, evaluate[1])
            if not found:
                break
            extents.update(found)
            structs = _SourceStructs(code, aliases, extents=extents)
            specs, names, declared = _declared_specs(pieces, originals, ptx_specs, structs,
                                                     kernel_name)
        if evaluate is not None:
            _struct_initials(specs, declared, evaluate, kernel_name)
        cdef Signature sig = cls.__new__(cls)
        sig._build(specs, names)
        pieces = _declared_defaults([d[1] for d in decls], len(specs))
        texts = [None if p is None else _default_text(p) for p in pieces]
        evaluated = None
        if evaluate is not None:
            # The trailing defaults that are not literals: the compiler's to evaluate.
            wanted = {}
            for i in range(len(specs) - 1, -1, -1):
                if texts[i] is None:
                    break
                if _default_value(texts[i]) is _NOT_LITERAL:
                    wanted[i] = (_declared_type(pieces[i]), texts[i], specs[i],
                                 _evaluation(specs[i]))
            if wanted:
                evaluated = _evaluate_defaults(evaluate[0], kernel_name, wanted, evaluate[1])
        sig._set_defaults(texts, evaluated)
        sig._defaults_compiled = evaluate is not None
        return sig

    def __len__(self):
        return self._n

    @property
    def offsets(self):
        """Byte offset of each parameter."""
        return tuple([self._params[i].offset for i in range(self._n)])

    @property
    def sizes(self):
        """Size in bytes of each parameter."""
        return tuple([self._params[i].size for i in range(self._n)])

    @property
    def alignments(self):
        """Alignment in bytes of each parameter."""
        return tuple([self._params[i].align for i in range(self._n)])

    @property
    def nbytes(self):
        """Size of the parameter area (CU_LAUNCH_PARAM_BUFFER_SIZE)."""
        return self._nbytes

    @property
    def names(self):
        """Parameter names (None where the declaration gave none)."""
        return self._names

    @property
    def types(self):
        """The parameter types as declared."""
        return self._types

    @property
    def records(self):
        """Per parameter, the numpy dtype whose fields a dict or tuple for it fills: a struct
        parameter's layout (given as a dtype or ctypes type, or read from the kernel's source
        by ``from_source``), field names and offsets as the compiler lays them out; None for
        other parameters and for structs ctypes builds. In a struct read from the source, a
        pointer field is ``uint64`` and ``__nv_bfloat16`` ``uint16`` (their metadata say
        which)."""
        return self._records

    cdef _set_defaults(self, list texts, dict evaluated=None):
        """Record each parameter's default argument as written (``texts``, None: none), and
        the values of the trailing ones kernarg can read (literals, or those the compiler
        ``evaluated``: ``{index: value}``): a call may leave those out, last first. A default
        with no value ends them: the parameters before it must be passed."""
        cdef Py_ssize_t i, first = self._n
        values = []
        self._stop = None
        for i in range(self._n - 1, -1, -1):
            if evaluated and i in evaluated:
                value = evaluated[i]
            elif texts[i] is None:
                break
            else:
                value = _as_parameter(&self._params[i], _default_value(texts[i]))
            if value is _NOT_LITERAL or value is _NOT_DECODED or value is _ADDRESS:
                self._stop = value
                break
            values.append(value)
            first = i
        values.reverse()
        self._default_texts = tuple(texts)
        self._defaults = tuple(values) if values else None
        self._first_default = first

    @property
    def defaults(self):
        """``{parameter index: value}`` of the default arguments a call may leave out (from
        ``from_source``, or a signature string that gives them: ``"int n = 4"``), converted
        to their parameters' types as C++ converts them. A literal is read by kernarg;
        ``from_source`` has NVRTC evaluate any other constant expression (a struct's value is
        its bytes, a vector's a tuple of its lanes, an 8-, 6- or 4-bit float's the float its
        bits stand for). A default with no value (not a constant expression, not a literal in
        a signature string, a literal C++ does not convert to the type or out of its own
        type's range, ``float x = 1e39`` or ``1e999``, a NaN of another code than kernarg
        writes, or an address the driver fixes when it loads the module, ``= twice`` or
        ``= table + 1``) is in :attr:`default_texts` only, and so are those before it."""
        if self._defaults is None:
            return {}
        return {self._first_default + i: v for i, v in enumerate(self._defaults)}

    @property
    def default_texts(self):
        """Per parameter, its default argument as written, or None."""
        return self._default_texts

    def __repr__(self):
        params = ", ".join(
            _declarator(t, n) + (f" = {d}" if d is not None else "")
            for t, n, d in zip(self._types, self._names, self._default_texts))
        return f"kernarg.Signature({params!r})"

    def __reduce__(self):
        # Pickled (and copied) as what was read to lay it out: per parameter, the fields of
        # its _Spec, then the names and the defaults as read. What made it (a C text, dtypes,
        # PTX, a source NVRTC compiled) is not read again: the unpickled signature is this
        # one even where its maker is not at hand (no NVRTC, a dtype's module), and a struct
        # given as a ctypes type is pickled by reference, as pickle pickles classes.
        cdef Py_ssize_t i
        cdef Param* p
        specs = []
        for i in range(self._n):
            p = &self._params[i]
            specs.append((p.code, p.size, p.align, self._types[i], p.elem, p.count,
                          _pointee_kind(p.pointee_kind), p.pointee_size, bool(p.is_const),
                          self._structs[i], self._records[i], bool(p.any_sign)))
        return (_unpickle_signature,
                (tuple(specs), self._names, self._default_texts, self._defaults,
                 self._first_default, self._defaults_compiled, _STOPS.index(self._stop)))


# What Signature._stop may be, by its index in a pickle.
_STOPS = (None, _NOT_LITERAL, _NOT_DECODED, _ADDRESS)


cdef str _pointee_kind(char kind):
    """Param.pointee_kind as its spec's kind (the inverse of _pointee_char)."""
    return "c8" if kind == ord("c") else (chr(kind) if kind else "")


def _unpickle_signature(tuple specs, tuple names, tuple default_texts, defaults,
                        Py_ssize_t first_default, bint defaults_compiled, int stop):
    """A pickled Signature (see Signature.__reduce__), laid out again from its specs."""
    cdef Signature sig = Signature.__new__(Signature)
    sig._build([_Spec(code, size, align, text, elem=elem, count=count, pointee_kind=kind,
                      pointee_size=psize, is_const=const, struct=layout, record=record,
                      any_sign=any_sign)
                for (code, size, align, text, elem, count, kind, psize, const, layout, record,
                     any_sign) in specs], list(names))
    sig._default_texts = default_texts
    sig._defaults = defaults
    sig._first_default = first_default
    sig._defaults_compiled = defaults_compiled
    sig._stop = _STOPS[stop]
    return sig


# Signature.pack is a C function of CPython's METH_FASTCALL | METH_KEYWORDS convention, put on
# the class below, as kernarg.pack is (see _handler.pyx): not a def, whose keyword-only
# parameters cost Cython's generic argument parser on every call.

cdef object _signature_pack_fastcall(object self, PyObject** args, Py_ssize_t nargs,
                                     PyObject* kwnames):
    """``Signature.pack(args, *, stream=None, device=None)``; ``self`` is a Signature (the
    method descriptor checked it). On a free-threaded build it takes kernarg's critical
    section itself (the guard leaves it unwrapped: see the module's end); the usual call,
    sig.pack(args), only once an argument needs it (_pack_typed), as kernarg.pack does. The
    signature's columns need none: only construction writes them (__init__ runs once)."""
    cdef LazySection lazy
    if KERNARG_GUARDED_BUILD and nargs == 1 and kwnames == NULL:
        lazy.held = False
        try:
            return _signature_pack(<Signature>self, <object>args[0], None, None, &lazy)
        finally:
            leave_lazily(&lazy)
    return in_section(_signature_pack_call, <PyObject*>self, args, nargs, kwnames)


cdef object _signature_pack_call(PyObject* self, PyObject** args, Py_ssize_t nargs,
                                 PyObject* kwnames):
    cdef PyObject* given[3]
    if nargs == 1 and kwnames == NULL:
        return _signature_pack(<Signature>self, <object>args[0], None, None, NULL)
    parse_pack_call("Signature.pack", args, nargs, kwnames, given)
    return _signature_pack(<Signature>self, <object>given[0],
                           or_default(given[1], None),
                           or_default(given[2], None), NULL)


cdef inline ParamBlock _signature_pack(Signature self, object args, object stream,
                                       object device, LazySection* lazy):
    """``lazy``: as for _pack_typed (``stream`` and ``device`` are then None, which need no
    section: see kernarg._handler._pack)."""
    cdef tuple t = as_arg_tuple(args, "Signature.pack")
    t = with_defaults(self, tuple_items(t), PyTuple_GET_SIZE(t)) or t
    cdef uint64_t handle = stream_handle(stream)
    cdef ParamBlock blk
    if self._fits_arena and PyTuple_GET_SIZE(t) == self._n:
        # typed_block_items' common case, inline: a call here costs more than these lines.
        blk = arena_block(t, self._n)
        memcpy(blk.st.sizes, self._sizes, KERNARG_INLINE_ARGS * sizeof(uint16_t))
        if device is not None:
            set_launch_device(&blk.st, device_ordinal(device))
        _pack_typed(self, &blk.st, tuple_items(t), self._n, handle, False, lazy)
        return blk
    return typed_block_items(self, tuple_items(t), PyTuple_GET_SIZE(t), t, handle,
                             device_ordinal(device), lazy)


cdef const char* _SIGNATURE_PACK_DOC = b"""\
pack($self, args, *, stream=None, device=None)
--

Pack ``args`` as this signature's parameter types.

Ints are range-checked against the declared width, floats rounded to float, double,
``__half`` or ``__nv_bfloat16`` (to nearest even), vectors built from sequences, structs
from numpy/ctypes values, dicts or tuples, and pointers from anything
:func:`kernarg.pack` accepts as a pointer (plus int addresses and None), with the
array's element type checked against the pointee and read-only arrays refused for
non-const pointers. ``stream`` and ``device`` are as for :func:`kernarg.pack`.

Returns
-------
ParamBlock
"""
cdef PyMethodDef _signature_pack_def
kernarg_fastcall_def(&_signature_pack_def, "pack", <void*>_signature_pack_fastcall,
                     _SIGNATURE_PACK_DOC)
kernarg_install_method(<PyTypeObject*>Signature, &_signature_pack_def)


cdef ParamBlock typed_block_items(Signature sig, PyObject** items, Py_ssize_t n, object keep,
                                  uint64_t stream, int device, LazySection* lazy):
    """A new ParamBlock with the ``n`` objects at ``items`` packed as ``sig``'s types.
    ``keep``: as for kernarg._handler.untyped_block_items (None: the block must not outlive
    the call). ``stream``: the launch stream's handle; ``device``: the launch device's
    ordinal, or -1 for no device check; ``lazy``: as for _pack_typed."""
    cdef ParamBlock blk
    cdef tuple full
    if n != sig._n:
        full = with_defaults(sig, items, n)
        if full is not None:    # the block keeps it: a graph then needs no borrowed items
            return typed_block_items(sig, tuple_items(full), sig._n, full, stream, device,
                                     lazy)
    cdef bint in_arena = sig._fits_arena and n == sig._n
    if in_arena:
        # The common case: an Arena holds everything, and the sizes column (padded to
        # KERNARG_INLINE_ARGS rows) goes over in one fixed-size copy.
        blk = arena_block(keep, sig._n)
        memcpy(blk.st.sizes, sig._sizes, KERNARG_INLINE_ARGS * sizeof(uint16_t))
    else:
        blk = ParamBlock.__new__(ParamBlock)
        block_init(blk, keep, n, sig._nbytes)
    set_launch_device(&blk.st, device)
    _pack_typed(sig, &blk.st, items, n, stream, not in_arena, lazy)
    return blk


cdef tuple with_defaults(Signature sig, PyObject** items, Py_ssize_t n):
    """The ``n`` arguments at ``items`` followed by the default arguments of the parameters
    after them; None where those are not all known (or nothing was left out)."""
    if sig._defaults is None or not sig._first_default <= n < sig._n:
        return None
    return tuple_of(items, n) + sig._defaults[n - sig._first_default:]


cdef int pack_typed_items(Signature sig, BlockState* st, PyObject** items, Py_ssize_t n,
                          uint64_t stream, LazySection* lazy) except -1:
    """Pack the ``n`` arguments at ``items`` into ``st``, a fresh state over an Arena's storage
    whose sizes column the caller has copied from ``sig._sizes`` (as typed_block_items does for
    a block, ``sig._fits_arena`` and ``n == sig._n``). ``lazy``: as for _pack_typed."""
    return _pack_typed(sig, st, items, n, stream, False, lazy)


cdef int pack_typed_state(Signature sig, BlockState* st, tuple t, uint64_t stream) except -1:
    """Pack ``t`` as ``sig``'s parameter types into ``st`` (fresh, room for len(t) arguments).
    ``stream``: the launch stream's handle."""
    return _pack_typed(sig, st, tuple_items(t), PyTuple_GET_SIZE(t), stream, True, NULL)


cdef inline int _pack_typed(Signature sig, BlockState* st, PyObject** items, Py_ssize_t n,
                            uint64_t stream, bint copy_sizes, LazySection* lazy) except -1:
    """Pack the ``n`` arguments at ``items`` as ``sig``'s parameter types into ``st``.
    ``lazy``: NULL where the caller holds kernarg's section (or the GIL); else (Signature.pack
    on a free-threaded build) the section to enter at the first argument the fast paths below
    do not place: they read only ``sig``'s columns, the per-type cache and the last memory
    resource (under their sequence locks: _handler.pxd's cache_view, buffer_known), and write
    only ``st``."""
    if n != sig._n:
        enter_lazily(lazy)
        raise TypeError(_count_message(sig, n))
    if st.capacity < sig._nbytes:
        raise ValueError(f"the parameters need {sig._nbytes} bytes, more than the "
                         f"{st.capacity} bytes the caller's block holds")
    st.nbytes = sig._nbytes
    cdef Py_ssize_t i, j
    cdef Param* p
    cdef char* dst
    cdef PyObject* item
    cdef PyTypeObject* tp
    cdef TypeInfo* info
    cdef TypeInfo copy
    cdef getter_t mr_getter
    cdef void* mr_closure
    cdef int code, got, found
    cdef long long v
    cdef double d
    cdef uint32_t u32
    cdef float f32
    cdef char** src
    # Locals, not fields: stores through char* could alias the fields, forcing reloads.
    cdef char* data = st.data
    cdef void** argv = st.argv
    cdef uint16_t* sizes = st.sizes
    cdef Param* params = sig._params
    if not copy_sizes:
        pass
    elif n <= 16:     # short lists: a few moves beat a libc call
        for i in range(n):
            sizes[i] = sig._sizes[i]
    else:
        memcpy(sizes, sig._sizes, n * sizeof(uint16_t))
    for i in range(sig._ngaps):
        memset(data + sig._gaps[2 * i], 0, sig._gaps[2 * i + 1])
    i = 0
    while i < n:
        item = items[i]
        tp = Py_TYPE_P(item)
        if tp == &PyLong_Type:
            if i + 1 < n and Py_TYPE_P(items[i + 1]) == &PyLong_Type:
                j = kernarg_typed_int_run_call(items, i, n, sig._codes, sig._offsets, data,
                                               argv, C_I32, C_I64, _UNSIGNED64)
            else:
                j = kernarg_typed_int_run(items, i, n, sig._codes, sig._offsets, data, argv,
                                          C_I32, C_I64, _UNSIGNED64)
            if j != i:
                i = j
                continue
        p = &params[i]
        dst = data + p.offset
        argv[i] = dst
        code = p.code
        # Fast paths for exact ints and floats; everything else (and every error) goes to
        # the general converters in _put_typed below.
        if tp == &PyLong_Type:
            # The int run above took every exact int that fits an int, long long, unsigned long
            # long or pointer parameter: here, the other widths.
            if kernarg_small_int(item, &v):
                if code == C_U32:
                    if v == <uint32_t>v:
                        u32 = <uint32_t>v
                        memcpy(dst, &u32, 4)
                        i += 1
                        continue
                elif code <= C_U16:        # bool (0 or 1), and the 8- and 16-bit ints
                    if _INT_MIN[code] <= v <= _INT_MAX[code]:
                        _store_int(dst, v, p.size)
                        i += 1
                        continue
                elif C_F16 <= code <= C_F64 and -_EXACT_IN_DOUBLE <= v <= _EXACT_IN_DOUBLE:
                    # Exact in a double, so narrowing it is the one rounding C makes.
                    _store_float(code, <double>v, dst)
                    i += 1
                    continue
            elif code == C_I64 or code == C_U64 or code == C_U64_OR_PTR:
                # |v| >= 2**60 (random seeds, bit masks): a long long's, or 2**63 .. 2**64-1
                # for the unsigned parameters; the rest (a negative for an unsigned one, past
                # 64 bits) to the general path's refusal, or its reading of any sign.
                got = kernarg_int64_bits(item, &v)
                if (got == 1 and (code == C_I64 or v >= 0)) or (got == 2 and code != C_I64):
                    memcpy(dst, &v, 8)
                    i += 1
                    continue
        elif tp == &PyFloat_Type:
            if code == C_F32:
                f32 = <float>PyFloat_AS_DOUBLE_P(item)
                memcpy(dst, &f32, 4)
                i += 1
                continue
            if C_F16 <= code <= C_F64:
                _store_float(code, PyFloat_AS_DOUBLE_P(item), dst)
                i += 1
                continue
        elif tp == &PyBool_Type and code <= C_F64:
            # As the int it is (C converts a bool so): 1 or 0 of the parameter's type.
            if code <= C_U64:
                _store_int(dst, item == Py_True, p.size)
            else:
                _store_float(code, item == Py_True, dst)
            i += 1
            continue
        elif code <= C_F64:
            # numpy scalars, read in place, and ctypes numbers, copied under the object's
            # lock (with no section, where their type is in the cache: cache_view); int and
            # float subclasses (an IntEnum, an IntFlag).
            info = view_or_lookup(_cache, item, i, &copy, lazy)
            got = _cached_number(code, item, info, &d, &v)
            if _store_number(code, got, d, v, dst):
                i += 1
                continue
        elif code == C_POINTER or code == C_U64_OR_PTR:
            if item == Py_None:
                memset(dst, 0, 8)
                i += 1
                continue
            if tp != &PyLong_Type:
                info = view_or_lookup(_cache, item, i, &copy, lazy)
                if info.kind == KIND_BUFFER:
                    # The C getter behind Buffer.handle, called directly (see classify); with
                    # no section, as in kernarg.pack (pack_items says when).
                    if info.getter == NULL:
                        enter_lazily(lazy)
                    mr_getter, mr_closure = info.mr_getter, info.mr_closure
                    found = buffer_address(item, info, &v)
                    if found < 0:
                        enter_lazily(lazy)
                        try:
                            name_raised(KIND_BUFFER, <object>item, i)
                        except Exception as exc:
                            _name_the_parameter(sig, i, exc)
                    if found:
                        memcpy(dst, &v, 8)
                        if not buffer_known(st, mr_getter, mr_closure, item, _mrc):
                            enter_lazily(lazy)
                            try:
                                check_buffer(st, mr_getter, mr_closure, <object>item, i)
                            except Exception as exc:
                                _name_the_parameter(sig, i, exc)
                        i += 1
                        continue
                elif kernarg_unlikely(info.kind >= KIND_DRIVER_PTR):
                    # The pointer kinds but a Buffer's: the protocols (a CUDA Array Interface,
                    # DLPack, its C exchange API) and the library adapters are read with no
                    # section (_interop's pointer_of enters it for the rest).
                    try:
                        _put_pointer_lazily(sig, p, st, i, info, <object>item, dst,
                                            stream, lazy)
                    except Exception as exc:
                        enter_lazily(lazy)
                        _name_the_parameter(sig, i, exc)
                    i += 1
                    continue
                elif info.kind == KIND_CTYPES and info.num_kind == CTYPES_POINTER and \
                        info.size == 8:
                    # A ctypes pointer that keeps no object alive (an address given as an
                    # int: c_void_p(ptr), numba's device_ctypes_pointer), or only other
                    # pointers (ctypes.cast's): its value, copied under the object's lock;
                    # one that keeps anything else has its target checked (_put_pointer).
                    if copy_ctypes_pointers(dst, item, 8):
                        i += 1
                        continue
        elif tp == p.ctypes_type:
            # An instance of the struct's own ctypes type: its bytes, copied under the object's
            # lock (with no section, where the type is in the cache); one with pointer fields
            # where it keeps no object alive (its pointers given as ints) or only other
            # pointers (fields set to ctypes.cast's), else its targets are checked
            # (_put_struct).
            info = view_or_lookup(_cache, item, i, &copy, lazy)
            if info.kind == KIND_CTYPES and info.size == p.size:
                if info.num_kind == 0:
                    kernarg_ctypes_copy(dst, item, info.offset, p.size)
                    i += 1
                    continue
                if info.num_kind == CTYPES_HOLDS_POINTERS:
                    if copy_ctypes_pointers(dst, item, p.size):
                        i += 1
                        continue
        elif tp == _NPVOID and p.np_dtype != NULL:
            # A numpy.void of the struct's own dtype (the very object): its bytes, copied from
            # where its data pointer points, as numpy's tobytes() copies them (_interop's
            # npvoid_data_offset has the layout). numpy holds no lock over them, nor does this.
            src = <char**>(<char*>item + sizeof(PyVarObject))
            if (<PyObject**>(src + 1))[0] == p.np_dtype:
                memcpy(dst, src[0], p.size)
                i += 1
                continue
        elif tp == &PyTuple_Type and p.fields != NULL:
            # A vector's lanes (float2, int4, half2, ...) or the fields of a struct whose fields
            # are all numbers (Param.fields) from a tuple of numbers (_place_numbers: ints,
            # floats, bools, numpy scalars, ...), one by one as the general path (_put_vector,
            # _put_record) converts them; anything else, or a part that does not fit, goes
            # there.
            if PyTuple_GET_SIZE_P(item) == p.nfields:
                if p.zero_first:
                    memset(dst, 0, p.size)
                if _place_numbers((<PyTupleObject*>item).ob_item, p.nfields, p.fields, dst, i,
                                  lazy, NULL):
                    i += 1
                    continue
        elif tp == &PyDict_Type and p.dict_fields:
            # Such a struct from a dict of them, by field name.
            if _place_dict(p, item, dst, i, lazy):
                i += 1
                continue
        elif code == C_VECTOR and p.count == 2 and p.elem >= C_F16:
            # A complex number (numpy's too) for a pair of floats (cuComplex is float2): its
            # parts, as the general path (_put_vector) converts them.
            if tp == &PyComplex_Type:
                _store_float(p.elem, (<PyComplexObject*>item).cval.real, dst)
                _store_float(p.elem, (<PyComplexObject*>item).cval.imag,
                             dst + _scalar_size(p.elem))
                i += 1
                continue
            info = view_or_lookup(_cache, item, i, &copy, lazy)
            if info.kind == KIND_INLINE and info.num_kind == ord("c") and \
                    _complex_lanes(p.elem, <char*>item + info.offset, info.size, dst):
                i += 1
                continue
        elif code == C_SMALL_FLOAT and p.count == 1:
            # A scalar of the format's own ml_dtypes type (float8_e4m3fn for __nv_fp8_e4m3):
            # its byte, read in place, as the general path takes its bits.
            info = view_or_lookup(_cache, item, i, &copy, lazy)
            if info.kind == KIND_INLINE and info.num_kind == _SMALL_KIND[p.elem] and \
                    info.size == 1:
                dst[0] = (<char*>item + info.offset)[0]
                i += 1
                continue
        # The general converters: they look types up, and call back into Python.
        enter_lazily(lazy)
        try:
            _put_typed(sig, st, p, i, <object>item, dst, stream)
        except Exception as exc:
            _name_the_parameter(sig, i, exc)
        i += 1
    return 0


cdef str _count_message(Signature sig, Py_ssize_t n):
    """The refusal of ``n`` arguments for ``sig``: its parameters, and which are missing (the
    first three; not those whose defaults would fill in) or how many are too many."""
    params = ", ".join([_declarator(t, name) for t, name in zip(sig._types, sig._names)])
    if n < sig._n:
        # Those from _first_default on have defaults, which fill in unless a path packs
        # without them (then all are named).
        stop = sig._first_default if n < sig._first_default else sig._n
        missing = [_param_name(sig, i) for i in range(n, min(stop, n + 3))]
        more = ", ..." if stop - n > 3 else ""
        tail = f": no value for {', '.join(missing)}{more}"
    else:
        tail = f": {n - sig._n} more than it has parameters"
    cdef Py_ssize_t j = sig._first_default - 1     # the default that stops the others
    if n <= j < sig._n and sig._default_texts[j] is not None:
        tail += f" ({_param_name(sig, j)} has the default argument {sig._default_texts[j]!r}, "
        if _default_value(sig._default_texts[j]) is not _NOT_LITERAL:
            tail += ("a literal C++ does not convert to the parameter's type, or whose "
                     "conversion is undefined, or out of its own type's range)")
        elif sig._stop is _NOT_DECODED:
            tail += ("which NVRTC evaluated to bytes kernarg does not pass back exactly as a "
                     "value: an 8-, 6- or 4-bit float NaN of another code than the one "
                     "kernarg writes for NaN)")
        elif sig._stop is _ADDRESS:
            tail += ("which NVRTC evaluated to the address of a function or __device__ "
                     "variable: the driver fixes it only when it loads the module, so kernarg "
                     "cannot pass it for you; pass the address, e.g. from a __device__ "
                     "variable holding it, read through Kernel.get_global)")
        elif sig._defaults_compiled:
            tail += ("which NVRTC could not evaluate as a constant of the parameter's type: "
                     "a default kernarg passes must be a constant expression")
            record = sig.records[j]
            if record is not None and record.fields is not None and _has_struct_grid(record):
                # (_evaluation: only a constexpr copy of such a struct is right in NVRTC.)
                tail += (", and a struct holding an array of two dimensions or more of "
                         "structs with default member initializers must also have a constexpr "
                         "copy: NVRTC emits its value wrong otherwise")
            tail += ")"
        else:
            tail += ("which kernarg cannot evaluate: only literals, such as 4, 2.5f, true or "
                     "nullptr; from_source has NVRTC evaluate constant expressions)")
    return f"the kernel takes {sig._n} arguments ({params}), got {n}{tail}"


cdef int _name_the_parameter(Signature sig, Py_ssize_t i, object exc) except -1:
    """Re-raise ``exc`` (a value's own method raised, e.g. a hostile ``__index__``) so that its
    message starts with the parameter, keeping its class. kernarg's own errors already do, or
    (the array consumers', which know only the index) start with the argument: those get the
    parameter's name in front, keeping the exception itself and its traceback."""
    name = _param_name(sig, i)
    message = exc_text(exc)
    if message.startswith(name):
        raise exc
    args = exc.args
    if args and isinstance(args[0], str) and args[0].startswith(f"argument {i} ("):
        exc.args = (f"{name}: {args[0]}",) + args[1:]
        raise exc
    _reraise(exc, f"{name}: {type(exc).__name__}: {message}")


cdef str _param_name(Signature sig, Py_ssize_t i):
    return _describe_param(i, sig._names[i])


# ctypes scalar type codes (``_type_``) whose value a parameter of each kind takes, as it would
# take the same Python value: integers and bool (and char, void*) for integer parameters;
# integers, bool, float and double for floating-point ones. c_longdouble, strings, wide
# characters and py_object are not numbers a kernel parameter can hold.
_CTYPES_FOR_INT = frozenset("?bBhHiIlLqQcP")
_CTYPES_FOR_FLOAT = frozenset("?bBhHiIlLqQfd")


cdef object _ctypes_number(object value, bint for_float):
    """The Python number a ctypes scalar holds (``ctypes.c_int(3)`` -> 3; ``c_char(b"a")`` ->
    97; a null ``c_void_p`` -> 0), or None when ``value`` is not a ctypes scalar a parameter of
    that kind takes."""
    if not isinstance(value, ctypes._SimpleCData):
        return None
    code = getattr(type(value), "_type_", None)
    if code not in (_CTYPES_FOR_FLOAT if for_float else _CTYPES_FOR_INT):
        return None
    number = value.value
    if code == "c":
        return number[0]
    return 0 if number is None else number      # c_void_p holding NULL


cdef int _put_int(Signature sig, int code, Py_ssize_t i, object value, char* dst) except -1:
    cdef TypeInfo* info
    cdef long long v
    cdef uint64_t u
    cdef int overflow
    if Py_TYPE_P(<PyObject*>value) == &PyLong_Type and kernarg_small_int(<PyObject*>value, &v):
        pass
    else:
        if isinstance(value, float) or isinstance(value, complex) or isinstance(value, str):
            raise TypeError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: expected an int, "
                            f"got {type(value).__name__}")
        if isinstance(value, np.bool_):
            # 0 or 1, as the fast path reads it in place. numpy 2 took its __index__ away;
            # numpy 1.x's warns that it will.
            value = 1 if value else 0
        try:
            # As Python reads an index: the type's __index__ (not an instance attribute), and
            # an int subclass's own value (as untyped packing, numpy and ctypes take it).
            value = PyNumber_Index(value)
        except (AttributeError, TypeError) as exc:  # no __index__, or one refusing (numpy's)
            info = lookup_type(value, i) if code == C_U64 else NULL
            if info != NULL and info.kind == KIND_HANDLE:
                return handle_value(info, value, i, dst)      # a texture/surface object
            number = _ctypes_number(value, False)
            if number is None:
                # An __index__ that raised says why, which "expected an int" alone would hide.
                why = (f" (its __index__ raised {type(exc).__name__}: {exc_text(exc)})"
                       if hasattr(type(value), "__index__") else "")
                raise TypeError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: expected an "
                                f"int, got {type(value).__name__}{why}") from None
            value = PyNumber_Index(number)
        v = PyLong_AsLongLongAndOverflow(value, &overflow)
        if overflow:
            if code == C_U64 and 0 <= value < 2**64:
                u = value
                memcpy(dst, &u, 8)
                return 0
            lo, hi = _INT_RANGE[code] if code != C_BOOL else (0, 1)
            raise OverflowError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: "
                                f"{shown_value(value)} is outside {lo} .. {hi}")
    if not _int_fits(code, v):
        lo, hi = _INT_RANGE[code] if code != C_BOOL else (0, 1)
        raise OverflowError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: {v} is "
                            f"outside {lo} .. {hi}")
    _store_int(dst, v, _scalar_size(code))     # range-checked: the low bytes are the value
    return 0


cdef object _integer(object value, str what):
    """``value`` as a Python int, as the parameters that take any int of their width read it
    (__int128, and the PTX's sign-less integers): an int, a numpy or ctypes integer,
    numpy.bool_ as 0 or 1, anything else with __index__ (whose own errors propagate, for the
    caller to name). TypeError ``{what}: expected an int, got T`` for the rest, floats
    included."""
    if type(value) is int:
        return value
    if isinstance(value, np.bool_):
        return 1 if value else 0
    if not isinstance(value, (float, complex, str, bytes, np.floating, np.complexfloating)) \
            and value is not None:
        if hasattr(type(value), "__index__"):
            return PyNumber_Index(value)
        number = _ctypes_number(value, False)
        if number is not None:
            return PyNumber_Index(number)
    raise TypeError(f"{what}: expected an int, got {type(value).__name__}")


cdef int _put_int128(Signature sig, int code, Py_ssize_t i, object value, char* dst) except -1:
    """An `__int128` or `unsigned __int128` parameter: any int in its range (and what an
    integer parameter takes: numpy integers, ctypes integers, __index__), as its 16 bytes."""
    shown = "__int128" if code == C_I128 else "unsigned __int128"
    value = _integer(value, f"{_param_name(sig, i)} is {shown}")
    lo, hi = _INT128_RANGE[code]
    if not lo <= value <= hi:
        raise OverflowError(f"{_param_name(sig, i)} is {shown}: {shown_value(value)} is outside "
                            f"{lo} .. {hi}")
    raw = int.to_bytes(value, 16, "little", signed=code == C_I128)
    memcpy(dst, <char*>raw, 16)
    return 0


cdef int _put_int_any_sign(Signature sig, int code, Py_ssize_t i, object value,
                           char* dst) except -1:
    """An integer parameter known only by its width (from PTX): any value from the signed
    minimum to the unsigned maximum of that width, stored as its two's complement."""
    cdef Py_ssize_t size = _scalar_size(code)
    cdef object bits = 8 * size           # Python ints: 1 << 64 must not overflow
    cdef uint64_t u
    value = _integer(value, f"{_param_name(sig, i)} is {_CODE_NAMES[code]}")
    lo, hi = -(1 << (bits - 1)), (1 << bits) - 1
    if not lo <= value <= hi:
        raise OverflowError(f"{_param_name(sig, i)} is {'an' if bits == 8 else 'a'} {bits}-bit "
                            f"integer ({sig._types[i]}): {shown_value(value)} is outside "
                            f"{lo} .. {hi}")
    u = <uint64_t>(value & 0xFFFFFFFFFFFFFFFF)
    memcpy(dst, &u, size)                 # hosts are little-endian: the low bytes
    return 0


cdef inline void _store_int(char* dst, long long v, Py_ssize_t size) noexcept nogil:
    """The low ``size`` (1, 2, 4 or 8) bytes of ``v``, which are its value once range-checked
    (hosts are little-endian). Never reads past ``v``, unlike a general copy of ``size`` bytes."""
    if size == 8:
        memcpy(dst, &v, 8)
    elif size == 4:
        memcpy(dst, &v, 4)
    elif size == 2:
        memcpy(dst, &v, 2)
    else:
        dst[0] = <char>v


cdef void _store_half(int code, double d, char* dst) noexcept:
    """``d`` as a __half (C_F16) or __nv_bfloat16 at ``dst``, rounded to nearest even. Not
    inline: the rounding is long, and _store_float, which calls it, short enough for gcc to
    inline at each of its many callers."""
    cdef uint16_t h = kernarg_double_to_half(d) if code == C_F16 else \
        kernarg_double_to_bfloat16(d)
    memcpy(dst, &h, 2)


cdef inline void _store_float(int code, double d, char* dst) noexcept:
    cdef float f
    if code == C_F32:
        f = <float>d
        memcpy(dst, &f, 4)
    elif code == C_F64:
        memcpy(dst, &d, 8)
    else:
        _store_half(code, d, dst)


cdef double _real_number(object value) except? -1.0:
    """``value`` as a double, as every float-like parameter, field and lane reads it: anything
    with __float__ (floats, ints, numpy scalars), or a ctypes number by the value it holds.
    TypeError (no message: the caller names the parameter) for anything else, complex numbers
    included: numpy's complex64 has a __float__ that drops the imaginary part with only a
    warning. OverflowError for an int too large for a double."""
    if isinstance(value, (str, bytes, complex, np.complexfloating)) or value is None:
        raise TypeError
    try:
        return PyFloat_AsDouble(value)
    except TypeError:
        number = _ctypes_number(value, True)
        if number is None:
            raise
        return PyFloat_AsDouble(number)


# Ints up to 2**53 in magnitude are exact in a double: converting one to any float format
# through a double rounds once.
cdef long long _EXACT_IN_DOUBLE = 1LL << 53


cdef inline int _significand_bits(int code) noexcept:
    return 24 if code == C_F32 else 11 if code == C_F16 else 8 if code == C_BF16 else 53


def _rounded_int(n, int bits):
    """The int ``n`` rounded to ``bits`` significant bits (to nearest, ties to even): as C++
    converts an integer to a floating type of that significand, in one step. Through a double
    first, an int past 2**53 would be rounded twice (9223371761976868863 to a float: once to
    9223371761976868864.0, a tie, then down, where the exact value rounds up)."""
    m = -n if n < 0 else n
    excess = m.bit_length() - bits      # a Python int: the shifts below are Python's
    if excess <= 0:
        return n
    q = m >> excess
    r = m - (q << excess)
    half = 1 << (excess - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return q << excess if n >= 0 else -(q << excess)


cdef inline bint _int_past_a_double(object value):
    """Whether ``value`` is an int (or numpy integer) that converting through a double might
    round: any numpy integer here (the fast paths took the small ones), a Python int past
    2**53."""
    cdef long long v
    if PyLong_Check(value):
        return not (kernarg_small_int(<PyObject*>value, &v)
                    and -_EXACT_IN_DOUBLE <= v <= _EXACT_IN_DOUBLE)
    return isinstance(value, np.integer)


cdef int _put_float(Signature sig, int code, Py_ssize_t i, object value, char* dst) except -1:
    cdef double d
    if Py_TYPE_P(<PyObject*>value) == &PyFloat_Type:
        d = PyFloat_AS_DOUBLE_P(<PyObject*>value)
    else:
        if isinstance(value, ctypes._SimpleCData) and not (
                hasattr(type(value), "__float__") or hasattr(type(value), "__index__")):
            # A ctypes number (not one whose type converts itself), by the value it holds:
            # an integer past 2**53 is then rounded once below, as a Python int is.
            number = _ctypes_number(value, True)
            if number is not None:
                value = number
        if code != C_F64 and _int_past_a_double(value):
            value = _rounded_int(int(value), _significand_bits(code))
        try:
            d = _real_number(value)
        except TypeError:
            raise TypeError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: expected a real "
                            f"number, got {type(value).__name__}") from None
        except OverflowError:
            raise OverflowError(f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: "
                                f"{shown_value(value)} is too large for a double") from None
    _store_float(code, d, dst)
    return 0


cdef int _put_scalar(Signature sig, int code, Py_ssize_t i, object value, char* dst) except -1:
    if code == C_BOOL:
        if value is True or value is False or isinstance(value, np.bool_):
            dst[0] = 1 if value else 0
            return 0
        return _put_int(sig, code, i, value, dst)
    if code >= C_F16:
        return _put_float(sig, code, i, value, dst)
    return _put_int(sig, code, i, value, dst)


cdef inline Py_ssize_t _scalar_size(int code) noexcept nogil:
    if code <= C_U8:
        return 1
    if code <= C_U16 or code == C_F16 or code == C_BF16:
        return 2
    if code <= C_U32 or code == C_F32:
        return 4
    return 8


cdef int _place_numbers(PyObject** items, Py_ssize_t n, const uint16_t* fields, char* dst,
                        Py_ssize_t index, LazySection* lazy, PyObject** missed) except -1:
    """The ``n`` numbers at ``items`` written at ``dst`` as the scalars that ``fields``
    (Param.fields) lists, the k-th of code ``fields[2k]`` at offset ``fields[2k + 1]``, as the
    general path (_put_scalar, for a vector's lanes and a struct's fields) writes them: exact
    ints that fit an integer code, or exact in a double for a floating one; exact floats for a
    floating code; a bool as 1 or 0 of the code's type; the numbers the per-type cache knows
    (numpy scalars, ctypes numbers, int and float subclasses) as _cached_number reads them and
    _store_number writes them (the lookups, of argument ``index``, enter ``lazy`` as
    _pack_typed's do). 1, or 0 at the first of anything else (some written before it): the
    general path converts them all again, or refuses naming the part.

    ``missed`` not NULL: the caller holds a dict's lock (_plain_dict), under which no lookup
    may run (it may run Python code, or enter kernarg's section), nor a ctypes object's lock
    be taken (a contended one suspends the dict's, which may free the value): for a type not
    in the cache, 0 with ``missed[0]`` a new reference to the number, for the caller to look
    its type up once it has let the dict go; a ctypes number, 0. Nothing raises then."""
    cdef Py_ssize_t k
    cdef PyObject* x
    cdef PyTypeObject* tp
    cdef int code, got
    cdef char* at
    cdef long long v
    cdef double d
    cdef TypeInfo copy
    cdef TypeInfo* info
    for k in range(n):
        x = items[k]
        tp = Py_TYPE_P(x)
        code = fields[2 * k]
        at = dst + fields[2 * k + 1]
        if tp == &PyFloat_Type:
            if code < C_F16:
                return 0
            _store_float(code, PyFloat_AS_DOUBLE_P(x), at)
        elif tp == &PyLong_Type:
            if kernarg_small_int(x, &v):
                if code <= C_U64:
                    if not _int_fits(code, v):
                        return 0
                    _store_int(at, v, _scalar_size(code))
                elif -_EXACT_IN_DOUBLE <= v <= _EXACT_IN_DOUBLE:
                    _store_float(code, <double>v, at)
                else:
                    return 0
            elif code == C_I64 or code == C_U64:
                # |v| >= 2**60: a long long's, or 2**63 .. 2**64-1 for an unsigned one.
                got = kernarg_int64_bits(x, &v)
                if not ((got == 1 and (code == C_I64 or v >= 0))
                        or (got == 2 and code == C_U64)):
                    return 0
                memcpy(at, &v, 8)
            else:
                return 0
        elif tp == &PyBool_Type:
            if code <= C_U64:
                _store_int(at, x == Py_True, _scalar_size(code))
            else:
                _store_float(code, x == Py_True, at)
        else:
            if missed == NULL:
                info = view_or_lookup(_cache, x, index, &copy, lazy)
            else:
                info = cache_view(_cache, x, &copy)
                if info == NULL:
                    Py_INCREF(<object>x)
                    missed[0] = x
                    return 0
                if info.kind == KIND_CTYPES:
                    return 0
            got = _cached_number(code, x, info, &d, &v)
            if not _store_number(code, got, d, v, at):
                return 0
    return 1


cdef inline bint _plain_dict(const Param* p, PyObject* d, char* dst,
                             PyObject** missed) noexcept:
    """Struct parameter ``p``'s plain fields (Param.fields) from dict ``d`` of exact str keys
    naming them and numbers (_place_numbers), written at ``dst`` in the dict's order, with the
    fields it leaves out and the padding zeroed, as the general path (_put_record) writes them.
    False, with some written, for any other dict, or (``missed[0]`` set, as _place_numbers
    says) a number whose type the cache does not hold yet. Read under the dict's own lock on
    a free-threaded build, as CPython reads a dict: no Python code runs meanwhile (keys are
    compared as strs)."""
    cdef Py_ssize_t pos = 0, k = 0, j
    cdef PyObject* key
    cdef PyObject* value
    cdef PyObject** names = (<PyTupleObject*>p.field_names).ob_item
    cdef bint ok = True
    cdef kernarg_section cs
    memset(dst, 0, p.size)
    kernarg_object_lock(&cs, d)
    try:
        while PyDict_Next_P(d, &pos, &key, &value):
            if Py_TYPE_P(key) != &PyUnicode_Type:
                ok = False
                break
            # The dict's k-th key is most often the k-th field (a dict in the struct's order).
            j = k if k < p.nfields and (names[k] == key or
                                        PyUnicode_Compare_P(names[k], key) == 0) else -1
            if j < 0:
                for j in range(p.nfields):
                    if names[j] == key or PyUnicode_Compare_P(names[j], key) == 0:
                        break
                else:
                    ok = False
                    break
            if not _place_numbers(&value, 1, p.fields + 2 * j, dst, 0, NULL, missed):
                ok = False
                break
            k += 1
    finally:
        kernarg_object_unlock(&cs)
    return ok


cdef int _place_dict(const Param* p, PyObject* d, char* dst, Py_ssize_t index,
                     LazySection* lazy) except -1:
    """_plain_dict, with the types of the numbers it found missing from the per-type cache
    looked up (argument ``index``'s, entering ``lazy`` as _pack_typed's lookups do) once it has
    let the dict go, and the dict read again (at most once a field). 1 where the dict is
    placed; 0 for the general path."""
    cdef PyObject* missed = NULL
    cdef TypeInfo copy
    cdef Py_ssize_t tries = 0
    cdef bint placed = _plain_dict(p, d, dst, &missed)
    while missed != NULL:
        try:
            view_or_lookup(_cache, missed, index, &copy, lazy)
        finally:
            Py_DECREF(<object>missed)
        missed = NULL
        tries += 1
        if tries <= p.nfields:
            placed = _plain_dict(p, d, dst, &missed)
    return placed


cdef inline bint _complex_lanes(int elem, const char* src, Py_ssize_t size, char* dst) noexcept:
    """A numpy complex64 or complex128 (``size`` 8 or 16 bytes at ``src``) as a pair of
    floating lanes ``elem`` at ``dst``: its real and imaginary parts, as the general path
    converts them. False for another size (numpy's complex256)."""
    cdef float f[2]
    cdef double d[2]
    if size == 8:
        memcpy(f, src, 8)
        d[0] = f[0]
        d[1] = f[1]
    elif size == 16:
        memcpy(d, src, 16)
    else:
        return False
    _store_float(elem, d[0], dst)
    _store_float(elem, d[1], dst + _scalar_size(elem))
    return True


cdef str _lanes_refusal(object value, Py_ssize_t count, str what):
    """Why ``value`` is not the ``count`` lanes of a vector (a tuple, list or 1-d numpy array
    of that length), or None where it is."""
    if not isinstance(value, (tuple, list, np.ndarray)):
        return (f"expected a sequence of {count} {what}, got {type(value).__name__}: pass a "
                "tuple, a list or a 1-d numpy array")
    if isinstance(value, np.ndarray) and value.ndim != 1:
        return (f"expected a sequence of {count} {what}, got a {value.ndim}-d numpy array of "
                f"shape {value.shape}")
    if len(value) != count:
        return f"expected {count} elements, got {len(value)}"
    return None


cdef int _put_vector(Signature sig, Param* p, Py_ssize_t i, object value, char* dst) except -1:
    cdef Py_ssize_t k, step = _scalar_size(p.elem)
    if p.count == 2 and p.elem >= C_F16 and isinstance(value, (complex, np.complexfloating)):
        # A pair of floats is a complex number's layout (cuComplex is float2; libcu++'s
        # complex<__half> is laid out as half2, complex<__nv_bfloat16> as __nv_bfloat162).
        value = (value.real, value.imag)
    if p.count == 1 and not isinstance(value, (tuple, list, np.ndarray)):
        return _put_scalar(sig, p.elem, i, value, dst)
    refusal = _lanes_refusal(value, p.count, "numbers")
    if refusal is not None:
        raise TypeError(f"{_param_name(sig, i)} is {sig._types[i]}: {refusal}")
    for k in range(p.count):
        item = value[k]
        if isinstance(item, np.generic):
            item = item.item()
        _put_part(sig, i, p.elem, item, dst + k * step, k)
    return 0


cdef int _put_ctypes_struct(Signature sig, Param* p, Py_ssize_t i, object value,
                            char* dst) except -1:
    """A ctypes struct's bytes, copied under the object's own lock on a free-threaded build
    (_cutils.h): whole, as the fields were before or after another thread's set, never some
    of each."""
    cdef Py_buffer view
    cdef kernarg_section cs
    cdef Py_ssize_t got = -1
    kernarg_object_lock(&cs, <PyObject*>value)
    try:
        PyObject_GetBuffer(value, &view, PyBUF_SIMPLE)
        got = view.len
        if got == p.size:
            memcpy(dst, view.buf, got)
        PyBuffer_Release(&view)
    finally:
        kernarg_object_unlock(&cs)
    if got != p.size:
        raise TypeError(f"{_param_name(sig, i)}: expected {p.size} bytes, got {got}")
    return 0


cdef int _put_struct(Signature sig, Param* p, BlockState* st, Py_ssize_t i, object value,
                     char* dst, uint64_t stream) except -1:
    spec = sig._structs[i]
    raw = None
    if spec is None:
        # A struct from_source read from the kernel's source: a dict or tuple field by field,
        # anything else as the struct's bytes (as before kernarg read the source).
        record = sig._records[i]
        if not isinstance(value, (dict, tuple)) and record is not None and \
                record.metadata.get("span") is not None:
            value = _span_value(sig, i, record, value, "")
        if isinstance(value, (dict, tuple)):
            memset(dst, 0, p.size)
            return _put_record(sig, st, i, record, value, dst, "", stream)
        return _put_opaque(sig, p, st, i, value, dst)
    if isinstance(spec, np.dtype):
        if isinstance(value, np.void) and value.dtype == spec:
            raw = value.tobytes()
    elif isinstance(value, spec):
        _refuse_held_pointers(sig, i, value, "")
        return _put_ctypes_struct(sig, p, i, value, dst)
    if raw is None and isinstance(value, (dict, tuple)):
        record = sig._records[i]
        if record is not None:
            memset(dst, 0, p.size)      # fields a dict leaves out, and padding
            return _put_record(sig, st, i, record, value, dst, "", stream)
        raw = _ctypes_built(sig, i, spec, value)
    if raw is None and isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    if raw is None:
        raise TypeError(f"{_param_name(sig, i)} is a struct ({sig._types[i]}): expected a "
                        f"matching numpy/ctypes value, a dict, a tuple or bytes, got "
                        f"{type(value).__name__}")
    if len(raw) != p.size:
        raise TypeError(f"{_param_name(sig, i)}: expected {p.size} bytes, got {len(raw)}")
    memcpy(dst, <char*>raw, p.size)
    return 0


# numpy (kind, itemsize) of a struct field -> the scalar code typed packing converts it as.
cdef dict _FIELD_CODES = {
    ("b", 1): C_BOOL, ("i", 1): C_I8, ("u", 1): C_U8, ("i", 2): C_I16, ("u", 2): C_U16,
    ("i", 4): C_I32, ("u", 4): C_U32, ("i", 8): C_I64, ("u", 8): C_U64, ("f", 2): C_F16,
    ("f", 4): C_F32, ("f", 8): C_F64,
}


# Struct dtype metadata that does not change how _put_record writes a tuple of every field
# (the last three: nor a dict, but for fields it leaves out); any other key (a union's,
# bit-fields', a span's, "positions") keeps the struct on that path.
cdef frozenset _PLAIN_METADATA = frozenset((
    "name", "align", "pod", "empty", "empties", "dsize", "defaulted", "initial", "constructed"))


def _param_fields(s):
    """Param.fields for the parameter of spec ``s``, as _plain_fields gives them: a struct's
    plain fields, a vector's lanes (no names, no dicts; padded where the vector is larger than
    its lanes); None for the rest."""
    if s.code == C_STRUCT and s.record is not None:
        return _plain_fields(s.record)
    if s.code == C_VECTOR:
        step = _scalar_size(s.elem)
        return [(s.elem, k * step) for k in range(s.count)], None, False, s.size > s.count * step
    return None


def _plain_fields(dt):
    """For Signature.pack's fast path (Param.fields): where struct dtype ``dt``'s fields are
    all scalar numbers that _put_record converts as parameters of their types (bool, the ints,
    half, bfloat16, float, double), ([(code, offset), ...], names, dicts_too, padded) in the
    order of ``dt.names``, which is a tuple's; else None. ``dicts_too``: no field has a default
    member initializer, whose value a dict that leaves the field out would take. ``padded``:
    the fields leave bytes of the struct uncovered, which a tuple's packing zeroes first."""
    meta = dt.metadata or {}
    if dt.fields is None or not meta.keys() <= _PLAIN_METADATA:
        return None
    pairs = []
    for name in dt.names:
        part, offset = dt.fields[name][:2]
        if part.fields is not None or part.subdtype is not None or (
                part.metadata is not None and "pointer" in part.metadata):
            return None
        code = _FIELD_CODES.get((part.kind, part.itemsize), -1)
        if part.name == "bfloat16" or part.metadata is not None and \
                part.metadata.get("code") == C_BF16:
            code = C_BF16
        if code < 0 or not 0 <= offset <= 0xFFFF:
            return None
        pairs.append((code, offset))
    covered = bytearray(dt.itemsize)
    for code, offset in pairs:
        covered[offset:offset + _scalar_size(code)] = b"\1" * _scalar_size(code)
    return (pairs, tuple(dt.names), "defaulted" not in meta and "initial" not in meta,
            0 in covered)


cdef list _given_alternatives(tuple group, dict value):
    """The members (alternatives, each the names of the fields it gives) of a union, as a
    struct dtype's "overlaps" metadata holds them (``group``), that dict ``value`` gives."""
    return [alternative for alternative in group if any(n in value for n in alternative)]


cdef int _refuse_overlaps(Signature sig, Py_ssize_t i, object dt, dict value,
                          str what) except -1:
    """Refuse a dict that gives fields of more than one member of a union in struct (or
    union) ``dt``: their bytes are the same."""
    for group in dt.metadata["overlaps"]:
        given = _given_alternatives(group, value)
        if len(given) > 1:
            shown = [next(n for n in alternative if n in value) for alternative in given]
            members = [" and ".join(alternative) for alternative in group]
            raise TypeError(
                f"{_param_name(sig, i)}: {what} gives fields {', '.join(shown)}, which share "
                f"their bytes (members of a union: one holds a value at a time): give one "
                f"of {('; ' if any(len(a) > 1 for a in group) else ', ').join(members)}")
    return 0


cdef int _put_initial(Signature sig, Py_ssize_t i, object dt, dict value, char* dst,
                      str what) except -1:
    """Before a dict's fields are written: the struct ``dt``'s fields with default member
    initializers take them (its value-initialized bytes, "initial", where from_source had
    the compiler evaluate them); where they are not known, the dict must give each such
    field, and one it leaves out is refused, not packed as zero."""
    initial = dt.metadata.get("initial")
    if type(initial) is bytes and len(<bytes>initial) == dt.itemsize:
        # (Checked: a dtype's metadata is anyone's to write, from_source's or a caller's.)
        memcpy(dst, <char*><bytes>initial, dt.itemsize)
        return 0
    missing = [name for name in dt.metadata["defaulted"] if name not in value]
    if missing and "overlaps" in dt.metadata:
        # (A union member's fields the dict leaves out, where it gives another member's.)
        for group in dt.metadata["overlaps"]:
            given = _given_alternatives(group, value)
            if given:
                others = {n for alternative in group if alternative not in given
                          for n in alternative}
                missing = [name for name in missing if name not in others]
    if missing:
        several = len(missing) > 1
        if dt.metadata.get("constructed"):
            raise TypeError(
                f"{_param_name(sig, i)}: {what} leaves out field{'s' if several else ''} "
                f"{', '.join(missing)}, and {dt.metadata['name']} has constructors: kernarg "
                "has no value for what they set (from_source has the compiler evaluate the "
                "struct's T{}, where it is a constant expression): give "
                + ("them" if several else "it") + ", or pass a tuple of every field")
        raise TypeError(
            f"{_param_name(sig, i)}: {what} leaves out field{'s' if several else ''} "
            f"{', '.join(missing)}, whose default member initializer{'s' if several else ''} "
            "kernarg has no value for (from_source has the compiler evaluate a struct's "
            "T{}, where it is a constant expression): give "
            + ("them" if several else "it"))
    return 0


def _span_value(Signature sig, Py_ssize_t i, dt, value, str where):
    """The (pointer, count) tuple (or, for a static extent, the pointer's) a span record
    ``dt`` (see _span_param) takes for ``value``, an array alone: its elements counted from
    its CUDA Array Interface's shape, ``numel()`` (torch) or ``size`` (numpy, CuPy, JAX); a
    static extent must be that count. TypeError for what has no count (an int, None, a
    DLPack-only producer): a tuple (pointer, count) gives one."""
    extent = dt.metadata["span"]
    count = _element_count(value)
    what = f"{_param_name(sig, i)}{f', field {where}' if where else ''}"
    if count is None:
        raise TypeError(f"{what} is a span ({dt.metadata['name']}): pass an array whose "
                        f"elements kernarg can count (a CUDA Array Interface, a torch, CuPy, "
                        f"numpy or JAX array), or a tuple (pointer, count), not "
                        f"{type(value).__name__}")
    if extent:
        if count != extent:
            raise ValueError(f"{what} is a span of {extent} elements "
                             f"({dt.metadata['name']}); the {type(value).__name__} array has "
                             f"{count}")
        return (value,)
    return (value, count)


def _element_count(value):
    """How many elements array ``value`` has, or None where kernarg cannot tell."""
    cai = getattr(type(value), "__cuda_array_interface__", None)
    if cai is not None:
        shape = value.__cuda_array_interface__.get("shape")
        if isinstance(shape, tuple) and all(type(n) is int and n >= 0 for n in shape):
            return math.prod(shape)
        return None
    numel = getattr(value, "numel", None)
    if callable(numel) and type(value).__module__.startswith("torch"):
        return int(numel())
    size = getattr(value, "size", None)
    if type(size) is int and hasattr(value, "shape"):
        return size
    return None


cdef int _put_record(Signature sig, BlockState* st, Py_ssize_t i, object dt, object value,
                     char* dst, str where, uint64_t stream) except -1:
    """Write ``value`` at ``dst`` as numpy dtype ``dt`` -- parameter ``i``'s struct, or the
    field ``where`` of it -- converting each scalar field as a parameter of its type is
    converted (ints range-checked, no float for an int, floats rounded once), never through
    numpy's or ctypes' casts, which wrap ints and truncate floats without a word."""
    cdef Py_ssize_t k, n, step
    cdef int code
    if where:
        what = f"field {where}"
    else:
        kind = "union" if dt.metadata is not None and dt.metadata.get("union") else "struct"
        what = f"a {kind} ({sig._types[i]})"
    if dt.fields is not None:
        if isinstance(value, np.void) and value.dtype == dt:
            raw = value.tobytes()
            memcpy(dst, <char*>raw, dt.itemsize)
            return 0
        if dt.metadata is not None and dt.metadata.get("span") is not None and \
                not isinstance(value, (dict, tuple)):
            value = _span_value(sig, i, dt, value, where)
        if isinstance(value, dict):
            pairs = value.items()
            if dt.metadata is not None:
                if "overlaps" in dt.metadata:
                    _refuse_overlaps(sig, i, dt, value, what)
                if "defaulted" in dt.metadata:
                    _put_initial(sig, i, dt, value, dst, what)
        elif isinstance(value, tuple):
            names = dt.names if dt.metadata is None else dt.metadata.get("positions", dt.names)
            if len(value) != len(names):
                if not names:
                    raise TypeError(f"{_param_name(sig, i)}: {what} is empty (no data "
                                    f"member): give () or {{}}, got {len(value)} "
                                    f"value{'s' if len(value) != 1 else ''}")
                if dt.metadata is None or ("overlaps" not in dt.metadata
                                           and "union" not in dt.metadata):
                    raise TypeError(f"{_param_name(sig, i)}: {what} has {len(names)} fields "
                                    f"({', '.join(names)}), got {len(value)} values")
                raise TypeError(
                    f"{_param_name(sig, i)}: {what} takes {len(names)} value"
                    f"{'s' if len(names) != 1 else ''} in a tuple ({', '.join(names)}: of a "
                    f"union, its first member, as C++'s braces set it), got {len(value)}; a "
                    f"dict gives another member")
            pairs = zip(names, value)
        else:
            return _put_ctypes_part(sig, i, dt, value, dst, what, "a dict, a tuple")
        bits = dt.metadata.get("bits") if dt.metadata is not None else None
        for key, item in pairs:
            field = dt.fields.get(key) if isinstance(key, str) else None
            if field is None and bits is not None and isinstance(key, str):
                found = next((b for b in bits if b[0] == key), None)
                if found is not None:
                    _put_bits(sig, i, found, item, dst, f"{where}.{key}" if where else key)
                    continue
            if field is None:
                every = dt.names if bits is None else dt.metadata.get("positions", dt.names)
                if not every:
                    raise TypeError(f"{_param_name(sig, i)}: {what} is empty (no data "
                                    f"member): give {{}} or (), got field "
                                    f"{shown_value(key, True)}")
                raise TypeError(f"{_param_name(sig, i)}: {what} has no field "
                                f"{shown_value(key, True)} (its fields: {', '.join(every)})")
            _put_record(sig, st, i, field[0], item, dst + <Py_ssize_t>field[1],
                        f"{where}.{key}" if where else key, stream)
        return 0
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        if isinstance(value, np.ndarray) and value.dtype == base and value.shape == shape:
            raw = np.ascontiguousarray(value).tobytes()
            memcpy(dst, <char*>raw, dt.itemsize)
            return 0
        if not isinstance(value, (tuple, list, np.ndarray)):
            return _put_ctypes_part(sig, i, dt, value, dst, what, "a sequence")
        if isinstance(value, np.ndarray) and value.ndim != len(shape):
            raise TypeError(f"{_param_name(sig, i)}: {what} is an array of shape {shape}, got "
                            f"a numpy array of shape {value.shape}")
        n = shape[0]
        if len(value) != n:
            raise TypeError(f"{_param_name(sig, i)}: {what} has {n} elements, got "
                            f"{len(value)}")
        inner = base if len(shape) == 1 else np.dtype((base, shape[1:]))
        step = inner.itemsize
        for k in range(n):
            _put_record(sig, st, i, inner, value[k], dst + k * step, f"{where}[{k}]", stream)
        return 0
    meta = dt.metadata
    if meta is not None and "pointer" in meta:
        return _put_field_pointer(sig, st, i, meta["pointer"], value, dst, where, stream)
    code = _FIELD_CODES.get((dt.kind, dt.itemsize), -1)
    if dt.name == "bfloat16" or meta is not None and meta.get("code") == C_BF16:
        code = C_BF16
    if code >= 0:
        _put_part(sig, i, code, value, dst, where)
    elif dt.kind == "c":
        code = C_F32 if dt.itemsize == 8 else C_F64
        if isinstance(value, (complex, np.complexfloating)):
            value = (value.real, value.imag)
        elif not isinstance(value, (tuple, list)) or len(value) != 2:
            if isinstance(value, (str, bytes)) or not hasattr(value, "__float__"):
                raise TypeError(f"{_param_name(sig, i)}: {what} is {dt}: expected a "
                                f"complex number, got {type(value).__name__}")
            value = (value, 0.0)
        _put_part(sig, i, code, value[0], dst, f"{where}.real")
        _put_part(sig, i, code, value[1], dst + <Py_ssize_t>(dt.itemsize // 2),
                  f"{where}.imag")
    elif dt.kind == "S" and dt.itemsize == 1 and not isinstance(value, (bytes, bytearray)):
        _put_part(sig, i, C_U8, value, dst, where)      # ctypes' c_char takes 0 .. 255
    elif dt.kind == "S":
        if not isinstance(value, (bytes, bytearray)) or len(value) > dt.itemsize:
            raise TypeError(f"{_param_name(sig, i)}: {what} is {dt.itemsize} bytes (char): "
                            "expected bytes of at most that length, got " +
                            (f"{len(value)} bytes" if isinstance(value, (bytes, bytearray))
                             else type(value).__name__))
        raw = bytes(value)
        memcpy(dst, <char*>raw, len(raw))
    elif dt.name in _SMALL_FORMAT_OF_DTYPE:
        dst[0] = <char>_small_float_code(_SMALL_FORMAT_OF_DTYPE[dt.name], value,
                                         f"{_param_name(sig, i)}: {what}", str(dt))
    else:
        raise TypeError(f"{_param_name(sig, i)}: {what} is {dt}, which kernarg cannot "
                        "convert a value to; pass the whole struct as a numpy or ctypes value "
                        "or bytes")
    return 0


cdef inline TypeInfo* _pointer_info(object value, Py_ssize_t i, TypeInfo* probed) except NULL:
    """How a pointer parameter or field reads ``value``: its type's TypeInfo, or, for a type
    whose instances kernarg asks (KIND_PROBE), ``probed`` with the kind of the array protocol
    the object answers itself, as untyped packing takes it (KIND_PROBE still: none). The
    object is asked once; pointer_of is then given that kind."""
    cdef TypeInfo* info = lookup_type(value, i)
    if info.kind != KIND_PROBE:
        return info
    memset(probed, 0, sizeof(TypeInfo))
    probed.kind = probed_kind(value, i)
    return probed


cdef str _pointer_refusal(object value):
    """Why a pointer parameter or field refuses ``value``: an object that exports memory through
    the buffer protocol (bytes, bytearray, memoryview, array.array, a ctypes array) is host
    memory, said as untyped packing says it; a scalar or anything else is not an array."""
    name = type(value).__name__
    if PyObject_CheckBuffer(value) and not isinstance(value, (ctypes._SimpleCData, np.generic)):
        return f"{name} is host memory, which a kernel cannot read ({_ON_CPU})"
    return f"expected an array, buffer or address, got {name}"


cdef int _put_field_pointer(Signature sig, BlockState* st, Py_ssize_t i, object spec,
                            object value, char* dst, str where, uint64_t stream) except -1:
    """Pointer field ``where`` of parameter ``i``'s struct (``spec``: the field's pointer spec,
    as _parse_c_param gives it): what a pointer parameter takes -- None, an address as an int,
    a ctypes pointer, or an array or buffer, whose producer stream and DLPack capsule the block
    records as a pointer argument's, and whose element type and read-only flag are checked
    against the field's type."""
    cdef PtrResult r
    cdef TypeInfo* info
    cdef TypeInfo probed     # _pointer_info's answer for a type kernarg probes
    cdef uint64_t address
    if value is None:
        address = 0
    elif is_ctypes_pointer(value):
        refusal = ctypes_target_refusal(value)
        if refusal is not None:
            raise TypeError(f"{_field_label(sig, i, where, spec)}: {refusal}")
        address = ctypes_pointer_value(value)
    elif type(value) is int or isinstance(value, np.integer):
        number = int(value)     # numpy 1.x compares a uint64 with 2**64 as floats
        if not 0 <= number < 2**64:
            label = _field_label(sig, i, where, spec)
            raise OverflowError(f"{label} is a pointer: {shown_value(number)} is outside "
                                "0 .. 2**64-1")
        address = number
    else:
        info = _pointer_info(value, i, &probed)
        if info.kind <= KIND_POINTER:
            label = _field_label(sig, i, where, spec)
            raise TypeError(f"{label} is a pointer: " + _pointer_refusal(value))
        try:
            pointer_of(info, value, i, stream, &r, True, NULL)
            state_take_pointer(st, &r, i, value)
        except Exception as exc:
            args = exc.args
            if args and isinstance(args[0], str) and args[0].startswith(f"argument {i} ("):
                label = _field_label(sig, i, where, spec)
                exc.args = (f"{label}: {args[0][args[0].index(': ') + 2:]}",) + args[1:]
            raise
        if (r.readonly or r.copied) and not spec.is_const:
            label = _field_label(sig, i, where, spec)
            raise ValueError(f"{label} is not const but the {type(value).__name__} array "
                             + ("is read-only" if r.readonly else "was exported as a copy "
                                "(DLPack flag IS_COPIED)"))
        if r.dtype_kind != 0 and not _kind_matches(_pointee_char(spec.pointee_kind),
                                                   spec.pointee_size, spec.count,
                                                   r.dtype_kind, r.dtype_size):
            raise TypeError(f"{_field_label(sig, i, where, spec)}: the array's element type "
                            f"is {_element_type(r.dtype_kind, r.dtype_size)}")
        address = r.ptr
    memcpy(dst, &address, 8)
    return 0


cdef str _field_label(Signature sig, Py_ssize_t i, str where, object spec):
    # Built only for an error: valid values do not pay for formatting it.
    return f"{_param_name(sig, i)}, field {where} ({spec.text})"


cdef int _put_ctypes_part(Signature sig, Py_ssize_t i, object dt, object value, char* dst,
                          str what, str expected) except -1:
    # A nested struct or array given as the ctypes value of that part (a ctypes struct type's
    # nested Structure or array): its bytes, when it has the part's size.
    if isinstance(value, (ctypes.Structure, ctypes.Union, ctypes.Array)) \
            and ctypes.sizeof(value) == dt.itemsize:
        _refuse_held_pointers(sig, i, value, f", {what}")
        raw = bytes(memoryview(value).cast("B"))
        memcpy(dst, <char*>raw, dt.itemsize)
        return 0
    raise TypeError(f"{_param_name(sig, i)}: {what} is {dt}: expected {expected} or a "
                    f"matching value, got {type(value).__name__}")


cdef int _put_part(Signature sig, Py_ssize_t i, int code, object value, char* dst,
                   object where) except -1:
    """_put_scalar for a part of parameter ``i``: vector element ``where`` (an int) or struct
    field ``where`` (its path). _put_scalar's errors name the parameter as if it were of the
    part's scalar type; they are raised again naming the part instead."""
    try:
        return _put_scalar(sig, code, i, value, dst)
    except (TypeError, OverflowError) as exc:
        prefix = f"{_param_name(sig, i)} is {_CODE_NAMES[code]}: "
        message = exc_text(exc)
        if not message.startswith(prefix):
            raise
        part = (f"element {where} of {sig._types[i]}" if type(where) is int
                else f"field {where}")
        raise type(exc)(f"{_param_name(sig, i)}, {part} ({_CODE_NAMES[code]}): "
                        f"{message[len(prefix):]}") from None


cdef int _put_bits(Signature sig, Py_ssize_t i, tuple bit_field, object value, char* dst,
                   str where) except -1:
    """Write ``value`` into the bits of the bit-field ``bit_field`` (a struct dtype's "bits"
    metadata: name, first bit, width, the type's code) of the struct at ``dst``, converted as
    a field of its type and checked against the width: C++ would keep the low bits of a
    value that does not fit without a word."""
    cdef unsigned char scratch[8]
    cdef Py_ssize_t k
    _, first, width, code = bit_field
    try:
        _put_part(sig, i, code, value, <char*>scratch, where)
    except (TypeError, OverflowError) as exc:
        named = f", field {where} ({_CODE_NAMES[code]}): "
        message = exc_text(exc)
        if named not in message:
            raise
        raise type(exc)(message.replace(
            named, f", field {where} ({_CODE_NAMES[code]} : {width}, a bit-field): ", 1)) from None
    signed = code in (C_I8, C_I16, C_I32, C_I64)
    n = int.from_bytes(bytes(scratch[:_scalar_size(code)]), "little", signed=signed)
    lo, hi = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
    if not lo <= n <= hi:
        raise OverflowError(f"{_param_name(sig, i)}, field {where} ({_CODE_NAMES[code]} : "
                            f"{width}, a bit-field): {n} is outside {lo} .. {hi}")
    mask = ((1 << width) - 1) << (first % 8)
    start, stop = first // 8, (first + width + 7) // 8
    old = int.from_bytes(dst[start:stop], "little")
    new = (old & ~mask) | ((n << (first % 8)) & mask)
    raw = new.to_bytes(stop - start, "little")
    for k in range(stop - start):
        (<unsigned char*>dst)[start + k] = raw[k]
    return 0


# ctypes' field descriptor type: what a struct type's attribute is for each of its fields.
cdef object _CFIELD = type(type("_Probe", (ctypes.Structure,),
                                {"_fields_": [("x", ctypes.c_int)]}).x)


cdef str _described(object value):
    return f"{len(value)} values" if isinstance(value, tuple) else type(value).__name__


cdef bytes _ctypes_built(Signature sig, Py_ssize_t i, object spec, object value):
    """A dict or tuple built by ctypes struct type ``spec`` (one numpy cannot describe: bitfields,
    anonymous members, an array of such structs), checked: every dict key a field, a value for
    every field (element) of a tuple, and every int read back as given (ctypes keeps the low
    bits of one that does not fit)."""
    if issubclass(spec, ctypes.Array):
        if not isinstance(value, tuple) or len(value) != spec._length_:
            raise TypeError(f"{_param_name(sig, i)}: {spec.__name__} takes a tuple of "
                            f"{spec._length_} elements, got {_described(value)}")
        items = list(enumerate(value))
    elif isinstance(value, dict):
        for key in value:
            if not isinstance(key, str) or type(getattr(spec, key, None)) is not _CFIELD:
                raise TypeError(f"{_param_name(sig, i)}: {spec.__name__} has no field "
                                f"{shown_value(key, True)}")
        items = list(value.items())
    else:
        names = [f[0] for f in spec._fields_]
        if len(value) != len(names):
            raise TypeError(f"{_param_name(sig, i)}: {spec.__name__} has {len(names)} fields "
                            f"({', '.join(names)}), got {len(value)} values")
        items = list(zip(names, value))
    items = [(key, _without_numpy_bools(given)) for key, given in items]
    try:
        obj = (spec(*[given for _, given in items]) if issubclass(spec, ctypes.Array)
               else spec(**dict(items)))
    except Exception as exc:        # ctypes' own refusal (a float for an int field, ...)
        _reraise(exc, f"{_param_name(sig, i)}: {spec.__name__}: {exc_text(exc)}")
    for key, given in items:
        mismatch = _ctypes_mismatch(obj, key, given, f"[{key}]" if type(key) is int else key)
        if mismatch is not None:
            where, given, got = mismatch
            raise OverflowError(f"{_param_name(sig, i)}, {where}: {shown_value(given)} does not "
                                f"fit (ctypes stores {got})")
    _refuse_held_pointers(sig, i, obj, "")
    return bytes(memoryview(obj).cast("B"))


cdef int _refuse_held_pointers(Signature sig, Py_ssize_t i, object value, str what) except -1:
    """Refuse ctypes value ``value`` (parameter ``i``'s struct, or its part ``what``) where a
    pointer in it points into host memory it keeps alive."""
    refusal = ctypes_target_refusal(value)
    if refusal is not None:
        raise TypeError(f"{_param_name(sig, i)}{what}: {refusal}")
    return 0


cdef object _without_numpy_bools(object value):
    """``value`` with every numpy.bool_ in it (nested tuples, lists, dicts) made a Python bool,
    which ctypes takes for an int field as every other typed path takes numpy.bool_ (0 or 1);
    ctypes refuses numpy.bool_ itself, which has no __index__."""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, (tuple, list)):
        return type(value)([_without_numpy_bools(v) for v in value]) \
            if type(value) in (tuple, list) else value
    if type(value) is dict:
        return {k: _without_numpy_bools(v) for k, v in value.items()}
    return value


def _ctypes_mismatch(obj, key, given, where):
    """(where, given, stored) for the first int under ``obj``'s field or element ``key`` that
    ctypes did not store as ``given`` gave it, or None; nested structs and arrays given as
    tuples, lists or dicts are followed."""
    got = obj[key] if type(key) is int else getattr(obj, key)
    if isinstance(got, int):
        if hasattr(type(given), "__index__") and got != PyNumber_Index(given):
            return (f"{'element' if where.startswith('[') else 'field'} {where}", given, got)
        return None
    if isinstance(got, ctypes.Array) and isinstance(given, (tuple, list)):
        parts = enumerate(given)
    elif isinstance(got, (ctypes.Structure, ctypes.Union)) and isinstance(given, tuple):
        parts = zip([f[0] for f in type(got)._fields_], given)
    elif isinstance(got, (ctypes.Structure, ctypes.Union)) and isinstance(given, dict):
        parts = given.items()
    else:
        return None
    for k, item in parts:
        found = _ctypes_mismatch(got, k, item, f"{where}[{k}]" if type(k) is int
                                 else f"{where}.{k}")
        if found is not None:
            return found
    return None


cdef int _put_opaque(Signature sig, Param* p, BlockState* st, Py_ssize_t i, object value,
                     char* dst) except -1:
    """A struct the signature cannot describe takes bytes only from a value that states its
    own: bytes-like objects, ctypes instances, numpy scalars (structured or not) and, for 128
    bytes, a TMA tensor map. A Python int or float has no size of its own (kernarg would pick
    8 bytes), and an array or buffer packs its address, which is not a struct's bytes: both
    are refused, so that an 8-byte struct is never filled with a guess."""
    cdef TypeInfo* info = NULL
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
    else:
        try:
            info = lookup_type(value, i)
        except TypeError:
            pass        # a value no kernel parameter takes: refused below
        if info != NULL and info.kind == KIND_TENSOR_MAP:
            if p.size == info.size:
                return put_tensor_map(st, info, i, value, dst)
        elif info == NULL or info.kind not in (KIND_INLINE, KIND_CTYPES, KIND_CTYPES_BUFFER,
                                               KIND_NPVOID):
            if info != NULL and info.kind > KIND_POINTER:
                why = ("; an array passes its address, which is not a struct's bytes (a "
                       "struct of one pointer takes ctypes.c_void_p(address))")
            elif value is None or type(value) in (int, float, bool, complex):
                why = ("; a Python number or None has no size of its own (use a numpy or ctypes "
                       "scalar)")
            else:
                why = ""
            raise TypeError(f"{_param_name(sig, i)} is {p.size} opaque bytes ("
                            f"{sig._types[i]}, a struct the signature does not lay out): pass "
                            "bytes, a ctypes object, a numpy scalar of that size or (for 128 "
                            f"bytes) a TMA tensor map, not {type(value).__name__}{why}")
        from kernarg._handler import pack as untyped_pack
        raw = bytes(untyped_pack((value,)))
    if len(raw) != p.size:
        raise TypeError(f"{_param_name(sig, i)} takes {p.size} bytes ({sig._types[i]}); "
                        f"{type(value).__name__} gives {len(raw)}")
    memcpy(dst, <char*>raw, p.size)
    return 0


cdef str _element_type(char kind, int size):
    """An array's element type, as a refusal of it names it."""
    if kind == DTYPE_BIG_ENDIAN:
        return (f"big-endian ({size}-byte elements), which a kernel would read byte-swapped: "
                "convert the array to little-endian first (numpy: "
                "a.astype(a.dtype.newbyteorder('<')))")
    if kind == DTYPE_OTHER:
        return ("one no C pointee names (a datetime, string or object dtype, a CUDA Array "
                "Interface typestr not of the form '<f4', or a DLPack dtype of several lanes, "
                "of sub-byte ints or an opaque handle); declare the parameter void* to pass "
                "it as untyped memory")
    return _KIND_NAMES.get(kind) or f"{chr(kind)}{size} (numpy kind/size)"


cdef char _pointee_char(str kind):
    """A spec's pointee kind ('f', 'c8' for plain char, '' for any) as Param.pointee_kind."""
    return ord("c") if kind == "c8" else (ord(kind) if kind else 0)


cdef bint _kind_matches(char want, int want_size, int lanes, char kind, int size):
    """Whether array elements of numpy-style ``kind``/``size`` are what a pointer to
    ``lanes`` elements of ``want``/``want_size`` points at."""
    if want == 0:
        return True
    if lanes == 2 and want == ord("f") and kind == ord("c"):
        # A pair of floats (float2, cuComplex, double2, half2) is a complex number: arrays
        # of complex64 (complex128, torch's complex32) hold them in that layout.
        return size == 2 * want_size
    if kind == ord("V"):    # CAI typestr "<V2": bytes numpy has no type for (bfloat16, fp8)
        return size == want_size
    if want == ord("c"):    # plain char: any byte type
        return size == 1 and kind in (ord("i"), ord("u"), ord("b"))
    return want == kind and want_size == size


cdef int _put_pointer(Signature sig, Param* p, BlockState* st, Py_ssize_t i, object value,
                      char* dst, uint64_t stream, bint allow_int) except -1:
    cdef PtrResult r
    cdef TypeInfo* info
    cdef TypeInfo probed     # _pointer_info's answer for a type kernarg probes
    cdef long long v
    cdef uint64_t address
    if value is None:
        address = 0
    elif type(value) is int:
        if kernarg_small_int(<PyObject*>value, &v) and v >= 0:
            address = <uint64_t>v
        elif 0 <= value < 2**64:
            address = value
        else:
            raise OverflowError(f"{_param_name(sig, i)} is a pointer: {shown_value(value)} is "
                                "outside 0 .. 2**64-1")
    else:
        info = _pointer_info(value, i, &probed)
        if info.kind <= KIND_POINTER:
            if allow_int and (info.kind == KIND_HANDLE
                              or hasattr(value, "__index__") and not isinstance(value, float)):
                return _put_int(sig, C_U64, i, value, dst)
            if is_ctypes_pointer(value):
                # An address held by ctypes, as cuda-python's examples pass device pointers.
                refusal = ctypes_target_refusal(value)
                if refusal is not None:
                    raise TypeError(f"{_param_name(sig, i)}: {refusal}")
                address = ctypes_pointer_value(value)
                memcpy(dst, &address, 8)
                return 0
            if isinstance(value, np.integer):
                # An address kept in a numpy integer (an item of an array of addresses), as a
                # struct's pointer field takes it. Asked only here, past the array kinds,
                # so that arrays do not pay for the isinstance.
                number = int(value)
                if not 0 <= number < 2**64:
                    raise OverflowError(f"{_param_name(sig, i)} is a pointer: "
                                        f"{shown_value(number)} is outside 0 .. 2**64-1")
                address = number
                memcpy(dst, &address, 8)
                return 0
            raise TypeError(f"{_param_name(sig, i)} is a pointer ({sig._types[i]}): "
                            + _pointer_refusal(value))
        pointer_of(info, value, i, stream, &r, p.code == C_POINTER, NULL)
        state_take_pointer(st, &r, i, value)
        if p.code == C_POINTER:
            _check_pointee(sig, p, i, value, &r)
        address = r.ptr
    memcpy(dst, &address, 8)
    return 0


cdef int _put_pointer_lazily(Signature sig, Param* p, BlockState* st, Py_ssize_t i,
                             const TypeInfo* info, object value, char* dst,
                             uint64_t stream, LazySection* lazy) except -1:
    """_put_pointer for a pointer argument but a Buffer (``info``, its type's entry), where
    _pack_typed may not have entered kernarg's section: as _handler's _put_pointer, the
    protocols and adapters touch nothing but ``st`` and the parameter's bytes, and the checks
    read only ``sig`` (a refusal enters it)."""
    cdef PtrResult r
    pointer_of(info, value, i, stream, &r, p.code == C_POINTER, lazy)
    if elsewhere(st, r.device):
        enter_lazily(lazy)
    state_take_pointer(st, &r, i, value)
    if p.code == C_POINTER:
        _check_pointee(sig, p, i, value, &r)
    memcpy(dst, &r.ptr, 8)
    return 0


cdef int _check_pointee(Signature sig, Param* p, Py_ssize_t i, object value,
                        PtrResult* r) except -1:
    if (r.readonly or r.copied) and not p.is_const:
        why = "is read-only" if r.readonly else (
            "was exported as a copy (DLPack flag IS_COPIED): what the kernel writes would not "
            "reach the array")
        raise ValueError(f"{_param_name(sig, i)} ({sig._types[i]}) is not const but the "
                         f"{type(value).__name__} array {why}")
    if p.pointee_kind == 0 or r.dtype_kind == 0:
        return 0
    if not _kind_matches(p.pointee_kind, p.pointee_size, p.count, r.dtype_kind,
                         r.dtype_size):
        raise TypeError(f"{_param_name(sig, i)} is {sig._types[i]} but the array's element "
                        f"type is {_element_type(r.dtype_kind, r.dtype_size)}")
    return 0


cdef int _put_small_float(Signature sig, Param* p, Py_ssize_t i, object value,
                          char* dst) except -1:
    """An 8-, 6- or 4-bit float by value: a scalar, or a sequence of ``p.count`` lanes, each
    lane packed from the lowest bits up (cuda_fp8.hpp puts x in the low byte of an x2, and
    cuda_fp4.hpp in the low nibble)."""
    cdef Py_ssize_t k
    cdef int bits = _lane_bits(p.elem)
    cdef uint32_t word = 0      # at most four byte lanes; hosts are little-endian
    shown = sig._types[i]
    if p.count == 1:
        word = <uint32_t>_small_float_code(p.elem, value, _param_name(sig, i), shown)
    else:
        refusal = _lanes_refusal(value, p.count, "values")
        if refusal is not None:
            raise TypeError(f"{_param_name(sig, i)} is {shown}: {refusal}")
        for k in range(p.count):
            word |= <uint32_t>_small_float_code(
                p.elem, value[k], f"{_param_name(sig, i)}[{k}]", shown) << (bits * k)
    memcpy(dst, &word, p.size)
    return 0


cdef int _small_float_code(int fmt, object value, str what, str shown) except -1:
    """The code of ``value`` in format ``fmt``: a scalar of the format's own ml_dtypes type
    gives its bits; any other real number (_real_number: ctypes numbers too) must be one of
    the format's values (NaN and infinity where it has them). kernarg does not round into
    these formats: CUDA's own conversions saturate and ml_dtypes' give NaN or infinity, and
    the two disagree. Errors say ``{what} is {shown}``."""
    cdef double d
    _, ml_name, e_bits, m_bits, _, signed, nan, inf = _SMALL_FORMATS[fmt]
    if isinstance(value, np.generic) and value.dtype.name == ml_name:
        return int(value.view(np.uint8))
    try:
        d = _real_number(value)
    except TypeError:
        raise TypeError(f"{what} is {shown}: expected a real number or an "
                        f"ml_dtypes.{ml_name}, got {type(value).__name__}") from None
    except OverflowError:
        d = math.inf if value > 0 else -math.inf
    sign = (1 << (e_bits + m_bits)) if signed and math.copysign(1.0, d) < 0 else 0
    if d != d:
        if nan >= 0:
            return nan
        problem = "the format has no NaN"
    elif d in (math.inf, -math.inf):
        if inf >= 0:
            return inf | sign
        problem = "the format has no infinity"
    elif d < 0 and not signed:
        problem = "the format has no negative values"
    else:
        code = _small_float_values(fmt).get(abs(d))
        if code is not None:
            return code | sign
        problem = "it is not one of the format's values"
    raise ValueError(f"{what} is {shown}: {shown_value(value, True)} cannot be passed exactly "
                     f"({problem}); kernarg does not round into 8-, 6- or 4-bit formats: "
                     f"round it first (ml_dtypes.{ml_name}(x) rounds to nearest even; "
                     f"CUDA's conversions saturate), or declare it float")


cdef int _put_typed(Signature sig, BlockState* st, Param* p, Py_ssize_t i, object value,
                    char* dst, uint64_t stream) except -1:
    cdef int code = p.code
    if code <= C_F64:
        if p.any_sign:
            return _put_int_any_sign(sig, code, i, value, dst)
        return _put_scalar(sig, code, i, value, dst)
    if code == C_POINTER:
        return _put_pointer(sig, p, st, i, value, dst, stream, False)
    if code == C_VECTOR:
        return _put_vector(sig, p, i, value, dst)
    if code == C_STRUCT:
        return _put_struct(sig, p, st, i, value, dst, stream)
    if code == C_SMALL_FLOAT:
        return _put_small_float(sig, p, i, value, dst)
    if code == C_I128 or code == C_U128:
        return _put_int128(sig, code, i, value, dst)
    if code == C_U64_OR_PTR:
        if type(value) is int or isinstance(value, np.integer):
            return _put_int_any_sign(sig, C_U64, i, value, dst)
        return _put_pointer(sig, p, st, i, value, dst, stream, True)
    return _put_opaque(sig, p, st, i, value, dst)


def check_kernel_name(name):
    """Refuse a kernel name that is no str, or names nothing (before NVRTC, which would read
    an empty name expression as a syntax error)."""
    if not isinstance(name, str):
        raise TypeError(f"the kernel name must be a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError(f"the kernel name must name a kernel, got {name!r}")


def compile_kernel(source, kernel_name, options=(), arch=None, headers=None):
    """Compile ``source`` with NVRTC: ``(ptx, entry, cubin)``. ``entry`` is the lowered PTX
    name NVRTC gave ``kernel_name`` when it is a C++ name expression (a template instantiation
    or a qualified name), else None (an ``extern "C"`` or plain name, found in the PTX as is);
    ``cubin`` is the machine code when ``arch`` is a real architecture (``"sm_90"``)."""
    from kernarg._nvrtc import compile_program

    check_kernel_name(kernel_name)
    exprs = () if kernel_name.isidentifier() else (kernel_name,)
    compiled = compile_program(source, options=options, arch=arch, name_expressions=exprs,
                               headers=headers)
    return compiled.ptx, compiled.lowered.get(kernel_name), compiled.cubin


def _split_kernel_name(kernel_name):
    """``'ns::saxpy<float, 4>'`` -> ``('saxpy', ['float', '4'])``; ``'saxpy'`` -> ``('saxpy',
    None)``: the function's own name and its template arguments, if any."""
    name, args = split_template_name(kernel_name)
    return name.rpartition("::")[2].strip(), args


def split_template_name(name):
    """``'ns::saxpy<float, 4>'`` -> ``('ns::saxpy', ['float', '4'])``; ``'ns::f'`` ->
    ``('ns::f', None)``: a qualified name and its template arguments as written."""
    name, args = name.strip(), None
    start = name.find("<")
    if start > 0 and name.endswith(">"):
        inner = name[start + 1:-1]
        args = [a.strip() for a in _items(inner, False, True)] if inner.strip() else []
        name = name[:start].strip()
    return name, args


def _closing(text, start, opening, closing):
    """The index of the ``closing`` bracket that matches an ``opening`` one just before
    ``start`` (nested pairs skipped), or -1."""
    depth = 1
    for j in range(start, len(text)):
        if text[j] == opening:
            depth += 1
        elif text[j] == closing:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _closing_angle(text, start, end=None):
    """The index of the ``>`` that closes a template's ``<`` just before ``start`` (before
    ``end``, where given), or -1: a ``<`` or ``>`` inside parentheses is a comparison (``int N
    = (3 > 2)``), not a bracket."""
    cdef Py_ssize_t depth = 1, parens = 0
    for j in range(start, len(text) if end is None else end):
        ch = text[j]
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens -= 1
        elif parens == 0 and ch == "<":
            depth += 1
        elif parens == 0 and ch == ">":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _template_header(source, blanked, decl_start):
    """The parameter list of the ``template <...>`` right before the declaration that starts
    at ``decl_start`` (nothing but specifiers between them), or None; ``blanked`` is
    ``source`` with its literals blanked (_without_comments), where brackets are looked for."""
    head = blanked[:decl_start]
    starts = list(re.finditer(r"\btemplate\s*<", head))
    if not starts:
        return None
    open_at = starts[-1].end()
    j = _closing_angle(head, open_at)
    if j < 0 or re.search(r"[;{}]", head[j + 1:]):
        return None
    return source[open_at:j]


def _substitute_template_args(decl, header, args):
    """``decl`` with each template parameter replaced by its argument (or its default), and
    each function parameter pack expanded (``T... xs`` with T = int, float: ``int, float``,
    unnamed); None where the arguments cannot be matched to the parameters (a pack not last,
    more arguments than parameters), as the compiler, which took them, matched them by rules
    (deduction) kernarg does not follow."""
    bound = _bind_template_args(header, args)
    if bound is None:
        return None
    mapping, packs = bound[1], bound[2]

    def substituted(text, pack=None, arg=None):
        return re.sub(r"\b[A-Za-z_]\w*\b",
                      lambda m: arg if m.group(0) == pack else mapping.get(m.group(0), m.group(0)),
                      text)

    if not packs or "..." not in decl:
        return substituted(decl)
    pieces = []
    for piece in _split_params(decl, False) if decl.strip() else []:
        if "..." not in piece:
            pieces.append(substituted(piece))
            continue
        # `const T&... xs`: the pattern before the ..., once per element of the pack it names
        # (the declarator's name after the ... left out: one name cannot name them all).
        pattern = piece[:piece.index("...")]
        named = [p for p in packs if re.search(rf"\b{p}\b", pattern)]
        if len(named) != 1 or re.search(r"[^\s\w]", piece[piece.index("...") + 3:]):
            return None
        pieces += [substituted(pattern, named[0], arg) for arg in packs[named[0]]]
    return ", ".join(pieces)


# The last word of a template parameter that has no name (`typename`, `unsigned int`).
_UNNAMED_TEMPLATE_PARAMETER = frozenset((
    "typename", "class", "auto", "bool", "char", "short", "int", "long", "unsigned", "signed",
    "size_t"))


def _bind_template_args(header, args):
    """A template's parameter list ``header`` bound to the arguments ``args``: ``(every
    argument in order, its defaults filled in, {parameter name: argument}, {parameter pack's
    name: its arguments})``, or None where they cannot be matched (see
    _substitute_template_args)."""
    mapping, packs, full = {}, {}, []

    def substituted(text):
        return re.sub(r"\b[A-Za-z_]\w*\b", lambda m: mapping.get(m.group(0), m.group(0)), text)

    params = _items(header, False, True) if header.strip() else []
    for i, param in enumerate(params):
        declared, _, default = param.partition("=")
        ident = re.findall(r"[A-Za-z_]\w*", declared)
        if "..." in declared:           # a template parameter pack: the rest of the arguments
            if i != len(params) - 1:
                return None
            if len(ident) >= 2:
                packs[ident[-1]] = args[i:]
            full += args[i:]
            args = args[:i]
            continue
        if i < len(args):
            arg = args[i]
        elif default.strip():       # which may name the parameters before it: U = T
            arg = substituted(default.strip())
        else:
            arg = None              # deduced from the function's arguments
        full.append(arg)
        if len(ident) >= 2 and ident[-1] not in _UNNAMED_TEMPLATE_PARAMETER and arg is not None:
            mapping[ident[-1]] = arg
    if len(args) > len(params) - bool(packs):
        return None
    return full, mapping, packs


cdef Signature _new_signature(type cls, list specs, list names):
    cdef Signature sig = cls.__new__(cls)
    sig._build(specs, names)
    return sig


def _without_comments(source, bint same_length=False, bint blank_literals=False,
                      bint refuse_unclosed=False):
    """``source`` with each ``//`` and ``/* */`` comment replaced by a space, as the
    preprocessor does (a comment in a parameter list would add its words and ``*``s to the
    declaration); comment markers inside string and character literals are left alone, and a
    ``'`` inside a number is C++14's digit separator. ``same_length``: each character of a
    comment becomes a space (its newlines kept), so that an index in the result is one in
    ``source``. ``blank_literals``: so does each character inside a string or character
    literal (its quotes kept): brackets in them are not the program's. ``refuse_unclosed``:
    a ``/*`` comment that is not closed is a ValueError (the preprocessor's error), not a
    comment to the end."""
    if "/" not in source and not blank_literals:
        return source
    out = []
    i, n, start = 0, len(source), 0
    cdef Py_ssize_t passed = 0         # the end of the last literal or comment
    cdef Py_ssize_t separator = -1     # the last digit separator
    while i < n:
        ch = source[i]
        if ch == "'" and _in_number(source, i, passed, separator):
            separator = i
            i += 1
        elif ch == "/" and i + 1 < n and source[i + 1] in "/*":
            out.append(source[start:i])
            start = i
            if source[i + 1] == "/":
                i += 2
                while i < n and source[i] != "\n":
                    i += 2 if source[i] == "\\" else 1     # a \ newline continues it
            else:
                end = source.find("*/", i + 2)
                if end < 0 and refuse_unclosed:
                    raise ValueError(f"{source.strip()!r}: a /* comment is not closed")
                i = n if end < 0 else end + 2
            out.append(re.sub(r"[^\n]", " ", source[start:i]) if same_length else " ")
            start = passed = i
        elif ch == '"' or ch == "'":
            end = passed = _past_literal(source, i)
            if blank_literals:
                inner = min(end, len(source))
                if source[inner - 1] == ch and inner - 1 > i:
                    inner -= 1          # closed: keep the closing quote
                out.append(source[start:i + 1])
                out.append(re.sub(r"[^\n]", " ", source[i + 1:inner]))
                start = inner
            i = end
        else:
            i += 1
    out.append(source[start:])
    return "".join(out)


cdef Py_ssize_t _past_literal(str source, Py_ssize_t i):
    # Where the string or character literal whose opening quote is source[i] ends (one past
    # its closing quote; an unclosed one ends with its line). A raw string (_past_raw_string)
    # ends where its delimiter says, across lines, quotes and backslashes.
    cdef Py_ssize_t n = len(source)
    cdef Py_ssize_t end
    quote = source[i]
    if quote == '"':
        end = _past_raw_string(source, i)
        if end >= 0:
            return end
    i += 1
    while i < n and source[i] != quote and source[i] != "\n":
        i += 2 if source[i] == "\\" else 1
    return i + 1


_RAW_DELIMITER = re.compile(r'[^\s()\\"]{0,16}\(')


cdef Py_ssize_t _past_raw_string(str source, Py_ssize_t i):
    # Where the raw string literal whose opening quote is source[i] ends (one past its closing
    # quote, or the end of ``source`` where it is not closed), or -1 where it is not a raw
    # string: the quote follows R, LR, uR, UR or u8R as a token of its own, and up to 16
    # characters (not space, parentheses, backslash or quote) before a ( make its delimiter.
    # Its text, up to )delimiter", holds anything: newlines, quotes, backslashes, /* and }.
    if i == 0 or source[i - 1] != "R":
        return -1
    for prefix in ("u8R", "LR", "uR", "UR", "R"):
        start = i - len(prefix)
        if start >= 0 and source.startswith(prefix, start):
            break
    if start > 0 and (source[start - 1].isalnum() or source[start - 1] == "_"):
        return -1           # an identifier ending in R, then a string: FOOR"..."
    m = _RAW_DELIMITER.match(source, i + 1)
    if m is None:
        return -1
    end = source.find(")" + m.group(0)[:-1] + '"', m.end())
    return len(source) if end < 0 else end + len(m.group(0)) + 1


cdef bint _in_number(str source, Py_ssize_t i, Py_ssize_t lo=0, Py_ssize_t separator=-1):
    # The token before source[i] starts with a digit: 1'000'000, 0xFF'FF. ``lo``: where the
    # walk back may stop, the end of the last literal passed (its closing quote is no
    # separator); ``separator``: the last ' found to be one, whose token this is too if the
    # walk reaches it. (Without them, a walk over 'a''a''a'... or 1'0'1'0'... would cross
    # them all: quadratic in their number.)
    cdef Py_ssize_t j = i
    while j > lo and (source[j - 1].isalnum() or source[j - 1] in "_'"):
        j -= 1
        if j == separator:
            return True
    return j < i and source[j].isdigit()


# typedef float real;  /  using real = float;  /  typedef const real* ptr;  (scalars, vectors
# and pointers to them: no arrays, templates or functions)
# (The type does not run into another `typedef`: else each of many in one statement would be
# read to its end, quadratic in their number.)
_TYPEDEF = re.compile(r"\btypedef\s+((?:(?!\btypedef\b)[^;{}()\[\]&<>=])+?)(?:\s+|(?<=\*))"
                      r"([A-Za-z_]\w*)\s*;")
_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()\[\]&<>=]+?)\s*;")
# A pointer type as an alias declares it: `const real *` (the pointee, then its stars).
_POINTER_ALIAS = re.compile(r"(.*?)\s*((?:\*\s*(?:(?:const|volatile)\b\s*)*)+)")
# The qualifiers at the end of a type (a pointer's own), or before a name (`const ptr p`).
_TOP_QUALIFIERS = re.compile(r"(?:\b(?:const|volatile)\b\s*)+$")


def _source_aliases(source):
    """The names ``source`` declares for a type kernarg knows, with ``typedef`` or ``using``
    (``typedef float real;``, ``using index_t = std::int64_t;``, another such name), and its
    enumerations (their underlying types: _enum_type): ``{name: the type's canonical name, or
    None where the name is not known to be one}``, by every name code can give it. One at
    namespace scope is named alone (``real``: namespaces are not told apart) and with each
    tail of its namespaces (``lib::index_t``); a member of a struct (``struct K { using Index
    = unsigned; }``) only with its struct's name (``K::Index``), as code outside the struct
    names it (a struct template's members are not read: their types may depend on its
    arguments). A name declared for different types is None; one that is itself a type
    kernarg knows is left out. Read from the text outside conditionals (_unconditional)."""
    if not any(w in source for w in ("typedef", "using", "enum")):
        return {}
    declared = {}       # scope's names (a tuple) -> {name: written type, or ("enum", ...)}
    members = {}        # such a tuple -> how many of its names lead to its innermost struct
    for scope, text in _scoped_texts(_unconditional(source)):
        path = tuple(part for _, name in scope for part in name.split("::"))
        names = declared.setdefault(path, {})
        if path not in members:
            structs = [k for k, (kind, _) in enumerate(scope) if kind == "struct"]
            members[path] = sum(len(name.split("::")) for _, name in
                                scope[:structs[-1] + 1]) if structs else 0
        if isinstance(text, tuple):             # an enumeration's definition
            pairs = [text]
        else:
            pairs = [(m[2], m[1]) for m in _TYPEDEF.finditer(text)]
            pairs += [(m[1], m[2]) for m in _USING.finditer(text)]
            pairs += [(m[2], ("enum", m[1] is not None, m[3], None))
                      for m in _OPAQUE_ENUM.finditer(text)]
            # (An alias template is named with `<>`: `ptr<>`, for _substitute_aliases.)
            pairs += [(m[2] + "<>", ("template", m[1], m[3]))
                      for m in _ALIAS_TEMPLATE.finditer(text)]
        for name, written in pairs:
            before = names.get(name, written)
            if isinstance(before, tuple) and isinstance(written, tuple) and \
                    before[0] == "enum" and before[:3] == written[:3]:
                written = before if written[3] is None else written    # declared, defined
            elif before != written:
                written = None                  # two types (two branches, macros)
            names[name] = written

    resolved = {}

    def resolve(scope, name, depth=0):
        key = (scope, name)
        if key not in resolved:
            resolved[key] = None                # (an alias of itself)
            written = declared[scope][name]
            if isinstance(written, tuple) and written[0] == "template":
                resolved[key] = written[1:]     # (its parameters, its type as written)
            elif isinstance(written, tuple):
                resolved[key] = _enum_type(written, lambda w: lookup(scope, w, depth))
            elif written is not None:
                resolved[key] = lookup(scope, written, depth)
        return resolved[key]

    def lookup(scope, written, depth):
        """The canonical type ``written`` names in ``scope`` (``float``, ``const float*``),
        or None."""
        pointer = _POINTER_ALIAS.fullmatch(written.strip())
        if pointer is not None:
            # The pointee's own const counts (`const real*`); the pointer's does not.
            base = lookup(scope, pointer[1], depth) if pointer[1].strip() else None
            if base is None:
                # A name no alias or enumeration of the source has (`typedef struct Node*
                # NodePtr;`, `using QPtr = const Q*;`): a struct's, or a type from a header;
                # a pointer to it takes what a pointer to such a type takes (any memory).
                words = _TYPE_WORDS.sub(" ", pointer[1]).split()
                if len(words) != 1 or not _IDENTIFIER_PART.fullmatch(words[0]) or any(
                        words[0].rpartition("::")[2] in names for names in declared.values()):
                    return None
                base = words[0]
            const = re.search(r"\bconst\b", pointer[1]) is not None
            stars = re.sub(r"\s+", " ", _TOP_QUALIFIERS.sub("", pointer[2])).strip()
            if "*" in base:     # an alias of a pointer: its own const follows it
                return f"{base}{' const' if const else ''}{stars}"
            return f"{'const ' if const else ''}{base}{stars}"
        words = _TYPE_WORDS.sub(" ", written).split()
        found = _canonical(" ".join(words))
        if found is not None or len(words) != 1 or depth > _MAX_NESTING:
            return found
        parts = re.sub(r"\s+", "", words[0]).removeprefix("::").split("::")
        for k in range(len(scope), -1, -1):     # innermost scope first, as C++ looks up
            inner = scope[:k] + tuple(parts[:-1])
            if parts[-1] in declared.get(inner, ()):
                return resolve(inner, parts[-1], depth + 1)
        return None

    found = {}
    for path, names in declared.items():
        # A member is named from outside its struct, so with the struct's name at least.
        tails = range(len(path) + 1) if not members[path] else range(members[path])
        for name in names:
            value = resolve(path, name)
            for k in tails:
                key = "::".join(path[k:] + (name,))
                if key == name and _canonical(name) is not None:
                    continue                    # `typedef int int32_t;` itself
                found[key] = value if found.get(key, value) == value else None
    return found


def _scoped_texts(text):
    """The declarations of ``text`` by the scope they are in: ``(scope, text)`` for each stretch
    between braces at namespace scope or in a struct's body (outside function bodies and
    templates), the scope a tuple of ``(kind, name)``, outermost first (kind "namespace" or
    "struct"; an anonymous namespace and ``extern "C"`` add none); and ``(scope, (name,
    ("enum", scoped, underlying type as written or None, enumerators)))`` for each named
    enumeration defined there. One pass over the braces; what is nested in more than
    _MAX_NESTING names (``a::b`` is two) is not read (no code nests so deep; reading it would
    be quadratic)."""
    frames = []         # for each open brace: (kind, name), or None where nothing inside is read
    scope = ()
    cdef Py_ssize_t hidden = 0          # open braces inside one that is read no further
    cdef Py_ssize_t last = 0
    for i, ch in _code_braces(text):
        stretch = text[last:i]
        last = i + 1
        if not hidden:
            yield scope, stretch
        if ch == "{":
            frame = None if hidden else _scope_opened(stretch)
            if frame is not None and frame[1] is not None and \
                    sum(name.count("::") + 1 for _, name in scope) + \
                    frame[1].count("::") >= _MAX_NESTING:
                frame = None
            if frame is not None and frame[0] == "enum":
                frame += (i,)           # read when it closes
            elif frame is not None and frame[1] is not None:
                scope += (frame[:2],)
            frames.append(frame)
            hidden += frame is None or frame[0] == "enum"
        elif frames:
            frame = frames.pop()
            if frame is None:
                hidden -= 1
            elif frame[0] == "enum":
                hidden -= 1
                names = [frame[1]] if frame[1] is not None else []
                if frame[4]:            # `typedef enum [Tag] { ... } Name;`
                    after = _TYPEDEF_NAME.match(text, i + 1)
                    if after is not None:
                        names.append(after[1])
                for name in names if not hidden else ():
                    yield scope, (name, ("enum", frame[2], frame[3], text[frame[5] + 1:i]))
            elif frame[1] is not None:
                scope = scope[:-1]
    if not hidden:
        yield scope, text[last:]


# __align__(N) and alignas(N), any number of them.
# (__align__ is NVRTC's macro for the GNU attribute, which is read as it is.)
_ALIGNED_ATTRIBUTE = r"__attribute__\s*\(\(\s*(?:__)?aligned(?:__)?"
# What one holds: a literal, or since session 64 a constant expression, or a type
# (`alignas(sizeof(T) * N)`, `alignas(double)`; parentheses one deep, the length bounded).
_ALIGN_VALUE = r"(?:[^(){};]|\([^(){};]{0,200}\)){1,200}"
_ALIGN_SPEC = (rf"(?:(?:(?:__align__|alignas)\s*\({_ALIGN_VALUE}\)|"
               rf"{_ALIGNED_ATTRIBUTE}\s*\({_ALIGN_VALUE}\)\s*\)\))\s*)*")
# What a `{` opens, from the text since the statement before (_scope_opened): a namespace
# (`inline` or not, `a::b`), `extern "C"` (its literal blanked too), a struct or class that is
# no template (`struct __align__(16) K final : Base`), an enumeration (`enum class E : short`).
_NAMESPACE_HEAD = re.compile(r"(?:inline\s+)?namespace\b\s*([\w:\s]*)")
# `extern "C"` and `extern "C++"`, also with the literal blanked (`extern " "`), as the readers of
# structs and typedefs see it.
_EXTERN_C = r'extern\s*"(?:C|C\+\+| | {3})"'
_EXTERN_HEAD = re.compile(_EXTERN_C)
_CLASS_HEAD = re.compile(rf"(?:typedef\s+)?(?:struct|class|union)\s+{_ALIGN_SPEC}([A-Za-z_]\w*)\s*"
                         rf"{_ALIGN_SPEC}(?:final\b\s*)?(?::(?!:)[^{{}};]*)?")
_ENUM_HEAD = re.compile(r"(typedef\s+)?enum\b\s*(class\b|struct\b)?\s*([A-Za-z_]\w*)?\s*"
                        r"(?::(?!:)\s*([^{};]+?))?\s*")
_DIRECTIVE_LINES = re.compile(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*$")     # (continued too)
_ACCESS_LABELS = re.compile(r"\s*(?:(?:public|private|protected)\s*:(?!:)\s*)*")
_TYPEDEF_NAME = re.compile(r"\s*([A-Za-z_]\w*)\s*;")
# `template <class T> using ptr = T*;` (a parameter list without <>; the type's length bounded).
_ALIAS_TEMPLATE = re.compile(r"\btemplate\s*<([^<>;{}]*)>\s*using\s+([A-Za-z_]\w*)\s*=\s*"
                             r"([^;{}]{1,400}?)\s*;")
# `enum class E : short;`, an enumeration declared before it is defined (or never). (The type's
# length bounded: many `enum E :` before a `;` would each be read to it.)
_OPAQUE_ENUM = re.compile(r"\benum\s+(?:(class|struct)\s+)?([A-Za-z_]\w*)\s*(?::(?!:)\s*"
                          r"([^;{}]{1,200}?))?\s*;")


def _scope_opened(str stretch):
    """What the ``{`` after ``stretch`` opens: ``("namespace", name or None)``, ``("struct",
    name)``, ``("enum", name or None, scoped, underlying type as written or None, whether a
    typedef names it)``, or None (a function's body, an initializer, a template, a union:
    nothing in it is read)."""
    head = stretch[stretch.rfind(";") + 1:]
    if len(head) > 2000:
        return None     # no declaration kernarg reads has so long a head
    if "#" in head:     # the directives before it: `#include <x>` then `namespace lib {`
        head = _DIRECTIVE_LINES.sub(" ", head)
    head = head[_ACCESS_LABELS.match(head).end():].strip()
    m = _NAMESPACE_HEAD.fullmatch(head)
    if m is not None:       # (`a::inline b`: C++20's inline namespace in a nested name)
        parts = [p for p in re.split(r"\s*::\s*", re.sub(r"\binline\b", " ", m[1]).strip())
                 if p]
        return ("namespace", "::".join(parts) or None)
    if _EXTERN_HEAD.fullmatch(head):
        return ("namespace", None)
    m = _CLASS_HEAD.fullmatch(head)
    if m is not None:
        return ("struct", m[1])
    m = _ENUM_HEAD.fullmatch(head)
    if m is not None:
        return ("enum", m[3], m[2] is not None, m[4], m[1] is not None)
    return None


# An integer constant expression's tokens: a literal, a character literal, a name, an operator.
_CONSTANT_TOKEN = re.compile(r"\s*(?:((?:0[xX][0-9a-fA-F']+|0[bB][01']+|[0-9][0-9']*)[uUlL]*)"
                             r"|'([^'\\\n\x80-\U0010ffff])'|([A-Za-z_]\w*)|(<<|>>|[-+~!*/%&|^()]))")
# Binary operators by precedence (C++'s: * / % above + -, above the shifts, above & ^ |).
_BINARY_LEVELS = (("|",), ("^",), ("&",), ("<<", ">>"), ("+", "-"), ("*", "/", "%"))


cdef bint _out_of(value, tuple kind):
    """Whether ``value`` is outside integer type ``kind`` ((bits, unsigned))."""
    bits, unsigned = kind
    if unsigned:
        return not 0 <= value < (1 << bits)
    return not -(1 << (bits - 1)) <= value < (1 << (bits - 1))


def _constant_value(str text, dict known):
    """(value, type: (bits, unsigned)) of the integer constant expression ``text`` as C++ (on
    LP64) evaluates it: literals in their types, ``true``/``false``, character literals, the
    names in ``known`` (name -> (value, type)), parentheses, unary ``+ - ~ !`` and binary ``*
    / % + - << >> & ^ |``, each operand promoted and converted as C++'s usual arithmetic
    conversions do, unsigned results wrapping, ``>>`` of a negative value arithmetic (as
    NVRTC shifts it). None for anything else, and where the compiler would refuse it as no
    constant (a signed overflow, a division by zero, a shift past the width, a left shift of
    a negative value) or takes it otherwise in another C++ standard (``1 << 31`` is INT_MIN
    from C++14, ``-1 << 1`` a value only from C++20): kernarg does not guess."""
    tokens = []
    cdef Py_ssize_t at = 0
    text = text.strip()
    while at < len(text):
        m = _CONSTANT_TOKEN.match(text, at)
        if m is None or m.end() == at:
            return None
        tokens.append(m)
        at = m.end()
    if not tokens or len(tokens) > 200:
        return None
    position = [0]
    try:
        found = _constant_binary(tokens, position, 0, known)
    except (ValueError, ZeroDivisionError, IndexError):
        return None
    if found is None or position[0] != len(tokens):
        return None
    return found


def _promoted(tuple operand):
    """An integral promotion: types below int (bool, char, short) become int."""
    value, kind = operand
    return (value, (32, False)) if kind[0] < 32 else operand


def _converted(tuple a, tuple b):
    """The type C++'s usual arithmetic conversions give promoted operands ``a`` and ``b``."""
    (bits_a, unsigned_a), (bits_b, unsigned_b) = a[1], b[1]
    if unsigned_a == unsigned_b:
        return (max(bits_a, bits_b), unsigned_a)
    unsigned_bits, signed_bits = (bits_a, bits_b) if unsigned_a else (bits_b, bits_a)
    if unsigned_bits >= signed_bits:
        return (unsigned_bits, True)
    return (signed_bits, False)     # (a long holds every unsigned int)


def _constant_result(value, tuple kind):
    """``value`` in type ``kind``: wrapped if unsigned; a signed overflow raises ValueError."""
    if kind[1]:
        return (value % (1 << kind[0]), kind)
    if _out_of(value, kind):
        raise ValueError("signed overflow")
    return (value, kind)


def _constant_binary(list tokens, list position, int level, dict known):
    if level == len(_BINARY_LEVELS):
        return _constant_unary(tokens, position, known)
    left = _constant_binary(tokens, position, level + 1, known)
    while position[0] < len(tokens) and tokens[position[0]][4] in _BINARY_LEVELS[level]:
        op = tokens[position[0]][4]
        position[0] += 1
        right = _constant_binary(tokens, position, level + 1, known)
        left, right = _promoted(left), _promoted(right)
        if op in ("<<", ">>"):
            kind, shift = left[1], right[0]
            if shift < 0 or shift >= kind[0]:
                raise ValueError("shift")
            if op == ">>":      # (of a negative value: arithmetic, as NVRTC's and C++20's)
                left = (left[0] >> shift, kind)
            elif left[0] < 0:
                raise ValueError("shift")       # (refused before C++20)
            elif kind[1]:
                left = _constant_result(left[0] << shift, kind)
            elif left[0] << shift >= 1 << kind[0]:
                raise ValueError("shift")       # (past the unsigned type: no value)
            else:       # C++14's rule: as the unsigned type holds it, then converted
                value = left[0] << shift
                left = (value - (1 << kind[0]) if value >> (kind[0] - 1) else value, kind)
            continue
        kind = _converted(left, right)
        a = left[0] % (1 << kind[0]) if kind[1] else left[0]
        b = right[0] % (1 << kind[0]) if kind[1] else right[0]
        if op == "+":
            value = a + b
        elif op == "-":
            value = a - b
        elif op == "*":
            value = a * b
        elif op in ("/", "%"):
            q = abs(a) // abs(b)            # (ZeroDivisionError for b == 0)
            q = q if (a < 0) == (b < 0) else -q     # toward zero, as C++ divides
            value = q if op == "/" else a - b * q
        elif op == "&":
            value = a & b
        elif op == "^":
            value = a ^ b
        else:
            value = a | b
        left = _constant_result(value, kind)
    return left


def _constant_unary(list tokens, list position, dict known):
    m = tokens[position[0]]
    position[0] += 1
    if m[4] in ("+", "-", "~", "!"):
        operand = _promoted(_constant_unary(tokens, position, known))
        value, kind = operand
        if m[4] == "+":
            return operand
        if m[4] == "-":
            return _constant_result(-value, kind)
        if m[4] == "~":
            return _constant_result(~value, kind)
        return (int(value == 0), (8, False))    # (a bool, promoted where it is used)
    if m[4] == "(":
        found = _constant_binary(tokens, position, 0, known)
        if tokens[position[0]][4] != ")":
            raise ValueError("parenthesis")
        position[0] += 1
        return found
    if m[1] is not None:
        value = _default_value(m[1])
        literal = _INT_LITERAL.fullmatch(m[1])
        if type(value) is not int or literal is None:
            raise ValueError("literal")
        kind = _literal_type(m[1][literal.end(1):], literal[1][:1] in "123456789", value)
        if kind is None:
            raise ValueError("literal")
        return (value, kind)
    if m[2] is not None:
        return (ord(m[2]), (8, False))          # a char (signed, 8 bits)
    if m[3] in ("true", "false"):
        return (int(m[3] == "true"), (8, False))
    if m[3] in known and known[m[3]][1] is not None:
        return known[m[3]]
    raise ValueError("name")


def _enum_type(entry, lookup):
    """The canonical name of the underlying type of enumeration ``entry`` (``("enum", scoped,
    underlying type as written or None, enumerators or None)``), or None where kernarg cannot
    tell: a fixed type (``enum E : short``) as ``lookup`` names it; ``int`` for a scoped one
    without (``enum class``); else, as NVRTC chooses, the first of int, unsigned int, long and
    unsigned long that holds every enumerator, where each is a literal (or the one before plus
    one)."""
    _, scoped, fixed, body = entry
    if fixed is not None:
        return lookup(fixed)
    if scoped:
        return "int"
    if body is None:
        return None     # declared, not defined: it has no fixed type, and is no complete type
    values, value, kind = [], -1, (32, False)
    known = {}      # the enumerators before: name -> (value, its type before the closing brace)
    for item in _items(body, False):
        item = item.strip()
        if not item:
            continue
        name, _, given = item.partition("=")
        if given.strip():
            found = _constant_value(given, known)
            if found is None:
                return None
            value, kind = found
        else:
            # (Before the closing brace, the previous one's type, where it holds the value
            # one more; otherwise one C++ leaves unspecified, wide enough: NVRTC's unsigned
            # long after an unsigned int's 4294967295, which kernarg does not guess, so that
            # an expression naming it is not evaluated.)
            value += 1
            if kind is not None and _out_of(value, kind):
                kind = None
        known[name.strip()] = (value, kind)
        values.append(value)
    low, high = min(values, default=0), max(values, default=0)
    for name, bits, signed in (("int", 32, True), ("unsigned int", 32, False),
                               ("long", 64, True), ("unsigned long", 64, False)):
        if signed and -(1 << (bits - 1)) <= low and high < 1 << (bits - 1):
            return name
        if not signed and low >= 0 and high < 1 << bits:
            return name
    return None


_NAMESPACE_OPENING = re.compile(rf"(?:\bnamespace(?:\s+[\w:]+)?|\b{_EXTERN_C})\s*$")


_IF_ZERO_LINE = r"[ \t]*#[ \t]*if[ \t]+(?:0+|\(\s*0+\s*\)|false)[ \t\r]*$"
_IF_ZERO = re.compile(_IF_ZERO_LINE)
_HAS_IF_ZERO = re.compile("(?m)^" + _IF_ZERO_LINE)
_CONDITIONAL = re.compile(r"[ \t]*#[ \t]*(if|ifdef|ifndef|elif|else|endif)\b")


def _without_dead_branches(str source, str blanked=None):
    """``source`` (without comments) with what ``#if 0`` leaves out blanked, as the
    preprocessor always leaves it out (a declaration kept there is none), and the directives
    that only choose the live branch (``#if 0`` ... ``#else``, or ``#elif X``, which becomes
    ``#if X``) blanked too; each line keeps its length and newline, so that an index in the
    result is one in ``source``. The directives are read from ``blanked``, ``source`` with its
    literals blanked (_without_comments; default: ``source`` itself), where a line of a raw
    string is none."""
    if blanked is None:
        blanked = source
    if "#" not in blanked or _HAS_IF_ZERO.search(blanked) is None:
        return source
    lines = source.split("\n")
    directives = blanked.split("\n")
    # Per open conditional: "dead" (an #if 0 group, in a branch left out), "live" (an #if 0
    # group, in its #else: kept, its #endif blanked), "other" (any other, kept as it is), or
    # "nested" (one inside a dead branch: left out with it).
    frames = []
    cdef Py_ssize_t dead = 0        # how many frames are "dead" (0 or 1: a counter, not a
    #                                 search of the frames, so that deep nesting stays linear)
    for k, line in enumerate(lines):
        m = _CONDITIONAL.match(directives[k])
        directive = m[1] if m is not None else None
        blank = dead > 0
        if directive in ("if", "ifdef", "ifndef"):
            if dead:
                frames.append("nested")
            elif _IF_ZERO.fullmatch(directives[k]):
                frames.append("dead")
                dead += 1
                blank = True
            else:
                frames.append("other")
        elif directive is not None and frames:
            top = frames[-1]
            if directive == "endif":
                frames.pop()
                dead -= top == "dead"
                blank = top != "other"
            elif top == "dead":
                dead -= 1
                if directive == "else":
                    frames[-1] = "live"
                    blank = True
                else:               # #elif X after #if 0: the group is now #if X
                    frames[-1] = "other"
                    line = lines[k] = line.replace("elif", "if  ", 1)
                    blank = False
            elif top == "live":     # #else or #elif after the live branch: left out
                frames[-1] = "dead"
                dead += 1
                blank = True
        if blank:
            lines[k] = re.sub(r"[^\n]", " ", line)
    return "\n".join(lines)


_DIRECTIVE_LINE = re.compile(r"(?m)^[ \t]*#")
_DIRECTIVE = re.compile(r"\s*#\s*(if|ifdef|ifndef|elif|else|endif|define)\b\s*(\w*)")


def _unconditional(source):
    """``source``'s lines that the preprocessor keeps whatever is defined: those outside every
    #if/#ifdef/#ifndef block, an include guard (``#ifndef X`` then ``#define X``) excepted.
    Which branch of a conditional the compiler took is not known here, and an alias read from
    the other one would give a parameter the wrong type."""
    kept = []
    frames = []         # for each open conditional: whether it is an include guard
    cdef Py_ssize_t others = 0      # how many are not (a counter: deep nesting stays linear)
    guard = None        # the name an #ifndef just opened, until the next line
    for line in source.split("\n"):
        m = _DIRECTIVE.match(line)
        directive = m[1] if m is not None else None
        if directive in ("if", "ifdef", "ifndef"):
            frames.append(False)
            others += 1
            guard = m[2] if directive == "ifndef" else None
            continue
        if directive == "define" and guard is not None and m[2] == guard and frames:
            others -= not frames[-1]
            frames[-1] = True
        guard = None
        if directive in ("elif", "else") and frames:
            others += frames[-1]
            frames[-1] = False
        elif directive == "endif" and frames:
            others -= not frames.pop()
        elif not others:
            kept.append(line)
    return "\n".join(kept)


# A name, qualified or not (`real`, `::lib::index_t`), as a whole.
_TYPE_NAME = re.compile(r"(?<![\w:])(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*\b(?!\s*::)")


def _declared_specs(list pieces, list originals, list ptx_specs, structs, str kernel_name):
    """(specs, names, declarations) of a kernel's parameters, declared as ``pieces`` (with the
    source's aliases substituted) or as written (``originals``), checked against the PTX's
    ``ptx_specs``; structs laid out by ``structs`` (_SourceStructs), which records the array
    extents it asks the compiler for (see _SourceStructs._shape)."""
    specs, names, declared = [], [], []
    for piece, original, ptx_spec in zip(pieces, originals, ptx_specs):
        # (An object of the parameter's type, as the compiler names it where the kernel is
        # declared, for the extents kernarg asks it: see _evaluate_extents.)
        path = f"(*static_cast<{_declared_type(original)}*>(nullptr))."
        spec, name = _declared_spec(piece, ptx_spec, structs, path)
        if piece != original and not _agrees_with_ptx(spec, ptx_spec):
            # An alias read from the text that is not the one the compiler used (one in
            # another scope, hidden by a local name): the parameter as written.
            piece = original
            spec, name = _declared_spec(piece, ptx_spec, structs, path)
        if spec.header_aligned and spec.size == ptx_spec.size:
            spec.align = ptx_spec.align     # the source's own declaration of the type
        if (spec.size, spec.align) != (ptx_spec.size, ptx_spec.align):
            raise ValueError(f"{kernel_name}: {piece.strip()!r} is {spec.size} bytes aligned "
                             f"to {spec.align} here but {ptx_spec.size}/{ptx_spec.align} in "
                             "the PTX")
        specs.append(spec)
        names.append(name)
        declared.append(piece)
    return specs, names, declared


def _declared_spec(piece, ptx_spec, structs, path=None):
    """(spec, name) of parameter declaration ``piece``; where kernarg cannot type it (a struct
    of the source, a type it has no name for), the PTX's spec with the declared name. A struct
    ``structs`` (_SourceStructs) lays out as the PTX does is that struct, field by field.
    ``path``: what names a member of an object of the parameter's type where the kernel is
    declared (``(*static_cast<P*>(nullptr)).``), or None (see _SourceStructs._shape)."""
    try:
        return _parse_c_param(piece)
    except ValueError:
        name = _last_identifier(piece)
        with structs._object(path):
            layout = structs.by_value(piece, name)
        if layout is None or (layout.itemsize, layout.metadata["align"]) \
                != (ptx_spec.size, ptx_spec.align):
            return ptx_spec, name
        # struct None: a dict or tuple is built field by field from `record`; any other value
        # is taken as the struct's bytes, as an opaque parameter's are.
        return _Spec(C_STRUCT, ptx_spec.size, ptx_spec.align, layout.metadata["name"],
                     record=layout), name


# `struct Name {`, `typedef struct [Tag] {`, with __align__(N) / alignas(N) /
# __attribute__((aligned(N))) before or after the name (NVRTC refuses the attribute after it),
# `final`, and base classes (`: public B, Box<int>`, group 5: read up to 2,000 characters, and
# not past another `struct`, so that a text of many `struct a :` is read in linear time).
# A class too (since session 62), but not an `enum class` (_struct_definitions), and a union
# (`union {` too: an unnamed one may be a member). Other attributes are not matched: their
# parameters stay opaque.
_STRUCT_HEAD = re.compile(rf"(\btypedef\s+)?\b(?:struct|class|union)\b\s*({_ALIGN_SPEC})"
                          rf"([A-Za-z_]\w*)?\s*({_ALIGN_SPEC})(?:\bfinal\b\s*)?"
                          r"(?::(?!:)((?:(?!\bstruct\b)[^{};]){1,2000}))?\{")
_TEMPLATE_HEAD = re.compile(r"\btemplate\s*<([^;{}]*)>\s*$")
_ALIGN_ITEM = re.compile(rf"(__align__|alignas|{_ALIGNED_ATTRIBUTE})\s*\(({_ALIGN_VALUE})\)")
# A data member declaration (what _data_members leaves) kernarg does not lay out: a lone `:`
# (but a bit-field's width: see _BIT_WIDTH), an attribute (`(`), a reference, an
# unnamed class, and what
# _data_members does not expect among data members.
_NOT_A_FIELD = re.compile(r"(?<!:):(?!:)|[(){}&~\[\]]|\b(?:static|template|using|typedef|friend|"
                          r"virtual|operator|class|public|private|protected)\b")
# A field's array extents, `[4][K * 2]` (what is in each bracket: _SourceStructs._shape), read
# backwards from the declarator's end (_trailing_dims: matched forwards, a declarator of many
# brackets not at its end was read in quadratic time).
_FIELD_DIMS_REVERSED = re.compile(r"(?:\s*\][^\[\]]*\[)+")
# What follows an unnamed struct's closing brace: the member it declares (its name, its
# extents), or `;` for an anonymous one (group 1 None).
_UNNAMED_DECLARATOR = re.compile(r"\s*(?:;|([A-Za-z_]\w*)\s*((?:\[[^\[\]]*\]\s*)*)[;,])")
_FIELD_FORMATS = {C_BOOL: "?", C_I8: "i1", C_U8: "u1", C_I16: "i2", C_U16: "u2", C_I32: "i4",
                  C_U32: "u4", C_I64: "i8", C_U64: "u8", C_F16: "f2", C_F32: "f4", C_F64: "f8"}


def _field_dtype(code):
    """The numpy dtype of a struct field of scalar ``code``; ``__nv_bfloat16``, which numpy
    has no type for without ml_dtypes, is its 16 bits, converted as the code its metadata
    names."""
    if code == C_BF16:
        return np.dtype(np.uint16, metadata={"code": C_BF16})
    return np.dtype(_FIELD_FORMATS[code])


class _SourceStructs:
    """The plain structs a kernel's source defines at namespace scope, outside conditionals,
    laid out as C lays them out, for from_source: fields of scalar, vector, pointer and
    fixed-size array types, bit-fields, and structs and unions defined before or in place,
    their member functions left out (_data_members). A struct kernarg cannot lay out (a
    union whose T{} sets a member, a virtual function, a member it cannot tell from data, a
    type it has no name for, a bit-field's width the compiler is not asked (_bit_field), a
    name defined twice, `#pragma pack`) is None, and its parameters stay opaque bytes. An
    array extent or a bit-field's width that is not a literal is the compiler's to evaluate
    (see _shape, _bit_width): the structs holding one are None until they are laid out again
    with ``extents``, the compiler's answers."""

    def __init__(self, source, aliases, parent=None, extents=None):
        self.source = source
        self.aliases = aliases
        self.bodies = None      # name -> (body, head: _lay_out's) or None; read on first use
        self.templates = None   # name -> (body, head, parameters) or None
        self.layouts = {}       # name -> numpy dtype or None, as laid out
        self.depth = 0          # structs being laid out, one inside another
        self.scope = ""         # the one being laid out (Op::Params): where names are looked up
        # Its base classes (their keys, each before its own bases'): where names are looked up
        # after its own members, before the scopes around it (_base_keys).
        self.bases = ()
        self.aliases_of_structs = None      # (_struct_aliases of the source, read on first use)
        # The reader of the source around this one, where this one reads the members of a
        # struct template's instantiation (Op<float>'s, for Op<float>::Params): the names it
        # does not define are looked up there.
        self.parent = parent
        # The reader of the whole source (this one, or its parent's root), whose macros say
        # how member functions are compiled: its `specifiers`, read on first use
        # (_specifier_macros).
        self.root = self if parent is None else parent.root
        self.specifiers = None
        self.unnamed = 0        # unnamed structs and unions laid out (_unnamed_members)
        # (The root's:) what the compiler reads, where the kernel is declared, as naming a
        # member of an object of the struct being laid out, before the member's name
        # (`(*static_cast<P*>(nullptr)).q.`, `....B::` for a base B), or None; the extents
        # asked of the compiler (query -> (path, member name, dimension), see _unchecked;
        # alignments and sizes too: _asked), and its answers (query -> value). See
        # _shape.
        self.path = None
        self.wanted = {}
        self.extents = {} if extents is None else extents
        self.pending = 0        # extents met that are not known yet
        # The layouts (keys of self.layouts) that are None for an extent not known yet: one
        # met again says so (_known), so that what holds it is read on (see _lay_out).
        self.waiting = set()

    def _scan(self):
        bodies, templates = {}, {}
        source = self.source
        if ("struct" in source or "class" in source or "union" in source) and \
                not _PRAGMA_PACK.search(source):
            # A directive inside a definition: which members the compiler saw depends on
            # macros kernarg does not evaluate.
            directives = [m.start() for m in _DIRECTIVE_LINE.finditer(source)]
            conditional = {name for opening, _, closing, names, _ in _struct_definitions(source)
                           if _any_between(directives, opening, closing) for name in names}
            text = _with_head_macros_marked(_unconditional(source), source)
            scopes = _namespace_braces(text)
            definitions = list(_struct_definitions(text))
            # A struct defined in the body of one at namespace scope (or in one of those, ...)
            # is its member type, named Outer::Inner; one inside a function is nobody's.
            keys = _struct_keys(text, {opening: names[0] for opening, _, _, names, header
                                       in definitions if names and header is None}, scopes)
            for opening, align, closing, names, header in definitions:
                if opening not in scopes:
                    if opening not in keys:
                        continue    # a local one, or a member template
                    names = [keys[opening]]     # a member struct
                found = bodies if header is None else templates
                # The body, as where it is in the text: sliced only for the structs laid out
                # (each body apart, nested definitions were copied again at each depth: 8,000
                # nested took 650 MB).
                body = _Span(text, opening + 1, closing)
                for name in names:
                    entry = None if name in conditional else (body, align) + (
                        () if header is None else (header,))
                    before = found.get(name, entry)
                    found[name] = entry if before is entry or (
                        before is not None and entry is not None and before[1:] == entry[1:]
                        and str(before[0]) == str(entry[0])) else None
            # A struct template with a specialization (`struct Box<int, 2> {`, partial or
            # explicit) may be laid out otherwise for some arguments: none of it is read.
            for name in _SPECIALIZED.findall(text):
                if name in templates:
                    templates[name] = None
        self.bodies = bodies
        self.templates = templates

    def by_value(self, piece, name):
        """The layout of the struct parameter declaration ``piece`` names, or None."""
        plain = _without_attributes(piece)
        if plain is None:
            return None
        plain = re.sub(r"\s*::\s*", "::", plain)        # `ns :: Q`
        if "<" in plain:
            member = _TEMPLATE_MEMBER.fullmatch(plain)
            if member is not None:
                return self._template_member_layout(member, name)
            return self._template_layout(plain, name)
        words = [w for w in re.findall(r"(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*|\S", plain)
                 if w not in _QUALIFIERS and w not in ("struct", "class", "union", "typename")]
        if name is not None and words[-1:] == [name]:
            words = words[:-1]
        if len(words) != 1:
            return None
        if words[0].startswith(_UNNAMED):
            return self._known(words[0])     # (an unnamed one of this source's)
        named = self._named(words[0])
        if named not in self.bodies and named not in self.templates:
            alias = self._alias_of(words[0])
            if alias is not None:
                # An alias (`using P = Box<float, 4>;`): its type, read where it is declared.
                written, owner = alias
                self.depth += 1
                try:
                    with self._read_in(owner):
                        return self.by_value(f"{written} {name}" if name else written, name)
                finally:
                    self.depth -= 1
        if self.parent is not None and (named not in self.bodies or "::" in words[0] and
                                        named == words[0].rpartition("::")[2]):
            # (A name the template's members use is looked up around the template, at
            # namespace scope: not in what the parent is laying out.)
            with self.parent._read_in(""):
                return self.parent.by_value(piece, name)
        return self.layout(named)

    @contextlib.contextmanager
    def _read_in(self, scope):
        """Names looked up from struct ``scope`` ("": namespace scope), with no bases, while
        the block runs (_named, _alias_of, _substitute_aliases); as before, after it."""
        outer = self.scope, self.bases
        self.scope, self.bases = scope, ()
        try:
            yield
        finally:
            self.scope, self.bases = outer

    @contextlib.contextmanager
    def _object(self, path):
        """The root's ``path`` (what names a member of the object being laid out, see
        _shape) while the block runs; as before, after it."""
        root = self.root
        outer, root.path = root.path, path
        try:
            yield
        finally:
            root.path = outer

    def _alias_of(self, written):
        """(type as written, where it is read) of the alias of a struct type that ``written``
        names, looked up as _named looks a struct up, or None (no such alias of this
        source, one declared for two types, or aliases nested past _MAX_NESTING)."""
        if self.aliases_of_structs is None:
            self.aliases_of_structs = _struct_aliases(_unconditional(self.source))
        if not self.aliases_of_structs or self.depth >= _MAX_NESTING:
            return None
        parts = written.removeprefix("::").split("::")
        scope = self.scope.split("::") if self.scope else []
        candidates = ["::".join(scope[:k] + parts) for k in range(len(scope), 0, -1)]
        candidates[1:1] = ["::".join([b] + parts) for b in self.bases]
        candidates += ["::".join(parts[k:]) for k in range(len(parts))]
        return next((self.aliases_of_structs[c] for c in candidates
                     if c in self.aliases_of_structs), None)

    def _known(self, key):
        """The layout ``key`` names, laid out before (None where it is not, or is None)."""
        if key in self.waiting:
            self.root.pending += 1      # (None until an extent is known: _lay_out reads on)
        return self.layouts.get(key)

    def _named(self, written):
        """The struct a type name written in the struct being laid out (or a parameter) means:
        C++ looks it up in the enclosing structs, innermost first (``Params`` in Op's body:
        ``Op::Params``); namespaces are not told apart, so a qualified name is tried without
        its leading parts too (``ns::Op::Params``, ``Op::Params``, ``Params``)."""
        if self.bodies is None:
            self._scan()
        parts = written.removeprefix("::").split("::")
        scope = self.scope.split("::") if self.scope else []
        candidates = ["::".join(scope[:k] + parts) for k in range(len(scope), 0, -1)]
        # (After the struct's own members, its bases': `struct D : B { Inner i; }`.)
        candidates[1:1] = ["::".join([b] + parts) for b in self.bases]
        # (Where another reader holds the source around this one, only the name as written:
        # `MyKernel::Params` in Gemm<T>'s members is not Gemm's own Params.)
        candidates += ["::".join(parts[k:]) for k in
                       range(len(parts) if self.parent is None else 1)]
        return next((c for c in candidates if c in self.bodies), parts[-1])

    def _instantiated(self, m, name):
        """For a match ``m`` of _TEMPLATE_ID or _TEMPLATE_MEMBER naming parameter (or field)
        ``name``: ``(the reader whose source defines the struct template, its entry there, the
        arguments, the instantiation's name: Box<short, 3>)``, or None where no source it
        reads defines that template (or one with a specialization)."""
        if (m["name"] or None) != name:
            return None
        tname = m["template"].rpartition("::")[2]
        reader = self
        while True:
            if reader.bodies is None:
                reader._scan()
            entry = reader.templates.get(tname)
            if entry is not None or reader.parent is None or tname in reader.templates:
                break
            reader = reader.parent      # not this source's: the source around it
        if entry is None:
            return None
        args = [a.strip() for a in _items(m["args"], False, True)] if m["args"].strip() else []
        return reader, entry, args, f"{tname}<{', '.join(args)}>"

    def _template_layout(self, plain, name):
        """The layout of an instantiation of a struct template of the source (``Box<short,
        3>``: its members with the arguments, or the parameters' defaults, substituted), or
        None."""
        m = _TEMPLATE_ID.fullmatch(plain)
        found = self._instantiated(m, name) if m is not None else None
        if found is None:
            return None
        reader, (body, head, header), args, key = found
        if key not in reader.layouts:
            reader.layouts[key] = None      # (one that contains itself has no layout)
            pending = self.root.pending
            members = _substitute_template_args(str(body), header, args)
            if head[2] is not None and members is not None:    # its bases: `: Base<T>`
                bases = _substitute_template_args(head[2], header, args)
                if bases is None:
                    members = None
                else:
                    head = (head[0], head[1], bases) + head[3:]
            # Among instantiations nested deeper are some without end (`template <int N>
            # struct S { S<N + 1> s; }`, which no compiler instantiates).
            if members is not None and reader.depth < _MAX_NESTING:
                reader.depth += 1
                # (Its members' names are looked up in it, then at namespace scope: not in
                # the struct that holds it, being laid out.)
                try:
                    with reader._read_in(""):
                        reader.layouts[key] = reader._lay_out(key, members, head)
                finally:
                    reader.depth -= 1
            if self.root.pending != pending:
                reader.waiting.add(key)
            return reader.layouts[key]
        return reader._known(key)

    def _template_member_layout(self, m, name):
        """The layout of a member struct of a struct template's instantiation
        (``typename Op<float>::Params``, CUTLASS's ``typename Kernel::Params`` with Kernel a
        template's instantiation): the template's members with its arguments substituted,
        read as a source of their own, whose other names are looked up in this one; or None.
        ``m``: _TEMPLATE_MEMBER's match."""
        found = self._instantiated(m, name)
        if found is None:
            return None
        reader, (body, _, header), args, key = found
        key += f"::{m['member']}"
        if key not in reader.layouts:
            reader.layouts[key] = None      # (one that contains itself has no layout)
            pending = self.root.pending
            members = _substitute_template_args(str(body), header, args)
            if members is not None and reader.depth < _MAX_NESTING:
                inner = _SourceStructs(members,
                                       {**reader.aliases, **_source_aliases(members)}, reader)
                reader.depth += 1
                inner.depth = reader.depth
                try:
                    found = inner.layout(inner._named(m["member"]))
                finally:
                    reader.depth -= 1
                if found is not None:   # named as code names it (numpy would keep "name")
                    found = np.dtype({"names": list(found.names),
                                      "formats": [found.fields[f][0] for f in found.names],
                                      "offsets": [found.fields[f][1] for f in found.names],
                                      "itemsize": found.itemsize},
                                     metadata={**found.metadata, "name": key})
                reader.layouts[key] = found
            if self.root.pending != pending:
                reader.waiting.add(key)
            return reader.layouts[key]
        return reader._known(key)

    def layout(self, name):
        if name in self.layouts:
            return self._known(name)
        self.layouts[name] = None       # a struct that contains itself has no layout
        if self.bodies is None:
            self._scan()
        entry = self.bodies.get(name)
        if entry is not None and self.depth < _MAX_NESTING:
            self.depth += 1
            pending = self.root.pending
            try:
                with self._read_in(name):
                    if entry[1][2] is not None:
                        self.bases = self._base_keys(entry[1][2], [])
                    self.layouts[name] = self._lay_out(name, str(entry[0]), entry[1])
            finally:
                self.depth -= 1
            if self.root.pending != pending:
                self.waiting.add(name)
        return self.layouts[name]

    def _base_keys(self, str clause, list found):
        """``found`` with the structs of the source the base clause ``clause`` names (their
        keys), each followed by its own bases', as C++ looks a name up in them (``struct D :
        B`` uses B's ``index_t``); a struct template's instantiation is left out (the aliases
        of its members are not read)."""
        for base in _items(clause, False, True):
            words = re.sub(r"\b(?:public|private|protected|virtual)\b", " ", base).strip()
            if not words or "<" in words:
                continue
            key = self._named(re.sub(r"\s*::\s*", "::", words))
            entry = self.bodies.get(key)
            if entry is None or key in found or len(found) >= _MAX_NESTING:
                continue
            found.append(key)
            if entry[1][2] is not None:
                self._base_keys(entry[1][2], found)
        return tuple(found)

    def _bases(self, str clause, str body):
        """(layout, the size what follows it starts from) of each base class a base clause
        names (``public B, Box<int>``), in order, or None where one is not laid out as C++'s
        ABI (Itanium's, which NVRTC follows) surely places it: a virtual base, or one kernarg
        cannot lay out. What follows a base starts after its tail padding where the base is
        "POD for the purpose of layout" (C++03's POD: ``struct B { double d; int b; }``, then
        at 16), else in it (at 12 where B has a default member initializer, a user-provided
        constructor, destructor or copy assignment, a private data member, a ``__half``: see
        _data_members and _pod_with); where that is not known, the derived struct is not
        read."""
        found = []
        for base in _items(clause, False, True):
            words = re.sub(r"^\s*(?:public|private|protected)\b", " ", base).strip()
            if not words or re.search(r"\b(?:virtual|public|private|protected)\b", words):
                return None
            # (Its members named as the base's, `d.B::v`: the compiler looks the base's name
            # up in the derived struct first, where it is the base's own, unless the derived
            # struct names something so.)
            outer = self.root.path
            # (A base named by an alias, `using B2 = ns::B; struct D : B2`: named as the alias
            # says, `d.ns::B::`, since D's scope has B's injected class name, not the alias.)
            named = words
            for _ in range(_MAX_NESTING):
                alias = self._alias_of(named)
                if alias is None:
                    break
                named = alias[0]
            own = _own_name(named)
            with self._object(None if outer is None or not own.isidentifier() or
                              re.search(rf"\b{own}\b", body) else f"{outer}{named}::"):
                dt = self.by_value(_substitute_aliases(words, self.aliases, self.scope), None)
            if dt is None:
                return None
            if dt.metadata.get("empty"):
                found.append((dt, 0))   # (no byte of the struct: see _lay_out)
                continue
            # (Where its members end: an anonymous union's whole size, past its fields' ends.)
            data_size = dt.metadata.get("dsize") or max(
                (dt.fields[f][1] + dt.fields[f][0].itemsize for f in dt.names), default=0)
            if data_size != dt.itemsize:
                pod = dt.metadata.get("pod")
                if pod is None:
                    return None
                if pod:
                    data_size = dt.itemsize
            found.append((dt, data_size))
        return found

    def _lay_out(self, name, body, head):
        """``head``: what the struct's head says, as _struct_definitions reads it: (explicit
        alignment at least, exactly or 0, the base clause or None, whether it is a class,
        whether it is a union).

        A union's members all start at 0; a dict gives one of them. A struct or union
        defined in place without a name is laid out as a type of its own (_unnamed_members);
        one that declares no member (``union { float f; int i; };``, an anonymous union; or
        struct, a GNU extension NVRTC takes) gives its fields to the struct, as C++ names
        them. Which fields share their bytes, so that a dict gives one of them, is the
        "overlaps" metadata: for each union, its members' (alternatives': each the fields it
        gives) names. What a tuple's values are, where not every field (C++'s aggregate
        initialization: a union's first member), is "positions"."""
        root = self.root
        if root.specifiers is None:
            root.specifiers = _specifier_macros(root.source)
        # (Where an extent is not known yet, the rest of the struct is read on, so that the
        # compiler is asked every extent at once: see _shape.)
        pending = root.pending
        union = len(head) > 4 and head[4]
        body = _without_member_definitions(body)
        if "{" in body:
            body = self._unnamed_members(name, body)
            if body is None:
                return None
        found = _data_members(body, _own_name(name), root.specifiers, head[3])
        if found is None:
            return None
        members, constructed, pod = found
        if union:
            if constructed or head[2] is not None:
                return None     # (a union has no base; what its constructors set is not read)
            pod = None          # (no struct derives from a union; one holding it: not known)
        names, formats, offsets = [], [], []
        defaulted = []      # fields with a default member initializer, or a struct with some
        overlaps, positions, alternatives, bit_fields = [], [], [], []
        size, align = 0, head[0]
        whole = 0   # where its bases end, tail padding and all
        # Whether it has an empty base; whether a field or another base holds an empty struct
        # (is one, has one as a field or base, at any depth).
        empty_base = holds_empty = False
        if head[2] is not None:
            # Its base classes first, each laid out as a struct of its own, their fields
            # named as the derived struct's (a dict gives `b` of `struct D : B { int d; }`
            # as D's own).
            found = self._bases(head[2], body)
            if found is None:
                if root.pending == pending:
                    return None
                found = ()      # (an extent asked: the members are asked about too)
            # (C++03 says a class with a base class is no POD, but NVRTC lays `struct D : B
            # {}` out as one where B is: which it is, kernarg does not tell.)
            pod = None
            for base, data_size in found:
                balign = base.metadata["align"]
                constructed = constructed or bool(base.metadata.get("constructed"))
                if base.metadata.get("empty"):
                    # An empty base (a tag, `struct D : Tag`): Itanium places it at offset 0,
                    # where it takes no byte, unless another subobject of its type is there,
                    # when it moves, and may move a member: so a struct with one is read only
                    # where nothing else in it holds an empty struct (below).
                    empty_base = True
                    whole = max(whole, base.itemsize)
                    align = max(align, balign)
                    continue
                holds_empty = holds_empty or bool(base.metadata.get("empties"))
                offset = (size + balign - 1) // balign * balign
                for fname in base.names:
                    names.append(fname)
                    formats.append(base.fields[fname][0])
                    offsets.append(offset + base.fields[fname][1])
                bit_fields += [(b[0], b[1] + offset * 8) + b[2:]
                               for b in base.metadata.get("bits", ())]
                overlaps += base.metadata.get("overlaps", ())
                positions += base.metadata.get("positions", base.names)
                size = offset + data_size
                whole = max(whole, offset + base.itemsize)
                align = max(align, balign)
                defaulted += base.metadata.get("defaulted", ())
        end_bits = size * 8     # where the members end, in bits (bit-fields end in a byte)
        for member in members:
            pieces = [_without_initializer(piece) for piece in _items(member, False)]
            # (A bit-field's width left out: a lone `:` is no field's else.)
            if _NOT_A_FIELD.search(_without_dims(",".join(
                    _BIT_WIDTH.sub(r"\g<declarator> ", p) if ":" in p else p
                    for p, _ in pieces))):
                return None
            first_type = None
            for piece, initialized in pieces:
                width = _BIT_WIDTH.match(piece)
                if width is not None:
                    # A bit-field (`unsigned flag : 1`, `int : 0`), placed as Itanium's ABI
                    # (GCC's, which NVRTC follows) places it: where the last member ended,
                    # unless it would then cross a boundary of its type's size, where it starts
                    # at the next; one of width 0 starts the next member at its type's
                    # alignment. An unnamed one does not align the struct.
                    if initialized:
                        return None     # (C++20's default member initializer of a bit-field)
                    found = _bit_field(self, width["declarator"], width["width"],
                                       first_type, union)
                    if found is None:
                        return None
                    fname, code, w, falign, tbits, first_type = found
                    if w is None:
                        continue    # (its width asked: the fields after it are asked about too)
                    if union:
                        at_bit = 0
                    elif w == 0:
                        at_bit = (end_bits + falign * 8 - 1) // (falign * 8) * (falign * 8)
                    elif end_bits // tbits != (end_bits + w - 1) // tbits:
                        at_bit = (end_bits + tbits - 1) // tbits * tbits
                    else:
                        at_bit = end_bits
                    end_bits = max(end_bits, at_bit + w)
                    size = max(size, (at_bit + w + 7) // 8)
                    if fname is not None:
                        bit_fields.append((fname, at_bit, w, code))
                        alternatives.append((fname,))
                        if not union or len(alternatives) == 1:
                            positions.append(fname)
                        align = max(align, falign)
                    continue
                field = self._field(piece, first_type)
                if field is None:
                    return None
                fname, fmt, falign, first_type = field
                if fmt is None:
                    continue    # (an extent asked: the fields after it are asked about too)
                try:
                    fmt = np.dtype(fmt)
                except ValueError:
                    return None     # (an array numpy cannot describe: past 64 extents)
                inner = fmt.subdtype[0] if fmt.subdtype is not None else fmt
                held = inner.metadata or {}
                holds_empty = holds_empty or bool(held.get("empties"))
                if union and (initialized or held.get("defaulted") or held.get("constructed")):
                    return None     # (which member a union's T{} sets: not read)
                if initialized or held.get("defaulted"):
                    defaulted.append(fname)
                pod = _pod_with(pod, initialized, inner)
                at = 0 if union else (size + falign - 1) // falign * falign
                if fname.startswith(_FLAT):
                    # An anonymous union or struct: its fields are this one's.
                    for sub in fmt.names:
                        names.append(sub)
                        formats.append(fmt.fields[sub][0])
                        offsets.append(at + fmt.fields[sub][1])
                    inner_bits = held.get("bits", ())
                    bit_fields += [(b[0], b[1] + at * 8) + b[2:] for b in inner_bits]
                    overlaps += held.get("overlaps", ())
                    given = held.get("positions", fmt.names)
                    if held.get("defaulted"):
                        defaulted.remove(fname)
                        defaulted += held["defaulted"]
                    alternatives.append(tuple(fmt.names) + tuple(b[0] for b in inner_bits))
                else:
                    names.append(fname)
                    formats.append(fmt)
                    offsets.append(at)
                    given = (fname,)
                    alternatives.append(given)
                if not union:
                    positions += given
                elif len(alternatives) == 1:
                    positions += given      # (a union's aggregate initializer: its first member)
                size = max(size, at + fmt.itemsize)
                end_bits = max(end_bits, size * 8)
                align = max(align, falign)
        # An empty struct (no data member, no base: a functor, `struct Twice { __device__
        # float operator()(float x) const {...} };`, a tag) is one byte, its alignment's if
        # it has one: a dict or tuple gives nothing.
        empty = not members and head[2] is None
        if not names and not bit_fields and not empty or root.pending != pending:
            return None         # (or an extent not known yet: asked of the compiler)
        if head[1]:
            align = head[1]
        asked = head[5] if len(head) > 5 else 0
        if asked:
            align = self._asked()
            whole_asked = self._asked("sizeof") if asked == 2 else None     # (together)
            if align is None:
                return None     # (asked of the compiler, or not to be asked)
        rounded = (max(size, 1) + align - 1) // align * align
        if asked == 2 and whole_asked != rounded:
            # A macro in the head (`struct PACKED P`): laid out only where the compiler's size
            # is kernarg's too (a packed struct with no padding to remove is the same).
            return None
        if whole > rounded:
            # A base's tail padding that nothing filled, past what the struct's alignment
            # rounds its size to (`struct __align__(2) D : B` with B's alignment 8): NVRTC
            # 13.0's size keeps it, 12.8's does not (sizeof 16 against 12). Which compiler
            # built the code is not known here, so the struct is not read.
            return None
        # (Whether it is "POD for the purpose of layout", where known: where a struct deriving
        # from it places its members, _bases.)
        if empty_base and holds_empty:
            return None     # (where the empty base is, not read: above)
        metadata = {"name": name, "align": align, "pod": pod}
        if empty:
            metadata["empty"] = True
        if empty or empty_base or holds_empty:
            metadata["empties"] = True
        if size != max((offsets[k] + np.dtype(formats[k]).itemsize for k in range(len(names))),
                       default=0):
            # Where its members end, where that is past its fields' ends: an anonymous union
            # ends where its largest member does, with that member's tail padding.
            metadata["dsize"] = size
        size = rounded
        if union:
            metadata["union"] = True
            if len(alternatives) > 1:
                overlaps.insert(0, tuple(alternatives))
        if bit_fields:
            # Fields a dict or tuple gives as any other, each (name, its first bit: bit k
            # being byte k // 8's bit k % 8, its width, its type's code).
            metadata["bits"] = tuple(bit_fields)
        if overlaps:
            metadata["overlaps"] = tuple(overlaps)
        if tuple(positions) != tuple(names):
            metadata["positions"] = tuple(positions)
        if constructed:
            # What a constructor sets is known only where T{} is evaluated: until then, a
            # dict gives every field.
            defaulted = list(names) + [b[0] for b in bit_fields]
            metadata["constructed"] = True
        if defaulted:
            # Which fields a dict may leave out only where the value they then take, the
            # struct's `T{}`, is known ("initial": its bytes, which from_source has NVRTC
            # evaluate; see _struct_initials).
            metadata["defaulted"] = tuple(defaulted)
        try:
            return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                             "itemsize": size}, metadata=metadata)
        except ValueError:      # a field name given twice
            return None

    def _unnamed_members(self, str name, str body):
        """``body`` (struct ``name``'s, its named member types left out) with each struct or
        union defined in it without a name (``struct { int a, b; } pair;``, ``union { float
        f; int i; };``) laid out as a type of its own and named by its key in self.layouts
        (_UNNAMED and a number); one that declares no member declares one named _FLAT and
        that number, whose fields _lay_out makes the struct's own. None where one is not
        laid out (or has an alignment, or a base, of its own)."""
        out = []
        cdef Py_ssize_t at = 0, counted = 0, depth = 0, closing
        pending = self.root.pending
        for m in _STRUCT_HEAD.finditer(body):
            if m.start() < at or m[1] or m[3]:
                continue        # inside one replaced, a typedef's (not read), a named one
            depth += body.count("{", counted, m.start()) - body.count("}", counted, m.start())
            counted = m.start()
            if depth:
                continue        # (in a member function's body)
            if m[2].strip() or m[4].strip() or m[5] is not None or self.depth >= _MAX_NESTING:
                return None
            closing = _closing(body, m.end(), "{", "}")
            if closing < 0:
                return None
            root = self.root
            path = root.path
            if path is not None:
                # The object it is: an anonymous one's fields are its struct's own.
                member = _UNNAMED_DECLARATOR.match(body, closing + 1)
                path = (None if member is None else path if member[1] is None else
                        f"{path}{member[1]}" + "[0]" * member[2].count("[") + ".")
            self.depth += 1
            try:
                with self._object(path):
                    inner = self._lay_out(
                        f"{name}::(unnamed)", body[m.end():closing],
                        (1, 0, None, _CLASS_KEYWORD.match(m[0]) is not None,
                         _UNION_KEYWORD.match(m[0]) is not None))
            finally:
                self.depth -= 1
            if inner is None and root.pending == pending:
                return None     # (else an extent asked: the members after it are read on)
            self.unnamed += 1
            key = f"{_UNNAMED}{self.unnamed}"
            self.layouts[key] = inner
            if inner is None:
                self.waiting.add(key)
            out.append(body[at:m.start()])
            out.append(f" {key} ")
            if _NEXT_CHARACTER.match(body, closing + 1)[1] == ";":
                out.append(f"{_FLAT}{self.unnamed} ")
            at = counted = closing + 1
        out.append(body[at:])
        return "".join(out)

    def _asked(self, str operator="alignof"):
        """The alignment of the struct being laid out, whose head holds one kernarg does not
        evaluate, as the compiler gives it: ``alignof`` of the object the root's ``path``
        names (exactly that: NVRTC's for ``__align__(N)`` and ``alignas(N)`` alike), or of
        the base it names (``d.B::``, see _bases: ``alignof(decltype(d)::B)``, B's injected
        class name, which D inherits), asked as _shape asks an extent; None until it is
        known, or where there is no object. With ``operator`` "sizeof", its size."""
        root = self.root
        typed = _asked_type(root.path)
        if typed is None:
            return None
        query = f"{operator}({typed})"
        found = root.extents.get(query)
        if found is None:
            root.wanted[query] = (root.path, None, operator)
            root.pending += 1
        return found

    def _bit_width(self, str name):
        """The width of bit-field ``name`` of the struct being laid out, as the compiler
        gives it: counted by a constant expression that sets each bit of a value of the
        struct's type (the object the root's ``path`` names, or the base it names) in turn
        and reads the field back (_width_query), asked as _shape asks an extent; None until
        it is known, or where there is no object."""
        root = self.root
        if root.path is None:
            return None
        query = f"bit width of {root.path}{name}"
        found = root.extents.get(query)
        if found is None:
            root.wanted[query] = (root.path, name, "width")
            root.pending += 1
        return found

    def _shape(self, list texts, str name):
        """The extents ``texts`` of array field ``name`` (``[4][2 * 3]``: ``(4, 6)``), or
        None. An extent of literals is evaluated here (_constant_value); one that names
        something (``K``, a constant or a macro; ``sizeof(T)``) is the compiler's to
        evaluate: a ``sizeof`` ratio of the field of an object of the struct (the root's
        ``path``, named where the kernel is declared), asked once (``wanted``), its answer
        taken from ``extents`` when the structs are laid out again (a base's field through
        the derived object, ``d.B::v``). Where no object is known (a type laid out apart from
        any parameter), or the compiler gives no answer, None."""
        root = self.root
        if len(texts) > 64:
            return None         # (numpy describes up to 64 extents)
        shape = []
        for k, text in enumerate(texts):
            found = _constant_value(text, {}) if text.strip() else None
            if found is not None:
                shape.append(found[0])
                continue
            if not text.strip() or root.path is None:
                return None     # (`float v[]`: a flexible array member, no field)
            element = f"{root.path}{name}" + "[0]" * k
            query = f"sizeof({element}) / sizeof({element}[0])"
            extent = root.extents.get(query)
            if extent is None:
                root.wanted[query] = (root.path, name, k)
                root.pending += 1
            shape.append(extent)
        if any(n is not None and n <= 0 for n in shape):
            return None
        return tuple(shape)

    def _field(self, piece, first_type):
        """(name, numpy format, alignment, type words for the next declarator of the member)
        of one field declarator, or None. ``first_type``: the member's type where ``piece``
        is its second or later declarator (``float x, *p``). The format is None where an
        extent is asked of the compiler (see _shape), the field's or one inside its type."""
        pending = self.root.pending
        piece = piece.strip()
        dims = _FIELD_DIMS_REVERSED.match(piece[::-1])
        if dims is not None:
            dims = piece[len(piece) - dims.end():]
            piece = piece[:len(piece) - len(dims)].strip()
        if first_type is not None:
            piece = f"{first_type} {piece}"
        m = re.fullmatch(r"(.*?[\w>])\s*((?:\*\s*(?:const\b\s*)?)*)([A-Za-z_]\w*)", piece)
        if m is None:
            return None
        # (An extent not known yet is None in it: the field is laid out when the compiler
        # has answered, and what is inside the array is asked about meanwhile.)
        shape = () if dims is None else self._shape(_BRACKETED.findall(dims), m[3])
        if shape is None:
            return None
        type_words, declarator = m[1], m[2] + m[3]
        decl = _substitute_aliases(f"{type_words} {declarator}", self.aliases, self.scope,
                                   bases=self.bases)
        try:
            spec, fname = _parse_c_param(decl)
        except ValueError:
            nested = None
            if not m[2]:
                path = self.root.path
                if path is not None:        # (an element of the array, where it is one)
                    path = f"{path}{m[3]}" + "[0]" * len(shape) + "."
                with self._object(path):
                    nested = self.by_value(decl, m[3])
            if nested is None:
                return (m[3], None, 0, type_words) if self.root.pending != pending else None
            fmt, falign, fname = nested, nested.metadata["align"], m[3]
        else:
            if fname is None:
                return None
            if spec.code <= C_F64:
                fmt, falign = _field_dtype(spec.code), spec.align
            elif spec.code == C_VECTOR:
                fmt, falign = (_field_dtype(spec.elem), (spec.count,)), spec.align
            elif spec.code == C_POINTER:
                # An address: taken from what a pointer parameter takes, checked as its spec.
                fmt, falign = np.dtype(np.uint64, metadata={"pointer": spec}), 8
            elif spec.code == C_STRUCT and spec.record is not None:
                fmt, falign = spec.record, spec.align      # (a span)
            else:
                return None     # 128-bit ints, 8/6/4-bit floats, tensor maps: bytes only
        if None in shape:
            return fname, None, 0, type_words   # (asked of the compiler)
        if shape:
            fmt = (np.dtype(fmt), shape)
        return fname, fmt, falign, type_words


def _pod_with(pod, bint initialized, inner):
    """Whether a struct is "POD for the purpose of layout" (True, False, or None: not known)
    as far as ``pod`` says, given one more field of dtype ``inner`` (an array's element),
    with a default member initializer or not: NVRTC takes one as making it no POD, and a
    ``__half``, ``__nv_bfloat16`` (or a vector of them: classes with constructors) or a struct
    that is no POD."""
    if pod is False or initialized:
        return False
    while inner.subdtype is not None:   # (an array of vectors: `half2 h[3]`)
        inner = inner.subdtype[0]
    if inner.fields is not None:
        found = (inner.metadata or {}).get("pod")
        return False if found is False else (None if found is None else pod)
    if (inner.kind == "f" and inner.itemsize == 2) or \
            (inner.metadata or {}).get("code") == C_BF16:
        return False
    return pod


def _without_member_definitions(str body):
    """A struct's body without the member structs it defines (``struct Deep { int q; };``,
    read as types of their own: Outer::Deep), and with the name of one that a member declares
    in place of its definition (``struct Deep { int q; } d;``: ``struct Deep d;``)."""
    if "{" not in body:
        return body
    if "enum" in body:
        # (Its enumerations too: ``enum class Kind { A, B };``, read as types of their own,
        # _source_aliases's ``Outer::Kind``; ``enum Kind : short { A } k;``: ``enum Kind k;``.
        # An unnamed one that declares a member stays, for the struct to be refused.)
        body = _without_definitions(body, [(m, m[1]) for m in
                                           _MEMBER_ENUM_HEAD.finditer(body)], "enum")
    # (Unnamed structs and typedefs' stay as they are.)
    return _without_definitions(body, [(m, m[3]) for m in _STRUCT_HEAD.finditer(body)
                                       if m[3] and not m[1]], "struct")


# What a struct's body holds besides its data members: member functions (declared, or defined
# with their bodies), constructors and destructors, operators, static members, aliases,
# friends, static_asserts and access specifiers, none of which takes a byte of each object
# (virtual functions would: a struct with any is not read).
_MEMBER_PUNCT = re.compile(r"[(){};]")
_ACCESS = re.compile(r"\s*\b(?:public|private|protected)\s*:(?!:)")
_NOT_DATA = frozenset(("static", "using", "typedef", "friend", "static_assert"))
# The words before a member function's name that say how it is compiled, not what it returns.
_FUNCTION_SPECIFIERS = frozenset((
    "__host__", "__device__", "__forceinline__", "__noinline__", "inline", "constexpr",
    "consteval", "explicit", "static", "friend", "__inline__", "extern"))
# A type's words that are keywords: a return type is one or more of these, or one other name
# (qualified, with template arguments) with only cv-qualifiers and `struct`/`typename` beside.
_TYPE_KEYWORDS = frozenset(("void", "bool", "char", "short", "int", "long", "float", "double",
                            "signed", "unsigned", "wchar_t", "char8_t", "char16_t", "char32_t",
                            "__int128", "auto"))
_BESIDE_A_TYPE = frozenset(("const", "volatile", "struct", "class", "typename", "enum"))
# Names a `name(` that is no function has before its parenthesis.
_NOT_A_FUNCTION_NAME = _TYPE_KEYWORDS | _BESIDE_A_TYPE | frozenset((
    "alignas", "__align__", "__attribute__", "decltype", "__declspec", "sizeof", "alignof",
    "noexcept", "typeof", "__typeof__", "operator", "template", "union"))
_FUNCTION_NAME = re.compile(r"(~\s*)?([A-Za-z_]\w*)\s*(?:<[^<>(){};]*>)?\s*$")
_TYPE_WORD = re.compile(r"(?:::)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|<|>|\*|&|,|\S")


def _after_template_head(str text):
    """``text`` (a member declaration, stripped) after the ``template <...>`` it begins with,
    if any; None where that list is not closed."""
    m = _TEMPLATE_OPENING.match(text)
    if m is None:
        return text
    j = _closing_angle(text, m.end())
    return None if j < 0 else text[j + 1:]


_TEMPLATE_OPENING = re.compile(r"template\s*<")


def _function_kind(str member, str own, specifiers=_FUNCTION_SPECIFIERS):
    """What the member declaration ``member`` (its text up to its body or ``;``), which holds a
    ``(`` outside brackets, is: "constructor" (of struct ``own``), "function" (a member
    function, destructor or operator), "data" (a data member whose default member initializer
    calls something: ``float a = f(1)``), or None: not one kernarg can tell from a data member
    (``alignas(8) int a``, ``float (*f)(int)``, ``float x SOME_MACRO(16)``, a function whose
    return type is a macro), whose struct is then not read. ``specifiers``: the words that
    say how a function is compiled (_FUNCTION_SPECIFIERS, and the source's macros of them)."""
    text = _after_template_head(member.strip())
    if text is None:
        return None
    paren = text.find("(")
    if paren < 0:
        return None             # (only in a template's parameter list)
    head = text[:paren]
    op = re.search(r"\boperator\b", head)
    equals = head.find("=")
    if equals >= 0 and (op is None or equals < op.start()):
        return "data"           # a default member initializer's call: `float a = f(1)`
    if op is None and _BIT_FIELD_HEAD.match(head) is not None:
        return "data"           # a bit-field's width: `unsigned f : sizeof(int)`
    if op is not None:          # (`operator==`, `operator float`, `operator()`)
        name, destructor, before = "operator", False, head[:op.start()]
    else:
        if text[paren + 1:].lstrip()[:1] in ("*", "&", "^"):
            return None         # a pointer to a function: data
        m = _FUNCTION_NAME.search(head)
        if m is None or m[2] in _NOT_A_FUNCTION_NAME:
            return None
        name, destructor, before = m[2], m[1] is not None, head[:m.start()]
        if name == own:
            # (No other member may be named as its class; what stands before the name is
            # specifiers, or macros of them: CUTLASS_HOST_DEVICE.)
            return "function" if destructor else "constructor"
    keywords = others = 0
    angle = 0
    for word in _TYPE_WORD.findall(before):
        if word == "<":
            angle += 1
        elif word == ">":
            angle -= 1
        elif angle or word in ("*", "&", ",") or word in specifiers \
                or word in _BESIDE_A_TYPE:
            continue
        elif word in _TYPE_KEYWORDS:
            keywords += 1
        elif word[0].isalpha() or word[0] in "_:":
            others += 1
        else:
            return None
    if angle:
        return None
    if not keywords and not others:
        # No return type: a conversion function (or a call that is not a member: `MACRO(8)`).
        return "function" if name == "operator" else None
    if destructor or (others > 1 or (others and keywords)):
        return None             # `float x MACRO(16)`, `MACRO float f()`: not read
    return "function"


def _not_data(str member, specifiers):
    """Whether member declaration ``member`` begins (after specifiers, and a template's
    parameter list) with a word of _NOT_DATA: a static member, an alias, a friend or a
    static_assert."""
    text = _after_template_head(member.lstrip())
    if text is None:
        return False
    for word in re.finditer(r"[A-Za-z_]\w*|\S", text):
        if word[0] in _NOT_DATA:
            return True
        if word[0] not in specifiers:
            return False
    return False


_NEXT_CHARACTER = re.compile(r"\s*(\S?)")
# A bit-field's declarator (`unsigned flag`, `ns::Mode m`), and its width after a lone `:`
# (`1`, `MODE_BITS`, `sizeof(int)`: the rest of the member). A declarator holds no bracket,
# brace or parenthesis, so a `:` after one is no bit-field's: `short s[c ? 3 : 1]` (a `:`
# in a template's arguments is refused with the member, see _NOT_A_FIELD).
_BIT_DECLARATOR = r"[^\[\](){}:]*(?:::[^\[\](){}:]*)*"
_BIT_WIDTH = re.compile(rf"\A(?P<declarator>{_BIT_DECLARATOR}):(?!:)\s*(?P<width>\S.*?)\s*$",
                        re.S)
_BIT_FIELD_HEAD = re.compile(rf"{_BIT_DECLARATOR}:(?!:)")


def _bit_field(reader, str declarator, str width_text, first_type, bint union):
    """(name or None, scalar code, width, the type's alignment and size in bits, the type's
    words) of a bit-field whose declarator (before its ``:``) is ``declarator`` (``unsigned
    flag``, ``int`` for an unnamed one; after ``first_type`` where it is not the member's
    first) and whose width is ``width_text``; None where it is no bit-field kernarg packs:
    not of an integer or bool type, of a width its type does not hold (or a bool's of more
    than 1), a named one of width 0. A width of literals is evaluated here
    (_constant_value); one that names something (`MODE_BITS`, a constant, an enumerator,
    `sizeof`) is the compiler's (_SourceStructs._bit_width), and is None in what this
    returns until the compiler has answered, and one it gives as its type's bits (or more)
    is not read (_width_query counts no more). An unnamed bit-field's, a ``bool``'s or one
    in a ``union``'s is not asked (there is no member to ask; a bool reads back true
    whichever bit is set; C++17 sets no member of a union in a constant but the one active,
    and NVRTC 13.5 initializes no bit-field of one), and leaves the struct opaque."""
    declarator = declarator.strip()
    field = reader._field(declarator, first_type) if declarator else None
    if field is None:
        # No name: `int : 3`, `unsigned : 0` (or, after the first, `: 2`).
        field = reader._field(f"{declarator} {_UNNAMED}bits", first_type)
        if field is None:
            return None
        field = (None,) + field[1:]
    name, fmt, falign, type_words = field
    if fmt is None:
        return None     # (an array's extent asked of the compiler)
    fmt = np.dtype(fmt)
    if fmt.subdtype is not None or fmt.metadata is not None or fmt.kind not in "iub":
        return None     # (an array, a pointer, a __nv_bfloat16, a float, a struct)
    code = _FIELD_CODES.get((fmt.kind, fmt.itemsize))
    if code is None:
        return None
    found = _constant_value(width_text, {})
    if found is not None:
        width = found[0]
    elif name is None or union or code == C_BOOL:
        return None
    else:
        width = reader._bit_width(name)
        if width is None:
            return (None if reader.root.path is None else
                    (name, code, None, falign, fmt.itemsize * 8, type_words))
        if width >= fmt.itemsize * 8:
            # The probe counts the type's bits for a width that fills the type and for a
            # wider one (`unsigned char b : 12`: C++ makes the bits past 8 padding), and
            # places the next member otherwise: not told apart, not read.
            return None
    if not 0 <= width <= (1 if code == C_BOOL else fmt.itemsize * 8) or \
            (width == 0 and name is not None):
        return None
    return name, code, width, falign, fmt.itemsize * 8, type_words


# The names _lay_out gives an unnamed struct or union (its type), and the member an anonymous
# one declares (whose fields are its struct's): no identifier of C++ code begins with these.
_UNNAMED = "__kernarg_unnamed_"
_FLAT = "__kernarg_anonymous_"


def _data_members(str body, str own, specifiers=_FUNCTION_SPECIFIERS, bint private=False):
    """(the data member declarations of struct ``own``'s ``body``, without their ``;``,
    whether it declares a constructor, what the body says of whether the struct is "POD for
    the purpose of layout": False where a constructor, destructor or copy (or move)
    assignment is user-provided or a data member is private or protected, as NVRTC lays
    structs out; None where constructors are declared but no default one, which NVRTC 12.9
    and 13.5 lay out differently; else True), or None where it holds what kernarg does not
    read past: a
    virtual function, or a parenthesis it cannot tell a function by (_function_kind). Member
    functions and the rest of _NOT_DATA are left out, with the bodies of those defined in
    place (and constructors' initializer lists). ``specifiers``: see _function_kind;
    ``private``: whether its members are private until said otherwise (a class's)."""
    members, constructed, pod = [], False, True
    access = "private" if private else "public"
    start, parens, braces, function = 0, 0, 0, None
    for m in _MEMBER_PUNCT.finditer(body):
        ch, at = m[0], m.start()
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens -= 1
        elif parens:
            continue
        elif ch == "{":
            if braces == 0 and function is None:
                text, access = _accessed(body[start:at], access)
                # (A parenthesis in an array extent, `float v[sizeof(T)]`, is a data
                # member's.)
                function = (_function_kind(text, own, specifiers)
                            if "(" in _without_dims(text) else "data")
                if function is None:
                    return None
                if function == "data":
                    function = ""       # a data member's brace initializer, `int b{2}`
                else:
                    members.append((text, function, True, access))
            braces += 1
        elif ch == "}":
            braces -= 1
            if braces < 0:
                return None
            if braces:
                continue
            after = _NEXT_CHARACTER.match(body, at + 1)
            if function == "" and after[1] not in (";", ","):
                return None     # no initializer ends so: what was this brace?
            if function:
                if after[1] in (",", "{"):
                    continue            # a constructor's initializer list goes on
                start = after.end() if after[1] == ";" else at + 1
                function = None
        elif braces == 0:               # ;
            if function == "":
                function = None
            text, access = _accessed(body[start:at], access)
            start = at + 1
            if function is not None:
                continue
            if "(" in _without_dims(text) and not _not_data(text, specifiers):
                kind = _function_kind(text, own, specifiers)
                if kind is None:
                    return None
                members.append((text, None if kind == "data" else kind,
                                _DEFAULTED_OR_DELETED.search(text) is None, access))
            elif text.strip():
                members.append((text, None, False, access))
    if parens or braces or body[start:].strip() and _ACCESS.sub(" ", body[start:]).strip():
        return None
    data, default_constructor = [], False
    for text, kind, provided, access in members:
        if re.search(r"\bvirtual\b", text):
            return None         # a pointer to its virtual functions in each object
        if kind == "constructor":
            constructed = True
            if provided:
                pod = False     # (one `= default` or `= delete` leaves it POD: NVRTC's layout)
            elif _NO_PARAMETERS.search(text):
                default_constructor = True
        elif kind == "function" and provided:
            assignment = _ASSIGNMENT.search(text)
            if _DESTRUCTOR.search(text) or assignment is not None and re.search(
                    rf"\b{own}\b", text[assignment.end():]):
                pod = False     # a user-provided destructor, or copy or move assignment
        elif kind is None and not _not_data(text, specifiers):
            data.append(re.sub(r"\bmutable\b", " ", text))
            if access != "public":
                pod = False     # a private or protected data member
    if constructed and pod and not default_constructor:
        # Constructors declared, none of them user-provided, but no default one
        # (`S(const S&) = default;` alone): NVRTC 13.5 lays it out as POD, 12.9 does not.
        pod = None
    return data, constructed, pod


def _accessed(str text, str access):
    """(member declaration ``text`` without the access specifiers before it, the access it
    has: the last of those, else ``access``, the one before it)."""
    for a in _ACCESS_WORD.finditer(text):
        access = a[1]
    return _ACCESS.sub(" ", text), access


# What makes a struct other than "POD for the purpose of layout" (_data_members).
_ACCESS_WORD = re.compile(r"\b(public|private|protected)\s*:(?!:)")
_DESTRUCTOR = re.compile(r"~\s*[A-Za-z_]")
_ASSIGNMENT = re.compile(r"\boperator\s*=(?!=)")
_DEFAULTED_OR_DELETED = re.compile(r"=\s*(?:default|delete)\s*$")
_NO_PARAMETERS = re.compile(r"\(\s*(?:void\s*)?\)")


_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*(.*)$", re.M)


def _specifier_macros(str code):
    """_FUNCTION_SPECIFIERS and the names ``code`` defines as macros of them, every definition
    of each (the branches of an ``#ifdef``) nothing but such words: ``#define HD __host__
    __device__``, ``#define DEVICE_INLINE __device__ __forceinline__``, ``#define HD``."""
    if "define" not in code:
        return _FUNCTION_SPECIFIERS
    found = {}
    for m in _OBJECT_MACRO.finditer(code):
        words = m[2].split()
        found[m[1]] = found.get(m[1], True) and all(w in _FUNCTION_SPECIFIERS for w in words)
    names = {name for name, fits in found.items() if fits}
    return _FUNCTION_SPECIFIERS | names if names else _FUNCTION_SPECIFIERS


def _own_name(str key):
    """A qualified C++ name's last part, without its template arguments: the name a struct's
    members call it by (its constructors'), ``Params`` of ``Gemm<double>::Params``, ``Box`` of
    ``ns::Box<int, 2>``, ``f`` of ``ns::f<a::b>``."""
    out, depth = [], 0
    for ch in key:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).rsplit("::", 1)[-1].strip()


# `enum class Kind : short {`, in a struct's body (the fixed type's length bounded: a body of
# many `enum E :` without a brace is read in linear time).
_MEMBER_ENUM_HEAD = re.compile(r"\benum\b\s*(?:class\b|struct\b)?\s*([A-Za-z_]\w*)?\s*"
                               r"(?::(?!:)[^{};]{0,200})?\{")
_SEMICOLON = re.compile(r"\s*;")


def _without_definitions(str body, list heads, str keyword):
    """``body`` without the type definitions ``heads`` open (``(match of the head up to its
    '{', the type's name or None)``): one that is a declaration of its own (``};``) left out,
    one that declares a member in its place replaced by ``keyword name`` (an unnamed one kept
    as it is)."""
    out, at = [], 0
    for m, name in heads:
        if m.start() < at:
            continue        # inside one left out
        closing = _closing(body, m.end(), "{", "}")
        if closing < 0:
            return body
        tail = _SEMICOLON.match(body, closing + 1)
        if tail is None and name is None:
            continue
        out.append(body[at:m.start()])
        if tail is not None:
            at = tail.end()
        else:
            out.append(f"{keyword} {name} ")
            at = closing + 1
    out.append(body[at:])
    return "".join(out)


def _without_initializer(str piece):
    """(declarator, whether it has an initializer) of one declarator of a member declaration:
    its default member initializer, ``= 1.5f``, ``{2}`` or ``= {1, 2}``, left out."""
    declarator, default = _split_default(piece)
    if default is not None:
        return declarator, True
    brace = piece.find("{")         # `int b{2}`, `float v[2]{1, 2}`: a name or ] before it
    if brace > 0 and piece.rstrip().endswith("}"):
        head = piece[:brace].rstrip()
        if head and (head[-1].isalnum() or head[-1] in "_]"):
            return head, True
    return piece, False


# How deep structs (and struct template instantiations) nest in one another by value before
# kernarg stops reading them: each level is a few Python calls deep, and the outer ones then
# stay opaque bytes (no real struct nests as deep; C++ compilers allow some hundreds).
_MAX_NESTING = 32
# `struct Box<int, 2> {`: a specialization of struct template Box.
_SPECIALIZED = re.compile(r"\b(?:struct|class|union)\s+([A-Za-z_]\w*)\s*<[^;{}]*>\s*\{")
# A member type of a struct template's instantiation: `typename Op<float>::Params p`.
_TEMPLATE_MEMBER = re.compile(
    r"(?:\s*\b(?:const|volatile|__grid_constant__|struct|class|union|typename)\b)*\s*"
    r"(?P<template>(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*<(?P<args>.*)>::"
    r"(?P<member>[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)"
    r"(?:\s*\b(?:const|volatile|__grid_constant__)\b)*\s*(?P<name>[A-Za-z_]\w*)?\s*", re.S)
# A struct template's instantiation as a parameter's or field's type: `const Box<short, 3> b`.
_TEMPLATE_ID = re.compile(
    r"(?:\s*\b(?:const|volatile|__grid_constant__|struct|class|union)\b)*\s*"
    r"(?P<template>(?:::)?[A-Za-z_]\w*(?:::[A-Za-z_]\w*)*)\s*<(?P<args>.*)>"
    r"(?:\s*\b(?:const|volatile|__grid_constant__)\b)*\s*(?P<name>[A-Za-z_]\w*)?\s*", re.S)


def _without_dims(str member):
    """A member declaration without its array extents, ``[4]``, ``[sizeof(T) * 2]``, which
    _NOT_A_FIELD's brackets and parentheses are not about: brackets after a name, ``]`` or
    ``)``, innermost first (``[sizeof(a[0])]``; nested deeper than a few, not all). An
    attribute's ``[[...]]`` stays."""
    cdef Py_ssize_t at, j
    for _ in range(4):
        if "[" not in member:
            break
        out, at = [], 0
        for m in _BRACKETED.finditer(member):
            j = m.start() - 1
            while j >= 0 and member[j].isspace():
                j -= 1
            if j >= 0 and (member[j].isalnum() or member[j] in "_])"):
                out.append(member[at:m.start()])
                out.append(" ")
                at = m.end()
        if not out:
            break
        out.append(member[at:])
        member = "".join(out)
    return member


class _Span:
    """Where a struct's body is in a text; ``str()`` of it is the body."""
    __slots__ = ("text", "start", "end")

    def __init__(self, text, start, end):
        self.text, self.start, self.end = text, start, end

    def __str__(self):
        return self.text[self.start:self.end]


def _any_between(list positions, Py_ssize_t start, Py_ssize_t end):
    """Whether any of the sorted ``positions`` is in ``start .. end``."""
    k = bisect.bisect_left(positions, start)
    return k < len(positions) and positions[k] < end


# `#define NAME ...` and `#define NAME(args) ...`, anywhere in the source (a branch of an #ifdef
# too).
_DEFINED_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)", re.M)
# Words (and a function-like macro's arguments) between `struct` and the name of a struct being
# defined, `struct API ALIGN(16) S {`, `struct PACKED P final : B {`, or its body: `struct API
# S {` (the last word its name) or `typedef struct API {` (every word a macro).
_HEAD_WORDS = re.compile(r"\b(?:struct|class|union)\s+((?:(?!final\b)[A-Za-z_]\w*"
                         r"(?:\s*\([^(){};]{0,200}\))?\s+){1,8})"
                         r"(?=(?!final\b)[A-Za-z_]\w*\s*(?:\bfinal\b\s*)?[:{]|\{)")
_HEAD_WORD = re.compile(r"([A-Za-z_]\w*)(?:\s*\([^(){};]{0,200}\))?\s*")
# What a head's macros are read as: an alignment kernarg does not evaluate, so that the
# compiler is asked the struct's alignment, and its size (_SourceStructs._asked).
_HEAD_MACRO = "alignas(__kernarg_head_macro)"


def _with_head_macros_marked(str text, str source):
    """``text`` with the macros of ``source`` that a struct definition's head holds before
    the struct's name (``#define ALIGN(n) __align__(n)``, ``struct ALIGN(16) S {``) written
    as _HEAD_MACRO. What one stands for is not read (it may align, pack, or be nothing):
    the compiler's alignof and sizeof of the struct are its alignment and size, and a
    struct they disagree with is not read. A word that is no macro of the source is left as
    it is (and the struct with it: C++ has no such head)."""
    if "define" not in source or not _HEAD_WORDS.search(text):
        return text
    macros = set(_DEFINED_MACRO.findall(source))
    directives = [(m.start(), m.end()) for m in _DIRECTIVE_LINES.finditer(text)]

    def mark(m):
        words = list(_HEAD_WORD.finditer(m[1]))
        macro = len(words)
        if words and words[-1][1] not in macros and words[-1][0].strip() == words[-1][1] and \
                text.startswith("{", m.end()):
            macro -= 1          # (the struct's name)
        if not macro or any(w[1] not in macros for w in words[:macro]):
            return m[0]
        k = bisect.bisect_right(directives, (m.start(), len(text))) - 1
        if k >= 0 and m.start() < directives[k][1]:
            return m[0]         # (`#define S_KEYWORD struct`: no head)
        return (m[0][:m.start(1) - m.start()] + _HEAD_MACRO + " " +
                "".join(w[0] for w in words[macro:]))

    return _HEAD_WORDS.sub(mark, text)


def _struct_definitions(text):
    """(index of the opening brace, (explicit alignment: at least, exactly or 0; the base
    clause or None), index of the closing one, names, template parameters) of each struct
    definition in ``text`` that has no attribute after its body (which may pack it): its tag,
    and a typedef's name for it; the parameter list of a
    struct template (``template <class T, int N> struct Box {...}``: ``'class T, int N'``),
    else None."""
    pairs = None
    for m in _STRUCT_HEAD.finditer(text):
        if _ENUM_BEFORE.search(text, max(0, m.start() - 40), m.start()):
            continue    # `enum class E {`, `enum struct E {`: an enumeration
        template = _TEMPLATE_HEAD.search(text, max(0, m.start() - 400), m.start())
        header = template[1] if template is not None else None
        opening = m.end() - 1
        if pairs is None:
            pairs = _brace_pairs(text)
        closing = pairs.get(opening, -1)
        if closing < 0:
            continue
        after = _AFTER_BODY.match(text, closing + 1)
        if after[1]:
            # (Even `} __attribute__((aligned(8)))`: NVRTC ignores it after a definition that
            # declares nothing, and after a typedef's gives the alignment without rounding the
            # size up to it, `typedef struct { short s; } ... G;` of size 2.)
            continue
        names = [m[3]] if m[3] else []
        if m[1] and after[2]:
            names.append(after[2])
        specs = [(keyword, _alignment_value(n)) for keyword, n in
                 _ALIGN_ITEM.findall(m[2] + m[4])]
        # (With the base clause, `struct D : public B`, or None; whether it is a class,
        # whose members are private until `public:`; and whether it is a union.)
        kinds = (m[5], _CLASS_KEYWORD.match(m[0]) is not None,
                 _UNION_KEYWORD.match(m[0]) is not None)
        if any(n is None for _, n in specs):
            # An alignment kernarg does not evaluate (`alignas(K)`, `alignas(sizeof(T) * N)`,
            # `alignas(double)`, a macro): the compiler's `alignof` of the struct, asked where
            # a parameter holds it, is the alignment, exactly (_SourceStructs._asked); of
            # a head's macro, its `sizeof` too (2).
            asked = 2 if _HEAD_MACRO in m[2] + m[4] else 1
            yield (opening, (1, 0) + kinds + (asked,), closing, names, header)
            continue
        exact = {n for keyword, n in specs if keyword != "alignas"}
        if len(exact) > 1 or (exact and len(exact) < len(specs)):
            continue    # alignments that disagree: NVRTC refuses the definition
        # NVRTC gives a struct __align__(N) (__attribute__((aligned(N))) before its name)
        # exactly the alignment N, lower than its members' too (its members keep their
        # offsets; its size is rounded to N); alignas(N) may only raise it (lower is an error).
        at_least = max([n for _, n in specs], default=1)
        yield (opening, (at_least, exact.pop() if exact else 0) + kinds, closing, names, header)


def _asked_type(path):
    """The type the object ``path`` names (a root's path: ``d.m.`` of member m of parameter
    d, ``decltype(d.m)``), or the base class (``d.B::``, ``d.m.ns::Box<int>::``, ``d.B::A::``:
    a base's base), named by its injected class name through the object's type
    (``decltype(d)::B``, ``decltype(d.m)::Box``, ``decltype(d)::A``: the query's key, which
    _base_query writes as the compiler takes it); None for no path."""
    if path is None:
        return None
    if path.endswith("."):
        return f"decltype({path[:-1]})"
    found = _base_of_path(path)
    return None if found is None else f"decltype({found[0]})::{found[1]}"


def _base_of_path(path):
    """(the object, the base's injected class name) of a base's path (``d.B::``: ``('d',
    'B')``; see _asked_type), or None."""
    if path is None or not path.endswith("::"):
        return None
    depth = 0
    for i in range(len(path) - 1, -1, -1):     # the last "." outside template arguments
        ch = path[i]
        if ch in ">)]":
            depth += 1
        elif ch in "<([":
            depth -= 1
        elif ch == "." and depth == 0:
            break
    else:
        return None
    base = _own_name(path[i + 1:-2])
    if not path[:i] or not base.isidentifier():
        return None
    return path[:i], base


def _bare(i):
    """(declarations, name) of a template whose ``<T>::type`` is T less the reference and const
    that ``decltype`` of an object (``(*static_cast<D*>(nullptr))``, an lvalue) gives it."""
    t, bare = "__kernarg_T", f"__kernarg_bare_{i}"
    return (f"template <class {t}> struct {bare} {{ typedef {t} type; }}; "
            f"template <class {t}> struct {bare}<{t}&> {{ typedef {t} type; }}; "
            f"template <class {t}> struct {bare}<const {t}&> {{ typedef {t} type; }}; "
            f"template <class {t}> struct {bare}<const {t}> {{ typedef {t} type; }}; "), bare


def _base_query(i, str path, str operator):
    """(declarations, expression) that give ``operator`` (alignof, sizeof) of the base that
    ``path`` names (_base_of_path), as _evaluate_line's ``prelude`` and ``text``: the base
    named through the object's type (_bare)."""
    obj, base = _base_of_path(path)
    prelude, bare = _bare(i)
    return prelude, f"{operator}({bare}<decltype({obj})>::type::{base})"


def _width_query(i, str path, str name):
    """(declarations, expression) that give the width of bit-field ``name`` of the object
    ``path`` names (a root's path: ``d.m.``, or a base's, ``d.B::``), as _evaluate_line's
    ``prelude`` and ``text``. A constant expression sets bit k of a value-initialized object
    of its type, for k = 0 to 63, and counts the values the field reads back as not 0: the
    bits it keeps are its low ``width`` ones (a conversion to its type, then to the field,
    keeps the low bits: C++20's rule, and what NVRTC does in C++17, where it is the
    implementation's). A type with no constant value-initialization, or a member not
    accessible where the kernel is declared (a private bit-field), is refused, and its
    struct stays opaque bytes."""
    prelude, bare = _bare(i)
    found = _base_of_path(path)
    typed = (f"typename {bare}<decltype({path[:-1]})>::type" if found is None else
             f"typename {bare}<decltype({found[0]})>::type::{found[1]}")
    # (Every name __kernarg_'s: the source's macros, `#define N 3`, would replace others.)
    t, n, k = "__kernarg_T", "__kernarg_n", "__kernarg_k"
    prelude += (
        f"template <class {t}> __device__ constexpr unsigned long long __kernarg_width_{i}() "
        f"{{ unsigned long long {n} = 0; for (int {k} = 0; {k} < 64; ++{k}) {{ {t} "
        f"__kernarg_t{{}}; __kernarg_t.{name} = static_cast<decltype(__kernarg_t.{name})>"
        f"(1ull << {k}); {n} += __kernarg_t.{name} != 0; }} return {n}; }} ")
    return prelude, f"__kernarg_width_{i}<{typed}>()"


def _alignment_value(str text):
    """The alignment an ``alignas``/``__align__`` holds, where it is an integer constant
    expression of literals (``16``, ``2 * 8``) that is a power of two; else None."""
    found = _constant_value(text, {})
    if found is None or found[0] <= 0 or found[0] & (found[0] - 1):
        return None
    return found[0]


def _brace_pairs(str text):
    """``{index of a '{': index of the '}' that closes it}`` for the braces of ``text`` that
    are closed, in one pass (finding each one's end apart was quadratic in their nesting: 2,000
    structs each defined in the one before took 2.2 s)."""
    pairs, stack = {}, []
    for m in _BRACE.finditer(text):
        if m[0] == "{":
            stack.append(m.start())
        elif stack:
            pairs[stack.pop()] = m.start()
    return pairs


_BRACE = re.compile(r"[{}]")
_ENUM_BEFORE = re.compile(r"\benum\s*$")
_CLASS_KEYWORD = re.compile(r"(?:typedef\s+)?class\b")
_UNION_KEYWORD = re.compile(r"(?:typedef\s+)?union\b")
_AFTER_BODY = re.compile(r"\s*(?:(__attribute__|__align__|alignas)|([A-Za-z_]\w*)\s*;)?")
_PRAGMA_PACK = re.compile(r"#\s*pragma\s+pack")
_BRACE_OR_QUOTE = re.compile(r"[{}\"']")


def _code_braces(str text):
    """Each ``{`` and ``}`` of ``text`` outside string and character literals, in order: its
    index and the brace (a ``'`` inside a number is C++14's digit separator)."""
    cdef Py_ssize_t passed = 0          # the end of the last literal
    cdef Py_ssize_t separator = -1      # the last digit separator
    m = _BRACE_OR_QUOTE.search(text)
    while m is not None:
        i = m.start()
        ch = text[i]
        if ch == "'" and _in_number(text, i, passed, separator):
            separator = i
        elif ch == '"' or ch == "'":
            passed = _past_literal(text, i)
            m = _BRACE_OR_QUOTE.search(text, passed)
            continue
        else:
            yield i, ch
        m = _BRACE_OR_QUOTE.search(text, i + 1)


def _struct_keys(text, dict tags, scopes):
    """``{position of a struct definition's '{': its name}`` for the structs ``tags``
    (``{position of its '{': its tag}``) defined at namespace scope (``scopes``: the positions
    of braces there), by their tags, and for those defined in the body of one of them, at any
    depth, as member types (``struct Op { struct Params {...}; }``: ``Op::Params``); one
    defined in a function is nobody's. One pass over the text's braces."""
    found = {}
    frames = []         # for each open brace: the name of the struct whose body it opens
    for i, ch in _code_braces(text):
        if ch == "{":
            key = None
            if i in tags:
                if i in scopes:
                    key = tags[i]
                elif frames and frames[-1] is not None and \
                        frames[-1].count("::") < _MAX_NESTING:     # (names stay short)
                    key = f"{frames[-1]}::{tags[i]}"
            if key is not None:
                found[i] = key
            frames.append(key)
        elif frames:
            frames.pop()
    return found


# `typedef Box<float, 4> P;`, `typedef struct Q P;` and `using P = ns::Q;`: aliases of types
# kernarg may lay out as structs (not of pointers, arrays or functions; the lengths bounded, and
# a typedef's text not read past the next `typedef`).
_STRUCT_TYPEDEF = re.compile(r"\btypedef\s+((?:(?!\btypedef\b)[^;{}()\[\]&*=]){1,1000}?)\s+"
                             r"([A-Za-z_]\w*)\s*;")
_STRUCT_USING = re.compile(r"\busing\s+([A-Za-z_]\w*)\s*=\s*([^;{}()\[\]&*=]{1,1000}?)\s*;")


def _struct_aliases(str text):
    """``{name: (the type as written, the struct whose member it is: '' at namespace scope)}``
    of the aliases ``text`` (outside conditionals) declares for types that are no type kernarg
    names (structs, struct templates' instantiations, as _SourceStructs reads them): at
    namespace scope by their names, a struct's member by its struct's (``R::P``). A name
    declared for two types is None."""
    found = {}
    if "typedef" not in text and "using" not in text:
        return found
    for scope, stretch in _scoped_texts(text):
        if isinstance(stretch, tuple):
            continue                            # (an enumeration)
        owner = "::".join(name for kind, name in scope if kind == "struct")
        pairs = [(m[2], m[1]) for m in _STRUCT_TYPEDEF.finditer(stretch)]
        pairs += [(m[1], m[2]) for m in _STRUCT_USING.finditer(stretch)]
        for name, written in pairs:
            written = " ".join(written.split())
            if written.startswith("typename ") or _canonical(written) is not None:
                continue
            key = f"{owner}::{name}" if owner else name
            entry = (written, owner)
            found[key] = entry if found.get(key, entry) == entry else None
    return found


def _namespace_braces(text):
    """The positions of the ``{`` in ``text`` that open a block at namespace scope (inside no
    function, struct or class): where a struct defined is one a kernel's parameter names."""
    found = set()
    frames = []         # for each open brace: whether it is a namespace's (or extern "C")
    cdef Py_ssize_t others = 0          # how many of them are not
    for i, ch in _code_braces(text):
        if ch == "{":
            if not others:
                found.add(i)
            opens = not others and _NAMESPACE_OPENING.search(text, max(0, i - 200),
                                                             i) is not None
            frames.append(opens)
            others += not opens
        elif frames:
            others -= not frames.pop()
    return found


def _substitute_aliases(decl, aliases, str scope="", int depth=0, list budget=None,
                        tuple bases=()):
    """``decl`` with each alias (_source_aliases) that names a parameter's type replaced by its
    type: a name, qualified or not (``real``, ``lib::index_t``, ``K::Index``), but not the
    parameter's own name, which may shadow a typedef. It is looked up as C++ would from
    ``scope`` (``"ns"``, or the struct being laid out, ``"K::Params"``): innermost first
    (``K::Params::Index``, ``K::Index``, then ``Index``), the struct's ``bases`` (their
    scopes: _SourceStructs._base_keys) after its own members. An enumeration's ``enum`` keyword
    goes with its name. An alias template's use (``ptr<float>``) is its type with the
    arguments substituted, and the aliases in that in turn (``depth``: how many times), within
    a budget of characters for each parameter (``budget``: what is left of it, shared by those
    readings)."""
    if not aliases or decl.strip() in ("", "void"):
        return decl
    cdef bint each = budget is None     # a budget for each parameter
    enclosing = [p for p in scope.split("::") if p]
    out = []
    for piece in _split_params(decl, True):
        if each:
            budget = [_ALIAS_TEXT_BUDGET]
        words = [m for m in _TYPE_NAME.finditer(piece) if m[0] not in _QUALIFIERS]
        name = words[-1] if len(words) > 1 else None
        parts, at = [], 0
        angles = None       # where each `<` closes, found once (_angle_pairs)
        for k, m in enumerate(words):
            if m is name or m.start() < at:     # (inside an alias template's arguments)
                continue
            if m[0].startswith("::") and piece[:m.start()].rstrip().endswith(">"):
                continue        # a member of a template's instantiation: Gemm<float>::Element
            written = re.sub(r"\s+", "", m[0]).removeprefix("::")
            candidates = ["::".join(enclosing[:j] + [written])
                          for j in range(len(enclosing), 0, -1)] + [written]
            if bases:
                candidates[1:1] = [f"{b}::{written}" for b in bases]
            end = m.end()
            angle = _ANGLE.match(piece, end)
            if angle is not None:
                value = next((aliases[c + "<>"] for c in candidates if c + "<>" in aliases),
                             None)
                if value is None or depth >= _MAX_NESTING:
                    continue
                if angles is None:
                    angles = _angle_pairs(piece)
                closing = angles.get(angle.end() - 1, -1)
                if closing < 0:
                    continue
                args = [a.strip() for a in _items(piece[angle.end():closing], False, True)]
                value = _substitute_template_args(value[1], value[0], args)
                if value is not None:
                    budget[0] -= len(value)
                if value is not None and budget[0] >= 0:
                    # (Its aliases in turn; a name after it, so none of its words is taken for
                    # one.)
                    value = _substitute_aliases(value + " __kernarg_name", aliases, scope,
                                                depth + 1, budget,
                                                bases)[:-len(" __kernarg_name")]
                    value = value.strip()
                if value is None or budget[0] < 0:
                    # Left as written, arguments and all: read again word by word, the
                    # arguments' uses would be expanded once for each enclosing one.
                    parts.append(piece[at:closing + 1])
                    at = closing + 1
                    continue
                end = closing + 1
            else:
                value = next((aliases[c] for c in candidates if c in aliases), None)
            if value is None:
                continue
            start = m.start()
            if k and words[k - 1][0] == "enum":
                start = words[k - 1].start()    # `enum Mode m`
            before = piece[at:start]
            if value.endswith("*"):
                # `const ptr p` is `float* const p`: the alias's qualifiers are the pointer's.
                qualifiers = _TOP_QUALIFIERS.search(before)
                if qualifiers is not None:
                    before = before[:qualifiers.start()]
                    value += " " + qualifiers[0].strip() + " "
            parts += [before, value]
            at = end
        out.append("".join(parts) + piece[at:])
    return ",".join(out)


_ANGLE = re.compile(r"\s*<")
# How many characters the alias templates' uses in one parameter may be read as, together:
# each use may hold its arguments more than once (`template <class T> using D = Two<T, T>;`),
# so D<D<...>> 20 deep would be 10 MB, read as a million uses.
_ALIAS_TEXT_BUDGET = 100000


def _angle_pairs(str text):
    """``{index of a '<': index of the '>' that closes it}`` in ``text``, in one pass: a ``<``
    or ``>`` inside parentheses is a comparison, as _closing_angle has it."""
    pairs, stack = {}, []
    cdef Py_ssize_t parens = 0
    for j, ch in enumerate(text):
        if ch == "(":
            parens += 1
        elif ch == ")":
            parens -= 1
        elif parens == 0 and ch == "<":
            stack.append(j)
        elif parens == 0 and ch == ">" and stack:
            pairs[stack.pop()] = j
    return pairs


def _fits_ptx(str decl, list ptx_specs, structs):
    """Whether the parameter list ``decl`` can be the one the PTX's parameters ``ptx_specs``
    were compiled from: as many parameters, each agreeing with the PTX's
    (_agrees_with_ptx)."""
    try:
        pieces = [] if decl.strip() in ("", "void") else _split_params(decl, True)
    except ValueError:
        return False
    if len(pieces) != len(ptx_specs):
        return False
    for piece, ptx_spec in zip(pieces, ptx_specs):
        try:
            spec = _declared_spec(piece, ptx_spec, structs)[0]
        except ValueError:
            return False
        if spec.header_aligned and spec.size == ptx_spec.size:
            continue
        if not _agrees_with_ptx(spec, ptx_spec):
            return False
    return True


cdef bint _agrees_with_ptx(object spec, object ptx_spec):
    """Whether a parameter's spec can be what the PTX declares: the same size and alignment,
    and a float where the PTX has a float (.f32, .f64), an integer or pointer where it has an
    integer (.sN, .uN)."""
    if (spec.size, spec.align) != (ptx_spec.size, ptx_spec.align):
        return False
    if ptx_spec.code <= C_F64 or ptx_spec.code == C_U64_OR_PTR:
        return (spec.code == C_F32 or spec.code == C_F64) == \
            (ptx_spec.code == C_F32 or ptx_spec.code == C_F64)
    return True


_BODY = re.compile(r"\s*\{")


_HEAD_END = re.compile(r"[;{]|__global__")


def _kernel_declarations(str plain, str kernel_name):
    """Every ``__global__`` declaration of ``kernel_name``'s function name in ``plain`` (a
    source without comments, its literals blanked, the same length as the caller's text:
    _without_comments), in order: ``(index where it starts, index past its parameter list's
    opening parenthesis, index of the closing one, the namespaces it is in, the template
    arguments written after the name or None)``. For a qualified name (``'a::k'``), only those
    in that namespace, where there are any."""
    name = _split_kernel_name(kernel_name)[0]
    out = []
    # The declaration does not run into another `__global__` (quadratic in their number). Each
    # part of a declaration's head is read once (a run of `a::k<` is linear):
    for m in re.finditer(r"__global__(?:(?!__global__)[^;{])*?\b(" + re.escape(name) +
                         r")\s*(?=[<(])", plain):
        at, args = m.end(), None
        if plain[at] == "<":
            # Template arguments after the name: an explicit specialization's or
            # instantiation's (`template <> __global__ void k<double>(double y)`), before the
            # head ends.
            stop = _HEAD_END.search(plain, at)
            close = _closing_angle(plain, at + 1, len(plain) if stop is None else stop.start())
            if close < 0:
                continue
            args = plain[at + 1:close]
            at = close + 1
            while at < len(plain) and plain[at].isspace():
                at += 1
            if at >= len(plain) or plain[at] != "(":
                continue
        j = _closing(plain, at + 1, "(", ")")
        if j < 0:
            raise ValueError(f"unbalanced parentheses in the declaration of {name!r}")
        # A name qualified by namespaces (`__global__ void ns::k(int b) {}`, the definition of
        # one declared in ns) is in them.
        spaces = _namespaces_at(plain, m.start()) + _qualifier_before(plain, m.start(1))
        out.append((m.start(), at + 1, j, spaces, args))
    qualified = kernel_name.split("<", 1)[0]
    if "::" in qualified:
        wanted = tuple(part.strip() for part in qualified.split("::")[:-1])
        if wanted[:1] == ("",):
            wanted = wanted[1:]             # '::k': the global namespace
        exact = [d for d in out if d[3] == wanted]
        if exact:
            out = exact
    return out


def _qualifier_before(str plain, Py_ssize_t at):
    """The namespaces qualifying the name that starts at index ``at`` of ``plain``
    (``ns::inner::k``: ``('ns', 'inner')``), read back from it, each character once."""
    parts = []
    cdef Py_ssize_t k, end
    while True:
        k = at - 1
        while k >= 0 and plain[k].isspace():
            k -= 1
        if k < 1 or plain[k] != ":" or plain[k - 1] != ":":
            break
        k -= 2
        while k >= 0 and plain[k].isspace():
            k -= 1
        end = k + 1
        while k >= 0 and (plain[k].isalnum() or plain[k] == "_"):
            k -= 1
        if end == k + 1 or plain[k + 1].isdigit():
            break
        parts.append(plain[k + 1:end])
        at = k + 1
    return tuple(reversed(parts))


def _find_declarations(source, kernel_name):
    """The parameter list of every ``__global__`` declaration of ``kernel_name`` in
    ``source`` (a text without comments: _without_comments), in order (see
    _kernel_declarations), each with whether it is the definition (its body follows) and the
    namespaces it is in; for a template instantiation (``'saxpy<float>'``), with the
    template's arguments substituted."""
    name, args = _split_kernel_name(kernel_name)
    out, deduced = [], set()
    blanked = _without_comments(source, True, True)
    found = [(start, opened, j, spaces, written, _template_header(source, blanked, start))
             for start, opened, j, spaces, written in _kernel_declarations(blanked, kernel_name)]
    # The template's own parameter list, to fill in the default arguments that one list of
    # template arguments gives and another leaves out (k<double> is k<double, 2>).
    primary = next((d[5] for d in found if d[5] is not None and d[5].strip()), None)
    for _, opened, j, spaces, written, header in found:
        decl = source[opened:j]
        special = header is not None and not header.strip()     # `template <>`
        if written is not None:
            # An explicit specialization (`template <> ... k<double>(`) or instantiation
            # (`template ... k<float>(float, int);`): its parameter list is the kernel's only
            # where its template arguments are the ones asked for.
            if args is None or not _same_template_args(
                    primary, [a.strip() for a in _items(written, False, True)], args):
                continue
        elif special:
            # `template <> __global__ void k(double y)`: a specialization whose arguments the
            # compiler deduces from its parameter types; it is this kernel's where its types
            # are those the template has with the arguments asked for (checked below).
            if args is None:
                continue
            deduced.add(len(out))
        elif args is not None and header is not None:
            decl = _substitute_template_args(decl, header, args)
            if decl is None:
                raise LookupError(f"{kernel_name}: cannot match the template arguments to "
                                  "the template's parameters")
        out.append((decl, _BODY.match(source, j + 1) is not None, spaces, special))
    if deduced:
        general = {_declared_types(d[0]) for i, d in enumerate(out) if i not in deduced}
        out = [d for i, d in enumerate(out)
               if i not in deduced or not general or _declared_types(d[0]) in general]
    if not out:
        raise LookupError(f"no __global__ declaration of {name!r} in the source")
    return out


def _same_template_args(header, first, second):
    """Whether two lists of template arguments (``['double']``, ``['double', '2']``) are, as
    written, the same, once the defaults of the template parameter list ``header`` (None where
    unknown) fill in the ones either leaves out; compared as _demangle.template_key reads them
    (``unsigned`` is ``unsigned int``, ``2u`` is ``2``)."""
    from kernarg._demangle import template_key

    def normalized(args):
        if header is not None:
            bound = _bind_template_args(header, args)
            if bound is not None and None not in bound[0]:
                args = bound[0]
        return [template_key(a) for a in args]
    return normalized(first) == normalized(second)


def _declared_types(decl):
    """The parameter types of a declaration, without names (to compare declarations)."""
    out = []
    for piece in ([] if decl.strip() in ("", "void") else _split_params(decl, True)):
        try:
            out.append(_parse_c_param(piece)[0].text)
        except ValueError:
            out.append(_type_key(piece))
    return tuple(out)


_TYPE_TOKEN = re.compile(r"(?:::\s*)?[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*|\S")
# Words that do not change which type a parameter has: an elaborated type's keyword, and
# attributes of the parameter (the function's type is the same without them).
_NAME_START = frozenset("_:abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_TYPE_KEY_DROPPED = frozenset(("struct", "class", "union", "enum", "typename",
                               "__restrict__", "__restrict", "restrict"))


def _type_key(str piece):
    """A parameter declaration kernarg cannot type (a struct, a template's instantiation),
    without its name and what does not change the function's type, to compare declarations:
    `Q`, `const Q q` and `struct Q q` are all `Q`; `Box<int,2>` is `Box<int, 2> b`. (Top-level
    `const` is no part of a function's type; __grid_constant__ must agree, NVRTC checks.)"""
    tokens = [re.sub(r"\s+", "", t) for t in _TYPE_TOKEN.findall(piece)]
    tokens = [t for t in tokens if t not in _TYPE_KEY_DROPPED]
    depth, top, last_star = 0, [], -1       # tokens outside <> and (), the last * there
    for k, t in enumerate(tokens):
        if t in "<(" and len(t) == 1:
            depth += 1
        elif t in ">)" and len(t) == 1 and depth:
            depth -= 1
        elif not depth:
            top.append(k)
            if t == "*":
                last_star = k
    drop = {k for k in top if k > last_star and tokens[k] in ("const", "volatile")}
    named = [k for k in top if k not in drop and tokens[k][0] in _NAME_START]
    kept = [k for k in top if k not in drop]
    if named and kept and named[-1] == kept[-1] and len(kept) > 1 and \
            not tokens[named[-1]].startswith(":") and \
            (tokens[kept[-2]] in ("*", ">", "&") or kept[-2] in named):
        drop.add(named[-1])             # the parameter's name
    return " ".join(t for k, t in enumerate(tokens) if k not in drop)


_DECLARATOR_GROUP = re.compile(r"\(\s*[*&][^()]*?([A-Za-z_]\w*)\s*\)")


def _last_identifier(text):
    """The name a parameter declaration kernarg cannot type declares, or None: the name in a
    parenthesized declarator (``float (*rows)[N]``, ``void (*f)(int)``), else its last word
    outside array extents and template arguments (``float x[N]``, ``Vec<N> v``), where there
    are two words or more (one is a type alone)."""
    kept = []
    cdef Py_ssize_t depth = 0       # inside array extents and template arguments: left out
    for ch in text:
        if ch == "[" or ch == "<":
            depth += 1
            if depth == 1:
                kept.append(" ")
        elif (ch == "]" or ch == ">") and depth:
            depth -= 1
        elif not depth:
            kept.append(ch)
    plain = "".join(kept)
    group = _DECLARATOR_GROUP.search(plain)
    if group is not None:
        return group.group(1)
    words = re.findall(r"[A-Za-z_]\w*", plain)
    return words[-1] if len(words) > 1 else None


# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h);
# Signature.pack takes it itself, so that the interpreter calls it as a builtin method.
guard_module(globals(), __name__, (Signature.__dict__["pack"],))
