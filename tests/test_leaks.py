"""A million packs of every argument kind leave reference counts and memory flat."""
import ctypes
import gc
import sys
import tracemalloc

import ml_dtypes
import numpy as np
from cuda.core import Buffer

import kernarg

from producers import CAIObject, DLPackProducer, cai

N = 1_000_000


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


class Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double)]


class QuietProducer(DLPackProducer):
    """Exports without recording each call's arguments (the base class keeps that history)."""

    def __dlpack__(self, *, stream=None, max_version=None):
        return self._export(versioned=max_version is not None)


class Handle:
    """A pointer-like type taught to kernarg with kernarg.register."""

    def __init__(self, address):
        self.address = address


kernarg.register(Handle, lambda h: h.address)


def _args():
    rec = np.array([(1, 2.0)], dtype=np.dtype([("a", np.int8), ("b", np.float64)],
                                               align=True))[0]
    return (True, 5, 2**63 + 1, -1.5, 1 + 2j, None, np.float32(1), np.float16(2),
            np.complex64(1j), ml_dtypes.bfloat16(3), rec, ctypes.c_int(4), Pair(1, 2.0),
            (ctypes.c_int * 3)(), ctypes.c_void_p(16), Buffer.from_handle(0x1000, 8),
            CAIObject(cai(0x2000, stream=7)), QuietProducer(0x3000), Handle(0x4000))


def _run(args, n):
    pack = kernarg.pack
    for _ in range(n):
        pack(args)


def _own_refcounts(args):
    # Singletons (True, None, cached small ints) are shared with the whole process.
    return [sys.getrefcount(a) for a in args if a is not None and type(a) is not bool
            and not (type(a) is int and -5 <= a <= 256)]


def test_million_packs_every_kind_flat():
    args = _args()
    before_refs = _own_refcounts(args)
    _run(args, 10_000)   # warm caches, pools and freelists
    gc.collect()
    rss0 = _rss_bytes()
    tracemalloc.start()
    snap0 = tracemalloc.get_traced_memory()[0]
    _run(args, N)
    gc.collect()
    snap1 = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    rss1 = _rss_bytes()
    assert _own_refcounts(args) == before_refs
    dlpack = args[-2]
    assert dlpack.exported == dlpack.deleted == N + 10_000   # every capsule released once
    assert snap1 - snap0 < 64 * 1024, f"traced memory grew by {snap1 - snap0} bytes"
    assert rss1 - rss0 < 16 * 2**20, f"RSS grew by {rss1 - rss0} bytes"


def test_dlpack_packs_release_every_capsule():
    prod = DLPackProducer(0x3000)
    # A baseline, not a literal: CPython 3.14 passes a local to getrefcount without a new
    # reference (it reads 1 where 3.13 reads 2).
    before = sys.getrefcount(prod)
    for _ in range(20_000):
        kernarg.pack((prod, 1, prod))
    gc.collect()
    assert prod.exported == 40_000 and prod.deleted == 40_000
    assert sys.getrefcount(prod) == before


def test_error_paths_do_not_leak():
    args = (1000.5, CAIObject(cai(0x10)), object())
    before = [sys.getrefcount(a) for a in args]
    for _ in range(50_000):
        try:
            kernarg.pack(args)
        except TypeError:
            pass
    assert [sys.getrefcount(a) for a in args] == before


class _NoInterfaceHere(QuietProducer):
    @property
    def __cuda_array_interface__(self):
        raise AttributeError("no CUDA Array Interface for this array")


def test_cai_attribute_error_fallback_does_not_leak():
    # The CUDA Array Interface's AttributeError, caught, then DLPack: a pointer on CUDA, the
    # CPU refusal on the host. Neither keeps the exception, the producer or a capsule.
    gpu, cpu = _NoInterfaceHere(0x3000), _NoInterfaceHere(0x3000, device=(1, 0))
    before = [sys.getrefcount(gpu), sys.getrefcount(cpu)]
    for _ in range(50_000):
        kernarg.pack((gpu, 1))
        try:
            kernarg.pack((1, cpu))
        except TypeError:
            pass
    gc.collect()
    assert gpu.exported == gpu.deleted == 50_000
    assert [sys.getrefcount(gpu), sys.getrefcount(cpu)] == before


