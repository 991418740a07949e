"""The per-library adapters (torch without the DLPack C exchange API, CuPy, numba-cuda, cuda.core
StridedMemoryView before it had the exchange API, JAX), run on
stand-ins that have exactly the attributes each adapter reads, as those libraries document them.

The real libraries need a GPU (tests/gpu runs them); these catch mistakes in the adapters'
own code. They run in a subprocess: the stand-ins take the libraries' module names, and the
adapters remember what they looked up in a library the first time."""
import os
import subprocess
import sys
import textwrap

import pytest

STAND_INS = textwrap.dedent("""
    import ctypes, sys, types
    import numpy as np

    ns = types.SimpleNamespace
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    CAPSULE_NAMES = []   # a capsule keeps only a pointer to its name

    def c_function_capsule(address, name):
        CAPSULE_NAMES.append(name)
        return capsule_new(address, name, None)

    # torch (< 2.10: no __dlpack_c_exchange_api__, so kernarg uses its torch adapter)
    torch = types.ModuleType("torch")
    torch.cuda = ns(current_stream=lambda device: ns(cuda_stream=0x770 + device))

    class TorchDtype:
        def __init__(self, name):
            self.name = name
        def __str__(self):
            return "torch." + self.name

    class Tensor:
        def __init__(self, ptr, device, dtype="float32", cuda=True, pinned=False):
            self.ptr, self._device, self.dtype, self.is_cuda = ptr, device, TorchDtype(dtype), cuda
            self.device = f"cuda:{device}" if cuda else "cpu"
            self.pinned = pinned
        @classmethod
        def on(cls, device):                    # a tensor on a torch device other than CUDA's
            t = cls(0x1000, 0, cuda=False)
            t.device = device
            return t
        def is_pinned(self):
            return self.pinned
        def data_ptr(self):
            return self.ptr
        def get_device(self):
            return self._device if self.is_cuda else -1
        conj_bit = neg_bit = False          # torch's lazily conjugated and negated views
        def is_conj(self):
            return self.conj_bit
        def is_neg(self):
            return self.neg_bit
    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    sys.modules["torch"] = torch

    # CuPy
    cupy = types.ModuleType("cupy")

    class ManagedMemory:
        pass

    class Memory:
        pass

    # As in CuPy 14: cupy.cuda.stream has no Python get_current_stream_ptr; its Cython C API
    # exports the C function as a capsule named by its signature.
    STREAM_FN = ctypes.CFUNCTYPE(ctypes.c_ssize_t)(lambda: 0x880)
    cupy.cuda = ns(stream=ns(__pyx_capi__={"get_current_stream_ptr": c_function_capsule(
                       ctypes.cast(STREAM_FN, ctypes.c_void_p).value, b"intptr_t (void)")}),
                   get_current_stream=lambda: ns(ptr=0x881),
                   memory=ns(ManagedMemory=ManagedMemory))

    class ndarray:
        def __init__(self, ptr, device, dtype="float32", managed=False):
            mem = ManagedMemory() if managed else Memory()
            self.data = ns(ptr=ptr, device_id=device, mem=mem)
            self.dtype = np.dtype(dtype)
    ndarray.__module__ = "cupy"
    cupy.ndarray = ndarray

    class MemoryPointer:                    # cupy.cuda.alloc(n), a memory pool's, ndarray.data
        def __init__(self, ptr, device, managed=False):
            self.ptr, self.device_id = ptr, device
            self.mem = ManagedMemory() if managed else Memory()
    MemoryPointer.__module__ = "cupy.cuda.memory"

    class PinnedMemoryPointer(bytearray):   # CuPy's exports the buffer protocol too
        def __init__(self, ptr):
            super().__init__(8)
            self.ptr = ptr
    PinnedMemoryPointer.__module__ = "cupy.cuda.pinned_memory"
    sys.modules["cupy"] = cupy

    # numba-cuda
    class DeviceNDArray:
        def __init__(self, ptr, stream=0, dtype="float32"):
            self.device_ctypes_pointer = ctypes.c_void_p(ptr)
            self.stream = stream
            self.dtype = np.dtype(dtype)
    DeviceNDArray.__module__ = "numba.cuda.cudadrv.devicearray"

    # cuda.core StridedMemoryView (< 1.x: no __dlpack_c_exchange_api__)
    # device_id is the GPU of device memory, and 0 (DLPack's id) or a Buffer's device for
    # pinned and managed memory; the view's exporter (a DLPack producer or a Buffer) can say which.
    class StridedMemoryView:
        def __init__(self, ptr, device_accessible=True, readonly=False, dtype="float32",
                     device_id=0, exporter=None):
            self.ptr, self.is_device_accessible = ptr, device_accessible
            self.readonly, self.dtype = readonly, np.dtype(dtype)
            self.device_id, self.exporting_obj = device_id, exporter
    StridedMemoryView.__module__ = "cuda.core._memoryview"

    class Exporter:                         # __dlpack_device__ only: that is all that is read
        def __init__(self, answer):
            self.answer, self.asked = answer, 0
        def __dlpack_device__(self):
            self.asked += 1
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer

    class NewerStridedMemoryView(StridedMemoryView):   # one that answers for itself
        def __dlpack_device__(self):
            return self.exporting_obj.__dlpack_device__()
    NewerStridedMemoryView.__module__ = "cuda.core._memoryview"

    # JAX: jaxlib's ArrayImpl, its shardings and devices (jax.Array, jax.sharding, jax.Device)
    class Device:
        def __init__(self, ordinal, platform="gpu", client="cuda"):
            self.id, self.local_hardware_id = 100 + ordinal, ordinal   # JAX's id is not CUDA's
            self.platform, self.client = platform, ns(platform=client)
        def __repr__(self):
            return f"{self.platform}:{self.id}"

    class SingleDeviceSharding:
        def __init__(self, device, memory_kind="device"):
            self._device, self.memory_kind = device, memory_kind

    class NamedSharding:                    # no _device: its device_set says where
        def __init__(self, *devices, memory_kind=None):
            self.device_set, self.memory_kind = set(devices), memory_kind

    class ArrayImpl:
        def __init__(self, ptr, sharding, dtype="float32", deleted=False):
            self.ptr, self.sharding, self.dtype = ptr, sharding, np.dtype(dtype)
            self.deleted = deleted
        def unsafe_buffer_pointer(self):
            if self.deleted:
                raise RuntimeError("UnsafeBufferPointer called on deleted or donated buffer")
            return self.ptr
    ArrayImpl.__module__ = "jaxlib._jax"

    class OldArrayImpl:                     # a jaxlib without .sharding: DLPack decides
        def __dlpack_device__(self):
            return (1, 0)
        def __dlpack__(self, stream=None, max_version=None):
            raise AssertionError("not reached: the device is refused first")
    OldArrayImpl.__name__ = OldArrayImpl.__qualname__ = "ArrayImpl"
    OldArrayImpl.__module__ = "jaxlib.xla_extension"

    def ptrs(block):                        # the address in each parameter slot
        return [int.from_bytes(bytes(block)[o:o + 8], "little") for o in block.offsets]
""")

