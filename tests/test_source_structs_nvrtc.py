"""Differential check of how ``Signature.from_source`` lays out the structs a kernel's source
defines against NVRTC: for every struct parameter kernarg lays out field by field (its
``records`` entry), each field's offset, and the struct's size and alignment, must be the
compiler's (read from a ``__device__`` array of ``offsetof``/``sizeof``/``alignof`` values in
the PTX). A struct kernarg cannot lay out stays opaque bytes (its record None), which is always
safe; a wrong offset would put a dict's values in the wrong bytes without a word.

The structs are drawn at random: scalar, vector, pointer and array fields, several declarators
per member, default member initializers, structs nested by value, explicit alignment, typedefs,
struct templates (named by their instantiations), comments, member functions, base classes,
classes, unions, and structs and unions defined in place without a name (anonymous ones too)."""
import random
import re
import struct

import numpy as np
import pytest

import kernarg
from kernarg._nvrtc import NvrtcError, cccl_include_dir

from nvrtc_oracle import compile_ptx, field_offsets

PRELUDE = ("#include <cuda_fp16.h>\n#include <cuda_bf16.h>\ntypedef float real;\n"
           "#define HD __host__ __device__\n"
           "typedef int index_t;\ntypedef unsigned long size_t;\n")
FIELD_TYPES = (
    "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned",
    "long", "long long", "unsigned long long", "float", "double", "bool", "__half", "real",
    "index_t", "float2", "int4", "double2", "char3", "short2", "uint3", "longlong2", "half2",
    "float*", "const int*", "void*", "double* const", "char4", "long2", "ushort4", "double3",
    "__nv_bfloat16", "size_t",
)


# Members that are no data of each object, between the fields: member functions (defined in
# place, with `;` and braces in their bodies, or declared), constructors (with initializer
# lists), operators, static members, aliases, friends and access specifiers.
NOT_DATA = (
    "__host__ __device__ int f{k}() const {{ int s = 0; for (int i = 0; i < 2; ++i) {{ s += i; }}"
    " return s; }}",
    "__device__ void g{k}(int* p, float (*f)(float));",
    "HD float h{k}(float v) const {{ return v; }}",
    "static constexpr int K{k} = 3;",
    "static_assert(sizeof(int) == 4, \"int; {{\");",
    "using A{k} = float;",
    "typedef int (*fn{k})(int);",
    "public:",
    "{name}() = default;\n    __host__ __device__ {name}(int v, int w) = delete;",
    "{name}(const {name}&) = default;",
    "friend __device__ bool operator==(const {name}&, const {name}&) {{ return true; }}",
    "template <class U> __device__ U as{k}() const {{ return U(); }}",
    "__device__ explicit operator bool() const {{ return true; }}",
)
TEMPLATE_ARGS = ("char", "short", "int", "float", "double", "__half", "float2", "double3",
                 "unsigned long long", "bool")


def _in_place(rng, i, k, defined):
    """A member struct or union defined in place without a name (session 63): anonymous
    (``union { float f; int i; };``, whose fields are the struct's), or declaring a member
    (``struct { char c; double d; } s[2];``). No default member initializers: a union may
    have one, on one member."""
    fields = []
    for j in range(rng.randint(1, 3)):
        base = rng.choice(FIELD_TYPES + tuple(defined))
        dims = f"[{rng.randint(1, 3)}]" if rng.random() < 0.2 else ""
        fields.append(f"{base} s{i}m{k}_u{j}{dims};")
    declarator = rng.choice(("", "", f" s{i}m{k}_v", f" s{i}m{k}_v[2]"))
    return f"    {rng.choice(('union', 'union', 'struct'))} {{ {' '.join(fields)} }}{declarator};"


# The heads before a struct's name: nothing, alignments of literals, and (HEAD_MACRO_ALIGNS,
# in a test of their own) macros of the source, whose alignment the compiler is asked.
ALIGNS = ("", "", "", "__align__(16) ", "__align__(8) ", "__align__(4) ", "__align__(2) ",
          "__align__(1) ", "alignas(32) ",
          # the attribute __align__ stands for, read as it is (session 61)
          "__attribute__((aligned(8))) ", "__attribute__((__aligned__(2))) ")
MACROS = "#define ALIGN(n) __align__(n)\n#define ALIGN16 __align__(16)\n#define API\n"
HEAD_MACRO_ALIGNS = ("", "", "ALIGN16 ", "ALIGN(8) ", "ALIGN(4) ", "API ", "API ALIGN(2) ",
                     "__align__(8) ")


def _struct(rng, i, defined, tags, unions, aligns=ALIGNS):
    members, used = [], set()
    template = rng.random() < 0.3       # `template <class T, int N> struct S { T a[N]; ... }`
    # A typedef of an unnamed struct (no tag to name): no constructors, operators of its name.
    unnamed = not template and rng.random() < 0.25
    # A union (session 63): its members all at 0. No base, and no default member initializer
    # (it may have one: kernarg leaves a union with any opaque).
    union = rng.random() < 0.15
    for k in range(rng.randint(1, 6)):
        if rng.random() < 0.15:
            members.append(_in_place(rng, i, k, defined))
            continue
        if rng.random() < 0.1:      # bit-fields (session 63), their bits checked apart
            t = rng.choice(tuple(BIT_TYPES))
            widths = [rng.randint(0 if j else 1, BIT_TYPES[t]) for j in range(rng.randint(1, 2))]
            members.append(f"    {t} " + ", ".join(f"s{i}m{k}_{j} : {w}" if w else f": {w}"
                                                   for j, w in enumerate(widths)) + ";")
            continue
        base = rng.choice(FIELD_TYPES + tuple(defined) * 2)
        if base in tags and rng.random() < 0.5:
            base = ("union " if base in unions else "struct ") + base
        if template and rng.random() < 0.4:
            base = rng.choice(("T", "T", "const T*", "T*"))
        decls = []
        for j in range(1 if "*" in base else rng.choice((1, 1, 1, 2, 3))):
            name = f"s{i}m{k}_{j}"         # (unique: base classes' fields are the struct's)
            if j and rng.random() < 0.3 and "*" not in base:
                name = "*" + name           # `int a, *p;`
            if rng.random() < 0.2:
                name += "[N]" if template and rng.random() < 0.5 else f"[{rng.randint(1, 4)}]"
            if base in FIELD_TYPES and "const" not in base and not union and \
                    rng.random() < 0.15:
                name += rng.choice(("{}", " = {}"))   # a default member initializer
            decls.append(name)
        comment = rng.choice(("", "", " /* a, b; c */", " // one\n"))
        members.append(f"    {base} {', '.join(decls)};{comment}")
        extra = rng.choice(NOT_DATA)
        if rng.random() < 0.25 and extra not in used and not (
                unnamed and ("{name}" in extra or "static " in extra)):
            # what takes no byte of an object
            used.add(extra)
            members.append("    " + extra.format(name=f"S{i}", k=k))
    # NVRTC gives a struct __align__(N) exactly the alignment N, lower than its members' too.
    align = rng.choice(aligns)
    name = f"S{i}"
    # Base classes (session 62): structs drawn before, laid out first, their tail padding
    # kept or filled as NVRTC does.
    # A class (session 62), its members public, and its bases (private by default).
    key = "class" if not unnamed and rng.random() < 0.2 else "struct"
    if union:
        key = "union"
    if key == "class":
        members.insert(0, "  public:")
    bases = ""
    bases_drawn = [d for d in defined if d not in unions]     # (no union is a base)
    if bases_drawn and not union and rng.random() < 0.35:
        bases = " : " + ", ".join(rng.choice(("", "public ") if key == "struct" else
                                             ("public ",)) + b for b in
                                  rng.sample(bases_drawn,
                                             min(len(bases_drawn), rng.choice((1, 1, 2)))))
    if template:                # named by an instantiation, the extent's default or not
        text = (f"template <class T, int N = {rng.randint(1, 3)}>\n{key} {align}{name}{bases} {{\n"
                + "\n".join(members) + "\n};\n")
        arg = rng.choice(TEMPLATE_ARGS)
        return text, rng.choice((f"{name}<{arg}>", f"{name}<{arg}, {rng.randint(1, 4)}>"))
    if unnamed:
        return (f"typedef {key} {align}{bases.lstrip()}{{\n" + "\n".join(members)
                + f"\n}} {name};\n", name)
    tags.add(name)
    return f"{key} {align}{name}{bases} {{\n" + "\n".join(members) + "\n};\n", name


def _constructed(record):
    """Whether struct dtype ``record`` or one inside it has constructors."""
    base = record.subdtype[0] if record.subdtype is not None else record
    return base.fields is not None and ("constructed" in (base.metadata or {}) or any(
        _constructed(base.fields[f][0]) for f in base.names))


def _holds_union(record):
    """Whether struct dtype ``record`` is a union, or has one or its fields inside it."""
    base = record.subdtype[0] if record.subdtype is not None else record
    return base.fields is not None and (
        "overlaps" in (base.metadata or {}) or "union" in (base.metadata or {})
        or any(_holds_union(base.fields[f][0]) for f in base.names))


def _fields(record):
    return list(record.names)


