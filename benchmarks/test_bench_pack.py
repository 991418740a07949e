"""pytest-benchmark suite: kernarg.pack vs cuda.core ParamHolder vs the Cython floor.

    pytest benchmarks/ --benchmark-group-by=param:case

Each case is benchmarked for every contender on the same tuple, in one process; compare
within a group. `python -m kernarg bench` prints the same comparison as a ratio table.
"""
import pytest

import kernarg
from kernarg._bench import build_cases
from kernarg._benchfloor import copy_ints

CASES = build_cases()

try:
    from cuda.core._kernel_arg_handler import ParamHolder
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
