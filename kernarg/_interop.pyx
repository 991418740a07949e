# cython: language_level=3, embedsignature=True, binding=True
"""Type classification and pointer extraction for kernel arguments.

Everything here runs once per *type* (``classify``) or once per pointer-like argument
(``pointer_of``); the per-argument hot loop lives in ``kernarg._handler``.

- CUDA Array Interface v0-v3 consumer (numba.readthedocs.io, "CUDA Array Interface").
- DLPack consumer for legacy (``dltensor``) and versioned (``dltensor_versioned``) capsules,
  following the Python specification of ``__dlpack__``/``__dlpack_device__``.
- Per-library adapters (torch, CuPy, numba-cuda, cuda.core, JAX) recognised by module and class
  name, so none of those libraries is ever imported by kernarg.
- The ``kernarg.register`` registry.
"""
from cpython.buffer cimport (
    PyBUF_STRIDES,
    PyBuffer_Release,
    PyObject_CheckBuffer,
    PyObject_GetBuffer,
)
from cpython.number cimport PyNumber_Index
from cpython.object cimport PyObject, PyTypeObject, Py_TYPE
from cpython.pycapsule cimport (
    PyCapsule_CheckExact,
    PyCapsule_GetName,
    PyCapsule_GetPointer,
    PyCapsule_IsValid,
    PyCapsule_SetName,
)
from cpython.ref cimport Py_INCREF, Py_XDECREF, Py_XINCREF
from cpython.tuple cimport PyTuple_GET_ITEM, PyTuple_GET_SIZE
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from libc.stdint cimport (
    int32_t, int64_t, intptr_t, uint8_t, uint16_t, uint32_t, uint64_t, uintptr_t, UINT64_MAX,
)
from libc.string cimport memcpy, memset, strcmp

from kernarg._cdefs cimport (
    PyVarObject, exc_quoted, exc_text, is_numpy_bool, kernarg_ctypes_copy, kernarg_dict_get_ref,
    kernarg_ctypes_root_kept, kernarg_member_offset, kernarg_small_int, mro_find, mro_has,
    shown_value,
)
from kernarg._stream cimport (
    LazySection, dlpack_stream, enter_lazily, guard_module, kernarg_object_lock,
    kernarg_object_unlock, kernarg_section, kernarg_unshared,
)

cdef extern from "Python.h":
    bint PyDict_Next(object d, Py_ssize_t* pos, PyObject** key, PyObject** value) noexcept
    Py_ssize_t PyDict_GET_SIZE(object d) noexcept
    bint PyDict_CheckExact(PyObject* o) noexcept
    bint PyLong_CheckExact(PyObject* o) noexcept
    bint PyTuple_CheckExact(PyObject* o) noexcept
    bint PyUnicode_CheckExact(PyObject* o) noexcept
    PyObject* Py_True
    PyObject* Py_False
    PyObject* Py_None
    PyObject* PyErr_Occurred() noexcept
    void PyErr_Fetch(PyObject** etype, PyObject** value, PyObject** tb) noexcept
    void PyErr_NormalizeException(PyObject** etype, PyObject** value, PyObject** tb) noexcept
    int PyException_SetTraceback(PyObject* exc, PyObject* tb) noexcept
    object PyObject_VectorcallMethod(object name, PyObject** args, size_t nargsf,
                                     PyObject* kwnames)
    object PyObject_CallOneArg(object callable, object arg)
    bint PyType_IsSubtype(PyTypeObject* a, PyTypeObject* b) noexcept

import ctypes
import sys
import time
import weakref

__all__ = ["register", "registered_types", "DLPACK_MAX_VERSION"]

cdef extern from *:
    """
    /* DLPack v1.x ABI, written from the DLPack specification (dlpack.h). */
    #include <stdint.h>
    typedef struct { uint32_t major; uint32_t minor; } kernarg_DLPackVersion;
    typedef struct { int32_t device_type; int32_t device_id; } kernarg_DLDevice;
    typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } kernarg_DLDataType;
    typedef struct {
        void *data;
        kernarg_DLDevice device;
        int32_t ndim;
        kernarg_DLDataType dtype;
        int64_t *shape;
        int64_t *strides;
        uint64_t byte_offset;
    } kernarg_DLTensor;
    typedef struct kernarg_DLManagedTensor {
        kernarg_DLTensor dl_tensor;
        void *manager_ctx;
        void (*deleter)(struct kernarg_DLManagedTensor *self);
    } kernarg_DLManagedTensor;
    typedef struct kernarg_DLManagedTensorVersioned {
        kernarg_DLPackVersion version;
        void *manager_ctx;
        void (*deleter)(struct kernarg_DLManagedTensorVersioned *self);
        uint64_t flags;
        kernarg_DLTensor dl_tensor;
    } kernarg_DLManagedTensorVersioned;
    #define KERNARG_DLPACK_FLAG_READ_ONLY ((uint64_t)1)
    #define KERNARG_DLPACK_FLAG_IS_COPIED ((uint64_t)2)

    /* DLPack 1.3 C exchange API: the table behind type(x).__dlpack_c_exchange_api__. */
    typedef struct kernarg_DLPackExchangeAPIHeader {
        kernarg_DLPackVersion version;
        struct kernarg_DLPackExchangeAPIHeader *prev_api;
    } kernarg_DLPackExchangeAPIHeader;
    typedef struct {
        kernarg_DLPackExchangeAPIHeader header;
        void *managed_tensor_allocator;
        void *managed_tensor_from_py_object_no_sync;
        void *managed_tensor_to_py_object_no_sync;
        int (*dltensor_from_py_object_no_sync)(void *py_object, kernarg_DLTensor *out);
        int (*current_work_stream)(int32_t device_type, int32_t device_id, void **out_stream);
    } kernarg_DLPackExchangeAPI;
    """
    ctypedef struct DLPackVersion "kernarg_DLPackVersion":
        uint32_t major
        uint32_t minor
    ctypedef struct DLDevice "kernarg_DLDevice":
        int32_t device_type
        int32_t device_id
    ctypedef struct DLDataType "kernarg_DLDataType":
        uint8_t code
        uint8_t bits
        uint16_t lanes
    ctypedef struct DLTensor "kernarg_DLTensor":
        void* data
        DLDevice device
        int32_t ndim
        DLDataType dtype
        int64_t* shape
        int64_t* strides
        uint64_t byte_offset
    ctypedef struct DLManagedTensor "kernarg_DLManagedTensor":
        DLTensor dl_tensor
        void* manager_ctx
        void (*deleter)(DLManagedTensor*) noexcept
    ctypedef struct DLManagedTensorVersioned "kernarg_DLManagedTensorVersioned":
        DLPackVersion version
        void* manager_ctx
        void (*deleter)(DLManagedTensorVersioned*) noexcept
        uint64_t flags
        DLTensor dl_tensor
    uint64_t DLPACK_FLAG_READ_ONLY "KERNARG_DLPACK_FLAG_READ_ONLY"
    uint64_t DLPACK_FLAG_IS_COPIED "KERNARG_DLPACK_FLAG_IS_COPIED"
    ctypedef struct DLPackExchangeAPIHeader "kernarg_DLPackExchangeAPIHeader":
        DLPackVersion version
        DLPackExchangeAPIHeader* prev_api
    ctypedef struct DLPackExchangeAPI "kernarg_DLPackExchangeAPI":
        DLPackExchangeAPIHeader header
        int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out) noexcept
        int (*current_work_stream)(int32_t device_type, int32_t device_id,
                                   void** out_stream) noexcept

# The newest DLPack version whose fields this consumer reads; sent as __dlpack__(max_version=...).
DLPACK_MAX_VERSION = (1, 1)

cdef enum:
    DL_CPU = 1
    DL_CUDA = 2
    DL_CUDA_HOST = 3
    DL_CUDA_MANAGED = 13

cdef enum:
    DL_COMPLEX = 5      # kDLComplex, a DLDataTypeCode

_DL_DEVICE_NAMES = {
    1: "kDLCPU", 2: "kDLCUDA", 3: "kDLCUDAHost", 4: "kDLOpenCL", 7: "kDLVulkan", 8: "kDLMetal",
    9: "kDLVPI", 10: "kDLROCM", 11: "kDLROCMHost", 12: "kDLExtDev", 13: "kDLCUDAManaged",
    14: "kDLOneAPI", 15: "kDLWebGPU", 16: "kDLHexagon", 17: "kDLMAIA",
    18: "kDLTrn",       # DLPack 1.2: AWS Trainium
}

_ACCEPTED = (
    "kernarg accepts bool, int, float, complex, None, numpy/ml_dtypes scalars, ctypes "
    "objects, cuda.core Buffer, cuda.bindings CUdeviceptr, PyCUDA device allocations, "
    "CuPy MemoryPointer and PinnedMemoryPointer, numpy arrays over pinned host memory, "
    "texture/surface objects (cuda.bindings, CuPy, cuda.core), TMA tensor maps "
    "(cuda.bindings CUtensorMap, cuda.core TensorMapDescriptor), objects with "
    "__cuda_array_interface__ or __dlpack__ "
    "(CUDA device, pinned or managed memory), and types registered with kernarg.register()"
)
_ON_CPU = ("the memory is on the CPU; a kernel needs CUDA device, pinned (CUDA host) or "
           "managed memory")


cdef str _type_name(type t):
    mod = t.__module__
    if mod == "builtins":
        return t.__qualname__
    return f"{mod}.{t.__qualname__}"


cdef str _typename(object obj):
    return _type_name(type(obj))


cdef str _describe(Py_ssize_t index, object obj):
    return f"argument {index} ({_typename(obj)})"


cdef _reraise(object exc, str message):
    """Raise ``message`` with the exception class of ``exc`` (TypeError if it cannot be built,
    or if its ``__str__`` would not give the message back)."""
    try:
        new = type(exc)(message)
        if type(exc).__str__ is not BaseException.__str__:
            str(new)
    except Exception:
        new = TypeError(message)
    raise new from exc


# ---------------------------------------------------------------------------------------------
# Registry (kernarg.register)

cdef dict _registry = {}


def register(type cls, fn):
    """Teach kernarg a pointer-like type.

    Parameters
    ----------
    cls : type
        Instances of ``cls`` (and of its subclasses) are packed as an 8-byte pointer.
    fn : callable or None
        ``fn(obj) -> int`` returns the device address (0 <= address < 2**64).
        ``None`` removes the registration.

    Notes
    -----
    A registration takes precedence over every built-in rule except the exact-type fast path
    for ``bool``, ``int``, ``float``, ``complex`` and ``None``.
    """
    if cls in (bool, int, float, complex, type(None)):
        raise TypeError(f"kernarg.register: {cls.__name__} is packed by value and cannot be "
                        "registered as a pointer type")
    if fn is None:
        _registry.pop(cls, None)
    elif not callable(fn):
        raise TypeError(f"kernarg.register: fn must be callable, got {type(fn).__name__}")
    else:
        _registry[cls] = fn
    # kernarg._handler clears its per-type cache after calling this function.


def registered_types():
    """Return a tuple of the types registered with :func:`register`."""
    return tuple(_registry)


cdef int _registered_fn(PyTypeObject* t, PyObject** fn) except -1:
    """Put in ``fn`` a reference to the function registered for ``t`` or its nearest base,
    the caller's to drop, and return 1; else return 0. A free-threaded build calls it
    outside kernarg's section, where register() may replace or remove a function at any time
    (in the section): the function is taken under the dict's own lock (PyDict_GetItemRef),
    as Cython's dict.get (a borrowed read) does not. Neither the dict nor ``t`` itself (the
    usual case; its instance being packed keeps it) is given a reference of its own: two
    threads that change one object's count in turn wait on each other."""
    cdef Py_ssize_t i
    if kernarg_dict_get_ref(<PyObject*>_registry, <PyObject*>t, fn):
        return 1
    mro = (<object>t).__mro__          # t, then its bases
    if type(mro) is not tuple:          # a metaclass's own __mro__
        mro = tuple(mro)
    for i in range(1, PyTuple_GET_SIZE(mro)):
        if kernarg_dict_get_ref(<PyObject*>_registry, PyTuple_GET_ITEM(mro, i), fn):
            return 1
    return 0


cdef int _registered_address(PyObject* fn, object obj, Py_ssize_t index,
                             PtrResult* r) except -1:
    """_address_from for a registered function ``fn``, whose reference (_registered_fn's)
    it drops."""
    try:
        return _address_from(<object>fn, obj, index, "the function registered for this type",
                             "the registered function", r)
    finally:
        Py_XDECREF(fn)


# ---------------------------------------------------------------------------------------------
# Classification (once per type; the handler caches the result)

cdef Py_ssize_t _HEAD = sizeof(PyObject)
cdef Py_ssize_t _ctypes_bptr_offset = -1
cdef bint _probes_fail = False        # _use_layout_fallbacks: as if no layout were confirmed


cdef int _check_ctypes_layout() except -1:
    # A ctypes instance (CDataObject) stores `char *b_ptr` right after PyObject_HEAD. Confirm it
    # on this interpreter; if not, KIND_CTYPES_BUFFER reads through the buffer protocol instead.
    global _ctypes_bptr_offset
    _ctypes_bptr_offset = -1
    if _probes_fail:
        return 0
    probe = ctypes.c_int(0x5EED)
    cdef char** slot = <char**>(<char*><PyObject*>probe + _HEAD)
    if <uintptr_t>slot[0] == <uintptr_t>ctypes.addressof(probe):
        _ctypes_bptr_offset = _HEAD
    return 0


_check_ctypes_layout()


cdef Py_ssize_t _npvoid_offset = -2     # npvoid_data_offset's answer; -2: not yet asked


cdef Py_ssize_t npvoid_data_offset() except -2:
    """Offset in a numpy.void of its data pointer, or -1 where a probe does not confirm it.

    numpy's arrayscalars.h lays out a structured scalar (PyVoidScalarObject) as
    PyObject_VAR_HEAD, then ``char *obval`` (its bytes: inside the array it was taken from, or
    its own), then ``PyArray_Descr *descr`` (its dtype); numpy sets both when it makes the
    scalar and never changes them. Confirmed on both kinds of scalar the first time it is
    asked once numpy is imported, and again after _use_layout_fallbacks."""
    global _npvoid_offset
    if _npvoid_offset == -2:
        np = sys.modules.get("numpy")
        if np is None:
            return -1
        _npvoid_offset = _probe_npvoid(np)
    return _npvoid_offset


cdef Py_ssize_t _probe_npvoid(object np) except -2:
    if _probes_fail:
        return -1
    cdef Py_ssize_t off = sizeof(PyVarObject)
    cdef char** slot
    dt = np.dtype([("a", np.uint32), ("b", np.uint16)])
    arr = np.frombuffer(bytearray(range(1, 1 + 2 * dt.itemsize)), dtype=dt)
    for sample, at in ((arr[1], arr.ctypes.data + dt.itemsize), (arr[1].copy(), None)):
        if type(sample) is not np.void or sample.dtype is not dt:
            return -1
        slot = <char**>(<char*><PyObject*>sample + off)
        if at is not None and <uintptr_t>slot[0] != <uintptr_t>at:
            return -1
        if (<PyObject**>(slot + 1))[0] != <PyObject*>dt:
            return -1
        if ctypes.string_at(<uintptr_t>slot[0], dt.itemsize) != arr[1:].tobytes()[:dt.itemsize]:
            return -1
    return off


def _npvoid_data_offset():
    """For tests: npvoid_data_offset(), the numpy.void layout as confirmed now (-1: not)."""
    return npvoid_data_offset()


def _mro_find(t, str module_prefix, str name):
    """For tests: the base of ``t`` that kernarg takes for class ``name`` of a module under
    ``module_prefix`` (mro_find, which reads class names without building them)."""
    if not isinstance(t, type):
        raise TypeError(f"expected a type, got {type(t).__name__}")
    return mro_find(<type>t, module_prefix, name)


def _use_layout_fallbacks(bint on):
    """For tests: classify as on an interpreter where neither the ctypes nor the numpy scalar
    layout probe confirms its layout (``on=True``), so that ctypes and numpy scalars take the
    buffer-protocol paths, or as this one does (``on=False``). Types classified before keep
    their kind until ``kernarg._handler._forget_types()``. Signatures built meanwhile pack no
    numpy.void in place (npvoid_data_offset)."""
    global _probes_fail, _npvoid_offset
    _probes_fail = on
    _check_ctypes_layout()
    _check_ctypes_kept_layout()
    _npvoid_offset = -2


cdef bint _is_pycuda_pointer(type t):
    """PyCUDA's device pointers: what ``pycuda.driver.mem_alloc`` returns (DeviceAllocation),
    a ``DeviceMemoryPool``'s allocations (PooledDeviceAllocation) and the user's subclasses of
    ``PointerHolderBase`` (which supply ``get_pointer()``). Each is an address and nothing
    else, as ``int(obj)``; PyCUDA's own launches take them so."""
    return (mro_has(t, "pycuda", "DeviceAllocation")
            or mro_has(t, "pycuda", "PooledDeviceAllocation")
            or mro_has(t, "pycuda", "PointerHolderBase"))


# Texture and surface objects: a kernel takes them by value, as `cudaTextureObject_t` /
# `cudaSurfaceObject_t` (unsigned long long). Where each library keeps the handle:
cdef enum:
    HANDLE_INT = 1      # cuda.bindings' driver and runtime classes (and cuda.cuda/cuda.cudart's)
    HANDLE_PTR = 2      # CuPy's cupy.cuda.texture classes: obj.ptr
    HANDLE_ATTR = 3     # cuda.core's: obj.handle, 0 once closed

_BINDINGS_HANDLES = frozenset(["CUtexObject", "CUsurfObject", "cudaTextureObject_t",
                               "cudaSurfaceObject_t"])
_CUPY_HANDLES = frozenset(["TextureObject", "SurfaceObject"])


