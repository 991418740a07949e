"""Coverage-guided fuzzing of kernarg's text readers (atheris + libFuzzer; see fuzz_pack.py for
the build): C parameter lists (``Signature(text)``), PTX entries (``Signature.from_ptx``) and
kernel declarations in CUDA C++ source read against the PTX's layout (what
``Signature.from_source`` does after NVRTC, without NVRTC), and the lookup of a kernel's name
among a module's entries, mangled or not, the reading of a mangled symbol's C++ name, and of
a struct's body (its data members among member functions), and of a whole source whose
struct parameter is laid out with what it asks the compiler answered (sixth mode).
Any text must give a Signature whose layout is consistent, or a TypeError/ValueError/
OverflowError/LookupError -- never another exception (an IndexError, a KeyError, a
RecursionError...) or a crash; and it pickles as the same Signature.

    python tools/fuzz/fuzz_parse.py [libFuzzer options, e.g. -max_total_time=600 corpus/]
"""
import pickle
import sys
import zlib

import atheris

with atheris.instrument_imports(include=["kernarg"]):
    import kernarg
    from kernarg._demangle import cxx_name, demangle
    from kernarg._images import cubin_entry_names, image_variable_names
    from kernarg._signature import (
        _constant_value,
        _data_members,
        _declared_type,
        _last_identifier,
        _SourceStructs,
        ptx_entry_name,
    )

ALLOWED = (TypeError, ValueError, OverflowError, LookupError)
LIMIT = kernarg.MAX_PARAM_BYTES

PTX = """.version 8.0
.target sm_90
.address_size 64

.visible .entry k(
{params}
)
{{
    ret;
}}
"""
# The PTX of `__global__ void k(const float* p, int n, double x, S s)` with a 12-byte S.
PTX_KNOWN = PTX.format(params="\t.param .u64 .ptr .align 1 k_param_0,\n\t.param .u32 k_param_1,"
                              "\n\t.param .f64 k_param_2,\n\t.param .align 4 .b8 k_param_3[12]")
SOURCE_PREFIX = "struct S { int a; float b; char c; };\n"


def _consistent(sig):
    offsets, sizes = sig.offsets, sig.sizes
    assert len(offsets) == len(sizes)
    end = 0
    for off, size in zip(offsets, sizes, strict=True):
        assert off >= end, (offsets, sizes)
        end = off + size
    assert end <= LIMIT


def _check_layout(dt):
    """Fields inside the struct, and the fields its metadata names (which share bytes, a
    tuple's) its own."""
    assert all(0 <= dt.fields[n][1] and dt.fields[n][1] + dt.fields[n][0].itemsize
               <= dt.itemsize for n in dt.names), dt
    bits = dt.metadata.get("bits", ())
    assert all(0 <= first and 0 < width and first + width <= 8 * dt.itemsize
               for _, first, width, _ in bits), dt
    named = [n for group in dt.metadata.get("overlaps", ()) for alternative in group
             for n in alternative] + list(dt.metadata.get("positions", ()))
    assert set(named) <= set(dt.names) | {b[0] for b in bits}, dt


def _answer(query, how, seed):
    """What a compiler could answer to ``query`` (_SourceStructs.wanted): a power of two for
    an alignment, 1-64 for a bit-field's width, else 1-300; drawn from ``seed``."""
    h = zlib.crc32(query.encode("utf-8", "surrogatepass"), seed)
    kind = how[2]               # (path, member, "alignof" / "sizeof" / "width" / dimension)
    if kind == "alignof":
        return 1 << h % 9
    if kind == "width":
        return 1 + h % 64
    return 1 + h % 300


def _laid_out_twice(piece, source, seed):
    """The struct parameter ``piece`` of ``source`` laid out as from_source lays it out:
    then again with what it asked the compiler (array extents, bit-field widths, a head's
    alignment, a base's size) answered. Each layout, where there is one, is consistent."""
    path = f"(*static_cast<{_declared_type(piece)}*>(nullptr))."
    name = _last_identifier(piece)
    extents = None
    while True:
        structs = _SourceStructs(source, {}, extents=extents)
        with structs._object(path):
            dt = structs.by_value(piece, name)
        if dt is not None:
            _check_layout(dt)
        if extents is not None or not structs.wanted:
            return
        extents = {q: _answer(q, how, seed) for q, how in structs.wanted.items()}


