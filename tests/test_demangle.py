"""Naming template instantiations as C++ does in PTX, cubins and their variables
(``kernarg._demangle``), checked against NVRTC: each random name expression NVRTC lowers to a
mangled symbol must read back as that template with those arguments, and be the entry
``from_ptx`` and ``from_cubin`` find for the name as written."""
import random

import numpy as np
import pytest

import kernarg
from kernarg._demangle import cxx_name, demangle, template_key
from kernarg._nvrtc import compile_program
from kernarg._signature import ptx_entry_name, split_template_name

SOURCE = r"""
#include <cuda_fp16.h>
struct Pair { float a; int b; };
namespace ns {
struct S { int x; };
template <class T, int N> struct Box { T v[N]; };
namespace deep { struct D { char c; }; }
template <class T> __global__ void inner(T* p) {}
}
template <class T> __global__ void one(T* p) {}
template <class A, class B> __global__ void two(A* a, B* b) {}
template <int N, class T = float> __global__ void ni(T* p) {}
template <class... T> __global__ void pack(int n) {}
template <bool B, char C, short S, unsigned char U, long long L, unsigned long long Q>
__global__ void lits() {}
namespace { template <class T> __global__ void anon(T* p) {} }
"""
SCALARS = ("char", "signed char", "unsigned char", "short", "short int", "unsigned short",
           "int", "unsigned", "unsigned int", "signed", "long", "long int", "unsigned long",
           "long long", "long long int", "unsigned long long", "float", "double", "bool",
           "__half", "float2", "int4", "Pair", "ns::S", "ns::deep::D")


def _type(rng, depth=0):
    roll = rng.random()
    if depth < 2 and roll < 0.15:
        return f"ns::Box<{_type(rng, depth + 1)}, {rng.randint(1, 9)}>"
    base = rng.choice(SCALARS)
    if roll < 0.35:
        base = rng.choice(("const ", "")) + base + "*"
    elif roll < 0.45:
        base = base + " const*"
    elif roll < 0.5:
        base = "const " + base
    return base


def _expression(rng, pool):
    kind = rng.randrange(7)
    if kind == 0:
        return f"one<{_type(rng)}>"
    if kind == 1:       # the same types twice: substitutions (S_, S0_) in the symbol
        a = _type(rng) if rng.random() < 0.5 else rng.choice(pool)
        return f"two<{a}, {rng.choice((a, _type(rng), a + '*'))}>"
    if kind == 2:
        n = rng.randint(-99, 99)
        return f"ni<{n}>" if rng.random() < 0.5 else f"ni<{n}, {_type(rng)}>"
    if kind == 3:
        return f"pack<{', '.join(_type(rng) for _ in range(rng.randint(0, 4)))}>"
    if kind == 4:
        c = rng.choice(("'A'", "'z'", "'\\n'", "65", "-3"))
        return (f"lits<{rng.choice(('true', 'false', '1', '0'))}, {c}, {rng.randint(-300, 300)}, "
                f"{rng.randint(0, 255)}u, {rng.randint(-2**40, 2**40)}LL, "
                f"{rng.randint(0, 2**63)}ull>")
    if kind == 5:
        return f"ns::inner<{_type(rng)}>"
    return f"anon<{_type(rng)}>"


def _keys(args):
    return [template_key(a) for a in args]


