"""Launch latency on a GPU (issue 5): kernarg vs cuda.core, cuda.bindings, CuPy, numba-cuda and
a C++ cuLaunchKernel loop, for kernels taking 0, 1, 4, 16 and 64 arguments.

Each case launches an empty kernel whose parameters are all 8 bytes (pointers and long longs) on
one non-blocking stream. What is measured is the host's cost per launch: bursts of BURST
launches are timed, and the stream is synchronised between bursts outside the timing. A burst is
far below the driver's launch-queue depth, so no launch waits for the GPU; timing one long loop
instead would measure how fast the GPU retires empty kernels once the queue fills. Every
contender gets the same arguments (device pointers as ints, and ints); kernarg also runs with
torch tensors in place of some pointers, launching on torch's current stream as torch users do.
Each call is written out with its arguments, as user code calls a kernel (see _written_out).
Ratios are medians of per-round ratios, contenders interleaved within each round.

The floor is "C loop": the same kernel, arguments and stream launched by cuLaunchKernel in a C
loop in this process (kernarg._launch._c_launch_loop), timed in the same rounds. kernarg itself
calls cuLaunchKernelEx; any difference in the driver's cost of the two counts against kernarg.
Two variants of that loop run beside it to say where a bound launch's time above the floor
goes: "C loop Ex" calls cuLaunchKernelEx (the driver's share), "C loop checked" adds kernarg's
per-launch C work (context check, capture query, GIL release); what a bound launch spends above
"C loop checked" is the Python call and kernarg's Cython code around it.
The first H100 run showed why an in-process floor is needed: against the nvcc-built loop in a
process of its own (still run, as ``cpp_floor``), kernarg's ratios moved between rows by more
than the 10% the goals are about (1.22x with no arguments, 0.97x with one), so a ratio between
two processes measured noise as much as kernarg.
"""
from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import tempfile
import time

NARGS = (0, 1, 4, 16, 64)


def _kernel_source(n: int) -> str:
    params = ", ".join(f"long long* p{i}" if i % 2 == 0 else f"long long q{i}" for i in range(n))
    return f'extern "C" __global__ void k({params}) {{}}'


def _args(n: int, buf, torch_tensor=None):
    out = []
    for i in range(n):
        if i % 2 == 0:
            out.append(torch_tensor if (torch_tensor is not None and i % 4 == 0) else buf)
        else:
            out.append(i)
    return tuple(out)


BURST = 100


def _written_out(call: str, args: tuple, **names):
    """A function of no arguments that makes ``call`` with ``args`` written out one by one, as
    user code calls a kernel of fixed arity: ``{args}`` in ``call`` becomes ``a0, a1, ..., ``.

    Calling with ``*args`` instead would time Python's call protocol rather than the launcher:
    ``k.launch(1, 1, *args, stream=s)`` builds a list, a tuple and a dict, and CPython then
    unpacks the dict for the vectorcall; on the development VM that added ~500 ns to the same
    launch (tools/fakecuda, timeit) -- more than kernarg's whole per-launch cost. Above 30
    arguments CPython compiles even a written-out call into a list and a tuple
    (CALL_FUNCTION_EX); every contender pays that alike, as user code would.
    """
    params = [f"a{i}" for i in range(len(args))]
    body = call.format(args="".join(f"{p}, " for p in params))
    namespace = {}
    exec(f"def _make({', '.join([*names, *params])}):\n    return lambda: {body}", namespace)
    return namespace["_make"](*names.values(), *args)


FLOOR = "C loop"     # the in-process floor contender (see _contenders)
WITH_CLUSTER = "kernarg.launch+cluster"         # grid 2, cluster=2 (see _contenders)
CORE_WITH_CLUSTER = "cuda.core launch+cluster"  # the same config, cuda.core's launch
DROP_IN = "kernarg.launch(cuda.core form)"  # kernarg.launch(stream, config, kernel, *args)
# cuda.core's launch and DROP_IN launching two kernels in turn, each with its own config, as a
# loop of a few kernels does (the rows above launch one kernel with one config every time).
IN_TURN = ", 2 kernels in turn"
CORE_IN_TURN = "cuda.core launch" + IN_TURN
DROP_IN_IN_TURN = DROP_IN + IN_TURN
FLOOR_EX = "C loop Ex"              # the same loop calling cuLaunchKernelEx
FLOOR_CHECKED = "C loop checked"    # ... with kernarg's per-launch checks in C


