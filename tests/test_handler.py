"""kernarg.pack / ParamBlock: values, layout, structure of the block, errors."""
import contextlib
import ctypes
import enum
import gc
import io
import math
import re
import struct
import weakref
from decimal import Decimal

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernarg

import reference

# ------------------------------------------------------------------------------------------
# Block structure


def read_argv(block):
    """The kernelParams array: nargs void* entries at block.ptr."""
    return list((ctypes.c_void_p * block.nargs).from_address(block.ptr)) if block.nargs else []


def check_block(block, args, address_of=None):
    raw, offsets, sizes = reference.pack(args, address_of)
    assert bytes(block) == raw
    assert block.offsets == offsets
    assert block.sizes == sizes
    assert block.nbytes == len(raw)
    assert block.nargs == len(args)
    base = block.data_ptr
    for i, p in enumerate(read_argv(block)):
        assert p == base + offsets[i], f"argv[{i}] does not point at offsets[{i}]"
        assert ctypes.string_at(p, sizes[i]) == raw[offsets[i]:offsets[i] + sizes[i]]


def test_empty():
    b = kernarg.pack(())
    assert (b.nargs, b.nbytes, b.offsets, b.sizes, bytes(b)) == (0, 0, (), (), b"")
    assert b.producer_streams == ()


@pytest.mark.parametrize("value, expected", [
    (True, b"\x01"), (False, b"\x00"),
    (0, bytes(8)), (-1, b"\xff" * 8), (2**63 - 1, struct.pack("<q", 2**63 - 1)),
    (-2**63, struct.pack("<q", -2**63)), (2**63, struct.pack("<Q", 2**63)),
    (2**64 - 1, b"\xff" * 8), (2**30, struct.pack("<q", 2**30)),
    (-(2**31) - 5, struct.pack("<q", -(2**31) - 5)), (2**60 + 3, struct.pack("<q", 2**60 + 3)),
    (1.5, struct.pack("<d", 1.5)), (-0.0, struct.pack("<d", -0.0)),
    (math.inf, struct.pack("<d", math.inf)), (1 + 2j, struct.pack("<dd", 1, 2)),
    (None, bytes(8)),
])
def test_python_scalars(value, expected):
    b = kernarg.pack((value,))
    assert bytes(b) == expected
    check_block(b, (value,))


def test_nan_bits_preserved():
    nan = struct.unpack("<d", b"\x01\x00\x00\x00\x00\x00\xf8\x7f")[0]
    assert bytes(kernarg.pack((nan,))) == b"\x01\x00\x00\x00\x00\x00\xf8\x7f"


NUMPY_SCALARS = [np.bool_(True), np.int8(-3), np.uint8(250), np.int16(-300), np.uint16(60000),
                 np.int32(-7), np.uint32(4_000_000_000), np.int64(-2**62), np.uint64(2**64 - 1),
                 np.float16(1.5), np.float32(-2.25), np.float64(3.125),
                 np.complex64(1 - 2j), np.complex128(3 + 4j)]


@pytest.mark.parametrize("value", NUMPY_SCALARS, ids=lambda v: type(v).__name__)
def test_numpy_scalars(value):
    b = kernarg.pack((np.int8(1), value))   # after a 1-byte value, alignment shows
    assert b.sizes[1] == value.dtype.itemsize
    check_block(b, (np.int8(1), value))


def test_complex_alignment_is_cuda_vector_alignment():
    # float2 is 8-aligned and double2 16-aligned in CUDA, unlike numpy's component alignment.
    assert kernarg.pack((np.int8(1), np.complex64(1j))).offsets == (0, 8)
    assert kernarg.pack((np.int8(1), np.complex128(1j))).offsets == (0, 16)
    assert kernarg.pack((True, 1j)).offsets == (0, 16)


def test_bfloat16():
    v = ml_dtypes.bfloat16(1.5)
    b = kernarg.pack((True, v))
    assert b.offsets == (0, 2) and b.sizes == (1, 2)
    assert bytes(b)[2:] == v.tobytes()


def test_one_byte_ml_dtypes_scalars_are_their_own_byte():
    # The 8-, 6- and 4-bit floats (and int4) are one byte, aligned to 1, as the CUDA types.
    # (ml_dtypes 0.5 added the fp6, fp4 and e8m0 formats.)
    names = [n for n in ("float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float6_e2m3fn",
                         "float6_e3m2fn", "float4_e2m1fn", "int4") if hasattr(ml_dtypes, n)]
    assert "float8_e4m3fn" in names
    for name in names:
        v = getattr(ml_dtypes, name)(-1 if name[-1] != "u" else 0.5)
        b = kernarg.pack((v, v, np.int16(2)))
        assert (b.offsets, b.sizes) == ((0, 1, 2), (1, 1, 2)), name
        assert bytes(b)[:2] == v.tobytes() * 2, name


def test_structured_numpy_scalar():
    dt = np.dtype([("a", np.int8), ("b", np.float64), ("c", np.int16)], align=True)
    rec = np.array([(1, 2.5, -3)], dtype=dt)[0]
    b = kernarg.pack((True, rec, np.int8(2)))
    assert b.offsets == (0, 8, 32) and b.sizes == (1, 24, 1)
    check_block(b, (True, rec, np.int8(2)))


def test_structured_numpy_scalars_pack_as_their_bytes_at_their_alignment():
    """kernarg.pack copies a numpy.void in place where its dtype is one of the last four it
    checked (a kernel's structs are of a few dtypes), and reads the dtype (and checks it)
    where not: in runs, alternating, past the block's first area, after a refused dtype, and
    with dtypes made and dropped one after another (each taking a slot), every value packs as
    its bytes at its dtype's alignment, as with the numpy.void layout unconfirmed and as a
    numpy.record."""
    a1 = np.dtype([("a", np.int8), ("b", np.int8), ("c", np.int8)])
    a4 = np.dtype([("x", np.float32), ("n", np.int16)], align=True)
    a8 = np.dtype([("a", np.int8), ("b", np.float64), ("v", np.int32, (3,))], align=True)
    values = []
    for k, dt in enumerate([a1, a4, a8]):
        arr = np.zeros(4, dt)
        arr.view(np.uint8)[:] = np.arange(arr.nbytes, dtype=np.uint8) + 16 * k
        values.append(arr)
    runs = [*values[0][:3], *values[2][:4], values[1][0], values[0][3], *values[1][1:], 7,
            *values[2][:2]] * 4
    alternating = [v for trio in zip(*values, strict=True) for v in trio]
    bad = np.zeros((), dtype=[("n", "<i4"), ("o", object)])[()]

    def check(args):
        b = kernarg.pack(args)
        raw, at = bytes(b), 0
        for k, v in enumerate(args):
            size, align = (8, 8) if type(v) is int else (v.dtype.itemsize, v.dtype.alignment)
            at = (at + align - 1) // align * align
            assert (b.offsets[k], b.sizes[k]) == (at, size), k
            assert raw[at:at + size] == (struct.pack("<q", v) if type(v) is int
                                         else v.tobytes()), k
            at += size
        return raw

    expected = [check(tuple(args)) for args in (runs, alternating)]
    assert len(expected[0]) > 256
    with pytest.raises(TypeError, match=r"argument 1 \(numpy\.void\): field 'o' "):
        kernarg.pack((values[2][0], bad))
    with pytest.raises(TypeError, match=r"argument 0 \(numpy\.void\): field 'o' "):
        kernarg.pack((bad,))        # refused again, after a dtype that passed
    for k in range(40):
        dt = np.dtype([("a", np.int8), (f"b{k}", np.float64 if k % 2 else np.float32)],
                      align=True)
        check((np.zeros(1, dt)[0], 1))
        del dt
    with _layout_fallbacks():
        assert [bytes(kernarg.pack(tuple(args))) for args in (runs, alternating)] == expected
    records = [np.frombuffer(v.tobytes(), np.dtype((np.record, v.dtype)))[0]
               if type(v) is np.void else v for v in runs]
    assert type(records[0]) is np.record
    assert bytes(kernarg.pack(tuple(records))) == expected[0]


def test_aligned_structs_rewrapped_as_records_keep_their_alignment():
    """numpy gives alignment 1 to an aligned struct dtype rewrapped as a numpy.record or
    numpy.void dtype (np.rec.array's records), though its fields stay where the aligned layout
    put them: kernarg packs it, and lays out a Signature of it, at the struct's alignment, as
    the kernel reads it. A struct numpy laid out packed (align=False) keeps its 1."""
    a8 = np.dtype([("a", np.int8), ("b", np.float64), ("v", np.float32, (3,))], align=True)
    a4 = np.dtype([("x", np.float32), ("n", np.int16)], align=True)
    for dt, align in ((a8, 8), (a4, 4)):
        rec = np.rec.array(np.ones(2, dt))[1]
        void = np.ones(1, np.dtype((np.void, dt)))[0]
        assert type(rec) is np.record and type(void) is np.void
        assert rec.dtype.alignment == void.dtype.alignment == 1     # numpy's
        for value in (rec, void):
            b = kernarg.pack((np.int8(1), value))
            assert (b.offsets, b.sizes) == ((0, align), (1, dt.itemsize))
            assert bytes(b)[align:] == value.tobytes()
            assert kernarg.Signature(["char", value.dtype]).offsets == (0, align)
    packed = np.dtype([("x", np.float32), ("n", np.int16)])
    assert kernarg.pack((np.int8(1), np.zeros(1, packed)[0])).offsets == (0, 1)
    assert kernarg.Signature(["char", packed]).offsets == (0, 1)


class Pair(ctypes.Structure):
    _fields_ = [("x", ctypes.c_char), ("y", ctypes.c_double)]


class Mixed(ctypes.Union):
    _fields_ = [("i", ctypes.c_int), ("f", ctypes.c_float), ("b", ctypes.c_ubyte * 6)]


CTYPES_VALUES = [ctypes.c_bool(True), ctypes.c_char(b"z"), ctypes.c_byte(-5),
                 ctypes.c_ubyte(200), ctypes.c_short(-2), ctypes.c_ushort(65535),
                 ctypes.c_int(-9), ctypes.c_uint(9), ctypes.c_long(-11), ctypes.c_ulong(11),
                 ctypes.c_longlong(-2**40), ctypes.c_ulonglong(2**64 - 1),
                 ctypes.c_float(0.5), ctypes.c_double(-0.25), ctypes.c_void_p(0xDEAD0000),
                 ctypes.c_size_t(12345), Pair(b"q", 9.5), Mixed(i=0x01020304),
                 (ctypes.c_int * 3)(1, 2, 3), (ctypes.c_ubyte * 3)(4, 5, 6)]