def _source(rng, count, aligns=ALIGNS):
    defined, parts, tags, unions = [], [PRELUDE if aligns is ALIGNS else PRELUDE + MACROS], \
        set(), set()
    for i in range(count):
        text, name = _struct(rng, i, defined, tags, unions, aligns)
        if re.search(r"^(?:typedef |template <[^>]*>\n)?union\b", text, re.M):
            unions.add(name)
        parts.append(text)
        defined.append(name)
    return "".join(parts), defined


def _compiler_layouts(source, names, sig):
    """name -> (offsets of the fields kernarg named, size, alignment), as NVRTC says: sizes and
    alignments from a ``__device__`` array of ``sizeof``/``alignof`` values in the PTX, offsets
    from field addresses (nvrtc_oracle.field_offsets; CUDA 12's NVRTC has no offsetof)."""
    fields = {name: _fields(sig.records[i]) if sig.records[i] is not None else []
              for i, name in enumerate(names)}
    values = [f"sizeof({name}), alignof({name})" for name in names]
    table = ('extern "C" __device__ const unsigned long long kernarg_t[] = '
             f'{{{", ".join(values)}}};\n')
    ptx = compile_ptx(source + table)
    m = re.search(r"\.b8 kernarg_t\[(\d+)\](?: = \{([^}]*)\})?;", ptx)
    raw = (bytes(int(v) for v in m[2].split(",")) if m[2] else b"").ljust(int(m[1]), b"\0")
    sizes = struct.unpack(f"<{len(raw) // 8}Q", raw)
    offsets = field_offsets(source, {n: f for n, f in fields.items() if f})
    return {name: (tuple(offsets[(name, f)] for f in fields[name]), sizes[2 * i],
                   sizes[2 * i + 1]) for i, name in enumerate(names)}


def _compiling_sources(rng, rounds, tries, aligns=ALIGNS):
    """Up to ``rounds`` random sources (of ``tries`` drawn) of 8 structs and a kernel ``k``
    taking each, that NVRTC compiles: ``(source, names, from_source's signature)``. A round's
    parameters may pass the parameter space (structs of arrays of structs: CUDA 13's 32764
    bytes, or NVRTC 12.9's 4096 where it says so), and such a round is drawn again, so that
    the counts the tests assert hold for either NVRTC."""
    done = 0
    for _ in range(tries):
        if done == rounds:
            return
        source, names = _source(rng, 8, aligns)
        params = ", ".join(f"{n} p{i}" for i, n in enumerate(names))
        source += f'extern "C" __global__ void k({params}) {{}}\n'
        try:
            sig = kernarg.Signature.from_source(source, "k")
        except NvrtcError as exc:
            assert "parameter space overflowed" in str(exc)
            continue
        done += 1
        yield source, names, sig


@pytest.mark.parametrize("seed", range(6))
def test_source_structs_kernarg_lays_out_are_laid_out_as_nvrtc_does(seed):
    laid_out = initialized = templates = constructed = 0
    # Five rounds that compile, of ten at most.
    for full, names, sig in _compiling_sources(random.Random(seed), 5, 10):
        compiler = _compiler_layouts(full, names, sig)
        for i, name in enumerate(names):
            offsets, size, align = compiler[name]
            # (The parameter's own size is the PTX's, which can exceed sizeof: NVRTC passes a
            # struct __align__(N) below its members' alignment in a parameter rounded up to
            # that alignment. kernarg then finds the sizes differ and keeps the bytes opaque.)
            record = sig.records[i]
            if record is None:
                continue
            laid_out += 1
            templates += "<" in name
            mine = tuple(record.fields[f][1] for f in _fields(record))
            assert (mine, record.itemsize, record.metadata["align"]) == (offsets, size, align), \
                (name, full)
            if "defaulted" in record.metadata:
                # Value-initialized by `{}` initializers, as the compiler evaluated it: zeros;
                # a struct with constructors (at any depth) may have none to evaluate, where
                # one is no constant expression; and one holding a union may have none where
                # NVRTC emits the evaluated value in more bytes than the type has (seed 236,
                # by hand: 184 for a struct of 176, an array of unions in it; kernarg then
                # takes no value: a dict gives every defaulted field).
                if "initial" in record.metadata or not (_constructed(record)
                                                        or _holds_union(record)):
                    assert record.metadata["initial"] == bytes(size), (name, full)
                    initialized += 1
                constructed += "constructed" in record.metadata
    assert laid_out >= 10      # most drawn structs are ones kernarg lays out
    assert initialized >= 3 and templates >= 3, (initialized, templates)
    assert constructed >= 1, constructed


def _macro_headed(source):
    """``{name: "own" or "base"}`` of the structs of ``source`` (as _source draws them) whose
    head holds one of MACROS' names, or else a base's at any depth."""
    heads = {m[2]: (bool(re.search(r"\b(?:ALIGN16|ALIGN|API)\b", m[1])), m[3] or "")
             for m in re.finditer(r"^(?:struct|class|union) ([^{]*?)(S\d+)(?: : ([^{]*))? \{",
                                  source, re.M)}
    def headed(name):
        own, bases = heads.get(name, (False, ""))
        return own or any(headed(b) for b in re.findall(r"S\d+", bases))

    return {name: "own" if heads[name][0] else "base" for name in heads if headed(name)}


# Seeds whose draws lay out a struct whose head holds no macro but a base's does (about one
# seed in four draws none, by hand over seeds 0-7), so that each run reaches that path.
@pytest.mark.parametrize("seed", [0, 2, 7])
def test_random_structs_whose_heads_hold_macros_are_laid_out_as_nvrtc_does(seed):
    # As the test above, with macros of the source in the structs' heads (session 65) and so
    # in their bases' (session 67): those laid out must be as NVRTC lays them out, and some
    # are, one whose head holds none but a base's does among them.
    laid_out = headed = by_base = 0
    for full, names, sig in _compiling_sources(random.Random(1000 + seed), 4, 8,
                                               HEAD_MACRO_ALIGNS):
        compiler = _compiler_layouts(full, names, sig)
        macro_headed = _macro_headed(full)
        for i, name in enumerate(names):
            record = sig.records[i]
            if record is None:
                continue
            offsets, size, align = compiler[name]
            mine = tuple(record.fields[f][1] for f in _fields(record))
            assert (mine, record.itemsize, record.metadata["align"]) == (offsets, size, align), \
                (name, full)
            laid_out += 1
            how = macro_headed.get(name.split("<")[0])
            headed += how is not None
            by_base += how == "base"
    assert laid_out >= 8 and headed >= 3, (laid_out, headed)
    assert by_base >= 1, by_base


def test_a_struct_aligned_below_its_members_is_laid_out_with_that_alignment():
    # NVRTC gives a struct __align__(N) exactly the alignment N, even below its members'; a
    # struct holding one places it at a multiple of N. kernarg used N only where it raised the
    # alignment, so here it put `inner` at 16 where the compiler puts it at 8: a dict's values
    # for `inner` went into the wrong bytes of a struct whose size and alignment were right.
    source = PRELUDE + """
struct Wide { float2 a; longlong2 b; };
struct __align__(8) Low { char3 c; Wide w; };
struct __align__(16) Outer { char3 c; Low inner; };
extern "C" __global__ void k(Outer o) {}
"""
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None
    assert [record.fields[f][1] for f in record.names] == [0, 8]
    inner = record.fields["inner"][0]
    assert (inner.itemsize, inner.metadata["align"]) == (48, 8)
    assert _compiler_layouts(source, ["Outer"], sig)["Outer"] == ((0, 8), 64, 16)


MEMBER_STRUCTS = PRELUDE + """
struct MyKernel { struct Params { const float* x; float* y; int n; }; };
namespace ns {
struct Op {
    struct Inner { short a; char3 c; };
    struct __align__(16) Params {
        Inner in; double d; Inner more[2];
        struct Deep { int q; double2 w; };
        struct Two { char t; Deep deep; } two;
        Deep after;
    };
};
}
struct Params { char c; };                      // another Params, at namespace scope
__device__ void local() { struct Params { double z; }; }
template <class T, int N = 2> struct Gemm {     // a struct template's member types
    using Element = T;
    struct Arguments { int m; char3 c; };
    struct Params {
        const Element* a; T alpha; Arguments args; T acc[N];
        struct Epilogue { T beta; short s; } epilogue;
        MyKernel::Params other; ns::Op::Inner inner;    // names of the source around it
    };
};
template <typename K> __global__ void device_kernel(typename K::Params params) {}
"""


