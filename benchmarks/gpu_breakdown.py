"""Where a foreign GPU array's per-argument time goes: each call kernarg's adapter for the
library makes, timed alone, next to the library's protocol and kernarg.pack of the array.

    python benchmarks/gpu_breakdown.py        # on a GPU machine (gpu_session.sh runs it)

Written after the first H100 run, where CuPy's adapter was 2.4x faster than CuPy's CUDA Array
Interface rather than the 5x issue 3 asks, and JAX arrays (no adapter then) 1.0x: the next GPU
session's numbers say which call to avoid. Minimum of 7 repeats, ns per call.

The generic CUDA Array Interface path added 265-540 ns over the producer's own call on the
H100, where the development VM measures ~110 ns for kernarg's reading of a v3 dict. The
"static" rows split the two: kernarg.pack of an object whose interface is one dict built once
(kernarg's reading alone) against reading that dict, from Python code and from C
(operator.attrgetter calls PyObject_GetAttr, as kernarg does). On Python 3.12 the interpreter
runs a Python property read by Python code inline, but one read from C in a new evaluation
loop: on the development VM that cost ~50 ns more (a dict-building property, 203 against
253 ns), which the generic rows of bench-gpu.json count as kernarg's.
"""
import operator
import sys
import timeit

import kernarg


def t(label, fn, n=20000):
    best = min(timeit.repeat(fn, number=n, repeat=7)) / n * 1e9
    print(f"{label:50s} {best:8.0f} ns")


class Static:
    """A fixed copy of an array's CUDA Array Interface dict."""

    def __init__(self, array):
        self.cai = dict(array.__cuda_array_interface__)

    @property
    def __cuda_array_interface__(self):
        return self.cai


def static_rows(name, array):
    s = Static(array)
    t(f"{name}: read a static CAI dict", lambda: s.__cuda_array_interface__)
    get = operator.attrgetter("__cuda_array_interface__")
    t(f"{name}: read a static CAI dict from C", lambda: get(s))
    t(f"{name}: kernarg.pack((static CAI,))", lambda: kernarg.pack((s,)))
    print(f"{name} CAI:", s.cai)
    # The first H100 run of this script (session 33) measured kernarg's reading of CuPy's dict
    # at ~550 ns, torch's and JAX's at ~150 ns, where the development VM measures ~85 ns for
    # every shape of dict. Variants of the same dict, one difference each, say which part costs.
    interned = {sys.intern(str(k)): v for k, v in s.cai.items()}
    print(f"{name}: keys interned already:",
          all(k is sys.intern(k) for k in s.cai if type(k) is str))
    variants = {"keys interned": interned,
                "no 'stream'": {k: v for k, v in interned.items() if k != "stream"},
                "no 'descr'": {k: v for k, v in interned.items() if k != "descr"},
                "'stream' None": {**interned, "stream": None}}
    for label, cai in variants.items():
        v = Static(array)
        v.cai = cai
        t(f"{name}: kernarg.pack((static CAI, {label},))", lambda v=v: kernarg.pack((v,)))


t("kernarg.pack(())", lambda: kernarg.pack(()))
t("kernarg.pack((1,))", lambda: kernarg.pack((1,)))
try:
    import cupy
    a = cupy.zeros(16, dtype=cupy.float32)
    from cupy.cuda import stream as cs
    t("cupy a.data", lambda: a.data)
    t("cupy a.data.ptr", lambda: a.data.ptr)
    t("cupy a.data.mem", lambda: a.data.mem)
    t("cupy a.data.device_id", lambda: a.data.device_id)
    t("cupy get_current_stream().ptr", lambda: cupy.cuda.get_current_stream().ptr)
    f = getattr(cs, "get_current_stream_ptr", None)
    if f:
        t("cupy stream.get_current_stream_ptr()", f)
    from kernarg._interop import _cupy_stream_route
    route, seconds = _cupy_stream_route(200000)
    print(f"cupy: the adapter reads CuPy's current stream through its {route} route")
    if seconds is not None:
        label = "cupy C get_current_stream_ptr(), in a C loop"
        print(f"{label:50s} {seconds / 200000 * 1e9:8.0f} ns")
    t("cupy CAI", lambda: a.__cuda_array_interface__)
    t("kernarg.pack((cupy,))", lambda: kernarg.pack((a,)))
    print("cupy capi:", sorted(getattr(cs, "__pyx_capi__", {}).keys())[:20])
    static_rows("cupy", a)
except Exception as exc:
    print("cupy:", type(exc).__name__, exc)
try:
    import torch
    x = torch.zeros(16, device="cuda")
    t("torch data_ptr()", lambda: x.data_ptr())
    t("torch CAI", lambda: x.__cuda_array_interface__)
    t("kernarg.pack((torch,))", lambda: kernarg.pack((x,)))
    static_rows("torch", x)
    print("torch has __dlpack_c_exchange_api__:",
          hasattr(torch.Tensor, "__dlpack_c_exchange_api__"))
    # The torch adapter (torch < 2.10, or a type that hides the exchange API): its stream read
    # by each route, and the whole adapter.
    t("torch.cuda.current_stream(0).cuda_stream",
      lambda: torch.cuda.current_stream(0).cuda_stream)
    t("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0))
    t("torch is_pinned() of a pinned tensor", (lambda p: lambda: p.is_pinned())(
        torch.zeros(16).pin_memory()))
    t("torch __dlpack_device__() of a pinned tensor", (lambda p: lambda: p.__dlpack_device__())(
        torch.zeros(16).pin_memory()))
    # On a plain tensor with torch.Tensor's exchange API hidden (as torch < 2.10 is read), and
    # on a subclass, where every method call goes through torch's __torch_function__.
    from kernarg._bench_interop import torch_exchange_api_hidden, without_exchange_api
    with torch_exchange_api_hidden():
        t("kernarg.pack((torch,))  (the adapter)", lambda: kernarg.pack((x,)))
        t("torch is_cuda, the adapter's first read", lambda: x.is_cuda)
        t("torch is_conj()", lambda: x.is_conj())
        t("torch get_device()", lambda: x.get_device())
    xa = without_exchange_api(x)
    t("kernarg.pack((torch subclass,))  (the adapter)", lambda: kernarg.pack((xa,)))
    t("torch subclass data_ptr()", lambda: xa.data_ptr())
except Exception as exc:
    print("torch:", type(exc).__name__, exc)
try:
    import jax.numpy as jnp
    j = jnp.zeros(16, jnp.float32)
    j.block_until_ready()
    t("jax unsafe_buffer_pointer()", lambda: j.unsafe_buffer_pointer())
    t("jax .sharding", lambda: j.sharding)
    t("jax CAI", lambda: j.__cuda_array_interface__)
    t("jax __dlpack_device__()", lambda: j.__dlpack_device__())
    t("jax .device", lambda: j.device)
    t("kernarg.pack((jax,))  (the adapter)", lambda: kernarg.pack((j,)))
    static_rows("jax", j)
    print("jax CAI:", j.__cuda_array_interface__, type(j).__mro__)
    print("jax has __dlpack_c_exchange_api__:", hasattr(type(j), "__dlpack_c_exchange_api__"))
except Exception as exc:
    print("jax:", type(exc).__name__, exc)
