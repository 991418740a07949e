"""TMA tensor maps (CUtensorMap) as kernel arguments, by value: untyped packing, Signatures and
from_source, checked against what NVRTC makes of cuda.h's own declaration of the type.

cuda.bindings' ``driver.CUtensorMap`` is a plain object (its ``opaque`` words can be set here);
cuda.core's ``TensorMapDescriptor`` is made with ``__new__`` (its ``__init__`` refuses, and its
factories need a GPU) and written through the method table its .pxd declares, with ctypes: an
independent route to the same 128 bytes kernarg reads.
"""
import ctypes
import re
import struct
import sys
import types

import numpy as np
import pytest

import kernarg
from kernarg._interop import TENSOR_MAP_ALIGN, TENSOR_MAP_SIZE
from kernarg._nvrtc import cuda_include_dir
from tests.nvrtc_oracle import compile_ptx, layout, parse_params

driver = pytest.importorskip("cuda.bindings.driver")

WORDS = tuple(0x0101010101010101 * (i + 1) for i in range(16))


def _bindings_map(words=WORDS):
    m = driver.CUtensorMap()
    m.opaque = list(words)
    return m


def _cuda_h_tensor_map():
    """cuda.h's own CUtensorMap declaration (the header kernarg's NVRTC uses), for NVRTC.
    cuda.h itself does not compile under NVRTC (it includes <stdlib.h>)."""
    directory = cuda_include_dir()
    if directory is None:
        pytest.skip("no cuda.h found (pip install nvidia-cuda-runtime)")
    with open(f"{directory}/cuda.h") as f:
        text = f.read()
    decl = re.search(r"typedef struct CUtensorMap_st \{.*?\} CUtensorMap;", text, re.S)
    assert decl is not None, "cuda.h declares no CUtensorMap"
    return ("typedef unsigned long long cuuint64_t;\n#define CU_TENSOR_MAP_NUM_QWORDS 16\n"
            + decl.group(0))


def _oracle(params):
    # __grid_constant__ (what a kernel that takes a tensor map writes) changes no layout, and
    # NVRTC 12's default architecture (compute_52) refuses it: compiled without it.
    params = params.replace("__grid_constant__ ", "")
    src = _cuda_h_tensor_map() + f'\nextern "C" __global__ void k({params}) {{}}'
    return layout(parse_params(compile_ptx(src), "k"))


def test_cuda_h_declares_the_layout_kernarg_uses():
    # The alignment changed with CUDA 13 (64 -> 128); kernarg follows the cuda.h it is built
    # against, which is the one that comes with cuda-bindings (and NVRTC) of the same major.
    offsets, sizes, nbytes = _oracle("char c, const __grid_constant__ CUtensorMap m")
    assert sizes == (1, TENSOR_MAP_SIZE)
    assert offsets == (0, TENSOR_MAP_ALIGN)


def test_cuda_bindings_tensor_map_packs_its_bytes_by_value():
    m = _bindings_map()
    block = kernarg.pack((ctypes.c_char(b"x"), m, 2.5, m))
    offsets, sizes, nbytes = _oracle("char c, const __grid_constant__ CUtensorMap m, double d, "
                                     "CUtensorMap m2")
    assert block.offsets == offsets
    assert block.sizes == sizes
    assert block.nbytes == nbytes
    raw = bytes(block)
    assert struct.unpack_from("<16Q", raw, offsets[1]) == WORDS
    assert struct.unpack_from("<16Q", raw, offsets[3]) == WORDS
    assert raw[1:offsets[1]] == bytes(offsets[1] - 1)          # padding zeroed
    assert kernarg._handler._classification(m) == "tensor_map"


def test_signature_text_and_types_give_cuda_h_layout():
    text = kernarg.Signature("char c, const __grid_constant__ CUtensorMap m, int n")
    offsets, sizes, nbytes = _oracle("char c, const __grid_constant__ CUtensorMap m, int n")
    assert (text.offsets, text.sizes, text.nbytes) == (offsets, sizes, nbytes)
    by_type = kernarg.Signature(["char", driver.CUtensorMap, "int"])
    assert (by_type.offsets, by_type.sizes) == (offsets, sizes)
    assert kernarg.Signature(["struct CUtensorMap_st"]).sizes == (128,)
    raw = bytes(text.pack((1, _bindings_map(), 3)))
    assert struct.unpack_from("<16Q", raw, offsets[1]) == WORDS
    # 128 bytes are taken as they are; anything else is refused, naming the parameter.
    raw = bytes(text.pack((1, bytes(range(128)), 3)))
    assert raw[offsets[1]:offsets[1] + 128] == bytes(range(128))
    with pytest.raises(TypeError, match=r"parameter 1 \('m'\) takes 128 bytes \(CUtensorMap\); "
                                        r"bytes gives 127"):
        text.pack((1, bytes(127), 3))
    with pytest.raises(TypeError, match=r"parameter 1 \('m'\) is 128 opaque bytes "
                                        r"\(CUtensorMap, .*not float"):
        text.pack((1, 2.0, 3))


