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


def ext(name):
    return Extension(
        f"kernarg.{name}",
        [f"kernarg/{name}.pyx"],
        include_dirs=["kernarg", "kernarg/include"],
        define_macros=macros,
        extra_compile_args=compile_args,
    )


setup(
    ext_modules=cythonize(
        [ext("_interop"), ext("_handler"), ext("_signature"), ext("_capi"), ext("_benchfloor")],
        compiler_directives=directives,
    ),
)
