"""How many cache lines kernarg's launch path brings back per launch when the driver's launch
has evicted the caches: a deterministic model, run without a GPU, of what the H100 runs showed.

Why: on the H100 (benchmarks/results/gpu-h100-80gb-hbm3-2026-11-24d, 16 arguments) a prepared
launch took ~430 ns more than a bound one and ``Kernel.launch`` ~910 ns more, where timeit
against tools/fakecuda gives ~160 and ~250 ns. Between two real launches the driver runs
microseconds of its own code and data, which most likely sends kernarg's back to L3 each time;
against tools/fakecuda with ``FAKECUDA_EVICT`` set (each launch writes that many bytes and jumps
through 64 KiB of code first) the same two gaps grow to ~360 and ~510 ns on the development VM.
Timings of that are noisy; counts are not. This runs each launch form under callgrind's cache
simulator (I1 and D1 32 KiB, a 1 MiB last level, as a core's L2) with ``FAKECUDA_EVICT`` of
2 MiB, collects only inside kernarg's entry point for the form and not inside the fake driver's
launch, and reports per launch: instructions, and last-level misses for code (IL) and data (DL,
reads and writes) -- lines that came from beyond L2. Two runs of different lengths are
subtracted, so one-time costs drop out. The counts say what a change removes, not what it
saves in time: how they compared with the H100's gaps is in the README (launch tables).

Run from the repository root, with kernarg built in place:
    python tools/probes/cold_launch.py [nargs ...]
It needs valgrind and gcc (tools/fakecuda/run.sh builds the fake driver).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# The form's C entry point in kernarg (a callgrind function pattern) and how it is called.
FORMS = {
    "bound": ("*_bound_vectorcall*", "b = p.bind(*args)\nf = b"),
    "prepared": ("*_prepared_vectorcall*", "f = _written_out('p({args})', args, p=p)"),
    "Kernel.launch": ("*_kernel_launch_fastcall*",
                      "f = _written_out('k.launch(1, 1, {args}stream=s)', args, k=k, s=s)"),
    # kernarg.launch in cuda.core's call form, with cuda.core's objects (as the launch
    # benchmark's drop-in row) and a stream the driver made: its handle is a heap address.
    "kernarg.launch": ("*_launch__launch_fastcall*", """
from cuda.bindings import driver
from kernarg._bench import cuda_core
from kernarg._bench_launch import _StreamRef
core = cuda_core()
dev = core.Device(0)
dev.set_current()
ck = core.Program(_kernel_source(n), "c++", core.ProgramOptions(arch=f"sm_{dev.arch}")).compile(
    "cubin").get_kernel("k")
cs = dev.create_stream(_StreamRef(int(driver.cuStreamCreate(1)[1])))
cfg = core.LaunchConfig(grid=1, block=1)
f = _written_out('launch(cs, cfg, ck, {args})', args, launch=kernarg.launch, cs=cs, cfg=cfg,
                 ck=ck)
"""),
    # A prepared launch whose first array has a producer stream (a driver-made one), so that
    # each launch waits on it: an event recorded there and waited on (session 85's pools).
    "prepared, producer wait": ("*_prepared_vectorcall*", """
from cuda.bindings import driver
class _Produced:
    def __init__(self, stream):
        self.stream = stream
    @property
    def __cuda_array_interface__(self):
        return {"shape": (1,), "typestr": "<i8", "version": 3, "data": (1 << 40, False),
                "strides": None, "stream": self.stream}
args = (_Produced(int(driver.cuStreamCreate(1)[1])),) + args[1:]
f = _written_out('p({args})', args, p=p)
"""),
    # The same, launching two cuda.core kernels in turn, each with its own config (as a loop
    # of a few kernels does): each launch finds another kernel and config than the last.
    "kernarg.launch, 2 in turn": ("*_launch__launch_fastcall*", """
import itertools
from cuda.bindings import driver
from kernarg._bench import cuda_core
from kernarg._bench_launch import _StreamRef
core = cuda_core()
dev = core.Device(0)
dev.set_current()
def compiled():
    return core.Program(_kernel_source(n), "c++", core.ProgramOptions(
        arch=f"sm_{dev.arch}")).compile("cubin").get_kernel("k")
cs = dev.create_stream(_StreamRef(int(driver.cuStreamCreate(1)[1])))
fa = _written_out('launch(cs, cfg, ck, {args})', args, launch=kernarg.launch, cs=cs,
                  cfg=core.LaunchConfig(grid=1, block=1), ck=compiled())