@pytest.mark.parametrize("seed", range(3))
def test_names_nvrtc_lowers_read_back_as_the_instantiations_they_name(seed):
    rng = random.Random(seed)
    pool = [_type(rng) for _ in range(4)]
    expressions = sorted({_expression(rng, pool) for _ in range(40)})
    compiled = compile_program(SOURCE, name_expressions=expressions)
    entries = sorted(set(compiled.lowered.values()))    # (`short` and `short int`: one)
    for expression, symbol in compiled.lowered.items():
        qualified, args = split_template_name(expression)
        name, theirs = demangle(symbol)
        assert name == qualified, (expression, symbol)
        # The arguments written, then those the template's defaults add (ni<N>: T = float).
        assert _keys(theirs)[:len(args)] == _keys(args), (expression, symbol, theirs)
        assert _keys(theirs)[len(args):] in ([], ["float"]), (expression, theirs)
        # The name as written finds the symbol among all of them, as does its C++ name; one
        # the template's defaults complete is refused where others begin with its arguments.
        alike = [e for e in entries if e != symbol and demangle(e)[0] == name and
                 _keys(demangle(e)[1])[:len(args)] == _keys(args)]
        if len(args) < len(theirs) and alike:
            with pytest.raises(LookupError, match=f"can be any of {len(alike) + 1} kernels"):
                ptx_entry_name(entries, expression)
        else:
            assert ptx_entry_name(entries, expression) == symbol, (expression, symbol)
        assert ptx_entry_name(entries, cxx_name(symbol)) == symbol
        assert f".entry {symbol}(" in compiled.ptx


@pytest.mark.parametrize("symbol, name, args", [
    ("_Z4axpyIfLi4EiEvPT_PKS0_S0_T1_", "axpy", ["float", 4, "int"]),
    ("_ZN2ns5innerINS_4PairEEEvT_", "ns::inner", ["ns::Pair"]),
    ("_Z3oneIN2ns3BoxINS0_4PairELi1EEEEvT_", "one", ["ns::Box<ns::Pair, 1>"]),
    ("_Z4litsILb1ELc65ELj7ELln9EEvi", "lits", [True, 65, 7, -9]),
    ("_Z4packIJEEvDpT_", "pack", []),
    ("_Z2tvIfE", "tv", ["float"]),                  # a variable template's instantiation
    ("_ZN2ns1fEf", "ns::f", None),
    ("_Z1fPf", "f", None),
    ("_ZN50_GLOBAL__N__00000000_17_kernarg_source_cu__Z3usePf4anonIdEEvT_", "anon", ["double"]),
    ("_ZN2ns5innerIKPfEEvT_", "ns::inner", ["float* const"]),
    ("_Z3oneISt5arrayIiLm3EEEvv", "one", ["std::array<int, 3>"]),
    # ABI-versioning inline namespaces, which code leaves out (NVRTC 13.5's for CCCL's types)
    ("_Z1kIN4cuda3std3__47complexIfEEEvPT_", "k", ["cuda::std::complex<float>"]),
    ("_Z1kIN4cuda3std3__44pairIifEEEvPT_", "k", ["cuda::std::pair<int, float>"]),
    ("_ZN3cub17CUB_200200_800_NS6detail6reduce6kernelIfEEvPT_", "cub::detail::reduce::kernel",
     ["float"]),
])
def test_symbols_read_as_their_cxx_names(symbol, name, args):
    found = demangle(symbol)
    assert found[0] == name
    assert found[1] == args if args is None else _keys(found[1]) == _keys(args)


@pytest.mark.parametrize("symbol", [
    "saxpy", "_Z", "_Z4axp", "_Z4axpyI", "_Z4axpyIfLi4", "_Z3oneIS5_EvT_", "_ZN2nsE",
    "_Z3oneIXadL_Z1xEEEvv", "_Z3oneILf3f800000EEvv", "_ZZ4mainE1x", "_ZN1S3getEv" + "I" * 5000,
    "_Z3one" + "IN1a" * 3000, "_Z3oneI" + "P" * 5000 + "fEvv",
    # Text quadratic in the symbol's length (each prefix of a nested name is a substitution
    # candidate), or a long name referred back to again and again: the first, 400 kB long, was
    # killed for memory (tens of GB) before the reader kept to a budget.
    "_ZN" + "1a" * 200000 + "E",
    "_Z1fIN1a" + "1b" * 3000 + "E" + f"S{np.base_repr(3000, 36)}_" * 100000 + "E",
    "_Z1fI" + "P" * 900 + "i" + f"S{np.base_repr(899, 36)}_" * 20000 + "E",
    "_ZNIiE1aE", "_ZNI1aE",     # arguments of no name: an IndexError (fuzz_parse, session 61)
])
def test_what_cannot_be_read_is_none_never_an_error(symbol):
    # Cut short, unknown substitutions, expressions and float literals as arguments, local
    # names, deep nesting: None (the caller then names the symbol itself), never an exception.
    found = demangle(symbol)
    assert found is None or isinstance(found[0], str)
    assert isinstance(cxx_name(symbol), str)