cdef int _handle_source(type t):
    """Where a texture/surface object type keeps its handle (HANDLE_*), or 0: not one."""
    for base in t.__mro__:
        module = base.__module__ or ""
        name = base.__name__
        if module.startswith("cuda.core"):
            if name in _CUPY_HANDLES:        # cuda.core's classes have the same names
                return HANDLE_ATTR
        elif module.startswith("cuda.") and name in _BINDINGS_HANDLES:
            return HANDLE_INT
        elif module.startswith("cupy.cuda.texture") and name in _CUPY_HANDLES:
            return HANDLE_PTR
    return 0


cdef int handle_value(const TypeInfo* info, object obj, Py_ssize_t index,
                      void* out) except -1:
    cdef Py_ssize_t source = info.offset
    cdef uint64_t handle
    cdef str what = ("int()" if source == HANDLE_INT else
                     ".ptr" if source == HANDLE_PTR else ".handle")
    try:
        value = int(obj) if source == HANDLE_INT else \
            obj.ptr if source == HANDLE_PTR else obj.handle
        if type(value) is not int:
            value = PyNumber_Index(value)
    except Exception as exc:
        _reraise(exc, f"{_describe(index, obj)}: {what} of the texture/surface object "
                      f"raised {exc_quoted(exc)}")
    if not 0 <= value < 2**64:
        raise OverflowError(f"{_describe(index, obj)}: {what} of the texture/surface object "
                            f"gave {shown_value(value)}, outside 0 .. 2**64-1")
    if value == 0 and source == HANDLE_ATTR:
        raise ValueError(f"{_describe(index, obj)}: the texture/surface object is closed (its "
                         "handle is 0)")
    handle = <uint64_t>value
    memcpy(out, &handle, 8)         # out: 8 bytes anywhere (a C API caller's area may be unaligned)
    return 0


# TMA tensor maps (Hopper and later): a kernel takes `const __grid_constant__ CUtensorMap m` by
# value, the 128 opaque bytes cuTensorMapEncodeTiled/Im2col wrote. Where each library keeps them:
cdef enum:
    TMAP_BINDINGS = 1   # cuda.bindings' driver.CUtensorMap: getPtr() is the struct's address
    TMAP_CUDA_CORE = 2  # cuda.core's TensorMapDescriptor: its `cdef void* _get_data_ptr(self)`

cdef extern from *:
    """
    /* cuda.h's CUtensorMap: 16 64-bit words, aligned to 128 bytes since CUDA 13 (to 64 before).
       setup.py defines KERNARG_CUDA_MAJOR from the cuda-bindings kernarg is built against. */
    #ifndef KERNARG_CUDA_MAJOR
    #define KERNARG_CUDA_MAJOR 13
    #endif
    #define KERNARG_TENSOR_MAP_ALIGN (KERNARG_CUDA_MAJOR >= 13 ? 128 : 64)
    """
    const Py_ssize_t KERNARG_TENSOR_MAP_ALIGN

cdef enum:
    TMAP_SIZE = 128

# Size and alignment untyped packing (and a Signature's `CUtensorMap`) give a tensor map.
TENSOR_MAP_SIZE = TMAP_SIZE
TENSOR_MAP_ALIGN = KERNARG_TENSOR_MAP_ALIGN

ctypedef void* (*data_ptr_t)(object) noexcept


cdef int tensor_map_source(type t):
    """Where a tensor map type keeps its bytes (TMAP_*), or 0: not a tensor map type."""
    if mro_has(t, "cuda.core", "TensorMapDescriptor"):
        return TMAP_CUDA_CORE
    if mro_has(t, "cuda.bindings", "CUtensorMap"):
        return TMAP_BINDINGS
    return 0


cdef int _cuda_core_tensor_map(type t, TypeInfo* info) except -1:
    """Find cuda.core's ``TensorMapDescriptor._get_data_ptr`` (a cdef method: no Python name).

    A Cython module that cimports the class calls it through the class's method table, found
    in the type's ``__pyx_vtable__`` capsule and laid out as the ``.pxd`` cuda.core ships beside
    the module declares the methods. kernarg does the same at run time, so it reads that
    ``.pxd`` first and goes on only if it declares what kernarg relies on: the CUtensorMap as the
    first field and ``int _device_id`` right after it, and ``void* _get_data_ptr(self)``, whose
    place among the methods gives its slot in the table. Anything else raises TypeError."""
    import os
    import re

    # The cuda.core class itself, whose module the .pxd sits beside (t may be a subclass).
    core = mro_find(t, "cuda.core", "TensorMapDescriptor")
    module = sys.modules.get(core.__module__)
    where = getattr(module, "__file__", None) or ""
    pxd = os.path.join(os.path.dirname(where), "_tensor_map.pxd")
    why = None
    try:
        with open(pxd) as f:
            text = f.read()
    except OSError:
        text = ""
        why = f"no {pxd}"
    body = re.search(r"^cdef class TensorMapDescriptor\b[^\n]*:\n((?:[ \t]+[^\n]*\n|[ \t]*\n)*)",
                     text, re.M)
    if why is None and body is None:
        why = f"{pxd} declares no `cdef class TensorMapDescriptor`"
    slot = -1
    if why is None:
        decls = [" ".join(line.split()) for line in body.group(1).splitlines()
                 if line.split()[:1] in (["cdef"], ["cpdef"])]
        fields = [d for d in decls if "(" not in d]
        methods = [d for d in decls if "(" in d]
        if fields[:2] != ["cdef cydriver.CUtensorMap _tensor_map", "cdef int _device_id"]:
            why = f"{pxd} does not declare `_tensor_map` and `_device_id` first"
        for k, decl in enumerate(methods):
            if re.fullmatch(r"cdef void ?\* ?_get_data_ptr\(self\)", decl):
                slot = k
        if why is None and slot < 0:
            why = f"{pxd} declares no `cdef void* _get_data_ptr(self)`"
    capsule = core.__dict__.get("__pyx_vtable__")
    if why is None and (capsule is None or not PyCapsule_CheckExact(capsule)):
        why = f"{core.__qualname__} has no __pyx_vtable__ capsule"
    if why is not None:
        raise TypeError(f"cannot read this cuda.core's TensorMapDescriptor ({why}); kernarg "
                        "reads the CUtensorMap through the method table its .pxd declares")
    cdef void** table = <void**>PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))
    info.closure = table[slot]
    return 0


cdef int tensor_map_value(const TypeInfo* info, object obj, Py_ssize_t index, void* out,
                          int* device) except -1:
    cdef Py_ssize_t source = info.offset
    cdef data_ptr_t data_ptr = <data_ptr_t>info.closure
    cdef char* start
    cdef char* end
    cdef char* src
    device[0] = -1
    if source == TMAP_BINDINGS:
        try:
            address = obj.getPtr()
            if type(address) is not int:
                address = PyNumber_Index(address)
        except Exception as exc:
            _reraise(exc, f"{_describe(index, obj)}: getPtr() of the tensor map raised "
                          f"{exc_quoted(exc)}")
        if not 0 < address < 2**64:
            raise ValueError(f"{_describe(index, obj)}: getPtr() of the tensor map gave "
                             f"{shown_value(address)}, not an address")
        src = <char*><uintptr_t>address
    else:
        src = <char*>data_ptr(obj)
        # The struct must lie inside the object, where the .pxd put it, with _device_id after.
        start = <char*><PyObject*>obj
        end = start + (<PyTypeObject*>Py_TYPE(obj)).tp_basicsize
        if not (start + sizeof(PyObject) <= src and src + TMAP_SIZE + sizeof(int) <= end):
            raise TypeError(f"{_describe(index, obj)}: the tensor map's _get_data_ptr gave an "
                            "address outside the object; this cuda.core's layout is not the "
                            "one its .pxd declares")
        device[0] = (<int*>(src + TMAP_SIZE))[0]
    memcpy(out, src, TMAP_SIZE)
    return 0


cdef Py_ssize_t _inline_offset(object np, object dtype):
    """Offset of a numpy scalar's value inside the object, or -1 if it cannot be confirmed."""
    cdef Py_ssize_t size = dtype.itemsize, align = dtype.alignment
    cdef Py_ssize_t off = (_HEAD + align - 1) // align * align
    if _probes_fail:
        return -1
    pattern = bytes(range(1, size + 1)) if dtype.kind != "b" else b"\x01"
    sample = np.frombuffer(pattern, dtype=dtype)[0]
    if ctypes.string_at(<uintptr_t><PyObject*>sample + off, size) != sample.tobytes():
        return -1
    return off


cdef int _classify_numpy(object np, type t, TypeInfo* info) except -1:
    if issubclass(t, np.void):
        info.kind = KIND_NPVOID
        # numpy.void and numpy.record (np.rec.array's records: numpy's own subclass, which
        # adds a __dict__ after void's fields), not a user's subclass, which may redefine
        # .dtype: where the data pointer is (the dtype's after it), for kernarg.pack to copy
        # the value in place (_handler's _place_npvoid); -1: not
        info.offset = npvoid_data_offset() if t is np.void or t is np.record else -1
        return 0
    dtype = np.dtype(t)
    is_ml_dtypes = (t.__module__ or "").startswith("ml_dtypes")
    if dtype.kind in "biufc" and dtype.itemsize <= 16 and not is_ml_dtypes:
        if dtype.kind in "fc" and dtype.itemsize // (2 if dtype.kind == "c" else 1) > 8:
            raise TypeError(f"{t.__name__}: CUDA has no long double; convert to numpy.float64")
    elif not is_ml_dtypes:
        raise TypeError(f"{t.__name__} (dtype kind {dtype.kind!r}) has no CUDA parameter type")
    info.size = dtype.itemsize
    # CUDA's float2/double2 are aligned to their full size; numpy's complex to the component's.
    info.align = dtype.itemsize if dtype.kind == "c" else dtype.alignment
    info.offset = _inline_offset(np, dtype)
    info.kind = KIND_INLINE if info.offset >= 0 else KIND_NPVOID
    if not is_ml_dtypes and dtype.kind in "biufc":
        info.num_kind = ord(dtype.kind)
    elif is_ml_dtypes and dtype.name == "bfloat16" and info.size == 2:
        info.num_kind = NUM_BFLOAT16    # read as a number by Signature.pack (_number_at)
    elif is_ml_dtypes and dtype.name in SMALL_FLOAT_KINDS and info.size == 1:
        # float8_e4m3fn ... float4_e2m1fn: the format's letter, by which Signature.pack
        # copies the byte for a parameter of the format (_signature's _SMALL_KIND)
        info.num_kind = ord(SMALL_FLOAT_KINDS[dtype.name])
    return 0


def record_problem(dt, str where):
    """Why a kernel cannot read numpy dtype ``dt`` (a struct's, or one of its parts) as its
    fields, or None: Python objects (their bytes are addresses in this process) or a byte order
    other than the host's (the GPU reads little-endian values). ``where`` names ``dt``."""
    if dt.fields is not None:
        for name, field in dt.fields.items():
            problem = record_problem(field[0], f"field {name!r} of {where}")
            if problem is not None:
                return problem
        return None
    if dt.subdtype is not None:
        return record_problem(dt.subdtype[0], where)
    if dt.hasobject:
        return (f"{where} holds Python objects ({dt}): a kernel would read their addresses in "
                "this process")
    if not dt.isnative:
        return f"{where} is {dt.str}, not in the host's (little-endian) byte order the GPU reads"
    return None


def record_alignment(dt):
    """The alignment a kernel's parameter of numpy dtype ``dt`` has: ``dt.alignment``, but for
    a struct numpy laid out aligned (``align=True``), the largest of its fields' alignments
    (numpy's own for that dtype). numpy gives 1 for the same struct rewrapped as a
    numpy.record or numpy.void dtype (``np.rec.array``'s records, ``np.dtype((np.record,
    dt))``) although it keeps the fields where the aligned layout put them: packed at 1, such
    a struct would sit where the kernel does not read it."""
    if dt.fields is None or not dt.isalignedstruct:
        return dt.alignment
    cdef Py_ssize_t align = dt.alignment
    for field in dt.fields.values():
        part = field[0]
        while part.subdtype is not None:
            part = part.subdtype[0]
        align = max(align, record_alignment(part))
    return align


def swapped_scalar(t):
    """Whether ctypes scalar type ``t`` stores its value byte-swapped: ``c_int32.__ctype_be__``
    and the like, which keep the name and ``_type_`` of the native type. The buffer format of
    an instance says the byte order ('>i'); one is made from zero bytes, past any __init__."""
    if not (isinstance(t, type) and issubclass(t, ctypes._SimpleCData)):
        return False
    try:
        fmt = memoryview(t.from_buffer_copy(bytes(ctypes.sizeof(t)))).format
    except Exception:       # a type that cannot be made this way says nothing about its order
        return False
    return fmt[:1] in (">", "!")


def ctypes_fields(t):
    """The ``_fields_`` entries of ctypes struct or union type ``t``, its bases' first (a
    subclass's ``_fields_`` lists only the fields it adds)."""
    return [field for klass in reversed(t.__mro__) for field in vars(klass).get("_fields_", ())]


def ctypes_problem(t, str where, bint swapped_ok=False):
    """record_problem for ctypes type ``t``: a py_object in it, or a big-endian struct, array
    or scalar (the scalar ``t`` itself is not a problem with ``swapped_ok``: its bytes can be
    reversed)."""
    if getattr(t, "_type_", None) == "O":
        return f"{where} is a ctypes.py_object, which holds a Python object a kernel cannot use"
    if hasattr(t, "_swappedbytes_") or (not swapped_ok and swapped_scalar(t)):
        # BigEndianStructure/Union, or a scalar type such as c_int32.__ctype_be__ (their
        # fields' types), on a little-endian host
        return f"{where} is not in the host's (little-endian) byte order the GPU reads"
    if issubclass(t, ctypes.Array):
        return ctypes_problem(t._type_, where)
    if issubclass(t, (ctypes.Structure, ctypes.Union)):
        for field in ctypes_fields(t):
            problem = ctypes_problem(field[1], f"field {field[0]!r} of {where}")
            if problem is not None:
                return problem
    return None


cdef int _classify_ctypes(type t, TypeInfo* info) except -1:
    problem = ctypes_problem(t, t.__name__, swapped_ok=True)
    if problem is not None:
        raise TypeError(problem)
    if swapped_scalar(t):
        # c_int32.__ctype_be__(1) and the like: the value of the native type, bytes reversed.
        info.num_kind = SWAPPED_SCALAR
    elif issubclass(t, CTYPES_POINTER_TYPES):
        info.num_kind = CTYPES_POINTER      # its target is checked per value
    elif ctypes_pointer_fields(t):
        info.num_kind = CTYPES_HOLDS_POINTERS   # a struct, union or array with pointers in it
    else:
        info.num_kind = _ctypes_number_kind(t)
    if getattr(t, "_type_", None) == "g" and ctypes.sizeof(t) != 8:
        raise TypeError(f"{t.__name__}: CUDA has no long double; use ctypes.c_double")
    info.size = ctypes.sizeof(t)
    info.align = ctypes.alignment(t)
    if info.size == 0:
        raise TypeError(f"{t.__name__} has size 0; a kernel parameter needs at least one byte")
    info.kind = KIND_CTYPES if _ctypes_bptr_offset >= 0 else KIND_CTYPES_BUFFER
    info.offset = _ctypes_bptr_offset
    return 0


# ctypes' own number types (c_int32 is c_int, c_size_t is c_ulong: the names are aliases) and
# their numpy dtype kinds: 'b' for c_bool, 'f' for c_float and c_double, 'i' and 'u' for the
# signed and unsigned integers. c_char, c_wchar, c_longdouble and the pointers are not here.
CTYPES_NUMBER_KINDS = {
    t: ord("b" if t._type_ == "?" else "f" if t._type_ in "fd" else
           "i" if t._type_.islower() else "u")
    for t in (ctypes.c_bool, ctypes.c_byte, ctypes.c_ubyte, ctypes.c_short, ctypes.c_ushort,
              ctypes.c_int, ctypes.c_uint, ctypes.c_long, ctypes.c_ulong, ctypes.c_longlong,
              ctypes.c_ulonglong, ctypes.c_float, ctypes.c_double)
}

# What Signature.pack's general path (_signature.pyx's _put_int, _put_float) consults on a
# ctypes number before the value it holds.
_NUMBER_HOOKS = ("__index__", "__float__", "value")


cdef char _ctypes_number_kind(type t) except -1:
    """The numpy dtype kind by which Signature.pack reads a ctypes number type's value in
    place (CTYPES_NUMBER_KINDS), or 0 for the general path. A subclass of one of ctypes' own
    number types reads as that type, as untyped packing copies it, unless something in its
    MRO but ctypes' own classes defines __index__, __float__ or value (which the general
    path honours), or it gives itself another ``_type_`` (c_double's subclass with ``_type_
    = "i"`` holds a C int). Decided once, when the type is classified: as for every
    classification, a class changed afterwards is not looked at again."""
    for base in t.__mro__:
        kind = CTYPES_NUMBER_KINDS.get(base)
        if kind is not None:
            break
    else:
        return 0
    if base is not t:
        if getattr(t, "_type_", None) != base._type_:
            return 0
        own = base.__mro__
        for name in _NUMBER_HOOKS:
            for cls in t.__mro__:
                if name in vars(cls):
                    if cls not in own:
                        return 0
                    break
    return kind


CTYPES_POINTER_TYPES = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_wchar_p, ctypes._Pointer)
_CTYPES_DATA = ctypes._SimpleCData.__base__     # _ctypes._CData: every ctypes instance


