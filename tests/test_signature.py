"""kernarg.Signature: layout against NVRTC, values against a reference encoder, errors."""
import ctypes
import itertools
import math
import pickle
import random
import re
import struct
import sys
from enum import IntEnum, IntFlag
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernarg
from kernarg._nvrtc import NvrtcError, cccl_include_dir, compile_to_ptx, nvrtc_version

from nvrtc_oracle import compile_ptx, field_offsets, kernels_layout, layout, parse_params
from producers import CAIObject, DLPackProducer, cai, ptr_of

# Tests that include <cuda/std/...>: the lower-bounds CI job has no CCCL headers.
NEEDS_CCCL = pytest.mark.skipif(
    cccl_include_dir() is None, reason="no CCCL headers (<cuda/std/...>): neither pip "
    "nvidia-cuda-cccl nor a CUDA toolkit of NVRTC's major version")

SCALARS = ["bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int",
           "unsigned int", "long", "unsigned long", "long long", "unsigned long long", "float",
           "double", "__half", "__nv_bfloat16", "int8_t", "uint8_t", "int16_t", "uint16_t",
           "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t", "ptrdiff_t", "intptr_t",
           "half", "unsigned", "long int", "short int", "unsigned long long int"]
VECTORS = [f"{b}{n}" for b in ("char", "uchar", "short", "ushort", "int", "uint", "long",
                               "ulong", "longlong", "ulonglong", "float", "double")
           for n in (1, 2, 3)]
VECTORS += [f"{b}4" for b in ("char", "uchar", "short", "ushort", "int", "uint", "float")]
VECTORS += ["half2", "__nv_bfloat162"]
# CUDA 13 added the explicitly aligned 4-vectors; an older NVRTC (the oracle) does not know them.
ALIGNED_VECTORS = [f"{b}4_16a" for b in ("long", "ulong", "longlong", "ulonglong", "double")]
ALIGNED_VECTORS += ["double4_32a", "longlong4_32a"]
if nvrtc_version() >= (13, 0):
    VECTORS += ALIGNED_VECTORS
POINTERS = ["float*", "const float*", "float* __restrict__", "const double* __restrict__",
            "volatile int*", "void*", "const void*", "int**", "float const*", "char*"]
# NVRTC ships no C++ standard library headers: declare the <stdint.h> names ourselves, with
# the LP64 definitions CUDA uses on Linux.
PRELUDE = """
typedef signed char int8_t; typedef unsigned char uint8_t; typedef short int16_t;
typedef unsigned short uint16_t; typedef int int32_t; typedef unsigned int uint32_t;
typedef long long int64_t; typedef unsigned long long uint64_t; typedef unsigned long size_t;
typedef long ptrdiff_t; typedef long intptr_t;
"""


def _oracle(decls):
    return kernels_layout(decls, prelude=PRELUDE)


def test_each_type_alone_and_after_a_byte():
    decls = {}
    for i, t in enumerate(SCALARS + VECTORS + POINTERS):
        decls[f"a{i}"] = [t]
        decls[f"b{i}"] = ["char", t, "char"]
    expected = _oracle(decls)
    for name, types in decls.items():
        sig = kernarg.Signature(types)
        assert (sig.offsets, sig.sizes, sig.nbytes) == expected[name], (name, types)


@pytest.mark.parametrize("seed", range(3))
def test_random_signatures_match_nvrtc(seed):
    rng = random.Random(seed)
    pool = SCALARS + VECTORS + POINTERS
    decls = {f"r{seed}_{i}": [rng.choice(pool) for _ in range(rng.randint(1, 20))]
             for i in range(100)}
    expected = _oracle(decls)
    for name, types in decls.items():
        # Both forms: a sequence of types and a C parameter list with names.
        sig = kernarg.Signature(types)
        assert (sig.offsets, sig.sizes, sig.nbytes) == expected[name], types
        text = ", ".join(f"{t} p{i}" for i, t in enumerate(types))
        assert kernarg.Signature(text).offsets == expected[name][0]


NESTED = np.dtype([("a", np.int8), ("inner", np.dtype([("x", np.float64), ("y", np.int16)],
                                                          align=True)), ("z", np.int8)],
                  align=True)
FLAT = np.dtype([("a", np.int16), ("b", np.float32), ("c", np.int8)], align=True)


class CPair(ctypes.Structure):
    _fields_ = [("c", ctypes.c_char), ("d", ctypes.c_double), ("s", ctypes.c_short)]


def test_struct_params_match_nvrtc():
    prelude = PRELUDE + """
    struct Inner { double x; short y; };
    struct Nested { signed char a; Inner inner; signed char z; };
    struct Flat { short a; float b; signed char c; };
    struct CPair { char c; double d; short s; };
    """
    decls = {"s1": ["char", "Nested", "int"], "s2": ["Flat", "char", "Flat"],
             "s3": ["bool", "CPair", "float2"]}
    expected = kernels_layout(decls, prelude=prelude)
    sigs = {"s1": kernarg.Signature(["char", NESTED, "int"]),
            "s2": kernarg.Signature([FLAT, "char", FLAT]),
            "s3": kernarg.Signature(["bool", CPair, "float2"])}
    for name, sig in sigs.items():
        assert (sig.offsets, sig.sizes, sig.nbytes) == expected[name], name


ALIGNED_SOURCE = r"""
#include <cuda_fp16.h>
struct __align__(16) Vec3 { float x, y, z; };
struct __align__(8) Pair { short a; char b; };
struct Plain { char c; double d; };
extern "C" __global__ void k(char c, Vec3 v, const float* __restrict__ p, Pair q, __half h,
                             Plain s, int n) {}
"""


def test_from_source_and_from_ptx_with_aligned_structs():
    sig = kernarg.Signature.from_source(ALIGNED_SOURCE, "k")
    ptx = compile_ptx(ALIGNED_SOURCE)
    expected = layout(parse_params(ptx, "k"))
    assert (sig.offsets, sig.sizes, sig.nbytes) == expected
    assert sig.offsets[1] == 16 and sig.sizes[1] == 16
    assert sig.names == ("c", "v", "p", "q", "h", "s", "n")
    assert sig.types[2] == "const float*" and sig.types[4] == "__half"
    from_ptx = kernarg.Signature.from_ptx(ptx, "k")
    assert (from_ptx.offsets, from_ptx.sizes, from_ptx.nbytes) == expected
    # Packing through the source signature: n is an int, h a half, structs are bytes.
    block = sig.pack((7, bytes(16), None, bytes(8), 1.5, bytes(16), -2))
    raw = bytes(block)
    assert raw[0] == 7 and raw[sig.offsets[4]:sig.offsets[4] + 2] == np.float16(1.5).tobytes()
    assert struct.unpack_from("<i", raw, sig.offsets[6])[0] == -2
    # Kernel.from_source reuses the PTX it compiled for the signature (one NVRTC run).
    again = kernarg.Signature._from_source_and_ptx(ALIGNED_SOURCE, "k", ptx)
    assert (again.offsets, again.sizes, again.names, again.types) == \
        (sig.offsets, sig.sizes, sig.names, sig.types)


def test_from_ptx_mangled_cpp_kernel_and_types():
    src = "__global__ void scale(float* x, float a, int n, unsigned short u, double d) {}"
    ptx = compile_ptx(src)
    sig = kernarg.Signature.from_ptx(ptx, "scale")
    assert len(sig) == 5 and sig.sizes == (8, 4, 4, 2, 8)
    block = sig.pack((0x1000, 0.5, 3, 65535, 2.0))
    assert bytes(block) == struct.pack("<QfiH6xd", 0x1000, 0.5, 3, 65535, 2.0)
    with pytest.raises(TypeError, match="parameter 1"):
        sig.pack((0x1000, "a", 3, 1, 2.0))
    with pytest.raises(LookupError, match="missing"):
        kernarg.Signature.from_ptx(ptx, "missing")


def test_from_ptx_finds_kernels_in_namespaces_by_their_qualified_names():
    # A kernel in a namespace has a nested mangled name (_ZN2ns1fEf): kernarg found only
    # kernels at namespace scope by their own names, and `ns::f` was "not found".
    ptx = compile_ptx("namespace ns { __global__ void f(float x) {}\n"
                      "  namespace in { __global__ void g(int n, double d) {} } }\n"
                      "namespace other { __global__ void f(int x) {} }\n"
                      "__global__ void over(int) {}\n__global__ void over(float) {}\n")
    assert kernarg.Signature.from_ptx(ptx, "ns::f").sizes == (4,)
    assert kernarg.Signature.from_ptx(ptx, "::ns::in::g").sizes == (4, 8)
    assert bytes(kernarg.Signature.from_ptx(ptx, "other::f").pack((7,))) == struct.pack("<i", 7)
    # The unqualified name of a kernel in a namespace says which ones it could be.
    with pytest.raises(LookupError, match=r"kernel 'f' not found in the PTX .*; did you mean "
                                          r"'ns::f' or 'other::f'\?$"):
        kernarg.Signature.from_ptx(ptx, "f")
    with pytest.raises(LookupError, match=r"did you mean 'ns::in::g'\?$"):
        kernarg.Signature.from_ptx(ptx, "g")
    # Overloads have one entry each: the name alone is ambiguous, and the refusal says so.
    with pytest.raises(LookupError, match=r"kernel 'over' is overloaded in the PTX "
                                          r"\(\['_Z4overf', '_Z4overi'\]\): name the \.entry "
                                          r"itself"):
        kernarg.Signature.from_ptx(ptx, "over")
    assert kernarg.Signature.from_ptx(ptx, "_Z4overf").sizes == (4,)
    with pytest.raises(LookupError, match=r"kernel 'in::g' not found"):
        kernarg.Signature.from_ptx(ptx, "in::g")
    # A template's one instantiation in a namespace, as one at global scope is found.
    ptx = compile_ptx("namespace ns { template <class T> __global__ void axpy(T* x, T a) {}\n"
                      "template __global__ void axpy<float>(float*, float); }\n")
    assert kernarg.Signature.from_ptx(ptx, "ns::axpy").sizes == (8, 4)
    with pytest.raises(LookupError, match=r"did you mean 'ns::axpy<float>'\?$"):
        kernarg.Signature.from_ptx(ptx, "axpy")


def test_kernels_in_anonymous_namespaces_are_found_by_the_names_code_gives_them():
    # NVRTC mangles an anonymous namespace as _GLOBAL__N__<a hash of the source>: `k` in one
    # was "not found", with a hint naming that namespace, which changes with every edit.
    ptx = compile_ptx("namespace { __global__ void k(float* p, int n) {} }\n"
                      "namespace a { namespace { __global__ void g(double d) {} } }\n")
    assert kernarg.Signature.from_ptx(ptx, "k").sizes == (8, 4)
    assert kernarg.Signature.from_ptx(ptx, "a::g").sizes == (8,)
    sig = kernarg.Signature.from_source("namespace { __global__ void k(float* p, int n) {} }",
                                        "k")
    assert (sig.types, sig.names) == (("float*", "int"), ("p", "n"))
    with pytest.raises(LookupError, match=r"kernel 'g' not found in the PTX .*; did you mean "
                                          r"'a::g'\?$"):
        kernarg.Signature.from_ptx(ptx, "g")
    # One of the same name outside it makes the name ambiguous, as an overload does.
    ptx = compile_ptx("namespace { __global__ void k(float* p) {} }\n"
                      "__global__ void k(int* p) {}\n")
    with pytest.raises(LookupError, match=r"kernel 'k' is overloaded in the PTX"):
        kernarg.Signature.from_ptx(ptx, "k")


def test_kernels_in_inline_namespaces_are_found_by_the_names_code_gives_them():
    # C++ lets a name leave an inline namespace out: `k` of `inline namespace v1 { k }` was
    # "not found in the PTX (...); did you mean 'v1::k'?" from from_source, and from
    # Kernel.from_source's entry lookup. The source says which namespaces are inline.
    from kernarg._launch import _entry_name

    src = ("inline namespace v1 { __global__ void k(int a, float b) {} }\n"
           "namespace o { inline namespace v2 { __global__ void g(double d) {} } }\n"
           "namespace p::inline v3 { __global__ void h(char c) {} }\n")
    for name, names in (("k", ("a", "b")), ("v1::k", ("a", "b")), ("o::g", ("d",)),
                        ("o::v2::g", ("d",)), ("p::h", ("c",))):
        assert kernarg.Signature.from_source(src, name, options=("--std=c++20",)).names == \
            names, name
    ptx = compile_to_ptx(src, options=("--std=c++20",))
    assert _entry_name(ptx, "k", src) == "_ZN2v11kEif"
    assert _entry_name(ptx, "o::g", src) == "_ZN1o2v21gEd"
    with pytest.raises(LookupError, match=r"did you mean 'v1::k'\?$"):
        _entry_name(ptx, "k")           # (no source: which namespaces are inline is unknown)
    # Read in one pass: a first version of the pattern read on from each `namespace` to the end
    # of a run of words (20,000 of them: 19 s).
    from kernarg._signature import _inline_namespaces

    assert _inline_namespaces("namespace " * 20000 + "a::inline b {") == {"b"}


@pytest.mark.parametrize("name, entries, hint", [
    ("sxapy", ["saxpy", "_Z4axpyPf"], "did you mean 'saxpy'?"),
    ("Saxpy", ["saxpy"], "did you mean 'saxpy'?"),
    ("SAXPY", ["saxpy"], "did you mean 'saxpy'?"),
    ("axpi", ["_Z4axpyPf"], "did you mean 'axpy'?"),
    ("ns::fil", ["_ZN2ns4fillEPf"], "did you mean 'ns::fill'?"),
])
def test_a_name_that_is_not_found_gets_the_closest_kernel_names(name, entries, hint):
    from kernarg._signature import ptx_entry_name

    with pytest.raises(LookupError, match=rf"kernel {name!r} not found in the PTX \(entries: "
                                          rf".*\); {re.escape(hint)}$"):
        ptx_entry_name(entries, name)


def test_a_name_far_from_every_kernel_gets_no_hint():
    from kernarg._signature import ptx_entry_name

    with pytest.raises(LookupError, match=r"^kernel 'zzz' not found in the PTX "
                                          r"\(entries: \['saxpy'\]\)$"):
        ptx_entry_name(["saxpy"], "zzz")


@pytest.mark.parametrize("source", [
    "__device__ void k(float* p) {}",
    "static __host__ __device__ inline float k(float x) { return x; }",
    "template <class T> __device__ T k(T x) { return x; }",
    '__device__ float k(float);\nextern "C" __global__ void g(float* p) { p[0] = k(1.f); }\n'
    "__device__ float k(float x) { return x; }",
])
def test_a_device_function_named_as_the_kernel_is_refused_saying_so(source):
    # It was "not found in the PTX (entries: [])", leaving the user to find out why.
    with pytest.raises(LookupError, match=r"'k' is a __device__ function, which a kernel calls; "
                                          r"only __global__ functions are launched$"):
        kernarg.Signature.from_source(source, "k")


@pytest.mark.parametrize("filler", ["template <__global__ ", "__global__ ", "typedef a ",
                                    "typedef struct ", "'a'", "1'0'", "namespace a { ",
                                    "\n#ifndef G\n#define G\n", "\n#if 0\n#endif\n",
                                    "struct A { typedef int t; ", "enum E : ",
                                    "typedef enum { A } ", "namespace a::b { void f() {} "])
def test_declaration_search_reads_a_long_run_of_keywords_once(filler):
    # Many of these in one statement were each read to its end: the template hint cubic in
    # their number (400 took 2.5 s), the declaration and typedef searches quadratic; and
    # whether a ' is a digit separator was decided by a walk back over every literal or
    # separator before it, whether a brace is at namespace scope over every open one, and
    # whether a line is outside every conditional (include guards) over every open one. The
    # scopes of typedefs and enumerations (session 61) are read in one pass, and not past 32
    # names deep (2,000 nested namespaces took 0.3 s, 20,000 took 32 s).
    ptx = compile_ptx('extern "C" __global__ void k(float* p, int n) {}')
    kernel = '\nextern "C" __global__ void k(float* p, int n) {}\n'
    for source in (filler * 2000 + kernel, kernel + filler * 2000):
        sig = kernarg.Signature._from_source_and_ptx(source, "k", ptx)
        assert sig.types == ("float*", "int")
    with pytest.raises(LookupError, match="not found in the PTX"):
        kernarg.Signature._from_source_and_ptx(filler * 2000, "q", ptx)



@pytest.mark.parametrize("head", ["__global__ void " + "a::" * 8000 + "(",
                                  "__global__ void " + "a :: " * 8000 + "b(",
                                  "__global__ " + "a::k<" * 8000 + "(",
                                  "template <> __global__ void k<" + "k<" * 8000 + "int>("])
def test_a_declaration_head_is_read_once(head):
    # A declaration's name may be qualified (ns::k) and followed by template arguments
    # (k<double>): read by regular expressions that tried the qualifier from each word, and
    # the arguments from each `<` to the head's end, these took 2.5 s at 8,000 (quadratic,
    # session 60, before they reached CI); now each character of a head is read once.
    ptx = compile_ptx('extern "C" __global__ void k(float* p, int n) {}')
    kernel = '\nextern "C" __global__ void k(float* p, int n) {}\n'
    for source in (head + ";" + kernel, kernel + head + ";"):
        sig = kernarg.Signature._from_source_and_ptx(source, "k", ptx)
        assert (sig.types, sig.names) == (("float*", "int"), ("p", "n"))


@pytest.mark.parametrize("member", ["float v" + "[1]" * 50000 + " x;",
                                    "float v" + "[K]" * 50000 + ";",
                                    "float v[" + "(" * 30000 + "1" + ")" * 30000 + "];"])
def test_a_struct_member_of_many_brackets_is_read_once(member):
    # A field's extents were matched from each `[` to the member's end: quadratic where they
    # are not at its end (20,000 took 8 s, before session 64); now read backwards, once.
    ptx = compile_ptx('struct S { int n; };\nextern "C" __global__ void k(S s, int n) {}')
    source = f'struct S {{ {member} int n; }};\nextern "C" __global__ void k(S s, int n) {{}}\n'
    sig = kernarg.Signature._from_source_and_ptx(source, "k", ptx)
    assert sig.types[1] == "int" and sig.records[0] is None


PTX_HEAD = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n{}\n)\n{{ ret; }}\n"


def test_from_ptx_reads_every_declaration_form_of_the_isa():
    # [.align N] .TYPE name[COUNT]; a pointer's attributes (.ptr, a state space, the pointee's
    # .align) say nothing of the parameter's own layout; comments are C's; .f16, .b128 and
    # .u128 are bytes of their size.
    sig = kernarg.Signature.from_ptx(PTX_HEAD.format(
        "\t.param .u64 .ptr .global .align 16 p, // .param .u8 commented_out,\n"
        "\t.param .u32 n, /* .param .u8 nor, */ .param .align 8 .b8 s [ 12 ],\n"
        "\t.param .f16 h, .param .b128 q, .param .u128 w, .param .f64 d"), "k")
    assert sig.names == ("p", "n", "s", "h", "q", "w", "d")
    assert sig.offsets == (0, 8, 16, 28, 32, 48, 64)
    assert sig.sizes == (8, 4, 12, 2, 16, 16, 8)
    assert sig.types[0] == ".u64 .ptr .global .align 16" and sig.types[2] == ".align 8 .b8 [12]"
    assert bytes(sig.pack((0x1000, 5, bytes(range(12)), bytes(2), bytes(16), bytes(16),
                           0.5)))[:28] == struct.pack("<QI4x12s", 0x1000, 5, bytes(range(12)))


@pytest.mark.parametrize("param", [
    ".param .pred p", ".param .u32", ".param ", ".param .u24 x", ".param .f8 x",
    ".param .align 3 .b8 x[4]", ".param .align 0 .b8 x[4]", ".param .b8 x[0]",
    ".param .u32 7x", ".param .u32 a b", ".param .u32 .ptr x y",
    pytest.param(".param .b" + "9" * 5000 + " x", id="5000-digit width")])
def test_from_ptx_refuses_a_declaration_it_cannot_read_by_naming_it(param):
    # Malformed PTX once came back as an AttributeError or IndexError of the parser's own
    # (found by tools/fuzz/fuzz_parse.py), or as a misread layout.
    with pytest.raises(ValueError, match=r"PTX entry k: cannot read parameter 1, "
                                         + re.escape(f"'{' '.join(param.split())}'")):
        kernarg.Signature.from_ptx(PTX_HEAD.format(".param .u32 a, " + param), "k")


@pytest.mark.parametrize("param", [".param .align 1099511627776 .b8 x[1]",
                                   ".param .b8 x[99999999999999999999]",
                                   ".param .align 32768 .b8 x[4]", ".param .b8 x[32765]",
                                   # past the 4,300 digits int() reads
                                   pytest.param(".param .b8 x[" + "9" * 5000 + "]",
                                                id="5000-digit count"),
                                   pytest.param(".param .align 1" + "0" * 5000 + " .b8 x[1]",
                                                id="5001-digit alignment")])
def test_from_ptx_refuses_a_parameter_beyond_cudas_limit(param):
    # Not an OverflowError of a C conversion: the parameter, and the limit, are named.
    with pytest.raises(ValueError, match=r"parameter 0, .*limit of 32764 bytes"):
        kernarg.Signature.from_ptx(PTX_HEAD.format(param), "k")


def test_signature_constructors_name_what_they_cannot_read():
    # Not "'int' object is not iterable" or "expected string or bytes-like object".
    for bad in (5, None, 1.5, b"int n", np.dtype(np.int32), ctypes.c_int):
        with pytest.raises(TypeError, match=r"Signature: params must be a C parameter list "
                                            rf"\(a str\) .*got {type(bad).__name__}$"):
            kernarg.Signature(bad)
    for bad in (5, None, ["k"], np.float32(1)):
        with pytest.raises(TypeError, match="Signature.from_ptx: ptx must be PTX text "
                                            rf"\(str or bytes\), got {type(bad).__name__}"):
            kernarg.Signature.from_ptx(bad, "k")
    ptx = PTX_HEAD.format(".param .u32 n")
    for bad in (None, b"k", ["k"], {"k": 1}):
        with pytest.raises(TypeError, match="Signature.from_ptx: kernel_name must be a str, "
                                            f"got {type(bad).__name__}"):
            kernarg.Signature.from_ptx(ptx, bad)
    with pytest.raises(ValueError, match="Signature.from_ptx: ptx is not PTX text"):
        kernarg.Signature.from_ptx(b"\xff" + ptx.encode(), "k")
    for text in (ptx, ptx.encode(), bytearray(ptx.encode()), memoryview(ptx.encode())):
        assert kernarg.Signature.from_ptx(text, "k").sizes == (4,)


def test_texts_for_nvrtc_are_str_without_nul_characters():
    # NVRTC reads C strings: a NUL ended the source (then "kernel not found"), an option or a
    # header there without a word, and a kernel name after it gave the PTX's unnamed layout.
    src = 'extern "C" __global__ void k(float* out, int n) {}'
    cases = [(("\0" + src, "k"), {}, "source holds a NUL character .at index 0."),
             ((src, "k\0x"), {}, "the kernel name holds a NUL character .at index 1."),
             ((src, "k"), dict(options=("-lineinfo\0",)), r"options: '-lineinfo\\x00' holds"),
             ((src, "k"), dict(options=b"-DX\0"), r"options: b'-DX\\x00' holds a NUL"),
             ((src, "k"), dict(headers={"a.h": "\0"}), "headers: 'a.h' holds a NUL character"),
             ((src, "k"), dict(headers={"a.h\0": ""}),
              r"headers: the include name 'a.h\\x00' holds a NUL")]
    for args, kwargs, message in cases:
        with pytest.raises(ValueError, match=message + ".*NVRTC reads C strings"):
            kernarg.Signature.from_source(*args, **kwargs)
    for args, message in (((None, "k"), r"source must be CUDA C\+\+ text .a str., got NoneType"),
                          ((src.encode(), "k"), r"CUDA C\+\+ text .a str., got bytes"),
                          ((src, None), "the kernel name must be a str, got NoneType")):
        with pytest.raises(TypeError, match=message):
            kernarg.Signature.from_source(*args)


def test_arithmetic_specifiers_in_any_order_name_the_type_the_compiler_names():
    # C and C++ let `unsigned long int` be written `long unsigned int`, `int long unsigned`…:
    # every order of the same specifiers is the same type. The compiler says which: each
    # spelling must be exactly the type kernarg reports (a template only the same type
    # matches), and must not be a type of another signedness or width.
    groups = [("unsigned", "long", "int"), ("long", "long", "signed"),
              ("unsigned", "long", "long", "int"), ("unsigned", "char"), ("signed", "char"),
              ("short", "unsigned"), ("short", "signed", "int"), ("long", "int"),
              ("signed",), ("unsigned",), ("int", "signed")]
    spellings = sorted({" ".join(p) for g in groups for p in itertools.permutations(g)})
    checks = []
    for i, text in enumerate(spellings):
        sig = kernarg.Signature(f"{text} x{i}")
        assert sig.names == (f"x{i}",), text
        assert sig.types == kernarg.Signature([text]).types, text
        checks.append(f"static_assert(same<{text}, {sig.types[0]}>::value, \"{text}\");")
    compile_ptx("template <class A, class B> struct same { enum { value = 0 }; };\n"
                "template <class A> struct same<A, A> { enum { value = 1 }; };\n"
                + "\n".join(checks)
                + '\nextern "C" __global__ void k() {}')
    # The oracle itself can fail: a wrong type is a compile error.
    with pytest.raises(NvrtcError, match="unsigned long"):
        compile_ptx("template <class A, class B> struct same { enum { value = 0 }; };\n"
                    "template <class A> struct same<A, A> { enum { value = 1 }; };\n"
                    'static_assert(same<long unsigned int, unsigned long long>::value, '
                    '"unsigned long");')
    # long double is a type of its own, which NVRTC compiles as .f64: a double's layout.
    assert kernarg.Signature("double long x").types == ("double",)
    assert kernarg.Signature("int unsigned long long n").types == ("unsigned long long",)
    assert kernarg.Signature("char unsigned* p").types == ("unsigned char*",)
    for text in ("long short n", "signed unsigned n", "long long long n", "char int c",
                 "int double d", "unsigned double d", "short short s", "long long double d",
                 "signed float f"):
        with pytest.raises(ValueError, match="unknown parameter type"):
            kernarg.Signature(text)


def test_cucomplex_names_are_the_vector_types_complex_values_pack_into():
    # <cuComplex.h> defines cuFloatComplex (and cuComplex) as float2, cuDoubleComplex as double2.
    sig = kernarg.Signature("cuComplex a, cuDoubleComplex b, const cuFloatComplex* c")
    assert sig.types == ("float2", "double2", "const float2*")
    assert sig.offsets == (0, 16, 32)
    block = sig.pack((1 + 2j, np.complex128(3 - 4j), None))
    assert bytes(block)[:32] == struct.pack("<2f8x2d", 1, 2, 3, -4)
    with pytest.raises(TypeError, match=r"parameter 2 .*float2\* but .* c16"):
        sig.pack((0j, 0j, CAIObject(cai(0x10000, typestr="<c16"))))


def test_pointers_to_float_pairs_take_complex_arrays():
    # float2, cuComplex, double2, half2 are a complex number's layout: a cuComplex* kernel takes
    # complex64 arrays (CuPy's, torch's), as it takes float32 arrays of interleaved pairs. Only
    # the complex type of the pair's size is taken, and only for pairs. ("<V2", bytes numpy has
    # no type for, goes to any pointee of its element size.)
    takes = {"cuComplex* p": ("<c8", "<f4"), "float2* p": ("<c8", "<f4"),
             "cuDoubleComplex* p": ("<c16", "<f8"), "const double2* p": ("<c16", "<f8"),
             "half2* p": ("<c4", "<f2", "<V2"), "float4* p": ("<f4",), "float* p": ("<f4",),
             "float1* p": ("<f4",), "__nv_bfloat162* p": ("<V2",)}
    for param, accepted in takes.items():
        sig = kernarg.Signature(param)
        for typestr in ("<c4", "<c8", "<c16", "<f2", "<f4", "<f8", "<i4", "<V2"):
            array = CAIObject(cai(0x10000, typestr=typestr))
            if typestr in accepted:
                assert ptr_of(sig.pack((array,))) == 0x10000, (param, typestr)
            else:
                with pytest.raises(TypeError, match=r"parameter 0 \('p'\) is .* but the "
                                   "array's element type is"):
                    sig.pack((array,))
    # DLPack's complex dtype (code 5) the same way.
    assert ptr_of(kernarg.Signature("cuComplex* p").pack(
        (DLPackProducer(0x20000, dtype=(5, 64, 1)),))) == 0x20000


def test_complex_class_templates_are_the_float_pairs_they_are_laid_out_as():
    # libcu++'s cuda::std::complex<T>, thrust::complex<T> and std::complex<T> are
    # alignas(2 * sizeof(T)) pairs: the vector type of that size, which complex values pack into.
    sig = kernarg.Signature("char c, cuda::std::complex<float> z, thrust::complex<double> w, "
                            "const ::cuda::std::complex<float>* p, std::complex< __half > h, "
                            "complex<__nv_bfloat16> b")
    assert sig.types == ("char", "float2", "double2", "const float2*", "half2", "__nv_bfloat162")
    assert (sig.offsets, sig.alignments) == ((0, 8, 16, 32, 40, 44), (1, 8, 16, 8, 4, 4))
    block = bytes(sig.pack((1, 1 - 2j, np.complex128(3 + 4j), None, 1 + 2j, 1 + 2j)))
    assert block[8:32] == struct.pack("<2f2d", 1, -2, 3, 4)
    assert block[40:48] == struct.pack("<2e", 1, 2) + bytes.fromhex("803f0040")
    with pytest.raises(ValueError, match="unknown parameter type"):
        kernarg.Signature("mycomplex<float> z")


@NEEDS_CCCL
def test_cccl_headers_are_found_and_complex_layouts_match_nvrtc():
    # CUDA 13 keeps libcu++, CUB and Thrust under include/cccl, where NVRTC does not look:
    # kernarg passes it, so <cuda/std/...> includes compile.
    src = """#include <cuda/std/complex>
#include <cuda/std/cstdint>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(char c, cuda::std::complex<float> z, char d,
                             cuda::std::complex<double> w, cuda::std::complex<__half> h,
                             char e, cuda::std::complex<__nv_bfloat16> b,
                             cuda::std::uint32_t n, cuda::std::complex<float>* p) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("char", "float2", "char", "double2", "half2", "char", "__nv_bfloat162",
                         "unsigned int", "float2*")
    assert (sig.offsets, sig.sizes, sig.nbytes) == \
        layout(parse_params(compile_to_ptx(src), "k"))


def _fake_include(root, *, major, cccl="cccl"):
    """An include directory that says it is CUDA ``major``'s, with CCCL's marker header under
    ``cccl`` (a subdirectory name; "" for the directory itself; None for no CCCL)."""
    include = root / "include"
    include.mkdir(parents=True)
    (include / "cuda_runtime_api.h").write_text(f"#define CUDART_VERSION {major * 1000}\n")
    if cccl is not None:
        std = include / cccl / "cuda" / "std"
        std.mkdir(parents=True)
        (std / "version").write_text("")
    return include


def test_cccl_headers_come_from_a_toolkit_of_nvrtcs_major_version(tmp_path, monkeypatch):
    """Without pip's nvidia-cuda-cccl beside the runtime headers, a CUDA toolkit's CCCL
    (CUDA_HOME, CUDA_PATH, /usr/local/cuda) is used where its major version is NVRTC's:
    include/cccl (CUDA 13) or include itself (CUDA 12). Another major's is not."""
    import kernarg._nvrtc as nvrtc_module
    from kernarg._nvrtc import toolkit_include_dirs

    tmp_path = tmp_path.resolve()       # toolkit_include_dirs gives real paths
    major = nvrtc_version()[0]
    pip_include = _fake_include(tmp_path / "pip", major=major, cccl=None)
    new = _fake_include(tmp_path / "new", major=major)
    old_layout = _fake_include(tmp_path / "old", major=major, cccl="")
    other = _fake_include(tmp_path / "other", major=major - 1)
    monkeypatch.setenv("CUDA_HOME", str(other.parent))
    monkeypatch.setenv("CUDA_PATH", str(new.parent))
    assert toolkit_include_dirs()[:2] == [str(other), str(new)]
    assert cccl_include_dir(str(pip_include)) == str(new / "cccl")
    monkeypatch.setenv("CUDA_PATH", str(old_layout.parent))
    assert cccl_include_dir(str(pip_include)) == str(old_layout)
    # The pip wheel's own CCCL comes first, whatever the toolkits have.
    pip_cccl = _fake_include(tmp_path / "pip2", major=major)
    assert cccl_include_dir(str(pip_cccl)) == str(pip_cccl / "cccl")
    # Only another major's toolkits: none.
    monkeypatch.setenv("CUDA_PATH", str(other.parent))
    monkeypatch.setattr(nvrtc_module, "DEFAULT_TOOLKIT", str(tmp_path / "absent"))
    assert toolkit_include_dirs() == [str(other)]
    assert cccl_include_dir(str(pip_include)) is None


