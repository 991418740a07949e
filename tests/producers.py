"""Test producers of foreign arrays: CUDA Array Interface objects and DLPack exporters that
build real capsules (legacy and versioned) with counting deleters. Written from the specs."""
from __future__ import annotations

import ctypes
import struct

c_int32, c_uint8, c_uint16, c_uint32, c_uint64, c_int64 = (
    ctypes.c_int32, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64,
    ctypes.c_int64,
)


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int32), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", c_int32),
        ("dtype", DLDataType), ("shape", ctypes.POINTER(c_int64)),
        ("strides", ctypes.POINTER(c_int64)), ("byte_offset", c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER),
        ("flags", c_uint64), ("dl_tensor", DLTensor),
    ]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_PyCapsule_IsValid = ctypes.pythonapi.PyCapsule_IsValid
_PyCapsule_IsValid.restype = ctypes.c_int
_PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_PyCapsule_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_PyCapsule_GetPointer.restype = ctypes.c_void_p
_PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]

# Raw-pointer prototypes for use inside a capsule destructor, where the capsule is already at
# refcount zero and must not be turned back into a Python object.
_IsValidRaw = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_IsValid", ctypes.pythonapi))
_GetPointerRaw = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

_LIVE: dict[int, object] = {}   # managed tensor address -> (struct, shape array, producer, strides)


@DELETER
def _deleter(address):
    entry = _LIVE.pop(address, None)
    if entry is not None:
        entry[2].deleted += 1
    else:   # a second call for the same tensor: count it so tests see double frees
        _double_deletes.append(address)


_double_deletes: list[int] = []

_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


@_CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule_ptr):
    # Spec: if the consumer never renamed the capsule, the producer frees the tensor.
    for name in (b"dltensor", b"dltensor_versioned"):
        if _IsValidRaw(capsule_ptr, name):
            _deleter(_GetPointerRaw(capsule_ptr, name))


class DLPackProducer:
    """Exports ``address`` over DLPack. ``signature`` selects which keywords __dlpack__ takes:
    "full" (stream, max_version), "stream" (pre-1.0 producers) or "none"."""

    def __init__(self, address, *, device=(2, 0), versioned=True, byte_offset=0, shape=(4,),
                 readonly=False, copied=False, version=(1, 1), dtype=(2, 32, 1)):
        self.address = address
        self.device = device
        self.versioned = versioned
        self.byte_offset = byte_offset
        self.shape = shape
        self.readonly = readonly
        self.copied = copied        # DLPack's IS_COPIED flag: the producer exported a copy
        self.version = version
        self.dtype = dtype
        self.deleted = 0
        self.exported = 0
        self.streams = []
        self.max_versions = []

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None):
        self.streams.append(stream)
        self.max_versions.append(max_version)
        return self._export(versioned=self.versioned and max_version is not None)

    # Malformed exports, for the consumer's checks: an ndim that disagrees with the shape, and
    # a tensor with no shape array at all.
    ndim = None
    null_shape = False
    strides = None      # element strides to export; None exports none (C-contiguous)

    def _fill(self, t: DLTensor, shape_arr):
        t.data = self.address
        t.device = DLDevice(*self.device)
        t.ndim = len(self.shape) if self.ndim is None else self.ndim
        t.dtype = DLDataType(*self.dtype)
        t.shape = None if self.null_shape else shape_arr
        t.strides = None
        if self.strides is not None:
            self._strides_arr = (c_int64 * max(1, len(self.strides)))(*self.strides)
            t.strides = self._strides_arr
        t.byte_offset = self.byte_offset

    def _export(self, versioned):
        self.exported += 1
        shape_arr = (c_int64 * max(1, len(self.shape)))(*self.shape)
        if versioned:
            mt = DLManagedTensorVersioned()
            mt.version = DLPackVersion(*self.version)
            mt.flags = (1 if self.readonly else 0) | (2 if self.copied else 0)
            self._fill(mt.dl_tensor, shape_arr)
            name = b"dltensor_versioned"
        else:
            mt = DLManagedTensor()
            self._fill(mt.dl_tensor, shape_arr)
            name = b"dltensor"
        mt.deleter = _deleter
        address = ctypes.addressof(mt)
        _LIVE[address] = (mt, shape_arr, self, getattr(self, "_strides_arr", None))
        return _PyCapsule_New(address, name, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class StreamOnlyProducer(DLPackProducer):
    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return self._export(versioned=False)


class NoKeywordProducer(DLPackProducer):
    def __dlpack__(self):
        self.streams.append("<none>")
        return self._export(versioned=False)


class CAIObject:
    """An object exposing ``__cuda_array_interface__`` as a property (like real libraries)."""

    def __init__(self, interface):
        self._interface = interface

    @property
    def __cuda_array_interface__(self):
        if isinstance(self._interface, BaseException):
            raise self._interface
        return self._interface


class InstanceCAI:
    """The interface as an attribute of the instance, its type having none (a wrapper that
    copies another array's interface): kernarg asks each such instance."""

    def __init__(self, interface):
        self.__cuda_array_interface__ = interface


def ptr_of(block, i=0):
    """The pointer packed for argument ``i`` of a ParamBlock, read from its bytes."""
    return struct.unpack_from("<Q", bytes(block), block.offsets[i])[0]


def cai(ptr, *, shape=(4,), typestr="<f4", version=3, readonly=False, **extra):
    d = {"shape": shape, "typestr": typestr, "data": (ptr, readonly), "version": version}
    d.update(extra)
    return d


def double_deletes() -> list[int]:
    return list(_double_deletes)


# ---------------------------------------------------------------------------------------------
# DLPack 1.3 C exchange API (type(x).__dlpack_c_exchange_api__): a table of C functions, here
# ctypes callbacks, in a capsule named "dlpack_exchange_api" on the type.

FROM_PY_OBJECT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))
CURRENT_WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, c_int32, c_int32,
                                       ctypes.POINTER(ctypes.c_void_p))


class DLPackExchangeAPIHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


class DLPackExchangeAPI(ctypes.Structure):
    _fields_ = [
        ("header", DLPackExchangeAPIHeader),
        ("managed_tensor_allocator", ctypes.c_void_p),
        ("managed_tensor_from_py_object_no_sync", ctypes.c_void_p),
        ("managed_tensor_to_py_object_no_sync", ctypes.c_void_p),
        ("dltensor_from_py_object_no_sync", FROM_PY_OBJECT),
        ("current_work_stream", CURRENT_WORK_STREAM),
    ]


@FROM_PY_OBJECT
def _exchange_dltensor(obj, out):
    type(obj).tensor_calls += 1
    if obj.fail_tensor:
        return -1
    obj._shape_arr = (c_int64 * max(1, len(obj.shape)))(*obj.shape)
    obj._fill(out[0], obj._shape_arr)
    return 0


def exchange_type(*, version=(1, 3), work_stream=0x5000, capsule_name=b"dlpack_exchange_api",
                  prev=None, fail_stream=False, has_tensor_fn=True):
    """A fresh DLPackProducer subclass whose type carries a C exchange API table. The class
    counts calls (``tensor_calls``, ``stream_queries``); instances still have ``__dlpack__``,
    so a consumer that ignores the table shows up as ``exported`` > 0. ``prev`` is another
    such class, chained as ``header.prev_api``."""

    @CURRENT_WORK_STREAM
    def current_work_stream(device_type, device_id, out):
        cls.stream_queries.append((device_type, device_id))
        if fail_stream:
            return -1
        out[0] = work_stream
        return 0

    table = DLPackExchangeAPI()
    table.header.version = DLPackVersion(*version)
    table.header.prev_api = None if prev is None else ctypes.addressof(prev._table)
    if has_tensor_fn:
        table.dltensor_from_py_object_no_sync = _exchange_dltensor
    table.current_work_stream = current_work_stream
    capsule = _PyCapsule_New(ctypes.addressof(table), capsule_name, None)
    cls = type("ExchangeProducer", (DLPackProducer,), {
        "__dlpack_c_exchange_api__": capsule, "_table": table, "_prev": prev,
        "_stream_fn": current_work_stream, "tensor_calls": 0, "stream_queries": [],
        "fail_tensor": False,
    })
    return cls


class TorchTensor:
    """A torch tensor as kernarg's torch adapter (torch before 2.10, no DLPack C exchange API)
    reads one: each read it makes -- ``is_cuda``, ``device``, ``dtype``, ``is_pinned()``,
    ``data_ptr()``, ``get_device()``, ``is_conj()``, ``is_neg()`` -- answers ``reads[name]``, or
    raises it where it is an exception. Named torch.Tensor: kernarg knows torch's type by its
    module and name."""

    def __init__(self, reads: dict):
        self.reads = reads

    def _give(self, name):
        value = self.reads[name]
        if isinstance(value, BaseException):
            raise value
        return value

    is_cuda = property(lambda self: self._give("is_cuda"))
    device = property(lambda self: self._give("device"))
    dtype = property(lambda self: self._give("dtype"))

    def is_pinned(self):
        return self._give("is_pinned")

    def data_ptr(self):
        return self._give("data_ptr")

    def get_device(self):
        return self._give("get_device")

    def is_conj(self):
        return self._give("is_conj")

    def is_neg(self):
        return self._give("is_neg")


TorchTensor.__module__ = "torch"
TorchTensor.__name__ = TorchTensor.__qualname__ = "Tensor"


class TorchDtype:
    """A torch dtype: kernarg reads its element type from str(), ``torch.<name>``."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


def install_torch(current_stream):
    """``sys.modules["torch"]``: a module whose Tensor is TorchTensor and whose
    ``_C._cuda_getCurrentRawStream(device)`` is ``current_stream(device)``. For a process where
    kernarg's torch adapter has not run yet: it looks torch's stream reader up once."""
    import sys
    import types

    torch = types.ModuleType("torch")
    torch.Tensor = TorchTensor
    torch._C = types.SimpleNamespace(_cuda_getCurrentRawStream=current_stream)
    sys.modules["torch"] = torch
    return torch
