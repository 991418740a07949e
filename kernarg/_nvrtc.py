"""NVRTC: compile CUDA C++ to PTX with the pip-installed compiler (no CUDA toolkit needed).

Headers such as cuda_fp16.h come from the ``nvidia-cuda-runtime`` wheel.
"""
from __future__ import annotations

import base64
import functools
import glob
import hashlib
import json
import os
import re
import tempfile
import warnings
from typing import NamedTuple

__all__ = ["CACHE_DIR_ENV", "Compiled", "NvrtcError", "arch_runs_on", "cache_dir",
           "compile_program", "compile_program_cached", "compile_to_ptx", "cuda_include_dir",
           "cudadevrt_library",
           "declaration_text", "normalize_headers", "nvrtc_version", "split_arch_option",
           "supported_archs", "target_arch"]

CACHE_DIR_ENV = "KERNARG_CACHE_DIR"
_CACHE_FORMAT = 1


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


def _cccl_under(include: str) -> str | None:
    """The CCCL headers that go with the runtime headers in ``include``: CUDA 13 puts them in
    ``include/cccl`` (where nvcc looks, and NVRTC does not), CUDA 12's wheels in
    ``nvidia/cuda_cccl/include`` beside ``nvidia/cuda_runtime/include``, and CUDA 12 toolkits in
    ``include`` itself."""
    for candidate in (os.path.join(include, "cccl"),
                      os.path.join(os.path.dirname(os.path.dirname(include)), "cuda_cccl",
                                   "include"),
                      include):
        if os.path.isfile(os.path.join(candidate, "cuda", "std", "version")):
            return candidate
    return None


# Where a CUDA toolkit is looked for after CUDA_HOME and CUDA_PATH.
DEFAULT_TOOLKIT = "/usr/local/cuda"


def toolkit_include_dirs() -> list[str]:
    """The include directories of the CUDA toolkits named by ``CUDA_HOME`` and ``CUDA_PATH``,
    then :data:`DEFAULT_TOOLKIT`, that exist (in that order, without repeats)."""
    out = []
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), DEFAULT_TOOLKIT):
        if root:
            include = os.path.realpath(os.path.join(root, "include"))
            if os.path.isdir(include) and include not in out:
                out.append(include)
    return out


def cccl_include_dir(include: str | None = None) -> str | None:
    """The CCCL headers (libcu++'s ``<cuda/std/...>``, CUB, Thrust) NVRTC is given: those that
    go with the runtime headers in ``include`` (default: :func:`cuda_include_dir`), from pip's
    ``nvidia-cuda-cccl``; else a CUDA toolkit's (:func:`toolkit_include_dirs`) whose major
    version is NVRTC's, as on a machine with a toolkit and without that wheel. None where
    neither has them."""
    include = cuda_include_dir() if include is None else include
    if include is not None:
        found = _cccl_under(include)
        if found is not None:
            return found
    try:
        major = nvrtc_version()[0]
    except Exception:
        return None
    for toolkit in toolkit_include_dirs():
        if _header_major(toolkit) == major:
            found = _cccl_under(toolkit)
            if found is not None:
                return found
    return None


_DEVRT_NAMES = ("libcudadevrt.a", "cudadevrt.lib")


def cudadevrt_library() -> str | None:
    """The CUDA device runtime library (``libcudadevrt.a``), which relocatable code that
    launches kernels from the device (dynamic parallelism) is linked with: the one beside the
    runtime headers NVRTC is given (:func:`cuda_include_dir`: pip's ``nvidia-cuda-runtime``,
    ``lib/``), else a CUDA toolkit's (``CUDA_HOME``, ``CUDA_PATH``, :data:`DEFAULT_TOOLKIT`:
    ``lib64/``, ``lib/``, ``lib/x64/``) whose major version is NVRTC's. None where there is
    none."""
    include = cuda_include_dir()
    roots = [os.path.dirname(include)] if include is not None else []
    try:
        major = nvrtc_version()[0]
    except Exception:
        major = None
    roots += [os.path.dirname(t) for t in toolkit_include_dirs() if _header_major(t) == major]
    for root in roots:
        for sub in ("lib64", "lib", os.path.join("lib", "x64")):
            for name in _DEVRT_NAMES:
                path = os.path.join(root, sub, name)
                if os.path.isfile(path):
                    return path
    return None


def _out_buffer(size: int) -> bytearray:
    """Memory for NVRTC to write ``size`` bytes of output into. A bytearray: a bytes object
    is immutable, and CPython shares the one-byte ones, so ``b" " * 1`` written into (an empty
    log or PTX is one NUL byte) would change the b" " of the whole interpreter."""
    return bytearray(size)