def test_bound_launches_hold_and_release_their_arguments():
    # bind() packs once and holds the block; close() or collection lets go of it (and of the
    # DLPack tensor, whose deleter then runs once).
    k = kernarg.Kernel.from_handle(0x1234, name="k")
    prepared = k.prepare(1, 1)
    args = _args()
    dlpack = args[-2]
    before = _own_refcounts(args)
    for i in range(20_000):
        bound = prepared.bind(*args)
        if i % 2:
            bound.close()
        del bound
    gc.collect()
    assert _own_refcounts(args) == before
    assert dlpack.exported == dlpack.deleted == 20_000


def test_refused_stack_launches_free_what_they_packed():
    # A launch of up to 16 untyped arguments packs them on the C stack, and past 256 bytes
    # moves their area to the heap, as a block does. A launch refused after packing (here by
    # the kernel's parameter layout, before any driver call) frees that area and runs the
    # deleter of each DLPack tensor it consumed, once.
    from collections import namedtuple

    info = namedtuple("ParamInfo", "offset size")
    core_kernel = type("Kernel", (), {
        "__module__": "cuda.core._module", "_handle": 0x1234,
        "arguments_info": [info(0, 8), info(8, 300), info(308, 8)]})()
    big = np.zeros((), dtype=[("v", "u1", 300)])[()]
    dlpack = QuietProducer(0x3000)
    args = (dlpack, big, np.int32(1))       # parameter 2 is 8 bytes: refused
    cfg = kernarg.LaunchConfig(1, 1)
    before = _own_refcounts(args)
    rss0 = _rss_bytes()
    for _ in range(100_000):
        try:
            kernarg.launch(None, cfg, core_kernel, *args)
        except TypeError as exc:
            message = str(exc)
    gc.collect()
    assert "argument 2 (numpy.int32) packs as 4 bytes at offset 308" in message
    assert _rss_bytes() - rss0 < 8 * 2**20         # 512 bytes a launch would be 51 MB
    assert _own_refcounts(args) == before
    assert dlpack.exported == dlpack.deleted == 100_000


