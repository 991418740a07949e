"""Total throughput of kernarg.pack and Signature.pack from one thread and from two at once, on
a free-threaded CPython (3.14t): whether threads pack in parallel.

Why: on a free-threaded build kernarg's code runs inside one critical section, but for
``kernarg.pack`` and ``Signature.pack`` of exact ints, floats and bools, which enter it only at
the first argument that needs it (docs/development.md, "Free-threaded CPython"), and numpy
scalars, ctypes values and cuda.core Buffers, whose types the per-type cache knows (read under
its sequence lock), numpy.void scalars of a struct parameter's own dtype, and objects whose
type has a CUDA Array Interface (the usual dict, read under its own lock), speaks DLPack or
has DLPack's C exchange API (torch's tensors, cuda.core's views), which need none either, nor
the library adapters' arrays (here a numba and a JAX array, stand-ins of their types), nor
numpy arrays over pinned memory (here over a stand-in of CuPy's pinned allocation), nor ctypes
pointers made from ints.
Two threads packing those should then get up to twice one thread's throughput. The signatures
are shared by the threads, as one kernel's is. A loop of pure Python code gives the
interpreter's own scaling on the same machine, which bounds what any extension can show there.

Each thread packs its own argument tuple, made at run time: a tuple written as a constant in
the loop's code is one object whose reference count both threads change, which alone holds two
threads to one thread's throughput. Each row is the best of ``--repeat`` runs of ``--n`` packs
per thread: (ns per pack from one thread, ns per pack from two, their ratio).

Run from the repository root, with kernarg built in place for the free-threaded Python:
    python3.14t tools/probes/pack_threads.py [--n 2000000] [--repeat 3]
On a GIL build it runs too, and two threads take turns.

With ``--launches`` it times launches instead (Kernel.launch and a prepared launch of a kernel
compiled with NVRTC, typed and untyped, and ``kernarg.launch``, cuda.core's call form, of it,
of its handle (an int) and of cuda.core's own Kernel; each thread on a stream of its own),
which need a driver: run it under tools/fakecuda/run.sh, whose launches cost little and run
nothing on a GPU. What it shows is kernarg's side of a launch, not a GPU's:
    tools/fakecuda/run.sh python3.14t tools/probes/pack_threads.py --launches
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import itertools
import json
import os
import sys
import threading
import time

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, _ROOT)

import numpy as np  # noqa: E402
from cuda.core import Buffer  # noqa: E402

import kernarg  # noqa: E402

# The benchmark's producers: an array whose property builds its CUDA Array Interface dict at
# each read, as CuPy's and numba's do, and one that exports numpy's own DLPack capsules as
# CUDA memory.
from kernarg._bench import _DLPackView, _PropertyCAI  # noqa: E402

_SIG3 = kernarg.Signature("float* out, float alpha, int n")


class _Pair(ctypes.Structure):
    _fields_ = [("a", ctypes.c_int8), ("b", ctypes.c_double)]


_SIGS = kernarg.Signature(["float*", _Pair, "int"])


class _Held(ctypes.Structure):      # a device pointer and its length, as ctypes code has them
    _fields_ = [("p", ctypes.c_void_p), ("n", ctypes.c_int)]


_SIGH = kernarg.Signature(["float*", _Held, "int"])
_PAIR = np.dtype([("a", np.int8), ("b", np.float64)], align=True)
_SIGV = kernarg.Signature(["float*", _PAIR, "int"])



def _exchange_view():
    """A cuda.core StridedMemoryView, whose type has the DLPack C exchange API from cuda-core
    1.0 (read in C, as torch's tensors are from torch 2.10), of a test producer's DLPack export
    of device memory that nothing dereferences. (An older cuda.core's view takes kernarg's
    adapter instead, in the section.)"""
    tests = os.path.join(_ROOT, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from cuda.core.utils import StridedMemoryView

    from producers import DLPackProducer

    return StridedMemoryView.from_dlpack(DLPackProducer(1 << 32, device=(2, 0)), stream_ptr=-1)


_SIG8 = kernarg.Signature("int a, long long b, float c, double d, bool e, short f, unsigned g, "
                          "__half h")


# Arrays that kernarg's library adapters read, as tests/test_adapters.py's stand-ins are: a
# numba device array (its ctypes pointer, dtype and stream) and a JAX array on one GPU (its
# sharding, dtype and unsafe_buffer_pointer()), recognised by module and name.
class DeviceNDArray:
    dtype = np.dtype("float32")
    stream = 0

    def __init__(self, ptr):
        self.device_ctypes_pointer = ctypes.c_void_p(ptr)


DeviceNDArray.__module__ = "numba.cuda.cudadrv.devicearray"


class _JaxDevice:
    platform, id, local_hardware_id = "gpu", 0, 0
    client = type("Client", (), {"platform": "cuda"})()


class _JaxSharding:
    _device, memory_kind = _JaxDevice(), "device"


class ArrayImpl:
    dtype = np.dtype("float32")
    sharding = _JaxSharding()

    def __init__(self, ptr):
        self.ptr = ptr

    def unsafe_buffer_pointer(self):
        return self.ptr


ArrayImpl.__module__ = "jaxlib._jax"

# Page-locked host memory from CUDA's allocator, as cupyx.empty_pinned's owner is (kernarg
# recognises its type by module and name): a numpy array over it is taken at its address.
PinnedMemoryPointer = type("PinnedMemoryPointer", (bytearray,),
                           {"__module__": "cupy.cuda.pinned_memory"})


def _pinned_array():
    return np.frombuffer(PinnedMemoryPointer(4096), np.float32)[16:]


class _Handle:
    """A pointer type of the user's own, taught with kernarg.register."""

    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr


def _handle_address(h):
    return h.ptr


kernarg.register(_Handle, _handle_address)

_SIGC = kernarg.Signature("const float* x, float alpha, int n")

# name: (the function each thread calls, or the signature whose pack it calls; a function making
# the thread's own argument tuple), or None: the loop of pure Python code. Each thread binds
# its own Signature.pack: one bound method that both threads call is one more object whose
# reference count both change (kernarg.pack's is deferred, see development.md).
CASES = {
    "pack 1 int": (kernarg.pack, lambda: tuple([5])),
    "pack 16 ints": (kernarg.pack, lambda: tuple(range(16))),
    "pack 4 ints + 4 floats": (kernarg.pack, lambda: tuple([1, 2, 3, 4, 0.5, 1.5, 2.5, 3.5])),
    "pack 1 numpy.float32": (kernarg.pack, lambda: (np.float32(2.0),)),
    "pack 4 numpy scalars": (kernarg.pack, lambda: (np.float32(2.0), np.int32(3),
                                                    np.float64(0.5), np.uint8(1))),
    "pack 2 Buffers + numpy.float32 + int": (kernarg.pack, lambda: (
        Buffer.from_handle(1 << 32, 256), Buffer.from_handle(2 << 32, 256), np.float32(2.0),
        1024)),
    "pack 1 ctypes.c_float": (kernarg.pack, lambda: (ctypes.c_float(2.0),)),
    "pack 4 ctypes values": (kernarg.pack, lambda: (ctypes.c_float(2.0), ctypes.c_int32(3),
                                                    ctypes.c_double(0.5), _Pair(1, 2.0))),
    "Signature.pack 3 (pointer as int, float, int)": (_SIG3, lambda: tuple([1 << 32, 0.5,
                                                                            1024])),
    "Signature.pack 8 numbers": (_SIG8, lambda: tuple([1, -2, 0.5, 0.25, True, -3, 7, 1.5])),
    "Signature.pack 3 (Buffer, numpy.float32, numpy.int32)": (_SIG3, lambda: (
        Buffer.from_handle(1 << 32, 256), np.float32(0.5), np.int32(1024))),
    "Signature.pack 3 (int, ctypes.c_float, ctypes.c_int32)": (_SIG3, lambda: (
        1 << 32, ctypes.c_float(0.5), ctypes.c_int32(1024))),
    "Signature.pack 3 (int, ctypes struct, int)": (_SIGS, lambda: (1 << 32, _Pair(1, 2.0), 3)),
    "pack 3 (int, numpy.void, int)": (kernarg.pack, lambda: (
        1 << 32, np.array((1, 2.0), _PAIR)[()], 3)),
    "Signature.pack 3 (int, numpy.void, int)": (_SIGV, lambda: (
        1 << 32, np.array((1, 2.0), _PAIR)[()], 3)),
    "pack 3 (CAI array, CAI array, int)": (kernarg.pack, lambda: (
        _PropertyCAI(1 << 32), _PropertyCAI(2 << 32), 3)),
    "Signature.pack 3 (CAI array, float, int)": (_SIG3, lambda: (_PropertyCAI(1 << 32), 0.5,
                                                                 3)),
    "pack 2 (DLPack array, int)": (kernarg.pack, lambda: (_DLPackView(), 3)),
    "pack 2 (DLPack C exchange API view, int)": (kernarg.pack, lambda: (_exchange_view(), 3)),
    "Signature.pack 3 (DLPack C exchange API view, float, int)": (_SIG3, lambda: (
        _exchange_view(), 0.5, 3)),
    "pack 2 (numba array, int)": (kernarg.pack, lambda: (DeviceNDArray(1 << 32), 3)),
    "Signature.pack 3 (JAX array, float, int)": (_SIGC, lambda: (ArrayImpl(1 << 32), 0.5, 3)),
    "pack 2 (ctypes.c_void_p, int)": (kernarg.pack, lambda: (ctypes.c_void_p(1 << 32), 3)),
    "Signature.pack 3 (ctypes.c_void_p, float, int)": (_SIGC, lambda: (
        ctypes.c_void_p(1 << 32), 0.5, 3)),
    "pack 2 (numpy array over pinned memory, int)": (kernarg.pack, lambda: (_pinned_array(),
                                                                            3)),
    "Signature.pack 3 (numpy array over pinned memory, float, int)": (_SIGC, lambda: (
        _pinned_array(), 0.5, 3)),
    "pack 2 (POINTER(c_float) cast from a c_void_p, int)": (kernarg.pack, lambda: (
        ctypes.cast(ctypes.c_void_p(1 << 32), ctypes.POINTER(ctypes.c_float)), 3)),
    "Signature.pack 3 (POINTER(c_float) cast from a c_void_p, float, int)": (_SIGC, lambda: (
        ctypes.cast(ctypes.c_void_p(1 << 32), ctypes.POINTER(ctypes.c_float)), 0.5, 3)),
    "pack 3 (int, ctypes struct holding a cast c_void_p, int)": (kernarg.pack, lambda: (
        1 << 32, _Held(ctypes.cast(ctypes.c_void_p(1 << 32), ctypes.c_void_p), 8), 3)),
    "Signature.pack 3 (int, ctypes struct holding a cast c_void_p, int)": (_SIGH, lambda: (
        1 << 32, _Held(ctypes.cast(ctypes.c_void_p(1 << 32), ctypes.c_void_p), 8), 3)),
    "pack 2 (registered type, int)": (kernarg.pack, lambda: (_Handle(1 << 32), 3)),
    "Signature.pack 3 (registered type, float, int)": (_SIGC, lambda: (_Handle(1 << 32), 0.5,
                                                                       3)),
    "pure Python loop": None,
}


# The kernel the launch cases launch: it writes n floats, and they launch it with n = 0, so
# the array's pointer (a _PropertyCAI's) is never followed.
_FILL = r"""extern "C" __global__ void fill(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }"""


class _ProducedCAI(_PropertyCAI):
    """An interface array whose producer stream (``stream``) a launch on another stream waits
    on: an event recorded there, waited on by the launch stream."""

    def __init__(self, ptr, stream):
        super().__init__(ptr)
        self.stream = stream

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": self.stream}


def _on_stream_object(k, handle):
    """A thread's launcher of ``k`` on a cuda.core Stream object of its stream ``handle``:
    the handle is read from the object at each launch, as code that passes a stream object
    does."""
    from kernarg._bench import cuda_core

    stream = cuda_core().Stream.from_handle(handle)
    return lambda *a: k.launch(1, 32, *a, stream=stream)


def _core_launcher(k, handle):
    """A thread's launcher in cuda.core's call form: ``kernarg.launch`` of cuda.core's own
    Kernel (``k``), with a cuda.core LaunchConfig, on a cuda.core Stream of its stream
    ``handle``, as code written for ``cuda.core.launch`` does."""
    from kernarg._bench import cuda_core

    core = cuda_core()
    stream, config = core.Stream.from_handle(handle), core.LaunchConfig(grid=1, block=32)
    return lambda *a: kernarg.launch(stream, config, k, *a)


def _core_kernel():
    """_FILL compiled by cuda.core, as its own Kernel."""
    from kernarg._bench import cuda_core

    core = cuda_core()
    dev = core.Device(0)
    dev.set_current()
    return core.Program(_FILL, "c++", core.ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin").get_kernel("fill")


def _core_kernels_in_turn(kernels, handle):
    """A thread's launcher in cuda.core's call form that launches the cuda.core Kernels
    ``kernels`` in turn, each with a cuda.core LaunchConfig of its own, on a cuda.core Stream
    of its stream ``handle``: as an application of more kernels than four does (kernarg
    remembered the last four kernels and configs until session 97)."""
    from kernarg._bench import cuda_core

    core = cuda_core()
    stream = core.Stream.from_handle(handle)
    pairs = itertools.cycle([(core.LaunchConfig(grid=1 + i % 2, block=32), k)
                             for i, k in enumerate(kernels)])
    return lambda *a: kernarg.launch(stream, *next(pairs), *a)


def _launch_cases(only):
    """name: (a function making the thread's own callable, one making its own arguments): each
    thread makes a stream, then calls callable(*arguments). cuda.core's kernel is compiled
    only where a case ``only`` picks launches it."""
    from cuda.bindings import driver

    err, = driver.cuInit(0)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise SystemExit(f"--launches needs a driver (tools/fakecuda/run.sh): cuInit {err}")
    k = kernarg.Kernel.from_source(_FILL, "fill")
    untyped = kernarg.Kernel.from_handle(k.handle, device=0)
    primary = driver.cuDevicePrimaryCtxRetain(driver.cuDeviceGet(0)[1])[1]
    core_kernel = core_kernels = None

    def stream():
        driver.cuCtxSetCurrent(primary)
        return int(driver.cuStreamCreate(1)[1])

    made = itertools.count()        # launchers made: each thread's cluster
    cases = {
        "Kernel.launch 3 (CAI array, float, int)": (
            lambda s: (lambda *a: k.launch(1, 32, *a, stream=s)),
            lambda: (_PropertyCAI(1 << 32), 0.5, 0)),
        "Kernel.launch 3 (int, float, int)": (
            lambda s: (lambda *a: k.launch(1, 32, *a, stream=s)), lambda: (1 << 32, 0.5, 0)),
        "Kernel.launch 3 (int, float, int) on a cuda.core Stream": (
            lambda s: _on_stream_object(k, s), lambda: (1 << 32, 0.5, 0)),
        "kernarg.launch 3 (int, float32, int32): kernarg Kernel and LaunchConfig": (
            lambda s: functools.partial(kernarg.launch, s, kernarg.LaunchConfig(1, 32), k),
            lambda: (1 << 32, np.float32(0.5), np.int32(0))),
        "kernarg.launch 3 (int, float32, int32): an int kernel handle, LaunchConfig": (
            lambda s: functools.partial(kernarg.launch, s, kernarg.LaunchConfig(1, 32),
                                        int(k.handle)),
            lambda: (1 << 32, np.float32(0.5), np.int32(0))),
        "kernarg.launch 3 (int, float32, int32): cuda.core Kernel, LaunchConfig, Stream": (
            lambda s: _core_launcher(core_kernel, s),     # (compiled below)
            lambda: (1 << 32, np.float32(0.5), np.int32(0))),
        "kernarg.launch 3 (int, float32, int32): eight cuda.core Kernels in turn, each with "
        "its own config": (
            lambda s: _core_kernels_in_turn(core_kernels, s),     # (compiled below)
            lambda: (1 << 32, np.float32(0.5), np.int32(0))),
        "Kernel.launch 3 (int, float, int) with cluster and priority": (
            lambda s: (lambda *a: k.launch(2, 32, *a, stream=s, cluster=2, priority=0)),
            lambda: (1 << 32, 0.5, 0)),
        # A grid tuple built at each call (n is a variable: no constant tuple), as a grid
        # computed from the data is.
        "Kernel.launch 3 (int, float, int), a grid made for each launch": (
            lambda s: (lambda *a, n=2: k.launch((n, 1, 1), 32, *a, stream=s)),
            lambda: (1 << 32, 0.5, 0)),
        # ... with launch attributes, whose objects repeat.
        "Kernel.launch 3 (int, float, int) with pdl, a grid made for each launch": (
            lambda s: (lambda *a, n=2: k.launch((n, 1, 1), 32, *a, stream=s, pdl=True)),
            lambda: (1 << 32, 0.5, 0)),
        # A cluster tuple built at each call, equal to the last one: found by value (in C
        # words, with no section, since session 96; before, in kernarg's section).
        "Kernel.launch 3 (int, float, int), a cluster made for each launch": (
            lambda s: (lambda *a, c=2: k.launch(4, 32, *a, stream=s, cluster=(c, 1, 1))),
            lambda: (1 << 32, 0.5, 0)),
        # Each thread its own cluster (one thread: one config; two: two, which the kernel
        # keeps side by side since session 96, where one launch's replaced the other's).
        "Kernel.launch 3 (int, float, int), a cluster of each thread's own": (
            lambda s: _cluster_of_its_own(k, s, made), lambda: (1 << 32, 0.5, 0)),
        "Kernel.launch 3 (int, float, int), cooperative": (
            lambda s: (lambda *a: k.launch(2, 32, *a, stream=s, cooperative=True)),
            lambda: (1 << 32, 0.5, 0)),
        "prepared launch 3 (int, float, int), cooperative": (
            lambda s: k.prepare(2, 32, stream=s, cooperative=True), lambda: (1 << 32, 0.5, 0)),
        "prepared launch 3 (CAI array, float, int)": (
            lambda s: k.prepare(1, 32, stream=s), lambda: (_PropertyCAI(1 << 32), 0.5, 0)),
        "prepared launch 3 (int, float, int)": (
            lambda s: k.prepare(1, 32, stream=s), lambda: (1 << 32, 0.5, 0)),
        "prepared launch 3 (CAI array of a producer stream, float, int)": (
            lambda s: k.prepare(1, 32, stream=s),
            lambda: (_ProducedCAI(1 << 32, stream()), 0.5, 0)),
        # The thread's own BoundLaunch, called with no arguments (_per_op_ns's call(*())).
        "bound launch 3 (CAI array, float, int)": (
            lambda s: k.prepare(1, 32, stream=s).bind(_PropertyCAI(1 << 32), 0.5, 0),
            lambda: ()),
        "untyped prepared launch 3 (int, numpy.float32, numpy.int32)": (
            lambda s: untyped.prepare(1, 32, stream=s),
            lambda: (1 << 32, np.float32(0.5), np.int32(0))),
    }
    if any(only in name and "cuda.core Kernel" in name for name in cases):
        core_kernel = _core_kernel()
        core_kernels = [_core_kernel() for _ in range(8)]
    return cases, stream


def _cluster_of_its_own(k, s, made):
    """A launcher of ``k`` on stream ``s`` with a cluster of 1 or 2 blocks, in turn as
    ``made`` counts the launchers made."""
    cluster = 1 + next(made) % 2
    return lambda *a: k.launch(2, 32, *a, stream=s, cluster=cluster)


def _per_op_ns(case, threads, n, stream=None):
    def work():
        if stream is not None:          # a launch case
            call, args = case[0](stream()), case[1]()
            for _ in range(n):
                call(*args)
            return
        if case is None:
            x = 0
            for i in range(n):
                x += i * 3 % 7
            return
        pack = case[0].pack if isinstance(case[0], kernarg.Signature) else case[0]
        args = case[1]()
        for _ in range(n):
            pack(args)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (time.perf_counter() - start) * 1e9 / (n * threads)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2_000_000, help="packs per thread and run")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the best is kept")
    parser.add_argument("--only", default="", help="the cases whose names contain this text "
                        "(and the pure Python loop)")
    parser.add_argument("--launches", action="store_true",
                        help="time launches (under tools/fakecuda/run.sh) instead of packs")
    opts = parser.parse_args(argv)
    gil = sys._is_gil_enabled() if hasattr(sys, "_is_gil_enabled") else True
    out = {"python": sys.version.split()[0], "gil": gil}
    cases, stream = _launch_cases(opts.only) if opts.launches else (CASES, None)
    if opts.launches:
        cases["pure Python loop"] = None
    for name, case in cases.items():
        if opts.only not in name and case is not None:
            continue
        s = stream if case is not None else None
        one = min(_per_op_ns(case, 1, opts.n, s) for _ in range(opts.repeat))
        two = min(_per_op_ns(case, 2, opts.n, s) for _ in range(opts.repeat))
        out[name] = [round(one, 1), round(two, 1), round(one / two, 2)]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