def _check(result, prog=None):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        log = ""
        if prog is not None:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            buf = _out_buffer(size)
            nvrtc.nvrtcGetProgramLog(prog, buf)
            log = bytes(buf).rstrip(b"\x00").decode(errors="replace")
        message = f"NVRTC: {err.name}"
        if "device-side kernel launch could not be processed" in log:
            # Dynamic parallelism: NVRTC declares the device runtime only for relocatable code.
            message += ("; a kernel that launches kernels compiles only as relocatable code: "
                        "pass options=('-rdc=true',) (kernarg then links the device runtime)")
        raise NvrtcError(message, log)
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


def normalize_headers(headers) -> tuple[tuple[str, str], ...]:
    """``headers`` (None, or a mapping of include name to header text) as a sorted tuple of
    ``(name, text)`` pairs; TypeError naming what is wrong."""
    if headers is None:
        return ()
    if isinstance(headers, tuple) and all(isinstance(h, tuple) for h in headers):
        items = headers                             # already normalized
    elif hasattr(headers, "items"):
        items = tuple(headers.items())
    else:
        raise TypeError("headers must be a mapping of include name to header text, e.g. "
                        f"{{'util.cuh': '...'}}, got {type(headers).__name__}")
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2):
            raise TypeError(f"headers: expected (include name, text) pairs, got {item!r}")
        if not isinstance(item[0], str) or not isinstance(item[1], str):
            raise TypeError(f"headers: {item[0]!r}: the include name and the header's text must "
                            f"be str, got {type(item[0]).__name__} and {type(item[1]).__name__}")
    return tuple(sorted(items))


def declaration_text(source: str, headers: tuple[tuple[str, str], ...]) -> str:
    """Where a kernel's declaration is looked for: the source and its in-memory headers
    (``normalize_headers``'s pairs), as one text."""
    return "\n".join([source] + [text for _, text in headers])


def normalize_options(options) -> tuple:
    """NVRTC options as a tuple: a sequence of option strings (or bytes), or one option as a
    str (``"-lineinfo"``), which a tuple() of it would split into characters."""
    if isinstance(options, (str, bytes)):
        return (options,)
    try:
        options = tuple(options)
    except TypeError:
        raise TypeError(f"options must be a sequence of NVRTC option strings, such as "
                        f"('-lineinfo',), got {type(options).__name__}") from None
    for o in options:
        if not isinstance(o, (str, bytes)):
            raise TypeError(f"options must be NVRTC option strings, got {o!r} "
                            f"({type(o).__name__}) among them")
    return options


_ARCH_FLAGS = ("-arch", "--gpu-architecture")


def split_arch_option(options: tuple) -> tuple[str | None, tuple]:
    """The target architecture ``options`` name, and ``options`` without it: ``-arch=sm_90a``,
    ``--gpu-architecture=sm_90a``, or either flag followed by the value as the next option.
    ``(None, options)`` when none is named. NVRTC would take the last of several; two that
    differ are a ValueError here, as one of them would be dropped without a word."""
    named, rest = [], []
    i = 0
    while i < len(options):
        o = options[i]
        text = o.decode("latin-1") if isinstance(o, bytes) else o
        flag, eq, value = text.partition("=")
        if flag.strip() in _ARCH_FLAGS:
            if not eq:
                if i + 1 == len(options):
                    raise ValueError(f"options: {o!r} is the last option: it must be followed "
                                     "by an architecture, such as 'sm_90a'")
                i += 1
                value = options[i]
                value = value.decode("latin-1") if isinstance(value, bytes) else value
            value = value.strip()
            named.append((text if eq else f"{text} {value}", value))
        else:
            rest.append(o)
        i += 1
    if not named:
        return None, options
    if len({value for _, value in named}) > 1:
        raise ValueError("options name more than one target architecture ("
                         + ", ".join(repr(shown) for shown, _ in named)
                         + "): NVRTC would compile for the last alone; give one")
    return named[-1][1], tuple(rest)


def _arch_parts(arch: str):
    """``'sm_90a'`` -> ``('sm', 9, 0, 'a')``; None for what is not ``sm_`` or ``compute_``,
    a number, and an optional ``a`` (architecture-specific) or ``f`` (family-specific)."""
    m = re.fullmatch(r"(sm|compute)_(\d{2,3})([af]?)", arch)
    if m is None:
        return None
    number = int(m.group(2))
    return m.group(1), number // 10, number % 10, m.group(3)


