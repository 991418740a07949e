"""Coverage-guided fuzzing of kernarg's packers (atheris + libFuzzer), for a kernarg whose C is
built with ``-fsanitize=fuzzer-no-link,address`` (``tools/fuzz/run.sh`` builds one and runs
this). Hypothesis (tests/test_fuzz_protocols.py) draws inputs at random; here libFuzzer keeps
the inputs that reach new branches of kernarg's C, and AddressSanitizer stops at the first
out-of-bounds access or use after free.

Each input is decoded into an argument tuple of mixed kinds -- Python and numpy scalars of
every width, numpy structured scalars, ctypes scalars, structures and arrays, registered
pointer types, CUDA Array Interface objects (valid, or with fields replaced), DLPack
producers (any device, version and offset) and torch tensors as kernarg's torch adapter reads
them (torch before 2.10; every attribute it reads, and torch's current stream, fuzzed) -- and a
signature of C parameter types. Both
``kernarg.pack`` and ``Signature.pack`` (and kernarg's C API, through examples/c_extension, to
the same bytes or the same refusal) must then either give the block a plain C packer
(tests/reference.py) gives for the values it knows, or refuse with TypeError/ValueError/
OverflowError/RuntimeError/BufferError naming the argument; every DLPack tensor is deleted
exactly once.

    python tools/fuzz/fuzz_pack.py [libFuzzer options, e.g. -max_total_time=600 corpus/]
"""
import ctypes
import operator
import os
import struct
import sys

import atheris

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests"))

with atheris.instrument_imports(include=["kernarg"]):
    import kernarg
    from kernarg._examples import build_example

import numpy as np  # noqa: E402

import producers  # noqa: E402
import reference  # noqa: E402

ALLOWED = (TypeError, ValueError, OverflowError, RuntimeError, BufferError)

NP_TYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
            np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128,
            np.longdouble, np.datetime64, np.timedelta64, np.bytes_]
FIELD_FORMATS = ["i1", "u1", "i2", "<u2", "<i4", "<f4", "<i8", "<f8", "<f2", "<c8", "V3",
                 ">i4", "S2", "2<i2", "(2,2)u1"]
CT_TYPES = [ctypes.c_bool, ctypes.c_char, ctypes.c_byte, ctypes.c_ubyte, ctypes.c_short,
            ctypes.c_ushort, ctypes.c_int, ctypes.c_uint, ctypes.c_long, ctypes.c_ulong,
            ctypes.c_longlong, ctypes.c_ulonglong, ctypes.c_float, ctypes.c_double,
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int8, ctypes.c_uint16, ctypes.c_wchar,
            ctypes.c_longdouble, ctypes.c_char_p]
C_TYPES = ["int", "unsigned int", "char", "signed char", "unsigned char", "short", "long",
           "long long", "unsigned long long", "size_t", "bool", "float", "double", "__half",
           "__nv_bfloat16", "float2", "float4", "int3", "double2", "char4", "void*",
           "const float*", "float*", "const double* __restrict__", "int**", "const void*",
           "struct { int a; char b; }", "unsigned short", "long double"]

# The CUDA Array Interface typestrs a typed pointer to a float or a double may take.
_F4 = {"<f4", "|f4", "=f4", "<V4", "|V4", ">V4", "=V4"}
_F8 = {"<f8", "|f8", "=f8", "<V8", "|V8", ">V8", "=V8"}
POINTEE_TYPESTRS = {"const float*": _F4, "float*": _F4, "const double* __restrict__": _F8}


class Registered:
    """A pointer-like type taught to kernarg with kernarg.register."""

    def __init__(self, address):
        self.address = address


kernarg.register(Registered, lambda obj: obj.address)


# examples/c_extension, built and imported: kernarg's C API (packing into the caller's block),
# which must agree with kernarg.pack and Signature.pack.
C_API = build_example("c_extension", "kernarg_example")


