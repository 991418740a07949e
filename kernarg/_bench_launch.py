"""Launch latency on a GPU (issue 5): kernarg vs cuda.core, cuda.bindings, CuPy, numba-cuda and
a C++ cuLaunchKernel loop, for kernels taking 0, 1, 4, 16 and 64 arguments.

Each case launches an empty kernel whose parameters are all 8 bytes (pointers and long longs) on
one non-blocking stream; ns per launch is the host-side time of a burst of launches (the GPU runs
them asynchronously). Ratios are taken within interleaved rounds, as in the packing benchmark.

NOTE: written without a GPU; it has not run yet. The next GPU session runs and fixes it.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time

NARGS = (0, 1, 4, 16, 64)


def _kernel_source(n: int) -> str:
    params = ", ".join(f"long long* p{i}" if i % 2 == 0 else f"long long q{i}" for i in range(n))
    return f'extern "C" __global__ void k({params}) {{}}'


def _args(n: int, buf, torch_tensor=None):
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(torch_tensor if (torch_tensor is not None and i % 4 == 0) else buf)
        else:
            out.append(i)
    return tuple(out)


def _time_ns(fn, iters: int) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    return (time.perf_counter_ns() - t0) / iters


def _cpp_floor(n: int, iters: int) -> float | None:
    nvcc = shutil.which("nvcc")
    src = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "launch", "launch_floor.cu")
    if nvcc is None or not os.path.exists(src):
        return None
    exe = os.path.join(tempfile.gettempdir(), "kernarg_launch_floor")
    if not os.path.exists(exe):
        subprocess.run([nvcc, "-O2", "-o", exe, src, "-lcuda"], check=True)
    out = subprocess.run([exe, str(n), str(iters)], capture_output=True, text=True, check=True)
    return float(out.stdout.strip())


def run(rounds: int = 7, iters: int = 20000, file=None) -> dict:
    from cuda.bindings import driver

    import kernarg

    kernarg.Kernel.from_source('extern "C" __global__ void warm() {}', "warm")   # context
    stream = int(driver.cuStreamCreate(1)[1])
    buf = int(driver.cuMemAlloc(1 << 20)[1])
    try:
        import torch

        tensor = torch.zeros(16, device="cuda")
    except Exception:
        tensor = None
    rows = []
    for n in NARGS:
        src = _kernel_source(n)
        k = kernarg.Kernel.from_source(src, "k")
        args = _args(n, buf, tensor)
        prepared = k.prepare(1, 1, stream=stream)
        contenders = {
            "kernarg.launch": lambda k=k, args=args: k.launch(1, 1, *args, stream=stream),
            "kernarg prepared": lambda prepared=prepared, args=args: prepared(*args),
        }
        try:
            from cuda.core import Device, LaunchConfig, Program, ProgramOptions, launch

            dev = Device(0)
            dev.set_current()
            prog = Program(src, "c++", ProgramOptions(arch=f"sm_{dev.arch}"))
            ck = prog.compile("cubin").get_kernel("k")
            cstream = dev.create_stream()
            cfg = LaunchConfig(grid=1, block=1)
            cargs = tuple(a if isinstance(a, int) else a for a in _args(n, buf))
            contenders["cuda.core launch"] = (
                lambda cstream=cstream, cfg=cfg, ck=ck, cargs=cargs: launch(cstream, cfg, ck,
                                                                           *cargs))
        except Exception as exc:
            print(f"[{n} args] cuda.core skipped: {exc}", file=file)
        try:
            import ctypes

            vals = (ctypes.c_uint64 * max(n, 1))(*([buf] * n))
            ptrs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(vals) + 8 * i
                                                    for i in range(n)])
            func = driver.CUfunction(k.handle)
            dstream = driver.CUstream(stream)
            contenders["cuda.bindings cuLaunchKernel"] = (
                lambda func=func, dstream=dstream, ptrs=ptrs: driver.cuLaunchKernel(
                    func, 1, 1, 1, 1, 1, 1, 0, dstream, ctypes.addressof(ptrs), 0))
        except Exception as exc:
            print(f"[{n} args] cuda.bindings skipped: {exc}", file=file)
        try:
            import cupy

            raw = cupy.RawKernel(src, "k")
            cs = cupy.cuda.ExternalStream(stream)
            cpargs = tuple(cupy.uint64(buf) if isinstance(a, int) and a == buf else a
                           for a in _args(n, buf))

            def cupy_launch(cs=cs, raw=raw, cpargs=cpargs):
                with cs:
                    raw((1,), (1,), cpargs)

            contenders["CuPy RawKernel"] = cupy_launch
        except Exception as exc:
            print(f"[{n} args] CuPy skipped: {exc}", file=file)
        try:
            import numpy as np
            from numba import cuda as ncuda

            # The same empty kernel written for numba: device arrays where the others pass
            # pointers (numba expands each into its own parameters, which is its cost).
            namespace = {}
            params = ", ".join(f"a{i}" for i in range(n))
            exec(f"def nk({params}):\n    pass", namespace)
            nk = ncuda.jit(namespace["nk"])
            darr = ncuda.device_array(16, np.int64)
            nbargs = tuple(darr if i % 2 == 0 else i for i in range(n))
            nstream = ncuda.external_stream(stream)
            nk[1, 1, nstream](*nbargs)            # compile outside the timing
            contenders["numba-cuda"] = (
                lambda nk=nk, nstream=nstream, nbargs=nbargs: nk[1, 1, nstream](*nbargs))
        except Exception as exc:
            print(f"[{n} args] numba-cuda skipped: {exc}", file=file)
        times = {name: [] for name in contenders}
        for _ in range(rounds):
            for name, fn in contenders.items():
                times[name].append(_time_ns(fn, iters))
            driver.cuStreamSynchronize(stream)
        row = {"nargs": n, **{f"{name}_ns": min(v) for name, v in times.items()}}
        floor = _cpp_floor(n, iters * 5)
        if floor is not None:
            row["cpp_floor_ns"] = floor
            row["prepared_over_floor"] = min(times["kernarg prepared"]) / floor
            row["launch_over_floor"] = min(times["kernarg.launch"]) / floor
        if "cuda.core launch" in times:
            pairs = zip(times["cuda.core launch"], times["kernarg.launch"], strict=True)
            row["cuda_core_over_kernarg"] = statistics.median(c / k_ for c, k_ in pairs)
        rows.append(row)
        print(row, file=file)
    return {"benchmark": "launch latency (host ns per launch, min over rounds)", "rows": rows}