def run_with_stand_ins(body, timeout):
    """Run ``body`` after STAND_INS in a subprocess (its TESTS, the tests' directory, for it
    to import helpers from), which must exit 0 having printed just "ok"."""
    tests = os.path.dirname(os.path.abspath(__file__))
    script = f"TESTS = {tests!r}\n" + STAND_INS + body
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.split() == ["ok"], out.stdout


SCRIPT = STAND_INS + textwrap.dedent("""
    import kernarg

    def raises(exc, fragment, fn):
        try:
            fn()
        except exc as e:
            assert fragment in str(e), (fragment, str(e))
        else:
            raise AssertionError(f"no {exc.__name__}")

    nb_stream = ns(handle=ctypes.c_void_p(0x990))
    args = (Tensor(0x1000, 1), ndarray(0x2000, 1), DeviceNDArray(0x3000, nb_stream),
            DeviceNDArray(0x4000))
    b = kernarg.pack(args)
    assert ptrs(b) == [0x1000, 0x2000, 0x3000, 0x4000], ptrs(b)
    assert b.producer_streams == (0x771, 0x880, 0x990), b.producer_streams
    assert ptrs(kernarg.pack(args[:2], device=1)) == [0x1000, 0x2000]

    raises(ValueError, "argument 0 (torch.Tensor): its memory is on CUDA device 1, but the "
           "kernel runs on device 0", lambda: kernarg.pack(args[:1], device=0))
    raises(ValueError, "argument 1 (cupy.ndarray): its memory is on CUDA device 1",
           lambda: kernarg.pack((7, ndarray(0x2000, 1)), device=0))
    assert ptrs(kernarg.pack((ndarray(0x2000, 1, managed=True),), device=0)) == [0x2000]
    raises(TypeError, "argument 0 (torch.Tensor): the memory is on the CPU",
           lambda: kernarg.pack((Tensor(0x1000, 0, cuda=False),)))
    raises(TypeError, "argument 0 (torch.Tensor): the tensor is on torch device meta, not on "
           "a CUDA device or in pinned host memory", lambda: kernarg.pack((Tensor.on("meta"),)))
    raises(TypeError, "on torch device xpu:1,", lambda: kernarg.pack((Tensor.on("xpu:1"),)))
    # CuPy's raw allocations: device memory on its device (managed memory on any), and pinned
    # host memory on none; neither exports a stream or an element type.
    b = kernarg.pack((MemoryPointer(0x2100, 1), PinnedMemoryPointer(0x2200),
                      MemoryPointer(0x2300, 1, managed=True)), device=1)
    assert ptrs(b) == [0x2100, 0x2200, 0x2300] and b.producer_streams == ()
    assert ptrs(kernarg.pack((PinnedMemoryPointer(0x2200), MemoryPointer(0x2300, 1, managed=True)),
                             device=0)) == [0x2200, 0x2300]
    raises(ValueError, "argument 0 (cupy.cuda.memory.MemoryPointer): its memory is on CUDA "
           "device 1, but the kernel runs on device 0",
           lambda: kernarg.pack((MemoryPointer(0x2100, 1),), device=0))
    raw_sig = kernarg.Signature("double* x, const int* y")
    assert ptrs(raw_sig.pack((MemoryPointer(0x2100, 0), PinnedMemoryPointer(0x2200)))) == [
        0x2100, 0x2200]
    raises(OverflowError, "argument 0 (cupy.cuda.pinned_memory.PinnedMemoryPointer): ptr gave "
           "address -1", lambda: kernarg.pack((PinnedMemoryPointer(-1),)))

    # A lazily conjugated or negated view's memory holds the values before that: refused, on
    # the device and pinned alike, untyped and typed.
    for bit, word in (("conj_bit", "conjugated"), ("neg_bit", "negated")):
        for t in (Tensor(0x1000, 0), Tensor(0x1800, 0, cuda=False, pinned=True)):
            setattr(t, bit, True)
            raises(ValueError, f"argument 1 (torch.Tensor): the tensor is a lazily {word} view",
                   lambda: kernarg.pack((7, t)))
            raises(ValueError, f"parameter 0 ('x'): argument 0 (torch.Tensor): the tensor is a "
                   f"lazily {word} view", lambda: kernarg.Signature("float* x").pack((t,)))
    # A pinned CPU tensor is host memory a kernel can use: on no device, no stream to wait on.
    pinned = kernarg.pack((Tensor(0x1800, 0, cuda=False, pinned=True),), device=1)
    assert ptrs(pinned) == [0x1800] and pinned.producer_streams == ()
    pinned_sig = kernarg.Signature("float* x, int* y")
    assert ptrs(pinned_sig.pack((Tensor(0x1800, 0, cuda=False, pinned=True), None)))[0] == 0x1800
    raises(TypeError, "('y') is int* but the array's element type is f4",
           lambda: pinned_sig.pack((None, Tensor(0x1800, 0, cuda=False, pinned=True))))

    sig = kernarg.Signature("float* a, const float* b, float* c, int n")
    typed = sig.pack((Tensor(0x1000, 0), ndarray(0x2000, 0), DeviceNDArray(0x3000), 4))
    assert ptrs(typed)[:3] == [0x1000, 0x2000, 0x3000]
    raises(TypeError, "'a'", lambda: sig.pack((Tensor(0x1000, 0, "int32"), None, None, 4)))
    # torch dtypes no C scalar names (quantized, sub-byte) passed for any pointee; now only
    # void* and struct pointers take them. complex32 is a pair of halves, as half2.
    for name in ("quint8", "qint32", "uint4", "bits16"):
        raises(TypeError, "('p') is signed char* but the array's element type is one no C "
               "pointee names", lambda: kernarg.Signature("signed char* p").pack(
                   (Tensor(0x1000, 0, name),)))
        assert ptrs(kernarg.Signature("void* p").pack((Tensor(0x1000, 0, name),))) == [0x1000]
    assert ptrs(kernarg.Signature("half2* p").pack((Tensor(0x1000, 0, "complex32"),))) == [
        0x1000]
    raises(TypeError, "('p') is float* but the array's element type is c4",
           lambda: kernarg.Signature("float* p").pack((Tensor(0x1000, 0, "complex32"),)))
    # kernarg remembers each torch dtype object's element type (a bounded number of them;
    # these stand-ins make a new dtype object per tensor): past the bound, still checked.
    for _ in range(80):
        raises(TypeError, "'a'", lambda: sig.pack((Tensor(0x1000, 0, "int32"), None, None, 4)))
        assert ptrs(sig.pack((Tensor(0x1000, 0), None, None, 4)))[0] == 0x1000
    raises(TypeError, "'b'", lambda: sig.pack((None, ndarray(0x2000, 0, "float64"), None, 4)))
    raises(TypeError, "'c'", lambda: sig.pack((None, None, DeviceNDArray(0x3000, 0, "i2"), 4)))

    smv = StridedMemoryView
    assert ptrs(kernarg.pack((smv(0x5000), smv(0x6000, readonly=True)))) == [0x5000, 0x6000]
    raises(TypeError, "argument 1 (cuda.core._memoryview.StridedMemoryView): the memory is on "
           "the CPU", lambda: kernarg.pack((1, smv(0x5000, device_accessible=False))))
    sig = kernarg.Signature("const float* x, float* y")
    assert ptrs(sig.pack((smv(0x5000, readonly=True), smv(0x6000)))) == [0x5000, 0x6000]
    raises(ValueError, "'y'", lambda: sig.pack((smv(0x5000), smv(0x6000, readonly=True))))
    raises(TypeError, "'x'", lambda: sig.pack((smv(0x5000, dtype="int32"), smv(0x6000))))

    # A view on another GPU than the launch's is refused once its DLPack device confirms it;
    # pinned, managed and unanswered views are reachable (or not known to be elsewhere).
    on_gpu1 = Exporter((2, 1))
    assert ptrs(kernarg.pack((smv(0x5000, device_id=1, exporter=on_gpu1),), device=1)) == [0x5000]
    assert ptrs(kernarg.pack((smv(0x5000, device_id=1, exporter=on_gpu1),))) == [0x5000]
    assert on_gpu1.asked == 0               # the same device, or none given: nothing to confirm
    for view_type in (smv, NewerStridedMemoryView):
        raises(ValueError, "argument 1 (cuda.core._memoryview." + view_type.__name__ + "): its "
               "memory is on CUDA device 1, but the kernel runs on device 0; copy it over first",
               lambda: kernarg.pack((7, view_type(0x5000, device_id=1, exporter=on_gpu1)),
                                    device=0))
    raises(ValueError, "parameter 1 ('y'): argument 1 (cuda.core._memoryview.StridedMemoryView): "
           "its memory is on CUDA device 1",
           lambda: sig.pack((None, smv(0x6000, device_id=1, exporter=on_gpu1)), device=0))
    for answer in ((3, 0), (13, 0), (1, 0), (2, "1"), (2,), None, RuntimeError("no")):
        for view_type in (smv, NewerStridedMemoryView):
            asked = Exporter(answer)
            view = view_type(0x5000, device_id=1, exporter=asked)
            assert ptrs(kernarg.pack((view,), device=0)) == [0x5000], answer
            assert asked.asked == 1
    assert ptrs(kernarg.pack((smv(0x5000, device_id=1, exporter=object()),), device=0)) == [0x5000]
    try:                                    # an interrupt is not an odd answer
        kernarg.pack((smv(0x5000, device_id=1, exporter=Exporter(KeyboardInterrupt())),), device=0)
        raise AssertionError("KeyboardInterrupt was swallowed")
    except KeyboardInterrupt:
        pass
    assert ptrs(kernarg.pack((smv(0x5000, device_id=-1),), device=0)) == [0x5000]

    gpu0, gpu1 = SingleDeviceSharding(Device(0)), SingleDeviceSharding(Device(1))
    j0, j1 = ArrayImpl(0x7000, gpu0), ArrayImpl(0x8000, gpu1)
    for _ in range(2):      # the second round answers from the remembered sharding, alternately
        b = kernarg.pack((j0, j1))
        assert ptrs(b) == [0x7000, 0x8000] and b.producer_streams == (), b.producer_streams
        assert ptrs(kernarg.pack((j0,), device=0)) == [0x7000]
        raises(ValueError, "argument 0 (jaxlib._jax.ArrayImpl): its memory is on CUDA device 1, "
               "but the kernel runs on device 0", lambda: kernarg.pack((j1,), device=0))
    assert ptrs(kernarg.pack((ArrayImpl(0x9000, NamedSharding(Device(1))),), device=1)) == [0x9000]
    pinned = ArrayImpl(0xa000, SingleDeviceSharding(Device(1), "pinned_host"))
    assert ptrs(kernarg.pack((pinned,), device=0)) == [0xa000]
    raises(TypeError, "argument 0 (jaxlib._jax.ArrayImpl): the memory is on the CPU; a kernel "
           "needs CUDA device, pinned (CUDA host) or managed memory (JAX device cpu:100)",
           lambda: kernarg.pack((ArrayImpl(0x7000, SingleDeviceSharding(Device(0, "cpu"))),)))
    raises(TypeError, "argument 1 (jaxlib._jax.ArrayImpl): the memory is on the CPU; a kernel "
           "needs CUDA device, pinned (CUDA host) or managed memory (JAX memory kind "
           "'unpinned_host')", lambda: kernarg.pack(
               (1, ArrayImpl(0x7000, SingleDeviceSharding(Device(0), "unpinned_host")))))
    raises(TypeError, "argument 0 (jaxlib._jax.ArrayImpl): the JAX array is on gpu:100 "
           "(platform rocm), not on a CUDA device",
           lambda: kernarg.pack((ArrayImpl(0x7000, SingleDeviceSharding(Device(0, "gpu",
                                                                               "rocm"))),)))
    raises(ValueError, "argument 0 (jaxlib._jax.ArrayImpl): the JAX array is sharded over 2 "
           "devices", lambda: kernarg.pack((ArrayImpl(0x7000, NamedSharding(Device(0),
                                                                            Device(1))),)))
    raises(RuntimeError, "argument 0 (jaxlib._jax.ArrayImpl): unsafe_buffer_pointer() raised "
           "RuntimeError: UnsafeBufferPointer called on deleted or donated buffer",
           lambda: kernarg.pack((ArrayImpl(0x7000, gpu0, deleted=True),)))
    class BrokenSharding:
        def __init__(self, device):
            self._device = device
        @property
        def memory_kind(self):
            raise ValueError("no memory kind")
    raises(ValueError, "argument 2 (jaxlib._jax.ArrayImpl): reading the JAX array's sharding "
           "raised ValueError: no memory kind",
           lambda: kernarg.pack((1, 2, ArrayImpl(0x7000, BrokenSharding(Device(0))))))
    raises(TypeError, "argument 0 (jaxlib.xla_extension.ArrayImpl): the memory is on the CPU",
           lambda: kernarg.pack((OldArrayImpl(),)))
    # Immutable: read through const pointers, refused as outputs; the element type is checked.
    sig = kernarg.Signature("const float* x, float* y")
    assert ptrs(sig.pack((j0, None))) == [0x7000, 0]
    raises(ValueError, "'y'", lambda: sig.pack((j0, j1)))
    raises(TypeError, "'x'", lambda: sig.pack((ArrayImpl(0x7000, gpu0, "int32"), None)))

    # 8-bit floats: torch's dtype names and ml_dtypes' (JAX's) against cuda_fp8.h's types; an
    # x2 pointee takes arrays of single values, as float2* takes float32 arrays.
    import ml_dtypes
    fp8 = kernarg.Signature("const __nv_fp8_e4m3* w, __nv_fp8x2_e5m2* o, const float* f")
    assert ptrs(fp8.pack((Tensor(0x1000, 0, "float8_e4m3fn"), Tensor(0x2000, 0, "float8_e5m2"),
                          None))) == [0x1000, 0x2000, 0]
    assert ptrs(fp8.pack((ArrayImpl(0x7000, gpu0, ml_dtypes.float8_e4m3fn), None, None)))[0] \
        == 0x7000
    raises(TypeError, "('w') is const __nv_fp8_e4m3* but the array's element type is "
           "float8_e5m2", lambda: fp8.pack((Tensor(0x1000, 0, "float8_e5m2"), None, None)))
    raises(TypeError, "('w') is const __nv_fp8_e4m3* but the array's element type is u1 (numpy "
           "kind/size)", lambda: fp8.pack((Tensor(0x1000, 0, "uint8"), None, None)))
    raises(TypeError, "('f') is const float* but the array's element type is float8_e4m3fnuz",
           lambda: fp8.pack((None, None, ArrayImpl(0x7000, gpu0, ml_dtypes.float8_e4m3fnuz))))
    raises(TypeError, "('w') is const __nv_fp8_e4m3* but the array's element type is "
           "float8_e4m3fnuz", lambda: fp8.pack((Tensor(0x1000, 0, "float8_e4m3fnuz"), None,
                                                None)))

    # A dtype's element kind is read once and kept (numpy computes dtype.name in Python on
    # every read): alternating dtypes, equal dtypes that are other objects, and more dtypes
    # than are kept, each still checked as itself.
    kinds = {"float32": "float", "int32": "int", "float64": "double", "uint8": "unsigned char",
             "<f2": "__half", ml_dtypes.bfloat16: "__nv_bfloat16",
             ml_dtypes.float8_e4m3fn: "__nv_fp8_e4m3"}
    for _ in range(3):
        for dtype, ctype in kinds.items():
            a = ArrayImpl(0x7000, gpu0, np.dtype(dtype).newbyteorder("="))
            assert ptrs(kernarg.Signature(f"const {ctype}* p").pack((a,))) == [0x7000]
            other = "int" if ctype != "int" else "float"
            raises(TypeError, f"('p') is const {other}* but the array's element type",
                   lambda: kernarg.Signature(f"const {other}* p").pack((a,)))
    # A big-endian dtype is read byte-swapped by a kernel: refused for a typed pointer.
    swapped = ArrayImpl(0x7000, gpu0, np.dtype(">f4"))
    raises(TypeError, "('p') is const float* but the array's element type is big-endian",
           lambda: kernarg.Signature("const float* p").pack((swapped,)))
    assert ptrs(kernarg.Signature("const void* p").pack((swapped,))) == [0x7000]
    for i in range(300):                    # structured dtypes: no element kind, any pointee
        a = ArrayImpl(0x7000, gpu0, np.dtype([(f"f{i}", "<f4")]))
        assert ptrs(kernarg.Signature("const float* p").pack((a,))) == [0x7000]
    raises(TypeError, "('p') is const int* but the array's element type is f4",
           lambda: kernarg.Signature("const int* p").pack((ArrayImpl(0x7000, gpu0),)))
    print("ok")
""")


