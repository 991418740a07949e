"""kernarg: get arguments into CUDA kernels from Python, at C speed.

Public names are re-exported here; each private module lists its own in ``__all__``.
"""
from kernarg._capi import _C_API as _C_API  # the C API capsule (kernarg.h)
from kernarg._capi import get_include
from kernarg._errors import CudaError, NoDriverError
from kernarg._handler import MAX_PARAM_BYTES, ParamBlock, pack, register
from kernarg._interop import DLPACK_MAX_VERSION, registered_types
from kernarg._nvrtc import NvrtcError
from kernarg._signature import Signature
from kernarg._stream import (
    LEGACY_DEFAULT_STREAM,
    PER_THREAD_DEFAULT_STREAM,
    default_stream,
    resolve_stream,
    use_stream,
)

__version__ = "0.1.0"

_LAUNCH_NAMES = ("Kernel", "LaunchConfig", "PreparedLaunch")


def __getattr__(name):
    # The launch layer is compiled against cuda.bindings' cydriver; import it on first use so
    # that packing works even where that import fails (e.g. a mismatched cuda-bindings).
    if name in _LAUNCH_NAMES:
        try:
            from kernarg import _launch
        except ImportError as exc:
            raise ImportError(f"kernarg.{name} needs kernarg._launch, which failed to import "
                              f"({exc}); check that cuda-bindings matches the one kernarg was "
                              "built with") from exc
        return getattr(_launch, name)
    raise AttributeError(f"module 'kernarg' has no attribute {name!r}")

__all__ = [
    "CudaError",
    "DLPACK_MAX_VERSION",
    "Kernel",
    "LaunchConfig",
    "LEGACY_DEFAULT_STREAM",
    "MAX_PARAM_BYTES",
    "NoDriverError",
    "NvrtcError",
    "PER_THREAD_DEFAULT_STREAM",
    "ParamBlock",
    "PreparedLaunch",
    "Signature",
    "__version__",
    "default_stream",
    "get_include",
    "pack",
    "register",
    "registered_types",
    "resolve_stream",
    "use_stream",
]