# Where a ctypes instance keeps the objects its value needs alive: CDataObject's b_objects,
# which the `_objects` member descriptor reads. ctypes keeps none for an address given as an
# int (c_void_p(ptr), a struct's pointer field set to one), so such a value has no target in
# host memory to refuse (ctypes_target_problem), and the packers copy it, with what it keeps,
# under the object's lock (copy_ctypes_pointers): a value that keeps objects other than
# pointers is checked as before. A view (a field or element read from another ctypes object,
# which shares its memory: its b_base, what `_b_base_` reads, is set) keeps nothing itself;
# what its root keeps decides (_cutils.h's kernarg_ctypes_root). The descriptors' offsets,
# confirmed on a pointer that keeps its string, one that keeps nothing, and a view; -1 where
# they are not (or under _use_layout_fallbacks).
cdef Py_ssize_t _ctypes_kept_offset = -1
cdef Py_ssize_t _ctypes_base_offset = -1


cdef int _check_ctypes_kept_layout() except -1:
    global _ctypes_kept_offset, _ctypes_base_offset
    _ctypes_kept_offset = _ctypes_base_offset = -1
    if _probes_fail or _ctypes_bptr_offset < 0:
        return 0
    kept_descriptor = vars(_CTYPES_DATA).get("_objects")
    base_descriptor = vars(_CTYPES_DATA).get("_b_base_")
    cdef Py_ssize_t offset = kernarg_member_offset(<PyObject*>kept_descriptor)
    cdef Py_ssize_t base = kernarg_member_offset(<PyObject*>base_descriptor)
    text = b"kernarg"
    keeps = ctypes.c_char_p(text)
    bare = ctypes.c_void_p(0x5EED)
    whole = (ctypes.c_int * 1 * 1)()
    view = whole[0]                     # a view of whole's memory
    for probe in (keeps, bare, whole, view):
        for at in (offset, base):
            if not _HEAD <= at <= ((<PyTypeObject*>Py_TYPE(probe)).tp_basicsize
                                   - <Py_ssize_t>sizeof(PyObject*)):
                return 0
    cdef PyObject* kept = (<PyObject**>(<char*><PyObject*>keeps + offset))[0]
    cdef PyObject* none = (<PyObject**>(<char*><PyObject*>bare + offset))[0]
    if not (keeps._objects is text and kept == <PyObject*>text and bare._objects is None and
            (none == NULL or none == <PyObject*>None)):
        return 0
    if (<PyObject**>(<char*><PyObject*>view + base))[0] == <PyObject*>whole and \
            view._b_base_ is whole and whole._b_base_ is None and \
            (<PyObject**>(<char*><PyObject*>whole + base))[0] == NULL:
        _ctypes_kept_offset, _ctypes_base_offset = offset, base
    return 0


_check_ctypes_kept_layout()


cdef uint64_t ctypes_pointer_value(object value) except? 0:
    """The address a ctypes pointer (``c_void_p``, ``c_char_p``, ``c_wchar_p``,
    ``POINTER(T)``) holds: the 8 bytes behind its b_ptr, read under the object's own lock
    where that layout is confirmed; else ``ctypes.cast(value, c_void_p).value``, which adds
    ``value`` to the objects it keeps alive (kernarg reads it so only under the fallbacks)."""
    cdef uint64_t address = 0
    if _ctypes_bptr_offset >= 0:
        kernarg_ctypes_copy(<char*>&address, <PyObject*>value, _ctypes_bptr_offset, 8)
        return address
    return ctypes.cast(value, ctypes.c_void_p).value or 0


cdef PyTypeObject* _c_void_p_type = <PyTypeObject*>ctypes.c_void_p
cdef PyTypeObject* _pointer_base_type = <PyTypeObject*>ctypes._Pointer
cdef PyTypeObject* _c_char_p_type = <PyTypeObject*>ctypes.c_char_p
cdef PyTypeObject* _c_wchar_p_type = <PyTypeObject*>ctypes.c_wchar_p


cdef bint is_ctypes_pointer(object value) noexcept:
    """``isinstance(value, CTYPES_POINTER_TYPES)`` by the type's bases alone: isinstance asks
    the ctypes metaclass's __instancecheck__ for each type the value is not exactly, ~240 ns
    for a POINTER(T) (3.11)."""
    cdef PyTypeObject* t = Py_TYPE(value)
    return (PyType_IsSubtype(t, _c_void_p_type) or PyType_IsSubtype(t, _pointer_base_type)
            or PyType_IsSubtype(t, _c_char_p_type) or PyType_IsSubtype(t, _c_wchar_p_type))


cdef enum:
    _MAX_KEPT_DICTS = 16            # _scan_kept walks no more of them,
    _MAX_KEPT_POINTERS = 64         # nor keeps more kept pointers' storage to check at the end,
    _MAX_HELD_POINTERS = 64         # nor does _held_pointer_refusal read more addresses so,
    _MAX_SCANNED_BYTES = 1024       # nor copy_ctypes_pointers scan more of a value


cdef struct _KeptScan:
    # A ctypes value's pointers, to check against the storage of the pointers it keeps: the
    # 8 bytes at each ``step``-th offset of ``data[:size]``
    const char* data
    Py_ssize_t size
    Py_ssize_t step
    # Storage (8 bytes from each) of the kept pointers met so far, checked at the end
    # (_scan_hits); one met past the first _MAX_KEPT_POINTERS is checked at once
    uint64_t starts[_MAX_KEPT_POINTERS]
    Py_ssize_t nstarts
    # Kept dicts met, ``count`` of them: the first with the caller's reference, the rest with
    # references taken (_keeps_only_pointers_not_hit drops them)
    PyObject* todo[_MAX_KEPT_DICTS]
    Py_ssize_t count


cdef bint _scan_hits(const _KeptScan* scan, const uint64_t* starts, Py_ssize_t n) noexcept:
    """Whether one of ``scan``'s 8-byte words is in a piece of storage at ``starts[:n]``."""
    cdef uint64_t low = UINT64_MAX, high = 0, word
    cdef Py_ssize_t k, j, step = scan.step, end = scan.size - 8
    cdef const char* data = scan.data
    if n == 0:
        return False
    for k in range(n):
        low = min(low, starts[k])
        high = max(high, starts[k] + sizeof(void*))
    k = 0
    while k <= end:                         # (a range() with a step not known at compile time
        memcpy(&word, data + k, 8)          # is a Python range: ~100 ns)
        if low <= word < high:
            for j in range(n):
                if starts[j] <= word < starts[j] + sizeof(void*):
                    return True
        k += step
    return False


cdef bint _scan_kept(_KeptScan* scan, PyObject* d) noexcept:
    """Whether each item of the kept dict ``d`` is a ``c_void_p`` or ``POINTER(T)`` whose
    own storage (its 8 bytes) is kept in ``scan`` to check, or checked at once where there is
    no room; or a dict, kept in ``scan`` to walk (a reference taken; False where there is no
    room). Read in C under the dict's own lock: no Python code runs, and no exception can be
    raised."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* key
    cdef PyObject* item
    cdef PyTypeObject* t
    cdef uint64_t start
    cdef bint only = True
    cdef kernarg_section cs
    kernarg_object_lock(&cs, d)
    while only and PyDict_Next(<object>d, &pos, &key, &item):
        t = Py_TYPE(<object>item)
        if PyDict_CheckExact(item):
            only = scan.count < _MAX_KEPT_DICTS
            if only:
                Py_XINCREF(item)
                scan.todo[scan.count] = item
                scan.count += 1
        elif PyType_IsSubtype(t, _c_void_p_type) or PyType_IsSubtype(t, _pointer_base_type):
            start = <uintptr_t>(<char**>(<char*>item + _ctypes_bptr_offset))[0]
            if scan.nstarts < _MAX_KEPT_POINTERS:
                scan.starts[scan.nstarts] = start
                scan.nstarts += 1
            else:
                only = not _scan_hits(scan, &start, 1)
        else:
            only = False
    kernarg_object_unlock(&cs)
    return only


cdef bint _keeps_only_pointers_not_hit(PyObject* kept, const char* data, Py_ssize_t size,
                                       Py_ssize_t step) noexcept:
    """Whether every object a ctypes value keeps alive (``kept``, its ``_objects``, which the
    caller keeps alive: a dict, with a dict of its own for each field or element that keeps
    any) is a ``c_void_p`` or ``POINTER(T)`` -- what ctypes.cast keeps (the pointer cast
    from, and each pointer cast from it, in one dict they share) -- and none of the value's
    pointers (the 8 bytes at each ``step``-th offset of ``data[:size]``) points into one's own
    storage (``pointer(c_void_p(...))`` does): then no host memory they could point at is
    kept. False where anything else is kept, or the dicts cannot be read so (the layout
    fallbacks, more than _MAX_KEPT_DICTS dicts): the slow path's walk (_kept_host_memory)
    decides, which costs ~1 µs (3.11)."""
    cdef _KeptScan scan
    cdef Py_ssize_t k, done = 0
    cdef bint only = True
    if _ctypes_bptr_offset < 0 or kept == NULL or not PyDict_CheckExact(kept):
        return False
    scan.data, scan.size, scan.step, scan.nstarts = data, size, step, 0
    scan.todo[0] = kept                     # the caller's reference; the nested ones', taken
    scan.count = 1
    while only and done < scan.count:
        only = _scan_kept(&scan, scan.todo[done])
        done += 1
    for k in range(1, scan.count):
        Py_XDECREF(scan.todo[k])
    return only and not _scan_hits(&scan, scan.starts, scan.nstarts)


cdef bint _keeps_only_other_pointers(object kept, const uint64_t* addresses,
                                     Py_ssize_t n) noexcept:
    """_keeps_only_pointers_not_hit for a value whose pointers hold ``addresses[:n]``."""
    return _keeps_only_pointers_not_hit(<PyObject*>kept, <const char*>addresses, 8 * n, 8)


cdef bint copy_ctypes_pointers(char* dst, PyObject* value, Py_ssize_t size) noexcept:
    """The packers' fast path for a ctypes pointer, or a struct, union or array holding
    pointers (``value``, ``size`` bytes): its bytes copied to ``dst`` and True, in C with no
    exception possible and no section, where no target of its pointers can be host memory
    kernarg refuses. The bytes and what it keeps alive (its b_objects, which `_objects`
    reads) are read at once under the object's lock, so that a value another thread sets at
    that moment (a c_char_p's .value = b"...") is seen with what it keeps. Taken where it
    keeps nothing (an address given as an int: c_void_p(ptr), a field set to one), or only
    other pointers (what ctypes.cast keeps: a c_void_p once cast, a POINTER(T) cast from one,
    a struct a field of which was set to one) none of whose own storage (8 bytes each) any 8
    bytes of the copy, at any offset, point into (a test of more than the pointer fields,
    which needs no list of them: a false alarm only sends the value to the slow path). A view
    (a field or element read from another ctypes object: its b_base set) keeps nothing
    itself: what its root keeps decides (_cutils.h's kernarg_ctypes_root_kept), read under
    the root's lock after the copy (a view is written under the lock of whichever view object
    the writer made, so no one lock orders a write to it against this copy anyway). False,
    ``dst``'s bytes then unspecified, for anything else, a value keeping objects of more than
    _MAX_SCANNED_BYTES, or where the layout is not confirmed: the slow path checks the
    targets (the pointer fields' list, a weak dict's lookup, and Python reads of `_objects`
    cost ~300 ns more for a struct, 3.11)."""
    cdef PyObject* kept
    cdef bint only, view
    cdef kernarg_section cs
    if _ctypes_kept_offset < 0:             # (confirmed only where b_ptr's offset is)
        return False
    kernarg_object_lock(&cs, value)
    if size == 8:                           # (a move, where a runtime size calls libc)
        memcpy(dst, (<char**>(<char*>value + _ctypes_bptr_offset))[0], 8)
    else:
        memcpy(dst, (<char**>(<char*>value + _ctypes_bptr_offset))[0], size)
    kept = (<PyObject**>(<char*>value + _ctypes_kept_offset))[0]
    if kept == <PyObject*>None:
        kept = NULL
    Py_XINCREF(kept)
    view = (<PyObject**>(<char*>value + _ctypes_base_offset))[0] != NULL
    kernarg_object_unlock(&cs)
    if kept == NULL:
        if not view:
            return True                     # an address given as an int
        kept = kernarg_ctypes_root_kept(value, _ctypes_kept_offset, _ctypes_base_offset)
        if kept == NULL or kept == <PyObject*>None:
            Py_XDECREF(kept)
            return True                     # a view whose root keeps nothing
    only = 8 <= size <= _MAX_SCANNED_BYTES and _keeps_only_pointers_not_hit(kept, dst, size, 1)
    Py_XDECREF(kept)
    return only


cdef object _kept_for(object value):
    """What ctypes keeps alive for the pointers in ``value``: its ``_objects``, or, for a
    view (a field or element read from a struct, union or array: ``s.inner``, ``s.x`` of a
    ``POINTER`` field, ``a[1]``), which keeps nothing itself, its root's (the object at the
    end of its ``_b_base_``s), where ctypes keeps what a pointer set through the view needs."""
    kept = value._objects
    return kept if kept is not None else _ctypes_root(value)._objects


cdef object _ctypes_root(object obj):
    """The ctypes object at the root of ``obj``'s ``_b_base_``s (``obj`` where it has none),
    as _cutils.h's kernarg_ctypes_root."""
    base = obj._b_base_
    while base is not None:
        obj = base
        base = obj._b_base_
    return obj


cdef object _target_problem(object value, object kept):
    """What host memory a ctypes pointer (``c_void_p``, ``c_char_p``, ``c_wchar_p``,
    ``POINTER(T)``) points at, or None, ``kept`` what ctypes keeps alive for it (_kept_for).
    ctypes keeps alive (in ``_objects``) what a pointer was made from: ``ctypes.pointer(x)``
    and ``cast(array, ...)`` point into the ctypes object they keep, ``c_char_p(b"...")`` and
    ``c_wchar_p("...")`` at the string's characters, all host memory of this process. A
    pointer made from an int, cast from another pointer, or into a ctypes view of memory
    ctypes did not allocate (``from_address``, ``from_buffer``) is taken as the caller's
    address, as an int is."""
    if isinstance(kept, (bytes, str)) or PyCapsule_CheckExact(kept):
        return "a Python string's characters"
    cdef uint64_t address = ctypes_pointer_value(value)
    if not address or _keeps_only_other_pointers(kept, &address, 1):
        return None
    for start, size, what in _kept_host_memory(kept, 4096):
        if start <= address < start + size:
            return what
    return None


cdef list _kept_host_memory(object kept, int limit):
    """(start, size, what) of each piece of host memory a ctypes object's ``_objects``
    (``kept``) keeps alive: ctypes objects ctypes allocated, and strings' characters. What a
    value keeps is shallow: ``limit`` bounds the walk (a cycle cannot loop for ever)."""
    found = []
    todo = [kept]
    for _ in range(limit):
        if not todo:
            break
        item = todo.pop()
        if type(item) is dict:
            todo.extend((<dict>item).values())
        elif isinstance(item, _CTYPES_DATA):
            if _ctypes_owned(item):
                found.append((ctypes.addressof(item), ctypes.sizeof(item),
                              f"the ctypes {type(item).__name__} it was made from"))
        elif isinstance(item, bytes):
            start = ctypes.cast(ctypes.c_char_p(item), ctypes.c_void_p).value
            found.append((start, len(item) + 1, "a Python string's characters"))
        elif PyCapsule_CheckExact(item):    # a c_wchar_p field's buffer (CPython's ctypes)
            found.append((<size_t>PyCapsule_GetPointer(item, PyCapsule_GetName(item)), 1,
                          "a Python string's characters"))
    return found


cdef bint _ctypes_owned(object obj):
    """Whether ctypes allocated ``obj``'s memory (its own, or that of the object it is a field
    or element of): host memory. ``from_address`` and ``from_buffer`` objects are views of
    memory someone else allocated, which may be pinned."""
    return bool(_ctypes_root(obj)._b_needsfree_)


cdef str ctypes_target_refusal(object value):
    """The refusal of a ctypes pointer into host memory -- ``value`` itself, or one in a
    field or element of ``value`` (a ctypes struct, union or array) -- after its argument's or
    parameter's name, or None. A value that keeps nothing alive (a pointer made from an int, a
    struct whose pointers were given as ints: the usual cases) costs two attribute reads (a
    view, one more for each base up to its root: _kept_for)."""
    kept = _kept_for(value)
    if kept is None:
        return None
    if not is_ctypes_pointer(value):
        return _held_pointer_refusal(value, kept)
    problem = _target_problem(value, kept)
    if problem is None:
        return None
    return f"the ctypes pointer points at {problem}, {_HOST_MEMORY}"


_HOST_MEMORY = "host memory a kernel cannot read; pass CUDA device, pinned or managed memory"


# ctypes type -> ctypes_pointer_fields(type); weak, as programs make ctypes types at run time
cdef object _POINTER_FIELDS = weakref.WeakKeyDictionary()


def ctypes_pointer_fields(t):
    """((offset, path), ...) of each pointer (c_void_p, c_char_p, c_wchar_p, POINTER(T)) a
    value of ctypes type ``t`` holds in its fields and elements, nested ones included; ()
    for a type with none, ((0, ""),) for a pointer type itself."""
    found = _POINTER_FIELDS.get(t)
    if found is None:
        found = _POINTER_FIELDS[t] = tuple(_pointer_fields(t, 0, ""))
    return found


def _pointer_fields(t, Py_ssize_t base, str path):
    if issubclass(t, CTYPES_POINTER_TYPES):
        yield base, path
    elif issubclass(t, ctypes.Array):
        elem = t._type_
        inner = ctypes_pointer_fields(elem)
        if inner:
            step = ctypes.sizeof(elem)
            for k in range(t._length_):
                for offset, sub in inner:
                    joint = "" if sub[:1] in ("", "[") else "."
                    yield base + k * step + offset, f"{path}[{k}]{joint}{sub}"
    elif issubclass(t, (ctypes.Structure, ctypes.Union)):
        for field in ctypes_fields(t):
            if len(field) > 2:
                continue        # a bitfield: an integer
            name = field[0]
            yield from _pointer_fields(field[1], base + getattr(t, name).offset,
                                       f"{path}.{name}" if path else name)


