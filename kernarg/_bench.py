"""Packing-latency benchmark behind ``python -m kernarg bench``.

Every case runs kernarg.pack, cuda.core's ParamHolder and (for ints) the Cython floor on the
*same* argument tuple, interleaved in one process; the table reports the minimum over repeats
and the speed-up ratio. Typed packing is also timed against cuda.bindings' own packer (what
``cuLaunchKernel(kernelParams=(values, types))`` runs) on the same parameters and values.
Absolute numbers depend on the machine; ratios are the result.
"""
from __future__ import annotations

import ctypes
import json
import platform
import statistics
import sys
import sysconfig
import time
import timeit

import numpy as np

__all__ = ["CASES", "GOALS", "bindings_kernel_params", "bindings_packer", "build_cases",
           "cuda_core", "param_holder", "run"]

#: Speed-up goals over ParamHolder (issue 2).
GOALS = {"1 int": 2.0, "16 ints": 3.0, "16 numpy.float32": 4.0,
         "8 Buffers + 4 ints + 4 floats": 3.0, "256 ints": 5.0}
CASES = list(GOALS) + ["16 mixed scalars", "4 CAI arrays"]


class _CAI:
    def __init__(self, ptr):
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


class _PropertyCAI:
    """A producer whose property builds the dict on each access, as libraries do (a minimal
    one: real producers also compute strides, dtype strings and the current stream)."""

    def __init__(self, ptr):
        self.ptr = ptr

    @property
    def __cuda_array_interface__(self):
        return {"shape": (4,), "typestr": "<f4", "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": None}


class _DLPackView:
    """Real DLPack capsules (numpy's), reported as CUDA memory: packing reads the address and
    releases the capsule but never dereferences it, so the consumer path is measured exactly."""

    # numpy < 2.1 knows no max_version and makes legacy capsules only.
    versioned = np.lib.NumpyVersion(np.__version__) >= "2.1.0"

    def __init__(self):
        self.array = np.zeros(4, np.float32)

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, *, stream=None, max_version=None):
        if max_version is None or not self.versioned:
            return self.array.__dlpack__()
        return self.array.__dlpack__(max_version=max_version)


class _PinnedStandIn(bytearray):
    """Stands in for CuPy's PinnedMemoryPointer, the memory cupyx.empty_pinned's arrays are
    views of: kernarg recognises it by module and name and never reads the memory, so ordinary
    memory takes the same path. (On a GPU, kernarg._bench_interop measures the real ones.)"""


_PinnedStandIn.__module__ = "cupy.cuda.pinned_memory"
_PinnedStandIn.__name__ = _PinnedStandIn.__qualname__ = "PinnedMemoryPointer"


def _pinned_numpy_rows(repeat: int, target: float) -> list[dict]:
    """A numpy array over pinned memory: kernarg's path for it (the .base walk) against numpy's
    own protocol calls, as kernarg._bench_interop measures a library's array on a GPU."""
    import io

    from kernarg import _bench_interop

    array = np.frombuffer(_PinnedStandIn(64), np.float32)
    result = _bench_interop.run(repeat, target, file=io.StringIO(), arrays=[
        ("numpy over pinned memory (cupyx.empty_pinned stand-in)", array)])
    return [row for row in result["rows"] if "protocol_over_kernarg" in row]


def _dlpack_protocol(obj):
    obj.__dlpack_device__()
    return obj.__dlpack__(stream=1, max_version=(1, 1))


def cuda_core():
    """cuda.core's public namespace: the package itself from cuda-core 0.5 on,
    ``cuda.core.experimental`` before (the benchmarks and GPU tests run on whichever cuda.core
    the GPU machine has)."""
    import cuda.core

    if hasattr(cuda.core, "Device"):
        return cuda.core
    import cuda.core.experimental

    return cuda.core.experimental


def param_holder():
    """cuda.core's argument packer class, wherever this cuda.core keeps it (ImportError if
    nowhere)."""
    try:
        from cuda.core._kernel_arg_handler import ParamHolder
    except ImportError:
        from cuda.core.experimental._kernel_arg_handler import ParamHolder
    return ParamHolder