@pytest.mark.parametrize("value", CTYPES_VALUES, ids=lambda v: type(v).__name__)
def test_ctypes_values(value):
    b = kernarg.pack((True, value))
    assert b.sizes[1] == ctypes.sizeof(value)
    check_block(b, (True, value))


def test_ctypes_value_is_read_at_pack_time():
    v = ctypes.c_int(1)
    b1 = kernarg.pack((v,))
    v.value = 2
    b2 = kernarg.pack((v,))
    assert bytes(b1) == struct.pack("<i", 1) and bytes(b2) == struct.pack("<i", 2)


def test_ctypes_values_fill_a_block_past_its_first_area():
    # The fast path places a ctypes value while the block's area has room, and the slow path
    # (which grows it) the rest; both copy the same bytes, and padding stays zero.
    args = tuple(v for k in range(200) for v in (ctypes.c_double(k + 0.5), ctypes.c_byte(-k),
                                                  ctypes.c_int32(k), Pair(b"p", -k)))
    b = kernarg.pack(args)
    assert b.nbytes > 4000 and b.sizes[:4] == (8, 1, 4, 16)
    check_block(b, args)
    # A byte-swapped scalar is reversed where it was placed, on either path.
    n = 1200
    b = kernarg.pack(tuple(_BE_INT(k - 600) for k in range(n)))
    assert bytes(b) == struct.pack(f"<{n}i", *range(-600, n - 600))


def test_padding_is_zero_and_argv_points_into_block():
    args = (True, 1.0, np.int16(2), np.int8(3), 4, np.float32(5), 6 + 0j, None)
    b = kernarg.pack(args)
    check_block(b, args)


def test_list_args_and_buffer_protocol():
    b = kernarg.pack([1, 2.0])
    assert isinstance(b.args, tuple) and b.args == (1, 2.0)
    m = memoryview(b)
    assert m.readonly and m.nbytes == 16 and m.format == "B"
    with pytest.raises(TypeError, match="not writable"):
        ctypes.c_char.from_buffer(b)


def test_bad_args_container():
    with pytest.raises(TypeError, match="tuple or list"):
        kernarg.pack(x for x in (1, 2))
    with pytest.raises(TypeError, match="tuple or list"):
        kernarg.pack(1)


def test_param_block_cannot_be_constructed_directly():
    with pytest.raises(TypeError, match="kernarg.pack"):
        kernarg.ParamBlock()


# ------------------------------------------------------------------------------------------
# Sizes: inline area, heap, growth, limit


