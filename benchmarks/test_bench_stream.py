"""pytest-benchmark suite: kernarg.resolve_stream for each kind of stream object.

    pytest benchmarks/test_bench_stream.py --benchmark-group-by=group

Every `Kernel.launch(..., stream=s)` resolves `s` (a prepared launch resolves it once). The
stream objects here are stand-ins shaped as each library's: they cost what reading their
handle costs in Python, which is part of what a launch with such a stream pays. A cuda.core
`Stream` is measured too where a driver is present.
"""
import numpy as np
import pytest

import kernarg


class _TorchStream:
    """torch < 2.x's shape (torch.cuda.Stream, whose class is named Stream): `.cuda_stream`."""

    cuda_stream = 0x1000


_TorchStream.__name__ = _TorchStream.__qualname__ = "Stream"
_TorchStream.__module__ = "torch.cuda.streams"


class _TorchProtocolStream(_TorchStream):
    """torch 2.15's shape: a Python `__cuda_stream__` over the `.cuda_stream` property."""

    def __cuda_stream__(self):
        return (0, self.cuda_stream)


class _CupyStream:
    """CuPy's shape (cupy.cuda.Stream): `.ptr`."""

    __module__ = "cupy.cuda.stream"

    def __init__(self):
        self.ptr = 0x2000


def _streams():
    from cuda.bindings import driver

    out = [("None", None), ("int", 0x3000), ("numpy.uint64", np.uint64(0x3000)),
           ("torch-style .cuda_stream", _TorchStream()),
           ("torch 2.15-style __cuda_stream__", _TorchProtocolStream()),
           ("CuPy-style .ptr", _CupyStream()), ("cuda.bindings CUstream", driver.CUstream(0x4000))]
    try:
        from kernarg._bench import cuda_core

        dev = cuda_core().Device(0)
        dev.set_current()
        out.append(("cuda.core Stream", dev.create_stream()))
    except Exception:       # no driver or GPU: the stand-ins only
        pass
    return out


STREAMS = _streams()


@pytest.mark.parametrize("label, stream", STREAMS, ids=[label for label, _ in STREAMS])
def test_resolve_stream(benchmark, label, stream):
    benchmark.group = "resolve_stream"
    expected = kernarg.resolve_stream(stream)
    assert benchmark(kernarg.resolve_stream, stream) == expected