def test_one_input(data):
    if not data:
        return
    mode = data[0] % 6
    text = data[1:].decode("utf-8", "replace")
    if mode == 5:
        # The text as a whole source, its first line a struct parameter's declaration
        # (`S s`): struct heads holding macros, bases, aliases, templates, bit-field widths
        # and extents that name constants, in any order.
        piece, _, source = text.partition("\n")
        try:
            _laid_out_twice(piece, source, data[0])
        except ALLOWED as exc:
            assert "int_max_str_digits" not in str(exc), exc
        return
    if mode == 4:
        # A kernel name looked up among a PTX module's entries (C++ mangled or not): one of
        # them, or a LookupError naming the kernel. And the bytes as a cubin or fatbin whose
        # symbol table is read: its kernels' names, or None; and as a module image (cubin,
        # fatbin or PTX) whose variables' names are read, or None.
        names = cubin_entry_names(b"\x7fELF" + data[1:] if data[0] & 8 else data[1:])
        assert names is None or (names and all(isinstance(n, str) for n in names)), names
        names = image_variable_names(b"\x7fELF" + data[1:] if data[0] & 16 else data[1:])
        assert names is None or (names and all(isinstance(n, str) for n in names)), names
        # The same text as a mangled symbol: its C++ name, or None.
        found = demangle("_Z" + text)
        assert found is None or (isinstance(found[0], str) and (
            found[1] is None or all(isinstance(a, (str, int)) for a in found[1]))), found
        assert isinstance(cxx_name("_Z" + text), str)
        name, _, rest = text.partition("\n")
        entries = rest.split()
        try:
            found = ptx_entry_name(entries, name)
        except LookupError as exc:
            assert repr(name) in str(exc), exc
            return
        assert found in entries, (found, entries)
        return
    try:
        if mode == 0:
            sig = kernarg.Signature(text)
        elif mode == 1:
            sig = kernarg.Signature([t for t in text.split(";")])
        elif mode == 2:
            sig = kernarg.Signature.from_ptx(PTX.format(params=text), "k")
        else:
            # The text as a struct's body too: its data members, or None (session 62's reader
            # of member functions, constructors and the rest that take no byte).
            found = _data_members(text, "S")
            assert found is None or (isinstance(found[1], bool) and all(
                isinstance(member, str) for member in found[0])), found
            # As an enumerator's constant expression (session 63): a value in its type, or None.
            found = _constant_value(text, {"A": (1, (32, False))})
            assert found is None or (type(found[0]) is int and found[1] in (
                (32, False), (32, True), (64, False), (64, True), (8, False)) and (
                found[1][1] and 0 <= found[0] < 1 << found[1][0] or not found[1][1] and
                -(1 << found[1][0] - 1) <= found[0] < 1 << found[1][0] - 1)), found
            # And laid out (session 63's unions and unnamed members too): fields inside the
            # struct, and the fields its metadata names (which share bytes, a tuple's) its own.
            dt = _SourceStructs(f"struct S {{{text}}};", {}).layout("S")
            if dt is not None:
                _check_layout(dt)
            sig = kernarg.Signature._from_source_and_ptx(SOURCE_PREFIX + text, "k", PTX_KNOWN)
    except ALLOWED as exc:
        # Not str()'s refusal of an int of over 4,300 digits, raised while writing a message.
        assert "int_max_str_digits" not in str(exc), exc
        return
    _consistent(sig)
    # A pickled copy is the same signature (Signature.__reduce__ writes what was read).
    again = pickle.loads(pickle.dumps(sig))
    assert (again.offsets, again.sizes, again.alignments, again.types, again.names,
            again.default_texts, repr(again.defaults), repr(again)) == \
        (sig.offsets, sig.sizes, sig.alignments, sig.types, sig.names, sig.default_texts,
         repr(sig.defaults), repr(sig))


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