def test_a_pointer_to_a_tensor_map_is_a_pointer():
    sig = kernarg.Signature("const CUtensorMap* maps, int n")
    assert sig.sizes == (8, 4)
    with pytest.raises(TypeError, match=r"parameter 0 \('maps'\) is a pointer"):
        sig.pack((_bindings_map(), 1))


@pytest.mark.parametrize("align", [64, 128])
def test_from_source_takes_the_sources_own_declaration(align):
    # NVRTC cannot include cuda.h, so kernels declare CUtensorMap themselves: aligned to 64 as
    # CUDA 12's header did, or 128 as CUDA 13's does. The compiled layout is the one to use.
    src = (f"struct alignas({align}) CUtensorMap {{ unsigned long long opaque[16]; }};\n"
           'extern "C" __global__ void k(int n, const CUtensorMap m, float* out) {}')
    sig = kernarg.Signature.from_source(src, "k")
    assert sig.offsets == (0, align, align + 128)
    assert sig.names == ("n", "m", "out")
    raw = bytes(sig.pack((1, _bindings_map(), None)))
    assert struct.unpack_from("<16Q", raw, align) == WORDS


def test_a_tensor_map_fits_an_opaque_ptx_parameter_of_its_size():
    ptx = _cuda_h_tensor_map()
    ptx = compile_ptx(ptx + '\nextern "C" __global__ void k(const CUtensorMap m, char c) {}')
    sig = kernarg.Signature.from_ptx(ptx, "k")
    raw = bytes(sig.pack((_bindings_map(), 1)))
    assert struct.unpack_from("<16Q", raw, 0) == WORDS
    narrow = kernarg.Signature.from_ptx(compile_ptx(
        'struct S { unsigned long long w[15]; };\nextern "C" __global__ void k(S s) {}'), "k")
    with pytest.raises(TypeError, match=r"parameter 0 .* takes 120 bytes .*CUtensorMap gives "
                                        r"128"):
        narrow.pack((_bindings_map(),))


# --- cuda.core's TensorMapDescriptor -----------------------------------------------------------

def _core_descriptor():
    core = pytest.importorskip("cuda.core")
    cls = getattr(core, "TensorMapDescriptor", None)
    if cls is None:
        pytest.skip("this cuda.core has no TensorMapDescriptor")
    return cls.__new__(cls)