def test_a_toolkits_cccl_compiles_libcu_includes(monkeypatch):
    """The fallback end to end, where the machine has a toolkit of NVRTC's major version with
    CCCL (this development VM's /usr/local/cuda): <cuda/std/complex> compiles with the pip
    runtime headers' CCCL taken away."""
    import kernarg._nvrtc as nvrtc_module

    toolkits = [d for d in nvrtc_module.toolkit_include_dirs()
                if nvrtc_module._header_major(d) == nvrtc_version()[0]
                and nvrtc_module._cccl_under(d) is not None]
    if not toolkits:
        pytest.skip(f"no CUDA {nvrtc_version()[0]} toolkit with CCCL headers on this machine")
    monkeypatch.setattr(nvrtc_module, "_cccl_under",
                        lambda d, _f=nvrtc_module._cccl_under: _f(d) if d in toolkits else None)
    assert nvrtc_module.cccl_include_dir() == nvrtc_module._cccl_under(toolkits[0])
    src = """#include <cuda/std/complex>
extern "C" __global__ void k(char c, cuda::std::complex<double> w) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("char", "double2") and sig.offsets == (0, 16)


def test_128_bit_integers_are_laid_out_and_packed_as_nvrtc_has_them():
    # NVRTC takes GCC's __int128 with --device-int128: 16 bytes aligned to 16 (.align 16 .b8
    # [16] in the PTX). Any Python int in range packs as its two's complement, low bytes first.
    types = ["char", "__int128", "unsigned __int128", "__int128_t", "__uint128_t",
             "signed __int128", "__int128 unsigned", "char", "const __int128*"]
    params = ", ".join(f"{t} p{i}" for i, t in enumerate(types))
    src = f'extern "C" __global__ void k({params}) {{}}'
    ptx = compile_to_ptx(src, options=("--device-int128",))
    sig = kernarg.Signature(params)
    assert (sig.offsets, sig.sizes, sig.nbytes) == layout(parse_params(ptx, "k"))
    assert sig.types[1:7] == ("__int128", "unsigned __int128", "__int128",
                              "unsigned __int128", "__int128", "unsigned __int128")
    assert kernarg.Signature.from_source(src, "k", options=("--device-int128",)).types == \
        sig.types
    values = [7, -2**127, 2**128 - 1, np.int64(-5), ctypes.c_uint64(2**64 - 1), True,
              IntEnum("E", "A")["A"], -1, None]
    block = bytes(sig.pack(values))
    for i, v in enumerate(values[1:7], 1):
        number = int(v.value if isinstance(v, ctypes.c_uint64) else v)
        assert block[sig.offsets[i]:sig.offsets[i] + 16] == \
            number.to_bytes(16, "little", signed=number < 0), i
    refusals = [(1, 2**127, OverflowError, r"parameter 1 \('p1'\) is __int128: 1701\d+ is outside "
                 r"-170141183460469231731687303715884105728 \.\. 1701"),
                (2, -1, OverflowError, r"parameter 2 \('p2'\) is unsigned __int128: -1 is "
                 r"outside 0 \.\. 3402"),
                (1, 1.0, TypeError, r"parameter 1 \('p1'\) is __int128: expected an int, got "
                 "float"),
                (2, np.float32(1), TypeError, "expected an int, got float32"),
                (1, "1", TypeError, "expected an int, got str"),
                (1, b"\0" * 16, TypeError, "expected an int, got bytes"),
                (1, None, TypeError, "expected an int, got NoneType"),
                (1, object(), TypeError, "expected an int, got object")]
    for index, value, error, message in refusals:
        with pytest.raises(error, match=message):
            sig.pack(values[:index] + [value] + values[index + 1:])
    # Pointers to them take 128-bit integer arrays (a CUDA Array Interface's "<i16"), not
    # arrays of other elements.
    sig.pack(values[:8] + [CAIObject(cai(0x10000, typestr="<i16"))])
    with pytest.raises(TypeError, match=r"parameter 8 .*__int128\* but .* i8"):
        sig.pack(values[:8] + [CAIObject(cai(0x10000, typestr="<i8"))])
    # __int128 takes a sign and nothing else.
    for text in ("long __int128 x", "unsigned signed __int128 x", "__int128 int x",
                 "__int128 __int128 x", "short unsigned __int128 x"):
        with pytest.raises(ValueError, match="unknown parameter type"):
            kernarg.Signature(text)


def test_character_types_are_integers_of_their_width_and_sign():
    # A kernel reads char16_t, char32_t, wchar_t and char8_t as integers: kernarg packs ints of
    # the same width and sign (NVRTC on Linux: wchar_t is a signed 32-bit int). The compiler
    # checks each claim; the oracle fails on a wrong one.
    claims = {"char16_t": "unsigned short", "char32_t": "unsigned int", "wchar_t": "int",
              "char8_t": "unsigned char"}
    checks = []
    for text, same in claims.items():
        sig = kernarg.Signature(f"{text} c, const {text}* p")
        assert sig.types == (same, f"const {same}*")
        checks.append(f"static_assert(sizeof({text}) == sizeof({same}) && alignof({text}) == "
                      f"alignof({same}) && (({text})-1 < 0) == (({same})-1 < 0), \"{text}\");")
    source = "\n".join(checks) + '\nextern "C" __global__ void k() {}'
    compile_to_ptx(source, options=("--std=c++20",))
    with pytest.raises(NvrtcError, match="wchar_t"):
        compile_to_ptx('static_assert(((wchar_t)-1 < 0) == ((unsigned)-1 < 0), "wchar_t");')
    sig = kernarg.Signature("char16_t a, wchar_t b")
    assert bytes(sig.pack((0xFFFF, -1))) == struct.pack("<Hxxi", 0xFFFF, -1)
    with pytest.raises(OverflowError, match=r"parameter 0 \('a'\) is unsigned short: 65536"):
        sig.pack((0x10000, 0))
    with pytest.raises(TypeError, match=r"parameter 0 \('a'\) is unsigned short: expected an "
                       "int, got str"):
        sig.pack(("x", 0))


def test_a_type_word_is_not_a_parameter_name():
    # `int int` and `unsigned int signed` are no C type: the last word names the parameter
    # only when it is not a type specifier.
    for text in ("int int", "unsigned int signed", "float int", "double long long"):
        with pytest.raises(ValueError, match="unknown parameter type"):
            kernarg.Signature(text)
    assert kernarg.Signature("unsigned long x").types == ("unsigned long",)
    assert kernarg.Signature("int half").names == ("half",)


def test_std_qualified_integer_names_are_the_plain_types():
    # C++ kernels write <cstdint>'s and <cstddef>'s names qualified: std::size_t, ::size_t,
    # cuda::std::int32_t (libcu++). They are the same types; other namespaces are not.
    plain = kernarg.Signature("size_t a, unsigned char* b, const signed char* c, int d, "
                              "unsigned long long e")
    qualified = kernarg.Signature("std::size_t a, ::cuda::std::uint8_t* b, "
                                  "const std::int8_t* __restrict__ c, cuda::std::int32_t d, "
                                  "::std::uint64_t e")
    assert (qualified.types, qualified.names, qualified.offsets) == \
        (plain.types, plain.names, plain.offsets)
    assert kernarg.Signature("::ptrdiff_t p").types == kernarg.Signature("ptrdiff_t p").types
    # Device code has no long double wider than double: NVRTC makes the parameter .f64.
    long_double = kernarg.Signature("long double x, int n")
    assert long_double.types == ("double", "int")
    assert long_double.offsets == kernarg.Signature.from_source(
        'extern "C" __global__ void k(long double x, int n) {}', "k").offsets == (0, 8)
    for text in ("cuda::size_t n", "mylib::int32_t n", "std::int4 v", "std::cuda::int32_t n"):
        with pytest.raises(ValueError, match="unknown parameter type"):
            kernarg.Signature(text)
    # From source: the declared types, checked against the PTX, so the element type of a
    # std::int8_t pointer is checked and a std::uint16_t is range-checked as unsigned.
    src = ("namespace std { typedef unsigned long size_t; typedef unsigned short uint16_t; "
           "typedef signed char int8_t; }\n"
           'extern "C" __global__ void k(std::size_t n, ::size_t m, std::uint16_t h, '
           "const std::int8_t* __restrict__ p) {}")
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("unsigned long", "unsigned long", "unsigned short", "const signed char*")
    assert sig.names == ("n", "m", "h", "p")
    with pytest.raises(OverflowError, match=r"parameter 2 \('h'\) is unsigned short: -1"):
        sig.pack((1, 2, -1, None))
    with pytest.raises(TypeError, match=r"parameter 3 \('p'\) .*element type is f4"):
        sig.pack((1, 2, 3, CAIObject(cai(0x1000, typestr="<f4"))))


def test_attributes_say_nothing_about_a_parameters_type():
    # C++11 [[...]] and GNU __attribute__((...)) attributes, wherever the declaration puts
    # them: the type and the name are the rest.
    plain = kernarg.Signature("float* out, int n, const Pair* p, const float* in, double d")
    sig = kernarg.Signature("[[maybe_unused]] float* out, __attribute__((unused)) int n, "
                            "__attribute__((aligned(8))) const Pair* p, "
                            'const float* __restrict__ in [[deprecated("use in2")]], '
                            "[[gnu::unused, maybe_unused]] double d [[]]")
    assert (sig.types, sig.names, sig.offsets) == (plain.types, plain.names, plain.offsets)
    for text in ("[[maybe_unused float* out", "__attribute__((unused) int n"):
        with pytest.raises(ValueError, match=re.escape(repr(text)) + ": an attribute is not"):
            kernarg.Signature(text)
    # from_source reads them the same way: the pointer's elements are checked (it used to
    # fall back on the PTX's untyped .u64).
    src = ('extern "C" __global__ void k([[maybe_unused]] float* out, '
           "__attribute__((unused)) int n) {}")
    sig = kernarg.Signature.from_source(src, "k")
    assert (sig.types, sig.names) == (("float*", "int"), ("out", "n"))
    with pytest.raises(TypeError, match=r"parameter 0 \('out'\) is float\* but"):
        sig.pack((CAIObject(cai(0x10000, typestr="<f8")), 1))


def test_array_parameters_are_the_pointers_c_adjusts_them_to():
    # `int a[4]` declares `int* a` (C and C++ adjust an array parameter to a pointer to its
    # elements; the size says nothing). Before, a text Signature refused it and from_source
    # took the PTX's untyped .u64, so the elements were not checked.
    for text, types, names in [
        ("int a[4], const float b[], float m[][4], float* p[2]",
         ("int*", "const float*", "float*", "float**"), ("a", "b", "m", "p")),
        ("int [4], const unsigned int [], Pair q[3], const Pair [2]",
         ("int*", "const unsigned int*", "Pair*", "const Pair*"), (None, None, "q", None)),
        ("volatile float r [ 8 ], __half h[2]", ("float*", "__half*"), ("r", "h")),
    ]:
        sig = kernarg.Signature(text)
        assert (sig.types, sig.names, sig.sizes) == (types, names, (8,) * len(types))
    with pytest.raises(ValueError, match=re.escape("'int x[4] y': an array parameter")):
        kernarg.Signature("int x[4] y")
    src = ('extern "C" __global__ void k(float out[], const int idx[4], '
           "float tile[][32], int n) {}")
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("float*", "const int*", "float*", "int")
    assert sig.names == ("out", "idx", "tile", "n")
    with pytest.raises(TypeError, match=r"parameter 1 \('idx'\) is const int\* but"):
        sig.pack((None, CAIObject(cai(0x1000, typestr="<f4")), None, 1))
    with pytest.raises(ValueError, match=r"parameter 0 \('out'\) \(float\*\) is not const"):
        sig.pack((CAIObject(cai(0x1000, readonly=True)), None, None, 1))


def test_a_parameter_kernarg_cannot_type_keeps_its_declared_name():
    # Where the source's type is one kernarg cannot read (an extent that is a macro or a
    # constant), the PTX's type is taken with the name the declarator gives: before, the
    # last word was taken, so `float (*x)[N]` was a parameter named 'N'.
    src = ("#define N 4\nconstexpr int M = 2;\n"
           "template <int K> struct V { float v[K]; };\n"
           'extern "C" __global__ void k(float (*x)[N], float (&y)[M][N], V<3> v, '
           "float z[N], void (*f)(int, float), int n) {}")
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.names == ("x", "y", "v", "z", "f", "n")


def test_default_arguments_say_nothing_about_a_parameters_type_or_name():
    # C++ kernels may give parameters default arguments. Their words are not the parameter's
    # name (`float x = 1.5f` is x, not f), their commas and braces do not split the list
    # (`P p = P{1, 2.0f}`), and in them `<` is a comparison, not a template's bracket.
    src = """struct P { int a; float b; };
typedef float real;
extern "C" __global__ void k(float* out, float x = 1.5f, P p = P{1, 2.0f},
                             int n = (1 < 2), real r = real(1), char c = ',',
                             unsigned m = 1'000, int z = 3 > 2 ? 4 : 5,
                             const char* s = ",)") {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.names == ("out", "x", "p", "n", "r", "c", "m", "z", "s")
    assert sig.types == ("float*", "float", "P", "int", "float", "char",
                         "unsigned int", "int", "const char*")
    # A prototype without the defaults is the same declaration, not an overload.
    proto = 'extern "C" __global__ void k2(float x, int n);\n' \
            'extern "C" __global__ void k2(float x = 2, int n = 3 > 1) {}'
    assert kernarg.Signature.from_source(proto, "k2").names == ("x", "n")
    # Template parameter defaults are still read for the instantiation.
    tmpl = "template <typename T = float, int N = (3 > 2)> __global__ void t(T x = T(1), " \
           "int n = N) {}"
    assert kernarg.Signature.from_source(tmpl, "t<double>").types == ("double", "int")
    text = kernarg.Signature("int a = 1, float b = (2 > 1), const float* p = nullptr")
    assert (text.types, text.names) == (("int", "float", "const float*"), ("a", "b", "p"))


def test_what_string_literals_hold_is_not_read_as_code(tmp_path):
    # A typedef, struct or kernel written inside a string literal declares nothing. Before, a
    # "typedef unsigned real;" in a string, with the real typedef (int) in a header kernarg
    # cannot read, typed x as unsigned int: -1 was refused. Raw string literals run across
    # lines and hold quotes, backslashes and /*, and a #if line in one is no directive.
    (tmp_path / "t.h").write_text("typedef int real;\n")
    options = (f"-I{tmp_path}",)
    for literal in ('"typedef unsigned real;"', 'R"(typedef unsigned real;)"',
                    'R"x(\ntypedef unsigned real; )" \\ /* \n)x"',
                    'u8R"(typedef unsigned real;)"'):
        src = ('#include "t.h"\n'
               f"__device__ const char* doc = {literal};\n"
               'extern "C" __global__ void k(real x) {}\n')
        sig = kernarg.Signature.from_source(src, "k", options=options)
        assert sig.types != ("unsigned int",), literal
        assert bytes(sig.pack((-1,))) == (-1).to_bytes(4, "little", signed=True), literal
    # A raw string with a quote, a /* and a declaration inside it, over several lines: the
    # kernel's own declaration is the one read (before, the raw string's text was code, and
    # two declarations of k left the parameters unnamed).
    src = ('__device__ const char* usage = R"doc(\n'
           '  k(x, n) /* "quoted"\n'
           '  __global__ void k(double y, int z)\n'
           '#if 0\n'
           ')doc";\n'
           'typedef float real;\n'
           'extern "C" __global__ void k(real x, int n) { }\n')
    sig = kernarg.Signature.from_source(src, "k")
    assert (sig.types, sig.names) == (("float", "int"), ("x", "n"))
    # A name ending in R before a string is no raw string: FOOR"(" is FOOR, then "(".
    src = ('#define FOOR\n__device__ const char* s = FOOR"(";\n'
           'extern "C" __global__ void k(float x) {}\n')
    assert kernarg.Signature.from_source(src, "k").names == ("x",)


def test_declarations_the_preprocessor_leaves_out_are_not_read():
    # `#if 0` always leaves its branch out: an old declaration kept there is none. Before, it
    # was a second declaration of different types, and the parameters lost their names and
    # types (the PTX's .f32, .u32).
    src = """#if 0
extern "C" __global__ void k(double old, int n);
#elif defined(NEVER)
extern "C" __global__ void k(char c);
#else
#define SCALE 3
#endif
extern "C" __global__ void k(float x, int n = SCALE) {}
#if (0)
extern "C" __global__ void k(float y, int m = 4) {}
#endif
"""
    for text in (src, src.replace("\n", "\r\n")):         # CRLF line ends too
        sig = kernarg.Signature.from_source(text, "k")
        assert (sig.types, sig.names) == (("float", "int"), ("x", "n"))
        assert sig.defaults == {1: 3}   # evaluated at the live definition, not the dead one
    # Branches kernarg cannot choose between itself (#ifdef): the one whose types fit the
    # PTX's (its layout, floats where the PTX has floats) is the one compiled.
    branches = """#ifdef WIDE
extern "C" __global__ void k(double y) {}
#else
extern "C" __global__ void k(float x, int n) {}
#endif
"""
    sig = kernarg.Signature.from_source(branches, "k")
    assert (sig.types, sig.names) == (("float", "int"), ("x", "n"))
    sig = kernarg.Signature.from_source(branches, "k", options=("-DWIDE",))
    assert (sig.types, sig.names) == (("double",), ("y",))
    # Where more than one fits (int and unsigned are both a .u32), the PTX's own types.
    both = branches.replace("double y", "unsigned a, int b").replace("float x", "int x")
    sig = kernarg.Signature.from_source(both, "k", options=("-DWIDE",))
    assert sig.names == (None, None)


def test_default_arguments_that_are_literals_may_be_left_out():
    # A C++ caller may leave out trailing arguments that have defaults; so may a kernarg one,
    # where the default is a literal (kernarg evaluates no C++ expressions).
    sig = kernarg.Signature("float* out, int n = 0x10, double s = -1.5e2, bool b = true, "
                            "int* q = nullptr, unsigned m = 1'000u, char c = 'x', "
                            "long o = 017, float f = (.5f)")
    every = (None, 16, -150.0, True, None, 1000, ord("x"), 15, 0.5)
    assert sig.defaults == dict(enumerate(every[1:], 1))
    assert sig.default_texts == (None, "0x10", "-1.5e2", "true", "nullptr", "1'000u", "'x'",
                                 "017", "(.5f)")
    assert "int n = 0x10" in repr(sig)
    for count in range(1, len(every) + 1):
        assert bytes(sig.pack(every[:count])) == bytes(sig.pack(every))
    assert bytes(sig.pack((None, 3))) == bytes(sig.pack((None, 3) + every[2:]))
    with pytest.raises(TypeError, match="takes 9 arguments .*got 0: no value for parameter "
                                        "0 \\('out'\\)"):
        sig.pack(())
    # A signature string has no compiler: a default that is not a literal (a macro, an
    # expression) ends the ones that can be left out, and the refusal says which one.
    sig = kernarg.Signature("float* p, int n = N, float s = 2.5f, int t = -1")
    assert sig.defaults == {2: 2.5, 3: -1}
    assert sig.default_texts == (None, "N", "2.5f", "-1")
    assert bytes(sig.pack((None, 3))) == bytes(sig.pack((None, 3, 2.5, -1)))
    with pytest.raises(TypeError, match="parameter 1 \\('n'\\) has the default argument 'N', "
                                        "which kernarg cannot evaluate: only literals.*; "
                                        "from_source has NVRTC evaluate"):
        sig.pack((None,))
    for text in ("3 > 2 ? 4 : 5", "real(1)", "1 + 2", "'\\n'", '",)"', "0x1p3", "N"):
        assert kernarg.Signature(f"float x = {text}").defaults == {}, text


def test_an_integer_parameter_reads_an_index_as_python_does():
    # Python's index of an int subclass is its own value, whatever its __index__ says (as
    # operator.index, numpy, ctypes and untyped packing read it), and __index__ is the type's,
    # not an instance attribute's. Typed packing called value.__index__(): 99 here, 5 untyped.
    class Odd(int):
        def __index__(self):
            return 99

    class Plain:
        pass

    sig = kernarg.Signature("int n, unsigned char c")
    assert bytes(sig.pack((Odd(5), Odd(7)))) == bytes(kernarg.pack((ctypes.c_int(5),
                                                                    ctypes.c_ubyte(7))))
    assert bytes(sig.pack((Odd(5), 7)))[:4] == bytes(kernarg.pack((Odd(5),)))[:4]
    fake = Plain()
    fake.__index__ = lambda: 3
    with pytest.raises(TypeError, match=r"\('n'\) is int: expected an int, got Plain"):
        sig.pack((fake, 1))


def test_int_and_float_subclasses_pack_as_the_general_converters_read_them():
    """An int subclass (an IntEnum, an IntFlag, one with an __index__ and __float__ of its
    own) and a float subclass, for every scalar parameter type, give what the general
    converters give: an int's own value for an integer parameter, its __float__ for a float
    one, a float's own value for a float one (PyFloat_AsDouble reads a float subclass's value,
    not its __float__); the same refusals outside a parameter's range. The fast path reads
    them (session 103); before, every one took the general converters."""
    class Mode(IntEnum):
        A = 1
        BIG = 2**40

    class Flag(IntFlag):
        X = 2
        Y = 4

    class Odd(int):
        def __index__(self):
            return 99

        def __float__(self):
            return 0.5

    class Real(float):
        def __float__(self):
            return 9.0

    int_decls = ["signed char", "unsigned char", "short", "unsigned short", "int",
                 "unsigned int", "long long", "unsigned long long"]
    formats = dict(zip(int_decls, "bBhHiIqQ", strict=True))
    for decl in int_decls:
        sig = kernarg.Signature(f"{decl} v, int n")
        for value in (Mode.A, Flag.X | Flag.Y, Odd(-3), Odd(200), Mode.BIG):
            number = int.__int__(value)
            try:
                want = struct.pack(f"<{formats[decl]}", number)
            except struct.error:
                with pytest.raises(OverflowError, match=rf"parameter 0 \('v'\) is {decl}: "
                                                        rf"{number} is outside"):
                    sig.pack((value, 1))
                continue
            assert bytes(sig.pack((value, 1)))[:len(want)] == want, (decl, value)
    floats = kernarg.Signature("float f, double d, __half h, __nv_bfloat16 b")
    assert bytes(floats.pack((Real(1.25), Real(1.25), Real(1.25), Real(1.25)))) == \
        bytes(floats.pack((1.25, 1.25, 1.25, 1.25)))
    assert bytes(floats.pack((Odd(3), Odd(3), Odd(3), Mode.A))) == \
        bytes(floats.pack((0.5, 0.5, 0.5, 1.0)))
    with pytest.raises(TypeError, match=r"parameter 0 \('v'\) is int: expected an int, got "
                                        r"Real"):
        kernarg.Signature("int v").pack((Real(1.5),))


def test_a_literal_default_is_converted_to_its_parameter_as_cxx_converts_it():
    # `unsigned char c = 300` is valid C++ (a narrowing conversion, modulo 256): a call that
    # leaves c out passes 44. Before, such a default was refused on every call that left it
    # out, as the value 300 passed for c is.
    cases = {"unsigned char c = 300": 44, "unsigned char c = -1": 255, "char c = 200": -56,
             "unsigned long long u = -1": 2**64 - 1, "int n = 2.7": 2, "int n = -2.7": -2,
             "unsigned u = -0.5": 0, "bool b = 2": True, "bool b = 0": False,
             "float f = 3": 3.0, "double d = true": 1.0, "float* p = 0": None,
             "int* p = NULL": None}
    for text, value in cases.items():
        sig = kernarg.Signature(text)
        assert sig.defaults == {0: value}, text
        assert bytes(sig.pack(())) == bytes(sig.pack((value,))), text
    # No value where C++ gives none: a float outside an integer type's range (undefined), a
    # non-zero int for a pointer (ill-formed), nullptr for a number.
    for text in ("short s = 40000.5", "int n = 1e300", "unsigned u = -1.5", "float* p = 5",
                 "int n = nullptr", "float f = nullptr"):
        assert kernarg.Signature(text).defaults == {}, text
    with pytest.raises(TypeError, match="has the default argument '5', a literal C\\+\\+ "
                                        "does not convert to the parameter's type"):
        kernarg.Signature("float* p = 5").pack(())


def test_from_source_has_the_compiler_evaluate_defaults_that_are_not_literals():
    # A macro, a constexpr name, an expression: NVRTC evaluates each as a constant of the
    # parameter's declared type, in the kernel's scope, so the value is the one C++ passes.
    src = """#define N 1024
namespace ns {
constexpr float A = 0.25f;
enum class Mode : short { Off, On };
struct Pair { int a; double b; };
extern "C" __global__ void k(float* p, int n = N, float a = 2 * A, double third = A / 3,
                             bool big = N > 1000, Mode m = Mode::On, Pair q = Pair{3, 2.5},
                             float4 v = float4{1, 2, 3, 4}, const float* r = nullptr) {}
}
"""
    sig = kernarg.Signature.from_source(src, "k")
    third = float(np.float32(0.25) / np.float32(3))        # A / 3 in float, then widened
    pair = np.zeros((), np.dtype([("a", "<i4"), ("b", "<f8")], align=True))
    pair["a"], pair["b"] = 3, 2.5
    assert sig.defaults == {1: 1024, 2: 0.5, 3: third, 4: True, 5: 1, 6: pair.tobytes(),
                            7: (1.0, 2.0, 3.0, 4.0), 8: None}
    assert sig.default_texts[1:3] == ("N", "2 * A")
    full = (None, 1024, 0.5, third, True, 1, (3, 2.5), (1.0, 2.0, 3.0, 4.0), None)
    assert bytes(sig.pack((None,))) == bytes(sig.pack(full))
    # Half and bfloat16 constants (from their raw bits: their float constructors are not
    # constexpr), integer vectors, __int128.
    src = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void k(int* p, __half h = __half_raw{0x3C00},
                             __nv_bfloat16 b = __nv_bfloat16_raw{0x3FC0},
                             short2 s = short2{-1, 2}, __int128 w = (__int128)1 << 100) {}
"""
    sig = kernarg.Signature.from_source(src, "k", options=["--device-int128"])
    assert sig.defaults == {1: 1.0, 2: 1.5, 3: (-1, 2), 4: 1 << 100}
    assert bytes(sig.pack((None,))) == bytes(sig.pack((None, 1.0, 1.5, (-1, 2), 1 << 100)))


def test_compiled_defaults_are_evaluated_where_the_kernel_is_declared():
    # C++ binds a default's names at the declaration: the kernel's namespace's K, and the
    # global N, not the N its namespace declares after the kernel (evaluated at the end of
    # the source, K is unknown; at the end of the namespace, N is 2).
    src = """constexpr int N = 1;
namespace a {
constexpr int K = 3;
extern "C" __global__ void k(int* p, int n = N + K) { /* { } */ }
constexpr int N = 2;
}
"""
    assert kernarg.Signature.from_source(src, "k").defaults == {1: 4}
    # A brace in a string in the body does not end it (evaluated past the namespace's end,
    # N would be 1).
    src = """constexpr int N = 1;
namespace a {
constexpr int N = 2;
extern "C" __global__ void k(int* p, int n = N) { if (n < 0) printf("{"); }
}
"""
    assert kernarg.Signature.from_source(src, "k").defaults == {1: 2}
    # A prototype gives the default, the definition comes later; comments that look like
    # declarations are not declarations.
    src = """// __global__ void k(int* p, int n = M) {}
#define M 7
/* extern "C" __global__ void k(int* p, int n = 9); */
extern "C" __global__ void k(int* p, int n = M + 1);
extern "C" __global__ void k(int* p, int n) {}
"""
    assert kernarg.Signature.from_source(src, "k").defaults == {1: 8}
    # The compile's options and in-memory headers are the source's: -D, a header's constant,
    # a kernel declared in a header (evaluated in global scope).
    src = 'extern "C" __global__ void k(int* p, int n = N) {}'
    assert kernarg.Signature.from_source(src, "k", options=["-DN=5"]).defaults == {1: 5}
    sig = kernarg.Signature.from_source('#include "k.h"\n', "k", headers={
        "k.h": '#define W 3\nextern "C" __global__ void k(int* p, int n = W * W) {}'})
    assert sig.defaults == {1: 9}
    # A template's default, with its arguments substituted: each instantiation its own.
    src = "template <typename T> __global__ void t(T* p, int n = sizeof(T) * 4) {}"
    assert kernarg.Signature.from_source(src, "t<double>").defaults == {1: 32}
    assert kernarg.Signature.from_source(src, "t<char>").defaults == {1: 4}


def test_a_qualified_name_reads_the_declaration_in_its_namespace():
    # Kernels of one name in two namespaces: a::k's declaration is read for 'a::k', b::k's
    # for 'b::k'. Before, both took the first one's: b::k's default was a::k's 1 (the same
    # types), or both took the PTX's layout without names (other types).
    src = ("namespace a { __global__ void k(int n = 1) {} }\n"
           "namespace b { __global__ void k(int n = 2) {} }")
    assert kernarg.Signature.from_source(src, "a::k").defaults == {0: 1}
    assert kernarg.Signature.from_source(src, "b::k").defaults == {0: 2}
    assert kernarg.Signature.from_source(src, "::b::k").defaults == {0: 2}
    src = ("namespace a { __global__ void k(int n = 1) {} }\n"
           "namespace b { namespace c { __global__ void k(float x, int n = 2) {} } }")
    sig = kernarg.Signature.from_source(src, "b::c::k")
    assert (sig.types, sig.names, sig.defaults) == (("float", "int"), ("x", "n"), {1: 2})
    # Each default evaluated in its own kernel's namespace.
    src = ("constexpr int N = 5;\n"
           "namespace a { constexpr int N = 1; __global__ void k(int n = N) {} }\n"
           "namespace b { __global__ void k(int n = N) {} }")
    assert kernarg.Signature.from_source(src, "a::k").defaults == {0: 1}
    assert kernarg.Signature.from_source(src, "b::k").defaults == {0: 5}
    # A brace inside a string or character literal opens and closes nothing.
    src = ('namespace a { __device__ const char* s = "{"; __device__ char c = \'{\';\n'
           "__global__ void k(int n = 1) {} }\n"
           "namespace b { __global__ void k(int n = 2) {} }")
    assert kernarg.Signature.from_source(src, "b::k").defaults == {0: 2}
    assert kernarg.Signature.from_source(src, "a::k").defaults == {0: 1}
    # An inline namespace is still the name's (no declaration matches exactly: all are read).
    src = "namespace o { inline namespace v1 { __global__ void k(int n = 3 + 1) {} } }"
    assert kernarg.Signature.from_source(src, "o::k").defaults == {0: 4}


def test_a_default_the_compiler_cannot_evaluate_must_be_passed():
    # Not a constant expression: the compiler refuses it as an initialiser, so the call must
    # pass it; the later defaults are still evaluated.
    src = """__device__ int f();
extern "C" __global__ void k(float* p, int n = f(), int m = 7 + 1, float s = 1.0f / 4) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.defaults == {2: 8, 3: 0.25}
    assert bytes(sig.pack((None, 3))) == bytes(sig.pack((None, 3, 8, 0.25)))
    with pytest.raises(TypeError, match="parameter 1 \\('n'\\) has the default argument "
                                        "'f\\(\\)', which NVRTC could not evaluate as a constant"):
        sig.pack((None,))


def test_a_conditional_inside_the_parameter_list_leaves_the_layout_to_the_ptx():
    # Which parameters the compiler saw depends on macros kernarg does not evaluate: the
    # PTX's layout, names unknown. Before, the directive's words made a parameter name, and
    # a parameter left out by the macro was "the declaration has 4 parameters but the PTX 3".
    body = ('extern "C" __global__ void k(float* out, int n\n'
            "#if WITH_SCALE\n"
            "    , float scale\n"
            "#endif\n"
            "    , double d) {}")
    for flag, types in (("0", (".u64", ".u32", ".f64")),
                        ("1", (".u64", ".u32", ".f32", ".f64"))):
        sig = kernarg.Signature.from_source(f"#define WITH_SCALE {flag}\n" + body, "k")
        assert sig.types == types
        assert sig.names == (None,) * len(types)


def test_from_source_reads_declarations_without_their_comments():
    # A comment in a parameter list added its words and `*`s to the declaration: `float*
    # /*out*/ o` was typed float***, and `int n /* count */` named count. A commented-out
    # declaration counted as an overload, and a prototype without names hid the definition's.
    src = ('// extern "C" __global__ void k(int x) {}  an older version\n'
           '/* extern "C" __global__ void k(char c); */\n'
           'extern "C" __global__ void k(float*, int, const char*);\n'
           'extern "C" __global__ void k(float* /*out*/ o, // the output, 1\'000 long\n'
           '                             int n /* count */, const char* s) {\n'
           '    if (s[0] == \'/\' && s[1] == \'*\') o[n] = 1\'000.f;  // "*/ /*"\n'
           '}\n')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("float*", "int", "const char*") and sig.names == ("o", "n", "s")
    with pytest.raises(TypeError, match=r"parameter 0 \('o'\) is float\* but .* i4"):
        sig.pack((CAIObject(cai(0x1000, typestr="<i4")), 1, None))
    # The definition's names, wherever the prototype is.
    later = ('extern "C" __global__ void k(float* o, int n) {}\n'
             'extern "C" __global__ void k(float* p, int);\n')
    assert kernarg.Signature.from_source(later, "k").names == ("o", "n")


def test_from_source_reads_typedefs_and_using_aliases_of_known_types():
    # `real*` was a pointer to a type kernarg had no name for: its elements went unchecked.
    src = ("#ifndef REAL_H\n#define REAL_H\n"       # an include guard is no condition
           "typedef float real;\n"
           "namespace lib { using index_t = unsigned long long; }\n"
           "#endif\n"
           "struct Box { typedef double real; };\n"   # a member, not visible to k
           "using lib::index_t;\n"
           'extern "C" __global__ void k(real* out, const real* __restrict__ in, real a, '
           "lib::index_t n, index_t m, int real_count) {}\n")
    sig = kernarg.Signature.from_source(src, "k")
    # (lib::index_t, qualified, was the PTX's .u64 before session 61.)
    assert sig.types == ("float*", "const float*", "float", "unsigned long long",
                         "unsigned long long", "int")
    assert sig.names == ("out", "in", "a", "n", "m", "real_count")
    with pytest.raises(TypeError, match=r"parameter 1 \('in'\) is const float\* but .* f8"):
        sig.pack((None, CAIObject(cai(0x1000, typestr="<f8")), 1.0, 1, 1, 1))
    # A name the text declares for two types (the branches of an #ifdef, two scopes), or
    # only inside a conditional, is left as written: which one the compiler took is unknown.
    two = ("#ifdef USE_DOUBLE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
           "#if PRECISE\ntypedef double acc;\n#endif\n#ifndef acc\n#define acc float\n#endif\n"
           'extern "C" __global__ void k(real* out, real a, acc* b) {}')
    assert kernarg.Signature.from_source(two, "k").types == ("real*", ".f32", "acc*")
    # A parameter may be named as a typedef is; an alias the PTX disagrees with (here one a
    # macro hides) gives way to the PTX's type.
    shadow = ('namespace other { typedef float real; }\n'
              "#define DECLARE(T, N) typedef T N;\nDECLARE(double, real)\n"
              "typedef int n;\n"
              'extern "C" __global__ void k(real x, n* p, int n) {}')
    sig = kernarg.Signature.from_source(shadow, "k")
    assert sig.types == (".f64", "int*", "int") and sig.names == ("x", "p", "n")


def test_qualified_and_member_aliases_are_read_in_their_scopes():
    # `lib::real`, a struct's member types (`K::Index`, CUTLASS's `using Element = ...`), an
    # alias of an alias, and a name two namespaces declare differently, looked up from the
    # kernel's namespace first. Before, each of these was the PTX's type (.u32: either sign)
    # and K::Params, whose fields name K's aliases, was opaque bytes.
    src = """
namespace a { typedef float real; }
namespace b { typedef double real; }
struct K {
    using Index = unsigned;
    typedef float Value;
    using Alias = Value;                    // an alias of a member alias
    struct Params { Alias* out; Index n; K::Value scale; };
};
struct Box { typedef double real; };        // a member: not what `real` names in c
namespace c { using real = a::real; }
namespace b {
__global__ void k(real x, a::real y, K::Index n, K::Alias v, K::Params p, c::real z,
                  Box::real w) {}
}
"""
    sig = kernarg.Signature.from_source(src, "b::k")
    assert sig.types == ("double", "float", "unsigned int", "float", "K::Params", "float",
                         "double")
    assert sig.records[4].names == ("out", "n", "scale")
    with pytest.raises(OverflowError, match=r"parameter 2 \('n'\) is unsigned int: -1 is "):
        sig.pack((1.0, 1.0, -1, 1.0, {}, 1.0, 1.0))
    with pytest.raises(TypeError, match=r"'p'\), field out \(float\*\): .* f8"):
        sig.pack((1.0, 1.0, 1, 1.0, {"out": CAIObject(cai(0x1000, typestr="<f8"))}, 1.0, 1.0))
    # From the global namespace `real` (a::real by a using-directive) is either to kernarg,
    # which does not read using-directives: left as written, the PTX's type it is.
    glob = src.replace("namespace b {\n__global__", "using namespace a;\n__global__")
    assert kernarg.Signature.from_source(glob.rstrip()[:-1], "k").types[:2] == (".f32", "float")


def test_scopes_after_preprocessor_directives_are_read():
    # `#include <x>` then `namespace lib {`: the directive lines were read as part of what
    # opens the brace, so nothing in it was read (session 61, before it reached CI), even
    # `real` for a kernel in lib, which was read before.
    src = """#include <cuda_fp16.h>
#define DECL(x) \\
   x
namespace lib { typedef float real;
#pragma once
__global__ void inner(real x) {} }
#define X 1
struct K { using Index = unsigned; };
#pragma once
enum class E : short { A };
extern "C" __global__ void k(lib::real a, K::Index i, E e) {}
"""
    assert kernarg.Signature.from_source(src, "k").types == ("float", "unsigned int", "short")
    assert kernarg.Signature.from_source(src, "lib::inner").types == ("float",)


def test_a_template_instantiations_member_is_not_a_global_alias_and_nested_inline_scopes():
    # `Gemm<float>::Element` (a struct template's member alias, which kernarg does not read)
    # was read as `Gemm<float>` followed by the global alias `Element`: "Gemm<float>double".
    # And C++20's `namespace a::inline b` named a scope "inline b".
    from kernarg._signature import _source_aliases, _substitute_aliases

    aliases = _source_aliases("typedef double Element;\n"
                              "template <class T> struct Gemm { using Element = T; };\n"
                              "namespace a::inline b { typedef float real; }")
    assert _substitute_aliases("typename Gemm<float>::Element x, ::Element y", aliases) == \
        "typename Gemm<float>::Element x, double y"
    assert aliases["a::b::real"] == aliases["b::real"] == "float"
    src = ("typedef double Element;\n"
           "template <class T> struct Gemm { using Element = T; };\n"
           "template <class G> __global__ void k(typename G::Element x) {}\n")
    sig = kernarg.Signature.from_source(src, "k<Gemm<float>>")
    assert sig.types == (".f32",) and sig.names == ("x",)


def test_aliases_of_pointer_types_are_those_pointers():
    # `typedef float* fptr;`: before, a .u64 of the PTX (an int or any array, its elements
    # unchecked). A const that qualifies the alias is the pointer's own (`const fptr` is
    # `float* const`: its elements may be written), the one inside it the pointee's.
    src = """
typedef float* fptr; typedef const float *cfptr; using real = double;
typedef const real* crp; typedef fptr* fpp; typedef float* const fpc; using vp = void*;
namespace ns { typedef int* iptr; }
struct P { fptr a; cfptr b; ns::iptr c; };
extern "C" __global__ void k(fptr a, cfptr b, const fptr c, crp d, fpp e, fpc f, ns::iptr h,
                             vp v, P p) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("float*", "const float*", "float*", "const double*", "float**",
                         "float*", "int*", "void*", "P")
    args = [None] * 8 + [{}]
    readonly = CAIObject(cai(0x1000, typestr="<f4", readonly=True))
    sig.pack(tuple(args[:1] + [readonly] + args[2:]))
    with pytest.raises(ValueError, match=r"parameter 2 \('c'\) \(float\*\) is not const but "
                                         r"the CAIObject array is read-only"):
        sig.pack(tuple(args[:2] + [readonly] + args[3:]))
    with pytest.raises(TypeError, match=r"parameter 3 \('d'\) is const double\* but .* f4"):
        sig.pack(tuple(args[:3] + [readonly] + args[4:]))
    with pytest.raises(TypeError, match=r"'p'\), field c \(int\*\): .* f4"):
        sig.pack(tuple(args[:8] + [{"c": CAIObject(cai(0x1000, typestr="<f4"))}]))


def test_aliases_of_pointers_to_structs_are_pointers():
    # Session 64: `typedef Q* QPtr;` (a struct's name, no type kernarg names) was no alias
    # kernarg read: the parameter took the PTX's .u64 (an int or a pointer), and a struct
    # holding one was opaque bytes. Now it is a pointer to Q, its const kept.
    src = """
struct Q { int x; };
typedef Q* QPtr;
using CQPtr = const struct Q*;
struct P { QPtr q; CQPtr c; int n; };
extern "C" __global__ void k(QPtr q, CQPtr c, QPtr* pp, P p) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("Q*", "const Q*", "Q**", "P")
    assert [sig.records[3].fields[f][1] for f in sig.records[3].names] == [0, 8, 16]
    readonly = CAIObject(cai(0x1000, typestr="<i4", readonly=True))
    assert bytes(sig.pack((None, readonly, None, {})))[8:16] == (0x1000).to_bytes(8, "little")
    with pytest.raises(ValueError, match=r"parameter 0 \('q'\) \(Q\*\) is not const"):
        sig.pack((readonly, None, None, {}))
    with pytest.raises(ValueError, match=r"field q \(Q\*\) is not const"):
        sig.pack((None, None, None, {"q": readonly}))
    sig.pack((None, None, None, {"c": readonly}))


def test_alias_templates_are_their_types_with_the_arguments_substituted():
    # `template <class T> using ptr = T*;`: before, `ptr<float>` was the PTX's .u64 and
    # `Vec<short, 2>` (an alias of a struct template's instantiation) opaque bytes.
    src = """
typedef float real;
template <class T> using ptr = T*;
template <class T> using cptr = const T*;
template <class T, int N = 3> struct Box { T v[N]; };
template <class T, int N> using Vec = Box<T, N>;
template <class T> using Same = T;
namespace ns { template <typename T> using P = T*; }
struct K { template <class T> using Ptr = T*; };
extern "C" __global__ void k(ptr<float> a, cptr<real> b, const ptr<int> c, Vec<short, 2> v,
                             Same<double> d, ns::P<char> e, ptr<ptr<float>> f, K::Ptr<int> g) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("float*", "const float*", "int*", "Box<short, 2>", "double", "char*",
                         "float**", "int*")
    assert sig.names == ("a", "b", "c", "v", "d", "e", "f", "g")
    assert sig.records[3].fields["v"][0].shape == (2,)
    # Nested past 32 uses, or 10,000 deep: read in linear time, left as written.
    from kernarg._signature import _source_aliases, _substitute_aliases
    aliases = _source_aliases("template <class T> using ptr = T*;")
    deep = "ptr<" * 10000 + "float" + ">" * 10000 + " x"
    assert _substitute_aliases(deep, aliases).startswith("ptr<")
    assert _substitute_aliases("ptr<" * 10000 + "float x", aliases).startswith("ptr<")
    # A use that holds its arguments twice doubles at each depth: D<D<...>> 20 deep was 10 MB
    # read as a million uses (10 s), in session 61 before it was committed. Within a budget
    # of characters for each parameter, it is left as written; 10 deep is read.
    two = _source_aliases("template <class T> using D = Two<T, T>;")
    assert _substitute_aliases("D<" * 20 + "int" + ">" * 20 + " x", two).startswith("D<")
    assert _substitute_aliases("D<" * 10 + "int" + ">" * 10 + " x", two).count("int") == 1024


def test_enumerations_are_their_underlying_types():
    # A parameter or field of an enumeration is its underlying type: a fixed one (`: unsigned
    # char`), int for `enum class`, and for an unscoped one NVRTC's choice from its
    # enumerators (int where all fit, else unsigned int, long, ...). Before, a parameter was
    # the PTX's .u8/.u32 (either sign), and a struct with such a field opaque bytes.
    src = """
enum class Act : unsigned char { None, Relu };
enum Mode { A, B = 7 };
enum Wide { W = 0x80000000u };
typedef enum { RED, GREEN } Color;                       // C's typedef of an unnamed one
enum class Later : short;                                // declared, defined below
struct P {
    enum Kind : short { X, Y } kind;                     // defined in a member's declaration
    enum class Inner { I };                              // a member type, no data
    float* x; Act act; Mode m; Color c; enum Mode m2; Inner i;
};
enum class Later : short { L };
enum Flags { F = 1 << 3, G = F | 1u << 31 };            // evaluated as C++ (session 63)
extern "C" __global__ void k(Act a, Mode m, Wide w, Color c, P p, Later l, P::Kind pk,
                             Flags f) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("unsigned char", "int", "unsigned int", "int", "P", "short", "short",
                         "unsigned int")
    assert sig.records[4].names == ("kind", "x", "act", "m", "c", "m2", "i")
    assert [sig.records[4].fields[f][1] for f in sig.records[4].names] == \
        [0, 8, 16, 20, 24, 28, 32]
    with pytest.raises(OverflowError, match=r"parameter 0 \('a'\) is unsigned char: -1 is "):
        sig.pack((-1, 0, 0, 0, {}, 0, 0, 0))
    block = bytes(sig.pack((1, -2, 0x80000000, 1, {"act": 1, "m": 7, "kind": -1}, 3, 4, 8)))
    p = sig.offsets[4]
    assert block[p:p + 2] == struct.pack("<h", -1) and block[p + 16] == 1
    assert struct.unpack_from("<i", block, p + 20) == (7,)


@pytest.mark.parametrize("text, value", [
    ("1 << 3", (8, (32, False))), ("1 << 31", (-2**31, (32, False))),       # C++14's rule
    ("1u << 31", (2**31, (32, True))), ("~0u", (2**32 - 1, (32, True))),
    ("-1u", (2**32 - 1, (32, True))), ("(1 << 4) - 1", (15, (32, False))),
    ("-7 / 2", (-3, (32, False))), ("-7 % 3", (-1, (32, False))),        # toward zero
    ("-8 >> 1", (-4, (32, False))), ("1ll << 40", (2**40, (64, False))),
    ("0x80000000", (2**31, (32, True))), ("2147483648", (2**31, (64, False))),
    ("A | 0x10", (17, (32, False))), ("'a' + !0", (98, (32, False))),
    ("1 + 2 * 3 << 1 | 1", (15, (32, False))), ("4294967295u + 1", (0, (32, True))),
    ("-1 + 0u", (2**32 - 1, (32, True))), ("-1 + 0ul", (2**64 - 1, (64, True))),
    ("-1l + 0u", (-1, (64, False))),                    # a long holds every unsigned int
    # Refused: what the compiler refuses as no constant, or takes otherwise in another C++
    # standard, and what is no integer constant expression kernarg reads.
    ("2147483647 + 1", None), ("1 << 32", None), ("-1 << 1", None), ("1 / 0", None),
    ("(int)3", None), ("sizeof(int)", None), ("B", None), ("1 +", None), ("(1", None),
    ("1.5", None), ("1 < 2", None), ("99999999999999999999999", None),
])
def test_enumerators_are_evaluated_as_cpp_evaluates_them(text, value):
    # An enumerator's value, and its type before the enumeration's closing brace (the one
    # an expression naming it takes), as C++ on LP64 gives them (session 63: before, only
    # literals were read, and an enumeration with `1 << 3` was the PTX's .u32). The
    # differential test checks the enumerations' types against NVRTC's.
    from kernarg._signature import _constant_value

    assert _constant_value(text, {"A": (1, (32, False))}) == value


def test_an_enumerator_after_its_types_end_is_not_named_in_expressions():
    # After ~0u (an unsigned int's 4294967295), C++ leaves the next enumerator's type
    # unspecified (NVRTC's is unsigned long): an expression naming it is not evaluated, and
    # the enumeration is the PTX's type. Without such a use, its value is still read.
    src = """
enum E { A = ~0u, B, C = 0x7fffffff - B };
enum F { X = ~0u, Y };
extern "C" __global__ void k(E e, F f) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == (".u64", "long")


def test_typedefs_and_structs_in_extern_c_blocks_are_read():
    # A C header's `extern "C" { ... }`: its typedefs and structs are at namespace scope. The
    # readers see the source with its literals blanked (`extern " " {`), so before, such a
    # block was read as a function's body: `real` was the PTX's .f32 and P opaque bytes.
    src = """
extern "C" {
typedef float real;
struct P { int a; float b; };
__global__ void k(real x, P p) {}
}
extern "C++" { typedef double wide; struct Q { double d; };
               template <class T> __global__ void t(wide x, Q q, T v) {} }
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("float", "P") and sig.records[1].names == ("a", "b")
    assert bytes(sig.pack((1.5, {"b": 2.5}))) == struct.pack("<fif", 1.5, 0, 2.5)
    sig = kernarg.Signature.from_source(src, "t<int>")
    assert sig.types == ("double", "Q", "int") and sig.names == ("x", "q", "v")


@pytest.mark.parametrize("prototype, definition", [
    ("Q", "const Q q"),             # top-level const is no part of the function's type
    ("struct Q", "Q q"),            # an elaborated type specifier
    ("Box<int,2>", "Box<int, 2> q"),
    ("const ns::R", "ns :: R q"),
])
def test_a_prototype_that_leaves_a_struct_parameter_unnamed_is_the_same_declaration(
        prototype, definition):
    # A header's `__global__ void k(Params);` and the definition's `k(const Params p)` declare
    # one kernel. They were read as two of different types, which the PTX could not tell
    # apart, so the struct was opaque bytes and every name unknown.
    src = ("struct Q { int a; }; namespace ns { struct R { short b; }; }\n"
           "template <class T, int N> struct Box { T a[N]; };\n"
           f'extern "C" __global__ void k({prototype}, float);\n'
           f'extern "C" __global__ void k({definition}, float f) {{}}\n')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.names == ("q", "f") and sig.records[0] is not None


def test_an_explicit_instantiation_with_a_struct_parameter_keeps_the_templates_names():
    # `template __global__ void t<int>(Q, int);` lists the parameter types unnamed: before,
    # it and the template (`Q q`) differed, and the PTX's types were taken.
    src = ("struct Q { double d; };\n"
           "template <class T> __global__ void t(Q q, T v) {}\n"
           "template __global__ void t<int>(Q, int);\n")
    sig = kernarg.Signature.from_source(src, "t<int>")
    assert sig.types == ("Q", "int") and sig.names == ("q", "v")
    # A struct template's member type, `Op<float>::Params` unnamed: its `::Params` was taken
    # for the parameter's name.
    member = ("template <class T> struct Op { struct Params { T* x; int n; }; };\n"
              "template <class O> __global__ void k(typename O::Params p) {}\n"
              "template __global__ void k<Op<float>>(Op<float>::Params);\n")
    sig = kernarg.Signature.from_source(member, "k<Op<float>>")
    assert sig.types == ("Op<float>::Params",) and sig.names == ("p",)


@pytest.mark.parametrize("text, expected", [
    ("a // b\nc", "a  \nc"),
    ("a /* b\n */ c", "a   c"),
    ('x = "// not /* a */ comment"; // one', 'x = "// not /* a */ comment";  '),
    ('s = "\\\\" // a', 's = "\\\\"  '),        # an escaped backslash, then the end
    ('s = "\\" // a";', 's = "\\" // a";'),     # an escaped quote: all one string
    ("c = '/'; d = '\\''; /* x */", "c = '/'; d = '\\'';  "),
    ("n = 1'000'000; // c", "n = 1'000'000;  "),     # C++14 digit separators
    ("u8'/' L'/' /* q */", "u8'/' L'/'  "),        # prefixed character literals
    ("a // b \\\n still the comment\nc", "a  \nc"),   # a line comment continued
    ("a /* never closed", "a  "),
    ("no comments at all", "no comments at all"),
])
def test_comments_are_removed_as_the_preprocessor_removes_them(text, expected):
    from kernarg._signature import _without_comments
    assert _without_comments(text) == expected


def test_from_source_compile_error_has_log():
    with pytest.raises(kernarg.NvrtcError, match="error"):
        kernarg.Signature.from_source("__global__ void k(int x) { syntax error }", "k")


TEMPLATE_SOURCE = r"""
#include <cuda_fp16.h>
struct Pair { float a; int b; };
template <typename T, int N = 4, typename U = int>
__global__ void __launch_bounds__(128) axpy(T* __restrict__ out, const T* x, T a, U n) {}
namespace ns {
__global__ void plain(int* p, double d) {}
template <class V> __global__ void by_value(V v, const V* p) {}
}
"""


@pytest.mark.parametrize("name, types", [
    ("axpy<float>", ("float*", "const float*", "float", "int")),
    ("axpy<double, 8, unsigned short>", ("double*", "const double*", "double",
                                         "unsigned short")),
    ("axpy<__half>", ("__half*", "const __half*", "__half", "int")),
    ("ns::plain", ("int*", "double")),
    ("ns::by_value<float2>", ("float2", "const float2*")),
])
def test_from_source_template_instantiations_and_qualified_names(name, types):
    # NVRTC instantiates the name expression; the template's arguments (or its defaults) are
    # substituted into the declaration, and the layout is checked against the PTX.
    sig = kernarg.Signature.from_source(TEMPLATE_SOURCE, name)
    assert sig.types == types
    from kernarg._signature import compile_kernel

    ptx, entry, _ = compile_kernel(TEMPLATE_SOURCE, name)
    assert entry.startswith("_Z") and f".entry {entry}(" in ptx
    assert (sig.offsets, sig.sizes) == layout(parse_params(ptx, entry))[:2]


def test_template_instantiation_packs_typed():
    sig = kernarg.Signature.from_source(TEMPLATE_SOURCE, "axpy<double, 8, unsigned short>")
    assert sig.names == ("out", "x", "a", "n")
    raw = bytes(sig.pack((0x1000, None, 2, 65535)))
    assert raw == struct.pack("<QQdH", 0x1000, 0, 2.0, 65535)
    with pytest.raises(TypeError, match="parameter 1 \\('x'\\)"):   # float32 data for double*
        sig.pack((None, CAIObject(cai(ptr=0x2000, typestr="<f4")), 1.0, 1))
    with pytest.raises(OverflowError, match="'n'"):
        sig.pack((None, None, 1.0, 65536))


def test_template_struct_argument_is_the_struct_of_the_source():
    sig = kernarg.Signature.from_source(TEMPLATE_SOURCE, "ns::by_value<Pair>")
    assert sig.sizes == (8, 8) and sig.alignments == (4, 8)
    # The template's argument is the source's struct Pair, read field by field; the pointer
    # to it as declared (with T substituted), const-ness and all.
    assert sig.types == ("Pair", "const Pair*")
    assert repr(sig) == "kernarg.Signature('Pair v, const Pair* p')"
    assert bytes(sig.pack(({"b": 7}, None))) == struct.pack("<fiQ", 0, 7, 0)
    # A struct template's instantiation is read with its arguments (before session 59: the
    # PTX's layout, opaque bytes).
    boxed = kernarg.Signature.from_source(
        "template <class T, int N> struct Box { T v[N]; };\n" + TEMPLATE_SOURCE,
        "ns::by_value<Box<short, 3> >")
    assert boxed.types == ("Box<short, 3>", "const Box<short, 3>*")
    assert bytes(boxed.pack(({"v": (1, 2, 3)}, None)))[:6] == struct.pack("<3h", 1, 2, 3)


VARIADIC_SOURCE = r"""
struct Pair { float a; int b; };
template <typename... T> __global__ void each(T... xs) {}
template <typename... T> __global__ void counted(int n, const T*... ptrs) {}
template <class T, class ...R> __global__ void first_rest(T first, R ...rest) {}
template <typename T, int... N> __global__ void values(T x) {}
template <typename... T> __global__ void sized(int n = sizeof...(T), T... xs) {}
"""


@pytest.mark.parametrize("name, types, names", [
    ("each<int, float>", ("int", "float"), (None, None)),
    ("each<Pair, double>", ("Pair", "double"), (None, None)),
    ("each<>", (), ()),
    ("counted<float, double>", ("int", "const float*", "const double*"), ("n", None, None)),
    ("counted<>", ("int",), ("n",)),
    ("first_rest<float, int, char>", ("float", "int", "char"), ("first", None, None)),
    ("values<float, 1, 2>", ("float",), ("x",)),
    # sizeof...(T) in a default: not expanded by kernarg, so the PTX's own types.
    ("sized<float>", (".u32", ".f32"), (None, None)),
])
def test_variadic_template_kernels_expand_their_parameter_packs(name, types, names):
    # A function parameter pack (T... xs) is one parameter per template argument, of the
    # pattern's type, unnamed. Before, `each<int, float>` was a ValueError ("2 template
    # arguments for a template of 1 parameters") for a kernel NVRTC had compiled.
    sig = kernarg.Signature.from_source(VARIADIC_SOURCE, name)
    assert (sig.types, sig.names) == (types, names)
    from kernarg._signature import compile_kernel

    ptx, entry, _ = compile_kernel(VARIADIC_SOURCE, name)
    assert (sig.offsets, sig.sizes) == layout(parse_params(ptx, entry))[:2]
    if name == "counted<float, double>":
        with pytest.raises(TypeError, match="parameter 2 is const double\\* but"):
            sig.pack((1, None, CAIObject(cai(0x1000, typestr="<f4"))))


SPECIALIZED_SOURCE = r"""
template <typename T, int N = 2> __global__ void k(T x, int n = 4 * N) {}
template <> __global__ void k<double>(double y, int count) {}
template <> __global__ void k< double , 3 >(double z, int c3) {}
template <> __global__ void k(char c, int m) {}
template __global__ void k<float>(float, int);
template __global__ void k<short, 5>(short, int);
"""


@pytest.mark.parametrize("name, names, default", [
    ("k<float>", ("x", "n"), 8),            # the template's, not its explicit instantiation's
    ("k<double>", ("y", "count"), 8),       # the specialization's names, the template's default
    ("k<double, 2>", ("y", "count"), 8),    # the same kernel: N's default filled in
    ("k<double,3>", ("z", "c3"), 12),
    ("k<char>", ("c", "m"), 8),             # template <> ... k(char c, int m): deduced
    ("k<short, 5>", ("x", "n"), 20),
    ("k<int>", ("x", "n"), 8),
])
def test_explicit_specializations_are_the_kernels_they_specialize(name, names, default):
    # An explicit specialization is the code the compiler compiles for its arguments: its
    # parameter names are the kernel's, and the template's default arguments still apply (C++
    # lets no specialization give its own). Before, `k<double>(` was not read as a declaration
    # (the template's names were taken), and `template <>` without arguments was a LookupError
    # that cost every instantiation its names, types and defaults (the PTX's '.u32, .u32').
    sig = kernarg.Signature.from_source(SPECIALIZED_SOURCE, name)
    assert sig.names == names
    assert sig.defaults == {1: default}
    from kernarg._signature import compile_kernel

    ptx, entry, _ = compile_kernel(SPECIALIZED_SOURCE, name)
    assert (sig.offsets, sig.sizes) == layout(parse_params(ptx, entry))[:2]


def test_a_kernel_defined_outside_its_namespace_is_read_in_it():
    # `__global__ void ns::plain(int b) {}` defines the ns::plain declared in ns: its names are
    # the kernel's. Before, the definition was read as one in the global namespace: ns::plain
    # took the prototype's name, and an explicit specialization written so (ns::k<double>) the
    # template's names.
    src = """
namespace ns { template <typename T> __global__ void k(T x, int n = 2) {}
__global__ void plain(int a); }
template <> __global__ void ns::k<double>(double y, int count) {}
__global__ void ns::plain(int b) {}
"""
    assert kernarg.Signature.from_source(src, "ns::k<double>").names == ("y", "count")
    assert kernarg.Signature.from_source(src, "ns::k<double>").defaults == {1: 2}
    assert kernarg.Signature.from_source(src, "ns::k<float>").names == ("x", "n")
    assert kernarg.Signature.from_source(src, "ns::plain").names == ("b",)


TEMPLATE_DEFAULTS = r"""
template <typename A, typename B> struct S {};
template <typename T, int N = (3 > 2), typename U = short> __global__ void cmp(T x, U n) {}
template <typename T, typename U = T*> __global__ void same(T x, U p) {}
template <typename V = S<int, int>, typename U = short, typename W = int>
__global__ void nested(U n, W w) {}
template <int N, typename U> __global__ void value(U n) {}
template <char C = '>', typename U = short> __global__ void quote(U n) {}
template <int N = 1'000, typename U = short> __global__ void digits(U n) {}
template <unsigned int, typename T = float> __global__ void unnamed(int x, T y) {}
"""


@pytest.mark.parametrize("name, types", [
    ("cmp<float>", ("float", "short")),
    ("same<double>", ("double", "double*")),
    ("nested<S<int, int>, char, double>", ("char", "double")),
    ("nested<>", ("short", "int")),
    ("value<(3 > 2), double>", ("double",)),
    ("value<',', double>", ("double",)),
    ("quote<>", ("short",)),
    ("digits<>", ("short",)),
    # An unnamed `unsigned int` parameter: before, its `int` was taken for its name, and
    # replaced by the argument (`3 x`, the PTX's .u32 unnamed).
    ("unnamed<3>", ("int", "float")),
])
def test_template_parameter_lists_are_read_as_cxx_reads_them(name, types):
    # In a template's parameter list and arguments, < and > are brackets, defaults included,
    # but inside parentheses, where they compare; a default may name the parameters before it
    # (U = T*); literals hold no brackets or commas. Before: (3 > 2) ended the list, S<int,
    # int> split at its comma (nested<> a ValueError: 3 parameters against the PTX's 2), and
    # U = T* stayed T*, a type kernarg does not know.
    sig = kernarg.Signature.from_source(TEMPLATE_DEFAULTS, name)
    assert sig.types == types
    assert None not in sig.names        # read from the source, not the PTX's unnamed types


def test_struct_fields_a_dict_leaves_out_take_their_default_member_initializers():
    # C++'s P{.b = 3} gives a its default member initializer; before, a dict that left a out
    # packed it as zero without a word (and `int b{2}` made the struct opaque bytes). Now the
    # compiler evaluates the struct's T{} (macros, expressions, arrays, nested structs'
    # defaults), and a dict's fields are written over it.
    src = """#define SCALE (1 << 3)
struct P { float a = SCALE * 0.5f; int b{2}; float v[2] = {1, 2}; char c = ';'; int z; };
struct R { P p; int c = 7; };
__device__ int runtime() { return 3; }
struct D { int a = runtime(); int b; };
extern "C" __global__ void k(P p, R r, D d) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert [r.metadata.get("defaulted") for r in sig.records] == [
        ("a", "b", "v", "c"), ("p", "c"), ("a",)]
    p_default = struct.pack("<fi2fbxxxi", 4.0, 2, 1.0, 2.0, ord(";"), 0)
    r_default = p_default + struct.pack("<i", 7)
    d = {"a": 5, "b": 6}
    assert bytes(sig.pack(({}, {}, d)))[:len(p_default) + len(r_default)] == \
        p_default + r_default
    # Given fields replace their defaults; the others keep theirs.
    block = bytes(sig.pack(({"b": 9, "z": -1}, {"c": 1}, d)))
    assert block[:len(p_default)] == struct.pack("<fi2fbxxxi", 4.0, 9, 1.0, 2.0, ord(";"), -1)
    assert block[len(p_default):len(p_default) + len(r_default)] == p_default + b"\1\0\0\0"
    # A struct without initializers still zero-fills what a dict leaves out, and a tuple still
    # gives every field.
    plain = kernarg.Signature.from_source(
        'struct Q { float a; int b; };\nextern "C" __global__ void q(Q x) {}', "q")
    assert "defaulted" not in plain.records[0].metadata
    assert bytes(plain.pack(({"b": 3},))) == struct.pack("<fi", 0, 3)
    # An initializer that is no constant expression (D's a): the field must be given, never
    # packed as zero, in a parameter or in a struct inside one.
    with pytest.raises(TypeError, match=r"parameter 2 \('d'\): a struct \(D\) leaves out "
                                        r"field a, whose default member initializer"):
        sig.pack(({}, {}, {"b": 1}))
    with pytest.raises(TypeError, match=r"'d'\): a struct \(D\) leaves out field a"):
        sig.pack(({}, {}, {"b": 1}))
    # A struct inside another, given in part, takes its own type's P{} (before session 60:
    # refused, "field p leaves out fields a, b, v, c").
    assert bytes(sig.pack(({}, {"p": {"z": 1}}, d)))[len(p_default):][:len(p_default)] == \
        p_default[:-4] + struct.pack("<i", 1)
    whole = {"a": 1.0, "b": 1, "v": (0, 0), "c": 0, "z": 2}
    assert bytes(sig.pack(({}, {"p": whole}, d)))[len(p_default):][:4] == struct.pack("<f", 1)
    nested_d = kernarg.Signature.from_source(
        src.replace("void k(P p, R r, D d)", "void k(P p, R r, D d, E e)").replace(
            'extern "C"', "struct E { D d; int c = 1; };\nextern \"C\""), "k")
    with pytest.raises(TypeError, match=r"'e'\): field d leaves out field a, whose default"):
        nested_d.pack(({}, {}, d, {"d": {"b": 1}, "c": 1}))
    # The initial bytes travel with the signature (its records) through pickle.
    again = pickle.loads(pickle.dumps(sig))
    assert bytes(again.pack(({}, {}, d))) == bytes(sig.pack(({}, {}, d)))
    # A record's metadata is anyone's to write: initial bytes of another length, or no bytes,
    # are no defaults (before, 2 bytes were read as 8, and a str's object header as bytes).
    for initial in (b"xy", "a str of..", None):
        dt = np.dtype({"names": ["a", "b"], "formats": ["<f4", "<i4"], "offsets": [0, 4],
                       "itemsize": 8}, metadata={"defaulted": ("a",), "initial": initial})
        with pytest.raises(TypeError, match="leaves out field a, whose default member"):
            kernarg.Signature([dt]).pack(({"b": 1},))


NESTED_DEFAULTS_SOURCE = """
#define v 3     /* a macro named as a word kernarg's own evaluation might use */
struct P { float a = 1.5f; int b; short c[2] = {3, 4}; };
struct R { P p = {9.0f, 9, {8, 8}}; P ps[2]; int c = 7; P q; };
namespace n { struct W { P grid[2][2]; char tag = 'w'; }; }
struct Q { R r; int z = -2; P p{2.5f, 1}; n::W w; };
extern "C" __global__ void k(R r, const Q q) {}
"""


def _random_part(rng, dt):
    """A random value a dict may give for struct dtype ``dt``: some of its fields, structs
    inside it given in part, as nested dicts (in arrays: lists of them)."""
    if dt.subdtype is not None:
        base, shape = dt.subdtype
        inner = base if len(shape) == 1 else np.dtype((base, shape[1:]))
        return [_random_part(rng, inner) for _ in range(shape[0])]
    if dt.fields is None:
        return rng.randint(-50, 50)
    return {name: _random_part(rng, dt.fields[name][0]) for name in dt.names
            if rng.random() < 0.5}


def _designated(value):
    """C++20's initializer for ``value`` (_random_part's): {.a = 1, .p = {.b = 2}}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f".{k} = {_designated(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "{" + ", ".join(_designated(v) for v in value) + "}"
    return str(value)