def test_cuda_core_configs_in_turn_hold_only_what_their_slots_hold():
    # kernarg.launch remembers the four cuda.core configs it found or converted last, holding
    # their field values. Six in turn miss every time: each call fills the first slot and drops
    # the last one's references. After whole rounds, every reference taken has been dropped.
    import pytest

    from kernarg._launch import _config_from

    core = pytest.importorskip("cuda.core")
    try:
        configs = [core.LaunchConfig(grid=g, block=(32, 2), shmem_size=1024 + g)
                   for g in range(1, 7)]
    except Exception as exc:                # cuda.core 0.5 asks the driver for its version
        pytest.skip(f"this cuda.core needs a CUDA driver to build a LaunchConfig: {exc!r}")
    fields = [(c.grid, c.block) for c in configs]
    for c in configs:
        _config_from(c)
    before = [sys.getrefcount(f) for pair in fields for f in pair]
    rss0 = _rss_bytes()
    for _ in range(N // 6):
        for c in configs:
            _config_from(c)
    assert [sys.getrefcount(f) for pair in fields for f in pair] == before
    assert _rss_bytes() - rss0 < 8 * 2**20
    assert [_config_from(c).shmem for c in configs] == [1024 + g for g in range(1, 7)]


class _Device:
    def __init__(self, platform):
        self.platform, self.client = platform, type("Client", (), {"platform": "cuda"})()
        self.id = self.local_hardware_id = 0


class _Sharding:
    def __init__(self, platform):
        self._device, self.memory_kind = _Device(platform), "device"


class ArrayImpl:
    """Stands in for jaxlib's array type (recognised by module and name): the JAX adapter's
    success path, and its refusals of CPU arrays and deleted ones."""

    def __init__(self, platform="gpu", deleted=False):
        self.sharding, self.deleted, self.dtype = _Sharding(platform), deleted, np.dtype("f4")

    def unsafe_buffer_pointer(self):
        if self.deleted:
            raise RuntimeError("deleted")
        return 0x5000


ArrayImpl.__module__ = "jaxlib._jax"


def test_jax_adapter_paths_do_not_leak():
    good, cpu, deleted = ArrayImpl(), ArrayImpl("cpu"), ArrayImpl(deleted=True)
    sig = kernarg.Signature("const float* x")
    objs = (good, good.sharding, cpu, cpu.sharding, deleted)
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(100_000):
        kernarg.pack((good, good))
        sig.pack((good,))
        for bad in (cpu, deleted):
            try:
                kernarg.pack((bad,))
            except (TypeError, RuntimeError):
                pass
    del bad
    gc.collect()
    # The adapter keeps one reference to the last sharding it accepted: the deleted array's,
    # which is not among these.
    assert [sys.getrefcount(o) for o in objs] == before


PinnedMemoryPointer = type("PinnedMemoryPointer", (bytearray,),
                           {"__module__": "cupy.cuda.pinned_memory"})


def test_numpy_array_paths_do_not_leak():
    # A numpy array over pinned memory (found down .base, through a view and a memoryview),
    # typed and untyped, and the refusal of one over pageable memory.
    memory = PinnedMemoryPointer(64)
    pinned = np.asarray(memoryview(np.frombuffer(memory, np.float32)[2:]))
    pageable = np.zeros(4, np.float32)
    sig = kernarg.Signature("const float* x")
    objs = (memory, pinned, pageable)
    before = [sys.getrefcount(o) for o in objs]
    for _ in range(100_000):
        kernarg.pack((pinned, 1))
        sig.pack((pinned,))
        try:
            kernarg.pack((pageable,))
        except TypeError:
            pass
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


class _Refused(Exception):
    pass


def test_adapter_errors_do_not_leak():
    # An exception a library's object raises while kernarg reads it is fetched, named and
    # raised again (pointer_of; the Buffer fast paths read the handle without Cython's
    # error check): neither the object nor the exception's class gains a reference, and a
    # handle read that succeeds on the same path keeps none either.
    def raise_it(self):
        raise _Refused("the library's own error")

    tensor_type = type("Tensor", (), {"__module__": "torch", "is_cuda": property(raise_it)})
    buffer_type = type("Buffer", (), {"__module__": "cuda.core._memory._buffer",
                                      "handle": property(raise_it)})
    good_type = type("Buffer", (), {"__module__": "cuda.core._memory._buffer",
                                    "handle": property(lambda self: self.address),
                                    "memory_resource": None})
    good = good_type()
    good.address = 0x1000 + 2**62       # a big int: a reference the read hands over
    # A leaked exception would hold its class (and its traceback, the object).
    objs = (tensor_type(), buffer_type(), good, _Refused, good.address)
    sig = kernarg.Signature("float* p")
    before = [sys.getrefcount(o) for o in objs]
    _pack_refused_and_good(objs[:2], good, sig, 50_000)
    gc.collect()
    assert [sys.getrefcount(o) for o in objs] == before


def _pack_refused_and_good(refused, good, sig, n):
    # A function of its own, so that no loop variable outlives it.
    for _ in range(n):
        for pack in (kernarg.pack, sig.pack):
            for bad in refused:
                try:
                    pack((bad,))
                except _Refused:
                    pass
            pack((good,))


class _MethodStream:
    def __init__(self, answer):
        self.answer = answer

    def __cuda_stream__(self):
        if isinstance(self.answer, type):
            raise self.answer("inside")         # a new one each time: a raised exception
        return self.answer                      # keeps its traceback, which grows


def test_stream_resolution_does_not_leak():
    # A __cuda_stream__ method is called without a bound method (kernarg/_stream.pyx): its
    # result, its handle and what it raises are all let go, on the usual path and the others.
    big = 2**63 + 5
    good, big_handle = _MethodStream((0, 0x3000)), _MethodStream((0, big))
    bad = [_MethodStream((1, 5)), _MethodStream(RuntimeError), _MethodStream(AttributeError)]
    held = _MethodStream((0, 0x4000))
    held.__cuda_stream__ = (0, 0x4000)          # an instance's own pair: the fallback
    objects = [good, big_handle, held, *bad]
    before = [sys.getrefcount(o) for o in objects] + [sys.getrefcount(good.answer)]
    for _ in range(50_000):
        assert kernarg.resolve_stream(good) == 0x3000
        assert kernarg.resolve_stream(big_handle) == big
        assert kernarg.resolve_stream(held) == 0x4000
        for o in bad:
            try:
                kernarg.resolve_stream(o)
            except (TypeError, ValueError):
                pass
    del o                                       # the loop's own reference
    gc.collect()
    assert [sys.getrefcount(o) for o in objects] + [sys.getrefcount(good.answer)] == before