cdef str _held_pointer_refusal(object value, object kept):
    """The refusal of ``value`` (a ctypes struct, union or array) where one of its pointers
    points into host memory it keeps alive (``kept``: _kept_for): a ctypes object ctypes
    allocated (``pointer(x)``, ``cast(array, ...)`` assigned to a field) or a string's
    characters (a ``c_char_p`` field given bytes)."""
    cdef uint64_t addresses[_MAX_HELD_POINTERS]
    cdef Py_ssize_t offsets[_MAX_HELD_POINTERS]
    cdef Py_ssize_t k, n = 0
    cdef char* data
    cdef kernarg_section cs
    fields = ctypes_pointer_fields(type(value))
    if not fields:
        return None
    if _ctypes_bptr_offset >= 0 and len(fields) <= _MAX_HELD_POINTERS:
        for offset, _ in fields:
            offsets[n] = offset
            n += 1
        kernarg_object_lock(&cs, <PyObject*>value)      # the addresses, as ctypes sets them
        data = (<char**>(<char*><PyObject*>value + _ctypes_bptr_offset))[0]
        for k in range(n):
            memcpy(&addresses[k], data + offsets[k], 8)
        kernarg_object_unlock(&cs)
        if _keeps_only_other_pointers(kept, addresses, n):
            return None
    ranges = _kept_host_memory(kept, 4096)
    if not ranges:
        return None
    cdef Py_ssize_t base = ctypes.addressof(value)
    for offset, path in fields:
        address = ctypes.c_uint64.from_address(base + offset).value
        for start, size, what in ranges:
            if start <= address < start + size:
                part = "element" if path.startswith("[") else "field"
                return f"{part} {path} is a ctypes pointer to {what}, {_HOST_MEMORY}"
    return None


_CTYPES_BASES = (ctypes._SimpleCData, ctypes.Structure, ctypes.Union, ctypes.Array,
                 ctypes._Pointer)


cdef extern from "Python.h":
    ctypedef struct PyGetSetDef:
        void* get
        void* closure
    ctypedef struct PyGetSetDescrObject:
        PyGetSetDef* d_getset

_GETSET_DESCRIPTOR = type(type.__dict__["__name__"])


cdef int _find_getter(type t, str name, getter_t* getter, void** closure) except -1:
    """Point ``getter`` at the C getter behind ``t.<name>`` when it is a plain getset
    descriptor (as for cdef-class properties); leave it NULL otherwise."""
    for base in t.__mro__:
        descr = base.__dict__.get(name)
        if descr is not None:
            if type(descr) is _GETSET_DESCRIPTOR:
                getter[0] = <getter_t>(<PyGetSetDescrObject*>descr).d_getset.get
                closure[0] = (<PyGetSetDescrObject*>descr).d_getset.closure
            return 0
    return 0


# The capsules whose tables TypeInfo.api points into. The specification makes a table live as
# long as the process; holding its capsule too costs nothing and guards against a type that
# drops the attribute.
cdef set _exchange_capsules = set()


cdef const DLPackExchangeAPI* _exchange_api(type t):
    """The DLPack C exchange API table of ``t`` (``t.__dlpack_c_exchange_api__``, a capsule
    named "dlpack_exchange_api"), or NULL when it has none kernarg can use: the table must be
    version 1.3 or a later 1.x (where the exchange API starts), found directly or down the
    ``prev_api`` chain, and have the two functions a consumer needs."""
    cdef DLPackExchangeAPIHeader* header
    cdef const DLPackExchangeAPI* api
    try:
        capsule = getattr(t, "__dlpack_c_exchange_api__", None)
    except Exception:
        return NULL
    if capsule is None or not PyCapsule_IsValid(capsule, b"dlpack_exchange_api"):
        return NULL
    header = <DLPackExchangeAPIHeader*>PyCapsule_GetPointer(capsule, b"dlpack_exchange_api")
    while header != NULL and not (header.version.major == 1 and header.version.minor >= 3):
        header = header.prev_api
    if header == NULL:
        return NULL
    api = <const DLPackExchangeAPI*>header
    if api.dltensor_from_py_object_no_sync == NULL or api.current_work_stream == NULL:
        return NULL
    _exchange_capsules.add(capsule)
    return api


# numpy.ndarray, set when classify first meets an array (KIND_NDARRAY reads it)
cdef type _ndarray_type = None


cdef int classify(type t, TypeInfo* info) except -1:
    """Decide once how instances of ``t`` are packed. Raises TypeError for by-value types that
    have no CUDA equivalent; returns KIND_PROBE for types to be probed per instance."""
    cdef PyObject* fn
    info.kind = KIND_PROBE
    info.size = 8
    info.align = 8
    info.offset = 0
    info.getter = NULL
    info.closure = NULL
    info.mr_getter = NULL
    info.mr_closure = NULL
    info.num_kind = 0
    info.api = NULL
    info.torch_tensor = False
    global _ndarray_type
    if t is type(None):
        info.kind = KIND_NONE
        return 0
    if _registry and _registered_fn(<PyTypeObject*>t, &fn):
        Py_XDECREF(fn)
        info.kind = KIND_REGISTERED
        return 0
    np = sys.modules.get("numpy")
    if np is not None and issubclass(t, np.generic):
        return _classify_numpy(np, t, info)
    if issubclass(t, bool):
        info.kind, info.size, info.align = KIND_BOOL, 1, 1
        return 0
    if issubclass(t, int):
        info.kind = KIND_INT
        return 0
    if issubclass(t, float):
        info.kind = KIND_FLOAT
        return 0
    if issubclass(t, complex):
        info.kind, info.size, info.align = KIND_COMPLEX, 16, 16
        return 0
    if issubclass(t, _CTYPES_BASES):
        return _classify_ctypes(t, info)
    if mro_has(t, "cuda.core", "Buffer"):
        info.kind = KIND_BUFFER
        _find_getter(t, "handle", &info.getter, &info.closure)
        _find_getter(t, "memory_resource", &info.mr_getter, &info.mr_closure)
        return 0
    if mro_has(t, "cuda.bindings", "CUdeviceptr"):
        # What cuda.bindings' cuMemAlloc and friends return (the cuda.cuda module of older
        # releases re-exports the same class). It holds an address and nothing else: no device,
        # no stream, no element type.
        info.kind = KIND_DRIVER_PTR
        return 0
    if _is_pycuda_pointer(t):
        info.kind = KIND_PYCUDA
        return 0
    # CuPy's raw allocations, which its RawKernel takes as their addresses: what cupy.cuda.alloc
    # and a memory pool return (an ndarray's .data), and what cupy.cuda.alloc_pinned_memory and
    # a pinned memory pool return (a buffer-protocol object, yet memory a kernel can reach).
    if mro_has(t, "cupy", "MemoryPointer"):
        info.kind = KIND_CUPY_MEMPTR
        return 0
    if mro_has(t, "cupy", "PinnedMemoryPointer"):
        info.kind = KIND_CUPY_PINNED
        return 0
    info.offset = tensor_map_source(t)
    if info.offset:
        info.kind, info.size, info.align = KIND_TENSOR_MAP, TMAP_SIZE, KERNARG_TENSOR_MAP_ALIGN
        if info.offset == TMAP_CUDA_CORE:
            _cuda_core_tensor_map(t, info)
        return 0
    info.offset = _handle_source(t)
    if info.offset:
        info.kind, info.size, info.align = KIND_HANDLE, 8, 8
        return 0
    # DLPack's C exchange API: one C call reads pointer, device and dtype, faster than any
    # adapter below (torch has it since 2.10), so it comes first.
    info.api = _exchange_api(t)
    if info.api != NULL:
        info.kind = KIND_DLPACK_C
        info.torch_tensor = mro_has(t, "torch", "Tensor")
    elif mro_has(t, "torch", "Tensor"):
        info.kind = KIND_TORCH
    elif mro_has(t, "cupy", "ndarray"):
        info.kind = KIND_CUPY
    elif mro_has(t, "numba", "DeviceNDArray"):
        info.kind = KIND_NUMBA
    elif mro_has(t, "cuda.core", "StridedMemoryView"):
        info.kind = KIND_SMV
    elif mro_has(t, "jaxlib", "ArrayImpl"):
        info.kind = KIND_JAX
    elif hasattr(t, "__cuda_array_interface__"):
        info.kind = KIND_CAI
    elif np is not None and issubclass(t, np.ndarray):
        _ndarray_type = np.ndarray
        info.kind = KIND_NDARRAY
    elif hasattr(t, "__dlpack__"):
        info.kind = KIND_DLPACK
    return 0


# ---------------------------------------------------------------------------------------------
# Pointer extraction (once per pointer-like argument)

cdef int _set_address(object value, Py_ssize_t index, object obj, str source,
                      PtrResult* r) except -1:
    cdef long long fast
    if type(value) is int:
        if kernarg_small_int(<PyObject*>value, &fast) and fast >= 0:      # below 2**60
            r.ptr = <uint64_t>fast
            return 0
        address = value
    elif type(value) is bool or is_numpy_bool(type(value)):
        # An int, to Python, but no address: a producer that answers True has a bug. (numpy
        # 1.x lets its bool through __index__, with a warning.)
        raise TypeError(f"{_describe(index, obj)}: {source} gave {type(value).__name__}, "
                        "expected an int address")
    else:
        # operator.index(): an __index__ that answers anything but an int (1.5) is refused,
        # not truncated to a wrong address.
        try:
            address = PyNumber_Index(value)
        except TypeError as exc:
            raise TypeError(f"{_describe(index, obj)}: {source} gave {type(value).__name__}, "
                            f"expected an int address ({exc_text(exc)})") from None
    if not 0 <= address < 2**64:
        raise OverflowError(f"{_describe(index, obj)}: {source} gave address "
                            f"{shown_value(address)}, outside 0 .. 2**64-1")
    r.ptr = <uint64_t>address
    return 0


cdef int _unsupported(Py_ssize_t index, object obj) except -1:
    desc = _describe(index, obj)
    if PyCapsule_CheckExact(obj):
        raise TypeError(f"{desc}: a raw PyCapsule is not accepted; pass the array itself so "
                        "kernarg can call __dlpack__(stream=...) with the launch stream")
    if isinstance(obj, str) or PyObject_CheckBuffer(obj):
        raise TypeError(f"{desc}: host memory cannot be passed to a kernel ({_ON_CPU}); "
                        + _ACCEPTED)
    raise TypeError(f"{desc}: unsupported kernel argument; {_ACCEPTED}")


cdef str _cai(Py_ssize_t index, object obj):
    return f"{_describe(index, obj)}: __cuda_array_interface__"


cdef enum:
    SHAPE_OK = 0
    SHAPE_NOT_INTS = 1
    SHAPE_NEGATIVE = 2


cdef int _shape_check(object shape) except -1:
    """SHAPE_OK for a tuple or list of ints >= 0; SHAPE_NOT_INTS, or SHAPE_NEGATIVE for an
    extent below 0 (the interface is malformed: no array has one)."""
    if type(shape) is not tuple:
        if not isinstance(shape, list):
            return SHAPE_NOT_INTS
        shape = tuple(shape)    # a copy: an int subclass's __lt__ cannot change what is read
    for item in <tuple>shape:
        if type(item) is not int and not isinstance(item, int):
            return SHAPE_NOT_INTS
        if item < 0:
            return SHAPE_NEGATIVE
    return SHAPE_OK


cdef int _consume_cai(object obj, Py_ssize_t index, uint64_t stream, PtrResult* r,
                      bint want_dtype, LazySection* lazy) except -1:
    """``lazy``: NULL where the caller holds kernarg's section (or the GIL); else the section
    to enter before anything but the usual interface is read (cai_pointer)."""
    try:
        cai = obj.__cuda_array_interface__
    except Exception as exc:
        enter_lazily(lazy)
        # A property that raises AttributeError says this object has no interface (that is
        # what hasattr() reads): producers do so for memory a kernel cannot reach (JAX and
        # torch for CPU arrays, CuPy on ROCm). If the object speaks DLPack, its device query
        # says where the memory is, and the refusal (or the pointer) comes from there.
        if isinstance(exc, AttributeError) \
                and getattr(type(obj), "__dlpack_device__", None) is not None:
            return _consume_dlpack(obj, index, stream, r)
        _reraise(exc, f"{_describe(index, obj)}: reading __cuda_array_interface__ raised "
                      f"{exc_quoted(exc)}")
    if not isinstance(cai, dict):
        enter_lazily(lazy)
        raise TypeError(f"{_cai(index, obj)} is "
                        f"{type(cai).__name__}, not a dict")
    try:
        return _read_cai(<dict>cai, index, obj, r, want_dtype, lazy)
    except Exception as exc:
        enter_lazily(lazy)
        # kernarg's own messages name the argument already; anything else came from a value in
        # the dict (a readonly flag whose bool() raises, an int subclass's __eq__ ...).
        if exc_text(exc).startswith(_describe(index, obj)):
            raise
        _reraise(exc, f"{_cai(index, obj)} could not be read: {exc_quoted(exc)}")


# The CUDA Array Interface keys, interned: dicts built from literals use these very objects,
# so one pass over the dict matches keys by identity instead of hashing seven lookups.
_K_DATA = sys.intern("data")
_K_SHAPE = sys.intern("shape")
_K_TYPESTR = sys.intern("typestr")
_K_VERSION = sys.intern("version")
_K_MASK = sys.intern("mask")
_K_STREAM = sys.intern("stream")
_K_STRIDES = sys.intern("strides")
_K_DESCR = sys.intern("descr")
cdef PyObject* K_DATA = <PyObject*>_K_DATA
cdef PyObject* K_SHAPE = <PyObject*>_K_SHAPE
cdef PyObject* K_TYPESTR = <PyObject*>_K_TYPESTR
cdef PyObject* K_VERSION = <PyObject*>_K_VERSION
cdef PyObject* K_MASK = <PyObject*>_K_MASK
cdef PyObject* K_STREAM = <PyObject*>_K_STREAM
cdef PyObject* K_STRIDES = <PyObject*>_K_STRIDES
cdef PyObject* K_DESCR = <PyObject*>_K_DESCR

cdef enum:
    F_DATA = 0
    F_SHAPE
    F_TYPESTR
    F_VERSION
    F_MASK
    F_STREAM
    F_COUNT


cdef object _ABSENT = object()        # a CUDA Array Interface field the dict pass did not find


cdef int _usual_cai_values(PyObject** found, PtrResult* r) noexcept:
    """The usual interface, read with no object made and no check that cannot pass: ``data``
    ``(address > 0, True or False)``, ``shape`` a tuple of ints >= 0, ``typestr`` a str,
    ``version`` 0-3 or absent, ``mask`` None or absent and ``stream`` None, absent or a handle
    > 0 (ints below 2**60, exact types). 1 with ``r`` filled; 0 for anything else, with ``r``
    untouched: _read_cai then reads the values one by one, and words what is wrong. ``found``
    holds _read_cai's borrowed references, so no Python code may run here, and none does."""
    cdef PyObject* data = found[F_DATA]
    cdef PyObject* shape = found[F_SHAPE]
    cdef PyObject* value
    cdef PyObject* readonly
    cdef long long ptr, small, handle = 0
    cdef Py_ssize_t i
    if data == NULL or not PyTuple_CheckExact(data) or PyTuple_GET_SIZE(<object>data) != 2:
        return 0
    value = PyTuple_GET_ITEM(<object>data, 0)
    readonly = PyTuple_GET_ITEM(<object>data, 1)
    if not PyLong_CheckExact(value) or not kernarg_small_int(value, &ptr) or ptr <= 0:
        return 0                # a null pointer's rules (size 0) are _read_cai's
    if readonly != Py_True and readonly != Py_False:
        return 0
    if shape == NULL or not PyTuple_CheckExact(shape):
        return 0
    for i in range(PyTuple_GET_SIZE(<object>shape)):
        value = PyTuple_GET_ITEM(<object>shape, i)
        if not PyLong_CheckExact(value) or not kernarg_small_int(value, &small) or small < 0:
            return 0
    if found[F_TYPESTR] == NULL or not PyUnicode_CheckExact(found[F_TYPESTR]):
        return 0
    value = found[F_VERSION]
    if value != NULL and not (PyLong_CheckExact(value) and kernarg_small_int(value, &small)
                              and 0 <= small <= 3):
        return 0
    if found[F_MASK] != NULL and found[F_MASK] != Py_None:
        return 0
    value = found[F_STREAM]
    if value != NULL and value != Py_None:
        if not PyLong_CheckExact(value) or not kernarg_small_int(value, &handle) or handle <= 0:
            return 0            # 0 (forbidden), negative and wide handles: _read_cai's words
    r.ptr = <uint64_t>ptr
    r.readonly = readonly == Py_True
    if handle > 0:
        r.has_stream = True
        r.stream = <uint64_t>handle
    return 1


cdef inline object _owned(PyObject** found, int slot):
    return <object>found[slot] if found[slot] != NULL else _ABSENT


cdef inline object _field(dict cai, object value, str key, bint complete, object default):
    if value is not _ABSENT:
        return value
    # cai.get may run Python code (the __eq__ of a key whose hash collides with `key`), which
    # may change the dict: _read_cai owns every value it found before the first such call.
    return default if complete else cai.get(key, default)


cdef Py_ssize_t _cai_pass(dict cai, PyObject** found) noexcept:
    """One pass over the dict, matching the keys by identity: ``found[F_...]`` the borrowed
    value of each field found, NULL for the others; returns how many keys matched (strides and
    descr among them). The caller holds the dict's lock."""
    cdef PyObject* key
    cdef PyObject* value
    cdef Py_ssize_t pos = 0, matched = 0
    memset(found, 0, F_COUNT * sizeof(PyObject*))
    while PyDict_Next(cai, &pos, &key, &value):
        if key == K_DATA:
            found[F_DATA] = value
        elif key == K_SHAPE:
            found[F_SHAPE] = value
        elif key == K_TYPESTR:
            found[F_TYPESTR] = value
        elif key == K_VERSION:
            found[F_VERSION] = value
        elif key == K_STREAM:
            found[F_STREAM] = value
        elif key == K_MASK:
            found[F_MASK] = value
        elif key != K_STRIDES and key != K_DESCR:
            continue
        matched += 1
    return matched