@pytest.mark.parametrize("name, compiled", [
    ("device_kernel<MyKernel>", "MyKernel::Params"),
    ("device_kernel<ns::Op>", "ns::Op::Params"),
    ("device_kernel<Gemm<double>>", "Gemm<double>::Params"),
    ("device_kernel<Gemm<__half, 3>>", "Gemm<__half, 3>::Params"),
    ("device_kernel<Gemm<char3, 1>>", "Gemm<char3, 1>::Params"),
])
def test_member_structs_are_laid_out_as_nvrtc_does(name, compiled):
    # CUTLASS's pattern, `typename Kernel::Params params`: a struct defined inside another
    # (at any depth, its own member types looked up in it first) was opaque bytes before
    # session 60, and a struct defining member types was too; one inside a struct template
    # (Kernel = Gemm<double>), before session 61.
    sig = kernarg.Signature.from_source(MEMBER_STRUCTS, name)
    record = sig.records[0]
    assert record is not None
    offsets, size, align = _compiler_layouts(MEMBER_STRUCTS, [compiled], _Named(record))[compiled]
    assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
            record.metadata["align"]) == (offsets, size, align)
    if compiled == "ns::Op::Params":
        deep = record.fields["two"][0].fields["deep"][0]
        assert deep.metadata["name"] == "Op::Params::Deep"     # not a Deep of another scope
        assert record.fields["after"][0] is deep


class _Named:
    """What _compiler_layouts reads of a signature: its records."""

    def __init__(self, record):
        self.records = [record]

def _as_nvrtc_lays_it_out(source, compiled, record):
    """Assert that ``record`` (a struct parameter's, laid out by kernarg) has the offsets of
    its fields, the size and the alignment NVRTC gives struct ``compiled`` in ``source``."""
    assert record is not None
    offsets, size, align = _compiler_layouts(source, [compiled], _Named(record))[compiled]
    assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
            record.metadata["align"]) == (offsets, size, align)
    return size



def test_member_structs_nested_deeply_are_read_once():
    # 2,000 structs each defined in the one before: each definition's end was looked for apart,
    # quadratic (2.2 s, before session 60); and each body was copied, so the copies were
    # quadratic too (30,000 deep: some 8 GB, before session 61). A member struct with no
    # fields of its own (only member types) stays opaque bytes; a member type named from
    # another struct is found.
    from kernarg._nvrtc import compile_to_ptx

    ptx = compile_to_ptx('struct S { int q; }; extern "C" __global__ void k(S s) {}')
    chain = "".join(f"struct A{i} {{ " for i in range(30000)) + "int q;" + " };" * 30000
    for name, laid_out in (("A0::A1::A2::A3::A4::A5::A6::A7::A8::A9::A10::A11::A12::A13::"
                            "A14::A15::A16::A17::A18::A19::A20::A21::A22::A23::A24::A25::A26::"
                            "A27::A28::A29::A30", False),
                           ("A29999", False)):
        source = chain + f'\nextern "C" __global__ void k({name} s) {{}}\n'
        sig = kernarg.Signature._from_source_and_ptx(source, "k", ptx)
        assert sig.sizes == (4,) and (sig.records[0] is not None) == laid_out
    two = "struct A { struct B { int q; }; };\nstruct C { A::B b; };\n"
    sig = kernarg.Signature._from_source_and_ptx(
        two + 'extern "C" __global__ void k(C s) {}', "k", ptx)
    assert sig.records[0].fields["b"][0].metadata["name"] == "A::B"


# Enumerators an enumeration without a fixed type may have: literals (from whose range NVRTC
# picks the underlying type: int, unsigned int, long, unsigned long), and constant expressions
# of them and of the enumerators before ({prev}), which kernarg evaluates as C++ does since
# session 63; a cast it does not (the enumeration's type is then the PTX's, and a struct
# holding one stays opaque).
ENUMERATORS = ("", "", "3", "-1", "0x7fffffff", "0x80000000u", "4294967295", "0x100000000",
               "-2147483649LL", "'a'", "true", "1 << 3", "-0x80000000LL", "(int)3",
               "1 << 31", "1u << 31", "~0", "~0u", "(1 << 4) - 1", "-7 / 2", "-7 % 3",
               "{prev} | 0x10", "{prev} * 2 + 1", "-{prev}", "1ll << 40", "0x7fffffff - {prev}",
               "'a' + !0", "{prev} >> 1", "~{prev} & 0xff")
FIXED_TYPES = ("short", "unsigned char", "signed char", "long long", "unsigned", "int", "char",
               "unsigned short", "index_t", "long", "bool")


def _enum(rng, i):
    """An enumeration's definition (and what precedes it) and the name code gives it."""
    scoped = rng.choice(("", "", "class ", "struct "))
    fixed = rng.choice((None, None) + FIXED_TYPES)
    if fixed is None:       # (a scoped one's type is int)
        items = [rng.choice(ENUMERATORS[:4] + ENUMERATORS[9:12] if scoped else ENUMERATORS)
                 for _ in range(rng.randint(0, 4))]
        # (An enumerator before to refer to, one with an initializer: after one without,
        # its type may be one C++ leaves unspecified, which kernarg does not guess; or a
        # literal.)
        items = [v.replace("{prev}", f"E{i}_{k - 1}" if k and items[k - 1] else "5")
                 for k, v in enumerate(items)]
    else:       # a fixed type's enumerators must fit it
        items = [rng.choice(("", "", "1", "0", "true" if fixed == "bool" else "7"))
                 for _ in range(rng.randint(1, 3))]
    if fixed == "bool":
        items = items[:2]
    body = ", ".join(f"E{i}_{k}" + (f" = {v}" if v else "") for k, v in enumerate(items))
    head = f"enum {scoped}E{i}" + (f" : {fixed}" if fixed else "")
    form = rng.choice(("plain", "member", "namespace", "typedef", "declared"))
    if form == "typedef" and not scoped:
        return f"typedef enum {{ {body} }} E{i};\n", f"E{i}"
    if form == "member":
        return f"struct H{i} {{ int pad; {head} {{ {body} }}; }};\n", f"H{i}::E{i}"
    if form == "namespace":
        return f"namespace n{i} {{ {head} {{ {body} }}; }}\n", f"n{i}::E{i}"
    if form == "declared" and (scoped or fixed):    # declared first, defined later
        return f"{head};\n{head} {{ {body} }};\n", f"E{i}"
    return f"{head} {{ {body} }};\n", f"E{i}"


@pytest.mark.parametrize("seed", range(4))
def test_enumerations_are_read_as_nvrtc_types_them(seed):
    # Differential: each random enumeration's type as kernarg reads it, as a parameter and as
    # a struct's field, is NVRTC's underlying type (static_assert on __underlying_type), and a
    # struct of them is laid out at NVRTC's offsets. Before session 61 every enumeration was
    # the PTX's .uN (either sign), and a struct with one was opaque bytes.
    rng = random.Random(seed)
    known = structs = 0
    for _ in range(4):
        parts, names = [PRELUDE], []
        for i in range(8):
            text, name = _enum(rng, i)
            parts.append(text)
            names.append(name)
        fields = " ".join(f"char c{i}; {n} e{i};" for i, n in enumerate(names))
        params = ", ".join(f"{n} p{i}" for i, n in enumerate(names))
        source = ("".join(parts) + f"struct S {{ {fields} }};\n"
                  f'extern "C" __global__ void k({params}, S s) {{}}\n')
        try:
            sig = kernarg.Signature.from_source(source, "k")
        except NvrtcError as exc:   # an enumerator drawn past int: `0x7fffffff * 2 + 1`
            assert "must have a constant value" in exc.log or \
                "result is out of range" in exc.log, exc.log
            continue
        checks = []
        for i, name in enumerate(names):
            if not sig.types[i].startswith("."):
                known += 1
                checks.append(f"static_assert(kernarg_same<__underlying_type({name}), "
                              f"{sig.types[i]}>::value, \"{name}\");")
            else:
                # Only an enumerator kernarg does not evaluate (a cast) leaves it unknown.
                assert "(int)" in parts[i + 1], (name, parts[i + 1])
        compile_ptx(source + "template <class A, class B> struct kernarg_same { enum { value "
                    "= 0 }; }; template <class A> struct kernarg_same<A, A> { enum { value = "
                    "1 }; };\n" + "\n".join(checks))
        record = sig.records[len(names)]
        if record is None:
            assert any(sig.types[i].startswith(".") for i in range(len(names))), source
            continue
        structs += 1
        offsets, size, align = _compiler_layouts(source, ["S"], _OneRecord(record))["S"]
        assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
                record.metadata["align"]) == (offsets, size, align), source
    assert known >= 16 and structs >= 1, (known, structs)


class _OneRecord:
    """What _compiler_layouts reads of a signature, for one struct."""

    def __init__(self, record):
        self.records = (record,)


def test_the_aligned_attribute_before_a_structs_name_is_read_as_align_is():
    # `struct __attribute__((aligned(16))) B` is what NVRTC's __align__(16) stands for, so the
    # same: exactly that alignment. Before session 61 such a struct was opaque bytes. After
    # the body the attribute is not read: NVRTC ignores it there (F), or, after a typedef's
    # body, aligns without rounding the size (G: 2 bytes aligned to 8).
    source = PRELUDE + """
struct __attribute__((aligned(16))) B { int x; char c; };
struct __attribute__ (( __aligned__( 8 ) )) D { char c; short s; };
typedef struct __attribute__((aligned(4))) { short s; } T;
struct F { int c; } __attribute__((aligned(16)));
typedef struct { short s; } __attribute__((aligned(8))) G;
extern "C" __global__ void k(B b, D d, T t, F f, G g) {}
"""
    sig = kernarg.Signature.from_source(source, "k")
    names = ["B", "D", "T"]
    compiler = _compiler_layouts(source, names, sig)
    for i, name in enumerate(names):
        record = sig.records[i]
        assert record is not None, name
        assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
                record.metadata["align"]) == compiler[name]
    assert [(r.itemsize, r.metadata["align"]) for r in sig.records[:3]] == [(16, 16), (8, 8),
                                                                            (4, 4)]
    assert sig.records[3] is None and sig.records[4] is None


