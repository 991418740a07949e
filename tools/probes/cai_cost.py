"""What the generic CUDA Array Interface path costs in instructions, against the producer's
own protocol call: a count, run without a GPU, behind issue 3's goal that kernarg add at
most 20% to that call.

For each stand-in producer -- a Python property that builds the dict CuPy's or numba's
interface gives for a 1-D float32 array (numba's own is a Python property; CuPy's is
Cython's, but the issue's benchmark reads every library's generic path through a wrapper
whose property is Python's, kernarg._bench_interop._CAIOnly) -- callgrind counts the
instructions of four loops, each run twice at different lengths so that one-time costs drop
out:

- ``empty``: the loop alone;
- ``protocol``: ``obj.__cuda_array_interface__`` (the dict built and freed): the producer's
  call, less the loop;
- ``pack0`` and ``pack1``: ``kernarg.pack(())`` and ``kernarg.pack((obj,))`` (the tuple made
  once): kernarg's cost for the argument is their difference, and what it adds is that less
  the protocol call.

Of what kernarg adds it also reports the share spent inside CPython's ``PyDict_Next``, the
public API's one pass over the dict's items (kernarg's reading makes no other dict call for
such a dict). Against the budget -- 20% of the protocol call -- that pass alone shows how
much room a consumer that reads the dict through CPython's API has left.

Instructions are not time. The same four loops are also timed (timeit, best of interleaved
rounds, in this process), and callgrind's cache simulator (a 32 KiB, 8-way L1 instruction
cache) counts the loop's L1 instruction misses: the producer's call alone, and what packing
the argument adds to them. Where kernarg's share of the time is well above its share of the
instructions, its instructions run slower than the producer's, and the misses say whether
code no longer fitting in the L1 instruction cache is why.

Run from the repository root, with kernarg built in place (for another Python, build a tree
for it and put it first on PYTHONPATH):
    python tools/probes/cai_cost.py
It needs valgrind. Instruction counts depend on the hash seed (building a dict hashes its
keys), so it fixes PYTHONHASHSEED.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import timeit

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PRODUCERS = {
    # cupy.ndarray.__cuda_array_interface__ (CuPy 13-14; `stream` is the current stream, 1
    # for the legacy default one).
    "CuPy-like (7 keys)": """
class P:
    ptr = 0x7f0000001000
    @property
    def __cuda_array_interface__(self):
        return {"shape": (16,), "typestr": "<f4", "descr": [("", "<f4")], "stream": 1,
                "version": 3, "strides": None, "data": (self.ptr, False)}
""",
    # numba's DeviceNDArray (numba-cuda 0.30): no descr, stream None without a stream.
    "numba-like (6 keys)": """
class P:
    ptr = 0x7f0000002000
    @property
    def __cuda_array_interface__(self):
        return {"shape": (16,), "strides": None, "data": (self.ptr, False),
                "typestr": "<f4", "stream": None, "version": 3}
""",
}

LOOPS = {
    "empty": "pass",
    "protocol": "o.__cuda_array_interface__",
    "pack0": "pack(e)",
    "pack1": "pack(a)",
}

DRIVER = """
import sys, kernarg
{producer}
o = P(); a = (o,); e = (); pack = kernarg.pack
def run(n):
    for _ in range(n):
        {body}
