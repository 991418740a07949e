"""Build the Cython extensions. Set KERNARG_DEBUG=1 for line tracing and internal asserts."""
import os
import sys
import sysconfig

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("KERNARG_DEBUG", "0") not in ("", "0")

directives = {"language_level": 3, "embedsignature": True, "binding": True}
if sysconfig.get_config_var("Py_GIL_DISABLED") and sys.version_info >= (3, 14):
    # A free-threaded CPython keeps the GIL off: every way into kernarg's modules takes one
    # critical section there (kernarg/_guard.h). Cython >= 3.1 knows the directive. Not on
    # 3.13t, whose critical sections lack what the guard needs (see _guard.h): the GIL then
    # comes back on when kernarg is imported.
    import re

    import Cython

    if tuple(map(int, re.match(r"(\d+)\.(\d+)", Cython.__version__).groups())) < (3, 1):
        raise RuntimeError(f"a free-threaded CPython needs Cython >= 3.1 to build kernarg, "
                           f"found {Cython.__version__}")
    directives["freethreading_compatible"] = True
macros = []
compile_args = ["-O3", "-falign-functions=64"]
if DEBUG:
    directives.update(linetrace=True, profile=True)
    macros += [("CYTHON_TRACE_NOGIL", "1"), ("KERNARG_DEBUG", "1")]
    compile_args = ["-O0", "-g", "-UNDEBUG"]


def _cydriver_pxd():
    """The cydriver.pxd this build compiles against (read, not imported)."""
    import importlib.util

    spec = importlib.util.find_spec("cuda.bindings")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("cuda.bindings not found: the build needs cuda-bindings >= 12.8")
    path = os.path.join(list(spec.submodule_search_locations)[0], "cydriver.pxd")
    with open(path) as f:
        return path, f.read()


def _nvrtc_module():
    """kernarg/_nvrtc.py, loaded from its file (it imports only the standard library), so the
    build looks for CUDA toolkits where kernarg's NVRTC does, by one definition."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernarg", "_nvrtc.py")
    spec = importlib.util.spec_from_file_location("_kernarg_build_nvrtc", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _bindings_major():
    from importlib.metadata import version

    return int(version("cuda-bindings").split(".")[0])


def _cuda_version(include_dir):
    """(major, minor) of the cuda.h in include_dir (CUDA_VERSION is 1000*major + 10*minor), or
    None."""
    import re

    with open(os.path.join(include_dir, "cuda.h"), errors="replace") as f:
        m = re.search(r"#define\s+CUDA_VERSION\s+(\d+)", f.read())
    return (int(m.group(1)) // 1000, int(m.group(1)) % 1000 // 10) if m else None


def header_types(pxd):
    """The types cydriver.pxd declares inside its ``cdef extern from 'cuda.h'`` blocks and then
    names in a ctypedef of its own, outside them. Cython writes a C typedef for each of those
    into every module that cimports cydriver, so the cuda.h the build includes must declare
    them all: a cuda.h older than cuda-bindings may not (CUDA 13.0's cuda.h has no
    CUDA_FABRIC_COPY_BATCH_OP_st, which cuda-bindings 13.5 names), and g++ then fails with
    "does not name a type" deep in generated code."""
    import re

    from_cuda_h = {}        # Cython name -> C name (a quoted C name, where one is given)
    in_cuda_h = False
    for line in pxd.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            in_cuda_h = re.match(r"cdef extern from ['\"]cuda\.h['\"]", line) is not None
            continue
        m = re.match(r"\s+(?:cdef|ctypedef)\s+(?:struct|union|enum)\s+(\w+)"
                     r"(?:\s+['\"](\w+)['\"])?", line)
        if in_cuda_h and m:
            from_cuda_h[m.group(1)] = m.group(2) or m.group(1)
    used = re.findall(r"^ctypedef\s+(\w+)\s", pxd, re.M)
    return sorted({from_cuda_h[name] for name in used if name in from_cuda_h})


def missing_types(include_dir, types):
    """The names in ``types`` that the cuda.h in include_dir never mentions."""
    import re

    with open(os.path.join(include_dir, "cuda.h"), errors="replace") as f:
        text = f.read()
    return [t for t in types if not re.search(rf"\b{t}\b", text)]


def cuda_include():
    """Include directories for the headers cydriver.pxd names (cuda.h; for cuda-bindings 12.x
    also cudaProfiler.h): from the pip wheels (nvidia-cuda-runtime, and for 12.x
    nvidia-cuda-profiler-api-cu12), else a CUDA toolkit. A cuda.h whose major version differs
    from cuda-bindings' is skipped: cydriver's declarations must match the header."""
    import glob
    import re

    pxd_path, pxd = _cydriver_pxd()
    headers = sorted(set(re.findall(r'cdef extern from "([^"]+\.h)"', pxd))) or ["cuda.h"]
    major = _bindings_major()
    try:
        import nvidia

        bases = list(nvidia.__path__)
    except ImportError:
        bases = []
    roots = [d for base in bases for pattern in ("*/include", "*/*/include")
             for d in sorted(glob.glob(os.path.join(base, pattern)))]
    # Machines with a CUDA toolkit but without the wheels (GPU images) can build from it:
    # the toolkits NVRTC's headers are looked for in, by the same rule.
    roots += _nvrtc_module().toolkit_include_dirs()
    cuda_dirs = [d for d in roots if os.path.exists(os.path.join(d, "cuda.h"))]
    matching = [d for d in cuda_dirs if (_cuda_version(d) or (None,))[0] == major]
    # Of those, one that declares every type cydriver takes from it (see header_types).
    types = header_types(pxd)
    missing = {d: missing_types(d, types) for d in matching}
    complete = [d for d in matching if not missing[d]]
    if matching and not complete:
        from importlib.metadata import version

        found = ", ".join(f"{d} (CUDA {'.'.join(map(str, _cuda_version(d)))})" for d in matching)
        bindings = version("cuda-bindings")
        newest = ".".join(bindings.split(".")[:2])
        raise RuntimeError(
            f"cuda-bindings {bindings}'s cydriver.pxd names CUDA types that no cuda.h found "
            f"declares ({', '.join(missing[matching[0]])} missing from {found}): "
            f"the headers are older than the bindings. Install matching ones, pip install "
            f"'nvidia-cuda-runtime>={newest}' (or 'cuda-bindings' of the headers' version), "
            "or build with pip's default build isolation, which installs both afresh")
    matching = complete
    dirs = []
    for header in headers:
        pool = matching if header == "cuda.h" else roots
        found = [d for d in pool if os.path.exists(os.path.join(d, header))]
        if not found:
            wheel = "nvidia-cuda-profiler-api" if header == "cudaProfiler.h" else \
                "nvidia-cuda-runtime"
            raise RuntimeError(
                f"{header} (named by {pxd_path}) not found for CUDA {major}: pip install "
                f"{wheel}{'-cu12' if major < 13 else f'=={major}.*'}, or set CUDA_HOME to a "
                "CUDA toolkit of the same major version")
        if found[0] not in dirs:
            dirs.append(found[0])
    return dirs


def driver_compat():
    """Write kernarg/_driver_compat.pxi: the cydriver calls whose names differ between
    cuda-bindings 12.x and 13.x, chosen by reading the cydriver.pxd this build compiles against
    (feature detection, so any 12.8+ or 13.x release builds).

    cuStreamGetCaptureInfo with edge data is ``cuStreamGetCaptureInfo_v3`` in 12.x and plain
    ``cuStreamGetCaptureInfo`` in 13.x (where the 12.x plain name, the _v2 call, moved to _v2);
    cuGraphAddDependencies with edge data is ``cuGraphAddDependencies_v2`` in 12.x and plain in
    13.x.
    """
    _, text = _cydriver_pxd()
    capture = ("cuStreamGetCaptureInfo_v3" if "cuStreamGetCaptureInfo_v3(" in text
               else "cuStreamGetCaptureInfo")
    # Edges with edge data (a programmatic dependency): cuGraphAddDependencies_v2 in 12.x, the
    # plain name in 13.x (where the 12.x plain call, without edge data, is gone).
    edges = ("cuGraphAddDependencies_v2" if "cuGraphAddDependencies_v2(" in text
             else "cuGraphAddDependencies")
    from importlib.metadata import version

    bindings = version("cuda-bindings")
    body = f"""# Generated by setup.py from the cydriver.pxd of cuda-bindings {bindings}.