def test_structs_given_in_part_at_any_depth_pack_what_cxx_designated_initializers_give():
    # Differential: each random dict (fields left out at every depth, structs inside structs
    # and in arrays of them given in part) packs the bytes NVRTC gives its C++20 designated
    # initializer: R{.p = {.b = 3}} gives p.a P's own default (1.5), not R's initializer for
    # p (9), and a field left out whole takes the enclosing struct's initializer.
    from kernarg._signature import _ptx_constant

    sig = kernarg.Signature.from_source(NESTED_DEFAULTS_SOURCE, "k")
    rng = random.Random(60)
    values = [[_random_part(rng, sig.records[i]) for i in range(2)] for _ in range(24)]
    # (Through a constexpr copy: NVRTC 13.5 emits `const Q q = Q{...};` with only the first
    # row of W's `P grid[2][2]` initialized, the rest zero; its constant evaluator is right.)
    wanted = "".join(
        f"constexpr {t} value_{j}_{i} = {t}{_designated(v[i])}; "
        f'extern "C" __device__ const {t} want_{j}_{i} = value_{j}_{i};\n'
        for j, v in enumerate(values) for i, t in enumerate(("R", "Q")))
    ptx = compile_to_ptx(NESTED_DEFAULTS_SOURCE + wanted, options=("--std=c++20",))
    for j, v in enumerate(values):
        block = bytes(sig.pack(tuple(v)))
        for i in range(2):
            size = sig.records[i].itemsize
            assert block[sig.offsets[i]:sig.offsets[i] + size] == \
                _ptx_constant(ptx, f"want_{j}_{i}"), (i, v[i])
    # Every element of the grid is P{}'s (a = 1.5), as a host compiler has it: before, kernarg
    # took NVRTC's `const Q x = {};`, whose grid[1][*] are zeros, for Q's defaults.
    grid = sig.records[1].fields["w"][1]
    q = bytes(sig.pack(({}, {})))[sig.offsets[1]:]
    assert [struct.unpack_from("<f", q, grid + 12 * e)[0] for e in range(4)] == [1.5] * 4
    # Where the compiler evaluates that only unwrapped (__half2's copy is not constexpr), the
    # struct's defaults are unknown: a dict that leaves them out is refused, not misread.
    half = kernarg.Signature.from_source(
        "#include <cuda_fp16.h>\n" + NESTED_DEFAULTS_SOURCE.replace(
            "char tag = 'w';", "char tag = 'w'; __half2 h;"), "k")
    given = {"r": {}, "z": 1, "p": {}, "w": ([[{}, {}], [{}, {}]], 0, (0, 0))}
    q = bytes(half.pack(({"p": {}}, given)))[half.offsets[1]:]
    assert [struct.unpack_from("<f", q, grid + 12 * e)[0] for e in range(4)] == [1.5] * 4
    with pytest.raises(TypeError, match=r"'q'\): a struct \(Q\) leaves out fields r, z, p"):
        half.pack(({}, {}))
    with pytest.raises(TypeError, match=r"'q'\): field w leaves out fields grid, tag"):
        half.pack(({}, {**given, "w": {"h": (0, 0)}}))


def test_struct_default_arguments_are_evaluated_as_cxx_has_them_not_as_nvrtc_emits_them():
    # `W w = {}` and `W w = W{}`: NVRTC 13.5 emits such a default with only grid's first row
    # P{}'s (a = 1.5), the rest zero, so kernarg packed zeros there. A constexpr copy of the
    # default is right, as is any default NVRTC evaluates as a constant expression (make()).
    src = """
#include <cuda_fp16.h>
struct P { float a = 1.5f; int b; };
struct W { P grid[2][2]; char tag = 'w'; };
struct G { P row[2]; __half2 h; };
struct H { P grid[2][2]; __half2 h; };
template <class T> struct Box { T grid[2][2]; };
__device__ constexpr W make() { return W{}; }
extern "C" __global__ void k(int a, H h = {}, W w = {}, W w2 = W{}, W w3 = make(),
                             W w4 = {{{{2.5f, 1}, {}}, {{}, {}}}, 'x'}, G g = {},
                             Box<P> o = {}, float f = 2 * 1.25f) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    block = bytes(sig.pack((1, bytes(sig.sizes[1]))))

    def floats(i, count):
        return [struct.unpack_from("<f", block, sig.offsets[i] + 8 * e)[0]
                for e in range(count)]

    for i in (2, 3, 4):
        assert floats(i, 4) == [1.5] * 4 and block[sig.offsets[i] + 32] == ord("w"), i
    assert floats(5, 4) == [2.5, 1.5, 1.5, 1.5] and block[sig.offsets[5] + 32] == ord("x")
    # __half2's copy is not constexpr: a struct with no grid is evaluated as NVRTC emits it,
    # which is right there; one with a grid (h) is refused, not packed wrong.
    assert floats(6, 2) == [1.5, 1.5]
    assert floats(7, 4) == [1.5] * 4
    assert struct.unpack_from("<f", block, sig.offsets[8]) == (2.5,)
    with pytest.raises(TypeError, match=r"no value for parameter 1 \('h'\) .*'\{\}', which "
                                        r"NVRTC could not evaluate .* must also have a "
                                        r"constexpr copy"):
        sig.pack((1,))


def test_a_struct_templates_instantiation_is_laid_out_with_its_arguments():
    # `Params<float> p`: the template's members with T = float (and N's default where the
    # instantiation leaves it out), field by field, so a dict fills it. Before, every struct
    # template's instantiation was opaque bytes. A template with a specialization in the
    # source (whose layout may differ for some arguments) stays opaque.
    src = """
template <typename T> struct Params { const T* x; T* y; int n; T scale; };
template <class T, int N = 3> struct Box { T v[N]; };
template <class T> struct Outer { Box<T, 2> b; char c; };
template <class T> struct Spec { T a; };
template <> struct Spec<int> { double d; int a; };
extern "C" __global__ void k(Params<float> p, Box<short> b, const Box<double, 2> b2,
                             Outer<int> o, Spec<float> s) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types[:4] == ("Params<float>", "Box<short>", "Box<double, 2>", "Outer<int>")
    assert sig.records[4] is None and sig.types[4] == ".align 4 .b8 [4]"
    assert [sig.records[0].fields[f][1] for f in ("x", "y", "n", "scale")] == [0, 8, 16, 20]
    raw = bytes(sig.pack(({"n": 5, "scale": 2.5}, {"v": (1, 2, 3)}, {"v": [1.5, 2]},
                          {"b": {"v": (7, 8)}, "c": 1}, bytes(4))))
    assert raw[:24] == struct.pack("<QQif", 0, 0, 5, 2.5)
    assert raw[sig.offsets[1]:sig.offsets[1] + 6] == struct.pack("<3h", 1, 2, 3)
    assert raw[sig.offsets[2]:sig.offsets[2] + 16] == struct.pack("<2d", 1.5, 2)
    assert raw[sig.offsets[3]:sig.offsets[3] + 9] == struct.pack("<2ib", 7, 8, 1)
    with pytest.raises(TypeError, match=r"parameter 0 \('p'\), field x \(const float\*\): "
                                        r"the array's element type is f8"):
        sig.pack(({"x": CAIObject(cai(0x1000, typestr="<f8"))}, {}, {}, {}, bytes(4)))


def test_structs_nested_without_end_or_very_deep_stay_opaque():
    # An instantiation that holds one of another instantiation without end (no compiler
    # instantiates it, but a source read without one may hold it) recursed until the C stack
    # overflowed: a segfault. 3,000 structs each holding the one before (valid C++) were a
    # RecursionError out of from_source. Past 32 levels kernarg now leaves them opaque.
    ptx = compile_ptx('struct Q { int a; };\nextern "C" __global__ void k(Q q) {}')
    endless = ("template <int N> struct S { S<N + 1> s; int a; };\n"
               'extern "C" __global__ void k(S<3> q) {}')
    assert kernarg.Signature._from_source_and_ptx(endless, "k", ptx).records == (None,)
    for n, read in ((3000, False), (20, True)):
        chain = "struct S0 { int a; };\n" + "".join(
            f"struct S{i} {{ S{i - 1} s; }};\n" for i in range(1, n))
        sig = kernarg.Signature._from_source_and_ptx(
            chain + f'extern "C" __global__ void k(S{n - 1} q) {{}}', "k", ptx)
        assert (sig.records[0] is not None) == read, n


def test_template_without_instantiation_says_how_to_name_one():
    with pytest.raises(LookupError, match=r"'axpy' is a template: name an instantiation, such "
                                          r"as 'axpy<float>'"):
        kernarg.Signature.from_source(TEMPLATE_SOURCE, "axpy")
    with pytest.raises(kernarg.NvrtcError, match="missing<float>"):
        kernarg.Signature.from_source(TEMPLATE_SOURCE, "missing<float>")


def test_std_array_parameters_take_a_sequence_of_their_elements():
    # cuda::std::array<T, N> (and std::array) by value is N elements of T aligned as T: it was
    # opaque bytes, which refused a list (as a signature string, an unknown type).
    sig = kernarg.Signature("char c, std::array<short, 3> s, cuda::std::array<double, 2> d")
    assert (sig.offsets, sig.sizes, sig.alignments) == ((0, 2, 8), (1, 6, 16), (1, 2, 8))
    assert bytes(sig.pack((1, [1, 2, 3], (0.5, 2)))) == struct.pack("<bx3h2d", 1, 1, 2, 3,
                                                                    0.5, 2)
    with pytest.raises(TypeError, match=r"parameter 0 \('a'\) is std::array<int, 2>: expected "
                                        r"2 elements, got 3"):
        kernarg.Signature("std::array<int, 2> a").pack(([1, 2, 3],))
    with pytest.raises(OverflowError, match=r"element 2 .*300 is outside 0 \.\. 255"):
        kernarg.Signature("std::array<unsigned char, 3> a").pack(([1, 2, 300],))
    with pytest.raises(ValueError, match="kernarg reads std::array of scalar types"):
        kernarg.Signature("std::array<float4, 2> a")


@NEEDS_CCCL
def test_std_array_layouts_are_nvrtcs():
    # from_source checks each layout against NVRTC's PTX (a std::array kernarg read wrongly
    # would be refused there, or left opaque).
    elems = ("bool", "char", "signed char", "unsigned char", "short", "unsigned short", "int",
             "unsigned", "long", "long long", "unsigned long long", "float", "double",
             "__half", "__nv_bfloat16", "int8_t", "uint16_t", "size_t")
    counts = (1, 2, 3, 5, 8)
    params = [f"cuda::std::array<{e}, {n}> a{i}_{n}" for i, e in enumerate(elems)
              for n in counts]
    src = ("#include <cuda/std/array>\n#include <cuda/std/cstdint>\n#include <cuda_fp16.h>\n"
           "#include <cuda_bf16.h>\nusing cuda::std::int8_t; using cuda::std::uint16_t;\n"
           "using cuda::std::size_t;\n"
           f'extern "C" __global__ void k(char c, {", ".join(params)}) {{}}\n')
    sig = kernarg.Signature.from_source(src, "k")
    assert all(t.startswith("cuda::std::array<") for t in sig.types[1:]), sig.types
    values = [1] + [[k % 2 for k in range(n)] for _ in elems for n in counts]
    raw = bytes(sig.pack(values))
    for i, (name, n) in enumerate(((e, n) for e in elems for n in counts), 1):
        size = sig.sizes[i] // n
        assert sig.alignments[i] == size and sig.offsets[i] % size == 0
        lanes = raw[sig.offsets[i]:sig.offsets[i] + sig.sizes[i]]
        one = bytes(kernarg.Signature(f"{name} x").pack((1,)))
        assert lanes == b"".join(one if k % 2 else bytes(size) for k in range(n)), name
    # In a struct of the source too; std::array of a type no scalar is, opaque.
    more = kernarg.Signature.from_source(
        "#include <cuda/std/array>\nstruct P { cuda::std::array<short, 3> v; int n; };\n"
        'extern "C" __global__ void q(P p, cuda::std::array<float2, 2> w) {}', "q")
    assert bytes(more.pack(({"v": (1, 2, 3), "n": 4}, bytes(16))))[:12] == \
        struct.pack("<3h2xi", 1, 2, 3, 4)
    assert more.types[1] == ".align 8 .b8 [16]"