# Bit-fields' types and their widths in bits (session 63).
BIT_TYPES = {"char": 8, "signed char": 8, "unsigned char": 8, "short": 16, "unsigned short": 16,
             "int": 32, "unsigned": 32, "long": 64, "long long": 64, "unsigned long long": 64,
             "bool": 1, "index_t": 32}


def _literal(type_name, width):
    return str(width)


def _bit_members(rng, i, k, depth=0, written=_literal):
    """Members of a struct of bit-fields: named and unnamed ones (width 0 too), two to a
    declaration, between plain fields and, once, an anonymous struct of more; a named one's
    width as ``written(type, width)`` writes it (the draws are the same whatever it writes)."""
    out = []
    for j in range(rng.randint(1, 6)):
        t = rng.choice(tuple(BIT_TYPES))
        bits = BIT_TYPES[t]
        r = rng.random()
        if r < 0.1:
            out.append(f"{t} : 0;")
        elif r < 0.2:
            out.append(f"{t} : {rng.randint(1, bits)};")
        elif r < 0.35:
            out.append(f"{rng.choice(('char', 'short', 'int', 'double', 'char3', 'float2'))} "
                       f"s{i}p{k}_{j};")
        elif r < 0.42 and not depth:
            out.append("struct { " + " ".join(_bit_members(rng, i, f"{k}_{j}", 1, written))
                       + " };")
        else:
            decls = [f"s{i}b{k}_{j} : {written(t, rng.randint(1, bits))}"]
            if rng.random() < 0.3:
                decls.append(f"s{i}c{k}_{j} : {written(t, rng.randint(1, bits))}")
            out.append(f"{t} {', '.join(decls)};")
    return out


def _bit_field_structs(rng, written=_literal):
    """(source, struct names) of ten random structs of bit-fields (_bit_members, the named
    ones' widths as ``written`` writes them), each a parameter of kernel ``k``."""
    parts, names = [PRELUDE], []
    for i in range(10):
        align = rng.choice(("", "", "", "__align__(8) ", "__align__(1) "))
        parts.append(f"struct {align}B{i} {{ " + " ".join(_bit_members(rng, i, 0, 0, written))
                     + " };\n")
        names.append(f"B{i}")
    params = ", ".join(f"{n} p{i}" for i, n in enumerate(names))
    return "".join(parts) + f'extern "C" __global__ void k({params}) {{}}\n', names


def _bits_as_nvrtc_lays_them_out(source, names, sig):
    """Assert that each struct of ``names`` that ``sig`` lays out has NVRTC's offsets of its
    plain fields, size and alignment, and that each named bit-field's bits (read from the PTX
    of a constant of the struct with only that field set, all its bits) are the ones its
    record gives it; the number of structs laid out."""
    from nvrtc_oracle import bitfield_bits

    compiler = _compiler_layouts(source, names, sig)
    named = {n: [b[0] for b in (r.metadata.get("bits", ()) if r is not None else ())]
             for n, r in zip(names, sig.records, strict=True)}
    oracle = bitfield_bits(source, {n: f for n, f in named.items() if f})
    laid_out = 0
    for name, record in zip(names, sig.records, strict=True):
        if record is None:
            continue
        laid_out += 1
        offsets, size, align = compiler[name]
        assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
                record.metadata["align"]) == (offsets, size, align), (name, source)
        for field, first, width, _ in record.metadata.get("bits", ()):
            assert oracle[(name, field)] == ((1 << width) - 1) << first, (name, field, source)
    return laid_out


@pytest.mark.parametrize("seed", range(4))
def test_bit_fields_are_laid_out_as_nvrtc_does(seed):
    # Differential (session 63): random structs of bit-fields, each named bit-field's bits,
    # the plain fields' offsets, the size and the alignment NVRTC's. Before, any bit-field
    # left its struct opaque bytes.
    source, names = _bit_field_structs(random.Random(seed))
    laid_out = _bits_as_nvrtc_lays_them_out(source, names,
                                            kernarg.Signature.from_source(source, "k"))
    # (__align__(1) below a member's alignment: its parameter is rounded up in the PTX.)
    assert laid_out >= 6, laid_out


# The forms a drawn bit-field width is rewritten in (session 68): a constant, a macro, an
# enumerator, sizeof, parentheses, an expression of literals; the literal itself.
NAMED_WIDTHS = "".join(f"constexpr int KW{d} = {d};\n#define MW{d} {d}\nenum {{ EW{d} = {d} }};\n"
                       for d in range(1, 65))
WIDTH_FORMS = ("KW{d}", "MW{d}", "EW{d} + 0", "sizeof(char) * {d}", "({d})", "{d} * 1", "{d}")


def _named_width(forms):
    """A _bit_members ``written`` that writes each width in the next of ``forms``, but a
    bool's and one that fills its type, which the compiler is not asked (see
    test_bit_field_widths_the_compiler_is_not_asked_leave_the_struct_opaque)."""
    count = [0]

    def written(type_name, width):
        if type_name == "bool" or width == BIT_TYPES[type_name]:
            return str(width)
        count[0] += 1
        return forms[count[0] % len(forms)].format(d=width)

    return written


@pytest.mark.parametrize("seed", range(4))
def test_bit_fields_whose_widths_name_something_are_laid_out_as_with_literals(seed):
    # Differential (session 68): the structs of the test above, their named bit-fields' widths
    # written as constants, macros, enumerators, sizeof and expressions, which the compiler is
    # asked, are laid out as with literal widths and as NVRTC lays them out. Before, a width
    # that was not a literal left its struct opaque bytes.
    source, names = _bit_field_structs(random.Random(seed))
    drawn = kernarg.Signature.from_source(source, "k")
    named, _ = _bit_field_structs(random.Random(seed), _named_width(WIDTH_FORMS))
    named = named.replace(PRELUDE, PRELUDE + NAMED_WIDTHS, 1)
    assert "sizeof(char)" in named, named     # (rewritten)
    sig = kernarg.Signature.from_source(named, "k")
    assert sig.records == drawn.records, named
    assert _bits_as_nvrtc_lays_them_out(named, names, sig) >= 6


# Bit-field widths that are no literals (session 68), each the compiler's: (definition, the
# parameter's type, {bit-field: (first bit, width)}).
BIT_WIDTHS = [
    ("#define W 5\nstruct S { int a : W; unsigned b : 3; float c; };", "S",
     {"a": (0, 5), "b": (5, 3)}),
    ("constexpr int K = 3;\nstruct S { unsigned a : K, b : K + 1; short c; };", "S",
     {"a": (0, 3), "b": (3, 4)}),
    # A static member hides the namespace's constant of its name, as C++ looks names up.
    ("constexpr int K = 2;\nstruct S { static constexpr int K = 7; unsigned char a : K; "
     "unsigned char b : 2; };", "S", {"a": (0, 7), "b": (8, 2)}),
    ("enum { E = 4 };\nstruct S { long long a : E * 10; long long b : 30; };", "S",
     {"a": (0, 40), "b": (64, 30)}),
    ("struct S { unsigned a : sizeof(short); int b : (3); char c; };", "S",
     {"a": (0, 2), "b": (2, 3)}),
    ("struct S { unsigned a : 2 * 3; int b : 1 << 2; };", "S", {"a": (0, 6), "b": (6, 4)}),
    ("struct S { unsigned a : 010; unsigned b : 0x3; };", "S", {"a": (0, 8), "b": (8, 3)}),
    ("namespace ns { constexpr int K = 9; struct S { short a : K; short b : K; }; }", "ns::S",
     {"a": (0, 9), "b": (16, 9)}),
    # In a base, in a struct inside (an array of them), in an anonymous struct.
    ("#define W 5\nstruct B { int a : W; };\nstruct S : B { int b : W; };", "S",
     {"a": (0, 5), "b": (32, 5)}),
    ("#define W 5\nstruct Q { int a : W; int z; };\nstruct S { Q q[2]; int b : W + 1; };",
     "S", {"b": (128, 6)}),
    ("#define W 5\nstruct S { struct { unsigned a : W; unsigned b : W; }; int c; };", "S",
     {"a": (0, 5), "b": (5, 5)}),
    # A template's argument in the width, and one as a constant.
    ("template <int N> struct S { unsigned a : N; unsigned b : N * 2; };", "S<3>",
     {"a": (0, 3), "b": (3, 6)}),
    ("constexpr int K = 4;\ntemplate <class T> struct S { T a : K; T b : sizeof(T) * 8 - K; };",
     "S<unsigned short>", {"a": (0, 4), "b": (4, 12)}),
]