cdef int _read_cai(dict cai, Py_ssize_t index, object obj, PtrResult* r,
                   bint want_dtype, LazySection* lazy) except -1:
    cdef PyObject* found[F_COUNT]
    cdef long long small
    cdef bint complete, usual = False
    cdef kernarg_section cs
    # The pass reads under the dict's own lock (a free-threaded build; nothing on a GIL build),
    # and owns each value it keeps before leaving it: another thread may change a dict its
    # producer keeps, and PyDict_Next's borrowed references are good only while none does. No
    # Python code runs while the lock is held. A dict the property built for this read (the
    # usual case: kernarg holds its only reference) no other thread can reach, and needs none.
    cdef bint shared = not kernarg_unshared(<PyObject*>cai)
    if shared:
        kernarg_object_lock(&cs, <PyObject*>cai)
    try:
        # Every key recognised by identity: absent fields are really absent. Otherwise (keys
        # built at run time are not interned) the rest are looked up the usual way, below.
        complete = _cai_pass(cai, found) == PyDict_GET_SIZE(cai)
        # The usual case, checked on the borrowed values, instead of the reading below,
        # written for any value. Callgrind, the development VM: kernarg's own work for such an
        # argument went from 1,113 to 940 instructions (Python 3.11), and from 1,236 to 958
        # (3.12).
        usual = complete and type(cai) is dict and _usual_cai_values(found, r)
        typestr = _owned(found, F_TYPESTR)
        if not usual:
            version = _owned(found, F_VERSION)
            data = _owned(found, F_DATA)
            shape = _owned(found, F_SHAPE)
            mask = _owned(found, F_MASK)
            stream = _owned(found, F_STREAM)
    finally:
        if shared:
            kernarg_object_unlock(&cs)
    if usual:
        if want_dtype:
            _set_dtype_from_typestr(<str>typestr, r)
        return 0
    enter_lazily(lazy)
    # Looking up the fields the pass did not find may run Python code (the __eq__ of a key
    # whose hash collides), which may change the dict: every value found is owned already.
    version = _field(cai, version, "version", complete, 0)
    data = _field(cai, data, "data", complete, None)
    shape = _field(cai, shape, "shape", complete, None)
    typestr = _field(cai, typestr, "typestr", complete, None)
    mask = _field(cai, mask, "mask", complete, None)
    stream = _field(cai, stream, "stream", complete, None)
    if type(version) is not int or not 0 <= version <= 3:
        raise ValueError(f"{_cai(index, obj)} version {shown_value(version, True)} is not "
                         "supported (kernarg reads versions 0-3)")
    if type(data) is tuple and PyTuple_GET_SIZE(data) == 2 \
            and type(<object>PyTuple_GET_ITEM(data, 0)) is int:
        ptr = <object>PyTuple_GET_ITEM(data, 0)
        readonly = <object>PyTuple_GET_ITEM(data, 1)
    elif (not isinstance(data, (tuple, list)) or len(data) != 2
            or not isinstance(data[0], int) or isinstance(data[0], bool)):
        raise TypeError(f"{_cai(index, obj)}['data'] must be a (pointer: int, "
                        f"readonly: bool) tuple, got {shown_value(data, True)}")
    else:
        ptr, readonly = data[0], data[1]
    shape_is = _shape_check(shape)
    if shape_is == SHAPE_NOT_INTS:
        raise TypeError(f"{_cai(index, obj)}['shape'] must be a tuple of ints, "
                        f"got {shown_value(shape, True)}")
    if shape_is == SHAPE_NEGATIVE:
        raise ValueError(f"{_cai(index, obj)}['shape'] {shown_value(tuple(shape), True)} has "
                         "a negative extent; no array has one")
    if type(typestr) is not str:
        raise TypeError(f"{_cai(index, obj)}['typestr'] must be a str, "
                        f"got {shown_value(typestr, True)}")
    if mask is not None:
        raise ValueError(f"{_describe(index, obj)}: masked CUDA arrays "
                         "(__cuda_array_interface__['mask'] is not "
                         "None) are not supported")
    # 'strides' missing or None means C-contiguous: a pointer argument needs nothing from it.
    if want_dtype:
        _set_dtype_from_typestr(typestr, r)
    if ptr == 0:
        for item in shape:
            if item == 0:
                break
        else:
            raise ValueError(f"{_cai(index, obj)} has a null data pointer for a "
                             f"non-empty array of shape {shown_value(tuple(shape), True)}")
    _set_address(ptr, index, obj, "__cuda_array_interface__['data'][0]", r)
    r.readonly = bool(readonly)
    if stream is not None:
        # v3: None means no synchronisation; 1 and 2 are the default streams; 0 is forbidden.
        if type(stream) is int and kernarg_small_int(<PyObject*>stream, &small) and small > 0:
            r.has_stream = True                         # a handle below 2**60: the usual case
            r.stream = <uint64_t>small
            return 0
        if type(stream) is not int:
            raise TypeError(f"{_cai(index, obj)}['stream'] must be None or an int, "
                            f"got {type(stream).__name__}")
        if stream == 0:
            raise ValueError(f"{_cai(index, obj)}['stream'] is 0, which the "
                             "specification forbids (use 1 for the legacy default stream)")
        if not 0 < stream < 2**64:
            raise ValueError(f"{_cai(index, obj)}['stream'] is {shown_value(stream)}, not a "
                             "valid stream handle")
        r.has_stream = True
        r.stream = <uint64_t>stream
    return 0


cdef int _set_dtype_from_typestr(str typestr, PtrResult* r) except -1:
    # "<f4", "|u1", "<V2" ...: the byte order ('<', '>', '|' or '='), the kind letter, then the
    # size in bytes in ASCII digits (numpy's typestrs are ASCII), 4 at most, which keeps the
    # size in range. Big-endian elements of more than a byte are DTYPE_BIG_ENDIAN; other
    # kinds ("<M8[ns]", "|S4", "|O8") and typestrs not of this form DTYPE_OTHER: a typed
    # pointer to a type kernarg names refuses both, as it refuses a wrong kind. Read in place:
    # slicing the str and int() of the slice cost a typed pack of an array more than the rest
    # of the interface's reading (~100 ns on the development VM).
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(typestr), i
    cdef Py_UCS4 kind, order
    cdef int size = 0, digit
    r.dtype_kind = DTYPE_OTHER
    r.dtype_size = 0
    if not 3 <= n <= 6:
        return 0
    order = PyUnicode_READ_CHAR(typestr, 0)
    kind = PyUnicode_READ_CHAR(typestr, 1)
    if order not in "<>|=" or kind not in "fiubcV":
        return 0
    for i in range(2, n):
        digit = <int>PyUnicode_READ_CHAR(typestr, i) - 48      # '0'
        if not 0 <= digit <= 9:
            return 0
        size = size * 10 + digit
    r.dtype_size = size
    if order == ">" and size > 1 and kind != "V":
        r.dtype_kind = DTYPE_BIG_ENDIAN
    else:
        r.dtype_kind = <char>kind
    return 0


cdef tuple _numpy_dtype_kind(object dtype):
    """(kind, size) of a numpy dtype as PtrResult's dtype fields hold them; kind 0: unknown."""
    try:
        name = dtype.name
        if name == "bfloat16":
            return ord("B"), 2
        if dtype.kind in "fiubc":
            if dtype.byteorder == ">" and dtype.itemsize > 1:
                return DTYPE_BIG_ENDIAN, dtype.itemsize
            return ord(dtype.kind), dtype.itemsize
        if dtype.kind in "mMOSU":   # datetimes, timedeltas, objects, strings: no C pointee
            return DTYPE_OTHER, dtype.itemsize
        if name in SMALL_FLOAT_KINDS:                       # ml_dtypes' float8 ... float4
            return ord(SMALL_FLOAT_KINDS[name]), 1
    except AttributeError:
        pass
    return 0, 0


# numpy computes dtype.name in Python each time it is read (~1.8 us with numpy 2.4, more than
# the rest of a typed pack of an array), so each dtype's answer is kept, in a dict (a dtype's
# kind, size and name never change), and the last four asked in a DtypeSlots by identity, which
# a free-threaded build reads outside kernarg's section (under its sequence lock; the dicts and
# the slots are written only in it). A slot keeps its dtype alive, so that a dtype in hand found
# at a slot's address is the slot's: no freed dtype's address can be reused while it is kept.
cdef dict _dtype_kinds = {}
cdef dict _torch_dtype_kinds = {}       # torch.dtype objects (kernarg's torch adapter)

ctypedef tuple (*_kind_of_t)(object)

cdef enum:
    _DTYPE_SLOTS = 4

cdef struct DtypeSlots:
    unsigned seq
    int next                            # the slot written next (round robin)
    PyObject* dtype[_DTYPE_SLOTS]       # strong references, or NULL
    char kind[_DTYPE_SLOTS]
    int size[_DTYPE_SLOTS]

cdef DtypeSlots _numpy_dtypes           # numpy dtypes (CuPy, numba, JAX, views, numpy arrays)
cdef DtypeSlots _torch_dtypes           # torch.dtype objects


cdef tuple _dtype_entry(object dtype, dict kinds, _kind_of_t kind_of):
    """(dtype, kind, size) of ``dtype`` from ``kinds``, its cache, where ``kind_of`` put it the
    first time (at most 256 dtypes are kept; an unhashable one is asked every time)."""
    try:
        found = kinds.get(dtype)
    except TypeError:                                       # unhashable: not a dtype
        found = None
    if found is None:
        found = (dtype,) + kind_of(dtype)
        try:
            if len(kinds) >= 256:
                kinds.clear()
            kinds[dtype] = found
        except TypeError:
            pass
    return <tuple>found


cdef inline bint _dtype_slotted(DtypeSlots* slots, PyObject* dtype, PtrResult* r) noexcept:
    """Whether ``dtype`` is in ``slots``; if so, its kind and size are in ``r``."""
    cdef unsigned begun = kernarg_seq_begin(&slots.seq)
    cdef int i
    cdef char kind
    cdef int size
    for i in range(_DTYPE_SLOTS):
        if load_object(slots.dtype[i]) == dtype:
            kind = load_char(slots.kind[i])
            size = load_int(slots.size[i])
            if not kernarg_seq_valid(&slots.seq, begun):
                return False
            r.dtype_kind = kind
            r.dtype_size = size
            return True
    return False


cdef int _set_dtype(object dtype, DtypeSlots* slots, dict kinds, _kind_of_t kind_of,
                    PtrResult* r, LazySection* lazy) except -1:
    """``r``'s element type from ``dtype`` (``kind_of`` reads one, ``kinds`` and ``slots``
    keep its answers); ``lazy`` is entered for a dtype not in ``slots``."""
    cdef int i
    cdef PyObject* old
    if _dtype_slotted(slots, <PyObject*>dtype, r):
        return 0
    enter_lazily(lazy)
    entry = _dtype_entry(dtype, kinds, kind_of)
    r.dtype_kind = <char><long>(<object>PyTuple_GET_ITEM(entry, 1))
    r.dtype_size = <int><long>(<object>PyTuple_GET_ITEM(entry, 2))
    i = slots.next
    slots.next = (i + 1) % _DTYPE_SLOTS
    old = slots.dtype[i]
    Py_INCREF(dtype)
    kernarg_seq_write_begin(&slots.seq)
    store_object(slots.dtype[i], <PyObject*>dtype)
    store_char(slots.kind[i], r.dtype_kind)
    store_int(slots.size[i], r.dtype_size)
    kernarg_seq_write_end(&slots.seq)
    Py_XDECREF(old)         # a dtype's dealloc may run Python code: after the slot is whole
    return 0


cdef inline int _set_dtype_from_numpy(object dtype, PtrResult* r, LazySection* lazy) except -1:
    return _set_dtype(dtype, &_numpy_dtypes, _dtype_kinds, _numpy_dtype_kind, r, lazy)


# The 8-, 6- and 4-bit float formats (DLPack 1.1's codes 7-17, torch's and ml_dtypes' dtype
# names) as element kinds: a letter per format, so that no two formats match each other or any
# numpy kind, and a size of 1 (one storage byte: fp6 is byte-padded, fp4 is counted per byte
# whether one or two values share it). The CUDA types `__nv_fp8_e4m3` ... `__nv_fp4_e2m1`
# name the G, H, J, K, L and N formats (kernarg._signature).
SMALL_FLOAT_KINDS = {
    "float8_e4m3fn": "G", "float8_e5m2": "H", "float8_e8m0fnu": "J", "float6_e2m3fn": "K",
    "float6_e3m2fn": "L", "float4_e2m1fn": "N", "float4_e2m1fn_x2": "N",
    "float8_e3m4": "P", "float8_e4m3": "Q", "float8_e4m3b11fnuz": "R", "float8_e4m3fnuz": "S",
    "float8_e5m2fnuz": "T",
}
_TORCH_KINDS = {"float32": ("f", 4), "float64": ("f", 8), "float16": ("f", 2),
                "bfloat16": ("B", 2), "int8": ("i", 1), "uint8": ("u", 1), "int16": ("i", 2),
                "int32": ("i", 4), "int64": ("i", 8), "bool": ("b", 1), "uint16": ("u", 2),
                "uint32": ("u", 4), "uint64": ("u", 8), "complex64": ("c", 8),
                "complex128": ("c", 16), "complex32": ("c", 4),
                **{name: (kind, 1) for name, kind in SMALL_FLOAT_KINDS.items()}}


cdef int _check_dl_device(int dev_type, Py_ssize_t index, object obj,
                          str cpu_hint="") except -1:
    """Accept the DLPack device types a kernel can reach; refuse the rest, naming them.
    ``cpu_hint`` ends the kDLCPU refusal of an array that is not 0-d."""
    if dev_type == DL_CUDA or dev_type == DL_CUDA_HOST or dev_type == DL_CUDA_MANAGED:
        return 0
    if dev_type == DL_CPU:
        # A 0-d array is often meant as a scalar: say how to pass its value instead.
        try:
            zero_d = type(obj).__module__ == "numpy" and obj.ndim == 0
        except Exception:   # a producer's own ndim may raise: the refusal stands without it
            zero_d = False
        hint = "; for a scalar parameter pass its value, e.g. arr[()]" if zero_d else cpu_hint
        raise TypeError(f"{_describe(index, obj)}: {_ON_CPU} (DLPack device kDLCPU){hint}")
    dev_name = _DL_DEVICE_NAMES.get(dev_type, "unknown")
    raise TypeError(f"{_describe(index, obj)}: the memory is on DLPack device {dev_name} "
                    f"({dev_type}), not on a CUDA device; a kernel needs kDLCUDA, kDLCUDAHost "
                    "or kDLCUDAManaged")


cdef const char* _dl_shape_fault(DLTensor* tensor) noexcept:
    """What makes the tensor malformed, or NULL: a negative ndim, no shape array for ndim > 0,
    a negative extent, a null data pointer for a tensor that is not empty, or a byte_offset that
    carries the data pointer past 2**64 (the sum would wrap to a wrong address)."""
    cdef int32_t i
    cdef bint empty = False
    if tensor.ndim < 0:
        return "a negative ndim"
    if tensor.ndim > 0 and tensor.shape == NULL:
        return "ndim > 0 but no shape"
    for i in range(tensor.ndim):
        if tensor.shape[i] < 0:
            return "a negative extent in its shape"
        if tensor.shape[i] == 0:
            empty = True
    if tensor.data == NULL and not empty:
        return "a null data pointer but is not empty"
    if tensor.byte_offset > UINT64_MAX - <uint64_t><uintptr_t>tensor.data:
        return "a byte_offset that carries its data pointer past 2**64"
    return NULL


cdef bint _dl_dense(DLTensor* tensor) noexcept:
    """Whether a well-formed tensor holds two or more elements laid out C-contiguously
    (strides NULL, or each extent's stride the product of the extents after it; extents of 1
    may have any stride)."""
    cdef int32_t i
    cdef int64_t expected = 1
    for i in range(tensor.ndim - 1, -1, -1):
        if tensor.shape[i] != 1:
            if tensor.strides != NULL and tensor.strides[i] != expected:
                return False
            expected *= tensor.shape[i]
    return expected >= 2


cdef int _check_torch_view(object obj, Py_ssize_t index, bint conj, bint neg,
                           LazySection* lazy) except -1:
    """Refuse a torch tensor with the conjugate (``conj``) or negative (``neg``) bit set: its
    memory holds the values before the lazy conjugation or negation, which torch applies only
    when its own operators read the tensor, so a kernel would read the wrong values (torch's
    DLPack C exchange API and data_ptr() both hand out that memory as is). ``lazy``: NULL in
    kernarg's section; else the section, entered before a refusal (torch's own methods touch
    nothing of kernarg's)."""
    if conj and _torch_bit(obj, index, "is_conj", lazy):
        enter_lazily(lazy)
        raise ValueError(f"{_describe(index, obj)}: the tensor is a lazily conjugated view "
                         "(is_conj()): its memory holds the unconjugated values, which a kernel "
                         "would read; pass tensor.resolve_conj(), a conjugated copy")
    if neg and _torch_bit(obj, index, "is_neg", lazy):
        enter_lazily(lazy)
        raise ValueError(f"{_describe(index, obj)}: the tensor is a lazily negated view "
                         "(is_neg(), e.g. .imag of a conjugated tensor): its memory holds the "
                         "values before negation, which a kernel would read; pass "
                         "tensor.resolve_neg(), a negated copy")
    return 0