def test_limit_checked_at_construction():
    kernarg.Signature(["double4_16a"] * 1023)   # 32736 bytes
    with pytest.raises(ValueError, match="32764"):
        kernarg.Signature(["double4_16a"] * 1024)


OPAQUE_POINTERS = [
    # (declaration, type kernarg shows, name, const pointee)
    ("MyStruct* s", "MyStruct*", "s", False),
    ("const struct Pair* p", "const Pair*", "p", True),
    ("Pair const* const __restrict__ q", "const Pair*", "q", True),
    ("ns::Wide* __restrict__ w", "ns::Wide*", "w", False),
    ("const Box<int, 4>* b", "const Box<int, 4>*", "b", True),
    ("__align__(16) Pair** pp", "Pair**", "pp", False),
    ("union Bits* u", "Bits*", "u", False),
    ("__nv_fp8_e4m3* x8", "__nv_fp8_e4m3*", "x8", False),
    ("ns::Wide*", "ns::Wide*", None, False),
]
OPAQUE_PRELUDE = """#include <cuda_fp8.h>
struct MyStruct { double d; char c; };
struct Pair { float a; int b; };
namespace ns { struct Wide { double v[3]; }; }
template <class T, int N> struct Box { T v[N]; };
union Bits { float f; unsigned u; };
"""


def test_function_pointers_are_pointers_named_inside_their_parentheses():
    # `int (*f)(int)` names f: before, the last word, `int`, was taken for its name (and the
    # parameter's type for an unknown one, so the PTX's .u64).
    src = """__device__ int twice(int x) { return 2 * x; }
typedef int (*fn_t)(int);
extern "C" __global__ void k(void (* const cb)(float*, int), int n,
                             float (**table)(float, int (*)(int)) = 0,
                             int (*f)(int) = nullptr, fn_t h = NULL) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.names == ("cb", "n", "table", "f", "h")
    assert sig.types == ("void (* const)(float*, int)", "int", "float (**)(float, int (*)(int))",
                         "int (*)(int)", ".u64")
    ptx = kernarg.Signature.from_ptx(compile_ptx(src), "k")
    assert (sig.offsets, sig.sizes, sig.nbytes) == (ptx.offsets, ptx.sizes, ptx.nbytes)
    # Null defaults, also for a pointer typedef kernarg reads only as the PTX's .u64.
    assert sig.defaults == {2: None, 3: None, 4: None}
    assert bytes(sig.pack((0x1000, 3))) == struct.pack("<Qi4x3Q", 0x1000, 3, 0, 0, 0)
    assert bytes(sig.pack((None, 3, np.uint64(0x2000), 0x3000, 0x4000))) == \
        struct.pack("<Qi4x3Q", 0, 3, 0x2000, 0x3000, 0x4000)
    # Written as C declares them, so the repr is a signature string that reads back the same.
    assert repr(sig) == ("kernarg.Signature('void (* const cb)(float*, int), int n, "
                         "float (**table)(float, int (*)(int)) = 0, int (*f)(int) = nullptr, "
                         ".u64 h = NULL')")
    again = eval(repr(sig).replace(".u64 h", "void* h"))
    assert again.names == sig.names and again.defaults == sig.defaults
    with pytest.raises(TypeError, match=r"\(void \(\* const cb\)\(float\*, int\), int n, "):
        sig.pack(())
    # A function's address is the module's to fix when it is loaded: no constant NVRTC can
    # give, so it must be passed.
    src = ('__device__ int twice(int x) { return 2 * x; }\n'
           'extern "C" __global__ void k(int n, int (*f)(int) = twice) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.defaults == {} and sig.names == ("n", "f")
    with pytest.raises(TypeError, match=r"parameter 1 \('f'\) has the default argument "
                                        r"'twice', which NVRTC evaluated to the address of a "
                                        r"function or __device__ variable: the driver fixes "
                                        r"it only when it loads the module"):
        sig.pack((1,))


def test_address_defaults_say_they_are_addresses():
    # NVRTC evaluates `table + 1` and `&twice` to PTX initialisers that name the symbol
    # (`generic(table)+4`, `_Z5twicei`): values the module loader fixes. The defaults after
    # them still count; the message says why these must be passed, and not that NVRTC could
    # not evaluate them (it did).
    src = ('__device__ int twice(int x) { return 2 * x; }\n'
           '__device__ float table[4];\n'
           'extern "C" __global__ void k(float* p = table + 1, int (*f)(int) = &twice, '
           'int n = 2 + 2) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.defaults == {2: 4}
    assert sig.default_texts == ("table + 1", "&twice", "2 + 2")
    with pytest.raises(TypeError, match=r"got 1: no value for parameter 1 \('f'\) "
                                        r"\(parameter 1 \('f'\) has the default argument "
                                        r"'&twice', which NVRTC evaluated to the address of a "
                                        r"function or __device__ variable"):
        sig.pack((None,))
    assert bytes(sig.pack((None, 0x10))) == struct.pack("<QQi", 0, 0x10, 4)
    # A default NVRTC cannot evaluate at all keeps its own reason.
    src = ('__device__ int runtime(void) { return 3; }\n'
           'extern "C" __global__ void k(int m, int n = runtime()) {}')
    sig = kernarg.Signature.from_source(src, "k")
    with pytest.raises(TypeError, match=r"which NVRTC could not evaluate as a constant"):
        sig.pack(())


def test_pointers_to_types_kernarg_does_not_name_are_pointers():
    """A pointer to a struct, template, namespaced or library type is 8 bytes like any pointer:
    the text form takes it (it used to say "unknown parameter type"), shows its type and name,
    and lays it out as NVRTC does, between parameters of other alignments."""
    for decl, shown, name, const in OPAQUE_POINTERS:
        sig = kernarg.Signature(decl)
        assert (sig.sizes, sig.alignments, sig.names) == ((8,), (8,), (name,))
        text = f"{shown} {name}" if name else shown
        assert repr(sig) == f"kernarg.Signature({text!r})"
        assert repr(kernarg.Signature(text)) == repr(sig)          # what repr shows parses back
        readonly = CAIObject(cai(0x1000, readonly=True))
        if const:
            sig.pack((readonly,))
        else:
            with pytest.raises(ValueError, match="is not const but the CAIObject array is "
                                                 "read-only"):
                sig.pack((readonly,))
    mixed = [t for _, shown, *_ in OPAQUE_POINTERS for t in ("char", shown)]
    sig = kernarg.Signature(", ".join(mixed))
    expected = kernels_layout({"k": mixed}, prelude=OPAQUE_PRELUDE)["k"]
    assert (sig.offsets, sig.sizes, sig.nbytes) == expected
    assert len(sig) == 2 * len(OPAQUE_POINTERS)


def test_opaque_pointers_check_const_not_element_type():
    sig = kernarg.Signature("const Pair* in, Pair* out")
    ro, rw = CAIObject(cai(0x1000, readonly=True)), CAIObject(cai(0x2000, typestr="<i8"))
    block = sig.pack((ro, rw))
    assert bytes(block) == struct.pack("<QQ", 0x1000, 0x2000)
    with pytest.raises(ValueError, match=r"parameter 1 \('out'\) \(Pair\*\) is not const but "
                                         r"the CAIObject array is read-only"):
        sig.pack((ro, ro))


def test_from_source_keeps_const_of_pointers_to_declared_structs():
    """Kernel.from_source's signature: a pointer to a struct the source declares used to be the
    PTX's `.u64` (any int or array, const-ness lost, so a read-only array reached a kernel that
    writes through it); now it is the declared pointer."""
    src = OPAQUE_PRELUDE + (
        'extern "C" __global__ void k(const Pair* in, ns::Wide* out, Pair by_value, int n) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.names == ("in", "out", "by_value", "n")
    assert repr(sig).startswith("kernarg.Signature('const Pair* in, ns::Wide* out, ")
    assert (sig.offsets, sig.sizes) == ((0, 8, 16, 24), (8, 8, 8, 4))
    ro = CAIObject(cai(0x1000, readonly=True))
    value = np.zeros((), np.dtype([("a", "<f4"), ("b", "<i4")], align=True))[()]
    sig.pack((ro, 0x2000, value, 3))
    with pytest.raises(ValueError, match=r"'out'\) \(ns::Wide\*\) is not const"):
        sig.pack((ro, ro, value, 3))


def test_lvalue_references_are_addresses_as_pointers_are():
    """CUDA passes a kernel's lvalue reference parameter as the address it binds to (NVRTC
    refuses rvalue ones): kernarg takes what a pointer of that level takes,
    checks the element type and const-ness the same way, and shows it as declared. It used to
    refuse every reference ("kernel parameters cannot be references"), and from_source read
    one as the PTX's untyped .u64."""
    assert kernarg.Signature("float& __restrict__ r").types == ("float&",)   # NVRTC takes it
    sig = kernarg.Signature("const float& x, float*& p, Pair& s, int n")
    assert sig.types == ("const float&", "float*&", "Pair&", "int")
    assert (sig.sizes, sig.alignments, sig.names) == ((8, 8, 8, 4), (8, 8, 8, 4),
                                                      ("x", "p", "s", "n"))
    assert repr(sig) == "kernarg.Signature('const float& x, float*& p, Pair& s, int n')"
    assert repr(eval(repr(sig))) == repr(sig)
    ro = CAIObject(cai(0x1000, typestr="<f4", readonly=True))
    block = sig.pack((ro, 0x2000, CAIObject(cai(0x3000, typestr="<i8")), 4))
    assert bytes(block) == struct.pack("<QQQi", 0x1000, 0x2000, 0x3000, 4)
    with pytest.raises(TypeError, match=r"parameter 0 \('x'\) is const float& but the array's "
                                        r"element type is i4"):
        sig.pack((CAIObject(cai(0x1000, typestr="<i4")), 0, 0, 4))
    with pytest.raises(ValueError, match=r"parameter 0 \('x'\) \(float&\) is not const but "
                                         r"the CAIObject array is read-only"):
        kernarg.Signature("float& x").pack((ro,))
    # from_source types them from the declaration; the layout is the PTX's.
    src = OPAQUE_PRELUDE + ('extern "C" __global__ void k(const float& x, const Pair &s, '
                            'float*& p, char c) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("const float&", "const Pair&", "float*&", "char")
    ptx = kernarg.Signature.from_ptx(compile_ptx(src), "k")
    assert (sig.offsets, sig.sizes, sig.nbytes) == (ptx.offsets, ptx.sizes, ptx.nbytes)
    for bad, why in (("float&& r", "CUDA does not allow rvalue-reference"),
                     ("float (&*a)[4]", "a reference kernarg cannot read"),
                     ("int (&f)(int)", "a reference kernarg cannot read")):
        with pytest.raises(ValueError, match=re.escape(f"{bad!r}: {why}")):
            kernarg.Signature(bad)


def test_pointers_and_references_to_arrays_are_their_elements_addresses():
    """`float (*rows)[4]` and `const float (&v)[3]` are passed as the address of the array,
    as `float* rows` is: kernarg takes what a pointer to the elements takes, checks the element
    type and const-ness the same way, and shows the declaration as written. NVRTC compiles
    both; kernarg used to refuse them in a signature string ("an array parameter kernarg
    cannot read"), and from_source typed them as the PTX's untyped .u64."""
    sig = kernarg.Signature("const float (&v)[3], float (*rows)[2], int (& out)[2][2], "
                            "float (*&pp)[4], Pair (&s)[2], float* (*q)[4], "
                            "float (* const __restrict__ r)[0x10], float (*)[], int n")
    assert sig.types == ("const float (&)[3]", "float (*)[2]", "int (&)[2][2]", "float (*&)[4]",
                         "Pair (&)[2]", "float* (*)[4]", "float (*)[0x10]", "float (*)[]",
                         "int")
    assert sig.names == ("v", "rows", "out", "pp", "s", "q", "r", None, "n")
    assert sig.sizes == (8,) * 8 + (4,) and sig.alignments == (8,) * 8 + (4,)
    assert repr(sig) == ("kernarg.Signature('const float (&v)[3], float (*rows)[2], "
                         "int (&out)[2][2], float (*&pp)[4], Pair (&s)[2], float* (*q)[4], "
                         "float (*r)[0x10], float (*)[], int n')")
    assert repr(eval(repr(sig))) == repr(sig)
    f4, i4 = CAIObject(cai(0x1000, typestr="<f4")), CAIObject(cai(0x2000, typestr="<i4"))
    ro = CAIObject(cai(0x3000, typestr="<f4", readonly=True))
    block = sig.pack((ro, f4, i4, 0x4000, CAIObject(cai(0x5000)), 0x6000, f4, None, 7))
    assert bytes(block) == struct.pack("<8Qi", 0x3000, 0x1000, 0x2000, 0x4000, 0x5000, 0x6000,
                                       0x1000, 0, 7)
    # The elements are checked as a pointer to them checks them: floats for float (&)[3] ...
    with pytest.raises(TypeError, match=r"parameter 0 \('v'\) is const float \(&\)\[3\] "
                                        r"but the array's element type is i4"):
        sig.pack((i4, f4, i4, 0, None, 0, f4, None, 7))
    with pytest.raises(TypeError, match=r"parameter 2 \('out'\) is int \(&\)\[2\]\[2\] "
                                        r"but the array's element type is f4"):
        sig.pack((ro, f4, f4, 0, None, 0, f4, None, 7))
    # ... and memory that is read-only for a non-const one.
    with pytest.raises(ValueError, match=r"parameter 1 \('rows'\) \(float \(\*\)\[2\]\) is "
                                         r"not const but the CAIObject array is read-only"):
        sig.pack((ro, ro, i4, 0, None, 0, f4, None, 7))
    # from_source types them from the declaration; the layout is the PTX's.
    src = ("struct Pair { int a; float b; };\n"
           'extern "C" __global__ void k(const float (&v)[3], float (*rows)[2], char c, '
           "double (&d)[2][2], float (*&pp)[4]) {}")
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("const float (&)[3]", "float (*)[2]", "char", "double (&)[2][2]",
                         "float (*&)[4]")
    ptx = kernarg.Signature.from_ptx(compile_ptx(src), "k")
    assert (sig.offsets, sig.sizes, sig.nbytes) == (ptx.offsets, ptx.sizes, ptx.nbytes)
    for bad, why in (("float (&&a)[4]", "CUDA does not allow rvalue-reference"),
                     ("float (&*a)[4]", "a reference kernarg cannot read"),
                     ("float (&a)[N]", "an array extent kernarg cannot read ([N])"),
                     ("float (*a)[2][]", "an array extent kernarg cannot read ([])"),
                     ("float& (*a)[2]", "a reference kernarg cannot read"),
                     ("void (&a)[2]", "there are no arrays of void"),
                     ("const void (*a)[2]", "there are no arrays of void"),
                     ("int int (*a)[2]", "unknown parameter type")):
        with pytest.raises(ValueError, match=re.escape(f"{bad!r}: {why}")):
            kernarg.Signature(bad)


@pytest.mark.parametrize("bad, fragment", [
    ("float&& x", "rvalue-reference"), ("int (*x)[N]", "array extent"),
    ("Foo f", "unknown parameter type"), ("void v", "void"), ("int a,, int b", "empty parameter"),
    ("int (*f)(int", "a .\\(. is not closed"), ("Foo* a b", "unknown parameter type"),
    ("int int* p", "unknown parameter type"), ("signed unsigned *", "unknown parameter type"),
])
def test_parse_errors(bad, fragment):
    with pytest.raises(ValueError, match=fragment):
        kernarg.Signature(bad)


@pytest.mark.parametrize("bad, stray", [
    ("int; n", ";"), ("int n;", ";"), ("int 5 n", "5"), ("int@ n", "@"), ("float - x", "-"),
    ("float*+ p", "+"), ("int #n", "#"), ("int ~n", "~"), ("int {n}", "{"), ("int n : 3", ":"),
    ("int n...", "..."), ("int ...", "..."), ("int\\ n", "\\"), ("int@ (*f)(int)", "@"),
    ("float* p, int? n", "?"),
])
def test_stray_characters_are_refused(bad, stray):
    # The declaration's tokens skip every other character: each of these used to be read as
    # the declaration without it (`int; n` as `int n`, `int ...` as an unnamed int).
    piece = bad.split(", ")[-1]
    with pytest.raises(ValueError, match=re.escape(f"{piece!r}: {stray!r} has no place in a "
                                                   "parameter declaration")):
        kernarg.Signature(bad)
    with pytest.raises(ValueError, match="has no place"):
        kernarg.Signature([piece])


@pytest.mark.parametrize("bad, fragment", [
    # Each was accepted before, as the declaration its tokens made (shown after the arrow);
    # NVRTC refuses every one (tests/test_declarations_nvrtc.py draws texts like them).
    ("int float", "'float' is a C++ keyword, not a parameter name"),              # int float
    ("Foo* delete", "'delete' is a C++ keyword, not a parameter name"),
    ("int return", "'return' is a C++ keyword, not part of a parameter declaration"),
    ("template*", "'template' is a C++ keyword"),                                  # template*
    ("struct int", "'struct' is not followed by the name of a type"),              # int
    ("struct const __half* p", "'struct' is not followed by the name of a type"),
    ("float2 struct", "'struct' is not followed by the name of a type"),
    ("float2 struct Foo", "'struct' after the type it would name"),
    ("struct half2 x", "'half2' is a typedef, which 'struct' cannot name"),
    ("enum float2* p", "unknown parameter type"),
    ("typename p*", "'typename' names a member of a class or namespace"),
    ("p short * class", "'class' is not followed by the name of a type"),
    ("uint3 * uint3 * __half", "unknown parameter type"),                          # uint3**
    ("Foo* ::ns::p", "unknown parameter type"),
    ("int ::n", "a parameter's name is not qualified"),
    ("signed(int)", "a parameter of function type"),             # int: NVRTC says 8 bytes
    ("int ()", "a parameter of function type"),                  # int: NVRTC says 8 bytes
    ("__half ( const )", "a parameter of function type"),
    ("short (*", "a '(' is not closed"), ("unsigned)", "')' closes nothing"),
    ("char (*) Foo", "something follows the parenthesized declarator"),
    ("int n*", "something follows the name 'n'"),                                  # int* n
    ("int n const", "something follows the name 'n'"),
    ("Foo* p const", "something follows the name 'p'"),
    ("int n&", "something follows the name 'n'"),
    ("unsigned* char", "a '*' before the end of the type"),                 # unsigned char*
    ("* int p", "a '*' before the end of the type"),                               # int* p
    ("const float __restrict__ x", "__restrict__ qualifies a pointer"),            # float x
    ("__restrict__ float* p", "__restrict__ qualifies a pointer"),
    ("int __restrict__ [4]", "__restrict__ qualifies a pointer"),
    ("void x[4]", "there are no arrays of void"),                                  # void*
    ("void& r", "there are no references to void"),
    ("int x[4][]", "an array parameter kernarg cannot read"),                      # int*
    ("int x[0]", "an array extent of 0 ([0]); no array is empty"),                # int*
    ("int x[4][0x0]", "an array extent of 0 ([0x0]); no array is empty"),
    ("float (*rows)[0x0]", "an array extent of 0 ([0x0]); no array is empty"),
    ("bool =", "nothing follows '=', where a default argument would be"),          # bool
    ("__grid_constant__ int x", "a __grid_constant__ parameter must be const itself"),
    ("__grid_constant__ const float* p", "a __grid_constant__ parameter must be const"),
    ("dim3 return dim3 (*)()", "unknown return type 'dim3 return dim3'"),     # a pointer
    ("int int (*f)(int)", "unknown return type 'int int'"),
])
def test_declarations_nvrtc_refuses_are_refused(bad, fragment):
    with pytest.raises(ValueError, match=re.escape(f"{bad!r}: {fragment}")):
        kernarg.Signature(bad)


@pytest.mark.parametrize("text, shown", [("<f4", "float32"), ("float32", "float32"),
                                         ("i8", "int64"), ("complex64", "complex64")])
def test_a_numpy_dtype_string_in_a_type_list_gets_a_hint(text, shown):
    # A list of parameter types takes C type strs and numpy dtypes; a dtype's str is neither.
    with pytest.raises(ValueError, match=re.escape(f"for the numpy dtype {text!r}, pass "
                                                   f"np.dtype({text!r}) ({shown})")):
        kernarg.Signature([text])
    assert kernarg.Signature([np.dtype(text)]).sizes == (np.dtype(text).itemsize,)
    for not_numeric in ("a", "U4", "Foo f"):       # no hint where the dtype would not do
        with pytest.raises(ValueError) as info:
            kernarg.Signature([not_numeric])
        assert "numpy dtype '" not in str(info.value)


@pytest.mark.parametrize("bad", ["int<<>> n", "int <5> n", "int<float> n", "int<5>* p",
                                 "float <2>* p"])
def test_template_arguments_on_a_type_kernarg_names_are_refused(bad):
    with pytest.raises(ValueError, match=re.escape(f"{bad!r}: unknown parameter type")):
        kernarg.Signature(bad)


@pytest.mark.parametrize("text, types, names", [
    ("Foo<Bar<Baz<int>>>* p", ("Foo<Bar<Baz<int>>>*",), ("p",)),
    ("std::array<float, 4>* p", ("std::array<float, 4>*",), ("p",)),
    ("int (*f)(const char*, ...)", ("int (*)(const char*, ...)",), ("f",)),
    ("__align__(8) int n", ("int",), ("n",)),
    ("int (n), float (*rows)[4]", ("int", "float (*)[4]"), ("n", "rows")),
])
def test_declarations_with_punctuation_of_their_own_still_parse(text, types, names):
    sig = kernarg.Signature(text)
    assert (sig.types, sig.names) == (types, names)


def test_comments_in_a_parameter_list_are_removed_before_it_is_read():
    # A comment's `*`s used to be read as the declaration's: `float* /* out */ p` was float***,
    # a pointer whose elements kernarg no longer checked.
    sig = kernarg.Signature("float* /* out */ p, int /* count */ n // the length")
    assert (sig.types, sig.names) == (("float*", "int"), ("p", "n"))
    # A comment's commas do not split the list.
    sig = kernarg.Signature("float* out /* a, b */, int n")
    assert (sig.types, sig.names) == (("float*", "int"), ("out", "n"))
    with pytest.raises(TypeError, match=r"parameter 0 \('out'\) .*element type is i4"):
        sig.pack((CAIObject(cai(0x1000, typestr="<i4")), 1))
    sig = kernarg.Signature(["float* /* x */", "int // n"])
    assert sig.types == ("float*", "int")
    # A default argument's comment is not part of its value.
    sig = kernarg.Signature("int n = 3 /* three */")
    assert sig.default_texts == ("3",)
    assert bytes(sig.pack(())) == struct.pack("<i", 3)
    for bad in ("int n /* never closed", ["int /* never closed"]):
        with pytest.raises(ValueError, match="a /\\* comment is not closed"):
            kernarg.Signature(bad)


# ------------------------------------------------------------------------------------------
# Values


INT_FORMATS = {"signed char": "b", "unsigned char": "B", "short": "h", "unsigned short": "H",
               "int": "i", "unsigned int": "I", "long long": "q", "unsigned long long": "Q",
               "bool": "?"}


def _ref_round(x: float, ebits: int, mbits: int) -> int:
    """Exact round-to-nearest-even of a double to a small float format, via Fractions."""
    bias = (1 << (ebits - 1)) - 1
    sign = (1 << (ebits + mbits)) if math.copysign(1, x) < 0 else 0
    inf = ((1 << ebits) - 1) << mbits
    if math.isnan(x):
        return sign | inf | (1 << (mbits - 1))
    if math.isinf(x):
        return sign | inf
    v = abs(Fraction(x))
    if v == 0:
        return sign
    e = max(v.numerator.bit_length() - v.denominator.bit_length(), 1 - bias)
    while e > 1 - bias and v < Fraction(2) ** e:
        e -= 1
    while v >= Fraction(2) ** (e + 1):
        e += 1
    e = max(e, 1 - bias)
    quantum = Fraction(2) ** (e - mbits)
    q = round(v / quantum)          # Fraction rounding is half-to-even
    if q == 1 << (mbits + 1):
        q >>= 1
        e += 1
    if e > bias:
        return sign | inf
    if q < (1 << mbits):            # subnormal
        return sign | q
    return sign | ((e + bias) << mbits) | (q - (1 << mbits))


HALF_EDGES = [0.0, -0.0, 1.0, 65504.0, 65519.99, 65520.0, 65536.0, 6.1e-5, 5.96e-8, 2.98e-8,
              2.9802322387695312e-08, 8.940696716308594e-08, 1.00048828125, 1.0009765625,
              1.00146484375, 1e-10, math.inf, -math.inf, 2049.0, 2051.0, 0.1, 1 / 3]


@given(st.floats(allow_nan=False) | st.sampled_from(HALF_EDGES))
@settings(max_examples=2000, deadline=None)
def test_half_rounding_matches_numpy_and_reference(x):
    sig = kernarg.Signature(["__half"])
    raw = bytes(sig.pack((x,)))
    with np.errstate(over="ignore"):
        assert raw == np.float16(x).tobytes()
    assert struct.unpack("<H", raw)[0] == _ref_round(x, 5, 10)


@given(st.floats(allow_nan=False) | st.sampled_from(HALF_EDGES + [3.3895313892515355e38,
                                                                 1.1754942106924411e-38]))
@settings(max_examples=2000, deadline=None)
def test_bfloat16_rounding_matches_reference(x):
    raw = bytes(kernarg.Signature(["__nv_bfloat16"]).pack((x,)))
    assert struct.unpack("<H", raw)[0] == _ref_round(x, 8, 7)


def test_bfloat16_double_rounding_case():
    # 1 + 2**-8 + 2**-30 rounds up to 1 + 2**-7 in one step; via float32 it would tie and
    # round to 1.0.
    x = 1 + 2**-8 + 2**-30
    raw = bytes(kernarg.Signature(["bfloat16"]).pack((x,)))
    assert struct.unpack("<H", raw)[0] == _ref_round(x, 8, 7) == 0x3F81
    assert raw == ml_dtypes.bfloat16(np.float32(1 + 2**-7)).tobytes()


def test_nan_is_quiet_nan():
    assert bytes(kernarg.Signature(["half"]).pack((math.nan,))) == struct.pack("<H", 0x7E00)
    assert bytes(kernarg.Signature(["bfloat16"]).pack((math.nan,))) == struct.pack("<H", 0x7FC0)


def test_every_float16_packs_as_the_float_it_converts_to():
    """A numpy.float16 is read in place (no __float__ call, no section on a free-threaded
    build): each of the 65,536 halves packs, as every floating parameter type, as float(x)
    packs, and as a __half, as its own bits (but NaNs, which become kernarg's quiet NaN of
    their sign)."""
    sig = kernarg.Signature("__half a, float b, double c, __nv_bfloat16 d")
    for x in np.arange(65536, dtype=np.uint16).view(np.float16):
        bits = int(x.view(np.uint16))
        raw = bytes(sig.pack((x, x, x, x)))
        assert raw == bytes(sig.pack((float(x),) * 4)), hex(bits)
        nan = struct.pack("<H", bits & 0x8000 | 0x7E00)
        assert raw[:2] == (nan if np.isnan(x) else x.tobytes()), hex(bits)


_VALUE_TYPES = list(INT_FORMATS) + ["float", "double", "__half", "__nv_bfloat16", "float2",
                                    "int4", "double2", "char3", "float*", "const void*"]


def _value_strategy(t):
    if t in INT_FORMATS and t != "bool":
        fmt = INT_FORMATS[t]
        bits = struct.calcsize(fmt) * 8
        lo, hi = (0, 2**bits - 1) if fmt.isupper() else (-2**(bits - 1), 2**(bits - 1) - 1)
        return st.integers(lo, hi)
    if t == "bool":
        return st.booleans()
    if t in ("float", "double", "__half", "__nv_bfloat16"):
        return st.floats(allow_nan=False, width=32 if t == "float" else 64)
    if t == "float2":
        return st.tuples(st.floats(width=32, allow_nan=False), st.floats(width=32,
                                                                         allow_nan=False))
    if t == "double2":
        return st.tuples(st.floats(allow_nan=False), st.floats(allow_nan=False))
    if t == "int4":
        return st.lists(st.integers(-2**31, 2**31 - 1), min_size=4, max_size=4)
    if t == "char3":
        return st.tuples(*[st.integers(-128, 127)] * 3)
    return st.integers(0, 2**64 - 1) | st.none()


def _ref_encode(t, v):
    if t in INT_FORMATS:
        return struct.pack("<" + INT_FORMATS[t], v), struct.calcsize(INT_FORMATS[t])
    if t == "float":
        return struct.pack("<f", v), 4
    if t == "double":
        return struct.pack("<d", v), 8
    if t == "__half":
        return struct.pack("<H", _ref_round(v, 5, 10)), 2
    if t == "__nv_bfloat16":
        return struct.pack("<H", _ref_round(v, 8, 7)), 2
    if t == "float2":
        return struct.pack("<2f", *v), 8
    if t == "double2":
        return struct.pack("<2d", *v), 16
    if t == "int4":
        return struct.pack("<4i", *v), 16
    if t == "char3":
        return struct.pack("<3b", *v), 1
    return struct.pack("<Q", v or 0), 8


@st.composite
def _typed_args(draw):
    types = draw(st.lists(st.sampled_from(_VALUE_TYPES), min_size=1, max_size=16))
    return types, [draw(_value_strategy(t)) for t in types]


@given(_typed_args())
@settings(max_examples=400, deadline=None)
def test_typed_values_match_reference_encoder(case):
    types, values = case
    out = bytearray()
    for t, v in zip(types, values, strict=True):
        raw, align = _ref_encode(t, v)
        out += bytes(-len(out) % align) + raw
    sig = kernarg.Signature(types)
    block = sig.pack(tuple(values))
    assert bytes(block) == bytes(out)
    argv = (ctypes.c_void_p * len(types)).from_address(block.ptr)
    assert [p - block.data_ptr for p in argv] == list(sig.offsets)
    # A pickled copy packs the same bytes.
    assert bytes(pickle.loads(pickle.dumps(sig)).pack(tuple(values))) == bytes(out)


def test_numpy_and_other_number_types_convert():
    sig = kernarg.Signature("int a, float b, double c, unsigned char d, __half e, bool f")
    block = sig.pack((np.int16(-3), np.float64(0.5), np.float32(1.25), True, 2, np.True_))
    assert bytes(block) == (struct.pack("<ifdBx", -3, 0.5, 1.25, 1) + np.float16(2).tobytes()
                            + b"\x01")


_NUMBER_TYPES = ["bool", "char", "signed char", "unsigned char", "short", "unsigned short",
                 "int", "unsigned int", "long long", "unsigned long long", "__half",
                 "__nv_bfloat16", "float", "double"]


@pytest.mark.parametrize("t", _NUMBER_TYPES)
def test_a_bool_packs_as_the_int_it_is(t):
    """A Python bool has a fast path of its own; it writes what the int, numpy's bool and
    ctypes' bool (the general converters) write."""
    sig = kernarg.Signature([t, "int"])
    for b in (True, False):
        want = bytes(sig.pack((int(b), 7)))
        assert want[:1] == (b"\x01" if b else b"\x00") or t in ("__half", "__nv_bfloat16",
                                                              "float", "double")
        for same in (b, np.bool_(b), ctypes.c_bool(b)):
            assert bytes(sig.pack((same, 7))) == want, (t, same)


def test_integer_numbers_of_0_and_1_pack_for_a_bool_parameter_and_no_others():
    """numpy's integers and bool, ctypes' integers and bool, and int subclasses (IntEnum,
    IntFlag) give a bool parameter 0 or 1 (Signature.pack reads them in place, as for an
    integer parameter); any other value is refused as an int of that value is."""
    class Flag(IntFlag):
        OFF = 0
        ON = 1
        TWO = 2

    class Level(IntEnum):
        LOW = 0
        HIGH = 1
        MINUS = -1

    kinds = [np.bool_, ctypes.c_bool, np.int8, np.uint8, np.int16, np.uint16, np.int32,
             np.uint32, np.int64, np.uint64, ctypes.c_byte, ctypes.c_ubyte, ctypes.c_short,
             ctypes.c_ushort, ctypes.c_int, ctypes.c_uint, ctypes.c_longlong,
             ctypes.c_ulonglong, Flag, Level]
    sig = kernarg.Signature("bool a, int n, bool b")
    for kind in kinds:
        for a, b in ((0, 1), (1, 0), (1, 1)):
            assert bytes(sig.pack((kind(a), 7, kind(b)))) == struct.pack("<?3xi?", a, 7, b), kind
    for bad in (np.int8(2), np.uint64(2**63), np.int64(-1), ctypes.c_int(-1),
                ctypes.c_ubyte(255), ctypes.c_ulonglong(2**64 - 1), Flag.TWO, Level.MINUS):
        value = int(bad.value if isinstance(bad, ctypes._SimpleCData) else bad)
        refusal = rf"parameter 2 \('b'\) is bool: {value} is outside 0 \.\. 1$"
        with pytest.raises(OverflowError, match=refusal):
            sig.pack((True, 7, bad))
        with pytest.raises(OverflowError, match=refusal):
            sig.pack((True, 7, value))


def test_ints_past_2_60_pack_for_64_bit_parameters_to_their_ends_and_no_further():
    """Ints the fast path's small-int read does not take (|v| >= 2**60: random seeds, bit
    masks), and numpy's and ctypes' unsigned 64-bit numbers of 2**63 or more, pack to the
    ends of a long long's and an unsigned long long's range; past them they are refused, as
    before, and a PTX parameter known only by its width takes either sign's range."""
    sig = kernarg.Signature("long long a, unsigned long long b")
    for a, b in ((-2**63, 2**60), (-2**60 - 1, 2**63), (-2**60, 2**63 + 5), (2**60, 2**64 - 1),
                 (2**62 + 3, 2**61 + 1), (2**63 - 1, 0)):
        assert bytes(sig.pack((a, b))) == struct.pack("<qQ", a, b), (a, b)
    for big in (np.uint64(2**63), np.uint64(2**64 - 1), ctypes.c_ulonglong(2**63 + 5)):
        value = big.value if isinstance(big, ctypes.c_ulonglong) else int(big)
        assert bytes(sig.pack((1, big))) == struct.pack("<qQ", 1, value), big
        with pytest.raises(OverflowError, match=rf"parameter 0 \('a'\) is long long: {value} "):
            sig.pack((big, 0))
    for bad in (2**63, -2**63 - 1, 2**64, -2**80):
        with pytest.raises(OverflowError, match=rf"parameter 0 \('a'\) is long long: {bad} "):
            sig.pack((bad, 0))
    for bad in (-1, -2**62, 2**64, 2**80, np.int64(-2**62), ctypes.c_longlong(-2**62)):
        value = bad.value if isinstance(bad, ctypes.c_longlong) else int(bad)
        with pytest.raises(OverflowError,
                           match=rf"parameter 1 \('b'\) is unsigned long long: {value} "):
            sig.pack((0, bad))
    ptx = (".version 8.0\n.target sm_80\n.address_size 64\n"
           ".visible .entry k(.param .u64 k_param_0, .param .s64 k_param_1)\n{ ret; }\n")
    widths = kernarg.Signature.from_ptx(ptx, "k")
    assert widths.types == (".u64", ".s64")
    for u, s in ((-2**62, 2**63 + 5), (2**64 - 1, -2**63), (2**61, 2**60)):
        assert bytes(widths.pack((u, s))) == struct.pack("<QQ", u % 2**64, s % 2**64), (u, s)
    with pytest.raises(OverflowError, match=r"\(\.s64\): 18446744073709551616 is outside -9"):
        widths.pack((0, 2**64))


@pytest.mark.parametrize("t", ["bool", "unsigned char", "signed char", "short"])
def test_ints_out_of_a_small_types_range_are_refused(t):
    sig = kernarg.Signature([t])
    lo, hi = {"bool": (0, 1), "unsigned char": (0, 255), "signed char": (-128, 127),
              "short": (-2**15, 2**15 - 1)}[t]
    assert bytes(sig.pack((hi,))) == hi.to_bytes(sig.sizes[0], "little", signed=lo < 0)
    assert bytes(sig.pack((lo,))) == lo.to_bytes(sig.sizes[0], "little", signed=lo < 0)
    for bad in (lo - 1, hi + 1):
        with pytest.raises(OverflowError, match=f"parameter 0 is {t}: {bad} is outside"):
            sig.pack((bad,))


def test_a_signature_is_made_once():
    """__init__ again would free the layout that packs read while they run (another thread's,
    or this one's, inside a value's __index__): it is refused, and the signature is as made."""
    sig = kernarg.Signature("int a, double b, int c")
    with pytest.raises(TypeError, match="already made"):
        sig.__init__("char a")
    assert sig.types == ("int", "double", "int")

    class Reinit:
        def __index__(self):
            sig.__init__("char a")
            return 3

    with pytest.raises(TypeError, match=r"parameter 0 \('a'\) is int: expected an int, got "
                                        r"Reinit \(its __index__ raised TypeError: "
                                        r"Signature.__init__: this signature is already made"):
        sig.pack((Reinit(), 2.0, 1))
    assert bytes(sig.pack((3, 2.0, 1))) == struct.pack("<i4xdi", 3, 2.0, 1)


def test_a_signature_never_initialised_has_no_parameters():
    sig = kernarg.Signature.__new__(kernarg.Signature)
    assert (sig.types, sig.names, sig.offsets, sig.nbytes) == ((), (), (), 0)
    assert repr(sig) == "kernarg.Signature('')"
    assert bytes(sig.pack(())) == b""
    with pytest.raises(TypeError, match="takes 0 arguments"):
        sig.pack((1,))
    sig.__init__("int a")       # made now, once
    assert bytes(sig.pack((5,))) == struct.pack("<i", 5)


_CTYPES_SCALARS = [
    ("bool", ctypes.c_bool(True)), ("char", ctypes.c_char(b"z")),
    ("signed char", ctypes.c_byte(-5)), ("unsigned char", ctypes.c_ubyte(200)),
    ("short", ctypes.c_short(-2)), ("unsigned short", ctypes.c_ushort(65535)),
    ("int", ctypes.c_int(-9)), ("unsigned int", ctypes.c_uint(9)),
    ("long long", ctypes.c_longlong(-2**40)), ("unsigned long long", ctypes.c_ulonglong(2**64 - 1)),
    ("int64_t", ctypes.c_long(-11)), ("size_t", ctypes.c_size_t(12345)),
    ("float", ctypes.c_float(0.5)), ("double", ctypes.c_double(-0.25)),
    ("unsigned long long", ctypes.c_void_p(0xDEAD0000)),
]


@pytest.mark.parametrize("decl, value", _CTYPES_SCALARS, ids=lambda v: getattr(v, "_type_", v))
def test_ctypes_scalars_pack_as_the_parameter_they_match(decl, value):
    # ctypes scalars are what cuda-python's examples pass; a declared parameter of the same C
    # type must take them, with the bytes untyped packing gives them.
    sig = kernarg.Signature(f"char pad, {decl} v")
    assert bytes(sig.pack((b"\x01"[0], value))) == bytes(kernarg.pack((np.int8(1), value)))


def test_ctypes_scalars_convert_like_the_python_values_they_hold():
    sig = kernarg.Signature("int a, float b, double c, __half d, unsigned char e, bool f, "
                            "float2 g, unsigned long long h")
    ct = (ctypes.c_short(-3), ctypes.c_double(0.1), ctypes.c_int(7), ctypes.c_float(1.5),
          ctypes.c_char(b"a"), ctypes.c_int(1), (ctypes.c_float(1), ctypes.c_int(2)),
          ctypes.c_void_p(None))
    py = (-3, 0.1, 7, 1.5, 97, 1, (1.0, 2), 0)
    assert bytes(sig.pack(ct)) == bytes(sig.pack(py))
    for decl, value, exc, fragment in [
            ("int n", ctypes.c_double(2.0), TypeError, r"'n'\) is int: expected an int, got "
                                                        "c_double"),
            ("unsigned char u", ctypes.c_int(300), OverflowError, r"'u'.*300 is outside 0 .. 255"),
            ("float f", ctypes.c_char_p(b"x"), TypeError, "'f'.*real number, got c_char_p"),
            ("float f", ctypes.c_void_p(8), TypeError, "'f'.*real number, got c_void_p"),
            ("int n", ctypes.c_wchar("x"), TypeError, "'n'.*expected an int, got c_wchar"),
            ("double d", ctypes.c_longdouble(1), TypeError, "no long double")]:
        with pytest.raises(exc, match=fragment):
            kernarg.Signature(decl).pack((value,))


# ctypes' own number types, which Signature.pack reads as numbers in place, with values at
# and past each parameter type's range, and those a float rounds.
_CTYPES_NUMBERS = {
    ctypes.c_bool: (False, True), ctypes.c_byte: (-128, -1, 0, 127),
    ctypes.c_ubyte: (0, 1, 200, 255), ctypes.c_short: (-32768, -129, 256, 32767),
    ctypes.c_ushort: (0, 255, 256, 65535), ctypes.c_int: (-2**31, -32769, 65536, 2**31 - 1),
    ctypes.c_uint: (0, 65535, 2**31, 2**32 - 1),
    ctypes.c_longlong: (-2**63, -2**31 - 1, 2**32, 2**53 + 1, 2**60 + 2**36 + 1, 2**63 - 1),
    ctypes.c_ulonglong: (0, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64 - 1),
    ctypes.c_float: (-0.0, 0.1, 65504.0, 65520.0, 3.0e38, float("inf"), float("nan")),
    ctypes.c_double: (-1.5, 0.1, 2.0**-149, 3.5e38, 1e300, float("-inf"), float("nan")),
}
_NUMBER_PARAMS = ["bool", "signed char", "unsigned char", "short", "unsigned short", "int",
                  "unsigned int", "long long", "unsigned long long", "__half", "__nv_bfloat16",
                  "float", "double"]


def _packed_or_refused(sig, value):
    try:
        return bytes(sig.pack((value,)))
    except (TypeError, OverflowError) as exc:
        return type(exc), str(exc).replace(type(value).__name__, "T")


@pytest.mark.parametrize("t", list(_CTYPES_NUMBERS), ids=lambda t: t.__name__)
def test_ctypes_numbers_pack_as_the_values_they_hold(t):
    """Signature.pack reads ctypes' own number types in place (the fast path), and a subclass
    that converts itself no differently too (the test after next). For every numeric parameter
    type both give what the Python value the object holds gives, or the same refusal: an
    integer past 2**53 for a float rounds once, to the format, a c_bool over memory ctypes did
    not write is true for any byte but 0."""
    sub = type("Sub", (t,), {})
    for decl in _NUMBER_PARAMS:
        sig = kernarg.Signature(f"{decl} v")
        for number in _CTYPES_NUMBERS[t]:
            got = _packed_or_refused(sig, t(number))
            assert _packed_or_refused(sig, sub(number)) == got, (decl, number)
            held = _packed_or_refused(sig, t(number).value)
            assert got == held if isinstance(held, bytes) else got[0] is held[0], (decl, number)
    float_sig = kernarg.Signature("float f, __half h, double d, long long n")
    big = 2**60 + 2**36 + 1        # a float rounds it up, once; through a double first, down
    for value in (ctypes.c_longlong(big), ctypes.c_ulonglong(big)):
        assert bytes(float_sig.pack((value, value, value, 0))) == \
            bytes(float_sig.pack((big, big, big, 0)))
    odd = ctypes.c_bool.from_buffer(bytearray(b"\x02"))
    assert odd.value is True
    assert bytes(kernarg.Signature("int a, float b").pack((odd, odd))) == \
        struct.pack("<if", 1, 1.0)


def test_ctypes_number_subclasses_keep_their_own_conversions():
    # A subclass's __index__ or __float__, which the general converters honour (as they do any
    # Python object's), still decides: the fast path does not read such a subclass in place.
    class Indexed(ctypes.c_int):
        def __index__(self):
            return 42

    class Floated(ctypes.c_double):
        def __float__(self):
            return 2.5

    sig = kernarg.Signature("int n, double d, float f")
    assert bytes(sig.pack((Indexed(7), Floated(1.0), Floated(1.0)))) == \
        struct.pack("<i4xdf", 42, 2.5, 2.5)
    assert bytes(sig.pack((ctypes.c_int(7), ctypes.c_double(1.0), ctypes.c_float(1.0)))) == \
        struct.pack("<i4xdf", 7, 1.0, 1.0)


def test_ctypes_number_subclasses_are_read_in_place_unless_they_convert_themselves():
    """A subclass of one of ctypes' own number types is read in place, as its base is, unless
    a class in its MRO but ctypes' own defines __index__, __float__ or value (the general
    converters honour each), or it gives itself another _type_: then the general converters
    take it, and what they honour decides."""
    from kernarg._handler import _number_kind

    class Plain(ctypes.c_double):
        pass

    class Deeper(Plain):
        pass

    class Unsigned(ctypes.c_uint16):
        pass

    class Indexed(ctypes.c_int):
        def __index__(self):
            return 42

    class Valued(ctypes.c_double):
        value = property(lambda self: 2.5)

    class Converts:
        def __float__(self):
            return 9.0

    class Mixed(ctypes.c_double, Converts):     # Converts comes after ctypes' classes
        pass

    class Retyped(ctypes.c_double):
        _type_ = "i"                            # a C int, for all its base

    assert _number_kind(ctypes.c_double(1)) == _number_kind(Plain(1)) == "f"
    assert _number_kind(Deeper(1)) == "f" and _number_kind(Unsigned(1)) == "u"
    for value in (Indexed(7), Valued(1.0), Mixed(1.0), Retyped(3)):
        assert _number_kind(value) is None, type(value)
    sig = kernarg.Signature("double d, int n, float f, unsigned short u")
    assert bytes(sig.pack((Plain(1.5), Indexed(7), Deeper(0.25), Unsigned(65535)))) == \
        struct.pack("<difH", 1.5, 42, 0.25, 65535)
    assert bytes(sig.pack((Valued(1.0), Retyped(3), Mixed(1.0), Unsigned(7)))) == \
        struct.pack("<difH", 2.5, 3, 9.0, 7)
    # Out of the parameter's range, as the value it holds would be.
    with pytest.raises(OverflowError, match=r"parameter 3 \('u'\) is unsigned short: -1 is "):
        sig.pack((Plain(0), Indexed(0), Plain(0), type("Signed", (ctypes.c_int,), {})(-1)))


def test_ctypes_addresses_for_pointer_parameters():
    # (A pointer into memory ctypes allocated, ctypes.pointer(ctypes.c_int()), is refused:
    # test_handler's test_ctypes_pointers_into_python_memory_are_refused.)
    sig = kernarg.Signature("float* a, const void* b, int* c")
    raw = bytes(sig.pack((ctypes.c_void_p(0x1000), ctypes.c_void_p(None),
                          ctypes.cast(0x3000, ctypes.POINTER(ctypes.c_int)))))
    assert struct.unpack("<3Q", raw) == (0x1000, 0, 0x3000)
    ptx = compile_ptx('extern "C" __global__ void k(int n, float* p) {}')
    ptx_sig = kernarg.Signature.from_ptx(ptx, "k")
    assert bytes(ptx_sig.pack((ctypes.c_int(-1), ctypes.c_void_p(0x2000)))) == \
        struct.pack("<i4xQ", -1, 0x2000)
    with pytest.raises(TypeError, match=r"parameter 0 \('a'\) is a pointer .*got c_int"):
        sig.pack((ctypes.c_int(5), None, None))


def test_numpy_integer_addresses_for_pointer_parameters():
    # An item of an array of addresses is a numpy integer: a pointer parameter takes it as a
    # struct's pointer field does (before, the parameter refused it and the field took it).
    addresses = np.array([0x1000, 2**64 - 1], np.uint64)
    sig = kernarg.Signature("float* a, const void* b, int** c, int n")
    raw = bytes(sig.pack((addresses[0], addresses[1], np.int32(0x30), 4)))
    assert struct.unpack("<3Qi", raw) == (0x1000, 2**64 - 1, 0x30, 4)
    field = kernarg.Signature.from_source(
        'struct P { float* a; };\nextern "C" __global__ void k(P p) {}', "k")
    assert bytes(field.pack(((addresses[0],),))) == bytes(sig.pack((addresses[0], 0, 0, 0)))[:8]
    for holder in (sig, field):
        args = ((np.int64(-1),),) if holder is field else (np.int64(-1), None, None, 0)
        with pytest.raises(OverflowError, match=r"is a pointer: -1 is outside 0 \.\. 2\*\*64-1"):
            holder.pack(args)
    # numpy's bool and floats are not addresses.
    for value in (np.True_, np.float64(4096)):
        with pytest.raises(TypeError, match=r"parameter 0 \('a'\) is a pointer \(float\*\): "
                                            r"expected an array, buffer or address"):
            sig.pack((value, None, None, 0))


def test_structs_from_numpy_ctypes_dicts_and_tuples():
    sig = kernarg.Signature([FLAT, CPair, FLAT, CPair])
    rec = np.zeros((), dtype=FLAT)[()]    # zeroed, so its internal padding is defined
    rec["a"], rec["b"], rec["c"] = 1, 2.5, 3
    block = sig.pack((rec, CPair(b"x", 1.5, 7), {"a": 1, "b": 2.5, "c": 3}, (b"x", 1.5, 7)))
    raw = bytes(block)
    o = sig.offsets
    assert raw[o[0]:o[0] + 12] == raw[o[2]:o[2] + 12] == rec.tobytes()
    assert raw[o[1]:o[1] + 24] == raw[o[3]:o[3] + 24] == bytes(CPair(b"x", 1.5, 7))


def test_ctypes_structs_unions_and_arrays_pack_as_their_bytes_on_both_paths():
    """Signature.pack copies an instance of a struct parameter's own ctypes type in place (the
    fast path, with no section on a free-threaded build); a subclass's instance goes through
    the general path. Both give the value's bytes, for a struct, a union and an array, in a
    block past its first area too; a struct holding a pointer into memory ctypes allocated
    is still refused, as a struct."""
    class U(ctypes.Union):
        _fields_ = [("i", ctypes.c_int32), ("f", ctypes.c_float), ("b", ctypes.c_uint8 * 8)]

    arr = ctypes.c_int16 * 5
    types = [CPair, U, arr]
    values = [CPair(b"x", 1.5, 7), U(b=(ctypes.c_uint8 * 8)(*range(1, 9))), arr(*range(-2, 3))]
    subs = [type("Sub", (t,), {}) for t in types]
    sig = kernarg.Signature(["char"] + types * 12)
    args = (1, *values * 12)
    raw = bytes(sig.pack(args))
    o = sig.offsets
    for k, value in enumerate(values * 12):
        assert raw[o[k + 1]:o[k + 1] + ctypes.sizeof(value)] == bytes(value), k
    for t, sub, value in zip(types, subs, values, strict=True):
        one = kernarg.Signature(["char", t])
        assert bytes(one.pack((1, sub.from_buffer_copy(bytes(value))))) == \
            bytes(one.pack((1, value)))

    class Held(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p), ("n", ctypes.c_int)]

    target = ctypes.c_int(5)
    held = Held(ctypes.cast(ctypes.pointer(target), ctypes.c_void_p), 3)
    with pytest.raises(TypeError, match=r"parameter 0: field p is a ctypes pointer to the "):
        kernarg.Signature([Held]).pack((held,))
    assert bytes(kernarg.Signature([Held]).pack((Held(0x1000, 3),)))[:12] == \
        struct.pack("<Qi", 0x1000, 3)


