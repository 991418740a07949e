"""Host cost of giving a graph's kernel node new arguments: kernarg's KernelNode.set_exec_args
against cuda.core's own update of an instantiated graph's kernel node, side by side in one
process, each in batches, so that a cost that grows with the number of updates shows.

    python benchmarks/graph_nodes.py                          # on a GPU machine
    tools/fakecuda/run.sh python benchmarks/graph_nodes.py    # host cost only, no GPU

Written in session 52 with Kernel.graph_node. Against tools/fakecuda on the development VM,
set_exec_args took ~0.9 us a call with an int exec handle and ~2.0 us with a cuda.core Graph,
flat over 10,000 calls; cuda.core 1.2.2's update took 1.3 us a call over its first 2,000 calls
and 7.3 us over calls 10,001-12,000, holding a new reference to its args tuple at each call.
The fake driver does no work for either: on a GPU the driver's own time adds to both.
set_args is slow against the fake (~10-14 us) for its own reason: the fake runs each released
user object's destructor on a thread it starts for it. gpu_session.sh runs this script into
its log.
"""
import sys
import time

import numpy as np

import kernarg

SRC = r"""extern "C" __global__ void fill(float* x, float v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = v; }"""
BATCH = 2000
BATCHES = 6


def batches(label, fn):
    times = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - t0) / BATCH * 1e9)
    print(f"{label:48s} " + " ".join(f"{t:7.0f}" for t in times) + "  ns a call, by batch")


def main():
    try:
        from cuda.core import Device, LaunchConfig, Program, ProgramOptions
        from cuda.core.graph import GraphDefinition
    except ImportError as exc:
        sys.exit(f"needs cuda.core with cuda.core.graph.GraphDefinition (1.x): {exc}")
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    buf = dev.memory_resource.allocate(4 * 32, stream=stream)
    stream.sync()
    print(f"{BATCHES} batches of {BATCH} calls; {dev.name}; cuda.core "
          f"{__import__('cuda.core').core.__version__}; kernarg {kernarg.__version__}")

    core_kernel = Program(SRC, "c++", ProgramOptions(arch=f"sm_{dev.arch}")).compile(
        "cubin").get_kernel("fill")
    config = LaunchConfig(grid=1, block=32)
    definition = GraphDefinition()
    core_node = definition.launch(config, core_kernel, buf, np.float32(1.0), np.int32(32))
    core_exec = definition.instantiate()[core_node]
    args = (buf, np.float32(2.0), np.int32(32))
    before = sys.getrefcount(args)
    batches("cuda.core graph[node].update(...)",
            lambda: core_exec.update(config=config, kernel=core_kernel, args=args))
    print(f"{'  references to its args tuple gained':48s} {sys.getrefcount(args) - before}")

    k = kernarg.Kernel.from_source(SRC, "fill")
    definition = GraphDefinition()
    node = k.graph_node(definition, 1, 32, buf, 1.0, 32)
    graph = definition.instantiate()
    handle = int(graph.handle)
    value = 2.0
    before = sys.getrefcount(value)
    batches("kernarg node.set_exec_args(int handle, ...)",
            lambda: node.set_exec_args(handle, buf, value, 32))
    batches("kernarg node.set_exec_args(cuda.core Graph, ...)",
            lambda: node.set_exec_args(graph, buf, value, 32))
    print(f"{'  references to its float argument gained':48s} {sys.getrefcount(value) - before}")
    batches("kernarg node.set_args(...) (the graph's node)", lambda: node.set_args(buf, value, 32))


if __name__ == "__main__":
    main()