class Index:
    """An int-like through __index__, which may also answer what is not an int (1.5)."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


# An int past the 4,300 digits str() prints (sys.set_int_max_str_digits): a refusal must name
# it without printing it.
HUGE = 10**4400


def _int(fdp):
    if fdp.ConsumeIntInRange(0, 31) == 0:
        return (1 if fdp.ConsumeBool() else -1) * HUGE + fdp.ConsumeInt(2)
    return fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 10))


def _np_scalar(fdp):
    t = NP_TYPES[fdp.ConsumeIntInRange(0, len(NP_TYPES) - 1)]
    if t is np.datetime64 or t is np.timedelta64:
        return t(fdp.ConsumeIntInRange(-2**40, 2**40), "ns")
    if t is np.bytes_:
        return np.bytes_(fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 9)))
    dtype = np.dtype(t)
    raw = fdp.ConsumeBytes(dtype.itemsize).ljust(dtype.itemsize, b"\0")
    return np.frombuffer(raw, dtype)[0]


def _np_struct(fdp):
    n = fdp.ConsumeIntInRange(1, 4)
    fields = [(f"f{i}", FIELD_FORMATS[fdp.ConsumeIntInRange(0, len(FIELD_FORMATS) - 1)])
              for i in range(n)]
    try:
        dtype = np.dtype(fields, align=fdp.ConsumeBool())
    except (TypeError, ValueError):
        return None
    raw = fdp.ConsumeBytes(dtype.itemsize).ljust(dtype.itemsize, b"\0")
    return np.frombuffer(raw, dtype)[0]


def _ctypes_value(fdp):
    t = CT_TYPES[fdp.ConsumeIntInRange(0, len(CT_TYPES) - 1)]
    size = ctypes.sizeof(t)
    raw = fdp.ConsumeBytes(size).ljust(size, b"\0")
    shape = fdp.ConsumeIntInRange(0, 3)
    if shape == 0 or t is ctypes.c_char_p:
        return t.from_buffer_copy(raw)
    if shape == 1:
        n = fdp.ConsumeIntInRange(0, 5)
        return (t * n).from_buffer_copy(raw * n)
    fields = [(f"f{i}", CT_TYPES[fdp.ConsumeIntInRange(0, 15)])
              for i in range(fdp.ConsumeIntInRange(1, 4))]
    ns = {"_fields_": fields}
    if fdp.ConsumeBool():
        ns["_pack_"] = [1, 2, 4][fdp.ConsumeIntInRange(0, 2)]
    base = ctypes.Union if shape == 3 else ctypes.Structure
    cls = type("FuzzStruct", (base,), ns)
    size = ctypes.sizeof(cls)
    return cls.from_buffer_copy(fdp.ConsumeBytes(size).ljust(size, b"\0"))


def _address(fdp):
    """What a registered function answers: mostly an address, else an int out of range, a
    numpy int, a bool, a float or a broken __index__."""
    choice = fdp.ConsumeIntInRange(0, 9)
    if choice <= 4:
        return fdp.ConsumeIntInRange(0, 2**64 - 1)
    return [_int(fdp), np.uint64(fdp.ConsumeIntInRange(0, 2**64 - 1)), fdp.ConsumeBool(),
            fdp.ConsumeFloat(), Index([1.5, "7", None, 7][fdp.ConsumeIntInRange(0, 3)])][
        choice - 5]


def _hostile(fdp):
    choice = fdp.ConsumeIntInRange(0, 7)
    return [None, _int(fdp), fdp.ConsumeFloat(), "s", b"b", object(), (1, 2),
            [_int(fdp)]][choice]


CAI_KEYS = ["data", "shape", "typestr", "version", "strides", "stream", "mask", "descr"]


def _cai(fdp):
    shape = tuple(fdp.ConsumeIntInRange(0, 4) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    d = {"data": (fdp.ConsumeIntInRange(0, 2**64 - 1), fdp.ConsumeBool()), "shape": shape,
         "typestr": ["<f4", "|u1", "<V2", "<i8", "<f8", "<c16", "|b1", ">f4", ">i1", "=f4",
                     "<M8[ns]", "f4", "|S4"][fdp.ConsumeIntInRange(0, 12)],
         "version": fdp.ConsumeIntInRange(0, 3)}
    if fdp.ConsumeBool():
        d["stream"] = None if fdp.ConsumeBool() else fdp.ConsumeIntInRange(1, 2**64 - 1)
    if fdp.ConsumeBool():
        d["strides"] = None
    for _ in range(fdp.ConsumeIntInRange(0, 2)):
        key = CAI_KEYS[fdp.ConsumeIntInRange(0, len(CAI_KEYS) - 1)]
        if fdp.ConsumeBool():
            d.pop(key, None)
        else:
            d[key] = _hostile(fdp)
    # The interface as the type's property, or as an attribute of the instance.
    return (producers.InstanceCAI if fdp.ConsumeBool() else producers.CAIObject)(d)


def _byte_offset(fdp):
    """Mostly a small offset; one in eight near 2**64, where data + byte_offset may wrap."""
    if fdp.ConsumeIntInRange(0, 7) == 0:
        return 2**64 - fdp.ConsumeIntInRange(1, 2**16)
    return fdp.ConsumeIntInRange(0, 4096)


def _dlpack(fdp):
    kind = fdp.ConsumeIntInRange(0, 2)
    cls = [producers.DLPackProducer, producers.StreamOnlyProducer,
           producers.NoKeywordProducer][kind]
    device = ([2, 3, 13, 1, 4, 0][fdp.ConsumeIntInRange(0, 5)], fdp.ConsumeIntInRange(0, 2))
    shape = tuple(fdp.ConsumeIntInRange(0, 5) for _ in range(fdp.ConsumeIntInRange(0, 3)))
    p = cls(fdp.ConsumeIntInRange(0, 2**64 - 1), device=device,
            versioned=fdp.ConsumeBool(), byte_offset=_byte_offset(fdp),
            shape=shape, readonly=fdp.ConsumeBool(),
            version=(fdp.ConsumeIntInRange(0, 2), fdp.ConsumeIntInRange(0, 5)),
            dtype=(fdp.ConsumeIntInRange(0, 6), [8, 16, 32, 64, 7][fdp.ConsumeIntInRange(0, 4)],
                   fdp.ConsumeIntInRange(0, 2)))
    malformed = fdp.ConsumeIntInRange(0, 19)
    if malformed == 0:
        # An ndim that disagrees with the shape, within the shape array the producer made (a
        # larger one would have kernarg read past it: the producer's bug, which no consumer
        # can see).
        p.ndim = fdp.ConsumeIntInRange(-2, len(shape))
    elif malformed == 1:
        p.null_shape = True
    elif malformed == 2 and shape:
        p.strides = [fdp.ConsumeIntInRange(-3, 40) for _ in shape]
    return p


class TorchStream:
    """What torch._C._cuda_getCurrentRawStream answers for this input (kernarg looks the
    function up once, the first time its torch adapter runs)."""
    answer = 0


# One object per dtype, as torch has; an input may also make a new one (kernarg keeps a bounded
# number of dtype objects' element types).
TORCH_DTYPES = [producers.TorchDtype(n) for n in (
    "float32", "float16", "int32", "uint8", "bfloat16", "complex64", "bool", "quint8",
    "float8_e4m3fn")]


def _tensor(fdp):
    """A torch tensor as kernarg's torch adapter (torch before 2.10) reads one: whether it is on
    CUDA, its device, whether it is pinned, its address, device index, element type and lazy
    conjugate/negative bits -- each fuzzed, an answer of any type, or a read that raises."""
    def answer(usual):
        choice = fdp.ConsumeIntInRange(0, 15)
        if choice == 0:
            return RuntimeError("injected")
        return _hostile(fdp) if choice == 1 else usual

    cuda = answer(fdp.ConsumeBool())
    reads = {"is_cuda": cuda,
             "device": "cuda:0" if cuda is True else [
                 "cpu", "meta", "mps:0", "cuda:1"][fdp.ConsumeIntInRange(0, 3)],
             "is_pinned": answer(fdp.ConsumeBool()),
             "data_ptr": _address(fdp),
             "get_device": answer(fdp.ConsumeIntInRange(-1, 3)),
             "is_conj": answer(fdp.ConsumeIntInRange(0, 7) == 0),
             "is_neg": answer(fdp.ConsumeIntInRange(0, 7) == 0)}
    choice = fdp.ConsumeIntInRange(0, len(TORCH_DTYPES))
    reads["dtype"] = TORCH_DTYPES[choice] if choice < len(TORCH_DTYPES) else \
        producers.TorchDtype(["float64", "int8", "no such type"][fdp.ConsumeIntInRange(0, 2)])
    return producers.TorchTensor(reads)


if "torch" not in sys.modules:      # a stand-in only where the real torch is not loaded
    producers.install_torch(lambda device: TorchStream.answer)


def _stream_answer(fdp):
    """torch's current stream for this input: mostly a handle, else an odd answer."""
    if fdp.ConsumeIntInRange(0, 7):
        return fdp.ConsumeIntInRange(0, 2**64 - 1)
    return [_hostile(fdp), -1, 2**64, True, 1.5, np.uint64(0x1234)][fdp.ConsumeIntInRange(0, 5)]