@pytest.mark.parametrize("n", [15, 16, 17, 31, 32, 33, 100, 1000, 4095])
def test_many_ints(n):
    args = tuple(i - n // 2 for i in range(n))
    check_block(kernarg.pack(args), args)


def test_growth_past_inline_area_with_few_args():
    # Few arguments but large by-value structs: the area moves to the heap mid-pack and the
    # pointers already written must follow.
    big = (ctypes.c_double * 40)(*range(40))
    args = (1, 2.5, big, True, big, 7)
    check_block(kernarg.pack(args), args)


def test_growth_with_many_args_and_structs():
    big = (ctypes.c_int64 * 30)(*range(30))
    args = tuple([1] * 20) + (big,) * 5 + (3,)
    check_block(kernarg.pack(args), args)


def test_exact_limit_and_overflow():
    chunk = (ctypes.c_ubyte * 4096)
    exact = (chunk(),) * 7 + ((ctypes.c_ubyte * (32764 - 7 * 4096))(),)
    assert kernarg.pack(exact).nbytes == kernarg.MAX_PARAM_BYTES == 32764
    with pytest.raises(ValueError, match=r"argument 8: .*32764"):
        kernarg.pack(exact + (True,))
    with pytest.raises(ValueError, match="32764"):
        kernarg.pack(tuple(range(4096)) + (1,))


# ------------------------------------------------------------------------------------------
# Errors


def test_int_overflow_names_index():
    with pytest.raises(OverflowError, match="argument 2"):
        kernarg.pack((1, 2, 2**64))
    with pytest.raises(OverflowError, match="argument 0"):
        kernarg.pack((-2**63 - 1,))


@pytest.mark.parametrize("bad, fragment", [
    ("text", "argument 1 (str)"), (b"bytes", "host memory"), (object(), "unsupported"),
    ([1, 2], "argument 1 (list)"), ({"a": 1}, "dict"),
    (np.longdouble(1), "long double"), (np.datetime64("2020-01-01"), "no CUDA parameter"),
    (ctypes.c_longdouble(1), "long double"), (ctypes.py_object(1), "Python object"),
    (np.zeros(3), "on the CPU"), (bytearray(4), "host memory"),
])
def test_unsupported_arguments(bad, fragment):
    with pytest.raises(TypeError) as info:
        kernarg.pack((1, bad))
    assert fragment in str(info.value)
    assert "argument 1" in str(info.value)


def test_unsupported_lists_what_is_accepted():
    with pytest.raises(TypeError, match="__cuda_array_interface__"):
        kernarg.pack((object(),))


def test_empty_ctypes_structure_rejected():
    class Empty(ctypes.Structure):
        _fields_ = []

    with pytest.raises(TypeError, match="size 0"):
        kernarg.pack((Empty(),))


# ------------------------------------------------------------------------------------------
# Subclasses and registration


class MyInt(int):
    pass


class MyFloat(float):
    pass


class Color(enum.IntEnum):
    RED = 7


class MyPair(Pair):
    pass


def test_subclasses_pack_with_the_bytes_of_their_bases():
    # An int or float subclass packs its own value (a float's read as PyFloat_AsDouble reads
    # it, whatever its __float__ says), placed by the loop's fast path since session 103; an
    # int past a long long by the slow path, as an int is; a ctypes struct's subclass is
    # copied as its base is.
    class Floated(float):
        def __float__(self):
            return 9.0

    flags = enum.IntFlag("Flags", "A B C")
    args = (MyInt(5), MyFloat(2.5), Color.RED, MyPair(b"a", 1.0), MyInt(2**64 - 1),
            MyInt(-2**63), Floated(-0.5), flags.A | flags.C)
    b = kernarg.pack(args)
    assert bytes(b)[:24] == struct.pack("<qdq", 5, 2.5, 7)
    assert bytes(b)[-32:] == struct.pack("<Qqdq", 2**64 - 1, -2**63, -0.5, 5)
    check_block(b, args)
    with pytest.raises(OverflowError, match=r"argument 1 \(test_handler\.MyInt\): 1844\d+ "
                                            r"does not fit in 64 bits \(kernarg packs"):
        kernarg.pack((1, MyInt(2**64)))
    with pytest.raises(OverflowError, match=r"argument 0 \(int\): 1844\d+ does not fit"):
        kernarg.pack((2**64,))


def test_register_pointer_type():
    class Handle:
        def __init__(self, addr):
            self.addr = addr

    class SubHandle(Handle):
        pass

    kernarg.register(Handle, lambda h: h.addr)
    try:
        b = kernarg.pack((Handle(0x1000), SubHandle(0x2000), np.int8(1)))
        assert bytes(b)[:16] == struct.pack("<QQ", 0x1000, 0x2000)
        assert Handle in kernarg.registered_types()
        # Every address up to 2**64 - 1, whatever the int's width; one past it names the argument.
        for addr in (2**30, 2**60, 2**63, 2**64 - 1):
            assert bytes(kernarg.pack((Handle(addr),))) == struct.pack("<Q", addr)
        with pytest.raises(OverflowError, match="argument 0.*outside"):
            kernarg.pack((Handle(2**64),))
        kernarg.register(Handle, lambda h: -1)
        with pytest.raises(OverflowError, match="argument 0"):
            kernarg.pack((Handle(0),))
        kernarg.register(Handle, lambda h: "nope")
        with pytest.raises(TypeError, match="argument 0.*expected an int"):
            kernarg.pack((Handle(0),))
        # What __index__ gives is taken (numpy ints), but only an int: an __index__ answering
        # 1.5 was truncated to address 1. True is no address either.
        kernarg.register(Handle, lambda h: h.addr)
        assert bytes(kernarg.pack((Handle(np.uint64(2**63)),))) == struct.pack("<Q", 2**63)
        assert bytes(kernarg.Signature("float* p").pack((Handle(np.int32(16)),))) == \
            struct.pack("<Q", 16)

        class FloatIndex:
            def __index__(self):
                return 1.5

        for bad, shown in ((FloatIndex(), "FloatIndex"), (True, "bool"), (False, "bool")):
            for pack in (kernarg.pack, kernarg.Signature("float* p").pack):
                with pytest.raises(TypeError, match=f"argument 0 .*the registered function "
                                                    f"gave {shown}, expected an int address"):
                    pack((Handle(bad),))

        def boom(h):
            raise RuntimeError("kaboom")

        kernarg.register(Handle, boom)
        with pytest.raises(RuntimeError, match="argument 0.*kaboom"):
            kernarg.pack((Handle(0),))
    finally:
        kernarg.register(Handle, None)
    with pytest.raises(TypeError, match="unsupported"):
        kernarg.pack((Handle(1),))


def test_a_type_unregistered_since_it_was_looked_up_is_probed_as_an_unknown_type():
    """A free-threaded build reads the registry outside kernarg's section, so another thread's
    register(cls, None) may come between a pack's lookup of the type (its per-type cache says
    registered) and its read of the function. The pack then reads the argument as a type not
    yet known: a CUDA Array Interface is taken, anything else refused by name, never a call
    of None. The race is made here by removing the function from the registry alone
    (_interop.register, which leaves the per-type cache to kernarg.register)."""
    class Handle:
        def __init__(self, addr):
            self.addr = addr

    class Array(Handle):
        @property
        def __cuda_array_interface__(self):
            return {"shape": (1,), "typestr": "<f4", "data": (self.addr, False), "version": 3}

    for cls in (Handle, Array):
        kernarg.register(cls, lambda h: h.addr + 1)
    try:
        sig = kernarg.Signature("float* p, int n")
        for pack in (kernarg.pack, sig.pack):
            for cls in (Handle, Array):
                assert bytes(pack((cls(0x1000), 1)))[:8] == struct.pack("<Q", 0x1001)
                kernarg._interop.register(cls, None)            # the cache still says registered
            with pytest.raises(TypeError, match="argument 0 .*Handle.*unsupported"):
                pack((Handle(0x1000), 1))
            assert bytes(pack((Array(0x1000), 1)))[:8] == struct.pack("<Q", 0x1000)
            for cls in (Handle, Array):
                kernarg.register(cls, lambda h: h.addr + 1)
    finally:
        for cls in (Handle, Array):
            kernarg.register(cls, None)


def test_a_registered_base_is_found_through_a_metaclass_mro_that_is_not_a_tuple():
    """kernarg walks ``type.__mro__`` for a registered base; a metaclass may answer it with
    a list, which is walked as the tuple would be (never read with the tuple macros, which
    would crash)."""
    class Base:
        pass

    class Meta(type):
        @property
        def __mro__(cls):
            return [cls, Base, object]

    class Handle(metaclass=Meta):
        pass

    kernarg.register(Base, lambda h: 0x1234)
    try:
        for pack in (kernarg.pack, kernarg.Signature("float* p").pack):
            assert bytes(pack((Handle(),))) == struct.pack("<Q", 0x1234)
    finally:
        kernarg.register(Base, None)


def test_register_rejects_value_types_and_non_callables():
    with pytest.raises(TypeError):
        kernarg.register(int, lambda x: 0)
    with pytest.raises(TypeError, match="callable"):
        kernarg.register(type("T", (), {}), 42)


# ------------------------------------------------------------------------------------------
# cuda.core Buffer: recognised before any protocol probing; never needs a driver


def test_cuda_core_buffer_from_handle():
    from cuda.core import Buffer

    bufs = [Buffer.from_handle(0x7000_0000 + 256 * i, 256) for i in range(3)]
    b = kernarg.pack((True, *bufs, 5))
    assert b.offsets == (0, 8, 16, 24, 32)
    assert bytes(b)[8:32] == struct.pack("<QQQ", *(int(x.handle) for x in bufs))


def _memory_resource(*, device=True, host=False, managed=None, device_id=0, reads=None,
                     weakrefs=True):
    """A cuda.core MemoryResource that says where its memory is, counting the reads of its
    device accessibility in ``reads`` (a list) when given; ``weakrefs=False``: one that takes
    no weak references (its class has __slots__ without __weakref__)."""
    from cuda.core._memory import MemoryResource

    class StandInResource(MemoryResource):
        __slots__ = ("building", "__weakref__") if weakrefs else ("building",)

        def __init__(self):
            # Buffer.from_handle asks the driver for the current stream of a device-accessible
            # resource: _buffer says "host only" while it runs, as no driver is needed then.
            self.building = False

        def allocate(self, size, stream=None):
            raise NotImplementedError

        def deallocate(self, ptr, size, stream=None):
            pass

        @property
        def is_device_accessible(self):
            if self.building:
                return False
            if reads is not None:
                reads.append(self)
            if isinstance(device, Exception):
                raise device
            return device

        @property
        def is_host_accessible(self):
            return host

        @property
        def device_id(self):
            return device_id

    if managed is not None:
        StandInResource.is_managed = property(lambda self: managed)
    return StandInResource()


def test_cuda_core_buffer_from_pinned_memory_resource():
    # A pinned allocation reports host *and* device accessibility; its handle is a plain int.
    # The packer must treat it as a pointer like any other Buffer (a real peer once crashed).
    from cuda.core import Buffer

    mr = _memory_resource(host=True, device_id=0)
    buf = Buffer.from_handle(0x5550_0000, 64, owner=mr)
    assert buf.memory_resource is None or buf.is_host_accessible in (True, False)
    b = kernarg.pack((buf, 1))
    assert bytes(b)[:8] == struct.pack("<Q", 0x5550_0000)


def _buffer(address, mr, cls=None):
    """A cuda.core Buffer (or ``cls``, a subclass) of 64 bytes at ``address``, of ``mr``."""
    from cuda.core import Buffer

    mr.building = True
    try:
        return (cls or Buffer).from_handle(address, 64, mr=mr)
    finally:
        mr.building = False


# Untyped fast path, the slow path (a handle the fast path does not take: >= 2**60) and typed.
@pytest.mark.parametrize("address", [0x7000_0000, 2**62 + 0x100])
def test_buffer_of_a_host_only_memory_resource_is_refused(address):
    buf = _buffer(address, _memory_resource(device=False, host=True, device_id=-1))
    with pytest.raises(TypeError, match=r"argument 1 \(.*Buffer\): the memory is on the CPU.*"
                                        r"its memory resource, StandInResource, is not device "
                                        r"accessible"):
        kernarg.pack((1, buf))
    with pytest.raises(TypeError, match=r"parameter 1 \('x'\): .*the memory is on the CPU"):
        kernarg.Signature("int n, float* x").pack((1, buf))


@pytest.mark.parametrize("address", [0x7000_0000, 2**62 + 0x100])
def test_buffer_on_another_device_is_refused(address):
    buf = _buffer(address, _memory_resource(device_id=1))
    with pytest.raises(ValueError, match=r"argument 1 \(.*Buffer\): its memory is on CUDA "
                                         r"device 1, but the kernel runs on device 0; copy it "
                                         r"over first \(where peer access is enabled, pass its "
                                         r"address as an int"):
        kernarg.pack((1, buf), device=0)
    sig = kernarg.Signature("int n, float* x")
    with pytest.raises(ValueError, match=r"parameter 1 \('x'\): .*its memory is on CUDA "
                                         r"device 1"):
        sig.pack((1, buf), device=0)
    expected = struct.pack("<q", 1) + struct.pack("<Q", address)
    assert bytes(kernarg.pack((1, buf), device=1)) == expected
    assert bytes(kernarg.pack((1, buf))) == expected            # no device given: no check
    assert bytes(sig.pack((1, buf), device=1)) == struct.pack("<iiQ", 1, 0, address)


@pytest.mark.parametrize("where", [
    {"host": True, "device_id": 0},                   # pinned: every device reaches it
    {"host": True, "managed": True, "device_id": 0},  # managed
    {"host": False, "managed": True, "device_id": 0},
    {"device_id": -1},                                # a resource that names no device
    {"device_id": None},
])
def test_buffers_every_device_reaches_are_not_checked(where):
    buf = _buffer(0x7000_0000, _memory_resource(**where))
    assert bytes(kernarg.pack((buf,), device=3)) == struct.pack("<Q", 0x7000_0000)
    assert bytes(kernarg.Signature("float* x").pack((buf,), device=3)) == \
        struct.pack("<Q", 0x7000_0000)


def test_memory_resource_is_read_once_per_run_and_not_kept_alive():
    reads = []
    mr1 = _memory_resource(reads=reads)
    bufs = [_buffer(0x7000_0000 + 256 * i, mr1) for i in range(4)]
    kernarg.pack(bufs, device=0)
    kernarg.Signature("float*, float*, float*, float*").pack(bufs, device=0)
    assert len(reads) == 1                      # one resource, read once
    mr2 = _memory_resource(reads=reads)
    kernarg.pack((bufs[0], _buffer(0x8000_0000, mr2), bufs[1]), device=0)
    assert reads[1:] == [mr2, mr1]              # each change of resource is read again
    reads.clear()
    gone = weakref.ref(mr1)
    del mr1, bufs
    gc.collect()
    assert gone() is None                       # kernarg remembered it without a reference
    mr3 = _memory_resource(reads=reads, device_id=1)
    # (Held in a name: a Buffer of a Python resource must not die while an exception is set,
    # as a temporary does while the exception unwinds; cuda.core 1.2 then calls deallocate()
    # with the exception pending, and Python raises SystemError.)
    buf3 = _buffer(0x9000_0000, mr3)
    with pytest.raises(ValueError, match="its memory is on CUDA device 1"):
        kernarg.pack((buf3,), device=0)
    assert reads == [mr3]


def test_memory_resource_without_weak_references_is_read_every_time():
    reads = []
    mr = _memory_resource(reads=reads, device_id=2, weakrefs=False)
    with pytest.raises(TypeError):
        weakref.ref(mr)
    bufs = [_buffer(0x7000_0000 + 256 * i, mr) for i in range(3)]
    assert bytes(kernarg.pack(bufs, device=2)) == struct.pack(
        "<QQQ", *(0x7000_0000 + 256 * i for i in range(3)))
    assert len(reads) == 3                      # nothing remembered: no reference to hold
    with pytest.raises(ValueError, match="argument 0 .*its memory is on CUDA device 2"):
        kernarg.pack(bufs, device=0)


class _NoTruth:
    def __bool__(self):
        raise ZeroDivisionError("no truth value")


def test_memory_resource_that_raises_names_the_argument():
    buf = _buffer(0x7000_0000, _memory_resource(device=RuntimeError("no context")))
    with pytest.raises(RuntimeError, match=r"argument 0 \(.*Buffer\): reading its memory "
                                           r"resource \(StandInResource\) raised RuntimeError: "
                                           r"no context"):
        kernarg.pack((buf,))
    for where in ({"device": _NoTruth()}, {"host": _NoTruth()}):
        buf = _buffer(0x7000_0000, _memory_resource(**where))
        with pytest.raises(ZeroDivisionError, match=r"argument 0 \(.*Buffer\): reading its "
                                                    r"memory resource .*no truth value"):
            kernarg.pack((buf,))


def test_cuda_core_managed_buffer_packs_as_a_buffer():
    """cuda.core 1.2's ManagedBuffer (what ManagedMemoryResource.allocate returns) is a Buffer
    subclass: packed as its address, typed and untyped, on every device where its resource
    says the memory is managed; closed, refused by name."""
    import sys

    core = pytest.importorskip("cuda.core")
    if not hasattr(core, "ManagedBuffer"):
        pytest.skip(f"cuda.core {core.__version__} has no ManagedBuffer (added in 1.2)")
    bare = core.ManagedBuffer.from_handle(0x7300_0000, 64)
    owned = _buffer(0x7400_0000, _memory_resource(managed=True, host=True, device_id=0),
                    core.ManagedBuffer)
    assert type(owned) is core.ManagedBuffer
    assert kernarg._handler._classification(owned) == "pointer"
    sig = kernarg.Signature("int n, float* a, const float* b")
    before = [sys.getrefcount(b) for b in (bare, owned)]
    for device in (None, 0, 3):
        assert bytes(kernarg.pack((5, bare, owned), device=device)) == \
            struct.pack("<qQQ", 5, 0x7300_0000, 0x7400_0000)
        assert bytes(sig.pack((5, bare, owned), device=device)) == \
            struct.pack("<iiQQ", 5, 0, 0x7300_0000, 0x7400_0000)
    after = [sys.getrefcount(b) for b in (bare, owned)]
    assert after == before
    bare.close()
    with pytest.raises(ValueError, match=r"argument 1 \(.*ManagedBuffer\).*closed"):
        kernarg.pack((5, bare))


def test_closed_buffer_is_an_error_not_a_null_pointer():
    from cuda.core import Buffer

    buf = Buffer.from_handle(0x1000, 64)
    buf.close()
    with pytest.raises(ValueError, match="argument 1.*closed"):
        kernarg.pack((1, buf))


def test_buffer_handle_as_cuda_bindings_object():
    # Some memory resources hand out cuda.bindings CUdeviceptr handles instead of ints.
    from cuda.bindings import driver
    from cuda.core import Buffer

    buf = Buffer.from_handle(driver.CUdeviceptr(0x4440_0000), 64)
    assert bytes(kernarg.pack((buf,))) == struct.pack("<Q", 0x4440_0000)


def test_buffer_handle_is_read_as_an_index_never_truncated():
    # A Buffer subclass's handle is read as operator.index() reads it, as every other
    # address is: int() made address 4096 of 4096.5, and address 1 of True.
    from cuda.core import Buffer

    class OddHandle(Buffer):
        answer = None

        @property
        def handle(self):
            return type(self).answer

    IntOnly = type("IntOnly", (), {"__int__": lambda self: 0x5000})
    buf = OddHandle.__new__(OddHandle)     # from_handle makes a Buffer, not the subclass
    sig = kernarg.Signature("float* p")
    for answer in (4096.5, np.float32(4096), True, np.True_, Decimal(4096), IntOnly(), "4096"):
        OddHandle.answer = answer
        shown = type(answer).__name__
        for pack in (lambda: kernarg.pack((1, buf)), lambda: sig.pack((buf,))):
            with pytest.raises(TypeError, match=rf"argument [01] \(.*OddHandle\): "
                                                rf"Buffer.handle gave {shown}, expected an int"):
                pack()
    for answer in (np.uint64(0x5000), np.int32(0x5000), 0x5000):
        OddHandle.answer = answer
        assert bytes(kernarg.pack((buf,))) == struct.pack("<Q", 0x5000)
        assert bytes(sig.pack((buf,))) == struct.pack("<Q", 0x5000)
    OddHandle.answer = 2**64
    with pytest.raises(OverflowError, match="Buffer.handle gave address 18446744073709551616"):
        kernarg.pack((buf,))


def test_cuda_bindings_device_pointer_packs_its_address():
    # What cuda.bindings' cuMemAlloc returns: an object holding the address (no __index__).
    from cuda.bindings import driver

    args = (driver.CUdeviceptr(0x7f00_1234_5600), np.int8(1), driver.CUdeviceptr(0),
            driver.CUdeviceptr(2**64 - 1))
    b = kernarg.pack(args)
    assert b.offsets == (0, 8, 16, 24)
    assert bytes(b) == (struct.pack("<Q", 0x7f00_1234_5600) + b"\x01" + bytes(7) + bytes(8)
                        + b"\xff" * 8)
    assert b.producer_streams == ()


# ------------------------------------------------------------------------------------------
# Differential property test against the reference packer


def _ints(lo, hi):
    return st.integers(lo, hi)


def _floats(width):
    return st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True)