cdef bint _torch_bit(object obj, Py_ssize_t index, str name, LazySection* lazy) except -1:
    # A torch without the method (before 1.10) cannot make such a view.
    method = getattr(obj, name, None)
    if method is None:
        return False
    try:
        return bool(method())
    except Exception as exc:    # a tensor subclass's __torch_function__, say
        enter_lazily(lazy)
        _reraise(exc, f"{_describe(index, obj)}: {name}() raised {exc_quoted(exc)}")


# DLDataTypeCode -> kind letter: kDLInt, kDLUInt, kDLFloat, kDLOpaqueHandle (none), kDLBfloat,
# kDLComplex, kDLBool.
cdef const char* _DL_KIND_LETTERS = b"iuf_Bcb"

# kDLFloat8_e3m4 (7) ... kDLFloat4_e2m1fn (17), by their formats' names.
cdef bytes _DL_SMALL_FLOATS = "".join([SMALL_FLOAT_KINDS[name] for name in (
    "float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
    "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn",
    "float4_e2m1fn")]).encode()
cdef const char* _DL_SMALL_FLOAT_LETTERS = _DL_SMALL_FLOATS


cdef int _dl_dtype(DLTensor* tensor, PtrResult* r) noexcept:
    # Element kind and size for the typed pointer check. A dtype of several lanes (float32 x2)
    # is no C scalar: kernarg counted its lanes into the size, and so matched double* to
    # float32 x2. That, an opaque handle, sub-byte ints and codes past DLPack 1.1's are
    # DTYPE_OTHER: only pointers that take any memory take them.
    cdef uint8_t code = tensor.dtype.code
    if tensor.dtype.lanes != 1:
        r.dtype_kind = DTYPE_OTHER
        r.dtype_size = 0
    elif tensor.dtype.bits % 8 == 0 and tensor.dtype.bits != 0 and code <= 6 and code != 3:
        r.dtype_kind = _DL_KIND_LETTERS[code]
        r.dtype_size = tensor.dtype.bits // 8
    elif 7 <= code <= 17:
        r.dtype_kind = _DL_SMALL_FLOAT_LETTERS[code - 7]
        r.dtype_size = 1
    else:
        r.dtype_kind = DTYPE_OTHER
        r.dtype_size = 0
    return 0


cdef str _DLPACK_METHOD = "__dlpack__"
cdef tuple _KW_STREAM_MAX_VERSION = ("stream", "max_version")
cdef tuple _KW_STREAM = ("stream",)
cdef tuple _MAX_VERSION = DLPACK_MAX_VERSION


cdef inline object _dlpack_vcall(object obj, object stream, tuple kwnames):
    # One vectorcall with the keyword names prebuilt: Cython 3.0 would build a kwargs dict per
    # call (3.1+ vectorcalls too), and this is the hottest line of the DLPack path.
    cdef PyObject* argv[3]
    argv[0] = <PyObject*>obj
    argv[1] = <PyObject*>stream
    argv[2] = <PyObject*>_MAX_VERSION
    return PyObject_VectorcallMethod(_DLPACK_METHOD, argv, 1,
                                     NULL if kwnames is None else <PyObject*>kwnames)


cdef object _call_dlpack(object obj, object stream, Py_ssize_t index):
    # Spec: consumers pass stream= and max_version=; older producers accept only stream=, or
    # nothing at all, and say so with TypeError.
    try:
        try:
            return _dlpack_vcall(obj, stream, _KW_STREAM_MAX_VERSION)
        except TypeError:
            try:
                return _dlpack_vcall(obj, stream, _KW_STREAM)
            except TypeError:
                return _dlpack_vcall(obj, stream, None)
    except Exception as exc:
        _reraise(exc, f"{_describe(index, obj)}: __dlpack__() raised {exc_quoted(exc)}")


cdef int _consume_dlpack(object obj, Py_ssize_t index, uint64_t stream, PtrResult* r) except -1:
    cdef DLManagedTensorVersioned* mtv = NULL
    cdef DLManagedTensor* mt = NULL
    cdef kernarg_section cs
    cdef DLTensor* tensor
    cdef const char* name
    cdef int dev_type, dev_id
    try:
        device = obj.__dlpack_device__()
    except Exception as exc:
        if mro_has(type(obj), "jax.", "Tracer"):
            # What a jitted (vmapped, differentiated) function holds in place of its arrays:
            # it speaks DLPack only by name, and has no memory before JAX runs the function.
            raise TypeError(f"{_describe(index, obj)}: a JAX tracer, not an array: inside "
                            "jax.jit, vmap or grad the arrays have no memory yet, so no kernel "
                            "can take them; launch outside the traced function, or call the "
                            "kernel through jax.ffi") from exc
        _reraise(exc, f"{_describe(index, obj)}: __dlpack_device__() raised "
                      f"{exc_quoted(exc)}")
    try:
        dev_type = device[0]
        dev_id = device[1]
    except Exception:
        raise TypeError(f"{_describe(index, obj)}: __dlpack_device__() returned "
                        f"{shown_value(device, True)}, "
                        "expected "
                        "(device_type, device_id)") from None
    _check_dl_device(dev_type, index, obj)
    # The launch stream as an int object, made here only: the NULL stream (handle 0) as the
    # default stream it is, never 0, which DLPack forbids. Pinned host memory (kDLCUDAHost) is
    # given None: the Python specification accepts only None "on CPU and other device types
    # without streams", and producers of pinned memory hold it so (torch's __dlpack__ refuses
    # a stream for a pinned tensor, whose device is the CPU; torch's own from_dlpack passes a
    # stream only for CUDA and ROCm devices).
    capsule = _call_dlpack(obj, dlpack_stream(stream) if dev_type != DL_CUDA_HOST else None,
                           index)
    if not PyCapsule_CheckExact(capsule):
        raise TypeError(f"{_describe(index, obj)}: __dlpack__() returned "
                        f"{type(capsule).__name__}, not a "
                        "PyCapsule")
    # Renaming transfers ownership: from then on kernarg must call the deleter, once. The
    # check and the rename are one step under the capsule's own lock (a free-threaded build),
    # so that of two threads handed one capsule (a producer's bug), one takes it and the other
    # finds it used.
    kernarg_object_lock(&cs, <PyObject*>capsule)
    try:
        if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
            mtv = <DLManagedTensorVersioned*>PyCapsule_GetPointer(capsule,
                                                                  b"dltensor_versioned")
            PyCapsule_SetName(capsule, b"used_dltensor_versioned")
        elif PyCapsule_IsValid(capsule, b"dltensor"):
            mt = <DLManagedTensor*>PyCapsule_GetPointer(capsule, b"dltensor")
            PyCapsule_SetName(capsule, b"used_dltensor")
    finally:
        kernarg_object_unlock(&cs)
    if mtv != NULL:
        if mtv.version.major != 1:
            major, minor = mtv.version.major, mtv.version.minor
            release_capsule(capsule)
            capsule = None   # let it go before raising: destructors then run error-free
            raise BufferError(f"{_describe(index, obj)}: DLPack version {major}.{minor} is not "
                              "supported "
                              f"(kernarg reads 1.x)")
        tensor = &mtv.dl_tensor
        r.readonly = (mtv.flags & DLPACK_FLAG_READ_ONLY) != 0
        r.copied = (mtv.flags & DLPACK_FLAG_IS_COPIED) != 0
    elif mt != NULL:
        tensor = &mt.dl_tensor
    else:
        name = PyCapsule_GetName(capsule)
        shown = "NULL" if name == NULL else repr(name.decode("utf-8", "replace"))
        raise TypeError(f"{_describe(index, obj)}: __dlpack__() returned a capsule named "
                        f"{shown}, not an "
                        "unconsumed 'dltensor' or 'dltensor_versioned'")
    # The device type inside the tensor is not trusted: __dlpack_device__ decided above.
    cdef const char* fault = _dl_shape_fault(tensor)
    if fault != NULL:
        release_capsule(capsule)
        capsule = None
        raise ValueError(f"{_describe(index, obj)}: DLPack tensor has "
                         f"{fault.decode()}")
    r.ptr = <uint64_t><uintptr_t>tensor.data + tensor.byte_offset
    if dev_type == DL_CUDA:
        r.device = dev_id
    _dl_dtype(tensor, r)
    Py_INCREF(capsule)
    r.capsule = <PyObject*>capsule
    return 0


cdef int release_capsule(object capsule) except -1:
    """Run the deleter of a capsule consumed by ``_consume_dlpack``. The caller owns the capsule
    and calls this exactly once. The name stays ``used_...``: producers' capsule destructors
    look for exactly that name to know the consumer took ownership."""
    cdef const char* name = PyCapsule_GetName(capsule)
    cdef void* p
    if name == NULL:
        return 0
    if strcmp(name, b"used_dltensor_versioned") == 0:
        p = PyCapsule_GetPointer(capsule, name)
        if p != NULL and (<DLManagedTensorVersioned*>p).deleter != NULL:
            (<DLManagedTensorVersioned*>p).deleter(<DLManagedTensorVersioned*>p)
    elif strcmp(name, b"used_dltensor") == 0:
        p = PyCapsule_GetPointer(capsule, name)
        if p != NULL and (<DLManagedTensor*>p).deleter != NULL:
            (<DLManagedTensor*>p).deleter(<DLManagedTensor*>p)
    return 0


cdef int _raise_pending() except -1:
    return -1   # a C function left a Python exception set: let it propagate from here


cdef int _exchange_failed(Py_ssize_t index, object obj, str function,
                          bint torch_tensor) except -1:
    # Take the producer's exception first: no Python code may run while one is pending.
    cdef bint pending = PyErr_Occurred() != NULL
    error = None
    if pending:
        try:
            _raise_pending()
        except Exception as exc:
            error = exc
    if torch_tensor:
        # A tensor on meta, mps, ...: refused as the adapter refuses it, in kernarg's words.
        try:
            refusal = _torch_device_refusal(obj, index, str(obj.device))
        except Exception:
            refusal = None  # a subclass whose device raises: the producer's error stands
        if refusal is not None:
            raise refusal from error
    what = f"{_describe(index, obj)}: the producer's DLPack C exchange API ({function})"
    if error is None:
        raise RuntimeError(f"{what} failed without setting an exception")
    # Keep the first line: C++ producers append a whole backtrace (it stays in __cause__).
    first = exc_text(error).partition("\n")[0]
    _reraise(error, f"{what} raised {type(error).__name__}: {first}")
    return -1


cdef int _exchange_pointer(const DLPackExchangeAPI* api, object obj, Py_ssize_t index,
                           PtrResult* r, bint torch_tensor, LazySection* lazy) except -1:
    """Read a pointer through the DLPack C exchange API: a non-owning DLTensor view (the
    argument object, which the block holds, keeps the memory alive), no capsule, no
    allocation. The calls do not synchronise, so the producer's current work stream on the
    device is recorded for the launch to wait on, as for CUDA Array Interface v3.

    ``lazy``: NULL where the caller holds kernarg's section; else (pointer_of) the
    section to enter before anything but the usual tensor: the producer's two C calls, and
    kernarg's reading of what they wrote, touch nothing of kernarg's but ``r``, nor do the
    torch tensor's is_conj() and is_neg(). A failure, a malformed tensor, a refused view and
    memory on a device other than kDLCUDA enter it first."""
    cdef DLTensor tensor
    cdef void* work_stream = NULL
    memset(&tensor, 0, sizeof(tensor))
    if api.dltensor_from_py_object_no_sync(<void*>obj, &tensor) != 0:
        enter_lazily(lazy)
        return _exchange_failed(index, obj, "dltensor_from_py_object_no_sync", torch_tensor)
    cdef const char* fault = _dl_shape_fault(&tensor)
    if fault != NULL:
        enter_lazily(lazy)
        raise ValueError(f"{_describe(index, obj)}: the DLPack C exchange API gave a tensor "
                         f"with {fault.decode()}")
    if tensor.device.device_type != DL_CUDA:
        enter_lazily(lazy)
    if torch_tensor:
        # Only a complex tensor can carry the conjugate bit; the negative bit comes from .imag
        # of a conjugated one, a view whose strides skip every other element, which no view
        # operation but as_strided makes dense (the one gap, in the README's foreign-array
        # rules). A dense real tensor of two or more elements (most arguments) needs no Python
        # call.
        if tensor.dtype.code == DL_COMPLEX:
            _check_torch_view(obj, index, True, True, lazy)
        elif not _dl_dense(&tensor):
            _check_torch_view(obj, index, False, True, lazy)
    if tensor.device.device_type == DL_CPU and _says_pinned(obj, torch_tensor):
        tensor.device.device_type = DL_CUDA_HOST
    _check_dl_device(tensor.device.device_type, index, obj)
    r.ptr = <uint64_t><uintptr_t>tensor.data + tensor.byte_offset
    _dl_dtype(&tensor, r)
    if tensor.device.device_type == DL_CUDA:
        # Pinned and managed memory has no device of its own to ask about.
        r.device = tensor.device.device_id
        if api.current_work_stream(DL_CUDA, tensor.device.device_id, &work_stream) != 0:
            enter_lazily(lazy)
            return _exchange_failed(index, obj, "current_work_stream", False)
        _record_stream_handle(<uint64_t><uintptr_t>work_stream, r)
    return 0


cdef bint _says_pinned(object obj, bint torch_tensor):
    """Whether the producer calls the memory of ``obj``, which its C exchange API put on the CPU
    (kDLCPU), pinned (kDLCUDAHost). torch's C exchange API gives a pinned CPU tensor the device
    kDLCPU (ATen maps a device, not an allocation), while its ``__dlpack_device__`` says
    kDLCUDAHost: a kernel can use that memory (pinned host memory is mapped at the same address
    on the device), so the C answer is checked before the argument is refused. A torch tensor
    is asked ``is_pinned()``, the question torch's ``__dlpack_device__`` asks, without the rest
    of that Python method (its import, device object and enum: ~1.1 us of its ~1.2 us on a CPU
    build of torch 2.13), which a pinned tensor pays on every pack; other types are asked
    ``__dlpack_device__()``. An answer that raises, or is not a plain yes, changes nothing:
    the argument is refused as CPU memory."""
    try:
        if torch_tensor:
            return obj.is_pinned() is True
        device = obj.__dlpack_device__()
        return isinstance(device, tuple) and len(device) == 2 and device[0] == DL_CUDA_HOST
    except Exception:
        return False


cdef int confirm_device(object obj) except -2:
    # A StridedMemoryView with __dlpack_device__ says its DLPack device itself; an older one,
    # a view of a DLPack producer or of a Buffer (from_buffer), can ask its exporter, whose
    # answer is the view's. A view with neither (of a CUDA Array Interface object) is not
    # refused. (Views of a cuda.core with the DLPack C exchange API never come here.)
    try:
        source = obj
        if not hasattr(obj, "__dlpack_device__"):
            source = getattr(obj, "exporting_obj", None)
        device = source.__dlpack_device__()
        if (isinstance(device, tuple) and len(device) == 2 and device[0] == DL_CUDA
                and isinstance(device[1], int) and 0 <= device[1] <= 0x7fffffff):
            return int(device[1])
    except Exception:   # no answer, or an odd one, refuses nothing (as before the check);
        pass            # an interrupt (KeyboardInterrupt...) propagates
    return -1


cdef inline void _record_stream_handle(uint64_t h, PtrResult* r) noexcept:
    # Library adapters stand in for the CUDA Array Interface, whose v3 export names the
    # producer's current stream; record the same so the launch waits on it.
    r.has_stream = True
    r.stream = h if h != 0 else 1   # handle 0 is the legacy default stream


cdef int _record_current_stream(object handle, PtrResult* r, str source) except -1:
    """Record the stream handle a library gave (``source`` says whose, for errors): an int, or
    an object with ``__index__``, in 0 .. 2**64-1. A bool, a float or a string is refused, not
    read by int() as another stream (1.5 as the legacy default stream 1)."""
    cdef long long fast
    if type(handle) is int and kernarg_small_int(<PyObject*>handle, &fast) and fast >= 0:
        _record_stream_handle(<uint64_t>fast, r)
        return 0
    if type(handle) is bool or is_numpy_bool(type(handle)):
        raise TypeError(f"{source} is {type(handle).__name__}, expected an int stream handle")
    try:
        number = PyNumber_Index(handle)
    except TypeError:
        raise TypeError(f"{source} is {type(handle).__name__}, expected an int stream "
                        "handle") from None
    if not 0 <= number < 2**64:
        raise OverflowError(f"{source} is {shown_value(number)}, outside 0 .. 2**64-1")
    _record_stream_handle(<uint64_t>number, r)
    return 0


# What the adapters need from each library, looked up once, the first time an adapter runs
# (the library is imported by then: its array is in hand).
cdef object _torch_stream_of = None         # device index -> torch's current stream handle
cdef object _cupy_stream_ptr = None         # () -> CuPy's current stream handle
cdef object _cupy_managed = None            # cupy.cuda.memory.ManagedMemory
# Set (KERNARG_STORE_RELEASE, in kernarg's section) once the lookups above are done, and read
# first (KERNARG_LOAD_ACQUIRE) by an adapter that may run outside it (a free-threaded build):
# what they looked up is never written again, nor freed.
cdef int _torch_looked_up = 0
cdef int _cupy_looked_up = 0

# CuPy's own C function for its current stream handle: cupy.cuda.stream's Cython C API
# (__pyx_capi__) exports it as a capsule whose name is its C signature. Calling it costs no
# Python call and no Stream object; a capsule of any other name (a changed signature) is
# not touched, and the Python route is used instead.
ctypedef intptr_t (*_intptr_void_fn)() noexcept
cdef _intptr_void_fn _cupy_stream_fn = NULL
cdef const char* _CUPY_STREAM_FN_SIGNATURE = b"intptr_t (void)"