def test_numpy_structured_scalars_pack_as_their_bytes_on_both_paths():
    """Signature.pack copies a numpy.void of a struct parameter's own dtype (the very dtype
    object) from where its data pointer points (the fast path, with no section on a
    free-threaded build); one of an equal dtype that is another object, a numpy.record, and
    every value where the numpy.void layout is not confirmed go through the general path. All
    give the value's bytes: a view into an array and a copy of it, of a struct, a
    union (overlapping fields) and a struct holding a subarray and a nested struct, in a block
    past its first area too."""
    from kernarg import _interop

    assert _interop._npvoid_data_offset() > 0       # the layout this numpy has
    pair = np.dtype([("a", np.int8), ("b", np.float64)], align=True)
    union = np.dtype({"names": ["i", "f"], "formats": [np.int32, np.float32],
                      "offsets": [0, 0], "itemsize": 4})
    nested = np.dtype([("v", np.float32, (3,)), ("p", pair), ("c", np.uint16)], align=True)
    dtypes = [pair, union, nested]
    arrays = [np.zeros(3, dt) for dt in dtypes]
    arrays[0][1] = (-3, 2.5)
    arrays[1][1]["i"] = -123456
    arrays[2][1] = ([1.5, -2.0, 4.0], (7, -0.25), 65535)
    views = [a[1] for a in arrays]
    owned = [v.copy() for v in views]
    for v, o, dt in zip(views, owned, dtypes, strict=True):
        assert type(v) is type(o) is np.void and v.dtype is o.dtype is dt
    for v, o, a in zip(views, owned, arrays, strict=True):
        assert v.base is a and o.base is not a      # a view into the array; a copy
    values = [x for v, c in zip(views, owned, strict=True) for x in (v, c)]
    sig = kernarg.Signature(["char"] + [dt for dt in dtypes for _ in range(2)] * 12)
    raw = bytes(sig.pack((1, *values * 12)))
    o = sig.offsets
    assert len(raw) > 1024
    for k, value in enumerate(values * 12):
        assert raw[o[k + 1]:o[k + 1] + value.dtype.itemsize] == value.tobytes(), k
    # A write through the array shows in the next block: the view's bytes are the array's.
    arrays[0][1]["a"] = 9
    assert bytes(kernarg.Signature(["char", pair]).pack((1, views[0])))[8:] == \
        arrays[0][1].tobytes()

    for dt, value in zip(dtypes, views, strict=True):
        one = kernarg.Signature(["char", dt])
        expected = bytes(one.pack((1, value)))
        assert expected[one.offsets[1]:] == value.tobytes()
        twin = pickle.loads(pickle.dumps(dt))
        assert twin == dt and twin is not dt
        assert bytes(one.pack((1, np.frombuffer(value.tobytes(), twin)[0]))) == expected
        record = np.frombuffer(value.tobytes(), np.dtype((np.record, dt)))[0]
        assert type(record) is np.record
        assert bytes(one.pack((1, record))) == expected
    _interop._use_layout_fallbacks(True)
    try:
        assert _interop._npvoid_data_offset() == -1
        fallback = kernarg.Signature(["char"] + [dt for dt in dtypes for _ in range(2)] * 12)
    finally:
        _interop._use_layout_fallbacks(False)
    assert bytes(fallback.pack((1, *values * 12))) == bytes(sig.pack((1, *values * 12)))
    # Another struct's scalar of the same size is refused, as before.
    other = np.zeros(1, [("x", np.float64), ("y", np.float64)])[0]
    with pytest.raises(TypeError, match=r"parameter 1 is a struct"):
        kernarg.Signature(["char", pair]).pack((1, other))


def test_pointers_from_every_pointer_kind():
    from cuda.core import Buffer

    sig = kernarg.Signature("const float* a, float* b, void* c, float* d, const void* e")
    prod = DLPackProducer(0x3000, dtype=(2, 32, 1))
    block = sig.pack((CAIObject(cai(0x1000, typestr="<f4", readonly=True)),
                      Buffer.from_handle(0x2000, 16), prod, 0x4000, None))
    assert struct.unpack("<5Q", bytes(block)) == (0x1000, 0x2000, 0x3000, 0x4000, 0)
    del block
    assert prod.deleted == 1


_ADDRESSES = st.one_of(st.integers(0, 2**30 - 1), st.integers(2**30, 2**60 - 1),
                       st.integers(2**60, 2**64 - 1), st.integers(-2**64, -1))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["float*", "void*", "int", "long long"]), _ADDRESSES),
                min_size=1, max_size=20))
def test_int_addresses_in_runs_with_other_ints(params):
    # Ints for pointer parameters go through the int-run fast path with the other ints
    # (non-negative, below 2**60) or the general converter: the bytes and the errors must not
    # depend on which. PTX's .u64 (pointer or integer) is tested the same way.
    for ptx in (False, True):
        decl = ", ".join(("unsigned long long" if ptx and t.endswith("*") else t) + f" x{i}"
                         for i, (t, _) in enumerate(params))
        values = tuple(v if t.endswith("*") else (v % 2**31 if t == "int" else v % 2**63)
                       for t, v in params)
        sig = kernarg.Signature(decl)
        if ptx:     # the same layout, each 8-byte slot typed as PTX's .u64
            sig = kernarg.Signature.from_ptx(_ptx_entry([t.endswith("*") or t == "long long"
                                                         for t, _ in params]), "k")
        low = -2**63 if ptx else 0      # .u64 takes either sign's range; a C pointer does not
        bad = [i for i, (t, v) in enumerate(params) if t.endswith("*") and not low <= v < 2**64]
        if bad:
            with pytest.raises(OverflowError, match=f"parameter {bad[0]} "):
                sig.pack(values)
            continue
        fmt = "@" + "".join("Q" if t.endswith("*") or t == "long long" else "i"
                            for t, _ in params)
        expect = struct.pack(fmt, *[v % 2**64 if t.endswith("*") else v
                                    for (t, _), v in zip(params, values, strict=True)])
        got = bytes(sig.pack(values))
        assert len(got) == sig.nbytes and got == expect[:len(got)]


def _ptx_entry(wide):
    params = ",\n".join(f"    .param .{'u64' if w else 'u32'} k_param_{i}"
                         for i, w in enumerate(wide))
    return f""".version 8.0
.target sm_80
.address_size 64
.visible .entry k(
{params}
)
{{
    ret;
}}
"""


# ------------------------------------------------------------------------------------------
# Errors name the parameter


@pytest.mark.parametrize("decl, value, exc, fragment", [
    ("int n", 1.5, TypeError, r"parameter 0 \('n'\) is int: expected an int, got float"),
    ("int n", "3", TypeError, "'n'"),
    ("int n", 2**31, OverflowError, "'n'.*outside"),
    ("unsigned char u", -1, OverflowError, "'u'.*outside"),
    ("unsigned long long u", 2**64, OverflowError, "'u'"),
    ("long long q", -2**63 - 1, OverflowError, "'q'"),
    ("float f", "x", TypeError, "'f'.*real number"),
    ("float f", 1j, TypeError, "'f'"),
    ("double d", 10**400, OverflowError, "'d'"),
    ("float2 v", (1.0,), TypeError, "'v'.*2 elements"),
    ("float2 v", 3.0, TypeError, "'v'.*sequence"),
    ("float* p", 1.5, TypeError, "'p'.*is a pointer"),
    ("float* p", np.float32(1), TypeError, "'p'.*is a pointer"),
    ("float* p", -1, OverflowError, "'p'"),
    ("float* p", CAIObject(cai(0x10, typestr="<i4")), TypeError, "'p'.*element type is i4"),
    ("double* p", CAIObject(cai(0x10, typestr="<f4")), TypeError, "'p'"),
    ("float* p", CAIObject(cai(0x10, typestr="<f4", readonly=True)), ValueError,
     "'p'.*read-only"),
    ("float* p", object(), TypeError, "'p'.*is a pointer"),
    # The array consumers' own errors, which know only the index, get the parameter's name.
    ("float* p", CAIObject(cai(0x10, stream=0)), ValueError,
     r"^parameter 0 \('p'\): argument 0 \(.*CAIObject\): .*'stream'\] is 0"),
    ("float* p", CAIObject({"shape": (4,), "typestr": "<f4", "version": 3}), TypeError,
     r"^parameter 0 \('p'\): argument 0 .*'data'"),
])
def test_errors_name_the_parameter(decl, value, exc, fragment):
    with pytest.raises(exc, match=fragment):
        kernarg.Signature(decl).pack((value,))


DL_SMALL_FLOATS = {7: "float8_e3m4", 8: "float8_e4m3", 9: "float8_e4m3b11fnuz",
                   10: "float8_e4m3fn", 11: "float8_e4m3fnuz", 12: "float8_e5m2",
                   13: "float8_e5m2fnuz", 14: "float8_e8m0fnu", 15: "float6_e2m3fn",
                   16: "float6_e3m2fn", 17: "float4_e2m1fn"}
CUDA_SMALL_FLOATS = {10: "fp8_e4m3", 12: "fp8_e5m2", 14: "fp8_e8m0", 15: "fp6_e2m3",
                     16: "fp6_e3m2", 17: "fp4_e2m1"}


@pytest.mark.parametrize("code", sorted(DL_SMALL_FLOATS))
def test_small_float_arrays_match_only_their_cuda_type(code):
    """DLPack 1.1's 8-, 6- and 4-bit float codes (7-17) are element types of their own: each
    matches the cuda_fp8.h / cuda_fp6.h / cuda_fp4.h type of its format (x2 and x4 too), and
    no other pointee; they used to pass unchecked, so an fp8 tensor reached a float* kernel."""
    name = DL_SMALL_FLOATS[code]
    bits = 8 if code <= 14 else 6 if code <= 16 else 4

    def array():
        return DLPackProducer(0x100, dtype=(code, bits, 1))

    kernarg.Signature("void* p, Opaque* q").pack((array(), array()))
    for decl in ("float* p", "unsigned char* p", "char* p", "__half* p"):
        with pytest.raises(TypeError, match=rf"\) is {re.escape(decl[:-2])} but the array's "
                                            rf"element type is {name}$"):
            kernarg.Signature(decl).pack((array(),))
    for other, cuda in CUDA_SMALL_FLOATS.items():
        for lanes in ("", "x2", "x4"):
            sig = kernarg.Signature(f"__nv_{cuda.replace('_', lanes + '_', 1)}* p")
            if other == code:
                assert bytes(sig.pack((array(),))) == struct.pack("<Q", 0x100)
            else:
                with pytest.raises(TypeError, match=f"element type is {name}$"):
                    sig.pack((array(),))


SMALL_FLOAT_TYPES = [f"__nv_{bits}{lanes}_{fmt}"
                     for bits, fmt in (("fp8", "e4m3"), ("fp8", "e5m2"), ("fp8", "e8m0"),
                                       ("fp6", "e2m3"), ("fp6", "e3m2"), ("fp4", "e2m1"))
                     for lanes in ("", "x2", "x4")]
SMALL_FLOAT_ML = {"fp8_e4m3": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2",
                  "fp8_e8m0": "float8_e8m0fnu", "fp6_e2m3": "float6_e2m3fn",
                  "fp6_e3m2": "float6_e3m2fn", "fp4_e2m1": "float4_e2m1fn"}


def test_small_floats_by_value_are_laid_out_as_nvrtc_lays_them_out():
    # fp4x2 is one byte (two nibbles), fp4x4 two; the others a byte a lane; each aligned to its
    # size. cuda_fp6.h and cuda_fp4.h came with CUDA 12.8.
    types = [t for t in SMALL_FLOAT_TYPES
             if "fp8" in t or nvrtc_version() >= (12, 8)]
    decls = {f"k{i}": ["char", t, "char", t + "*"] for i, t in enumerate(types)}
    decls["all"] = [u for t in types for u in ("char", t)]
    expected = kernels_layout(decls, prelude="#include <cuda_fp8.h>\n" + (
        "#include <cuda_fp6.h>\n#include <cuda_fp4.h>" if nvrtc_version() >= (12, 8) else ""))
    for name, decl in decls.items():
        sig = kernarg.Signature(decl)
        assert (sig.offsets, sig.sizes, sig.nbytes) == expected[name], decl
    assert kernarg.Signature("__nv_fp8x4_e4m3 v").types == ("__nv_fp8x4_e4m3",)


@pytest.mark.parametrize("fmt", sorted(SMALL_FLOAT_ML))
def test_small_float_values_are_the_codes_ml_dtypes_gives(fmt):
    # Every code of the format: a value exactly the format's packs to that code, and the
    # format's own ml_dtypes scalar to its bits, whatever they are (NaNs too).
    t = getattr(ml_dtypes, SMALL_FLOAT_ML[fmt], None)
    if t is None:       # ml_dtypes 0.5 added the fp6, fp4 and e8m0 formats
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {SMALL_FLOAT_ML[fmt]}")
    sig = kernarg.Signature(f"__nv_{fmt} v")
    width = 4 if fmt.startswith("fp4") else 6 if fmt.startswith("fp6") else 8
    for code in range(1 << width):
        scalar = np.array([code], np.uint8).view(t)[0]
        assert bytes(sig.pack((scalar,))) == bytes([code])
        value = float(scalar)
        if math.isnan(value):
            assert math.isnan(float(np.frombuffer(bytes(sig.pack((value,))), t)[0]))
        else:
            assert bytes(sig.pack((value,))) == bytes([code]), (code, value)
            assert bytes(sig.pack((np.float64(value),))) == bytes([code])


def _small_float_headers(fmt):
    if not fmt.startswith("fp8") and nvrtc_version() < (12, 8):
        pytest.skip("cuda_fp6.h and cuda_fp4.h came with CUDA 12.8")
    return "#include <cuda_fp8.h>\n" + (
        "#include <cuda_fp6.h>\n#include <cuda_fp4.h>\n" if nvrtc_version() >= (12, 8) else "")


def _bits_of(t, code, cast="unsigned char"):
    # cuda_fp8/fp6/fp4's float constructors are not constexpr: a constant has them by its bits.
    return f"__builtin_bit_cast({t}, ({cast}){code:#x})"


@pytest.mark.parametrize("fmt", sorted(SMALL_FLOAT_ML))
def test_small_float_defaults_come_back_as_their_values_and_pack_to_their_codes(fmt):
    # Every code of the format as a default the compiler evaluates: each comes back as the
    # value ml_dtypes gives that code, and packs to that very code. The NaNs other than the
    # one kernarg writes for NaN could not come back so: they are left to the next test.
    t = getattr(ml_dtypes, SMALL_FLOAT_ML[fmt], None)
    if t is None:       # ml_dtypes 0.5 added the fp6, fp4 and e8m0 formats
        pytest.skip(f"ml_dtypes {ml_dtypes.__version__} has no {SMALL_FLOAT_ML[fmt]}")
    headers = _small_float_headers(fmt)
    width = 4 if fmt.startswith("fp4") else 6 if fmt.startswith("fp6") else 8
    one = kernarg.Signature(f"__nv_{fmt} v")
    try:
        nan_code = bytes(one.pack((math.nan,)))[0]
    except ValueError:
        nan_code = None                                 # fp6 and fp4 have no NaN
    values = {code: float(np.array([code], np.uint8).view(t)[0]) for code in range(1 << width)}
    codes = [c for c, v in values.items() if not math.isnan(v) or c == nan_code]
    assert len(codes) >= (1 << width) - 5               # e5m2 has six NaNs, e4m3 two
    params = ", ".join(f"__nv_{fmt} d{c} = {_bits_of(f'__nv_{fmt}', c)}" for c in codes)
    sig = kernarg.Signature.from_source(f'{headers}extern "C" __global__ void k(int n, '
                                        f"{params}) {{}}", "k")
    got = sig.defaults
    assert sorted(got) == list(range(1, len(codes) + 1))
    for i, code in enumerate(codes, 1):
        want = values[code]
        if math.isnan(want):
            assert math.isnan(got[i])
        else:       # -0.0 too: its sign is its code's
            assert (got[i], math.copysign(1, got[i])) == (want, math.copysign(1, want)), code
    assert bytes(sig.pack((7,))) == bytes([7, 0, 0, 0, *codes])


def test_small_float_defaults_of_vectors_and_of_bits_kernarg_would_not_write_back():
    headers = _small_float_headers("fp4_e2m1")
    src = (f'{headers}extern "C" __global__ void k(int n, '
           f"__nv_fp8x2_e4m3 a = {_bits_of('__nv_fp8x2_e4m3', 0x3840, 'unsigned short')}, "
           f"__nv_fp4x4_e2m1 b = {_bits_of('__nv_fp4x4_e2m1', 0x8321, 'unsigned short')}, "
           f"__nv_fp6x2_e3m2 c = {_bits_of('__nv_fp6x2_e3m2', 0x0C22, 'unsigned short')}, "
           "__nv_fp8_e5m2 d = {}) {}")
    sig = kernarg.Signature.from_source(src, "k")
    # Lanes from the lowest bits up, as the packer writes them (the values are ml_dtypes'
    # for those codes); -0.0 keeps its sign.
    assert sig.defaults == {1: (2.0, 1.0), 2: (0.5, 1.0, 1.5, -0.0), 3: (-0.125, 1.0),
                            4: 0.0}
    assert math.copysign(1, sig.defaults[2][3]) == -1
    assert bytes(sig.pack((7,))) == bytes([7, 0, 0, 0, 0x40, 0x38, 0x21, 0x83, 0x22, 0x0C, 0])
    # NaNs other than kernarg's (e5m2's 0x7F, e4m3's negative one), and fp6 bits past the
    # format's six: a value would not pack back to them, so they are not defaults kernarg
    # passes. It says why.
    for bad in (_bits_of("__nv_fp8_e5m2", 0x7F), _bits_of("__nv_fp8_e4m3", 0xFF),
                _bits_of("__nv_fp6_e2m3", 0xC1)):
        ty = bad.split("(")[1].split(",")[0]
        src = (f'{headers}extern "C" __global__ void k(int n, {ty} a = {bad}, '
               "int b = 1 << 4) {}")
        sig = kernarg.Signature.from_source(src, "k")
        assert sig.defaults == {2: 16}
        with pytest.raises(TypeError, match=r"parameter 1 \('a'\) has the default argument "
                                            r".*which NVRTC evaluated to bytes kernarg does "
                                            r"not pass back exactly"):
            sig.pack((7,))
        assert bytes(sig.pack((7, 0.0))) == bytes(sig.pack((7, 0.0, 16)))


def test_small_floats_by_value_take_exact_values_and_refuse_the_rest():
    sig = kernarg.Signature("__nv_fp8_e4m3 a, __nv_fp8x2_e5m2 b, __nv_fp4x2_e2m1 c, "
                            "__nv_fp4x4_e2m1 d, __nv_fp8_e8m0 e, __nv_fp6x4_e3m2 f")
    assert sig.offsets == (0, 2, 4, 6, 8, 12)
    block = sig.pack((ml_dtypes.float8_e4m3fn(2.0), (1.0, -np.inf), (0.5, -6),
                      [1, 2, 3, -0.0], 2.0 ** -127, (1, 2.0, np.float32(3), 28)))
    # Lanes from the lowest bits up: x in the low byte (fp8x2), the low nibble (fp4x2).
    assert bytes(block) == bytes([0x40, 0, 0x3C, 0xFC, 0xF1, 0, 0x42, 0x85, 0x00, 0, 0, 0,
                                  0x0C, 0x10, 0x12, 0x1F])
    # An array of the format gives its lanes' bits.
    lanes = np.array([1, -2, 448, 0.015625], ml_dtypes.float8_e4m3fn)
    assert bytes(kernarg.Signature("__nv_fp8x4_e4m3 v").pack((lanes,))) == lanes.tobytes()
    # A lane's sign bit may be the word's top bit.
    assert bytes(kernarg.Signature("__nv_fp8x4_e4m3 v").pack(((1, 1, 1, -1),))) == \
        bytes([0x38, 0x38, 0x38, 0xB8])
    assert bytes(kernarg.Signature("__nv_fp4x4_e2m1 v").pack(((0, 0, 0, -6),))) == \
        bytes([0x00, 0xF0])
    # Another format's scalar passes by its value, where this format has it.
    one = kernarg.Signature("__nv_fp8_e4m3 a")
    assert bytes(one.pack((ml_dtypes.float8_e5m2(-0.5),))) == bytes([0xB0])
    assert bytes(one.pack((np.float16(448),))) == bytes([0x7E])
    assert bytes(one.pack((-0.0,))) == bytes([0x80])
    assert bytes(one.pack((math.nan,))) == bytes([0x7F])
    for value, why in [(448.5, "not one of the format's values"), (0.1, "not one of"),
                       (math.inf, "no infinity"), (10 ** 400, "no infinity"),
                       (ml_dtypes.float8_e5m2(57344), "not one of")]:
        with pytest.raises(ValueError, match=rf"parameter 0 \('a'\) is __nv_fp8_e4m3: .* "
                                             rf"cannot be passed exactly \(.*{why}.*"
                                             r"ml_dtypes\.float8_e4m3fn\(x\)"):
            one.pack((value,))
    with pytest.raises(ValueError, match="no negative values"):
        kernarg.Signature("__nv_fp8_e8m0 s").pack((-2.0,))
    with pytest.raises(ValueError, match="not one of"):
        kernarg.Signature("__nv_fp8_e8m0 s").pack((0.0,))       # e8m0 has no zero
    with pytest.raises(ValueError, match="no NaN"):
        kernarg.Signature("__nv_fp4_e2m1 s").pack((math.nan,))
    for value in ("1", b"\x01", 1j, None, object()):
        with pytest.raises(TypeError, match=r"is __nv_fp8_e4m3: expected a real number or an "
                                            r"ml_dtypes\.float8_e4m3fn, got"):
            one.pack((value,))
    with pytest.raises(TypeError, match=r"parameter 0 \('v'\) is __nv_fp8x2_e4m3: expected a "
                                        "sequence of 2 values, got float"):
        kernarg.Signature("__nv_fp8x2_e4m3 v").pack((1.0,))
    with pytest.raises(ValueError, match=r"parameter 0 \('v'\)\[1\] is __nv_fp8x2_e4m3"):
        kernarg.Signature("__nv_fp8x2_e4m3 v").pack(((1.0, 0.3),))
    # numpy dtypes of the formats name them too.
    assert kernarg.Signature([np.dtype(ml_dtypes.float8_e5m2), ml_dtypes.float8_e4m3fn]).types \
        == ("__nv_fp8_e5m2", "__nv_fp8_e4m3")
    if hasattr(ml_dtypes, "float4_e2m1fn"):     # ml_dtypes 0.5+
        assert kernarg.Signature([ml_dtypes.float4_e2m1fn]).types == ("__nv_fp4_e2m1",)