class WholeBurst:
    """A contender that makes a whole burst of BURST launches in one call (the in-process C
    loop), where the others make one launch per call."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        self.fn()


def _launches(fn, count: int):
    """``fn``, marked as making ``count`` launches a call (the in-turn contenders)."""
    fn.launches = count
    return fn


def _time_bursts(fn, bursts: int, sync) -> list[float]:
    """Host ns per launch of each burst of BURST launches by ``fn``; ``sync()`` between
    bursts."""
    out = []
    calls = 1 if isinstance(fn, WholeBurst) else BURST // getattr(fn, "launches", 1)
    for _ in range(bursts):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter_ns() - t0) / BURST)
        sync()
    return out


def _cpp_floor(n: int, bursts: int, file) -> tuple[float, float] | None:
    """(median, min) host ns per launch of the C++ loop, or None without nvcc."""
    nvcc = shutil.which("nvcc")
    src = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "launch", "launch_floor.cu")
    if nvcc is None or not os.path.exists(src):
        print("C++ floor skipped: no nvcc or no benchmarks/launch/launch_floor.cu", file=file)
        return None
    exe = os.path.join(tempfile.gettempdir(), "kernarg_launch_floor")
    if not os.path.exists(exe):
        # The loop dlopens libcuda.so.1 itself: no libcuda.so or stub library is needed.
        subprocess.run([nvcc, "-O2", "-o", exe, src, "-ldl"], check=True)
    out = subprocess.run([exe, str(n), str(bursts), str(BURST)], capture_output=True,
                         text=True, check=True)
    median, best = (float(v) for v in out.stdout.split())
    return median, best


class _StreamRef:
    """Hands a raw stream handle to cuda.core through the __cuda_stream__ protocol."""

    def __init__(self, handle: int):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)


def _cupy_stream(cupy, handle: int):
    """A CuPy stream object for the raw ``handle``. CuPy 14 deprecated ``ExternalStream`` for
    ``Stream.from_external``, which takes an object of the ``__cuda_stream__`` protocol (and keeps
    it); older CuPy has only ``ExternalStream``."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None:
        return from_external(_StreamRef(handle))
    return cupy.cuda.ExternalStream(handle)