def arch_runs_on(arch: str, cc: tuple[int, int]) -> bool | None:
    """Whether code NVRTC makes for ``arch`` loads on a device of compute capability ``cc``
    (``(9, 0)``), by CUDA's compatibility rules; None when ``arch`` is not a form kernarg
    knows. Machine code (``sm_XY``) runs on the same major version, minor ``Y`` or later;
    PTX (``compute_XY``) on ``X.Y`` and every later version, which JIT-compile it.
    Architecture-specific targets (``sm_90a``, ``compute_90a``) run on ``X.Y`` alone; family
    targets (``sm_100f``) on their family: the same major version, minor ``Y`` or later."""
    parts = _arch_parts(arch)
    if parts is None:
        return None
    kind, major, minor, suffix = parts
    if suffix == "a":
        return cc == (major, minor)
    if suffix == "f" or kind == "sm":
        return cc[0] == major and cc[1] >= minor
    return cc >= (major, minor)


def _no_nul(text, what: str) -> None:
    """ValueError naming ``what`` when ``text`` (str or bytes) holds a NUL character."""
    at = text.find("\0" if isinstance(text, str) else b"\0")
    if at >= 0:
        raise ValueError(f"{what} holds a NUL character (at index {at}): NVRTC reads C strings, "
                         "which would end there")


def compile_program(source: str, *, options=(), arch: str | None = None,
                    name_expressions=(), name: str = "kernarg_source.cu",
                    headers=None) -> Compiled:
    """Compile ``source`` for ``arch`` (``"compute_90"``: PTX; ``"sm_90"``: PTX and CUBIN),
    and give the lowered (mangled) name of each of ``name_expressions`` -- C++ expressions
    naming ``__global__`` functions, such as ``"saxpy<float>"`` or ``"ns::kern"``, which NVRTC
    instantiates. ``headers`` maps include names to header texts the source may ``#include``
    (NVRTC's in-memory headers). An architecture named in ``options`` (``-arch=sm_90a``) is
    the target, as ``arch`` is, and a real one gives machine code too; naming one there and a
    different one in ``arch`` is a ValueError."""
    if not isinstance(source, str):
        raise TypeError(f"source must be CUDA C++ text (a str), got {type(source).__name__}")
    headers = normalize_headers(headers)
    options = normalize_options(options)
    named, without = split_arch_option(options)
    if named is not None:
        # The machine code is asked for when the target is a real architecture: the one the
        # options name decides it, as it decides what NVRTC compiles for.
        if arch is not None and arch != named:
            raise ValueError(f"options name the architecture {named!r} and arch is {arch!r}: "
                             "give one")
        arch, options = named, without
    # NVRTC reads C strings: text after a NUL would be dropped without a word.
    _no_nul(source, "source")
    for include, text in headers:
        _no_nul(include, f"headers: the include name {include!r}")
        _no_nul(text, f"headers: {include!r}")
    for o in options:
        _no_nul(o, f"options: {o!r}")
    for expr in name_expressions:
        _no_nul(expr, "the kernel name")
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:   # pragma: no cover - depends on the environment
        raise NvrtcError("NVRTC needs cuda-bindings: pip install cuda-bindings "
                         "nvidia-cuda-nvrtc nvidia-cuda-runtime") from exc
    opts = [o.encode() if isinstance(o, str) else bytes(o) for o in options]
    include = cuda_include_dir()
    if include is not None:
        opts.append(f"-I{include}".encode())
    cccl = cccl_include_dir(include)
    if cccl is not None and cccl != include:    # a toolkit's, or CCCL in a directory of its own
        opts.append(f"-I{cccl}".encode())
    if arch is not None:
        opts.append(f"--gpu-architecture={arch}".encode())
    exprs = list(name_expressions)
    try:
        (prog,) = _check(nvrtc.nvrtcCreateProgram(
            source.encode(), name.encode(), len(headers), [t.encode() for _, t in headers],
            [n.encode() for n, _ in headers]))
    except RuntimeError as exc:
        if isinstance(exc, NvrtcError):
            raise
        raise NvrtcError(f"NVRTC is not available ({exc}); pip install nvidia-cuda-nvrtc") from exc
    try:
        for expr in exprs:
            _check(nvrtc.nvrtcAddNameExpression(prog, expr.encode()), prog)
        _check(nvrtc.nvrtcCompileProgram(prog, len(opts), opts), prog)
        (size,) = _check(nvrtc.nvrtcGetPTXSize(prog))
        buf = _out_buffer(size)
        _check(nvrtc.nvrtcGetPTX(prog, buf))
        ptx = bytes(buf).rstrip(b"\x00").decode()
        if not ptx.strip():
            # -dlto: NVRTC's output is LTO IR (nvrtcGetLTOIR), and its PTX and CUBIN empty.
            lto = [o for o in opts if o.startswith((b"-dlto", b"--dlink-time-opt"))]
            raise NvrtcError("NVRTC compiled the source but gave no PTX" + (
                f": {lto[0].decode(errors='replace')!r} asks for link-time optimisation IR, "
                "which no module load takes; leave it out" if lto else ""))
        cubin = None
        if arch is not None and arch.startswith("sm_"):
            (size,) = _check(nvrtc.nvrtcGetCUBINSize(prog))
            buf = _out_buffer(size)
            _check(nvrtc.nvrtcGetCUBIN(prog, buf))
            cubin = bytes(buf)
        lowered = {}
        for expr in exprs:
            try:
                (low,) = _check(nvrtc.nvrtcGetLoweredName(prog, expr.encode()))
            except NvrtcError as exc:
                raise NvrtcError(f"{exc}: {expr!r} does not name a __global__ function of "
                                 "the source") from None
            lowered[expr] = low.decode() if isinstance(low, bytes) else str(low)
        return Compiled(ptx, cubin, lowered)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