_np_values = st.one_of(
    _ints(-128, 127).map(np.int8), _ints(0, 255).map(np.uint8),
    _ints(-2**15, 2**15 - 1).map(np.int16), _ints(0, 2**16 - 1).map(np.uint16),
    _ints(-2**31, 2**31 - 1).map(np.int32), _ints(0, 2**32 - 1).map(np.uint32),
    _ints(-2**63, 2**63 - 1).map(np.int64), _ints(0, 2**64 - 1).map(np.uint64),
    _floats(16).map(np.float16), _floats(32).map(np.float32), _floats(64).map(np.float64),
    st.booleans().map(np.bool_),
    st.tuples(_floats(32), _floats(32)).map(lambda t: np.complex64(complex(*t))),
    st.complex_numbers(allow_nan=True).map(np.complex128),
    _floats(32).map(ml_dtypes.bfloat16),
)
_ctypes_values = st.one_of(
    _ints(-2**31, 2**31 - 1).map(ctypes.c_int), _ints(0, 255).map(ctypes.c_ubyte),
    _ints(-2**15, 2**15 - 1).map(ctypes.c_short), _floats(32).map(ctypes.c_float),
    _floats(64).map(ctypes.c_double), _ints(0, 2**64 - 1).map(ctypes.c_void_p),
    st.tuples(_ints(0, 255), _floats(64)).map(lambda t: Pair(bytes([t[0]]), t[1])),
)
_PAIR_DTYPE = np.dtype([("a", np.int8), ("b", np.float64)], align=True)
# Structured scalars: aligned, packed (align=False), and aligned ones rewrapped as a
# numpy.record or numpy.void dtype (whose dtype.alignment numpy gives as 1).
_STRUCT_SCALARS = [
    np.array([(-3, 2.5)], _PAIR_DTYPE)[0],
    np.array([(1, 2, 3)], np.dtype([("a", np.int16), ("b", np.int8), ("c", np.int32)]))[0],
    np.rec.array(np.array([(7, -0.5)], _PAIR_DTYPE))[0],
    np.ones(1, np.dtype((np.void, np.dtype([("x", np.float32), ("n", np.int16)],
                                           align=True))))[0],
]
ANY_VALUE = st.one_of(
    st.booleans(), _ints(-2**63, 2**64 - 1), _floats(64), st.complex_numbers(allow_nan=True),
    st.none(), _np_values, _ctypes_values, st.sampled_from(_STRUCT_SCALARS),
    st.sampled_from([-1, 0, 1, 2**63 - 1, 2**63, -2**63, 2**64 - 1, 2**30, -(2**30), 2**60]),
    st.sampled_from([np.float16(6e-8), np.float16(-0.0), np.float16(np.inf),
                     np.float16(np.nan), np.float32(1e-45), np.float64(5e-324)]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ANY_VALUE, max_size=40))
def test_matches_reference_packer(args):
    check_block(kernarg.pack(tuple(args)), tuple(args))


# Ints by CPython digit count (30-bit digits): zero, one digit, two digits (device addresses),
# three or more, each sign. The int-run fast path reads one and two digits itself (from the
# digit count and sign CPython keeps, which differ between 3.11 and 3.12+); wider ints and
# anything that is not an exact int end the run and take the general converter.
_INTS_BY_DIGITS = st.one_of(
    st.just(0), st.integers(1, 2**30 - 1), st.integers(-(2**30 - 1), -1),
    st.integers(2**30, 2**60 - 1), st.integers(-(2**60 - 1), -(2**30)),
    st.integers(2**60, 2**64 - 1), st.integers(-2**63, -(2**60)),
    st.sampled_from([2**30, -(2**30), 2**60 - 1, -(2**60 - 1), 2**60, -(2**60)]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_INTS_BY_DIGITS, st.sampled_from([np.int32(7), 1.5, True])),
                max_size=40))
def test_int_runs_of_every_digit_count(args):
    check_block(kernarg.pack(tuple(args)), tuple(args))


def test_more_types_than_cache_slots():
    # 300 distinct struct types (> the 256-slot per-type cache) force cache conflicts; every
    # pack must still produce the reference bytes, and repeat packs take the cached path.
    types_ = [type(f"S{i}", (ctypes.Structure,), {"_fields_": [("a", ctypes.c_uint8 * (1 + i % 7)),
                                                                  ("b", ctypes.c_int32)]})
              for i in range(300)]
    args = tuple(t() for t in types_)
    for i, a in enumerate(args):
        a.b = i
    for _ in range(3):
        check_block(kernarg.pack(args[:200]), args[:200])
        check_block(kernarg.pack(args[100:]), args[100:])


def _types_sharing_a_cache_set(base, n):
    """``n`` subclasses of ``base`` whose per-type cache set is the same."""
    slot, by_set = kernarg._handler._cache_slot, {}
    for i in range(128 * 8):
        cls = type(f"{base.__name__}{i}", (base,), {})
        same = by_set.setdefault(slot(cls.__new__(cls)), [])
        same.append(cls)
        if len(same) == n:
            return same
    raise AssertionError(f"no {n} of {128 * 8} types in one set")


def test_two_types_that_share_a_cache_set_are_both_kept():
    # The per-type cache keeps two types whose hash picks the same set, whatever their
    # addresses: a pack that alternates them finds both there (a direct-mapped cache, before
    # session 102, looked one of them up again at every argument). A third type in the set
    # takes the slot of the one stored first.
    cached = kernarg._handler._cached
    first, second, third = _types_sharing_a_cache_set(ctypes.c_double, 3)
    a, b, c = first(1.5), second(-2.5), third(0.25)
    kernarg._handler._forget_types()
    assert not any(cached(x) for x in (a, b, c))
    for _ in range(3):
        assert bytes(kernarg.pack((a, b))) == struct.pack("<dd", 1.5, -2.5)
        assert [cached(x) for x in (a, b, c)] == [True, True, False]
    assert bytes(kernarg.pack((c, b))) == struct.pack("<dd", 0.25, -2.5)
    assert [cached(x) for x in (a, b, c)] == [False, True, True]
    assert bytes(kernarg.pack((a,))) == struct.pack("<d", 1.5)      # takes b's slot, then
    assert [cached(x) for x in (a, b, c)] == [True, False, True]
    assert bytes(kernarg.pack((b, b))) == struct.pack("<dd", -2.5, -2.5)     # c's
    assert [cached(x) for x in (a, b, c)] == [True, True, False]
    sig = kernarg.Signature("double, double, double")
    for _ in range(3):      # typed, the same cache: the three take turns, each packs right
        assert bytes(sig.pack((a, b, c))) == struct.pack("<ddd", 1.5, -2.5, 0.25)


