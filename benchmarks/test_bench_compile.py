"""pytest-benchmark suite: what Kernel.from_source's compile step costs, by where the
compilation comes from -- an NVRTC run, the disk cache (KERNARG_CACHE_DIR, read back by a new
process) or the in-process cache. Needs NVRTC only (no driver: the architecture is fixed).

    pytest benchmarks/test_bench_compile.py --benchmark-group-by=param:source
"""
import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="needs NVRTC")

from kernarg import _launch  # noqa: E402
from kernarg._nvrtc import compile_program, compile_program_cached, target_arch  # noqa: E402

SOURCES = {
    "one kernel": r"""extern "C" __global__ void saxpy(float* y, const float* x, float a,
                                                       int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = a * x[i] + y[i]; }""",
    "fp16 header": r"""#include <cuda_fp16.h>
        extern "C" __global__ void h(__half* y, __half a, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) y[i] = __hmul(a, y[i]); }""",
}
ARCH = target_arch(90)


@pytest.mark.parametrize("source", list(SOURCES))
@pytest.mark.parametrize("path", ["nvrtc", "disk cache", "memory cache"])
def test_compile(benchmark, monkeypatch, tmp_path, source, path):
    src = SOURCES[source]
    if path == "nvrtc":
        benchmark.pedantic(compile_program, args=(src,), kwargs={"arch": ARCH}, rounds=5)
    elif path == "disk cache":
        monkeypatch.setenv("KERNARG_CACHE_DIR", str(tmp_path))
        compile_program_cached(src, arch=ARCH)                      # written once
        benchmark(compile_program_cached, src, arch=ARCH)
    else:
        name = "saxpy" if "saxpy" in src else "h"
        _launch._compile_for(src, (name,), (), "compute_90")
        benchmark(_launch._compile_for, src, (name,), (), "compute_90")