def _contenders(n: int, stream: int, buf: int, tensor, file) -> dict:
    import kernarg

    src = _kernel_source(n)
    k = kernarg.Kernel.from_source(src, "k")
    args = _args(n, buf)
    prepared = k.prepare(1, 1, stream=stream)
    out = {
        "kernarg.launch": _written_out("k.launch(1, 1, {args}stream=stream)", args, k=k,
                                       stream=stream),
        "kernarg prepared": _written_out("prepared({args})", args, prepared=prepared),
        # Packed once by bind(): what is left is kernarg's per-launch driver work.
        "kernarg bound": prepared.bind(*args),
    }
    # A launch with an attribute (a cluster of 2 blocks, compute capability 9.0+): the grid
    # is 2 blocks, so compare it with cuda.core's launch of the same config, not the rows above.
    from kernarg._launch import device_arch

    cluster = int(device_arch(k.device)[len("compute_"):][:-1]) >= 9
    if cluster:
        out[WITH_CLUSTER] = _written_out("k.launch(2, 1, {args}stream=stream, cluster=2)", args,
                                         k=k, stream=stream)
    # The floor, in this process: the bound block launched BURST times by cuLaunchKernel in a
    # C loop. Interleaved with the rest in every round, so the ratios to it are side by side;
    # the nvcc-built loop (_cpp_floor) runs in a process of its own, as a cross-check.
    from kernarg._launch import C_LOOP_CHECKED, C_LOOP_EX, _c_launch_loop

    bound = out["kernarg bound"]
    out[FLOOR] = WholeBurst(lambda: _c_launch_loop(bound, BURST))
    # The floor's variants (see _c_launch_loop), to split the bound launch's cost above it:
    # the driver's cuLaunchKernelEx against its cuLaunchKernel, then kernarg's C-side checks.
    out[FLOOR_EX] = WholeBurst(lambda: _c_launch_loop(bound, BURST, C_LOOP_EX))
    out[FLOOR_CHECKED] = WholeBurst(lambda: _c_launch_loop(bound, BURST, C_LOOP_CHECKED))
    if tensor is not None and n:
        # torch's current stream is the benchmark stream (see run), so the tensors' producer
        # stream is the launch stream and no event wait is added.
        targs = _args(n, buf, tensor)
        out["kernarg.launch+torch"] = _written_out("k.launch(1, 1, {args}stream=stream)", targs,
                                                   k=k, stream=stream)
        out["kernarg prepared+torch"] = _written_out("prepared({args})", targs,
                                                     prepared=prepared)
    try:
        from kernarg._bench import cuda_core

        core = cuda_core()
        Device, LaunchConfig, launch = core.Device, core.LaunchConfig, core.launch
        Program, ProgramOptions = core.Program, core.ProgramOptions
        dev = Device(0)
        dev.set_current()
        ck = Program(src, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile(
            "cubin").get_kernel("k")
        cstream = dev.create_stream(_StreamRef(stream))
        cfg = LaunchConfig(grid=1, block=1)
        launch(cstream, cfg, ck, *args)
        out["cuda.core launch"] = _written_out("launch(cstream, cfg, ck, {args})", args,
                                               launch=launch, cstream=cstream, cfg=cfg, ck=ck)
        if cluster:
            ccfg = LaunchConfig(grid=2, block=1, cluster=2)
            out[CORE_WITH_CLUSTER] = _written_out("launch(cstream, ccfg, ck, {args})", args,
                                                  launch=launch, cstream=cstream, ccfg=ccfg,
                                                  ck=ck)
        # The same call, the same cuda.core objects, with kernarg's launch imported instead:
        # what switching the import buys (issue 5's "2x cuda.core on the same arguments").
        out[DROP_IN] = _written_out("launch(cstream, cfg, ck, {args})", args,
                                    launch=kernarg.launch, cstream=cstream, cfg=cfg, ck=ck)
        # Two kernels (two modules of the same source) in turn, each with its own config.
        ck2 = Program(src, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile(
            "cubin").get_kernel("k")
        cfg2 = LaunchConfig(grid=2, block=(32, 2))
        turn = "launch(cstream, cfg, ck, {args}) or launch(cstream, cfg2, ck2, {args})"
        for name, fn in ((CORE_IN_TURN, launch), (DROP_IN_IN_TURN, kernarg.launch)):
            out[name] = _launches(_written_out(turn, args, launch=fn, cstream=cstream, cfg=cfg,
                                               ck=ck, cfg2=cfg2, ck2=ck2), 2)
    except Exception as exc:
        print(f"[{n} args] cuda.core skipped: {type(exc).__name__}: {exc}", file=file)
    try:
        import ctypes

        from cuda.bindings import driver

        vals = (ctypes.c_uint64 * max(n, 1))(*[a for a in args])
        ptrs = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(vals) + 8 * i
                                                for i in range(n)])
        func = driver.CUfunction(k.handle)
        dstream = driver.CUstream(stream)
        address = ctypes.addressof(ptrs)

        def bindings_launch(_keep=(vals, ptrs)):
            # cuda.bindings returns error codes rather than raising; a failure must not pass
            # for a fast launch. The driver reads the values through ``address``: _keep holds
            # both arrays for as long as this function lives (once _contenders returned, they
            # were freed and the launch read freed memory).
            (err,) = driver.cuLaunchKernel(func, 1, 1, 1, 1, 1, 1, 0, dstream, address, 0)
            if err != driver.CUresult.CUDA_SUCCESS:
                raise RuntimeError(f"cuLaunchKernel: {err}")

        bindings_launch()
        out["cuda.bindings cuLaunchKernel"] = bindings_launch
    except Exception as exc:
        print(f"[{n} args] cuda.bindings skipped: {type(exc).__name__}: {exc}", file=file)
    try:
        import cupy

        raw = cupy.RawKernel(src, "k")
        cs = _cupy_stream(cupy, stream)
        # Every parameter is 8 bytes: pass numpy 64-bit scalars, not Python ints, whose C
        # type CuPy chooses itself.
        cpargs = tuple(cupy.uint64(a) if i % 2 == 0 else cupy.int64(a)
                       for i, a in enumerate(args))

        cs.use()    # RawKernel launches on CuPy's current stream: make it ours, once

        def cupy_launch():
            raw((1,), (1,), cpargs)

        cupy_launch()
        out["CuPy RawKernel"] = cupy_launch
    except Exception as exc:
        print(f"[{n} args] CuPy skipped: {type(exc).__name__}: {exc}", file=file)
    try:
        import numpy as np
        from numba import cuda as ncuda

        _quiet_numba_occupancy_warning()
        if _restore_numpy_row_stack():
            print(f"[{n} args] numba-cuda: numpy.row_stack restored as numpy.vstack for "
                  "numba-cuda's compiler (numpy >= 2.5 removed it)", file=file)
        # The same empty kernel written for numba, with device arrays where the others pass
        # pointers: numba expands each array into several parameters, which is part of its cost.
        namespace = {}
        params = ", ".join(f"a{i}" for i in range(n))
        exec(f"def nk({params}):\n    pass", namespace)
        nk = ncuda.jit(namespace["nk"])
        darr = ncuda.device_array(16, np.int64)
        nbargs = tuple(darr if i % 2 == 0 else i for i in range(n))
        nstream = ncuda.external_stream(stream)
        nk[1, 1, nstream](*nbargs)            # compile outside the timing
        out["numba-cuda"] = _written_out("nk[1, 1, nstream]({args})", nbargs, nk=nk,
                                         nstream=nstream)
    except Exception as exc:
        print(f"[{n} args] numba-cuda skipped: {type(exc).__name__}: {exc}", file=file)
    return out