def test_more_types_than_the_classification_memory_holds():
    # kernarg remembers at most 4,096 classified types (the dict also keeps each type alive, so
    # that a cached type pointer cannot be reused by a new type); past that it forgets them all
    # and classifies afresh. Programs that make classes at run time must neither grow without
    # bound nor get wrong bytes after the reset.
    import gc
    import weakref

    def make(i):
        return type(f"Dyn{i}", (ctypes.Structure,), {"_fields_": [("a", ctypes.c_int32),
                                                                     ("b", ctypes.c_int8)]})

    first = make(0)
    first_ref = weakref.ref(first)
    check_block(kernarg.pack((first(5, 1),)), (first(5, 1),))
    del first
    for i in range(1, 4200):
        t = make(i)
        value = t(i, i % 100)
        assert bytes(kernarg.pack((np.int8(1), value))) == \
            b"\x01\x00\x00\x00" + struct.pack("<ib3x", i, i % 100)
    del t, value
    gc.collect()
    assert first_ref() is None, "a type classified before the reset is still held"
    again = make(0)
    check_block(kernarg.pack((again(7, 2), Pair(b"x", 1.0))), (again(7, 2), Pair(b"x", 1.0)))


def test_param_block_refuses_writable_buffer_requests():
    b = kernarg.pack((1, 2.0))
    before = bytes(b)
    with pytest.raises(TypeError, match="read-write"):
        io.BytesIO(b"x" * 16).readinto(b)
    assert bytes(b) == before and memoryview(b).readonly


def test_param_block_repr():
    assert repr(kernarg.pack((True, 1.0))) == "<kernarg.ParamBlock nargs=2 nbytes=16 " \
                                              "offsets=(0, 8)>"


def test_param_block_refuses_pickle_and_copy_by_saying_why():
    # Its bytes hold addresses valid in this process, kept valid by the references it holds:
    # a pickle or copy of them would be a block of dangling pointers.
    import copy
    import pickle

    from producers import CAIObject, cai

    b = kernarg.pack((CAIObject(cai(0x1000)), 1))
    for how in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match="^a kernarg.ParamBlock cannot be pickled or copied: "
                                            "it holds addresses that are valid in this process "
                                            "only"):
            how(b)
    assert b.args is not None and b.nargs == 2


def test_zero_size_structured_scalar_is_refused():
    empty = np.zeros(1, dtype=np.dtype([]))[0]
    with pytest.raises(TypeError, match=r"argument 1 \(numpy\.void\): a zero-size value cannot "
                                        "be a kernel parameter"):
        kernarg.pack((1, empty))


class _BigEndian(ctypes.BigEndianStructure):
    _fields_ = [("a", ctypes.c_int)]


class _HoldsObject(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("o", ctypes.py_object)]


class _NestsBigEndian(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("b", _BigEndian * 2)]


class _InheritsObject(_HoldsObject):       # its own _fields_ list only what it adds
    _fields_ = [("m", ctypes.c_int)]


@pytest.mark.parametrize("bad, message", [
    (np.zeros((), dtype=[("n", "<i4"), ("o", object)])[()],
     r"\(numpy\.void\): field 'o' of its dtype holds Python objects"),
    (np.zeros((), dtype=[("n", ">i4")])[()],
     r"\(numpy\.void\): field 'n' of its dtype is >i4, not in the host's"),
    (np.zeros((), dtype=[("s", [("x", ">f8")], (2,))])[()],
     r"\(numpy\.void\): field 'x' of field 's' of its dtype is >f8"),
    (_BigEndian(1), r"\(test_handler\._BigEndian\): _BigEndian is not in the host's"),
    (_HoldsObject(1, None), r"\(.*\): field 'o' of _HoldsObject is a ctypes\.py_object"),
    (_NestsBigEndian(), r"\(.*\): field 'b' of _NestsBigEndian is not in the host's"),
    (_InheritsObject(), r"\(.*\): field 'o' of _InheritsObject is a ctypes\.py_object"),
], ids=["numpy object field", "numpy big-endian field", "numpy big-endian in a sub-array",
        "ctypes big-endian", "ctypes py_object field", "ctypes nested big-endian",
        "ctypes py_object field of a base"])
def test_structs_a_kernel_cannot_read_are_refused(bad, message):
    # Their bytes are a Python object's address, or values the GPU (little-endian) misreads.
    with pytest.raises(TypeError, match=r"argument 1 " + message):
        kernarg.pack((1, bad))
    with pytest.raises(TypeError, match=r"argument 1 " + message):
        kernarg.pack((1, bad))      # refused again, not cached as a layout that passed
    good = np.zeros((), dtype=np.dtype([("n", "<i4"), ("f", "<f8")], align=True))[()]
    assert kernarg.pack((1, good)).nbytes == 24


_BE_INT = ctypes.c_int32.__ctype_be__


class _HoldsBigEndianScalar(ctypes.Structure):      # a native struct with a swapped field
    _fields_ = [("n", ctypes.c_int), ("b", _BE_INT)]


@pytest.mark.parametrize("bad, message", [
    ((_BE_INT * 2)(1, 2), r"c_int_be_Array_2 is not in the host's"),
    (_HoldsBigEndianScalar(1, 2), r"field 'b' of _HoldsBigEndianScalar is not in the host's"),
], ids=["array of big-endian ints", "big-endian field"])
def test_big_endian_ctypes_inside_arrays_and_structs_are_refused(bad, message):
    # These keep the name and _type_ of the native type: only their byte order tells them.
    with pytest.raises(TypeError, match=r"argument 1 \(.*\): " + message):
        kernarg.pack((1, bad))
    with pytest.raises(ValueError, match=message):
        kernarg.Signature([type(bad)])


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
def test_big_endian_ctypes_scalars_pack_their_value(fallbacks):
    # c_int32.__ctype_be__(1) holds 00 00 00 01; the GPU reads little-endian, so its bytes were
    # a silently wrong 16777216. Its value is the native type's, packed in the GPU's order.
    values = [_BE_INT(-2), ctypes.c_uint16.__ctype_be__(0x1234),
              ctypes.c_double.__ctype_be__(1.5), ctypes.c_float.__ctype_be__(-0.25),
              ctypes.c_uint64.__ctype_be__(2**64 - 3)]
    natives = [ctypes.c_int32(-2), ctypes.c_uint16(0x1234), ctypes.c_double(1.5),
               ctypes.c_float(-0.25), ctypes.c_uint64(2**64 - 3)]
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        for swapped, native in zip(values, natives, strict=True):
            b = kernarg.pack((np.int8(1), swapped))
            assert bytes(b) == bytes(kernarg.pack((np.int8(1), native))), type(swapped)
            assert b.sizes == (1, ctypes.sizeof(native))
            # typed: a declared int takes one, and the swapped type names the native one
            sig = kernarg.Signature([np.int8, type(swapped)])
            assert sig.sizes == b.sizes and bytes(sig.pack((1, swapped))) == bytes(b)
            assert bytes(sig.pack((1, native.value))) == bytes(b)
    assert bytes(kernarg.Signature("int n").pack((_BE_INT(7),))) == struct.pack("<i", 7)


_HOST_INT = ctypes.c_int(3)
_HOST_FLOATS = (ctypes.c_float * 4)()


class _HoldsInts(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int * 2)]


_HOLDS_INTS = _HoldsInts()
_SOME_ADDRESS = 0x7F00_0000_1000      # any address the caller vouches for, as an int


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
@pytest.mark.parametrize("pointer, target", [
    (lambda: ctypes.c_char_p(b"hi"), "a Python string's characters"),
    (lambda: ctypes.c_wchar_p("hi"), "a Python string's characters"),
    (lambda: ctypes.pointer(_HOST_INT), "the ctypes c_int it was made from"),
    (lambda: ctypes.cast(_HOST_FLOATS, ctypes.POINTER(ctypes.c_int)),
     "the ctypes c_float_Array_4 it was made from"),
    (lambda: ctypes.cast(_HOST_FLOATS, ctypes.c_void_p),
     "the ctypes c_float_Array_4 it was made from"),
    (lambda: ctypes.pointer(_HOLDS_INTS.a),                 # a field: its struct's memory
     "the ctypes c_int_Array_2 it was made from"),
], ids=["c_char_p of bytes", "c_wchar_p of str", "pointer()", "cast() of an array",
        "c_void_p cast", "pointer() to a field"])
def test_ctypes_pointers_into_python_memory_are_refused(pointer, target, fallbacks):
    # These are addresses of host memory ctypes or Python allocated: a kernel reading them
    # faults (and the context is lost). Before, they were packed as any address.
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        with pytest.raises(TypeError, match=rf"argument 1 \(.*\): the ctypes pointer points at "
                                            rf"{re.escape(target)}, host memory a kernel cannot"):
            kernarg.pack((1, pointer()))
        with pytest.raises(TypeError, match=rf"parameter 1 \('p'\): the ctypes pointer points "
                                            rf"at {re.escape(target)}"):
            kernarg.Signature("int n, void* p").pack((1, pointer()))


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
def test_ctypes_pointers_the_caller_vouches_for_are_taken(fallbacks):
    # Made from an int, cast from another pointer, or into a ctypes view of memory ctypes did
    # not allocate (from_address: pinned memory, say): the address is the caller's.
    view = (ctypes.c_float * 4).from_address(ctypes.addressof(_HOST_FLOATS))
    cases = [
        (ctypes.c_void_p(_SOME_ADDRESS), _SOME_ADDRESS),
        (ctypes.c_char_p(_SOME_ADDRESS), _SOME_ADDRESS),
        (ctypes.cast(_SOME_ADDRESS, ctypes.POINTER(ctypes.c_float)), _SOME_ADDRESS),
        (ctypes.cast(ctypes.c_void_p(_SOME_ADDRESS), ctypes.POINTER(ctypes.c_int)),
         _SOME_ADDRESS),
        (ctypes.c_void_p.from_buffer(bytearray(_SOME_ADDRESS.to_bytes(8, "little"))),
         _SOME_ADDRESS),
        (ctypes.pointer(view), ctypes.addressof(_HOST_FLOATS)),
        (ctypes.POINTER(ctypes.c_int)(), 0),
    ]
    sig = kernarg.Signature("int n, void* p")
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        for pointer, address in cases:
            expected = struct.pack("<qQ", 1, address)
            assert bytes(kernarg.pack((1, pointer))) == expected, pointer
            assert bytes(sig.pack((np.int64(1), pointer)))[8:] == expected[8:], pointer