@pytest.mark.parametrize("definition, declared, bits", BIT_WIDTHS)
def test_bit_field_widths_that_name_something_are_the_compilers(definition, declared, bits):
    from nvrtc_oracle import bitfield_bits

    source = PRELUDE + definition + f'\nextern "C" __global__ void k({declared} s, int n) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None, sig.types
    found = {b[0]: b[1:3] for b in record.metadata["bits"]}
    assert {f: found[f] for f in bits} == bits
    _as_nvrtc_lays_it_out(source, declared, record)
    oracle = bitfield_bits(source, {declared: list(found)})
    for field, (first, width) in found.items():
        assert oracle[(declared, field)] == ((1 << width) - 1) << first, field


def test_bit_field_widths_and_extents_are_asked_in_one_compilation(compiled):
    # Widths of literals are evaluated by kernarg; the others by the compiler, with the array
    # extents, all in one more compilation.
    literal = ('struct S { unsigned a : 2 * 3, b : (4); float v[2]; };\n'
               'extern "C" __global__ void k(S s) {}\n')
    assert kernarg.Signature.from_source(literal, "k").records[0] is not None
    assert compiled == []
    named = ("#define N 3\nstruct Q { unsigned a : N; double d[N]; };\n"
             "struct S { Q qs[N - 1]; int b : N + 1; };\n"
             'extern "C" __global__ void k(S s) {}\n')
    record = kernarg.Signature.from_source(named, "k").records[0]
    assert record is not None and record.metadata["bits"][0][1:3] == (2 * 32 * 8, 4)
    assert len(compiled) == 1


def test_a_width_the_compiler_gives_is_checked_when_packing():
    # The compiler's width bounds the values a dict gives the field, as a literal's does.
    source = ('#define MODE_BITS 3\nstruct Op { unsigned mode : MODE_BITS; int sign : '
              'MODE_BITS - 1; float scale; };\nextern "C" __global__ void k(Op op) {}\n')
    sig = kernarg.Signature.from_source(source, "k")
    data = bytes(sig.pack(({"mode": 5, "sign": -2, "scale": 2.0},)))
    assert data[0] == 5 | (0b10 << 3)
    assert struct.unpack_from("<f", data, 4) == (2.0,)
    with pytest.raises(OverflowError, match=r"mode.*unsigned int : 3.*8 is outside 0 \.\. 7"):
        sig.pack(({"mode": 8},))
    with pytest.raises(OverflowError, match=r"sign.*int : 2.*2 is outside -2 \.\. 1"):
        sig.pack(({"sign": 2},))


@pytest.mark.parametrize("definition", [
    # A private bit-field: the probe may not name it where the kernel is declared.
    "#define W 5\nclass S { int a : W; public: int c; };",
    # A bool reads back true whichever bit is set; an unnamed bit-field has no name to ask.
    "#define W 1\nstruct S { bool a : W; int c; };",
    "#define W 5\nstruct S { int a : 3; int : W; int c : 4; };",
    # A union's bit-field (C++17 sets only the active member of a union in a constant).
    "#define W 5\nunion S { int a : W; int c; };",
    # No constant of the struct (its constructor is no constexpr one).
    "#define W 5\nstruct S { int a : W; int c; __device__ S() : c(1) {} };",
    # A width that fills its type, or more (C++'s padding bits): the probe counts the type's
    # bits either way, so it cannot tell them apart.
    "#define W 32\nstruct S { int a : W; int c : 3; };",
    "#define W 12\nstruct S { long long a : W; unsigned char b : W; };",
])
def test_bit_field_widths_the_compiler_is_not_asked_leave_the_struct_opaque(definition):
    source = PRELUDE + definition + '\nextern "C" __global__ void k(S s, int n) {}\n'
    sig = kernarg.Signature.from_source(source, "k")
    assert sig.records[0] is None
    assert sig.types[0].endswith(f".b8 [{sig.sizes[0]}]")     # (the PTX's bytes)


@pytest.fixture
def compiled(monkeypatch):
    """The sources from_source compiles during the test, in order (each still compiled)."""
    import kernarg._nvrtc as nvrtc

    texts = []
    cached = nvrtc.compile_program_cached

    def counting(text, **kw):
        texts.append(text)
        return cached(text, **kw)

    monkeypatch.setattr(nvrtc, "compile_program_cached", counting)
    return texts


# Array extents that are not literals (session 64): a constant, a static member, an enumerator,
# a macro, sizeof, a constexpr function, a template's argument in an expression. Before, each
# left its struct opaque bytes. (name of the struct whose shapes are checked, its fields'
# shapes.)
EXTENTS = [
    ("constexpr int K = 3;\nstruct S { float v[K]; int n; };", "S", {"v": (3,)}),
    ("namespace a { constexpr int K = 2; struct S { float v[K][K + 1]; int n; }; }", "a::S",
     {"v": (2, 3)}),
    # A static member hides the namespace's constant of its name, as C++ looks names up.
    ("constexpr int K = 2;\nstruct S { static constexpr int K = 5; float v[K]; char c; };", "S",
     {"v": (5,)}),
    ("enum { E = 4 };\nstruct S { short v[E - 1]; char c; };", "S", {"v": (3,)}),
    ("#define N 4\n#define M (N * 2)\nstruct S { int v[M]; char c; };", "S", {"v": (8,)}),
    ("struct S { char raw[sizeof(double2)]; int n; };", "S", {"raw": (16,)}),
    ("__host__ __device__ constexpr int twice(int x) { return 2 * x; }\n"
     "struct S { float v[twice(3)]; double d; };", "S", {"v": (6,)}),
    ("struct S { float v[2 * 3][1 << 1]; short s[true ? 3 : 1]; };", "S",
     {"v": (6, 2), "s": (3,)}),
    # Structs inside: an array of them (its own extent asked once N is known), one defined in
    # place (a member's, and an anonymous union's fields, which are the struct's), a base's.
    ("#define N 3\nstruct Q { double d[N]; char c; };\nstruct S { Q qs[N - 1]; int n; };", "S",
     {"qs": (2,)}),
    ("constexpr int K = 3;\nstruct S { struct { short s[K]; } pair[K - 1]; int n; };", "S",
     {"pair": (2,)}),
    ("constexpr int K = 3;\nstruct S { union { short s[K]; double d; }; int n; };", "S",
     {"s": (3,)}),
    ("constexpr int K = 3;\nstruct B { float b[K]; };\nstruct S : B { int n; };", "S",
     {"b": (3,)}),
    ("template <class T> struct S { T v[sizeof(T) / 2]; };", "S<double>", {"v": (4,)}),
    ("constexpr int K = 2;\ntemplate <int M> struct S { float v[M * K]; };", "S<3>",
     {"v": (6,)}),
    ("constexpr int K = 2;\ntemplate <int M> struct S { float v[M]; };", "S<K + 1>",
     {"v": (3,)}),
    # CUTLASS's `typename Kernel::Params`, holding the template's argument and a constant.
    ("constexpr int kW = 2;\ntemplate <class T, int N> struct G {\n"
     "    struct Params { T acc[N + 1]; float w[kW]; };\n};", "typename G<float, 2>::Params",
     {"acc": (3,), "w": (2,)}),
]


@pytest.mark.parametrize("definition, declared, shapes", EXTENTS)
def test_array_extents_that_are_constant_expressions_are_laid_out_as_nvrtc_does(
        definition, declared, shapes):
    source = PRELUDE + definition + f'\nextern "C" __global__ void k({declared} s, int n) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None, sig.types
    assert {f: record.fields[f][0].shape for f in shapes} == shapes
    compiled = declared.removeprefix("typename ")
    _as_nvrtc_lays_it_out(source, compiled, record)


def test_array_extents_inside_structs_are_the_compilers():
    # What a struct inside holds is laid out with its extents too: Q's d[N] in S's qs[N - 1],
    # and a dict fills every element where the compiler puts it.
    source = ("#define N 3\nstruct Q { double d[N]; char c; };\n"
              "struct S { Q qs[N - 1]; int n; };\n"
              'extern "C" __global__ void k(S s) {}\n')
    sig = kernarg.Signature.from_source(source, "k")
    q = sig.records[0].fields["qs"][0].base
    assert q.fields["d"][0].shape == (3,) and q.itemsize == 32
    data = bytes(sig.pack(({"qs": [{"d": [1.0, 2.0, 3.0], "c": 7}, {"d": [4.0, 5.0, 6.0]}],
                            "n": 9},)))
    assert struct.unpack_from("<3db", data, 0) == (1.0, 2.0, 3.0, 7)
    assert struct.unpack_from("<3d", data, 32) == (4.0, 5.0, 6.0)
    assert struct.unpack_from("<i", data, 64) == (9,)


def test_array_extents_follow_the_options_macros():
    # A macro given by the options (-DN=7) is what the compiler reads the extent as.
    source = 'struct S { float v[N]; int n; };\nextern "C" __global__ void k(S s) {}\n'
    for n in (7, 2):
        sig = kernarg.Signature.from_source(source, "k", [f"-DN={n}"])
        assert sig.records[0].fields["v"][0].shape == (n,)
        assert sig.sizes[0] == 4 * n + 4