def _restore_numpy_row_stack() -> bool:
    """numba-cuda 0.30.4 (the newest on PyPI in 2026-11) registers an overload of
    ``numpy.row_stack`` when it compiles its first kernel. numpy 2.5 removed that alias of
    ``numpy.vstack``, so there every numba-cuda compile fails with AttributeError (numba 0.68.1
    guards its own copy of the line; numba-cuda's does not), and the H100 run had no numba-cuda
    row. Put the alias back in this benchmark process, where no other contender uses it, so
    numba-cuda's launch is measured. Returns whether it was missing."""
    import numpy as np

    if hasattr(np, "row_stack"):
        return False
    np.row_stack = np.vstack
    return True


def _quiet_numba_occupancy_warning() -> None:
    """numba-cuda warns at every launch of fewer than 128 blocks; the benchmark's one-block
    launches would time Python's warnings machinery (microseconds a call) instead of numba's
    launch path. Turned off as a user would: NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0, which numba
    reads at import, and the config attribute where numba is already imported (its module
    moved from numba.core.config to numba.cuda.core.config in numba-cuda)."""
    import importlib

    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"
    for name in ("numba.cuda.core.config", "numba.core.config"):
        try:
            importlib.import_module(name).CUDA_LOW_OCCUPANCY_WARNINGS = 0
        except ImportError:
            pass


def _device_name() -> str:
    from cuda.bindings import driver

    _, dev = driver.cuDeviceGet(0)
    _, name = driver.cuDeviceGetName(256, dev)
    _, version = driver.cuDriverGetVersion()
    label = name.split(b"\0")[0].decode()
    return f"{label} (CUDA driver {version // 1000}.{version % 1000 // 10})"


class Setup:
    """What every case shares: a context, one non-blocking stream (torch's current stream
    too, when torch is there), a device buffer and, with torch, an int64 tensor."""

    def __init__(self, file=None):
        from cuda.bindings import driver

        import kernarg

        self.file = file
        kernarg.Kernel.from_source('extern "C" __global__ void warm() {}', "warm")  # context
        self._driver = driver
        self.stream = int(driver.cuStreamCreate(1)[1])
        self.buf = int(driver.cuMemAlloc(1 << 20)[1])
        self.tensor = None
        try:
            import torch

            self.tensor = torch.zeros(16, dtype=torch.int64, device="cuda")  # long long* params
            torch.cuda.set_stream(torch.cuda.ExternalStream(self.stream))
        except Exception as exc:
            print(f"torch tensors skipped: {type(exc).__name__}: {exc}", file=file)

    def sync(self):
        self._driver.cuStreamSynchronize(self.stream)

    def contenders(self, n: int) -> dict:
        """The launchers for ``n`` arguments that work here: each is tried once, and one that
        fails is reported and left out."""
        out = {}
        for name, fn in _contenders(n, self.stream, self.buf, self.tensor, self.file).items():
            try:
                fn()
                self.sync()
            except Exception as exc:
                print(f"[{n} args] {name} dropped: {type(exc).__name__}: {exc}", file=self.file)
            else:
                out[name] = fn
        return out