def _counted(base, reads, **namespace):
    """A subclass of ctypes type ``base`` whose ``_objects`` (what a ctypes value keeps alive,
    read by kernarg's check of a pointer's target) appends to ``reads`` when Python reads it.
    ``namespace``: more of the class's attributes (a POINTER(T) subclass needs ``_type_``)."""
    kept = ctypes.c_int.__mro__[-2].__dict__["_objects"]       # _CData's member descriptor

    def objects(self):
        reads.append(type(self).__name__)
        return kept.__get__(self)

    return type(f"Counted_{base.__name__}", (base,), {"_objects": property(objects),
                                                       **namespace})


def test_ctypes_pointers_that_keep_nothing_alive_are_copied_without_the_check():
    """A ctypes pointer made from an int, and a struct or array whose pointers were given as
    ints, keep no object alive (ctypes' _objects is None), so nothing they point at is host
    memory kernarg refuses: the packers copy them as they copy numbers, without the Python
    code that checks targets (a Signature.pack of a c_void_p took ~2 us for it, ~30 times an
    int's). A value that keeps an object is checked, and so is every value where kernarg reads
    ctypes through the buffer protocol (the fallback, which this test checks the counting on)."""
    reads = []
    pointer_t = _counted(ctypes.c_void_p, reads)

    class Pair(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p), ("n", ctypes.c_int)]

    pair_t = _counted(Pair, reads)
    array_t = _counted(ctypes.c_void_p * 2, reads)
    p = pointer_t(_SOME_ADDRESS)
    pair = pair_t(_SOME_ADDRESS + 8, 7)
    pair.p = _SOME_ADDRESS + 16                 # set after it was made, as an int
    pairs = array_t(_SOME_ADDRESS, None)
    assert reads == [] and (p._objects, pair._objects, pairs._objects) == (None,) * 3
    reads.clear()
    untyped = struct.pack("<qQQi4xQQ", 1, _SOME_ADDRESS, _SOME_ADDRESS + 16, 7,
                          _SOME_ADDRESS, 0)
    sig = kernarg.Signature(["int", "void*", pair_t, "float*"])
    typed = struct.pack("<i4xQQi4xQ", 1, _SOME_ADDRESS, _SOME_ADDRESS + 16, 7, _SOME_ADDRESS)
    for _ in range(2):                          # the types' first packs, and the cached
        assert bytes(kernarg.pack((1, p, pair, pairs))) == untyped
        assert bytes(sig.pack((1, p, pair, p))) == typed
        assert reads == []
    with _layout_fallbacks():                   # each value's check reads _objects
        assert bytes(kernarg.pack((1, p, pair, pairs))) == untyped
        assert bytes(sig.pack((1, p, pair, p))) == typed
        assert set(reads) == {pointer_t.__name__, pair_t.__name__, array_t.__name__}
    # One that keeps only another pointer (what ctypes.cast keeps) is copied as well
    # (copy_ctypes_pointers), its kept dict read in C, and so is a struct or array
    # holding one; one that keeps anything else has its target checked, and is refused where
    # it is host memory.
    reads.clear()
    vouched = ctypes.cast(ctypes.c_void_p(_SOME_ADDRESS), pointer_t)    # keeps the c_void_p
    assert bytes(kernarg.pack((vouched,))) == struct.pack("<Q", _SOME_ADDRESS)
    assert bytes(sig.pack((1, vouched, pair, p)))[8:16] == struct.pack("<Q", _SOME_ADDRESS)
    held, helds = pair_t(vouched, 7), array_t(None, vouched)
    assert held._objects and helds._objects     # (two reads, by this test)
    reads.clear()
    assert bytes(kernarg.pack((held, helds))) == struct.pack("<Qi4xQQ", _SOME_ADDRESS, 7, 0,
                                                             _SOME_ADDRESS)
    assert bytes(sig.pack((1, p, held, p)))[16:32] == struct.pack("<Qi4x", _SOME_ADDRESS, 7)
    assert reads == []
    viewed = ctypes.cast((ctypes.c_float * 4).from_address(_SOME_ADDRESS), pointer_t)
    assert bytes(kernarg.pack((viewed,))) == struct.pack("<Q", _SOME_ADDRESS)
    assert reads and set(reads) == {pointer_t.__name__}
    reads.clear()
    assert bytes(sig.pack((1, viewed, pair, p)))[8:16] == struct.pack("<Q", _SOME_ADDRESS)
    assert reads and set(reads) == {pointer_t.__name__}
    host = ctypes.cast(_HOST_FLOATS, pointer_t)
    with pytest.raises(TypeError, match=r"argument 0 .*points at the ctypes c_float_Array_4"):
        kernarg.pack((host,))
    with pytest.raises(TypeError, match=r"parameter 1: .*points at the ctypes c_float_Array_4"):
        sig.pack((1, host, pair, p))
    pair.p = ctypes.cast(_HOST_FLOATS, ctypes.c_void_p)
    with pytest.raises(TypeError, match=r"argument 0 .*field p is a ctypes pointer to the "
                                        r"ctypes c_float_Array_4"):
        kernarg.pack((pair,))
    with pytest.raises(TypeError, match=r"parameter 2: field p is a ctypes pointer to the "
                                        r"ctypes c_float_Array_4"):
        sig.pack((1, p, pair, p))


