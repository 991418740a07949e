"""What the driver makes of edges with data into one kernel node, and of a kernel's own cluster
size in the cluster occupancy queries: printed, for a GPU session's log (needs a GPU).

    python tools/probes/graph_edges.py

Session 85 (an H200, driver 13.0) saw two things tools/fakecuda did not model:
- a node given a programmatic edge (pdl=True after=[d]) and a launch-order edge
  (after_launch=[a]) listed the launch-order edge with from_port 1 (programmatic), not 2;
- cuOccupancyMaxPotentialClusterSize answered 8 for a kernel of __cluster_dims__(2, 1, 1),
  where cuda.h says the answer reflects the kernel's required size.
This probe shows which edges into one node keep their ports: added by kernarg's graph_node,
and added by hand through cuGraphAddDependencies (its 12.3 ABI, with edge data), in one call
and one by one, in either order. Each line: the case, then the edges as the driver lists them
(from -> to, from_port, type) or the error.
"""
import ctypes
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "gpu"))

from test_launch_gpu import CLUSTER_DIMS, WRITE, DeviceArray, _EdgeData, check, driver  # noqa: E402

import kernarg  # noqa: E402

DEFAULT, PROGRAMMATIC, LAUNCH_ORDER = 0, 1, 2


def _proc(name, signature):
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuGetProcAddress_v2.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p]
    fn = ctypes.c_void_p()
    err = lib.cuGetProcAddress_v2(name.encode(), ctypes.byref(fn), 12030, 0, None)
    assert err == 0, (name, err)
    return signature(fn.value)


GET = _proc("cuGraphGetEdges", ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
    ctypes.POINTER(ctypes.c_size_t)))
ADD = _proc("cuGraphAddDependencies", ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
    ctypes.c_size_t))


def edges(graph, names):
    count = ctypes.c_size_t(0)
    err = GET(int(graph), None, None, None, ctypes.byref(count))
    if err:
        return f"cuGraphGetEdges (count) error {err}"
    if count.value == 0:
        return "no edges"
    n = count.value
    sources, targets = (ctypes.c_void_p * n)(), (ctypes.c_void_p * n)()
    data = (_EdgeData * n)()
    err = GET(int(graph), sources, targets, data, ctypes.byref(count))
    if err:
        return f"cuGraphGetEdges error {err}"
    return ", ".join(sorted(f"{names.get(sources[i], '?')}->{names.get(targets[i], '?')} "
                            f"({data[i].from_port},{data[i].type})"
                            for i in range(count.value)))


def add(graph, triples):
    """cuGraphAddDependencies of [(from, to, from_port), ...] in one call; the type is
    programmatic wherever the port is not the default."""
    n = len(triples)
    sources, targets = (ctypes.c_void_p * n)(), (ctypes.c_void_p * n)()
    data = (_EdgeData * n)()
    for i, (a, b, port) in enumerate(triples):
        sources[i], targets[i] = a, b
        data[i].from_port, data[i].type = port, (1 if port else 0)
    return ADD(int(graph), sources, targets, data, n)