def test_array_extents_in_a_namespaced_kernel_and_a_template_kernel():
    source = ("namespace a {\nconstexpr int K = 2;\nstruct S { float v[K]; int n; };\n"
              "__global__ void k(S s) {}\n}\n"
              "template <class T> struct Box { T v[a::K + 1]; };\n"
              "template <class T> __global__ void t(Box<T> b) {}\n")
    assert kernarg.Signature.from_source(source, "a::k").records[0].fields["v"][0].shape == (2,)
    record = kernarg.Signature.from_source(source, "t<double>").records[0]
    assert record.fields["v"][0].shape == (3,) and record.fields["v"][0].base == np.float64


def test_array_extents_take_one_more_compilation_only_where_one_names_something(compiled):
    # Literal extents are evaluated by kernarg; the others by the compiler, all in one more
    # compilation (an array of structs and what those hold asked together).
    literal = ('struct S { float v[2 * 3]; int n; };\n'
               'extern "C" __global__ void k(S s) {}\n')
    assert kernarg.Signature.from_source(literal, "k").records[0] is not None
    assert compiled == []
    named = ("#define N 3\nstruct Q { double d[N]; char c; };\n"
             "struct S { Q qs[N - 1]; int n; };\n"
             'extern "C" __global__ void k(S s) {}\n')
    assert kernarg.Signature.from_source(named, "k").records[0] is not None
    assert len(compiled) == 1


# The forms a drawn literal extent `[d]` is rewritten in (session 64): a constant, a macro, an
# enumerator, sizeof, an expression of literals; the literal itself.
NAMED_EXTENTS = "".join(f"constexpr int KX{d} = {d};\n#define MX{d} {d}\nenum {{ EX{d} = {d} }};\n"
                        for d in range(1, 5))


def _named_extents(source):
    """``source`` with each literal array extent written another way, in turn (no draws: the
    structs are the ones the seed draws with literals)."""
    forms = ("KX{d}", "MX{d}", "EX{d} + 0", "sizeof(short) * {d} / 2", "({d} + 1) - 1", "{d}")
    count = [0]

    def rewrite(m):
        count[0] += 1
        return "[" + forms[count[0] % len(forms)].format(d=m[1]) + "]"

    return re.sub(r"\[([1-4])\]", rewrite, source)


def _laid_out_as_drawn(rng, rounds, rewrite):
    """Over ``rounds`` random sources of structs that compile (of seven more drawn), each
    rewritten by ``rewrite(text, names)`` (its kernel's too), into ``(text, the structs'
    names as the text names them)``: assert that kernarg lays each struct out as from the
    source as drawn (or neither), and as NVRTC does; the number of records laid out."""
    laid_out = 0
    for source, names, drawn in _compiling_sources(rng, rounds, rounds + 7):
        full, keys = rewrite(source, names)
        sig = kernarg.Signature.from_source(full, "k")
        compiler = _compiler_layouts(full, keys, sig)
        for i, key in enumerate(keys):
            record = sig.records[i]
            assert (record is None) == (drawn.records[i] is None), (key, full)
            if record is None:
                continue
            laid_out += 1
            assert record == drawn.records[i], (key, full)
            assert (tuple(record.fields[f][1] for f in record.names), record.itemsize,
                    record.metadata["align"]) == compiler[key], (key, full)
    return laid_out


@pytest.mark.parametrize("seed", range(4))
def test_structs_with_named_extents_are_laid_out_as_with_literals(seed):
    # Differential (session 64): the structs of the random test above, their extents written
    # as constants, macros, enumerators, sizeof and expressions, must be laid out as NVRTC
    # lays them out, and as kernarg lays out the same structs with literal extents, but for
    # an extent inside a base class the derived struct names the base's name in (none drawn).
    laid_out = _laid_out_as_drawn(random.Random(1000 + seed), 3, lambda source, names: (
        NAMED_EXTENTS + _named_extents(source), names))
    assert laid_out >= 8, laid_out


# Extents of private members (session 65), which `sizeof(s.v)` may not name: asked again through
# an explicit instantiation, where C++ checks no access. (definition, parameter type, shapes.)
PRIVATE_EXTENTS = [
    ("#define N 3\nclass S { float v[N]; public: int n; };", "S", {"v": (3,)}),
    ("class S {\n    static constexpr int K = 5;\n    float taps[K][K - 2];\n    int n;\n"
     "  public:\n    __device__ float first() const { return taps[0][0]; }\n};", "S",
     {"taps": (5, 3)}),
    # Inside private members: an array of classes, a member type that is itself private.
    ("constexpr int K = 2;\nclass In { double d[K + 1]; };\nclass S { In in[K]; char c; };",
     "S", {"in": (2,)}),
    ("class S {\n    struct In { static constexpr int K = 2; float f[K]; short h; };\n"
     "    In in;\n  public:\n    int n;\n};", "S", {}),
    ("namespace ns { class In { short s[sizeof(int) - 1]; public: int q; }; }\n"
     "struct S { ns::In a; private: const ns::In b; };", "S", {}),
    # A private base's member, a protected one's, a class template's.
    ("#define N 3\nclass B { float v[N]; protected: int x; };\nclass S : B { char c; };",
     "S", {"v": (3,)}),
    ("template <int M> class T { static const int L = M * 2; int w[L]; };\n"
     "struct S { T<3> t; double d; };", "S", {}),
    # An alignment that is no literal (`alignas(A)`), of a private member's type: asked too.
    ("constexpr int A = 16;\nstruct alignas(A) In { float f; };\n"
     "class S { char c; In in[2]; public: int n; };", "S", {}),
]


def _public_twin(definition):
    """``definition`` with every member and base public: laid out as it is (no base here has
    tail padding for a derived struct to reuse), and what the oracle can read from outside."""
    definition = re.sub(r"\b(?:private|protected)\s*:", "public:", definition)
    return re.sub(r"\bclass(\s+\w+\s*[:{])", r"struct\1", definition)


@pytest.mark.parametrize("definition, declared, shapes", PRIVATE_EXTENTS)
def test_private_members_extents_are_laid_out_as_nvrtc_does(definition, declared, shapes):
    # Before session 65 each of these structs stayed opaque bytes.
    def source(text):
        return text + f'\nextern "C" __global__ void k({declared} s, int n) {{}}\n'

    record = kernarg.Signature.from_source(source(definition), "k").records[0]
    assert record is not None
    assert {f: record.fields[f][0].shape for f in shapes} == shapes
    _as_nvrtc_lays_it_out(source(_public_twin(definition)), declared, record)


# Struct heads holding the source's macros (session 65). (definition, parameter type, whether
# laid out.)
HEAD_MACROS = [
    ("#define ALIGN16 __align__(16)\nstruct ALIGN16 S { float a; int n; };", "S", True),
    ("#define ALIGN(n) __align__(n)\nstruct ALIGN(16) S { float a; };", "S", True),
    ("#define ALIGNAS(n) alignas(n)\nstruct ALIGNAS(8) In { short s; };\n"
     "struct S { char c; In in[2]; int n; };", "S", True),
    ("#define API\n#define ALIGN(n) __align__(n)\nstruct API ALIGN(8) S final { char c; };",
     "S", True),
    ("#define API\nstruct API S { double d; char c; };\nstruct T { S s; char e; };", "T", True),
    ("#define ALIGN(n) __align__(n)\ntypedef struct ALIGN(16) { float a; } S;", "S", True),
    # With an extent asked too: its alignment and size are asked together, in the second of
    # the two compilations from_source may take for them.
    ("#define API\nconstexpr int K = 3;\nstruct API S { float v[K]; char c; };", "S", True),
    ("#ifdef __CUDACC__\n#define PACKED __attribute__((packed))\n#else\n#define PACKED\n#endif\n"
     "struct PACKED P { int a; int b; };\nstruct S { P p; double d; };", "S", True),
    # Packed with padding to remove: the compiler's size differs from kernarg's (8 against 5),
    # and a parameter holding it is not read, though its size and alignment are the PTX's.
    ("#define PACKED __attribute__((packed))\nstruct PACKED P { char c; int a; };\n"
     "struct S { P p; double d; };", "S", False),
    # Base classes whose heads hold macros (session 67; before, the derived struct stayed
    # opaque bytes): the compiler is asked the base's alignment and size through the derived
    # type, by the base's injected class name (decltype(s)::B), a template's too.
    ("#define ALIGN16 __align__(16)\nstruct ALIGN16 B { float a; };\nstruct S : B { float y; };",
     "S", True),
    ("#define API\nstruct API B { double d; char c; };\nstruct S : public B { char e; };",
     "S", True),
    ("#define API\nstruct API B { double d; char c; };\nstruct M : B { char e; };\n"
     "struct S { int i; M m[2]; };", "S", True),
    ("#define ALIGN(n) __align__(n)\nnamespace ns { template <class T> struct ALIGN(16) Box "
     "{ T t; }; }\nstruct S : ns::Box<int> { char e; };", "S", True),
    ("#define ALIGN(n) __align__(n)\nnamespace ns { struct ALIGN(8) A { int a; }; }\n"
     "struct S : ns::A { char e; };", "S", True),
    # A base named by an alias (a chain of them; a struct's member alias): asked by the name
    # the alias gives, whose injected class name the derived struct has.
    ("#define ALIGN16 __align__(16)\nstruct ALIGN16 B { float a; };\nusing B2 = B;\n"
     "struct S : B2 { float y; };", "S", True),
    ("#define ALIGN16 __align__(16)\nnamespace ns { struct ALIGN16 B { float a; }; }\n"
     "typedef ns::B B2;\nusing B3 = B2;\nstruct S : B3 { float y; };", "S", True),
    ("#define ALIGN16 __align__(16)\nstruct R { struct ALIGN16 In { float a; }; using P = In; };"
     "\nstruct S : R::P { float y; };", "S", True),
    # A private base (a class's, by default): its name is not the caller's to use, and the
    # struct stays opaque bytes.
    ("#define ALIGN(n) __align__(n)\nstruct ALIGN(8) A { int a; };\n"
     "class S : A { public: char e; };", "S", False),
]