def build_cases() -> dict[str, tuple]:
    Buffer = cuda_core().Buffer
    bufs = tuple(Buffer.from_handle(0x7000_0000 + 4096 * i, 4096) for i in range(8))
    return {
        "1 int": (1,),
        "16 ints": tuple(range(16)),
        "16 numpy.float32": tuple(np.float32(i) for i in range(16)),
        "8 Buffers + 4 ints + 4 floats": bufs + (1, 2, 3, 4) + (1.0, 2.0, 3.0, 4.0),
        "256 ints": tuple(range(256)),
        "16 mixed scalars": (1, 2.0, True, np.float32(3), np.int8(4), np.float16(5),
                             ctypes.c_int(6), np.complex64(7), np.uint8(1), 8, 9.0, np.int64(10),
                             np.uint32(11), ctypes.c_float(12), np.float64(13), False),
        "4 CAI arrays": tuple(_CAI(0x9000_0000 + 4096 * i) for i in range(4)),
    }


def _timer(fn, args, target_s: float, names: dict | None = None) -> tuple[timeit.Timer, int]:
    """A timer for fn(args) and a loop count that takes about target_s seconds.

    ``fn`` may instead be a statement (str) over ``args`` and ``names``, to time a call written
    the way users write it: ``sig.pack(args)`` looks the method up without creating a bound
    method, whereas calling a stored bound method costs an extra dispatch.
    """
    if isinstance(fn, str):
        timer = timeit.Timer(fn, globals={"args": args, **(names or {})})
    else:
        timer = timeit.Timer("fn(args)", globals={"fn": fn, "args": args})
    number, elapsed = timer.autorange()
    return timer, max(1, int(number * target_s / max(elapsed, 1e-9)))


def bindings_packer():
    """cuda.bindings' own kernel-argument packer: the class ``cuLaunchKernel`` builds from its
    ``kernelParams=(values, ctypes types)`` tuple (``driver._HelperKernelParams`` in 13.x,
    ``_lib.utils.HelperKernelParams`` in 12.x). ImportError where this cuda-bindings has
    neither."""
    from cuda.bindings import driver

    packer = getattr(driver, "_HelperKernelParams", None)
    if packer is None:
        from cuda.bindings._lib.utils import HelperKernelParams as packer
    return packer


#: Scalar parameter types of the typed cases -> the ctypes type cuda.bindings' packer is given.
_BINDINGS_TYPES = {"float": ctypes.c_float, "int": ctypes.c_int, "long long": ctypes.c_longlong}


def bindings_kernel_params(decl: str, args: tuple) -> tuple[tuple, tuple]:
    """``(values, types)`` for cuda.bindings' packer: the same parameters as ``decl`` and the
    same values as ``args``. Pointers (cuda.core Buffers here) are given as the ``CUdeviceptr``
    that ``cuMemAlloc`` returns, with type None, as cuda-python's samples pass them."""
    from cuda.bindings import driver

    import kernarg

    types = tuple(None if t.endswith("*") else _BINDINGS_TYPES[t]
                  for t in kernarg.Signature(decl).types)
    values = tuple(driver.CUdeviceptr(int(a.handle)) if t is None else a
                   for a, t in zip(args, types, strict=True))
    return values, types


def _peers():
    peers = {}
    try:
        ParamHolder = param_holder()
    except ImportError as exc:  # pragma: no cover - depends on the installed cuda.core
        print(f"cuda.core ParamHolder unavailable ({exc}); reporting kernarg alone",
              file=sys.stderr)
    else:
        peers["ParamHolder"] = ParamHolder
    return peers


def _typed_cases(cases: dict[str, tuple]) -> list[tuple[str, str, tuple]]:
    """(name, C parameter list, args) for the typed-vs-untyped comparison."""
    bufs = cases["8 Buffers + 4 ints + 4 floats"][:2]
    return [
        ("typed saxpy (2 Buffers, float, int)", "float* out, const float* x, float a, int n",
         bufs + (2.0, 1024)),
        ("typed 16 long long", ", ".join(["long long"] * 16), tuple(range(16))),
        ("typed 16 int", ", ".join(["int"] * 16), tuple(range(16))),
        ("typed 16 float from float", ", ".join(["float"] * 16),
         tuple(float(i) for i in range(16))),
        ("typed 16 float from numpy.float32", ", ".join(["float"] * 16),
         cases["16 numpy.float32"]),
    ]