def test_ml_dtypes_scalars_pack_as_their_bits_for_their_own_format_and_bfloat16_as_its_value():
    """A scalar of a small float format's own ml_dtypes type gives a parameter of the format
    its bits, every one of them (NaNs too), among other parameters; an ml_dtypes.bfloat16
    gives any float parameter its value, as the Python float of it does, and a bfloat16
    parameter its bits where it is a number. (Signature.pack reads both in place.)"""
    formats = [("__nv_fp8_e4m3", "float8_e4m3fn", 8), ("__nv_fp8_e5m2", "float8_e5m2", 8),
               ("__nv_fp8_e8m0", "float8_e8m0fnu", 8), ("__nv_fp6_e2m3", "float6_e2m3fn", 6),
               ("__nv_fp6_e3m2", "float6_e3m2fn", 6), ("__nv_fp4_e2m1", "float4_e2m1fn", 4)]
    for cuda, ml_name, bits in formats:
        if not hasattr(ml_dtypes, ml_name):        # ml_dtypes 0.5 added fp6, fp4 and e8m0
            continue
        sig = kernarg.Signature(f"{cuda} a, int n, {cuda} b")
        codes = np.arange(2 ** bits, dtype=np.uint8)
        for code, value in zip(codes.tolist(), codes.view(getattr(ml_dtypes, ml_name)),
                               strict=True):
            assert bytes(sig.pack((value, 7, value))) == \
                struct.pack("<B3xiB", code, 7, code), (cuda, code)
    patterns = np.arange(2 ** 16, dtype=np.uint16)
    bf16s = patterns.view(ml_dtypes.bfloat16)
    own = kernarg.Signature("__nv_bfloat16 a, __nv_bfloat16 b")
    others = kernarg.Signature("float f, double d, __half h")
    for code, value in zip(patterns.tolist(), bf16s, strict=True):
        real = float(value)
        assert bytes(others.pack((value, value, value))) == \
            bytes(others.pack((real, real, real))), code
        packed = bytes(own.pack((value, real)))
        assert packed[:2] == packed[2:], code
        if real == real:
            assert packed[:2] == struct.pack("<H", code), code


def test_float_like_parameters_read_numbers_one_way():
    # Float parameters, fp8 lanes and struct fields read a value through one reader: ctypes
    # numbers by the value they hold, and no complex number, numpy's complex64 included (its
    # __float__ used to drop the imaginary part with only a warning).
    fp8 = kernarg.Signature("__nv_fp8_e4m3 s, __nv_fp8x2_e5m2 v")
    assert bytes(fp8.pack((ctypes.c_float(2.0), (ctypes.c_int(1), ctypes.c_double(-0.5)))))[:4] \
        == bytes([0x40, 0, 0x3C, 0xB8])
    for decl in ("float f", "__nv_fp8_e4m3 f", "double f"):
        with pytest.raises(TypeError, match=r"parameter 0 \('f'\) is .*: expected a real "
                                            r"number.*, got complex64$"):
            kernarg.Signature(decl).pack((np.complex64(1 + 2j),))


def test_small_float_struct_fields_take_exact_values():
    # A struct field of an ml_dtypes format is converted as a parameter of the format is; it
    # used to be "a field kernarg cannot convert a value to".
    dt = np.dtype([("s", ml_dtypes.float8_e4m3fn), ("b", ml_dtypes.bfloat16), ("n", np.int32),
                   ("q", ml_dtypes.float8_e5m2, (2,))], align=True)
    sig = kernarg.Signature([dt])
    ref = np.zeros((), dt)          # padding zeroed, as kernarg leaves it
    ref["s"], ref["b"], ref["n"], ref["q"] = 2.0, 1.5, 3, (1, -6)
    expected = ref.tobytes()
    assert bytes(sig.pack(({"s": 2.0, "b": 1.5, "n": 3, "q": (1, -6)},))) == expected
    assert bytes(sig.pack(((ml_dtypes.float8_e4m3fn(2), 1.5, 3, [1.0, -6.0]),))) == expected
    with pytest.raises(ValueError, match=r"parameter 0: field s is float8_e4m3fn: 0\.3 cannot "
                                         r"be passed exactly .* or declare it float$"):
        sig.pack(({"s": 0.3},))
    with pytest.raises(ValueError, match=r"parameter 0: field q\[1\] is float8_e5m2: 7\.5 "):
        sig.pack(({"q": (1, 7.5)},))


def test_from_source_types_small_floats_by_value():
    # They used to be the PTX's opaque byte, which took any one-byte scalar: an e5m2 scale
    # reached an e4m3 kernel as e4m3 bits.
    src = ('#include <cuda_fp8.h>\n'
           'extern "C" __global__ void k(__nv_fp8_e4m3 s, __nv_fp8x2_e4m3 v, float* out) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("__nv_fp8_e4m3", "__nv_fp8x2_e4m3", "float*")
    assert sig.offsets == (0, 2, 8)
    block = sig.pack((ml_dtypes.float8_e5m2(1.5), (0.25, 1), None))
    assert bytes(block)[:4] == bytes([0x3C, 0, 0x28, 0x38])


def test_pointer_to_pointer_takes_arrays_of_addresses():
    """`float** pp` points at pointers: an array of device addresses (uint64 or int64) is what
    it takes. Its elements used to be checked as float, refusing exactly those arrays."""
    for decl in ("float** pp", "const __nv_fp8_e4m3** pp", "Pair** pp"):
        sig = kernarg.Signature(decl)
        for typestr in ("<u8", "<i8", "<f4"):
            assert bytes(sig.pack((CAIObject(cai(0x10, typestr=typestr)),))) \
                == struct.pack("<Q", 0x10)


def test_void_typestr_matches_any_pointee_of_its_size():
    """A CUDA Array Interface typestr of kind V ("<V2") is an element numpy has no type for
    (bfloat16 and fp8 arrays export so): it matches a pointee of the same size, and only that."""
    v1, v2 = CAIObject(cai(0x10, typestr="|V1")), CAIObject(cai(0x10, typestr="<V2"))
    for decl in ("__nv_bfloat16* p", "__half* p", "short* p", "__half2* p"):
        assert bytes(kernarg.Signature(decl).pack((v2,))) == struct.pack("<Q", 0x10)
    for decl in ("__nv_fp8_e4m3* p", "__nv_fp8x4_e5m2* p", "char* p", "unsigned char* p"):
        assert bytes(kernarg.Signature(decl).pack((v1,))) == struct.pack("<Q", 0x10)
    # An x2 pointee takes arrays of single values (as float2* takes float32 arrays).
    for decl, array in (("float* p", v2), ("__nv_fp8x2_e4m3* p", v2), ("short* p", v1)):
        with pytest.raises(TypeError, match=rf"'p'\) is {re.escape(decl[:-2])} but the array's "
                                            r"element type is V\d \(numpy kind/size\)$"):
            kernarg.Signature(decl).pack((array,))


@pytest.mark.parametrize("typestr, what", [
    (">f4", "big-endian"), (">c8", "big-endian"), (">i8", "big-endian"),
    ("f4", "one no C pointee names"), ("<F4", "one no C pointee names"),
    ("<M8[ns]", "one no C pointee names"), ("|S4", "one no C pointee names"),
    ("|O8", "one no C pointee names"), ("<f 4", "one no C pointee names"),
])
def test_typestr_no_pointee_matches_is_refused_for_a_typed_pointer(typestr, what):
    """A big-endian typestr ('>f4') is read byte-swapped by a kernel, and a typestr of another
    kind, or not of the form '<f4', names no C type. kernarg took both for any pointee, as if
    the producer had said no type: now a typed pointer to a type kernarg names refuses them,
    and void*, pointers to structs and untyped packing take them as untyped memory."""
    array = CAIObject(cai(0x10, typestr=typestr))
    for decl in ("float* p", "const float2* p", "long long* p", "char* p"):
        with pytest.raises(TypeError, match=rf"'p'\) is {re.escape(decl[:-2])} but the array's "
                                            rf"element type is {what}"):
            kernarg.Signature(decl).pack((array,))
    for decl in ("void* p", "const void* p", "struct Foo* p", "float** p"):
        assert bytes(kernarg.Signature(decl).pack((array,))) == struct.pack("<Q", 0x10)
    assert bytes(kernarg.pack((array,))) == struct.pack("<Q", 0x10)


@pytest.mark.parametrize("dtype", [(2, 32, 2), (0, 4, 1), (3, 64, 1), (1, 1, 1), (20, 8, 1),
                                   (2, 0, 1)],
                         ids=["float32x2", "int4", "opaque", "uint1", "code20", "float0"])
def test_dlpack_dtype_no_c_scalar_names_is_refused_for_a_typed_pointer(dtype):
    """A DLPack dtype of two float32 lanes had its lanes counted into the size, and passed for
    double*; sub-byte ints, opaque handles and unknown codes passed for any pointee."""
    for decl in ("float* p", "double* p", "float2* p", "signed char* p", "const bool* p"):
        with pytest.raises(TypeError, match=r"element type is one no C pointee names"):
            kernarg.Signature(decl).pack((DLPackProducer(0x1000, device=(2, 0), dtype=dtype),))
    block = kernarg.Signature("void* p").pack((DLPackProducer(0x1000, device=(2, 0),
                                                              dtype=dtype),))
    assert bytes(block) == struct.pack("<Q", 0x1000)


@pytest.mark.parametrize("decl, n", [("float4 v", 4), ("float2 v", 2), ("__nv_fp8x2_e4m3 v", 2)])
def test_a_vector_from_a_value_of_the_wrong_shape_is_refused_by_name(decl, n):
    # A 0-d array gave "TypeError: len() of unsized object" (numpy's words, not kernarg's);
    # a range, which is a sequence of numbers, "expected a sequence of 4 numbers, got range".
    sig = kernarg.Signature(decl)
    for value, says in ((np.array(1.0), "got a 0-d numpy array of shape ()"),
                        (np.zeros((1, n)), f"got a 2-d numpy array of shape (1, {n})"),
                        (range(n), "got range: pass a tuple, a list or a 1-d numpy array"),
                        ([0] * (n + 1), f"expected {n} elements, got {n + 1}")):
        with pytest.raises(TypeError, match=rf"^parameter 0 \('v'\) is {re.escape(decl[:-2])}: "
                                            rf".*{re.escape(says)}$"):
            sig.pack((value,))
    assert len(bytes(sig.pack((np.zeros(n, np.float32),)))) == sig.nbytes


def test_a_struct_array_field_from_an_array_of_another_shape_is_refused_by_name():
    sig = kernarg.Signature.from_source(
        'struct P { float2 v; float m[2][3]; };\nextern "C" __global__ void k(P p) {}', "k")
    for field, value, says in (("v", np.array(1.0), "shape (2,), got a numpy array of shape ()"),
                               ("m", np.zeros(6), "shape (2, 3), got a numpy array of shape (6,)")):
        with pytest.raises(TypeError, match=rf"^parameter 0 \('p'\): field {field} is an array "
                                            rf"of {re.escape(says)}$"):
            sig.pack(({field: value},))
    assert bytes(sig.pack(({"m": np.arange(6.0).reshape(2, 3)},)))[8:32] == \
        np.arange(6, dtype=np.float32).tobytes()


def test_byte_order_matters_only_past_one_byte():
    for typestr in ("<f4", "=f4", "|f4"):
        assert bytes(kernarg.Signature("float* p").pack((CAIObject(cai(0x10, typestr=typestr)),))) \
            == struct.pack("<Q", 0x10)
    for typestr in (">i1", "|i1", "<i1"):
        assert bytes(kernarg.Signature("signed char* p").pack(
            (CAIObject(cai(0x10, typestr=typestr)),))) == struct.pack("<Q", 0x10)
    # Raw bytes ('V') have no byte order either: matched by size, whatever it says.
    assert bytes(kernarg.Signature("__half* p").pack((CAIObject(cai(0x10, typestr=">V2")),))) \
        == struct.pack("<Q", 0x10)


def test_a_producers_own_exception_keeps_its_type_and_traceback():
    class Failing:
        @property
        def __cuda_array_interface__(self):
            raise KeyError("gone")

    with pytest.raises(KeyError) as info:
        kernarg.Signature("int n, float* out").pack((1, Failing()))
    assert info.value.args[0].startswith("parameter 1 ('out'): argument 1 (")
    assert isinstance(info.value.__cause__, KeyError)


def test_cuda_bindings_device_pointer_for_pointer_parameters():
    from cuda.bindings import driver

    sig = kernarg.Signature("const float* x, void* y, unsigned long long z, int n")
    ptr = driver.CUdeviceptr(0x7f00_1234_5600)
    b = sig.pack((ptr, driver.CUdeviceptr(16), 5, 3))
    assert bytes(b) == struct.pack("<QQQi", 0x7f00_1234_5600, 16, 5, 3)
    # An address object is not an int: a by-value parameter refuses it, naming the parameter.
    with pytest.raises(TypeError, match=r"parameter 3 \('n'\).*CUdeviceptr"):
        sig.pack((ptr, ptr, 5, ptr))


def test_struct_errors():
    sig = kernarg.Signature(["int", FLAT])
    with pytest.raises(TypeError, match="parameter 1.*struct"):
        sig.pack((1, 3.0))
    with pytest.raises(TypeError, match="no field 'q'"):
        sig.pack((1, {"q": 1}))


class CInner(ctypes.Structure):
    _fields_ = [("h", ctypes.c_short), ("x", ctypes.c_double)]


class CNested(ctypes.Structure):
    _fields_ = [("c", ctypes.c_char), ("v", ctypes.c_float * 3), ("inner", CInner),
                ("ok", ctypes.c_bool), ("n", ctypes.c_uint)]


CNESTED = np.dtype(CNested)     # the same layout, described by numpy


@pytest.mark.parametrize("spec", [CNESTED, CNested], ids=["numpy", "ctypes"])
def test_struct_fields_are_converted_as_parameters_are(spec):
    # numpy and ctypes, asked to build a struct from a dict or tuple, wrap ints that do not
    # fit and truncate floats given for ints, without a word; ctypes also fills the fields a
    # short tuple leaves out and ignores dict keys that name no field. kernarg converts each
    # field as it converts a parameter of that type, and names the field when it cannot.
    sig = kernarg.Signature([spec])
    good = (b"a", (1.0, 2.5, -3.0), (7, 0.25), True, 2**32 - 1)
    assert bytes(sig.pack((good,))) == bytes(CNested(*good))
    as_dict = {"c": 97, "v": np.array([1.0, 2.5, -3.0]), "inner": {"h": np.int16(7), "x": 0.25},
               "ok": np.True_, "n": 2**32 - 1}
    assert bytes(sig.pack((as_dict,))) == bytes(CNested(*good))
    name = r"parameter 0"
    for value, exc, message in [
        ({"n": 2**32}, OverflowError, r", field n \(unsigned int\): 4294967296 is outside 0 "),
        ({"n": -1}, OverflowError, r", field n \(unsigned int\): -1 is outside"),
        ({"n": 2.5}, TypeError, r", field n \(unsigned int\): expected an int, got float"),
        ({"inner": {"h": 40000}}, OverflowError, r", field inner\.h \(short\): 40000 is"),
        ({"inner": (1,)}, TypeError, r": field inner has 2 fields \(h, x\), got 1 values"),
        ({"v": (1.0, "x", 3.0)}, TypeError, r", field v\[1\] \(float\): expected a real"),
        ({"v": (1.0, 2.0)}, TypeError, r": field v has 3 elements, got 2"),
        ({"ok": 2}, OverflowError, r", field ok \(bool\): 2 is outside 0 \.\. 1"),
        ({"c": 256}, OverflowError, r", field c \(unsigned char\): 256 is outside 0 \.\. 255"),
        ({"nn": 1}, TypeError, r": a struct \(.*\) has no field 'nn' \(its fields: c, v, "),
        ({"inner": 5}, TypeError, r": field inner is .*: expected a dict, a tuple or a "
                                  r"matching value, got int"),
        (good[:4], TypeError, r": a struct \(.*\) has 5 fields \(c, v, inner, ok, n\), got 4 "),
    ]:
        with pytest.raises(exc, match=name + message):
            sig.pack((value,))


class CBits(ctypes.Structure):
    _fields_ = [("lo", ctypes.c_int, 4), ("hi", ctypes.c_int, 4), ("n", ctypes.c_short)]


def test_numpy_bool_is_0_or_1_for_every_integer_part():
    # numpy.bool_ has no __index__, and ctypes refuses it; a parameter of an integer type,
    # read in place by the fast path, takes it as 0 or 1, and so must a vector element, a
    # struct field (numpy-described, or built by ctypes: bitfields) and a PTX-declared int.
    t, f = np.True_, np.False_
    assert bytes(kernarg.Signature("int n, short s, char c").pack((t, t, f))) == \
        bytes(kernarg.Signature("int n, short s, char c").pack((1, 1, 0)))
    assert bytes(kernarg.Signature("int2 v").pack(((t, f),))) == struct.pack("<ii", 1, 0)
    spec = np.dtype([("n", np.int32), ("u", np.uint8), ("f", np.float32)], align=True)
    expect = np.zeros((), spec)     # padding zeroed, as kernarg's
    expect[()] = (1, 1, 1.0)
    for value in ({"n": t, "u": t, "f": t}, (t, t, t)):
        assert bytes(kernarg.Signature([spec]).pack((value,))) == expect.tobytes()
    for value in ({"lo": t, "n": t}, (t, f, t), {"lo": 1, "n": 1}):
        assert bytes(kernarg.Signature([CBits]).pack((value,))) == bytes(CBits(1, 0, 1))
    pairs = kernarg.Signature([CBits * 2])
    assert bytes(pairs.pack((((t, t, f), (f, 1, t)),))) == \
        bytes((CBits * 2)(CBits(1, 1, 0), CBits(0, 1, 1)))
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(\n"
           "\t.param .u32 k_param_0,\n\t.param .u16 k_param_1\n)\n{\n\tret;\n}\n")
    assert bytes(kernarg.Signature.from_ptx(ptx, "k").pack((t, f))) == \
        struct.pack("<IH", 1, 0)
    # Any other numpy value that is not an integer is still refused for an int part.
    with pytest.raises(TypeError, match=r"field n \(int\): expected an int, got float32"):
        kernarg.Signature([spec]).pack(({"n": np.float32(1)},))
    with pytest.raises(TypeError, match=r"CBits: .*int"):
        kernarg.Signature([CBits]).pack(({"lo": np.float32(1)},))


def test_struct_fields_round_as_parameters_do():
    # A __half, __nv_bfloat16 or float field rounds once, from the double, as a parameter
    # of that type does; a complex field takes a complex or a (real, imag) pair.
    spec = np.dtype([("h", np.float16), ("b", ml_dtypes.bfloat16), ("f", np.float32),
                     ("z", np.complex64)], align=True)
    sig = kernarg.Signature([spec])
    one = kernarg.Signature(["__half", "__nv_bfloat16", "float", "float", "float"])
    for x in (1 + 2**-11 + 2**-40, 1 / 3, 65519.0, 1e-8, -2.5):
        raw = bytes(sig.pack(((x, x, x, (x, -x)),)))
        expect = bytes(one.pack((x, x, x, x, -x)))
        assert raw[:2] == expect[:2] and raw[2:4] == expect[2:4]
        assert raw[4:8] == expect[4:8] and raw[8:16] == expect[8:16]
        assert bytes(sig.pack(((x, x, x, complex(x, -x)),))) == raw


def test_struct_dict_leaves_out_fields_as_zeros():
    # The fields a dict leaves out are zero, whatever the memory held before.
    sig = kernarg.Signature([CNESTED, CNESTED])
    for _ in range(3):
        full = sig.pack(((b"z", (9.0, 9.0, 9.0), (9, 9.0), True, 9),) * 2)
        del full
        raw = bytes(sig.pack(({"n": 5}, {"inner": {"x": 1.5}})))
        o = sig.offsets
        assert raw[o[0]:o[0] + CNESTED.itemsize] == bytes(CNested(n=5))
        assert raw[o[1]:o[1] + CNESTED.itemsize] == bytes(CNested(inner=CInner(x=1.5)))


@settings(max_examples=200, deadline=None)
@given(st.integers(-2**15, 2**15 - 1), st.floats(width=32, allow_nan=False),
       st.integers(0, 255), st.lists(st.integers(-2**31, 2**31 - 1), min_size=2, max_size=2))
def test_struct_tuples_pack_as_numpy_builds_them_in_range(h, f, u, ints):
    # Where numpy's casts lose nothing (ints in range, floats for float fields), the bytes are
    # numpy's own.
    spec = np.dtype([("h", np.int16), ("f", np.float32), ("u", np.uint8),
                     ("i", np.int32, (2,))], align=True)
    value = (h, f, u, tuple(ints))
    rec = np.zeros((), dtype=spec)     # zeroed: numpy leaves the padding of np.array's alone
    rec[()] = value
    assert bytes(kernarg.Signature([spec]).pack((value,))) == rec.tobytes()


def test_ctypes_structs_numpy_cannot_describe_are_checked_after_ctypes_builds_them():
    # Bitfields have no numpy equivalent, and an anonymous member's fields are named through
    # the outer struct: ctypes builds those, and kernarg checks what it built.
    class Bits(ctypes.Structure):
        _fields_ = [("lo", ctypes.c_uint, 3), ("hi", ctypes.c_int, 5)]

    class U(ctypes.Union):
        _fields_ = [("i", ctypes.c_int), ("f", ctypes.c_float)]

    class Anon(ctypes.Structure):
        _anonymous_ = ("u",)
        _fields_ = [("u", U), ("n", ctypes.c_short)]

    bits = kernarg.Signature([Bits])
    assert bytes(bits.pack(((5, -16),))) == bytes(Bits(5, -16))
    assert bytes(bits.pack(({"hi": 15},))) == bytes(Bits(hi=15))
    with pytest.raises(OverflowError, match=r"parameter 0, field lo: 8 does not fit "
                                            r"\(ctypes stores 0\)"):
        bits.pack(((8, 0),))
    with pytest.raises(OverflowError, match=r"field hi: 16 does not fit"):
        bits.pack(({"hi": 16},))
    with pytest.raises(TypeError, match=r"Bits has no field 'mid'"):
        bits.pack(({"mid": 1},))
    with pytest.raises(TypeError, match=r"Bits has 2 fields \(lo, hi\), got 1 values"):
        bits.pack(((1,),))
    with pytest.raises(TypeError, match=r"parameter 0: Bits: "):
        bits.pack(((1.5, 0),))      # ctypes' own refusal, naming the parameter
    anon = kernarg.Signature([Anon])
    assert bytes(anon.pack(({"i": 7, "n": 2},))) == bytes(Anon(i=7, n=2))
    with pytest.raises(OverflowError, match=r"field n: 70000 does not fit"):
        anon.pack(({"f": 1.5, "n": 70000},))

    # Nested parts are read back too: a struct of them, an array of them.
    class Outer(ctypes.Structure):
        _fields_ = [("b", Bits), ("a", ctypes.c_short * 2), ("bb", Bits * 2)]

    outer = kernarg.Signature([Outer])
    good = ((3, 1), (1, 2), ((1, 2), (7, -1)))
    assert bytes(outer.pack((good,))) == bytes(Outer(*good))
    for value, where, bad in [(((3, 16), (1, 2), ((1, 2), (7, -1))), r"field b\.hi", 16),
                                (((3, 1), (1, 70000), ((1, 2), (7, -1))), r"field a\[1\]", 70000),
                                (((3, 1), (1, 2), ((1, 2), (8, -1))), r"field bb\[1\]\.lo", 8)]:
        with pytest.raises(OverflowError, match=rf"parameter 0, {where}: {bad} does not fit"):
            outer.pack((value,))
    bits_array = kernarg.Signature([Bits * 2])
    assert bytes(bits_array.pack((((1, 2), (3, 4)),))) == bytes((Bits * 2)((1, 2), (3, 4)))
    with pytest.raises(OverflowError, match=r"parameter 0, element \[0\]\.lo: 9 does not fit"):
        bits_array.pack((((9, 0), (1, 1)),))
    with pytest.raises(TypeError, match=r"Bits_Array_2 takes a tuple of 2 elements, got 1 values"):
        bits_array.pack((((1, 1),),))


def test_struct_types_a_kernel_cannot_read_are_refused():
    class BigEndian(ctypes.BigEndianStructure):
        _fields_ = [("a", ctypes.c_int)]

    class BigEndianBits(ctypes.BigEndianStructure):
        _fields_ = [("a", ctypes.c_int, 4)]

    for spec, message in [
        (np.dtype([("o", object)]), r"field 'o' of .* holds Python objects"),
        (np.dtype([("n", ">i4")]), r"field 'n' of .* is >i4, not in the host's"),
        (np.dtype([("s", [("n", ">f8")], (2,))]), r"field 'n' of field 's' of .* is >f8"),
        (BigEndian, r"BigEndian is not in the host's .*byte order"),
        (BigEndianBits, r"BigEndianBits is not in the host's .*byte order"),
    ]:
        with pytest.raises(ValueError, match=message):
            kernarg.Signature([spec])


def _packed_or_refusal(sig, args):
    try:
        return bytes(sig.pack(args))
    except (TypeError, OverflowError, ValueError) as exc:
        return type(exc), str(exc)


class _Level(IntEnum):
    LOW = -3
    HIGH = 2**40


class _Ratio(float):
    pass


_LANE_VALUES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536,
                2**31 - 1, 2**31, -2**31 - 1, 2**32 - 1, 2**32, 2**53, 2**53 + 1, -2**53 - 1,
                2**60, 2**63 - 1, 2**63, -2**63, 0.0, -0.0, 0.1, 1.5, -2.5, 65504.0, 65520.0,
                3.4e38, 1e300, math.inf, -math.inf, math.nan, True, False, np.float32(1.5),
                np.int8(3), np.uint64(2**64 - 1), np.int64(-2**63), np.int64(2**53 + 1),
                np.uint8(255), np.float16(-65504), np.float64(0.1), np.bool_(True),
                np.bool_(False), np.complex64(1 + 1j), ml_dtypes.bfloat16(3.0),
                ctypes.c_uint64(2**63), ctypes.c_double(-0.5), ctypes.c_int8(-7),
                ctypes.c_bool(True), _Level.LOW, _Level.HIGH, _Ratio(0.25), 2**64, "x", None]


@pytest.mark.parametrize("decl", ["char2", "uchar4", "short2", "ushort4", "int2", "uint4",
                                  "longlong2", "ulonglong2", "float2", "float3", "float4",
                                  "double2", "half2", "__nv_bfloat162", "int1", "double4_32a"])
def test_vector_tuples_and_complex_numbers_pack_as_lists_of_their_lanes(decl):
    """Signature.pack reads a tuple of exact floats and ints for a vector parameter, and a
    complex number (numpy's complex64 and complex128 too) for a pair of floats, lane by lane
    in place; the general converters take a list. Both give the same bytes, or the same
    refusal naming the element, for every lane value at and past each lane type's ends."""
    sig = kernarg.Signature(f"int n, {decl} v")
    count = int(re.search(r"(\d)(_32a)?$", decl)[1])
    rng = random.Random(decl)
    # Mostly lanes the general path takes, so that most tuples pack, and their bytes compare.
    taken = [value for value in _LANE_VALUES
             if isinstance(_packed_or_refusal(sig, (7, [value] * count)), bytes)]
    packed = 0
    for _ in range(400):
        lanes = [rng.choice(taken if rng.random() < 0.9 else _LANE_VALUES)
                 for _ in range(count)]
        got = _packed_or_refusal(sig, (7, tuple(lanes)))
        assert got == _packed_or_refusal(sig, (7, list(lanes))), lanes
        packed += isinstance(got, bytes)
    assert packed >= 100, packed
    for value in _LANE_VALUES[:4]:
        assert _packed_or_refusal(sig, (7, (value,) * (count + 1))) == \
            _packed_or_refusal(sig, (7, [value] * (count + 1)))
    pair = count == 2 and any(word in decl for word in ("float", "double", "half"))
    for number in (1.5 - 2j, complex(math.inf, -0.0), complex(1e300, math.nan), 0.1 + 0.2j):
        with np.errstate(over="ignore"):            # complex64(1e300) is infinite
            values = (number, np.complex64(number), np.complex128(number))
        for value in values:
            parts = [value.real.item() if isinstance(value, np.generic) else value.real,
                     value.imag.item() if isinstance(value, np.generic) else value.imag]
            if pair:
                assert _packed_or_refusal(sig, (7, value)) == \
                    _packed_or_refusal(sig, (7, parts)), (decl, value)
            else:
                assert isinstance(_packed_or_refusal(sig, (7, value)), tuple), (decl, value)


class _Fields(tuple):
    """A tuple the fast path leaves to the general converters (it reads exact tuples)."""


class _Named(dict):
    """A dict the fast path leaves to the general converters (it reads exact dicts)."""


class _PlainStruct(ctypes.Structure):
    _fields_ = [("b", ctypes.c_bool), ("c", ctypes.c_int8), ("uc", ctypes.c_uint8),
                ("s", ctypes.c_int16), ("us", ctypes.c_uint16), ("i", ctypes.c_int32),
                ("u", ctypes.c_uint32), ("ll", ctypes.c_int64), ("ull", ctypes.c_uint64),
                ("f", ctypes.c_float), ("d", ctypes.c_double)]


_PLAIN_SOURCE = """#include <cuda_fp16.h>
#include <cuda_bf16.h>
struct S { bool b; signed char c; unsigned char uc; short s; unsigned short us; int i;
           unsigned u; long long ll; unsigned long long ull; __half h; __nv_bfloat16 bf;
           float f; double d; };
__global__ void k(int n, S s) {}
"""


def _plain_struct_signatures():
    """Signatures of (int, struct) whose struct has a field of every scalar type a struct
    field converts as a parameter (with padding between some), each way kernarg reads one."""
    names = ["b", "c", "uc", "s", "us", "i", "u", "ll", "ull", "h", "bf", "f", "d"]
    formats = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32,
               np.int64, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
    aligned = np.dtype({"names": names, "formats": formats}, align=True)
    # Fields out of offset order, with gaps: a tuple follows the names, not the offsets.
    shuffled = np.dtype({"names": ["x", "y", "z"], "formats": [np.float32, np.int16, np.uint8],
                         "offsets": [8, 2, 0], "itemsize": 16})
    return [("numpy", kernarg.Signature(["int", aligned])),
            ("shuffled", kernarg.Signature(["int", shuffled])),
            ("ctypes", kernarg.Signature(["int", _PlainStruct])),
            ("source", kernarg.Signature.from_source(_PLAIN_SOURCE, "k"))]


@pytest.mark.parametrize("which", ["numpy", "shuffled", "ctypes", "source"])
def test_struct_tuples_and_dicts_of_numbers_pack_as_the_general_path_packs_them(which):
    """Signature.pack writes a struct whose fields are all numbers from an exact tuple or dict
    of numbers (ints, floats, bools, numpy and ml_dtypes scalars, ctypes numbers, int and
    float subclasses) field by field in place; the general converters take a tuple or dict
    subclass. Both give the same bytes (padding and fields a dict leaves out zeroed), or the
    same refusal naming the field, for field values at and past every field type's ends,
    dicts in any order, leaving fields out, naming a field that is not there, and keys that
    are not strs."""
    sig = dict(_plain_struct_signatures())[which]
    record = sig.records[1]
    names = list(record.names)
    rng = random.Random(which)
    # Mostly values the general path takes for the field, so that most tuples and dicts pack,
    # and their bytes compare.
    taken = {name: [value for value in _LANE_VALUES
                    if isinstance(_packed_or_refusal(sig, (7, _Named({name: value}))), bytes)]
             for name in names}

    def draw(name):
        return rng.choice(taken[name] if rng.random() < 0.95 else _LANE_VALUES)

    packed = 0
    for _ in range(300):
        values = [draw(name) for name in names]
        got = _packed_or_refusal(sig, (7, tuple(values)))
        assert got == _packed_or_refusal(sig, (7, _Fields(values))), values
        packed += isinstance(got, bytes)
        given = rng.sample(names, rng.randint(0, len(names)))
        pairs = [(name, draw(name)) for name in given]
        if rng.random() < 0.2:
            pairs.insert(rng.randint(0, len(pairs)),
                         rng.choice([("nope", 1), (1, 1), (b"b", 1), ("".join(["x", "y"]), 2)]))
        got = _packed_or_refusal(sig, (7, dict(pairs)))
        assert got == _packed_or_refusal(sig, (7, _Named(pairs))), pairs
        packed += isinstance(got, bytes)
    assert packed >= 200, packed
    for values in ([0] * (len(names) - 1), [0] * (len(names) + 1), []):
        assert _packed_or_refusal(sig, (7, tuple(values))) == \
            _packed_or_refusal(sig, (7, _Fields(values))), values
    # Keys equal to the fields' names but other str objects, given in reverse order.
    built = {"".join(list(name)): 1 for name in reversed(names)}
    assert bytes(sig.pack((7, built))) == bytes(sig.pack((7, _Named(built))))
    # Numbers of types the per-type cache has not seen (a dict's are looked up after it is
    # read, and it is read again), and a ctypes number (a dict's: the general path).
    fresh = [type("Fresh", (base,), {}) for base in (int, float, int)]
    given = {names[0]: fresh[0](1), names[-1]: fresh[1](0.5), names[1]: fresh[2](0),
             names[2]: ctypes.c_uint8(1)}
    for value in (given, dict(list(given.items())[:3])):
        assert _packed_or_refusal(sig, (7, value)) == _packed_or_refusal(sig, (7, _Named(value)))
    ratio = type("Fresh", (float,), {})(0.5)        # (the reference a lookup takes is let go)
    before = sys.getrefcount(ratio)
    sig.pack((7, {next(n for n in names if record[n].kind == "f"): ratio}))
    assert sys.getrefcount(ratio) == before
    # The values land where the record puts them: numpy's own bytes for them.
    if which != "source":
        fields = tuple(1 if record[name].kind in "biu" else 0.5 for name in names)
        expected = np.zeros(1, record)
        expected[0] = fields
        assert bytes(sig.pack((7, fields)))[sig.offsets[1]:] == expected.tobytes()


def test_vector_element_errors_name_the_element():
    sig = kernarg.Signature("int4 v, float2 w")
    with pytest.raises(OverflowError, match=r"parameter 0 \('v'\), element 3 of int4 \(int\): "
                                            r"2147483648 is outside"):
        sig.pack(((1, 2, 3, 2**31), (1.0, 2.0)))
    with pytest.raises(TypeError, match=r"parameter 1 \('w'\), element 1 of float2 \(float\): "
                                        r"expected a real number, got str"):
        sig.pack(((1, 2, 3, 4), (1.0, "x")))


def test_argument_count_and_container():
    sig = kernarg.Signature("float* out, int n")
    with pytest.raises(TypeError, match=re.escape(
            "the kernel takes 2 arguments (float* out, int n), got 1: no value for parameter 1 "
            "('n')")):
        sig.pack((None,))
    with pytest.raises(TypeError, match=re.escape(
            "the kernel takes 2 arguments (float* out, int n), got 4: 2 more than it has "
            "parameters")):
        sig.pack((None, 1, 2, 3))
    unnamed = kernarg.Signature(["int"] * 5)
    with pytest.raises(TypeError, match=re.escape(
            "the kernel takes 5 arguments (int, int, int, int, int), got 1: no value for "
            "parameter 1, parameter 2, parameter 3, ...")):
        unnamed.pack((1,))
    with pytest.raises(TypeError, match=re.escape(
            "the kernel takes 5 arguments (int, int, int, int, int), got 2: no value for "
            "parameter 2, parameter 3, parameter 4")):
        unnamed.pack((1, 2))
    with pytest.raises(TypeError, match="tuple or list"):
        sig.pack(None)


def test_void_pointer_accepts_any_dtype_and_char_any_byte():
    kernarg.Signature("void* p").pack((CAIObject(cai(0x10, typestr="<c16")),))
    sig = kernarg.Signature("char* p")
    sig.pack((CAIObject(cai(0x10, typestr="|u1")),))
    sig.pack((CAIObject(cai(0x10, typestr="|i1")),))
    with pytest.raises(TypeError):
        sig.pack((CAIObject(cai(0x10, typestr="<i2")),))


def test_dlpack_dtype_checked():
    sig = kernarg.Signature("const int* p")
    ok = DLPackProducer(0x10, dtype=(0, 32, 1))
    sig.pack((ok,))
    bad = DLPackProducer(0x10, dtype=(2, 16, 1))
    with pytest.raises(TypeError, match="'p'.*f2"):
        sig.pack((bad,))
    import gc

    gc.collect()
    assert bad.deleted == 1 and ok.deleted == 1


@pytest.mark.parametrize("flag, fragment", [
    ("readonly", "is read-only"),
    ("copied", r"was exported as a copy \(DLPack flag IS_COPIED\): what the kernel writes"),
])
def test_dlpack_flags_refuse_a_non_const_pointer(flag, fragment):
    # A versioned capsule's flags: read-only memory, or a copy the producer made (the kernel's
    # writes would land in the copy), is fine behind a const pointer and refused behind a
    # non-const one, naming the parameter; the refused capsule's deleter still runs, once.
    import gc

    const_ok = DLPackProducer(0x40, **{flag: True})
    block = kernarg.Signature("const float* x, int n").pack((const_ok, 4))
    assert block.nargs == 2 and bytes(block)[:8] == (0x40).to_bytes(8, "little")
    refused = DLPackProducer(0x40, **{flag: True})
    with pytest.raises(ValueError, match=r"parameter 0 \('x'\) \(float\*\) is not const "
                                         r"but the DLPackProducer array " + fragment):
        kernarg.Signature("float* x, int n").pack((refused, 4))
    # Untyped packing does not know what the kernel does with the memory: it takes both.
    assert bytes(kernarg.pack((DLPackProducer(0x40, **{flag: True}),))) == \
        (0x40).to_bytes(8, "little")
    # A legacy capsule has no flags: the same producer, unversioned, is writable.
    kernarg.Signature("float* x").pack((DLPackProducer(0x40, versioned=False, **{flag: True}),))
    del block
    gc.collect()
    assert const_ok.deleted == 1 and refused.deleted == 1


class _OwnProtocols:
    """An object whose array protocols are its own attributes, set on the instance (a wrapper
    that copies another array's interface, a test double): its type has neither, so kernarg
    asks each instance."""

    def __init__(self, **attrs):
        self.__dict__.update(attrs)