@pytest.mark.parametrize("written, canonical", [
    ("unsigned", "unsigned int"), ("long int", "long"), ("long long int", "long long"),
    ("unsigned long long int", "unsigned long long"), ("short int", "short"),
    ("signed", "int"), ("signed char", "signed char"), ("float const *", "const float*"),
    ("float * const", "float*const"), ("ns::Box< int ,2 >", "ns::Box<int,2>"),
    ("7u", 7), ("-9LL", -9), ("0x10", 16), ("'A'", 65), ("'\\n'", 10), ("true", 1),
    ("(3)", 3), ("1'000", 1000), ("010", 8),
    ("0X'", "0X'"), ("0b''", "0b''"),      # no digits: no literal (was a ValueError)
])
def test_written_arguments_are_compared_in_one_form(written, canonical):
    assert template_key(written) == canonical


def test_instantiations_the_arguments_do_not_tell_apart_are_refused_naming_them():
    entries = ["_Z4axpyIfLi4EiEvPT_PKS0_S0_T1_", "_Z4axpyIfLi8EsEvPT_PKS0_S0_T1_"]
    with pytest.raises(LookupError, match=r"kernel 'axpy<float>' can be any of 2 kernels in "
                                          r"the PTX \(axpy<float, 4, int>, axpy<float, 8, "
                                          r"short>\): give each template argument"):
        ptx_entry_name(entries, "axpy<float>")
    assert ptx_entry_name(entries, "axpy<float, 8>") == entries[1]
    with pytest.raises(LookupError, match=r"kernel 'axpy<double>' not found in the PTX .*; did "
                                          r"you mean 'axpy<float, 4, int>' or"):
        ptx_entry_name(entries, "axpy<double>")
    with pytest.raises(LookupError, match=r"kernel 'axpy' is overloaded in the PTX .*, or the "
                                          r"instantiation \(axpy<float, 4, int>, axpy<float, "
                                          r"8, short>\)$"):
        ptx_entry_name(entries, "axpy")


def test_cubins_and_their_variables_are_named_as_cxx_names_them():
    # nvcc-built cubins name template kernels by their mangled symbols only: before, from_cubin
    # and get_global needed them (from_cubin(image, '_Z4axpyIfEvPT_S0_')).
    from kernarg._launch import _cubin_entry, _variable_symbol

    source = ("template <class T> __global__ void axpy(T* x, T a) {}\n"
              "template <class T> __device__ T tv = T(3);\n"
              "namespace ns { template <class T, int N> __device__ T arr[N]; }\n"
              "__global__ void use(float* p) { *p = tv<float> + tv<int> + ns::arr<float, 4>[1]; }")
    compiled = compile_program(source, arch="sm_90",
                               name_expressions=["axpy<float>", "axpy<double>"])
    image = compiled.cubin
    assert _cubin_entry(image, "axpy<double>") == compiled.lowered["axpy<double>"]
    assert _cubin_entry(image, "axpy< float >") == compiled.lowered["axpy<float>"]
    assert _variable_symbol(image, "tv<float>") == "_Z2tvIfE"
    assert _variable_symbol(image, "tv<int>") == "_Z2tvIiE"
    assert _variable_symbol(image, "ns::arr<float, 4>") == "_ZN2ns3arrIfLi4EEE"
    assert _variable_symbol(image, "tv<double>") is None
    assert kernarg.Signature.from_ptx(compiled.ptx, "axpy<double>").sizes == (8, 8)


def test_long_arguments_are_read_in_one_pass():
    # A mangled symbol's argument may be a long name (kernarg reads up to 4M characters of
    # them): `T const` was looked for from every character of a name, quadratic in its length
    # (16,000 characters: 3 s), found reviewing this session's diff.
    chain = "a::" * 20000 + "b"
    assert template_key(chain + " const *") == f"const {chain}*"
    assert template_key("x" * 60000) == "x" * 60000
