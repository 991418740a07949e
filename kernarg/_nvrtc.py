"""NVRTC: compile CUDA C++ to PTX with the pip-installed compiler (no CUDA toolkit needed).

Headers such as cuda_fp16.h come from the ``nvidia-cuda-runtime`` wheel.
"""
from __future__ import annotations

import functools
import glob
import os
from typing import NamedTuple

__all__ = ["Compiled", "NvrtcError", "compile_program", "compile_to_ptx", "cuda_include_dir",
           "nvrtc_version", "supported_archs", "target_arch"]


class NvrtcError(RuntimeError):
    """NVRTC could not compile the source; ``.log`` holds the compiler's output."""

    def __init__(self, message: str, log: str = ""):
        super().__init__(f"{message}\n{log}".rstrip())
        self.log = log


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """(major, minor) of the NVRTC library cuda.bindings loads."""
    from cuda.bindings import nvrtc

    return tuple(_check(nvrtc.nvrtcVersion()))


def _header_major(include_dir: str) -> int | None:
    import re

    try:
        with open(os.path.join(include_dir, "cuda_runtime_api.h"), errors="replace") as f:
            m = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", f.read())
    except OSError:
        return None
    return int(m.group(1)) // 1000 if m else None


@functools.cache
def cuda_include_dir() -> str | None:
    """The include directory of the pip ``nvidia-cuda-runtime`` wheel, if installed; with
    several (``-cu12`` beside the CUDA 13 one), the one matching NVRTC's major version."""
    try:
        import nvidia
    except ImportError:
        return None
    dirs = [os.path.dirname(hit) for base in nvidia.__path__
            for pattern in ("*/include/cuda_fp16.h", "*/*/include/cuda_fp16.h")
            for hit in sorted(glob.glob(os.path.join(base, pattern)))]
    if len(dirs) > 1:
        try:
            major = nvrtc_version()[0]
        except Exception:
            major = None
        dirs.sort(key=lambda d: _header_major(d) != major)    # matching first, else as found
    return dirs[0] if dirs else None


def _check(result, prog=None):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if prog is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = buf.rstrip(b"\x00").decode(errors="replace")
        raise NvrtcError(f"NVRTC: {err.name}", log)
    return result[1:]


@functools.cache
def supported_archs() -> tuple[int, ...]:
    """The real architectures this NVRTC compiles machine code for (``90`` for sm_90)."""
    from cuda.bindings import nvrtc

    (archs,) = _check(nvrtc.nvrtcGetSupportedArchs())
    return tuple(int(a) for a in archs)


def target_arch(cc: int) -> str:
    """What Kernel.from_source asks NVRTC for on a device of compute capability ``cc`` (90 for
    9.0): machine code (``"sm_90"``) where this NVRTC has it, else PTX (``"compute_90"``)."""
    return f"sm_{cc}" if cc in supported_archs() else f"compute_{cc}"


class Compiled(NamedTuple):
    """What one NVRTC run gives: the PTX text; the machine code (CUBIN) when the target was a
    real architecture (``sm_90``), else None; and the lowered name of each name expression."""
    ptx: str
    cubin: bytes | None
    lowered: dict[str, str]


def compile_to_ptx(source: str, *, options=(), arch: str | None = None,
                   name: str = "kernarg_source.cu") -> str:
    """Compile ``source`` to PTX text. ``arch`` is e.g. ``"compute_90"``."""
    return compile_program(source, options=options, arch=arch, name=name).ptx


def compile_program(source: str, *, options=(), arch: str | None = None,
                    name_expressions=(), name: str = "kernarg_source.cu") -> Compiled:
    """Compile ``source`` for ``arch`` (``"compute_90"``: PTX; ``"sm_90"``: PTX and CUBIN),
    and give the lowered (mangled) name of each of ``name_expressions`` -- C++ expressions
    naming ``__global__`` functions, such as ``"saxpy<float>"`` or ``"ns::kern"``, which NVRTC
    instantiates."""
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:   # pragma: no cover - depends on the environment
        raise NvrtcError("NVRTC needs cuda-bindings: pip install cuda-bindings "
                         "nvidia-cuda-nvrtc nvidia-cuda-runtime") from exc
    opts = [o.encode() if isinstance(o, str) else bytes(o) for o in options]
    include = cuda_include_dir()
    if include is not None:
        opts.append(f"-I{include}".encode())
    if arch is not None:
        opts.append(f"--gpu-architecture={arch}".encode())
    exprs = list(name_expressions)
    try:
        (prog,) = _check(nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], []))
    except RuntimeError as exc:
        if isinstance(exc, NvrtcError):
            raise
        raise NvrtcError(f"NVRTC is not available ({exc}); pip install nvidia-cuda-nvrtc") from exc
    try:
        for expr in exprs:
            _check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), prog)
        _check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), prog)
        (size,) = _check(nvrtc.nvrtcGetPTXSize(prog))
        buf = b" " * size
        _check(nvrtc.nvrtcGetPTX(prog, buf))
        cubin = None
        if arch is not None and arch.startswith("sm_"):
            (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog))
            cubin = b" " * size
            _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
        lowered = {}
        for expr in exprs:
            try:
                (low,) = _check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()))
            except NvrtcError as exc:
                raise NvrtcError(f"{exc}: {expr!r} does not name a __global__ function of "
                                 "the source") from None
            lowered[expr] = low.decode() if isinstance(low, bytes) else str(low)
        return Compiled(buf.rstrip(b"\x00").decode(), cubin, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