def _ratio(times: dict, num: str, den: str) -> float | None:
    """The median over rounds of ``num``'s time over ``den``'s in the same round."""
    if num not in times or den not in times:
        return None
    return statistics.median(a / b for a, b in zip(times[num], times[den], strict=True))


def _overhead_ratio(times: dict, num: str, den: str) -> float | None:
    """The median over rounds of (``num`` - floor) / (``den`` - floor): how many times more
    host time than ``den`` ``num`` spends above the in-process floor. None where ``den`` is at
    the floor in some round (the ratio has no meaning there)."""
    if num not in times or den not in times or FLOOR not in times:
        return None
    pairs = [(a - f, b - f) for a, b, f in zip(times[num], times[den], times[FLOOR], strict=True)]
    if any(b <= 0 for _, b in pairs):
        return None
    return statistics.median(a / b for a, b in pairs)


def run(rounds: int = 21, bursts: int = 30, file=None) -> dict:
    setup = Setup(file)
    sync = setup.sync
    rows = []
    for n in NARGS:
        contenders = setup.contenders(n)
        times = {name: [] for name in contenders}
        for r in range(rounds):
            order = list(contenders.items())
            for name, fn in (order if r % 2 == 0 else order[::-1]):
                times[name].append(statistics.median(_time_bursts(fn, bursts, sync)))
        row = {"nargs": n, **{f"{name}_ns": statistics.median(v) for name, v in times.items()}}
        try:
            floor = _cpp_floor(n, bursts * rounds, file)
        except Exception as exc:
            print(f"[{n} args] C++ floor failed: {type(exc).__name__}: {exc}", file=file)
            floor = None
        # Ratios to the in-process floor, round by round; to the nvcc-built one, of medians.
        for key, name in (("prepared_over_floor", "kernarg prepared"),
                          ("launch_over_floor", "kernarg.launch"),
                          ("bound_over_floor", "kernarg bound"),
                          ("cuda_core_over_floor", "cuda.core launch"),
                          ("ex_over_floor", FLOOR_EX),
                          ("checked_over_floor", FLOOR_CHECKED)):
            value = _ratio(times, name, FLOOR)
            if value is not None:
                row[key] = value
        # Above the checked loop, a bound launch is the Python call and kernarg's Cython code.
        value = _ratio(times, "kernarg bound", FLOOR_CHECKED)
        if value is not None:
            row["bound_over_checked"] = value
        if floor is not None:
            row["cpp_floor_ns"], row["cpp_floor_min_ns"] = floor
            for key, name in (("prepared_over_cpp_floor", "kernarg prepared"),
                              ("launch_over_cpp_floor", "kernarg.launch")):
                if name in times:
                    row[key] = row[f"{name}_ns"] / floor[0]
        for key, value in (("cuda_core_over_kernarg",
                            _ratio(times, "cuda.core launch", "kernarg.launch")),
                           ("cuda_core_over_drop_in", _ratio(times, "cuda.core launch", DROP_IN)),
                           ("cuda_core_over_kernarg_with_cluster",
                            _ratio(times, CORE_WITH_CLUSTER, WITH_CLUSTER)),
                           ("cuda_core_over_drop_in_in_turn",
                            _ratio(times, CORE_IN_TURN, DROP_IN_IN_TURN)),
                           ("cuda_core_overhead_over_drop_in",
                            _overhead_ratio(times, "cuda.core launch", DROP_IN)),
                           ("cuda_core_overhead_over_kernarg",
                            _overhead_ratio(times, "cuda.core launch", "kernarg.launch"))):
            if value is not None:
                row[key] = value
        print(row, file=file)
        # Each round's median, kept so that other statistics can be drawn from a recorded run
        # later (the ratios above are medians over rounds of per-round ratios).
        row["rounds"] = {name: [round(v, 1) for v in times[name]] for name in times}
        rows.append(row)
    result = {"benchmark": f"launch latency: host ns per launch, bursts of {BURST} (medians)",
              "device": _device_name(), "rows": rows}
    try:
        from kernarg._launch import _launch_extras_ns

        # What each kernarg launch does besides packing and cuLaunchKernelEx, on the same
        # stream: the numbers to weigh against the C++ floor (median of 5 runs each).
        runs = [_launch_extras_ns(setup.stream, 20000) for _ in range(5)]
        result["launch_extras_ns"] = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"per-launch extras (ns): {result['launch_extras_ns']}", file=file)
    except Exception as exc:
        print(f"per-launch extras not measured: {type(exc).__name__}: {exc}", file=file)
    return result