cdef int _torch_pointer(object obj, Py_ssize_t index, PtrResult* r, bint want_dtype,
                        LazySection* lazy) except -1:
    # torch without the DLPack C exchange API (before 2.10).
    cdef bint cuda = obj.is_cuda
    if not cuda:
        # A pinned CPU tensor is host memory a kernel can reach (torch's own DLPack export
        # says kDLCUDAHost): its address, on no device, and no stream (torch's CUDA Array
        # Interface refuses CPU tensors, and its __dlpack__ synchronises none).
        where = str(obj.device)
        refusal = _torch_device_refusal(obj, index, where)
        if refusal is not None:
            raise refusal
        if not obj.is_pinned():
            raise TypeError(f"{_describe(index, obj)}: {_ON_CPU} (torch device {where})")
    _check_torch_view(obj, index, True, True, lazy)
    _set_address(obj.data_ptr(), index, obj, "data_ptr()", r)
    if want_dtype:
        _set_dtype(obj.dtype, &_torch_dtypes, _torch_dtype_kinds, _torch_dtype_kind, r, lazy)
    if not cuda:
        return 0
    cdef int device = obj.get_device()
    r.device = device
    if not load_acquire_int(_torch_looked_up):
        _torch_lookup(lazy)
    _record_current_stream(_torch_stream_of(device), r, "torch's current stream")
    return 0


cdef int _torch_lookup(LazySection* lazy) except -1:
    global _torch_stream_of, _torch_looked_up
    enter_lazily(lazy)
    if not _torch_looked_up:
        _torch_stream_of = _torch_stream_reader(sys.modules["torch"])
        store_release_int(_torch_looked_up, 1)
    return 0


cdef tuple _torch_dtype_kind(object dtype):
    """(kind, size) of a torch dtype, read from its name (torch.float32 -> "float32"); a dtype
    no C scalar names (quantized, sub-byte, bits) DTYPE_OTHER: only pointers that take any
    memory take it. Read once per dtype object (_dtype_entry): str() of it cost ~110 ns a pack."""
    kind = _TORCH_KINDS.get(str(dtype).rpartition(".")[2])
    return (DTYPE_OTHER, 0) if kind is None else (ord(kind[0]), kind[1])


def _torch_stream_reader(torch):
    """A function of a device index giving torch's current stream handle there, as an int.
    ``torch._C._cuda_getCurrentRawStream`` (CUDA builds; the code torch.compile generates calls
    it for every kernel) is one C call; ``torch.cuda.current_stream(device).cuda_stream``, the
    public route and the fallback, builds a ``torch.cuda.Stream`` in Python for the same handle
    (both read ``at::cuda::getCurrentCUDAStream(device)``)."""
    raw = getattr(getattr(torch, "_C", None), "_cuda_getCurrentRawStream", None)
    if callable(raw):
        return raw
    current_stream = torch.cuda.current_stream
    return lambda device: current_stream(device).cuda_stream


cdef object _torch_device_refusal(object obj, Py_ssize_t index, str where):
    """The TypeError refusing a tensor on torch device ``where`` (``str(obj.device)``) that is
    neither CUDA nor the CPU (meta, mps, xpu, ...: no memory a kernel can reach), else None."""
    if where.partition(":")[0] in ("cpu", "cuda"):
        return None
    return TypeError(f"{_describe(index, obj)}: the tensor is on torch device {where}, "
                     "not on a CUDA device or in pinned host memory")


cdef object _cupy_current_stream_ptr():
    return sys.modules["cupy"].cuda.get_current_stream().ptr


cdef int _cupy_lookup(LazySection* lazy) except -1:
    global _cupy_stream_ptr, _cupy_managed, _cupy_stream_fn, _cupy_looked_up
    enter_lazily(lazy)
    if _cupy_looked_up:
        return 0
    cuda = sys.modules["cupy"].cuda
    _cupy_managed = getattr(getattr(cuda, "memory", None), "ManagedMemory", None)
    stream_module = getattr(cuda, "stream", None)
    capi = getattr(stream_module, "__pyx_capi__", None)
    capsule = capi.get("get_current_stream_ptr") if type(capi) is dict else None
    if capsule is not None and PyCapsule_IsValid(capsule, _CUPY_STREAM_FN_SIGNATURE):
        _cupy_stream_fn = <_intptr_void_fn>PyCapsule_GetPointer(capsule,
                                                                _CUPY_STREAM_FN_SIGNATURE)
    # A Python-level get_current_stream_ptr (CuPy 14 has none; a stand-in may) returns the
    # handle without a Stream object; otherwise the Stream's .ptr.
    _cupy_stream_ptr = getattr(stream_module, "get_current_stream_ptr",
                               None) or _cupy_current_stream_ptr
    store_release_int(_cupy_looked_up, 1)
    return 0


cdef int _cupy_call_stream_fn(intptr_t* handle) except -1:
    handle[0] = _cupy_stream_fn()
    # Cython C functions report an exception by leaving it set (with or without a sentinel
    # return value, depending on how CuPy was compiled): look for it either way.
    return -1 if PyErr_Occurred() != NULL else 0


cdef int _cupy_record_stream(object obj, Py_ssize_t index, PtrResult* r) except -1:
    cdef intptr_t handle = 0
    if _cupy_stream_fn == NULL:
        return _record_current_stream(_cupy_stream_ptr(), r, "CuPy's current stream")
    try:
        _cupy_call_stream_fn(&handle)
    except Exception as exc:
        _reraise(exc, f"{_describe(index, obj)}: CuPy's current stream could not be read: "
                      f"{exc_quoted(exc)}")
    _record_stream_handle(<uint64_t>handle, r)
    return 0


cdef int _cupy_memory(object memptr, object obj, Py_ssize_t index, str source,
                      PtrResult* r, LazySection* lazy) except -1:
    # A cupy.cuda.MemoryPointer: its address, and its device unless its memory is managed
    # (reachable from any device).
    if not load_acquire_int(_cupy_looked_up):
        _cupy_lookup(lazy)
    _set_address(memptr.ptr, index, obj, source, r)
    if _cupy_managed is None or not isinstance(memptr.mem, _cupy_managed):
        r.device = memptr.device_id
    return 0


cdef int _cupy_pointer(object obj, Py_ssize_t index, PtrResult* r, bint want_dtype,
                       LazySection* lazy) except -1:
    _cupy_memory(obj.data, obj, index, "data.ptr", r, lazy)
    if want_dtype:
        _set_dtype_from_numpy(obj.dtype, r, lazy)
    return _cupy_record_stream(obj, index, r)


def _cupy_stream_route(int calls=0):
    """For the GPU breakdown benchmark (CuPy imported): which route the CuPy adapter reads
    CuPy's current stream by -- ``"C API"`` (the function in cupy.cuda.stream's __pyx_capi__)
    or ``"Python"`` -- and, when ``calls`` > 0 and the route is the C API, the time of
    ``calls`` calls of that function in a C loop (seconds), i.e. CuPy's own cost of the
    lookup without any Python call."""
    cdef intptr_t handle = 0
    cdef Py_ssize_t _i
    if not _cupy_looked_up:
        _cupy_lookup(NULL)
    if _cupy_stream_fn == NULL:
        return "Python", None
    if calls <= 0:
        return "C API", None
    t0 = time.perf_counter()
    for _i in range(calls):
        _cupy_call_stream_fn(&handle)
    return "C API", time.perf_counter() - t0


cdef int _numba_pointer(object obj, Py_ssize_t index, PtrResult* r, bint want_dtype,
                        LazySection* lazy) except -1:
    address = obj.device_ctypes_pointer.value
    _set_address(0 if address is None else address, index, obj, "device_ctypes_pointer", r)
    if want_dtype:
        _set_dtype_from_numpy(obj.dtype, r, lazy)
    stream = getattr(obj, "stream", 0)
    if stream:
        handle = stream.handle
        _record_current_stream(getattr(handle, "value", handle) or 0, r,
                               "the array's stream handle")
    return 0


cdef int _smv_pointer(object obj, Py_ssize_t index, PtrResult* r, bint want_dtype,
                      LazySection* lazy) except -1:
    if not obj.is_device_accessible:
        raise TypeError(f"{_describe(index, obj)}: {_ON_CPU} (StridedMemoryView is not device "
                        "accessible)")
    _set_address(obj.ptr, index, obj, "StridedMemoryView.ptr", r)
    r.readonly = bool(obj.readonly)
    # device_id is the GPU for device memory, but pinned and managed views carry an id too (0
    # from DLPack, a buffer's device): a mismatch is confirmed before it refuses anything.
    device = getattr(obj, "device_id", -1)
    if type(device) is int and 0 <= device <= 0x7fffffff:
        r.device = device
        r.device_unconfirmed = True
    if want_dtype:
        _set_dtype_from_numpy(getattr(obj, "dtype", None), r, lazy)
    return 0


# JAX. jaxlib's own __cuda_array_interface__ (version 2: no stream, read-only) takes its pointer
# from PJRT's AcquireExternalReference, and so does unsafe_buffer_pointer(): the adapter reads
# the same address with the same promise about readiness, without building the dict. Where the
# memory is comes from the array's sharding: one device, its platform and its memory kind.
# Shardings are immutable, and arrays from one computation often share one: the last sharding
# accepted is kept with its answer (a strong reference, compared by identity), written in
# kernarg's section under a sequence lock so that a reader outside it (a free-threaded build)
# never pairs a sharding with another's answer.
cdef struct JaxLast:
    unsigned seq
    PyObject* sharding      # strong reference, or NULL
    int ordinal             # its CUDA device ordinal, or -1 for pinned host memory

cdef JaxLast _jax_last


cdef int _jax_ordinal(object sharding, Py_ssize_t index, object obj) except -2:
    """The CUDA device ordinal of a single-device sharding's memory, -1 for pinned host memory;
    refuses CPU, non-CUDA and multi-device arrays, naming the argument."""
    device = getattr(sharding, "_device", None)         # SingleDeviceSharding
    if device is None:
        devices = sharding.device_set
        if len(devices) != 1:
            raise ValueError(f"{_describe(index, obj)}: the JAX array is sharded over "
                             f"{len(devices)} devices; a kernel takes one device's memory: "
                             "pass one shard (x.addressable_shards[i].data)")
        device = next(iter(devices))
    platform = device.platform
    if platform == "cpu":
        raise TypeError(f"{_describe(index, obj)}: {_ON_CPU} (JAX device {device})")
    client = str(getattr(getattr(device, "client", None), "platform", platform))
    if platform not in ("gpu", "cuda") or client not in ("gpu", "cuda"):
        raise TypeError(f"{_describe(index, obj)}: the JAX array is on {device} (platform "
                        f"{client}), not on a CUDA device")
    kind = sharding.memory_kind
    if kind == "pinned_host":
        return -1
    if kind is not None and kind != "device":
        raise TypeError(f"{_describe(index, obj)}: {_ON_CPU} (JAX memory kind {kind!r})")
    ordinal = getattr(device, "local_hardware_id", None)   # the CUDA ordinal; .id is JAX's
    return device.id if ordinal is None else ordinal


cdef int _jax_pointer(object obj, Py_ssize_t index, uint64_t stream, PtrResult* r,
                      bint want_dtype, LazySection* lazy) except -1:
    cdef int ordinal = -1
    cdef unsigned begun
    cdef bint hit
    cdef PyObject* old
    try:
        sharding = obj.sharding
        begun = kernarg_seq_begin(&_jax_last.seq)
        hit = load_object(_jax_last.sharding) == <PyObject*>sharding
        ordinal = load_int(_jax_last.ordinal)
        if not (hit and kernarg_seq_valid(&_jax_last.seq, begun)):
            enter_lazily(lazy)
            ordinal = _jax_ordinal(sharding, index, obj)
            old = _jax_last.sharding
            Py_INCREF(sharding)
            kernarg_seq_write_begin(&_jax_last.seq)
            store_object(_jax_last.sharding, <PyObject*>sharding)
            store_int(_jax_last.ordinal, ordinal)
            kernarg_seq_write_end(&_jax_last.seq)
            Py_XDECREF(old)
    except AttributeError:
        # A JAX whose arrays or devices lack what is read above: its protocols decide.
        return _consume_dlpack(obj, index, stream, r)
    except Exception as exc:
        enter_lazily(lazy)
        if exc_text(exc).startswith(_describe(index, obj)):      # kernarg's own refusals
            raise
        _reraise(exc, f"{_describe(index, obj)}: reading the JAX array's sharding raised "
                      f"{exc_quoted(exc)}")
    # _address_from's call-and-name, written out: through it, the method would cost a Python
    # function call more per argument.
    try:
        address = obj.unsafe_buffer_pointer()
    except Exception as exc:        # a deleted or donated array, for one
        _reraise(exc, f"{_describe(index, obj)}: unsafe_buffer_pointer() raised "
                      f"{exc_quoted(exc)}")
    _set_address(address, index, obj, "unsafe_buffer_pointer()", r)
    r.readonly = True               # JAX arrays are immutable (its CAI says read-only too)
    r.device = ordinal
    if want_dtype:
        _set_dtype_from_numpy(obj.dtype, r, lazy)
    return 0


# numpy arrays over pinned host memory. A numpy array is host memory, which a kernel cannot
# read, unless CUDA's allocator page-locked it (cuMemHostAlloc / cudaHostAlloc): such memory is
# reachable from every device at its host address (the driver API's "Unified Addressing",
# automatic in 64-bit processes). numpy does not know who allocated its memory; the object it
# came from does. numpy points a view's .base at the array that holds the memory, and that
# array's .base at the object that exported it (a memoryview's .obj is the exporter behind it),
# so a short walk finds the allocation. Memory registered with cuMemHostRegister is not taken:
# on some systems its device address differs from its host address.
cdef enum:
    _BASE_WALK_LIMIT = 64       # deeper than any real chain; a cycle cannot loop for ever

_NUMPY_PINNED_HINT = (
    "; a numpy array is taken only over pinned memory from CUDA's allocator "
    "(cupyx.empty_pinned, numba.cuda.pinned_array, pycuda.driver.pagelocked_empty, "
    "a pinned torch tensor's .numpy(), numpy.from_dlpack of a pinned or managed buffer)")


# What an exporter's type says about its memory, found by module and name once per type (the
# lookups cost more than the rest of the argument) and kept in _exporter_kinds.
cdef enum:
    _EXPORTER_PAGEABLE = 0   # anything not below: host memory no kernel can read
    _EXPORTER_PINNED         # page-locked by its allocator, whatever the instance
    _EXPORTER_NUMBA_PINNED   # numba PinnedMemory: pinned_array's, or mempin's (registered)
    _EXPORTER_TORCH          # torch Tensor: pinned if is_pinned()
    _EXPORTER_STRIDE_TRICKS  # numpy's DummyArray: the memory is its .base's

cdef enum:
    _EXPORTER_KINDS_MAX = 64    # types remembered (then forgotten all at once)

# Read with no section on a free-threaded build (the dict's own lock makes each get, set and
# clear whole, and its values are small ints, which are immortal); written in the section.
cdef dict _exporter_kinds = {}


cdef int _exporter_kind(type t, LazySection* lazy) except -1:
    kind = _exporter_kinds.get(t)
    if kind is not None:
        return kind
    enter_lazily(lazy)
    if (mro_has(t, "cupy", "PinnedMemoryPointer")          # cupyx.empty_pinned, zeros_pinned
            or mro_has(t, "pycuda", "PagelockedHostAllocation")    # pagelocked_empty
            or mro_has(t, "numba", "MappedOwnedPointer")):  # memhostalloc(mapped=True)
        kind = _EXPORTER_PINNED
    elif mro_has(t, "numba", "PinnedMemory"):
        kind = _EXPORTER_NUMBA_PINNED
    elif mro_has(t, "torch", "Tensor"):                     # tensor.numpy()
        kind = _EXPORTER_TORCH
    elif mro_has(t, "numpy.lib", "DummyArray"):
        # as_strided and sliding_window_view build their array from an object that carries
        # the original array's __array_interface__ and keeps it as .base.
        kind = _EXPORTER_STRIDE_TRICKS
    else:
        kind = _EXPORTER_PAGEABLE
    if len(_exporter_kinds) >= _EXPORTER_KINDS_MAX:
        _exporter_kinds.clear()
    _exporter_kinds[t] = kind
    return kind


cdef int _array_memory(object arr, Py_ssize_t index, LazySection* lazy) except -1:
    """What memory a numpy array is over, as a DLPack device type: DL_CUDA_HOST for memory
    page-locked by CUDA's allocator, the device numpy.from_dlpack was given, else DL_CPU.
    The object the memory comes from is found down .base, past arrays, memoryviews and numpy's
    stride-tricks wrappers; an array that owns its memory (no base) is pageable. ``lazy`` is
    entered for an exporter type not yet known (the owner's is_pinned() runs without it)."""
    cdef int kind = -1      # the owner's exporter kind, once looked up
    owner = arr.base
    for _ in range(_BASE_WALK_LIMIT):
        if isinstance(owner, _ndarray_type):
            owner = (<object>owner).base
        elif type(owner) is memoryview:
            try:
                owner = (<object>owner).obj
            except ValueError:
                # Released (memoryview.release()): it no longer holds the exporter, and
                # nothing says the memory is still there.
                raise ValueError(f"{_describe(index, arr)}: the memoryview the array's memory "
                                 "comes from has been released; its memory may be gone") from None
        elif owner is None or PyCapsule_CheckExact(owner):
            break
        else:
            kind = _exporter_kind(type(owner), lazy)
            if kind != _EXPORTER_STRIDE_TRICKS:
                break
            owner = owner.base
            kind = -1
    # The walk's end (or what it reached after _BASE_WALK_LIMIT steps) decides.
    if owner is None:
        return DL_CPU
    if PyCapsule_CheckExact(owner):
        return _numpy_capsule_device(owner)
    if kind < 0:
        kind = _exporter_kind(type(owner), lazy)
    if kind == _EXPORTER_PINNED:
        return DL_CUDA_HOST
    try:
        if kind == _EXPORTER_NUMBA_PINNED:
            # numba.cuda.pinned_array's memhostalloc; mempin's registered memory records the
            # array it pinned as its owner.
            return DL_CUDA_HOST if getattr(owner, "owned", None) is None else DL_CPU
        if kind == _EXPORTER_TORCH:
            return DL_CUDA_HOST if owner.is_pinned() else DL_CPU
    except Exception as exc:
        _reraise(exc, f"{_describe(index, arr)}: asking the {_type_name(type(owner))} that "
                      f"holds the array's memory whether it is pinned raised "
                      f"{exc_quoted(exc)}")
    return DL_CPU