def test_ctypes_pointers_cast_from_other_pointers_are_taken_and_left_unchanged():
    """ctypes.cast makes the pointer it returns keep the one it was cast from, in a dict the
    two then share (and the source keeps itself in it): a c_void_p once cast, a POINTER(T)
    cast from one, and a struct or array holding them keep only other pointers, no host
    memory their addresses could be in. Both packers take them (their check reads the dicts
    in C, where its Python walk cost ~1 us), read each address behind the pointer's b_ptr,
    and leave what they keep as it was: through ctypes.cast, Signature.pack added the
    pointer itself to the dict at each pack. A pointer into a kept pointer's own storage, or
    one that keeps host memory besides, is still refused by argument or parameter and field."""
    floats = ctypes.POINTER(ctypes.c_float)

    class Pair(ctypes.Structure):
        _fields_ = [("p", ctypes.c_void_p), ("x", floats)]

    source = ctypes.c_void_p(_SOME_ADDRESS)
    cast = ctypes.cast(source, floats)
    again = ctypes.cast(cast, ctypes.c_void_p)
    pair = Pair(source, cast)
    pairs = (ctypes.c_void_p * 2)(again, None)
    kept = {id(v): dict(v._objects) for v in (source, cast, again)}
    assert len(kept[id(source)]) == 2 and source._objects is cast._objects   # the shared dict
    nested = repr(pair._objects), repr(pairs._objects)
    untyped = struct.pack("<qQQQQQQQ", 1, _SOME_ADDRESS, _SOME_ADDRESS, _SOME_ADDRESS,
                          _SOME_ADDRESS, _SOME_ADDRESS, _SOME_ADDRESS, 0)
    sig = kernarg.Signature(["int", "void*", "float*", "void*", Pair, "void**"])
    typed = struct.pack("<i4xQQQQQQ", 1, _SOME_ADDRESS, _SOME_ADDRESS, _SOME_ADDRESS,
                        _SOME_ADDRESS, _SOME_ADDRESS, ctypes.addressof(pairs))
    for fallbacks in (False, True):
        with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
            for _ in range(2):
                assert bytes(kernarg.pack((1, source, cast, again, pair, pairs))) == untyped
                if not fallbacks:       # (ctypes.cast is the fallbacks' reading of an address)
                    assert bytes(sig.pack((1, source, cast, again, pair, ctypes.c_void_p(
                        ctypes.addressof(pairs))))) == typed
                    assert {id(v): dict(v._objects) for v in (source, cast, again)} == kept
                    assert (repr(pair._objects), repr(pairs._objects)) == nested
    # A pointer into a kept pointer's own 8 bytes: host memory ctypes allocated.
    inward = ctypes.pointer(source)
    for value in (inward, ctypes.cast(inward, ctypes.c_void_p)):
        with pytest.raises(TypeError, match=r"argument 1 .*points at the ctypes c_void_p"):
            kernarg.pack((1, value))
        with pytest.raises(TypeError, match=r"parameter 1: .*points at the ctypes c_void_p"):
            sig.pack((1, value, cast, again, pair, None))
    # A field pointing into a kept pointer's own storage (the struct keeps the pointer through
    # the cast): refused. Eight bytes of a struct that are not a pointer but hold such an
    # address (in C, every 8 bytes at every offset are compared): taken, as they were.
    class Tagged(ctypes.Structure):
        _pack_ = 1
        _layout_ = "ms"         # (what _pack_ implies; 3.14 warns where it is not said)
        _fields_ = [("tag", ctypes.c_char), ("p", ctypes.c_void_p), ("n", ctypes.c_uint64)]

    inside = Tagged(b"t", ctypes.cast(inward, ctypes.c_void_p), 0)
    with pytest.raises(TypeError, match=r"argument 1 .*field p is a ctypes pointer to the "
                                        r"ctypes c_void_p"):
        kernarg.pack((1, inside))
    with pytest.raises(TypeError, match=r"parameter 1: field p is a ctypes pointer to the "
                                        r"ctypes c_void_p"):
        kernarg.Signature(["int", Tagged]).pack((1, inside))
    beside = Tagged(b"t", ctypes.cast(source, ctypes.c_void_p), ctypes.addressof(source))
    expected = b"t" + struct.pack("<QQ", _SOME_ADDRESS, ctypes.addressof(source))
    assert bytes(kernarg.pack((beside,))) == expected
    assert bytes(kernarg.Signature([Tagged]).pack((beside,))) == expected
    # A dict of more kept pointers than the C check keeps to compare at the end (64): the
    # rest are compared as they are met. Bytes written behind ctypes' back (from_address)
    # to point into the 91st one's storage: refused, as a pointer and as a struct's field.
    shared = ctypes.c_void_p(_SOME_ADDRESS)
    middles = [ctypes.cast(shared, ctypes.c_void_p) for _ in range(100)]
    for middle in middles:
        ctypes.cast(middle, ctypes.c_void_p)        # adds middle to the dict they share
    assert len(shared._objects) == 101
    wide = ctypes.cast(shared, ctypes.c_void_p)
    held_wide = Tagged(b"t", wide, 0)
    assert bytes(kernarg.pack((wide, held_wide)))[:8] == struct.pack("<Q", _SOME_ADDRESS)
    for value, at in ((wide, 0), (held_wide, 1)):
        ctypes.c_uint64.from_address(ctypes.addressof(value) + at).value = \
            ctypes.addressof(middles[90])
    with pytest.raises(TypeError, match=r"argument 0 .*points at the ctypes c_void_p"):
        kernarg.pack((wide,))
    with pytest.raises(TypeError, match=r"argument 0 .*field p is a ctypes pointer to the "
                                        r"ctypes c_void_p"):
        kernarg.pack((held_wide,))
    # More pointers than the C check reads at once (1024 bytes): the slow path's check.
    many = (ctypes.c_void_p * 200)()
    many[199] = again
    assert bytes(kernarg.pack((many,)))[-8:] == struct.pack("<Q", _SOME_ADDRESS)
    many[0] = ctypes.cast(inward, ctypes.c_void_p)
    with pytest.raises(TypeError, match=r"argument 0 .*element \[0\] is a ctypes pointer to "
                                        r"the ctypes c_void_p"):
        kernarg.pack((many,))
    # Host memory kept besides the pointers, pointed at by a field.
    host = (ctypes.c_float * 4)()
    mixed = Pair(source, ctypes.cast(host, floats))
    with pytest.raises(TypeError, match=r"argument 1 .*field x is a ctypes pointer to the "
                                        r"ctypes c_float_Array_4"):
        kernarg.pack((1, mixed))
    with pytest.raises(TypeError, match=r"parameter 4: field x is a ctypes pointer to the "
                                        r"ctypes c_float_Array_4"):
        sig.pack((1, source, cast, again, mixed, None))


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
def test_ctypes_views_are_checked_against_what_their_root_keeps(fallbacks):
    """A field or element read from a ctypes struct, union or array (``outer.inner``,
    ``outer.inner.p`` of a POINTER field, ``array[1]``) is a view of its memory, and keeps
    nothing itself (``_objects`` None): ctypes keeps what a pointer set through it needs
    alive in the object at the root of its ``_b_base_``s. A view whose pointer points into
    host memory that root keeps is refused as the root would be; the packers took it as an
    address given as an int. One whose root keeps nothing, or only other pointers, is still
    copied in C (no ``_objects`` read from Python)."""
    reads = []
    inner_t = _counted(type("Inner", (ctypes.Structure,), {"_fields_": [
        ("p", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_int)]}), reads)
    floats_t = _counted(ctypes.POINTER(ctypes.c_float), reads, _type_=ctypes.c_float)

    class Outer(ctypes.Structure):
        _fields_ = [("tag", ctypes.c_int), ("inner", inner_t), ("x", floats_t)]

    host = ctypes.c_float(1)
    outer = Outer()
    outer.inner.p = ctypes.pointer(host)
    outer.x = ctypes.cast(ctypes.pointer(host), floats_t)
    views = (inner_t * 2)()
    views[1].p = ctypes.pointer(host)
    sig_inner = kernarg.Signature(["int", inner_t])
    sig_float = kernarg.Signature(["int", "float*"])
    message = r"is a ctypes pointer to the ctypes c_float it was made from, host memory"
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        for view in (outer.inner, views[1]):
            assert view._objects is None and view._b_base_ is not None
            with pytest.raises(TypeError, match=rf"^argument 1 \(.*\): field p {message}"):
                kernarg.pack((1, view))
            with pytest.raises(TypeError, match=rf"^parameter 1: field p {message}"):
                sig_inner.pack((1, view))
        for view in (outer.inner.p, outer.x):       # a POINTER field's value: a view too
            assert view._objects is None and view._b_base_ is not None
            with pytest.raises(TypeError, match=r"^argument 1 .*: the ctypes pointer points "
                                                r"at the ctypes c_float it was made from"):
                kernarg.pack((1, view))
            with pytest.raises(TypeError, match=r"^parameter 1: the ctypes pointer points at "
                                                r"the ctypes c_float it was made from"):
                sig_float.pack((1, view))
        # A view whose own pointers are not into what its root keeps: taken, as they were.
        assert bytes(kernarg.pack((1, views[0]))) == struct.pack("<q", 1) + bytes(16)
        assert bytes(sig_inner.pack((1, views[0]))) == struct.pack("<i4x", 1) + bytes(16)
    # Views whose root keeps nothing, or only pointers cast from others: copied in C, with no
    # Python read of what they keep (but under the fallbacks, which read it).
    bare = Outer()
    bare.inner.n = 3
    cast = Outer()
    cast.inner.p = ctypes.cast(ctypes.c_void_p(_SOME_ADDRESS), ctypes.POINTER(ctypes.c_float))
    cast.inner.n = 3
    cast.x = ctypes.cast(ctypes.c_void_p(_SOME_ADDRESS), floats_t)
    assert bare._objects is None and cast._objects
    for root, address in ((bare, 0), (cast, _SOME_ADDRESS)):
        inner, x = root.inner, root.x
        reads.clear()
        for _ in range(2):
            assert bytes(kernarg.pack((1, inner, x))) == struct.pack("<qQi4xQ", 1, address, 3,
                                                                     address)
            assert bytes(sig_inner.pack((1, inner))) == struct.pack("<i4xQi4x", 1, address, 3)
            assert bytes(sig_float.pack((1, x))) == struct.pack("<i4xQ", 1, address)
        assert reads == [], root


class _Cell(ctypes.Structure):
    _pack_ = 1
    _layout_ = "ms"         # (what _pack_ implies; 3.14 warns where it is not said)
    _fields_ = [("tag", ctypes.c_char), ("p", ctypes.c_void_p),
                ("q", ctypes.POINTER(ctypes.c_float)), ("n", ctypes.c_uint64)]


class _Box(ctypes.Structure):
    _pack_ = 1
    _layout_ = "ms"
    _fields_ = [("tag", ctypes.c_char), ("cells", _Cell * 2)]


# How a pointer slot of a _Box is set: (how, refused). "cast": ctypes.cast of a c_void_p made
# from an int (keeps only pointers); "host": into a ctypes array ctypes allocated; "inward":
# into a kept c_void_p's own 8 bytes (host memory too).
_SLOT_SETTINGS = [("none", False), ("int", False), ("cast", False), ("host", True),
                  ("inward", True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_SLOT_SETTINGS), min_size=4, max_size=4),
       st.lists(st.booleans(), min_size=2, max_size=2),
       st.sampled_from(["box", "cells", "cell 0", "cell 1", "q 0", "q 1"]),
       st.booleans())
