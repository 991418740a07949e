"""pytest-benchmark suite: kernarg.pack vs cuda.core ParamHolder vs the Cython floor.

    pytest benchmarks/ --benchmark-group-by=param:case

Each case is benchmarked for every contender on the same tuple, in one process; compare
within a group. `python -m kernarg bench` prints the same comparison as a ratio table.
"""
import pytest

import kernarg
from kernarg._bench import build_cases, param_holder
from kernarg._benchfloor import copy_ints

CASES = build_cases()

try:
    ParamHolder = param_holder()
except ImportError:  # pragma: no cover
    ParamHolder = None


def _contenders(case):
    out = [("kernarg", kernarg.pack)]
    if ParamHolder is not None:
        try:
            ParamHolder(CASES[case])
            out.append(("ParamHolder", ParamHolder))
        except Exception:
            pass
    if case == "1 int" or case.endswith(" ints"):
        out.append(("floor", copy_ints))
    return out


PARAMS = [(case, label, fn) for case in CASES for label, fn in _contenders(case)]


@pytest.mark.parametrize("case, contender, fn", PARAMS,
                         ids=[f"{c}-{label}" for c, label, _ in PARAMS])
def test_pack(benchmark, case, contender, fn):
    benchmark.group = case
    args = CASES[case]
    benchmark(fn, args)


# Typed vs untyped on the same tuples (issue 4), grouped per case.
import numpy as np  # noqa: E402

from kernarg._bench import _DLPackView, _PinnedStandIn, _PropertyCAI, _typed_cases  # noqa: E402

TYPED = [(name, kernarg.Signature(decl), args) for name, decl, args in _typed_cases(CASES)]


@pytest.mark.parametrize("case, sig, args", TYPED, ids=[t[0] for t in TYPED])
@pytest.mark.parametrize("mode", ["untyped", "typed"])
def test_typed_vs_untyped(benchmark, case, sig, args, mode):
    benchmark.group = case
    # Both called as user code writes them (a stored bound method would add a dispatch).
    if mode == "untyped":
        benchmark(lambda: kernarg.pack(args))
    else:
        benchmark(lambda: sig.pack(args))


# One foreign-array argument: the consumer path against the producer's own protocol call.
FOREIGN = [("CAI property", _PropertyCAI(0x9000_0000)), ("DLPack", _DLPackView()),
           ("numpy over pinned memory", np.frombuffer(_PinnedStandIn(64), np.float32))]


@pytest.mark.parametrize("case, obj", FOREIGN, ids=[f[0] for f in FOREIGN])
def test_foreign_pack(benchmark, case, obj):
    benchmark.group = f"foreign: {case}"
    benchmark(kernarg.pack, (obj,))


@pytest.mark.parametrize("case, obj", FOREIGN, ids=[f[0] for f in FOREIGN])
def test_foreign_protocol_only(benchmark, case, obj):
    benchmark.group = f"foreign: {case}"
    if case == "DLPack":
        benchmark(lambda: (obj.__dlpack_device__(), obj.__dlpack__(stream=1, max_version=(1, 1))))
    elif case == "numpy over pinned memory":
        benchmark(lambda: obj.__array_interface__)
    else:
        benchmark(lambda: obj.__cuda_array_interface__)