def _measure(contenders, args, repeat: int, target: float,
             names: dict | None = None) -> dict[str, list[float]]:
    timers = {label: _timer(fn, args, target, names) for label, fn in contenders}
    rounds: dict[str, list[float]] = {label: [] for label in timers}
    # Many short rounds, each timing every contender back to back: the machine's speed
    # drifts, so ratios are taken within a round and summarised by their median. The order
    # alternates between rounds so that no contender always runs first.
    order = list(timers.items())
    for r in range(repeat):
        for label, (timer, number) in (order if r % 2 == 0 else order[::-1]):
            rounds[label].append(timer.timeit(number) / number * 1e9)
    return rounds


def _bindings_rows(cases, repeat: int, target: float, file) -> list[dict]:
    """Typed packing against cuda.bindings' packer on the same parameters and values: what
    ``cuLaunchKernel(..., kernelParams=(values, types), ...)`` does before the driver call."""
    import kernarg

    try:
        packer = bindings_packer()
    except ImportError as exc:
        print(f"cuda.bindings packer benchmark skipped: {exc}", file=file)
        return []
    out = []
    for name, decl, args in _typed_cases(cases):
        sig = kernarg.Signature(decl)
        params = bindings_kernel_params(decl, args)
        rounds = _measure([("typed", "sig.pack(args)"), ("cuda.bindings", "packer(params)")],
                          args, repeat, target, {"sig": sig, "packer": packer, "params": params})
        out.append({"case": name, "signature": decl, "typed_ns": min(rounds["typed"]),
                    "cuda_bindings_ns": min(rounds["cuda.bindings"]),
                    "cuda_bindings_over_typed": _median_ratio(rounds["cuda.bindings"],
                                                              rounds["typed"])})
    return out


def _capi_rows(cases, repeat: int, target: float, file) -> list[dict]:
    """kernarg.pack vs the C API (examples/c_extension's pack_only: pack into a stack block and
    release it), both called from Python on the same tuples."""
    import kernarg
    from kernarg._examples import build_example

    try:
        ext = build_example("c_extension", "kernarg_example")
    except Exception as exc:   # no checkout or no compiler: say so
        print(f"C API benchmark skipped: {exc}".splitlines()[0], file=file)
        return []
    out = []
    for name in ("1 int", "16 ints", "16 numpy.float32", "8 Buffers + 4 ints + 4 floats"):
        args = cases[name]
        rounds = _measure([("kernarg.pack", kernarg.pack), ("C API", ext.pack_only)], args,
                          repeat, target)
        out.append({"case": name, "python_ns": min(rounds["kernarg.pack"]),
                    "c_api_ns": min(rounds["C API"]),
                    "python_over_c_api": _median_ratio(rounds["kernarg.pack"],
                                                       rounds["C API"])})
    return out


def _interop_rows(repeat: int, target: float) -> list[dict]:
    """What consuming one foreign array adds over the producer's own protocol calls:
    pack((obj,)) - pack(()) - (reading __cuda_array_interface__, or __dlpack_device__() +
    __dlpack__() and dropping the capsule).

    The protocol calls are timed inside a Python function, whose own call is not the
    producer's cost: a function of the same shape that does nothing is timed alongside and
    subtracted (``call_ns``), as pack(()) is from pack((obj,))."""
    import kernarg

    out = []
    for name, obj, protocol in (
            ("CAI dict attribute", _CAI(0x9000_0000), _cai_protocol),
            ("CAI property building the dict", _PropertyCAI(0x9000_0000), _cai_protocol),
            (f"DLPack (numpy capsules, {'versioned' if _DLPackView.versioned else 'legacy'})",
             _DLPackView(), _dlpack_protocol)):
        timers = {"protocol": _timer(protocol, obj, target),
                  "call": _timer(_no_protocol, obj, target),
                  "pack1": _timer(kernarg.pack, (obj,), target),
                  "pack0": _timer(kernarg.pack, (), target)}
        rounds = {k: [] for k in timers}
        for _ in range(repeat):
            for label, (timer, number) in timers.items():
                rounds[label].append(timer.timeit(number) / number * 1e9)
        protocol_ns = [pr - c for pr, c in zip(rounds["protocol"], rounds["call"], strict=True)]
        added = [p1 - p0 - pr for p1, p0, pr in zip(rounds["pack1"], rounds["pack0"],
                                                   protocol_ns, strict=True)]
        protocol = statistics.median(protocol_ns)
        out.append({"case": name, "protocol_ns": protocol,
                    "call_ns": statistics.median(rounds["call"]),
                    "kernarg_adds_ns": statistics.median(added),
                    # Reading a plain attribute costs next to nothing: no ratio to it.
                    "added_over_protocol": None if protocol < _MEASURABLE_NS else
                    statistics.median(a / pr for a, pr in zip(added, protocol_ns, strict=True))})
    return out