def contender_names(rows: list[dict]) -> list[str]:
    """The launchers measured in ``rows`` (their ``<name>_ns`` keys), in order, floor aside."""
    return list(dict.fromkeys(k[:-3] for row in rows for k in row
                              if k.endswith("_ns") and not k.startswith("cpp_floor")))


def print_table(result: dict, file=None) -> None:
    """The launch rows as a table: host ns per launch, then kernarg's ratios."""
    rows = result["rows"]
    names = contender_names(rows)
    print(f"\nlaunch latency on {result['device']} — host ns per launch", file=file)
    widths = [max(len(name), 9) + 2 for name in names]
    print("args".rjust(5) + "".join(name.rjust(w) for name, w in zip(names, widths, strict=True))
          + "C++ floor".rjust(11), file=file)
    for row in rows:
        cells = "".join(f"{row.get(name + '_ns', float('nan')):{w}.0f}"
                        for name, w in zip(names, widths, strict=True))
        print(f"{row['nargs']:5d}{cells}{row.get('cpp_floor_ns', float('nan')):11.0f}", file=file)
    print(f"\nfloor: {FLOOR} (in-process cuLaunchKernel loop); overheads are ns above it",
          file=file)
    print("args  prepared/floor  launch/floor  cuda.core/kernarg.launch  (their overheads)",
          file=file)
    for row in rows:
        print(f"{row['nargs']:4d}{row.get('prepared_over_floor', float('nan')):16.2f}"
              f"{row.get('launch_over_floor', float('nan')):14.2f}"
              f"{row.get('cuda_core_over_kernarg', float('nan')):26.2f}"
              f"{row.get('cuda_core_overhead_over_kernarg', float('nan')):18.2f}", file=file)
    if any("cuda_core_over_drop_in" in row for row in rows):
        print(f"\ncuda.core launch over {DROP_IN} (the same call, cuda.core's objects), and "
              "over it with two kernels in turn", file=file)
        print("args  cuda.core/drop-in  (overheads)  2 kernels in turn", file=file)
        for row in rows:
            print(f"{row['nargs']:4d}{row.get('cuda_core_over_drop_in', float('nan')):19.2f}"
                  f"{row.get('cuda_core_overhead_over_drop_in', float('nan')):13.2f}"
                  f"{row.get('cuda_core_over_drop_in_in_turn', float('nan')):19.2f}", file=file)
    if any("cuda_core_over_kernarg_with_cluster" in row for row in rows):
        print(f"\nwith a cluster (grid 2, cluster=2): {CORE_WITH_CLUSTER} over {WITH_CLUSTER}",
              file=file)
        for row in rows:
            print(f"{row['nargs']:4d}"
                  f"{row.get('cuda_core_over_kernarg_with_cluster', float('nan')):10.2f}",
                  file=file)
    if any("checked_over_floor" in row for row in rows):
        print(f"\nabove the floor: {FLOOR_EX} (the driver's cuLaunchKernelEx), {FLOOR_CHECKED} "
              "(+ kernarg's C checks), kernarg bound over the checked loop (the Python call)",
              file=file)
        print("args      Ex/floor  checked/floor  bound/checked", file=file)
        for row in rows:
            print(f"{row['nargs']:4d}{row.get('ex_over_floor', float('nan')):14.2f}"
                  f"{row.get('checked_over_floor', float('nan')):15.2f}"
                  f"{row.get('bound_over_checked', float('nan')):15.2f}", file=file)
    extras = result.get("launch_extras_ns")
    if extras:
        print("each launch also pays (ns): " + ", ".join(f"{k} {v:.0f}" for k, v in extras.items()),
              file=file)
