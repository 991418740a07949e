"""Values an error message cannot print, given where kernarg refuses them.

Python refuses ``str()`` of an int of over 4,300 decimal digits (``sys.set_int_max_str_digits``)
with a ValueError. An error message that formats such an int raised that ValueError instead of
the error it was building, which then named neither the argument nor the limit. Every refusal
below must be the usual one, naming what was given by its size. Likewise a value whose
``repr`` raises: the refusal names it by its type."""
import ctypes
import sys

import numpy as np
import pytest

import kernarg

BIG = 10**5000                      # 16,610 bits, 5,001 digits: past the 4,300-digit limit
BITS = f"{BIG.bit_length():,} bits"


class _Registered:
    pass


kernarg.register(_Registered, lambda obj: BIG)


class _CAI:
    def __init__(self, **fields):
        self.__cuda_array_interface__ = {"shape": (1,), "typestr": "<f4", "data": (16, False),
                                         "version": 3, **fields}


class _DLPackDevice:
    def __init__(self, device):
        self.device = device

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, **kwargs):     # never reached: the device is refused first
        raise AssertionError("__dlpack__ called")


class _StreamProtocol:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        return self.answer


def _typed(params, *args):
    return lambda: kernarg.Signature(params).pack(args)


CASES = [
    # (what, call, exception, text the message holds)
    ("untyped int", lambda: kernarg.pack((BIG,)), OverflowError,
     "argument 0 (int): an int of " + BITS + " does not fit in 64 bits"),
    ("untyped negative int", lambda: kernarg.pack((-BIG,)), OverflowError,
     "argument 0 (int): a negative int of " + BITS),
    ("int", _typed("int n", BIG), OverflowError,
     "parameter 0 ('n') is int: an int of " + BITS + " is outside"),
    ("unsigned long long", _typed("unsigned long long n", -BIG), OverflowError,
     "parameter 0 ('n') is unsigned long long: a negative int of " + BITS),
    ("bool", _typed("bool b", BIG), OverflowError, "is bool: an int of " + BITS),
    ("__int128", _typed("__int128 n", BIG), OverflowError,
     "is __int128: an int of " + BITS + " is outside"),
    ("double", _typed("double d", BIG), OverflowError,
     "parameter 0 ('d') is double: an int of " + BITS + " is too large for a double"),
    ("__half", _typed("__half h", -BIG), OverflowError, "a negative int of " + BITS),
    ("pointer", _typed("float* p", BIG), OverflowError,
     "parameter 0 ('p') is a pointer: an int of " + BITS + " is outside 0 .. 2**64-1"),
    ("registered address", lambda: kernarg.pack((_Registered(),)), OverflowError,
     "the registered function gave address an int of " + BITS),
    ("CUDA Array Interface data", lambda: kernarg.pack((_CAI(data=(BIG, False)),)),
     OverflowError, "['data'][0] gave address an int of " + BITS),
    ("CUDA Array Interface stream", lambda: kernarg.pack((_CAI(stream=BIG),)), ValueError,
     "['stream'] is an int of " + BITS + ", not a valid stream handle"),
    ("CUDA Array Interface version", lambda: kernarg.pack((_CAI(version=BIG),)), ValueError,
     "version an int of " + BITS + " is not supported"),
    ("CUDA Array Interface shape", lambda: kernarg.pack((_CAI(shape=(2, -BIG)),)), ValueError,
     "['shape'] (2, a negative int of " + BITS + ") has a negative extent"),
    ("CUDA Array Interface shape at null", lambda: kernarg.pack((_CAI(shape=(BIG,), data=(0, 0)),)),
     ValueError, "null data pointer for a non-empty array of shape (an int of " + BITS + ",)"),
    ("CUDA Array Interface typestr", lambda: kernarg.pack((_CAI(typestr=BIG),)), TypeError,
     "['typestr'] must be a str, got an int of " + BITS),
    ("__dlpack_device__", lambda: kernarg.pack((_DLPackDevice((2, BIG)),)), TypeError,
     "__dlpack_device__() returned (2, an int of " + BITS + ")"),
    ("pack device", lambda: kernarg.pack((1,), device=BIG), TypeError,
     "got an int of " + BITS),
    ("stream", lambda: kernarg.resolve_stream(BIG), ValueError,
     "stream handle from int is an int of " + BITS + ", outside 0 .. 2**64-1"),
    ("__cuda_stream__ handle", lambda: kernarg.resolve_stream(_StreamProtocol((0, BIG))),
     ValueError, "from __cuda_stream__() is an int of " + BITS),
    ("__cuda_stream__ version", lambda: kernarg.resolve_stream(_StreamProtocol((BIG, 1))),
     ValueError, "__cuda_stream__() version an int of " + BITS + " is not supported"),
    ("Signature parameter type", lambda: kernarg.Signature([BIG]), TypeError,
     "cannot use an int of " + BITS + " as a parameter type"),
    ("grid", lambda: kernarg.LaunchConfig(grid=BIG, block=1), ValueError,
     "grid[0] is an int of " + BITS + "; it must be between 1 and"),
    ("block in a tuple", lambda: kernarg.LaunchConfig(grid=1, block=(1, -BIG)), ValueError,
     "block[1] is a negative int of " + BITS),
    ("a 4-tuple grid", lambda: kernarg.LaunchConfig(grid=(1, 1, 1, BIG), block=1), TypeError,
     "got (1, 1, 1, an int of " + BITS + ")"),
    ("shmem", lambda: kernarg.LaunchConfig(grid=1, block=1, shmem=BIG), ValueError,
     "shmem must be an int between 0 and 2**32-1 bytes, got an int of " + BITS),
    ("priority", lambda: kernarg.LaunchConfig(grid=1, block=1, priority=BIG), ValueError,
     "got an int of " + BITS),
    ("kernel handle", lambda: kernarg.Kernel.from_handle(BIG), ValueError,
     "Kernel.from_handle: an int of " + BITS + " is not a kernel handle"),
]