run(200)
run(int(sys.argv[1]))
"""

# CPython's pass over a dict (PyDict_Next calls _PyDict_Next; inlined lines name a header).
DICT_PASS = re.compile(r":_?PyDict_Next(\s|$)")


def _count(producer: str, body: str, n: int, tmp: str) -> tuple[int, int, int]:
    """(all instructions, those inside PyDict_Next, L1 instruction misses) of a run of
    ``n`` iterations."""
    script = os.path.join(tmp, "drive.py")
    with open(script, "w") as f:
        f.write(DRIVER.format(producer=producer, body=body))
    out = os.path.join(tmp, "callgrind.out")
    env = dict(os.environ, PYTHONHASHSEED="0", OPENBLAS_NUM_THREADS="1")
    subprocess.run(["valgrind", "--tool=callgrind", "--cache-sim=yes", "--I1=32768,8,64",
                    "--D1=32768,8,64", "--LL=1048576,16,64", f"--callgrind-out-file={out}",
                    sys.executable, script, str(n)],
                   check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    with open(out) as f:
        events = summary = None
        for line in f:
            if line.startswith("events:"):
                events = line.split()[1:]
            elif line.startswith(("summary:", "totals:")):
                summary = [int(v) for v in line.split()[1:]]
    if events is None or summary is None:
        raise RuntimeError(f"no totals in {out}")
    i1_misses = dict(zip(events, summary, strict=False)).get("I1mr", 0)
    text = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", "--show=Ir",
                           out], check=True, capture_output=True, text=True).stdout
    total = dict_pass = 0
    for line in text.splitlines():
        m = re.match(r"\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?(\S.*)", line)
        if not m:
            continue
        count = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = count
        elif DICT_PASS.search(m.group(2)):
            dict_pass += count
    return total, dict_pass, i1_misses


def _time(producer: str, rounds: int = 7, number: int = 50_000) -> dict[str, float]:
    """ns per iteration of each loop's body: the best of ``rounds`` interleaved rounds."""
    import kernarg

    namespace = {"pack": kernarg.pack, "e": ()}
    exec(producer, namespace)
    namespace["o"] = namespace["P"]()
    namespace["a"] = (namespace["o"],)
    best = dict.fromkeys(LOOPS, float("inf"))
    for _ in range(rounds):
        for name, body in LOOPS.items():
            t = timeit.timeit(body, globals=namespace, number=number) / number * 1e9
            best[name] = min(best[name], t)
    return best


def measure(producer: str, short: int = 1000, long: int = 11000) -> dict[str, float]:
    per = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, body in LOOPS.items():
            a = _count(producer, body, short, tmp)
            b = _count(producer, body, long, tmp)
            per[name] = tuple((y - x) / (long - short) for x, y in zip(a, b, strict=True))
    protocol = per["protocol"][0] - per["empty"][0]
    argument = per["pack1"][0] - per["pack0"][0]
    ns = _time(producer)
    protocol_ns = ns["protocol"] - ns["empty"]
    return {"protocol": protocol, "kernarg": argument, "adds": argument - protocol,
            "dict_pass": per["pack1"][1] - per["pack0"][1], "budget": 0.2 * protocol,
            "protocol_ns": protocol_ns, "adds_ns": ns["pack1"] - ns["pack0"] - protocol_ns,
            "protocol_i1": per["protocol"][2] - per["empty"][2],
            "adds_i1": (per["pack1"][2] - per["pack0"][2]) - (per["protocol"][2]
                                                               - per["empty"][2])}


def main() -> None:
    print(f"Python {sys.version.split()[0]}; per argument: instructions (callgrind, "
          "PYTHONHASHSEED=0), L1 instruction misses (its cache simulator), ns (timeit)")
    print(f"  {'producer':20s} {'protocol':>8s} {'kernarg':>8s} {'adds':>5s} {'ratio':>5s} "
          f"{'budget':>6s} {'PyDict_Next':>11s} | {'I1 misses: protocol':>19s} {'adds':>5s} "
          f"| {'ns: protocol':>12s} {'adds':>5s} {'ratio':>5s}")
    for label, producer in PRODUCERS.items():
        r = measure(producer)
        print(f"  {label:20s} {r['protocol']:8.0f} {r['kernarg']:8.0f} {r['adds']:5.0f} "
              f"{r['adds'] / r['protocol']:5.0%} {r['budget']:6.0f} {r['dict_pass']:11.0f} | "
              f"{r['protocol_i1']:19.1f} {r['adds_i1']:5.1f} | {r['protocol_ns']:12.0f} "
              f"{r['adds_ns']:5.0f} {r['adds_ns'] / r['protocol_ns']:5.0%}")


if __name__ == "__main__":
    main()