# Do not edit: every build rewrites it.
from cuda.bindings cimport cydriver


# The cuda-bindings whose cydriver this module was compiled against (python -m kernarg info).
BUILT_WITH_CUDA_BINDINGS = "{bindings}"


cdef inline cydriver.CUresult stream_capture_info(
        cydriver.CUstream stream, cydriver.CUstreamCaptureStatus* status,
        cydriver.cuuint64_t* capture_id, cydriver.CUgraph* graph) noexcept nogil:
    return cydriver.{capture}(stream, status, capture_id, graph, NULL, NULL, NULL)


cdef inline cydriver.CUresult graph_add_edges(
        cydriver.CUgraph graph, const cydriver.CUgraphNode* from_,
        const cydriver.CUgraphNode* to, const cydriver.CUgraphEdgeData* data,
        size_t count) noexcept nogil:
    return cydriver.{edges}(graph, from_, to, data, count)
"""
    out = os.path.join("kernarg", "_driver_compat.pxi")
    old = open(out).read() if os.path.exists(out) else None
    if old != body:     # rewrite only on change, so cythonize's timestamps stay meaningful
        with open(out, "w") as f:
            f.write(body)


def ext(name, language="c", extra_includes=()):
    return Extension(
        f"kernarg.{name}",
        [f"kernarg/{name}.pyx"],
        include_dirs=["kernarg", "kernarg/include", *extra_includes],
        define_macros=macros,
        extra_compile_args=compile_args,
        language=language,
    )


if __name__ == "__main__":     # as pip and setuptools run it; tests import the helpers above
    driver_compat()
    # The CUDA major version of the cuda.h builds use (cuda-bindings'): CUtensorMap's alignment.
    macros.append(("KERNARG_CUDA_MAJOR", str(_bindings_major())))
    setup(
        ext_modules=cythonize(
            [ext("_stream"), ext("_interop"), ext("_handler"), ext("_signature"), ext("_capi"),
             ext("_launch", "c++", cuda_include()), ext("_benchfloor")],
            compiler_directives=directives,
        ),
    )
