"""kernarg's exceptions for driver failures."""
from __future__ import annotations

__all__ = ["CudaError", "NoDriverError"]


class CudaError(RuntimeError):
    """A CUDA driver call failed. ``name`` is the driver's error name (e.g.
    ``"CUDA_ERROR_INVALID_VALUE"``), ``code`` its CUresult value (None when the driver could not
    be reached at all)."""

    def __init__(self, message: str, name: str | None = None, code: int | None = None):
        super().__init__(message)
        self.name = name
        self.code = code


class NoDriverError(CudaError):
    """No CUDA driver or no GPU: the operation needs one."""