_MEASURABLE_NS = 5.0       # below this, a difference of two timings is noise


def _cai_protocol(obj):
    return obj.__cuda_array_interface__


def _no_protocol(obj):
    # The call _cai_protocol and _dlpack_protocol are made by, without their protocol calls.
    return obj


def _median_ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def run(quick: bool = False, json_path: str | None = None, file=sys.stdout) -> dict:
    import kernarg
    from kernarg._benchfloor import copy_ints

    repeat, target = (5, 0.01) if quick else (21, 0.04)
    cases = build_cases()
    peers = _peers()
    rows = []
    for name, args in cases.items():
        contenders = [("kernarg", kernarg.pack)]
        for label, fn in peers.items():
            try:
                fn(args)
            except Exception as exc:   # the peer does not support this case: say so, skip it
                print(f"[{name}] {label} cannot pack these arguments: {exc}", file=file)
            else:
                contenders.append((label, fn))
        if name == "1 int" or name.endswith(" ints"):
            contenders.append(("floor", copy_ints))
        rounds = _measure(contenders, args, repeat, target)
        row = {"case": name, "nargs": len(args),
               **{f"{k}_ns": min(v) for k, v in rounds.items()}}
        if "ParamHolder" in rounds:
            row["speedup_vs_paramholder"] = _median_ratio(rounds["ParamHolder"], rounds["kernarg"])
            row["goal"] = GOALS.get(name)
        if "floor" in rounds:
            row["ratio_to_floor"] = _median_ratio(rounds["kernarg"], rounds["floor"])
        rows.append(row)

    typed_rows = []
    for name, decl, args in _typed_cases(cases):
        sig = kernarg.Signature(decl)
        # Both as written in user code: kernarg.pack(args) and sig.pack(args).
        rounds = _measure([("untyped", "kernarg.pack(args)"), ("typed", "sig.pack(args)")],
                          args, repeat, target, {"kernarg": kernarg, "sig": sig})
        typed_rows.append({"case": name, "signature": decl,
                           "untyped_ns": min(rounds["untyped"]), "typed_ns": min(rounds["typed"]),
                           "untyped_over_typed": _median_ratio(rounds["untyped"],
                                                               rounds["typed"])})

    bindings_rows = _bindings_rows(cases, repeat, target, file)
    capi_rows = _capi_rows(cases, repeat, target, file)
    interop_rows = _interop_rows(repeat, target)
    pinned_rows = _pinned_numpy_rows(repeat, target)

    by = {r["case"]: r for r in rows}
    slope = {k: (by["256 ints"][f"{k}_ns"] - by["16 ints"][f"{k}_ns"]) / 240
             for k in ("kernarg", "ParamHolder", "floor") if f"{k}_ns" in by["16 ints"]}
    result = {
        "benchmark": "pack latency: ns per call (min over rounds); ratios are medians of "
                     "per-round ratios",
        "machine": machine(),
        "versions": _versions(),
        "date": time.strftime("%Y-%m-%d"),
        "quick": quick,
        "rows": rows,
        "typed_vs_untyped": typed_rows,
        "typed_vs_cuda_bindings": bindings_rows,
        "c_api_vs_python": capi_rows,
        "interop_overhead": interop_rows,
        "pinned_numpy": pinned_rows,
        "marginal_ns_per_int_16_to_256": slope,
    }
    _print_table(result, file)
    if json_path:
        with open(json_path, "w") as f:
            json.dump(result, f, indent=2)
        print(f"\nwrote {json_path}", file=file)
    return result


def machine() -> dict:
    """The Python (its version, with "t" for a free-threaded build, as in python3.14t), the
    platform and the processor a run was measured on."""
    free_threaded = sysconfig.get_config_var("Py_GIL_DISABLED")
    return {"python": sys.version.split()[0] + ("t" if free_threaded else ""),
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine()}


