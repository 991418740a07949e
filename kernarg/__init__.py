"""kernarg: get arguments into CUDA kernels from Python, at C speed.

Public names are re-exported here; each private module lists its own in ``__all__``.
"""
from kernarg._capi import _C_API, get_include
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

__all__ = [
    "DLPACK_MAX_VERSION",
    "LEGACY_DEFAULT_STREAM",
    "MAX_PARAM_BYTES",
    "NvrtcError",
    "PER_THREAD_DEFAULT_STREAM",
    "ParamBlock",
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