def _tensor_checks(t, i, block):
    """What a tensor kernarg packed must have been: on CUDA or pinned, no lazy bit, its own
    address, and on CUDA torch's current stream recorded for the launch to wait on."""
    reads = t.reads
    cuda = bool(reads["is_cuda"])
    assert cuda or bool(reads["is_pinned"]), reads
    assert not bool(reads["is_conj"]) and not bool(reads["is_neg"]), reads
    want = _registered_address(reads["data_ptr"])
    assert want is not None, reads
    assert struct.unpack_from("<Q", bytes(block), block.offsets[i])[0] == want
    if cuda:
        stream = _registered_address(TorchStream.answer)
        assert stream is not None, TorchStream.answer
        assert (stream or 1) in block.producer_streams, (stream, block.producer_streams)


MAKERS = [_int, lambda fdp: fdp.ConsumeFloat(), lambda fdp: fdp.ConsumeBool(),
          lambda fdp: None, _np_scalar, _np_struct, _ctypes_value,
          lambda fdp: complex(fdp.ConsumeFloat(), fdp.ConsumeFloat()),
          lambda fdp: Registered(_address(fdp)), _cai, _dlpack,
          lambda fdp: Index(_int(fdp)), _hostile, _tensor]


def _param_type(fdp, arg):
    """A parameter type for ``arg``: a random C type, or often the argument's own type where
    it is a struct (its numpy dtype, aligned or not, or its ctypes type), so that typed struct
    packing is reached."""
    if isinstance(arg, np.void) and fdp.ConsumeBool():
        if fdp.ConsumeBool() or not all(name for name, *_ in arg.dtype.descr):
            return arg.dtype        # as is (a descr with padding entries cannot be re-aligned)
        return np.dtype(arg.dtype.descr, align=True)
    if isinstance(arg, (ctypes.Structure, ctypes.Union, ctypes.Array)) and fdp.ConsumeBool():
        return type(arg)
    return C_TYPES[fdp.ConsumeIntInRange(0, len(C_TYPES) - 1)]