def test_adapters_on_stand_ins():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


# Every read an adapter makes, failing in turn: the n-th read of a public attribute (or call of
# a method it gave) raises, for n = 1, 2, ... up to the reads a successful pack makes. Whatever
# read fails, the exception names the argument (and, typed, the parameter) and keeps the class
# and text of what the object raised; an AttributeError may instead be read as "not there"
# (an optional attribute), and then the pointer is still the right one.
HOSTILE = STAND_INS + textwrap.dedent("""
    import kernarg

    class Injected(Exception):
        pass

    class Buffer:                       # cuda.core's, as far as kernarg reads it
        def __init__(self, ptr):
            self.handle, self.memory_resource, self.size, self.is_closed = ptr, None, 64, False
    Buffer.__module__ = "cuda.core._memory._buffer"

    def failing(obj, n, exc_type):
        base, reads = type(obj), [0]
        def tick(what):
            reads[0] += 1
            if reads[0] == n:
                raise exc_type(f"injected at {what}")
        def getattribute(self, name):
            value = base.__getattribute__(self, name)
            if name.startswith("__"):       # the interpreter's own lookups
                return value
            tick(name)
            if callable(value) and not isinstance(value, type):
                def call(*args, **kwargs):
                    tick(name + "()")
                    return value(*args, **kwargs)
                return call
            return value
        obj.__class__ = type(base.__name__, (base,), {"__module__": base.__module__,
                                                      "__getattribute__": getattribute})
        return obj, reads

    nb_stream = ns(handle=ctypes.c_void_p(0x990))
    makers = {
        "torch CUDA": lambda: Tensor(0x1000, 0),
        "torch pinned": lambda: Tensor(0x1100, 0, cuda=False, pinned=True),
        "cupy ndarray": lambda: ndarray(0x2000, 0),
        "cupy MemoryPointer": lambda: MemoryPointer(0x2100, 0),
        "cupy PinnedMemoryPointer": lambda: PinnedMemoryPointer(0x2200),
        "numba": lambda: DeviceNDArray(0x3000, nb_stream),
        "StridedMemoryView": lambda: StridedMemoryView(0x5000),
        "jax": lambda: ArrayImpl(0x7000, SingleDeviceSharding(Device(0))),
        "cuda.core Buffer": lambda: Buffer(0x8000),
    }
    sig = kernarg.Signature("const float* p")
    for label, make in makers.items():
        expected = make()
        expected = ptrs(kernarg.pack((expected,)))[0]
        obj, reads = failing(make(), 0, Injected)
        kernarg.pack((obj,))
        total = reads[0]
        assert total >= 1, label
        for n in range(1, total + 1):
            for exc_type in (Injected, KeyError, AttributeError):
                for typed in (False, True):
                    obj, _ = failing(make(), n, exc_type)
                    prefix = "parameter 0 ('p'): argument 0 (" if typed else "argument 0 ("
                    try:
                        block = (sig.pack if typed else kernarg.pack)((obj,))
                    except Exception as e:
                        message = e.args[0] if e.args else ""
                        case = (label, n, exc_type.__name__, typed, message)
                        assert isinstance(message, str) and message.startswith(prefix), case
                        if exc_type is not AttributeError:
                            assert type(e) is exc_type and "injected at" in message, case
                    else:
                        assert exc_type is AttributeError, (label, n, typed)
                        assert ptrs(block) == [expected], (label, n, typed)
        print(label, total)
""")