def test_a_bases_query_names_it_through_the_derived_object():
    # The key of a base's alignment query (what the compiler is asked is _base_query's text):
    # the base by its injected class name through the object's type, a "." inside template
    # arguments or a call not taken for the object's end.
    from kernarg._signature import _asked_type, _base_of_path

    obj = "(*static_cast<const D*>(nullptr))"
    assert _asked_type(obj + ".") == f"decltype({obj})"
    assert _asked_type(obj + ".B::") == f"decltype({obj})::B"
    assert _asked_type(obj + ".m[0].ns::Box<int>::") == f"decltype({obj}.m[0])::Box"
    assert _asked_type(obj + ".B::A::") == f"decltype({obj})::A"
    assert _base_of_path(obj + ".Box<Lit<1.5>>::") == (obj, "Box")
    assert _asked_type(None) is None and _base_of_path(obj + ".") is None
    assert _base_of_path("B::") is None             # no object


@pytest.mark.parametrize("definition, declared, laid_out", HEAD_MACROS)
def test_structs_whose_heads_hold_macros_are_laid_out_as_nvrtc_does(definition, declared,
                                                                    laid_out):
    # What a head's macro stands for is not read: the compiler is asked the struct's alignment
    # and size. Before session 65 each of these structs stayed opaque bytes.
    source = definition + f'\nextern "C" __global__ void k({declared} s, int n) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    if not laid_out:
        assert sig.records[0] is None, sig.records[0]
        return
    _as_nvrtc_lays_it_out(source, declared, sig.records[0])


# Names in a struct's members looked up as C++ looks them up (session 64): after the struct's
# own members, in its base classes (FlashAttention's Flash_fwd_params uses Qkv_params's
# `using index_t = int64_t;`), and in a struct template's members around the template, not in
# the struct holding its instantiation. (definition, parameter type, {field: numpy type}.)
LOOKUPS = [
    ("struct Qkv_params {\n    using index_t = long long;\n    void *__restrict__ q_ptr;\n"
     "    index_t q_batch_stride;\n    int h, h_k;\n};\n"
     "struct Flash_fwd_params : public Qkv_params {\n    void * __restrict__ o_ptr;\n"
     "    index_t o_batch_stride;\n    float scale_softmax;\n    bool is_causal;\n};",
     "Flash_fwd_params", {"q_batch_stride": "<i8", "o_batch_stride": "<i8", "is_causal": "?"}),
    # A base's base; a member type of a base; the struct's own alias before its base's.
    ("struct A { typedef short S; S a; };\nstruct B : A { short c; };\nstruct D : B { S s; };", "D",
     {"a": "<i2", "c": "<i2", "s": "<i2"}),
    ("struct B { struct In { int a; double d; }; int b; };\nstruct D : B { In i; float f; };",
     "D", {"b": "<i4", "f": "<f4"}),
    ("struct B { using T = int; int b; };\nstruct D : B { using T = double; T x; };", "D",
     {"b": "<i4", "x": "<f8"}),
    # Box's T is the namespace's int, not D's float (the same size: before, a dict's 1.5 for
    # d.b.x was packed as a float where the kernel reads an int).
    ("typedef int T;\ntemplate <class U> struct Box { T x; U y; };\n"
     "struct D { using T = float; Box<short> b; };", "D", {}),
]


@pytest.mark.parametrize("definition, declared, types", LOOKUPS)
def test_names_in_structs_are_looked_up_as_cpp_does(definition, declared, types):
    source = PRELUDE + definition + f'\nextern "C" __global__ void k({declared} s) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None, sig.types
    assert {f: record.fields[f][0].str if record.fields[f][0].kind != "b" else "?"
            for f in types} == types
    _as_nvrtc_lays_it_out(source, declared, record)
    if "Box" in definition:
        box = record.fields["b"][0]
        assert (box.fields["x"][0].str, box.fields["y"][0].str) == ("<i4", "<i2")
        data = bytes(sig.pack(({"b": {"x": 7, "y": -2}},)))
        assert struct.unpack_from("<ih", data) == (7, -2)
        with pytest.raises(TypeError, match="field b.x"):
            sig.pack(({"b": {"x": 1.5}},))


EMPTY = PRELUDE + """
struct Twice { __device__ float operator()(float x) const { return 2 * x; } };
struct Empty {};
struct alignas(8) Wide {};
union Nothing {};
struct P { Empty e; int a; Wide w; char c; Empty es[3]; };
template <class F> __global__ void map(F f, float* out, int n) {}
extern "C" __global__ void kp(P p, Wide w, Nothing u) {}
"""


def test_empty_structs_are_laid_out_and_take_an_empty_dict_or_tuple():
    # A functor (session 64): a struct of member functions only, passed by value as templated
    # kernels take one (`map<Twice>`), is one byte; before, it was opaque bytes, and a call
    # had to pass b"\0". A dict or tuple gives it, and nothing else.
    sig = kernarg.Signature.from_source(EMPTY, "map<Twice>")
    assert sig.records[0].names == () and sig.records[0].itemsize == 1
    assert sig.types[0] == "Twice" and sig.names[0] == "f"
    for given in ({}, ()):
        assert bytes(sig.pack((given, None, 3)))[:1] == b"\0"
    with pytest.raises(TypeError, match=r"parameter 0 \('f'\): a struct \(Twice\) is empty "
                                        r"\(no data member\): give \(\) or \{\}, got 1 value$"):
        sig.pack(((1,), None, 3))
    # As fields, an empty struct takes its byte (its alignment's, with one), as NVRTC lays
    # it out; as a parameter, the same.
    sig = kernarg.Signature.from_source(EMPTY, "kp")
    record = sig.records[0]
    assert [record.fields[f][1] for f in record.names] == [0, 4, 8, 16, 17]
    assert _compiler_layouts(EMPTY, ["P"], sig)["P"] == ((0, 4, 8, 16, 17), 24, 8)
    assert (sig.sizes, sig.alignments) == ((24, 8, 1), (8, 8, 1))
    data = bytes(sig.pack(({"a": 5, "c": 2, "es": [{}, (), {}]}, {}, ())))
    assert data == struct.pack("<4xi8xb7x", 5, 2) + bytes(8) + b"\0"
    with pytest.raises(TypeError, match=r"field e is empty \(no data member\): give \{\} or "
                                        r"\(\), got field 'x'"):
        sig.pack(({"e": {"x": 1}}, {}, {}))


PYTORCH_STRUCTS = PRELUDE + r"""
#define MAX_TENSORINFO_DIMS 25
template <typename T, typename IndexType>
struct TensorInfo {
  __host__ __device__ TensorInfo() : data(nullptr), dims(0) {}
  __host__ __device__ TensorInfo(T* p, int dim, IndexType sz[MAX_TENSORINFO_DIMS],
                                 IndexType st[MAX_TENSORINFO_DIMS]) : data(p), dims(dim) {}
  __host__ __device__ bool isContiguous() const { return dims == 1 && strides[0] == 1; }
  T* data;
  IndexType sizes[MAX_TENSORINFO_DIMS];
  IndexType strides[MAX_TENSORINFO_DIMS];
  int dims;
};
template <typename T, int size_>
struct alignas(16) Array {
  T data[size_];
  __host__ __device__ T operator[](int i) const { return data[i]; }
  Array() = default;
  Array(const Array&) = default;
  Array& operator=(const Array&) = default;
};
template <typename T, typename IndexType>
__global__ void copy_kernel(TensorInfo<T, IndexType> dst, TensorInfo<const T, IndexType> src,
                            IndexType n) {}
template <int N>
__global__ void arr_kernel(Array<char*, N> ptrs, Array<long long, 2 * N> sizes) {}
"""


@pytest.mark.parametrize("name, compiled, shapes", [
    ("copy_kernel<float, unsigned int>", "TensorInfo<float, unsigned int>",
     {"sizes": (25,), "strides": (25,)}),
    ("arr_kernel<3>", "Array<long long, 6>", {"data": (6,)}),
])
def test_pytorchs_kernel_argument_structs_are_laid_out_as_nvrtc_does(name, compiled, shapes):
    # PyTorch's TensorInfo (extents from a macro, constructors) and at::detail::Array (an
    # extent from the template's arguments, `2 * N`): opaque bytes before session 64.
    sig = kernarg.Signature.from_source(PYTORCH_STRUCTS, name)
    record = sig.records[0] if "Tensor" in compiled else sig.records[1]
    assert record is not None, sig.types
    assert {f: record.fields[f][0].shape for f in shapes} == shapes
    _as_nvrtc_lays_it_out(PYTORCH_STRUCTS, compiled, record)