def _registered_address(value):
    """The address a registered function's answer stands for, or None where it must be
    refused: operator.index() of it, in 0 .. 2**64-1, and not a bool."""
    if isinstance(value, bool):
        return None
    try:
        address = operator.index(value)
    except TypeError:
        return None
    return address if 0 <= address < 2**64 else None


def _address_of(value):
    if isinstance(value, Registered):
        return value.address
    return None


def _check_refusal(exc):
    text = str(exc)
    assert isinstance(exc, ALLOWED), repr(exc)
    assert "argument" in text or "parameter" in text or \
        text.startswith(("kernarg.pack", "Signature")), text


def _c_api_agrees(pack, call, expected):
    """The C API gives what Python's packing gave: the same bytes, offsets and producer
    streams, or the same refusal (class and message)."""
    try:
        got = pack(*call)
    except ALLOWED as exc:
        assert isinstance(expected, BaseException), (exc, expected)
        assert (type(exc), str(exc)) == (type(expected), str(expected))
        return
    assert not isinstance(expected, BaseException), (got, expected)
    assert got == expected, (got, expected)


def _known(value):
    """Values the reference packer maps exactly as kernarg's untyped mapping does."""
    if isinstance(value, Registered):   # packs exactly when it answers an address
        return type(value.address) is int and 0 <= value.address < 2**64
    if value is None or isinstance(value, (bool, float, complex)):
        return True
    if isinstance(value, int):
        return -2**63 <= value < 2**64
    if isinstance(value, np.generic):
        return type(value) in reference._NP_CTYPE
    return False