def _core_map_address(desc):
    """The address of desc's CUtensorMap, found as a cimporting module would: slot 1 of the
    method table (the .pxd declares _check_context_compat, then _get_data_ptr)."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    table = get(type(desc).__dict__["__pyx_vtable__"], None)
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(
        ctypes.c_void_p.from_address(table + ctypes.sizeof(ctypes.c_void_p)).value)
    return fn(desc)


def test_cuda_core_descriptor_packs_its_bytes_and_checks_its_device():
    desc = _core_descriptor()
    address = _core_map_address(desc)
    assert id(desc) < address < id(desc) + type(desc).__basicsize__
    ctypes.memmove(address, bytes(range(128)), 128)
    ctypes.c_int.from_address(address + 128).value = 1           # _device_id
    block = kernarg.pack((7, desc))
    assert block.offsets == (0, TENSOR_MAP_ALIGN)
    assert bytes(block)[TENSOR_MAP_ALIGN:] == bytes(range(128))
    assert bytes(kernarg.pack((desc,), device=1)) == bytes(range(128))
    # A subclass is read as its cuda.core base.
    sub = type("MyMap", (type(desc),), {})
    assert bytes(kernarg.pack((sub.__new__(sub),))) == bytes(128)
    with pytest.raises(ValueError, match=r"argument 1 \(cuda\.core\.[\w.]*TensorMapDescriptor\): "
                                         r"the tensor map was made on CUDA device 1, but the "
                                         r"kernel runs on device 0"):
        kernarg.pack((7, desc), device=0)
    sig = kernarg.Signature("int n, CUtensorMap m")
    with pytest.raises(ValueError, match=r"argument 1 .*made on CUDA device 1"):
        sig.pack((7, desc), device=0)
    assert bytes(sig.pack((7, desc)))[TENSOR_MAP_ALIGN:] == bytes(range(128))


def _standin(module_name, class_name, **members):
    cls = type(class_name, (), dict(members))
    cls.__module__ = module_name
    return cls


@pytest.fixture
def fake_core_module(tmp_path, monkeypatch):
    """A module under cuda.core whose file sits beside a .pxd the test writes."""
    name = "cuda.core._kernarg_test_tensor_map"
    module = types.ModuleType(name)
    module.__file__ = str(tmp_path / "_kernarg_test_tensor_map.so")
    monkeypatch.setitem(sys.modules, name, module)
    yield name, tmp_path / "_tensor_map.pxd"
    kernarg._handler._forget_types()


@pytest.mark.parametrize("pxd, why", [
    (None, r"no .*_tensor_map\.pxd"),
    ("cdef class Other:\n    cdef int x\n", r"declares no `cdef class TensorMapDescriptor`"),
    ("cdef class TensorMapDescriptor:\n    cdef int _device_id\n"
     "    cdef cydriver.CUtensorMap _tensor_map\n    cdef void* _get_data_ptr(self)\n",
     r"does not declare `_tensor_map` and `_device_id` first"),
    ("cdef class TensorMapDescriptor:\n    cdef cydriver.CUtensorMap _tensor_map\n"
     "    cdef int _device_id\n    cdef void* _data(self)\n",
     r"declares no `cdef void\* _get_data_ptr\(self\)`"),
    ("cdef class TensorMapDescriptor:\n    cdef cydriver.CUtensorMap _tensor_map\n"
     "    cdef int _device_id\n    cdef void* _get_data_ptr(self)\n",
     r"has no __pyx_vtable__ capsule"),
])
def test_cuda_core_layout_kernarg_cannot_confirm_is_refused(fake_core_module, pxd, why):
    module_name, pxd_path = fake_core_module
    if pxd is not None:
        pxd_path.write_text(pxd)
    desc = _standin(module_name, "TensorMapDescriptor")()
    kernarg._handler._forget_types()
    with pytest.raises(TypeError, match=r"argument 0 \(cuda\.core\._kernarg_test_tensor_map\."
                                        r"TensorMapDescriptor\): cannot read this cuda.core's "
                                        r"TensorMapDescriptor \(.*" + why):
        kernarg.pack((desc,))


@pytest.mark.parametrize("get_ptr, error, message", [
    (lambda self: 1 / 0, ZeroDivisionError, r"getPtr\(\) of the tensor map raised "
                                            r"ZeroDivisionError"),
    (lambda self: "0x10", TypeError, r"getPtr\(\) of the tensor map raised TypeError"),
    (lambda self: 0, ValueError, r"getPtr\(\) of the tensor map gave 0, not an address"),
    (lambda self: -8, ValueError, r"getPtr\(\) of the tensor map gave -8, not an address"),
    (lambda self: 2**64, ValueError, r"getPtr\(\) of the tensor map gave 18446744073709551616"),
])
def test_bad_get_ptr_names_the_argument(get_ptr, error, message):
    cls = _standin("cuda.bindings.driver", "CUtensorMap", getPtr=get_ptr)
    try:
        with pytest.raises(error, match=r"argument 1 \(cuda.bindings.driver.CUtensorMap\): "
                                        + message):
            kernarg.pack((1, cls()))
    finally:
        kernarg._handler._forget_types()


def test_get_ptr_is_read_where_it_points():
    words = (ctypes.c_uint64 * 16)(*range(100, 116))
    cls = _standin("cuda.bindings.driver", "CUtensorMap",
                   getPtr=lambda self: ctypes.addressof(words))
    try:
        raw = bytes(kernarg.pack((cls(),)))
    finally:
        kernarg._handler._forget_types()
    assert struct.unpack("<16Q", raw) == tuple(range(100, 116))


def test_untyped_layout_check_allows_offsets_a_tensor_map_moved():
    # A kernel that aligns its CUtensorMap to 64 (CUDA 12's header) puts it, and what follows,
    # elsewhere than untyped packing does (128 with CUDA 13's). A launch passes each argument by
    # its own pointer, so only the sizes must agree there; before a tensor map, offsets still do.
    from kernarg._launch import check_layout

    m = _bindings_map()
    block = kernarg.pack((np.int32(1), m, None))
    check_layout(block, ((0, 4), (64, 128), (192, 8)), "k")
    check_layout(block, ((0, 4), (128, 128), (256, 8)), "k")
    with pytest.raises(TypeError, match=r"argument 2 \(NoneType\) packs as 8 bytes at offset "
                                        r"\d+, but k's parameter 2 is 4 bytes"):
        check_layout(block, ((0, 4), (64, 128), (192, 4)), "k")
    with pytest.raises(TypeError, match=r"argument 1 \(NoneType\) packs as 8 bytes at offset 8, "
                                        r"but k's parameter 1 is 8 bytes at offset 16"):
        check_layout(kernarg.pack((np.int32(1), None, m)), ((0, 4), (16, 8), (128, 128)), "k")
