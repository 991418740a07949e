"""pytest-benchmark suite: launch latency on a GPU (skipped, saying so, without one).

    pytest benchmarks/test_bench_launch.py --benchmark-group-by=param:nargs

Every contender of `python -m kernarg bench` (kernarg.launch, prepared and bound, with plain
arguments and with torch tensors; cuda.core, cuda.bindings, CuPy, numba-cuda) launches the same
empty kernel with the same arguments on one stream (cuda.core's launch and kernarg's in its call
form also launch two such kernels in turn, each with its own config; kernarg.launch and
cuda.core's launch also launch two blocks as a cluster, on compute capability 9.0+). A round
is a burst of BURST launches after an untimed stream synchronise, so no launch waits for the
GPU: divide a round's time by BURST for the host cost of one launch. "C loop" is the floor: BURST
cuLaunchKernel calls in one C loop. Compare within a group.
"""
import pytest

from kernarg import _bench_launch


def _gpu_reason():
    try:
        from cuda.bindings import driver

        if driver.cuInit(0)[0] == driver.CUresult.CUDA_SUCCESS:
            return None
        return "cuInit failed"
    except Exception as exc:
        return f"{type(exc).__name__}"


REASON = _gpu_reason()
pytestmark = pytest.mark.skipif(REASON is not None,
                                reason=f"launch latency needs a CUDA GPU: no driver ({REASON})")

CONTENDERS = (_bench_launch.FLOOR, "kernarg.launch", "kernarg prepared", "kernarg bound",
              "kernarg.launch+torch",
              "kernarg prepared+torch", _bench_launch.WITH_CLUSTER, "cuda.core launch",
              _bench_launch.CORE_WITH_CLUSTER, _bench_launch.DROP_IN,
              _bench_launch.CORE_IN_TURN, _bench_launch.DROP_IN_IN_TURN,
              "cuda.bindings cuLaunchKernel",
              "CuPy RawKernel", "numba-cuda")
_cache: dict = {}


@pytest.fixture(scope="module")
def setup():
    return _bench_launch.Setup()


def _launchers(setup, n):
    if n not in _cache:
        _cache[n] = setup.contenders(n)
    return _cache[n]


# The +torch rows replace some of the arguments by tensors: with no arguments there are none.
CASES = [(nargs, contender) for nargs in _bench_launch.NARGS for contender in CONTENDERS
         if nargs or not contender.endswith("+torch")]


@pytest.mark.parametrize(("nargs", "contender"), CASES)
def test_launch(benchmark, setup, nargs, contender):
    fn = _launchers(setup, nargs).get(contender)
    if fn is None:
        pytest.skip(f"{contender} is not available here (see the captured output)")
    # BURST launches a round: one call of the C loop, half as many calls of an in-turn
    # contender (two launches each).
    burst = (1 if isinstance(fn, _bench_launch.WholeBurst)
             else _bench_launch.BURST // getattr(fn, "launches", 1))

    def launches():
        for _ in range(burst):
            fn()

    benchmark.group = f"{nargs} args: {burst} launches per round"
    benchmark.pedantic(launches, setup=setup.sync, rounds=50, iterations=1, warmup_rounds=2)