class _RaisingLookup:
    def __getattr__(self, name):
        raise RuntimeError(f"no {name} today")


def test_typed_pointer_takes_protocols_set_on_the_instance():
    # Untyped packing took these and typed packing refused them as "expected an array" until
    # session 54: a typed pointer must take what an untyped one takes, and check it.
    import gc

    sig = kernarg.Signature("float* out, const float* x, int n")
    out = _OwnProtocols(__cuda_array_interface__=cai(0x1000, stream=7))
    producer = DLPackProducer(0x2000)
    x = _OwnProtocols(__dlpack__=producer.__dlpack__, __dlpack_device__=producer.__dlpack_device__)
    block = sig.pack((out, x, 4))
    assert (ptr_of(block, 0), ptr_of(block, 1)) == (0x1000, 0x2000)
    assert block.producer_streams == (7,)
    assert bytes(kernarg.pack((out, x, 4))) == bytes(block)[:16] + (4).to_bytes(8, "little")
    # ... and checks them as it checks any array: element type, and const.
    wrong_type = _OwnProtocols(__cuda_array_interface__=cai(0x1000, typestr="<i4"))
    with pytest.raises(TypeError, match=r"parameter 0 \('out'\) is float\* but the array's "
                                        r"element type is i4"):
        sig.pack((wrong_type, x, 4))
    read_only = _OwnProtocols(__cuda_array_interface__=cai(0x1000, readonly=True))
    with pytest.raises(ValueError, match=r"parameter 0 \('out'\).*read-only"):
        sig.pack((read_only, x, 4))
    sig.pack((out, read_only, 4))      # const float*: taken
    # A struct's pointer field takes it too.

    class Job(ctypes.Structure):
        _fields_ = [("p", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_int)]

    job = kernarg.Signature([Job]).pack(({"p": out, "n": 2},))
    assert ptr_of(job) == 0x1000 and job.producer_streams == (7,)
    with pytest.raises(TypeError, match=r"parameter 0, field p .*element type is i4"):
        kernarg.Signature([Job]).pack(({"p": wrong_type, "n": 2},))
    del block, job
    gc.collect()
    assert producer.deleted == producer.exported > 0


def test_typed_pointer_refuses_an_object_with_no_protocol_by_parameter():
    sig = kernarg.Signature("float* out")
    for value in (object(), _OwnProtocols(ptr=0x1000)):
        with pytest.raises(TypeError, match=r"parameter 0 \('out'\) is a pointer \(float\*\): "
                                            r"expected an array, buffer or address, got "):
            sig.pack((value,))
    # A lookup that raises is the object's own error, named as untyped packing names it.
    with pytest.raises(RuntimeError, match=r"parameter 0 \('out'\): argument 0 \(.*"
                                           r"_RaisingLookup\): reading the argument raised "
                                           r"RuntimeError: no __cuda_array_interface__ today"):
        sig.pack((_RaisingLookup(),))
    with pytest.raises(RuntimeError, match=r"^argument 0 \(.*_RaisingLookup\): reading the "
                                           r"argument raised RuntimeError"):
        kernarg.pack((_RaisingLookup(),))


def test_typed_pointer_calls_host_memory_host_memory():
    # bytes, bytearray, memoryview, array.array and ctypes arrays are buffers of host memory:
    # a pointer parameter or field says so, as untyped packing does, rather than asking for "an
    # array, buffer or address". Scalars (numpy's and ctypes' export a buffer too) are no array.
    import array

    class Job(ctypes.Structure):
        _fields_ = [("p", ctypes.POINTER(ctypes.c_float))]

    cpu = r"is host memory, which a kernel cannot read \(the memory is on the CPU; "
    for value in (b"ab", bytearray(4), memoryview(b"abcd"), array.array("f", [1.0]),
                  (ctypes.c_float * 2)()):
        name = type(value).__name__
        with pytest.raises(TypeError, match=r"parameter 0 \('p'\) is a pointer \(const float\*\): "
                                            + name + " " + cpu):
            kernarg.Signature("const float* p").pack((value,))
        with pytest.raises(TypeError, match=r"parameter 0, field p .* is a pointer: " + name
                                            + " " + cpu):
            kernarg.Signature([Job]).pack(({"p": value},))
        if not isinstance(value, ctypes.Array):     # untyped, a ctypes array is a value
            with pytest.raises(TypeError, match=r"argument 0 .*the memory is on the CPU"):
                kernarg.pack((value,))
    for value in (np.float32(1), ctypes.c_float(1), "s"):
        with pytest.raises(TypeError, match=r"expected an array, buffer or address, got "
                                            + type(value).__name__):
            kernarg.Signature("const float* p").pack((value,))


def test_signature_properties():
    sig = kernarg.Signature("float* __restrict__ out, const float* x, int n")
    assert len(sig) == 3 and sig.names == ("out", "x", "n")
    assert sig.types == ("float*", "const float*", "int")
    assert sig.offsets == (0, 8, 16) and sig.sizes == (8, 8, 4) and sig.nbytes == 20
    assert "const float* x" in repr(sig)
    assert len(kernarg.Signature("")) == 0 and len(kernarg.Signature("void")) == 0
    dt = kernarg.Signature([np.float32, np.dtype("int16"), ctypes.c_double,
                            ctypes.POINTER(ctypes.c_float), np.complex64, ml_dtypes.bfloat16])
    assert dt.sizes == (4, 2, 8, 8, 8, 2) and dt.offsets == (0, 4, 8, 16, 24, 32)


@pytest.mark.parametrize("value", [0, 1, -1, 2**30 - 1, -(2**30 - 1), 2**30, -(2**30), 2**31 - 1,
                                   -(2**31), 2**59, -(2**60)])
def test_int_runs_around_the_one_digit_boundary(value):
    # One-digit ints (|v| < 2**30) skip the int32 range check; wider ones must still get it.
    sig = kernarg.Signature("int a, long long b, int c")
    if -(2**31) <= value < 2**31:
        raw = bytes(sig.pack((value, value, value)))
        assert struct.unpack_from("<i", raw, 0)[0] == value
        assert struct.unpack_from("<q", raw, 8)[0] == value
        assert struct.unpack_from("<i", raw, 16)[0] == value
    else:
        with pytest.raises(OverflowError, match="'a'"):
            sig.pack((value, value, 0))
    assert struct.unpack_from("<q", bytes(sig.pack((0, value, 0))), 8)[0] == value


def test_opaque_struct_parameter_message_names_the_parameter_and_what_fits():
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n"
           ".visible .entry k(\n\t.param .u32 k_param_0,\n"
           "\t.param .align 8 .b8 k_param_1[8]\n)\n{\n\tret;\n}\n")
    sig = kernarg.Signature.from_ptx(ptx, "k")
    with pytest.raises(TypeError, match=r"parameter 1 .* is 8 opaque bytes .*not dict"):
        sig.pack((1, {"a": 1}))
    s = np.array((1, 2, 2.5), np.dtype([("a", "<i2"), ("b", "i1"), ("c", "<f4")],
                                        align=True))[()]
    assert bytes(sig.pack((1, s)))[8:] == s.tobytes()
    assert bytes(sig.pack((1, b"12345678")))[8:] == b"12345678"


class _DeviceArray:
    __cuda_array_interface__ = {"shape": (2,), "typestr": "<f4", "data": (0x1000, False),
                                "version": 3}


@pytest.mark.parametrize("value, why", [
    (5, "no size of its own"), (2.5, "no size of its own"), (None, "no size of its own"),
    (_DeviceArray(), "an array passes its address"),
])
def test_an_opaque_struct_takes_no_value_whose_bytes_kernarg_would_guess(value, why):
    # Before session 65 an 8-byte struct the signature cannot describe took a Python int or
    # float as 8 bytes (int64, double), None as a null pointer and an array as its address:
    # whichever the struct held, the kernel read a guess. Values that state their own bytes
    # still fill it.
    ptx = (".version 8.0\n.target sm_90\n.address_size 64\n"
           ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[8]\n)\n{\n\tret;\n}\n")
    sig = kernarg.Signature.from_ptx(ptx, "k")
    with pytest.raises(TypeError, match=rf"parameter 0 .* is 8 opaque bytes .*{why}"):
        sig.pack((value,))

    class Pair(ctypes.Structure):
        _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_float)]

    for fits in (np.float64(1.5), np.int64(-3), ctypes.c_uint64(7), Pair(1, 2.0),
                 ctypes.c_void_p(0x1234)):
        expected = fits.tobytes() if isinstance(fits, np.generic) else bytes(fits)
        assert bytes(sig.pack((fits,))) == expected, fits


def test_compile_for_a_real_architecture_gives_machine_code_too():
    # Kernel.from_source loads machine code for the device's architecture: a driver cannot
    # JIT-compile PTX of an ISA newer than itself, which an NVRTC newer than it emits.
    from kernarg._nvrtc import supported_archs
    from kernarg._signature import compile_kernel

    assert 90 in supported_archs()
    ptx, entry, cubin = compile_kernel(TEMPLATE_SOURCE, "axpy<float>", arch="sm_90")
    assert cubin[:4] == b"\x7fELF" and entry.encode() in cubin
    assert ".target sm_90" in ptx and f".entry {entry}(" in ptx
    ptx, entry, cubin = compile_kernel(ALIGNED_SOURCE, "k", arch="compute_90")
    assert cubin is None and entry is None and ".entry k(" in ptx


def test_ptx_integers_take_either_sign_of_their_width():
    # NVVM declares an `int` parameter .u32 (and `short` .u16, `char` .u8): PTX gives the
    # width, not the sign, so a negative int must pack, as its two's complement.
    ptx = compile_ptx('extern "C" __global__ void k(int n, short s, long long q, '
                      'unsigned u, char c) {}')
    sig = kernarg.Signature.from_ptx(ptx, "k")
    assert sig.types == (".u32", ".u16", ".u64", ".u32", ".u8")
    raw = bytes(sig.pack((-1, -2, -3, 2**32 - 1, 255)))
    assert raw == struct.pack("<ih2xqIB", -1, -2, -3, 2**32 - 1, 255)
    raw = bytes(sig.pack((np.int32(-7), np.uint16(65535), 2**64 - 1, True, -128)))
    assert raw == struct.pack("<iH2xQIb", -7, 65535, 2**64 - 1, 1, -128)
    for bad, fragment in (((2**32, 0, 0, 0, 0), "parameter 0 .* -2147483648 .. 4294967295"),
                          ((-2**31 - 1, 0, 0, 0, 0), "parameter 0 .* 32-bit"),
                          ((0, 0, -2**63 - 1, 0, 0), "parameter 2 .* 64-bit"),
                          ((0, 0, 0, 0, 256), "parameter 4 .* an 8-bit integer")):
        with pytest.raises(OverflowError, match=fragment):
            sig.pack(bad)
    with pytest.raises(TypeError, match="parameter 0 .* expected an int, got float"):
        sig.pack((1.5, 0, 0, 0, 0))
    # .u64 also takes pointers; a negative int is a long long's value.
    assert bytes(sig.pack((0, 0, None, 0, 0)))[8:16] == bytes(8)


def test_same_named_kernels_never_take_the_other_kernels_types():
    # Two kernels named k in two namespaces: the qualified name says which declaration is the
    # PTX entry's (before, neither was read: the PTX's types, no names).
    src = ("namespace a { __global__ void k(float x, float* p) {} }\n"
           "namespace b { __global__ void k(int x, int* p) {} }\n")
    sig = kernarg.Signature.from_source(src, "b::k")
    assert sig.types == ("int", "int*") and sig.names == ("x", "p")
    assert bytes(sig.pack((-3, None))) == struct.pack("<i4xQ", -3, 0)
    with pytest.raises(TypeError, match="parameter 0"):
        sig.pack((1.5, None))     # a float for b::k's int: refused, not packed as float bits
    sig = kernarg.Signature.from_source(src, "a::k")
    assert sig.types == ("float", "float*")
    # Overloads (one name, one namespace): the declaration the PTX entry is, where only one
    # fits its types (float x, where the PTX has a .f32); else the PTX's types.
    src = ("template <typename T> __global__ void k(T x, T* p) {}\n"
           "__global__ void k(int x, int* p) {}\n")
    sig = kernarg.Signature.from_source(src, "k<float>")
    assert sig.types == ("float", "float*") and sig.names == ("x", "p")
    src = ("template <typename T> __global__ void k(T x, T* p) {}\n"
           "__global__ void k(float y, int* q) {}\n")
    sig = kernarg.Signature.from_source(src, "k<float>")
    assert sig.types == (".f32", ".u64") and sig.names == (None, None)
    # A forward declaration and the definition agree: the declaration's types are kept.
    fwd = "__global__ void f(int n, const float*);\n__global__ void f(int n, const float* x) {}"
    assert kernarg.Signature.from_source(fwd, "f").types == ("int", "const float*")