# ---------------------------------------------------------------------------------------------
# The compilation cache on disk (opt-in: KERNARG_CACHE_DIR). One JSON file per compilation,
# named by the SHA-256 of everything that decides NVRTC's output that kernarg can see: the
# source and its in-memory headers, the options, architecture and name expressions, NVRTC's
# version, and the CUDA headers kernarg adds (their directory, and cuda.h's size and time
# stamp). Headers the source includes from files (-I options) are not part of the key: clear
# the directory when they change.
# A file is checked against its whole key when read (not only its name), written to a
# temporary file and renamed into place (readers never see half a file, and processes that
# compile the same thing at once both write whole files), and ignored if it cannot be read.
# It is JSON, not pickle: reading a cache directory never runs code.

def cache_dir() -> str | None:
    """The directory ``Kernel.from_source`` keeps its NVRTC output in across processes
    (``$KERNARG_CACHE_DIR``), or None: not kept on disk (the default)."""
    return os.environ.get(CACHE_DIR_ENV) or None


def _cache_key(source, options, arch, name_expressions, headers):
    include = cuda_include_dir()
    try:
        st = os.stat(os.path.join(include, "cuda.h")) if include else None
    except OSError:
        st = None
    key = {
        "format": _CACHE_FORMAT,
        "source": source,
        "options": [o if isinstance(o, str) else bytes(o).decode("latin-1") for o in options],
        "arch": arch,
        "name_expressions": list(name_expressions),
        "headers": [list(h) for h in headers],
        "nvrtc": list(nvrtc_version()),
        "include": include,
        "include_stamp": [st.st_size, st.st_mtime_ns] if st else None,
        # The CCCL headers may come from pip or a toolkit (cccl_include_dir): which, is part of
        # what was compiled.
        "cccl": cccl_include_dir(include),
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return digest, key


def _cache_read(path, key):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("key") != key:
            return None
        cubin = data["cubin"]
        return Compiled(data["ptx"], None if cubin is None else base64.b64decode(cubin),
                        dict(data["lowered"]))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None         # missing, being replaced, corrupt, or another format: compile


def _cache_write(directory, path, key, compiled):
    data = {"key": key, "ptx": compiled.ptx, "lowered": compiled.lowered,
            "cubin": None if compiled.cubin is None
            else base64.b64encode(compiled.cubin).decode("ascii")}
    tmp = None
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory,
                                         prefix=".tmp-", suffix=".json", delete=False) as f:
            tmp = f.name
            json.dump(data, f)
        os.replace(tmp, path)
    except OSError as exc:
        warnings.warn(f"kernarg: cannot write the compilation cache in {directory!r} "
                      f"({CACHE_DIR_ENV}): {exc}; compiling without it", RuntimeWarning,
                      stacklevel=3)
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def compile_program_cached(source: str, *, options=(), arch: str | None = None,
                           name_expressions=(), headers=None) -> Compiled:
    """:func:`compile_program`, through the cache in :func:`cache_dir` when there is one: a
    compilation done before, by this process or another, is read back instead of run again."""
    headers = normalize_headers(headers)
    options = normalize_options(options)
    directory = cache_dir()

    def run():
        return compile_program(source, options=options, arch=arch,
                               name_expressions=name_expressions, headers=headers)

    if directory is None:
        return run()
    try:
        digest, key = _cache_key(source, options, arch, name_expressions, headers)
    except Exception:       # no usable NVRTC: compile_program says so, in its own words
        return run()
    path = os.path.join(directory, f"{digest}.json")
    compiled = _cache_read(path, key)
    if compiled is None:
        compiled = run()
        _cache_write(directory, path, key, compiled)
    return compiled
