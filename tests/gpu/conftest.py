"""tests/gpu needs a CUDA driver and GPU; without them every test here is skipped, saying so,
unless KERNARG_REQUIRE_GPU=1 is set (runs that exist to exercise a driver: the GPU session, the
sanitizer job's stand-in run), which makes a missing one an error rather than a suite of skips."""
import os

import pytest


def _gpu_reason():
    try:
        from cuda.bindings import driver
    except ImportError as exc:
        return f"cuda.bindings not importable ({exc})"
    try:
        (err,) = driver.cuInit(0)
    except Exception as exc:
        return f"no CUDA driver ({type(exc).__name__})"
    if err != driver.CUresult.CUDA_SUCCESS:
        return f"no usable CUDA GPU (cuInit: {err.name})"
    err, count = driver.cuDeviceGetCount()
    if err != driver.CUresult.CUDA_SUCCESS or count == 0:
        return "no CUDA GPU"
    return None


REASON = _gpu_reason()


def pytest_collection_modifyitems(config, items):
    if REASON is None:
        return
    if os.environ.get("KERNARG_REQUIRE_GPU", "0") not in ("", "0"):
        raise pytest.UsageError(f"KERNARG_REQUIRE_GPU is set but {REASON}")
    skip = pytest.mark.skip(reason=f"GPU tests need a CUDA GPU: {REASON}")
    for item in items:
        if "/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
