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

# The launch layer is compiled against cuda.bindings' cydriver. Packing must work even where
# that import fails (e.g. a mismatched cuda-bindings), so its names then become stand-ins that
# raise the ImportError when used. (Not a module __getattr__: CPython 3.11 does not specialise
# attribute loads on a module that has one, which would slow every `kernarg.pack(...)` call.)
try:
    from kernarg._launch import (
        BoundLaunch,
        Kernel,
        KernelNode,
        LaunchConfig,
        PreparedLaunch,
        launch,
        set_producer_sync,
    )
except ImportError as _exc:
    _launch_error = (f"kernarg._launch failed to import ({_exc}); check that cuda-bindings "
                     "matches the one kernarg was built with")

    class _Unavailable(type):
        def __getattr__(cls, name):
            raise ImportError(f"kernarg.{cls.__name__} is unavailable: {_launch_error}")

        def __call__(cls, *args, **kwargs):
            raise ImportError(f"kernarg.{cls.__name__} is unavailable: {_launch_error}")

    Kernel = _Unavailable("Kernel", (), {})
    LaunchConfig = _Unavailable("LaunchConfig", (), {})
    PreparedLaunch = _Unavailable("PreparedLaunch", (), {})
    BoundLaunch = _Unavailable("BoundLaunch", (), {})
    KernelNode = _Unavailable("KernelNode", (), {})

    def launch(stream, config, kernel, *args):
        raise ImportError(f"kernarg.launch is unavailable: {_launch_error}")

    def set_producer_sync(enabled):
        raise ImportError(f"kernarg.set_producer_sync is unavailable: {_launch_error}")


__all__ = [
    "BoundLaunch",
    "CudaError",
    "DLPACK_MAX_VERSION",
    "Kernel",
    "KernelNode",
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
    "launch",
    "pack",
    "register",
    "registered_types",
    "resolve_stream",
    "set_producer_sync",
    "use_stream",
]