def _versions() -> dict:
    out = {}
    for mod in ("kernarg", "numpy", "cuda.core", "cuda.bindings", "Cython", "torch", "cupy",
                "numba_cuda", "jax"):
        try:
            m = __import__(mod, fromlist=["__version__"])
            out[mod] = getattr(m, "__version__", "?")
        except Exception:   # not installed, or fails to import without a GPU
            out[mod] = None
    return out


def _fmt(value, spec: str, width: int) -> str:
    return format(value, spec).rjust(width) if value is not None else "-".rjust(width)


def _print_table(result: dict, file) -> None:
    print(f"kernarg pack latency — {result['machine']['processor']}, "
          f"Python {result['machine']['python']} (ns per call; speed-up = ParamHolder / kernarg)",
          file=file)
    print(f"{'case':32s}{'kernarg':>9s}{'ParamHolder':>13s}{'speed-up':>10s}{'goal':>7s}"
          f"{'':>6s}{'floor':>8s}{'kernarg/floor':>15s}", file=file)
    for r in result["rows"]:
        speedup, goal = r.get("speedup_vs_paramholder"), r.get("goal")
        verdict = "" if speedup is None or goal is None else ("ok" if speedup >= goal else "MISS")
        print(f"{r['case']:32s}{_fmt(r['kernarg_ns'], '.0f', 9)}"
              f"{_fmt(r.get('ParamHolder_ns'), '.0f', 13)}{_fmt(speedup, '.2f', 10)}"
              f"{_fmt(goal, '.0f', 7)}{verdict:>6s}{_fmt(r.get('floor_ns'), '.0f', 8)}"
              f"{_fmt(r.get('ratio_to_floor'), '.2f', 15)}", file=file)
    slope = result["marginal_ns_per_int_16_to_256"]
    print("marginal cost per int argument (16 -> 256 slope): "
          + ", ".join(f"{k} {v:.2f} ns" for k, v in slope.items()), file=file)
    print(f"\n{'typed (Signature.pack) vs untyped (kernarg.pack)':50s}{'untyped':>9s}"
          f"{'typed':>9s}{'untyped/typed':>15s}", file=file)
    for r in result["typed_vs_untyped"]:
        print(f"{r['case']:50s}{_fmt(r['untyped_ns'], '.0f', 9)}{_fmt(r['typed_ns'], '.0f', 9)}"
              f"{_fmt(r['untyped_over_typed'], '.2f', 15)}", file=file)
    if result.get("typed_vs_cuda_bindings"):
        print(f"\n{'typed vs cuda.bindings kernelParams=(values, types)':50s}{'typed':>9s}"
              f"{'bindings':>9s}{'bindings/typed':>15s}", file=file)
    for r in result.get("typed_vs_cuda_bindings", []):
        print(f"{r['case']:50s}{_fmt(r['typed_ns'], '.0f', 9)}"
              f"{_fmt(r['cuda_bindings_ns'], '.0f', 9)}"
              f"{_fmt(r['cuda_bindings_over_typed'], '.2f', 15)}", file=file)
    if result["c_api_vs_python"]:
        print(f"\n{'C API (pack into a caller block + release) vs kernarg.pack':50s}"
              f"{'Python':>9s}{'C API':>9s}{'Python/C API':>15s}", file=file)
    for r in result["c_api_vs_python"]:
        print(f"{r['case']:50s}{_fmt(r['python_ns'], '.0f', 9)}{_fmt(r['c_api_ns'], '.0f', 9)}"
              f"{_fmt(r['python_over_c_api'], '.2f', 15)}", file=file)
    print(f"\n{'one foreign-array argument':50s}{'protocol':>9s}{'adds':>9s}"
          f"{'adds/protocol':>15s}", file=file)
    for r in result["interop_overhead"]:
        print(f"{r['case']:50s}{_fmt(r['protocol_ns'], '.0f', 9)}"
              f"{_fmt(r['kernarg_adds_ns'], '.0f', 9)}{_fmt(r['added_over_protocol'], '.2f', 15)}",
              file=file)
    for r in result.get("pinned_numpy", []):
        print(f"\n{r['library']}: kernarg {r['kernarg_ns']:.0f} ns per argument", file=file)
        for name, ratio in r["protocol_over_kernarg"].items():
            print(f"  numpy's {name}: {r[name + '_ns']:.0f} ns, {ratio:.1f}x kernarg's",
                  file=file)