_PTX_INTS = compile_ptx('extern "C" __global__ void w(unsigned char a, unsigned short b, '
                        'unsigned c, unsigned long long d) {}')


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 3), st.integers(-2**65, 2**65))
def test_ptx_integer_packs_its_two_complement_or_names_the_parameter(which, value):
    sig = kernarg.Signature.from_ptx(_PTX_INTS, "w")
    args = [0, 0, 0, 0]
    args[which] = value
    bits = 8 * sig.sizes[which]
    if -2**(bits - 1) <= value < 2**bits:
        raw = bytes(sig.pack(args))
        off = sig.offsets[which]
        assert raw[off:off + bits // 8] == (value % 2**bits).to_bytes(bits // 8, "little")
    else:
        with pytest.raises(OverflowError, match=f"^parameter {which} .*{bits}-bit integer"):
            sig.pack(args)


@pytest.mark.parametrize("bad, exc, message", [
    # numpy reads None as float64: a double where cuda.bindings-style code meant a pointer
    (None, TypeError, "None is not a parameter type .*'void\\*'"),
    (3, TypeError, "cannot use 3 as a parameter type"),
    (np.dtype("U3"), ValueError, "numpy dtype <U3 has no CUDA parameter type"),
    (ctypes.c_longdouble, ValueError, "ctypes type c_longdouble has no CUDA parameter type"),
])
def test_parameter_objects_without_a_cuda_type_are_refused_by_position(bad, exc, message):
    with pytest.raises(exc, match=rf"^parameter 1 \({re.escape(repr(bad))}\): {message}"):
        kernarg.Signature([ctypes.c_float, bad, "int n"])


def test_texture_and_surface_object_parameters():
    """`cudaTextureObject_t`/`cudaSurfaceObject_t` (and cuda.h's CUtexObject/CUsurfObject) are
    64-bit handles passed by value: NVRTC's layout, and the handle objects of cuda.bindings,
    CuPy and cuda.core are taken as their values, for them and for unsigned long long."""
    from cuda.bindings import driver, runtime

    decls = {"tex": ["char", "cudaTextureObject_t", "float", "cudaSurfaceObject_t"],
             "dim": ["char", "dim3", "int"]}
    expected = kernels_layout(decls)
    dim = kernarg.Signature("char c, dim3 d, int n")           # dim3: three unsigned ints
    assert (dim.offsets, dim.sizes, dim.nbytes) == expected["dim"]
    assert bytes(dim.pack((1, (2, 3, 4), 5)))[4:16] == struct.pack("<3I", 2, 3, 4)
    sig = kernarg.Signature("char c, cudaTextureObject_t t, float x, cudaSurfaceObject_t s")
    assert (sig.offsets, sig.sizes, sig.nbytes) == expected["tex"]
    assert sig.types[1] == sig.types[3] == "unsigned long long"
    assert kernarg.Signature("CUtexObject t, CUsurfObject s").sizes == (8, 8)

    tex, surf = driver.CUtexObject(0x1234), runtime.cudaSurfaceObject_t(2**64 - 1)
    block = sig.pack((b"\x07"[0], tex, 1.5, surf))
    assert bytes(block) == struct.pack("<b7xQf4xQ", 7, 0x1234, 1.5, 2**64 - 1)
    # A PTX-derived .u64 parameter takes them too; a pointer or a 32-bit int does not.
    ptx_sig = kernarg.Signature.from_ptx(compile_ptx(
        'extern "C" __global__ void k(cudaTextureObject_t t) {}'), "k")
    assert bytes(ptx_sig.pack((runtime.cudaTextureObject_t(9),))) == struct.pack("<Q", 9)
    with pytest.raises(TypeError, match=r"parameter 0 \('p'\) is a pointer .* CUtexObject"):
        kernarg.Signature("float* p").pack((tex,))
    with pytest.raises(TypeError, match=r"parameter 0 \('n'\) is int: expected an int, got "
                                        "CUtexObject"):
        kernarg.Signature("int n").pack((tex,))


FILL_HEADER = r"""
#pragma once
struct Scale { float a; int b; };
extern "C" __global__ void fill(float* __restrict__ x, Scale s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = s.a * s.b; }
"""


def test_from_source_finds_declarations_in_in_memory_headers():
    sig = kernarg.Signature.from_source('#include "fill.cuh"\n', "fill",
                                        headers={"fill.cuh": FILL_HEADER})
    assert sig.names == ("x", "s", "n") and sig.types[0] == "float*"
    assert (sig.offsets, sig.sizes) == ((0, 8, 16), (8, 8, 4))
    for bad, message in [(["fill.cuh"], "must be a mapping"),
                         ({"fill.cuh": FILL_HEADER.encode()}, "'fill.cuh': .* got str and bytes")]:
        with pytest.raises(TypeError, match=message):
            kernarg.Signature.from_source('#include "fill.cuh"\n', "fill", headers=bad)
    with pytest.raises(kernarg.NvrtcError, match="fill.cuh"):    # not given: NVRTC says so
        kernarg.Signature.from_source('#include "fill.cuh"\n', "fill")


def test_a_kernel_declared_outside_the_source_takes_the_ptx_layout(tmp_path):
    """Declared in a file included with -I, or made by a macro: NVRTC compiles it, and the
    PTX's layout is the compiler's own (no names; ints of either sign, .u64 int or pointer)."""
    (tmp_path / "fill.cuh").write_text(FILL_HEADER)
    from_file = kernarg.Signature.from_source('#include "fill.cuh"\n', "fill",
                                              [f"-I{tmp_path}"])
    macro = kernarg.Signature.from_source(
        '#define KERNEL(name, T) extern "C" __global__ void name(T* x, T v, int n) '
        "{ x[threadIdx.x] = v * n; }\nKERNEL(fill_f, float)\n", "fill_f")
    assert (from_file.offsets, from_file.sizes, from_file.names) == \
        ((0, 8, 16), (8, 8, 4), (None, None, None))
    assert macro.types == (".u64", ".f32", ".u32") and macro.offsets == (0, 8, 12)
    block = macro.pack((0x1000, 2.5, 3))
    assert bytes(block) == struct.pack("<Qfi", 0x1000, 2.5, 3)


STRUCT_SOURCE = r"""
#include <cuda_bf16.h>
typedef float real;
struct Inner { short h; double d; };
struct __align__(16) Params {
    const float* x;
    float *y, *z;                   // two declarators, each a pointer
    int n = 4;                      // a default member initializer changes no layout
    real scale;
    float2 v;
    Inner in[2];
    unsigned char flags[3];
    __nv_bfloat16 b;
    Inner* next;
};
typedef struct { int a; char b; } Small;
struct alignas(8) Tail { char c; };
namespace ns { struct Spaced { long long q; bool on; }; }
extern "C" __global__ void k(Params p, Small s, int m, const struct Tail t, ns::Spaced w) {}
"""


def _struct_fields(dt, name, found):
    """``found[name]``: the fields of numpy dtype ``dt`` (struct ``name``), and the same for
    the structs of its fields."""
    found[name] = dt
    for fdt, _ in dt.fields.values():
        inner = fdt.subdtype[0] if fdt.subdtype else fdt
        if inner.fields is not None:
            _struct_fields(inner, inner.metadata["name"], found)
    return found


def _compiler_offsets(source, structs):
    """{(struct name, field): offset} as NVRTC lays ``structs`` (name -> record) out."""
    return field_offsets(source, {name: list(rec.names) for name, rec in structs.items()})


def test_from_source_reads_the_structs_the_source_defines():
    # A struct passed by value that the kernel's own source defines is read field by field:
    # its layout (every offset checked here against the compiler's own, and its size and
    # alignment against the PTX) and each field's type, so a dict or tuple fills it with the
    # conversions and checks of a parameter of the field's type.
    sig = kernarg.Signature.from_source(STRUCT_SOURCE, "k")
    assert sig.types == ("Params", "Small", "int", "Tail", "Spaced")
    assert sig.sizes == (96, 8, 4, 8, 16) and sig.alignments == (16, 4, 4, 8, 8)
    records = sig.records
    assert records[2] is None
    assert records[0].names == ("x", "y", "z", "n", "scale", "v", "in", "flags", "b", "next")
    structs = {}
    for rec, t in zip(records, ("Params", "Small", None, "Tail", "ns::Spaced"), strict=True):
        if rec is not None:
            _struct_fields(rec, t, structs)
    assert set(structs) == {"Params", "Inner", "Small", "Tail", "ns::Spaced"}
    assert _compiler_offsets(STRUCT_SOURCE, structs) == {
        (name, field): offset for name, dt in structs.items()
        for field, (_, offset) in dt.fields.items()}
    block = sig.pack(({"x": 0x1000, "n": 3, "scale": 2.5, "v": (1, 2),
                       "in": [(1, 2.0), {"d": 3.0}], "b": 1.5, "flags": [1, 2, 255]},
                      (1, 2), 5, {"c": ord("z")}, (2**40, True)))
    raw = bytes(block)
    assert raw[:96] == struct.pack("<QQQifff h6x d h6x d 3Bx H 2x Q 8x".replace(" ", ""),
                                   0x1000, 0, 0, 3, 2.5, 1, 2, 1, 2.0, 0, 3.0, 1, 2, 255,
                                   0x3FC0, 0)
    assert raw[96:] == struct.pack("<ib3xi4sc7xq?7x", 1, 2, 5, b"", b"z", 2**40, True)
    # A tuple gives every field, in order.
    full = (0x1000, 0x2000, 0x3000, 1, 0.5, (0, 0), ((0, 0), (0, 0)), (0, 0, 0), 0, None)
    assert bytes(sig.pack((full, (0, 0), 0, (0,), (0, False))))[8:16] == \
        struct.pack("<Q", 0x2000)
    # Each field converted as its type: range, kind, names and counts, the error naming it.
    with pytest.raises(OverflowError, match=r"parameter 0 \('p'\), field in\[1\]\.h "
                                            r"\(short\)"):
        sig.pack(({"in": [{}, {"h": 2**15}]}, (0, 0), 0, (0,), (0, False)))
    with pytest.raises(TypeError, match=r"parameter 0 \('p'\), field n \(int\): expected an "
                                        r"int, got float"):
        sig.pack(({"n": 1.5}, (0, 0), 0, (0,), (0, False)))
    with pytest.raises(TypeError, match=r"parameter 1 \('s'\): a struct \(Small\) has no "
                                        r"field 'c' \(its fields: a, b\)"):
        sig.pack(({}, {"c": 1}, 0, (0,), (0, False)))
    with pytest.raises(TypeError, match=r"parameter 4 \('w'\): a struct \(Spaced\) has 2 "
                                        r"fields \(q, on\), got 3 values"):
        sig.pack(({}, {}, 0, (0,), (0, False, 1)))
    # Any other value is still taken as the struct's bytes, as before kernarg read structs.
    same = np.zeros((), np.dtype([("a", "<i4"), ("b", "<i4")]))[()]
    assert bytes(sig.pack((bytes(96), same, 0, bytes(8), bytes(16))))[96:104] == bytes(8)
    with pytest.raises(TypeError, match=r"parameter 0 \('p'\) takes 96 bytes \(Params\)"):
        sig.pack((bytes(80), same, 0, bytes(8), bytes(16)))
    # Kernel.from_source's path (the PTX compiled once) reads them the same.
    ptx = compile_ptx(STRUCT_SOURCE)
    again = kernarg.Signature._from_source_and_ptx(STRUCT_SOURCE, "k", ptx)
    assert again.types == sig.types and again.records[0] == records[0]


@pytest.mark.parametrize("definition, declared", [
    # A union whose T{} sets a member (a default member initializer, a constructor, or a
    # member's own): which one, kernarg does not read.
    ("union S { int i = 1; float f; };", "S"),
    ("union S { int i; float f; __host__ __device__ S() : i(0) {} };", "S"),
    ("struct P { int p = 1; };\nstruct S { union { P p; float f; }; int n; };", "S"),
    # A union template the source specializes (S<int> is no `int v`, as the primary says).
    ("template <class T> union S { T v; };\ntemplate <> union S<int> { float f; };", "S<int>"),
    # An unnamed union or struct with an alignment of its own.
    ("struct S { char c; struct __align__(16) { int b; } in; };", "S"),
    # A bit-field's width the compiler is not asked (a private member's: since session 68 a
    # macro's or a constant's is asked), or one past its type's bits.
    ("#define W 3\nclass S { int a : W; public: int b : 5; };", "S"),
    ("struct S { int a : 3; bool b : 2; };", "S"),
    # What a member function's head holds that kernarg cannot tell from a type or a data
    # member's attribute (a macro of more than specifiers: `HD float f()`, `float x AL(8)`),
    # a pointer to a function, and a virtual function (a pointer in each object).
    ("#define HD __host__ __device__ __attribute__((always_inline))\n"
     "struct S { int a; HD float get() const { return a; } };", "S"),
    ("#define AL(n) __align__(n)\nstruct S { int a; float x AL(8); };", "S"),
    ("struct S { int a; float (*f)(float); };", "S"),
    ("struct S { int a; alignas(8) int b; };", "S"),
    ("struct S { int a; __device__ virtual int get() const { return a; } };", "S"),
    # A virtual base; a base whose unfilled tail padding is past what a lower __align__
    # rounds the derived struct to (NVRTC 12.8 and 13.0 size it differently).
    ("struct B { int b; }; struct S : virtual B { int a; };", "S"),
    # An empty base (session 64) where the struct holds another empty struct: where another
    # subobject of its type is at its offset, Itanium moves it (here `e` to 1, `a` to 4).
    ("struct E {};\nstruct S : E { E e; int a; };", "S"),
    ("struct E {};\nstruct F { E e; int x; };\nstruct S : E { F f; char c; };", "S"),
    # An alias declared for two types (in two namespaces: which one the kernel's means,
    # kernarg does not tell).
    ("namespace a { struct Q { int x; }; using S = Q; }\n"
     "namespace b { struct R { float y; }; using S = R; }", "a::S"),
    # An array of more extents than numpy describes (64).
    ("struct S { float v" + "[1]" * 70 + "; int n; };", "S"),
    ("struct B { double d; int b = 1; };\nstruct __align__(2) S : B { short a; };", "S"),
    ("#pragma pack(push, 1)\nstruct S { char c; int a; };\n#pragma pack(pop)", "S"),
    ("#ifdef WIDE\nstruct S { double a; };\n#else\nstruct S { float a; };\n#endif", "S"),
    ("namespace a { struct S { int x; }; } namespace b { struct S { float y; }; }", "b::S"),
    # An extent the compiler cannot be asked (session 64): a base's where the derived struct
    # names something as the base is named (its constructor's initializer here), so that
    # `s.B::v` may not be the base's. (A private member's is asked since session 65.)
    ("#define N 3\nstruct B { float v[N]; };\n"
     "struct S : B { int n; __host__ __device__ S() : B() {} };", "S"),
    ("struct S { unsigned __int128 big; };", "S"),
    ("template <class T> struct S { T v; };\ntemplate <> struct S<int> { double d; };", "S<int>"),
    ("template <class T> struct S { typename T::type v; };\n"
     "struct P { typedef int type; };", "S<P>"),
    # A class template the source also specializes (`template <> class`), as a struct's.
    ("template <class T> class S { public: T v; };\n"
     "template <> class S<int> { public: double d; };", "S<int>"),
    # Without its conditional member, S would be 16 bytes, as the PTX says, with `a` 4 bytes
    # off: read past the #ifndef, it is no struct kernarg can lay out.
    ("struct S {\n    double d;\n#ifndef NARROW\n    int b;\n#endif\n    int a;\n};", "S"),
    ("struct S { char c; int a; } __attribute__((packed));", "S"),
])
def test_structs_kernarg_cannot_read_keep_the_ptx_layout(definition, declared):
    # Whatever kernarg cannot lay out as the compiler does, or cannot tell which definition the
    # compiler saw, stays what it was: the PTX's size and alignment, taking the struct's bytes.
    src = f'{definition}\nextern "C" __global__ void k({declared} s, int n) {{}}\n'
    options = ("--device-int128",) if "__int128" in definition else ()
    sig = kernarg.Signature.from_source(src, "k", options)
    assert sig.types[0].startswith(".align") and sig.records[0] is None, sig.types
    size = sig.sizes[0]
    assert bytes(sig.pack((bytes(range(size)), 7)))[:size] == bytes(range(size))
    with pytest.raises(TypeError, match=r"parameter 0 \('s'\) is \d+ opaque bytes"):
        sig.pack(({"a": 1}, 7))


MEMBER_FUNCTIONS = r"""
#define HD __host__ __device__
struct Span {
    const float* data = nullptr;
    int n = 0;
    HD int size() const { return n; }
    __device__ float operator[](int i) const { return data[i]; }
    __device__ float sum() const {
        float s = 0;
        for (int i = 0; i < n; ++i) { s += data[i]; }
        return s;
    }
    static constexpr int kMax = 1 << 20;
    using value_type = float;
    typedef int (*callback)(int);
    static_assert(sizeof(float) == 4, "float; {");
    friend __device__ bool operator==(const Span& a, const Span& b) { return a.n == b.n; }
    template <class U> __device__ U first() const { return U(data[0]); }
  private:
    double scale = 2.5;
  public:
    __device__ explicit operator bool() const { return n > 0; }
};
// CUTLASS's Params: constructors, one from a macro kernarg does not know.
struct Params {
    float* out;
    int count;
    CUTLASS_HOST_DEVICE Params() : out(nullptr), count(0) {}
    CUTLASS_HOST_DEVICE Params(float* o, int c) : out{o}, count(c) { if (c < 0) { count = 0; } }
};
struct Literal { int a = 1; int b; __host__ __device__ constexpr Literal() : b(7) {} };
template <class T> struct Box { T v[2]; __device__ T get(int i) const { return v[i]; } };
extern "C" __global__ void k(Span s, Params p, Literal l, Box<short> b) {}
"""


def test_structs_with_member_functions_are_read_field_by_field():
    # Member functions (defined in place, with `;` and braces in their bodies, or declared),
    # operators, constructors, static members, aliases, friends, static_asserts and access
    # specifiers take no byte of an object: the data members are laid out as NVRTC does.
    # Before session 62 any of them left the struct opaque bytes.
    src = MEMBER_FUNCTIONS.replace("CUTLASS_HOST_DEVICE", "__host__ __device__")
    sig = kernarg.Signature.from_source(src, "k")
    span, params, literal, box = sig.records
    assert (span.names, [span.fields[f][1] for f in span.names], span.itemsize) == \
        (("data", "n", "scale"), [0, 8, 16], 24)
    assert params.names == ("out", "count") and literal.names == ("a", "b")
    assert box.names == ("v",) and box.fields["v"][0] == np.dtype(("<i2", (2,)))
    # (The oracle reads offsets from outside the struct, where `scale` is private; that it
    # is at 16 the PTX's size of the parameter, 24, which kernarg checks, says.)
    offsets = field_offsets(src, {"Span": ["data", "n"], "Params": ["out", "count"],
                                  "Literal": ["a", "b"]})
    assert [offsets[("Span", f)] for f in ("data", "n")] == [0, 8]
    assert [offsets[("Params", f)] for f in params.names] == [0, 8]
    # A struct without constructors: a dict's missing fields take their initializers (its
    # private `scale` too), as before.
    raw = bytes(sig.pack(({"data": 0x1000}, (0x2000, 3), {}, {"v": [1, 2]})))
    assert raw[:24] == struct.pack("<Qi4xd", 0x1000, 0, 2.5)
    # With constructors, what they set is known only where T{} is a constant expression:
    # Literal's constexpr one gives a = 1, b = 7; Params' (not constexpr) is unknown, so a dict
    # must give every field; a tuple gives them all.
    assert params.metadata["constructed"] and "initial" not in params.metadata
    assert literal.metadata["initial"] == struct.pack("<ii", 1, 7)
    raw = bytes(sig.pack(({}, {"out": 16, "count": 2}, {"a": 5}, (np.zeros(2, np.int16),))))
    assert raw[sig.offsets[1]:sig.offsets[1] + 12] == struct.pack("<Qi", 16, 2)
    assert raw[sig.offsets[2]:sig.offsets[2] + 8] == struct.pack("<ii", 5, 7)
    with pytest.raises(TypeError, match=r"parameter 1 \('p'\): a struct \(Params\) leaves out "
                                        r"field count, and Params has constructors: kernarg has "
                                        r"no value for what they set .* give it, or pass a "
                                        r"tuple of every field"):
        sig.pack(({}, {"out": 16}, {}, ((1, 2),)))
    # A constructor is known by its name, whatever macro stands before it
    # (CUTLASS_HOST_DEVICE, from a header kernarg does not read).
    unknown = MEMBER_FUNCTIONS.replace("CUTLASS_HOST_DEVICE", "HD2")
    sig2 = kernarg.Signature.from_source(
        "#define HD2 __host__ __device__ __attribute__((always_inline))\n" + unknown, "k")
    assert sig2.records[1].names == ("out", "count") and sig2.records[1].metadata["constructed"]


@pytest.mark.parametrize("member, kind", [
    ("__device__ float at(int i) const", "function"),
    ("HD int size() const", "function"),                # HD: the source's macro of specifiers
    ("unsigned long long hash() const noexcept", "function"),
    ("const ns::Vec<float, 3>& get()", "function"),
    ("typename T::value_type first() const", "function"),
    ("template <class U> __device__ U as() const", "function"),
    ("friend __device__ bool operator==(const S& a, const S& b)", "function"),
    ("S& operator=(const S&) = default", "function"),
    ("__device__ explicit operator bool() const", "function"),
    ("__device__ float operator()(int i) const", "function"),
    ("~S()", "function"),
    ("S() = default", "constructor"),
    ("CUTLASS_HOST_DEVICE S(int n) : n(n)", "constructor"),   # an unknown macro before it
    ("template <class U> explicit S(U u)", "constructor"),
    ("S<T, N>(const S& o)", "constructor"),
    ("float a = scale(1.5f)", "data"),                  # a default member initializer's call
    ("int x = [](int v) { return v; }(3)", "data"),
    ("alignas(8) int b", None),                         # not a function: the struct is opaque
    ("float x ALIGN(8)", None),
    ("float (*callback)(float)", None),
    ("MACRO float f()", None),                          # MACRO is no known specifier
    ("real (x)", None),
    ("int (x)", None),
    ("~T()", None),
    ("FOO(3)", None),
    ("template <class U = decltype(f())> int", None),
])
def test_a_struct_members_parenthesis_is_told_apart(member, kind):
    # _data_members leaves out what _function_kind calls a function or constructor; a member
    # it cannot tell (None) leaves the whole struct opaque, never a data member dropped.
    from kernarg._signature import _FUNCTION_SPECIFIERS, _function_kind

    assert _function_kind(member, "S", _FUNCTION_SPECIFIERS | {"HD"}) == kind


def test_a_struct_body_is_read_past_member_function_bodies():
    from kernarg._signature import _data_members

    body = """
    int a, b{2};
    __device__ int f() const { if (a) { return b; } return 0; }
    public:
    S(int v) : a{v}, b(v) { for (int i = 0; i < 2; ++i) { b += i; } };
    float c = g(1);
    static constexpr int k = 1;
    using T = float;
    friend __device__ S operator+(S x, S y) { return x; }
    mutable double d;
    """
    members, constructed, pod = _data_members(body, "S")
    assert [m.split() for m in members] == [["int", "a,", "b{2}"], ["float", "c", "=", "g(1)"],
                                            ["double", "d"]]
    assert constructed and pod is False         # S(int v) is user-provided
    assert _data_members("int a; S() = default; S(const S&) = delete;", "S")[1:] == (True, True)
    # Declared constructors but no default one: NVRTC 12.9 and 13.5 disagree.
    assert _data_members("int a; S(const S&) = default;", "S")[1:] == (True, None)
    # "POD for the purpose of layout" as NVRTC lays out what derives from it: not with a
    # user-provided destructor, copy or move assignment, or a private or protected data
    # member; still with defaulted or deleted ones, other operators, private functions.
    assert _data_members("int a; __device__ ~S() {}", "S")[1:] == (False, False)
    assert _data_members("int a; ~S() = default;", "S")[2] is True
    assert _data_members("int a; S& operator=(const S&) { return *this; }", "S")[2] is False
    assert _data_members("int a; S& operator=(S&&) = delete;", "S")[2] is True
    assert _data_members("int a; S& operator=(int) { return *this; }", "S")[2] is True
    assert _data_members("int a; private: int b;", "S")[2] is False
    assert _data_members("private: void f(); public: int a; static int s;", "S")[2] is True
    assert _data_members("int a; public: int b;", "S", private=True)[2] is False
    assert _data_members("int a; bool operator==(const S&) const;", "S")[2] is True
    assert _data_members(body + "virtual void v();", "S") is None
    assert _data_members("int a{1} int b;", "S") is None        # a brace no initializer ends
    assert _data_members("int a; void f() {", "S") is None      # unclosed


def test_a_default_the_compiler_refuses_elsewhere_leaves_out_only_itself(monkeypatch):
    # NVRTC reports some refusals of a struct's T{} where the struct is defined, not on the
    # line that evaluates it (a deleted default constructor, in a template's instantiation,
    # as a random struct drew it, seed 201). Before session 62 that left every parameter's
    # defaults unevaluated, so a dict leaving out any initialized field was refused; now the
    # group is halved until the one refused is alone, within 16 compilations.
    import re as _re

    import kernarg._nvrtc as nvrtc

    src = ("struct P { int a = 1; };\nstruct Q { float b = 2.5f; };\n"
           "struct R { short c = 3; };\n"
           'extern "C" __global__ void k(P p, Q q, R r) {}\n')
    real, calls = nvrtc.compile_program_cached, []

    def compile_refusing(poisoned):
        def compile(text, **kwargs):
            if "__kernarg_default_" in text:
                calls.append(text)
                if poisoned is None or _re.search(rf"__kernarg_default_{poisoned}\b", text):
                    raise nvrtc.NvrtcError("NVRTC: NVRTC_ERROR_COMPILATION",
                                           'kernarg_source.cu(2): error: the default '
                                           'constructor of "Q" cannot be referenced')
            return real(text, **kwargs)
        return compile

    monkeypatch.setattr(nvrtc, "compile_program_cached", compile_refusing(1))
    sig = kernarg.Signature.from_source(src, "k")
    assert [r.metadata.get("initial") for r in sig.records] == [
        struct.pack("<i", 1), None, struct.pack("<h", 3)]
    assert len(calls) <= 5
    assert bytes(sig.pack(({}, {"b": 1.0}, {})))[8:10] == struct.pack("<h", 3)
    with pytest.raises(TypeError, match=r"parameter 1 \('q'\): a struct \(Q\) leaves out "
                                        r"field b"):
        sig.pack(({}, {}, {}))
    # Every group refused: halving 12 to ones would take 23 compilations; 16 are run, and
    # no value is taken.
    calls.clear()
    monkeypatch.setattr(nvrtc, "compile_program_cached", compile_refusing(None))
    many = "".join(f"struct T{i} {{ int v = {i}; }};\n" for i in range(12)) + \
        'extern "C" __global__ void k(' + ", ".join(f"T{i} t{i}" for i in range(12)) + ") {}\n"
    sig = kernarg.Signature.from_source(many, "k")
    assert all("initial" not in r.metadata for r in sig.records)
    assert len(calls) == 16


BASES = r"""
#include <cuda_fp16.h>
struct Pod { double d; int b; };                     // POD: tail padding kept (16 bytes)
struct Init { double d; int b = 1; };                // a default member initializer: no POD
struct Half { double d; __half h; };                 // a __half: no POD
struct Made { double d; int b; __host__ __device__ Made() : d(0), b(0) {} };
struct Kept { double d; int b; Kept() = default; };  // defaulted: still POD
struct A : Pod { int a; };                           // a at 16
struct B : Init { int a; };                          // a at 12, in Init's tail padding
struct C : Half { short a; };                        // a at 10
struct D : public Made { int a; };                   // a at 12
struct E : Kept { int a; };                          // a at 16
struct Two { float x; };
struct F final : Two, private B { char c; };         // Two at 0, B at 8 (its a at 20), c at 24
template <class T> struct Base { T v; };
template <class T> struct G : Base<T> { T w; };      // a template's base, substituted
struct __align__(2) Low : Half { short a; };         // aligned below Half: 16 bytes in NVRTC
struct H { Low l[2]; double z; };                    // 13.0, 12 in 12.8: H is not read
struct Vecs { double d; half2 h[1]; };               // an array of half2: no POD
struct I : Vecs { short a; };                        // a at 12
struct Dtor { double d; int b; __host__ __device__ ~Dtor() {} };   // user-provided: no POD
struct J : Dtor { int a; };                          // a at 12
extern "C" __global__ void k(A a, B b, C c, D d, E e, F f, G<short> g, H h, I i, J j) {}
"""


def test_structs_with_base_classes_are_laid_out_as_nvrtc_does():
    # A base class is laid out first, as a struct of its own, and its fields are the derived
    # struct's; what follows a base goes after its tail padding where the base is "POD for
    # the purpose of layout" (Itanium's ABI, which NVRTC follows), else into it. Before session
    # 62 a struct with a base class stayed opaque bytes.
    sig = kernarg.Signature.from_source(BASES, "k")
    fields = {"A": ["d", "b", "a"], "B": ["d", "b", "a"], "C": ["d", "h", "a"],
              "D": ["d", "b", "a"], "E": ["d", "b", "a"], "G<short>": ["v", "w"],
              "I": ["d", "h", "a"]}   # (J: the oracle's probe cannot hold a destructor)
    offsets = field_offsets(BASES, fields)
    for record, name in zip(sig.records, ("A", "B", "C", "D", "E", "F", "G<short>", "H", "I",
                                          "J"), strict=True):
        assert (record is None) == (name == "H"), name
        if name in fields:
            assert list(record.names) == fields[name]
            assert [record.fields[f][1] for f in fields[name]] == \
                [offsets[(name, f)] for f in fields[name]], name
    a, b, c, d, e, f, g, h, i, j = sig.records
    assert [a.fields["a"][1], b.fields["a"][1], c.fields["a"][1], d.fields["a"][1],
            e.fields["a"][1], i.fields["a"][1], j.fields["a"][1]] == [16, 12, 10, 12, 16, 12, 12]
    assert (f.names, [f.fields[n][1] for n in f.names], f.itemsize) == \
        (("x", "d", "b", "a", "c"), [0, 8, 16, 20, 24], 32)
    # (Whether a struct with a base is POD kernarg does not tell: NVRTC takes `struct D : B
    # {}` as one where B is.)
    assert (a.metadata["pod"], b.metadata["pod"]) == (None, None)
    # A dict names a base's fields as the struct's own; the derived struct's T{} gives Init's
    # initializer (b = 1) where a dict leaves it out. (F's private base makes it no
    # aggregate, and its T{} no constant: a dict for it gives every field.)
    raw = bytes(sig.pack(((1.0, 2, 3), {"d": 0.5, "a": 4}, (0, 0, 0), (0, 0, 0), (0, 0, 0),
                          (1.0, 0.0, 0, 0, 0), (1, 2), bytes(40), {}, {})))
    at = sig.offsets[1]
    assert raw[at:at + 16] == struct.pack("<dii", 0.5, 1, 4)


def test_classes_are_read_as_structs_are():
    # Since session 62 a class is read as a struct is: `public:` and `private:` change nothing
    # of its layout, and its bases are private unless said. An `enum class` (or `enum struct`)
    # is no class, but an enumeration.
    src = """
enum class Kind : short { A, B };
enum struct Mode : char { X };
class Plain { public: float* x; int n; };
class Hidden { float* x; int n; public: __device__ int size() const { return n; } };
class Derived : public Plain { public: Kind k; Mode m; };
extern "C" __global__ void k(Plain p, Hidden h, Derived d) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    plain, hidden, derived = sig.records
    assert plain.names == hidden.names == ("x", "n")
    assert (derived.names, [derived.fields[f][1] for f in derived.names], derived.itemsize) == \
        (("x", "n", "k", "m"), [0, 8, 16, 18], 24)     # Plain is POD: its tail padding stays
    assert (derived.fields["k"][0], derived.fields["m"][0]) == (np.dtype("<i2"), np.dtype("i1"))
    assert (plain.metadata["pod"], hidden.metadata["pod"]) == (True, False)    # private x, n
    offsets = field_offsets(src, {"Plain": ["x", "n"], "Derived": ["x", "n", "k", "m"]})
    assert [offsets[("Derived", f)] for f in derived.names] == [0, 8, 16, 18]
    raw = bytes(sig.pack(({"x": 16, "n": 3}, (32, 4), {"k": 1, "m": -1})))
    assert raw[:12] == struct.pack("<Qi", 16, 3)
    assert raw[sig.offsets[2] + 16:sig.offsets[2] + 19] == struct.pack("<hb", 1, -1)


UNIONS = r"""
union Bits { float f; unsigned u; unsigned char b[4]; };
typedef union { double d; int2 i; } Wide;
struct Tagged {                         // an anonymous union: its members are Tagged's
    int kind;
    union { float f; int i; double d; };
    char after;
};
struct Nested {                         // an anonymous struct (GNU's) and union inside one
    char k;
    union { struct { short a, b; }; float x; union { char c; long long q; }; };
};
struct InPlace { char c; struct { int a; float b; } pair[2]; union { short s; char t; } u; };
struct Defaults { int k = 3; union { int i; float f; }; };
extern "C" __global__ void k(Bits b, Wide w, Tagged t, Nested n, InPlace p, Defaults d) {}
"""


def test_unions_and_unnamed_members_are_laid_out_as_nvrtc_does():
    # Since session 63 a union is read as a struct whose members all start at 0, and a struct
    # or union defined in place without a name is laid out as a type of its own; an anonymous
    # one (`union { float f; int i; };`) gives its fields to the struct, as C++ names them.
    # Before, any of them left the struct opaque bytes.
    sig = kernarg.Signature.from_source(UNIONS, "k")
    fields = {"Bits": ["f", "u", "b"], "Wide": ["d", "i"],
              "Tagged": ["kind", "f", "i", "d", "after"],
              "Nested": ["k", "a", "b", "x", "c", "q"], "InPlace": ["c", "pair", "u"],
              "Defaults": ["k", "i", "f"]}
    offsets = field_offsets(UNIONS, fields)
    for record, name in zip(sig.records, fields, strict=True):
        assert list(record.names) == fields[name], name
        assert [record.fields[f][1] for f in record.names] == \
            [offsets[(name, f)] for f in fields[name]], name
    bits, wide, tagged, nested, in_place, defaults = sig.records
    assert [r.itemsize for r in sig.records] == [4, 8, 24, 16, 24, 8]
    assert [f[1] for f in (tagged.fields[n] for n in tagged.names)] == [0, 8, 8, 8, 16]
    assert [nested.fields[n][1] for n in nested.names] == [0, 8, 10, 8, 8, 8]
    assert bits.metadata["union"] and "union" not in tagged.metadata
    # Which fields share their bytes (each union's members, by the fields each gives), and
    # what a tuple's values are (C++'s braces: a union's first member).
    assert tagged.metadata["overlaps"] == ((("f",), ("i",), ("d",)),)
    assert tagged.metadata["positions"] == ("kind", "f", "after")
    assert nested.metadata["overlaps"] == ((("a", "b"), ("x",), ("c", "q")), (("c",), ("q",)))
    assert nested.metadata["positions"] == ("k", "a", "b")
    assert in_place.fields["u"][0].metadata["positions"] == ("s",)
    raw = bytes(sig.pack(({"u": 0x3F800000}, (2.5,), {"kind": 2, "i": -7, "after": 1},
                          {"k": 1, "a": 2, "b": 3}, (9, [(1, 2.0), {"b": 3.0}], {"t": 4}),
                          {"f": 0.5})))
    at = sig.offsets
    assert raw[at[0]:at[0] + 4] == struct.pack("<f", 1.0)
    assert raw[at[1]:at[1] + 8] == struct.pack("<d", 2.5)
    assert raw[at[2]:at[2] + 24] == struct.pack("<i4xi4xb7x", 2, -7, 1)
    assert raw[at[3]:at[3] + 16] == struct.pack("<b7xhh4x", 1, 2, 3)
    assert raw[at[4]:at[4] + 24] == struct.pack("<b3xififb3x", 9, 1, 2.0, 0, 3.0, 4)
    # Defaults' T{}, as NVRTC evaluated it, gives k = 3 where a dict leaves it out.
    assert raw[at[5]:at[5] + 8] == struct.pack("<if", 3, 0.5)
    assert bytes(sig.pack(((0.5,), (0.0,), (1, 2.0, 3), (0, 1, 2), (0, ((0, 0),) * 2, (5,)),
                           (4, 7))))[at[2]:at[2] + 24] == struct.pack("<i4xf4xb7x", 1, 2.0, 3)
    # A dict gives one member of a union; two would write the same bytes.
    with pytest.raises(TypeError, match=r"parameter 2 \('t'\): a struct \(Tagged\) gives "
                                        r"fields f, d, which share their bytes .* give one of "
                                        r"f, i, d$"):
        sig.pack(({}, {}, {"f": 1.0, "d": 2.0}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 3 \('n'\): a struct \(Nested\) gives "
                                        r"fields b, x, which share .* give one of a and b; x; "
                                        r"c and q$"):
        sig.pack(({}, {}, {}, {"b": 1, "x": 2.0}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 3 \('n'\): a struct \(Nested\) gives "
                                        r"fields c, q, which share"):
        sig.pack(({}, {}, {}, {"c": 1, "q": 2}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 0 \('b'\): a union \(Bits\) gives "
                                        r"fields f, u"):
        sig.pack(({"f": 1.0, "u": 2}, {}, {}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 4 \('p'\): field u gives fields s, t"):
        sig.pack(({}, {}, {}, {}, {"u": {"s": 1, "t": 2}}, {}))
    with pytest.raises(TypeError, match=r"parameter 0 \('b'\): a union \(Bits\) takes 1 "
                                        r"value in a tuple \(f: of a union, its first member"
                                        r".*got 3; a dict gives another member"):
        sig.pack(((1.0, 2, 3), {}, {}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 2 \('t'\): a struct \(Tagged\) takes 3 "
                                        r"values in a tuple \(kind, f, after"):
        sig.pack(({}, {}, (1, 2.0, 3.0, 4, 5), {}, {}, {}))
    # Each member converted as its type: `i` is an int.
    with pytest.raises(TypeError, match=r"parameter 2 \('t'\), field i \(int\): expected an "
                                        r"int, got float"):
        sig.pack(({}, {}, {"i": 1.5}, {}, {}, {}))


def test_a_struct_with_constructors_and_a_union_takes_one_member_in_a_dict():
    # What a constructor sets is known only where T{} is a constant: otherwise a dict gives
    # every field, of a union's members the one it gives.
    src = """
struct Made {
    int kind;
    union { int i; float f; };
    __host__ __device__ Made(int k) : kind(k), i(0) {}
};
extern "C" __global__ void k(Made m) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.records[0].metadata["constructed"]
    assert bytes(sig.pack(({"kind": 1, "f": 2.0},))) == struct.pack("<if", 1, 2.0)
    with pytest.raises(TypeError, match=r"leaves out field kind, and Made has constructors"):
        sig.pack(({"f": 2.0},))
    with pytest.raises(TypeError, match=r"leaves out fields i, f, and Made has constructors"):
        sig.pack(({"kind": 1},))


BIT_FIELDS = r"""
struct Flags {
    char c;
    int a : 3;
    int b : 30;                         // would cross an int's boundary: starts at bit 32
    unsigned short d : 9, e : 9;
    long long f : 40;
    int : 0;                            // the next starts at an int's alignment
    char g : 2;
    bool on : 1;
};
union Mixed { unsigned x : 4; int y : 7; char c; };
struct Outer { short s; struct { unsigned p : 5, : 3; unsigned q : 20; }; unsigned char t : 3; };
struct Base { int i; unsigned char u : 3; };
struct Derived : Base { unsigned char v : 2; };
extern "C" __global__ void k(Flags f, Mixed m, Outer o, Derived d) {}
"""


def test_bit_fields_are_laid_out_and_packed_as_nvrtc_does():
    # Since session 63 a bit-field is placed as Itanium's ABI (GCC's, which NVRTC follows)
    # places it, and a dict or tuple gives it as any field, its value checked against its
    # width (C++ would keep the low bits). Before, a bit-field left its struct opaque bytes.
    from nvrtc_oracle import bitfield_bits

    sig = kernarg.Signature.from_source(BIT_FIELDS, "k")
    flags, mixed, outer, derived = sig.records
    assert flags.names == ("c",)      # (the numpy fields: bit-fields are in "bits")
    assert [b[:3] for b in flags.metadata["bits"]] == [
        ("a", 8, 3), ("b", 32, 30), ("d", 64, 9), ("e", 80, 9), ("f", 128, 40), ("g", 192, 2),
        ("on", 194, 1)]
    assert (flags.itemsize, flags.metadata["align"]) == (32, 8)
    assert flags.metadata["positions"] == ("c", "a", "b", "d", "e", "f", "g", "on")
    # Each named bit-field's bits, as NVRTC sets them (a union's it cannot: NVRTC 13.5 stops
    # with "initialization of bit-field in union not supported!").
    fields = {"Flags": ["a", "b", "d", "e", "f", "g", "on"], "Outer": ["p", "q", "t"],
              "Derived": ["u", "v"]}
    oracle = bitfield_bits(BIT_FIELDS, fields)
    for record, name in ((flags, "Flags"), (outer, "Outer"), (derived, "Derived")):
        for field, first, width, _ in record.metadata["bits"]:
            assert oracle[(name, field)] == ((1 << width) - 1) << first, (name, field)
    assert [b[:3] for b in outer.metadata["bits"]] == [("p", 32, 5), ("q", 40, 20),
                                                       ("t", 64, 3)]
    assert [b[:2] for b in derived.metadata["bits"]] == [("u", 32), ("v", 64)]
    assert (mixed.itemsize, [b[:3] for b in mixed.metadata["bits"]]) == \
        (4, [("x", 0, 4), ("y", 0, 7)])
    raw = bytes(sig.pack(({"c": 1, "a": -1, "b": 5, "d": 511, "e": 2, "f": -(1 << 39), "g": 1,
                           "on": True}, {"y": -3}, (1, 2, 3, 4), {"i": 7, "u": 5, "v": 3})))
    assert int.from_bytes(raw[:32], "little") == (1 | 7 << 8 | 5 << 32 | 511 << 64 | 2 << 80 |
                                                  1 << 167 | 1 << 192 | 1 << 194)
    at = sig.offsets
    assert raw[at[1]:at[1] + 4] == bytes([0x7D, 0, 0, 0])       # -3 in 7 bits
    assert raw[at[2]:at[2] + 12] == struct.pack("<h2xIB3x", 1, 2 | 3 << 8, 4)
    assert raw[at[3]:at[3] + 12] == struct.pack("<iB3xB3x", 7, 5, 3)
    # The bits around a bit-field keep what was written there (a dict's other fields).
    again = bytes(sig.pack(({"a": 3, "b": -1}, {}, {}, {})))
    assert int.from_bytes(again[:8], "little") == 3 << 8 | (1 << 30) - 1 << 32
    with pytest.raises(OverflowError, match=r"parameter 0 \('f'\), field a \(int : 3, a "
                                            r"bit-field\): 4 is outside -4 \.\. 3"):
        sig.pack(({"a": 4}, {}, {}, {}))
    with pytest.raises(OverflowError, match=r"field d \(unsigned short : 9, a bit-field\): 512 "
                                            r"is outside 0 \.\. 511"):
        sig.pack(({"d": 512}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"parameter 0 \('f'\), field b \(int : 30, a "
                                        r"bit-field\): expected an int, got float"):
        sig.pack(({"b": 1.5}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"a struct \(Flags\) has no field 'z' \(its fields: "
                                        r"c, a, b, d, e, f, g, on\)"):
        sig.pack(({"z": 1}, {}, {}, {}))
    with pytest.raises(TypeError, match=r"a struct \(Outer\) has 4 fields \(s, p, q, t\), "
                                        r"got 3 values"):
        sig.pack(({}, {}, (1, 2, 3), {}))
    with pytest.raises(TypeError, match=r"a union \(Mixed\) gives fields x, c, which share"):
        sig.pack(({}, {"x": 1, "c": 2}, {}, {}))


def test_bit_fields_beside_default_member_initializers():
    # A dict that leaves out a defaulted field takes it from the struct's T{}, and its
    # bit-fields are written over those bytes. A union holding a bit-field NVRTC 13.5 cannot
    # evaluate (an internal compiler error, reported on no line): there, that struct's T{} is
    # unknown, so a dict gives its defaulted fields, and the other struct's is still known.
    src = """
struct S { int n = 4; unsigned f : 3; unsigned g : 5; };
struct T { int n = 4; union { unsigned f : 3; int i; }; };
extern "C" __global__ void k(S s, T t) {}
"""
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.records[0].metadata["initial"] == struct.pack("<ii", 4, 0)
    raw = bytes(sig.pack(({"f": 5, "g": 31}, {"n": 1, "i": 3})))
    assert raw == struct.pack("<iIii", 4, 5 | 31 << 3, 1, 3)
    if "initial" in sig.records[1].metadata:       # (an NVRTC that evaluates it)
        assert bytes(sig.pack(({}, {"f": 1})))[8:] == struct.pack("<iI", 4, 1)
    else:
        with pytest.raises(TypeError, match=r"parameter 1 \('t'\): a struct \(T\) leaves out "
                                            r"field n"):
            sig.pack(({}, {"f": 1}))


def test_a_struct_defined_where_it_is_used_is_read():
    # The same struct read from a local definition would be wrong; the namespace-scope one
    # (the one a kernel's parameter names) is read, fields and all.
    src = ('struct S { int a; };\n__device__ void f() { struct S { double z; }; }\n'
           'extern "C" __global__ void k(S s) {}\n')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.types == ("S",) and sig.records[0].names == ("a",)


POINTER_FIELDS = r"""
struct Node { int* data; };
struct Job { const float* x; float* y; int n; Node node; void* any; };
extern "C" __global__ void run(Job j) {}
"""


def test_pointer_fields_of_a_source_struct_take_what_pointer_parameters_take():
    # A dict filling a struct with pointer fields takes arrays and buffers there, as a
    # pointer parameter does: their addresses, their producer streams (the launch waits on
    # them), DLPack capsules held until the block is released, and the field's element type
    # and const-ness checked, each error naming the field.
    from cuda.core import Buffer

    sig = kernarg.Signature.from_source(POINTER_FIELDS, "run")
    x = CAIObject(cai(0x1000, typestr="<f4", readonly=True, stream=0x77))
    y = DLPackProducer(0x2000, dtype=(2, 32, 1))
    block = sig.pack(({"x": x, "y": y, "n": 4, "node": {"data": Buffer.from_handle(0x3000, 16)},
                       "any": ctypes.c_void_p(0x4000)},))
    assert struct.unpack("<QQi4xQQ", bytes(block)) == (0x1000, 0x2000, 4, 0x3000, 0x4000)
    assert block.producer_streams == (0x77,)
    assert y.deleted == 0
    del block
    assert y.deleted == 1
    assert bytes(sig.pack(((None, 2**64 - 1, 0, (np.uint64(5),), None),)))[:16] == \
        struct.pack("<QQ", 0, 2**64 - 1)
    bad = [
        ({"y": x}, ValueError, r"field y \(float\*\) is not const but the CAIObject array "
                               r"is read-only"),
        ({"x": CAIObject(cai(0x1000, typestr="<i4"))}, TypeError,
         r"field x \(const float\*\): the array's element type is i4"),
        ({"node": {"data": np.zeros(4, np.int32)}}, TypeError,
         r"field node\.data \(int\*\): the memory is on the CPU"),
        ({"any": ctypes.pointer(ctypes.c_int(1))}, TypeError,
         r"field any \(void\*\): the ctypes pointer points at the ctypes c_int"),
        ({"x": 1.5}, TypeError, r"field x \(const float\*\) is a pointer: expected an array, "
                                r"buffer or address, got float"),
        ({"x": -1}, OverflowError, r"field x \(const float\*\) is a pointer: -1 is outside"),
    ]
    for value, error, message in bad:
        with pytest.raises(error, match=r"^parameter 0 \('j'\), " + message):
            sig.pack((value,))


class _CJob(ctypes.Structure):
    _fields_ = [("x", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_int),
                ("spare", ctypes.c_void_p * 2)]


def test_pointer_fields_of_a_ctypes_struct_type_take_arrays_in_a_dict():
    # A ctypes struct type in a Signature: numpy has no dtype for its pointers, so its record
    # marks them, and a dict or tuple's pointer fields take what a pointer parameter takes.
    sig = kernarg.Signature([_CJob])
    assert sig.records[0].names == ("x", "n", "spare")
    x = CAIObject(cai(0x1000, typestr="<f4", stream=0x55))
    block = sig.pack(({"x": x, "n": 2, "spare": [None, CAIObject(cai(0x2000))]},))
    assert struct.unpack("<Qi4xQQ", bytes(block)) == (0x1000, 2, 0, 0x2000)
    assert block.producer_streams == (0x55,)
    assert bytes(sig.pack(((0x10, 1, (0x20, 0x30)),))) == struct.pack("<Qi4xQQ", 0x10, 1, 0x20,
                                                                        0x30)
    with pytest.raises(TypeError, match=r"^parameter 0, field x \(LP_c_float\): the array's "
                                        r"element type is i4"):
        sig.pack(({"x": CAIObject(cai(0x1000, typestr="<i4"))},))
    # A value of the type itself is its bytes, as before.
    assert bytes(sig.pack((_CJob(None, 7),)))[8:12] == struct.pack("<i", 7)



OUT_OF_RANGE_LITERALS = ["1e999", "-1e999", "2e-324", "1.8e308", "1e39f", "7e-46f", "1e39F",
                         str(2**128), "9" * 400, hex(2**128),
                         # Past the 4,300 digits Python's int() reads (sys.set_int_max_str_digits)
                         "9" * 5000, "0x" + "f" * 5000]
FLOAT_OVERFLOWS = ["1e39", "-1e39", "3.4028236e38"]


def test_a_float_default_out_of_range_has_no_value():
    # A floating literal out of its own type's range is ill-formed (NVRTC: "floating constant
    # is out of range"), and a double beyond float's range converts to float undefined: none
    # has a value, where they once passed inf or 0.0. Rounding to the edge is in range.
    for lit in OUT_OF_RANGE_LITERALS:
        for t in ("float", "double", "int", "unsigned long long"):
            assert kernarg.Signature(f"{t} x = {lit}").defaults == {}, (t, lit)
    # An integer literal of up to 128 bits is exact, as NVRTC keeps it (an int parameter
    # takes it modulo 2**32, as C++ converts).
    assert kernarg.Signature(f"double x = {2**128 - 1}").defaults == {0: float(2**128 - 1)}
    assert kernarg.Signature(f"int x = {2**100 + 5}").defaults == {0: 5}
    for lit in FLOAT_OVERFLOWS:
        assert kernarg.Signature(f"float x = {lit}").defaults == {}, lit
        assert kernarg.Signature(f"double x = {lit}").defaults == {0: float(lit)}, lit
    kept = {"float x = 3.40282356e38": 3.40282356e38, "float x = 1e-50": 1e-50,
            "float x = 1e-45f": 1.401298464324817e-45, "double x = 3e-324": 5e-324,
            "double x = 0e999": 0.0, "double x = 0.0e-999": 0.0, "__half h = 1e6": 1e6}
    for text, value in kept.items():
        sig = kernarg.Signature(text)
        assert sig.defaults == {0: value}, text
        assert bytes(sig.pack(())) == bytes(sig.pack((value,))), text
    with pytest.raises(TypeError, match="default argument '1e39', a literal C\\+\\+ does not "
                                        "convert .* or out of its own type's range"):
        kernarg.Signature("float x = 1e39").pack(())


def test_nvrtc_agrees_that_out_of_range_float_defaults_have_no_value():
    for lit in OUT_OF_RANGE_LITERALS:
        with pytest.raises(NvrtcError, match="out of range|too large"):
            compile_to_ptx(f"__global__ void k(double x = {lit}) {{}}")
    # A double beyond float's range compiles as a float's default, but NVRTC does not
    # evaluate it to a constant either.
    params = ", ".join(f"float x{i} = static_cast<double>({lit})"
                       for i, lit in enumerate(FLOAT_OVERFLOWS))
    sig = kernarg.Signature.from_source(f"__global__ void k({params}) {{}}", "k")
    assert sig.defaults == {}


@pytest.mark.parametrize("value", [
    9223371761976868863,            # 2**63 - 2**38 - 1: just below a tie of floats
    -9223371761976868863, 2**64 - 1, 2**60 + 2**36 + 1, 16777217, 2**53 + 1, 2**63 - 1,
])
def test_an_int_past_2_53_is_rounded_once_to_a_float(value):
    # C++ converts an integer to float in one rounding. Through a double first, an int past
    # 2**53 was rounded twice: 2**63 - 2**38 - 1 became the tie 2**63 - 2**38, then 2**63,
    # where the exact value rounds down to 2**63 - 2**39.
    want = np.float32(np.int64(value) if value < 2**63 else np.uint64(value)).tobytes()
    sig = kernarg.Signature("float x, float2 v")
    kinds = [value, np.int64(value) if -2**63 <= value < 2**63 else np.uint64(value)]
    for arg in kinds:
        block = bytes(sig.pack((arg, (arg, 0.0))))
        assert (block[0:4], block[8:12]) == (want, want), arg
    assert bytes(kernarg.Signature(f"float x = {value}").pack(())) == want
    record = np.dtype([("f", np.float32)])
    assert bytes(kernarg.Signature([record]).pack(({"f": value},))) == want


def test_an_int_is_rounded_once_to_bfloat16():
    # 2**60 + 2**52 + 1 is just past half a bfloat16 step above 2**60: up to 2**60 + 2**53
    # (0x5d81). Through a double (2**60 + 2**52, a tie) it went down to 2**60 (0x5d80).
    value = 2**60 + 2**52 + 1
    for arg in (value, np.int64(value)):
        assert bytes(kernarg.Signature("__nv_bfloat16 x").pack((arg,))) == b"\x81\x5d"


@pytest.mark.parametrize("literal, want", [
    ("1.0000000596046447753906251f", 1 + 2**-23),     # a hair above a tie: up
    ("1.0000000596046447753906249f", 1.0),            # a hair below: down
    ("1.000000059604644775390625f", 1.0),             # the tie itself: to even
    ("-1.0000000596046447753906251f", -(1 + 2**-23)),
    ("1.00000017881393432617187500001f", 1 + 2**-22),
])
def test_a_float_literal_is_rounded_once_to_float(literal, want):
    # C++ reads 1.5f from its decimal digits to a float in one rounding; through the nearest
    # double first (here exactly a tie between two floats), the first case came out 1.0.
    for t in ("float", "double"):
        assert kernarg.Signature(f"{t} x = {literal}").defaults[0] == want


@pytest.mark.parametrize("text, want", [
    ("long long x = -1u", 4294967295), ("long long x = -0x80000000", 2147483648),
    ("unsigned long long x = -0Xffffffff", 1), ("long x = - 11U", 4294967285),
    ("double x = -1ul", 2.0**64 - 1), ("long long x = -2147483648", -2147483648),
    ("long long x = -0x7fffffff", -2147483647), ("long long x = (-1u)", 4294967295),
    ("int x = -1u", -1), ("long long x = -1ll", -1), ("long long x = -020000000000", 2**31),
    ("long long x = -0b1", -1), ("unsigned long long x = -1ull", 2**64 - 1),
])
def test_minus_applies_to_an_unsigned_literal_in_its_own_type(text, want):
    # -1u is unsigned int 4294967295, whatever it then converts to (kernarg read it as -1).
    assert kernarg.Signature(text).defaults[0] == want


def test_literal_defaults_convert_as_the_compiler_converts_them():
    # kernarg converts a literal default itself; the compiler converts the same literal hidden
    # behind a cast (no longer a literal, so NVRTC evaluates it). Both must pack alike.
    cases = [("unsigned char", "-1"), ("unsigned char", "300"), ("char", "200"),
             ("signed char", "-129"), ("short", "65535u"), ("unsigned short", "2.9"),
             ("int", "2.7"), ("int", "-2.7"), ("int", "0x8000'0000"), ("unsigned", "-1"),
             ("unsigned", "1e3"), ("long long", "0xFFFF'FFFF'FFFF'FFFFull"),
             ("unsigned long long", "-1ll"), ("long", "'x'"), ("bool", "2"), ("bool", "0.5"),
             ("bool", "0"), ("float", "0.1"), ("float", "16777217"), ("double", "1.5f"),
             ("double", "true"), ("float", "-0x10"), ("const float*", "0"), ("int*", "nullptr"),
             ("unsigned char", "'a'"), ("short", "-1e4"),
             ("float", "1e38"), ("double", "1'000.5")]
    params = ", ".join(f"{t} x{i} = {{}}" for i, (t, _) in enumerate(cases))
    as_literal = params.format(*[lit for _, lit in cases])
    as_expression = params.format(*[f"static_cast<decltype({lit})>({lit})" for _, lit in cases])
    sigs = [kernarg.Signature.from_source(f'extern "C" __global__ void k({p}) {{}}', "k")
            for p in (as_literal, as_expression)]
    assert sigs[0].default_texts[0] == "-1"
    assert sigs[1].default_texts[0] == "static_cast<decltype(-1)>(-1)"
    assert sigs[0].defaults.keys() == sigs[1].defaults.keys() == set(range(len(cases)))
    assert bytes(sigs[0].pack(())) == bytes(sigs[1].pack(()))


PICKLE_DEFAULTS_SOURCE = """#define N 1024
namespace ns {
constexpr float A = 0.25f;
struct Pair { int a; double b; };
extern "C" __global__ void k(float* p, int n = N, float a = 2 * A, Pair q = Pair{3, 2.5},
                             float4 v = float4{1, 2, 3, 4}) {}
}
"""


def _pickle_cases():
    """(signature, arguments it packs, arguments it refuses) of each way one is made."""
    arr = CAIObject(cai(0x1000, typestr="<f4", stream=0x55))
    return [
        (kernarg.Signature("float* out, const double* x, char* c, float2 v, __half h = 1.5, "
                           "int n = N, int m = 4"),
         (arr, 0x2000, None, (1.0, 2.0), 0.5, 9), (arr, 0x2000, None, (1.0, 2.0), 0.5)),
        (kernarg.Signature([NESTED, FLAT, CNested, CPair, "long long"]),
         ({"a": 1, "inner": (2.5, 3), "z": 4}, (1, 2.0, 3), bytes(ctypes.sizeof(CNested)),
          CPair(b"x", 1.5, 2), 2**40),
         ({"a": 1, "nope": 2}, (1, 2.0, 3), bytes(ctypes.sizeof(CNested)), CPair(), 0)),
        (kernarg.Signature([_CJob]), ({"x": arr, "n": 2, "spare": [None, 0x30]},),
         ({"x": CAIObject(cai(0x1000, typestr="<i4")), "n": 2},)),
        (kernarg.Signature.from_ptx(compile_ptx('extern "C" __global__ void k(int a, '
                                                'unsigned b, float* p) {}'), "k"),
         (-1, 2**32 - 1, 0x3000), (2**32, 0, 0)),
        (kernarg.Signature.from_source(STRUCT_SOURCE, "k"),
         ({"x": 0x1000, "n": 3, "in": [(1, 2.0), {"d": 3.0}]}, (1, 2), 5, {"c": 1}, (2, True)),
         ({"n": 1.5}, (0, 0), 0, (0,), (0, False))),
        (kernarg.Signature.from_source(PICKLE_DEFAULTS_SOURCE, "k"), (None,), ()),
        (kernarg.Signature.from_source('__device__ float table[4]; extern "C" __global__ '
                                       'void k(int n, const float* t = table + 1) {}', "k"),
         (1, None), (1,)),
        (kernarg.Signature("int n, unsigned char c = 7"), (1,), (1, 256)),
    ]


def _outcome(sig, args):
    try:
        block = sig.pack(args)
    except Exception as exc:
        return type(exc), str(exc)
    return bytes(block), block.producer_streams


@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy"])
def test_a_signature_pickles_and_copies_as_the_same_layout_and_packer(how, monkeypatch):
    # A Signature pickles as what was read to lay it out, not as what it was read from: the
    # copy lays out, packs and refuses exactly as the original does, with the same defaults
    # (NVRTC's evaluations too) and the same reason where a default stops the others, and is
    # made again without the compiler.
    import copy

    import kernarg._nvrtc as nvrtc

    cases = _pickle_cases()
    monkeypatch.setattr(nvrtc, "compile_program", lambda *a, **kw: pytest.fail("compiled"))
    protocols = range(2, pickle.HIGHEST_PROTOCOL + 1)
    for sig, good, bad in cases:
        if how == "pickle":
            again = [pickle.loads(pickle.dumps(sig, protocol)) for protocol in protocols]
        else:
            again = [getattr(copy, how)(sig)]
        for other in again:
            assert type(other) is type(sig) and other is not sig
            for name in ("offsets", "sizes", "alignments", "nbytes", "names", "types",
                         "records", "defaults", "default_texts"):
                assert getattr(other, name) == getattr(sig, name), (sig, name)
            assert repr(other) == repr(sig) and len(other) == len(sig)
            assert _outcome(other, good) == _outcome(sig, good)
            assert isinstance(_outcome(sig, good)[0], bytes), sig
            assert _outcome(other, bad) == _outcome(sig, bad)
            assert not isinstance(_outcome(sig, bad)[0], bytes), sig
    # What the cases above stand for, checked on one copy each.
    first = pickle.loads(pickle.dumps(cases[0][0]))
    with pytest.raises(TypeError, match=r"default argument 'N', which kernarg cannot evaluate"):
        first.pack(cases[0][2])
    assert pickle.loads(pickle.dumps(cases[5][0])).defaults[2] == 0.5     # 2 * A, by NVRTC
    with pytest.raises(TypeError, match=r"'table \+ 1', which NVRTC evaluated to the address"):
        pickle.loads(pickle.dumps(cases[6][0])).pack(cases[6][2])
    assert pickle.loads(pickle.dumps(cases[3][0])).pack((-1, 2**32 - 1, 0))     # either sign
    records = pickle.loads(pickle.dumps(cases[2][0])).records[0]
    assert records.names == ("x", "n", "spare") and records.fields["x"][0].metadata