cdef int _numpy_capsule_device(object capsule) except -1:
    # numpy.from_dlpack keeps the producer's tensor in a capsule named by numpy (its dlpack.h),
    # which holds the device the producer said: numpy takes kDLCUDAHost and kDLCUDAManaged
    # memory as host memory. A capsule of any other name says nothing: DL_CPU.
    if PyCapsule_IsValid(capsule, b"numpy_dltensor_versioned"):
        return (<DLManagedTensorVersioned*>PyCapsule_GetPointer(
            capsule, b"numpy_dltensor_versioned")).dl_tensor.device.device_type
    if PyCapsule_IsValid(capsule, b"numpy_dltensor"):
        return (<DLManagedTensor*>PyCapsule_GetPointer(
            capsule, b"numpy_dltensor")).dl_tensor.device.device_type
    return DL_CPU


cdef int _ndarray_pointer(object obj, Py_ssize_t index, PtrResult* r,
                          bint want_dtype, LazySection* lazy) except -1:
    if type(obj) is not _ndarray_type and mro_has(type(obj), "numpy.ma", "MaskedArray"):
        raise TypeError(f"{_describe(index, obj)}: a masked array is not taken: a kernel would "
                        "read the masked elements as data; pass arr.filled(value) or, for the "
                        "raw memory, arr.data")
    cdef int device = _array_memory(obj, index, lazy)
    if device != DL_CUDA_HOST and device != DL_CUDA_MANAGED:
        # kDLCPU, refused with the pinned allocators as the hint, or another host device
        # numpy.from_dlpack took (kDLROCMHost), named. (numpy refuses kDLCUDA, the one other
        # device _check_dl_device would let pass.)
        _check_dl_device(device, index, obj, _NUMPY_PINNED_HINT)
    # The data address and writability through the buffer protocol, in C: without
    # PyBUF_FORMAT numpy describes no dtype, so arrays of every dtype export (numpy >= 1.20
    # builds the format only when asked), and numpy keeps the strides with the array.
    cdef Py_buffer view
    try:
        PyObject_GetBuffer(obj, &view, PyBUF_STRIDES)
    except Exception as exc:    # an ndarray subclass's own __buffer__ (Python >= 3.12)
        _reraise(exc, f"{_describe(index, obj)}: the array's buffer could not be read: "
                      f"{exc_quoted(exc)}")
    r.ptr = <uint64_t><uintptr_t>view.buf
    r.readonly = view.readonly
    PyBuffer_Release(&view)
    if want_dtype:
        _set_dtype_from_numpy(obj.dtype, r, lazy)
    return 0


cdef int _address_from(object fn, object obj, Py_ssize_t index, str what, str source,
                       PtrResult* r) except -1:
    """The address ``fn(obj)`` gives, for code that is not kernarg's and may raise (a
    registered function; PyCUDA's int(), which for a PointerHolderBase subclass runs the
    user's get_pointer()): its exceptions name the argument and ``what`` raised. ``fn`` is
    called as given, no reference of its own taken (a Cython call takes one, which threads
    calling one registered function make each other wait on)."""
    try:
        address = PyObject_CallOneArg(fn, obj)
    except Exception as exc:
        _reraise(exc, f"{_describe(index, obj)}: {what} raised {exc_quoted(exc)}")
    return _set_address(address, index, obj, source, r)


# cuda.core Buffer: where its memory is. A buffer's memory resource says (a property of the
# resource, the same for all its buffers): device accessible or not, host accessible (pinned),
# managed, and the device. Buffers of one resource usually come in runs, so the last resource
# read is remembered with its answer, by address: a weak reference whose callback forgets the
# address when the resource goes, before its memory can be reused, so the cache keeps no
# resource (and no memory pool) alive. Resources without weak references are read every time.
cdef MrCache _last_mr
_last_mr.mr = NULL
_last_mr.device = -1
cdef object _last_mr_ref = None


cdef MrCache* mr_cache() noexcept:
    return &_last_mr


def _forget_mr(ref):
    global _last_mr_ref
    if ref is _last_mr_ref:
        kernarg_seq_write_begin(&_last_mr.seq)
        store_object(_last_mr.mr, NULL)
        kernarg_seq_write_end(&_last_mr.seq)
        _last_mr_ref = None


cdef int _mr_device(object mr, Py_ssize_t index, object buf) except -2:
    cdef bint device_ok = False     # set before any use; _reraise always raises
    try:
        device_ok = mr.is_device_accessible
        device = -1 if mr.is_host_accessible or getattr(mr, "is_managed", False) \
            else mr.device_id
    except Exception as exc:        # a property, or the truth of what it gave, raised
        _reraise(exc, f"{_describe(index, buf)}: reading its memory resource "
                      f"({type(mr).__name__}) raised {exc_quoted(exc)}")
    if not device_ok:
        raise TypeError(f"{_describe(index, buf)}: {_ON_CPU} (its memory resource, "
                        f"{type(mr).__name__}, is not device accessible)")
    if type(device) is not int or not 0 <= device < 2**31:
        return -1       # a resource that names no device (-1, None): nothing to check
    return device


cdef int buffer_device(getter_t mr_getter, void* mr_closure, object buf,
                       Py_ssize_t index) except -2:
    global _last_mr_ref
    try:
        if mr_getter != NULL:
            mr = mr_getter(buf, mr_closure)
        else:
            mr = getattr(buf, "memory_resource", None)
    except Exception as exc:        # a memory_resource property (a subclass's) that raised
        _reraise(exc, f"{_describe(index, buf)}: reading its memory_resource raised "
                      f"{exc_quoted(exc)}")
    if mr is None:
        # Buffer.from_handle without a resource: where the memory is would take a driver query
        # (cuPointerGetAttributes), and packing never needs a driver. The caller vouched for
        # the pointer, as for a raw int.
        return -1
    if <PyObject*>mr == _last_mr.mr:
        return _last_mr.device
    device = _mr_device(mr, index, buf)
    try:
        ref = weakref.ref(mr, _forget_mr)
    except TypeError:
        return device
    kernarg_seq_write_begin(&_last_mr.seq)
    store_object(_last_mr.mr, <PyObject*>mr)
    store_int(_last_mr.device, device)
    kernarg_seq_write_end(&_last_mr.seq)
    _last_mr_ref = ref
    return device


cdef object _driver_ptr_type = None     # cuda.bindings' CUdeviceptr, once seen


cdef bint _is_driver_ptr(object value) except -1:
    """Whether ``value`` is a cuda.bindings ``CUdeviceptr`` (the class is remembered)."""
    global _driver_ptr_type
    if type(value) is _driver_ptr_type:
        return True
    if mro_has(type(value), "cuda.bindings", "CUdeviceptr"):
        _driver_ptr_type = type(value)
        return True
    return False


cdef int _buffer_pointer(const TypeInfo* info, object obj, Py_ssize_t index,
                         PtrResult* r) except -1:
    # cuda.core Buffer.handle is an int for some memory resources (pinned host memory) and a
    # cuda.bindings CUdeviceptr for others: never assume either. info lives in the shared type
    # cache, which Python code (a subclass's handle property) may overwrite: read it first.
    cdef getter_t mr_getter = info.mr_getter
    cdef void* mr_closure = info.mr_closure
    handle = obj.handle
    address = handle
    if handle is not None and type(handle) is not int:
        if _is_driver_ptr(handle):
            address = int(handle)       # a CUdeviceptr has __int__ but no __index__
        else:
            # operator.index(), as _set_address reads it: int() would make an address of a
            # float (4096.5 -> 4096) or a bool, which are refused, by name.
            _set_address(handle, index, obj, "Buffer.handle", r)
            address = r.ptr
    if not address and (getattr(obj, "is_closed", False) or getattr(obj, "size", 0)):
        # cuda.core >= 0.6 says is_closed; older ones only zero the handle (the size stays).
        # Either way a null pointer to a non-empty buffer would be silently wrong.
        raise ValueError(f"{_describe(index, obj)}: the buffer is closed (its handle is null); "
                         "its memory is gone")
    if address is None:
        raise ValueError(f"{_describe(index, obj)}: Buffer.handle is None")
    _set_address(address, index, obj, "Buffer.handle", r)
    r.device = buffer_device(mr_getter, mr_closure, obj, index)
    return 0


# What each kind's reader reads, for an exception that foreign code raised while it did.
cdef dict _READING = {
    KIND_BUFFER: "the cuda.core Buffer", KIND_DRIVER_PTR: "int() of the CUdeviceptr",
    KIND_DLPACK_C: "the array through its DLPack C exchange API",
    KIND_TORCH: "the torch tensor", KIND_CUPY: "the CuPy array",
    KIND_CUPY_MEMPTR: "the CuPy memory pointer", KIND_CUPY_PINNED: "the CuPy pinned memory pointer",
    KIND_NUMBA: "the numba device array", KIND_SMV: "the StridedMemoryView",
    KIND_JAX: "the JAX array", KIND_NDARRAY: "the numpy array",
}


cdef int name_raised(int kind, object obj, Py_ssize_t index) except -1:
    # Raises the exception a reader of argument ``index`` left set (_pointer_of, the Buffer
    # fast paths' handle read). One that names no argument came from the object's own code (a
    # property or method that raised, a library missing what its type promised): it is raised
    # again saying which argument and what was being read, keeping its class, the original
    # chained. BaseExceptions (KeyboardInterrupt, SystemExit) go on as they are.
    cdef PyObject* etype
    cdef PyObject* value
    cdef PyObject* tb
    PyErr_Fetch(&etype, &value, &tb)
    if etype == NULL:
        raise SystemError(f"{_describe(index, obj)}: reading it failed without an exception")
    PyErr_NormalizeException(&etype, &value, &tb)
    if tb != NULL:
        PyException_SetTraceback(value, tb)
    exc = <object>value
    Py_XDECREF(etype)
    Py_XDECREF(value)
    Py_XDECREF(tb)
    if not isinstance(exc, Exception):
        raise exc
    desc = _describe(index, obj)
    try:
        # The message as given (str() of a KeyError is its repr).
        text = exc.args[0] if exc.args and type(exc.args[0]) is str else str(exc)
    except Exception:
        text = "(its str() raised)"
    if text.startswith(desc):
        raise exc
    what = _READING.get(kind, "the argument")
    _reraise(exc, f"{desc}: reading {what} raised {type(exc).__name__}: {text}")


# _pointer_of called without Cython's error check, which pointer_of makes itself: a try block
# would save and restore the thread's exception state on every call, a cost on the hot path.
ctypedef int (*_unchecked_t)(const TypeInfo*, int, object, Py_ssize_t, uint64_t, PtrResult*,
                             bint, LazySection*) noexcept


cdef int pointer_of(const TypeInfo* info, object obj, Py_ssize_t index, uint64_t stream,
                    PtrResult* r, bint want_dtype, LazySection* lazy) except -1:
    """Fill ``r`` with the device address of a pointer-like argument (and its element type when
    ``want_dtype``: typed signatures check it against the pointee; untyped packing does not).
    ``lazy``: NULL where the caller holds kernarg's section (or the GIL); else (kernarg.pack,
    Signature.pack on a free-threaded build) the section, which _pointer_of enters before
    anything but the usual is read: the usual CUDA Array Interface (_usual_cai_values), DLPack's
    device query, export and capsule (whose ownership is taken under the capsule's own lock),
    the usual tensor of the DLPack C exchange API (_exchange_pointer says which), the
    library adapters' arrays (torch before 2.10, CuPy, numba, a StridedMemoryView, JAX), whose
    libraries' own code runs with no section, a numpy array over pinned memory (its
    owner's type known, its dtype among the last four read) and a registered type (its
    function, the user's code, runs with no section). Every exception it raises names the
    argument, in the section."""
    cdef int kind = info.kind
    if (<_unchecked_t>_pointer_of)(info, kind, obj, index, stream, r, want_dtype, lazy) != -1:
        return 0
    enter_lazily(lazy)
    return name_raised(kind, obj, index)


cdef int _has_attr(object obj, str name) except -1:
    """``hasattr``, raising any exception but AttributeError. Not Cython's hasattr: Cython 3.0
    compiles that to a lookup that clears every exception (as Python 2's hasattr did), so a
    ``__getattr__`` that raised read as "no such attribute" there (CI's lower-bounds build) and
    raised under Cython 3.3."""
    try:
        getattr(obj, name)
    except AttributeError:
        return 0
    return 1


cdef int _probed_kind(object obj) except -1:
    if _has_attr(obj, "__cuda_array_interface__"):
        return KIND_CAI
    if _has_attr(obj, "__dlpack__"):
        return KIND_DLPACK
    return KIND_PROBE


ctypedef int (*_unchecked_probe_t)(object) noexcept


cdef int probed_kind(object obj, Py_ssize_t index) except -1:
    """What a KIND_PROBE argument is: KIND_CAI or KIND_DLPACK where the object itself answers
    that protocol (an instance attribute, a __getattr__), else KIND_PROBE (no array).
    _pointer_of asks it of such an argument; a typed pointer parameter asks it first (it takes
    ints and ctypes pointers too) and hands pointer_of the kind found, so the object is asked
    once. A lookup that raises other than AttributeError is named as pointer_of names it."""
    cdef int kind = (<_unchecked_probe_t>_probed_kind)(obj)
    if kind != -1:
        return kind
    return name_raised(KIND_PROBE, obj, index)


cdef inline void _clear(PtrResult* r) noexcept:
    r.ptr = 0
    r.readonly = False
    r.copied = False
    r.has_stream = False
    r.stream = 0
    r.capsule = NULL
    r.dtype_kind = 0
    r.dtype_size = 0
    r.device = -1
    r.device_unconfirmed = False


cdef int _pointer_of(const TypeInfo* info, int kind, object obj, Py_ssize_t index,
                     uint64_t stream, PtrResult* r, bint want_dtype,
                     LazySection* lazy) except -1:
    """pointer_of's reading, by kind: ``lazy`` as pointer_of's. The protocols, the library
    adapters, numpy arrays and registered types' functions run with no section where ``lazy``
    is given: they touch nothing
    of kernarg's but ``r`` and the objects the producer hands over, and read kernarg's caches
    (element types, JAX's last sharding, what was looked up once in CuPy and torch, numpy
    arrays' exporter types) under sequence locks, once published or under the dict's own
    lock, entering ``lazy`` to write them. The rest enter it first."""
    cdef PyObject* fn
    _clear(r)
    if kind == KIND_CAI:
        return _consume_cai(obj, index, stream, r, want_dtype, lazy)
    if kind == KIND_DLPACK:
        return _consume_dlpack(obj, index, stream, r)
    if kind == KIND_DLPACK_C:
        return _exchange_pointer(<const DLPackExchangeAPI*>info.api, obj, index, r,
                                 info.torch_tensor, lazy)
    if kind == KIND_CUPY:
        return _cupy_pointer(obj, index, r, want_dtype, lazy)
    if kind == KIND_TORCH:
        return _torch_pointer(obj, index, r, want_dtype, lazy)
    if kind == KIND_JAX:
        return _jax_pointer(obj, index, stream, r, want_dtype, lazy)
    if kind == KIND_NUMBA:
        return _numba_pointer(obj, index, r, want_dtype, lazy)
    if kind == KIND_SMV:
        return _smv_pointer(obj, index, r, want_dtype, lazy)
    if kind == KIND_CUPY_MEMPTR:
        # A raw allocation exports no stream (nor element type), as a CUdeviceptr does not.
        return _cupy_memory(obj, obj, index, "ptr", r, lazy)
    if kind == KIND_CUPY_PINNED:
        # cudaHostAlloc memory: under unified addressing a kernel on any device reaches it at
        # its host address. No device, no stream.
        return _set_address(obj.ptr, index, obj, "ptr", r)
    if kind == KIND_DRIVER_PTR:
        return _set_address(int(obj), index, obj, "int(CUdeviceptr)", r)
    if kind == KIND_PYCUDA:
        return _address_from(int, obj, index, "int() of the PyCUDA pointer",
                             "int() of the PyCUDA pointer", r)
    if kind == KIND_NDARRAY:
        return _ndarray_pointer(obj, index, r, want_dtype, lazy)
    if kind == KIND_REGISTERED:
        # The user's function runs with no section, as a library's own code does; the
        # registry is read a strong reference at a time (_registered_fn).
        if _registered_fn(Py_TYPE(obj), &fn):
            return _registered_address(fn, obj, index, r)
        # Registered when the type was looked up, no longer (another thread's register(...,
        # None) since): what the type is now, as for a type not yet known.
        kind = KIND_PROBE
    # A Buffer (its fast paths are the packers') and a type not yet known.
    enter_lazily(lazy)
    if kind == KIND_BUFFER:
        return _buffer_pointer(info, obj, index, r)
    if kind == KIND_PROBE:
        # The protocols may be instance attributes rather than on the type.
        kind = _probed_kind(obj)
    if kind == KIND_CAI:
        return _consume_cai(obj, index, stream, r, want_dtype, NULL)
    if kind == KIND_DLPACK:
        return _consume_dlpack(obj, index, stream, r)
    return _unsupported(index, obj)


# Free-threaded CPython: every way into this module takes kernarg's critical section (_guard.h).
guard_module(globals(), __name__)