def test_ctypes_pointer_checks_agree_with_what_is_kept(slots, alarms, what, fallbacks):
    """Any mix of pointers given as ints, cast from pointers made from ints, into host memory
    ctypes allocated, and into a kept pointer's own storage, in a packed struct's unaligned
    fields, with numbers that hold a kept pointer's storage address (the C check's false
    alarms), packed as the struct, or a field or element read from it (a view): refused
    exactly where a pointer in what is packed points into host memory, else packed as its
    bytes, by both packers, in C and under the layout fallbacks."""
    box = _Box(b"b")
    sources = [ctypes.c_void_p(_SOME_ADDRESS + 64 * k) for k in range(4)]
    refused = []
    for k, (how, bad) in enumerate(slots):
        cell, name = box.cells[k // 2], "pq"[k % 2]
        kind = ctypes.c_void_p if name == "p" else ctypes.POINTER(ctypes.c_float)
        if how == "int":
            setattr(cell, name, ctypes.cast(_SOME_ADDRESS + 8 * k, kind))
        elif how == "cast":
            setattr(cell, name, ctypes.cast(sources[k], kind))
        elif how == "host":
            setattr(cell, name, ctypes.cast(_HOST_FLOATS, kind))
        elif how == "inward":
            setattr(cell, name, ctypes.cast(ctypes.pointer(sources[k]), kind))
        if bad:
            refused.append(k)
    for k, alarm in enumerate(alarms):
        if alarm:
            box.cells[k].n = ctypes.addressof(sources[2 * k])
    views = {"box": (box, range(4)), "cells": (box.cells, range(4)),
             "cell 0": (box.cells[0], (0, 1)), "cell 1": (box.cells[1], (2, 3)),
             "q 0": (box.cells[0].q, (1,)), "q 1": (box.cells[1].q, (3,))}
    value, holds = views[what]
    typed = kernarg.Signature(["float*" if what.startswith("q") else type(value)])
    expected = ctypes.string_at(ctypes.addressof(value), ctypes.sizeof(value))
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        for pack in (kernarg.pack, typed.pack):
            if any(k in refused for k in holds):
                with pytest.raises(TypeError, match="host memory a kernel cannot read"):
                    pack((value,))
            else:
                assert bytes(pack((value,)))[:len(expected)] == expected


class _Holder(ctypes.Structure):
    _fields_ = [("n", ctypes.c_int), ("x", ctypes.POINTER(ctypes.c_float)),
                ("s", ctypes.c_char_p), ("many", ctypes.c_void_p * 2)]


class _Outer(ctypes.Structure):
    _fields_ = [("tag", ctypes.c_char), ("h", _Holder * 2)]


class _BitsAndPointer(ctypes.Structure):      # ctypes builds it: numpy has no bitfields
    _fields_ = [("flags", ctypes.c_uint, 3), ("p", ctypes.POINTER(ctypes.c_float))]


class _Derived(_Holder):
    _fields_ = [("w", ctypes.c_wchar_p)]       # after _Holder's fields


def _nested_holder():
    outer = _Outer()
    outer.h[1].x = ctypes.pointer(ctypes.c_float(1))
    return outer


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
@pytest.mark.parametrize("make, where, target", [
    (lambda: _Holder(1, ctypes.cast(_HOST_FLOATS, ctypes.POINTER(ctypes.c_float))), "field x",
     "the ctypes c_float_Array_4 it was made from"),
    (lambda: _Holder(s=b"hi"), "field s", "a Python string's characters"),
    (lambda: _Holder(many=(None, ctypes.cast(_HOST_FLOATS, ctypes.c_void_p))),
     "field many[1]", "the ctypes c_float_Array_4 it was made from"),
    (_nested_holder, "field h[1].x", "the ctypes c_float it was made from"),
    (lambda: _Derived(w="hi"), "field w", "a Python string's characters"),
    (lambda: _Derived(s=b"hi"), "field s", "a Python string's characters"),
    (lambda: (ctypes.c_void_p * 2)(None, ctypes.cast(_HOST_FLOATS, ctypes.c_void_p)),
     "element [1]", "the ctypes c_float_Array_4 it was made from"),
], ids=["cast() in a field", "bytes in a c_char_p field", "in an array field",
        "in a nested struct", "a subclass's field", "its base's field", "in an array"])
def test_ctypes_pointers_inside_structs_and_arrays_are_refused(make, where, target, fallbacks):
    # A ctypes struct, union or array passed by value carries its pointers to the kernel:
    # one into host memory ctypes or Python allocated is refused as a pointer argument is.
    value = make()
    message = rf"{re.escape(where)} is a ctypes pointer to {re.escape(target)}, host memory"
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        with pytest.raises(TypeError, match=rf"^argument 1 \(.*\): {message}"):
            kernarg.pack((1, value))
        with pytest.raises(TypeError, match=rf"^parameter 1: {message}"):
            kernarg.Signature([ctypes.c_int, type(value)]).pack((1, value))
    # A dict for a typed parameter: its pointer fields are checked as pointer parameters are,
    # and a struct ctypes builds from it (bitfields) after ctypes has built it.
    with pytest.raises(TypeError, match=r"^parameter 0, field x \(LP_c_float\): the ctypes "
                                        r"pointer points at the ctypes c_float it was made"):
        kernarg.Signature([_Holder]).pack(({"x": ctypes.pointer(ctypes.c_float(2))},))
    with pytest.raises(TypeError, match=r"^parameter 0: field p is a ctypes pointer to the "
                                        r"ctypes c_float it was made from"):
        kernarg.Signature([_BitsAndPointer]).pack(({"p": ctypes.pointer(ctypes.c_float(2))},))


@pytest.mark.parametrize("fallbacks", [False, True], ids=["b_ptr", "buffer protocol"])
def test_ctypes_structs_with_pointers_the_caller_vouches_for_are_taken(fallbacks):
    view = (ctypes.c_float * 4).from_address(ctypes.addressof(_HOST_FLOATS))
    values = [
        _Holder(1, ctypes.cast(_SOME_ADDRESS, ctypes.POINTER(ctypes.c_float)), _SOME_ADDRESS,
                (_SOME_ADDRESS, None)),
        _Holder(x=ctypes.cast(view, ctypes.POINTER(ctypes.c_float))),    # not ctypes memory
        _Holder(many=(ctypes.cast(_HOST_FLOATS, ctypes.c_void_p).value, None)),    # an int
        _Derived(w=None),
        (ctypes.c_void_p * 2)(_SOME_ADDRESS, None),
    ]
    with _layout_fallbacks() if fallbacks else contextlib.nullcontext():
        for value in values:
            assert bytes(kernarg.pack((value,))) == bytes(value), value
            assert bytes(kernarg.Signature([type(value)]).pack((value,))) == bytes(value)


# ------------------------------------------------------------------------------------------
# The buffer-protocol fallbacks. kernarg reads numpy scalars in place and ctypes values through
# their data pointer, after probing at import that this interpreter lays them out as expected.
# Where a probe fails they are read through the buffer protocol instead. These tests make the
# probes fail and check that the fallbacks give the same bytes.


@contextlib.contextmanager
def _layout_fallbacks():
    from kernarg import _handler, _interop

    _interop._use_layout_fallbacks(True)
    _handler._forget_types()
    try:
        yield
    finally:
        _interop._use_layout_fallbacks(False)
        _handler._forget_types()


def test_fallbacks_are_taken_only_when_the_probes_fail():
    from kernarg._handler import _classification

    assert _classification(np.float32(1)) == "inline"
    assert _classification(ctypes.c_int(1)) == "ctypes"
    with _layout_fallbacks():
        for v in NUMPY_SCALARS + [ml_dtypes.bfloat16(1.5)]:
            assert _classification(v) == "buffer_protocol", type(v)
        for v in CTYPES_VALUES:
            assert _classification(v) == "ctypes_buffer", type(v)
    assert _classification(np.float32(1)) == "inline"
    assert _classification(ctypes.c_int(1)) == "ctypes"


def test_fallbacks_pack_every_scalar_the_same():
    values = NUMPY_SCALARS + CTYPES_VALUES + [ml_dtypes.bfloat16(-2.5)]
    fast = [bytes(kernarg.pack((np.int8(1), v))) for v in values]
    sig = kernarg.Signature("signed char a, float b, long long c, double d, __half e, int f")
    typed_args = (np.int8(-4), np.float32(0.5), np.uint32(7), np.float16(3.0), np.float64(0.25),
                  np.int64(-9))
    typed = bytes(sig.pack(typed_args))
    with _layout_fallbacks():
        for v, expected in zip(values, fast, strict=True):
            b = kernarg.pack((np.int8(1), v))
            assert bytes(b) == expected, type(v)
            check_block(b, (np.int8(1), v))
        assert bytes(sig.pack(typed_args)) == typed
        with pytest.raises(TypeError, match="argument 0 .*zero-size"):
            kernarg.pack((np.zeros(1, dtype=np.dtype([]))[0],))


@settings(max_examples=150, deadline=None)
@given(st.lists(ANY_VALUE, max_size=24))
def test_fallbacks_match_reference_packer(args):
    with _layout_fallbacks():
        check_block(kernarg.pack(tuple(args)), tuple(args))


def c_type_of(value):
    """The parameter types of the reentrancy test, as a Signature takes them."""
    if isinstance(value, int):
        return "float*"
    if isinstance(value, np.generic):
        return value.dtype
    return type(value)


def test_packing_inside_a_protocol_property_leaves_the_outer_pack_intact():
    # A CUDA Array Interface property runs Python code in the middle of a pack. Here it packs
    # 300 types of its own, which evicts entries of the per-type cache the outer pack is using
    # (and pops and refills the block pools); the outer block must come out as if the property
    # had done nothing.
    kinds = [type(f"R{i}", (ctypes.Structure,), {"_fields_": [("a", ctypes.c_int16 * (1 + i % 5))]})
             for i in range(300)]

    class Busy:
        @property
        def __cuda_array_interface__(self):
            for _ in range(2):
                inner = kernarg.pack(tuple(k() for k in kinds) + tuple(range(40)))
                assert inner.nargs == 340
            return {"data": (0xBEEF00, False), "shape": (1,), "typestr": "<f4", "version": 3}

    head = (Pair(b"a", 2.5), np.float32(1.5), ctypes.c_int16(-3), Mixed(i=7), np.complex64(1j))
    for position in range(len(head) + 1):
        args = head[:position] + (Busy(),) + head[position:] + head
        plain = head[:position] + (0xBEEF00,) + head[position:] + head
        assert bytes(kernarg.pack(args)) == bytes(kernarg.pack(plain))
        sig = kernarg.Signature([c_type_of(a) for a in plain])
        assert bytes(sig.pack(args)) == bytes(sig.pack(plain))


PACKERS_BY_CALL = [
    ("pack", lambda: kernarg.pack),
    ("Signature.pack", lambda: kernarg.Signature("long long a, double b").pack),
]


@pytest.mark.parametrize("func, get", PACKERS_BY_CALL, ids=[p[0] for p in PACKERS_BY_CALL])
def test_pack_takes_its_arguments_as_a_def_would(func, get):
    """kernarg.pack and Signature.pack are fastcall C functions, not defs: they take args by
    position or keyword, stream and device by keyword only, and refuse what a def would,
    with the same messages, leaking nothing."""
    import inspect
    import sys

    packer = get()
    assert str(inspect.signature(packer)) == "(args, *, stream=None, device=None)"
    expected = bytes(packer((7, 2.5)))
    assert expected == struct.pack("<qd", 7, 2.5)
    values = (7, 2.5)
    stream, device = 0x1234, 0
    before = [sys.getrefcount(v) for v in (values, stream)]
    for _ in range(1000):
        for block in (packer(values, stream=None), packer(args=values),
                      packer(values, device=device, stream=stream),
                      packer(device=None, args=list(values), stream=stream)):
            assert bytes(block) == expected
    del block
    assert [sys.getrefcount(v) for v in (values, stream)] == before
    for call, message in [
            (lambda: packer(), rf"{func}\(\) missing required argument 'args' \(pos 1\)"),
            (lambda: packer(stream=None), rf"{func}\(\) missing required argument 'args'"),
            (lambda: packer(values, None),
             rf"{func}\(\) takes 1 positional argument but 2 were given"),
            (lambda: packer(values, strem=1),
             rf"{func}\(\) got an unexpected keyword argument 'strem'"),
            (lambda: packer(values, args=values),
             rf"{func}\(\) got multiple values for argument 'args'"),
            (lambda: packer(values, **{"stream": None, "device": 0, "x": 1}),
             "unexpected keyword argument 'x'")]:
        with pytest.raises(TypeError, match=message):
            call()
    # Each keyword reaches its parameter: the stream is resolved (once), the device checked.
    class Stream:
        calls = 0

        def __cuda_stream__(self):
            Stream.calls += 1
            return (0, 5)

    assert bytes(packer(values, device=0, stream=Stream())) == expected
    assert Stream.calls == 1
    with pytest.raises(TypeError, match="device must be a CUDA device ordinal"):
        packer(values, stream=None, device="gpu")
    with pytest.raises(TypeError, match="stream"):
        packer(values, device=None, stream="s")
    # A keyword name equal to, but not the same object as, the parameter's is taken.
    name = "".join(["str", "eam"])
    assert bytes(packer(values, **{name: Stream()})) == expected
    assert Stream.calls == 2