def test_every_adapter_read_that_raises_names_the_argument():
    out = subprocess.run([sys.executable, "-c", HOSTILE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    lines = dict(line.rsplit(" ", 1) for line in out.stdout.splitlines())
    assert len(lines) == 9 and all(int(n) >= 1 for n in lines.values()), out.stdout


# How the CuPy adapter reads CuPy's current stream, in each shape a CuPy module can have: the
# C function behind the signature-named capsule (CuPy 14's layout, used by the script above),
# a capsule whose C function raises, a capsule with another signature (never called), and no
# C API at all; the last two use cupy.cuda.get_current_stream().ptr.
CUPY_SCRIPT = textwrap.dedent("""
    import ctypes, sys, types
    import numpy as np
    ns = types.SimpleNamespace
    capsule_new = ctypes.pythonapi.PyCapsule_New
    capsule_new.restype = ctypes.py_object
    capsule_new.argtypes = (ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)
    NAME = b"intptr_t (int)" if MODE == "other signature" else b"intptr_t (void)"
    # PyErr_NoMemory() takes nothing and returns a pointer (NULL), with MemoryError set: a
    # C function of this shape that raises, as a Cython one does.
    fn = ctypes.pythonapi.PyErr_NoMemory if MODE == "raises" else ctypes.CFUNCTYPE(
        ctypes.c_ssize_t)(lambda: 0x880)
    capi = {} if MODE == "no C API" else {"get_current_stream_ptr": capsule_new(
        ctypes.cast(fn, ctypes.c_void_p).value, NAME, None)}
    calls = []

    def get_current_stream():
        calls.append(1)
        return ns(ptr=0x881)

    cupy = types.ModuleType("cupy")
    cupy.cuda = ns(stream=ns(__pyx_capi__=capi), get_current_stream=get_current_stream,
                   memory=ns(ManagedMemory=type("ManagedMemory", (), {})))

    class ndarray:
        def __init__(self, ptr):
            self.data = ns(ptr=ptr, device_id=0, mem=None)
            self.dtype = np.dtype("float32")
    ndarray.__module__ = "cupy"
    cupy.ndarray = ndarray
    sys.modules["cupy"] = cupy

    import kernarg
    for _ in range(3):
        try:
            block = kernarg.pack((1, ndarray(0x2000)))
        except MemoryError as exc:
            print("MemoryError:", exc)
        else:
            print(hex(block.producer_streams[0]), len(calls))
    # What the GPU breakdown benchmark reports: the route, and the C function's time alone.
    from kernarg._interop import _cupy_stream_route
    print("route", _cupy_stream_route()[0])
    if MODE == "C API":
        route, seconds = _cupy_stream_route(100)
        print("timed", route, seconds > 0, len(calls))
""")


@pytest.mark.parametrize("mode, expected", [
    ("C API", ["0x880 0"] * 3 + ["route C API", "timed C API True 0"]),
    ("raises", ["MemoryError: argument 1 (cupy.ndarray): CuPy's current stream could not be "
                "read: MemoryError: "] * 3 + ["route C API"]),
    ("other signature", ["0x881 1", "0x881 2", "0x881 3", "route Python"]),
    ("no C API", ["0x881 1", "0x881 2", "0x881 3", "route Python"]),
])
def test_cupy_current_stream(mode, expected):
    out = subprocess.run([sys.executable, "-c", f"MODE = {mode!r}\n" + CUPY_SCRIPT],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == expected


# How the torch adapter (torch < 2.10) reads torch's current stream: through
# torch._C._cuda_getCurrentRawStream(device), one C call in a CUDA build of torch, else through
# torch.cuda.current_stream(device).cuda_stream, which builds a Stream object first.
TORCH_SCRIPT = textwrap.dedent("""
    import sys, types
    ns = types.SimpleNamespace
    calls = []

    def current_stream(device):
        calls.append(("current_stream", device))
        return ns(cuda_stream=0x770 + device)

    ODD = [1.5, -1, True, 2**64, "7", None, __import__("numpy").uint64(0x995), 2**63, 0]

    def raw(device):
        calls.append(("raw", device))
        if MODE == "raw raises":
            raise RuntimeError("CUDA error: injected")
        if MODE == "odd answers":
            return ODD[len(calls) - 1]
        return 0x990 + device

    torch = types.ModuleType("torch")
    torch.cuda = ns(current_stream=current_stream)
    if MODE != "no raw":
        torch._C = ns(_cuda_getCurrentRawStream=raw)

    class Tensor:
        is_cuda = True
        def __init__(self, ptr, device):
            self.ptr, self.device = ptr, device
        def data_ptr(self):
            return self.ptr
        def get_device(self):
            return self.device
        def is_conj(self):
            return False
        def is_neg(self):
            return False
    Tensor.__module__ = "torch"
    torch.Tensor = Tensor
    sys.modules["torch"] = torch

    import kernarg
    for device in (0, 1, 0) if MODE != "odd answers" else [0] * len(ODD):
        try:
            block = kernarg.pack((1, Tensor(0x1000, device)))
        except (RuntimeError, TypeError, OverflowError) as exc:
            print(f"{type(exc).__name__}:", exc)
        else:
            print(hex(block.producer_streams[0]), calls[-1])
""")


@pytest.mark.parametrize("mode, expected", [
    ("raw", ["0x990 ('raw', 0)", "0x991 ('raw', 1)", "0x990 ('raw', 0)"]),
    ("no raw", ["0x770 ('current_stream', 0)", "0x771 ('current_stream', 1)",
                "0x770 ('current_stream', 0)"]),
    ("raw raises", ["RuntimeError: argument 1 (torch.Tensor): reading the torch tensor raised "
                    "RuntimeError: CUDA error: injected"] * 3),
    # A stream handle is an int (or an __index__) in 0 .. 2**64-1: anything else is refused
    # naming the argument, not read by int() as another stream (1.5 as stream 1). Handle 0 is
    # the legacy default stream, recorded as 1.
    ("odd answers", [
        f"{cls}: argument 1 (torch.Tensor): reading the torch tensor raised {cls}: torch's "
        f"current stream is {what}" for cls, what in [
            ("TypeError", "float, expected an int stream handle"),
            ("OverflowError", "-1, outside 0 .. 2**64-1"),
            ("TypeError", "bool, expected an int stream handle"),
            ("OverflowError", "18446744073709551616, outside 0 .. 2**64-1"),
            ("TypeError", "str, expected an int stream handle"),
            ("TypeError", "NoneType, expected an int stream handle")]]
        + ["0x995 ('raw', 0)", "0x8000000000000000 ('raw', 0)", "0x1 ('raw', 0)"]),
])
def test_torch_current_stream(mode, expected):
    out = subprocess.run([sys.executable, "-c", f"MODE = {mode!r}\n" + TORCH_SCRIPT],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == expected


def _pycuda_types():
    """Stand-ins for PyCUDA's pointer classes (Boost.Python classes of ``pycuda._driver``): each
    gives its device address as ``int()``/``__index__``, which is all PyCUDA's own launches use."""
    class DeviceAllocation:
        def __init__(self, ptr):
            self.ptr = ptr

        def __int__(self):
            return self.ptr

        __index__ = __int__

    class PooledDeviceAllocation(DeviceAllocation):
        pass

    class PointerHolderBase:
        def __int__(self):
            return self.get_pointer()

    for t in (DeviceAllocation, PooledDeviceAllocation, PointerHolderBase):
        t.__module__ = "pycuda._driver"
    return DeviceAllocation, PooledDeviceAllocation, PointerHolderBase


def test_pycuda_device_pointers():
    import kernarg

    DeviceAllocation, PooledDeviceAllocation, PointerHolderBase = _pycuda_types()

    class Holder(PointerHolderBase):            # the user's subclass, as PyCUDA's docs show
        def __init__(self, ptr):
            self.ptr = ptr

        def get_pointer(self):
            if self.ptr is None:
                raise RuntimeError("no memory yet")
            return self.ptr

    args = (DeviceAllocation(0x7F00_0000_1000), PooledDeviceAllocation(0x2000), Holder(0x3000))
    block = kernarg.pack(args)
    assert block.sizes == (8, 8, 8)
    assert [int.from_bytes(bytes(block)[o:o + 8], "little") for o in block.offsets] == \
        [0x7F00_0000_1000, 0x2000, 0x3000]
    assert block.producer_streams == ()
    # Typed: a PyCUDA allocation has no element type, so any pointee is taken.
    typed = kernarg.Signature("float* a, const int* b, double* c").pack(args)
    assert bytes(typed) == bytes(block)
    with pytest.raises(RuntimeError, match=r"argument 1 \(.*Holder\): int\(\) of the PyCUDA "
                                           "pointer raised RuntimeError: no memory yet"):
        kernarg.pack((1, Holder(None)))
    with pytest.raises(OverflowError, match="argument 0 .* outside 0 .. 2\\*\\*64-1"):
        kernarg.pack((DeviceAllocation(-8),))
    with pytest.raises(TypeError, match=r"^parameter 0 \('p'\): argument 0 \(.*Holder\): int\(\) "
                                        "of the PyCUDA pointer raised TypeError"):
        kernarg.Signature("float* p").pack((Holder("0x10"),))
    # A class of another module with the same name is not PyCUDA's.
    lookalike = type("DeviceAllocation", (), {"__int__": lambda self: 0x1000})
    with pytest.raises(TypeError, match="unsupported kernel argument"):
        kernarg.pack((lookalike(),))


def _reference_mro_find(t, prefix, name):
    return next((b for b in t.__mro__
                 if b.__name__ == name and (b.__module__ or "").startswith(prefix)), None)


def test_library_types_are_recognised_by_their_python_names():
    # kernarg reads a base's name from the type object (a heap type's ht_name, a static type's
    # tp_name after its last dot) instead of building __name__; it must find what __name__
    # would. The types cover every kind of type object: class statements, renamed classes and
    # names with dots, static types (int, numpy's, torch's C classes), heap types made from a
    # C spec whose tp_name has the module in it (_csv.reader), and Cython classes.
    import array
    import csv

    import numpy as np
    from cuda.bindings import driver

    import kernarg
    from kernarg import _interop

    class Stream:
        pass

    Stream.__module__ = "pycuda._driver"

    class Sub(Stream):
        pass

    Renamed = type("Before", (Stream,), {"__module__": "pycuda.x"})
    Renamed.__name__ = "Tensor"
    Dotted = type("torch.Tensor", (), {"__module__": "torch"})
    types = [Stream, Sub, Renamed, Dotted, int, bool, object, np.float32, np.ndarray, array.array,
             type(csv.reader([])), driver.CUstream, type(kernarg.pack(())), kernarg.Signature]
    try:
        import torch

        types += [torch.Tensor, torch.nn.Parameter, torch.cuda.Stream]
    except ImportError:
        pass
    for t in types:
        names = {b.__name__ for b in t.__mro__} | {"Tensor", "torch.Tensor", "Stream", "reader",
                                                   "_csv.reader", "float32", "numpy.float32",
                                                   "object", "", "CUstream"}
        modules = {(b.__module__ or "") for b in t.__mro__} | {"", "torch", "pycuda", "numpy",
                                                               "_csv", "x"}
        for name in names:
            for prefix in modules:
                assert _interop._mro_find(t, prefix, name) is _reference_mro_find(
                    t, prefix, name), (t, prefix, name)
    # and the cases above do exercise a match of each kind
    assert _interop._mro_find(type(csv.reader([])), "_csv", "reader") is type(csv.reader([]))
    assert _interop._mro_find(np.float32, "numpy", "float32") is np.float32
    assert _interop._mro_find(Sub, "pycuda", "Stream") is Stream
    assert _interop._mro_find(Renamed, "pycuda", "Tensor") is Renamed
    assert _interop._mro_find(Renamed, "pycuda", "Before") is None
    assert _interop._mro_find(Dotted, "torch", "torch.Tensor") is Dotted
    assert _interop._mro_find(Dotted, "torch", "Tensor") is None


# A property of the torch adapter (torch before 2.10), whatever each read answers: a bool, an
# int of any size, a float, a string, None, an object, or a value whose every use raises. The
# tensor packs with the address data_ptr() gave, and, on CUDA, torch's current stream recorded
# for the launch to wait on; or it is refused with an exception that names the argument.
TORCH_PROPERTY_SCRIPT = textwrap.dedent("""
    import struct, sys
    import numpy as np
    from hypothesis import given, settings, strategies as st

    class Raises:
        def __bool__(self): raise RuntimeError("bool of a broken value")
        def __index__(self): raise RuntimeError("index of a broken value")
        def __int__(self): raise RuntimeError("int of a broken value")
        def __str__(self): raise RuntimeError("str of a broken value")
        __hash__ = object.__hash__

    sys.path.insert(0, sys.argv[2])
    from producers import TorchDtype as Dtype, TorchTensor as Tensor, install_torch

    STREAM = [0]
    install_torch(lambda device: STREAM[0])
    import kernarg

    odd = st.one_of(st.none(), st.booleans(), st.integers(-2**65, 2**65), st.floats(),
                    st.text(max_size=3), st.builds(Raises), st.builds(object),
                    st.just(np.True_), st.builds(np.uint64, st.integers(0, 2**64 - 1)),
                    st.just(KeyError("injected")))
    address = st.integers(0, 2**64 - 1)
    READS = {"is_cuda", "device", "dtype", "is_pinned", "data_ptr", "get_device", "is_conj",
             "is_neg"}
    # The usual answers, then at most two of them replaced by odd ones.
    usual = st.fixed_dictionaries({
        "is_cuda": st.sampled_from([True, True, False]),
        "device": st.sampled_from(["cuda:0", "cpu", "cpu", "meta", "mps:0"]),
        "dtype": st.builds(Dtype, st.sampled_from(["float32", "int8", "qint8"])),
        "is_pinned": st.sampled_from([True, True, False]),
        "data_ptr": address,
        "get_device": st.integers(-1, 3),
        "is_conj": st.sampled_from([False] * 7 + [True]),
        "is_neg": st.sampled_from([False] * 7 + [True]),
    })
    reads = st.builds(lambda u, o: {**u, **o}, usual,
                      st.dictionaries(st.sampled_from(sorted(READS)), odd, max_size=2))

    def truth(value):
        return bool(value) if not isinstance(value, (Raises, Exception)) else None

    checked = {"packed": 0, "refused": 0}

    @settings(max_examples=int(sys.argv[1]), deadline=None, database=None)
    @given(reads, st.one_of(address, address, address, odd), st.booleans())
    def test(reads, stream, typed):
        STREAM[0] = stream
        t = Tensor(reads)
        pack = kernarg.Signature("int n, const void* p").pack if typed else kernarg.pack
        try:
            block = pack((7, t))
        except (TypeError, ValueError, OverflowError, RuntimeError, KeyError) as exc:
            checked["refused"] += 1
            named = "parameter 1 ('p'): argument 1 (torch.Tensor)" if typed else \\
                "argument 1 (torch.Tensor)"
            text = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
            assert text.startswith(named), (reads, stream, exc)   # (str() quotes a KeyError)
            return
        checked["packed"] += 1
        cuda = truth(reads["is_cuda"])
        assert cuda or truth(reads["is_pinned"]), reads
        assert truth(reads["is_conj"]) is False and truth(reads["is_neg"]) is False, reads
        ptr = reads["data_ptr"]
        assert type(ptr) is int or isinstance(ptr, np.integer) and ptr.dtype != np.bool_, reads
        assert struct.unpack_from("<Q", bytes(block), block.offsets[1])[0] == int(ptr)
        if cuda:
            assert type(stream) is int or isinstance(stream, np.uint64), (reads, stream)
            assert block.producer_streams == (int(stream) or 1,), (stream, block)
        else:
            assert block.producer_streams == ()

    test()
    print(checked["packed"] > 50 and checked["refused"] > 50, checked)
""")


def test_any_torch_tensor_packs_its_address_and_stream_or_is_refused_by_name():
    pytest.importorskip("hypothesis")
    out = subprocess.run([sys.executable, "-c", TORCH_PROPERTY_SCRIPT, "400",
                          os.path.dirname(os.path.abspath(__file__))],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("True "), out.stdout