fb = _written_out('launch(cs, cfg, ck, {args})', args, launch=kernarg.launch, cs=cs,
                  cfg=core.LaunchConfig(grid=2, block=(32, 2)), ck=compiled())
turn = itertools.cycle((fa, fb))
f = lambda: next(turn)()
"""),
}

DRIVER = """
import sys, kernarg
from kernarg._bench_launch import _kernel_source, _args, _written_out
n, count = int(sys.argv[1]), int(sys.argv[2])
k = kernarg.Kernel.from_source(_kernel_source(n), "k")
s = {stream}
args = _args(n, 1 << 40)
p = k.prepare(1, 1, stream=s)
{setup}
for _ in range(count):
    f()
"""

EVENTS = ("Ir", "ILmr", "DLmr", "DLmw")


# The stream the bound, prepared and Kernel.launch forms launch on: the legacy default stream
# (stream=None, the usual call; since session 42 a launch on it skips the capture query, which
# that stream cannot need), or one the driver made (as the GPU launch benchmark's rows do).
STREAMS = {
    "default": "kernarg.resolve_stream(None)",
    "created": "int(__import__('cuda.bindings.driver').bindings.driver.cuStreamCreate(1)[1])",
}


def _collect(entry: str, setup: str, n: int, count: int, tmp: str,
             stream: str = "default") -> dict[str, int]:
    script = os.path.join(tmp, "drive.py")
    with open(script, "w") as f:
        f.write(DRIVER.format(setup=setup, stream=STREAMS[stream]))
    out = os.path.join(tmp, "callgrind.out")
    # PYTHONPATH: the kernarg of this tree, also where the interpreter's environment has another
    # installed (an editable install of the main checkout, when this is a baseline's worktree:
    # the script runs from a temporary folder, so nothing else puts ROOT first).
    # PYTHONHASHSEED: a form that builds a dict (an interface's property) varies by tens of
    # instructions between processes with the strings' hashes otherwise.
    env = dict(os.environ, FAKECUDA_EVICT=str(2 << 20), PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")])))
    cmd = [os.path.join(ROOT, "tools", "fakecuda", "run.sh"),
           "valgrind", "--tool=callgrind", "--cache-sim=yes",
           "--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64",
           "--collect-atstart=no", f"--toggle-collect={entry}", "--toggle-collect=launch",
           f"--callgrind-out-file={out}", sys.executable, script, str(n), str(count)]
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    names = values = None
    with open(out) as f:
        for line in f:
            if line.startswith("events:"):
                names = line.split()[1:]
            elif line.startswith("summary:") or line.startswith("totals:"):
                values = [int(v) for v in line.split()[1:]]
    if names is None or values is None:
        raise RuntimeError(f"no totals in {out}")
    got = dict(zip(names, values, strict=False))     # callgrind leaves out trailing zeros
    return {e: got.get(e, 0) for e in EVENTS}


def measure(n: int, forms=tuple(FORMS), short: int = 100, long: int = 600,
            stream: str = "default") -> dict[str, dict[str, float]]:
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for form in forms:
            entry, setup = FORMS[form]
            a = _collect(entry, setup, n, short, tmp, stream)
            b = _collect(entry, setup, n, long, tmp, stream)
            rows[form] = {e: (b[e] - a[e]) / (long - short) for e in EVENTS}
    return rows


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nargs", type=int, nargs="*", default=[1, 16])
    parser.add_argument("--form", action="append", choices=list(FORMS),
                        help="a launch form to measure (default: all)")
    parser.add_argument("--stream", choices=list(STREAMS), default="default",
                        help="the stream of the bound, prepared and Kernel.launch forms "
                             "(kernarg.launch's is always a created cuda.core Stream)")
    opts = parser.parse_args(argv)
    for n in opts.nargs:
        rows = measure(n, tuple(opts.form or FORMS), stream=opts.stream)
        print(f"{n} arguments, per launch (kernarg's entry point, the fake driver's launch "
              "left out):")
        print(f"  {'form':26s} {'instructions':>12s} {'IL misses':>10s} {'DL misses':>10s}")
        for form, r in rows.items():
            print(f"  {form:26s} {r['Ir']:12.0f} {r['ILmr']:10.1f} "
                  f"{r['DLmr'] + r['DLmw']:10.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
