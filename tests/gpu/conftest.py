"""tests/gpu needs a CUDA driver and GPU; without them every test here is skipped, saying so."""
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
    skip = pytest.mark.skip(reason=f"GPU tests need a CUDA GPU: {REASON}")
    for item in items:
        if "/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