@pytest.mark.parametrize("definition, declared", [
    ("constexpr int K = 16;\nstruct alignas(K) S { float a; char c; };", "S"),
    ("struct alignas(2 * 8) S { float a; };", "S"),
    ("#define A 16\nstruct __align__(A) S { float a; short s; };", "S"),
    ("struct alignas(double) S { float a; };", "S"),
    ("template <int N> struct alignas(N) S { float a; };", "S<16>"),
    ("template <typename T, int N> struct alignas(sizeof(T) * N) S { T val[N]; };",
     "S<float, 4>"),
    # Inside another: the struct holding it places it at the compiler's alignment.
    ("constexpr int K = 16;\nstruct alignas(K) In { float a; };\n"
     "struct S { char c; In in; };", "S"),
])
def test_struct_alignments_that_are_not_literals_are_the_compilers(definition, declared):
    # Session 64: `alignas(K)`, `alignas(sizeof(T) * N)` (PyTorch's aligned_vector),
    # `alignas(double)`, `__align__(MACRO)`: before, the struct was opaque bytes.
    source = PRELUDE + definition + f'\nextern "C" __global__ void k({declared} s, char c) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None, sig.types
    assert sig.offsets[1] == _as_nvrtc_lays_it_out(source, declared, record)


@pytest.mark.parametrize("definition, declared", [
    ("struct Q { float a; char c; };\ntypedef Q P;", "P"),
    ("struct Q { float a; };\ntypedef const struct Q P;", "P"),
    ("namespace n { struct Q { double d; int i; }; }\nusing P = n::Q;", "P"),
    ("template <class T, int N> struct Box { T v[N]; char c; };\n"
     "using P = Box<float, 3>;", "P"),
    ("template <int N> struct alignas(N) Q { float a; };\ntypedef Q<16> P;", "P"),
    # A struct's member alias, as a field's type; an alias of an alias; a base named by one.
    ("struct Q { float a; };\nstruct P { using Inner = Q; Inner in; double d; };", "P"),
    ("struct Q { short s; };\nusing Q2 = Q;\ntypedef Q2 P;", "P"),
    ("struct B { double d; };\nusing Base = B;\nstruct P : Base { int n; };", "P"),
])
def test_aliases_of_structs_are_the_structs(definition, declared):
    # Session 64: `typedef Q P;`, `using P = Box<float, 3>;` named a struct kernarg could lay
    # out, but were opaque bytes (aliases were read only for the types kernarg names).
    source = PRELUDE + definition + f'\nextern "C" __global__ void k({declared} s) {{}}\n'
    sig = kernarg.Signature.from_source(source, "k")
    record = sig.records[0]
    assert record is not None, sig.types
    _as_nvrtc_lays_it_out(source, declared, record)


@pytest.mark.parametrize("definition", [
    "struct E {};\nstruct S : E { int a; };",
    "struct E {};\nstruct B { double d; };\nstruct S : B, E { int a; };",
    "struct alignas(8) E {};\nstruct S : public E { int a; };",
    "struct E { __host__ __device__ E() {} };\nstruct S : E { int a; char c; };",
    "struct E {};\nstruct M : E { short m; };\nstruct S { M m; char c; M n; };",
])
def test_empty_bases_take_no_byte_as_nvrtc_lays_them_out(definition):
    # Session 64: a tag base (`struct S : E`) is at offset 0 and takes no byte, its
    # alignment kept. Where the struct holds another empty struct, the base may move, and a
    # member with it: not read (test_structs_kernarg_cannot_read_keep_the_ptx_layout).
    source = PRELUDE + definition + '\nextern "C" __global__ void k(S s, char c) {}\n'
    sig = kernarg.Signature.from_source(source, "k")
    assert sig.offsets[1] == _as_nvrtc_lays_it_out(source, "S", sig.records[0])


def _through_aliases(source, names):
    """``source`` with an alias of each struct drawn (``typedef S3 A_S3;``) after its
    definition, and every later use of its name (not an elaborated one, `struct S3`, which
    an alias cannot be; not a template's) the alias's."""
    for name in names:
        if "<" in name:
            continue
        head = re.search(rf"^(?:struct|class|union) (?:[^\n]*\s)?{name}\b[^\n]*\{{", source,
                         re.M)
        if head is None:            # a typedef of an unnamed struct: `} S3;`
            end = source.index("\n", source.index(f"}} {name};")) + 1
        else:
            end = source.index("\n};\n", head.end()) + 4
        rest = re.sub(rf"(?<!struct )(?<!union )(?<!class )\b{name}\b(?!\s*<)", f"A_{name}",
                      source[end:])
        source = source[:end] + f"typedef {name} A_{name};\n" + rest
    return source


@pytest.mark.parametrize("seed", range(3))
def test_structs_named_through_aliases_are_laid_out_as_by_their_names(seed):
    # Differential (session 64): the random structs above, each named after its definition
    # only through an alias (fields, bases, the kernel's parameters), must be laid out as by
    # their names, and as NVRTC lays them out (60 sources by hand: 367 records, all so).
    laid_out = _laid_out_as_drawn(random.Random(3000 + seed), 6, lambda source, names: (
        _through_aliases(source, names), [n if "<" in n else f"A_{n}" for n in names]))
    assert laid_out >= 10, laid_out


SPANS = """
#include <cuda/std/span>
struct Job { cuda::std::span<const float> x; cuda::std::span<float> y; float a; };
extern "C" __global__ void k(cuda::std::span<float> s, cuda::std::span<const int, 4> t, Job j,
                             int n) {}
"""

# (The lower-bounds CI job has no CCCL headers: <cuda/std/span>.)
NEEDS_CCCL = pytest.mark.skipif(
    cccl_include_dir() is None, reason="no CCCL headers (<cuda/std/...>): neither pip "
    "nvidia-cuda-cccl nor a CUDA toolkit of NVRTC's major version")


@NEEDS_CCCL
def test_spans_are_laid_out_as_libcuxx_lays_them_out():
    # libcu++'s span: its pointer, then (a dynamic extent) its count, as NVRTC emits one
    # constant-initialized; with a static extent, the pointer alone.
    ptx = compile_ptx("#include <cuda/std/span>\n__device__ float arr[8];\n"
                      "__device__ cuda::std::span<float> probe(arr + 2, 3);\n"
                      "__device__ cuda::std::span<const float, 4> probe4(arr + 1, 4);\n")
    assert ".u64 probe[2] = {generic(arr)+8, 3};" in ptx
    assert ".u64 probe4[1] = {generic(arr)+4};" in ptx
    sig = kernarg.Signature.from_source(SPANS, "k")
    assert (sig.sizes, sig.alignments) == ((16, 8, 40, 4), (8, 8, 8, 4))
    assert sig.records[0].names == ("data", "size") and sig.records[1].names == ("data",)
    assert [sig.records[2].fields[f][1] for f in ("x", "y", "a")] == [0, 16, 32]


@NEEDS_CCCL
def test_a_span_takes_an_array_its_elements_counted():
    # Session 64: a span parameter (or field) takes an array alone, its pointer and element
    # count; a tuple (pointer, count) or a dict gives them. Its element type and const are
    # checked as a pointer's; a static extent must be the array's count.
    from producers import CAIObject, cai

    sig = kernarg.Signature.from_source(SPANS, "k")
    a = CAIObject(cai(0x1000, shape=(3, 2), typestr="<f4"))
    b = CAIObject(cai(0x2000, shape=(4,), typestr="<i4", readonly=True))
    data = bytes(sig.pack((a, b, {"x": a, "y": (a, 5), "a": 2.0}, 7)))
    assert struct.unpack_from("<QQQ", data) == (0x1000, 6, 0x2000)
    assert struct.unpack_from("<QQQQf", data, 24) == (0x1000, 6, 0x1000, 5, 2.0)
    assert kernarg.Signature("cuda::std::span<float> s, int n").sizes == (16, 4)
    with pytest.raises(TypeError, match=r"parameter 0 \('s'\) is a span \(cuda::std::span"
                                        r"<float>\): pass an array .* not int"):
        sig.pack((5, b, {}, 1))
    with pytest.raises(ValueError, match=r"parameter 1 \('t'\) is a span of 4 elements .* "
                                         r"has 3"):
        sig.pack((a, CAIObject(cai(0x2000, shape=(3,), typestr="<i4")), {}, 1))
    with pytest.raises(ValueError, match=r"parameter 2 \('j'\), field y.*read-only"):
        sig.pack((a, b, {"y": CAIObject(cai(0x1000, shape=(2,), typestr="<f4",
                                                readonly=True))}, 1))
    with pytest.raises(TypeError, match=r"parameter 0 \('s'\), field data \(float\*\)"):
        sig.pack((CAIObject(cai(0x1000, shape=(3,), typestr="<i4")), b, {}, 1))