@pytest.mark.parametrize("call, exc_type, text", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_an_int_past_str_limit_is_refused_by_its_size(call, exc_type, text):
    with pytest.raises(exc_type) as info:
        call()
    message = str(info.value)
    assert text in message
    assert "int_max_str_digits" not in message and len(message) < 400


def test_the_limit_is_what_made_these_fail():
    # What the cases above rely on: without kernarg's care, formatting BIG raises.
    if sys.get_int_max_str_digits() == 0:
        pytest.skip("this interpreter has no limit on int-to-str conversion")
    with pytest.raises(ValueError, match="int_max_str_digits"):
        f"{BIG}"


def test_ints_below_256_bits_are_shown_in_full():
    with pytest.raises(OverflowError, match=f"{2**255} is outside"):
        kernarg.Signature("int n").pack((2**255,))
    with pytest.raises(OverflowError, match=f"{-2**100} does not fit in 64 bits"):
        kernarg.pack((-2**100,))
    with pytest.raises(OverflowError, match="an int of 257 bits"):
        kernarg.pack((2**256,))


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("repr of a hostile value")

    __str__ = __repr__

    def __hash__(self):
        return 1


class _CStruct(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int)]


UNPRINTABLE = [
    ("numpy struct's field name", lambda: kernarg.Signature(
        [np.dtype([("a", np.int32)], align=True)]).pack(({_BadRepr(): 1},)), TypeError,
     "parameter 0: a struct ({'names': ['a']"),
    ("ctypes struct's field name", lambda: kernarg.Signature([_CStruct]).pack(({_BadRepr(): 1},)),
     TypeError, "parameter 0: a struct (_CStruct) has no field a _BadRepr whose repr raised"),
    ("char field", lambda: kernarg.Signature([np.dtype([("s", "S2")])]).pack(((_BadRepr(),),)),
     TypeError, "field s is 2 bytes (char): expected bytes of at most that length, got _BadRepr"),
    ("Signature parameter type", lambda: kernarg.Signature([_BadRepr()]), TypeError,
     "cannot use a _BadRepr whose repr raised as a parameter type"),
    ("grid", lambda: kernarg.LaunchConfig(grid=(1, 1, 1, _BadRepr()), block=1), TypeError,
     "got (1, 1, 1, a _BadRepr whose repr raised)"),
    ("__cuda_stream__", lambda: kernarg.resolve_stream(_StreamProtocol(_BadRepr())), ValueError,
     "__cuda_stream__() returned a _BadRepr whose repr raised, expected (0, handle)"),
    ("CUDA Array Interface shape", lambda: kernarg.pack((_CAI(shape=(_BadRepr(),)),)),
     TypeError, "['shape'] must be a tuple of ints, got (a _BadRepr whose repr raised,)"),
]


@pytest.mark.parametrize("call, exc_type, text", [c[1:] for c in UNPRINTABLE],
                         ids=[c[0] for c in UNPRINTABLE])
def test_a_value_whose_repr_raises_is_refused_by_its_type(call, exc_type, text):
    with pytest.raises(exc_type) as info:
        call()
    assert text in str(info.value)


def test_a_long_bytes_value_is_shown_by_its_length():
    with pytest.raises(TypeError, match=r"at most that length, got 100000 bytes$"):
        kernarg.Signature([np.dtype([("s", "S2")])]).pack(((b"x" * 100000,),))


class _UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("str of a hostile exception")


class _IndexRaises:
    def __index__(self):
        raise _UnprintableError()


class _InterfaceRaises:
    @property
    def __cuda_array_interface__(self):
        raise _UnprintableError()


class _AddressRaises:
    pass


kernarg.register(_AddressRaises, lambda obj: (_ for _ in ()).throw(_UnprintableError()))


@pytest.mark.parametrize("call, named", [
    (lambda: kernarg.Signature("int n").pack((_IndexRaises(),)), "parameter 0 ('n'): "),
    (lambda: kernarg.Signature("int2 v").pack(((1, _IndexRaises()),)), "parameter 0 ('v'): "),
    (lambda: kernarg.pack((_InterfaceRaises(),)),
     "argument 0 (test_unprintable_values._InterfaceRaises): reading __cuda_array_interface__ "),
    (lambda: kernarg.Signature("float* p").pack((_InterfaceRaises(),)),
     "parameter 0 ('p'): argument 0 ("),
    (lambda: kernarg.pack((_AddressRaises(),)), "argument 0 (test_unprintable_values._Address"),
], ids=["typed int", "vector lane", "CUDA Array Interface", "typed pointer", "registered type"])
def test_an_exception_whose_str_raises_is_named_all_the_same(call, named):
    # The library's exception cannot be raised again with the message (its __str__ would hide
    # it): a TypeError says which argument and which exception class, chaining the original.
    with pytest.raises(TypeError) as info:
        call()
    message = str(info.value)
    assert message.startswith(named) and "_UnprintableError: (its str() raised)" in message
    assert type(info.value.__cause__) is _UnprintableError