def test_one_input(data):
    fdp = atheris.FuzzedDataProvider(data)
    TorchStream.answer = _stream_answer(fdp)
    args = tuple(MAKERS[fdp.ConsumeIntInRange(0, len(MAKERS) - 1)](fdp)
                 for _ in range(fdp.ConsumeIntInRange(0, 8)))
    dlpacks = [a for a in args if isinstance(a, producers.DLPackProducer)]
    try:
        block = kernarg.pack(args)
    except ALLOWED as exc:
        _check_refusal(exc)
        _c_api_agrees(C_API.pack, (args,), exc)
    else:
        _c_api_agrees(C_API.pack, (args,), (bytes(block), block.offsets,
                                            block.producer_streams))
        assert block.nargs == len(args)
        assert len(bytes(block)) == block.nbytes
        for off, size in zip(block.offsets, block.sizes, strict=True):
            assert off + size <= block.nbytes
        if all(_known(a) for a in args):
            assert (bytes(block), block.offsets, block.sizes) == \
                reference.pack(args, _address_of), args
        for i, a in enumerate(args):
            if isinstance(a, Registered):   # an address, never what is not one
                want = _registered_address(a.address)
                assert want is not None, a.address
                assert struct.unpack_from("<Q", bytes(block), block.offsets[i])[0] == want
            elif isinstance(a, producers.TorchTensor):
                _tensor_checks(a, i, block)
            elif isinstance(a, producers.DLPackProducer):   # data + byte_offset, unwrapped
                want = a.address + a.byte_offset
                assert want < 2**64, (a.address, a.byte_offset)
                assert struct.unpack_from("<Q", bytes(block), block.offsets[i])[0] == want
        block.release()
    params = [_param_type(fdp, a) for a in args]
    try:
        if all(isinstance(t, str) for t in params):
            sig = kernarg.Signature(", ".join(f"{t} p{i}" for i, t in enumerate(params)))
        else:       # a list: C type strings, numpy dtypes and ctypes types
            sig = kernarg.Signature(params)
    except ALLOWED:
        sig = None
    if sig is not None:
        try:
            typed = sig.pack(args)
        except ALLOWED as exc:
            _check_refusal(exc)
            _c_api_agrees(C_API.pack_signature, (sig, args), exc)
        else:
            _c_api_agrees(C_API.pack_signature, (sig, args), (bytes(typed), typed.offsets,
                                                              typed.producer_streams))
            assert typed.nargs == len(args)
            for i, (t, a) in enumerate(zip(params, args, strict=True)):
                if isinstance(a, producers.TorchTensor) and isinstance(t, str) and "*" in t:
                    _tensor_checks(a, i, typed)
                if t in POINTEE_TYPESTRS and isinstance(
                        a, (producers.CAIObject, producers.InstanceCAI)):
                    # A typed pointer took the array: its typestr names the pointee, in the
                    # GPU's byte order (or is raw bytes of its size).
                    typestr = a.__cuda_array_interface__.get("typestr")
                    assert typestr in POINTEE_TYPESTRS[t], (t, typestr)
                if t == "int" and type(a) is int:
                    assert struct.unpack_from("<i", bytes(typed), typed.offsets[i])[0] == a
                if t == "double" and type(a) is float:
                    got = struct.unpack_from("<d", bytes(typed), typed.offsets[i])[0]
                    assert got == a or (got != got and a != a)
                if t == "float" and type(a) is int and -2**63 <= a < 2**64:
                    # An int rounds to float once, as C converts it (numpy's cast does).
                    want = np.float32(np.int64(a) if a < 2**63 else np.uint64(a))
                    got = struct.unpack_from("<f", bytes(typed), typed.offsets[i])[0]
                    assert got == want, (a, got, want)
            typed.release()
    for p in dlpacks:
        assert p.deleted == p.exported, (p.deleted, p.exported)
    assert not producers.double_deletes()


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
