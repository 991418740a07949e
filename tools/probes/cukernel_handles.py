"""Which cuFunc*/cuOccupancy* driver calls accept a CUkernel handle (what cuda.core's Kernel
holds: it loads code with cuLibraryLoadData) in place of a CUfunction, on the real driver.
tools/fakecuda models the answers; run on a GPU machine: python tools/probes/cukernel_handles.py
"""
import ctypes

from cuda.bindings import driver as d
from cuda.core import Device, Program, ProgramOptions

dev = Device(0)
dev.set_current()
src = 'extern "C" __global__ void k(float* p, int n) { if (n) p[0] = 1.0f; }'
kern = Program(src, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("k")
h = kern._handle
print("handle type:", type(h).__name__)
f = d.CUfunction(int(h))
A = d.CUfunction_attribute


def show(name, result):
    err = result[0] if isinstance(result, tuple) else result
    print(f"{name:55s} {err.name}", result[1:] if isinstance(result, tuple) else "")


show("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK, kernel)",
     d.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f))
show("cuFuncSetAttribute(MAX_DYNAMIC_SHARED, kernel)",
     d.cuFuncSetAttribute(f, A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 1024))
show("cuFuncGetParamInfo(kernel, 0)", d.cuFuncGetParamInfo(f, 0))
show("cuFuncGetName(kernel)", d.cuFuncGetName(f))
show("cuFuncGetModule(kernel)", d.cuFuncGetModule(f))
show("cuOccupancyMaxActiveBlocksPerMultiprocessor(kernel)",
     d.cuOccupancyMaxActiveBlocksPerMultiprocessor(f, 128, 0))
show("cuKernelGetAttribute(MAX_THREADS_PER_BLOCK)",
     d.cuKernelGetAttribute(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, h, 0))
r = d.cuKernelGetFunction(h)
show("cuKernelGetFunction(kernel)", r)
fn = r[1]
show("cuFuncGetAttribute(MAX_THREADS_PER_BLOCK, function)",
     d.cuFuncGetAttribute(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn))
show("cuFuncGetParamInfo(function, 0)", d.cuFuncGetParamInfo(fn, 0))
show("cuFuncGetParamInfo(function, 2) (past the end)", d.cuFuncGetParamInfo(fn, 2))
show("cuOccupancyMaxActiveBlocksPerMultiprocessor(function)",
     d.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, 128, 0))
show("cuFuncGetName(function)", d.cuFuncGetName(fn))
# A CUfunction from a module is not a CUkernel:
show("cuKernelGetFunction(function)", d.cuKernelGetFunction(d.CUkernel(int(fn))))
show("cuKernelGetAttribute(function)",
     d.cuKernelGetAttribute(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, d.CUkernel(int(fn)), 0))
# Launch the kernel handle and the function handle.
buf = dev.allocate(4, stream=dev.default_stream)
p, n = ctypes.c_uint64(int(buf.handle)), ctypes.c_int(1)
argv = (ctypes.c_void_p * 2)(ctypes.addressof(p), ctypes.addressof(n))
for label, handle in (("kernel", f), ("function", fn)):
    show(f"cuLaunchKernel({label})",
         d.cuLaunchKernel(handle, 1, 1, 1, 1, 1, 1, 0, 0, ctypes.addressof(argv), 0))
show("cuCtxSynchronize", d.cuCtxSynchronize())
