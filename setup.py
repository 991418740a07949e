"""Build the Cython extensions. Set KERNARG_DEBUG=1 for line tracing and internal asserts."""
import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("KERNARG_DEBUG", "0") not in ("", "0")

directives = {"language_level": 3, "embedsignature": True, "binding": True}
macros = []
compile_args = ["-O3"]
if DEBUG:
    directives.update(linetrace=True, profile=True)
    macros += [("CYTHON_TRACE_NOGIL", "1"), ("KERNARG_DEBUG", "1")]
    compile_args = ["-O0", "-g", "-UNDEBUG"]


def cuda_include():
    # cuda.h for cuda.bindings' cydriver, from the pip nvidia-cuda-runtime wheel.
    import glob

    try:
        import nvidia

        bases = list(nvidia.__path__)
    except ImportError:
        bases = []
    for base in bases:
        for pattern in ("*/include/cuda.h", "*/*/include/cuda.h"):
            hits = sorted(glob.glob(os.path.join(base, pattern)))
            if hits:
                return [os.path.dirname(hits[-1])]
    # Machines with a CUDA toolkit but without the wheel (GPU images) can build from it.
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.path.exists(os.path.join(root, "include", "cuda.h")):
            return [os.path.join(root, "include")]
    raise RuntimeError("cuda.h not found: the build needs the nvidia-cuda-runtime wheel")


def ext(name, language="c", extra_includes=()):
    return Extension(
        f"kernarg.{name}",
        [f"kernarg/{name}.pyx"],
        include_dirs=["kernarg", "kernarg/include", *extra_includes],
        define_macros=macros,
        extra_compile_args=compile_args,
        language=language,
    )


setup(
    ext_modules=cythonize(
        [ext("_stream"), ext("_interop"), ext("_handler"), ext("_signature"), ext("_capi"),
         ext("_launch", "c++", cuda_include()), ext("_benchfloor")],
        compiler_directives=directives,
    ),
)
