"""The embedding APIs, used the way a downstream project would: the examples are built from
source in a temporary directory, imported, and must agree with kernarg.pack byte for byte."""
import ctypes
import gc
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kernarg
from kernarg._examples import build_example

from producers import CAIObject, DLPackProducer, cai
from test_handler import ANY_VALUE


@pytest.fixture(scope="module")
def c_ext(tmp_path_factory):
    return build_example("c_extension", "kernarg_example", str(tmp_path_factory.mktemp("c")))


@pytest.fixture(scope="module")
def cy_ext(tmp_path_factory):
    return build_example("cython_launcher", "launcher", str(tmp_path_factory.mktemp("cy")))


@pytest.fixture(params=["c", "cython"])
def ext(request, c_ext, cy_ext):
    return c_ext if request.param == "c" else cy_ext


MIXED = (1, 2.5, True, None, 1 + 2j, np.float32(3), np.int8(-4), np.float16(0.5),
         ctypes.c_short(7), 2**64 - 1, (ctypes.c_double * 3)(1, 2, 3))


def test_api_capsule_and_header():
    import os

    assert kernarg._C_API.__class__.__name__ == "PyCapsule"
    assert os.path.isfile(os.path.join(kernarg.get_include(), "kernarg.h"))


def test_c_api_info(c_ext):
    abi, size, version = c_ext.api_info()
    assert abi == 1 and size >= 48 and version == kernarg.__version__


def test_same_bytes_offsets_and_streams(ext):
    data, offsets = ext.pack(MIXED)[:2]
    block = kernarg.pack(MIXED)
    assert data == bytes(block) and offsets == block.offsets
    args = (CAIObject(cai(0x1000, stream=7)), CAIObject(cai(0x2000, stream=9)), 3)
    assert ext.pack(args)[0] == bytes(kernarg.pack(args))
    if ext.__name__ == "kernarg_example":
        assert ext.pack(args)[2] == (7, 9)


@settings(max_examples=150, deadline=None)
@given(st.lists(ANY_VALUE, max_size=30))
def test_matches_kernarg_pack(c_ext, cy_ext, values):
    args = tuple(values)
    expected = bytes(kernarg.pack(args))
    assert c_ext.pack(args)[0] == expected
    assert cy_ext.pack(args)[0] == expected


def test_signature_packing(ext):
    sig = kernarg.Signature("float* out, const float* x, float a, int n, __half h")
    args = (0x1000, CAIObject(cai(0x2000)), 0.5, 7, 1.5)
    assert ext.pack_signature(sig, args)[0] == bytes(sig.pack(args))
    with pytest.raises(TypeError, match="kernarg.Signature"):
        ext.pack_signature("float* out", args)
    with pytest.raises(OverflowError, match="'n'"):
        ext.pack_signature(sig, (0, 0, 0.5, 2**40, 1.0))
    # Default arguments fill in what a call leaves out, as in kernarg's own packing.
    defaults = kernarg.Signature("float* out, int n = 4, float a = 0.5f")
    assert ext.pack_signature(defaults, (0x1000,))[0] == bytes(defaults.pack((0x1000, 4, 0.5)))
    with pytest.raises(TypeError, match="takes 3 arguments"):
        ext.pack_signature(defaults, ())


def test_dlpack_stream_and_deleter_once(ext):
    prod = DLPackProducer(0x3000)
    ext.pack((prod,), 0x77)
    assert prod.streams == [0x77] and prod.exported == 1 and prod.deleted == 1
    # The NULL stream goes to the producer as the default stream it is (DLPack forbids 0),
    # and no stream as the default stream.
    ext.pack((prod,), 0)
    ext.pack((prod,), None)
    assert prod.streams == [0x77] + [kernarg.default_stream()] * 2
    assert prod.exported == prod.deleted == 3


def test_held_block_keeps_references_until_release(c_ext):
    prod = DLPackProducer(0x4000)
    obj = CAIObject(cai(0x5000))
    args = (obj, prod, 1)
    before = sys.getrefcount(args)
    c_ext.hold(args)
    assert sys.getrefcount(args) == before + 1      # the block's one reference
    assert prod.deleted == 0                        # the tensor stays alive while held
    c_ext.release_held()
    assert sys.getrefcount(args) == before and prod.deleted == 1
    c_ext.release_held()                            # idempotent: no second deleter call
    assert prod.deleted == 1


def test_errors_leave_nothing_behind(ext):
    prod = DLPackProducer(0x6000)
    args = (prod, object())
    before = sys.getrefcount(args)
    with pytest.raises(TypeError, match="argument 1"):
        ext.pack(args)
    gc.collect()
    assert prod.deleted == prod.exported == 1 and sys.getrefcount(args) == before
    with pytest.raises(ValueError, match="argv holds 256"):
        ext.pack_only(tuple(range(300)))
    with pytest.raises(ValueError, match="caller's block holds"):
        ext.pack_only(tuple(range(200)))            # 1600 bytes > the 512-byte area


def test_refcounts_flat_over_many_packs(ext):
    args = MIXED + (CAIObject(cai(0x10)),)
    own = [a for a in args if type(a) not in (bool, int, type(None))]
    before = [sys.getrefcount(a) for a in own]
    for _ in range(20000):
        ext.pack_only(args)
    assert [sys.getrefcount(a) for a in own] == before


def test_resolve_stream_through_c_api(c_ext):
    class S:
        def __cuda_stream__(self):
            return (0, 0x99)

    assert c_ext.resolve_stream(S()) == 0x99
    assert c_ext.resolve_stream(None) == kernarg.default_stream()
    with pytest.raises(TypeError):
        c_ext.resolve_stream("x")


def test_device_check(ext):
    p = DLPackProducer(0x3000, device=(2, 1))
    with pytest.raises(ValueError, match=r"argument 1 \(producers.DLPackProducer\): its memory is "
                                         r"on CUDA device 1, but the kernel runs on device 0"):
        ext.pack((7, p), None, 0)
    assert ext.pack((7, p), None, 1)[0] == bytes(kernarg.pack((7, p)))
    assert ext.pack((7, p))[0] == bytes(kernarg.pack((7, p)))        # -1: no check
    sig = kernarg.Signature("int n, float* x")
    with pytest.raises(ValueError, match=r"argument 1 \(producers.DLPackProducer\): its memory is "
                                         r"on CUDA device 1"):
        ext.pack_signature(sig, (7, p), None, 2)
    assert ext.pack_signature(sig, (7, p), None, 1)[0] == bytes(sig.pack((7, p)))
    with pytest.raises(ValueError, match="device is -5"):
        ext.pack((7,), None, -5)
    gc.collect()
    assert p.deleted == p.exported     # refused packs released what they had consumed


def test_c_api_reports_the_device_entry_points(c_ext):
    abi, size, _ = c_ext.api_info()
    assert size >= 64     # seven pointers past the two uint32 fields: pack_device is there