def main():
    check(driver.cuInit(0))
    dev = check(driver.cuDeviceGet(0))
    check(driver.cuCtxSetCurrent(check(driver.cuDevicePrimaryCtxRetain(dev))))
    print("driver", check(driver.cuDriverGetVersion()))
    k = kernarg.Kernel.from_source(WRITE, "fill")
    out = DeviceArray(4 * 32, typestr="<f4")

    def nodes(graph, count):
        made = [k.graph_node(graph, 1, 32, out, float(i), 32) for i in range(count)]
        return made, {m.handle: "abcdefgh"[i] for i, m in enumerate(made)}

    # Through kernarg's graph_node, as the tests make them.
    for label, kwargs in [
            ("after_launch=[a]", dict(after_launch=[0])),
            ("after=[b] pdl", dict(after=[1], pdl=True)),
            ("after=[b] pdl, after_launch=[a]", dict(after=[1], pdl=True, after_launch=[0])),
            ("after=[a, b], after_launch=[c]", dict(after=[0, 1], after_launch=[2])),
            ("after_launch=[a, b]", dict(after_launch=[0, 1])),
            ("after=[a, b] pdl", dict(after=[0, 1], pdl=True))]:
        graph = check(driver.cuGraphCreate(0))
        made, names = nodes(graph, 3)
        kw = {key: ([made[i] for i in value] if isinstance(value, list) else value)
              for key, value in kwargs.items()}
        try:
            z = k.graph_node(graph, 1, 32, out, 9.0, 32, **kw)
            names[z.handle] = "z"
            print(f"graph_node {label:36s} {edges(graph, names)}")
        except kernarg.CudaError as exc:
            print(f"graph_node {label:36s} refused: {exc}")

    # The graph of test_a_node_takes_plain_programmatic_and_launch_order_edges_together, where
    # session 85 saw e's launch-order edge from a listed as programmatic: a to e is also a path
    # through d there. Then the same edges into e with no path from a to d.
    for label, first in [("d after=[a, b], after_launch=[c]", dict(after=[0, 1], after_launch=[2])),
                         ("d after=[b], after_launch=[c]", dict(after=[1], after_launch=[2])),
                         ("d after=[b]", dict(after=[1]))]:
        graph = check(driver.cuGraphCreate(0))
        made, names = nodes(graph, 3)
        d = k.graph_node(graph, 1, 32, out, 3.0, 32,
                         **{key: [made[i] for i in value] for key, value in first.items()})
        names[d.handle] = "d"
        try:
            e = k.graph_node(graph, 1, 32, out, 4.0, 32, after=[d], pdl=True,
                             after_launch=[made[0]])
            names[e.handle] = "e"
            print(f"{label:30s} e after=[d] pdl, after_launch=[a]: {edges(graph, names)}")
        except kernarg.CudaError as exc:
            print(f"{label:30s} e refused: {exc}")

    # By hand: z without dependencies, then its edges with data.
    for label, calls in [
            ("one call: b prog, a order", [[(1, PROGRAMMATIC), (0, LAUNCH_ORDER)]]),
            ("one call: a order, b prog", [[(0, LAUNCH_ORDER), (1, PROGRAMMATIC)]]),
            ("two calls: b prog; a order", [[(1, PROGRAMMATIC)], [(0, LAUNCH_ORDER)]]),
            ("two calls: a order; b prog", [[(0, LAUNCH_ORDER)], [(1, PROGRAMMATIC)]]),
            ("one call: a order, b order", [[(0, LAUNCH_ORDER), (1, LAUNCH_ORDER)]]),
            ("one call: a prog, b prog", [[(0, PROGRAMMATIC), (1, PROGRAMMATIC)]]),
            ("one call: a default, b order", [[(0, DEFAULT), (1, LAUNCH_ORDER)]]),
            ("one call: a order, b default", [[(0, LAUNCH_ORDER), (1, DEFAULT)]])]:
        graph = check(driver.cuGraphCreate(0))
        made, names = nodes(graph, 3)
        z = k.graph_node(graph, 1, 32, out, 9.0, 32)
        names[z.handle] = "z"
        errs = [add(graph, [(made[i].handle, z.handle, port) for i, port in call])
                for call in calls]
        print(f"by hand {label:39s} errors {errs}: {edges(graph, names)}")

    # cuGraphGetEdges of a graph with no edges, given arrays of no entries (the tests' helper
    # did that and got an error back).
    graph = check(driver.cuGraphCreate(0))
    nodes(graph, 1)
    count = ctypes.c_size_t(0)
    empty = (ctypes.c_void_p * 0)()
    print("cuGraphGetEdges of no edges, arrays of 0 entries:",
          GET(int(graph), empty, empty, (_EdgeData * 0)(), ctypes.byref(count)),
          "; NULL arrays:", GET(int(graph), None, None, None, ctypes.byref(count)))

    # A kernel's own cluster size against the occupancy queries.
    paired = kernarg.Kernel.from_source(CLUSTER_DIMS, "paired")
    a = driver.CUfunction_attribute
    print("paired required cluster", [check(driver.cuFuncGetAttribute(
        getattr(a, f"CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_{axis}"), paired.handle))
        for axis in ("WIDTH", "HEIGHT", "DEPTH")])
    for cluster in (None, 2, 4):
        try:
            size = paired.max_potential_cluster_size(4, 32) if cluster is None else None
            cfg = driver.CUlaunchConfig()
            cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = 4, 1, 1
            cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
            if cluster is not None:
                attr = driver.CUlaunchAttribute()
                attr.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
                attr.value.clusterDim.x, attr.value.clusterDim.y = cluster, 1
                attr.value.clusterDim.z = 1
                cfg.attrs, cfg.numAttrs = [attr], 1
            raw = driver.cuOccupancyMaxPotentialClusterSize(paired.handle, cfg)
            active = driver.cuOccupancyMaxActiveClusters(paired.handle, cfg)
            print(f"paired cluster={cluster}: kernarg {size}, driver MaxPotentialClusterSize "
                  f"{raw}, MaxActiveClusters {active}")
        except Exception as exc:    # noqa: BLE001 - a probe: print whatever happened
            print(f"paired cluster={cluster}: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
