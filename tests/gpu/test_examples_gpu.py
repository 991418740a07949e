"""The embedding examples launch real kernels.

C: cuLaunchKernel through dlopen; Cython: cuda.bindings."""
import struct

import pytest

import kernarg
from kernarg._examples import build_example

driver = pytest.importorskip("cuda.bindings.driver", reason="needs cuda.bindings")

SRC = r"""extern "C" __global__ void put(long long* out, long long a, double b) {
    out[0] = a + (long long)b; }"""


@pytest.mark.parametrize("example, module", [("c_extension", "kernarg_example"),
                                             ("cython_launcher", "launcher")])
def test_example_launches(tmp_path, example, module):
    ext = build_example(example, module, str(tmp_path))
    k = kernarg.Kernel.from_source(SRC, "put")
    err, ptr = driver.cuMemAlloc(8)
    assert err == driver.CUresult.CUDA_SUCCESS
    if module == "launcher":
        ext.launch(driver.CUfunction(k.handle), (1, 1, 1), (1, 1, 1), (int(ptr), 40, 2.0))
    else:
        ext.launch(k.handle, (1, 1, 1), (1, 1, 1), (int(ptr), 40, 2.0))
    out = bytearray(8)
    assert driver.cuCtxSynchronize()[0] == driver.CUresult.CUDA_SUCCESS
    (err,) = driver.cuMemcpyDtoH(out, ptr, 8)
    assert err == driver.CUresult.CUDA_SUCCESS
    assert struct.unpack("<q", bytes(out))[0] == 42
    driver.cuMemFree(ptr)
