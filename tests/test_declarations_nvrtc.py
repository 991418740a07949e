"""Differential check of kernarg's C declaration reader against NVRTC: any parameter list that
``kernarg.Signature(text)`` accepts must be one the compiler accepts, with the same layout.

The texts are drawn at random from a pool of tokens (types, qualifiers, declarator parts,
keywords, comments and punctuation) joined by spaces. Most are not C++; kernarg must refuse
those (which refusal is its business), and lay out the rest exactly as NVRTC does. Texts with a
default argument are left out: kernarg reads a default's value only when it is needed, and says
then what it cannot evaluate. Every type name the pool has is declared in the prelude, so a
pointer to one of them is valid C++."""
import random
import re

import pytest

import kernarg
from kernarg._nvrtc import NvrtcError, compile_to_ptx, nvrtc_version

from nvrtc_oracle import layout, parse_params

PRELUDE = """
#include <cuda_fp16.h>
#define restrict __restrict__
typedef unsigned long size_t;
struct Foo { int a; }; struct x { int a; }; struct n { int a; };
template <class T, int N = 1> struct Box { T v[N]; };
namespace ns { struct Bar { double d; }; }
"""
POOL = (
    # types (every name is declared above) and their qualifiers
    "int", "unsigned", "long", "short", "char", "signed", "float", "double", "bool", "void",
    "float2", "uint3", "__half", "size_t", "Foo", "x", "n", "Box<int>", "Box<float, 2>",
    "ns::Bar", "half2", "long long", "wchar_t", "char16_t", "dim3", "const", "volatile",
    "__restrict__", "__restrict", "restrict", "__grid_constant__", "struct", "class",
    "typename",
    # declarator parts
    "*", "*", "*", "&", "&&", "[4]", "[]", "[2][3]", "[0]", "[1]", "(", ")", "(*", "(&",
    "(int)", ")(", "<int>", "<5>",
    # what no parameter declaration has, but a careless one might
    "::", ":", ";", "=", "= 3", "5", "0x10", "...", "@", "~", "{", "}", ".", "template", "auto",
    "operator", "return", "/* c */", "// c\n", "/*", "*/",
)


def compile_ptx(source):
    # compute_75: __grid_constant__ needs 7.0 or later, and CUDA 12's NVRTC compiles for
    # compute_52 by default (CUDA 13's, which has nothing older, for compute_75).
    return compile_to_ptx(source, options=("--std=c++17", "-default-device",
                                           "--gpu-architecture=compute_75"), name="oracle.cu")


def _texts(seed, count):
    rng = random.Random(seed)
    return sorted({" ".join(rng.choice(POOL) for _ in range(rng.randint(1, 6)))
                   for _ in range(count)})


def _accepted(texts):
    out = []
    for text in texts:
        try:
            sig = kernarg.Signature(text)
        except (TypeError, ValueError) as exc:
            assert str(exc), text
            continue
        if any(d is not None for d in sig.default_texts):
            continue
        if re.search(r"\(\s*(?:x|n|Foo)\s*\)", text):
            # `int (x)` declares a parameter named x, unless x is a type, as it is here: then
            # a function's (a pointer, 8 bytes). Which one, a parameter list alone cannot say.
            continue
        out.append((text, sig))
    return out


def _nvrtc_layout(text):
    try:
        ptx = compile_ptx(PRELUDE + f'extern "C" __global__ void k({text}\n) {{}}\n')
    except NvrtcError as exc:
        return "NVRTC refuses it: " + " ".join(
            line.strip() for line in str(exc).splitlines() if "error" in line)
    return layout(parse_params(ptx, "k"))


@pytest.mark.parametrize("seed", range(8))
def test_every_declaration_kernarg_accepts_nvrtc_accepts_with_the_same_layout(seed):
    accepted = _accepted(_texts(seed, 3000))
    assert len(accepted) > 20      # the pool makes some valid declarations
    # One translation unit for them all; where it fails, each on its own says which.
    source = PRELUDE + "".join(f'extern "C" __global__ void k{i}({text}\n) {{}}\n'
                               for i, (text, _) in enumerate(accepted))
    try:
        ptx = compile_ptx(source)
        got = {text: layout(parse_params(ptx, f"k{i}")) for i, (text, _) in enumerate(accepted)}
    except NvrtcError:
        got = {text: _nvrtc_layout(text) for text, _ in accepted}
    wrong = [(text, repr(sig), got[text]) for text, sig in accepted
             if got[text] != (sig.offsets, sig.sizes, sig.nbytes)]
    assert not wrong, wrong


@pytest.mark.parametrize("text", [
    "int n", "const float* __restrict__ p", "float* const __restrict__ p", "unsigned long long x",
    "Foo* f", "const struct Foo* f", "Box<float, 2>* b", "const ::ns::Bar* b", "float2 v",
    "int (*f)(const char*, ...)", "float (*rows)[4]", "int a[4]", "float m[][4]",
    "const float& r", "x* p", "uint3 u", "int (m)", "__half h", "signed char c", "long double d",
])
def test_valid_declarations_are_accepted_with_nvrtcs_layout(text):
    # The other side of the differential test: declarations that are C++ stay accepted.
    sig = kernarg.Signature(text)
    assert _nvrtc_layout(text) == (sig.offsets, sig.sizes, sig.nbytes)


VECTOR_NAMES = [f"{base}{count}{suffix}"
                for base in ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong",
                             "longlong", "ulonglong", "float", "double")
                for count in (1, 2, 3, 4) for suffix in ("", "_16a", "_32a")]


def test_every_vector_name_is_a_type_exactly_when_nvrtc_has_it():
    # kernarg once read any `<base><n>_16a`/`_32a` as an aligned vector; CUDA 13 has those
    # variants only of long4, ulong4, longlong4, ulonglong4 and double4 (`float4_32a` was
    # laid out at 32 bytes' alignment, and is no type). CUDA 12 has none of them.
    cuda13 = nvrtc_version() >= (13, 0)
    for name in VECTOR_NAMES:
        text = f"char c, {name} v"
        theirs = _nvrtc_layout(text)
        try:
            sig = kernarg.Signature(text)
        except ValueError as exc:
            assert isinstance(theirs, str), (name, str(exc))
            assert "unknown parameter type" in str(exc), name
            if name.endswith("a"):
                assert "only of long4, ulong4, longlong4, ulonglong4 and double4" in str(exc)
            continue
        if not cuda13 and name.endswith("a"):
            assert isinstance(theirs, str)      # CUDA 13's names, which kernarg knows anyway
            continue
        assert theirs == (sig.offsets, sig.sizes, sig.nbytes), name


def test_the_pool_can_draw_what_kernarg_used_to_accept():
    # Each of these was accepted before the reader checked what its tokens skip; NVRTC refuses
    # them all. Each is a text _texts can draw (pool tokens joined by spaces, at most six): a
    # pool that could no longer draw such texts would make the differential test weak.
    for text in ("int ; n", "unsigned * char", "* int", "int n const", "struct int",
                 "int float", "short (*", "unsigned )", "template *", "int n ...", "bool =",
                 "int n [0]", "void & n"):
        parts = text.split(" ")
        assert len(parts) <= 6 and all(part in POOL for part in parts), text
        with pytest.raises(ValueError):
            kernarg.Signature(text)
        assert isinstance(_nvrtc_layout(text), str), text
